//! The text task: masked-LM pretraining on natural text (BERT's objective, Devlin et al.
//! 2019). A corpus of documents ([`corpus`]: the shipped State of the Union addresses by
//! default) is split by document once; a WordPiece tokenizer is trained from the training
//! documents ([`pieces`]), or a config names one; the documents become one stream of pieces,
//! cut into sequences of `seq_len - 2` pieces framed by `[CLS]` and `[SEP]`; each training
//! example is a sequence drawn uniformly and masked afresh ([`masking`]), and the held-out
//! sequences are masked once, from a fixed seed, so every snapshot, run and seed is scored on
//! the same positions.

pub mod corpus;
pub mod masking;
pub mod pieces;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::error::{TaskError, check_size, out_of_range};
use crate::example::Example;
use crate::generator::Generator;
use crate::pattern::AttentionPattern;
use corpus::Corpus;
use masking::{MaskVocab, Masking};
use pieces::{PieceStream, SPECIAL_PIECES, TextTokenizer};

/// The `[task]` section of `kind = "text"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TextSpec {
    /// The corpus: JSON Lines (gzip-compressed or plain), one document a line with its text
    /// in `"text"`; a relative path is resolved against the current directory. Default: the
    /// shipped State of the Union addresses (`data/state-of-the-union/`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corpus: Option<PathBuf>,
    /// Pieces in the vocabulary the tokenizer is trained to (the model's input and output
    /// size). With `tokenizer`: at least the tokenizer's.
    #[serde(default = "default_vocab_size")]
    pub vocab_size: usize,
    /// An existing `tokenizer.json` to read the corpus with instead of training one (it must
    /// have BERT's special pieces).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokenizer: Option<PathBuf>,
    /// Pieces per sequence, `[CLS]` and `[SEP]` included.
    #[serde(default = "default_seq_len")]
    pub seq_len: usize,
    /// Probability that a piece (a word, with `whole_word_masking`) is chosen for prediction.
    #[serde(default = "default_mask_rate")]
    pub mask_rate: f64,
    /// Choose whole words and mask all their pieces.
    #[serde(default)]
    pub whole_word_masking: bool,
    /// Whether the trained tokenizer lowercases (as BERT's uncased models do).
    #[serde(default = "default_lowercase")]
    pub lowercase: bool,
}

fn default_vocab_size() -> usize {
    8000
}
fn default_seq_len() -> usize {
    64
}
fn default_mask_rate() -> f64 {
    0.15
}
fn default_lowercase() -> bool {
    true
}

impl Default for TextSpec {
    fn default() -> Self {
        TextSpec {
            corpus: None,
            vocab_size: default_vocab_size(),
            tokenizer: None,
            seq_len: default_seq_len(),
            mask_rate: default_mask_rate(),
            whole_word_masking: false,
            lowercase: default_lowercase(),
        }
    }
}

/// The smallest vocabulary: the special pieces and room for an alphabet.
pub const MIN_VOCAB_SIZE: usize = 64;
/// The largest vocabulary a text task trains or accepts (BERT's is 30522, XLM-R's 250002).
pub const MAX_VOCAB_SIZE: usize = 262_144;

/// Seeds the held-out masks: fixed, so every run and seed is scored on the same positions.
const EVAL_MASK_SEED: u64 = 0x7465_7874_6d61_736b; // "textmask" in ASCII

/// A corpus ready to train on. Cloning shares the sequences.
#[derive(Debug, Clone)]
pub(crate) struct TextTask {
    spec: TextSpec,
    tokenizer: Arc<TextTokenizer>,
    /// The training stream, and where each of its sequences starts.
    train: Arc<PieceStream>,
    train_starts: Arc<[usize]>,
    /// The held-out sequences, masked once.
    eval: Arc<[Example]>,
    corpus_name: String,
    corpus_sha256: String,
}

