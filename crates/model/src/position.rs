//! Positional information: added to the token embeddings (sinusoidal, learned) or applied
//! to queries and keys inside attention (rotary, see [`crate::MultiHeadAttention`]).

use burn::nn::{Embedding, EmbeddingConfig, PositionalEncoding, PositionalEncodingConfig};
use burn::prelude::*;
use serde::{Deserialize, Serialize};

/// Which positional encoding the encoder uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PositionalKind {
    /// Fixed sines and cosines added to the embeddings (Vaswani et al. 2017).
    #[default]
    Sinusoidal,
    /// A trained embedding per position, added to the token embeddings.
    Learned,
    /// Rotations of each head's queries and keys by position (Su et al. 2021, RoFormer):
    /// scores then depend only on relative position.
    Rotary,
    /// No positional information: attention is permutation-equivariant.
    None,
}

/// Positions added to the token embeddings; empty for rotary and none.
#[derive(Module, Debug)]
pub struct AbsolutePositions {
    /// Learned table `[max_seq_len, d_model]`, for [`PositionalKind::Learned`].
    pub learned: Option<Embedding>,
    /// Fixed table, for [`PositionalKind::Sinusoidal`].
    pub sinusoidal: Option<PositionalEncoding>,
}

impl AbsolutePositions {
    /// Builds the table `kind` needs.
    pub fn new(kind: PositionalKind, max_seq_len: usize, d_model: usize, device: &Device) -> Self {
        Self {
            learned: (kind == PositionalKind::Learned)
                .then(|| EmbeddingConfig::new(max_seq_len, d_model).init(device)),
            sinusoidal: (kind == PositionalKind::Sinusoidal).then(|| {
                PositionalEncodingConfig::new(d_model)
                    .with_max_sequence_size(max_seq_len)
                    .init(device)
            }),
        }
    }

    /// Adds the positions to `x`.
    ///
    /// # Shapes
    /// - `x`: `[batch, seq, d_model]` -> `[batch, seq, d_model]`
    ///
    /// # Panics
    /// If `seq` is longer than the table.
    pub fn forward(&self, x: Tensor<3>) -> Tensor<3> {
        let [_, seq, _] = x.dims();
        if let Some(learned) = &self.learned {
            let table = learned.weight.val(); // [max_seq_len, d_model]
            let max_seq_len = table.dims()[0];
            assert!(
                seq <= max_seq_len,
                "sequence of length {seq} is longer than the position table ({max_seq_len})"
            );
            return x + table.narrow(0, 0, seq).unsqueeze_dim::<3>(0);
        }
        if let Some(sinusoidal) = &self.sinusoidal {
            return sinusoidal.forward(x);
        }
        x
    }
}
