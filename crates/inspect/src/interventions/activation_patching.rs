//! Activation patching (Meng et al. 2022; Heimersheim and Nanda 2024 on how to read it):
//! run the corrupted input of each minimal pair with one head's clean output put back, at
//! one position or at all of them ([`model::HeadPatch`]), or with the clean residual stream
//! put back at one position of one place, and measure how much of the clean answer returns
//! ([`PairPasses`] says how). The other way round, each head is also mean-ablated on the
//! clean inputs (its output at every position replaced by its mean over the clean pass's
//! real positions, as [`super::ablation`] does on the evaluation set), and the share of the
//! clean answer's margin lost is measured: a head can restore much and be needed little
//! (another head stands in for it) or the reverse.

use burn::prelude::*;
use model::{HeadId, HeadPatch, InputPatch};
use serde::{Deserialize, Serialize};

use super::pair_passes::PairPasses;

/// What putting one head's clean output back restores.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeadPatching {
    /// The head (`layer` and `head` in the JSON).
    #[serde(flatten)]
    pub id: HeadId,
    /// Restored fraction with the head's clean output at every position; null when the
    /// clean and corrupted logit differences are equal (nothing to restore).
    pub restored: Option<f64>,
    /// Restored fraction with the head's clean output at one position, per position; empty
    /// where not measured (an imported model: one run per head and position).
    pub by_position: Vec<Option<f64>>,
    /// Attribution patching's first-order estimate of `restored`.
    pub attribution: Option<f64>,
    /// Attribution patching's estimate of `by_position`.
    pub attribution_by_position: Vec<Option<f64>>,
    /// Share of `LD_clean - LD_corrupted` lost when the head is mean-ablated on the clean
    /// inputs (1: the clean answer's whole margin goes); null when there is no margin, or in
    /// a report written before it was measured.
    #[serde(default)]
    pub mean_ablation_lost: Option<f64>,
}

/// What putting the clean residual stream back at one place restores.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResidualPatching {
    /// The stream entering block `layer`; `n_layers` is the last block's output.
    pub layer: usize,
    /// Restored fraction with the clean stream at one position, per position.
    pub by_position: Vec<Option<f64>>,
}

/// Each head's clean output put back everywhere, and at each position when `by_position`
/// (else `by_position` is empty).
pub(crate) fn head_patching(passes: &PairPasses, by_position: bool) -> Vec<HeadPatching> {
    let (model, seq, device) = (passes.model, passes.seq_len(), &passes.device);
    let n_heads = model.n_heads();
    model
        .heads()
        .map(|id| {
            // [pairs, seq, heads, d_head]: the clean pass's outputs of this head's layer.
            let values = passes.clean_cache.layers[id.layer].head_outputs.clone();
            let mean_ablation_lost = mean_ablation_lost(passes, id, values.clone());
            let patched = |weight: Tensor<4>| {
                let patch = HeadPatch {
                    values: values.clone(),
                    weight,
                };
                passes.restored_by(passes.corrupted_input().head_patch(id.layer, patch))
            };
            HeadPatching {
                id,
                restored: patched(head_weight(id, None, seq, n_heads, device)),
                by_position: (0..seq)
                    .filter(|_| by_position)
                    .map(|position| patched(head_weight(id, Some(position), seq, n_heads, device)))
                    .collect(),
                attribution: None,
                attribution_by_position: Vec::new(),
                mean_ablation_lost,
            }
        })
        .collect()
}

/// The share of the clean margin lost with head `id` mean-ablated on the clean inputs;
/// `values` is its layer's clean head outputs, `[pairs, seq, heads, d_head]`.
fn mean_ablation_lost(passes: &PairPasses, id: HeadId, values: Tensor<4>) -> Option<f64> {
    let [.., n_heads, d_head] = values.dims();
    let (sum, count) = real_position_sum(values, &passes.clean.padding);
    // [1, 1, heads, d_head]: the same values at every position of every pair.
    let means = sum
        .div_scalar(count.max(1.0))
        .reshape([1, 1, n_heads, d_head]);
    let patch = HeadPatch {
        values: means,
        weight: head_weight(id, None, 1, n_heads, &passes.device),
    };
    passes.lost_by(passes.clean.encoder_input().head_patch(id.layer, patch))
}

