//! Checkpoints: `checkpoints/step-N/` holds the model (`model.bpk`), the optimizer state
//! (`optimizer.bpk`, Burn's burnpack format, which keeps parameter ids so AdamW's moments
//! find their parameters again) and `state.json`. Each directory is written under a
//! temporary name and renamed into place, so a listed checkpoint is always complete.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use burn::module::Module;
use burn::optim::ModuleOptimizer;
use burn::store::ModuleRecord;
use burn::tensor::Bytes;
use model::Encoder;
use serde::{Deserialize, Serialize};

use crate::atomic::{create_dir_atomic, remove_dir_atomic};
use crate::dir::RunDir;

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

/// Writes a checkpoint of `model`, `optim` and `state`, then keeps only the newest `keep`.
pub fn save(
    run: &RunDir,
    model: &Encoder,
    optim: &ModuleOptimizer,
    state: &CheckpointState,
    keep: usize,
) -> Result<PathBuf, CheckpointError> {
    let dir = run.checkpoint_dir(state.step);
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
    fs::create_dir_all(run.checkpoints_dir()).map_err(write_error)?;
    create_dir_atomic(&dir, |tmp| {
        fs::write(tmp.join(MODEL), &*model_bytes)?;
        fs::write(tmp.join(OPTIMIZER), &*optim_bytes)?;
        // state.json last: its presence marks a complete checkpoint even without the rename.
        fs::write(tmp.join(STATE), &state_json)?;
        for file in [MODEL, OPTIMIZER, STATE] {
            fs::File::open(tmp.join(file))?.sync_all()?;
        }
        Ok(())
    })
    .map_err(write_error)?;
    for (_, old) in list(run).into_iter().skip(keep) {
        // Best effort: a checkpoint that could not be pruned is only disk space.
        let _ = remove_dir_atomic(&old);
    }
    Ok(dir)
}

/// Complete checkpoints of `run`, newest first, as `(step, directory)`.
pub fn list(run: &RunDir) -> Vec<(usize, PathBuf)> {
    let mut found: Vec<(usize, PathBuf)> = fs::read_dir(run.checkpoints_dir())
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            let step = name.strip_prefix("step-")?.parse().ok()?;
            let path = entry.path();
            is_complete(&path).then_some((step, path))
        })
        .collect();
    found.sort_by_key(|c| std::cmp::Reverse(c.0));
    found
}

/// The newest step at which every run of `runs` has a complete checkpoint, if any: where a
/// seed group resumes together.
pub fn newest_common<'a>(runs: impl Iterator<Item = &'a RunDir>) -> Option<usize> {
    let mut common: Option<BTreeSet<usize>> = None;
    for run in runs {
        let steps: BTreeSet<usize> = list(run).into_iter().map(|(step, _)| step).collect();
        common = Some(match common {
            None => steps,
            Some(before) => before.intersection(&steps).copied().collect(),
        });
    }
    common?.last().copied()
}

/// Whether `dir` holds a complete checkpoint (its `state.json`, written last).
pub fn is_complete(dir: &Path) -> bool {
    dir.join(STATE).is_file()
}

/// `step-10, step-5` (or "none"): the checkpoints of `run`, for messages.
pub fn names(run: &RunDir) -> String {
    let steps: Vec<String> = list(run)
        .iter()
        .map(|(step, _)| format!("step-{step}"))
        .collect();
    if steps.is_empty() {
        "none".to_string()
    } else {
        steps.join(", ")
    }
}

/// Loads the checkpoint `step` of `run` into `model` and `optim` (built fresh from the
/// config). Its `state.json` must agree with its directory's name and lie within
/// `max_step`, the run's `train.steps`.
pub fn load(
    run: &RunDir,
    step: usize,
    max_step: usize,
    model: Encoder,
    optim: ModuleOptimizer,
) -> Result<(Encoder, ModuleOptimizer, CheckpointState), CheckpointError> {
    let dir = run.checkpoint_dir(step);
    let state = read_state(&dir)?;
    let corrupt = |message: String| CheckpointError::Corrupt {
        path: dir.join(STATE),
        message,
    };
    if state.step > max_step {
        return Err(corrupt(format!(
            "step {} is past the run's train.steps = {max_step}",
            state.step
        )));
    }
    if state.step != step {
        return Err(corrupt(format!(
            "it says step {}, but it lies in step-{step}",
            state.step
        )));
    }
    let model = load_model(&dir, model)?;
    let optim = optim
        .from_bytes(Bytes::from_bytes_vec(read(&dir, OPTIMIZER)?))
        .map_err(|e| CheckpointError::Corrupt {
            path: dir.join(OPTIMIZER),
            message: format!("{e:?}"),
        })?;
    Ok((model, optim, state))
}

/// Loads only the model of the checkpoint in `dir` into `model` (what `inspect
/// --checkpoint` reads).
pub fn load_model(dir: &Path, model: Encoder) -> Result<Encoder, CheckpointError> {
    let corrupt = |message: String| CheckpointError::Corrupt {
        path: dir.join(MODEL),
        message,
    };
    let record = ModuleRecord::from_bytes(Bytes::from_bytes_vec(read(dir, MODEL)?))
        .map_err(|e| corrupt(format!("{e:?}")))?;
    model
        .try_load_record(record)
        .map_err(|e| corrupt(format!("{e:?}")))
}

/// The model file of the checkpoint in `dir` (what [`load_model`] reads).
pub fn model_file(dir: &Path) -> PathBuf {
    dir.join(MODEL)
}

/// The `state.json` of the checkpoint in `dir`.
pub fn read_state(dir: &Path) -> Result<CheckpointState, CheckpointError> {
    serde_json::from_slice(&read(dir, STATE)?).map_err(|e| CheckpointError::Corrupt {
        path: dir.join(STATE),
        message: e.to_string(),
    })
}

fn read(dir: &Path, name: &str) -> Result<Vec<u8>, CheckpointError> {
    let path = dir.join(name);
    fs::read(&path).map_err(|e| CheckpointError::Corrupt {
        path: path.clone(),
        message: e.to_string(),
    })
}

const MODEL: &str = "model.bpk";
const OPTIMIZER: &str = "optimizer.bpk";
const STATE: &str = "state.json";
