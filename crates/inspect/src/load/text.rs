//! What a model is probed with ([`ProbeSource`]), and the natural text headlab ships: the test
//! set of the Universal Dependencies English Web Treebank (release r2.16, CC BY-SA 4.0;
//! `data/ud-english-ewt/`), built into the binary so that `headlab inspect` of an imported
//! model reads real text by default, from any directory. A model headlab trained reads its
//! task; an imported one the shipped treebank, a treebank file (`--probe-conllu`), or its
//! task's sentences (`--probe-task`, the grammar).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tasks::conllu::TreebankSentence;

/// The shipped treebank's file name.
pub const SHIPPED_FILE: &str = "en_ewt-ud-test.conllu";
/// The shipped treebank's name and release.
pub const SHIPPED_TREEBANK: &str = "UD English EWT r2.16";
/// The shipped treebank's text (`data/ud-english-ewt/en_ewt-ud-test.conllu`, unchanged).
const SHIPPED_TEXT: &str = include_str!("../../../../data/ud-english-ewt/en_ewt-ud-test.conllu");

/// The shipped treebank's sentences, in file order (2,077).
pub fn shipped_sentences() -> Vec<TreebankSentence> {
    tasks::conllu::parse(SHIPPED_TEXT, Path::new(SHIPPED_FILE))
        .expect("the shipped treebank parses (crates/headlab/tests/shipped_data.rs reads it)")
}

/// The shipped treebank's development set's file name (`data/ud-english-ewt/`): relations
/// over training choose each label's head on it and score it on the probe's treebank.
pub const SHIPPED_DEV_FILE: &str = "en_ewt-ud-dev.conllu";
/// Its text, unchanged.
const SHIPPED_DEV_TEXT: &str = include_str!("../../../../data/ud-english-ewt/en_ewt-ud-dev.conllu");

/// The shipped development set's sentences, in file order (2,001).
pub fn shipped_dev_sentences() -> Vec<TreebankSentence> {
    tasks::conllu::parse(SHIPPED_DEV_TEXT, Path::new(SHIPPED_DEV_FILE))
        .expect("the shipped development set parses (crates/headlab/tests/shipped_data.rs)")
}

/// Where a probe's sentences or sequences come from: what a report names on its pages, in
/// `summary.json` and in `provenance.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum ProbeSource {
    /// The run's own task (its `config.toml`; for an imported model the grammar), changed
    /// by `inspect --set` overrides (empty: none).
    Task {
        /// `task.KEY=VALUE`, as given.
        overrides: Vec<String>,
    },
    /// The treebank headlab ships, built into the binary: an imported model's default.
    ShippedTreebank {
        /// Its name and release.
        treebank: String,
        /// Its file name in `data/ud-english-ewt/`.
        file: String,
        /// Its SHA-256.
        sha256: String,
    },
    /// Sentences typed on the command line (`inspect --text`) or read from a text file
    /// (`--text-file`), one a line: no parse, so no relation scores.
    TypedText {
        /// The file, its absolute path when read; `None` for `--text`.
        file: Option<PathBuf>,
        /// The sentences, as typed (each line of the file, trimmed).
        sentences: Vec<String>,
        /// The words the vocabulary has no piece for, read as the unknown piece (`[UNK]`) as
        /// `transformers` reads them.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        unknown_words: Vec<String>,
    },
    /// A treebank file (`inspect --probe-conllu`).
    Treebank {
        /// The CoNLL-U file, its absolute path when read.
        file: PathBuf,
        /// Its size in bytes.
        bytes: u64,
        /// Its SHA-256.
        sha256: String,
    },
}

/// What `headlab inspect RUN` probes the run in `run` with when told nothing: the shipped
/// treebank for a model that reads word pieces (its run holds a tokenizer: a text model
/// trained here, or an import), its task otherwise. A sweep compares a report's probe with it.
pub fn default_probe(run: &run::RunDir) -> ProbeSource {
    match run.tokenizer_path().is_file() {
        true => ProbeSource::shipped(),
        false => ProbeSource::default(),
    }
}

impl Default for ProbeSource {
    fn default() -> Self {
        ProbeSource::Task { overrides: vec![] }
    }
}

impl ProbeSource {
    /// The shipped treebank.
    pub fn shipped() -> Self {
        ProbeSource::ShippedTreebank {
            treebank: SHIPPED_TREEBANK.to_string(),
            file: SHIPPED_FILE.to_string(),
            sha256: run::hash::sha256_hex(SHIPPED_TEXT.as_bytes()),
        }
    }

    /// The treebank file at `path`, as read now.
    pub fn file(path: &Path) -> std::io::Result<Self> {
        let (bytes, sha256) = run::manifest::hash_file(path)?;
        Ok(ProbeSource::Treebank {
            file: std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()),
            bytes,
            sha256,
        })
    }

    /// Whether the probe is natural text (a treebank, or typed sentences), not the task's.
    pub fn is_treebank(&self) -> bool {
        !matches!(self, ProbeSource::Task { .. })
    }

    /// One line for a page: `task grammar`, `treebank UD English EWT r2.16
    /// (en_ewt-ud-test.conllu, shipped with headlab)`, `treebank /data/x.conllu`. `task` is the run's task's name.
    pub fn describe(&self, task: &str) -> String {
        match self {
            ProbeSource::Task { overrides } if overrides.is_empty() => format!("task {task}"),
            ProbeSource::Task { overrides } => {
                format!("task {task} with {}", overrides.join(", "))
            }
            ProbeSource::ShippedTreebank { treebank, file, .. } => {
                format!("treebank {treebank} ({file}, shipped with headlab)")
            }
            ProbeSource::Treebank { file, .. } => format!("treebank {}", file.display()),
            ProbeSource::TypedText {
                file,
                sentences,
                unknown_words,
            } => {
                let count = match sentences.len() {
                    1 => "1 sentence".to_string(),
                    n => format!("{n} sentences"),
                };
                let unknown = match unknown_words.is_empty() {
                    true => String::new(),
                    false => {
                        let words: Vec<String> =
                            unknown_words.iter().map(|w| format!("{w:?}")).collect();
                        format!(
                            "; read as the unknown piece, which the vocabulary has for words \
                             it has no piece for: {}",
                            words.join(", ")
                        )
                    }
                };
                match file {
                    Some(file) => format!("text file {} ({count}{unknown})", file.display()),
                    None => format!("typed text ({count}{unknown})"),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_treebank_is_the_whole_test_set() {
        let sentences = shipped_sentences();
        assert_eq!(sentences.len(), 2077);
        assert_eq!(
            ProbeSource::shipped().describe("grammar"),
            "treebank UD English EWT r2.16 (en_ewt-ud-test.conllu, shipped with headlab)"
        );
    }

    #[test]
    fn a_probe_source_names_itself_and_reads_back() {
        let task = ProbeSource::Task {
            overrides: vec!["task.lexicon=classes".into()],
        };
        assert_eq!(
            task.describe("grammar"),
            "task grammar with task.lexicon=classes"
        );
        assert!(!task.is_treebank() && ProbeSource::shipped().is_treebank());
        let json = serde_json::to_string(&ProbeSource::shipped()).unwrap();
        assert!(json.contains("\"kind\":\"shipped_treebank\""), "{json}");
        let back: ProbeSource = serde_json::from_str(&json).unwrap();
        assert_eq!(back, ProbeSource::shipped());
    }
}
