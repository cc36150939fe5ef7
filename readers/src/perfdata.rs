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
//! ([`RoundSorter`]) keeps the current round's samples and, at each
//! `FINISHED_ROUND`, sorts them and emits everything up to the previous
//! round's latest time, so memory is one round, not the file.

use crate::bytes::{Bytes, Endian};
use crate::error::{ReadError, ReadResult};
use crate::ftrace::field::{FieldDecoder, FieldKind};
use crate::ftrace::format::{parse_format, EventFormat};
use crate::sink::{
    field_column_name, ColumnSpec, ColumnType, EventSink, RowHeader, TableId, TableSpec, Value,
};
use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

const SAMPLE: u32 = 9;
const LOST: u32 = 2;
const FINISHED_ROUND: u32 = 68;
const TRACEPOINT: u32 = 2;

/// One `perf_event_attr` with its sample ids.
#[derive(Clone, Debug)]
pub struct Attr {
    /// PERF_TYPE_*.
    pub kind: u32,
    /// Event config (tracepoint id for tracepoints).
    pub config: u64,
    /// sample_type bits.
    pub sample_type: u64,
    /// read_format bits.
    pub read_format: u64,
    /// Name from the EVENT_DESC feature, if any.
    pub name: String,
}

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
}

fn read_at(
    f: &File,
    path: &Path,
    off: u64,
    len: u64,
    size: u64,
    what: &str,
) -> ReadResult<Vec<u8>> {
    if off > size || len > size - off || len > (1 << 31) {
        return Err(ReadError::corrupt(
            path,
            off,
            "past-eof",
            format!("{what}: {len} bytes at {off} run past the end of the file ({size} bytes)"),
        ));
    }
    let mut v = vec![0u8; len as usize];
    f.read_exact_at(&mut v, off)
        .map_err(|e| ReadError::io(path, e))?;
    Ok(v)
}

fn perf_string(b: &mut Bytes<'_>) -> ReadResult<String> {
    let n = b.u32("string length")? as usize;
    let raw = b.take(n, "string")?;
    Ok(String::from_utf8_lossy(raw.split(|&c| c == 0).next().unwrap_or(&[])).into_owned())
}

/// Event formats from the tracing-data feature (trace.dat-style header).
fn tracing_formats(data: &[u8], base: u64, path: &Path) -> ReadResult<(Vec<EventFormat>, usize)> {
    let mut b = Bytes::new(data, base, Endian::Little, path);
    if b.take(10, "tracing magic")? != b"\x17\x08\x44tracing" {
        return Err(b.corrupt("corrupt-header", "tracing data lacks its magic"));
    }
    b.cstr("tracing version")?;
    let endian = if b.u8("endian")? == 1 {
        Endian::Big
    } else {
        Endian::Little
    };
    b.set_endian(endian);
    let _user_long = b.u8("long size")?;
    b.u32("page size")?;
    let mut long = 8;
    for tag in ["header_page\0", "header_event\0"] {
        if b.take(tag.len(), "header tag")? != tag.as_bytes() {
            return Err(b.corrupt(
                "corrupt-header",
                format!("tracing data: expected {}", tag.trim_end_matches('\0')),
            ));
        }
        let text = b.sized_text(8, tag)?;
        if tag.starts_with("header_page") {
            if let Ok(hp) = crate::ftrace::format::parse_header_page(&text) {
                long = hp.commit_size;
            }
        }
    }
    let mut formats = Vec::new();
    let n = b.u32("ftrace format count")?;
    for _ in 0..n {
        let t = b.sized_text(8, "ftrace format")?;
        if let Ok(f) = parse_format("ftrace", &t) {
            formats.push(f);
        }
    }
    let systems = b.u32("system count")?;
    for _ in 0..systems {
        let sys = b.cstr("system")?;
        let n = b.u32("format count")?;
        for _ in 0..n {
            let t = b.sized_text(8, "event format")?;
            if let Ok(f) = parse_format(&sys, &t) {
                formats.push(f);
            }
        }
    }
    Ok((formats, long))
}

