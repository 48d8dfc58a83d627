//! A checkpoint's tokenizer: Hugging Face's `tokenizer.json`, read with the `tokenizers`
//! crate (the library `transformers` itself runs), so text becomes the word pieces the
//! model was trained on, with its `[CLS]` and `[SEP]`, and each piece knows the word it came
//! from: what word-level attention (Clark et al. 2019) sums and averages over.

use std::path::{Path, PathBuf};

use tokenizers::{EncodeInput, InputSequence, Tokenizer};

/// The largest `tokenizer.json` read: BERT's is 0.7 MB, a multilingual vocabulary of 250k
/// pieces about 17 MB. Checked before reading, so a wrong file is refused, not loaded.
pub const MAX_TOKENIZER_BYTES: u64 = 64 << 20;

/// Why a tokenizer could not be read or used.
#[derive(Debug, thiserror::Error)]
pub enum TokenizerError {
    /// Not there, unreadable, too large, or not a tokenizer.
    #[error("{path}: {message}")]
    Read {
        /// The file.
        path: PathBuf,
        /// What is wrong, and what would be accepted.
        message: String,
    },
    /// Text the tokenizer could not encode.
    #[error("{path}: cannot encode {text:?}: {message}")]
    Encode {
        /// The tokenizer file.
        path: PathBuf,
        /// The start of the text.
        text: String,
        /// The library's message.
        message: String,
    },
}

/// A sentence as word pieces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Encoded {
    /// Piece ids, with the tokenizer's special tokens (`[CLS] ... [SEP]` for BERT).
    pub ids: Vec<u32>,
    /// The pieces as written in the vocabulary (`farm`, `##er`, `[CLS]`).
    pub pieces: Vec<String>,
    /// For each piece, the word it belongs to (0-based); `None` for special tokens.
    pub words: Vec<Option<usize>>,
}

impl Encoded {
    /// The first of `words` words that has no piece (a zero-width or control character the
    /// tokenizer drops): nothing could attend to it or from it.
    pub fn first_word_without_piece(&self, words: usize) -> Option<usize> {
        (0..words).find(|w| !self.words.contains(&Some(*w)))
    }
}

/// Text read as `transformers` reads it (`tokenizer(text)`): its pieces, and its words as
/// the tokenizer's own normalizer and pre-tokenizer make them (`word_ids()`), so an emoji with
/// its variation selector, a letter with its combining accent, each CJK character and a
/// dropped byte-order mark are what the checkpoint makes of them, not what a second splitter
/// would.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextWords {
    /// Each word as typed: the text its pieces came from (`word_to_chars`), without the space
    /// before it that a SentencePiece or byte-level piece holds; a word of spaces alone (the
    /// second of two spaces, which a byte-level BPE keeps as a piece) is its pieces (`Ġ`).
    pub words: Vec<String>,
    /// The pieces, with the special tokens; [`Encoded::words`] numbers the words 0, 1, ... in
    /// order, indexing `words`.
    pub encoded: Encoded,
    /// The words read as the unknown piece alone (`[UNK]`, `<unk>`): the vocabulary has no
    /// piece for them, and the model reads them all alike.
    pub unknown: Vec<usize>,
}

/// A loaded `tokenizer.json`.
#[derive(Debug, Clone)]
pub struct WordPieces {
    tokenizer: Tokenizer,
    /// The tokenizer for words already split, where it differs ([`words_tokenizer`]).
    words_tokenizer: Option<Tokenizer>,
    path: PathBuf,
}

/// The spellings of the mask piece across families: BERT's WordPiece, RoBERTa's and
/// XLM-R's `<mask>`.
const MASK_PIECES: [&str; 2] = ["[MASK]", "<mask>"];

/// The spellings of the unknown piece: BERT's, and RoBERTa's and SentencePiece's.
const UNKNOWN_PIECES: [&str; 2] = ["[UNK]", "<unk>"];

