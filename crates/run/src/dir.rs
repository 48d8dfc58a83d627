//! The run directory, the contract between `train`, `inspect`, `compare` and `bench`. One type
//! owns it: [`RunDir`] creates a run (refusing anything that is not one), locks it against a
//! second writer, opens it for reading after checking that it is what it says, and knows
//! every path in it:
//!
//! ```text
//! RUN/run.json                     the marker: written first, names the config's and dataset's hashes
//! RUN/.lock                        advisory lock; holds the writer's process id and program
//! RUN/config.toml                  the resolved config
//! RUN/dataset.jsonl                a file run's copy of its dataset
//! RUN/vocab.txt                    a word task's tokens, line i naming id i (`grammar`)
//! RUN/metrics.jsonl                one JSON object per logged step
//! RUN/checkpoints/step-N/          model.bpk, optimizer.bpk, state.json
//! RUN/snapshots/step-N.safetensors every head's weights at step N
//! RUN/model.safetensors            the final weights
//! RUN/inspect/                     inspect's report (its default place)
//! ```
//!
//! Deleting is limited to those names: `--force` removes them from a directory that holds the
//! marker and leaves anything else (a user's notes, a dataset kept there) in place, and never
//! follows a symbolic link.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::atomic::{remove_dir_atomic, write_atomic};
use crate::config::{ConfigError, ResolvedRun, RunConfig};
use crate::hash::sha256_hex;
use crate::inputs::{self, DatasetRecord, TextRecord, dataset_bytes, text_record};
use crate::manifest::{Depth, FileRecord, MANIFEST, Verdict};
use crate::metrics::{self, MetricsRecord};
use tasks::TaskConfig;

/// Exit status of `train` when another process holds the run ([`RunDirError::Locked`]):
/// nothing was done and nothing is wrong, so try again later (EX_TEMPFAIL of sysexits.h).
/// `sweep` tells it from a failure by this status.
pub const EXIT_RUN_IN_USE: u8 = 75;

/// The marker file: its presence makes a directory a headlab run.
pub const MARKER: &str = "run.json";
/// The writer's lock file, in a run directory and in a directory `--out` names
/// ([`crate::out_dir`]).
pub const LOCK: &str = ".lock";
const CONFIG: &str = "config.toml";
const DATASET: &str = "dataset.jsonl";
const VOCAB: &str = "vocab.txt";
/// An imported model's tokenizer (`headlab import`), copied from its checkpoint.
const TOKENIZER: &str = "tokenizer.json";
const METRICS: &str = "metrics.jsonl";
const CHECKPOINTS: &str = "checkpoints";
const SNAPSHOTS: &str = "snapshots";
/// The final weights, at the top of a run directory.
pub const FINAL_WEIGHTS: &str = "model.safetensors";
/// The default report directory inside a run directory.
pub const REPORT: &str = "inspect";

/// Every name headlab writes at the top of a run directory: what `--force` may delete.
/// The lock is not among them: it must outlive the deletion it guards. Removed last to first:
/// the manifest first (the run stops counting as complete), the marker last.
const LAYOUT: [&str; 11] = [
    MARKER,
    CONFIG,
    DATASET,
    VOCAB,
    TOKENIZER,
    METRICS,
    CHECKPOINTS,
    SNAPSHOTS,
    FINAL_WEIGHTS,
    REPORT,
    MANIFEST,
];

/// Version of the layout written into the marker; a newer one is refused rather than misread.
const FORMAT: u32 = 1;

/// The marker's content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunMarker {
    /// Layout version ([`FORMAT`]).
    pub format: u32,
    /// The program and version that created the run.
    pub created_by: String,
    /// SHA-256 of `config.toml` as written: an edited config is refused, not misread.
    pub config_sha256: String,
    /// A file run's dataset, copied to `dataset.jsonl`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset: Option<DatasetRecord>,
    /// A text run's corpus and tokenizer (written to `tokenizer.json`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<TextRecord>,
}

