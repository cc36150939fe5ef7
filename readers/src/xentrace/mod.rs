//! xentrace binary files (Xen's `xentrace` output).
//!
//! A record is a 32-bit header (event id: 28 bits, extra-word count: 3
//! bits, TSC-present: 1 bit), an optional 64-bit TSC and up to seven u32
//! words. xentrace writes per-pCPU *windows*: a `TRC_TRACE_CPU_CHANGE`
//! record (cpu, byte count) followed by that many bytes of the pCPU's
//! records. The **tokenizer** indexes the windows; the **sorter** walks
//! every pCPU's windows in file order (where they lie in the file's
//! mapping; where the file system cannot map, a read buffer per pCPU holds
//! its current window, often its next ones too) and
//! merges the pCPUs by TSC with a heap, ties by pCPU number; a record
//! without a TSC inherits the last TSC of its pCPU. The **parser** decodes
//! scheduler, HVM and power-management records into typed tables and
//! everything else into `xen_record` (id, words): nothing is dropped (a
//! record of a class trace.h does not define is kept there too, and said
//! as damage). Each lost-records record is a row of `xen_lost_records`:
//! the pCPU's records lost between `first_ts` and `ts`.
//!
//! Mapped, a file truncated by another process while it is read ends the
//! reader with SIGBUS, as for perf.data (`crate::mapped`); a file
//! truncated before the read is salvaged with a warning.

mod exit_reasons;
mod names;
mod sched_class;
mod tables;
mod tsc;
mod windows;

pub use exit_reasons::ExitReasons;
pub use names::{
    hvm_handler_name, hypercall_name, CPU_CHANGE, HVM_HANDLERS, HYPERCALLS, LOST_RECORDS,
    WRAP_BUFFER,
};

use crate::error::{ReadError, ReadResult};
use crate::input::open_nonempty;
use crate::mapped::MappedRange;
use crate::sink::{ColumnType, EventSink, RowHeader};
use names::{
    class_index, known_class, CLASSES, GRANT_OPS, IO_OPS, IO_SPACES, RUNSTATES, SCHEDULERS,
    SHUTDOWN_REASONS,
};
use sched_class::SCHED_EVENTS;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::path::Path;
use tables::{Table, Tables};
use tsc::TscToNs;
use windows::{tokenize, Stream};

/// What a read found.
#[derive(Clone, Debug, Default)]
pub struct XenSummary {
    /// Records read (windows' cpu-change records included).
    pub records: u64,
    /// pCPUs seen.
    pub cpus: u32,
    /// Rows per table.
    pub rows: BTreeMap<String, u64>,
    /// Bytes per (pCPU, class name), as xenalyze's log-volume summary counts them.
    pub volume: BTreeMap<(u32, String), u64>,
    /// Lost records per pCPU.
    pub lost: BTreeMap<u32, u64>,
    /// First and last TSC.
    pub tsc_range: Option<(u64, u64)>,
    /// First and last timestamp in ns.
    pub time_range: Option<(i64, i64)>,
    /// Warnings (one line each).
    pub warnings: Vec<String>,
    /// Bytes after the last complete record.
    pub truncated_bytes: u64,
    /// What the read skipped or re-attributed, one line each with where
    /// (issue 42: any of it makes the import exit 1).
    pub problems: Vec<String>,
    /// Damage met inside windows, said once each kind at the end of the
    /// read: (how many, the first's pCPU and byte offset).
    pub(crate) damage: Damage,
}

/// Kinds of damage a pCPU's stream meets: counted where met, said once.
#[derive(Clone, Debug, Default)]
pub(crate) struct Damage {
    /// Records cut at the end of their window (the window's rest skipped).
    pub(crate) cut: (u64, u32, u64),
    /// Window headers among a window's records: its declared size covers
    /// another window, whose records were read as this pCPU's.
    pub(crate) inner_header: (u64, u32, u64),
    /// Records whose TSC is below the one before them on the same pCPU.
    pub(crate) backwards: (u64, u32, u64),
    /// Records whose class trace.h does not define (see
    /// [`names::known_class`]): a damaged header, or records read out of
    /// step after one; kept in `xen_record` with their id.
    pub(crate) unknown_class: (u64, u32, u64),
    /// The event id of the first of `unknown_class`.
    pub(crate) unknown_class_ev: u32,
}

