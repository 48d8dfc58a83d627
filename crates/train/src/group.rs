//! Many seeds in one training step: the runs of one config that differ only in seed,
//! trained as one [`SeedStack`].
//!
//! Each seed is still a run: it has its own run directory, written by the same code as a
//! single run's (`metrics.jsonl`, snapshots, checkpoints, `model.safetensors`), and each
//! seed's batches, initial weights and dropout masks are the ones a run of that seed alone
//! draws. What is shared is the computation: one batched forward and backward pass and one
//! AdamW update for all seeds. AdamW is elementwise, so the stacked update is each seed's
//! own; gradient clipping, which Burn applies per parameter tensor, is applied here per seed
//! and tensor. The runs agree with single runs up to float rounding.
//!
//! A seed that reaches its target accuracy writes its run and leaves the stack, which is
//! rebuilt from the others (its model and optimizer state sliced out), so no work is spent
//! on it afterwards. A seed whose loss stops being finite fails alone; the others go on. A
//! signal or `--stop-at` checkpoints every seed, and `--resume` continues the group from the
//! newest step every seed has a checkpoint of (a finished seed too), so a group resumed after
//! a fault computes what the group uninterrupted computed. Seeds with no common checkpoint
//! continue each from its own newest one, at different steps as separate stacks, one after
//! another.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::PathBuf;

use burn::module::{Module, ModuleVisitor, Param};
use burn::optim::{AdamWConfig, GradientsParams, ModuleOptimizer};
use burn::prelude::*;
use burn::tensor::activation::log_softmax;
use model::seed_stack::{DropoutShape, LayerDropout, SeedStack, StackInput};

use crate::optim_stack::{self, ParamLayout};
use crate::schedule::{StepEvents, learning_rate};
use crate::step::{StepGradients, scored_positions, shard_ranges, sharded_gradients};
use crate::trainer::{
    DROPOUT_STREAM, Display, Outcome, Progress, RunSummary, StartPoint, TrainError, Trainer,
    check_stop_at, claim_run_dir, optimizer, stop_requested,
};
use run::RunDir;
use run::backend::BackendKind;
use run::checkpoint;
use run::config::ResolvedRun;
use run::dir::RunLock;
use run::metrics::MetricsRecord;
use run::stop::StopSignal;
use tasks::batch::{Batch, mix_seed, training_examples, weighted_log_likelihood};
use tasks::{Example, Task};

/// Where and how to run a group.
#[derive(Debug, Clone)]
pub struct GroupOptions {
    /// One run directory per run, in the runs' order.
    pub run_dirs: Vec<PathBuf>,
    /// Continue every run from its newest loadable checkpoint.
    pub resume: bool,
    /// Replace existing runs (headlab runs only).
    pub force: bool,
    /// How progress is shown.
    pub progress: Progress,
    /// Set by a signal to stop after the current step with a checkpoint of every seed.
    pub stop: StopSignal,
    /// Stop with checkpoints once this many steps are done.
    pub stop_at_step: Option<usize>,
}

