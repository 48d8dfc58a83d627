//! Text models trained here (`kind = "text"`): a tiny masked LM trained a few steps on a
//! corpus written by the test, the tokenizer it trains written into the run (the same bytes
//! for every seed), exact resume, a corpus changed under a run refused, bad corpora and
//! sizes refused in one line naming the file or key with nothing written; and the run read
//! as an imported model is, through its own tokenizer: on the shipped treebank (relations)
//! and on typed text.

use std::path::Path;
use std::process::Output;

#[path = "common/train.rs"]
mod common;
#[path = "common/headlab.rs"]
mod headlab;
use common::{HEADLAB, final_tensors, run_train, write_text_config, write_text_corpus};

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn assert_success(output: &Output) {
    assert!(output.status.success(), "{}", stderr(output));
}

/// A trained text run: its tokenizer is written and recorded, every seed's is the same, and
/// a run stopped half-way and resumed ends with the uninterrupted run's weights.
#[test]
fn a_text_run_writes_its_tokenizer_and_resumes_exactly() {
    let tmp = tempfile::tempdir().unwrap();
    write_text_corpus(&tmp.path().join("corpus.jsonl"));
    let config = write_text_config(tmp.path(), "corpus.jsonl", 10);
    let config = config.to_str().unwrap();
    let whole = tmp.path().join("whole");
    assert_success(&run_train(&[config, "--out", whole.to_str().unwrap()]));
    let tokenizer = std::fs::read_to_string(whole.join("tokenizer.json")).unwrap();
    assert!(tokenizer.contains("\"[MASK]\": 4"), "{tokenizer}");
    let marker: serde_json::Value =
        serde_json::from_slice(&std::fs::read(whole.join("run.json")).unwrap()).unwrap();
    assert!(
        marker["text"]["corpus"]
            .as_str()
            .unwrap()
            .ends_with("corpus.jsonl")
    );
    let manifest = std::fs::read_to_string(whole.join("manifest.json")).unwrap();
    assert!(manifest.contains("tokenizer.json"), "{manifest}");

    // Another seed reads the corpus with the same tokenizer, byte for byte.
    let other_seed = tmp.path().join("seed1");
    let output = run_train(&[
        config,
        "--out",
        other_seed.to_str().unwrap(),
        "--set",
        "seed=1",
    ]);
    assert_success(&output);
    assert_eq!(
        std::fs::read_to_string(other_seed.join("tokenizer.json")).unwrap(),
        tokenizer
    );
    assert_ne!(final_tensors(&other_seed), final_tensors(&whole));

    let split = tmp.path().join("split");
    let split_arg = split.to_str().unwrap();
    assert_success(&run_train(&[config, "--out", split_arg, "--stop-at", "5"]));
    assert_success(&run_train(&[split_arg, "--resume"]));
    assert_eq!(final_tensors(&split), final_tensors(&whole));
}

/// A corpus edited under a run is refused on resume, naming the corpus.
#[test]
fn a_corpus_changed_under_a_run_is_refused_on_resume() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = tmp.path().join("corpus.jsonl");
    write_text_corpus(&corpus);
    let config = write_text_config(tmp.path(), "corpus.jsonl", 10);
    let run = tmp.path().join("run");
    let (config, run) = (config.to_str().unwrap(), run.to_str().unwrap());
    assert_success(&run_train(&[config, "--out", run, "--stop-at", "5"]));
    let mut text = std::fs::read_to_string(&corpus).unwrap();
    text.push_str("{\"text\": \"One more document.\"}\n");
    std::fs::write(&corpus, text).unwrap();
    let output = run_train(&[config, "--out", run, "--resume"]);
    assert!(!output.status.success());
    let err = stderr(&output);
    assert!(
        err.contains("corpus.jsonl") && err.contains("another corpus"),
        "{err}"
    );
}

