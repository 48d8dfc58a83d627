//! Many seeds of one model as one batched model: [`SeedStack`] holds S [`Encoder`]s of one
//! configuration with every parameter stacked on a leading seed axis (`[S, ...]`), and runs
//! all S forward (and, under autodiff, backward) as one computation. This is how headlab
//! trains the 16 to 32 seeds of an experiment at once: at headlab's sizes a step of one
//! model is a few hundred small ops whose fixed cost dominates, and stacking S models makes
//! every op S times larger for about the same fixed cost (PyTorch's model ensembling with
//! `torch.func.stack_module_state` + `vmap`, JAX's `vmap` over seeds).
//!
//! The stack computes what each seed's [`Encoder`] computes, up to float rounding (the
//! tests compare logits and gradients per seed on both CPU backends for every head layout,
//! position kind and norm placement):
//!
//! - linear layers are batched matrix products `[S, rows, d_in] x [S, d_in, d_out]`;
//! - the attention core folds the seeds into its batch axis (`[S * batch, heads, ...]`), so
//!   the fused kernel runs unchanged;
//! - layer norms normalise every row with one kernel, then scale and shift by each seed's
//!   own parameters;
//! - the token embedding is one lookup in the `[S * vocab, d_model]` table, with each
//!   seed's ids offset by `seed * vocab`;
//! - dropout takes masks drawn outside ([`LayerDropout::draw`]): each seed's masks are the
//!   ones its own run draws from its own stream, which one device RNG could not give a
//!   batched op.
//!
//! [`SeedStack::stack`] builds a stack from S encoders; [`SeedStack::unstack`] gives back
//! one seed's encoder with the parameter ids of a template, so checkpoints, snapshots and
//! final weights of a seed are written by the same code as a single run's.

mod dropout;
mod layers;

pub use dropout::{DropoutShape, LayerDropout};

use burn::module::{ModuleVisitor, Param, ParamId};
use burn::nn::PositionalEncoding;
use burn::prelude::*;

pub use layers::{
    SeedAttention, SeedBlock, SeedHeadwiseLinear, SeedLinear, SeedNorm, SeedTransform,
};

use crate::attention::AttentionMask;
use crate::encoder::{Encoder, EncoderConfig};
use layers::{stack_param, unstack_param};

/// S encoders of one configuration, trained as one batched model.
///
/// The fields mirror [`Encoder`]'s in order, so the stack's parameters, visited in module
/// order, correspond one to one to each seed's encoder's ([`SeedStack::param_ids`]).
#[derive(Module, Debug)]
pub struct SeedStack {
    /// Token embeddings `[seeds, vocab_size, d_model]`.
    pub embedding: Param<Tensor<3>>,
    /// Learned positions `[seeds, max_seq_len, d_model]`, for learned positions.
    pub learned_positions: Option<Param<Tensor<3>>>,
    /// The fixed sinusoidal table, shared by every seed.
    pub sinusoidal: Option<PositionalEncoding>,
    /// The blocks, input first.
    pub blocks: Vec<SeedBlock>,
    /// Norms before the output heads.
    pub final_norm: SeedNorm,
    /// The prediction transforms before the output heads, where the model has one (a
    /// masked LM's: dense, activation, norm).
    pub output_transform: Option<SeedTransform>,
    /// Output heads `[seeds, d_model, n_outputs]`.
    pub output: SeedLinear,
    /// Number of seeds.
    pub seeds: usize,
    /// Longest sequence the position tables cover.
    pub max_seq_len: usize,
}

/// Input of [`SeedStack::forward`].
#[derive(Debug, Clone)]
pub struct StackInput {
    /// `[seeds, batch, seq]` token ids: seed `s`'s batch at `s`.
    pub tokens: Tensor<3, Int>,
    /// `[seeds * batch, seq]`: `true` at padding (seed-major), when any example is padded.
    pub pad: Option<Tensor<2, Bool>>,
    /// Dropout masks, one per block, when dropout is on.
    pub dropout: Option<Vec<LayerDropout>>,
}