/// Why a run directory could not be created, opened or locked.
#[derive(Debug, thiserror::Error)]
pub enum RunDirError {
    /// Without `--force`, an existing run is kept.
    #[error(
        "run directory {} already holds a run; {}--force to replace it, or --out to choose \
         another directory",
        path.display(),
        if program == "train" { "pass --resume to continue it, " } else { "pass " }
    )]
    RunExists {
        /// The run directory.
        path: PathBuf,
        /// What would write it (`train`, `import`): only `train` can resume a run.
        program: String,
    },
    /// The directory holds files headlab did not write: never written into, never deleted.
    #[error(
        "{path} is not empty and is not a headlab run (it has no {MARKER}; it holds {example}); \
         train writes a new run only into a new or empty directory and replaces only a run it \
         wrote, so nothing there was touched; choose another directory with --out"
    )]
    NotARunDirectory {
        /// The directory.
        path: PathBuf,
        /// One of its entries, as an example.
        example: String,
    },
    /// A path that is not a directory.
    #[error("{0} exists and is not a directory; choose another directory with --out")]
    NotADirectory(PathBuf),
    /// `--force` through a symbolic link.
    #[error(
        "{0} is a symbolic link; --force does not follow links, so nothing was deleted; pass \
         the directory it points to, or remove the link"
    )]
    Symlink(PathBuf),
    /// The dataset to copy lies inside the run that `--force` would clear.
    #[error(
        "the dataset {dataset} is the run's own copy in {run}, which --force would delete; \
         move the dataset out of the run directory and point task.path at it"
    )]
    DatasetInsideRun {
        /// The dataset.
        dataset: PathBuf,
        /// The run.
        run: PathBuf,
    },
    /// Reading a run at a path where nothing is.
    #[error(
        "{0} does not exist: give the run directory train wrote (runs/NAME for a config named \
         NAME, or its --out)"
    )]
    Missing(PathBuf),
    /// Reading a run at a path that is a file: most often the config it was trained from.
    #[error("{}", file_not_run(.0))]
    FileNotRun(PathBuf),
    /// Reading a run that is not one.
    #[error(
        "{0} is not a headlab run directory: it has no {MARKER} (headlab train writes one when it \
         creates a run; check the path, or train the run again)"
    )]
    NotARun(PathBuf),
    /// The marker is unreadable or of a layout this build does not know.
    #[error("{path} is unreadable: {message}")]
    BadMarker {
        /// The marker file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// The run's creation was cut short (killed before its config was written): nothing in
    /// it is worth keeping.
    #[error(
        "{0} holds a run whose creation was interrupted before its config was written; start it \
         again with --force"
    )]
    Unfinished(PathBuf),
    /// The config is missing.
    #[error(
        "{0} is missing: the run's config is gone, so its weights cannot be interpreted; \
         restore it, or train the run again with --force"
    )]
    MissingConfig(PathBuf),
    /// A file changed after the run was created.
    #[error(
        "{path} was changed after the run started (its SHA-256 no longer matches the one in \
         {MARKER}); {advice}"
    )]
    Changed {
        /// The file.
        path: PathBuf,
        /// What to do.
        advice: &'static str,
    },
    /// The config no longer parses.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Another process holds the run.
    #[error(
        "{path} is in use by {holder}; wait for it to finish, or stop it (a stopped train \
         continues with --resume)"
    )]
    Locked {
        /// The run.
        path: PathBuf,
        /// "process 1234 (train)", as the lock file says.
        holder: String,
    },
    /// File system failure.
    #[error("cannot {action} {path}: {error}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The path at fault.
        path: PathBuf,
        /// Why (not a `source`, so `{e:#}` says it once).
        error: io::Error,
    },
}

fn io_error<'a>(
    action: &'static str,
    path: &'a Path,
) -> impl FnOnce(io::Error) -> RunDirError + 'a {
    move |error| RunDirError::Io {
        action,
        path: path.to_path_buf(),
        error,
    }
}

/// A verified run directory: it holds [`MARKER`].
#[derive(Debug, Clone)]
pub struct RunDir {
    root: PathBuf,
    marker: RunMarker,
}

/// The advisory lock on a run (`flock`), released when dropped or when the process dies,
/// however it dies.
#[derive(Debug)]
pub struct RunLock {
    file: File,
    /// Whether it is the writer's lock, whose file names the holder.
    exclusive: bool,
}

impl Drop for RunLock {
    /// A writer's lock file is emptied before the lock goes, still held, so that a run left
    /// cleanly names no holder. The file itself stays: removing it would let a process that
    /// opened it before the removal lock a file no one else sees.
    fn drop(&mut self) {
        if self.exclusive {
            let _ = self.file.set_len(0);
        }
    }
}

/// Who holds a run's lock, as its lock file says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockHolder(pub String);

