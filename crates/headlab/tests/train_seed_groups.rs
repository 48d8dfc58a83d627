//! `train --seeds`: seeds trained together as one batched model write the runs that each
//! seed trained alone writes, within float rounding: every metrics line (loss, evaluation),
//! every snapshot and the final weights, with dropout on and off, in each head layout, with
//! symmetric init, on flex and ndarray, for seeds that stop early at their target, and for a
//! group killed with SIGKILL and resumed.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[path = "common/train.rs"]
mod common;
use common::{TINY, checkpoints, run_train, train_cmd};

/// Relative tolerance of every comparison: float rounding of batched against single ops,
/// carried through 50 steps.
const TOLERANCE: f64 = 1e-5;

fn sets(extra: &[&str]) -> Vec<String> {
    [
        "train.steps=50",
        "train.eval_every=10",
        "train.snapshot_every=25",
    ]
    .iter()
    .chain(extra)
    .flat_map(|set| ["--set".to_string(), set.to_string()])
    .collect()
}

/// `train` arguments for `seeds` (e.g. `3-5`) trained as a group into `out-s<seed>`.
fn group_args(seeds: &str, out: &Path, extra: &[&str]) -> Vec<String> {
    let mut args = vec![
        TINY.to_string(),
        "--quiet".into(),
        "--seeds".into(),
        seeds.into(),
        "--out".into(),
        out.display().to_string(),
    ];
    args.extend(sets(extra));
    args
}

/// `train` arguments for `seed` trained alone into `dir`.
fn alone_args(seed: u64, dir: &Path, extra: &[&str]) -> Vec<String> {
    let mut args = vec![
        TINY.to_string(),
        "--quiet".into(),
        "--set".into(),
        format!("seed={seed}"),
        "--out".into(),
        dir.display().to_string(),
    ];
    args.extend(sets(extra));
    args
}

