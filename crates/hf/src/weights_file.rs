//! A checkpoint's `model.safetensors` read tensor by tensor, in the file's order, each
//! converted to a tensor as it is read: the bytes of the whole file are never held at once
//! (a base-size checkpoint is 500 MB, and the model made from it as much again), and the
//! SHA-256 recorded is of exactly the bytes the model is made from.
//!
//! The format (Hugging Face's safetensors): an 8-byte little-endian header length, a JSON
//! header naming each tensor's dtype, shape and `data_offsets` in the data that follows, and
//! the data. Read here with the checks `safetensors::SafeTensors::deserialize` makes of a
//! whole buffer: a header inside the file, tensors that tile the data exactly, an F32
//! tensor's bytes four per element.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use burn::prelude::*;
use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::error::{HfError, MAX_CHECKPOINT_BYTES};

/// The tensors of a checkpoint's `model.safetensors`, by their names in the file.
pub struct CheckpointTensors {
    entries: HashMap<String, Entry>,
    /// The file read.
    pub path: PathBuf,
    /// Its size in bytes.
    pub bytes: u64,
    /// The SHA-256 of the bytes read, lowercase hex.
    pub sha256: String,
}

/// One tensor as read: its values where they are finite float32, else why not.
pub(super) struct Entry {
    /// Its dtype as the header names it (`F32`, `F16`, `I64`, ...).
    pub dtype: String,
    /// Its shape.
    pub shape: Vec<usize>,
    /// Its values, or why they are not usable.
    pub values: Values,
}

/// What a tensor holds.
pub(super) enum Values {
    /// Finite float32 values, flat (`[n]`), row-major in `shape`.
    Finite(Box<Tensor<1>>),
    /// Float32 values of which `count` are NaN or infinite, the first at `first`.
    NonFinite { count: usize, first: usize },
    /// Another dtype, not converted.
    Other,
}

/// A header entry: `{"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}`.
#[derive(Deserialize)]
struct HeaderEntry {
    dtype: String,
    shape: Vec<usize>,
    data_offsets: (u64, u64),
}

/// The largest header read (safetensors' own bound).
const MAX_HEADER_BYTES: u64 = 100_000_000;

impl CheckpointTensors {
    /// Reads `dir/model.safetensors` onto `device`, refusing a file over
    /// [`MAX_CHECKPOINT_BYTES`] before reading it.
    pub fn read(dir: &Path, device: &Device) -> Result<Self, HfError> {
        let path = dir.join("model.safetensors");
        let io_error = |error| HfError::Io {
            path: path.clone(),
            error,
        };
        let (file, size) = run::small_file::open(&path, MAX_CHECKPOINT_BYTES).map_err(io_error)?;
        let mut reader = Reader {
            inner: BufReader::with_capacity(1 << 20, file),
            hasher: Sha256::new(),
            path: &path,
        };
        let invalid = |why: String| HfError::Weights {
            path: path.clone(),
            message: format!("not a valid safetensors file ({why}); it may be truncated"),
        };
        let header_len = u64::from_le_bytes(reader.bytes(8)?.try_into().expect("8 bytes"));
        if header_len > MAX_HEADER_BYTES || header_len > size.saturating_sub(8) {
            return Err(invalid(format!(
                "its header claims {header_len} bytes of a file of {size}"
            )));
        }
        let header = reader.bytes(header_len as usize)?;
        let mut header: BTreeMap<String, serde_json::Value> =
            serde_json::from_slice(&header).map_err(|e| invalid(format!("its header: {e}")))?;
        header.remove("__metadata__");
        let mut order = Vec::with_capacity(header.len());
        for (name, value) in header {
            let entry: HeaderEntry = serde_json::from_value(value)
                .map_err(|e| invalid(format!("its header's entry {name}: {e}")))?;
            order.push((name, entry));
        }
        order.sort_by_key(|(_, entry)| entry.data_offsets);
        check_tiling(&order, size - 8 - header_len).map_err(invalid)?;
        let mut entries = HashMap::with_capacity(order.len());
        for (name, header) in order {
            let (begin, end) = header.data_offsets;
            let bytes = reader.bytes((end - begin) as usize)?;
            let values = values(&header, bytes, device);
            entries.insert(
                name,
                Entry {
                    dtype: header.dtype,
                    shape: header.shape,
                    values,
                },
            );
        }
        Ok(Self {
            entries,
            bytes: size,
            sha256: run::hash::hex(&reader.hasher.finalize()),
            path,
        })
    }

    /// Every tensor's name in the file.
    pub(super) fn names(&self) -> impl Iterator<Item = &String> {
        self.entries.keys()
    }

    /// The tensor `name` (its full name in the file).
    pub(super) fn entry(&self, name: &str) -> Option<&Entry> {
        self.entries.get(name)
    }
}

/// Checks that the tensors, sorted by offset, tile the `data_len` bytes of data exactly and
/// that each float32 tensor's bytes are four per element of its shape.
fn check_tiling(order: &[(String, HeaderEntry)], data_len: u64) -> Result<(), String> {
    let mut next = 0u64;
    for (name, entry) in order {
        let (begin, end) = entry.data_offsets;
        if begin != next || end < begin {
            return Err(format!(
                "{name}'s data is at {begin}..{end}, where the tensor before it ends at {next}"
            ));
        }
        let elements = entry
            .shape
            .iter()
            .try_fold(1u64, |n, &d| n.checked_mul(d as u64));
        if entry.dtype == "F32" && elements.and_then(|n| n.checked_mul(4)) != Some(end - begin) {
            return Err(format!(
                "{name} has shape {:?} but {} bytes of float32 data",
                entry.shape,
                end - begin
            ));
        }
        next = end;
    }
    match next == data_len {
        true => Ok(()),
        false => Err(format!(
            "its tensors' data ends at byte {next} of the {data_len} after the header"
        )),
    }
}

