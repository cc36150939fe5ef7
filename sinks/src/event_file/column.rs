//! One column of an event table, encoded page by page into column chunks.
//!
//! A batch of rows becomes one data page per column (more for long text);
//! a row group's pages are kept, compressed, until the group is written,
//! when a dictionary page goes in front of them if the column used one.
//!
//! How each column is encoded ([`Plan`]) follows what it holds:
//! timestamps and CPU numbers are delta-encoded; integers and text try a
//! dictionary and fall back to plain values for good once one fills up, or
//! once the first page shows the values are mostly distinct (free text,
//! addresses), text then going as DELTA_LENGTH_BYTE_ARRAY; columns of
//! names from a fixed set (buffer instances, run
//! states) have those names as their dictionary and the reader's indices
//! as theirs.

use super::compress::{Compressor, Lz4Probe};
use crate::encoding::dict::{BytesDict, IntDict};
use crate::encoding::{bit_width, bitpack, delta, hybrid};
use bytes::Bytes;
use cratrace_format::{Column, ColumnData, List, Text};
use parquet::basic::{Compression, Encoding};
use parquet::column::page::{CompressedPage, Page, PageWriter};
use parquet::column::writer::ColumnCloseResult;
use parquet::file::metadata::ColumnChunkMetaData;
use parquet::file::statistics::Statistics;
use parquet::file::writer::{SerializedPageWriter, TrackedWrite};
use parquet::schema::types::ColumnDescPtr;
use std::borrow::Cow;

/// How a column's values are encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Plan {
    /// DELTA_BINARY_PACKED: timestamps, TSCs, CPU numbers.
    Delta,
    /// A dictionary while it pays, else PLAIN.
    Dictionary,
    /// PLAIN.
    Plain,
    /// Indices into fixed names (the buffer instances, the names of an
    /// enumerated column): the dictionary is the names.
    Keys,
}

/// Uncompressed value bytes after which a page is cut.
const PAGE_BYTES: usize = 1 << 20;
/// A column's first page tries its dictionary on this many values ...
const PROBE_VALUES: usize = 1024;
/// ... and keeps it if they hold at most this many distinct values. Few
/// distinct values (states, names, domain numbers) pack into a few bits
/// each; more (addresses, PIDs of a busy host, free text) cost a hash
/// probe per value for little, where LZ4 on plain values does as well.
const PROBE_DISTINCT: usize = 256;

/// A column chunk being built: its pages so far and what its metadata
/// needs.
struct Chunk {
    pages: TrackedWrite<Vec<u8>>,
    ints: IntDict,
    texts: BytesDict,
    dict_pages: usize,
    encodings: Vec<Encoding>,
    num_values: i64,
    uncompressed: i64,
    rows: u64,
    nulls: u64,
    min_max: Option<(Bound, Bound)>,
}

/// A statistics bound, in the column's own order.
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd)]
enum Bound {
    Int(i128),
    Float(f64),
}

impl Chunk {
    /// An empty chunk with room for `bytes` of pages (the last chunk's
    /// size: growing the buffer page by page copied it over and over).
    fn new(bytes: usize) -> Self {
        Chunk {
            pages: TrackedWrite::new(Vec::with_capacity(bytes)),
            ints: IntDict::default(),
            texts: BytesDict::default(),
            dict_pages: 0,
            encodings: Vec::new(),
            num_values: 0,
            uncompressed: 0,
            rows: 0,
            nulls: 0,
            min_max: None,
        }
    }

    fn uses(&mut self, e: Encoding) {
        if !self.encodings.contains(&e) {
            self.encodings.push(e);
        }
    }

    fn bounds(&mut self, lo: Bound, hi: Bound) {
        self.min_max = Some(match self.min_max {
            None => (lo, hi),
            Some((a, b)) => (if lo < a { lo } else { a }, if hi > b { hi } else { b }),
        });
    }
}

