//! Why a checkpoint could not be opened, and the bound on what is read.

use std::path::PathBuf;

/// Why a checkpoint could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum HfError {
    /// A file could not be read.
    #[error("cannot read {path}: {error}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why. Not a `source`: the message already says it, and `error: {e:#}` in main would
        /// print it twice.
        error: std::io::Error,
    },
    /// `config.json` is not a config headlab can open.
    #[error("{path}: {message}")]
    Config {
        /// The config file.
        path: PathBuf,
        /// What is wrong, and what would be accepted.
        message: String,
    },
    /// The weights are not what the config describes.
    #[error("{path}: {message}")]
    Weights {
        /// The weights file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

/// The largest `model.safetensors` read, checked before reading it: 4 GiB, room for
/// BERT-large (1.3 GB in float32) and then some. Also the bound on the parameters
/// `config.json` describes, checked before the model is allocated.
pub const MAX_CHECKPOINT_BYTES: u64 = 4 << 30;
