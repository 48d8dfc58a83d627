//! Command-line conventions the headlab binaries share.

use std::process::ExitCode;

use clap::Parser;

/// Parses the command line as `A`. `--help` and `--version` print to stdout and exit as clap
/// does; a usage error prints clap's message as one paragraph (without its blank lines, like
/// every other error of the binaries) and returns exit status 2 for `main` to return.
pub fn parse_args<A: Parser>() -> Result<A, ExitCode> {
    match A::try_parse() {
        Ok(args) => Ok(args),
        Err(error) if !error.use_stderr() => error.exit(),
        Err(error) => {
            let text = error.render().to_string();
            let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
            eprintln!("{}", lines.join("\n"));
            Err(ExitCode::from(2))
        }
    }
}

/// `train ... | head` (or `sweep status | head`) closes the pipe early: end quietly on
/// SIGPIPE, as Unix tools do, instead of panicking in `println!` (Rust ignores SIGPIPE by
/// default). Call it first in `main`. Files are never half-written by a stop (each is written
/// under a temporary name and renamed), so dying on SIGPIPE loses nothing written.
pub fn restore_sigpipe() {
    // SAFETY: called first in `main`, before any other thread exists; SIG_DFL installs no
    // handler code.
    #[allow(unsafe_code)]
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
