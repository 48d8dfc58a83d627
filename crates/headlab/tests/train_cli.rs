//! The `train` binary as a user runs it: a tiny config end to end, the run directory it
//! writes, exact resume, refusal to overwrite, clear errors for bad input, Ctrl-C, NaN,
//! and the wgpu backend.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

#[path = "common/train.rs"]
mod common;
use common::{TINY, final_tensors, run_train, train_cmd};

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Runs `train` expecting failure; returns stderr after checking it is one clean message.
fn train_fails(args: &[&str]) -> String {
    let output = run_train(args);
    let err = stderr(&output);
    assert!(!output.status.success(), "expected failure for {args:?}");
    assert!(!err.contains("panicked"), "panic for {args:?}: {err}");
    assert!(
        err.starts_with("error: "),
        "unclear message for {args:?}: {err}"
    );
    err
}

fn out_dir(tmp: &tempfile::TempDir, name: &str) -> PathBuf {
    tmp.path().join(name)
}

fn metrics(dir: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(dir.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn a_tiny_run_writes_the_whole_run_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = out_dir(&tmp, "run");
    let output = run_train(&[TINY, "--out", dir.to_str().unwrap()]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(String::from_utf8_lossy(&output.stdout).contains("finished at step 20"));

    let config = std::fs::read_to_string(dir.join("config.toml")).unwrap();
    assert!(config.contains("name = \"tiny\"") && config.contains("d_model = 16"));
    assert!(
        config.contains("weight_decay"),
        "defaults are written out:\n{config}"
    );

    let records = metrics(&dir);
    let steps: Vec<u64> = records
        .iter()
        .map(|r| r["step"].as_u64().unwrap())
        .collect();
    assert_eq!(steps, [5, 10, 15, 20]);
    for record in &records {
        for key in ["step", "loss", "lr", "tokens_per_s"] {
            assert!(record.get(key).is_some(), "{key} missing in {record}");
        }
    }
    for eval_step in [1, 3] {
        for key in ["eval_loss", "eval_token_acc", "eval_seq_acc"] {
            assert!(
                records[eval_step].get(key).is_some(),
                "{key} missing at eval"
            );
        }
    }
    for step in [10, 20] {
        let checkpoint = dir.join(format!("checkpoints/step-{step}"));
        for file in ["model.bpk", "optimizer.bpk", "state.json"] {
            assert!(
                checkpoint.join(file).is_file(),
                "{file} missing in step-{step}"
            );
        }
    }
    for step in [0, 5, 10, 15, 20] {
        let snapshot = dir.join(format!("snapshots/step-{step}.safetensors"));
        let tensors = run::tensor_file::read_tensors(&snapshot).unwrap();
        assert_eq!(tensors["layers.0.heads.1.q"].shape, [16, 8]);
        assert_eq!(tensors["layers.0.heads.1.o"].shape, [8, 16]);
    }
    let weights = std::fs::read(dir.join("model.safetensors")).unwrap();
    let weights = safetensors::SafeTensors::deserialize(&weights).unwrap();
    let names = weights.names();
    assert!(
        names.contains(&"blocks.0.attention.qkv.weight"),
        "{names:?}"
    );
    assert!(names.contains(&"embedding.weight"), "{names:?}");
    // The marker and the lock are there; nothing half-written is left behind (the lock is
    // the one hidden file a run keeps).
    assert!(dir.join("run.json").is_file() && dir.join(".lock").is_file());
    let prefix = dir.display().to_string();
    let hidden: Vec<_> = walk(&dir)
        .into_iter()
        .filter(|p| p[prefix.len()..].contains("/.") && *p != format!("{prefix}/.lock"))
        .collect();
    assert!(hidden.is_empty(), "temporary files left: {hidden:?}");
}

fn walk(dir: &Path) -> Vec<String> {
    let mut found = vec![];
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        found.push(path.display().to_string());
        if path.is_dir() {
            found.extend(walk(&path));
        }
    }
    found
}

/// The tiny run trained whole into `whole`, and paused at step 12 into `split` (checkpoints
/// at steps 10 and 12).
fn whole_and_paused(tmp: &tempfile::TempDir) -> (PathBuf, PathBuf) {
    let whole = out_dir(tmp, "whole");
    let split = out_dir(tmp, "split");
    let uninterrupted = run_train(&[TINY, "--out", whole.to_str().unwrap()]);
    assert!(uninterrupted.status.success(), "{}", stderr(&uninterrupted));
    let paused = run_train(&[TINY, "--out", split.to_str().unwrap(), "--stop-at", "12"]);
    assert!(paused.status.success(), "{}", stderr(&paused));
    (whole, split)
}

/// A `--stop-at` the run is already at or past would never be met: the run would train to
/// its end. It is refused, naming the step, and the paused run is left as it was.
#[test]
fn a_stop_at_the_run_has_passed_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let split = out_dir(&tmp, "split");
    let split_arg = split.to_str().unwrap();
    let paused = run_train(&[TINY, "--out", split_arg, "--stop-at", "12"]);
    assert!(paused.status.success(), "{}", stderr(&paused));
    let before = files_and_bytes(&split);
    for stop_at in ["5", "12"] {
        let err = train_fails(&[TINY, "--out", split_arg, "--resume", "--stop-at", stop_at]);
        assert!(
            err.contains(&format!("--stop-at {stop_at} is not after step 12"))
                && err.contains("give a step from 13 to 20"),
            "{err}"
        );
    }
    assert_eq!(files_and_bytes(&split), before, "the run changed");
    assert!(!split.join("model.safetensors").exists());
    // Step 0 is refused before any run directory is made.
    let fresh = out_dir(&tmp, "fresh");
    let err = train_fails(&[TINY, "--out", fresh.to_str().unwrap(), "--stop-at", "0"]);
    assert!(
        err.contains("--stop-at") && err.contains("at least 1"),
        "{err}"
    );
    assert!(!fresh.exists());
}

