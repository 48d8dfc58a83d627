//! A corpus of documents for masked-LM pretraining: JSON Lines, one document a line with its
//! text in `"text"` (other fields are kept out), plain or gzip-compressed, and its fixed split
//! into training and held-out documents. The shipped corpus (the State of the Union
//! addresses, `data/state-of-the-union/`) is built into the binary, so a config that names
//! no corpus trains from any directory.

use std::io::Read;
use std::path::{Path, PathBuf};

use flate2::read::GzDecoder;
use serde::Deserialize;

use crate::error::TaskError;

/// The shipped corpus, gzip-compressed JSON Lines.
const SHIPPED: &[u8] = include_bytes!("../../../../../data/state-of-the-union/addresses.jsonl.gz");

/// How the shipped corpus is named in messages and in `summary.json`.
pub const SHIPPED_NAME: &str = "the shipped State of the Union addresses";

/// The most a corpus may hold, decompressed: far beyond the shipped one (11 MB), and bounded
/// so that a FIFO, `/dev/zero` or a runaway file is refused rather than read until the memory
/// runs out.
pub const MAX_CORPUS_BYTES: u64 = 512 << 20;

/// The longest line (one document) accepted, in bytes.
pub const MAX_DOCUMENT_BYTES: usize = 16 << 20;

/// Every `HELD_OUT_EVERY`-th document (positions `HELD_OUT_EVERY - 1`, `2 * HELD_OUT_EVERY -
/// 1`, ... in file order) is held out for evaluation: a split by document, fixed before any
/// training, spread over the corpus's whole span of years.
pub const HELD_OUT_EVERY: usize = 10;

/// A corpus's documents, split.
#[derive(Debug, Clone)]
pub(crate) struct Corpus {
    /// How the corpus is named in messages: its path, or [`SHIPPED_NAME`].
    pub name: String,
    /// The training documents, in file order.
    pub train: Vec<String>,
    /// The held-out documents, in file order.
    pub held_out: Vec<String>,
    /// SHA-256 of the corpus's bytes as stored (compressed or not), lowercase hex: what a run
    /// records to refuse resuming on another corpus.
    pub sha256: String,
}

#[derive(Deserialize)]
struct Document {
    text: String,
}

impl Corpus {
    /// The corpus at `path` (resolved against `base_dir`), or the shipped one.
    pub fn load(path: Option<&Path>, base_dir: &Path) -> Result<Corpus, TaskError> {
        let Some(path) = path else {
            let text = decompress(SHIPPED, Path::new(SHIPPED_NAME))?;
            return Ok(Corpus::parse(SHIPPED_NAME, &text)?.stored_as(SHIPPED));
        };
        let path = base_dir.join(path);
        let read_error = |error| TaskError::CorpusRead {
            path: path.clone(),
            error,
        };
        let bytes = crate::small_file::read(&path, MAX_CORPUS_BYTES).map_err(read_error)?;
        let text = if bytes.starts_with(&[0x1f, 0x8b]) {
            decompress(&bytes, &path)?
        } else {
            utf8(bytes.clone(), &path)?
        };
        Ok(Corpus::parse(&path.display().to_string(), &text)?.stored_as(&bytes))
    }

