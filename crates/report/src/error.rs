//! Why a report could not be made: a run that could not be measured
//! ([`inspect::inspection::MeasureError`]), or a file that could not be written.

use inspect::inspection::MeasureError;
use run::tensor_file::TensorFileError;

use crate::dir::{ClaimError, WriteError};
use crate::draw::figures::FigureError;

/// A report that could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// Measuring failed; nothing was written.
    #[error(transparent)]
    Measure(#[from] MeasureError),
    /// A tensor file.
    #[error(transparent)]
    Tensors(#[from] TensorFileError),
    /// A figure.
    #[error(transparent)]
    Figure(#[from] FigureError),
    /// Another file.
    #[error(transparent)]
    Write(#[from] WriteError),
    /// `--out` is not a directory a report may be written into, or another `inspect` is
    /// writing there.
    #[error(transparent)]
    Claim(#[from] ClaimError),
}

impl ReportError {
    /// Whether another process was writing the report directory: nothing was done, and
    /// nothing is wrong with the run (`inspect` exits with [`run::dir::EXIT_RUN_IN_USE`]).
    pub fn is_held(&self) -> bool {
        matches!(
            self,
            ReportError::Claim(ClaimError::Claim(run::out_dir::OutDirError::Locked { .. }))
        )
    }
}
