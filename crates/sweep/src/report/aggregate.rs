//! Aggregating: per grid point, the estimates over seeds, role counts against untrained
//! models (the null), heads matched across seeds, and relation heads across seeds; the whole
//! sweep's [`SweepReport`].

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use inspect::compare::null::untrained_null;
use inspect::compare::{Comparison, Matching, Slot};
use inspect::load::probe::Probe;
use inspect::measures::relations::{BestHead, BestHeads, Relations};
use model::HeadId;
use serde::Serialize;

use crate::report::collect::{HEAD_NUMBERS, NUMBERS, Number, RunRow};
use crate::spec::{PlannedRun, Sweep};
use crate::state::SweepOut;
use crate::stats::{Estimate, EstimateJson};

/// Most sequences in the probe that matches heads across seeds.
const MATCH_PROBE: usize = 64;

/// The runs of one grid point.
#[derive(Debug, Clone, Serialize)]
pub struct PointReport {
    /// `config key=value ...`.
    pub point: String,
    /// Runs of the point that are done.
    pub runs: usize,
    /// Runs of the point in the plan.
    pub planned: usize,
    /// Per number: mean and 95% interval over the done runs that have it.
    pub estimates: BTreeMap<String, EstimateJson>,
    /// Of the done runs, how many reached 99% eval token accuracy.
    pub reached_99: usize,
    /// Per layer: role -> seeds with at least one head of it, trained and untrained.
    pub roles: Vec<BTreeMap<String, RoleCount>>,
    /// Heads matched across seeds (reference: the first seed), when two or more are done.
    pub slots: Vec<SlotReport>,
    /// Why matching was skipped, if it was.
    pub matching_note: Option<String>,
    /// Per relation and direction, the best head across seeds (word tasks only).
    pub relations: Vec<RelationAcrossSeeds>,
}

#[cfg(test)]
impl PointReport {
    /// A point of `runs` done runs of 16 planned with only `relations` measured: what the
    /// relation tables and figure are tested on.
    pub(crate) fn with_relations(
        point: &str,
        runs: usize,
        relations: Vec<RelationAcrossSeeds>,
    ) -> Self {
        PointReport {
            point: point.to_string(),
            runs,
            planned: 16,
            estimates: BTreeMap::new(),
            reached_99: 0,
            roles: Vec::new(),
            slots: Vec::new(),
            matching_note: None,
            relations,
        }
    }
}

/// One relation in one direction at one grid point: each seed's best head against the
/// relation's best fixed offset.
#[derive(Debug, Clone, Serialize)]
pub struct RelationAcrossSeeds {
    /// "det", "nsubj", ...
    pub relation: String,
    /// `dependent_to_head` or `head_to_dependent`.
    pub direction: &'static str,
    /// The best head's score, over seeds.
    pub best_score: EstimateJson,
    /// The best-offset baseline's score, over seeds (each seed scores its own sentences).
    pub baseline: EstimateJson,
    /// The baseline's offset (`head - dependent`) in most seeds.
    pub baseline_offset: i64,
    /// Seeds whose best head beats the baseline.
    pub beats_baseline: usize,
    /// Untrained models (same configs and seeds) whose best head beats it: the null.
    pub untrained_beats_baseline: Option<usize>,
    /// The untrained models' best head's score, over seeds (null when not measured).
    pub untrained_best_score: Option<EstimateJson>,
    /// Eval token accuracy lost on the relation's masked dependents when the best head is
    /// zeroed, over seeds (null for reports written before it existed).
    pub drop_on_relation: Option<EstimateJson>,
    /// The same on every other masked word.
    pub drop_elsewhere: Option<EstimateJson>,
    /// `drop_on_relation` with the best head resample-ablated.
    pub resample_drop_on_relation: Option<EstimateJson>,
    /// `drop_elsewhere` with the best head resample-ablated.
    pub resample_drop_elsewhere: Option<EstimateJson>,
    /// The masked-LM loss gained (nats per masked word) on the relation's masked dependents
    /// when the best head is zeroed, over seeds (null for reports of runs inspected before
    /// 2026-11-30): every word's loss moves where the accuracy moves a word at a time.
    pub loss_rise_on_relation: Option<EstimateJson>,
    /// The same on every other masked word.
    pub loss_rise_elsewhere: Option<EstimateJson>,
    /// `loss_rise_on_relation` with the best head resample-ablated.
    pub resample_loss_rise_on_relation: Option<EstimateJson>,
    /// `loss_rise_elsewhere` with the best head resample-ablated.
    pub resample_loss_rise_elsewhere: Option<EstimateJson>,
    /// Per seed, `resample_loss_rise_on_relation` minus `resample_loss_rise_elsewhere`, over
    /// the seeds that have both: whether the relation's words need the head more than other
    /// words do. Paired within each seed, so its interval is narrower than the two rises'
    /// intervals side by side suggest when the seeds differ in how much any word needs it.
    pub resample_loss_rise_difference: Option<EstimateJson>,
    /// Seeds counted.
    pub of: usize,
    /// Layer -> seeds whose best head sits in it.
    pub best_layers: BTreeMap<usize, usize>,
}

