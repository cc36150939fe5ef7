//! `replay`: run the engine once on columnar inputs; columnar outputs.

use crate::arrow_stream::ArrowTable;
use crate::packed::column;
use crate::phase_rows::PhaseRows;
use arrow_array::{ArrayRef, Int32Array, Int64Array, RecordBatch, UInt32Array, UInt8Array};
use cratrace_replay::{
    replay_consuming, Costs, GroupSpec, Host, Phase, Policy, StateCode, ThreadId, ThreadSpec, VmId,
    VmSpec, Workload,
};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The engine's default costs (ns), which Python needs before a replay:
/// recorded work already paid the switches the recording made, so the
/// workload is taken net of what the engine charges again.
#[pyfunction]
pub fn replay_default_costs() -> BTreeMap<&'static str, i64> {
    let c = Costs::default();
    BTreeMap::from([
        ("context_switch_ns", c.context_switch_ns),
        ("hypercall_ns", c.hypercall_ns),
        ("scan_per_partner_ns", c.scan_per_partner_ns),
        ("migration_ns", c.migration_ns),
    ])
}

/// The replayed states' codes and names (`replay`'s state column), for
/// the Python side to read rather than repeat.
#[pyfunction]
pub fn replay_state_names() -> BTreeMap<u8, &'static str> {
    StateCode::ALL
        .iter()
        .map(|&s| (s as u8, s.name()))
        .collect()
}

/// The codes `vcpu_phases` reads in its timelines' state column, by
/// vcpu_states name.
#[pyfunction]
pub fn replay_segment_state_codes() -> BTreeMap<&'static str, u8> {
    crate::workload::SEGMENT_STATE_CODES
        .iter()
        .map(|&(n, c, _)| (n, c))
        .collect()
}

/// Every replay engine parameter with its default (`cratrace_replay::
/// PARAMS`), for the Python side to read rather than repeat.
#[pyfunction]
pub fn replay_param_defaults() -> BTreeMap<&'static str, f64> {
    cratrace_replay::PARAMS
        .iter()
        .map(|&(k, v, _)| (k, v))
        .collect()
}

