//! Examples to tensors, the masked per-position cross-entropy, and accuracy. Batches are a
//! pure function of (seed, step), so a resumed run draws exactly the batches it would have.

use burn::prelude::*;
use burn::tensor::activation::log_softmax;
use model::{AttentionMask, EncoderInput};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::example::Example;
use crate::task::Task;

/// Sequences per evaluation forward pass: bounds the memory of evaluating a large set.
pub const EVAL_CHUNK: usize = 256;

/// A batch on a device. Examples of different lengths are padded to the longest: padded
/// positions hold token 0, are never scored, and are masked as keys ([`Batch::mask`]), so no
/// real position attends to them.
#[derive(Debug, Clone)]
pub struct Batch {
    /// `[batch, seq]` input ids.
    pub tokens: Tensor<2, Int>,
    /// `[batch, seq]` target ids (0 where unscored).
    pub targets: Tensor<2, Int>,
    /// `[batch, seq]`: 1 where the position is scored, 0 where its target is `None` or the
    /// position is padding.
    pub weights: Tensor<2>,
    /// `[batch, seq]`: `true` at padding; `None` when every example has the batch's length.
    pub padding: Option<Tensor<2, Bool>>,
}

impl Batch {
    /// Stacks `examples` into tensors on `device`, padding each to the longest.
    pub fn new(examples: &[Example], device: &Device) -> Self {
        let batch = examples.len();
        let seq = examples.iter().map(|e| e.input.len()).max().unwrap_or(0);
        let mut tokens = Vec::with_capacity(batch * seq);
        let mut targets = Vec::with_capacity(batch * seq);
        let mut weights = Vec::with_capacity(batch * seq);
        let mut padding = Vec::with_capacity(batch * seq);
        for example in examples {
            for i in 0..seq {
                let target = example.target.get(i).copied().flatten();
                tokens.push(example.input.get(i).map_or(0, |&t| t as i64));
                targets.push(target.map_or(0, |t| t as i64));
                weights.push(if target.is_some() { 1.0f32 } else { 0.0 });
                padding.push(i >= example.input.len());
            }
        }
        let padded = padding.iter().any(|&pad| pad);
        Self {
            tokens: Tensor::from_data(TensorData::new(tokens, [batch, seq]), device),
            targets: Tensor::from_data(TensorData::new(targets, [batch, seq]), device),
            weights: Tensor::from_data(TensorData::new(weights, [batch, seq]), device),
            padding: padded
                .then(|| Tensor::from_data(TensorData::new(padding, [batch, seq]), device)),
        }
    }

    /// The key mask that hides padding from every query (empty when nothing is padded).
    pub fn mask(&self) -> AttentionMask {
        AttentionMask {
            pad: self.padding.clone(),
            attn: None,
        }
    }

    /// The encoder's input: the tokens with [`Batch::mask`].
    pub fn encoder_input(&self) -> EncoderInput {
        EncoderInput::new(self.tokens.clone()).mask(self.mask())
    }
}

