//! The attention layer against independent references: Burn's own `MultiHeadAttention`
//! with copied weights, and a naive loop over heads; masks, rotary positions, head masks.

mod common;

use burn::module::Param;
use burn::nn::Linear;
use burn::nn::attention::{MhaInput, MultiHeadAttentionConfig as BurnMhaConfig};
use burn::prelude::*;
use common::*;
use model::{
    AttentionInput, AttentionMask, HeadLayout, HeadPatch, MultiHeadAttentionConfig, QkvChannel,
    QkvPatch,
};

const BATCH: usize = 2;
const SEQ: usize = 5;
const D_MODEL: usize = 8;

/// Padding on the last key of item 1; item 0 may not look at key 0 from query 2.
fn masks(device: &Device) -> (AttentionMask, impl Fn(usize, usize, usize) -> bool) {
    let masked =
        |b: usize, i: usize, j: usize| (b == 1 && j == SEQ - 1) || (b == 0 && i == 2 && j == 0);
    let mut pad = vec![false; BATCH * SEQ];
    let mut attn = vec![false; BATCH * SEQ * SEQ];
    for b in 0..BATCH {
        for i in 0..SEQ {
            for j in 0..SEQ {
                attn[(b * SEQ + i) * SEQ + j] = b == 0 && i == 2 && j == 0;
            }
        }
        pad[b * SEQ + SEQ - 1] = b == 1;
    }
    let mask = AttentionMask {
        pad: Some(Tensor::<2, Bool>::from_data(
            TensorData::new(pad, [BATCH, SEQ]),
            device,
        )),
        attn: Some(Tensor::<3, Bool>::from_data(
            TensorData::new(attn, [BATCH, SEQ, SEQ]),
            device,
        )),
    };
    (mask, masked)
}

#[test]
fn split_layout_equals_burns_attention_with_the_same_weights() {
    let device = device();
    let n_heads = 2;
    let burn_mha = BurnMhaConfig::new(D_MODEL, n_heads)
        .with_dropout(0.0)
        .init(&device);
    let mut ours = MultiHeadAttentionConfig::new(D_MODEL, n_heads)
        .init(&device)
        .unwrap();
    // Our fused projection is [q | k | v] side by side.
    let weight = Tensor::cat(
        vec![
            burn_mha.query.weight.val(),
            burn_mha.key.weight.val(),
            burn_mha.value.weight.val(),
        ],
        1,
    );
    let bias = Tensor::cat(
        vec![
            burn_mha.query.bias.as_ref().unwrap().val(),
            burn_mha.key.bias.as_ref().unwrap().val(),
            burn_mha.value.bias.as_ref().unwrap().val(),
        ],
        0,
    );
    ours.qkv = Some(Linear {
        weight: Param::from_tensor(weight),
        bias: Some(Param::from_tensor(bias)),
    });
    ours.output = burn_mha.output.clone();

    let x = random([BATCH, SEQ, D_MODEL], &device);
    let (mask, _) = masks(&device);
    // Capturing takes the composed ops, not capturing the fused core (model::fused) on
    // flex: both against Burn's attention.
    for (with_masks, capture) in [(false, true), (true, true), (false, false), (true, false)] {
        let mut theirs_in = MhaInput::self_attn(x.clone());
        let mut ours_in = AttentionInput::new(x.clone()).capture(capture);
        if with_masks {
            theirs_in = theirs_in
                .mask_pad(mask.pad.clone().unwrap())
                .mask_attn(mask.attn.clone().unwrap());
            ours_in = ours_in.mask(mask.clone());
        }
        let theirs = burn_mha.forward(theirs_in);
        let ours = ours.forward(ours_in);
        assert!(
            max_abs_diff(ours.context, theirs.context) < 1e-5,
            "context, masks: {with_masks}, capture: {capture}"
        );
        if capture {
            assert!(
                max_abs_diff(ours.pattern.unwrap(), theirs.weights) < 1e-5,
                "pattern, masks: {with_masks}"
            );
        }
    }
}

