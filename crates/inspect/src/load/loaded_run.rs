//! Loading a run for measuring: through [`run::RunDir`], which checks that the directory is
//! a run whose config and dataset are the ones it was trained with, then the model with the
//! final weights (`model.safetensors`) or a checkpoint's (`checkpoints/step-N`). A run still
//! training is read from its newest checkpoint.

use std::path::{Path, PathBuf};

use burn::prelude::*;
use hf::tokenizer::{TokenizerError, WordPieces};
use model::Encoder;
use run::dir::{LockHolder, RunDirError, RunLock};
use run::manifest::FileRecord;
use run::snapshot::{SnapshotError, load_snapshot};
use run::{ResolvedRun, RunDir, checkpoint, weights};
use serde::{Deserialize, Serialize};

use crate::load::inputs::{self, Inputs, InputsError};
use crate::load::own_pairs::{OwnPairs, PairsFile};
use crate::load::probe_choice::ProbeChoice;
use crate::load::reading::{Reading, ReadingError};
use crate::load::text::ProbeSource;

/// A run ready to be measured.
#[derive(Debug)]
pub struct LoadedRun {
    /// The run directory.
    pub dir: RunDir,
    /// The run's config resolved: config, task and model sizes.
    pub resolved: ResolvedRun,
    /// The model, inference-only, on `device`.
    pub model: Encoder,
    /// Where the weights came from.
    pub weights: PathBuf,
    /// The run's files the measurement rests on, with their hashes, checked against the
    /// run's manifest ([`crate::load::inputs`]); empty for a model made in memory.
    pub inputs: Inputs,
    /// The device the model lives on (flex unless the caller chose another, [`load_on`]).
    pub device: Device,
    /// Said when the weights are not the ones asked for (a run still training).
    pub note: Option<String>,
    /// How the model reads its input: the task's tokens, or word pieces through the run's
    /// tokenizer (`tokenizer.json`), with what it is probed with ([`ProbeChoice`]), made once
    /// as the run loads.
    pub reading: Reading,
    /// The `task.KEY=VALUE` overrides the probe's task was built with
    /// ([`with_task_overrides`]); empty: the run's own task.
    pub task_overrides: Vec<String>,
    /// A user's own minimal pairs (`inspect --pairs FILE`) as the model reads them
    /// ([`LoadedRun::with_own_pairs`]); none unless given.
    pub own_pairs: Option<OwnPairs>,
    /// A shared lock, so no training (from the start or resumed) rewrites the run while it
    /// is read.
    _lock: Option<RunLock>,
}

/// What an imported model is and how it reads text: what a comparison across families names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImportedModel {
    /// The class it was saved from (`RobertaForMaskedLM`).
    pub architecture: String,
    /// Its tokenizer's kind (`byte-level BPE`, `WordPiece`, ...).
    pub tokenizer: String,
}

impl LoadedRun {
    /// For an imported model, its class and its tokenizer's kind; none for a model headlab
    /// trained.
    pub fn imported_model(&self) -> Option<ImportedModel> {
        let import = self.resolved.config.import.as_ref()?;
        Some(ImportedModel {
            architecture: import.architecture.clone(),
            tokenizer: self
                .reading
                .tokenizer()
                .map_or_else(|| "unknown".to_string(), |t| t.kind().to_string()),
        })
    }

    /// A run whose model was made in memory (a hand-built model in a test, say) rather than
    /// loaded: `dir` holds its config, `weights` says where the weights came from.
    pub fn from_model(
        dir: RunDir,
        resolved: ResolvedRun,
        model: Encoder,
        weights: PathBuf,
    ) -> Self {
        let device = model
            .devices()
            .first()
            .cloned()
            .unwrap_or_else(Device::flex);
        LoadedRun {
            reading: Reading::of_task_tokens(),
            dir,
            resolved,
            model: model.valid(),
            weights,
            inputs: Inputs::default(),
            device,
            note: None,
            task_overrides: vec![],
            own_pairs: None,
            _lock: None,
        }
    }

