//! Faults of the runner itself: `sweep run` killed with SIGKILL leaves no child running (on
//! Linux each child gets one SIGTERM when its parent dies, checkpoints and exits), and two
//! `sweep run` of one sweep at once share the work: each run trained by one of them, once,
//! and no run recorded as failed because the other held it; a seed group whose `train
//! --seeds` is killed trains again as the group, to the very weights of a group never
//! interrupted. `scripts/check/fault-test.sh` injects these faults and more at random
//! moments and compares every run with a fault-free one.

#[path = "common/sweep.rs"]
mod common;

use std::fs;
use std::path::Path;
use std::time::Duration;

use common::*;

/// A sweep of `seeds` tiny runs long enough (600 steps) to be caught in the middle.
fn long_sweep(dir: &Path, seeds: &str) {
    long_sweep_grouped(dir, seeds, 1);
}

/// [`long_sweep`] with its seeds trained in groups of `group`.
fn long_sweep_grouped(dir: &Path, seeds: &str, group: usize) {
    write_sweep(
        dir,
        "long.toml",
        &format!(
            r#"
seeds = {seeds}
group_seeds = {group}
[set]
"train.steps" = 600
"train.checkpoint_every" = 20
"train.snapshot_every" = 0
[inspect]
probe = 8
"#
        ),
    );
}

/// Process ids of the live processes whose parent is `parent` and that run one of
/// `subcommands` (`headlab train`, `headlab inspect`): the sweep's children are all `headlab`.
fn children_running(parent: u32, subcommands: &[&str]) -> Vec<u32> {
    let mut found = vec![];
    for entry in fs::read_dir("/proc").unwrap().flatten() {
        let Ok(stat) = fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        if &stat[open + 1..close] != "headlab"
            || fields.get(1) != Some(&parent.to_string().as_str())
        {
            continue;
        }
        // argv, NUL-separated: headlab SUBCOMMAND ...
        let Ok(cmdline) = fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let subcommand = cmdline.split(|&b| b == 0).nth(1).unwrap_or_default();
        if subcommands.iter().any(|s| s.as_bytes() == subcommand) {
            found.push(entry.file_name().to_string_lossy().parse().unwrap());
        }
    }
    found
}

/// Whether process `pid` is alive (a zombie counts as gone).
fn alive(pid: u32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit(')')
            .next()
            .is_some_and(|s| !s.trim_start().starts_with('Z'))
    })
}

#[test]
#[cfg(target_os = "linux")]
fn a_runner_killed_with_sigkill_leaves_no_child_running() {
    let dir = tempfile::tempdir().unwrap();
    long_sweep(dir.path(), "[0, 1]");
    let out = dir.path().join("runs/long");
    let mut runner = sweep_cmd(
        dir.path(),
        &["run", "long.toml", "--workers", "2", "--quiet"],
    )
    .stdout(std::process::Stdio::null())
    .spawn()
    .unwrap();
    let runner_pid = runner.id();
    let mut trains = vec![];
    wait_for(
        Duration::from_secs(120),
        "two trains with a checkpoint",
        || {
            trains = children_running(runner_pid, &["train"]);
            trains.len() == 2
                && has_checkpoint(&out.join("tiny-s0"))
                && has_checkpoint(&out.join("tiny-s1"))
        },
    );
    runner.kill().unwrap(); // SIGKILL
    runner.wait().unwrap();
    // Each got one SIGTERM: it finishes its step, checkpoints and exits, within seconds.
    wait_for(
        Duration::from_secs(5),
        "the orphaned trains to stop",
        || trains.iter().all(|&pid| !alive(pid)),
    );
    for name in ["tiny-s0", "tiny-s1"] {
        let run = out.join(name);
        assert!(
            !run.join("model.safetensors").exists(),
            "{name} stopped before its end"
        );
        assert!(has_checkpoint(&run), "{name} kept its checkpoint");
    }
    // Run again, the sweep resumes both and finishes them.
    let again = run_sweep(
        dir.path(),
        &["run", "long.toml", "--workers", "2", "--quiet"],
    );
    assert!(again.status.success(), "{}", text(&again));
    let stdout = String::from_utf8_lossy(&again.stdout);
    assert!(
        stdout.contains("2 done now, 0 done before, 0 failed"),
        "{stdout}"
    );
    for name in ["tiny-s0", "tiny-s1"] {
        let log = fs::read_to_string(out.join(format!("_sweep/logs/{name}.log"))).unwrap();
        assert!(log.contains("\"--resume\""), "{name} resumed:\n{log}");
    }
}

