//! The arithmetic of attention that does not depend on how a model holds its weights:
//! splitting a projection into each head's queries, keys and values, rotating them, and
//! the core `softmax(q kᵀ / √d_head) v`. [`MultiHeadAttention`](crate::MultiHeadAttention)
//! (one model, `[batch, ...]`) and the seed stack's
//! [`SeedAttention`](crate::seed_stack::SeedAttention) (S models, their seeds folded into
//! the batch axis, `[seeds * batch, ...]`) both call these, so the two cannot compute
//! attention differently; they differ only in how they multiply by their weights.

use burn::nn::RotaryEncoding;
use burn::prelude::*;
use burn::tensor::activation::softmax;

use crate::fused::{self, attention::MASKED_SCORE};

/// Queries, keys and values, each `[batch, n_heads, seq, d_head]`.
pub(crate) type Qkv = (Tensor<4>, Tensor<4>, Tensor<4>);

/// The queries, keys and values of a fused projection (the split and wide layouts), whose
/// columns are `[q of head 0..n | k of head 0..n | v of head 0..n]`.
///
/// # Shapes
/// - `projected`: `[.., 3 * n_heads * d_head]` holding `batch * seq` rows, sequence-major
///   (`[batch, seq, ..]` or `[seeds, batch * seq, ..]`)
/// - each output: `[batch, n_heads, seq, d_head]`
pub(crate) fn split_fused(
    projected: Tensor<3>,
    batch: usize,
    seq: usize,
    n_heads: usize,
    d_head: usize,
) -> Qkv {
    let qkv = projected
        .reshape([batch, seq, 3 * n_heads, d_head])
        .swap_dims(1, 2); // [batch, 3 * heads, seq, d_head]
    (
        qkv.clone().narrow(1, 0, n_heads),
        qkv.clone().narrow(1, n_heads, n_heads),
        qkv.narrow(1, 2 * n_heads, n_heads),
    )
}

/// The queries, keys and values of per-head projections (the narrow layout), each head's
/// columns `[q | k | v]`.
///
/// # Shapes
/// - `projected`: `[batch, n_heads, seq, 3 * d_head]`
/// - each output: `[batch, n_heads, seq, d_head]`
pub(crate) fn split_headwise(projected: Tensor<4>) -> Qkv {
    let d_head = projected.dims()[3] / 3;
    (
        projected.clone().narrow(3, 0, d_head),
        projected.clone().narrow(3, d_head, d_head),
        projected.narrow(3, 2 * d_head, d_head),
    )
}

/// Queries and keys rotated by `rotary` (rotary positions), values as they are.
pub(crate) fn rotate(rotary: Option<&RotaryEncoding>, (q, k, v): Qkv) -> Qkv {
    match rotary {
        Some(rotary) => (rotary.forward(q), rotary.forward(k), v),
        None => (q, k, v),
    }
}

/// What [`attention_core`] returns.
pub(crate) struct CoreOutput {
    /// `[batch, n_heads, seq_q, seq_k]`: the softmax probabilities before dropout, when
    /// captured.
    pub pattern: Option<Tensor<4>>,
    /// `[batch, seq_q, n_heads, d_head]`: each head's weighted sum of values.
    pub head_outputs: Tensor<4>,
}

/// Scaled dot-product attention of every head: `softmax(q kᵀ / √d_head)` with the hidden
/// keys set to [`MASKED_SCORE`], times the dropout mask `keep` (0 where dropped,
/// `1 / (1 - p)` where kept), times `v`.
///
/// Training and evaluation in `f32` on flex take the fused core ([`crate::fused`]); a
/// capturing pass (inspect) and other backends the composed ops, which give the same
/// numbers within float rounding.
///
/// # Shapes
/// - `q`, `k`, `v`: `[batch, n_heads, seq, d_head]`
/// - `hidden`: `[batch, seq_q, seq_k]`, true where a query may not see a key
/// - `keep`: `[batch, n_heads, seq_q, seq_k]`
pub(crate) fn attention_core(
    (q, k, v): Qkv,
    hidden: Option<Tensor<3, Bool>>,
    keep: Option<Tensor<4>>,
    capture: bool,
) -> CoreOutput {
    let [batch, _, seq_q, d_head] = q.dims();
    let seq_k = k.dims()[2];
    let scale = 1.0 / (d_head as f64).sqrt();
    if !capture && q.dtype() == burn::tensor::DType::F32 && fused::runs_fused(&q.device()) {
        let head_outputs = fused::attention_core(q, k, v, hidden, keep, scale as f32);
        return CoreOutput {
            pattern: None,
            head_outputs,
        };
    }
    let scores = q.matmul(k.swap_dims(2, 3)).mul_scalar(scale); // [batch, heads, seq_q, seq_k]
    let scores = match hidden {
        Some(hidden) => scores.mask_fill(hidden.reshape([batch, 1, seq_q, seq_k]), MASKED_SCORE),
        None => scores,
    };
    let pattern = softmax(scores, 3);
    let kept = match keep {
        Some(keep) => pattern.clone() * keep,
        None => pattern.clone(),
    };
    CoreOutput {
        pattern: capture.then_some(pattern),
        head_outputs: kept.matmul(v).swap_dims(1, 2), // [batch, seq_q, heads, d_head]
    }
}
