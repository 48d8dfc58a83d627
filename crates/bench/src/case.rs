//! One benchmark case (a model size, a backend, an implementation) and its measurement:
//! training steps per second with AdamW on the reverse task, forward-only passes per
//! second, and peak memory. Both implementations go through the same batches, loss and
//! optimizer as `train`, so only the encoder differs.

use std::path::Path;
use std::time::Instant;

use anyhow::Context;
use burn::module::Module;
use burn::prelude::*;
use model::{Encoder, SeedStack, StackInput};
use run::{BackendKind, ResolvedRun, RunConfig};
use serde::{Deserialize, Serialize};
use tasks::batch::{Batch, training_examples};
use train::group::{clip_per_seed, stack_gradients, stack_optimizer};
use train::step::{StepGradients, step_gradients};

use crate::machine;
use crate::reference::BurnEncoder;

/// The two model sizes of the benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Size {
    /// d_model 64, 4 heads, 2 layers, d_ff 256, seq 32, batch 64.
    Small,
    /// d_model 256, 8 heads, 4 layers, d_ff 1024, seq 64, batch 32.
    Large,
}

impl Size {
    /// The name used on the command line and in the table.
    pub fn name(self) -> &'static str {
        match self {
            Size::Small => "small",
            Size::Large => "large",
        }
    }

    /// A headlab run config at this size: the reverse task over 10 tokens, a pre-norm
    /// encoder with sinusoidal positions and no dropout, AdamW at a constant 1e-3.
    pub fn run_config(self, backend: BackendKind) -> RunConfig {
        let (d_model, n_heads, n_layers, d_ff, seq_len, batch_size) = match self {
            Size::Small => (64, 4, 2, 256, 32, 64),
            Size::Large => (256, 8, 4, 1024, 64, 32),
        };
        let text = format!(
            "name = \"bench-{size}\"\nbackend = \"{backend}\"\n\
             [task]\nkind = \"reverse\"\nseq_len = {seq_len}\nvocab_size = 10\n\
             [model]\nd_model = {d_model}\nn_heads = {n_heads}\nn_layers = {n_layers}\n\
             d_ff = {d_ff}\npositional = \"sinusoidal\"\ndropout = 0.0\n\
             [train]\nbatch_size = {batch_size}\nschedule = \"constant\"\nwarmup_steps = 0\n",
            size = self.name(),
            backend = backend.name(),
        );
        toml::from_str(&text).expect("the benchmark configs are valid")
    }
}

/// Whose encoder blocks run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Implementation {
    // These doc comments are `bench --help`'s text: plain words, no rustdoc links.
    /// headlab's own encoder (`model::Encoder`).
    Headlab,
    /// Burn's built-in `TransformerEncoder` (`BurnEncoder` here).
    Burn,
    /// The PyTorch reference of headlab's encoder (`crates/bench/python/reference.py`), on
    /// the CPU, in a Python process of its own (`crate::pytorch`).
    Pytorch,
}

impl Implementation {
    /// The name used on the command line and in the table.
    pub fn name(self) -> &'static str {
        match self {
            Implementation::Headlab => "headlab",
            Implementation::Burn => "burn",
            Implementation::Pytorch => "pytorch",
        }
    }
}

/// One measurement to make.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Case {
    /// Model and batch size.
    pub size: Size,
    /// Where tensors live.
    pub backend: BackendKind,
    /// Whose encoder.
    pub implementation: Implementation,
    /// Parts each batch is split into (`train.shards`): headlab's setting; the Burn
    /// reference always trains on the whole batch, as a plain Burn training loop does.
    pub shards: usize,
    /// Models trained together as one batched model (`train --seeds`; PyTorch's
    /// `torch.func.vmap`), each on its own batch; 1 is a plain single model. A step is one
    /// step of every seed.
    #[serde(default = "one")]
    pub seeds: usize,
}

fn one() -> usize {
    1
}