/// Bad corpora, tokenizers and sizes: one line naming the file or key, no run directory.
#[test]
fn bad_corpora_and_sizes_are_refused_naming_the_file_or_key() {
    let tmp = tempfile::tempdir().unwrap();
    write_text_corpus(&tmp.path().join("corpus.jsonl"));
    std::fs::write(
        tmp.path().join("latin1.jsonl"),
        b"{\"text\": \"caf\xe9\"}\n",
    )
    .unwrap();
    std::fs::write(tmp.path().join("short.jsonl"), "{\"text\": \"one\"}\n").unwrap();
    std::fs::write(tmp.path().join("no-mask.json"), "{\"version\": \"1.0\"}").unwrap();
    let config = write_text_config(tmp.path(), "corpus.jsonl", 10);
    for (sets, says) in [
        (vec!["missing.jsonl"], "cannot read task.corpus"),
        (
            vec!["latin1.jsonl"],
            "latin1.jsonl is not UTF-8 text (line 1, byte 14",
        ),
        (vec!["short.jsonl"], "holds 1 documents"),
        (
            vec!["task.vocab_size=3"],
            "task.vocab_size = 3 is out of range",
        ),
        (
            vec!["task.mask_rate=0.0"],
            "task.mask_rate = 0 is out of range",
        ),
        (vec!["no-mask.json"], "cannot use task.tokenizer"),
    ] {
        let out = tmp.path().join("out");
        let mut args = vec![
            config.to_str().unwrap().to_string(),
            "--out".into(),
            out.to_str().unwrap().into(),
        ];
        for set in &sets {
            // A file name stands for the corpus (the tokenizer, for a .json) in the test's
            // directory.
            let set = match set.strip_suffix(".jsonl").or(set.strip_suffix(".json")) {
                Some(_) => {
                    let key = if set.ends_with(".jsonl") {
                        "corpus"
                    } else {
                        "tokenizer"
                    };
                    format!("task.{key}=\"{}\"", tmp.path().join(set).display())
                }
                None => set.to_string(),
            };
            args.extend(["--set".to_string(), set]);
        }
        let output = run_train(&args);
        let err = stderr(&output);
        assert!(!output.status.success(), "{sets:?}");
        assert!(
            err.starts_with("error: ") && err.contains(says),
            "{sets:?}: {err}"
        );
        assert!(!err.contains("panicked"), "{sets:?}: {err}");
        assert!(!out.exists(), "{sets:?}: a run directory was written");
    }
}

/// A text run is read as an imported model is, through its own tokenizer: on the shipped
/// treebank by default (relations scored on its parses) and on typed text (no parse).
#[test]
fn a_text_run_is_inspected_on_the_treebank_and_on_typed_text() {
    let tmp = tempfile::tempdir().unwrap();
    write_text_corpus(&tmp.path().join("corpus.jsonl"));
    let config = write_text_config(tmp.path(), "corpus.jsonl", 5);
    let run = tmp.path().join("run");
    let run_arg = run.to_str().unwrap();
    assert_success(&run_train(&[config.to_str().unwrap(), "--out", run_arg]));

    let inspect = |extra: &[&str]| {
        std::process::Command::new(HEADLAB)
            .args(["inspect", run_arg, "--probe", "32"])
            .args(extra)
            .output()
            .unwrap()
    };
    assert_success(&inspect(&[]));
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run.join("inspect/summary.json")).unwrap()).unwrap();
    assert_eq!(summary["probe"]["kind"], "shipped_treebank", "{summary}");
    let relations: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run.join("inspect/relations.json")).unwrap())
            .unwrap();
    assert!(relations.to_string().contains("\"det\""), "{relations}");
    // Relations over training (issue 65): the held-out loss at every snapshot is the one
    // training reported at the same step; the replication has the same steps; the last
    // snapshot's counts per sentence add up to its labels' scores.
    let over: serde_json::Value = serde_json::from_slice(
        &std::fs::read(run.join("inspect/relations-over-training.json")).unwrap(),
    )
    .unwrap();
    let steps = over["steps"].as_array().unwrap();
    let step_of = |entry: &serde_json::Value| entry["step"].as_u64().unwrap();
    let replicated: Vec<u64> = over["replication"]
        .as_array()
        .unwrap()
        .iter()
        .map(step_of)
        .collect();
    assert_eq!(replicated, steps.iter().map(step_of).collect::<Vec<_>>());
    let last = steps.last().unwrap();
    assert_eq!(step_of(last), 5);
    let metrics = std::fs::read_to_string(run.join("metrics.jsonl")).unwrap();
    let trained: serde_json::Value = metrics
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .find(|record| record["step"] == 5 && record.get("eval_loss").is_some())
        .unwrap();
    let (measured, reported) = (
        last["held_out_loss"].as_f64().unwrap(),
        trained["eval_loss"].as_f64().unwrap(),
    );
    assert!(
        (measured - reported).abs() < 1e-6,
        "{measured} against {reported}"
    );
    assert!(steps.iter().all(|s| s["held_out_loss"].is_f64()), "{over}");
    let sentences = over["last_step_sentences"].as_array().unwrap();
    assert!(
        !sentences.is_empty(),
        "no label counted at the last step of {} sentences",
        over["scored_sentences"]
    );
    for label in sentences {
        let name = &label["relation"];
        let scored = last["labels"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["relation"] == *name)
            .unwrap();
        let sum = |key: &str| -> f64 {
            label[key]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap())
                .sum()
        };
        assert_eq!(
            label["arcs"].as_array().unwrap().len() as u64,
            over["scored_sentences"]
        );
        assert_eq!(
            sum("arcs") as u64,
            scored["arcs"].as_u64().unwrap(),
            "{name}"
        );
        let score = scored["score"].as_f64().unwrap();
        assert!(
            (sum("head_hits") / sum("arcs") - score).abs() < 1e-9,
            "{name}"
        );
    }
    // The page says what the model was trained on.
    let page = std::fs::read_to_string(run.join("inspect/index.html")).unwrap();
    assert!(
        page.contains("a masked LM trained here on") && page.contains("corpus.jsonl"),
        "the page does not name the corpus"
    );

    let typed = tmp.path().join("typed");
    let output = inspect(&[
        "--text",
        "The people expect peace.",
        "--out",
        typed.to_str().unwrap(),
    ]);
    assert_success(&output);
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(typed.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["probe"]["kind"], "typed_text", "{summary}");
    assert_eq!(summary["probe"]["sentences"][0], "The people expect peace.");
}