#[test]
fn every_layout_equals_a_naive_loop_over_heads() {
    let device = device();
    let layouts = [
        (HeadLayout::Split, None),
        (HeadLayout::Split, Some(3)),
        (HeadLayout::Wide, None),
        (HeadLayout::Narrow, None),
        (HeadLayout::Narrow, Some(6)),
    ];
    for (layout, d_head) in layouts {
        let attention = MultiHeadAttentionConfig::new(D_MODEL, 4)
            .with_layout(layout)
            .with_d_head(d_head)
            .init(&device)
            .unwrap();
        let x = random([BATCH, SEQ, D_MODEL], &device);
        let (mask, masked) = masks(&device);
        let head_mask = [1.0, 0.0, 0.5, 1.0];
        let ours = attention.forward(
            AttentionInput::new(x.clone())
                .mask(mask)
                .head_mask(Some(Tensor::from_floats(head_mask, &device)))
                .capture(true),
        );
        let naive = naive_attention(&attention, x, masked, Some(&head_mask));
        let context_diff = max_abs_diff_vec(&to_vec(ours.context), &naive.context);
        let pattern_diff = max_abs_diff_vec(&to_vec(ours.pattern.unwrap()), &naive.pattern);
        assert!(
            context_diff < 1e-5,
            "{layout:?} d_head {d_head:?}: context differs by {context_diff}"
        );
        assert!(
            pattern_diff < 1e-6,
            "{layout:?} d_head {d_head:?}: pattern differs by {pattern_diff}"
        );
    }
}

#[test]
fn head_sizes_follow_the_layout() {
    let device = device();
    let d_head = |layout, explicit| {
        let attention = MultiHeadAttentionConfig::new(D_MODEL, 4)
            .with_layout(layout)
            .with_d_head(explicit)
            .init(&device)
            .unwrap();
        let weights = attention.head_weights(3);
        assert_eq!(weights.q.dims()[0], D_MODEL);
        assert_eq!(weights.o.dims(), [attention.d_head, D_MODEL]);
        attention.d_head
    };
    assert_eq!(d_head(HeadLayout::Split, None), 2);
    assert_eq!(d_head(HeadLayout::Split, Some(5)), 5);
    assert_eq!(d_head(HeadLayout::Wide, None), D_MODEL);
    assert_eq!(d_head(HeadLayout::Narrow, None), 2);
}

#[test]
fn narrow_heads_read_only_their_own_chunk() {
    let device = device();
    let attention = MultiHeadAttentionConfig::new(D_MODEL, 4)
        .with_layout(HeadLayout::Narrow)
        .init(&device)
        .unwrap();
    let q = Matrix::of(attention.head_weights(1).q);
    for r in 0..D_MODEL {
        let row_is_zero = (0..q.cols).all(|c| q.at(r, c) == 0.0);
        assert_eq!(row_is_zero, !(2..4).contains(&r), "row {r} of head 1's q");
    }
}

#[test]
fn attention_rows_sum_to_one_and_masked_keys_get_nothing() {
    let device = device();
    let attention = MultiHeadAttentionConfig::new(D_MODEL, 2)
        .init(&device)
        .unwrap();
    let (mask, masked) = masks(&device);
    let x = random([BATCH, SEQ, D_MODEL], &device).mul_scalar(4.0);
    let pattern = attention
        .forward(AttentionInput::new(x).mask(mask).capture(true))
        .pattern
        .unwrap();
    let sums = to_vec(pattern.clone().sum_dim(3));
    assert!(
        sums.iter().all(|s| (s - 1.0).abs() < 1e-5),
        "row sums {sums:?}"
    );
    let probs = to_vec(pattern);
    for b in 0..BATCH {
        for h in 0..2 {
            for i in 0..SEQ {
                for j in 0..SEQ {
                    let p = probs[((b * 2 + h) * SEQ + i) * SEQ + j];
                    if masked(b, i, j) {
                        assert_eq!(p, 0.0, "masked key {j} of query {i}, item {b}, head {h}");
                    } else {
                        assert!(p > 0.0);
                    }
                }
            }
        }
    }
}

#[test]
fn rotary_scores_depend_only_on_relative_position() {
    // Prefix the sequence with `shift` extra positions and mask them out as keys: every
    // query and key moves `shift` places right, so relative positions stay and absolute
    // ones change. Rotary attention must give the same pattern.
    let device = device();
    let shift = 3;
    let attention = MultiHeadAttentionConfig::new(D_MODEL, 2)
        .with_rotary(Some(SEQ + shift))
        .init(&device)
        .unwrap();
    let x = random([1, SEQ, D_MODEL], &device);
    let prefixed = Tensor::cat(vec![random([1, shift, D_MODEL], &device), x.clone()], 1);
    let pad = Tensor::<2, Bool>::from_data(
        TensorData::new(
            (0..SEQ + shift).map(|j| j < shift).collect::<Vec<_>>(),
            [1, SEQ + shift],
        ),
        &device,
    );
    let plain = attention
        .forward(AttentionInput::new(x).capture(true))
        .pattern
        .unwrap();
    let shifted = attention
        .forward(
            AttentionInput::new(prefixed)
                .mask(AttentionMask {
                    pad: Some(pad),
                    attn: None,
                })
                .capture(true),
        )
        .pattern
        .unwrap()
        .slice([0..1, 0..2, shift..SEQ + shift, shift..SEQ + shift]);
    assert!(max_abs_diff(plain.clone(), shifted) < 1e-5);

    // And rotary does change scores with relative position: without it, a sequence of
    // identical vectors attends uniformly; with it, it does not.
    let same = random([1, 1, D_MODEL], &device).repeat_dim(1, SEQ);
    let pattern = to_vec(
        attention
            .forward(AttentionInput::new(same).capture(true))
            .pattern
            .unwrap(),
    );
    let spread =
        pattern.iter().cloned().fold(0.0, f32::max) - pattern.iter().cloned().fold(1.0, f32::min);
    assert!(spread > 1e-3, "rotary positions had no effect");
}

