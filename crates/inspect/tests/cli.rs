//! The `inspect` binary on real (tiny) trained runs: every report file, patterns that can
//! be recomputed from the dumped weights and activations, and clear errors for runs that
//! cannot be inspected.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use train::tensor_file::read_tensors;
use train::{Progress, RunConfig, TrainOptions};

const TINY: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../train/tests/fixtures/tiny.toml"
);

/// Trains the tiny config (with `overrides`) into `dir` through the library.
fn train_tiny(dir: &Path, overrides: &[&str]) {
    let overrides: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    let run = RunConfig::load(Path::new(TINY), &overrides)
        .unwrap()
        .resolve(Path::new(TINY))
        .unwrap();
    let options = TrainOptions {
        run_dir: dir.to_path_buf(),
        resume: false,
        force: false,
        progress: Progress::Quiet,
        stop: Arc::new(AtomicBool::new(false)),
        stop_at_step: None,
    };
    train::train(&run, &options).unwrap();
}

fn inspect(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_inspect"))
        .args(args)
        .output()
        .expect("the inspect binary runs")
}

fn inspect_fails(args: &[&str]) -> String {
    let output = inspect(args);
    let err = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(!output.status.success(), "expected failure for {args:?}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(err.starts_with("error: "), "{err}");
    err
}

#[test]
fn a_trained_run_gets_every_report_file() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run");
    train_tiny(&run, &[]);
    let output = inspect(&[run.to_str().unwrap(), "--probe", "8"]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("layer head  role"), "{stdout}");

    let report = run.join("inspect");
    let heads: Vec<serde_json::Value> =
        serde_json::from_slice(&std::fs::read(report.join("heads.json")).unwrap()).unwrap();
    assert_eq!(heads.len(), 2, "one layer of two heads");
    for key in [
        "layer",
        "head",
        "entropy",
        "confidence",
        "mean_distance",
        "pattern_scores",
        "ablation_drop",
        "role",
    ] {
        assert!(heads[1].get(key).is_some(), "{key} missing");
    }
    let scores = &heads[0]["pattern_scores"];
    for pattern in [
        "previous_token",
        "next_token",
        "self",
        "anti_diagonal",
        "same_token",
    ] {
        let score = scores[pattern].as_f64().unwrap();
        assert!((0.0..=1.0 + 1e-9).contains(&score), "{pattern}: {score}");
    }

    let weights = read_tensors(&report.join("weights.safetensors")).unwrap();
    assert_eq!(weights["layers.0.heads.1.qk"].shape, [16, 16]);
    assert_eq!(weights["layers.0.heads.1.ov"].shape, [16, 16]);
    assert_eq!(weights["layers.0.heads.0.v_bias"].shape, [8]);
    let activations = read_tensors(&report.join("activations.safetensors")).unwrap();
    assert_eq!(activations["tokens"].shape, [8, 6]);
    assert_eq!(activations["layers.0.pattern"].shape, [8, 2, 6, 6]);
    assert_eq!(activations["layers.0.head_out"].shape, [8, 6, 2, 8]);
    assert_eq!(activations["layers.0.attn_input"].shape, [8, 6, 16]);

    // A checkpoint can be inspected too, into another directory.
    let other = tmp.path().join("at-10");
    let output = inspect(&[
        run.to_str().unwrap(),
        "--checkpoint",
        "step-10",
        "--out",
        other.to_str().unwrap(),
    ]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(other.join("heads.json").is_file());
}

/// softmax((x q + q_bias)(x k + k_bias)^T / sqrt(d_head)) for sequence 0 of layer 0, head h.
fn recomputed_pattern(report: &Path, head: usize) -> (Vec<f32>, Vec<f32>) {
    let weights = read_tensors(&report.join("weights.safetensors")).unwrap();
    let activations = read_tensors(&report.join("activations.safetensors")).unwrap();
    let x = &activations["layers.0.attn_input"]; // [batch, seq, d_model]
    let pattern = &activations["layers.0.pattern"]; // [batch, heads, seq, seq]
    let (seq, d_model) = (x.shape[1], x.shape[2]);
    let n_heads = pattern.shape[1];
    let name = |part: &str| format!("layers.0.heads.{head}.{part}");
    let (q, k) = (&weights[&name("q")], &weights[&name("k")]);
    let (qb, kb) = (&weights[&name("q_bias")], &weights[&name("k_bias")]);
    let d_head = q.shape[1];
    let project = |w: &[f32], b: &[f32], i: usize| -> Vec<f32> {
        (0..d_head)
            .map(|c| {
                b[c] + (0..d_model)
                    .map(|r| x.values[i * d_model + r] * w[r * d_head + c])
                    .sum::<f32>()
            })
            .collect()
    };
    let mut expected = vec![];
    for i in 0..seq {
        let qi = project(&q.values, &qb.values, i);
        let scores: Vec<f32> = (0..seq)
            .map(|j| {
                let kj = project(&k.values, &kb.values, j);
                qi.iter().zip(&kj).map(|(a, b)| a * b).sum::<f32>() / (d_head as f32).sqrt()
            })
            .collect();
        let max = scores.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
        let total: f32 = scores.iter().map(|s| (s - max).exp()).sum();
        expected.extend(scores.iter().map(|s| (s - max).exp() / total));
    }
    let start = head * seq * seq; // batch item 0
    let dumped = pattern.values[start..start + seq * seq].to_vec();
    assert_eq!(n_heads, 2);
    (expected, dumped)
}

#[test]
fn patterns_recompute_from_the_dumped_weights_in_every_layout() {
    for layout in ["split", "wide", "narrow"] {
        let tmp = tempfile::tempdir().unwrap();
        let run = tmp.path().join(layout);
        let set = format!("model.head_layout={layout}");
        train_tiny(&run, &[&set, "train.steps=5", "train.eval_every=5"]);
        let output = inspect(&[run.to_str().unwrap(), "--probe", "4"]);
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        for head in 0..2 {
            let (expected, dumped) = recomputed_pattern(&run.join("inspect"), head);
            let diff = expected
                .iter()
                .zip(&dumped)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f32::max);
            assert!(diff < 1e-5, "{layout} head {head}: differs by {diff}");
        }
    }
}

#[test]
fn runs_that_cannot_be_inspected_get_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let missing: PathBuf = tmp.path().join("nope");
    let err = inspect_fails(&[missing.to_str().unwrap()]);
    assert!(err.contains("not a headlab run directory"), "{err}");

    let run = tmp.path().join("run");
    train_tiny(&run, &["train.steps=10"]);
    let err = inspect_fails(&[run.to_str().unwrap(), "--checkpoint", "step-7"]);
    assert!(
        err.contains("does not exist") && err.contains("step-10"),
        "{err}"
    );

    let weights = run.join("model.safetensors");
    let bytes = std::fs::read(&weights).unwrap();
    std::fs::write(&weights, &bytes[..bytes.len() / 2]).unwrap();
    let err = inspect_fails(&[run.to_str().unwrap()]);
    assert!(
        err.contains("cannot load weights") && err.contains("model.safetensors"),
        "{err}"
    );

    std::fs::remove_file(&weights).unwrap();
    let err = inspect_fails(&[run.to_str().unwrap()]);
    assert!(
        err.contains("has not finished") && err.contains("--checkpoint"),
        "{err}"
    );
}
