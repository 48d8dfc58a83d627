//! Per-head weights, typed ([`HeadTensorsByLayer`], what analyses read) and under stable names
//! in files, `layers.{l}.heads.{h}.{q,k,v,q_bias,k_bias,v_bias,o}` (and `.qk`, `.ov` when
//! circuits are asked for; [`head_tensor_name`] is the one place that writes such a name):
//! what a snapshot during training holds and what `inspect` dumps.
//!
//! A snapshot (`snapshots/step-N.safetensors`) also holds every parameter of the model under
//! `model.{module path}`, so `inspect` can rebuild the model at that step and run the probe
//! batch through it: attention patterns depend on every earlier layer, not on one head's
//! weights alone.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use burn::prelude::*;
use burn::store::{ModuleSnapshot, bridge};
use model::Encoder;

use crate::tensor_file::{HostTensor, TensorFileError, read_tensors, write_tensors};

/// Prefix of the full model's parameters inside a snapshot.
pub const MODEL_PREFIX: &str = "model.";

/// One part of a head's weights: how its tensor's name ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadPart {
    /// The query projection, `[d_model, d_head]`.
    Q,
    /// The key projection, `[d_model, d_head]`.
    K,
    /// The value projection, `[d_model, d_head]`.
    V,
    /// The query bias, `[d_head]`.
    QBias,
    /// The key bias, `[d_head]`.
    KBias,
    /// The value bias, `[d_head]`.
    VBias,
    /// The head's rows of the output projection, `[d_head, d_model]`.
    O,
    /// The QK circuit `q k^T`, `[d_model, d_model]`.
    Qk,
    /// The OV circuit `v o`, `[d_model, d_model]`.
    Ov,
}

impl HeadPart {
    /// The name's last part: `q`, `k`, `v`, `q_bias`, `k_bias`, `v_bias`, `o`, `qk`, `ov`.
    pub fn name(self) -> &'static str {
        match self {
            HeadPart::Q => "q",
            HeadPart::K => "k",
            HeadPart::V => "v",
            HeadPart::QBias => "q_bias",
            HeadPart::KBias => "k_bias",
            HeadPart::VBias => "v_bias",
            HeadPart::O => "o",
            HeadPart::Qk => "qk",
            HeadPart::Ov => "ov",
        }
    }
}

/// The one formatter of per-head tensor names: `layers.{layer}.heads.{head}.{part}`, as in
/// snapshots and `weights.safetensors`.
pub fn head_tensor_name(layer: usize, head: usize, part: HeadPart) -> String {
    format!("layers.{layer}.heads.{head}.{}", part.name())
}

/// One head's weights on the host, shaped as [`HeadPart`] says.
#[derive(Debug, Clone, PartialEq)]
pub struct HeadTensors {
    /// `[d_model, d_head]`.
    pub q: HostTensor,
    /// `[d_model, d_head]`.
    pub k: HostTensor,
    /// `[d_model, d_head]`.
    pub v: HostTensor,
    /// `[d_head]`.
    pub q_bias: HostTensor,
    /// `[d_head]`.
    pub k_bias: HostTensor,
    /// `[d_head]`.
    pub v_bias: HostTensor,
    /// `[d_head, d_model]`.
    pub o: HostTensor,
    /// The QK and OV circuits, `[d_model, d_model]` each, when they were asked for.
    pub circuits: Option<(HostTensor, HostTensor)>,
}

impl HeadTensors {
    /// The QK circuit.
    ///
    /// # Panics
    /// If the circuits were not asked for ([`HeadTensorsByLayer::of`] with `circuits`).
    pub fn qk(&self) -> &HostTensor {
        &self.circuits.as_ref().expect("circuits were asked for").0
    }

    /// The OV circuit; panics as [`HeadTensors::qk`] does.
    pub fn ov(&self) -> &HostTensor {
        &self.circuits.as_ref().expect("circuits were asked for").1
    }

    /// Every part present, with its [`HeadPart`].
    fn parts(&self) -> Vec<(HeadPart, &HostTensor)> {
        let mut parts = vec![
            (HeadPart::Q, &self.q),
            (HeadPart::K, &self.k),
            (HeadPart::V, &self.v),
            (HeadPart::QBias, &self.q_bias),
            (HeadPart::KBias, &self.k_bias),
            (HeadPart::VBias, &self.v_bias),
            (HeadPart::O, &self.o),
        ];
        if let Some((qk, ov)) = &self.circuits {
            parts.extend([(HeadPart::Qk, qk), (HeadPart::Ov, ov)]);
        }
        parts
    }
}

