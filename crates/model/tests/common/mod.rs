//! Helpers shared by the model's integration tests: a device, tensor <-> Vec conversion,
//! and a naive attention reference written with plain loops (no Burn ops), one head at a time.
#![allow(dead_code, missing_docs)]

use burn::prelude::*;
use model::{HeadWeights, MultiHeadAttention, QkvChannel};

pub fn device() -> Device {
    let device = Device::flex();
    device.seed(7);
    device
}

pub fn to_vec<const D: usize>(tensor: Tensor<D>) -> Vec<f32> {
    tensor.into_data().try_into_vec_as::<f32>().unwrap()
}

pub fn max_abs_diff<const D: usize>(a: Tensor<D>, b: Tensor<D>) -> f32 {
    assert_eq!(a.dims(), b.dims(), "shapes differ");
    to_vec(a)
        .iter()
        .zip(to_vec(b))
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

pub fn random<const D: usize>(shape: [usize; D], device: &Device) -> Tensor<D> {
    Tensor::random(shape, burn::tensor::Distribution::Normal(0.0, 1.0), device)
}

/// A row-major matrix read out of a 2-D tensor.
pub struct Matrix {
    pub rows: usize,
    pub cols: usize,
    pub data: Vec<f32>,
}

impl Matrix {
    pub fn of(tensor: Tensor<2>) -> Self {
        let [rows, cols] = tensor.dims();
        Self {
            rows,
            cols,
            data: to_vec(tensor),
        }
    }
    pub fn at(&self, r: usize, c: usize) -> f32 {
        self.data[r * self.cols + c]
    }
}

/// `x @ w + b` for one row vector.
fn affine(x: &[f32], w: &Matrix, b: &[f32]) -> Vec<f32> {
    (0..w.cols)
        .map(|c| b[c] + (0..w.rows).map(|r| x[r] * w.at(r, c)).sum::<f32>())
        .collect()
}

pub struct NaiveOutput {
    /// [batch, seq, d_model], flattened.
    pub context: Vec<f32>,
    /// [batch, heads, seq, seq], flattened.
    pub pattern: Vec<f32>,
}

/// Attention computed head by head from `head_weights(h)`, with scalar loops.
/// `masked(b, i, j)` says whether query i of batch item b may not see key j.
pub fn naive_attention(
    attention: &MultiHeadAttention,
    x: Tensor<3>,
    masked: impl Fn(usize, usize, usize) -> bool,
    head_mask: Option<&[f32]>,
) -> NaiveOutput {
    let own = x.clone();
    naive_attention_reading(attention, x, masked, head_mask, own, |_, _| false)
}

/// [`naive_attention`] where channel `c` of head `h` reads `other` (`[batch, seq, d_model]`)
/// instead of `x` wherever `reads_other(h, c)`.
pub fn naive_attention_reading(
    attention: &MultiHeadAttention,
    x: Tensor<3>,
    masked: impl Fn(usize, usize, usize) -> bool,
    head_mask: Option<&[f32]>,
    other: Tensor<3>,
    reads_other: impl Fn(usize, QkvChannel) -> bool,
) -> NaiveOutput {
    let [batch, seq, d_model] = x.dims();
    let x = to_vec(x);
    let other = to_vec(other);
    let n_heads = attention.n_heads;
    let heads: Vec<HeadWeights> = (0..n_heads).map(|h| attention.head_weights(h)).collect();
    let output_bias = to_vec(attention.output_bias());
    let mut context = vec![0.0f32; batch * seq * d_model];
    let mut pattern = vec![0.0f32; batch * n_heads * seq * seq];
    for b in 0..batch {
        let row = |i: usize| &x[(b * seq + i) * d_model..(b * seq + i + 1) * d_model];
        let other_row = |i: usize| &other[(b * seq + i) * d_model..(b * seq + i + 1) * d_model];
        for i in 0..seq {
            context[(b * seq + i) * d_model..(b * seq + i + 1) * d_model]
                .copy_from_slice(&output_bias);
        }
        for (h, head) in heads.iter().enumerate() {
            let (wq, wk, wv, wo) = (
                Matrix::of(head.q.clone()),
                Matrix::of(head.k.clone()),
                Matrix::of(head.v.clone()),
                Matrix::of(head.o.clone()),
            );
            let (bq, bk, bv) = (
                to_vec(head.q_bias.clone()),
                to_vec(head.k_bias.clone()),
                to_vec(head.v_bias.clone()),
            );
            let d_head = wq.cols;
            let input = |channel: QkvChannel, i: usize| {
                if reads_other(h, channel) {
                    other_row(i)
                } else {
                    row(i)
                }
            };
            let q: Vec<Vec<f32>> = (0..seq)
                .map(|i| affine(input(QkvChannel::Query, i), &wq, &bq))
                .collect();
            let k: Vec<Vec<f32>> = (0..seq)
                .map(|i| affine(input(QkvChannel::Key, i), &wk, &bk))
                .collect();
            let v: Vec<Vec<f32>> = (0..seq)
                .map(|i| affine(input(QkvChannel::Value, i), &wv, &bv))
                .collect();
            let keep = head_mask.map_or(1.0, |m| m[h]);
            for i in 0..seq {
                let scores: Vec<f32> = (0..seq)
                    .map(|j| {
                        if masked(b, i, j) {
                            f32::NEG_INFINITY
                        } else {
                            q[i].iter().zip(&k[j]).map(|(a, c)| a * c).sum::<f32>()
                                / (d_head as f32).sqrt()
                        }
                    })
                    .collect();
                let max = scores.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
                let exps: Vec<f32> = scores.iter().map(|s| (s - max).exp()).collect();
                let total: f32 = exps.iter().sum();
                let probs: Vec<f32> = exps.iter().map(|e| e / total).collect();
                let out: Vec<f32> = (0..d_head)
                    .map(|d| keep * (0..seq).map(|j| probs[j] * v[j][d]).sum::<f32>())
                    .collect();
                for (j, p) in probs.iter().enumerate() {
                    pattern[((b * n_heads + h) * seq + i) * seq + j] = *p;
                }
                for c in 0..d_model {
                    context[(b * seq + i) * d_model + c] +=
                        (0..d_head).map(|d| out[d] * wo.at(d, c)).sum::<f32>();
                }
            }
        }
    }
    NaiveOutput { context, pattern }
}

pub fn max_abs_diff_vec(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "lengths differ");
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}
