//! The tokenizer and the per-pCPU streams: where each pCPU's windows sit
//! in the file, and the records of one pCPU in file order.
//!
//! Both read the file's bytes where they lie in a mapping of the whole
//! file (see [`crate::mapped`]). Read with `pread`, the generated benchmark
//! file (108 MB) was copied out of the page cache twice, by the tokenizer
//! and by the streams' read buffers, and the kernel's copy was 6% of the
//! import's samples.

use super::names::CPU_CHANGE;
use super::XenSummary;
use crate::error::{ReadError, ReadResult};
use std::path::Path;

pub(super) struct Window {
    pub(super) cpu: u32,
    pub(super) start: u64,
    pub(super) len: u64,
}

/// Index the per-pCPU windows (cpu, start, length) of the file `bytes`
/// and the bytes the last one is missing.
pub(super) fn tokenize(path: &Path, bytes: &[u8]) -> ReadResult<(Vec<Window>, u64)> {
    let size = bytes.len() as u64;
    let mut windows = Vec::new();
    let mut pos = 0u64;
    while pos + 12 <= size {
        let head = &bytes[pos as usize..pos as usize + 12];
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
pub(super) struct Rec {
    pub(super) ev: u32,
    pub(super) tsc: u64,
    /// Words used of `words` (the rest hold whatever followed).
    pub(super) n: usize,
    pub(super) words: [u32; 7],
    /// Size in the file.
    pub(super) bytes: u64,
}

pub(super) struct Stream {
    pub(super) cpu: u32,
    windows: Vec<(u64, u64)>,
    next_window: usize,
    /// The current window is the file's `pos..win_end`.
    pos: usize,
    win_end: usize,
    last_tsc: u64,
    /// The head record while another stream leads the merge.
    pub(super) head: Option<Rec>,
}

impl Stream {
    /// The stream of one pCPU's windows, as (start, length) in file order.
    pub(super) fn new(cpu: u32, windows: Vec<(u64, u64)>) -> Self {
        Stream {
            cpu,
            windows,
            next_window: 0,
            pos: 0,
            win_end: 0,
            last_tsc: 0,
            head: None,
        }
    }

    /// Where in the file this stream reads now (the file's size at its
    /// end): nothing before the least of the streams' is read again.
    pub(super) fn position(&self, size: usize) -> usize {
        if self.pos < self.win_end || self.next_window < self.windows.len() {
            self.pos.min(self.win_end)
        } else {
            size
        }
    }

    /// The next record of this pCPU, or `None` at its end. The common case
    /// (another record in the current window) is inlined into the merge
    /// loop, so the record stays in registers: returned through memory, it
    /// was stored field by field and reloaded whole, and the stalled reload
    /// was a seventh of the reader's time.
    #[inline(always)]
    pub(super) fn next(&mut self, bytes: &[u8], path: &Path, s: &mut XenSummary) -> Option<Rec> {
        loop {
            if self.pos + 4 <= self.win_end {
                let b = &bytes[self.pos..self.win_end];
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
                    return Some(Rec {
                        ev: w & 0x0fff_ffff,
                        tsc: self.last_tsc,
                        n,
                        words,
                        bytes: size as u64,
                    });
                }
            }
            if !self.next_window(path, s) {
                return None;
            }
        }
    }

    /// Move to the next window (warning about a record cut at the end of
    /// the current one); false when there is none.
    #[cold]
    #[inline(never)]
    fn next_window(&mut self, path: &Path, s: &mut XenSummary) -> bool {
        if self.pos + 4 <= self.win_end {
            s.warnings.push(format!(
                "{}: cpu {}: a record is cut at the end of its window; rest of window skipped",
                path.display(),
                self.cpu
            ));
        }
        let Some(&(start, len)) = self.windows.get(self.next_window) else {
            self.pos = self.win_end;
            return false;
        };
        self.next_window += 1;
        self.pos = start as usize;
        self.win_end = (start + len) as usize;
        true
    }
}
