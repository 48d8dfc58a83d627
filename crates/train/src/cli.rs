//! `headlab train`: run a training job from a config file. [`Args`] is the subcommand's
//! interface and [`main`] runs it; the `headlab` binary (crates/headlab) parses and calls it.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::group::{GroupOptions, train_group};
use crate::trainer::{RunSummary, TrainError};
use crate::{Outcome, Progress, TrainOptions};
use anyhow::Context;
use run::dir::{EXIT_RUN_IN_USE, RunDirError};
use run::{BackendKind, RunConfig, RunDir, StopSignal, TrainConfig};

// The doc comments below are the command's --help text, written for a terminal: `<NAME>`
// and `[MASK]` there are text, not HTML or links.
#[allow(rustdoc::invalid_html_tags, rustdoc::broken_intra_doc_links)]
/// Train an encoder on a toy task as a config file says, into a run directory.
///
/// Trains a transformer encoder on a toy sequence task and writes a run directory
/// (config.toml, metrics.jsonl, checkpoints/, snapshots/, model.safetensors) for `headlab
/// inspect` to read. Ctrl-C (or SIGTERM, SIGHUP) stops it with a checkpoint; `--resume`
/// continues.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The experiment's TOML config, e.g. configs/reverse.toml.
    config: PathBuf,
    /// Run directory. Default: runs/<name from the config>. With --seeds, `{seed}` in it is
    /// replaced by each seed; without `{seed}`, each seed's run is the directory with
    /// `-s<seed>` appended; or give --out once per seed, in the seeds' order.
    #[arg(long)]
    out: Vec<PathBuf>,
    /// Train these seeds together as one batched model, each its own run: a list and
    /// ranges, e.g. `0-15` or `1,2,7` (the config's `seed` is replaced).
    #[arg(long, value_name = "LIST", value_parser = parse_seeds)]
    seeds: Option<Seeds>,
    /// Override a config key, e.g. --set train.lr=3e-4 --set model.n_heads=2 (repeatable;
    /// values are TOML, bare words are strings).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    overrides: Vec<String>,
    /// Backend, overriding the config's `backend`.
    #[arg(long, value_enum)]
    backend: Option<BackendKind>,
    /// Continue the run in the run directory from its newest complete checkpoint. Only when
    /// it stops may change: --set train.steps=N (more steps, or fewer down to its newest
    /// checkpoint), --set train.target_accuracy=X, --no-target, --stop-at.
    #[arg(long, conflicts_with = "force")]
    resume: bool,
    /// Train to train.steps whatever the accuracy: the config's train.target_accuracy is
    /// dropped (with --resume, a run that stopped at its target trains on).
    #[arg(long)]
    no_target: bool,
    /// Replace an existing run in the run directory.
    #[arg(long)]
    force: bool,
    /// Stop with a checkpoint after this many steps (at least 1, after the step a resumed
    /// run starts from); continue later with --resume.
    #[arg(long, value_name = "STEP", value_parser = parse_stop_at)]
    stop_at: Option<usize>,
    /// No progress bar or progress lines.
    #[arg(long, short)]
    quiet: bool,
}

/// Runs `headlab train` as `args` say: the exit status, or the error for `headlab`'s `main`
/// to print. Call it from `main`'s thread before any other thread starts: it may set an
/// environment variable ([`pin_default_device`]).
pub fn main(args: Args) -> anyhow::Result<ExitCode> {
    let args = run_dir_in_config_place(args)?;
    let mut config = RunConfig::load(&args.config, &args.overrides)?;
    if let Some(backend) = args.backend {
        config.backend = backend;
    }
    if args.no_target {
        config.train.target_accuracy = None;
    }
    let seed_count = args.seeds.as_ref().map_or(1, |seeds| seeds.0.len());
    if args.out.len() > 1 && args.out.len() != seed_count {
        anyhow::bail!(
            "--out is given {} times: give it once, or with --seeds once per seed ({seed_count})",
            args.out.len()
        );
    }
    let run_dir = args
        .out
        .first()
        .cloned()
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
    resolved.check_trainable(&source)?;

    if let Some(Seeds(seeds)) = &args.seeds {
        return train_seeds(&args, &resolved, seeds, &run_dir);
    }
    pin_default_device(resolved.config.backend);
    // Ctrl-C, SIGTERM (a scheduler's pre-emption) and SIGHUP: finish the step, checkpoint,
    // exit 128 + the signal; a second one aborts at once.
    let stop = StopSignal::install().context("installing the signal handlers")?;
    print_adapter(&args, resolved.config.backend);

    let options = TrainOptions {
        run_dir: run_dir.clone(),
        resume: args.resume,
        force: args.force,
        progress: progress(&args),
        stop,
        stop_at_step: args.stop_at,
    };
    let summary = match crate::train(&resolved, &options) {
        Ok(summary) => summary,
        Err(error) => return held_or_failed(error),
    };
    println!("{}", describe(&summary));
    if let Some(why) = nothing_trained(&summary, &resolved.config.train) {
        println!("{why}");
    }
    if matches!(summary.outcome, Outcome::Interrupted(_) | Outcome::Paused) {
        println!(
            "checkpoint saved; continue with --resume (headlab train {} --resume)",
            run_dir.display()
        );
    }
    println!("run directory: {}", run_dir.display());
    Ok(exit_code(&summary.outcome))
}

