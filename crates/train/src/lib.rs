//! Config-driven training of headlab encoders on toy sequence tasks.
//!
//! A run goes: [`config::RunConfig::load`] (TOML plus `--set` overrides) ->
//! [`config::RunConfig::resolve`] (build the task, check the model) ->
//! [`trainer::train`] -> a run directory ([`run_dir::RunDir`], the one owner of its layout)
//! that `inspect` reads.

pub mod atomic;
pub mod backend;
pub mod batch;
pub mod checkpoint;
pub mod cli;
pub mod config;
pub mod metrics;
pub mod optim_stack;
pub mod run_dir;
pub mod schedule;
pub mod snapshot;
pub mod step;
pub mod stop;
pub mod tasks;
pub mod tensor_file;
pub mod trainer;
pub mod weights;

pub use backend::{BackendKind, WgpuAdapter, wgpu_adapter};
pub use config::{ResolvedRun, RunConfig, TrainConfig};
pub use run_dir::RunDir;
pub use stop::StopSignal;
pub use trainer::{Outcome, Progress, RunSummary, TrainOptions, train};
