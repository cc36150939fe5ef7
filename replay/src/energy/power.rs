//! Per-core power: static + dynamic at the operating point + idle states.
//!
//! Dynamic power defaults to `C·f·V²` (the model of Takouna et al.; see
//! ../shared/papers/asym.md §2.2) with `C` in watts per (GHz·V²); a table
//! may instead give watts per OPP directly (measured on real hardware).
//! Frequencies between OPPs use the next OPP up, as cpufreq would.

/// One operating performance point.
#[derive(Clone, Debug, PartialEq)]
pub struct Opp {
    /// Frequency in kHz (cpufreq's unit).
    pub freq_khz: u64,
    /// Supply voltage in volts.
    pub volt: f64,
    /// Dynamic power in watts at this OPP, if measured; else C·f·V².
    pub dynamic_w: Option<f64>,
}

/// Power model of one core.
#[derive(Clone, Debug, PartialEq)]
pub struct CorePower {
    /// Operating points, any order (sorted on construction).
    opps: Vec<Opp>,
    /// Effective switched capacitance, W / (GHz · V²).
    pub capacitance: f64,
    /// Static (leakage) power while powered, W: drawn busy or idle in a
    /// shallow state.
    pub static_w: f64,
    /// Power in each idle state, W, replacing static+dynamic while idle;
    /// index = cpuidle state. Deeper states draw less.
    pub idle_w: Vec<f64>,
}

/// Errors building a model from user parameters.
#[derive(Clone, Debug, PartialEq)]
pub enum PowerModelError {
    /// No operating points were given.
    NoOpps,
    /// A value is negative or not finite.
    BadValue(&'static str, f64),
}

impl std::fmt::Display for PowerModelError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PowerModelError::NoOpps => write!(f, "power model: no operating points given"),
            PowerModelError::BadValue(what, v) => {
                write!(f, "power model: {what} must be finite and >= 0, got {v}")
            }
        }
    }
}

impl std::error::Error for PowerModelError {}

fn check(what: &'static str, v: f64) -> Result<(), PowerModelError> {
    if v.is_finite() && v >= 0.0 {
        Ok(())
    } else {
        Err(PowerModelError::BadValue(what, v))
    }
}

impl CorePower {
    /// A model from operating points and the other constants.
    pub fn new(
        mut opps: Vec<Opp>,
        capacitance: f64,
        static_w: f64,
        idle_w: Vec<f64>,
    ) -> Result<Self, PowerModelError> {
        if opps.is_empty() {
            return Err(PowerModelError::NoOpps);
        }
        check("capacitance", capacitance)?;
        check("static_w", static_w)?;
        for o in &opps {
            check("opp voltage", o.volt)?;
            if let Some(w) = o.dynamic_w {
                check("opp dynamic_w", w)?;
            }
        }
        for &w in &idle_w {
            check("idle_w", w)?;
        }
        opps.sort_by_key(|o| o.freq_khz);
        Ok(CorePower {
            opps,
            capacitance,
            static_w,
            idle_w,
        })
    }

    /// The operating points, sorted by frequency.
    pub fn opps(&self) -> &[Opp] {
        &self.opps
    }

    /// The OPP in force at `freq_khz`: the lowest OPP at or above it (the
    /// highest if `freq_khz` exceeds them all).
    pub fn opp_at(&self, freq_khz: u64) -> &Opp {
        self.opps
            .iter()
            .find(|o| o.freq_khz >= freq_khz)
            .unwrap_or_else(|| self.opps.last().expect("non-empty by construction"))
    }

    /// Dynamic power (W) while busy at `freq_khz`.
    pub fn dynamic_w(&self, freq_khz: u64) -> f64 {
        let opp = self.opp_at(freq_khz);
        match opp.dynamic_w {
            Some(w) => w,
            None => self.capacitance * (opp.freq_khz as f64 / 1e6) * opp.volt * opp.volt,
        }
    }

    /// Total power (W) while busy at `freq_khz`.
    pub fn busy_w(&self, freq_khz: u64) -> f64 {
        self.static_w + self.dynamic_w(freq_khz)
    }

    /// Power (W) while idle in `state` (None = not in any cpuidle state:
    /// polling, static power only). States past the table use the deepest.
    pub fn idle_power_w(&self, state: Option<usize>) -> f64 {
        match state {
            None => self.static_w,
            Some(_) if self.idle_w.is_empty() => self.static_w,
            Some(s) => self.idle_w[s.min(self.idle_w.len() - 1)],
        }
    }
}

/// Dynamic-power saving of a heterogeneous host against a homogeneous one,
/// both fully busy: `1 - P_het / P_hom`, each a list of (GHz, V) per core.
pub fn dynamic_saving(homogeneous: &[(f64, f64)], heterogeneous: &[(f64, f64)]) -> f64 {
    let p = |cores: &[(f64, f64)]| cores.iter().map(|(f, v)| f * v * v).sum::<f64>();
    1.0 - p(heterogeneous) / p(homogeneous)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opp(mhz: u64, volt: f64) -> Opp {
        Opp {
            freq_khz: mhz * 1000,
            volt,
            dynamic_w: None,
        }
    }

    #[test]
    fn cfv2_at_each_opp_and_next_opp_up_between() {
        let m = CorePower::new(vec![opp(2790, 1.40), opp(1330, 0.65)], 2.0, 0.0, vec![]).unwrap();
        assert!((m.dynamic_w(2_790_000) - 2.0 * 2.79 * 1.96).abs() < 1e-12);
        assert!((m.dynamic_w(1_330_000) - 2.0 * 1.33 * 0.4225).abs() < 1e-12);
        // 2 GHz is not an OPP: cpufreq would run the 2.79 GHz one.
        assert_eq!(m.dynamic_w(2_000_000), m.dynamic_w(2_790_000));
        assert_eq!(m.dynamic_w(9_000_000), m.dynamic_w(2_790_000));
    }

    #[test]
    fn published_heterogeneous_saving_is_44_9_percent() {
        // Takouna et al.: 4 cores at 2.79 GHz/1.40 V against 2 of those plus
        // 2 at 1.33 GHz/0.65 V; the paper states 45%, asym.md derives 44.9%.
        let hom = [(2.79, 1.40); 4];
        let het = [(2.79, 1.40), (2.79, 1.40), (1.33, 0.65), (1.33, 0.65)];
        let s = dynamic_saving(&hom, &het);
        assert!((s * 100.0 - 44.9).abs() < 0.05, "saving {s}");
    }

    #[test]
    fn measured_watts_override_cfv2_and_idle_uses_deepest_known_state() {
        let m = CorePower::new(
            vec![Opp {
                freq_khz: 1_000_000,
                volt: 1.0,
                dynamic_w: Some(3.5),
            }],
            100.0,
            0.5,
            vec![0.4, 0.1],
        )
        .unwrap();
        assert_eq!(m.busy_w(1_000_000), 4.0);
        assert_eq!(m.idle_power_w(None), 0.5);
        assert_eq!(m.idle_power_w(Some(1)), 0.1);
        assert_eq!(m.idle_power_w(Some(7)), 0.1);
    }

    #[test]
    fn rejects_empty_and_negative_parameters() {
        assert_eq!(
            CorePower::new(vec![], 1.0, 0.0, vec![]),
            Err(PowerModelError::NoOpps)
        );
        assert!(CorePower::new(vec![opp(1000, 1.0)], -1.0, 0.0, vec![]).is_err());
        assert!(CorePower::new(vec![opp(1000, 1.0)], 1.0, f64::NAN, vec![]).is_err());
    }
}
