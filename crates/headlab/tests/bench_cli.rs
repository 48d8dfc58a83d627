//! The `bench` binary as a user runs it, on the smallest budget: one timed step per case.
//! None of these tests needs torch: the PyTorch reference is replaced by stand-in
//! interpreters (shell scripts) where one is needed.

use std::path::{Path, PathBuf};
use std::process::Command;

/// An interpreter that does not exist: the PyTorch reference is always skipped.
const NO_PYTHON: &str = "/nonexistent/headlab-test-python";

fn bench(args: &[&str]) -> std::process::Output {
    bench_with_python(args, NO_PYTHON)
}

fn bench_with_python(args: &[&str], python: &str) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_headlab"))
        .arg("bench")
        .args(args)
        .env("HEADLAB_PYTHON", python)
        .output()
        .expect("the bench binary runs")
}

/// Whether `python3` runs here (CI has it; torch it has not).
fn has_python3() -> bool {
    Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// An executable shell script `name` in `dir`.
#[cfg(unix)]
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

const SMALL: [&str; 10] = [
    "--sizes",
    "small",
    "--backends",
    "flex",
    "--seconds",
    "0",
    "--min-steps",
    "1",
    "--warmup",
    "0",
];

#[test]
fn one_row_times_both_implementations_and_writes_table_and_json() {
    let tmp = tempfile::tempdir().unwrap();
    let (md, json) = (tmp.path().join("table.md"), tmp.path().join("cases.json"));
    let mut args = SMALL.to_vec();
    args.extend([
        "--out",
        md.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    let output = bench(&args);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    // Without torch the default set leaves PyTorch out, says so once, and carries on.
    assert_eq!(
        stderr.matches("PyTorch reference skipped").count(),
        1,
        "{stderr}"
    );
    assert!(
        stderr.contains(NO_PYTHON) && stderr.contains("HEADLAB_PYTHON"),
        "{stderr}"
    );

    let table = std::fs::read_to_string(&md).unwrap();
    assert!(!table.contains("PyTorch"), "{table}");
    assert!(
        stdout.contains(&table),
        "the printed table is the written one"
    );
    let row = table
        .lines()
        .find(|line| line.starts_with("| small | flex |"))
        .expect("a small flex row");
    let cells: Vec<&str> = row.split('|').map(str::trim).collect();
    // Every figure is there: no dash for a failed or missing case.
    assert!(!cells[3..13].contains(&"-"), "{row}");
    assert!(table.contains("train.shards = 2"), "{table}");

    let results: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(results.len(), 2);
    let implementations: Vec<&str> = results
        .iter()
        .map(|r| r["case"]["implementation"].as_str().unwrap())
        .collect();
    assert_eq!(implementations, ["headlab", "burn"]);
    for result in &results {
        for key in ["train_steps_per_s", "forward_passes_per_s", "peak_rss_mib"] {
            let value = result[key].as_f64().unwrap_or(f64::NAN);
            assert!(
                value.is_finite() && value > 0.0,
                "{key} = {value} in {result}"
            );
        }
        assert!(result["last_loss"].as_f64().unwrap().is_finite());
        assert!(result["train_steps"].as_u64().unwrap() >= 1);
    }
    // The same sizes: Burn's encoder and ours have the same parameter count.
    assert_eq!(results[0]["parameters"], results[1]["parameters"]);
    assert_eq!(results[0]["case"]["shards"], 2);
    assert_eq!(results[1]["case"]["shards"], 1);
}

#[test]
fn bad_options_are_refused_with_a_message() {
    let output = bench(&["--shards", "0"]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.starts_with("error: --shards must be at least 1"),
        "{stderr}"
    );

    let output = bench(&["--sizes", "huge"]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("small") && stderr.contains("large"),
        "{stderr}"
    );
}

#[test]
fn more_bad_options_are_refused_with_a_message() {
    for (args, message) in [
        (&["--rounds", "0"][..], "error: --rounds must be at least 1"),
        (
            &["--to-accuracy", "1.5"][..],
            "error: --to-accuracy must be in (0, 1]",
        ),
        (
            &["--threads", "0"][..],
            "error: --threads must be at least 1",
        ),
    ] {
        let output = bench(args);
        assert!(!output.status.success(), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.starts_with(message), "{args:?}: {stderr}");
    }
}

#[test]
fn asking_for_pytorch_without_torch_fails_with_the_message() {
    let output = bench(&["--impl", "headlab,pytorch", "--sizes", "small"]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.starts_with("error: PyTorch reference skipped") && stderr.contains(NO_PYTHON),
        "{stderr}"
    );
    assert!(stderr.contains("HEADLAB_PYTHON="), "{stderr}");
    // Nothing ran: the check comes before the cases.
    assert!(!stderr.contains("small flex headlab"), "{stderr}");
}

/// A real python3 whose `import torch` fails (a `torch` module that raises ImportError comes
/// first on its path): the default set skips PyTorch, `--impl pytorch` fails.
#[cfg(unix)]
#[test]
fn a_python_without_torch_is_skipped_or_refused() {
    if !has_python3() {
        eprintln!("no python3 here: skipped");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("torch.py"),
        "raise ImportError('No module named torch (test stand-in)')\n",
    )
    .unwrap();
    let python = script(
        tmp.path(),
        "python-without-torch",
        &format!("PYTHONPATH={} exec python3 \"$@\"\n", tmp.path().display()),
    );
    let python = python.to_str().unwrap();

    let output = bench_with_python(&["--impl", "pytorch", "--sizes", "small"], python);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("cannot import torch") && stderr.contains("test stand-in"),
        "{stderr}"
    );

    let output = bench_with_python(&SMALL, python);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("PyTorch reference skipped"), "{stderr}");
    assert!(!String::from_utf8_lossy(&output.stdout).contains("PyTorch"));
}

/// The whole PyTorch path with a stand-in interpreter that answers as the reference does
/// (torch is not needed): the column appears, rounds are interleaved, figures are medians.
#[cfg(unix)]
#[test]
fn a_reference_that_answers_adds_the_pytorch_column() {
    let tmp = tempfile::tempdir().unwrap();
    let calls = tmp.path().join("calls");
    // 101386: headlab's small model (the reference must match it).
    let answer = r#"{"size": "small", "batch_size": 64, "seq_len": 32, "parameters": 101386, "threads": 3, "train_steps": 7, "train_steps_per_s": 50.0, "forward_passes_per_s": 200.0, "last_loss": 2.0, "peak_rss_mib": 300.0, "torch_version": "9.9.9-test"}"#;
    let python = script(
        tmp.path(),
        "fake-python",
        &format!(
            "echo \"$@\" >> {calls}\n\
             if [ \"$1\" = -c ]; then echo 9.9.9-test; exit 0; fi\n\
             echo 'a line before the JSON'\n\
             echo '{answer}'\n",
            calls = calls.display()
        ),
    );
    let json = tmp.path().join("cases.json");
    let mut args = SMALL.to_vec();
    args.extend([
        "--impl",
        "headlab,pytorch",
        "--rounds",
        "2",
        "--threads",
        "3",
        "--json",
        json.to_str().unwrap(),
    ]);
    let output = bench_with_python(&args, python.to_str().unwrap());
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");

    // Interleaved: headlab, pytorch, then again.
    let order: Vec<&str> = stderr
        .lines()
        .filter_map(|l| l.strip_prefix("round "))
        .collect();
    assert_eq!(order.len(), 4, "{stderr}");
    assert!(order[0].starts_with("1/2: small flex headlab"), "{stderr}");
    assert!(order[1].starts_with("1/2: small cpu pytorch"), "{stderr}");
    assert!(order[2].starts_with("2/2: small flex headlab"), "{stderr}");

    let header = stdout.lines().find(|l| l.starts_with("| size")).unwrap();
    assert!(
        header.contains("| train steps/s PyTorch | headlab/PyTorch |"),
        "{header}"
    );
    let row = stdout
        .lines()
        .find(|l| l.starts_with("| small | flex |"))
        .expect("a small flex row");
    let cells: Vec<&str> = row.split('|').map(str::trim).collect();
    assert_eq!(cells[6], "50.0", "{row}");
    assert!(cells[7].ends_with('x'), "{row}");
    assert!(stdout.contains("PyTorch 9.9.9-test"), "{stdout}");
    assert!(stdout.contains("medians over 2 rounds"), "{stdout}");

    // The reference got the case's size, threads and budget.
    let calls = std::fs::read_to_string(&calls).unwrap();
    let run = calls.lines().find(|l| l.contains("reference.py")).unwrap();
    for expected in [
        "--size small",
        "--threads 3",
        "--seconds 0",
        "--min-steps 1",
    ] {
        assert!(run.contains(expected), "{run}");
    }

    let results: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(results.len(), 2);
    assert_eq!(results[1]["case"]["implementation"], "pytorch");
    assert_eq!(results[1]["rounds"], 2);
    assert_eq!(results[1]["version"], "9.9.9-test");
    assert_eq!(results[0]["parameters"], results[1]["parameters"]);
}

/// A reference whose model is not headlab's (another parameter count) fails its case.
#[cfg(unix)]
#[test]
fn a_reference_of_another_model_fails_its_case() {
    let tmp = tempfile::tempdir().unwrap();
    let answer = r#"{"size": "small", "batch_size": 64, "seq_len": 32, "parameters": 5, "threads": 2, "train_steps": 7, "train_steps_per_s": 50.0, "forward_passes_per_s": 200.0, "last_loss": 2.0, "peak_rss_mib": 300.0, "torch_version": "9.9.9-test"}"#;
    let python = script(
        tmp.path(),
        "fake-python",
        &format!("if [ \"$1\" = -c ]; then echo 9.9.9-test; exit 0; fi\necho '{answer}'\n"),
    );
    let mut args = SMALL.to_vec();
    args.extend(["--impl", "pytorch"]);
    let output = bench_with_python(&args, python.to_str().unwrap());
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("the PyTorch reference has 5 parameters, headlab's encoder 101386"),
        "{stderr}"
    );
}