/// The clean residual stream put back at one position, at the input of every block and at
/// the last block's output (read there by the final norm and the output layer).
pub(crate) fn residual_patching(passes: &PairPasses) -> Vec<ResidualPatching> {
    let (model, seq) = (passes.model, passes.seq_len());
    let n_layers = model.n_layers();
    (0..=n_layers)
        .map(|layer| {
            let by_position = (0..seq)
                .map(|position| {
                    let stream = residual_with_clean_at(passes, layer, Some(position));
                    restored_by_stream(passes, layer, stream)
                })
                .collect();
            ResidualPatching { layer, by_position }
        })
        .collect()
}

/// The corrupted pass's residual stream entering block `layer` (`n_layers`: the last block's
/// output), with the clean pass's at `position` (at every position for `None`),
/// `[pairs, seq, d_model]`.
pub(crate) fn residual_with_clean_at(
    passes: &PairPasses,
    layer: usize,
    position: Option<usize>,
) -> Tensor<3> {
    let stream = |cache: &model::ActivationCache| match cache.layers.get(layer) {
        Some(block) => block.resid_pre.clone(),
        None => cache
            .layers
            .last()
            .expect("a model has a block")
            .resid_post
            .clone(),
    };
    let (clean, corrupted) = (stream(&passes.clean_cache), stream(&passes.corrupted_cache));
    let seq = passes.seq_len();
    let at: Vec<f32> = (0..seq)
        .map(|p| {
            if position.is_none_or(|at| at == p) {
                1.0
            } else {
                0.0
            }
        })
        .collect();
    let at = Tensor::<1>::from_floats(at.as_slice(), &passes.device).reshape([1, seq, 1]);
    corrupted * at.clone().neg().add_scalar(1.0) + clean * at
}

