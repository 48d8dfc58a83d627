//! Intervals over sentences for `relations.json`. One model gives one score per head and
//! relation; what is left uncertain is which sentences were drawn. So the scored sentences
//! are resampled with replacement ([`RESAMPLES`] times, a percentile bootstrap; Efron and
//! Tibshirani 1993, ch. 13) and every fraction is recomputed on each resample: a relation's
//! arcs, each head's credited hits, the arcs at the baseline's offset. A sentence is the
//! unit resampled, not an arc, since the arcs of one sentence share its words and so are not
//! independent.
//!
//! What is reported per relation ([`RelationIntervals`]): the 95% interval of the best fixed
//! offset's score (the offset chosen on all sentences, held fixed), and per direction the
//! interval of the best head's score (the head chosen on all sentences, held fixed: the
//! interval says how well that head's score is measured, not how likely another head would
//! win), of its margin over the offset, and how many heads beat the offset on all sentences
//! and in at least 97.5% of the resamples (their margin's 2.5th percentile above zero).
//!
//! The resamples are drawn from a fixed seed ([`BOOTSTRAP_SEED`]) with SplitMix64's
//! finaliser ([`tasks::batch::mix_seed`]), so a report is reproducible.

use serde::{Deserialize, Serialize};
use tasks::batch::mix_seed;

/// Resamples per interval: enough for the 2.5th and 97.5th percentiles to settle to about a
/// point on a few hundred sentences.
pub const RESAMPLES: usize = 1000;

/// The seed of the resamples' sentence draws.
pub const BOOTSTRAP_SEED: u64 = 0x5eed_b007;

/// A 95% interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    /// The 2.5th percentile.
    pub low: f64,
    /// The 97.5th percentile.
    pub high: f64,
}

/// One direction's intervals (dependent to head, or head to dependent).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DirectionIntervals {
    /// The best head's score (the head of `best`, fixed).
    pub best_head: Interval,
    /// The best head's score minus the baseline's, on the same resample.
    pub margin: Interval,
    /// Heads whose score on all sentences is above the baseline's.
    pub heads_above_baseline: usize,
    /// Heads whose margin over the baseline is above zero in at least 97.5% of the
    /// resamples.
    pub heads_clearly_above_baseline: usize,
}

/// A relation's intervals over sentences, in `relations.json` (`intervals`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RelationIntervals {
    /// Resamples in which the relation has arcs (the intervals are over these).
    pub resamples: usize,
    /// The baseline's score (its offset fixed).
    pub baseline: Interval,
    /// Dependent to head.
    pub dependent_to_head: DirectionIntervals,
    /// Head to dependent.
    pub head_to_dependent: DirectionIntervals,
}

/// One sentence's share of every relation in it: what a resample adds up.
#[derive(Debug, Clone, PartialEq)]
pub struct SentenceCredits {
    /// The labels met in the sentence (indices into the relations' labels), each once.
    labels: Vec<usize>,
    /// Arcs per label, as `labels`.
    arcs: Vec<usize>,
    /// Per label, the offset `head - dependent` of each of its arcs.
    offsets: Vec<Vec<i64>>,
    /// Credited hits, dependent to head, `[slot * columns + column]` (`slot`: the label's
    /// place in `labels`; `column`: `layer * n_heads + head`).
    dependent_to_head: Vec<f64>,
    /// Likewise, head to dependent.
    head_to_dependent: Vec<f64>,
    /// Heads of the model, over every layer.
    columns: usize,
}

