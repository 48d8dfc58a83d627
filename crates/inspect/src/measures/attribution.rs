//! Direct logit attribution (Elhage et al. 2021, "A Mathematical Framework for Transformer
//! Circuits"; TransformerLens's `logit_attrs` with a cached layer-norm scale): what each
//! head writes into the residual stream (its slice of the attention output after the output
//! projection, `head_out_h o_h`, without the shared output bias), carried to the logits
//! along the direct path only, with every layer norm on that path frozen at the probe's own
//! values so that it is linear: `LN(c) = (c - mean(c)) / sigma * gamma`, where `sigma` is
//! the standard deviation of the norm's full input at that position and `beta` is left out
//! (it belongs to no head). The score of a head is its direct logit on the correct class,
//! averaged over the probe's scored positions.
//!
//! "Direct" depends on where the norms sit:
//! - pre-norm: the residual stream is a sum, so the direct path of every head is the final
//!   norm then the output layer; the heads' direct logits, the other components' and the
//!   final norm's and output layer's biases add up to the logits exactly.
//! - post-norm: each block normalises the residual after its attention
//!   (`norm_attention`) and after its feed-forward (`norm_ff`), so a head's output reaches
//!   the output layer through those two norms, the two of every later block (skipping the
//!   later attention and feed-forward branches, which read it non-linearly) and the final
//!   norm, each frozen at its probe value. This is the first-order direct effect; what a
//!   head does through later heads and feed-forward layers is not counted, and the parts do
//!   not add up to the logits.

use burn::nn::LayerNorm;
use burn::prelude::*;
use model::{ActivationCache, Encoder, EncoderInput, NormPlacement};
use run::tensor_file::HostTensor;
use tasks::Example;
use tasks::batch::{Batch, EVAL_CHUNK};

/// Each head's direct contribution to every logit, layer-major, each `[batch, seq,
/// n_outputs]`, on `input`. Through a prediction transform (a masked-LM checkpoint's), the
/// logits lost when the head's direct write is taken out of what the transform reads.
pub fn direct_logits(model: &Encoder, input: EncoderInput) -> Vec<Tensor<3>> {
    let (_, cache) = model.forward_with_cache(input);
    let (writes, hidden) = direct_writes(model, &cache);
    writes
        .into_iter()
        .map(|write| match model.output_transform {
            None => unembed(model, write),
            Some(_) => unembed(
                model,
                model.transform(hidden.clone()) - model.transform(hidden.clone() - write),
            ),
        })
        .collect()
}

/// Each head's direct logit on the correct class, averaged over the scored positions of
/// `examples` (batched as evaluation batches them, padding masked), layer-major; 0 when
/// nothing is scored.
///
/// Without a prediction transform the direct logit is linear in the head's write `x`
/// (carried along its frozen path): `x . w_target`. With one (dense, GELU, norm: a
/// `BertForMaskedLM`), the output layer reads `T(h)`, `h` the final hidden state, and the
/// head's direct logit is what the target's logit loses when its write is taken out:
/// `T(h) . w_target - T(h - x) . w_target`. On a model without a transform the two agree,
/// since `T` is then the identity.
pub fn mean_direct_attribution(model: &Encoder, examples: &[Example], device: &Device) -> Vec<f64> {
    let mut sums = vec![0.0f64; model.heads().count()];
    let mut scored = 0usize;
    for chunk in examples.chunks(EVAL_CHUNK) {
        let (rows, targets): (Vec<i64>, Vec<i64>) = scored_rows(chunk).unzip();
        if rows.is_empty() {
            continue;
        }
        let batch = Batch::new(chunk, device);
        let (_, cache) = model.forward_with_cache(batch.encoder_input());
        let (writes, hidden) = direct_writes(model, &cache);
        let [batch, seq, d_model] = hidden.dims();
        let k = rows.len();
        let rows = Tensor::<1, Int>::from_data(TensorData::new(rows, [k]), device);
        let targets = Tensor::<1, Int>::from_data(TensorData::new(targets, [k]), device);
        // [k, d_model]: the scored positions' rows of a `[batch, seq, d_model]` tensor.
        let pick = |x: Tensor<3>| x.reshape([batch * seq, d_model]).select(0, rows.clone());
        // [k, width]: for each scored position, the output layer's column of its target
        // (width: what the output layer reads, d_model or a factorised model's embedding
        // width after its transform).
        let readout = model.output.weight.val().transpose().select(0, targets);
        let width = readout.dims()[1];
        let target_logit = |x: Tensor<2>| (x * readout.clone()).sum_dim(1); // [k, 1]
        let transform = |x: Tensor<2>| model.transform(x.unsqueeze_dim::<3>(0)).reshape([k, width]);
        let hidden = pick(hidden);
        let full = model
            .output_transform
            .as_ref()
            .map(|_| target_logit(transform(hidden.clone())));
        for (sum, write) in sums.iter_mut().zip(writes) {
            let write = pick(write);
            let direct = match &full {
                None => target_logit(write),
                Some(full) => full.clone() - target_logit(transform(hidden.clone() - write)),
            };
            *sum += HostTensor::of(direct)
                .values
                .iter()
                .map(|v| *v as f64)
                .sum::<f64>();
        }
        scored += k;
    }
    sums.into_iter()
        .map(|sum| {
            if scored == 0 {
                0.0
            } else {
                sum / scored as f64
            }
        })
        .collect()
}

