//! Helpers for the `headlab sweep` tests: the binary, a tiny sweep file, and waiting on files.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// The `headlab` binary under test; its sweeps start their children from it too.
pub const HEADLAB: &str = env!("CARGO_BIN_EXE_headlab");

/// train's tiny test config: a run trains in well under a second.
pub const TINY: &str = testkit::TINY_CONFIG;

/// `headlab sweep ARGS` in `dir`.
pub fn sweep_cmd(dir: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(HEADLAB);
    command.arg("sweep").args(args).current_dir(dir).env(
        "XDG_RUNTIME_DIR",
        std::env::var_os("XDG_RUNTIME_DIR").unwrap_or("/tmp".into()),
    );
    command
}

/// Runs `headlab sweep ARGS` in `dir` to its end.
pub fn run_sweep(dir: &Path, args: &[&str]) -> Output {
    sweep_cmd(dir, args).output().expect("sweep runs")
}

/// stdout and stderr, for assertion messages.
pub fn text(output: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// Writes `name` into `dir`: a sweep of the tiny config with `extra` appended.
pub fn write_sweep(dir: &Path, name: &str, extra: &str) -> PathBuf {
    let path = dir.join(name);
    let text = format!("configs = [{:?}]\n{extra}", TINY);
    std::fs::write(&path, text).expect("writing the sweep file");
    path
}

/// Waits until `done` holds, for at most `limit`.
pub fn wait_for(limit: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < limit,
            "timed out after {limit:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Whether `run` has a complete checkpoint, as `train --resume` sees one: a `step-N`
/// directory with its `state.json` (a checkpoint still being written is a hidden
/// `.step-N.tmp-PID` directory and does not count).
pub fn has_checkpoint(run: &Path) -> bool {
    std::fs::read_dir(run.join("checkpoints"))
        .into_iter()
        .flatten()
        .flatten()
        .any(|entry| {
            entry.file_name().to_string_lossy().starts_with("step-")
                && entry.path().join("state.json").is_file()
        })
}

/// The sweep's CSV as rows of fields (no field in these tests needs quoting).
pub fn read_csv(path: &Path) -> Vec<Vec<String>> {
    std::fs::read_to_string(path)
        .expect("reading the csv")
        .lines()
        .map(|line| line.split(',').map(String::from).collect())
        .collect()
}
