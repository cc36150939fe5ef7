//! xentrace binary files (Xen's `xentrace` output).
//!
//! A record is a 32-bit header (event id: 28 bits, extra-word count: 3
//! bits, TSC-present: 1 bit), an optional 64-bit TSC and up to seven u32
//! words. xentrace writes per-pCPU *windows*: a `TRC_TRACE_CPU_CHANGE`
//! record (cpu, byte count) followed by that many bytes of the pCPU's
//! records. The **tokenizer** indexes the windows; the **sorter** walks
//! every pCPU's windows in file order (one window in memory per pCPU) and
//! merges the pCPUs by TSC with a heap, ties by pCPU number; a record
//! without a TSC inherits the last TSC of its pCPU. The **parser** decodes
//! scheduler, HVM and power-management records into typed tables and
//! everything else into `xen_record` (id, words): nothing is dropped.

use crate::error::{ReadError, ReadResult};
use crate::sink::{ColumnSpec, ColumnType, EventSink, RowHeader, TableId, TableSpec};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// TRC_TRACE_CPU_CHANGE: a window of one pCPU's records follows.
pub const CPU_CHANGE: u32 = 0x0001_f003;
/// TRC_LOST_RECORDS.
pub const LOST_RECORDS: u32 = 0x0001_f001;
/// TRC_TRACE_WRAP_BUFFER: padding.
pub const WRAP_BUFFER: u32 = 0x0001_f004;
/// Run states by number (public/vcpu.h), then "unknown".
static RUNSTATES: [&str; 5] = ["running", "runnable", "blocked", "offline", "unknown"];
static GRANT_OPS: [&str; 3] = ["map", "unmap", "transfer"];
static IO_SPACES: [&str; 2] = ["port", "mem"];
static IO_OPS: [&str; 2] = ["read", "write"];
static SCHEDULERS: [&str; 8] = [
    "credit", "credit2", "sedf", "arinc653", "rtds", "null", "sched6", "sched7",
];

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
}

struct Window {
    cpu: u32,
    start: u64,
    len: u64,
}

/// The class names xenalyze uses, indexed by [`class_index`].
const CLASSES: [&str; 9] = [
    "gen", "sched", "dom0op", "hvm", "mem", "pv", "shadow", "hw", "other",
];

/// The class of an event id, as an index into [`CLASSES`].
#[inline]
fn class_index(ev: u32) -> usize {
    // the classes are the bits 0x001 .. 0x080 of the class field, alone
    let c = (ev >> 16) & 0xfff;
    if c.is_power_of_two() && c <= 0x080 {
        c.trailing_zeros() as usize
    } else {
        8
    }
}

/// HVM handler record names (x86 hvm code's TRC_HVM_HANDLER + n, the
/// 64-bit flag 0x100 folded in, the write variants apart), each once.
pub static HVM_HANDLERS: [&str; 35] = [
    "unknown",
    "pf_xen",
    "pf_inject",
    "inj_exc",
    "inj_virq",
    "reinj_virq",
    "io_read",
    "io_write",
    "cr_read",
    "cr_write",
    "dr_read",
    "dr_write",
    "msr_read",
    "msr_write",
    "cpuid",
    "intr",
    "nmi",
    "smi",
    "vmcall",
    "hlt",
    "invlpg",
    "mce",
    "ioport_read",
    "iomem_read",
    "clts",
    "lmsw",
    "rdtsc",
    "intr_window",
    "npf",
    "realmode_emulate",
    "trap",
    "trap_debug",
    "vlapic",
    "ioport_write",
    "iomem_write",
];

/// Name of an HVM handler record (public/trace.h, TRC_HVM_HANDLER + n,
/// with the 64-bit flag 0x100 and the write variants +0x200 folded in).
pub fn hvm_handler_name(ev: u32) -> &'static str {
    // handler number -> index into HVM_HANDLERS (0: unknown)
    const BY_NUMBER: [u8; 0x26] = [
        0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24,
        25, 26, 0, 0, 0, 0, 0, 27, 28, 29, 30, 31, 32,
    ];
    let k = match ev & 0xfff {
        0x216 => 33,
        0x217 => 34,
        n => BY_NUMBER.get((n & 0xff) as usize).copied().unwrap_or(0),
    };
    HVM_HANDLERS[k as usize]
}

