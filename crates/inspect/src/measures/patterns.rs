//! What one head's attention pattern looks like, in numbers: entropy, confidence (Voita et
//! al. 2019), mean attention distance, and how much mass falls on the positions a named
//! pattern (previous token, anti-diagonal, ...) picks out, and how much falls on the exact
//! positions the task says solve each query (`task_target_score`: a detector read from the
//! task generator, as issue 16's measure 8, rather than a fixed-offset guess in the style of
//! TransformerLens's head detector). Plain f32 slices in, so the measures are independent of
//! any backend.

use tasks::AttentionPattern;

/// One head's attention on a probe batch: each sequence's real query rows, in order, each
/// row `seq` keys long (a sequence shorter than `seq` has zeros past its end), with the
/// tokens of each sequence. A probe of one length has `lengths` all `seq`.
#[derive(Debug, Clone, Copy)]
pub struct HeadPattern<'a> {
    /// `[rows * seq]` probabilities, `rows` the sum of `lengths`; each row sums to 1.
    pub probs: &'a [f32],
    /// `[batch * seq]` token ids, each sequence padded to `seq`.
    pub tokens: &'a [u32],
    /// Each sequence's positions, at most `seq` ([`crate::load::probe::LayerProbe::lengths`]).
    pub lengths: &'a [usize],
    /// The longest sequence's length: the rows' width.
    pub seq: usize,
}

impl<'a> HeadPattern<'a> {
    /// Every real query, in order: its sequence `b`, its position `q` and its row.
    fn queries(self) -> impl Iterator<Item = (usize, usize, &'a [f32])> + 'a {
        let positions =
            (self.lengths.iter().enumerate()).flat_map(|(b, &len)| (0..len).map(move |q| (b, q)));
        (positions.zip(self.probs.chunks(self.seq.max(1)))).map(|((b, q), row)| (b, q, row))
    }

    /// Sequence `b`'s own tokens, without its padding.
    fn tokens_of(&self, b: usize) -> &'a [u32] {
        &self.tokens[b * self.seq..b * self.seq + self.lengths[b]]
    }

    /// Mean over all real queries of `f(row, b, q)`.
    fn mean_over_queries(&self, f: impl Fn(&[f32], usize, usize) -> f64) -> f64 {
        let (mut total, mut queries) = (0.0, 0usize);
        for (b, q, row) in self.queries() {
            total += f(row, b, q);
            queries += 1;
        }
        total / queries.max(1) as f64
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
    /// names any (a previous-token pattern says nothing about position 0). Positions are
    /// each sequence's own (an anti-diagonal of a shorter sentence is its own).
    pub fn pattern_score(&self, pattern: AttentionPattern) -> f64 {
        let (mut total, mut queries) = (0.0, 0usize);
        for (b, q, row) in self.queries() {
            let targets = pattern.targets(self.tokens_of(b), q);
            if targets.is_empty() {
                continue;
            }
            total += targets.iter().map(|&k| row[k] as f64).sum::<f64>();
            queries += 1;
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
        head.lengths.len(),
        "task targets: expected one list per probe sequence"
    );
    let (mut total, mut queries) = (0.0, 0usize);
    for (b, q, row) in head.queries() {
        let Some(keys) = targets[b].get(q).filter(|keys| !keys.is_empty()) else {
            continue;
        };
        total += keys.iter().map(|&k| row[k] as f64).sum::<f64>();
        queries += 1;
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
            lengths: &[4],
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
            lengths: &[seq],
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
            lengths: &[seq],
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
            lengths: &[seq, seq],
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

    /// Sequences of several lengths (typed sentences): each measure is the mean over the
    /// real queries of all of them, each scored on its own positions, as if every sequence
    /// were measured alone and their rows pooled; the padding is no query.
    #[test]
    fn sequences_of_several_lengths_are_measured_on_their_own_rows() {
        let long = previous_token_head(); // 4 x 4
        let (seq, short) = (4, 2);
        // The short sequence: uniform over its 2 positions, its keys past 2 zero.
        let mut probs = long.clone();
        for _ in 0..short {
            probs.extend([0.5f32, 0.5, 0.0, 0.0]);
        }
        let tokens = [3, 1, 3, 2, 7, 8, 0, 0];
        let head = HeadPattern {
            probs: &probs,
            tokens: &tokens,
            lengths: &[seq, short],
            seq,
        };
        // Each alone.
        let alone_long = HeadPattern {
            probs: &long,
            tokens: &tokens[..4],
            lengths: &[seq],
            seq,
        };
        let short_probs = [0.5f32, 0.5, 0.5, 0.5];
        let alone_short = HeadPattern {
            probs: &short_probs,
            tokens: &tokens[4..6],
            lengths: &[short],
            seq: short,
        };
        // Pooled over 4 + 2 rows.
        let check = |name: &str, together: f64, long: f64, short: f64| {
            let expected = (4.0 * long + 2.0 * short) / 6.0;
            assert!(
                (together - expected).abs() < 1e-9,
                "{name}: {together} against {expected}"
            );
        };
        check(
            "entropy",
            head.entropy(),
            alone_long.entropy(),
            alone_short.entropy(),
        );
        check(
            "confidence",
            head.confidence(),
            alone_long.confidence(),
            alone_short.confidence(),
        );
        check(
            "mean distance",
            head.mean_distance(),
            alone_long.mean_distance(),
            alone_short.mean_distance(),
        );
        // Entropy by hand: the long rows 0, the short ones ln 2.
        assert!((head.entropy() - 2.0 * 2f64.ln() / 6.0).abs() < 1e-9);
        // The anti-diagonal of the short sentence is its own: query 0 on key 1, 1 on 0.
        let anti = head.pattern_score(AttentionPattern::AntiDiagonal);
        let expected =
            (alone_long.pattern_score(AttentionPattern::AntiDiagonal) * 4.0 + 0.5 * 2.0) / 6.0;
        assert!((anti - expected).abs() < 1e-9, "{anti} against {expected}");
    }

    #[test]
    fn no_targets_give_no_score() {
        let probs = vec![0.5f32; 4];
        let tokens = [0, 1];
        let head = HeadPattern {
            probs: &probs,
            tokens: &tokens,
            lengths: &[2],
            seq: 2,
        };
        assert_eq!(task_target_score(&head, &[vec![vec![], vec![]]]), None);
    }
}
