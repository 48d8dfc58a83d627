//! Comparing runs of one task (typically one config trained with several seeds): every run
//! is probed on the reference run's probe sequences, its heads are matched to the
//! reference's per layer ([`crate::matching`]), and for each reference head ("slot") we
//! collect the matched heads' roles. A role found in the slot of every run is a regularity
//! of the task; one found in some runs only is an accident of the seed.
//!
//! Writes `matching.json` and `matched-attention.png` (slots x runs, the matched heads'
//! attention on probe sequence 0).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::figures::{self, FigureError};
use crate::matching::{LayerMatch, match_layers};
use crate::probe::{LayerProbe, Probe};
use crate::report::head_roles;
use crate::run::{LoadedRun, RunError};

/// One compared run, heads listed in the reference's slot order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComparedRun {
    /// The run directory.
    pub dir: PathBuf,
    /// Its seed.
    pub seed: u64,
    /// The last eval token accuracy in its `metrics.jsonl` (None if it never evaluated).
    pub eval_token_acc: Option<f64>,
    /// Per layer, the matching to the reference (identity for the reference itself).
    pub layers: Vec<LayerMatch>,
    /// Per layer, per slot: the role of the matched head.
    pub roles: Vec<Vec<String>>,
}

/// One reference head and what its matched heads did across runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Slot {
    /// Layer.
    pub layer: usize,
    /// The reference run's head.
    pub head: usize,
    /// The matched head's role in each run, reference first.
    pub roles: Vec<String>,
    /// The role if every run agrees on it (and it is not "mixed"), else None.
    pub consistent_role: Option<String>,
    /// Mean pattern similarity of the matched heads to the reference head, over the other
    /// runs (1 with no other run).
    pub mean_similarity: f64,
}

/// `matching.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// Sequences in the shared probe batch (drawn with the reference run's seed).
    pub probe_size: usize,
    /// Every run, the reference first.
    pub runs: Vec<ComparedRun>,
    /// One entry per reference head, layer-major.
    pub slots: Vec<Slot>,
    /// Per layer: for each role, in how many runs at least one head of the layer has it
    /// (independent of the matching).
    pub runs_with_role: Vec<BTreeMap<String, usize>>,
    /// Files written.
    pub files: Vec<PathBuf>,
}

/// Runs that cannot be compared.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    /// A run that does not load.
    #[error(transparent)]
    Run(#[from] RunError),
    /// A run of another task or shape.
    #[error(
        "{other} cannot be matched to {reference}: {what} differ ({reference_value} vs \
         {other_value}); compare runs of one task and one model shape"
    )]
    Mismatch {
        /// The reference run.
        reference: PathBuf,
        /// The run that differs.
        other: PathBuf,
        /// What differs.
        what: &'static str,
        /// The reference's value.
        reference_value: String,
        /// The other run's value.
        other_value: String,
    },
    /// The figure.
    #[error(transparent)]
    Figure(#[from] FigureError),
    /// `matching.json`.
    #[error("cannot write {path}: {error}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Why. Not a `source`: the message already says it, and `error: {e:#}` in main
        /// would print it twice.
        error: std::io::Error,
    },
}

/// Checks that `other` has the reference's task and head grid.
fn check_comparable(reference: &LoadedRun, other: &LoadedRun) -> Result<(), CompareError> {
    let mismatch = |what, a: String, b: String| CompareError::Mismatch {
        reference: reference.dir.clone(),
        other: other.dir.clone(),
        what,
        reference_value: a,
        other_value: b,
    };
    let (a, b) = (&reference.run.config, &other.run.config);
    if a.task != b.task {
        return Err(mismatch(
            "tasks",
            format!("{:?}", a.task),
            format!("{:?}", b.task),
        ));
    }
    let grid = |run: &LoadedRun| (run.model.blocks.len(), run.model.n_heads());
    if grid(reference) != grid(other) {
        return Err(mismatch(
            "layers x heads",
            format!("{:?}", grid(reference)),
            format!("{:?}", grid(other)),
        ));
    }
    Ok(())
}

