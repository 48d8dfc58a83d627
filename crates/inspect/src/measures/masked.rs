//! The model's answers on masked words, one per masked word in order of example and
//! position: what the ceiling ([`super::ceiling`]) and the relation ablation
//! (`interventions::relation_ablation`) both count.

use burn::prelude::*;
use model::{Encoder, EncoderInput, HeadId};
use run::tensor_file::HostTensor;
use tasks::Example;
use tasks::batch::Batch;

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
    right_answers_with(model, examples, device, |_, input| match zeroed {
        Some(id) => input.head_mask(model.head_mask_keeping(|h| h != id, device)),
        None => input,
    })
}

/// [`right_answers`] with each batch's input changed by `intervene` (given the batch and
/// its plain input) before the forward pass: how an intervention on a head is counted.
pub fn right_answers_with(
    model: &Encoder,
    examples: &[Example],
    device: &Device,
    intervene: impl Fn(&Batch, EncoderInput) -> EncoderInput,
) -> Vec<bool> {
    let mut right = Vec::new();
    for chunk in examples.chunks(BATCH) {
        let batch = Batch::new(chunk, device);
        let input = intervene(&batch, batch.encoder_input());
        // [batch, seq]: the most probable class at every position.
        let predicted = model.forward_input(input).argmax(2).squeeze_dim::<2>(2);
        let [_, seq] = predicted.dims();
        let predicted = HostTensor::of(predicted.float()).values;
        right.extend(
            masked_targets(chunk)
                .map(|(b, position, target)| predicted[b * seq + position] as u32 == target),
        );
    }
    right
}
