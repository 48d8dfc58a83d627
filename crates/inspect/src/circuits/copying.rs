//! Copying (Elhage et al. 2021, "A Mathematical Framework for Transformer Circuits", section
//! "Detecting copying behavior"): the eigenvalue score `sum(lambda) / sum(|lambda|)` of a
//! head's OV circuit. Positive eigenvalues mean that what the head reads comes out along
//! the same direction (copying), negative ones that it comes out reversed, complex ones that
//! it is rotated; the score is 1 for the identity, -1 for its negation, 0 for a rotation by
//! 90 degrees and for a nilpotent map (one that writes where it does not read). It is
//! defined as 0 for a circuit with no nonzero eigenvalue. `sum(lambda)` is real (complex
//! eigenvalues come in conjugate pairs): it is the trace.
//!
//! Two circuits are scored:
//! - `ov` alone, `[d_model, d_model]`: does the head write back the residual directions it
//!   reads?
//! - the full OV circuit `E ov U` (the paper's `W_U W_OV W_E`, transposed into our
//!   row-vector convention), `[vocab_size, n_outputs]`: token embedding `E`, then the head,
//!   then the output layer `U`, the direct path with positions, layer norms, biases and every
//!   other layer left out. Eigenvalues need a square matrix, so it is scored only when the
//!   task has as many output classes as input tokens; it reads as copying where class `t`
//!   stands for token `t` (the copy, reverse and sort tasks; for neighbors and histogram the
//!   matrix is square but class `t` means a sum or a count).
//!
//! A circuit of rank `r` (`d_head`) is kept as its factors `L R`, `L` `[n, r]`, `R` `[r, n]`:
//! `L R` and `R L` have the same nonzero eigenvalues, so the eigenvalues of the `r x r`
//! matrix `R L` are those of the circuit, less `n - r` zeros that change neither sum.

use crate::circuits::linalg::{Complex, LowRank, Matrix, NoConvergence, eigenvalues};

/// `sum(lambda) / sum(|lambda|)`; 0 when every eigenvalue is 0.
pub fn eigenvalue_score(eigenvalues: &[Complex]) -> f64 {
    let total: f64 = eigenvalues.iter().map(|z| z.re).sum();
    let total_modulus: f64 = eigenvalues.iter().map(|z| z.abs()).sum();
    if total_modulus == 0.0 {
        0.0
    } else {
        total / total_modulus
    }
}

/// The eigenvalues of the square matrix `L R`, less `n - r` zeros: those of `R L`, largest
/// modulus first.
///
/// # Panics
/// If `L R` is not square.
pub fn low_rank_eigenvalues(circuit: &LowRank) -> Result<Vec<Complex>, NoConvergence> {
    assert_eq!(
        circuit.left.rows(),
        circuit.right.cols(),
        "eigenvalues of a circuit that is not square"
    );
    let mut values = eigenvalues(&circuit.right.matmul(&circuit.left))?;
    values.sort_by(|a, b| b.abs().total_cmp(&a.abs()));
    Ok(values)
}

/// The full OV circuit `E ov U`, factored as `(E left) (right U)`: `embedding` is
/// `[vocab_size, d_model]`, `unembedding` `[d_model, n_outputs]`. The definition; reports
/// score it with [`full_eigenvalues`], which never multiplies through the vocabulary, and
/// the tests hold the two equal.
pub fn full_circuit(embedding: &Matrix, ov: &LowRank, unembedding: &Matrix) -> LowRank {
    LowRank::new(embedding.matmul(&ov.left), ov.right.matmul(unembedding))
}