impl std::fmt::Display for LockHolder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl RunDir {
    /// Creates a run for `run` at `root` and locks it: a new or empty directory, or, with
    /// `force`, a headlab run whose files are removed first. `program` ("train") is what the
    /// lock names to a second writer. A file run's dataset (`dataset_text`, the bytes its
    /// task was built from) is copied in.
    pub fn create(
        root: &Path,
        run: &ResolvedRun,
        force: bool,
        program: &str,
    ) -> Result<(RunDir, RunLock), RunDirError> {
        let is_link = fs::symlink_metadata(root).is_ok_and(|m| m.file_type().is_symlink());
        if is_link && force {
            return Err(RunDirError::Symlink(root.to_path_buf()));
        }
        make_dir(root)?;
        // Checked before the lock file is made (a user's directory gets nothing added), and
        // again under the lock (another process may have written meanwhile).
        refuse_foreign(root)?;
        let lock = lock_exclusive(root, program)?;
        let others = refuse_foreign(root)?;
        if !others.is_empty() && !force {
            return Err(RunDirError::RunExists {
                path: root.to_path_buf(),
                program: program.to_string(),
            });
        }

        let dataset = read_dataset(run)?;
        if let Some((path, _)) = &dataset
            && let Ok(inside) = path.strip_prefix(canonical(root)?)
            && LAYOUT.iter().any(|name| inside.starts_with(name))
        {
            return Err(RunDirError::DatasetInsideRun {
                dataset: path.clone(),
                run: root.to_path_buf(),
            });
        }
        if !others.is_empty() {
            remove_layout(root)?;
        }
        remove_layout_temporaries(root)?;

        let config_text = run.config.to_toml();
        let marker = RunMarker {
            format: FORMAT,
            created_by: format!("headlab {program} {}", env!("CARGO_PKG_VERSION")),
            config_sha256: sha256_hex(config_text.as_bytes()),
            dataset: dataset.as_ref().map(|(source, bytes)| DatasetRecord {
                source: source.clone(),
                sha256: sha256_hex(bytes),
                bytes: bytes.len() as u64,
            }),
            text: text_record(run),
        };
        let dir = RunDir {
            root: root.to_path_buf(),
            marker,
        };
        // The marker first: from here on the directory is a run, which --force may clear
        // again if this process dies before the rest is written.
        let marker_json = serde_json::to_vec_pretty(&dir.marker).expect("the marker serializes");
        dir.write(&dir.marker_path(), &marker_json)?;
        dir.write_task_files(run, dataset.map(|(_, bytes)| bytes))?;
        dir.write(&dir.config_path(), config_text.as_bytes())?;
        Ok((dir, lock))
    }

    /// What a run holds of its task, before its config: a file run's copy of its dataset
    /// (`dataset`), a text run's tokenizer, a word task's vocabulary. An imported model's
    /// tokenizer and vocabulary are the import's to write.
    fn write_task_files(
        &self,
        run: &ResolvedRun,
        dataset: Option<Vec<u8>>,
    ) -> Result<(), RunDirError> {
        if let Some(bytes) = dataset {
            self.write(&self.dataset_path(), &bytes)?;
        }
        if run.config.import.is_some() {
            return Ok(());
        }
        if let Some(json) = run.task.tokenizer_json() {
            self.write(&self.tokenizer_path(), json.as_bytes())?;
        }
        if let Some(names) = run.task.token_names() {
            // One token per line, as BERT's vocab.txt: names are words, never line breaks.
            let text: String = names.iter().map(|name| format!("{name}\n")).collect();
            self.write(&self.vocab_path(), text.as_bytes())?;
        }
        Ok(())
    }

