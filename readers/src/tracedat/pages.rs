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
    /// A compressed chunk as read from the file.
    compressed: Vec<u8>,
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
                let mut h = [0u8; 8];
                if at.checked_add(8).is_none_or(|e| e > self.file_size) {
                    self.missing_bytes += 1;
                    *chunks_left = 0;
                    return Ok(false);
                }
                self.file
                    .read_exact_at(&mut h, at)
                    .map_err(|e| ReadError::io(&self.path, e))?;
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
                // Both buffers live as long as the stream: a fresh pair per
                // chunk cost an allocation and page faults every few pages.
                let c = &mut self.compressed;
                c.resize(csize as usize, 0);
                self.file
                    .read_exact_at(c, at + 8)
                    .map_err(|e| ReadError::io(&self.path, e))?;
                match (&mut self.zstd, self.compression.as_str()) {
                    // One decompression context per stream: creating one per
                    // chunk showed up at 3% of the import profile.
                    (Some(z), _) => {
                        self.buf.reserve(usize_);
                        z.decompress_to_buffer(c.as_slice(), &mut self.buf)
                            .map_err(|e| {
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
