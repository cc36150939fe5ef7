//! A thread's demand as the engine reads it: borrowed from the caller's
//! workload, or handed over and given back to the kernel as the thread
//! passes it.
//!
//! The engine reads a thread's phases in order and never one it has
//! passed again (causal waits count completed phases; the recorded
//! placement looks ahead). Of demand it owns, the memory pages wholly
//! behind the thread are released (`madvise(MADV_DONTNEED)`, the vector
//! itself left where it is), so what a long replay holds of its demand
//! shrinks as its output grows instead of the two adding up. Releasing
//! pages, not reallocating, is what gives the memory back whatever the
//! allocator does with freed blocks (a shrunk vector's tail stays in the
//! heap) and copies nothing.

use crate::model::{Phase, RecordedCpu};

/// Pages are released once at least this many bytes of a column are
/// behind the thread: one call per 1 MiB passed.
const RELEASE_STEP: usize = 1 << 20;

/// One thread's phases and the CPUs the capture ran its work on (empty:
/// none known).
pub(super) enum ThreadDemand<'a> {
    /// The caller keeps them.
    Borrowed {
        phases: &'a [Phase],
        cpus: &'a [RecordedCpu],
    },
    /// Handed over; the pages of phases before `released` are given back.
    Owned {
        phases: Vec<Phase>,
        cpus: Vec<RecordedCpu>,
        released: usize,
    },
}

impl ThreadDemand<'_> {
    fn slices(&self) -> (&[Phase], &[RecordedCpu], usize) {
        match self {
            ThreadDemand::Borrowed { phases, cpus } => (phases, cpus, 0),
            ThreadDemand::Owned {
                phases,
                cpus,
                released,
            } => (phases, cpus, *released),
        }
    }

    /// Phase `i` of the thread (None past its last). `i` is never a phase
    /// already passed.
    pub(super) fn get(&self, i: usize) -> Option<Phase> {
        let (phases, _, released) = self.slices();
        debug_assert!(
            i >= released,
            "phase {i} was given back (before {released})"
        );
        phases.get(i).copied()
    }

    /// Phases from `i` on, with their recorded CPUs when any are known
    /// (None when `i` is past the end or, with CPUs known, past theirs).
    pub(super) fn from(&self, i: usize) -> (&[Phase], Option<&[RecordedCpu]>) {
        let (phases, cpus, released) = self.slices();
        debug_assert!(
            i >= released,
            "phase {i} was given back (before {released})"
        );
        (phases.get(i..).unwrap_or(&[]), cpus.get(i..))
    }

    /// The phases not yet passed (all of them before the replay starts).
    pub(super) fn ahead(&self) -> &[Phase] {
        let (phases, _, released) = self.slices();
        &phases[released..]
    }

    /// The thread is at phase `i`: owned phases before it may go.
    pub(super) fn passed(&mut self, i: usize) {
        if let ThreadDemand::Owned {
            phases,
            cpus,
            released,
        } = self
        {
            let i = i.min(phases.len());
            if (i - *released) * std::mem::size_of::<Phase>() >= RELEASE_STEP {
                give_back(&phases[*released..i]);
                give_back(cpus.get(*released..i).unwrap_or(&[]));
                *released = i;
            }
        }
    }
}

/// Return to the kernel the whole pages that `done` lies on, keeping the
/// memory mapped: read again they would be zeros, and they never are.
fn give_back<T>(done: &[T]) {
    #[cfg(unix)]
    {
        let page = page_size();
        let start = done.as_ptr() as usize;
        let end = start + std::mem::size_of_val(done);
        let (first, last) = (start.div_ceil(page) * page, end / page * page);
        if last > first {
            // SAFETY: [first, last) lies within `done`, memory this thread
            // owns and will not read again; MADV_DONTNEED on private memory
            // leaves it mapped (zero-filled on a later touch) and is only
            // advice, so a failure changes nothing.
            unsafe {
                libc::madvise(
                    first as *mut libc::c_void,
                    last - first,
                    libc::MADV_DONTNEED,
                );
            }
        }
    }
    #[cfg(not(unix))]
    let _ = done;
}

#[cfg(unix)]
fn page_size() -> usize {
    use std::sync::OnceLock;
    static PAGE: OnceLock<usize> = OnceLock::new();
    // SAFETY: sysconf has no preconditions
    *PAGE.get_or_init(|| match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
        n if n > 0 => n as usize,
        _ => 4096,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Of the pages `v`'s buffer lies on, how many are resident (mincore:
    /// about this buffer alone, whatever other tests allocate meanwhile).
    fn resident_pages<T>(v: &[T]) -> usize {
        let page = page_size();
        let start = v.as_ptr() as usize / page * page;
        let end = (v.as_ptr() as usize + std::mem::size_of_val(v)).div_ceil(page) * page;
        let mut flags = vec![0u8; (end - start) / page];
        // SAFETY: [start, end) covers the pages of a live buffer; mincore
        // only reports on them
        let rc =
            unsafe { libc::mincore(start as *mut libc::c_void, end - start, flags.as_mut_ptr()) };
        assert_eq!(rc, 0, "mincore");
        flags.iter().filter(|&&f| f & 1 == 1).count()
    }

    /// Resident pages of a thread's whole demand, phases and CPUs.
    fn resident(d: &ThreadDemand) -> usize {
        let (phases, cpus, _) = d.slices();
        resident_pages(phases) + resident_pages(cpus)
    }

    #[test]
    fn owned_demand_reads_like_borrowed_and_gives_back_what_is_passed() {
        // 64 MiB of phases and 16 of CPUs
        let n = (64 << 20) / std::mem::size_of::<Phase>();
        let phases: Vec<Phase> = (0..n as i64).map(Phase::Work).collect();
        let cpus: Vec<RecordedCpu> = (0..n as u32).map(|c| Some(c % 3).into()).collect();
        let mut owned = ThreadDemand::Owned {
            phases: phases.clone(),
            cpus: cpus.clone(),
            released: 0,
        };
        let borrowed = ThreadDemand::Borrowed {
            phases: &phases,
            cpus: &cpus,
        };
        let pages = resident(&owned);
        for i in 0..n {
            assert_eq!(owned.get(i), borrowed.get(i), "phase {i}");
            if i % 4099 == 0 {
                let (a, b) = (owned.from(i), borrowed.from(i));
                assert_eq!(a.0.len(), b.0.len());
                assert_eq!(a.1.map(|c| c[0]), b.1.map(|c| c[0]));
            }
            owned.passed(i + 1);
        }
        assert_eq!(owned.get(n), None);
        assert!(owned.ahead().len() < RELEASE_STEP / std::mem::size_of::<Phase>());
        let left = resident(&owned);
        // all resident at first; at the end, no more than the last
        // release step's worth of each column
        let step = RELEASE_STEP / page_size();
        assert!(pages > 20 * step, "{pages} pages resident at first");
        assert!(
            left <= 2 * step + 4,
            "{left} of {pages} pages still resident"
        );
    }
}
