//! Why a report could not be written.

use run::snapshot::SnapshotError;
use run::tensor_file::TensorFileError;

use crate::circuits::CircuitError;
use crate::draw::figures::FigureError;
use crate::load::reading::ReadingError;
use crate::report::dir::WriteError;

/// A report that could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// A probe batch too large for the run, or input the model cannot read (sentences its
    /// tokenizer cannot read as words, a mask it does not have).
    #[error(transparent)]
    Reading(#[from] ReadingError),
    /// A tensor file.
    #[error(transparent)]
    Tensors(#[from] TensorFileError),
    /// A snapshot that does not load.
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    /// A figure.
    #[error(transparent)]
    Figure(#[from] FigureError),
    /// A circuit whose eigenvalues did not converge.
    #[error(transparent)]
    Circuits(#[from] CircuitError),
    /// Another file.
    #[error(transparent)]
    Write(#[from] WriteError),
}
