//! Sentences a user types ([`TypedInput`]: on the command line, or a text file's lines read by
//! [`read_text_file`]): read from
//! their raw text by the checkpoint's own tokenizer, its words those of its own normalizer
//! and pre-tokenizer ([`hf::tokenizer::WordPieces::read_text`]), as `transformers` reads
//! `tokenizer(text)`: "doesn't" is `doesn ' t` for BERT and `doesn 't` for RoBERTa, an emoji
//! keeps its variation selector, each CJK character is a word for BERT, a byte-order mark is
//! dropped by BERT and read by a byte-level BPE. A word the vocabulary has no piece for is
//! read as the unknown piece, as `transformers` reads it, and the report names it. Typed
//! sentences are words and pieces and have no parse ([`TypedSentences`], its own kind of probe,
//! [`crate::load::sentences::ProbeSentences::Typed`]): nothing scores relations on them, and
//! the report leaves relation scores out and says why.

use std::path::{Path, PathBuf};

use hf::tokenizer::{Encoded, TokenizerError, WordPieces};

use crate::load::probe_choice::TypedInput;

/// Largest text file read: a million bytes is some ten thousand sentences, more than a
/// probe holds.
pub const MAX_TEXT_FILE_BYTES: u64 = 1 << 20;

/// Why typed sentences cannot be read: the sentence or the file at fault, as data (the
/// report's command line names the flag that gave it).
#[derive(Debug, thiserror::Error)]
pub enum TypedTextError {
    /// The tokenizer could not read a sentence.
    #[error(transparent)]
    Tokenizer(#[from] TokenizerError),
    /// A sentence with no word: empty, only spaces, or only what the tokenizer drops.
    #[error("{sentence} has no word")]
    Empty {
        /// The sentence, by the name its caller gave it ([`TypedInput::names`]).
        sentence: String,
    },
    /// A file that cannot be read.
    #[error("cannot read the text file {path}: {error}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        error: String,
    },
    /// A file that is not UTF-8.
    #[error("the text file {path} is not UTF-8 text (line {line}, byte {byte} of the file)")]
    NotUtf8 {
        /// The file.
        path: PathBuf,
        /// The 1-based line of the first bad byte.
        line: usize,
        /// Its 0-based offset in the file.
        byte: usize,
    },
    /// A file with no sentence: every line blank.
    #[error("the text file {0} has no sentence")]
    NoSentence(PathBuf),
}

/// Typed sentences as a tokenizer reads them: their words and pieces, no parse.
#[derive(Debug, Clone)]
pub struct TypedSentences {
    /// The sentences, in the order typed.
    pub sentences: Vec<TypedSentence>,
    /// The words read as the unknown piece, each once, in the order typed.
    pub unknown_words: Vec<String>,
}

/// One typed sentence, read once by the tokenizer.
#[derive(Debug, Clone)]
pub struct TypedSentence {
    /// Its text, as typed.
    pub text: String,
    /// Its words, the tokenizer's own.
    pub words: Vec<String>,
    /// Its pieces, the special tokens included.
    pub encoded: Encoded,
}

/// `input`'s sentences as `tokenizer` reads them ([`TypedSentences`]); a text with no word
/// (empty, only spaces, or only what the tokenizer drops) is refused by its name.
pub fn sentences_of(
    input: &TypedInput,
    tokenizer: &WordPieces,
) -> Result<TypedSentences, TypedTextError> {
    let mut typed = TypedSentences {
        sentences: vec![],
        unknown_words: vec![],
    };
    for (i, text) in input.texts.iter().enumerate() {
        let read = tokenizer.read_text(text)?;
        if read.words.is_empty() {
            let sentence = input.names.get(i).cloned();
            return Err(TypedTextError::Empty {
                sentence: sentence.unwrap_or_else(|| format!("{text:?}")),
            });
        }
        for &w in &read.unknown {
            if !typed.unknown_words.contains(&read.words[w]) {
                typed.unknown_words.push(read.words[w].clone());
            }
        }
        typed.sentences.push(TypedSentence {
            text: text.clone(),
            words: read.words,
            encoded: read.encoded,
        });
    }
    Ok(typed)
}

/// The sentences of a text file: one a line, UTF-8, blank lines skipped, each with its
/// 1-based line number.
pub fn read_text_file(path: &Path) -> Result<Vec<(usize, String)>, TypedTextError> {
    text_lines(path, read_small_file(path)?)
}

