//! Composition between layers (Elhage et al. 2021, "A Mathematical Framework for Transformer
//! Circuits", section "Q-, K- and V-composition"): how much a later head reads, through its
//! query, key or value, the subspace an earlier head writes into the residual stream.
//!
//! The score is `||W_A W_B||_F / (||W_A||_F ||W_B||_F)`, in [0, 1], with `W_A` the earlier
//! head's OV circuit. In our row-vector convention (`x @ ov` is what a head writes for a
//! unit of attention to `x`; `x_i @ qk @ x_j^T` is the score of query `i` on key `j`) the
//! three scores are, exactly as TransformerLens's `all_composition_scores` computes them
//! (`composition_scores(OV[earlier], right)`), with the paper's column-vector formulas
//! (`W_OV = W_O W_V`, `W_QK = W_Q^T W_K`) transposed into ours:
//! - Q: `||ov_A qk_B||`: the paper's `||W_QK^T W_OV||`; A's output enters B's query.
//! - K: `||ov_A qk_B^T||`: the paper's `||W_QK W_OV||`; A's output enters B's key.
//! - V: `||ov_A ov_B||`: the paper's `||W_OV^B W_OV^A||`; A's output enters B's value.
//!
//! Each denominator is the product of the two circuits' norms (`qk^T` has `qk`'s norm).
//! Like TransformerLens the scores ignore layer norm (its division by the residual's norm,
//! and here also its learned gain and bias, which TransformerLens folds into the weights
//! when loading a model and we do not), the biases, rotary positions and everything between
//! the two heads (feed-forward networks, heads in between): they compare the raw circuits.
//! No baseline is subtracted (the paper subtracts one in some figures), but
//! [`random_composition_score`] says what unrelated heads score: for two circuits at a
//! uniformly random rotation from each other, `E ||A R B||^2 = ||A||^2 ||B||^2 / d_model`, so
//! their score is about `1 / sqrt(d_model)` (0.125 at d_model 64). A circuit that is all
//! zero gives 0 rather than TransformerLens's NaN. Circuits are multiplied in their factored
//! form (`d_head x d_head` work), which equals the full product.

use crate::circuits::linalg::LowRank;

/// Which input of the later head reads the earlier head's output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Composition {
    /// Through its query.
    Query,
    /// Through its key.
    Key,
    /// Through its value.
    Value,
}

impl Composition {
    /// All three, in the order of `circuits.json` (`q`, `k`, `v`).
    pub const ALL: [Composition; 3] = [Composition::Query, Composition::Key, Composition::Value];

    /// The later head's matrix that the earlier OV circuit multiplies (TransformerLens's
    /// `right`): `qk` for Q, `qk^T` for K, `ov` for V.
    pub fn reader(self, qk: &LowRank, ov: &LowRank) -> LowRank {
        match self {
            Composition::Query => qk.clone(),
            Composition::Key => qk.transpose(),
            Composition::Value => ov.clone(),
        }
    }
}

/// `||earlier_ov @ reader||_F / (||earlier_ov||_F ||reader||_F)`; 0 when either is zero.
pub fn composition_score(earlier_ov: &LowRank, reader: &LowRank) -> f64 {
    let denominator = earlier_ov.frobenius_norm() * reader.frobenius_norm();
    if denominator == 0.0 {
        return 0.0;
    }
    earlier_ov.then(reader).frobenius_norm() / denominator
}

/// `sqrt(E[score^2]) = 1 / sqrt(d_model)`: the composition score of two circuits whose
/// subspaces are unrelated (one rotated by a uniformly random orthogonal `R`, whatever
/// their ranks), the level above which a score means something.
pub fn random_composition_score(d_model: usize) -> f64 {
    1.0 / (d_model.max(1) as f64).sqrt()
}

