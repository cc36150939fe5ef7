//! The trace.dat read loop: per-CPU streams, the sorter, and the parser.
//!
//! **Sorter.** Within one CPU of one buffer the ring buffer is already in
//! timestamp order, so the global order is a k-way merge: a binary heap
//! holds the head record of every (instance, cpu) stream, keyed by
//! (timestamp, stream index); ties go to the lower stream index (top-level
//! buffer first, then CPU order), which makes output deterministic. Memory
//! is one page batch (or one compressed chunk) per stream. Should a stream
//! ever step back in time (a corrupted or clock-warped buffer), the rows are
//! still written, the `ts_out_of_order` counter says so, and the importer
//! re-sorts the affected tables.
//!
//! **Parser.** Each record's `common_type` selects its event format; the
//! event's own fields are decoded with a per-event [`FieldDecoder`] and sent
//! to the sink. `bprint` additionally gets its text rendered from the
//! printk formats stored in the file.
//!
//! [`read_tracedat`] runs these in turn: the summary from the header
//! (`summary_of_header`), a plan per event (`plan_events`), the streams
//! (`Streams::open`), the loop (`merge_and_decode`: `Merge` picks each
//! record, `Parser::record` writes its row), then what the read found
//! into the summary (`Parser::finish`, `Streams::finish`,
//! `report_truncation`).

use super::header::{read_metadata_with, BufferInfo, TraceDatMeta, Tsc2Nsec};
use super::pages::{read_ahead_for, PageSource, TraceFile};
use super::records::{Missed, PageCursor, Record};
use super::stats;
use crate::batch::RowBatch;
use crate::bytes::Endian;
use crate::error::{ReadError, ReadResult};
use crate::ftrace::field::{FieldDecoder, FieldKind};
use crate::ftrace::format::EventFormat;
use crate::ftrace::printk;
use crate::sink::{ColumnSpec, ColumnType, EventSink, RowHeader, Stats, TableId, TableSpec, Value};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::path::Path;

pub mod floor;

/// Options of a read.
#[derive(Clone, Debug, Default)]
pub struct ReadOptions {
    /// Call progress at most every this many pages (default 256).
    pub progress_every_pages: u64,
    /// Bytes of decompressed data the read may hold at once (None:
    /// [`crate::input::default_budget`] of the file); past it the read
    /// stops with [`ReadError::OverBudget`].
    pub max_memory: Option<u64>,
}

/// Lost-event accounting of one CPU.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LostEvents {
    /// Events the kernel counted as lost.
    pub count: u64,
    /// Pages flagged as preceded by lost events of unknown number.
    pub unknown_pages: u64,
}

/// A field with no column type of its own, stored as its raw bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawField {
    /// Event (table) name.
    pub event: String,
    /// Field name.
    pub field: String,
    /// Its C type.
    pub c_type: String,
    /// Why it has no column type of its own.
    pub reason: String,
}

/// What a read found, for capture.json.
#[derive(Clone, Debug, Default)]
pub struct TraceDatSummary {
    /// The file read.
    pub path: String,
    /// File version.
    pub version: u32,
    /// "little" or "big".
    pub endian: &'static str,
    /// User-space long size from the file header.
    pub user_long_size: u8,
    /// Kernel long size (from header_page).
    pub kernel_long_size: usize,
    /// Default page size.
    pub page_size: u32,
    /// Compression algorithm.
    pub compression: String,
    /// CPU count.
    pub cpus: u32,
    /// Trace clock.
    pub clock: String,
    /// uname.
    pub uname: Option<String>,
    /// trace-cmd version that wrote the file.
    pub tracecmd_version: Option<String>,
    /// Instances: (name, clock, page size, cpus with data).
    pub instances: Vec<(String, String, u32, u32)>,
    /// Rows per table.
    pub rows: BTreeMap<String, u64>,
    /// Event system of each table.
    pub systems: BTreeMap<String, String>,
    /// First and last timestamp (ns).
    pub time_range: Option<(i64, i64)>,
    /// Lost events by instance name and CPU.
    pub lost: BTreeMap<String, BTreeMap<u32, LostEvents>>,
    /// Fields stored as their raw bytes (no column type of their own).
    pub raw_fields: Vec<RawField>,
    /// Named counters.
    pub stats: Stats,
    /// Human-readable warnings.
    pub warnings: Vec<String>,
    /// What the read skipped, guessed or re-attributed, one line each
    /// with where (issue 42: any of it makes the import exit 1).
    pub problems: Vec<String>,
    /// Records skipped by the reader (unknown event ids, bad records'
    /// pages): lost events the kernel did not count.
    pub skipped_records: u64,
    /// Events a truncated file's missing data likely held: an estimate,
    /// from the events per byte of the data that was read.
    pub lost_estimate: u64,
    /// Options present.
    pub options: Vec<String>,
    /// Saved cmdlines (pid, comm).
    pub cmdlines: Vec<(i32, String)>,
    /// Bytes of ring-buffer data missing from a truncated file.
    pub truncated_bytes: u64,
    /// Records decoded.
    pub records: u64,
    /// OFFSET applied to timestamps (ns).
    pub ts_offset: i64,
    /// TSC2NSEC applied (mult, shift, offset).
    pub tsc2nsec: Option<(u32, u32, u64)>,
    /// CPUSTAT texts (per-CPU overrun statistics at record time).
    pub cpustats: Vec<String>,
    /// (table, system, print fmt) of each event type that has rows: what
    /// `trace-cmd report` prints them with (`cratrace dump`, issue 44).
    pub formats: Vec<(String, String, String)>,
}

