//! Heads as first-class values: [`HeadId`] names one head of a model, [`HeadWeights`] holds
//! the exact slices of a [`MultiHeadAttention`] layer's parameters that one head uses with
//! its QK and OV circuits (Elhage et al. 2021, "A Mathematical Framework for Transformer
//! Circuits"); [`Encoder::heads`] lists a model's heads. Every head's weights on the host,
//! as analyses read them, are `run::snapshot::HeadTensorsByLayer`.

use std::fmt;

use burn::prelude::*;
use serde::{Deserialize, Serialize};

use crate::attention::MultiHeadAttention;
use crate::encoder::Encoder;

/// One attention head of a model: its layer and its index within the layer. `L0H1` (its
/// `Display`) is how headlab writes a head everywhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct HeadId {
    /// Layer index (encoder block).
    pub layer: usize,
    /// Head index within the layer.
    pub head: usize,
}

impl HeadId {
    /// Head `head` of layer `layer`.
    pub const fn new(layer: usize, head: usize) -> Self {
        Self { layer, head }
    }

    /// The head's place in layer-major order (the order of `heads.json`) in a model with
    /// `n_heads` heads per layer.
    pub const fn flat_index(self, n_heads: usize) -> usize {
        self.layer * n_heads + self.head
    }

    /// The head at layer-major place `index` in a model with `n_heads` heads per layer.
    pub const fn from_flat_index(index: usize, n_heads: usize) -> Self {
        Self::new(index / n_heads, index % n_heads)
    }
}

impl fmt::Display for HeadId {
    /// `L{layer}H{head}`; width and alignment flags pad the whole name.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&format!("L{}H{}", self.layer, self.head))
    }
}

/// One head's weights, in the orientation of the forward pass (`x @ q + q_bias` is the
/// head's query for a row vector `x`).
#[derive(Debug, Clone)]
pub struct HeadWeights {
    /// `[d_model, d_head]`. In the narrow layout, rows outside the head's input chunk are zero.
    pub q: Tensor<2>,
    /// `[d_model, d_head]`, like `q`.
    pub k: Tensor<2>,
    /// `[d_model, d_head]`, like `q`.
    pub v: Tensor<2>,
    /// `[d_head]`.
    pub q_bias: Tensor<1>,
    /// `[d_head]`.
    pub k_bias: Tensor<1>,
    /// `[d_head]`.
    pub v_bias: Tensor<1>,
    /// `[d_head, d_model]`: the head's rows of the output projection.
    pub o: Tensor<2>,
}

impl HeadWeights {
    /// The QK circuit `q k^T`, `[d_model, d_model]`: the bilinear form `x_i^T (q k^T) x_j`
    /// is the head's attention score from position `i` to `j` (before scaling, without
    /// biases or rotary positions).
    pub fn qk(&self) -> Tensor<2> {
        self.q.clone().matmul(self.k.clone().transpose())
    }

    /// The OV circuit `v o`, `[d_model, d_model]`: what the head writes to the residual
    /// stream for each unit of attention to a position holding `x` (`x @ v o`).
    pub fn ov(&self) -> Tensor<2> {
        self.v.clone().matmul(self.o.clone())
    }
}

