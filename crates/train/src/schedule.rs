//! The schedule as pure functions of the step: the learning rate (linear warmup, then
//! constant or cosine decay, Loshchilov & Hutter 2017) and what the end of each step writes
//! ([`StepEvents`]). Being stateless, a resumed run gets the same rates and the same files.

use run::config::{Schedule, TrainConfig};

/// Learning rate for optimizer step `step` (0-based).
pub fn learning_rate(train: &TrainConfig, step: usize) -> f64 {
    if step < train.warmup_steps {
        // Step 0 gets lr / warmup rather than 0, so no step is wasted.
        return train.lr * (step + 1) as f64 / train.warmup_steps as f64;
    }
    match train.schedule {
        Schedule::Constant => train.lr,
        Schedule::Cosine => {
            let decay_steps = train.steps.saturating_sub(train.warmup_steps).max(1);
            let progress = ((step - train.warmup_steps) as f64 / decay_steps as f64).min(1.0);
            let min_lr = train.lr * train.min_lr_ratio;
            min_lr + 0.5 * (train.lr - min_lr) * (1.0 + (std::f64::consts::PI * progress).cos())
        }
    }
}

/// What the end of a step does, by the `[train]` schedule: the one rule both training loops
/// (one model, a seed group) follow. A stop (a signal, `--stop-at`) adds a checkpoint and
/// nothing else: an evaluation, a metrics record or a snapshot that the uninterrupted run does
/// not make would make the resumed run another run (an evaluation can even end it early at
/// the target).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepEvents {
    /// An evaluation (every `eval_every` steps, and the last).
    pub eval: bool,
    /// A checkpoint (every `checkpoint_every` steps, the last, and at a stop).
    pub checkpoint: bool,
    /// A metrics record (every `log_every` steps, and at every evaluation).
    pub log: bool,
    /// A snapshot (every `snapshot_every` steps, at the log-spaced steps of
    /// `snapshots_per_decade`, and the last, when snapshots are on; a run that reaches its
    /// target takes one too, which the loops add).
    pub snapshot: bool,
}

impl StepEvents {
    /// The events after step `done` (1-based: the number of steps trained), `stop` when a
    /// stop came during it.
    pub fn after(train: &TrainConfig, done: usize, stop: bool) -> Self {
        let last = done == train.steps;
        let eval = done.is_multiple_of(train.eval_every) || last;
        Self {
            eval,
            checkpoint: done.is_multiple_of(train.checkpoint_every) || last || stop,
            log: done.is_multiple_of(train.log_every) || eval,
            snapshot: train.snapshot_every > 0
                && (done.is_multiple_of(train.snapshot_every)
                    || last
                    || is_log_spaced(done, train.snapshots_per_decade)),
        }
    }
}

/// Whether `step` is one of the steps `round(10^(k / per_decade))`, k = 0, 1, 2, ...: evenly
/// spaced in the logarithm of the step, `per_decade` of them a decade (fewer where they
/// round to the same step). None for `per_decade` 0.
pub fn is_log_spaced(step: usize, per_decade: usize) -> bool {
    if per_decade == 0 || step == 0 {
        return false;
    }
    // The k whose value is nearest `step`: round(10^(k / n)) is monotone in k, so only the
    // k around n log10(step) can round to it.
    let k = (per_decade as f64 * (step as f64).log10()).round() as i64;
    (k - 2..=k + 2)
        .filter(|k| *k >= 0)
        .any(|k| 10f64.powf(k as f64 / per_decade as f64).round() as usize == step)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(schedule: Schedule) -> TrainConfig {
        TrainConfig {
            steps: 110,
            lr: 1.0,
            warmup_steps: 10,
            min_lr_ratio: 0.1,
            schedule,
            ..TrainConfig::default()
        }
    }

    #[test]
    fn log_spaced_snapshots_are_dense_early_and_sparse_late() {
        let steps: Vec<usize> = (1..=1000).filter(|s| is_log_spaced(*s, 10)).collect();
        assert_eq!(
            steps,
            [
                1, 2, 3, 4, 5, 6, 8, 10, 13, 16, 20, 25, 32, 40, 50, 63, 79, 100, 126, 158, 200,
                251, 316, 398, 501, 631, 794, 1000
            ]
        );
        assert!(!(1..10_000).any(|s| is_log_spaced(s, 0)));
        let train = TrainConfig {
            steps: 1000,
            snapshot_every: 500,
            snapshots_per_decade: 10,
            ..TrainConfig::default()
        };
        let snapshots: Vec<usize> = (1..=1000)
            .filter(|s| StepEvents::after(&train, *s, false).snapshot)
            .collect();
        assert_eq!(snapshots.len(), 28 + 1, "{snapshots:?}"); // and step 500
        let off = TrainConfig {
            snapshot_every: 0,
            ..train
        };
        assert!(!(1..=1000).any(|s| StepEvents::after(&off, s, false).snapshot));
    }

    #[test]
    fn warmup_rises_linearly_then_cosine_falls_to_the_floor() {
        let c = config(Schedule::Cosine);
        assert!((learning_rate(&c, 0) - 0.1).abs() < 1e-12);
        assert!((learning_rate(&c, 4) - 0.5).abs() < 1e-12);
        assert!((learning_rate(&c, 10) - 1.0).abs() < 1e-12);
        // Halfway through the decay: midway between peak and floor.
        assert!((learning_rate(&c, 60) - 0.55).abs() < 1e-12);
        assert!((learning_rate(&c, 110) - 0.1).abs() < 1e-12);
        let rates: Vec<f64> = (10..110).map(|s| learning_rate(&c, s)).collect();
        assert!(
            rates.windows(2).all(|w| w[1] <= w[0]),
            "cosine must not rise"
        );
    }

    #[test]
    fn constant_holds_the_peak_after_warmup() {
        let c = config(Schedule::Constant);
        assert!((learning_rate(&c, 50) - 1.0).abs() < 1e-12);
        assert!((learning_rate(&c, 109) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn step_events_follow_the_schedule_and_a_stop_adds_only_a_checkpoint() {
        let train = TrainConfig {
            steps: 100,
            eval_every: 20,
            checkpoint_every: 50,
            log_every: 10,
            snapshot_every: 25,
            ..TrainConfig::default()
        };
        let events = |done, stop| {
            let e = StepEvents::after(&train, done, stop);
            (e.eval, e.checkpoint, e.log, e.snapshot)
        };
        assert_eq!(events(7, false), (false, false, false, false));
        assert_eq!(events(10, false), (false, false, true, false));
        assert_eq!(events(20, false), (true, false, true, false));
        assert_eq!(events(25, false), (false, false, false, true));
        assert_eq!(events(50, false), (false, true, true, true));
        // The last step does everything.
        assert_eq!(events(100, false), (true, true, true, true));
        // A stop adds a checkpoint and nothing else.
        assert_eq!(events(7, true), (false, true, false, false));
        assert_eq!(events(20, true), (true, true, true, false));
        // Snapshots off: none, not even at the last step.
        let off = TrainConfig {
            snapshot_every: 0,
            ..train.clone()
        };
        assert!(!StepEvents::after(&off, 100, false).snapshot);
    }
}