/// Name of a Xen hypercall number (public/xen.h).
pub fn hypercall_name(op: u32) -> &'static str {
    HYPERCALLS
        .get(op as usize)
        .copied()
        .unwrap_or(HYPERCALLS[HYPERCALLS.len() - 1])
}

/// Xen hypercall names by number (public/xen.h), then "unknown".
pub static HYPERCALLS: [&str; 43] = [
    "set_trap_table",
    "mmu_update",
    "set_gdt",
    "stack_switch",
    "set_callbacks",
    "fpu_taskswitch",
    "sched_op_compat",
    "platform_op",
    "set_debugreg",
    "get_debugreg",
    "update_descriptor",
    "ni",
    "memory_op",
    "multicall",
    "update_va_mapping",
    "set_timer_op",
    "event_channel_op_compat",
    "xen_version",
    "console_io",
    "physdev_op_compat",
    "grant_table_op",
    "vm_assist",
    "update_va_mapping_otherdomain",
    "iret",
    "vcpu_op",
    "set_segment_base",
    "mmuext_op",
    "xsm_op",
    "nmi_op",
    "sched_op",
    "callback_op",
    "xenoprof_op",
    "event_channel_op",
    "physdev_op",
    "hvm_op",
    "sysctl",
    "domctl",
    "kexec_op",
    "tmem_op",
    "argo_op",
    "xenpmu_op",
    "dm_op",
    "unknown",
];

/// Bytes the tokenizer reads at a time.
const TOKENIZE_CHUNK: u64 = 1 << 20;

/// Index the per-pCPU windows (cpu, start, length) and the bytes the last
/// one is missing. The headers are read from 1 MiB chunks of the file: a
/// `pread` of each 12-byte header cost a system call per window (100 k on
/// the benchmark's generated file, whose windows are a kilobyte), more than
/// reading the whole file once.
fn tokenize(path: &Path, file: &File, size: u64) -> ReadResult<(Vec<Window>, u64)> {
    let mut windows = Vec::new();
    let mut pos = 0u64;
    // zeroed by calloc, never again: read_exact_at fills what is used
    let mut chunk = vec![0u8; TOKENIZE_CHUNK.min(size) as usize];
    let (mut chunk_at, mut chunk_len) = (0u64, 0usize);
    while pos + 12 <= size {
        if pos < chunk_at || pos + 12 > chunk_at + chunk_len as u64 {
            chunk_len = TOKENIZE_CHUNK.min(size - pos) as usize;
            file.read_exact_at(&mut chunk[..chunk_len], pos)
                .map_err(|e| ReadError::Io {
                    path: path.into(),
                    source: e,
                })?;
            chunk_at = pos;
        }
        let at = (pos - chunk_at) as usize;
        let head = &chunk[at..at + 12];
        let w = u32::from_le_bytes(head[0..4].try_into().expect("4"));
        if w & 0x0fff_ffff != CPU_CHANGE || (w >> 28) & 7 != 2 || w >> 31 != 0 {
            return Err(ReadError::corrupt(
                path,
                pos,
                "corrupt-window",
                format!("expected a cpu-change record (0x{CPU_CHANGE:x}), found header 0x{w:08x}"),
            ));
        }
        let cpu = u32::from_le_bytes(head[4..8].try_into().expect("4"));
        let len = u32::from_le_bytes(head[8..12].try_into().expect("4")) as u64;
        if cpu > 4096 {
            return Err(ReadError::corrupt(
                path,
                pos,
                "corrupt-window",
                format!("cpu {cpu} in a cpu-change record"),
            ));
        }
        let start = pos + 12;
        if start + len > size {
            windows.push(Window {
                cpu,
                start,
                len: size - start,
            });
            return Ok((windows, start + len - size));
        }
        windows.push(Window { cpu, start, len });
        pos = start + len;
    }
    Ok((windows, size - pos))
}