/// Trains `runs` (one config, different seeds) as one batched model. Returns each run's
/// summary or its error, in the runs' order; an error that concerns the whole group (a
/// run directory that cannot be claimed, runs that differ in more than the seed) is
/// returned before anything is trained.
pub fn train_group(
    runs: &[ResolvedRun],
    options: &GroupOptions,
) -> Result<Vec<Result<RunSummary, TrainError>>, TrainError> {
    assert_eq!(
        runs.len(),
        options.run_dirs.len(),
        "one run directory per run"
    );
    check_same_but_seed(runs)?;
    let first = &runs[0].config;
    let device = first.backend.device()?;
    let mut claimed = Vec::with_capacity(runs.len());
    for (run, dir) in runs.iter().zip(&options.run_dirs) {
        claimed.push(claim_run_dir(run, dir, options.resume, options.force)?);
    }
    if let Some(threads) = first.train.threads {
        let _ = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build_global();
    }
    let starts = start_points(runs, &mut claimed, options.resume, &device)?;
    let dirs: Vec<&RunDir> = claimed.iter().map(|(dir, _)| dir).collect();
    let mut members = start_members(runs, &dirs, starts, &device)?;
    let mut by_step: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (index, member) in members.iter().enumerate() {
        if member.ended.is_none() && member.trainer.step < first.train.steps {
            by_step.entry(member.trainer.step).or_default().push(index);
        }
    }
    let first_step = by_step.keys().next().copied();
    if let Some(step) = first_step {
        check_stop_at(options.stop_at_step, step, first.train.steps)?;
    }
    let mut display = Display::new(
        options.progress,
        first.train.steps,
        first_step.unwrap_or(first.train.steps),
    );
    for (_, indices) in by_step {
        GroupLoop::new(&mut members, indices)?.run(options, &mut display)?;
    }
    display.finish();

    Ok(members
        .into_iter()
        .map(|member| {
            if let Some(error) = member.error {
                return Err(error);
            }
            let outcome = member.ended.unwrap_or(Outcome::Finished);
            let trainer = member.trainer;
            trainer.complete(&outcome)?;
            Ok(RunSummary {
                outcome,
                step: trainer.step,
                steps_trained: trainer.steps_trained(),
                last_eval: trainer.last_eval,
                run_dir: trainer.dir.root().to_path_buf(),
            })
        })
        .collect())
}

/// Each run's starting point, new or resumed, its directory readied to train on
/// ([`StartPoint::prepare`]). Resumed, the group goes on from the newest step every run has a
/// checkpoint of: runs that went on alone (a fault, a seed left over) rejoin the group at that
/// step, so the group's numbers are those of one never interrupted.
fn start_points(
    runs: &[ResolvedRun],
    claimed: &mut [(RunDir, RunLock)],
    resume: bool,
    device: &Device,
) -> Result<Vec<StartPoint>, TrainError> {
    let common_step = resume
        .then(|| checkpoint::newest_common(claimed.iter().map(|(dir, _)| dir)))
        .flatten();
    let mut starts = Vec::with_capacity(runs.len());
    for (run, (dir, _)) in runs.iter().zip(claimed) {
        let start = StartPoint::new(run, dir, resume, common_step, device.clone())?;
        start.prepare(run, dir)?;
        starts.push(start);
    }
    Ok(starts)
}

/// Each run's trainer from its starting point. A run resumed from the checkpoint of the
/// evaluation that reached its target does not train on.
fn start_members<'a>(
    runs: &'a [ResolvedRun],
    dirs: &[&'a RunDir],
    starts: Vec<StartPoint>,
    device: &Device,
) -> Result<Vec<Member<'a>>, TrainError> {
    let mut members = Vec::with_capacity(runs.len());
    for ((run, dir), start) in runs.iter().zip(dirs).zip(starts) {
        let trainer = Trainer::start(run, dir, start, device.clone())?;
        let ended = trainer.target_reached().then_some(Outcome::TargetReached);
        members.push(Member {
            trainer,
            ended,
            error: None,
        });
    }
    Ok(members)
}

/// Refuses runs that differ in anything but their seed (they cannot share a stack).
fn check_same_but_seed(runs: &[ResolvedRun]) -> Result<(), TrainError> {
    let Some(first) = runs.first() else {
        return Ok(());
    };
    if let Some(key) = model::seed_stack::unsupported_option(&first.config.model) {
        return Err(TrainError::GroupUnsupported { key });
    }
    for run in &runs[1..] {
        let mut config = run.config.clone();
        config.seed = first.config.seed;
        if let Some(key) = first.config.first_difference(&config) {
            return Err(TrainError::GroupDiffers { key });
        }
    }
    Ok(())
}

/// One seed of the group: its single-run trainer (model and optimizer kept current only
/// when they are written or evaluated), and how it ended.
struct Member<'a> {
    trainer: Trainer<'a>,
    ended: Option<Outcome>,
    error: Option<TrainError>,
}

