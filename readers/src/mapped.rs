//! A byte range of a file, memory-mapped where the file system allows it.
//!
//! Why map: a reader that sorts records before decoding them (perf.data's
//! rounds) must keep each record's bytes until it is emitted. Read with
//! `pread`, every byte is copied twice (kernel to buffer, buffer to the
//! sorter's arena); mapped, records are used where they lie in the page
//! cache, and the sorter holds offsets.
//!
//! The cost, as for ripgrep's mmap searches: if another process truncates
//! the file while it is read, the kernel kills the reader with SIGBUS
//! instead of a read error. A file system that cannot map falls back to
//! reading the range into memory.
//!
//! Memory stays flat: [`MappedRange::release_before`] drops the pages of
//! what has been consumed (they stay in the page cache, so nothing is read
//! twice), and the mapping is advised as sequential.

use crate::error::{ReadError, ReadResult};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// Released at most this often: one `madvise` per 16 MiB consumed.
const RELEASE_STEP: usize = 16 << 20;

enum Store {
    Mapped(memmap2::Mmap),
    Read(Vec<u8>),
}

/// `len` bytes of a file from `offset`, indexed from 0.
pub struct MappedRange {
    bytes: Store,
    released: usize,
}

impl MappedRange {
    /// Map (or, failing that, read) `len` bytes of `f` at `offset`; the
    /// caller has checked that they lie within the file.
    pub fn new(f: &File, path: &Path, offset: u64, len: usize) -> ReadResult<Self> {
        if let Some(m) = Self::map(f, offset, len) {
            return Ok(m);
        }
        let mut v = vec![0u8; len];
        f.read_exact_at(&mut v, offset)
            .map_err(|e| ReadError::io(path, e))?;
        Ok(MappedRange {
            bytes: Store::Read(v),
            released: 0,
        })
    }

    /// Map `len` bytes of `f` at `offset`, or `None` where the file system
    /// cannot (for a caller that would rather stream the bytes than read
    /// them all into memory); an empty range is empty bytes.
    pub fn map(f: &File, offset: u64, len: usize) -> Option<Self> {
        if len == 0 {
            return Some(MappedRange {
                bytes: Store::Read(Vec::new()),
                released: 0,
            });
        }
        // SAFETY: the map is read-only and private to this reader; the one
        // hazard, the file being truncated meanwhile, is SIGBUS (module doc).
        let m = unsafe { memmap2::MmapOptions::new().offset(offset).len(len).map(f) }.ok()?;
        // advice only: a kernel that ignores it reads the same bytes
        let _ = m.advise(memmap2::Advice::Sequential);
        Some(MappedRange {
            bytes: Store::Mapped(m),
            released: 0,
        })
    }

    /// The bytes.
    #[inline]
    pub fn bytes(&self) -> &[u8] {
        match &self.bytes {
            Store::Mapped(m) => m,
            Store::Read(v) => v,
        }
    }

    /// Let the pages of `from..to` go from this process: a later read of
    /// them faults them back in from the page cache (for readers whose
    /// streams mostly, but not always, move forward).
    pub fn release(&mut self, from: usize, to: usize) {
        let Store::Mapped(m) = &self.bytes else {
            return;
        };
        let to = to.min(m.len());
        if from >= to {
            return;
        }
        // SAFETY: DONTNEED on a read-only file mapping only unmaps pages;
        // a later access would fault them back in from the page cache.
        // memmap2 rounds the start down to a page, which at worst drops a
        // page still in use, to the same effect.
        let _ = unsafe {
            m.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, from, to - from)
        };
    }

    /// Nothing before `offset` will be looked at again: let its pages go
    /// from this process (in steps of `RELEASE_STEP`).
    pub fn release_before(&mut self, offset: usize) {
        let offset = offset.min(self.bytes().len());
        if offset < self.released + RELEASE_STEP {
            return;
        }
        self.release(self.released, offset);
        self.released = offset;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_range_reads_the_files_bytes_before_and_after_release() {
        let dir = std::env::temp_dir().join(format!("cratrace-mapped-{}", std::process::id()));
        let mut f = File::create(&dir).unwrap();
        let data: Vec<u8> = (0..(40u32 << 20) / 4)
            .flat_map(|i| i.to_le_bytes())
            .collect();
        f.write_all(&data).unwrap();
        drop(f);
        let f = File::open(&dir).unwrap();
        // an offset that is not page-aligned
        let mut r = MappedRange::new(&f, &dir, 12_345, data.len() - 12_345).unwrap();
        assert_eq!(r.bytes(), &data[12_345..]);
        r.release_before(20 << 20);
        // released pages come back from the page cache with the same bytes
        assert_eq!(r.bytes(), &data[12_345..]);
        // and so do pages let go again after being read back
        r.release(4096, 30 << 20);
        assert_eq!(r.bytes(), &data[12_345..]);
        std::fs::remove_file(&dir).unwrap();
    }
}
