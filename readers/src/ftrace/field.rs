//! Field typing and payload decoding.
//!
//! [`FieldKind::classify`] turns a format line into a decoding rule and a
//! column type; [`FieldDecoder`] applies the rules of one event to record
//! payloads. Decoding is two-phase so rows can borrow from both the payload
//! and the decoder's scratch space without per-event allocation of strings
//! or lists: [`FieldDecoder::prepare`] fills scratch, then
//! [`FieldDecoder::values`] hands out borrowed [`Value`]s.

use super::format::FieldFormat;
use crate::bytes::Endian;
use crate::sink::{ColumnType, Value};

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
    /// Cannot be typed; the field is dropped (reason).
    Unsupported(String),
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
                return FieldKind::Unsupported(format!("dynamic field of size {}", f.size));
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
                None => FieldKind::Unsupported(format!("dynamic array of unknown type {base:?}")),
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
                    None => {
                        FieldKind::Unsupported(format!("trailing array of unknown type {base:?}"))
                    }
                };
            }
            if is_char(&base) {
                return FieldKind::CharArray;
            }
            let elem = scalar_size(&base, long_size).or_else(|| {
                f.array_len
                    .filter(|&n| n > 0 && f.size % n == 0)
                    .map(|n| f.size / n)
            });
            return match elem {
                Some(e) if e > 0 && f.size % e == 0 && matches!(e, 1 | 2 | 4 | 8) => {
                    FieldKind::FixedArray {
                        elem: e,
                        signed: f.signed,
                    }
                }
                _ => FieldKind::Unsupported(format!("array {base:?} of size {}", f.size)),
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
            n => FieldKind::Unsupported(format!("scalar of size {n} ({base:?})")),
        }
    }

    /// The column type this kind produces (None if unsupported).
    pub fn column_type(&self) -> Option<ColumnType> {
        Some(match self {
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
            FieldKind::Unsupported(_) => return None,
        })
    }
}

/// Decoded value of one field, before borrowing (see module docs).
#[derive(Clone, Copy, Debug)]
enum Slot {
    Null,
    I(i64),
    U(u64),
    B(bool),
    /// Text at payload[start..end], valid UTF-8.
    Text(usize, usize),
    /// Text in scratch string `idx` (was not valid UTF-8).
    Owned(usize),
    ListI(usize),
    ListU(usize),
}

/// A field's decoding rule in the form the per-record loop wants: small
/// and `Copy`, so the loop reads it by value (a `FieldKind` carries a
/// `String` and had to be moved out of the decoder and back per field).
#[derive(Clone, Copy, Debug)]
enum Op {
    Int {
        size: usize,
        signed: bool,
    },
    Bool,
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
    Skip,
}

impl Op {
    fn of(k: &FieldKind) -> Op {
        match *k {
            FieldKind::Int { size, signed } => Op::Int { size, signed },
            FieldKind::Bool => Op::Bool,
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
            FieldKind::Unsupported(_) => Op::Skip,
        }
    }
}

#[derive(Clone, Copy)]
struct Col {
    offset: usize,
    size: usize,
    op: Op,
}

/// Decodes the own fields of one event type.
pub struct FieldDecoder {
    cols: Vec<Col>,
    endian: Endian,
    long_size: usize,
    slots: Vec<Slot>,
    strings: Vec<String>,
    lists_i: Vec<Vec<i64>>,
    lists_u: Vec<Vec<u64>>,
}

fn sign_extend(v: u64, size: usize) -> i64 {
    let shift = 64 - 8 * size as u32;
    ((v << shift) as i64) >> shift
}

