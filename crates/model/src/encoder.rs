//! The encoder: token embedding, positions, a stack of [`EncoderBlock`]s, a final norm and
//! a per-position output head. [`EncoderConfig`] is the `[model]` section of a headlab
//! config file.
//!
//! BERT's encoder is the same machine with four options set: token-type embeddings, a layer
//! norm on the embeddings, post-norm blocks without a final norm, and its checkpoints' norm
//! epsilon (`hf` sets them when it imports a Hugging Face checkpoint). The toy tasks
//! leave them at their defaults, so a trained and an imported model share every code path.

use burn::module::{ModuleVisitor, Param};
use burn::nn::{Embedding, EmbeddingConfig, LayerNorm, Linear, LinearConfig};
use burn::prelude::*;
use serde::{Deserialize, Serialize};

use crate::activation::Activation;
use crate::attention::{
    AttentionMask, DEFAULT_ROTARY_THETA, HeadLayout, HeadPatch, MultiHeadAttentionConfig,
};
use crate::block::{
    EncoderBlock, EncoderBlockConfig, InputPatch, LayerInterventions, NormPlacement, layer_norm_of,
    linear_of,
};
use crate::cache::{ActivationCache, LayerCache};
use crate::error::ConfigError;
use crate::init::InitScheme;
use crate::linear::linear_over_rows;
use crate::position::{AbsolutePositions, PositionalKind};

/// The architecture of an encoder: the `[model]` section of a config file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EncoderConfig {
    /// Width of the residual stream. Default: 64.
    pub d_model: usize,
    /// Number of encoder blocks. Default: 2.
    pub n_layers: usize,
    /// Attention heads per block. Default: 4.
    pub n_heads: usize,
    /// How heads share the width: split, wide or narrow. Default: split.
    pub head_layout: HeadLayout,
    /// Explicit head size; unset lets the layout decide. Default: unset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub d_head: Option<usize>,
    /// Hidden width of each feed-forward network. Default: 256 (4 x d_model).
    pub d_ff: usize,
    /// Dropout on attention probabilities and residual branches, in [0, 1). Default: 0,
    /// because the toy tasks have unlimited fresh data and the symmetry experiments need it off.
    pub dropout: f64,
    /// Layer norm placement: pre or post. Default: pre.
    pub norm: NormPlacement,
    /// Positional encoding: sinusoidal, learned, rotary or none. Default: sinusoidal.
    pub positional: PositionalKind,
    /// Head initialisation: random or symmetric. Default: random.
    pub init: InitScheme,
    /// Epsilon of every layer norm, in (0, 1). Default: 1e-5 (BERT's checkpoints: 1e-12).
    #[serde(skip_serializing_if = "is_default_epsilon")]
    pub norm_epsilon: f64,
    /// Token-type (segment) embeddings added to the input, as BERT's (2); 0 for none, at most
    /// [`MAX_TOKEN_TYPES`]. Default: 0.
    #[serde(skip_serializing_if = "is_zero")]
    pub token_types: usize,
    /// A layer norm on the sum of the embeddings, before the first block, as BERT's.
    /// Default: false.
    #[serde(skip_serializing_if = "is_false")]
    pub embedding_norm: bool,
    /// The layer norm before the output head. Default: true (BERT, post-norm, has none).
    #[serde(skip_serializing_if = "is_true")]
    pub final_norm: bool,
    /// A dense layer, GELU and a layer norm between the last hidden state and the output
    /// head: BERT's masked-LM prediction transform. Default: false.
    #[serde(skip_serializing_if = "is_false")]
    pub output_transform: bool,
    /// The width of the token, position and type embeddings where it is not `d_model`
    /// (factorised embeddings: ALBERT, ELECTRA-small): a linear projection maps them to
    /// `d_model` after the embedding norm, and a prediction transform maps `d_model` back
    /// to it before the output layer. Default: unset (the embeddings are `d_model` wide).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub embedding_size: Option<usize>,
    /// The feed-forward's (and a prediction transform's) activation: `gelu` (exact) or
    /// `gelu_tanh` (ALBERT's `gelu_new`). Default: gelu.
    #[serde(skip_serializing_if = "Activation::is_default")]
    pub activation: Activation,
    /// A gated feed-forward, GeGLU with the GELU (Shazeer 2020; ModernBERT's): its first
    /// linear is `2 * d_ff` wide and the activation of one half scales the other.
    /// Default: false.
    #[serde(skip_serializing_if = "is_false")]
    pub gated_feed_forward: bool,
    /// Whether the linear layers (the output layer aside) and the layer norms have biases.
    /// Default: true (ModernBERT has none).
    #[serde(skip_serializing_if = "is_true")]
    pub biases: bool,
    /// Whether the first block of a pre-norm model norms its attention's input. Default:
    /// true (ModernBERT's first block reads the embeddings, already normed, as they are).
    #[serde(skip_serializing_if = "is_true")]
    pub first_attention_norm: bool,
    /// The rotary positions' base (with `positional = "rotary"`): dimension pair `i` of a
    /// head turns by `position * theta^(-2i / d_head)`. Default: 10000.
    #[serde(skip_serializing_if = "is_default_theta")]
    pub rotary_theta: f64,
    /// Local attention in all but every `global_every`-th layer (ModernBERT's alternating
    /// sliding-window and global layers). Default: unset (every layer global).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local_attention: Option<LocalAttention>,
}

