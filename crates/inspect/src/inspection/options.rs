//! What a report measures beyond the defaults ([`MeasureOptions`]): `inspect`'s flags and a
//! sweep's `[inspect]` section, read by [`super::measure`].

use serde::{Deserialize, Serialize};

use crate::interventions::pruning;

/// Sequences in the probe batch unless told otherwise (`inspect --probe`).
pub const DEFAULT_PROBE_SIZE: usize = 64;

/// What a report measures beyond the defaults. Serialized as a report names it
/// (`provenance.json`), with its fields' names.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MeasureOptions {
    /// Sequences in the probe batch.
    pub probe_size: usize,
    /// Accuracy a pruned model may lose and still count as solving the task (0.01: one
    /// point).
    pub prune_tolerance: f64,
    /// Activation patching on the task's minimal pairs (`patching.json`).
    pub patching: bool,
    /// Sentences `relations.json` scores (`inspect --relation-sentences`); `None`:
    /// [`crate::measures::relations::RELATION_SENTENCES`] of the task's, or a treebank's
    /// first [`crate::measures::relations::MAX_TREEBANK_SENTENCES`].
    pub relation_sentences: Option<usize>,
    /// Score `relations.json` on sentences masked as the task masks in training
    /// (`inspect --relations-masked`) rather than whole ones.
    pub relations_masked: bool,
}

impl Default for MeasureOptions {
    fn default() -> Self {
        Self {
            probe_size: DEFAULT_PROBE_SIZE,
            prune_tolerance: pruning::DEFAULT_TOLERANCE,
            patching: true,
            relation_sentences: None,
            relations_masked: false,
        }
    }
}