impl WordPieces {
    /// Reads `path`, refusing a file over [`MAX_TOKENIZER_BYTES`] or not a regular file
    /// before reading it.
    pub fn read(path: &Path) -> Result<WordPieces, TokenizerError> {
        Self::parse(&Self::read_bytes(path)?, path)
    }

    /// The bytes of the file at `path` ([`run::small_file::read`]).
    pub fn read_bytes(path: &Path) -> Result<Vec<u8>, TokenizerError> {
        let fail = |message: String| TokenizerError::Read {
            path: path.to_path_buf(),
            message,
        };
        run::small_file::read(path, MAX_TOKENIZER_BYTES)
            .map_err(|e| fail(format!("cannot read it: {e}")))
    }

    /// A tokenizer from the contents of a `tokenizer.json`; `path` names it in messages.
    pub fn parse(bytes: &[u8], path: &Path) -> Result<WordPieces, TokenizerError> {
        let fail = |message: String| TokenizerError::Read {
            path: path.to_path_buf(),
            message,
        };
        let mut tokenizer = Tokenizer::from_bytes(bytes).map_err(|e| {
            fail(format!(
                "not a Hugging Face tokenizer.json ({e}); save one with \
                 tokenizer.save_pretrained(DIR) in transformers"
            ))
        })?;
        // A checkpoint's file may pad every sentence to a fixed length and cut longer ones
        // (all-MiniLM-L6-v2's pads and cuts at 128): headlab pads a batch itself and refuses
        // a sentence longer than the model's positions, rather than reading part of it.
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(None)
            .map_err(|e| fail(e.to_string()))?;
        let words_tokenizer = words_tokenizer(bytes)
            .map(|json| {
                let mut words = Tokenizer::from_bytes(json.as_bytes())
                    .map_err(|e| fail(format!("cannot read it for words already split: {e}")))?;
                words.with_padding(None);
                words
                    .with_truncation(None)
                    .map_err(|e| fail(e.to_string()))?;
                Ok(words)
            })
            .transpose()?;
        Ok(WordPieces {
            tokenizer,
            words_tokenizer,
            path: path.to_path_buf(),
        })
    }

