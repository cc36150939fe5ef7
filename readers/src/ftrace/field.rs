//! Field typing and payload decoding.
//!
//! [`FieldKind::classify`] turns a format line into a decoding rule and a
//! column type; [`FieldDecoder`] applies the rules of one event to record
//! payloads, appending each field straight to its column of a
//! [`RowBatch`]: no value is built between the payload and the column.

use super::format::FieldFormat;
use crate::batch::{Column, ColumnData, RowBatch};
use crate::bytes::Endian;
use crate::sink::ColumnType;

/// How one field is stored in the payload.
#[derive(Clone, Debug, PartialEq)]
pub enum FieldKind {
    /// Integer of 1, 2, 4 or 8 bytes.
    Int {
        /// Size in bytes.
        size: usize,
        /// Signedness.
        signed: bool,
    },
    /// C `bool`.
    Bool,
    /// Fixed `char name[N]`: text up to the first NUL.
    CharArray,
    /// `__data_loc char[]`: text at a dynamic location.
    DynStr {
        /// `__rel_loc` (offset relative to the end of the field).
        relative: bool,
    },
    /// `__data_loc cpumask_t` / bitmask: list of set CPU numbers.
    DynCpumask {
        /// `__rel_loc`.
        relative: bool,
    },
    /// `__data_loc TYPE[]`: list of integers.
    DynArray {
        /// `__rel_loc`.
        relative: bool,
        /// Element size.
        elem: usize,
        /// Element signedness.
        signed: bool,
    },
    /// Fixed `TYPE name[N]` of non-char elements.
    FixedArray {
        /// Element size.
        elem: usize,
        /// Element signedness.
        signed: bool,
    },
    /// A trailing `char name[]` of size 0 (e.g. print's `buf`).
    TailStr,
    /// A trailing `TYPE name[]` of size 0 (e.g. bprint's `buf`).
    TailArray {
        /// Element size.
        elem: usize,
        /// Element signedness.
        signed: bool,
    },
    /// A type the reader cannot give a column type (a struct, an integer
    /// of an odd size, an array of structs): its bytes as the payload
    /// holds them, in a binary column, so nothing is left out.
    Raw {
        /// Where the bytes are.
        at: RawAt,
        /// Why the field is not typed (shown by `info --verbose`).
        why: String,
    },
}

/// Where an untyped field's bytes lie in the payload.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RawAt {
    /// At the field's offset, its declared size.
    Fixed,
    /// At a `__data_loc` / `__rel_loc` location.
    Dynamic {
        /// `__rel_loc`.
        relative: bool,
    },
    /// From the field's offset to the payload's end (a trailing array).
    Tail,
}

fn raw(at: RawAt, why: String) -> FieldKind {
    FieldKind::Raw { at, why }
}

fn base_type(c_type: &str) -> String {
    let mut t = c_type.replace("__data_loc", "").replace("__rel_loc", "");
    if let Some(i) = t.find('[') {
        t.truncate(i);
    }
    t.replace("const ", "")
        .replace("volatile ", "")
        .trim()
        .to_string()
}

/// Byte size of a C scalar type name, if known.
fn scalar_size(t: &str, long_size: usize) -> Option<usize> {
    if t.ends_with('*') {
        return Some(long_size);
    }
    let t = t
        .trim_start_matches("unsigned ")
        .trim_start_matches("signed ")
        .trim();
    Some(match t {
        "char" | "u8" | "s8" | "__u8" | "__s8" | "bool" | "_Bool" | "uint8_t" | "int8_t" => 1,
        "short" | "u16" | "s16" | "__u16" | "__s16" | "uint16_t" | "int16_t" | "__le16"
        | "__be16" => 2,
        "int" | "u32" | "s32" | "__u32" | "__s32" | "pid_t" | "uint32_t" | "int32_t"
        | "unsigned" | "gfp_t" | "__le32" | "__be32" | "dev_t" => 4,
        "long long" | "u64" | "s64" | "__u64" | "__s64" | "uint64_t" | "int64_t" | "__le64"
        | "__be64" => 8,
        "long" | "size_t" | "ssize_t" | "unsigned long" | "long unsigned int" => long_size,
        _ => return None,
    })
}

