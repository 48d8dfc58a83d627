//! The seed stack computes what each seed's own encoder computes: logits and gradients per
//! seed within float rounding, on flex (fused kernels) and ndarray (Burn's composed ops), for
//! every head layout, position kind and norm placement and ModernBERT's block options, with padding and with dropout masks
//! drawn as the single encoder draws them; stacking and unstacking give back the encoders,
//! with their parameter ids.

mod common;

use burn::module::{Module, ModuleVisitor, Param};
use burn::optim::GradientsParams;
use burn::prelude::*;
use burn::tensor::Distribution;
use common::*;
use model::seed_stack::{param_ids, param_shapes};
use model::{
    Activation, AttentionMask, DropoutShape, Encoder, EncoderConfig, EncoderInput, EncoderIo,
    HeadLayout, InitScheme, LayerDropout, LocalAttention, NormPlacement, PositionalKind, SeedStack,
    StackInput,
};

/// Tests that seed the device and draw take turns ([`model::init::take_rng_turn`]).
use model::init::take_rng_turn as take_turns;

const IO: EncoderIo = EncoderIo {
    vocab_size: 7,
    n_outputs: 5,
    max_seq_len: 6,
};

fn config(
    layout: HeadLayout,
    positional: PositionalKind,
    norm: NormPlacement,
    dropout: f64,
) -> EncoderConfig {
    EncoderConfig {
        d_model: 8,
        n_layers: 2,
        n_heads: 2,
        head_layout: layout,
        d_ff: 16,
        dropout,
        norm,
        positional,
        ..EncoderConfig::default()
    }
}

/// Every architecture the stack must cover: each layout, each position kind, post-norm,
/// symmetric init.
fn configs() -> Vec<EncoderConfig> {
    let mut configs = Vec::new();
    for layout in [HeadLayout::Split, HeadLayout::Wide, HeadLayout::Narrow] {
        configs.push(config(
            layout,
            PositionalKind::Sinusoidal,
            NormPlacement::Pre,
            0.0,
        ));
    }
    for positional in [
        PositionalKind::Learned,
        PositionalKind::Rotary,
        PositionalKind::None,
    ] {
        configs.push(config(
            HeadLayout::Split,
            positional,
            NormPlacement::Pre,
            0.0,
        ));
    }
    configs.push(config(
        HeadLayout::Split,
        PositionalKind::Learned,
        NormPlacement::Post,
        0.0,
    ));
    configs.push(modern_blocks(0.0));
    // A masked LM's prediction transform before the output layer.
    configs.push(EncoderConfig {
        output_transform: true,
        ..config(
            HeadLayout::Split,
            PositionalKind::Learned,
            NormPlacement::Pre,
            0.0,
        )
    });
    configs.push(EncoderConfig {
        init: InitScheme::Symmetric,
        ..config(
            HeadLayout::Narrow,
            PositionalKind::Sinusoidal,
            NormPlacement::Pre,
            0.0,
        )
    });
    configs
}

/// ModernBERT's block options, which the stack carries through the encoder's own block
/// arithmetic: a gated feed-forward with the tanh GELU, no biases, a first block without its
/// attention norm, local attention in every other layer, another norm epsilon.
fn modern_blocks(dropout: f64) -> EncoderConfig {
    EncoderConfig {
        n_layers: 3,
        activation: Activation::GeluTanh,
        gated_feed_forward: true,
        biases: false,
        first_attention_norm: false,
        norm_epsilon: 1e-6,
        local_attention: Some(LocalAttention {
            window: 2,
            global_every: 2,
            rotary_theta: Some(1_000.0),
        }),
        ..config(
            HeadLayout::Split,
            PositionalKind::Rotary,
            NormPlacement::Pre,
            dropout,
        )
    }
}

/// `seeds` encoders of `config`, seed `s` drawn after `device.seed(100 + s)`.
fn encoders(config: &EncoderConfig, seeds: usize, device: &Device) -> Vec<Encoder> {
    (0..seeds)
        .map(|s| {
            device.seed(100 + s as u64);
            config.init(&IO, device).expect("valid config")
        })
        .collect()
}

fn tokens(seeds: usize, batch: usize, seq: usize, device: &Device) -> Tensor<3, Int> {
    Tensor::<3>::random(
        [seeds, batch, seq],
        Distribution::Uniform(0.0, IO.vocab_size as f64),
        device,
    )
    .int()
}

