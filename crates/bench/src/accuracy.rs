//! Time to a token accuracy (`bench --to-accuracy 0.99`): the small model trained on reverse
//! (seq 32, vocab 32, batch 64, AdamW at a constant 1e-3) until its token accuracy on a fixed
//! held-out set, evaluated every [`EVAL_EVERY`] steps, reaches the target. headlab trains
//! with `train`'s own trainer ([`train::train`], in a temporary run directory); the PyTorch
//! reference with the same protocol ([`crate::pytorch::run_to_accuracy`]).

use std::fmt::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use run::{BackendKind, RunConfig, RunDir, StopSignal};
use serde::{Deserialize, Serialize};
use train::trainer::{Progress, TrainOptions};

use crate::case::{Implementation, headlab_parameters, resolve};
use crate::rounds::median;

/// Tokens per sequence.
pub const SEQ_LEN: usize = 32;
/// Distinct tokens.
pub const VOCAB: usize = 32;
/// Steps between evaluations.
pub const EVAL_EVERY: usize = 10;
/// Held-out sequences evaluated (one evaluation chunk).
pub const EVAL_SIZE: usize = 256;
/// Step cap when `--max-steps` is not given.
pub const DEFAULT_MAX_STEPS: usize = 20_000;

/// One implementation's time to the target.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AccuracyResult {
    /// Whose encoder.
    pub implementation: Implementation,
    /// headlab's backend (the reference runs on the CPU).
    pub backend: Option<BackendKind>,
    /// The token accuracy aimed at.
    pub target: f64,
    /// Whether the target was reached before the step cap.
    pub reached: bool,
    /// Steps trained until the evaluation that reached the target (or the cap).
    pub steps: usize,
    /// Training seconds until then, evaluations before it included.
    pub seconds: f64,
    /// Token accuracy of that evaluation.
    pub token_accuracy: f64,
    /// Parameters of the model.
    pub parameters: usize,
    /// CPU threads (rayon's, or torch's).
    pub threads: usize,
    /// headlab's `train.shards`; 1 for the reference.
    pub shards: usize,
    /// PyTorch's version, for the reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Rounds the figures are the median of.
    #[serde(default = "one")]
    pub rounds: usize,
}

fn one() -> usize {
    1
}

/// The headlab run: reverse over 32 tokens at length 32, the small model (d_model 64, 4
/// heads, 2 layers, d_ff 256, sinusoidal positions, no dropout), batch 64, AdamW at a
/// constant 1e-3 with `train`'s defaults otherwise (weight decay 0.01, gradient clipping 1),
/// evaluated every 10 steps on 256 held-out sequences; no snapshots, one checkpoint at the end.
pub fn run_config(backend: BackendKind, target: f64, max_steps: usize, shards: usize) -> RunConfig {
    let text = format!(
        "name = \"bench-to-accuracy\"\nbackend = \"{backend}\"\n\
         [task]\nkind = \"reverse\"\nseq_len = {SEQ_LEN}\nvocab_size = {VOCAB}\n\
         [model]\nd_model = 64\nn_heads = 4\nn_layers = 2\nd_ff = 256\n\
         positional = \"sinusoidal\"\ndropout = 0.0\n\
         [train]\nsteps = {max_steps}\nbatch_size = 64\nlr = 1e-3\nschedule = \"constant\"\n\
         warmup_steps = 0\neval_every = {EVAL_EVERY}\neval_size = {EVAL_SIZE}\n\
         log_every = {EVAL_EVERY}\ncheckpoint_every = {max_steps}\nkeep_checkpoints = 1\n\
         snapshot_every = 0\ntarget_accuracy = {target:?}\nshards = {shards}\n",
        backend = backend.name(),
    );
    toml::from_str(&text).expect("the time-to-accuracy config is valid")
}

/// Parameters of the time-to-accuracy model (what the reference must match).
pub fn parameters() -> anyhow::Result<usize> {
    headlab_parameters(run_config(BackendKind::Flex, 0.99, 1, 1))
}

/// Trains headlab to `target` in this process with `train`'s trainer, in a temporary run
/// directory that is removed afterwards.
pub fn run_headlab(
    backend: BackendKind,
    target: f64,
    max_steps: usize,
    shards: usize,
) -> anyhow::Result<AccuracyResult> {
    let config = run_config(backend, target, max_steps, shards);
    let parameters = headlab_parameters(config.clone())?;
    let run = resolve(config)?;
    let dir = TempRunDir::new();
    let options = TrainOptions {
        run_dir: dir.0.clone(),
        resume: false,
        force: false,
        progress: Progress::Quiet,
        stop: StopSignal::manual(),
        stop_at_step: None,
    };
    train::train(&run, &options).context("training headlab to the target accuracy")?;
    let metrics = RunDir::open(&dir.0)
        .context("reading the time-to-accuracy run")?
        .metrics();
    let evaluations: Vec<_> = metrics
        .iter()
        .filter_map(|r| r.eval_token_acc.map(|acc| (r, acc)))
        .collect();
    let (record, accuracy) = evaluations
        .iter()
        .find(|(_, acc)| *acc >= target)
        .or(evaluations.last())
        .context("the time-to-accuracy run logged no evaluation")?;
    Ok(AccuracyResult {
        implementation: Implementation::Headlab,
        backend: Some(backend),
        target,
        reached: *accuracy >= target,
        steps: record.step,
        seconds: record.elapsed_s,
        token_accuracy: *accuracy,
        parameters,
        threads: rayon::current_num_threads(),
        shards,
        version: None,
        rounds: 1,
    })
}

