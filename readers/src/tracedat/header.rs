//! trace.dat metadata: file header, sections and options.
//!
//! Layout (all numbers in the file's byte order after the endian byte):
//!
//! ```text
//! "\x17\x08\x44tracing" version "\0" endian(1) user_long(1) page_size(4)
//! v6: header_page, header_event, ftrace formats, event formats, kallsyms,
//!     printk, cmdlines, cpus(4), "options  \0" options..., "flyrecord\0"
//!     then (offset, size) u64 pairs per CPU
//! v7: compression "name\0version\0", first options section offset(8);
//!     then sections (id u16, flags u16, string id u32, size u64),
//!     located through options
//! ```

use crate::bytes::{Bytes, Endian};
use crate::error::{ReadError, ReadResult};
use crate::ftrace::format::{parse_format, parse_header_page, EventFormat, HeaderPage};
use crate::ftrace::printk::parse_printk_formats;
use crate::input::{open_nonempty, read_at};
use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 10] = b"\x17\x08\x44tracing";

/// Option ids (trace-cmd.dat(5)).
mod opt {
    pub const DONE: u16 = 0;
    pub const DATE: u16 = 1;
    pub const CPUSTAT: u16 = 2;
    pub const BUFFER: u16 = 3;
    pub const TRACECLOCK: u16 = 4;
    pub const UNAME: u16 = 5;
    pub const HOOK: u16 = 6;
    pub const OFFSET: u16 = 7;
    pub const CPUCOUNT: u16 = 8;
    pub const VERSION: u16 = 9;
    pub const PROCMAPS: u16 = 10;
    pub const TRACEID: u16 = 11;
    pub const TIME_SHIFT: u16 = 12;
    pub const GUEST: u16 = 13;
    pub const TSC2NSEC: u16 = 14;
    pub const STRINGS: u16 = 15;
    pub const HEADER_INFO: u16 = 16;
    pub const FTRACE_EVENTS: u16 = 17;
    pub const EVENT_FORMATS: u16 = 18;
    pub const KALLSYMS: u16 = 19;
    pub const PRINTK: u16 = 20;
    pub const CMDLINES: u16 = 21;
    pub const BUFFER_TEXT: u16 = 22;
}

/// Where one CPU's ring-buffer data lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuData {
    /// CPU number.
    pub cpu: u32,
    /// File offset of the data (of the chunk list when compressed).
    pub offset: u64,
    /// Bytes of data in the file.
    pub size: u64,
}

/// One buffer instance (the top-level buffer is named "").
#[derive(Clone, Debug, PartialEq)]
pub struct BufferInfo {
    /// Instance name, "" for the top-level buffer.
    pub name: String,
    /// Trace clock of the instance.
    pub clock: String,
    /// Ring-buffer page size of the instance.
    pub page_size: u32,
    /// Per-CPU data.
    pub cpus: Vec<CpuData>,
    /// CPU data is compressed in chunks (v7).
    pub compressed: bool,
    /// A latency (text) buffer: nothing to decode as records.
    pub latency: bool,
}

/// TSC to nanoseconds conversion (TSC2NSEC option).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tsc2Nsec {
    /// Multiplier.
    pub mult: u32,
    /// Shift.
    pub shift: u32,
    /// Offset added after scaling.
    pub offset: u64,
}

