//! The RLE/bit-packing hybrid: definition and repetition levels, and
//! dictionary indices.
//!
//! The values are looked at eight at a time, the size of a bit-packed
//! group: a group of eight equal values starts an RLE run (a count and
//! the value once), extended as far as the value repeats; every other
//! group is bit-packed. A column without nulls has one level value
//! throughout, so its levels are a single run of a few bytes whatever the
//! row count. Runs that do not cover a whole group stay bit-packed, a few
//! bits more than the tightest encoding; comparing a group at once (one
//! vector compare) instead of value by value halved the encoder's time on
//! dictionary indices, whose runs are mostly short.

use super::bitpack::pack_groups;
use super::uleb128;

/// Append the hybrid encoding of `values` (each below 2^`width`), without
/// a length prefix or bit-width byte (callers add what their context
/// needs).
pub(crate) fn encode(out: &mut Vec<u8>, values: &[u32], width: u8) {
    let n = values.len();
    // values[pending..i] wait to be bit-packed (whole groups)
    let mut pending = 0;
    let mut i = 0;
    while i + 8 <= n {
        let v = values[i];
        if !same8(&values[i..i + 8], v) {
            i += 8;
            continue;
        }
        let mut j = i + 8;
        while j + 8 <= n && same8(&values[j..j + 8], v) {
            j += 8;
        }
        while j < n && values[j] == v {
            j += 1;
        }
        packed(out, &values[pending..i], width);
        run(out, j - i, v, width);
        pending = j;
        i = j;
    }
    packed(out, &values[pending..], width);
}

/// All eight of `g` equal `v` (written so that it compiles to one vector
/// compare).
#[inline(always)]
fn same8(g: &[u32], v: u32) -> bool {
    g.iter().fold(true, |all, &x| all & (x == v))
}

/// The hybrid encoding of `n` copies of one value.
pub(crate) fn encode_run(out: &mut Vec<u8>, n: usize, value: u32, width: u8) {
    if n > 0 {
        run(out, n, value, width);
    }
}

fn run(out: &mut Vec<u8>, n: usize, v: u32, width: u8) {
    uleb128(out, (n as u64) << 1);
    let bytes = (width as usize).div_ceil(8);
    out.extend_from_slice(&v.to_le_bytes()[..bytes]);
}

/// A bit-packed run of `values`, the last group padded with zeros.
fn packed(out: &mut Vec<u8>, values: &[u32], width: u8) {
    if values.is_empty() {
        return;
    }
    let groups = values.len().div_ceil(8);
    uleb128(out, ((groups as u64) << 1) | 1);
    let whole = values.len() / 8 * 8;
    pack_groups(out, &values[..whole], width);
    if whole < values.len() {
        let mut last = [0u32; 8];
        last[..values.len() - whole].copy_from_slice(&values[whole..]);
        pack_groups(out, &last, width);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use parquet::encodings::rle::RleDecoder;
    use proptest::prelude::*;

    fn decode(bytes: &[u8], width: u8, n: usize) -> Vec<u32> {
        let mut d = RleDecoder::new(width);
        d.set_data(bytes::Bytes::copy_from_slice(bytes)).unwrap();
        let mut out = vec![0u32; n];
        let got = d.get_batch(&mut out).unwrap();
        assert_eq!(got, n);
        out
    }

    #[test]
    fn one_value_throughout_is_one_run() {
        let mut out = Vec::new();
        encode(&mut out, &vec![1; 100_000], 1);
        assert_eq!(out.len(), 4, "{out:?}");
        assert_eq!(decode(&out, 1, 100_000), vec![1; 100_000]);
        let mut out2 = Vec::new();
        encode_run(&mut out2, 100_000, 1, 1);
        assert_eq!(out, out2);
    }

    proptest! {
        #[test]
        fn the_parquet_crate_decodes_what_we_encode(
            // runs of random lengths, so both kinds of run occur
            runs in proptest::collection::vec((0u32..1000, 1usize..40), 0..60),
            width in 10u8..=32,
        ) {
            let values: Vec<u32> = runs.iter().flat_map(|&(v, n)| std::iter::repeat_n(v, n)).collect();
            let mut out = Vec::new();
            encode(&mut out, &values, width);
            prop_assert_eq!(decode(&out, width, values.len()), values);
        }

        #[test]
        fn narrow_widths_round_trip(values in proptest::collection::vec(0u32..4, 0..300)) {
            let mut out = Vec::new();
            encode(&mut out, &values, 2);
            prop_assert_eq!(decode(&out, 2, values.len()), values);
        }
    }
}
