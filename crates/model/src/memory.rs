//! The activations of one forward pass, per sequence: the one estimate of how much memory a
//! batch of a model holds. `train` checks every tensor of a training batch and an evaluation
//! chunk against its per-tensor cap before a run starts; `inspect` sums them to size its
//! probe batch. Counts are upper bounds: every layout is counted as if each head read the
//! full input, and sizes multiply in u128, saturating, so absurd sizes neither wrap nor
//! overflow.

use crate::encoder::EncoderConfig;

/// One kind of activation tensor of a forward pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Activation {
    /// Its shape after the batch axis, in config keys, and what it is: "model.n_heads x
    /// the task's sequence length squared: its attention patterns".
    pub shape: &'static str,
    /// Values one sequence adds to one such tensor.
    pub values_per_sequence: u128,
    /// How many such tensors one forward pass holds at once.
    pub copies: u128,
}

/// The product of sizes in u128, saturating.
pub fn product(factors: &[usize]) -> u128 {
    factors
        .iter()
        .fold(1u128, |acc, &f| acc.saturating_mul(f as u128))
}

/// Every activation tensor of `model`'s forward pass over sequences of `seq_len` with
/// `n_outputs` classes, largest kinds first: attention patterns (scores and probabilities
/// per layer), queries, keys and values, feed-forward activations, logits, the heads'
/// outputs, and the hidden states (the embedding, and per layer its input, normed input,
/// attention output and residual).
pub fn forward_activations(
    model: &EncoderConfig,
    seq_len: usize,
    n_outputs: usize,
) -> [Activation; 6] {
    let (d, h, dh, ff, layers) = (
        model.d_model,
        model.n_heads,
        model.resolved_d_head(),
        model.d_ff,
        model.n_layers as u128,
    );
    let seq = seq_len;
    [
        Activation {
            shape: "model.n_heads x the task's sequence length squared: its attention patterns",
            values_per_sequence: product(&[h, seq, seq]),
            copies: layers.saturating_mul(2),
        },
        Activation {
            shape: "the task's sequence length x 3 x model.n_heads x the head size: its \
                    queries, keys and values",
            values_per_sequence: product(&[seq, 3, h, dh]),
            copies: layers,
        },
        Activation {
            shape: "the task's sequence length x model.d_ff: its feed-forward activations",
            values_per_sequence: product(&[seq, ff]),
            copies: layers,
        },
        Activation {
            shape: "the task's sequence length x the task's classes: its logits",
            values_per_sequence: product(&[seq, n_outputs]),
            copies: 1,
        },
        Activation {
            shape: "the task's sequence length x model.n_heads x the head size: its heads' \
                    outputs",
            values_per_sequence: product(&[seq, h, dh]),
            copies: layers,
        },
        Activation {
            shape: "the task's sequence length x model.d_model: its hidden states",
            values_per_sequence: product(&[seq, d]),
            copies: layers.saturating_mul(4).saturating_add(1),
        },
    ]
}

/// Values one sequence adds to a whole forward pass: every activation with its copies.
pub fn forward_values_per_sequence(
    model: &EncoderConfig,
    seq_len: usize,
    n_outputs: usize,
) -> u128 {
    forward_activations(model, seq_len, n_outputs)
        .iter()
        .fold(0u128, |sum, a| {
            sum.saturating_add(a.values_per_sequence.saturating_mul(a.copies))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sum_counts_every_tensor_of_the_forward_pass_by_hand() {
        let model = EncoderConfig {
            d_model: 8,
            n_layers: 2,
            n_heads: 2,
            d_ff: 16,
            ..EncoderConfig::default()
        };
        let (seq, outputs, dh) = (5, 3, 4);
        // embedding, then per layer: 4 hidden-sized tensors, q/k/v and head outputs (4 x
        // heads x d_head per position), scores and probabilities, the feed-forward hidden
        // layer; then the logits.
        let per_layer = 4 * seq * 8 + 4 * seq * 2 * dh + 2 * 2 * seq * seq + seq * 16;
        let expected = seq * 8 + 2 * per_layer + seq * outputs;
        assert_eq!(
            forward_values_per_sequence(&model, seq, outputs),
            expected as u128
        );
    }

    #[test]
    fn absurd_sizes_saturate_instead_of_wrapping() {
        let model = EncoderConfig {
            d_model: usize::MAX,
            n_layers: usize::MAX,
            ..EncoderConfig::default()
        };
        assert_eq!(
            forward_values_per_sequence(&model, usize::MAX, 2),
            u128::MAX
        );
    }
}
