//! The file task: examples read from a JSONL file (`{"input": [..], "target": [..]}` per line),
//! split once, deterministically, into a train and an eval set. Records may differ in length:
//! the task's `seq_len` is the longest, and batches pad the shorter ones.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::error::TaskError;
use crate::example::Example;
use crate::generator::Generator;
use crate::pattern::AttentionPattern;

/// Where to find a JSONL dataset and how to split it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileSpec {
    /// The JSONL file; a relative path is resolved against the directory given to
    /// [`TaskConfig::build`](crate::TaskConfig::build).
    pub path: PathBuf,
    /// Fraction of records held out for evaluation, in (0, 1).
    #[serde(default = "default_eval_fraction")]
    pub eval_fraction: f64,
    /// Number of input tokens; `None` means the largest input token in the file plus one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vocab_size: Option<usize>,
}

fn default_eval_fraction() -> f64 {
    0.1
}

/// Seeds the train/eval shuffle: fixed so that every run, and every model trained on the same
/// file, is evaluated on the same records.
const SPLIT_SEED: u64 = 0x0068_6561_646c_6162; // "headlab" in ASCII

/// The most a JSONL dataset may hold: far beyond a toy task's (the examples are held in
/// memory, as token ids), and bounded so that `task.path = "/dev/zero"` is refused rather
/// than read until the memory runs out.
pub const MAX_DATASET_BYTES: u64 = 1 << 30;

/// A loaded dataset. The splits are shared, so cloning a task does not copy the records.
#[derive(Debug, Clone)]
pub(crate) struct FileTask {
    train: Arc<[Example]>,
    eval: Arc<[Example]>,
    seq_len: usize,
    input_vocab: usize,
    output_vocab: usize,
}

impl FileTask {
    pub(crate) fn load(spec: &FileSpec, base_dir: &Path) -> Result<Self, TaskError> {
        // Before reading: a bad spec is named even when the file is missing too.
        check_spec(spec)?;
        let path = base_dir.join(&spec.path);
        let text =
            crate::small_file::read_to_string(&path, MAX_DATASET_BYTES).map_err(|error| {
                TaskError::Read {
                    path: path.clone(),
                    error,
                }
            })?;
        Self::from_text(spec, &path, &text)
    }

    /// The task from the dataset's text, already read from `path` (named in messages).
    pub(crate) fn from_text(spec: &FileSpec, path: &Path, text: &str) -> Result<Self, TaskError> {
        check_spec(spec)?;
        let path = path.to_path_buf();
        let records = parse_records(text, &path, spec.vocab_size)?;
        let seq_len = match records.iter().map(|r| r.input.len()).max() {
            Some(longest) => longest,
            None => return Err(TaskError::NoRecords { path }),
        };
        if records.len() < 2 {
            return Err(TaskError::TooFewRecords {
                path,
                count: records.len(),
            });
        }

        let input_vocab = spec.vocab_size.unwrap_or_else(|| {
            let max = records.iter().flat_map(|r| r.input.iter().copied()).max();
            max.map_or(1, |token| token as usize + 1)
        });
        let max_target = records
            .iter()
            .flat_map(|r| r.target.iter().flatten().copied())
            .max();
        let output_vocab = max_target.map_or(1, |class| class as usize + 1);

        let (train, eval) = split(records, spec.eval_fraction);
        Ok(Self {
            train: train.into(),
            eval: eval.into(),
            seq_len,
            input_vocab,
            output_vocab,
        })
    }
}

/// Checks the spec's own values, before any file is read.
fn check_spec(spec: &FileSpec) -> Result<(), TaskError> {
    let eval_fraction = spec.eval_fraction;
    if !(eval_fraction > 0.0 && eval_fraction < 1.0) {
        let expected = "0 < eval_fraction < 1".to_owned();
        return Err(crate::error::out_of_range(
            "eval_fraction",
            eval_fraction,
            expected,
        ));
    }
    if let Some(vocab_size) = spec.vocab_size {
        crate::error::check_size("vocab_size", vocab_size, 1)?;
    }
    Ok(())
}

