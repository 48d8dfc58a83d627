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

use crate::Activation;
use crate::attention::{AttentionMask, HeadwiseLinear, MultiHeadAttention, combined_mask};
use crate::attention_core::{Qkv, attention_core, rotate, split_fused, split_headwise};
use crate::block::{EncoderBlock, NormPlacement};
use crate::encoder::OutputTransform;
use crate::fused;
use crate::residual::{Residuals, StreamNorm, activate};
use crate::seed_stack::dropout::LayerDropout;

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

/// S linear layers `x W_s + b_s` (`x W_s` without biases).
#[derive(Module, Debug)]
pub struct SeedLinear {
    /// `[seeds, d_in, d_out]`.
    pub weight: Param<Tensor<3>>,
    /// `[seeds, d_out]`, where the layers have biases.
    pub bias: Option<Param<Tensor<2>>>,
}

impl SeedLinear {
    /// The stack of `layers`, which all have a bias or none.
    pub fn stack(layers: &[&Linear]) -> Self {
        let weights: Vec<_> = layers.iter().map(|l| &l.weight).collect();
        Self {
            weight: stack_param(&weights),
            bias: stack_optional(layers, |l| l.bias.as_ref()),
        }
    }

    /// Seed `seed`'s layer, with `template`'s parameter ids.
    pub fn unstack(&self, seed: usize, mut template: Linear) -> Linear {
        template.weight = unstack_param(&self.weight, seed, template.weight.id);
        template.bias = unstack_optional(self.bias.as_ref(), seed, template.bias);
        template
    }

    /// # Shapes
    /// - `x`: `[seeds, rows, d_in]` -> `[seeds, rows, d_out]`
    pub fn forward(&self, x: Tensor<3>) -> Tensor<3> {
        let product = x.matmul(self.weight.val());
        match &self.bias {
            Some(bias) => product + bias.val().unsqueeze_dim::<3>(1),
            None => product,
        }
    }

    /// Width of the output.
    pub fn d_out(&self) -> usize {
        self.weight.dims()[2]
    }
}

/// The stack of an optional parameter of every layer (a bias, a norm's shift): present in
/// all or in none, as layers of one configuration are.
fn stack_optional<L, const D: usize, const D1: usize>(
    layers: &[&L],
    param: impl Fn(&L) -> Option<&Param<Tensor<D>>>,
) -> Option<Param<Tensor<D1>>> {
    let params: Option<Vec<_>> = layers.iter().map(|l| param(l)).collect();
    params.map(|params| stack_param(&params))
}

/// Seed `seed`'s slice of an optional stacked parameter, with the template's id.
fn unstack_optional<const D1: usize, const D: usize>(
    stacked: Option<&Param<Tensor<D1>>>,
    seed: usize,
    template: Option<Param<Tensor<D>>>,
) -> Option<Param<Tensor<D>>> {
    template.map(|param| {
        let stacked = stacked.expect("the stack has the parameter its template has");
        unstack_param(stacked, seed, param.id)
    })
}

/// S layer norms, each with its own scale and shift.
#[derive(Module, Debug)]
pub struct SeedNorm {
    /// `[seeds, d]`.
    pub gamma: Param<Tensor<2>>,
    /// `[seeds, d]`, where the norms have a shift.
    pub beta: Option<Param<Tensor<2>>>,
    /// The norms' epsilon.
    #[module(skip)]
    pub epsilon: f64,
}

impl SeedNorm {
    /// The stack of `norms`, which share their epsilon and all have a shift or none.
    pub fn stack(norms: &[&LayerNorm], epsilon: f64) -> Self {
        let gammas: Vec<_> = norms.iter().map(|n| &n.gamma).collect();
        Self {
            gamma: stack_param(&gammas),
            beta: stack_optional(norms, |n| n.beta.as_ref()),
            epsilon,
        }
    }