    /// What kind of tokenizer it is, for a page: `WordPiece`, `byte-level BPE`, `BPE`,
    /// `Unigram (SentencePiece)` or `WordLevel`, from its model and pre-tokenizer.
    pub fn kind(&self) -> &'static str {
        use tokenizers::models::ModelWrapper;
        match self.tokenizer.get_model() {
            ModelWrapper::WordPiece(_) => "WordPiece",
            ModelWrapper::BPE(_) if self.byte_level() => "byte-level BPE",
            ModelWrapper::BPE(_) => "BPE",
            ModelWrapper::Unigram(_) => "Unigram (SentencePiece)",
            ModelWrapper::WordLevel(_) => "WordLevel",
        }
    }

    /// Whether its pre-tokenizer splits into bytes (a byte-level BPE's, `add_prefix_space`
    /// set or not).
    fn byte_level(&self) -> bool {
        let json = serde_json::to_value(self.tokenizer.get_pre_tokenizer()).unwrap_or_default();
        json.to_string().contains("\"ByteLevel\"")
    }

    /// The file it was read from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Pieces in the vocabulary, added tokens included: the rows an embedding must have.
    pub fn vocab_size(&self) -> usize {
        self.tokenizer.get_vocab_size(true)
    }

    /// The highest id the tokenizer can produce, plus one (at least [`Self::vocab_size`]
    /// where ids are dense).
    pub fn id_bound(&self) -> usize {
        self.tokenizer
            .get_vocab(true)
            .values()
            .map(|&id| id as usize + 1)
            .max()
            .unwrap_or(0)
    }

    /// What breaks "each id one piece" (ids `0..id_bound`, as the embedding's rows): an id
    /// that two pieces share, or one that no piece has; `None` when every id is one piece.
    pub fn ids_not_one_piece_each(&self) -> Option<String> {
        let mut pieces_of: Vec<Vec<String>> = vec![vec![]; self.id_bound()];
        for (piece, id) in self.tokenizer.get_vocab(true) {
            pieces_of[id as usize].push(piece);
        }
        let shared = pieces_of.iter().position(|pieces| pieces.len() > 1);
        let missing = pieces_of.iter().position(Vec::is_empty);
        let shared = shared.map(|id| {
            let mut pieces = pieces_of[id].clone();
            pieces.sort();
            format!("id {id} is shared by {pieces:?}")
        });
        let missing = missing.map(|id| format!("id {id} is no piece's"));
        match (shared, missing) {
            (None, None) => None,
            (Some(one), None) | (None, Some(one)) => Some(one),
            (Some(shared), Some(missing)) => Some(format!("{shared} and {missing}")),
        }
    }

    /// The id of `piece` (`"[MASK]"`, say), if the vocabulary has it.
    pub fn id(&self, piece: &str) -> Option<u32> {
        self.tokenizer.token_to_id(piece)
    }

    /// The id of the mask piece (`[MASK]` or `<mask>`), if the vocabulary has one.
    pub fn mask_id(&self) -> Option<u32> {
        MASK_PIECES.iter().find_map(|piece| self.id(piece))
    }

    /// The id of the unknown piece (`[UNK]` or `<unk>`), if the vocabulary has one.
    pub fn unknown_id(&self) -> Option<u32> {
        UNKNOWN_PIECES.iter().find_map(|piece| self.id(piece))
    }

    /// The piece of `id`.
    pub fn piece(&self, id: u32) -> Option<String> {
        self.tokenizer.id_to_token(id)
    }

    /// `text` as the model reads it, with the special tokens.
    pub fn encode_text(&self, text: &str) -> Result<Encoded, TokenizerError> {
        let input = EncodeInput::Single(InputSequence::from(text));
        self.encode(&self.tokenizer, input, text)
    }

    /// `text` as `transformers` reads it, its words the tokenizer's own ([`TextWords`]).
    pub fn read_text(&self, text: &str) -> Result<TextWords, TokenizerError> {
        let input = EncodeInput::Single(InputSequence::from(text));
        let encoding = self
            .tokenizer
            .encode(input, true)
            .map_err(|e| self.encode_error(text, e))?;
        let unknown_id = self.unknown_id();
        // The tokenizer's word ids, numbered again 0, 1, ... in order: a pre-tokenized word
        // that came out as no piece would otherwise leave a gap.
        let (ids, pieces, offsets) = (
            encoding.get_ids(),
            encoding.get_tokens(),
            encoding.get_offsets(),
        );
        let mut words: Vec<String> = vec![];
        let mut unknown: Vec<bool> = vec![];
        let mut word_of_piece = vec![];
        // The tokenizer's number of the word being read, and its first piece.
        let mut current: Option<(u32, usize)> = None;
        for (i, word) in encoding.get_word_ids().iter().enumerate() {
            let Some(word) = *word else {
                word_of_piece.push(None);
                continue;
            };
            let first = match current {
                Some((number, first)) if number == word => first,
                _ => {
                    current = Some((word, i));
                    words.push(String::new());
                    unknown.push(true);
                    i
                }
            };
            let index = words.len() - 1;
            word_of_piece.push(Some(index));
            unknown[index] &= Some(ids[i]) == unknown_id;
            // The word's text runs from its first piece's start to its last piece's end, the
            // space a SentencePiece or byte-level piece carries left out.
            let span = text.get(offsets[first].0..offsets[i].1.max(offsets[first].0));
            words[index] = match span.map(str::trim) {
                Some(span) if !span.is_empty() => span.to_string(),
                _ => pieces[first..=i].concat(),
            };
        }
        Ok(TextWords {
            words,
            encoded: Encoded {
                ids: ids.to_vec(),
                pieces: pieces.to_vec(),
                words: word_of_piece,
            },
            unknown: unknown
                .iter()
                .enumerate()
                .filter_map(|(w, &unknown)| unknown.then_some(w))
                .collect(),
        })
    }

    /// The library's failure to encode `text`, naming the tokenizer file and the text.
    fn encode_error(&self, text: &str, error: tokenizers::Error) -> TokenizerError {
        TokenizerError::Encode {
            path: self.path.clone(),
            text: run::config::excerpt(text, 60),
            message: error.to_string(),
        }
    }

    /// Words already split (a parsed sentence's), each to its pieces, with the special
    /// tokens; [`Encoded::words`] indexes `words`.
    pub fn encode_words(&self, words: &[&str]) -> Result<Encoded, TokenizerError> {
        let input = EncodeInput::Single(InputSequence::from(words.to_vec()));
        let tokenizer = self.words_tokenizer.as_ref().unwrap_or(&self.tokenizer);
        self.encode(tokenizer, input, &words.join(" "))
    }

    fn encode(
        &self,
        tokenizer: &Tokenizer,
        input: EncodeInput,
        text: &str,
    ) -> Result<Encoded, TokenizerError> {
        let encoding = tokenizer
            .encode(input, true)
            .map_err(|e| self.encode_error(text, e))?;
        Ok(Encoded {
            ids: encoding.get_ids().to_vec(),
            pieces: encoding.get_tokens().to_vec(),
            words: encoding
                .get_word_ids()
                .iter()
                .map(|w| w.map(|w| w as usize))
                .collect(),
        })
    }
}

