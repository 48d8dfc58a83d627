//! The layers of a [`SeedStack`](super::SeedStack): each is S copies of a layer of
//! [`Encoder`](crate::Encoder), one per seed, with every parameter stacked on a leading seed
//! axis, and a forward pass that runs all S copies as one batched computation. Each layer
//! can be built from S single layers ([`SeedLinear::stack`]) and give back the layer of one
//! seed with the parameter ids of a template ([`SeedLinear::unstack`]).
//!
//! Activations inside the stack are `[seeds, rows, width]`: a seed's rows are its batch's
//! positions (`batch * seq`), so a linear layer is one batched matrix product over seeds.

use burn::module::{Param, ParamId};
use burn::nn::{LayerNorm, Linear, RotaryEncoding};
use burn::prelude::*;
use burn::tensor::activation::softmax;

use crate::attention::{AttentionMask, HeadwiseLinear, MultiHeadAttention, combined_mask};
use crate::block::{EncoderBlock, LAYER_NORM_EPSILON, NormPlacement};
use crate::fused;

/// S parameters of one shape stacked on a new leading axis: a new leaf, on the parameters'
/// device, that the optimizer trains.
pub(crate) fn stack_param<const D: usize, const D1: usize>(
    params: &[&Param<Tensor<D>>],
) -> Param<Tensor<D1>> {
    let autodiff = params[0].val().device().is_autodiff();
    // Off the autodiff graph first: a stack of tracked leaves would not be a leaf.
    let values = params.iter().map(|p| p.val().inner()).collect();
    let stacked = Tensor::stack::<D1>(values, 0);
    Param::from_tensor(if autodiff {
        Tensor::from_inner(stacked)
    } else {
        stacked
    })
}

/// Seed `seed`'s slice of a stacked parameter, as a parameter with id `id`.
pub(crate) fn unstack_param<const D1: usize, const D: usize>(
    stacked: &Param<Tensor<D1>>,
    seed: usize,
    id: ParamId,
) -> Param<Tensor<D>> {
    let stacked = stacked.val();
    let autodiff = stacked.device().is_autodiff();
    let value = stacked.inner().narrow(0, seed, 1).squeeze_dim::<D>(0);
    Param::initialized(
        id,
        if autodiff {
            Tensor::from_inner(value).require_grad()
        } else {
            value
        },
    )
}

/// S linear layers `x W_s + b_s`.
#[derive(Module, Debug)]
pub struct SeedLinear {
    /// `[seeds, d_in, d_out]`.
    pub weight: Param<Tensor<3>>,
    /// `[seeds, d_out]`.
    pub bias: Param<Tensor<2>>,
}

impl SeedLinear {
    /// The stack of `layers` (each with a bias, as every headlab linear layer has).
    pub fn stack(layers: &[&Linear]) -> Self {
        let weights: Vec<_> = layers.iter().map(|l| &l.weight).collect();
        let biases: Vec<_> = layers
            .iter()
            .map(|l| {
                l.bias
                    .as_ref()
                    .expect("headlab's linear layers have a bias")
            })
            .collect();
        Self {
            weight: stack_param(&weights),
            bias: stack_param(&biases),
        }
    }

    /// Seed `seed`'s layer, with `template`'s parameter ids.
    pub fn unstack(&self, seed: usize, mut template: Linear) -> Linear {
        template.weight = unstack_param(&self.weight, seed, template.weight.id);
        template.bias = template
            .bias
            .map(|bias| unstack_param(&self.bias, seed, bias.id));
        template
    }

    /// # Shapes
    /// - `x`: `[seeds, rows, d_in]` -> `[seeds, rows, d_out]`
    pub fn forward(&self, x: Tensor<3>) -> Tensor<3> {
        x.matmul(self.weight.val()) + self.bias.val().unsqueeze_dim::<3>(1)
    }
}

/// S layer norms, each with its own scale and shift.
#[derive(Module, Debug)]
pub struct SeedNorm {
    /// `[seeds, d]`.
    pub gamma: Param<Tensor<2>>,
    /// `[seeds, d]`.
    pub beta: Param<Tensor<2>>,
}

impl SeedNorm {
    /// The stack of `norms` (each with a shift, as every headlab norm has).
    pub fn stack(norms: &[&LayerNorm]) -> Self {
        let gammas: Vec<_> = norms.iter().map(|n| &n.gamma).collect();
        let betas: Vec<_> = norms
            .iter()
            .map(|n| n.beta.as_ref().expect("headlab's norms have a shift"))
            .collect();
        Self {
            gamma: stack_param(&gammas),
            beta: stack_param(&betas),
        }
    }

