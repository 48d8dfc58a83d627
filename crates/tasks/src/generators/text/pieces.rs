//! The text task's tokenizer and its corpus as pieces: a WordPiece tokenizer trained from the
//! training documents with Hugging Face `tokenizers`' trainer (BERT's normalizer,
//! pre-tokenizer, special pieces and `[CLS] … [SEP]` template), or one a config names; and
//! documents encoded into one stream of piece ids.
//!
//! The trainer picks the same pieces every time, but numbers the continuation alphabet
//! (`##a`, `##b`, …) in a hash map's order, which changes from process to process. So the
//! trained vocabulary is renumbered canonically (the special pieces first, then every other
//! piece in byte order): the same corpus and vocabulary size give the same `tokenizer.json`,
//! byte for byte, in every run and every seed, so seeds compare piece by piece.

use std::path::{Path, PathBuf};

use tokenizers::models::TrainerWrapper;
use tokenizers::models::wordpiece::{WordPiece, WordPieceTrainer};
use tokenizers::normalizers::bert::BertNormalizer;
use tokenizers::pre_tokenizers::bert::BertPreTokenizer;
use tokenizers::processors::template::TemplateProcessing;
use tokenizers::{AddedToken, NormalizedString, Normalizer, Tokenizer};

use crate::error::TaskError;

/// The special pieces, in id order: a trained tokenizer numbers them 0 to 4.
pub const SPECIAL_PIECES: [&str; 5] = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"];

/// The pieces a text model needs by id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SpecialIds {
    pub pad: u32,
    pub cls: u32,
    pub sep: u32,
    pub mask: u32,
}

/// A tokenizer ready to encode, its `tokenizer.json` and its special pieces' ids.
#[derive(Clone)]
pub(crate) struct TextTokenizer {
    pub tokenizer: Tokenizer,
    /// The serialized tokenizer, as written into a run.
    pub json: String,
    pub special: SpecialIds,
    /// Pieces in the vocabulary (special pieces included).
    pub vocab_size: usize,
}

impl std::fmt::Debug for TextTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TextTokenizer")
            .field("vocab_size", &self.vocab_size)
            .field("special", &self.special)
            .finish()
    }
}

/// Documents as one stream of pieces, each document's pieces followed by `[SEP]`.
#[derive(Debug, Clone, Default)]
pub(crate) struct PieceStream {
    /// Piece ids.
    pub ids: Vec<u32>,
    /// Whether each piece starts a word (for whole-word masking); `[SEP]` starts its own.
    pub starts_word: Vec<bool>,
}

impl TextTokenizer {
    /// A WordPiece tokenizer of at most `vocab_size` pieces trained from `documents`.
    pub fn train(
        documents: &[String],
        vocab_size: usize,
        lowercase: bool,
    ) -> Result<Self, TaskError> {
        let failed = |error: tokenizers::Error| TaskError::TokenizerTraining {
            reason: error.to_string(),
        };
        let mut tokenizer = bert_pipeline(WordPiece::default(), lowercase);
        // The trainer breaks ties between equally frequent pairs by their ids, and numbers a
        // continuation piece (`##e`) when it first meets it in a hash map's order. Given every
        // continuation piece of the corpus's alphabet up front, in order, it numbers all of
        // them before it starts, and so merges the same pairs every time.
        let continuations = continuation_alphabet(documents, lowercase)?;
        let mut trainer: TrainerWrapper = WordPieceTrainer::builder()
            .vocab_size(vocab_size)
            .show_progress(false)
            .special_tokens(
                SPECIAL_PIECES
                    .iter()
                    .map(|piece| piece.to_string())
                    .chain(continuations)
                    .map(|piece| AddedToken::from(piece, true))
                    .collect(),
            )
            .build()
            .into();
        tokenizer
            .train(&mut trainer, documents.iter())
            .map_err(failed)?;
        let mut vocab: Vec<(String, u32)> = tokenizer.get_vocab(false).into_iter().collect();
        // Canonical ids: the special pieces first, in order, then the others in byte order.
        vocab.sort_by(|(a, _), (b, _)| {
            let rank = |piece: &str| SPECIAL_PIECES.iter().position(|s| *s == piece);
            match (rank(a), rank(b)) {
                (Some(x), Some(y)) => x.cmp(&y),
                (Some(_), None) => std::cmp::Ordering::Less,
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (None, None) => a.cmp(b),
            }
        });
        let ids: serde_json::Map<String, serde_json::Value> = vocab
            .into_iter()
            .enumerate()
            .map(|(id, (piece, _))| (piece, id.into()))
            .collect();
        // Renumbered through the serialized form: the model's vocabulary and the special
        // pieces' entries take the canonical ids.
        let mut json: serde_json::Value =
            serde_json::from_str(&tokenizer.to_string(false).map_err(failed)?)
                .expect("a tokenizer serializes to JSON");
        // Only BERT's special pieces stay added tokens; the continuations given to the trainer
        // are ordinary pieces of the vocabulary.
        let added: Vec<serde_json::Value> = SPECIAL_PIECES
            .iter()
            .map(|piece| {
                serde_json::json!({
                    "id": ids[*piece], "content": piece, "single_word": false, "lstrip": false,
                    "rstrip": false, "normalized": false, "special": true
                })
            })
            .collect();
        json["added_tokens"] = added.into();
        json["model"]["vocab"] = serde_json::Value::Object(ids);
        let tokenizer = Tokenizer::from_bytes(json.to_string()).map_err(failed)?;
        Self::ready(tokenizer, Path::new("(trained)"))
    }

