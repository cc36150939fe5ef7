//! Placements: the energy/thermal balancer that swaps pinned vCPUs
//! between cores (Klee 2007), the fast/slow core pools of asymmetric
//! scheduling (Takouna et al.), with the per-core power they account, and
//! the recorded placement (each stretch of work where the capture ran it).

use super::{demand_features, vcpus_per_vm, Engine, Ev, St};
use crate::asymmetric::{assign_pools, classify, ClassifierThresholds, Pool, VcpuClass};
use crate::energy::balance::{plan_swaps, EnergyWindow, Window};
use crate::energy::thermal::{ThermalModel, ThermalParams};
use crate::model::{Phase, ThreadId};
use crate::rng::SplitMix64;
use crate::sched::Sub;

/// State of the energy/thermal balancer (Klee 2007; `energy::balance`).
pub(super) struct Balancer {
    period: i64,
    pub(super) period_start: i64,
    pub(super) busy: Vec<i64>,
    window: EnergyWindow,
    thermal: ThermalModel,
    k: f64,
    force_period: Option<i64>,
    next_forced: i64,
    swap_cost: i64,
    realise_p: f64,
    pub(super) mechanism_overhead: f64,
    rng: SplitMix64,
    pending: Vec<(usize, usize)>,
}

impl Balancer {
    /// Its own stream, so balancing never shifts other draws.
    fn draw(&mut self) -> f64 {
        self.rng.next_f64()
    }
}

