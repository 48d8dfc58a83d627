//! Minimal pairs for causal tests: a clean example and a corrupted one that differ in as
//! little as moves the answer at a chosen position. Activation patching runs the corrupted
//! input with some of the clean run's activations put back and asks how much of the clean
//! answer returns. Two kinds ([`PairKind`]) ask two questions: which components carry the
//! token the answer is (answer pairs), and which find where it is (route pairs).

use serde::{Deserialize, Serialize};

use crate::example::Example;

/// How many draws a generator may try before it gives up on a pair (a rule whose answer the
/// changed token does not move, say a sort with the token twice).
pub(super) const MAX_TRIES: usize = 100;

/// What a minimal pair changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PairKind {
    /// The token the answer reads is changed to another: the answer's content moves, every
    /// position it is found by stays (recall: the queried key's value; the sequence tasks:
    /// the token the answer copies or counts).
    Answer,
    /// Where the answer is found moves, every token it could be keeps its place (recall: the
    /// queried key swapped with another pair's key, so the query finds the other value).
    /// Only recall has them.
    Route,
}

impl PairKind {
    /// Both kinds, answer first.
    pub const ALL: [PairKind; 2] = [PairKind::Answer, PairKind::Route];

    /// `answer` or `route`, as in `patching.json`.
    pub fn name(self) -> &'static str {
        match self {
            PairKind::Answer => "answer",
            PairKind::Route => "route",
        }
    }
}

/// A clean example and its corrupted twin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MinimalPair {
    /// The example as drawn.
    pub clean: Example,
    /// The same input with one token changed, and the targets that change gives.
    pub corrupted: Example,
    /// The position whose answer the change moves, the one a patching analysis reads.
    pub position: usize,
    /// The positions of the changed tokens, ascending: one for answer pairs, two (the
    /// swapped keys) for recall's route pairs.
    pub changed: Vec<usize>,
    /// The clean answer at `position`.
    pub clean_answer: u32,
    /// The corrupted answer at `position`.
    pub corrupted_answer: u32,
}

impl MinimalPair {
    /// The pair of `clean` and `corrupted` (which differs from it at `changed`) read at
    /// `position`, if both answers there exist and differ.
    pub(super) fn read(
        clean: Example,
        corrupted: Example,
        position: usize,
        changed: Vec<usize>,
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