struct Tp {
    spec: TableSpec,
    table: Option<TableId>,
    decoder: FieldDecoder,
    pid_offset: usize,
    rows: u64,
}

/// Samples that are not tracepoints (`perf_sample`).
#[derive(Default)]
struct Other {
    table: Option<TableId>,
    rows: u64,
}

/// Read `path` into `sink`.
pub fn read_perfdata<S: EventSink + ?Sized>(
    path: &Path,
    sink: &mut S,
    progress: &mut dyn FnMut(u64, u64) -> bool,
) -> ReadResult<PerfSummary> {
    let f = File::open(path).map_err(|e| ReadError::io(path, e))?;
    let size = f.metadata().map_err(|e| ReadError::io(path, e))?.len();
    if size < 104 {
        return Err(ReadError::NotThisFormat {
            path: path.into(),
            expected: "perf.data (PERFILE2)",
        });
    }
    let head = read_at(&f, path, 0, 104, size, "header")?;
    if &head[0..8] != b"PERFILE2" {
        return Err(ReadError::NotThisFormat {
            path: path.into(),
            expected: "perf.data (PERFILE2)",
        });
    }
    let mut h = Bytes::new(&head, 0, Endian::Little, path);
    h.skip(8, "magic")?;
    let _hsize = h.u64("header size")?;
    let attr_size = h.u64("attr size")?;
    let (attrs_off, attrs_len) = (h.u64("attrs offset")?, h.u64("attrs size")?);
    let (data_off, data_len) = (h.u64("data offset")?, h.u64("data size")?);
    h.skip(16, "event types")?;
    let feat = h.take(32, "features")?.to_vec();
    if !(64..=4096).contains(&attr_size) || attrs_len % attr_size != 0 {
        return Err(ReadError::corrupt(
            path,
            16,
            "corrupt-header",
            format!("attr size {attr_size} / attrs section {attrs_len}"),
        ));
    }
    let mut s = PerfSummary::default();
    // attributes and their ids
    let table = read_at(&f, path, attrs_off, attrs_len, size, "attrs")?;
    let mut attrs = Vec::new();
    let mut id_to_attr: HashMap<u64, usize> = HashMap::new();
    for (i, chunk) in table.chunks(attr_size as usize).enumerate() {
        let mut b = Bytes::new(
            chunk,
            attrs_off + i as u64 * attr_size,
            Endian::Little,
            path,
        );
        let kind = b.u32("type")?;
        b.u32("attr size")?;
        let config = b.u64("config")?;
        b.u64("period")?;
        let sample_type = b.u64("sample type")?;
        let read_format = b.u64("read format")?;
        let ids_at = chunk.len() - 16;
        let mut ib = Bytes::new(&chunk[ids_at..], 0, Endian::Little, path);
        let (ioff, ilen) = (ib.u64("ids offset")?, ib.u64("ids size")?);
        let ids = read_at(&f, path, ioff, ilen, size, "ids")?;
        for id in ids.chunks_exact(8) {
            id_to_attr.insert(u64::from_le_bytes(id.try_into().expect("8")), i);
        }
        attrs.push(Attr {
            kind,
            config,
            sample_type,
            read_format,
            name: format!("{kind}:{config}"),
        });
    }
    if attrs.is_empty() {
        return Err(ReadError::corrupt(
            path,
            attrs_off,
            "corrupt-header",
            "no event attributes",
        ));
    }
    // feature sections follow the data section, one pair per set bit
    let mut formats = Vec::new();
    let mut long = 8;
    let bits: Vec<usize> = (0..256)
        .filter(|&i| feat[i / 8] >> (i % 8) & 1 == 1)
        .collect();
    let ft_at = data_off + data_len;
    if let Ok(ft) = read_at(
        &f,
        path,
        ft_at,
        16 * bits.len() as u64,
        size,
        "feature table",
    ) {
        for (k, &bit) in bits.iter().enumerate() {
            let off = u64::from_le_bytes(ft[16 * k..16 * k + 8].try_into().expect("8"));
            let len = u64::from_le_bytes(ft[16 * k + 8..16 * k + 16].try_into().expect("8"));
            let Ok(sec) = read_at(&f, path, off, len, size, "feature") else {
                s.warnings.push(format!(
                    "{}: feature {bit} points past the end of the file; skipped",
                    path.display()
                ));
                continue;
            };
            let mut b = Bytes::new(&sec, off, Endian::Little, path);
            match bit {
                1 => match tracing_formats(&sec, off, path) {
                    Ok((fm, l)) => {
                        formats = fm;
                        long = l;
                    }
                    Err(e) => s.warnings.push(format!("tracing data unreadable: {e}")),
                },
                3 => s.hostname = perf_string(&mut b).ok(),
                4 => s.osrelease = perf_string(&mut b).ok(),
                7 => {
                    let _avail = b.u32("nr cpus available").unwrap_or(0);
                    s.cpus = b.u32("nr cpus online").unwrap_or(0);
                }
                12 => {
                    // EVENT_DESC: names for the attributes, matched by id
                    let n = b.u32("event count").unwrap_or(0);
                    let asz = b.u32("attr size").unwrap_or(0) as usize;
                    for _ in 0..n {
                        if b.skip(asz, "attr").is_err() {
                            break;
                        }
                        let nr = b.u32("id count").unwrap_or(0);
                        let name = perf_string(&mut b).unwrap_or_default();
                        for _ in 0..nr {
                            if let Ok(id) = b.u64("id") {
                                if let Some(&a) = id_to_attr.get(&id) {
                                    attrs[a].name = name.clone();
                                }
                            }
                        }
                    }
                }
                _ => {}
            }
        }
    }
    s.attrs = attrs
        .iter()
        .map(|a| (a.name.clone(), a.kind, a.config))
        .collect();
    // tracepoint tables keyed by ftrace event id
    let mut count: HashMap<&str, usize> = HashMap::new();
    for fm in &formats {
        *count.entry(fm.name.as_str()).or_default() += 1;
    }
    // Indexed by ftrace event id, which the kernel keeps to 16 bits
    // (`common_type`); a format claiming more is left out.
    let mut tps: Vec<Option<Tp>> = Vec::new();
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for fm in &formats {
        let n = seen.entry(fm.name.as_str()).or_default();
        *n += 1;
        let name = if count[fm.name.as_str()] > 1 && *n > 1 {
            format!("{}__{}", fm.system, fm.name)
        } else {
            fm.name.clone()
        };
        let mut typed = Vec::new();
        let mut columns = Vec::new();
        for fld in &fm.fields {
            let kind = FieldKind::classify(fld, long);
            if let Some(ty) = kind.column_type() {
                columns.push(ColumnSpec {
                    name: field_column_name(&fld.name),
                    ty,
                });
                typed.push((fld, kind));
            }
        }
        let pid_offset = fm
            .common
            .iter()
            .find(|c| c.name == "common_pid")
            .map_or(4, |c| c.offset);
        let id = fm.id as usize;
        if id > u16::MAX as usize {
            s.warnings.push(format!(
                "{}: event {}:{} has id {id}, beyond 16 bits; its samples go uncounted",
                path.display(),
                fm.system,
                fm.name
            ));
            continue;
        }
        if tps.len() <= id {
            tps.resize_with(id + 1, || None);
        }
        tps[id] = Some(Tp {
            spec: TableSpec {
                name,
                system: fm.system.clone(),
                columns,
            },
            table: None,
            decoder: FieldDecoder::new(&typed, Endian::Little, long),
            pid_offset,
            rows: 0,
        });
    }
    sink.set_instances(&[String::new()]);
    let ids = IdIndex::new(&id_to_attr);
    let mut other = Other::default();
    let mut sorter = RoundSorter::default();
    let mut by_type = [0u64; 128];
    let mut round_max = 0u64;
    let mut prev_round_max = 0u64;
    let mut pos = data_off;
    let end = (data_off + data_len).min(size);
    let mut buf = vec![0u8; 1 << 20];
    let mut buf_at = u64::MAX;
    let mut buf_len = 0usize;
    let mut last_progress = 0;
    while pos + 8 <= end {
        if buf_at == u64::MAX || pos < buf_at || pos + 8 > buf_at + buf_len as u64 {
            buf_len = (end - pos).min(buf.len() as u64) as usize;
            f.read_exact_at(&mut buf[..buf_len], pos)
                .map_err(|e| ReadError::io(path, e))?;
            buf_at = pos;
        }
        let rel = (pos - buf_at) as usize;
        let rtype = u32::from_le_bytes(buf[rel..rel + 4].try_into().expect("4"));
        let rsize = u16::from_le_bytes(buf[rel + 6..rel + 8].try_into().expect("2")) as u64;
        if rsize < 8 {
            return Err(ReadError::corrupt(
                path,
                pos,
                "corrupt-record",
                format!("record of size {rsize}"),
            ));
        }
        if pos + rsize > end {
            s.warnings.push(format!(
                "{}: at byte {pos}: last record cut off; file truncated",
                path.display()
            ));
            break;
        }
        if rel + rsize as usize > buf_len {
            buf_at = u64::MAX;
            continue;
        }
        let rec = &buf[rel..rel + rsize as usize];
        match by_type.get_mut(rtype as usize) {
            Some(n) => *n += 1,
            None => *s.records.entry(rtype).or_default() += 1,
        }
        match rtype {
            SAMPLE => {
                let (a, t) = sample_time(rec, &attrs, &ids);
                round_max = round_max.max(t);
                sorter.push(t, a, rec);
            }
            LOST if rec.len() >= 24 => {
                s.lost += u64::from_le_bytes(rec[16..24].try_into().expect("8"))
            }
            FINISHED_ROUND => {
                sorter.flush(prev_round_max, |r, a| {
                    emit(r, attrs.get(a as usize), &mut tps, &mut other, sink, &mut s)
                })?;
                prev_round_max = round_max;
            }
            _ => {}
        }
        pos += rsize;
        if pos - last_progress > (8 << 20) {
            last_progress = pos;
            if !progress(pos - data_off, data_len) {
                return Err(ReadError::Interrupted);
            }
        }
    }
    sorter.flush(u64::MAX, |r, a| {
        emit(r, attrs.get(a as usize), &mut tps, &mut other, sink, &mut s)
    })?;
    for (t, n) in by_type.iter().enumerate().filter(|(_, &n)| n > 0) {
        *s.records.entry(t as u32).or_default() += n;
    }
    for tp in tps.iter().flatten().filter(|tp| tp.rows > 0) {
        *s.rows.entry(tp.spec.name.clone()).or_default() += tp.rows;
    }
    if other.rows > 0 {
        s.rows.insert("perf_sample".into(), other.rows);
    }
    progress(data_len, data_len);
    Ok(s)
}

