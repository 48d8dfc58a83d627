//! `headlab inspect --set task.KEY=VALUE --relation-sentences N` on an imported model: the
//! probe and `relations.json` read another version of the grammar (the classed lexicon, a
//! dose of selection) and as many sentences as asked, the run's `config.toml` is not
//! touched, `summary.json` records the overrides; every bad override is refused by name.

#[path = "common/headlab.rs"]
mod headlab;

use std::path::{Path, PathBuf};
use std::process::Output;

use inspect::inspection::summary::Summary;
use inspect::measures::relations::Relations;
use report::dir::ReportDir;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../model/tests/fixtures/bert")
        .join(name)
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn inspect(run: &Path, args: &[&str], out: &Path) -> Output {
    let mut all: Vec<&std::ffi::OsStr> = vec![run.as_os_str()];
    all.extend(args.iter().map(std::ffi::OsStr::new));
    all.extend(["--out".as_ref(), out.as_os_str()]);
    headlab::run("inspect", &all)
}

/// The one-layer fixture imported into `parent/run`.
fn imported(parent: &Path) -> PathBuf {
    let run = parent.join("run");
    let output = headlab::run(
        "import",
        &[fixture("one-layer"), "--out".into(), run.clone()],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    run
}

#[test]
fn an_imported_model_is_probed_with_the_task_version_and_sentences_asked_for() {
    let tmp = tempfile::tempdir().unwrap();
    let run = imported(tmp.path());
    let config_before = std::fs::read(run.join("config.toml")).unwrap();

    let classed = [
        "--set",
        "task.lexicon=classes",
        "--set",
        "task.nouns=36",
        "--set",
        "task.selection=1",
    ];
    let report = tmp.path().join("classed");
    let mut args = classed.to_vec();
    args.extend([
        "--probe",
        "4",
        "--relation-sentences",
        "30",
        "--no-patching",
    ]);
    let output = inspect(&run, &args, &report);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(
        std::fs::read(run.join("config.toml")).unwrap(),
        config_before
    );
    let dir = ReportDir::new(&report);
    let summary: Summary = dir.read_json().unwrap();
    assert_eq!(
        summary.task_overrides,
        ["task.lexicon=classes", "task.nouns=36", "task.selection=1"]
    );
    // 30 sentences asked for; one the fixture's 40 positions cannot hold may be left out.
    let relations: Relations = dir.read_json().unwrap();
    assert!(
        (25..=30).contains(&relations.sentences),
        "{} sentences",
        relations.sentences
    );
    // The classed lexicon's food, vehicles, places and tools: words the default grammar's
    // people and animals never include.
    let explore = std::fs::read_to_string(report.join("explore.html")).unwrap();
    let classed_only = [
        "cake", "cakes", "car", "cars", "city", "hammer", "pie", "bus", "park", "knife", "rope",
        "ropes", "truck", "school", "boat", "market", "garden", "spoon", "pear", "carrot",
    ];
    assert!(
        classed_only
            .iter()
            .any(|word| explore.contains(&format!("\"{word}\""))),
        "no classed noun in the probe"
    );

    // Without --set: the run's own task, nothing recorded.
    let plain = tmp.path().join("plain");
    let output = inspect(&run, &["--probe", "4", "--no-patching"], &plain);
    assert!(output.status.success(), "{}", stderr(&output));
    let summary: Summary = ReportDir::new(&plain).read_json().unwrap();
    assert!(summary.task_overrides.is_empty());
    let relations: Relations = ReportDir::new(&plain).read_json().unwrap();
    assert!(
        relations.sentences > 400,
        "{} sentences",
        relations.sentences
    );
}

#[test]
fn bad_task_overrides_and_sentence_counts_are_refused_by_name() {
    let tmp = tempfile::tempdir().unwrap();
    let run = imported(tmp.path());
    let out = tmp.path().join("report");
    let refused = |args: &[&str], code: i32, says: &str| {
        let output = inspect(&run, args, &out);
        assert_eq!(
            output.status.code(),
            Some(code),
            "{args:?}: {}",
            stderr(&output)
        );
        let text = stderr(&output);
        assert!(text.contains(says), "{args:?}: {text}");
        assert!(!text.contains("panicked"), "{text}");
        assert!(!out.exists(), "{args:?} wrote a report");
    };
    refused(
        &["--set", "train.lr=1"],
        1,
        "--set train.lr: inspect changes only the probe's task",
    );
    refused(&["--set", "task.kind=reverse"], 1, "--set task.kind:");
    refused(
        &["--set", "task.selection=2"],
        1,
        "inspect --set task.selection=2: ",
    );
    refused(
        &["--set", "task.selection=2"],
        1,
        "expected 0 <= selection <= 1",
    );
    refused(&["--set", "task.no_such_key=1"], 1, "no_such_key");
    refused(&["--relation-sentences", "0"], 2, "from 1 to 4096");
    refused(&["--relation-sentences", "4097"], 2, "from 1 to 4096");

    // A model headlab trained reads its own task's tokens.
    let tiny = Path::new(testkit::TINY_CONFIG);
    let trained = tmp.path().join("tiny");
    let output = headlab::run("train", &[tiny, Path::new("--out"), &trained]);
    assert!(output.status.success(), "{}", stderr(&output));
    let output = inspect(&trained, &["--set", "task.seq_len=4"], &out);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("is a model headlab trained"),
        "{}",
        stderr(&output)
    );
}

