//! One encoder block: self-attention and a GELU feed-forward network, each in a residual
//! branch, with layer norm before the branch (pre-norm, Xiong et al. 2020) or after the
//! residual sum (post-norm, Vaswani et al. 2017).

use burn::nn::{Dropout, DropoutConfig, LayerNorm, LayerNormConfig, Linear, LinearConfig};
use burn::prelude::*;

use crate::attention::{
    AttentionInput, AttentionMask, HeadPatch, MultiHeadAttention, MultiHeadAttentionConfig,
    QkvChannel, QkvPatch,
};
use crate::cache::LayerCache;
use crate::error::ConfigError;
use crate::linear::linear_over_rows;
pub use crate::residual::NormPlacement;
use crate::residual::{Residuals, StreamNorm, Streams, activate};

/// The layer norms' default epsilon (Burn's), named because the fused layer norm needs it
/// and Burn keeps a norm's own private; a model keeps its own (`model.norm_epsilon`).
pub const LAYER_NORM_EPSILON: f64 = 1e-5;

/// `layer_norm(x)` with `epsilon`, fused under autodiff on flex (crate::fused).
pub(crate) fn norm<const D: usize>(
    layer_norm: &LayerNorm,
    x: Tensor<D>,
    epsilon: f64,
) -> Tensor<D> {
    crate::fused::layer_norm(x, layer_norm, epsilon)
}

/// A layer norm of `width` with `epsilon`, with a shift (`beta`) where `bias` says.
pub(crate) fn layer_norm_of(width: usize, epsilon: f64, bias: bool, device: &Device) -> LayerNorm {
    LayerNormConfig::new(width)
        .with_epsilon(epsilon)
        .with_bias(bias)
        .init(device)
}

/// A linear layer `[d_in, d_out]`, with a bias where `bias` says.
pub(crate) fn linear_of(d_in: usize, d_out: usize, bias: bool, device: &Device) -> Linear {
    LinearConfig::new(d_in, d_out).with_bias(bias).init(device)
}

/// A block's layer norm with its epsilon (Burn keeps a norm's own private).
struct BlockNorm<'a>(&'a LayerNorm, f64);

impl StreamNorm for BlockNorm<'_> {
    fn normalize(&self, x: Tensor<3>) -> Tensor<3> {
        norm(self.0, x, self.1)
    }
}

/// Configuration of an [`EncoderBlock`].
#[derive(Debug, Clone, PartialEq)]
pub struct EncoderBlockConfig {
    /// The attention sub-layer.
    pub attention: MultiHeadAttentionConfig,
    /// Hidden width of the feed-forward network.
    pub d_ff: usize,
    /// Dropout on each residual branch's output and inside the feed-forward network.
    pub dropout: f64,
    /// Where the layer norms sit.
    pub norm: NormPlacement,
    /// The layer norms' epsilon.
    pub norm_epsilon: f64,
    /// The feed-forward's activation.
    pub activation: crate::Activation,
    /// A gated feed-forward (GeGLU with the GELU, Shazeer 2020: ModernBERT's): `ff_in` is
    /// `2 * d_ff` wide and its first half, through the activation, scales its second.
    pub gated: bool,
    /// Whether the attention branch has its norm: a pre-norm block without one reads the
    /// residual stream itself (ModernBERT's first layer, whose input is the normed
    /// embeddings).
    pub attention_norm: bool,
    /// Whether the feed-forward's linears and the norms have biases (the attention's are
    /// its config's).
    pub bias: bool,
}

impl EncoderBlockConfig {
    /// Builds the block.
    pub fn init(&self, device: &Device) -> Result<EncoderBlock, ConfigError> {
        if self.d_ff == 0 {
            return Err(ConfigError::ZeroSize {
                field: "model.d_ff",
            });
        }
        let d_model = self.attention.d_model;
        let attention = self.attention.init(device)?;
        let layer_norm = || layer_norm_of(d_model, self.norm_epsilon, self.bias, device);
        let linear = |d_in, d_out| linear_of(d_in, d_out, self.bias, device);
        let ff_width = if self.gated { 2 * self.d_ff } else { self.d_ff };
        Ok(EncoderBlock {
            attention,
            norm_attention: self.attention_norm.then(layer_norm),
            norm_ff: layer_norm(),
            ff_in: linear(d_model, ff_width),
            ff_out: linear(self.d_ff, d_model),
            dropout: DropoutConfig::new(self.dropout).init(),
            norm: self.norm,
            norm_epsilon: self.norm_epsilon,
            activation: self.activation,
            gated: self.gated,
        })
    }
}

