//! Interventions: what changes when heads are removed or replaced, built on
//! [`crate::measures`]: [`ablation`], each head's output replaced by its mean or by its
//! output on another input (the zero ablation drop is one of the measures of
//! [`crate::measures::heads`]); [`patching`], the causal tests on minimal pairs, which
//! gathers [`activation_patching`] (clean heads' outputs or residual stream put back into
//! passes on corrupted inputs), [`path_patching`] (one sender's output through one receiver's
//! input) and [`attribution_patching`] (the first-order estimate), all on the passes
//! [`pair_passes`] holds; [`pruning`], heads removed one at a time until none is left;
//! [`relation_ablation`], what zeroing or resampling each syntactic relation's best head
//! costs on its dependents (word tasks).

pub mod ablation;
pub mod activation_patching;
pub mod attribution_patching;
pub(crate) mod pair_passes;
pub mod patching;
pub mod path_patching;
pub mod pruning;
pub mod relation_ablation;