/// What every member's end of a step reads ([`GroupLoop::finish_members`]).
struct FinishedStep<'s> {
    /// Steps trained.
    done: usize,
    /// The step's learning rate.
    lr: f64,
    /// What the schedule asks of this step's end.
    due: StepEvents,
    /// The stop that came during the step, if one did.
    stop: Option<&'s Outcome>,
    /// Each active member's loss, when read.
    losses: Option<&'s [f32]>,
    /// Positions (in `active`) whose loss is not finite.
    failed: &'s [usize],
    /// Whether the run takes snapshots (`snapshot_every > 0`).
    snapshots_on: bool,
}

/// The stacked model of the members still training, at one step.
struct GroupLoop<'m, 'a> {
    members: &'m mut [Member<'a>],
    /// Indices of the members in the stack, in stack order.
    active: Vec<usize>,
    stack: SeedStack,
    optim: ModuleOptimizer,
    layout: ParamLayout,
    step: usize,
}

impl<'m, 'a> GroupLoop<'m, 'a> {
    /// The stack of `active` members, from their models and optimizer states.
    fn new(members: &'m mut [Member<'a>], active: Vec<usize>) -> Result<Self, TrainError> {
        let step = members[active[0]].trainer.step;
        let (stack, optim, layout) = build_stack(members, &active)?;
        Ok(Self {
            members,
            active,
            stack,
            optim,
            layout,
            step,
        })
    }

    fn run(mut self, options: &GroupOptions, display: &mut Display) -> Result<(), TrainError> {
        let run: &'a ResolvedRun = self.members[self.active[0]].trainer.resolved;
        let config = &run.config;
        let train = config.train.clone();
        while !self.active.is_empty() && self.step < train.steps {
            let lr = learning_rate(&train, self.step);
            let StepGradients { grads, loss } = self.gradients();
            let grads = clip_per_seed(&self.stack, grads, train.grad_clip as f32);
            let done = self.step + 1;
            let is_last = done == train.steps;
            let stop = stop_requested(&options.stop, options.stop_at_step, done, is_last);
            let due = StepEvents::after(&train, done, stop.is_some());
            let read = due.log || due.checkpoint || config.backend.is_deterministic();
            let losses: Option<Vec<f32>> = read.then(|| {
                loss.into_data()
                    .convert::<f32>()
                    .try_into_vec::<f32>()
                    .expect("f32 losses")
            });
            // A seed whose loss is not finite fails alone, before the update.
            let failed: Vec<usize> = losses
                .iter()
                .flatten()
                .enumerate()
                .filter(|(_, value)| !value.is_finite())
                .map(|(position, _)| position)
                .collect();
            self.stack = self.optim.step(lr, self.stack.clone(), grads);
            self.step = done;

            // Bring every member's model (and for checkpoints its optimizer) up to date
            // when something reads it. Evaluation can end a seed, which writes its run.
            let writes = due.eval || due.checkpoint || due.snapshot || !failed.is_empty();
            if writes {
                self.sync_models();
                self.sync_optimizers()?;
            }
            let step = FinishedStep {
                done,
                lr,
                due,
                stop: stop.as_ref(),
                losses: losses.as_deref(),
                failed: &failed,
                snapshots_on: train.snapshot_every > 0,
            };
            let (leaving, group_records) = self.finish_members(&step);
            if due.log {
                let (record, eval) = mean_record(&group_records, done);
                display.update(&record, eval);
            }
            if let Some(stop) = &stop {
                display.note(stop, done);
            }
            if !leaving.is_empty() && !self.drop_members(&leaving, writes)? {
                break;
            }
        }
        // Every member still here finished its steps: bring its model up to date for the
        // final weights.
        if !self.active.is_empty() {
            self.sync_models();
        }
        Ok(())
    }

    /// Each active member's end of `step`: its record, and the evaluation, snapshot and
    /// checkpoint due; a member that fails, reaches its target or stops leaves. Returns the
    /// positions (in `active`) that leave, and the records logged.
    fn finish_members(&mut self, step: &FinishedStep) -> (Vec<usize>, Vec<Logged>) {
        let mut leaving = Vec::new();
        let mut group_records = Vec::new();
        for (position, &index) in self.active.iter().enumerate() {
            let member = &mut self.members[index];
            let trainer = &mut member.trainer;
            if step.failed.contains(&position) {
                let value = step.losses.map_or(f32::NAN, |l| l[position]);
                member.error = Some(trainer.non_finite(value)); // names step `done`
                leaving.push(position);
                continue;
            }
            trainer.step = step.done;
            let loss = step.losses.map(|l| l[position]);
            let result: Result<(), TrainError> = (|| {
                let mut target_hit = false;
                if step.due.log {
                    let record = trainer.log(loss, step.lr, step.due.eval)?;
                    group_records.push((record, trainer.last_eval));
                    if step.due.eval && trainer.target_reached() {
                        target_hit = true;
                        member.ended = Some(Outcome::TargetReached);
                    }
                }
                if let Some(stop) = step.stop {
                    member.ended = Some(stop.clone());
                }
                if step.due.snapshot || (step.snapshots_on && target_hit) {
                    trainer.snapshot()?;
                }
                if step.due.checkpoint || member.ended.is_some() {
                    trainer.checkpoint()?;
                }
                Ok(())
            })();
            if let Err(error) = result {
                member.error = Some(error);
            }
            if member.ended.is_some() || member.error.is_some() {
                leaving.push(position);
            }
        }
        (leaving, group_records)
    }

    /// Takes the members at `leaving` (positions in `active`) out and restacks the rest;
    /// `synced`: whether this step already brought every model and optimizer up to date.
    /// Returns whether any member is left.
    fn drop_members(&mut self, leaving: &[usize], synced: bool) -> Result<bool, TrainError> {
        if !synced {
            // A write failed in a step that synced nothing: the others' models and
            // optimizer states must be current before the stack is rebuilt.
            self.sync_models();
            self.sync_optimizers()?;
        }
        self.active = self
            .active
            .iter()
            .enumerate()
            .filter(|(position, _)| !leaving.contains(position))
            .map(|(_, &index)| index)
            .collect();
        if self.active.is_empty() {
            return Ok(false);
        }
        let (stack, optim, layout) = build_stack(self.members, &self.active)?;
        (self.stack, self.optim, self.layout) = (stack, optim, layout);
        Ok(true)
    }

    /// Every active member's model, unstacked with its own parameter ids.
    fn sync_models(&mut self) {
        for (position, &index) in self.active.iter().enumerate() {
            let trainer = &mut self.members[index].trainer;
            trainer.model = self.stack.unstack(position, trainer.model.clone());
        }
    }

    /// Every active member's optimizer state, cut from the stack's.
    fn sync_optimizers(&mut self) -> Result<(), TrainError> {
        let seeds: Vec<ParamLayout> = self
            .active
            .iter()
            .map(|&index| ParamLayout::of(&self.members[index].trainer.model))
            .collect();
        let config = self.members[self.active[0]].trainer.resolved.config.clone();
        let optims = optim_stack::split(&self.optim, &self.layout, &seeds, || optimizer(&config))?;
        for (&index, optim) in self.active.iter().zip(optims) {
            self.members[index].trainer.optim = optim;
        }
        Ok(())
    }

    /// The step's gradients for every seed, and each seed's loss (`[seeds]`).
    fn gradients(&self) -> StepGradients {
        let lead = &self.members[self.active[0]].trainer;
        let seeds: Vec<u64> = self
            .active
            .iter()
            .map(|&i| self.members[i].trainer.resolved.config.seed)
            .collect();
        stack_gradients(
            &self.stack,
            lead.resolved,
            &seeds,
            self.step,
            &lead.autodiff,
        )
    }
}

