//! The activation cache: every intermediate of one forward pass that head analysis needs,
//! by layer, under stable names (after TransformerLens's `ActivationCache`).

use burn::prelude::*;

/// What one encoder block computed.
#[derive(Debug, Clone)]
pub struct LayerCache {
    /// `[batch, seq, d_model]`: the block's input (the residual stream before it).
    pub resid_pre: Tensor<3>,
    /// `[batch, seq, d_model]`: what enters the attention (after the norm in pre-norm).
    pub attn_input: Tensor<3>,
    /// `[batch, n_heads, seq_q, seq_k]`: attention probabilities (softmax, before dropout).
    pub pattern: Tensor<4>,
    /// `[batch, seq, n_heads, d_head]`: each head's output before the output projection
    /// (after the head mask).
    pub head_outputs: Tensor<4>,
    /// `[batch, seq, d_model]`: the attention sub-layer's output (output projection applied).
    pub attn_out: Tensor<3>,
    /// `[batch, seq, d_model]`: the residual stream between attention and feed-forward.
    pub resid_mid: Tensor<3>,
    /// `[batch, seq, d_model]`: the block's output.
    pub resid_post: Tensor<3>,
}

/// Everything [`crate::Encoder::forward_with_cache`] recorded.
#[derive(Debug, Clone)]
pub struct ActivationCache {
    /// `[batch, seq, d_model]`: token embeddings plus absolute positions.
    pub embeddings: Tensor<3>,
    /// One entry per block, in order.
    pub layers: Vec<LayerCache>,
    /// `[batch, seq, d_model]`: after the final norm (where the model has one), what the
    /// output head reads (through the prediction transform, in a model with one).
    pub final_hidden: Tensor<3>,
}
