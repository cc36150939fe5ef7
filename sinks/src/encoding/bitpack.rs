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

#[cfg(test)]
mod tests {
    use super::*;

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
