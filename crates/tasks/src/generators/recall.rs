//! The associative-recall task: `n_pairs` key/value pairs followed by `n_queries` keys; the
//! target at each query is the value paired with that key.

use rand::Rng;
use rand::seq::index;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::error::TaskError;
use crate::example::Example;
use crate::generator::Generator;
use crate::pairs::{MAX_TRIES, MinimalPair, PairKind};
use crate::pattern::AttentionPattern;

/// Size of the associative-recall task. Sequences are `k1 v1 ... kn vn q1 ... qm`, so
/// `seq_len = 2 * n_pairs + n_queries`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RecallSpec {
    /// Key/value pairs per sequence.
    pub n_pairs: usize,
    /// Queries after the pairs; each is one of the sequence's keys.
    pub n_queries: usize,
    /// Distinct key tokens, ids `0..n_keys`; at least `n_pairs` so keys can be distinct.
    pub n_keys: usize,
    /// Distinct value tokens, ids `n_keys..n_keys + n_values`; targets are `0..n_values`.
    pub n_values: usize,
}

impl Default for RecallSpec {
    fn default() -> Self {
        Self {
            n_pairs: 4,
            n_queries: 4,
            n_keys: 8,
            n_values: 8,
        }
    }
}

/// Random key/value pairs with distinct keys, followed by queries of those keys.
#[derive(Debug, Clone)]
pub(crate) struct RecallTask {
    n_pairs: usize,
    n_queries: usize,
    n_keys: u32,
    n_values: u32,
}

impl RecallTask {
    pub(crate) fn new(spec: &RecallSpec) -> Result<Self, TaskError> {
        let RecallSpec {
            n_pairs,
            n_queries,
            n_keys,
            n_values,
        } = *spec;
        crate::error::check_size("n_pairs", n_pairs, 1)?;
        crate::error::check_size("n_queries", n_queries, 1)?;
        if n_keys < n_pairs {
            let expected = format!("n_keys >= n_pairs ({n_pairs}) so every pair has its own key");
            return Err(crate::error::out_of_range("n_keys", n_keys, expected));
        }
        crate::error::check_size("n_keys", n_keys, 1)?;
        crate::error::check_size("n_values", n_values, 1)?;
        Ok(Self {
            n_pairs,
            n_queries,
            n_keys: crate::error::to_id(n_keys),
            n_values: crate::error::to_id(n_values),
        })
    }
}

impl RecallTask {
    /// A query's value changed to another value: every query of that key changes answer.
    fn value_pair(&self, rng: &mut ChaCha8Rng) -> Option<MinimalPair> {
        if self.n_values < 2 {
            return None; // no other value to change to
        }
        let clean = self.sample(rng);
        let pairs = 2 * self.n_pairs;
        let position = pairs + rng.random_range(0..self.n_queries);
        let changed = *self.attention_targets(&clean.input)[position].first()?;
        let mut corrupted = clean.clone();
        let old = clean.input[changed] - self.n_keys;
        let new = (old + rng.random_range(1..self.n_values)) % self.n_values;
        corrupted.input[changed] = self.n_keys + new;
        for query in pairs..corrupted.input.len() {
            if corrupted.input[query] == clean.input[changed - 1] {
                corrupted.target[query] = Some(new);
            }
        }
        MinimalPair::read(clean, corrupted, position, vec![changed])
    }

    /// The queried key swapped with another pair's key (one with another value): the query
    /// now finds the other pair's value, while every value, and the query itself, keeps its
    /// token and place. Queries of either key change answer.
    fn key_swap_pair(&self, rng: &mut ChaCha8Rng) -> Option<MinimalPair> {
        if self.n_pairs < 2 || self.n_values < 2 {
            return None; // no other pair, or no other value, to find instead
        }
        let pairs = 2 * self.n_pairs;
        for _ in 0..MAX_TRIES {
            let clean = self.sample(rng);
            let position = pairs + rng.random_range(0..self.n_queries);
            let queried = *self.attention_targets(&clean.input)[position].first()? - 1;
            let other = 2 * rng.random_range(0..self.n_pairs);
            if other == queried || clean.input[other + 1] == clean.input[queried + 1] {
                continue;
            }
            let mut corrupted = clean.clone();
            corrupted.input.swap(queried, other);
            for query in pairs..corrupted.input.len() {
                let key = corrupted.input[query];
                let value = (0..pairs).step_by(2).find(|&k| corrupted.input[k] == key);
                corrupted.target[query] = value.map(|k| corrupted.input[k + 1] - self.n_keys);
            }
            let changed = vec![queried.min(other), queried.max(other)];
            if let Some(pair) = MinimalPair::read(clean, corrupted, position, changed) {
                return Some(pair);
            }
        }
        None
    }
}

impl Generator for RecallTask {
    fn input_vocab(&self) -> usize {
        (self.n_keys + self.n_values) as usize
    }

    fn output_vocab(&self) -> usize {
        self.n_values as usize
    }

    fn seq_len(&self) -> usize {
        2 * self.n_pairs + self.n_queries
    }

