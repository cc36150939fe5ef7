//! Placements: the energy/thermal balancer that swaps pinned vCPUs
//! between cores (Klee 2007), the fast/slow core pools of asymmetric
//! scheduling (Takouna et al.), with the per-core power they account, and
//! the recorded placement (each stretch of work where the capture ran it).

use super::{demand_features, vcpus_per_vm, Engine, Ev, St};
use crate::asymmetric::{
    assign_pools, classify, ClassifierThresholds, Pool, PoolCandidate, VcpuClass,
};
use crate::energy::balance::{plan_swaps, EnergyWindow, Window};
use crate::energy::thermal::ThermalModel;
use crate::model::{Phase, ThreadId};
use crate::sched::Sub;

/// State of the energy/thermal balancer (Klee 2007; `energy::balance`).
/// Energy is charged per running thread (its own power), so swapping a
/// hot vCPU with a cold one moves energy between cores; a decided swap
/// waits until both vCPUs are at a point where they may be swapped (off
/// the CPU, or at their next exit), and costs what a move to another CPU
/// costs (the cache refill, `migration_ns`) plus `swap_cost_ns`.
pub(super) struct Balancer {
    period: i64,
    pub(super) period_start: i64,
    pub(super) busy: Vec<i64>,
    /// Energy (J) of the runs that ended on each core this period.
    pub(super) energy_j: Vec<f64>,
    /// Each thread's energy (J) this period, and in the last one: which
    /// vCPU is hot and which cold.
    pub(super) thread_j: Vec<f64>,
    last_thread_j: Vec<f64>,
    window: EnergyWindow,
    thermal: ThermalModel,
    k: f64,
    force_period: Option<i64>,
    next_forced: i64,
    swap_cost: i64,
    safe_point: i64,
    /// Decided swaps not yet realised: (the hot core's hottest vCPU, the
    /// cool core's coldest, decided at).
    pending: Vec<(u32, u32, i64)>,
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
        let window = match (p.params.balance_window as usize, p.params.balance_decay) {
            (_, d) if d > 0.0 => Window::Exponential(d),
            (0, _) => Window::Cumulative,
            (c, _) => Window::Sliding(c),
        };
        let hz = p.params.force_swap_hz;
        let period = (p.params.balance_period_ns as i64).max(1000);
        self.bal = Some(Balancer {
            period,
            period_start: 0,
            busy: vec![0; n],
            window: EnergyWindow::new(n, window),
            thermal: ThermalModel::new(n, p.thermal()),
            k: p.params.balance_k.max(1.0 + 1e-9),
            force_period: (hz > 0.0).then(|| (1e9 / hz) as i64),
            next_forced: if hz > 0.0 { (1e9 / hz) as i64 } else { 0 },
            swap_cost: p.params.swap_cost_ns as i64,
            safe_point: (p.params.safe_point_ns as i64).max(1),
            energy_j: vec![0.0; n],
            thread_j: vec![0.0; self.th.len()],
            last_thread_j: vec![0.0; self.th.len()],
            pending: Vec::new(),
        });
        self.at(period, Ev::Balance);
    }

    /// Fast and slow pools: the first `fast_cores` cores are fast (their
    /// frequency and voltage), the rest slow; vCPUs as `assign_pools` says.
    pub(super) fn start_pools(&mut self) {
        let n = self.cpus.len();
        let fast = match self.p.params.fast_cores as usize {
            0 => n.div_ceil(2),
            k => k.min(n),
        };
        let (fk, sk) = (self.p.params.fast_khz as u64, self.p.params.slow_khz as u64);
        let (fv, sv) = (self.p.params.fast_volt, self.p.params.slow_volt);
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
    /// rule itself is `asymmetric::assign_pools`. A vCPU's pool is its
    /// affinity: the pinning the capture recorded (host.json, a generated
    /// capture's round-robin pins) is replaced, as the paper pins VMs to
    /// their pool; a recorded pin outside the pool left the vCPU with no
    /// CPU at all, and it never ran.
    fn assign_pools(&mut self, fast: usize) {
        let thresholds = ClassifierThresholds {
            min_cpu_utilisation: self.p.params.cpu_class_util,
            max_cpu_blocks_per_s: self.p.params.io_block_hz,
            ..ClassifierThresholds::default()
        };
        let vcpus_of = vcpus_per_vm(self.w);
        let (fk, sk) = (self.p.params.fast_khz as u64, self.p.params.slow_khz as u64);
        let mut idx = Vec::new();
        let mut vcpus = Vec::new();
        self.out.vcpu_class = vec![-1; self.w.threads.len()];
        for (i, t) in self.w.threads.iter().enumerate() {
            let Some(v) = t.vm else { continue };
            let features = demand_features(self.demand[i].ahead());
            let class = match self.w.vms[v.0 as usize].cpu_intensive {
                Some(true) => VcpuClass::Cpu,
                Some(false) => VcpuClass::Io,
                None => classify(&features, &thresholds),
            };
            let e = self.w.vms[v.0 as usize]
                .elasticity
                .unwrap_or(self.h.elasticity);
            idx.push(i);
            self.out.vcpu_class[i] = if class == VcpuClass::Cpu { 0 } else { 1 };
            vcpus.push(PoolCandidate {
                class,
                multi_vcpu_vm: vcpus_of[v.0 as usize] > 1,
                load: features.utilisation,
                fast_rate: self.h.rate_at(fk, e),
                slow_rate: self.h.rate_at(sk, e),
            });
        }
        let pools = assign_pools(
            &vcpus,
            fast,
            self.cpus.len() - fast,
            self.p.params.spill_slow > 0.0,
        );
        for (i, pool) in idx.into_iter().zip(pools) {
            self.pool[i] = Some(if pool == Pool::Fast { 0 } else { 1 });
            if self.pin[i].take().is_some() | self.allowed[i].take().is_some() {
                self.out.affinity_replaced += 1;
            }
        }
    }

    /// Busy time, frequency, voltage and energy of each core over the run,
    /// from the power model (busy: static + C·f·V²; idle: `idle_w`).
    pub(super) fn core_energy(&mut self, end: i64) {
        let n = self.cpus.len();
        let mut busy = vec![0i64; n];
        let mut busy_j = vec![0.0f64; n];
        let watts: Vec<f64> = (0..self.out.slice_cpu.len())
            .map(|i| self.thread_busy_w(self.out.slice_thread[i], self.out.slice_cpu[i] as usize))
            .collect();
        for (i, &c) in self.out.slice_cpu.iter().enumerate() {
            let ns = self.out.slice_end[i].min(end) - self.out.slice_start[i];
            busy[c as usize] += ns;
            // each run at its own thread's power
            busy_j[c as usize] += ns as f64 * watts[i] * 1e-9;
        }
        // every policy's heat, from the same runs at the same powers
        let prof = crate::energy::thermal::profile(
            &self.out.slice_cpu,
            &self.out.slice_start,
            &self.out.slice_end,
            &watts,
            self.p.params.idle_w,
            n,
            0,
            end,
            1_000_000,
            self.p.thermal(),
            self.p.params.throttle_c,
        );
        self.out.core_peak_c = prof.peak_c;
        self.out.core_hot_ns = prof.hot_ns;
        let idle_w = self.p.params.idle_w;
        self.out.core_khz = self.freq.clone();
        self.out.core_volt = self.volt.clone();
        self.out.core_dynamic_w = (0..n).map(|c| self.dynamic_w(c)).collect();
        self.out.core_energy_j = (0..n)
            .map(|c| busy_j[c] + (end - busy[c]).max(0) as f64 * idle_w * 1e-9)
            .collect();
        self.out.core_busy_ns = busy;
    }

    /// Dynamic power of core `c` while busy: C·f·V² (f in GHz).
    fn dynamic_w(&self, c: usize) -> f64 {
        let (ghz, v) = (self.freq[c] as f64 / 1e6, self.volt[c]);
        self.p.params.capacitance * ghz * v * v
    }

    fn busy_w(&self, c: usize) -> f64 {
        self.p.params.static_w + self.dynamic_w(c)
    }

    /// Thread `t`'s power on core `c` (W): its own when known, its
    /// dynamic part scaled as C·f·V² scales from the recorded frequency
    /// and the host's voltage to the core's; else the core's.
    pub(super) fn thread_busy_w(&self, t: u32, c: usize) -> f64 {
        match self.w.threads[t as usize].power_w {
            Some(w) => {
                let stat = self.p.params.static_w;
                let f = self.freq[c] as f64 / self.h.recorded_khz.max(1) as f64;
                let v = self.volt[c] / self.p.params.volt.max(1e-9);
                stat + (w - stat).max(0.0) * f * v * v
            }
            None => self.busy_w(c),
        }
    }

    /// End of an accounting period: energy per core, the swap decision,
    /// realisation of decided swaps.
    pub(super) fn balance(&mut self) {
        let n = self.cpus.len();
        let now = self.now;
        // the running threads' time so far, at their own power
        let running: Vec<Option<(u32, i64, f64)>> = (0..n)
            .map(|c| {
                self.cpus[c].cur.map(|t| {
                    (
                        t,
                        self.th[t as usize].dispatched_at,
                        self.thread_busy_w(t, c),
                    )
                })
            })
            .collect();
        let idle_w = self.p.params.idle_w;
        let mut e = vec![0.0; n];
        let temps: Vec<f64>;
        {
            let b = self.bal.as_mut().expect("balancer");
            let len = (now - b.period_start).max(1);
            for c in 0..n {
                let (mut busy, mut busy_j) = (b.busy[c], b.energy_j[c]);
                if let Some((t, rs, w)) = running[c] {
                    let ran = (now - rs.max(b.period_start)).max(0);
                    busy += ran;
                    busy_j += ran as f64 * w * 1e-9;
                    b.thread_j[t as usize] += ran as f64 * w * 1e-9;
                }
                let busy = busy.min(len);
                e[c] = busy_j + (len - busy) as f64 * idle_w * 1e-9;
                b.busy[c] = 0;
                b.energy_j[c] = 0.0;
            }
            b.period_start = now;
            b.last_thread_j = std::mem::replace(&mut b.thread_j, vec![0.0; b.last_thread_j.len()]);
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
            d
        };
        // each decided pair of cores: the hotter core's hottest vCPU and
        // the cooler's coldest change places (Klee: the vCPU drawing the
        // most with the one drawing the least)
        for &(i, j) in &decided {
            let (hot, cool) = if e[i] >= e[j] { (i, j) } else { (j, i) };
            let (Some(a), Some(c)) = (
                self.pinned_by_energy(hot, true),
                self.pinned_by_energy(cool, false),
            ) else {
                continue;
            };
            let b = self.bal.as_mut().expect("balancer");
            if !b
                .pending
                .iter()
                .any(|&(x, y, _)| [x, y].contains(&a) || [x, y].contains(&c))
            {
                b.pending.push((a, c, now));
            }
        }
        self.out.swaps_decided += decided.len() as u64;
        self.realise_swaps();
        let b = self.bal.as_ref().expect("balancer");
        let period = b.period;
        self.at(now + period, Ev::Balance);
    }

    /// The vCPU pinned to `core` that drew the most (`hottest`) or the
    /// least energy in the last period (the lowest index on a tie).
    fn pinned_by_energy(&self, core: usize, hottest: bool) -> Option<u32> {
        let b = self.bal.as_ref()?;
        let on = (0..self.pin.len())
            .filter(|&t| self.pin[t] == Some(core as u32) && self.w.threads[t].vm.is_some());
        let key = |t: &usize| b.last_thread_j[*t];
        let pick = if hottest {
            on.max_by(|x, y| key(x).total_cmp(&key(y)).then(y.cmp(x)))
        } else {
            on.min_by(|x, y| key(x).total_cmp(&key(y)).then(x.cmp(y)))
        };
        pick.map(|t| t as u32)
    }

    /// When vCPU `t` first reached a point where it may be swapped since
    /// `at`: at once if it has been off the CPU since (it is off now, or
    /// was dispatched again after `at`), else at its first exit after `at`
    /// (exits every `safe_point_ns` from its dispatch).
    fn safe_since(&self, t: u32, at: i64) -> i64 {
        let sp = self.bal.as_ref().map_or(1, |b| b.safe_point);
        let th = &self.th[t as usize];
        match th.st {
            St::Running(_) if th.dispatched_at < at => {
                let since = at - th.dispatched_at;
                at + (sp - since.rem_euclid(sp)) % sp
            }
            _ => at,
        }
    }

    /// Realise the pending swaps whose two vCPUs have both reached a point
    /// where they may be swapped since the decision; for the others, come
    /// back when both will have.
    pub(super) fn realise_swaps(&mut self) {
        let Some(b) = self.bal.as_mut() else { return };
        let pending = std::mem::take(&mut b.pending);
        let mut keep = Vec::new();
        let mut wake = None;
        for (i, j, at) in pending {
            let ready = self.safe_since(i, at).max(self.safe_since(j, at));
            if ready <= self.now {
                self.swap_vcpus(i, j);
                self.out.swaps_realised += 1;
                self.out.swap_latency_ns.push(self.now - at);
            } else {
                keep.push((i, j, at));
                wake = Some(wake.map_or(ready, |w: i64| w.min(ready)));
            }
        }
        self.bal.as_mut().expect("balancer").pending = keep;
        if let Some(w) = wake {
            self.at(w, Ev::SwapCheck);
        }
    }

    /// Exchange the cores of vCPUs `x` and `y`; each pays the swap
    /// mechanism's cost (`swap_cost_ns`) and, at its next dispatch, the
    /// move's (`migration_ns`).
    fn swap_vcpus(&mut self, x: u32, y: u32) {
        let cost = self.bal.as_ref().map_or(0, |b| b.swap_cost);
        let (px, py) = (self.pin[x as usize], self.pin[y as usize]);
        for (t, new) in [(x as usize, py), (y as usize, px)] {
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
                Phase::Work(_) => Some(cpu.get()),
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