    /// Whether `root` holds a run that `--force` may replace: `false` where it is missing or
    /// holds nothing a run writes; refused where it is a symbolic link or a directory
    /// headlab did not write.
    pub fn holds_a_run(root: &Path) -> Result<bool, RunDirError> {
        match fs::symlink_metadata(root) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(io_error("read", root)(e)),
            Ok(meta) if meta.file_type().is_symlink() => {
                return Err(RunDirError::Symlink(root.to_path_buf()));
            }
            Ok(meta) if !meta.is_dir() => {
                return Err(RunDirError::NotADirectory(root.to_path_buf()));
            }
            Ok(_) => {}
        }
        Ok(!refuse_foreign(root)?.is_empty())
    }

    /// Where a run that replaces the one at `root` is written before it takes its place:
    /// `.NAME.replacing` beside it. A fixed name, so that what a killed replacement left
    /// there is a run the next one clears.
    pub fn replacement_path(root: &Path) -> PathBuf {
        let name = root.file_name().map_or_else(
            || "run".to_string(),
            |name| name.to_string_lossy().into_owned(),
        );
        root.with_file_name(format!(".{name}.replacing"))
    }

    /// Puts this run, written whole at [`RunDir::replacement_path`] of `root`, in the place
    /// of the run at `root`, then removes the old one. The two directories are exchanged in
    /// one step (Linux's `renameat2` with `RENAME_EXCHANGE`), so a process killed at any
    /// moment leaves at `root` the old run or the new one, each whole; what is left at the
    /// replacement path is a run the next replacement clears. `root` must still be a run
    /// (checked under its lock). Where the filesystem cannot exchange, two renames, between
    /// which `root` is briefly absent with both runs beside it.
    pub fn replace(self, root: &Path, program: &str) -> Result<RunDir, RunDirError> {
        if !Self::holds_a_run(root)? {
            return Err(RunDirError::Missing(root.to_path_buf()));
        }
        let _old_lock = lock_exclusive(root, program)?;
        refuse_foreign(root)?;
        let staged = self.root.clone();
        exchange(&staged, root).map_err(io_error("replace", root))?;
        // The old run is now at the replacement path: a verified run, removed as --force
        // removes one, its directory last.
        remove_layout(&staged)?;
        remove_layout_temporaries(&staged)?;
        let _ = fs::remove_file(staged.join(LOCK));
        let _ = fs::remove_dir(&staged);
        Ok(RunDir {
            root: root.to_path_buf(),
            marker: self.marker,
        })
    }

    /// Opens the run at `root` for reading: the marker must be there, the config must be the
    /// one the run was created with, and a file run's copy of its dataset must be intact.
    pub fn open(root: &Path) -> Result<RunDir, RunDirError> {
        match fs::metadata(root) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(RunDirError::Missing(root.to_path_buf()));
            }
            Ok(meta) if !meta.is_dir() => return Err(RunDirError::FileNotRun(root.to_path_buf())),
            _ => {}
        }
        let marker_path = root.join(MARKER);
        let text = match fs::read(&marker_path) {
            Ok(text) => text,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(RunDirError::NotARun(root.to_path_buf()));
            }
            Err(e) => return Err(io_error("read", &marker_path)(e)),
        };
        let bad = |message: String| RunDirError::BadMarker {
            path: marker_path.clone(),
            message,
        };
        let marker: RunMarker = serde_json::from_slice(&text).map_err(|e| bad(format!("{e}")))?;
        if marker.format != FORMAT {
            return Err(bad(format!(
                "layout version {} is not {FORMAT}, the one this build reads; use the headlab \
                 that wrote it",
                marker.format
            )));
        }
        let dir = RunDir {
            root: root.to_path_buf(),
            marker,
        };
        dir.check_hash(
            &dir.config_path(),
            &dir.marker.config_sha256.clone(),
            "restore it, or \
             train the run again (a run's config cannot change under its weights)",
        )?;
        if let Some(dataset) = &dir.marker.dataset {
            dir.check_hash(
                &dir.dataset_path(),
                &dataset.sha256,
                "it is the data the run was \
                 trained and evaluated on; restore it from the original, or train the run again",
            )?;
        }
        if let Some(text) = &dir.marker.text {
            dir.check_hash(
                &dir.tokenizer_path(),
                &text.tokenizer_sha256,
                "it is the tokenizer the run \
                 was trained to read its corpus with; restore it, or train the run again",
            )?;
        }
        Ok(dir)
    }

    /// Checks that `path` still hashes to `expected`.
    fn check_hash(
        &self,
        path: &Path,
        expected: &str,
        advice: &'static str,
    ) -> Result<(), RunDirError> {
        let bytes = match fs::read(path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound && path == self.config_path() => {
                // Written right after the marker: without checkpoints or weights either, the
                // run was killed while being created.
                let trained = self.checkpoints_dir().exists() || self.final_weights_path().exists();
                return Err(if trained {
                    RunDirError::MissingConfig(path.to_path_buf())
                } else {
                    RunDirError::Unfinished(self.root.clone())
                });
            }
            Err(e) => return Err(io_error("read", path)(e)),
        };
        if sha256_hex(&bytes) != expected {
            return Err(RunDirError::Changed {
                path: path.to_path_buf(),
                advice,
            });
        }
        Ok(())
    }

    /// Locks the run for writing (`--resume`), refusing while another process holds it.
    pub fn lock(&self, program: &str) -> Result<RunLock, RunDirError> {
        lock_exclusive(&self.root, program)
    }

    /// Takes a shared lock for reading when no writer holds the run; `Err` names the writer
    /// (a run still training). A run without a lock file, or on a read-only file system, is
    /// read without one.
    pub fn lock_for_reading(&self) -> Result<Option<RunLock>, LockHolder> {
        lock_for_reading(&self.root)
    }

    /// The config as written when the run was created (verified by [`RunDir::open`]).
    pub fn config(&self) -> Result<RunConfig, RunDirError> {
        Ok(RunConfig::from_toml(&self.config_path())?)
    }

    /// Changes when the run stops: its config becomes `config`, which must be the run's but
    /// for its stopping rules ([`RunConfig::with_stopping_rules_of`]; the caller checks),
    /// written with the marker's hash of it. The config first, then the marker; a kill
    /// between the two leaves a run whose config no longer matches its marker, which opens as
    /// edited (refused by name), never misread.
    pub fn extend(&mut self, config: &RunConfig) -> Result<(), RunDirError> {
        let text = config.to_toml();
        self.write(&self.config_path(), text.as_bytes())?;
        self.marker.config_sha256 = sha256_hex(text.as_bytes());
        let marker_json = serde_json::to_vec_pretty(&self.marker).expect("the marker serializes");
        self.write(&self.marker_path(), &marker_json)
    }

    /// The first key (dotted, `train.steps`) where the config this run was started with
    /// differs from `config`, the backend aside (a run may resume on another backend);
    /// `None` when `config` is this run's. The one rule by which `train --resume` and `sweep`
    /// tell whether a directory holds the run a config asks for.
    pub fn config_difference(&self, config: &RunConfig) -> Result<Option<String>, RunDirError> {
        let mut saved = self.config()?;
        saved.backend = config.backend;
        Ok(saved.first_difference(config))
    }

    /// The config with its task built, a file run's from the run's own copy of the dataset
    /// and a text run's with the run's own tokenizer (not trained again), so a run reads the
    /// same from any directory.
    pub fn resolve(&self) -> Result<ResolvedRun, RunDirError> {
        let mut config = self.config()?;
        match &mut config.task {
            TaskConfig::File(spec) => {
                spec.path = fs::canonicalize(self.dataset_path())
                    .map_err(io_error("read", &self.dataset_path()))?;
            }
            TaskConfig::Text(spec) if self.marker.text.is_some() => {
                spec.tokenizer = Some(
                    fs::canonicalize(self.tokenizer_path())
                        .map_err(io_error("read", &self.tokenizer_path()))?,
                );
            }
            _ => {}
        }
        Ok(config.resolve(&self.config_path())?)
    }

    /// For `--resume`: the data the config names (read into `run`) must be what the run was
    /// trained on: a file run's dataset, a text run's corpus and tokenizer.
    pub fn check_inputs_unchanged(&self, run: &ResolvedRun) -> Result<(), RunDirError> {
        let (dataset, text) = (self.marker.dataset.as_ref(), self.marker.text.as_ref());
        let dataset_now = dataset.map(|_| read_dataset(run)).transpose()?.flatten();
        match inputs::first_change(dataset, text, self.tokenizer_path(), run, dataset_now) {
            Some(inputs::Change { path, advice }) => Err(RunDirError::Changed { path, advice }),
            None => Ok(()),
        }
    }

    /// Writes `bytes` to `path` in the run atomically.
    pub fn write(&self, path: &Path, bytes: &[u8]) -> Result<(), RunDirError> {
        write_atomic(path, bytes).map_err(io_error("write", path))
    }

    /// The run's directory.
    pub fn root(&self) -> &Path {
        &self.root
    }
    /// The marker's content.
    pub fn marker(&self) -> &RunMarker {
        &self.marker
    }
    /// `run.json`.
    pub fn marker_path(&self) -> PathBuf {
        self.root.join(MARKER)
    }
    /// `config.toml`.
    pub fn config_path(&self) -> PathBuf {
        self.root.join(CONFIG)
    }
    /// `dataset.jsonl`: a file run's copy of its data.
    pub fn dataset_path(&self) -> PathBuf {
        self.root.join(DATASET)
    }
    /// `vocab.txt`: a word task's token names, line i naming id i.
    pub fn vocab_path(&self) -> PathBuf {
        self.root.join(VOCAB)
    }

    /// An imported model's `tokenizer.json`.
    pub fn tokenizer_path(&self) -> PathBuf {
        self.root.join(TOKENIZER)
    }
    /// `metrics.jsonl`.
    pub fn metrics_path(&self) -> PathBuf {
        self.root.join(METRICS)
    }
    /// Every complete record of `metrics.jsonl`.
    pub fn metrics(&self) -> Vec<MetricsRecord> {
        metrics::read(&self.metrics_path())
    }
    /// `checkpoints/`.
    pub fn checkpoints_dir(&self) -> PathBuf {
        self.root.join(CHECKPOINTS)
    }
    /// `checkpoints/step-N/`.
    pub fn checkpoint_dir(&self, step: usize) -> PathBuf {
        self.checkpoints_dir().join(format!("step-{step}"))
    }
    /// `snapshots/`.
    pub fn snapshots_dir(&self) -> PathBuf {
        self.root.join(SNAPSHOTS)
    }
    /// `snapshots/step-N.safetensors`.
    pub fn snapshot_path(&self, step: usize) -> PathBuf {
        self.snapshots_dir()
            .join(format!("step-{step}.safetensors"))
    }
    /// `model.safetensors`: the final weights.
    pub fn final_weights_path(&self) -> PathBuf {
        self.root.join(FINAL_WEIGHTS)
    }
    /// `inspect/`: where `inspect` writes its report unless told otherwise.
    pub fn report_dir(&self) -> PathBuf {
        self.root.join(REPORT)
    }

    /// Records what the finished run consists of in `manifest.json` ([`crate::manifest`]):
    /// the marker, the config, the dataset and vocabulary where the run has them,
    /// `metrics.jsonl`, `model.safetensors` and every snapshot. Call it after the final weights
    /// are written; until then the run is not complete.
    pub fn seal(&self) -> Result<(), RunDirError> {
        let mut files: Vec<String> = [
            MARKER,
            CONFIG,
            DATASET,
            VOCAB,
            TOKENIZER,
            METRICS,
            FINAL_WEIGHTS,
        ]
        .into_iter()
        .filter(|name| self.root.join(name).is_file())
        .map(String::from)
        .collect();
        let snapshots = self.snapshots_dir();
        if snapshots.is_dir() {
            let mut names = vec![];
            for entry in fs::read_dir(&snapshots).map_err(io_error("list", &snapshots))? {
                let name = entry.map_err(io_error("list", &snapshots))?.file_name();
                let name = name.to_string_lossy();
                // Hidden names are a writer's temporaries, never part of the run.
                if name.ends_with(".safetensors") && !name.starts_with('.') {
                    names.push(format!("{SNAPSHOTS}/{name}"));
                }
            }
            names.sort();
            files.extend(names);
        }
        crate::manifest::seal(&self.root, &files).map_err(io_error("seal", &self.root))?;
        Ok(())
    }

    /// The run against its manifest, to `depth`: [`Verdict::Unsealed`] for a run that has not
    /// finished (or was cut short between its final weights and its manifest).
    pub fn verify(&self, depth: Depth) -> Verdict {
        crate::manifest::check(&self.root, depth)
    }

    /// The files of this sealed run whose bytes a measurement of it rests on, as its
    /// manifest records them: the config, the dataset, vocabulary and tokenizer where the run
    /// has them, the final weights and every snapshot. Every sealed file but the marker (a
    /// record of who created the run) and `metrics.jsonl` (whose wall-clock fields differ
    /// between two runs of equal numbers). A report names these ([`crate::manifest`]'s
    /// records), and counts as a report of the run only while the run's manifest still names
    /// the same. `None` for a run not sealed (or whose manifest is unreadable).
    pub fn measured_inputs(&self) -> Option<BTreeMap<String, FileRecord>> {
        let manifest = crate::manifest::read(&self.root).ok()??;
        Some(
            manifest
                .files
                .into_iter()
                .filter(|(name, _)| name != MARKER && name != METRICS)
                .collect(),
        )
    }

    /// Whether the run is sealed: complete, with a manifest of its files (not checked here;
    /// [`RunDir::verify`] checks them).
    pub fn is_sealed(&self) -> bool {
        matches!(crate::manifest::read(&self.root), Ok(Some(_)))
    }

    /// Removes the manifest: the run is about to change (resumed to write its final weights
    /// again) and must not count as complete meanwhile.
    pub fn unseal(&self) -> Result<(), RunDirError> {
        crate::manifest::unseal(&self.root).map_err(io_error("unseal", &self.root))
    }
}

