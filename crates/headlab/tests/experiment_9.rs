//! Experiment 9's table script (`scripts/experiments/experiment9_table.py`) on tiny text
//! runs, as `scripts/experiments/experiment-9.sh` uses it: each inspected run kept as one
//! record the moment it is read (runs do not outlive a session on this project's machines),
//! the chapter's tables rendered from the records alone, and records that are not seeds of
//! one config refused.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

#[path = "common/train.rs"]
mod common;
use common::{HEADLAB, run_train, write_text_config, write_text_corpus};

use serde_json::Value;

fn table_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/experiments/experiment9_table.py")
}

/// `python3 experiment9_table.py ARGS`, with `sweep stats` from this build's binary.
fn table(args: &[&Path]) -> Output {
    Command::new("python3")
        .arg(table_script())
        .args(args)
        .env("HEADLAB", HEADLAB)
        .output()
        .expect("python3 runs the table script")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// Two seeds of a tiny text config, trained and inspected (relations over training).
fn two_inspected_seeds(dir: &Path) -> PathBuf {
    write_text_corpus(&dir.join("corpus.jsonl"));
    let config = write_text_config(dir, "corpus.jsonl", 10);
    let runs = dir.join("runs");
    let out = runs.join("text-s{seed}");
    let trained = run_train(&[
        config.as_os_str(),
        "--seeds".as_ref(),
        "0-1".as_ref(),
        "--out".as_ref(),
        out.as_os_str(),
    ]);
    assert!(trained.status.success(), "{}", stderr(&trained));
    for seed in ["text-s0", "text-s1"] {
        let inspected = Command::new(HEADLAB)
            .arg("inspect")
            .arg(runs.join(seed))
            .args(["--probe", "16", "--quiet"])
            .output()
            .unwrap();
        assert!(inspected.status.success(), "{}", stderr(&inspected));
    }
    runs
}

#[test]
fn each_run_is_recorded_and_the_tables_come_from_the_records_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = two_inspected_seeds(tmp.path());
    let records = tmp.path().join("records");

    // One run at a time, as experiment-9.sh records each seed when it is inspected.
    for seed in ["text-s0", "text-s1"] {
        let collected = table(&[
            "collect".as_ref(),
            &runs.join(seed),
            &records,
            "--note".as_ref(),
            "a test".as_ref(),
        ]);
        assert!(collected.status.success(), "{}", stderr(&collected));
    }
    for (seed, name) in [(0, "text-s0"), (1, "text-s1")] {
        let record = read_json(&records.join(format!("{name}.json")));
        let over = read_json(&runs.join(name).join("inspect/relations-over-training.json"));
        assert_eq!(record["seed"], seed);
        assert_eq!(record["source"], "a test");
        // Every snapshot's figures and held-out loss, as inspect measured them.
        let steps = over["steps"].as_array().unwrap();
        let curves = record["curves"].as_array().unwrap();
        assert_eq!(curves.len(), steps.len());
        for (curve, step) in curves.iter().zip(steps) {
            assert_eq!(curve["step"], step["step"]);
            assert_eq!(curve["syntactic"], step["syntactic"]);
            assert_eq!(curve["held_out_loss"], step["held_out_loss"]);
            // The labels named as beating their offsets are the ones inspect counted.
            assert_eq!(
                curve["beating_test"].as_array().unwrap().len() as u64,
                step["labels_beating_offset"].as_u64().unwrap(),
                "{curve}"
            );
        }
        assert_eq!(curves.last().unwrap()["step"], 10);
        // The counts per sentence the Multi-Bootstrap resamples add up to the last figure.
        let sum = |key: &str| -> f64 {
            record["sentences"][key]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap())
                .sum()
        };
        // Each label's resample ablation, accuracy and loss, as the final model's
        // relations.json measured it in both directions.
        let relations = read_json(&runs.join(name).join("inspect/relations.json"));
        let mut ablations = 0;
        for (label, recorded) in record["labels"].as_object().unwrap() {
            let Some(relation) = relations["relations"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["relation"] == *label)
            else {
                continue;
            };
            for direction in ["dependent_to_head", "head_to_dependent"] {
                let best = &relation["best"][direction];
                let pair = |on: &str, elsewhere: &str| {
                    Value::from(vec![best[on].clone(), best[elsewhere].clone()])
                };
                assert_eq!(
                    recorded["resample_ablation"][direction],
                    pair("resample_drop_on_relation", "resample_drop_elsewhere"),
                    "{label} {direction}"
                );
                if best["resample_loss_rise_on_relation"].is_f64() {
                    assert_eq!(
                        recorded["resample_loss_rise"][direction],
                        pair(
                            "resample_loss_rise_on_relation",
                            "resample_loss_rise_elsewhere"
                        ),
                        "{label} {direction}"
                    );
                    assert_eq!(
                        recorded["ablation_words"][direction],
                        best["words_on_relation"]
                    );
                    ablations += 1;
                }
            }
        }
        assert!(ablations > 0, "some label's ablation is recorded: {record}");
        let last = curves.last().unwrap()["syntactic"].as_f64().unwrap();
        assert!(
            (sum("syntactic_hits") / sum("arcs") - last).abs() < 1e-9,
            "{} / {} against {last}",
            sum("syntactic_hits"),
            sum("arcs")
        );
    }

    let rendered = table(&["render".as_ref(), &records, "--no-figure".as_ref()]);
    assert!(rendered.status.success(), "{}", stderr(&rendered));
    let tables = std::fs::read_to_string(tmp.path().join("records.md")).unwrap();
    assert!(
        tables.contains("2 seeds (0, 1), trained to step 10"),
        "{tables}"
    );
    assert!(tables.contains("| syntactic |"), "{tables}");
    // det's ablation row (nine columns: label, seeds, words, three of accuracy, three of
    // loss) has its words counted and its loss measured in both seeds.
    let det = tables
        .lines()
        .find(|line| line.starts_with("| det | 2 |") && line.split('|').count() == 11)
        .unwrap_or_else(|| panic!("det's ablation over 2 seeds: {tables}"));
    let cells: Vec<&str> = det.split('|').map(str::trim).collect();
    assert!(cells[3].parse::<f64>().unwrap() > 0.0, "det's words: {det}");
    assert!(
        cells[7] != "-" && cells[9] != "-",
        "det's loss columns: {det}"
    );

    assert!(
        !tmp.path().join("records-onsets.png").exists(),
        "--no-figure draws nothing"
    );
    figures_are_drawn(&records);
    let kept = across_layers_are_kept(&runs, &records, tmp.path());
    the_across_table_places_each_seeds_head(&records, tmp.path(), &kept);

    // A seed recorded twice, and a record of another config, are refused, naming the folder.
    std::fs::copy(records.join("text-s0.json"), records.join("again.json")).unwrap();
    let refused = table(&["render".as_ref(), &records, "--no-figure".as_ref()]);
    assert!(!refused.status.success());
    assert!(
        stderr(&refused).contains("a seed is recorded twice"),
        "{}",
        stderr(&refused)
    );
    let mut other = read_json(&records.join("again.json"));
    other["seed"] = 7.into();
    other["config"] = other["config"]
        .as_str()
        .unwrap()
        .replace("d_ff = 32", "d_ff = 64")
        .into();
    std::fs::write(records.join("again.json"), other.to_string()).unwrap();
    let refused = table(&["render".as_ref(), &records, "--no-figure".as_ref()]);
    assert!(!refused.status.success());
    assert!(
        stderr(&refused).contains(&format!(
            "the records in {} are not seeds of one config",
            records.display()
        )),
        "{}",
        stderr(&refused)
    );
}