/// Every float parameter's gradient in module order, flattened.
fn gradients<M: Module>(module: &M, loss: Tensor<1>) -> Vec<Vec<f32>> {
    struct Collect(GradientsParams, Vec<Vec<f32>>);
    impl ModuleVisitor for Collect {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            let grad = self
                .0
                .get::<D>(param.id)
                .expect("every parameter has a gradient");
            self.1.push(to_vec(grad));
        }
    }
    let mut collect = Collect(
        GradientsParams::from_grads(loss.backward(), module),
        Vec::new(),
    );
    module.visit(&mut collect);
    collect.1
}

/// The largest difference relative to the reference's largest magnitude.
fn relative_diff(got: &[f32], want: &[f32]) -> f32 {
    assert_eq!(got.len(), want.len());
    let scale = want.iter().fold(1e-6f32, |m, v| m.max(v.abs()));
    max_abs_diff_vec(got, want) / scale
}

#[allow(deprecated)] // ndarray is still a supported backend in 0.22
fn devices() -> [Device; 2] {
    [Device::flex().autodiff(), Device::ndarray().autodiff()]
}

/// Logits and every parameter's gradient of `sum(w_s * logits_s)` per seed, stacked against
/// each encoder alone.
#[test]
fn logits_and_gradients_match_each_seeds_encoder() {
    let _turn = take_turns();
    let (seeds, batch, seq) = (3, 4, 5);
    for device in devices() {
        for config in configs() {
            let singles = encoders(&config, seeds, &device);
            let stack = SeedStack::stack(&singles.iter().collect::<Vec<_>>());
            device.seed(1);
            let tokens = tokens(seeds, batch, seq, &device);
            let weights = random([seeds, batch, seq, IO.n_outputs], &device);

            let logits = stack.forward(StackInput {
                tokens: tokens.clone(),
                pad: None,
                dropout: None,
            });
            let stack_grads = gradients(&stack, (logits.clone() * weights.clone()).sum());

            for (s, single) in singles.iter().enumerate() {
                let seed_tokens = tokens.clone().narrow(0, s, 1).reshape([batch, seq]);
                let want = single.forward(seed_tokens); // [batch, seq, n_outputs]
                let got = logits
                    .clone()
                    .narrow(0, s, 1)
                    .reshape([batch, seq, IO.n_outputs]);
                let what = format!("{config:?} on {device:?}, seed {s}");
                let diff = relative_diff(&to_vec(got), &to_vec(want.clone()));
                assert!(diff < 1e-5, "logits differ by {diff}: {what}");

                let w = weights
                    .clone()
                    .narrow(0, s, 1)
                    .reshape([batch, seq, IO.n_outputs]);
                let single_grads = gradients(single, (want * w).sum());
                assert_eq!(single_grads.len(), stack_grads.len());
                for (index, (stacked, alone)) in stack_grads.iter().zip(&single_grads).enumerate() {
                    let n = alone.len();
                    let slice = &stacked[s * n..(s + 1) * n];
                    let diff = relative_diff(slice, alone);
                    assert!(diff < 1e-5, "gradient {index} differs by {diff}: {what}");
                }
            }
        }
    }
}

/// Padding hides the padded keys of each seed's own examples: a seed whose batch is padded
/// gives the padded encoder's logits.
#[test]
fn padding_is_per_seed() {
    let _turn = take_turns();
    let device = device();
    let config = config(
        HeadLayout::Split,
        PositionalKind::Sinusoidal,
        NormPlacement::Pre,
        0.0,
    );
    let singles = encoders(&config, 2, &device);
    let stack = SeedStack::stack(&singles.iter().collect::<Vec<_>>());
    let tokens = tokens(2, 3, 5, &device);
    // Seed 0's second example has two padded positions; seed 1 has none.
    let mut pad = vec![false; 2 * 3 * 5];
    pad[5 + 3] = true;
    pad[5 + 4] = true;
    let pad = Tensor::<2, Bool>::from_data(TensorData::new(pad, [6, 5]), &device);
    let logits = stack.forward(StackInput {
        tokens: tokens.clone(),
        pad: Some(pad.clone()),
        dropout: None,
    });
    for (s, single) in singles.iter().enumerate() {
        let input =
            EncoderInput::new(tokens.clone().narrow(0, s, 1).reshape([3, 5])).mask(AttentionMask {
                pad: Some(pad.clone().narrow(0, 3 * s, 3)),
                attn: None,
            });
        let want = single.forward_input(input);
        let got = logits.clone().narrow(0, s, 1).reshape([3, 5, IO.n_outputs]);
        let diff = max_abs_diff(got, want);
        assert!(diff < 1e-5, "seed {s}: logits differ by {diff}");
    }
}