/// Every file of a run (the lock aside) with its bytes, for a before-and-after comparison.
fn files_and_bytes(dir: &Path) -> Vec<(String, Vec<u8>)> {
    walk(dir)
        .into_iter()
        .filter(|name| !name.ends_with(".lock") && Path::new(name).is_file())
        .map(|name| {
            let bytes = std::fs::read(&name).unwrap();
            (name, bytes)
        })
        .collect()
}

#[test]
fn resuming_a_paused_run_equals_the_uninterrupted_run() {
    let tmp = tempfile::tempdir().unwrap();
    let (whole, split) = whole_and_paused(&tmp);
    assert!(
        !split.join("model.safetensors").exists(),
        "a paused run has no final weights"
    );
    let resumed = run_train(&[TINY, "--out", split.to_str().unwrap(), "--resume"]);
    assert!(resumed.status.success(), "{}", stderr(&resumed));

    let strip = |records: Vec<serde_json::Value>| -> Vec<(u64, String)> {
        records
            .iter()
            .map(|r| {
                (
                    r["step"].as_u64().unwrap(),
                    format!("{} {} {}", r["loss"], r["lr"], r["eval_loss"]),
                )
            })
            .collect()
    };
    let (a, b) = (strip(metrics(&whole)), strip(metrics(&split)));
    assert_eq!(a.iter().map(|x| x.0).collect::<Vec<_>>(), [5, 10, 15, 20]);
    // The pause added a checkpoint and nothing else: the same records, number for number
    // (their timings aside), and the same snapshots, byte for byte.
    assert_eq!(
        a, b,
        "the resumed run's metrics differ from the uninterrupted run's"
    );
    let snapshots = |run: &Path| -> Vec<(String, Vec<u8>)> {
        let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(run.join("snapshots"))
            .unwrap()
            .map(|e| {
                let path = e.unwrap().path();
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                (name, std::fs::read(&path).unwrap())
            })
            .collect();
        files.sort();
        files
    };
    let (whole_snapshots, split_snapshots) = (snapshots(&whole), snapshots(&split));
    let names = |s: &[(String, Vec<u8>)]| s.iter().map(|f| f.0.clone()).collect::<Vec<_>>();
    assert_eq!(names(&whole_snapshots), names(&split_snapshots));
    assert!(
        whole_snapshots == split_snapshots,
        "snapshot contents differ"
    );
    assert_eq!(
        final_tensors(&whole),
        final_tensors(&split),
        "final weights differ"
    );
}

