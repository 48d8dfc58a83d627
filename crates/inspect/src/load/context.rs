//! What a seeded measure runs on ([`MeasureContext`]): the model, how it reads its input
//! ([`Reading`]), the task, the run's seed (each measure draws its examples on a stream of its
//! own from it), the device and, for a loaded run, its training snapshots. Every measure that
//! runs the model takes it first, then what it reads (the probe, its layers' attention, the
//! eval set); measures of what was already read (similarity, special attention) take that.

use burn::prelude::*;
use model::Encoder;
use tasks::Task;

use crate::load::loaded_run::LoadedRun;
use crate::load::reading::Reading;
use crate::load::snapshots::Snapshots;

/// A model with the task and seed it is measured on.
#[derive(Debug, Clone, Copy)]
pub struct MeasureContext<'a> {
    /// The model, inference-only.
    pub model: &'a Encoder,
    /// How the model reads its input: its task's tokens, or word pieces.
    pub reading: &'a Reading,
    /// The task the examples come from.
    pub task: &'a Task,
    /// The run's seed; each measure mixes in a stream of its own.
    pub seed: u64,
    /// Where the model lives.
    pub device: &'a Device,
    /// The run's training snapshots; none for a model measured without its run directory.
    pub snapshots: Option<Snapshots<'a>>,
}

impl<'a> MeasureContext<'a> {
    /// A loaded run's model, reading, task, seed, device and snapshots.
    pub fn of_run(loaded: &'a LoadedRun) -> Self {
        Self {
            model: &loaded.model,
            reading: &loaded.reading,
            task: &loaded.resolved.task,
            seed: loaded.resolved.config.seed,
            device: &loaded.device,
            snapshots: Some(Snapshots::of_run(loaded)),
        }
    }
}
