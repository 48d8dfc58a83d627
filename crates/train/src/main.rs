//! `train`: run a training job from a config file.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Context;
use clap::Parser;
use train::{BackendKind, Outcome, Progress, RunConfig, TrainOptions};

/// mimalloc: Burn allocates and frees a few MB per tensor op, which glibc's allocator kept
/// handing back to the kernel (see the README's performance section).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Train a transformer encoder on a toy sequence task, as a config file says, and write a
/// run directory (config.toml, metrics.jsonl, checkpoints/, snapshots/, model.safetensors)
/// for `inspect` to read.
#[derive(Parser, Debug)]
#[command(name = "train", version)]
struct Args {
    /// The experiment's TOML config, e.g. configs/reverse.toml.
    config: PathBuf,
    /// Run directory. Default: runs/<name from the config>.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Override a config key, e.g. --set train.lr=3e-4 --set model.n_heads=2 (repeatable;
    /// values are TOML, bare words are strings).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    overrides: Vec<String>,
    /// Backend, overriding the config's `backend`.
    #[arg(long, value_enum)]
    backend: Option<BackendKind>,
    /// Continue the run in the run directory from its newest complete checkpoint.
    #[arg(long, conflicts_with = "force")]
    resume: bool,
    /// Replace an existing run in the run directory.
    #[arg(long)]
    force: bool,
    /// Stop with a checkpoint after this many steps; continue later with --resume.
    #[arg(long, value_name = "STEP")]
    stop_at: Option<usize>,
    /// No progress bar or progress lines.
    #[arg(long, short)]
    quiet: bool,
}

fn main() -> ExitCode {
    let args = match Args::try_parse() {
        Ok(args) => args,
        // --help and --version go to stdout as clap prints them.
        Err(error) if !error.use_stderr() => error.exit(),
        Err(error) => {
            // clap ends with a blank line and a pointer to --help: keep the message one
            // paragraph, like every other error of `train`.
            let text = error.render().to_string();
            let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
            eprintln!("{}", lines.join("\n"));
            return ExitCode::from(2);
        }
    };
    match run(args) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut config = RunConfig::load(&args.config, &args.overrides)?;
    if let Some(backend) = args.backend {
        config.backend = backend;
    }
    let run_dir = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("runs").join(&config.name));
    // A range error found after `--set` names the overrides too: the bad value may be
    // one of them rather than the file's.
    let source = if args.overrides.is_empty() {
        args.config.clone()
    } else {
        let sets: Vec<String> = args
            .overrides
            .iter()
            .map(|s| format!("--set {s}"))
            .collect();
        PathBuf::from(format!("{} with {}", args.config.display(), sets.join(" ")))
    };
    let resolved = config.resolve(&source)?;

    let stop = Arc::new(AtomicBool::new(false));
    let handler_stop = stop.clone();
    ctrlc::set_handler(move || {
        if handler_stop.swap(true, Ordering::SeqCst) {
            // A second Ctrl-C while the checkpoint is written: give up at once.
            std::process::exit(130);
        }
        eprintln!("\ninterrupted: saving a checkpoint after this step (Ctrl-C again to abort)");
    })
    .context("installing the Ctrl-C handler")?;

    let options = TrainOptions {
        run_dir: run_dir.clone(),
        resume: args.resume,
        force: args.force,
        progress: if args.quiet {
            Progress::Quiet
        } else {
            Progress::Auto
        },
        stop,
        stop_at_step: args.stop_at,
    };
    let summary = train::train(&resolved, &options)?;
    let eval = summary
        .last_eval
        .map_or(String::new(), |(loss, token, seq)| {
            format!(
                ", eval loss {loss:.4}, token accuracy {:.2}%, sequence accuracy {:.2}%",
                token * 100.0,
                seq * 100.0
            )
        });
    let ended = match summary.outcome {
        Outcome::Finished => "finished",
        Outcome::TargetReached => "reached the target accuracy",
        Outcome::Interrupted => "interrupted",
        Outcome::Paused => "paused",
    };
    println!("{ended} at step {}{eval}", summary.step);
    if matches!(summary.outcome, Outcome::Interrupted | Outcome::Paused) {
        println!("checkpoint saved; continue with --resume");
    }
    println!("run directory: {}", run_dir.display());
    Ok(match summary.outcome {
        Outcome::Interrupted => ExitCode::from(130),
        _ => ExitCode::SUCCESS,
    })
}
