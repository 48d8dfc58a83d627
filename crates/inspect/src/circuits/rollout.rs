//! Attention rollout (Abnar and Zuidema 2020, "Quantifying Attention Flow in
//! Transformers"): how much of each input position reaches each position after `l + 1`
//! layers, if attention were the only way information moves and the residual connection
//! kept half of it. Per layer, `A~ = rownorm(0.5 * mean over heads A + 0.5 * I)`, and the
//! rollout after layer `l` is `A~_l A~_(l-1) ... A~_0` (row `i`: what query `i` holds of
//! each input position; rows sum to 1).

use crate::load::probe::LayerProbe;

/// The rollout after every layer, `[layer][query][input position]`, from each layer's
/// mean-over-heads attention `mean_attention` (`[layer][query][key]`, rows summing to 1).
pub fn rollout(mean_attention: &[Vec<Vec<f64>>]) -> Vec<Vec<Vec<f64>>> {
    let mut rolled: Option<Vec<Vec<f64>>> = None;
    let mut layers = vec![];
    for attention in mean_attention {
        let seq = attention.len();
        let mixed: Vec<Vec<f64>> = attention
            .iter()
            .enumerate()
            .map(|(i, row)| {
                assert_eq!(row.len(), seq, "attention is [seq, seq]");
                let row: Vec<f64> = row
                    .iter()
                    .enumerate()
                    .map(|(j, a)| 0.5 * a + if i == j { 0.5 } else { 0.0 })
                    .collect();
                let sum: f64 = row.iter().sum();
                row.iter().map(|v| v / sum).collect()
            })
            .collect();
        let next = match rolled {
            None => mixed,
            Some(previous) => matmul(&mixed, &previous),
        };
        layers.push(next.clone());
        rolled = Some(next);
    }
    layers
}

/// Each layer's attention on probe sequence `sequence`, averaged over its heads,
/// `[layer][query][key]` over the sequence's own positions (a shorter sentence's padding
/// left out).
pub fn mean_attention(layers: &[LayerProbe], sequence: usize) -> Vec<Vec<Vec<f64>>> {
    layers
        .iter()
        .map(|layer| {
            let (_, n_heads, seq) = layer.dims();
            let len = layer.lengths[sequence];
            let mut mean = vec![vec![0.0; len]; len];
            for h in 0..n_heads {
                let start = (sequence * n_heads + h) * seq * seq;
                let pattern = &layer.pattern.values[start..start + seq * seq];
                for (i, row) in mean.iter_mut().enumerate() {
                    for (j, cell) in row.iter_mut().enumerate() {
                        *cell += pattern[i * seq + j] as f64 / n_heads as f64;
                    }
                }
            }
            mean
        })
        .collect()
}

fn matmul(a: &[Vec<f64>], b: &[Vec<f64>]) -> Vec<Vec<f64>> {
    a.iter()
        .map(|row| {
            (0..b[0].len())
                .map(|j| row.iter().zip(b).map(|(x, b_row)| x * b_row[j]).sum())
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use run::tensor_file::HostTensor;

    use super::*;

    fn identity(n: usize) -> Vec<Vec<f64>> {
        (0..n)
            .map(|i| (0..n).map(|j| if i == j { 1.0 } else { 0.0 }).collect())
            .collect()
    }

    #[test]
    fn rollout_of_identity_attention_is_the_identity() {
        let rolled = rollout(&[identity(4), identity(4), identity(4)]);
        assert_eq!(rolled.len(), 3);
        assert!(rolled.iter().all(|layer| *layer == identity(4)));
    }

    #[test]
    fn rollout_multiplies_later_layers_on_the_left() {
        // Two positions. Layer 0: both look at position 0; layer 1: both look at 1.
        let to_0 = vec![vec![1.0, 0.0], vec![1.0, 0.0]];
        let to_1 = vec![vec![0.0, 1.0], vec![0.0, 1.0]];
        let rolled = rollout(&[to_0, to_1]);
        // A~_0 = [[1, 0], [0.5, 0.5]], A~_1 = [[0.5, 0.5], [0, 1]].
        assert_eq!(rolled[0], vec![vec![1.0, 0.0], vec![0.5, 0.5]]);
        // A~_1 A~_0 = [[0.75, 0.25], [0.5, 0.5]].
        assert_eq!(rolled[1], vec![vec![0.75, 0.25], vec![0.5, 0.5]]);
        for row in rolled.iter().flatten() {
            assert!((row.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        }
    }

    #[test]
    fn the_mean_is_over_one_sequences_heads() {
        // Batch 2, 2 heads, seq 2: sequence 1's heads look at 0 and at 1.
        let mut values = vec![0.0f32; 16];
        values[8..12].copy_from_slice(&[1.0, 0.0, 1.0, 0.0]);
        values[12..16].copy_from_slice(&[0.0, 1.0, 0.0, 1.0]);
        let layer = LayerProbe {
            attn_input: HostTensor {
                shape: vec![2, 2, 1],
                values: vec![0.0; 4],
            },
            pattern: HostTensor {
                shape: vec![2, 2, 2, 2],
                values,
            },
            head_outputs: HostTensor {
                shape: vec![2, 2, 2, 1],
                values: vec![0.0; 8],
            },
            lengths: vec![2, 2],
        };
        assert_eq!(mean_attention(&[layer], 1), vec![vec![vec![0.5, 0.5]; 2]]);
    }
}
