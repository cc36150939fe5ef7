//! The writing side of the ring buffer (issue #47): event payloads laid
//! out as the kernel lays them out ([`Payload`]), and records packed into
//! pages as the kernel packs them ([`PageStream`]), streamed to any
//! [`Write`] as each page fills.
//!
//! `cratrace synth` writes its traces through these, a batch of events at
//! a time, so that a trace of a hundred million events is never held
//! whole. The file around the pages (header, sections, options) is written
//! by `cratrace/synth/tracedat_writer.py`, whose Python page and payload
//! code was the first implementation: this one gives the same bytes
//! (`tests/synth/test_synth_streaming.py` checks files against hashes of
//! what that code wrote), so a generated trace is byte-identical to what
//! the same seed and parameters always gave.
//!
//! Page layout (the reader's [`records`](super::records) decodes it): a
//! page is `timestamp u64 | commit long | records | lost count?`, each
//! record starting with a 32-bit `type_len:5 | time_delta:27` word (bit
//! order flipped on big-endian kernels). A delta that does not fit in 27
//! bits goes in a time-extend record before the event; every `abs_every`
//! records (if set) an absolute time stamp record is written instead; a
//! page whose next record does not fit is closed with a padding record
//! (when `tail_padding`), the last page of a stream is not.

use std::collections::HashMap;
use std::fmt;
use std::io::{self, Write};

const RB_PADDING: u32 = 29;
const RB_TIME_EXTEND: u32 = 30;
const RB_TIME_STAMP: u32 = 31;
const RB_MAX_SMALL_DATA: usize = 28 * 4;
const TS_BITS: u32 = 27;
const TS_MASK: u64 = (1 << TS_BITS) - 1;
const MISSED_EVENTS: u64 = 1 << 31;
const MISSED_STORED: u64 = 1 << 30;

/// Byte order and long size of the kernel the trace claims to come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Little-endian (else big).
    pub little: bool,
    /// The kernel's `long` and pointer size: 4 or 8.
    pub long_size: usize,
}

impl Layout {
    /// The low `out.len()` bytes of `value` into `out`, in the layout's
    /// byte order (the value is truncated to the field: two's complement
    /// for negative values, as a C store would).
    #[inline]
    pub fn put(self, out: &mut [u8], value: u64) {
        let n = out.len().min(8);
        if self.little {
            out[..n].copy_from_slice(&value.to_le_bytes()[..n]);
        } else {
            out[..n].copy_from_slice(&value.to_be_bytes()[8 - n..]);
        }
    }

    fn push(self, out: &mut Vec<u8>, value: u64, size: usize) {
        let at = out.len();
        out.resize(at + size, 0);
        self.put(&mut out[at..], value);
    }
}

/// Why a record could not be written.
#[derive(Debug)]
#[non_exhaustive]
pub enum WriteError {
    /// A CPU's records must come in time order.
    Unsorted {
        /// The record's time stamp.
        ts: u64,
        /// The previous record's.
        last: u64,
    },
    /// A record larger than a page.
    TooLarge {
        /// Payload bytes.
        payload: usize,
        /// The page size.
        page_size: usize,
    },
    /// A time delta beyond what a time-extend record holds (2^59).
    DeltaTooLarge(u64),
    /// Writing the pages failed.
    Io(io::Error),
}

impl fmt::Display for WriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WriteError::Unsorted { ts, last } => write!(
                f,
                "events on one CPU must be sorted by ts (ts {ts} after {last})"
            ),
            WriteError::TooLarge { payload, page_size } => write!(
                f,
                "event of {payload} bytes does not fit in a {page_size}-byte page"
            ),
            WriteError::DeltaTooLarge(d) => {
                write!(f, "time delta {d} does not fit a time-extend record")
            }
            WriteError::Io(e) => write!(f, "cannot write pages: {e}"),
        }
    }
}

impl std::error::Error for WriteError {}

impl From<io::Error> for WriteError {
    fn from(e: io::Error) -> Self {
        WriteError::Io(e)
    }
}

