//! The run configuration: one TOML file per experiment, `--set key.path=value` overrides,
//! validation with messages that name the file, line or key. The one config loader of headlab.

use std::path::{Path, PathBuf};

use model::memory::{forward_activations, product};
use model::{EncoderConfig, EncoderIo};
use serde::{Deserialize, Serialize};

use crate::backend::BackendKind;
use tasks::{Example, Task, TaskConfig, mix_seed};

/// A whole experiment: what to learn, with which model, how to train.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunConfig {
    /// Run name; the default run directory is `runs/<name>`. Default: the config file's stem.
    #[serde(default)]
    pub name: String,
    /// Seed for weights, batches, dropout and the evaluation set. Default: 0.
    #[serde(default)]
    pub seed: u64,
    /// Where tensors live: flex, ndarray or wgpu. Default: flex.
    #[serde(default)]
    pub backend: BackendKind,
    /// The task.
    pub task: TaskConfig,
    /// The architecture.
    #[serde(default)]
    pub model: EncoderConfig,
    /// The optimisation.
    #[serde(default)]
    pub train: TrainConfig,
    /// Where an imported model came from (`headlab import`); `None` for a model headlab
    /// trains. Written by the import, never by hand: `train` refuses a config that has it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub import: Option<ImportRecord>,
}

/// What an imported run's `config.toml` opens with: what it is, and what its sections are
/// (a `[task]` it was never trained on, no `[train]`).
pub const IMPORTED_HEADER: &str = "\
# An imported checkpoint (headlab import): trained elsewhere, never by headlab, so there is no
# [train] section. [model] is its architecture as headlab reads it, [import] the checkpoint it
# came from. [task] is not what it was trained on: only the probe of `inspect --probe-task`
# (the grammar's sentences); its default probe is the shipped treebank.

";

/// `text` (TOML as `toml` writes it) without the table `[name]` and its subtables.
fn without_section(text: &str, name: &str) -> String {
    let (header, prefix) = (format!("[{name}]"), format!("[{name}."));
    let mut inside = false;
    let mut kept = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim();
        if trimmed.starts_with('[') {
            inside = trimmed == header || trimmed.starts_with(&prefix);
        }
        if !inside {
            kept.push_str(line);
        }
    }
    kept.trim_end().to_string() + "\n"
}

/// The `[import]` section of an imported run's `config.toml`: the checkpoint it was made
/// from, with the hashes of the files read, and the sizes the model takes from it (an
/// imported model's vocabulary and positions are the checkpoint's, not the task's).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImportRecord {
    /// The format read: `huggingface-` and the checkpoint's `model_type` (`huggingface-bert`).
    pub format: String,
    /// The class the checkpoint was saved from: "BertModel" or "BertForMaskedLM".
    pub architecture: String,
    /// The checkpoint directory's canonical path when it was imported.
    pub source: PathBuf,
    /// SHA-256 of its `config.json`.
    pub config_sha256: String,
    /// SHA-256 of its `model.safetensors`.
    pub weights_sha256: String,
    /// SHA-256 of its `tokenizer.json`, copied into the run as `tokenizer.json`.
    pub tokenizer_sha256: String,
    /// Word pieces (the embeddings' rows, the tokenizer's vocabulary).
    pub vocab_size: usize,
    /// Learned positions: the longest sequence the model reads.
    pub max_positions: usize,
    /// Whether every layer reads one set of weights (ALBERT): a head's weights are the same
    /// in every layer, its attention is not (each layer reads another residual stream).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub shared_layers: bool,
    /// The checkpoint's own parameter count (its config's: tied embeddings once, shared
    /// layers once), the one reports give for it: headlab's encoder holds tied embeddings
    /// twice, as its input table and its output layer. Absent in a run imported before it
    /// was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<usize>,
}

/// Learning-rate schedule after warmup.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Schedule {
    /// Hold the peak rate.
    Constant,
    /// Cosine decay from the peak rate to `min_lr_ratio * lr` at the last step.
    #[default]
    Cosine,
}

