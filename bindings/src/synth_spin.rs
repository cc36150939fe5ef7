//! `kvm-heavy-spin`'s tick loop in Rust (issue #47: `cratrace synth` at a
//! million events a second). `cratrace/synth/scenarios/kvm_heavy_spin.py`
//! sets the scenario up (threads, the first draws, the first switches),
//! hands its state here with the Python random generator's (Mersenne
//! Twister) state, and takes back the state at the end; this module runs
//! the same loop statement for statement, draws the same numbers from the
//! same generator in the same order and writes its events straight into
//! the trace's [`TraceDatSpool`], so that the trace and the truth are those
//! the Python loop gives (tests/synth/test_synth_streaming.py compares the
//! two paths byte for byte, which checks the generator too: the binding
//! crate's own tests do not link). It lives in the binding crate because
//! it writes into the spool directly; a pure-Rust home behind a sink trait
//! is left for later.

use crate::tracedat_writer::{TraceDatSpool, Val};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::collections::{HashMap, VecDeque};

const MARKER_IP: u64 = 0xFFFF_FFFF_81A2_B3C0;
const KERNEL_RIP: u64 = 0xFFFF_FFFF_8110_0000;
const USER_RIP: u64 = 0x0000_7F3A_1234_0000;
const EXIT_EXTERNAL_INTERRUPT: u64 = 1;
const EXIT_HLT: u64 = 12;
const EXIT_VMCALL: u64 = 18;
const EXIT_MSR_WRITE: u64 = 32;
const EXIT_PAUSE: u64 = 40;
const KVM_HC_KICK_CPU: u64 = 5;
const TASK_RUNNING: i64 = 0;
const TASK_INTERRUPTIBLE: i64 = 1;

/// CPython's `random.Random`: MT19937 and the draws built on it.
struct Mt {
    mt: [u32; 624],
    i: usize,
}

impl Mt {
    fn from_state(state: &[u32]) -> PyResult<Self> {
        if state.len() != 625 || state[624] > 624 {
            return Err(PyValueError::new_err(
                "random state: 624 words and an index",
            ));
        }
        let mut mt = [0u32; 624];
        mt.copy_from_slice(&state[..624]);
        Ok(Mt {
            mt,
            i: state[624] as usize,
        })
    }

    fn state(&self) -> Vec<u32> {
        let mut v = self.mt.to_vec();
        v.push(self.i as u32);
        v
    }

    fn next_u32(&mut self) -> u32 {
        const N: usize = 624;
        const M: usize = 397;
        const UPPER: u32 = 0x8000_0000;
        const LOWER: u32 = 0x7fff_ffff;
        const MAG: [u32; 2] = [0, 0x9908_b0df];
        if self.i >= N {
            let mt = &mut self.mt;
            for k in 0..N - M {
                let y = (mt[k] & UPPER) | (mt[k + 1] & LOWER);
                mt[k] = mt[k + M] ^ (y >> 1) ^ MAG[(y & 1) as usize];
            }
            for k in N - M..N - 1 {
                let y = (mt[k] & UPPER) | (mt[k + 1] & LOWER);
                mt[k] = mt[k + M - N] ^ (y >> 1) ^ MAG[(y & 1) as usize];
            }
            let y = (mt[N - 1] & UPPER) | (mt[0] & LOWER);
            mt[N - 1] = mt[M - 1] ^ (y >> 1) ^ MAG[(y & 1) as usize];
            self.i = 0;
        }
        let mut y = self.mt[self.i];
        self.i += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }

    /// `random()`: 53 bits from two words.
    fn random(&mut self) -> f64 {
        let a = self.next_u32() >> 5;
        let b = self.next_u32() >> 6;
        (f64::from(a) * 67108864.0 + f64::from(b)) * (1.0 / 9007199254740992.0)
    }

    /// `uniform(a, b)`.
    fn uniform(&mut self, a: f64, b: f64) -> f64 {
        a + (b - a) * self.random()
    }

    /// `randrange(n)` for 0 < n < 2^32: `getrandbits(n.bit_length())`
    /// until below `n`.
    fn randrange(&mut self, n: u64) -> u64 {
        let k = 64 - n.leading_zeros();
        loop {
            let r = u64::from(self.next_u32() >> (32 - k));
            if r < n {
                return r;
            }
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Work,
    Spin,
    Halted,
    Cs,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Work => "work",
            Mode::Spin => "spin",
            Mode::Halted => "halted",
            Mode::Cs => "cs",
        }
    }
}

