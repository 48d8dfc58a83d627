//! What a seeded measure runs on ([`MeasureContext`]): the model, how it reads its input
//! ([`Reading`]), the task, the run's seed (each measure draws its examples on a stream of its
//! own from it) and the device. One argument in one order, instead of five in two.

use burn::prelude::*;
use model::Encoder;
use tasks::Task;

use crate::load::reading::Reading;
use crate::load::run::LoadedRun;

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
}

impl<'a> MeasureContext<'a> {
    /// A loaded run's model, reading, task, seed and device.
    pub fn of_run(loaded: &'a LoadedRun) -> Self {
        Self {
            model: &loaded.model,
            reading: &loaded.reading,
            task: &loaded.run.task,
            seed: loaded.run.config.seed,
            device: &loaded.device,
        }
    }
}
