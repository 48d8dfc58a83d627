//! Heads as values: `HeadId`'s name and order, `Encoder::heads`, and the stacked weight views
//! against each head's own slices, in every layout.

mod common;

use burn::prelude::*;
use common::*;
use model::{EncoderConfig, EncoderIo, HeadId, HeadLayout};

const IO: EncoderIo = EncoderIo {
    vocab_size: 7,
    n_outputs: 5,
    max_seq_len: 6,
};

#[test]
fn a_head_is_named_l_layer_h_head_and_pads_as_one_word() {
    let id = HeadId::new(1, 3);
    assert_eq!(id.to_string(), "L1H3");
    assert_eq!(format!("[{id:<6}]"), "[L1H3  ]");
    assert_eq!(format!("[{id:>6}]"), "[  L1H3]");
    assert_eq!(HeadId::new(12, 0).to_string(), "L12H0");
    assert_eq!(id.flat_index(4), 7);
    assert_eq!(HeadId::from_flat_index(7, 4), id);
    assert!(HeadId::new(0, 3) < HeadId::new(1, 0), "layer-major order");
    // Serialized as the `layer` and `head` fields the JSON records have always had.
    assert_eq!(toml::to_string(&id).unwrap(), "layer = 1\nhead = 3\n");
}

#[test]
fn heads_are_every_layer_and_head_in_layer_major_order() {
    let config = EncoderConfig {
        d_model: 8,
        n_layers: 3,
        n_heads: 2,
        d_ff: 16,
        ..EncoderConfig::default()
    };
    let model = config.init(&IO, &device()).unwrap();
    let heads: Vec<String> = model.heads().map(|h| h.to_string()).collect();
    assert_eq!(heads, ["L0H0", "L0H1", "L1H0", "L1H1", "L2H0", "L2H1"]);
    for (index, id) in model.heads().enumerate() {
        assert_eq!(id.flat_index(model.n_heads()), index);
    }
    assert_eq!(model.n_layers(), 3);
}

#[test]
fn stacked_weights_hold_each_heads_own_slices_in_every_layout() {
    for layout in [HeadLayout::Split, HeadLayout::Wide, HeadLayout::Narrow] {
        let config = EncoderConfig {
            d_model: 8,
            n_layers: 2,
            n_heads: 4,
            head_layout: layout,
            d_ff: 16,
            ..EncoderConfig::default()
        };
        let model = config.init(&IO, &device()).unwrap();
        let stacked = model.stacked_weights();
        let d_head = model.d_head();
        assert_eq!(stacked.q.dims(), [2, 4, 8, d_head], "{layout:?}");
        assert_eq!(stacked.o.dims(), [2, 4, d_head, 8], "{layout:?}");
        assert_eq!(stacked.v_bias.dims(), [2, 4, d_head], "{layout:?}");
        let (qk, ov) = (stacked.qk(), stacked.ov());
        for id in model.heads() {
            let own = model.head_weights(id);
            let at4 = |t: &Tensor<4>| {
                let [_, _, a, b] = t.dims();
                t.clone()
                    .slice([id.layer..id.layer + 1, id.head..id.head + 1])
                    .reshape([a, b])
            };
            let at3 = |t: &Tensor<3>| {
                let [_, _, a] = t.dims();
                t.clone()
                    .slice([id.layer..id.layer + 1, id.head..id.head + 1])
                    .reshape([a])
            };
            assert_eq!(max_abs_diff(at4(&stacked.q), own.q.clone()), 0.0, "{id} q");
            assert_eq!(max_abs_diff(at4(&stacked.k), own.k.clone()), 0.0, "{id} k");
            assert_eq!(max_abs_diff(at4(&stacked.v), own.v.clone()), 0.0, "{id} v");
            assert_eq!(max_abs_diff(at4(&stacked.o), own.o.clone()), 0.0, "{id} o");
            assert_eq!(max_abs_diff(at3(&stacked.q_bias), own.q_bias.clone()), 0.0);
            assert_eq!(max_abs_diff(at3(&stacked.k_bias), own.k_bias.clone()), 0.0);
            assert_eq!(max_abs_diff(at3(&stacked.v_bias), own.v_bias.clone()), 0.0);
            assert!(max_abs_diff(at4(&qk), own.qk()) < 1e-5, "{id} qk");
            assert!(max_abs_diff(at4(&ov), own.ov()) < 1e-5, "{id} ov");
        }
    }
}

#[test]
#[should_panic(expected = "L5H0: layer 5 out of range, the model has 2")]
fn a_head_outside_the_model_panics_naming_it() {
    let model = EncoderConfig {
        d_model: 8,
        n_layers: 2,
        n_heads: 2,
        d_ff: 16,
        ..EncoderConfig::default()
    }
    .init(&IO, &device())
    .unwrap();
    model.head_weights(HeadId::new(5, 0));
}