/// A spin episode: the truth's dict, in its key order.
#[derive(Clone)]
struct Ep {
    vm: usize,
    vcpu: i64,
    tid: i64,
    lock: i64,
    start: i64,
    end: Option<i64>,
    holder_vcpu: i64,
    holder_preempted: bool,
    pause_exits: i64,
    halts: i64,
    kicks: i64,
    clearer_vcpu: Option<i64>,
    dur: Option<i64>,
}

/// An episode for Python: its fields in the truth's key order, the last
/// two (clearer_vcpu, dur) paired (tuples convert up to 12 elements).
type EpTuple = (
    String,
    i64,
    i64,
    i64,
    i64,
    Option<i64>,
    i64,
    bool,
    i64,
    i64,
    i64,
    (Option<i64>, Option<i64>),
);

struct V {
    tid: i64,
    vm: usize,
    vcpu: i64,
    pcpu: usize,
    mode: Mode,
    left: i64,
    lock: Option<i64>,
    spun: i64,
    ep: Option<Ep>,
    work_ns: i64,
    spin_ns: i64,
    run_ns: i64,
    txns: i64,
    halted_at: Option<i64>,
}

struct P {
    slice_us: i64,
    work_us: i64,
    hold_us: i64,
    locks: u64,
    ple_us: i64,
    pv_spin_us: i64,
    exit_every_us: i64,
}

/// The Python Builder's state and its emitting methods.
struct B<'s> {
    spool: &'s mut TraceDatSpool,
    t0: i64,
    last_ts: Vec<i64>,
    current: Vec<i64>,
    since: Vec<i64>,
    oncpu: HashMap<i64, i64>,
    comms: HashMap<i64, String>,
    swapper: Vec<String>,
}

impl B<'_> {
    fn ts(&mut self, cpu: usize, t_ns: i64) -> i64 {
        let ts = (self.t0 + t_ns).max(self.last_ts[cpu] + 1);
        self.last_ts[cpu] = ts;
        ts
    }

    fn emit(
        &mut self,
        t_ns: i64,
        cpu: usize,
        name: &str,
        pid: i64,
        vals: &[(&str, Val<'_>)],
    ) -> PyResult<i64> {
        let ts = self.ts(cpu, t_ns);
        self.spool
            .push_native(ts as u64, cpu as u32, name, pid, vals)?;
        Ok(ts)
    }

    fn comm(&self, tid: i64) -> &str {
        if tid == 0 {
            "swapper"
        } else {
            self.comms.get(&tid).map(String::as_str).unwrap_or("")
        }
    }

    fn switch(&mut self, t_ns: i64, cpu: usize, next: i64, prev_state: i64) -> PyResult<i64> {
        let prev = self.current[cpu];
        if prev == next {
            return Ok(self.last_ts[cpu]);
        }
        self.current[cpu] = next;
        let prev_comm = if prev == 0 {
            self.swapper[cpu].clone()
        } else {
            self.comm(prev).to_owned()
        };
        let next_comm = if next == 0 {
            self.swapper[cpu].clone()
        } else {
            self.comm(next).to_owned()
        };
        let ts = self.ts(cpu, t_ns);
        self.last_ts[cpu] = ts - 1;
        if prev != 0 {
            *self.oncpu.entry(prev).or_insert(0) += ts - self.since[cpu];
        }
        self.since[cpu] = ts;
        let state = if prev != 0 { prev_state } else { TASK_RUNNING };
        self.emit(
            t_ns,
            cpu,
            "sched_switch",
            prev,
            &[
                ("prev_comm", Val::Str(&prev_comm)),
                ("prev_pid", Val::Int(prev as u64)),
                ("prev_prio", Val::Int(120)),
                ("prev_state", Val::Int(state as u64)),
                ("next_comm", Val::Str(&next_comm)),
                ("next_pid", Val::Int(next as u64)),
                ("next_prio", Val::Int(120)),
            ],
        )
    }

    fn wakeup(&mut self, t_ns: i64, cpu: usize, tid: i64, target: usize) -> PyResult<i64> {
        let comm = self.comm(tid).to_owned();
        let pid = self.current[cpu];
        self.emit(
            t_ns,
            cpu,
            "sched_wakeup",
            pid,
            &[
                ("comm", Val::Str(&comm)),
                ("pid", Val::Int(tid as u64)),
                ("prio", Val::Int(120)),
                ("target_cpu", Val::Int(target as u64)),
            ],
        )
    }

    fn marker(&mut self, t_ns: i64, cpu: usize, tid: i64, text: &str) -> PyResult<i64> {
        let buf = format!("{text}\n");
        self.emit(
            t_ns,
            cpu,
            "print",
            tid,
            &[("ip", Val::Int(MARKER_IP)), ("buf", Val::Str(&buf))],
        )
    }

    fn kvm_exit(
        &mut self,
        t_ns: i64,
        cpu: usize,
        tid: i64,
        vcpu: i64,
        reason: u64,
        rip: u64,
    ) -> PyResult<i64> {
        self.emit(
            t_ns,
            cpu,
            "kvm_exit",
            tid,
            &[
                ("exit_reason", Val::Int(reason)),
                ("guest_rip", Val::Int(rip)),
                ("isa", Val::Int(1)),
                ("info1", Val::Int(0)),
                ("info2", Val::Int(0)),
                ("intr_info", Val::Int(0)),
                ("error_code", Val::Int(0)),
                ("vcpu_id", Val::Int(vcpu as u64)),
                ("requests", Val::Int(0)),
            ],
        )
    }

    fn kvm_entry(&mut self, t_ns: i64, cpu: usize, tid: i64, vcpu: i64, rip: u64) -> PyResult<i64> {
        self.emit(
            t_ns,
            cpu,
            "kvm_entry",
            tid,
            &[
                ("vcpu_id", Val::Int(vcpu as u64)),
                ("rip", Val::Int(rip)),
                ("immediate_exit", Val::Int(0)),
                ("intr_info", Val::Int(0)),
                ("error_code", Val::Int(0)),
            ],
        )
    }
}

struct Sim<'s> {
    b: B<'s>,
    p: P,
    rng: Mt,
    vs: Vec<V>,
    by_tid: HashMap<i64, usize>,
    vm_names: Vec<String>,
    runq: Vec<VecDeque<i64>>,
    slice_left: Vec<i64>,
    holder: HashMap<(usize, i64), i64>,
    waiters: HashMap<(usize, i64), VecDeque<i64>>,
    episodes: Closed<'s>,
}

