//! The neighbors task: the target at position i is the sum of the tokens on either side of it,
//! modulo the vocabulary size. It needs both neighbours, so one attention head is not enough.

use rand_chacha::ChaCha8Rng;

use super::{AttentionPattern, Example, SequenceSpec, TaskError, TaskImpl};

/// Uniform random sequences whose target is `(left + right) % vocab_size`, with 0 standing in
/// for the missing neighbour at either end.
#[derive(Debug, Clone)]
pub(super) struct NeighborsTask {
    seq_len: usize,
    vocab: u32,
}

impl NeighborsTask {
    pub(super) fn new(spec: &SequenceSpec) -> Result<Self, TaskError> {
        let vocab = spec.validate()?;
        Ok(Self {
            seq_len: spec.seq_len,
            vocab,
        })
    }
}

impl TaskImpl for NeighborsTask {
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
        let token_at = |i: Option<usize>| i.and_then(|i| input.get(i)).copied().unwrap_or(0);
        let target = super::all_scored((0..input.len()).map(|i| {
            let (left, right) = (token_at(i.checked_sub(1)), token_at(Some(i + 1)));
            // Both are below vocab <= MAX_SIZE, so the sum cannot overflow.
            (left + right) % self.vocab
        }));
        Example { input, target }
    }

    fn solving_patterns(&self) -> Vec<AttentionPattern> {
        vec![AttentionPattern::PreviousToken, AttentionPattern::NextToken]
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    fn task(seq_len: usize, vocab_size: usize) -> NeighborsTask {
        NeighborsTask::new(&SequenceSpec {
            seq_len,
            vocab_size,
        })
        .unwrap()
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
    fn deterministic_per_seed() {
        let task = task(12, 10);
        assert_eq!(task.eval_set(10, 1), task.eval_set(10, 1));
        assert_ne!(task.eval_set(10, 1), task.eval_set(10, 2));
    }

    #[test]
    fn rejects_bad_sizes() {
        let error = NeighborsTask::new(&SequenceSpec {
            seq_len: 5,
            vocab_size: 0,
        })
        .unwrap_err();
        assert!(
            error.to_string().starts_with("task.vocab_size = 0"),
            "{error}"
        );
    }
}