impl Damage {
    /// Count one of `kind` at byte `at` of pCPU `cpu`.
    #[cold]
    pub(crate) fn count(kind: &mut (u64, u32, u64), cpu: u32, at: u64) {
        if kind.0 == 0 {
            (kind.1, kind.2) = (cpu, at);
        }
        kind.0 += 1;
    }
}

impl XenSummary {
    /// A warning that is also a problem (see `problems`).
    fn problem(&mut self, line: String) {
        self.warnings.push(line.clone());
        self.problems.push(line);
    }
}

/// A 64-bit value written as two words, low first (Xen's 64-bit records).
fn wide(w: &[u32], i: usize) -> u64 {
    w[i] as u64 | (w[i + 1] as u64) << 32
}

/// A record's payload words as the `words` list column.
fn fill_words(list: &mut Vec<u64>, w: &[u32]) {
    list.clear();
    list.extend(w.iter().map(|&x| x as u64));
}

fn dom_vcpu(w: u32) -> (i64, i64) {
    ((w >> 16) as i64, (w & 0xffff) as i64)
}

/// Read `path` into `sink`. `cpu_hz` converts TSC to ns (required);
/// `exits` names the VMEXIT records' reasons.
pub fn read_xentrace<S: EventSink + ?Sized>(
    path: &Path,
    cpu_hz: f64,
    exits: ExitReasons,
    sink: &mut S,
    progress: &mut dyn FnMut(u64, u64) -> bool,
) -> ReadResult<XenSummary> {
    read_xentrace_with(path, cpu_hz, exits, sink, progress, true)
}