fn is_char(t: &str) -> bool {
    matches!(t, "char" | "unsigned char" | "signed char")
}

impl FieldKind {
    /// Decide how to decode `f`.
    pub fn classify(f: &FieldFormat, long_size: usize) -> FieldKind {
        let base = base_type(&f.c_type);
        let dynamic = f.c_type.contains("__data_loc") || f.c_type.contains("__rel_loc");
        let relative = f.c_type.contains("__rel_loc");
        if dynamic {
            if f.size != 4 {
                return raw(RawAt::Fixed, format!("dynamic field of size {}", f.size));
            }
            if is_char(&base) {
                return FieldKind::DynStr { relative };
            }
            if base.contains("cpumask") || base.contains("bitmask") {
                return FieldKind::DynCpumask { relative };
            }
            return match scalar_size(&base, long_size) {
                Some(elem) => FieldKind::DynArray {
                    relative,
                    elem,
                    signed: f.signed,
                },
                None => raw(
                    RawAt::Dynamic { relative },
                    format!("dynamic array of unknown type {base:?}"),
                ),
            };
        }
        // Old kernels declare trailing arrays without brackets (`u32 buf;`
        // of size 0), so size 0 alone marks a trailing array.
        if f.is_array || f.size == 0 {
            if f.size == 0 {
                if is_char(&base) {
                    return FieldKind::TailStr;
                }
                return match scalar_size(&base, long_size) {
                    Some(elem) => FieldKind::TailArray {
                        elem,
                        signed: f.signed,
                    },
                    None => raw(
                        RawAt::Tail,
                        format!("trailing array of unknown type {base:?}"),
                    ),
                };
            }
            if is_char(&base) {
                return FieldKind::CharArray;
            }
            let elem = scalar_size(&base, long_size).or_else(|| {
                f.array_len
                    .filter(|&n| n > 0 && f.size.is_multiple_of(n))
                    .map(|n| f.size / n)
            });
            return match elem {
                Some(e) if e > 0 && f.size.is_multiple_of(e) && matches!(e, 1 | 2 | 4 | 8) => {
                    FieldKind::FixedArray {
                        elem: e,
                        signed: f.signed,
                    }
                }
                _ => raw(RawAt::Fixed, format!("array {base:?} of size {}", f.size)),
            };
        }
        if base == "bool" || base == "_Bool" {
            return FieldKind::Bool;
        }
        match f.size {
            1 | 2 | 4 | 8 => FieldKind::Int {
                size: f.size,
                signed: f.signed,
            },
            n => raw(RawAt::Fixed, format!("{base:?} of size {n}")),
        }
    }

    /// The column type this kind produces.
    pub fn column_type(&self) -> ColumnType {
        match self {
            FieldKind::Int { size, signed: true } => match size {
                1 => ColumnType::I8,
                2 => ColumnType::I16,
                4 => ColumnType::I32,
                _ => ColumnType::I64,
            },
            FieldKind::Int {
                size,
                signed: false,
            } => match size {
                1 => ColumnType::U8,
                2 => ColumnType::U16,
                4 => ColumnType::U32,
                _ => ColumnType::U64,
            },
            FieldKind::Bool => ColumnType::Bool,
            FieldKind::CharArray | FieldKind::DynStr { .. } | FieldKind::TailStr => ColumnType::Str,
            FieldKind::DynCpumask { .. } => ColumnType::ListU64,
            FieldKind::DynArray { signed, .. }
            | FieldKind::FixedArray { signed, .. }
            | FieldKind::TailArray { signed, .. } => {
                if *signed {
                    ColumnType::ListI64
                } else {
                    ColumnType::ListU64
                }
            }
            FieldKind::Raw { .. } => ColumnType::Bytes,
        }
    }
}

