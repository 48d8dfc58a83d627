//! `sweep report`: every run of a sweep in one table, and what holds across seeds.
//!
//! Writes into `OUT/_sweep/report/`:
//! - `sweep.csv`: one row per run (its state, the grid keys as columns, its training and
//!   report numbers); `heads.csv`: one row per head per run.
//! - `report.md`: per grid point, the mean and 95% confidence interval over seeds of each
//!   number; per grid point and layer, how many seeds have a head of each role, against the
//!   same count on untrained models of the same configs and seeds (the null: a role that
//!   untrained models "have" as often says nothing); per grid point, the heads matched across
//!   seeds as `compare` matches them, with each slot's most frequent role; for word tasks
//!   (`grammar`), per relation and direction, the best head's score over seeds against the
//!   best-offset baseline, in how many seeds it beats it (trained, and untrained as the
//!   null), and in which layer it sits.
//! - `report.json`: all of it, for Python.
//! - `figures/*.png`: per number, its distribution over seeds at each grid point.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use burn::tensor::Device;
use inspect::compare::Comparison;
use inspect::heads::{HeadRecord, head_roles};
use inspect::probe::Probe;
use inspect::pruning::Pruning;
use inspect::relations::{BestHead, BestHeads, Relations, measure_relations};
use inspect::report::Summary;
use serde::Serialize;
use train::RunDir;
use train::metrics::MetricsRecord;

use crate::spec::{PlannedRun, Sweep};
use crate::state::{RunState, SweepOut, run_state};
use crate::stats::{Estimate, wilson};

/// Eval token accuracy that counts as solving the task in "steps to 99%".
const SOLVED: f64 = 0.99;

/// Most sequences in the probe that matches heads across seeds.
const MATCH_PROBE: usize = 64;

/// One run's numbers.
#[derive(Debug, Clone, Serialize)]
pub struct RunRow {
    /// Run name.
    pub name: String,
    /// Its state (`done`, `failed`, ...).
    pub state: String,
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
}

/// The numbers of a run, in table order: key, column title, decimals. A run has a number
/// only where it applies (`steps_to_99` once it reached 99%, the divergence numbers with
/// snapshots, `first_differ_step` once its heads differ); tables leave out columns no run has.
pub const NUMBERS: [(&str, &str, usize); 21] = [
    ("eval_token_acc", "eval token acc", 4),
    ("eval_seq_acc", "eval seq acc", 4),
    ("steps_to_99", "steps to 99%", 0),
    ("steps", "steps", 0),
    ("ms_per_step", "ms per step", 1),
    ("heads_with_role", "heads with a role", 2),
    ("mean_pattern_js", "mean pattern JS", 3),
    ("max_ablation_drop", "largest ablation drop", 3),
    ("min_ablation_drop", "smallest ablation drop", 3),
    ("removable_heads", "removable heads", 2),
    ("removable_ranked", "removable heads (ranked)", 2),
    ("acc_half_pruned", "acc, half the heads pruned", 4),
    ("acc_one_head_left", "acc, one head left", 4),
    ("qk_cosine_end", "QK cosine (end)", 4),
    ("ov_cosine_end", "OV cosine (end)", 4),
    ("pattern_js_end", "pattern JS (end)", 4),
    ("never_differ", "heads never differ", 2),
    ("first_differ_step", "heads first differ at step", 0),
    ("attention_params", "attention params", 0),
    ("n_params", "all params", 0),
    ("n_heads", "heads", 0),
];

/// A snapshot's heads count as identical while their mean QK cosine is within this of 1.
const IDENTICAL: f64 = 1e-4;

/// The numbers drawn as figures.
const FIGURES: [&str; 4] = [
    "eval_token_acc",
    "steps_to_99",
    "heads_with_role",
    "removable_heads",
];

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
    /// Seeds counted.
    pub of: usize,
    /// Layer -> seeds whose best head sits in it.
    pub best_layers: BTreeMap<usize, usize>,
}

