//! Parquet's value and level encodings, written for the column shapes an
//! import produces: long runs of small integers, sorted timestamps, a few
//! repeated names, and free text.
//!
//! Each encoder appends to a `Vec<u8>` and knows nothing of pages or
//! files (`crate::event_file` assembles those). The formats are the ones
//! in the Parquet specification's `Encodings.md`; the tests decode every
//! encoder's output with the `parquet` crate's own readers.

pub(crate) mod bitpack;
pub(crate) mod delta;
pub(crate) mod dict;
pub(crate) mod hybrid;

/// ULEB128 varint.
#[inline]
pub(crate) fn uleb128(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Zigzag varint of a signed value.
#[inline]
pub(crate) fn zigzag(out: &mut Vec<u8>, v: i64) {
    uleb128(out, ((v << 1) ^ (v >> 63)) as u64);
}

/// Bits needed to store values up to `max`.
#[inline]
pub(crate) fn bit_width(max: u64) -> u8 {
    (64 - max.leading_zeros()) as u8
}
