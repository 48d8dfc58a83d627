//! Config-driven training of headlab encoders on toy sequence tasks.
//!
//! A run goes: [`config::RunConfig::load`] (TOML plus `--set` overrides) ->
//! [`config::RunConfig::resolve`] (build the task, check the model) ->
//! [`trainer::train`] -> a run directory that `inspect` reads:
//! `config.toml`, `metrics.jsonl`, `checkpoints/step-N/`, `snapshots/step-N.safetensors`,
//! `model.safetensors`.

pub mod atomic;
pub mod backend;
pub mod batch;
pub mod checkpoint;
pub mod config;
pub mod metrics;
pub mod schedule;
pub mod snapshot;
pub mod step;
pub mod tasks;
pub mod tensor_file;
pub mod trainer;

pub use backend::BackendKind;
pub use config::{ResolvedRun, RunConfig, TrainConfig};
pub use trainer::{Outcome, Progress, RunSummary, TrainOptions, train};