impl TextTask {
    /// Reads the corpus, trains or reads the tokenizer, and encodes both splits.
    pub(crate) fn load(spec: &TextSpec, base_dir: &Path) -> Result<Self, TaskError> {
        check_spec(spec)?;
        let corpus = Corpus::load(spec.corpus.as_deref(), base_dir)?;
        let tokenizer = match &spec.tokenizer {
            Some(path) => TextTokenizer::load(path, base_dir)?,
            None => TextTokenizer::train(&corpus.train, spec.vocab_size, spec.lowercase)?,
        };
        if tokenizer.vocab_size > spec.vocab_size {
            return Err(out_of_range(
                "vocab_size",
                spec.vocab_size,
                format!("at least the tokenizer's {} pieces", tokenizer.vocab_size),
            ));
        }
        Self::from_parts(spec, corpus, tokenizer)
    }

    fn from_parts(
        spec: &TextSpec,
        corpus: Corpus,
        tokenizer: TextTokenizer,
    ) -> Result<Self, TaskError> {
        let span = spec.seq_len - 2;
        let train = tokenizer.encode(&corpus.train)?;
        let held_out = tokenizer.encode(&corpus.held_out)?;
        let train_starts: Arc<[usize]> = (0..train.ids.len() / span).map(|i| i * span).collect();
        let held_out_starts: Vec<usize> =
            (0..held_out.ids.len() / span).map(|i| i * span).collect();
        if train_starts.is_empty() || held_out_starts.is_empty() {
            return Err(TaskError::CorpusTooShort {
                corpus: corpus.name.clone(),
                seq_len: spec.seq_len,
            });
        }
        let mut task = TextTask {
            spec: spec.clone(),
            tokenizer: Arc::new(tokenizer),
            train: Arc::new(train),
            train_starts,
            eval: Arc::new([]),
            corpus_name: corpus.name,
            corpus_sha256: corpus.sha256,
        };
        let mut rng = ChaCha8Rng::seed_from_u64(EVAL_MASK_SEED);
        task.eval = held_out_starts
            .iter()
            .map(|&start| task.masked(&held_out, start, &mut rng))
            .collect();
        Ok(task)
    }

    /// The sequence of `stream` starting at `start`, framed and masked.
    fn masked(&self, stream: &PieceStream, start: usize, rng: &mut ChaCha8Rng) -> Example {
        let special = self.tokenizer.special;
        let span = self.spec.seq_len - 2;
        let mut pieces = Vec::with_capacity(self.spec.seq_len);
        pieces.push(special.cls);
        pieces.extend_from_slice(&stream.ids[start..start + span]);
        pieces.push(special.sep);
        let mut starts_word = vec![true];
        starts_word.extend_from_slice(&stream.starts_word[start..start + span]);
        starts_word.push(true);
        // [SEP] between documents is framing too.
        let maskable: Vec<bool> = pieces
            .iter()
            .map(|&p| p != special.cls && p != special.sep && p != special.pad)
            .collect();
        let masking = Masking {
            rate: self.spec.mask_rate,
            whole_word: self.spec.whole_word_masking,
        };
        let vocab = MaskVocab {
            mask: special.mask,
            first_ordinary: SPECIAL_PIECES.len() as u32,
            vocab_size: self.tokenizer.vocab_size as u32,
        };
        masking.apply(&pieces, &maskable, &starts_word, vocab, rng)
    }

    /// The tokenizer's `tokenizer.json`, as a run stores it.
    pub(crate) fn tokenizer_json(&self) -> &str {
        &self.tokenizer.json
    }

    /// How the corpus is named: its path, or the shipped corpus's name.
    pub(crate) fn corpus_name(&self) -> &str {
        &self.corpus_name
    }

    /// SHA-256 of the corpus as stored.
    pub(crate) fn corpus_sha256(&self) -> &str {
        &self.corpus_sha256
    }
}

/// The spec's sizes, before anything is read.
fn check_spec(spec: &TextSpec) -> Result<(), TaskError> {
    if !(MIN_VOCAB_SIZE..=MAX_VOCAB_SIZE).contains(&spec.vocab_size) {
        return Err(out_of_range(
            "vocab_size",
            spec.vocab_size,
            format!("{MIN_VOCAB_SIZE} <= vocab_size <= {MAX_VOCAB_SIZE}"),
        ));
    }
    check_size("seq_len", spec.seq_len, 4)?;
    if !(spec.mask_rate > 0.0 && spec.mask_rate < 1.0) {
        return Err(out_of_range(
            "mask_rate",
            spec.mask_rate,
            "0 < mask_rate < 1 (BERT's is 0.15)".to_string(),
        ));
    }
    Ok(())
}

