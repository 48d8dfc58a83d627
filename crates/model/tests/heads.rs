//! Heads as values: `HeadId`'s name and order, and `Encoder::heads`.

mod common;

use common::*;
use model::{EncoderConfig, EncoderIo, HeadId};

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