/// One record: header word, TSC (inherited when absent) and words.
#[derive(Clone, Copy, Debug)]
struct Rec {
    ev: u32,
    tsc: u64,
    n: usize,
    words: [u32; 7],
    bytes: u64,
}

struct Stream {
    cpu: u32,
    windows: Vec<(u64, u64)>,
    next_window: usize,
    /// File bytes from `buf_start`: the current window and often the next
    /// ones of this pCPU (see `fill`).
    buf: Vec<u8>,
    /// The bytes of `buf` read (the rest is left from larger reads).
    buf_len: usize,
    buf_start: u64,
    /// The current window is `buf[pos..win_end]`.
    pos: usize,
    win_end: usize,
    last_tsc: u64,
    /// The head record while another stream leads the merge.
    head: Option<Rec>,
}

/// Most bytes one read brings in for a stream.
const READ_AHEAD: u64 = 1 << 20;

impl Stream {
    /// The next record of this pCPU, or `None` at its end. The common case
    /// (another record in the current window) is inlined into the merge
    /// loop, so the record stays in registers: returned through memory, it
    /// was stored field by field and reloaded whole, and the stalled reload
    /// was a seventh of the reader's time.
    #[inline(always)]
    fn next(&mut self, file: &File, path: &Path, s: &mut XenSummary) -> ReadResult<Option<Rec>> {
        loop {
            if self.pos + 4 <= self.win_end {
                let b = &self.buf[self.pos..self.win_end];
                let w = u32::from_le_bytes(b[0..4].try_into().expect("4"));
                let n = ((w >> 28) & 7) as usize;
                let has_tsc = w >> 31 == 1;
                let size = 4 + if has_tsc { 8 } else { 0 } + 4 * n;
                if b.len() >= size {
                    let mut off = 4;
                    if has_tsc {
                        self.last_tsc = u64::from_le_bytes(b[4..12].try_into().expect("8"));
                        off = 12;
                    }
                    let mut words = [0u32; 7];
                    for (i, wd) in words.iter_mut().enumerate().take(n) {
                        *wd = u32::from_le_bytes(
                            b[off + 4 * i..off + 4 * i + 4].try_into().expect("4"),
                        );
                    }
                    self.pos += size;
                    return Ok(Some(Rec {
                        ev: w & 0x0fff_ffff,
                        tsc: self.last_tsc,
                        n,
                        words,
                        bytes: size as u64,
                    }));
                }
            }
            if !self.next_window(file, path, s)? {
                return Ok(None);
            }
        }
    }

    /// Move to the next window (warning about a record cut at the end of
    /// the current one); false when there is none.
    #[cold]
    #[inline(never)]
    fn next_window(&mut self, file: &File, path: &Path, s: &mut XenSummary) -> ReadResult<bool> {
        if self.pos + 4 <= self.win_end {
            s.warnings.push(format!(
                "{}: cpu {}: a record is cut at the end of its window; rest of window skipped",
                path.display(),
                self.cpu
            ));
        }
        let Some(&(start, len)) = self.windows.get(self.next_window) else {
            self.pos = self.win_end;
            return Ok(false);
        };
        if start < self.buf_start || start + len > self.buf_start + self.buf_len as u64 {
            self.fill(file, path)?;
        }
        self.next_window += 1;
        self.pos = (start - self.buf_start) as usize;
        self.win_end = self.pos + len as usize;
        Ok(true)
    }

