//! The histogram task: the target at each position is how many positions (itself included)
//! hold the same token, which a head attending to same-token positions can count.

use rand_chacha::ChaCha8Rng;

use super::{AttentionPattern, Example, SequenceSpec, TaskError, TaskImpl};

/// Uniform random sequences whose target counts each token's occurrences.
#[derive(Debug, Clone)]
pub(super) struct HistogramTask {
    seq_len: usize,
    vocab: u32,
}

impl HistogramTask {
    pub(super) fn new(spec: &SequenceSpec) -> Result<Self, TaskError> {
        let vocab = spec.validate()?;
        Ok(Self {
            seq_len: spec.seq_len,
            vocab,
        })
    }
}

impl TaskImpl for HistogramTask {
    fn input_vocab(&self) -> usize {
        self.vocab as usize
    }

    /// Counts run from 1 to seq_len; class 0 is never a target but keeps ids equal to counts.
    fn output_vocab(&self) -> usize {
        self.seq_len + 1
    }

    fn seq_len(&self) -> usize {
        self.seq_len
    }

    fn sample(&self, rng: &mut ChaCha8Rng) -> Example {
        let input = super::random_tokens(rng, self.seq_len, self.vocab);
        let mut counts = vec![0_u32; self.vocab as usize];
        for &token in &input {
            counts[token as usize] += 1;
        }
        let target = super::all_scored(input.iter().map(|&token| counts[token as usize]));
        Example { input, target }
    }

    fn solving_patterns(&self) -> Vec<AttentionPattern> {
        vec![AttentionPattern::SameToken]
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    fn task(seq_len: usize, vocab_size: usize) -> HistogramTask {
        HistogramTask::new(&SequenceSpec {
            seq_len,
            vocab_size,
        })
        .unwrap()
    }

    #[test]
    fn target_counts_equal_tokens() {
        let task = task(10, 4);
        let mut rng = ChaCha8Rng::seed_from_u64(8);
        for _ in 0..200 {
            let Example { input, target } = task.sample(&mut rng);
            for (i, &token) in input.iter().enumerate() {
                let count = input.iter().filter(|&&other| other == token).count();
                assert_eq!(target[i], Some(count as u32));
                assert!((count) < task.output_vocab());
            }
        }
    }

    #[test]
    fn same_token_reads_the_target() {
        let task = task(12, 5);
        for Example { input, target } in task.eval_set(50, 1) {
            for (i, expected) in target.into_iter().enumerate() {
                let others = AttentionPattern::SameToken.targets(&input, i).len();
                assert_eq!(expected, Some(others as u32 + 1));
            }
        }
    }

    #[test]
    fn output_vocab_covers_a_constant_sequence() {
        let task = task(5, 2);
        assert_eq!(task.output_vocab(), 6);
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let constant = (0..1000)
            .map(|_| task.sample(&mut rng))
            .find(|e| e.target[0] == Some(5));
        assert!(
            constant.is_some(),
            "a 5-token binary sequence is constant 1 time in 16"
        );
    }

    #[test]
    fn deterministic_per_seed() {
        let task = task(12, 10);
        assert_eq!(task.eval_set(10, 1), task.eval_set(10, 1));
        assert_ne!(task.eval_set(10, 1), task.eval_set(10, 2));
    }

    #[test]
    fn rejects_bad_sizes() {
        let error = HistogramTask::new(&SequenceSpec {
            seq_len: 0,
            vocab_size: 3,
        })
        .unwrap_err();
        assert!(error.to_string().starts_with("task.seq_len = 0"), "{error}");
    }
}
