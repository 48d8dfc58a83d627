//! Toy sequence tasks: seeded generators, a JSONL-file dataset, the `[task]` config section that
//! selects one, and the attention patterns known to solve each task.

mod copy;
mod dependency;
mod file;
mod grammar;
mod histogram;
mod neighbors;
mod pairs;
mod pattern;
mod recall;
mod reverse;
mod sequence;
mod shift;
mod sort;

use std::fmt::Display;
use std::path::{Path, PathBuf};

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

pub use self::dependency::{Arc, ParsedSentence, Relation};
pub use self::file::FileSpec;
pub use self::grammar::GrammarSpec;
pub use self::grammar::ceiling::{ClassCeiling, Inflection, WordClass};
pub use self::grammar::lexicon::{Lexicon, NounClass};
pub use self::neighbors::{Combine, NeighborsSpec};
pub use self::pairs::{MinimalPair, PairKind};
pub use self::pattern::AttentionPattern;
pub use self::recall::RecallSpec;
pub use self::sequence::SequenceSpec;
pub use self::shift::ShiftSpec;

use self::sequence::SequenceTask;

/// One training or evaluation example: input tokens and one target per position.
/// `None` targets are ignored by the loss and by accuracy (e.g. non-query positions in recall).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Example {
    /// Input token ids, each below the task's input vocabulary.
    pub input: Vec<u32>,
    /// One class id per input position, or `None` where the position is not scored.
    pub target: Vec<Option<u32>>,
}

/// The `[task]` section of a config file, tagged by `kind`:
/// copy | reverse | shift | neighbors | sort | histogram | recall | grammar | file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TaskConfig {
    /// Reproduce the input at every position.
    Copy(SequenceSpec),
    /// Output the input reversed.
    Reverse(SequenceSpec),
    /// Output the input delayed by `shift` positions.
    Shift(ShiftSpec),
    /// Output the sum (or difference) of the two neighbouring tokens modulo the vocabulary size.
    Neighbors(NeighborsSpec),
    /// Output the input sorted ascending.
    Sort(SequenceSpec),
    /// Output, at each position, how often its token occurs in the sequence.
    Histogram(SequenceSpec),
    /// Associative recall: look up the value paired with each queried key.
    Recall(RecallSpec),
    /// Masked-word prediction on sentences of a small English grammar, each with its
    /// dependency parse.
    Grammar(GrammarSpec),
    /// Examples read from a JSONL file.
    File(FileSpec),
}

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

impl TaskConfig {
    /// Validates sizes and builds the task. `base_dir` resolves relative dataset paths.
    pub fn build(&self, base_dir: &Path) -> Result<Task, TaskError> {
        let kind = match self {
            Self::Copy(spec) => TaskKind::Copy(SequenceTask::new(spec, copy::CopyRule)?),
            Self::Reverse(spec) => {
                TaskKind::Reverse(SequenceTask::new(spec, reverse::ReverseRule)?)
            }
            Self::Shift(spec) => TaskKind::Shift(spec.task()?),
            Self::Neighbors(spec) => TaskKind::Neighbors(spec.task()?),
            Self::Sort(spec) => TaskKind::Sort(SequenceTask::new(spec, sort::SortRule)?),
            Self::Histogram(spec) => {
                TaskKind::Histogram(SequenceTask::new(spec, histogram::HistogramRule)?)
            }
            Self::Recall(spec) => TaskKind::Recall(recall::RecallTask::new(spec)?),
            Self::Grammar(spec) => TaskKind::Grammar(Box::new(grammar::GrammarTask::new(spec)?)),
            Self::File(spec) => TaskKind::File(file::FileTask::load(spec, base_dir)?),
        };
        Ok(Task { kind })
    }

    /// Every `kind`, as spelled in config files.
    pub const KINDS: [&'static str; 9] = [
        "copy",
        "reverse",
        "shift",
        "neighbors",
        "sort",
        "histogram",
        "recall",
        "grammar",
        "file",
    ];