impl SentenceCredits {
    /// No hits yet, for a sentence whose arcs have these labels and offsets (`(labels,
    /// offset)` per arc), and a model of `columns` heads.
    pub fn new<'a>(arcs: impl Iterator<Item = (&'a [usize], i64)>, columns: usize) -> Self {
        let mut credits = SentenceCredits {
            labels: vec![],
            arcs: vec![],
            offsets: vec![],
            dependent_to_head: vec![],
            head_to_dependent: vec![],
            columns,
        };
        for (labels, offset) in arcs {
            for &label in labels {
                let slot = match credits.slot(label) {
                    Some(slot) => slot,
                    None => {
                        credits.labels.push(label);
                        credits.arcs.push(0);
                        credits.offsets.push(vec![]);
                        credits.labels.len() - 1
                    }
                };
                credits.arcs[slot] += 1;
                credits.offsets[slot].push(offset);
            }
        }
        let cells = credits.labels.len() * columns;
        credits.dependent_to_head = vec![0.0; cells];
        credits.head_to_dependent = vec![0.0; cells];
        credits
    }

    /// Where `label` sits in this sentence's lists; `None` when it has no such arc.
    fn slot(&self, label: usize) -> Option<usize> {
        self.labels.iter().position(|&l| l == label)
    }

    /// Adds one arc's credits under `label` for head `column`.
    ///
    /// # Panics
    /// If the sentence has no arc of `label` (a caller's bug).
    pub fn add(&mut self, label: usize, column: usize, to_head: f64, to_dependent: f64) {
        let slot = self.slot(label).expect("a label of the sentence's arcs");
        self.dependent_to_head[slot * self.columns + column] += to_head;
        self.head_to_dependent[slot * self.columns + column] += to_dependent;
    }

    /// Each label with its arcs, offsets and credits (`columns` values per direction).
    pub fn per_label(&self) -> impl Iterator<Item = (usize, usize, &[i64], &[f64], &[f64])> {
        let c = self.columns;
        self.labels.iter().enumerate().map(move |(slot, &label)| {
            let cells = slot * c..(slot + 1) * c;
            (
                label,
                self.arcs[slot],
                self.offsets[slot].as_slice(),
                &self.dependent_to_head[cells.clone()],
                &self.head_to_dependent[cells],
            )
        })
    }
}

/// The intervals of relation `label` over `sentences`, with the baseline's `offset` and the
/// best head in each direction (`best`: dependent to head, head to dependent) as chosen on
/// all of them; `None` when fewer than half the resamples have an arc of it (too rare to
/// say).
pub fn relation_intervals(
    sentences: &[SentenceCredits],
    label: usize,
    offset: i64,
    best: [usize; 2],
) -> Option<RelationIntervals> {
    let n = sentences.len();
    let columns = sentences.first()?.columns;
    // Per sentence, its values for this relation: arcs, arcs at the offset, credits.
    let rows: Vec<Option<Row>> = sentences
        .iter()
        .map(|sentence| {
            let slot = sentence.slot(label)?;
            let at_offset = sentence.offsets[slot]
                .iter()
                .filter(|&&o| o == offset)
                .count();
            let cells = slot * columns..(slot + 1) * columns;
            Some(Row {
                arcs: sentence.arcs[slot] as f64,
                at_offset: at_offset as f64,
                to_head: &sentence.dependent_to_head[cells.clone()],
                to_dependent: &sentence.head_to_dependent[cells],
            })
        })
        .collect();
    // The point estimates, for which heads beat the baseline on all sentences.
    let point = totals(&rows, &vec![1; n], columns);
    let Resampled {
        mut baseline,
        mut best_scores,
        mut margins,
        not_above,
    } = resample(&rows, columns, best);
    let valid = baseline.len();
    if valid * 2 < RESAMPLES || point.arcs == 0.0 {
        return None;
    }
    let point_base = point.at_offset / point.arcs;
    let mut direction = |d: usize| DirectionIntervals {
        best_head: interval(&mut best_scores[d]),
        margin: interval(&mut margins[d]),
        heads_above_baseline: point.credits[d]
            .iter()
            .filter(|&&credit| credit / point.arcs > point_base)
            .count(),
        // Beaten the baseline in at least 97.5% of the resamples.
        heads_clearly_above_baseline: not_above[d]
            .iter()
            .filter(|&&misses| (misses as f64) < 0.025 * valid as f64)
            .count(),
    };
    let (to_head, to_dependent) = (direction(0), direction(1));
    Some(RelationIntervals {
        resamples: valid,
        baseline: interval(&mut baseline),
        dependent_to_head: to_head,
        head_to_dependent: to_dependent,
    })
}