/// How a page stream packs its records.
#[derive(Clone, Debug)]
pub struct PageOptions {
    /// Byte order and long size.
    pub layout: Layout,
    /// Page size in bytes.
    pub page_size: usize,
    /// Close a page whose next record does not fit with a padding record.
    pub tail_padding: bool,
    /// An absolute time stamp record every this many records (0: never).
    pub abs_every: u64,
    /// Events lost before a page, by page index.
    pub lost: HashMap<u64, u64>,
}

/// What a page stream wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamStats {
    /// Records (events) written.
    pub records: u64,
    /// Their payload bytes.
    pub payload_bytes: u64,
    /// Pages written.
    pub pages: u64,
    /// First record's time stamp (the oldest: records are in time order).
    pub first_ts: Option<u64>,
    /// Last record's time stamp.
    pub last_ts: Option<u64>,
}

/// One CPU's records packed into pages, each page written to `out` as
/// soon as it is full.
pub struct PageStream<W: Write> {
    opts: PageOptions,
    out: W,
    body: Vec<u8>,
    rec: Vec<u8>,
    page: Vec<u8>,
    open: bool,
    page_ts: u64,
    last: u64,
    room: usize,
    lost_here: u64,
    stats: StreamStats,
}

impl<W: Write> PageStream<W> {
    /// A stream writing pages to `out`.
    pub fn new(opts: PageOptions, out: W) -> Self {
        PageStream {
            page: Vec::with_capacity(opts.page_size),
            opts,
            out,
            body: Vec::new(),
            rec: Vec::new(),
            open: false,
            page_ts: 0,
            last: 0,
            room: 0,
            lost_here: 0,
            stats: StreamStats::default(),
        }
    }

    fn header_size(&self) -> usize {
        8 + self.opts.layout.long_size
    }

    fn rec_header(&mut self, type_len: u32, delta: u64) {
        let word = if self.opts.layout.little {
            (delta << 5) | u64::from(type_len)
        } else {
            (u64::from(type_len) << TS_BITS) | delta
        };
        self.opts.layout.push(&mut self.rec, word, 4);
    }

    fn open_page(&mut self, ts: u64) {
        let cap = self.opts.page_size - self.header_size();
        self.lost_here = self.opts.lost.get(&self.stats.pages).copied().unwrap_or(0);
        self.room = cap
            - if self.lost_here != 0 {
                self.opts.layout.long_size
            } else {
                0
            };
        self.page_ts = ts;
        self.last = ts;
        self.body.clear();
        self.open = true;
    }

    /// Append one record (`payload` already 4-byte aligned).
    pub fn push(&mut self, ts: u64, payload: &[u8]) -> Result<(), WriteError> {
        let layout = self.opts.layout;
        let cap = self.opts.page_size - self.header_size();
        loop {
            if !self.open {
                self.open_page(ts);
            }
            if ts < self.last {
                return Err(WriteError::Unsorted {
                    ts,
                    last: self.last,
                });
            }
            let mut delta = ts - self.last;
            self.rec.clear();
            let abs = self.opts.abs_every;
            if abs != 0 && self.stats.records.is_multiple_of(abs) && ts != self.page_ts {
                self.rec_header(RB_TIME_STAMP, ts & TS_MASK);
                layout.push(&mut self.rec, (ts >> TS_BITS) & 0xFFFF_FFFF, 4);
                delta = 0;
            } else if delta > TS_MASK {
                if delta >> TS_BITS > 0xFFFF_FFFF {
                    return Err(WriteError::DeltaTooLarge(delta));
                }
                self.rec_header(RB_TIME_EXTEND, delta & TS_MASK);
                layout.push(&mut self.rec, delta >> TS_BITS, 4);
                delta = 0;
            }
            if payload.len() <= RB_MAX_SMALL_DATA {
                self.rec_header((payload.len() / 4) as u32, delta);
            } else {
                self.rec_header(0, delta);
                layout.push(&mut self.rec, payload.len() as u64 + 4, 4);
            }
            self.rec.extend_from_slice(payload);
            if self.rec.len() > cap {
                return Err(WriteError::TooLarge {
                    payload: payload.len(),
                    page_size: self.opts.page_size,
                });
            }
            if self.body.len() + self.rec.len() > self.room {
                // a record follows: the page's tail is padded
                self.close_page(true)?;
                continue;
            }
            self.body.extend_from_slice(&self.rec);
            self.last = ts;
            let s = &mut self.stats;
            s.records += 1;
            s.payload_bytes += payload.len() as u64;
            s.first_ts.get_or_insert(ts);
            s.last_ts = Some(ts);
            return Ok(());
        }
    }