/// The restored fraction when the corrupted pass continues from `stream` at `layer` (the
/// input of that block; `n_layers`: the final norm and output layer).
pub(crate) fn restored_by_stream(
    passes: &PairPasses,
    layer: usize,
    stream: Tensor<3>,
) -> Option<f64> {
    let model = passes.model;
    if layer < model.n_layers() {
        let patch = InputPatch::new(stream, model.n_heads())
            .read_by_all_heads()
            .skip(true);
        passes.restored_by(passes.corrupted_input().input_patch(layer, patch))
    } else {
        passes.restored(passes.logit_diff(model.unembed(stream)))
    }
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

/// The sum of `outputs` (`[batch, seq, heads, d_head]`) over the positions `padding` (`true`
/// at padding, `[batch, seq]`) leaves real, `[heads, d_head]`, and how many positions that is.
pub(crate) fn real_position_sum(
    outputs: Tensor<4>,
    padding: &Option<Tensor<2, Bool>>,
) -> (Tensor<2>, f64) {
    let [batch, seq, heads, d_head] = outputs.dims();
    // 1 at real positions, 0 at padding: [batch, seq]
    let real = match padding {
        Some(padding) => padding.clone().bool_not().float(),
        None => Tensor::ones([batch, seq], &outputs.device()),
    };
    let count = real.clone().sum().into_scalar::<f32>() as f64;
    let real = real.reshape([batch, seq, 1, 1]);
    let sum = (outputs * real)
        .sum_dim(0)
        .sum_dim(1)
        .reshape([heads, d_head]);
    (sum, count)
}

#[cfg(test)]
mod tests {
    use tasks::PairKind;

    use run::tensor_file::HostTensor;

    use super::*;
    use crate::interventions::pair_passes::testing::recall_model;
    use crate::interventions::patching::patch_pairs;

    /// The clean residual stream put back at every position of any place restores all of
    /// the clean answer (the run is the clean pass from there); put back nowhere, nothing.
    #[test]
    fn the_whole_clean_residual_restores_everything_and_none_of_it_nothing() {
        let (model, pairs, device) = recall_model(2, PairKind::Answer);
        let passes = PairPasses::new(&model, &pairs, &device).unwrap();
        for layer in 0..=2 {
            let everywhere = residual_with_clean_at(&passes, layer, None);
            let restored = restored_by_stream(&passes, layer, everywhere).unwrap();
            assert!((restored - 1.0).abs() < 1e-4, "layer {layer}: {restored}");
            let nowhere = residual_with_clean_at(&passes, layer, Some(usize::MAX));
            let restored = restored_by_stream(&passes, layer, nowhere).unwrap();
            assert!(restored.abs() < 1e-5, "layer {layer}: {restored}");
        }
        // Recall's answer pairs change one value token: at the embedding, that position alone
        // holds the whole difference, so patching it there restores every pair.
        let section = patch_pairs(&model, &pairs, &device, true).unwrap();
        let embedding = &section.residual[0].by_position;
        let summed: f64 = embedding.iter().map(|r| r.unwrap()).sum();
        assert!((summed - 1.0).abs() < 1e-4, "{embedding:?}");
        assert_eq!(section.residual.len(), 3);
    }

    /// Mean ablation against a direct computation: each head's mean output over the clean
    /// pass's real positions computed on the host (padding left out: every other pair is a
    /// position shorter), written over that head everywhere in a full replacement of the
    /// layer's outputs, and the clean margin lost read from that run.
    #[test]
    fn mean_ablation_equals_a_host_computed_mean_over_real_positions() {
        let (model, mut pairs, device) = recall_model(2, PairKind::Answer);
        // Every other pair one position shorter: a position neither scored nor changed taken
        // out (the model is random: what the sentence means does not matter here).
        for pair in pairs.iter_mut().skip(1).step_by(2) {
            let gone = (0..pair.clean.input.len())
                .find(|p| *p != pair.position && !pair.changed.contains(p))
                .unwrap();
            for example in [&mut pair.clean, &mut pair.corrupted] {
                example.input.remove(gone);
                example.target.remove(gone);
            }
            let shift = |p: usize| if p > gone { p - 1 } else { p };
            pair.position = shift(pair.position);
            pair.changed = pair.changed.iter().map(|&p| shift(p)).collect();
        }
        let passes = PairPasses::new(&model, &pairs, &device).unwrap();
        assert!(passes.clean.padding.is_some(), "the test needs padding");
        let section = patch_pairs(&model, &pairs, &device, false).unwrap();
        let lengths: Vec<usize> = pairs.iter().map(|p| p.clean.input.len()).collect();
        for record in &section.heads {
            let id = record.id;
            let outputs = passes.clean_cache.layers[id.layer].head_outputs.clone();
            let [n, seq, heads, d_head] = outputs.dims();
            let mut values = HostTensor::of(outputs).values;
            let at = |i: usize, p: usize, d: usize| ((i * seq + p) * heads + id.head) * d_head + d;
            let mut mean = vec![0.0f64; d_head];
            let real: usize = lengths.iter().sum();
            for (i, &length) in lengths.iter().enumerate() {
                for p in 0..length {
                    for (d, m) in mean.iter_mut().enumerate() {
                        *m += values[at(i, p, d)] as f64 / real as f64;
                    }
                }
            }
            for i in 0..n {
                for p in 0..seq {
                    for (d, m) in mean.iter().enumerate() {
                        values[at(i, p, d)] = *m as f32;
                    }
                }
            }
            let patch = HeadPatch {
                values: Tensor::<1>::from_floats(values.as_slice(), &device)
                    .reshape([n, seq, heads, d_head]),
                weight: Tensor::ones([1, 1, heads, 1], &device),
            };
            let input = passes.clean.encoder_input().head_patch(id.layer, patch);
            let ablated = passes.logit_diff(model.forward_input(input));
            let expected = (passes.clean_ld - ablated) / passes.span();
            let lost = record.mean_ablation_lost.unwrap();
            assert!(
                (lost - expected).abs() < 1e-4,
                "{id}: {lost} against {expected}"
            );
        }
        let lost: Vec<f64> = section
            .heads
            .iter()
            .flat_map(|h| h.mean_ablation_lost)
            .collect();
        assert!(lost.iter().any(|l| l.abs() > 1e-3), "{lost:?}");
    }
}
