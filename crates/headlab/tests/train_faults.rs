//! A full disk and a read-only run directory: `train` stops with one message that names the
//! path and the cause, exits non-zero without a panic, and the checkpoints written before
//! stay whole (a run resumed from them ends with the weights of an uninterrupted run).
//!
//! Both faults are real ones: each test runs `train` inside a private mount namespace
//! (`unshare --mount`, as root, or with `--map-root-user` otherwise) on a tmpfs of its own,
//! a small one that fills up, or one remounted read-only. The mounts are seen by no other
//! process and vanish with the namespace. Where the system does not allow that, the tests
//! print why and pass, unless `HEADLAB_REQUIRE_MOUNTS` is set (as `.ci/run` does).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use burn::optim::AdamWConfig;
use run::{BackendKind, RunConfig, checkpoint};

#[path = "common/train.rs"]
mod common;
use common::{HEADLAB, TINY, final_tensors, train_cmd};

/// The disk-full runs, each on a tmpfs with room for the config and five checkpoints, not
/// six: one where checkpoints fill the disk (one at every step, 56 kB each on tmpfs, no
/// snapshots, metrics only at the end), and one where snapshots do (one at every step, a
/// checkpoint every fourth). With the prefix of the message each must stop with.
const DISK_FULL_CASES: [(&str, [&str; 6], &str); 2] = [
    (
        "checkpoints",
        [
            "train.steps=200",
            "train.checkpoint_every=1",
            "train.keep_checkpoints=1000",
            "train.snapshot_every=0",
            "train.log_every=1000",
            "train.eval_every=1000",
        ],
        "error: cannot write checkpoint $RUN/checkpoints/step-",
    ),
    (
        "snapshots",
        [
            "train.steps=200",
            "train.checkpoint_every=4",
            "train.keep_checkpoints=1000",
            "train.snapshot_every=1",
            "train.log_every=1000",
            "train.eval_every=1000",
        ],
        "error: cannot write $RUN/snapshots/step-",
    ),
];

/// Room for the config and five checkpoints, not six.
const DISK_FULL_KB: usize = 300;

/// How to enter a private mount namespace here, or why that is not possible.
fn unshare_prefix() -> Result<Vec<&'static str>, String> {
    let probe_dir = tempfile::tempdir().unwrap();
    let mut reasons = vec![];
    for prefix in [
        vec!["unshare", "--mount"],
        vec!["unshare", "--map-root-user", "--mount"],
    ] {
        let probe = Command::new(prefix[0])
            .args(&prefix[1..])
            .args([
                "sh",
                "-c",
                "mount -t tmpfs -o size=16k headlab-probe \"$0\"",
            ])
            .arg(probe_dir.path())
            .output();
        match probe {
            Ok(output) if output.status.success() => return Ok(prefix),
            Ok(output) => reasons.push(format!(
                "`{} mount -t tmpfs` failed: {}",
                prefix.join(" "),
                String::from_utf8_lossy(&output.stderr).trim()
            )),
            Err(e) => reasons.push(format!("cannot run {}: {e}", prefix[0])),
        }
    }
    Err(reasons.join("; "))
}

