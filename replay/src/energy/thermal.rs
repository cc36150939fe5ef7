//! Per-core RC thermal model with a shared heat-sink node.
//!
//! Each core is a thermal capacitance `c_core` (J/K) joined to the heat
//! sink by a resistance `r_core` (K/W); the sink (`c_sink`) is joined to
//! ambient by `r_sink`. Power enters at the cores. The state is integrated
//! with explicit Euler sub-steps no longer than a quarter of the smallest
//! time constant, which keeps it stable whatever step the caller takes.

/// Parameters of the thermal network.
#[derive(Clone, Debug, PartialEq)]
pub struct ThermalParams {
    /// Ambient temperature, °C.
    pub ambient_c: f64,
    /// Core-to-sink resistance, K/W.
    pub r_core: f64,
    /// Core heat capacity, J/K.
    pub c_core: f64,
    /// Sink-to-ambient resistance, K/W.
    pub r_sink: f64,
    /// Sink heat capacity, J/K.
    pub c_sink: f64,
}

impl Default for ThermalParams {
    /// Desktop-class defaults: a few-ms core time constant, a sink that
    /// filters changes shorter than seconds (Klee 2007 notes the heat-sink
    /// capacitance filters power changes lasting a few timeslices).
    fn default() -> Self {
        ThermalParams {
            ambient_c: 25.0,
            r_core: 0.8,
            c_core: 0.01,
            r_sink: 0.3,
            c_sink: 40.0,
        }
    }
}

/// Temperatures of the cores and the sink.
#[derive(Clone, Debug)]
pub struct ThermalModel {
    p: ThermalParams,
    core_c: Vec<f64>,
    sink_c: f64,
}

impl ThermalModel {
    /// All nodes start at ambient.
    pub fn new(cores: usize, p: ThermalParams) -> Self {
        ThermalModel {
            core_c: vec![p.ambient_c; cores],
            sink_c: p.ambient_c,
            p,
        }
    }

    /// Core temperatures, °C.
    pub fn cores_c(&self) -> &[f64] {
        &self.core_c
    }

    /// Heat-sink temperature, °C.
    pub fn sink_c(&self) -> f64 {
        self.sink_c
    }

    /// Advance by `dt_s` seconds with `power_w[i]` into core `i`.
    pub fn step(&mut self, power_w: &[f64], dt_s: f64) {
        if dt_s <= 0.0 {
            return;
        }
        let tau = (self.p.r_core * self.p.c_core).min(self.p.r_sink * self.p.c_sink);
        let n = ((dt_s / (tau / 4.0)).ceil() as usize).max(1);
        let h = dt_s / n as f64;
        for _ in 0..n {
            let mut into_sink = 0.0;
            for (i, t) in self.core_c.iter_mut().enumerate() {
                let p = power_w.get(i).copied().unwrap_or(0.0);
                let out = (*t - self.sink_c) / self.p.r_core;
                into_sink += out;
                *t += h * (p - out) / self.p.c_core;
            }
            let out = (self.sink_c - self.p.ambient_c) / self.p.r_sink;
            self.sink_c += h * (into_sink - out) / self.p.c_sink;
        }
    }

    /// The steady state for constant `power_w` (closed form), for checks.
    pub fn steady_state(&self, power_w: &[f64]) -> (Vec<f64>, f64) {
        let total: f64 = power_w.iter().sum();
        let sink = self.p.ambient_c + total * self.p.r_sink;
        (
            power_w.iter().map(|p| sink + p * self.p.r_core).collect(),
            sink,
        )
    }
}

/// A run's heat, core by core: the hottest each got and how long it was
/// above the throttle point.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ThermalProfile {
    /// Each core's highest temperature, °C.
    pub peak_c: Vec<f64>,
    /// Each core's time above `throttle_c`, ns.
    pub hot_ns: Vec<i64>,
}