/// `train RUN_DIR --resume`: a run directory in the config's place continues that run, from
/// the config it holds (`config.toml`, every default written out) and into itself. Without
/// `--resume` it is refused with the commands that would continue or retrain it.
fn run_dir_in_config_place(mut args: Args) -> anyhow::Result<Args> {
    if !args.config.is_dir() {
        return Ok(args);
    }
    let dir = args.config.clone();
    // RunDir owns the layout and its checks (the marker, the config unedited).
    let config = match RunDir::open(&dir) {
        Ok(run) => run.config_path(),
        Err(RunDirError::NotARun(_)) => anyhow::bail!(
            "{} is a directory, not a config file: give a config (e.g. configs/reverse.toml), \
             or a run directory train wrote, with --resume to continue it",
            dir.display()
        ),
        Err(error) => return Err(error.into()),
    };
    if !args.resume {
        anyhow::bail!(
            "{0} is a run directory, not a config: continue it with `headlab train {0} --resume`, \
             or train its config again elsewhere with `headlab train {1} --out NEW_DIR`",
            dir.display(),
            config.display()
        );
    }
    match args.out.as_slice() {
        [] => args.out = vec![dir.clone()],
        [out] if out == &dir => {}
        _ => anyhow::bail!(
            "--out is given with the run directory {}: leave --out out, the run continues in \
             its own directory",
            dir.display()
        ),
    }
    args.config = config;
    Ok(args)
}

/// A run directory another process holds: nothing was done and nothing is wrong with the
/// run, so say so with a status of its own (`sweep` then skips the run as held instead of
/// recording a failure). Any other error fails.
fn held_or_failed(error: TrainError) -> anyhow::Result<ExitCode> {
    match error {
        TrainError::RunDir(RunDirError::Locked { .. }) => {
            eprintln!("error: {error}");
            Ok(ExitCode::from(EXIT_RUN_IN_USE))
        }
        error => Err(error.into()),
    }
}

/// 128 + the signal, as a shell reports a process the signal ended (130 for Ctrl-C, 143
/// for SIGTERM, 129 for SIGHUP); success otherwise.
fn exit_code(outcome: &Outcome) -> ExitCode {
    match outcome {
        Outcome::Interrupted(signal) => ExitCode::from((128 + signal) as u8),
        _ => ExitCode::SUCCESS,
    }
}

fn progress(args: &Args) -> Progress {
    if args.quiet {
        Progress::Quiet
    } else {
        Progress::Auto
    }
}

/// `finished at step 400, eval loss ...`: how a run ended.
fn describe(summary: &RunSummary) -> String {
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
        Outcome::Interrupted(_) => "interrupted",
        Outcome::Paused => "paused",
    };
    format!("{ended} at step {}{eval}", summary.step)
}

/// Why a resumed run trained nothing, and how to train it on; `None` when it trained.
fn nothing_trained(summary: &RunSummary, train: &TrainConfig) -> Option<String> {
    if summary.steps_trained > 0 {
        return None;
    }
    let how = match (&summary.outcome, train.target_accuracy) {
        (Outcome::TargetReached, Some(target)) => format!(
            "its best evaluation had reached train.target_accuracy = {target}; to train on, \
             resume with --no-target or a higher --set train.target_accuracy=X (and \
             --set train.steps=N for more steps)"
        ),
        (Outcome::Finished, _) => format!(
            "it has trained all its train.steps = {}; to train on, resume with \
             --set train.steps=N for a larger N",
            train.steps
        ),
        _ => return None,
    };
    Some(format!("nothing trained, nothing rewritten: {how}"))
}

/// Seeds to train together, from `--seeds`.
#[derive(Debug, Clone)]
struct Seeds(Vec<u64>);

/// `0-15`, `1,2,7`, `0-3,9`: distinct seeds, in the order given.
fn parse_seeds(text: &str) -> Result<Seeds, String> {
    let mut seeds = Vec::new();
    let bad = |part: &str| {
        format!("`{part}` is not a seed or a range of seeds; give e.g. `0-15` or `1,2,7`")
    };
    for part in text.split(',').map(str::trim) {
        match part.split_once('-') {
            Some((from, to)) => {
                let from: u64 = from.trim().parse().map_err(|_| bad(part))?;
                let to: u64 = to.trim().parse().map_err(|_| bad(part))?;
                if to < from {
                    return Err(format!("the range `{part}` runs backwards"));
                }
                if to - from >= MAX_GROUP as u64 {
                    return Err(format!(
                        "the range `{part}` has more than {MAX_GROUP} seeds; train at most \
                         {MAX_GROUP} together"
                    ));
                }
                seeds.extend(from..=to);
            }
            None => seeds.push(part.parse().map_err(|_| bad(part))?),
        }
    }
    let mut seen = std::collections::HashSet::new();
    if let Some(twice) = seeds.iter().find(|s| !seen.insert(**s)) {
        return Err(format!("seed {twice} is given twice"));
    }
    if seeds.len() > MAX_GROUP {
        return Err(format!(
            "{} seeds given; train at most {MAX_GROUP} together",
            seeds.len()
        ));
    }
    Ok(Seeds(seeds))
}

