//! Dropout masks drawn outside the seed stack: each seed's masks are the ones its own run
//! draws from its own stream ([`LayerDropout::draw`]), which one device generator inside a
//! batched op could not give, laid out for the stack by [`LayerDropout::for_stack`].

use burn::nn::{Dropout, DropoutConfig};
use burn::prelude::*;

/// The sizes of one block's dropout masks, for drawing them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DropoutShape {
    /// Dropout probability, in `(0, 1)`.
    pub prob: f64,
    /// Attention heads.
    pub n_heads: usize,
    /// Residual width.
    pub d_model: usize,
    /// Feed-forward hidden width.
    pub d_ff: usize,
}

/// One block's dropout masks, each 0 where dropped and `1 / (1 - p)` where kept: for one
/// seed and a batch of `batch` sequences in the shapes an [`Encoder`](crate::Encoder) draws them
/// ([`LayerDropout::draw`]), or for every seed of a stack in the stack's shapes
/// ([`LayerDropout::for_stack`], given in brackets below).
#[derive(Debug, Clone)]
pub struct LayerDropout {
    /// `[batch, heads, seq, seq]` (`[seeds * batch, heads, seq, seq]`): on the attention
    /// probabilities.
    pub attention: Tensor<4>,
    /// `[batch, seq, d_model]` (`[seeds, batch * seq, d_model]`): on the attention branch's
    /// output.
    pub attention_out: Tensor<3>,
    /// `[batch, seq, d_ff]` (`[seeds, batch * seq, d_ff]`): on the feed-forward's hidden
    /// layer.
    pub ff_hidden: Tensor<3>,
    /// `[batch, seq, d_model]` (`[seeds, batch * seq, d_model]`): on the feed-forward
    /// branch's output.
    pub ff_out: Tensor<3>,
}

impl LayerDropout {
    /// Draws one block's masks from `device`'s generator in the order an [`Encoder`](crate::Encoder)'s
    /// forward pass draws them (the attention probabilities, the attention branch, the
    /// feed-forward hidden layer, the feed-forward branch), with Burn's [`Dropout`] as the
    /// encoder uses it: the same generator state gives the same masks. `device` must have
    /// autodiff (dropout draws nothing without it).
    pub fn draw(shape: DropoutShape, batch: usize, seq: usize, device: &Device) -> Self {
        let dropout: Dropout = DropoutConfig::new(shape.prob).init();
        let mask3 = |width: usize| dropout.forward(Tensor::<3>::ones([batch, seq, width], device));
        let attention =
            dropout.forward(Tensor::<4>::ones([batch, shape.n_heads, seq, seq], device));
        let attention_out = mask3(shape.d_model);
        let ff_hidden = mask3(shape.d_ff);
        let ff_out = mask3(shape.d_model);
        Self {
            attention,
            attention_out,
            ff_hidden,
            ff_out,
        }
    }

    /// The masks of a batch padded to `seq` positions (padding keeps everything: padded
    /// positions are masked as keys and never scored, so their masks change nothing).
    pub fn pad_to(self, seq: usize) -> Self {
        let [batch, heads, own, _] = self.attention.dims();
        if own >= seq {
            return self;
        }
        let device = self.attention.device();
        let pad3 = |mask: Tensor<3>| {
            let [batch, own, width] = mask.dims();
            Tensor::cat(
                vec![mask, Tensor::ones([batch, seq - own, width], &device)],
                1,
            )
        };
        let attention = Tensor::cat(
            vec![
                self.attention,
                Tensor::ones([batch, heads, own, seq - own], &device),
            ],
            3,
        );
        let attention = Tensor::cat(
            vec![
                attention,
                Tensor::ones([batch, heads, seq - own, seq], &device),
            ],
            2,
        );
        Self {
            attention,
            attention_out: pad3(self.attention_out),
            ff_hidden: pad3(self.ff_hidden),
            ff_out: pad3(self.ff_out),
        }
    }

    /// The stack's masks for one block: `parts[s]` are seed `s`'s masks (each seed with the
    /// same batch), each the concatenation of its shards' draws along the batch axis.
    pub fn for_stack(parts: Vec<Vec<LayerDropout>>) -> LayerDropout {
        let seeds = parts.len();
        // Seed-major along the batch axis: [seeds * batch, ...].
        let all = Self::cat_batch(parts.into_iter().map(Self::cat_batch).collect());
        let residual = |mask: Tensor<3>| {
            let [rows, seq, width] = mask.dims();
            mask.reshape([seeds, rows / seeds * seq, width])
        };
        LayerDropout {
            attention: all.attention,
            attention_out: residual(all.attention_out),
            ff_hidden: residual(all.ff_hidden),
            ff_out: residual(all.ff_out),
        }
    }

    /// Masks of consecutive parts of a batch, as one batch's masks.
    fn cat_batch(parts: Vec<LayerDropout>) -> LayerDropout {
        let mut attention = Vec::with_capacity(parts.len());
        let (mut attention_out, mut ff_hidden, mut ff_out) = (vec![], vec![], vec![]);
        for part in parts {
            attention.push(part.attention);
            attention_out.push(part.attention_out);
            ff_hidden.push(part.ff_hidden);
            ff_out.push(part.ff_out);
        }
        LayerDropout {
            attention: Tensor::cat(attention, 0),
            attention_out: Tensor::cat(attention_out, 0),
            ff_hidden: Tensor::cat(ff_hidden, 0),
            ff_out: Tensor::cat(ff_out, 0),
        }
    }
}
