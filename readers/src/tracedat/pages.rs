//! Each CPU's ring-buffer pages, streamed from the file.
//!
//! Uncompressed data is read a batch of pages at a time; v7 compressed data
//! is a list of chunks (`count u32`, then `csize u32, usize u32, bytes` per
//! chunk), decompressed one chunk at a time. Either way memory per CPU is
//! bounded, whatever the trace length. Data cut off by a truncated file is
//! not an error: complete pages are salvaged and the shortfall reported.
//!
//! Every CPU's source reads through one [`TraceFile`]: one descriptor and
//! one zstd context for the whole file, however many CPUs and instances it
//! holds. A descriptor per CPU buffer ran out of them on a file of 1,024
//! buffers under the usual limit of 1,024 open files (which `trace-cmd
//! report` reads); a context per CPU buffer cost 600 buffers 8 MB. Read-ahead
//! shares a fixed budget likewise.

use super::header::{decompress, CpuData, TraceDatMeta};
use crate::error::{ReadError, ReadResult};
use std::fs::File;
use std::os::unix::fs::FileExt;

/// Bytes read ahead per CPU: a batch of whole pages, or a run of
/// compressed chunks. Chunks are a few kilobytes: with one `pread` per
/// chunk header and one per body, the 2.8 M-event benchmark trace took
/// 6,300 system calls.
const READ_AHEAD: u64 = 256 << 10;
/// ... but all CPUs together hold at most this much read ahead (a 1,024-CPU
/// file gets 64 KiB per CPU) ...
const READ_AHEAD_BUDGET: u64 = 64 << 20;
/// ... and never less than this per CPU.
const MIN_READ_AHEAD: u64 = 16 << 10;

/// The read-ahead of each of `streams` sources.
pub fn read_ahead_for(streams: usize) -> u64 {
    (READ_AHEAD_BUDGET / streams.max(1) as u64).clamp(MIN_READ_AHEAD, READ_AHEAD)
}

/// The file every CPU's pages are read from, and what decoding a chunk
/// needs: shared by all the sources of one read.
pub struct TraceFile {
    file: File,
    path: std::path::PathBuf,
    size: u64,
    endian: crate::bytes::Endian,
    compression: String,
    /// One decompression context for the file (one per chunk showed up at
    /// 3% of the import profile).
    zstd: Option<zstd::bulk::Decompressor<'static>>,
    /// Bytes of decompressed chunks all the sources hold now, and the most
    /// they may: a chunk's declared size is the file's word, and the cap
    /// of one chunk multiplied by the CPU count took a 742 KB file to
    /// 6.3 GB (issue 42).
    held: u64,
    budget: u64,
}

impl TraceFile {
    /// Open the file `meta` describes.
    pub fn open(meta: &TraceDatMeta) -> ReadResult<Self> {
        let file = File::open(&meta.path).map_err(|e| ReadError::io(&meta.path, e))?;
        Ok(TraceFile {
            file,
            path: meta.path.clone(),
            size: meta.file_size,
            endian: meta.endian,
            compression: meta.compression.clone(),
            zstd: if meta.compression == "zstd" {
                zstd::bulk::Decompressor::new().ok()
            } else {
                None
            },
            held: 0,
            budget: meta.budget,
        })
    }
}

enum Kind {
    Plain { next: u64, end: u64 },
    Compressed { chunks_left: u32, next: u64 },
}

/// Pages of one CPU of one buffer.
pub struct PageSource {
    kind: Kind,
    page_size: usize,
    buf: Vec<u8>,
    /// Compressed chunks as read from the file: the bytes from `window_at`
    /// (the current chunk, and often the next ones).
    compressed: Vec<u8>,
    window_at: u64,
    /// Where this CPU's data ends (or the file, if sooner).
    section_end: u64,
    pos: usize,
    /// Where the current page starts in `buf`.
    page_at: Option<usize>,
    /// Bytes of this CPU's data the file does not hold (truncation).
    pub missing_bytes: u64,
    /// Bytes consumed so far (for progress).
    pub consumed: u64,
    /// File offset of the last page handed out (of its chunk when compressed).
    pub last_offset: u64,
    batch_offset: u64,
    /// Bytes read at a time ([`read_ahead_for`]).
    read_ahead: u64,
    /// Bytes of the file's decompression budget this source holds (its
    /// chunk buffer's capacity).
    held: u64,
}

impl PageSource {
    /// The pages of `cpu`, read `read_ahead` bytes at a time.
    pub fn new(
        file: &TraceFile,
        cpu: &CpuData,
        page_size: u32,
        compressed: bool,
        read_ahead: u64,
    ) -> ReadResult<Self> {
        let fs = file.size;
        let page = page_size as u64;
        let mut missing = 0;
        let kind = if compressed {
            let mut b = [0u8; 4];
            if cpu.size == 0 {
                Kind::Compressed {
                    chunks_left: 0,
                    next: 0,
                }
            } else if cpu.offset.checked_add(4).is_none_or(|e| e > fs) {
                missing = cpu.size;
                Kind::Compressed {
                    chunks_left: 0,
                    next: 0,
                }
            } else {
                file.file
                    .read_exact_at(&mut b, cpu.offset)
                    .map_err(|e| ReadError::io(&file.path, e))?;
                Kind::Compressed {
                    chunks_left: file.endian.u32(b),
                    next: cpu.offset + 4,
                }
            }
        } else {
            let avail = fs.saturating_sub(cpu.offset).min(cpu.size);
            let whole = avail / page * page;
            missing = cpu.size - whole;
            Kind::Plain {
                next: cpu.offset,
                end: cpu.offset + whole,
            }
        };
        Ok(PageSource {
            kind,
            page_size: page_size as usize,
            buf: Vec::new(),
            compressed: Vec::new(),
            window_at: 0,
            section_end: cpu.offset.saturating_add(cpu.size).min(fs),
            pos: 0,
            page_at: None,
            missing_bytes: missing,
            consumed: 0,
            last_offset: cpu.offset,
            batch_offset: cpu.offset,
            read_ahead,
            held: 0,
        })
    }

