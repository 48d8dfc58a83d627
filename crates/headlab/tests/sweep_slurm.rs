//! `sweep submit --slurm` on a real Slurm cluster (the single-node one that
//! `scripts/setup/slurm-local.sh start` runs; `.ci/run` starts it and sets
//! HEADLAB_REQUIRE_SLURM=1 so this test cannot skip there), and the array task's own
//! stop-and-resume path.

#[path = "common/sweep.rs"]
mod common;

use std::fs;
use std::process::Command;
use std::time::Duration;

use common::*;

/// Whether a Slurm controller answers with a usable node.
fn slurm_up() -> bool {
    Command::new("sinfo")
        .args(["-h", "-o", "%T"])
        .output()
        .is_ok_and(|o| {
            let states = String::from_utf8_lossy(&o.stdout);
            o.status.success()
                && ["idle", "mixed", "allocated"]
                    .iter()
                    .any(|s| states.contains(s))
        })
}

/// Whether the test can run: a Slurm cluster answers. Without one the test skips, unless
/// HEADLAB_REQUIRE_SLURM=1 (CI), where that is a failure.
fn slurm_or_skip() -> bool {
    if slurm_up() {
        return true;
    }
    let why = "no Slurm cluster answers (start one with scripts/setup/slurm-local.sh install && \
               scripts/setup/slurm-local.sh start)";
    testkit::skip_unless_required("the Slurm test", "HEADLAB_REQUIRE_SLURM", why);
    false
}

#[test]
fn a_sweep_of_four_runs_runs_as_a_job_array_on_slurm() {
    if !slurm_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    write_sweep(
        dir.path(),
        "array.toml",
        "seeds = { count = 2 }\n[grid]\n\"model.head_layout\" = [\"split\", \"narrow\"]\n\
         [inspect]\nprobe = 16\n",
    );
    let submitted = run_sweep(
        dir.path(),
        &[
            "submit",
            "array.toml",
            "--slurm",
            "--max-parallel",
            "2",
            "--time",
            "10",
        ],
    );
    assert!(submitted.status.success(), "{}", text(&submitted));
    let stdout = String::from_utf8_lossy(&submitted.stdout);
    assert!(stdout.contains("4 runs of array (array 0-3)"), "{stdout}");

    let out = dir.path().join("runs/array");
    wait_for(Duration::from_secs(300), "the array's four runs", || {
        let status = run_sweep(dir.path(), &["status", "array.toml"]);
        String::from_utf8_lossy(&status.stdout).contains("4 runs: 4 done")
    });
    for name in [
        "tiny-split-s0",
        "tiny-narrow-s0",
        "tiny-split-s1",
        "tiny-narrow-s1",
    ] {
        assert!(
            out.join(name).join("inspect/index.html").is_file(),
            "{name}"
        );
    }
    let jobs = fs::read_to_string(out.join("_sweep/slurm/jobs.txt")).unwrap();
    let job = jobs.trim();
    assert!(
        !job.is_empty() && job.chars().all(|c| c.is_ascii_digit()),
        "{jobs}"
    );
    // Slurm's own output of each task, with the task's verdict.
    wait_for(Duration::from_secs(30), "Slurm's four task outputs", || {
        (0..4).all(|i| {
            fs::read_to_string(out.join(format!("_sweep/slurm/{job}_{i}.txt")))
                .is_ok_and(|t| t.contains("Done"))
        })
    });

    let again = run_sweep(dir.path(), &["submit", "array.toml", "--slurm"]);
    assert!(again.status.success(), "{}", text(&again));
    assert!(String::from_utf8_lossy(&again.stdout).contains("nothing to submit"));

    let report = run_sweep(dir.path(), &["report", "array.toml"]);
    assert!(report.status.success(), "{}", text(&report));
    let rows = read_csv(&out.join("_sweep/report/sweep.csv"));
    assert_eq!(rows.len(), 5);
    assert!(rows[1..].iter().all(|row| row[1] == "done"), "{rows:?}");
}