/// A file run's dataset ([`dataset_bytes`]), a failure to read it named.
fn read_dataset(run: &ResolvedRun) -> Result<Option<(PathBuf, Vec<u8>)>, RunDirError> {
    dataset_bytes(run).map_err(|(path, error)| io_error("read", &path)(error))
}

/// `path` with `..` and links resolved; for a path not there yet, its parent's.
fn canonical(path: &Path) -> Result<PathBuf, RunDirError> {
    fs::canonicalize(path).map_err(io_error("resolve", path))
}

/// Makes the directory `root` and its parents; one already there is kept, anything else at
/// `root` is refused.
fn make_dir(root: &Path) -> Result<(), RunDirError> {
    if let Some(parent) = root.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs::create_dir_all(parent).map_err(io_error("create", parent))?;
    }
    match fs::create_dir(root) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => match root.is_dir() {
            true => Ok(()),
            false => Err(RunDirError::NotADirectory(root.to_path_buf())),
        },
        Err(e) => Err(io_error("create", root)(e)),
    }
}

/// The entries of `root` (without the lock file), refusing a non-empty directory that is not
/// a run.
fn refuse_foreign(root: &Path) -> Result<Vec<String>, RunDirError> {
    let others = written_entries(root)?;
    match others.first() {
        Some(example) if !root.join(MARKER).is_file() => Err(RunDirError::NotARunDirectory {
            path: root.to_path_buf(),
            example: quote_name(example),
        }),
        _ => Ok(others),
    }
}