/// Everything the reader needs before decoding records.
#[derive(Clone, Debug)]
pub struct TraceDatMeta {
    /// File path.
    pub path: PathBuf,
    /// File size.
    pub file_size: u64,
    /// File version (6 or 7).
    pub version: u32,
    /// Byte order.
    pub endian: Endian,
    /// User-space long size byte from the header.
    pub user_long_size: u8,
    /// Kernel long size (from header_page's commit field).
    pub kernel_long_size: usize,
    /// Default page size.
    pub page_size: u32,
    /// Compression ("none", "zstd", "zlib").
    pub compression: String,
    /// Compression library version string.
    pub compression_version: String,
    /// header_page facts.
    pub header_page: HeaderPage,
    /// All event formats (ftrace and others).
    pub formats: Vec<EventFormat>,
    /// printk format strings by address.
    pub printk: HashMap<u64, String>,
    /// Saved cmdlines: pid → comm.
    pub cmdlines: Vec<(i32, String)>,
    /// CPU count.
    pub cpus: u32,
    /// Buffer instances, top-level first.
    pub buffers: Vec<BufferInfo>,
    /// Trace clock of the top-level buffer.
    pub clock: String,
    /// uname option.
    pub uname: Option<String>,
    /// trace-cmd version option.
    pub tracecmd_version: Option<String>,
    /// OFFSET option (ns added to every timestamp).
    pub ts_offset: i64,
    /// DATE option text (not applied, as `trace-cmd report` by default).
    pub date: Option<String>,
    /// TSC2NSEC option.
    pub tsc2nsec: Option<Tsc2Nsec>,
    /// Names of the options seen, in order.
    pub options_seen: Vec<String>,
    /// Non-fatal problems found while reading metadata.
    pub warnings: Vec<String>,
    /// CPU stats text per CPUSTAT option (overrun counts etc.).
    pub cpustats: Vec<String>,
    /// Event formats that could not be parsed (their events are skipped).
    pub bad_formats: u64,
}

/// Sequential reader over the file for the v6 layout, with offsets.
struct Seq<'a> {
    r: std::io::BufReader<&'a File>,
    pos: u64,
    endian: Endian,
    path: &'a Path,
}

