//! The training loop: AdamW with warmup and cosine decay, gradient clipping, masked
//! cross-entropy per position, periodic evaluation on a fixed set, early stopping,
//! snapshots of head weights, checkpoints that resume exactly, and a run directory that
//! `inspect` reads.
//!
//! Exact resume rests on three things: batches and dropout masks are functions of
//! (seed, step) rather than of a running RNG, the learning rate is a function of the step,
//! and checkpoints hold the optimizer's moments with the parameter ids they belong to.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Instant;

use burn::module::Module;
use burn::optim::grad_clipping::GradientClippingConfig;
use burn::optim::{AdamWConfig, GradientsParams, ModuleOptimizer};
use burn::prelude::*;
use indicatif::{ProgressBar, ProgressStyle};
use model::Encoder;

use crate::schedule::{StepEvents, learning_rate};
use crate::step::{StepGradients, scored_step_gradients, step_gradients};
use run::backend::{BackendKind, NoAdapter};
use run::checkpoint::{self, CheckpointError, CheckpointState};
use run::config::{ResolvedRun, RunConfig};
use run::dir::{RunDir, RunDirError, RunLock};
use run::manifest::{Depth, Verdict};
use run::metrics::{MetricsLog, MetricsRecord};
use run::snapshot::write_snapshot;
use run::stop::{StopSignal, signal_name};
use run::tensor_file::TensorFileError;
use run::weights::{self, WeightsError};
use tasks::Example;
use tasks::batch::{Batch, mix_seed, training_examples};
use tasks::evaluate::evaluate;

/// Stream offset of dropout masks, apart from batch streams.
pub(crate) const DROPOUT_STREAM: u64 = 1 << 62;

/// How progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// A progress bar when stderr is a terminal, plain lines on stdout otherwise.
    Auto,
    /// Nothing.
    Quiet,
}

/// Where and how to run.
#[derive(Debug, Clone)]
pub struct TrainOptions {
    /// The run directory.
    pub run_dir: PathBuf,
    /// Continue the run in `run_dir` from its newest loadable checkpoint.
    pub resume: bool,
    /// Replace an existing run in `run_dir` (a headlab run only; nothing else is deleted).
    pub force: bool,
    /// How progress is shown.
    pub progress: Progress,
    /// Set by a signal (Ctrl-C, SIGTERM, SIGHUP) to stop after the current step with a
    /// checkpoint.
    pub stop: StopSignal,
    /// Stop with a checkpoint once this many steps are done (continue later with `resume`).
    pub stop_at_step: Option<usize>,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// All steps done.
    Finished,
    /// Eval token accuracy reached the target.
    TargetReached,
    /// Stopped by a signal (its number); a checkpoint was saved.
    Interrupted(i32),
    /// Stopped at `stop_at_step`; a checkpoint was saved.
    Paused,
}

/// What a run did.
#[derive(Debug, Clone)]
pub struct RunSummary {
    /// How it ended.
    pub outcome: Outcome,
    /// Optimizer steps completed.
    pub step: usize,
    /// Steps this process trained (0 for a resumed run that had nothing left to train).
    pub steps_trained: usize,
    /// The last evaluation: (loss, token accuracy, sequence accuracy).
    pub last_eval: Option<(f64, f64, f64)>,
    /// The run directory.
    pub run_dir: PathBuf,
}

