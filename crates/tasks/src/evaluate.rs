//! A model's mean loss and accuracy on a task's examples, with heads ablated or not: what
//! training reports at each evaluation and what `inspect`'s ablations compare against.

use burn::prelude::*;
use model::Encoder;

use crate::batch::{Accuracy, Batch, EVAL_CHUNK, masked_cross_entropy};
use crate::example::Example;

/// Mean loss and accuracy of `model` (inference copy) on `examples`, with heads ablated
/// where `head_mask` (`[n_layers, n_heads]`, 1 keep / 0 ablate) says.
pub fn evaluate(
    model: &Encoder,
    examples: &[Example],
    device: &Device,
    head_mask: Option<Tensor<2>>,
) -> (f64, Accuracy) {
    let mut accuracy = Accuracy::default();
    let mut weighted_loss = 0.0;
    for chunk in examples.chunks(EVAL_CHUNK) {
        let batch = Batch::new(chunk, device);
        let scored: f64 = chunk
            .iter()
            .map(|e| e.target.iter().flatten().count() as f64)
            .sum();
        let mut input = batch.encoder_input();
        input.head_mask = head_mask.clone();
        let logits = model.forward_input(input);
        let loss: f32 =
            masked_cross_entropy(logits.clone(), batch.targets, batch.weights).into_scalar();
        weighted_loss += loss as f64 * scored;
        accuracy.add(Accuracy::of(logits, chunk));
    }
    (
        weighted_loss / accuracy.scored_tokens.max(1) as f64,
        accuracy,
    )
}