/// [`read_xentrace`], with `map` false reading the file into buffers as
/// on a file system that cannot map it (for tests of that path).
#[doc(hidden)]
pub fn read_xentrace_with<S: EventSink + ?Sized>(
    path: &Path,
    cpu_hz: f64,
    exits: ExitReasons,
    sink: &mut S,
    progress: &mut dyn FnMut(u64, u64) -> bool,
    map: bool,
) -> ReadResult<XenSummary> {
    let (file, size) = open_nonempty(path, "a xentrace file")?;
    if !(cpu_hz.is_finite() && cpu_hz > 1e6) {
        return Err(ReadError::Unsupported {
            path: path.into(),
            offset: 0,
            what: format!("cpu frequency {cpu_hz} Hz; pass the host's (e.g. --cpu-hz 2.4e9)"),
        });
    }
    let (windows, truncated, in_header) = tokenize(path, &file, size)?;
    let mut s = XenSummary {
        truncated_bytes: truncated,
        ..Default::default()
    };
    if truncated > 0 {
        s.problem(format!(
            "{}: at byte {}: file is truncated: {truncated} bytes of {} missing",
            path.display(),
            size,
            if in_header {
                "the last window's header (its records too, how many unknown)"
            } else {
                "the last window"
            }
        ));
    }
    let mut per_cpu: BTreeMap<u32, Vec<(u64, u64)>> = BTreeMap::new();
    for w in &windows {
        per_cpu.entry(w.cpu).or_default().push((w.start, w.len));
        // xenalyze does not count the window headers in any class
        *s.volume.entry((w.cpu, "window".into())).or_default() += 12;
        s.records += 1;
    }
    s.cpus = per_cpu.keys().max().map_or(0, |m| m + 1);
    sink.set_instances(&[String::new()]);
    // Records are read where they lie in the page cache: reading them into
    // per-pCPU buffers copied every byte and faulted in the buffers' pages,
    // a fifth of the read of the real credit2 fixture. Pages are let go as
    // the streams pass them (below); a file system that cannot map is read.
    let mut mapped = map
        .then(|| MappedRange::map(&file, 0, size as usize))
        .flatten();
    let mut streams: Vec<Stream> = per_cpu
        .into_iter()
        .map(|(cpu, windows)| Stream::new(cpu, windows, size))
        .collect();
    let mut heap = BinaryHeap::new();
    for (i, st) in streams.iter_mut().enumerate() {
        st.head = st.next(&file, path, &mut s, mapped.as_ref().map(MappedRange::bytes))?;
        if let Some(r) = &st.head {
            heap.push(Reverse((r.tsc, st.cpu, i)));
        }
    }
    let mut t = Tables::default();
    // bytes per stream and class, into the summary at the end
    let mut volume = vec![[0u64; CLASSES.len()]; streams.len()];
    let to_ns = TscToNs::new(cpu_hz);
    let ns = |tsc: u64| to_ns.ns(tsc);
    let mut done = 0u64;
    let (mut tsc_lo, mut tsc_hi) = (u64::MAX, 0u64);
    let mut list: Vec<u64> = Vec::with_capacity(7);
    use ColumnType::{Bool, Enum, ListU64, I64, U32, U64};
    // The pCPU with the earliest head record ("current") emits records
    // while its head stays ahead of every other pCPU's, whose heads wait in
    // the heap: only a change of leader touches the heap, and the order is
    // the same as popping the heap per record (ties by pCPU number).
    // The leader's record is held here, not in its stream (see `next`).
    let take_head = |streams: &mut [Stream], j: usize| {
        let r = streams[j]
            .head
            .take()
            .expect("a stream in the heap has a record");
        (j, r)
    };
    let mut current = heap
        .pop()
        .map(|Reverse((_, _, i))| take_head(&mut streams, i));
    while let Some((i, r)) = current {
        let cpu = streams[i].cpu;
        s.records += 1;
        volume[i][class_index(r.ev)] += r.bytes;
        let head = RowHeader {
            ts: ns(r.tsc),
            cpu,
            pid: None,
            instance: 0,
        };
        let w = &r.words;
        // One row of table `tid`: its header, then each column's value in
        // declared order, pushed straight into the column.
        macro_rules! row {
            ($tid:expr; $($kind:ident($v:expr)),+ $(,)?) => {{
                let tid = $tid;
                let b = sink.batch(tid);
                let at = b.push_header(&head);
                let mut cols = b.columns.iter_mut();
                $( row!(@ $kind, cols.next().expect("a value per declared column"), at, $v); )+
                sink.row_done(tid).map_err(|what| ReadError::Sink { what })?;
            }};
            (@ int, $c:expr, $at:expr, $v:expr) => { $c.push_int_bits($at, $v as u64) };
            (@ name, $c:expr, $at:expr, $v:expr) => { $c.push_name($at, $v) };
            (@ key, $c:expr, $at:expr, $v:expr) => { $c.push_key($at, $v) };
            (@ optkey, $c:expr, $at:expr, $v:expr) => {
                match $v {
                    Some(k) => $c.push_key($at, k),
                    None => $c.push_null($at),
                }
            };
            (@ list, $c:expr, $at:expr, $v:expr) => { $c.push_list_u64($at, $v) };
            (@ opt, $c:expr, $at:expr, $v:expr) => {
                match $v {
                    Some(x) => $c.push_int_bits($at, x),
                    None => $c.push_null($at),
                }
            };
        }
        match r.ev {
            ev if ev & 0xffff_f00f == 0x0002_1001 && r.n >= 1 => {
                let tid = t.get(sink, Table::RunstateChange, || {
                    vec![
                        ("dom", I64),
                        ("vcpu", I64),
                        ("old_state", Enum(&RUNSTATES)),
                        ("new_state", Enum(&RUNSTATES)),
                    ]
                })?;
                let (d, v) = dom_vcpu(w[0]);
                let state = |n: u32| (n as usize).min(RUNSTATES.len() - 1);
                let (old, new) = (state((ev >> 8) & 0xf), state((ev >> 4) & 0xf));
                row!(tid; int(r.tsc), int(d), int(v), key(old), key(new));
            }
            0x0002_1002 if r.n >= 1 => {
                let tid = t.get(sink, Table::ContinueRunning, || {
                    vec![("dom", I64), ("vcpu", I64)]
                })?;
                let (d, v) = dom_vcpu(w[0]);
                row!(tid; int(r.tsc), int(d), int(v));
            }
            0x0002_800a if r.n >= 4 => {
                let tid = t.get(sink, Table::Switch, || {
                    vec![
                        ("prev_dom", I64),
                        ("prev_vcpu", I64),
                        ("next_dom", I64),
                        ("next_vcpu", I64),
                    ]
                })?;
                row!(tid; int(r.tsc), int(w[0] as i64), int(w[1] as i64), int(w[2] as i64), int(w[3] as i64));
            }
            0x0002_800e if r.n >= 3 => {
                let tid = t.get(sink, Table::SwitchInfprev, || {
                    vec![("dom", I64), ("vcpu", I64), ("runtime", U64)]
                })?;
                row!(tid; int(r.tsc), int(w[0] as i64), int(w[1] as i64), int(w[2] as u64));
            }
            0x0002_800f | 0x0002_8011 if r.n >= 4 => {
                // the vCPU the scheduler picks (infnext: how long it waited)
                // or keeps (infcont: how long it has run), and its slice
                let (table, spent) = if r.ev == 0x0002_800f {
                    (Table::SwitchInfnext, "waited")
                } else {
                    (Table::SwitchInfcont, "runtime")
                };
                let tid = t.get(sink, table, || {
                    vec![("dom", I64), ("vcpu", I64), (spent, U64), ("slice", I64)]
                })?;
                row!(tid; int(r.tsc), int(w[0] as i64), int(w[1] as i64), int(w[2] as u64), int(w[3] as i32 as i64));
            }
            0x0002_8007 | 0x0002_8010 if r.n >= 3 => {
                // SCHEDOP_shutdown / SCHEDOP_shutdown_code: [dom, vcpu, reason]
                let tid = t.get(sink, Table::Shutdown, || {
                    vec![
                        ("dom", I64),
                        ("vcpu", I64),
                        ("reason", Enum(&SHUTDOWN_REASONS)),
                        ("shutdown_code", Bool),
                    ]
                })?;
                let reason = (w[2] as usize) < SHUTDOWN_REASONS.len();
                row!(tid; int(r.tsc), int(w[0] as i64), int(w[1] as i64), optkey(reason.then_some(w[2] as usize)), int(r.ev == 0x0002_8010));
            }
            0x0002_8003..=0x0002_8006 if r.n >= 2 => {
                let table = [Table::Sleep, Table::Wake, Table::Yield, Table::Block]
                    [(r.ev - 0x0002_8003) as usize];
                let tid = t.get(sink, table, || vec![("dom", I64), ("vcpu", I64)])?;
                row!(tid; int(r.tsc), int(w[0] as i64), int(w[1] as i64));
            }
            0x0008_1001 | 0x0008_1101 => {
                let tid = t.get(sink, Table::HvmVmentry, Vec::new)?;
                row!(tid; int(r.tsc));
            }
            0x0008_1002 | 0x0008_1102 if r.n >= 2 => {
                let tid = t.get(sink, Table::HvmVmexit, || {
                    vec![
                        ("exit_reason", U32),
                        ("exit_reason_name", Enum(exits.names())),
                        ("rip", U64),
                    ]
                })?;
                let rip = if r.ev & 0x100 != 0 && r.n >= 3 {
                    wide(w, 1)
                } else {
                    w[1] as u64
                };
                row!(tid; int(r.tsc), int(w[0] as u64), optkey(exits.key(w[0])), int(rip));
            }
            0x0080_1001 if r.n >= 2 => {
                let tid = t.get(sink, Table::PmFreqChange, || {
                    vec![("old_mhz", U32), ("new_mhz", U32)]
                })?;
                row!(tid; int(r.tsc), int(w[0] as u64), int(w[1] as u64));
            }
            0x0080_1002 | 0x0080_1003 if r.n >= 1 => {
                let table = if r.ev == 0x0080_1002 {
                    Table::PmIdleEntry
                } else {
                    Table::PmIdleExit
                };
                let tid = t.get(sink, table, || vec![("cstate", U32)])?;
                row!(tid; int(r.tsc), int(w[0] as u64));
            }
            0x0010_0001..=0x0010_0003 if r.n >= 1 => {
                // grant_table.c: TRACE_1D(event, domid of the granting domain)
                let tid = t.get(sink, Table::Grant, || {
                    vec![("op", Enum(&GRANT_OPS)), ("dom", I64)]
                })?;
                let op = (r.ev - 0x0010_0001) as usize;
                row!(tid; int(r.tsc), key(op), int(w[0] as i64));
            }
            0x0002_8001 | 0x0002_8002 if r.n >= 1 => {
                let table = if r.ev == 0x0002_8001 {
                    Table::DomAdd
                } else {
                    Table::DomRemove
                };
                let tid = t.get(sink, table, || vec![("dom", I64)])?;
                row!(tid; int(r.tsc), int(w[0] as i64));
            }
            // typed handler records (x86 hvm code, Xen 4.x): HLT [intpending],
            // VMCALL [eax], INTR [vector], NPF [gpa:2, mfn:2, qualification, p2mt]
            0x0008_2013 | 0x0008_2012 | 0x0008_200f if r.n >= 1 => {
                let (table, col) = match r.ev {
                    0x0008_2013 => (Table::HvmHlt, "intpending"),
                    0x0008_2012 => (Table::HvmVmcall, "eax"),
                    _ => (Table::HvmIntr, "vector"),
                };
                let tid = t.get(sink, table, || vec![(col, U32)])?;
                row!(tid; int(r.tsc), int(w[0] as u64));
            }
            0x0008_2021 if r.n >= 6 => {
                let tid = t.get(sink, Table::HvmNpf, || {
                    vec![
                        ("gpa", U64),
                        ("mfn", U64),
                        ("qualification", U32),
                        ("p2mt", U32),
                    ]
                })?;
                let gpa = wide(w, 0);
                let mfn = wide(w, 2);
                row!(tid; int(r.tsc), int(gpa), int(mfn), int(w[4] as u64), int(w[5] as u64));
            }
            // emulated I/O (hvmtrace_io_assist): address (2 words with the
            // 64-bit flag), then the data unless it was a pointer
            ev if matches!(
                ev & !0x100,
                0x0008_2016 | 0x0008_2017 | 0x0008_2216 | 0x0008_2217
            ) && r.n > ((ev >> 8) & 1) as usize =>
            {
                let na = 1 + ((ev >> 8) & 1) as usize;
                let tid = t.get(sink, Table::HvmIo, || {
                    vec![
                        ("space", Enum(&IO_SPACES)),
                        ("op", Enum(&IO_OPS)),
                        ("addr", U64),
                        ("data", U64),
                    ]
                })?;
                let addr = if na == 2 { wide(w, 0) } else { w[0] as u64 };
                let data = if r.n > na { Some(w[na] as u64) } else { None };
                let space = (ev & 0xff != 0x16) as usize;
                let op = (ev & 0x200 != 0) as usize;
                row!(tid; int(r.tsc), key(space), key(op), int(addr), opt(data));
            }
            ev if ev & 0xffff_f000 == 0x0008_2000 => {
                let tid = t.get(sink, Table::HvmHandler, || {
                    vec![("handler", Enum(&HVM_HANDLERS)), ("words", ListU64)]
                })?;
                fill_words(&mut list, &w[..r.n]);
                row!(tid; int(r.tsc), name(hvm_handler_name(ev)), list(&list));
            }
            0x0020_1001 | 0x0020_1101 | 0x0020_100d if r.n >= 1 => {
                // v1: [eip (1 or 2 words), eax = op]; v2: op in the low 20 bits of word 0
                let op = if r.ev == 0x0020_100d {
                    w[0] & 0xf_ffff
                } else {
                    w[r.n - 1]
                };
                let tid = t.get(sink, Table::PvHypercall, || {
                    vec![("op", U32), ("op_name", Enum(&HYPERCALLS))]
                })?;
                row!(tid; int(r.tsc), int(op as u64), name(hypercall_name(op)));
            }
            ev if ev & 0xffff_f000 == 0x0002_2000 => {
                // TRC_SCHED_CLASS: scheduler id in bits 9-11, event in bits 0-8
                match sched_class::lookup(ev).filter(|&k| r.n >= SCHED_EVENTS[k].words) {
                    // a scheduler's own record whose layout is known: its table
                    Some(k) => {
                        let tid = t.sched(sink, k)?;
                        let b = sink.batch(tid);
                        let at = b.push_header(&head);
                        let mut cols = b.columns.iter_mut();
                        cols.next()
                            .expect("the tsc column")
                            .push_int_bits(at, r.tsc);
                        for (c, f) in cols.zip(SCHED_EVENTS[k].fields) {
                            match f.value(&w[..r.n]) {
                                Some(v) => c.push_int_bits(at, v),
                                None => c.push_null(at),
                            }
                        }
                        sink.row_done(tid)
                            .map_err(|what| ReadError::Sink { what })?;
                    }
                    // an event without a known layout, or cut short: raw words
                    None => {
                        let tid = t.get(sink, Table::SchedClass, || {
                            vec![
                                ("scheduler", Enum(&SCHEDULERS)),
                                ("event", U32),
                                ("words", ListU64),
                            ]
                        })?;
                        let sched = ((ev >> 9) & 7) as usize;
                        fill_words(&mut list, &w[..r.n]);
                        row!(tid; int(r.tsc), key(sched), int((ev & 0x1ff) as u64), list(&list));
                    }
                }
            }
            LOST_RECORDS => {
                // trace.c's insert_lost_records: [lost count, did | vid << 16,
                // first lost TSC (2 words)], written with the TSC at which
                // the buffer had room again: the pCPU lost `lost` records in
                // [first_tsc, tsc]. A record cut short still counts (one
                // record at least), without an interval.
                *s.lost.entry(cpu).or_default() += if r.n >= 1 { w[0] as u64 } else { 1 };
                if r.n >= 4 {
                    let tid = t.get(sink, Table::LostRecords, || {
                        vec![
                            ("lost", U32),
                            ("first_tsc", U64),
                            ("first_ts", I64),
                            ("dom", I64),
                            ("vcpu", I64),
                        ]
                    })?;
                    let first = wide(w, 2);
                    row!(tid; int(r.tsc), int(w[0] as u64), int(first), int(ns(first)), int(w[1] & 0xffff), int(w[1] >> 16));
                }
            }
            WRAP_BUFFER => {}
            _ => {
                if !known_class(r.ev) {
                    // said at the end; the record stays a generic row
                    let kind = &mut s.damage.unknown_class;
                    if kind.0 == 0 {
                        s.damage.unknown_class_ev = r.ev;
                    }
                    Damage::count(kind, cpu, streams[i].offset_of_last(r.bytes));
                }
                let tid = t.get(sink, Table::Record, || {
                    vec![("id", U32), ("words", ListU64)]
                })?;
                fill_words(&mut list, &w[..r.n]);
                row!(tid; int(r.tsc), int(r.ev as u64), list(&list));
            }
        }
        tsc_lo = tsc_lo.min(r.tsc);
        tsc_hi = tsc_hi.max(r.tsc);
        done += r.bytes;
        if done % (1 << 20) < r.bytes {
            if let Some(m) = mapped.as_mut() {
                for st in streams.iter_mut() {
                    st.release_read(m);
                }
            }
            if !progress(done, size) {
                return Err(ReadError::Interrupted);
            }
        }
        current =
            match streams[i].next(&file, path, &mut s, mapped.as_ref().map(MappedRange::bytes))? {
                Some(next) => {
                    let key = (next.tsc, cpu, i);
                    match heap.peek() {
                        Some(&Reverse(other)) if other < key => {
                            let Reverse((_, _, j)) = heap.pop().expect("peeked");
                            streams[i].head = Some(next);
                            heap.push(Reverse(key));
                            Some(take_head(&mut streams, j))
                        }
                        _ => Some((i, next)),
                    }
                }
                None => heap
                    .pop()
                    .map(|Reverse((_, _, j))| take_head(&mut streams, j)),
            };
    }
    for (st, classes) in streams.iter().zip(&volume) {
        for (class, &bytes) in CLASSES.iter().zip(classes).filter(|(_, &b)| b > 0) {
            *s.volume.entry((st.cpu, (*class).into())).or_default() += bytes;
        }
    }
    s.rows
        .extend(t.rows_by_name().map(|(name, n)| (name.to_string(), n)));
    if tsc_lo <= tsc_hi {
        s.tsc_range = Some((tsc_lo, tsc_hi));
    }
    s.time_range = s.tsc_range.map(|(a, b)| (ns(a), ns(b)));
    let d = std::mem::take(&mut s.damage);
    let p = path.display();
    if d.inner_header.0 > 0 {
        let (n, cpu, at) = d.inner_header;
        s.problem(format!(
            "{p}: at byte {at}: {n} window headers among pCPU {cpu}'s records (the first there): a window's declared size covers another's, whose records were read as this pCPU's"
        ));
    }
    if d.cut.0 > 0 {
        let (n, cpu, at) = d.cut;
        s.problem(format!(
            "{p}: at byte {at}: {n} records cut at the end of their window (the first there, pCPU {cpu}); the rest of each window skipped"
        ));
    }
    if d.backwards.0 > 0 {
        let (n, cpu, at) = d.backwards;
        s.problem(format!(
            "{p}: at byte {at}: {n} records whose TSC runs backwards on their pCPU (the first there, pCPU {cpu}): records out of place or damaged"
        ));
    }
    if d.unknown_class.0 > 0 {
        let ((n, cpu, at), ev) = (d.unknown_class, d.unknown_class_ev);
        s.problem(format!(
            "{p}: at byte {at}: {n} records of a class Xen's trace.h does not define (the first there, pCPU {cpu}, event id 0x{ev:07x}): damaged records, or records read out of step after one; kept as xen_record rows"
        ));
    }
    progress(size, size);
    Ok(s)
}
