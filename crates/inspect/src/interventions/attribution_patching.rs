//! Attribution patching (Nanda 2023; Syed et al. 2023, "Attribution Patching Outperforms
//! Automated Circuit Discovery"): the first-order estimate of activation patching from one
//! backward pass per layer. Patching head `h` moves the logit difference by about
//! `grad_LD(corrupted) . (clean_h - corrupted_h)`, the gradient taken at the corrupted pass
//! with respect to the head's output. It is exact where the logit difference is linear in
//! the head's output, and drifts where attention patterns or norms bend it; the agreement
//! with the exact values ([`AttributionAgreement`]) says how far, so a user knows when the
//! cheap estimate can stand in for the exact one on a bigger model.

use burn::prelude::*;
use model::{HeadId, HeadPatch};
use run::tensor_file::HostTensor;
use serde::{Deserialize, Serialize};
use tasks::batch::Batch;

use super::activation_patching::HeadPatching;
use super::pair_passes::PairPasses;
use crate::measures::importance::pearson;

/// How attribution patching's estimates compare with activation patching's exact values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttributionAgreement {
    /// Pearson correlation over heads of the whole-head estimates with the exact values;
    /// null with fewer than two heads or no variance.
    pub correlation_heads: Option<f64>,
    /// Pearson correlation over every head and position.
    pub correlation_positions: Option<f64>,
    /// The head whose whole-head estimate is furthest from its exact value.
    pub worst_head: Option<HeadId>,
    /// `|estimate - exact|` of that head, in restored fraction.
    pub worst_error: Option<f64>,
}

/// Fills each head's `attribution` and `attribution_by_position` (the estimate of
/// `restored` and `by_position`) and says how well they agree with the exact values.
pub(crate) fn attribution_patching(
    passes: &PairPasses,
    heads: &mut [HeadPatching],
) -> AttributionAgreement {
    let n_heads = passes.model.n_heads();
    for layer in 0..passes.model.n_layers() {
        // [head][position]: the logit difference's first-order change.
        let change = first_order_change(passes, layer);
        for (head, by_position) in change.into_iter().enumerate() {
            let record = &mut heads[HeadId::new(layer, head).flat_index(n_heads)];
            record.attribution =
                passes.restored(passes.corrupted_ld + by_position.iter().sum::<f64>());
            record.attribution_by_position = by_position
                .iter()
                .map(|change| passes.restored(passes.corrupted_ld + change))
                .collect();
        }
    }
    agreement(heads)
}

/// `[n_heads][seq]`: `sum over pairs and d_head of grad . (clean - corrupted)` for the
/// outputs of block `layer`'s heads, the gradient of the mean logit difference at the
/// corrupted pass.
fn first_order_change(passes: &PairPasses, layer: usize) -> Vec<Vec<f64>> {
    let autodiff = passes.device.clone().autodiff();
    let model = passes.model.clone().fork(&autodiff);
    let batch = Batch::new(&passes.corrupted_examples, &autodiff);
    let on_autodiff = |tensor: Tensor<4>| Tensor::<4>::from_data(tensor.into_data(), &autodiff);
    let corrupted = passes.corrupted_cache.layers[layer].head_outputs.clone();
    let clean = passes.clean_cache.layers[layer].head_outputs.clone();
    let [pairs, seq, n_heads, d_head] = corrupted.dims();
    // The corrupted outputs put in place of themselves: the run is the corrupted one, and
    // the values are a leaf the gradient reaches.
    let values = on_autodiff(corrupted.clone()).require_grad();
    let patch = HeadPatch {
        values: values.clone(),
        weight: Tensor::ones([1, 1, n_heads, 1], &autodiff),
    };
    let logits = model.forward_input(batch.encoder_input().head_patch(layer, patch));
    let [_, _, n_outputs] = logits.dims();
    let logit_diff = (logits * passes.logit_diff_weights(n_outputs, &autodiff)).sum();
    let grads = logit_diff.backward();
    let grad = HostTensor::of(values.grad(&grads).expect("the values require a gradient")).values;
    let delta = HostTensor::of(clean - corrupted).values;
    let mut change = vec![vec![0.0f64; seq]; n_heads];
    for pair in 0..pairs {
        for position in 0..seq {
            for (head, by_position) in change.iter_mut().enumerate() {
                let at = ((pair * seq + position) * n_heads + head) * d_head;
                by_position[position] += (at..at + d_head)
                    .map(|i| grad[i] as f64 * delta[i] as f64)
                    .sum::<f64>();
            }
        }
    }
    change
}

