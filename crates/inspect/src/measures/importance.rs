//! Gradient importance (Michel et al. 2019, "Are Sixteen Heads Really Better than One?"):
//! `I_h = mean over batches |dL/d xi_h|`, the loss's sensitivity to a head mask `xi` (all
//! ones) that scales each head's output, from one backward pass per batch on Burn's
//! autodiff device; and Spearman rank correlations to compare it with the other two
//! importance orders, the single-head ablation drop and the greedy pruning order.

use burn::prelude::*;
use model::Encoder;
use run::tensor_file::HostTensor;
use tasks::Example;
use tasks::batch::{Batch, masked_cross_entropy};

/// Sequences per batch of the gradient: the absolute value is taken per batch, so smaller
/// batches let gradients of opposite sign on different sequences count instead of cancel;
/// 32 keeps the backward passes few on the default eval set.
pub const IMPORTANCE_BATCH: usize = 32;

/// Each head's `mean over batches |dL/d xi_h|` on `examples` in batches of
/// [`IMPORTANCE_BATCH`], layer-major, where `L` is the mean cross-entropy over a batch's
/// scored positions. The model is used as it is (inference mode, no dropout); only the
/// mask gets a gradient. Zeros when there are no examples.
pub fn gradient_importance(model: &Encoder, examples: &[Example], device: &Device) -> Vec<f64> {
    let autodiff = device.clone().autodiff();
    let model = model.clone().fork(&autodiff);
    let mut total = vec![0.0; model.heads().count()];
    let batches = examples.chunks(IMPORTANCE_BATCH);
    let n_batches = batches.len();
    for chunk in batches {
        let batch = Batch::new(chunk, &autodiff);
        let mask = model.head_mask_keeping(|_| true, &autodiff).require_grad();
        let logits = model.forward_input(batch.encoder_input().head_mask(mask.clone()));
        let loss = masked_cross_entropy(logits, batch.targets, batch.weights);
        let grads = loss.backward();
        let grad = mask
            .grad(&grads)
            .expect("the head mask requires a gradient");
        for (sum, g) in total.iter_mut().zip(HostTensor::of(grad).values) {
            *sum += (g as f64).abs();
        }
    }
    total
        .into_iter()
        .map(|sum| sum / n_batches.max(1) as f64)
        .collect()
}

/// Spearman's rank correlation of `a` and `b`: Pearson's correlation of their ranks, tied
/// values sharing their average rank. `None` when it is undefined: fewer than two values,
/// or one side all equal.
///
/// # Panics
/// If the lengths differ.
pub fn spearman(a: &[f64], b: &[f64]) -> Option<f64> {
    assert_eq!(a.len(), b.len(), "Spearman needs paired values");
    pearson(&ranks(a), &ranks(b))
}

/// Pearson's correlation; `None` with fewer than two values or no variance on a side.
pub fn pearson(a: &[f64], b: &[f64]) -> Option<f64> {
    let n = a.len() as f64;
    if a.len() < 2 {
        return None;
    }
    let (mean_a, mean_b) = (a.iter().sum::<f64>() / n, b.iter().sum::<f64>() / n);
    let (mut cov, mut var_a, mut var_b) = (0.0, 0.0, 0.0);
    for (x, y) in a.iter().zip(b) {
        cov += (x - mean_a) * (y - mean_b);
        var_a += (x - mean_a).powi(2);
        var_b += (y - mean_b).powi(2);
    }
    (var_a > 0.0 && var_b > 0.0).then(|| cov / (var_a * var_b).sqrt())
}

/// 1-based ranks, ascending; equal values get the average of the ranks they span.
pub fn ranks(values: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&i, &j| values[i].total_cmp(&values[j]));
    let mut ranks = vec![0.0; values.len()];
    let mut start = 0;
    while start < order.len() {
        let mut end = start + 1;
        while end < order.len() && values[order[end]] == values[order[start]] {
            end += 1;
        }
        // Positions start..end hold ranks start + 1 ..= end.
        let average = (start + 1 + end) as f64 / 2.0;
        for &index in &order[start..end] {
            ranks[index] = average;
        }
        start = end;
    }
    ranks
}

#[cfg(test)]
mod tests {
    use burn::module::Param;
    use model::{EncoderConfig, EncoderIo};

    use super::*;

    #[test]
    fn tied_values_share_their_average_rank() {
        assert_eq!(ranks(&[10.0, 20.0, 20.0, 5.0]), vec![2.0, 3.5, 3.5, 1.0]);
        assert_eq!(ranks(&[1.0, 1.0, 1.0]), vec![2.0, 2.0, 2.0]);
    }