    fn close_page(&mut self, more: bool) -> Result<(), WriteError> {
        let layout = self.opts.layout;
        let left = self.room - self.body.len();
        if self.opts.tail_padding && more && left >= 4 {
            // a padding record with delta 0: "the rest of the page is empty"
            self.rec.clear();
            self.rec_header(RB_PADDING, 0);
            if left >= 8 {
                layout.push(&mut self.rec, left as u64 - 4, 4);
                self.rec.resize(left, 0);
            }
            self.body.extend_from_slice(&self.rec);
        }
        let commit = self.body.len() as u64;
        let flags = if self.lost_here != 0 {
            MISSED_EVENTS | MISSED_STORED
        } else {
            0
        };
        let page = &mut self.page;
        page.clear();
        layout.push(page, self.page_ts, 8);
        layout.push(page, commit | flags, layout.long_size);
        page.extend_from_slice(&self.body);
        if self.lost_here != 0 {
            layout.push(page, self.lost_here, layout.long_size);
        }
        page.resize(self.opts.page_size, 0);
        self.out.write_all(page)?;
        self.stats.pages += 1;
        self.open = false;
        Ok(())
    }

    /// Close the last page (without padding) and hand back the writer
    /// and what was written.
    pub fn finish(mut self) -> Result<(W, StreamStats), WriteError> {
        if self.open {
            self.close_page(false)?;
        }
        self.out.flush()?;
        Ok((self.out, self.stats))
    }

    /// What was written so far.
    pub fn stats(&self) -> StreamStats {
        self.stats
    }
}

/// How a field of an event format is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldKind {
    /// An integer of the field's size.
    Int,
    /// A fixed array of integers: `len` elements of `elem` bytes.
    IntArray {
        /// Elements.
        len: usize,
        /// Bytes per element.
        elem: usize,
    },
    /// A fixed `char` array: the text, NUL-terminated if it fits.
    Chars,
    /// `__data_loc`: a u32 `len << 16 | offset` of data after the fixed part.
    DataLoc,
    /// `__rel_loc`: like `DataLoc`, the offset from the field's end.
    RelLoc,
    /// A flexible trailing array (`buf[]`): the data after the fixed part.
    Flex,
}

/// A field's place in the payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldSlot {
    /// Offset in the fixed part.
    pub offset: usize,
    /// Size in the fixed part.
    pub size: usize,
    /// How its value is stored.
    pub kind: FieldKind,
}

/// One event's payload being built: its fixed part (zeroed, so a field
/// left out is 0) and the dynamic data that follows it.
#[derive(Default)]
pub struct Payload {
    fixed: Vec<u8>,
    dynamic: Vec<u8>,
    layout: Option<Layout>,
}

impl Payload {
    /// Start a payload of `static_size` fixed bytes.
    pub fn start(&mut self, layout: Layout, static_size: usize) {
        self.fixed.clear();
        self.fixed.resize(static_size, 0);
        self.dynamic.clear();
        self.layout = Some(layout);
    }

    fn layout(&self) -> Layout {
        self.layout.expect("Payload::start first")
    }

    /// An integer field (or one element of an integer array at `index`).
    pub fn int(&mut self, slot: &FieldSlot, index: usize, value: u64) {
        let (at, size) = match slot.kind {
            FieldKind::IntArray { elem, .. } => (slot.offset + index * elem, elem),
            _ => (slot.offset, slot.size),
        };
        let layout = self.layout();
        layout.put(&mut self.fixed[at..at + size], value);
    }

    /// A fixed `char` array: at most `size - 1` bytes of `text`.
    pub fn chars(&mut self, slot: &FieldSlot, text: &[u8]) {
        let n = text.len().min(slot.size.saturating_sub(1));
        self.fixed[slot.offset..slot.offset + n].copy_from_slice(&text[..n]);
    }

