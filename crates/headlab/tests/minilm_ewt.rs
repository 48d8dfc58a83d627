//! all-MiniLM-L6-v2 read on natural text as a user reads it (`headlab import`, then `headlab
//! inspect` with no probe option: the shipped UD English EWT test set), its relation scores
//! equal, label by label and head by head, to a reading with Hugging Face `transformers`
//! written independently in Python (`scripts/fixtures/ewt_reference.py`, committed as
//! `tests/fixtures/minilm-ewt-reference.json`, so CI needs no PyTorch); and on sentences
//! typed with `--text`, its words and word-level attention equal to `transformers`' reading
//! of the raw text (`scripts/fixtures/text_reference.py`, within 1e-5).

#[path = "common/headlab.rs"]
mod headlab;
#[path = "common/word_attention.rs"]
mod word_attention;

use std::path::Path;

use inspect::measures::relations::Relations;
use report::dir::ReportDir;
use serde_json::Value;

/// A reference in `tests/fixtures`. `minilm-ewt-reference.json`: `sentences`, `near_tie`,
/// and per label (`relations`) its `arcs`, `baseline` (`offset`, `score`), per head
/// (layer-major) `dependent_to_head` and `head_to_dependent`, and per head `..._near`: the
/// arcs whose two largest word weights are within `near_tie`, where float32 rounding may pick
/// either word. `minilm-text-reference.json`: `sentences`, each its `text`, `words` and
/// `attention` `[layer][head][n + 2][n + 2]`.
fn fixture(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// `headlab SUBCOMMAND ARGS...`, which must succeed.
fn succeeds(subcommand: &str, args: &[&Path]) {
    let output = headlab::run(subcommand, args);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// all-MiniLM-L6-v2 imported from `checkpoint` into `parent/minilm`.
fn imported(checkpoint: &Path, parent: &Path) -> std::path::PathBuf {
    let run = parent.join("minilm");
    succeeds("import", &[checkpoint, Path::new("--out"), &run]);
    run
}

fn numbers(value: &Value) -> Vec<f64> {
    let list = value.as_array().expect("a list");
    list.iter().map(|v| v.as_f64().expect("a number")).collect()
}

#[test]
fn minilm_on_the_shipped_treebank_scores_as_transformers_reads_it() {
    let Some(checkpoint) = testkit::minilm_dir("the MiniLM treebank test") else {
        return;
    };
    let reference = fixture("minilm-ewt-reference.json");
    let tmp = tempfile::tempdir().unwrap();
    let run = imported(&checkpoint, tmp.path());
    let count = reference["sentences"].as_u64().unwrap() as usize;
    let sentences = count.to_string();
    let args = [
        run.as_path(),
        Path::new("--relation-sentences"),
        Path::new(&sentences),
        Path::new("--probe"),
        Path::new("8"),
        Path::new("--no-patching"),
        Path::new("--quiet"),
    ];
    succeeds("inspect", &args);
    let relations: Relations = ReportDir::new(run.join("inspect")).read_json().unwrap();
    assert_eq!(relations.sentences, count);
    let mut compared = 0;
    for (label, expected) in reference["relations"].as_object().unwrap() {
        let ours = relations
            .relations
            .iter()
            .find(|r| &r.relation == label)
            .unwrap_or_else(|| panic!("no {label} in relations.json"));
        let arcs = expected["arcs"].as_u64().unwrap() as usize;
        assert_eq!(ours.arcs, arcs, "{label}: arcs");
        let baseline = &expected["baseline"];
        assert_eq!(
            Some(ours.baseline.offset),
            baseline["offset"].as_i64(),
            "{label}"
        );
        let score = baseline["score"].as_f64().unwrap();
        assert!(
            (ours.baseline.score - score).abs() < 1e-12,
            "{label}: offset score"
        );
        let (to_head, to_dependent) = (
            numbers(&expected["dependent_to_head"]),
            numbers(&expected["head_to_dependent"]),
        );
        let (near_head, near_dependent) = (
            numbers(&expected["dependent_to_head_near"]),
            numbers(&expected["head_to_dependent_near"]),
        );
        assert_eq!(ours.heads.len(), to_head.len(), "{label}: heads");
        for (column, head) in ours.heads.iter().enumerate() {
            let pairs = [
                (head.dependent_to_head, to_head[column], near_head[column]),
                (
                    head.head_to_dependent,
                    to_dependent[column],
                    near_dependent[column],
                ),
            ];
            for (direction, (ours, theirs, near)) in pairs.into_iter().enumerate() {
                // Each near tie may fall either way: at most one arc's credit apiece.
                let allowed = near / arcs as f64 + 1e-9;
                assert!(
                    (ours - theirs).abs() <= allowed,
                    "{label}, {}, direction {direction}: headlab {ours}, transformers {theirs} \
                     ({near} near ties of {} arcs)",
                    head.id,
                    arcs
                );
                compared += 1;
            }
        }
    }
    assert!(compared > 1000, "only {compared} scores compared");
}

#[test]
fn minilm_reads_typed_sentences_word_by_word_as_transformers_does() {
    let Some(checkpoint) = testkit::minilm_dir("the MiniLM typed-text test") else {
        return;
    };
    let reference = fixture("minilm-text-reference.json");
    let sentences = reference["sentences"].as_array().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let run = imported(&checkpoint, tmp.path());
    let mut args: Vec<&Path> = vec![run.as_path()];
    for sentence in sentences {
        args.extend([
            Path::new("--text"),
            Path::new(sentence["text"].as_str().unwrap()),
        ]);
    }
    let report = run.join("typed");
    args.extend(
        [
            Path::new("--no-patching"),
            Path::new("--quiet"),
            Path::new("--out"),
            &report,
        ]
        .iter()
        .copied(),
    );
    succeeds("inspect", &args);

    let largest = word_attention::largest_difference(&report, sentences, ["[CLS]", "[SEP]"]);
    assert!(
        largest < 1e-5,
        "word-level attention differs by up to {largest}"
    );
}

/// A typed sentence of 510 words fills MiniLM's 512 positions: one sequence, measured
/// within the memory bound, where the bound was once counted for `--probe`'s 64 sequences
/// and refused it (issue 67).
#[test]
fn minilm_reads_one_typed_sentence_as_long_as_its_positions() {
    let Some(checkpoint) = testkit::minilm_dir("the MiniLM long-sentence test") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let run = imported(&checkpoint, tmp.path());
    let text = ["the cat"; 255].join(" ");
    let out = tmp.path().join("long");
    succeeds(
        "inspect",
        &[
            run.as_path(),
            Path::new("--text"),
            Path::new(&text),
            Path::new("--no-patching"),
            Path::new("--out"),
            &out,
            Path::new("--quiet"),
        ],
    );
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["probe"]["sentences"][0], text.as_str());
}