/// In how many seeds a layer has a head of a role.
#[derive(Debug, Clone, Copy, Serialize, Default)]
pub struct RoleCount {
    /// Trained runs with the role in the layer.
    pub trained: usize,
    /// Untrained models (same configs and seeds) with the role in the layer.
    pub untrained: usize,
    /// Runs counted.
    pub of: usize,
}

/// One slot of the matching: a reference head and its matches in the other seeds.
#[derive(Debug, Clone, Serialize)]
pub struct SlotReport {
    /// The reference seed's head (`layer` and `head` in the JSON).
    #[serde(flatten)]
    pub reference: HeadId,
    /// The most frequent role of the matched heads ("mixed" if none has a role).
    pub role: String,
    /// In how many seeds the matched head has that role.
    pub count: usize,
    /// Seeds matched.
    pub of: usize,
    /// Mean pattern similarity to the reference head (over the other seeds).
    pub mean_similarity: f64,
    /// Per head number ([`HEAD_NUMBERS`]): mean and 95% interval over the matched heads
    /// that have it.
    pub numbers: BTreeMap<String, EstimateJson>,
}

/// `report.json`.
#[derive(Debug, Clone, Serialize)]
pub struct SweepReport {
    /// Sweep name.
    pub sweep: String,
    /// Grid keys.
    pub grid_keys: Vec<String>,
    /// Every run.
    pub runs: Vec<RunRow>,
    /// Every grid point.
    pub points: Vec<PointReport>,
    /// Files written.
    pub files: Vec<PathBuf>,
    /// The report's directory (`OUT/_sweep/report`), which `report.md` links from.
    #[serde(skip)]
    pub dir: PathBuf,
}

/// Per grid point, in plan order, its runs.
pub fn group_by_point(sweep: &Sweep) -> Vec<(String, Vec<&PlannedRun>)> {
    let mut order: Vec<String> = Vec::new();
    let mut groups: BTreeMap<String, Vec<&PlannedRun>> = BTreeMap::new();
    for run in &sweep.runs {
        let point = run.point();
        if !groups.contains_key(&point) {
            order.push(point.clone());
        }
        groups.entry(point).or_default().push(run);
    }
    order
        .into_iter()
        .map(|point| {
            let runs = groups.remove(&point).unwrap_or_default();
            (point, runs)
        })
        .collect()
}

/// One grid point's report from its done runs' rows and the matching of their heads (or
/// why there is none).
pub fn point_report(
    point: String,
    planned: usize,
    rows: &[&RunRow],
    matching: Result<Matched, String>,
) -> PointReport {
    let reached_99 = rows
        .iter()
        .filter(|r| r.numbers.contains_key("steps_to_99"))
        .count();
    let trained_relations: Vec<&Relations> =
        rows.iter().filter_map(|r| r.relations.as_ref()).collect();
    let (roles, slots, matching_note, relations) = match matching {
        Ok(Matched {
            comparison,
            untrained_roles,
            untrained_relations,
        }) => (
            role_counts(&comparison, &untrained_roles),
            comparison
                .slots
                .iter()
                .map(|slot| slot_report(slot, &comparison, rows))
                .collect(),
            None,
            relations_across_seeds(&trained_relations, &untrained_relations),
        ),
        Err(note) => (
            Vec::new(),
            Vec::new(),
            Some(note),
            relations_across_seeds(&trained_relations, &[]),
        ),
    };
    PointReport {
        point,
        runs: rows.len(),
        planned,
        estimates: estimates(rows),
        reached_99,
        roles,
        slots,
        matching_note,
        relations,
    }
}

