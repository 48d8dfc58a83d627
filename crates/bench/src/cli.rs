//! `headlab bench`: training and inference speed of headlab's encoder, Burn's built-in
//! `TransformerEncoder` and (when torch is importable) a PyTorch reference of headlab's
//! model, side by side, as a markdown table; or, with `--to-accuracy`, the time headlab and
//! the PyTorch reference take to reach a token accuracy on reverse.
//!
//! Each case runs in a child process: headlab's and Burn's in this binary (`--case`), the
//! reference in Python. So peak memory is per case and every case starts with fresh thread
//! pools and allocator.

use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};

use crate::accuracy::{self, AccuracyResult};
use crate::case::{Budget, Case, CaseResult, Implementation, Size, headlab_parameters, run_case};
use crate::pytorch::TorchDevice;
use crate::table::{Provenance, markdown, seeds_markdown};
use crate::{machine, profile, pytorch, rounds};
use anyhow::{Context, bail};
use run::BackendKind;

/// Time training steps of headlab's encoder against Burn's and a PyTorch reference.
///
/// Times training steps and forward passes of headlab's encoder, of Burn's built-in
/// TransformerEncoder and of a PyTorch reference of headlab's model (when the interpreter in
/// HEADLAB_PYTHON, default python3, can import torch) at two sizes, and prints a markdown
/// table.
#[derive(Debug, clap::Args)]
pub struct Cli {
    /// Model sizes to run.
    #[arg(long, value_delimiter = ',', default_values = ["small", "large"])]
    sizes: Vec<Size>,
    /// Backends to run on (wgpu needs a GPU or a software Vulkan driver).
    #[arg(long, value_delimiter = ',', default_values = ["flex", "ndarray"])]
    backends: Vec<BackendKind>,
    /// Implementations to time [default: headlab,burn, and pytorch when the interpreter in
    /// HEADLAB_PYTHON (default python3) can import torch]. pytorch runs once per size, on
    /// --torch-device; naming it fails when torch cannot be imported.
    #[arg(long = "impl", value_delimiter = ',')]
    implementations: Option<Vec<Implementation>>,
    /// Where the PyTorch reference trains: cpu (with --threads; its figures stand beside
    /// flex and ndarray) or cuda (the first GPU torch sees; beside wgpu).
    #[arg(long, value_enum, default_value_t = TorchDevice::Cpu)]
    torch_device: TorchDevice,
    /// Seconds to time training, and again forward passes, per case (at least).
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Timed steps per case (at least).
    #[arg(long, default_value_t = 5)]
    min_steps: usize,
    /// Untimed warmup steps per case.
    #[arg(long, default_value_t = 3)]
    warmup: usize,
    /// Parts headlab splits each batch into (`train.shards`); Burn's encoder and PyTorch
    /// always train on the whole batch.
    #[arg(long, default_value_t = 2)]
    shards: usize,
    /// Threads for flex and ndarray (RAYON_NUM_THREADS) and for PyTorch
    /// (torch.set_num_threads); default: one per core.
    #[arg(long)]
    threads: Option<usize>,
    /// Run every case this many times, interleaved (each case of a round before the next
    /// round), and report each figure's median over the rounds.
    #[arg(long, default_value_t = 1)]
    rounds: usize,
    /// Instead of speed: train headlab (with train's trainer) and the PyTorch reference to
    /// this token accuracy on reverse (seq 32, vocab 32, small model, batch 64, constant lr
    /// 1e-3, evaluated every 10 steps on 256 held-out sequences) and print the time each
    /// took. headlab runs on the first of --backends.
    #[arg(long, value_name = "TARGET")]
    to_accuracy: Option<f64>,
    /// Step cap of --to-accuracy.
    #[arg(long, default_value_t = accuracy::DEFAULT_MAX_STEPS)]
    max_steps: usize,
    /// Instead of the implementations side by side: many seeds of one model trained as one
    /// batched model (headlab's `train --seeds`, PyTorch's `torch.func.vmap`) at each of
    /// these seed counts, e.g. `1,4,16,64`, against one model (S = 1): seed-steps per second.
    #[arg(long, value_delimiter = ',', value_name = "S")]
    seeds: Option<Vec<usize>>,
    /// Instead of the implementations side by side: where a training step of headlab's
    /// encoder spends its time, phase by phase (batches drawn on the host, upload, forward,
    /// backward, optimizer, the loss read back), the device synchronised after each, beside
    /// the same step unsynchronised; for each of --sizes on each of --backends (and each
    /// --seeds count), --min-steps steps after --warmup, in this process.
    #[arg(long, conflicts_with_all = ["to_accuracy", "implementations"])]
    profile: bool,
    /// Also write the table to this markdown file.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Also write every case's figures to this JSON file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Run one case (JSON) in this process and print its result as JSON.
    #[arg(long, hide = true)]
    case: Option<String>,
    /// With --to-accuracy: run headlab's part in this process and print it as JSON.
    #[arg(long, hide = true)]
    accuracy_child: bool,
}

