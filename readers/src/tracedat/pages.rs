//! Each CPU's ring-buffer pages, streamed from the file.
//!
//! Uncompressed data is read a batch of pages at a time; v7 compressed data
//! is a list of chunks (`count u32`, then `csize u32, usize u32, bytes` per
//! chunk), decompressed one chunk at a time. Either way memory per CPU is
//! bounded, whatever the trace length. Data cut off by a truncated file is
//! not an error: complete pages are salvaged and the shortfall reported.

use super::header::{decompress, CpuData, TraceDatMeta};
use crate::error::{ReadError, ReadResult};
use std::fs::File;
use std::os::unix::fs::FileExt;

const BATCH_PAGES: u64 = 64;

/// Bytes of a CPU's compressed chunk list read at a time. Chunks are a few
/// kilobytes: with one `pread` per chunk header and one per body, the
/// 2.8 M-event benchmark trace took 6,300 system calls.
const CHUNK_READ_AHEAD: u64 = 256 << 10;

enum Kind {
    Plain { next: u64, end: u64 },
    Compressed { chunks_left: u32, next: u64 },
}

/// Pages of one CPU of one buffer.
pub struct PageSource {
    file: File,
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
    compression: String,
    zstd: Option<zstd::bulk::Decompressor<'static>>,
    path: std::path::PathBuf,
    endian: crate::bytes::Endian,
    file_size: u64,
}

impl PageSource {
    /// Open the pages of `cpu`.
    pub fn new(
        meta: &TraceDatMeta,
        cpu: &CpuData,
        page_size: u32,
        compressed: bool,
    ) -> ReadResult<Self> {
        let file = File::open(&meta.path).map_err(|e| ReadError::io(&meta.path, e))?;
        let fs = meta.file_size;
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
                file.read_exact_at(&mut b, cpu.offset)
                    .map_err(|e| ReadError::io(&meta.path, e))?;
                Kind::Compressed {
                    chunks_left: meta.endian.u32(b),
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
            file,
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
            compression: meta.compression.clone(),
            zstd: if meta.compression == "zstd" {
                zstd::bulk::Decompressor::new().ok()
            } else {
                None
            },
            path: meta.path.clone(),
            endian: meta.endian,
            file_size: fs,
        })
    }

    fn refill(&mut self) -> ReadResult<bool> {
        self.pos = 0;
        self.buf.clear();
        match &mut self.kind {
            Kind::Plain { next, end } => {
                if *next >= *end {
                    return Ok(false);
                }
                let n = (*end - *next).min(BATCH_PAGES * self.page_size as u64);
                self.buf.resize(n as usize, 0);
                self.file
                    .read_exact_at(&mut self.buf, *next)
                    .map_err(|e| ReadError::io(&self.path, e))?;
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
                if at.checked_add(8).is_none_or(|e| e > self.file_size) {
                    self.missing_bytes += 1;
                    *chunks_left = 0;
                    return Ok(false);
                }
                let h = window(
                    &self.file,
                    &self.path,
                    &mut self.compressed,
                    &mut self.window_at,
                    self.section_end,
                    at,
                    8,
                )?;
                let csize = self.endian.u32([h[0], h[1], h[2], h[3]]) as u64;
                let usize_ = self.endian.u32([h[4], h[5], h[6], h[7]]) as usize;
                if at + 8 + csize > self.file_size {
                    // Truncated inside this chunk: what is left cannot be decompressed.
                    self.missing_bytes += (at + 8 + csize) - self.file_size;
                    *chunks_left = 0;
                    return Ok(false);
                }
                if usize_ > 1 << 30 {
                    return Err(ReadError::corrupt(
                        &self.path,
                        at,
                        "corrupt-compressed",
                        format!("chunk claims {usize_} uncompressed bytes"),
                    ));
                }
                let c = window(
                    &self.file,
                    &self.path,
                    &mut self.compressed,
                    &mut self.window_at,
                    self.section_end,
                    at + 8,
                    csize,
                )?;
                match (&mut self.zstd, self.compression.as_str()) {
                    // One decompression context per stream: creating one per
                    // chunk showed up at 3% of the import profile.
                    (Some(z), _) => {
                        self.buf.reserve(usize_);
                        z.decompress_to_buffer(c, &mut self.buf).map_err(|e| {
                            ReadError::corrupt(
                                &self.path,
                                at + 8,
                                "corrupt-compressed",
                                format!("cannot decompress zstd chunk: {e}"),
                            )
                        })?;
                    }
                    _ => self.buf = decompress(&self.compression, c, usize_, &self.path, at + 8)?,
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
    pub fn next_page(&mut self) -> ReadResult<bool> {
        while self.pos + self.page_size > self.buf.len() {
            if !self.refill()? {
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

/// `len` bytes of the file at `at`, from the read-ahead window `buf`
/// (which holds the file's bytes from `*buf_at`), refilled from `at` when
/// they are not all in it: with [`CHUNK_READ_AHEAD`] bytes, or up to
/// `end` (this CPU's data) if sooner, but never fewer than `len`. Both
/// buffers live as long as the stream: a fresh pair per chunk cost an
/// allocation and page faults every few pages.
fn window<'a>(
    file: &File,
    path: &std::path::Path,
    buf: &'a mut Vec<u8>,
    buf_at: &mut u64,
    end: u64,
    at: u64,
    len: u64,
) -> ReadResult<&'a [u8]> {
    if at < *buf_at || at + len > *buf_at + buf.len() as u64 {
        let n = CHUNK_READ_AHEAD.min(end.saturating_sub(at)).max(len);
        buf.resize(n as usize, 0);
        file.read_exact_at(buf, at)
            .map_err(|e| ReadError::io(path, e))?;
        *buf_at = at;
    }
    let from = (at - *buf_at) as usize;
    Ok(&buf[from..from + len as usize])
}