/// Offsets of the sample fields we use, walking `sample_type` in order.
struct Parsed<'a> {
    ip: Option<u64>,
    tid: Option<(u32, u32)>,
    time: Option<u64>,
    cpu: Option<u32>,
    period: Option<u64>,
    raw: Option<&'a [u8]>,
}

/// The index of the attr a sample belongs to.
fn attr_of(rec: &[u8], attrs: &[Attr], ids: &IdIndex) -> Option<usize> {
    if attrs.len() == 1 {
        return Some(0);
    }
    // with several attrs, sample_type includes IDENTIFIER: the id comes first
    let id = u64::from_le_bytes(rec.get(8..16)?.try_into().ok()?);
    ids.get(id)
}

/// Sample id → attribute index: a sorted vector (a handful of ids per
/// event per CPU; a hash lookup per sample showed in the profile).
struct IdIndex(Vec<(u64, usize)>);

impl IdIndex {
    fn new(map: &HashMap<u64, usize>) -> Self {
        let mut v: Vec<(u64, usize)> = map.iter().map(|(&k, &i)| (k, i)).collect();
        v.sort_unstable();
        IdIndex(v)
    }

    fn get(&self, id: u64) -> Option<usize> {
        self.0
            .binary_search_by_key(&id, |&(k, _)| k)
            .ok()
            .map(|i| self.0[i].1)
    }
}

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
struct RoundSorter {
    /// the arena of samples that arrived before the last round's end
    older: Vec<u8>,
    /// the arena of the current round's samples
    newer: Vec<u8>,
    /// (time, arrival, in newer?, offset, length, attr index)
    pending: Vec<(u64, u64, bool, usize, usize, u32)>,
    seq: u64,
}