/// A field's decoding rule in the form the per-record loop wants: small
/// and `Copy`, so the loop reads it by value (a `FieldKind` carries a
/// `String`).
#[derive(Clone, Copy, Debug)]
enum Op {
    /// An integer (or C bool) of 1, 2, 4 or 8 bytes into a column of the
    /// same width: the raw bits are stored, so no sign extension is needed.
    Int1,
    Int2,
    Int4,
    Int8,
    CharArray,
    TailStr,
    DynStr {
        relative: bool,
    },
    DynCpumask {
        relative: bool,
    },
    DynArray {
        relative: bool,
        elem: usize,
        signed: bool,
    },
    FixedArray {
        elem: usize,
        signed: bool,
    },
    TailArray {
        elem: usize,
        signed: bool,
    },
    Raw(RawAt),
}

impl Op {
    fn of(k: &FieldKind) -> Op {
        match *k {
            FieldKind::Int { size: 1, .. } | FieldKind::Bool => Op::Int1,
            FieldKind::Int { size: 2, .. } => Op::Int2,
            FieldKind::Int { size: 4, .. } => Op::Int4,
            FieldKind::Int { size: 8, .. } => Op::Int8,
            FieldKind::Int { .. } => Op::Raw(RawAt::Fixed),
            FieldKind::CharArray => Op::CharArray,
            FieldKind::TailStr => Op::TailStr,
            FieldKind::DynStr { relative } => Op::DynStr { relative },
            FieldKind::DynCpumask { relative } => Op::DynCpumask { relative },
            FieldKind::DynArray {
                relative,
                elem,
                signed,
            } => Op::DynArray {
                relative,
                elem,
                signed,
            },
            FieldKind::FixedArray { elem, signed } => Op::FixedArray { elem, signed },
            FieldKind::TailArray { elem, signed } => Op::TailArray { elem, signed },
            FieldKind::Raw { at, .. } => Op::Raw(at),
        }
    }
}

#[derive(Clone, Copy)]
struct Col {
    offset: usize,
    size: usize,
    op: Op,
}

/// Decodes the own fields of one event type into the first columns of a
/// [`RowBatch`] (one per typed field, in order).
pub struct FieldDecoder {
    cols: Vec<Col>,
    endian: Endian,
    long_size: usize,
}

fn sign_extend(v: u64, size: usize) -> i64 {
    let shift = 64 - 8 * size as u32;
    ((v << shift) as i64) >> shift
}

/// Byte order as a type, so the per-field loop is compiled once per order
/// instead of asking at every field.
trait Order {
    fn u16(b: [u8; 2]) -> u16;
    fn u32(b: [u8; 4]) -> u32;
    fn u64(b: [u8; 8]) -> u64;
}
struct Le;
struct Be;
impl Order for Le {
    #[inline(always)]
    fn u16(b: [u8; 2]) -> u16 {
        u16::from_le_bytes(b)
    }
    #[inline(always)]
    fn u32(b: [u8; 4]) -> u32 {
        u32::from_le_bytes(b)
    }
    #[inline(always)]
    fn u64(b: [u8; 8]) -> u64 {
        u64::from_le_bytes(b)
    }
}
impl Order for Be {
    #[inline(always)]
    fn u16(b: [u8; 2]) -> u16 {
        u16::from_be_bytes(b)
    }
    #[inline(always)]
    fn u32(b: [u8; 4]) -> u32 {
        u32::from_be_bytes(b)
    }
    #[inline(always)]
    fn u64(b: [u8; 8]) -> u64 {
        u64::from_be_bytes(b)
    }
}

#[inline(always)]
fn bytes_at<const N: usize>(p: &[u8], off: usize) -> Option<[u8; N]> {
    p.get(off..off.checked_add(N)?)
        .map(|b| b.try_into().expect("N bytes"))
}

#[inline(always)]
fn uint_at<E: Order>(p: &[u8], off: usize, size: usize) -> Option<u64> {
    match size {
        1 => p.get(off).map(|&b| b as u64),
        2 => bytes_at::<2>(p, off).map(|b| E::u16(b) as u64),
        4 => bytes_at::<4>(p, off).map(|b| E::u32(b) as u64),
        8 => bytes_at::<8>(p, off).map(E::u64),
        _ => None,
    }
}

/// Texts up to this long are scanned by [`short_text`].
const SHORT_TEXT: usize = 64;