/// Correlations and the worst head, over the heads whose values are defined.
fn agreement(heads: &[HeadPatching]) -> AttributionAgreement {
    let whole: Vec<(HeadId, f64, f64)> = heads
        .iter()
        .filter_map(|h| Some((h.id, h.attribution?, h.restored?)))
        .collect();
    let (estimates, exact): (Vec<f64>, Vec<f64>) = whole.iter().map(|&(_, a, e)| (a, e)).unzip();
    let (position_estimates, position_exact): (Vec<f64>, Vec<f64>) = heads
        .iter()
        .flat_map(|h| h.attribution_by_position.iter().zip(&h.by_position))
        .filter_map(|(a, e)| Some(((*a)?, (*e)?)))
        .unzip();
    let worst = whole
        .iter()
        .map(|&(id, a, e)| (id, (a - e).abs()))
        .max_by(|a, b| a.1.total_cmp(&b.1));
    AttributionAgreement {
        correlation_heads: pearson(&estimates, &exact),
        correlation_positions: pearson(&position_estimates, &position_exact),
        worst_head: worst.map(|(id, _)| id),
        worst_error: worst.map(|(_, error)| error),
    }
}

#[cfg(test)]
mod tests {
    use tasks::PairKind;

    use super::*;
    use crate::interventions::activation_patching::head_weight;
    use crate::interventions::pair_passes::testing::recall_model;
    use crate::interventions::patching::patch_pairs;

    /// Attribution patching is the derivative of activation patching along the patch: a head
    /// patched a fraction `eps` of the way from its corrupted to its clean output restores
    /// `eps` times the estimate, to first order. Checked with a central difference, on every
    /// head of a 2-layer model, both kinds of pair.
    #[test]
    fn attribution_is_the_slope_of_exact_patching_at_the_corrupted_run() {
        for kind in [PairKind::Answer, PairKind::Route] {
            let (model, pairs, device) = recall_model(2, kind);
            let passes = PairPasses::new(&model, &pairs, &device).unwrap();
            let section = patch_pairs(&model, &pairs, &device, true).unwrap();
            let eps = 1e-2;
            for head in &section.heads {
                let id = head.id;
                let partly = |fraction: f64| {
                    let patch = HeadPatch {
                        values: passes.clean_cache.layers[id.layer].head_outputs.clone(),
                        weight: head_weight(id, None, 1, 2, &device).mul_scalar(fraction),
                    };
                    passes
                        .restored_by(passes.corrupted_input().head_patch(id.layer, patch))
                        .unwrap()
                };
                let slope = (partly(eps) - partly(-eps)) / (2.0 * eps);
                let estimate = head.attribution.unwrap();
                assert!(
                    (slope - estimate).abs() < 1e-3 + 1e-2 * estimate.abs(),
                    "{kind:?} {id}: slope {slope}, attribution {estimate}"
                );
                let by_position: f64 = head
                    .attribution_by_position
                    .iter()
                    .map(|a| a.unwrap())
                    .sum();
                assert!((by_position - estimate).abs() < 1e-6, "positions add up");
            }
            let agreement = &section.attribution;
            assert!(agreement.worst_error.unwrap() >= 0.0);
            assert!(agreement.correlation_heads.unwrap().abs() <= 1.0 + 1e-12);
        }
    }
}
