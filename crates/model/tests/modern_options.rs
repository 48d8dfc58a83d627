//! ModernBERT's options of the one encoder, each against a reference written apart from
//! the code it checks: local attention against an explicit band mask built in a loop (and
//! the fused core against the composed path), the gated feed-forward against its formula,
//! a model without biases or a first attention norm by its parameters, the rotary bases by
//! layer; and every option off, and unwritten, for a toy model.

mod common;

use burn::module::{Module, ModuleVisitor, Param};
use burn::prelude::*;
use common::*;
use model::{
    AttentionInput, AttentionMask, EncoderConfig, EncoderInput, EncoderIo, LocalAttention,
    NormPlacement, PositionalKind,
};

const IO: EncoderIo = EncoderIo {
    vocab_size: 11,
    n_outputs: 11,
    max_seq_len: 12,
};

/// ModernBERT's shape in small: three pre-norm layers, rotary positions, layer 1 local with
/// a window of 4 (keys at most 2 away), GeGLU, no biases, layer 0's attention unnormed.
fn modern() -> EncoderConfig {
    EncoderConfig {
        d_model: 8,
        n_layers: 3,
        n_heads: 2,
        d_ff: 12,
        positional: PositionalKind::Rotary,
        rotary_theta: 160_000.0,
        local_attention: Some(LocalAttention {
            window: 4,
            global_every: 2,
            rotary_theta: Some(10_000.0),
        }),
        gated_feed_forward: true,
        biases: false,
        first_attention_norm: false,
        embedding_norm: true,
        output_transform: true,
        ..EncoderConfig::default()
    }
}

fn tokens(device: &Device) -> Tensor<2, Int> {
    Tensor::from_ints(
        [[1, 4, 2, 9, 7, 3, 3, 10, 5], [6, 0, 8, 2, 4, 1, 9, 5, 7]],
        device,
    )
}

#[test]
fn a_local_layer_sees_only_keys_within_reach_as_an_explicit_mask_would() {
    let device = device();
    let model = modern().init(&IO, &device).unwrap();
    let tokens = tokens(&device);
    let [batch, seq] = tokens.dims();
    let (logits, cache) = model.forward_with_cache(EncoderInput::new(tokens.clone()));
    for (layer, cached) in cache.layers.iter().enumerate() {
        let pattern = to_vec(cached.pattern.clone()); // [batch, heads, seq, seq]
        let far: f32 = (0..pattern.len())
            .filter(|index| (index / seq % seq).abs_diff(index % seq) > 2)
            .map(|index| pattern[index])
            .sum();
        match layer {
            1 => assert_eq!(far, 0.0, "layer 1 is local: nothing beyond 2 positions"),
            _ => assert!(far > 0.1, "layer {layer} is global, yet sees no far key"),
        }
    }
    // Layer 1 again, its window off and the band given as an explicit mask instead.
    let mut attention = model.blocks[1].attention.clone();
    attention.reach = None;
    let band: Vec<bool> = (0..batch * seq * seq)
        .map(|index| (index / seq % seq).abs_diff(index % seq) > 2)
        .collect();
    let band = Tensor::<3, Bool>::from_data(TensorData::new(band, [batch, seq, seq]), &device);
    let explicit = attention.forward(
        AttentionInput::new(cache.layers[1].attn_input.clone())
            .mask(AttentionMask {
                pad: None,
                attn: Some(band),
            })
            .capture(true),
    );
    let difference = max_abs_diff(explicit.pattern.unwrap(), cache.layers[1].pattern.clone());
    assert!(difference < 1e-6, "{difference}");
    // The fused core (forward without a cache) applies the same window.
    let fused = model.forward(tokens);
    let difference = max_abs_diff(fused, logits);
    assert!(difference < 1e-4, "{difference}");
}

#[test]
fn the_gated_feed_forward_is_the_gelu_of_one_half_times_the_other() {
    let device = device();
    let model = modern().init(&IO, &device).unwrap();
    let block = &model.blocks[0];
    assert_eq!(block.ff_in.weight.dims(), [8, 24], "2 * d_ff wide");
    let x = random([2, 5, 8], &device);
    let hidden = x.clone().matmul(block.ff_in.weight.val().unsqueeze_dim(0)); // [2, 5, 24]
    let (input, gate) = (hidden.clone().narrow(2, 0, 12), hidden.narrow(2, 12, 12));
    // GELU(u) = u * Phi(u), Phi the standard normal's distribution function.
    let phi = input
        .clone()
        .div_scalar(2f32.sqrt())
        .erf()
        .add_scalar(1.0)
        .div_scalar(2.0);
    let by_hand = (input * phi * gate).matmul(block.ff_out.weight.val().unsqueeze_dim(0));
    let difference = max_abs_diff(block.feed_forward(x), by_hand);
    assert!(difference < 1e-5, "{difference}");
}

