//! One example of a task: the input tokens and a target per position.

use serde::{Deserialize, Serialize};

/// One training or evaluation example: input tokens and one target per position.
/// `None` targets are ignored by the loss and by accuracy (e.g. non-query positions in recall).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Example {
    /// Input token ids, each below the task's input vocabulary.
    pub input: Vec<u32>,
    /// One class id per input position, or `None` where the position is not scored.
    pub target: Vec<Option<u32>>,
}
