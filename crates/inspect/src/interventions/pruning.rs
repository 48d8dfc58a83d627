//! Head pruning (Michel et al. 2019, "Are Sixteen Heads Really Better than One?"): remove
//! heads one at a time, at test time, and watch the eval accuracy. Two orders:
//! - **ranked**: by each head's single-head ablation drop, least important first (Michel et
//!   al. rank by a gradient estimate of that drop; we have the exact drop, so we use it);
//! - **greedy**: at every step, try removing each remaining head and remove the one whose
//!   loss hurts least. It costs `H (H + 1) / 2` evaluations for `H` heads, and it finds
//!   combinations a ranking misses (two heads that back each other up each look unimportant
//!   alone).
//!
//! "Removable" is how many heads go before the accuracy first falls more than `tolerance`
//! below the full model's.
//!
//! Greedy pruning is left out for imported models: `H (H + 1) / 2` passes over the masked
//! words is 2628 for all-MiniLM-L6-v2's 72 heads, and 10440 for BERT-base's 144.
//!
//! The search itself ([`prune`]) takes the accuracy as a function of a keep-mask, so it is
//! tested without a model; [`prune_model`] wires it to a trained encoder.

use model::HeadId;
use serde::{Deserialize, Serialize};
use tasks::Example;
use tasks::evaluate;

use crate::load::context::MeasureContext;

/// The accuracy a model loses before we say the task failed: one point.
pub const DEFAULT_TOLERANCE: f64 = 0.01;

/// `--prune-tolerance` as typed: a fraction in [0, 1]. For clap's `value_parser`, so `-1`
/// gets this message too.
pub fn parse_tolerance(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(tolerance) if (0.0..=1.0).contains(&tolerance) => Ok(tolerance),
        _ => {
            Err("expected accuracy points as a fraction in [0, 1] (0.01 is one point)".to_string())
        }
    }
}

/// One point of a pruning curve.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PruneStep {
    /// Heads removed so far, this one included.
    pub heads_removed: usize,
    /// The head removed at this step (`layer` and `head` in the JSON).
    #[serde(flatten)]
    pub removed: HeadId,
    /// Eval token accuracy with every head removed so far masked.
    pub token_acc: f64,
}

/// One removal order and how far it gets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PruneCurve {
    /// Every head, in the order removed (the last step leaves no head at all).
    pub steps: Vec<PruneStep>,
    /// Heads removed before the accuracy first falls more than the tolerance below the
    /// full model's.
    pub removable: usize,
}

/// `pruning.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pruning {
    /// Eval token accuracy with every head on.
    pub base_token_acc: f64,
    /// Accuracy (absolute, 0.01 = one point) a pruned model may lose and still count.
    pub tolerance: f64,
    /// Heads in the model (layers x heads per layer).
    pub total_heads: usize,
    /// Least important first by single-head ablation drop.
    pub ranked: PruneCurve,
    /// The head whose removal hurts least, at every step; null where it was not searched
    /// (an imported model).
    pub greedy: Option<PruneCurve>,
}

/// Prunes a model of `n_layers` x `n_heads` heads, in the greedy order too when `greedy`.
/// `accuracy(keep)` is the eval accuracy with the heads whose `keep[layer * n_heads + head]`
/// is false removed; `single_drops` is each head's drop when removed alone, layer-major.
/// Ties go to the lower head index.
pub fn prune(
    (n_layers, n_heads): (usize, usize),
    single_drops: &[f64],
    tolerance: f64,
    greedy: bool,
    mut accuracy: impl FnMut(&[bool]) -> f64,
) -> Pruning {
    let total = n_layers * n_heads;
    assert_eq!(single_drops.len(), total, "one ablation drop per head");
    let base = accuracy(&vec![true; total]);

    // Ranked: a stable sort keeps index order among equal drops.
    let mut order: Vec<usize> = (0..total).collect();
    order.sort_by(|&a, &b| single_drops[a].total_cmp(&single_drops[b]));
    let mut keep = vec![true; total];
    let ranked: Vec<PruneStep> = order
        .iter()
        .enumerate()
        .map(|(removed, &index)| {
            keep[index] = false;
            PruneStep {
                heads_removed: removed + 1,
                removed: HeadId::from_flat_index(index, n_heads),
                token_acc: accuracy(&keep),
            }
        })
        .collect();

    let curve = |steps: Vec<PruneStep>| PruneCurve {
        removable: steps
            .iter()
            .take_while(|s| s.token_acc >= base - tolerance)
            .count(),
        steps,
    };
    Pruning {
        base_token_acc: base,
        tolerance,
        total_heads: total,
        ranked: curve(ranked),
        greedy: greedy.then(|| curve(greedy_steps(n_heads, total, &mut accuracy))),
    }
}

/// The greedy order: at each step the remaining head whose removal costs least.
fn greedy_steps(
    n_heads: usize,
    total: usize,
    accuracy: &mut impl FnMut(&[bool]) -> f64,
) -> Vec<PruneStep> {
    let mut keep = vec![true; total];
    let mut greedy = Vec::with_capacity(total);
    for removed in 1..=total {
        let mut best: Option<(usize, f64)> = None;
        for index in 0..total {
            if !keep[index] {
                continue;
            }
            keep[index] = false;
            let acc = accuracy(&keep);
            keep[index] = true;
            if best.is_none_or(|(_, best_acc)| acc > best_acc) {
                best = Some((index, acc));
            }
        }
        let (index, token_acc) = best.expect("a head is left while removed <= total");
        keep[index] = false;
        greedy.push(PruneStep {
            heads_removed: removed,
            removed: HeadId::from_flat_index(index, n_heads),
            token_acc,
        });
    }
    greedy
}

