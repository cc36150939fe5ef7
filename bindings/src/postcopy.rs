//! `postcopy`: the postcopy-migration scenario of cratrace-replay.

use cratrace_replay::postcopy::{
    simulate, PostcopyParams, ReadyDelay, TaskSpec, Touches, PAPER_BASELINE_GUEST_SHARE,
};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::collections::BTreeMap;

/// Run the scenario. `tasks`: (vcpu, first_page, page_count, compute_ns)
/// sequential readers; `touch_lists`: explicit page lists per extra task
/// (vcpu, compute_ns, pages).
#[pyfunction]
#[pyo3(signature = (*, params, vm_pages, vcpus, tasks, touch_lists = Vec::new(), present = Vec::new()))]
pub fn postcopy(
    py: Python<'_>,
    params: BTreeMap<String, f64>,
    vm_pages: u64,
    vcpus: usize,
    tasks: Vec<(usize, u64, u64, i64)>,
    touch_lists: Vec<(usize, i64, Vec<u64>)>,
    present: Vec<u64>,
) -> PyResult<Py<PyDict>> {
    let mut p = PostcopyParams::default();
    for (k, v) in &params {
        let v = *v;
        match k.as_str() {
            "async_pf" => p.async_pf = v != 0.0,
            "page_bytes" => p.page_bytes = v as u64,
            "link_bytes_per_s" => p.link_bytes_per_s = v,
            "rtt_ns" => p.rtt_ns = v as i64,
            "msg_header_bytes" => p.msg_header_bytes = v as u64,
            "mtu_bytes" => p.mtu_bytes = v as u64,
            "frame_bytes" => p.frame_bytes = v as u64,
            "fetch_overhead_ns" => p.fetch_overhead_ns = v as i64,
            "source_service_ns" => p.source_service_ns = v as i64,
            "source_workers" => p.source_workers = v as usize,
            "max_inflight" => p.max_inflight = v as usize,
            "apf_per_vcpu" => p.apf_per_vcpu = v as usize,
            "exit_entry_ns" => p.exit_entry_ns = v as i64,
            "not_present_ns" => p.not_present_ns = v as i64,
            "guest_switch_ns" => p.guest_switch_ns = v as i64,
            "guest_wake_ns" => p.guest_wake_ns = v as i64,
            "guest_slice_ns" => p.guest_slice_ns = v as i64,
            "ready_delay_ns" => p.ready_delay = ReadyDelay::Fixed(v as i64),
            "kernel_fault_fraction" => p.kernel_fault_fraction = v,
            "background_start_ns" => p.background_start_ns = (v >= 0.0).then_some(v as i64),
            "background_depth" => p.background_depth = v as usize,
            "seed" => p.seed = v as u64,
            other => {
                return Err(PyValueError::new_err(format!(
                    "postcopy: unknown parameter {other:?}"
                )))
            }
        }
    }
    // what would divide by zero or never end (a 0 ns guest slice)
    if p.guest_slice_ns <= 0
        || p.link_bytes_per_s.is_nan()
        || p.link_bytes_per_s <= 0.0
        || p.page_bytes == 0
        || p.max_inflight == 0
        || p.source_workers == 0
        || p.mtu_bytes <= 40
        || vcpus == 0
    {
        return Err(PyValueError::new_err(
            "postcopy: guest_slice_ns, link_bytes_per_s, page_bytes, max_inflight, source_workers and vcpus must be above 0, mtu_bytes above 40",
        ));
    }
    let mut specs: Vec<TaskSpec> = tasks
        .into_iter()
        .map(|(vcpu, first, count, compute_ns)| TaskSpec {
            vcpu,
            touches: Touches::Sequential { first, count },
            compute_ns,
        })
        .collect();
    specs.extend(
        touch_lists
            .into_iter()
            .map(|(vcpu, compute_ns, pages)| TaskSpec {
                vcpu,
                touches: Touches::List(pages),
                compute_ns,
            }),
    );
    let out = py
        .detach(|| simulate(&p, vm_pages, vcpus, &specs, &present))
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    let d = PyDict::new(py);
    d.set_item("task_done_ns", out.task_done_ns)?;
    d.set_item("vcpu_guest_fraction", out.vcpu_guest_fraction)?;
    d.set_item("vcpu_elapsed_ns", out.vcpu_elapsed_ns)?;
    d.set_item("vcpu_guest_ns", out.vcpu_guest_ns)?;
    d.set_item("vcpu_host_ns", out.vcpu_host_ns)?;
    d.set_item("vcpu_halted_ns", out.vcpu_halted_ns)?;
    d.set_item("present_touches", out.present_touches)?;
    d.set_item("sync_faults", out.sync_faults)?;
    d.set_item("apf_not_present", out.apf_not_present)?;
    d.set_item("apf_ready", out.apf_ready)?;
    d.set_item("blocked_kernel", out.blocked_kernel)?;
    d.set_item("blocked_double", out.blocked_double)?;
    d.set_item("blocked_limit", out.blocked_limit)?;
    d.set_item("halts", out.halts)?;
    d.set_item("migration_done_ns", out.migration_done_ns)?;
    d.set_item("demand_bytes", out.demand_bytes)?;
    d.set_item("background_bytes", out.background_bytes)?;
    d.set_item("wire_bytes", out.wire_bytes)?;
    d.set_item("link_busy_ns", out.link_busy_ns)?;
    d.set_item("source_busy_ns", out.source_busy_ns)?;
    d.set_item("demand_fetches", out.demand_fetches)?;
    d.set_item("demand_fetch_ns", out.demand_fetch_ns)?;
    d.set_item("demand_wait_ns", out.demand_wait_ns)?;
    d.set_item("idle_fetch_ns", out.idle_fetch_ns)?;
    d.set_item("events", out.events)?;
    Ok(d.unbind())
}

