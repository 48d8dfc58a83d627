//! Head analysis for headlab runs. One folder per layer; a module imports only from the
//! folders above it in this list (and from `model` and `train`):
//!
//! - [`load`]: open a run directory, build the probe batch and run it.
//! - [`circuits`]: what the weights alone say (composition, copying, effective rank) on
//!   the plain-f64 linear algebra of [`circuits::linalg`]; the attention rollout.
//! - [`measures`]: per-head measures on the probe and the evaluation set (`heads.json`),
//!   head similarity and matching, divergence and trajectories through snapshots.
//! - [`interventions`]: heads removed from the model (pruning).
//! - [`draw`]: figures, `index.html`, `explore.html`, `compare.html`.
//! - [`report`]: one run's report directory ([`report::ReportDir`]) and `inspect`'s
//!   [`report::write_report`]; [`compare`]: heads matched across runs, `compare`'s output.

pub mod circuits;
pub mod compare;
pub mod draw;
pub mod interventions;
pub mod load;
pub mod measures;
pub mod report;
