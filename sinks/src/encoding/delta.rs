//! DELTA_BINARY_PACKED: timestamps, TSC counts and CPU numbers.
//!
//! Blocks of 128 values in four miniblocks of 32: each block stores its
//! smallest delta once and every miniblock its deltas above that at the
//! fewest bits they need, so a sorted timestamp column costs a few bits a
//! row. Deltas wrap at the column's physical width (32 or 64 bits), as
//! readers undo them.

use super::bitpack::pack;
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
    for block in values[1..].chunks(BLOCK) {
        let mut min = i64::MAX;
        for (d, &v) in deltas.iter_mut().zip(block) {
            *d = v.delta(prev);
            prev = v;
            min = min.min(*d);
        }
        let n = block.len();
        for (a, &d) in above.iter_mut().zip(&deltas[..n]) {
            *a = T::above(d, min);
        }
        zigzag(out, min);
        let used = n.div_ceil(MINI);
        let mut widths = [0u8; MINIBLOCKS];
        for (m, w) in widths.iter_mut().enumerate().take(used) {
            let part = &above[m * MINI..((m + 1) * MINI).min(n)];
            *w = bit_width(part.iter().fold(0, |a, &b| a | b));
        }
        out.extend_from_slice(&widths);
        for (m, &w) in widths.iter().enumerate().take(used) {
            // the last miniblock is padded to its full 32 values
            let part = &above[m * MINI..((m + 1) * MINI).min(n)];
            let pad = MINI - part.len();
            pack(
                out,
                part.iter().copied().chain(std::iter::repeat_n(0, pad)),
                w,
            );
        }
    }
}