    fn sample(&self, rng: &mut ChaCha8Rng) -> Example {
        let keys: Vec<u32> = index::sample(rng, self.n_keys as usize, self.n_pairs)
            .into_iter()
            .map(crate::error::to_id)
            .collect();
        let values: Vec<u32> = (0..self.n_pairs)
            .map(|_| rng.random_range(0..self.n_values))
            .collect();
        let mut input = Vec::with_capacity(self.seq_len());
        let mut target = Vec::with_capacity(self.seq_len());
        for (&key, &value) in keys.iter().zip(&values) {
            input.extend([key, self.n_keys + value]);
            target.extend([None, None]);
        }
        for _ in 0..self.n_queries {
            let pair = rng.random_range(0..self.n_pairs);
            input.push(keys[pair]);
            target.push(Some(values[pair]));
        }
        Example { input, target }
    }

    fn solving_patterns(&self) -> Vec<AttentionPattern> {
        vec![
            AttentionPattern::RecallValue,
            AttentionPattern::PreviousToken,
        ]
    }

    fn minimal_pair(&self, kind: PairKind, rng: &mut ChaCha8Rng) -> Option<MinimalPair> {
        match kind {
            PairKind::Answer => self.value_pair(rng),
            PairKind::Route => self.key_swap_pair(rng),
        }
    }

    /// A query's value: the position after the pair whose key it repeats. Pairs, and any
    /// query whose key is missing from the pairs (not drawn here), have none.
    fn attention_targets(&self, input: &[u32]) -> Vec<Vec<usize>> {
        let pairs = (2 * self.n_pairs).min(input.len());
        let value_of = |token: u32| {
            (0..pairs)
                .step_by(2)
                .find(|&k| input[k] == token && k + 1 < pairs)
                .map(|k| k + 1)
        };
        (0..input.len())
            .map(|i| {
                if i < pairs {
                    Vec::new()
                } else {
                    value_of(input[i]).into_iter().collect()
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{HashMap, HashSet};

    use rand::SeedableRng;

    use super::*;

    fn task(n_pairs: usize, n_queries: usize, n_keys: usize, n_values: usize) -> RecallTask {
        RecallTask::new(&RecallSpec {
            n_pairs,
            n_queries,
            n_keys,
            n_values,
        })
        .unwrap()
    }

    #[test]
    fn queries_get_their_paired_values() {
        for (n_pairs, n_queries, n_keys, n_values) in [(4, 4, 8, 8), (1, 3, 1, 2), (5, 2, 5, 3)] {
            let task = task(n_pairs, n_queries, n_keys, n_values);
            let mut rng = ChaCha8Rng::seed_from_u64(n_pairs as u64);
            for _ in 0..100 {
                let Example { input, target } = task.sample(&mut rng);
                assert_eq!(input.len(), 2 * n_pairs + n_queries);
                let (pairs, queries) = input.split_at(2 * n_pairs);
                let lookup: HashMap<u32, u32> = pairs.chunks(2).map(|kv| (kv[0], kv[1])).collect();
                assert_eq!(lookup.len(), n_pairs, "keys must be distinct: {pairs:?}");
                for (&key, &value) in &lookup {
                    assert!((key as usize) < n_keys);
                    assert!((n_keys..n_keys + n_values).contains(&(value as usize)));
                }
                assert!(target[..2 * n_pairs].iter().all(Option::is_none));
                for (query, expected) in queries.iter().zip(&target[2 * n_pairs..]) {
                    assert_eq!(*expected, Some(lookup[query] - n_keys as u32));
                }
            }
        }
    }

    #[test]
    fn recall_value_reads_the_target() {
        let task = task(4, 6, 5, 8);
        for Example { input, target } in task.eval_set(100, 5) {
            for (i, expected) in target.into_iter().enumerate() {
                let keys = AttentionPattern::RecallValue.targets(&input, i);
                match expected {
                    None => assert!(keys.is_empty(), "non-query {i} of {input:?} got {keys:?}"),
                    Some(value) => {
                        assert_eq!(keys.len(), 1, "query {i} of {input:?}");
                        assert_eq!(input[keys[0]] - 5, value);
                    }
                }
            }
        }
    }

    #[test]
    fn keys_and_queries_vary() {
        let task = task(2, 2, 6, 4);
        let examples = task.eval_set(200, 0);
        let keys: HashSet<u32> = examples
            .iter()
            .flat_map(|e| [e.input[0], e.input[2]])
            .collect();
        assert_eq!(keys, (0..6).collect());
        let first_query_pairs: HashSet<bool> =
            examples.iter().map(|e| e.input[4] == e.input[0]).collect();
        assert_eq!(first_query_pairs.len(), 2, "queries should hit both pairs");
        assert_eq!(
            (task.input_vocab(), task.output_vocab(), task.seq_len()),
            (10, 4, 6)
        );
    }

    #[test]
    fn rejects_bad_sizes() {
        let error = |spec: RecallSpec| RecallTask::new(&spec).unwrap_err().to_string();
        let base = RecallSpec::default();
        assert_eq!(
            error(RecallSpec {
                n_keys: 3,
                ..base.clone()
            }),
            "task.n_keys = 3 is out of range: expected n_keys >= n_pairs (4) so every pair has \
             its own key"
        );
        assert!(
            error(RecallSpec {
                n_pairs: 0,
                ..base.clone()
            })
            .starts_with("task.n_pairs = 0")
        );
        let n_queries = error(RecallSpec {
            n_queries: 0,
            ..base.clone()
        });
        assert!(n_queries.starts_with("task.n_queries = 0"));
        assert!(
            error(RecallSpec {
                n_values: 0,
                ..base
            })
            .starts_with("task.n_values = 0")
        );
    }
}
