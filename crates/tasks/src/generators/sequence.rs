//! The generator behind every task over uniform random sequences (copy, reverse, shift,
//! neighbors, sort, histogram): it draws the input, and the task's [`SequenceRule`] says what
//! the target is and which attention pattern solves it.

use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::error::TaskError;
use crate::example::Example;
use crate::generator::Generator;
use crate::pairs::{MAX_TRIES, MinimalPair, PairKind};
use crate::pattern::AttentionPattern;

/// Size of a task over plain random sequences.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SequenceSpec {
    /// Tokens per sequence.
    pub seq_len: usize,
    /// Distinct input tokens; ids are `0..vocab_size`.
    pub vocab_size: usize,
}

impl Default for SequenceSpec {
    fn default() -> Self {
        Self {
            seq_len: 12,
            vocab_size: 10,
        }
    }
}

impl SequenceSpec {
    /// Returns the vocabulary size as a token bound once both sizes are accepted.
    fn validate(&self) -> Result<u32, TaskError> {
        crate::error::check_size("seq_len", self.seq_len, 1)?;
        // A single token would make every target constant.
        crate::error::check_size("vocab_size", self.vocab_size, 2)?;
        Ok(crate::error::to_id(self.vocab_size))
    }
}

/// What makes one sequence task its own: the target of an input, and the attention that
/// solves it. The input is always uniform random tokens, drawn by [`SequenceTask`].
pub(crate) trait SequenceRule {
    /// The class at every position of `input`, whose tokens are below `vocab`.
    fn target(&self, input: &[u32], vocab: u32) -> Vec<u32>;

    /// Attention patterns known to solve (part of) the task; empty when none does alone.
    fn solving_patterns(&self) -> Vec<AttentionPattern>;

    /// For each position of `input`, the exact key positions whose tokens determine its
    /// target, ascending; empty where no position does.
    fn attention_targets(&self, input: &[u32]) -> Vec<Vec<usize>>;

    /// Number of target classes; the input vocabulary unless the rule adds or counts.
    fn output_vocab(&self, _seq_len: usize, vocab: u32) -> usize {
        vocab as usize
    }
}

/// Uniform random sequences of `seq_len` tokens below `vocab`, every position scored with
/// the target its rule gives.
#[derive(Debug, Clone)]
pub(crate) struct SequenceTask<R> {
    seq_len: usize,
    vocab: u32,
    rule: R,
}

impl<R: SequenceRule> SequenceTask<R> {
    pub(crate) fn new(spec: &SequenceSpec, rule: R) -> Result<Self, TaskError> {
        let vocab = spec.validate()?;
        Ok(Self {
            seq_len: spec.seq_len,
            vocab,
            rule,
        })
    }
}

impl<R: SequenceRule> Generator for SequenceTask<R> {
    fn input_vocab(&self) -> usize {
        self.vocab as usize
    }

    fn output_vocab(&self) -> usize {
        self.rule.output_vocab(self.seq_len, self.vocab)
    }

    fn seq_len(&self) -> usize {
        self.seq_len
    }

    fn sample(&self, rng: &mut ChaCha8Rng) -> Example {
        let input: Vec<u32> = (0..self.seq_len)
            .map(|_| rng.random_range(0..self.vocab))
            .collect();
        let target = self.rule.target(&input, self.vocab);
        Example {
            input,
            target: target.into_iter().map(Some).collect(),
        }
    }

    fn solving_patterns(&self) -> Vec<AttentionPattern> {
        self.rule.solving_patterns()
    }

    fn attention_targets(&self, input: &[u32]) -> Vec<Vec<usize>> {
        self.rule.attention_targets(input)
    }

    /// A token the answer at a random position reads, changed to another token.
    fn minimal_pair(&self, kind: PairKind, rng: &mut ChaCha8Rng) -> Option<MinimalPair> {
        if kind != PairKind::Answer {
            return None; // every token here is both content and place
        }
        for _ in 0..MAX_TRIES {
            let clean = self.sample(rng);
            let position = rng.random_range(0..self.seq_len);
            let reads = &self.rule.attention_targets(&clean.input)[position];
            if reads.is_empty() {
                continue;
            }
            let changed = reads[rng.random_range(0..reads.len())];
            let mut input = clean.input.clone();
            input[changed] = (input[changed] + rng.random_range(1..self.vocab)) % self.vocab;
            let target = self.rule.target(&input, self.vocab);
            let corrupted = Example {
                input,
                target: target.into_iter().map(Some).collect(),
            };
            if let Some(pair) = MinimalPair::read(clean, corrupted, position, vec![changed]) {
                return Some(pair);
            }
        }
        None
    }
}

/// The positions of `input` holding `token`, ascending.
pub(crate) fn positions_of(input: &[u32], token: u32) -> Vec<usize> {
    (0..input.len()).filter(|&j| input[j] == token).collect()
}