/// Why a run could not start or went on.
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    /// The run directory could not be created, opened or locked.
    #[error(transparent)]
    RunDir(#[from] RunDirError),
    /// `--resume` without a checkpoint.
    #[error(
        "nothing to resume in {0}: it has no complete checkpoint; train it from the start with \
         the same command and --force in place of --resume"
    )]
    NothingToResume(PathBuf),
    /// `--stop-at` at or before the step the run starts from: it would never be reached.
    #[error(
        "--stop-at {stop_at} is not after step {step}, where the run starts; give a step from {} \
         to {steps} (train.steps), or leave --stop-at out to train to the end",
        step + 1
    )]
    StopAtPassed {
        /// The step asked for.
        stop_at: usize,
        /// The step the run starts from (0, or its checkpoint's).
        step: usize,
        /// `train.steps`.
        steps: usize,
    },
    /// `--resume` with `train.steps` before the run's newest checkpoint.
    #[error(
        "train.steps = {steps} is before step {step}, the newest checkpoint of the run in \
         {dir}: give train.steps = {step} or more (to read the model at an earlier step, \
         inspect it with --checkpoint step-N)"
    )]
    StepsBeforeCheckpoint {
        /// The run.
        dir: PathBuf,
        /// `train.steps` asked for.
        steps: usize,
        /// The newest checkpoint's step.
        step: usize,
    },
    /// `--resume` with every checkpoint unreadable.
    #[error("cannot resume {dir}: no checkpoint could be loaded; newest error: {newest}")]
    NoLoadableCheckpoint {
        /// The run.
        dir: PathBuf,
        /// The newest checkpoint's error.
        newest: CheckpointError,
    },
    /// `--resume` with a config that differs in more than when the run stops.
    #[error(
        "the config differs from the one the run in {dir} was started with: {key} is {here} \
         here and {there} in the run; resume with the same config (the run's own config.toml \
         works), or start over with --force{}",
        if key.starts_with("train.") {
            " (--resume may change only when the run stops: train.steps, \
             train.target_accuracy or --no-target, and --stop-at; the other training settings \
             are fixed when it starts)"
        } else {
            ""
        }
    )]
    ConfigChanged {
        /// The run.
        dir: PathBuf,
        /// The first differing key, dotted (`train.steps`).
        key: String,
        /// Its value in the config given.
        here: String,
        /// Its value in the run's config.
        there: String,
    },
    /// No GPU for wgpu.
    #[error(transparent)]
    Backend(#[from] NoAdapter),
    /// Runs given to train together as one stack differ in more than their seed.
    #[error(
        "runs trained together as one group must differ only in their seed, but they differ in \
         {key}; train them apart"
    )]
    GroupDiffers {
        /// The first differing section.
        key: String,
    },
    /// A model option the seed stack does not implement (BERT's embedding and output
    /// options, for imported models).
    #[error(
        "{key} is set: a seed group (--seeds, or a sweep's group_seeds) trains headlab's own \
         embeddings, without BERT's options (model.token_types, embedding_norm, \
         embedding_size, final_norm = false); train these seeds one at a time"
    )]
    GroupUnsupported {
        /// The config key.
        key: &'static str,
    },
    /// The optimizer state of a seed group could not be split into the seeds' or joined.
    #[error(transparent)]
    OptimStack(#[from] crate::optim_stack::OptimStackError),
    /// The loss blew up.
    #[error(
        "loss became {loss} at step {step}; stopping. {kept} Lower train.lr or set train.grad_clip."
    )]
    NonFinite {
        /// The step at fault (1-based: steps completed including it).
        step: usize,
        /// The loss.
        loss: f32,
        /// Which checkpoint is the last good one.
        kept: String,
    },
    /// A checkpoint could not be written.
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    /// The final weights could not be written.
    #[error(transparent)]
    Weights(#[from] WeightsError),
    /// Another file of the run could not be written.
    #[error("cannot write {path}: {message}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
}

impl From<TensorFileError> for TrainError {
    /// A snapshot that could not be written, with its path named once (the file error names
    /// it too).
    fn from(error: TensorFileError) -> Self {
        match error {
            TensorFileError::Io { path, error, .. } => TrainError::Write {
                path,
                message: error.to_string(),
            },
            TensorFileError::Corrupt { path, message } => TrainError::Write { path, message },
        }
    }
}