/// Fields of an episode record in [`Closed`]'s output, each an i64
/// (native-endian): vm (index), vcpu, tid, lock, start, end,
/// holder_vcpu, holder_preempted (0/1), pause_exits, halts, kicks,
/// clearer_vcpu (-1: none), dur.
pub(crate) const EPISODE_FIELDS: usize = 13;

/// Ticks between flushes of the closed episodes.
const FLUSH_TICKS: i64 = 1024;

/// Closed episodes, written out in the truth's order (start, VM name,
/// vCPU) as soon as no episode still to close can come before them, so
/// that a long run holds only those that closed ahead of an open one
/// (issue #47: the truth's 7.7 M episodes of 100 M events took 3 GB).
/// Every episode opened at tick t or later starts at t0 + t µs or later
/// (time stamps only move forward), and an open one at its start.
struct Closed<'py> {
    write: Bound<'py, PyAny>,
    pending: Vec<Ep>,
    buf: Vec<u8>,
    /// each VM's rank by name: the truth sorts by the name
    vm_rank: Vec<usize>,
    count: i64,
    pause_exits: i64,
    kicks: i64,
    halts: i64,
    lhp: i64,
}

impl Closed<'_> {
    fn push(&mut self, ep: Ep) {
        self.count += 1;
        self.pause_exits += ep.pause_exits;
        self.kicks += ep.kicks;
        self.halts += ep.halts;
        self.lhp += i64::from(ep.holder_preempted);
        self.pending.push(ep);
    }

    /// Write every pending episode that starts before `bound`, in order.
    fn flush(&mut self, bound: i64) -> PyResult<()> {
        let (mut ready, rest): (Vec<Ep>, Vec<Ep>) =
            self.pending.drain(..).partition(|e| e.start < bound);
        self.pending = rest;
        let rank = &self.vm_rank;
        // stable, as Python's sorted(): the close order breaks ties
        ready.sort_by_key(|e| (e.start, rank[e.vm], e.vcpu));
        for e in &ready {
            let fields: [i64; EPISODE_FIELDS] = [
                e.vm as i64,
                e.vcpu,
                e.tid,
                e.lock,
                e.start,
                e.end.unwrap_or(-1),
                e.holder_vcpu,
                i64::from(e.holder_preempted),
                e.pause_exits,
                e.halts,
                e.kicks,
                e.clearer_vcpu.unwrap_or(-1),
                e.dur.unwrap_or(-1),
            ];
            for f in fields {
                self.buf.extend_from_slice(&f.to_ne_bytes());
            }
        }
        if self.buf.len() >= 1 << 20 || (bound == i64::MAX && !self.buf.is_empty()) {
            let py = self.write.py();
            self.write
                .call1((pyo3::types::PyBytes::new(py, &self.buf),))?;
            self.buf.clear();
        }
        Ok(())
    }
}

