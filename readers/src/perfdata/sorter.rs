//! perf writes each CPU's buffer in turn, so samples arrive in per-CPU
//! order within a *round*; a `FINISHED_ROUND` record ends one. This sorts
//! them into time order holding one round, not the file.

use crate::error::ReadResult;

/// Samples waiting for their round to end, sorted by (time, arrival) when
/// it does. Samples of one round arrive per-CPU ordered, so the sort is of
/// a few sorted runs.
///
/// perf's rule: at a round's end, every sample up to the previous round's
/// latest time can go. All samples that arrived before the previous round
/// ended are at or before that time, so what is kept at a flush arrived in
/// the round just ended: its bytes stay in that round's arena (`older`)
/// until the next flush, which emits all of them, and new arrivals go to a
/// fresh arena (`newer`). No sample's bytes are copied twice.
#[derive(Default)]
pub(super) struct RoundSorter {
    /// the arena of samples that arrived before the last round's end
    older: Vec<u8>,
    /// the arena of the current round's samples
    newer: Vec<u8>,
    /// (time, arrival, in newer?, offset, length, attr index)
    pending: Vec<(u64, u64, bool, usize, usize, u32)>,
    seq: u64,
}

impl RoundSorter {
    pub(super) fn push(&mut self, time: u64, attr: u32, rec: &[u8]) {
        self.pending
            .push((time, self.seq, true, self.newer.len(), rec.len(), attr));
        self.seq += 1;
        self.newer.extend_from_slice(rec);
    }

    /// Emit, in time order, every sample at or before `limit`; keep the
    /// rest (which must all be of the current round, or `limit` is the end).
    pub(super) fn flush(
        &mut self,
        limit: u64,
        mut emit: impl FnMut(&[u8], u32) -> ReadResult<()>,
    ) -> ReadResult<()> {
        // Stable sort: it finds and merges the per-CPU runs (the unstable
        // one does not); the keys are unique, so the order is the same.
        self.pending.sort();
        let k = self.pending.partition_point(|&(t, ..)| t <= limit);
        for &(_, _, newer, off, len, attr) in &self.pending[..k] {
            let arena = if newer { &self.newer } else { &self.older };
            emit(&arena[off..off + len], attr)?;
        }
        self.pending.drain(..k);
        // A sample kept from an older arena would break the rule above (a
        // file whose rounds overlap): keep its bytes by copying them over.
        if self.pending.iter().any(|&(_, _, newer, ..)| !newer) {
            let mut arena = Vec::with_capacity(self.newer.len());
            for e in &mut self.pending {
                let from = if e.2 { &self.newer } else { &self.older };
                let off = arena.len();
                arena.extend_from_slice(&from[e.3..e.3 + e.4]);
                (e.2, e.3) = (true, off);
            }
            self.newer = arena;
        }
        for e in &mut self.pending {
            e.2 = false;
        }
        std::mem::swap(&mut self.older, &mut self.newer);
        self.newer.clear();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flushed(s: &mut RoundSorter, limit: u64) -> Vec<u8> {
        let mut out = Vec::new();
        s.flush(limit, |r, _| {
            out.push(r[0]);
            Ok(())
        })
        .unwrap();
        out
    }

    #[test]
    fn rounds_emit_in_time_order_and_keep_what_is_newer() {
        let mut s = RoundSorter::default();
        // round 1: two CPUs' runs; the record's byte is its time
        for t in [3u8, 5, 9, 1, 4, 10] {
            s.push(t as u64, 0, &[t, 0xAA]);
        }
        assert_eq!(flushed(&mut s, 0), Vec::<u8>::new());
        // round 2 arrives; the end of round 2 flushes up to round 1's latest (10)
        for t in [11u8, 6, 12] {
            s.push(t as u64, 0, &[t]);
        }
        assert_eq!(flushed(&mut s, 10), vec![1, 3, 4, 5, 6, 9, 10]);
        for t in [13u8] {
            s.push(t as u64, 0, &[t]);
        }
        assert_eq!(flushed(&mut s, 12), vec![11, 12]);
        // a file that breaks the rule: round 3's flush limit is below a
        // sample kept from before, which must survive another round
        for t in [14u8, 2] {
            s.push(t as u64, 0, &[t]);
        }
        assert_eq!(flushed(&mut s, 1), Vec::<u8>::new());
        s.push(15, 0, &[15]);
        assert_eq!(flushed(&mut s, 13), vec![2, 13]);
        assert_eq!(flushed(&mut s, u64::MAX), vec![14, 15]);
    }
}