/// `render` with its figures, as `experiment-9.sh tables` draws them (where matplotlib is
/// installed: `scripts/setup/setup.sh` installs it, and `.ci/run` requires it): the curves
/// over training, and the labels figure with one row per label counted in some seed.
fn figures_are_drawn(records: &Path) {
    let has_matplotlib = Command::new("python3")
        .args(["-c", "import matplotlib"])
        .output()
        .is_ok_and(|output| output.status.success());
    if !has_matplotlib {
        let why = "python3 has no matplotlib (scripts/setup/setup.sh installs it)";
        testkit::skip_unless_required("figures_are_drawn", "HEADLAB_REQUIRE_MATPLOTLIB", why);
        return;
    }
    let rendered = table(&["render".as_ref(), records]);
    assert!(rendered.status.success(), "{}", stderr(&rendered));
    let tables = std::fs::read_to_string(records.with_extension("md")).unwrap();
    let size_of = |name: &str| {
        let path = records.with_file_name(name);
        assert!(
            tables.contains(&format!("]({name})")),
            "records.md links {name}: {tables}"
        );
        let file = std::io::BufReader::new(std::fs::File::open(&path).unwrap());
        let info = png::Decoder::new(file).read_info().unwrap().info().clone();
        (info.width, info.height)
    };
    // Both at 110 dpi: the curves 8 x 7 inches, the labels 8 inches by 1.5 + 0.38 a row.
    assert_eq!(size_of("records-onsets.png"), (880, 770));
    let mut labels = std::collections::BTreeSet::new();
    for seed in ["text-s0", "text-s1"] {
        let record = read_json(&records.join(format!("{seed}.json")));
        labels.extend(record["labels"].as_object().unwrap().keys().cloned());
    }
    assert!(!labels.is_empty());
    let height = (110.0 * (1.5 + 0.38 * labels.len() as f64)) as u32;
    let (width, drawn) = size_of("records-labels.png");
    assert_eq!(width, 880);
    assert!(
        drawn.abs_diff(height) <= 1,
        "{} labels: {drawn} pixels high, not {height}",
        labels.len()
    );
}

