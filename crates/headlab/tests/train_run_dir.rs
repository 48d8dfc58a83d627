//! The run directory as an adversarial user meets it through the `train` binary: `--force`
//! deletes only a headlab run's own files (never a user's directory, `.`, a symlink's target
//! or a dataset kept in the run), a second writer is refused while the first finishes whole,
//! a run whose config, checkpoint state or dataset was changed is refused by name, and
//! SIGTERM or SIGHUP stop like Ctrl-C, with a checkpoint that resumes exactly.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

#[path = "common/train.rs"]
mod common;
use common::{TINY, final_tensors, run_train as train, train_cmd as command};

/// `train` with `args`, run in `cwd`.
fn train_in(cwd: &Path, args: &[&str]) -> Output {
    command(args)
        .current_dir(cwd)
        .output()
        .expect("the train binary runs")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Checks that `output` is a refusal: non-zero, one message, no panic. Returns the message.
fn refused(output: &Output) -> String {
    let err = stderr(output);
    assert!(
        !output.status.success(),
        "expected a refusal, got success: {err}"
    );
    assert!(err.starts_with("error: "), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    err
}

fn succeeded(output: &Output) {
    assert!(output.status.success(), "{}", stderr(output));
}

/// Every file under `dir` (not following links) with its bytes.
fn contents(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(current) = stack.pop() {
        for entry in std::fs::read_dir(&current).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                stack.push(path);
            } else if !meta.file_type().is_symlink() {
                let bytes = std::fs::read(&path).unwrap();
                files.insert(path.strip_prefix(dir).unwrap().to_path_buf(), bytes);
            }
        }
    }
    files
}

fn path_str(path: &Path) -> &str {
    path.to_str().unwrap()
}

#[test]
fn force_on_a_directory_that_is_not_a_run_deletes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("mine");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("important.txt"), b"keep me").unwrap();
    let before = contents(&dir);

    for extra in [&[][..], &["--force"][..]] {
        let mut args = vec![TINY, "--out", path_str(&dir), "--quiet"];
        args.extend(extra);
        let err = refused(&train(&args));
        assert!(
            err.contains("is not a headlab run") && err.contains("important.txt"),
            "{err}"
        );
        assert!(!err.contains("already holds a run"), "{err}");
    }
    assert_eq!(contents(&dir), before);
}

#[test]
fn out_dot_with_force_leaves_the_current_directory_whole() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::copy(TINY, tmp.path().join("my.toml")).unwrap();
    std::fs::write(tmp.path().join("notes.txt"), b"mine").unwrap();
    let before = contents(tmp.path());
    let err = refused(&train_in(
        tmp.path(),
        &["my.toml", "--out", ".", "--force", "--quiet"],
    ));
    assert!(err.contains("is not a headlab run"), "{err}");
    assert_eq!(contents(tmp.path()), before);
}

#[test]
fn force_through_a_symlink_deletes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let real = tmp.path().join("real");
    succeeded(&train(&[TINY, "--out", path_str(&real), "--quiet"]));
    let link = tmp.path().join("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let before = contents(&real);
    let err = refused(&train(&[
        TINY,
        "--out",
        path_str(&link),
        "--force",
        "--quiet",
    ]));
    assert!(err.contains("symbolic link"), "{err}");
    assert_eq!(contents(&real), before);
}

#[test]
fn force_replaces_a_run_but_keeps_what_headlab_did_not_write() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    succeeded(&train(&[TINY, "--out", path_str(&dir), "--quiet"]));
    std::fs::write(dir.join("notes.txt"), b"my notes").unwrap();
    // A link inside the run to a user's directory: removed as a link, if at all, never
    // followed.
    let outside = tmp.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("precious"), b"x").unwrap();
    std::fs::remove_dir_all(dir.join("snapshots")).unwrap();
    std::os::unix::fs::symlink(&outside, dir.join("snapshots")).unwrap();

    let sets = ["--set", "seed=9", "--set", "train.snapshot_every=0"];
    let mut args = vec![TINY, "--out", path_str(&dir), "--force", "--quiet"];
    args.extend(sets);
    succeeded(&train(&args));
    assert_eq!(std::fs::read(dir.join("notes.txt")).unwrap(), b"my notes");
    assert_eq!(std::fs::read(outside.join("precious")).unwrap(), b"x");
    let config = std::fs::read_to_string(dir.join("config.toml")).unwrap();
    assert!(config.contains("seed = 9"), "{config}");
}

