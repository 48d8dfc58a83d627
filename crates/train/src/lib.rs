//! Training headlab encoders: the loop for one model, the loop for a seed group trained as
//! one stack, and the `headlab train` command. The tasks come from the `tasks` crate and everything a
//! run directory holds (config, weights, checkpoints, metrics) from the `run` crate.
//!
//! A run goes: [`run::RunConfig::load`] (TOML plus `--set` overrides) ->
//! [`run::RunConfig::resolve`] (build the task, check the model) -> [`trainer::train`] (or
//! [`group::train_group`] for several seeds at once) -> a run directory
//! ([`run::RunDir`]) that `inspect` reads.
//!
//! The map, lowest first (a file imports only from the ones above it):
//! - [`schedule`]: the learning rate at each step.
//! - [`step`]: one step's gradients, over shards of the batch.
//! - [`optim_stack`]: AdamW over a seed stack's parameters.
//! - [`trainer`]: the training loop and its errors.
//! - [`group`]: a seed group's loop, the group trained as one stack.
//! - [`cli`]: the `headlab train` command: its arguments and what it prints.

pub mod cli;
pub mod group;
pub mod optim_stack;
pub mod schedule;
pub mod step;
pub mod trainer;

pub use trainer::{Outcome, Progress, RunSummary, TrainOptions, train};