enum Special {
    None,
    /// bprint: render column `text` from the `fmt` column's address and
    /// the packed `buf`.
    Bprint {
        fmt: usize,
        text: usize,
    },
}

struct EventPlan {
    spec: TableSpec,
    rows: u64,
    table: Option<TableId>,
    decoder: FieldDecoder,
    pid_offset: usize,
    special: Special,
}

struct Stream {
    source: PageSource,
    cursor: Option<PageCursor>,
    cur: Option<Record>,
    instance: u16,
    cpu: u32,
    /// Pages read, and those whose header decoded (into the summary at
    /// the end: counting into its maps per page cost an allocation each).
    pages: u64,
    good_pages: u64,
    lost: LostEvents,
}

fn table_names(formats: &[EventFormat]) -> Vec<String> {
    let mut count: HashMap<&str, usize> = HashMap::new();
    for f in formats {
        *count.entry(f.name.as_str()).or_default() += 1;
    }
    let mut seen: HashMap<&str, usize> = HashMap::new();
    formats
        .iter()
        .map(|f| {
            let n = seen.entry(f.name.as_str()).or_default();
            *n += 1;
            if count[f.name.as_str()] > 1 && *n > 1 {
                format!("{}__{}", f.system, f.name)
            } else {
                f.name.clone()
            }
        })
        .collect()
}

/// Event plans indexed by event id (ids are small: `common_type` is u16).
fn plan_events(meta: &TraceDatMeta, summary: &mut TraceDatSummary) -> Vec<Option<EventPlan>> {
    let names = table_names(&meta.formats);
    let long = meta.kernel_long_size;
    let max_id = meta
        .formats
        .iter()
        .map(|f| f.id as usize)
        .filter(|&i| i < 1 << 16)
        .max()
        .unwrap_or(0);
    let mut plans: Vec<Option<EventPlan>> = (0..=max_id).map(|_| None).collect();
    for (f, name) in meta.formats.iter().zip(names) {
        if f.id as usize > max_id {
            summary.warnings.push(format!(
                "event {} has id {} beyond the u16 range; skipped",
                f.name, f.id
            ));
            continue;
        }
        if !crate::sink::valid_table_name(&name) {
            // a table's name becomes a file name and a SQL view's: a
            // format naming itself otherwise is not taken at its word
            // (issue 42); its records count as of an unknown event id
            let w = format!(
                "{}: event format {:?} of system {:?}: a name outside [A-Za-z0-9_]; its events are skipped",
                summary.path, f.name, f.system
            );
            summary.warnings.push(w.clone());
            summary.problems.push(w);
            continue;
        }
        let mut typed = Vec::new();
        let mut columns = Vec::new();
        for field in &f.fields {
            let kind = FieldKind::classify(field, long);
            if let FieldKind::Raw { why, .. } = &kind {
                summary.raw_fields.push(RawField {
                    event: name.clone(),
                    field: field.name.clone(),
                    c_type: field.c_type.clone(),
                    reason: why.clone(),
                });
            }
            columns.push(ColumnSpec {
                name: crate::sink::field_column_name(&field.name),
                ty: kind.column_type(),
            });
            typed.push((field, kind));
        }
        let mut special = Special::None;
        if f.system == "ftrace" && f.name == "bprint" {
            let fmt = columns.iter().position(|c| c.name == "fmt");
            let buf = columns.iter().position(|c| c.name == "buf");
            if let (Some(fmt), Some(_)) = (fmt, buf) {
                columns.push(ColumnSpec {
                    name: "text".into(),
                    ty: ColumnType::Str,
                });
                special = Special::Bprint {
                    fmt,
                    text: columns.len() - 1,
                };
            }
        }
        let pid_offset = f
            .common
            .iter()
            .find(|c| c.name == "common_pid")
            .map_or(4, |c| c.offset);
        let decoder = FieldDecoder::new(&typed, meta.endian, long);
        plans[f.id as usize] = Some(EventPlan {
            spec: TableSpec {
                name,
                system: f.system.clone(),
                columns,
            },
            rows: 0,
            table: None,
            decoder,
            pid_offset,
            special,
        });
    }
    plans
}