/// Trains `run` as the options say.
pub fn train(run: &ResolvedRun, options: &TrainOptions) -> Result<RunSummary, TrainError> {
    let train = &run.config.train;
    // The device first: a missing GPU must not leave a half-made run directory behind.
    let device = run.config.backend.device()?;
    let (mut dir, _lock) = claim_run_dir(run, &options.run_dir, options.resume, options.force)?;
    if let Some(threads) = train.threads {
        // Fails only if a pool already exists (a second run in one process): keep that one.
        let _ = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build_global();
    }
    let start = StartPoint::new(run, &dir, options.resume, None, device.clone())?;
    start.prepare(run, &mut dir)?;
    let mut trainer = Trainer::start(run, &dir, start, device)?;
    check_stop_at(options.stop_at_step, trainer.step, train.steps)?;
    let mut display = Display::new(options.progress, train.steps, trainer.step);
    // A run resumed from the checkpoint of the evaluation that reached the target (killed
    // before model.safetensors was written) must not train on.
    let mut ended = trainer.target_reached().then_some(Outcome::TargetReached);

    while ended.is_none() && trainer.step < train.steps {
        let lr = learning_rate(train, trainer.step);
        let StepGradients { grads, loss } = trainer.gradients();
        let done = trainer.step + 1;
        let stop = stop_requested(
            &options.stop,
            options.stop_at_step,
            done,
            done == train.steps,
        );
        let due = StepEvents::after(train, done, stop.is_some());
        let loss = trainer.read_loss(loss, due.log || due.checkpoint)?;
        trainer.update(lr, grads);

        let mut target_hit = false;
        if due.log {
            let record = trainer.log(loss, lr, due.eval)?;
            display.update(&record, trainer.last_eval);
            if due.eval && trainer.target_reached() {
                target_hit = true;
                ended = Some(Outcome::TargetReached);
            }
        }
        if let Some(stop) = stop {
            display.note(&stop, done);
            ended = Some(stop);
        }
        if due.snapshot || (train.snapshot_every > 0 && target_hit) {
            trainer.snapshot()?;
        }
        if due.checkpoint || ended.is_some() {
            trainer.checkpoint()?;
        }
    }

    let outcome = ended.unwrap_or(Outcome::Finished);
    trainer.complete(&outcome)?;
    display.finish();
    Ok(RunSummary {
        outcome,
        step: trainer.step,
        steps_trained: trainer.steps_trained(),
        last_eval: trainer.last_eval,
        run_dir: dir.root().to_path_buf(),
    })
}

/// Refuses a `--stop-at` step at or before `step`, where training starts: the loop would
/// never meet it and would train to the end (18 minutes and 1.1 GB of snapshots, once).
pub(crate) fn check_stop_at(
    stop_at: Option<usize>,
    step: usize,
    steps: usize,
) -> Result<(), TrainError> {
    match stop_at {
        Some(stop_at) if stop_at <= step => Err(TrainError::StopAtPassed {
            stop_at,
            step,
            steps,
        }),
        _ => Ok(()),
    }
}

/// Why the loop should stop after step `done`, if it should: a signal, or `--stop-at`.
pub(crate) fn stop_requested(
    stop: &StopSignal,
    stop_at_step: Option<usize>,
    done: usize,
    is_last: bool,
) -> Option<Outcome> {
    if let Some(signal) = stop.requested() {
        return Some(Outcome::Interrupted(signal));
    }
    (stop_at_step == Some(done) && !is_last).then_some(Outcome::Paused)
}

/// AdamW as the config says: weight decay and gradient clipping from `[train]`.
pub fn optimizer(config: &RunConfig) -> ModuleOptimizer {
    let train = &config.train;
    AdamWConfig::new()
        .with_weight_decay(train.weight_decay as f32)
        .with_grad_clipping(
            (train.grad_clip > 0.0).then_some(GradientClippingConfig::Norm(train.grad_clip as f32)),
        )
        .init()
}

/// The run directory, locked for this process: a new one, or for `--resume` the existing run
/// after checking that it is the same experiment (config and dataset) but for when it stops.
/// Nothing of an existing run is changed here ([`StartPoint::prepare`] changes it once it is
/// known that a step will be trained).
pub(crate) fn claim_run_dir(
    run: &ResolvedRun,
    run_dir: &std::path::Path,
    resume: bool,
    force: bool,
) -> Result<(RunDir, RunLock), TrainError> {
    if !resume {
        return Ok(RunDir::create(run_dir, run, force, "train")?);
    }
    let dir = match RunDir::open(run_dir) {
        Err(
            RunDirError::NotARun(path) | RunDirError::Missing(path) | RunDirError::Unfinished(path),
        ) => {
            return Err(TrainError::NothingToResume(path));
        }
        opened => opened?,
    };
    let lock = dir.lock("train")?;
    let Some((newest, _)) = checkpoint::list(&dir).first().cloned() else {
        return Err(TrainError::NothingToResume(dir.root().to_path_buf()));
    };
    let saved = dir.config()?;
    if let Some(key) = dir.config_difference(&run.config.with_stopping_rules_of(&saved))? {
        return Err(TrainError::ConfigChanged {
            dir: dir.root().to_path_buf(),
            here: run.config.value_at(&key),
            there: saved.value_at(&key),
            key,
        });
    }
    if run.config.train.steps < newest {
        return Err(TrainError::StepsBeforeCheckpoint {
            dir: dir.root().to_path_buf(),
            steps: run.config.train.steps,
            step: newest,
        });
    }
    dir.check_inputs_unchanged(run)?;
    Ok((dir, lock))
}