/// Path patching's primitive at a block (Wang et al. 2022; Goldowsky-Dill et al. 2023): another
/// residual stream `resid` at the block's input, read by the query, key or value projections
/// of the heads the weights pick and, with `skip`, by the residual connection around the
/// attention (and so by the feed-forward branch and every later block not through this
/// block's heads). Everything else reads the block's own input. With every weight 1 and
/// `skip`, the block runs as if `resid` were its input.
#[derive(Debug, Clone)]
pub struct InputPatch {
    /// `[batch, seq, d_model]`: the other residual stream, before the block's norm.
    pub resid: Tensor<3>,
    /// `[n_heads]`: how much each head's query reads `resid` (0 to 1).
    pub query: Tensor<1>,
    /// `[n_heads]`: how much each head's key reads `resid`.
    pub key: Tensor<1>,
    /// `[n_heads]`: how much each head's value reads `resid`.
    pub value: Tensor<1>,
    /// Whether the residual connection around the attention carries `resid`.
    pub skip: bool,
}

impl InputPatch {
    /// A patch that nothing reads yet: `resid` (`[batch, seq, d_model]`) for a layer of
    /// `n_heads` heads.
    pub fn new(resid: Tensor<3>, n_heads: usize) -> Self {
        let device = resid.device();
        let zeros = Tensor::zeros([n_heads], &device);
        Self {
            resid,
            query: zeros.clone(),
            key: zeros.clone(),
            value: zeros,
            skip: false,
        }
    }

    /// `channel` of head `head` reads the patch.
    pub fn read_by(mut self, head: usize, channel: QkvChannel) -> Self {
        let weight = match channel {
            QkvChannel::Query => &mut self.query,
            QkvChannel::Key => &mut self.key,
            QkvChannel::Value => &mut self.value,
        };
        let [n_heads] = weight.dims();
        assert!(
            head < n_heads,
            "head {head} out of range: the layer has {n_heads} heads"
        );
        let mut one_hot = vec![0.0f32; n_heads];
        one_hot[head] = 1.0;
        let one_hot = Tensor::<1>::from_floats(one_hot.as_slice(), &weight.device());
        *weight = weight.clone().max_pair(one_hot);
        self
    }

    /// Every channel of every head reads the patch.
    pub fn read_by_all_heads(mut self) -> Self {
        for weight in [&mut self.query, &mut self.key, &mut self.value] {
            *weight = weight.clone().ones_like();
        }
        self
    }

    /// Sets whether the residual connection carries the patch.
    pub fn skip(mut self, skip: bool) -> Self {
        self.skip = skip;
        self
    }
}

/// What changes one block's computation: a head mask, a patch of heads' outputs and a patch
/// of heads' inputs. The default changes nothing.
#[derive(Debug, Clone, Default)]
pub struct LayerInterventions {
    /// `[n_heads]`: 1 keeps a head, 0 ablates it.
    pub head_mask: Option<Tensor<1>>,
    /// Heads' outputs replaced ([`HeadPatch`]).
    pub head_patch: Option<HeadPatch>,
    /// Heads' inputs and the residual connection replaced ([`InputPatch`]).
    pub input_patch: Option<InputPatch>,
}