/// The scored positions of `chunk` as `(row, target)`: the row `example * seq + position`
/// of the batch [`Batch::new`] makes of it (`seq` its longest input).
fn scored_rows(chunk: &[Example]) -> impl Iterator<Item = (i64, i64)> + '_ {
    let seq = chunk.iter().map(|e| e.input.len()).max().unwrap_or(0);
    chunk.iter().enumerate().flat_map(move |(e, example)| {
        example
            .target
            .iter()
            .enumerate()
            .filter_map(move |(i, t)| t.map(|t| ((e * seq + i) as i64, t as i64)))
    })
}

/// Each head's write carried along its direct path (every norm on it frozen) to what the
/// output head reads, layer-major, each `[batch, seq, d_model]`; and what it reads, the
/// final hidden state (the final norm's output, `beta` included), `[batch, seq, d_model]`.
fn direct_writes(model: &Encoder, cache: &ActivationCache) -> (Vec<Tensor<3>>, Tensor<3>) {
    let path_inputs = norm_inputs(model, cache);
    let n_heads = model.n_heads();
    let writes = head_writes(model, cache)
        .into_iter()
        .enumerate()
        .map(|(index, write)| {
            let mut x = write;
            for (norm, input) in direct_path(model, index / n_heads, &path_inputs) {
                x = frozen_norm(norm, input.clone(), x, model.norm_epsilon);
            }
            x
        })
        .collect();
    (writes, model.final_norm(path_inputs.last))
}

/// The norms' inputs on the probe: per block (post-norm only) the inputs of its
/// attention and feed-forward norms, then the final norm's input.
struct NormInputs {
    /// `[layer]`: (`norm_attention`'s input, `norm_ff`'s input), each `[batch, seq,
    /// d_model]`; empty in pre-norm, where these norms are on no head's direct path.
    blocks: Vec<(Tensor<3>, Tensor<3>)>,
    /// `[batch, seq, d_model]`: what enters the final norm.
    last: Tensor<3>,
}

fn norm_inputs(model: &Encoder, cache: &ActivationCache) -> NormInputs {
    let last = cache
        .layers
        .last()
        .map_or_else(|| cache.embeddings.clone(), |l| l.resid_post.clone());
    let blocks = model
        .blocks
        .iter()
        .zip(&cache.layers)
        .filter(|(block, _)| block.norm == NormPlacement::Post)
        .map(|(block, layer)| {
            // Dropout is off in an inference model, so the branches recompute exactly.
            let attention_sum = layer.resid_pre.clone() + layer.attn_out.clone();
            let ff_sum = layer.resid_mid.clone() + block.feed_forward(layer.resid_mid.clone());
            (attention_sum, ff_sum)
        })
        .collect();
    NormInputs { blocks, last }
}

/// The norms a head of `layer` passes on its way to the output layer, in order, each with
/// its input on the probe.
fn direct_path<'a>(
    model: &'a Encoder,
    layer: usize,
    inputs: &'a NormInputs,
) -> Vec<(&'a LayerNorm, &'a Tensor<3>)> {
    let mut path = vec![];
    for (block, (attention_in, ff_in)) in model.blocks.iter().zip(&inputs.blocks).skip(layer) {
        path.push((block.post_attention_norm(), attention_in));
        path.push((&block.norm_ff, ff_in));
    }
    if let Some(final_norm) = &model.final_norm {
        path.push((final_norm, &inputs.last));
    }
    path
}