/// One training step of a seed stack: the gradients of every seed's mean masked
/// cross-entropy on its own batch of step `step`, and each seed's loss (`[seeds]`). `run`
/// gives the task and config every seed shares; seed `s` of the stack is `seeds[s]`, whose
/// batches and dropout masks are the ones its run alone draws. `device` has autodiff.
pub fn stack_gradients(
    stack: &SeedStack,
    run: &ResolvedRun,
    seeds: &[u64],
    step: usize,
    device: &Device,
) -> StepGradients {
    let config = &run.config;
    let batch_size = config.train.batch_size;
    let examples: Vec<Vec<Example>> = seeds
        .iter()
        .map(|&seed| training_examples(&run.task, seed, step, batch_size))
        .collect();
    let scored: Vec<f32> = examples
        .iter()
        .map(|e| scored_positions(e) as f32)
        .collect();
    let shards = match config.backend {
        BackendKind::Wgpu => 1,
        BackendKind::Flex | BackendKind::Ndarray => config.train.shards,
    };
    let ranges = shard_ranges(batch_size, shards);
    let masks = (config.model.dropout > 0.0)
        .then(|| draw_dropout(config, seeds, &examples, &ranges, step, device));
    let count = seeds.len();
    let scored = Tensor::<1>::from_floats(scored.as_slice(), device);
    // Masks are drawn before the pass, so shards can always run in parallel.
    sharded_gradients(stack, &ranges, true, device, |stack, shard, range| {
        let all: Vec<Example> = examples
            .iter()
            .flat_map(|e| e[range.clone()].iter().cloned())
            .collect();
        let batch = Batch::new(&all, device); // [seeds * shard, seq]
        let seq = batch.tokens.dims()[1];
        let dropout = masks.as_ref().map(|masks| {
            (0..config.model.n_layers)
                .map(|layer| {
                    LayerDropout::for_stack(
                        (0..count)
                            .map(|s| vec![masks[s][shard][layer].clone().pad_to(seq)])
                            .collect(),
                    )
                })
                .collect()
        });
        let parts: Vec<&[Example]> = examples.iter().map(|e| &e[range.clone()]).collect();
        stack_loss(
            stack,
            &run.task,
            &parts,
            batch,
            dropout,
            scored.clone(),
            device,
        )
    })
}

