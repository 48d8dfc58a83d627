//! Command-line conventions of the `headlab` command and its subcommands.

use std::process::ExitCode;

use clap::Parser;

/// Parses the command line as `A`. `--help` and `--version` print to stdout and exit as clap
/// does; a usage error prints clap's message as one paragraph (without its blank lines, like
/// every other error of the command) and returns exit status 2 for `main` to return.
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

/// Gives the graphics stack a runtime directory when the environment names none, so that
/// starting wgpu does not print "XDG_RUNTIME_DIR is invalid or not set" (Mesa's EGL says it
/// each time wgpu looks at OpenGL adapters, which it does where Vulkan offers only a
/// software driver). The system's temporary directory serves: nothing is written there.
/// Call it from `main` before any other thread exists, and only for a wgpu run.
pub fn give_graphics_a_runtime_dir() {
    if std::env::var_os("XDG_RUNTIME_DIR").is_some_and(|dir| !dir.is_empty()) {
        return;
    }
    // SAFETY: called from `main`'s thread before any other thread exists (the caller's
    // contract), so no other thread can be reading the environment.
    #[allow(unsafe_code)]
    unsafe {
        std::env::set_var("XDG_RUNTIME_DIR", std::env::temp_dir());
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