/// One column of an event file.
pub(crate) struct ColumnWriter {
    descr: ColumnDescPtr,
    plan: Plan,
    /// The names of a [`Plan::Keys`] column.
    names: Vec<String>,
    /// The dictionary has not failed this column (in this file).
    dictionary: bool,
    /// Pages written in this file (the first page probes the dictionary).
    pages_written: u64,
    chunk: Chunk,
    /// Uncompressed page being built, and index/level scratch.
    page: Vec<u8>,
    idx: Vec<u32>,
    levels: Vec<u32>,
    reps: Vec<u32>,
    lengths: Vec<i32>,
    /// Whether LZ4 has been paying on this column's pages.
    lz4: Lz4Probe,
}

/// Integer column types, as Parquet stores them.
trait IntValue: Copy + Ord {
    /// Stored as INT64 (else INT32).
    const WIDE: bool;
    /// The stored bits (INT32 values zero-extended to 64 bits).
    fn bits(self) -> u64;
    /// The value in its own order (signed or unsigned), for statistics.
    fn order(self) -> i128;
    /// The value of stored bits (the inverse of [`IntValue::bits`]).
    fn from_bits(bits: u64) -> Self;
    /// Append `v` DELTA_BINARY_PACKED (in its stored width).
    fn delta_encode(out: &mut Vec<u8>, v: &[Self]);
}

macro_rules! int_value {
    // a type the delta encoder takes as it is
    ($t:ty, $wide:expr, $bits:expr, direct) => {
        int_value!($t, $wide, $bits, |out: &mut Vec<u8>, v: &[$t]| {
            delta::encode(out, v)
        });
    };
    // one it takes widened to its stored width
    ($t:ty, $wide:expr, $bits:expr, widened) => {
        int_value!($t, $wide, $bits, |out: &mut Vec<u8>, v: &[$t]| {
            let d: Vec<i32> = v.iter().map(|x| x.bits() as u32 as i32).collect();
            delta::encode(out, &d)
        });
    };
    ($t:ty, $wide:expr, $bits:expr, $delta:expr) => {
        impl IntValue for $t {
            const WIDE: bool = $wide;
            #[inline(always)]
            fn bits(self) -> u64 {
                $bits(self)
            }
            #[inline(always)]
            fn order(self) -> i128 {
                self as i128
            }
            #[inline(always)]
            fn from_bits(bits: u64) -> Self {
                bits as $t
            }
            fn delta_encode(out: &mut Vec<u8>, v: &[Self]) {
                $delta(out, v)
            }
        }
    };
}
int_value!(i8, false, |v: i8| v as i32 as u32 as u64, widened);
int_value!(i16, false, |v: i16| v as i32 as u32 as u64, widened);
int_value!(i32, false, |v: i32| v as u32 as u64, direct);
int_value!(u8, false, |v: u8| v as u64, widened);
int_value!(u16, false, |v: u16| v as u64, widened);
int_value!(u32, false, |v: u32| v as u64, direct);
int_value!(i64, true, |v: i64| v as u64, direct);
int_value!(u64, true, |v: u64| v, direct);

/// The smallest and largest of `v`, in one pass the compiler vectorizes.
fn min_max<T: IntValue>(v: &[T]) -> Option<(T, T)> {
    let (&first, rest) = v.split_first()?;
    let (mut lo, mut hi) = (first, first);
    for &x in rest {
        lo = if x < lo { x } else { lo };
        hi = if x > hi { x } else { hi };
    }
    Some((lo, hi))
}

/// Append what `encode` writes, after its length as four little-endian
/// bytes (how a V1 data page frames its repetition and definition levels).
fn length_prefixed(out: &mut Vec<u8>, encode: impl FnOnce(&mut Vec<u8>)) {
    let at = out.len();
    out.extend_from_slice(&[0; 4]);
    encode(out);
    let len = (out.len() - at - 4) as u32;
    out[at..at + 4].copy_from_slice(&len.to_le_bytes());
}