/// The nonzero eigenvalues of the full OV circuit `E ov U` (as [`full_circuit`] factors
/// it), largest magnitude first, from `unembed_embed` = `U E` (`[d_model, d_model]`): those of
/// `right (U E) left`, a `[d_head, d_head]` matrix, whatever the vocabulary's size.
pub fn full_eigenvalues(
    ov: &LowRank,
    unembed_embed: &Matrix,
) -> Result<Vec<Complex>, NoConvergence> {
    let core = ov.right.matmul(unembed_embed).matmul(&ov.left);
    let mut values = eigenvalues(&core)?;
    values.sort_by(|a, b| b.abs().total_cmp(&a.abs()));
    Ok(values)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::circuits::linalg::pseudo_random;

    /// `score * I` on the first `r` of `n` dimensions, as factors `[n, r] [r, n]`.
    fn scaled_projection(n: usize, r: usize, sign: f64) -> LowRank {
        let mut left = Matrix::zeros(n, r);
        let mut right = Matrix::zeros(r, n);
        for i in 0..r {
            left[(i, i)] = 1.0;
            right[(i, i)] = sign;
        }
        LowRank::new(left, right)
    }

    fn score(circuit: &LowRank) -> f64 {
        eigenvalue_score(&low_rank_eigenvalues(circuit).unwrap())
    }

    #[test]
    fn the_identity_copies_its_negation_anti_copies_a_quarter_turn_does_neither() {
        assert!((score(&scaled_projection(5, 5, 1.0)) - 1.0).abs() < 1e-12);
        assert!((score(&scaled_projection(5, 5, -1.0)) + 1.0).abs() < 1e-12);
        // A head that copies its own 3-dimensional subspace of a 8-dimensional stream.
        assert!((score(&scaled_projection(8, 3, 2.5)) - 1.0).abs() < 1e-12);
        // A 90-degree rotation of the (e_0, e_1) plane: eigenvalues +-i, score 0.
        let quarter = LowRank::new(
            Matrix::identity(2),
            Matrix::from_rows(&[&[0.0, 1.0], &[-1.0, 0.0]]),
        );
        let values = low_rank_eigenvalues(&quarter).unwrap();
        assert!(
            values
                .iter()
                .all(|z| (z.abs() - 1.0).abs() < 1e-12 && z.re.abs() < 1e-12)
        );
        assert!(score(&quarter).abs() < 1e-12);
        // Reading e_0 and writing e_1 is nilpotent: all eigenvalues 0, score 0.
        let shift = LowRank::new(
            Matrix::from_rows(&[&[1.0], &[0.0]]),
            Matrix::from_rows(&[&[0.0, 1.0]]),
        );
        assert_eq!(score(&shift), 0.0);
    }

    #[test]
    fn a_mix_scores_its_trace_over_its_absolute_eigenvalues() {
        // diag(3, -1) and a rotation by 60 degrees scaled by 2 (eigenvalues 1 +- i sqrt 3):
        // (3 - 1 + 2) / (3 + 1 + 2 + 2).
        let c = 2.0 * 60f64.to_radians().cos();
        let s = 2.0 * 60f64.to_radians().sin();
        let m = Matrix::from_rows(&[
            &[3.0, 0.0, 0.0, 0.0],
            &[0.0, -1.0, 0.0, 0.0],
            &[0.0, 0.0, c, -s],
            &[0.0, 0.0, s, c],
        ]);
        let circuit = LowRank::new(Matrix::identity(4), m);
        assert!((score(&circuit) - 0.5).abs() < 1e-12);
    }

    #[test]
    fn a_low_rank_circuit_has_the_nonzero_eigenvalues_of_its_full_matrix() {
        let circuit = LowRank::new(pseudo_random(10, 3, 31), pseudo_random(3, 10, 32));
        let factored = low_rank_eigenvalues(&circuit).unwrap();
        let full = eigenvalues(&circuit.product()).unwrap();
        assert_eq!(factored.len(), 3);
        let mut full_by_modulus = full.clone();
        full_by_modulus.sort_by(|a, b| b.abs().total_cmp(&a.abs()));
        for (f, g) in factored.iter().zip(&full_by_modulus) {
            assert!((f.re - g.re).abs() < 1e-9 && (f.im.abs() - g.im.abs()).abs() < 1e-9);
        }
        // The other seven are zero, so both scores agree.
        assert!(full_by_modulus[3..].iter().all(|z| z.abs() < 1e-9));
        assert!((eigenvalue_score(&factored) - eigenvalue_score(&full)).abs() < 1e-9);
    }

    #[test]
    fn the_full_circuit_is_embedding_then_head_then_output_layer() {
        // Embedding maps token t to e_{2t}, the head e_{2t} -> e_{2t+1}, the output layer
        // e_{2t+1} -> class t: token t comes out as class t, score 1, while ov alone
        // writes where it does not read, score 0.
        let (vocab, n) = (3, 6);
        let mut embedding = Matrix::zeros(vocab, n);
        let mut unembedding = Matrix::zeros(n, vocab);
        let (mut left, mut right) = (Matrix::zeros(n, vocab), Matrix::zeros(vocab, n));
        for t in 0..vocab {
            embedding[(t, 2 * t)] = 1.0;
            left[(2 * t, t)] = 1.0;
            right[(t, 2 * t + 1)] = 1.0;
            unembedding[(2 * t + 1, t)] = 1.0;
        }
        let ov = LowRank::new(left, right);
        let full = full_circuit(&embedding, &ov, &unembedding);
        assert_eq!(full.product(), Matrix::identity(vocab));
        assert!((score(&full) - 1.0).abs() < 1e-12);
        assert_eq!(score(&ov), 0.0);
        let naive = embedding.matmul(&ov.product()).matmul(&unembedding);
        assert_eq!(full.product(), naive);
    }

    #[test]
    fn the_full_eigenvalues_through_u_e_are_those_of_the_full_circuit() {
        // A vocabulary larger than the model, as BERT's: 40 tokens, width 6, head size 3.
        let embedding = pseudo_random(40, 6, 1);
        let unembedding = pseudo_random(6, 40, 2);
        let ov = LowRank::new(pseudo_random(6, 3, 3), pseudo_random(3, 6, 4));
        let want = low_rank_eigenvalues(&full_circuit(&embedding, &ov, &unembedding)).unwrap();
        let got = full_eigenvalues(&ov, &unembedding.matmul(&embedding)).unwrap();
        assert_eq!(got.len(), want.len());
        for (a, b) in got.iter().zip(&want) {
            assert!(
                (a.re - b.re).abs() < 1e-9 && (a.im - b.im).abs() < 1e-9,
                "{a:?} {b:?}"
            );
        }
        assert!(want[0].abs() > 0.1, "a circuit with something to compare");
    }
}