/// Every head's weights on the host, layer-major: `layers[l][h]`. What analyses read (typed,
/// never by name), and what [`HeadTensorsByLayer::named`] writes into files.
#[derive(Debug, Clone, PartialEq)]
pub struct HeadTensorsByLayer {
    /// One list per layer, one entry per head.
    pub layers: Vec<Vec<HeadTensors>>,
}

impl HeadTensorsByLayer {
    /// Every head of `model`, with the QK and OV circuits when `circuits`.
    pub fn of(model: &Encoder, circuits: bool) -> Self {
        let layers = model
            .blocks
            .iter()
            .map(|block| {
                (0..block.attention.n_heads)
                    .map(|h| {
                        let w = block.attention.head_weights(h);
                        let circuits =
                            circuits.then(|| (HostTensor::of(w.qk()), HostTensor::of(w.ov())));
                        HeadTensors {
                            q: HostTensor::of(w.q),
                            k: HostTensor::of(w.k),
                            v: HostTensor::of(w.v),
                            q_bias: HostTensor::of(w.q_bias),
                            k_bias: HostTensor::of(w.k_bias),
                            v_bias: HostTensor::of(w.v_bias),
                            o: HostTensor::of(w.o),
                            circuits,
                        }
                    })
                    .collect()
            })
            .collect();
        Self { layers }
    }

    /// Head `head` of layer `layer`.
    pub fn head(&self, layer: usize, head: usize) -> &HeadTensors {
        &self.layers[layer][head]
    }

    /// Every tensor under its name ([`head_tensor_name`]), for a file.
    pub fn named(&self) -> BTreeMap<String, HostTensor> {
        let mut named = BTreeMap::new();
        for (l, heads) in self.layers.iter().enumerate() {
            for (h, head) in heads.iter().enumerate() {
                for (part, tensor) in head.parts() {
                    named.insert(head_tensor_name(l, h, part), tensor.clone());
                }
            }
        }
        named
    }
}

/// Every parameter of `model`, named `model.{module path}` (e.g. `model.blocks.0.ff_in.weight`).
pub fn model_tensors(model: &Encoder) -> BTreeMap<String, HostTensor> {
    model
        .collect(None, None, false)
        .iter()
        .map(|tensor| {
            let data = bridge::to_data(tensor).expect("parameters are resident");
            let shape = data.shape().to_vec();
            let values = data
                .try_into_vec_as::<f32>()
                .expect("headlab parameters are f32");
            let host = HostTensor { shape, values };
            (format!("{MODEL_PREFIX}{}", tensor.name), host)
        })
        .collect()
}

/// Writes a snapshot of every head's weights and of the whole model at `step` to `path`.
pub fn write_snapshot(path: &Path, model: &Encoder, step: usize) -> Result<(), TensorFileError> {
    let metadata = [("step".to_string(), step.to_string())]
        .into_iter()
        .collect();
    let mut tensors = HeadTensorsByLayer::of(model, false).named();
    tensors.extend(model_tensors(model));
    write_tensors(path, &tensors, Some(metadata))
}

/// A snapshot that cannot be loaded back into a model.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// The file does not read.
    #[error(transparent)]
    File(#[from] TensorFileError),
    /// The file reads but does not fit the model.
    #[error("{path} does not fit this run's model: {message}")]
    Mismatch {
        /// The snapshot.
        path: PathBuf,
        /// What is missing or of the wrong shape.
        message: String,
    },
}

