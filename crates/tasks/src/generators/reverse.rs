//! The reverse task: the target at position i is the input at the mirrored position
//! `len - 1 - i`, so a head on the anti-diagonal solves it.

use super::sequence::SequenceRule;
use crate::pattern::AttentionPattern;

/// The target is the input reversed.
#[derive(Debug, Clone)]
pub(crate) struct ReverseRule;

impl SequenceRule for ReverseRule {
    fn target(&self, input: &[u32], _vocab: u32) -> Vec<u32> {
        input.iter().rev().copied().collect()
    }

    fn solving_patterns(&self) -> Vec<AttentionPattern> {
        vec![AttentionPattern::AntiDiagonal]
    }

    fn attention_targets(&self, input: &[u32]) -> Vec<Vec<usize>> {
        let n = input.len();
        (0..n).map(|i| vec![n - 1 - i]).collect()
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    use crate::{AttentionPattern, Example, SequenceSpec, Task, TaskConfig};

    fn task(seq_len: usize) -> Task {
        let spec = SequenceSpec {
            seq_len,
            vocab_size: 7,
        };
        TaskConfig::Reverse(spec).build(Path::new(".")).unwrap()
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
}
