//! How alike two heads are: cosine similarity of their circuits (QK, OV), Jensen-Shannon
//! distance of their attention patterns (Clark et al. 2019, "What Does BERT Look At?"), and
//! linear CKA of their outputs (Kornblith et al. 2019). Plain f32 slices in; the
//! [`LayerSimilarity`] matrices of `similarity.json` on top.

use run::snapshot::HeadTensorsByLayer;
use serde::{Deserialize, Serialize};

use crate::load::probe::LayerProbe;

/// Cosine similarity of two equally long vectors (flattened matrices); 0 when either is 0.
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    assert_eq!(a.len(), b.len(), "cosine of vectors of different lengths");
    let dot: f64 = a.iter().zip(b).map(|(x, y)| *x as f64 * *y as f64).sum();
    let norm = |v: &[f32]| v.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
    let denominator = norm(a) * norm(b);
    if denominator == 0.0 {
        0.0
    } else {
        dot / denominator
    }
}

/// Jensen-Shannon distance (the square root of the divergence, base 2, so in [0, 1]) between
/// two probability rows.
pub fn js_distance_row(p: &[f32], q: &[f32]) -> f64 {
    assert_eq!(p.len(), q.len(), "distributions of different lengths");
    let kl_to_mean = |a: &[f32]| -> f64 {
        a.iter()
            .zip(p.iter().zip(q))
            .filter(|(x, _)| **x > 0.0)
            .map(|(&x, (&pi, &qi))| {
                let mean = 0.5 * (pi as f64 + qi as f64);
                x as f64 * (x as f64 / mean).log2()
            })
            .sum()
    };
    let divergence = 0.5 * kl_to_mean(p) + 0.5 * kl_to_mean(q);
    divergence.max(0.0).sqrt()
}

/// Mean Jensen-Shannon distance between two heads' patterns over all query rows.
/// `a`, `b`: `[rows * seq]` probabilities.
pub fn js_distance(a: &[f32], b: &[f32], seq: usize) -> f64 {
    assert_eq!(a.len(), b.len(), "patterns of different sizes");
    let rows = a.len() / seq.max(1);
    let total: f64 = a
        .chunks(seq)
        .zip(b.chunks(seq))
        .map(|(p, q)| js_distance_row(p, q))
        .sum();
    total / rows.max(1) as f64
}

/// Linear CKA between two representations of the same `n` examples: `x` is `[n, dx]`,
/// `y` is `[n, dy]`, row-major. 1 for representations equal up to rotation and scale.
pub fn linear_cka(x: &[f32], dx: usize, y: &[f32], dy: usize) -> f64 {
    let (x, y) = (Centered::new(x, dx), Centered::new(y, dy));
    assert_eq!(x.rows, y.rows, "CKA of different numbers of examples");
    cka_from_parts(x.cross(&y), x.cross(&x), y.cross(&y))
}

/// Linear CKA of every pair of heads' outputs; each of `outputs` is `[n, d]` row-major.
pub fn cka_matrix(outputs: &[Vec<f32>], d: usize) -> Vec<Vec<f64>> {
    let centered: Vec<Centered> = outputs.iter().map(|o| Centered::new(o, d)).collect();
    let self_products: Vec<f64> = centered.iter().map(|c| c.cross(c)).collect();
    pairwise(outputs.len(), |i, j| {
        let cross = centered[i].cross(&centered[j]);
        cka_from_parts(cross, self_products[i], self_products[j])
    })
}

/// CKA = ||X^T Y||^2 / (||X^T X|| ||Y^T Y||), 0 when either side is constant.
fn cka_from_parts(cross: f64, xx: f64, yy: f64) -> f64 {
    let denominator = (xx * yy).sqrt();
    if denominator == 0.0 {
        0.0
    } else {
        cross / denominator
    }
}

/// A row-major `[rows, cols]` matrix with each column's mean subtracted.
struct Centered {
    values: Vec<f64>,
    rows: usize,
    cols: usize,
}