/// Loads the model parameters of the snapshot at `path` into `model` (built from the run's
/// config on the device the result should live on).
pub fn load_snapshot(path: &Path, mut model: Encoder) -> Result<Encoder, SnapshotError> {
    let device = model.embedding.weight.device();
    let tensors: Vec<_> = read_tensors(path)?
        .into_iter()
        .filter_map(|(name, host)| {
            let name = name.strip_prefix(MODEL_PREFIX)?.to_string();
            let data = TensorData::new(host.values, host.shape);
            Some(bridge::from_data(data, name, None))
        })
        .collect();
    let mismatch = |message: String| SnapshotError::Mismatch {
        path: path.to_path_buf(),
        message,
    };
    if tensors.is_empty() {
        return Err(mismatch(format!(
            "it holds no `{MODEL_PREFIX}*` parameters (written by an older headlab; retrain to \
             get divergence curves)"
        )));
    }
    let result = model.apply(tensors, None, None, false);
    if !result.missing.is_empty() || !result.errors.is_empty() {
        let missing: Vec<&str> = result.missing.iter().map(|(p, _)| p.as_str()).collect();
        return Err(mismatch(format!(
            "missing {missing:?}, errors {:?}",
            result.errors
        )));
    }
    // `apply` keeps each parameter on the device of the data it was given.
    Ok(model.to_device(&device))
}

/// Every snapshot in a run's `snapshots/` directory ([`crate::RunDir::snapshots_dir`]), by
/// step (empty when there are none).
pub fn list_snapshots(snapshots_dir: &Path) -> Vec<(usize, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(snapshots_dir) else {
        return vec![];
    };
    let mut snapshots: Vec<(usize, PathBuf)> = entries
        .filter_map(|entry| {
            let path = entry.ok()?.path();
            let name = path.file_name()?.to_str()?;
            let step = name
                .strip_prefix("step-")?
                .strip_suffix(".safetensors")?
                .parse()
                .ok()?;
            Some((step, path))
        })
        .collect();
    snapshots.sort();
    snapshots
}

#[cfg(test)]
pub(crate) mod tests {
    use burn::tensor::Tolerance;
    use model::{EncoderConfig, EncoderIo};

    use super::*;

    /// A 1-layer, 2-head encoder (d_model 16) from `seed`, for tests of files that hold one.
    pub(crate) fn tiny_model(seed: u64, device: &Device) -> Encoder {
        device.seed(seed);
        let io = EncoderIo {
            vocab_size: 7,
            n_outputs: 5,
            max_seq_len: 6,
        };
        let config = EncoderConfig {
            d_model: 16,
            n_heads: 2,
            d_ff: 32,
            ..EncoderConfig::default()
        };
        config.init(&io, device).unwrap()
    }

    #[test]
    fn a_snapshot_rebuilds_the_model_it_was_taken_from() {
        let device = Device::flex();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("step-3.safetensors");
        let original = tiny_model(1, &device);
        write_snapshot(&path, &original, 3).unwrap();

        let tokens = Tensor::<2, Int>::from_data([[0, 1, 2, 3, 4, 5], [6, 5, 4, 3, 2, 1]], &device);
        let other = tiny_model(2, &device);
        let before = other.forward(tokens.clone());
        let restored = load_snapshot(&path, other).unwrap();
        let expected = original.forward(tokens.clone());
        restored
            .forward(tokens)
            .into_data()
            .assert_approx_eq::<f32>(&expected.clone().into_data(), Tolerance::absolute(0.0));
        // The fresh model really was different before loading.
        assert!(
            (before - expected).abs().max().into_scalar::<f32>() > 1e-3,
            "the two seeds built the same model"
        );

        let heads = read_tensors(&path).unwrap();
        assert!(heads.contains_key("layers.1.heads.0.q"));
        assert!(heads.contains_key("model.blocks.0.attention.output.weight"));
    }

    #[test]
    fn a_snapshot_without_model_parameters_is_refused_by_name() {
        let device = Device::flex();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("step-0.safetensors");
        let model = tiny_model(1, &device);
        write_tensors(&path, &HeadTensorsByLayer::of(&model, false).named(), None).unwrap();
        let err = load_snapshot(&path, model).unwrap_err().to_string();
        assert!(
            err.contains("step-0.safetensors") && err.contains("retrain"),
            "{err}"
        );
    }

    #[test]
    fn snapshots_are_listed_by_step_not_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let snapshots = dir.path().join("snapshots");
        std::fs::create_dir(&snapshots).unwrap();
        for name in [
            "step-100.safetensors",
            "step-50.safetensors",
            ".tmp-x",
            "notes.txt",
        ] {
            std::fs::write(snapshots.join(name), b"").unwrap();
        }
        let steps: Vec<usize> = list_snapshots(&snapshots).iter().map(|s| s.0).collect();
        assert_eq!(steps, [50, 100]);
    }
}