/// Parses and checks every non-blank line, reporting the first problem with its line number.
fn parse_records(
    text: &str,
    path: &Path,
    vocab_size: Option<usize>,
) -> Result<Vec<Example>, TaskError> {
    let mut records = Vec::new();
    for (index, content) in text.lines().enumerate() {
        let line = index + 1;
        if content.trim().is_empty() {
            continue;
        }
        let record = parse_record(content, path, line)?;
        check_record_lengths(&record, path, line)?;
        if let Some(vocab_size) = vocab_size {
            check_vocab(&record, path, line, vocab_size)?;
        }
        check_id_bound(&record, path, line)?;
        records.push(record);
    }
    Ok(records)
}

/// Line `line` of the file, `content`, as a record.
fn parse_record(content: &str, path: &Path, line: usize) -> Result<Example, TaskError> {
    serde_json::from_str(content).map_err(|error| {
        // serde_json ends its message with " at line 1 column N"; every record is a single
        // line, so only the column is worth keeping, and it is reported separately.
        let position = format!(" at line {} column {}", error.line(), error.column());
        let message = error.to_string();
        let message = message
            .strip_suffix(&position)
            .unwrap_or(&message)
            .to_owned();
        TaskError::Parse {
            path: path.to_owned(),
            line,
            column: error.column(),
            message,
        }
    })
}

/// Checks that a record has as many targets as inputs, and at least one.
fn check_record_lengths(record: &Example, path: &Path, line: usize) -> Result<(), TaskError> {
    let len = record.input.len();
    if len != record.target.len() {
        let target_len = record.target.len();
        return Err(TaskError::LengthMismatch {
            path: path.to_owned(),
            line,
            input_len: len,
            target_len,
        });
    }
    if len == 0 {
        return Err(TaskError::EmptySequence {
            path: path.to_owned(),
            line,
        });
    }
    Ok(())
}

/// Checks that every input token of a record is below the spec's `vocab_size`.
fn check_vocab(
    record: &Example,
    path: &Path,
    line: usize,
    vocab_size: usize,
) -> Result<(), TaskError> {
    let outside = record
        .input
        .iter()
        .position(|&token| token as usize >= vocab_size);
    if let Some(position) = outside {
        return Err(TaskError::TokenOutOfVocab {
            path: path.to_owned(),
            line,
            position,
            token: record.input[position],
            vocab_size,
        });
    }
    Ok(())
}

/// Checks that a record's input tokens and target classes are below `MAX_SIZE`.
fn check_id_bound(record: &Example, path: &Path, line: usize) -> Result<(), TaskError> {
    // Ids size the embedding and the output layer: an id of 4e9 (a typo, say) would ask
    // for a table of 4e9 rows. They stay within the generators' bound.
    let max = crate::error::MAX_SIZE;
    let input_at = record.input.iter().position(|&t| t as usize >= max);
    let target_at = record
        .target
        .iter()
        .position(|t| t.is_some_and(|c| c as usize >= max));
    let too_large = input_at
        .map(|p| ("input token", p, record.input[p]))
        .or_else(|| target_at.map(|p| ("target class", p, record.target[p].unwrap_or(0))));
    if let Some((what, position, id)) = too_large {
        return Err(TaskError::IdTooLarge {
            path: path.to_owned(),
            line,
            what,
            position,
            id,
        });
    }
    Ok(())
}

/// Shuffles with [`SPLIT_SEED`] and holds out `ceil(eval_fraction * n)` records, clamped so both
/// splits keep at least one. Each split keeps file order, which makes eval reports easy to read
/// against the file.
fn split(records: Vec<Example>, eval_fraction: f64) -> (Vec<Example>, Vec<Example>) {
    let n = records.len();
    let n_eval = ((eval_fraction * n as f64).ceil() as usize).clamp(1, n - 1);
    let mut order: Vec<usize> = (0..n).collect();
    order.shuffle(&mut ChaCha8Rng::seed_from_u64(SPLIT_SEED));
    let mut in_eval = vec![false; n];
    for &index in &order[..n_eval] {
        in_eval[index] = true;
    }
    let (eval, train): (Vec<_>, Vec<_>) = records
        .into_iter()
        .zip(in_eval)
        .partition(|(_, in_eval)| *in_eval);
    let strip =
        |split: Vec<(Example, bool)>| split.into_iter().map(|(example, _)| example).collect();
    (strip(train), strip(eval))
}