/// The thermal model driven by a run's CPU slices: slice `i` ran on core
/// `cpu[i]` over `[start[i], end[i])` drawing `watts[i]`; a core draws
/// `idle_w` when nothing runs. Power is averaged over `bin_ns` bins from
/// `t0` to `t1` (the model's core time constant is a few ms: 1 ms bins
/// keep its peaks), each bin a step.
#[allow(clippy::too_many_arguments)]
pub fn profile(
    cpu: &[u32],
    start: &[i64],
    end: &[i64],
    watts: &[f64],
    idle_w: f64,
    cores: usize,
    t0: i64,
    t1: i64,
    bin_ns: i64,
    params: ThermalParams,
    throttle_c: f64,
) -> ThermalProfile {
    let bin = bin_ns.max(1);
    let bins = ((t1 - t0).max(0) + bin - 1) / bin;
    let mut busy_j = vec![vec![0.0f64; bins as usize]; cores];
    let mut busy_ns = vec![vec![0i64; bins as usize]; cores];
    for i in 0..cpu.len() {
        let c = cpu[i] as usize;
        if c >= cores {
            continue;
        }
        let (mut a, b) = (start[i].max(t0), end[i].min(t1));
        while a < b {
            let k = (a - t0) / bin;
            let edge = (t0 + (k + 1) * bin).min(b);
            busy_j[c][k as usize] += (edge - a) as f64 * watts[i] * 1e-9;
            busy_ns[c][k as usize] += edge - a;
            a = edge;
        }
    }
    let mut model = ThermalModel::new(cores, params);
    let mut out = ThermalProfile {
        peak_c: model.cores_c().to_vec(),
        hot_ns: vec![0; cores],
    };
    let mut power = vec![0.0; cores];
    for k in 0..bins as usize {
        let len = (t1 - (t0 + k as i64 * bin)).min(bin);
        for c in 0..cores {
            let idle = (len - busy_ns[c][k]).max(0) as f64 * idle_w * 1e-9;
            power[c] = (busy_j[c][k] + idle) / (len as f64 * 1e-9);
        }
        model.step(&power, len as f64 * 1e-9);
        for (c, &t) in model.cores_c().iter().enumerate() {
            out.peak_c[c] = out.peak_c[c].max(t);
            if t > throttle_c {
                out.hot_ns[c] += len;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converges_to_the_closed_form_steady_state() {
        let p = ThermalParams {
            c_sink: 2.0,
            ..Default::default()
        };
        let mut m = ThermalModel::new(2, p);
        let power = [20.0, 5.0];
        for _ in 0..400 {
            m.step(&power, 0.1); // 40 s ≫ r_sink·c_sink = 0.6 s
        }
        let (cores, sink) = m.steady_state(&power);
        assert!(
            (m.sink_c() - sink).abs() < 1e-3,
            "{} vs {}",
            m.sink_c(),
            sink
        );
        for (got, want) in m.cores_c().iter().zip(&cores) {
            assert!((got - want).abs() < 1e-3);
        }
        // the hot core is hotter by exactly Δp · r_core
        assert!(((m.cores_c()[0] - m.cores_c()[1]) - 15.0 * 0.8).abs() < 1e-3);
    }

    #[test]
    fn a_profile_of_a_hot_and_a_cold_core_heats_the_hot_one_only() {
        // core 0 runs 20 W for 2 s, core 1 idles at 0.5 W: core 0 ends
        // near its steady state (sink heated by both), core 1 near the sink
        let p = ThermalParams {
            c_sink: 0.5,
            ..Default::default()
        };
        let prof = profile(
            &[0],
            &[0],
            &[2_000_000_000],
            &[20.0],
            0.5,
            2,
            0,
            2_000_000_000,
            1_000_000,
            p.clone(),
            40.0,
        );
        let (steady, _) = ThermalModel::new(2, p).steady_state(&[20.0, 0.5]);
        assert!(
            (prof.peak_c[0] - steady[0]).abs() < 0.5,
            "{:?} vs {steady:?}",
            prof.peak_c
        );
        assert!(prof.peak_c[1] < steady[0] - 10.0);
        // above 40 °C after its core time constant and the sink's rise
        assert!(
            prof.hot_ns[0] > 1_000_000_000 && prof.hot_ns[1] == 0,
            "{:?}",
            prof.hot_ns
        );
    }

    #[test]
    fn no_power_stays_at_ambient_and_large_steps_are_stable() {
        let mut m = ThermalModel::new(3, ThermalParams::default());
        m.step(&[0.0; 3], 10.0);
        assert!(m.cores_c().iter().all(|t| (t - 25.0).abs() < 1e-12));
        m.step(&[100.0, 0.0, 0.0], 1.0);
        assert!(m
            .cores_c()
            .iter()
            .all(|t| t.is_finite() && *t >= 25.0 - 1e-9));
    }
}