/// One implementation's rounds as one result: median seconds, steps and accuracy; reached
/// only if every round reached the target.
pub fn median_result(rounds: &[AccuracyResult]) -> Option<AccuracyResult> {
    let last = rounds.last()?;
    let of = |f: fn(&AccuracyResult) -> f64| median(&rounds.iter().map(f).collect::<Vec<_>>());
    Some(AccuracyResult {
        reached: rounds.iter().all(|r| r.reached),
        steps: of(|r| r.steps as f64).round() as usize,
        seconds: of(|r| r.seconds),
        token_accuracy: of(|r| r.token_accuracy),
        rounds: rounds.len(),
        ..last.clone()
    })
}

/// The results as a markdown table with a line on the protocol.
pub fn markdown(results: &[AccuracyResult], target: f64, max_steps: usize) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Time to {:.0}% token accuracy on reverse (seq {SEQ_LEN}, vocab {VOCAB}): small model \
         (d_model 64, 4 heads, 2 layers, d_ff 256), batch 64, AdamW at a constant 1e-3, \
         evaluated every {EVAL_EVERY} steps on {EVAL_SIZE} held-out sequences, at most \
         {max_steps} steps. Seconds are training time up to the evaluation that reached the \
         target, earlier evaluations included.\n",
        target * 100.0
    );
    out.push_str(
        "| implementation | reached | steps | seconds | steps/s | token accuracy (fraction) | threads | rounds |\n",
    );
    out.push_str("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for result in results {
        let name = match (&result.version, result.backend) {
            (Some(version), _) => format!("PyTorch {version}"),
            (None, Some(backend)) => format!(
                "headlab ({}, train.shards = {})",
                backend.name(),
                result.shards
            ),
            (None, None) => result.implementation.name().to_string(),
        };
        let _ = writeln!(
            out,
            "| {name} | {} | {} | {:.1} | {:.1} | {:.4} | {} | {} |",
            if result.reached { "yes" } else { "no" },
            result.steps,
            result.seconds,
            result.steps as f64 / result.seconds.max(1e-9),
            result.token_accuracy,
            result.threads,
            result.rounds,
        );
    }
    out
}

/// A fresh path under the temporary directory for the run, removed when dropped.
struct TempRunDir(PathBuf);

impl TempRunDir {
    fn new() -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let name = format!("headlab-bench-accuracy-{}-{nanos}", std::process::id());
        Self(std::env::temp_dir().join(name))
    }
}

impl Drop for TempRunDir {
    fn drop(&mut self) {
        if Path::new(&self.0).exists() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_is_the_protocol() {
        let run = resolve(run_config(BackendKind::Flex, 0.99, 500, 2)).unwrap();
        let train = &run.config.train;
        assert_eq!(run.task.seq_len(), 32);
        assert_eq!(run.io.vocab_size, 32);
        assert_eq!(
            (train.batch_size, train.lr, train.warmup_steps),
            (64, 1e-3, 0)
        );
        assert_eq!(
            (train.eval_every, train.eval_size, train.steps),
            (10, 256, 500)
        );
        assert_eq!(train.target_accuracy, Some(0.99));
        assert_eq!((train.snapshot_every, train.shards), (0, 2));
        assert_eq!(run.config.model.d_model, 64);
    }

    #[test]
    fn headlab_stops_at_the_step_cap_and_reports_its_last_evaluation() {
        // A target nobody reaches in 20 steps: the cap ends the run.
        let result = run_headlab(BackendKind::Flex, 1.0, 20, 1).unwrap();
        assert!(!result.reached);
        assert_eq!(result.steps, 20);
        assert!(result.seconds > 0.0);
        assert!((0.0..=1.0).contains(&result.token_accuracy));
        assert_eq!(result.parameters, parameters().unwrap());
    }

    #[test]
    fn medians_and_the_table() {
        let headlab = AccuracyResult {
            implementation: Implementation::Headlab,
            backend: Some(BackendKind::Flex),
            target: 0.99,
            reached: true,
            steps: 700,
            seconds: 20.0,
            token_accuracy: 0.991,
            parameters: 1000,
            threads: 2,
            shards: 2,
            version: None,
            rounds: 1,
        };
        let slower = AccuracyResult {
            seconds: 30.0,
            ..headlab.clone()
        };
        let median = median_result(&[headlab.clone(), slower]).unwrap();
        assert_eq!(
            (median.seconds, median.steps, median.rounds),
            (25.0, 700, 2)
        );
        let pytorch = AccuracyResult {
            implementation: Implementation::Pytorch,
            backend: None,
            reached: false,
            version: Some("2.15.0".into()),
            shards: 1,
            ..headlab
        };
        let table = markdown(&[median, pytorch], 0.99, 20_000);
        assert!(table.starts_with("Time to 99% token accuracy"), "{table}");
        let rows: Vec<&str> = table.lines().filter(|l| l.starts_with("| ")).collect();
        assert_eq!(
            rows[2],
            "| headlab (flex, train.shards = 2) | yes | 700 | 25.0 | 28.0 | 0.9910 | 2 | 2 |"
        );
        assert_eq!(
            rows[3],
            "| PyTorch 2.15.0 | no | 700 | 20.0 | 35.0 | 0.9910 | 2 | 1 |"
        );
    }
}
