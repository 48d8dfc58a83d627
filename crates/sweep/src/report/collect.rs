//! Collecting: one run's numbers ([`RunRow`]) read from its run directory and its report
//! (through [`ReportDir`]): training numbers from `metrics.jsonl`, then `summary.json`,
//! `heads.json`, `relations.json`, `pruning.json`, `divergence.csv`, `circuits.json` and
//! `patching.json`; and each head's own measures ([`HEAD_NUMBERS`]), which the report
//! follows across seeds through the matching.

use std::collections::BTreeMap;

use inspect::circuits::Circuits;
use inspect::inspection::summary::Summary;
use inspect::interventions::patching::{PairPatching, Patching};
use inspect::interventions::path_patching::PathChannel;
use inspect::interventions::pruning::Pruning;
use inspect::measures::agreement::{Agreement, Attractor};
use inspect::measures::ceiling::Ceiling;
use inspect::measures::divergence::DivergencePoint;
use inspect::measures::heads::HeadRecord;
use inspect::measures::relations::Relations;
use model::HeadId;
use report::dir::ReportDir;
use run::RunDir;
use run::metrics::MetricsRecord;
use run::units::Unit;
use serde::Serialize;
use tasks::WordClass;

use crate::spec::{PlannedRun, Sweep};
use crate::state::{RunState, SweepOut, record_damage, run_state, verify_run};

/// Eval token accuracy that counts as solving the task in "steps to 99%".
const SOLVED: f64 = 0.99;

/// One run's numbers.
#[derive(Debug, Clone, Serialize)]
pub struct RunRow {
    /// Run name.
    pub name: String,
    /// Its state (`done`, `failed`, `damaged`, ...).
    pub state: String,
    /// For a damaged run: every file that is not as its manifest recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub damage: Option<String>,
    /// Base config's stem.
    pub config: String,
    /// Seed.
    pub seed: u64,
    /// Grid values.
    pub grid: BTreeMap<String, String>,
    /// Training and report numbers (absent when the run has not got that far).
    pub numbers: BTreeMap<&'static str, f64>,
    /// Every head's record from `heads.json`.
    #[serde(skip)]
    pub heads: Vec<HeadRecord>,
    /// `relations.json`, for word tasks.
    #[serde(skip)]
    pub relations: Option<Relations>,
    /// Each head's numbers ([`HEAD_NUMBERS`]), where the report has them.
    #[serde(skip)]
    pub head_numbers: BTreeMap<HeadId, BTreeMap<&'static str, f64>>,
}

/// One number of a run or of a head: its key (in `report.json`), its title in `report.md`
/// and on figures, the decimals shown, and its unit, which every header, axis and CSV column
/// names ([`Number::header`], [`Number::csv_column`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Number {
    /// Its key in `report.json`, `summary.json` and a run's numbers: `max_ablation_drop`.
    pub key: &'static str,
    /// Its title, without the unit: "largest ablation drop".
    pub title: &'static str,
    /// The decimals `report.md` shows.
    pub decimals: usize,
    /// What it is measured in.
    pub unit: Unit,
}

impl Number {
    const fn new(key: &'static str, title: &'static str, decimals: usize, unit: Unit) -> Number {
        Number {
            key,
            title,
            decimals,
            unit,
        }
    }

    /// Its column in `sweep.csv` and its name in `estimates.csv`: `max_ablation_drop_frac`.
    pub fn csv_column(&self) -> String {
        self.unit.csv_column(self.key)
    }

    /// Its header in `report.md` and its figure's axis: "largest ablation drop (fraction)".
    pub fn header(&self) -> String {
        self.unit.titled(self.title)
    }
}