    /// Seed `seed`'s norm, with `template`'s parameter ids.
    pub fn unstack(&self, seed: usize, mut template: LayerNorm) -> LayerNorm {
        template.gamma = unstack_param(&self.gamma, seed, template.gamma.id);
        template.beta = unstack_optional(self.beta.as_ref(), seed, template.beta);
        template
    }

    /// Normalises each row, then scales and shifts it by its seed's parameters.
    ///
    /// # Shapes
    /// - `x`: `[seeds, rows, d]` -> the same
    pub fn forward(&self, x: Tensor<3>) -> Tensor<3> {
        let scaled = fused::normalize(x, self.epsilon) * self.gamma.val().unsqueeze_dim::<3>(1);
        match &self.beta {
            Some(beta) => scaled + beta.val().unsqueeze_dim(1),
            None => scaled,
        }
    }
}

/// S prediction transforms (dense, activation, norm: a masked LM's head before its output
/// layer), each seed's own.
#[derive(Module, Debug)]
pub struct SeedTransform {
    /// The dense layers, `[seeds, d_model, width]`.
    pub dense: SeedLinear,
    /// The norms after the activation.
    pub norm: SeedNorm,
    /// The activation between them (the model's).
    #[module(skip)]
    pub activation: Activation,
}

impl SeedTransform {
    /// The stack of `transforms`, whose norms share `epsilon`.
    pub fn stack(transforms: &[&OutputTransform], epsilon: f64, activation: Activation) -> Self {
        let dense: Vec<_> = transforms.iter().map(|t| &t.dense).collect();
        let norms: Vec<_> = transforms.iter().map(|t| &t.norm).collect();
        Self {
            dense: SeedLinear::stack(&dense),
            norm: SeedNorm::stack(&norms, epsilon),
            activation,
        }
    }

    /// Seed `seed`'s transform, with `template`'s parameter ids.
    pub fn unstack(&self, seed: usize, mut template: OutputTransform) -> OutputTransform {
        template.dense = self.dense.unstack(seed, template.dense);
        template.norm = self.norm.unstack(seed, template.norm);
        template
    }