    /// The tokenizer of the `tokenizer.json` at `path` (resolved against `base_dir`).
    pub fn load(path: &Path, base_dir: &Path) -> Result<Self, TaskError> {
        let path = base_dir.join(path);
        let bytes = crate::small_file::read(&path, MAX_TOKENIZER_BYTES).map_err(|error| {
            TaskError::TokenizerRead {
                path: path.clone(),
                reason: error.to_string(),
            }
        })?;
        let tokenizer =
            Tokenizer::from_bytes(&bytes).map_err(|error| TaskError::TokenizerRead {
                path: path.clone(),
                reason: error.to_string(),
            })?;
        Self::ready(tokenizer, &path)
    }

    /// The tokenizer with its `[CLS] … [SEP]` template set from its own ids.
    fn ready(mut tokenizer: Tokenizer, path: &Path) -> Result<Self, TaskError> {
        let id = |piece: &str| {
            tokenizer
                .token_to_id(piece)
                .ok_or_else(|| TaskError::TokenizerRead {
                    path: PathBuf::from(path),
                    reason: format!(
                        "it has no {piece} piece; a text model needs {}",
                        SPECIAL_PIECES.join(" ")
                    ),
                })
        };
        let special = SpecialIds {
            pad: id("[PAD]")?,
            cls: id("[CLS]")?,
            sep: id("[SEP]")?,
            mask: id("[MASK]")?,
        };
        let template = TemplateProcessing::builder()
            .try_single("[CLS] $A [SEP]")
            .and_then(|builder| builder.try_pair("[CLS] $A [SEP] $B:1 [SEP]:1"))
            .map(|builder| {
                builder
                    .special_tokens(vec![("[CLS]", special.cls), ("[SEP]", special.sep)])
                    .build()
            })
            .expect("a fixed template")
            .expect("a fixed template's pieces");
        tokenizer.with_post_processor(Some(template));
        let json = tokenizer.to_string(true).expect("a tokenizer serializes");
        let vocab_size = tokenizer.get_vocab_size(true);
        Ok(TextTokenizer {
            tokenizer,
            json,
            special,
            vocab_size,
        })
    }

    /// `documents` as one stream of pieces, each followed by `[SEP]`.
    pub fn encode(&self, documents: &[String]) -> Result<PieceStream, TaskError> {
        let encodings = self
            .tokenizer
            .encode_batch(documents.iter().map(String::as_str).collect(), false)
            .map_err(|error| TaskError::TokenizerTraining {
                reason: error.to_string(),
            })?;
        let mut stream = PieceStream::default();
        for encoding in encodings {
            let mut previous = None;
            for (&id, &word) in encoding.get_ids().iter().zip(encoding.get_word_ids()) {
                stream.ids.push(id);
                stream.starts_word.push(word.is_none() || word != previous);
                previous = word;
            }
            stream.ids.push(self.special.sep);
            stream.starts_word.push(true);
        }
        Ok(stream)
    }
}

