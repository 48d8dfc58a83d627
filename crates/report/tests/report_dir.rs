//! `ReportDir` and its table of files: the book's file table (docs/inspect.md) lists exactly
//! the table's files in its order and says when each conditional one is written; a written report holds
//! exactly the files the table says it should, reads back as the values written, and is
//! complete only with all of them.

mod common;

use std::collections::BTreeSet;
use std::path::Path;

use inspect::circuits::Circuits;
use inspect::inspection::MeasureOptions;
use inspect::inspection::summary::Summary;
use inspect::interventions::pruning::Pruning;
use inspect::measures::heads::HeadRecord;
use inspect::measures::trajectories::Trajectories;
use report::dir::{FILES, Presence, ReadError, ReportContents, ReportDir};
use report::{ReportOptions, write_report};

const TINY: &str = testkit::TINY_CONFIG;

/// The rows of the table of `inspect`'s files in the book's inspect chapter
/// (docs/inspect.md, section "The files of a report"): (file, contents).
fn book_report_rows() -> Vec<(String, String)> {
    let chapter = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/inspect.md"
    ))
    .expect("the book has an inspect chapter, docs/inspect.md");
    let section = chapter
        .split("\n## The files of a report")
        .nth(1)
        .expect("docs/inspect.md has a section \"The files of a report\"");
    let table = section
        .split("| file | contents |\n| --- | --- |\n")
        .nth(1)
        .expect("the section \"The files of a report\" of docs/inspect.md has a file table");
    table
        .lines()
        .take_while(|line| line.starts_with('|'))
        .map(|line| {
            let cells: Vec<&str> = line.trim_matches('|').splitn(2, " | ").collect();
            let name = cells[0].trim().trim_matches('`').to_string();
            (name, cells.get(1).unwrap_or(&"").to_string())
        })
        .collect()
}

#[test]
fn the_book_file_table_is_the_report_table() {
    let rows = book_report_rows();
    let book_names: Vec<&str> = rows.iter().map(|(name, _)| name.as_str()).collect();
    let table_names: Vec<&str> = FILES.iter().map(|f| f.name).collect();
    assert_eq!(
        book_names, table_names,
        "docs/inspect.md's file table and report::dir::FILES list other files or another order"
    );
    for (file, (name, contents)) in FILES.iter().zip(&rows) {
        if let Some(words) = file.presence.book_words() {
            assert!(
                contents.contains(words),
                "docs/inspect.md's row for {name} does not say when it is written ({words:?})"
            );
        }
    }
}

/// The first parenthesis after `from` in `text`, brackets balanced, without its brackets.
fn parenthesis_after(text: &str, from: usize) -> &str {
    let open = from + text[from..].find('(').expect("a parenthesis");
    let mut depth = 0;
    for (i, c) in text[open..].char_indices() {
        match c {
            '(' => depth += 1,
            ')' if depth == 1 => return &text[open + 1..open + i],
            ')' => depth -= 1,
            _ => {}
        }
    }
    panic!("an unclosed parenthesis at {open}")
}

#[test]
fn the_book_gives_the_unit_of_every_heads_json_number_that_has_one() {
    use inspect::measures::heads::{FIELD_UNITS, unit_of};
    use run::units::Unit;
    let rows = book_report_rows();
    let (_, heads_row) = rows
        .iter()
        .find(|(name, _)| name == "heads.json")
        .expect("a row for heads.json");
    let fields = FIELD_UNITS
        .iter()
        .copied()
        .chain([("pattern_scores", unit_of("pattern_scores.self"))]);
    for (field, unit) in fields {
        let named = heads_row
            .find(&format!("`{field}`"))
            .unwrap_or_else(|| panic!("docs/inspect.md's heads.json row names no `{field}`"));
        let words = parenthesis_after(heads_row, named);
        let said = match unit {
            Unit::Fraction => "fraction",
            Unit::Points => "points",
            Unit::Nats => "nats",
            Unit::Positions => "positions",
            Unit::Logits => "logits",
            Unit::Plain => continue,
        };
        assert!(
            words.contains(said),
            "docs/inspect.md describes `{field}` without its unit ({said}): ({words})"
        );
    }
}

#[test]
fn every_presence_is_decided_by_the_contents() {
    let none = ReportContents {
        word_task: false,
        snapshots: false,
        n_layers: 1,
        metrics: false,
        pairs: false,
        outputs: false,
        trained: false,
        treebank_snapshots: false,
    };
    let all = ReportContents {
        word_task: true,
        snapshots: true,
        n_layers: 2,
        metrics: true,
        pairs: true,
        outputs: true,
        trained: true,
        treebank_snapshots: true,
    };
    for file in FILES {
        assert!(file.presence.holds(&all), "{}", file.name);
        assert_eq!(
            file.presence.holds(&none),
            file.presence == Presence::Always,
            "{}",
            file.name
        );
    }
}

/// Every file under `dir`, as paths relative to it.
fn files_under(dir: &Path) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            found.extend(
                files_under(&path)
                    .into_iter()
                    .map(|f| format!("{name}/{f}")),
            );
        } else {
            found.insert(name);
        }
    }
    found
}

