//! `headlab sweep`: plan, run, submit, follow and report a sweep of headlab runs; and `sweep
//! stats`, the sweep report's statistic for numbers of one's own.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::exec::{Attempt, Headlab, RunContext, execute_group};
use crate::local::{Display, default_workers, run_pool};
use crate::slurm::{self, BatchJob, SlurmOptions};
use crate::spec::Sweep;
use crate::state::{RunState, SweepOut, directory_state, record_damage, run_state, verify_run};
use anyhow::Context;
use clap::Subcommand;
use run::StopSignal;

/// Plan, run, submit (Slurm), follow and report a sweep of runs over seeds and configs.
///
/// Runs many headlab runs from one sweep file: base configs, a grid of overrides and seeds.
/// Each run trains into OUT/NAME and is inspected there; `headlab sweep report` collects
/// them. `headlab sweep stats` computes the reports' statistic for numbers of your own.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

// The doc comments below are the command's --help text, written for a terminal: `<NAME>`
// and `[MASK]` there are text, not HTML or links.
#[allow(rustdoc::invalid_html_tags, rustdoc::broken_intra_doc_links)]
/// The sweep file and where its runs go.
#[derive(clap::Args, Debug)]
struct Target {
    /// The sweep file (TOML), e.g. configs/sweeps/seeds.toml.
    file: PathBuf,
    /// Output directory: one run directory per run, and _sweep/ for logs and the report.
    /// Default: runs/<sweep name>.
    #[arg(long)]
    out: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// List the runs, one line each, and the total.
    Plan {
        #[command(flatten)]
        target: Target,
    },
    /// Run every run that is not done on this machine, N at once. Rerun it after a crash or
    /// Ctrl-C to finish the rest: done runs are skipped, interrupted ones resumed.
    Run {
        #[command(flatten)]
        target: Target,
        /// Runs at once. Default: the cores over the threads one run uses (train.shards).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1024))]
        workers: Option<u64>,
        /// No progress bar or per-run lines; only the summary.
        #[arg(long, short)]
        quiet: bool,
    },
    /// Submit the runs that are not done to Slurm as one job array.
    Submit {
        #[command(flatten)]
        target: Target,
        /// Submit to Slurm (the only scheduler so far).
        #[arg(long, required = true)]
        slurm: bool,
        /// Slurm partition.
        #[arg(long)]
        partition: Option<String>,
        /// Time limit per task, in Slurm's format (e.g. 30, 01:00:00, 1-00).
        #[arg(long)]
        time: Option<String>,
        /// At most this many tasks at once.
        #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u64).range(1..=100000))]
        max_parallel: u64,
        /// CPUs per task. Default: the threads one run uses (train.shards).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..=4096))]
        cpus_per_task: Option<u64>,
        /// Another #SBATCH option, e.g. --sbatch-arg=--account=lab (repeatable).
        #[arg(long = "sbatch-arg", value_name = "OPTION", allow_hyphen_values = true)]
        sbatch_args: Vec<String>,
        /// Write the batch script and print it, without submitting.
        #[arg(long)]
        dry_run: bool,
    },
    /// Done, running, interrupted, failed and left runs (and Slurm's queue for the sweep).
    Status {
        #[command(flatten)]
        target: Target,
    },
    /// Collect the runs into OUT/_sweep/report: sweep.csv, heads.csv, report.md (means and
    /// 95% intervals per grid point, roles across seeds against untrained models),
    /// report.json and figures.
    Report {
        #[command(flatten)]
        target: Target,
        /// Print no progress (the stages: reading the runs, matching heads across seeds,
        /// the figures, the tables).
        #[arg(long, short)]
        quiet: bool,
    },
    /// Check every finished run and report to the last byte against its manifest (what
    /// `status` checks by file sizes only); exits 1 when any is damaged.
    Verify {
        #[command(flatten)]
        target: Target,
    },
    /// The statistics every table of the book reports, for your own numbers: reads
    /// `{"name": [numbers] or {"hits": K, "of": N}, ...}` (JSON, from FILE or stdin) and
    /// prints, per name, a list's mean with its 95% confidence interval (Student's t), or a
    /// count's share with its 95% Wilson score interval, as JSON.
    ///
    /// Prints `{"name": {"n": .., "mean": .., "ci95": ..}, ...}` for a list, names sorted,
    /// each estimate as report.json writes it; `ci95` is null for a single value. The
    /// interval is `mean ± ci95`, with ci95 = t(0.975, n - 1) * sd / sqrt(n), the one every
    /// sweep report and the book's scripts write. A count prints `{"n": N, "hits": K,
    /// "share": K/N, "wilson95": [low, high]}`. A value that is not a finite number, a name
    /// whose value is neither, an empty list or a count with hits over N is refused with a
    /// message naming it, and exit status 1.
    ///
    /// A table, one list per seed of the same examples' values (`[[..], [..]]`, their mean)
    /// or `{"hits": [[..]], "of": [[..]]}` (its hits over its of), gets the Multi-Bootstrap
    /// (seeds and examples resampled together, --draws times): `{"seeds", "examples",
    /// "estimate", "multi_bootstrap95": [low, high], "draws", "undefined_draws",
    /// "over_seeds"}`, the last the t interval over the seeds' own statistics.
    ///
    /// Example: `echo '{"steps": [1, 2, 3, 4], "verb": {"hits": 8, "of": 10}}' | headlab
    /// sweep stats`
    Stats {
        /// The JSON file; `-` or nothing for stdin.
        #[arg(value_name = "FILE|-")]
        file: Option<PathBuf>,
        /// Draws of the Multi-Bootstrap, for a table of seeds by examples (1 to 1000000).
        #[arg(long, default_value_t = crate::multi_bootstrap::DEFAULT_DRAWS,
              value_parser = parse_draws)]
        draws: usize,
    },
    /// Run one run of the plan (what each Slurm array task calls).
    #[command(hide = true)]
    Task {
        #[command(flatten)]
        target: Target,
        /// The run's index in the plan.
        #[arg(long)]
        index: usize,
    },
}