/// [`Estimate`] for JSON.
#[derive(Debug, Clone, Serialize)]
pub struct EstimateJson {
    /// Values.
    pub n: usize,
    /// Mean.
    pub mean: f64,
    /// 95% half-width (null with one value).
    pub ci95: Option<f64>,
}

impl EstimateJson {
    /// "mean ± half-width" with `digits` decimals, as [`Estimate::show`] writes it.
    fn show(&self, digits: usize) -> String {
        Estimate {
            n: self.n,
            mean: self.mean,
            half_width: self.ci95.unwrap_or(f64::NAN),
        }
        .show(digits)
    }
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
    /// Layer.
    pub layer: usize,
    /// The reference seed's head.
    pub head: usize,
    /// The most frequent role of the matched heads ("mixed" if none has a role).
    pub role: String,
    /// In how many seeds the matched head has that role.
    pub count: usize,
    /// Seeds matched.
    pub of: usize,
    /// Mean pattern similarity to the reference head (over the other seeds).
    pub mean_similarity: f64,
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
}

/// Reads every run, writes the report into `OUT/_sweep/report/` and returns it.
pub fn write_report(sweep: &Sweep, out: &SweepOut) -> anyhow::Result<SweepReport> {
    let dir = out.sweep_dir().join("report");
    let figures = dir.join("figures");
    std::fs::create_dir_all(&figures)?;
    let rows: Vec<RunRow> = sweep
        .runs
        .iter()
        .map(|run| read_run(sweep, out, run))
        .collect();
    let mut points = Vec::new();
    for (point, runs) in group_by_point(sweep) {
        let point_rows: Vec<&RunRow> = runs
            .iter()
            .map(|run| &rows[run.index])
            .filter(|row| row.state == "done")
            .collect();
        let done_runs: Vec<&PlannedRun> = runs
            .iter()
            .copied()
            .filter(|run| rows[run.index].state == "done")
            .collect();
        let matching = match_seeds(out, &done_runs, &dir.join("matching").join(slug(&point)));
        points.push(point_report(point, runs.len(), &point_rows, matching));
    }
    let mut files = vec![
        write_file(&dir.join("sweep.csv"), &runs_csv(sweep, &rows))?,
        write_file(&dir.join("heads.csv"), &heads_csv(sweep, &rows))?,
    ];
    for (key, title, _) in NUMBERS.iter().filter(|(key, _, _)| FIGURES.contains(key)) {
        let path = figures.join(format!("{key}.png"));
        crate::figures::distribution(&path, title, key, &sweep_points(&points, &rows, sweep))?;
        files.push(path);
    }
    let mut report = SweepReport {
        sweep: sweep.name.clone(),
        grid_keys: sweep.grid_keys.clone(),
        runs: rows,
        points,
        files: Vec::new(),
    };
    files.push(write_file(&dir.join("report.md"), &markdown(&report))?);
    files.push(dir.join("report.json"));
    report.files = files;
    write_file(
        &dir.join("report.json"),
        &serde_json::to_string_pretty(&report)?,
    )?;
    Ok(report)
}

/// Per grid point, in plan order, its runs.
fn group_by_point(sweep: &Sweep) -> Vec<(String, Vec<&PlannedRun>)> {
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

/// Values of each grid point's done runs, for the figures.
fn sweep_points<'a>(
    points: &'a [PointReport],
    rows: &'a [RunRow],
    sweep: &'a Sweep,
) -> Vec<(&'a str, Vec<&'a RunRow>)> {
    points
        .iter()
        .map(|point| {
            let runs = sweep
                .runs
                .iter()
                .filter(|run| run.point() == point.point)
                .map(|run| &rows[run.index])
                .filter(|row| row.state == "done")
                .collect();
            (point.point.as_str(), runs)
        })
        .collect()
}

