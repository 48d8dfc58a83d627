//! How alike two heads are: cosine similarity of their circuits (QK, OV), Jensen-Shannon
//! distance of their attention patterns (Clark et al. 2019, "What Does BERT Look At?"), and
//! linear CKA of their outputs (Kornblith et al. 2019). Plain f32 slices in.

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
    let n = x.len() / dx.max(1);
    assert_eq!(
        n,
        y.len() / dy.max(1),
        "CKA of different numbers of examples"
    );
    let centered = |m: &[f32], d: usize| -> Vec<f64> {
        let mut out: Vec<f64> = m.iter().map(|&v| v as f64).collect();
        for j in 0..d {
            let mean = (0..n).map(|i| out[i * d + j]).sum::<f64>() / n.max(1) as f64;
            for i in 0..n {
                out[i * d + j] -= mean;
            }
        }
        out
    };
    let (x, y) = (centered(x, dx), centered(y, dy));
    // ||A^T B||_F^2 for column-major-free row-major matrices A [n, da], B [n, db].
    let cross = |a: &[f64], da: usize, b: &[f64], db: usize| -> f64 {
        let mut total = 0.0;
        for i in 0..da {
            for j in 0..db {
                let s: f64 = (0..n).map(|r| a[r * da + i] * b[r * db + j]).sum();
                total += s * s;
            }
        }
        total
    };
    let denominator = (cross(&x, dx, &x, dx) * cross(&y, dy, &y, dy)).sqrt();
    if denominator == 0.0 {
        0.0
    } else {
        cross(&x, dx, &y, dy) / denominator
    }
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
}