/// A paused run says the command that continues it, and that command (the run directory in
/// the config's place) ends with the uninterrupted run's weights; without `--resume` the run
/// directory is refused with that command, and nothing is written.
#[test]
fn train_run_dir_resume_continues_the_run() {
    let tmp = tempfile::tempdir().unwrap();
    let (whole, split) = whole_and_paused(&tmp);
    let split_arg = split.to_str().unwrap();
    let paused = run_train(&[TINY, "--out", split_arg, "--stop-at", "15", "--resume"]);
    let stdout = String::from_utf8_lossy(&paused.stdout);
    assert!(
        stdout.contains(&format!(
            "continue with --resume (headlab train {split_arg} --resume)"
        )),
        "{stdout}"
    );

    let before = metrics(&split).len();
    let err = train_fails(&[split_arg]);
    assert!(
        err.contains(&format!(
            "is a run directory, not a config: continue it with `headlab train {split_arg} --resume`"
        )),
        "{err}"
    );
    assert_eq!(
        metrics(&split).len(),
        before,
        "a refused command wrote nothing"
    );
    let err = train_fails(&[split_arg, "--resume", "--out", "elsewhere"]);
    assert!(err.contains("leave --out out"), "{err}");

    let resumed = run_train(&[split_arg, "--resume"]);
    assert!(resumed.status.success(), "{}", stderr(&resumed));
    assert_eq!(final_tensors(&whole), final_tensors(&split));
}

/// Cuts `file` to half its length, as a crash or a full disk might leave it.
fn truncate_half(file: &Path) {
    let bytes = std::fs::read(file).unwrap();
    std::fs::write(file, &bytes[..bytes.len() / 2]).unwrap();
}

#[test]
fn resume_skips_a_corrupt_checkpoint_and_names_it() {
    let tmp = tempfile::tempdir().unwrap();
    // Checkpoints at steps 10 and 12; the newest is then damaged.
    let (whole, split) = whole_and_paused(&tmp);
    let newest = split.join("checkpoints/step-12/model.bpk");
    truncate_half(&newest);

    let resumed = run_train(&[TINY, "--out", split.to_str().unwrap(), "--resume"]);
    let err = stderr(&resumed);
    assert!(resumed.status.success(), "{err}");
    assert!(
        err.contains("warning:") && err.contains("model.bpk") && err.contains("step-12"),
        "the bad file is named: {err}"
    );
    assert!(err.contains("resuming from the older"), "{err}");
    assert!(err.contains("step-10"), "{err}");
    // From step 10 the run is the uninterrupted one again.
    assert_eq!(
        final_tensors(&whole),
        final_tensors(&split),
        "final weights differ"
    );
}

#[test]
fn resume_with_every_checkpoint_corrupt_is_refused_by_name() {
    let tmp = tempfile::tempdir().unwrap();
    let run = out_dir(&tmp, "run");
    let paused = run_train(&[TINY, "--out", run.to_str().unwrap(), "--stop-at", "12"]);
    assert!(paused.status.success(), "{}", stderr(&paused));
    for step in [10, 12] {
        truncate_half(&run.join(format!("checkpoints/step-{step}/state.json")));
    }
    let err = train_fails(&[TINY, "--out", run.to_str().unwrap(), "--resume"]);
    assert!(
        err.contains("no checkpoint could be loaded")
            && err.contains("step-12")
            && err.contains("state.json"),
        "{err}"
    );
    assert!(!run.join("model.safetensors").exists());
}