fn read_run(sweep: &Sweep, out: &SweepOut, run: &PlannedRun) -> RunRow {
    let state = run_state(out, run, sweep.inspect.enabled);
    let mut row = RunRow {
        name: run.name.clone(),
        state: state.label().to_string(),
        config: run.config_stem.clone(),
        seed: run.seed,
        grid: run.grid.clone(),
        numbers: BTreeMap::new(),
        heads: Vec::new(),
        relations: None,
    };
    if !matches!(state, RunState::Done | RunState::Trained) {
        return row;
    }
    let Ok(dir) = RunDir::open(&out.run_dir(run)) else {
        return row;
    };
    add_training_numbers(&mut row.numbers, &dir.metrics());
    let report = dir.report_dir();
    if let Some(summary) = read_json::<Summary>(&report.join("summary.json")) {
        let numbers = [
            ("eval_token_acc", summary.eval_token_acc),
            ("heads_with_role", summary.heads_with_role as f64),
            ("mean_pattern_js", summary.mean_pattern_js),
            ("removable_heads", summary.removable_heads as f64),
            ("attention_params", summary.attention_params as f64),
            ("n_params", summary.n_params as f64),
        ];
        row.numbers.extend(numbers);
    }
    row.heads = read_json(&report.join("heads.json")).unwrap_or_default();
    row.relations = read_json(&report.join("relations.json"));
    let drops = row.heads.iter().map(|h| h.ablation_drop);
    if !row.heads.is_empty() {
        row.numbers
            .insert("max_ablation_drop", drops.clone().fold(f64::MIN, f64::max));
        row.numbers
            .insert("min_ablation_drop", drops.fold(f64::MAX, f64::min));
        row.numbers.insert("n_heads", row.heads.len() as f64);
    }
    if let Some(pruning) = read_json::<Pruning>(&report.join("pruning.json")) {
        add_pruning_numbers(&mut row.numbers, &pruning);
    }
    if let Ok(text) = std::fs::read_to_string(report.join("divergence.csv")) {
        add_divergence_numbers(&mut row.numbers, &text);
    }
    row
}

/// From `pruning.json`: how many heads the ranked order removes within the tolerance, and
/// the greedy curve's accuracy with half the heads removed (rounded down) and with one left.
pub fn add_pruning_numbers(numbers: &mut BTreeMap<&'static str, f64>, pruning: &Pruning) {
    numbers.insert("removable_ranked", pruning.ranked.removable as f64);
    let accuracy_after = |removed: usize| {
        pruning
            .greedy
            .steps
            .iter()
            .find(|step| step.heads_removed == removed)
            .map(|step| step.token_acc)
    };
    let total = pruning.total_heads;
    if total >= 2 {
        numbers.extend(accuracy_after(total / 2).map(|acc| ("acc_half_pruned", acc)));
        numbers.extend(accuracy_after(total - 1).map(|acc| ("acc_one_head_left", acc)));
    }
}

