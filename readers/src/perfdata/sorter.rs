//! perf writes each CPU's buffer in turn, so samples arrive in per-CPU
//! order within a *round*; a `FINISHED_ROUND` record ends one. This sorts
//! them into time order holding one round, not the file.

use crate::error::ReadResult;

/// Samples waiting for their round to end, sorted by (time, arrival) when
/// it does. Samples of one round arrive per-CPU ordered, so the sort is of
/// a few sorted runs. A sample is held as its place in the data section
/// (which is mapped), not copied.
///
/// perf's rule: at a round's end, every sample up to the previous round's
/// latest time can go. A file that breaks it (rounds that overlap) only
/// keeps its samples longer.
#[derive(Default)]
pub(super) struct RoundSorter {
    /// (time, arrival, offset, length, attr index)
    pending: Vec<(u64, u64, usize, u32, u32)>,
    seq: u64,
}

impl RoundSorter {
    /// A sample of `len` bytes at `offset` arrived.
    pub(super) fn push(&mut self, time: u64, attr: u32, offset: usize, len: usize) {
        self.pending
            .push((time, self.seq, offset, len as u32, attr));
        self.seq += 1;
    }

    /// Emit `(offset, length, attr)`, in time order, of every sample at
    /// or before `limit`; keep the rest.
    pub(super) fn flush(
        &mut self,
        limit: u64,
        mut emit: impl FnMut(usize, usize, u32) -> ReadResult<()>,
    ) -> ReadResult<()> {
        // Stable sort: it finds and merges the per-CPU runs (the unstable
        // one does not); the keys are unique, so the order is the same.
        self.pending.sort();
        let k = self.pending.partition_point(|&(t, ..)| t <= limit);
        for &(_, _, off, len, attr) in &self.pending[..k] {
            emit(off, len as usize, attr)?;
        }
        self.pending.drain(..k);
        Ok(())
    }

    /// The first offset a kept sample starts at, if any is kept.
    pub(super) fn oldest(&self) -> Option<usize> {
        self.pending.iter().map(|p| p.2).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each sample's offset is its time, which the test reads back.
    fn flushed(s: &mut RoundSorter, limit: u64) -> Vec<usize> {
        let mut out = Vec::new();
        s.flush(limit, |off, _, _| {
            out.push(off);
            Ok(())
        })
        .unwrap();
        out
    }

    #[test]
    fn rounds_emit_in_time_order_and_keep_what_is_newer() {
        let mut s = RoundSorter::default();
        // round 1: two CPUs' runs
        for t in [3, 5, 9, 1, 4, 10] {
            s.push(t as u64, 0, t, 2);
        }
        assert_eq!(flushed(&mut s, 0), Vec::<usize>::new());
        assert_eq!(s.oldest(), Some(1));
        // round 2 arrives; the end of round 2 flushes up to round 1's latest (10)
        for t in [11, 6, 12] {
            s.push(t as u64, 0, t, 1);
        }
        assert_eq!(flushed(&mut s, 10), vec![1, 3, 4, 5, 6, 9, 10]);
        assert_eq!(s.oldest(), Some(11));
        s.push(13, 0, 13, 1);
        assert_eq!(flushed(&mut s, 12), vec![11, 12]);
        // a file that breaks the rule: round 3's flush limit is below a
        // sample kept from before, which must survive another round
        for t in [14, 2] {
            s.push(t as u64, 0, t, 1);
        }
        assert_eq!(flushed(&mut s, 1), Vec::<usize>::new());
        s.push(15, 0, 15, 1);
        assert_eq!(flushed(&mut s, 13), vec![2, 13]);
        assert_eq!(flushed(&mut s, u64::MAX), vec![14, 15]);
        assert_eq!(s.oldest(), None);
    }
}
