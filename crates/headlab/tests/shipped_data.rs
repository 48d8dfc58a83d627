//! The data the repository ships are what their README says (issue 51, item 1): every row of
//! `data/ud-english-ewt/README.md`'s table names a file there with its size and SHA-256, and
//! each treebank reads whole, with its count of sentences, through headlab's CoNLL-U reader.
//! The pretraining corpus too (issue 64, item 1): every row of
//! `data/state-of-the-union/README.md`'s table, the corpus decompressed to the text its README
//! names, one address per line with its words, and the held-out list its rule's.

use std::io::Read;
use std::path::{Path, PathBuf};

fn treebank_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/ud-english-ewt")
}

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/state-of-the-union")
}

/// The files of a data folder, but its README.
fn on_disk(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name != "README.md")
        .collect();
    names.sort();
    names
}

/// `(file, sentences, bytes, sha256)` of each row of the README's table.
fn rows(readme: &str) -> Vec<(String, Option<usize>, u64, String)> {
    readme
        .lines()
        .filter(|line| line.starts_with("| `"))
        .map(|line| {
            let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
            assert_eq!(cells.len(), 4, "a row of four cells: {line}");
            (
                cells[0].trim_matches('`').to_string(),
                cells[1].parse().ok(),
                cells[2].parse().expect("bytes"),
                cells[3].trim_matches('`').to_string(),
            )
        })
        .collect()
}

#[test]
fn every_shipped_file_is_the_one_its_readme_names() {
    let dir = treebank_dir();
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    let rows = rows(&readme);
    let files: Vec<String> = rows.iter().map(|row| row.0.clone()).collect();
    assert_eq!(
        files,
        [
            "en_ewt-ud-test.conllu",
            "en_ewt-ud-dev.conllu",
            "LICENSE.txt"
        ]
    );
    for (file, sentences, bytes, sha256) in rows {
        let path = dir.join(&file);
        let contents = std::fs::read(&path).unwrap();
        assert_eq!(contents.len() as u64, bytes, "{file}'s size");
        assert_eq!(run::hash::sha256_hex(&contents), sha256, "{file}'s SHA-256");
        if let Some(sentences) = sentences {
            let read = tasks::conllu::read(&path).unwrap();
            assert_eq!(read.len(), sentences, "{file}'s sentences");
            assert!(read.iter().all(|s| !s.words.is_empty()), "{file}");
        }
    }
    // Every file in the folder is in the table (and the README itself).
    let mut listed = files;
    listed.sort();
    assert_eq!(on_disk(&dir), listed);
}

/// One row of the corpus README's file table: the counts are empty but for the corpus.
struct CorpusRow {
    file: String,
    /// `(documents, held-out documents, words, held-out words)`.
    counts: Option<(usize, usize, usize, usize)>,
    bytes: u64,
    sha256: String,
}

fn corpus_rows(readme: &str) -> Vec<CorpusRow> {
    readme
        .lines()
        .filter(|line| line.starts_with("| `"))
        .map(|line| {
            let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
            assert_eq!(cells.len(), 7, "a row of seven cells: {line}");
            let counts: Vec<Option<usize>> = cells[1..5].iter().map(|c| c.parse().ok()).collect();
            CorpusRow {
                file: cells[0].trim_matches('`').to_string(),
                counts: match counts[..] {
                    [Some(a), Some(b), Some(c), Some(d)] => Some((a, b, c, d)),
                    [None, None, None, None] => None,
                    _ => panic!("all four counts or none: {line}"),
                },
                bytes: cells[5].parse().expect("bytes"),
                sha256: cells[6].trim_matches('`').to_string(),
            }
        })
        .collect()
}

/// `(bytes, sha256)` of the README's line "`addresses.jsonl.gz` decompressed: N bytes,
/// SHA-256 `HASH`."
fn decompressed_line(readme: &str) -> (usize, String) {
    let prefix = "`addresses.jsonl.gz` decompressed: ";
    let line = readme
        .lines()
        .find_map(|line| line.strip_prefix(prefix))
        .expect("the README names the decompressed size and hash");
    let (bytes, rest) = line.split_once(" bytes, SHA-256 `").expect(line);
    let (sha256, _) = rest.split_once('`').expect(line);
    (bytes.parse().expect(bytes), sha256.to_string())
}

