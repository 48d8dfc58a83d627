//! The encoder as a whole: symmetric init keeps heads identical under training, gradients
//! reach every parameter, the activation cache matches the forward pass, and bad configs
//! are refused with messages that name the key.

mod common;

use burn::module::{Module, ModuleVisitor, Param, ParamId};
use burn::nn::loss::CrossEntropyLossConfig;
use burn::optim::{AdamWConfig, GradientsParams};
use burn::prelude::*;
use common::*;
use model::{
    ConfigError, Encoder, EncoderConfig, EncoderInput, EncoderIo, HeadLayout, InitScheme,
    InputPatch, NormPlacement, PositionalKind, QkvChannel,
};

const IO: EncoderIo = EncoderIo {
    vocab_size: 7,
    n_outputs: 5,
    max_seq_len: 6,
};

fn tiny(layout: HeadLayout, init: InitScheme) -> EncoderConfig {
    EncoderConfig {
        d_model: 8,
        n_layers: 2,
        n_heads: 4,
        head_layout: layout,
        d_ff: 16,
        init,
        ..EncoderConfig::default()
    }
}

/// A batch of random tokens and random targets: `[batch, seq]` each.
fn batch(device: &Device, batch: usize) -> (Tensor<2, Int>, Tensor<2, Int>) {
    let tokens = Tensor::<2>::random(
        [batch, IO.max_seq_len],
        burn::tensor::Distribution::Uniform(0.0, IO.vocab_size as f64),
        device,
    )
    .int();
    let targets = Tensor::<2>::random(
        [batch, IO.max_seq_len],
        burn::tensor::Distribution::Uniform(0.0, IO.n_outputs as f64),
        device,
    )
    .int();
    (tokens, targets)
}

fn loss(model: &Encoder, tokens: Tensor<2, Int>, targets: Tensor<2, Int>) -> Tensor<1> {
    let logits = model.forward(tokens); // [batch, seq, n_outputs]
    let [b, s, n] = logits.dims();
    CrossEntropyLossConfig::new()
        .init(&logits.device())
        .forward(logits.reshape([b * s, n]), targets.reshape([b * s]))
}

/// Trains `steps` AdamW steps on fresh random batches.
fn train(mut model: Encoder, device: &Device, steps: usize) -> Encoder {
    let mut optim = AdamWConfig::new().init();
    for _ in 0..steps {
        let (tokens, targets) = batch(device, 8);
        let grads = GradientsParams::from_grads(loss(&model, tokens, targets).backward(), &model);
        model = optim.step(1e-2, model, grads);
    }
    model
}

/// Largest difference between any head's weights and head 0's, over all layers. Narrow
/// heads read different chunks, so their own projections are compared.
fn head_spread(model: &Encoder) -> f32 {
    let mut spread = 0.0f32;
    for block in &model.blocks {
        let first = block.attention.head_weights(0);
        if let Some(narrow) = &block.attention.qkv_narrow {
            for h in 1..block.attention.n_heads {
                let (w, b) = (narrow.weight.val(), narrow.bias.val());
                spread = spread.max(max_abs_diff(w.clone().narrow(0, 0, 1), w.narrow(0, h, 1)));
                spread = spread.max(max_abs_diff(b.clone().narrow(0, 0, 1), b.narrow(0, h, 1)));
                let o = block.attention.head_weights(h).o;
                spread = spread.max(max_abs_diff(first.o.clone(), o));
            }
            continue;
        }
        for h in 1..block.attention.n_heads {
            let other = block.attention.head_weights(h);
            for (a, b) in [
                (first.q.clone(), other.q.clone()),
                (first.k.clone(), other.k.clone()),
                (first.v.clone(), other.v.clone()),
                (first.o.clone(), other.o.clone()),
            ] {
                spread = spread.max(max_abs_diff(a, b));
            }
            for (a, b) in [
                (first.q_bias.clone(), other.q_bias.clone()),
                (first.k_bias.clone(), other.k_bias.clone()),
                (first.v_bias.clone(), other.v_bias.clone()),
            ] {
                spread = spread.max(max_abs_diff(a, b));
            }
        }
    }
    spread
}

#[test]
fn symmetric_heads_stay_identical_through_training_and_random_heads_differ() {
    let device = Device::flex().autodiff();
    for layout in [HeadLayout::Split, HeadLayout::Wide] {
        device.seed(1);
        let symmetric = tiny(layout, InitScheme::Symmetric)
            .init(&IO, &device)
            .unwrap();
        assert_eq!(
            head_spread(&symmetric),
            0.0,
            "{layout:?}: not identical at init"
        );
        let trained = train(symmetric, &device, 8);
        let spread = head_spread(&trained);
        assert!(
            spread < 1e-6,
            "{layout:?}: symmetric heads drifted apart by {spread}"
        );

        device.seed(1);
        let random = tiny(layout, InitScheme::Random).init(&IO, &device).unwrap();
        let spread = head_spread(&train(random, &device, 8));
        assert!(
            spread > 1e-2,
            "{layout:?}: random heads are alike ({spread})"
        );
    }
}