/// The engine's defaults, by `--set` name, plus what they imply:
/// `compute_ns` (the working-set model's guest compute per touched page,
/// set so that the paper's sequential read spends `baseline_guest_share`
/// of its vCPU in the guest without async page faults), `idle_fetch_ns`
/// and `idle_stall_ns`.
#[pyfunction]
pub fn postcopy_defaults(py: Python<'_>) -> PyResult<Py<PyDict>> {
    let p = PostcopyParams::default();
    let d = PyDict::new(py);
    d.set_item("page_bytes", p.page_bytes)?;
    d.set_item("link_bytes_per_s", p.link_bytes_per_s)?;
    d.set_item("rtt_ns", p.rtt_ns)?;
    d.set_item("msg_header_bytes", p.msg_header_bytes)?;
    d.set_item("mtu_bytes", p.mtu_bytes)?;
    d.set_item("frame_bytes", p.frame_bytes)?;
    d.set_item("fetch_overhead_ns", p.fetch_overhead_ns)?;
    d.set_item("source_service_ns", p.source_service_ns)?;
    d.set_item("source_workers", p.source_workers)?;
    d.set_item("max_inflight", p.max_inflight)?;
    d.set_item("apf_per_vcpu", p.apf_per_vcpu)?;
    d.set_item("exit_entry_ns", p.exit_entry_ns)?;
    d.set_item("not_present_ns", p.not_present_ns)?;
    d.set_item("guest_switch_ns", p.guest_switch_ns)?;
    d.set_item("guest_wake_ns", p.guest_wake_ns)?;
    d.set_item("guest_slice_ns", p.guest_slice_ns)?;
    d.set_item("ready_delay_ns", p.ready_delay.ns())?;
    d.set_item("kernel_fault_fraction", p.kernel_fault_fraction)?;
    d.set_item("background_depth", p.background_depth)?;
    d.set_item("seed", p.seed)?;
    d.set_item("baseline_guest_share", PAPER_BASELINE_GUEST_SHARE)?;
    d.set_item(
        "compute_ns",
        p.compute_for_guest_share(PAPER_BASELINE_GUEST_SHARE),
    )?;
    d.set_item("idle_fetch_ns", p.idle_stall_ns() - p.exit_entry_ns)?;
    d.set_item("idle_stall_ns", p.idle_stall_ns())?;
    Ok(d.unbind())
}