    /// The key inside `[task]` that makes `table` (the section as parsed) fail to
    /// deserialize, e.g. `seq_len` for `seq_len = "six"`. `None` when the section is fine or
    /// the problem is `kind` itself.
    ///
    /// Why: `[task]` is tagged by `kind`, and serde buffers such sections before it knows the
    /// variant, so toml can only point at the `[task]` header, not at the key at fault.
    /// Deserializing the variant's own spec type directly gets the key back.
    pub fn key_at_fault(table: &toml::Table) -> Option<String> {
        let kind = table.get("kind")?.as_str()?;
        let mut rest = table.clone();
        rest.remove("kind");
        let value = toml::Value::Table(rest);
        let error = match kind {
            "copy" | "reverse" | "sort" | "histogram" => SequenceSpec::deserialize(value).err(),
            "shift" => ShiftSpec::deserialize(value).err(),
            "neighbors" => NeighborsSpec::deserialize(value).err(),
            "recall" => RecallSpec::deserialize(value).err(),
            "grammar" => GrammarSpec::deserialize(value).err(),
            "file" => FileSpec::deserialize(value).err(),
            _ => None,
        }?;
        let message = error.to_string();
        // toml names the path as "in `key`"; an unknown field is named in the message itself.
        let quoted = |marker: &str| {
            let start = message.find(marker)? + marker.len();
            let end = message[start..].find('`')?;
            Some(message[start..start + end].to_string())
        };
        quoted("in `").or_else(|| quoted("unknown field `"))
    }

    /// Short name: "copy", "reverse", ...
    pub fn kind_name(&self) -> &'static str {
        match self {
            Self::Copy(_) => "copy",
            Self::Reverse(_) => "reverse",
            Self::Shift(_) => "shift",
            Self::Neighbors(_) => "neighbors",
            Self::Sort(_) => "sort",
            Self::Histogram(_) => "histogram",
            Self::Recall(_) => "recall",
            Self::Grammar(_) => "grammar",
            Self::File(_) => "file",
        }
    }
}

/// A ready task: a seeded generator or a loaded dataset.
#[derive(Debug, Clone)]
pub struct Task {
    kind: TaskKind,
}

impl Task {
    /// The `file` task from a dataset already read: `text` is the JSONL content of `path`
    /// (named in messages; `spec.path` is not read). What [`TaskConfig::build`] does for
    /// `kind = "file"` once it has the file's text.
    pub fn from_jsonl(spec: &FileSpec, path: &Path, text: &str) -> Result<Task, TaskError> {
        let task = file::FileTask::from_text(spec, path, text)?;
        Ok(Task {
            kind: TaskKind::File(task),
        })
    }
}

#[derive(Debug, Clone)]
enum TaskKind {
    Copy(SequenceTask<copy::CopyRule>),
    Reverse(SequenceTask<reverse::ReverseRule>),
    Shift(SequenceTask<shift::ShiftRule>),
    Neighbors(SequenceTask<neighbors::NeighborsRule>),
    Sort(SequenceTask<sort::SortRule>),
    Histogram(SequenceTask<histogram::HistogramRule>),
    Recall(recall::RecallTask),
    // Boxed: its vocabulary tables would make every variant as large.
    Grammar(Box<grammar::GrammarTask>),
    File(file::FileTask),
}

impl Task {
    fn inner(&self) -> &dyn TaskImpl {
        match &self.kind {
            TaskKind::Copy(task) => task,
            TaskKind::Reverse(task) => task,
            TaskKind::Shift(task) => task,
            TaskKind::Neighbors(task) => task,
            TaskKind::Sort(task) => task,
            TaskKind::Histogram(task) => task,
            TaskKind::Recall(task) => task,
            TaskKind::Grammar(task) => task.as_ref(),
            TaskKind::File(task) => task,
        }
    }