/// Prunes the context's model on the evaluation examples `eval` (greedily too when
/// `greedy`).
pub fn prune_model(
    context: MeasureContext,
    eval: &[Example],
    single_drops: &[f64],
    (tolerance, greedy): (f64, bool),
) -> Pruning {
    let MeasureContext { model, device, .. } = context;
    let (n_layers, n_heads) = (model.n_layers(), model.n_heads());
    prune(
        (n_layers, n_heads),
        single_drops,
        tolerance,
        greedy,
        |keep| {
            let mask = model.head_mask_keeping(|id| keep[id.flat_index(n_heads)], device);
            evaluate(model, eval, device, Some(mask)).1.token_accuracy()
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tolerances_parse_as_fractions_in_zero_to_one() {
        assert_eq!(parse_tolerance("0.01"), Ok(0.01));
        assert_eq!(parse_tolerance("0"), Ok(0.0));
        assert_eq!(parse_tolerance("1"), Ok(1.0));
        for bad in ["-1", "-0.5", "1.5", "NaN", "inf", "one point"] {
            let error = parse_tolerance(bad).unwrap_err();
            assert!(error.contains("[0, 1]"), "{bad}: {error}");
        }
    }

    /// Accuracy = 1 minus the summed cost of the removed heads, where `pairs` are pairs of
    /// heads that back each other up: removing one costs nothing, removing both costs
    /// `pair_cost`.
    fn toy_accuracy<'a>(
        costs: &'a [f64],
        pairs: &'a [(usize, usize, f64)],
    ) -> impl FnMut(&[bool]) -> f64 + 'a {
        move |keep: &[bool]| {
            let mut lost: f64 = (0..costs.len())
                .filter(|&i| !keep[i])
                .map(|i| costs[i])
                .sum();
            for &(a, b, pair_cost) in pairs {
                if !keep[a] && !keep[b] {
                    lost += pair_cost;
                }
            }
            1.0 - lost
        }
    }

    #[test]
    fn ranked_removes_heads_in_order_of_their_single_drop() {
        let costs = [0.3, 0.0, 0.1, 0.005];
        let pruning = prune((2, 2), &costs, 0.01, true, toy_accuracy(&costs, &[]));
        let order: Vec<(usize, usize)> = pruning
            .ranked
            .steps
            .iter()
            .map(|s| (s.removed.layer, s.removed.head))
            .collect();
        assert_eq!(order, vec![(0, 1), (1, 1), (1, 0), (0, 0)]);
        let accs: Vec<f64> = pruning.ranked.steps.iter().map(|s| s.token_acc).collect();
        let expected = [1.0, 0.995, 0.895, 0.595];
        for (got, want) in accs.iter().zip(expected) {
            assert!((got - want).abs() < 1e-12, "{accs:?}");
        }
        // Within one point after removing (0,1) and (1,1); (1,0) costs ten.
        assert_eq!(pruning.ranked.removable, 2);
        assert_eq!(pruning.base_token_acc, 1.0);
        assert_eq!(pruning.total_heads, 4);
    }

    #[test]
    fn greedy_sees_heads_that_back_each_other_up() {
        // Heads 0 and 1 are redundant copies: alone each costs nothing, together 0.5.
        // Head 2 costs 0.002 alone, head 3 costs 0.2.
        let costs = [0.0, 0.0, 0.002, 0.2];
        let pairs = [(0, 1, 0.5)];
        let drops = [0.0, 0.0, 0.002, 0.2];
        let pruning = prune((1, 4), &drops, 0.01, true, toy_accuracy(&costs, &pairs));
        // The ranking removes 0, then 1 (it cannot see the pair): the second step loses 0.5.
        assert_eq!(pruning.ranked.steps[1].removed.head, 1);
        assert!((pruning.ranked.steps[1].token_acc - 0.5).abs() < 1e-12);
        assert_eq!(pruning.ranked.removable, 1);
        // Greedy removes 0, then 2 (0.002) rather than 1 (0.5), and keeps 1 until it must.
        let greedy = pruning.greedy.unwrap();
        assert_eq!(greedy.removable, 2);
        assert!((greedy.steps[3].token_acc - (1.0 - 0.702)).abs() < 1e-12);
        let greedy: Vec<usize> = greedy.steps.iter().map(|s| s.removed.head).collect();
        assert_eq!(greedy, vec![0, 2, 3, 1]);
    }

    #[test]
    fn greedy_tries_every_remaining_head_each_step() {
        let mut calls = 0;
        let costs = [0.1; 6];
        let count = |keep: &[bool]| keep.iter().filter(|k| **k).count() as f64 / 6.0;
        let pruning = prune((2, 3), &costs, 0.01, true, |keep: &[bool]| {
            calls += 1;
            count(keep)
        });
        // 1 (base) + 6 (ranked) + 6 + 5 + 4 + 3 + 2 + 1 (greedy).
        assert_eq!(calls, 1 + 6 + 21);
        let greedy = pruning.greedy.unwrap();
        assert_eq!(greedy.steps.last().unwrap().token_acc, 0.0);
        assert_eq!(greedy.removable, 0);

        // Without the greedy search: the base and the ranked order only.
        let mut calls = 0;
        let pruning = prune((2, 3), &costs, 0.01, false, |keep: &[bool]| {
            calls += 1;
            count(keep)
        });
        assert_eq!(calls, 1 + 6);
        assert_eq!(pruning.greedy, None);
        assert_eq!(pruning.ranked.steps.len(), 6);
    }
}