/// Local (sliding-window) attention in some layers: `[model.local_attention]`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LocalAttention {
    /// A local layer's query sees the keys at most `window / 2` positions away (ModernBERT's
    /// `local_attention`, 128 in its checkpoints).
    pub window: usize,
    /// Layers 0, `global_every`, `2 * global_every`, ... attend globally; the others
    /// locally (ModernBERT's `global_attn_every_n_layers`, 3).
    pub global_every: usize,
    /// The local layers' rotary base, where the model has rotary positions. Default: the
    /// global layers' (`model.rotary_theta`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rotary_theta: Option<f64>,
}

impl LocalAttention {
    /// Whether layer `layer` attends locally.
    pub fn is_local(&self, layer: usize) -> bool {
        !layer.is_multiple_of(self.global_every.max(1))
    }
}

/// The most token types [`EncoderConfig::token_types`] allocates a table for (BERT uses 2).
pub const MAX_TOKEN_TYPES: usize = 1024;

// Keys at their default stay out of a written config, so a toy run's config.toml does not
// list BERT's options.
fn is_default_epsilon(value: &f64) -> bool {
    *value == crate::block::LAYER_NORM_EPSILON
}
fn is_zero(value: &usize) -> bool {
    *value == 0
}
fn is_false(value: &bool) -> bool {
    !*value
}
fn is_true(value: &bool) -> bool {
    *value
}
fn is_default_theta(value: &f64) -> bool {
    *value == DEFAULT_ROTARY_THETA
}

impl Default for EncoderConfig {
    fn default() -> Self {
        Self {
            d_model: 64,
            n_layers: 2,
            n_heads: 4,
            head_layout: HeadLayout::Split,
            d_head: None,
            d_ff: 256,
            dropout: 0.0,
            norm: NormPlacement::Pre,
            positional: PositionalKind::Sinusoidal,
            init: InitScheme::Random,
            norm_epsilon: crate::block::LAYER_NORM_EPSILON,
            token_types: 0,
            embedding_norm: false,
            final_norm: true,
            output_transform: false,
            embedding_size: None,
            activation: Activation::Gelu,
            gated_feed_forward: false,
            biases: true,
            first_attention_norm: true,
            rotary_theta: DEFAULT_ROTARY_THETA,
            local_attention: None,
        }
    }
}

/// The sizes that come from the task rather than the architecture.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct EncoderIo {
    /// Number of input token ids.
    pub vocab_size: usize,
    /// Number of output classes per position.
    pub n_outputs: usize,
    /// Longest sequence the position tables cover.
    pub max_seq_len: usize,
}

