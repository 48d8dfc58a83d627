//! Layer norm over the rows of an `f32` matrix, forward and backward, one pass each.
//!
//! Burn's layer norm is a fused op on flex without autodiff, but under autodiff it is
//! composed: ten ops forward (two means, a subtraction, a square, a square root, a
//! division, the scale and shift) and more backward, each a pass over the activations.
//! Here the forward pass keeps each row's mean and `1 / sqrt(var + eps)` for the backward.
//! Rows run in parallel; the parameter gradients are summed per block of rows and the
//! blocks added in order, so the result does not depend on the thread count.

use rayon::prelude::*;

/// Rows per parallel task.
const ROWS_PER_TASK: usize = 64;

/// What the forward pass returns.
#[derive(Debug, Clone, PartialEq)]
pub struct Forward {
    /// `(x - mean) / sqrt(var + eps) * gamma + beta`, `[rows, d]`.
    pub output: Vec<f32>,
    /// Each row's mean, `[rows]`.
    pub mean: Vec<f32>,
    /// Each row's `1 / sqrt(var + eps)`, `[rows]` (var: the biased variance).
    pub rstd: Vec<f32>,
}

/// Gradients of the input and the parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct Gradients {
    /// Of the input, `[rows, d]`.
    pub x: Vec<f32>,
    /// Of the scale, `[d]`.
    pub gamma: Vec<f32>,
    /// Of the shift, `[d]`.
    pub beta: Vec<f32>,
}

/// Layer norm of each `d`-wide row of `x`.
///
/// # Panics
/// If `x` is not a whole number of rows or `gamma`, `beta` are not `d` long.
pub fn forward(x: &[f32], gamma: &[f32], beta: &[f32], epsilon: f32) -> Forward {
    let d = gamma.len();
    assert!(
        d > 0 && x.len().is_multiple_of(d),
        "layer norm: rows of {d}"
    );
    assert_eq!(beta.len(), d, "layer norm: beta");
    let rows = x.len() / d;
    let mut output = vec![0.0f32; x.len()];
    let mut mean = vec![0.0f32; rows];
    let mut rstd = vec![0.0f32; rows];
    output
        .par_chunks_mut(ROWS_PER_TASK * d)
        .zip(mean.par_chunks_mut(ROWS_PER_TASK))
        .zip(rstd.par_chunks_mut(ROWS_PER_TASK))
        .zip(x.par_chunks(ROWS_PER_TASK * d))
        .for_each(|(((output, mean), rstd), x)| {
            for (((out, x), mean), rstd) in output
                .chunks_exact_mut(d)
                .zip(x.chunks_exact(d))
                .zip(mean.iter_mut())
                .zip(rstd.iter_mut())
            {
                let m = x.iter().sum::<f32>() / d as f32;
                let var = x.iter().map(|&v| (v - m) * (v - m)).sum::<f32>() / d as f32;
                let r = 1.0 / (var + epsilon).sqrt();
                for (((out, &x), &g), &b) in out.iter_mut().zip(x).zip(gamma).zip(beta) {
                    *out = (x - m) * r * g + b;
                }
                *mean = m;
                *rstd = r;
            }
        });
    Forward { output, mean, rstd }
}