/// Whether `root` is a directory that holds nothing a run writes: empty, or only the lock
/// a `train` takes first (left alone when the disk filled before anything else was written)
/// and the temporary marker of a `train` killed before it renamed it.
/// `train` starts such a run as a new one, and `sweep` counts it as not started.
pub fn holds_nothing_yet(root: &Path) -> bool {
    fs::symlink_metadata(root).is_ok_and(|meta| meta.is_dir())
        && written_entries(root).is_ok_and(|others| others.is_empty())
}

/// [`RunDirError::FileNotRun`]'s message: a config (`.toml`) is named as one, with the
/// command that makes a run of it.
fn file_not_run(path: &Path) -> String {
    if path.extension().is_some_and(|e| e == "toml") {
        format!(
            "{0} is a config file, not a run directory: train it first (headlab train {0}), then give \
             the run directory it prints",
            path.display()
        )
    } else {
        format!(
            "{} is a file, not a run directory: give the directory train wrote",
            path.display()
        )
    }
}

/// The directory's entries a run or a user wrote: without the lock file, and without the
/// temporary files of a run's own names that a `train` killed part-way left (a
/// `.run.json.tmp-PID` whose rename never came), which are no part of anything.
fn written_entries(root: &Path) -> Result<Vec<String>, RunDirError> {
    let mut names = Vec::new();
    for entry in fs::read_dir(root).map_err(io_error("read", root))? {
        let name = entry
            .map_err(io_error("read", root))?
            .file_name()
            .to_string_lossy()
            .into_owned();
        if name != LOCK && !is_layout_temporary(&name) {
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}

/// Exchanges the directories at `a` and `b` in one step; two renames through `.B.old-PID`
/// where the filesystem cannot.
fn exchange(a: &Path, b: &Path) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = |p: &Path| {
        std::ffi::CString::new(p.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a path with a NUL byte"))
    };
    let (from, to) = (c_path(a)?, c_path(b)?);
    // SAFETY: two NUL-terminated paths that outlive the call; no other memory is touched.
    #[allow(unsafe_code)]
    let done = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            from.as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    if done == 0 {
        return Ok(());
    }
    let error = io::Error::last_os_error();
    if !matches!(error.raw_os_error(), Some(libc::EINVAL | libc::ENOSYS)) {
        return Err(error);
    }
    let name = b
        .file_name()
        .map_or_else(Default::default, |n| n.to_string_lossy().into_owned());
    let aside = b.with_file_name(format!(".{name}.old-{}", std::process::id()));
    fs::rename(b, &aside)?;
    fs::rename(a, b)?;
    fs::rename(&aside, a)
}

/// Whether `name` is a temporary name [`crate::atomic::write_atomic`] gives a file of the run's
/// own layout: `.NAME.tmp-PID`, NAME one of [`LAYOUT`].
fn is_layout_temporary(name: &str) -> bool {
    name.strip_prefix('.')
        .and_then(|rest| rest.rsplit_once(".tmp-"))
        .is_some_and(|(stem, pid)| {
            LAYOUT.contains(&stem) && !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit())
        })
}

/// Removes the temporaries [`is_layout_temporary`] names from `root`. Only under the run's
/// exclusive lock: no other writer of the run is alive to own them.
fn remove_layout_temporaries(root: &Path) -> Result<(), RunDirError> {
    for entry in fs::read_dir(root).map_err(io_error("read", root))? {
        let entry = entry.map_err(io_error("read", root))?;
        if is_layout_temporary(&entry.file_name().to_string_lossy())
            && entry.file_type().is_ok_and(|kind| kind.is_file())
        {
            fs::remove_file(entry.path()).map_err(io_error("remove", &entry.path()))?;
        }
    }
    Ok(())
}

/// Removes the names of [`LAYOUT`] from `root`: a directory through a hidden temporary name
/// (so a kill never leaves half of one under its real name), a symbolic link as a link.
fn remove_layout(root: &Path) -> Result<(), RunDirError> {
    // The marker last: until everything else is gone the directory stays a run, so a kill
    // part-way leaves something --force clears again.
    for name in LAYOUT.iter().rev() {
        let path = root.join(name);
        let Ok(meta) = fs::symlink_metadata(&path) else {
            continue;
        };
        let removed = if meta.is_dir() {
            remove_dir_atomic(&path)
        } else {
            fs::remove_file(&path)
        };
        removed.map_err(io_error("remove", &path))?;
    }
    crate::atomic::remove_temporaries(root).map_err(io_error("clean", root))?;
    Ok(())
}

/// Takes the exclusive lock of the run at `root`, writing `program` and the process id into
/// the lock file for whoever is refused next.
fn lock_exclusive(root: &Path, program: &str) -> Result<RunLock, RunDirError> {
    take_exclusive_lock(root, program).map_err(|refused| match refused {
        LockRefused::Held(holder) => RunDirError::Locked {
            path: root.to_path_buf(),
            holder: holder.0,
        },
        LockRefused::Io {
            action,
            path,
            error,
        } => RunDirError::Io {
            action,
            path,
            error,
        },
    })
}

/// Why [`take_exclusive_lock`] did not take the lock.
#[derive(Debug)]
pub(crate) enum LockRefused {
    /// Another process holds it.
    Held(LockHolder),
    /// The lock file could not be opened, locked or written.
    Io {
        /// What was being done.
        action: &'static str,
        /// The lock file.
        path: PathBuf,
        /// Why.
        error: io::Error,
    },
}

/// Takes the exclusive lock ([`LOCK`]) of the directory `root`, writing `program` and the
/// process id into the lock file for whoever is refused next: the one writer's lock of a run
/// directory and of a directory `--out` names.
pub(crate) fn take_exclusive_lock(root: &Path, program: &str) -> Result<RunLock, LockRefused> {
    let path = root.join(LOCK);
    let failed = |action: &'static str, path: &Path| {
        let path = path.to_path_buf();
        move |error| LockRefused::Io {
            action,
            path,
            error,
        }
    };
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(failed("open", &path))?;
    // A lock this process let go of can be held an instant longer by a child another thread
    // is starting (between fork and exec it shares the open file): tried 5 times, 20 ms apart.
    let mut tries = 0;
    let locked = loop {
        match file.try_lock() {
            Err(fs::TryLockError::WouldBlock) if tries < 5 => tries += 1,
            result => break result,
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    match locked {
        Ok(()) => {}
        Err(fs::TryLockError::WouldBlock) => return Err(LockRefused::Held(holder(&path))),
        Err(fs::TryLockError::Error(error)) => return Err(failed("lock", &path)(error)),
    }
    let who = format!("process {} ({program})\n", std::process::id());
    file.set_len(0)
        .and_then(|()| file.write_all(who.as_bytes()))
        .map_err(failed("write", &path))?;
    Ok(RunLock {
        file,
        exclusive: true,
    })
}

/// A shared lock ([`LOCK`]) of the directory `root` for reading, when no writer holds it;
/// `Err` names the writer. A directory without a lock file, or on a read-only file system, is
/// read without one. A run's and a report's (`--out`) alike.
pub fn lock_for_reading(root: &Path) -> Result<Option<RunLock>, LockHolder> {
    let path = root.join(LOCK);
    let Ok(file) = File::open(&path) else {
        return Ok(None);
    };
    match file.try_lock_shared() {
        Ok(()) => Ok(Some(RunLock {
            file,
            exclusive: false,
        })),
        Err(fs::TryLockError::WouldBlock) => Err(holder(&path)),
        Err(fs::TryLockError::Error(_)) => Ok(None),
    }
}

/// The lock holder as its lock file names it.
fn holder(lock_path: &Path) -> LockHolder {
    let mut text = String::new();
    let _ = File::open(lock_path).and_then(|mut f| f.read_to_string(&mut text));
    let text = text.trim();
    LockHolder(if text.is_empty() || text.len() > 200 {
        "another process".to_string()
    } else {
        text.to_string()
    })
}

/// A file name for a message: quoted, and cut short if long.
fn quote_name(name: &str) -> String {
    format!("\"{}\"", crate::config::excerpt(name, 60))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clearing_a_run_removes_only_its_own_names_and_never_follows_links() {
        let tmp = tempfile::tempdir().unwrap();
        let run = tmp.path().join("run");
        let outside = tmp.path().join("outside");
        fs::create_dir_all(run.join("checkpoints/step-5")).unwrap();
        fs::create_dir(&outside).unwrap();
        fs::write(outside.join("keep"), b"x").unwrap();
        for name in [MARKER, CONFIG, METRICS, "notes.txt", LOCK] {
            fs::write(run.join(name), b"1").unwrap();
        }
        std::os::unix::fs::symlink(&outside, run.join(SNAPSHOTS)).unwrap();
        remove_layout(&run).unwrap();
        let left = written_entries(&run).unwrap();
        assert_eq!(left, ["notes.txt"]);
        assert!(run.join(LOCK).is_file(), "the lock outlives the clearing");
        assert_eq!(fs::read(outside.join("keep")).unwrap(), b"x");
    }

    #[test]
    fn a_directory_with_foreign_files_is_refused_and_an_empty_one_is_not() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(refuse_foreign(tmp.path()).unwrap().is_empty());
        assert!(holds_nothing_yet(tmp.path()));
        fs::write(tmp.path().join(LOCK), b"").unwrap();
        assert!(refuse_foreign(tmp.path()).unwrap().is_empty());
        assert!(holds_nothing_yet(tmp.path()), "a lock alone is nothing yet");
        // What a `train` killed between writing its marker and renaming it leaves.
        fs::write(tmp.path().join(".run.json.tmp-4242"), b"{").unwrap();
        assert!(
            holds_nothing_yet(tmp.path()),
            "a killed start's marker is nothing yet"
        );
        fs::write(tmp.path().join(".notes.txt.tmp-4242"), b"").unwrap();
        assert!(
            !holds_nothing_yet(tmp.path()),
            "only a run's own names are its temporaries"
        );
        fs::remove_file(tmp.path().join(".notes.txt.tmp-4242")).unwrap();
        fs::write(tmp.path().join("notes.txt"), b"").unwrap();
        assert!(!holds_nothing_yet(tmp.path()));
        assert!(
            !holds_nothing_yet(&tmp.path().join("notes.txt")),
            "a file is no directory"
        );
        fs::remove_file(tmp.path().join("notes.txt")).unwrap();
        fs::write(tmp.path().join("important.txt"), b"mine").unwrap();
        let message = refuse_foreign(tmp.path()).unwrap_err().to_string();
        assert!(message.contains("\"important.txt\""), "{message}");
        fs::write(tmp.path().join(MARKER), b"{}").unwrap();
        assert_eq!(refuse_foreign(tmp.path()).unwrap().len(), 2);
    }

    #[test]
    fn a_second_exclusive_lock_is_refused_naming_the_holder() {
        let tmp = tempfile::tempdir().unwrap();
        let _held = lock_exclusive(tmp.path(), "train").unwrap();
        let error = lock_exclusive(tmp.path(), "train").unwrap_err().to_string();
        let pid = std::process::id();
        assert!(
            error.contains(&format!("is in use by process {pid} (train)")),
            "{error}"
        );
    }

    #[test]
    fn a_lock_let_go_names_no_holder_and_is_taken_again() {
        let tmp = tempfile::tempdir().unwrap();
        let held = lock_exclusive(tmp.path(), "train").unwrap();
        let text = fs::read_to_string(tmp.path().join(LOCK)).unwrap();
        assert!(text.starts_with("process "), "{text}");
        drop(held);
        assert_eq!(fs::read_to_string(tmp.path().join(LOCK)).unwrap(), "");
        let _again = lock_exclusive(tmp.path(), "import").unwrap();
    }
}