/// Phase kinds in `phase_kind`: 0 work(a ns), 1 block(a ns), 2 acquire(a
/// lock), 3 release(a lock), 4 mark, 5 wait-for(a thread, b phase), 6
/// barrier (b: 1 spin, 0 sleep). The
/// phase columns are lists or packed bytes (u32, u8, i64, i64), or
/// `phase_files` names the four files of a spill holding them
/// (`cratrace.replay.spill`), read in order without the GIL.
#[pyfunction]
#[pyo3(signature = (*, thread_tid, thread_vm, thread_vcpu, thread_start, thread_cpu=None, thread_fine=None, thread_group=None, thread_allowed=None, thread_power=None, group_names=None, group_shares=None, phase_thread=None, phase_kind=None, phase_a=None, phase_b=None, phase_files=None, vm_names, vm_weights, vm_cpu_intensive, vm_elasticity, vm_share=None, vm_cap=None, freq_khz, recorded_khz, elasticity, cpu_speed=None, policy, params, costs, limit_ns, seed=0))]
#[allow(clippy::too_many_arguments)]
pub fn replay(
    py: Python<'_>,
    thread_tid: Vec<i64>,
    thread_vm: Vec<i64>,
    thread_vcpu: Vec<i64>,
    thread_start: Vec<i64>,
    thread_cpu: Option<Vec<i64>>,
    thread_fine: Option<Vec<bool>>,
    thread_group: Option<Vec<i64>>,
    thread_allowed: Option<Vec<Option<Vec<u32>>>>,
    thread_power: Option<Vec<Option<f64>>>,
    group_names: Option<Vec<String>>,
    group_shares: Option<Vec<i64>>,
    phase_thread: Option<&Bound<'_, PyAny>>,
    phase_kind: Option<&Bound<'_, PyAny>>,
    phase_a: Option<&Bound<'_, PyAny>>,
    phase_b: Option<&Bound<'_, PyAny>>,
    phase_files: Option<Vec<String>>,
    vm_names: Vec<String>,
    vm_weights: Vec<u32>,
    vm_cpu_intensive: Vec<Option<bool>>,
    vm_elasticity: Vec<Option<f64>>,
    vm_share: Option<Vec<f64>>,
    vm_cap: Option<Vec<Option<f64>>>,
    freq_khz: Vec<u64>,
    recorded_khz: u64,
    elasticity: f64,
    cpu_speed: Option<Vec<Vec<(i64, f64)>>>,
    policy: &str,
    params: BTreeMap<String, f64>,
    costs: BTreeMap<String, i64>,
    limit_ns: i64,
    seed: u64,
) -> PyResult<Py<PyDict>> {
    let n = thread_tid.len();
    if [thread_vm.len(), thread_vcpu.len(), thread_start.len()]
        .iter()
        .any(|&l| l != n)
    {
        return Err(PyValueError::new_err(
            "replay: thread_* columns differ in length",
        ));
    }
    let thread_cpu = thread_cpu.unwrap_or_else(|| vec![-1; n]);
    let thread_fine = thread_fine.unwrap_or_else(|| vec![false; n]);
    let thread_group = thread_group.unwrap_or_else(|| vec![-1; n]);
    let thread_allowed = thread_allowed.unwrap_or_else(|| vec![None; n]);
    let thread_power = thread_power.unwrap_or_else(|| vec![None; n]);
    let group_names = group_names.unwrap_or_default();
    let group_shares = group_shares.unwrap_or_default();
    if group_names.len() != group_shares.len() {
        return Err(PyValueError::new_err(
            "replay: group_names and group_shares differ in length",
        ));
    }
    if let Some(g) = thread_group
        .iter()
        .find(|&&g| g >= group_names.len() as i64)
    {
        return Err(PyValueError::new_err(format!(
            "replay: thread_group {g} names no group of {}",
            group_names.len()
        )));
    }
    if thread_cpu.len() != n
        || thread_fine.len() != n
        || thread_group.len() != n
        || thread_allowed.len() != n
        || thread_power.len() != n
    {
        return Err(PyValueError::new_err(
            "replay: thread_* columns differ in length",
        ));
    }
    let rows = phase_rows([phase_thread, phase_kind, phase_a, phase_b], phase_files)?;
    if freq_khz.is_empty() {
        return Err(PyValueError::new_err(
            "replay: the host needs at least one pCPU (freq_khz is empty)",
        ));
    }
    if freq_khz.contains(&0) || recorded_khz == 0 {
        // work at 0 kHz never ends: the replay would run to its time limit
        return Err(PyValueError::new_err(
            "replay: freq_khz and recorded_khz must be above 0",
        ));
    }
    let cpu_speed = cpu_speed.unwrap_or_default();
    for (c, steps) in cpu_speed.iter().enumerate() {
        if let Some((at, f)) = steps.iter().find(|(_, f)| !(f.is_finite() && *f > 0.0)) {
            return Err(PyValueError::new_err(format!(
                "replay: cpu_speed of pCPU {c} at {at} ns is {f}: a speed must be a finite number above 0"
            )));
        }
        if steps.windows(2).any(|w| w[1].0 < w[0].0) {
            return Err(PyValueError::new_err(format!(
                "replay: cpu_speed of pCPU {c} is not in time order"
            )));
        }
    }
    let mut p = Policy::parse(policy).map_err(PyValueError::new_err)?;
    p.seed = seed;
    for (k, v) in &params {
        p.set(k, *v).map_err(PyValueError::new_err)?;
    }
    let mut c = Costs::default();
    for (k, v) in &costs {
        match k.as_str() {
            "context_switch_ns" => c.context_switch_ns = *v,
            "hypercall_ns" => c.hypercall_ns = *v,
            "scan_per_partner_ns" => c.scan_per_partner_ns = *v,
            "migration_ns" => c.migration_ns = *v,
            other => return Err(PyValueError::new_err(format!("replay: unknown cost {other:?} (allowed: context_switch_ns, hypercall_ns, scan_per_partner_ns, migration_ns)"))),
        }
    }
    let mut threads: Vec<ThreadSpec> = (0..n)
        .map(|i| ThreadSpec {
            tid: thread_tid[i],
            vm: (thread_vm[i] >= 0).then(|| VmId(thread_vm[i] as u32)),
            vcpu: (thread_vcpu[i] >= 0).then(|| thread_vcpu[i] as u32),
            phases: Vec::new(),
            start_ns: thread_start[i],
            start_cpu: u32::try_from(thread_cpu[i]).ok(),
            fine_accounting: thread_fine[i],
            work_cpu: Vec::new(),
            group: u32::try_from(thread_group[i]).ok(),
            allowed_cpus: thread_allowed[i].clone(),
            power_w: thread_power[i].filter(|w| w.is_finite() && *w >= 0.0),
        })
        .collect();
    match rows {
        // files are read without the GIL (other policies' runs go on)
        PhaseRows::Files { .. } => py.detach(|| fill_phases(&mut threads, &rows)),
        // the caller's columns are read in place, with the GIL held
        PhaseRows::Columns { .. } => fill_phases(&mut threads, &rows),
    }
    .map_err(PyValueError::new_err)?;
    // the columns are in the threads now: not held through the replay
    drop(rows);
    if vm_weights.len() != vm_names.len()
        || vm_cpu_intensive.len() != vm_names.len()
        || vm_elasticity.len() != vm_names.len()
        || vm_share.as_ref().is_some_and(|s| s.len() != vm_names.len())
        || vm_cap.as_ref().is_some_and(|c| c.len() != vm_names.len())
    {
        return Err(PyValueError::new_err(
            "replay: vm_names, vm_weights, vm_cpu_intensive and vm_elasticity differ in length",
        ));
    }
    let vms = (0..vm_names.len())
        .map(|i| VmSpec {
            name: vm_names[i].clone(),
            weight: vm_weights[i],
            cpu_intensive: vm_cpu_intensive[i],
            elasticity: vm_elasticity[i],
            share: vm_share.as_ref().map_or(1.0, |s| s[i]),
            cap: vm_cap.as_ref().and_then(|c| c[i]),
        })
        .collect();
    let groups = group_names
        .into_iter()
        .zip(group_shares)
        .map(|(name, shares)| GroupSpec { name, shares })
        .collect();
    let mut w = Workload {
        threads,
        vms,
        groups,
    };
    let h = Host {
        freq_khz,
        recorded_khz,
        elasticity,
        costs: c,
        cpu_speed,
    };
    let t0 = std::time::Instant::now();
    // the engine takes the phases over and lets each go once passed: the
    // demand it holds shrinks as the output grows
    let out = py.detach(|| replay_consuming(&mut w, &h, &p, limit_ns));
    let wall = t0.elapsed().as_secs_f64();
    let d = PyDict::new(py);
    // The per-row columns cross as one Arrow table per kind of row
    // (zero-copy, through the PyCapsule interface: no pyarrow); as Python
    // int lists they cost more than the replay. Column names are what
    // cratrace.replay.run reads.
    let table = |cols: Vec<(&str, ArrayRef)>| -> PyResult<ArrowTable> {
        RecordBatch::try_from_iter(cols)
            .map(ArrowTable::new)
            .map_err(|e| PyValueError::new_err(e.to_string()))
    };
    let st = out.states;
    d.set_item(
        "states",
        table(vec![
            ("_t", Arc::new(UInt32Array::from(st.thread)) as ArrayRef),
            ("code", Arc::new(UInt8Array::from(st.state))),
            ("start", Arc::new(Int64Array::from(st.start))),
            ("end", Arc::new(Int64Array::from(st.end))),
            ("pcpu", Arc::new(Int32Array::from(st.pcpu))),
        ])?,
    )?;
    d.set_item(
        "slices",
        table(vec![
            (
                "cpu",
                // collected in place (same layout): no second column at the peak
                Arc::new(Int32Array::from(
                    out.slice_cpu
                        .into_iter()
                        .map(|c| c as i32)
                        .collect::<Vec<i32>>(),
                )) as ArrayRef,
            ),
            ("_t", Arc::new(UInt32Array::from(out.slice_thread))),
            ("start", Arc::new(Int64Array::from(out.slice_start))),
            ("end", Arc::new(Int64Array::from(out.slice_end))),
        ])?,
    )?;
    d.set_item(
        "marks",
        table(vec![
            (
                "_t",
                Arc::new(UInt32Array::from(out.mark_thread)) as ArrayRef,
            ),
            ("ts", Arc::new(Int64Array::from(out.mark_ts))),
        ])?,
    )?;
    d.set_item(
        "episodes",
        table(vec![
            ("_t", Arc::new(UInt32Array::from(out.ep_thread)) as ArrayRef),
            ("start", Arc::new(Int64Array::from(out.ep_start))),
            ("end", Arc::new(Int64Array::from(out.ep_end))),
            ("holder", Arc::new(Int64Array::from(out.ep_holder))),
            ("exits", Arc::new(Int64Array::from(out.ep_calls))),
            ("retries", Arc::new(Int64Array::from(out.ep_retries))),
        ])?,
    )?;
    d.set_item("cpu_ns", out.cpu_ns)?;
    d.set_item("spin_ns", out.spin_ns)?;
    d.set_item("calls", out.calls)?;
    d.set_item("excessive", out.excessive)?;
    d.set_item("uncleared", out.uncleared)?;
    d.set_item("overhead_ns", out.overhead_ns)?;
    d.set_item("end_ns", out.end_ns)?;
    d.set_item("events", out.events)?;
    d.set_item("wall_s", wall)?;
    d.set_item("swaps_decided", out.swaps_decided)?;
    d.set_item("swaps_realised", out.swaps_realised)?;
    d.set_item("bal_ts", out.bal_ts)?;
    d.set_item("bal_core", out.bal_core)?;
    d.set_item("bal_energy_j", out.bal_energy_j)?;
    d.set_item("bal_temp_c", out.bal_temp_c)?;
    d.set_item("core_khz", out.core_khz)?;
    d.set_item("core_volt", out.core_volt)?;
    d.set_item("core_dynamic_w", out.core_dynamic_w)?;
    d.set_item("core_busy_ns", out.core_busy_ns)?;
    d.set_item("core_energy_j", out.core_energy_j)?;
    d.set_item("core_peak_c", out.core_peak_c)?;
    d.set_item("core_hot_ns", out.core_hot_ns)?;
    d.set_item("swap_latency_ns", out.swap_latency_ns)?;
    d.set_item("core_pool", out.core_pool)?;
    d.set_item("vcpu_pool", out.vcpu_pool)?;
    d.set_item("vcpu_class", out.vcpu_class)?;
    d.set_item("affinity_replaced", out.affinity_replaced)?;
    d.set_item("work_ns", out.work_ns)?;
    Ok(d.unbind())
}

