//! TSC cycles to nanoseconds.

/// TSC cycles to nanoseconds at a fixed frequency, rounded to the
/// nearest: `ns = tsc * (1e9 / hz)` with the factor held as an integer
/// part and a 64-bit binary fraction, so a record costs integer
/// multiplications (a float division and conversion per record were a
/// tenth of the reader's time). When `hz` is a whole number of Hz (what
/// `xl info` and host.json give) the factor is within 2^-65 of exact, so
/// the product is within a nanosecond of the exact value, and a check in
/// 128-bit integers makes it the exact value rounded half up (a proptest
/// found a TSC where the product alone was 1 ns off); otherwise it is as
/// precise as a double.
pub(super) struct TscToNs {
    whole: u64,
    frac: u64,
    /// the frequency, when a whole number of Hz: the exactness check's
    exact_hz: Option<u64>,
}

impl TscToNs {
    pub(super) fn new(hz: f64) -> Self {
        if hz.fract() == 0.0 && hz >= 1.0 && hz < 2f64.powi(63) {
            let hz = hz as u128;
            let whole = 1_000_000_000u128 / hz;
            let rest = 1_000_000_000u128 % hz;
            // rest / hz as a 64-bit fraction, rounded (rest < hz < 2^63)
            let frac = ((rest << 64) + hz / 2) / hz;
            // the rounding can carry into the whole part
            let (whole, frac) = if frac >> 64 != 0 {
                (whole + 1, 0)
            } else {
                (whole, frac as u64)
            };
            TscToNs {
                whole: whole as u64,
                frac,
                exact_hz: Some(hz as u64),
            }
        } else {
            let whole = (1e9 / hz).trunc();
            // the remainder 1e9 - whole * hz, rounded once (fused)
            let rest = (-whole).mul_add(hz, 1e9).max(0.0);
            TscToNs {
                whole: whole as u64,
                frac: (rest / hz * 2f64.powi(64)) as u64,
                exact_hz: None,
            }
        }
    }

    #[inline]
    pub(super) fn ns(&self, tsc: u64) -> i64 {
        let rounded = tsc as u128 * self.frac as u128 + (1 << 63);
        let part = (rounded >> 64) as u64;
        let q = tsc.wrapping_mul(self.whole).wrapping_add(part);
        let Some(hz) = self.exact_hz else {
            return q as i64;
        };
        // `frac` is within half a unit of the exact fraction (in 2^-64),
        // so the product is within tsc / 2 units of the exact one: unless
        // the part cut off (the residue) is that close to a rounding
        // boundary, q is already exact. Nearly every TSC leaves here,
        // without the 128-bit check below (a tenth of the reader's
        // instructions when every record took it).
        let residue = rounded as u64;
        let margin = (tsc >> 1) + 1;
        if residue > margin && residue < u64::MAX - margin {
            return q as i64;
        }
        // q is within 1 of floor((2·tsc·1e9 + hz) / (2·hz)); make it that
        // (all products < 2^110)
        let t = tsc as u128 * 2_000_000_000 + hz as u128;
        let d = 2 * hz as u128;
        let q = q as u128;
        let q = if q * d > t {
            q - 1
        } else if (q + 1) * d <= t {
            q + 1
        } else {
            q
        };
        q as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The exact rounded value of tsc * 1e9 / hz, for whole hz.
    fn exact(tsc: u64, hz: u64) -> i64 {
        ((tsc as u128 * 1_000_000_000 * 2 + hz as u128) / (2 * hz as u128)) as i64
    }

    #[test]
    fn tsc_to_ns_at_common_frequencies() {
        for hz in [
            2_400_000_000u64,
            2_394_458_000,
            3_000_000_000,
            1_000_000_000,
            1_500_000,
        ] {
            let c = TscToNs::new(hz as f64);
            for tsc in [
                0,
                1,
                999,
                1_000,
                3_000,
                2_400_000_000,
                1 << 40,
                1 << 50,
                (1 << 52) + 7,
            ] {
                assert_eq!(c.ns(tsc), exact(tsc, hz), "tsc {tsc} at {hz} Hz");
            }
        }
        // where the multiply alone was 1 ns off (found by the proptest below)
        for (tsc, hz) in [
            (16_992_516_567_171_789u64, 6_289_222_859u64),
            (4_220_929_263_542_164, 901_794_698),
        ] {
            assert_eq!(TscToNs::new(hz as f64).ns(tsc), exact(tsc, hz));
        }
    }

    proptest! {
        // frequencies where a TSC converts to exactly half a nanosecond
        // and beyond: the residue sits on the rounding boundary, where
        // the exact check must decide
        #[test]
        fn halves_round_up_exactly(k in 0u64..1 << 52, hz in prop::sample::select(vec![2_000_000_000u64, 4_000_000_000, 400_000_000, 2_000_000_002])) {
            let tsc = 2 * k + 1;
            prop_assert_eq!(TscToNs::new(hz as f64).ns(tsc), exact(tsc, hz));
            prop_assert_eq!(TscToNs::new(hz as f64).ns(tsc - 1), exact(tsc - 1, hz));
        }

        #[test]
        fn tsc_to_ns_is_the_rounded_exact_value(tsc in 0u64..1 << 54, hz in 1_000_000u64..10_000_000_000) {
            // the multiply can be 1 ns off where the exact value sits near a
            // half; the 128-bit check must always correct it
            prop_assert_eq!(TscToNs::new(hz as f64).ns(tsc), exact(tsc, hz));
        }

        #[test]
        fn fractional_frequencies_agree_with_double_arithmetic(tsc in 0u64..1 << 50, hz in 1e6f64..1e10) {
            // the double formula is itself only as exact as its last bits
            let x = tsc as f64 * 1e9 / hz;
            let slack = 1.0 + x * 4e-16;
            prop_assert!((TscToNs::new(hz).ns(tsc) as f64 - x).abs() <= slack);
        }
    }
}
