//! The PyTorch reference: `crates/bench/python/reference.py`, run by the interpreter that
//! `HEADLAB_PYTHON` names (default `python3`), one process per case, like headlab's and
//! Burn's cases. torch is optional: [`probe`] says whether the interpreter can import it,
//! and bench leaves the PyTorch column out (or fails, when it was asked for) when it cannot.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use anyhow::{Context, bail};
use run::BackendKind;
use serde::{Deserialize, Serialize};

use crate::accuracy::{AccuracyResult, EVAL_EVERY, EVAL_SIZE};
use crate::case::{Budget, Case, CaseResult, Implementation};

/// The environment variable naming the Python interpreter.
pub const PYTHON_ENV: &str = "HEADLAB_PYTHON";
/// The interpreter used when [`PYTHON_ENV`] is unset or empty.
pub const DEFAULT_PYTHON: &str = "python3";
/// The reference's source, built into the binary: it is written to a temporary file when
/// the checkout's copy is not where the build found it.
const SCRIPT_SOURCE: &str = include_str!("../python/reference.py");
/// Where the checkout's copy is.
const SCRIPT_PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/python/reference.py");

/// The interpreter [`PYTHON_ENV`] names, or [`DEFAULT_PYTHON`].
pub fn python_from_env() -> String {
    python_from(std::env::var(PYTHON_ENV).ok())
}

/// [`python_from_env`] for a given value of the variable.
pub fn python_from(value: Option<String>) -> String {
    value
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| DEFAULT_PYTHON.to_string())
}

/// Where the PyTorch reference trains.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum TorchDevice {
    /// On the CPU, with bench's `--threads`: it stands beside the flex and ndarray rows.
    #[default]
    Cpu,
    /// On the first CUDA GPU torch sees: it stands beside the wgpu rows.
    Cuda,
}

impl TorchDevice {
    /// The name used on the command line, by the reference and in the tables.
    pub fn name(self) -> &'static str {
        match self {
            TorchDevice::Cpu => "cpu",
            TorchDevice::Cuda => "cuda",
        }
    }

    /// Whether the reference's figures stand beside headlab's on `backend`: the CPU beside
    /// the CPU backends, CUDA beside wgpu.
    pub fn stands_beside(self, backend: BackendKind) -> bool {
        match self {
            TorchDevice::Cpu => backend != BackendKind::Wgpu,
            TorchDevice::Cuda => backend == BackendKind::Wgpu,
        }
    }
}

/// torch's version if `python` can import torch (and, for `device` CUDA, sees a GPU: then
/// with the GPU's name, `2.11.0+cu130, CUDA on NVIDIA H200`); otherwise why not, in a few
/// words.
pub fn probe(python: &str, device: TorchDevice) -> Result<String, String> {
    let program = match device {
        TorchDevice::Cpu => "import torch; print(torch.__version__)",
        TorchDevice::Cuda => {
            "import torch\n\
             assert torch.cuda.is_available(), 'torch.cuda.is_available() is False'\n\
             print(f'{torch.__version__}, CUDA on {torch.cuda.get_device_name(0)}')"
        }
    };
    let output = Command::new(python)
        .args(["-c", program])
        .stdin(Stdio::null())
        .output();
    match output {
        Err(error) => Err(format!("cannot run it: {error}")),
        Ok(output) if output.status.success() => {
            let stdout = String::from_utf8_lossy(&output.stdout);
            Ok(stdout.lines().last().unwrap_or("?").trim().to_string())
        }
        Ok(output) => {
            let stderr = String::from_utf8_lossy(&output.stderr);
            let last = stderr.lines().rev().find(|l| !l.trim().is_empty());
            Err(last.map_or_else(
                || format!("`import torch` failed ({})", output.status),
                |line| format!("`import torch` failed: {}", line.trim()),
            ))
        }
    }
}

/// The one line bench prints when the PyTorch column is left out (or, when it was asked
/// for with `--impl`, the error).
pub fn unavailable_message(python: &str, reason: &str) -> String {
    format!(
        "PyTorch reference skipped: {python} ({PYTHON_ENV}, default {DEFAULT_PYTHON}) cannot \
         import torch ({reason}); set {PYTHON_ENV}=/path/to/python of an environment with \
         torch to add the PyTorch column"
    )
}