/// A file run of the tiny model on a small dataset written into `dir/data.jsonl`.
fn file_config(tmp: &Path, dataset: &Path) -> PathBuf {
    let mut lines = String::new();
    for i in 0..40u32 {
        let input: Vec<u32> = (0..6).map(|j| (i * 3 + j) % 5).collect();
        let target: Vec<u32> = input.iter().rev().copied().collect();
        lines.push_str(&format!(
            "{{\"input\": {input:?}, \"target\": {target:?}}}\n"
        ));
    }
    std::fs::write(dataset, lines).unwrap();
    let config = std::fs::read_to_string(TINY).unwrap().replace(
        "kind = \"reverse\"\nseq_len = 6\nvocab_size = 5",
        &format!("kind = \"file\"\npath = \"{}\"", dataset.display()),
    );
    let path = tmp.join("file.toml");
    std::fs::write(&path, config).unwrap();
    path
}

#[test]
fn a_file_run_keeps_its_dataset_and_refuses_to_resume_on_a_changed_one() {
    let tmp = tempfile::tempdir().unwrap();
    let dataset = tmp.path().join("data.jsonl");
    let config = file_config(tmp.path(), &dataset);
    let dir = tmp.path().join("run");
    let args = [path_str(&config), "--out", path_str(&dir), "--quiet"];
    let mut paused = args.to_vec();
    paused.extend(["--stop-at", "10"]);
    succeeded(&train(&paused));
    assert_eq!(
        std::fs::read(dir.join("dataset.jsonl")).unwrap(),
        std::fs::read(&dataset).unwrap()
    );

    // The original changes: resuming would train on other data.
    let original = std::fs::read(&dataset).unwrap();
    std::fs::write(&dataset, &original[..original.len() / 2]).unwrap();
    let mut resume = args.to_vec();
    resume.push("--resume");
    let err = refused(&train(&resume));
    assert!(
        err.contains("data.jsonl") && err.contains("changed after the run started"),
        "{err}"
    );
    std::fs::write(&dataset, &original).unwrap();
    succeeded(&train(&resume));

    // A dataset kept inside the run is never deleted by --force: the run's own copy is
    // refused as a source, a file of the user's is left in place.
    let kept = dir.join("mine.jsonl");
    std::fs::copy(&dataset, &kept).unwrap();
    let own_copy = dir.join("dataset.jsonl");
    for (source, ok) in [(&own_copy, false), (&kept, true)] {
        let config = file_config(tmp.path(), source);
        let output = train(&[
            path_str(&config),
            "--out",
            path_str(&dir),
            "--force",
            "--quiet",
        ]);
        if ok {
            succeeded(&output);
        } else {
            let err = refused(&output);
            assert!(err.contains("move the dataset out"), "{err}");
        }
        assert_eq!(
            std::fs::read(source).unwrap(),
            original,
            "{}",
            source.display()
        );
    }
}

/// The overrides of a run long enough (600 steps, a few seconds) to be caught mid-way.
const LONG_RUN: [&str; 8] = [
    "--set",
    "train.steps=600",
    "--set",
    "train.eval_every=200",
    "--set",
    "train.checkpoint_every=200",
    "--set",
    "train.snapshot_every=0",
];