/// A float32 tensor's bytes as values; another dtype's left unconverted.
fn values(header: &HeaderEntry, bytes: Vec<u8>, device: &Device) -> Values {
    if header.dtype != "F32" {
        return Values::Other;
    }
    let values = run::tensor_file::f32_from_le_bytes(&bytes);
    drop(bytes);
    if let Some(first) = values.iter().position(|v| !v.is_finite()) {
        let count = values[first..].iter().filter(|v| !v.is_finite()).count();
        return Values::NonFinite { count, first };
    }
    let n = values.len();
    Values::Finite(Box::new(Tensor::from_data(
        TensorData::new(values, [n]),
        device,
    )))
}

/// The file, read in order and hashed as it is read.
struct Reader<'a> {
    inner: BufReader<std::fs::File>,
    hasher: Sha256,
    path: &'a Path,
}

impl Reader<'_> {
    /// The next `n` bytes; a file that ends first is a truncated one.
    fn bytes(&mut self, n: usize) -> Result<Vec<u8>, HfError> {
        let mut bytes = vec![0u8; n];
        self.inner.read_exact(&mut bytes).map_err(|error| {
            match error.kind() == std::io::ErrorKind::UnexpectedEof {
                true => HfError::Weights {
                    path: self.path.to_path_buf(),
                    message: "not a valid safetensors file (it ends early); it may be truncated"
                        .into(),
                },
                false => HfError::Io {
                    path: self.path.to_path_buf(),
                    error,
                },
            }
        })?;
        self.hasher.update(&bytes);
        Ok(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A safetensors file of `tensors` (name, shape, values) written by the `safetensors`
    /// crate itself, with an F16 tensor among them.
    fn write_checkpoint(dir: &Path, tensors: &[(&str, Vec<usize>, Vec<f32>)]) -> Vec<u8> {
        let bytes: Vec<Vec<u8>> = tensors
            .iter()
            .map(|(_, _, values)| values.iter().flat_map(|v| v.to_le_bytes()).collect())
            .collect();
        let half = [0u8; 4];
        let mut views: Vec<(String, safetensors::tensor::TensorView)> = tensors
            .iter()
            .zip(&bytes)
            .map(|((name, shape, _), data)| {
                let view = safetensors::tensor::TensorView::new(
                    safetensors::Dtype::F32,
                    shape.clone(),
                    data,
                )
                .unwrap();
                (name.to_string(), view)
            })
            .collect();
        let f16 = safetensors::tensor::TensorView::new(safetensors::Dtype::F16, vec![2], &half);
        views.push(("half".into(), f16.unwrap()));
        let file = safetensors::serialize(views, None).unwrap();
        std::fs::write(dir.join("model.safetensors"), &file).unwrap();
        file
    }

    #[test]
    fn tensors_read_one_by_one_equal_the_file_and_are_hashed_whole() {
        let dir = tempfile::tempdir().unwrap();
        let file = write_checkpoint(
            dir.path(),
            &[
                ("b.weight", vec![2, 3], vec![1.0, -2.0, 3.5, 0.25, 5.0, 6.0]),
                ("a.bias", vec![2], vec![7.0, 8.0]),
                ("c.bad", vec![3], vec![1.0, f32::NAN, f32::INFINITY]),
            ],
        );
        let device = Device::flex();
        let tensors = CheckpointTensors::read(dir.path(), &device).unwrap();
        assert_eq!(tensors.sha256, run::hash::sha256_hex(&file));
        assert_eq!(tensors.bytes, file.len() as u64);
        let mut names: Vec<&String> = tensors.names().collect();
        names.sort();
        assert_eq!(names, ["a.bias", "b.weight", "c.bad", "half"]);
        let entry = tensors.entry("b.weight").unwrap();
        assert_eq!(
            (entry.dtype.as_str(), entry.shape.as_slice()),
            ("F32", &[2, 3][..])
        );
        let Values::Finite(values) = &entry.values else {
            panic!("b.weight is finite");
        };
        let values: Vec<f32> = (**values).clone().into_data().try_to_vec().unwrap();
        assert_eq!(values, [1.0, -2.0, 3.5, 0.25, 5.0, 6.0]);
        assert!(matches!(
            tensors.entry("c.bad").unwrap().values,
            Values::NonFinite { count: 2, first: 1 }
        ));
        assert!(matches!(
            tensors.entry("half").unwrap().values,
            Values::Other
        ));
    }

    #[test]
    fn a_file_whose_tensors_do_not_tile_its_data_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = write_checkpoint(dir.path(), &[("w", vec![2], vec![1.0, 2.0])]);
        let device = Device::flex();
        let refused = |bytes: &[u8]| {
            std::fs::write(dir.path().join("model.safetensors"), bytes).unwrap();
            match CheckpointTensors::read(dir.path(), &device) {
                Err(HfError::Weights { message, .. }) => message,
                Err(other) => panic!("{other}"),
                Ok(_) => panic!("accepted"),
            }
        };
        // Four bytes more after the data.
        let mut longer = file.clone();
        longer.extend([0; 4]);
        let message = refused(&longer);
        assert!(message.contains("data ends at byte"), "{message}");
        // Cut inside the data.
        let message = refused(&file[..file.len() - 2]);
        assert!(message.contains("may be truncated"), "{message}");
        // A header longer than the file.
        let mut huge = file;
        huge[..8].copy_from_slice(&u64::MAX.to_le_bytes());
        let message = refused(&huge);
        assert!(message.contains("its header claims"), "{message}");
    }
}
