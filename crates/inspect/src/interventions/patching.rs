//! Activation patching (Meng et al. 2022; Heimersheim and Nanda 2024 on how to read it):
//! on the task's minimal pairs ([`train::tasks::MinimalPair`]), run the corrupted input
//! with one head's clean output put back, at one position or at all of them
//! ([`model::HeadPatch`]), and measure how much of the clean answer returns. The measure is
//! the logit difference at the pair's answer position, `logit[clean answer] - logit[corrupted
//! answer]`, averaged over pairs; a patch's restored fraction is
//! `(LD_patched - LD_corrupted) / (LD_clean - LD_corrupted)`: 0 changes nothing, 1 brings the
//! clean answer's margin back whole. `patching.json`.

use burn::prelude::*;
use model::{Encoder, HeadId, HeadPatch};
use serde::{Deserialize, Serialize};
use train::batch::{Batch, mix_seed};
use train::tasks::{Example, MinimalPair, Task};
use train::tensor_file::HostTensor;

/// Pairs patched per report.
pub const PATCHING_PAIRS: usize = 64;

/// Stream of the pairs, apart from training, evaluation, the probe and the relations.
const PAIRS_STREAM: u64 = u64::MAX - 3;

/// `patching.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Patching {
    /// Minimal pairs patched.
    pub pairs: usize,
    /// Mean logit difference on the clean inputs.
    pub clean_logit_diff: f64,
    /// Mean logit difference on the corrupted inputs.
    pub corrupted_logit_diff: f64,
    /// One record per head, layer-major.
    pub heads: Vec<HeadPatching>,
}

/// What putting one head's clean output back restores.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeadPatching {
    /// Layer index.
    pub layer: usize,
    /// Head index within the layer.
    pub head: usize,
    /// Restored fraction with the head's clean output at every position; null when the
    /// clean and corrupted logit differences are equal (nothing to restore).
    pub restored: Option<f64>,
    /// Restored fraction with the head's clean output at one position, per position.
    pub by_position: Vec<Option<f64>>,
}

/// Activation patching of every head of `model` on `task`'s minimal pairs (seeded from
/// `seed`); `None` for tasks without pairs or sequences of several lengths.
pub fn patching(model: &Encoder, task: &Task, seed: u64, device: &Device) -> Option<Patching> {
    let pairs = task.minimal_pairs(PATCHING_PAIRS, mix_seed(seed, PAIRS_STREAM));
    patch_pairs(model, &pairs, device)
}

/// Activation patching of every head of `model` on `pairs` (all of one length).
pub fn patch_pairs(model: &Encoder, pairs: &[MinimalPair], device: &Device) -> Option<Patching> {
    let len = pairs.first()?.clean.input.len();
    if pairs.iter().any(|p| p.clean.input.len() != len) {
        return None;
    }
    let clean: Vec<Example> = pairs.iter().map(|p| p.clean.clone()).collect();
    let corrupted: Vec<Example> = pairs.iter().map(|p| p.corrupted.clone()).collect();
    let clean_batch = Batch::new(&clean, device);
    let corrupted_batch = Batch::new(&corrupted, device);
    let (clean_logits, cache) = model.forward_with_cache(clean_batch.encoder_input());
    let clean_ld = logit_diff(clean_logits, pairs);
    let corrupted_ld = logit_diff(model.forward_input(corrupted_batch.encoder_input()), pairs);
    let restored = |patched_ld: f64| {
        let span = clean_ld - corrupted_ld;
        (span.abs() > 1e-9).then(|| (patched_ld - corrupted_ld) / span)
    };
    let n_heads = model.n_heads();
    let heads = model
        .heads()
        .map(|id| {
            // [pairs, seq, heads, d_head]: the clean run's outputs of this head's layer.
            let values = cache.layers[id.layer].head_outputs.clone();
            let patched = |weight: Tensor<4>| {
                let input = corrupted_batch.encoder_input().head_patch(
                    id.layer,
                    HeadPatch {
                        values: values.clone(),
                        weight,
                    },
                );
                restored(logit_diff(model.forward_input(input), pairs))
            };
            HeadPatching {
                layer: id.layer,
                head: id.head,
                restored: patched(head_weight(id, None, len, n_heads, device)),
                by_position: (0..len)
                    .map(|position| patched(head_weight(id, Some(position), len, n_heads, device)))
                    .collect(),
            }
        })
        .collect();
    Some(Patching {
        pairs: pairs.len(),
        clean_logit_diff: clean_ld,
        corrupted_logit_diff: corrupted_ld,
        heads,
    })
}

/// A [`HeadPatch`] weight, `[1, seq, n_heads, 1]`: 1 for head `id` at `position` (at every
/// position for `None`; `seq` 1 with `None` for a weight that broadcasts over positions),
/// 0 elsewhere.
pub(crate) fn head_weight(
    id: HeadId,
    position: Option<usize>,
    seq: usize,
    n_heads: usize,
    device: &Device,
) -> Tensor<4> {
    let mut weight = vec![0.0f32; seq * n_heads];
    for p in 0..seq {
        if position.is_none_or(|at| at == p) {
            weight[p * n_heads + id.head] = 1.0;
        }
    }
    Tensor::<1>::from_floats(weight.as_slice(), device).reshape([1, seq, n_heads, 1])
}

/// Mean over `pairs` of `logit[clean answer] - logit[corrupted answer]` at each pair's
/// position; `logits` is `[pairs, seq, n_outputs]`.
fn logit_diff(logits: Tensor<3>, pairs: &[MinimalPair]) -> f64 {
    let [_, seq, outputs] = logits.dims();
    let values = HostTensor::of(logits).values;
    let at = |pair: usize, position: usize, class: u32| {
        values[(pair * seq + position) * outputs + class as usize] as f64
    };
    let sum: f64 = pairs
        .iter()
        .enumerate()
        .map(|(i, p)| at(i, p.position, p.clean_answer) - at(i, p.position, p.corrupted_answer))
        .sum();
    sum / pairs.len().max(1) as f64
}
