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
//!
//! The two versions' layouts are read by `v6` (one sequential run) and
//! `v7` (sections found through options); the options both share are
//! decoded in `options`. The parts both versions carry (header page,
//! event formats, printk formats, cmdlines) are parsed here.

mod options;
mod v6;
mod v7;

use crate::bytes::{Bytes, Endian};
use crate::error::{ReadError, ReadResult};
use crate::ftrace::format::{parse_format, parse_header_page, EventFormat, HeaderPage};
use crate::input::open_nonempty;
use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 10] = b"\x17\x08\x44tracing";

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
    /// What the metadata made the read skip or guess (event formats that
    /// cannot be parsed, a section whose id disagrees with its option, an
    /// instance whose data is not decoded), one line each with where.
    pub problems: Vec<String>,
    /// Bytes of decompressed data the read may hold at once
    /// ([`crate::input::default_budget`] unless the caller sets one).
    pub budget: u64,
    /// CPU stats text per CPUSTAT option (overrun counts etc.).
    pub cpustats: Vec<String>,
    /// Event formats that could not be parsed (their events are skipped).
    pub bad_formats: u64,
    /// Where the kernel's symbol table lies, not read with the rest (see
    /// [`read_kallsyms`]).
    pub kallsyms: Option<KallsymsAt>,
}

/// Where a file keeps its kallsyms text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KallsymsAt {
    /// v6: `len` bytes of plain text at `offset`.
    Plain {
        /// File offset of the text.
        offset: u64,
        /// Its length.
        len: u64,
    },
    /// v7: the (maybe compressed) section at this offset.
    Section(u64),
}

