//! Page compression, with the codec's state kept from page to page.

use crate::Codec;

/// Compresses pages with one codec, reusing its tables and output buffer.
pub(crate) struct Compressor {
    codec: Codec,
    lz4: lz4_flex::block::CompressTable,
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
            lz4: lz4_flex::block::CompressTable::large(),
            zstd,
            out: Vec::new(),
        })
    }

    /// `page` compressed (borrowed until the next call).
    pub(crate) fn compress<'a>(&'a mut self, page: &'a [u8]) -> Result<&'a [u8], String> {
        match self.codec {
            Codec::None => Ok(page),
            Codec::Lz4 => {
                self.out
                    .resize(lz4_flex::block::get_maximum_output_size(page.len()), 0);
                let n =
                    lz4_flex::block::compress_into_with_table(page, &mut self.out, &mut self.lz4)
                        .map_err(|e| format!("lz4: {e}"))?;
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
