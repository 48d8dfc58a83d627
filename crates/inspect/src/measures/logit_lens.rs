//! The logit lens for encoders (nostalgebraist 2020, after the decoder original): the
//! residual stream after the embedding and after each block, read through the final norm
//! and the output layer ([`model::Encoder::unembed`]) as if the model ended there, scored
//! on the evaluation set. It says from which layer on the answer is already in the
//! residual stream, in the output layer's own terms; after the last block it is the model
//! itself. `logit_lens.json`.

use serde::{Deserialize, Serialize};
use tasks::Example;
use tasks::batch::{Accuracy, Batch, EVAL_CHUNK, masked_cross_entropy};

use crate::load::context::MeasureContext;

/// `logit_lens.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogitLens {
    /// One entry for the embedding, then one per block, in order.
    pub points: Vec<LensPoint>,
}

/// The residual stream at one point, read through the output layer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LensPoint {
    /// The block whose output this is; null for the embedding (before block 0).
    pub after_layer: Option<usize>,
    /// Eval token accuracy of its argmax.
    pub token_acc: f64,
    /// Mean cross-entropy over the scored positions.
    pub loss: f64,
}

/// The logit lens of the context's model (its inference copy) on `eval`.
pub fn logit_lens(context: MeasureContext, eval: &[Example]) -> LogitLens {
    let MeasureContext { model, device, .. } = context;
    let points = model.n_layers() + 1;
    let mut accuracy = vec![Accuracy::default(); points];
    let mut weighted_loss = vec![0.0f64; points];
    for chunk in eval.chunks(EVAL_CHUNK) {
        let batch = Batch::new(chunk, device);
        let (_, cache) = model.forward_with_cache(batch.encoder_input());
        let residuals = std::iter::once(cache.embeddings)
            .chain(cache.layers.into_iter().map(|layer| layer.resid_post));
        let scored: f64 = chunk
            .iter()
            .map(|e| e.target.iter().flatten().count() as f64)
            .sum();
        for (point, residual) in residuals.enumerate() {
            let logits = model.unembed(residual); // [batch, seq, n_outputs]
            let loss: f32 =
                masked_cross_entropy(logits.clone(), batch.targets.clone(), batch.weights.clone())
                    .into_scalar();
            weighted_loss[point] += loss as f64 * scored;
            accuracy[point].add(Accuracy::of(logits, chunk));
        }
    }
    LogitLens {
        points: accuracy
            .iter()
            .zip(&weighted_loss)
            .enumerate()
            .map(|(point, (accuracy, loss))| LensPoint {
                after_layer: point.checked_sub(1),
                token_acc: accuracy.token_accuracy(),
                loss: loss / accuracy.scored_tokens.max(1) as f64,
            })
            .collect(),
    }
}