/// Per number, its mean and 95% interval over the rows that have it.
fn estimates(rows: &[&RunRow]) -> BTreeMap<String, EstimateJson> {
    let mut estimates = BTreeMap::new();
    for Number { key, .. } in NUMBERS {
        let values: Vec<f64> = rows
            .iter()
            .filter_map(|r| r.numbers.get(key))
            .copied()
            .collect();
        if let Some(e) = Estimate::of(&values) {
            estimates.insert(key.to_string(), e.into());
        }
    }
    estimates
}

/// Per layer, each role but "mixed": the trained runs with a head of it and the untrained
/// models with one (`untrained`, per layer, role -> count).
fn role_counts(
    comparison: &Comparison,
    untrained: &[BTreeMap<String, usize>],
) -> Vec<BTreeMap<String, RoleCount>> {
    let n = comparison.runs.len();
    comparison
        .runs_with_role
        .iter()
        .zip(untrained)
        .map(|(trained, null)| {
            let names: BTreeSet<&String> = trained.keys().chain(null.keys()).collect();
            names
                .into_iter()
                .filter(|name| *name != "mixed")
                .map(|name| {
                    let count = RoleCount {
                        trained: trained.get(name).copied().unwrap_or(0),
                        untrained: null.get(name).copied().unwrap_or(0),
                        of: n,
                    };
                    (name.clone(), count)
                })
                .collect()
        })
        .collect()
}

/// A slot of the matching: its matched heads' most frequent role ("mixed" if none has one),
/// and their numbers over seeds (each run's row found by its seed).
fn slot_report(slot: &Slot, comparison: &Comparison, rows: &[&RunRow]) -> SlotReport {
    let matched: Vec<&BTreeMap<&'static str, f64>> = comparison
        .runs
        .iter()
        .filter_map(|run| {
            let HeadId { layer, head } = slot.reference;
            let matched = run.layers.get(layer)?;
            let partner = matched
                .partner
                .get(head)
                .map(|_| matched.partner_of(head))?;
            let row = rows.iter().find(|row| row.seed == run.seed)?;
            row.head_numbers.get(&partner)
        })
        .collect();
    let mut numbers = BTreeMap::new();
    for Number { key, .. } in HEAD_NUMBERS {
        let values: Vec<f64> = matched.iter().filter_map(|n| n.get(key)).copied().collect();
        if let Some(e) = Estimate::of(&values) {
            numbers.insert(key.to_string(), e.into());
        }
    }
    let (role, count) = counts(slot.roles.iter().filter(|r| *r != "mixed"))
        .into_iter()
        .max_by_key(|(_, count)| *count)
        .map_or(("mixed".to_string(), 0), |(r, c)| (r.clone(), c));
    SlotReport {
        reference: slot.reference,
        role,
        count,
        of: slot.roles.len(),
        mean_similarity: slot.mean_similarity,
        numbers,
    }
}

/// Matches the heads of a grid point's done runs (as `compare` does, writing its files into
/// `dir`) and counts roles on untrained models of the same configs and seeds on the same probe.
pub fn match_seeds(out: &SweepOut, runs: &[&PlannedRun], dir: &Path) -> Result<Matched, String> {
    if runs.is_empty() {
        return Err("no run is done".to_string());
    }
    let dirs: Vec<PathBuf> = runs.iter().map(|run| out.run_dir(run)).collect();
    let loaded = inspect::compare::load_runs(&dirs).map_err(|e| e.to_string())?;
    let reference = &loaded[0];
    let probe_size = Probe::max_size(&reference.resolved, loaded.len()).clamp(1, MATCH_PROBE);
    // Measured by inspect: the matching, and the null on the same probe (untrained models,
    // each seeded as its run was); written by report as `compare` writes it.
    let compared = inspect::compare::compare(&loaded, probe_size, Matching::ByLayer)
        .map_err(|e| e.to_string())?;
    let null = untrained_null(&loaded, &compared.probe).map_err(|e| e.to_string())?;
    let comparison = report::compare::write_comparison(&loaded, compared, dir, false)
        .map_err(|e| e.to_string())?;
    Ok(Matched {
        comparison,
        untrained_roles: null.roles,
        untrained_relations: null.relations,
    })
}

/// Heads matched across a grid point's seeds, and the nulls measured on untrained models.
pub struct Matched {
    comparison: Comparison,
    /// Per layer: role -> untrained models with a head of it.
    untrained_roles: Vec<BTreeMap<String, usize>>,
    /// `relations.json` of each untrained model (word tasks only).
    untrained_relations: Vec<Relations>,
}