impl Sim<'_> {
    fn work(&mut self) -> i64 {
        let w = self.p.work_us as f64;
        (self.rng.uniform(0.5 * w, 1.5 * w) as i64).max(1)
    }

    fn resume(&mut self, t_ns: i64, cpu: usize, tid: i64) -> PyResult<()> {
        let i = self.by_tid[&tid];
        if let Some(h) = self.vs[i].halted_at.take() {
            let ns = self.b.t0 + t_ns - h;
            self.b.emit(
                t_ns,
                cpu,
                "kvm_vcpu_wakeup",
                tid,
                &[
                    ("ns", Val::Int(ns as u64)),
                    ("waited", Val::Int(1)),
                    ("valid", Val::Int(1)),
                ],
            )?;
        }
        let vcpu = self.vs[i].vcpu;
        self.b.kvm_entry(t_ns, cpu, tid, vcpu, KERNEL_RIP)?;
        Ok(())
    }

    fn switch_in(&mut self, t_ns: i64, cpu: usize, tid: i64) -> PyResult<()> {
        self.b.switch(t_ns, cpu, tid, TASK_RUNNING)?;
        self.resume(t_ns, cpu, tid)?;
        self.slice_left[cpu] = self.p.slice_us;
        Ok(())
    }

    fn next_on(&mut self, t_ns: i64, cpu: usize, prev_state: i64) -> PyResult<()> {
        if let Some(nxt) = self.runq[cpu].pop_front() {
            self.b.switch(t_ns, cpu, nxt, prev_state)?;
            self.resume(t_ns, cpu, nxt)?;
            self.slice_left[cpu] = self.p.slice_us;
        } else {
            self.b.switch(t_ns, cpu, 0, prev_state)?;
        }
        Ok(())
    }

    fn try_acquire(&mut self, t_ns: i64, cpu: usize, i: usize) -> PyResult<()> {
        let (vm, lock, tid, vcpu) = {
            let v = &self.vs[i];
            (v.vm, v.lock.unwrap_or(0), v.tid, v.vcpu)
        };
        let key = (vm, lock);
        match self.holder.get(&key).copied() {
            None => {
                self.holder.insert(key, tid);
                if self.vs[i].ep.is_some() {
                    let text = format!("spin_end vm={} vcpu={vcpu} lock={lock}", self.vm_names[vm]);
                    let ts = self.b.marker(t_ns, cpu, tid, &text)?;
                    let mut ep = self.vs[i].ep.take().expect("open");
                    ep.end = Some(ts);
                    ep.dur = Some(ts - ep.start);
                    self.episodes.push(ep);
                }
                let v = &mut self.vs[i];
                v.mode = Mode::Cs;
                v.left = self.p.hold_us;
            }
            Some(h) => {
                if self.vs[i].ep.is_none() {
                    let text = format!(
                        "spin_begin vm={} vcpu={vcpu} lock={lock}",
                        self.vm_names[vm]
                    );
                    let ts = self.b.marker(t_ns, cpu, tid, &text)?;
                    let hv = &self.vs[self.by_tid[&h]];
                    let ep = Ep {
                        vm,
                        vcpu,
                        tid,
                        lock,
                        start: ts,
                        end: None,
                        holder_vcpu: hv.vcpu,
                        holder_preempted: self.b.current[hv.pcpu] != h,
                        pause_exits: 0,
                        halts: 0,
                        kicks: 0,
                        clearer_vcpu: None,
                        dur: None,
                    };
                    self.vs[i].ep = Some(ep);
                }
                let v = &mut self.vs[i];
                v.mode = Mode::Spin;
                v.spun = 0;
            }
        }
        Ok(())
    }

    fn run(&mut self, dur_us: i64) -> PyResult<()> {
        let npcpu = self.b.current.len();
        let exit_p = 1.0 / self.p.exit_every_us as f64;
        for t in 0..dur_us {
            let t_ns = t * 1000;
            if t % FLUSH_TICKS == 0 {
                let open = self
                    .vs
                    .iter()
                    .filter_map(|v| v.ep.as_ref().map(|e| e.start));
                let bound = open.fold(self.b.t0 + t_ns, i64::min);
                self.episodes.flush(bound)?;
            }
            for cpu in 0..npcpu {
                let tid = self.b.current[cpu];
                if tid == 0 {
                    continue;
                }
                let i = self.by_tid[&tid];
                let vcpu = self.vs[i].vcpu;
                self.vs[i].run_ns += 1000;
                match self.vs[i].mode {
                    Mode::Work => {
                        self.vs[i].work_ns += 1000;
                        self.vs[i].left -= 1;
                        if self.rng.random() < exit_p {
                            let reason = if self.rng.random() < 0.6 {
                                EXIT_EXTERNAL_INTERRUPT
                            } else {
                                EXIT_MSR_WRITE
                            };
                            self.b
                                .kvm_exit(t_ns + 100, cpu, tid, vcpu, reason, USER_RIP)?;
                            self.b.kvm_entry(t_ns + 600, cpu, tid, vcpu, USER_RIP)?;
                        }
                        if self.vs[i].left <= 0 {
                            self.vs[i].lock = Some(self.rng.randrange(self.p.locks) as i64);
                            self.try_acquire(t_ns + 900, cpu, i)?;
                        }
                    }
                    Mode::Spin => {
                        self.vs[i].spin_ns += 1000;
                        self.vs[i].spun += 1;
                        let key = (self.vs[i].vm, self.vs[i].lock.unwrap_or(0));
                        let spun = self.vs[i].spun;
                        if !self.holder.contains_key(&key) {
                            self.try_acquire(t_ns + 900, cpu, i)?;
                        } else if spun >= self.p.pv_spin_us {
                            let ts = self.b.kvm_exit(
                                t_ns + 900,
                                cpu,
                                tid,
                                vcpu,
                                EXIT_HLT,
                                KERNEL_RIP,
                            )?;
                            let v = &mut self.vs[i];
                            v.halted_at = Some(ts);
                            v.ep.as_mut().expect("spinning").halts += 1;
                            v.mode = Mode::Halted;
                            self.waiters.entry(key).or_default().push_back(tid);
                            self.next_on(t_ns + 950, cpu, TASK_INTERRUPTIBLE)?;
                            continue;
                        } else if spun % self.p.ple_us == 0 {
                            self.b
                                .kvm_exit(t_ns + 500, cpu, tid, vcpu, EXIT_PAUSE, KERNEL_RIP)?;
                            self.b.kvm_entry(t_ns + 800, cpu, tid, vcpu, KERNEL_RIP)?;
                            self.vs[i].ep.as_mut().expect("spinning").pause_exits += 1;
                        }
                    }
                    Mode::Cs => {
                        self.vs[i].work_ns += 1000;
                        self.vs[i].left -= 1;
                        if self.vs[i].left <= 0 {
                            let vm = self.vs[i].vm;
                            let key = (vm, self.vs[i].lock.unwrap_or(0));
                            self.holder.remove(&key);
                            let text = format!("txn_end vm={} vcpu={vcpu}", self.vm_names[vm]);
                            self.b.marker(t_ns + 300, cpu, tid, &text)?;
                            self.vs[i].txns += 1;
                            let woken = self.waiters.get_mut(&key).and_then(VecDeque::pop_front);
                            if let Some(wtid) = woken {
                                let w = self.by_tid[&wtid];
                                let (wvcpu, wpcpu) = (self.vs[w].vcpu, self.vs[w].pcpu);
                                self.b.kvm_exit(
                                    t_ns + 400,
                                    cpu,
                                    tid,
                                    vcpu,
                                    EXIT_VMCALL,
                                    KERNEL_RIP,
                                )?;
                                self.b.emit(
                                    t_ns + 450,
                                    cpu,
                                    "kvm_hypercall",
                                    tid,
                                    &[
                                        ("nr", Val::Int(KVM_HC_KICK_CPU)),
                                        ("a0", Val::Int(0)),
                                        ("a1", Val::Int(wvcpu as u64)),
                                        ("a2", Val::Int(0)),
                                        ("a3", Val::Int(0)),
                                    ],
                                )?;
                                self.b.wakeup(t_ns + 500, cpu, wtid, wpcpu)?;
                                self.b.kvm_entry(t_ns + 700, cpu, tid, vcpu, KERNEL_RIP)?;
                                let wv = &mut self.vs[w];
                                let ep = wv.ep.as_mut().expect("parked while spinning");
                                ep.kicks += 1;
                                ep.clearer_vcpu = Some(vcpu);
                                wv.mode = Mode::Spin;
                                wv.spun = 0;
                                if self.b.current[wpcpu] == 0 {
                                    self.switch_in(t_ns + 800, wpcpu, wtid)?;
                                } else {
                                    self.runq[wpcpu].push_back(wtid);
                                }
                            }
                            let left = self.work();
                            let v = &mut self.vs[i];
                            v.mode = Mode::Work;
                            v.left = left;
                        }
                    }
                    Mode::Halted => {}
                }
                // host time slice
                self.slice_left[cpu] -= 1;
                if self.slice_left[cpu] <= 0 {
                    self.slice_left[cpu] = self.p.slice_us;
                    if !self.runq[cpu].is_empty() {
                        self.b.kvm_exit(
                            t_ns + 960,
                            cpu,
                            tid,
                            vcpu,
                            EXIT_EXTERNAL_INTERRUPT,
                            KERNEL_RIP,
                        )?;
                        self.runq[cpu].push_back(tid);
                        self.next_on(t_ns + 980, cpu, TASK_RUNNING)?;
                    }
                }
            }
        }
        Ok(())
    }
}

