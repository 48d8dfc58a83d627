//! Why a report could not be written.

use run::snapshot::SnapshotError;
use run::tensor_file::TensorFileError;

use crate::circuits::CircuitError;
use crate::draw::figures::FigureError;
use crate::load::probe::ProbeSizeError;
use crate::load::sentences::PieceProbeError;
use crate::report::dir::WriteError;

/// A report that could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// A probe batch too large for the run.
    #[error(transparent)]
    ProbeSize(#[from] ProbeSizeError),
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
    /// Probe sentences the model's tokenizer could not read as words.
    #[error(transparent)]
    Words(#[from] PieceProbeError),
    /// Another file.
    #[error(transparent)]
    Write(#[from] WriteError),
}
