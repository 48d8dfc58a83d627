//! One encoder block: self-attention and a GELU feed-forward network, each in a residual
//! branch, with layer norm before the branch (pre-norm, Xiong et al. 2020) or after the
//! residual sum (post-norm, Vaswani et al. 2017).

use burn::nn::{Dropout, DropoutConfig, LayerNorm, LayerNormConfig, Linear, LinearConfig};
use burn::prelude::*;
use serde::{Deserialize, Serialize};

use crate::attention::{
    AttentionInput, AttentionMask, HeadPatch, MultiHeadAttention, MultiHeadAttentionConfig,
};
use crate::cache::LayerCache;
use crate::error::ConfigError;
use crate::linear::linear_over_rows;

/// The layer norms' epsilon (Burn's default), named because the fused layer norm needs it
/// and Burn keeps a norm's own private.
pub const LAYER_NORM_EPSILON: f64 = 1e-5;

/// `layer_norm(x)`, fused under autodiff on flex (crate::fused).
pub(crate) fn norm<const D: usize>(layer_norm: &LayerNorm, x: Tensor<D>) -> Tensor<D> {
    crate::fused::layer_norm(x, layer_norm, LAYER_NORM_EPSILON)
}

/// Where the layer norms sit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NormPlacement {
    /// `x + f(norm(x))`: trains stably without warmup tricks.
    #[default]
    Pre,
    /// `norm(x + f(x))`: the original Transformer.
    Post,
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
        Ok(EncoderBlock {
            attention,
            norm_attention: LayerNormConfig::new(d_model)
                .with_epsilon(LAYER_NORM_EPSILON)
                .init(device),
            norm_ff: LayerNormConfig::new(d_model)
                .with_epsilon(LAYER_NORM_EPSILON)
                .init(device),
            ff_in: LinearConfig::new(d_model, self.d_ff).init(device),
            ff_out: LinearConfig::new(self.d_ff, d_model).init(device),
            dropout: DropoutConfig::new(self.dropout).init(),
            norm: self.norm,
        })
    }
}

/// Self-attention then feed-forward, each with a residual connection.
#[derive(Module, Debug)]
pub struct EncoderBlock {
    /// The attention sub-layer.
    pub attention: MultiHeadAttention,
    /// Norm of the attention branch (its input in pre-norm, the residual sum in post-norm).
    pub norm_attention: LayerNorm,
    /// Norm of the feed-forward branch.
    pub norm_ff: LayerNorm,
    /// `[d_model, d_ff]`.
    pub ff_in: Linear,
    /// `[d_ff, d_model]`.
    pub ff_out: Linear,
    /// Dropout on the branches.
    pub dropout: Dropout,
    /// Where the norms sit.
    #[module(skip)]
    pub norm: NormPlacement,
}

impl EncoderBlock {
    /// The block's output, and its [`LayerCache`] when `capture` is set.
    ///
    /// # Shapes
    /// - `x`: `[batch, seq, d_model]` -> `[batch, seq, d_model]`
    /// - `head_mask`: `[n_heads]`
    /// - `head_patch`: see [`HeadPatch`]
    pub fn forward(
        &self,
        x: Tensor<3>,
        mask: &AttentionMask,
        head_mask: Option<Tensor<1>>,
        head_patch: Option<HeadPatch>,
        capture: bool,
    ) -> (Tensor<3>, Option<LayerCache>) {
        let resid_pre = x;
        let attn_input = match self.norm {
            NormPlacement::Pre => norm(&self.norm_attention, resid_pre.clone()),
            NormPlacement::Post => resid_pre.clone(),
        };
        let attention = self.attention.forward(
            AttentionInput::new(attn_input.clone())
                .mask(mask.clone())
                .head_mask(head_mask)
                .head_patch(head_patch)
                .capture(capture),
        );
        let attn_out = capture.then(|| attention.context.clone());
        let resid_mid = resid_pre.clone() + self.dropout.forward(attention.context);
        let resid_mid = match self.norm {
            NormPlacement::Pre => resid_mid,
            NormPlacement::Post => norm(&self.norm_attention, resid_mid),
        };

        let ff_input = match self.norm {
            NormPlacement::Pre => norm(&self.norm_ff, resid_mid.clone()),
            NormPlacement::Post => resid_mid.clone(),
        };
        let ff = self.feed_forward(ff_input);
        let resid_post = resid_mid.clone() + ff;
        let resid_post = match self.norm {
            NormPlacement::Pre => resid_post,
            NormPlacement::Post => norm(&self.norm_ff, resid_post),
        };

        let cache = match (attention.pattern, attention.head_outputs, attn_out) {
            (Some(pattern), Some(head_outputs), Some(attn_out)) => Some(LayerCache {
                resid_pre,
                attn_input,
                pattern,
                head_outputs,
                attn_out,
                resid_mid,
                resid_post: resid_post.clone(),
            }),
            _ => None,
        };
        (resid_post, cache)
    }

    /// The feed-forward branch, `[.., d_model] -> [.., d_model]`: linear, GELU, dropout,
    /// linear, dropout (dropout is off in an inference model).
    pub fn feed_forward(&self, x: Tensor<3>) -> Tensor<3> {
        // GELU, fused on the CPU (crate::fused).
        let hidden = self
            .dropout
            .forward(crate::fused::gelu(linear_over_rows(&self.ff_in, x)));
        self.dropout.forward(linear_over_rows(&self.ff_out, hidden))
    }
}