/// What each head adds to the residual stream, `head_out_h o_h`, layer-major, each
/// `[batch, seq, d_model]`.
fn head_writes(model: &Encoder, cache: &ActivationCache) -> Vec<Tensor<3>> {
    let mut writes = vec![];
    for (block, layer) in model.blocks.iter().zip(&cache.layers) {
        let [batch, seq, n_heads, d_head] = layer.head_outputs.dims();
        for h in 0..n_heads {
            let out = layer
                .head_outputs
                .clone()
                .narrow(2, h, 1)
                .reshape([batch * seq, d_head]);
            let o = block.attention.head_weights(h).o; // [d_head, d_model]
            let d_model = o.dims()[1];
            writes.push(out.matmul(o).reshape([batch, seq, d_model]));
        }
    }
    writes
}

/// `norm` (of epsilon `epsilon`, the model's) applied to the part `x` of its input `input`,
/// with its scale frozen at `input`'s:
/// `(x - mean(x)) / sigma(input) * gamma`, no `beta`. Linear in `x`; on `x = input` it
/// is `norm(input) - beta`.
///
/// # Shapes
/// - `input`, `x`: `[batch, seq, d_model]` -> `[batch, seq, d_model]`
fn frozen_norm(norm: &LayerNorm, input: Tensor<3>, x: Tensor<3>, epsilon: f64) -> Tensor<3> {
    let [.., d_model] = input.dims();
    let centered = input.clone() - input.mean_dim(2);
    let sigma = (centered.powi_scalar(2).mean_dim(2) + epsilon).sqrt(); // [batch, seq, 1]
    let x = x.clone() - x.mean_dim(2);
    x / sigma * norm.gamma.val().reshape([1, 1, d_model])
}

/// The output layer's weights without its bias: `[batch, seq, d_model] -> [batch, seq,
/// n_outputs]`.
fn unembed(model: &Encoder, x: Tensor<3>) -> Tensor<3> {
    let [batch, seq, d_model] = x.dims();
    let weight = model.output.weight.val(); // [d_model, n_outputs]
    let n_outputs = weight.dims()[1];
    x.reshape([batch * seq, d_model])
        .matmul(weight)
        .reshape([batch, seq, n_outputs])
}

#[cfg(test)]
mod tests {
    use burn::module::Param;
    use model::{EncoderConfig, EncoderIo};

    use super::*;

    fn tiny(norm: NormPlacement, n_layers: usize, seed: u64) -> (Encoder, Tensor<2, Int>) {
        let _turn = model::init::take_rng_turn();
        let device = Device::flex();
        device.seed(seed);
        let io = EncoderIo {
            vocab_size: 5,
            n_outputs: 4,
            max_seq_len: 6,
        };
        let config = EncoderConfig {
            d_model: 8,
            n_layers,
            n_heads: 2,
            d_ff: 16,
            norm,
            ..EncoderConfig::default()
        };
        let mut model = config.init(&io, &device).unwrap();
        // Non-trivial norms and biases, so that leaving them out would show.
        for block in &mut model.blocks {
            for norm in [block.norm_attention.as_mut().unwrap(), &mut block.norm_ff] {
                norm.gamma = Param::from_tensor(Tensor::random(
                    [8],
                    burn::tensor::Distribution::Uniform(0.5, 1.5),
                    &device,
                ));
            }
        }
        let final_norm = model.final_norm.as_mut().unwrap();
        final_norm.gamma = Param::from_tensor(Tensor::random(
            [8],
            burn::tensor::Distribution::Uniform(0.5, 1.5),
            &device,
        ));
        final_norm.beta = Some(Param::from_tensor(Tensor::random(
            [8],
            burn::tensor::Distribution::Uniform(-0.5, 0.5),
            &device,
        )));
        let tokens: Vec<i64> = (0..18).map(|i| (i * 7 % 5) as i64).collect();
        let tokens = Tensor::from_data(TensorData::new(tokens, [3, 6]), &device);
        (model.valid(), tokens)
    }

    fn close(a: Tensor<3>, b: Tensor<3>, tolerance: f32) {
        let (a, b) = (HostTensor::of(a), HostTensor::of(b));
        assert_eq!(a.shape, b.shape);
        for (x, y) in a.values.iter().zip(&b.values) {
            assert!((x - y).abs() <= tolerance, "{x} vs {y}");
        }
    }

    /// A tiny model laid out as an imported `BertForMaskedLM`: post-norm, no final norm, a
    /// prediction transform.
    fn tiny_masked_lm(seed: u64) -> Encoder {
        let _turn = model::init::take_rng_turn();
        let device = Device::flex();
        device.seed(seed);
        let io = EncoderIo {
            vocab_size: 5,
            n_outputs: 5,
            max_seq_len: 6,
        };
        let config = EncoderConfig {
            d_model: 8,
            n_layers: 2,
            n_heads: 2,
            d_ff: 16,
            norm: NormPlacement::Post,
            final_norm: false,
            output_transform: true,
            ..EncoderConfig::default()
        };
        config.init(&io, &device).unwrap().valid()
    }