/// Runs `headlab sweep` as `args` say: the exit status, or the error for `headlab`'s `main`
/// to print.
pub fn main(args: Args) -> anyhow::Result<ExitCode> {
    run(args.command)
}

fn run(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Plan { target } => plan(&target),
        Command::Run {
            target,
            workers,
            quiet,
        } => run_local(&target, workers.map(|w| w as usize), quiet),
        Command::Submit {
            target,
            slurm: _,
            partition,
            time,
            max_parallel,
            cpus_per_task,
            sbatch_args,
            dry_run,
        } => {
            let (sweep, out) = load_to_write(&target)?;
            let options = SlurmOptions {
                partition,
                time,
                max_parallel: max_parallel as usize,
                cpus_per_task: cpus_per_task
                    .map_or_else(|| threads_per_run(&sweep), |c| c as usize),
                extra: sbatch_args,
            };
            submit(&target, &sweep, &out, &options, dry_run)
        }
        Command::Status { target } => status(&target),
        Command::Verify { target } => verify(&target),
        Command::Report { target, quiet } => {
            let (sweep, out) = load_to_write(&target)?;
            let mut progress = run::progress::StageProgress::on_stderr("sweep report", quiet);
            let report = crate::report::write_report(&sweep, &out, &mut progress)?;
            progress.finish();
            print!("{}", crate::report::markdown(&report));
            for file in &report.files {
                println!("wrote {}", file.display());
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Task { target, index } => task(&target, index),
        Command::Stats { file, draws } => stats(file.as_deref(), draws),
    }
}

/// `sweep stats`: each named list's mean and 95% interval, as JSON on stdout.
fn stats(file: Option<&Path>, draws: usize) -> anyhow::Result<ExitCode> {
    // A list of numbers per name: far below this bound. Bounded, so `/dev/zero` (or a pipe
    // from it) is refused rather than read until the memory runs out.
    const STATS_LIMIT: u64 = 64 << 20;
    let (text, source) = match file {
        Some(path) if path != Path::new("-") => (
            run::small_file::read_to_string(path, STATS_LIMIT)
                .with_context(|| format!("cannot read {}", path.display()))?,
            path.display().to_string(),
        ),
        _ => {
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(
                &mut std::io::Read::take(std::io::stdin(), STATS_LIMIT + 1),
                &mut bytes,
            )
            .context("cannot read stdin")?;
            if bytes.len() as u64 > STATS_LIMIT {
                anyhow::bail!(
                    "stdin holds more than {} MiB, over what sweep stats reads; give it a JSON \
                     object of named lists of numbers",
                    STATS_LIMIT >> 20
                );
            }
            let text = String::from_utf8(bytes).context("stdin is not UTF-8 text")?;
            (text, "stdin".to_string())
        }
    };
    let intervals = crate::stats::intervals_json(&text, draws)
        .map_err(|why| anyhow::anyhow!("{source}: {why}"))?;
    println!("{}", serde_json::to_string_pretty(&intervals)?);
    Ok(ExitCode::SUCCESS)
}

/// `--draws`: a whole number from 1 to [`crate::multi_bootstrap::MAX_DRAWS`].
fn parse_draws(text: &str) -> Result<usize, String> {
    let max = crate::multi_bootstrap::MAX_DRAWS;
    match text.parse::<usize>() {
        Ok(draws) if (1..=max).contains(&draws) => Ok(draws),
        _ => Err(format!(
            "expected a whole number of draws from 1 to {max}, not {text:?}"
        )),
    }
}

/// The sweep and its output directory, checked to be a new directory, an empty one or a
/// sweep's own ([`crate::state::SWEEP_KIND`]): a sweep writes a run directory per run there.
fn load(target: &Target) -> anyhow::Result<(Sweep, SweepOut)> {
    let sweep = Sweep::load(&target.file)?;
    let root = target
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("runs").join(&sweep.name));
    run::out_dir::check(&root, &crate::state::SWEEP_KIND)?;
    Ok((sweep, SweepOut::new(root)))
}

