//! Non-negative least squares, for counter-based power models.
//!
//! Energy over an interval is modelled as `Σ_k w_k · Δcounter_k` (plus an
//! optional constant column for static power); the weights are fitted to
//! RAPL energy samples with `w ≥ 0`, because a negative joules-per-event
//! weight is physically meaningless and extrapolates badly. This is the
//! Lawson–Hanson active-set method on the normal equations, adequate for
//! the handful of counters a PMU gives us.

/// Fit `w ≥ 0` minimising `‖A w − b‖²`. `a` is row-major, `rows × cols`.
/// Returns None when the shapes disagree or the input is not finite.
pub fn nnls(a: &[f64], rows: usize, cols: usize, b: &[f64]) -> Option<Vec<f64>> {
    if rows == 0 || cols == 0 || a.len() != rows * cols || b.len() != rows {
        return None;
    }
    if a.iter().chain(b).any(|v| !v.is_finite()) {
        return None;
    }
    // Counters differ by many orders of magnitude (cycles vs a constant
    // column), so columns are scaled to unit norm and the weights unscaled
    // at the end; otherwise the tolerances below would drown small columns.
    let norms: Vec<f64> = (0..cols)
        .map(|j| {
            (0..rows)
                .map(|r| a[r * cols + j].powi(2))
                .sum::<f64>()
                .sqrt()
        })
        .map(|n| if n > 0.0 { n } else { 1.0 })
        .collect();
    // Normal equations on the scaled columns: G = AᵀA, h = Aᵀb.
    let mut g = vec![0.0; cols * cols];
    let mut h = vec![0.0; cols];
    for r in 0..rows {
        let row = &a[r * cols..(r + 1) * cols];
        for i in 0..cols {
            h[i] += row[i] / norms[i] * b[r];
            for j in 0..cols {
                g[i * cols + j] += row[i] / norms[i] * row[j] / norms[j];
            }
        }
    }
    let scale = g.iter().fold(0.0f64, |m, v| m.max(v.abs())).max(1e-300);
    let tol = 1e-12 * scale;
    let mut w = vec![0.0; cols];
    let mut passive = vec![false; cols];
    for _outer in 0..(3 * cols + 10) {
        // Gradient of ½‖Aw−b‖² is Gw − h; we move along −gradient.
        let grad: Vec<f64> = (0..cols)
            .map(|i| h[i] - dot(&g[i * cols..(i + 1) * cols], &w))
            .collect();
        let candidate = (0..cols)
            .filter(|&i| !passive[i] && grad[i] > tol)
            .max_by(|&x, &y| grad[x].total_cmp(&grad[y]));
        let Some(t) = candidate else { break };
        passive[t] = true;
        for _inner in 0..(3 * cols + 10) {
            let z = solve_passive(&g, &h, &passive, cols)?;
            if (0..cols).all(|i| !passive[i] || z[i] > 0.0) {
                w = z;
                break;
            }
            // Step back to the boundary and drop variables that hit zero.
            let mut alpha = f64::INFINITY;
            for i in 0..cols {
                if passive[i] && z[i] <= 0.0 {
                    alpha = alpha.min(w[i] / (w[i] - z[i]));
                }
            }
            for i in 0..cols {
                w[i] += alpha * (z[i] - w[i]);
                if passive[i] && w[i] <= tol {
                    w[i] = 0.0;
                    passive[i] = false;
                }
            }
        }
    }
    Some(w.iter().zip(&norms).map(|(w, n)| w / n).collect())
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Solve the normal equations restricted to the passive set (Gaussian
/// elimination with partial pivoting); inactive variables are zero.
fn solve_passive(g: &[f64], h: &[f64], passive: &[bool], n: usize) -> Option<Vec<f64>> {
    let idx: Vec<usize> = (0..n).filter(|&i| passive[i]).collect();
    let m = idx.len();
    let mut mat = vec![0.0; m * (m + 1)];
    for (r, &i) in idx.iter().enumerate() {
        for (c, &j) in idx.iter().enumerate() {
            mat[r * (m + 1) + c] = g[i * n + j];
        }
        mat[r * (m + 1) + m] = h[i];
    }
    for col in 0..m {
        let piv = (col..m).max_by(|&x, &y| {
            mat[x * (m + 1) + col]
                .abs()
                .total_cmp(&mat[y * (m + 1) + col].abs())
        })?;
        if mat[piv * (m + 1) + col].abs() < 1e-300 {
            return None; // singular: collinear counters
        }
        for c in 0..=m {
            mat.swap(col * (m + 1) + c, piv * (m + 1) + c);
        }
        for r in 0..m {
            if r != col {
                let f = mat[r * (m + 1) + col] / mat[col * (m + 1) + col];
                for c in col..=m {
                    mat[r * (m + 1) + c] -= f * mat[col * (m + 1) + c];
                }
            }
        }
    }
    let mut z = vec![0.0; n];
    for (r, &i) in idx.iter().enumerate() {
        z[i] = mat[r * (m + 1) + m] / mat[r * (m + 1) + r];
    }
    Some(z)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recovers_known_non_negative_weights() {
        // energy = 2e-9 J/cycle + 5e-9 J/miss + 0.5 J static per interval
        let truth = [2e-9, 5e-9, 0.5];
        let mut a = Vec::new();
        let mut b = Vec::new();
        for k in 0..20u32 {
            let cycles = 1e9 + 1e8 * (k as f64);
            let misses = 1e6 * ((k * 7 % 11) as f64 + 1.0);
            a.extend_from_slice(&[cycles, misses, 1.0]);
            b.push(truth[0] * cycles + truth[1] * misses + truth[2]);
        }
        let w = nnls(&a, 20, 3, &b).unwrap();
        for (got, want) in w.iter().zip(truth) {
            assert!((got - want).abs() <= 1e-6 * want.abs().max(1e-9), "{w:?}");
        }
    }

    #[test]
    fn clamps_a_weight_that_least_squares_would_make_negative() {
        // b depends only on x0; x1 is anti-correlated noise. Unconstrained
        // LS would give x1 a negative weight; NNLS pins it at zero.
        let rows = [[1.0, 0.0], [2.0, 1.0], [3.0, 0.0], [4.0, 1.0]];
        let a: Vec<f64> = rows.iter().flatten().copied().collect();
        let b = [1.0, 1.5, 3.0, 3.5];
        let w = nnls(&a, 4, 2, &b).unwrap();
        assert!(w[0] > 0.0);
        assert_eq!(w[1], 0.0);
    }

    #[test]
    fn shape_mismatch_and_nan_are_refused() {
        assert!(nnls(&[1.0, 2.0], 2, 2, &[1.0, 2.0]).is_none());
        assert!(nnls(&[f64::NAN], 1, 1, &[1.0]).is_none());
    }
}
