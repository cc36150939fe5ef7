//! perf.data files (`perf record`).
//!
//! Layout: a `PERFILE2` header pointing at the attribute table, the data
//! section and a table of feature sections (one (offset, size) pair per set
//! feature bit, after the data). Records in the data section are
//! `{type u32, misc u16, size u16}` plus a body; a `SAMPLE` body holds the
//! fields its attribute's `sample_type` selects, in a fixed order.
//!
//! Tracepoint samples carry the ftrace record in their `RAW` field; it is
//! decoded with the event formats perf stores in its tracing-data feature
//! (the same layout as a trace.dat header) into the **same tables and
//! schemas as trace.dat** (a perf `sched_switch` and a trace-cmd one are
//! the same table). Other samples (hardware counters) go to
//! `perf_sample`. perf writes per-CPU buffers in *rounds*: the **sorter**
//! (`RoundSorter`) keeps the current round's samples and, at each
//! `FINISHED_ROUND`, sorts them and emits everything up to the previous
//! round's latest time, so memory is one round, not the file.

mod header;
mod sample;
mod sorter;
mod tables;

pub use header::Attr;

use crate::error::{ReadError, ReadResult};
use crate::input::open_sized;
use crate::mapped::MappedRange;
use crate::sink::EventSink;
use header::read_header;
use sample::{sample_time, IdIndex};
use sorter::RoundSorter;
use std::collections::BTreeMap;
use std::path::Path;
use tables::Tables;

const SAMPLE: u32 = 9;
const LOST: u32 = 2;
const FINISHED_ROUND: u32 = 68;
pub(super) const TRACEPOINT: u32 = 2;

/// What a read found.
#[derive(Clone, Debug, Default)]
pub struct PerfSummary {
    /// Rows per table.
    pub rows: BTreeMap<String, u64>,
    /// Records by type.
    pub records: BTreeMap<u32, u64>,
    /// LOST records' lost counts.
    pub lost: u64,
    /// Attributes (name, type, config).
    pub attrs: Vec<(String, u32, u64)>,
    /// Hostname feature.
    pub hostname: Option<String>,
    /// OS release feature.
    pub osrelease: Option<String>,
    /// CPUs online.
    pub cpus: u32,
    /// First and last sample time (ns).
    pub time_range: Option<(i64, i64)>,
    /// Warnings.
    pub warnings: Vec<String>,
    /// What the read skipped, guessed or re-attributed, one line each
    /// with where (issue 42: any of it makes the import exit 1).
    pub problems: Vec<String>,
    /// Samples skipped (an id no attribute has, a sample shorter than its
    /// sample_type): lost events perf did not count.
    pub skipped_samples: u64,
    /// Bytes of the data section the header promised that the file does
    /// not hold whole (a truncated file).
    pub truncated_bytes: u64,
}

impl PerfSummary {
    /// A warning that is also a problem (see `problems`).
    pub(crate) fn problem(&mut self, line: String) {
        self.warnings.push(line.clone());
        self.problems.push(line);
    }
}

/// How far ahead of the record being framed its bytes are prefetched:
/// each record's size gives the next one's place, a chain of loads the
/// hardware prefetcher loses at every page (2 KiB: 0.92 of the read's CPU
/// time on one core; 512 B 0.95, 8 KiB 0.93).
const PREFETCH_AHEAD: usize = 2048;

#[inline(always)]
fn prefetch(bytes: &[u8], at: usize) {
    #[cfg(target_arch = "x86_64")]
    if at < bytes.len() {
        // SAFETY: a hint on an address inside the slice; it reads nothing
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                bytes.as_ptr().add(at).cast(),
            )
        }
    }
}