/// The reference script's path: the checkout's copy, or the built-in source written to a
/// temporary file (named by a hash of the source, so runs share it) when the checkout is
/// not where the binary was built.
pub fn script_path() -> anyhow::Result<PathBuf> {
    let path = PathBuf::from(SCRIPT_PATH);
    if path.is_file() {
        return Ok(path);
    }
    // FNV-1a of the source.
    let hash = SCRIPT_SOURCE
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
    let path = std::env::temp_dir().join(format!("headlab-reference-{hash:016x}.py"));
    let current = std::fs::read_to_string(&path).is_ok_and(|text| text == SCRIPT_SOURCE);
    if !current {
        std::fs::write(&path, SCRIPT_SOURCE)
            .with_context(|| format!("writing the PyTorch reference to {}", path.display()))?;
    }
    Ok(path)
}

/// What the reference prints for a speed case.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ReferenceCase {
    /// `"small"` or `"large"`.
    pub size: String,
    /// Sequences per step.
    pub batch_size: usize,
    /// Tokens per sequence.
    pub seq_len: usize,
    /// Parameters of the model.
    pub parameters: usize,
    /// `torch.get_num_threads()`.
    pub threads: usize,
    /// Timed training steps.
    pub train_steps: usize,
    /// Training steps per second.
    pub train_steps_per_s: f64,
    /// Forward passes per second.
    pub forward_passes_per_s: f64,
    /// Loss of the last timed step.
    pub last_loss: f32,
    /// Peak resident memory of the Python process, MiB.
    pub peak_rss_mib: Option<f64>,
    /// `torch.__version__`.
    pub torch_version: String,
    /// Where it trained: `cpu`, or `cuda (GPU name)` (absent from older references: `cpu`).
    #[serde(default = "cpu")]
    pub device: String,
    /// Models trained together with `torch.func.vmap` (1 when absent: a plain model).
    #[serde(default = "one")]
    pub seeds: usize,
}

fn one() -> usize {
    1
}

fn cpu() -> String {
    "cpu".into()
}

/// What the reference prints with `--to-accuracy`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ReferenceAccuracy {
    /// Whether the token accuracy reached the target before the step cap.
    pub reached: bool,
    /// Steps trained.
    pub steps: usize,
    /// Training seconds until the evaluation that reached the target (or the last one).
    pub seconds: f64,
    /// Token accuracy of the last evaluation.
    pub token_accuracy: f64,
    /// Parameters of the model.
    pub parameters: usize,
    /// `torch.get_num_threads()`.
    pub threads: usize,
    /// `torch.__version__`.
    pub torch_version: String,
    /// Where it trained: `cpu`, or `cuda (GPU name)`.
    #[serde(default = "cpu")]
    pub device: String,
}

impl ReferenceAccuracy {
    /// The reference's figures as an [`AccuracyResult`] for the target `target`.
    pub fn into_result(self, target: f64) -> AccuracyResult {
        AccuracyResult {
            implementation: Implementation::Pytorch,
            backend: None,
            target,
            reached: self.reached,
            steps: self.steps,
            seconds: self.seconds,
            token_accuracy: self.token_accuracy,
            parameters: self.parameters,
            threads: self.threads,
            shards: 1,
            version: Some(format!("{} on {}", self.torch_version, self.device)),
            rounds: 1,
        }
    }
}

/// The JSON object on the last non-empty line of the reference's stdout, with a message that
/// shows what came instead when it is not one.
pub fn parse_output<T: serde::de::DeserializeOwned>(stdout: &str) -> anyhow::Result<T> {
    let line = stdout
        .lines()
        .rev()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or_default();
    if line.is_empty() {
        bail!("the PyTorch reference printed nothing on stdout (expected one JSON object)");
    }
    serde_json::from_str(line).with_context(|| {
        let shown: String = line.chars().take(200).collect();
        format!("the PyTorch reference printed {shown:?}, not the JSON object bench reads")
    })
}

/// Checks that the reference's model has headlab's parameter count.
pub fn check_parameters(reference: usize, headlab: usize) -> anyhow::Result<()> {
    if reference != headlab {
        bail!(
            "the PyTorch reference has {reference} parameters, headlab's encoder {headlab}: \
             they are not the same model (check crates/bench/python/reference.py)"
        );
    }
    Ok(())
}