    /// Short name, the same as [`TaskConfig::kind_name`] of the config it was built from.
    pub fn name(&self) -> &'static str {
        match &self.kind {
            TaskKind::Copy(_) => "copy",
            TaskKind::Reverse(_) => "reverse",
            TaskKind::Shift(_) => "shift",
            TaskKind::Neighbors(_) => "neighbors",
            TaskKind::Sort(_) => "sort",
            TaskKind::Histogram(_) => "histogram",
            TaskKind::Recall(_) => "recall",
            TaskKind::Grammar(_) => "grammar",
            TaskKind::File(_) => "file",
        }
    }

    /// Number of distinct input tokens (ids are 0..input_vocab).
    pub fn input_vocab(&self) -> usize {
        self.inner().input_vocab()
    }

    /// Number of output classes (target ids are 0..output_vocab).
    pub fn output_vocab(&self) -> usize {
        self.inner().output_vocab()
    }

    /// The longest an example can be: the length of every example for the fixed-length
    /// generators; `max_words` for `grammar`, whose sentences vary; the longest record for
    /// `file`. Batches pad shorter examples to their longest.
    pub fn seq_len(&self) -> usize {
        self.inner().seq_len()
    }

    /// Draws one training example. Generators draw from `rng`; the file task draws a record of
    /// its train split uniformly.
    pub fn sample(&self, rng: &mut ChaCha8Rng) -> Example {
        self.inner().sample(rng)
    }

    /// A fixed evaluation set: generators draw `size` examples from a ChaCha8Rng seeded with
    /// `seed`; the file task returns its eval split (ignoring size and seed).
    pub fn eval_set(&self, size: usize, seed: u64) -> Vec<Example> {
        self.inner().eval_set(size, seed)
    }

    /// Attention patterns known to solve (part of) the task, for the inspector to score heads
    /// against. May be empty (sort, grammar, file).
    pub fn solving_patterns(&self) -> Vec<AttentionPattern> {
        self.inner().solving_patterns()
    }

    /// For each position of `input`, the exact key positions a head must read to solve it
    /// there, ascending; empty where none does (recall's pairs, every position of the file and
    /// grammar tasks: grammar is scored against [`Task::parsed_sentences`] instead).
    /// copy: `i`; reverse: `n-1-i`; shift: `i-shift`; neighbors: `i-1` and `i+1`;
    /// histogram: every position holding `input[i]` (itself included, as the count does);
    /// sort: every position holding the token that belongs at `i`; recall: a query's value.
    /// Only reads `input`, so it never changes what the generators draw.
    pub fn attention_targets(&self, input: &[u32]) -> Vec<Vec<usize>> {
        self.inner().attention_targets(input)
    }

    /// A name per input token id (`0..input_vocab`) for tasks whose tokens are words
    /// (`grammar`); `None` for tasks of numbers, whose ids are their names.
    pub fn token_names(&self) -> Option<Vec<String>> {
        self.inner().token_names()
    }

    /// `size` minimal pairs ([`MinimalPair`]) of `kind` drawn from a ChaCha8Rng seeded with
    /// `seed`. Answer pairs: for the sequence tasks one token at a position the answer reads
    /// (its [`Task::attention_targets`]) changed to another, for recall a queried key's value
    /// changed. Route pairs: recall's queried key swapped with another. Empty for tasks
    /// without pairs of that kind (`grammar` and `file` have none). Fewer than `size` only if
    /// a generator found none in [`pairs::MAX_TRIES`] draws.
    pub fn minimal_pairs(&self, kind: PairKind, size: usize, seed: u64) -> Vec<MinimalPair> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        (0..size)
            .map_while(|_| self.inner().minimal_pair(kind, &mut rng))
            .collect()
    }

    /// `size` sentences with their dependency parses, drawn from a ChaCha8Rng seeded with
    /// `seed`; empty for tasks without syntax (every task but `grammar`). For `grammar`,
    /// sentence i is example i of `eval_set(size, seed)` before masking.
    pub fn parsed_sentences(&self, size: usize, seed: u64) -> Vec<ParsedSentence> {
        self.inner().parsed_sentences(size, seed)
    }

    /// For word tasks (`grammar`): the accuracy of the Bayes-optimal predictor (which knows
    /// the grammar) per class of masked word, on the examples of `eval_set(size, seed)`, the
    /// ceiling a model's accuracy is read against ([`ClassCeiling`]); empty for other tasks.
    pub fn ceiling(&self, size: usize, seed: u64) -> Vec<ClassCeiling> {
        self.inner().ceiling(size, seed)
    }

    /// The word class of token `id` for word tasks; `None` for other tasks and for
    /// `<pad>` and `<mask>`.
    pub fn word_class(&self, id: u32) -> Option<WordClass> {
        self.inner().word_class(id)
    }

    /// For word tasks: a noun's or verb's number and its form in the other number
    /// ([`Inflection`]); `None` for other tokens and other tasks.
    pub fn inflection(&self, id: u32) -> Option<Inflection> {
        self.inner().inflection(id)
    }

    /// The id of the mask token of word tasks (what a masked word reads as).
    pub const MASK_TOKEN: u32 = 1;
}

