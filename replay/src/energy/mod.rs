//! Host power, energy accounting and thermal models (issue #6).
//!
//! These are pure components with no notion of scheduling: the replay
//! engine (or a report on a recorded run) feeds them per-core segments
//! "busy at frequency f for dt, on behalf of owner X" or "idle in state s
//! for dt", and they return joules and temperatures.
//!
//! * [`power`]: per-core power = static + dynamic (per-OPP table, C·f·V² by
//!   default or watts given per OPP) and idle power per idle state;
//! * [`ledger`]: conserved energy accounting (per owner + idle +
//!   unattributed = host total);
//! * [`nnls`]: counter-based power, weights fitted by non-negative least
//!   squares to RAPL energy;
//! * [`thermal`]: per-core RC thermal model with a shared heat-sink node;
//! * [`balance`]: the energy/thermal vCPU-swap rule of Klee 2007.

pub mod balance;
pub mod ledger;
pub mod nnls;
pub mod power;
pub mod thermal;