impl MultiHeadAttention {
    /// The weights head `head` uses, sliced out of the layer's fused parameters.
    ///
    /// # Panics
    /// If `head >= n_heads`.
    pub fn head_weights(&self, head: usize) -> HeadWeights {
        let (n_heads, d_head, d_model) = (self.n_heads, self.d_head, self.d_model);
        assert!(
            head < n_heads,
            "head {head} out of range: the layer has {n_heads} heads"
        );
        let o = self.output.weight.val().narrow(0, head * d_head, d_head);

        match (&self.qkv, &self.qkv_narrow) {
            (Some(qkv), _) => {
                // Columns: [q heads | k heads | v heads], head-major within each block.
                let weight = qkv.weight.val(); // [d_model, 3 * heads * d_head]
                let column = |block: usize| (block * n_heads + head) * d_head;
                let bias = |block: usize| match &qkv.bias {
                    Some(bias) => bias.val().narrow(0, column(block), d_head),
                    None => Tensor::zeros([d_head], &weight.device()),
                };
                HeadWeights {
                    q: weight.clone().narrow(1, column(0), d_head),
                    k: weight.clone().narrow(1, column(1), d_head),
                    v: weight.clone().narrow(1, column(2), d_head),
                    q_bias: bias(0),
                    k_bias: bias(1),
                    v_bias: bias(2),
                    o,
                }
            }
            (None, Some(narrow)) => {
                let d_chunk = d_model / n_heads;
                // [n_heads, d_chunk, 3 * d_head] -> this head's [d_chunk, 3 * d_head]
                let weight = narrow
                    .weight
                    .val()
                    .narrow(0, head, 1)
                    .reshape([d_chunk, 3 * d_head]);
                let bias = narrow.bias.val().narrow(0, head, 1).reshape([3 * d_head]);
                // Embed the chunk's rows in a [d_model, d_head] matrix so that every layout
                // reads the same way: `x @ q` over the whole input.
                let embed = |block: usize| {
                    let rows = weight.clone().narrow(1, block * d_head, d_head);
                    Tensor::zeros([d_model, d_head], &rows.device())
                        .slice_assign([head * d_chunk..(head + 1) * d_chunk, 0..d_head], rows)
                };
                HeadWeights {
                    q: embed(0),
                    k: embed(1),
                    v: embed(2),
                    q_bias: bias.clone().narrow(0, 0, d_head),
                    k_bias: bias.clone().narrow(0, d_head, d_head),
                    v_bias: bias.narrow(0, 2 * d_head, d_head),
                    o,
                }
            }
            (None, None) => unreachable!("attention built without input projections"),
        }
    }

    /// The output projection's bias, `[d_model]` (zeros when the projection has none).
    /// It is shared by all heads, so it belongs to no [`HeadWeights`].
    pub fn output_bias(&self) -> Tensor<1> {
        match &self.output.bias {
            Some(bias) => bias.val(),
            None => Tensor::zeros([self.d_model], &self.output.weight.device()),
        }
    }
}

impl Encoder {
    /// Number of encoder blocks.
    pub fn n_layers(&self) -> usize {
        self.blocks.len()
    }

    /// Every head of the model, layer-major (`L0H0`, `L0H1`, ..., `L1H0`, ...): the order of
    /// `heads.json` and of [`HeadId::flat_index`].
    pub fn heads(&self) -> impl Iterator<Item = HeadId> + use<> {
        let (n_layers, n_heads) = (self.n_layers(), self.n_heads());
        (0..n_layers).flat_map(move |layer| (0..n_heads).map(move |head| HeadId::new(layer, head)))
    }

    /// The weights of head `id`.
    ///
    /// # Panics
    /// If the model has no such head.
    pub fn head_weights(&self, id: HeadId) -> HeadWeights {
        let n_layers = self.n_layers();
        let block = self.blocks.get(id.layer).unwrap_or_else(|| {
            panic!(
                "{id}: layer {} out of range, the model has {n_layers}",
                id.layer
            )
        });
        block.attention.head_weights(id.head)
    }

    /// A head mask for [`EncoderInput::head_mask`](crate::EncoderInput::head_mask),
    /// `[n_layers, n_heads]`: 1 for every head `keep` says to keep, 0 for the others.
    pub fn head_mask_keeping(&self, keep: impl Fn(HeadId) -> bool, device: &Device) -> Tensor<2> {
        let values: Vec<f32> = self
            .heads()
            .map(|id| if keep(id) { 1.0 } else { 0.0 })
            .collect();
        Tensor::from_data(
            TensorData::new(values, [self.n_layers(), self.n_heads()]),
            device,
        )
    }
}
