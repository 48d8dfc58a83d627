//! `model.safetensors`: a finished run's weights, under their module paths (documented in the
//! README), loadable from Python with `safetensors`. Written like every other file of a run:
//! to a temporary name, then renamed, so a reader never finds half of it.

use std::path::{Path, PathBuf};

use burn::module::Module;
use burn::store::{ModuleSnapshot, SafetensorsStore};
use model::Encoder;

use crate::atomic::write_atomic;

/// Final weights that could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum WeightsError {
    /// Writing failed (disk full, read-only directory, ...).
    #[error("cannot write {path}: {message}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// The file is missing, unreadable, or does not fit the model the config describes.
    #[error("cannot load weights from {path}: {message}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
}

/// Writes `model`'s weights (inference copy) to `path`.
pub fn write(path: &Path, model: &Encoder) -> Result<(), WeightsError> {
    let fail = |message: String| WeightsError::Write {
        path: path.to_path_buf(),
        message,
    };
    let mut store = SafetensorsStore::from_bytes(None);
    model
        .valid()
        .save_into(&mut store)
        .map_err(|e| fail(format!("{e:?}")))?;
    let bytes = store.get_bytes().map_err(|e| fail(format!("{e:?}")))?;
    write_atomic(path, &bytes).map_err(|e| fail(e.to_string()))
}

/// Loads the weights at `path` into `model` (built from the run's config). Every tensor must
/// be there with the model's shape.
pub fn load(path: &Path, mut model: Encoder) -> Result<Encoder, WeightsError> {
    let fail = |message: String| WeightsError::Read {
        path: path.to_path_buf(),
        message,
    };
    let bytes = std::fs::read(path).map_err(|e| fail(e.to_string()))?;
    let mut store = SafetensorsStore::from_bytes(Some(bytes));
    let result = model
        .load_from(&mut store)
        .map_err(|e| fail(format!("{e}; the file may be truncated or corrupt")))?;
    if !result.missing.is_empty() || !result.errors.is_empty() {
        return Err(fail(format!(
            "it does not fit the model of the run's config: missing tensors {:?}, errors {:?}",
            result.missing, result.errors
        )));
    }
    Ok(model)
}