impl RoundSorter {
    fn push(&mut self, time: u64, attr: u32, rec: &[u8]) {
        self.pending
            .push((time, self.seq, true, self.newer.len(), rec.len(), attr));
        self.seq += 1;
        self.newer.extend_from_slice(rec);
    }

    /// Emit, in time order, every sample at or before `limit`; keep the
    /// rest (which must all be of the current round, or `limit` is the end).
    fn flush(
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

fn parse<'a>(rec: &'a [u8], a: &Attr) -> Option<Parsed<'a>> {
    let st = a.sample_type;
    let mut p = 8usize;
    let u64_at = |p: &mut usize| -> Option<u64> {
        let v = u64::from_le_bytes(rec.get(*p..*p + 8)?.try_into().ok()?);
        *p += 8;
        Some(v)
    };
    let mut out = Parsed {
        ip: None,
        tid: None,
        time: None,
        cpu: None,
        period: None,
        raw: None,
    };
    if st & (1 << 16) != 0 {
        u64_at(&mut p)?;
    }
    if st & 1 != 0 {
        out.ip = Some(u64_at(&mut p)?);
    }
    if st & 2 != 0 {
        let v = u64_at(&mut p)?;
        out.tid = Some((v as u32, (v >> 32) as u32));
    }
    if st & 4 != 0 {
        out.time = Some(u64_at(&mut p)?);
    }
    if st & 8 != 0 {
        u64_at(&mut p)?;
    }
    if st & (1 << 6) != 0 {
        u64_at(&mut p)?;
    }
    if st & (1 << 9) != 0 {
        u64_at(&mut p)?;
    }
    if st & (1 << 7) != 0 {
        out.cpu = Some(u64_at(&mut p)? as u32);
    }
    if st & (1 << 8) != 0 {
        out.period = Some(u64_at(&mut p)?);
    }
    if st & (1 << 4) != 0 {
        // READ: a value (and optional fields) or a group; skip by read_format
        let rf = a.read_format;
        let extra = (rf & 1 != 0) as usize + (rf & 2 != 0) as usize;
        let id = (rf & 4 != 0) as usize;
        let lost = (rf & 16 != 0) as usize;
        if rf & 8 != 0 {
            let nr = u64_at(&mut p)? as usize;
            p += 8 * extra + nr * 8 * (1 + id + lost);
        } else {
            p += 8 * (1 + extra + id + lost);
        }
    }
    if st & (1 << 5) != 0 {
        let nr = u64_at(&mut p)? as usize;
        p = p.checked_add(nr.checked_mul(8)?)?;
    }
    if st & (1 << 10) != 0 {
        let n = u32::from_le_bytes(rec.get(p..p + 4)?.try_into().ok()?) as usize;
        out.raw = rec.get(p + 4..p + 4 + n);
    }
    Some(out)
}

