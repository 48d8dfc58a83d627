//! A report measures the weights it names (issue 52, breaks 1, 2, 4 and 5): `inspect` refuses a
//! run whose files are not what its manifest recorded, and a report written where it would
//! pass for another run's; every report names the hashes of the files and the options it
//! measured (`provenance.json`), and a sweep counts a report as done only while they are the
//! run's current files and the sweep file's options, measuring it again otherwise; damaged
//! weights are repaired before anything measures them, from the start when no checkpoint is
//! left; `sweep verify` reads a failed run's files too.

#[path = "common/sweep.rs"]
mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;

use common::*;

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A finished sweep of the tiny config with `seeds` and `[inspect] probe = 16` in `dir`: its
/// output directory.
fn finished_sweep(dir: &Path, seeds: &str) -> PathBuf {
    write_sweep(
        dir,
        "one.toml",
        &format!("seeds = {seeds}\n[inspect]\nprobe = 16\n"),
    );
    let run = run_sweep(dir, &["run", "one.toml", "--quiet"]);
    assert!(run.status.success(), "{}", text(&run));
    dir.join("runs/one")
}

/// `headlab inspect ARGS`.
fn inspect(args: &[&str]) -> Output {
    std::process::Command::new(HEADLAB)
        .arg("inspect")
        .args(args)
        .output()
        .unwrap()
}

/// Flips the sign of every third float of a safetensors file's data: the same size, every
/// number of the model changed.
fn flip_signs(path: &Path) {
    let mut bytes = fs::read(path).unwrap();
    let header = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let data = 8 + header;
    for float in (data..bytes.len() - 3).step_by(12) {
        bytes[float + 3] ^= 0x80; // little-endian f32: the sign is the top bit of byte 3
    }
    fs::write(path, bytes).unwrap();
}

fn provenance(run: &Path) -> serde_json::Value {
    serde_json::from_slice(&fs::read(run.join("inspect/provenance.json")).unwrap()).unwrap()
}

/// Break 1: weights damaged (same size) while the report is unfinished. `inspect` refuses
/// them and writes nothing; `sweep run` repairs the weights first and then writes the very
/// report the undamaged run had.
#[test]
fn damaged_weights_are_never_measured_and_the_sweep_repairs_them_first() {
    let dir = tempfile::tempdir().unwrap();
    let run = finished_sweep(dir.path(), "[3]").join("tiny-s3");
    let weights = fs::read(run.join("model.safetensors")).unwrap();
    let report_files = ["heads.json", "provenance.json", "summary.json"]
        .map(|file| fs::read(run.join("inspect").join(file)).unwrap());

    fs::remove_file(run.join("inspect/manifest.json")).unwrap(); // an unfinished report
    flip_signs(&run.join("model.safetensors"));
    let refused = inspect(&[run.to_str().unwrap()]);
    let message = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{message}");
    assert!(
        message.contains("is damaged: model.safetensors has other contents"),
        "{message}"
    );
    assert!(!run.join("inspect/manifest.json").exists());

    let repaired = run_sweep(dir.path(), &["run", "one.toml", "--quiet"]);
    assert!(repaired.status.success(), "{}", text(&repaired));
    let log = fs::read_to_string(dir.path().join("runs/one/_sweep/logs/tiny-s3.log")).unwrap();
    assert!(
        log.contains("# damaged: model.safetensors has other contents"),
        "{log}"
    );
    assert_eq!(fs::read(run.join("model.safetensors")).unwrap(), weights);
    for (file, before) in ["heads.json", "provenance.json", "summary.json"]
        .iter()
        .zip(&report_files)
    {
        assert_eq!(
            &fs::read(run.join("inspect").join(file)).unwrap(),
            before,
            "{file}"
        );
    }
}

/// Breaks 1 and 2: a report written where it would pass for another run's is refused; one
/// measured with other options (a hand-run `inspect`, an edited sweep file) or of other files
/// (another run's report copied in) is stale: not counted, and measured again by `sweep run`.
#[test]
fn a_report_of_other_options_or_another_run_is_stale_and_measured_again() {
    let dir = tempfile::tempdir().unwrap();
    let out = finished_sweep(dir.path(), "[3, 4]");
    let (run_3, run_4) = (out.join("tiny-s3"), out.join("tiny-s4"));
    let heads_3 = fs::read(run_3.join("inspect/heads.json")).unwrap();
    let status = run_sweep(dir.path(), &["status", "one.toml"]);
    assert!(stdout(&status).contains("2 done"), "{}", text(&status));

    for (out_dir, says) in [
        (run_3.join("inspect"), "is inside another run"),
        (run_4.clone(), "is the run directory itself"),
    ] {
        let refused = inspect(&[run_4.to_str().unwrap(), "--out", out_dir.to_str().unwrap()]);
        let message = String::from_utf8_lossy(&refused.stderr);
        assert_eq!(refused.status.code(), Some(1), "{message}");
        assert!(message.contains(says), "{message}");
    }
    assert_eq!(fs::read(run_3.join("inspect/heads.json")).unwrap(), heads_3);

    // A hand-run inspect with another probe size.
    let by_hand = inspect(&[run_3.to_str().unwrap(), "--probe", "2"]);
    assert!(by_hand.status.success(), "{}", text(&by_hand));
    let status = run_sweep(dir.path(), &["status", "one.toml"]);
    assert!(
        stdout(&status).contains("1 stale") && stdout(&status).contains("probe_size 2 (wanted 16)"),
        "{}",
        text(&status)
    );
    let report = run_sweep(dir.path(), &["report", "one.toml"]);
    assert!(
        stdout(&report).contains("1 of 2 runs done"),
        "{}",
        text(&report)
    );
    let again = run_sweep(dir.path(), &["run", "one.toml", "--quiet"]);
    assert!(again.status.success(), "{}", text(&again));
    assert_eq!(provenance(&run_3)["measured_with"]["probe_size"], 16);
    assert_eq!(fs::read(run_3.join("inspect/heads.json")).unwrap(), heads_3);

    // Another run's report copied in whole (what an older `inspect --out` let through).
    fs::remove_dir_all(run_3.join("inspect")).unwrap();
    copy_dir(&run_4.join("inspect"), &run_3.join("inspect"));
    let status = run_sweep(dir.path(), &["status", "one.toml"]);
    assert!(
        stdout(&status).contains("its report is of other files"),
        "{}",
        text(&status)
    );
    let again = run_sweep(dir.path(), &["run", "one.toml", "--quiet"]);
    assert!(again.status.success(), "{}", text(&again));
    assert_eq!(fs::read(run_3.join("inspect/heads.json")).unwrap(), heads_3);

    // The sweep file's inspect options edited: every report is measured again.
    write_sweep(
        dir.path(),
        "one.toml",
        "seeds = [3, 4]\n[inspect]\nprobe = 8\n",
    );
    let status = run_sweep(dir.path(), &["status", "one.toml"]);
    assert!(stdout(&status).contains("2 stale"), "{}", text(&status));
    let again = run_sweep(dir.path(), &["run", "one.toml", "--quiet"]);
    assert!(again.status.success(), "{}", text(&again));
    for run in [&run_3, &run_4] {
        assert_eq!(provenance(run)["measured_with"]["probe_size"], 8);
    }
    let status = run_sweep(dir.path(), &["status", "one.toml"]);
    assert!(stdout(&status).contains("2 done"), "{}", text(&status));
}

