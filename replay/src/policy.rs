//! Policy names and parameters, validated once (names in errors list the
//! allowed values and the bad one).

/// Which scheduler dispatches threads on pCPUs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SchedulerKind {
    /// CFS-like proportional share (the default; KVM hosts before Linux
    /// 6.6 run CFS).
    Fair,
    /// EEVDF, Linux's fair class from 6.6 on.
    Eevdf,
    /// Xen's credit scheduler.
    Credit,
    /// Round robin: one FIFO, a fixed slice (`rr_slice_ns`), no wakeup
    /// preemption (SCHED_RR among equals; the synth scenarios' hosts).
    Rr,
    /// Umeno et al.'s hypervisor dispatcher: one global queue in three
    /// subqueues (proper-ready, slice-end, out-service) and per-VM service
    /// quantities per epoch (`sched::lpar`); the default under a bare
    /// `wapd`, `wopd` or `rslp`.
    Lpar,
}

/// What a vCPU does when it finds its lock held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpinResponse {
    /// Spin natively until the lock is free or the slice ends.
    Spin,
    /// KVM directed yield after a PAUSE-loop window.
    Yield,
    /// Wait until all ready partners have been dispatched (Umeno et al.).
    Wapd,
    /// Wait until one ready partner has been dispatched.
    Wopd,
    /// Requeue the spinner behind its partners' subqueue.
    Rslp,
    /// A KVM guest's paravirtual spinlock: spin `pv_spin_ns`, then halt
    /// until the holder's unlock kicks one halted waiter (KVM_HC_KICK_CPU).
    Pv,
}

/// Where vCPUs may run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// Anywhere (one global run queue).
    Floating,
    /// Pinned one per core and swapped by Klee's energy-balancing rule.
    EnergyBalance,
    /// Fast and slow core pools (Takouna et al.): CPU-intensive vCPUs on
    /// fast cores, I/O-intensive ones on slow cores, never sharing a queue.
    Asymmetric,
    /// Each stretch of work on the CPU the capture ran it on: the host's
    /// placement replayed, the scheduler deciding only the order on each
    /// CPU (per-CPU queues: `eevdf`).
    Recorded,
}

/// A full policy: scheduler + spin response + numeric parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct Policy {
    /// Placement of vCPUs on cores.
    pub placement: Placement,
    /// Scheduler.
    pub scheduler: SchedulerKind,
    /// Spin response.
    pub spin: SpinResponse,
    /// Numeric parameters, typed (names and defaults: [`PARAMS`]).
    pub params: Params,
    /// Where the policy's random draws start (the energy balancer's swap
    /// realisation, eevdf's newidle odds): the same seed draws the same
    /// numbers.
    pub seed: u64,
}

