//! The RLE/bit-packing hybrid: definition and repetition levels, and
//! dictionary indices.
//!
//! Runs of eight or more equal values become RLE runs (a count and the
//! value once); everything between them is bit-packed in groups of eight.
//! A column without nulls has one level value throughout, so its levels
//! are a single run of a few bytes whatever the row count.

use super::bitpack::pack;
use super::uleb128;

/// Append the hybrid encoding of `values` (each below 2^`width`), without
/// a length prefix or bit-width byte (callers add what their context
/// needs).
pub(crate) fn encode(out: &mut Vec<u8>, values: &[u32], width: u8) {
    let n = values.len();
    // values[pending..i] wait to be bit-packed
    let mut pending = 0;
    let mut i = 0;
    while i < n {
        let v = values[i];
        let mut j = i + 1;
        while j < n && values[j] == v {
            j += 1;
        }
        if j - i < 8 {
            i = j;
            continue;
        }
        // A bit-packed run holds whole groups of eight: the first few of
        // this run's values may have to complete the last group.
        let rem = (i - pending) % 8;
        if rem != 0 {
            i += 8 - rem;
        }
        if j - i >= 8 {
            packed(out, &values[pending..i], width);
            run(out, j - i, v, width);
            pending = j;
        }
        i = j;
    }
    packed(out, &values[pending..], width);
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

fn packed(out: &mut Vec<u8>, values: &[u32], width: u8) {
    if values.is_empty() {
        return;
    }
    let groups = values.len().div_ceil(8);
    uleb128(out, ((groups as u64) << 1) | 1);
    let pad = groups * 8 - values.len();
    pack(
        out,
        values
            .iter()
            .map(|&v| v as u64)
            .chain(std::iter::repeat_n(0, pad)),
        width,
    );
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
