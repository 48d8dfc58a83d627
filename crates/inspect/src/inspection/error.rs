//! Why a run could not be measured (writing its report fails apart: the `report` crate's
//! errors).

use run::snapshot::SnapshotError;

use crate::circuits::CircuitError;
use crate::load::reading::ReadingError;
use crate::measures::relations_over_training::OverTrainingError;

/// A run that could not be measured.
#[derive(Debug, thiserror::Error)]
pub enum MeasureError {
    /// A probe batch too large for the run, or input the model cannot read (sentences its
    /// tokenizer cannot read as words, a mask it does not have).
    #[error(transparent)]
    Reading(#[from] ReadingError),
    /// A snapshot that does not load.
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    /// A circuit whose eigenvalues did not converge.
    #[error(transparent)]
    Circuits(#[from] CircuitError),
}

impl From<OverTrainingError> for MeasureError {
    fn from(error: OverTrainingError) -> Self {
        match error {
            OverTrainingError::Snapshot(error) => MeasureError::Snapshot(error),
            OverTrainingError::Reading(error) => MeasureError::Reading(error),
        }
    }
}