/// Runs the shell `script` in a private mount namespace with `vars` in its environment, or
/// returns None after saying why it was skipped.
fn in_private_mounts(test: &str, script: &str, vars: &[(&str, &Path)]) -> Option<Output> {
    let prefix = match unshare_prefix() {
        Ok(prefix) => prefix,
        Err(reason) => {
            let why = format!("no private tmpfs can be mounted on this machine ({reason})");
            testkit::skip_unless_required(test, "HEADLAB_REQUIRE_MOUNTS", &why);
            return None;
        }
    };
    let mut command = Command::new(prefix[0]);
    command
        .args(&prefix[1..])
        .args(["sh", "-c", script])
        .env("HEADLAB", HEADLAB)
        .env("TINY", TINY)
        .env(
            "XDG_RUNTIME_DIR",
            std::env::var("XDG_RUNTIME_DIR").unwrap_or("/tmp".into()),
        );
    for (name, value) in vars {
        command.env(name, value);
    }
    let output = command.output().expect("unshare runs");
    assert!(
        output.status.success(),
        "the namespace script failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Some(output)
}

fn train(config_sets: &[&str], dir: &Path, extra: &[&str]) -> Output {
    train_cmd(&[TINY, "--out"])
        .arg(dir)
        .arg("--quiet")
        .args(config_sets.iter().flat_map(|set| ["--set", set]))
        .args(extra)
        .output()
        .expect("the train binary runs")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Checks a failed run's stderr: one message that names `path` and `cause`, no panic.
fn check_failure(what: &str, status: &str, stderr: &str, path: &Path, cause: &str) {
    assert_eq!(status.trim(), "1", "{what}: exit status; stderr: {stderr}");
    assert!(stderr.starts_with("error: "), "{what}: {stderr}");
    assert!(!stderr.contains("panicked"), "{what}: {stderr}");
    assert!(
        stderr.contains(&path.display().to_string()),
        "{what}: the message does not name {}: {stderr}",
        path.display()
    );
    assert_eq!(stderr.matches(cause).count(), 1, "{what}: {stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{what}: {stderr}");
}

/// Every checkpoint of the run in `dir` loads whole; returns their steps, newest first.
fn loadable_checkpoints(dir: &Path, config_sets: &[&str]) -> Vec<usize> {
    let sets: Vec<String> = config_sets.iter().map(|s| s.to_string()).collect();
    let run = RunConfig::load(Path::new(TINY), &sets)
        .unwrap()
        .resolve(Path::new(TINY))
        .unwrap();
    let device = BackendKind::Flex.device().unwrap().autodiff();
    let run_dir = run::RunDir::open(dir).unwrap();
    checkpoint::list(&run_dir)
        .into_iter()
        .map(|(step, _)| {
            let model = run.config.model.init(&run.io, &device).unwrap();
            let optim = AdamWConfig::new().init();
            let (_, _, state) = checkpoint::load(&run_dir, step, usize::MAX, model, optim)
                .unwrap_or_else(|e| panic!("an earlier checkpoint is damaged: {e}"));
            assert_eq!(state.step, step);
            step
        })
        .collect()
}

/// Resumes the run copied to `copy` to its end on a sound disk, and checks that it ends
/// where an uninterrupted run of the same config does.
fn resumes_to_the_uninterrupted_weights(copy: &Path, config_sets: &[&str], scratch: &Path) {
    let resumed = train(config_sets, copy, &["--resume"]);
    assert!(
        resumed.status.success(),
        "{}",
        String::from_utf8_lossy(&resumed.stderr)
    );
    let whole = scratch.join("whole");
    let uninterrupted = train(config_sets, &whole, &[]);
    assert!(uninterrupted.status.success());
    assert_eq!(final_tensors(&whole), final_tensors(copy));
}

/// Every file under `dir` with its bytes, by path relative to `dir`.
fn contents(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files = vec![];
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(contents(&path).into_iter().map(|(p, b)| {
                let name = path.file_name().unwrap();
                (Path::new(name).join(p), b)
            }));
        } else {
            let name = PathBuf::from(path.file_name().unwrap());
            files.push((name, std::fs::read(&path).unwrap()));
        }
    }
    files.sort();
    files
}