fn ep_tuple(ep: &Ep, vm_names: &[String]) -> EpTuple {
    (
        vm_names[ep.vm].clone(),
        ep.vcpu,
        ep.tid,
        ep.lock,
        ep.start,
        ep.end,
        ep.holder_vcpu,
        ep.holder_preempted,
        ep.pause_exits,
        ep.halts,
        ep.kicks,
        (ep.clearer_vcpu, ep.dur),
    )
}

/// The Builder's state after the loop, per vCPU (tid, mode, left, lock,
/// spun, open episode, work_ns, spin_ns, run_ns, txns, halted_at), and the
/// closed episodes' totals (count, pause_exits, kicks, halts, episodes
/// whose holder was preempted).
type LoopOut = (
    Vec<u32>,
    Vec<i64>,
    Vec<i64>,
    Vec<i64>,
    HashMap<i64, i64>,
    Vec<(
        i64,
        &'static str,
        i64,
        Option<i64>,
        i64,
        Option<EpTuple>,
        i64,
        i64,
        i64,
        i64,
        Option<i64>,
    )>,
    (i64, i64, i64, i64, i64),
);

/// Run kvm-heavy-spin's loop over `dur_us` ticks from the state the
/// Python set-up left (every vCPU working, no lock held, nothing open),
/// writing the events into `spool`. `params`: slice_us, work_us,
/// hold_us, locks, ple_us, pv_spin_us, exit_every_us; `rng_state`: the
/// 625 numbers of `random.getstate()[1]`; `vcpus`: (tid, vm, vcpu, pcpu,
/// left). The closed episodes go to `episodes_out` (a callable taking
/// bytes: records of [`EPISODE_FIELDS`] i64s, VMs by their index in
/// `vcpus`' order of first appearance) in the truth's order, a MiB or so
/// at a time. Returns (rng state, last_ts, current, since, oncpu, vCPUs,
/// the closed episodes' totals).
#[pyfunction]
#[pyo3(signature = (spool, dur_us, params, rng_state, t0, last_ts, current, since, oncpu, comms, vcpus, runq, slice_left, episodes_out))]
#[allow(clippy::too_many_arguments)]
pub fn synth_kvm_heavy_spin_loop(
    mut spool: PyRefMut<'_, TraceDatSpool>,
    dur_us: i64,
    params: HashMap<String, i64>,
    rng_state: Vec<u32>,
    t0: i64,
    last_ts: Vec<i64>,
    current: Vec<i64>,
    since: Vec<i64>,
    oncpu: HashMap<i64, i64>,
    comms: HashMap<i64, String>,
    vcpus: Vec<(i64, String, i64, usize, i64)>,
    runq: Vec<Vec<i64>>,
    slice_left: Vec<i64>,
    episodes_out: Bound<'_, PyAny>,
) -> PyResult<LoopOut> {
    let get = |k: &str| {
        params
            .get(k)
            .copied()
            .ok_or_else(|| PyValueError::new_err(format!("parameter {k} missing")))
    };
    let p = P {
        slice_us: get("slice_us")?,
        work_us: get("work_us")?,
        hold_us: get("hold_us")?,
        locks: get("locks")? as u64,
        ple_us: get("ple_us")?,
        pv_spin_us: get("pv_spin_us")?,
        exit_every_us: get("exit_every_us")?,
    };
    if p.locks == 0 || p.locks > u64::from(u32::MAX) || p.ple_us <= 0 || p.exit_every_us <= 0 {
        return Err(PyValueError::new_err(
            "parameters out of the native loop's range",
        ));
    }
    let npcpu = current.len();
    if last_ts.len() != npcpu
        || since.len() != npcpu
        || runq.len() != npcpu
        || slice_left.len() != npcpu
    {
        return Err(PyValueError::new_err("per-CPU state of different lengths"));
    }
    let mut vm_names: Vec<String> = Vec::new();
    let mut vs = Vec::new();
    let mut by_tid = HashMap::new();
    for (tid, vm, vcpu, pcpu, left) in vcpus {
        let vm = match vm_names.iter().position(|n| *n == vm) {
            Some(i) => i,
            None => {
                vm_names.push(vm);
                vm_names.len() - 1
            }
        };
        if pcpu >= npcpu || by_tid.insert(tid, vs.len()).is_some() {
            return Err(PyValueError::new_err(format!(
                "vCPU thread {tid}: duplicate or on no CPU"
            )));
        }
        vs.push(V {
            tid,
            vm,
            vcpu,
            pcpu,
            mode: Mode::Work,
            left,
            lock: None,
            spun: 0,
            ep: None,
            work_ns: 0,
            spin_ns: 0,
            run_ns: 0,
            txns: 0,
            halted_at: None,
        });
    }
    if current
        .iter()
        .chain(runq.iter().flatten())
        .any(|t| *t != 0 && !by_tid.contains_key(t))
    {
        return Err(PyValueError::new_err(
            "a running or queued thread is not a vCPU",
        ));
    }
    let mut by_name: Vec<usize> = (0..vm_names.len()).collect();
    by_name.sort_by(|&a, &b| vm_names[a].cmp(&vm_names[b]));
    let mut vm_rank = vec![0; vm_names.len()];
    for (rank, &vm) in by_name.iter().enumerate() {
        vm_rank[vm] = rank;
    }
    let mut sim = Sim {
        b: B {
            spool: &mut spool,
            t0,
            last_ts,
            current,
            since,
            oncpu,
            comms,
            swapper: (0..npcpu).map(|c| format!("swapper/{c}")).collect(),
        },
        p,
        rng: Mt::from_state(&rng_state)?,
        vs,
        by_tid,
        vm_names,
        runq: runq.into_iter().map(VecDeque::from).collect(),
        slice_left,
        holder: HashMap::new(),
        waiters: HashMap::new(),
        episodes: Closed {
            write: episodes_out,
            pending: Vec::new(),
            buf: Vec::new(),
            vm_rank,
            count: 0,
            pause_exits: 0,
            kicks: 0,
            halts: 0,
            lhp: 0,
        },
    };
    sim.run(dur_us)?;
    sim.episodes.flush(i64::MAX)?;
    let names = &sim.vm_names;
    let vcpus_out = sim
        .vs
        .iter()
        .map(|v| {
            (
                v.tid,
                v.mode.name(),
                v.left,
                v.lock,
                v.spun,
                v.ep.as_ref().map(|e| ep_tuple(e, names)),
                v.work_ns,
                v.spin_ns,
                v.run_ns,
                v.txns,
                v.halted_at,
            )
        })
        .collect();
    let c = &sim.episodes;
    let totals = (c.count, c.pause_exits, c.kicks, c.halts, c.lhp);
    Ok((
        sim.rng.state(),
        sim.b.last_ts,
        sim.b.current,
        sim.b.since,
        sim.b.oncpu,
        vcpus_out,
        totals,
    ))
}