#[test]
fn the_same_seed_gives_the_same_numbers() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (out_dir(&tmp, "a"), out_dir(&tmp, "b"));
    assert!(
        run_train(&[TINY, "--out", a.to_str().unwrap()])
            .status
            .success()
    );
    assert!(
        run_train(&[TINY, "--out", b.to_str().unwrap(), "--backend", "flex"])
            .status
            .success()
    );
    let loss = |d: &Path| {
        metrics(d)
            .iter()
            .map(|r| r["loss"].to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(loss(&a), loss(&b));
}

/// Issue 52, break 3: kill -9 of `train` between writing its marker's temporary file and
/// renaming it leaves `.lock` and `.run.json.tmp-PID`; that is a run not started, which a
/// plain `train` (and `--force`) starts, leaving no trace of the killed one.
#[test]
fn a_start_killed_before_its_marker_is_a_run_not_started() {
    let tmp = tempfile::tempdir().unwrap();
    for force in [false, true] {
        let dir = out_dir(&tmp, &format!("killed-start-{force}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(".lock"), b"").unwrap();
        std::fs::write(dir.join(".run.json.tmp-4194303"), b"{\"format\": 1,").unwrap();
        let mut args = vec![TINY, "--out", dir.to_str().unwrap()];
        if force {
            args.push("--force");
        }
        let trained = run_train(&args);
        assert!(trained.status.success(), "{}", stderr(&trained));
        assert!(dir.join("manifest.json").is_file());
        assert!(!dir.join(".run.json.tmp-4194303").exists());
    }
    // A user's own hidden file is no run's temporary: the directory stays refused.
    let dir = out_dir(&tmp, "users");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(".notes.tmp-1"), b"mine").unwrap();
    let err = train_fails(&[TINY, "--out", dir.to_str().unwrap()]);
    assert!(err.contains("is not a headlab run"), "{err}");
    assert_eq!(std::fs::read(dir.join(".notes.tmp-1")).unwrap(), b"mine");
}

#[test]
fn an_existing_run_is_never_overwritten_without_force_or_resume() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = out_dir(&tmp, "run");
    assert!(
        run_train(&[TINY, "--out", dir.to_str().unwrap()])
            .status
            .success()
    );
    let before = std::fs::read(dir.join("model.safetensors")).unwrap();
    let err = train_fails(&[TINY, "--out", dir.to_str().unwrap(), "--set", "seed=9"]);
    assert!(
        err.contains("already holds a run") && err.contains("--force"),
        "{err}"
    );
    assert_eq!(
        std::fs::read(dir.join("model.safetensors")).unwrap(),
        before
    );

    let replaced = run_train(&[
        TINY,
        "--out",
        dir.to_str().unwrap(),
        "--set",
        "seed=9",
        "--force",
    ]);
    assert!(replaced.status.success(), "{}", stderr(&replaced));
    assert_ne!(
        std::fs::read(dir.join("model.safetensors")).unwrap(),
        before
    );
}

#[test]
fn bad_input_gets_one_clear_message_and_a_nonzero_exit() {
    let tmp = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let path = tmp.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_string()
    };
    let tiny = std::fs::read_to_string(TINY).unwrap();
    let out = tmp.path().join("never");
    let out = out.to_str().unwrap();

    let line_of = |text: &str, needle: &str| {
        1 + text
            .lines()
            .position(|l| l.starts_with(needle))
            .expect("needle in fixture")
    };
    let text = tiny.replace("d_ff = 32", "d_ff = 32\nd_fff = 3");
    let unknown = write("unknown.toml", &text);
    let err = train_fails(&[&unknown, "--out", out]);
    let line = format!("line {}", line_of(&text, "d_fff"));
    assert!(
        err.contains("unknown field `d_fff`") && err.contains(&line),
        "{err}"
    );

    let text = tiny.replace("steps = 20", "steps = \"many\"");
    let wrong_type = write("type.toml", &text);
    let err = train_fails(&[&wrong_type, "--out", out]);
    let line = format!("line {}", line_of(&text, "steps ="));
    assert!(err.contains("invalid type") && err.contains(&line), "{err}");

    let heads = write("heads.toml", &tiny.replace("n_heads = 2", "n_heads = 3"));
    let err = train_fails(&[&heads, "--out", out]);
    assert!(
        err.contains("model.n_heads = 3 does not divide model.d_model = 16"),
        "{err}"
    );

    let err = train_fails(&[
        tmp.path().join("missing.toml").to_str().unwrap(),
        "--out",
        out,
    ]);
    assert!(
        err.contains("cannot read config file") && err.contains("missing.toml"),
        "{err}"
    );

    let bad_jsonl = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../train/tests/fixtures/bad.jsonl"
    );
    let file_task = write(
        "file.toml",
        &format!("[task]\nkind = \"file\"\npath = \"{bad_jsonl}\"\n[model]\nd_model = 16\n"),
    );
    let err = train_fails(&[&file_task, "--out", out]);
    assert!(err.contains("line 3") && err.contains("bad.jsonl"), "{err}");

    let err = train_fails(&[TINY, "--out", out, "--set", "train.steps=abc"]);
    assert!(err.contains("--set train.steps=abc"), "{err}");
    let err = train_fails(&[TINY, "--out", out, "--set", "train.lr=0"]);
    assert!(err.contains("train.lr = 0 is out of range"), "{err}");
    let err = train_fails(&[TINY, "--out", out, "--set", "nonsense"]);
    assert!(err.contains("expected key.path=value"), "{err}");

    assert!(
        !Path::new(out).exists(),
        "a failed start must not create the run directory"
    );
}