fn assert_success(output: &std::process::Output) {
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Trains `seeds` as a group into `root/group-s<seed>` and each alone into
/// `root/alone-s<seed>`.
fn train_both(root: &Path, seeds: &[u64], extra: &[&str]) {
    std::fs::create_dir_all(root).unwrap();
    let list: Vec<String> = seeds.iter().map(u64::to_string).collect();
    assert_success(&run_train(&group_args(
        &list.join(","),
        &root.join("group"),
        extra,
    )));
    for &seed in seeds {
        let dir = root.join(format!("alone-s{seed}"));
        assert_success(&run_train(&alone_args(seed, &dir, extra)));
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= TOLERANCE * b.abs().max(1.0)
}

/// The numbers of every metrics line: step, loss, learning rate and evaluation.
fn metrics(dir: &Path) -> Vec<Vec<(String, f64)>> {
    std::fs::read_to_string(dir.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|line| {
            let value: serde_json::Value = serde_json::from_str(line).unwrap();
            [
                "step",
                "loss",
                "lr",
                "eval_loss",
                "eval_token_acc",
                "eval_seq_acc",
            ]
            .iter()
            .filter_map(|key| Some((key.to_string(), value.get(*key)?.as_f64()?)))
            .collect()
        })
        .collect()
}

/// Every tensor of a safetensors file as f32 values, sorted by name.
fn tensors(path: &Path) -> Vec<(String, Vec<f32>)> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let file = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let mut tensors: Vec<(String, Vec<f32>)> = file
        .tensors()
        .into_iter()
        .filter(|(_, view)| view.dtype() == safetensors::Dtype::F32)
        .map(|(name, view)| {
            let values = view
                .data()
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect();
            (name, values)
        })
        .collect();
    tensors.sort_by(|a, b| a.0.cmp(&b.0));
    tensors
}

fn assert_tensors_close(got: &Path, want: &Path) {
    let (got_tensors, want_tensors) = (tensors(got), tensors(want));
    assert_eq!(got_tensors.len(), want_tensors.len(), "{}", got.display());
    assert!(!want_tensors.is_empty());
    for ((name, a), (other, b)) in got_tensors.iter().zip(&want_tensors) {
        assert_eq!(name, other);
        let scale = b.iter().fold(1e-6f32, |m, v| m.max(v.abs())) as f64;
        for (x, y) in a.iter().zip(b) {
            assert!(
                ((x - y).abs() as f64) <= TOLERANCE * scale,
                "{name} in {}: {x} vs {y}",
                got.display()
            );
        }
    }
}

/// The group's run of `seed` equals its run alone: metrics, snapshots, final weights.
fn assert_same_run(group: &Path, alone: &Path) {
    let (got, want) = (metrics(group), metrics(alone));
    assert_eq!(
        got.len(),
        want.len(),
        "metrics lines of {}",
        group.display()
    );
    for (a, b) in got.iter().zip(&want) {
        assert_eq!(
            a.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            b.iter().map(|(k, _)| k).collect::<Vec<_>>()
        );
        for ((key, x), (_, y)) in a.iter().zip(b) {
            assert!(close(*x, *y), "{key} in {}: {x} vs {y}", group.display());
        }
    }
    let snapshots = |dir: &Path| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir.join("snapshots"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    let names = snapshots(alone);
    assert_eq!(snapshots(group), names, "snapshots of {}", group.display());
    for name in names {
        assert_tensors_close(
            &group.join("snapshots").join(&name),
            &alone.join("snapshots").join(&name),
        );
    }
    assert_tensors_close(
        &group.join("model.safetensors"),
        &alone.join("model.safetensors"),
    );
    let config = |dir: &Path| std::fs::read_to_string(dir.join("config.toml")).unwrap();
    assert_eq!(
        config(group),
        config(alone),
        "config.toml of {}",
        group.display()
    );
}

fn check(name: &str, seeds: &[u64], extra: &[&str]) {
    let root = tempfile::tempdir().unwrap();
    train_both(root.path(), seeds, extra);
    for seed in seeds {
        assert_same_run(
            &root.path().join(format!("group-s{seed}")),
            &root.path().join(format!("alone-s{seed}")),
        );
    }
    eprintln!("{name}: {} seeds equal", seeds.len());
}

#[test]
fn two_seeds_with_dropout_split_layout() {
    check("split, dropout", &[3, 4], &[]);
}

#[test]
fn five_seeds_without_dropout_narrow_symmetric() {
    check(
        "narrow, symmetric, no dropout",
        &[0, 1, 2, 3, 4],
        &[
            "model.dropout=0.0",
            "model.head_layout=\"narrow\"",
            "model.init=\"symmetric\"",
        ],
    );
}

#[test]
fn five_seeds_wide_layout_two_shards_post_norm_rotary() {
    check(
        "wide, post-norm, rotary, two shards",
        &[7, 8, 9, 10, 11],
        &[
            "model.head_layout=\"wide\"",
            "model.norm=\"post\"",
            "model.positional=\"rotary\"",
            "train.shards=2",
        ],
    );
}

/// ModernBERT's block options, which the stack carries through the encoder's own block
/// arithmetic, with dropout (a gated feed-forward's hidden mask is drawn after the gate).
#[test]
fn two_seeds_with_modernberts_block_options_and_dropout() {
    check(
        "gated tanh GELU, no biases, local attention, first block unnormed, epsilon",
        &[5, 6],
        &[
            "model.positional=\"rotary\"",
            "model.local_attention={window=4, global_every=2}",
            "model.gated_feed_forward=true",
            "model.activation=\"gelu_tanh\"",
            "model.biases=false",
            "model.first_attention_norm=false",
            "model.norm_epsilon=1e-6",
        ],
    );
}

/// A text task's group, whose output layer goes to each seed's masked positions only
/// (`SeedStack::forward_at`), trains what each seed trains alone.
#[test]
fn two_text_seeds_with_the_output_layer_at_their_masked_positions() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = tmp.path().join("corpus.jsonl");
    common::write_text_corpus(&corpus);
    let corpus = format!("task.corpus=\"{}\"", corpus.display());
    check(
        "text, masked positions",
        &[0, 1],
        &[
            "task.kind=\"text\"",
            &corpus,
            "task.vocab_size=120",
            "task.seq_len=12",
        ],
    );
}

#[test]
fn two_seeds_on_ndarray_with_dropout() {
    check("ndarray, dropout", &[3, 4], &["backend=\"ndarray\""]);
}

#[test]
fn five_seeds_on_ndarray_without_dropout() {
    check(
        "ndarray, no dropout",
        &[0, 1, 2, 3, 4],
        &["backend=\"ndarray\"", "model.dropout=0.0"],
    );
}

/// Seeds that reach the target leave the group at their own step and write the run they
/// write alone; the others go on.
#[test]
fn seeds_that_reach_the_target_stop_alone() {
    let extra = ["train.target_accuracy=0.28", "train.eval_every=5"];
    let seeds = [0, 1, 2, 3, 4];
    let root = tempfile::tempdir().unwrap();
    train_both(root.path(), &seeds, &extra);
    let mut last_steps = Vec::new();
    for seed in seeds {
        let group = root.path().join(format!("group-s{seed}"));
        assert_same_run(&group, &root.path().join(format!("alone-s{seed}")));
        let lines = metrics(&group);
        last_steps.push(lines.last().unwrap()[0].1 as usize);
    }
    last_steps.sort();
    last_steps.dedup();
    assert!(
        last_steps.len() > 1 && last_steps[0] < 50,
        "the test needs seeds that stop at different steps, some early: {last_steps:?}"
    );

    // Issue 66, item 1: resumed with --no-target, the group trains every seed that stopped
    // at its target on to train.steps, each as it would alone.
    let mut group = group_args("0-4", &root.path().join("group"), &extra);
    group.extend(["--resume".into(), "--no-target".into()]);
    assert_success(&run_train(&group));
    for seed in seeds {
        let alone = root.path().join(format!("alone-s{seed}"));
        let mut args = alone_args(seed, &alone, &extra);
        args.extend(["--resume".into(), "--no-target".into()]);
        assert_success(&run_train(&args));
        let group = root.path().join(format!("group-s{seed}"));
        assert_same_run(&group, &alone);
        assert_eq!(
            metrics(&group).last().unwrap()[0].1,
            50.0,
            "seed {seed}: train.steps"
        );
    }
}

/// SIGKILL in the middle of a group, then `--resume`: each seed's run is the one an
/// uninterrupted run alone writes.
#[test]
fn killed_group_resumes_to_each_seeds_own_run() {
    let seeds = [5u64, 6, 7];
    let extra = [
        "train.steps=200",
        "train.checkpoint_every=3",
        "train.keep_checkpoints=2",
        "train.snapshot_every=50",
        "model.d_model=64",
        "model.d_ff=256",
    ];
    let root = tempfile::tempdir().unwrap();
    let group = root.path().join("group");
    let group_args = |resume: bool| {
        let mut args = group_args("5-7", &group, &extra);
        if resume {
            args.push("--resume".into());
        }
        args
    };
    // Kill once every seed has a checkpoint, then again after the first resume.
    let seed_dirs: Vec<PathBuf> = seeds
        .iter()
        .map(|s| root.path().join(format!("group-s{s}")))
        .collect();
    for round in 0..2 {
        let mut child = train_cmd(&group_args(round > 0)).spawn().unwrap();
        let started = Instant::now();
        let wanted = if round == 0 { 1 } else { 2 };
        loop {
            let ready = seed_dirs.iter().all(|d| {
                checkpoints(d)
                    .first()
                    .is_some_and(|(step, _)| *step >= 30 * wanted)
            });
            if ready || started.elapsed() > Duration::from_secs(60) {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        child.kill().unwrap();
        let status = child.wait().unwrap();
        assert!(
            !status.success(),
            "round {round}: the group ended before the kill"
        );
    }
    assert_success(&run_train(&group_args(true)));
    for (&seed, dir) in seeds.iter().zip(&seed_dirs) {
        let alone = root.path().join(format!("alone-s{seed}"));
        assert_success(&run_train(&alone_args(seed, &alone, &extra)));
        assert_same_run(dir, &alone);
    }
}

/// Bad `--seeds` values are refused with a message that says what is accepted.
#[test]
fn bad_seed_lists_are_refused() {
    for (list, says) in [
        ("1,x", "`x` is not a seed"),
        ("5-2", "runs backwards"),
        ("1,1", "seed 1 is given twice"),
        ("0-5000", "at most 1024"),
    ] {
        let output = run_train(&[TINY, "--seeds", list, "--out", "/nonexistent/x"]);
        assert_eq!(output.status.code(), Some(2), "{list}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(says), "{list}: {stderr}");
    }
}

/// BERT's embedding and output options, which the seed stack does not implement, are refused
/// by their key before any run directory is made; one seed alone trains with them.
#[test]
fn bert_options_are_refused_in_a_group_by_key() {
    let root = tempfile::tempdir().unwrap();
    for set in [
        "model.token_types=2",
        "model.embedding_norm=true",
        "model.final_norm=false",
        "model.embedding_size=4",
    ] {
        let out = root.path().join("group");
        let output = run_train(&[
            TINY,
            "--seeds",
            "0-1",
            "--out",
            out.to_str().unwrap(),
            "--set",
            set,
        ]);
        assert_eq!(output.status.code(), Some(1), "{set}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        let key = set.split('=').next().unwrap();
        assert!(
            stderr.contains(&format!("{key} is set: a seed group")),
            "{set}: {stderr}"
        );
        assert!(
            !root.path().join("group-s0").exists(),
            "{set}: a run was made"
        );
    }
    let alone = root.path().join("alone");
    let output = run_train(&[
        TINY,
        "--out",
        alone.to_str().unwrap(),
        "--set",
        "model.token_types=2",
        "--set",
        "model.final_norm=false",
    ]);
    assert_success(&output);
    // A ModernBERT-shaped toy: rotary positions of its own base, a local layer, GeGLU, no
    // biases, the first attention unnormed.
    let modern = root.path().join("modern");
    let output = run_train(&[
        TINY,
        "--out",
        modern.to_str().unwrap(),
        "--set",
        "model.positional=\"rotary\"",
        "--set",
        "model.rotary_theta=160000.0",
        "--set",
        "model.local_attention={window=4, global_every=2}",
        "--set",
        "model.gated_feed_forward=true",
        "--set",
        "model.biases=false",
        "--set",
        "model.first_attention_norm=false",
    ]);
    assert_success(&output);
    let config = std::fs::read_to_string(modern.join("config.toml")).unwrap();
    assert!(
        config.contains("[model.local_attention]\nwindow = 4"),
        "{config}"
    );
}

/// A masked LM's prediction transform (dense, GELU, norm before the output layer) is
/// trained in a seed group as in runs alone: what a text model exports with its head.
#[test]
fn a_group_with_the_prediction_transform_equals_runs_alone() {
    check(
        "output transform",
        &[3, 4],
        &["model.output_transform=true"],
    );
}

/// A group paused with `--stop-at` leaves each seed a checkpoint that a run of that seed
/// alone resumes (model and AdamW state cut from the stack) to the run it writes unpaused.
#[test]
fn each_seeds_checkpoint_resumes_alone() {
    let seeds = [3u64, 4, 5];
    let root = tempfile::tempdir().unwrap();
    let mut args = group_args("3-5", &root.path().join("group"), &[]);
    args.extend(["--stop-at".into(), "23".into()]);
    assert_success(&run_train(&args));
    for seed in seeds {
        let dir = root.path().join(format!("group-s{seed}"));
        assert_eq!(checkpoints(&dir).first().map(|c| c.0), Some(23));
        let mut args = alone_args(seed, &dir, &[]);
        args.push("--resume".into());
        assert_success(&run_train(&args));
    }
    train_both(&root.path().join("reference"), &seeds, &[]);
    for seed in seeds {
        assert_same_run(
            &root.path().join(format!("group-s{seed}")),
            &root.path().join(format!("reference/alone-s{seed}")),
        );
    }
}
