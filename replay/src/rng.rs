//! splitmix64 (Steele, Lea & Flood 2014): a tiny, fast, seedable stream.
//! Each user owns its own stream, so adding draws in one model never shifts
//! another's, and a replay with the same seed draws the same numbers.

/// A splitmix64 stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    /// The next draw, uniform in [0, 1].
    pub fn next_f64(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) as f64 / u64::MAX as f64
    }
}