/// Mixes a seed and a counter into a new seed (SplitMix64's finaliser), so that nearby
/// steps get unrelated streams.
pub fn mix_seed(seed: u64, counter: u64) -> u64 {
    let mut z = seed ^ counter.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The training examples of step `step`.
pub fn training_examples(task: &Task, seed: u64, step: usize, batch_size: usize) -> Vec<Example> {
    let mut rng = ChaCha8Rng::seed_from_u64(mix_seed(seed, step as u64));
    (0..batch_size).map(|_| task.sample(&mut rng)).collect()
}

/// Mean cross-entropy over scored positions.
///
/// # Shapes
/// - `logits`: `[batch, seq, classes]`; `targets`, `weights`: `[batch, seq]` -> `[1]`
pub fn masked_cross_entropy(
    logits: Tensor<3>,
    targets: Tensor<2, Int>,
    weights: Tensor<2>,
) -> Tensor<1> {
    let scored = weights.clone().sum().clamp_min(1.0);
    masked_cross_entropy_sum(logits, targets, weights) / scored
}

/// Summed (not averaged) cross-entropy over scored positions: what a shard of a batch
/// contributes before dividing by the whole batch's scored positions.
///
/// # Shapes
/// - `logits`: `[batch, seq, classes]`; `targets`, `weights`: `[batch, seq]` -> `[1]`
pub fn masked_cross_entropy_sum(
    logits: Tensor<3>,
    targets: Tensor<2, Int>,
    weights: Tensor<2>,
) -> Tensor<1> {
    weighted_log_likelihood(logits, targets, weights)
        .sum()
        .neg()
}

/// The scored positions of `examples` as a batch of them lays them out (padded to the
/// longest): their flat indices `b * seq + s` and their targets, for a model that applies its
/// output layer at those positions only ([`model::Encoder::forward_at`]).
///
/// # Shapes
/// -> `([scored], [scored])`
pub fn scored_rows(examples: &[Example], device: &Device) -> (Tensor<1, Int>, Tensor<1, Int>) {
    let seq = examples.iter().map(|e| e.input.len()).max().unwrap_or(0);
    let (mut rows, mut targets) = (vec![], vec![]);
    for (b, example) in examples.iter().enumerate() {
        for (s, target) in example.target.iter().enumerate() {
            if let Some(target) = target {
                rows.push((b * seq + s) as i64);
                targets.push(*target as i64);
            }
        }
    }
    let n = rows.len();
    (
        Tensor::from_data(TensorData::new(rows, [n]), device),
        Tensor::from_data(TensorData::new(targets, [n]), device),
    )
}

/// Summed cross-entropy of logits at scored positions only ([`scored_rows`]): what
/// [`masked_cross_entropy_sum`] gives for the same positions, without the unscored ones'
/// logits.
///
/// # Shapes
/// - `logits`: `[scored, classes]`; `targets`: `[scored]` -> `[1]`
pub fn scored_cross_entropy_sum(logits: Tensor<2>, targets: Tensor<1, Int>) -> Tensor<1> {
    log_softmax(logits, 1)
        .gather(1, targets.unsqueeze_dim::<2>(1)) // [scored, 1]
        .sum()
        .neg()
}

/// Each position's log-probability of its target, times its weight (0 where unscored).
///
/// # Shapes
/// - `logits`: `[batch, seq, classes]`; `targets`, `weights`: `[batch, seq]` -> `[batch, seq]`
pub fn weighted_log_likelihood(
    logits: Tensor<3>,
    targets: Tensor<2, Int>,
    weights: Tensor<2>,
) -> Tensor<2> {
    let log_probs = log_softmax(logits, 2); // [batch, seq, classes]
    let picked = log_probs
        .gather(2, targets.unsqueeze_dim::<3>(2))
        .squeeze_dim::<2>(2); // [batch, seq]
    picked * weights
}

/// Token and whole-sequence accuracy counts of one batch.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Accuracy {
    /// Scored positions predicted right.
    pub correct_tokens: usize,
    /// Scored positions.
    pub scored_tokens: usize,
    /// Sequences with every scored position right.
    pub correct_sequences: usize,
    /// Sequences.
    pub sequences: usize,
}

impl Accuracy {
    /// Counts right predictions. `logits`: `[batch, seq, classes]`.
    pub fn of(logits: Tensor<3>, examples: &[Example]) -> Self {
        let [batch, seq, _] = logits.dims();
        let predicted: Vec<i64> = logits
            .argmax(2)
            .into_data()
            .try_into_vec_as::<i64>()
            .expect("argmax gives integers");
        let mut accuracy = Accuracy {
            sequences: batch,
            ..Accuracy::default()
        };
        for (b, example) in examples.iter().enumerate() {
            let mut all_right = true;
            for (i, target) in example.target.iter().enumerate() {
                if let Some(target) = target {
                    let right = predicted[b * seq + i] == *target as i64;
                    accuracy.scored_tokens += 1;
                    accuracy.correct_tokens += right as usize;
                    all_right &= right;
                }
            }
            accuracy.correct_sequences += all_right as usize;
        }
        accuracy
    }