/// Runs `headlab bench` as `cli` says: the exit status, or the error for `headlab`'s `main`
/// to print. Call it from `main`'s thread before any other thread
/// starts: with wgpu it sets an environment variable.
pub fn main(cli: Cli) -> anyhow::Result<ExitCode> {
    if cli.backends.contains(&BackendKind::Wgpu) {
        // Before any thread starts; the cases' child processes inherit it.
        run::cli::give_graphics_a_runtime_dir();
    }
    run(cli)
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    if cli.seconds.is_nan() || cli.seconds < 0.0 {
        bail!("--seconds must be 0 or more, got {}", cli.seconds);
    }
    if cli.shards == 0 {
        bail!("--shards must be at least 1 (1 trains on the whole batch at once)");
    }
    if cli.rounds == 0 {
        bail!("--rounds must be at least 1");
    }
    if let Some(target) = cli.to_accuracy
        && !(target > 0.0 && target <= 1.0)
    {
        bail!("--to-accuracy must be in (0, 1], got {target}");
    }
    if cli.max_steps == 0 {
        bail!("--max-steps must be at least 1");
    }
    if cli.threads == Some(0) {
        bail!("--threads must be at least 1");
    }
    if let Some(seeds) = &cli.seeds {
        if seeds.is_empty() || seeds.contains(&0) || seeds.iter().any(|&s| s > MAX_SEEDS) {
            bail!("--seeds takes seed counts from 1 to {MAX_SEEDS}, e.g. `1,4,16,64`");
        }
        if cli.to_accuracy.is_some() {
            bail!("--seeds times training speed; it does not go with --to-accuracy");
        }
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
    let backend = *cli.backends.first().context("--backends is empty")?;
    if cli.profile {
        return run_profile(&cli);
    }
    if cli.accuracy_child {
        let target = cli
            .to_accuracy
            .context("--accuracy-child needs --to-accuracy")?;
        let result = accuracy::run_headlab(backend, target, cli.max_steps, cli.shards)?;
        println!("{}", serde_json::to_string(&result)?);
        return Ok(ExitCode::SUCCESS);
    }

    let python = pytorch::python_from_env();
    let (implementations, torch_version) = implementations(&cli, &python)?;
    match cli.to_accuracy {
        Some(target) => run_to_accuracy(&cli, target, &implementations, &python, torch_version),
        None => run_speed(&cli, budget, &implementations, &python, torch_version),
    }
}

/// The implementations to run, and torch's version when pytorch is one of them. The
/// default set has pytorch when torch can be imported (a line says so when it cannot); an
/// explicit `--impl pytorch` without torch is an error.
fn implementations(
    cli: &Cli,
    python: &str,
) -> anyhow::Result<(Vec<Implementation>, Option<String>)> {
    let explicit = cli.implementations.is_some();
    let mut implementations = cli
        .implementations
        .clone()
        .unwrap_or_else(|| vec![Implementation::Headlab, Implementation::Burn]);
    let wants_pytorch = !explicit || implementations.contains(&Implementation::Pytorch);
    if !wants_pytorch {
        return Ok((implementations, None));
    }
    let device = cli.torch_device;
    let has_row = cli.backends.iter().any(|&b| device.stands_beside(b));
    if !has_row && cli.to_accuracy.is_none() {
        let message = match device {
            TorchDevice::Cpu => {
                "PyTorch reference skipped: it runs on the CPU, and --backends has neither \
                 flex nor ndarray (--torch-device cuda puts it beside wgpu)"
            }
            TorchDevice::Cuda => {
                "PyTorch reference skipped: on CUDA it stands beside wgpu, and --backends has \
                 no wgpu"
            }
        };
        if explicit {
            bail!("{message}");
        }
        eprintln!("{message}");
        return Ok((implementations, None));
    }
    match pytorch::probe(python, device) {
        Ok(version) => {
            if !implementations.contains(&Implementation::Pytorch) {
                implementations.push(Implementation::Pytorch);
            }
            Ok((implementations, Some(version)))
        }
        Err(reason) => {
            let message = pytorch::unavailable_message(python, &reason);
            if explicit {
                bail!("{message}");
            }
            eprintln!("{message}");
            Ok((implementations, None))
        }
    }
}

/// The largest `--seeds` count: a bound on what one case allocates, the one train has.
const MAX_SEEDS: usize = run::config::MAX_GROUP_SEEDS;

/// The speed table: every case, `--rounds` times interleaved, then the medians.
fn run_speed(
    cli: &Cli,
    budget: Budget,
    implementations: &[Implementation],
    python: &str,
    torch_version: Option<String>,
) -> anyhow::Result<ExitCode> {
    let threads = cli.threads.unwrap_or_else(machine::cores);
    let cases = speed_cases(cli, implementations);
    let mut expected_parameters = Vec::new();
    if implementations.contains(&Implementation::Pytorch) {
        for &size in &cli.sizes {
            expected_parameters.push((
                size,
                headlab_parameters(size.run_config(BackendKind::Flex))?,
            ));
        }
    }

    let mut measured: Vec<Vec<CaseResult>> = vec![Vec::new(); cases.len()];
    let mut failures = 0;
    for round in 0..cli.rounds {
        for (case, results) in cases.iter().zip(&mut measured) {
            eprint!("{}: ", case_label(cli, case, round));
            let result = match case.implementation {
                Implementation::Pytorch => {
                    let expected = expected_parameters
                        .iter()
                        .find(|(size, _)| *size == case.size)
                        .map(|(_, n)| *n)
                        .expect("counted for every size");
                    pytorch::run_case(python, *case, budget, threads, cli.torch_device, expected)
                }
                _ => run_child(*case, cli),
            };
            match result {
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
    let results: Vec<CaseResult> = measured
        .iter()
        .filter_map(|rounds| rounds::median_result(rounds))
        .collect();
    let provenance = provenance(cli, &results, threads, torch_version);
    let table = match &cli.seeds {
        Some(_) => seeds_markdown(&results, &provenance),
        None => markdown(&results, &provenance),
    };
    println!("{table}");
    write_outputs(cli, &table, &results)?;
    if failures > 0 {
        eprintln!("error: {failures} case(s) failed; their cells show a dash");
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// `--profile`: every size x backend x seed count profiled in this process, in turn, and the
/// table of where their steps' time goes ([`profile::profile_markdown`]).
fn run_profile(cli: &Cli) -> anyhow::Result<ExitCode> {
    let seed_counts = cli.seeds.clone().unwrap_or_else(|| vec![1]);
    let mut profiles = Vec::new();
    for &size in &cli.sizes {
        for &backend in &cli.backends {
            for &seeds in &seed_counts {
                let case = Case {
                    size,
                    backend,
                    implementation: Implementation::Headlab,
                    shards: 1,
                    seeds,
                };
                eprint!("{} on {} x{seeds}: ", size.name(), backend.name());
                let profile = profile::profile_case(case, cli.warmup, cli.min_steps)?;
                eprintln!(
                    "{:.2} ms a step, {:.2} ms synchronised phase by phase",
                    profile.plain_step_ms, profile.synced_step_ms
                );
                profiles.push(profile);
            }
        }
    }
    let table = profile::profile_markdown(&profiles);
    println!("{table}");
    write_outputs(cli, &table, &profiles)?;
    Ok(ExitCode::SUCCESS)
}

/// Every speed case of the command line: sizes x backends x implementations; the PyTorch
/// reference once per size, beside the first CPU backend's cases.
fn speed_cases(cli: &Cli, implementations: &[Implementation]) -> Vec<Case> {
    let pytorch_backend = cli
        .backends
        .iter()
        .copied()
        .find(|&b| cli.torch_device.stands_beside(b));
    let seed_counts = cli.seeds.clone().unwrap_or_else(|| vec![1]);
    let mut cases = Vec::new();
    for &size in &cli.sizes {
        for &backend in &cli.backends {
            for &implementation in implementations {
                let shards = match implementation {
                    Implementation::Headlab => cli.shards,
                    // Burn's encoder has no seed stack.
                    Implementation::Burn if cli.seeds.is_some() => continue,
                    Implementation::Burn => 1,
                    Implementation::Pytorch if Some(backend) == pytorch_backend => 1,
                    Implementation::Pytorch => continue,
                };
                for &seeds in &seed_counts {
                    cases.push(Case {
                        size,
                        backend,
                        implementation,
                        shards,
                        seeds,
                    });
                }
            }
        }
    }
    cases
}

/// The progress label of `case` in round `round` (0-based).
fn case_label(cli: &Cli, case: &Case, round: usize) -> String {
    let mut label = format!(
        "{} {} {}",
        case.size.name(),
        case.backend.name(),
        case.implementation.name()
    );
    if case.implementation == Implementation::Pytorch {
        label = format!("{} {} pytorch", case.size.name(), cli.torch_device.name());
    }
    if cli.seeds.is_some() {
        label = format!("{label} x{} seeds", case.seeds);
    }
    if cli.rounds > 1 {
        label = format!("round {}/{}: {label}", round + 1, cli.rounds);
    }
    label
}

/// Where and how the speed table was measured.
fn provenance(
    cli: &Cli,
    results: &[CaseResult],
    threads: usize,
    torch_version: Option<String>,
) -> Provenance {
    Provenance {
        date: machine::today(),
        cpu: machine::cpu_name(),
        cores: machine::cores(),
        threads: results
            .iter()
            .find(|r| r.case.implementation != Implementation::Pytorch)
            .map_or(threads, |r| r.threads),
        avx512: machine::has_avx512(),
        shards: cli.shards,
        pytorch: torch_version,
        torch_device: cli.torch_device,
        wgpu_adapter: wgpu_adapter(cli),
        rounds: cli.rounds,
    }
}

/// The wgpu adapter the cases ran on, described (`None` when no case ran on wgpu, or wgpu
/// could not start: the cases then failed and said why).
fn wgpu_adapter(cli: &Cli) -> Option<String> {
    cli.backends
        .contains(&BackendKind::Wgpu)
        .then(run::wgpu_adapter)
        .and_then(Result::ok)
        .map(|adapter| adapter.to_string())
}

/// Time to `target` token accuracy for headlab and (when it runs) PyTorch, `--rounds`
/// times interleaved.
fn run_to_accuracy(
    cli: &Cli,
    target: f64,
    implementations: &[Implementation],
    python: &str,
    torch_version: Option<String>,
) -> anyhow::Result<ExitCode> {
    let threads = cli.threads.unwrap_or_else(machine::cores);
    let parameters = accuracy::parameters()?;
    let chosen: Vec<Implementation> = implementations
        .iter()
        .copied()
        .filter(|&i| {
            i != Implementation::Burn && (i != Implementation::Pytorch || torch_version.is_some())
        })
        .collect();
    if implementations.contains(&Implementation::Burn) && cli.implementations.is_some() {
        eprintln!("note: --to-accuracy times headlab and PyTorch; Burn's encoder is left out");
    }
    let mut measured: Vec<Vec<AccuracyResult>> = vec![Vec::new(); chosen.len()];
    let mut failures = 0;
    for round in 0..cli.rounds {
        for (&implementation, results) in chosen.iter().zip(&mut measured) {
            eprint!(
                "round {}/{}: {} to {target}: ",
                round + 1,
                cli.rounds,
                implementation.name()
            );
            let result = match implementation {
                Implementation::Pytorch => pytorch::run_to_accuracy(
                    python,
                    target,
                    cli.max_steps,
                    threads,
                    cli.torch_device,
                    parameters,
                )
                .map(|r| r.into_result(target)),
                _ => run_accuracy_child(cli, target),
            };
            match result {
                Ok(result) => {
                    eprintln!(
                        "{} after {} steps, {:.1} s (token accuracy {:.4})",
                        if result.reached {
                            "reached"
                        } else {
                            "NOT reached"
                        },
                        result.steps,
                        result.seconds,
                        result.token_accuracy
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
    let results: Vec<AccuracyResult> = measured
        .iter()
        .filter_map(|rounds| accuracy::median_result(rounds))
        .collect();
    let table = accuracy::markdown(&results, target, cli.max_steps);
    println!("{table}");
    write_outputs(cli, &table, &results)?;
    if failures > 0 {
        eprintln!("error: {failures} run(s) failed");
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// `--out` and `--json`, each written whole or not at all (a temporary name, then renamed),
/// so an interrupted benchmark never leaves half a table where the last one was.
fn write_outputs<T: serde::Serialize>(cli: &Cli, table: &str, results: &T) -> anyhow::Result<()> {
    if let Some(path) = &cli.out {
        run::atomic::write_atomic(path, table.as_bytes())
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &cli.json {
        let json = serde_json::to_string_pretty(results)?;
        run::atomic::write_atomic(path, json.as_bytes())
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// A child process of this binary (`headlab bench ...`) with the thread count set.
fn child(cli: &Cli) -> anyhow::Result<Command> {
    let exe = std::env::current_exe().context("finding the headlab binary")?;
    let mut command = Command::new(exe);
    command.arg("bench");
    command.stdin(Stdio::null()).stderr(Stdio::piped());
    if let Some(threads) = cli.threads {
        command.env("RAYON_NUM_THREADS", threads.to_string());
    }
    Ok(command)
}

/// Runs `command` and reads the JSON on the last line of its stdout.
fn read_child<T: serde::de::DeserializeOwned>(mut command: Command) -> anyhow::Result<T> {
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

/// Runs `case` in a child process of this binary and reads its result.
fn run_child(case: Case, cli: &Cli) -> anyhow::Result<CaseResult> {
    let mut command = child(cli)?;
    command
        .arg("--case")
        .arg(serde_json::to_string(&case)?)
        .args(["--seconds", &cli.seconds.to_string()])
        .args(["--min-steps", &cli.min_steps.to_string()])
        .args(["--warmup", &cli.warmup.to_string()]);
    read_child(command)
}

/// headlab's time to `target` in a child process of this binary.
fn run_accuracy_child(cli: &Cli, target: f64) -> anyhow::Result<AccuracyResult> {
    let mut command = child(cli)?;
    let backend = cli.backends.first().map_or("flex", |b| b.name());
    command
        .arg("--accuracy-child")
        .args(["--to-accuracy", &target.to_string()])
        .args(["--max-steps", &cli.max_steps.to_string()])
        .args(["--shards", &cli.shards.to_string()])
        .args(["--backends", backend]);
    read_child(command)
}
