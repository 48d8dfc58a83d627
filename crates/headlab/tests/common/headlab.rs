//! The one way the command-line tests start the `headlab` binary Cargo built for them.
// Each test file compiles this module on its own and uses only part of it.
#![allow(dead_code)]

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, Output};

/// The `headlab` binary.
pub const HEADLAB: &str = env!("CARGO_BIN_EXE_headlab");

/// `headlab SUBCOMMAND ARGS`, to adjust further or to run.
pub fn command<S: AsRef<OsStr>>(subcommand: &str, args: &[S]) -> Command {
    let mut command = Command::new(HEADLAB);
    command.arg(subcommand).args(args);
    command
}

/// Runs [`command`] to its end and collects its output.
pub fn run<S: AsRef<OsStr>>(subcommand: &str, args: &[S]) -> Output {
    command(subcommand, args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {HEADLAB} {subcommand}: {e}"))
}

/// What `headlab compare` says when asked to compare `text`, a model that reads text, with
/// `tokens`, a run on a task's tokens.
pub fn text_beside_tokens(text: &Path, tokens: &Path) -> String {
    format!(
        "{} reads text (word pieces: an imported model or a text model trained here) and {} \
         its task's tokens",
        text.display(),
        tokens.display()
    )
}