/// A sample's attr index (u32::MAX if unknown) and time (0 if none): the
/// time sits at a fixed offset for its attr, so the sample is parsed
/// whole only once, when it is emitted.
fn sample_time(rec: &[u8], attrs: &[Attr], ids: &IdIndex) -> (u32, u64) {
    let Some(a) = attr_of(rec, attrs, ids) else {
        return (u32::MAX, 0);
    };
    let t = time_offset(attrs[a].sample_type)
        .and_then(|p| rec.get(p..p + 8))
        .map_or(0, |b| u64::from_le_bytes(b.try_into().expect("8")));
    (a as u32, t)
}

/// Where TIME sits in a sample of this sample_type (after the header and
/// IDENTIFIER, IP and TID when present), if the samples have it.
fn time_offset(st: u64) -> Option<usize> {
    (st & 4 != 0).then(|| {
        8 + 8 * ((st >> 16) & 1) as usize + 8 * (st & 1) as usize + 8 * ((st >> 1) & 1) as usize
    })
}

#[allow(clippy::too_many_arguments)]
fn emit<S: EventSink + ?Sized>(
    rec: &[u8],
    attr: Option<&Attr>,
    tps: &mut [Option<Tp>],
    other: &mut Other,
    sink: &mut S,
    s: &mut PerfSummary,
) -> ReadResult<()> {
    let Some(a) = attr else {
        *s.records.entry(u32::MAX).or_default() += 1;
        return Ok(());
    };
    let Some(p) = parse(rec, a) else {
        s.warnings
            .push("a sample shorter than its sample_type; skipped".into());
        return Ok(());
    };
    let ts = p.time.unwrap_or(0) as i64;
    s.time_range = Some(
        s.time_range
            .map_or((ts, ts), |(x, y)| (x.min(ts), y.max(ts))),
    );
    let cpu = p.cpu.unwrap_or(0);
    if a.kind == TRACEPOINT {
        if let (Some(raw), Some(tp)) = (
            p.raw,
            tps.get_mut(a.config as usize).and_then(Option::as_mut),
        ) {
            let t = match tp.table {
                Some(t) => t,
                None => {
                    let t = sink
                        .declare_table(&tp.spec)
                        .map_err(|what| ReadError::Sink { what })?;
                    tp.table = Some(t);
                    t
                }
            };
            let pid = Endian::Little
                .uint(raw, tp.pid_offset, 4)
                .map(|v| v as u32 as i32);
            let batch = sink.batch(t);
            let row = batch.push_header(&RowHeader {
                ts,
                cpu,
                pid,
                instance: 0,
            });
            tp.decoder.append(raw, batch, row);
            sink.row_done(t).map_err(|what| ReadError::Sink { what })?;
            tp.rows += 1;
            return Ok(());
        }
    }
    let t = match other.table {
        Some(t) => t,
        None => {
            let spec = TableSpec {
                name: "perf_sample".into(),
                system: "perf".into(),
                columns: vec![
                    ColumnSpec {
                        name: "event".into(),
                        ty: ColumnType::Str,
                    },
                    ColumnSpec {
                        name: "ip".into(),
                        ty: ColumnType::U64,
                    },
                    ColumnSpec {
                        name: "period".into(),
                        ty: ColumnType::U64,
                    },
                    ColumnSpec {
                        name: "tid".into(),
                        ty: ColumnType::I64,
                    },
                ],
            };
            let t = sink
                .declare_table(&spec)
                .map_err(|what| ReadError::Sink { what })?;
            other.table = Some(t);
            t
        }
    };
    let (pid, tid) = p
        .tid
        .map_or((None, None), |(a, b)| (Some(a as i32), Some(b as i64)));
    let vals = [
        Value::Str(&a.name),
        p.ip.map_or(Value::Null, Value::U64),
        p.period.map_or(Value::Null, Value::U64),
        tid.map_or(Value::Null, Value::I64),
    ];
    sink.write_row(
        t,
        &RowHeader {
            ts,
            cpu,
            pid,
            instance: 0,
        },
        &vals,
    )
    .map_err(|what| ReadError::Sink { what })?;
    other.rows += 1;
    Ok(())
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
    fn the_time_read_at_its_offset_is_the_one_parse_finds() {
        // every combination of the fields that can come before TIME, and some after
        for bits in 0u64..64 {
            let st = 4
                | (bits & 1)
                | (bits & 2)
                | ((bits >> 2 & 1) << 16)
                | ((bits >> 3 & 1) << 7)
                | ((bits >> 4 & 1) << 8)
                | ((bits >> 5 & 1) << 3);
            let a = Attr {
                kind: 0,
                config: 0,
                sample_type: st,
                read_format: 0,
                name: String::new(),
            };
            let rec: Vec<u8> = (0u64..12).flat_map(|i| (1000 + i).to_le_bytes()).collect();
            let p = time_offset(st).unwrap();
            assert_eq!(
                Some(u64::from_le_bytes(rec[p..p + 8].try_into().unwrap())),
                parse(&rec, &a).unwrap().time,
                "sample_type {st:#x}"
            );
        }
        assert_eq!(time_offset(1 | 2), None);
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