/// What every task variant provides; [`Task`] dispatches to it.
trait TaskImpl {
    fn input_vocab(&self) -> usize;
    fn output_vocab(&self) -> usize;
    fn seq_len(&self) -> usize;
    fn sample(&self, rng: &mut ChaCha8Rng) -> Example;
    fn solving_patterns(&self) -> Vec<AttentionPattern>;
    fn attention_targets(&self, input: &[u32]) -> Vec<Vec<usize>>;

    fn token_names(&self) -> Option<Vec<String>> {
        None
    }

    fn parsed_sentences(&self, _size: usize, _seed: u64) -> Vec<ParsedSentence> {
        Vec::new()
    }

    fn ceiling(&self, _size: usize, _seed: u64) -> Vec<ClassCeiling> {
        Vec::new()
    }

    fn word_class(&self, _id: u32) -> Option<WordClass> {
        None
    }

    fn inflection(&self, _id: u32) -> Option<Inflection> {
        None
    }

    fn minimal_pair(&self, _kind: PairKind, _rng: &mut ChaCha8Rng) -> Option<MinimalPair> {
        None
    }

    fn eval_set(&self, size: usize, seed: u64) -> Vec<Example> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        (0..size).map(|_| self.sample(&mut rng)).collect()
    }
}

/// Largest accepted length or vocabulary size. Far beyond any toy task, it catches typos before
/// they turn into huge allocations, and keeps every id exact in u32 and in f32.
const MAX_SIZE: usize = 1 << 24;

fn out_of_range(field: &'static str, value: impl Display, expected: String) -> TaskError {
    TaskError::OutOfRange {
        field,
        value: value.to_string(),
        expected,
    }
}