/// The bytes of the text file at `path`, at most [`MAX_TEXT_FILE_BYTES`].
pub fn read_small_file(path: &Path) -> Result<Vec<u8>, TypedTextError> {
    run::small_file::read(path, MAX_TEXT_FILE_BYTES).map_err(|error| TypedTextError::Read {
        path: path.to_path_buf(),
        error: error.to_string(),
    })
}

/// The lines of `bytes`, the text file at `path` ([`read_text_file`]).
pub fn text_lines(path: &Path, bytes: Vec<u8>) -> Result<Vec<(usize, String)>, TypedTextError> {
    let text = String::from_utf8(bytes).map_err(|error| {
        let byte = error.utf8_error().valid_up_to();
        let line = 1 + error.as_bytes()[..byte]
            .iter()
            .filter(|&&b| b == b'\n')
            .count();
        TypedTextError::NotUtf8 {
            path: path.to_path_buf(),
            line,
            byte,
        }
    })?;
    let lines: Vec<(usize, String)> = text
        .lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(i, line)| (i + 1, line.trim().to_string()))
        .collect();
    match lines.is_empty() {
        true => Err(TypedTextError::NoSentence(path.to_path_buf())),
        false => Ok(lines),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bert() -> WordPieces {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../model/tests/fixtures/bert/one-layer/tokenizer.json");
        WordPieces::read(&path).unwrap()
    }

    /// Typed `texts`, each named by its place.
    fn typed(texts: &[&str]) -> TypedInput {
        TypedInput {
            texts: texts.iter().map(ToString::to_string).collect(),
            names: (1..=texts.len()).map(|i| format!("sentence {i}")).collect(),
            file: None,
        }
    }

    #[test]
    fn typed_words_are_the_tokenizers_and_an_unknown_word_is_named_once() {
        let typed = sentences_of(
            &typed(&[
                "The dog barked.",
                "The \u{2764}\u{fe0f} \u{2764}\u{fe0f} dog",
            ]),
            &bert(),
        )
        .unwrap();
        assert_eq!(typed.sentences[0].words, ["The", "dog", "barked", "."]);
        assert_eq!(typed.sentences[0].text, "The dog barked.");
        assert_eq!(
            typed.sentences[0].encoded.ids.len(),
            7,
            "[CLS] the dog bark ##ed . [SEP]"
        );
        // BERT's normalizer drops the variation selector with the accents: one word, unknown.
        assert_eq!(
            typed.sentences[1].words,
            ["The", "\u{2764}", "\u{2764}", "dog"]
        );
        assert_eq!(typed.unknown_words, ["\u{2764}"]);
    }

    #[test]
    fn an_empty_sentence_is_refused_by_its_name() {
        for text in ["  ", "\u{feff}\u{200b}"] {
            let error = sentences_of(&typed(&["fine", text]), &bert()).unwrap_err();
            assert!(
                matches!(&error, TypedTextError::Empty { sentence } if sentence == "sentence 2"),
                "{error}"
            );
            assert_eq!(error.to_string(), "sentence 2 has no word");
        }
    }

    #[test]
    fn a_text_file_is_utf8_one_sentence_a_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("text.txt");
        std::fs::write(&path, "The dog barked.\n\n  A cat sat.  \n").unwrap();
        let lines = read_text_file(&path).unwrap();
        assert_eq!(
            lines,
            [(1, "The dog barked.".into()), (3, "A cat sat.".into())]
        );

        std::fs::write(&path, b"fine\nbad \xff byte\n").unwrap();
        let error = read_text_file(&path).unwrap_err();
        assert!(
            matches!(&error, TypedTextError::NotUtf8 { path: p, line: 2, byte: 9 } if *p == path),
            "{error}"
        );
        assert_eq!(
            error.to_string(),
            format!(
                "the text file {} is not UTF-8 text (line 2, byte 9 of the file)",
                path.display()
            )
        );

        std::fs::write(&path, "\n  \n").unwrap();
        assert!(matches!(
            read_text_file(&path).unwrap_err(),
            TypedTextError::NoSentence(p) if p == path
        ));
        let missing = dir.path().join("missing.txt");
        let error = read_text_file(&missing).unwrap_err();
        assert!(
            matches!(&error, TypedTextError::Read { path, .. } if *path == missing),
            "{error}"
        );
        assert!(
            error.to_string().starts_with("cannot read the text file"),
            "{error}"
        );
    }
}