/// The length of `bytes` up to its first NUL, and whether those bytes are
/// ASCII, in one pass of eight bytes at a time. Comm names (16 bytes) and
/// trace_marker lines are this short, and `memchr`'s set-up per call
/// outweighed its search: on the 2.77 M-event benchmark trace
/// [`push_text`] took 322 M instructions with `memchr` and `is_ascii`,
/// 250 M with this (of the reader's 2.88 G).
#[inline]
fn short_text(bytes: &[u8]) -> (usize, bool) {
    const LOW: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let mut high = 0u64;
    let mut chunks = bytes.chunks_exact(8);
    for (i, c) in (&mut chunks).enumerate() {
        let w = u64::from_le_bytes(c.try_into().expect("8"));
        // the lowest set bit marks the first zero byte (higher ones may
        // be false, from the borrow)
        let zero = w.wrapping_sub(LOW) & !w & HIGH;
        if zero != 0 {
            let k = (zero.trailing_zeros() / 8) as usize;
            let before = if k == 0 {
                0
            } else {
                w & (u64::MAX >> (64 - 8 * k))
            };
            return (8 * i + k, (high | before) & HIGH == 0);
        }
        high |= w;
    }
    let at = bytes.len() - chunks.remainder().len();
    let mut ascii = high & HIGH == 0;
    for (k, &b) in chunks.remainder().iter().enumerate() {
        if b == 0 {
            return (at + k, ascii);
        }
        ascii &= b.is_ascii();
    }
    (bytes.len(), ascii)
}

/// Append the text in `bytes` up to its first NUL to column `c`; bytes that
/// are not UTF-8 are replaced. Returns the bytes appended.
#[inline]
fn push_text(c: &mut Column, row: u32, bytes: &[u8]) -> usize {
    let (n, ascii) = if bytes.len() <= SHORT_TEXT {
        short_text(bytes)
    } else {
        let n = memchr::memchr(0, bytes).unwrap_or(bytes.len());
        (n, bytes[..n].is_ascii())
    };
    let b = &bytes[..n];
    // ASCII (comm names, nearly all text) needs no further check
    if ascii || std::str::from_utf8(b).is_ok() {
        if let ColumnData::Str(t) = &mut c.data {
            t.push(b);
            return b.len();
        }
    } else if let ColumnData::Str(t) = &mut c.data {
        let owned = String::from_utf8_lossy(b);
        t.push(owned.as_bytes());
        return owned.len();
    }
    c.push_null(row);
    0
}

impl FieldDecoder {
    /// A decoder for the given (typeable) fields.
    pub fn new(fields: &[(&FieldFormat, FieldKind)], endian: Endian, long_size: usize) -> Self {
        let cols: Vec<Col> = fields
            .iter()
            .map(|(f, k)| Col {
                offset: f.offset,
                size: f.size,
                op: Op::of(k),
            })
            .collect();
        FieldDecoder {
            cols,
            endian,
            long_size,
        }
    }

    /// Columns this decoder fills.
    pub fn columns(&self) -> usize {
        self.cols.len()
    }

    /// Decode `payload` as row `row` of `batch` (whose header is already
    /// pushed) into its first [`columns`](Self::columns) columns. Fields
    /// that lie outside a short payload are null rather than failing the
    /// record.
    #[inline]
    pub fn append(&self, payload: &[u8], batch: &mut RowBatch, row: u32) {
        match self.endian {
            Endian::Little => self.append_in::<Le>(payload, batch, row),
            Endian::Big => self.append_in::<Be>(payload, batch, row),
        }
    }

    fn dyn_range<E: Order>(payload: &[u8], c: &Col, relative: bool) -> Option<(usize, usize)> {
        let v = E::u32(bytes_at::<4>(payload, c.offset)?);
        let mut off = (v & 0xffff) as usize;
        let len = (v >> 16) as usize;
        if relative {
            off += c.offset + c.size;
        }
        let end = off.checked_add(len)?;
        (end <= payload.len()).then_some((off, end))
    }

