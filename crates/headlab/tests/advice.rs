//! Every piece of advice that names a command is a command that works (issue 67): each
//! situation is made as a user meets it, the command is read out of the message as printed
//! (its placeholders, `CONFIG`, `RUN`, `NEW_DIR`, filled in as a user would), run, and
//! checked to do what the advice says. Advice once named commands that refused (`train
//! --resume` for an imported run, `train RUN --force` for a run directory).

#[path = "common/headlab.rs"]
mod headlab;

use std::path::{Path, PathBuf};
use std::process::Output;

const SUBCOMMANDS: [&str; 6] = ["train", "inspect", "import", "compare", "verify", "sweep"];

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The commands a message names, each as its words: `headlab SUBCOMMAND ...` up to a
/// backtick, a bracket, a comma, a semicolon or the line's end, a final full stop dropped.
fn advised(message: &str) -> Vec<Vec<String>> {
    let mut commands = vec![];
    let mut rest = message;
    while let Some(at) = rest.find("headlab ") {
        let after = &rest[at + "headlab ".len()..];
        let end = after
            .find(['`', ')', '(', ',', ';', '\n'])
            .unwrap_or(after.len());
        let words: Vec<String> = after[..end]
            .trim()
            .trim_end_matches('.')
            .split_whitespace()
            .map(str::to_string)
            .collect();
        if words
            .first()
            .is_some_and(|w| SUBCOMMANDS.contains(&w.as_str()))
        {
            commands.push(words);
        }
        rest = after;
    }
    commands
}

/// The one command of `message` whose words start with `prefix` (`["train", "CONFIG"]`),
/// its placeholders filled from `fill`.
fn the_command(message: &str, prefix: &[&str], fill: &[(&str, &Path)]) -> Vec<String> {
    let matching: Vec<Vec<String>> = advised(message)
        .into_iter()
        .filter(|words| {
            words.len() >= prefix.len() && words.iter().zip(prefix).all(|(w, p)| w == p)
        })
        .collect();
    assert_eq!(matching.len(), 1, "one `headlab {prefix:?}` in: {message}");
    matching[0]
        .iter()
        .map(|word| match fill.iter().find(|(name, _)| name == word) {
            Some((_, path)) => path.display().to_string(),
            None => word.clone(),
        })
        .collect()
}

/// Runs `headlab WORDS...` in `cwd`, as a user follows the advice, and checks that it
/// succeeded.
fn follow(words: &[String], cwd: &Path) -> Output {
    let output = headlab::command(&words[0], &words[1..])
        .current_dir(cwd)
        .output()
        .unwrap();
    assert!(output.status.success(), "{words:?}: {}", stderr(&output));
    output
}

fn succeeds(subcommand: &str, args: &[&Path]) -> Output {
    let output = headlab::run(subcommand, args);
    assert!(
        output.status.success(),
        "{subcommand} {args:?}: {}",
        stderr(&output)
    );
    output
}

fn tiny() -> PathBuf {
    PathBuf::from(testkit::TINY_CONFIG)
}

fn trained(parent: &Path, name: &str) -> PathBuf {
    let run = parent.join(name);
    succeeds(
        "train",
        &[&tiny(), Path::new("--out"), &run, Path::new("--quiet")],
    );
    run
}

/// Flips a byte near the end of `path`: damage at the same size.
fn flip_byte(path: &Path) {
    let mut bytes = std::fs::read(path).unwrap();
    let at = bytes.len() - 10;
    bytes[at] ^= 0xff;
    std::fs::write(path, bytes).unwrap();
}

fn inspects(run: &Path) -> Output {
    headlab::run("inspect", &[run, Path::new("--quiet")])
}

/// A trained run with a flipped weight byte: `inspect` names `train RUN --resume` and
/// `train CONFIG --out RUN --force`; each repairs it, so `inspect` then measures it.
#[test]
fn the_advice_for_a_damaged_run_repairs_it_both_ways() {
    let tmp = tempfile::tempdir().unwrap();
    let run = trained(tmp.path(), "tiny");
    let run_arg = run.display().to_string();
    for prefix in [["train", run_arg.as_str()], ["train", "CONFIG"]] {
        flip_byte(&run.join("model.safetensors"));
        let refused = inspects(&run);
        assert_eq!(refused.status.code(), Some(1));
        let words = the_command(&stderr(&refused), &prefix, &[("CONFIG", &tiny())]);
        follow(&words, tmp.path());
        let again = inspects(&run);
        assert!(
            again.status.success(),
            "after {words:?}: {}",
            stderr(&again)
        );
    }
}