/// Where a run starts: a fresh model, or the newest checkpoint that loads.
pub(crate) struct StartPoint {
    /// The device with gradients, seeded by the config.
    autodiff: Device,
    model: Encoder,
    optim: ModuleOptimizer,
    /// The checkpoint's state, for a resumed run.
    resumed: Option<CheckpointState>,
}

impl StartPoint {
    /// A fresh model, or for `resume` the newest checkpoint that loads (of at most step
    /// `resume_at_most`, when given: a seed group resumes from the newest step all its runs
    /// have).
    pub(crate) fn new(
        run: &ResolvedRun,
        dir: &RunDir,
        resume: bool,
        resume_at_most: Option<usize>,
        device: Device,
    ) -> Result<Self, TrainError> {
        let config = &run.config;
        let autodiff = device.autodiff();
        autodiff.seed(config.seed);
        let model = config
            .model
            .init(&run.io, &autodiff)
            .expect("the model config was validated when the run was resolved");
        let optim = optimizer(config);
        let (model, optim, resumed) = if resume {
            let (model, optim, state) =
                load_newest_checkpoint(dir, config, model, optim, resume_at_most)?;
            (model, optim, Some(state))
        } else {
            (model, optim, None)
        };
        Ok(Self {
            autodiff,
            model,
            optim,
            resumed,
        })
    }

    /// The step training starts from.
    pub(crate) fn step(&self) -> usize {
        self.resumed.as_ref().map_or(0, |state| state.step)
    }

    /// Whether a step will be trained: the run is short of `train.steps` and of its target.
    pub(crate) fn trains(&self, run: &ResolvedRun) -> bool {
        let train = &run.config.train;
        let best = self.resumed.as_ref().and_then(|s| s.best_eval_token_acc);
        self.step() < train.steps && !target_met(train.target_accuracy, best)
    }

    /// Readies a resumed run to change. One that will train stops counting as complete (its
    /// metrics are cut back, its final weights written again) and takes the stopping rules
    /// of `run`'s config. One with nothing to train is left as it is when it is whole, and
    /// otherwise (killed before its final weights were sealed, or damaged since) is unsealed
    /// to be completed.
    pub(crate) fn prepare(&self, run: &ResolvedRun, dir: &mut RunDir) -> Result<(), TrainError> {
        if self.resumed.is_none() {
            return Ok(());
        }
        if self.trains(run) {
            dir.unseal()?;
            if dir.config_difference(&run.config)?.is_some() {
                dir.extend(&run.config)?;
            }
        } else if dir.verify(Depth::Contents) == Verdict::Intact {
            // Read to the last byte: a resume is also how a damaged run's final weights are
            // written again from its last checkpoint (a flipped byte keeps its size).
            return Ok(());
        } else {
            dir.unseal()?;
        }
        // A process killed while writing leaves hidden temporaries (a half-written checkpoint
        // directory, say). They are never read; clear them so kills do not pile up disk.
        // Best effort: a directory that refuses is reported by the first real write.
        for path in [
            dir.root().to_path_buf(),
            dir.checkpoints_dir(),
            dir.snapshots_dir(),
        ] {
            let _ = run::atomic::remove_temporaries(&path);
        }
        Ok(())
    }
}

/// Whether the best evaluation `best` meets the target accuracy, when there is one.
fn target_met(target: Option<f64>, best: Option<f64>) -> bool {
    matches!((target, best), (Some(target), Some(best)) if best >= target)
}

