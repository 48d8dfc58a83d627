//! The copy task: the target at every position is the input token there, so a head attending
//! to its own position solves it.

use super::sequence::SequenceRule;
use crate::pattern::AttentionPattern;

/// The target is the input itself.
#[derive(Debug, Clone)]
pub(crate) struct CopyRule;

impl SequenceRule for CopyRule {
    fn target(&self, input: &[u32], _vocab: u32) -> Vec<u32> {
        input.to_vec()
    }

    fn solving_patterns(&self) -> Vec<AttentionPattern> {
        vec![AttentionPattern::SelfToken]
    }

    fn attention_targets(&self, input: &[u32]) -> Vec<Vec<usize>> {
        (0..input.len()).map(|i| vec![i]).collect()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::path::Path;

    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    use crate::{AttentionPattern, Example, SequenceSpec, Task, TaskConfig};

    fn task(seq_len: usize, vocab_size: usize) -> Task {
        let spec = SequenceSpec {
            seq_len,
            vocab_size,
        };
        TaskConfig::Copy(spec).build(Path::new(".")).unwrap()
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
}