    #[test]
    fn spearman_matches_a_hand_computed_example() {
        assert_eq!(spearman(&[1.0, 2.0, 3.0], &[10.0, 40.0, 90.0]), Some(1.0));
        assert_eq!(spearman(&[1.0, 2.0, 3.0], &[3.0, 2.0, 1.0]), Some(-1.0));
        // a = [1, 2, 2, 3] ranks [1, 2.5, 2.5, 4]; b = [4, 1, 3, 2] ranks [4, 1, 3, 2].
        // Centred (mean 2.5): [-1.5, 0, 0, 1.5] and [1.5, -1.5, 0.5, -0.5]; covariance
        // -2.25 - 0.75 = -3; variances 4.5 and 5: rho = -3 / sqrt(22.5).
        let rho = spearman(&[1.0, 2.0, 2.0, 3.0], &[4.0, 1.0, 3.0, 2.0]).unwrap();
        assert!((rho - (-3.0 / 22.5f64.sqrt())).abs() < 1e-12, "{rho}");
        assert_eq!(spearman(&[1.0, 1.0], &[1.0, 2.0]), None, "no variance");
        assert_eq!(spearman(&[1.0], &[2.0]), None, "one value");
    }

    fn model_and_examples() -> (Encoder, Vec<Example>) {
        let _turn = model::init::take_rng_turn();
        let device = Device::flex();
        device.seed(5);
        let io = EncoderIo {
            vocab_size: 5,
            n_outputs: 5,
            max_seq_len: 6,
        };
        let config = EncoderConfig {
            d_model: 8,
            n_heads: 2,
            d_ff: 16,
            ..EncoderConfig::default()
        };
        let model = config.init(&io, &device).unwrap().valid();
        let examples = (0..40)
            .map(|i| Example {
                input: (0..6).map(|p| ((i + 2 * p) % 5) as u32).collect(),
                target: (0..6)
                    .map(|p| (p % 3 != 1).then_some(((i + p) % 5) as u32))
                    .collect(),
            })
            .collect();
        (model, examples)
    }

    fn loss(model: &Encoder, examples: &[Example], mask: Vec<f32>) -> f64 {
        let device = Device::flex();
        let batch = Batch::new(examples, &device);
        let mask = Tensor::from_data(TensorData::new(mask, [2, 2]), &device);
        let logits = model.forward_input(batch.encoder_input().head_mask(mask));
        masked_cross_entropy(logits, batch.targets, batch.weights).into_scalar::<f32>() as f64
    }

    #[test]
    fn the_gradient_matches_finite_differences_and_batches_are_averaged() {
        let (model, examples) = model_and_examples();
        let device = Device::flex();
        let one_batch = &examples[..IMPORTANCE_BATCH];
        let importance = gradient_importance(&model, one_batch, &device);
        assert_eq!(importance.len(), 4);
        let step = 1e-2;
        for head in 0..4 {
            let mut up = vec![1.0; 4];
            let mut down = vec![1.0; 4];
            up[head] += step as f32;
            down[head] -= step as f32;
            let slope =
                (loss(&model, one_batch, up) - loss(&model, one_batch, down)) / (2.0 * step);
            assert!(
                (importance[head] - slope.abs()).abs() < 2e-3,
                "head {head}: {} vs {slope}",
                importance[head]
            );
        }
        // Two batches: the mean of each batch's absolute gradient.
        let rest = &examples[IMPORTANCE_BATCH..];
        let second = gradient_importance(&model, rest, &device);
        let both = gradient_importance(&model, &examples, &device);
        for head in 0..4 {
            let mean = (importance[head] + second[head]) / 2.0;
            assert!((both[head] - mean).abs() < 1e-6, "{both:?}");
        }
    }

    #[test]
    fn a_head_writing_zeros_has_zero_gradient_importance() {
        let (mut model, examples) = model_and_examples();
        let attention = &mut model.blocks[1].attention;
        let weight = attention.output.weight.val();
        let [_, cols] = weight.dims();
        let d_head = attention.d_head;
        attention.output.weight = Param::from_tensor(weight.slice_assign(
            [0..d_head, 0..cols],
            Tensor::zeros([d_head, cols], &Device::flex()),
        ));
        let importance = gradient_importance(&model, &examples, &Device::flex());
        assert_eq!(importance[2], 0.0, "{importance:?}");
        assert!(importance[3] > 0.0 && importance[0] > 0.0, "{importance:?}");
    }
}