/// Matches the heads of every run in `runs` to those of `runs[0]` and writes the comparison
/// into `out`.
pub fn compare(
    runs: &[LoadedRun],
    out: &Path,
    probe_size: usize,
) -> Result<Comparison, CompareError> {
    let reference = runs.first().expect("at least one run to compare");
    for other in &runs[1..] {
        check_comparable(reference, other)?;
    }
    let probe = Probe::new(
        &reference.run.task,
        probe_size,
        reference.run.config.seed,
        &reference.device,
    );
    let tokens = probe.token_ids();
    let probes: Vec<Vec<LayerProbe>> = runs.iter().map(|run| probe.run(&run.model)).collect();

    let compared: Vec<ComparedRun> = runs
        .iter()
        .zip(&probes)
        .map(|(run, layers)| {
            let matches = match_layers(&probes[0], layers);
            let roles = layers
                .iter()
                .zip(&matches)
                .map(|(layer, matched)| {
                    let own = head_roles(&reference.run.task, layer, &tokens);
                    matched.partner.iter().map(|&p| own[p].1.clone()).collect()
                })
                .collect();
            let eval_token_acc = train::metrics::read(&run.dir.join("metrics.jsonl"))
                .iter()
                .rev()
                .find_map(|r| r.eval_token_acc);
            ComparedRun {
                dir: run.dir.clone(),
                seed: run.run.config.seed,
                eval_token_acc,
                layers: matches,
                roles,
            }
        })
        .collect();

    let (n_layers, n_heads) = (reference.model.blocks.len(), reference.model.n_heads());
    let slots: Vec<Slot> = (0..n_layers)
        .flat_map(|l| (0..n_heads).map(move |h| (l, h)))
        .map(|(layer, head)| {
            let roles: Vec<String> = compared
                .iter()
                .map(|r| r.roles[layer][head].clone())
                .collect();
            let consistent_role = Some(roles[0].clone())
                .filter(|role| role != "mixed" && roles.iter().all(|r| r == role));
            let others: Vec<f64> = compared[1..]
                .iter()
                .map(|r| r.layers[layer].similarity[head])
                .collect();
            let mean_similarity = if others.is_empty() {
                1.0
            } else {
                others.iter().sum::<f64>() / others.len() as f64
            };
            Slot {
                layer,
                head,
                roles,
                consistent_role,
                mean_similarity,
            }
        })
        .collect();

    let runs_with_role: Vec<BTreeMap<String, usize>> = (0..n_layers)
        .map(|layer| {
            let mut counts = BTreeMap::new();
            for run in &compared {
                let distinct: BTreeSet<&String> = run.roles[layer].iter().collect();
                for role in distinct {
                    *counts.entry(role.clone()).or_insert(0) += 1;
                }
            }
            counts
        })
        .collect();

    let write_error = |path: &Path| {
        let path = path.to_path_buf();
        move |error| CompareError::Write { path, error }
    };
    std::fs::create_dir_all(out).map_err(write_error(out))?;
    let figure_path = out.join("matched-attention.png");
    matched_attention_figure(&figure_path, &probe, &probes, &compared, &slots)?;
    let json_path = out.join("matching.json");
    let mut comparison = Comparison {
        probe_size,
        runs: compared,
        slots,
        runs_with_role,
        files: vec![json_path.clone(), figure_path],
    };
    let json = serde_json::to_vec_pretty(&comparison).expect("comparison serializes");
    train::atomic::write_atomic(&json_path, &json).map_err(write_error(&json_path))?;
    comparison.files.sort();
    Ok(comparison)
}

/// Rows: slots (reference heads, layer-major); columns: runs; each panel the matched
/// head's attention on probe sequence 0.
fn matched_attention_figure(
    path: &Path,
    probe: &Probe,
    probes: &[Vec<LayerProbe>],
    compared: &[ComparedRun],
    slots: &[Slot],
) -> Result<(), FigureError> {
    let tokens = &probe.examples[0].input;
    let seq = tokens.len();
    let mut patterns = vec![];
    let mut captions = vec![];
    for slot in slots {
        let (mut row, mut row_captions) = (vec![], vec![]);
        for (run, layers) in compared.iter().zip(probes) {
            let matched = &run.layers[slot.layer];
            let partner = matched.partner[slot.head];
            row.push(layers[slot.layer].head_pattern(partner)[..seq * seq].to_vec());
            row_captions.push(format!(
                "seed {} L{}H{partner}: {} ({:.2})",
                run.seed,
                slot.layer,
                run.roles[slot.layer][slot.head],
                matched.similarity[slot.head]
            ));
        }
        patterns.push(row);
        captions.push(row_captions);
    }
    figures::attention_patterns(
        path,
        &figures::PatternFigure {
            title: "Matched heads: a column per run, a row per head of the first run \
                    (pattern similarity)",
            patterns: &patterns,
            tokens,
            captions: &captions,
        },
    )
}

/// The slot table printed on the terminal: one row per reference head, one column per run.
pub fn table(comparison: &Comparison) -> String {
    let mut header = format!("{:<6}", "slot");
    for run in &comparison.runs {
        header.push_str(&format!(" {:<24}", format!("seed {}", run.seed)));
    }
    header.push_str(" consistent");
    let mut lines = vec![header];
    for slot in &comparison.slots {
        let mut line = format!("L{}H{:<3} ", slot.layer, slot.head);
        for (run, role) in comparison.runs.iter().zip(&slot.roles) {
            let matched = &run.layers[slot.layer];
            line.push_str(&format!(
                "{:<24} ",
                format!(
                    "{role} H{} {:.2}",
                    matched.partner[slot.head], matched.similarity[slot.head]
                )
            ));
        }
        line.push_str(slot.consistent_role.as_deref().unwrap_or("-"));
        lines.push(line);
    }
    let n_runs = comparison.runs.len();
    for (layer, counts) in comparison.runs_with_role.iter().enumerate() {
        let counts: Vec<String> = counts
            .iter()
            .map(|(role, n)| format!("{role} in {n}/{n_runs}"))
            .collect();
        lines.push(format!(
            "layer {layer}: runs with a head of each role: {}",
            counts.join(", ")
        ));
    }
    lines.join("\n")
}