/// Append `v` PLAIN: each value's stored bits, little-endian, 4 or 8
/// bytes.
fn plain_ints<T: IntValue>(out: &mut Vec<u8>, v: &[T]) {
    let size = if T::WIDE { 8 } else { 4 };
    if std::mem::size_of::<T>() == size && cfg!(target_endian = "little") {
        // Already the stored bytes: copy the slice whole.
        // SAFETY: T is a primitive integer of `size` bytes (no padding,
        // every bit pattern valid), so its slice is `size * len` plain
        // bytes.
        let bytes = unsafe {
            std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v))
        };
        out.extend_from_slice(bytes);
        return;
    }
    out.reserve(size * v.len());
    for &x in v {
        if T::WIDE {
            out.extend_from_slice(&x.bits().to_le_bytes());
        } else {
            out.extend_from_slice(&(x.bits() as u32).to_le_bytes());
        }
    }
}

/// `values` with the rows of `nulls` (ascending, relative to `values`)
/// left out; borrowed when there are none.
fn without<'a, T: Copy>(values: &'a [T], nulls: &[usize]) -> Cow<'a, [T]> {
    if nulls.is_empty() {
        return Cow::Borrowed(values);
    }
    let mut out = Vec::with_capacity(values.len() - nulls.len());
    let mut from = 0;
    for &n in nulls {
        out.extend_from_slice(&values[from..n]);
        from = n + 1;
    }
    out.extend_from_slice(&values[from..]);
    Cow::Owned(out)
}

impl ColumnWriter {
    /// A column encoded as `plan` says (`names`: the dictionary of a
    /// [`Plan::Keys`] column).
    pub(crate) fn new(descr: ColumnDescPtr, plan: Plan, names: Vec<String>) -> Self {
        ColumnWriter {
            descr,
            plan,
            names,
            dictionary: true,
            pages_written: 0,
            chunk: Chunk::new(0),
            page: Vec::new(),
            idx: Vec::new(),
            levels: Vec::new(),
            reps: Vec::new(),
            lengths: Vec::new(),
            lz4: Lz4Probe::default(),
        }
    }

    /// Encode `col` (this column's rows of one batch) as pages of the
    /// current chunk.
    pub(crate) fn write(&mut self, col: &Column, comp: &mut Compressor) -> Result<(), String> {
        let n = col.len();
        let list = matches!(col.data, ColumnData::ListI64(_) | ColumnData::ListU64(_));
        for (a, b) in page_ranges(&col.data, n) {
            if col.null_rows.len() == n && !list && self.descr.max_def_level() > 0 {
                // all null (xentrace's pid): levels of one run, no values
                self.page.clear();
                self.null_levels(b - a);
                self.finish_page(b - a, b - a, b - a, Encoding::PLAIN, comp)?;
                continue;
            }
            let lo = col.null_rows.partition_point(|&r| (r as usize) < a);
            let hi = col.null_rows.partition_point(|&r| (r as usize) < b);
            let nulls: Vec<usize> = col.null_rows[lo..hi]
                .iter()
                .map(|&r| r as usize - a)
                .collect();
            self.page_of(&col.data, a, b, &nulls, comp)?;
        }
        Ok(())
    }

