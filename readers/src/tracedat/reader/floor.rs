//! The import's floor (issue 47): how fast the same file goes through only
//! the work any import of it must do, measured with the reader's own code.
//!
//! * [`Stage::Decompress`]: every CPU stream's pages read from the file
//!   (v7: every chunk read and decompressed), then dropped;
//! * [`Stage::Decode`]: that, then every page's header and every record
//!   walked (the read loop's own [`Stream`] stepping), each record's event
//!   id looked up, its timestamp scaled, its pid and own fields decoded
//!   into plain values ([`FieldDecoder::fold`](crate::ftrace::field::FieldDecoder::fold):
//!   the same rules as the import's decode, no column written), stream
//!   after stream: no merge, no rows, no Parquet; bprint's text is not
//!   rendered;
//! * [`Stage::Rows`]: the whole read ([`read_tracedat`]: the merge by
//!   timestamp and the rows built in each table's batch) into a sink that
//!   empties every full batch ([`DiscardSink`]): everything but Parquet.
//!
//! Each stage includes the header and metadata read the import does first.

use super::{plan_events, read_tracedat, summary_of_header, Clock, ReadOptions, Streams};
use crate::batch::RowBatch;
use crate::error::ReadResult;
use crate::sink::{EventSink, MemorySink, TableId, TableSpec};
use crate::tracedat::header::read_metadata_with;
use std::path::Path;

/// What a floor pass does ([module docs](self)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Read and decompress every page.
    Decompress,
    /// ... and decode every record's fields into plain values.
    Decode,
    /// The whole read, merge and row batches included, into a sink that
    /// discards them.
    Rows,
}

impl Stage {
    /// The stage named `name` (`decompress`, `decode`, `rows`).
    pub fn parse(name: &str) -> Option<Stage> {
        Some(match name {
            "decompress" => Stage::Decompress,
            "decode" => Stage::Decode,
            "rows" => Stage::Rows,
            _ => return None,
        })
    }
}

/// What a floor pass went through.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Floor {
    /// Records of known events (0 for [`Stage::Decompress`], which does
    /// not look inside pages).
    pub records: u64,
    /// Pages handed out by the streams.
    pub pages: u64,
    /// Bytes of those pages (decompressed).
    pub bytes: u64,
    /// A fold of every value decoded, so none of the work can be left
    /// out by the compiler (meaningless otherwise).
    pub check: u64,
}

/// Run `stage` over the trace.dat at `path`.
pub fn tracedat_floor(path: &Path, stage: Stage) -> ReadResult<Floor> {
    if stage == Stage::Rows {
        let mut sink = DiscardSink::default();
        let s = read_tracedat(path, &mut sink, &ReadOptions::default(), &mut |_, _| true)?;
        return Ok(Floor {
            records: s.records,
            pages: s
                .stats
                .get(crate::tracedat::stats::PAGES)
                .copied()
                .unwrap_or(0),
            bytes: 0,
            check: sink.rows,
        });
    }
    let meta = read_metadata_with(path, None)?;
    let mut s = summary_of_header(path, &meta);
    let names: Vec<String> = meta.buffers.iter().map(|b| b.name.clone()).collect();
    let mut streams = Streams::open(&meta, names, &mut s)?;
    let mut f = Floor::default();
    if stage == Stage::Decompress {
        for st in &mut streams.list {
            while st.source.next_page(&mut streams.file)? {
                f.pages += 1;
                f.bytes += st.source.page().len() as u64;
                f.check ^= st.source.page().first().copied().unwrap_or(0) as u64;
            }
        }
        return Ok(f);
    }
    let plans = plan_events(&meta, &mut s);
    let clock = Clock {
        tsc: meta.tsc2nsec,
        offset: meta.ts_offset,
    };
    let endian = meta.endian;
    for i in 0..streams.list.len() {
        while streams.advance(i, &mut s)?.is_some() {
            let st = &streams.list[i];
            let rec = st.cur.expect("advanced to a record");
            let payload = &st.source.page()[rec.start..rec.end];
            let id = match payload {
                [a, b, ..] => endian.u16([*a, *b]) as usize,
                _ => usize::MAX,
            };
            let Some(plan) = plans.get(id).and_then(Option::as_ref) else {
                continue;
            };
            let ts = clock.to_ns(rec.ts);
            let pid = endian.uint(payload, plan.pid_offset, 4).unwrap_or(u64::MAX);
            f.check = f.check.rotate_left(7)
                ^ (ts as u64)
                ^ (pid << 32)
                ^ st.cpu as u64
                ^ plan.decoder.fold(payload);
            f.records += 1;
        }
        f.pages += streams.list[i].pages;
    }
    Ok(f)
}

/// An [`EventSink`] that keeps one batch per table and empties it each
/// time it holds `4096` rows: the reader's whole work, none of storage's.
/// Tables are declared as [`MemorySink`] (and the import's Parquet sink)
/// declare them.
#[derive(Default)]
pub struct DiscardSink {
    tables: MemorySink,
    /// Rows taken.
    pub rows: u64,
}

const DISCARD_BATCH_ROWS: usize = 4096;

impl EventSink for DiscardSink {
    fn set_instances(&mut self, _names: &[String]) {}

    fn declare_table(&mut self, spec: &TableSpec) -> Result<TableId, String> {
        self.tables.declare_table(spec)
    }

    #[inline]
    fn batch(&mut self, table: TableId) -> &mut RowBatch {
        self.tables.batch(table)
    }

    #[inline]
    fn row_done(&mut self, table: TableId) -> Result<(), String> {
        self.rows += 1;
        let b = self.tables.batch(table);
        if b.len() >= DISCARD_BATCH_ROWS {
            b.settle();
            b.clear();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sample traces: generated (v6) and recorded on a lab host (v7,
    /// zstd).
    fn samples() -> Vec<std::path::PathBuf> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sample-traces");
        ["kvm-heavy-spin.dat", "lab-kvm-sched/trace.dat"]
            .iter()
            .map(|p| root.join(p))
            .filter(|p| p.exists())
            .collect()
    }

    #[test]
    fn every_stage_sees_the_records_the_import_reads() {
        for path in samples() {
            let mut sink = crate::sink::MemorySink::default();
            let s =
                read_tracedat(&path, &mut sink, &ReadOptions::default(), &mut |_, _| true).unwrap();
            let pages = s
                .stats
                .get(crate::tracedat::stats::PAGES)
                .copied()
                .unwrap_or(0);
            let d = tracedat_floor(&path, Stage::Decompress).unwrap();
            let e = tracedat_floor(&path, Stage::Decode).unwrap();
            let r = tracedat_floor(&path, Stage::Rows).unwrap();
            assert_eq!((d.pages, e.pages, r.pages), (pages, pages, pages));
            assert_eq!(
                (e.records, r.records, r.check),
                (s.records, s.records, s.records)
            );
            assert!(d.bytes > 0 && d.records == 0);
        }
    }
}