    /// This corpus with the SHA-256 of `bytes`, its stored form.
    fn stored_as(mut self, bytes: &[u8]) -> Corpus {
        use sha2::{Digest, Sha256};
        self.sha256 = Sha256::digest(bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        self
    }

    /// The documents of JSON Lines `text`, split. `name` names the corpus in messages.
    pub fn parse(name: &str, text: &str) -> Result<Corpus, TaskError> {
        let mut documents = vec![];
        for (index, line) in text.lines().enumerate() {
            let line_number = index + 1;
            if line.trim().is_empty() {
                continue;
            }
            if line.len() > MAX_DOCUMENT_BYTES {
                return Err(TaskError::CorpusLine {
                    corpus: name.to_string(),
                    line: line_number,
                    reason: format!(
                        "{} bytes long; a document may hold at most {MAX_DOCUMENT_BYTES}",
                        line.len()
                    ),
                });
            }
            let document: Document =
                serde_json::from_str(line).map_err(|error| TaskError::CorpusLine {
                    corpus: name.to_string(),
                    line: line_number,
                    reason: format!(
                        "{error}; expected a JSON object with its text in \"text\", \
                         like {{\"text\": \"Fellow-Citizens ...\"}}"
                    ),
                })?;
            documents.push(document.text);
        }
        if documents.len() < HELD_OUT_EVERY {
            return Err(TaskError::TooFewDocuments {
                corpus: name.to_string(),
                count: documents.len(),
                needed: HELD_OUT_EVERY,
            });
        }
        let (mut train, mut held_out) = (vec![], vec![]);
        for (index, document) in documents.into_iter().enumerate() {
            match is_held_out(index) {
                true => held_out.push(document),
                false => train.push(document),
            }
        }
        Ok(Corpus {
            name: name.to_string(),
            train,
            held_out,
            sha256: String::new(),
        })
    }
}

/// Whether the document at `index` (0-based, in file order) is held out.
pub fn is_held_out(index: usize) -> bool {
    index % HELD_OUT_EVERY == HELD_OUT_EVERY - 1
}

/// The text of gzip-compressed `bytes`, at most [`MAX_CORPUS_BYTES`] of it.
fn decompress(bytes: &[u8], path: &Path) -> Result<String, TaskError> {
    let mut text = Vec::new();
    GzDecoder::new(bytes)
        .take(MAX_CORPUS_BYTES + 1)
        .read_to_end(&mut text)
        .map_err(|error| TaskError::CorpusRead {
            path: path.to_path_buf(),
            error,
        })?;
    if text.len() as u64 > MAX_CORPUS_BYTES {
        return Err(TaskError::CorpusRead {
            path: path.to_path_buf(),
            error: std::io::Error::other(format!(
                "it decompresses to more than {MAX_CORPUS_BYTES} bytes"
            )),
        });
    }
    utf8(text, path)
}

/// `bytes` as UTF-8 text, or an error naming the first invalid byte's line and byte.
fn utf8(bytes: Vec<u8>, path: &Path) -> Result<String, TaskError> {
    String::from_utf8(bytes).map_err(|error| {
        let valid = error.utf8_error().valid_up_to();
        let bytes = error.as_bytes();
        let line = 1 + bytes[..valid].iter().filter(|&&b| b == b'\n').count();
        let line_start = bytes[..valid]
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |at| at + 1);
        TaskError::CorpusNotUtf8 {
            path: PathBuf::from(path),
            line,
            byte: valid - line_start + 1,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(n: usize) -> String {
        (0..n)
            .map(|i| format!("{{\"text\": \"document {i}\", \"year\": {i}}}\n"))
            .collect()
    }

    #[test]
    fn every_tenth_document_is_held_out_in_file_order() {
        let corpus = Corpus::parse("c", &lines(25)).unwrap();
        assert_eq!(corpus.held_out, ["document 9", "document 19"]);
        assert_eq!(corpus.train.len(), 23);
        assert_eq!(corpus.train[9], "document 10");
    }

    #[test]
    fn bad_lines_are_named_by_line() {
        let text = format!("{}{{\"words\": 3}}\n", lines(12));
        let error = Corpus::parse("c.jsonl", &text).unwrap_err().to_string();
        assert!(
            error.starts_with("c.jsonl line 13: missing field `text`"),
            "{error}"
        );
        let error = Corpus::parse("c.jsonl", &lines(3)).unwrap_err().to_string();
        assert!(error.contains("holds 3 documents"), "{error}");
    }

    #[test]
    fn invalid_utf8_is_named_by_line_and_byte() {
        let mut bytes = lines(2).into_bytes();
        bytes.extend_from_slice(b"{\"text\": \"ab\xff\"}\n");
        let error = utf8(bytes, Path::new("c.jsonl")).unwrap_err().to_string();
        assert!(error.contains("line 3, byte 13"), "{error}");
    }

    #[test]
    fn the_shipped_corpus_reads_and_splits() {
        let corpus = Corpus::load(None, Path::new(".")).unwrap();
        assert!(corpus.train.len() > 200, "{}", corpus.train.len());
        assert!(corpus.held_out.len() > 20, "{}", corpus.held_out.len());
        assert!(corpus.train[0].starts_with("Fellow-Citizens"));
    }
}