/// `##c` for every character `c` of the documents as BERT's normalizer leaves them, in
/// character order.
fn continuation_alphabet(documents: &[String], lowercase: bool) -> Result<Vec<String>, TaskError> {
    let normalizer = BertNormalizer::new(true, true, None, lowercase);
    let mut alphabet = std::collections::BTreeSet::new();
    for document in documents {
        let mut normalized = NormalizedString::from(document.as_str());
        normalizer
            .normalize(&mut normalized)
            .map_err(|error| TaskError::TokenizerTraining {
                reason: error.to_string(),
            })?;
        alphabet.extend(normalized.get().chars().filter(|c| !c.is_whitespace()));
    }
    Ok(alphabet.into_iter().map(|c| format!("##{c}")).collect())
}

/// The largest `tokenizer.json` accepted (BERT-base's is 700 KB; multilingual ones 17 MB).
pub const MAX_TOKENIZER_BYTES: u64 = 64 << 20;

/// A tokenizer around `model` with BERT's normalizer (lowercasing or not), pre-tokenizer and
/// WordPiece decoder.
fn bert_pipeline(model: WordPiece, lowercase: bool) -> Tokenizer {
    let mut tokenizer = Tokenizer::new(model);
    tokenizer
        .with_normalizer(Some(BertNormalizer::new(true, true, None, lowercase)))
        .expect("BERT's normalizer fits a WordPiece model");
    tokenizer.with_pre_tokenizer(Some(BertPreTokenizer));
    tokenizer.with_decoder(Some(tokenizers::decoders::wordpiece::WordPiece::default()));
    tokenizer
}

#[cfg(test)]
mod tests {
    use super::*;

    fn documents() -> Vec<String> {
        [
            "The farmers sell the crops at the market.",
            "A farmer sells crops; the markets buy them.",
            "Selling and buying, the nation grows.",
        ]
        .iter()
        .map(|s| s.repeat(3))
        .collect()
    }

    #[test]
    fn training_twice_gives_the_same_tokenizer_byte_for_byte() {
        let first = TextTokenizer::train(&documents(), 120, true).unwrap();
        let second = TextTokenizer::train(&documents(), 120, true).unwrap();
        assert_eq!(first.json, second.json);
        assert_eq!(
            first.special,
            SpecialIds {
                pad: 0,
                cls: 2,
                sep: 3,
                mask: 4
            }
        );
        assert!(first.vocab_size <= 120, "{}", first.vocab_size);
    }

    /// On real text, where many pairs tie near the end of training, too.
    #[test]
    fn training_on_the_shipped_corpus_is_deterministic() {
        let corpus = super::super::corpus::Corpus::load(None, Path::new(".")).unwrap();
        let documents = &corpus.train[..30];
        let first = TextTokenizer::train(documents, 3000, true).unwrap();
        let second = TextTokenizer::train(documents, 3000, true).unwrap();
        assert_eq!(first.vocab_size, 3000);
        assert!(first.json == second.json, "two trainings differ");
    }

    #[test]
    fn a_written_tokenizer_reads_back_and_encodes_the_same() {
        let trained = TextTokenizer::train(&documents(), 120, true).unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("tokenizer.json"), &trained.json).unwrap();
        let read = TextTokenizer::load(Path::new("tokenizer.json"), dir.path()).unwrap();
        assert_eq!(read.json, trained.json);
        let docs = vec!["The farmers sell crops.".to_string()];
        let (a, b) = (trained.encode(&docs).unwrap(), read.encode(&docs).unwrap());
        assert_eq!(a.ids, b.ids);
        assert_eq!(*a.ids.last().unwrap(), trained.special.sep);
        // "the farmers sell crops ." : every piece a word start but a continuation's.
        let text = trained.tokenizer.decode(&a.ids, true).unwrap();
        assert_eq!(text, "the farmers sell crops.");
        let starts = a.starts_word.iter().filter(|s| **s).count();
        assert_eq!(starts, 6, "{:?}", a.starts_word); // 5 words and [SEP]
    }

    #[test]
    fn a_tokenizer_without_the_special_pieces_is_refused_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.json");
        std::fs::write(&path, "{not json").unwrap();
        let error = TextTokenizer::load(&path, dir.path())
            .unwrap_err()
            .to_string();
        assert!(error.contains("t.json"), "{error}");
    }
}
