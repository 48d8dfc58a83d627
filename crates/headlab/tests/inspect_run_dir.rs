//! `inspect` reads runs only through `RunDir`: a file run from any directory (its dataset is
//! the run's own copy), a run whose original dataset changed afterwards, a run still training
//! (its newest checkpoint), and refusals, by name, of a run whose config or dataset copy was
//! edited.

#[path = "../../report/tests/common/mod.rs"]
mod common;
#[path = "common/headlab.rs"]
mod headlab;

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Output;

const TINY: &str = testkit::TINY_CONFIG;

fn inspect_in(cwd: &Path, args: &[&str]) -> Output {
    headlab::command("inspect", args)
        .current_dir(cwd)
        .output()
        .unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// `target` written relative to this process's current directory, the way a user who
/// trained from here would have written it in a config.
fn relative_to_here(target: &Path) -> PathBuf {
    let here = std::env::current_dir().unwrap().canonicalize().unwrap();
    let target = target.canonicalize().unwrap();
    let ups = here.components().count() - 1;
    let mut relative = PathBuf::new();
    for _ in 0..ups {
        relative.push("..");
    }
    relative.join(target.strip_prefix("/").unwrap())
}

/// A file run of the tiny model trained into `tmp/run` on `tmp/data.jsonl`, named in the
/// config by a path relative to the test's current directory.
fn file_run(tmp: &Path) -> PathBuf {
    let dataset = tmp.join("data.jsonl");
    let mut lines = String::new();
    for i in 0..40u32 {
        let input: Vec<u32> = (0..6).map(|j| (i * 3 + j) % 5).collect();
        let target: Vec<u32> = input.iter().rev().copied().collect();
        lines.push_str(&format!(
            "{{\"input\": {input:?}, \"target\": {target:?}}}\n"
        ));
    }
    std::fs::write(&dataset, lines).unwrap();
    let config = std::fs::read_to_string(TINY).unwrap().replace(
        "kind = \"reverse\"\nseq_len = 6\nvocab_size = 5",
        &format!(
            "kind = \"file\"\npath = \"{}\"",
            relative_to_here(&dataset).display()
        ),
    );
    let config_path = tmp.join("file.toml");
    std::fs::write(&config_path, config).unwrap();
    let run = tmp.join("run");
    common::train_run(&config_path, &["train.snapshot_every=0"], &run);
    run
}

fn accuracy_line(output: &Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout);
    stdout.lines().next().unwrap_or_default().to_string()
}

#[test]
fn a_file_run_is_inspected_from_anywhere_on_its_own_copy_of_the_data() {
    let tmp = tempfile::tempdir().unwrap();
    let run = file_run(tmp.path());
    let elsewhere = tmp.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let run_arg = run.to_str().unwrap();

    let first = inspect_in(&elsewhere, &[run_arg, "--probe", "4"]);
    assert!(first.status.success(), "{}", stderr(&first));

    // The original dataset is cut in half after training: the run still reads what it was
    // trained and evaluated on.
    let dataset = tmp.path().join("data.jsonl");
    let text = std::fs::read_to_string(&dataset).unwrap();
    std::fs::write(&dataset, &text[..text.len() / 2]).unwrap();
    let again = inspect_in(&elsewhere, &[run_arg, "--probe", "4"]);
    assert!(again.status.success(), "{}", stderr(&again));
    assert_eq!(accuracy_line(&again), accuracy_line(&first));

    // The run's own copy edited: refused by name.
    let copy = run.join("dataset.jsonl");
    let copied = std::fs::read_to_string(&copy).unwrap();
    std::fs::write(&copy, copied.replacen("[0", "[1", 1)).unwrap();
    let refused = inspect_in(&elsewhere, &[run_arg]);
    let err = stderr(&refused);
    assert!(!refused.status.success());
    assert!(
        err.starts_with("error: ")
            && err.contains("dataset.jsonl was changed after the run started"),
        "{err}"
    );
}