    /// The bytes of a raw field (`at`: where they lie), None when the
    /// payload does not hold them.
    fn raw_bytes<'a, E: Order>(payload: &'a [u8], c: &Col, at: RawAt) -> Option<&'a [u8]> {
        match at {
            RawAt::Fixed => c
                .offset
                .checked_add(c.size)
                .and_then(|e| payload.get(c.offset..e)),
            RawAt::Dynamic { relative } => {
                Self::dyn_range::<E>(payload, c, relative).map(|(s, e)| &payload[s..e])
            }
            RawAt::Tail => payload.get(c.offset..),
        }
    }

    fn append_in<E: Order>(&self, payload: &[u8], batch: &mut RowBatch, row: u32) {
        let mut var = 0usize;
        for (c, col) in self.cols.iter().zip(batch.columns.iter_mut()) {
            match c.op {
                Op::Int1 => match payload.get(c.offset) {
                    Some(&b) => col.push_int_bits(row, b as u64),
                    None => col.push_null(row),
                },
                Op::Int2 => match bytes_at::<2>(payload, c.offset) {
                    Some(b) => col.push_int_bits(row, E::u16(b) as u64),
                    None => col.push_null(row),
                },
                Op::Int4 => match bytes_at::<4>(payload, c.offset) {
                    Some(b) => col.push_int_bits(row, E::u32(b) as u64),
                    None => col.push_null(row),
                },
                Op::Int8 => match bytes_at::<8>(payload, c.offset) {
                    Some(b) => col.push_int_bits(row, E::u64(b)),
                    None => col.push_null(row),
                },
                Op::CharArray => match c.offset.checked_add(c.size).filter(|&e| e <= payload.len())
                {
                    Some(end) => var += push_text(col, row, &payload[c.offset..end]),
                    None => col.push_null(row),
                },
                Op::TailStr => match payload.get(c.offset..) {
                    Some(b) => var += push_text(col, row, b),
                    None => col.push_null(row),
                },
                Op::DynStr { relative } => match Self::dyn_range::<E>(payload, c, relative) {
                    Some((s, e)) => var += push_text(col, row, &payload[s..e]),
                    None => col.push_null(row),
                },
                Op::DynCpumask { relative } => {
                    match (Self::dyn_range::<E>(payload, c, relative), &mut col.data) {
                        (Some((s, e)), ColumnData::ListU64(l)) => {
                            let word = self.long_size;
                            let mut p = s;
                            let mut base = 0u64;
                            while p + word <= e {
                                let mut w = uint_at::<E>(payload, p, word).unwrap_or(0);
                                while w != 0 {
                                    l.values.push(base + w.trailing_zeros() as u64);
                                    w &= w - 1;
                                }
                                base += 8 * word as u64;
                                p += word;
                            }
                            l.end_row();
                            var += e - s;
                        }
                        _ => col.push_null(row),
                    }
                }
                Op::DynArray {
                    relative,
                    elem,
                    signed,
                } => match Self::dyn_range::<E>(payload, c, relative) {
                    Some((s, e)) => var += ints::<E>(col, row, &payload[s..e], elem, signed),
                    None => col.push_null(row),
                },
                Op::FixedArray { elem, signed } => {
                    match c.offset.checked_add(c.size).filter(|&e| e <= payload.len()) {
                        Some(end) => {
                            var += ints::<E>(col, row, &payload[c.offset..end], elem, signed)
                        }
                        None => col.push_null(row),
                    }
                }
                Op::TailArray { elem, signed } => match payload.get(c.offset..) {
                    Some(b) => var += ints::<E>(col, row, b, elem, signed),
                    None => col.push_null(row),
                },
                Op::Raw(at) => match (Self::raw_bytes::<E>(payload, c, at), &mut col.data) {
                    (Some(b), ColumnData::Bytes(t)) => {
                        t.push(b);
                        var += b.len();
                    }
                    _ => col.push_null(row),
                },
            }
        }
        batch.var_bytes += var;
    }
}

impl FieldDecoder {
    /// The floor's decode (`tracedat::floor`): every field of `payload`
    /// read as [`append`](Self::append) reads it, by the same rules, into
    /// plain values folded into one number, with no column written. Texts
    /// are measured and checked as UTF-8 as `append` does, not copied.
    #[inline]
    pub fn fold(&self, payload: &[u8]) -> u64 {
        match self.endian {
            Endian::Little => self.fold_in::<Le>(payload),
            Endian::Big => self.fold_in::<Be>(payload),
        }
    }