/// What [`RESAMPLES`] resamples of the sentences give, over those with an arc of the
/// relation.
struct Resampled {
    /// The baseline's score on each.
    baseline: Vec<f64>,
    /// Per direction, the best head's score on each.
    best_scores: [Vec<f64>; 2],
    /// Per direction, the best head's score minus the baseline's on each.
    margins: [Vec<f64>; 2],
    /// Per direction and head, resamples where it does not beat the baseline.
    not_above: [Vec<usize>; 2],
}

/// Resamples the sentences of `rows` with replacement [`RESAMPLES`] times (draws from
/// [`BOOTSTRAP_SEED`]), and measures each resample.
fn resample(rows: &[Option<Row>], columns: usize, best: [usize; 2]) -> Resampled {
    let n = rows.len();
    let mut weights = vec![0u32; n];
    let mut baseline = Vec::with_capacity(RESAMPLES);
    let mut best_scores = [Vec::with_capacity(RESAMPLES), Vec::with_capacity(RESAMPLES)];
    let mut margins = [Vec::with_capacity(RESAMPLES), Vec::with_capacity(RESAMPLES)];
    // Per direction and head, resamples where it does not beat the baseline.
    let mut not_above = [vec![0usize; columns], vec![0usize; columns]];
    for resample in 0..RESAMPLES {
        weights.fill(0);
        for draw in 0..n {
            let counter = (resample * n + draw) as u64;
            weights[(mix_seed(BOOTSTRAP_SEED, counter) % n as u64) as usize] += 1;
        }
        let sums = totals(rows, &weights, columns);
        if sums.arcs == 0.0 {
            continue;
        }
        let base = sums.at_offset / sums.arcs;
        baseline.push(base);
        for (direction, credits) in sums.credits.iter().enumerate() {
            let score = credits[best[direction]] / sums.arcs;
            best_scores[direction].push(score);
            margins[direction].push(score - base);
            for (column, credit) in credits.iter().enumerate() {
                if credit / sums.arcs <= base {
                    not_above[direction][column] += 1;
                }
            }
        }
    }
    Resampled {
        baseline,
        best_scores,
        margins,
        not_above,
    }
}

/// One sentence's values for one relation.
struct Row<'a> {
    /// Its arcs of the relation.
    arcs: f64,
    /// Those at the baseline's offset.
    at_offset: f64,
    /// Credited hits per head, dependent to head.
    to_head: &'a [f64],
    /// Likewise, head to dependent.
    to_dependent: &'a [f64],
}

/// One relation's sums over a resample.
struct Totals {
    arcs: f64,
    at_offset: f64,
    /// Per direction, per head.
    credits: [Vec<f64>; 2],
}

/// Sums `rows` (`None`: a sentence with no arc of the relation), each taken `weights[i]`
/// times.
fn totals(rows: &[Option<Row>], weights: &[u32], columns: usize) -> Totals {
    let mut sums = Totals {
        arcs: 0.0,
        at_offset: 0.0,
        credits: [vec![0.0; columns], vec![0.0; columns]],
    };
    for (row, &weight) in rows.iter().zip(weights) {
        let (Some(row), true) = (row, weight > 0) else {
            continue;
        };
        let w = weight as f64;
        sums.arcs += w * row.arcs;
        sums.at_offset += w * row.at_offset;
        for (sum, credit) in sums.credits[0].iter_mut().zip(row.to_head) {
            *sum += w * credit;
        }
        for (sum, credit) in sums.credits[1].iter_mut().zip(row.to_dependent) {
            *sum += w * credit;
        }
    }
    sums
}

/// The 2.5th and 97.5th percentiles of `values` (linear between order statistics, as
/// numpy's default); `values` is sorted in place.
fn interval(values: &mut [f64]) -> Interval {
    values.sort_by(f64::total_cmp);
    Interval {
        low: percentile(values, 0.025),
        high: percentile(values, 0.975),
    }
}

