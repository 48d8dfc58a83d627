//! What a run was trained on, apart from its config: a file run's dataset (copied into the
//! run) and a text run's corpus and tokenizer (`tokenizer.json`), recorded in the marker when
//! the run is created and checked when it is resumed, so a run never trains on other data
//! than it started with.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::config::ResolvedRun;
use crate::hash::sha256_hex;
use tasks::TaskConfig;

/// Where a file run's data came from, and what it was.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatasetRecord {
    /// The dataset's canonical path when the run was created.
    pub source: PathBuf,
    /// SHA-256 of its bytes (and of the copy in the run).
    pub sha256: String,
    /// Its size in bytes.
    pub bytes: u64,
}

/// What a text run was trained on: its corpus and the tokenizer it read it with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TextRecord {
    /// The corpus, as named in messages (its path, or the shipped corpus).
    pub corpus: String,
    /// SHA-256 of the corpus's bytes.
    pub corpus_sha256: String,
    /// SHA-256 of `tokenizer.json`.
    pub tokenizer_sha256: String,
}

/// Where the data a config names differs from what a run recorded: the file, and what to
/// do about it.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// The file that differs.
    pub path: PathBuf,
    /// What to do.
    pub advice: &'static str,
}

/// The first difference between what a run recorded (`dataset`, `text`; its tokenizer at
/// `tokenizer`) and the data `run` was built from (`dataset_now`, [`dataset_bytes`]'s):
/// another corpus, another tokenizer, another dataset; `None` when they are the same.
pub fn first_change(
    dataset: Option<&DatasetRecord>,
    text: Option<&TextRecord>,
    tokenizer: PathBuf,
    run: &ResolvedRun,
    dataset_now: Option<DatasetBytes>,
) -> Option<Change> {
    if let (Some(recorded), Some(now)) = (text, text_record(run)) {
        if now.corpus_sha256 != recorded.corpus_sha256 {
            return Some(Change {
                path: PathBuf::from(&now.corpus),
                advice: "resuming would train on another corpus than the run started with; \
                         restore it, or start a new run with --force or --out",
            });
        }
        if now.tokenizer_sha256 != recorded.tokenizer_sha256 {
            return Some(Change {
                path: tokenizer,
                advice: "the config's tokenizer reads the corpus otherwise than the run's; \
                         train the run with its own config (headlab train RUN --resume), or \
                         start a new run with --force or --out",
            });
        }
    }
    let (recorded, (path, bytes)) = (dataset?, dataset_now?);
    (sha256_hex(&bytes) != recorded.sha256).then_some(Change {
        path,
        advice: "resuming would train on other data than the run started with; restore the \
                 file (the run keeps a copy in dataset.jsonl), or start a new run with --force \
                 or --out",
    })
}

/// A dataset's canonical path and its bytes.
pub type DatasetBytes = (PathBuf, Vec<u8>);

/// A text run's record of its corpus and tokenizer; none for other runs and for imports.
pub fn text_record(run: &ResolvedRun) -> Option<TextRecord> {
    let json = run.task.tokenizer_json()?;
    let (corpus, corpus_sha256) = run.task.corpus()?;
    run.config.import.is_none().then(|| TextRecord {
        corpus: corpus.to_string(),
        corpus_sha256: corpus_sha256.to_string(),
        tokenizer_sha256: sha256_hex(json.as_bytes()),
    })
}

/// A file run's dataset: its canonical path and bytes, read again (the task was built from
/// the same file moments before; the bytes are what gets copied and hashed).
/// An error names the path that could not be read.
pub fn dataset_bytes(run: &ResolvedRun) -> Result<Option<DatasetBytes>, (PathBuf, std::io::Error)> {
    let TaskConfig::File(spec) = &run.config.task else {
        return Ok(None);
    };
    let path = std::fs::canonicalize(&spec.path).map_err(|e| (spec.path.clone(), e))?;
    let bytes = crate::small_file::read(&path, tasks::generators::file::MAX_DATASET_BYTES)
        .map_err(|e| (path.clone(), e))?;
    Ok(Some((path, bytes)))
}
