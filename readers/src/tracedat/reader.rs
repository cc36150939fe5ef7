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

use super::header::{read_metadata_with, TraceDatMeta};
use super::pages::{read_ahead_for, PageSource, TraceFile};
use super::records::{Missed, PageCursor, Record};
use crate::bytes::Endian;
use crate::error::{ReadError, ReadResult};
use crate::ftrace::field::{FieldDecoder, FieldKind};
use crate::ftrace::format::EventFormat;
use crate::ftrace::printk;
use crate::sink::{ColumnSpec, ColumnType, EventSink, RowHeader, Stats, TableId, TableSpec, Value};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::path::Path;

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
                        *summary.stats.entry("corrupt_records".into()).or_default() += 1;
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
                        *summary.stats.entry("corrupt_pages".into()).or_default() += 1;
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
            .insert("unparseable_formats".into(), meta.bad_formats);
    }
    let names: Vec<String> = meta.buffers.iter().map(|b| b.name.clone()).collect();
    sink.set_instances(&names);
    let mut plans = plan_events(&meta, &mut s);
    let mut file = TraceFile::open(&meta)?;
    let read_ahead = read_ahead_for(
        meta.buffers
            .iter()
            .filter(|b| !b.latency)
            .flat_map(|b| &b.cpus)
            .filter(|c| c.size > 0)
            .count(),
    );
    let mut streams = Vec::new();
    let mut total = 0u64;
    for (i, b) in meta.buffers.iter().enumerate() {
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
            continue;
        }
        for c in &b.cpus {
            if c.size == 0 {
                continue;
            }
            // the size is the file's claim: count what the file holds of
            // it, so hostile sizes neither overflow nor inflate the total
            total = total.saturating_add(c.size.min(meta.file_size.saturating_sub(c.offset)));
            let source = PageSource::new(&file, c, b.page_size, b.compressed, read_ahead)?;
            streams.push(Stream {
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
    let endian = meta.endian;
    let long = meta.kernel_long_size;
    let layout = PageLayout {
        endian,
        long,
        data_start: meta.header_page.data_offset,
    };
    // The sorter: the stream with the earliest head record ("current")
    // emits records while its head stays ahead of every other stream's,
    // whose heads wait in a min-heap keyed by (raw timestamp, stream
    // index). Only a change of leader touches the heap, not every record,
    // and the order is the same as popping the heap per record: ties go to
    // the lower stream index.
    let mut heap: BinaryHeap<Reverse<(u64, usize)>> = BinaryHeap::with_capacity(streams.len());
    for (i, st) in streams.iter_mut().enumerate() {
        if st.advance(&mut file, layout, &mut s, &names[st.instance as usize])? {
            heap.push(Reverse((st.cur.map_or(0, |r| r.ts), i)));
        }
    }
    let tsc = meta.tsc2nsec;
    let to_ns = |raw: u64| -> i64 {
        let t = match tsc {
            Some(c) => (((raw as u128 * c.mult as u128) >> c.shift) as u64).wrapping_add(c.offset),
            None => raw,
        };
        (t as i64).wrapping_add(meta.ts_offset)
    };
    let every = if opts.progress_every_pages == 0 {
        256
    } else {
        opts.progress_every_pages
    };
    let mut last_pages = 0u64;
    let mut last_ts = i64::MIN;
    let mut first_ts = i64::MAX;
    // per unknown event id: (records, where the first was: page offset, instance, cpu)
    let mut unknown_ids: BTreeMap<u32, (u64, u64, u16, u32)> = BTreeMap::new();
    let bprint_buf_offset: HashMap<u32, usize> = meta
        .formats
        .iter()
        .filter(|f| f.system == "ftrace" && f.name == "bprint")
        .filter_map(|f| Some((f.id, f.fields.iter().find(|x| x.name == "buf")?.offset)))
        .collect();
    let mut since_check = 0u32;
    let mut current = heap.pop().map(|Reverse((_, i))| i);
    while let Some(i) = current {
        {
            let st = &streams[i];
            let rec = st.cur.expect("the current stream has a record");
            let payload = &st.source.page()[rec.start..rec.end];
            let id = match payload {
                [a, b, ..] => endian.u16([*a, *b]) as u32,
                _ => u32::MAX,
            };
            match plans.get_mut(id as usize).and_then(Option::as_mut) {
                Some(plan) => {
                    let ts = to_ns(rec.ts);
                    if ts < last_ts {
                        *s.stats.entry("ts_out_of_order".into()).or_default() += 1;
                    }
                    last_ts = last_ts.max(ts);
                    first_ts = first_ts.min(ts);
                    let table = match plan.table {
                        Some(t) => t,
                        None => {
                            let t = sink
                                .declare_table(&plan.spec)
                                .map_err(|what| ReadError::Sink { what })?;
                            plan.table = Some(t);
                            s.systems
                                .insert(plan.spec.name.clone(), plan.spec.system.clone());
                            t
                        }
                    };
                    let pid = endian
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
                        let rendered = match (
                            batch.columns[fmt].value(row as usize),
                            bprint_buf_offset.get(&id),
                        ) {
                            (Value::U64(addr), Some(off)) => match meta.printk.get(&addr) {
                                Some(f) => Some(printk::render(
                                    f,
                                    payload.get(*off..).unwrap_or(&[]),
                                    endian,
                                    long,
                                )),
                                None => {
                                    *s.stats.entry("bprint_unknown_format".into()).or_default() +=
                                        1;
                                    None
                                }
                            },
                            _ => None,
                        };
                        let col = &mut batch.columns[text];
                        let r = rendered.unwrap_or_default();
                        batch.var_bytes += r.len();
                        col.push_str(row, &r);
                    }
                    sink.row_done(table)
                        .map_err(|what| ReadError::Sink { what })?;
                    plan.rows += 1;
                    s.records += 1;
                }
                None => {
                    unknown_ids
                        .entry(id)
                        .or_insert((0, st.source.last_offset, st.instance, st.cpu))
                        .0 += 1
                }
            }
        }
        let st = &mut streams[i];
        let inst = &names[st.instance as usize];
        current = if st.advance(&mut file, layout, &mut s, inst)? {
            let key = (st.cur.map_or(0, |r| r.ts), i);
            match heap.peek() {
                Some(&Reverse(other)) if other < key => {
                    let Reverse((_, j)) = heap.pop().expect("peeked");
                    heap.push(Reverse(key));
                    Some(j)
                }
                _ => Some(i),
            }
        } else {
            heap.pop().map(|Reverse((_, j))| j)
        };
        // Progress is looked at every few thousand records, not per record
        // (the page count lives in the stats map).
        since_check += 1;
        if since_check < 4096 {
            continue;
        }
        since_check = 0;
        let pages: u64 = streams.iter().map(|x| x.pages).sum();
        if pages >= last_pages + every {
            last_pages = pages;
            let done: u64 = streams.iter().map(|x| x.source.consumed).sum();
            if !progress(done.min(total), total) {
                return Err(ReadError::Interrupted);
            }
        }
    }
    if s.records > 0 {
        s.time_range = Some((first_ts, last_ts));
    }
    for p in plans.iter().flatten().filter(|p| p.rows > 0) {
        s.rows.insert(p.spec.name.clone(), p.rows);
    }
    for (id, (n, at, inst, cpu)) in unknown_ids {
        // Records no format describes are events lost to the capture, as
        // the kernel's lost events are (issue 42: they were counted only
        // in capture.json, and the import exited 0).
        *s.stats.entry("unknown_event_id".into()).or_default() += n;
        s.skipped_records += n;
        let id_text = if id == u32::MAX {
            "(a record too short to hold one)".to_string()
        } else {
            id.to_string()
        };
        let w = format!(
            "{}: at byte {at}: {n} records of unknown event id {id_text} skipped (the first in the page there, instance {:?} cpu {cpu})",
            s.path, names[inst as usize]
        );
        s.warnings.push(w.clone());
        s.problems.push(w);
    }
    let consumed: u64 = streams.iter().map(|x| x.source.consumed).sum();
    for st in &streams {
        // a CPU's missing bytes are what its size claims beyond the file
        s.truncated_bytes = s.truncated_bytes.saturating_add(st.source.missing_bytes);
        if st.pages > 0 {
            *s.stats.entry("pages".into()).or_default() += st.pages;
        }
        if st.good_pages > 0 {
            let lost = s
                .lost
                .entry(names[st.instance as usize].clone())
                .or_default()
                .entry(st.cpu)
                .or_default();
            lost.count += st.lost.count;
            lost.unknown_pages += st.lost.unknown_pages;
        }
    }
    if s.truncated_bytes > 0 {
        // How many events the missing data held is not in the file: the
        // estimate is the events per byte of the data read (per page,
        // uncompressed) times the bytes missing, and says it is one.
        let read_records = s.records + s.skipped_records;
        let estimate = if consumed > 0 && read_records > 0 {
            s.lost_estimate =
                (s.truncated_bytes as u128 * read_records as u128 / consumed as u128) as u64;
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
        } else {
            "how many events they held is unknown (no data was read to estimate it from)".into()
        };
        let w = format!(
            "{}: at byte {}: file is truncated: {} bytes of ring-buffer data missing, {estimate}; every complete page was read",
            s.path, meta.file_size, s.truncated_bytes
        );
        s.warnings.push(w.clone());
        s.problems.push(w);
        s.stats.insert("truncated_bytes".into(), s.truncated_bytes);
    }
    s.formats = meta
        .formats
        .iter()
        .zip(table_names(&meta.formats))
        .filter(|(_, name)| s.rows.get(name).is_some_and(|&n| n > 0))
        .map(|(f, name)| (name, f.system.clone(), f.print_fmt.clone()))
        .collect();
    progress(total, total);
    Ok(s)
}