fn text_end(bytes: &[u8]) -> usize {
    memchr::memchr(0, bytes).unwrap_or(bytes.len())
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
        let n = cols.len();
        FieldDecoder {
            cols,
            endian,
            long_size,
            slots: vec![Slot::Null; n],
            strings: vec![String::new(); n],
            lists_i: vec![Vec::new(); n],
            lists_u: vec![Vec::new(); n],
        }
    }

    fn dyn_range(&self, payload: &[u8], c: &Col, relative: bool) -> Option<(usize, usize)> {
        let v = self.endian.uint(payload, c.offset, 4)? as u32;
        let mut off = (v & 0xffff) as usize;
        let len = (v >> 16) as usize;
        if relative {
            off += c.offset + c.size;
        }
        let end = off.checked_add(len)?;
        (end <= payload.len()).then_some((off, end))
    }

    fn text_slot(&mut self, i: usize, payload: &[u8], start: usize, end: usize) -> Slot {
        let bytes = &payload[start..end];
        let n = text_end(bytes);
        // ASCII (comm names, nearly all text) needs no further check
        if bytes[..n].is_ascii() {
            return Slot::Text(start, start + n);
        }
        match std::str::from_utf8(&bytes[..n]) {
            Ok(_) => Slot::Text(start, start + n),
            Err(_) => {
                self.strings[i] = String::from_utf8_lossy(&bytes[..n]).into_owned();
                Slot::Owned(i)
            }
        }
    }

    fn ints(
        &mut self,
        i: usize,
        payload: &[u8],
        start: usize,
        end: usize,
        elem: usize,
        signed: bool,
    ) -> Slot {
        let e = self.endian;
        if signed {
            let l = &mut self.lists_i[i];
            l.clear();
            let mut p = start;
            while p + elem <= end {
                l.push(sign_extend(e.uint(payload, p, elem).unwrap_or(0), elem));
                p += elem;
            }
            Slot::ListI(i)
        } else {
            let l = &mut self.lists_u[i];
            l.clear();
            let mut p = start;
            while p + elem <= end {
                l.push(e.uint(payload, p, elem).unwrap_or(0));
                p += elem;
            }
            Slot::ListU(i)
        }
    }

    /// Phase 1: decode `payload` into scratch. Fields that lie outside a
    /// short payload decode as null rather than failing the record.
    pub fn prepare(&mut self, payload: &[u8]) {
        for i in 0..self.cols.len() {
            let c = self.cols[i];
            let slot = match c.op {
                Op::Int { size, signed } => match self.endian.uint(payload, c.offset, size) {
                    Some(v) if signed => Slot::I(sign_extend(v, size)),
                    Some(v) => Slot::U(v),
                    None => Slot::Null,
                },
                Op::Bool => payload
                    .get(c.offset)
                    .map_or(Slot::Null, |b| Slot::B(*b != 0)),
                Op::CharArray => match c.offset.checked_add(c.size).filter(|&e| e <= payload.len())
                {
                    Some(end) => self.text_slot(i, payload, c.offset, end),
                    None => Slot::Null,
                },
                Op::TailStr => {
                    if c.offset <= payload.len() {
                        self.text_slot(i, payload, c.offset, payload.len())
                    } else {
                        Slot::Null
                    }
                }
                Op::DynStr { relative } => match self.dyn_range(payload, &c, relative) {
                    Some((s, e)) => self.text_slot(i, payload, s, e),
                    None => Slot::Null,
                },
                Op::DynCpumask { relative } => match self.dyn_range(payload, &c, relative) {
                    Some((s, e)) => {
                        let word = self.long_size;
                        let l = &mut self.lists_u[i];
                        l.clear();
                        let mut p = s;
                        let mut base = 0u64;
                        while p + word <= e {
                            let mut w = self.endian.uint(payload, p, word).unwrap_or(0);
                            while w != 0 {
                                l.push(base + w.trailing_zeros() as u64);
                                w &= w - 1;
                            }
                            base += 8 * word as u64;
                            p += word;
                        }
                        Slot::ListU(i)
                    }
                    None => Slot::Null,
                },
                Op::DynArray {
                    relative,
                    elem,
                    signed,
                } => match self.dyn_range(payload, &c, relative) {
                    Some((s, e)) => self.ints(i, payload, s, e, elem, signed),
                    None => Slot::Null,
                },
                Op::FixedArray { elem, signed } => {
                    match c.offset.checked_add(c.size).filter(|&e| e <= payload.len()) {
                        Some(end) => self.ints(i, payload, c.offset, end, elem, signed),
                        None => Slot::Null,
                    }
                }
                Op::TailArray { elem, signed } => {
                    if c.offset <= payload.len() {
                        self.ints(i, payload, c.offset, payload.len(), elem, signed)
                    } else {
                        Slot::Null
                    }
                }
                Op::Skip => Slot::Null,
            };
            self.slots[i] = slot;
        }
    }

    /// Phase 2: the decoded values, borrowing from `payload` and scratch.
    /// `payload` must be the slice last given to [`prepare`](Self::prepare).
    pub fn values<'a>(&'a self, payload: &'a [u8], out: &mut Vec<Value<'a>>) {
        out.clear();
        for s in &self.slots {
            out.push(match *s {
                Slot::Null => Value::Null,
                Slot::I(v) => Value::I64(v),
                Slot::U(v) => Value::U64(v),
                Slot::B(v) => Value::Bool(v),
                // SAFETY: prepare() produced Text(a, b) only after
                // from_utf8 (or an ASCII check) accepted exactly payload[a..b], and `values`
                // must be called with the same payload.
                Slot::Text(a, b) => {
                    Value::Str(unsafe { std::str::from_utf8_unchecked(&payload[a..b]) })
                }
                Slot::Owned(i) => Value::Str(&self.strings[i]),
                Slot::ListI(i) => Value::ListI64(&self.lists_i[i]),
                Slot::ListU(i) => Value::ListU64(&self.lists_u[i]),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ftrace::format::parse_field_line;

    fn ff(line: &str) -> FieldFormat {
        parse_field_line(line).unwrap()
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
            FieldKind::Unsupported(_)
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
            let mut d = FieldDecoder::new(&kinds, endian, 8);
            d.prepare(&p);
            let mut out = Vec::new();
            d.values(&p, &mut out);
            assert_eq!(out[0], Value::I64(-7));
            assert_eq!(out[1], Value::Str("abc"));
            assert_eq!(out[2], Value::Str("xyz"));
            assert_eq!(out[3], Value::Str("hi"));
            assert_eq!(out[4], Value::ListU64(&[0, 3, 63]));
        }
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
        let mut d = FieldDecoder::new(&kinds, Endian::Little, 8);
        let p = [0xffu8; 4];
        d.prepare(&p);
        let mut out = Vec::new();
        d.values(&p, &mut out);
        assert_eq!(out, vec![Value::Null, Value::Null]);
    }
}
