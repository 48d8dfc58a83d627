//! Norm-based attention (Kobayashi et al. 2020, "Attention is Not Only a Weight: Analyzing
//! Transformers with Vector Norms"): what query `i` takes from key `j` is the vector
//! `alpha_ij f(x_j)` with `f(x) = (x v + b_v) o` (the head's value projection and its rows
//! of the output projection), so its size is `alpha_ij ||f(x_j)||`, not `alpha_ij` alone.
//! A head whose weights are large where `||f(x_j)||` is small attends but writes almost
//! nothing (Kobayashi et al.'s attention to `[SEP]` and punctuation).

use model::HeadWeights;
use run::tensor_file::HostTensor;

use crate::load::probe::LayerProbe;
use crate::measures::importance::pearson;

/// One head's attention weights against the norms of what they carry, on the probe.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NormScores {
    /// Mean `||f(x_j)||` over the probe's positions: how much the head can write.
    pub mean_value_norm: f64,
    /// Mean `alpha_ij ||f(x_j)||` over every query and key of the probe.
    pub mean_weighted_norm: f64,
    /// Pearson correlation of `alpha_ij` and `alpha_ij ||f(x_j)||` over every query and
    /// key; `None` when either does not vary.
    pub norm_weight_correlation: Option<f64>,
}

/// `||f(x)||` for each row of `x` (`[rows, d_model]` row-major), with `f(x) = (x v + b_v)
/// o` from `weights` (`v`: `[d_model, d_head]`, `v_bias`: `[d_head]`, `o`: `[d_head,
/// d_model]`, all row-major).
pub fn value_norms(x: &[f32], v: &HostTensor, v_bias: &[f32], o: &HostTensor) -> Vec<f64> {
    let [d_model, d_head] = v.shape[..] else {
        panic!("v is [d_model, d_head], not {:?}", v.shape)
    };
    assert_eq!(o.shape, [d_head, d_model], "o is [d_head, d_model]");
    x.chunks(d_model)
        .map(|row| {
            let value: Vec<f64> = (0..d_head)
                .map(|k| {
                    let dot: f64 = (0..d_model)
                        .map(|i| row[i] as f64 * v.values[i * d_head + k] as f64)
                        .sum();
                    dot + v_bias[k] as f64
                })
                .collect();
            (0..d_model)
                .map(|i| {
                    (0..d_head)
                        .map(|k| value[k] * o.values[k * d_model + i] as f64)
                        .sum::<f64>()
                        .powi(2)
                })
                .sum::<f64>()
                .sqrt()
        })
        .collect()
}

/// Every query/key pair of one head as `(alpha_ij, alpha_ij ||f(x_j)||)`, from its
/// attention rows `probs` at the real queries (`[rows, seq]` row-major, sequence `b` holding
/// `lengths[b]` rows: [`LayerProbe::head_pattern`]) and the norms `norms` of what each key
/// position carries (`[batch * seq]`); in `probs`' order, each query over its own sequence's
/// keys (a shorter sequence's padding is no key).
pub fn weight_norm_pairs(
    probs: &[f32],
    norms: &[f64],
    lengths: &[usize],
    seq: usize,
) -> Vec<(f64, f64)> {
    let rows: usize = lengths.iter().sum();
    assert_eq!(probs.len(), rows * seq, "probs is [rows, seq]");
    assert_eq!(norms.len(), lengths.len() * seq, "norms is [batch * seq]");
    let mut rows = probs.chunks(seq.max(1));
    let mut pairs = Vec::with_capacity(probs.len());
    for (b, &len) in lengths.iter().enumerate() {
        for row in rows.by_ref().take(len) {
            for (j, &alpha) in row[..len].iter().enumerate() {
                let alpha = alpha as f64;
                pairs.push((alpha, alpha * norms[b * seq + j]));
            }
        }
    }
    pairs
}

/// The scores of one head from its attention rows `probs` at the real queries and the
/// norms `norms` of what each key position carries, as [`weight_norm_pairs`] reads them;
/// the mean norm over the real positions.
pub fn norm_scores(probs: &[f32], norms: &[f64], lengths: &[usize], seq: usize) -> NormScores {
    let (weights, weighted): (Vec<f64>, Vec<f64>) = weight_norm_pairs(probs, norms, lengths, seq)
        .into_iter()
        .unzip();
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let real: Vec<f64> = (lengths.iter().enumerate())
        .flat_map(|(b, &len)| norms[b * seq..b * seq + len].iter().copied())
        .collect();
    NormScores {
        mean_value_norm: mean(&real),
        mean_weighted_norm: mean(&weighted),
        norm_weight_correlation: pearson(&weights, &weighted),
    }
}

/// The scores of head `h` of `layer` on the probe, with that head's `weights`.
pub fn head_norm_scores(layer: &LayerProbe, h: usize, weights: &HeadWeights) -> NormScores {
    let (_, _, seq) = layer.dims();
    norm_scores(
        &layer.head_pattern(h),
        &head_value_norms(layer, weights),
        &layer.lengths,
        seq,
    )
}

/// Every query/key pair of head `h` of `layer` on the probe as `(alpha_ij, alpha_ij
/// ||f(x_j)||)` ([`weight_norm_pairs`]), with that head's `weights`.
pub fn head_weight_norm_pairs(
    layer: &LayerProbe,
    h: usize,
    weights: &HeadWeights,
) -> Vec<(f64, f64)> {
    let (_, _, seq) = layer.dims();
    weight_norm_pairs(
        &layer.head_pattern(h),
        &head_value_norms(layer, weights),
        &layer.lengths,
        seq,
    )
}