/// The numbers of a run, in table order. A run has a number
/// only where it applies (`steps_to_99` once it reached 99%, the divergence numbers with
/// snapshots, `first_differ_step` once its heads differ); tables leave out columns no run has.
pub const NUMBERS: [Number; 45] = [
    Number::new("eval_token_acc", "eval token acc", 4, Unit::Fraction),
    Number::new("eval_seq_acc", "eval seq acc", 4, Unit::Fraction),
    Number::new("steps_to_99", "steps to 99%", 0, Unit::Plain),
    Number::new("steps", "steps", 0, Unit::Plain),
    Number::new("ms_per_step", "ms per step", 1, Unit::Plain),
    Number::new("heads_with_role", "heads with a role", 2, Unit::Plain),
    Number::new("mean_pattern_js", "mean pattern JS", 3, Unit::Plain),
    Number::new(
        "max_ablation_drop",
        "largest ablation drop",
        3,
        Unit::Fraction,
    ),
    Number::new(
        "min_ablation_drop",
        "smallest ablation drop",
        3,
        Unit::Fraction,
    ),
    Number::new(
        "max_mean_ablation_drop",
        "largest mean-ablation drop",
        3,
        Unit::Fraction,
    ),
    Number::new(
        "min_mean_ablation_drop",
        "smallest mean-ablation drop",
        3,
        Unit::Fraction,
    ),
    Number::new(
        "max_resample_ablation_drop",
        "largest resample-ablation drop",
        3,
        Unit::Fraction,
    ),
    Number::new(
        "min_resample_ablation_drop",
        "smallest resample-ablation drop",
        3,
        Unit::Fraction,
    ),
    Number::new("removable_heads", "removable heads", 2, Unit::Plain),
    Number::new(
        "removable_ranked",
        "removable heads (ranked)",
        2,
        Unit::Plain,
    ),
    Number::new(
        "acc_half_pruned",
        "acc, half the heads pruned",
        4,
        Unit::Fraction,
    ),
    Number::new("acc_one_head_left", "acc, one head left", 4, Unit::Fraction),
    Number::new("qk_cosine_end", "QK cosine (end)", 4, Unit::Plain),
    Number::new("ov_cosine_end", "OV cosine (end)", 4, Unit::Plain),
    Number::new("pattern_js_end", "pattern JS (end)", 4, Unit::Plain),
    Number::new("never_differ", "heads never differ", 2, Unit::Plain),
    Number::new(
        "first_differ_step",
        "heads first differ at step",
        0,
        Unit::Plain,
    ),
    Number::new("max_q_composition", "largest Q-composition", 3, Unit::Plain),
    Number::new("max_k_composition", "largest K-composition", 3, Unit::Plain),
    Number::new("max_v_composition", "largest V-composition", 3, Unit::Plain),
    Number::new(
        "answer_best_restored",
        "best head restored (answer pairs)",
        3,
        Unit::Fraction,
    ),
    Number::new(
        "answer_layer_path_q",
        "L0 -> L1 through Q (answer pairs)",
        3,
        Unit::Fraction,
    ),
    Number::new(
        "answer_layer_path_k",
        "L0 -> L1 through K (answer pairs)",
        3,
        Unit::Fraction,
    ),
    Number::new(
        "answer_layer_path_v",
        "L0 -> L1 through V (answer pairs)",
        3,
        Unit::Fraction,
    ),
    Number::new(
        "route_best_restored",
        "best head restored (route pairs)",
        3,
        Unit::Fraction,
    ),
    Number::new(
        "route_layer_path_q",
        "L0 -> L1 through Q (route pairs)",
        3,
        Unit::Fraction,
    ),
    Number::new(
        "route_layer_path_k",
        "L0 -> L1 through K (route pairs)",
        3,
        Unit::Fraction,
    ),
    Number::new(
        "route_layer_path_v",
        "L0 -> L1 through V (route pairs)",
        3,
        Unit::Fraction,
    ),
    Number::new(
        "ceiling",
        "ceiling (Bayes-optimal accuracy)",
        3,
        Unit::Fraction,
    ),
    Number::new("model_over_ceiling", "accuracy / ceiling", 3, Unit::Plain),
    Number::new("noun_ceiling", "noun ceiling", 3, Unit::Fraction),
    Number::new("noun_accuracy", "noun accuracy", 3, Unit::Fraction),
    Number::new("verb_ceiling", "verb ceiling", 3, Unit::Fraction),
    Number::new("verb_accuracy", "verb accuracy", 3, Unit::Fraction),
    Number::new(
        "agreement_none",
        "agreement, no attractor",
        3,
        Unit::Fraction,
    ),
    Number::new(
        "agreement_same",
        "agreement, attractor of the same number",
        3,
        Unit::Fraction,
    ),
    Number::new(
        "agreement_different",
        "agreement, attractor of the other number",
        3,
        Unit::Fraction,
    ),
    Number::new("attention_params", "attention params", 0, Unit::Plain),
    Number::new("n_params", "all params", 0, Unit::Plain),
    Number::new("total_heads", "heads (all layers)", 0, Unit::Plain),
];