/// The state of a run in progress: model, optimizer, where it is, and what it has written.
pub(crate) struct Trainer<'a> {
    /// The run's config, resolved into its task and model sizes.
    pub(crate) resolved: &'a ResolvedRun,
    pub(crate) dir: &'a RunDir,
    /// The plain device, for evaluation; `autodiff` is the same with gradients.
    pub(crate) device: Device,
    pub(crate) autodiff: Device,
    pub(crate) model: Encoder,
    pub(crate) optim: ModuleOptimizer,
    /// Optimizer steps completed.
    pub(crate) step: usize,
    /// The step this process started from (0, or the checkpoint's).
    pub(crate) first_step: usize,
    pub(crate) best_eval: Option<f64>,
    pub(crate) last_eval: Option<(f64, f64, f64)>,
    pub(crate) eval_set: Vec<Example>,
    pub(crate) metrics: MetricsLog,
    /// Training seconds of the process(es) before this one.
    pub(crate) elapsed_before: f64,
    pub(crate) started: Instant,
    pub(crate) last_log: (Instant, usize),
    pub(crate) last_good_checkpoint: Option<PathBuf>,
}

impl<'a> Trainer<'a> {
    /// The run from `start`: the metrics log cut back to its checkpoint; the step-0 snapshot
    /// of a new run.
    pub(crate) fn start(
        run: &'a ResolvedRun,
        dir: &'a RunDir,
        start: StartPoint,
        device: Device,
    ) -> Result<Self, TrainError> {
        let config = &run.config;
        let step = start.step();
        let StartPoint {
            autodiff,
            model,
            optim,
            resumed: state,
        } = start;
        let metrics_path = dir.metrics_path();
        let metrics = MetricsLog::open(&metrics_path, step).map_err(|e| TrainError::Write {
            path: metrics_path.clone(),
            message: e.to_string(),
        })?;
        let trainer = Trainer {
            resolved: run,
            dir,
            device,
            autodiff,
            model,
            optim,
            step,
            first_step: step,
            best_eval: state.as_ref().and_then(|s| s.best_eval_token_acc),
            last_eval: None,
            eval_set: config.eval_examples(&run.task),
            metrics,
            elapsed_before: state.as_ref().map_or(0.0, |s| s.elapsed_s),
            started: Instant::now(),
            last_log: (Instant::now(), step),
            last_good_checkpoint: checkpoint::list(dir).first().map(|c| c.1.clone()),
        };
        if config.train.snapshot_every > 0 {
            let snapshots = dir.snapshots_dir();
            std::fs::create_dir_all(&snapshots).map_err(|e| TrainError::Write {
                path: snapshots,
                message: e.to_string(),
            })?;
            if step == 0 {
                trainer.snapshot()?;
            }
        }
        Ok(trainer)
    }

    /// Whether the best evaluation so far reached `train.target_accuracy`.
    pub(crate) fn target_reached(&self) -> bool {
        target_met(self.resolved.config.train.target_accuracy, self.best_eval)
    }

    /// Steps this process trained.
    pub(crate) fn steps_trained(&self) -> usize {
        self.step - self.first_step
    }

    /// Writes the final weights and seals the run when it ended (finished or at its target),
    /// unless it was complete already and this process trained nothing.
    pub(crate) fn complete(&self, outcome: &Outcome) -> Result<(), TrainError> {
        if !matches!(outcome, Outcome::Finished | Outcome::TargetReached)
            || (self.steps_trained() == 0 && self.dir.is_sealed())
        {
            return Ok(());
        }
        weights::write(&self.dir.final_weights_path(), &self.model)?;
        // Last: the manifest makes the run complete (run::manifest).
        Ok(self.dir.seal()?)
    }