    fn page_of(
        &mut self,
        data: &ColumnData,
        a: usize,
        b: usize,
        nulls: &[usize],
        comp: &mut Compressor,
    ) -> Result<(), String> {
        self.page.clear();
        let rows = b - a;
        let mut num_values = rows;
        let encoding = match data {
            ColumnData::ListI64(l) => {
                num_values = self.list_levels(l, a, b, nulls);
                self.plain_list(&l.values[l.offsets[a] as usize..l.offsets[b] as usize]);
                Encoding::PLAIN
            }
            ColumnData::ListU64(l) => {
                num_values = self.list_levels(l, a, b, nulls);
                self.plain_list(&l.values[l.offsets[a] as usize..l.offsets[b] as usize]);
                Encoding::PLAIN
            }
            _ => {
                self.def_levels(rows, nulls);
                match data {
                    ColumnData::Bool(v) => self.bools(&v[a..b], nulls),
                    ColumnData::I8(v) => self.ints(&v[a..b], nulls),
                    ColumnData::I16(v) => self.ints(&v[a..b], nulls),
                    ColumnData::I32(v) => self.ints(&v[a..b], nulls),
                    ColumnData::I64(v) => self.ints(&v[a..b], nulls),
                    ColumnData::U8(v) => self.ints(&v[a..b], nulls),
                    ColumnData::U16(v) if self.plan == Plan::Keys => self.keys(&v[a..b], nulls),
                    ColumnData::U16(v) => self.ints(&v[a..b], nulls),
                    ColumnData::Enum { keys, .. } => self.keys(&keys[a..b], nulls),
                    ColumnData::U32(v) => self.ints(&v[a..b], nulls),
                    ColumnData::U64(v) => self.ints(&v[a..b], nulls),
                    ColumnData::F64(v) => self.floats(&v[a..b], nulls),
                    ColumnData::Str(t) | ColumnData::Bytes(t) => self.texts(t, a, b, nulls),
                    ColumnData::ListI64(_) | ColumnData::ListU64(_) => unreachable!("above"),
                }
            }
        };
        // (a page of nulls only is no probe of the dictionary)
        self.pages_written += 1;
        self.finish_page(rows, nulls.len(), num_values, encoding, comp)
    }

    /// Account for the page in `self.page` (`rows` rows, `nulls` of them
    /// null, `num_values` levels), compress it and add it to the chunk.
    fn finish_page(
        &mut self,
        rows: usize,
        nulls: usize,
        num_values: usize,
        encoding: Encoding,
        comp: &mut Compressor,
    ) -> Result<(), String> {
        self.chunk.uses(encoding);
        self.chunk.rows += rows as u64;
        self.chunk.nulls += nulls as u64;
        self.chunk.num_values += num_values as i64;
        if encoding == Encoding::RLE_DICTIONARY {
            self.chunk.dict_pages += 1;
        }
        let uncompressed = self.page.len();
        let body = Bytes::copy_from_slice(comp.compress(&self.page, &mut self.lz4)?);
        let page = Page::DataPage {
            buf: body,
            num_values: num_values as u32,
            encoding,
            def_level_encoding: Encoding::RLE,
            rep_level_encoding: Encoding::RLE,
            statistics: None,
        };
        let spec = SerializedPageWriter::new(&mut self.chunk.pages)
            .write_page(CompressedPage::new(page, uncompressed))
            .map_err(|e| format!("page: {e}"))?;
        self.chunk.uncompressed += spec.uncompressed_size as i64;
        Ok(())
    }

    /// Definition levels of `rows` nulls: one run.
    fn null_levels(&mut self, rows: usize) {
        length_prefixed(&mut self.page, |p| hybrid::encode_run(p, rows, 0, 1));
        self.chunk.uses(Encoding::RLE);
    }

    /// Definition levels of a flat column (none for a required one).
    fn def_levels(&mut self, rows: usize, nulls: &[usize]) {
        if self.descr.max_def_level() == 0 {
            return;
        }
        if nulls.is_empty() {
            length_prefixed(&mut self.page, |p| hybrid::encode_run(p, rows, 1, 1));
        } else {
            self.levels.clear();
            self.levels.resize(rows, 1);
            for &r in nulls {
                self.levels[r] = 0;
            }
            let levels = &self.levels;
            length_prefixed(&mut self.page, |p| hybrid::encode(p, levels, 1));
        }
        self.chunk.uses(Encoding::RLE);
    }

    /// Repetition and definition levels of a list column (an optional list
    /// of optional items: 0 null list, 1 empty list, 3 an item); returns
    /// the level count.
    fn list_levels<T>(&mut self, l: &List<T>, a: usize, b: usize, nulls: &[usize]) -> usize {
        self.levels.clear();
        self.reps.clear();
        let mut next_null = nulls.iter().peekable();
        for r in a..b {
            let items = (l.offsets[r + 1] - l.offsets[r]) as usize;
            if next_null.peek() == Some(&&(r - a)) {
                next_null.next();
                self.reps.push(0);
                self.levels.push(0);
            } else if items == 0 {
                self.reps.push(0);
                self.levels.push(1);
            } else {
                self.reps.push(0);
                self.reps.extend(std::iter::repeat_n(1, items - 1));
                self.levels.extend(std::iter::repeat_n(3, items));
            }
        }
        for (levels, width) in [(&self.reps, 1u8), (&self.levels, 2u8)] {
            length_prefixed(&mut self.page, |p| hybrid::encode(p, levels, width));
        }
        self.chunk.uses(Encoding::RLE);
        self.levels.len()
    }