impl SeedStack {
    /// The stack of `encoders`, which must share one configuration (a seed's encoder built
    /// by [`crate::EncoderConfig::init`] with its own seed).
    ///
    /// # Panics
    /// If `encoders` is empty or the encoders differ in shape.
    pub fn stack(encoders: &[&Encoder]) -> Self {
        assert!(!encoders.is_empty(), "a stack needs at least one encoder");
        let first = encoders[0];
        assert!(
            first.token_types.is_none()
                && first.embedding_norm.is_none()
                && first.final_norm.is_some()
                && first.embedding_projection.is_none(),
            "the seed stack implements headlab's own embeddings and output, not BERT's \
             (unsupported_option says which)"
        );
        for (index, encoder) in encoders.iter().enumerate() {
            assert_eq!(
                param_shapes(*encoder),
                param_shapes(first),
                "encoder {index} of the stack differs in shape from encoder 0"
            );
        }
        let embeddings: Vec<_> = encoders.iter().map(|e| &e.embedding.weight).collect();
        let learned_positions = first.positions.learned.as_ref().map(|_| {
            let tables: Vec<_> = encoders
                .iter()
                .map(|e| &e.positions.learned.as_ref().expect("one config").weight)
                .collect();
            stack_param(&tables)
        });
        let blocks = (0..first.blocks.len())
            .map(|layer| {
                let blocks: Vec<_> = encoders.iter().map(|e| &e.blocks[layer]).collect();
                SeedBlock::stack(&blocks)
            })
            .collect();
        let final_norms: Vec<_> = encoders
            .iter()
            .map(|e| e.final_norm.as_ref().expect("checked above"))
            .collect();
        let outputs: Vec<_> = encoders.iter().map(|e| &e.output).collect();
        let output_transform = first.output_transform.as_ref().map(|_| {
            let transforms: Vec<_> = encoders
                .iter()
                .map(|e| e.output_transform.as_ref().expect("one config"))
                .collect();
            SeedTransform::stack(&transforms, first.norm_epsilon, first.activation)
        });
        Self {
            embedding: stack_param(&embeddings),
            learned_positions,
            sinusoidal: first.positions.sinusoidal.clone(),
            blocks,
            final_norm: SeedNorm::stack(&final_norms, first.norm_epsilon),
            output_transform,
            output: SeedLinear::stack(&outputs),
            seeds: encoders.len(),
            max_seq_len: first.max_seq_len,
        }
    }

    /// Seed `seed`'s encoder: `template` (an encoder of the same configuration, usually the
    /// one the seed started from) with the stack's values for that seed and its own
    /// parameter ids. The values are detached copies.
    pub fn unstack(&self, seed: usize, mut template: Encoder) -> Encoder {
        assert!(
            seed < self.seeds,
            "seed index {seed} out of range: the stack has {} seeds",
            self.seeds
        );
        template.embedding.weight =
            unstack_param(&self.embedding, seed, template.embedding.weight.id);
        if let (Some(stacked), Some(learned)) =
            (&self.learned_positions, template.positions.learned.as_mut())
        {
            learned.weight = unstack_param(stacked, seed, learned.weight.id);
        }
        template.blocks = template
            .blocks
            .into_iter()
            .zip(&self.blocks)
            .map(|(block, stacked)| stacked.unstack(seed, block))
            .collect();
        template.final_norm = template
            .final_norm
            .map(|norm| self.final_norm.unstack(seed, norm));
        if let (Some(stacked), Some(transform)) =
            (&self.output_transform, template.output_transform.take())
        {
            template.output_transform = Some(stacked.unstack(seed, transform));
        }
        template.output = self.output.unstack(seed, template.output);
        template
    }

    /// The ids of the stack's parameters in module order: entry `i` stacks parameter `i`
    /// of each seed's encoder (see [`param_ids`]).
    pub fn param_ids(&self) -> Vec<ParamId> {
        param_ids(self)
    }

    /// Every seed's logits for its own batch.
    ///
    /// # Shapes
    /// - `input.tokens`: `[seeds, batch, seq]` -> `[seeds, batch, seq, n_outputs]`
    ///
    /// # Panics
    /// If the tokens do not have one batch per seed or the sequence is longer than the
    /// position tables.
    pub fn forward(&self, input: StackInput) -> Tensor<4> {
        let [seeds, batch, seq] = input.tokens.dims();
        let hidden = self.hidden(input); // [seeds, batch * seq, d_model]
        let n_outputs = self.output.d_out();
        self.head(hidden) // [seeds, batch * seq, n_outputs]
            .reshape([seeds, batch, seq, n_outputs])
    }

    /// Every seed's logits at its own positions `rows` only (flat positions `b * seq + s`
    /// of its batch; a seed with fewer repeats one, which its loss weighs 0): the output
    /// layer applied there alone, as [`Encoder::forward_at`] does for one model.
    ///
    /// # Shapes
    /// - `input.tokens`: `[seeds, batch, seq]`; `rows`: `[seeds, n]` -> `[seeds, n, n_outputs]`
    pub fn forward_at(&self, input: StackInput, rows: Tensor<2, Int>) -> Tensor<3> {
        let hidden = self.hidden(input); // [seeds, batch * seq, d_model]
        let [seeds, _, d_model] = hidden.dims();
        let [_, n] = rows.dims();
        let index = rows.unsqueeze_dim::<3>(2).expand([seeds, n, d_model]);
        self.head(hidden.gather(1, index)) // [seeds, n, n_outputs]
    }

