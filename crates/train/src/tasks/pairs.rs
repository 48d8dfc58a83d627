//! Minimal pairs for causal tests: a clean example and a corrupted one that differ in the one
//! input token the answer at a chosen position depends on, so that the answers there differ.
//! Activation patching runs the corrupted input with some of the clean run's activations put
//! back and asks how much of the clean answer returns.

use serde::{Deserialize, Serialize};

use super::Example;

/// How many draws a generator may try before it gives up on a pair (a rule whose answer the
/// changed token does not move, say a sort with the token twice).
pub(super) const MAX_TRIES: usize = 100;

/// A clean example and its corrupted twin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MinimalPair {
    /// The example as drawn.
    pub clean: Example,
    /// The same input with one token changed, and the targets that change gives.
    pub corrupted: Example,
    /// The position whose answer the change moves, the one a patching analysis reads.
    pub position: usize,
    /// The position of the changed token.
    pub changed: usize,
    /// The clean answer at `position`.
    pub clean_answer: u32,
    /// The corrupted answer at `position`.
    pub corrupted_answer: u32,
}

impl MinimalPair {
    /// The pair of `clean` and `corrupted_input` (which differs from it at `changed`) read at
    /// `position`, if both answers there exist and differ.
    pub(super) fn read(
        clean: Example,
        corrupted: Example,
        position: usize,
        changed: usize,
    ) -> Option<MinimalPair> {
        let clean_answer = (*clean.target.get(position)?)?;
        let corrupted_answer = (*corrupted.target.get(position)?)?;
        (clean_answer != corrupted_answer).then_some(MinimalPair {
            clean,
            corrupted,
            position,
            changed,
            clean_answer,
            corrupted_answer,
        })
    }
}