    fn refill(&mut self, f: &mut TraceFile) -> ReadResult<bool> {
        self.pos = 0;
        self.buf.clear();
        match &mut self.kind {
            Kind::Plain { next, end } => {
                if *next >= *end {
                    return Ok(false);
                }
                let page = self.page_size as u64;
                let n = (*end - *next).min((self.read_ahead / page).max(1) * page);
                self.buf.resize(n as usize, 0);
                f.file
                    .read_exact_at(&mut self.buf, *next)
                    .map_err(|e| ReadError::io(&f.path, e))?;
                self.batch_offset = *next;
                *next += n;
                self.consumed += n;
                Ok(true)
            }
            Kind::Compressed { chunks_left, next } => {
                if *chunks_left == 0 {
                    return Ok(false);
                }
                let at = *next;
                if at.checked_add(8).is_none_or(|e| e > f.size) {
                    self.missing_bytes += 1;
                    *chunks_left = 0;
                    return Ok(false);
                }
                let mut ahead = Window {
                    file: &f.file,
                    path: &f.path,
                    buf: &mut self.compressed,
                    buf_at: &mut self.window_at,
                    end: self.section_end,
                    size: self.read_ahead,
                };
                let h = ahead.get(at, 8)?;
                let csize = f.endian.u32([h[0], h[1], h[2], h[3]]) as u64;
                let usize_ = f.endian.u32([h[4], h[5], h[6], h[7]]) as usize;
                if at + 8 + csize > f.size {
                    // Truncated inside this chunk: what is left cannot be decompressed.
                    self.missing_bytes += (at + 8 + csize) - f.size;
                    *chunks_left = 0;
                    return Ok(false);
                }
                // what this chunk holds once decompressed, counted with
                // what every other CPU's source holds now
                let need = (usize_ as u64).max(self.buf.capacity() as u64);
                let others = f.held - self.held;
                if others + need > f.budget {
                    return Err(ReadError::OverBudget {
                        path: f.path.clone(),
                        offset: at,
                        what: format!(
                            "a compressed chunk declaring {usize_} bytes, with the other CPUs' chunks held,"
                        ),
                        need: others + need,
                        budget: f.budget,
                    });
                }
                f.held = others + need;
                self.held = need;
                let c = ahead.get(at + 8, csize)?;
                match (&mut f.zstd, f.compression.as_str()) {
                    (Some(z), _) => {
                        self.buf.reserve(usize_);
                        z.decompress_to_buffer(c, &mut self.buf).map_err(|e| {
                            ReadError::corrupt(
                                &f.path,
                                at + 8,
                                "corrupt-compressed",
                                format!("cannot decompress zstd chunk: {e}"),
                            )
                        })?;
                    }
                    (None, algo) => {
                        self.buf = decompress(algo, c, usize_, &f.path, at + 8, f.budget)?
                    }
                }
                self.batch_offset = at;
                *next = at + 8 + csize;
                *chunks_left -= 1;
                self.consumed += 8 + csize;
                Ok(true)
            }
        }
    }

    /// Move to the next full page; false at the end.
    pub fn next_page(&mut self, file: &mut TraceFile) -> ReadResult<bool> {
        while self.pos + self.page_size > self.buf.len() {
            if !self.refill(file)? {
                self.page_at = None;
                return Ok(false);
            }
        }
        self.page_at = Some(self.pos);
        self.last_offset = match self.kind {
            Kind::Plain { .. } => self.batch_offset + self.pos as u64,
            Kind::Compressed { .. } => self.batch_offset,
        };
        self.pos += self.page_size;
        Ok(true)
    }

    /// The page [`next_page`](Self::next_page) moved to (empty before the
    /// first and after the last): borrowed from the batch or chunk it sits
    /// in, not copied.
    #[inline]
    pub fn page(&self) -> &[u8] {
        match self.page_at {
            Some(at) => &self.buf[at..at + self.page_size],
            None => &[],
        }
    }
}

/// A CPU's read-ahead over the file: `buf` holds the file's bytes from
/// `*buf_at`. It and its buffer live as long as the stream: a fresh pair
/// per chunk cost an allocation and page faults every few pages.
struct Window<'a> {
    file: &'a File,
    path: &'a std::path::Path,
    buf: &'a mut Vec<u8>,
    buf_at: &'a mut u64,
    /// Where this CPU's data ends.
    end: u64,
    /// Bytes to read at a time.
    size: u64,
}

impl Window<'_> {
    /// `len` bytes of the file at `at`, refilling the window from `at` when
    /// they are not all in it: with `size` bytes, or up to `end` if sooner,
    /// but never fewer than `len`.
    fn get(&mut self, at: u64, len: u64) -> ReadResult<&[u8]> {
        let buf_at = *self.buf_at;
        if at < buf_at || at + len > buf_at + self.buf.len() as u64 {
            let n = self.size.min(self.end.saturating_sub(at)).max(len);
            self.buf.resize(n as usize, 0);
            self.file
                .read_exact_at(self.buf, at)
                .map_err(|e| ReadError::io(self.path, e))?;
            *self.buf_at = at;
        }
        let from = (at - *self.buf_at) as usize;
        Ok(&self.buf[from..from + len as usize])
    }
}