/// The phases as `replay` was given them: four columns, or the four
/// column files of a spill (not both).
fn phase_rows<'a>(
    columns: [Option<&'a Bound<'_, PyAny>>; 4],
    files: Option<Vec<String>>,
) -> PyResult<PhaseRows<'a>> {
    let [thread, kind, a, b] = columns;
    let rows = match (thread, kind, a, b, files) {
        (None, None, None, None, Some(files)) => {
            PhaseRows::files(files).map_err(PyValueError::new_err)?
        }
        (Some(thread), Some(kind), Some(a), Some(b), None) => PhaseRows::Columns {
            // views of the caller's columns where they are packed (read
            // with the GIL held, and let go before the replay runs)
            thread: column(thread, "replay: phase_thread")?,
            kind: column(kind, "replay: phase_kind")?,
            a: column(a, "replay: phase_a")?,
            b: column(b, "replay: phase_b")?,
        },
        _ => {
            return Err(PyValueError::new_err(
                "replay: give the phases as phase_thread, phase_kind, phase_a and phase_b, or as phase_files",
            ))
        }
    };
    if let PhaseRows::Columns { thread, kind, a, b } = &rows {
        if [kind.len(), a.len(), b.len()]
            .iter()
            .any(|&l| l != thread.len())
        {
            return Err(PyValueError::new_err(
                "replay: phase_* columns differ in length",
            ));
        }
    }
    Ok(rows)
}