/// `a` and `b` as JSON are the same but for floats within 1e-12 relative.
fn assert_close<T: serde::Serialize>(a: &T, b: &T) {
    fn walk(a: &serde_json::Value, b: &serde_json::Value, at: &str) {
        use serde_json::Value;
        match (a, b) {
            (Value::Number(x), Value::Number(y)) => {
                let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
                assert!(
                    (x - y).abs() <= 1e-12 * x.abs().max(y.abs()),
                    "{at}: {x} against {y}"
                );
            }
            (Value::Array(x), Value::Array(y)) => {
                assert_eq!(x.len(), y.len(), "{at}");
                for (i, (x, y)) in x.iter().zip(y).enumerate() {
                    walk(x, y, &format!("{at}[{i}]"));
                }
            }
            (Value::Object(x), Value::Object(y)) => {
                assert_eq!(
                    x.keys().collect::<Vec<_>>(),
                    y.keys().collect::<Vec<_>>(),
                    "{at}"
                );
                for (key, x) in x {
                    walk(x, &y[key], &format!("{at}.{key}"));
                }
            }
            _ => assert_eq!(a, b, "{at}"),
        }
    }
    walk(
        &serde_json::to_value(a).unwrap(),
        &serde_json::to_value(b).unwrap(),
        "",
    );
}

#[test]
fn a_report_holds_the_tables_files_and_reads_back_what_was_written() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run");
    common::train_run(Path::new(TINY), &["model.n_layers=2"], &run);
    let loaded = inspect::load::loaded_run::load(&run, None).unwrap();
    let out = tmp.path().join("report");
    let options = ReportOptions {
        measure: MeasureOptions {
            probe_size: 8,
            ..MeasureOptions::default()
        },
        ..ReportOptions::default()
    };
    let report = write_report(&loaded, &out, &options).unwrap();

    let dir = ReportDir::new(&out);
    // The tiny config is the reverse task: it has minimal pairs.
    let contents = ReportContents {
        word_task: false,
        snapshots: true,
        n_layers: 2,
        metrics: true,
        pairs: true,
        outputs: true,
        trained: true,
        treebank_snapshots: false,
    };
    let expected: BTreeSet<String> = FILES
        .iter()
        .filter(|f| f.presence.holds(&contents))
        .map(|f| f.name.to_string())
        .collect();
    // Beside the table's files, the directory's own: the marker that makes it headlab's
    // report and the writer's lock (run::out_dir), neither of them a file of the report.
    let mut housekeeping = files_under(&out);
    for own in [run::out_dir::MARKER, run::out_dir::LOCK] {
        assert!(housekeeping.remove(own), "no {own}");
    }
    assert_eq!(housekeeping, expected);
    assert!(dir.is_complete());
    assert!(dir.missing(&contents).is_empty());
    let written: BTreeSet<String> = report
        .files
        .iter()
        .map(|p| p.strip_prefix(&out).unwrap().display().to_string())
        .collect();
    assert_eq!(written, expected, "Report::files names every file written");
    let last_two: Vec<_> = report.files[report.files.len() - 2..]
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        last_two,
        ["index.html", "manifest.json"],
        "index.html is written last but for the manifest, which seals the report"
    );
    // The manifest lists every other file, and the report checks as intact to the byte.
    let manifest = run::manifest::read(&out).unwrap().unwrap();
    let sealed: BTreeSet<String> = manifest.files.keys().cloned().collect();
    let mut others = expected.clone();
    others.remove("manifest.json");
    assert_eq!(sealed, others);
    assert_eq!(
        dir.verify(run::manifest::Depth::Contents),
        run::manifest::Verdict::Intact
    );

    // serde_json parses a float to within one unit in the last place, not always exactly.
    assert_close(
        &dir.read_json::<Vec<HeadRecord>>().unwrap(),
        &report.measured.heads,
    );
    assert_close(
        &dir.read_json::<Summary>().unwrap(),
        &report.measured.summary,
    );
    assert_eq!(
        dir.read_json::<Pruning>()
            .unwrap()
            .greedy
            .unwrap()
            .removable,
        report
            .measured
            .pruning
            .as_ref()
            .unwrap()
            .greedy
            .as_ref()
            .unwrap()
            .removable
    );
    let circuits = dir.read_json::<Circuits>().unwrap();
    assert_eq!(circuits.heads.len(), report.measured.circuits.heads.len());
    let trajectories = dir.read_json::<Trajectories>().unwrap();
    assert_eq!(
        trajectories.heads.len(),
        report.measured.trajectories.as_ref().unwrap().heads.len()
    );
    let divergence = dir.read_divergence().unwrap();
    assert_eq!(divergence.len(), report.measured.divergence.len());
    for (read, measured) in divergence.iter().zip(&report.measured.divergence) {
        assert_eq!((read.step, read.layer), (measured.step, measured.layer));
        assert!((read.qk_cosine - measured.qk_cosine).abs() <= 5e-7);
    }
    // Not a word task: no relations.json, and reading it says so by name.
    let missing = dir
        .read_json::<inspect::measures::relations::Relations>()
        .unwrap_err();
    assert!(matches!(missing, ReadError::Missing { .. }), "{missing}");
    assert!(missing.to_string().ends_with("relations.json is missing"));

    // A report without its explore.html is incomplete, and says what it lacks.
    std::fs::remove_file(out.join("explore.html")).unwrap();
    assert!(!dir.is_complete());
    assert_eq!(dir.missing(&contents), ["explore.html"]);
    // One whose summary.json was cut short reads as invalid, naming the file.
    std::fs::write(out.join("summary.json"), "{\"name\": ").unwrap();
    let invalid = dir.read_json::<Summary>().unwrap_err();
    assert!(
        invalid
            .to_string()
            .contains("summary.json is not a valid summary.json"),
        "{invalid}"
    );
}
