//! The energy/thermal balancing rule for vCPUs (Klee 2007; see
//! ../shared/papers/thermal.md §1.3–1.4 and issue #6).
//!
//! Every accounting period each core `i` reports `e_i`, its energy in the
//! period, and keeps `E_i`, its energy over a longer window *before* this
//! period. Cores are sorted by `e`; the hottest is paired with the coolest,
//! the second hottest with the second coolest, and so on, and each pair's
//! vCPUs swap cores when [`should_swap`] says so. Swaps keep exactly one
//! vCPU per core, so a mapping is always a permutation.

/// How `E` (the long-window energy) is kept.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Window {
    /// Everything since the start (the thesis's proofs use this).
    Cumulative,
    /// The last `c` periods.
    Sliding(usize),
    /// Exponentially decayed: `E ← λ·E + e` each period, `0 < λ < 1`.
    Exponential(f64),
}

/// Floor for `e` (the rule needs `e > 0`; idle cores would give 0).
pub const E_FLOOR_J: f64 = 1e-12;

/// The pairwise rule. `k > 1` is the ratio threshold. Symmetric in its
/// two cores: the caller need not order them.
pub fn should_swap(big_e_i: f64, e_i: f64, big_e_j: f64, e_j: f64, k: f64) -> bool {
    let (big_e_i, e_i, big_e_j, e_j) = if e_i < e_j {
        (big_e_j, e_j.max(E_FLOOR_J), big_e_i, e_i.max(E_FLOOR_J))
    } else {
        (big_e_i, e_i.max(E_FLOOR_J), big_e_j, e_j.max(E_FLOOR_J))
    };
    if e_i == e_j {
        return false;
    }
    if e_i > k * e_j {
        // a large difference: swap unless the hot core stays behind anyway
        big_e_i + e_i >= big_e_j + e_j
    } else {
        // a small difference: swap only against long-term drift
        big_e_i - big_e_j > (k - 1.0) * e_j
    }
}

/// Pairs of cores whose vCPUs should swap this period, hottest-first.
/// Ties in `e` are broken by core index so the result is deterministic.
pub fn plan_swaps(e: &[f64], big_e: &[f64], k: f64) -> Vec<(usize, usize)> {
    let mut order: Vec<usize> = (0..e.len()).collect();
    order.sort_by(|&a, &b| e[b].total_cmp(&e[a]).then(a.cmp(&b)));
    let mut out = Vec::new();
    let (mut lo, mut hi) = (0usize, order.len());
    while lo + 1 < hi {
        hi -= 1;
        let (i, j) = (order[lo], order[hi]);
        if should_swap(big_e[i], e[i], big_e[j], e[j], k) {
            out.push((i, j));
        }
        lo += 1;
    }
    out
}

/// Per-core energy history implementing a [`Window`].
#[derive(Clone, Debug)]
pub struct EnergyWindow {
    window: Window,
    big_e: Vec<f64>,
    recent: Vec<std::collections::VecDeque<f64>>,
}

impl EnergyWindow {
    /// Empty history for `cores` cores.
    pub fn new(cores: usize, window: Window) -> Self {
        EnergyWindow {
            window,
            big_e: vec![0.0; cores],
            recent: vec![Default::default(); cores],
        }
    }

    /// `E` per core (energy in the window before the current period).
    pub fn big_e(&self) -> &[f64] {
        &self.big_e
    }

    /// Fold in the period's energies once the decision has been made.
    pub fn push(&mut self, e: &[f64]) {
        for (i, &ei) in e.iter().enumerate() {
            match self.window {
                Window::Cumulative => self.big_e[i] += ei,
                Window::Exponential(lambda) => self.big_e[i] = lambda * self.big_e[i] + ei,
                Window::Sliding(c) => {
                    let q = &mut self.recent[i];
                    q.push_back(ei);
                    self.big_e[i] += ei;
                    while q.len() > c.max(1) {
                        self.big_e[i] -= q.pop_front().unwrap_or(0.0);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The seven cases of thermal.md §1.4, each from its defining condition.
    #[test]
    fn the_seven_published_cases() {
        let k = 1.1;
        // 1: equal e → no swap
        assert!(!should_swap(5.0, 2.0, 1.0, 2.0, k));
        // 2: e_i > k e_j and 0 < E_i < E_j + e_j − e_i → no swap
        assert!(!should_swap(1.0, 3.0, 10.0, 1.0, k));
        // 3: e_i > k e_j and 0 ≤ E_j − E_i ≤ e_i − e_j → swap
        assert!(should_swap(5.0, 3.0, 6.0, 1.0, k));
        // 4: e_i > k e_j and E_i > E_j → swap
        assert!(should_swap(9.0, 3.0, 2.0, 1.0, k));
        // 5: e_j < e_i ≤ k e_j and E_i − E_j > (k−1) e_j → swap
        assert!(should_swap(10.0, 1.05, 9.0, 1.0, k));
        // 6: e_j < e_i ≤ k e_j and E_i − E_j ≤ (k−1) e_j → no swap
        assert!(!should_swap(9.05, 1.05, 9.0, 1.0, k));
        // 7: e_j < e_i ≤ k e_j and E_j > E_i → no swap
        assert!(!should_swap(8.0, 1.05, 9.0, 1.0, k));
    }

    #[test]
    fn rule_is_symmetric_in_its_cores() {
        for &(a, b, c, d) in &[
            (1.0, 3.0, 10.0, 1.0),
            (9.0, 3.0, 2.0, 1.0),
            (10.0, 1.05, 9.0, 1.0),
        ] {
            assert_eq!(should_swap(a, b, c, d, 1.1), should_swap(c, d, a, b, 1.1));
        }
    }

    #[test]
    fn pairs_hottest_with_coolest_and_keeps_a_permutation() {
        // four cores, all large differences and equal history → every pair swaps
        let e = [1.0, 8.0, 2.0, 5.0];
        let big = [0.0; 4];
        assert_eq!(plan_swaps(&e, &big, 1.1), vec![(1, 0), (3, 2)]);
        // odd count: the middle core is left alone
        assert_eq!(plan_swaps(&[3.0, 1.0, 2.0], &[0.0; 3], 1.1), vec![(0, 1)]);
    }

    #[test]
    fn windows_keep_the_energy_they_promise() {
        let mut cum = EnergyWindow::new(1, Window::Cumulative);
        let mut sl = EnergyWindow::new(1, Window::Sliding(2));
        let mut ex = EnergyWindow::new(1, Window::Exponential(0.5));
        for e in [1.0, 2.0, 4.0] {
            cum.push(&[e]);
            sl.push(&[e]);
            ex.push(&[e]);
        }
        assert_eq!(cum.big_e()[0], 7.0);
        assert_eq!(sl.big_e()[0], 6.0);
        assert_eq!(ex.big_e()[0], 0.25 * 1.0 + 0.5 * 2.0 + 4.0);
    }
}
