//! `headlab export RUN --out DIR`: a run written as a Hugging Face checkpoint that
//! `transformers` opens (`config.json`, `model.safetensors`, and the run's `tokenizer.json`
//! with a `tokenizer_config.json` where the model reads word pieces).
//!
//! The class is decided by the run's `[model]` options ([`target`]): BERT for post-norm
//! blocks, XLM-RoBERTa-XL for headlab's default pre-norm blocks, RoBERTa-PreLayerNorm for
//! pre-norm blocks after a normed embedding; an option none of them holds is refused by its
//! key before anything is written. A model trained on text with a prediction transform
//! (`model.output_transform = true`) goes with its masked-LM head, so `transformers` gives
//! its logits; any other as the base model, its output layer (a toy task's classes, or a
//! text model's bare unembedding) left out and said.
//!
//! `--out` follows the house's contract for output directories ([`run::out_dir`]): a new or
//! empty directory, or one an earlier export claimed; each file is written under a
//! temporary name and renamed.

pub mod checkpoint;
pub mod cli;
pub mod target;
pub mod written;

pub use checkpoint::{EXPORT_KIND, ExportError, Exported, FILES, export};
pub use target::{Target, Unexportable, target_of};