/// Starts a long `train` into `dir` and waits until it has taken the run's lock and logged.
fn start_long_run(dir: &Path, extra: &[&str]) -> Child {
    let mut args = vec![TINY, "--out", path_str(dir), "--quiet"];
    args.extend(LONG_RUN);
    args.extend(extra);
    let child = command(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let metrics = dir.join("metrics.jsonl");
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::fs::read_to_string(&metrics).map_or(true, |m| m.is_empty()) {
        assert!(Instant::now() < deadline, "training never started");
        std::thread::sleep(Duration::from_millis(10));
    }
    child
}

#[test]
fn a_second_writer_is_refused_and_the_first_run_finishes_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let first = start_long_run(&dir, &[]);
    let pid = first.id().to_string();
    // Paused while the others try, so it cannot finish first on a fast machine (it did:
    // the third writer then found a finished run, not one in use).
    let signal = |signal: &str| {
        let status = Command::new("kill").args([signal, &pid]).status().unwrap();
        assert!(status.success(), "kill {signal} {pid}");
    };
    signal("-STOP");
    let out = path_str(&dir);
    let attempts: Vec<(Vec<&str>, Output)> = [
        vec![TINY, "--out", out, "--quiet"],
        vec![TINY, "--out", out, "--quiet", "--force", "--set", "seed=5"],
        vec![TINY, "--out", out, "--quiet", "--resume"],
    ]
    .into_iter()
    .map(|args| {
        let output = train(&args);
        (args, output)
    })
    .collect();
    // Let it go on before anything is asserted, so a failed assertion leaves no stopped
    // process behind.
    signal("-CONT");
    for (args, output) in attempts {
        let err = refused(&output);
        assert!(
            err.contains("is in use by") && err.contains(&format!("process {pid} (train)")),
            "{args:?}: {err}"
        );
        // Its own status (EX_TEMPFAIL), which `sweep` reads as "held", not "failed".
        assert_eq!(
            output.status.code(),
            Some(i32::from(run::dir::EXIT_RUN_IN_USE)),
            "{args:?}"
        );
    }
    let output = first.wait_with_output().unwrap();
    succeeded(&output);
    assert!(String::from_utf8_lossy(&output.stdout).contains("finished at step 600"));
    let config = std::fs::read_to_string(dir.join("config.toml")).unwrap();
    assert!(
        config.contains("seed = 3") && config.contains("steps = 600"),
        "{config}"
    );
    assert!(dir.join("model.safetensors").is_file());
}

/// Interrupts a long run with `signal` once it has logged, and returns its output.
fn interrupt(dir: &Path, signal: &str) -> Output {
    let child = start_long_run(dir, &[]);
    let status = Command::new("kill")
        .args([&format!("-{signal}"), &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    child.wait_with_output().unwrap()
}

#[test]
fn sigterm_checkpoints_exits_143_and_resumes_to_the_uninterrupted_weights() {
    let tmp = tempfile::tempdir().unwrap();
    let whole = tmp.path().join("whole");
    succeeded(&start_long_run(&whole, &[]).wait_with_output().unwrap());

    let dir = tmp.path().join("term");
    let output = interrupt(&dir, "TERM");
    assert_eq!(output.status.code(), Some(143), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("SIGTERM received"),
        "{}",
        stderr(&output)
    );
    assert!(String::from_utf8_lossy(&output.stdout).contains("continue with --resume"));
    assert!(!dir.join("model.safetensors").exists());

    let mut args = vec![TINY, "--out", path_str(&dir), "--quiet", "--resume"];
    args.extend(LONG_RUN);
    let resumed = train(&args);
    succeeded(&resumed);
    assert_eq!(final_tensors(&dir), final_tensors(&whole));
}

#[test]
fn sighup_checkpoints_and_exits_129() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("hup");
    let output = interrupt(&dir, "HUP");
    assert_eq!(output.status.code(), Some(129), "{}", stderr(&output));
    assert!(!common::checkpoints(&dir).is_empty());
}

/// SIGUSR2, what a child of a dying sweep gets (once per thread of the sweep), stops as
/// SIGTERM does, but a second one does not abort: the run still checkpoints.
#[test]
fn repeated_sigusr2_checkpoints_and_exits_140() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("usr2");
    let child = start_long_run(&dir, &[]);
    for _ in 0..3 {
        let status = Command::new("kill")
            .args(["-USR2", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(140), "{}", stderr(&output));
    assert!(String::from_utf8_lossy(&output.stdout).contains("continue with --resume"));
    assert!(!common::checkpoints(&dir).is_empty());
}

/// Slurm's `scancel` signals every process of a task, and `sweep task` passes its own SIGTERM
/// on, so `train` gets two (or more) at once: one stop, with its checkpoint, not an abort.
#[test]
fn sigterms_at_the_same_moment_are_one_stop_with_a_checkpoint() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("term-twice");
    let child = start_long_run(&dir, &[]);
    let pid = child.id().to_string();
    for signal in ["-TERM", "-TERM", "-INT"] {
        let status = Command::new("kill").args([signal, &pid]).status().unwrap();
        assert!(status.success());
    }
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(143), "{}", stderr(&output));
    assert!(!stderr(&output).contains("aborting"), "{}", stderr(&output));
    assert!(String::from_utf8_lossy(&output.stdout).contains("continue with --resume"));
    assert!(!common::checkpoints(&dir).is_empty());
}