    /// Seed `seed`'s norm, with `template`'s parameter ids.
    pub fn unstack(&self, seed: usize, mut template: LayerNorm) -> LayerNorm {
        template.gamma = unstack_param(&self.gamma, seed, template.gamma.id);
        template.beta = template
            .beta
            .map(|beta| unstack_param(&self.beta, seed, beta.id));
        template
    }

    /// Normalises each row, then scales and shifts it by its seed's parameters.
    ///
    /// # Shapes
    /// - `x`: `[seeds, rows, d]` -> the same
    pub fn forward(&self, x: Tensor<3>) -> Tensor<3> {
        let normalised = fused::normalize(x, LAYER_NORM_EPSILON);
        normalised * self.gamma.val().unsqueeze_dim::<3>(1) + self.beta.val().unsqueeze_dim(1)
    }
}

/// S narrow-layout projections: head `h` of seed `s` maps its input chunk to its q | k | v.
#[derive(Module, Debug)]
pub struct SeedHeadwiseLinear {
    /// `[seeds, n_heads, d_chunk, 3 * d_head]`.
    pub weight: Param<Tensor<4>>,
    /// `[seeds, n_heads, 3 * d_head]`.
    pub bias: Param<Tensor<3>>,
}

/// Dropout masks of one block for every seed, drawn as the single runs draw them
/// ([`super::LayerDropout`]); each holds 0 where dropped and `1 / (1 - p)` where kept.
#[derive(Debug, Clone)]
pub struct BlockDropout {
    /// `[seeds * batch, heads, seq, seq]`: on the attention probabilities.
    pub attention: Tensor<4>,
    /// `[seeds, batch * seq, d_model]`: on the attention branch's output.
    pub attention_out: Tensor<3>,
    /// `[seeds, batch * seq, d_ff]`: on the feed-forward network's hidden layer.
    pub ff_hidden: Tensor<3>,
    /// `[seeds, batch * seq, d_model]`: on the feed-forward branch's output.
    pub ff_out: Tensor<3>,
}

/// S multi-head attention layers of one layout.
#[derive(Module, Debug)]
pub struct SeedAttention {
    /// Split and wide layouts: the fused q | k | v projection.
    pub qkv: Option<SeedLinear>,
    /// Narrow layout: per-head projections.
    pub qkv_narrow: Option<SeedHeadwiseLinear>,
    /// The output projection.
    pub output: SeedLinear,
    /// Rotary positions, shared by every seed (a fixed table).
    pub rotary: Option<RotaryEncoding>,
    /// Number of heads.
    pub n_heads: usize,
    /// Size of each head.
    pub d_head: usize,
}

impl SeedAttention {
    /// The stack of `layers`, which share one configuration.
    pub fn stack(layers: &[&MultiHeadAttention]) -> Self {
        let first = layers[0];
        let qkv_narrow = first.qkv_narrow.as_ref().map(|_| {
            let narrow: Vec<&HeadwiseLinear> = layers
                .iter()
                .map(|l| l.qkv_narrow.as_ref().expect("one layout"))
                .collect();
            SeedHeadwiseLinear {
                weight: stack_param(&narrow.iter().map(|n| &n.weight).collect::<Vec<_>>()),
                bias: stack_param(&narrow.iter().map(|n| &n.bias).collect::<Vec<_>>()),
            }
        });
        let qkv = first.qkv.as_ref().map(|_| {
            let qkv: Vec<&Linear> = layers
                .iter()
                .map(|l| l.qkv.as_ref().expect("one layout"))
                .collect();
            SeedLinear::stack(&qkv)
        });
        let outputs: Vec<&Linear> = layers.iter().map(|l| &l.output).collect();
        Self {
            qkv,
            qkv_narrow,
            output: SeedLinear::stack(&outputs),
            rotary: first.rotary.clone(),
            n_heads: first.n_heads,
            d_head: first.d_head,
        }
    }

