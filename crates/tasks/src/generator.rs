//! What a generator answers ([`Generator`]), and what a generator whose tokens are words
//! answers besides ([`crate::words::Words`]). A new task implements `Generator` in a file of
//! [`crate::generators`] and gets a variant in [`crate::task`]'s `TaskConfig` and `TaskKind`.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::example::Example;
use crate::pairs::{MinimalPair, PairKind};
use crate::pattern::AttentionPattern;
use crate::words::Words;

/// What every task variant provides; [`crate::Task`] dispatches to it.
pub(crate) trait Generator {
    fn input_vocab(&self) -> usize;
    fn output_vocab(&self) -> usize;
    fn seq_len(&self) -> usize;
    fn sample(&self, rng: &mut ChaCha8Rng) -> Example;
    fn solving_patterns(&self) -> Vec<AttentionPattern>;
    fn attention_targets(&self, input: &[u32]) -> Vec<Vec<usize>>;

    /// The word-only answers, for a task whose tokens are words; `None` for tasks of numbers.
    fn words(&self) -> Option<&dyn Words> {
        None
    }

    /// Whether training applies the output layer at the scored positions only (a masked LM
    /// over a large vocabulary, where most positions are unscored).
    fn scores_masked_positions_only(&self) -> bool {
        false
    }

    fn minimal_pair(&self, _kind: PairKind, _rng: &mut ChaCha8Rng) -> Option<MinimalPair> {
        None
    }

    fn eval_set(&self, size: usize, seed: u64) -> Vec<Example> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        (0..size).map(|_| self.sample(&mut rng)).collect()
    }
}
