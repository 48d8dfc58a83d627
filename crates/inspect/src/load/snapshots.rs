//! A run's training snapshots as the measures over training read them ([`Snapshots`]): which
//! there are, the step the final model stands at, and each one's model. Carried by the
//! [`crate::load::context::MeasureContext`] of a loaded run; a model measured without a run
//! directory (an untrained null, a test's hand-built model) has none.

use std::path::{Path, PathBuf};

use model::Encoder;
use run::snapshot::{SnapshotError, list_snapshots};

use crate::load::loaded_run::LoadedRun;

/// The snapshots of a loaded run.
#[derive(Debug, Clone, Copy)]
pub struct Snapshots<'a> {
    loaded: &'a LoadedRun,
}

impl<'a> Snapshots<'a> {
    /// The snapshots of `loaded`'s run directory.
    pub fn of_run(loaded: &'a LoadedRun) -> Self {
        Self { loaded }
    }

    /// `(step, path)` of every snapshot, by step (empty when the run took none).
    pub fn list(&self) -> Vec<(usize, PathBuf)> {
        list_snapshots(&self.loaded.dir.snapshots_dir())
    }

    /// The step the final model stands at: the last metrics step, or the last snapshot's if
    /// later.
    pub fn final_step(&self, snapshots: &[(usize, PathBuf)]) -> usize {
        let last_metric = self.loaded.dir.metrics().last().map_or(0, |r| r.step);
        last_metric.max(snapshots.last().map_or(0, |s| s.0))
    }

    /// The model with the weights of the snapshot at `path` (one of [`Snapshots::list`]), on
    /// the run's device.
    pub fn model(&self, path: &Path) -> Result<Encoder, SnapshotError> {
        self.loaded.snapshot_model(path)
    }
}
