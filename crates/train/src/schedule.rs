//! The learning rate as a pure function of the step: linear warmup, then constant or cosine
//! decay (Loshchilov & Hutter 2017). Being stateless, a resumed run gets the same rates.

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
}