impl EncoderConfig {
    /// The attention configuration of a global layer (every layer without
    /// `local_attention`).
    pub fn attention(&self, io: &EncoderIo) -> MultiHeadAttentionConfig {
        MultiHeadAttentionConfig::new(self.d_model, self.n_heads)
            .with_layout(self.head_layout)
            .with_d_head(self.d_head)
            .with_dropout(self.dropout)
            .with_rotary((self.positional == PositionalKind::Rotary).then_some(io.max_seq_len))
            .with_rotary_theta(self.rotary_theta)
            .with_bias(self.biases)
    }

    /// The attention configuration of layer `layer`: a global layer's, or a local layer's
    /// window and rotary base.
    pub fn attention_of_layer(&self, io: &EncoderIo, layer: usize) -> MultiHeadAttentionConfig {
        let global = self.attention(io);
        match self.local_attention {
            Some(local) if local.is_local(layer) => global
                .with_reach(Some(local.window / 2))
                .with_rotary_theta(local.rotary_theta.unwrap_or(self.rotary_theta)),
            _ => global,
        }
    }

    /// The configuration of block `layer`.
    fn block(&self, io: &EncoderIo, layer: usize) -> EncoderBlockConfig {
        EncoderBlockConfig {
            attention: self.attention_of_layer(io, layer),
            d_ff: self.d_ff,
            dropout: self.dropout,
            norm: self.norm,
            norm_epsilon: self.norm_epsilon,
            activation: self.activation,
            gated: self.gated_feed_forward,
            attention_norm: layer > 0 || self.first_attention_norm,
            bias: self.biases,
        }
    }

    /// The width of the embeddings: `embedding_size` where set, else `d_model`.
    pub fn embedding_width(&self) -> usize {
        self.embedding_size.unwrap_or(self.d_model)
    }

    /// The head size the layout resolves to.
    pub fn resolved_d_head(&self) -> usize {
        MultiHeadAttentionConfig::new(self.d_model, self.n_heads)
            .with_layout(self.head_layout)
            .with_d_head(self.d_head)
            .resolved_d_head()
    }

    /// Checks every size, divisibility and range, with messages naming the config key.
    pub fn validate(&self, io: &EncoderIo) -> Result<(), ConfigError> {
        for (field, value) in [
            ("model.n_layers", self.n_layers),
            ("model.d_ff", self.d_ff),
            ("the task's vocabulary size", io.vocab_size),
            ("the task's number of output classes", io.n_outputs),
            ("the task's sequence length", io.max_seq_len),
        ] {
            if value == 0 {
                return Err(ConfigError::ZeroSize { field });
            }
        }
        self.attention(io).validate()?;
        if !(self.norm_epsilon > 0.0 && self.norm_epsilon < 1.0) {
            return Err(ConfigError::OutOfRange {
                field: "model.norm_epsilon",
                value: crate::error::show_value(self.norm_epsilon),
                accepted: "above 0 and below 1 (1e-5 by default, 1e-12 in BERT)",
            });
        }
        if self.token_types > MAX_TOKEN_TYPES {
            return Err(ConfigError::OutOfRange {
                field: "model.token_types",
                value: self.token_types.to_string(),
                accepted: "0 (none) to 1024 (BERT uses 2)",
            });
        }
        if self.embedding_size == Some(0) {
            return Err(ConfigError::ZeroSize {
                field: "model.embedding_size",
            });
        }
        if self.positional == PositionalKind::Sinusoidal
            && !self.embedding_width().is_multiple_of(2)
        {
            return Err(ConfigError::OddSinusoidalWidth {
                d_model: self.d_model,
            });
        }
        self.validate_modern_options(io)
    }

    /// ModernBERT's options: a local window and its rotary base, an unnormed first
    /// attention (pre-norm only).
    fn validate_modern_options(&self, io: &EncoderIo) -> Result<(), ConfigError> {
        if let Some(local) = self.local_attention {
            if local.window < 2 {
                return Err(ConfigError::OutOfRange {
                    field: "model.local_attention.window",
                    value: local.window.to_string(),
                    accepted: "2 or more (a query sees the keys window / 2 positions away)",
                });
            }
            if local.global_every == 0 {
                return Err(ConfigError::ZeroSize {
                    field: "model.local_attention.global_every",
                });
            }
            self.attention_of_layer(io, 1).validate()?;
        }
        if !self.first_attention_norm && self.norm == NormPlacement::Post {
            return Err(ConfigError::OutOfRange {
                field: "model.first_attention_norm",
                value: "false".into(),
                accepted: "true with post-norm blocks, whose attention sum is always normed",
            });
        }
        Ok(())
    }

