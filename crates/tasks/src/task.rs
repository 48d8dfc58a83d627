//! The `[task]` config section ([`TaskConfig`], tagged by `kind`) and the ready task it
//! builds ([`Task`]), which dispatches to one generator of [`crate::generators`].

use std::path::Path;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::dependency::ParsedSentence;
use crate::error::TaskError;
use crate::example::Example;
use crate::generator::Generator;
use crate::generators::file::{self, FileSpec};
use crate::generators::grammar::{self, GrammarSpec};
use crate::generators::neighbors::{self, NeighborsSpec};
use crate::generators::recall::{self, RecallSpec};
use crate::generators::sequence::{SequenceSpec, SequenceTask};
use crate::generators::shift::{self, ShiftSpec};
use crate::generators::text::{TextSpec, TextTask};
use crate::generators::{copy, histogram, reverse, sort};
use crate::pairs::{MinimalPair, PairKind};
use crate::pattern::AttentionPattern;
use crate::words::{ClassCeiling, Inflection, WordClass};

/// The `[task]` section of a config file, tagged by `kind`:
/// copy | reverse | shift | neighbors | sort | histogram | recall | grammar | file | text.
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
    /// Masked-LM pretraining on natural text through a tokenizer.
    Text(TextSpec),
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
            Self::Text(spec) => TaskKind::Text(TextTask::load(spec, base_dir)?),
        };
        Ok(Task { kind })
    }

    /// Every `kind`, as spelled in config files.
    pub const KINDS: [&'static str; 10] = [
        "copy",
        "reverse",
        "shift",
        "neighbors",
        "sort",
        "histogram",
        "recall",
        "grammar",
        "file",
        "text",
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
            "text" => TextSpec::deserialize(value).err(),
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
            Self::Text(_) => "text",
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
    Text(TextTask),
}

impl Task {
    fn inner(&self) -> &dyn Generator {
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
            TaskKind::Text(task) => task,
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
            TaskKind::Text(_) => "text",
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
        self.inner().words().map(|words| words.token_names())
    }

    /// Whether training applies the output layer at the scored positions only
    /// ([`crate::batch::scored_rows`]): the text task's masked LM; every other task scores
    /// every position's logits.
    pub fn scores_masked_positions_only(&self) -> bool {
        self.inner().scores_masked_positions_only()
    }

    /// The `tokenizer.json` a text task reads its corpus with (trained from the corpus, or
    /// the one its config names), which a run stores beside its weights; `None` for the
    /// tasks of tokens.
    pub fn tokenizer_json(&self) -> Option<&str> {
        match &self.kind {
            TaskKind::Text(task) => Some(task.tokenizer_json()),
            _ => None,
        }
    }

    /// The corpus a text task trains on, as named in messages, and the SHA-256 of its bytes;
    /// `None` for other tasks.
    pub fn corpus(&self) -> Option<(&str, &str)> {
        match &self.kind {
            TaskKind::Text(task) => Some((task.corpus_name(), task.corpus_sha256())),
            _ => None,
        }
    }

    /// `size` minimal pairs ([`MinimalPair`]) of `kind` drawn from a ChaCha8Rng seeded with
    /// `seed`. Answer pairs: for the sequence tasks one token at a position the answer reads
    /// (its [`Task::attention_targets`]) changed to another, for recall a queried key's value
    /// changed. Route pairs: recall's queried key swapped with another. Empty for tasks
    /// without pairs of that kind (`grammar` and `file` have none). Fewer than `size` only if
    /// a generator found none in [`crate::pairs::MAX_TRIES`] draws.
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
        self.inner()
            .words()
            .map_or_else(Vec::new, |words| words.parsed_sentences(size, seed))
    }

    /// For word tasks (`grammar`): the accuracy of the Bayes-optimal predictor (which knows
    /// the grammar) per class of masked word, on the examples of `eval_set(size, seed)`, the
    /// ceiling a model's accuracy is read against ([`ClassCeiling`]); empty for other tasks.
    pub fn ceiling(&self, size: usize, seed: u64) -> Vec<ClassCeiling> {
        self.inner()
            .words()
            .map_or_else(Vec::new, |words| words.ceiling(size, seed))
    }

    /// The word class of token `id` for word tasks; `None` for other tasks and for
    /// `<pad>` and `<mask>`.
    pub fn word_class(&self, id: u32) -> Option<WordClass> {
        self.inner().words()?.word_class(id)
    }

    /// For word tasks: a noun's or verb's number and its form in the other number
    /// ([`Inflection`]); `None` for other tokens and other tasks.
    pub fn inflection(&self, id: u32) -> Option<Inflection> {
        self.inner().words()?.inflection(id)
    }

    /// The id of the mask token of word tasks (what a masked word reads as).
    pub const MASK_TOKEN: u32 = crate::words::MASK_TOKEN;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::MAX_SIZE;
    use crate::generators::neighbors::Combine;

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

    /// Runs, resumes and the book's numbers rest on this: the same seed draws the same
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