/// A run paused at step 10 of 20 (a checkpoint at step 10), for editing.
fn paused_run(tmp: &Path) -> PathBuf {
    let dir = tmp.join("paused");
    succeeded(&train(&[
        TINY,
        "--out",
        path_str(&dir),
        "--quiet",
        "--stop-at",
        "10",
    ]));
    dir
}

fn resume(dir: &Path, extra: &[&str]) -> Output {
    let mut args = vec![TINY, "--out", path_str(dir), "--quiet", "--resume"];
    args.extend(extra);
    train(&args)
}

#[test]
fn a_resumed_cpu_run_does_not_touch_the_gpu_stack() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = paused_run(tmp.path());
    let output = command(&[TINY, "--out", path_str(&dir), "--quiet", "--resume"])
        .env_remove("XDG_RUNTIME_DIR")
        .output()
        .unwrap();
    succeeded(&output);
    let err = stderr(&output);
    assert!(
        !err.contains("error") && !err.contains("XDG_RUNTIME_DIR"),
        "{err}"
    );
}

#[test]
fn an_edited_missing_or_garbage_config_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = paused_run(tmp.path());
    let config = dir.join("config.toml");
    let original = std::fs::read_to_string(&config).unwrap();

    // Same weight shapes (split layout), other meaning: must not load silently.
    std::fs::write(&config, original.replace("n_heads = 2", "n_heads = 4")).unwrap();
    let err = refused(&resume(&dir, &["--set", "model.n_heads=4"]));
    assert!(
        err.contains("config.toml was changed after the run started"),
        "{err}"
    );

    std::fs::write(&config, "garbage = [").unwrap();
    let err = refused(&resume(&dir, &["--set", "train.lr=0.5"]));
    assert!(err.contains("config.toml was changed"), "{err}");

    std::fs::remove_file(&config).unwrap();
    let err = refused(&resume(&dir, &[]));
    assert!(err.contains("config.toml is missing"), "{err}");

    std::fs::write(&config, &original).unwrap();
    succeeded(&resume(&dir, &[]));
}

#[test]
fn a_checkpoint_state_that_lies_about_its_step_is_not_used() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = paused_run(tmp.path());
    let state = dir.join("checkpoints/step-10/state.json");
    let original = std::fs::read_to_string(&state).unwrap();
    for (step, why) in [
        ("18446744073709551615", "past the run's train.steps = 20"),
        ("5", "it says step 5, but it lies in step-10"),
    ] {
        let edited = original.replace("\"step\": 10", &format!("\"step\": {step}"));
        assert_ne!(edited, original);
        std::fs::write(&state, edited).unwrap();
        let err = refused(&resume(&dir, &[]));
        assert!(
            err.contains("no checkpoint could be loaded") && err.contains(why),
            "{err}"
        );
    }
}

#[test]
fn every_file_of_a_run_gets_the_same_permissions() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    succeeded(&train(&[TINY, "--out", path_str(&dir), "--quiet"]));
    let mode = |name: &str| {
        std::fs::metadata(dir.join(name))
            .unwrap()
            .permissions()
            .mode()
            & 0o777
    };
    let config_mode = mode("config.toml");
    for name in [
        "model.safetensors",
        "metrics.jsonl",
        "run.json",
        "snapshots/step-0.safetensors",
    ] {
        assert_eq!(mode(name), config_mode, "{name}");
    }
}