    /// Forward and backward on the step's batch.
    fn gradients(&self) -> StepGradients {
        let config = &self.resolved.config;
        // Dropout masks come from the device RNG: reseed it per step so resume is exact.
        self.autodiff
            .seed(mix_seed(config.seed, DROPOUT_STREAM + self.step as u64));
        let examples = training_examples(
            &self.resolved.task,
            config.seed,
            self.step,
            config.train.batch_size,
        );
        // Shards are for CPU cores; a GPU runs the whole batch at once.
        let shards = match config.backend {
            BackendKind::Wgpu => 1,
            BackendKind::Flex | BackendKind::Ndarray => config.train.shards,
        };
        // Dropout draws its masks from the device's one generator: shards running at once
        // would draw in an order set by thread timing, so with dropout they take turns.
        let parallel_shards = config.model.dropout == 0.0;
        if self.resolved.task.scores_masked_positions_only() {
            let forward_at = |model: &Encoder, batch: &Batch, rows: Tensor<1, Int>| {
                model.forward_at(batch.encoder_input(), rows)
            };
            return scored_step_gradients(
                &self.model,
                forward_at,
                &examples,
                shards,
                parallel_shards,
                &self.autodiff,
            );
        }
        step_gradients(
            &self.model,
            |model: &Encoder, batch: &Batch| model.forward_input(batch.encoder_input()),
            &examples,
            shards,
            parallel_shards,
            &self.autodiff,
        )
    }

    /// The loss as a number when it is needed (a log line, a checkpoint) or cheap (a CPU
    /// backend, where reading it costs no sync); an error if it is not finite.
    fn read_loss(&self, loss: Tensor<1>, needed: bool) -> Result<Option<f32>, TrainError> {
        let read = needed || self.resolved.config.backend.is_deterministic();
        let value = read.then(|| loss.into_scalar::<f32>());
        if let Some(value) = value.filter(|v| !v.is_finite()) {
            return Err(self.non_finite(value));
        }
        Ok(value)
    }

    /// The error of a loss that is not finite at the step after `self.step`.
    pub(crate) fn non_finite(&self, loss: f32) -> TrainError {
        TrainError::NonFinite {
            step: self.step + 1,
            loss,
            kept: match &self.last_good_checkpoint {
                Some(dir) => format!("The last good checkpoint is {}.", dir.display()),
                None => "No checkpoint was written yet.".to_string(),
            },
        }
    }

    /// One AdamW update at rate `lr`.
    fn update(&mut self, lr: f64, grads: GradientsParams) {
        self.model = self.optim.step(lr, self.model.clone(), grads);
        self.step += 1;
    }

    /// Appends a line to `metrics.jsonl`, evaluating first when `evaluate` says so.
    pub(crate) fn log(
        &mut self,
        loss: Option<f32>,
        lr: f64,
        evaluate_now: bool,
    ) -> Result<MetricsRecord, TrainError> {
        let now = Instant::now();
        let seconds = now.duration_since(self.last_log.0).as_secs_f64().max(1e-9);
        let tokens_per_step =
            (self.resolved.config.train.batch_size * self.resolved.task.seq_len()) as f64;
        let mut record = MetricsRecord {
            step: self.step,
            loss: loss.unwrap_or(f32::NAN) as f64,
            lr,
            tokens_per_s: tokens_per_step * (self.step - self.last_log.1) as f64 / seconds,
            elapsed_s: self.elapsed(),
            eval_loss: None,
            eval_token_acc: None,
            eval_seq_acc: None,
        };
        if evaluate_now {
            let (eval_loss, accuracy) =
                evaluate(&self.model.valid(), &self.eval_set, &self.device, None);
            let (token_acc, seq_acc) = (accuracy.token_accuracy(), accuracy.sequence_accuracy());
            record.eval_loss = Some(eval_loss);
            record.eval_token_acc = Some(token_acc);
            record.eval_seq_acc = Some(seq_acc);
            self.best_eval = Some(self.best_eval.map_or(token_acc, |b| b.max(token_acc)));
            self.last_eval = Some((eval_loss, token_acc, seq_acc));
        }
        self.metrics
            .append(&record)
            .map_err(|e| TrainError::Write {
                path: self.metrics.path().to_path_buf(),
                message: e.to_string(),
            })?;
        // The next window starts after this record's evaluation, so `tokens_per_s`
        // measures training alone.
        self.last_log = (Instant::now(), self.step);
        Ok(record)
    }

