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

/// flex has one random generator for all threads: the unit tests that seed it and draw (a
/// model's initial weights, random parameters) take turns, or their draws interleave and a
/// test gets another model than its seed says.
#[cfg(test)]
pub(crate) mod test_rng {
    use std::sync::{Mutex, MutexGuard};

    static DEVICE_RNG: Mutex<()> = Mutex::new(());

    /// Held while a test seeds the device and draws.
    pub fn take_turns() -> MutexGuard<'static, ()> {
        DEVICE_RNG.lock().unwrap_or_else(|e| e.into_inner())
    }
}