    /// Read the next window, with as many of this pCPU's following windows
    /// as fit in [`READ_AHEAD`] bytes while at least a quarter of the bytes
    /// read are this pCPU's. Windows can be a kilobyte (the generated
    /// benchmark file's are): one `pread` each put the kernel's read path
    /// at a few percent of the import, and with few pCPUs the windows
    /// between this pCPU's are cheap to read past.
    fn fill(&mut self, file: &File, path: &Path) -> ReadResult<()> {
        let (start, len) = self.windows[self.next_window];
        let (mut end, mut own) = (start + len, len);
        for &(s2, l2) in &self.windows[self.next_window + 1..] {
            let span = s2 + l2 - start;
            if span > READ_AHEAD || 4 * (own + l2) < span {
                break;
            }
            end = s2 + l2;
            own += l2;
        }
        let n = (end - start) as usize;
        if n > self.buf.len() {
            // a fresh zeroed block (calloc: no memset, no copy of the old
            // bytes as growing in place would do), kept for later windows
            self.buf = vec![0u8; n.next_power_of_two().min(READ_AHEAD as usize).max(n)];
        }
        self.buf_len = n;
        file.read_exact_at(&mut self.buf[..n], start)
            .map_err(|e| ReadError::Io {
                path: path.into(),
                source: e,
            })?;
        self.buf_start = start;
        Ok(())
    }
}

fn col(name: &str, ty: ColumnType) -> ColumnSpec {
    ColumnSpec {
        name: name.into(),
        ty,
    }
}

/// Every table this reader writes. An arm names its table by variant, so
/// finding the table's id is an array index: hashing the record id per
/// record was a fifteenth of the reader's time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Table {
    RunstateChange,
    ContinueRunning,
    Switch,
    SwitchInfprev,
    SwitchInfnext,
    Sleep,
    Wake,
    Yield,
    Block,
    DomAdd,
    DomRemove,
    HvmVmentry,
    HvmVmexit,
    HvmHlt,
    HvmVmcall,
    HvmIntr,
    HvmNpf,
    HvmIo,
    HvmHandler,
    PmFreqChange,
    PmIdleEntry,
    PmIdleExit,
    Grant,
    PvHypercall,
    SchedClass,
    Record,
}

const TABLES: usize = Table::Record as usize + 1;

impl Table {
    fn name(self) -> &'static str {
        const NAMES: [&str; TABLES] = [
            "xen_runstate_change",
            "xen_continue_running",
            "xen_switch",
            "xen_switch_infprev",
            "xen_switch_infnext",
            "xen_sleep",
            "xen_wake",
            "xen_yield",
            "xen_block",
            "xen_dom_add",
            "xen_dom_remove",
            "xen_hvm_vmentry",
            "xen_hvm_vmexit",
            "xen_hvm_hlt",
            "xen_hvm_vmcall",
            "xen_hvm_intr",
            "xen_hvm_npf",
            "xen_hvm_io",
            "xen_hvm_handler",
            "xen_pm_freq_change",
            "xen_pm_idle_entry",
            "xen_pm_idle_exit",
            "xen_grant",
            "xen_pv_hypercall",
            "xen_sched_class",
            "xen_record",
        ];
        NAMES[self as usize]
    }
}

/// The tables declared so far (in declaration order) and the rows each
/// was given: every decode arm asks for its table once and writes one row.
#[derive(Default)]
struct Tables {
    ids: [Option<TableId>; TABLES],
    rows: [u64; TABLES],
    declared: Vec<Table>,
}

impl Tables {
    /// The id of `table`, declared with `cols` (after `tsc`) the first time.
    #[inline(always)]
    fn get<S: EventSink + ?Sized>(
        &mut self,
        sink: &mut S,
        table: Table,
        cols: &[(&str, ColumnType)],
    ) -> ReadResult<TableId> {
        self.rows[table as usize] += 1;
        match self.ids[table as usize] {
            Some(id) => Ok(id),
            None => self.declare(sink, table, cols),
        }
    }