    fn fold_in<E: Order>(&self, payload: &[u8]) -> u64 {
        let text = |b: &[u8]| -> u64 {
            let (n, ascii) = if b.len() <= SHORT_TEXT {
                short_text(b)
            } else {
                let n = memchr::memchr(0, b).unwrap_or(b.len());
                (n, b[..n].is_ascii())
            };
            (ascii || std::str::from_utf8(&b[..n]).is_ok()) as u64 + n as u64
        };
        let ints = |b: &[u8], elem: usize, signed: bool| -> u64 {
            (0..b.len() / elem.max(1)).fold(0u64, |acc, i| {
                let v = uint_at::<E>(b, i * elem, elem).unwrap_or(0);
                let v = if signed {
                    sign_extend(v, elem) as u64
                } else {
                    v
                };
                acc.wrapping_add(v)
            })
        };
        let mut acc = 0u64;
        for c in &self.cols {
            let v = match c.op {
                Op::Int1 => payload.get(c.offset).map(|&b| b as u64),
                Op::Int2 => bytes_at::<2>(payload, c.offset).map(|b| E::u16(b) as u64),
                Op::Int4 => bytes_at::<4>(payload, c.offset).map(|b| E::u32(b) as u64),
                Op::Int8 => bytes_at::<8>(payload, c.offset).map(E::u64),
                Op::CharArray => c
                    .offset
                    .checked_add(c.size)
                    .filter(|&e| e <= payload.len())
                    .map(|end| text(&payload[c.offset..end])),
                Op::TailStr => payload.get(c.offset..).map(text),
                Op::DynStr { relative } => {
                    Self::dyn_range::<E>(payload, c, relative).map(|(s, e)| text(&payload[s..e]))
                }
                Op::DynCpumask { relative } => {
                    Self::dyn_range::<E>(payload, c, relative).map(|(s, e)| {
                        let word = self.long_size;
                        let (mut p, mut base, mut sum) = (s, 0u64, 0u64);
                        while p + word <= e {
                            let mut w = uint_at::<E>(payload, p, word).unwrap_or(0);
                            while w != 0 {
                                sum = sum.wrapping_add(base + w.trailing_zeros() as u64);
                                w &= w - 1;
                            }
                            base += 8 * word as u64;
                            p += word;
                        }
                        sum
                    })
                }
                Op::DynArray {
                    relative,
                    elem,
                    signed,
                } => Self::dyn_range::<E>(payload, c, relative)
                    .map(|(s, e)| ints(&payload[s..e], elem, signed)),
                Op::FixedArray { elem, signed } => c
                    .offset
                    .checked_add(c.size)
                    .filter(|&e| e <= payload.len())
                    .map(|end| ints(&payload[c.offset..end], elem, signed)),
                Op::TailArray { elem, signed } => {
                    payload.get(c.offset..).map(|b| ints(b, elem, signed))
                }
                Op::Raw(at) => Self::raw_bytes::<E>(payload, c, at).map(|b| b.len() as u64),
            };
            // a null is a value too (the placeholder `append` stores)
            acc = acc.rotate_left(5) ^ v.unwrap_or(u64::MAX);
        }
        acc
    }
}

/// Append the `elem`-byte integers of `b` as one list row of `c`; returns
/// the bytes read.
fn ints<E: Order>(c: &mut Column, row: u32, b: &[u8], elem: usize, signed: bool) -> usize {
    let n = b.len() / elem.max(1);
    match &mut c.data {
        ColumnData::ListI64(l) if signed => {
            l.values.extend(
                (0..n).map(|i| sign_extend(uint_at::<E>(b, i * elem, elem).unwrap_or(0), elem)),
            );
            l.end_row();
        }
        ColumnData::ListU64(l) if !signed => {
            l.values
                .extend((0..n).map(|i| uint_at::<E>(b, i * elem, elem).unwrap_or(0)));
            l.end_row();
        }
        _ => c.push_null(row),
    }
    n * elem
}