/// `(line, file, words)` of each row of the held-out table.
fn held_out_rows(readme: &str) -> Vec<(usize, String, usize)> {
    readme
        .lines()
        .filter(|line| line.starts_with("| "))
        .map(|line| {
            line.trim_matches('|')
                .split('|')
                .map(str::trim)
                .collect::<Vec<_>>()
        })
        .filter_map(|cells| {
            let at = cells[0].parse().ok()?;
            assert_eq!(cells.len(), 3, "a held-out row of three cells: {cells:?}");
            let file = cells[1].trim_matches('`').to_string();
            Some((at, file, cells[2].parse().expect("words")))
        })
        .collect()
}

/// The held-out rule of data/state-of-the-union/README.md, by 0-based line.
fn held_out(line: usize) -> bool {
    line % 10 == 9
}

#[test]
fn the_shipped_corpus_is_the_one_its_readme_names() {
    let dir = corpus_dir();
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    let rows = corpus_rows(&readme);
    let files: Vec<String> = rows.iter().map(|row| row.file.clone()).collect();
    assert_eq!(files, ["addresses.jsonl.gz", "LICENSE", "NOTICE"]);
    for row in &rows {
        let contents = std::fs::read(dir.join(&row.file)).unwrap();
        assert_eq!(contents.len() as u64, row.bytes, "{}'s size", row.file);
        assert_eq!(
            run::hash::sha256_hex(&contents),
            row.sha256,
            "{}'s SHA-256",
            row.file
        );
        assert_eq!(
            row.counts.is_some(),
            row.file == "addresses.jsonl.gz",
            "{}",
            row.file
        );
    }
    let mut listed = files;
    listed.sort();
    assert_eq!(
        on_disk(&dir),
        listed,
        "every file in the folder is in the table"
    );

    // The corpus decompresses whole to the text the README names.
    let (documents, held_documents, words, held_words) = rows[0].counts.unwrap();
    let packed = std::fs::read(dir.join("addresses.jsonl.gz")).unwrap();
    let mut plain = Vec::new();
    flate2::read::GzDecoder::new(&packed[..])
        .read_to_end(&mut plain)
        .expect("addresses.jsonl.gz decompresses");
    let (bytes, sha256) = decompressed_line(&readme);
    assert_eq!(plain.len(), bytes, "decompressed size");
    assert_eq!(
        run::hash::sha256_hex(&plain),
        sha256,
        "decompressed SHA-256"
    );
    let text = String::from_utf8(plain).expect("UTF-8");
    assert!(text.ends_with('\n'), "every line ends in a newline");

    // One address per line, in the package's order, with its words.
    let mut counted = (0, 0, 0, 0);
    let mut held = Vec::new();
    let mut previous: Option<(u64, String)> = None;
    for (at, line) in text.lines().enumerate() {
        let record: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
        let record = record.as_object().expect("a JSON object");
        let mut keys: Vec<&str> = record.keys().map(String::as_str).collect();
        keys.sort();
        let mut expected = ["year", "president", "party", "file", "text"];
        expected.sort();
        assert_eq!(keys, expected, "line {at}'s fields");
        let year = record["year"].as_u64().expect("a year");
        let file = record["file"].as_str().expect("a file").to_string();
        assert!(
            file.starts_with(&format!("{year}_")),
            "line {at}: {file} of {year}"
        );
        for field in ["president", "party"] {
            assert!(
                record[field].as_str().is_some_and(|s| !s.is_empty()),
                "line {at}'s {field}"
            );
        }
        let key = (year, file.clone());
        assert!(
            previous.as_ref().is_none_or(|p| *p < key),
            "line {at}: by year, then file"
        );
        previous = Some(key);
        let count = record["text"]
            .as_str()
            .expect("a text")
            .split_whitespace()
            .count();
        assert!(count > 0, "line {at}: an empty text");
        counted.0 += 1;
        counted.2 += count;
        if held_out(at) {
            counted.1 += 1;
            counted.3 += count;
            held.push((at, file, count));
        }
    }
    assert_eq!(
        counted,
        (documents, held_documents, words, held_words),
        "the table's counts"
    );
    assert_eq!(
        held_out_rows(&readme),
        held,
        "the held-out list is the rule's"
    );
}
