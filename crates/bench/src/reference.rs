//! The reference the benchmark compares against: Burn's built-in
//! [`TransformerEncoder`] wrapped in the same embedding, sinusoidal positions, final norm
//! and output layer as headlab's [`model::Encoder`], so that only the encoder blocks differ.

use burn::nn::transformer::{
    TransformerEncoder, TransformerEncoderConfig, TransformerEncoderInput,
};
use burn::nn::{
    Embedding, EmbeddingConfig, LayerNorm, LayerNormConfig, Linear, LinearConfig,
    PositionalEncoding, PositionalEncodingConfig,
};
use burn::prelude::*;
use model::{EncoderConfig, EncoderIo};

/// Burn's encoder stack between headlab's input and output layers.
#[derive(Module, Debug)]
pub struct BurnEncoder {
    /// Token embedding, `[vocab, d_model]`.
    pub embedding: Embedding,
    /// Fixed sinusoidal positions.
    pub positions: PositionalEncoding,
    /// Burn's pre-norm encoder blocks.
    pub encoder: TransformerEncoder,
    /// Norm after the last block, as in headlab's pre-norm encoder.
    pub final_norm: LayerNorm,
    /// Per-position classifier.
    pub output: Linear,
}

impl BurnEncoder {
    /// The reference model at the sizes of `config` (pre-norm, GELU, no dropout).
    pub fn new(config: &EncoderConfig, io: &EncoderIo, device: &Device) -> Self {
        Self {
            embedding: EmbeddingConfig::new(io.vocab_size, config.d_model).init(device),
            positions: PositionalEncodingConfig::new(config.d_model)
                .with_max_sequence_size(io.max_seq_len)
                .init(device),
            encoder: TransformerEncoderConfig::new(
                config.d_model,
                config.d_ff,
                config.n_heads,
                config.n_layers,
            )
            .with_norm_first(true)
            .with_dropout(config.dropout)
            .init(device),
            final_norm: LayerNormConfig::new(config.d_model).init(device),
            output: LinearConfig::new(config.d_model, io.n_outputs).init(device),
        }
    }

    /// Logits per position.
    ///
    /// # Shapes
    /// - `tokens`: `[batch, seq]` -> `[batch, seq, n_outputs]`
    pub fn forward(&self, tokens: Tensor<2, Int>) -> Tensor<3> {
        let x = self.positions.forward(self.embedding.forward(tokens)); // [batch, seq, d_model]
        let x = self.encoder.forward(TransformerEncoderInput::new(x));
        self.output.forward(self.final_norm.forward(x))
    }
}
