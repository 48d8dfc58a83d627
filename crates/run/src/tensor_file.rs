//! Named f32 tensors in a safetensors file: the format every analysis output of headlab
//! uses, because numpy (`safetensors.numpy.load_file`) and PyTorch read it directly. Token
//! ids are written as I64 tensors ([`HostIds`]), whole numbers as a reader expects them.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use burn::prelude::*;
use safetensors::{Dtype, SafeTensors, tensor::TensorView};

use crate::atomic::write_atomic;

/// A host-side f32 tensor.
#[derive(Debug, Clone, PartialEq)]
pub struct HostTensor {
    /// Dimensions.
    pub shape: Vec<usize>,
    /// Row-major values.
    pub values: Vec<f32>,
}

impl HostTensor {
    /// Copies a device tensor to the host.
    pub fn of<const D: usize>(tensor: Tensor<D>) -> Self {
        let shape = tensor.dims().to_vec();
        let values = tensor
            .into_data()
            .try_into_vec_as::<f32>()
            .expect("converted to f32");
        Self { shape, values }
    }

    /// Copies an integer device tensor to the host (as f32, exact below 2^24).
    pub fn of_int<const D: usize>(tensor: Tensor<D, Int>) -> Self {
        Self::of(tensor.float())
    }

    /// Moves the tensor onto a device.
    pub fn to_device<const D: usize>(&self, device: &Device) -> Tensor<D> {
        Tensor::from_data(
            TensorData::new(self.values.clone(), self.shape.clone()),
            device,
        )
    }
}

/// A host-side tensor of whole numbers (token ids), written as I64.
#[derive(Debug, Clone, PartialEq)]
pub struct HostIds {
    /// Dimensions.
    pub shape: Vec<usize>,
    /// Row-major values.
    pub values: Vec<i64>,
}

impl HostIds {
    /// Copies an integer device tensor to the host.
    pub fn of<const D: usize>(tensor: Tensor<D, Int>) -> Self {
        let shape = tensor.dims().to_vec();
        let values = tensor
            .into_data()
            .try_into_vec_as::<i64>()
            .expect("converted to i64");
        Self { shape, values }
    }
}

/// A tensor file that could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum TensorFileError {
    /// I/O failure.
    #[error("cannot {action} {path}: {error}")]
    Io {
        /// `read` or `write`.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// Why. Not a `source`: the message says it, and `error: {e:#}` in main would print
        /// it twice (a full disk's "No space left on device" was).
        error: std::io::Error,
    },
    /// Not a valid safetensors file (truncated, corrupt, or not f32).
    #[error("{path} is not a valid safetensors file ({message}); it may be truncated or corrupt")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What the reader said.
        message: String,
    },
}

/// Writes `tensors` to `path` atomically, with optional string metadata.
pub fn write_tensors(
    path: &Path,
    tensors: &BTreeMap<String, HostTensor>,
    metadata: Option<HashMap<String, String>>,
) -> Result<(), TensorFileError> {
    write_tensors_and_ids(path, tensors, &BTreeMap::new(), metadata)
}

