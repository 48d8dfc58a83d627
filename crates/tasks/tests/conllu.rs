//! headlab's CoNLL-U reader against PyPI's `conllu` package, on the committed fixtures:
//! `grammar.conllu` (the `grammar` task's sentences, as headlab writes them; kept equal to
//! the writer's output by the first test) and `ud-sample.conllu` (a hand-written sample in
//! Universal Dependencies' style, with multiword tokens, empty nodes and enhanced
//! dependencies). `scripts/fixtures/conllu_reference.py` wrote what `conllu` reads of each
//! into `conllu-reference.json`.

use std::path::{Path, PathBuf};

use tasks::conllu::{parse, read, write_parsed};
use tasks::{GrammarSpec, TaskConfig};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// The grammar sentences of the fixture: 20 of the default grammar, seed 1.
fn grammar_text() -> String {
    let task = TaskConfig::Grammar(GrammarSpec::default())
        .build(Path::new("."))
        .unwrap();
    write_parsed(&task.parsed_sentences(20, 1), &task.token_names().unwrap())
}

#[test]
fn the_committed_grammar_file_is_what_the_writer_writes() {
    let path = fixtures().join("grammar.conllu");
    if std::env::var_os("HEADLAB_WRITE_FIXTURES").is_some() {
        std::fs::write(&path, grammar_text()).unwrap();
    }
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        grammar_text(),
        "rewrite it with HEADLAB_WRITE_FIXTURES=1, then run scripts/fixtures/conllu_reference.py"
    );
}

#[test]
fn every_fixture_reads_as_the_conllu_package_reads_it() {
    let reference: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fixtures().join("conllu-reference.json")).unwrap())
            .unwrap();
    let files = reference["files"].as_object().unwrap();
    assert_eq!(files.len(), 2);
    let strings = |value: &serde_json::Value| -> Vec<String> {
        value
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect()
    };
    for (name, sentences) in files {
        let read = read(&fixtures().join(name)).unwrap();
        let sentences = sentences.as_array().unwrap();
        assert_eq!(read.len(), sentences.len(), "{name}");
        for (got, want) in read.iter().zip(sentences) {
            assert_eq!(got.words, strings(&want["words"]), "{name}");
            assert_eq!(got.relations, strings(&want["relations"]), "{name}");
            let heads: Vec<usize> = want["heads"]
                .as_array()
                .unwrap()
                .iter()
                .map(|h| h.as_u64().unwrap() as usize)
                .collect();
            assert_eq!(got.heads, heads, "{name}");
            assert_eq!(got.sent_id.as_deref(), want["sent_id"].as_str(), "{name}");
            assert_eq!(got.text.as_deref(), want["text"].as_str(), "{name}");
        }
    }
}

#[test]
fn a_sentence_cut_from_the_sample_is_still_checked_as_a_tree() {
    // The sample's first sentence without its root line: no root, and `sleep` (9) is gone,
    // so the heads that pointed at it are out of range.
    let text = std::fs::read_to_string(fixtures().join("ud-sample.conllu")).unwrap();
    let first: String = text
        .split("\n\n")
        .next()
        .unwrap()
        .lines()
        .filter(|line| !line.starts_with("9\t") && !line.starts_with("10\t"))
        .map(|line| format!("{line}\n"))
        .collect();
    let error = parse(&first, Path::new("cut.conllu"))
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with(
            "cut.conllu:5: HEAD 9 of word 2 is out of range: the sentence has 8 words"
        ),
        "{error}"
    );
}