/// The score of every earlier head (rows) against every later head (columns) for one
/// kind of composition. `earlier_ov` are the earlier layer's OV circuits; `later` the later
/// layer's `(qk, ov)` circuits.
pub fn composition_matrix(
    kind: Composition,
    earlier_ov: &[LowRank],
    later: &[(LowRank, LowRank)],
) -> Vec<Vec<f64>> {
    let readers: Vec<LowRank> = later.iter().map(|(qk, ov)| kind.reader(qk, ov)).collect();
    earlier_ov
        .iter()
        .map(|a| readers.iter().map(|b| composition_score(a, b)).collect())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::circuits::linalg::{Matrix, pseudo_random};

    /// `||A B||_F / (||A||_F ||B||_F)` on full matrices, as the paper writes it (column
    /// vectors: `A` acts second), for checking the row-vector factored version.
    fn paper_score(first: &Matrix, second: &Matrix) -> f64 {
        second.matmul(first).frobenius_norm() / (first.frobenius_norm() * second.frobenius_norm())
    }

    /// A `[n, r]` matrix whose column `c` is `e_{rows[c]}`, times `sign`.
    fn reads(n: usize, rows: &[usize], sign: f64) -> Matrix {
        let mut m = Matrix::zeros(n, rows.len());
        for (c, &r) in rows.iter().enumerate() {
            m[(r, c)] = sign;
        }
        m
    }

    #[test]
    fn factored_scores_equal_the_papers_formulas_on_full_matrices() {
        let (n, r) = (12, 3);
        // Earlier head A, later head B, as q, k, v [n, r] and o [r, n].
        let (v_a, o_a) = (pseudo_random(n, r, 1), pseudo_random(r, n, 2));
        let (q_b, k_b) = (pseudo_random(n, r, 3), pseudo_random(n, r, 4));
        let (v_b, o_b) = (pseudo_random(n, r, 5), pseudo_random(r, n, 6));
        let ov_a = LowRank::new(v_a.clone(), o_a.clone());
        let qk_b = LowRank::new(q_b.clone(), k_b.transpose());
        let ov_b = LowRank::new(v_b.clone(), o_b.clone());

        // The paper's column-vector circuits: W_OV = W_O W_V = (v o)^T, W_QK = W_Q^T W_K =
        // q k^T (x_q^T W_QK x_k).
        let paper_ov_a = v_a.matmul(&o_a).transpose();
        let paper_ov_b = v_b.matmul(&o_b).transpose();
        let paper_qk_b = q_b.matmul(&k_b.transpose());
        let expected = [
            // Q: ||W_QK^T W_OV||.
            paper_score(&paper_ov_a, &paper_qk_b.transpose()),
            // K: ||W_QK W_OV||.
            paper_score(&paper_ov_a, &paper_qk_b),
            // V: ||W_OV^B W_OV^A||.
            paper_score(&paper_ov_a, &paper_ov_b),
        ];
        for (kind, expected) in Composition::ALL.into_iter().zip(expected) {
            let score = composition_score(&ov_a, &kind.reader(&qk_b, &ov_b));
            assert!(
                (score - expected).abs() < 1e-12,
                "{kind:?}: {score} vs {expected}"
            );
            assert!(score > 0.0 && score <= 1.0);
        }
    }

    #[test]
    fn a_key_that_reads_what_an_earlier_head_writes_k_composes_with_it() {
        // d_model 16. Earlier head 0 reads e_0..e_3 and writes them to e_8..e_11; earlier
        // head 1 writes e_12..e_15. The later head's key reads e_8..e_11 and its query
        // e_0..e_3; its value reads e_4..e_7.
        let n = 16;
        let ov = |from: &[usize], to: &[usize]| {
            LowRank::new(reads(n, from, 1.0), reads(n, to, 1.0).transpose())
        };
        let writer = ov(&[0, 1, 2, 3], &[8, 9, 10, 11]);
        let unrelated = ov(&[4, 5, 6, 7], &[12, 13, 14, 15]);
        let qk = LowRank::new(
            reads(n, &[0, 1, 2, 3], 1.0),
            reads(n, &[8, 9, 10, 11], 1.0).transpose(),
        );
        let later_ov = ov(&[4, 5, 6, 7], &[4, 5, 6, 7]);
        let matrix = |kind| {
            composition_matrix(
                kind,
                &[writer.clone(), unrelated.clone()],
                &[(qk.clone(), later_ov.clone())],
            )
        };
        let (q, k, v) = (
            matrix(Composition::Query),
            matrix(Composition::Key),
            matrix(Composition::Value),
        );
        // ov_writer qk^T = sum_i e_i e_i^T over 4 dimensions: norm 2, over 2 x 2.
        assert!((k[0][0] - 0.5).abs() < 1e-12, "{k:?}");
        assert_eq!(
            k[1][0], 0.0,
            "the unrelated head writes where the key does not read"
        );
        assert_eq!(
            q[0][0], 0.0,
            "the query reads e_0..e_3, which no head writes"
        );
        assert_eq!(q[1][0], 0.0);
        // The value reads e_4..e_7, which no head writes either.
        assert_eq!(v, [[0.0], [0.0]]);
    }

    #[test]
    fn aligned_rank_one_circuits_compose_fully_and_zero_circuits_not_at_all() {
        let n = 6;
        // ov_A = e_0 e_3^T writes e_3; the later head's query reads e_3: score 1.
        let ov_a = LowRank::new(reads(n, &[0], 2.0), reads(n, &[3], 1.0).transpose());
        let qk_b = LowRank::new(reads(n, &[3], 1.0), reads(n, &[5], -3.0).transpose());
        let ov_b = LowRank::new(reads(n, &[1], 1.0), reads(n, &[1], 1.0).transpose());
        let score = composition_score(&ov_a, &Composition::Query.reader(&qk_b, &ov_b));
        assert!((score - 1.0).abs() < 1e-12, "{score}");
        let zero = LowRank::new(Matrix::zeros(n, 1), reads(n, &[3], 1.0).transpose());
        assert_eq!(composition_score(&zero, &qk_b), 0.0);
        assert_eq!(composition_score(&ov_a, &zero.transpose()), 0.0);
    }

    #[test]
    fn unrelated_circuits_score_one_over_the_root_of_the_width_on_average() {
        // Averaging over sign flips and cyclic shifts R makes E[R X R^T] = tr(X) / n I
        // exactly, as a uniformly random rotation does: the mean squared score of A and
        // R B is then 1 / n, for any A and B.
        let n = 4;
        let a = LowRank::new(pseudo_random(n, 2, 51), pseudo_random(2, n, 52));
        let b = pseudo_random(n, n, 53);
        let mut total = 0.0;
        let mut count = 0;
        for shift in 0..n {
            for signs in 0..1u32 << n {
                let mut r = Matrix::zeros(n, n);
                for i in 0..n {
                    r[(i, (i + shift) % n)] = if signs >> i & 1 == 1 { -1.0 } else { 1.0 };
                }
                let rotated = LowRank::new(r.matmul(&b), Matrix::identity(n));
                total += composition_score(&a, &rotated).powi(2);
                count += 1;
            }
        }
        let rms = (total / count as f64).sqrt();
        assert!((rms - random_composition_score(n)).abs() < 1e-12, "{rms}");
    }
}
