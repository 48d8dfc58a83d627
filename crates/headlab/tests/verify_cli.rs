//! `headlab verify DIR`: a run and a report checked against their manifests, a flipped byte
//! and a removed manifest found, each with the command that repairs it, and a directory that
//! is neither refused by name.

#[path = "../../report/tests/common/mod.rs"]
mod common;
#[path = "common/headlab.rs"]
mod headlab;

use std::path::Path;
use std::process::Output;

const TINY: &str = testkit::TINY_CONFIG;

fn verify(dir: &Path) -> Output {
    headlab::run("verify", &[dir])
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn a_run_and_its_report_are_verified_and_damage_is_named_with_the_repair() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run");
    common::train_run(Path::new(TINY), &["train.steps=10"], &run);
    let output = verify(&run);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(
        text(&output.stdout).contains(": an intact run: its "),
        "{}",
        text(&output.stdout)
    );

    let inspected = headlab::run("inspect", &[run.as_path()]);
    assert!(inspected.status.success(), "{}", text(&inspected.stderr));
    let report = run.join("inspect");
    let output = verify(&report);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(text(&output.stdout).contains(": an intact report: its "));

    // A report an `inspect` is writing: not judged, its writer named, the status of a held
    // directory (its files are being replaced, and would read as damage).
    let held = run::out_dir::claim(&report, &report::dir::REPORT_KIND).unwrap();
    let output = verify(&report);
    assert_eq!(
        output.status.code(),
        Some(i32::from(run::dir::EXIT_RUN_IN_USE))
    );
    assert!(
        text(&output.stderr).contains(&format!(
            "is being written by process {} (inspect)",
            std::process::id()
        )),
        "{}",
        text(&output.stderr)
    );
    drop(held);

    // A flipped byte: found by content, not by size.
    let weights = run.join("model.safetensors");
    let mut bytes = std::fs::read(&weights).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&weights, &bytes).unwrap();
    let sizes = headlab::run("verify", &[run.as_path(), Path::new("--sizes-only")]);
    assert!(sizes.status.success(), "a flipped byte keeps the size");
    let output = verify(&run);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        text(&output.stdout).contains("damaged: model.safetensors"),
        "{}",
        text(&output.stdout)
    );
    let err = text(&output.stderr);
    assert!(
        err.contains("is a damaged run: 1 of its files differ"),
        "{err}"
    );
    assert!(
        err.contains(&format!("headlab train {} --resume", run.display())),
        "{err}"
    );

    // No manifest: unfinished, with the same repair; the repair, run, makes it intact.
    std::fs::remove_file(run.join("manifest.json")).unwrap();
    let err = text(&verify(&run).stderr);
    assert!(
        err.contains("is an unfinished run: it has no manifest.json"),
        "{err}"
    );
    let repaired = headlab::run("train", &[run.as_path(), Path::new("--resume")]);
    assert!(repaired.status.success(), "{}", text(&repaired.stderr));
    assert!(verify(&run).status.success());

    // Neither a run nor a report.
    let plain = tmp.path().join("plain");
    std::fs::create_dir(&plain).unwrap();
    std::fs::write(plain.join("notes.txt"), "mine").unwrap();
    let output = verify(&plain);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        text(&output.stderr).contains("is neither a headlab run (no run.json) nor a report"),
        "{}",
        text(&output.stderr)
    );
}