/// The `[train]` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TrainConfig {
    /// Optimizer steps. Default: 2000.
    pub steps: usize,
    /// Sequences per step. Default: 64.
    pub batch_size: usize,
    /// Peak learning rate of AdamW. Default: 1e-3.
    pub lr: f64,
    /// Steps of linear warmup from 0 to `lr`. Default: 100.
    pub warmup_steps: usize,
    /// Schedule after warmup: constant or cosine. Default: cosine.
    pub schedule: Schedule,
    /// Final rate of the cosine schedule, as a fraction of `lr`. Default: 0.1.
    pub min_lr_ratio: f64,
    /// AdamW decoupled weight decay. Default: 0.01.
    pub weight_decay: f64,
    /// Clip each parameter's gradient to this norm (Burn's `GradientClipping::Norm` works
    /// per parameter tensor, not on the global norm); 0 turns clipping off. Default: 1.0.
    pub grad_clip: f64,
    /// Steps between progress lines in metrics.jsonl. Default: 10.
    pub log_every: usize,
    /// Steps between evaluations. Default: 100.
    pub eval_every: usize,
    /// Sequences in the fixed evaluation set (generated tasks). Default: 512.
    pub eval_size: usize,
    /// Steps between checkpoints (one is always written at the end). Default: 500.
    pub checkpoint_every: usize,
    /// Newest checkpoints kept on disk. Default: 2.
    pub keep_checkpoints: usize,
    /// Steps between per-head weight snapshots; 0 turns them off. Default: 50.
    pub snapshot_every: usize,
    /// More snapshots, spaced evenly in the logarithm of the step: this many a decade
    /// (steps 1, 2, 3, 4, 5, 6, 8, 10, 13, 16, 20, ... for 10), dense early, where heads
    /// first appear (Chen et al. 2024 see syntactic attention appear abruptly early in
    /// training). 0 (the default) adds none; with snapshots off it adds none either.
    #[serde(skip_serializing_if = "is_zero")]
    pub snapshots_per_decade: usize,
    /// Stop once eval token accuracy reaches this (checked at evaluations). Default: unset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_accuracy: Option<f64>,
    /// CPU threads for flex and ndarray; unset uses every core. Default: unset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub threads: Option<usize>,
    /// Parts each batch is split into for forward and backward, run at the same time on the
    /// CPU's cores; their gradients are added, so the update is the batch's up to float
    /// rounding. 2 trains about 1.9x faster on two cores. The numbers depend on this value,
    /// never on the thread count. With dropout the parts take turns; wgpu ignores it.
    /// Default: 1 (the numbers of runs made before it existed).
    pub shards: usize,
}

impl Default for TrainConfig {
    fn default() -> Self {
        Self {
            steps: 2000,
            batch_size: 64,
            lr: 1e-3,
            warmup_steps: 100,
            schedule: Schedule::Cosine,
            min_lr_ratio: 0.1,
            weight_decay: 0.01,
            grad_clip: 1.0,
            log_every: 10,
            eval_every: 100,
            eval_size: 512,
            checkpoint_every: 500,
            keep_checkpoints: 2,
            snapshot_every: 50,
            snapshots_per_decade: 0,
            target_accuracy: None,
            threads: None,
            shards: 1,
        }
    }
}

/// A config that could not be read, parsed or accepted.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error(
        "cannot read config file {path}: {error}; expected a TOML file such as configs/reverse.toml"
    )]
    Read {
        /// The file.
        path: PathBuf,
        /// Why. Not a `source`: the message already says it, and `error: {e:#}` in main would
        /// print it twice.
        error: std::io::Error,
    },
    /// TOML syntax, unknown key or wrong type in the file (the message gives line and column,
    /// and a close match for a misspelt key or name).
    #[error("{path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// toml's message, with the line and a pointer.
        message: String,
    },
    /// A `--set` override is malformed or does not fit the config.
    #[error("--set {assignment}: {message}")]
    Override {
        /// The override as given.
        assignment: String,
        /// What is wrong.
        message: String,
    },
    /// A value out of its accepted range.
    #[error("{key} = {value} is out of range: {expected}")]
    Range {
        /// Config key, e.g. `train.lr`.
        key: &'static str,
        /// The value given.
        value: String,
        /// What is accepted.
        expected: &'static str,
    },
    /// `name` is not a directory name.
    #[error(
        "name = \"{value}\" is not a run name: {problem}; a run name is one directory name \
         under runs/ (letters, digits, `-`, `_`, `.`), or pass --out to choose the directory"
    )]
    Name {
        /// The name, or its start.
        value: String,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// The `[train]` section is out of range (a [`ConfigError::Range`] inside).
    #[error("{path}: {error}")]
    Train {
        /// The config file.
        path: PathBuf,
        /// Why.
        error: Box<ConfigError>,
    },
    /// A size so large that one tensor of the run would hold more than
    /// [`MAX_TENSOR_VALUES`] values.
    #[error(
        "{path}: {what} would hold {values:.2e} values, but a tensor must hold at most {max} \
         (2^31) in headlab's small-model experiments; lower the sizes named",
        max = MAX_TENSOR_VALUES
    )]
    TooLarge {
        /// The config file.
        path: PathBuf,
        /// The tensor and the keys that size it.
        what: String,
        /// How many values it would hold (saturating).
        values: f64,
    },
    /// The task section could not be built.
    #[error("{path}: {error}")]
    Task {
        /// The config file.
        path: PathBuf,
        /// Why (not a `source`, so the chain does not repeat it).
        error: tasks::TaskError,
    },
    /// The model section does not fit together.
    #[error("{path}: {error}")]
    Model {
        /// The config file.
        path: PathBuf,
        /// Why (not a `source`, so the chain does not repeat it).
        error: model::ConfigError,
    },
    /// An imported checkpoint given to `train`.
    #[error(
        "{path} is an imported model (from {checkpoint}, by headlab import): headlab trains only \
         models it initialises itself; inspect it with `headlab inspect RUN`"
    )]
    Imported {
        /// The config file.
        path: PathBuf,
        /// The checkpoint it was imported from.
        checkpoint: PathBuf,
    },
}

/// A loaded config with the task it describes, checked end to end.
#[derive(Debug, Clone)]
pub struct ResolvedRun {
    /// The config after overrides and defaults.
    pub config: RunConfig,
    /// The task built from `config.task`.
    pub task: Task,
    /// The sizes the model takes from the task.
    pub io: EncoderIo,
}