/// Each head's numbers, followed across seeds through the matching. A head has a number only where its report has it.
pub const HEAD_NUMBERS: [Number; 7] = [
    Number::new("ablation_drop", "ablation drop", 3, Unit::Fraction),
    Number::new(
        "mean_ablation_drop",
        "mean-ablation drop",
        3,
        Unit::Fraction,
    ),
    Number::new(
        "resample_ablation_drop",
        "resample-ablation drop",
        3,
        Unit::Fraction,
    ),
    Number::new(
        "direct_logit_attribution",
        "direct logit attribution",
        2,
        Unit::Logits,
    ),
    Number::new("copying_score", "copying score", 2, Unit::Plain),
    Number::new(
        "answer_restored",
        "restored (answer pairs)",
        3,
        Unit::Fraction,
    ),
    Number::new(
        "route_restored",
        "restored (route pairs)",
        3,
        Unit::Fraction,
    ),
];

/// A snapshot's heads count as identical while their mean QK cosine is within this of 1.
pub const IDENTICAL: f64 = 1e-4;

/// One run's row: its state, and its numbers when it is trained (and inspected).
pub fn read_run(sweep: &Sweep, out: &SweepOut, run: &PlannedRun) -> RunRow {
    let state = run_state(out, run, &sweep.inspect);
    let mut row = RunRow {
        name: run.name.clone(),
        state: state.label().to_string(),
        damage: None,
        config: run.config_stem.clone(),
        seed: run.seed,
        grid: run.grid.clone(),
        numbers: BTreeMap::new(),
        heads: Vec::new(),
        relations: None,
        head_numbers: BTreeMap::new(),
    };
    // Read to the last byte before a number is taken: a damaged run never reaches a report.
    let damaged = match &state {
        RunState::Damaged(damaged) => Some(damaged.clone()),
        RunState::Done => verify_run(out, run, sweep.inspect.enabled),
        RunState::Trained | RunState::StaleReport(_) => verify_run(out, run, false),
        // A sealed run that no longer opens may be damage (a flipped byte in its config).
        RunState::Conflict(_) => verify_run(out, run, false),
        _ => return row,
    };
    if let Some(damaged) = damaged {
        record_damage(out, run, &damaged);
        row.state = "damaged".to_string();
        row.damage = Some(damaged.describe());
        return row;
    }
    let Ok(dir) = RunDir::open(&out.run_dir(run)) else {
        return row;
    };
    add_training_numbers(&mut row.numbers, &dir.metrics());
    // A report's numbers only from a report the sweep counts: complete, of the run's current
    // files, measured with the sweep's options (a stale or unfinished one is left out).
    if state != RunState::Done || !sweep.inspect.enabled {
        return row;
    }
    let report = ReportDir::of_run(&dir);
    if let Ok(summary) = report.read_json::<Summary>() {
        // A number left out of the report (null: never for a run a sweep trained) is left
        // out of the row too.
        let numbers = [
            ("eval_token_acc", summary.eval_token_acc),
            ("heads_with_role", Some(summary.heads_with_role as f64)),
            ("mean_pattern_js", Some(summary.mean_pattern_js)),
            ("removable_heads", summary.removable_heads.map(|n| n as f64)),
            ("attention_params", Some(summary.attention_params as f64)),
            ("n_params", Some(summary.n_params as f64)),
        ];
        row.numbers.extend(
            numbers
                .into_iter()
                .filter_map(|(key, value)| value.map(|v| (key, v))),
        );
    }
    row.heads = report.read_json::<Vec<HeadRecord>>().unwrap_or_default();
    row.relations = report.read_json::<Relations>().ok();
    add_head_numbers(&mut row);
    if let Ok(pruning) = report.read_json::<Pruning>() {
        add_pruning_numbers(&mut row.numbers, &pruning);
    }
    if let Ok(points) = report.read_divergence() {
        add_divergence_numbers(&mut row.numbers, &points);
    }
    if let Ok(circuits) = report.read_json::<Circuits>() {
        add_composition_numbers(&mut row.numbers, &circuits);
    }
    if let Ok(patching) = report.read_json::<Patching>() {
        add_patching_numbers(&mut row, &patching);
    }
    if let Ok(ceiling) = report.read_json::<Ceiling>() {
        add_ceiling_numbers(&mut row.numbers, &ceiling);
    }
    if let Ok(agreement) = report.read_json::<Agreement>() {
        add_agreement_numbers(&mut row.numbers, &agreement);
    }
    row
}