/// The `tokenizer.json` (as `bytes`) that reads words already split as `transformers` does
/// (`is_split_into_words`), where that differs from the file: a byte-level BPE (RoBERTa's,
/// ModernBERT's) must then add a space before every word, the first included
/// (`add_prefix_space`, which `transformers` requires for split words), or a word would read
/// as the middle of another. `None` where the file reads split words as they are (WordPiece,
/// SentencePiece) or cannot be read as JSON (then parsing it fails anyway).
fn words_tokenizer(bytes: &[u8]) -> Option<String> {
    let mut json: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    let changed = add_prefix_space(json.get_mut("pre_tokenizer")?);
    changed.then(|| json.to_string())
}

/// Sets `add_prefix_space` on every ByteLevel pre-tokenizer in `pre_tokenizer` (a Sequence's
/// too); whether any was off.
fn add_prefix_space(pre_tokenizer: &mut serde_json::Value) -> bool {
    if let Some(list) = pre_tokenizer
        .get_mut("pretokenizers")
        .and_then(|l| l.as_array_mut())
    {
        // Every one set, not only the first: no short circuit.
        let mut changed = false;
        for inner in list {
            changed |= add_prefix_space(inner);
        }
        return changed;
    }
    let is_byte_level = pre_tokenizer.get("type").and_then(|t| t.as_str()) == Some("ByteLevel");
    let off = pre_tokenizer.get("add_prefix_space") != Some(&serde_json::Value::Bool(true));
    if is_byte_level && off {
        pre_tokenizer["add_prefix_space"] = serde_json::Value::Bool(true);
        return true;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../model/tests/fixtures/bert/one-layer/tokenizer.json")
    }

    #[test]
    fn words_become_pieces_that_know_their_word() {
        let tokenizer = WordPieces::read(&fixture()).unwrap();
        assert_eq!(tokenizer.vocab_size(), 60);
        assert_eq!(tokenizer.id_bound(), 60);
        let encoded = tokenizer
            .encode_words(&["The", "farmer", "barked", "near", "the", "park"])
            .unwrap();
        assert_eq!(
            encoded.pieces,
            [
                "[CLS]", "the", "farm", "##er", "bark", "##ed", "near", "the", "park", "[SEP]"
            ]
        );
        assert_eq!(
            encoded.words,
            [
                None,
                Some(0),
                Some(1),
                Some(1),
                Some(2),
                Some(2),
                Some(3),
                Some(4),
                Some(5),
                None
            ]
        );
        assert_eq!(encoded.ids[0], tokenizer.id("[CLS]").unwrap());
        assert_eq!(tokenizer.piece(encoded.ids[2]).as_deref(), Some("farm"));
        // Text is split into words by the tokenizer itself: the same pieces.
        let text = tokenizer
            .encode_text("The farmer barked near the park")
            .unwrap();
        assert_eq!(text, encoded);
    }

    #[test]
    fn a_file_that_is_not_a_tokenizer_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokenizer.json");
        std::fs::write(&path, "{\"model\": 3}").unwrap();
        let error = WordPieces::read(&path).unwrap_err().to_string();
        assert!(
            error.starts_with(&path.display().to_string())
                && error.contains("not a Hugging Face tokenizer.json"),
            "{error}"
        );
        let error = WordPieces::read(&dir.path().join("missing.json"))
            .unwrap_err()
            .to_string();
        assert!(error.contains("missing.json: cannot read it"), "{error}");
    }

    /// Each family fixture's tokenizer reads the reference's words, already split, into the
    /// pieces and word ids `transformers` gave (`is_split_into_words`; RoBERTa's byte-level
    /// BPE with a space before every word).
    #[test]
    fn split_words_read_as_transformers_reads_them_in_every_family() {
        let families =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../model/tests/fixtures/families");
        for (name, mask) in [
            ("roberta", "<mask>"),
            ("xlm-roberta", "<mask>"),
            ("distilbert", "[MASK]"),
            ("electra", "[MASK]"),
            ("albert", "[MASK]"),
        ] {
            let dir = families.join(name);
            let tokenizer = WordPieces::read(&dir.join("tokenizer.json")).unwrap();
            assert_eq!(tokenizer.mask_id(), tokenizer.id(mask), "{name}");
            assert!(tokenizer.mask_id().is_some(), "{name}");
            let reference: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(dir.join("words.json")).unwrap())
                    .unwrap();
            for sentence in reference["sentences"].as_array().unwrap() {
                let strings = |key: &str| -> Vec<String> {
                    let list = sentence[key].as_array().unwrap();
                    list.iter()
                        .map(|w| w.as_str().unwrap().to_string())
                        .collect()
                };
                let words = strings("words");
                let refs: Vec<&str> = words.iter().map(String::as_str).collect();
                let encoded = tokenizer.encode_words(&refs).unwrap();
                assert_eq!(encoded.pieces, strings("pieces"), "{name}");
                let word_ids: Vec<Option<usize>> = sentence["word_ids"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|w| w.as_u64().map(|w| w as usize))
                    .collect();
                assert_eq!(encoded.words, word_ids, "{name}");
            }
        }
        // Raw text keeps the file's own reading: RoBERTa's first word has no space before it.
        let kind = |name: &str| {
            WordPieces::read(&families.join(name).join("tokenizer.json"))
                .unwrap()
                .kind()
        };
        assert_eq!(
            ["roberta", "xlm-roberta", "distilbert"].map(kind),
            ["byte-level BPE", "Unigram (SentencePiece)", "WordPiece"]
        );
        let roberta = WordPieces::read(&families.join("roberta/tokenizer.json")).unwrap();
        let text = roberta.encode_text("the farmer").unwrap();
        assert_eq!(text.pieces[1], "the");
        let words = roberta.encode_words(&["the", "farmer"]).unwrap();
        assert_eq!(words.pieces[1], "Ġthe");
    }

    #[test]
    fn a_space_is_added_before_split_words_only_where_a_byte_level_bpe_lacks_it() {
        let mut sequence = serde_json::json!({"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": true},
            {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true},
        ]});
        assert!(add_prefix_space(&mut sequence));
        assert_eq!(sequence["pretokenizers"][1]["add_prefix_space"], true);
        // Already set, or not a byte-level BPE: the file is read as it is.
        assert!(!add_prefix_space(&mut sequence));
        let mut metaspace = serde_json::json!({"type": "Metaspace", "replacement": "▁"});
        assert!(!add_prefix_space(&mut metaspace));
        assert_eq!(words_tokenizer(br#"{"pre_tokenizer": null}"#), None);
    }
}