/// The `q` quantile of sorted `values`, interpolated linearly.
fn percentile(sorted: &[f64], q: f64) -> f64 {
    let position = q * (sorted.len() - 1) as f64;
    let (below, above) = (position.floor() as usize, position.ceil() as usize);
    let fraction = position - below as f64;
    sorted[below] + (sorted[above] - sorted[below]) * fraction
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sentence of `arcs` arcs of label 0 at offset 1, one head (`columns` = 2: head 0
    /// finds `hits` of them dependent to head, head 1 none).
    fn sentence(arcs: usize, hits: usize) -> SentenceCredits {
        let labels = [0usize];
        let mut credits = SentenceCredits::new((0..arcs).map(|_| (&labels[..], 1)), 2);
        for _ in 0..hits {
            credits.add(0, 0, 1.0, 0.0);
        }
        credits
    }

    #[test]
    fn percentiles_interpolate_as_numpy() {
        // numpy.percentile([1, 2, 3, 4, 5], [2.5, 97.5]) = [1.1, 4.9]
        let mut values = vec![5.0, 3.0, 1.0, 4.0, 2.0];
        let found = interval(&mut values);
        assert!((found.low - 1.1).abs() < 1e-12 && (found.high - 4.9).abs() < 1e-12);
    }

    #[test]
    fn identical_sentences_give_a_point_interval() {
        // Every sentence alike: every resample is the same fraction.
        let sentences: Vec<_> = (0..20).map(|_| sentence(4, 3)).collect();
        let found = relation_intervals(&sentences, 0, 1, [0, 1]).expect("arcs in every resample");
        assert_eq!(found.resamples, RESAMPLES);
        let to_head = found.dependent_to_head;
        assert_eq!(
            to_head.best_head,
            Interval {
                low: 0.75,
                high: 0.75
            }
        );
        // Every arc is at offset 1: the baseline finds all of them.
        assert_eq!(
            found.baseline,
            Interval {
                low: 1.0,
                high: 1.0
            }
        );
        assert_eq!(
            to_head.margin,
            Interval {
                low: -0.25,
                high: -0.25
            }
        );
        assert_eq!(to_head.heads_above_baseline, 0);
        assert_eq!(to_head.heads_clearly_above_baseline, 0);
    }

    #[test]
    fn the_interval_holds_the_point_and_narrows_with_more_sentences() {
        // Half the sentences found entirely, half not at all: the score is 0.5 and its
        // interval shrinks about as 1 / sqrt(n).
        let width = |n: usize| {
            let sentences: Vec<_> = (0..n)
                .map(|i| sentence(2, if i % 2 == 0 { 2 } else { 0 }))
                .collect();
            let found = relation_intervals(&sentences, 0, 7, [0, 1]).expect("arcs");
            let best = found.dependent_to_head.best_head;
            assert!(best.low < 0.5 && 0.5 < best.high, "{best:?} around 0.5");
            // No arc at offset 7: the baseline scores 0, and head 0 beats it in every
            // resample while head 1 never does.
            assert_eq!(
                found.baseline,
                Interval {
                    low: 0.0,
                    high: 0.0
                }
            );
            assert_eq!(found.dependent_to_head.heads_above_baseline, 1);
            assert_eq!(found.dependent_to_head.heads_clearly_above_baseline, 1);
            best.high - best.low
        };
        let (narrow, wide) = (width(400), width(100));
        // sqrt(100 / 400) = 0.5, within resampling noise.
        let ratio = narrow / wide;
        assert!((0.4..0.6).contains(&ratio), "width ratio {ratio}");
        // A binomial proportion over 100 sentences: 1.96 * sqrt(0.25 / 100) * 2 = 0.196.
        assert!((0.16..0.24).contains(&wide), "width {wide}");
    }

    #[test]
    fn a_relation_in_no_sentence_has_no_interval() {
        let sentences: Vec<_> = (0..10).map(|_| sentence(3, 1)).collect();
        assert_eq!(relation_intervals(&sentences, 5, 1, [0, 0]), None);
        assert_eq!(relation_intervals(&[], 0, 1, [0, 0]), None);
    }
}