/// How long to measure.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Budget {
    /// Untimed steps first (allocator, thread pool and shader warmup).
    pub warmup_steps: usize,
    /// Timed steps at least.
    pub min_steps: usize,
    /// Timed seconds at least, for training and again for the forward passes.
    pub min_seconds: f64,
}

/// What one case measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaseResult {
    /// The case.
    pub case: Case,
    /// Sequences per step.
    pub batch_size: usize,
    /// Tokens per sequence.
    pub seq_len: usize,
    /// Parameters of the model.
    pub parameters: usize,
    /// Threads of the global rayon pool, which flex and ndarray use.
    pub threads: usize,
    /// Timed training steps.
    pub train_steps: usize,
    /// Training steps (forward, backward, AdamW) per second.
    pub train_steps_per_s: f64,
    /// Forward passes (inference, no autodiff) per second.
    pub forward_passes_per_s: f64,
    /// The loss of the last timed step: the same for both implementations only in kind
    /// (their weights start differently), but a NaN here would void the figures.
    pub last_loss: f32,
    /// Peak resident memory of the case's process, MiB (host memory only on wgpu).
    pub peak_rss_mib: Option<f64>,
    /// The version of what ran, where it is not this build (PyTorch's `torch.__version__`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Rounds the figures are the median of (`--rounds`); 1 for a single measurement.
    #[serde(default = "one_round")]
    pub rounds: usize,
    /// Training steps per second of every round, in round order, when there were several.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub train_steps_per_s_rounds: Vec<f64>,
}

fn one_round() -> usize {
    1
}

impl CaseResult {
    /// Training tokens per second.
    pub fn train_tokens_per_s(&self) -> f64 {
        self.train_steps_per_s * (self.batch_size * self.seq_len) as f64
    }

    /// Forward-only tokens per second.
    pub fn forward_tokens_per_s(&self) -> f64 {
        self.forward_passes_per_s * (self.batch_size * self.seq_len) as f64
    }

    /// A made-up small-model result on flex for the tests of the table and of the rounds:
    /// `implementation` at `steps_per_s`, four times as many forward passes, 50.4 MiB peak.
    #[cfg(test)]
    pub(crate) fn example(implementation: Implementation, steps_per_s: f64) -> Self {
        CaseResult {
            case: Case {
                size: Size::Small,
                backend: BackendKind::Flex,
                implementation,
                shards: 1,
                seeds: 1,
            },
            batch_size: 64,
            seq_len: 32,
            parameters: 1000,
            threads: 2,
            train_steps: 10,
            train_steps_per_s: steps_per_s,
            forward_passes_per_s: 4.0 * steps_per_s,
            last_loss: 1.0,
            peak_rss_mib: Some(50.4),
            version: None,
            rounds: 1,
            train_steps_per_s_rounds: Vec::new(),
        }
    }
}

/// A model the benchmark can train: tokens in, logits per position out.
trait Classifier: Module + Sync {
    /// `tokens`: `[batch, seq]` -> `[batch, seq, classes]`.
    fn logits(&self, tokens: Tensor<2, Int>) -> Tensor<3>;
}

/// A batch's logits; the benchmark's tasks have one length, so nothing is padded.
fn logits_of<M: Classifier>(model: &M, batch: &Batch) -> Tensor<3> {
    assert!(
        batch.padding.is_none(),
        "benchmark batches are never padded"
    );
    model.logits(batch.tokens.clone())
}

impl Classifier for Encoder {
    fn logits(&self, tokens: Tensor<2, Int>) -> Tensor<3> {
        self.forward(tokens)
    }
}

impl Classifier for BurnEncoder {
    fn logits(&self, tokens: Tensor<2, Int>) -> Tensor<3> {
        self.forward(tokens)
    }
}

/// A benchmark config, resolved (task built, model checked).
pub fn resolve(config: RunConfig) -> anyhow::Result<ResolvedRun> {
    config
        .resolve(Path::new("<benchmark>"))
        .context("building the benchmark config")
}