    /// Seed `seed`'s layer, with `template`'s parameter ids.
    pub fn unstack(&self, seed: usize, mut template: MultiHeadAttention) -> MultiHeadAttention {
        template.qkv = template
            .qkv
            .map(|qkv| self.qkv.as_ref().expect("one layout").unstack(seed, qkv));
        template.qkv_narrow = template.qkv_narrow.map(|narrow| {
            let stacked = self.qkv_narrow.as_ref().expect("one layout");
            HeadwiseLinear {
                weight: unstack_param(&stacked.weight, seed, narrow.weight.id),
                bias: unstack_param(&stacked.bias, seed, narrow.bias.id),
            }
        });
        template.output = self.output.unstack(seed, template.output);
        template
    }

    /// Self-attention of every seed's batch.
    ///
    /// # Shapes
    /// - `x`: `[seeds, batch * seq, d_model]` -> the same
    /// - `mask.pad`: `[seeds * batch, seq]`
    /// - `keep`: `[seeds * batch, heads, seq, seq]`
    pub fn forward(
        &self,
        x: Tensor<3>,
        batch: usize,
        mask: &AttentionMask,
        keep: Option<Tensor<4>>,
    ) -> Tensor<3> {
        let [seeds, rows, _] = x.dims();
        let seq = rows / batch;
        let (n_heads, d_head) = (self.n_heads, self.d_head);
        let (q, k, v) = self.project_qkv(x, batch); // each [seeds * batch, heads, seq, d_head]
        let (q, k) = match &self.rotary {
            Some(rotary) => (rotary.forward(q), rotary.forward(k)),
            None => (q, k),
        };
        let scale = 1.0 / (d_head as f64).sqrt();
        let mask = combined_mask(mask, seeds * batch, seq, seq);
        let head_outputs =
            if q.dtype() == burn::tensor::DType::F32 && fused::runs_fused(&q.device()) {
                fused::attention_core(q, k, v, mask, keep, scale as f32) // [seeds * batch, seq, heads, d_head]
            } else {
                let scores = q.matmul(k.swap_dims(2, 3)).mul_scalar(scale); // [seeds * batch, heads, seq, seq]
                let scores = match mask {
                    Some(hidden) => scores.mask_fill(
                        hidden.reshape([seeds * batch, 1, seq, seq]),
                        fused::attention::MASKED_SCORE,
                    ),
                    None => scores,
                };
                let pattern = softmax(scores, 3);
                let pattern = match keep {
                    Some(keep) => pattern * keep,
                    None => pattern,
                };
                pattern.matmul(v).swap_dims(1, 2) // [seeds * batch, seq, heads, d_head]
            };
        let concatenated = head_outputs.reshape([seeds, rows, n_heads * d_head]);
        self.output.forward(concatenated)
    }

    /// Queries, keys and values, each `[seeds * batch, n_heads, seq, d_head]`.
    fn project_qkv(&self, x: Tensor<3>, batch: usize) -> (Tensor<4>, Tensor<4>, Tensor<4>) {
        let [seeds, rows, d_model] = x.dims();
        let seq = rows / batch;
        let (n_heads, d_head) = (self.n_heads, self.d_head);
        match (&self.qkv, &self.qkv_narrow) {
            (Some(qkv), _) => {
                // [seeds, rows, 3 * heads * d_head] -> [seeds * batch, 3 * heads, seq, d_head]
                let qkv = qkv
                    .forward(x)
                    .reshape([seeds * batch, seq, 3 * n_heads, d_head])
                    .swap_dims(1, 2);
                (
                    qkv.clone().narrow(1, 0, n_heads),
                    qkv.clone().narrow(1, n_heads, n_heads),
                    qkv.narrow(1, 2 * n_heads, n_heads),
                )
            }
            (None, Some(narrow)) => {
                let d_chunk = d_model / n_heads;
                // [seeds, rows, d_model] -> [seeds, heads, rows, d_chunk]
                let chunks = x.reshape([seeds, rows, n_heads, d_chunk]).swap_dims(1, 2);
                let qkv =
                    chunks.matmul(narrow.weight.val()) + narrow.bias.val().unsqueeze_dim::<4>(2); // [seeds, heads, rows, 3 * d_head]
                let qkv = qkv
                    .reshape([seeds, n_heads, batch, seq, 3 * d_head])
                    .swap_dims(1, 2)
                    .reshape([seeds * batch, n_heads, seq, 3 * d_head]);
                (
                    qkv.clone().narrow(3, 0, d_head),
                    qkv.clone().narrow(3, d_head, d_head),
                    qkv.narrow(3, 2 * d_head, d_head),
                )
            }
            (None, None) => unreachable!("attention built without input projections"),
        }
    }
}