/// Break 4: damaged final weights and no checkpoint left to write them from: trained again
/// from the start, to the same bytes.
#[test]
fn damaged_weights_with_no_checkpoint_left_are_trained_again_from_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let run = finished_sweep(dir.path(), "[3]").join("tiny-s3");
    let weights = fs::read(run.join("model.safetensors")).unwrap();
    fs::remove_dir_all(run.join("checkpoints")).unwrap();
    let path = run.join("model.safetensors");
    fs::write(&path, &weights[..weights.len() / 2]).unwrap();
    let repaired = run_sweep(dir.path(), &["run", "one.toml", "--quiet"]);
    assert!(repaired.status.success(), "{}", text(&repaired));
    let log = fs::read_to_string(dir.path().join("runs/one/_sweep/logs/tiny-s3.log")).unwrap();
    assert!(log.contains("training it again from the start"), "{log}");
    assert_eq!(fs::read(&path).unwrap(), weights);
}

/// Break 5: a run whose last attempt failed is still read to the last byte by `verify`.
#[test]
fn verify_reads_the_files_of_a_failed_run_too() {
    let dir = tempfile::tempdir().unwrap();
    let out = finished_sweep(dir.path(), "[3]");
    let run = out.join("tiny-s3");
    fs::remove_file(run.join("inspect/manifest.json")).unwrap();
    fs::create_dir_all(out.join("_sweep/failed")).unwrap();
    fs::write(
        out.join("_sweep/failed/tiny-s3.txt"),
        "exited with 1: a bug\n",
    )
    .unwrap();
    flip_signs(&run.join("model.safetensors"));
    let verify = run_sweep(dir.path(), &["verify", "one.toml"]);
    assert_eq!(verify.status.code(), Some(1), "{}", text(&verify));
    assert!(
        stdout(&verify).contains("tiny-s3: model.safetensors has other contents"),
        "{}",
        text(&verify)
    );
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// A run of a seed group whose weights were damaged at their size under an unfinished report
/// is repaired by its whole group, never alone (its numbers would differ in their last bits),
/// to the very weights and report it had; with its checkpoints gone too, the group trains
/// again from the start, to the same bytes.
#[test]
fn a_seed_groups_damaged_weights_are_repaired_by_the_group() {
    let dir = tempfile::tempdir().unwrap();
    write_sweep(
        dir.path(),
        "pair.toml",
        "seeds = [3, 4]\ngroup_seeds = 2\n[inspect]\nprobe = 16\n",
    );
    let first = run_sweep(dir.path(), &["run", "pair.toml", "--quiet"]);
    assert!(first.status.success(), "{}", text(&first));
    let run = dir.path().join("runs/pair/tiny-s3");
    let weights = fs::read(run.join("model.safetensors")).unwrap();
    let heads = fs::read(run.join("inspect/heads.json")).unwrap();
    for delete_checkpoints in [false, true] {
        fs::remove_file(run.join("inspect/manifest.json")).unwrap(); // an unfinished report
        flip_signs(&run.join("model.safetensors"));
        if delete_checkpoints {
            fs::remove_dir_all(run.join("checkpoints")).unwrap();
        }
        let repaired = run_sweep(dir.path(), &["run", "pair.toml", "--quiet"]);
        assert!(repaired.status.success(), "{}", text(&repaired));
        let log = fs::read_to_string(dir.path().join("runs/pair/_sweep/logs/tiny-s3.log")).unwrap();
        let last_train = log.lines().rfind(|l| l.contains("\"train\"")).unwrap();
        assert!(
            last_train.contains("\"--seeds\""),
            "trained alone: {last_train}"
        );
        assert_eq!(fs::read(run.join("model.safetensors")).unwrap(), weights);
        assert_eq!(fs::read(run.join("inspect/heads.json")).unwrap(), heads);
    }
}