/// Parameters of headlab's encoder for `config`: what the PyTorch reference must match.
pub fn headlab_parameters(config: RunConfig) -> anyhow::Result<usize> {
    let run = resolve(config)?;
    let device = BackendKind::Flex.device()?;
    Ok(run.config.model.init(&run.io, &device)?.num_params())
}

/// Measures `case` in this process.
pub fn run_case(case: Case, budget: Budget) -> anyhow::Result<CaseResult> {
    let run = resolve(case.size.run_config(case.backend))?;
    let plain_device = case.backend.device()?;
    let device = plain_device.clone().autodiff();
    device.seed(run.config.seed);
    match case.implementation {
        Implementation::Headlab if case.seeds > 1 => {
            measure_stack(case, &run, &device, &plain_device, budget)
        }
        Implementation::Burn if case.seeds > 1 => {
            anyhow::bail!("Burn's encoder has no seed stack: --seeds times headlab and PyTorch")
        }
        Implementation::Headlab => {
            let model = run.config.model.init(&run.io, &device)?;
            measure(case, model, &run, &device, &plain_device, budget)
        }
        Implementation::Burn => {
            let model = BurnEncoder::new(&run.config.model, &run.io, &device);
            measure(case, model, &run, &device, &plain_device, budget)
        }
        Implementation::Pytorch => anyhow::bail!(
            "the PyTorch reference runs in Python (crate::pytorch::run_case), not in bench"
        ),
    }
}

/// Times training steps, then forward passes, of `model`.
fn measure<M: Classifier>(
    case: Case,
    model: M,
    run: &ResolvedRun,
    device: &Device,
    plain_device: &Device,
    budget: Budget,
) -> anyhow::Result<CaseResult> {
    let config = &run.config;
    let batch_size = config.train.batch_size;
    let shards = case.shards;
    let parameters = model.num_params();
    let mut optim = train::trainer::optimizer(config);
    let mut step = 0;
    let mut train_step = |model: M| -> (M, f32) {
        let examples = training_examples(&run.task, config.seed, step, batch_size);
        let StepGradients { grads, loss } =
            step_gradients(&model, logits_of, &examples, shards, true, device);
        // Reading the loss waits for the device, as `train` does on CPU backends.
        let value = loss.into_scalar::<f32>();
        step += 1;
        (optim.step(config.train.lr, model, grads), value)
    };

    let (model, train) = time_training(budget, model, &mut train_step);
    let last_loss = train.last_loss;
    anyhow::ensure!(
        last_loss.is_finite(),
        "{} {} on {}: the loss became {last_loss}",
        case.implementation.name(),
        case.size.name(),
        case.backend.name()
    );

    let inference = model.valid();
    let examples = training_examples(&run.task, config.seed, 0, batch_size);
    let tokens = Batch::new(&examples, plain_device).tokens;
    let forward_passes_per_s = time_passes(budget, || {
        // Reading the logits back waits for the device.
        let _ = inference.logits(tokens.clone()).into_data();
    });
    Ok(train.result(case, batch_size, run, parameters, forward_passes_per_s))
}

/// What timing the training steps gave.
struct Training {
    steps: usize,
    seconds: f64,
    last_loss: f32,
}

impl Training {
    /// The case's result, with its forward passes per second.
    fn result(
        &self,
        case: Case,
        batch_size: usize,
        run: &ResolvedRun,
        parameters: usize,
        forward_passes_per_s: f64,
    ) -> CaseResult {
        CaseResult {
            case,
            batch_size,
            seq_len: run.task.seq_len(),
            parameters,
            threads: rayon::current_num_threads(),
            train_steps: self.steps,
            train_steps_per_s: self.steps as f64 / self.seconds,
            forward_passes_per_s,
            last_loss: self.last_loss,
            peak_rss_mib: machine::peak_rss_mib(),
            version: None,
            rounds: 1,
            train_steps_per_s_rounds: Vec::new(),
        }
    }
}