fn summary_path(s: &TraceDatSummary) -> &str {
    &s.path
}

/// What every page's header decoding needs to know of the file.
#[derive(Clone, Copy)]
struct PageLayout {
    endian: Endian,
    /// The kernel's long size.
    long: usize,
    /// Where a page's records start (header_page).
    data_start: usize,
}

impl Stream {
    /// The head record's raw timestamp: the sorter's key.
    #[inline(always)]
    fn head_ts(&self) -> u64 {
        self.cur.map_or(0, |r| r.ts)
    }

    /// Move to the next record; false at the end of the stream. The common
    /// case, another record on the current page, is inlined into the merge
    /// loop; the rest (a page's end, a bad record, the next page) is not.
    #[inline(always)]
    fn advance(
        &mut self,
        file: &mut TraceFile,
        layout: PageLayout,
        summary: &mut TraceDatSummary,
        inst: &str,
    ) -> ReadResult<bool> {
        if let Some(c) = &mut self.cursor {
            // an error leaves the cursor where it was: the slow path meets
            // it again and reports it
            if let Ok(Some(r)) = c.next_record(self.source.page()) {
                self.cur = Some(r);
                return Ok(true);
            }
        }
        self.advance_page(file, layout, summary, inst)
    }

    /// [`Stream::advance`] past the current page's end.
    #[cold]
    #[inline(never)]
    fn advance_page(
        &mut self,
        file: &mut TraceFile,
        layout: PageLayout,
        summary: &mut TraceDatSummary,
        inst: &str,
    ) -> ReadResult<bool> {
        loop {
            if let Some(c) = &mut self.cursor {
                match c.next_record(self.source.page()) {
                    Ok(Some(r)) => {
                        self.cur = Some(r);
                        return Ok(true);
                    }
                    Ok(None) => self.cursor = None,
                    Err(e) => {
                        *summary
                            .stats
                            .entry(stats::CORRUPT_RECORDS.into())
                            .or_default() += 1;
                        let w = format!(
                            "{}: at byte {}: instance {inst:?} cpu {}: bad record ({e:?}); rest of page skipped",
                            summary_path(summary),
                            self.source.last_offset,
                            self.cpu
                        );
                        summary.warnings.push(w.clone());
                        summary.problems.push(w);
                        self.cursor = None;
                    }
                }
            }
            if !self.source.next_page(file)? {
                self.cur = None;
                return Ok(false);
            }
            self.pages += 1;
            match PageCursor::new(
                self.source.page(),
                layout.endian,
                layout.long,
                layout.data_start,
            ) {
                Ok(c) => {
                    self.good_pages += 1;
                    match c.missed {
                        Missed::None => {}
                        Missed::Unknown => self.lost.unknown_pages += 1,
                        Missed::Count(n) => self.lost.count += n,
                    }
                    self.cursor = Some(c);
                }
                Err(e) => {
                    // An all-zero page is what trace-cmd leaves for empty
                    // space; anything else is corruption worth reporting.
                    if self.source.page().iter().any(|&b| b != 0) {
                        *summary
                            .stats
                            .entry(stats::CORRUPT_PAGES.into())
                            .or_default() += 1;
                        let w = format!(
                            "{}: at byte {}: instance {inst:?} cpu {}: corrupt page header ({e:?}); page skipped",
                            summary_path(summary),
                            self.source.last_offset,
                            self.cpu
                        );
                        summary.warnings.push(w.clone());
                        summary.problems.push(w);
                    }
                }
            }
        }
    }
}

