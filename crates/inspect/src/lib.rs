//! Head analysis for headlab runs: measures only. One folder per layer; a module imports only
//! from the folders above it in this list (and from `model`, `tasks` and `run`):
//!
//! - [`load`]: open a run directory ([`load::loaded_run`]), decide how its model reads its input
//!   ([`load::reading`]: the task's tokens or word pieces, the one place that tells them
//!   apart; every measure takes it in its [`load::context::MeasureContext`]), build the
//!   probe batch and run it ([`load::probe`]).
//! - [`circuits`]: what the weights alone say, on the plain-f64 linear algebra of
//!   [`circuits::linalg`]: composition, copying, effective rank; the attention rollout.
//! - [`measures`]: one file per measure. On the probe batch: [`measures::patterns`]
//!   (entropy, confidence, distance, positional kind), [`measures::norms`] (norm-based
//!   attention), [`measures::relations`] (dependency relations), [`measures::heads`] (the
//!   per-head record of `heads.json`). On the evaluation set: [`measures::importance`]
//!   (gradient importance), [`measures::attribution`] (direct logit attribution),
//!   [`measures::logit_lens`], [`measures::masked`] (answers on masked words),
//!   [`measures::ceiling`] (against the task's ceiling), [`measures::agreement`]
//!   (subject-verb agreement). Between heads and runs: [`measures::similarity`],
//!   [`measures::matching`]; through snapshots: [`measures::divergence`],
//!   [`measures::trajectories`]. A new measure is a new file here.
//! - [`interventions`]: what changes when heads are removed or replaced:
//!   [`interventions::ablation`] (zero, mean, resample), [`interventions::pruning`],
//!   [`interventions::relation_ablation`]; on minimal pairs ([`interventions::pair_passes`]):
//!   [`interventions::activation_patching`], [`interventions::attribution_patching`],
//!   [`interventions::path_patching`], gathered in [`interventions::patching`]
//!   (`patching.json`).
//! - [`inspection`]: one run's inspection, the orchestrator of the measures above: everything
//!   a report on one run measures, returned as records ([`inspection::measure`],
//!   [`inspection::Measured`]; its options and errors); [`compare`]: heads matched across
//!   runs ([`compare::compare`]).
//!
//! Nothing here writes a report: the `report` crate writes what is measured (the report
//! directory, figures, pages) and holds the `inspect` and `compare` commands.

pub mod circuits;
pub mod compare;
pub mod inspection;
pub mod interventions;
pub mod load;
pub mod measures;
