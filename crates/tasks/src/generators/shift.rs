//! The shift task: the target at position i is the input `shift` positions earlier; the first
//! `shift` positions get a dedicated blank class.

use serde::{Deserialize, Serialize};

use super::sequence::SequenceSpec;
use super::sequence::{SequenceRule, SequenceTask};
use crate::error::TaskError;
use crate::pattern::AttentionPattern;

/// Size of the shift task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ShiftSpec {
    /// Tokens per sequence.
    pub seq_len: usize,
    /// Distinct input tokens; ids are `0..vocab_size`, and `vocab_size` itself is the blank
    /// target class.
    pub vocab_size: usize,
    /// How many positions the sequence is delayed by: `1 <= shift < seq_len`.
    pub shift: usize,
}

impl Default for ShiftSpec {
    fn default() -> Self {
        let SequenceSpec {
            seq_len,
            vocab_size,
        } = SequenceSpec::default();
        Self {
            seq_len,
            vocab_size,
            shift: 1,
        }
    }
}

impl ShiftSpec {
    /// The task this spec describes, once `shift` fits the sequence.
    pub(crate) fn task(&self) -> Result<SequenceTask<ShiftRule>, TaskError> {
        let ShiftSpec {
            seq_len,
            vocab_size,
            shift,
        } = *self;
        let sizes = SequenceSpec {
            seq_len,
            vocab_size,
        };
        let task = SequenceTask::new(&sizes, ShiftRule { shift })?;
        if shift == 0 || shift >= seq_len {
            let expected = format!("1 <= shift < seq_len ({seq_len})");
            return Err(crate::error::out_of_range("shift", shift, expected));
        }
        Ok(task)
    }
}

/// The target is the input delayed by `shift`; the input vocabulary size is the blank class
/// for positions with nothing `shift` positions before them.
#[derive(Debug, Clone)]
pub(crate) struct ShiftRule {
    shift: usize,
}

impl SequenceRule for ShiftRule {
    fn target(&self, input: &[u32], vocab: u32) -> Vec<u32> {
        let blank = vocab;
        (0..input.len())
            .map(|i| {
                i.checked_sub(self.shift)
                    .map_or(blank, |source| input[source])
            })
            .collect()
    }

    fn solving_patterns(&self) -> Vec<AttentionPattern> {
        // `shift` is below seq_len <= MAX_SIZE, so it fits in i64.
        let offset = AttentionPattern::Offset(-(self.shift as i64));
        if self.shift == 1 {
            vec![offset, AttentionPattern::PreviousToken]
        } else {
            vec![offset]
        }
    }

    /// `i - shift`; nothing for the first `shift` positions, whose target is the blank.
    fn attention_targets(&self, input: &[u32]) -> Vec<Vec<usize>> {
        (0..input.len())
            .map(|i| i.checked_sub(self.shift).into_iter().collect())
            .collect()
    }

    /// The input tokens and the blank.
    fn output_vocab(&self, _seq_len: usize, vocab: u32) -> usize {
        vocab as usize + 1
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    use super::*;
    use crate::{Example, Task, TaskConfig};

    fn build(spec: ShiftSpec) -> Result<Task, TaskError> {
        TaskConfig::Shift(spec).build(Path::new("."))
    }

    fn spec(seq_len: usize, vocab_size: usize, shift: usize) -> ShiftSpec {
        ShiftSpec {
            seq_len,
            vocab_size,
            shift,
        }
    }

    #[test]
    fn target_is_the_delayed_input() {
        for shift in 1..6 {
            let task = build(spec(6, 4, shift)).unwrap();
            let mut rng = ChaCha8Rng::seed_from_u64(shift as u64);
            for _ in 0..100 {
                let Example { input, target } = task.sample(&mut rng);
                // Pad with blanks (class 4) on the left, then cut back to the original length.
                let mut delayed = vec![4; shift];
                delayed.extend_from_slice(&input);
                delayed.truncate(input.len());
                assert_eq!(target, delayed.into_iter().map(Some).collect::<Vec<_>>());
            }
        }
    }

    #[test]
    fn offset_pattern_reads_the_target() {
        let task = build(spec(10, 5, 3)).unwrap();
        assert_eq!(task.solving_patterns(), [AttentionPattern::Offset(-3)]);
        for Example { input, target } in task.eval_set(50, 1) {
            for (i, expected) in target.into_iter().enumerate() {
                match AttentionPattern::Offset(-3).targets(&input, i).as_slice() {
                    [] => assert_eq!(expected, Some(5), "blank expected at {i}"),
                    &[key] => assert_eq!(expected, Some(input[key])),
                    keys => panic!("offset gave several keys {keys:?}"),
                }
            }
        }
    }

    #[test]
    fn shift_one_also_offers_previous_token() {
        let task = build(spec(12, 10, 1)).unwrap();
        let expected = [
            AttentionPattern::Offset(-1),
            AttentionPattern::PreviousToken,
        ];
        assert_eq!(task.solving_patterns(), expected);
        assert_eq!((task.input_vocab(), task.output_vocab()), (10, 11));
    }

    #[test]
    fn rejects_shift_out_of_range() {
        for shift in [0, 12, 13] {
            let error = build(spec(12, 10, shift)).unwrap_err().to_string();
            let expected =
                format!("task.shift = {shift} is out of range: expected 1 <= shift < seq_len (12)");
            assert_eq!(error, expected);
        }
        let error = build(spec(12, 1, 1)).unwrap_err().to_string();
        assert!(error.starts_with("task.vocab_size = 1"), "{error}");
    }
}