#[test]
fn resume_without_a_checkpoint_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = out_dir(&tmp, "none");
    let err = train_fails(&[TINY, "--out", dir.to_str().unwrap(), "--resume"]);
    assert!(err.contains("nothing to resume"), "{err}");
    // The advice, as given, starts it.
    assert!(
        err.contains("the same command and --force in place of --resume"),
        "{err}"
    );
    let started = run_train(&[TINY, "--out", dir.to_str().unwrap(), "--force"]);
    assert!(started.status.success(), "{}", stderr(&started));
}

/// Issue 54, item 7: a finished run trains further with `--resume` and a larger
/// `train.steps` (the rest of its config unchanged); any other difference is refused naming
/// the key, dotted, with both values (it said only "train differs"); fewer steps than the
/// run has trained are refused as such.
#[test]
fn a_finished_run_trains_further_and_another_config_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = out_dir(&tmp, "run");
    let run = dir.to_str().unwrap();
    assert!(run_train(&[TINY, "--out", run]).status.success());
    let err = train_fails(&[TINY, "--out", run, "--resume", "--set", "train.steps=10"]);
    assert!(
        err.contains("train.steps = 10 is before step 20, the newest checkpoint")
            && err.contains("give train.steps = 20 or more"),
        "{err}"
    );
    let both = ["--set", "train.steps=40", "--set", "model.n_heads=4"];
    let mut args = vec![TINY, "--out", run, "--resume"];
    args.extend(both);
    let err = train_fails(&args);
    assert!(
        err.contains("model.n_heads is 4 here and 2 in the run"),
        "{err}"
    );

    let further = run_train(&[TINY, "--out", run, "--resume", "--set", "train.steps=30"]);
    assert!(further.status.success(), "{}", stderr(&further));
    let last = metrics(&dir).last().unwrap()["step"].as_u64().unwrap();
    assert!(last >= 29, "trained to step {last}");
    let config = std::fs::read_to_string(dir.join("config.toml")).unwrap();
    assert!(config.contains("steps = 30"), "{config}");
    // Sealed again, and a run that opens: its marker names the new config.
    let opened = run::RunDir::open(&dir).unwrap();
    assert_eq!(
        opened.verify(run::manifest::Depth::Contents),
        run::manifest::Verdict::Intact
    );
}