impl Centered {
    fn new(m: &[f32], cols: usize) -> Self {
        let rows = m.len() / cols.max(1);
        let mut values: Vec<f64> = m.iter().map(|&v| v as f64).collect();
        for j in 0..cols {
            let mean = (0..rows).map(|i| values[i * cols + j]).sum::<f64>() / rows.max(1) as f64;
            for i in 0..rows {
                values[i * cols + j] -= mean;
            }
        }
        Self { values, rows, cols }
    }

    /// ||self^T other||_F^2.
    fn cross(&self, other: &Centered) -> f64 {
        // product [self.cols, other.cols], accumulated row by row of the inputs.
        let mut product = vec![0.0f64; self.cols * other.cols];
        for r in 0..self.rows {
            let a = &self.values[r * self.cols..(r + 1) * self.cols];
            let b = &other.values[r * other.cols..(r + 1) * other.cols];
            for (i, &ai) in a.iter().enumerate() {
                let row = &mut product[i * other.cols..(i + 1) * other.cols];
                for (p, &bj) in row.iter_mut().zip(b) {
                    *p += ai * bj;
                }
            }
        }
        product.iter().map(|v| v * v).sum()
    }
}

/// One layer's head-by-head matrices, as written to `similarity.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LayerSimilarity {
    /// Layer index.
    pub layer: usize,
    /// Cosine similarity of the flattened QK circuits (`q k^T`, `[d_model, d_model]`).
    pub qk_cosine: Vec<Vec<f64>>,
    /// Cosine similarity of the flattened OV circuits (`v o`, `[d_model, d_model]`).
    pub ov_cosine: Vec<Vec<f64>>,
    /// Mean Jensen-Shannon distance between the heads' attention rows on the probe batch.
    pub pattern_js: Vec<Vec<f64>>,
    /// Linear CKA of the heads' outputs on the probe batch.
    pub output_cka: Vec<Vec<f64>>,
}

impl LayerSimilarity {
    /// Every matrix of layer `layer`: circuits from `weights` (with the circuits), patterns
    /// and outputs from `probe`.
    /// `with_outputs: false` skips CKA (the slowest), leaving that matrix empty.
    pub fn measure(
        layer: usize,
        weights: &HeadTensorsByLayer,
        probe: &LayerProbe,
        with_outputs: bool,
    ) -> Self {
        let (_, n_heads, seq) = probe.dims();
        let heads = &weights.layers[layer];
        let patterns: Vec<Vec<f32>> = (0..n_heads).map(|h| probe.head_pattern(h)).collect();
        let output_cka = if with_outputs {
            let outputs: Vec<Vec<f32>> = (0..n_heads).map(|h| probe.head_output(h)).collect();
            cka_matrix(&outputs, probe.d_head())
        } else {
            vec![]
        };
        Self {
            layer,
            qk_cosine: pairwise(n_heads, |i, j| {
                cosine(&heads[i].qk().values, &heads[j].qk().values)
            }),
            ov_cosine: pairwise(n_heads, |i, j| {
                cosine(&heads[i].ov().values, &heads[j].ov().values)
            }),
            pattern_js: pairwise(n_heads, |i, j| js_distance(&patterns[i], &patterns[j], seq)),
            output_cka,
        }
    }
}

/// An `n` x `n` matrix with `measure(i, j)` in every cell, computed once per pair: every
/// measure here is symmetric.
pub fn pairwise(n: usize, measure: impl Fn(usize, usize) -> f64) -> Vec<Vec<f64>> {
    let mut matrix = vec![vec![0.0; n]; n];
    for (i, j) in (0..n).flat_map(|i| (i..n).map(move |j| (i, j))) {
        let value = measure(i, j);
        matrix[i][j] = value;
        matrix[j][i] = value;
    }
    matrix
}