/// Runs the reference with `args`, returning its stdout (an error with its last stderr line
/// when it fails).
fn run_script(python: &str, args: &[String]) -> anyhow::Result<String> {
    let script = script_path()?;
    let output = Command::new(python)
        .arg(&script)
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .with_context(|| format!("starting {python} {}", script.display()))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let message = stderr
            .lines()
            .rev()
            .find(|line| !line.trim().is_empty())
            .unwrap_or("no message");
        bail!(
            "the PyTorch reference failed ({}): {message}",
            output.status
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Times `case` (an [`crate::case::Implementation::Pytorch`] case) in the reference on
/// `device` (with `threads` CPU threads), and checks its parameter count against
/// `headlab_parameters`.
pub fn run_case(
    python: &str,
    case: Case,
    budget: Budget,
    threads: usize,
    device: TorchDevice,
    headlab_parameters: usize,
) -> anyhow::Result<CaseResult> {
    let args = vec![
        "--device".to_string(),
        device.name().to_string(),
        "--size".to_string(),
        case.size.name().to_string(),
        "--threads".to_string(),
        threads.to_string(),
        "--seconds".to_string(),
        budget.min_seconds.to_string(),
        "--min-steps".to_string(),
        budget.min_steps.to_string(),
        "--warmup".to_string(),
        budget.warmup_steps.to_string(),
        "--seed".to_string(),
        "0".to_string(),
        "--seeds".to_string(),
        case.seeds.to_string(),
    ];
    let reference: ReferenceCase = parse_output(&run_script(python, &args)?)?;
    to_case_result(case, reference, headlab_parameters)
}

/// The reference's figures as a [`CaseResult`] of `case`, after checking that they are for
/// this case and for headlab's model.
pub fn to_case_result(
    case: Case,
    reference: ReferenceCase,
    headlab_parameters: usize,
) -> anyhow::Result<CaseResult> {
    if reference.size != case.size.name() {
        bail!(
            "the PyTorch reference ran size {:?}, bench asked for {:?}",
            reference.size,
            case.size.name()
        );
    }
    check_parameters(reference.parameters, headlab_parameters)?;
    if reference.seeds != case.seeds {
        bail!(
            "the PyTorch reference trained {} seeds, bench asked for {}",
            reference.seeds,
            case.seeds
        );
    }
    if !reference.last_loss.is_finite() {
        bail!(
            "pytorch {}: the loss became {}",
            case.size.name(),
            reference.last_loss
        );
    }
    Ok(CaseResult {
        case,
        batch_size: reference.batch_size,
        seq_len: reference.seq_len,
        parameters: reference.parameters,
        threads: reference.threads,
        train_steps: reference.train_steps,
        train_steps_per_s: reference.train_steps_per_s,
        forward_passes_per_s: reference.forward_passes_per_s,
        last_loss: reference.last_loss,
        peak_rss_mib: reference.peak_rss_mib,
        version: Some(reference.torch_version),
        rounds: 1,
        train_steps_per_s_rounds: Vec::new(),
    })
}

/// Trains the reference to `target` token accuracy (its `--to-accuracy` mode).
pub fn run_to_accuracy(
    python: &str,
    target: f64,
    max_steps: usize,
    threads: usize,
    device: TorchDevice,
    headlab_parameters: usize,
) -> anyhow::Result<ReferenceAccuracy> {
    let args = vec![
        "--device".to_string(),
        device.name().to_string(),
        "--to-accuracy".to_string(),
        target.to_string(),
        "--max-steps".to_string(),
        max_steps.to_string(),
        "--eval-every".to_string(),
        EVAL_EVERY.to_string(),
        "--eval-size".to_string(),
        EVAL_SIZE.to_string(),
        "--threads".to_string(),
        threads.to_string(),
        "--seed".to_string(),
        "0".to_string(),
    ];
    let reference: ReferenceAccuracy = parse_output(&run_script(python, &args)?)?;
    check_parameters(reference.parameters, headlab_parameters)?;
    Ok(reference)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::{Implementation, Size};
    use run::BackendKind;

    const GOOD: &str = r#"{"mode": "case", "size": "small", "batch_size": 64, "seq_len": 32, "parameters": 101386, "threads": 2, "train_steps": 57, "train_steps_per_s": 28.3, "train_tokens_per_s": 57958.4, "forward_passes": 197, "forward_passes_per_s": 98.1, "forward_tokens_per_s": 200908.8, "last_loss": 2.16, "peak_rss_mib": 744.4, "implementation": "pytorch", "torch_version": "2.15.0", "python_version": "3.11.7", "attention": "math"}"#;

    fn case() -> Case {
        Case {
            size: Size::Small,
            backend: BackendKind::Flex,
            implementation: Implementation::Pytorch,
            shards: 1,
            seeds: 1,
        }
    }

    #[test]
    fn the_references_json_becomes_a_case_result() {
        let stdout = format!("a warning on stdout\n{GOOD}\n\n");
        let reference: ReferenceCase = parse_output(&stdout).unwrap();
        let result = to_case_result(case(), reference, 101_386).unwrap();
        assert_eq!(result.case.implementation, Implementation::Pytorch);
        assert_eq!((result.batch_size, result.seq_len), (64, 32));
        assert_eq!(result.train_steps_per_s, 28.3);
        assert_eq!(result.forward_passes_per_s, 98.1);
        assert_eq!(result.peak_rss_mib, Some(744.4));
        assert_eq!(result.version.as_deref(), Some("2.15.0"));
        assert_eq!(result.threads, 2);
    }

    #[test]
    fn malformed_output_is_an_error_that_shows_it() {
        let error = parse_output::<ReferenceCase>("Traceback (most recent call last):\n  oops")
            .unwrap_err();
        let message = format!("{error:#}");
        assert!(
            message.contains("the PyTorch reference printed"),
            "{message}"
        );
        assert!(message.contains("oops"), "{message}");

        let error = parse_output::<ReferenceCase>("\n  \n").unwrap_err();
        assert!(
            format!("{error:#}").contains("printed nothing"),
            "{error:#}"
        );

        // Valid JSON without a field bench needs.
        let missing = GOOD.replace("\"train_steps_per_s\": 28.3, ", "");
        let error = parse_output::<ReferenceCase>(&missing).unwrap_err();
        assert!(
            format!("{error:#}").contains("train_steps_per_s"),
            "{error:#}"
        );
    }

    #[test]
    fn another_model_or_size_is_refused() {
        let reference: ReferenceCase = parse_output(GOOD).unwrap();
        let error = to_case_result(case(), reference.clone(), 101_387).unwrap_err();
        assert!(
            format!("{error}").contains("101386 parameters, headlab's encoder 101387"),
            "{error}"
        );
        let large = Case {
            size: Size::Large,
            ..case()
        };
        assert!(to_case_result(large, reference.clone(), 101_386).is_err());
        // A plain model's figures are not the figures of 16 vmapped seeds.
        let stacked = Case {
            seeds: 16,
            ..case()
        };
        let error = to_case_result(stacked, reference, 101_386).unwrap_err();
        assert!(
            format!("{error}").contains("trained 1 seeds, bench asked for 16"),
            "{error}"
        );
    }

    #[test]
    fn accuracy_output_parses() {
        let line = r#"{"mode": "to_accuracy", "target": 0.99, "reached": true, "steps": 740, "seconds": 21.5, "token_accuracy": 0.9912, "parameters": 103466, "threads": 2, "torch_version": "2.15.0"}"#;
        let accuracy: ReferenceAccuracy = parse_output(line).unwrap();
        assert!(accuracy.reached);
        assert_eq!((accuracy.steps, accuracy.seconds), (740, 21.5));
    }

    #[test]
    fn the_interpreter_comes_from_the_environment_variable() {
        assert_eq!(python_from(None), "python3");
        assert_eq!(python_from(Some("  ".into())), "python3");
        assert_eq!(
            python_from(Some("/opt/venv/bin/python".into())),
            "/opt/venv/bin/python"
        );
    }

    #[test]
    fn a_missing_interpreter_is_reported_not_fatal() {
        let reason = probe("/nonexistent/headlab-python", TorchDevice::Cpu).unwrap_err();
        assert!(reason.contains("cannot run it"), "{reason}");
        let message = unavailable_message("/nonexistent/headlab-python", &reason);
        assert!(message.contains("HEADLAB_PYTHON"), "{message}");
        assert!(message.contains("/nonexistent/headlab-python"), "{message}");
    }

    #[test]
    fn the_built_in_script_is_the_checkouts() {
        let path = script_path().unwrap();
        assert_eq!(std::fs::read_to_string(path).unwrap(), SCRIPT_SOURCE);
    }
}