#[test]
fn a_run_with_an_edited_or_missing_config_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run");
    common::train_run(Path::new(TINY), &["train.snapshot_every=0"], &run);
    let config = run.join("config.toml");
    let original = std::fs::read_to_string(&config).unwrap();
    let run_arg = run.to_str().unwrap();

    std::fs::write(&config, original.replace("n_heads = 2", "n_heads = 4")).unwrap();
    let output = inspect_in(tmp.path(), &[run_arg]);
    let err = stderr(&output);
    assert!(!output.status.success());
    assert!(
        err.contains("config.toml was changed after the run started"),
        "{err}"
    );

    std::fs::remove_file(&config).unwrap();
    let err = stderr(&inspect_in(tmp.path(), &[run_arg]));
    assert!(err.contains("config.toml is missing"), "{err}");

    let err = stderr(&inspect_in(tmp.path(), &[tmp.path().to_str().unwrap()]));
    assert!(err.contains("is not a headlab run directory"), "{err}");
}

/// A finished run whose manifest was deleted used to be inspected with its damage check off
/// (a flipped weight byte went unseen; issue 67). Without its manifest the run is unfinished:
/// `inspect` and `compare` refuse it with the command that finishes it, and that command,
/// run as the message gives it, makes the run whole again.
#[test]
fn a_run_without_its_manifest_is_refused_with_the_command_that_finishes_it() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run");
    common::train_run(Path::new(TINY), &["train.steps=20"], &run);
    let run_arg = run.to_str().unwrap();
    std::fs::remove_file(run.join("manifest.json")).unwrap();
    let weights = run.join("model.safetensors");
    let mut bytes = std::fs::read(&weights).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x40;
    std::fs::write(&weights, &bytes).unwrap();

    let output = inspect_in(tmp.path(), &[run_arg]);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{err}");
    assert!(
        err.contains("has final weights but no manifest.json"),
        "{err}"
    );
    let advice = format!("headlab train {run_arg} --resume");
    assert!(err.contains(&advice), "{err}");
    let compared = headlab::run("compare", &[run_arg, run_arg]);
    assert!(
        stderr(&compared).contains("has final weights but no manifest.json"),
        "{}",
        stderr(&compared)
    );

    // The advice, as given: the final weights are written again from the last checkpoint.
    let finished = headlab::run("train", &[run_arg, "--resume"]);
    assert!(finished.status.success(), "{}", stderr(&finished));
    assert!(run.join("manifest.json").is_file());
    assert_ne!(
        std::fs::read(&weights).unwrap(),
        bytes,
        "the flipped byte is gone"
    );
    let output = inspect_in(tmp.path(), &[run_arg]);
    assert!(output.status.success(), "{}", stderr(&output));
}

/// Holds `run`'s lock as `train` does while it trains.
fn hold_writer_lock(run: &Path) -> File {
    let mut file = OpenOptions::new()
        .write(true)
        .open(run.join(".lock"))
        .unwrap();
    file.try_lock().unwrap();
    file.set_len(0).unwrap();
    file.write_all(b"process 4242 (train)\n").unwrap();
    file
}

#[test]
fn a_run_still_training_is_read_from_its_newest_checkpoint() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run");
    common::train_run(Path::new(TINY), &["train.snapshot_every=0"], &run);
    let run_arg = run.to_str().unwrap();
    let _lock = hold_writer_lock(&run);

    let output = inspect_in(tmp.path(), &[run_arg, "--probe", "4"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(
        err.contains("still training (process 4242 (train))")
            && err.contains("newest checkpoint, step-20"),
        "{err}"
    );

    // No checkpoint yet: said plainly.
    std::fs::remove_dir_all(run.join("checkpoints")).unwrap();
    let output = inspect_in(tmp.path(), &[run_arg]);
    let err = stderr(&output);
    assert!(!output.status.success());
    assert!(
        err.contains("still training") && err.contains("no checkpoint yet"),
        "{err}"
    );
}

#[test]
fn a_checkpoint_name_cannot_leave_the_run() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run");
    common::train_run(Path::new(TINY), &["train.snapshot_every=0"], &run);
    let output = inspect_in(
        tmp.path(),
        &[run.to_str().unwrap(), "--checkpoint", "../../etc"],
    );
    let err = stderr(&output);
    assert!(!output.status.success());
    assert!(
        err.contains("names are step-N") && err.contains("step-20"),
        "{err}"
    );
}