/// From `divergence.csv` (step, layer, qk_cosine, ov_cosine, pattern_js): the last
/// snapshot's means over layers, whether the heads ever differ, and the first step they do.
pub fn add_divergence_numbers(numbers: &mut BTreeMap<&'static str, f64>, csv: &str) {
    // step -> (sums of qk, ov, js; layers)
    let mut by_step: BTreeMap<u64, ([f64; 3], usize)> = BTreeMap::new();
    for line in csv.lines().skip(1) {
        let fields: Vec<f64> = line
            .split(',')
            .filter_map(|f| f.trim().parse().ok())
            .collect();
        if fields.len() != 5 {
            continue;
        }
        let entry = by_step.entry(fields[0] as u64).or_default();
        for (sum, value) in entry.0.iter_mut().zip(&fields[2..]) {
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

fn point_report(
    point: String,
    planned: usize,
    rows: &[&RunRow],
    matching: Result<Matched, String>,
) -> PointReport {
    let mut estimates = BTreeMap::new();
    for (key, _, _) in NUMBERS {
        let values: Vec<f64> = rows
            .iter()
            .filter_map(|r| r.numbers.get(key))
            .copied()
            .collect();
        if let Some(e) = Estimate::of(&values) {
            estimates.insert(key.to_string(), e.into());
        }
    }
    let reached_99 = rows
        .iter()
        .filter(|r| r.numbers.contains_key("steps_to_99"))
        .count();
    let trained_relations: Vec<&Relations> =
        rows.iter().filter_map(|r| r.relations.as_ref()).collect();
    let (roles, slots, matching_note, relations) = match matching {
        Ok(Matched {
            comparison,
            untrained_roles: untrained,
            untrained_relations,
        }) => {
            let n = comparison.runs.len();
            let roles = comparison
                .runs_with_role
                .iter()
                .zip(&untrained)
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
                .collect();
            let slots = comparison
                .slots
                .iter()
                .map(|slot| {
                    let mut counts: BTreeMap<&String, usize> = BTreeMap::new();
                    for role in slot.roles.iter().filter(|r| *r != "mixed") {
                        *counts.entry(role).or_default() += 1;
                    }
                    let (role, count) = counts
                        .into_iter()
                        .max_by_key(|(_, count)| *count)
                        .map_or(("mixed".to_string(), 0), |(r, c)| (r.clone(), c));
                    SlotReport {
                        layer: slot.layer,
                        head: slot.head,
                        role,
                        count,
                        of: slot.roles.len(),
                        mean_similarity: slot.mean_similarity,
                    }
                })
                .collect();
            let relations = relations_across_seeds(&trained_relations, &untrained_relations);
            (roles, slots, None, relations)
        }
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
        estimates,
        reached_99,
        roles,
        slots,
        matching_note,
        relations,
    }
}

/// Matches the heads of a grid point's done runs (as `compare` does, writing its files into
/// `dir`) and counts roles on untrained models of the same configs and seeds on the same probe.
fn match_seeds(out: &SweepOut, runs: &[&PlannedRun], dir: &Path) -> Result<Matched, String> {
    if runs.is_empty() {
        return Err("no run is done".to_string());
    }
    let dirs: Vec<PathBuf> = runs.iter().map(|run| out.run_dir(run)).collect();
    let loaded = inspect::compare::load_runs(&dirs).map_err(|e| e.to_string())?;
    let reference = &loaded[0];
    let probe_size = Probe::max_size(&reference.run, loaded.len()).clamp(1, MATCH_PROBE);
    let comparison =
        inspect::compare::compare(&loaded, dir, probe_size).map_err(|e| e.to_string())?;
    // The null on the same probe: untrained models, each seeded as its run was.
    let probe = Probe::new(
        &reference.run.task,
        probe_size,
        reference.run.config.seed,
        &reference.device,
    );
    let tokens = probe.token_ids();
    let n_layers = reference.model.blocks.len();
    let mut untrained: Vec<BTreeMap<String, usize>> = vec![BTreeMap::new(); n_layers];
    let mut untrained_relations = Vec::new();
    for run in &loaded {
        let device = Device::flex();
        device.seed(run.run.config.seed);
        let model = run
            .run
            .config
            .model
            .init(&run.run.io, &device)
            .map_err(|e| e.to_string())?;
        for (layer, probed) in probe.run(&model).iter().enumerate() {
            let roles: BTreeSet<String> = head_roles(&run.run.task, probed, &tokens)
                .into_iter()
                .map(|(_, role)| role)
                .collect();
            for role in roles {
                *untrained[layer].entry(role).or_default() += 1;
            }
        }
        let config = &run.run.config;
        untrained_relations.extend(measure_relations(
            &run.run.task,
            &model,
            config.seed,
            &device,
        ));
    }
    Ok(Matched {
        comparison,
        untrained_roles: untrained,
        untrained_relations,
    })
}

/// Heads matched across a grid point's seeds, and the nulls measured on untrained models.
struct Matched {
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
            let mut offsets: BTreeMap<i64, usize> = BTreeMap::new();
            for r in &seeds {
                *offsets.entry(r.baseline.offset).or_default() += 1;
            }
            let mut best_layers: BTreeMap<usize, usize> = BTreeMap::new();
            for b in &best {
                *best_layers.entry(b.layer).or_default() += 1;
            }
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
                of: seeds.len(),
                best_layers,
            });
        }
    }
    out
}