/// Read `path` into `sink`. `progress(done_bytes, total_bytes)` is called
/// periodically; returning false stops the read with `Interrupted`.
pub fn read_tracedat<S: EventSink + ?Sized>(
    path: &Path,
    sink: &mut S,
    opts: &ReadOptions,
    progress: &mut dyn FnMut(u64, u64) -> bool,
) -> ReadResult<TraceDatSummary> {
    let meta = read_metadata_with(path, opts.max_memory)?;
    let mut s = summary_of_header(path, &meta);
    let names: Vec<String> = meta.buffers.iter().map(|b| b.name.clone()).collect();
    sink.set_instances(&names);
    let plans = plan_events(&meta, &mut s);
    let mut parser = Parser::new(&meta, plans);
    let mut streams = Streams::open(&meta, names, &mut s)?;
    let mut ticker = ProgressTicker::new(opts, progress);
    let seen = merge_and_decode(&mut streams, &mut parser, sink, &mut s, &mut ticker)?;
    // the order below is the order of their warnings in the summary
    parser.finish(&mut s, seen, &streams.names);
    streams.finish(&mut s);
    report_truncation(&mut s, &meta, streams.consumed());
    s.formats = formats_with_rows(&meta, &s.rows);
    progress(streams.total, streams.total);
    Ok(s)
}

/// The summary as the file's header and options describe it, before any
/// record is read.
fn summary_of_header(path: &Path, meta: &TraceDatMeta) -> TraceDatSummary {
    let mut s = TraceDatSummary {
        path: path.display().to_string(),
        version: meta.version,
        endian: if meta.endian == Endian::Little {
            "little"
        } else {
            "big"
        },
        user_long_size: meta.user_long_size,
        kernel_long_size: meta.kernel_long_size,
        page_size: meta.page_size,
        compression: meta.compression.clone(),
        cpus: meta.cpus,
        clock: meta.clock.clone(),
        uname: meta.uname.clone(),
        tracecmd_version: meta.tracecmd_version.clone(),
        options: meta.options_seen.clone(),
        cmdlines: meta.cmdlines.clone(),
        warnings: meta.warnings.clone(),
        problems: meta.problems.clone(),
        ts_offset: meta.ts_offset,
        tsc2nsec: meta.tsc2nsec.map(|t| (t.mult, t.shift, t.offset)),
        cpustats: meta.cpustats.clone(),
        ..Default::default()
    };
    if meta.bad_formats > 0 {
        s.stats
            .insert(stats::UNPARSEABLE_FORMATS.into(), meta.bad_formats);
    }
    s
}

/// Every (instance, cpu) stream of ring-buffer pages the read decodes, and
/// the file they come from.
struct Streams {
    file: TraceFile,
    list: Vec<Stream>,
    layout: PageLayout,
    /// Buffer instance names, indexed by [`Stream::instance`].
    names: Vec<String>,
    /// Ring-buffer bytes of all streams: what progress counts up to.
    total: u64,
}

impl Streams {
    /// A stream per CPU with data of every instance but latency ones
    /// (text, which is not decoded: said in a warning); every instance is
    /// listed in the summary.
    fn open(
        meta: &TraceDatMeta,
        names: Vec<String>,
        s: &mut TraceDatSummary,
    ) -> ReadResult<Streams> {
        let file = TraceFile::open(meta)?;
        let read_ahead = read_ahead_for(
            meta.buffers
                .iter()
                .filter(|b| !b.latency)
                .flat_map(|b| &b.cpus)
                .filter(|c| c.size > 0)
                .count(),
        );
        let mut list = Vec::new();
        let mut total = 0u64;
        for (i, b) in meta.buffers.iter().enumerate() {
            if !list_instance(s, b) {
                continue;
            }
            for c in b.cpus.iter().filter(|c| c.size > 0) {
                // the size is the file's claim: count what the file holds of
                // it, so hostile sizes neither overflow nor inflate the total
                total = total.saturating_add(c.size.min(meta.file_size.saturating_sub(c.offset)));
                let source = PageSource::new(&file, c, b.page_size, b.compressed, read_ahead)?;
                list.push(Stream {
                    source,
                    pages: 0,
                    good_pages: 0,
                    lost: LostEvents::default(),
                    cursor: None,
                    cur: None,
                    instance: i as u16,
                    cpu: c.cpu,
                });
            }
        }
        Ok(Streams {
            file,
            list,
            layout: PageLayout {
                endian: meta.endian,
                long: meta.kernel_long_size,
                data_start: meta.header_page.data_offset,
            },
            names,
            total,
        })
    }

