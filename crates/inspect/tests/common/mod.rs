//! What the `inspect` tests share: training a run through the `train` library, and the one
//! way they start this crate's binaries.
// Each test file compiles this module on its own and uses only part of it.
#![allow(dead_code)]

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, Output};

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
        stop: Default::default(),
        stop_at_step: None,
    };
    train::train(&run, &options).unwrap();
}

/// `bin`, one of this crate's binaries (`env!("CARGO_BIN_EXE_inspect")` or
/// `env!("CARGO_BIN_EXE_compare")`), with `args`, to adjust further or to run.
pub fn bin_cmd<S: AsRef<OsStr>>(bin: &str, args: &[S]) -> Command {
    let mut command = Command::new(bin);
    command.args(args);
    command
}

/// Runs [`bin_cmd`] to its end and collects its output.
pub fn run_bin<S: AsRef<OsStr>>(bin: &str, args: &[S]) -> Output {
    bin_cmd(bin, args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {bin}: {e}"))
}

/// A run in `dir` with the model of `config_text` set by hand with `wire` (never trained),
/// loaded as `inspect` loads a run. The lock holds the run while the test reads it.
pub fn hand_built_run(
    dir: &Path,
    config_text: &str,
    wire: impl FnOnce(&mut model::Encoder, &burn::tensor::Device),
) -> (inspect::run::LoadedRun, train::run_dir::RunLock) {
    let config_path = dir.join("config.toml");
    std::fs::write(&config_path, config_text).unwrap();
    let run = RunConfig::from_toml(&config_path)
        .unwrap()
        .resolve(&config_path)
        .unwrap();
    let device = burn::tensor::Device::flex();
    let mut model = run.config.model.init(&run.io, &device).unwrap();
    wire(&mut model, &device);
    let (run_dir, lock) = train::RunDir::create(&dir.join("run"), &run, false, "test").unwrap();
    let weights = Path::new("hand-built").to_path_buf();
    let loaded = inspect::run::LoadedRun::from_model(run_dir, run, model, weights);
    (loaded, lock)
}