impl From<Estimate> for EstimateJson {
    fn from(e: Estimate) -> Self {
        EstimateJson {
            n: e.n,
            mean: e.mean,
            ci95: (!e.half_width.is_nan()).then_some(e.half_width),
        }
    }
}

/// One CSV line (RFC 4180): a field holding a comma, a quote or a line break is quoted.
/// Written here rather than with the `csv` crate, which asks for serde features the rest of
/// the workspace does not, and so would make every package rebuild Burn.
pub fn csv_line(fields: &[String]) -> String {
    let quoted: Vec<String> = fields
        .iter()
        .map(|field| {
            if field.contains([',', '"', '\n', '\r']) {
                format!("\"{}\"", field.replace('"', "\"\""))
            } else {
                field.clone()
            }
        })
        .collect();
    format!("{}\n", quoted.join(","))
}

fn runs_csv(sweep: &Sweep, rows: &[RunRow]) -> String {
    let mut header: Vec<String> = ["run", "state", "config", "seed"]
        .map(String::from)
        .to_vec();
    header.extend(sweep.grid_keys.iter().cloned());
    header.extend(NUMBERS.iter().map(|(key, _, _)| key.to_string()));
    let mut text = csv_line(&header);
    for row in rows {
        let mut record = vec![
            row.name.clone(),
            row.state.clone(),
            row.config.clone(),
            row.seed.to_string(),
        ];
        record.extend(sweep.grid_keys.iter().map(|k| row.grid[k].clone()));
        record.extend(NUMBERS.iter().map(|(key, _, _)| {
            row.numbers
                .get(key)
                .map_or(String::new(), |v| v.to_string())
        }));
        text.push_str(&csv_line(&record));
    }
    text
}

fn heads_csv(sweep: &Sweep, rows: &[RunRow]) -> String {
    let patterns: BTreeSet<&String> = rows
        .iter()
        .flat_map(|row| row.heads.iter().flat_map(|h| h.pattern_scores.keys()))
        .collect();
    let mut header: Vec<String> = ["run", "config", "seed"].map(String::from).to_vec();
    header.extend(sweep.grid_keys.iter().cloned());
    header.extend(
        [
            "layer",
            "head",
            "role",
            "entropy",
            "confidence",
            "mean_distance",
            "ablation_drop",
        ]
        .map(String::from),
    );
    header.extend(patterns.iter().map(|p| format!("score_{p}")));
    let mut text = csv_line(&header);
    for row in rows {
        for head in &row.heads {
            let mut record = vec![row.name.clone(), row.config.clone(), row.seed.to_string()];
            record.extend(sweep.grid_keys.iter().map(|k| row.grid[k].clone()));
            record.extend([
                head.layer.to_string(),
                head.head.to_string(),
                head.role.clone(),
                head.entropy.to_string(),
                head.confidence.to_string(),
                head.mean_distance.to_string(),
                head.ablation_drop.to_string(),
            ]);
            record.extend(patterns.iter().map(|p| {
                head.pattern_scores
                    .get(*p)
                    .map_or(String::new(), |v| v.to_string())
            }));
            text.push_str(&csv_line(&record));
        }
    }
    text
}

