//! Burn modules for a small transformer encoder whose attention heads are first-class:
//! every head's weights, pattern and output can be read, compared and ablated.
//!
//! - [`attention`]: [`MultiHeadAttention`] in split, wide and narrow head layouts.
//! - [`heads`]: [`HeadId`], per-head weight views, QK / OV circuits, every head stacked.
//! - [`position`]: sinusoidal, learned, rotary or no positions.
//! - [`block`]: pre- or post-norm encoder block, its feed-forward plain or gated (GeGLU).
//! - `attention_core` and `residual`: the attention and block arithmetic that the encoder and
//!   the seed stack share (so the two cannot drift apart).
//! - [`activation`]: the feed-forward's GELU, exact or its tanh approximation (ALBERT's).
//! - [`encoder`]: the full [`Encoder`] and its config, the `[model]` section of a run.
//! - [`cache`]: the [`ActivationCache`] of one forward pass.
//! - [`init`]: random or symmetric (identical heads) initialisation.
//! - [`fused`]: fused CPU kernels (GELU, the attention core, layer norm, linear) through Burn's
//!   backend extensions.
//! - [`linear`]: linear layers over all positions as one matrix product.
//! - [`memory`]: the activations of one forward pass, the one memory estimate.
//! - [`seed_stack`]: S encoders of one configuration as one batched model (a seed axis).
//! - [`error`]: why a model configuration was refused, naming the config key.
//!
//! The crate picks no backend: build a model on any [`burn::prelude::Device`].

pub mod activation;
pub mod attention;
mod attention_core;
pub mod block;
pub mod cache;
pub mod encoder;
pub mod error;
pub mod fused;
pub mod heads;
pub mod init;
pub mod linear;
pub mod memory;
pub mod position;
mod residual;
pub mod seed_stack;

pub use activation::Activation;
pub use attention::{
    AttentionInput, AttentionMask, AttentionOutput, HeadLayout, HeadPatch, MultiHeadAttention,
    MultiHeadAttentionConfig, QkvChannel, QkvPatch,
};
pub use block::{EncoderBlock, EncoderBlockConfig, InputPatch, LayerInterventions, NormPlacement};
pub use cache::{ActivationCache, LayerCache};
pub use encoder::{
    Encoder, EncoderConfig, EncoderInput, EncoderIo, LocalAttention, OutputTransform,
};
pub use error::ConfigError;
pub use heads::{HeadId, HeadWeights};
pub use init::InitScheme;
pub use position::{AbsolutePositions, PositionalKind};
pub use seed_stack::{DropoutShape, LayerDropout, SeedStack, StackInput};
