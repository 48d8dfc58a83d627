//! Checkpoints: `checkpoints/step-N/` holds the model (`model.bpk`), the optimizer state
//! (`optimizer.bpk`, Burn's burnpack format, which keeps parameter ids so AdamW's moments
//! find their parameters again) and `state.json`. Each directory is written under a
//! temporary name and renamed into place, so a listed checkpoint is always complete.

use std::fs;
use std::path::{Path, PathBuf};

use burn::module::Module;
use burn::optim::ModuleOptimizer;
use burn::store::ModuleRecord;
use burn::tensor::Bytes;
use model::Encoder;
use serde::{Deserialize, Serialize};

use crate::atomic::{create_dir_atomic, remove_dir_atomic};

/// What a checkpoint records besides tensors.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckpointState {
    /// Optimizer steps completed.
    pub step: usize,
    /// The run's seed (batches and dropout are derived from it and the step).
    pub seed: u64,
    /// Best eval token accuracy so far, if evaluated.
    pub best_eval_token_acc: Option<f64>,
    /// Wall-clock seconds of training so far.
    pub elapsed_s: f64,
}

/// A checkpoint that could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// I/O failure (disk full, read-only directory, ...).
    #[error("cannot write checkpoint {path}: {error}")]
    Write {
        /// The checkpoint directory.
        path: PathBuf,
        /// Why. Not a `source`: the message already says it, and `error: {e:#}` in main would
        /// print it twice.
        error: std::io::Error,
    },
    /// A file of the checkpoint is missing or unreadable.
    #[error("checkpoint {path} is unreadable: {message}")]
    Corrupt {
        /// The file at fault.
        path: PathBuf,
        /// Why.
        message: String,
    },
}

/// `checkpoints/step-N` under `run_dir`.
pub fn checkpoint_dir(run_dir: &Path, step: usize) -> PathBuf {
    run_dir.join("checkpoints").join(format!("step-{step}"))
}

/// Writes a checkpoint of `model`, `optim` and `state`, then keeps only the newest `keep`.
pub fn save(
    run_dir: &Path,
    model: &Encoder,
    optim: &ModuleOptimizer,
    state: &CheckpointState,
    keep: usize,
) -> Result<PathBuf, CheckpointError> {
    let dir = checkpoint_dir(run_dir, state.step);
    let write_error = |error| CheckpointError::Write {
        path: dir.clone(),
        error,
    };
    let model_bytes = model
        .clone()
        .into_record()
        .into_bytes()
        .map_err(|e| write_error(std::io::Error::other(format!("{e:?}"))))?;
    let optim_bytes = optim
        .into_bytes()
        .map_err(|e| write_error(std::io::Error::other(format!("{e:?}"))))?;
    let state_json = serde_json::to_vec_pretty(state).expect("state serializes");
    fs::create_dir_all(run_dir.join("checkpoints")).map_err(write_error)?;
    create_dir_atomic(&dir, |tmp| {
        fs::write(tmp.join("model.bpk"), &*model_bytes)?;
        fs::write(tmp.join("optimizer.bpk"), &*optim_bytes)?;
        // state.json last: its presence marks a complete checkpoint even without the rename.
        fs::write(tmp.join("state.json"), &state_json)?;
        for file in ["model.bpk", "optimizer.bpk", "state.json"] {
            fs::File::open(tmp.join(file))?.sync_all()?;
        }
        Ok(())
    })
    .map_err(write_error)?;
    for (_, old) in list(run_dir).into_iter().skip(keep) {
        // Best effort: a checkpoint that could not be pruned is only disk space.
        let _ = remove_dir_atomic(&old);
    }
    Ok(dir)
}

/// Complete checkpoints under `run_dir`, newest first, as `(step, directory)`.
pub fn list(run_dir: &Path) -> Vec<(usize, PathBuf)> {
    let mut found: Vec<(usize, PathBuf)> = fs::read_dir(run_dir.join("checkpoints"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            let step = name.strip_prefix("step-")?.parse().ok()?;
            let path = entry.path();
            path.join("state.json").is_file().then_some((step, path))
        })
        .collect();
    found.sort_by_key(|c| std::cmp::Reverse(c.0));
    found
}

/// Loads the checkpoint in `dir` into `model` and `optim` (built fresh from the config).
pub fn load(
    dir: &Path,
    model: Encoder,
    optim: ModuleOptimizer,
) -> Result<(Encoder, ModuleOptimizer, CheckpointState), CheckpointError> {
    let read = |name: &str| {
        let path = dir.join(name);
        fs::read(&path).map_err(|e| CheckpointError::Corrupt {
            path: path.clone(),
            message: e.to_string(),
        })
    };
    let corrupt = |name: &str, message: String| CheckpointError::Corrupt {
        path: dir.join(name),
        message,
    };
    let state: CheckpointState = serde_json::from_slice(&read("state.json")?)
        .map_err(|e| corrupt("state.json", e.to_string()))?;
    let record = ModuleRecord::from_bytes(Bytes::from_bytes_vec(read("model.bpk")?))
        .map_err(|e| corrupt("model.bpk", format!("{e:?}")))?;
    let model = model
        .try_load_record(record)
        .map_err(|e| corrupt("model.bpk", format!("{e:?}")))?;
    let optim = optim
        .from_bytes(Bytes::from_bytes_vec(read("optimizer.bpk")?))
        .map_err(|e| corrupt("optimizer.bpk", format!("{e:?}")))?;
    Ok((model, optim, state))
}