    fn plain_list<T: IntValue>(&mut self, items: &[T]) {
        plain_ints(&mut self.page, items);
    }

    fn bools(&mut self, v: &[bool], nulls: &[usize]) -> Encoding {
        let v = &*without(v, nulls);
        bitpack::pack(&mut self.page, v.iter().map(|&b| b as u64), 1);
        Encoding::PLAIN
    }

    fn floats(&mut self, v: &[f64], nulls: &[usize]) -> Encoding {
        let v = &*without(v, nulls);
        let mut lo = f64::INFINITY;
        let mut hi = f64::NEG_INFINITY;
        for &x in v {
            self.page.extend_from_slice(&x.to_le_bytes());
            if !x.is_nan() {
                lo = lo.min(x);
                hi = hi.max(x);
            }
        }
        if lo <= hi {
            self.chunk.bounds(Bound::Float(lo), Bound::Float(hi));
        }
        Encoding::PLAIN
    }

    fn ints<T: IntValue>(&mut self, v: &[T], nulls: &[usize]) -> Encoding {
        let v = &*without(v, nulls);
        let known = self.chunk.ints.values.len();
        let dictionary =
            self.plan == Plan::Dictionary && self.dictionary && self.dictionary_indices(v);
        // The statistics: a dictionary page's values are its dictionary's
        // (only the entries it added are new), so the page itself need not
        // be scanned again
        let bounds = if dictionary {
            let new: Vec<T> = self.chunk.ints.values[known..]
                .iter()
                .map(|&b| T::from_bits(b))
                .collect();
            min_max(&new)
        } else {
            min_max(v)
        };
        if let Some((lo, hi)) = bounds {
            self.chunk
                .bounds(Bound::Int(lo.order()), Bound::Int(hi.order()));
        }
        match self.plan {
            Plan::Delta => {
                T::delta_encode(&mut self.page, v);
                Encoding::DELTA_BINARY_PACKED
            }
            Plan::Dictionary if dictionary => self.indices(),
            _ => {
                plain_ints(&mut self.page, v);
                Encoding::PLAIN
            }
        }
    }

    /// Whether the dictionary probe gives up after `seen` values of the
    /// column's first page, `distinct` of them distinct.
    fn probe_fails(&self, seen: usize, distinct: usize) -> bool {
        self.pages_written == 0 && seen == PROBE_VALUES && distinct > PROBE_DISTINCT
    }

    /// Index every value of `v` into the chunk's dictionary (into
    /// `self.idx`); false, and the dictionary given up for this column,
    /// when it fills or does not pay.
    fn dictionary_indices<T: IntValue>(&mut self, v: &[T]) -> bool {
        self.idx.clear();
        let start = self.chunk.ints.values.len();
        for (i, &x) in v.iter().enumerate() {
            match self.chunk.ints.index(x.bits()) {
                Some(k) => self.idx.push(k),
                None => return self.give_up_dictionary(),
            }
            if self.probe_fails(i + 1, self.chunk.ints.values.len() - start) {
                return self.give_up_dictionary();
            }
        }
        true
    }

    fn give_up_dictionary(&mut self) -> bool {
        self.dictionary = false;
        false
    }

    /// The page's values as indices (from `self.idx`) into the chunk's
    /// dictionary.
    fn indices(&mut self) -> Encoding {
        let entries = self.chunk.ints.values.len().max(self.chunk.texts.len());
        self.indices_into(entries)
    }

