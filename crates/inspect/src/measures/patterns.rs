//! What one head's attention pattern looks like, in numbers: entropy, confidence (Voita et
//! al. 2019), mean attention distance, and how much mass falls on the positions a named
//! pattern (previous token, anti-diagonal, ...) picks out, and how much falls on the exact
//! positions the task says solve each query (`task_target_score`: a detector read from the
//! task generator, as issue 16's measure 8, rather than a fixed-offset guess in the style of
//! TransformerLens's head detector). Plain f32 slices in, so the measures are independent of
//! any backend.

use tasks::AttentionPattern;

/// One head's attention on a probe batch: `probs[b][q][k]`, flattened row-major,
/// `[batch, seq, seq]`, with the tokens of each sequence.
#[derive(Debug, Clone, Copy)]
pub struct HeadPattern<'a> {
    /// `[batch * seq * seq]` probabilities; each `seq`-long row sums to 1.
    pub probs: &'a [f32],
    /// `[batch * seq]` token ids.
    pub tokens: &'a [u32],
    /// Sequences in the batch.
    pub batch: usize,
    /// Sequence length.
    pub seq: usize,
}

impl HeadPattern<'_> {
    /// The attention row of query `q` in sequence `b`.
    fn row(&self, b: usize, q: usize) -> &[f32] {
        let start = (b * self.seq + q) * self.seq;
        &self.probs[start..start + self.seq]
    }

    /// Mean over all queries of `f(row, b, q)`.
    fn mean_over_queries(&self, f: impl Fn(&[f32], usize, usize) -> f64) -> f64 {
        let mut total = 0.0;
        for b in 0..self.batch {
            for q in 0..self.seq {
                total += f(self.row(b, q), b, q);
            }
        }
        total / (self.batch * self.seq).max(1) as f64
    }

    /// Mean entropy of the attention rows, in nats: 0 for a head that always looks at one
    /// position, ln(seq) for a uniform one.
    pub fn entropy(&self) -> f64 {
        self.mean_over_queries(|row, _, _| {
            -row.iter()
                .filter(|&&p| p > 0.0)
                .map(|&p| p as f64 * (p as f64).ln())
                .sum::<f64>()
        })
    }

    /// Mean of each row's largest probability (Voita et al. 2019, "confidence").
    pub fn confidence(&self) -> f64 {
        self.mean_over_queries(|row, _, _| row.iter().cloned().fold(0.0f32, f32::max) as f64)
    }

    /// Mean of `|q - k|` weighted by attention.
    pub fn mean_distance(&self) -> f64 {
        self.mean_over_queries(|row, _, q| {
            row.iter()
                .enumerate()
                .map(|(k, &p)| p as f64 * q.abs_diff(k) as f64)
                .sum()
        })
    }

    /// Mean attention mass on the positions `pattern` names, over the queries for which it
    /// names any (a previous-token pattern says nothing about position 0).
    pub fn pattern_score(&self, pattern: AttentionPattern) -> f64 {
        let (mut total, mut queries) = (0.0, 0usize);
        for b in 0..self.batch {
            let tokens = &self.tokens[b * self.seq..(b + 1) * self.seq];
            for q in 0..self.seq {
                let targets = pattern.targets(tokens, q);
                if targets.is_empty() {
                    continue;
                }
                let row = self.row(b, q);
                total += targets.iter().map(|&k| row[k] as f64).sum::<f64>();
                queries += 1;
            }
        }
        if queries == 0 {
            0.0
        } else {
            total / queries as f64
        }
    }
}