/// Issue 65, item 5: two seeds of one text config are compared (each run holds its own copy
/// of the tokenizer, which is no other task), and beside an imported masked LM of another
/// grid, every head matched across its layers; a text model beside a toy task's run is
/// refused, saying which reads what.
#[test]
fn text_runs_are_compared_with_each_other_and_with_an_imported_model() {
    let tmp = tempfile::tempdir().unwrap();
    write_text_corpus(&tmp.path().join("corpus.jsonl"));
    let config = write_text_config(tmp.path(), "corpus.jsonl", 5);
    let out = tmp.path().join("text-s{seed}");
    assert_success(&run_train(&[
        config.to_str().unwrap(),
        "--seeds",
        "0-1",
        "--out",
        out.to_str().unwrap(),
    ]));
    let (seed_0, seed_1) = (tmp.path().join("text-s0"), tmp.path().join("text-s1"));
    let headlab = |args: &[&std::ffi::OsStr]| {
        std::process::Command::new(HEADLAB)
            .args(args)
            .output()
            .unwrap()
    };
    let imported = tmp.path().join("mlm");
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../model/tests/fixtures/bert/three-layers-mlm");
    assert_success(&headlab(&[
        "import".as_ref(),
        fixture.as_os_str(),
        "--out".as_ref(),
        imported.as_os_str(),
        "--quiet".as_ref(),
    ]));
    let compared = tmp.path().join("compared");
    assert_success(&headlab(&[
        "compare".as_ref(),
        seed_0.as_os_str(),
        seed_1.as_os_str(),
        imported.as_os_str(),
        "--probe".as_ref(),
        "16".as_ref(),
        "--out".as_ref(),
        compared.as_os_str(),
        "--quiet".as_ref(),
    ]));
    let matching: serde_json::Value =
        serde_json::from_slice(&std::fs::read(compared.join("matching.json")).unwrap()).unwrap();
    assert_eq!(matching["runs"].as_array().unwrap().len(), 3);
    assert_eq!(matching["across_layers"], true, "{matching}");
    // The reference matched to itself: every head its own partner, similarity 1.
    for layer in matching["runs"][0]["layers"].as_array().unwrap() {
        for similarity in layer["similarity"].as_array().unwrap() {
            assert!((similarity.as_f64().unwrap() - 1.0).abs() < 1e-9, "{layer}");
        }
    }

    let toy = tmp.path().join("toy");
    assert_success(&run_train(&[
        common::TINY,
        "--set",
        "train.steps=5",
        "--out",
        toy.to_str().unwrap(),
    ]));
    let refused = headlab(&["compare".as_ref(), seed_0.as_os_str(), toy.as_os_str()]);
    assert!(!refused.status.success());
    let err = stderr(&refused);
    assert!(
        err.contains(&headlab::text_beside_tokens(&seed_0, &toy)) && !err.contains("panicked"),
        "{err}"
    );
}