    /// Move stream `i` to its next record and return that record's raw
    /// timestamp (the sorter's key; None at the stream's end).
    #[inline(always)]
    fn advance(&mut self, i: usize, s: &mut TraceDatSummary) -> ReadResult<Option<u64>> {
        let st = &mut self.list[i];
        let inst = &self.names[st.instance as usize];
        Ok(if st.advance(&mut self.file, self.layout, s, inst)? {
            Some(st.head_ts())
        } else {
            None
        })
    }

    /// Pages read so far.
    fn pages(&self) -> u64 {
        self.list.iter().map(|x| x.pages).sum()
    }

    /// Ring-buffer bytes read so far.
    fn consumed(&self) -> u64 {
        self.list.iter().map(|x| x.source.consumed).sum()
    }

    /// Pages, lost events and missing bytes into the summary: kept per
    /// stream while reading, as counting into its maps per page cost an
    /// allocation each.
    fn finish(&self, s: &mut TraceDatSummary) {
        for st in &self.list {
            // a CPU's missing bytes are what its size claims beyond the file
            s.truncated_bytes = s.truncated_bytes.saturating_add(st.source.missing_bytes);
            if st.pages > 0 {
                *s.stats.entry(stats::PAGES.into()).or_default() += st.pages;
            }
            if st.good_pages > 0 {
                let lost = s
                    .lost
                    .entry(self.names[st.instance as usize].clone())
                    .or_default()
                    .entry(st.cpu)
                    .or_default();
                lost.count += st.lost.count;
                lost.unknown_pages += st.lost.unknown_pages;
            }
        }
    }
}

/// Lists instance `b` in the summary; false (and a warning) for a latency
/// instance, whose text data is not decoded.
fn list_instance(s: &mut TraceDatSummary, b: &BufferInfo) -> bool {
    s.instances.push((
        b.name.clone(),
        b.clock.clone(),
        b.page_size,
        b.cpus.iter().filter(|c| c.size > 0).count() as u32,
    ));
    if b.latency {
        let w = format!(
            "{}: instance {:?} holds latency (text) data, not decoded; skipped",
            s.path, b.name
        );
        s.warnings.push(w.clone());
        s.problems.push(w);
    }
    !b.latency
}

/// The sorter: the stream with the earliest head record ("current") emits
/// records while its head stays ahead of every other stream's, whose heads
/// wait in a min-heap keyed by (raw timestamp, stream index). Only a change
/// of leader touches the heap, not every record, and the order is the same
/// as popping the heap per record: ties go to the lower stream index.
struct Merge {
    heap: BinaryHeap<Reverse<(u64, usize)>>,
}

impl Merge {
    /// Reads every stream's first record; returns the sorter and the
    /// stream to emit from first (None when all are empty).
    fn start(streams: &mut Streams, s: &mut TraceDatSummary) -> ReadResult<(Merge, Option<usize>)> {
        let mut heap = BinaryHeap::with_capacity(streams.list.len());
        for i in 0..streams.list.len() {
            if let Some(ts) = streams.advance(i, s)? {
                heap.push(Reverse((ts, i)));
            }
        }
        let first = heap.pop().map(|Reverse((_, i))| i);
        Ok((Merge { heap }, first))
    }

    /// The stream to emit from next, once current stream `i`'s head record
    /// has been emitted; None when every stream is done.
    #[inline(always)]
    fn next(
        &mut self,
        streams: &mut Streams,
        i: usize,
        s: &mut TraceDatSummary,
    ) -> ReadResult<Option<usize>> {
        let Some(ts) = streams.advance(i, s)? else {
            return Ok(self.heap.pop().map(|Reverse((_, j))| j));
        };
        let key = (ts, i);
        Ok(match self.heap.peek() {
            Some(&Reverse(other)) if other < key => {
                let Reverse((_, j)) = self.heap.pop().expect("peeked");
                self.heap.push(Reverse(key));
                Some(j)
            }
            _ => Some(i),
        })
    }
}

