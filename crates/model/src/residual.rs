//! The residual sums and norms of one encoder block, and its feed-forward's nonlinearity:
//! the block's arithmetic apart from how it multiplies by its weights.
//! [`EncoderBlock`](crate::block::EncoderBlock) (one model) and the seed stack's
//! [`SeedBlock`](crate::seed_stack::SeedBlock) (S models) both run a block through
//! [`Residuals::forward`], so a change to where the norms sit or what the branches add is
//! made once for both.

use burn::prelude::*;
use serde::{Deserialize, Serialize};

use crate::Activation;

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

/// One of a block's norms, however the block holds it.
pub(crate) trait StreamNorm {
    /// The norm of every row of `x`.
    fn normalize(&self, x: Tensor<3>) -> Tensor<3>;
}

/// Where a block's norms sit, and the norms themselves.
pub(crate) struct Residuals<N> {
    /// Pre-norm (`x + f(norm(x))`) or post-norm (`norm(x + f(x))`).
    pub placement: NormPlacement,
    /// The attention branch's norm (of its input in pre-norm, of the sum in post-norm);
    /// none where a pre-norm block's attention reads the stream itself (ModernBERT's first
    /// layer). A post-norm block always has it (`EncoderConfig::validate`).
    pub norm_attention: Option<N>,
    /// The feed-forward branch's norm.
    pub norm_ff: N,
}

/// The residual stream after each branch of a block.
pub(crate) struct Streams<A> {
    /// After the attention branch (and, post-norm, its norm).
    pub resid_mid: Tensor<3>,
    /// After the feed-forward branch: the block's output.
    pub resid_post: Tensor<3>,
    /// What the attention branch returned beside its output.
    pub attended: A,
}

impl<N: StreamNorm> Residuals<N> {
    /// What the attention reads from a residual stream at the block's input: its norm in
    /// pre-norm (where the block has one), the stream itself in post-norm.
    pub fn attention_input(&self, resid: Tensor<3>) -> Tensor<3> {
        match (self.placement, &self.norm_attention) {
            (NormPlacement::Pre, Some(norm)) => norm.normalize(resid),
            (NormPlacement::Pre, None) | (NormPlacement::Post, _) => resid,
        }
    }

    /// The block: `attend` maps the attention's input to the branch's output (dropout
    /// applied) and whatever else it returns; `feed_forward` maps the feed-forward's input
    /// to its branch's output. The attention branch is added to `skip` where given (path
    /// patching's stream around the attention), else to `resid_pre`.
    ///
    /// # Shapes
    /// - every stream: the shape of `resid_pre` (`[batch, seq, d_model]`, or
    ///   `[seeds, batch * seq, d_model]` in the seed stack)
    pub fn forward<A>(
        &self,
        resid_pre: Tensor<3>,
        skip: Option<Tensor<3>>,
        attend: impl FnOnce(Tensor<3>) -> (Tensor<3>, A),
        feed_forward: impl FnOnce(Tensor<3>) -> Tensor<3>,
    ) -> Streams<A> {
        let (branch, attended) = attend(self.attention_input(resid_pre.clone()));
        let resid_mid = skip.unwrap_or(resid_pre) + branch;
        let (resid_mid, ff_input) = match self.placement {
            NormPlacement::Pre => (resid_mid.clone(), self.norm_ff.normalize(resid_mid)),
            NormPlacement::Post => {
                let norm = self
                    .norm_attention
                    .as_ref()
                    .expect("a post-norm block has its attention norm (EncoderConfig::validate)");
                let resid_mid = norm.normalize(resid_mid);
                (resid_mid.clone(), resid_mid)
            }
        };
        let resid_post = resid_mid.clone() + feed_forward(ff_input);
        let resid_post = match self.placement {
            NormPlacement::Pre => resid_post,
            NormPlacement::Post => self.norm_ff.normalize(resid_post),
        };
        Streams {
            resid_mid,
            resid_post,
            attended,
        }
    }
}

/// The feed-forward's nonlinearity on its hidden layer: the activation, or, gated, the
/// activation of the first half times the second (GeGLU).
///
/// # Shapes
/// - `hidden`: `[.., d_ff]`, or `[.., 2 * d_ff]` gated -> `[.., d_ff]`
pub(crate) fn activate(hidden: Tensor<3>, activation: Activation, gated: bool) -> Tensor<3> {
    if !gated {
        return activation.forward(hidden);
    }
    let d_ff = hidden.dims()[2] / 2;
    let gate = hidden.clone().narrow(2, d_ff, d_ff);
    activation.forward(hidden.narrow(2, 0, d_ff)) * gate
}
