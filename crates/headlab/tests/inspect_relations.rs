//! Dependency-relation scores end to end: a tiny `grammar` run trained for a few steps and
//! inspected gets `relations.json`, `relations.png` and a `relation_scores` map in every
//! `heads.json` record, with fractions in [0, 1], and keeps its words in `vocab.txt`; a task
//! without parses gets none of them.

#[path = "../../report/tests/common/mod.rs"]
mod common;
#[path = "common/headlab.rs"]
mod headlab;

use std::path::Path;

use inspect::load::reading::Reading;
use run::RunConfig;

const TINY: &str = testkit::TINY_CONFIG;

/// A grammar run small enough to train in a second: short sentences of varied length.
const TINY_GRAMMAR: &str = r#"
name = "tiny-grammar"
seed = 5

[task]
kind = "grammar"
min_words = 3
max_words = 9

[model]
d_model = 16
n_layers = 2
n_heads = 2
d_ff = 32

[train]
steps = 10
batch_size = 8
lr = 3e-3
warmup_steps = 2
log_every = 5
eval_every = 5
eval_size = 16
checkpoint_every = 10
"#;

fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn inspect(run: &Path) {
    let output = headlab::run("inspect", &[run.to_str().unwrap(), "--probe", "8"]);
    assert!(
        output.status.success(),
        "inspect failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

fn fraction(value: &serde_json::Value) -> f64 {
    let x = value
        .as_f64()
        .unwrap_or_else(|| panic!("not a number: {value}"));
    assert!((0.0..=1.0).contains(&x), "{x} is not a fraction");
    x
}

/// A relation's bootstrap intervals (when it has them) hold its point scores, and the count
/// of heads above the baseline is the one its per-head scores give.
fn check_intervals(relation: &serde_json::Value, direction: &str, best: f64, baseline: f64) {
    let intervals = &relation["intervals"];
    if intervals.is_null() {
        return;
    }
    let inside = |interval: &serde_json::Value, point: f64| {
        let (low, high) = (
            interval["low"].as_f64().unwrap(),
            interval["high"].as_f64().unwrap(),
        );
        assert!(
            low <= point && point <= high,
            "{point} outside {interval} in {relation}"
        );
    };
    assert!(intervals["resamples"].as_u64().unwrap() >= 500);
    inside(&intervals["baseline"], baseline);
    let ours = &intervals[direction];
    inside(&ours["best_head"], best);
    inside(&ours["margin"], best - baseline);
    let above = relation["heads"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| h[direction].as_f64().unwrap() > baseline)
        .count() as u64;
    assert_eq!(
        ours["heads_above_baseline"].as_u64(),
        Some(above),
        "{relation}"
    );
    assert!(ours["heads_clearly_above_baseline"].as_u64().unwrap() <= above);
}

/// `relation-sentences.conllu` holds the scored sentences, and with `attended` they give back
/// every best head's score on the grammar's own labels (no tie in a trained model's
/// attention, so the first argmax is the argmax).
fn check_recorded_sentences(report: &Path, relations: &serde_json::Value) {
    let path = report.join("relation-sentences.conllu");
    let trees = tasks::conllu::read(&path).unwrap();
    assert_eq!(trees.len() as u64, relations["sentences"].as_u64().unwrap());
    let arcs: usize = trees
        .iter()
        .map(|t| t.heads.iter().filter(|&&h| h > 0).count())
        .sum();
    assert_eq!(arcs as u64, relations["arcs"].as_u64().unwrap());
    for relation in relations["relations"].as_array().unwrap() {
        let name = relation["relation"].as_str().unwrap();
        let attended = &relation["attended"];
        // Every arc of the relation, in file order: (dependent, head), 0-based.
        let ends: Vec<(u64, u64)> = trees
            .iter()
            .flat_map(|t| {
                (0..t.words.len())
                    .filter(|&w| t.heads[w] > 0 && t.relations[w] == name)
                    .map(|w| (w as u64, t.heads[w] as u64 - 1))
            })
            .collect();
        if name.ends_with("_past_noun") {
            // Categories of their own, not DEPRELs: only the count can be checked here.
            let n = relation["arcs"].as_u64().unwrap() as usize;
            assert_eq!(attended["dependent_to_head"].as_array().unwrap().len(), n);
            continue;
        }
        assert_eq!(
            ends.len() as u64,
            relation["arcs"].as_u64().unwrap(),
            "{name}"
        );
        for (direction, target) in [("dependent_to_head", 1), ("head_to_dependent", 0)] {
            let words = attended[direction].as_array().unwrap();
            assert_eq!(words.len(), ends.len(), "{name} {direction}");
            let hits = words
                .iter()
                .zip(&ends)
                .filter(|(word, (dependent, head))| {
                    word.as_u64() == Some(if target == 1 { *head } else { *dependent })
                })
                .count();
            let score = relation["best"][direction]["score"].as_f64().unwrap();
            let recomputed = hits as f64 / ends.len() as f64;
            assert!(
                (recomputed - score).abs() < 1e-9,
                "{name} {direction}: {recomputed} vs {score}"
            );
        }
    }
}

/// Checks one file of the grammar run's report directory.
type CheckFile = fn(&Path);

/// The report files of a grammar run that hold its relations, each with what it must hold
/// (the tiny grammar model: 2 layers x 2 heads, 2000 relation sentences).
const RELATION_FILES: &[(&str, CheckFile)] = &[
    ("relations.json", check_relations),
    ("heads.json", check_heads_relation_scores),
    ("ceiling.json", check_ceiling),
    ("index.html", check_relations_page),
];

fn check_relations(report: &Path) {
    let relations = read_json(&report.join("relations.json"));
    assert_eq!(
        relations["sentences"],
        inspect::measures::relations::RELATION_SENTENCES
    );
    let listed = relations["relations"].as_array().unwrap();
    assert!(
        listed.iter().any(|r| r["relation"] == "det"),
        "every sentence has a determiner"
    );
    for relation in listed {
        assert!(relation["arcs"].as_u64().unwrap() > 0);
        fraction(&relation["baseline"]["score"]);
        assert!(relation["baseline"]["offset"].is_i64());
        let heads = relation["heads"].as_array().unwrap();
        assert_eq!(heads.len(), 4, "2 layers x 2 heads");
        for head in heads {
            fraction(&head["dependent_to_head"]);
            fraction(&head["head_to_dependent"]);
        }
        for direction in ["dependent_to_head", "head_to_dependent"] {
            let best = &relation["best"][direction];
            // Zeroing the best head costs accuracy in [-1, 1] on the relation's masked
            // dependents (every relation has some among 2000 sentences) and elsewhere.
            for key in ["drop_on_relation", "drop_elsewhere"] {
                let drop = best[key]
                    .as_f64()
                    .unwrap_or_else(|| panic!("{key}: {best}"));
                assert!((-1.0..=1.0).contains(&drop), "{key}: {best}");
            }
            // The loss moves with it, both ways, and is finite; the words it is over are
            // counted.
            for key in [
                "loss_rise_on_relation",
                "loss_rise_elsewhere",
                "resample_loss_rise_on_relation",
                "resample_loss_rise_elsewhere",
            ] {
                let rise = best[key]
                    .as_f64()
                    .unwrap_or_else(|| panic!("{key}: {best}"));
                assert!(rise.is_finite(), "{key}: {best}");
            }
            assert!(best["words_on_relation"].as_u64().unwrap() > 0, "{best}");
            let score = fraction(&best["score"]);
            let baseline = relation["baseline"]["score"].as_f64().unwrap();
            assert_eq!(best["beats_baseline"], score > baseline, "{relation}");
            check_intervals(relation, direction, score, baseline);
        }
    }
    let det = listed.iter().find(|r| r["relation"] == "det").unwrap();
    assert!(
        det["intervals"].is_object(),
        "det is in every sentence: {det}"
    );
    check_recorded_sentences(report, &relations);
    assert!(relations["masking"].is_null(), "whole sentences by default");
}

/// Every head's record holds its score on every relation, both directions, as fractions.
fn check_heads_relation_scores(report: &Path) {
    let relations = read_json(&report.join("relations.json"));
    let listed = relations["relations"].as_array().unwrap();
    let heads = read_json(&report.join("heads.json"));
    for head in heads.as_array().unwrap() {
        let scores = head["relation_scores"].as_object().unwrap();
        assert_eq!(scores.len(), listed.len());
        for pair in scores.values() {
            fraction(&pair["dependent_to_head"]);
            fraction(&pair["head_to_dependent"]);
        }
    }
}

fn check_ceiling(report: &Path) {
    // The ceiling: per class of masked word, the Bayes-optimal accuracy beside the model's
    // on the same examples. "the" and "some" go with either number, so no predictor gets
    // every determiner right; nor can one do worse than a uniform guess among the 8.
    let ceiling = read_json(&report.join("ceiling.json"));
    assert_eq!(
        ceiling["examples"],
        inspect::measures::ceiling::CEILING_EXAMPLES
    );
    let classes = ceiling["classes"].as_array().unwrap();
    let named: Vec<&str> = classes
        .iter()
        .map(|c| c["class"].as_str().unwrap())
        .collect();
    for class in ["determiner", "noun", "verb"] {
        assert!(named.contains(&class), "{named:?}");
    }
    let mut masked = 0;
    let mut model_sum = 0.0;
    for class in classes {
        let bayes = fraction(&class["ceiling"]);
        let model = fraction(&class["model"]);
        assert!(class["ceiling_standard_error"].as_f64().unwrap() >= 0.0);
        let n = class["masked"].as_u64().unwrap() as f64;
        let expected_error = (model * (1.0 - model) / n).sqrt();
        assert!((class["model_standard_error"].as_f64().unwrap() - expected_error).abs() < 1e-12);
        let n = class["masked"].as_u64().unwrap();
        masked += n;
        model_sum += model * n as f64;
        if class["class"] == "determiner" {
            assert!((1.0 / 8.0..0.95).contains(&bayes), "{class}");
        }
    }
    assert!(
        masked > 500,
        "about 1.4 masked words per sentence: {masked}"
    );
    assert!((model_sum / masked as f64 - ceiling["model"].as_f64().unwrap()).abs() < 1e-9);
}

fn check_relations_page(report: &Path) {
    assert!(report.join("figures/relations.png").is_file());
    let page = std::fs::read_to_string(report.join("index.html")).unwrap();
    assert!(page.contains("figures/relations.png"));
    assert!(page.contains("<code>relations.json</code>"));
    assert!(page.contains("Dependency relations"));
}

/// Scored as the model reads in training: words masked with the task's mask_fraction,
/// recorded per sentence; the files still give back every best head's score.
fn check_masked(run: &Path, whole: &Path) {
    let relations = read_json(&whole.join("relations.json"));
    let masked_report = run.join("inspect-masked");
    let output = headlab::run(
        "inspect",
        &[
            run.to_str().unwrap(),
            "--probe",
            "8",
            "--no-patching",
            "--relations-masked",
            "--out",
            masked_report.to_str().unwrap(),
        ],
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let masked = read_json(&masked_report.join("relations.json"));
    assert_eq!(masked["masking"]["fraction"], 0.15);
    let trees = tasks::conllu::read(&masked_report.join("relation-sentences.conllu")).unwrap();
    let lists = masked["masking"]["masked"].as_array().unwrap();
    assert_eq!(lists.len(), trees.len());
    for (list, tree) in lists.iter().zip(&trees) {
        let positions = list.as_array().unwrap();
        assert!(
            !positions.is_empty(),
            "at least one word masked per sentence"
        );
        assert!(
            positions
                .iter()
                .all(|p| (p.as_u64().unwrap() as usize) < tree.words.len())
        );
    }
    check_recorded_sentences(&masked_report, &masked);
    assert_ne!(
        masked["relations"], relations["relations"],
        "masking changes the scores"
    );
}

#[test]
fn a_grammar_run_gets_relation_scores_per_head_and_a_figure() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("grammar.toml");
    std::fs::write(&config, TINY_GRAMMAR).unwrap();
    let run = dir.path().join("run");
    common::train_run(&config, &[], &run);
    // The run keeps its vocabulary: line i names token id i.
    let vocab = std::fs::read_to_string(run.join("vocab.txt")).unwrap();
    let words: Vec<&str> = vocab.lines().collect();
    assert_eq!(&words[..3], ["<pad>", "<mask>", "the"]);
    assert!(
        words.contains(&"dog") && words.contains(&"dogs"),
        "{words:?}"
    );
    inspect(&run);
    let report = run.join("inspect");

    for (file, check) in RELATION_FILES {
        assert!(report.join(file).is_file(), "no {file}");
        check(&report);
    }
    check_masked(&run, &report);
}

#[test]
fn a_grammar_probe_has_one_length_and_names_its_words() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("grammar.toml");
    std::fs::write(&config, TINY_GRAMMAR).unwrap();
    let run = RunConfig::load(&config, &[])
        .unwrap()
        .resolve(&config)
        .unwrap();
    let device = burn::tensor::Device::flex();
    let probe = Reading::Tokens
        .probe(&run, (32, run.config.seed), 1, &device)
        .unwrap();
    assert_eq!(probe.examples.len(), 32);
    let seq = probe.seq_len();
    assert!(probe.examples.iter().all(|e| e.input.len() == seq));
    assert_eq!(probe.tokens.dims(), [32, seq]);
    let names = probe
        .token_names
        .as_deref()
        .expect("grammar names its words");
    let labels = report::draw::figures::token_labels(&probe.examples[0].input, Some(names));
    assert_eq!(labels.len(), seq);
    assert!(
        labels.iter().all(|l| l.parse::<u32>().is_err()),
        "{labels:?}"
    );
}

#[test]
fn a_task_without_parses_gets_no_relations() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    common::train_run(Path::new(TINY), &[], &run);
    inspect(&run);
    let report = run.join("inspect");
    assert!(!report.join("relations.json").exists());
    assert!(!report.join("ceiling.json").exists());
    assert!(!report.join("figures/relations.png").exists());
    let heads = read_json(&report.join("heads.json"));
    for head in heads.as_array().unwrap() {
        assert!(head["relation_scores"].is_null(), "{head}");
    }
    let page = std::fs::read_to_string(report.join("index.html")).unwrap();
    assert!(!page.contains("relations.json"));
}
