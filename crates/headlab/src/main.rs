//! `headlab`: the one command. Each subcommand is a crate's command line (its `cli` module),
//! with the interface it had as a binary of its own; this file only parses and dispatches.
//!
//! `sweep` and `bench` start children of this same binary (`headlab train ...`, `headlab
//! bench --case ...`), so a sweep's runs are always trained by the build that planned them.

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

/// mimalloc: Burn allocates and frees a few MB per tensor op, which glibc's allocator kept
/// handing back to the kernel (docs/cpu-kernels.md); every subcommand gets it, so
/// `bench` times headlab as `train` runs it.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Train small transformer encoders on toy sequence tasks and see what their attention heads
/// learn: per-head weights, attention patterns, similarity, roles, ablations and how heads
/// diverged during training.
#[derive(Parser, Debug)]
#[command(name = "headlab", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// Each subcommand's one-line help is the first line of its arguments' doc comment.
#[derive(Subcommand, Debug)]
enum Command {
    Train(train::cli::Args),
    Import(hf::import::cli::Args),
    Export(hf::export::cli::Args),
    Inspect(report::cli::inspect::Args),
    Compare(report::cli::compare::Args),
    Verify(report::cli::verify::Args),
    Sweep(sweep::cli::Args),
    Bench(bench::cli::Cli),
    /// Print a shell completion script, e.g. `headlab completions bash > headlab.bash`.
    Completions {
        /// The shell to complete in.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

fn main() -> ExitCode {
    run::cli::restore_sigpipe();
    run::cli::report_panics_as_bugs();
    let cli = match run::cli::parse_args::<Cli>() {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    // Each subcommand's `main` runs on this thread before any other thread exists, as they
    // require (train and bench may set an environment variable for the graphics stack).
    let result = match cli.command {
        Command::Train(args) => train::cli::main(args),
        Command::Import(args) => hf::import::cli::main(args),
        Command::Export(args) => hf::export::cli::main(args),
        Command::Inspect(args) => report::cli::inspect::main(args),
        Command::Compare(args) => report::cli::compare::main(args),
        Command::Verify(args) => report::cli::verify::main(args),
        Command::Sweep(args) => sweep::cli::main(args),
        Command::Bench(args) => bench::cli::main(args),
        Command::Completions { shell } => {
            clap_complete::generate(
                shell,
                &mut Cli::command(),
                "headlab",
                &mut std::io::stdout(),
            );
            Ok(ExitCode::SUCCESS)
        }
    };
    // Every subcommand's error ends here: one line (its chain joined), status 1.
    result.unwrap_or_else(|error| {
        eprintln!("error: {error:#}");
        ExitCode::FAILURE
    })
}