/// Self-attention then feed-forward, each with a residual connection.
#[derive(Module, Debug)]
pub struct EncoderBlock {
    /// The attention sub-layer.
    pub attention: MultiHeadAttention,
    /// Norm of the attention branch (its input in pre-norm, the residual sum in post-norm);
    /// none where a pre-norm block's attention reads the stream itself (ModernBERT's first).
    pub norm_attention: Option<LayerNorm>,
    /// Norm of the feed-forward branch.
    pub norm_ff: LayerNorm,
    /// `[d_model, d_ff]` (`[d_model, 2 * d_ff]` gated: the activation's input, then the gate).
    pub ff_in: Linear,
    /// `[d_ff, d_model]`.
    pub ff_out: Linear,
    /// Dropout on the branches.
    pub dropout: Dropout,
    /// Where the norms sit.
    #[module(skip)]
    pub norm: NormPlacement,
    /// The norms' epsilon.
    #[module(skip)]
    pub norm_epsilon: f64,
    /// The feed-forward's activation.
    #[module(skip)]
    pub activation: crate::Activation,
    /// Whether the feed-forward is gated (GeGLU).
    #[module(skip)]
    pub gated: bool,
}

impl EncoderBlock {
    /// The block's output, and its [`LayerCache`] when `capture` is set (the cache holds
    /// what the block itself received: `x`, not an [`InputPatch`]'s stream).
    ///
    /// # Shapes
    /// - `x`: `[batch, seq, d_model]` -> `[batch, seq, d_model]`
    /// - `interventions`: see [`LayerInterventions`]
    pub fn forward(
        &self,
        x: Tensor<3>,
        mask: &AttentionMask,
        interventions: LayerInterventions,
        capture: bool,
    ) -> (Tensor<3>, Option<LayerCache>) {
        let with_epsilon = |layer_norm| BlockNorm(layer_norm, self.norm_epsilon);
        let residuals = Residuals {
            placement: self.norm,
            norm_attention: self.norm_attention.as_ref().map(with_epsilon),
            norm_ff: with_epsilon(&self.norm_ff),
        };
        let LayerInterventions {
            head_mask,
            head_patch,
            input_patch,
        } = interventions;
        let (qkv_patch, skip) = match input_patch {
            Some(patch) => {
                let skip = patch.skip.then(|| patch.resid.clone());
                let qkv = QkvPatch {
                    x: residuals.attention_input(patch.resid),
                    query: patch.query,
                    key: patch.key,
                    value: patch.value,
                };
                (Some(qkv), skip)
            }
            None => (None, None),
        };
        let attend = |attn_input: Tensor<3>| {
            let attention = self.attention.forward(
                AttentionInput::new(attn_input.clone())
                    .mask(mask.clone())
                    .head_mask(head_mask)
                    .head_patch(head_patch)
                    .qkv_patch(qkv_patch)
                    .capture(capture),
            );
            let branch = self.dropout.forward(attention.context.clone());
            (branch, capture.then_some((attn_input, attention)))
        };
        let Streams {
            resid_mid,
            resid_post,
            attended,
        } = residuals.forward(x.clone(), skip, attend, |x| self.feed_forward(x));
        let cache = attended.map(|(attn_input, attention)| LayerCache {
            resid_pre: x,
            attn_input,
            pattern: attention.pattern.expect("captured"),
            head_outputs: attention.head_outputs.expect("captured"),
            attn_out: attention.context,
            resid_mid,
            resid_post: resid_post.clone(),
        });
        (resid_post, cache)
    }

    /// The norm after a post-norm block's attention sum (a post-norm block always has it).
    pub fn post_attention_norm(&self) -> &LayerNorm {
        self.norm_attention
            .as_ref()
            .expect("a post-norm block has its attention norm (EncoderConfig::validate)")
    }

    /// The feed-forward branch, `[.., d_model] -> [.., d_model]`: linear, GELU (gated: the
    /// GELU of the first half times the second), dropout, linear, dropout (dropout is off in
    /// an inference model).
    pub fn feed_forward(&self, x: Tensor<3>) -> Tensor<3> {
        let hidden = linear_over_rows(&self.ff_in, x); // [batch, seq, d_ff or 2 d_ff]
        // The exact GELU is fused on the CPU (crate::fused).
        let hidden = activate(hidden, self.activation, self.gated); // [batch, seq, d_ff]
        let hidden = self.dropout.forward(hidden);
        self.dropout.forward(linear_over_rows(&self.ff_out, hidden))
    }
}