/// Mean attention mass on the exact targets of each query, `targets[b][q]` for sequence `b`
/// (what [`tasks::Task::attention_targets`] gives), over the queries that have any;
/// `None` when none has (the file task). 1 for a head that reads exactly what solves the
/// task; a uniform head scores the mean of `|targets| / seq`.
pub fn task_target_score(head: &HeadPattern, targets: &[Vec<Vec<usize>>]) -> Option<f64> {
    assert_eq!(
        targets.len(),
        head.batch,
        "task targets: expected one list per probe sequence"
    );
    let (mut total, mut queries) = (0.0, 0usize);
    for (b, sequence) in targets.iter().enumerate() {
        for (q, keys) in sequence.iter().enumerate().take(head.seq) {
            if keys.is_empty() {
                continue;
            }
            let row = head.row(b, q);
            total += keys.iter().map(|&k| row[k] as f64).sum::<f64>();
            queries += 1;
        }
    }
    (queries > 0).then(|| total / queries as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A head that puts all mass on the previous token (position 0 on itself), seq 4.
    fn previous_token_head() -> Vec<f32> {
        let seq = 4;
        let mut probs = vec![0.0; seq * seq];
        for q in 0..seq {
            probs[q * seq + q.saturating_sub(1)] = 1.0;
        }
        probs
    }

    #[test]
    fn a_previous_token_head_scores_one_on_previous_token_and_is_sharp() {
        let probs = previous_token_head();
        let tokens = [3, 1, 3, 2];
        let head = HeadPattern {
            probs: &probs,
            tokens: &tokens,
            batch: 1,
            seq: 4,
        };
        assert!((head.pattern_score(AttentionPattern::PreviousToken) - 1.0).abs() < 1e-12);
        assert_eq!(head.pattern_score(AttentionPattern::NextToken), 0.0);
        // Query 0 looks at itself: one of four rows is "self".
        assert!((head.pattern_score(AttentionPattern::SelfToken) - 0.25).abs() < 1e-12);
        assert_eq!(head.entropy(), 0.0);
        assert_eq!(head.confidence(), 1.0);
        // Distances 0, 1, 1, 1.
        assert!((head.mean_distance() - 0.75).abs() < 1e-12);
    }

    #[test]
    fn a_uniform_head_has_maximal_entropy() {
        let seq = 5;
        let probs = vec![1.0 / seq as f32; seq * seq];
        let tokens = [0, 1, 2, 3, 4];
        let head = HeadPattern {
            probs: &probs,
            tokens: &tokens,
            batch: 1,
            seq,
        };
        assert!((head.entropy() - (seq as f64).ln()).abs() < 1e-6);
        assert!((head.confidence() - 0.2).abs() < 1e-6);
        // Mean |q - k| over a 5x5 grid: 40 / 25.
        assert!((head.mean_distance() - 1.6).abs() < 1e-6);
        assert!((head.pattern_score(AttentionPattern::AntiDiagonal) - 0.2).abs() < 1e-6);
    }

    /// Neighbors-style targets on seq 4: both sides, one at either end.
    fn neighbor_targets() -> Vec<Vec<usize>> {
        vec![vec![1], vec![0, 2], vec![1, 3], vec![2]]
    }

    #[test]
    fn a_head_on_the_exact_targets_scores_one() {
        let seq = 4;
        let targets = neighbor_targets();
        let mut probs = vec![0.0f32; seq * seq];
        for (q, keys) in targets.iter().enumerate() {
            for &k in keys {
                probs[q * seq + k] = 1.0 / keys.len() as f32;
            }
        }
        let tokens = [0, 1, 2, 3];
        let head = HeadPattern {
            probs: &probs,
            tokens: &tokens,
            batch: 1,
            seq,
        };
        let score = task_target_score(&head, &[targets]).unwrap();
        assert!((score - 1.0).abs() < 1e-6, "{score}");
    }

    #[test]
    fn a_uniform_head_scores_the_target_count_over_seq() {
        let seq = 4;
        let probs = vec![0.25f32; 2 * seq * seq];
        let tokens = [0; 8];
        let head = HeadPattern {
            probs: &probs,
            tokens: &tokens,
            batch: 2,
            seq,
        };
        // One target per query: 1/seq.
        let single: Vec<Vec<usize>> = (0..seq).map(|q| vec![seq - 1 - q]).collect();
        let score = task_target_score(&head, &[single.clone(), single.clone()]).unwrap();
        assert!((score - 0.25).abs() < 1e-6, "{score}");
        // Counts 1, 2, 2, 1 over seq 4 on the first sequence, 1/seq on the second's single
        // scored query: (0.25 + 0.5 + 0.5 + 0.25 + 0.25) / 5.
        let mut sparse = vec![Vec::new(); seq];
        sparse[2] = vec![0];
        let score = task_target_score(&head, &[neighbor_targets(), sparse]).unwrap();
        assert!((score - 0.35).abs() < 1e-6, "{score}");
    }

    #[test]
    fn no_targets_give_no_score() {
        let probs = vec![0.5f32; 4];
        let tokens = [0, 1];
        let head = HeadPattern {
            probs: &probs,
            tokens: &tokens,
            batch: 1,
            seq: 2,
        };
        assert_eq!(task_target_score(&head, &[vec![vec![], vec![]]]), None);
    }
}