#[cfg(test)]
mod short_text_tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn agrees_with_memchr_and_is_ascii(bytes in proptest::collection::vec(prop_oneof![Just(0u8), 1u8..0x80, 0x80u8..=0xff, Just(b'a')], 0..=SHORT_TEXT)) {
            let n = memchr::memchr(0, &bytes).unwrap_or(bytes.len());
            prop_assert_eq!(short_text(&bytes), (n, bytes[..n].is_ascii()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ftrace::format::parse_field_line;
    use crate::sink::Value;

    fn ff(line: &str) -> FieldFormat {
        parse_field_line(line).unwrap()
    }

    /// A one-row batch holding what `payload` decodes to.
    fn decode_one(kinds: &[(&FieldFormat, FieldKind)], endian: Endian, payload: &[u8]) -> RowBatch {
        let d = FieldDecoder::new(kinds, endian, 8);
        let types: Vec<ColumnType> = kinds.iter().map(|(_, k)| k.column_type()).collect();
        let mut b = RowBatch::new(&types, 1);
        let head = crate::sink::RowHeader {
            ts: 0,
            cpu: 0,
            pid: None,
            instance: 0,
        };
        let row = b.push_header(&head);
        d.append(payload, &mut b, row);
        b
    }

    #[test]
    fn classifies_every_kind() {
        let k = |l: &str| FieldKind::classify(&ff(l), 8);
        assert_eq!(
            k("field:pid_t pid;\toffset:8;\tsize:4;\tsigned:1;"),
            FieldKind::Int {
                size: 4,
                signed: true
            }
        );
        assert_eq!(
            k("field:char comm[16];\toffset:8;\tsize:16;\tsigned:0;"),
            FieldKind::CharArray
        );
        assert_eq!(
            k("field:__data_loc char[] name;\toffset:8;\tsize:4;\tsigned:0;"),
            FieldKind::DynStr { relative: false }
        );
        assert_eq!(
            k("field:__rel_loc char[] name;\toffset:8;\tsize:4;\tsigned:0;"),
            FieldKind::DynStr { relative: true }
        );
        assert_eq!(
            k("field:__data_loc cpumask_t cpumask;\toffset:8;\tsize:4;\tsigned:0;"),
            FieldKind::DynCpumask { relative: false }
        );
        assert_eq!(
            k("field:unsigned long args[6];\toffset:8;\tsize:48;\tsigned:0;"),
            FieldKind::FixedArray {
                elem: 8,
                signed: false
            }
        );
        assert_eq!(
            k("field:u32 buf[];\toffset:16;\tsize:0;\tsigned:0;"),
            FieldKind::TailArray {
                elem: 4,
                signed: false
            }
        );
        assert_eq!(
            k("field:char buf[];\toffset:16;\tsize:0;\tsigned:0;"),
            FieldKind::TailStr
        );
        assert_eq!(
            k("field:u32 buf;\toffset:24;\tsize:0;\tsigned:0;"),
            FieldKind::TailArray {
                elem: 4,
                signed: false
            }
        );
        assert_eq!(
            k("field:bool ok;\toffset:8;\tsize:1;\tsigned:0;"),
            FieldKind::Bool
        );
        assert!(matches!(
            k("field:struct foo f;\toffset:8;\tsize:12;\tsigned:0;"),
            FieldKind::Raw {
                at: RawAt::Fixed,
                ..
            }
        ));
        assert!(matches!(
            k("field:__data_loc struct foo[] fs;\toffset:8;\tsize:4;\tsigned:0;"),
            FieldKind::Raw {
                at: RawAt::Dynamic { relative: false },
                ..
            }
        ));
        assert!(matches!(
            k("field:struct foo tail[];\toffset:8;\tsize:0;\tsigned:0;"),
            FieldKind::Raw {
                at: RawAt::Tail,
                ..
            }
        ));
    }

    #[test]
    fn decodes_ints_strings_dynamic_and_cpumask_in_both_endians() {
        for endian in [Endian::Little, Endian::Big] {
            let fields = [
                ff("field:int a;\toffset:0;\tsize:4;\tsigned:1;"),
                ff("field:char c[6];\toffset:4;\tsize:6;\tsigned:0;"),
                ff("field:__data_loc char[] s;\toffset:12;\tsize:4;\tsigned:0;"),
                ff("field:__rel_loc char[] r;\toffset:16;\tsize:4;\tsigned:0;"),
                ff("field:__data_loc cpumask_t m;\toffset:20;\tsize:4;\tsigned:0;"),
            ];
            let mut p = vec![0u8; 48];
            let put32 = |p: &mut Vec<u8>, off: usize, v: u32| {
                let b = if endian == Endian::Little {
                    v.to_le_bytes()
                } else {
                    v.to_be_bytes()
                };
                p[off..off + 4].copy_from_slice(&b);
            };
            put32(&mut p, 0, (-7i32) as u32);
            p[4..7].copy_from_slice(b"abc");
            put32(&mut p, 12, (4 << 16) | 24); // "xyz\0" at 24
            p[24..28].copy_from_slice(b"xyz\0");
            put32(&mut p, 16, (2 << 16) | 8); // rel: 16+4+8 = 28
            p[28..30].copy_from_slice(b"hi");
            put32(&mut p, 20, (8 << 16) | 32); // one 64-bit word at 32
            let mask: u64 = (1 << 0) | (1 << 3) | (1 << 63);
            let mb = if endian == Endian::Little {
                mask.to_le_bytes()
            } else {
                mask.to_be_bytes()
            };
            p[32..40].copy_from_slice(&mb);
            let kinds: Vec<_> = fields
                .iter()
                .map(|f| (f, FieldKind::classify(f, 8)))
                .collect();
            let b = decode_one(&kinds, endian, &p);
            let (_, out) = b.row(0);
            assert_eq!(out[0], Value::I64(-7));
            assert_eq!(out[1], Value::Str("abc"));
            assert_eq!(out[2], Value::Str("xyz"));
            assert_eq!(out[3], Value::Str("hi"));
            assert_eq!(out[4], Value::ListU64(&[0, 3, 63]));
        }
    }

    #[test]
    fn untyped_fields_keep_their_bytes() {
        // svc_xprt_do_enqueue's `struct __kernel_sockaddr_storage ss` (128
        // bytes), an integer of an odd size, an array of structs at a
        // __data_loc, a trailing array of structs
        let fields = [
            ff("field:struct __kernel_sockaddr_storage ss;\toffset:0;\tsize:128;\tsigned:0;"),
            ff("field:u32 odd;\toffset:128;\tsize:3;\tsigned:0;"),
            ff("field:__data_loc struct pair[] ps;\toffset:132;\tsize:4;\tsigned:0;"),
            ff("field:struct pair tail[];\toffset:136;\tsize:0;\tsigned:0;"),
        ];
        let mut p: Vec<u8> = (0..=255u8).cycle().take(146).collect();
        p[132..136].copy_from_slice(&((3u32 << 16) | 140).to_le_bytes());
        let kinds: Vec<_> = fields
            .iter()
            .map(|f| (f, FieldKind::classify(f, 8)))
            .collect();
        assert!(kinds
            .iter()
            .all(|(_, k)| k.column_type() == ColumnType::Bytes));
        let b = decode_one(&kinds, Endian::Little, &p);
        let (_, out) = b.row(0);
        assert_eq!(out[0], Value::Bytes(&p[..128]));
        assert_eq!(out[1], Value::Bytes(&p[128..131]));
        assert_eq!(out[2], Value::Bytes(&p[140..143]));
        assert_eq!(out[3], Value::Bytes(&p[136..]));
        // a payload too short for the struct: null, as for a short integer
        let b = decode_one(&kinds[..1], Endian::Little, &p[..100]);
        assert_eq!(b.row(0).1, vec![Value::Null]);
    }

    #[test]
    fn short_or_hostile_payloads_decode_to_null() {
        let fields = [
            ff("field:u64 a;\toffset:0;\tsize:8;\tsigned:0;"),
            ff("field:__data_loc char[] s;\toffset:0;\tsize:4;\tsigned:0;"),
        ];
        let kinds: Vec<_> = fields
            .iter()
            .map(|f| (f, FieldKind::classify(f, 8)))
            .collect();
        let b = decode_one(&kinds, Endian::Little, &[0xffu8; 4]);
        let (_, out) = b.row(0);
        assert_eq!(out, vec![Value::Null, Value::Null]);
    }
}