/// Mean of the cells off the diagonal (every distinct pair of heads); NaN with one head.
pub fn mean_off_diagonal(matrix: &[Vec<f64>]) -> f64 {
    let n = matrix.len();
    if n < 2 {
        return f64::NAN;
    }
    let total: f64 = (0..n)
        .flat_map(|i| (0..n).filter(move |&j| j != i).map(move |j| (i, j)))
        .map(|(i, j)| matrix[i][j])
        .sum();
    total / (n * (n - 1)) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identical_heads_have_similarity_one_and_distance_zero() {
        let circuit = [0.5, -1.0, 2.0, 0.25];
        assert!((cosine(&circuit, &circuit) - 1.0).abs() < 1e-12);
        let pattern = [0.7, 0.2, 0.1, 0.0, 0.5, 0.5, 1.0, 0.0, 0.0];
        assert_eq!(js_distance(&pattern, &pattern, 3), 0.0);
        let outputs = [1.0, 2.0, 3.0, 5.0, -1.0, 0.5];
        assert!((linear_cka(&outputs, 2, &outputs, 2) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn pairwise_matrices_are_symmetric_and_their_mean_skips_the_diagonal() {
        let matrix = pairwise(3, |i, j| (i + j) as f64);
        assert_eq!(matrix, [[0.0, 1.0, 2.0], [1.0, 2.0, 3.0], [2.0, 3.0, 4.0]]);
        assert_eq!(mean_off_diagonal(&matrix), 2.0);
        assert!(mean_off_diagonal(&pairwise(1, |_, _| 1.0)).is_nan());
    }

    #[test]
    fn opposite_and_disjoint_heads_are_as_far_apart_as_the_measures_go() {
        assert!((cosine(&[1.0, 2.0], &[-1.0, -2.0]) + 1.0).abs() < 1e-12);
        assert!((cosine(&[1.0, 0.0], &[0.0, 3.0])).abs() < 1e-12);
        // Disjoint supports: JS distance 1 (base 2).
        assert!((js_distance_row(&[1.0, 0.0], &[0.0, 1.0]) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn js_distance_matches_a_hand_computation() {
        // p = (1/2, 1/2), q = (1, 0): m = (3/4, 1/4).
        // KL(p||m) = 1/2 log2(2/3) + 1/2 log2(2); KL(q||m) = log2(4/3).
        let kl_p = 0.5 * (2.0f64 / 3.0).log2() + 0.5 * 2.0f64.log2();
        let kl_q = (4.0f64 / 3.0).log2();
        let expected = (0.5 * kl_p + 0.5 * kl_q).sqrt();
        assert!((js_distance_row(&[0.5, 0.5], &[1.0, 0.0]) - expected).abs() < 1e-12);
    }

    #[test]
    fn cka_ignores_rotation_and_scale_but_not_unrelated_structure() {
        // y = 3 * x rotated by 90 degrees.
        let x = [1.0, 0.0, 0.0, 2.0, -1.0, 1.0, 0.5, -0.5];
        let y: Vec<f32> = x
            .chunks(2)
            .flat_map(|r| [-3.0 * r[1], 3.0 * r[0]])
            .collect();
        assert!((linear_cka(&x, 2, &y, 2) - 1.0).abs() < 1e-9);
        let unrelated = [1.0, 1.0, -1.0, 1.0, 1.0, -1.0, -1.0, -1.0];
        assert!(linear_cka(&x, 2, &unrelated, 2) < 0.9);
    }

    #[test]
    fn the_cka_matrix_agrees_with_pairwise_cka() {
        let a = vec![1.0, 0.0, 0.0, 2.0, -1.0, 1.0, 0.5, -0.5];
        let b = vec![1.0, 1.0, -1.0, 1.0, 1.0, -1.0, -1.0, -1.0];
        let c = vec![0.3, 2.0, 1.0, -1.0, 0.0, 0.0, 4.0, 1.5];
        let outputs = [a, b, c];
        let matrix = cka_matrix(&outputs, 2);
        for i in 0..3 {
            for j in 0..3 {
                let direct = linear_cka(&outputs[i], 2, &outputs[j], 2);
                assert!((matrix[i][j] - direct).abs() < 1e-12, "({i}, {j})");
            }
        }
        assert!((matrix[1][1] - 1.0).abs() < 1e-12);
    }
}