/// A work phase's recorded CPU: its b is 1 + the CPU the capture ran it
/// on (0: unknown).
fn work_cpu(kind: u8, b: i64) -> Option<u32> {
    (kind == 0 && b > 0)
        .then(|| u32::try_from(b - 1).ok())
        .flatten()
}

/// The engine's phase for a row's kind, a and b.
fn phase(kind: u8, a: i64, b: i64) -> Result<Phase, String> {
    Ok(match kind {
        0 => Phase::Work(a),
        1 => Phase::Block(a),
        2 => Phase::Acquire(a as u32),
        3 => Phase::Release(a as u32),
        4 => Phase::Mark,
        5 => Phase::WaitFor {
            thread: ThreadId(a as u32),
            phase: b as u32,
        },
        6 => Phase::Barrier { spin: b != 0 },
        k => return Err(format!("replay: phase kind {k} is not 0..6")),
    })
}

/// Each thread's phases from `rows`, in two passes: the first counts
/// them, so that each thread's phases take a vector of exactly their
/// number, and its recorded CPUs one only when the capture knew any (the
/// placement reads an empty list as none known): growing them by doubling
/// left up to half of each unused, and the engine keeps them for the
/// whole replay.
fn fill_phases(threads: &mut [ThreadSpec], rows: &PhaseRows) -> Result<(), String> {
    let n = threads.len();
    let mut counts = vec![0usize; n];
    let mut cpu_known = vec![false; n];
    rows.for_each(|(t, kind, _, b)| {
        let t = t as usize;
        let c = counts
            .get_mut(t)
            .ok_or_else(|| format!("replay: phase for thread {t} of {n}"))?;
        *c += 1;
        cpu_known[t] |= work_cpu(kind, b).is_some();
        Ok(())
    })?;
    for ((th, &c), &known) in threads.iter_mut().zip(&counts).zip(&cpu_known) {
        th.phases.reserve_exact(c);
        if known {
            th.work_cpu.reserve_exact(c);
        }
    }
    rows.for_each(|(t, kind, a, b)| {
        let t = t as usize;
        let th = &mut threads[t];
        th.phases.push(phase(kind, a, b)?);
        if cpu_known[t] {
            th.work_cpu.push(work_cpu(kind, b).into());
        }
        Ok(())
    })
}

