//! Why a `[task]` section could not become a task, and the range checks every generator
//! runs on its sizes (so each message names the key, the value and what is accepted).

use std::fmt::Display;
use std::path::PathBuf;

/// Why a task config could not be turned into a task.
#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    /// A size or fraction in the `[task]` section is outside its accepted range.
    #[error("task.{field} = {value} is out of range: expected {expected}")]
    OutOfRange {
        /// The offending key inside `[task]`.
        field: &'static str,
        /// The value found, as written.
        value: String,
        /// The accepted range, e.g. "1 <= shift < seq_len (12)".
        expected: String,
    },
    /// The dataset file could not be opened or read as UTF-8 text.
    #[error(
        "cannot read task.path {path}: {error}; expected a JSONL file, one \
         {{\"input\": [..], \"target\": [..]}} object per line (a relative path is resolved \
         against the current directory)"
    )]
    Read {
        /// The dataset file, after resolving it against the config's directory.
        path: PathBuf,
        /// What the operating system reported.
        error: std::io::Error,
    },
    /// The dataset file holds no records (it is empty or only has blank lines).
    #[error(
        "{path} holds no records: expected one JSON object per line, \
         like {{\"input\": [0, 1], \"target\": [1, null]}}"
    )]
    NoRecords {
        /// The dataset file.
        path: PathBuf,
    },
    /// A line is not a JSON object with exactly the fields `input` and `target`.
    #[error(
        "{path} line {line}, column {column}: {message}; expected an object with exactly the \
         fields \"input\" (token ids) and \"target\" (class ids or null)"
    )]
    Parse {
        /// The dataset file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// 1-based column within the line where parsing failed.
        column: usize,
        /// The JSON parser's description of the problem.
        message: String,
    },
    /// A record's input and target differ in length.
    #[error(
        "{path} line {line}: input has {input_len} tokens but target has {target_len}; \
         they must be the same length"
    )]
    LengthMismatch {
        /// The dataset file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// Length of `input`.
        input_len: usize,
        /// Length of `target`.
        target_len: usize,
    },
    /// A record has no tokens at all.
    #[error("{path} line {line}: input is empty; every record needs at least one token")]
    EmptySequence {
        /// The dataset file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
    },
    /// An input token is not below the configured `vocab_size`.
    #[error(
        "{path} line {line}: input token {token} at position {position} is out of range: \
         expected tokens below task.vocab_size ({vocab_size})"
    )]
    TokenOutOfVocab {
        /// The dataset file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// 0-based position of the token within the record.
        position: usize,
        /// The offending token id.
        token: u32,
        /// The configured vocabulary size.
        vocab_size: usize,
    },
    /// An input token or target class id beyond what headlab accepts.
    #[error(
        "{path} line {line}: {what} {id} at position {position} is out of range: expected ids \
         below {max}, which sizes the model's tables",
        max = MAX_SIZE
    )]
    IdTooLarge {
        /// The dataset file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// "input token" or "target class".
        what: &'static str,
        /// 0-based position within the record.
        position: usize,
        /// The offending id.
        id: u32,
    },
    /// A text task's corpus could not be read.
    #[error(
        "cannot read task.corpus {path}: {error}; expected JSON Lines (plain or gzip), one \
         {{\"text\": \"...\"}} document a line (a relative path is resolved against the \
         current directory)"
    )]
    CorpusRead {
        /// The corpus file.
        path: PathBuf,
        /// What went wrong.
        error: std::io::Error,
    },
    /// A text task's corpus is not UTF-8.
    #[error(
        "{path} is not UTF-8 text (line {line}, byte {byte} of the line): save the corpus as \
         UTF-8"
    )]
    CorpusNotUtf8 {
        /// The corpus file.
        path: PathBuf,
        /// 1-based line of the first invalid byte.
        line: usize,
        /// 1-based byte within that line.
        byte: usize,
    },
    /// A line of a text task's corpus is not a document.
    #[error("{corpus} line {line}: {reason}")]
    CorpusLine {
        /// The corpus, as named in messages.
        corpus: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// A corpus too small to split by document.
    #[error(
        "{corpus} holds {count} documents: at least {needed} are needed, as every {needed}th \
         is held out for evaluation"
    )]
    TooFewDocuments {
        /// The corpus, as named in messages.
        corpus: String,
        /// Documents found.
        count: usize,
        /// Documents needed.
        needed: usize,
    },
    /// A corpus whose training or held-out part holds no whole sequence.
    #[error(
        "{corpus} is too short for task.seq_len = {seq_len}: its training and held-out \
         documents must each hold at least one sequence of seq_len - 2 pieces"
    )]
    CorpusTooShort {
        /// The corpus, as named in messages.
        corpus: String,
        /// The configured sequence length.
        seq_len: usize,
    },
    /// The tokenizer could not be trained or could not encode the corpus.
    #[error("the text task's tokenizer failed: {reason}")]
    TokenizerTraining {
        /// What `tokenizers` reported.
        reason: String,
    },
    /// A `task.tokenizer` that cannot be used.
    #[error("cannot use task.tokenizer {path}: {reason}")]
    TokenizerRead {
        /// The tokenizer file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The file has a single record, leaving nothing to split into train and eval.
    #[error(
        "{path} holds only {count} record; at least 2 are needed so one can be held out \
         for evaluation"
    )]
    TooFewRecords {
        /// The dataset file.
        path: PathBuf,
        /// Number of records found.
        count: usize,
    },
}

/// Largest accepted length or vocabulary size. Far beyond any toy task, it catches typos before
/// they turn into huge allocations, and keeps every id exact in u32 and in f32.
pub(crate) const MAX_SIZE: usize = 1 << 24;

pub(crate) fn out_of_range(
    field: &'static str,
    value: impl Display,
    expected: String,
) -> TaskError {
    TaskError::OutOfRange {
        field,
        value: value.to_string(),
        expected,
    }
}

/// Checks `min <= value <= MAX_SIZE` for the `[task]` key `field`.
pub(crate) fn check_size(field: &'static str, value: usize, min: usize) -> Result<(), TaskError> {
    if (min..=MAX_SIZE).contains(&value) {
        Ok(())
    } else {
        Err(out_of_range(
            field,
            value,
            format!("{min} <= {field} <= {MAX_SIZE}"),
        ))
    }
}

/// Converts a size already bounded by [`MAX_SIZE`] to a token id.
pub(crate) fn to_id(size: usize) -> u32 {
    u32::try_from(size).expect("sizes are validated against MAX_SIZE")
}