impl Generator for FileTask {
    fn input_vocab(&self) -> usize {
        self.input_vocab
    }

    fn output_vocab(&self) -> usize {
        self.output_vocab
    }

    fn seq_len(&self) -> usize {
        self.seq_len
    }

    fn sample(&self, rng: &mut ChaCha8Rng) -> Example {
        self.train[rng.random_range(0..self.train.len())].clone()
    }

    fn eval_set(&self, _size: usize, _seed: u64) -> Vec<Example> {
        self.eval.to_vec()
    }

    /// What solves a user's dataset is unknown, so only the generic patterns apply.
    fn solving_patterns(&self) -> Vec<AttentionPattern> {
        Vec::new()
    }

    /// Unknown for a user's dataset: no position has a target.
    fn attention_targets(&self, input: &[u32]) -> Vec<Vec<usize>> {
        vec![Vec::new(); input.len()]
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::io::Write;

    use super::*;

    /// A dataset file in a fresh temporary directory, which is the base dir for the spec.
    struct Dataset {
        dir: tempfile::TempDir,
    }

    impl Dataset {
        fn new(lines: &[&str]) -> Self {
            let dir = tempfile::tempdir().unwrap();
            let mut file = std::fs::File::create(dir.path().join("data.jsonl")).unwrap();
            for line in lines {
                writeln!(file, "{line}").unwrap();
            }
            Self { dir }
        }

        fn load(
            &self,
            eval_fraction: f64,
            vocab_size: Option<usize>,
        ) -> Result<FileTask, TaskError> {
            let spec = FileSpec {
                path: "data.jsonl".into(),
                eval_fraction,
                vocab_size,
            };
            FileTask::load(&spec, self.dir.path())
        }

        fn error(&self, vocab_size: Option<usize>) -> String {
            let error = self.load(0.5, vocab_size).unwrap_err().to_string();
            let path = self.dir.path().join("data.jsonl");
            let prefix = path.display().to_string();
            assert!(error.starts_with(&prefix), "{error}");
            error[prefix.len()..].to_owned()
        }
    }

    fn record(input: &[u32], target: &[Option<u32>]) -> String {
        serde_json::to_string(&Example {
            input: input.to_vec(),
            target: target.to_vec(),
        })
        .unwrap()
    }

    fn good_lines() -> Vec<String> {
        (0..10_u32)
            .map(|i| record(&[i, i + 1, 2], &[Some(i % 3), None, Some(4)]))
            .collect()
    }

    #[test]
    fn loads_and_splits_a_good_file() {
        let mut lines = good_lines();
        lines.insert(3, String::new());
        lines.push("   ".to_owned());
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let task = Dataset::new(&lines).load(0.25, None).unwrap();
        assert_eq!(
            (task.seq_len(), task.input_vocab(), task.output_vocab()),
            (3, 11, 5)
        );
        assert!(task.solving_patterns().is_empty());

        // ceil(0.25 * 10) = 3 held out; together the splits are exactly the file's records.
        let eval = task.eval_set(0, 0);
        assert_eq!((task.train.len(), eval.len()), (7, 3));
        assert_eq!(eval, task.eval_set(100, 9), "eval ignores size and seed");
        let firsts = |examples: &[Example]| examples.iter().map(|e| e.input[0]).collect::<Vec<_>>();
        let (train_ids, eval_ids) = (firsts(&task.train), firsts(&eval));
        assert!(
            train_ids.is_sorted() && eval_ids.is_sorted(),
            "splits keep file order"
        );
        let all: HashSet<u32> = train_ids.iter().chain(&eval_ids).copied().collect();
        assert_eq!(all, (0..10).collect());

        // Samples come from the train split only, and reach all of it.
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let sampled: HashSet<u32> = (0..200).map(|_| task.sample(&mut rng).input[0]).collect();
        assert_eq!(sampled, train_ids.into_iter().collect());
    }

    #[test]
    fn split_is_deterministic_and_clamped() {
        let lines = good_lines();
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let dataset = Dataset::new(&lines);
        let a = dataset.load(0.3, None).unwrap();
        let b = dataset.load(0.3, None).unwrap();
        assert_eq!(a.eval_set(0, 0), b.eval_set(0, 0));
        assert_eq!(dataset.load(0.01, None).unwrap().eval.len(), 1);
        assert_eq!(dataset.load(0.99, None).unwrap().eval.len(), 9);

        let two = Dataset::new(&lines[..2]).load(0.5, None).unwrap();
        assert_eq!((two.train.len(), two.eval.len()), (1, 1));
    }

    #[test]
    fn vocab_size_overrides_the_inferred_vocabulary() {
        let lines = good_lines();
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let task = Dataset::new(&lines).load(0.1, Some(20)).unwrap();
        assert_eq!(task.input_vocab(), 20);
    }

    #[test]
    fn all_null_targets_give_one_class() {
        let line = record(&[1, 2], &[None, None]);
        let task = Dataset::new(&[&line, &line]).load(0.5, None).unwrap();
        assert_eq!(task.output_vocab(), 1);
    }

    #[test]
    fn absolute_path_ignores_base_dir() {
        let lines = good_lines();
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let dataset = Dataset::new(&lines);
        let absolute = FileSpec {
            path: dataset.dir.path().join("data.jsonl"),
            eval_fraction: 0.1,
            vocab_size: None,
        };
        assert!(FileTask::load(&absolute, Path::new("/nonexistent")).is_ok());
    }

    #[test]
    fn missing_file() {
        let dataset = Dataset::new(&[]);
        let spec = FileSpec {
            path: "nope.jsonl".into(),
            eval_fraction: 0.1,
            vocab_size: None,
        };
        let error = FileTask::load(&spec, dataset.dir.path())
            .unwrap_err()
            .to_string();
        assert!(error.starts_with("cannot read task.path "), "{error}");
        assert!(error.contains("nope.jsonl: "), "{error}");
    }

    #[test]
    fn empty_file() {
        assert!(
            Dataset::new(&[])
                .error(None)
                .starts_with(" holds no records")
        );
        assert!(
            Dataset::new(&["", "  "])
                .error(None)
                .starts_with(" holds no records")
        );
    }

    #[test]
    fn invalid_json() {
        let good = record(&[1, 2], &[Some(1), None]);
        let error = Dataset::new(&[&good, "", "{\"input\": [1, 2], \"target\": [1"]).error(None);
        assert!(error.starts_with(" line 3, column "), "{error}");
        assert!(error.contains("EOF while parsing a list;"), "{error}");
        assert!(!error.contains("at line 1"), "{error}");
    }

    #[test]
    fn missing_extra_and_mistyped_fields() {
        let error = Dataset::new(&["{\"input\": [1, 2]}"]).error(None);
        assert!(
            error.starts_with(" line 1, column 17: missing field `target`;"),
            "{error}"
        );

        let good = record(&[1, 2], &[Some(1), None]);
        let extra = "{\"input\": [1, 2], \"target\": [1, 2], \"weight\": 3}";
        let error = Dataset::new(&[&good, extra]).error(None);
        assert!(error.starts_with(" line 2, column "), "{error}");
        assert!(error.contains("unknown field `weight`"), "{error}");

        let error = Dataset::new(&["{\"input\": [1, -2], \"target\": [1, 2]}"]).error(None);
        assert!(error.starts_with(" line 1, column "), "{error}");
        assert!(error.contains("expected u32"), "{error}");
    }

    #[test]
    fn input_and_target_lengths_differ() {
        let good = record(&[1, 2, 3], &[Some(1), None, None]);
        let bad = record(&[1, 2, 3], &[Some(1), None]);
        assert_eq!(
            Dataset::new(&[&good, &good, &bad]).error(None),
            " line 3: input has 3 tokens but target has 2; they must be the same length"
        );
    }

    #[test]
    fn empty_sequence() {
        let error = Dataset::new(&["{\"input\": [], \"target\": []}"]).error(None);
        assert_eq!(
            error,
            " line 1: input is empty; every record needs at least one token"
        );
    }

    /// Records of different lengths are kept as they are; the longest sets `seq_len`.
    #[test]
    fn records_of_different_lengths() {
        let short = record(&[1, 2], &[Some(1), None]);
        let long = record(&[1, 2, 3, 4, 5], &[Some(1), None, None, Some(2), None]);
        let middle = record(&[1, 2, 3], &[Some(1), None, None]);
        let lines = ["", &short, &long, &middle, &short, &middle].map(|l| l as &str);
        let task = Dataset::new(&lines).load(0.4, None).unwrap();
        assert_eq!(task.seq_len(), 5);
        let lengths: Vec<usize> = task
            .train
            .iter()
            .chain(task.eval.iter())
            .map(|e| e.input.len())
            .collect();
        let mut sorted = lengths.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, [2, 2, 3, 3, 5]);
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        for _ in 0..20 {
            let example = task.sample(&mut rng);
            assert_eq!(example.input.len(), example.target.len());
            assert!(example.input.len() <= task.seq_len());
            assert_eq!(
                task.attention_targets(&example.input).len(),
                example.input.len()
            );
        }
    }

