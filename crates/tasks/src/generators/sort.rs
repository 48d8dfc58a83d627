//! The sort task: the target is the input sorted ascending. No single attention pattern solves
//! it, so it lists none.

use super::sequence::{SequenceRule, positions_of};
use crate::pattern::AttentionPattern;

/// The target is the input in ascending order.
#[derive(Debug, Clone)]
pub(crate) struct SortRule;

impl SequenceRule for SortRule {
    fn target(&self, input: &[u32], _vocab: u32) -> Vec<u32> {
        let mut sorted = input.to_vec();
        sorted.sort_unstable();
        sorted
    }

    fn solving_patterns(&self) -> Vec<AttentionPattern> {
        Vec::new()
    }

    /// Every position holding the token that belongs at `i` once sorted: reading any of
    /// them gives the target, though no fixed pattern finds them.
    fn attention_targets(&self, input: &[u32]) -> Vec<Vec<usize>> {
        self.target(input, 0)
            .into_iter()
            .map(|token| positions_of(input, token))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    use crate::{Example, SequenceSpec, Task, TaskConfig};

    fn task() -> Task {
        let spec = SequenceSpec {
            seq_len: 10,
            vocab_size: 6,
        };
        TaskConfig::Sort(spec).build(Path::new(".")).unwrap()
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
}