/// Each seed's mean loss over its scored positions, `[seeds]`, for `batch`: the seeds'
/// `parts` stacked seed-major (`[seeds * part, seq]`), `scored` each part's scored position
/// count. A task scored at masked positions only puts the output layer at those alone
/// ([`SeedStack::forward_at`]). The one loss of `train --seeds`, which `headlab bench
/// --profile` times.
pub fn stack_loss(
    stack: &SeedStack,
    task: &Task,
    parts: &[&[Example]],
    batch: Batch,
    dropout: Option<Vec<LayerDropout>>,
    scored: Tensor<1>,
    device: &Device,
) -> Tensor<1> {
    let count = parts.len();
    let [rows, seq] = batch.tokens.dims();
    let input = StackInput {
        tokens: batch.tokens.reshape([count, rows / count, seq]),
        pad: batch.padding,
        dropout,
    };
    let at_scored = task
        .scores_masked_positions_only()
        .then(|| stacked_scored_rows(parts, seq, device))
        .flatten();
    if let Some(scored_rows) = at_scored {
        let logits = stack.forward_at(input, scored_rows.rows.clone()); // [seeds, n, classes]
        return scored_likelihood(logits, &scored_rows).neg() / scored;
    }
    let logits = stack.forward(input); // [seeds, part, seq, classes]
    let classes = logits.dims()[3];
    let likelihood = weighted_log_likelihood(
        logits.reshape([rows, seq, classes]),
        batch.targets,
        batch.weights,
    ); // [seeds * part, seq]
    likelihood
        .reshape([count, rows / count * seq])
        .sum_dim(1)
        .reshape([count])
        .neg()
        / scored
}

