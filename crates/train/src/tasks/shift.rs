//! The shift task: the target at position i is the input `shift` positions earlier; the first
//! `shift` positions get a dedicated blank class.

use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::{AttentionPattern, Example, SequenceSpec, TaskError, TaskImpl};

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

/// Uniform random sequences whose target is the input delayed by `shift`.
#[derive(Debug, Clone)]
pub(super) struct ShiftTask {
    seq_len: usize,
    vocab: u32,
    shift: usize,
}

impl ShiftTask {
    pub(super) fn new(spec: &ShiftSpec) -> Result<Self, TaskError> {
        let ShiftSpec {
            seq_len,
            vocab_size,
            shift,
        } = *spec;
        let vocab = SequenceSpec {
            seq_len,
            vocab_size,
        }
        .validate()?;
        if shift == 0 || shift >= seq_len {
            let expected = format!("1 <= shift < seq_len ({seq_len})");
            return Err(super::out_of_range("shift", shift, expected));
        }
        Ok(Self {
            seq_len,
            vocab,
            shift,
        })
    }

    /// The class for positions with nothing `shift` positions before them.
    fn blank(&self) -> u32 {
        self.vocab
    }
}

impl TaskImpl for ShiftTask {
    fn input_vocab(&self) -> usize {
        self.vocab as usize
    }

    fn output_vocab(&self) -> usize {
        self.vocab as usize + 1
    }

    fn seq_len(&self) -> usize {
        self.seq_len
    }

    fn sample(&self, rng: &mut ChaCha8Rng) -> Example {
        let input = super::random_tokens(rng, self.seq_len, self.vocab);
        let target = (0..self.seq_len)
            .map(|i| {
                i.checked_sub(self.shift)
                    .map_or(self.blank(), |source| input[source])
            })
            .map(Some)
            .collect();
        Example { input, target }
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
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

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
            let task = ShiftTask::new(&spec(6, 4, shift)).unwrap();
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
        let task = ShiftTask::new(&spec(10, 5, 3)).unwrap();
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
        let task = ShiftTask::new(&spec(12, 10, 1)).unwrap();
        let expected = [
            AttentionPattern::Offset(-1),
            AttentionPattern::PreviousToken,
        ];
        assert_eq!(task.solving_patterns(), expected);
        assert_eq!((task.input_vocab(), task.output_vocab()), (10, 11));
    }

    #[test]
    fn deterministic_per_seed() {
        let task = ShiftTask::new(&ShiftSpec::default()).unwrap();
        assert_eq!(task.eval_set(10, 1), task.eval_set(10, 1));
        assert_ne!(task.eval_set(10, 1), task.eval_set(10, 2));
    }

    #[test]
    fn rejects_shift_out_of_range() {
        for shift in [0, 12, 13] {
            let error = ShiftTask::new(&spec(12, 10, shift))
                .unwrap_err()
                .to_string();
            let expected =
                format!("task.shift = {shift} is out of range: expected 1 <= shift < seq_len (12)");
            assert_eq!(error, expected);
        }
        let error = ShiftTask::new(&spec(12, 1, 1)).unwrap_err().to_string();
        assert!(error.starts_with("task.vocab_size = 1"), "{error}");
    }
}
