//! What the `inspect` tests share: training a run through the `train` library.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use train::{Progress, RunConfig, TrainOptions};

/// Trains the config at `config` (with `--set`-style `overrides`) into `run_dir`, quietly.
pub fn train_run(config: &Path, overrides: &[&str], run_dir: &Path) {
    let overrides: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    let run = RunConfig::load(config, &overrides)
        .unwrap()
        .resolve(config)
        .unwrap();
    let options = TrainOptions {
        run_dir: run_dir.to_path_buf(),
        resume: false,
        force: false,
        progress: Progress::Quiet,
        stop: Arc::new(AtomicBool::new(false)),
        stop_at_step: None,
    };
    train::train(&run, &options).unwrap();
}