/// Each seed's scored positions in its part of a stacked batch, for the output layer at
/// those only ([`SeedStack::forward_at`]): flat positions `b * seq + s` within the seed's own
/// examples, every seed padded to the most any has with position 0 weighed 0. `None` when no
/// seed has a scored position (the every-position path, whose loss is 0, then serves).
struct StackedScoredRows {
    /// `[seeds, n]`.
    rows: Tensor<2, Int>,
    /// `[seeds, n]`.
    targets: Tensor<2, Int>,
    /// `[seeds, n]`: 1 where scored, 0 at padding.
    weights: Tensor<2>,
}

fn stacked_scored_rows(
    parts: &[&[Example]],
    seq: usize,
    device: &Device,
) -> Option<StackedScoredRows> {
    let per_seed: Vec<Vec<(i64, i64)>> = parts
        .iter()
        .map(|examples| {
            examples
                .iter()
                .enumerate()
                .flat_map(|(b, example)| {
                    example.target.iter().enumerate().filter_map(move |(s, t)| {
                        t.map(|target| ((b * seq + s) as i64, target as i64))
                    })
                })
                .collect()
        })
        .collect();
    let n = per_seed.iter().map(Vec::len).max()?;
    if n == 0 {
        return None;
    }
    let (mut rows, mut targets, mut weights) = (vec![], vec![], vec![]);
    for scored in &per_seed {
        for i in 0..n {
            let (row, target) = scored.get(i).copied().unwrap_or((0, 0));
            rows.push(row);
            targets.push(target);
            weights.push(if i < scored.len() { 1.0f32 } else { 0.0 });
        }
    }
    let shape = [per_seed.len(), n];
    Some(StackedScoredRows {
        rows: Tensor::from_data(TensorData::new(rows, shape), device),
        targets: Tensor::from_data(TensorData::new(targets, shape), device),
        weights: Tensor::from_data(TensorData::new(weights, shape), device),
    })
}

/// Each seed's summed log-likelihood of its targets at its scored positions: `logits`
/// `[seeds, n, classes]` -> `[seeds]`.
fn scored_likelihood(logits: Tensor<3>, scored: &StackedScoredRows) -> Tensor<1> {
    let [seeds, n, _] = logits.dims();
    let picked = log_softmax(logits, 2)
        .gather(2, scored.targets.clone().unsqueeze_dim::<3>(2))
        .reshape([seeds, n]); // [seeds, n]
    (picked * scored.weights.clone())
        .sum_dim(1)
        .reshape([seeds])
}

/// The stack of `active` members' models, its AdamW joined from their optimizer states,
/// and its parameter layout.
fn build_stack(
    members: &[Member],
    active: &[usize],
) -> Result<(SeedStack, ModuleOptimizer, ParamLayout), TrainError> {
    let models: Vec<_> = active.iter().map(|&i| &members[i].trainer.model).collect();
    let stack = SeedStack::stack(&models);
    let layout = ParamLayout::of(&stack);
    let seeds: Vec<ParamLayout> = models.iter().map(|m| ParamLayout::of(*m)).collect();
    let optims: Vec<_> = active.iter().map(|&i| &members[i].trainer.optim).collect();
    let config = &members[active[0]].trainer.resolved.config;
    let optim = optim_stack::join(&optims, &seeds, &layout, || stack_optimizer(config))?;
    Ok((stack, optim, layout))
}

/// The AdamW of a seed stack: the run's, without gradient clipping, which is per seed
/// ([`clip_per_seed`]) and must not see the stacked tensors as a whole.
pub fn stack_optimizer(config: &run::config::RunConfig) -> ModuleOptimizer {
    AdamWConfig::new()
        .with_weight_decay(config.train.weight_decay as f32)
        .init()
}