    /// `self.idx` as RLE/bit-packed indices into a dictionary of `entries`.
    fn indices_into(&mut self, entries: usize) -> Encoding {
        let width = bit_width(entries.saturating_sub(1) as u64).max(1);
        self.page.push(width);
        hybrid::encode(&mut self.page, &self.idx, width);
        Encoding::RLE_DICTIONARY
    }

    /// Indices into [`Self::names`], the chunk's dictionary.
    fn keys(&mut self, v: &[u16], nulls: &[usize]) -> Encoding {
        let v = &*without(v, nulls);
        self.idx.clear();
        self.idx.extend(v.iter().map(|&i| i as u32));
        self.indices_into(self.names.len())
    }

    fn texts(&mut self, t: &Text, a: usize, b: usize, nulls: &[usize]) -> Encoding {
        let row = |i: usize| &t.bytes[t.offsets[i] as usize..t.offsets[i + 1] as usize];
        let mut next_null = nulls.iter().peekable();
        let rows = (a..b).filter(move |&r| {
            if next_null.peek() == Some(&&(r - a)) {
                next_null.next();
                false
            } else {
                true
            }
        });
        if self.plan == Plan::Dictionary && self.dictionary {
            self.idx.clear();
            let start = self.chunk.texts.len();
            let mut ok = true;
            for (i, r) in rows.clone().enumerate() {
                match self.chunk.texts.index(row(r)) {
                    Some(k) => self.idx.push(k),
                    None => {
                        ok = false;
                        break;
                    }
                }
                if self.probe_fails(i + 1, self.chunk.texts.len() - start) {
                    ok = false;
                    break;
                }
            }
            if ok {
                return self.indices();
            }
            self.give_up_dictionary();
        }
        // DELTA_LENGTH_BYTE_ARRAY: the lengths delta-packed, then the
        // bytes back to back, which is how the batch holds them already
        // (one copy for the page, not a length and a copy per row).
        self.lengths.clear();
        self.lengths
            .extend(rows.clone().map(|r| t.offsets[r + 1] - t.offsets[r]));
        delta::encode(&mut self.page, &self.lengths);
        if nulls.is_empty() {
            self.page
                .extend_from_slice(&t.bytes[t.offsets[a] as usize..t.offsets[b] as usize]);
        } else {
            for r in rows {
                self.page.extend_from_slice(row(r));
            }
        }
        Encoding::DELTA_LENGTH_BYTE_ARRAY
    }