/// The bytes and modification times of a run's files that a resume must leave alone when
/// it trains nothing.
fn run_files(dir: &Path) -> Vec<(String, Vec<u8>, std::time::SystemTime)> {
    [
        "config.toml",
        "manifest.json",
        "metrics.jsonl",
        "model.safetensors",
        "run.json",
    ]
    .iter()
    .map(|name| {
        let path = dir.join(name);
        let modified = std::fs::metadata(&path).unwrap().modified().unwrap();
        (name.to_string(), std::fs::read(&path).unwrap(), modified)
    })
    .collect()
}

/// Issue 66, item 1: a run stopped at its target accuracy is trained longer by changing its
/// stopping rules on resume (`--no-target`, `train.target_accuracy`, `train.steps`); a
/// resume that would train nothing says why and rewrites nothing; any other change is
/// refused naming that key, not `train.steps`.
#[test]
fn a_run_stopped_at_its_target_trains_on_when_its_stopping_rules_change() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = out_dir(&tmp, "run");
    let run = dir.to_str().unwrap();
    let first = run_train(&[TINY, "--out", run, "--set", "train.target_accuracy=0.01"]);
    assert!(first.status.success(), "{}", stderr(&first));
    let said = String::from_utf8_lossy(&first.stdout).into_owned();
    assert!(
        said.contains("reached the target accuracy at step 10"),
        "{said}"
    );
    let before = run_files(&dir);

    // More steps, the same target: nothing to train, said, and nothing touched.
    let same_target = run_train(&[run, "--resume", "--set", "train.steps=40"]);
    assert!(same_target.status.success(), "{}", stderr(&same_target));
    let said = String::from_utf8_lossy(&same_target.stdout).into_owned();
    assert!(
        said.contains("nothing trained, nothing rewritten")
            && said.contains("train.target_accuracy = 0.01")
            && said.contains("--no-target"),
        "{said}"
    );
    assert_eq!(
        run_files(&dir),
        before,
        "a resume that trained nothing rewrote the run"
    );

    // A change beyond the stopping rules is named by its own key.
    let err = train_fails(&[
        run,
        "--resume",
        "--set",
        "train.target_accuracy=1.0",
        "--set",
        "train.steps=40",
        "--set",
        "train.lr=1e-3",
    ]);
    assert!(
        err.contains("train.lr is 0.001 here and 0.003 in the run")
            && err.contains("--resume may change only when the run stops"),
        "{err}"
    );
    assert_eq!(run_files(&dir), before, "a refused resume rewrote the run");

    // A higher target trains on, to the new number of steps.
    let higher = run_train(&[
        run,
        "--resume",
        "--set",
        "train.target_accuracy=1.0",
        "--set",
        "train.steps=30",
    ]);
    assert!(higher.status.success(), "{}", stderr(&higher));
    assert_eq!(metrics(&dir).last().unwrap()["step"].as_u64(), Some(30));
    let config = std::fs::read_to_string(dir.join("config.toml")).unwrap();
    assert!(
        config.contains("steps = 30") && config.contains("target_accuracy = 1.0"),
        "{config}"
    );

    // No target at all: trains to train.steps, and the run's config says so.
    let no_target = run_train(&[run, "--resume", "--no-target", "--set", "train.steps=40"]);
    assert!(no_target.status.success(), "{}", stderr(&no_target));
    let said = String::from_utf8_lossy(&no_target.stdout).into_owned();
    assert!(said.contains("finished at step 40"), "{said}");
    let config = std::fs::read_to_string(dir.join("config.toml")).unwrap();
    assert!(
        config.contains("steps = 40") && !config.contains("target_accuracy"),
        "{config}"
    );
    let opened = run::RunDir::open(&dir).unwrap();
    assert_eq!(
        opened.verify(run::manifest::Depth::Contents),
        run::manifest::Verdict::Intact
    );
}