/// `||f(x_j)||` of one head at every probe position of `layer` (`[batch * seq]`).
fn head_value_norms(layer: &LayerProbe, weights: &HeadWeights) -> Vec<f64> {
    let v = HostTensor::of(weights.v.clone());
    let o = HostTensor::of(weights.o.clone());
    let v_bias = HostTensor::of(weights.v_bias.clone()).values;
    value_norms(&layer.attn_input.values, &v, &v_bias, &o)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(shape: [usize; 2], values: Vec<f32>) -> HostTensor {
        HostTensor {
            shape: shape.to_vec(),
            values,
        }
    }

    #[test]
    fn a_head_with_zero_values_writes_nothing_wherever_it_attends() {
        // Uniform attention over 3 keys, v = 0 and no bias.
        let x: Vec<f32> = (0..6).map(|i| i as f32).collect(); // 3 positions, d_model 2
        let norms = value_norms(
            &x,
            &host([2, 1], vec![0.0; 2]),
            &[0.0],
            &host([1, 2], vec![1.0, 1.0]),
        );
        assert_eq!(norms, vec![0.0; 3]);
        let scores = norm_scores(&[1.0 / 3.0; 9], &norms, &[3], 3);
        assert_eq!(scores.mean_weighted_norm, 0.0);
        assert_eq!(scores.mean_value_norm, 0.0);
        assert_eq!(scores.norm_weight_correlation, None, "nothing varies");
    }

    #[test]
    fn pairs_of_a_head_with_zero_values_lie_on_the_x_axis() {
        // 2 sequences of 2 positions, d_model 2, d_head 1, v = 0 and no bias.
        let x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0];
        let norms = value_norms(
            &x,
            &host([2, 1], vec![0.0; 2]),
            &[0.0],
            &host([1, 2], vec![1.0, 1.0]),
        );
        let probs = [0.25, 0.75, 0.5, 0.5, 1.0, 0.0, 0.1, 0.9];
        let pairs = weight_norm_pairs(&probs, &norms, &[2, 2], 2);
        let weights: Vec<f64> = pairs.iter().map(|p| p.0).collect();
        let expected: Vec<f64> = probs.iter().map(|&p| p as f64).collect();
        assert_eq!(
            weights, expected,
            "x is the attention weight, in probs' order"
        );
        assert!(pairs.iter().all(|p| p.1 == 0.0), "{pairs:?}");
    }

    #[test]
    fn pairs_weight_each_keys_norm_within_its_own_sequence() {
        // Norms of keys 0 and 1: 10 and 0 in sequence 0, 2 and 4 in sequence 1.
        let norms = [10.0, 0.0, 2.0, 4.0];
        let probs = [0.2, 0.8, 1.0, 0.0, 0.5, 0.5, 0.25, 0.75];
        let pairs = weight_norm_pairs(&probs, &norms, &[2, 2], 2);
        let expected = [
            (0.2, 2.0),
            (0.8, 0.0),
            (1.0, 10.0),
            (0.0, 0.0),
            (0.5, 1.0),
            (0.5, 2.0),
            (0.25, 0.5),
            (0.75, 3.0),
        ];
        assert_eq!(pairs.len(), expected.len());
        for (got, want) in pairs.iter().zip(expected) {
            assert!(
                (got.0 - want.0).abs() < 1e-6 && (got.1 - want.1).abs() < 1e-6,
                "{got:?} != {want:?}"
            );
        }
    }

    /// A sequence shorter than the batch's (typed sentences of several lengths): its one
    /// query reads its own key only, and its padding is neither a query nor a key.
    #[test]
    fn a_shorter_sequence_has_only_its_own_queries_and_keys() {
        // Sequence 1 is one position long; its second position (norm 99) is padding.
        let norms = [10.0, 0.0, 2.0, 99.0];
        let probs = [0.2, 0.8, 1.0, 0.0, 1.0, 0.0];
        let pairs = weight_norm_pairs(&probs, &norms, &[2, 1], 2);
        let expected = [(0.2, 2.0), (0.8, 0.0), (1.0, 10.0), (0.0, 0.0), (1.0, 2.0)];
        assert_eq!(pairs.len(), expected.len(), "{pairs:?}");
        for (got, want) in pairs.iter().zip(expected) {
            assert!((got.0 - want.0).abs() < 1e-6 && (got.1 - want.1).abs() < 1e-6);
        }
        let scores = norm_scores(&probs, &norms, &[2, 1], 2);
        assert!(
            (scores.mean_value_norm - 4.0).abs() < 1e-12,
            "the padding's 99 counted"
        );
        assert!((scores.mean_weighted_norm - 14.0 / 5.0).abs() < 1e-6);
    }

    #[test]
    fn values_and_weights_give_the_hand_computed_norms() {
        // d_model 2, d_head 1: v reads x_0, bias 1, o writes (3, 4): ||f(x)|| = 5 |x_0 + 1|.
        let v = host([2, 1], vec![1.0, 0.0]);
        let o = host([1, 2], vec![3.0, 4.0]);
        let x = [1.0, 9.0, -1.0, 9.0];
        let norms = value_norms(&x, &v, &[1.0], &o);
        assert_eq!(norms, vec![10.0, 0.0]);
        // Both queries put 0.8 on key 1, which writes nothing, and 0.2 on key 0.
        let probs = [0.2, 0.8, 0.2, 0.8];
        let scores = norm_scores(&probs, &norms, &[2], 2);
        assert!((scores.mean_value_norm - 5.0).abs() < 1e-12);
        // alpha ||f||: 2, 0, 2, 0.
        assert!((scores.mean_weighted_norm - 1.0).abs() < 1e-6);
        // The larger weight carries the smaller vector: perfectly anti-correlated.
        assert!((scores.norm_weight_correlation.unwrap() + 1.0).abs() < 1e-9);
    }
}
