//! The corpus of broken inputs in `tests/bad_inputs/`: every `NN-name.toml` there is run
//! through the `train` binary, and must fail with one clear message holding each line of
//! `NN-name.expect`. `NN-name.args`, when present, adds command-line arguments (one per line).
//! Adding a case is adding files; no code changes.
//!
//! Cases run with the corpus directory as the current directory, so `task.path` in the
//! configs is relative to it (`data/...`) and messages name files as the user wrote them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;

#[path = "common/train.rs"]
mod common;
use common::{TINY, train_cmd};

const CORPUS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../train/tests/bad_inputs");

/// Words that say what would be accepted; every message needs one of them.
const ACCEPTED_HINTS: [&str; 9] = [
    "expected",
    "must",
    "did you mean",
    "choose",
    "possible values",
    "needs",
    "remove",
    "at least",
    "once",
];

/// Runs `train` in `dir` with a backtrace asked for, so that a panic could not hide.
fn train(dir: &Path, args: &[String]) -> Output {
    train_cmd(args)
        .current_dir(dir)
        .env("RUST_BACKTRACE", "1")
        .output()
        .expect("the train binary runs")
}

/// Every case's name (the config file's stem), sorted.
fn cases() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(CORPUS)
        .expect("the corpus directory exists")
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "toml"))
        .map(|path| path.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Non-empty lines of `NN-name.<ext>`, or none when the file does not exist.
fn lines(case: &str, ext: &str) -> Option<Vec<String>> {
    let text = std::fs::read_to_string(Path::new(CORPUS).join(format!("{case}.{ext}"))).ok()?;
    Some(
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .map(str::to_string)
            .collect(),
    )
}

/// What is wrong with how `train` handled `case`, if anything.
fn check(case: &str, out: &Path) -> Vec<String> {
    let mut problems = vec![];
    let Some(expected) = lines(case, "expect") else {
        return vec![format!("{case}.expect is missing")];
    };
    if expected.is_empty() {
        problems.push(format!("{case}.expect has no lines"));
    }
    let mut args = vec![
        format!("{case}.toml"),
        "--out".to_string(),
        out.display().to_string(),
        "--quiet".to_string(),
    ];
    args.extend(lines(case, "args").unwrap_or_default());
    let output = train(Path::new(CORPUS), &args);
    let err = String::from_utf8_lossy(&output.stderr);

    if output.status.success() {
        problems.push("it succeeded".into());
    }
    for line in &expected {
        if !err.contains(line.as_str()) {
            problems.push(format!("stderr lacks {line:?}"));
        }
    }
    for word in ["panicked", "backtrace", "RUST_BACKTRACE"] {
        if err.contains(word) {
            problems.push(format!("stderr mentions {word:?}"));
        }
    }
    if !err.starts_with("error") {
        problems.push("the message does not start with \"error\"".into());
    }
    if err.trim_end().lines().any(|l| l.trim().is_empty()) {
        problems.push("the message is more than one paragraph".into());
    }
    let names_where = [format!("{case}.toml"), "--set".into(), "--backend".into()]
        .iter()
        .any(|s| err.contains(s.as_str()));
    if !names_where {
        problems.push("the message names neither the file nor the --set/--backend at fault".into());
    }
    if !ACCEPTED_HINTS.iter().any(|hint| err.contains(hint)) {
        problems.push("the message does not say what would be accepted".into());
    }
    if out.exists() {
        problems.push(format!("the run directory {} was created", out.display()));
    }
    problems
        .into_iter()
        .map(|p| format!("{case}: {p}\n  stderr: {}", err.trim_end()))
        .collect()
}

#[test]
fn every_bad_input_gets_one_clear_message_and_no_run_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let cases = cases();
    assert!(
        cases.len() >= 30,
        "the corpus has {} cases, expected at least 30",
        cases.len()
    );
    let problems: Vec<String> = cases
        .iter()
        .flat_map(|case| check(case, &tmp.path().join(case)))
        .collect();
    assert!(
        problems.is_empty(),
        "{} problem(s):\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// Every file under `dir`, with its bytes.
fn contents(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(contents(&path));
        } else {
            files.insert(path.clone(), std::fs::read(&path).unwrap());
        }
    }
    files
}

#[test]
fn a_bad_config_with_force_leaves_the_existing_run_untouched() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let dir_arg = dir.display().to_string();
    let first = train(
        tmp.path(),
        &[
            TINY.into(),
            "--out".into(),
            dir_arg.clone(),
            "--quiet".into(),
        ],
    );
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let before = contents(&dir);
    assert!(before.keys().any(|p| p.ends_with("model.safetensors")));

    // Config validation must come before --force clears the directory: both a value that
    // does not parse and one that parses but is out of range.
    for set in ["model.n_heads=x", "model.n_heads=3", "train.lr=0"] {
        let output = train(
            tmp.path(),
            &[
                TINY.into(),
                "--out".into(),
                dir_arg.clone(),
                "--set".into(),
                set.into(),
                "--force".into(),
            ],
        );
        let err = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "--set {set} was accepted");
        assert!(err.starts_with("error: "), "{err}");
        assert!(
            contents(&dir) == before,
            "--set {set} --force changed the run directory"
        );
    }
}

/// Records of different lengths were once refused (the corpus's case 47); batches pad them
/// now, so the same file trains.
#[test]
fn a_file_of_records_of_different_lengths_trains() {
    let tmp = tempfile::tempdir().unwrap();
    let dataset = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../train/tests/fixtures/varying-lengths.jsonl"
    );
    let config = std::fs::read_to_string(TINY).unwrap().replace(
        "kind = \"reverse\"\nseq_len = 6\nvocab_size = 5",
        &format!("kind = \"file\"\npath = \"{dataset}\""),
    );
    assert!(config.contains("varying-lengths.jsonl"), "{config}");
    let config_path = tmp.path().join("varying.toml");
    std::fs::write(&config_path, config).unwrap();
    let dir = tmp.path().join("run");
    let output = train(
        tmp.path(),
        &[
            config_path.display().to_string(),
            "--out".into(),
            dir.display().to_string(),
            "--quiet".into(),
        ],
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(dir.join("model.safetensors").exists());
}

/// A config that is a device, a FIFO or far too large is refused by name before it is read:
/// a read of `/dev/zero` would fill the memory, one of a FIFO would wait forever.
#[test]
fn a_config_that_is_not_a_small_regular_file_is_refused_unread() {
    let tmp = tempfile::tempdir().unwrap();
    let fifo = tmp.path().join("fifo.toml");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let big = tmp.path().join("big.toml");
    std::fs::write(&big, vec![b'#'; 2 << 20]).unwrap();
    let cases = [
        (
            PathBuf::from("/dev/zero"),
            "it is a device, not a regular file",
        ),
        (fifo, "it is a FIFO (named pipe), not a regular file"),
        (big, "it is 2 MiB, over the 1 MiB this file may hold"),
    ];
    for (config, says) in cases {
        let out = tmp.path().join("run");
        let args = [
            config.display().to_string(),
            "--out".to_string(),
            out.display().to_string(),
        ];
        let output = train(tmp.path(), &args);
        let err = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{}: {err}", config.display());
        assert!(
            err.starts_with("error: cannot read config file")
                && err.contains(&config.display().to_string())
                && err.contains(says)
                && err.trim_end().lines().count() == 1,
            "{err}"
        );
        assert!(
            !out.exists(),
            "{}: a run directory was made",
            config.display()
        );
    }
}