/// The most seeds one process trains together: a bound on what `--seeds` allocates.
const MAX_GROUP: usize = run::config::MAX_GROUP_SEEDS;

/// Each seed's run directory: `{seed}` in `out` replaced, or `-s<seed>` appended.
fn seed_run_dir(out: &std::path::Path, seed: u64) -> PathBuf {
    let text = out.to_string_lossy();
    if text.contains("{seed}") {
        PathBuf::from(text.replace("{seed}", &seed.to_string()))
    } else {
        PathBuf::from(format!("{text}-s{seed}"))
    }
}

/// `--seeds`: the seeds trained as one batched model, one run each.
fn train_seeds(
    args: &Args,
    resolved: &run::ResolvedRun,
    seeds: &[u64],
    out: &std::path::Path,
) -> anyhow::Result<ExitCode> {
    let runs: Vec<run::ResolvedRun> = seeds
        .iter()
        .map(|&seed| {
            let mut run = resolved.clone();
            run.config.seed = seed;
            run
        })
        .collect();
    let run_dirs: Vec<PathBuf> = if args.out.len() == seeds.len() && seeds.len() > 1 {
        args.out.clone()
    } else {
        seeds.iter().map(|&s| seed_run_dir(out, s)).collect()
    };
    pin_default_device(resolved.config.backend);
    let stop = StopSignal::install().context("installing the signal handlers")?;
    print_adapter(args, resolved.config.backend);
    let options = GroupOptions {
        run_dirs: run_dirs.clone(),
        resume: args.resume,
        force: args.force,
        progress: progress(args),
        stop,
        stop_at_step: args.stop_at,
    };
    let results = match train_group(&runs, &options) {
        Ok(results) => results,
        Err(error) => return held_or_failed(error),
    };
    let mut code = ExitCode::SUCCESS;
    let mut failed = 0;
    for ((seed, dir), result) in seeds.iter().zip(&run_dirs).zip(results) {
        match result {
            Ok(summary) => {
                println!("seed {seed}: {} ({})", describe(&summary), dir.display());
                if let Some(why) = nothing_trained(&summary, &resolved.config.train) {
                    println!("seed {seed}: {why}");
                }
                if matches!(summary.outcome, Outcome::Interrupted(_)) {
                    code = exit_code(&summary.outcome);
                }
            }
            Err(error) => {
                eprintln!("error: seed {seed} ({}): {error:#}", dir.display());
                failed += 1;
            }
        }
    }
    if failed > 0 {
        anyhow::bail!("{failed} of {} seeds failed", seeds.len());
    }
    Ok(code)
}

/// On wgpu, says which adapter the run trains on and the language its kernels are compiled
/// to (one line on stderr, unless `--quiet`), so a software driver is never mistaken for a GPU. An adapter that cannot be used is left to
/// the trainer, which refuses it before the run directory is made.
fn print_adapter(args: &Args, backend: BackendKind) {
    if backend == BackendKind::Wgpu
        && !args.quiet
        && let Ok(adapter) = run::wgpu_adapter()
    {
        eprintln!("wgpu adapter: {adapter}");
    }
}

/// Points Burn's default device at the run's backend. Burn loads optimizer state onto its
/// default device (`ModuleOptimizer::load_record`), which with the wgpu feature compiled in is
/// the GPU: on a CPU run that started the GPU stack on every `--resume` (and printed its
/// complaints) for tensors that move to the CPU at the next step anyway.
///
/// A wgpu run instead gets a runtime directory for the graphics stack when it has none
/// ([`run::cli::give_graphics_a_runtime_dir`]).
fn pin_default_device(backend: BackendKind) {
    if backend == BackendKind::Wgpu {
        run::cli::give_graphics_a_runtime_dir();
        return;
    }
    if std::env::var_os("BURN_DEVICE").is_some() {
        return;
    }
    // SAFETY: called from `main`'s thread before any other thread exists (the signal
    // handlers, the thread pool and Burn's devices all start after it), so no other thread
    // can be reading the environment.
    #[allow(unsafe_code)]
    unsafe {
        std::env::set_var("BURN_DEVICE", backend.name());
    }
}

/// `--stop-at`: a whole number of steps, at least 1 (refused before any run directory is
/// made; a step at or before a resumed run's is refused once its checkpoint is read).
fn parse_stop_at(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(0) => Err("must be at least 1: the step to stop after".to_string()),
        Ok(step) => Ok(step),
        Err(_) => Err(format!(
            "expected a whole number of steps, at least 1, not {text:?}"
        )),
    }
}