/// The most seeds one process trains together (`train --seeds`, a sweep's `group_seeds`,
/// `bench --seeds`): a bound on what a seed group allocates.
pub const MAX_GROUP_SEEDS: usize = 1024;

/// Stream of the evaluation set's seed, apart from the training batches' streams (their
/// step numbers) and dropout's.
const EVAL_STREAM: u64 = u64::MAX;

/// The dotted path (under `path`) of the first value where `a` and `b` differ, one of them
/// absent included.
fn first_leaf_difference(a: &toml::Value, b: &toml::Value, path: &str) -> Option<String> {
    let (toml::Value::Table(a_table), toml::Value::Table(b_table)) = (a, b) else {
        return (a != b).then(|| path.to_string());
    };
    a_table.keys().chain(b_table.keys()).find_map(|key| {
        let inner = match path {
            "" => key.clone(),
            _ => format!("{path}.{key}"),
        };
        match (a_table.get(key), b_table.get(key)) {
            (Some(a), Some(b)) => first_leaf_difference(a, b, &inner),
            (a, b) => (a != b).then_some(inner),
        }
    })
}

impl RunConfig {
    /// `self` with `other`'s stopping rules, `train.steps` and `train.target_accuracy`: the
    /// keys a resumed run may change (`train --resume`), since they say only when it stops.
    /// Equal to `other` exactly when the two differ in nothing else.
    pub fn with_stopping_rules_of(&self, other: &RunConfig) -> RunConfig {
        let mut config = self.clone();
        config.train.steps = other.train.steps;
        config.train.target_accuracy = other.train.target_accuracy;
        config
    }

    /// The first key where `self` and `other` differ, dotted down to the value
    /// (`train.steps`, not `train`); `None` when they are equal.
    pub fn first_difference(&self, other: &RunConfig) -> Option<String> {
        first_leaf_difference(&self.as_toml(), &other.as_toml(), "")
    }

    /// The value at the dotted `key` ([`RunConfig::first_difference`]'s), as TOML writes it;
    /// `unset` where the config has none.
    pub fn value_at(&self, key: &str) -> String {
        let mut value = &self.as_toml();
        for part in key.split('.') {
            match value.get(part) {
                Some(inner) => value = inner,
                None => return "unset".to_string(),
            }
        }
        value.to_string()
    }

    fn as_toml(&self) -> toml::Value {
        toml::Value::try_from(self).expect("a run config serializes to TOML")
    }

    /// The run's fixed evaluation set: what training reports accuracy on, and what `inspect`
    /// measures ablations on.
    pub fn eval_examples(&self, task: &Task) -> Vec<Example> {
        task.eval_set(self.train.eval_size, mix_seed(self.seed, EVAL_STREAM))
    }

    /// Reads `path`, applies `overrides` (`key.path=value`, TOML values; bare words are
    /// strings) and fills the name from the file stem when unset.
    pub fn load(path: &Path, overrides: &[String]) -> Result<Self, ConfigError> {
        let text = crate::small_file::read_to_string(path, crate::small_file::CONFIG_LIMIT)
            .map_err(|error| ConfigError::Read {
                path: path.to_path_buf(),
                error,
            })?;
        Self::parse(&text, path, overrides)
    }

    /// [`RunConfig::load`] for a config already read: `text` is the content of `path`, which
    /// names the file in messages and gives the default name.
    pub fn parse(text: &str, path: &Path, overrides: &[String]) -> Result<Self, ConfigError> {
        let parse_error = |e: toml::de::Error| ConfigError::Parse {
            path: path.to_path_buf(),
            message: explain_parse_error(text, &e),
        };
        // Parse the text itself first: its errors carry line numbers.
        let mut config: RunConfig = toml::from_str(text).map_err(parse_error)?;
        if !overrides.is_empty() {
            let mut table: toml::Table = toml::from_str(text).map_err(parse_error)?;
            for assignment in overrides {
                apply_override(&mut table, assignment)?;
                // Deserialize after each override so a type error names the one at fault.
                config =
                    RunConfig::deserialize(toml::Value::Table(table.clone())).map_err(|e| {
                        ConfigError::Override {
                            assignment: excerpt(assignment, 80),
                            message: explain(&e.to_string()),
                        }
                    })?;
            }
        }
        if config.name.is_empty() {
            config.name = path
                .file_stem()
                .map_or_else(|| "run".to_string(), |s| s.to_string_lossy().into_owned());
        }
        Ok(config)
    }

    /// Parses a resolved config written by [`RunConfig::to_toml`] (a run's `config.toml`).
    pub fn from_toml(path: &Path) -> Result<Self, ConfigError> {
        Self::load(path, &[])
    }

    /// The config as TOML, every default written out. An imported checkpoint's says first
    /// what it is ([`IMPORTED_HEADER`]) and has no `[train]` section: it was never trained
    /// here (read back, the section takes its defaults, which nothing of an import reads).
    pub fn to_toml(&self) -> String {
        let text = toml::to_string_pretty(self).expect("a run config always serializes");
        match self.import {
            None => text,
            Some(_) => format!("{IMPORTED_HEADER}{}", without_section(&text, "train")),
        }
    }

