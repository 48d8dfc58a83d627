//! `bench`: training and inference speed of headlab's encoder and Burn's built-in
//! `TransformerEncoder`, side by side, as a markdown table.
//!
//! Each case runs in a child process of this binary (`--case`), so peak memory is per case
//! and every case starts with fresh thread pools and allocator.

use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};

use anyhow::{Context, bail};
use bench::case::{Budget, Case, CaseResult, Implementation, Size, run_case};
use bench::machine;
use bench::table::{Provenance, markdown};
use clap::Parser;
use train::BackendKind;

/// The allocator `train` uses, so both implementations are timed as headlab runs them.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Times training steps and forward passes of headlab's encoder and of Burn's built-in
/// TransformerEncoder at two sizes, and prints a markdown table.
#[derive(Debug, Parser)]
#[command(name = "bench")]
struct Cli {
    /// Model sizes to run.
    #[arg(long, value_delimiter = ',', default_values = ["small", "large"])]
    sizes: Vec<Size>,
    /// Backends to run on (wgpu needs a GPU or a software Vulkan driver).
    #[arg(long, value_delimiter = ',', default_values = ["flex", "ndarray"])]
    backends: Vec<BackendKind>,
    /// Implementations to time.
    #[arg(long = "impl", value_delimiter = ',', default_values = ["headlab", "burn"])]
    implementations: Vec<Implementation>,
    /// Seconds to time training, and again forward passes, per case (at least).
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Timed steps per case (at least).
    #[arg(long, default_value_t = 5)]
    min_steps: usize,
    /// Untimed warmup steps per case.
    #[arg(long, default_value_t = 3)]
    warmup: usize,
    /// Parts headlab splits each batch into (`train.shards`); Burn's encoder always trains
    /// on the whole batch.
    #[arg(long, default_value_t = 2)]
    shards: usize,
    /// Threads for flex and ndarray (RAYON_NUM_THREADS); default: one per core.
    #[arg(long)]
    threads: Option<usize>,
    /// Also write the table to this markdown file.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Also write every case's figures to this JSON file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Run one case (JSON) in this process and print its result as JSON.
    #[arg(long, hide = true)]
    case: Option<String>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    if cli.seconds.is_nan() || cli.seconds < 0.0 {
        bail!("--seconds must be 0 or more, got {}", cli.seconds);
    }
    if cli.shards == 0 {
        bail!("--shards must be at least 1 (1 trains on the whole batch at once)");
    }
    let budget = Budget {
        warmup_steps: cli.warmup,
        min_steps: cli.min_steps.max(1),
        min_seconds: cli.seconds,
    };
    if let Some(case) = &cli.case {
        let case: Case = serde_json::from_str(case).context("reading --case")?;
        let result = run_case(case, budget)?;
        println!("{}", serde_json::to_string(&result)?);
        return Ok(ExitCode::SUCCESS);
    }

    let mut results = Vec::new();
    let mut failures = 0;
    for &size in &cli.sizes {
        for &backend in &cli.backends {
            for &implementation in &cli.implementations {
                let shards = match implementation {
                    Implementation::Headlab => cli.shards,
                    Implementation::Burn => 1,
                };
                let case = Case {
                    size,
                    backend,
                    implementation,
                    shards,
                };
                let label = format!(
                    "{} {} {}",
                    size.name(),
                    backend.name(),
                    implementation.name()
                );
                eprint!("{label}: ");
                match run_child(case, &cli) {
                    Ok(result) => {
                        eprintln!(
                            "{:.2} train steps/s, {:.2} forward passes/s, {} MiB peak",
                            result.train_steps_per_s,
                            result.forward_passes_per_s,
                            result
                                .peak_rss_mib
                                .map_or("?".into(), |m| format!("{m:.0}")),
                        );
                        results.push(result);
                    }
                    Err(error) => {
                        eprintln!("failed: {error:#}");
                        failures += 1;
                    }
                }
            }
        }
    }

    let provenance = Provenance {
        date: machine::today(),
        cpu: machine::cpu_name(),
        cores: machine::cores(),
        threads: results.first().map_or(machine::cores(), |r| r.threads),
        avx512: machine::has_avx512(),
        shards: cli.shards,
    };
    let table = markdown(&results, &provenance);
    println!("{table}");
    if let Some(path) = &cli.out {
        std::fs::write(path, &table).with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &cli.json {
        let json = serde_json::to_string_pretty(&results)?;
        std::fs::write(path, json).with_context(|| format!("writing {}", path.display()))?;
    }
    if failures > 0 {
        eprintln!("error: {failures} case(s) failed; their cells show a dash");
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs `case` in a child process of this binary and reads its result.
fn run_child(case: Case, cli: &Cli) -> anyhow::Result<CaseResult> {
    let exe = std::env::current_exe().context("finding the bench binary")?;
    let mut command = Command::new(exe);
    command
        .arg("--case")
        .arg(serde_json::to_string(&case)?)
        .args(["--seconds", &cli.seconds.to_string()])
        .args(["--min-steps", &cli.min_steps.to_string()])
        .args(["--warmup", &cli.warmup.to_string()])
        .stdin(Stdio::null())
        .stderr(Stdio::piped());
    if let Some(threads) = cli.threads {
        command.env("RAYON_NUM_THREADS", threads.to_string());
    }
    let output = command.output().context("starting a benchmark case")?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let message = stderr
            .lines()
            .rev()
            .find(|line| line.starts_with("error"))
            .unwrap_or_else(|| stderr.trim());
        bail!("{message}");
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line).with_context(|| format!("reading the case's result {line:?}"))
}
