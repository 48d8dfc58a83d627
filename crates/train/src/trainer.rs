//! The training loop: AdamW with warmup and cosine decay, gradient clipping, masked
//! cross-entropy per position, periodic evaluation on a fixed set, early stopping,
//! snapshots of head weights, checkpoints that resume exactly, and a run directory that
//! `inspect` reads.
//!
//! Exact resume rests on three things: batches and dropout masks are functions of
//! (seed, step) rather than of a running RNG, the learning rate is a function of the step,
//! and checkpoints hold the optimizer's moments with the parameter ids they belong to.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use burn::module::Module;
use burn::optim::grad_clipping::GradientClippingConfig;
use burn::optim::{AdamWConfig, ModuleOptimizer};
use burn::prelude::*;
use burn::store::{ModuleSnapshot, SafetensorsStore};
use indicatif::{ProgressBar, ProgressStyle};
use model::{Encoder, EncoderInput};

use crate::atomic::write_atomic;
use crate::backend::{BackendKind, NoAdapter};
use crate::batch::{Accuracy, Batch, masked_cross_entropy, mix_seed, training_examples};
use crate::checkpoint::{self, CheckpointError, CheckpointState};
use crate::config::{ResolvedRun, RunConfig};
use crate::metrics::{MetricsLog, MetricsRecord};
use crate::schedule::learning_rate;
use crate::snapshot::write_snapshot;
use crate::step::{StepGradients, step_gradients};
use crate::tasks::Example;
use crate::tensor_file::TensorFileError;

/// Stream number of the evaluation set, apart from every step's stream.
const EVAL_STREAM: u64 = u64::MAX;
/// Stream offset of dropout masks, apart from batch streams.
const DROPOUT_STREAM: u64 = 1 << 62;
/// Sequences per evaluation forward pass.
pub(crate) const EVAL_CHUNK: usize = 256;

/// The run's fixed evaluation set: what training reports accuracy on, and what `inspect`
/// measures ablations on.
pub fn eval_examples(config: &RunConfig, task: &crate::tasks::Task) -> Vec<Example> {
    task.eval_set(config.train.eval_size, mix_seed(config.seed, EVAL_STREAM))
}

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
    /// Replace an existing run in `run_dir`.
    pub force: bool,
    /// How progress is shown.
    pub progress: Progress,
    /// Set from another thread (Ctrl-C) to stop after the current step with a checkpoint.
    pub stop: Arc<AtomicBool>,
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
    /// Stopped by Ctrl-C; a checkpoint was saved.
    Interrupted,
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
    /// The last evaluation: (loss, token accuracy, sequence accuracy).
    pub last_eval: Option<(f64, f64, f64)>,
    /// The run directory.
    pub run_dir: PathBuf,
}

/// Why a run could not start or went on.
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    /// Refusing to overwrite.
    #[error(
        "run directory {0} already holds a run; pass --resume to continue it, --force to \
         replace it, or --out to choose another directory"
    )]
    RunExists(PathBuf),
    /// `--resume` without a checkpoint.
    #[error("nothing to resume in {0}: it has no complete checkpoint")]
    NothingToResume(PathBuf),
    /// `--resume` with every checkpoint unreadable.
    #[error("cannot resume {dir}: no checkpoint could be loaded; newest error: {newest}")]
    NoLoadableCheckpoint {
        /// The run.
        dir: PathBuf,
        /// The newest checkpoint's error.
        newest: CheckpointError,
    },
    /// `--resume` with a different config.
    #[error(
        "the config differs from the one the run in {dir} was started with ({key} differs); \
         resume with the same config (the run's own config.toml works), or start over with --force"
    )]
    ConfigChanged {
        /// The run.
        dir: PathBuf,
        /// The first differing section.
        key: String,
    },
    /// No GPU for wgpu.
    #[error(transparent)]
    Backend(#[from] NoAdapter),
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
    /// Another file of the run could not be written.
    #[error("cannot write {path}: {message}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
}

fn write_error(path: &Path) -> impl Fn(std::io::Error) -> TrainError + '_ {
    move |e| TrainError::Write {
        path: path.to_path_buf(),
        message: e.to_string(),
    }
}