/// [`write_tensors`] with integer tensors `ids` beside the f32 ones (their names apart).
pub fn write_tensors_and_ids(
    path: &Path,
    tensors: &BTreeMap<String, HostTensor>,
    ids: &BTreeMap<String, HostIds>,
    metadata: Option<HashMap<String, String>>,
) -> Result<(), TensorFileError> {
    let floats = tensors.iter().map(|(name, t)| {
        let bytes = t.values.iter().flat_map(|v| v.to_le_bytes()).collect();
        (name.clone(), Dtype::F32, bytes, t.shape.clone())
    });
    let integers = ids.iter().map(|(name, t)| {
        let bytes = t.values.iter().flat_map(|v| v.to_le_bytes()).collect();
        (name.clone(), Dtype::I64, bytes, t.shape.clone())
    });
    let bytes: Vec<(String, Dtype, Vec<u8>, Vec<usize>)> = floats.chain(integers).collect();
    let views = bytes.iter().map(|(name, dtype, data, shape)| {
        let view = TensorView::new(*dtype, shape.clone(), data).expect("sizes agree");
        (name.as_str(), view)
    });
    let encoded =
        safetensors::serialize(views, metadata).map_err(|e| TensorFileError::Corrupt {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
    write_atomic(path, &encoded).map_err(|error| TensorFileError::Io {
        action: "write",
        path: path.to_path_buf(),
        error,
    })
}

/// The values of an F32 tensor of a safetensors file (little-endian, row-major); the caller
/// has checked its dtype.
pub fn f32_values(view: &TensorView) -> Vec<f32> {
    f32_from_le_bytes(view.data())
}

/// Little-endian F32 bytes as values (a trailing partial value is dropped).
pub fn f32_from_le_bytes(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

/// Reads every tensor of a safetensors file of f32 tensors; an I64 tensor (token ids,
/// [`HostIds`]) is read as its values in f32, exact below 2^24.
pub fn read_tensors(path: &Path) -> Result<BTreeMap<String, HostTensor>, TensorFileError> {
    let bytes = std::fs::read(path).map_err(|error| TensorFileError::Io {
        action: "read",
        path: path.to_path_buf(),
        error,
    })?;
    let corrupt = |message: String| TensorFileError::Corrupt {
        path: path.to_path_buf(),
        message,
    };
    let file = SafeTensors::deserialize(&bytes).map_err(|e| corrupt(e.to_string()))?;
    let mut tensors = BTreeMap::new();
    for (name, view) in file.tensors() {
        let values = match view.dtype() {
            Dtype::F32 => f32_values(&view),
            Dtype::I64 => (view.data().chunks_exact(8))
                .map(|b| i64::from_le_bytes(b.try_into().expect("8 bytes")) as f32)
                .collect(),
            other => {
                return Err(corrupt(format!(
                    "tensor {name} is {other:?}, not F32 or I64"
                )));
            }
        };
        tensors.insert(
            name,
            HostTensor {
                shape: view.shape().to_vec(),
                values,
            },
        );
    }
    Ok(tensors)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A full disk's message once, as `headlab` prints an error's chain (`{e:#}`): it was
    /// "...safetensors: No space left on device (os error 28): No space left on device (os
    /// error 28)" (issue 67).
    #[test]
    fn a_full_disk_is_said_once() {
        let full = std::io::Error::from_raw_os_error(28);
        let error = TensorFileError::Io {
            action: "write",
            path: PathBuf::from("r/activations.safetensors"),
            error: full,
        };
        let printed = format!("{:#}", anyhow::Error::from(error));
        assert_eq!(printed.matches("os error 28").count(), 1, "{printed}");
        assert!(printed.starts_with("cannot write r/activations.safetensors: "));
    }

    #[test]
    fn tensors_round_trip_and_truncation_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.safetensors");
        let mut tensors = BTreeMap::new();
        tensors.insert(
            "a.b".to_string(),
            HostTensor {
                shape: vec![2, 3],
                values: vec![1.0, 2.0, 3.0, 4.0, 5.0, -6.5],
            },
        );
        write_tensors(&path, &tensors, None).unwrap();
        assert_eq!(read_tensors(&path).unwrap(), tensors);

        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 5]).unwrap();
        let err = read_tensors(&path).unwrap_err().to_string();
        assert!(err.contains("not a valid safetensors file"), "{err}");
    }

    /// Token ids are written as I64 beside f32 tensors and read back as their values.
    #[test]
    fn ids_are_written_as_whole_numbers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ids.safetensors");
        let ids = BTreeMap::from([(
            "tokens".to_string(),
            HostIds {
                shape: vec![2, 2],
                values: vec![0, 7, 16_000_000, 3],
            },
        )]);
        write_tensors_and_ids(&path, &BTreeMap::new(), &ids, None).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let file = SafeTensors::deserialize(&bytes).unwrap();
        assert_eq!(file.tensor("tokens").unwrap().dtype(), Dtype::I64);
        let read = read_tensors(&path).unwrap();
        assert_eq!(read["tokens"].values, [0.0, 7.0, 16_000_000.0, 3.0]);
    }
}
