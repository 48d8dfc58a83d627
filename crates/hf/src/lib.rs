//! Hugging Face's formats, read as headlab reads them: encoder checkpoints (`config.json` and
//! `model.safetensors`, as `save_pretrained` writes them) of the BERT, RoBERTa, XLM-RoBERTa,
//! DistilBERT, ELECTRA, ALBERT, ModernBERT, XLM-RoBERTa-XL and RoBERTa-PreLayerNorm families
//! ([`family`]) opened as headlab [`Encoder`]s; a `tokenizer.json` ([`tokenizer`]: text and
//! words to word pieces, with the `tokenizers` crate `transformers` runs); `headlab import`
//! ([`import`]: a checkpoint made into a run directory, through the `run` crate below this
//! one); and `headlab export` ([`export`]: a run written as a checkpoint).
//!
//! A checkpoint is headlab's encoder with its four options set (token types where the family
//! has them, an embedding norm, post-norm without a final norm, the checkpoint's norm
//! epsilon; and for ALBERT and ELECTRA-small factorised embeddings and ALBERT's
//! `gelu_new`), so an imported model runs every code path a trained one runs.
//!
//! The map, lowest first: [`error`] (what a checkpoint can be refused for); [`config`] reads
//! `config.json` as the family names its fields ([`modernbert`] ModernBERT's);
//! [`weights_file`] reads `model.safetensors` tensor by tensor; `tensors` fills the encoder
//! through the family's layout. A masked LM (`BertForMaskedLM`, `RobertaForMaskedLM`, ...)
//! keeps its prediction head: the transform (dense, GELU, norm) as the encoder's
//! `output_transform` and the decoder (the word embeddings, tied, and the prediction bias) as
//! its output layer, so its logits equal the reference's too. A base model has no head: its
//! output layer is the tied word embeddings alone, with no bias (the unembedding), and no
//! transform. [`tokenizer`] and [`import`] come last, then [`export`] (`headlab export`: a
//! run written as a checkpoint of the family that holds its blocks, the import's inverse).

pub mod config;
pub mod error;
pub mod family;
pub mod modernbert;
mod tensors;
pub mod weights_file;

pub mod export;
pub mod import;
pub mod tokenizer;

use std::path::Path;

use burn::prelude::*;
use model::Encoder;

pub use config::CheckpointConfig;
pub use error::{HfError, MAX_CHECKPOINT_BYTES};
pub use family::Family;
pub use weights_file::CheckpointTensors;

/// Opens the checkpoint in `dir` (`config.json`, `model.safetensors`) on `device`.
pub fn load_checkpoint(
    dir: &Path,
    device: &Device,
) -> Result<(Encoder, CheckpointConfig), HfError> {
    let config = CheckpointConfig::read(dir)?;
    let tensors = CheckpointTensors::read(dir, device)?;
    let (encoder, _) = encoder_from_tensors(dir, &config, &tensors, device)?;
    Ok((encoder, config))
}

/// The encoder `config` describes, with the weights of `tensors` (`dir/model.safetensors`,
/// [`CheckpointTensors::read`]), on `device`; and the tensors it did not read.
pub fn encoder_from_tensors(
    dir: &Path,
    config: &CheckpointConfig,
    tensors: &CheckpointTensors,
    device: &Device,
) -> Result<(Encoder, Vec<String>), HfError> {
    let weights = tensors::Weights::parse(tensors, config, device);
    let (encoder_config, io) = config.encoder();
    // Every parameter is filled from the checkpoint: none is drawn first.
    let mut encoder = encoder_config
        .init_to_fill(&io, device)
        .map_err(|e| HfError::Config {
            path: dir.join("config.json"),
            message: e.to_string(),
        })?;
    weights.fill(&mut encoder, config)?;
    let unread = weights.check_unread(config)?;
    Ok((encoder.no_grad(), unread))
}