    /// Examples of lengths 3 to 6, some positions scored, as masked words are.
    fn ragged_examples() -> Vec<Example> {
        (0..5)
            .map(|e| {
                let len = 3 + e % 4;
                Example {
                    input: (0..len).map(|i| ((e * 3 + i * 2) % 5) as u32).collect(),
                    target: (0..len)
                        .map(|i| ((i + e) % 3 == 0).then_some(((e + i) % 4) as u32))
                        .collect(),
                }
            })
            .collect()
    }

    #[test]
    fn batched_attribution_on_ragged_examples_equals_each_example_alone() {
        let device = Device::flex();
        for model in [tiny(NormPlacement::Post, 2, 5).0, tiny_masked_lm(6)] {
            let examples = ragged_examples();
            let batched = mean_direct_attribution(&model, &examples, &device);
            let mut sums = vec![0.0f64; batched.len()];
            let mut scored = 0;
            for example in &examples {
                let ids: Vec<i64> = example.input.iter().map(|&t| t as i64).collect();
                let len = ids.len();
                let tokens = Tensor::from_data(TensorData::new(ids, [1, len]), &device);
                let logits = direct_logits(&model, EncoderInput::new(tokens));
                for (sum, logits) in sums.iter_mut().zip(logits) {
                    let host = HostTensor::of(logits);
                    let n_outputs = host.shape[2];
                    for (i, target) in example.target.iter().enumerate() {
                        if let Some(t) = target {
                            *sum += host.values[i * n_outputs + *t as usize] as f64;
                        }
                    }
                }
                scored += example.target.iter().flatten().count();
            }
            for (got, sum) in batched.iter().zip(&sums) {
                let alone = sum / scored as f64;
                assert!((got - alone).abs() < 1e-5, "{got} vs {alone}");
            }
        }
    }