    /// Dynamic data: after the fixed part, located by a `__data_loc` or
    /// `__rel_loc` word, or a flexible array's bytes.
    pub fn data(&mut self, slot: &FieldSlot, data: &[u8]) {
        match slot.kind {
            FieldKind::DataLoc | FieldKind::RelLoc => {
                let mut off = self.fixed.len() + self.dynamic.len();
                if slot.kind == FieldKind::RelLoc {
                    off = off.wrapping_sub(slot.offset + slot.size);
                }
                let word = ((data.len() as u64) << 16 | off as u64) & 0xFFFF_FFFF;
                let layout = self.layout();
                layout.put(&mut self.fixed[slot.offset..slot.offset + 4], word);
            }
            _ => {}
        }
        self.dynamic.extend_from_slice(data);
    }

    /// The payload: fixed part, dynamic data, zeros to a multiple of 4.
    pub fn finish(&mut self) -> &[u8] {
        self.fixed.extend_from_slice(&self.dynamic);
        let pad = (4 - self.fixed.len() % 4) % 4;
        self.fixed.resize(self.fixed.len() + pad, 0);
        &self.fixed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bytes::Endian;
    use crate::tracedat::records::PageCursor;

    fn opts(page_size: usize) -> PageOptions {
        PageOptions {
            layout: Layout {
                little: true,
                long_size: 8,
            },
            page_size,
            tail_padding: true,
            abs_every: 0,
            lost: HashMap::new(),
        }
    }

    fn read_back(pages: &[u8], page_size: usize) -> Vec<(u64, usize)> {
        let mut out = Vec::new();
        for page in pages.chunks(page_size) {
            let mut c = PageCursor::new(page, Endian::Little, 8, 16).unwrap();
            while let Some(r) = c.next_record(page).unwrap() {
                out.push((r.ts, r.end - r.start));
            }
        }
        out
    }

    #[test]
    fn records_read_back_across_pages_and_time_extends() {
        let mut s = PageStream::new(opts(256), Vec::new());
        let mut want = Vec::new();
        let mut ts = 1_000;
        for i in 0..200u64 {
            ts += 40 + (i % 50 == 49) as u64 * (1 << 30);
            let payload = vec![i as u8; 8 + 4 * (i as usize % 5)];
            s.push(ts, &payload).unwrap();
            want.push((ts, payload.len()));
        }
        let (pages, stats) = s.finish().unwrap();
        assert_eq!(pages.len() % 256, 0);
        assert_eq!(stats.records, 200);
        assert_eq!(stats.pages as usize, pages.len() / 256);
        assert_eq!(read_back(&pages, 256), want);
    }

    #[test]
    fn out_of_order_and_oversized_records_are_errors() {
        let mut s = PageStream::new(opts(256), Vec::new());
        s.push(10, &[0; 8]).unwrap();
        assert!(matches!(
            s.push(9, &[0; 8]),
            Err(WriteError::Unsorted { .. })
        ));
        assert!(matches!(
            s.push(11, &[0; 256]),
            Err(WriteError::TooLarge { .. })
        ));
    }

    #[test]
    fn payload_lays_out_fixed_and_dynamic_parts() {
        let l = Layout {
            little: true,
            long_size: 8,
        };
        let mut p = Payload::default();
        p.start(l, 12);
        let int = FieldSlot {
            offset: 0,
            size: 2,
            kind: FieldKind::Int,
        };
        let loc = FieldSlot {
            offset: 4,
            size: 4,
            kind: FieldKind::DataLoc,
        };
        let chars = FieldSlot {
            offset: 8,
            size: 4,
            kind: FieldKind::Chars,
        };
        p.int(&int, 0, (-2i64) as u64);
        p.data(&loc, b"ab\0");
        p.chars(&chars, b"xyzw");
        assert_eq!(
            p.finish(),
            &[0xfe, 0xff, 0, 0, 12, 0, 3, 0, b'x', b'y', b'z', 0, b'a', b'b', 0, 0]
        );
    }
}