impl Generator for TextTask {
    fn input_vocab(&self) -> usize {
        self.spec.vocab_size
    }

    fn output_vocab(&self) -> usize {
        self.spec.vocab_size
    }

    fn seq_len(&self) -> usize {
        self.spec.seq_len
    }

    /// A training sequence drawn uniformly, masked afresh.
    fn sample(&self, rng: &mut ChaCha8Rng) -> Example {
        let start = self.train_starts[rng.random_range(0..self.train_starts.len())];
        self.masked(&self.train, start, rng)
    }

    /// The held-out sequences, masked once from a fixed seed: the first `size` (all of them
    /// when fewer), whatever the run's seed.
    fn eval_set(&self, size: usize, _seed: u64) -> Vec<Example> {
        self.eval.iter().take(size).cloned().collect()
    }

    /// About 15% of a sequence is scored, over a vocabulary of thousands: the output layer
    /// goes to those positions only.
    fn scores_masked_positions_only(&self) -> bool {
        true
    }

    fn solving_patterns(&self) -> Vec<AttentionPattern> {
        Vec::new()
    }

    fn attention_targets(&self, input: &[u32]) -> Vec<Vec<usize>> {
        vec![Vec::new(); input.len()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny_corpus() -> Corpus {
        let sentences = [
            "The farmers sell the crops at the market every week.",
            "A nation that buys its own grain grows strong.",
            "Congress will consider the treaty with great care.",
            "The people expect the government to keep the peace.",
        ];
        let text: String = (0..20)
            .map(|i| {
                let body = sentences[i % 4].repeat(2 + i % 3);
                format!("{}\n", serde_json::json!({ "text": body }))
            })
            .collect();
        Corpus::parse("tiny", &text).unwrap()
    }

    fn spec() -> TextSpec {
        TextSpec {
            vocab_size: 200,
            seq_len: 12,
            ..TextSpec::default()
        }
    }

    fn task() -> TextTask {
        let corpus = tiny_corpus();
        let tokenizer = TextTokenizer::train(&corpus.train, 200, true).unwrap();
        TextTask::from_parts(&spec(), corpus, tokenizer).unwrap()
    }

    #[test]
    fn sequences_are_framed_and_only_masked_positions_are_scored() {
        let task = task();
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let special = task.tokenizer.special;
        let mut scored = 0;
        for _ in 0..200 {
            let example = task.sample(&mut rng);
            assert_eq!(example.input.len(), 12);
            assert_eq!(example.input[0], special.cls);
            assert_eq!(example.input[11], special.sep);
            assert!(example.target[0].is_none() && example.target[11].is_none());
            scored += example.target.iter().filter(|t| t.is_some()).count();
        }
        let share = scored as f64 / (200.0 * 10.0);
        assert!((0.08..0.22).contains(&share), "{share}");
    }

    #[test]
    fn held_out_masks_are_the_same_in_every_task_and_for_every_seed() {
        let (a, b) = (task(), task());
        assert_eq!(a.eval_set(1000, 1), b.eval_set(1000, 2));
        assert_eq!(a.eval_set(3, 9), a.eval_set(1000, 1)[..3]);
        assert_eq!(a.tokenizer_json(), b.tokenizer_json());
    }

    #[test]
    fn sizes_are_checked_before_anything_is_read() {
        let missing = TextSpec {
            corpus: Some("/nonexistent/corpus.jsonl".into()),
            ..TextSpec::default()
        };
        for (spec, says) in [
            (
                TextSpec {
                    vocab_size: 10,
                    ..missing.clone()
                },
                "task.vocab_size = 10 is out of range",
            ),
            (
                TextSpec {
                    mask_rate: 1.5,
                    ..missing.clone()
                },
                "task.mask_rate = 1.5 is out of range",
            ),
            (
                TextSpec {
                    seq_len: 2,
                    ..missing.clone()
                },
                "task.seq_len = 2 is out of range",
            ),
            (missing.clone(), "/nonexistent/corpus.jsonl"),
        ] {
            let error = TextTask::load(&spec, Path::new("."))
                .unwrap_err()
                .to_string();
            assert!(error.contains(says), "{error}");
        }
    }
}