#[test]
fn the_reference_script_shows_its_help_without_torch() {
    if !has_python3() {
        eprintln!("no python3 here: skipped");
        return;
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../bench/python/reference.py");
    let output = Command::new("python3")
        .args([script, "--help"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    for option in [
        "--size",
        "--threads",
        "--seconds",
        "--min-steps",
        "--warmup",
        "--seed",
        "--to-accuracy",
    ] {
        assert!(stdout.contains(option), "{option} missing from {stdout}");
    }
    // A bad option is refused by argparse before torch is imported.
    let output = Command::new("python3")
        .args([script, "--size", "huge"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("invalid choice"));
}

/// `--profile` (issue 68's per-step account): a row per case with every phase's
/// milliseconds and share, the synchronised step the phases' sum, the plain step beside it;
/// the JSON has the same figures. Not with `--to-accuracy`.
#[test]
fn profile_accounts_for_a_step_phase_by_phase() {
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("profile.json");
    let mut args = SMALL.to_vec();
    args.extend([
        "--profile",
        "--seeds",
        "1,2",
        "--json",
        json.to_str().unwrap(),
    ]);
    let output = bench(&args);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains(
            "| case | draw (host) | upload | forward | backward | optimizer | read the loss | \
             synced step | plain step |"
        ),
        "{stdout}"
    );
    assert!(stdout.contains("| small on flex |"), "{stdout}");
    assert!(stdout.contains("| small on flex x2 seeds |"), "{stdout}");
    let profiles: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(profiles.len(), 2);
    for profile in &profiles {
        let phases: Vec<f64> = (profile["phases_ms"].as_array().unwrap().iter())
            .map(|p| p.as_f64().unwrap())
            .collect();
        assert_eq!(phases.len(), 6);
        let synced = profile["synced_step_ms"].as_f64().unwrap();
        assert!(
            (phases.iter().sum::<f64>() - synced).abs() < 1e-6,
            "{profile}"
        );
        assert!(profile["plain_step_ms"].as_f64().unwrap() > 0.0);
    }
    let refused = bench(&["--profile", "--to-accuracy", "0.9"]);
    assert_eq!(refused.status.code(), Some(2));
}

/// `--seeds`: headlab's seed stack at each seed count beside one model, seed-steps per
/// second in the table, Burn's encoder left out (it has no seed stack).
#[test]
fn seeds_time_the_seed_stack_against_one_model() {
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("cases.json");
    let mut args = SMALL.to_vec();
    args.extend(["--seeds", "1,3", "--json", json.to_str().unwrap()]);
    let output = bench(&args);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("| size | backend | implementation | S | seed-steps/s"),
        "{stdout}"
    );
    let rows: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("| small | flex | headlab |"))
        .collect();
    assert_eq!(rows.len(), 2, "{stdout}");
    assert!(
        rows[0].contains("| 1 |") && rows[0].contains("1.00x"),
        "{}",
        rows[0]
    );
    assert!(rows[1].contains("| 3 |"), "{}", rows[1]);
    let results: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let seeds: Vec<u64> = results
        .iter()
        .map(|r| r["case"]["seeds"].as_u64().unwrap())
        .collect();
    assert_eq!(seeds, [1, 3]);
    for result in &results {
        assert_eq!(result["case"]["implementation"], "headlab");
        assert!(result["last_loss"].as_f64().unwrap().is_finite());
        assert!(result["train_steps_per_s"].as_f64().unwrap() > 0.0);
    }
    // Per model, the stack has the single model's parameters.
    assert_eq!(results[0]["parameters"], results[1]["parameters"]);
}

#[test]
fn bad_seed_counts_are_refused() {
    for seeds in ["0", "1,2000"] {
        let output = bench(&["--seeds", seeds]);
        assert!(!output.status.success(), "{seeds}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.starts_with("error: --seeds takes seed counts from 1 to 1024"),
            "{seeds}: {stderr}"
        );
    }
}
