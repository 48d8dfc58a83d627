//! The sort task: the target is the input sorted ascending. No single attention pattern solves
//! it, so it lists none.

use rand_chacha::ChaCha8Rng;

use super::{AttentionPattern, Example, SequenceSpec, TaskError, TaskImpl};

/// Uniform random sequences whose target is the input in ascending order.
#[derive(Debug, Clone)]
pub(super) struct SortTask {
    seq_len: usize,
    vocab: u32,
}

impl SortTask {
    pub(super) fn new(spec: &SequenceSpec) -> Result<Self, TaskError> {
        let vocab = spec.validate()?;
        Ok(Self {
            seq_len: spec.seq_len,
            vocab,
        })
    }
}

impl TaskImpl for SortTask {
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
        let mut sorted = input.clone();
        sorted.sort_unstable();
        Example {
            input,
            target: super::all_scored(sorted),
        }
    }

    fn solving_patterns(&self) -> Vec<AttentionPattern> {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    fn task() -> SortTask {
        SortTask::new(&SequenceSpec {
            seq_len: 10,
            vocab_size: 6,
        })
        .unwrap()
    }

    #[test]
    fn target_is_the_sorted_input() {
        let task = task();
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        for _ in 0..200 {
            let Example { input, target } = task.sample(&mut rng);
            let target: Vec<u32> = target.into_iter().map(Option::unwrap).collect();
            assert!(
                target.windows(2).all(|pair| pair[0] <= pair[1]),
                "{target:?}"
            );
            // Same multiset: every token occurs equally often in input and target.
            for token in 0..6 {
                let count = |seq: &[u32]| seq.iter().filter(|&&t| t == token).count();
                assert_eq!(count(&input), count(&target));
            }
        }
    }

    #[test]
    fn has_no_solving_pattern() {
        assert!(task().solving_patterns().is_empty());
    }

    #[test]
    fn deterministic_per_seed() {
        let task = task();
        assert_eq!(task.eval_set(10, 1), task.eval_set(10, 1));
        assert_ne!(task.eval_set(10, 1), task.eval_set(10, 2));
    }

    #[test]
    fn rejects_bad_sizes() {
        let error = SortTask::new(&SequenceSpec {
            seq_len: 0,
            vocab_size: 0,
        })
        .unwrap_err();
        assert!(error.to_string().starts_with("task.seq_len = 0"), "{error}");
    }
}
