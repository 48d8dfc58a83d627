//! Sentences a user types (`inspect --text "SENTENCE"`, `--text-file FILE`): split into
//! words as a reader would, at whitespace and around each punctuation mark, as BERT's own
//! pre-tokenizer splits them ("doesn't" is `doesn ' t`), so that a word is what the
//! checkpoint's tokenizer reads as one. They have no parse: the report leaves relation scores
//! out and says why.

use std::path::{Path, PathBuf};

use tasks::conllu::TreebankSentence;

/// Largest `--text-file` read: a million bytes is some ten thousand sentences, more than a
/// probe holds.
pub const MAX_TEXT_FILE_BYTES: u64 = 1 << 20;

/// Why typed sentences cannot be read.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum TypedTextError {
    /// `--text ""`, or only spaces.
    #[error("--text {0:?} has no word: type a sentence, e.g. --text \"The dog sees the cat.\"")]
    Empty(String),
    /// A file that cannot be read.
    #[error("cannot read --text-file {path}: {error}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        error: String,
    },
    /// A file that is not UTF-8.
    #[error(
        "--text-file {path} is not UTF-8 text (line {line}, byte {byte} of the file): save it \
         as UTF-8, one sentence a line"
    )]
    NotUtf8 {
        /// The file.
        path: PathBuf,
        /// The 1-based line of the first bad byte.
        line: usize,
        /// Its 0-based offset in the file.
        byte: usize,
    },
    /// A file with no sentence.
    #[error("--text-file {0} has no sentence: give one sentence a line")]
    NoSentence(PathBuf),
}

/// `text`'s words: split at whitespace, and every character that is neither a letter, a digit
/// nor whitespace (punctuation, symbols) a word of its own.
pub fn words_of(text: &str) -> Vec<String> {
    let mut words = vec![];
    let mut word = String::new();
    for c in text.chars() {
        if c.is_alphanumeric() {
            word.push(c);
            continue;
        }
        if !word.is_empty() {
            words.push(std::mem::take(&mut word));
        }
        if !c.is_whitespace() {
            words.push(c.to_string());
        }
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

/// Typed `texts` as sentences without a parse (every word's HEAD 0, DEPREL `_`, so no arc is
/// scored), each `text` kept as it was typed.
pub fn sentences_of(texts: &[String]) -> Result<Vec<TreebankSentence>, TypedTextError> {
    texts
        .iter()
        .map(|text| {
            let words = words_of(text);
            if words.is_empty() {
                return Err(TypedTextError::Empty(text.clone()));
            }
            Ok(TreebankSentence {
                sent_id: None,
                text: Some(text.clone()),
                heads: vec![0; words.len()],
                relations: vec!["_".to_string(); words.len()],
                words,
            })
        })
        .collect()
}

/// The sentences of a `--text-file`: one a line, UTF-8, blank lines skipped, each with its
/// 1-based line number.
pub fn read_text_file(path: &Path) -> Result<Vec<(usize, String)>, TypedTextError> {
    let bytes =
        run::small_file::read(path, MAX_TEXT_FILE_BYTES).map_err(|error| TypedTextError::Read {
            path: path.to_path_buf(),
            error: error.to_string(),
        })?;
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

    #[test]
    fn words_split_at_spaces_and_around_punctuation_as_bert_reads_them() {
        assert_eq!(
            words_of("  Why doesn't every head learn the same thing?"),
            [
                "Why", "doesn", "'", "t", "every", "head", "learn", "the", "same", "thing", "?"
            ]
        );
        assert_eq!(
            words_of("e-mail, 3.5 km"),
            ["e", "-", "mail", ",", "3", ".", "5", "km"]
        );
        assert_eq!(words_of("Ünïcode wörds"), ["Ünïcode", "wörds"]);
        assert!(words_of(" \t ").is_empty());
    }

    #[test]
    fn an_empty_sentence_is_refused_by_what_was_typed() {
        let error = sentences_of(&["fine".into(), "  ".into()]).unwrap_err();
        assert_eq!(error, TypedTextError::Empty("  ".into()));
        assert!(error.to_string().starts_with("--text \"  \" has no word"));
        let sentences = sentences_of(&["The dog barked.".into()]).unwrap();
        assert_eq!(sentences[0].words, ["The", "dog", "barked", "."]);
        assert_eq!(sentences[0].heads, [0, 0, 0, 0]);
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
        assert_eq!(
            error,
            TypedTextError::NotUtf8 {
                path: path.clone(),
                line: 2,
                byte: 9
            }
        );
        assert!(
            error
                .to_string()
                .contains("is not UTF-8 text (line 2, byte 9")
        );

        std::fs::write(&path, "\n  \n").unwrap();
        assert_eq!(
            read_text_file(&path).unwrap_err(),
            TypedTextError::NoSentence(path.clone())
        );
        let missing = dir.path().join("missing.txt");
        let error = read_text_file(&missing).unwrap_err().to_string();
        assert!(error.starts_with("cannot read --text-file"), "{error}");
    }
}