    /// # Shapes
    /// - `x`: `[seeds, rows, d_model]` -> `[seeds, rows, width]`
    pub fn forward(&self, x: Tensor<3>) -> Tensor<3> {
        self.norm
            .forward(self.activation.forward(self.dense.forward(x)))
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

impl StreamNorm for &SeedNorm {
    fn normalize(&self, x: Tensor<3>) -> Tensor<3> {
        self.forward(x)
    }
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
    /// Local attention: a query sees only the keys at most this many positions away.
    #[module(skip)]
    pub reach: Option<usize>,
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
            reach: first.reach,
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

    /// Self-attention of every seed's batch: [`MultiHeadAttention::forward`]'s core with
    /// the seeds folded into its batch axis.
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
        let mask = match self.reach {
            Some(reach) => mask
                .clone()
                .within_reach(reach, seeds * batch, seq, &x.device()),
            None => mask.clone(),
        };
        let qkv = rotate(self.rotary.as_ref(), self.project_qkv(x, batch));
        let hidden = combined_mask(&mask, seeds * batch, seq, seq);
        let head_outputs = attention_core(qkv, hidden, keep, false).head_outputs; // [seeds * batch, seq, heads, d_head]
        self.output
            .forward(head_outputs.reshape([seeds, rows, self.n_heads * self.d_head]))
    }

    /// Queries, keys and values, each `[seeds * batch, n_heads, seq, d_head]`.
    fn project_qkv(&self, x: Tensor<3>, batch: usize) -> Qkv {
        let [seeds, rows, d_model] = x.dims();
        let seq = rows / batch;
        let (n_heads, d_head) = (self.n_heads, self.d_head);
        match (&self.qkv, &self.qkv_narrow) {
            (Some(qkv), _) => split_fused(qkv.forward(x), seeds * batch, seq, n_heads, d_head),
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
                split_headwise(qkv)
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
    /// Norms of the attention branch; none where a pre-norm block's attention reads the
    /// stream itself.
    pub norm_attention: Option<SeedNorm>,
    /// Norms of the feed-forward branch.
    pub norm_ff: SeedNorm,
    /// `[seeds, d_model, d_ff]` (`2 * d_ff` gated).
    pub ff_in: SeedLinear,
    /// `[seeds, d_ff, d_model]`.
    pub ff_out: SeedLinear,
    /// Where the norms sit.
    #[module(skip)]
    pub norm: NormPlacement,
    /// The feed-forward's activation.
    #[module(skip)]
    pub activation: Activation,
    /// Whether the feed-forward is gated (GeGLU).
    #[module(skip)]
    pub gated: bool,
}

impl SeedBlock {
    /// The stack of `blocks`, which share one configuration.
    pub fn stack(blocks: &[&EncoderBlock]) -> Self {
        let first = blocks[0];
        let epsilon = first.norm_epsilon;
        let norm_attention: Option<Vec<_>> =
            blocks.iter().map(|b| b.norm_attention.as_ref()).collect();
        let norm_ff: Vec<_> = blocks.iter().map(|b| &b.norm_ff).collect();
        let ff_in: Vec<_> = blocks.iter().map(|b| &b.ff_in).collect();
        let ff_out: Vec<_> = blocks.iter().map(|b| &b.ff_out).collect();
        let attention: Vec<_> = blocks.iter().map(|b| &b.attention).collect();
        Self {
            attention: SeedAttention::stack(&attention),
            norm_attention: norm_attention.map(|norms| SeedNorm::stack(&norms, epsilon)),
            norm_ff: SeedNorm::stack(&norm_ff, epsilon),
            ff_in: SeedLinear::stack(&ff_in),
            ff_out: SeedLinear::stack(&ff_out),
            norm: first.norm,
            activation: first.activation,
            gated: first.gated,
        }
    }

    /// Seed `seed`'s block, with `template`'s parameter ids.
    pub fn unstack(&self, seed: usize, mut template: EncoderBlock) -> EncoderBlock {
        template.attention = self.attention.unstack(seed, template.attention);
        template.norm_attention = template.norm_attention.map(|norm| {
            let stacked = self.norm_attention.as_ref().expect("one configuration");
            stacked.unstack(seed, norm)
        });
        template.norm_ff = self.norm_ff.unstack(seed, template.norm_ff);
        template.ff_in = self.ff_in.unstack(seed, template.ff_in);
        template.ff_out = self.ff_out.unstack(seed, template.ff_out);
        template
    }

    /// The block's output, as [`EncoderBlock::forward`] computes it for each seed (both run
    /// [`Residuals::forward`]).
    ///
    /// # Shapes
    /// - `x`: `[seeds, batch * seq, d_model]` -> the same
    pub fn forward(
        &self,
        x: Tensor<3>,
        batch: usize,
        mask: &AttentionMask,
        dropout: Option<LayerDropout>,
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
        let residuals = Residuals {
            placement: self.norm,
            norm_attention: self.norm_attention.as_ref(),
            norm_ff: &self.norm_ff,
        };
        let attend = |attn_input| {
            let context = self.attention.forward(attn_input, batch, mask, keep);
            (drop(context, attention_out), ())
        };
        let feed_forward = |ff_input| {
            let hidden = activate(self.ff_in.forward(ff_input), self.activation, self.gated);
            drop(self.ff_out.forward(drop(hidden, ff_hidden)), ff_out)
        };
        residuals.forward(x, None, attend, feed_forward).resid_post
    }
}

/// `x` times a dropout mask (0 or `1 / (1 - p)`), or `x` when there is none.
fn drop(x: Tensor<3>, keep: Option<Tensor<3>>) -> Tensor<3> {
    match keep {
        Some(keep) => x * keep,
        None => x,
    }
}