#[test]
fn a_diverging_loss_stops_the_run_naming_the_step() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = out_dir(&tmp, "nan");
    let err = train_fails(&[
        TINY,
        "--out",
        dir.to_str().unwrap(),
        "--set",
        "train.lr=1e30",
        "--set",
        "train.grad_clip=0",
        "--set",
        "train.warmup_steps=0",
    ]);
    assert!(
        err.contains("loss became") && err.contains("at step"),
        "{err}"
    );
}

#[test]
fn ctrl_c_saves_a_checkpoint_and_exits() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = out_dir(&tmp, "sigint");
    let child = train_cmd(&[
        TINY,
        "--out",
        dir.to_str().unwrap(),
        "--set",
        "train.steps=1000000",
    ])
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    // Wait until training has logged a step, then interrupt.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !dir.join("metrics.jsonl").is_file()
        || std::fs::read_to_string(dir.join("metrics.jsonl"))
            .unwrap()
            .is_empty()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "training never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let killed = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(130), "{}", stderr(&output));
    let checkpoints = common::checkpoints(&dir);
    assert!(!checkpoints.is_empty(), "no checkpoint after Ctrl-C");
}

/// `command` with every Vulkan driver hidden from the loader (each way the loader reads).
fn without_vulkan(command: &mut Command) -> &mut Command {
    command
        .env("VK_LOADER_DRIVERS_DISABLE", "*")
        .env("VK_ICD_FILENAMES", "/nonexistent/icd.json")
        .env("VK_DRIVER_FILES", "/nonexistent/icd.json")
}

#[test]
fn wgpu_without_an_adapter_says_so_and_suggests_flex() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = out_dir(&tmp, "no-gpu");
    // Hide every Vulkan driver and every EGL vendor (wgpu's GL fallback) from the process.
    let mut command = train_cmd(&[TINY, "--out", dir.to_str().unwrap(), "--backend", "wgpu"]);
    let output = without_vulkan(&mut command)
        .args(["--set", "train.steps=2"])
        .env("__EGL_VENDOR_LIBRARY_FILENAMES", "/nonexistent/egl.json")
        .env("XDG_RUNTIME_DIR", "/tmp")
        .output()
        .unwrap();
    let err = stderr(&output);
    if output.status.success() && !testkit::is_required("HEADLAB_REQUIRE_WGPU") {
        eprintln!("skipped: the adapter could not be hidden on this machine");
        return;
    }
    assert_eq!(output.status.code(), Some(1), "{err}");
    assert!(
        err.starts_with("error: backend \"wgpu\" found no usable GPU adapter; run on the CPU with --backend flex"),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(!dir.exists(), "no run directory without a device");
}

/// With Vulkan's drivers hidden and Mesa's OpenGL left, wgpu falls back to an OpenGL adapter,
/// which has no f32 atomic add: Burn's kernels used to panic on it a minute into training.
/// It must be refused in one line, before the run directory exists, without a backtrace and
/// without the graphics stack's XDG_RUNTIME_DIR complaint.
#[test]
fn wgpu_on_an_opengl_adapter_is_refused_before_anything_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = out_dir(&tmp, "opengl");
    let mut command = train_cmd(&[TINY, "--out", dir.to_str().unwrap(), "--backend", "wgpu"]);
    let output = without_vulkan(&mut command)
        .args(["--set", "train.steps=2"])
        .env_remove("XDG_RUNTIME_DIR")
        .output()
        .unwrap();
    let err = stderr(&output);
    let refused_for_atomics = err.contains("lacks 32-bit float atomic add");
    if !refused_for_atomics && !testkit::is_required("HEADLAB_REQUIRE_WGPU") {
        eprintln!(
            "skipped: no OpenGL adapter to fall back to here ({})",
            err.trim()
        );
        return;
    }
    assert_eq!(output.status.code(), Some(1), "{err}");
    assert!(refused_for_atomics, "{err}");
    assert!(
        err.starts_with("error: backend \"wgpu\" found no usable GPU adapter; run on the CPU with --backend flex"),
        "{err}"
    );
    assert!(
        err.contains(" through Gl, "),
        "the adapter is named with its API: {err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(!err.contains("XDG_RUNTIME_DIR"), "{err}");
    assert!(!dir.exists(), "no run directory on a refused adapter");
}

