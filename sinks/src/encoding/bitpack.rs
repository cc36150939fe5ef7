//! Bit packing, least significant bit first: value `i` of width `w`
//! occupies bits `i*w .. (i+1)*w` of the output, as Parquet's RLE/bit-packing
//! hybrid and DELTA_BINARY_PACKED both lay them out.

/// Append `values` (each below 2^`width`) packed at `width` bits, padded
/// with zero bits to a whole byte.
#[inline]
pub(crate) fn pack(out: &mut Vec<u8>, values: impl IntoIterator<Item = u64>, width: u8) {
    if width == 0 {
        return;
    }
    let w = width as u32;
    // Up to 64 pending bits plus one value of up to 64 bits.
    let mut acc: u128 = 0;
    let mut bits = 0u32;
    for v in values {
        acc |= (v as u128) << bits;
        bits += w;
        if bits >= 64 {
            out.extend_from_slice(&(acc as u64).to_le_bytes());
            acc >>= 64;
            bits -= 64;
        }
    }
    let tail = bits.div_ceil(8) as usize;
    out.extend_from_slice(&(acc as u64).to_le_bytes()[..tail]);
}

/// Append `values` packed at `width` bits, eight at a time: a group of
/// eight values is exactly `width` bytes. Only as many values as a
/// multiple of eight are packed; callers pad. Each width has its own
/// copy of the loop ([`pack_width`]), where every shift and word index is
/// a constant: the short groups of the hybrid and delta encodings then
/// cost a few instructions a value, where one packer for all widths
/// (a shift by a variable and a flush test per value) cost a dozen.
#[inline]
pub(crate) fn pack_groups<T: Copy + Into<u64>>(out: &mut Vec<u8>, values: &[T], width: u8) {
    let w = width as usize;
    if w == 0 {
        return;
    }
    let groups = values.len() / 8;
    let start = out.len();
    out.resize(start + groups * w, 0);
    let dst = &mut out[start..];
    macro_rules! dispatch {
        ($($n:literal)+) => {
            match w {
                $($n => pack_width::<T, $n>(values, dst),)+
                _ => unreachable!("bit widths are 1..=64"),
            }
        };
    }
    dispatch!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32
        33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64);
}

/// [`pack_groups`] at a width known when compiled.
#[inline(never)]
fn pack_width<T: Copy + Into<u64>, const W: usize>(values: &[T], dst: &mut [u8]) {
    for (g, d) in values.chunks_exact(8).zip(dst.chunks_exact_mut(W)) {
        // 8 values of W bits: W bytes, in at most W / 8 + 1 words
        let mut words = [0u64; 9];
        for (i, &v) in g.iter().enumerate() {
            let v: u64 = v.into();
            let (word, shift) = (i * W / 64, i * W % 64);
            words[word] |= v << shift;
            if shift + W > 64 {
                words[word + 1] |= v >> (64 - shift);
            }
        }
        for (bytes, word) in d.chunks_mut(8).zip(words) {
            bytes.copy_from_slice(&word.to_le_bytes()[..bytes.len()]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn groups_pack_as_the_plain_packer_does(
            width in 1u8..=64,
            raw in proptest::collection::vec(any::<u64>(), 0..12),
        ) {
            let n = raw.len() / 8 * 8;
            let mask = if width == 64 { u64::MAX } else { (1u64 << width) - 1 };
            let vals: Vec<u64> = raw[..n].iter().map(|v| v & mask).collect();
            let (mut a, mut b) = (Vec::new(), vec![7u8]);
            pack(&mut a, vals.iter().copied(), width);
            pack_groups(&mut b, &vals, width);
            prop_assert_eq!(&b[1..], &a[..]);
            if width <= 32 {
                let small: Vec<u32> = vals.iter().map(|&v| v as u32).collect();
                let mut c = Vec::new();
                pack_groups(&mut c, &small, width);
                prop_assert_eq!(c, a);
            }
        }
    }

    #[test]
    fn packs_lsb_first() {
        let mut out = Vec::new();
        // the example in Parquet's Encodings.md: 0..8 at 3 bits
        pack(&mut out, 0u64..8, 3);
        assert_eq!(out, [0b1000_1000, 0b1100_0110, 0b1111_1010]);
        let mut out = Vec::new();
        pack(&mut out, [u64::MAX, 1], 64);
        assert_eq!(out.len(), 16);
        assert_eq!(&out[..8], &[0xff; 8]);
        assert_eq!(&out[8..], &1u64.to_le_bytes());
    }
}