    /// `self` with `overrides` applied (`key.path=value`, as [`RunConfig::load`] takes them);
    /// `path` names the config in messages.
    pub fn with_overrides(&self, path: &Path, overrides: &[String]) -> Result<Self, ConfigError> {
        Self::parse(&self.to_toml(), path, overrides)
    }

    /// Builds the task and checks every section. `path` names the file in messages;
    /// relative dataset paths resolve against the current directory.
    pub fn resolve(self, path: &Path) -> Result<ResolvedRun, ConfigError> {
        check_name(&self.name).map_err(|error| ConfigError::Train {
            path: path.to_path_buf(),
            error: Box::new(error),
        })?;
        self.train.validate().map_err(|error| ConfigError::Train {
            path: path.to_path_buf(),
            error: Box::new(error),
        })?;
        let task = self
            .task
            .build(Path::new("."))
            .map_err(|error| ConfigError::Task {
                path: path.to_path_buf(),
                error,
            })?;
        // An imported model's sizes are its checkpoint's; a trained one's, its task's.
        let io = match &self.import {
            Some(import) => EncoderIo {
                vocab_size: import.vocab_size,
                n_outputs: import.vocab_size,
                max_seq_len: import.max_positions,
            },
            None => EncoderIo {
                vocab_size: task.input_vocab(),
                n_outputs: task.output_vocab(),
                max_seq_len: task.seq_len(),
            },
        };
        // Sizes first: the model's checks list the divisors of d_model by trial division,
        // which takes minutes for an absurd d_model that this check refuses at once.
        // Training's tensors bound a trained run; an imported one is never trained (its size
        // was bounded by the import, its probes are bounded by inspect).
        let over_limit = match self.import {
            None => largest_tensor_over_limit(&self, &task, &io),
            Some(_) => None,
        };
        if let Some((what, values)) = over_limit {
            return Err(ConfigError::TooLarge {
                path: path.to_path_buf(),
                what,
                values: values as f64,
            });
        }
        self.model
            .validate(&io)
            .map_err(|error| ConfigError::Model {
                path: path.to_path_buf(),
                error,
            })?;
        Ok(ResolvedRun {
            config: self,
            task,
            io,
        })
    }
}

impl ResolvedRun {
    /// Refuses a run headlab cannot train: an imported checkpoint (`train` initialises its
    /// own models; fine-tuning an import is not part of headlab). `path` names the config.
    pub fn check_trainable(&self, path: &Path) -> Result<(), ConfigError> {
        match &self.config.import {
            None => Ok(()),
            Some(import) => Err(ConfigError::Imported {
                path: path.to_path_buf(),
                checkpoint: import.source.clone(),
            }),
        }
    }
}

fn is_zero(value: &usize) -> bool {
    *value == 0
}

/// The most log-spaced snapshots a decade may ask for: beyond it consecutive steps are taken
/// anyway, for the whole first decades.
pub const MAX_SNAPSHOTS_PER_DECADE: usize = 100;

impl TrainConfig {
    /// Checks ranges, naming the key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.snapshots_per_decade > MAX_SNAPSHOTS_PER_DECADE {
            return Err(ConfigError::Range {
                key: "train.snapshots_per_decade",
                value: self.snapshots_per_decade.to_string(),
                expected: "it must be at most 100 (0 adds no log-spaced snapshot)",
            });
        }
        self.check_counts()?;
        self.check_optimiser()?;
        self.check_parallelism()
    }

    /// Checks that every count and interval is at least 1.
    fn check_counts(&self) -> Result<(), ConfigError> {
        let at_least_one = [
            ("train.steps", self.steps),
            ("train.batch_size", self.batch_size),
            ("train.log_every", self.log_every),
            ("train.eval_every", self.eval_every),
            ("train.eval_size", self.eval_size),
            ("train.checkpoint_every", self.checkpoint_every),
            ("train.keep_checkpoints", self.keep_checkpoints),
            ("train.shards", self.shards),
        ];
        for (key, value) in at_least_one {
            if value == 0 {
                return Err(ConfigError::Range {
                    key,
                    value: "0".into(),
                    expected: "it must be at least 1",
                });
            }
        }
        Ok(())
    }

    /// Checks the learning rate and its schedule, weight decay, clipping and the target
    /// accuracy.
    fn check_optimiser(&self) -> Result<(), ConfigError> {
        let lr = self.lr;
        check_range("train.lr", lr, lr.is_finite() && lr > 0.0, "it must be > 0")?;
        let ratio = self.min_lr_ratio;
        check_range(
            "train.min_lr_ratio",
            ratio,
            (0.0..=1.0).contains(&ratio),
            "it must be in [0, 1]",
        )?;
        let wd = self.weight_decay;
        check_range(
            "train.weight_decay",
            wd,
            wd.is_finite() && wd >= 0.0,
            "it must be >= 0",
        )?;
        let clip = self.grad_clip;
        check_range(
            "train.grad_clip",
            clip,
            clip.is_finite() && clip >= 0.0,
            "it must be >= 0 (0 turns clipping off)",
        )?;
        if let Some(target) = self.target_accuracy {
            check_range(
                "train.target_accuracy",
                target,
                target > 0.0 && target <= 1.0,
                "it must be in (0, 1]",
            )?;
        }
        Ok(())
    }

    /// Checks the thread count and that every shard gets a sequence of the batch.
    fn check_parallelism(&self) -> Result<(), ConfigError> {
        // The upper bound catches a typo before the thread pool tries to start a million
        // threads (it would hang long after the run directory was made).
        if let Some(threads) = self.threads.filter(|t| !(1..=MAX_THREADS).contains(t)) {
            return Err(ConfigError::Range {
                key: "train.threads",
                value: threads.to_string(),
                expected: "it must be from 1 to 1024, or unset to use every core",
            });
        }
        if self.shards > self.batch_size {
            return Err(ConfigError::Range {
                key: "train.shards",
                value: self.shards.to_string(),
                expected: "it must be at most train.batch_size (each shard holds at least one \
                           sequence); 2 suits a two-core CPU",
            });
        }
        Ok(())
    }
}