    /// The output heads on what the final norms gave, through the prediction transforms
    /// where the model has them.
    ///
    /// # Shapes
    /// - `x`: `[seeds, rows, d_model]` -> `[seeds, rows, n_outputs]`
    fn head(&self, x: Tensor<3>) -> Tensor<3> {
        match &self.output_transform {
            Some(transform) => self.output.forward(transform.forward(x)),
            None => self.output.forward(x),
        }
    }

    /// The blocks and the final norms: every seed's final hidden states.
    ///
    /// # Shapes
    /// - `input.tokens`: `[seeds, batch, seq]` -> `[seeds, batch * seq, d_model]`
    fn hidden(&self, input: StackInput) -> Tensor<3> {
        let [seeds, batch, seq] = input.tokens.dims();
        assert_eq!(
            seeds, self.seeds,
            "the input has {seeds} batches, the stack {} seeds",
            self.seeds
        );
        assert!(
            seq <= self.max_seq_len,
            "sequence of length {seq} is longer than the model's max_seq_len ({})",
            self.max_seq_len
        );
        let device = input.tokens.device();
        let [_, vocab, d_model] = self.embedding.dims();

        // Seed s looks up rows s * vocab.. of the [seeds * vocab, d_model] table.
        let offsets = Tensor::<1, Int>::arange(0..seeds as i64, &device)
            .mul_scalar(vocab as i64)
            .reshape([seeds, 1, 1]);
        let ids = (input.tokens + offsets).reshape([seeds * batch, seq]);
        let table = self.embedding.val().reshape([seeds * vocab, d_model]);
        let mut x = burn::tensor::module::embedding(table, ids); // [seeds * batch, seq, d_model]
        if let Some(sinusoidal) = &self.sinusoidal {
            x = sinusoidal.forward(x);
        }
        let mut x = x.reshape([seeds, batch * seq, d_model]);
        if let Some(learned) = &self.learned_positions {
            let table = learned.val().narrow(1, 0, seq).unsqueeze_dim::<4>(1); // [seeds, 1, seq, d_model]
            x = (x.reshape([seeds, batch, seq, d_model]) + table).reshape([
                seeds,
                batch * seq,
                d_model,
            ]);
        }

        let mask = AttentionMask {
            pad: input.pad,
            attn: None,
        };
        let mut dropout = input.dropout.map(Vec::into_iter);
        for block in &self.blocks {
            let masks = dropout
                .as_mut()
                .map(|d| d.next().expect("a mask per block"));
            x = block.forward(x, batch, &mask, masks);
        }
        self.final_norm.forward(x)
    }
}

/// The first option of `config` the seed stack does not implement, by its config key; none
/// for headlab's own encoders. The stack runs every block through the encoder's own
/// arithmetic ([`crate::residual`], [`crate::attention_core`]), so every block option
/// (layouts, positions, norm placement and epsilon, activations, gating, biases, local
/// attention) is carried, and a masked LM's prediction transform; what it refuses are the
/// embedding options of imported checkpoints and post-norm blocks without a final norm,
/// which it would have to build as the encoder does.
pub fn unsupported_option(config: &EncoderConfig) -> Option<&'static str> {
    if config.token_types > 0 {
        Some("model.token_types")
    } else if config.embedding_norm {
        Some("model.embedding_norm")
    } else if !config.final_norm {
        Some("model.final_norm")
    } else if config.embedding_size.is_some() {
        Some("model.embedding_size")
    } else {
        None
    }
}

/// The ids of a module's float parameters in module order.
pub fn param_ids<M: Module>(module: &M) -> Vec<ParamId> {
    struct Ids(Vec<ParamId>);
    impl ModuleVisitor for Ids {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            self.0.push(param.id);
        }
    }
    let mut ids = Ids(Vec::new());
    module.visit(&mut ids);
    ids.0
}

/// The shapes of a module's float parameters in module order.
pub fn param_shapes<M: Module>(module: &M) -> Vec<Vec<usize>> {
    struct Shapes(Vec<Vec<usize>>);
    impl ModuleVisitor for Shapes {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            self.0.push(param.shape().as_slice().to_vec());
        }
    }
    let mut shapes = Shapes(Vec::new());
    module.visit(&mut shapes);
    shapes.0
}