/// The kernel's symbol table (`/proc/kallsyms` text) the file holds, empty
/// when it holds none. Not read by [`read_metadata`], which most reads do
/// not need it for (it is megabytes); `cratrace dump` names the addresses
/// `%ps` prints with it (issue 44).
pub fn read_kallsyms(path: &Path) -> ReadResult<String> {
    let meta = read_metadata(path)?;
    let (file, _) = open_nonempty(path, "a trace.dat")?;
    match meta.kallsyms {
        None => Ok(String::new()),
        Some(KallsymsAt::Plain { offset, len }) => {
            let bytes =
                crate::input::read_at(&file, path, offset, len, meta.file_size, "kallsyms")?;
            Ok(String::from_utf8_lossy(&bytes).into_owned())
        }
        Some(KallsymsAt::Section(at)) => {
            let (_, body, base) = v7::section_body(&file, &meta, at)?;
            Bytes::new(&body, base, meta.endian, path).sized_text(4, "kallsyms")
        }
    }
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

/// Decompress one block of a v7 file, declared to hold `out_len` bytes
/// once decompressed: refused past `budget` bytes (a declared size is the
/// file's word, and 0xffffffff of it aborted the process: issue 42), and
/// a zlib stream is never inflated past what it declares.
pub fn decompress(
    algo: &str,
    data: &[u8],
    out_len: usize,
    path: &Path,
    offset: u64,
    budget: u64,
) -> ReadResult<Vec<u8>> {
    let bad = |e: String| {
        ReadError::corrupt(
            path,
            offset,
            "corrupt-compressed",
            format!("cannot decompress {algo} block: {e}"),
        )
    };
    if out_len as u64 > budget && algo != "none" && !algo.is_empty() {
        return Err(ReadError::OverBudget {
            path: path.to_path_buf(),
            offset,
            what: format!("a {algo} block declaring {out_len} bytes decompressed"),
            need: out_len as u64,
            budget,
        });
    }
    match algo {
        "zstd" => zstd::bulk::decompress(data, out_len).map_err(|e| bad(e.to_string())),
        "zlib" => {
            let mut v = Vec::with_capacity(out_len);
            flate2::read::ZlibDecoder::new(data)
                .take(out_len as u64 + 1)
                .read_to_end(&mut v)
                .map_err(|e| bad(e.to_string()))?;
            if v.len() > out_len {
                return Err(bad(format!(
                    "it inflates past the {out_len} bytes it declares"
                )));
            }
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
    read_metadata_with(path, None)
}

/// [`read_metadata`] with `max_memory` bytes of decompressed data held at
/// once at most (None: [`crate::input::default_budget`] of the file).
pub fn read_metadata_with(path: &Path, max_memory: Option<u64>) -> ReadResult<TraceDatMeta> {
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
        problems: Vec::new(),
        budget: max_memory.unwrap_or_else(|| crate::input::default_budget(file_size)),
        cpustats: Vec::new(),
        bad_formats: 0,
        kallsyms: None,
    };
    let mut parts = Parts {
        header_page: None,
        formats: Vec::new(),
        printk: HashMap::new(),
        cmdlines: Vec::new(),
        bad_formats: Vec::new(),
    };
    if version == 6 {
        v6::read_v6(&mut seq, &file, &mut meta, &mut parts)?;
    } else {
        meta.compression = seq.cstr("compression name")?;
        meta.compression_version = seq.cstr("compression version")?;
        let first = seq.u64("first options offset", file_size)?;
        v7::read_v7(&file, &mut meta, &mut parts, first)?;
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
        meta.problems
            .push(format!("{w}; events of this type are skipped"));
    }
    meta.printk = parts.printk;
    meta.cmdlines = parts.cmdlines;
    check_cpu_claims(&mut meta);
    if let Some(top) = meta.buffers.iter().find(|b| b.name.is_empty()) {
        if !top.clock.is_empty() {
            meta.clock = top.clock.clone();
        }
    }
    Ok(meta)
}

/// A CPU data section claimed to end past this is a damaged size, not a
/// cut file: no trace.dat reaches a pebibyte.
const MAX_CLAIMED_END: u64 = 1 << 50;

/// Range-check each CPU's (offset, size) claim against the file: the
/// sections lie one after another, so a claim may run past the file's end
/// (a cut file: those bytes are missing), but not into the next section's
/// start, nor past [`MAX_CLAIMED_END`] or 2^64. Such a claim is damage:
/// it is said (a problem) and cut to where the next section starts, or to
/// the file's end, so a read's `truncated_bytes` counts only bytes a cut
/// file can have lost, not a damaged header's 2^64.
fn check_cpu_claims(meta: &mut TraceDatMeta) {
    let mut starts: Vec<u64> = meta
        .buffers
        .iter()
        .flat_map(|b| b.cpus.iter().filter(|c| c.size > 0).map(|c| c.offset))
        .collect();
    starts.sort_unstable();
    starts.dedup();
    let fs = meta.file_size;
    for b in &mut meta.buffers {
        for c in b.cpus.iter_mut().filter(|c| c.size > 0) {
            let end = c.offset.checked_add(c.size);
            let next = starts[starts.partition_point(|&s| s <= c.offset)..]
                .first()
                .copied();
            let (limit, past) = match next {
                Some(n) => (n, format!("into the next CPU section, at byte {n}")),
                None => (
                    MAX_CLAIMED_END.max(fs),
                    "past any file (a size, not a cut)".to_string(),
                ),
            };
            if end.is_some_and(|e| e <= limit) {
                continue;
            }
            let cut = next.unwrap_or(fs).max(c.offset) - c.offset;
            let name = if b.name.is_empty() {
                String::new()
            } else {
                format!(" of instance {}", b.name)
            };
            let w = format!(
                "{}: at byte {}: CPU {}{name} claims {} bytes of data, {past}: a damaged size, read as {cut} bytes",
                meta.path.display(),
                c.offset,
                c.cpu,
                c.size,
            );
            meta.warnings.push(w.clone());
            meta.problems.push(w);
            c.size = cut;
        }
    }
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

#[cfg(test)]
mod tests {
    use super::decompress;
    use crate::error::ReadError;
    use std::io::Write;
    use std::path::Path;

    fn zlib(data: &[u8]) -> Vec<u8> {
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(data).unwrap();
        z.finish().unwrap()
    }

    #[test]
    fn a_declared_size_past_the_budget_is_refused_before_allocating() {
        let block = zstd::bulk::compress(&[7u8; 100], 1).unwrap();
        // 0xffffffff declared: refused, not attempted (it aborted the
        // process under an address-space limit)
        let e =
            decompress("zstd", &block, 0xffff_ffff, Path::new("f.dat"), 40, 1 << 20).unwrap_err();
        match e {
            ReadError::OverBudget {
                offset,
                need,
                budget,
                ..
            } => assert_eq!((offset, need, budget), (40, 0xffff_ffff, 1 << 20)),
            other => panic!("expected over-budget, got {other:?}"),
        }
        // within the budget the same block reads
        let ok = decompress("zstd", &block, 100, Path::new("f.dat"), 40, 1 << 20).unwrap();
        assert_eq!(ok, vec![7u8; 100]);
    }

    #[test]
    fn a_zlib_block_never_inflates_past_what_it_declares() {
        let block = zlib(&[1u8; 10_000]);
        let whole = decompress("zlib", &block, 10_000, Path::new("f.dat"), 0, 1 << 20).unwrap();
        assert_eq!(whole.len(), 10_000);
        // a block declaring less than it holds is corrupt, and what it
        // holds is not inflated past the declared size plus one byte
        let e = decompress("zlib", &block, 100, Path::new("f.dat"), 0, 1 << 20).unwrap_err();
        assert_eq!(e.tag(), "corrupt-compressed", "{e}");
    }
}
