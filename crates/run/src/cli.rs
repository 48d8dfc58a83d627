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

/// A panic is a bug in headlab, never a user's mistake: say so in one `error:` line that
/// names the bug and where it happened (what a sweep's failure record and a user read first)
/// instead of Rust's "run with `RUST_BACKTRACE=1`" note; with `RUST_BACKTRACE` set, Rust's own
/// report and its backtrace follow. Call it early in `main`.
pub fn report_panics_as_bugs() {
    let rust_report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<&str>()
            .map(|text| text.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned());
        let place = info
            .location()
            .map(|at| format!("{}:{}", at.file(), at.line()));
        eprintln!("{}", bug_message(message.as_deref(), place.as_deref()));
        if std::env::var_os("RUST_BACKTRACE").is_some() {
            rust_report(info);
        }
    }));
}

/// The line [`report_panics_as_bugs`] prints.
fn bug_message(message: Option<&str>, place: Option<&str>) -> String {
    let message = message.map_or_else(String::new, |m| format!(": {}", m.replace('\n', " ")));
    let place = place.map_or_else(String::new, |p| format!(" (at {p})"));
    format!(
        "error: headlab stopped on a bug{place}{message}. Please report it with the command \
         that ran; RUST_BACKTRACE=1 adds where it came from"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bug_is_one_error_line_naming_it_and_where() {
        let line = bug_message(Some("Narrow length\nmust be > 0"), Some("src/x.rs:10"));
        assert!(
            line.starts_with("error: headlab stopped on a bug (at src/x.rs:10)"),
            "{line}"
        );
        assert!(line.contains(": Narrow length must be > 0."), "{line}");
        assert_eq!(line.lines().count(), 1);
        let bare = bug_message(None, None);
        assert!(
            bare.starts_with("error: headlab stopped on a bug. Please"),
            "{bare}"
        );
    }
}