/// [`load`], the output directory marked as the sweep's before anything is written there
/// (by the first command that writes; the mark is all the claim holds on to: runs take their
/// own locks, and Slurm's tasks write at once).
fn load_to_write(target: &Target) -> anyhow::Result<(Sweep, SweepOut)> {
    let (sweep, out) = load(target)?;
    let kind = &crate::state::SWEEP_KIND;
    // Two runners started at once both find it unmarked; the claim's lock is held only while
    // the mark is written, so the second waits for the first's.
    for attempt in 0.. {
        if run::out_dir::is_claimed(&out.root, kind) {
            break;
        }
        match run::out_dir::claim(&out.root, kind) {
            Ok(lock) => drop(lock),
            Err(run::out_dir::OutDirError::Locked { .. }) if attempt < 250 => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(error) => return Err(error.into()),
        }
    }
    Ok((sweep, out))
}

fn plan(target: &Target) -> anyhow::Result<ExitCode> {
    let (sweep, out) = load(target)?;
    let width = sweep.runs.iter().map(|r| r.name.len()).max().unwrap_or(0);
    for run in &sweep.runs {
        let sets: Vec<String> = run.overrides.iter().map(|s| format!("--set {s}")).collect();
        println!(
            "{:>4}  {:<width$}  {} {}",
            run.index,
            run.name,
            run.config.display(),
            sets.join(" ")
        );
    }
    let points = sweep
        .runs
        .iter()
        .map(|r| r.point())
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    println!(
        "{} runs: {} grid points x {} seeds, into {}{}",
        sweep.runs.len(),
        points,
        sweep.runs.len() / points.max(1),
        out.root.display(),
        if sweep.inspect.enabled {
            ", each inspected after training"
        } else {
            ""
        }
    );
    let groups = sweep.groups();
    let largest = groups.iter().map(Vec::len).max().unwrap_or(1);
    if largest > 1 {
        println!(
            "trained in {} groups of up to {largest} seeds, each group as one batched model",
            groups.len(),
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn run_local(target: &Target, workers: Option<usize>, quiet: bool) -> anyhow::Result<ExitCode> {
    let (sweep, out) = load_to_write(target)?;
    let headlab = Headlab::current().map_err(anyhow::Error::msg)?;
    let workers = workers.unwrap_or_else(|| default_workers(&sweep));
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let stop = StopSignal::install().context("installing the signal handlers")?;
    std::fs::create_dir_all(out.sweep_dir())
        .with_context(|| format!("creating {}", out.sweep_dir().display()))?;
    let context = RunContext {
        out: &out,
        headlab: &headlab,
        inspect: &sweep.inspect,
        threads: (cores / workers).max(1),
        stop: &stop,
    };
    if !quiet {
        println!(
            "sweep {}: {} runs into {}, {workers} at a time",
            sweep.name,
            sweep.runs.len(),
            out.root.display()
        );
    }
    let display = if quiet { Display::Quiet } else { Display::Auto };
    let summary = run_pool(&sweep, &out, &context, workers, display);
    println!(
        "{} done now, {} done before, {} failed, {} interrupted or not started, {} held by \
         another process",
        summary.done,
        summary.already_done,
        summary.failed.len(),
        summary.interrupted,
        summary.busy.len()
    );
    for (name, why) in &summary.failed {
        println!(
            "failed: {name}: {why} (log: {})",
            out.sweep_dir()
                .join("logs")
                .join(format!("{name}.log"))
                .display()
        );
    }
    if let Some(signal) = stop.requested() {
        println!(
            "stopped by {}; run the same command again to finish",
            run::stop::signal_name(signal)
        );
        return Ok(ExitCode::from((128 + signal) as u8));
    }
    Ok(if summary.failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Threads one run uses: the largest `train.threads` or `train.shards` of the plan.
fn threads_per_run(sweep: &Sweep) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    (cores / default_workers(sweep)).max(1)
}

/// One Slurm array task per group of seeds trained together (per run with group_seeds = 1),
/// indexed by the group's first run; a group is submitted when any of its runs needs work.
fn array_indices(sweep: &Sweep, out: &SweepOut) -> Vec<usize> {
    sweep
        .groups()
        .iter()
        .filter(|group| {
            group
                .iter()
                .any(|run| run_state(out, run, &sweep.inspect).needs_work())
        })
        .map(|group| group[0].index)
        .collect()
}

fn submit(
    target: &Target,
    sweep: &Sweep,
    out: &SweepOut,
    options: &SlurmOptions,
    dry_run: bool,
) -> anyhow::Result<ExitCode> {
    let indices = array_indices(sweep, out);
    if indices.is_empty() {
        println!(
            "every run of {} is done or running; nothing to submit",
            sweep.name
        );
        return Ok(ExitCode::SUCCESS);
    }
    let slurm_dir = out.slurm_dir();
    std::fs::create_dir_all(&slurm_dir)
        .with_context(|| format!("creating {}", slurm_dir.display()))?;
    let absolute = |path: &Path| {
        std::path::absolute(path).with_context(|| format!("resolving {}", path.display()))
    };
    let out_abs = absolute(&out.root)?;
    if out_abs.display().to_string().contains(char::is_whitespace) {
        anyhow::bail!(
            "{} holds whitespace, which an #SBATCH --output line cannot; choose --out without \
             spaces",
            out_abs.display()
        );
    }
    let headlab = Headlab::current().map_err(anyhow::Error::msg)?;
    let sweep_file = absolute(&target.file)?;
    let slurm_abs = absolute(&slurm_dir)?;
    let job = BatchJob {
        name: &sweep.name,
        headlab: &headlab.path,
        sweep_file: &sweep_file,
        out: &out_abs,
        slurm_dir: &slurm_abs,
        indices: &indices,
    };
    let script = slurm::batch_script(&job, options);
    let script_path = slurm_dir.join(format!("{}.sbatch", sweep.name));
    run::atomic::write_atomic(&script_path, script.as_bytes())
        .with_context(|| format!("writing {}", script_path.display()))?;
    if dry_run {
        print!("{script}");
        println!(
            "# wrote {} ({} runs); not submitted",
            script_path.display(),
            indices.len()
        );
        return Ok(ExitCode::SUCCESS);
    }
    let job_id = slurm::submit(&script_path).map_err(anyhow::Error::msg)?;
    let jobs = slurm::jobs_file(&slurm_dir);
    let mut recorded = slurm::recorded_jobs(&slurm_dir);
    recorded.push(job_id.clone());
    run::atomic::write_atomic(&jobs, format!("{}\n", recorded.join("\n")).as_bytes())
        .with_context(|| format!("writing {}", jobs.display()))?;
    println!(
        "submitted job {job_id}: {} runs of {} (array {}), output in {}",
        indices.len(),
        sweep.name,
        slurm::array_ranges(&indices),
        slurm_abs.display()
    );
    println!(
        "follow it with: headlab sweep status {}",
        target.file.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// `sweep verify`: every run that is trained (done, inspected or not, or failed after its
/// training: a failure record does not hide its files), read to the last byte against its
/// manifests.
fn verify(target: &Target) -> anyhow::Result<ExitCode> {
    let (sweep, out) = load_to_write(target)?;
    let mut checked = 0;
    let mut damaged = 0;
    let failed = sweep
        .runs
        .iter()
        .filter(|run| matches!(run_state(&out, run, &sweep.inspect), RunState::Failed(_)))
        .count();
    for run in &sweep.runs {
        let damage = match directory_state(&out, run, &sweep.inspect) {
            RunState::Done | RunState::Trained | RunState::StaleReport(_) => {
                checked += 1;
                verify_run(&out, run, sweep.inspect.enabled)
            }
            RunState::Damaged(found) => Some(found),
            // A sealed run that no longer opens (a byte flipped in its config or marker) is
            // damage only reading to the byte tells from a conflict; no manifest: a conflict.
            RunState::Conflict(_) => verify_run(&out, run, sweep.inspect.enabled),
            _ => continue,
        };
        if let Some(found) = damage {
            record_damage(&out, run, &found);
            damaged += 1;
            println!("  damaged     {}: {}", run.name, found.describe());
        }
    }
    // Failed runs are no damage, but a "0 damaged" alone would read as all well.
    let failed = match failed {
        0 => String::new(),
        n => format!(" ({n} failed: `headlab sweep status` says why)"),
    };
    println!(
        "{}: {checked} finished runs read to the last byte against their manifests, {damaged} \
         damaged{failed}{}",
        sweep.name,
        if damaged > 0 {
            format!(
                "; `headlab sweep run {}` trains or inspects them again",
                target.file.display()
            )
        } else {
            String::new()
        }
    );
    Ok(if damaged > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

fn status(target: &Target) -> anyhow::Result<ExitCode> {
    let (sweep, out) = load(target)?;
    let mut by_label: std::collections::BTreeMap<&'static str, Vec<(String, Option<String>)>> =
        Default::default();
    for run in &sweep.runs {
        let state = run_state(&out, run, &sweep.inspect);
        let detail = match &state {
            RunState::Failed(why)
            | RunState::Conflict(why)
            | RunState::Running(why)
            | RunState::StaleReport(why) => Some(why.clone()),
            RunState::Damaged(damaged) => Some(damaged.describe()),
            _ => None,
        };
        by_label
            .entry(state.label())
            .or_default()
            .push((run.name.clone(), detail));
    }
    let count = |label: &str| by_label.get(label).map_or(0, Vec::len);
    println!(
        "{}: {} runs: {} done, {} running, {} interrupted, {} trained (not inspected), {} \
         stale (a report of other weights or options), {} damaged, {} failed, {} conflict, {} \
         left",
        sweep.name,
        sweep.runs.len(),
        count("done"),
        count("running"),
        count("interrupted"),
        count("trained"),
        count("stale"),
        count("damaged"),
        count("failed"),
        count("conflict"),
        count("left"),
    );
    for label in [
        "running",
        "damaged",
        "failed",
        "conflict",
        "interrupted",
        "trained",
        "stale",
    ] {
        for (name, detail) in by_label.get(label).into_iter().flatten() {
            match detail {
                Some(detail) => println!("  {label:<11} {name}: {detail}"),
                None => println!("  {label:<11} {name}"),
            }
        }
    }
    let jobs = slurm::recorded_jobs(&out.slurm_dir());
    if !jobs.is_empty() {
        match slurm::queued_tasks(&jobs) {
            Some(tasks) => {
                let pending = tasks.iter().filter(|(_, s)| s == "PENDING").count();
                let running = tasks.iter().filter(|(_, s)| s == "RUNNING").count();
                println!(
                    "slurm: {pending} tasks pending, {running} running, {} in other states \
                     (jobs {})",
                    tasks.len() - pending - running,
                    jobs.join(", ")
                );
            }
            None => println!(
                "slurm: squeue is not available here (jobs {})",
                jobs.join(", ")
            ),
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// One Slurm array task: the plan's run `index` (with `group_seeds`, the group it is the
/// first run of), as a local worker would run it.
fn task(target: &Target, index: usize) -> anyhow::Result<ExitCode> {
    let (sweep, out) = load(target)?;
    let Some(group) = sweep.group_of(index) else {
        anyhow::bail!(
            "--index {index} is past the plan of {} ({} runs); was the sweep file edited after \
             submitting?",
            target.file.display(),
            sweep.runs.len()
        );
    };
    let headlab = Headlab::current().map_err(anyhow::Error::msg)?;
    let stop = StopSignal::install().context("installing the signal handlers")?;
    let context = RunContext {
        out: &out,
        headlab: &headlab,
        inspect: &sweep.inspect,
        threads: std::thread::available_parallelism().map_or(1, usize::from),
        stop: &stop,
    };
    let group: Vec<_> = group.into_iter().cloned().collect();
    let attempts = execute_group(&group, &context);
    for (run, attempt) in &attempts {
        println!("{}: {attempt:?}", run.name);
    }
    let attempts: Vec<&Attempt> = attempts.iter().map(|(_, attempt)| attempt).collect();
    Ok(
        if attempts.iter().any(|a| matches!(a, Attempt::Interrupted)) {
            let signal = stop.requested().unwrap_or(15);
            ExitCode::from((128 + signal) as u8)
        } else if attempts.iter().any(|a| matches!(a, Attempt::Failed(_))) {
            ExitCode::FAILURE
        } else {
            ExitCode::SUCCESS
        },
    )
}