/// `Ok` when `ok`, else the range error for `key`'s `value` with what is `expected`.
fn check_range(
    key: &'static str,
    value: f64,
    ok: bool,
    expected: &'static str,
) -> Result<(), ConfigError> {
    if ok {
        Ok(())
    } else {
        Err(ConfigError::Range {
            key,
            value: model::error::show_value(value),
            expected,
        })
    }
}

/// A config's run name must pass [`crate::name::problem`], the one rule for run names.
fn check_name(name: &str) -> Result<(), ConfigError> {
    let problem = crate::name::problem(name);
    match problem {
        None => Ok(()),
        Some(problem) => Err(ConfigError::Name {
            value: excerpt(name, 40),
            problem,
        }),
    }
}

/// At most `max_chars` characters of `text` for a message, with the total length when cut
/// (a 50 MB value must not make a 50 MB message), and control characters escaped.
pub fn excerpt(text: &str, max_chars: usize) -> String {
    let count = text.chars().count();
    let shown: String = text
        .chars()
        .take(max_chars)
        .flat_map(|c| {
            let escaped: Vec<char> = if c.is_control() {
                c.escape_default().collect()
            } else {
                vec![c]
            };
            escaped
        })
        .collect();
    if count <= max_chars {
        shown
    } else {
        format!("{shown}... ({count} characters)")
    }
}

/// Most CPU threads `train.threads` may ask for.
const MAX_THREADS: usize = 1024;

/// Most values one tensor of a run may hold: 2^31, 8 GiB of f32. Far beyond the small
/// encoders headlab trains, it turns an absurd size (`d_model = 100000000000`, a typo in
/// `batch_size`) into a message naming the keys, before the run directory is touched, where
/// the allocation would otherwise panic in the middle of the run.
pub const MAX_TENSOR_VALUES: u128 = 1 << 31;

/// The first tensor the run would create with more than [`MAX_TENSOR_VALUES`] values:
/// what it is (and which keys size it) and how many values it would hold. An upper bound:
/// every layout is counted as if each head read the full input.
fn largest_tensor_over_limit(
    config: &RunConfig,
    task: &Task,
    io: &EncoderIo,
) -> Option<(String, u128)> {
    let model = &config.model;
    let train = &config.train;
    let (d, h, dh, ff) = (
        model.d_model,
        model.n_heads,
        model.resolved_d_head(),
        model.d_ff,
    );
    let (vocab, outputs, seq) = (io.vocab_size, io.n_outputs, io.max_seq_len);
    // Generated tasks draw `eval_size` evaluation sequences; the file task holds its own
    // split. Evaluation runs in chunks of at most EVAL_CHUNK sequences, which can be more
    // rows than a training batch: each is checked, and named, on its own.
    let (eval_sequences, eval_rows_key) = if task.name() == "file" {
        (
            task.eval_set(0, 0).len(),
            "an evaluation chunk (min(256, the dataset's evaluation records)",
        )
    } else {
        (
            train.eval_size,
            "an evaluation chunk (min(256, train.eval_size) sequences",
        )
    };
    let eval_rows = eval_sequences.min(tasks::batch::EVAL_CHUNK);
    let layer = product(&[4, d, h, dh]).saturating_add(product(&[2, d, ff]));
    let parameters = product(&[model.n_layers])
        .saturating_mul(layer)
        .saturating_add(product(&[vocab, d]))
        .saturating_add(product(&[seq, d]))
        .saturating_add(product(&[outputs, d]));
    [
        (
            "the embedding (the task's vocabulary x model.d_model)",
            product(&[vocab, d]),
        ),
        (
            "the position table (the task's sequence length x model.d_model)",
            product(&[seq, d]),
        ),
        (
            "a layer's q/k/v projection (model.d_model x 3 x model.n_heads x the head size)",
            product(&[d, 3, h, dh]),
        ),
        (
            "a feed-forward layer (model.d_model x model.d_ff)",
            product(&[d, ff]),
        ),
        (
            "the output layer (model.d_model x the task's classes)",
            product(&[d, outputs]),
        ),
        (
            "the model (model.n_layers layers of model.d_model, model.n_heads, model.d_ff)",
            parameters,
        ),
    ]
    .map(|(what, values)| (what.to_string(), values))
    .into_iter()
    .chain(
        [
            (
                "a training batch (train.batch_size sequences",
                train.batch_size,
            ),
            (eval_rows_key, eval_rows),
        ]
        .into_iter()
        .flat_map(|(rows_key, rows)| activations(rows_key, rows, model, seq, outputs)),
    )
    .chain([(
        "the evaluation set (train.eval_size x the task's sequence length)".to_string(),
        product(&[eval_sequences, seq]),
    )])
    .find(|(_, values)| *values > MAX_TENSOR_VALUES)
}

