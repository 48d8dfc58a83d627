//! `headlab import`: a Hugging Face BERT-family checkpoint directory (`config.json`,
//! `model.safetensors`, `tokenizer.json`) made into a headlab run directory, so that
//! `inspect` and `compare` read a real model as they read one headlab trained.
//!
//! The run holds what any run holds, written the same way (temporary name, then rename;
//! the manifest last): `run.json`, `config.toml` (the model's `[model]` options, the probe
//! task, and an `[import]` section naming the checkpoint and the SHA-256 of each file read),
//! `model.safetensors` in headlab's layout, and beside them the tokenizer (`tokenizer.json`,
//! copied) with its pieces one per line (`vocab.txt`, as BERT's own). Nothing is written
//! until the checkpoint has been read whole and checked.

pub mod checkpoint;
pub mod cli;

pub use checkpoint::{ImportError, ImportRequest, Imported, format_of, import, import_in_stages};