/// The gradients given the forward input, its row statistics and the gradient of the
/// output (`[rows, d]`):
/// `dx = rstd (g - mean(g) - xhat mean(g xhat))` with `g = dy gamma`,
/// `dgamma = sum_rows dy xhat`, `dbeta = sum_rows dy`.
///
/// # Panics
/// If the lengths disagree.
pub fn backward(x: &[f32], gamma: &[f32], mean: &[f32], rstd: &[f32], dy: &[f32]) -> Gradients {
    let d = gamma.len();
    let rows = mean.len();
    assert_eq!(x.len(), rows * d, "layer norm backward: input");
    assert_eq!(dy.len(), rows * d, "layer norm backward: output gradient");
    assert_eq!(rstd.len(), rows, "layer norm backward: rstd");
    let mut dx = vec![0.0f32; x.len()];
    // One (dgamma, dbeta) partial per task, added in task order below.
    let partials: Vec<(Vec<f32>, Vec<f32>)> = dx
        .par_chunks_mut(ROWS_PER_TASK * d)
        .zip(x.par_chunks(ROWS_PER_TASK * d))
        .zip(dy.par_chunks(ROWS_PER_TASK * d))
        .zip(
            mean.par_chunks(ROWS_PER_TASK)
                .zip(rstd.par_chunks(ROWS_PER_TASK)),
        )
        .map(|(((dx, x), dy), (mean, rstd))| {
            let mut dgamma = vec![0.0f32; d];
            let mut dbeta = vec![0.0f32; d];
            for ((((dx, x), dy), &m), &r) in dx
                .chunks_exact_mut(d)
                .zip(x.chunks_exact(d))
                .zip(dy.chunks_exact(d))
                .zip(mean)
                .zip(rstd)
            {
                let mut sum_g = 0.0f32;
                let mut sum_g_xhat = 0.0f32;
                for (((&x, &dy), &g), (dgamma, dbeta)) in x
                    .iter()
                    .zip(dy)
                    .zip(gamma)
                    .zip(dgamma.iter_mut().zip(dbeta.iter_mut()))
                {
                    let xhat = (x - m) * r;
                    *dgamma += dy * xhat;
                    *dbeta += dy;
                    sum_g += dy * g;
                    sum_g_xhat += dy * g * xhat;
                }
                let mean_g = sum_g / d as f32;
                let mean_g_xhat = sum_g_xhat / d as f32;
                for (((dx, &x), &dy), &g) in dx.iter_mut().zip(x).zip(dy).zip(gamma) {
                    let xhat = (x - m) * r;
                    *dx = r * (dy * g - mean_g - xhat * mean_g_xhat);
                }
            }
            (dgamma, dbeta)
        })
        .collect();
    let mut dgamma = vec![0.0f32; d];
    let mut dbeta = vec![0.0f32; d];
    for (partial_gamma, partial_beta) in partials {
        for (total, part) in dgamma.iter_mut().zip(partial_gamma) {
            *total += part;
        }
        for (total, part) in dbeta.iter_mut().zip(partial_beta) {
            *total += part;
        }
    }
    Gradients {
        x: dx,
        gamma: dgamma,
        beta: dbeta,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic pseudo-random values in [-3, 3).
    fn values(n: usize, seed: u64) -> Vec<f32> {
        crate::fused::test_values::uniform(n, seed, 3.0)
    }

    /// The loss `sum(w * layer_norm(x))` in f64, straight from the definition.
    fn naive_loss(x: &[f32], gamma: &[f32], beta: &[f32], w: &[f32], eps: f64) -> f64 {
        let d = gamma.len();
        let mut loss = 0.0;
        for (row, w) in x.chunks_exact(d).zip(w.chunks_exact(d)) {
            let m = row.iter().map(|&v| v as f64).sum::<f64>() / d as f64;
            let var = row.iter().map(|&v| (v as f64 - m).powi(2)).sum::<f64>() / d as f64;
            for j in 0..d {
                let y = (row[j] as f64 - m) / (var + eps).sqrt() * gamma[j] as f64 + beta[j] as f64;
                loss += y * w[j] as f64;
            }
        }
        loss
    }

    #[test]
    fn forward_matches_the_definition() {
        let (rows, d) = (130, 7);
        let (x, gamma, beta) = (values(rows * d, 1), values(d, 2), values(d, 3));
        let got = forward(&x, &gamma, &beta, 1e-5);
        for (r, (row, out)) in x
            .chunks_exact(d)
            .zip(got.output.chunks_exact(d))
            .enumerate()
        {
            let m = row.iter().map(|&v| v as f64).sum::<f64>() / d as f64;
            let var = row.iter().map(|&v| (v as f64 - m).powi(2)).sum::<f64>() / d as f64;
            for j in 0..d {
                let expected =
                    (row[j] as f64 - m) / (var + 1e-5).sqrt() * gamma[j] as f64 + beta[j] as f64;
                assert!((out[j] as f64 - expected).abs() < 1e-5, "row {r}, {j}");
            }
            assert!((got.mean[r] as f64 - m).abs() < 1e-6);
        }
    }

    #[test]
    fn backward_matches_finite_differences() {
        let (rows, d) = (70, 5); // two tasks, the second partial
        let (x, gamma, beta) = (values(rows * d, 4), values(d, 5), values(d, 6));
        let w = values(rows * d, 7);
        let eps = 1e-5;
        let f = forward(&x, &gamma, &beta, eps as f32);
        let grads = backward(&x, &gamma, &f.mean, &f.rstd, &w);
        let h = 1e-3f32;
        let check = |name: &str, analytic: &[f32], nudge: &dyn Fn(usize, f32) -> f64| {
            for (i, &a) in analytic.iter().enumerate() {
                let numeric = (nudge(i, h) - nudge(i, -h)) / (2.0 * h as f64);
                assert!(
                    (a as f64 - numeric).abs() <= 2e-3 * numeric.abs().max(1.0),
                    "d{name}[{i}]: {a} against {numeric}"
                );
            }
        };
        check("x", &grads.x, &|i, delta| {
            let mut moved = x.clone();
            moved[i] += delta;
            naive_loss(&moved, &gamma, &beta, &w, eps)
        });
        check("gamma", &grads.gamma, &|i, delta| {
            let mut moved = gamma.clone();
            moved[i] += delta;
            naive_loss(&x, &moved, &beta, &w, eps)
        });
        check("beta", &grads.beta, &|i, delta| {
            let mut moved = beta.clone();
            moved[i] += delta;
            naive_loss(&x, &gamma, &moved, &w, eps)
        });
    }
}