#[test]
fn symmetric_narrow_heads_start_identical() {
    // In the narrow layout heads read different chunks, so only the start is identical.
    let device = device();
    let model = tiny(HeadLayout::Narrow, InitScheme::Symmetric)
        .init(&IO, &device)
        .unwrap();
    assert_eq!(head_spread(&model), 0.0);
}

/// Collects every float parameter with its path and rank.
#[derive(Default)]
struct ParamPaths {
    stack: Vec<String>,
    params: Vec<(String, ParamId, usize)>,
}

impl ModuleVisitor for ParamPaths {
    fn enter_module(&mut self, name: &str, _: &str) {
        self.stack.push(name.to_string());
    }
    fn exit_module(&mut self, _: &str, _: &str) {
        self.stack.pop();
    }
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        self.params.push((self.stack.join("."), param.id, D));
    }
}

#[test]
fn gradients_reach_every_parameter() {
    let device = Device::flex().autodiff();
    device.seed(3);
    let configs = [
        (
            HeadLayout::Split,
            PositionalKind::Learned,
            NormPlacement::Pre,
        ),
        (
            HeadLayout::Wide,
            PositionalKind::Rotary,
            NormPlacement::Post,
        ),
        (
            HeadLayout::Narrow,
            PositionalKind::Sinusoidal,
            NormPlacement::Pre,
        ),
    ];
    for (layout, positional, norm) in configs {
        let config = EncoderConfig {
            positional,
            norm,
            ..tiny(layout, InitScheme::Random)
        };
        let model = config.init(&IO, &device).unwrap();
        let (tokens, targets) = batch(&device, 8);
        let grads = GradientsParams::from_grads(loss(&model, tokens, targets).backward(), &model);
        let mut visitor = ParamPaths::default();
        model.visit(&mut visitor);
        assert!(visitor.params.len() > 20, "too few parameters found");
        for (path, id, rank) in visitor.params {
            let largest = match rank {
                1 => grads.get::<1>(id).map(|g| to_vec(g.abs().max())[0]),
                2 => grads.get::<2>(id).map(|g| to_vec(g.abs().max())[0]),
                3 => grads.get::<3>(id).map(|g| to_vec(g.abs().max())[0]),
                _ => panic!("unexpected rank {rank} for {path}"),
            }
            .unwrap_or(0.0);
            let nonzero = largest > 0.0;
            assert!(
                nonzero,
                "{layout:?}/{positional:?}/{norm:?}: no gradient for {path}"
            );
        }
    }
}

#[test]
fn the_cache_records_the_same_pass_as_forward() {
    let device = device();
    let model = tiny(HeadLayout::Split, InitScheme::Random)
        .init(&IO, &device)
        .unwrap();
    let (tokens, _) = batch(&device, 3);
    let logits = model.forward(tokens.clone());
    let (cached_logits, cache) = model.forward_with_cache(EncoderInput::new(tokens));
    assert!(max_abs_diff(logits, cached_logits) < 1e-6);
    assert_eq!(cache.layers.len(), 2);
    let layer = &cache.layers[1];
    assert_eq!(layer.pattern.dims(), [3, 4, 6, 6]);
    assert_eq!(layer.head_outputs.dims(), [3, 6, 4, 2]);
    assert_eq!(layer.attn_input.dims(), [3, 6, 8]);
    // The residual stream adds up: block 0's output is block 1's input.
    assert!(max_abs_diff(cache.layers[0].resid_post.clone(), layer.resid_pre.clone()) == 0.0);
    // Pre-norm: resid_mid = resid_pre + attention output.
    let sum = layer.resid_pre.clone() + layer.attn_out.clone();
    assert!(max_abs_diff(sum, layer.resid_mid.clone()) < 1e-6);
}

