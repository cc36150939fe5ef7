//! Deterministic replay of recorded VM demand under hypervisor policies.
//!
//! # Brief overview
//!
//! A [`Workload`] (per-thread demand phases extracted from a capture's
//! model tables) runs on a [`Host`] (pCPUs with frequencies and costs)
//! under a [`Policy`] (a scheduler plus a spin response). [`replay`]
//! returns an [`Output`]: state timelines, CPU slices, throughput marks,
//! spin episodes and counters. Same inputs, same output, always.
//!
//! Besides the engine, [`energy`], [`asymmetric`] and [`postcopy`] hold the
//! power, balancing, fast/slow-core and postcopy-migration models of
//! issue #6.
#![deny(missing_docs)]

pub mod asymmetric;
pub mod demand;
pub mod energy;
mod engine;
pub mod model;
pub mod output;
pub mod policy;
pub mod postcopy;
pub mod rng;
pub mod sched;

pub use model::{
    Costs, CpuId, GroupSpec, Host, Phase, RecordedCpu, ThreadId, ThreadSpec, VmId, VmSpec, Workload,
};
pub use output::{Output, StateCode};
pub use policy::{Placement, Policy, SchedulerKind, SpinResponse, PARAMS};

/// Replay `w` on `h` under `p`, stopping at `limit_ns` of simulated time
/// at the latest.
pub fn replay(w: &Workload, h: &Host, p: &Policy, limit_ns: i64) -> Output {
    engine::Engine::new(w, h, p).run(limit_ns)
}

/// [`replay`], taking over `w`'s phases and letting each go once the
/// replay has passed it, so that what it holds of the demand shrinks as
/// its output grows (the same output, byte for byte). `w` keeps its
/// threads, VMs and groups, without their phases.
pub fn replay_consuming(w: &mut Workload, h: &Host, p: &Policy, limit_ns: i64) -> Output {
    engine::Engine::consuming(w, h, p).run(limit_ns)
}
