//! Postcopy live migration, with and without guest-cooperative (async)
//! page faults (issue #6; ../shared/papers/postcopy.md).
//!
//! At the switch the VM resumes at the destination with its pages absent
//! (or only the precopy remainder absent). Pages arrive on demand and,
//! optionally, in a background stream; a vCPU that touches an absent page
//! either stalls until it arrives (no async PF, a fault in guest kernel
//! mode, a page already being waited for, or too many async faults
//! outstanding) or, with async PF, parks the faulting task, runs another
//! runnable task of the VM (halting if none) and is told when the page is
//! ready. This module simulates exactly that level: guest tasks on vCPUs;
//! the vCPU-on-pCPU scheduling is the main engine's business.
//!
//! Split along the model's seams: [`params`] (documented defaults),
//! [`network`] (fetch timing: a shared link and a source serving a bounded
//! number of pages at once), [`sim`] (the event loop).

pub mod network;
pub mod params;
pub mod sim;

pub use params::{PostcopyParams, ReadyDelay, PAPER_BASELINE_GUEST_SHARE};
pub use sim::{simulate, PostcopyOutcome, TaskSpec, Touches};