/// Every activation tensor of a forward pass over `rows` sequences ([`forward_activations`]),
/// each named with the key (`rows_key`, an open parenthesis to close) that sets the row count.
fn activations(
    rows_key: &str,
    rows: usize,
    model: &EncoderConfig,
    seq: usize,
    outputs: usize,
) -> impl Iterator<Item = (String, u128)> {
    forward_activations(model, seq, outputs)
        .into_iter()
        .map(move |a| {
            (
                format!("{rows_key}) x {}", a.shape),
                a.values_per_sequence.saturating_mul(rows as u128),
            )
        })
}

/// Sets `key.path` in `table` to `value` (parsed as a TOML value; a bare word is a string).
fn apply_override(table: &mut toml::Table, assignment: &str) -> Result<(), ConfigError> {
    let fail = |message: String| ConfigError::Override {
        assignment: excerpt(assignment, 80),
        message,
    };
    let (key, raw) = assignment
        .split_once('=')
        .ok_or_else(|| fail("expected key.path=value, e.g. --set train.lr=3e-4".into()))?;
    let (key, raw) = (key.trim(), raw.trim());
    let segments: Vec<&str> = key.split('.').collect();
    if segments.iter().any(|s| s.is_empty()) {
        return Err(fail(format!("`{key}` is not a key path like train.lr")));
    }
    let value = toml::from_str::<toml::Table>(&format!("value = {raw}"))
        .ok()
        .and_then(|mut t| t.remove("value"))
        .unwrap_or_else(|| toml::Value::String(raw.to_string()));

    let (last, parents) = segments.split_last().expect("split yields one segment");
    let mut current = table;
    for (depth, segment) in parents.iter().enumerate() {
        let entry = current
            .entry(segment.to_string())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        current = entry.as_table_mut().ok_or_else(|| {
            fail(format!(
                "`{}` is a value, not a section; expected a key path like train.lr or \
                 model.n_heads",
                segments[..=depth].join(".")
            ))
        })?;
    }
    current.insert(last.to_string(), value);
    Ok(())
}

/// toml's message for an error in the config file `text`, made more helpful: a close match
/// for a misspelt key or name, and the key and line at fault when toml could only point at
/// the `[task]` header.
fn explain_parse_error(text: &str, error: &toml::de::Error) -> String {
    let mut message = explain(&error.to_string());
    let Some(span) = error.span() else {
        return message;
    };
    let header_line = text[..span.start.min(text.len())].matches('\n').count();
    let at_task_header = text
        .lines()
        .nth(header_line)
        .is_some_and(|line| line.trim_start().starts_with("[task]"));
    if !at_task_header {
        return message;
    }
    let table: Option<toml::Table> = toml::from_str(text).ok();
    let task = table.as_ref().and_then(|t| t.get("task")?.as_table());
    let Some(key) = task.and_then(TaskConfig::key_at_fault) else {
        return message;
    };
    // The key's own line: the first `key =` after the header, before the next section.
    let key_line = text
        .lines()
        .enumerate()
        .skip(header_line + 1)
        .take_while(|(_, line)| !line.trim_start().starts_with('['))
        .find(|(_, line)| {
            line.trim_start()
                .strip_prefix(key.as_str())
                .is_some_and(|rest| rest.trim_start().starts_with('='))
        });
    match key_line {
        Some((index, _)) => message.push_str(&format!("\nat `task.{key}`, line {}", index + 1)),
        None => message.push_str(&format!("\nat `task.{key}`")),
    }
    message
}

/// serde's message with a hint added (see [`explain_toml`]), and what a missing `task` or
/// `kind` can be.
fn explain(message: &str) -> String {
    let mut message = explain_toml(message);
    let kinds = TaskConfig::KINDS.join(", ");
    if message.contains("missing field `task`") {
        message.push_str(&format!(
            "\nevery config needs a [task] section with `kind` = one of {kinds}"
        ));
    } else if message.contains("missing field `kind`") {
        message.push_str(&format!("\n[task] needs `kind` = one of {kinds}"));
    } else if message.contains("missing field `path`") {
        message
            .push_str("\nkind = \"file\" needs `path` = a JSONL file, e.g. \"data/sample.jsonl\"");
    }
    message
}

