//! The tokenizer and the per-pCPU streams: where each pCPU's windows sit
//! in the file, and the records of one pCPU in file order.

use super::names::CPU_CHANGE;
use super::{Damage, XenSummary};
use crate::error::{ReadError, ReadResult};
use crate::mapped::MappedRange;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

pub(super) struct Window {
    pub(super) cpu: u32,
    pub(super) start: u64,
    pub(super) len: u64,
}

/// Bytes the tokenizer reads at a time.
const TOKENIZE_CHUNK: u64 = 1 << 20;

/// Index the per-pCPU windows (cpu, start, length), the bytes the last
/// one is missing, and whether the file ends inside a window's header. The headers are read from 1 MiB chunks of the file: a
/// `pread` of each 12-byte header cost a system call per window (100 k on
/// the benchmark's generated file, whose windows are a kilobyte), more than
/// reading the whole file once.
pub(super) fn tokenize(
    path: &Path,
    file: &File,
    size: u64,
) -> ReadResult<(Vec<Window>, u64, bool)> {
    let mut windows = Vec::new();
    let mut pos = 0u64;
    // zeroed by calloc, never again: read_exact_at fills what is used
    let mut chunk = vec![0u8; TOKENIZE_CHUNK.min(size) as usize];
    let (mut chunk_at, mut chunk_len) = (0u64, 0usize);
    while pos + 12 <= size {
        if pos < chunk_at || pos + 12 > chunk_at + chunk_len as u64 {
            chunk_len = TOKENIZE_CHUNK.min(size - pos) as usize;
            file.read_exact_at(&mut chunk[..chunk_len], pos)
                .map_err(|e| ReadError::io(path, e))?;
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
            return Ok((windows, start + len - size, false));
        }
        windows.push(Window { cpu, start, len });
        pos = start + len;
    }
    // a file ending inside a header lacks the header's rest (was: the
    // bytes it held counted as missing, "1 bytes" where 11 were)
    let held = size - pos;
    Ok((windows, if held > 0 { 12 - held } else { 0 }, held > 0))
}

/// One record: header word, TSC (inherited when absent) and words.
#[derive(Clone, Copy, Debug)]
pub(super) struct Rec {
    pub(super) ev: u32,
    pub(super) tsc: u64,
    /// Words used of `words` (the rest hold whatever followed).
    pub(super) n: usize,
    pub(super) words: [u32; 7],
    /// Size in the file.
    pub(super) bytes: u64,
}

/// A pCPU's records in file order. Its bytes come from the file's mapping
/// when there is one (passed to every [`Stream::next`]; positions are then
/// the file's offsets), else from reads into its own buffer.
pub(super) struct Stream {
    pub(super) cpu: u32,
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
    pub(super) head: Option<Rec>,
    /// Mapped: the file offset before which this stream has let its pages
    /// go.
    released: u64,
    /// The file's size: a window ending there was cut with the file (said
    /// as the file's truncation, not as a record cut by its window).
    file_end: u64,
}

/// Mapped: the bytes a stream reads past before it lets their pages go.
const RELEASE_STEP: u64 = 2 << 20;

/// Most bytes one read brings in for a stream.
const READ_AHEAD: u64 = 1 << 20;

impl Stream {
    /// The pCPU's stream of windows, as (start, length) in file order, of
    /// a file of `file_end` bytes.
    pub(super) fn new(cpu: u32, windows: Vec<(u64, u64)>, file_end: u64) -> Self {
        Stream {
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
            released: 0,
            file_end,
        }
    }

