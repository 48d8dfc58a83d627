//! `model.safetensors`: a finished run's weights, under their module paths (documented in the
//! book's docs/run-directory.md), loadable from Python with `safetensors`. Written like every other file of a run:
//! to a temporary name, then renamed, so a reader never finds half of it.

use std::path::{Path, PathBuf};

use std::collections::BTreeMap;

use burn::module::Module;
use burn::store::burn_pack::Tensor as PackTensor;
use burn::store::{ModuleSnapshot, SafetensorsStore};
use burn::tensor::DType;
use model::Encoder;

use crate::atomic::write_atomic_streamed;
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

/// Writes `model`'s weights (inference copy) to `path`, streamed: one tensor's bytes at a
/// time, never the whole file in memory (a base-size model is 500 MB). The bytes are what
/// Burn's `SafetensorsStore` writes, with the header's keys sorted ([`header`]).
pub fn write(path: &Path, model: &Encoder) -> Result<(), WeightsError> {
    let fail = |message: String| WeightsError::Write {
        path: path.to_path_buf(),
        message,
    };
    // Lazy: each tensor's bytes are read from the model when it is written.
    let mut tensors = model.valid().collect(None, None, false);
    tensors.sort_by(|a, b| a.name.cmp(&b.name));
    let header = header(&tensors).map_err(fail)?;
    write_atomic_streamed(path, |out| {
        out.write_all(&(header.len() as u64).to_le_bytes())?;
        out.write_all(&header)?;
        for tensor in &tensors {
            let bytes = tensor.to_bytes().map_err(|e| {
                std::io::Error::other(format!("cannot read {} from the model: {e:?}", tensor.name))
            })?;
            out.write_all(&bytes)?;
        }
        Ok(())
    })
    .map_err(|e| fail(e.to_string()))
}

/// The safetensors header of `tensors` (sorted by name, each one's data after the one
/// before, as `safetensors` lays out tensors of one dtype), padded with spaces to a multiple
/// of 8 bytes, with Burn's metadata, every key sorted. Burn writes the header's
/// `__metadata__` from a `HashMap`, whose order changes from one process to the next; sorted,
/// the same config and seed give a byte-identical `model.safetensors` (`sha256sum` agrees).
fn header(tensors: &[PackTensor]) -> Result<Vec<u8>, String> {
    let metadata: BTreeMap<String, String> =
        SafetensorsStore::default_metadata().into_iter().collect();
    let mut entries = serde_json::Map::new();
    entries.insert("__metadata__".into(), serde_json::json!(metadata));
    let mut offset = 0;
    for tensor in tensors {
        if tensor.dtype != DType::F32 {
            return Err(format!(
                "{} is {:?}; headlab writes float32 weights",
                tensor.name, tensor.dtype
            ));
        }
        let end = offset + tensor.byte_len();
        entries.insert(
            tensor.name.clone(),
            serde_json::json!({
                "data_offsets": [offset, end],
                "dtype": "F32",
                "shape": tensor.shape.as_slice(),
            }),
        );
        offset = end;
    }
    // serde_json's map is ordered by key (the crate's `preserve_order` feature is off).
    let mut bytes = serde_json::to_vec(&serde_json::Value::Object(entries))
        .map_err(|e| format!("cannot write the header: {e}"))?;
    bytes.resize(bytes.len().next_multiple_of(8), b' ');
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

    /// The streamed file is byte for byte what Burn's `SafetensorsStore` builds in memory,
    /// its header's keys sorted (the writer before streaming, kept here as the reference);
    /// and the atomic writer remembers the size and hash of exactly those bytes.
    #[test]
    fn the_streamed_file_is_the_one_burn_builds_in_memory() {
        let device = Device::flex();
        let encoder = tiny_model(3, &device);
        let mut store = SafetensorsStore::from_bytes(None);
        encoder.valid().save_into(&mut store).unwrap();
        let reference = sorted_header(store.get_bytes().unwrap());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("model.safetensors");
        write(&path, &encoder).unwrap();
        let written = std::fs::read(&path).unwrap();
        assert_eq!(written.len(), reference.len());
        assert!(
            written == reference,
            "the streamed file differs from Burn's"
        );
        let remembered = crate::atomic::written(&path).unwrap();
        assert_eq!(
            remembered,
            (written.len() as u64, crate::hash::sha256_hex(&written))
        );
    }

    /// Burn's bytes with the header's keys sorted: the header parsed and written again in
    /// place, padded with spaces as before.
    fn sorted_header(mut bytes: Vec<u8>) -> Vec<u8> {
        let end = 8 + u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        let header: serde_json::Value = serde_json::from_slice(&bytes[8..end]).unwrap();
        let sorted = serde_json::to_vec(&header).unwrap();
        bytes[8..8 + sorted.len()].copy_from_slice(&sorted);
        bytes[8 + sorted.len()..end].fill(b' ');
        bytes
    }
}
