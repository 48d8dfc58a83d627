//! Loading a run directory written by `train`: its resolved config, its task, and the model
//! with the final weights (`model.safetensors`) or a checkpoint's (`checkpoints/step-N`).

use std::path::{Path, PathBuf};

use burn::module::Module;
use burn::prelude::*;
use burn::store::{ModuleRecord, ModuleSnapshot, SafetensorsStore};
use burn::tensor::Bytes;
use model::Encoder;
use train::{ResolvedRun, RunConfig};

/// A run ready to be measured.
#[derive(Debug)]
pub struct LoadedRun {
    /// The run directory.
    pub dir: PathBuf,
    /// Config, task and model sizes.
    pub run: ResolvedRun,
    /// The model, inference-only, on `device`.
    pub model: Encoder,
    /// Where the weights came from.
    pub weights: PathBuf,
    /// The CPU device the model lives on.
    pub device: Device,
}

/// A run that cannot be inspected.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// No `config.toml`.
    #[error(
        "{0} is not a headlab run directory: it has no config.toml (train writes one; check the path)"
    )]
    NotARun(PathBuf),
    /// The config no longer loads.
    #[error(transparent)]
    Config(#[from] train::config::ConfigError),
    /// No final weights.
    #[error(
        "{0} is missing: the run has not finished; inspect a checkpoint with --checkpoint step-N \
         (available: {1})"
    )]
    NoFinalWeights(PathBuf, String),
    /// No such checkpoint.
    #[error("checkpoint {0} does not exist (available: {1})")]
    NoCheckpoint(PathBuf, String),
    /// Weights that do not load.
    #[error("cannot load weights from {path}: {message}; the file may be truncated or corrupt")]
    BadWeights {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
}

/// Loads the run in `dir`, with the weights of `checkpoint` (`step-N`) or the final ones.
pub fn load(dir: &Path, checkpoint: Option<&str>) -> Result<LoadedRun, RunError> {
    let config_path = dir.join("config.toml");
    if !config_path.is_file() {
        return Err(RunError::NotARun(dir.to_path_buf()));
    }
    let run = RunConfig::from_toml(&config_path)?.resolve(&config_path)?;
    let device = Device::flex();
    device.seed(run.config.seed);
    let model = run
        .config
        .model
        .init(&run.io, &device)
        .expect("a resolved config builds");
    let available = || {
        let steps: Vec<String> = train::checkpoint::list(dir)
            .iter()
            .map(|(step, _)| format!("step-{step}"))
            .collect();
        if steps.is_empty() {
            "none".to_string()
        } else {
            steps.join(", ")
        }
    };
    let bad = |path: &Path, message: String| RunError::BadWeights {
        path: path.to_path_buf(),
        message,
    };
    let (model, weights) = match checkpoint {
        None => {
            let path = dir.join("model.safetensors");
            if !path.is_file() {
                return Err(RunError::NoFinalWeights(path, available()));
            }
            let mut model = model;
            let mut store = SafetensorsStore::from_file(&path);
            let result = model
                .load_from(&mut store)
                .map_err(|e| bad(&path, format!("{e}")))?;
            if !result.missing.is_empty() || !result.errors.is_empty() {
                let message = format!(
                    "missing tensors {:?}, errors {:?}",
                    result.missing, result.errors
                );
                return Err(bad(&path, message));
            }
            (model, path)
        }
        Some(name) => {
            let checkpoint_dir = dir.join("checkpoints").join(name);
            let path = checkpoint_dir.join("model.bpk");
            if !path.is_file() {
                return Err(RunError::NoCheckpoint(checkpoint_dir, available()));
            }
            let bytes = std::fs::read(&path).map_err(|e| bad(&path, e.to_string()))?;
            let record = ModuleRecord::from_bytes(Bytes::from_bytes_vec(bytes))
                .map_err(|e| bad(&path, format!("{e:?}")))?;
            let model = model
                .try_load_record(record)
                .map_err(|e| bad(&path, format!("{e:?}")))?;
            (model, path)
        }
    };
    Ok(LoadedRun {
        dir: dir.to_path_buf(),
        run,
        model: model.valid(),
        weights,
        device,
    })
}