/// Calls the progress callback each time another `every` pages have been
/// read.
struct ProgressTicker<'p> {
    callback: &'p mut dyn FnMut(u64, u64) -> bool,
    every: u64,
    last_pages: u64,
}

impl<'p> ProgressTicker<'p> {
    fn new(opts: &ReadOptions, callback: &'p mut dyn FnMut(u64, u64) -> bool) -> Self {
        let every = if opts.progress_every_pages == 0 {
            256
        } else {
            opts.progress_every_pages
        };
        ProgressTicker {
            callback,
            every,
            last_pages: 0,
        }
    }

    /// Call back if another `every` pages have been read since the last
    /// call; `Interrupted` once the callback says stop.
    #[cold]
    #[inline(never)]
    fn check(&mut self, streams: &Streams) -> ReadResult<()> {
        let pages = streams.pages();
        if pages >= self.last_pages + self.every {
            self.last_pages = pages;
            let done = streams.consumed().min(streams.total);
            if !(self.callback)(done, streams.total) {
                return Err(ReadError::Interrupted);
            }
        }
        Ok(())
    }
}

/// The read loop: every record, in timestamp order, to the parser.
/// Returns the range of the timestamps written.
///
/// The per-record counters (`seen`, `since_check`) are locals of this
/// loop, not fields of the parser or the ticker: so they stay in
/// registers, where fields cost a load and a store per record (about 0.5%
/// of a read's instructions, measured with cachegrind).
fn merge_and_decode<S: EventSink + ?Sized>(
    streams: &mut Streams,
    parser: &mut Parser<'_>,
    sink: &mut S,
    s: &mut TraceDatSummary,
    ticker: &mut ProgressTicker<'_>,
) -> ReadResult<SeenTs> {
    let mut seen = SeenTs::default();
    let mut since_check = 0u32;
    let (mut merge, mut current) = Merge::start(streams, s)?;
    while let Some(i) = current {
        parser.record(&streams.list[i], sink, s, &mut seen)?;
        current = merge.next(streams, i, s)?;
        // progress is looked at every few thousand records, not per
        // record: the page count is a sum over the streams
        since_check += 1;
        if since_check == 4096 {
            since_check = 0;
            ticker.check(streams)?;
        }
    }
    Ok(seen)
}

/// The first and last timestamp written, in ns; a record earlier than the
/// last is counted as out of order.
#[derive(Clone, Copy)]
struct SeenTs {
    first: i64,
    last: i64,
}

impl Default for SeenTs {
    fn default() -> Self {
        SeenTs {
            first: i64::MAX,
            last: i64::MIN,
        }
    }
}

impl SeenTs {
    #[inline(always)]
    fn see(&mut self, ts: i64, counters: &mut Stats) {
        if ts < self.last {
            *counters.entry(stats::TS_OUT_OF_ORDER.into()).or_default() += 1;
        }
        self.last = self.last.max(ts);
        self.first = self.first.min(ts);
    }
}

/// Raw ring-buffer timestamps to ns: TSC2NSEC's scaling when the file has
/// it, then its OFFSET.
#[derive(Clone, Copy)]
struct Clock {
    tsc: Option<Tsc2Nsec>,
    offset: i64,
}

impl Clock {
    #[inline(always)]
    fn to_ns(self, raw: u64) -> i64 {
        let t = match self.tsc {
            Some(c) => (((raw as u128 * c.mult as u128) >> c.shift) as u64).wrapping_add(c.offset),
            None => raw,
        };
        (t as i64).wrapping_add(self.offset)
    }
}

/// What rendering bprint's `text` column needs of the file.
struct BprintFormats<'m> {
    /// The printk formats, by address.
    printk: &'m HashMap<u64, String>,
    /// Where the packed arguments (`buf`) start, per bprint event id.
    buf_offset: HashMap<u32, usize>,
    endian: Endian,
    long: usize,
}