    /// The run with the minimal pairs of the file at `path` to patch
    /// ([`crate::load::own_pairs`]), read now, before anything is measured: refused for a
    /// model that cannot score a masked word ([`Reading::read_own_pairs`]), or by the line
    /// that does not line up.
    pub fn with_own_pairs(mut self, path: &Path) -> Result<Self, ReadingError> {
        let file = PairsFile::read(path)?;
        let pairs =
            (self.reading).read_own_pairs(&file, &self.model, &self.resolved, self.dir.root())?;
        self.own_pairs = Some(OwnPairs { file, pairs });
        Ok(self)
    }

    /// Where the probe comes from: the run's task with its overrides, or a treebank.
    pub fn probe_source(&self) -> ProbeSource {
        self.reading.probe_source(&self.task_overrides)
    }

    /// The model with the weights of the snapshot at `path` (one of `dir.snapshots_dir()`),
    /// on the run's device: what the divergence curves and the role trajectories measure.
    pub fn snapshot_model(&self, path: &Path) -> Result<Encoder, SnapshotError> {
        let fresh = self
            .resolved
            .config
            .model
            .init(&self.resolved.io, &self.device)
            .expect("a resolved config builds");
        load_snapshot(path, fresh)
    }
}

/// A run that cannot be inspected: what is wrong with the run, its weights or the probe
/// chosen, as data (the report's command line says what to do about it, naming its flags).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Not a run, an edited config or dataset, an unreadable marker.
    #[error(transparent)]
    RunDir(#[from] RunDirError),
    /// No final weights.
    #[error("{weights} is missing: the run has not finished (its checkpoints: {available})")]
    NoFinalWeights {
        /// The run directory.
        run: PathBuf,
        /// The final weights it lacks.
        weights: PathBuf,
        /// Its checkpoints, `step-N, ...` ([`checkpoint::names`]; "none" when none).
        available: String,
    },
    /// A run still training that has written no checkpoint yet.
    #[error(
        "{run} is still training ({holder}) and has no checkpoint yet; wait for its first \
         checkpoint (train.checkpoint_every) or for the end"
    )]
    InProgress {
        /// The run.
        run: PathBuf,
        /// Who trains it.
        holder: LockHolder,
    },
    /// No such checkpoint.
    #[error("checkpoint {0} does not exist (available: {1}; names are step-N)")]
    NoCheckpoint(String, String),
    /// Final weights that do not load.
    #[error(transparent)]
    BadWeights(#[from] weights::WeightsError),
    /// A checkpoint that does not load.
    #[error(transparent)]
    BadCheckpoint(#[from] checkpoint::CheckpointError),
    /// The run's tokenizer, which does not load or is not its model's.
    #[error(transparent)]
    Tokenizer(#[from] TokenizerError),
    /// Files not as the run's manifest recorded them.
    #[error(transparent)]
    Inputs(#[from] InputsError),
    /// The probe chosen cannot be read by this model (boxed: the error is large).
    #[error(transparent)]
    Reading(Box<crate::load::reading::ReadingError>),
    /// The task overrides of a task probe cannot apply.
    #[error(transparent)]
    TaskOverride(#[from] TaskOverrideError),
}

/// Loads the run in `dir` on the CPU (flex), with the weights of `checkpoint` (`step-N`) or
/// the final ones. A run still training (its lock held by `train`) is read from its newest
/// checkpoint, and [`LoadedRun::note`] says so.
pub fn load(dir: &Path, checkpoint_name: Option<&str>) -> Result<LoadedRun, RunError> {
    load_on(dir, checkpoint_name, Device::flex())
}

/// [`load`] onto `device`.
pub fn load_on(
    dir: &Path,
    checkpoint_name: Option<&str>,
    device: Device,
) -> Result<LoadedRun, RunError> {
    load_with(dir, checkpoint_name, device, &ProbeChoice::Own)
}

/// [`load_on`], probed as `choice` says: its reading made once, here, and not changed
/// afterwards. A task probe with overrides (`task.KEY=VALUE`) probes with the task changed in
/// memory ([`with_task_overrides`]).
pub fn load_with(
    dir: &Path,
    checkpoint_name: Option<&str>,
    device: Device,
    choice: &ProbeChoice,
) -> Result<LoadedRun, RunError> {
    let run_dir = RunDir::open(dir)?;
    let (lock, writer) = match run_dir.lock_for_reading() {
        Ok(lock) => (lock, None),
        Err(holder) => (None, Some(holder)),
    };
    let resolved = run_dir.resolve()?;
    let (resolved, reading, task_overrides) = chosen_reading(&run_dir, resolved, choice)?;
    device.seed(resolved.config.seed);
    let model = resolved
        .config
        .model
        .init(&resolved.io, &device)
        .expect("a resolved config builds");

    let newest = checkpoint::list(&run_dir).first().map(|(step, _)| *step);
    let (checkpoint_dir, note) = match (checkpoint_name, writer) {
        (Some(name), _) => {
            // Only `step-N`: the name becomes a path, and must stay inside the run.
            let step = name.strip_prefix("step-").and_then(|n| n.parse().ok());
            let Some(step) = step else {
                return Err(RunError::NoCheckpoint(
                    name.to_string(),
                    checkpoint::names(&run_dir),
                ));
            };
            (Some(run_dir.checkpoint_dir(step)), None)
        }
        (None, Some(holder)) => match newest {
            Some(step) => (
                Some(run_dir.checkpoint_dir(step)),
                Some(format!(
                    "{} is still training ({holder}): inspecting its newest checkpoint, \
                     step-{step}",
                    dir.display()
                )),
            ),
            None => {
                return Err(RunError::InProgress {
                    run: dir.to_path_buf(),
                    holder,
                });
            }
        },
        (None, None) => (None, None),
    };
    let (model, weights, (read, record)) = load_weights(&run_dir, checkpoint_dir, model)?;
    let inputs = inputs::verified(&run_dir, &read, record)?;
    Ok(LoadedRun {
        dir: run_dir,
        resolved,
        model: model.valid(),
        weights,
        inputs,
        device,
        note,
        reading,
        task_overrides,
        own_pairs: None,
        _lock: lock,
    })
}

/// How the model of the run in `dir` reads its input, probed as `choice` says, its weights
/// not loaded: what a comparison reads first, to choose the sentences every model it compares
/// fits ([`ProbeChoice::OwnSentences`]).
pub fn reading_of(dir: &Path, choice: &ProbeChoice) -> Result<Reading, RunError> {
    let run_dir = RunDir::open(dir)?;
    let resolved = run_dir.resolve()?;
    Ok(chosen_reading(&run_dir, resolved, choice)?.1)
}

/// The reading of `run` (in `dir`) probed as `choice` says ([`Reading::chosen`]), with the
/// run as its probe's task overrides change it ([`with_task_overrides`]) and those overrides.
fn chosen_reading(
    dir: &RunDir,
    run: ResolvedRun,
    choice: &ProbeChoice,
) -> Result<(ResolvedRun, Reading, Vec<String>), RunError> {
    let tokenizer = run_tokenizer(dir, &run)?;
    let (run, task_overrides) = match choice {
        ProbeChoice::Task { overrides } if !overrides.is_empty() => {
            let reads_text = tokenizer.is_some();
            let changed = with_task_overrides(dir, &run, reads_text, overrides)?;
            (changed, overrides.clone())
        }
        _ => (run, vec![]),
    };
    let reading = Reading::chosen(&run, tokenizer, choice, dir.root())?;
    Ok((run, reading, task_overrides))
}

/// `run` (in `dir`) with its task changed in memory by `overrides` (`task.KEY=VALUE`: the
/// classed grammar, ditransitive verbs, more relative clauses), never its `config.toml`, for
/// a model that reads word pieces (`reads_text`) to be probed with another version of its
/// task. Refused for a model that reads the tokens of the task it was trained on, for a key
/// outside `task.`, and for `task.kind` (such a model is probed with the grammar's sentences).
pub fn with_task_overrides(
    dir: &RunDir,
    run: &ResolvedRun,
    reads_text: bool,
    overrides: &[String],
) -> Result<ResolvedRun, TaskOverrideError> {
    if !reads_text {
        return Err(TaskOverrideError::Trained(dir.root().to_path_buf()));
    }
    for assignment in overrides {
        let key = assignment.split('=').next().unwrap_or_default().trim();
        if !key.starts_with("task.") || key == "task.kind" {
            return Err(TaskOverrideError::Key(key.to_string()));
        }
    }
    let path = dir.config_path();
    run.config
        .with_overrides(&path, overrides)
        .and_then(|config| config.resolve(&path))
        .map_err(|error| TaskOverrideError::Config {
            overrides: overrides.to_vec(),
            error: Box::new(error),
        })
}

impl From<crate::load::reading::ReadingError> for RunError {
    fn from(error: crate::load::reading::ReadingError) -> Self {
        RunError::Reading(Box::new(error))
    }
}

/// Task overrides ([`with_task_overrides`]) that cannot apply: the run or the override at
/// fault, as data (the report's command line names its flag).
#[derive(Debug, thiserror::Error)]
pub enum TaskOverrideError {
    /// A run headlab trained.
    #[error(
        "{0} is a model headlab trained, which reads the tokens of the task it was trained on: \
         its probe's task cannot be changed"
    )]
    Trained(PathBuf),
    /// A key outside `task.`, or `task.kind`.
    #[error("task override {0}: only the probe's task changes, keys task.KEY other than task.kind")]
    Key(String),
    /// The override does not fit the config, or the task it makes is invalid.
    #[error("task overrides {}: {error}", .overrides.join(", "))]
    Config {
        /// The overrides, as given (`task.KEY=VALUE`).
        overrides: Vec<String>,
        /// What is wrong (it names the run's config file).
        error: Box<run::config::ConfigError>,
    },
}

/// `model` with the weights of `checkpoint_dir` (a complete checkpoint), or the final ones
/// for `None`, and where they came from.
fn load_weights(
    run_dir: &RunDir,
    checkpoint_dir: Option<PathBuf>,
    model: Encoder,
) -> Result<(Encoder, PathBuf, (PathBuf, FileRecord)), RunError> {
    match checkpoint_dir {
        None => {
            let path = run_dir.final_weights_path();
            if !path.is_file() {
                return Err(RunError::NoFinalWeights {
                    run: run_dir.root().to_path_buf(),
                    weights: path,
                    available: checkpoint::names(run_dir),
                });
            }
            let (model, record) = weights::load_recorded(&path, model)?;
            Ok((model, path.clone(), (path, record)))
        }
        Some(checkpoint_dir) => {
            if !checkpoint::is_complete(&checkpoint_dir) {
                return Err(RunError::NoCheckpoint(
                    checkpoint_dir.display().to_string(),
                    checkpoint::names(run_dir),
                ));
            }
            // Hashed before it is loaded: a checkpoint is no part of the run's manifest, so
            // there is nothing to compare the bytes read with.
            let file = checkpoint::model_file(&checkpoint_dir);
            let (bytes, sha256) =
                run::manifest::hash_file(&file).map_err(|error| InputsError::Io {
                    path: file.clone(),
                    error,
                })?;
            let model = checkpoint::load_model(&checkpoint_dir, model)?;
            Ok((model, checkpoint_dir, (file, FileRecord { bytes, sha256 })))
        }
    }
}

/// The run's tokenizer (`tokenizer.json`), where it holds one: then its model reads word
/// pieces, whatever made the run (an import writes one; so will training on text). What a
/// model reads is decided by its files, never by where it came from. `None`: the model reads
/// its task's tokens. A tokenizer with more pieces than the model's embedding has rows is
/// refused.
fn run_tokenizer(dir: &RunDir, run: &ResolvedRun) -> Result<Option<WordPieces>, RunError> {
    let path = dir.tokenizer_path();
    if std::fs::symlink_metadata(&path).is_err() {
        return Ok(None);
    }
    let tokenizer = WordPieces::read(&path)?;
    let rows = run.io.vocab_size;
    if tokenizer.id_bound() > rows {
        return Err(RunError::Tokenizer(TokenizerError::Read {
            path,
            message: format!(
                "its pieces have ids up to {}, but the model's embedding has {rows} rows; the \
                 tokenizer must be the model's own",
                tokenizer.id_bound() - 1
            ),
        }));
    }
    Ok(Some(tokenizer))
}