    /// The next record of this pCPU, or `None` at its end; `mapped`: the
    /// file's mapping, given to every call or to none. The common case
    /// (another record in the current window) is inlined into the merge
    /// loop, so the record stays in registers: returned through memory, it
    /// was stored field by field and reloaded whole, and the stalled reload
    /// was a seventh of the reader's time.
    #[inline(always)]
    pub(super) fn next(
        &mut self,
        file: &File,
        path: &Path,
        s: &mut XenSummary,
        mapped: Option<&[u8]>,
    ) -> ReadResult<Option<Rec>> {
        loop {
            if self.pos + 4 <= self.win_end {
                let all = mapped.unwrap_or(&self.buf);
                let b = &all[self.pos..self.win_end];
                let w = u32::from_le_bytes(b[0..4].try_into().expect("4"));
                let n = ((w >> 28) & 7) as usize;
                let has_tsc = w >> 31 == 1;
                let size = 4 + if has_tsc { 8 } else { 0 } + 4 * n;
                if b.len() >= size {
                    let mut off = 4;
                    if has_tsc {
                        let tsc = u64::from_le_bytes(b[4..12].try_into().expect("8"));
                        if tsc < self.last_tsc {
                            let at = self.buf_start + self.pos as u64;
                            Damage::count(&mut s.damage.backwards, self.cpu, at);
                        }
                        self.last_tsc = tsc;
                        off = 12;
                    } else if w == CPU_CHANGE | 2 << 28 {
                        // only xentrace writes these, between windows
                        let at = self.buf_start + self.pos as u64;
                        Damage::count(&mut s.damage.inner_header, self.cpu, at);
                    }
                    let mut words = [0u32; 7];
                    if let Some(all) = b.get(off..off + 28) {
                        // seven words whatever `n` (a fixed-size copy, where
                        // a loop of `n` steps cost a branch per word); those
                        // past `n` are the next record's bytes, and every
                        // use of `words` stops at `n`
                        for (wd, x) in words.iter_mut().zip(all.chunks_exact(4)) {
                            *wd = u32::from_le_bytes(x.try_into().expect("4"));
                        }
                    } else {
                        for (i, wd) in words.iter_mut().enumerate().take(n) {
                            *wd = u32::from_le_bytes(
                                b[off + 4 * i..off + 4 * i + 4].try_into().expect("4"),
                            );
                        }
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
            if !self.next_window(file, path, s, mapped.is_some())? {
                return Ok(None);
            }
        }
    }

    /// The file offset of the record [`Stream::next`] returned last, of
    /// `bytes` bytes (positions stay in its window until the next call).
    #[cold]
    pub(super) fn offset_of_last(&self, bytes: u64) -> u64 {
        self.buf_start + self.pos as u64 - bytes
    }

    /// Let go of the mapped pages this stream has read past since it last
    /// did, in steps of [`RELEASE_STEP`]. Other pCPUs' windows share those
    /// pages; one not read yet faults its pages back in from the page
    /// cache, and its stream lets them go in turn. Released only behind the
    /// slowest stream, pages stayed mapped whenever the pCPUs' windows were
    /// not in time order in the file (the benchmark's generated file
    /// held four fifths of itself that way).
    pub(super) fn release_read(&mut self, m: &mut MappedRange) {
        let at = if self.pos + 4 <= self.win_end {
            self.pos as u64
        } else {
            // between windows: up to the next, or everything
            self.windows
                .get(self.next_window)
                .map_or(m.bytes().len() as u64, |&(start, _)| start)
        };
        if at >= self.released + RELEASE_STEP {
            m.release(self.released as usize, at as usize);
            self.released = at;
        }
    }

    /// Move to the next window (warning about a record cut at the end of
    /// the current one), reading it into the buffer unless the file is
    /// `mapped`; false when there is none.
    #[cold]
    #[inline(never)]
    fn next_window(
        &mut self,
        file: &File,
        path: &Path,
        s: &mut XenSummary,
        mapped: bool,
    ) -> ReadResult<bool> {
        let cut_with_file =
            s.truncated_bytes > 0 && self.buf_start + self.win_end as u64 == self.file_end;
        if self.pos < self.win_end && !cut_with_file {
            // said once for all at the end of the read, with the first's offset
            let at = self.buf_start + self.pos as u64;
            Damage::count(&mut s.damage.cut, self.cpu, at);
        }
        let Some(&(start, len)) = self.windows.get(self.next_window) else {
            self.pos = self.win_end;
            return Ok(false);
        };
        // mapped: `buf_start` stays 0 and positions are the file's offsets
        if !mapped && (start < self.buf_start || start + len > self.buf_start + self.buf_len as u64)
        {
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
            .map_err(|e| ReadError::io(path, e))?;
        self.buf_start = start;
        Ok(())
    }
}