/// A run without its manifest (final weights there): `inspect` names `train RUN --resume`,
/// which seals it.
#[test]
fn the_advice_for_an_unfinished_run_finishes_it() {
    let tmp = tempfile::tempdir().unwrap();
    let run = trained(tmp.path(), "tiny");
    std::fs::remove_file(run.join("manifest.json")).unwrap();
    let refused = inspects(&run);
    assert_eq!(refused.status.code(), Some(1));
    let words = the_command(&stderr(&refused), &["train"], &[]);
    follow(&words, tmp.path());
    assert!(run.join("manifest.json").is_file());
    assert!(inspects(&run).status.success());
}

/// A run directory given to `train` as a config: both commands it names work, the first
/// (`--resume`) on the run, the second (`CONFIG --out NEW_DIR`) into a new directory.
#[test]
fn the_advice_for_a_run_given_as_a_config_works_both_ways() {
    let tmp = tempfile::tempdir().unwrap();
    let run = trained(tmp.path(), "tiny");
    let refused = headlab::run("train", &[&run]);
    assert_eq!(refused.status.code(), Some(1));
    let message = stderr(&refused);
    let run_arg = run.display().to_string();
    let resume = the_command(&message, &["train", &run_arg, "--resume"], &[]);
    follow(&resume, tmp.path());
    let new_dir = tmp.path().join("again");
    let config = run.join("config.toml").display().to_string();
    let retrain = the_command(&message, &["train", &config], &[("NEW_DIR", &new_dir)]);
    follow(&retrain, tmp.path());
    assert!(new_dir.join("manifest.json").is_file());
}

/// A config given to `inspect`: `train CONFIG` makes the run, whose directory it prints, and
/// that directory inspects.
#[test]
fn the_advice_for_a_config_given_as_a_run_trains_it() {
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("tiny.toml");
    std::fs::copy(tiny(), &config).unwrap();
    let refused = inspects(&config);
    assert_eq!(refused.status.code(), Some(1));
    let words = the_command(&stderr(&refused), &["train"], &[]);
    let followed = follow(&words, tmp.path());
    let printed = stdout(&followed);
    let run = printed
        .lines()
        .find_map(|line| line.strip_prefix("run directory: "))
        .unwrap_or_else(|| panic!("the run directory is printed: {printed}"));
    let run = tmp.path().join(run.trim());
    assert!(inspects(&run).status.success());
}

/// A damaged report: `verify` names `inspect RUN --out DIR`, which writes it again whole.
#[test]
fn the_advice_for_a_damaged_report_writes_it_again() {
    let tmp = tempfile::tempdir().unwrap();
    let run = trained(tmp.path(), "tiny");
    let report = tmp.path().join("report");
    succeeds(
        "inspect",
        &[&run, Path::new("--out"), &report, Path::new("--quiet")],
    );
    flip_byte(&report.join("summary.json"));
    let refused = headlab::run("verify", &[&report]);
    assert_eq!(refused.status.code(), Some(1));
    let words = the_command(&stderr(&refused), &["inspect"], &[("RUN", &run)]);
    follow(&words, tmp.path());
    succeeds("verify", &[&report]);
}

/// An imported run given to `train`: `inspect RUN` measures it. And `import`'s closing
/// line names the inspect that follows.
#[test]
fn the_advice_for_an_imported_run_inspects_it() {
    let tmp = tempfile::tempdir().unwrap();
    let checkpoint =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../model/tests/fixtures/bert/one-layer");
    let run = tmp.path().join("bert");
    let imported = succeeds("import", &[&checkpoint, Path::new("--out"), &run]);
    let next = the_command(&stdout(&imported), &["inspect"], &[]);
    follow(&next, tmp.path());

    let refused = headlab::run("train", &[&run.join("config.toml")]);
    assert_eq!(refused.status.code(), Some(1));
    let words = the_command(&stderr(&refused), &["inspect"], &[("RUN", &run)]);
    follow(&words, tmp.path());
}

/// Two imported models compared with the larger first: the order `compare` names works.
#[test]
fn the_advice_for_a_comparison_in_the_wrong_order_compares_them() {
    let tmp = tempfile::tempdir().unwrap();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../model/tests/fixtures/bert");
    let small = tmp.path().join("small");
    let large = tmp.path().join("large");
    succeeds(
        "import",
        &[
            &fixtures.join("one-layer"),
            Path::new("--out"),
            &small,
            Path::new("--quiet"),
        ],
    );
    succeeds(
        "import",
        &[
            &fixtures.join("three-layers-mlm"),
            Path::new("--out"),
            &large,
            Path::new("--quiet"),
        ],
    );
    let out = tmp.path().join("comparison");
    let refused = headlab::run("compare", &[&large, &small, Path::new("--out"), &out]);
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    let mut words = the_command(&stderr(&refused), &["compare"], &[]);
    words.extend(["--out".to_string(), out.display().to_string()]);
    follow(&words, tmp.path());
}
