//! The reverse task: the target at position i is the input at the mirrored position
//! `len - 1 - i`, so a head on the anti-diagonal solves it.

use rand_chacha::ChaCha8Rng;

use super::{AttentionPattern, Example, SequenceSpec, TaskError, TaskImpl};

/// Uniform random sequences whose target is the input reversed.
#[derive(Debug, Clone)]
pub(super) struct ReverseTask {
    seq_len: usize,
    vocab: u32,
}

impl ReverseTask {
    pub(super) fn new(spec: &SequenceSpec) -> Result<Self, TaskError> {
        let vocab = spec.validate()?;
        Ok(Self {
            seq_len: spec.seq_len,
            vocab,
        })
    }
}

impl TaskImpl for ReverseTask {
    fn input_vocab(&self) -> usize {
        self.vocab as usize
    }

    fn output_vocab(&self) -> usize {
        self.vocab as usize
    }

    fn seq_len(&self) -> usize {
        self.seq_len
    }

    fn sample(&self, rng: &mut ChaCha8Rng) -> Example {
        let input = super::random_tokens(rng, self.seq_len, self.vocab);
        let len = input.len();
        let target = super::all_scored((0..len).map(|i| input[len - 1 - i]));
        Example { input, target }
    }

    fn solving_patterns(&self) -> Vec<AttentionPattern> {
        vec![AttentionPattern::AntiDiagonal]
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    fn task(seq_len: usize) -> ReverseTask {
        ReverseTask::new(&SequenceSpec {
            seq_len,
            vocab_size: 7,
        })
        .unwrap()
    }

    #[test]
    fn target_is_the_reversed_input() {
        for seq_len in [1, 2, 5, 12] {
            let task = task(seq_len);
            let mut rng = ChaCha8Rng::seed_from_u64(seq_len as u64);
            for _ in 0..100 {
                let Example { input, target } = task.sample(&mut rng);
                let reversed: Vec<Option<u32>> = input.iter().rev().map(|&t| Some(t)).collect();
                assert_eq!(target, reversed);
            }
        }
    }

    #[test]
    fn anti_diagonal_reads_the_target() {
        let task = task(8);
        for Example { input, target } in task.eval_set(100, 2) {
            for (i, &expected) in target.iter().enumerate() {
                let keys = AttentionPattern::AntiDiagonal.targets(&input, i);
                assert_eq!(keys.len(), 1);
                assert_eq!(Some(input[keys[0]]), expected);
            }
        }
    }

    #[test]
    fn deterministic_per_seed() {
        let task = task(12);
        assert_eq!(task.eval_set(10, 1), task.eval_set(10, 1));
        assert_ne!(task.eval_set(10, 1), task.eval_set(10, 2));
    }

    #[test]
    fn rejects_bad_sizes() {
        let error = ReverseTask::new(&SequenceSpec {
            seq_len: 0,
            vocab_size: 3,
        })
        .unwrap_err();
        assert!(error.to_string().starts_with("task.seq_len = 0"), "{error}");
    }
}
