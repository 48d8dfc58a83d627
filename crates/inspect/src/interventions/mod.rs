//! Interventions: what changes when heads are removed from the model, built on
//! [`crate::measures`] ([`pruning`]: heads removed one at a time until none is left). The
//! single-head ablation drop is one of the measures of [`crate::measures::heads`].

pub mod pruning;