/// `budget.warmup_steps` untimed steps of `step` (which takes the model and gives it back
/// with the step's loss), then timed steps until both `min_steps` and `min_seconds` are met.
fn time_training<M>(
    budget: Budget,
    mut model: M,
    step: &mut impl FnMut(M) -> (M, f32),
) -> (M, Training) {
    for _ in 0..budget.warmup_steps {
        model = step(model).0;
    }
    let (mut steps, mut last_loss) = (0, f32::NAN);
    let started = Instant::now();
    while steps < budget.min_steps || started.elapsed().as_secs_f64() < budget.min_seconds {
        (model, last_loss) = step(model);
        steps += 1;
    }
    let seconds = started.elapsed().as_secs_f64();
    (
        model,
        Training {
            steps,
            seconds,
            last_loss,
        },
    )
}

/// Forward passes per second of `forward`, after `budget.warmup_steps` untimed ones, timed
/// until both `min_steps` and `min_seconds` are met.
fn time_passes(budget: Budget, forward: impl Fn()) -> f64 {
    for _ in 0..budget.warmup_steps {
        forward();
    }
    let mut passes = 0;
    let started = Instant::now();
    while passes < budget.min_steps || started.elapsed().as_secs_f64() < budget.min_seconds {
        forward();
        passes += 1;
    }
    passes as f64 / started.elapsed().as_secs_f64()
}

/// Times training steps, then forward passes, of `case.seeds` encoders trained as one
/// [`SeedStack`] (seeds `config.seed ..`), as `train --seeds` steps them: each seed's own
/// batch, per-seed clipping, one AdamW update.
fn measure_stack(
    case: Case,
    run: &ResolvedRun,
    device: &Device,
    plain_device: &Device,
    budget: Budget,
) -> anyhow::Result<CaseResult> {
    let config = &run.config;
    let seeds: Vec<u64> = (0..case.seeds as u64).map(|s| config.seed + s).collect();
    let encoders = seeds
        .iter()
        .map(|&seed| {
            device.seed(seed);
            config.model.init(&run.io, device)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let parameters = encoders[0].num_params();
    let stack = SeedStack::stack(&encoders.iter().collect::<Vec<_>>());
    let mut optim = stack_optimizer(config);
    let mut config = config.clone();
    config.train.shards = case.shards;
    let run = ResolvedRun {
        config,
        ..run.clone()
    };
    let mut step = 0;
    let mut train_step = |stack: SeedStack| -> (SeedStack, f32) {
        let StepGradients { grads, loss } = stack_gradients(&stack, &run, &seeds, step, device);
        let grads = clip_per_seed(&stack, grads, run.config.train.grad_clip as f32);
        // Reading the losses waits for the device, as `train` does on CPU backends.
        let value = loss.mean().into_scalar::<f32>();
        step += 1;
        (optim.step(run.config.train.lr, stack, grads), value)
    };
    let (stack, train) = time_training(budget, stack, &mut train_step);
    let last_loss = train.last_loss;
    anyhow::ensure!(
        last_loss.is_finite(),
        "headlab {} x{} on {}: the loss became {last_loss}",
        case.size.name(),
        case.seeds,
        case.backend.name()
    );

    let inference = stack.valid();
    let batch_size = run.config.train.batch_size;
    let tokens: Vec<Tensor<2, Int>> = seeds
        .iter()
        .map(|&seed| {
            let examples = training_examples(&run.task, seed, 0, batch_size);
            Batch::new(&examples, plain_device).tokens
        })
        .collect();
    let tokens = Tensor::stack::<3>(tokens, 0); // [seeds, batch, seq]
    let forward_passes_per_s = time_passes(budget, || {
        let input = StackInput {
            tokens: tokens.clone(),
            pad: None,
            dropout: None,
        };
        // Reading the logits back waits for the device.
        let _ = inference.forward(input).into_data();
    });
    Ok(train.result(case, batch_size, &run, parameters, forward_passes_per_s))
}
