//! The initial weights do not depend on what reads the model first. Burn draws a parameter
//! when it is first read, so `EncoderConfig::init` draws them all itself; otherwise a
//! snapshot taken before the first forward pass would change the run.
//!
//! A file of its own, so its one test owns the process: the device RNG is shared by every
//! thread, and another test drawing from it between `seed` and `init` would make it flaky.

use burn::prelude::*;
use model::{EncoderConfig, EncoderIo, HeadLayout, InitScheme};

#[test]
fn the_initial_weights_do_not_depend_on_what_reads_the_model_first() {
    let device = Device::flex();
    let io = EncoderIo {
        vocab_size: 7,
        n_outputs: 5,
        max_seq_len: 6,
    };
    let config = EncoderConfig {
        d_model: 8,
        n_layers: 2,
        n_heads: 4,
        head_layout: HeadLayout::Split,
        d_ff: 16,
        init: InitScheme::Random,
        ..EncoderConfig::default()
    };
    let tokens = Tensor::<2, Int>::from_data([[0, 1, 2, 3, 4, 5]], &device);

    device.seed(11);
    let forward_first = config.init(&io, &device).unwrap();
    let expected = forward_first.forward(tokens.clone());

    device.seed(11);
    let heads_first = config.init(&io, &device).unwrap();
    let _ = heads_first.blocks[1].attention.head_weights(3);
    let _ = heads_first.output.weight.val();
    let actual = heads_first.forward(tokens);

    let difference: f32 = (actual - expected).abs().max().into_scalar();
    assert_eq!(difference, 0.0);
}
