//! Effective rank (Roy and Vetterli 2007, "The effective rank: a measure of effective
//! dimensionality"): `exp(H(p))` with `p_k = sigma_k / sum(sigma)` the normalised singular
//! values and `H` their Shannon entropy in nats. It is `n` for `n` equal singular values
//! (the identity of size `n`), 1 for a rank-1 matrix, in between when some directions
//! dominate, and defined as 0 for the zero matrix.
//!
//! Measured on each head's QK and OV circuits (at most `d_head`: the bottleneck of
//! Bhojanapalli et al. 2020, "Low-Rank Bottleneck in Multi-head Attention Models") and on a
//! layer's query (and key) projections of all heads side by side, `[d_model, n_heads *
//! d_head]`: Cordonnier et al. 2020 ("Multi-Head Attention: Collaborate Instead of
//! Concatenate") found those concatenations of low rank, the heads sharing their
//! subspaces; an effective rank near one head's `d_head` says the heads read the same
//! directions, one near `min(d_model, n_heads * d_head)` that each reads its own.

use crate::circuits::linalg::{
    LowRank, Matrix, column_norms, orthogonalize_columns, singular_values,
};

/// `exp` of the entropy of the normalised singular values; 0 when they are all 0.
pub fn effective_rank(singular_values: &[f64]) -> f64 {
    let total: f64 = singular_values.iter().sum();
    if total <= 0.0 {
        return 0.0;
    }
    let entropy: f64 = singular_values
        .iter()
        .map(|s| s / total)
        .filter(|&p| p > 0.0)
        .map(|p| -p * p.ln())
        .sum();
    entropy.exp()
}

/// The singular values of `L R` (`L` `[n, r]`, `R` `[r, m]`), largest first, less the
/// zeros beyond the `r`-th: one-sided Jacobi on `R^T` gives `R = V W^T` with `W`'s columns
/// orthogonal (norms `sigma`), so `L R = (L V diag(sigma)) U^T` with `U` orthonormal, and
/// `L R` has the singular values of the `[n, r]` matrix `L V diag(sigma)`.
pub fn low_rank_singular_values(circuit: &LowRank) -> Vec<f64> {
    let (w, v) = orthogonalize_columns(&circuit.right.transpose());
    let sigma = column_norms(&w);
    singular_values(&circuit.left.matmul(&v).scale_columns(&sigma))
}

/// The singular values of a layer's projections side by side, largest first: each of
/// `parts` is one head's `[d_model, d_head]`.
pub fn concatenated_singular_values(parts: &[Matrix]) -> Vec<f64> {
    singular_values(&Matrix::hstack(parts))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::circuits::linalg::pseudo_random;

    #[test]
    fn the_identity_has_full_effective_rank_and_an_outer_product_one() {
        for n in [1, 4, 16] {
            let values = singular_values(&Matrix::identity(n));
            assert!(
                (effective_rank(&values) - n as f64).abs() < 1e-12,
                "n = {n}"
            );
        }
        let u = Matrix::from_rows(&[&[1.0], &[-2.0], &[0.5], &[3.0]]);
        let v = Matrix::from_rows(&[&[2.0, 1.0, 0.0, -1.0]]);
        let outer = LowRank::new(u, v);
        assert!((effective_rank(&singular_values(&outer.product())) - 1.0).abs() < 1e-9);
        assert!((effective_rank(&low_rank_singular_values(&outer)) - 1.0).abs() < 1e-12);
        assert_eq!(effective_rank(&singular_values(&Matrix::zeros(3, 3))), 0.0);
        assert_eq!(effective_rank(&[]), 0.0);
    }

    #[test]
    fn effective_rank_matches_a_hand_computed_entropy() {
        // sigma = (3, 1): p = (3/4, 1/4), H = -(3/4 ln 3/4 + 1/4 ln 1/4).
        let h = -(0.75f64 * 0.75f64.ln() + 0.25 * 0.25f64.ln());
        assert!((effective_rank(&[3.0, 1.0]) - h.exp()).abs() < 1e-12);
        // Scale does not matter, zeros add nothing.
        assert!((effective_rank(&[30.0, 10.0, 0.0, 0.0]) - h.exp()).abs() < 1e-12);
        // Two equal values: 2.
        assert!((effective_rank(&[0.5, 0.5]) - 2.0).abs() < 1e-12);
    }

    #[test]
    fn a_low_rank_circuit_has_the_singular_values_of_its_full_matrix() {
        let circuit = LowRank::new(pseudo_random(11, 4, 41), pseudo_random(4, 9, 42));
        let factored = low_rank_singular_values(&circuit);
        let full = singular_values(&circuit.product());
        assert_eq!(factored.len(), 4);
        assert_eq!(full.len(), 9);
        for (f, g) in factored.iter().zip(&full) {
            assert!((f - g).abs() < 1e-10, "{factored:?} vs {full:?}");
        }
        assert!(full[4..].iter().all(|s| s.abs() < 1e-10));
        // A rank-deficient factor: r = 4 but rank 2.
        let thin = LowRank::new(
            pseudo_random(11, 2, 43).matmul(&pseudo_random(2, 4, 44)),
            pseudo_random(4, 9, 45),
        );
        let values = low_rank_singular_values(&thin);
        assert!(values[2..].iter().all(|s| s.abs() < 1e-10), "{values:?}");
        let expected = effective_rank(&singular_values(&thin.product()));
        assert!((effective_rank(&values) - expected).abs() < 1e-9);
    }

    #[test]
    fn heads_reading_the_same_directions_share_one_rank_and_disjoint_ones_add_up() {
        // Two heads of d_head 2 in d_model 6: the same projection twice has effective rank
        // 2; projections onto disjoint coordinates, 4.
        let read = |rows: [usize; 2]| {
            let mut m = Matrix::zeros(6, 2);
            m[(rows[0], 0)] = 1.0;
            m[(rows[1], 1)] = 1.0;
            m
        };
        let shared = concatenated_singular_values(&[read([0, 1]), read([0, 1])]);
        assert!((effective_rank(&shared) - 2.0).abs() < 1e-12, "{shared:?}");
        let disjoint = concatenated_singular_values(&[read([0, 1]), read([2, 3])]);
        assert!(
            (effective_rank(&disjoint) - 4.0).abs() < 1e-12,
            "{disjoint:?}"
        );
    }
}
