//! Role trajectories: every head of the final model followed back through the run's
//! snapshots, with its role and pattern scores at each, and the step at which its final role
//! formed and stayed (Olsson et al. 2022, "In-context learning and induction heads": does the
//! loss drop when a role forms?). Heads of a layer are interchangeable, so each snapshot's
//! heads are matched to the next one's (the later in training) by Kuhn-Munkres on pattern
//! similarity, as `compare` matches seeds ([`crate::measures::matching`]), and the matches are chained
//! back from the final model. At most [`MAX_SNAPSHOTS`] snapshots are read, evenly spaced and
//! always including the last, so a run with thousands costs no more than forty probes. Only
//! the attention patterns of two models are kept at a time (a snapshot's and the later one
//! it is matched to), at most the patterns term of one probe's forward pass, so the memory
//! stays within the probe budget ([`crate::load::probe::MAX_PROBE_BYTES`]) whatever the snapshot
//! count.

use std::collections::BTreeMap;
use std::path::PathBuf;

use model::HeadId;
use run::snapshot::SnapshotError;
use run::tensor_file::HostTensor;
use serde::{Deserialize, Serialize};
use tasks::Task;

use crate::load::context::MeasureContext;
use crate::load::probe::{LayerProbe, Probe};
use crate::measures::heads::head_roles;
use crate::measures::matching::match_layers;

/// The most snapshots a trajectory reads, besides the final model.
pub const MAX_SNAPSHOTS: usize = 40;

/// One head of the final model through training: `trajectories.json` holds one per head.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeadTrajectory {
    /// The head in the final model (`layer` and `head` in the JSON).
    #[serde(flatten)]
    pub id: HeadId,
    /// Training step of each point, ascending; the last is the final model.
    pub steps: Vec<usize>,
    /// `heads[i]`: the head of the snapshot at `steps[i]` matched to this one.
    pub heads: Vec<usize>,
    /// `roles[i]`: its role at `steps[i]` (as `role` in `heads.json`).
    pub roles: Vec<String>,
    /// `pattern_scores[i]`: its mean attention on each pattern at `steps[i]`.
    pub pattern_scores: Vec<BTreeMap<String, f64>>,
    /// The first step from which the role stayed the final one; null when the final role is
    /// "mixed".
    pub role_formed_at: Option<usize>,
}

/// `trajectories.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trajectories {
    /// Snapshots in the run's `snapshots/`.
    pub snapshots_available: usize,
    /// Snapshots read (at most [`MAX_SNAPSHOTS`]).
    pub snapshots_used: usize,
    /// One per head of the final model, layer-major.
    pub heads: Vec<HeadTrajectory>,
}

/// Up to `max` of `items`, evenly spaced, the last always kept.
pub fn subsample<T: Clone>(items: &[T], max: usize) -> Vec<T> {
    if items.len() <= max {
        return items.to_vec();
    }
    if max < 2 {
        return items.last().into_iter().take(max).cloned().collect();
    }
    (0..max)
        .map(|i| items[(i * (items.len() - 1)) / (max - 1)].clone())
        .collect()
}

/// `chain[l][h]`, the head of `earlier` that plays final head `h`, given `later_chain` for
/// the later probe it is matched against.
pub fn chain_back(
    later: &[LayerProbe],
    earlier: &[LayerProbe],
    later_chain: &[Vec<usize>],
) -> Vec<Vec<usize>> {
    match_layers(later, earlier)
        .iter()
        .zip(later_chain)
        .map(|(matched, heads)| heads.iter().map(|&h| matched.partner[h]).collect())
        .collect()
}

/// The first index from which `roles` equals its last entry.
pub fn formed_at(roles: &[String]) -> Option<usize> {
    let last = roles.last()?;
    let changed = roles.iter().rposition(|role| role != last);
    Some(changed.map_or(0, |i| i + 1))
}

