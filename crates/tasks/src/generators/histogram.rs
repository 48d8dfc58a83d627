//! The histogram task: the target at each position is how many positions (itself included)
//! hold the same token, which a head attending to same-token positions can count.

use super::sequence::{SequenceRule, positions_of};
use crate::pattern::AttentionPattern;

/// The target counts each token's occurrences.
#[derive(Debug, Clone)]
pub(crate) struct HistogramRule;

impl SequenceRule for HistogramRule {
    fn target(&self, input: &[u32], vocab: u32) -> Vec<u32> {
        let mut counts = vec![0_u32; vocab as usize];
        for &token in input {
            counts[token as usize] += 1;
        }
        input.iter().map(|&token| counts[token as usize]).collect()
    }

    fn solving_patterns(&self) -> Vec<AttentionPattern> {
        vec![AttentionPattern::SameToken]
    }

    fn attention_targets(&self, input: &[u32]) -> Vec<Vec<usize>> {
        input
            .iter()
            .map(|&token| positions_of(input, token))
            .collect()
    }

    /// Counts run from 1 to seq_len; class 0 is never a target but keeps ids equal to counts.
    fn output_vocab(&self, seq_len: usize, _vocab: u32) -> usize {
        seq_len + 1
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    use crate::{AttentionPattern, Example, SequenceSpec, Task, TaskConfig};

    fn task(seq_len: usize, vocab_size: usize) -> Task {
        let spec = SequenceSpec {
            seq_len,
            vocab_size,
        };
        TaskConfig::Histogram(spec).build(Path::new(".")).unwrap()
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
}