/// From `agreement.json` (word tasks): subject-verb agreement per kind of attractor.
pub fn add_agreement_numbers(numbers: &mut BTreeMap<&'static str, f64>, agreement: &Agreement) {
    for case in agreement.cases.iter().filter(|c| c.verbs > 0) {
        let key = match case.attractor {
            Attractor::None => "agreement_none",
            Attractor::Same => "agreement_same",
            Attractor::Different => "agreement_different",
        };
        numbers.insert(key, case.agreement);
    }
}

/// From `ceiling.json` (word tasks): the ceiling and the model's share of it over every
/// masked word, and both for masked nouns and verbs.
pub fn add_ceiling_numbers(numbers: &mut BTreeMap<&'static str, f64>, ceiling: &Ceiling) {
    numbers.insert("ceiling", ceiling.ceiling);
    if ceiling.ceiling > 0.0 {
        numbers.insert("model_over_ceiling", ceiling.model / ceiling.ceiling);
    }
    for (class, ceiling_key, model_key) in [
        (WordClass::Noun, "noun_ceiling", "noun_accuracy"),
        (WordClass::Verb, "verb_ceiling", "verb_accuracy"),
    ] {
        if let Some(row) = ceiling.classes.iter().find(|c| c.class == class) {
            numbers.insert(ceiling_key, row.ceiling);
            numbers.insert(model_key, row.model);
        }
    }
}

/// From `heads.json`: the largest and smallest drop under each ablation, and each head's
/// own numbers.
fn add_head_numbers(row: &mut RunRow) {
    if row.heads.is_empty() {
        return;
    }
    type Drop = fn(&HeadRecord) -> Option<f64>;
    let kinds: [(Drop, &'static str, &'static str); 3] = [
        (
            |h| h.ablation_drop,
            "max_ablation_drop",
            "min_ablation_drop",
        ),
        (
            |h| h.mean_ablation_drop,
            "max_mean_ablation_drop",
            "min_mean_ablation_drop",
        ),
        (
            |h| h.resample_ablation_drop,
            "max_resample_ablation_drop",
            "min_resample_ablation_drop",
        ),
    ];
    for (drop, max_key, min_key) in kinds {
        let drops: Vec<f64> = row.heads.iter().filter_map(drop).collect();
        if drops.len() == row.heads.len() {
            row.numbers
                .insert(max_key, drops.iter().copied().fold(f64::MIN, f64::max));
            row.numbers
                .insert(min_key, drops.iter().copied().fold(f64::MAX, f64::min));
        }
    }
    row.numbers.insert("total_heads", row.heads.len() as f64);
    for head in &row.heads {
        let numbers = row.head_numbers.entry(head.id).or_default();
        numbers.extend(head.ablation_drop.map(|d| ("ablation_drop", d)));
        numbers.extend(head.mean_ablation_drop.map(|d| ("mean_ablation_drop", d)));
        numbers.extend(
            head.resample_ablation_drop
                .map(|d| ("resample_ablation_drop", d)),
        );
        numbers.extend(
            head.direct_logit_attribution
                .map(|d| ("direct_logit_attribution", d)),
        );
        numbers.insert("copying_score", head.copying_score);
    }
}

/// From `circuits.json`: the largest Q-, K- and V-composition score of any earlier head
/// with any later one (models of two layers or more).
pub fn add_composition_numbers(numbers: &mut BTreeMap<&'static str, f64>, circuits: &Circuits) {
    if circuits.composition.is_empty() {
        return;
    }
    let largest = |matrix: fn(&inspect::circuits::LayerComposition) -> &Vec<Vec<f64>>| {
        circuits
            .composition
            .iter()
            .flat_map(|pair| matrix(pair).iter().flatten().copied())
            .fold(f64::MIN, f64::max)
    };
    numbers.insert("max_q_composition", largest(|p| &p.q));
    numbers.insert("max_k_composition", largest(|p| &p.k));
    numbers.insert("max_v_composition", largest(|p| &p.v));
}