impl Engine<'_> {
    pub(super) fn start_balancer(&mut self) {
        let n = self.cpus.len();
        // one vCPU per core to start with, in thread order
        let mut next = 0u32;
        for (i, t) in self.w.threads.iter().enumerate() {
            if t.vm.is_some() {
                self.pin[i] = Some(next % n as u32);
                // per-CPU run queues: the thread's queue follows its core
                self.sched.migrate(ThreadId(i as u32), next % n as u32);
                next += 1;
            }
        }
        let p = self.p;
        let window = match (p.param("balance_window") as usize, p.param("balance_decay")) {
            (_, d) if d > 0.0 => Window::Exponential(d),
            (0, _) => Window::Cumulative,
            (c, _) => Window::Sliding(c),
        };
        let hz = p.param("force_swap_hz");
        let period = (p.param("balance_period_ns") as i64).max(1000);
        self.bal = Some(Balancer {
            period,
            period_start: 0,
            busy: vec![0; n],
            window: EnergyWindow::new(n, window),
            thermal: ThermalModel::new(n, ThermalParams::default()),
            k: p.param("balance_k").max(1.0 + 1e-9),
            force_period: (hz > 0.0).then(|| (1e9 / hz) as i64),
            next_forced: if hz > 0.0 { (1e9 / hz) as i64 } else { 0 },
            swap_cost: p.param("swap_cost_ns") as i64,
            realise_p: p.param("swap_realise_p").clamp(0.0, 1.0),
            mechanism_overhead: p.param("mechanism_overhead").clamp(0.0, 0.99),
            rng: SplitMix64::seeded(0x5EED_0000_0000_0001, p.seed),
            pending: Vec::new(),
        });
        self.at(period, Ev::Balance);
    }

    /// Fast and slow pools: the first `fast_cores` cores are fast (their
    /// frequency and voltage), the rest slow; vCPUs as `assign_pools` says.
    pub(super) fn start_pools(&mut self) {
        let n = self.cpus.len();
        let fast = match self.p.param("fast_cores") as usize {
            0 => n.div_ceil(2),
            k => k.min(n),
        };
        let (fk, sk) = (
            self.p.param("fast_khz") as u64,
            self.p.param("slow_khz") as u64,
        );
        let (fv, sv) = (self.p.param("fast_volt"), self.p.param("slow_volt"));
        for c in 0..n {
            let is_fast = c < fast;
            self.cpu_pool[c] = if is_fast { 0 } else { 1 };
            self.freq[c] = if is_fast { fk } else { sk };
            self.volt[c] = if is_fast { fv } else { sv };
        }
        if fast < n {
            self.assign_pools(fast);
        }
        self.out.core_pool = self.cpu_pool.iter().map(|&p| p as i32).collect();
        self.out.vcpu_pool = self
            .pool
            .iter()
            .map(|p| p.map_or(-1, |x| x as i32))
            .collect();
    }

    /// vCPUs to pools: a label given per VM wins over the classifier; the
    /// rule itself is `asymmetric::assign_pools`.
    fn assign_pools(&mut self, fast: usize) {
        let thresholds = ClassifierThresholds {
            min_cpu_utilisation: self.p.param("cpu_class_util"),
            max_cpu_blocks_per_s: self.p.param("io_block_hz"),
            ..ClassifierThresholds::default()
        };
        let vcpus_of = vcpus_per_vm(self.w);
        let mut idx = Vec::new();
        let mut vcpus = Vec::new();
        for (i, t) in self.w.threads.iter().enumerate() {
            let Some(v) = t.vm else { continue };
            let class = match self.w.vms[v.0 as usize].cpu_intensive {
                Some(true) => VcpuClass::Cpu,
                Some(false) => VcpuClass::Io,
                None => classify(&demand_features(self.demand[i].ahead()), &thresholds),
            };
            idx.push(i);
            vcpus.push((class, vcpus_of[v.0 as usize] > 1));
        }
        let pools = assign_pools(
            &vcpus,
            fast,
            fast < self.cpus.len(),
            self.p.param("spill_slow") > 0.0,
        );
        for (i, pool) in idx.into_iter().zip(pools) {
            self.pool[i] = Some(if pool == Pool::Fast { 0 } else { 1 });
        }
    }

    /// Busy time, frequency, voltage and energy of each core over the run,
    /// from the power model (busy: static + C·f·V²; idle: `idle_w`).
    pub(super) fn core_energy(&mut self, end: i64) {
        let n = self.cpus.len();
        let mut busy = vec![0i64; n];
        for (i, &c) in self.out.slice_cpu.iter().enumerate() {
            busy[c as usize] += self.out.slice_end[i].min(end) - self.out.slice_start[i];
        }
        let idle_w = self.p.param("idle_w");
        self.out.core_khz = self.freq.clone();
        self.out.core_volt = self.volt.clone();
        self.out.core_dynamic_w = (0..n).map(|c| self.dynamic_w(c)).collect();
        self.out.core_energy_j = (0..n)
            .map(|c| {
                (busy[c] as f64 * self.busy_w(c) + (end - busy[c]).max(0) as f64 * idle_w) * 1e-9
            })
            .collect();
        self.out.core_busy_ns = busy;
    }

    /// Dynamic power of core `c` while busy: C·f·V² (f in GHz).
    fn dynamic_w(&self, c: usize) -> f64 {
        let (ghz, v) = (self.freq[c] as f64 / 1e6, self.volt[c]);
        self.p.param("capacitance") * ghz * v * v
    }

    fn busy_w(&self, c: usize) -> f64 {
        self.p.param("static_w") + self.dynamic_w(c)
    }

    /// End of an accounting period: energy per core, the swap decision,
    /// realisation of decided swaps.
    pub(super) fn balance(&mut self) {
        let n = self.cpus.len();
        let now = self.now;
        let running: Vec<Option<i64>> = (0..n)
            .map(|c| self.cpus[c].cur.map(|t| self.th[t as usize].dispatched_at))
            .collect();
        let idle_w = self.p.param("idle_w");
        let busy_w: Vec<f64> = (0..n).map(|c| self.busy_w(c)).collect();
        let mut e = vec![0.0; n];
        let temps: Vec<f64>;
        {
            let b = self.bal.as_mut().expect("balancer");
            let len = (now - b.period_start).max(1);
            for c in 0..n {
                let mut busy = b.busy[c];
                if let Some(rs) = running[c] {
                    busy += (now - rs.max(b.period_start)).max(0);
                }
                let busy = busy.min(len);
                e[c] = (busy as f64 * busy_w[c] + (len - busy) as f64 * idle_w) * 1e-9;
                b.busy[c] = 0;
            }
            b.period_start = now;
            let power: Vec<f64> = e.iter().map(|j| j / (len as f64 * 1e-9)).collect();
            b.thermal.step(&power, len as f64 * 1e-9);
            temps = b.thermal.cores_c().to_vec();
        }
        for c in 0..n {
            self.out.balance_sample(now, c as u32, e[c], temps[c]);
        }
        let decided: Vec<(usize, usize)> = {
            let b = self.bal.as_mut().expect("balancer");
            let d = match b.force_period {
                Some(fp) if now >= b.next_forced => {
                    b.next_forced += fp;
                    (0..n / 2).map(|i| (2 * i, 2 * i + 1)).collect()
                }
                Some(_) => Vec::new(),
                None => plan_swaps(&e, b.window.big_e(), b.k),
            };
            b.window.push(&e);
            for x in &d {
                if !b.pending.contains(x) {
                    b.pending.push(*x);
                }
            }
            d
        };
        self.out.swaps_decided += decided.len() as u64;
        let pending = std::mem::take(&mut self.bal.as_mut().expect("balancer").pending);
        let mut keep = Vec::new();
        for (i, j) in pending {
            let b = self.bal.as_mut().expect("balancer");
            if b.draw() < b.realise_p {
                self.swap_cores(i as u32, j as u32);
                self.out.swaps_realised += 1;
            } else {
                keep.push((i, j));
            }
        }
        let b = self.bal.as_mut().expect("balancer");
        b.pending = keep;
        let period = b.period;
        self.at(now + period, Ev::Balance);
    }

    /// Exchange the vCPUs pinned to cores `a` and `b`; each pays the swap cost.
    fn swap_cores(&mut self, a: u32, b: u32) {
        let cost = self.bal.as_ref().map_or(0, |x| x.swap_cost);
        for t in 0..self.pin.len() {
            let new = match self.pin[t] {
                Some(p) if p == a => Some(b),
                Some(p) if p == b => Some(a),
                other => other,
            };
            if new == self.pin[t] {
                continue;
            }
            self.pin[t] = new;
            if let St::Running(c) = self.th[t].st {
                self.preempt(c, Sub::ProperReady);
                self.at(self.now, Ev::Dispatch(c));
            }
            if let Some(p) = new {
                self.sched.migrate(ThreadId(t as u32), p);
            }
            if self.th[t].remaining > 0 {
                self.th[t].remaining += cost;
            }
            self.out.overhead(cost);
            if self.th[t].st == St::Ready {
                if let Some(p) = self.pin[t] {
                    if self.cpus[p as usize].cur.is_none() {
                        self.at(self.now, Ev::Dispatch(p));
                    }
                }
            }
        }
    }

    /// The CPU the capture ran `t`'s current or next stretch of work on
    /// (None when unknown, or when this host has no such CPU).
    fn recorded_cpu(&self, t: u32) -> Option<u32> {
        let n = self.cpus.len() as u32;
        let (phases, cpus) = self.demand[t as usize].from(self.th[t as usize].phase);
        phases
            .iter()
            .zip(cpus?)
            .find_map(|(ph, cpu)| match ph {
                Phase::Work(_) => Some(*cpu),
                _ => None,
            })
            .flatten()
            .filter(|&c| c < n)
    }

    /// Recorded placement, at a wakeup: `t` is pinned to (and queued on)
    /// the CPU the capture ran its coming work on.
    pub(super) fn follow_recording(&mut self, t: u32) {
        if let Some(cpu) = self.recorded_cpu(t) {
            if self.pin[t as usize] != Some(cpu) {
                self.pin[t as usize] = Some(cpu);
                self.sched.migrate(ThreadId(t), cpu);
            }
        }
    }

    /// Recorded placement, as `t` starts a stretch of work on CPU `c`: if
    /// the capture ran it elsewhere, it moves there (as the kernel moved
    /// it), queued behind what runs there; true if it left `c`.
    pub(super) fn move_to_recorded(&mut self, t: u32, c: u32) -> bool {
        let Some(cpu) = self.recorded_cpu(t) else {
            return false;
        };
        if cpu == c {
            self.pin[t as usize] = Some(cpu);
            return false;
        }
        self.preempt(c, Sub::ProperReady);
        self.pin[t as usize] = Some(cpu);
        self.sched.migrate(ThreadId(t), cpu);
        self.kick_idle_or_preempt(t);
        self.at(self.now, Ev::Dispatch(c));
        true
    }
}
