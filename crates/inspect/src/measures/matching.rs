//! Matching heads across runs. Heads of a layer are interchangeable (permuting them, with
//! their output-projection rows, gives the same model), so "head 1 of seed 0" and "head 1
//! of seed 3" need not be related. We pair each reference head with one head of the other
//! run, per layer, by the permutation that maximises the summed pattern similarity
//! (1 - Jensen-Shannon distance of their attention on the same probe sequences), found with
//! the Kuhn-Munkres (Hungarian) algorithm from `pathfinding`.

use pathfinding::prelude::{Matrix, kuhn_munkres};
use serde::{Deserialize, Serialize};

use crate::load::probe::LayerProbe;
use crate::measures::similarity::js_distance;

/// Similarities are scaled to integers for the assignment solver, which needs `Ord`.
const SCALE: f64 = 1e9;

/// How one layer of another run lines up with the reference run's layer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LayerMatch {
    /// Layer index.
    pub layer: usize,
    /// `partner[h]`: the other run's head matched to reference head `h`.
    pub partner: Vec<usize>,
    /// `similarity[h]`: pattern similarity of reference head `h` and its partner.
    pub similarity: Vec<f64>,
    /// `matrix[a][b]`: pattern similarity of reference head `a` and other head `b`.
    pub matrix: Vec<Vec<f64>>,
}

/// `matrix[a][b]` = 1 - mean JS distance between head `a` of `reference` and head `b` of
/// `other`, probed on the same sequences.
pub fn pattern_similarity(reference: &LayerProbe, other: &LayerProbe) -> Vec<Vec<f64>> {
    let (_, heads_a, seq) = reference.dims();
    let (_, heads_b, seq_b) = other.dims();
    assert_eq!(seq, seq_b, "probes of different sequence lengths");
    assert_eq!(
        reference.pattern.shape, other.pattern.shape,
        "probes of different shapes"
    );
    let patterns_b: Vec<Vec<f32>> = (0..heads_b).map(|h| other.head_pattern(h)).collect();
    (0..heads_a)
        .map(|a| {
            let pattern_a = reference.head_pattern(a);
            patterns_b
                .iter()
                .map(|pattern_b| 1.0 - js_distance(&pattern_a, pattern_b, seq))
                .collect()
        })
        .collect()
}

/// The assignment of rows to columns that maximises the summed similarity: `partner[row]`.
/// Needs a square matrix.
pub fn best_permutation(matrix: &[Vec<f64>]) -> Vec<usize> {
    let n = matrix.len();
    if n == 0 {
        return vec![];
    }
    assert!(
        matrix.iter().all(|row| row.len() == n),
        "head matching needs a square matrix"
    );
    let weights = Matrix::from_rows(
        matrix
            .iter()
            .map(|row| row.iter().map(|s| (s * SCALE).round() as i64)),
    )
    .expect("rows of equal length");
    kuhn_munkres(&weights).1
}

/// Matches every layer of `other` to the same layer of `reference`.
pub fn match_layers(reference: &[LayerProbe], other: &[LayerProbe]) -> Vec<LayerMatch> {
    assert_eq!(reference.len(), other.len(), "runs with different depths");
    reference
        .iter()
        .zip(other)
        .enumerate()
        .map(|(layer, (a, b))| {
            let matrix = pattern_similarity(a, b);
            let partner = best_permutation(&matrix);
            let similarity = partner
                .iter()
                .enumerate()
                .map(|(h, &p)| matrix[h][p])
                .collect();
            LayerMatch {
                layer,
                partner,
                similarity,
                matrix,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(targets: &[usize], seq: usize) -> LayerProbe {
        LayerProbe::attending_to(targets, seq)
    }

    #[test]
    fn a_permuted_copy_is_matched_back_with_similarity_one() {
        let reference = probe(&[0, 1, 2, 3], 5);
        // Other head b attends where reference head order[b] does.
        let order = [2, 0, 3, 1];
        let other = probe(&order, 5);
        let matched = match_layers(&[reference], &[other]);
        // Reference head h is other head b with order[b] = h.
        assert_eq!(matched[0].partner, vec![1, 3, 0, 2]);
        assert!(matched[0].similarity.iter().all(|s| (s - 1.0).abs() < 1e-9));
        // Heads on different keys share nothing: JS distance 1, similarity 0.
        assert!(matched[0].matrix[0][0].abs() < 1e-9);
    }

    #[test]
    fn the_best_permutation_beats_greedy_choice() {
        // Greedy row by row would give row 0 column 0 (0.9), leaving row 1 with 0.1: total
        // 1.0. The optimum is 0.8 + 0.85 = 1.65.
        let matrix = vec![vec![0.9, 0.8], vec![0.85, 0.1]];
        assert_eq!(best_permutation(&matrix), vec![1, 0]);
    }

    #[test]
    fn the_identity_is_kept_when_heads_are_already_aligned() {
        let reference = probe(&[4, 0, 2], 5);
        let layers = [reference];
        let matched = match_layers(&layers, &layers);
        assert_eq!(matched[0].partner, vec![0, 1, 2]);
    }
}
