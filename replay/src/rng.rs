//! splitmix64 (Steele, Lea & Flood 2014): a tiny, fast, seedable stream.
//! Each user owns its own stream, so adding draws in one model never shifts
//! another's, and a replay with the same seed draws the same numbers.

/// A splitmix64 stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SplitMix64(pub u64);

/// splitmix64's finaliser: scrambles a state into a draw (0 stays 0).
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl SplitMix64 {
    /// A stream for one model, from the replay's `seed` and the model's
    /// own constant: seed 0 starts at `stream` itself, and other seeds
    /// are scrambled first, so seeds 1, 2, ... are not neighbours.
    pub fn seeded(stream: u64, seed: u64) -> SplitMix64 {
        SplitMix64(stream ^ mix(seed))
    }

    /// The next draw, uniform in [0, 1].
    pub fn next_f64(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix(self.0) as f64 / u64::MAX as f64
    }
}

#[cfg(test)]
mod tests {
    use super::SplitMix64;

    #[test]
    fn seed_zero_is_the_models_own_stream_and_other_seeds_differ() {
        assert_eq!(SplitMix64::seeded(42, 0), SplitMix64(42));
        let draws = |seed| {
            let mut r = SplitMix64::seeded(42, seed);
            (0..4).map(|_| r.next_f64()).collect::<Vec<_>>()
        };
        assert_eq!(draws(1), draws(1));
        assert_ne!(draws(1), draws(2));
        assert_ne!(draws(0), draws(1));
    }
}