impl Seq<'_> {
    fn err(&self, what: &str) -> ReadError {
        ReadError::corrupt(
            self.path,
            self.pos,
            "truncated",
            format!("{what}: file ends early"),
        )
    }
    /// Fails unless `n` more bytes lie before `limit`.
    fn room(&self, n: u64, what: &str, limit: u64) -> ReadResult<()> {
        if n > limit.saturating_sub(self.pos) {
            return Err(ReadError::corrupt(
                self.path,
                self.pos,
                "past-eof",
                format!("{what}: size {n} runs past the end of the file"),
            ));
        }
        Ok(())
    }
    fn take(&mut self, n: u64, what: &str, limit: u64) -> ReadResult<Vec<u8>> {
        self.room(n, what, limit)?;
        let mut v = vec![0u8; n as usize];
        self.r.read_exact(&mut v).map_err(|_| self.err(what))?;
        self.pos += n;
        Ok(v)
    }
    /// Step over `n` bytes without reading them.
    fn skip(&mut self, n: u64, what: &str, limit: u64) -> ReadResult<()> {
        self.room(n, what, limit)?;
        self.r.seek_relative(n as i64).map_err(|_| self.err(what))?;
        self.pos += n;
        Ok(())
    }
    fn u32(&mut self, what: &str, limit: u64) -> ReadResult<u32> {
        let b = self.take(4, what, limit)?;
        Ok(self.endian.u32([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self, what: &str, limit: u64) -> ReadResult<u64> {
        let b = self.take(8, what, limit)?;
        Ok(self
            .endian
            .u64([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
    }
    fn cstr(&mut self, what: &str) -> ReadResult<String> {
        let mut v = Vec::new();
        let n = std::io::BufRead::read_until(&mut self.r, 0, &mut v).map_err(|_| self.err(what))?;
        if n == 0 || v.last() != Some(&0) {
            return Err(self.err(what));
        }
        self.pos += n as u64;
        v.pop();
        Ok(String::from_utf8_lossy(&v).into_owned())
    }
}

/// Decompress one block of a v7 file.
pub fn decompress(
    algo: &str,
    data: &[u8],
    out_len: usize,
    path: &Path,
    offset: u64,
) -> ReadResult<Vec<u8>> {
    let bad = |e: String| {
        ReadError::corrupt(
            path,
            offset,
            "corrupt-compressed",
            format!("cannot decompress {algo} block: {e}"),
        )
    };
    match algo {
        "zstd" => zstd::bulk::decompress(data, out_len).map_err(|e| bad(e.to_string())),
        "zlib" => {
            let mut v = Vec::with_capacity(out_len);
            flate2::read::ZlibDecoder::new(data)
                .read_to_end(&mut v)
                .map_err(|e| bad(e.to_string()))?;
            Ok(v)
        }
        "none" | "" => Ok(data.to_vec()),
        other => Err(ReadError::Unsupported {
            path: path.to_path_buf(),
            offset,
            what: format!("compression {other:?}"),
        }),
    }
}

struct Parts {
    header_page: Option<HeaderPage>,
    formats: Vec<EventFormat>,
    printk: HashMap<u64, String>,
    cmdlines: Vec<(i32, String)>,
    /// Formats that could not be parsed: their events are skipped, not fatal.
    bad_formats: Vec<String>,
}

impl Parts {
    fn add_format(&mut self, system: &str, text: &str, off: u64, path: &Path) {
        match parse_format(system, text) {
            Ok(f) => self.formats.push(f),
            Err(e) => self.bad_formats.push(format_err(path, off, e).to_string()),
        }
    }
}

fn parse_cmdlines(text: &str) -> Vec<(i32, String)> {
    text.lines()
        .filter_map(|l| {
            let (pid, comm) = l.trim().split_once(' ')?;
            Some((pid.parse().ok()?, comm.to_string()))
        })
        .collect()
}

fn format_err(path: &Path, offset: u64, e: crate::ftrace::format::FormatError) -> ReadError {
    ReadError::corrupt(
        path,
        offset,
        "corrupt-format",
        format!("bad event format: {}", e.0),
    )
}

/// Parse a formats blob (count u32, then size u64 + text each) for `system`.
fn parse_format_list(
    b: &mut Bytes<'_>,
    system: &str,
    parts: &mut Parts,
    path: &Path,
) -> ReadResult<()> {
    let n = b.u32("format count")?;
    for _ in 0..n {
        let off = b.offset();
        let text = b.sized_text(8, "event format")?;
        parts.add_format(system, &text, off, path);
    }
    Ok(())
}

/// Read everything but the ring-buffer data.
pub fn read_metadata(path: &Path) -> ReadResult<TraceDatMeta> {
    let (file, file_size) = open_nonempty(path, "a trace.dat")?;
    let mut seq = Seq {
        r: std::io::BufReader::with_capacity(1 << 16, &file),
        pos: 0,
        endian: Endian::Little,
        path,
    };
    let magic = seq.take(10.min(file_size), "magic", file_size)?;
    if magic.as_slice() != MAGIC {
        return Err(ReadError::NotThisFormat {
            path: path.to_path_buf(),
            expected: "trace.dat (trace-cmd)",
        });
    }
    let vstr = seq.cstr("version")?;
    let version: u32 = vstr.parse().map_err(|_| {
        ReadError::corrupt(
            path,
            10,
            "corrupt-header",
            format!("version {vstr:?} is not a number"),
        )
    })?;
    if !(6..=7).contains(&version) {
        return Err(ReadError::Unsupported {
            path: path.to_path_buf(),
            offset: 10,
            what: format!("trace.dat version {version} (reads 6 and 7)"),
        });
    }
    let eb = seq.take(2, "endian and long size", file_size)?;
    let endian = match eb[0] {
        0 => Endian::Little,
        1 => Endian::Big,
        x => {
            return Err(ReadError::corrupt(
                path,
                seq.pos - 2,
                "corrupt-header",
                format!("endian byte {x}, expected 0 or 1"),
            ))
        }
    };
    seq.endian = endian;
    let user_long_size = eb[1];
    let page_size = seq.u32("page size", file_size)?;
    if !(64..=(1 << 24)).contains(&page_size) || !page_size.is_power_of_two() {
        return Err(ReadError::corrupt(
            path,
            seq.pos - 4,
            "corrupt-header",
            format!("page size {page_size} is not a plausible power of two"),
        ));
    }
    let mut meta = TraceDatMeta {
        path: path.to_path_buf(),
        file_size,
        version,
        endian,
        user_long_size,
        kernel_long_size: 8,
        page_size,
        compression: "none".into(),
        compression_version: String::new(),
        header_page: HeaderPage {
            commit_size: 8,
            data_offset: 16,
        },
        formats: Vec::new(),
        printk: HashMap::new(),
        cmdlines: Vec::new(),
        cpus: 0,
        buffers: Vec::new(),
        clock: "local".into(),
        uname: None,
        tracecmd_version: None,
        ts_offset: 0,
        date: None,
        tsc2nsec: None,
        options_seen: Vec::new(),
        warnings: Vec::new(),
        cpustats: Vec::new(),
        bad_formats: 0,
    };
    let mut parts = Parts {
        header_page: None,
        formats: Vec::new(),
        printk: HashMap::new(),
        cmdlines: Vec::new(),
        bad_formats: Vec::new(),
    };
    if version == 6 {
        read_v6(&mut seq, &file, &mut meta, &mut parts)?;
    } else {
        meta.compression = seq.cstr("compression name")?;
        meta.compression_version = seq.cstr("compression version")?;
        let first = seq.u64("first options offset", file_size)?;
        read_v7(&file, &mut meta, &mut parts, first)?;
    }
    let hp = parts
        .header_page
        .ok_or_else(|| ReadError::corrupt(path, 0, "corrupt-header", "no header_page section"))?;
    meta.header_page = hp;
    meta.kernel_long_size = hp.commit_size;
    meta.formats = parts.formats;
    meta.bad_formats = parts.bad_formats.len() as u64;
    for w in parts.bad_formats {
        meta.warnings
            .push(format!("{w}; events of this type are skipped"));
    }
    meta.printk = parts.printk;
    meta.cmdlines = parts.cmdlines;
    if let Some(top) = meta.buffers.iter().find(|b| b.name.is_empty()) {
        if !top.clock.is_empty() {
            meta.clock = top.clock.clone();
        }
    }
    Ok(meta)
}

fn header_info(b: &mut Bytes<'_>, parts: &mut Parts, path: &Path) -> ReadResult<()> {
    let tag = b.take(12, "header_page tag")?;
    if tag != b"header_page\0" {
        return Err(b.corrupt("corrupt-header", "expected \"header_page\""));
    }
    let off = b.offset();
    let hp = b.sized_text(8, "header_page")?;
    parts.header_page = Some(
        parse_header_page(&hp).map_err(|e| ReadError::corrupt(path, off, "corrupt-header", e.0))?,
    );
    let tag = b.take(13, "header_event tag")?;
    if tag != b"header_event\0" {
        return Err(b.corrupt("corrupt-header", "expected \"header_event\""));
    }
    b.sized_text(8, "header_event")?;
    Ok(())
}

fn event_formats(b: &mut Bytes<'_>, parts: &mut Parts, path: &Path) -> ReadResult<()> {
    let systems = b.u32("system count")?;
    for _ in 0..systems {
        let sys = b.cstr("system name")?;
        parse_format_list(b, &sys, parts, path)?;
    }
    Ok(())
}

/// v6: metadata is one sequential run at the start of the file.
fn read_v6(
    seq: &mut Seq<'_>,
    file: &File,
    meta: &mut TraceDatMeta,
    parts: &mut Parts,
) -> ReadResult<()> {
    let path = seq.path;
    let fs = meta.file_size;
    let endian = meta.endian;
    // header_page + header_event: tags and 8-byte sizes.
    let mut blob = Vec::new();
    for tag_len in [12u64, 13] {
        blob.extend(seq.take(tag_len, "header tag", fs)?);
        let n = seq.u64("header size", fs)?;
        blob.extend(if endian == Endian::Little {
            n.to_le_bytes()
        } else {
            n.to_be_bytes()
        });
        blob.extend(seq.take(n, "header text", fs)?);
    }
    let base = seq.pos - blob.len() as u64;
    header_info(&mut Bytes::new(&blob, base, endian, path), parts, path)?;
    // ftrace formats
    let n = seq.u32("ftrace format count", fs)?;
    for _ in 0..n {
        let off = seq.pos;
        let len = seq.u64("ftrace format size", fs)?;
        let text = String::from_utf8_lossy(&seq.take(len, "ftrace format", fs)?).into_owned();
        parts.add_format("ftrace", &text, off, path);
    }
    let systems = seq.u32("system count", fs)?;
    for _ in 0..systems {
        let sys = seq.cstr("system name")?;
        let n = seq.u32("format count", fs)?;
        for _ in 0..n {
            let off = seq.pos;
            let len = seq.u64("event format size", fs)?;
            let text = String::from_utf8_lossy(&seq.take(len, "event format", fs)?).into_owned();
            parts.add_format(&sys, &text, off, path);
        }
    }
    let n = seq.u32("kallsyms size", fs)?;
    seq.skip(n as u64, "kallsyms", fs)?;
    let n = seq.u32("printk size", fs)?;
    parts.printk = parse_printk_formats(&String::from_utf8_lossy(&seq.take(
        n as u64,
        "printk formats",
        fs,
    )?));
    let n = seq.u64("cmdlines size", fs)?;
    parts.cmdlines = parse_cmdlines(&String::from_utf8_lossy(&seq.take(n, "cmdlines", fs)?));
    meta.cpus = seq.u32("cpu count", fs)?;
    if meta.cpus > 65536 {
        return Err(ReadError::corrupt(
            path,
            seq.pos - 4,
            "corrupt-header",
            format!("cpu count {}", meta.cpus),
        ));
    }
    let mut instances: Vec<(String, u64)> = Vec::new();
    loop {
        let tag_off = seq.pos;
        let tag = seq.take(10, "options/flyrecord tag", fs)?;
        if tag.starts_with(b"options") {
            loop {
                let id = {
                    let b = seq.take(2, "option id", fs)?;
                    endian.u16([b[0], b[1]])
                };
                if id == opt::DONE {
                    break;
                }
                let size = seq.u32("option size", fs)?;
                let off = seq.pos;
                let data = seq.take(size as u64, "option data", fs)?;
                handle_option(id, &data, off, meta, parts, &mut instances, path, file)?;
            }
        } else if tag.starts_with(b"flyrecord") {
            let mut cpus = Vec::with_capacity(meta.cpus as usize);
            for cpu in 0..meta.cpus {
                let offset = seq.u64("cpu data offset", fs)?;
                let size = seq.u64("cpu data size", fs)?;
                cpus.push(CpuData { cpu, offset, size });
            }
            meta.buffers.insert(
                0,
                BufferInfo {
                    name: String::new(),
                    clock: meta.clock.clone(),
                    page_size: meta.page_size,
                    cpus,
                    compressed: false,
                    latency: false,
                },
            );
            break;
        } else if tag.starts_with(b"latency") {
            meta.buffers.insert(
                0,
                BufferInfo {
                    name: String::new(),
                    clock: meta.clock.clone(),
                    page_size: meta.page_size,
                    cpus: vec![],
                    compressed: false,
                    latency: true,
                },
            );
            break;
        } else {
            return Err(ReadError::corrupt(
                path,
                tag_off,
                "corrupt-header",
                "expected \"options\", \"flyrecord\" or \"latency\"",
            ));
        }
    }
    // v6 instances: the BUFFER option points at a table of (offset, size) per CPU.
    for (name, mut offset) in instances {
        // trace-cmd writes the instance's own "flyrecord" tag (after any
        // "options" of the instance) before its CPU table
        let tag = read_at(file, path, offset, 10, fs, "instance tag")?;
        if tag.starts_with(b"flyrecord") {
            offset += 10;
        } else if tag.starts_with(b"options") || tag.starts_with(b"latency") {
            meta.warnings.push(format!(
                "instance {name:?} at byte {offset}: options/latency data not decoded"
            ));
            continue;
        }
        let table = read_at(
            file,
            path,
            offset,
            16 * meta.cpus as u64,
            fs,
            "instance cpu table",
        )?;
        let mut b = Bytes::new(&table, offset, endian, path);
        let mut cpus = Vec::new();
        for cpu in 0..meta.cpus {
            let o = b.u64("cpu data offset")?;
            let s = b.u64("cpu data size")?;
            cpus.push(CpuData {
                cpu,
                offset: o,
                size: s,
            });
        }
        meta.buffers.push(BufferInfo {
            name,
            clock: meta.clock.clone(),
            page_size: meta.page_size,
            cpus,
            compressed: false,
            latency: false,
        });
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn handle_option(
    id: u16,
    data: &[u8],
    off: u64,
    meta: &mut TraceDatMeta,
    parts: &mut Parts,
    v6_instances: &mut Vec<(String, u64)>,
    path: &Path,
    file: &File,
) -> ReadResult<()> {
    let endian = meta.endian;
    let text =
        || String::from_utf8_lossy(data.split(|&c| c == 0).next().unwrap_or(&[])).into_owned();
    let mut b = Bytes::new(data, off, endian, path);
    let name = match id {
        opt::DATE => {
            meta.date = Some(text());
            "DATE"
        }
        opt::CPUSTAT => {
            meta.cpustats.push(text());
            "CPUSTAT"
        }
        opt::BUFFER | opt::BUFFER_TEXT => {
            let offset = b.u64("buffer offset")?;
            let name = b.cstr("buffer name")?;
            if meta.version == 6 {
                if !name.is_empty() {
                    v6_instances.push((name, offset));
                }
            } else {
                let info = read_v7_buffer(file, meta, parts, id, offset, name, &mut b)?;
                if info.name.is_empty() {
                    meta.buffers.insert(0, info);
                } else {
                    meta.buffers.push(info);
                }
            }
            if id == opt::BUFFER {
                "BUFFER"
            } else {
                "BUFFER_TEXT"
            }
        }
        opt::TRACECLOCK => {
            // "[local] global counter": the bracketed one is in force.
            let t = text();
            if let Some(c) = t.split('[').nth(1).and_then(|r| r.split(']').next()) {
                meta.clock = c.to_string();
            }
            "TRACECLOCK"
        }
        opt::UNAME => {
            meta.uname = Some(text());
            "UNAME"
        }
        opt::HOOK => "HOOK",
        opt::OFFSET => {
            let t = text();
            let t = t.trim();
            meta.ts_offset += if let Some(h) = t.strip_prefix("0x") {
                i64::from_str_radix(h, 16).unwrap_or(0)
            } else {
                t.parse().unwrap_or(0)
            };
            "OFFSET"
        }
        opt::CPUCOUNT => {
            if data.len() >= 4 {
                meta.cpus = b.u32("cpu count")?;
            }
            "CPUCOUNT"
        }
        opt::VERSION => {
            meta.tracecmd_version = Some(text());
            "VERSION"
        }
        opt::PROCMAPS => "PROCMAPS",
        opt::TRACEID => "TRACEID",
        opt::TIME_SHIFT => "TIME_SHIFT",
        opt::GUEST => "GUEST",
        opt::TSC2NSEC => {
            if data.len() >= 16 {
                let mult = b.u32("tsc2nsec mult")?;
                let shift = b.u32("tsc2nsec shift")?;
                let offset = b.u64("tsc2nsec offset")?;
                if shift < 64 {
                    meta.tsc2nsec = Some(Tsc2Nsec {
                        mult,
                        shift,
                        offset,
                    });
                }
            }
            "TSC2NSEC"
        }
        opt::STRINGS => "STRINGS",
        opt::KALLSYMS => {
            // The kernel's symbol table (megabytes of text, compressed)
            // decodes nothing here: its header is checked, its body not
            // read, which was most of the metadata time of a short trace.
            let at = b.u64("section offset")?;
            section_header(file, meta, at)?;
            "KALLSYMS"
        }
        opt::HEADER_INFO
        | opt::FTRACE_EVENTS
        | opt::EVENT_FORMATS
        | opt::PRINTK
        | opt::CMDLINES => {
            let at = b.u64("section offset")?;
            read_v7_section(file, meta, parts, id, at)?;
            match id {
                opt::HEADER_INFO => "HEADER_INFO",
                opt::FTRACE_EVENTS => "FTRACE_EVENTS",
                opt::EVENT_FORMATS => "EVENT_FORMATS",
                opt::PRINTK => "PRINTK",
                _ => "CMDLINES",
            }
        }
        other => {
            meta.warnings
                .push(format!("unknown option id {other} at byte {off} skipped"));
            "UNKNOWN"
        }
    };
    meta.options_seen.push(name.to_string());
    Ok(())
}

/// Read a v7 section header; returns (id, compressed, data offset, size).
fn section_header(file: &File, meta: &TraceDatMeta, at: u64) -> ReadResult<(u16, bool, u64, u64)> {
    let raw = read_at(file, &meta.path, at, 16, meta.file_size, "section header")?;
    let e = meta.endian;
    let id = e.u16([raw[0], raw[1]]);
    let flags = e.u16([raw[2], raw[3]]);
    let size = e.u64(raw[8..16].try_into().expect("8 bytes"));
    if size > meta.file_size.saturating_sub(at + 16) {
        return Err(ReadError::corrupt(
            &meta.path,
            at,
            "past-eof",
            format!("section {id} of {size} bytes runs past the end of the file"),
        ));
    }
    Ok((id, flags & 1 != 0, at + 16, size))
}

/// The body of a v7 section, decompressed when flagged.
fn section_body(file: &File, meta: &TraceDatMeta, at: u64) -> ReadResult<(u16, Vec<u8>, u64)> {
    let (id, compressed, data_at, size) = section_header(file, meta, at)?;
    let raw = read_at(file, &meta.path, data_at, size, meta.file_size, "section")?;
    if !compressed {
        return Ok((id, raw, data_at));
    }
    let mut b = Bytes::new(&raw, data_at, meta.endian, &meta.path);
    let csize = b.u32("compressed size")? as usize;
    let usize_ = b.u32("uncompressed size")? as usize;
    let body = b.take(csize, "compressed data")?;
    Ok((
        id,
        decompress(&meta.compression, body, usize_, &meta.path, data_at)?,
        data_at,
    ))
}

fn read_v7_section(
    file: &File,
    meta: &mut TraceDatMeta,
    parts: &mut Parts,
    option: u16,
    at: u64,
) -> ReadResult<()> {
    let (id, body, base) = section_body(file, meta, at)?;
    if id != option {
        meta.warnings.push(format!(
            "section at byte {at} has id {id}, option said {option}"
        ));
    }
    let path = meta.path.clone();
    let mut b = Bytes::new(&body, base, meta.endian, &path);
    match option {
        opt::HEADER_INFO => header_info(&mut b, parts, &path)?,
        opt::FTRACE_EVENTS => parse_format_list(&mut b, "ftrace", parts, &path)?,
        opt::EVENT_FORMATS => event_formats(&mut b, parts, &path)?,
        opt::PRINTK => parts.printk = parse_printk_formats(&b.sized_text(4, "printk formats")?),
        opt::CMDLINES => parts.cmdlines = parse_cmdlines(&b.sized_text(8, "cmdlines")?),
        _ => {}
    }
    Ok(())
}

fn read_v7_buffer(
    file: &File,
    meta: &TraceDatMeta,
    _parts: &mut Parts,
    id: u16,
    offset: u64,
    name: String,
    b: &mut Bytes<'_>,
) -> ReadResult<BufferInfo> {
    let clock = b.cstr("buffer clock")?;
    let (_, compressed, _, _) = section_header(file, meta, offset)?;
    if id == opt::BUFFER_TEXT {
        return Ok(BufferInfo {
            name,
            clock,
            page_size: meta.page_size,
            cpus: vec![],
            compressed,
            latency: true,
        });
    }
    // Newer trace-cmd writes a per-buffer page size before the CPU count;
    // the two layouts differ in length by exactly 4 bytes (20 per CPU).
    let rest = b.remaining();
    let mut page_size = meta.page_size;
    if rest >= 8 && (rest - 8).is_multiple_of(20) && (rest < 4 || !(rest - 4).is_multiple_of(20)) {
        page_size = b.u32("buffer page size")?;
        if !(64..=(1 << 24)).contains(&page_size) || !page_size.is_power_of_two() {
            return Err(b.corrupt("corrupt-header", format!("buffer page size {page_size}")));
        }
    }
    let n = b.u32("buffer cpu count")?;
    let mut cpus = Vec::new();
    for _ in 0..n {
        let cpu = b.u32("cpu id")?;
        let off = b.u64("cpu data offset")?;
        let size = b.u64("cpu data size")?;
        cpus.push(CpuData {
            cpu,
            offset: off,
            size,
        });
    }
    Ok(BufferInfo {
        name,
        clock,
        page_size,
        cpus,
        compressed,
        latency: false,
    })
}

/// v7: follow the chain of options sections from `first`.
fn read_v7(file: &File, meta: &mut TraceDatMeta, parts: &mut Parts, first: u64) -> ReadResult<()> {
    let mut at = first;
    let mut seen = std::collections::HashSet::new();
    let path = meta.path.clone();
    while at != 0 {
        if !seen.insert(at) {
            return Err(ReadError::corrupt(
                &path,
                at,
                "corrupt-header",
                "options sections form a loop",
            ));
        }
        let (id, body, base) = match section_body(file, meta, at) {
            Ok(section) => section,
            // trace-cmd writes the options section that locates each CPU's
            // ring-buffer data (BUFFER) after that data: a file cut in the
            // data has lost it, and nothing else says which bytes are whose
            Err(ReadError::Corrupt { tag: "past-eof", .. }) if at != first => {
                return Err(ReadError::corrupt(
                    &path,
                    at,
                    "truncated",
                    format!(
                        "file is truncated ({} bytes): the options section here, written after the ring-buffer data to say where it lies, is missing",
                        meta.file_size
                    ),
                ))
            }
            Err(e) => return Err(e),
        };
        if id != opt::DONE {
            return Err(ReadError::corrupt(
                &path,
                at,
                "corrupt-header",
                format!("expected an options section, found section id {id}"),
            ));
        }
        let mut b = Bytes::new(&body, base, meta.endian, &path);
        let mut next = 0;
        let mut dummy = Vec::new();
        loop {
            if b.remaining() == 0 {
                break;
            }
            let oid = b.u16("option id")?;
            let size = b.u32("option size")? as usize;
            let off = b.offset();
            let data = b.take(size, "option data")?;
            if oid == opt::DONE {
                if data.len() >= 8 {
                    next = meta.endian.u64(data[..8].try_into().expect("8 bytes"));
                }
                break;
            }
            handle_option(oid, data, off, meta, parts, &mut dummy, &path, file)?;
        }
        at = next;
    }
    if meta.cpus == 0 {
        meta.cpus = meta
            .buffers
            .iter()
            .flat_map(|b| b.cpus.iter().map(|c| c.cpu + 1))
            .max()
            .unwrap_or(0);
    }
    Ok(())
}