    #[test]
    fn token_outside_vocab_size() {
        let good = record(&[1, 2, 3], &[Some(1), None, None]);
        let bad = record(&[1, 5, 3], &[Some(1), None, None]);
        assert_eq!(
            Dataset::new(&[&good, &bad]).error(Some(4)),
            " line 2: input token 5 at position 1 is out of range: expected tokens below \
             task.vocab_size (4)"
        );
        assert!(Dataset::new(&[&good, &bad]).load(0.5, Some(6)).is_ok());
    }

    #[test]
    fn ids_beyond_the_generators_bound() {
        let good = record(&[1, 2, 3], &[Some(1), None, None]);
        let big_token = record(&[1, 16_777_216, 3], &[Some(1), None, None]);
        assert_eq!(
            Dataset::new(&[&good, &big_token]).error(None),
            " line 2: input token 16777216 at position 1 is out of range: expected ids below \
             16777216, which sizes the model's tables"
        );
        let big_class = record(&[1, 2, 3], &[Some(1), None, Some(u32::MAX)]);
        assert!(
            Dataset::new(&[&good, &big_class])
                .error(None)
                .starts_with(" line 2: target class 4294967295 at position 2 is out of range")
        );
        let largest = record(&[16_777_215, 2, 3], &[Some(16_777_215), None, None]);
        let task = Dataset::new(&[&good, &largest]).load(0.5, None).unwrap();
        assert_eq!(
            (task.input_vocab(), task.output_vocab()),
            (1 << 24, 1 << 24)
        );
    }

    #[test]
    fn single_record() {
        let good = record(&[1, 2, 3], &[Some(1), None, None]);
        assert_eq!(
            Dataset::new(&[&good]).error(None),
            " holds only 1 record; at least 2 are needed so one can be held out for evaluation"
        );
    }

    #[test]
    fn eval_fraction_out_of_range() {
        let dataset = Dataset::new(&[]);
        for fraction in [0.0, 1.0, -0.5, 1.5, f64::NAN] {
            let error = dataset.load(fraction, None).unwrap_err().to_string();
            assert_eq!(
                error,
                format!(
                    "task.eval_fraction = {fraction} is out of range: expected 0 < eval_fraction \
                     < 1"
                )
            );
        }
        let error = dataset.load(0.5, Some(0)).unwrap_err().to_string();
        assert!(
            error.starts_with("task.vocab_size = 0 is out of range"),
            "{error}"
        );
    }
}