/// An input patch at a block, in both norm placements: read by nothing it changes nothing;
/// read by every head and the skip connection the model runs on from the other stream as if
/// it were its own; read by one head's key only, it changes the output, and by exactly what
/// that head's changed output writes (checked through a head patch of the head's output
/// from the input-patched run).
#[test]
fn an_input_patch_reroutes_exactly_the_inputs_it_names() {
    let device = device();
    for norm in [NormPlacement::Pre, NormPlacement::Post] {
        let model = EncoderConfig {
            norm,
            ..tiny(HeadLayout::Split, InitScheme::Random)
        }
        .init(&IO, &device)
        .unwrap();
        let (tokens, _) = batch(&device, 3);
        let (other_tokens, _) = batch(&device, 3);
        let (own_logits, _) = model.forward_with_cache(EncoderInput::new(tokens.clone()));
        let (other_logits, other_cache) =
            model.forward_with_cache(EncoderInput::new(other_tokens.clone()));
        for layer in 0..2 {
            let resid = other_cache.layers[layer].resid_pre.clone();
            let run = |patch: InputPatch| {
                model
                    .forward_with_cache(EncoderInput::new(tokens.clone()).input_patch(layer, patch))
            };
            let (unread, _) = run(InputPatch::new(resid.clone(), 4));
            assert!(
                max_abs_diff(unread, own_logits.clone()) < 1e-6,
                "{norm:?} L{layer}"
            );
            let (all, _) = run(InputPatch::new(resid.clone(), 4)
                .read_by_all_heads()
                .skip(true));
            assert!(
                max_abs_diff(all, other_logits.clone()) < 1e-5,
                "{norm:?} L{layer}"
            );

            let (one_key, cache) =
                run(InputPatch::new(resid.clone(), 4).read_by(1, QkvChannel::Key));
            assert!(
                max_abs_diff(one_key.clone(), own_logits.clone()) > 1e-4,
                "{norm:?} L{layer}"
            );
            // The same run as a patch of head 1's output: the key reroute acts only there.
            let mut weight = [0.0f32; 4];
            weight[1] = 1.0;
            let head_patch = model::HeadPatch {
                values: cache.layers[layer].head_outputs.clone(),
                weight: Tensor::<1>::from_floats(weight, &device).reshape([1, 1, 4, 1]),
            };
            let through_output = model
                .forward_input(EncoderInput::new(tokens.clone()).head_patch(layer, head_patch));
            assert!(
                max_abs_diff(one_key, through_output) < 1e-5,
                "{norm:?} L{layer}"
            );
        }
    }
}

#[test]
fn a_head_mask_of_ones_changes_nothing_and_zeros_change_the_output() {
    let device = device();
    let model = tiny(HeadLayout::Split, InitScheme::Random)
        .init(&IO, &device)
        .unwrap();
    let (tokens, _) = batch(&device, 2);
    let plain = model.forward(tokens.clone());
    let ones = model
        .forward_input(EncoderInput::new(tokens.clone()).head_mask(Tensor::ones([2, 4], &device)));
    assert!(max_abs_diff(plain.clone(), ones) < 1e-6);
    let zeros =
        model.forward_input(EncoderInput::new(tokens).head_mask(Tensor::zeros([2, 4], &device)));
    assert!(max_abs_diff(plain, zeros) > 1e-3);
}

#[test]
fn the_model_section_parses_from_toml_and_rejects_unknown_keys() {
    let config: EncoderConfig = toml::from_str(
        "d_model = 32\nn_heads = 2\nhead_layout = \"narrow\"\npositional = \"rotary\"\ninit = \"symmetric\"\nnorm = \"post\"",
    )
    .unwrap();
    assert_eq!(config.head_layout, HeadLayout::Narrow);
    assert_eq!(config.positional, PositionalKind::Rotary);
    assert_eq!(config.n_layers, 2, "defaults fill the rest");
    let err = toml::from_str::<EncoderConfig>("d_modle = 32")
        .unwrap_err()
        .to_string();
    assert!(err.contains("unknown field `d_modle`"), "{err}");
}