/// What Slurm does to a task at its time limit or on preemption: SIGTERM to the batch script,
/// which is `sweep task`. The run checkpoints; the next task for that index resumes it.
#[test]
fn an_array_task_stopped_by_sigterm_is_resumed_by_the_next_one() {
    let dir = tempfile::tempdir().unwrap();
    write_sweep(
        dir.path(),
        "task.toml",
        "seeds = [5]\n[set]\n\"train.steps\" = 600\n\"train.checkpoint_every\" = 20\n\
         \"train.snapshot_every\" = 0\n[inspect]\nenabled = false\n",
    );
    let out = dir.path().join("runs/task");
    let out_arg = out.display().to_string();
    let args = ["task", "task.toml", "--out", &out_arg, "--index", "0"];
    let child = sweep_cmd(dir.path(), &args)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let run = out.join("tiny-s5");
    wait_for(Duration::from_secs(60), "a checkpoint", || {
        has_checkpoint(&run)
    });
    let kill = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(143), "{}", text(&output));
    assert!(!run.join("model.safetensors").exists());

    let output = run_sweep(dir.path(), &args);
    assert!(output.status.success(), "{}", text(&output));
    assert!(run.join("model.safetensors").is_file());
    let log = fs::read_to_string(out.join("_sweep/logs/tiny-s5.log")).unwrap();
    assert!(log.contains("\"--resume\""), "{log}");

    let past = run_sweep(
        dir.path(),
        &["task", "task.toml", "--out", &out_arg, "--index", "1"],
    );
    assert_eq!(past.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&past.stderr).contains("--index 1 is past the plan"));
}

/// The checkpoint steps of `run`, ascending.
fn checkpoint_steps(run: &std::path::Path) -> Vec<u64> {
    let mut steps: Vec<u64> = fs::read_dir(run.join("checkpoints"))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|entry| entry.path().join("state.json").is_file())
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            name.strip_prefix("step-")?.parse().ok()
        })
        .collect();
    steps.sort_unstable();
    steps
}

/// `scancel` signals every process of a running task: `sweep task` and its `train` each get
/// SIGTERM at the same moment, and `sweep task` passes its own on, so `train` gets two. They
/// are one stop: every cancel leaves a stop checkpoint (before 2026-11-26, 1 cancel in 3
/// aborted `train` without one). The run is submitted again after each cancel and resumes.
/// Rounds: HEADLAB_SCANCEL_ROUNDS (default 3; the book's figure, docs/testing.md, is from 20).
#[test]
fn every_scancel_of_a_running_task_leaves_a_stop_checkpoint() {
    if !slurm_or_skip() {
        return;
    }
    let rounds: usize = std::env::var("HEADLAB_SCANCEL_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let dir = tempfile::tempdir().unwrap();
    // Far more steps than a round trains, and no periodic checkpoint: any checkpoint is a
    // stop's.
    write_sweep(
        dir.path(),
        "cancel.toml",
        "seeds = [0]\n[set]\n\"train.steps\" = 1000000\n\"train.checkpoint_every\" = 1000000\n\
         \"train.snapshot_every\" = 0\n\"train.eval_every\" = 1000000\n[inspect]\nenabled = false\n",
    );
    let out = dir.path().join("runs/cancel");
    let run = out.join("tiny-s0");
    let mut last_step = 0;
    for round in 1..=rounds {
        let submitted = run_sweep(dir.path(), &["submit", "cancel.toml", "--slurm"]);
        assert!(submitted.status.success(), "{}", text(&submitted));
        let jobs = fs::read_to_string(out.join("_sweep/slurm/jobs.txt")).unwrap();
        let job = jobs.lines().last().unwrap().trim().to_string();
        // Training, past the step it resumed from.
        let metrics = run.join("metrics.jsonl");
        let lines_before = fs::read_to_string(&metrics).map_or(0, |m| m.lines().count());
        wait_for(Duration::from_secs(120), "the task training", || {
            fs::read_to_string(&metrics).is_ok_and(|m| m.lines().count() > lines_before + 1)
        });
        let cancelled = Command::new("scancel").arg(&job).status().unwrap();
        assert!(cancelled.success(), "scancel {job}");
        wait_for(
            Duration::from_secs(60),
            "the job to leave the queue",
            || {
                Command::new("squeue")
                    .args(["-h", "-j", &job])
                    .output()
                    .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim().is_empty())
            },
        );
        let steps = checkpoint_steps(&run);
        let newest = steps.last().copied().unwrap_or(0);
        let log = fs::read_to_string(out.join("_sweep/logs/tiny-s0.log")).unwrap_or_default();
        assert!(
            newest > last_step,
            "round {round}: no new stop checkpoint after scancel (checkpoints {steps:?}); \
             log:\n{log}"
        );
        assert!(!log.contains("aborting"), "round {round}: {log}");
        // train's own word that it stopped cleanly, once per cancel so far.
        assert_eq!(
            log.matches("SIGTERM received: saving a checkpoint").count(),
            round,
            "round {round}: {log}"
        );
        last_step = newest;
    }
}