#[test]
fn two_runners_of_one_sweep_share_it_and_train_each_run_once() {
    let dir = tempfile::tempdir().unwrap();
    long_sweep(dir.path(), "[0, 1, 2, 3]");
    let out = dir.path().join("runs/long");
    let start = || {
        sweep_cmd(
            dir.path(),
            &["run", "long.toml", "--workers", "1", "--quiet"],
        )
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
    };
    let (first, second) = (start(), start());
    let (first, second) = (
        first.wait_with_output().unwrap(),
        second.wait_with_output().unwrap(),
    );
    // Each ran what the other did not hold; the one that finds nothing left may exit 0 with
    // runs "held by another process".
    for output in [&first, &second] {
        assert!(output.status.success(), "{}", text(output));
    }
    assert!(
        !out.join("_sweep/failed").exists()
            || fs::read_dir(out.join("_sweep/failed"))
                .unwrap()
                .next()
                .is_none(),
        "no run recorded as failed"
    );
    let status = run_sweep(dir.path(), &["status", "long.toml"]);
    let stdout = String::from_utf8_lossy(&status.stdout);
    assert!(stdout.contains("4 runs: 4 done"), "{stdout}");
    for seed in 0..4 {
        let log = fs::read_to_string(out.join(format!("_sweep/logs/tiny-s{seed}.log"))).unwrap();
        let trains = log
            .lines()
            .filter(|l| l.starts_with("$ ") && l.contains("train\""))
            .count();
        assert_eq!(trains, 1, "tiny-s{seed} was trained once:\n{log}");
    }
}

#[test]
#[cfg(target_os = "linux")]
fn a_seed_group_whose_train_is_killed_trains_again_as_the_group() {
    // The reference: the group never interrupted.
    let reference = tempfile::tempdir().unwrap();
    long_sweep_grouped(reference.path(), "[0, 1]", 2);
    let done = run_sweep(reference.path(), &["run", "long.toml", "--quiet"]);
    assert!(done.status.success(), "{}", text(&done));

    let dir = tempfile::tempdir().unwrap();
    long_sweep_grouped(dir.path(), "[0, 1]", 2);
    let out = dir.path().join("runs/long");
    let mut runner = sweep_cmd(dir.path(), &["run", "long.toml", "--quiet"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut trains = vec![];
    wait_for(
        Duration::from_secs(120),
        "the group training with checkpoints",
        || {
            trains = children_running(runner.id(), &["train"]);
            trains.len() == 1
                && has_checkpoint(&out.join("tiny-s0"))
                && has_checkpoint(&out.join("tiny-s1"))
        },
    );
    let status = std::process::Command::new("kill")
        .args(["-9", &trains[0].to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    // The runner trains the group again (resumed together), then inspects both.
    let finished = runner.wait().unwrap();
    assert!(finished.success(), "the runner ended with {finished}");
    for name in ["tiny-s0", "tiny-s1"] {
        assert_eq!(
            fs::read(out.join(name).join("model.safetensors")).unwrap(),
            fs::read(
                reference
                    .path()
                    .join("runs/long")
                    .join(name)
                    .join("model.safetensors")
            )
            .unwrap(),
            "{name}: the faulted group's weights differ from the group's never interrupted"
        );
        let log = fs::read_to_string(out.join(format!("_sweep/logs/{name}.log"))).unwrap();
        let trains: Vec<&str> = log
            .lines()
            .filter(|l| l.starts_with("$ ") && l.contains("\"train\""))
            .collect();
        assert!(
            trains.len() >= 2 && trains.iter().all(|l| l.contains("--seeds")),
            "{name} trained only with its group, twice:\n{log}"
        );
    }
}
