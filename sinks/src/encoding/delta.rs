//! DELTA_BINARY_PACKED: timestamps, TSC counts and CPU numbers.
//!
//! Blocks of 128 values in four miniblocks of 32: each block stores its
//! smallest delta once and every miniblock its deltas above that at the
//! fewest bits they need, so a sorted timestamp column costs a few bits a
//! row. Deltas wrap at the column's physical width (32 or 64 bits), as
//! readers undo them.

use super::bitpack::pack_groups;
use super::{bit_width, uleb128, zigzag};

const BLOCK: usize = 128;
const MINIBLOCKS: usize = 4;
const MINI: usize = BLOCK / MINIBLOCKS;

/// A physical integer type the encoding works in.
pub(crate) trait DeltaInt: Copy {
    /// `self - prev`, wrapping at this width, as the width's signed value.
    fn delta(self, prev: Self) -> i64;
    /// `d - min` as this width's unsigned bits (d >= min in wrapping order).
    fn above(d: i64, min: i64) -> u64;
    /// Sign-extended value.
    fn wide(self) -> i64;
}

impl DeltaInt for i32 {
    #[inline]
    fn delta(self, prev: Self) -> i64 {
        self.wrapping_sub(prev) as i64
    }
    #[inline]
    fn above(d: i64, min: i64) -> u64 {
        (d as i32).wrapping_sub(min as i32) as u32 as u64
    }
    #[inline]
    fn wide(self) -> i64 {
        self as i64
    }
}

impl DeltaInt for i64 {
    #[inline]
    fn delta(self, prev: Self) -> i64 {
        self.wrapping_sub(prev)
    }
    #[inline]
    fn above(d: i64, min: i64) -> u64 {
        d.wrapping_sub(min) as u64
    }
    #[inline]
    fn wide(self) -> i64 {
        self
    }
}

/// An unsigned type encodes as the signed one of its width: the same bits,
/// wrapping the same way.
macro_rules! delta_as_signed {
    ($($u:ty => $s:ty),+) => {$(
        impl DeltaInt for $u {
            #[inline]
            fn delta(self, prev: Self) -> i64 {
                (self as $s).delta(prev as $s)
            }
            #[inline]
            fn above(d: i64, min: i64) -> u64 {
                <$s>::above(d, min)
            }
            #[inline]
            fn wide(self) -> i64 {
                (self as $s).wide()
            }
        }
    )+};
}
delta_as_signed!(u32 => i32, u64 => i64);

/// Append `values` DELTA_BINARY_PACKED.
pub(crate) fn encode<T: DeltaInt>(out: &mut Vec<u8>, values: &[T]) {
    uleb128(out, BLOCK as u64);
    uleb128(out, MINIBLOCKS as u64);
    uleb128(out, values.len() as u64);
    let Some(&first) = values.first() else {
        zigzag(out, 0);
        return;
    };
    zigzag(out, first.wide());
    let mut deltas = [0i64; BLOCK];
    let mut above = [0u64; BLOCK];
    let mut prev = first;
    // Each step is its own loop over the block, without a branch inside,
    // so that the compiler unrolls or vectorizes it.
    for block in values[1..].chunks(BLOCK) {
        let n = block.len();
        deltas[0] = block[0].delta(prev);
        let mut min = deltas[0];
        for (d, w) in deltas[1..n].iter_mut().zip(block.windows(2)) {
            *d = w[1].delta(w[0]);
            // in the same pass as the deltas (the compiler vectorizes
            // both; SSE2 has no 64-bit compare, so about 7 instructions
            // a value go to the minimum alone)
            min = if *d < min { *d } else { min };
        }
        prev = block[n - 1];
        // the last miniblock is padded to its full 32 values: zeros above
        deltas[n..].fill(min);
        zigzag(out, min);
        let used = n.div_ceil(MINI);
        let mut widths = [0u8; MINIBLOCKS];
        for (m, w) in widths.iter_mut().enumerate().take(used) {
            let mut or = 0;
            for (a, &d) in above[m * MINI..(m + 1) * MINI]
                .iter_mut()
                .zip(&deltas[m * MINI..(m + 1) * MINI])
            {
                *a = T::above(d, min);
                or |= *a;
            }
            *w = bit_width(or);
        }
        out.extend_from_slice(&widths);
        for (m, &w) in widths.iter().enumerate().take(used) {
            pack_groups(out, &above[m * MINI..(m + 1) * MINI], w);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use parquet::data_type::{Int32Type, Int64Type};
    use parquet::encodings::decoding::{Decoder, DeltaBitPackDecoder};
    use proptest::prelude::*;

    fn decode64(bytes: &[u8], n: usize) -> Vec<i64> {
        let mut d = DeltaBitPackDecoder::<Int64Type>::new();
        d.set_data(bytes::Bytes::copy_from_slice(bytes), n).unwrap();
        let mut out = vec![0i64; n];
        assert_eq!(d.get(&mut out).unwrap(), n);
        out
    }

    fn decode32(bytes: &[u8], n: usize) -> Vec<i32> {
        let mut d = DeltaBitPackDecoder::<Int32Type>::new();
        d.set_data(bytes::Bytes::copy_from_slice(bytes), n).unwrap();
        let mut out = vec![0i32; n];
        assert_eq!(d.get(&mut out).unwrap(), n);
        out
    }

    proptest! {
        // any values, wrapping deltas included, and block tails of every length
        #[test]
        fn the_parquet_crate_decodes_what_we_encode(
            wide in proptest::collection::vec(any::<i64>(), 0..600),
            steps in proptest::collection::vec(0i64..5000, 0..600),
        ) {
            let mut out = Vec::new();
            encode(&mut out, &wide);
            prop_assert_eq!(decode64(&out, wide.len()), wide.clone());
            // timestamps: sorted, small steps
            let ts: Vec<u64> = steps.iter().scan(1u64 << 40, |t, &s| { *t += s as u64; Some(*t) }).collect();
            let mut out = Vec::new();
            encode(&mut out, &ts);
            let back: Vec<u64> = decode64(&out, ts.len()).into_iter().map(|v| v as u64).collect();
            prop_assert_eq!(back, ts);
            let narrow: Vec<i32> = wide.iter().map(|&v| v as i32).collect();
            let mut out = Vec::new();
            encode(&mut out, &narrow);
            prop_assert_eq!(decode32(&out, narrow.len()), narrow.clone());
            let unsigned: Vec<u32> = narrow.iter().map(|&v| v as u32).collect();
            let mut out2 = Vec::new();
            encode(&mut out2, &unsigned);
            prop_assert_eq!(out2, out);
        }
    }
}