/// A treebank probe with no sentence the model can read is refused with the numbers, before
/// anything is written (it panicked deep in a forward pass); one usable sentence among long
/// ones is enough.
#[test]
fn a_treebank_without_a_sentence_that_fits_is_refused_with_the_numbers() {
    let tmp = tempfile::tempdir().unwrap();
    let run = imported(tmp.path());
    let word = |id: usize, head: usize| format!("{id}\tdog\t_\tNOUN\t_\t_\t{head}\tdep\t_\t_\n");
    // 20 words: 22 pieces with [CLS] and [SEP], over the fixture's 16 positions.
    let long: String = (1..=20)
        .map(|i| word(i, usize::from(i > 1)))
        .collect::<String>()
        + "\n";
    let short = "1\tthe\t_\tDET\t_\t_\t2\tdet\t_\t_\n2\tdog\t_\tNOUN\t_\t_\t0\troot\t_\t_\n\n";
    let cases = [
        (
            "empty",
            String::new(),
            "holds no sentence (it is empty, or only comments)",
        ),
        (
            "comments",
            "# sent_id = 1\n\n".to_string(),
            "holds no sentence",
        ),
        (
            "long",
            long.clone(),
            "none of the 1 sentence(s) fits the model's 16 positions",
        ),
        // Issue 52, break 12: a word the tokenizer drops was "word pieces out of order".
        (
            "zero-width",
            short.replace("2\tdog", "2\t\u{200b}"),
            "word 2 (\"\\u{200b}\") is no word piece at all",
        ),
    ];
    for (name, text, says) in cases {
        let treebank = tmp.path().join(format!("{name}.conllu"));
        std::fs::write(&treebank, text).unwrap();
        let out = tmp.path().join(format!("out-{name}"));
        let output = inspect(&run, &["--probe-conllu", treebank.to_str().unwrap()], &out);
        let err = stderr(&output);
        assert!(!output.status.success(), "{name}: {err}");
        assert!(
            err.starts_with("error: ") && err.contains(says) && !err.contains("panicked"),
            "{name}: {err}"
        );
        assert!(!out.exists(), "{name}: something was written");
    }
    let mixed = tmp.path().join("mixed.conllu");
    std::fs::write(&mixed, format!("{long}{short}")).unwrap();
    let out = tmp.path().join("out-mixed");
    let output = inspect(&run, &["--probe-conllu", mixed.to_str().unwrap()], &out);
    assert!(output.status.success(), "{}", stderr(&output));
}

/// Issue 51, item 2: an imported model reads natural text by default, the treebank headlab
/// ships (UD English EWT's test set, built in), and every report names its probe: on both
/// pages, in `summary.json` and in `provenance.json`; `--probe-task` is the grammar again, and
/// `--set task.KEY=VALUE` implies it.
#[test]
fn an_imported_model_reads_the_shipped_treebank_unless_told_otherwise() {
    let tmp = tempfile::tempdir().unwrap();
    let run = imported(tmp.path());
    let shipped = "treebank UD English EWT r2.16 (en_ewt-ud-test.conllu, shipped with headlab)";
    let cases: [(&str, &[&str], &str, &str); 3] = [
        ("default", &[], "shipped_treebank", shipped),
        ("task", &["--probe-task"], "task", "task grammar,"),
        (
            "set",
            &["--set", "task.ditransitive_prob=0.5"],
            "task",
            "task grammar with task.ditransitive_prob=0.5,",
        ),
    ];
    for (name, extra, kind, named) in cases {
        let out = tmp.path().join(name);
        let mut args = vec!["--probe", "4", "--no-patching"];
        args.extend(extra);
        let output = inspect(&run, &args, &out);
        assert!(output.status.success(), "{name}: {}", stderr(&output));
        let dir = ReportDir::new(&out);
        let summary: Summary = dir.read_json().unwrap();
        let probe = serde_json::to_value(&summary.probe).unwrap();
        assert_eq!(probe["kind"], kind, "{name}: {probe}");
        let provenance: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("provenance.json")).unwrap()).unwrap();
        assert_eq!(provenance["measured_with"]["probe"], probe, "{name}");
        for page in ["index.html", "explore.html"] {
            let text = std::fs::read_to_string(out.join(page)).unwrap();
            assert!(
                text.contains(named),
                "{name}: {page} does not name its probe"
            );
        }
        let relations: Relations = dir.read_json().unwrap();
        let labels: Vec<&str> = relations
            .relations
            .iter()
            .map(|r| r.relation.as_str())
            .collect();
        // UD's labels on natural text (`punct`, `obj`, `case`), the grammar's own on its
        // sentences (`dobj`, which UD calls `obj`).
        let natural = labels.iter().any(|l| ["punct", "obj", "case"].contains(l));
        let treebank = kind == "shipped_treebank";
        assert_eq!(natural, treebank, "{name}: {labels:?}");
        assert_eq!(labels.contains(&"dobj"), !treebank, "{name}: {labels:?}");
    }
    let output = inspect(
        &run,
        &["--probe-task", "--probe-conllu", "x.conllu"],
        &tmp.path().join("both"),
    );
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("cannot be used with"),
        "{}",
        stderr(&output)
    );
}