/// S encoder blocks of one configuration.
#[derive(Module, Debug)]
pub struct SeedBlock {
    /// The attention sub-layers.
    pub attention: SeedAttention,
    /// Norms of the attention branch.
    pub norm_attention: SeedNorm,
    /// Norms of the feed-forward branch.
    pub norm_ff: SeedNorm,
    /// `[seeds, d_model, d_ff]`.
    pub ff_in: SeedLinear,
    /// `[seeds, d_ff, d_model]`.
    pub ff_out: SeedLinear,
    /// Where the norms sit.
    #[module(skip)]
    pub norm: NormPlacement,
}

impl SeedBlock {
    /// The stack of `blocks`, which share one configuration.
    pub fn stack(blocks: &[&EncoderBlock]) -> Self {
        let attention: Vec<_> = blocks.iter().map(|b| &b.attention).collect();
        // The stack refuses a block without its attention norm (`unsupported_option`).
        let norm_attention: Vec<_> = blocks
            .iter()
            .map(|b| {
                b.norm_attention
                    .as_ref()
                    .expect("a stacked block has its attention norm")
            })
            .collect();
        let norm_ff: Vec<_> = blocks.iter().map(|b| &b.norm_ff).collect();
        let ff_in: Vec<_> = blocks.iter().map(|b| &b.ff_in).collect();
        let ff_out: Vec<_> = blocks.iter().map(|b| &b.ff_out).collect();
        Self {
            attention: SeedAttention::stack(&attention),
            norm_attention: SeedNorm::stack(&norm_attention),
            norm_ff: SeedNorm::stack(&norm_ff),
            ff_in: SeedLinear::stack(&ff_in),
            ff_out: SeedLinear::stack(&ff_out),
            norm: blocks[0].norm,
        }
    }

    /// Seed `seed`'s block, with `template`'s parameter ids.
    pub fn unstack(&self, seed: usize, mut template: EncoderBlock) -> EncoderBlock {
        template.attention = self.attention.unstack(seed, template.attention);
        template.norm_attention = template
            .norm_attention
            .map(|norm| self.norm_attention.unstack(seed, norm));
        template.norm_ff = self.norm_ff.unstack(seed, template.norm_ff);
        template.ff_in = self.ff_in.unstack(seed, template.ff_in);
        template.ff_out = self.ff_out.unstack(seed, template.ff_out);
        template
    }

    /// The block's output, as [`EncoderBlock::forward`] computes it for each seed.
    ///
    /// # Shapes
    /// - `x`: `[seeds, batch * seq, d_model]` -> the same
    pub fn forward(
        &self,
        x: Tensor<3>,
        batch: usize,
        mask: &AttentionMask,
        dropout: Option<BlockDropout>,
    ) -> Tensor<3> {
        let (keep, attention_out, ff_hidden, ff_out) = match dropout {
            Some(d) => (
                Some(d.attention),
                Some(d.attention_out),
                Some(d.ff_hidden),
                Some(d.ff_out),
            ),
            None => (None, None, None, None),
        };
        let attn_input = match self.norm {
            NormPlacement::Pre => self.norm_attention.forward(x.clone()),
            NormPlacement::Post => x.clone(),
        };
        let context = self.attention.forward(attn_input, batch, mask, keep);
        let resid_mid = x + drop(context, attention_out);
        let resid_mid = match self.norm {
            NormPlacement::Pre => resid_mid,
            NormPlacement::Post => self.norm_attention.forward(resid_mid),
        };
        let ff_input = match self.norm {
            NormPlacement::Pre => self.norm_ff.forward(resid_mid.clone()),
            NormPlacement::Post => resid_mid.clone(),
        };
        let hidden = drop(fused::gelu(self.ff_in.forward(ff_input)), ff_hidden);
        let resid_post = resid_mid + drop(self.ff_out.forward(hidden), ff_out);
        match self.norm {
            NormPlacement::Pre => resid_post,
            NormPlacement::Post => self.norm_ff.forward(resid_post),
        }
    }
}

/// `x` times a dropout mask (0 or `1 / (1 - p)`), or `x` when there is none.
fn drop(x: Tensor<3>, keep: Option<Tensor<3>>) -> Tensor<3> {
    match keep {
        Some(keep) => x * keep,
        None => x,
    }
}