/// From `patching.json`, per kind of pair: the best head's restored fraction, the layer 0
/// -> layer 1 paths through Q, K and V, and each head's restored fraction.
pub fn add_patching_numbers(row: &mut RunRow, patching: &Patching) {
    type Keys = [&'static str; 5];
    let sections: [(Option<&PairPatching>, Keys); 2] = [
        (
            patching.answer.as_ref(),
            [
                "answer_best_restored",
                "answer_layer_path_q",
                "answer_layer_path_k",
                "answer_layer_path_v",
                "answer_restored",
            ],
        ),
        (
            patching.route.as_ref(),
            [
                "route_best_restored",
                "route_layer_path_q",
                "route_layer_path_k",
                "route_layer_path_v",
                "route_restored",
            ],
        ),
    ];
    for (section, [best, q, k, v, per_head]) in sections {
        let Some(section) = section else {
            continue;
        };
        let restored: Vec<f64> = section.heads.iter().filter_map(|h| h.restored).collect();
        if !restored.is_empty() {
            row.numbers
                .insert(best, restored.iter().copied().fold(f64::MIN, f64::max));
        }
        for (key, channel) in [
            (q, PathChannel::Query),
            (k, PathChannel::Key),
            (v, PathChannel::Value),
        ] {
            let path = section
                .layer_paths
                .iter()
                .find(|p| p.sender_layer == 0 && p.receiver_layer == 1 && p.channel == channel);
            row.numbers
                .extend(path.and_then(|p| p.restored).map(|r| (key, r)));
        }
        for head in &section.heads {
            if let Some(restored) = head.restored {
                row.head_numbers
                    .entry(head.id)
                    .or_default()
                    .insert(per_head, restored);
            }
        }
    }
}

/// From `pruning.json`: how many heads the ranked order removes within the tolerance, and
/// the greedy curve's accuracy with half the heads removed (rounded down) and with one left
/// (none without a greedy curve: an imported model's).
pub fn add_pruning_numbers(numbers: &mut BTreeMap<&'static str, f64>, pruning: &Pruning) {
    numbers.insert("removable_ranked", pruning.ranked.removable as f64);
    let accuracy_after = |removed: usize| {
        pruning
            .greedy
            .iter()
            .flat_map(|greedy| &greedy.steps)
            .find(|step| step.heads_removed == removed)
            .map(|step| step.token_acc)
    };
    let total = pruning.total_heads;
    if total >= 2 {
        numbers.extend(accuracy_after(total / 2).map(|acc| ("acc_half_pruned", acc)));
        numbers.extend(accuracy_after(total - 1).map(|acc| ("acc_one_head_left", acc)));
    }
}

/// From `divergence.csv`: the last snapshot's means over layers, whether the heads ever
/// differ, and the first step they do.
pub fn add_divergence_numbers(
    numbers: &mut BTreeMap<&'static str, f64>,
    points: &[DivergencePoint],
) {
    // step -> (sums of qk, ov, js; layers)
    let mut by_step: BTreeMap<u64, ([f64; 3], usize)> = BTreeMap::new();
    for point in points {
        let entry = by_step.entry(point.step as u64).or_default();
        let values = [point.qk_cosine, point.ov_cosine, point.pattern_js];
        for (sum, value) in entry.0.iter_mut().zip(values) {
            *sum += value;
        }
        entry.1 += 1;
    }
    let means = |(sums, n): &([f64; 3], usize)| sums.map(|s| s / *n as f64);
    let Some(last) = by_step.values().last() else {
        return;
    };
    let [qk, ov, js] = means(last);
    numbers.extend([
        ("qk_cosine_end", qk),
        ("ov_cosine_end", ov),
        ("pattern_js_end", js),
    ]);
    let first = by_step
        .iter()
        .find(|(_, entry)| means(entry)[0] < 1.0 - IDENTICAL)
        .map(|(step, _)| *step);
    numbers.insert("never_differ", if first.is_none() { 1.0 } else { 0.0 });
    if let Some(step) = first {
        numbers.insert("first_differ_step", step as f64);
    }
}

/// Steps, time, the last evaluation and the first step at 99%, from `metrics.jsonl`.
pub fn add_training_numbers(numbers: &mut BTreeMap<&'static str, f64>, records: &[MetricsRecord]) {
    let Some(last) = records.last() else {
        return;
    };
    numbers.insert("steps", last.step as f64);
    if last.step > 0 {
        numbers.insert("ms_per_step", last.elapsed_s * 1000.0 / last.step as f64);
    }
    if let Some(eval) = records.iter().rev().find(|r| r.eval_token_acc.is_some()) {
        numbers.insert("eval_token_acc", eval.eval_token_acc.unwrap_or_default());
        if let Some(seq) = eval.eval_seq_acc {
            numbers.insert("eval_seq_acc", seq);
        }
    }
    if let Some(first) = records
        .iter()
        .find(|r| r.eval_token_acc.is_some_and(|acc| acc >= SOLVED))
    {
        numbers.insert("steps_to_99", first.step as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use inspect::measures::divergence::from_csv;

    fn record(step: usize, elapsed_s: f64, acc: Option<f64>) -> MetricsRecord {
        MetricsRecord {
            step,
            loss: 1.0,
            lr: 1e-3,
            tokens_per_s: 1.0,
            elapsed_s,
            eval_loss: acc.map(|_| 1.0),
            eval_token_acc: acc,
            eval_seq_acc: acc.map(|a| a / 2.0),
        }
    }

    #[test]
    fn pruning_numbers_come_from_the_curves() {
        use inspect::interventions::pruning::{PruneCurve, PruneStep};
        let curve = |accuracies: &[f64], removable| PruneCurve {
            steps: accuracies
                .iter()
                .enumerate()
                .map(|(i, &token_acc)| PruneStep {
                    heads_removed: i + 1,
                    removed: HeadId::new(0, i),
                    token_acc,
                })
                .collect(),
            removable,
        };
        let pruning = Pruning {
            base_token_acc: 1.0,
            tolerance: 0.01,
            total_heads: 4,
            ranked: curve(&[0.9, 0.5, 0.3, 0.1], 0),
            greedy: Some(curve(&[0.995, 0.8, 0.4, 0.1], 1)),
        };
        let mut numbers = BTreeMap::new();
        add_pruning_numbers(&mut numbers, &pruning);
        assert_eq!(numbers["removable_ranked"], 0.0);
        assert_eq!(numbers["acc_half_pruned"], 0.8, "two of four removed");
        assert_eq!(numbers["acc_one_head_left"], 0.4, "three of four removed");
    }

    #[test]
    fn training_numbers_come_from_the_metrics() {
        let records = [
            record(10, 1.0, Some(0.5)),
            record(20, 2.0, Some(0.995)),
            record(30, 3.0, Some(0.98)),
            record(40, 4.0, None),
        ];
        let mut numbers = BTreeMap::new();
        add_training_numbers(&mut numbers, &records);
        assert_eq!(numbers["steps"], 40.0);
        assert_eq!(numbers["ms_per_step"], 100.0);
        assert_eq!(numbers["eval_token_acc"], 0.98, "the last evaluation");
        assert_eq!(numbers["eval_seq_acc"], 0.49);
        assert_eq!(numbers["steps_to_99"], 20.0, "the first evaluation at 99%");
        let mut never = BTreeMap::new();
        add_training_numbers(&mut never, &records[..1]);
        assert!(!never.contains_key("steps_to_99"));
    }

    #[test]
    fn divergence_numbers_average_layers_and_find_the_first_split() {
        let csv = "step,layer,qk_cosine,ov_cosine,pattern_js\n\
                   0,0,1.0,1.0,0.0\n0,1,1.0,1.0,0.0\n\
                   50,0,1.0,1.0,0.0\n50,1,0.99,0.9,0.2\n\
                   100,0,0.8,0.6,0.3\n100,1,0.6,0.4,0.5\n";
        let mut numbers = BTreeMap::new();
        add_divergence_numbers(&mut numbers, &from_csv(csv).unwrap());
        assert!((numbers["qk_cosine_end"] - 0.7).abs() < 1e-12);
        assert!((numbers["ov_cosine_end"] - 0.5).abs() < 1e-12);
        assert!((numbers["pattern_js_end"] - 0.4).abs() < 1e-12);
        assert_eq!(numbers["first_differ_step"], 50.0);
        assert_eq!(numbers["never_differ"], 0.0);

        let identical = "step,layer,qk_cosine,ov_cosine,pattern_js\n0,0,1,1,0\n50,0,0.99999,1,0\n";
        let mut numbers = BTreeMap::new();
        add_divergence_numbers(&mut numbers, &from_csv(identical).unwrap());
        assert_eq!(numbers["never_differ"], 1.0);
        assert!(!numbers.contains_key("first_differ_step"));
    }
}