#[test]
fn a_full_disk_stops_the_run_with_the_path_and_keeps_earlier_checkpoints() {
    for (case, sets, expected) in DISK_FULL_CASES {
        let tmp = tempfile::tempdir().unwrap();
        let (mnt, out) = (tmp.path().join("mnt"), tmp.path().join("out"));
        std::fs::create_dir_all(&mnt).unwrap();
        std::fs::create_dir_all(&out).unwrap();
        let set_args: String = sets.iter().map(|s| format!(" --set {s}")).collect();
        let script = format!(
            r#"set -u
mount -t tmpfs -o size={DISK_FULL_KB}k headlab-full "$MNT"
"$HEADLAB" train "$TINY" --out "$MNT/run" --quiet{set_args} >"$OUT/stdout" 2>"$OUT/stderr"
echo $? >"$OUT/status"
cp -a "$MNT/run" "$OUT/run""#
        );
        let vars = [("MNT", mnt.as_path()), ("OUT", out.as_path())];
        let test = format!("the disk-full test ({case})");
        let Some(_) = in_private_mounts(&test, &script, &vars) else {
            return;
        };

        let stderr = read(&out.join("stderr"));
        let run_in_mount = mnt.join("run");
        check_failure(
            &test,
            &read(&out.join("status")),
            &stderr,
            &run_in_mount,
            "No space left on device",
        );
        let expected = expected.replace("$RUN", &run_in_mount.display().to_string());
        assert!(stderr.starts_with(&expected), "{test}: {stderr}");

        // The checkpoints written before the disk filled are all there and whole, and the
        // write that failed left nothing behind.
        let copy = out.join("run");
        let steps = loadable_checkpoints(&copy, &sets);
        assert!(steps.len() >= 2, "{test}: {steps:?}");
        let every = if case == "checkpoints" { 1 } else { 4 };
        let expected_steps: Vec<usize> = (1..=steps[0] / every).rev().map(|k| k * every).collect();
        assert_eq!(steps, expected_steps, "{test}");
        for sub in ["checkpoints", "snapshots", ""] {
            let leftovers: Vec<_> = std::fs::read_dir(copy.join(sub))
                .into_iter()
                .flatten()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|name| name.starts_with('.') && name != ".lock")
                .collect();
            assert!(leftovers.is_empty(), "{test}: {leftovers:?}");
        }
        assert!(!copy.join("model.safetensors").exists());

        resumes_to_the_uninterrupted_weights(&copy, &sets, tmp.path());
    }
}

#[test]
fn a_read_only_run_directory_is_refused_by_path_and_left_as_it_was() {
    let tmp = tempfile::tempdir().unwrap();
    let (mnt, out) = (tmp.path().join("mnt"), tmp.path().join("out"));
    std::fs::create_dir_all(&mnt).unwrap();
    std::fs::create_dir_all(&out).unwrap();
    // A run paused at step 12 (checkpoints 10 and 12), then the file system goes read-only,
    // then: a new run, --resume, and --force on the paused run.
    let script = r#"set -u
mount -t tmpfs -o size=8m headlab-ro "$MNT"
"$HEADLAB" train "$TINY" --out "$MNT/run" --quiet --stop-at 12 >/dev/null || exit 1
cp -a "$MNT/run" "$OUT/before"
mount -o remount,ro "$MNT"
"$HEADLAB" train "$TINY" --out "$MNT/new" --quiet >/dev/null 2>"$OUT/new.stderr"
echo $? >"$OUT/new.status"
"$HEADLAB" train "$TINY" --out "$MNT/run" --quiet --resume >/dev/null 2>"$OUT/resume.stderr"
echo $? >"$OUT/resume.status"
"$HEADLAB" train "$TINY" --out "$MNT/run" --quiet --force >/dev/null 2>"$OUT/force.stderr"
echo $? >"$OUT/force.status"
cp -a "$MNT/run" "$OUT/after""#;
    let vars = [("MNT", mnt.as_path()), ("OUT", out.as_path())];
    let Some(_) = in_private_mounts("the read-only test", script, &vars) else {
        return;
    };

    let run_in_mount = mnt.join("run");
    for (case, path) in [
        ("new", mnt.join("new")),
        // Resuming starts by locking the run, which needs its lock file writable.
        ("resume", run_in_mount.join(".lock")),
        ("force", run_in_mount.clone()),
    ] {
        check_failure(
            case,
            &read(&out.join(format!("{case}.status"))),
            &read(&out.join(format!("{case}.stderr"))),
            &path,
            "Read-only file system",
        );
    }

    let (before, after) = (out.join("before"), out.join("after"));
    assert_eq!(contents(&before), contents(&after), "the run was changed");
    assert_eq!(loadable_checkpoints(&after, &[]), [12, 10]);
    resumes_to_the_uninterrupted_weights(&after, &[], tmp.path());
}