    /// Close the current chunk: its bytes (dictionary page first) and the
    /// metadata the row group needs; the next chunk starts empty.
    pub(crate) fn finish_chunk(
        &mut self,
        codec: Compression,
        comp: &mut Compressor,
    ) -> Result<(Bytes, ColumnCloseResult), String> {
        let room = self.chunk.pages.bytes_written() + self.chunk.pages.bytes_written() / 8;
        let chunk = std::mem::replace(&mut self.chunk, Chunk::new(room));
        let statistics = self.statistics(&chunk);
        let err = |e: parquet::errors::ParquetError| format!("column chunk: {e}");
        let data = chunk.pages.into_inner().map_err(err)?;
        let mut head = TrackedWrite::new(Vec::new());
        let mut uncompressed = chunk.uncompressed;
        let mut encodings = chunk.encodings.clone();
        if chunk.dict_pages > 0 {
            self.page.clear();
            let entries = if self.plan == Plan::Keys {
                for s in &self.names {
                    self.page.extend_from_slice(&(s.len() as u32).to_le_bytes());
                    self.page.extend_from_slice(s.as_bytes());
                }
                self.names.len()
            } else if self.descr.physical_type() == parquet::basic::Type::BYTE_ARRAY {
                for i in 0..chunk.texts.len() {
                    let s = chunk.texts.get(i);
                    self.page.extend_from_slice(&(s.len() as u32).to_le_bytes());
                    self.page.extend_from_slice(s);
                }
                chunk.texts.len()
            } else {
                let wide = self.descr.physical_type() == parquet::basic::Type::INT64;
                for &b in &chunk.ints.values {
                    if wide {
                        self.page.extend_from_slice(&b.to_le_bytes());
                    } else {
                        self.page.extend_from_slice(&(b as u32).to_le_bytes());
                    }
                }
                chunk.ints.values.len()
            };
            let raw = self.page.len();
            let page = Page::DictionaryPage {
                buf: Bytes::copy_from_slice(comp.compress(&self.page, &mut Lz4Probe::default())?),
                num_values: entries as u32,
                encoding: Encoding::PLAIN,
                is_sorted: false,
            };
            let spec = SerializedPageWriter::new(&mut head)
                .write_page(CompressedPage::new(page, raw))
                .map_err(err)?;
            uncompressed += spec.uncompressed_size as i64;
            if !encodings.contains(&Encoding::PLAIN) {
                encodings.push(Encoding::PLAIN);
            }
        }
        let head = head.into_inner().map_err(err)?;
        let dict_len = head.len() as i64;
        let all = if head.is_empty() {
            data
        } else {
            let mut all = Vec::with_capacity(head.len() + data.len());
            all.extend_from_slice(&head);
            all.extend_from_slice(&data);
            all
        };
        let total = all.len();
        let mut meta = ColumnChunkMetaData::builder(self.descr.clone())
            .set_compression(codec)
            .set_encodings(encodings)
            .set_num_values(chunk.num_values)
            .set_total_compressed_size(total as i64)
            .set_total_uncompressed_size(uncompressed)
            .set_data_page_offset(dict_len)
            .set_dictionary_page_offset((chunk.dict_pages > 0).then_some(0));
        if let Some(s) = statistics {
            meta = meta.set_statistics(s);
        }
        let meta = meta.build().map_err(err)?;
        Ok((
            Bytes::from(all),
            ColumnCloseResult {
                bytes_written: total as u64,
                rows_written: chunk.rows,
                metadata: meta,
                bloom_filter: None,
                column_index: None,
                offset_index: None,
            },
        ))
    }

    /// Min/max (numbers only) and the null count.
    fn statistics(&self, chunk: &Chunk) -> Option<Statistics> {
        use parquet::basic::Type;
        let nulls = Some(chunk.nulls);
        match (self.descr.physical_type(), chunk.min_max) {
            (Type::INT32, Some((Bound::Int(lo), Bound::Int(hi)))) => Some(Statistics::int32(
                Some(lo as i64 as i32),
                Some(hi as i64 as i32),
                None,
                nulls,
                false,
            )),
            (Type::INT64, Some((Bound::Int(lo), Bound::Int(hi)))) => Some(Statistics::int64(
                Some(lo as i64),
                Some(hi as i64),
                None,
                nulls,
                false,
            )),
            (Type::DOUBLE, Some((Bound::Float(lo), Bound::Float(hi)))) => {
                Some(Statistics::double(Some(lo), Some(hi), None, nulls, false))
            }
            _ => None,
        }
    }

    /// Rows in the chunk being built.
    pub(crate) fn chunk_rows(&self) -> u64 {
        self.chunk.rows
    }
}

/// Row ranges of the pages a column of `n` rows is cut into.
fn page_ranges(data: &ColumnData, n: usize) -> Vec<(usize, usize)> {
    let cut = |offsets: &[i32], width: usize| {
        let mut out = Vec::new();
        let mut a = 0;
        while a < n {
            let limit = offsets[a] as usize * width + PAGE_BYTES;
            // the first row past the page's bytes, at least one row on
            let b = (a + 1)
                .max(offsets[a + 1..=n].partition_point(|&o| (o as usize) * width <= limit) + a);
            out.push((a, b.min(n)));
            a = b.min(n);
        }
        out
    };
    match data {
        ColumnData::Str(t) | ColumnData::Bytes(t) => cut(&t.offsets, 1),
        ColumnData::ListI64(l) => cut(&l.offsets, 8),
        ColumnData::ListU64(l) => cut(&l.offsets, 8),
        _ => {
            let rows = (PAGE_BYTES / 8).max(1);
            (0..n)
                .step_by(rows)
                .map(|a| (a, (a + rows).min(n)))
                .collect()
        }
    }
}
