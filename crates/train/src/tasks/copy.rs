//! The copy task: the target at every position is the input token there, so a head attending
//! to its own position solves it.

use rand_chacha::ChaCha8Rng;

use super::{AttentionPattern, Example, SequenceSpec, TaskError, TaskImpl};

/// Uniform random sequences whose target is the input itself.
#[derive(Debug, Clone)]
pub(super) struct CopyTask {
    seq_len: usize,
    vocab: u32,
}

impl CopyTask {
    pub(super) fn new(spec: &SequenceSpec) -> Result<Self, TaskError> {
        let vocab = spec.validate()?;
        Ok(Self {
            seq_len: spec.seq_len,
            vocab,
        })
    }
}

impl TaskImpl for CopyTask {
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
        let target = super::all_scored(input.iter().copied());
        Example { input, target }
    }

    fn solving_patterns(&self) -> Vec<AttentionPattern> {
        vec![AttentionPattern::SelfToken]
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use rand::SeedableRng;

    use super::*;

    fn task(seq_len: usize, vocab_size: usize) -> CopyTask {
        CopyTask::new(&SequenceSpec {
            seq_len,
            vocab_size,
        })
        .unwrap()
    }

    #[test]
    fn target_equals_input() {
        let task = task(9, 5);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        for _ in 0..200 {
            let Example { input, target } = task.sample(&mut rng);
            for (i, &token) in input.iter().enumerate() {
                assert_eq!(target[i], Some(token));
                let keys = AttentionPattern::SelfToken.targets(&input, i);
                assert_eq!(keys, [i]);
            }
        }
    }

    #[test]
    fn tokens_cover_the_vocabulary() {
        let task = task(12, 10);
        let seen: HashSet<u32> = task
            .eval_set(50, 0)
            .into_iter()
            .flat_map(|e| e.input)
            .collect();
        assert_eq!(seen, (0..10).collect());
        assert_eq!(
            (task.input_vocab(), task.output_vocab(), task.seq_len()),
            (10, 10, 12)
        );
    }

    #[test]
    fn deterministic_per_seed() {
        let task = task(12, 10);
        let mut a = ChaCha8Rng::seed_from_u64(5);
        let mut b = ChaCha8Rng::seed_from_u64(5);
        let mut c = ChaCha8Rng::seed_from_u64(6);
        let first = task.sample(&mut a);
        assert_eq!(first, task.sample(&mut b));
        assert_ne!(first, task.sample(&mut c));
        assert_eq!(task.eval_set(10, 9), task.eval_set(10, 9));
        assert_ne!(task.eval_set(10, 9), task.eval_set(10, 10));
    }

    #[test]
    fn rejects_bad_sizes() {
        let error = CopyTask::new(&SequenceSpec {
            seq_len: 0,
            vocab_size: 10,
        })
        .unwrap_err();
        assert!(error.to_string().starts_with("task.seq_len = 0"), "{error}");
        let error = CopyTask::new(&SequenceSpec {
            seq_len: 4,
            vocab_size: 1,
        })
        .unwrap_err();
        assert!(
            error.to_string().starts_with("task.vocab_size = 1"),
            "{error}"
        );
    }
}
