//! `model.safetensors`: a finished run's weights, under their module paths (documented in the
//! book's docs/run-directory.md), loadable from Python with `safetensors`. Written like every other file of a run:
//! to a temporary name, then renamed, so a reader never finds half of it.

use std::path::{Path, PathBuf};

use burn::module::Module;
use burn::store::{ModuleSnapshot, SafetensorsStore};
use model::Encoder;

use crate::atomic::write_atomic;
use crate::manifest::FileRecord;

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
    let bytes = with_sorted_header(bytes).map_err(fail)?;
    write_atomic(path, &bytes).map_err(|e| fail(e.to_string()))
}

/// The same safetensors bytes with the JSON header's keys sorted. Burn writes the header's
/// `__metadata__` from a `HashMap`, whose order changes from one process to the next; sorted,
/// the same config and seed give a byte-identical `model.safetensors` (`sha256sum` agrees).
/// The header holds the same keys and values, so it keeps its length and every data offset.
fn with_sorted_header(mut bytes: Vec<u8>) -> Result<Vec<u8>, String> {
    let corrupt = |why: &str| format!("Burn wrote a safetensors file that {why}");
    let length: [u8; 8] = bytes
        .get(..8)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| corrupt("has no header length"))?;
    let end = usize::try_from(u64::from_le_bytes(length))
        .ok()
        .and_then(|n| n.checked_add(8))
        .filter(|&end| end <= bytes.len())
        .ok_or_else(|| corrupt("ends inside its header"))?;
    // serde_json's map is ordered by key (the crate's `preserve_order` feature is off).
    let header: serde_json::Value = serde_json::from_slice(&bytes[8..end])
        .map_err(|e| corrupt(&format!("has a bad header: {e}")))?;
    let sorted = serde_json::to_vec(&header).expect("a JSON value serializes");
    if sorted.len() > end - 8 {
        return Err(corrupt("has a header longer once sorted"));
    }
    // Safetensors pads its header with spaces; the sorted header is padded the same way.
    bytes[8..8 + sorted.len()].copy_from_slice(&sorted);
    bytes[8 + sorted.len()..end].fill(b' ');
    Ok(bytes)
}

/// Loads the weights at `path` into `model` (built from the run's config). Every tensor must
/// be there with the model's shape.
pub fn load(path: &Path, model: Encoder) -> Result<Encoder, WeightsError> {
    load_recorded(path, model).map(|(model, _)| model)
}

/// [`load`], with the size and SHA-256 of the very bytes loaded: what a report names as the
/// weights it measured, compared with the run's manifest without reading the file twice
/// (and without a moment between the check and the read in which the file could change).
pub fn load_recorded(
    path: &Path,
    mut model: Encoder,
) -> Result<(Encoder, FileRecord), WeightsError> {
    let fail = |message: String| WeightsError::Read {
        path: path.to_path_buf(),
        message,
    };
    let bytes = std::fs::read(path).map_err(|e| fail(e.to_string()))?;
    let record = FileRecord {
        bytes: bytes.len() as u64,
        sha256: crate::hash::sha256_hex(&bytes),
    };
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
    Ok((model, record))
}

#[cfg(test)]
mod tests {
    use burn::prelude::Device;

    use super::*;
    use crate::snapshot::tests::tiny_model;

    /// The same model written several times (each write a new `HashMap` with its own random
    /// order) gives the same bytes, and they load back into the model.
    #[test]
    fn the_same_weights_give_the_same_bytes() {
        let device = Device::flex();
        let encoder = tiny_model(0, &device);
        let dir = tempfile::tempdir().unwrap();
        let files: Vec<Vec<u8>> = (0..5)
            .map(|i| {
                let path = dir.path().join(format!("w{i}.safetensors"));
                write(&path, &encoder).unwrap();
                std::fs::read(&path).unwrap()
            })
            .collect();
        for other in &files[1..] {
            assert_eq!(other, &files[0]);
        }
        let header_end = 8 + u64::from_le_bytes(files[0][..8].try_into().unwrap()) as usize;
        let header = std::str::from_utf8(&files[0][8..header_end]).unwrap();
        assert!(
            header.starts_with(r#"{"__metadata__":{"format":"safetensors","producer":"burn""#),
            "{header}"
        );
        // Loaded into another model and written again: the same bytes.
        let loaded = load(&dir.path().join("w0.safetensors"), tiny_model(1, &device)).unwrap();
        let again = dir.path().join("again.safetensors");
        write(&again, &loaded).unwrap();
        assert_eq!(std::fs::read(&again).unwrap(), files[0]);
    }
}
