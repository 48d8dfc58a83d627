//! `headlab bench --profile`: where a training step's time goes (issue 68's per-step account).
//!
//! A step of `train` is, in order: the batches drawn on the host (`training_examples`), put
//! on the device (`Batch::new`), the forward pass and the loss, the backward pass, gradient
//! clipping and AdamW's update, and the loss read back. Here each of those runs with the
//! device synchronised after it (`Device::sync`), so the time of each is its own: on a GPU
//! the kernels of a phase finish before the next phase's clock starts. That is what an
//! account needs and what a real step does not do (a GPU overlaps the host's next work with
//! its kernels), so the same steps are also timed as `train` runs them, unsynchronised, and
//! the table gives both: the phases' sum against the plain step says how much the syncs
//! themselves cost, which is the share a step could gain from overlapping.
//!
//! For a seed stack (`--seeds`) the phases are the stack's: every seed's batch drawn, one
//! batch of `[seeds * batch, seq]` uploaded, one forward and backward of the stacked model,
//! per-seed clipping and one update, as `train --seeds` steps it. Both run the whole batch
//! as one shard (`train.shards = 1`, what a GPU run does), so the plain step is the same work.

use std::time::{Duration, Instant};

use burn::optim::GradientsParams;
use burn::prelude::*;
use model::{Encoder, SeedStack};
use run::ResolvedRun;
use serde::{Deserialize, Serialize};
use tasks::Example;
use tasks::batch::{Batch, masked_cross_entropy_sum, training_examples};
use train::group::{clip_per_seed, stack_gradients, stack_loss, stack_optimizer};
use train::step::{StepGradients, scored_positions, step_gradients};

use crate::case::{Case, resolve};

/// The phases of a step, in the order a step runs them.
pub const PHASES: [&str; 6] = [
    "draw (host)",
    "upload",
    "forward",
    "backward",
    "optimizer",
    "read the loss",
];

/// Where one case's step time goes, each figure in milliseconds per step (mean over the
/// timed steps).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepProfile {
    /// The case profiled (its `implementation` is headlab's).
    pub case: Case,
    /// Steps timed (after the warmup), synchronised and again plain.
    pub steps: usize,
    /// Per phase of [`PHASES`], in that order.
    pub phases_ms: Vec<f64>,
    /// The phases' sum: a step with the device synchronised after every phase.
    pub synced_step_ms: f64,
    /// A step as `train` runs it, unsynchronised (its loss read at the end, which waits for
    /// the device).
    pub plain_step_ms: f64,
}

/// Per phase, the time spent so far.
#[derive(Debug, Default)]
struct Clock {
    spent: [Duration; 6],
    mark: Option<Instant>,
}

impl Clock {
    /// Starts a step.
    fn start(&mut self) {
        self.mark = Some(Instant::now());
    }

    /// Ends phase `phase` (an index of [`PHASES`]) once `device` has finished its work, and
    /// starts the next.
    fn lap(&mut self, phase: usize, device: &Device) -> anyhow::Result<()> {
        device
            .sync()
            .map_err(|e| anyhow::anyhow!("the device failed: {e:?}"))?;
        let now = Instant::now();
        if let Some(mark) = self.mark {
            self.spent[phase] += now - mark;
        }
        self.mark = Some(now);
        Ok(())
    }
}

/// Profiles `case` (headlab's encoder, one model or a stack of `case.seeds`) over `steps`
/// steps after `warmup` untimed ones.
pub fn profile_case(case: Case, warmup: usize, steps: usize) -> anyhow::Result<StepProfile> {
    let mut run = resolve(case.size.run_config(case.backend))?;
    // One shard, as the phased step runs: the plain step is the same work, unsynchronised.
    run.config.train.shards = 1;
    let device = case.backend.device()?.autodiff();
    device.seed(run.config.seed);
    let steps = steps.max(1);
    let (clock, plain) = match case.seeds {
        1 => profile_model(&run, &device, warmup, steps)?,
        seeds => profile_stack(&run, seeds, &device, warmup, steps)?,
    };
    let per_step = |d: Duration| d.as_secs_f64() * 1e3 / steps as f64;
    let phases_ms: Vec<f64> = clock.spent.iter().map(|&d| per_step(d)).collect();
    Ok(StepProfile {
        case,
        steps,
        synced_step_ms: phases_ms.iter().sum(),
        phases_ms,
        plain_step_ms: per_step(plain),
    })
}

