//! Page compression, with the codec's state kept from page to page.
//!
//! LZ4 is the speed codec, so it is spent where it pays: a column whose
//! pages it does not shrink by an eighth (dictionary indices of a few
//! bits, all-null levels) has its pages stored as LZ4 blocks of literals
//! only, which every LZ4 decoder reads and which cost a copy, and is tried
//! again every [`LZ4_RETRY_PAGES`] pages. On the generated xentrace
//! benchmark file, compressing such pages (and clearing the 16 KiB match
//! table before each) was a tenth of the writer's instructions.

use crate::Codec;

/// Pages after which a column whose pages LZ4 did not shrink tries again.
const LZ4_RETRY_PAGES: u32 = 16;

/// Whether LZ4 is worth trying on a column's next page (one per column).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Lz4Probe {
    /// Pages stored since LZ4 last failed to pay; 0 when it paid.
    stored: u32,
}

/// Compresses pages with one codec, reusing its tables and output buffer.
pub(crate) struct Compressor {
    codec: Codec,
    /// Match tables: 16-bit positions for pages under 64 KiB (half the
    /// table to clear per page), 32-bit for larger ones.
    lz4_small: lz4_flex::block::CompressTable,
    lz4_large: lz4_flex::block::CompressTable,
    zstd: Option<zstd::bulk::Compressor<'static>>,
    out: Vec<u8>,
}

impl Compressor {
    pub(crate) fn new(codec: Codec) -> Result<Self, String> {
        let zstd = match codec {
            Codec::Zstd => {
                Some(zstd::bulk::Compressor::new(1).map_err(|e| format!("zstd compressor: {e}"))?)
            }
            _ => None,
        };
        Ok(Compressor {
            codec,
            lz4_small: lz4_flex::block::CompressTable::small(),
            lz4_large: lz4_flex::block::CompressTable::large(),
            zstd,
            out: Vec::new(),
        })
    }

    /// `page` compressed (borrowed until the next call). `probe` is the
    /// column's LZ4 record (see the module docs); other codecs ignore it.
    pub(crate) fn compress<'a>(
        &'a mut self,
        page: &'a [u8],
        probe: &mut Lz4Probe,
    ) -> Result<&'a [u8], String> {
        match self.codec {
            Codec::None => Ok(page),
            Codec::Lz4 if probe.stored > 0 && probe.stored < LZ4_RETRY_PAGES => {
                probe.stored += 1;
                self.out.clear();
                lz4_literals(&mut self.out, page);
                Ok(&self.out)
            }
            Codec::Lz4 => {
                let need = lz4_flex::block::get_maximum_output_size(page.len());
                if self.out.len() < need {
                    // grown only: resizing down and up again per page
                    // zeroed the difference each time
                    self.out.resize(need, 0);
                }
                let table = if page.len() < u16::MAX as usize {
                    &mut self.lz4_small
                } else {
                    &mut self.lz4_large
                };
                let n = lz4_flex::block::compress_into_with_table(page, &mut self.out, table)
                    .map_err(|e| format!("lz4: {e}"))?;
                probe.stored = u32::from(n > page.len() - page.len() / 8);
                Ok(&self.out[..n])
            }
            Codec::Zstd => {
                let z = self.zstd.as_mut().expect("a zstd compressor for zstd");
                self.out.clear();
                self.out
                    .reserve(zstd::zstd_safe::compress_bound(page.len()));
                z.compress_to_buffer(page, &mut self.out)
                    .map_err(|e| format!("zstd: {e}"))?;
                Ok(&self.out)
            }
        }
    }
}

/// Append `bytes` as an LZ4 block of one sequence of literals and no
/// match (what the block format's last sequence is): a token with the
/// literal length (15 and then 255s and a remainder when longer), then
/// the bytes.
fn lz4_literals(out: &mut Vec<u8>, bytes: &[u8]) {
    let n = bytes.len();
    out.reserve(n + n / 255 + 2);
    if n < 15 {
        out.push((n as u8) << 4);
    } else {
        out.push(0xf0);
        let mut rest = n - 15;
        while rest >= 255 {
            out.push(255);
            rest -= 255;
        }
        out.push(rest as u8);
    }
    out.extend_from_slice(bytes);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn literal_blocks_decode_to_their_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..2000)) {
            let mut out = Vec::new();
            lz4_literals(&mut out, &bytes);
            prop_assert_eq!(lz4_flex::block::decompress(&out, bytes.len()).unwrap(), bytes);
        }
    }

    #[test]
    fn incompressible_pages_are_stored_until_the_retry() {
        let mut c = Compressor::new(Codec::Lz4).unwrap();
        let mut probe = Lz4Probe::default();
        // a xorshift stream: nothing for LZ4 to match
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let noise: Vec<u8> = (0..4096)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        let zeros = vec![0u8; 4096];
        c.compress(&noise, &mut probe).unwrap();
        assert_eq!(probe.stored, 1, "noise does not pay");
        // stored from here, even pages LZ4 would shrink, until the retry
        for i in 1..LZ4_RETRY_PAGES {
            let out = c.compress(&zeros, &mut probe).unwrap().to_vec();
            assert_eq!(
                out.len(),
                zeros.len() + 2 + (4096 - 15) / 255,
                "page {i} stored"
            );
            assert_eq!(lz4_flex::block::decompress(&out, 4096).unwrap(), zeros);
        }
        let out = c.compress(&zeros, &mut probe).unwrap().to_vec();
        assert!(out.len() < 100 && probe.stored == 0, "the retry compresses");
        assert_eq!(lz4_flex::block::decompress(&out, 4096).unwrap(), zeros);
    }
}
