//! The neighbors task: the target at position i combines the tokens on either side of it,
//! `(left + right)` or `(left - right)` modulo the vocabulary size. It needs both neighbours.
//!
//! The sum is symmetric in the two neighbours, so one head that spreads its attention over
//! both (and reads the sum of their values) can solve it; the difference is not, so a head
//! has to tell left from right, which two heads do most easily by specialising.

use serde::{Deserialize, Serialize};

use super::sequence::SequenceSpec;
use super::sequence::{SequenceRule, SequenceTask};
use crate::error::TaskError;
use crate::pattern::AttentionPattern;

/// How the two neighbours make the target.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Combine {
    /// `(left + right) % vocab_size`.
    #[default]
    Sum,
    /// `(left - right) % vocab_size` (never negative).
    Difference,
}

/// Size and rule of the neighbors task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NeighborsSpec {
    /// Tokens per sequence.
    pub seq_len: usize,
    /// Distinct input tokens; ids are `0..vocab_size`.
    pub vocab_size: usize,
    /// `sum` (default) or `difference`.
    pub combine: Combine,
}

impl Default for NeighborsSpec {
    fn default() -> Self {
        let SequenceSpec {
            seq_len,
            vocab_size,
        } = SequenceSpec::default();
        Self {
            seq_len,
            vocab_size,
            combine: Combine::Sum,
        }
    }
}

impl NeighborsSpec {
    /// The task this spec describes.
    pub(crate) fn task(&self) -> Result<SequenceTask<NeighborsRule>, TaskError> {
        let sizes = SequenceSpec {
            seq_len: self.seq_len,
            vocab_size: self.vocab_size,
        };
        let rule = NeighborsRule {
            combine: self.combine,
        };
        SequenceTask::new(&sizes, rule)
    }
}

/// The target combines the two neighbours, with 0 standing in for the missing neighbour at
/// either end.
#[derive(Debug, Clone)]
pub(crate) struct NeighborsRule {
    combine: Combine,
}

impl SequenceRule for NeighborsRule {
    fn target(&self, input: &[u32], vocab: u32) -> Vec<u32> {
        let token_at = |i: Option<usize>| i.and_then(|i| input.get(i)).copied().unwrap_or(0);
        (0..input.len())
            .map(|i| {
                let (left, right) = (token_at(i.checked_sub(1)), token_at(Some(i + 1)));
                // Both are below vocab <= MAX_SIZE, so neither form can overflow.
                match self.combine {
                    Combine::Sum => (left + right) % vocab,
                    Combine::Difference => (left + vocab - right) % vocab,
                }
            })
            .collect()
    }

    fn solving_patterns(&self) -> Vec<AttentionPattern> {
        vec![AttentionPattern::PreviousToken, AttentionPattern::NextToken]
    }

    /// Both neighbours, or the one that exists at either end.
    fn attention_targets(&self, input: &[u32]) -> Vec<Vec<usize>> {
        let n = input.len();
        (0..n)
            .map(|i| {
                let left = i.checked_sub(1);
                let right = Some(i + 1).filter(|&j| j < n);
                left.into_iter().chain(right).collect()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    use super::*;
    use crate::{Example, Task, TaskConfig};

    fn task(seq_len: usize, vocab_size: usize) -> Task {
        with_combine(seq_len, vocab_size, Combine::Sum)
    }

    fn with_combine(seq_len: usize, vocab_size: usize, combine: Combine) -> Task {
        build(NeighborsSpec {
            seq_len,
            vocab_size,
            combine,
        })
        .unwrap()
    }

    fn build(spec: NeighborsSpec) -> Result<Task, TaskError> {
        TaskConfig::Neighbors(spec).build(Path::new("."))
    }

    #[test]
    fn target_sums_the_neighbours() {
        for (seq_len, vocab) in [(1, 3), (2, 5), (12, 10)] {
            let task = task(seq_len, vocab);
            let mut rng = ChaCha8Rng::seed_from_u64(seq_len as u64);
            for _ in 0..100 {
                let Example { input, target } = task.sample(&mut rng);
                // Zero-pad both ends and slide a window of three over the padded sequence.
                let padded: Vec<u32> = [0].iter().chain(&input).chain(&[0]).copied().collect();
                let expected: Vec<Option<u32>> = padded
                    .windows(3)
                    .map(|w| Some((w[0] + w[2]) % vocab as u32))
                    .collect();
                assert_eq!(target, expected);
            }
        }
    }

    #[test]
    fn difference_subtracts_the_right_neighbour_from_the_left() {
        let task = with_combine(4, 7, Combine::Difference);
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        for _ in 0..100 {
            let Example { input, target } = task.sample(&mut rng);
            let at = |i: i64| -> i64 {
                usize::try_from(i)
                    .ok()
                    .and_then(|i| input.get(i))
                    .map_or(0, |&t| t as i64)
            };
            let expected: Vec<Option<u32>> = (0..4i64)
                .map(|i| Some((at(i - 1) - at(i + 1)).rem_euclid(7) as u32))
                .collect();
            assert_eq!(target, expected);
        }
    }

    #[test]
    fn previous_and_next_token_read_the_target() {
        let task = task(8, 6);
        for Example { input, target } in task.eval_set(50, 3) {
            for (i, expected) in target.into_iter().enumerate() {
                let sum: u32 = task
                    .solving_patterns()
                    .iter()
                    .flat_map(|pattern| pattern.targets(&input, i))
                    .map(|key| input[key])
                    .sum();
                assert_eq!(expected, Some(sum % 6));
            }
        }
    }

    #[test]
    fn rejects_bad_sizes() {
        let error = build(NeighborsSpec {
            seq_len: 5,
            vocab_size: 0,
            combine: Combine::Sum,
        })
        .unwrap_err();
        assert!(
            error.to_string().starts_with("task.vocab_size = 0"),
            "{error}"
        );
    }
}