impl BprintFormats<'_> {
    fn new(meta: &TraceDatMeta) -> BprintFormats<'_> {
        let buf_offset = meta
            .formats
            .iter()
            .filter(|f| f.system == "ftrace" && f.name == "bprint")
            .filter_map(|f| Some((f.id, f.fields.iter().find(|x| x.name == "buf")?.offset)))
            .collect();
        BprintFormats {
            printk: &meta.printk,
            buf_offset,
            endian: meta.endian,
            long: meta.kernel_long_size,
        }
    }

    /// Fill row `row`'s `text` column from its `fmt` address and the
    /// payload's packed arguments; empty (and counted) when the file has
    /// no format at that address.
    fn fill_text(
        &self,
        batch: &mut RowBatch,
        (fmt, text): (usize, usize),
        (row, id): (u32, u32),
        payload: &[u8],
        counters: &mut Stats,
    ) {
        let rendered = match (
            batch.columns[fmt].value(row as usize),
            self.buf_offset.get(&id),
        ) {
            (Value::U64(addr), Some(off)) => match self.printk.get(&addr) {
                Some(f) => Some(printk::render(
                    f,
                    payload.get(*off..).unwrap_or(&[]),
                    self.endian,
                    self.long,
                )),
                None => {
                    *counters
                        .entry(stats::BPRINT_UNKNOWN_FORMAT.into())
                        .or_default() += 1;
                    None
                }
            },
            _ => None,
        };
        let r = rendered.unwrap_or_default();
        batch.var_bytes += r.len();
        batch.columns[text].push_str(row, &r);
    }
}

/// Records of one event id no format describes, and where the first was.
struct UnknownId {
    records: u64,
    page_offset: u64,
    instance: u16,
    cpu: u32,
}

/// The parser: each record's payload, in the order the sorter hands them
/// over, decoded into a row of its event's table.
struct Parser<'m> {
    /// Indexed by event id.
    plans: Vec<Option<EventPlan>>,
    endian: Endian,
    clock: Clock,
    bprint: BprintFormats<'m>,
    unknown_ids: BTreeMap<u32, UnknownId>,
}

impl<'m> Parser<'m> {
    fn new(meta: &'m TraceDatMeta, plans: Vec<Option<EventPlan>>) -> Self {
        Parser {
            plans,
            endian: meta.endian,
            clock: Clock {
                tsc: meta.tsc2nsec,
                offset: meta.ts_offset,
            },
            bprint: BprintFormats::new(meta),
            unknown_ids: BTreeMap::new(),
        }
    }

    /// Decode `st`'s head record into its table's next row; a record of no
    /// known event is only counted, under its id.
    #[inline(always)]
    fn record<S: EventSink + ?Sized>(
        &mut self,
        st: &Stream,
        sink: &mut S,
        s: &mut TraceDatSummary,
        seen: &mut SeenTs,
    ) -> ReadResult<()> {
        let rec = st.cur.expect("the current stream has a record");
        let payload = &st.source.page()[rec.start..rec.end];
        let id = match payload {
            [a, b, ..] => self.endian.u16([*a, *b]) as u32,
            _ => u32::MAX,
        };
        let Some(plan) = self.plans.get_mut(id as usize).and_then(Option::as_mut) else {
            self.count_unknown(id, st);
            return Ok(());
        };
        let ts = self.clock.to_ns(rec.ts);
        seen.see(ts, &mut s.stats);
        let table = match plan.table {
            Some(t) => t,
            None => declare_table(plan, sink, s)?,
        };
        let pid = self
            .endian
            .uint(payload, plan.pid_offset, 4)
            .map(|v| v as u32 as i32);
        let head = RowHeader {
            ts,
            cpu: st.cpu,
            pid,
            instance: st.instance,
        };
        let batch = sink.batch(table);
        let row = batch.push_header(&head);
        plan.decoder.append(payload, batch, row);
        if let Special::Bprint { fmt, text } = plan.special {
            self.bprint
                .fill_text(batch, (fmt, text), (row, id), payload, &mut s.stats);
        }
        sink.row_done(table)
            .map_err(|what| ReadError::Sink { what })?;
        plan.rows += 1;
        s.records += 1;
        Ok(())
    }

    /// A record of event id `id`, which no format describes: counted, with
    /// where the first of its id was.
    #[cold]
    fn count_unknown(&mut self, id: u32, st: &Stream) {
        self.unknown_ids
            .entry(id)
            .or_insert(UnknownId {
                records: 0,
                page_offset: st.source.last_offset,
                instance: st.instance,
                cpu: st.cpu,
            })
            .records += 1;
    }