/// The trajectories of every head of the context's model, whose probe is `final_layers`, or
/// `None` when the run took no snapshots (or the context has no run). The final model
/// stands at [`crate::load::snapshots::Snapshots::final_step`]; a snapshot at that step is
/// the same weights and is left out.
pub fn trajectories(
    context: MeasureContext,
    probe: &Probe,
    final_layers: &[LayerProbe],
) -> Result<Option<Trajectories>, SnapshotError> {
    let Some(snapshots) = context.snapshots else {
        return Ok(None);
    };
    let all = snapshots.list();
    if all.is_empty() {
        return Ok(None);
    }
    let final_step = snapshots.final_step(&all);
    let earlier: Vec<(usize, PathBuf)> = all
        .iter()
        .filter(|(step, _)| *step < final_step)
        .cloned()
        .collect();
    let used = subsample(&earlier, MAX_SNAPSHOTS);
    let tokens = probe.token_ids();
    let task = context.task;

    let mut later = patterns_only(final_layers.to_vec());
    let mut chain: Vec<Vec<usize>> = later.iter().map(|l| (0..l.dims().1).collect()).collect();
    // Points from the final model backwards: (step, chain, roles per layer).
    let mut points = vec![(final_step, chain.clone(), roles_of(task, &later, &tokens))];
    for (step, path) in used.iter().rev() {
        let model = snapshots.model(path)?;
        let layers = patterns_only(probe.forward(&model));
        chain = chain_back(&later, &layers, &chain);
        points.push((*step, chain.clone(), roles_of(task, &layers, &tokens)));
        later = layers;
    }
    points.reverse();

    let mut heads = vec![];
    for (l, final_heads) in points.last().expect("the final model").1.iter().enumerate() {
        for h in 0..final_heads.len() {
            let mut trajectory = HeadTrajectory {
                id: HeadId::new(l, h),
                steps: vec![],
                heads: vec![],
                roles: vec![],
                pattern_scores: vec![],
                role_formed_at: None,
            };
            for (step, chain, roles) in &points {
                let matched = chain[l][h];
                let (scores, role) = &roles[l][matched];
                trajectory.steps.push(*step);
                trajectory.heads.push(matched);
                trajectory.roles.push(role.clone());
                trajectory.pattern_scores.push(scores.clone());
            }
            let final_role = trajectory.roles.last().cloned().unwrap_or_default();
            trajectory.role_formed_at = (final_role != "mixed")
                .then(|| formed_at(&trajectory.roles).map(|i| trajectory.steps[i]))
                .flatten();
            heads.push(trajectory);
        }
    }
    Ok(Some(Trajectories {
        snapshots_available: all.len(),
        snapshots_used: used.len(),
        heads,
    }))
}

/// `roles[layer][head]`: a model's pattern scores and role per head.
type Roles = Vec<Vec<(BTreeMap<String, f64>, String)>>;

fn roles_of(task: &Task, layers: &[LayerProbe], tokens: &[u32]) -> Roles {
    layers
        .iter()
        .map(|layer| head_roles(task, layer, tokens))
        .collect()
}

/// `layers` with their inputs and head outputs dropped: matching and roles read only the
/// patterns.
fn patterns_only(layers: Vec<LayerProbe>) -> Vec<LayerProbe> {
    let empty = || HostTensor {
        shape: vec![0],
        values: vec![],
    };
    layers
        .into_iter()
        .map(|layer| LayerProbe {
            attn_input: empty(),
            head_outputs: empty(),
            ..layer
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(targets: &[usize], seq: usize) -> LayerProbe {
        LayerProbe::attending_to(targets, seq)
    }

    #[test]
    fn a_permuted_snapshot_is_chained_back_to_its_heads() {
        // Final heads attend to keys 0..4; the snapshot's head b attends where final head
        // order[b] does, so final head h is the snapshot's head b with order[b] = h.
        let later = [probe(&[0, 1, 2, 3], 5)];
        let order = [2, 0, 3, 1];
        let earlier = [probe(&order, 5)];
        let identity = vec![vec![0, 1, 2, 3]];
        let chain = chain_back(&later, &earlier, &identity);
        assert_eq!(chain, vec![vec![1, 3, 0, 2]]);
        // A second, differently permuted snapshot further back composes the two.
        let first = [probe(&[3, 2, 1, 0], 5)];
        let chain = chain_back(&earlier, &first, &chain);
        assert_eq!(chain, vec![vec![3, 2, 1, 0]]);
    }

    #[test]
    fn a_role_forms_where_it_last_changed() {
        let roles = |names: &[&str]| names.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            formed_at(&roles(&["mixed", "self", "mixed", "self", "self"])),
            Some(3)
        );
        assert_eq!(formed_at(&roles(&["self", "self"])), Some(0));
        assert_eq!(formed_at(&[]), None);
    }

    #[test]
    fn subsampling_keeps_both_ends_and_at_most_max() {
        let steps: Vec<usize> = (0..100).collect();
        let kept = subsample(&steps, 40);
        assert_eq!(kept.len(), 40);
        assert_eq!((kept[0], kept[39]), (0, 99));
        assert!(kept.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(subsample(&steps[..5], 40), steps[..5]);
    }
}