#[test]
fn ablating_a_head_removes_exactly_its_contribution() {
    let device = device();
    for layout in [HeadLayout::Split, HeadLayout::Wide, HeadLayout::Narrow] {
        let attention = MultiHeadAttentionConfig::new(D_MODEL, 4)
            .with_layout(layout)
            .init(&device)
            .unwrap();
        let x = random([BATCH, SEQ, D_MODEL], &device);
        let full = attention.forward(AttentionInput::new(x.clone()).capture(true));
        let ablated_head = 2;
        let mut mask = [1.0f32; 4];
        mask[ablated_head] = 0.0;
        let ablated = attention
            .forward(AttentionInput::new(x).head_mask(Some(Tensor::from_floats(mask, &device))));
        // By hand: head 2's output [batch, seq, d_head] through its rows of O.
        let d_head = attention.d_head;
        let head_out = full
            .head_outputs
            .unwrap()
            .narrow(2, ablated_head, 1)
            .reshape([BATCH, SEQ, d_head]);
        let contribution = head_out.matmul(attention.head_weights(ablated_head).o.unsqueeze());
        let by_hand = full.context - contribution;
        assert!(max_abs_diff(ablated.context, by_hand) < 1e-5, "{layout:?}");
    }
}

#[test]
fn a_head_patch_replaces_exactly_what_it_weights() {
    let device = device();
    for layout in [HeadLayout::Split, HeadLayout::Wide, HeadLayout::Narrow] {
        let attention = MultiHeadAttentionConfig::new(D_MODEL, 4)
            .with_layout(layout)
            .init(&device)
            .unwrap();
        let d_head = attention.d_head;
        let x = random([BATCH, SEQ, D_MODEL], &device);
        let full = attention.forward(AttentionInput::new(x.clone()).capture(true));
        let own = full.head_outputs.clone().unwrap(); // [batch, seq, heads, d_head]
        let patched = |patch: HeadPatch| {
            attention.forward(
                AttentionInput::new(x.clone())
                    .head_patch(Some(patch))
                    .capture(true),
            )
        };
        // A head's own outputs put back: nothing changes.
        let same = patched(HeadPatch {
            values: own.clone(),
            weight: Tensor::ones([1, 1, 4, 1], &device),
        });
        assert!(
            max_abs_diff(same.context, full.context.clone()) < 1e-6,
            "{layout:?}"
        );
        // Zeros into head 2: the head mask's zero ablation.
        let mut one_hot = [0.0f32; 4];
        one_hot[2] = 1.0;
        let weight = Tensor::<1>::from_floats(one_hot, &device).reshape([1, 1, 4, 1]);
        let zeroed = patched(HeadPatch {
            values: Tensor::zeros([1, 1, 4, d_head], &device),
            weight: weight.clone(),
        });
        let masked = attention.forward(
            AttentionInput::new(x.clone())
                .head_mask(Some(Tensor::from_floats([1.0, 1.0, 0.0, 1.0], &device))),
        );
        assert!(
            max_abs_diff(zeroed.context, masked.context) < 1e-6,
            "{layout:?}"
        );
        // A value into head 2 at one position (item 1, query 3): by hand, only that row's
        // context moves, by (value - own output) through head 2's rows of O.
        let value = random([d_head], &device);
        let mut at = vec![0.0f32; BATCH * SEQ * 4];
        at[(SEQ + 3) * 4 + 2] = 1.0;
        let weight = Tensor::<1>::from_floats(at.as_slice(), &device).reshape([BATCH, SEQ, 4, 1]);
        let one = patched(HeadPatch {
            values: value.clone().reshape([1, 1, 1, d_head]).repeat_dim(2, 4),
            weight,
        });
        let own_at = own.slice([1..2, 3..4, 2..3]).reshape([1, d_head]);
        let delta = (value.reshape([1, d_head]) - own_at).matmul(attention.head_weights(2).o);
        let expected = full.context.clone().slice_assign(
            [1..2, 3..4, 0..D_MODEL],
            full.context.clone().slice([1..2, 3..4, 0..D_MODEL]) + delta.reshape([1, 1, D_MODEL]),
        );
        assert!(max_abs_diff(one.context, expected) < 1e-5, "{layout:?}");
    }
}