    /// Time range, rows per table and the records of unknown event ids
    /// into the summary.
    fn finish(self, s: &mut TraceDatSummary, seen: SeenTs, names: &[String]) {
        if s.records > 0 {
            s.time_range = Some((seen.first, seen.last));
        }
        for p in self.plans.iter().flatten().filter(|p| p.rows > 0) {
            s.rows.insert(p.spec.name.clone(), p.rows);
        }
        for (id, u) in self.unknown_ids {
            report_unknown_id(s, id, &u, &names[u.instance as usize]);
        }
    }
}

/// The plan's table, declared to the sink at its first row: a table
/// exists only when it has rows.
#[cold]
fn declare_table<S: EventSink + ?Sized>(
    plan: &mut EventPlan,
    sink: &mut S,
    s: &mut TraceDatSummary,
) -> ReadResult<TableId> {
    let t = sink
        .declare_table(&plan.spec)
        .map_err(|what| ReadError::Sink { what })?;
    plan.table = Some(t);
    s.systems
        .insert(plan.spec.name.clone(), plan.spec.system.clone());
    Ok(t)
}

/// Records no format describes are events lost to the capture, as the
/// kernel's lost events are (issue 42: they were counted only in
/// capture.json, and the import exited 0).
fn report_unknown_id(s: &mut TraceDatSummary, id: u32, u: &UnknownId, instance: &str) {
    let n = u.records;
    *s.stats.entry(stats::UNKNOWN_EVENT_ID.into()).or_default() += n;
    s.skipped_records += n;
    let id_text = if id == u32::MAX {
        "(a record too short to hold one)".to_string()
    } else {
        id.to_string()
    };
    let w = format!(
        "{}: at byte {}: {n} records of unknown event id {id_text} skipped (the first in the page there, instance {instance:?} cpu {})",
        s.path, u.page_offset, u.cpu
    );
    s.warnings.push(w.clone());
    s.problems.push(w);
}

/// A truncated file's warning and counter, once the streams' missing bytes
/// are in the summary. `consumed`: the ring-buffer bytes read.
fn report_truncation(s: &mut TraceDatSummary, meta: &TraceDatMeta, consumed: u64) {
    if s.truncated_bytes == 0 {
        return;
    }
    let estimate = estimate_lost(s, meta, consumed);
    let w = format!(
        "{}: at byte {}: file is truncated: {} bytes of ring-buffer data missing, {estimate}; every complete page was read",
        s.path, meta.file_size, s.truncated_bytes
    );
    s.warnings.push(w.clone());
    s.problems.push(w);
    s.stats
        .insert(stats::TRUNCATED_BYTES.into(), s.truncated_bytes);
}

/// How many events the missing data held is not in the file: the estimate
/// (into `lost_estimate`) is the events per byte of the data read (per
/// page, uncompressed) times the bytes missing, and its text says it is
/// one.
fn estimate_lost(s: &mut TraceDatSummary, meta: &TraceDatMeta, consumed: u64) -> String {
    let read_records = s.records + s.skipped_records;
    if consumed == 0 || read_records == 0 {
        return "how many events they held is unknown (no data was read to estimate it from)"
            .into();
    }
    s.lost_estimate = (s.truncated_bytes as u128 * read_records as u128 / consumed as u128) as u64;
    if meta.compression == "none" || meta.compression.is_empty() {
        let page = meta.page_size.max(1) as u64;
        format!(
            "about {} events lost (an estimate: {} pages missing x {:.1} events per page read)",
            s.lost_estimate,
            s.truncated_bytes.div_ceil(page),
            read_records as f64 * page as f64 / consumed as f64
        )
    } else {
        format!(
            "about {} events lost (an estimate: {:.3} events per compressed byte read)",
            s.lost_estimate,
            read_records as f64 / consumed as f64
        )
    }
}

/// (table, system, print fmt) of each event type that has rows.
fn formats_with_rows(
    meta: &TraceDatMeta,
    rows: &BTreeMap<String, u64>,
) -> Vec<(String, String, String)> {
    meta.formats
        .iter()
        .zip(table_names(&meta.formats))
        .filter(|(_, name)| rows.get(name).is_some_and(|&n| n > 0))
        .map(|(f, name)| (name, f.system.clone(), f.print_fmt.clone()))
        .collect()
}