/// Per seed `[seeds][shard][layer]`, the dropout masks its own run draws at `step`: the
/// device's generator reseeded with the seed's stream, then each shard's blocks in order.
fn draw_dropout(
    config: &run::config::RunConfig,
    seeds: &[u64],
    examples: &[Vec<Example>],
    ranges: &[Range<usize>],
    step: usize,
    device: &Device,
) -> Vec<Vec<Vec<LayerDropout>>> {
    let shape = DropoutShape {
        prob: config.model.dropout,
        n_heads: config.model.n_heads,
        d_model: config.model.d_model,
        d_ff: config.model.d_ff,
    };
    seeds
        .iter()
        .zip(examples)
        .map(|(&seed, examples)| {
            device.seed(mix_seed(seed, DROPOUT_STREAM + step as u64));
            ranges
                .iter()
                .map(|range| {
                    let shard = &examples[range.clone()];
                    let seq = shard.iter().map(|e| e.input.len()).max().unwrap_or(0);
                    (0..config.model.n_layers)
                        .map(|_| LayerDropout::draw(shape, shard.len(), seq, device))
                        .collect()
                })
                .collect()
        })
        .collect()
}

/// Gradient clipping by norm as Burn's AdamW does it (each parameter tensor alone), here
/// for each seed's slice of each stacked tensor alone. `max_norm` 0 turns it off.
pub fn clip_per_seed(stack: &SeedStack, grads: GradientsParams, max_norm: f32) -> GradientsParams {
    if max_norm <= 0.0 {
        return grads;
    }
    struct Clip {
        grads: GradientsParams,
        max_norm: f32,
    }
    impl ModuleVisitor for Clip {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            let Some(grad) = self.grads.remove::<D>(param.id) else {
                return;
            };
            let dims = grad.dims();
            let seeds = dims[0];
            let per_seed = grad.shape().num_elements() / seeds.max(1);
            // As Burn's clip_by_norm: coef = max_norm / (norm + min_positive), at most 1.
            let norm = grad
                .clone()
                .reshape([seeds, per_seed])
                .square()
                .sum_dim(1)
                .sqrt(); // [seeds, 1]
            let coef = norm
                .add_scalar(f32::MIN_POSITIVE)
                .recip()
                .mul_scalar(self.max_norm)
                .clamp_max(1.0);
            let mut shape = [1usize; D];
            shape[0] = seeds;
            let clipped = grad * coef.reshape(shape);
            self.grads.register(param.id, clipped);
        }
    }
    let mut clip = Clip { grads, max_norm };
    stack.visit(&mut clip);
    clip.grads
}

/// An evaluation: (loss, token accuracy, sequence accuracy).
type Eval = (f64, f64, f64);

/// A seed's metrics record and its latest evaluation.
type Logged = (MetricsRecord, Option<Eval>);

/// One line for the progress display: the mean loss and evaluation over the seeds that
/// logged, and their summed throughput.
fn mean_record(records: &[Logged], step: usize) -> (MetricsRecord, Option<Eval>) {
    let n = records.len().max(1) as f64;
    let mean = |f: &dyn Fn(&Logged) -> f64| records.iter().map(f).sum::<f64>() / n;
    let record = MetricsRecord {
        step,
        loss: mean(&|r| r.0.loss),
        lr: records.first().map_or(0.0, |r| r.0.lr),
        tokens_per_s: records.iter().map(|r| r.0.tokens_per_s).sum(),
        elapsed_s: records.first().map_or(0.0, |r| r.0.elapsed_s),
        eval_loss: None,
        eval_token_acc: None,
        eval_seq_acc: None,
    };
    let evaluated = records.iter().all(|r| r.1.is_some()) && !records.is_empty();
    let eval = evaluated.then(|| {
        (
            mean(&|r| r.1.map_or(0.0, |e| e.0)),
            mean(&|r| r.1.map_or(0.0, |e| e.1)),
            mean(&|r| r.1.map_or(0.0, |e| e.2)),
        )
    });
    let record = MetricsRecord {
        eval_loss: eval.map(|e| e.0),
        eval_token_acc: eval.map(|e| e.1),
        eval_seq_acc: eval.map(|e| e.2),
        ..record
    };
    (record, eval)
}
