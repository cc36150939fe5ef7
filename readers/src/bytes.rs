//! Bounds-checked, endian-aware reading of byte slices.
//!
//! Every reader goes through [`Bytes`] so that a hostile length or offset
//! becomes a `Corrupt` error naming the file offset, never a panic or an
//! out-of-bounds read.

use crate::error::{ReadError, ReadResult};
use std::path::Path;

/// Byte order of the traced machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endian {
    /// Little endian.
    Little,
    /// Big endian.
    Big,
}

impl Endian {
    /// u16 from 2 bytes.
    #[inline]
    pub fn u16(self, b: [u8; 2]) -> u16 {
        match self {
            Endian::Little => u16::from_le_bytes(b),
            Endian::Big => u16::from_be_bytes(b),
        }
    }
    /// u32 from 4 bytes.
    #[inline]
    pub fn u32(self, b: [u8; 4]) -> u32 {
        match self {
            Endian::Little => u32::from_le_bytes(b),
            Endian::Big => u32::from_be_bytes(b),
        }
    }
    /// u64 from 8 bytes.
    #[inline]
    pub fn u64(self, b: [u8; 8]) -> u64 {
        match self {
            Endian::Little => u64::from_le_bytes(b),
            Endian::Big => u64::from_be_bytes(b),
        }
    }
    /// Unsigned integer of `size` bytes (1, 2, 4 or 8) at `data[off..]`;
    /// None when out of range or of another size.
    #[inline]
    pub fn uint(self, data: &[u8], off: usize, size: usize) -> Option<u64> {
        let s = data.get(off..off.checked_add(size)?)?;
        Some(match size {
            1 => s[0] as u64,
            2 => self.u16([s[0], s[1]]) as u64,
            4 => self.u32([s[0], s[1], s[2], s[3]]) as u64,
            8 => self.u64([s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]]),
            _ => return None,
        })
    }
}

/// A cursor over a byte slice that knows its position in the file.
pub struct Bytes<'a> {
    data: &'a [u8],
    pos: usize,
    /// File offset of `data[0]`, for error messages.
    base: u64,
    endian: Endian,
    path: &'a Path,
}

impl<'a> Bytes<'a> {
    /// A cursor over `data`, which starts at file offset `base`.
    pub fn new(data: &'a [u8], base: u64, endian: Endian, path: &'a Path) -> Self {
        Bytes {
            data,
            pos: 0,
            base,
            endian,
            path,
        }
    }

    /// Current file offset.
    pub fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// Bytes left.
    pub fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }

    /// Change the byte order (trace.dat knows it only after a few bytes).
    pub fn set_endian(&mut self, e: Endian) {
        self.endian = e;
    }

    /// The byte order in use.
    pub fn endian(&self) -> Endian {
        self.endian
    }

    /// An error at the current offset.
    pub fn corrupt(&self, tag: &'static str, what: impl Into<String>) -> ReadError {
        ReadError::corrupt(self.path, self.offset(), tag, what)
    }

    /// Take `n` bytes.
    pub fn take(&mut self, n: usize, what: &str) -> ReadResult<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.data.len());
        match end {
            Some(end) => {
                let s = &self.data[self.pos..end];
                self.pos = end;
                Ok(s)
            }
            None => Err(self.corrupt(
                "truncated",
                format!("{what}: need {n} bytes, only {} left", self.remaining()),
            )),
        }
    }

    /// Skip `n` bytes.
    pub fn skip(&mut self, n: usize, what: &str) -> ReadResult<()> {
        self.take(n, what).map(|_| ())
    }

    /// A u8.
    pub fn u8(&mut self, what: &str) -> ReadResult<u8> {
        Ok(self.take(1, what)?[0])
    }
    /// A u16 in file byte order.
    pub fn u16(&mut self, what: &str) -> ReadResult<u16> {
        let b = self.take(2, what)?;
        Ok(self.endian.u16([b[0], b[1]]))
    }
    /// A u32 in file byte order.
    pub fn u32(&mut self, what: &str) -> ReadResult<u32> {
        let b = self.take(4, what)?;
        Ok(self.endian.u32([b[0], b[1], b[2], b[3]]))
    }
    /// A u64 in file byte order.
    pub fn u64(&mut self, what: &str) -> ReadResult<u64> {
        let b = self.take(8, what)?;
        Ok(self
            .endian
            .u64([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
    }

    /// A NUL-terminated string (lossy UTF-8), consuming the NUL.
    pub fn cstr(&mut self, what: &str) -> ReadResult<String> {
        let rest = &self.data[self.pos..];
        match memchr::memchr(0, rest) {
            Some(n) => {
                let s = String::from_utf8_lossy(&rest[..n]).into_owned();
                self.pos += n + 1;
                Ok(s)
            }
            None => Err(self.corrupt("truncated", format!("{what}: unterminated string"))),
        }
    }

    /// `len` bytes given by a preceding u32 or u64 size, as text.
    pub fn sized_text(&mut self, size_bytes: usize, what: &str) -> ReadResult<String> {
        let n = if size_bytes == 8 {
            self.u64(what)?
        } else {
            self.u32(what)? as u64
        };
        let n = usize::try_from(n)
            .map_err(|_| self.corrupt("corrupt-header", format!("{what}: size {n}")))?;
        Ok(String::from_utf8_lossy(self.take(n, what)?).into_owned())
    }
}