/// With dropout, the stack given the masks `LayerDropout::draw` draws from a seed's
/// generator computes what the encoder computes after reseeding the generator the same way,
/// plain and with ModernBERT's block options (a gated feed-forward's hidden mask is `d_ff`
/// wide, after the gate).
#[test]
fn dropout_masks_drawn_outside_match_the_encoders_own() {
    let _turn = take_turns();
    let plain = config(
        HeadLayout::Split,
        PositionalKind::Sinusoidal,
        NormPlacement::Pre,
        0.3,
    );
    for (device, config) in devices().into_iter().flat_map(|device| {
        [
            (device.clone(), plain.clone()),
            (device, modern_blocks(0.3)),
        ]
    }) {
        let singles = encoders(&config, 2, &device);
        let stack = SeedStack::stack(&singles.iter().collect::<Vec<_>>());
        let (batch, seq) = (3, 5);
        let tokens = tokens(2, batch, seq, &device);
        let shape = DropoutShape {
            prob: config.dropout,
            n_heads: config.n_heads,
            d_model: config.d_model,
            d_ff: config.d_ff,
        };
        // Per seed, the masks of every block in the encoder's order, from stream 40 + s.
        let drawn: Vec<Vec<LayerDropout>> = (0..2)
            .map(|s| {
                device.seed(40 + s as u64);
                (0..config.n_layers)
                    .map(|_| LayerDropout::draw(shape, batch, seq, &device))
                    .collect()
            })
            .collect();
        let per_block = (0..config.n_layers)
            .map(|layer| {
                LayerDropout::for_stack(drawn.iter().map(|d| vec![d[layer].clone()]).collect())
            })
            .collect();
        let logits = stack.forward(StackInput {
            tokens: tokens.clone(),
            pad: None,
            dropout: Some(per_block),
        });
        let mut differs_from_no_dropout = false;
        for (s, single) in singles.iter().enumerate() {
            device.seed(40 + s as u64);
            let want = single.forward(tokens.clone().narrow(0, s, 1).reshape([batch, seq]));
            let got = logits
                .clone()
                .narrow(0, s, 1)
                .reshape([batch, seq, IO.n_outputs]);
            let diff = max_abs_diff(got.clone(), want);
            assert!(
                diff < 1e-5,
                "seed {s} on {device:?}: logits differ by {diff}"
            );
            let plain = single
                .valid()
                .forward(tokens.clone().narrow(0, s, 1).reshape([batch, seq]).inner());
            differs_from_no_dropout |= max_abs_diff(got.inner(), plain) > 1e-3;
        }
        assert!(differs_from_no_dropout, "the masks changed nothing");
    }
}

/// Stacking then unstacking gives each encoder back, values and parameter ids; the stack's
/// parameters correspond to the encoder's in module order, with the seed axis in front.
#[test]
fn unstack_gives_back_each_encoder_with_its_ids() {
    let _turn = take_turns();
    let device = device();
    for config in configs() {
        let singles = encoders(&config, 3, &device);
        let stack = SeedStack::stack(&singles.iter().collect::<Vec<_>>());
        let stack_shapes = param_shapes(&stack);
        let single_shapes = param_shapes(&singles[0]);
        assert_eq!(stack_shapes.len(), single_shapes.len(), "{config:?}");
        for (stacked, single) in stack_shapes.iter().zip(&single_shapes) {
            assert_eq!(stacked[0], 3);
            assert_eq!(&stacked[1..], &single[..], "{config:?}");
        }
        for (s, single) in singles.iter().enumerate() {
            let template = config.init(&IO, &device).expect("valid config");
            let template_ids = param_ids(&template);
            let back = stack.unstack(s, template);
            assert_eq!(param_ids(&back), template_ids);
            let values = |m: &Encoder| parameter_values(m);
            assert_eq!(values(&back), values(single), "{config:?}, seed {s}");
        }
    }
}

/// Every float parameter's values in module order.
fn parameter_values(module: &Encoder) -> Vec<Vec<f32>> {
    struct Collect(Vec<Vec<f32>>);
    impl ModuleVisitor for Collect {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            self.0.push(to_vec(param.val()));
        }
    }
    let mut collect = Collect(Vec::new());
    module.visit(&mut collect);
    collect.0
}