/// Path patching's primitive against the loop reference: head 1's key and head 2's query and
/// value read another input, every other projection the layer's own; in every layout, with
/// masks. Weights of zero change nothing; weights of one everywhere are attention over the
/// other input.
#[test]
fn a_qkv_patch_feeds_exactly_the_projections_it_weights() {
    let device = device();
    let (mask, masked) = masks(&device);
    for layout in [HeadLayout::Split, HeadLayout::Wide, HeadLayout::Narrow] {
        let attention = MultiHeadAttentionConfig::new(D_MODEL, 4)
            .with_layout(layout)
            .init(&device)
            .unwrap();
        let x = random([BATCH, SEQ, D_MODEL], &device);
        let other = random([BATCH, SEQ, D_MODEL], &device);
        let weights = |picked: &[usize]| {
            let mut weight = [0.0f32; 4];
            for &head in picked {
                weight[head] = 1.0;
            }
            Tensor::<1>::from_floats(weight, &device)
        };
        let run = |query: &[usize], key: &[usize], value: &[usize]| {
            let patch = QkvPatch {
                x: other.clone(),
                query: weights(query),
                key: weights(key),
                value: weights(value),
            };
            attention.forward(
                AttentionInput::new(x.clone())
                    .mask(mask.clone())
                    .qkv_patch(Some(patch)),
            )
        };
        let reads = |h: usize, c: QkvChannel| {
            matches!(
                (h, c),
                (1, QkvChannel::Key) | (2, QkvChannel::Query | QkvChannel::Value)
            )
        };
        let expected =
            naive_attention_reading(&attention, x.clone(), &masked, None, other.clone(), reads);
        let patched = run(&[2], &[1], &[2]);
        assert!(
            max_abs_diff_vec(&to_vec(patched.context), &expected.context) < 1e-5,
            "{layout:?}"
        );
        let plain = attention.forward(AttentionInput::new(x.clone()).mask(mask.clone()));
        let none = run(&[], &[], &[]);
        assert!(
            max_abs_diff(none.context, plain.context.clone()) < 1e-6,
            "{layout:?}"
        );
        let all = run(&[0, 1, 2, 3], &[0, 1, 2, 3], &[0, 1, 2, 3]);
        let on_other = attention.forward(AttentionInput::new(other.clone()).mask(mask.clone()));
        assert!(
            max_abs_diff(all.context, on_other.context) < 1e-5,
            "{layout:?}"
        );
    }
}

#[test]
fn qk_and_ov_circuits_are_the_products_of_the_head_slices() {
    let device = device();
    let attention = MultiHeadAttentionConfig::new(D_MODEL, 2)
        .init(&device)
        .unwrap();
    let head = attention.head_weights(1);
    let (q, k, v, o) = (
        Matrix::of(head.q.clone()),
        Matrix::of(head.k.clone()),
        Matrix::of(head.v.clone()),
        Matrix::of(head.o.clone()),
    );
    let (qk, ov) = (Matrix::of(head.qk()), Matrix::of(head.ov()));
    assert_eq!(
        (qk.rows, qk.cols, ov.rows, ov.cols),
        (D_MODEL, D_MODEL, D_MODEL, D_MODEL)
    );
    for i in 0..D_MODEL {
        for j in 0..D_MODEL {
            let qk_ij: f32 = (0..q.cols).map(|d| q.at(i, d) * k.at(j, d)).sum();
            let ov_ij: f32 = (0..v.cols).map(|d| v.at(i, d) * o.at(d, j)).sum();
            assert!((qk.at(i, j) - qk_ij).abs() < 1e-5);
            assert!((ov.at(i, j) - ov_ij).abs() < 1e-5);
        }
    }
}

#[test]
fn nothing_is_captured_unless_asked() {
    let device = device();
    let attention = MultiHeadAttentionConfig::new(D_MODEL, 2)
        .init(&device)
        .unwrap();
    let out = attention.forward(AttentionInput::new(random([1, SEQ, D_MODEL], &device)));
    assert!(out.pattern.is_none() && out.head_outputs.is_none());
}

#[test]
#[should_panic(expected = "attention input has d_model 6, the layer expects 8")]
fn wrong_input_width_panics_with_the_axis_named() {
    let device = device();
    let attention = MultiHeadAttentionConfig::new(D_MODEL, 2)
        .init(&device)
        .unwrap();
    attention.forward(AttentionInput::new(random([1, SEQ, 6], &device)));
}