/// `report.md`.
pub fn markdown(report: &SweepReport) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "# Sweep `{}`\n", report.sweep);
    let done = report.runs.iter().filter(|r| r.state == "done").count();
    let _ = writeln!(
        md,
        "{done} of {} runs done. Each cell: mean ± 95% confidence interval over the seeds \
         done (Student's t); \"steps to 99%\" over the runs that reached 99% eval token \
         accuracy.\n",
        report.runs.len()
    );
    let columns: Vec<(&str, &str, usize)> = NUMBERS
        .into_iter()
        .filter(|(key, _, _)| report.points.iter().any(|p| p.estimates.contains_key(*key)))
        .collect();
    let mut header = "| grid point | seeds | reached 99% |".to_string();
    let mut rule = "| --- | --- | --- |".to_string();
    for (_, title, _) in &columns {
        let _ = write!(header, " {title} |");
        rule.push_str(" --- |");
    }
    let _ = writeln!(md, "{header}\n{rule}");
    for point in &report.points {
        let mut line = format!(
            "| {} | {} of {} | {} of {} |",
            point.point, point.runs, point.planned, point.reached_99, point.runs
        );
        for &(key, _, digits) in &columns {
            let cell = point
                .estimates
                .get(key)
                .map_or("-".to_string(), |e| e.show(digits));
            let _ = write!(line, " {cell} |");
        }
        let _ = writeln!(md, "{line}");
    }
    let _ = writeln!(
        md,
        "\n## Roles across seeds\n\nPer grid point and layer: in how many seeds at least one \
         head has the role (a role: 0.5 or more of a head's attention on one pattern), with \
         its 95% Wilson interval, and the same count on untrained models of the same configs \
         and seeds, measured on the same probe. Then each head of the first seed, matched in \
         every other seed as `compare` matches them: the matched heads' most frequent role.\n"
    );
    for point in &report.points {
        let _ = writeln!(md, "### {}\n", point.point);
        if let Some(note) = &point.matching_note {
            let _ = writeln!(md, "Not matched: {note}\n");
            continue;
        }
        let _ = writeln!(
            md,
            "| layer | role | trained | 95% interval | untrained |\n| --- | --- | --- | --- | --- |"
        );
        let mut any = false;
        for (layer, roles) in point.roles.iter().enumerate() {
            for (role, count) in roles {
                any = true;
                let (low, high) = wilson(count.trained, count.of);
                let _ = writeln!(
                    md,
                    "| {layer} | {role} | {} of {} | {:.0}% to {:.0}% | {} of {} |",
                    count.trained,
                    count.of,
                    low * 100.0,
                    high * 100.0,
                    count.untrained,
                    count.of
                );
            }
        }
        if !any {
            let _ = writeln!(md, "| - | no head has a role in any seed | | | |");
        }
        let _ = writeln!(
            md,
            "\n| slot | most frequent role | seeds | mean similarity |\n| --- | --- | --- | --- |"
        );
        for slot in &point.slots {
            let _ = writeln!(
                md,
                "| L{}H{} | {} | {} of {} | {:.2} |",
                slot.layer, slot.head, slot.role, slot.count, slot.of, slot.mean_similarity
            );
        }
        let _ = writeln!(md);
    }
    relations_markdown(&mut md, report);
    md
}