/// Declares the numeric parameters once: the typed [`Params`] the engine
/// reads (a field per parameter, so a misspelt name does not compile), and
/// [`PARAMS`], their names, defaults and meaning for the CLI and the
/// Python side.
macro_rules! params {
    ($( $name:ident = $default:expr, $doc:expr; )*) => {
        /// The policy's numeric parameters, each set or at its default.
        /// Read by field; set by name only through [`Policy::set`], which
        /// refuses unknown names.
        #[derive(Debug, Clone, PartialEq)]
        pub struct Params {
            $( #[doc = $doc] pub $name: f64, )*
        }

        impl Default for Params {
            fn default() -> Self {
                Params { $( $name: $default, )* }
            }
        }

        impl Params {
            /// The parameter named `key`, if there is one.
            pub fn get(&self, key: &str) -> Option<f64> {
                match key {
                    $( stringify!($name) => Some(self.$name), )*
                    _ => None,
                }
            }

            fn slot(&mut self, key: &str) -> Option<&mut f64> {
                match key {
                    $( stringify!($name) => Some(&mut self.$name), )*
                    _ => None,
                }
            }
        }

        /// Parameter names with their defaults and meaning.
        pub const PARAMS: &[(&str, f64, &str)] = &[ $( (stringify!($name), $default, $doc), )* ];
    };
}

params! {
    sched_latency_ns = 6e6, "fair: target latency; slice = latency / runnable threads";
    min_granularity_ns = 0.75e6, "fair: minimum slice";
    wakeup_granularity_ns = 1e6, "fair: a woken thread preempts when its vruntime is this much smaller";
    base_slice_ns = 0.0, "eevdf: base slice (0: Linux's default before 6.15, 0.75 ms × (1 + log2 CPUs), CPUs capped at 8; `cratrace replay` sets 0.70 ms × the same for captures of 6.15 and later)";
    tick_hz = 250.0, "eevdf: scheduler tick rate; an expired slice is noticed at the next tick (Debian's HZ=250; 0: exactly, as with HRTICK)";
    migration_cost_ns = 0.5e6, "eevdf: a thread that ran within this is cache-hot and not pulled by an idle CPU (Linux's sched_migration_cost)";
    newidle_cost_ns = 0.0, "eevdf: a CPU going idle balances (pulls a waiting thread from another) only when its idle periods average at least this: Linux's max_newidle_lb_cost since 5.16, the measured cost of such a balance, a few µs on a small host and not in a trace; 0.5e6 (sched_migration_cost) is the rule before 5.16";
    newidle_odds = 1.0, "eevdf: 1: a CPU going idle balances only as often as its newidle balances have lately pulled something (Linux 6.18.5 and later, 6.19: NI_RANDOM, a 1024-sided die against a success ratio over the last ~1024 tries, from 50%; its draws from the replay's seed); 0: every time (earlier kernels; `cratrace replay` sets 0 for captures of those)";
    host_placement = 0.0, "1: host threads (not vCPUs) run each stretch of work on the CPU the capture ran it on, as background load where it fell; 0: the replayed scheduler places them";
    wake_update_curr = 1.0, "eevdf: 1: a woken thread is placed against its queue's average with the running thread charged up to now, as Linux's enqueue_entity does (update_curr first); 0: as of the running thread's last charge (its dispatch, a tick's or an earlier wakeup's check), the engine's order before stop 37, which places the woken thread further back and lets it preempt more often";
    busy_balance_ns = 32e6, "eevdf: busy CPUs balance their run queues this often (Linux: balance interval × busy_factor, 2 ms × 16 with two CPUs; 0: never)";
    busy_balance_load = 1.0, "eevdf: 1: busy balancing moves load as Linux's does between overloaded CPUs (PELT runnable load, 32 ms half-life; pull while the local CPU is below the average and, if overloaded too, the busiest is 117% of it; a waiting thread whose load fits the imbalance, the smaller of the busiest CPU's excess over the average and the local CPU's shortfall (with two CPUs, half the difference), its load halved again after each failed attempt); 0: only a thread from a CPU with two or more threads more";
    credit_slice_ns = 30e6, "credit: time slice";
    credit_tick_ns = 10e6, "credit: tick (BOOST ends, credits burn)";
    credit_acct_ns = 30e6, "credit: accounting period (credits refill)";
    cap_period_ns = 100e6, "caps: the period a VM's quota (cap.VM) is counted over (cgroup cpu.max's default period, 100 ms)";
    cap_check_ns = 1e6, "caps: how often a capped VM's running time is checked against its quota (the kernel checks at its ticks and switches)";
    lpar_slice_ns = 10e6, "lpar: time slice (the paper gives none, spin.md G1: a cratrace choice; set your hypervisor's)";
    lpar_epoch_ns = 100e6, "lpar: service epoch; each VM's quantity per epoch is its ratio's share of CPUs x epoch (the paper gives none, G1)";
    rr_slice_ns = 100e6, "rr: time slice (Linux's SCHED_RR default, sched_rr_timeslice_ms: 100 ms)";
    ple_window_ns = 20e3, "yield: PAUSE-loop window before a PLE exit";
    spin_budget_ns = 0.0, "wapd/wopd/rslp: native spin before the first suspend-spin call (0 as in the paper)";
    respin_ns = 10e3, "wapd/wopd/rslp: spin after a call that resumed the spinner, before calling again";
    pv_spin_ns = 1.27e6, "pv: spin before halting (Linux's SPIN_THRESHOLD, 2^15 PAUSEs: 1.27 ms measured on this project's machines; the capture's own when it shows pv halts)";
    excess_retries = 3.0, "uncleared re-dispatches of one episode that count as an excessive spin";
    balance_period_ns = 1e6, "energy-balance: accounting period";
    balance_k = 1.1, "energy-balance: ratio threshold k > 1 of the swap rule";
    balance_window = 0.0, "energy-balance: E over the last N periods (0: cumulative)";
    balance_decay = 0.0, "energy-balance: if > 0, E decays by this factor per period (exponential window)";
    force_swap_hz = 0.0, "energy-balance: if > 0, swap every pair at this rate regardless of the rule (mechanism-cost check)";
    swap_cost_ns = 0.0, "energy-balance: work each swapped vCPU loses to the swap mechanism itself (exchanging contexts), beyond the cache refill every move to another CPU pays (`migration_ns`, a cost): a host's own measurement, 0 by default";
    safe_point_ns = 4e6, "energy-balance: a running vCPU reaches a point where it may be swapped (out of guest mode) at least this often: a KVM vCPU exits at every host timer tick (4 ms at HZ=250; Klee 2007's L4 host preempted each 1 ms); off the CPU it may be swapped at once. A decided swap happens when both of its vCPUs have reached one";
    fast_cores = 0.0, "asymmetric: cores in the fast pool (0: half, rounded up)";
    fast_khz = 2.79e6, "asymmetric: fast-core frequency (Takouna et al.: 2.79 GHz)";
    slow_khz = 1.33e6, "asymmetric: slow-core frequency (1.33 GHz)";
    fast_volt = 1.40, "asymmetric: fast-core voltage";
    slow_volt = 0.65, "asymmetric: slow-core voltage";
    fast_slice_ns = 30e6, "asymmetric: time slice on fast cores";
    slow_slice_ns = 10e6, "asymmetric: time slice on slow cores";
    cpu_class_util = 0.8, "asymmetric: a vCPU busy at least this share of its demand is CPU-intensive...";
    io_block_hz = 100.0, "asymmetric: ...and blocking at most this often per second of demand";
    spill_slow = 1.0, "asymmetric: CPU-class vCPUs beyond the fast cores spill to slow cores (1) or all queue on fast cores (0)";
    ambient_c = 25.0, "thermal model: ambient temperature, °C (every core and the sink start there)";
    throttle_c = 70.0, "thermal model: the temperature a core throttles above (a host's trip point): the replay reports each core's time above it";
    r_core_c_per_w = 0.8, "thermal model: core-to-sink resistance, °C/W";
    c_core_j_per_c = 0.01, "thermal model: core heat capacity, J/°C (with r_core a time constant of 8 ms)";
    r_sink_c_per_w = 0.3, "thermal model: sink-to-ambient resistance, °C/W";
    c_sink_j_per_c = 40.0, "thermal model: sink heat capacity, J/°C (a sink that filters changes shorter than seconds)";
    static_w = 1.0, "power model: static power per core, W";
    idle_w = 0.5, "power model: power of an idle core, W";
    capacitance = 2.0, "power model: C in W/(GHz·V²)";
    volt = 1.0, "power model: supply voltage, V";
}

/// Each policy part's name and what it selects (in the order the error
/// for an unknown part lists them).
const SCHEDULERS: &[(&str, SchedulerKind)] = &[
    ("fair", SchedulerKind::Fair),
    ("eevdf", SchedulerKind::Eevdf),
    ("credit", SchedulerKind::Credit),
    ("rr", SchedulerKind::Rr),
    ("lpar", SchedulerKind::Lpar),
];
const SPIN_RESPONSES: &[(&str, SpinResponse)] = &[
    ("spin", SpinResponse::Spin),
    ("yield", SpinResponse::Yield),
    ("wapd", SpinResponse::Wapd),
    ("wopd", SpinResponse::Wopd),
    ("rslp", SpinResponse::Rslp),
    ("pv", SpinResponse::Pv),
];
const PLACEMENTS: &[(&str, Placement)] = &[
    ("energy-balance", Placement::EnergyBalance),
    ("asymmetric", Placement::Asymmetric),
    ("recorded", Placement::Recorded),
];

/// What `part` names in `table`, if it is one of them.
fn named<T: Copy>(table: &[(&str, T)], part: &str) -> Option<T> {
    table.iter().find(|(n, _)| *n == part).map(|&(_, v)| v)
}

/// The names in `table`, comma-separated.
fn names<T>(table: &[(&str, T)]) -> String {
    table.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
}

impl Policy {
    /// Parse `scheduler[+spin]` or `spin` (default scheduler `fair`).
    pub fn parse(name: &str) -> Result<Policy, String> {
        let mut scheduler = SchedulerKind::Fair;
        let mut spin = SpinResponse::Spin;
        let mut placement = Placement::Floating;
        // each part names one of three things; a second of the same kind
        // would silently win over the first
        let (mut sched_part, mut spin_part, mut place_part) = (None, None, None);
        for part in name.split('+') {
            let (seen, kind) = if let Some(p) = named(PLACEMENTS, part) {
                placement = p;
                (&mut place_part, "placements")
            } else if let Some(s) = named(SCHEDULERS, part) {
                scheduler = s;
                (&mut sched_part, "schedulers")
            } else if let Some(r) = named(SPIN_RESPONSES, part) {
                spin = r;
                (&mut spin_part, "spin responses")
            } else {
                return Err(format!(
                    "policy: unknown part {part:?} in {name:?}; allowed schedulers {}, spin responses {}, and placements {} (e.g. credit+wapd)",
                    names(SCHEDULERS),
                    names(SPIN_RESPONSES),
                    names(PLACEMENTS)
                ));
            };
            if let Some(first) = seen.replace(part) {
                return Err(format!(
                    "policy {name:?}: two {kind} ({first} and {part}); give one"
                ));
            }
        }
        if sched_part.is_none()
            && matches!(
                spin,
                SpinResponse::Wapd | SpinResponse::Wopd | SpinResponse::Rslp
            )
        {
            // the responses were designed and measured under this dispatcher
            scheduler = SchedulerKind::Lpar;
        }
        if placement == Placement::Asymmetric {
            // the fast and slow pools are credit's (Takouna et al.)
            if let Some(s) = sched_part.filter(|&s| s != "credit") {
                return Err(format!(
                    "policy {name:?}: asymmetric runs the credit scheduler, not {s}"
                ));
            }
            scheduler = SchedulerKind::Credit;
        }
        Ok(Policy {
            placement,
            scheduler,
            spin,
            params: Params::default(),
            seed: 0,
        })
    }

    /// Set a parameter by name, refusing unknown names and bad values.
    pub fn set(&mut self, key: &str, value: f64) -> Result<(), String> {
        if !value.is_finite() || value < 0.0 {
            return Err(format!(
                "parameter {key}: {value} must be a finite number >= 0"
            ));
        }
        let names = || {
            PARAMS
                .iter()
                .map(|(k, _, _)| *k)
                .collect::<Vec<_>>()
                .join(", ")
        };
        let slot = self.params.slot(key).ok_or_else(|| {
            format!(
                "parameter {key:?} is not a replay engine parameter (allowed: {})",
                names()
            )
        })?;
        *slot = value;
        Ok(())
    }

    /// The thermal network its parameters describe (`ambient_c`,
    /// `r_core_c_per_w`, `c_core_j_per_c`, `r_sink_c_per_w`,
    /// `c_sink_j_per_c`).
    pub fn thermal(&self) -> crate::energy::thermal::ThermalParams {
        crate::energy::thermal::ThermalParams {
            ambient_c: self.params.ambient_c,
            r_core: self.params.r_core_c_per_w.max(1e-9),
            c_core: self.params.c_core_j_per_c.max(1e-9),
            r_sink: self.params.r_sink_c_per_w.max(1e-9),
            c_sink: self.params.c_sink_j_per_c.max(1e-9),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_compositions_and_rejects_unknown_names() {
        assert_eq!(
            Policy::parse("wapd").unwrap().scheduler,
            SchedulerKind::Lpar
        );
        assert_eq!(
            Policy::parse("fair+wapd").unwrap().scheduler,
            SchedulerKind::Fair
        );
        assert_eq!(
            Policy::parse("yield").unwrap().scheduler,
            SchedulerKind::Fair
        );
        let p = Policy::parse("credit+rslp").unwrap();
        assert_eq!(
            (p.scheduler, p.spin),
            (SchedulerKind::Credit, SpinResponse::Rslp)
        );
        let e = Policy::parse("fair+magic").unwrap_err();
        assert!(e.contains("\"magic\"") && e.contains("wapd"));
        let mut p = Policy::parse("fair").unwrap();
        assert!(p.set("nope", 1.0).unwrap_err().contains("allowed"));
        assert!(p.set("ple_window_ns", -1.0).is_err());
        p.set("ple_window_ns", 5e3).unwrap();
        assert_eq!(p.params.ple_window_ns, 5e3);
        assert_eq!(p.params.credit_slice_ns, 30e6);
        // every name in the table is a field, set by name, read by field
        for (i, &(name, default, _)) in PARAMS.iter().enumerate() {
            let mut q = Policy::parse("fair").unwrap();
            assert_eq!(q.params.get(name), Some(default), "{name}");
            q.set(name, 1000.0 + i as f64).unwrap();
            assert_eq!(q.params.get(name), Some(1000.0 + i as f64), "{name}");
        }
    }

    #[test]
    fn a_second_part_of_one_kind_is_refused_not_taken_over_the_first() {
        for (name, kind) in [
            ("wapd+rslp", "two spin responses (wapd and rslp)"),
            ("fair+eevdf+wapd", "two schedulers (fair and eevdf)"),
            ("energy-balance+recorded", "two placements"),
            (
                "asymmetric+fair",
                "asymmetric runs the credit scheduler, not fair",
            ),
        ] {
            let e = Policy::parse(name).unwrap_err();
            assert!(e.contains(kind), "{name}: {e}");
        }
        for ok in [
            "asymmetric+credit+yield",
            "asymmetric+wapd",
            "eevdf+recorded+pv",
        ] {
            Policy::parse(ok).unwrap();
        }
        assert_eq!(
            Policy::parse("asymmetric+yield").unwrap().scheduler,
            SchedulerKind::Credit
        );
    }
}