#[test]
fn wgpu_trains_a_few_steps_or_says_why_not() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = out_dir(&tmp, "wgpu");
    let output = run_train(&[
        TINY,
        "--out",
        dir.to_str().unwrap(),
        "--backend",
        "wgpu",
        "--set",
        "train.steps=3",
        "--set",
        "train.eval_every=3",
    ]);
    let err = stderr(&output);
    if !output.status.success() && !testkit::is_required("HEADLAB_REQUIRE_WGPU") {
        assert!(
            err.contains("no usable GPU adapter") && err.contains("--backend flex"),
            "{err}"
        );
        assert!(!err.contains("panicked"), "{err}");
        eprintln!("skipped: no wgpu adapter on this machine ({})", err.trim());
        return;
    }
    assert!(output.status.success(), "wgpu run failed: {err}");
    assert_eq!(metrics(&dir).last().unwrap()["step"], 3);
    // The adapter is named; a software driver (lavapipe here) says that it is one.
    let adapter = err
        .lines()
        .find_map(|line| line.strip_prefix("wgpu adapter: "))
        .unwrap_or_else(|| panic!("no adapter line: {err}"));
    // With the language its kernels are compiled to: this build has the WGSL compiler only.
    assert!(adapter.contains(", WGSL, "), "{adapter}");
    if adapter.contains("llvmpipe") {
        assert!(adapter.contains("software: a CPU emulation"), "{adapter}");
    }
}

/// Without XDG_RUNTIME_DIR in the environment, a wgpu run prints nothing about it (Mesa's
/// EGL used to, four times, whenever wgpu looked at OpenGL adapters).
#[test]
fn a_wgpu_run_without_xdg_runtime_dir_is_quiet_about_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = out_dir(&tmp, "wgpu-no-xdg");
    let output = train_cmd(&[TINY, "--out", dir.to_str().unwrap(), "--backend", "wgpu"])
        .args(["--set", "train.steps=1", "--set", "train.eval_every=1"])
        .env_remove("XDG_RUNTIME_DIR")
        .output()
        .unwrap();
    let err = stderr(&output);
    if !output.status.success() && !testkit::is_required("HEADLAB_REQUIRE_WGPU") {
        eprintln!("skipped: no wgpu adapter on this machine ({})", err.trim());
        return;
    }
    assert!(output.status.success(), "{err}");
    assert!(!err.contains("XDG_RUNTIME_DIR"), "{err}");
}

/// `train ... | head -1`: when the reader goes, `train` ends by SIGPIPE as Unix tools do,
/// without a panic message.
#[test]
fn a_closed_stdout_ends_train_quietly() {
    use std::io::{BufRead, BufReader};
    use std::os::unix::process::ExitStatusExt;
    let dir = tempfile::tempdir().unwrap();
    let mut child = common::train_cmd(&[
        common::TINY,
        "--out",
        dir.path().join("run").to_str().unwrap(),
        "--set",
        "train.log_every=1",
        "--set",
        "train.eval_every=1",
        "--set",
        "train.steps=400",
    ])
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.starts_with("step "), "{first}");
    // The reader is dropped here: the pipe is closed.
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(
        output.status.signal(),
        Some(13),
        "ended by SIGPIPE: {stderr}"
    );
}