/// Every float parameter's module path.
struct Names(Vec<String>, Vec<String>);

impl ModuleVisitor for Names {
    fn enter_module(&mut self, name: &str, _: &str) {
        self.1.push(name.to_string());
    }
    fn exit_module(&mut self, _: &str, _: &str) {
        self.1.pop();
    }
    fn visit_float<const D: usize>(&mut self, _: &Param<Tensor<D>>) {
        self.0.push(self.1.join("."));
    }
}

fn parameter_names(config: &EncoderConfig) -> Vec<String> {
    let model = config.init(&IO, &device()).unwrap();
    let mut names = Names(vec![], vec![]);
    model.visit(&mut names);
    names.0
}

#[test]
fn without_biases_or_a_first_attention_norm_the_model_has_neither() {
    let names = parameter_names(&modern());
    let biases: Vec<&String> = names
        .iter()
        .filter(|n| n.ends_with(".bias") || n.ends_with(".beta"))
        .collect();
    assert_eq!(
        biases,
        ["output.bias"],
        "only the output layer keeps its bias"
    );
    assert!(
        !names
            .iter()
            .any(|n| n.starts_with("blocks.0.norm_attention"))
    );
    assert!(names.iter().any(|n| n == "blocks.1.norm_attention.gamma"));
    assert!(names.iter().any(|n| n == "final_norm.gamma"));
    // A toy model has them all, and a post-norm first block cannot go unnormed.
    let toy = parameter_names(&EncoderConfig::default());
    assert!(toy.iter().any(|n| n == "blocks.0.norm_attention.beta"));
    assert!(toy.iter().any(|n| n == "blocks.0.ff_in.bias"));
    let refused = |config: EncoderConfig| config.validate(&IO).unwrap_err().to_string();
    let post = refused(EncoderConfig {
        norm: NormPlacement::Post,
        ..modern()
    });
    assert!(post.contains("model.first_attention_norm"), "{post}");
}

#[test]
fn each_layer_gets_its_window_and_rotary_base() {
    let config = modern();
    let theta = |layer| config.attention_of_layer(&IO, layer).rotary_theta;
    let reach = |layer| config.attention_of_layer(&IO, layer).reach;
    assert_eq!(
        [theta(0), theta(1), theta(2)],
        [160_000.0, 10_000.0, 160_000.0]
    );
    assert_eq!([reach(0), reach(1), reach(2)], [None, Some(2), None]);
    // The base changes the scores: the same weights with RoFormer's base differ.
    let device = device();
    let model = config.init(&IO, &device).unwrap();
    let mut other = model.clone();
    let roformer = model::MultiHeadAttentionConfig::new(8, 2)
        .with_rotary(Some(IO.max_seq_len))
        .init(&device)
        .unwrap();
    other.blocks[0].attention.rotary = roformer.rotary;
    let input = EncoderInput::new(tokens(&device));
    let difference = max_abs_diff(
        model.forward_input(input.clone()),
        other.forward_input(input),
    );
    assert!(
        difference > 1e-4,
        "theta 160000 and 10000 gave the same logits"
    );
}

#[test]
fn bad_values_are_refused_by_key_and_every_option_is_off_and_unwritten_for_a_toy() {
    let refused = |config: EncoderConfig| config.validate(&IO).unwrap_err().to_string();
    let local = |window, global_every| EncoderConfig {
        local_attention: Some(LocalAttention {
            window,
            global_every,
            rotary_theta: None,
        }),
        ..modern()
    };
    assert!(refused(local(1, 2)).contains("model.local_attention.window"));
    assert!(refused(local(4, 0)).contains("model.local_attention.global_every"));
    let theta = refused(EncoderConfig {
        rotary_theta: 0.5,
        ..modern()
    });
    assert!(theta.contains("model.rotary_theta"), "{theta}");
    let written = toml::to_string(&EncoderConfig::default()).unwrap();
    for key in [
        "gated_feed_forward",
        "biases",
        "first_attention_norm",
        "rotary_theta",
        "local_attention",
    ] {
        assert!(
            !written.contains(key),
            "{key} written for a toy:\n{written}"
        );
    }
    // Written and read back, ModernBERT's options survive a run's config.toml.
    let text = toml::to_string(&modern()).unwrap();
    assert_eq!(toml::from_str::<EncoderConfig>(&text).unwrap(), modern());
    // The seed stack carries every block option and names the first embedding or output
    // option it does not implement.
    assert_eq!(
        model::seed_stack::unsupported_option(&modern()),
        Some("model.embedding_norm")
    );
    assert_eq!(
        model::seed_stack::unsupported_option(&EncoderConfig {
            embedding_norm: false,
            output_transform: false,
            ..modern()
        }),
        None
    );
}