/// toml's (and serde's) message for any TOML file headlab reads (a config, a sweep file),
/// made readable: each quoted line cut short, serde's type names in words ("expected a whole
/// number"), "did you mean `d_ff`?" after an unknown field or variant close to an accepted
/// one, and what a duplicate key breaks. The one explainer of TOML errors; each file's
/// reader adds what only it knows.
pub fn explain_toml(message: &str) -> String {
    // toml quotes the offending line (and points under it): cut each line short, so a 50 MB
    // value does not make a 50 MB message; a list of accepted names is shown whole (it is
    // as long as a section has keys, at most a few hundred characters, plus the given name).
    let mut message = message
        .trim_end()
        .lines()
        .map(|line| {
            let limit = if line.contains("expected one of") {
                1000
            } else {
                160
            };
            in_words(&excerpt(line, limit))
        })
        .collect::<Vec<_>>()
        .join("\n");
    if let Some((at, hint)) = did_you_mean(&message) {
        message.insert_str(at, &hint);
    }
    if message.ends_with("duplicate key") {
        message.push_str("; each key may appear once per section");
    }
    message
}

/// serde's names of Rust types, as a person reads them: "expected usize" is "expected a whole
/// number (0 or more)".
fn in_words(line: &str) -> String {
    const WORDS: [(&str, &str); 8] = [
        ("expected usize", "expected a whole number (0 or more)"),
        ("expected u64", "expected a whole number (0 or more)"),
        ("expected u32", "expected a whole number (0 or more)"),
        ("expected u8", "expected a whole number (0 or more)"),
        ("expected i64", "expected a whole number"),
        ("expected i32", "expected a whole number"),
        ("expected f64", "expected a number"),
        ("expected f32", "expected a number"),
    ];
    WORDS.iter().fold(line.to_string(), |line, (rust, words)| {
        line.replace(rust, words)
    })
}

/// Other names people give the accepted values: `rope` is `rotary`, `cuda` is `wgpu`.
const SYNONYMS: [(&str, &str); 9] = [
    ("rope", "rotary"),
    ("rotary_embedding", "rotary"),
    ("sin", "sinusoidal"),
    ("sine", "sinusoidal"),
    ("sincos", "sinusoidal"),
    ("absolute", "learned"),
    ("cuda", "wgpu"),
    ("gpu", "wgpu"),
    ("cpu", "flex"),
];

/// Every key of every section (`train.lr`, `model.n_heads`, ...), read off a default config.
fn section_keys() -> Vec<String> {
    let Ok(config) = toml::from_str::<RunConfig>("[task]\nkind = \"copy\"\n") else {
        return Vec::new();
    };
    let Ok(table) = config.to_toml().parse::<toml::Table>() else {
        return Vec::new();
    };
    let mut keys = Vec::new();
    for (section, value) in &table {
        if let toml::Value::Table(inner) = value {
            keys.extend(inner.keys().map(|key| format!("{section}.{key}")));
        }
    }
    keys
}

