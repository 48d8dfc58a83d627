//! The fused attention core (`model::fused`) against the composed ops it replaces, inside
//! the attention layer: values and gradients, with and without masks, dropout off and on
//! (the same mask: both paths draw it from the same seeded stream), odd sizes, one head and
//! many, every head layout; and against Burn's own attention with copied weights.
//!
//! On flex, `capture(false)` takes the fused core and `capture(true)` the composed ops.

mod common;

use burn::prelude::*;
use common::*;
use model::fused::runs_fused;
use model::{AttentionInput, AttentionMask, HeadLayout, MultiHeadAttentionConfig};

/// One comparison: a layer shape, masks or not, a dropout probability.
#[derive(Debug, Clone, Copy)]
struct Case {
    batch: usize,
    seq: usize,
    d_model: usize,
    n_heads: usize,
    layout: HeadLayout,
    d_head: Option<usize>,
    masked: bool,
    dropout: f64,
}

/// Padding on the last key of every odd sequence; in sequence 0, query 1 sees no key at
/// all (a fully masked row) and query 0 not key 1.
fn masks(batch: usize, seq: usize, device: &Device) -> AttentionMask {
    let pad: Vec<bool> = (0..batch * seq)
        .map(|at| (at / seq) % 2 == 1 && at % seq == seq - 1)
        .collect();
    let attn: Vec<bool> = (0..batch * seq * seq)
        .map(|at| {
            let (b, i, j) = (at / (seq * seq), (at / seq) % seq, at % seq);
            b == 0 && (i == 1 || (i == 0 && j == 1 % seq))
        })
        .collect();
    AttentionMask {
        pad: Some(Tensor::from_data(
            TensorData::new(pad, [batch, seq]),
            device,
        )),
        attn: Some(Tensor::from_data(
            TensorData::new(attn, [batch, seq, seq]),
            device,
        )),
    }
}

/// The context, and the gradients of `sum(w * context)` with respect to the input and the
/// output projection's weight, from one path.
fn run(case: Case, fused: bool) -> (Tensor<3>, Tensor<3>, Tensor<2>) {
    let device = Device::flex().autodiff();
    device.seed(11);
    let attention = MultiHeadAttentionConfig::new(case.d_model, case.n_heads)
        .with_layout(case.layout)
        .with_d_head(case.d_head)
        .with_dropout(case.dropout)
        .init(&device)
        .unwrap();
    let x = random([case.batch, case.seq, case.d_model], &device).require_grad();
    let w = random([case.batch, case.seq, case.d_model], &device);
    let mut input = AttentionInput::new(x.clone()).capture(!fused);
    if case.masked {
        input = input.mask(masks(case.batch, case.seq, &device));
    }
    // The same seed before each forward pass: both paths draw the same dropout mask.
    device.seed(12);
    let context = attention.forward(input).context;
    let grads = (context.clone() * w).sum().backward();
    let x_grad = x.grad(&grads).expect("the input has a gradient");
    let w_grad = attention
        .output
        .weight
        .grad(&grads)
        .expect("the output projection has a gradient");
    (context.detach(), x_grad, w_grad)
}

fn assert_paths_agree(case: Case) {
    // Burn's random stream is one per process: tests running at once would draw from it in
    // turn, and the two paths of a comparison would start from different weights.
    let _stream = model::init::take_rng_turn();
    let (fused_context, fused_x_grad, fused_w_grad) = run(case, true);
    let (context, x_grad, w_grad) = run(case, false);
    let diffs = [
        ("context", max_abs_diff(fused_context, context)),
        ("input gradient", max_abs_diff(fused_x_grad, x_grad)),
        ("output-weight gradient", max_abs_diff(fused_w_grad, w_grad)),
    ];
    for (what, diff) in diffs {
        assert!(diff < 2e-5, "{case:?}: {what} differs by {diff}");
    }
}

const BASE: Case = Case {
    batch: 3,
    seq: 7,
    d_model: 12,
    n_heads: 3,
    layout: HeadLayout::Split,
    d_head: None,
    masked: false,
    dropout: 0.0,
};

#[test]
fn flex_takes_the_fused_core() {
    // Otherwise every comparison below compares the composed ops with themselves.
    assert!(runs_fused(&Device::flex()) && runs_fused(&Device::flex().autodiff()));
}

#[test]
fn fused_and_composed_agree_with_masks_and_without() {
    for masked in [false, true] {
        assert_paths_agree(Case { masked, ..BASE });
    }
}

#[test]
fn fused_and_composed_agree_with_dropout() {
    for masked in [false, true] {
        assert_paths_agree(Case {
            masked,
            dropout: 0.3,
            ..BASE
        });
    }
}

#[test]
fn fused_and_composed_agree_on_odd_sizes_and_every_layout() {
    let cases = [
        Case {
            batch: 1,
            seq: 1,
            d_model: 4,
            n_heads: 1,
            ..BASE
        },
        Case {
            n_heads: 1,
            d_model: 5,
            masked: true,
            ..BASE
        },
        Case {
            batch: 2,
            seq: 33,
            d_model: 16,
            n_heads: 8,
            masked: true,
            ..BASE
        },
        Case {
            layout: HeadLayout::Wide,
            masked: true,
            ..BASE
        },
        Case {
            layout: HeadLayout::Narrow,
            masked: true,
            dropout: 0.2,
            ..BASE
        },
        Case {
            d_head: Some(5),
            masked: true,
            ..BASE
        },
    ];
    for case in cases {
        assert_paths_agree(case);
    }
}

/// Without autodiff (evaluation), the fused core against the composed ops, head outputs
/// included through the context.
#[test]
fn fused_inference_matches_the_composed_ops() {
    // Burn's random stream is one per process: tests running at once would draw from it in
    // turn, and the two paths of a comparison would start from different weights.
    let _stream = model::init::take_rng_turn();
    let device = device();
    let attention = MultiHeadAttentionConfig::new(8, 2).init(&device).unwrap();
    let x = random([2, 5, 8], &device);
    let mask = masks(2, 5, &device);
    let fused = attention.forward(AttentionInput::new(x.clone()).mask(mask.clone()));
    let composed = attention.forward(AttentionInput::new(x).mask(mask).capture(true));
    assert!(max_abs_diff(fused.context, composed.context) < 1e-5);
}