/// Picks one direction's best head.
type PickBest = fn(&BestHeads) -> BestHead;

/// Per relation and direction, the seeds' best heads against the baseline. `untrained`
/// holds the same scores on untrained models (empty when not measured).
fn relations_across_seeds(
    trained: &[&Relations],
    untrained: &[Relations],
) -> Vec<RelationAcrossSeeds> {
    let Some(first) = trained.first() else {
        return Vec::new();
    };
    let directions: [(&'static str, PickBest); 2] = [
        ("dependent_to_head", |best| best.dependent_to_head),
        ("head_to_dependent", |best| best.head_to_dependent),
    ];
    let mut out = Vec::new();
    for relation in first.relations.iter().map(|r| &r.relation) {
        let of_run = |run: &Relations| {
            run.relations
                .iter()
                .find(|r| &r.relation == relation)
                .cloned()
        };
        let seeds: Vec<_> = trained.iter().filter_map(|run| of_run(run)).collect();
        let nulls: Vec<_> = untrained.iter().filter_map(of_run).collect();
        for (direction, pick) in directions {
            let best: Vec<BestHead> = seeds.iter().map(|r| pick(&r.best)).collect();
            let scores: Vec<f64> = best.iter().map(|b| b.score).collect();
            let baselines: Vec<f64> = seeds.iter().map(|r| r.baseline.score).collect();
            let offsets = counts(seeds.iter().map(|r| r.baseline.offset));
            let best_layers = counts(best.iter().map(|b| b.id.layer));
            let (Some(best_score), Some(baseline)) =
                (Estimate::of(&scores), Estimate::of(&baselines))
            else {
                continue;
            };
            out.push(RelationAcrossSeeds {
                relation: relation.clone(),
                direction,
                best_score: best_score.into(),
                baseline: baseline.into(),
                baseline_offset: offsets
                    .into_iter()
                    .max_by_key(|(_, count)| *count)
                    .map_or(0, |(offset, _)| offset),
                beats_baseline: best.iter().filter(|b| b.beats_baseline).count(),
                untrained_beats_baseline: (!nulls.is_empty()).then(|| {
                    nulls
                        .iter()
                        .filter(|r| pick(&r.best).beats_baseline)
                        .count()
                }),
                untrained_best_score: estimate(nulls.iter().map(|r| pick(&r.best).score)),
                drop_on_relation: estimate(best.iter().filter_map(|b| b.drop_on_relation)),
                drop_elsewhere: estimate(best.iter().filter_map(|b| b.drop_elsewhere)),
                resample_drop_on_relation: estimate(
                    best.iter().filter_map(|b| b.resample_drop_on_relation),
                ),
                resample_drop_elsewhere: estimate(
                    best.iter().filter_map(|b| b.resample_drop_elsewhere),
                ),
                loss_rise_on_relation: estimate(
                    best.iter().filter_map(|b| b.loss_rise_on_relation),
                ),
                loss_rise_elsewhere: estimate(best.iter().filter_map(|b| b.loss_rise_elsewhere)),
                resample_loss_rise_on_relation: estimate(
                    best.iter().filter_map(|b| b.resample_loss_rise_on_relation),
                ),
                resample_loss_rise_elsewhere: estimate(
                    best.iter().filter_map(|b| b.resample_loss_rise_elsewhere),
                ),
                resample_loss_rise_difference: estimate(best.iter().filter_map(|b| {
                    Some(b.resample_loss_rise_on_relation? - b.resample_loss_rise_elsewhere?)
                })),
                of: seeds.len(),
                best_layers,
            });
        }
    }
    out
}

/// The mean and interval of `values` for a report; `None` without any.
fn estimate(values: impl Iterator<Item = f64>) -> Option<EstimateJson> {
    Estimate::of(&values.collect::<Vec<_>>()).map(Into::into)
}

/// How often each value occurs.
fn counts<K: Ord>(values: impl Iterator<Item = K>) -> BTreeMap<K, usize> {
    let mut counts = BTreeMap::new();
    for value in values {
        *counts.entry(value).or_default() += 1;
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One seed's `relations.json` with a single relation: its best head in each direction
    /// (layer, score), the baseline's score, and both best heads' resample-ablated loss rises
    /// (on the relation's words, elsewhere; `None`, as in a file written before they existed).
    fn relations(
        dependent_to_head: (usize, f64),
        head_to_dependent: (usize, f64),
        baseline: f64,
        resample_loss_rises: Option<(f64, f64)>,
    ) -> Relations {
        use inspect::measures::relations::{Baseline, RelationScores};
        let best = |(layer, score): (usize, f64)| BestHead {
            id: HeadId::new(layer, 0),
            score,
            beats_baseline: score > baseline,
            drop_on_relation: Some(0.1),
            drop_elsewhere: None,
            resample_drop_on_relation: Some(0.2),
            resample_drop_elsewhere: None,
            loss_rise_on_relation: None,
            loss_rise_elsewhere: None,
            resample_loss_rise_on_relation: resample_loss_rises.map(|(on, _)| on),
            resample_loss_rise_elsewhere: resample_loss_rises.map(|(_, elsewhere)| elsewhere),
            words_on_relation: None,
        };
        Relations {
            too_long: 0,
            sentences: 10,
            arcs: 20,
            relations: vec![RelationScores {
                relation: "det".to_string(),
                arcs: 20,
                baseline: Baseline {
                    offset: 1,
                    score: baseline,
                },
                heads: Vec::new(),
                best: BestHeads {
                    dependent_to_head: best(dependent_to_head),
                    head_to_dependent: best(head_to_dependent),
                },
                intervals: None,
                clark_rule: None,
                attended: None,
            }],
            masking: None,
        }
    }

    #[test]
    fn relations_count_the_seeds_whose_best_head_beats_the_offset() {
        let seeds = [
            relations((1, 0.9), (0, 0.2), 0.7, Some((0.5, 0.1))),
            relations((1, 0.8), (0, 0.3), 0.7, Some((0.3, 0.2))),
            relations((0, 0.6), (2, 0.1), 0.7, None),
        ];
        let untrained = [relations((0, 0.2), (0, 0.1), 0.7, None)];
        let trained: Vec<&Relations> = seeds.iter().collect();
        let summary = relations_across_seeds(&trained, &untrained);
        assert_eq!(summary.len(), 2, "one row per direction");
        let forward = &summary[0];
        assert_eq!(
            (forward.relation.as_str(), forward.direction),
            ("det", "dependent_to_head")
        );
        assert_eq!((forward.beats_baseline, forward.of), (2, 3));
        assert_eq!(forward.untrained_beats_baseline, Some(0));
        assert!((forward.best_score.mean - 2.3 / 3.0).abs() < 1e-12);
        assert!((forward.baseline.mean - 0.7).abs() < 1e-12);
        assert_eq!(forward.baseline_offset, 1);
        assert_eq!(forward.best_layers, BTreeMap::from([(0, 1), (1, 2)]));
        // The untrained best head's score over the one null, and the drops over seeds (each
        // seed's best head costs 0.1 on the dependents; none has a drop elsewhere).
        assert!((forward.untrained_best_score.as_ref().unwrap().mean - 0.2).abs() < 1e-12);
        assert!((forward.drop_on_relation.as_ref().unwrap().mean - 0.1).abs() < 1e-12);
        assert!(forward.drop_elsewhere.is_none());
        // The loss rises over the two seeds that have them, and their difference paired
        // within each seed: 0.4 and 0.1, so a mean of 0.25 and a t interval with one degree
        // of freedom, 12.706 x 0.212 / sqrt(2) = 1.906.
        let rise = |e: &Option<EstimateJson>| e.as_ref().map(|e| (e.n, e.mean));
        let (n, on) = rise(&forward.resample_loss_rise_on_relation).unwrap();
        assert!(n == 2 && (on - 0.4).abs() < 1e-12);
        let (n, elsewhere) = rise(&forward.resample_loss_rise_elsewhere).unwrap();
        assert!(n == 2 && (elsewhere - 0.15).abs() < 1e-12);
        let difference = forward.resample_loss_rise_difference.as_ref().unwrap();
        assert_eq!(difference.n, 2);
        assert!((difference.mean - 0.25).abs() < 1e-12);
        assert!((difference.ci95.unwrap() - 1.906).abs() < 1e-3);
        assert!(forward.loss_rise_on_relation.is_none());
        let backward = &summary[1];
        assert_eq!(backward.direction, "head_to_dependent");
        assert_eq!(backward.beats_baseline, 0);
        assert_eq!(backward.best_layers, BTreeMap::from([(0, 2), (2, 1)]));
        assert!(relations_across_seeds(&[], &untrained).is_empty());
    }
}
