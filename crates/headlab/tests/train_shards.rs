//! `train.shards` as a user sets it: the numbers of a sharded run do not depend on the
//! thread count, stay close to the unsharded run's, and a bad value is refused.

use std::path::Path;
use std::process::Output;

#[path = "common/train.rs"]
mod common;
use common::{TINY, train_cmd};

fn train(out: &Path, args: &[&str]) -> Output {
    train_cmd(&[TINY, "--out"])
        .arg(out)
        .args(args)
        .output()
        .expect("the train binary runs")
}

/// `(step, loss, eval_loss)` of every line of the run's metrics.jsonl.
fn losses(dir: &Path) -> Vec<(u64, f64, Option<f64>)> {
    std::fs::read_to_string(dir.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|line| {
            let record: serde_json::Value = serde_json::from_str(line).unwrap();
            (
                record["step"].as_u64().unwrap(),
                record["loss"].as_f64().unwrap(),
                record["eval_loss"].as_f64(),
            )
        })
        .collect()
}

fn sharded_run(
    tmp: &tempfile::TempDir,
    shards: usize,
    threads: usize,
    dropout: f64,
) -> Vec<(u64, f64, Option<f64>)> {
    let out = tmp.path().join(format!("s{shards}-t{threads}-d{dropout}"));
    let output = train(
        &out,
        &[
            "--set",
            &format!("train.shards={shards}"),
            "--set",
            &format!("train.threads={threads}"),
            "--set",
            &format!("model.dropout={dropout}"),
            "--set",
            "train.log_every=1",
        ],
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    losses(&out)
}

#[test]
fn sharded_runs_repeat_on_any_thread_count() {
    let tmp = tempfile::tempdir().unwrap();
    // Without dropout the shards run at the same time; with it they take turns. Either way
    // the numbers are the same bit for bit on one thread and on two. Three shards: with
    // two, any order of adding the shards' gradients gives the same sum.
    for dropout in [0.0, 0.1] {
        let one_thread = sharded_run(&tmp, 3, 1, dropout);
        let two_threads = sharded_run(&tmp, 3, 2, dropout);
        assert_eq!(one_thread, two_threads, "dropout {dropout}");
    }
}

#[test]
fn sharded_runs_track_the_whole_batch() {
    let tmp = tempfile::tempdir().unwrap();
    let whole = sharded_run(&tmp, 1, 2, 0.0);
    let sharded = sharded_run(&tmp, 3, 2, 0.0);
    assert_eq!(whole.len(), sharded.len());
    // The first step starts from the same weights: only float rounding differs.
    let (first_whole, first_sharded) = (whole[0].1, sharded[0].1);
    assert!(
        (first_whole - first_sharded).abs() < 1e-5,
        "{first_whole} vs {first_sharded}"
    );
    // Afterwards the rounding may grow, but the runs learn alike.
    let (last_whole, last_sharded) = (whole.last().unwrap().1, sharded.last().unwrap().1);
    assert!(
        (last_whole - last_sharded).abs() < 0.05 * last_whole.abs().max(1.0),
        "{last_whole} vs {last_sharded}"
    );
}

#[test]
fn more_shards_than_sequences_are_refused_by_name() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("run");
    let output = train(&out, &["--set", "train.shards=100000"]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(stderr.contains("train.shards = 100000"), "{stderr}");
    assert!(stderr.contains("at most train.batch_size"), "{stderr}");
    assert!(!out.exists(), "no run directory for a refused config");
}