/// For "unknown field `x`, expected one of `a`, `b`" (or "unknown variant"): where to insert
/// a hint (the end of that line) and the hint: an accepted name close to `x`, the accepted
/// name `x` is another word for (`rope`: `rotary`), or at the top level the section that
/// has a key `x` (`lr`: `train.lr`).
fn did_you_mean(message: &str) -> Option<(usize, String)> {
    let (start, end) = ["unknown field `", "unknown variant `"]
        .iter()
        .find_map(|marker| {
            let start = message.find(marker)? + marker.len();
            Some((start, start + message[start..].find('`')?))
        })?;
    let given = message[start..end].to_lowercase();
    let line_end = message[end..].find('\n').map_or(message.len(), |n| end + n);
    // The accepted names are the backquoted words after the given one on the same line.
    let accepted: Vec<&str> = message[end + 1..line_end]
        .split('`')
        .skip(1)
        .step_by(2)
        .collect();
    let hint = |name: &str| Some((line_end, format!("; did you mean `{name}`?")));
    if let Some((_, name)) = SYNONYMS
        .iter()
        .find(|(other, name)| *other == given && accepted.contains(name))
    {
        return hint(name);
    }
    // At the top level (the sections are among the accepted names), a key of a section.
    if accepted.contains(&"train") && accepted.contains(&"model") {
        let matches: Vec<String> = section_keys()
            .into_iter()
            .filter(|key| key.split_once('.').is_some_and(|(_, name)| name == given))
            .collect();
        if let [key] = matches.as_slice() {
            return hint(key);
        }
    }
    let (distance, best) = accepted
        .into_iter()
        // Optimal string alignment: inserts, deletions, substitutions and swaps of two
        // neighbours, each one edit.
        .map(|name| (strsim::osa_distance(&given, &name.to_lowercase()), name))
        .min_by_key(|(distance, _)| *distance)?;
    // One edit per four characters, at least one: close enough to be a typo, not a guess.
    let close = distance <= 1 + given.chars().count() / 4;
    close.then(|| (line_end, format!("; did you mean `{best}`?")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 66, item 6: an imported run's config says what it is and has no `[train]`;
    /// read back, it is the same config.
    #[test]
    fn an_imported_config_says_what_it_is_and_has_no_train_section() {
        let mut config: RunConfig = toml::from_str("[task]\nkind = \"grammar\"\n").unwrap();
        assert!(config.to_toml().contains("[train]\n"));
        config.import = Some(ImportRecord {
            format: "huggingface-bert".into(),
            architecture: "BertForMaskedLM".into(),
            source: "/models/bert".into(),
            config_sha256: "aa".into(),
            weights_sha256: "bb".into(),
            tokenizer_sha256: "cc".into(),
            vocab_size: 60,
            max_positions: 16,
            shared_layers: false,
            parameters: Some(17244),
        });
        let text = config.to_toml();
        assert!(text.starts_with(IMPORTED_HEADER), "{text}");
        assert!(
            !text.contains("\n[train") && !text.contains("warmup_steps"),
            "{text}"
        );
        for section in ["[task]\n", "[model]\n", "[import]\n"] {
            assert!(text.contains(section), "{section}: {text}");
        }
        assert!(!text.contains("\n\n\n"), "{text}");
        let read: RunConfig = toml::from_str(&text).unwrap();
        assert_eq!(read, config);
        assert_eq!(
            without_section(
                "a = 1\n\n[train]\nb = 2\n\n[train.x]\nc = 3\n\n[z]\nd = 4\n",
                "train"
            ),
            "a = 1\n\n[z]\nd = 4\n"
        );
    }

    #[test]
    fn a_run_name_is_one_directory_name() {
        for good in ["reverse", "seed-3", "a.b_c", "exp 2"] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        for (bad, why) in [
            ("", "empty"),
            (".", "`.` and `..`"),
            ("..", "`.` and `..`"),
            ("../../escape", "separator"),
            ("/tmp/x", "separator"),
            ("a\\b", "separator"),
            ("a\nb", "control"),
        ] {
            let message = check_name(bad).unwrap_err().to_string();
            assert!(message.contains(why), "{bad:?}: {message}");
        }
        let long = "x".repeat(256);
        let message = check_name(&long).unwrap_err().to_string();
        assert!(
            message.contains("255 bytes") && message.len() < 400,
            "{message}"
        );
    }

    #[test]
    fn an_excerpt_is_short_whatever_the_value() {
        assert_eq!(excerpt("short", 10), "short");
        assert_eq!(excerpt("a\nb", 10), "a\\nb");
        let huge = "y".repeat(50_000_000);
        assert_eq!(excerpt(&huge, 5), "yyyyy... (50000000 characters)");
    }

    #[test]
    fn a_huge_value_in_a_config_makes_a_short_message() {
        // A 5 MB string where a number belongs: toml quotes the line, which must be cut.
        let text = format!(
            "[task]\nkind = \"reverse\"\nseq_len = \"{}\"\n",
            "9".repeat(5_000_000)
        );
        let error = RunConfig::parse(&text, Path::new("big.toml"), &[]).unwrap_err();
        let message = error.to_string();
        assert!(message.len() < 2_000, "{} bytes", message.len());
        assert!(message.contains("big.toml"), "{}", &message[..200]);
        let long_set = format!("train.steps={}", "n".repeat(1_000_000));
        let error = RunConfig::parse(
            "[task]\nkind = \"copy\"\n",
            Path::new("c.toml"),
            &[long_set],
        );
        let message = error.unwrap_err().to_string();
        assert!(message.len() < 2_000, "{} bytes", message.len());
        assert!(
            message.starts_with("--set train.steps=nnn"),
            "{}",
            &message[..100]
        );
    }

    #[test]
    fn rust_type_names_become_words() {
        assert_eq!(
            explain("invalid value: integer `-8`, expected usize"),
            "invalid value: integer `-8`, expected a whole number (0 or more)"
        );
        assert_eq!(
            explain("invalid type: string \"high\", expected f64"),
            "invalid type: string \"high\", expected a number"
        );
    }

    #[test]
    fn other_names_and_keys_of_sections_get_a_suggestion() {
        let rope = "unknown variant `rope`, expected one of `sinusoidal`, `learned`, `rotary`, \
                    `none`";
        assert!(
            explain(rope).ends_with("; did you mean `rotary`?"),
            "{}",
            explain(rope)
        );
        let lr = "unknown field `lr`, expected one of `name`, `seed`, `backend`, `task`, \
                  `model`, `train`";
        assert!(
            explain(lr).ends_with("; did you mean `train.lr`?"),
            "{}",
            explain(lr)
        );
        // A synonym whose value is not among the accepted names is no hint.
        let cpu = "unknown variant `cpu`, expected one of `split`, `wide`";
        assert_eq!(explain(cpu), cpu);
    }

    #[test]
    fn close_names_get_a_suggestion_and_far_ones_do_not() {
        let message = "unknown field `d_fff`, expected one of `d_model`, `d_ff`\nin `model`";
        assert_eq!(
            explain(message),
            "unknown field `d_fff`, expected one of `d_model`, `d_ff`; did you mean `d_ff`?\n\
             in `model`"
        );
        let message = "unknown variant `tpu`, expected one of `flex`, `ndarray`, `wgpu`";
        assert_eq!(explain(message), message);
        // Far by spelling, but another name for it: headlab reaches GPUs through wgpu.
        let message = "unknown variant `cuda`, expected one of `flex`, `ndarray`, `wgpu`";
        assert!(explain(message).ends_with("; did you mean `wgpu`?"));
    }
}
