//! Matching heads across runs. Heads of a layer are interchangeable (permuting them, with
//! their output-projection rows, gives the same model), so "head 1 of seed 0" and "head 1
//! of seed 3" need not be related. We pair each reference head with one head of the other
//! run, per layer, by the permutation that maximises the summed pattern similarity
//! (1 - Jensen-Shannon distance of their attention on the same probe sequences), found with
//! the Kuhn-Munkres (Hungarian) algorithm from `pathfinding`.
//!
//! Models of different grids (a distilled model's 6 layers against its teacher's 12) have no
//! layer to layer correspondence: [`match_across_layers`] pairs each reference head with a
//! head of any layer of the other model, one to one over the whole model, by the same
//! criterion (the reference with at most as many heads as the other).

use pathfinding::prelude::{Matrix, kuhn_munkres};
use serde::{Deserialize, Serialize};

use model::HeadId;

use crate::load::probe::LayerProbe;
use crate::measures::similarity::js_distance;

/// Similarities are scaled to integers for the assignment solver, which needs `Ord`.
const SCALE: f64 = 1e9;

/// How one layer of another run lines up with the reference run's layer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LayerMatch {
    /// Layer index.
    pub layer: usize,
    /// `partner[h]`: the other run's head matched to reference head `h` (its index in its
    /// own layer, `partner_layer[h]`).
    pub partner: Vec<usize>,
    /// `partner_layer[h]`: the layer of reference head `h`'s partner: this layer, unless the
    /// models were matched across layers. Empty in a `matching.json` written before it
    /// existed (this layer).
    #[serde(default)]
    pub partner_layer: Vec<usize>,
    /// `similarity[h]`: pattern similarity of reference head `h` and its partner.
    pub similarity: Vec<f64>,
    /// `matrix[a][b]`: pattern similarity of reference head `a` and other head `b` of this
    /// layer; matched across layers, of every head of the other model, `b = layer * heads +
    /// head`.
    pub matrix: Vec<Vec<f64>>,
}

impl LayerMatch {
    /// The other model's head matched to reference head `h`.
    pub fn partner_of(&self, h: usize) -> HeadId {
        let layer = self.partner_layer.get(h).copied().unwrap_or(self.layer);
        HeadId::new(layer, self.partner[h])
    }
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
    best_assignment(matrix)
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
                partner_layer: vec![layer; partner.len()],
                partner,
                similarity,
                matrix,
            }
        })
        .collect()
}

/// The pattern similarity (1 - mean JS distance) of head `a` of `reference` and head `b` of
/// `other`, probed on the same sequences.
pub fn head_similarity(reference: &LayerProbe, a: usize, other: &LayerProbe, b: usize) -> f64 {
    let (_, _, seq) = reference.dims();
    1.0 - js_distance(&reference.head_pattern(a), &other.head_pattern(b), seq)
}

/// Matches every head of `reference` to a head of any layer of `other`, one to one over the
/// whole model, maximising the summed pattern similarity: for models of different grids.
///
/// # Panics
/// If `reference` has more heads in all than `other`.
pub fn match_across_layers(reference: &[LayerProbe], other: &[LayerProbe]) -> Vec<LayerMatch> {
    let heads_of = |layers: &[LayerProbe]| layers.first().map_or(0, |l| l.dims().1);
    let (heads_a, heads_b) = (heads_of(reference), heads_of(other));
    let others: Vec<HeadId> = (0..other.len())
        .flat_map(|layer| (0..heads_b).map(move |head| HeadId::new(layer, head)))
        .collect();
    assert!(
        reference.len() * heads_a <= others.len(),
        "the reference has more heads than the other model"
    );
    // Each head's pattern once: [head, layer-major][batch * seq * seq].
    let patterns_b: Vec<Vec<f32>> = others
        .iter()
        .map(|id| other[id.layer].head_pattern(id.head))
        .collect();
    // [reference head, layer-major][other head, layer-major]
    let mut rows: Vec<Vec<f64>> = Vec::with_capacity(reference.len() * heads_a);
    for layer in reference {
        let (_, _, seq) = layer.dims();
        for a in 0..heads_a {
            let pattern_a = layer.head_pattern(a);
            rows.push(
                patterns_b
                    .iter()
                    .map(|pattern_b| 1.0 - js_distance(&pattern_a, pattern_b, seq))
                    .collect(),
            );
        }
    }
    let partners = best_assignment(&rows);
    rows.chunks(heads_a.max(1))
        .zip(partners.chunks(heads_a.max(1)))
        .enumerate()
        .map(|(layer, (matrix, partners))| LayerMatch {
            layer,
            partner: partners.iter().map(|&p| others[p].head).collect(),
            partner_layer: partners.iter().map(|&p| others[p].layer).collect(),
            similarity: matrix
                .iter()
                .zip(partners)
                .map(|(row, &p)| row[p])
                .collect(),
            matrix: matrix.to_vec(),
        })
        .collect()
}

/// The assignment of rows to distinct columns (at least as many) that maximises the summed
/// similarity: `partner[row]`.
fn best_assignment(matrix: &[Vec<f64>]) -> Vec<usize> {
    if matrix.is_empty() {
        return vec![];
    }
    let weights = Matrix::from_rows(
        matrix
            .iter()
            .map(|row| row.iter().map(|s| (s * SCALE).round() as i64)),
    )
    .expect("rows of equal length");
    kuhn_munkres(&weights).1
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
    fn heads_are_matched_across_layers_to_the_most_similar_head_of_any_layer() {
        // The reference: 1 layer of 2 heads on keys 3 and 0. The other: 2 layers of 2 heads,
        // on keys 1, 0 (layer 0) and 2, 3 (layer 1). Key 3 is in layer 1, key 0 in layer 0.
        let reference = [probe(&[3, 0], 5)];
        let other = [probe(&[1, 0], 5), probe(&[2, 3], 5)];
        let matched = match_across_layers(&reference, &other);
        assert_eq!(matched.len(), 1);
        assert_eq!(
            [matched[0].partner_of(0), matched[0].partner_of(1)],
            [HeadId::new(1, 1), HeadId::new(0, 1)]
        );
        assert!(matched[0].similarity.iter().all(|s| (s - 1.0).abs() < 1e-9));
        // A row per reference head, a column per head of the other model, layer-major.
        assert_eq!(matched[0].matrix[0].len(), 4);
        assert!((matched[0].matrix[0][3] - 1.0).abs() < 1e-9);
        // The same as a pair of heads measured alone.
        let alone = head_similarity(&reference[0], 0, &other[1], 0);
        assert!((alone - matched[0].matrix[0][2]).abs() < 1e-12);
        // One to one: two reference heads on one key get two different heads.
        let twins = [probe(&[0, 0], 5)];
        let matched = match_across_layers(&twins, &other);
        assert_ne!(matched[0].partner_of(0), matched[0].partner_of(1));
    }

    #[test]
    fn the_identity_is_kept_when_heads_are_already_aligned() {
        let reference = probe(&[4, 0, 2], 5);
        let layers = [reference];
        let matched = match_layers(&layers, &layers);
        assert_eq!(matched[0].partner, vec![0, 1, 2]);
    }
}
