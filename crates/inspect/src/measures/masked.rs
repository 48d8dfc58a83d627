//! The model's answers on masked words, one per masked word in order of example and
//! position: what the ceiling ([`super::ceiling`]) and the relation ablation
//! (`interventions::relation_ablation`) both count.

use burn::prelude::*;
use burn::tensor::activation::log_softmax;
use model::{Encoder, EncoderInput, HeadId};
use run::tensor_file::HostTensor;
use tasks::Example;
use tasks::batch::{Batch, scored_rows};

/// Sequences per forward pass.
const BATCH: usize = 64;

/// Every masked word of `examples`, in order of example and position: `(example, position,
/// target)`.
pub fn masked_targets(examples: &[Example]) -> impl Iterator<Item = (usize, usize, u32)> + '_ {
    examples.iter().enumerate().flat_map(|(e, example)| {
        example
            .target
            .iter()
            .enumerate()
            .filter_map(move |(position, target)| target.map(|t| (e, position, t)))
    })
}

/// Per masked word (in the order of [`masked_targets`]): whether `model`, with head
/// `zeroed` zeroed if any, predicts it (its most probable class is the target).
pub fn right_answers(
    model: &Encoder,
    examples: &[Example],
    zeroed: Option<HeadId>,
    device: &Device,
) -> Vec<bool> {
    right_answers_with(model, examples, device, |_, _, input| match zeroed {
        Some(id) => input.head_mask(model.head_mask_keeping(|h| h != id, device)),
        None => input,
    })
}

/// [`right_answers`] with each batch's input changed by `intervene` (given the index of the
/// batch's first example, the batch and its plain input) before the forward pass: how an
/// intervention on a head is counted.
pub fn right_answers_with(
    model: &Encoder,
    examples: &[Example],
    device: &Device,
    intervene: impl Fn(usize, &Batch, EncoderInput) -> EncoderInput,
) -> Vec<bool> {
    answers_with(model, examples, device, intervene)
        .into_iter()
        .map(|answer| answer.right)
        .collect()
}

/// The model's answer on one masked word.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MaskedAnswer {
    /// Its most probable class is the target.
    pub right: bool,
    /// Its cross-entropy in nats: minus the log-probability of the target.
    pub loss: f64,
}

/// Per masked word (in the order of [`masked_targets`]): whether `model` predicts it and
/// its loss, with each batch's input changed by `intervene` as in [`right_answers_with`].
/// Only the masked positions' logits are normalised, so a large vocabulary costs one row
/// per masked word, not one per position.
pub fn answers_with(
    model: &Encoder,
    examples: &[Example],
    device: &Device,
    intervene: impl Fn(usize, &Batch, EncoderInput) -> EncoderInput,
) -> Vec<MaskedAnswer> {
    let mut answers = Vec::new();
    for (c, chunk) in examples.chunks(BATCH).enumerate() {
        // [scored] each: the flat `batch * seq` row of every masked word, in the order of
        // `masked_targets`, and its target.
        let (rows, targets) = scored_rows(chunk, device);
        if rows.dims()[0] == 0 {
            continue;
        }
        let batch = Batch::new(chunk, device);
        let input = intervene(c * BATCH, &batch, batch.encoder_input());
        let logits = model.forward_input(input); // [batch, seq, classes]
        let [sequences, seq, classes] = logits.dims();
        let scored = logits.reshape([sequences * seq, classes]).select(0, rows); // [scored, classes]
        let predicted = HostTensor::of(scored.clone().argmax(1).float()).values; // [scored, 1]
        let log_likelihood = log_softmax(scored, 1).gather(1, targets.unsqueeze_dim::<2>(1)); // [scored, 1]
        let log_likelihood = HostTensor::of(log_likelihood).values;
        // The targets are on the host already, in the same order.
        let targets = masked_targets(chunk).map(|(_, _, target)| target);
        answers.extend(predicted.iter().zip(targets).zip(&log_likelihood).map(
            |((&predicted, target), &log_likelihood)| MaskedAnswer {
                right: predicted as u32 == target,
                loss: -f64::from(log_likelihood),
            },
        ));
    }
    answers
}