/// The seeds matched across layers (`headlab compare --across-layers`), kept beside the
/// records by `keep-matching` (a comparison layer by layer refused): each head of the first
/// seed its own partner there. Returns what was kept.
fn across_layers_are_kept(runs: &Path, records: &Path, tmp: &Path) -> Value {
    let matched = |out: &Path, flags: &[&str]| {
        let compared = Command::new(HEADLAB)
            .arg("compare")
            .args([runs.join("text-s0"), runs.join("text-s1")])
            .args(["--probe", "8", "--quiet", "--out"])
            .arg(out)
            .args(flags)
            .output()
            .unwrap();
        assert!(compared.status.success(), "{}", stderr(&compared));
        out.join("matching.json")
    };
    let by_layer = matched(&tmp.join("by-layer"), &[]);
    let refused = table(&["keep-matching".as_ref(), &by_layer, records]);
    assert!(!refused.status.success());
    assert!(
        stderr(&refused)
            .contains("was not matched across layers (headlab compare --across-layers)"),
        "{}",
        stderr(&refused)
    );
    let across = matched(&tmp.join("across"), &["--across-layers"]);
    let kept_out = table(&["keep-matching".as_ref(), &across, records]);
    assert!(kept_out.status.success(), "{}", stderr(&kept_out));
    let kept = read_json(&tmp.join("records-compare-across.json"));
    let heads = kept["heads_per_layer"].as_u64().unwrap() as usize;
    let runs_kept = kept["runs"].as_array().unwrap();
    assert_eq!(runs_kept.len(), 2);
    assert_eq!(
        (runs_kept[0]["seed"].as_u64(), runs_kept[1]["seed"].as_u64()),
        (Some(0), Some(1))
    );
    let slots = runs_kept[0]["slots"].as_array().unwrap();
    assert_eq!(slots.len() % heads, 0);
    for (index, slot) in slots.iter().enumerate() {
        // The first run matched to itself: each head its own partner, similarity 1.
        let name = format!("L{}H{}", index / heads, index % heads);
        assert_eq!(slot["partner"], name.as_str(), "{slot}");
        assert!((slot["similarity"].as_f64().unwrap() - 1.0).abs() < 1e-4);
        assert_eq!(slot["row"].as_array().unwrap().len(), slots.len());
    }
    kept
}

/// `render`'s table of the kept matching: each other seed's best head for a label placed
/// among its heads by its similarity to the first seed's, as the kept matrix says.
fn the_across_table_places_each_seeds_head(records: &Path, tmp: &Path, kept: &Value) {
    let heads = kept["heads_per_layer"].as_u64().unwrap() as usize;

    // A label made to have appeared in seed 1, so that the table has its row: seed 1's best
    // head placed among seed 1's heads by the kept similarities to seed 0's best head.
    let copied = tmp.join("appeared");
    std::fs::create_dir(&copied).unwrap();
    let mut seeds = vec![];
    for seed in ["text-s0", "text-s1"] {
        let mut record = read_json(&records.join(format!("{seed}.json")));
        let label = record["labels"]
            .as_object_mut()
            .unwrap()
            .values_mut()
            .next()
            .unwrap();
        for (score, offset) in [("score", "offset_score"), ("dev_score", "dev_offset_score")] {
            label[score] = 0.9.into();
            label[offset] = 0.1.into();
        }
        std::fs::write(copied.join(format!("{seed}.json")), record.to_string()).unwrap();
        seeds.push(record);
    }
    std::fs::copy(
        tmp.join("records-compare-across.json"),
        tmp.join("appeared-compare-across.json"),
    )
    .unwrap();
    let rendered = table(&["render".as_ref(), &copied, "--no-figure".as_ref()]);
    assert!(rendered.status.success(), "{}", stderr(&rendered));
    let tables = std::fs::read_to_string(tmp.join("appeared.md")).unwrap();
    let (name, first) = seeds[0]["labels"]
        .as_object()
        .unwrap()
        .iter()
        .next()
        .unwrap();
    let (theirs, ours) = (
        seeds[1]["labels"][name]["head"].as_str().unwrap(),
        first["head"].as_str().unwrap(),
    );
    let index = |head: &str| -> usize {
        let (layer, head) = head[1..].split_once('H').unwrap();
        layer.parse::<usize>().unwrap() * heads + head.parse::<usize>().unwrap()
    };
    let slot = &kept["runs"][1]["slots"][index(ours)];
    let row: Vec<f64> = serde_json::from_value(slot["row"].clone()).unwrap();
    let similarity = row[index(theirs)];
    let place = 1 + row.iter().filter(|&&x| x > similarity).count();
    let suffix = match place {
        1 => "st",
        2 => "nd",
        3 => "rd",
        _ => "th",
    };
    let paired = if slot["partner"] == theirs {
        ", paired"
    } else {
        ""
    };
    let expected = format!(
        "| {name} | {ours} | 1: {theirs} ({place}{suffix}, {similarity:.2}{paired}) | {place}.0 | {} of 1 |",
        usize::from(!paired.is_empty())
    );
    assert!(
        tables.contains("## Across seeds, across layers") && tables.contains(&expected),
        "{expected} in {tables}"
    );
}
