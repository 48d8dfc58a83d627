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