    #[test]
    fn through_a_prediction_transform_a_head_is_read_by_what_the_target_loses() {
        let model = tiny_masked_lm(7);
        let device = Device::flex();
        let tokens: Vec<i64> = (0..12).map(|i| (i * 3 % 5) as i64).collect();
        let tokens = Tensor::<2, Int>::from_data(TensorData::new(tokens, [2, 6]), &device);
        let (logits, cache) = model.forward_with_cache(EncoderInput::new(tokens.clone()));
        let (writes, hidden) = direct_writes(&model, &cache);
        // What the definition starts from is what the model reads: its own logits.
        let bias = model.output.bias.as_ref().unwrap().val().reshape([1, 1, 5]);
        close(
            unembed(&model, model.transform(hidden.clone())) + bias,
            logits,
            1e-5,
        );
        // Each head's direct logits are the difference of the transform with and without
        // its write, not the linear reading of the write, which ignores the transform.
        let direct = direct_logits(&model, EncoderInput::new(tokens));
        for (write, direct) in writes.into_iter().zip(direct) {
            let lost = unembed(&model, model.transform(hidden.clone()))
                - unembed(&model, model.transform(hidden.clone() - write.clone()));
            close(direct.clone(), lost, 1e-6);
            let linear = HostTensor::of(unembed(&model, write)).values;
            let direct = HostTensor::of(direct).values;
            let apart = linear
                .iter()
                .zip(&direct)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0f32, f32::max);
            assert!(apart > 1e-3, "the transform changed nothing: {apart}");
        }
    }

    #[test]
    fn a_frozen_norm_of_its_own_input_is_the_norm_without_beta() {
        let (model, tokens) = tiny(NormPlacement::Pre, 1, 1);
        let (_, cache) = model.forward_with_cache(EncoderInput::new(tokens));
        let input = cache.layers[0].resid_post.clone();
        let final_norm = model.final_norm.as_ref().unwrap();
        let beta = final_norm.beta.as_ref().unwrap().val();
        close(
            frozen_norm(final_norm, input.clone(), input.clone(), model.norm_epsilon),
            final_norm.forward(input) - beta.reshape([1, 1, 8]),
            1e-5,
        );
    }

    #[test]
    fn in_pre_norm_the_heads_and_the_rest_add_up_to_the_logits() {
        let (model, tokens) = tiny(NormPlacement::Pre, 2, 2);
        let (logits, cache) = model.forward_with_cache(EncoderInput::new(tokens.clone()));
        let heads = direct_logits(&model, EncoderInput::new(tokens));
        assert_eq!(heads.len(), 4);
        assert_eq!(heads[0].dims(), [3, 6, 4]);
        // The rest of the residual stream: embeddings, output biases, feed-forwards.
        let last = cache.layers[1].resid_post.clone();
        let rest = head_writes(&model, &cache)
            .into_iter()
            .fold(last.clone(), |rest, write| rest - write);
        let final_norm = model.final_norm.as_ref().unwrap();
        let beta = final_norm.beta.as_ref().unwrap().val().reshape([1, 1, 8]);
        let bias = model.output.bias.as_ref().unwrap().val().reshape([1, 1, 4]);
        let rebuilt = heads.into_iter().fold(
            unembed(
                &model,
                frozen_norm(final_norm, last, rest, model.norm_epsilon) + beta,
            ),
            |sum, h| sum + h,
        ) + bias;
        close(rebuilt, logits, 1e-4);
    }

    #[test]
    fn a_head_writing_zeros_has_zero_attribution() {
        for norm in [NormPlacement::Pre, NormPlacement::Post] {
            let (mut model, tokens) = tiny(norm, 2, 3);
            // Head 1 of layer 0 gets zero rows in the output projection.
            let attention = &mut model.blocks[0].attention;
            let weight = attention.output.weight.val();
            let [rows, cols] = weight.dims();
            let d_head = attention.d_head;
            let zeroed = weight.slice_assign(
                [d_head..2 * d_head, 0..cols],
                Tensor::zeros([d_head, cols], &Device::flex()),
            );
            assert_eq!(rows, 2 * d_head);
            attention.output.weight = Param::from_tensor(zeroed);
            let logits = direct_logits(&model, EncoderInput::new(tokens.clone()));
            let silent = HostTensor::of(logits[1].clone());
            assert!(silent.values.iter().all(|v| *v == 0.0), "{norm:?}");
            let other = HostTensor::of(logits[0].clone());
            assert!(other.values.iter().any(|v| v.abs() > 1e-3), "{norm:?}");

            let examples: Vec<Example> = (0..3)
                .map(|_| Example {
                    input: vec![0; 6],
                    target: vec![Some(1), None, Some(2), Some(3), None, Some(0)],
                })
                .collect();
            let means = mean_direct_attribution(&model, &examples, &Device::flex());
            assert_eq!(means[1], 0.0);
            assert_eq!(means.len(), 4);
        }
    }

    #[test]
    fn post_norm_attribution_matches_a_naive_computation() {
        // One layer: a head's write passes norm_attention, norm_ff and the final norm.
        let (model, tokens) = tiny(NormPlacement::Post, 1, 4);
        let (_, cache) = model.forward_with_cache(EncoderInput::new(tokens.clone()));
        let got = HostTensor::of(direct_logits(&model, EncoderInput::new(tokens))[0].clone());
        let layer = &cache.layers[0];
        let host = |t: Tensor<3>| HostTensor::of(t).values;
        let write = host(head_writes(&model, &cache)[0].clone());
        let attention_in = host(layer.resid_pre.clone() + layer.attn_out.clone());
        let block = &model.blocks[0];
        let ff = block.feed_forward(layer.resid_mid.clone());
        let ff_in = host(layer.resid_mid.clone() + ff);
        let final_in = host(layer.resid_post.clone());
        let final_norm = model.final_norm.as_ref().unwrap();
        let gammas: Vec<Vec<f32>> = [block.post_attention_norm(), &block.norm_ff, final_norm]
            .iter()
            .map(|n| HostTensor::of(n.gamma.val()).values)
            .collect();
        let unembedding = HostTensor::of(model.output.weight.val()).values;
        let d = 8;
        for position in 0..18 {
            let row = |v: &[f32]| -> Vec<f64> {
                v[position * d..(position + 1) * d]
                    .iter()
                    .map(|x| *x as f64)
                    .collect()
            };
            let sigma = |x: &[f64]| {
                let mean = x.iter().sum::<f64>() / d as f64;
                (x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / d as f64 + 1e-5).sqrt()
            };
            let mut x = row(&write);
            for (input, gamma) in [&attention_in, &ff_in, &final_in].iter().zip(&gammas) {
                let s = sigma(&row(input));
                let mean = x.iter().sum::<f64>() / d as f64;
                x = x
                    .iter()
                    .zip(gamma)
                    .map(|(v, g)| (v - mean) / s * *g as f64)
                    .collect();
            }
            for class in 0..4 {
                let expected: f64 = (0..d)
                    .map(|i| x[i] * unembedding[i * 4 + class] as f64)
                    .sum();
                let value = got.values[position * 4 + class] as f64;
                assert!((value - expected).abs() < 1e-4, "{value} vs {expected}");
            }
        }
    }
}