/// The "Syntax heads across seeds" section, when any grid point has relation scores.
fn relations_markdown(md: &mut String, report: &SweepReport) {
    if report.points.iter().all(|p| p.relations.is_empty()) {
        return;
    }
    let _ = writeln!(
        md,
        "## Syntax heads across seeds\n\nPer grid point, relation and direction (dep -> head: \
         the dependent's most-attended word is its head; head -> dep: the other way), each \
         seed's best head (Clark et al. 2019): its score with the 95% interval over seeds, the \
         best fixed offset's score, in how many seeds the best head beats that offset (with \
         its 95% Wilson interval, and the same count on untrained models of the same seeds), \
         and the layers the best heads sit in.\n"
    );
    for point in report.points.iter().filter(|p| !p.relations.is_empty()) {
        let _ = writeln!(
            md,
            "### {}\n\n| relation | direction | best head | offset baseline | beats it | \
             95% interval | untrained beats it | best head's layer |\n\
             | --- | --- | --- | --- | --- | --- | --- | --- |",
            point.point
        );
        for r in &point.relations {
            let (low, high) = wilson(r.beats_baseline, r.of);
            let direction = match r.direction {
                "dependent_to_head" => "dep -> head",
                _ => "head -> dep",
            };
            let untrained = r
                .untrained_beats_baseline
                .map_or("-".to_string(), |k| format!("{k} of {}", r.of));
            let layers: Vec<String> = r
                .best_layers
                .iter()
                .map(|(layer, seeds)| format!("L{layer}: {seeds}"))
                .collect();
            let _ = writeln!(
                md,
                "| {} | {direction} | {} | {} ({:+}) | {} of {} | {:.0}% to {:.0}% | {untrained} | {} |",
                r.relation,
                r.best_score.show(2),
                r.baseline.show(2),
                r.baseline_offset,
                r.beats_baseline,
                r.of,
                low * 100.0,
                high * 100.0,
                layers.join(", ")
            );
        }
        let _ = writeln!(md);
    }
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Option<T> {
    let bytes = std::fs::read(path).ok()?;
    serde_json::from_slice(&bytes).ok()
}

fn write_file(path: &Path, text: &str) -> anyhow::Result<PathBuf> {
    train::atomic::write_atomic(path, text.as_bytes())
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    Ok(path.to_path_buf())
}

/// A grid point as a directory name.
fn slug(point: &str) -> String {
    point
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

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

    /// One seed's `relations.json` with a single relation: its best head in each direction
    /// (layer, score) and the baseline's score.
    fn relations(
        dependent_to_head: (usize, f64),
        head_to_dependent: (usize, f64),
        baseline: f64,
    ) -> Relations {
        use inspect::relations::{Baseline, RelationScores};
        let best = |(layer, score): (usize, f64)| BestHead {
            layer,
            head: 0,
            score,
            beats_baseline: score > baseline,
        };
        Relations {
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
            }],
        }
    }

    #[test]
    fn relations_count_the_seeds_whose_best_head_beats_the_offset() {
        let seeds = [
            relations((1, 0.9), (0, 0.2), 0.7),
            relations((1, 0.8), (0, 0.3), 0.7),
            relations((0, 0.6), (2, 0.1), 0.7),
        ];
        let untrained = [relations((0, 0.2), (0, 0.1), 0.7)];
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
        let backward = &summary[1];
        assert_eq!(backward.direction, "head_to_dependent");
        assert_eq!(backward.beats_baseline, 0);
        assert_eq!(backward.best_layers, BTreeMap::from([(0, 2), (2, 1)]));
        assert!(relations_across_seeds(&[], &untrained).is_empty());
    }

    #[test]
    fn pruning_numbers_come_from_the_curves() {
        use inspect::pruning::{PruneCurve, PruneStep};
        let curve = |accuracies: &[f64], removable| PruneCurve {
            steps: accuracies
                .iter()
                .enumerate()
                .map(|(i, &token_acc)| PruneStep {
                    heads_removed: i + 1,
                    layer: 0,
                    head: i,
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
            greedy: curve(&[0.995, 0.8, 0.4, 0.1], 1),
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
        add_divergence_numbers(&mut numbers, csv);
        assert!((numbers["qk_cosine_end"] - 0.7).abs() < 1e-12);
        assert!((numbers["ov_cosine_end"] - 0.5).abs() < 1e-12);
        assert!((numbers["pattern_js_end"] - 0.4).abs() < 1e-12);
        assert_eq!(numbers["first_differ_step"], 50.0);
        assert_eq!(numbers["never_differ"], 0.0);

        let identical = "step,layer,qk_cosine,ov_cosine,pattern_js\n0,0,1,1,0\n50,0,0.99999,1,0\n";
        let mut numbers = BTreeMap::new();
        add_divergence_numbers(&mut numbers, identical);
        assert_eq!(numbers["never_differ"], 1.0);
        assert!(!numbers.contains_key("first_differ_step"));
    }

    #[test]
    fn csv_fields_with_commas_or_quotes_are_quoted() {
        let fields = ["plain", "a,b", "say \"hi\"", ""].map(String::from);
        assert_eq!(csv_line(&fields), "plain,\"a,b\",\"say \"\"hi\"\"\",\n");
    }
}