/// One model: the phases of `steps` steps after `warmup`, and the time of `steps` plain ones.
fn profile_model(
    run: &ResolvedRun,
    device: &Device,
    warmup: usize,
    steps: usize,
) -> anyhow::Result<(Clock, Duration)> {
    let config = &run.config;
    let mut model: Encoder = config.model.init(&run.io, device)?;
    let mut optim = train::trainer::optimizer(config);
    let (batch_size, lr) = (config.train.batch_size, config.train.lr);
    let mut clock = Clock::default();
    for step in 0..warmup + steps {
        if step == warmup {
            clock = Clock::default();
        }
        clock.start();
        let examples = training_examples(&run.task, config.seed, step, batch_size);
        clock.lap(0, device)?;
        let batch = Batch::new(&examples, device);
        clock.lap(1, device)?;
        let logits = model.forward_input(batch.encoder_input()); // [batch, seq, classes]
        let loss = masked_cross_entropy_sum(logits, batch.targets, batch.weights)
            .div_scalar(scored_positions(&examples)); // [1]
        clock.lap(2, device)?;
        let grads = GradientsParams::from_grads(loss.clone().backward(), &model);
        clock.lap(3, device)?;
        model = optim.step(lr, model, grads);
        clock.lap(4, device)?;
        let _ = loss.into_scalar::<f32>();
        clock.lap(5, device)?;
    }
    // The same steps as `train` runs them: one shard, nothing synchronised but the loss.
    let started = Instant::now();
    for step in warmup + steps..warmup + 2 * steps {
        let examples = training_examples(&run.task, config.seed, step, batch_size);
        let forward = |model: &Encoder, batch: &Batch| model.forward_input(batch.encoder_input());
        let StepGradients { grads, loss } =
            step_gradients(&model, forward, &examples, 1, true, device);
        model = optim.step(lr, model, grads);
        let _ = loss.into_scalar::<f32>();
    }
    Ok((clock, started.elapsed()))
}

