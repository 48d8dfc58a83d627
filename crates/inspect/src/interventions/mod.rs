//! Interventions: what changes when heads are removed or replaced, built on
//! [`crate::measures`]: [`ablation`], each head's output replaced by its mean or by its
//! output on another input (the zero ablation drop is one of the measures of
//! [`crate::measures::heads`]); [`patching`], heads' clean outputs put back into runs on
//! corrupted inputs; [`pruning`], heads removed one at a time until none is left.

pub mod ablation;
pub mod patching;
pub mod pruning;