#[test]
fn bad_configs_are_refused_with_the_key_named() {
    let device = device();
    let cases: Vec<(EncoderConfig, &str)> = vec![
        (
            EncoderConfig {
                n_heads: 3,
                ..EncoderConfig::default()
            },
            "model.n_heads = 3 does not divide model.d_model = 64",
        ),
        (
            EncoderConfig {
                n_heads: 3,
                head_layout: HeadLayout::Narrow,
                ..EncoderConfig::default()
            },
            "narrow layout",
        ),
        (
            EncoderConfig {
                d_model: 0,
                ..EncoderConfig::default()
            },
            "model.d_model = 0",
        ),
        (
            EncoderConfig {
                n_layers: 0,
                ..EncoderConfig::default()
            },
            "model.n_layers = 0",
        ),
        (
            EncoderConfig {
                d_head: Some(0),
                ..EncoderConfig::default()
            },
            "model.d_head = 0",
        ),
        (
            EncoderConfig {
                d_ff: 0,
                ..EncoderConfig::default()
            },
            "model.d_ff = 0",
        ),
        (
            EncoderConfig {
                dropout: 1.0,
                ..EncoderConfig::default()
            },
            "model.dropout = 1",
        ),
        (
            EncoderConfig {
                dropout: -0.1,
                ..EncoderConfig::default()
            },
            "must be in [0, 1)",
        ),
        (
            EncoderConfig {
                head_layout: HeadLayout::Wide,
                d_head: Some(8),
                ..EncoderConfig::default()
            },
            "contradicts head_layout = \"wide\"",
        ),
        (
            EncoderConfig {
                d_head: Some(5),
                positional: PositionalKind::Rotary,
                ..EncoderConfig::default()
            },
            "even head size",
        ),
        (
            EncoderConfig {
                norm_epsilon: 0.0,
                ..EncoderConfig::default()
            },
            "model.norm_epsilon = 0 is out of range: it must be above 0 and below 1",
        ),
        (
            EncoderConfig {
                norm_epsilon: f64::NAN,
                ..EncoderConfig::default()
            },
            "model.norm_epsilon = NaN",
        ),
        (
            EncoderConfig {
                token_types: 1025,
                ..EncoderConfig::default()
            },
            "model.token_types = 1025 is out of range: it must be 0 (none) to 1024",
        ),
    ];
    for (config, expected) in cases {
        let err = config.init(&IO, &device).unwrap_err();
        assert!(
            err.to_string().contains(expected),
            "expected {expected:?} in {err}"
        );
    }
    // Explicit d_head frees split heads from dividing d_model.
    let ok = EncoderConfig {
        n_heads: 3,
        d_head: Some(8),
        ..EncoderConfig::default()
    };
    assert!(ok.init(&IO, &device).is_ok());
    // BERT's options build BERT's parts, and a toy config written out does not list them.
    let bert = EncoderConfig {
        norm: NormPlacement::Post,
        norm_epsilon: 1e-12,
        token_types: 2,
        embedding_norm: true,
        final_norm: false,
        output_transform: true,
        ..EncoderConfig::default()
    };
    let model = bert.init(&IO, &device).unwrap();
    assert_eq!(model.token_types.as_ref().unwrap().weight.dims(), [2, 64]);
    assert!(model.embedding_norm.is_some() && model.final_norm.is_none());
    let transform = model.output_transform.as_ref().unwrap();
    assert_eq!(transform.dense.weight.dims(), [64, 64]);
    assert_eq!(model.blocks[0].norm_epsilon, 1e-12);
    let written = toml::to_string(&EncoderConfig::default()).unwrap();
    for key in [
        "norm_epsilon",
        "token_types",
        "embedding_norm",
        "final_norm",
    ] {
        assert!(!written.contains(key), "{key} in {written}");
    }
    assert!(toml::to_string(&bert).unwrap().contains("token_types = 2"));
    assert!(matches!(
        EncoderConfig::default().validate(&EncoderIo {
            vocab_size: 0,
            ..IO
        }),
        Err(ConfigError::ZeroSize { .. })
    ));
}

/// Factorised embeddings (ALBERT, ELECTRA-small): a token's input to the first block is its
/// embedding row through the projection, and the residual stream reads the tied output
/// layer through the projection as well, so the two views agree by hand.
#[test]
fn factorised_embeddings_are_read_through_their_projection() {
    let device = Device::flex();
    device.seed(7);
    let config = EncoderConfig {
        d_model: 8,
        n_heads: 2,
        d_ff: 16,
        positional: model::PositionalKind::None,
        embedding_size: Some(4),
        output_transform: true,
        ..EncoderConfig::default()
    };
    let io = EncoderIo {
        vocab_size: 10,
        n_outputs: 10,
        max_seq_len: 6,
    };
    let mut encoder = config.init(&io, &device).unwrap();
    assert_eq!(encoder.embedding.weight.dims(), [10, 4]);
    assert_eq!(encoder.output.weight.dims(), [4, 10]);
    // Tie the output layer to the embeddings, as an imported masked LM is.
    encoder.output.weight = Param::from_tensor(encoder.embedding.weight.val().transpose());
    let host = |t: Tensor<2>| -> Vec<f32> { t.into_data().try_to_vec().unwrap() };
    let projected = encoder.token_embeddings(); // [10, 8]
    assert_eq!(projected.dims(), [10, 8]);
    let unembedding = encoder.unembedding(); // [8, 10]
    assert_eq!(host(unembedding.transpose()), host(projected.clone()));
    // The embedding stage without positions or a norm: E[token] P + b.
    let tokens = Tensor::<2, Int>::from_ints([[3, 5]], &device);
    let embedded = encoder.embed(tokens, None).reshape([2, 8]);
    let bias = encoder
        .embedding_projection
        .as_ref()
        .unwrap()
        .bias
        .as_ref()
        .unwrap()
        .val()
        .unsqueeze_dim::<2>(0); // [1, 8]
    let by_hand = projected.select(0, Tensor::from_ints([3, 5], &device)) + bias;
    let difference: f32 = (embedded - by_hand).abs().max().into_scalar();
    assert!(difference < 1e-6, "{difference}");
    // The forward pass runs end to end and gives one logit per token.
    let logits = encoder.forward(Tensor::<2, Int>::from_ints([[1, 2, 3]], &device));
    assert_eq!(logits.dims(), [1, 3, 10]);
}