/// A snapshot that could not be written, with its path named once (the file error names it
/// too).
fn snapshot_error(error: TensorFileError) -> TrainError {
    match error {
        TensorFileError::Io { path, source } => TrainError::Write {
            path,
            message: source.to_string(),
        },
        TensorFileError::Corrupt { path, message } => TrainError::Write { path, message },
    }
}

/// Trains `run` as the options say.
pub fn train(run: &ResolvedRun, options: &TrainOptions) -> Result<RunSummary, TrainError> {
    let config = &run.config;
    let run_dir = &options.run_dir;
    // The device first: a missing GPU must not leave a half-made run directory behind.
    let plain_device = config.backend.device()?;
    prepare_run_dir(config, options)?;
    if let Some(threads) = config.train.threads {
        // Fails only if a pool already exists (a second run in one process): keep that one.
        let _ = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build_global();
    }

    let device = plain_device.clone().autodiff();
    device.seed(config.seed);
    let mut model = config
        .model
        .init(&run.io, &device)
        .expect("the model config was validated when the run was resolved");
    let mut optim = optimizer(config);

    let mut start_step = 0;
    let mut elapsed_before = 0.0;
    let mut best_eval = None;
    if options.resume {
        // A process killed while writing leaves hidden temporaries (a half-written
        // checkpoint directory, say). They are never read; clear them so kills do not pile
        // up disk. Best effort: a directory that refuses is reported by the first real write.
        for dir in [
            run_dir.clone(),
            run_dir.join("checkpoints"),
            run_dir.join("snapshots"),
        ] {
            let _ = crate::atomic::remove_temporaries(&dir);
        }
        let (loaded_model, loaded_optim, state) = resume(run_dir, model, optim)?;
        (model, optim) = (loaded_model, loaded_optim);
        start_step = state.step;
        elapsed_before = state.elapsed_s;
        best_eval = state.best_eval_token_acc;
    }
    // A run stops at the first evaluation that reaches the target, and that evaluation is
    // the only one whose checkpoint records a best accuracy at or above it. Resuming from
    // that checkpoint (a kill before model.safetensors was written) must not train on.
    let target_reached = matches!(
        (config.train.target_accuracy, best_eval),
        (Some(target), Some(best)) if best >= target
    );

    let metrics_path = run_dir.join("metrics.jsonl");
    let mut metrics = MetricsLog::open(run_dir, start_step).map_err(write_error(&metrics_path))?;
    let eval_examples = eval_examples(config, &run.task);
    let snapshots = run_dir.join("snapshots");
    if config.train.snapshot_every > 0 {
        std::fs::create_dir_all(&snapshots).map_err(write_error(&snapshots))?;
        if start_step == 0 {
            let path = snapshots.join("step-0.safetensors");
            write_snapshot(&path, &model.valid(), 0).map_err(snapshot_error)?;
        }
    }

    let train = &config.train;
    let tokens_per_step = (train.batch_size * run.task.seq_len()) as f64;
    let read_loss_every_step = config.backend.is_deterministic();
    // Shards are for CPU cores; a GPU runs the whole batch at once.
    let shards = match config.backend {
        BackendKind::Wgpu => 1,
        BackendKind::Flex | BackendKind::Ndarray => train.shards,
    };
    // Dropout draws its masks from the device's one generator: shards running at once would
    // draw in an order set by thread timing, so with dropout they take turns.
    let parallel_shards = config.model.dropout == 0.0;
    let mut display = Display::new(options.progress, train.steps, start_step);
    let started = Instant::now();
    let (mut last_log_time, mut last_log_step) = (Instant::now(), start_step);
    let mut last_eval = None;
    let mut last_good_checkpoint = checkpoint::list(run_dir).first().map(|c| c.1.clone());
    let mut outcome = if target_reached {
        Outcome::TargetReached
    } else {
        Outcome::Finished
    };
    let mut step = start_step;

    while step < train.steps && !target_reached {
        let lr = learning_rate(train, step);
        // Dropout masks come from the device RNG: reseed it per step so resume is exact.
        device.seed(mix_seed(config.seed, DROPOUT_STREAM + step as u64));
        let examples = training_examples(&run.task, config.seed, step, train.batch_size);
        let StepGradients { grads, loss } = step_gradients(
            &model,
            Encoder::forward,
            &examples,
            shards,
            parallel_shards,
            &device,
        );

        let done = step + 1;
        let is_last = done == train.steps;
        let interrupted = options.stop.load(Ordering::SeqCst);
        let paused = options.stop_at_step == Some(done) && !is_last;
        let stop_requested = interrupted || paused;
        let eval_due = done % train.eval_every == 0 || is_last || stop_requested;
        let checkpoint_due = done % train.checkpoint_every == 0 || is_last || stop_requested;
        let log_due = done % train.log_every == 0 || eval_due;
        let loss_value = (read_loss_every_step || log_due || checkpoint_due)
            .then(|| loss.clone().into_scalar::<f32>());
        if let Some(value) = loss_value.filter(|v| !v.is_finite()) {
            return Err(TrainError::NonFinite {
                step: done,
                loss: value,
                kept: match &last_good_checkpoint {
                    Some(dir) => format!("The last good checkpoint is {}.", dir.display()),
                    None => "No checkpoint was written yet.".to_string(),
                },
            });
        }

        model = optim.step(lr, model, grads);
        step = done;

        if log_due {
            let now = Instant::now();
            let seconds = now.duration_since(last_log_time).as_secs_f64().max(1e-9);
            let mut record = MetricsRecord {
                step,
                loss: loss_value.unwrap_or(f32::NAN) as f64,
                lr,
                tokens_per_s: tokens_per_step * (step - last_log_step) as f64 / seconds,
                elapsed_s: elapsed_before + started.elapsed().as_secs_f64(),
                eval_loss: None,
                eval_token_acc: None,
                eval_seq_acc: None,
            };
            if eval_due {
                let (eval_loss, accuracy) =
                    evaluate(&model.valid(), &eval_examples, &plain_device, None);
                record.eval_loss = Some(eval_loss);
                record.eval_token_acc = Some(accuracy.token_accuracy());
                record.eval_seq_acc = Some(accuracy.sequence_accuracy());
                let token_acc = accuracy.token_accuracy();
                best_eval = Some(best_eval.map_or(token_acc, |b: f64| b.max(token_acc)));
                last_eval = Some((eval_loss, token_acc, accuracy.sequence_accuracy()));
                if train.target_accuracy.is_some_and(|t| token_acc >= t) {
                    outcome = Outcome::TargetReached;
                }
            }
            metrics
                .append(&record)
                .map_err(write_error(metrics.path()))?;
            display.update(&record, last_eval);
            (last_log_time, last_log_step) = (now, step);
        }

        let stopping = stop_requested || outcome == Outcome::TargetReached;
        if train.snapshot_every > 0 && (step % train.snapshot_every == 0 || is_last || stopping) {
            let path = snapshots.join(format!("step-{step}.safetensors"));
            write_snapshot(&path, &model.valid(), step).map_err(snapshot_error)?;
        }
        if checkpoint_due || stopping {
            let state = CheckpointState {
                step,
                seed: config.seed,
                best_eval_token_acc: best_eval,
                elapsed_s: elapsed_before + started.elapsed().as_secs_f64(),
            };
            let dir = checkpoint::save(run_dir, &model, &optim, &state, train.keep_checkpoints)?;
            last_good_checkpoint = Some(dir);
        }
        if interrupted {
            outcome = Outcome::Interrupted;
        } else if paused {
            outcome = Outcome::Paused;
        }
        if stopping {
            break;
        }
    }

    if matches!(outcome, Outcome::Finished | Outcome::TargetReached) {
        write_final_weights(run_dir, &model)?;
    }
    display.finish();
    Ok(RunSummary {
        outcome,
        step,
        last_eval,
        run_dir: run_dir.clone(),
    })
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

/// Checks the run directory against the options and writes the resolved config.
fn prepare_run_dir(config: &RunConfig, options: &TrainOptions) -> Result<(), TrainError> {
    let dir = &options.run_dir;
    let occupied = std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_some());
    let config_path = dir.join("config.toml");
    if options.resume {
        if checkpoint::list(dir).is_empty() {
            return Err(TrainError::NothingToResume(dir.clone()));
        }
        if let Ok(saved) = RunConfig::from_toml(&config_path) {
            // The backend may change on resume; nothing else may.
            let mut saved = saved;
            saved.backend = config.backend;
            if let Some(key) = first_difference(&saved, config) {
                return Err(TrainError::ConfigChanged {
                    dir: dir.clone(),
                    key,
                });
            }
        }
        return Ok(());
    }
    if occupied {
        if !options.force {
            return Err(TrainError::RunExists(dir.clone()));
        }
        std::fs::remove_dir_all(dir).map_err(write_error(dir))?;
    }
    std::fs::create_dir_all(dir).map_err(write_error(dir))?;
    write_atomic(&config_path, config.to_toml().as_bytes()).map_err(write_error(&config_path))
}