    /// `snapshots/step-N.safetensors` for the current step.
    pub(crate) fn snapshot(&self) -> Result<(), TrainError> {
        let path = self.dir.snapshot_path(self.step);
        Ok(write_snapshot(&path, &self.model.valid(), self.step)?)
    }

    /// `checkpoints/step-N/` for the current step, pruning old ones.
    pub(crate) fn checkpoint(&mut self) -> Result<(), TrainError> {
        let state = CheckpointState {
            step: self.step,
            seed: self.resolved.config.seed,
            best_eval_token_acc: self.best_eval,
            elapsed_s: self.elapsed(),
        };
        let keep = self.resolved.config.train.keep_checkpoints;
        let dir = checkpoint::save(self.dir, &self.model, &self.optim, &state, keep)?;
        self.last_good_checkpoint = Some(dir);
        Ok(())
    }

    /// Training seconds, this process's and its predecessors'.
    fn elapsed(&self) -> f64 {
        self.elapsed_before + self.started.elapsed().as_secs_f64()
    }
}

/// Loads the newest checkpoint that loads, falling back to older ones.
fn load_newest_checkpoint(
    dir: &RunDir,
    config: &RunConfig,
    model: Encoder,
    optim: ModuleOptimizer,
    at_most: Option<usize>,
) -> Result<(Encoder, ModuleOptimizer, CheckpointState), TrainError> {
    let mut newest_error = None;
    let checkpoints = checkpoint::list(dir)
        .into_iter()
        .filter(|(step, _)| at_most.is_none_or(|limit| *step <= limit));
    for (step, path) in checkpoints {
        match checkpoint::load(dir, step, config.train.steps, model.clone(), optim.clone()) {
            Ok(loaded) => {
                if let Some(error) = &newest_error {
                    eprintln!(
                        "warning: {error}; resuming from the older {}",
                        path.display()
                    );
                }
                return Ok(loaded);
            }
            Err(error) => {
                newest_error.get_or_insert(error);
            }
        }
    }
    Err(match newest_error {
        Some(newest) => TrainError::NoLoadableCheckpoint {
            dir: dir.root().to_path_buf(),
            newest,
        },
        None => TrainError::NothingToResume(dir.root().to_path_buf()),
    })
}

/// Progress bar or plain lines.
pub(crate) struct Display {
    pub(crate) bar: Option<ProgressBar>,
    pub(crate) lines: bool,
    pub(crate) total: usize,
}

impl Display {
    pub(crate) fn new(progress: Progress, total: usize, start: usize) -> Self {
        let interactive = progress == Progress::Auto && std::io::stderr().is_terminal();
        let bar = interactive.then(|| {
            let bar = ProgressBar::new(total as u64).with_position(start as u64);
            bar.set_style(
                ProgressStyle::with_template(
                    "{bar:30.cyan/blue} {pos}/{len} {msg} [{elapsed_precise} < {eta_precise}]",
                )
                .expect("valid template"),
            );
            bar
        });
        Self {
            bar,
            lines: progress == Progress::Auto && !interactive,
            total,
        }
    }

    pub(crate) fn update(&mut self, record: &MetricsRecord, last_eval: Option<(f64, f64, f64)>) {
        let eval = last_eval.map_or(String::new(), |(_, token, seq)| {
            format!(" eval_acc {:.2}% seq {:.2}%", token * 100.0, seq * 100.0)
        });
        let message = format!(
            "loss {:.4}{eval} {:.0} tok/s",
            record.loss, record.tokens_per_s
        );
        if let Some(bar) = &self.bar {
            bar.set_position(record.step as u64);
            bar.set_message(message);
        } else if self.lines && record.eval_token_acc.is_some() {
            println!("step {}/{} {message}", record.step, self.total);
        }
    }

    /// Says that a stop was asked for, and what happens next.
    pub(crate) fn note(&self, stop: &Outcome, step: usize) {
        let message = match stop {
            Outcome::Interrupted(signal) => format!(
                "{} received: saving a checkpoint at step {step} (send it again to abort)",
                signal_name(*signal)
            ),
            _ => return,
        };
        match &self.bar {
            Some(bar) => bar.println(message),
            None => eprintln!("{message}"),
        }
    }

    pub(crate) fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish();
        }
    }
}