/// Read `path` into `sink`.
pub fn read_perfdata<S: EventSink + ?Sized>(
    path: &Path,
    sink: &mut S,
    progress: &mut dyn FnMut(u64, u64) -> bool,
) -> ReadResult<PerfSummary> {
    let (f, size) = open_sized(path)?;
    let mut s = PerfSummary::default();
    let h = read_header(&f, path, size, &mut s)?;
    let (attrs, data_off, data_len) = (&h.attrs, h.data_off, h.data_len);
    let mut tables = Tables::new(&h.formats, h.long, path, &mut s);
    sink.set_instances(&[String::new()]);
    let ids = IdIndex::new(&h.id_to_attr);
    let mut sorter = RoundSorter::default();
    let mut by_type = [0u64; 128];
    let mut round_max = 0u64;
    let mut prev_round_max = 0u64;
    let len = data_len.min(size.saturating_sub(data_off)) as usize;
    let mut data = MappedRange::new(&f, path, data_off, len)?;
    let mut pos = 0usize;
    // the data section ends inside a record (warned about where it is met)
    let mut cut_record = false;
    // samples whose id names no attribute: how many, and the first's offset
    let (mut orphans, mut first_orphan) = (0u64, 0u64);
    let mut last_progress = 0;
    while pos + 8 <= len {
        let bytes = data.bytes();
        prefetch(bytes, pos + PREFETCH_AHEAD);
        let rtype = u32::from_le_bytes(bytes[pos..pos + 4].try_into().expect("4"));
        let rsize = u16::from_le_bytes(bytes[pos + 6..pos + 8].try_into().expect("2")) as usize;
        let at = data_off + pos as u64;
        if rsize < 8 {
            return Err(ReadError::corrupt(
                path,
                at,
                "corrupt-record",
                format!("record of size {rsize}"),
            ));
        }
        if pos + rsize > len {
            s.problem(format!(
                "{}: at byte {at}: last record cut off; file truncated",
                path.display()
            ));
            cut_record = true;
            break;
        }
        let rec = &bytes[pos..pos + rsize];
        match by_type.get_mut(rtype as usize) {
            Some(n) => *n += 1,
            None => *s.records.entry(rtype).or_default() += 1,
        }
        match rtype {
            SAMPLE => {
                let (a, t) = sample_time(rec, attrs, &ids);
                if a == u32::MAX {
                    // A damaged id (or attribute table) would drop these
                    // silently (issue 42: 526 of 1,405 sched_switch events
                    // imported, exit 0): counted, and said where.
                    if orphans == 0 {
                        first_orphan = at;
                    }
                    orphans += 1;
                } else {
                    round_max = round_max.max(t);
                    sorter.push(t, a, pos, rsize);
                }
            }
            LOST if rec.len() >= 24 => {
                s.lost += u64::from_le_bytes(rec[16..24].try_into().expect("8"))
            }
            FINISHED_ROUND => {
                sorter.flush(prev_round_max, |off, n, a| {
                    tables.emit(
                        &bytes[off..off + n],
                        data_off + off as u64,
                        attrs.get(a as usize),
                        sink,
                        &mut s,
                    )
                })?;
                prev_round_max = round_max;
                data.release_before(sorter.oldest().unwrap_or(pos));
            }
            _ => {}
        }
        pos += rsize;
        if pos - last_progress > (8 << 20) {
            last_progress = pos;
            if !progress(pos as u64, data_len) {
                return Err(ReadError::Interrupted);
            }
        }
    }
    let bytes = data.bytes();
    sorter.flush(u64::MAX, |off, n, a| {
        tables.emit(
            &bytes[off..off + n],
            data_off + off as u64,
            attrs.get(a as usize),
            sink,
            &mut s,
        )
    })?;
    for (t, n) in by_type.iter().enumerate().filter(|(_, &n)| n > 0) {
        *s.records.entry(t as u32).or_default() += n;
    }
    tables.count_rows(&mut s);
    // the cut first: what it took (the feature sections after the data)
    // explains the lines after it
    s.truncated_bytes = data_len.saturating_sub(pos as u64);
    if s.truncated_bytes > 0 && !cut_record {
        s.problem(format!(
            "{}: at byte {}: file truncated: {} bytes of the data section missing",
            path.display(),
            data_off + pos as u64,
            s.truncated_bytes
        ));
    }
    tables.report(path, &mut s);
    if orphans > 0 {
        *s.records.entry(u32::MAX).or_default() += orphans;
        s.skipped_samples += orphans;
        s.problem(format!(
            "{}: at byte {first_orphan}: {orphans} samples whose id no event attribute has skipped (the first there): the attribute table or the samples are damaged",
            path.display()
        ));
    }
    progress(data_len, data_len);
    Ok(s)
}
