//! The data the repository ships are what their README says (issue 51, item 1): every row of
//! `data/ud-english-ewt/README.md`'s table names a file there with its size and SHA-256, and
//! each treebank reads whole, with its count of sentences, through headlab's CoNLL-U reader.

use std::path::{Path, PathBuf};

fn treebank_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/ud-english-ewt")
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
    let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name != "README.md")
        .collect();
    on_disk.sort();
    let mut listed = files;
    listed.sort();
    assert_eq!(on_disk, listed);
}