/// Checks `min <= value <= MAX_SIZE` for the `[task]` key `field`.
fn check_size(field: &'static str, value: usize, min: usize) -> Result<(), TaskError> {
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
fn to_id(size: usize) -> u32 {
    u32::try_from(size).expect("sizes are validated against MAX_SIZE")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize, Serialize)]
    struct Config {
        task: TaskConfig,
    }

    fn parse(toml_text: &str) -> Result<TaskConfig, toml::de::Error> {
        toml::from_str::<Config>(toml_text).map(|config| config.task)
    }

    fn every_generator() -> Vec<TaskConfig> {
        let spec = SequenceSpec::default();
        vec![
            TaskConfig::Copy(spec.clone()),
            TaskConfig::Reverse(spec.clone()),
            TaskConfig::Shift(ShiftSpec::default()),
            TaskConfig::Neighbors(NeighborsSpec::default()),
            TaskConfig::Sort(spec.clone()),
            TaskConfig::Histogram(spec),
            TaskConfig::Recall(RecallSpec::default()),
            TaskConfig::Grammar(GrammarSpec::default()),
        ]
    }

    #[test]
    fn parses_every_kind_with_defaults() {
        for config in every_generator() {
            let text = format!("[task]\nkind = \"{}\"\n", config.kind_name());
            assert_eq!(parse(&text).unwrap(), config);
        }
        let file = parse("[task]\nkind = \"file\"\npath = \"data/x.jsonl\"\n").unwrap();
        assert_eq!(
            file,
            TaskConfig::File(FileSpec {
                path: "data/x.jsonl".into(),
                eval_fraction: 0.1,
                vocab_size: None
            })
        );
    }

    #[test]
    fn parses_explicit_values() {
        let text = "[task]\nkind = \"shift\"\nseq_len = 6\nvocab_size = 4\nshift = 2\n";
        assert_eq!(
            parse(text).unwrap(),
            TaskConfig::Shift(ShiftSpec {
                seq_len: 6,
                vocab_size: 4,
                shift: 2
            })
        );
        let text = "[task]\nkind = \"file\"\npath = \"a.jsonl\"\neval_fraction = 0.25\n\
                    vocab_size = 9\n";
        assert_eq!(
            parse(text).unwrap(),
            TaskConfig::File(FileSpec {
                path: "a.jsonl".into(),
                eval_fraction: 0.25,
                vocab_size: Some(9)
            })
        );
    }

    #[test]
    fn unknown_keys_are_rejected_in_every_variant() {
        // `file` has a required `path`, so it is checked on its own.
        for kind in TaskConfig::KINDS.iter().filter(|k| **k != "file") {
            let text = format!("[task]\nkind = \"{kind}\"\nseq_length = 5\n");
            let error = parse(&text).unwrap_err().to_string();
            assert!(
                error.contains("unknown field `seq_length`"),
                "{kind}: {error}"
            );
        }
        let text = "[task]\nkind = \"file\"\npath = \"a.jsonl\"\nvocab = 3\n";
        let error = parse(text).unwrap_err().to_string();
        assert!(error.contains("unknown field `vocab`"), "{error}");
    }

    #[test]
    fn unknown_or_missing_kind_is_rejected() {
        let error = parse("[task]\nkind = \"copyy\"\n").unwrap_err().to_string();
        assert!(error.contains("unknown variant `copyy`"), "{error}");
        let error = parse("[task]\nseq_len = 4\n").unwrap_err().to_string();
        assert!(error.contains("missing field `kind`"), "{error}");
        let error = parse("[task]\nkind = \"file\"\n").unwrap_err().to_string();
        assert!(error.contains("missing field `path`"), "{error}");
    }

    #[test]
    fn serializes_back_to_the_same_config() {
        let mut configs = every_generator();
        configs.push(TaskConfig::File(FileSpec {
            path: "data/sample.jsonl".into(),
            eval_fraction: 0.2,
            vocab_size: None,
        }));
        for config in configs {
            let text = toml::to_string(&Config {
                task: config.clone(),
            })
            .unwrap();
            assert_eq!(parse(&text).unwrap(), config, "{text}");
        }
    }

    #[test]
    fn sequence_spec_validation_names_the_field() {
        let build = |seq_len, vocab_size| {
            TaskConfig::Copy(SequenceSpec {
                seq_len,
                vocab_size,
            })
            .build(Path::new("."))
            .unwrap_err()
            .to_string()
        };
        assert_eq!(
            build(0, 10),
            "task.seq_len = 0 is out of range: expected 1 <= seq_len <= 16777216"
        );
        assert_eq!(
            build(12, 1),
            "task.vocab_size = 1 is out of range: expected 2 <= vocab_size <= 16777216"
        );
        assert!(build(12, 0).starts_with("task.vocab_size = 0 is out of range"));
        assert!(build(0, 0).starts_with("task.seq_len = 0 is out of range"));
        assert!(build(MAX_SIZE + 1, 10).starts_with("task.seq_len = 16777217 is out of range"));
    }

    #[test]
    fn generated_examples_fit_the_declared_shapes() {
        for config in every_generator() {
            let task = config.build(Path::new(".")).unwrap();
            assert_eq!(task.name(), config.kind_name());
            let mut rng = ChaCha8Rng::seed_from_u64(7);
            for _ in 0..50 {
                let example = task.sample(&mut rng);
                let len = example.input.len();
                assert!((1..=task.seq_len()).contains(&len), "{}", task.name());
                assert_eq!(example.target.len(), len, "{}", task.name());
                if task.name() != "grammar" {
                    assert_eq!(len, task.seq_len(), "{} has a fixed length", task.name());
                }
                assert!(
                    example
                        .input
                        .iter()
                        .all(|&t| (t as usize) < task.input_vocab())
                );
                assert!(
                    example
                        .target
                        .iter()
                        .flatten()
                        .all(|&t| (t as usize) < task.output_vocab())
                );
                for pattern in task.solving_patterns() {
                    for query in 0..len {
                        let keys = pattern.targets(&example.input, query);
                        assert!(keys.iter().all(|&key| key < len));
                    }
                }
            }
        }
    }

    /// Runs, resumes and the README's numbers rest on this: the same seed draws the same
    /// examples, for every kind. The file task's eval set is its held-out split, whatever the
    /// seed, so only the generators' eval sets must change with it.
    #[test]
    fn examples_are_deterministic_per_seed() {
        let dir = tempfile::tempdir().unwrap();
        let records: Vec<String> = (0..10)
            .map(|i| format!("{{\"input\": [{i}, 1], \"target\": [{}, null]}}", i % 3))
            .collect();
        std::fs::write(dir.path().join("data.jsonl"), records.join("\n")).unwrap();
        let file = TaskConfig::File(FileSpec {
            path: "data.jsonl".into(),
            eval_fraction: 0.2,
            vocab_size: None,
        });
        for config in every_generator().into_iter().chain([file]) {
            let task = config.build(dir.path()).unwrap();
            let name = task.name();
            let samples = |seed| {
                let mut rng = ChaCha8Rng::seed_from_u64(seed);
                (0..20).map(|_| task.sample(&mut rng)).collect::<Vec<_>>()
            };
            assert_eq!(samples(5), samples(5), "{name}");
            assert_ne!(samples(5), samples(6), "{name}");
            let eval = task.eval_set(20, 3);
            assert_eq!(eval, task.eval_set(20, 3), "{name}");
            if name != "file" {
                assert_eq!(eval.len(), 20, "{name}");
                assert_ne!(eval, task.eval_set(20, 4), "{name}");
            }
        }
    }

    fn targets_of(config: TaskConfig, input: &[u32]) -> Vec<Vec<usize>> {
        let task = config.build(Path::new(".")).unwrap();
        task.attention_targets(input)
    }

    fn sequence(seq_len: usize) -> SequenceSpec {
        SequenceSpec {
            seq_len,
            vocab_size: 10,
        }
    }

    #[test]
    fn copy_targets_are_the_query_itself() {
        let targets = targets_of(TaskConfig::Copy(sequence(3)), &[7, 7, 2]);
        assert_eq!(targets, [vec![0], vec![1], vec![2]]);
    }

    #[test]
    fn reverse_targets_are_mirrored() {
        let targets = targets_of(TaskConfig::Reverse(sequence(4)), &[1, 2, 3, 4]);
        assert_eq!(targets, [vec![3], vec![2], vec![1], vec![0]]);
    }

    #[test]
    fn shift_targets_lag_by_shift_and_the_blanks_have_none() {
        let spec = ShiftSpec {
            seq_len: 5,
            vocab_size: 10,
            shift: 2,
        };
        let targets = targets_of(TaskConfig::Shift(spec), &[4, 3, 2, 1, 0]);
        assert_eq!(targets, [vec![], vec![], vec![0], vec![1], vec![2]]);
    }

    #[test]
    fn neighbors_targets_are_both_sides() {
        for combine in [Combine::Sum, Combine::Difference] {
            let spec = NeighborsSpec {
                seq_len: 4,
                vocab_size: 10,
                combine,
            };
            let targets = targets_of(TaskConfig::Neighbors(spec), &[5, 5, 5, 5]);
            assert_eq!(targets, [vec![1], vec![0, 2], vec![1, 3], vec![2]]);
        }
    }

    #[test]
    fn histogram_targets_are_every_same_token_position() {
        let targets = targets_of(TaskConfig::Histogram(sequence(5)), &[1, 2, 1, 3, 1]);
        let ones = vec![0, 2, 4];
        assert_eq!(
            targets,
            [ones.clone(), vec![1], ones.clone(), vec![3], ones]
        );
    }

    #[test]
    fn sort_targets_hold_the_token_that_belongs_there() {
        // Sorted: 1 1 3 4; the 1s are at 1 and 3, the 3 at 2, the 4 at 0.
        let targets = targets_of(TaskConfig::Sort(sequence(4)), &[4, 1, 3, 1]);
        assert_eq!(targets, [vec![1, 3], vec![1, 3], vec![2], vec![0]]);
    }

    #[test]
    fn recall_targets_are_the_queried_values() {
        let spec = RecallSpec {
            n_pairs: 3,
            n_queries: 3,
            n_keys: 4,
            n_values: 8,
        };
        // Pairs (0 -> 4), (3 -> 5), (1 -> 6); queries 3, 1, 3.
        let targets = targets_of(TaskConfig::Recall(spec), &[0, 4, 3, 5, 1, 6, 3, 1, 3]);
        let pairs: Vec<Vec<usize>> = vec![Vec::new(); 6];
        assert_eq!(targets[..6], pairs);
        assert_eq!(targets[6..], [vec![3], vec![5], vec![3]]);
    }

    #[test]
    fn file_task_has_no_targets() {
        let dir = tempfile::tempdir().unwrap();
        let records = "{\"input\": [0, 1], \"target\": [1, null]}\n\
                       {\"input\": [1, 1], \"target\": [0, 1]}\n";
        std::fs::write(dir.path().join("data.jsonl"), records).unwrap();
        let file = TaskConfig::File(FileSpec {
            path: "data.jsonl".into(),
            eval_fraction: 0.5,
            vocab_size: None,
        });
        let task = file.build(dir.path()).unwrap();
        assert_eq!(
            task.attention_targets(&[0, 1]),
            [vec![], vec![]] as [Vec<usize>; 2]
        );
    }

    /// Reading a target's tokens gives the answer: a sanity check of every generator's
    /// targets against its own examples.
    #[test]
    fn attention_targets_fit_generated_examples() {
        for config in every_generator() {
            let task = config.build(Path::new(".")).unwrap();
            for example in task.eval_set(30, 2) {
                let targets = task.attention_targets(&example.input);
                let len = example.input.len();
                assert_eq!(targets.len(), len, "{}", task.name());
                for keys in &targets {
                    assert!(keys.windows(2).all(|w| w[0] < w[1]), "{}", task.name());
                    assert!(keys.iter().all(|&k| k < len), "{}", task.name());
                }
                if task.name() == "recall" {
                    for (keys, target) in targets.iter().zip(&example.target) {
                        assert_eq!(keys.is_empty(), target.is_none());
                    }
                }
            }
        }
    }

    /// Every answer pair differs in one token, at a position the answer reads, and the
    /// answer there moves; the corrupted example is one the task could have drawn (copy,
    /// reverse, shift: the answer is the token read; recall: the changed value). Grammar's
    /// agreement pairs are checked against the parse in its own tests.
    #[test]
    fn answer_pairs_change_one_token_the_answer_reads() {
        for config in every_generator() {
            let task = config.build(Path::new(".")).unwrap();
            let name = task.name();
            let pairs = task.minimal_pairs(PairKind::Answer, 40, 11);
            assert_eq!(pairs.len(), 40, "{name}");
            assert_eq!(
                pairs,
                task.minimal_pairs(PairKind::Answer, 40, 11),
                "{name}: seeded"
            );
            for pair in &pairs {
                let (clean, corrupted) = (&pair.clean.input, &pair.corrupted.input);
                let differ: Vec<usize> = (0..clean.len())
                    .filter(|&j| clean[j] != corrupted[j])
                    .collect();
                assert_eq!(differ, pair.changed, "{name}: {pair:?}");
                assert_eq!(differ.len(), 1, "{name}: {pair:?}");
                let changed = differ[0];
                if name != "grammar" {
                    assert!(
                        task.attention_targets(clean)[pair.position].contains(&changed),
                        "{name}: the answer reads the changed token: {pair:?}"
                    );
                }
                assert_ne!(pair.clean_answer, pair.corrupted_answer, "{name}");
                assert_eq!(pair.clean.target[pair.position], Some(pair.clean_answer));
                assert_eq!(
                    pair.corrupted.target[pair.position],
                    Some(pair.corrupted_answer)
                );
                match name {
                    "copy" | "reverse" | "shift" => {
                        assert_eq!(pair.corrupted_answer, corrupted[changed], "{name}")
                    }
                    "recall" => {
                        let values_from = task.input_vocab() - task.output_vocab();
                        assert_eq!(
                            pair.corrupted_answer as usize,
                            corrupted[changed] as usize - values_from
                        );
                    }
                    _ => {}
                }
            }
        }
    }

    /// Route pairs exist for recall only: two keys swapped, every value and query in place,
    /// and each query's target in the corrupted example the value its key now pairs with.
    #[test]
    fn route_pairs_swap_two_keys_of_recall() {
        for config in every_generator() {
            let task = config.build(Path::new(".")).unwrap();
            let name = task.name();
            let pairs = task.minimal_pairs(PairKind::Route, 40, 12);
            if name != "recall" {
                assert!(pairs.is_empty(), "{name} has no route pairs");
                continue;
            }
            assert_eq!(pairs.len(), 40);
            let values_from = (task.input_vocab() - task.output_vocab()) as u32;
            for pair in &pairs {
                let (clean, corrupted) = (&pair.clean.input, &pair.corrupted.input);
                let differ: Vec<usize> = (0..clean.len())
                    .filter(|&j| clean[j] != corrupted[j])
                    .collect();
                assert_eq!(differ, pair.changed, "{pair:?}");
                let [a, b] = differ[..] else {
                    panic!("two keys swap: {pair:?}")
                };
                assert!(
                    a % 2 == 0 && b % 2 == 0 && clean[a] < values_from,
                    "keys: {pair:?}"
                );
                assert_eq!((clean[a], clean[b]), (corrupted[b], corrupted[a]), "a swap");
                assert_ne!(pair.clean_answer, pair.corrupted_answer);
                for (query, target) in pair.corrupted.target.iter().enumerate() {
                    if let Some(target) = target {
                        let read = task.attention_targets(corrupted)[query][0];
                        assert_eq!(*target, corrupted[read] - values_from, "{pair:?}");
                    }
                }
            }
        }
    }

    /// Only `grammar` has words and parses; its parses are its eval set's sentences.
    #[test]
    fn only_grammar_names_its_tokens_and_parses_its_sentences() {
        for config in every_generator() {
            let task = config.build(Path::new(".")).unwrap();
            let name = task.name();
            if name != "grammar" {
                assert!(task.token_names().is_none(), "{name}");
                assert!(task.parsed_sentences(5, 1).is_empty(), "{name}");
                continue;
            }
            let names = task.token_names().unwrap();
            assert_eq!(names.len(), task.input_vocab());
            let sentences = task.parsed_sentences(50, 1);
            let eval = task.eval_set(50, 1);
            assert_eq!(sentences.len(), 50);
            for (sentence, example) in sentences.iter().zip(&eval) {
                assert_eq!(sentence.words.len(), example.input.len());
                for ((&word, &input), target) in sentence
                    .words
                    .iter()
                    .zip(&example.input)
                    .zip(&example.target)
                {
                    assert_eq!(target.unwrap_or(input), word);
                }
                assert_eq!(sentence.arcs.len() + 1, sentence.words.len());
            }
        }
    }

    #[test]
    fn task_is_clone_and_debug() {
        let task = TaskConfig::Copy(SequenceSpec::default())
            .build(Path::new("."))
            .unwrap();
        let copy = task.clone();
        assert_eq!(copy.eval_set(3, 1), task.eval_set(3, 1));
        assert!(format!("{task:?}").contains("CopyRule"));
    }
}