/// The thermal model over a run's CPU slices (`cratrace_replay::energy::
/// thermal::profile`), for a recorded run as the engine does it for each
/// replay: each core's peak °C and its ns above `throttle_c`. `params`:
/// ambient_c, r_core_c_per_w, c_core_j_per_c, r_sink_c_per_w,
/// c_sink_j_per_c (the policy parameters of those names; missing ones
/// take their defaults).
#[pyfunction]
#[pyo3(signature = (*, cpu, start, end, watts, idle_w, cores, t0, t1, throttle_c, params, bin_ns=1_000_000))]
#[allow(clippy::too_many_arguments)]
pub fn thermal_profile(
    cpu: Vec<u32>,
    start: Vec<i64>,
    end: Vec<i64>,
    watts: Vec<f64>,
    idle_w: f64,
    cores: usize,
    t0: i64,
    t1: i64,
    throttle_c: f64,
    params: BTreeMap<String, f64>,
    bin_ns: i64,
) -> PyResult<(Vec<f64>, Vec<i64>)> {
    let n = cpu.len();
    if [start.len(), end.len(), watts.len()]
        .iter()
        .any(|&l| l != n)
    {
        return Err(PyValueError::new_err(
            "thermal_profile: cpu, start, end and watts differ in length",
        ));
    }
    let mut p = Policy::parse("fair").map_err(PyValueError::new_err)?;
    for (k, v) in &params {
        p.set(k, *v).map_err(PyValueError::new_err)?;
    }
    let prof = cratrace_replay::energy::thermal::profile(
        &cpu,
        &start,
        &end,
        &watts,
        idle_w,
        cores,
        t0,
        t1,
        bin_ns,
        p.thermal(),
        throttle_c,
    );
    Ok((prof.peak_c, prof.hot_ns))
}