/// A stack of `count` seeds: the phases of `steps` steps after `warmup`, and the time of
/// `steps` plain ones.
fn profile_stack(
    run: &ResolvedRun,
    count: usize,
    device: &Device,
    warmup: usize,
    steps: usize,
) -> anyhow::Result<(Clock, Duration)> {
    let config = &run.config;
    let seeds: Vec<u64> = (0..count as u64).map(|s| config.seed + s).collect();
    let encoders = (seeds.iter())
        .map(|&seed| {
            device.seed(seed);
            config.model.init(&run.io, device)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut stack = SeedStack::stack(&encoders.iter().collect::<Vec<_>>());
    let mut optim = stack_optimizer(config);
    let (batch_size, lr) = (config.train.batch_size, config.train.lr);
    let clip = config.train.grad_clip as f32;
    let mut clock = Clock::default();
    for step in 0..warmup + steps {
        if step == warmup {
            clock = Clock::default();
        }
        clock.start();
        let examples: Vec<Vec<Example>> = (seeds.iter())
            .map(|&seed| training_examples(&run.task, seed, step, batch_size))
            .collect();
        clock.lap(0, device)?;
        let all: Vec<Example> = examples.iter().flatten().cloned().collect();
        let batch = Batch::new(&all, device); // [seeds * batch, seq]
        clock.lap(1, device)?;
        let scored: Vec<f32> = (examples.iter())
            .map(|e| scored_positions(e) as f32)
            .collect();
        let scored = Tensor::<1>::from_floats(scored.as_slice(), device);
        let parts: Vec<&[Example]> = examples.iter().map(Vec::as_slice).collect();
        // Each seed's mean loss, `[seeds]`, as `train --seeds` computes it.
        let loss = stack_loss(&stack, &run.task, &parts, batch, None, scored, device);
        clock.lap(2, device)?;
        let grads = GradientsParams::from_grads(loss.clone().sum().backward(), &stack);
        clock.lap(3, device)?;
        let grads = clip_per_seed(&stack, grads, clip);
        stack = optim.step(lr, stack, grads);
        clock.lap(4, device)?;
        let _ = loss.mean().into_scalar::<f32>();
        clock.lap(5, device)?;
    }
    let started = Instant::now();
    for step in warmup + steps..warmup + 2 * steps {
        let StepGradients { grads, loss } = stack_gradients(&stack, run, &seeds, step, device);
        let grads = clip_per_seed(&stack, grads, clip);
        stack = optim.step(lr, stack, grads);
        let _ = loss.mean().into_scalar::<f32>();
    }
    Ok((clock, started.elapsed()))
}

/// The profiles as a markdown table: one row per case, one column per phase (milliseconds
/// per step, the share of the synchronised step in brackets), then the synchronised and the
/// plain step.
pub fn profile_markdown(profiles: &[StepProfile]) -> String {
    let mut table = String::from("| case |");
    for phase in PHASES {
        table.push_str(&format!(" {phase} |"));
    }
    table.push_str(" synced step | plain step |\n|---|");
    table.push_str(&"---:|".repeat(PHASES.len() + 2));
    table.push('\n');
    for profile in profiles {
        let case = &profile.case;
        let seeds = match case.seeds {
            1 => String::new(),
            seeds => format!(" x{seeds} seeds"),
        };
        table.push_str(&format!(
            "| {} on {}{seeds} |",
            case.size.name(),
            case.backend.name()
        ));
        for ms in &profile.phases_ms {
            let share = 100.0 * ms / profile.synced_step_ms.max(f64::MIN_POSITIVE);
            table.push_str(&format!(" {ms:.2} ({share:.0}%) |"));
        }
        table.push_str(&format!(
            " {:.2} | {:.2} |\n",
            profile.synced_step_ms, profile.plain_step_ms
        ));
    }
    table
}

#[cfg(test)]
mod tests {
    use run::BackendKind;

    use super::*;
    use crate::case::{Implementation, Size};

    fn case(seeds: usize) -> Case {
        Case {
            size: Size::Small,
            backend: BackendKind::Flex,
            implementation: Implementation::Headlab,
            shards: 1,
            seeds,
        }
    }

    /// Every phase takes time, the phases add up to the synchronised step, and a profile of
    /// a single model and of a stack both come out whole, with their table row.
    #[test]
    fn a_step_is_accounted_for_phase_by_phase() {
        let _turn = model::init::take_rng_turn();
        for seeds in [1, 2] {
            let profile = profile_case(case(seeds), 1, 2).unwrap();
            assert_eq!(profile.phases_ms.len(), PHASES.len());
            assert!(profile.phases_ms.iter().all(|&ms| ms >= 0.0), "{profile:?}");
            // Forward and backward do work on any backend.
            assert!(profile.phases_ms[2] > 0.0 && profile.phases_ms[3] > 0.0);
            let sum: f64 = profile.phases_ms.iter().sum();
            assert!((sum - profile.synced_step_ms).abs() < 1e-9);
            assert!(profile.plain_step_ms > 0.0);
            let table = profile_markdown(&[profile]);
            let row = match seeds {
                1 => "| small on flex |",
                _ => "| small on flex x2 seeds |",
            };
            assert!(table.contains(row), "{table}");
            assert_eq!(table.lines().count(), 3, "{table}");
        }
    }
}