    /// Adds another batch's counts.
    pub fn add(&mut self, other: Accuracy) {
        self.correct_tokens += other.correct_tokens;
        self.scored_tokens += other.scored_tokens;
        self.correct_sequences += other.correct_sequences;
        self.sequences += other.sequences;
    }

    /// Fraction of scored tokens right.
    pub fn token_accuracy(&self) -> f64 {
        self.correct_tokens as f64 / self.scored_tokens.max(1) as f64
    }

    /// Fraction of sequences entirely right.
    pub fn sequence_accuracy(&self) -> f64 {
        self.correct_sequences as f64 / self.sequences.max(1) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cross_entropy_ignores_unscored_positions_and_matches_a_hand_computation() {
        let device = Device::flex();
        // One sequence of two positions, two classes; position 1 unscored.
        let logits = Tensor::<3>::from_floats([[[2.0, 0.0], [0.0, 50.0]]], &device);
        let examples = [Example {
            input: vec![0, 1],
            target: vec![Some(0), None],
        }];
        let batch = Batch::new(&examples, &device);
        let loss: f32 =
            masked_cross_entropy(logits.clone(), batch.targets, batch.weights).into_scalar();
        let expected = -(2.0f32.exp() / (2.0f32.exp() + 1.0)).ln();
        assert!((loss - expected).abs() < 1e-6, "{loss} vs {expected}");
        let accuracy = Accuracy::of(logits, &examples);
        assert_eq!((accuracy.correct_tokens, accuracy.scored_tokens), (1, 1));
        assert_eq!(accuracy.correct_sequences, 1);
    }

    /// Padding is never scored, is masked as a key, and leaves the real positions' logits as
    /// they are without it: the padded batch gives the unpadded example's numbers.
    #[test]
    fn padded_positions_are_masked_and_unscored() {
        let device = Device::flex();
        let short = Example {
            input: vec![3, 1],
            target: vec![Some(2), Some(0)],
        };
        let long = Example {
            input: vec![0, 1, 2, 3],
            target: vec![None, Some(1), Some(2), Some(3)],
        };
        let batch = Batch::new(&[short.clone(), long], &device);
        assert_eq!(batch.tokens.dims(), [2, 4]);
        let weights: Vec<f32> = batch.weights.clone().into_data().try_to_vec().unwrap();
        assert_eq!(weights, [1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0]);
        let padding: Vec<bool> = batch
            .padding
            .clone()
            .unwrap()
            .into_data()
            .try_to_vec()
            .unwrap();
        assert_eq!(
            padding,
            [false, false, true, true, false, false, false, false]
        );
        assert!(
            Batch::new(std::slice::from_ref(&short), &device)
                .padding
                .is_none()
        );

        let io = model::EncoderIo {
            vocab_size: 4,
            n_outputs: 4,
            max_seq_len: 4,
        };
        let config = model::EncoderConfig {
            d_model: 8,
            n_heads: 2,
            n_layers: 2,
            d_ff: 16,
            ..model::EncoderConfig::default()
        };
        let encoder = config.init(&io, &device).unwrap();
        let padded: Vec<f32> = encoder
            .forward_input(batch.encoder_input())
            .slice([0..1, 0..2])
            .into_data()
            .try_to_vec()
            .unwrap();
        let alone: Vec<f32> = encoder
            .forward_input(Batch::new(&[short], &device).encoder_input())
            .into_data()
            .try_to_vec()
            .unwrap();
        for (a, b) in padded.iter().zip(&alone) {
            assert!((a - b).abs() < 1e-5, "{a} vs {b}");
        }
    }

    #[test]
    fn seeds_are_mixed_per_step() {
        assert_ne!(mix_seed(1, 0), mix_seed(1, 1));
        assert_ne!(mix_seed(1, 0), mix_seed(2, 0));
        assert_eq!(mix_seed(5, 9), mix_seed(5, 9));
    }
}