/// The first top-level key or section where two configs differ.
fn first_difference(a: &RunConfig, b: &RunConfig) -> Option<String> {
    let table = |c: &RunConfig| match toml::Value::try_from(c) {
        Ok(toml::Value::Table(table)) => table,
        _ => unreachable!("a run config serializes to a table"),
    };
    let (a, b) = (table(a), table(b));
    a.keys()
        .chain(b.keys())
        .find(|key| a.get(*key) != b.get(*key))
        .cloned()
}

/// Loads the newest checkpoint that loads, falling back to older ones.
fn resume(
    run_dir: &Path,
    model: Encoder,
    optim: ModuleOptimizer,
) -> Result<(Encoder, ModuleOptimizer, CheckpointState), TrainError> {
    let mut newest_error = None;
    for (_, dir) in checkpoint::list(run_dir) {
        match checkpoint::load(&dir, model.clone(), optim.clone()) {
            Ok(loaded) => {
                if let Some(error) = &newest_error {
                    eprintln!(
                        "warning: {error}; resuming from the older {}",
                        dir.display()
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
            dir: run_dir.to_path_buf(),
            newest,
        },
        None => TrainError::NothingToResume(run_dir.to_path_buf()),
    })
}

/// Mean loss and accuracy of `model` (inference copy) on `examples`, with heads ablated
/// where `head_mask` (`[n_layers, n_heads]`, 1 keep / 0 ablate) says.
pub fn evaluate(
    model: &Encoder,
    examples: &[Example],
    device: &Device,
    head_mask: Option<Tensor<2>>,
) -> (f64, Accuracy) {
    let mut accuracy = Accuracy::default();
    let mut weighted_loss = 0.0;
    for chunk in examples.chunks(EVAL_CHUNK) {
        let batch = Batch::new(chunk, device);
        let scored: f64 = chunk
            .iter()
            .map(|e| e.target.iter().flatten().count() as f64)
            .sum();
        let input = EncoderInput {
            tokens: batch.tokens,
            mask: Default::default(),
            head_mask: head_mask.clone(),
        };
        let logits = model.forward_input(input);
        let loss: f32 =
            masked_cross_entropy(logits.clone(), batch.targets, batch.weights).into_scalar();
        weighted_loss += loss as f64 * scored;
        accuracy.add(Accuracy::of(logits, chunk));
    }
    (
        weighted_loss / accuracy.scored_tokens.max(1) as f64,
        accuracy,
    )
}

/// `model.safetensors`: the final weights under their module paths.
fn write_final_weights(run_dir: &Path, model: &Encoder) -> Result<(), TrainError> {
    let path = run_dir.join("model.safetensors");
    let tmp = run_dir.join(".model.safetensors.tmp");
    let mut store = SafetensorsStore::from_file(&tmp).overwrite(true);
    let result = model
        .valid()
        .save_into(&mut store)
        .map_err(|e| TrainError::Write {
            path: path.clone(),
            message: format!("{e:?}"),
        })
        .and_then(|()| std::fs::rename(&tmp, &path).map_err(write_error(&path)));
    if result.is_err() {
        // A full disk leaves half a file under the temporary name: do not keep it.
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Progress bar or plain lines.
struct Display {
    bar: Option<ProgressBar>,
    lines: bool,
    total: usize,
}

impl Display {
    fn new(progress: Progress, total: usize, start: usize) -> Self {
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

    fn update(&mut self, record: &MetricsRecord, last_eval: Option<(f64, f64, f64)>) {
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

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish();
        }
    }
}