    #[cold]
    #[inline(never)]
    fn declare<S: EventSink + ?Sized>(
        &mut self,
        sink: &mut S,
        table: Table,
        cols: &[(&str, ColumnType)],
    ) -> ReadResult<TableId> {
        let mut columns = vec![col("tsc", ColumnType::U64)];
        columns.extend(cols.iter().map(|(n, t)| col(n, t.clone())));
        let id = sink
            .declare_table(&TableSpec {
                name: table.name().into(),
                system: "xen".into(),
                columns,
            })
            .map_err(|what| ReadError::Sink { what })?;
        self.ids[table as usize] = Some(id);
        self.declared.push(table);
        Ok(id)
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

/// TSC cycles to nanoseconds at a fixed frequency, rounded to the
/// nearest: `ns = tsc * (1e9 / hz)` with the factor held as an integer
/// part and a 64-bit binary fraction, so a record costs integer
/// multiplications (a float division and conversion per record were a
/// tenth of the reader's time). When `hz` is a whole number of Hz (what
/// `xl info` and host.json give) the factor is within 2^-65 of exact, so
/// the product is within a nanosecond of the exact value, and a check in
/// 128-bit integers makes it the exact value rounded half up (a proptest
/// found a TSC where the product alone was 1 ns off); otherwise it is as
/// precise as a double.
struct TscToNs {
    whole: u64,
    frac: u64,
    /// the frequency, when a whole number of Hz: the exactness check's
    exact_hz: Option<u64>,
}

impl TscToNs {
    fn new(hz: f64) -> Self {
        if hz.fract() == 0.0 && hz >= 1.0 && hz < 2f64.powi(63) {
            let hz = hz as u128;
            let whole = 1_000_000_000u128 / hz;
            let rest = 1_000_000_000u128 % hz;
            // rest / hz as a 64-bit fraction, rounded (rest < hz < 2^63)
            let frac = ((rest << 64) + hz / 2) / hz;
            // the rounding can carry into the whole part
            let (whole, frac) = if frac >> 64 != 0 {
                (whole + 1, 0)
            } else {
                (whole, frac as u64)
            };
            TscToNs {
                whole: whole as u64,
                frac,
                exact_hz: Some(hz as u64),
            }
        } else {
            let whole = (1e9 / hz).trunc();
            // the remainder 1e9 - whole * hz, rounded once (fused)
            let rest = (-whole).mul_add(hz, 1e9).max(0.0);
            TscToNs {
                whole: whole as u64,
                frac: (rest / hz * 2f64.powi(64)) as u64,
                exact_hz: None,
            }
        }
    }

    #[inline]
    fn ns(&self, tsc: u64) -> i64 {
        let part = ((tsc as u128 * self.frac as u128 + (1 << 63)) >> 64) as u64;
        let q = tsc.wrapping_mul(self.whole).wrapping_add(part);
        let Some(hz) = self.exact_hz else {
            return q as i64;
        };
        // q is within 1 of floor((2·tsc·1e9 + hz) / (2·hz)); make it that
        // (all products < 2^110)
        let t = tsc as u128 * 2_000_000_000 + hz as u128;
        let d = 2 * hz as u128;
        let q = q as u128;
        let q = if q * d > t {
            q - 1
        } else if (q + 1) * d <= t {
            q + 1
        } else {
            q
        };
        q as i64
    }
}

fn dom_vcpu(w: u32) -> (i64, i64) {
    ((w >> 16) as i64, (w & 0xffff) as i64)
}

/// Read `path` into `sink`. `cpu_hz` converts TSC to ns (required).
pub fn read_xentrace<S: EventSink + ?Sized>(
    path: &Path,
    cpu_hz: f64,
    sink: &mut S,
    progress: &mut dyn FnMut(u64, u64) -> bool,
) -> ReadResult<XenSummary> {
    let file = File::open(path).map_err(|e| ReadError::Io {
        path: path.into(),
        source: e,
    })?;
    let size = file
        .metadata()
        .map_err(|e| ReadError::Io {
            path: path.into(),
            source: e,
        })?
        .len();
    if size == 0 {
        return Err(ReadError::corrupt(
            path,
            0,
            "empty",
            "empty file, not a xentrace file",
        ));
    }
    if !(cpu_hz.is_finite() && cpu_hz > 1e6) {
        return Err(ReadError::Unsupported {
            path: path.into(),
            offset: 0,
            what: format!("cpu frequency {cpu_hz} Hz; pass the host's (e.g. --cpu-hz 2.4e9)"),
        });
    }
    let (windows, truncated) = tokenize(path, &file, size)?;
    let mut s = XenSummary {
        truncated_bytes: truncated,
        ..Default::default()
    };
    if truncated > 0 {
        s.warnings.push(format!(
            "{}: at byte {}: file is truncated: {truncated} bytes of the last window missing",
            path.display(),
            size
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
    let mut streams: Vec<Stream> = per_cpu
        .into_iter()
        .map(|(cpu, windows)| Stream {
            cpu,
            windows,
            next_window: 0,
            buf: Vec::new(),
            buf_len: 0,
            buf_start: 0,
            pos: 0,
            win_end: 0,
            last_tsc: 0,
            head: None,
        })
        .collect();
    let mut heap = BinaryHeap::new();
    for (i, st) in streams.iter_mut().enumerate() {
        st.head = st.next(&file, path, &mut s)?;
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
    use ColumnType::{Enum, ListU64, I64, U32, U64};
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
                let tid = t.get(
                    sink,
                    Table::RunstateChange,
                    &[
                        ("dom", I64),
                        ("vcpu", I64),
                        ("old_state", Enum(&RUNSTATES)),
                        ("new_state", Enum(&RUNSTATES)),
                    ],
                )?;
                let (d, v) = dom_vcpu(w[0]);
                let state = |n: u32| (n as usize).min(RUNSTATES.len() - 1);
                let (old, new) = (state((ev >> 8) & 0xf), state((ev >> 4) & 0xf));
                row!(tid; int(r.tsc), int(d), int(v), key(old), key(new));
            }
            0x0002_1002 if r.n >= 1 => {
                let tid = t.get(sink, Table::ContinueRunning, &[("dom", I64), ("vcpu", I64)])?;
                let (d, v) = dom_vcpu(w[0]);
                row!(tid; int(r.tsc), int(d), int(v));
            }
            0x0002_800a if r.n >= 4 => {
                let tid = t.get(
                    sink,
                    Table::Switch,
                    &[
                        ("prev_dom", I64),
                        ("prev_vcpu", I64),
                        ("next_dom", I64),
                        ("next_vcpu", I64),
                    ],
                )?;
                row!(tid; int(r.tsc), int(w[0] as i64), int(w[1] as i64), int(w[2] as i64), int(w[3] as i64));
            }
            0x0002_800e if r.n >= 3 => {
                let tid = t.get(
                    sink,
                    Table::SwitchInfprev,
                    &[("dom", I64), ("vcpu", I64), ("runtime", U64)],
                )?;
                row!(tid; int(r.tsc), int(w[0] as i64), int(w[1] as i64), int(w[2] as u64));
            }
            0x0002_800f if r.n >= 4 => {
                let tid = t.get(
                    sink,
                    Table::SwitchInfnext,
                    &[("dom", I64), ("vcpu", I64), ("waited", U64), ("slice", I64)],
                )?;
                row!(tid; int(r.tsc), int(w[0] as i64), int(w[1] as i64), int(w[2] as u64), int(w[3] as i32 as i64));
            }
            0x0002_8003..=0x0002_8006 if r.n >= 2 => {
                let table = [Table::Sleep, Table::Wake, Table::Yield, Table::Block]
                    [(r.ev - 0x0002_8003) as usize];
                let tid = t.get(sink, table, &[("dom", I64), ("vcpu", I64)])?;
                row!(tid; int(r.tsc), int(w[0] as i64), int(w[1] as i64));
            }
            0x0008_1001 | 0x0008_1101 => {
                let tid = t.get(sink, Table::HvmVmentry, &[])?;
                row!(tid; int(r.tsc));
            }
            0x0008_1002 | 0x0008_1102 if r.n >= 2 => {
                let tid = t.get(
                    sink,
                    Table::HvmVmexit,
                    &[("exit_reason", U32), ("rip", U64)],
                )?;
                let rip = if r.ev & 0x100 != 0 && r.n >= 3 {
                    wide(w, 1)
                } else {
                    w[1] as u64
                };
                row!(tid; int(r.tsc), int(w[0] as u64), int(rip));
            }
            0x0080_1001 if r.n >= 2 => {
                let tid = t.get(
                    sink,
                    Table::PmFreqChange,
                    &[("old_mhz", U32), ("new_mhz", U32)],
                )?;
                row!(tid; int(r.tsc), int(w[0] as u64), int(w[1] as u64));
            }
            0x0080_1002 | 0x0080_1003 if r.n >= 1 => {
                let table = if r.ev == 0x0080_1002 {
                    Table::PmIdleEntry
                } else {
                    Table::PmIdleExit
                };
                let tid = t.get(sink, table, &[("cstate", U32)])?;
                row!(tid; int(r.tsc), int(w[0] as u64));
            }
            0x0010_0001..=0x0010_0003 if r.n >= 1 => {
                // grant_table.c: TRACE_1D(event, domid of the granting domain)
                let tid = t.get(
                    sink,
                    Table::Grant,
                    &[("op", Enum(&GRANT_OPS)), ("dom", I64)],
                )?;
                let op = (r.ev - 0x0010_0001) as usize;
                row!(tid; int(r.tsc), key(op), int(w[0] as i64));
            }
            0x0002_8001 | 0x0002_8002 if r.n >= 1 => {
                let table = if r.ev == 0x0002_8001 {
                    Table::DomAdd
                } else {
                    Table::DomRemove
                };
                let tid = t.get(sink, table, &[("dom", I64)])?;
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
                let tid = t.get(sink, table, &[(col, U32)])?;
                row!(tid; int(r.tsc), int(w[0] as u64));
            }
            0x0008_2021 if r.n >= 6 => {
                let tid = t.get(
                    sink,
                    Table::HvmNpf,
                    &[
                        ("gpa", U64),
                        ("mfn", U64),
                        ("qualification", U32),
                        ("p2mt", U32),
                    ],
                )?;
                let gpa = wide(w, 0);
                let mfn = wide(w, 2);
                row!(tid; int(r.tsc), int(gpa), int(mfn), int(w[4] as u64), int(w[5] as u64));
            }
            // emulated I/O (hvmtrace_io_assist): address (2 words with the
            // 64-bit flag), then the data unless it was a pointer
            ev if matches!(
                ev & !0x100,
                0x0008_2016 | 0x0008_2017 | 0x0008_2216 | 0x0008_2217
            ) && r.n >= 1 + ((ev >> 8) & 1) as usize =>
            {
                let na = 1 + ((ev >> 8) & 1) as usize;
                let tid = t.get(
                    sink,
                    Table::HvmIo,
                    &[
                        ("space", Enum(&IO_SPACES)),
                        ("op", Enum(&IO_OPS)),
                        ("addr", U64),
                        ("data", U64),
                    ],
                )?;
                let addr = if na == 2 { wide(w, 0) } else { w[0] as u64 };
                let data = if r.n > na { Some(w[na] as u64) } else { None };
                let space = (ev & 0xff != 0x16) as usize;
                let op = (ev & 0x200 != 0) as usize;
                row!(tid; int(r.tsc), key(space), key(op), int(addr), opt(data));
            }
            ev if ev & 0xffff_f000 == 0x0008_2000 => {
                let tid = t.get(
                    sink,
                    Table::HvmHandler,
                    &[("handler", Enum(&HVM_HANDLERS)), ("words", ListU64)],
                )?;
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
                let tid = t.get(
                    sink,
                    Table::PvHypercall,
                    &[("op", U32), ("op_name", Enum(&HYPERCALLS))],
                )?;
                row!(tid; int(r.tsc), int(op as u64), name(hypercall_name(op)));
            }
            ev if ev & 0xffff_f000 == 0x0002_2000 => {
                // TRC_SCHED_CLASS: scheduler id in bits 9-11, event in bits 0-8
                let tid = t.get(
                    sink,
                    Table::SchedClass,
                    &[
                        ("scheduler", Enum(&SCHEDULERS)),
                        ("event", U32),
                        ("words", ListU64),
                    ],
                )?;
                let sched = ((ev >> 9) & 7) as usize;
                fill_words(&mut list, &w[..r.n]);
                row!(tid; int(r.tsc), key(sched), int((ev & 0x1ff) as u64), list(&list));
            }
            LOST_RECORDS => {
                *s.lost.entry(cpu).or_default() += if r.n >= 1 { w[0] as u64 } else { 1 };
            }
            WRAP_BUFFER => {}
            _ => {
                let tid = t.get(sink, Table::Record, &[("id", U32), ("words", ListU64)])?;
                fill_words(&mut list, &w[..r.n]);
                row!(tid; int(r.tsc), int(r.ev as u64), list(&list));
            }
        }
        tsc_lo = tsc_lo.min(r.tsc);
        tsc_hi = tsc_hi.max(r.tsc);
        done += r.bytes;
        if done % (1 << 20) < r.bytes && !progress(done, size) {
            return Err(ReadError::Interrupted);
        }
        current = match streams[i].next(&file, path, &mut s)? {
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
    s.rows.extend(
        t.declared
            .iter()
            .map(|&table| (table.name().to_string(), t.rows[table as usize])),
    );
    if tsc_lo <= tsc_hi {
        s.tsc_range = Some((tsc_lo, tsc_hi));
    }
    s.time_range = s.tsc_range.map(|(a, b)| (ns(a), ns(b)));
    progress(size, size);
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The exact rounded value of tsc * 1e9 / hz, for whole hz.
    fn exact(tsc: u64, hz: u64) -> i64 {
        ((tsc as u128 * 1_000_000_000 * 2 + hz as u128) / (2 * hz as u128)) as i64
    }

    #[test]
    fn tsc_to_ns_at_common_frequencies() {
        for hz in [
            2_400_000_000u64,
            2_394_458_000,
            3_000_000_000,
            1_000_000_000,
            1_500_000,
        ] {
            let c = TscToNs::new(hz as f64);
            for tsc in [
                0,
                1,
                999,
                1_000,
                3_000,
                2_400_000_000,
                1 << 40,
                1 << 50,
                (1 << 52) + 7,
            ] {
                assert_eq!(c.ns(tsc), exact(tsc, hz), "tsc {tsc} at {hz} Hz");
            }
        }
        // where the multiply alone was 1 ns off (found by the proptest below)
        for (tsc, hz) in [
            (16_992_516_567_171_789u64, 6_289_222_859u64),
            (4_220_929_263_542_164, 901_794_698),
        ] {
            assert_eq!(TscToNs::new(hz as f64).ns(tsc), exact(tsc, hz));
        }
    }

    proptest! {
        #[test]
        fn tsc_to_ns_is_the_rounded_exact_value(tsc in 0u64..1 << 54, hz in 1_000_000u64..10_000_000_000) {
            // the multiply can be 1 ns off where the exact value sits near a
            // half; the 128-bit check must always correct it
            prop_assert_eq!(TscToNs::new(hz as f64).ns(tsc), exact(tsc, hz));
        }

        #[test]
        fn fractional_frequencies_agree_with_double_arithmetic(tsc in 0u64..1 << 50, hz in 1e6f64..1e10) {
            // the double formula is itself only as exact as its last bits
            let x = tsc as f64 * 1e9 / hz;
            let slack = 1.0 + x * 4e-16;
            prop_assert!((TscToNs::new(hz).ns(tsc) as f64 - x).abs() <= slack);
        }
    }
}