    /// Builds the encoder with fresh weights drawn from the device's RNG (seed it first with
    /// `device.seed(..)` for reproducible weights).
    pub fn init(&self, io: &EncoderIo, device: &Device) -> Result<Encoder, ConfigError> {
        let encoder = self.init_to_fill(io, device)?;
        // Burn draws a parameter's initial values when it is first read, from the device's
        // RNG at that moment. Read every one now, in module order: otherwise the weights
        // would depend on what touches the model first (a snapshot reading the attention
        // before the first forward pass reads the embedding gave another init).
        encoder.visit(&mut MaterializeParams);
        Ok(encoder)
    }

    /// Builds the encoder without drawing its weights, for a caller that replaces every
    /// parameter (an import): nothing is allocated for values about to be dropped (a
    /// base-size checkpoint's 500 MB). A parameter left unreplaced is drawn when first read.
    pub fn init_to_fill(&self, io: &EncoderIo, device: &Device) -> Result<Encoder, ConfigError> {
        self.validate(io)?;
        let layer_norm = |width| layer_norm_of(width, self.norm_epsilon, self.biases, device);
        let linear = |d_in, d_out| linear_of(d_in, d_out, self.biases, device);
        let (d_model, width) = (self.d_model, self.embedding_width());
        // What the output layer reads: the prediction transform's output, as wide as the
        // embeddings (tied to them), or the last hidden state.
        let read_width = match self.output_transform {
            true => width,
            false => d_model,
        };
        let blocks = (0..self.n_layers)
            .map(|layer| {
                self.block(io, layer).init(device).map(|mut block| {
                    if self.init == InitScheme::Symmetric {
                        block.attention = block.attention.tie_heads();
                    }
                    block
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let encoder = Encoder {
            embedding: EmbeddingConfig::new(io.vocab_size, width).init(device),
            positions: AbsolutePositions::new(self.positional, io.max_seq_len, width, device),
            token_types: (self.token_types > 0)
                .then(|| EmbeddingConfig::new(self.token_types, width).init(device)),
            embedding_norm: self.embedding_norm.then(|| layer_norm(width)),
            embedding_projection: self.embedding_size.map(|_| linear(width, d_model)),
            blocks,
            final_norm: self.final_norm.then(|| layer_norm(d_model)),
            output_transform: self.output_transform.then(|| OutputTransform {
                dense: linear(d_model, width),
                norm: layer_norm(width),
            }),
            output: LinearConfig::new(read_width, io.n_outputs).init(device),
            max_seq_len: io.max_seq_len,
            norm_epsilon: self.norm_epsilon,
            activation: self.activation,
        };
        Ok(encoder)
    }
}

/// Reads every float parameter once, which draws the lazily initialised ones.
struct MaterializeParams;

impl ModuleVisitor for MaterializeParams {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let _ = param.val();
    }
}

/// A transformer encoder with a classifier at every position.
#[derive(Module, Debug)]
pub struct Encoder {
    /// Token embedding `[vocab_size, d_model]`.
    pub embedding: Embedding,
    /// Absolute positions (sinusoidal or learned); rotary lives in the attention layers.
    pub positions: AbsolutePositions,
    /// Token-type embeddings `[token_types, d_model]`, added to the input (BERT's segments).
    pub token_types: Option<Embedding>,
    /// Norm of the embeddings' sum, before the first block (BERT's).
    pub embedding_norm: Option<LayerNorm>,
    /// `[embedding_size, d_model]`: factorised embeddings' projection to the residual
    /// stream, after the embedding norm (ALBERT's, ELECTRA-small's); none where the
    /// embeddings are `d_model` wide.
    pub embedding_projection: Option<Linear>,
    /// The blocks, input first.
    pub blocks: Vec<EncoderBlock>,
    /// Norm before the output head (none in BERT).
    pub final_norm: Option<LayerNorm>,
    /// BERT's masked-LM prediction transform, between the last hidden state and the head.
    pub output_transform: Option<OutputTransform>,
    /// Output head `[d_model, n_outputs]` (`[embedding_size, n_outputs]` after a
    /// factorised model's prediction transform), applied at every position.
    pub output: Linear,
    /// Longest sequence the position tables cover.
    pub max_seq_len: usize,
    /// Epsilon of every layer norm.
    #[module(skip)]
    pub norm_epsilon: f64,
    /// The prediction transform's activation (the feed-forward's).
    #[module(skip)]
    pub activation: Activation,
}

/// BERT's masked-LM prediction transform: `norm(gelu(dense(x)))`.
#[derive(Module, Debug)]
pub struct OutputTransform {
    /// `[d_model, embedding width]`.
    pub dense: Linear,
    /// The norm after the GELU.
    pub norm: LayerNorm,
}

/// Input of the encoder's forward passes.
#[derive(Debug, Clone)]
pub struct EncoderInput {
    /// `[batch, seq]` token ids.
    pub tokens: Tensor<2, Int>,
    /// `[batch, seq]` token types (segments), for a model with token-type embeddings; none
    /// reads as type 0 everywhere, as in BERT.
    pub token_types: Option<Tensor<2, Int>>,
    /// Keys to ignore, shared by every layer.
    pub mask: AttentionMask,
    /// `[n_layers, n_heads]`: 1 keeps a head, 0 ablates it.
    pub head_mask: Option<Tensor<2>>,
    /// Per layer, heads' outputs replaced ([`HeadPatch`]); empty or shorter than the model
    /// for layers without one.
    pub head_patches: Vec<Option<HeadPatch>>,
    /// Per layer, heads' inputs replaced ([`InputPatch`]); empty or shorter than the model
    /// for layers without one.
    pub input_patches: Vec<Option<InputPatch>>,
}

impl EncoderInput {
    /// Tokens `[batch, seq]`, nothing masked.
    pub fn new(tokens: Tensor<2, Int>) -> Self {
        Self {
            tokens,
            token_types: None,
            mask: AttentionMask::default(),
            head_mask: None,
            head_patches: Vec::new(),
            input_patches: Vec::new(),
        }
    }

    /// Sets the token types, `[batch, seq]`.
    pub fn token_types(mut self, token_types: Tensor<2, Int>) -> Self {
        self.token_types = Some(token_types);
        self
    }

    /// Sets the key masks.
    pub fn mask(mut self, mask: AttentionMask) -> Self {
        self.mask = mask;
        self
    }

    /// Sets the head mask, `[n_layers, n_heads]`.
    pub fn head_mask(mut self, head_mask: Tensor<2>) -> Self {
        self.head_mask = Some(head_mask);
        self
    }

    /// Patches the heads of layer `layer` ([`HeadPatch`]), replacing any patch it had.
    pub fn head_patch(mut self, layer: usize, patch: HeadPatch) -> Self {
        if self.head_patches.len() <= layer {
            self.head_patches.resize(layer + 1, None);
        }
        self.head_patches[layer] = Some(patch);
        self
    }

    /// Patches the inputs of layer `layer` ([`InputPatch`]), replacing any it had.
    pub fn input_patch(mut self, layer: usize, patch: InputPatch) -> Self {
        if self.input_patches.len() <= layer {
            self.input_patches.resize(layer + 1, None);
        }
        self.input_patches[layer] = Some(patch);
        self
    }
}

impl Encoder {
    /// Logits for every position: the training path.
    ///
    /// # Shapes
    /// - `tokens`: `[batch, seq]` -> `[batch, seq, n_outputs]`
    pub fn forward(&self, tokens: Tensor<2, Int>) -> Tensor<3> {
        self.forward_pass(EncoderInput::new(tokens), false).0
    }

    /// Logits with masks and a head mask.
    ///
    /// # Shapes
    /// - `input.tokens`: `[batch, seq]` -> `[batch, seq, n_outputs]`
    pub fn forward_input(&self, input: EncoderInput) -> Tensor<3> {
        self.forward_pass(input, false).0
    }

    /// Logits and the [`ActivationCache`] of the pass.
    ///
    /// # Shapes
    /// - `input.tokens`: `[batch, seq]` -> `[batch, seq, n_outputs]`
    pub fn forward_with_cache(&self, input: EncoderInput) -> (Tensor<3>, ActivationCache) {
        let (logits, cache) = self.forward_pass(input, true);
        (logits, cache.expect("cache was requested"))
    }

    /// Logits at some positions only: `rows` are flat positions (`b * seq + s`) of the
    /// batch, and the output layer (the costliest matrix of a model with a large
    /// vocabulary) is applied to their final hidden states alone. The training path of a
    /// masked LM, where about 15% of the positions are scored.
    ///
    /// # Shapes
    /// - `input.tokens`: `[batch, seq]`; `rows`: `[n]` -> `[n, n_outputs]`
    pub fn forward_at(&self, input: EncoderInput, rows: Tensor<1, Int>) -> Tensor<2> {
        let (final_hidden, _) = self.hidden_pass(input, false);
        let [batch, seq, width] = final_hidden.dims();
        let [n] = rows.dims();
        let picked = final_hidden
            .reshape([batch * seq, width])
            .select(0, rows)
            .reshape([1, n, width]); // [1, n, d_model]
        let logits = self.head(picked); // [1, n, n_outputs]
        let n_outputs = logits.dims()[2];
        logits.reshape([n, n_outputs])
    }

    /// Logits of a residual stream read as if it were the last block's output: the final
    /// norm, then the output layer. On the last block's output these are the model's own
    /// logits; on an earlier one, the logit lens.
    ///
    /// # Shapes
    /// - `residual`: `[batch, seq, d_model]` -> `[batch, seq, n_outputs]`
    pub fn unembed(&self, residual: Tensor<3>) -> Tensor<3> {
        self.head(self.final_norm(residual))
    }

    /// The output head on what the final norm gave: through the prediction transform where
    /// the model has one.
    ///
    /// # Shapes
    /// - `x`: `[batch, seq, d_model]` -> `[batch, seq, n_outputs]`
    fn head(&self, x: Tensor<3>) -> Tensor<3> {
        linear_over_rows(&self.output, self.transform(x))
    }

    /// The prediction transform (dense, GELU, norm: a masked-LM checkpoint's) on what the
    /// final norm gave, or `x` itself in a model without one: what the output layer reads.
    ///
    /// # Shapes
    /// - `x`: `[batch, seq, d_model]` -> `[batch, seq, width]` (the embeddings' width with
    ///   a transform, `d_model` without)
    pub fn transform(&self, x: Tensor<3>) -> Tensor<3> {
        match &self.output_transform {
            Some(transform) => crate::block::norm(
                &transform.norm,
                self.activation
                    .forward(linear_over_rows(&transform.dense, x)),
                self.norm_epsilon,
            ),
            None => x,
        }
    }

    /// The final norm of `x`, or `x` itself in a model without one.
    ///
    /// # Shapes
    /// - `x`: `[batch, seq, d_model]` -> `[batch, seq, d_model]`
    pub fn final_norm(&self, x: Tensor<3>) -> Tensor<3> {
        match &self.final_norm {
            Some(norm) => crate::block::norm(norm, x, self.norm_epsilon),
            None => x,
        }
    }

    /// The input of the first block: token embeddings, positions, token types (type 0
    /// where `token_types` is none), and the embedding norm where the model has them.
    ///
    /// # Shapes
    /// - `tokens`, `token_types`: `[batch, seq]` -> `[batch, seq, d_model]`
    pub fn embed(&self, tokens: Tensor<2, Int>, token_types: Option<Tensor<2, Int>>) -> Tensor<3> {
        let mut x = self
            .positions
            .forward(self.embedding.forward(tokens.clone())); // [batch, seq, width]
        if let Some(table) = &self.token_types {
            let types = token_types.unwrap_or_else(|| tokens.zeros_like()); // [batch, seq]
            x = x + table.forward(types);
        }
        if let Some(norm) = &self.embedding_norm {
            x = crate::block::norm(norm, x, self.norm_epsilon);
        }
        match &self.embedding_projection {
            Some(projection) => linear_over_rows(projection, x), // [batch, seq, d_model]
            None => x,
        }
    }

    /// The token embeddings as the residual stream receives them, `[vocab_size, d_model]`:
    /// the embedding table, through a factorised model's projection (its weight only: the
    /// projection's bias and the embedding norm are no token's).
    pub fn token_embeddings(&self) -> Tensor<2> {
        let table = self.embedding.weight.val(); // [vocab, width]
        match &self.embedding_projection {
            Some(projection) => table.matmul(projection.weight.val()), // [vocab, d_model]
            None => table,
        }
    }

    /// The output layer as read from the residual stream, `[d_model, n_outputs]`: its
    /// weight, or after a factorised model's prediction transform (which maps `d_model` to
    /// the embeddings' width) the weight read back through the embedding projection,
    /// `P^T W`. For tied embeddings that is [`Self::token_embeddings`] transposed.
    pub fn unembedding(&self) -> Tensor<2> {
        let weight = self.output.weight.val(); // [read width, n_outputs]
        match &self.embedding_projection {
            Some(projection) if self.output_transform.is_some() => {
                projection.weight.val().transpose().matmul(weight) // [d_model, n_outputs]
            }
            _ => weight,
        }
    }

    /// Number of attention heads per layer.
    pub fn n_heads(&self) -> usize {
        self.blocks.first().map_or(0, |b| b.attention.n_heads)
    }

    /// Size of each head.
    pub fn d_head(&self) -> usize {
        self.blocks.first().map_or(0, |b| b.attention.d_head)
    }

    /// One forward pass: the logits, and the activations when `capture` is set.
    fn forward_pass(
        &self,
        input: EncoderInput,
        capture: bool,
    ) -> (Tensor<3>, Option<ActivationCache>) {
        let (final_hidden, captured) = self.hidden_pass(input, capture);
        let logits = self.head(final_hidden.clone()); // [batch, seq, n_outputs]
        let cache = captured.map(|(embeddings, layers)| ActivationCache {
            embeddings,
            layers,
            final_hidden,
        });
        (logits, cache)
    }

    /// The blocks and the final norm: the final hidden states `[batch, seq, d_model]`, and
    /// with `capture` the embeddings and every layer's activations.
    fn hidden_pass(
        &self,
        input: EncoderInput,
        capture: bool,
    ) -> (Tensor<3>, Option<(Tensor<3>, Vec<LayerCache>)>) {
        let [_, seq] = input.tokens.dims();
        assert!(
            seq <= self.max_seq_len,
            "sequence of length {seq} is longer than the model's max_seq_len ({})",
            self.max_seq_len
        );
        let n_layers = self.n_layers();
        if let Some(head_mask) = &input.head_mask {
            assert_eq!(
                head_mask.dims(),
                [n_layers, self.n_heads()],
                "head mask must be [n_layers, n_heads]"
            );
        }

        let embeddings = self.embed(input.tokens, input.token_types); // [batch, seq, d_model]
        let mut x = embeddings.clone();
        let mut layers = Vec::with_capacity(if capture { n_layers } else { 0 });
        for (index, block) in self.blocks.iter().enumerate() {
            let head_mask = input.head_mask.as_ref().map(|m| {
                m.clone().narrow(0, index, 1).reshape([self.n_heads()]) // [n_heads]
            });
            let interventions = LayerInterventions {
                head_mask,
                head_patch: input.head_patches.get(index).cloned().flatten(),
                input_patch: input.input_patches.get(index).cloned().flatten(),
            };
            let (out, layer) = block.forward(x, &input.mask, interventions, capture);
            x = out;
            layers.extend(layer);
        }
        (self.final_norm(x), capture.then_some((embeddings, layers)))
    }
}
