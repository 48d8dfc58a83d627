//! The report's figures: which of [`crate::dir::FILES`]' figures a report
//! draws (by their presence), and what each is drawn from. Their captions on `index.html`
//! are the table's descriptions.

use std::path::{Path, PathBuf};

use crate::dir::{FILES, ReportContents, ReportDir};
use crate::draw::figures::{self, FigureError};
use inspect::inspection::Measured;
use inspect::load::loaded_run::LoadedRun;
use inspect::load::probe::Probe;
use inspect::measures::norms::head_weight_norm_pairs;

/// Draws every figure the report holds, in the page's order, and returns each with its
/// caption.
pub fn draw_figures(
    dir: &ReportDir,
    loaded: &LoadedRun,
    probe: &Probe,
    measured: &Measured,
) -> Result<Vec<(PathBuf, &'static str)>, FigureError> {
    let contents = ReportContents::of(measured, loaded);
    let mut drawn = vec![];
    for file in FILES
        .iter()
        .filter(|f| f.is_figure() && f.presence.holds(&contents))
    {
        let path = dir.path(file.name);
        draw_figure(file.name, &path, loaded, probe, measured)?;
        drawn.push((path, file.description));
    }
    Ok(drawn)
}

/// With `svg`, draws every figure the report holds again as `figures/NAME.svg` and returns
/// their paths; without, removes any such SVG an earlier report with `--svg` left (only
/// those names: nothing else in `figures/` is touched), so no figure goes stale beside its
/// PNG.
pub fn vector_copies(
    dir: &ReportDir,
    loaded: &LoadedRun,
    probe: &Probe,
    measured: &Measured,
    svg: bool,
) -> Result<Vec<PathBuf>, FigureError> {
    let contents = ReportContents::of(measured, loaded);
    let mut drawn = vec![];
    for file in FILES.iter().filter(|f| f.is_figure()) {
        let path = dir.path(file.name).with_extension("svg");
        if svg && file.presence.holds(&contents) {
            draw_figure(file.name, &path, loaded, probe, measured)?;
            drawn.push(path);
        } else if path.is_file() {
            std::fs::remove_file(&path).map_err(|e| FigureError {
                path: path.clone(),
                message: format!("could not remove the stale SVG: {e}"),
            })?;
        }
    }
    Ok(drawn)
}

/// Draws the figure `name` (a figure of `FILES`) into `path` (PNG, or SVG for a `.svg`
/// path).
fn draw_figure(
    name: &str,
    path: &Path,
    loaded: &LoadedRun,
    probe: &Probe,
    measured: &Measured,
) -> Result<(), FigureError> {
    let circuits = &measured.circuits;
    match name {
        "figures/attention.png" => draw_attention(path, probe, measured),
        "figures/rollout.png" => {
            figures::rollout(path, &circuits.rollout, &first_sequence_labels(probe))
        }
        "figures/relations.png" => figures::relations(
            path,
            measured
                .relations
                .as_ref()
                .expect("a word task has relations"),
        ),
        "figures/similarity.png" => figures::similarity(path, &measured.similarity),
        "figures/divergence.png" => figures::divergence(path, &measured.divergence),
        "figures/circuits.png" => figures::circuits(path, circuits),
        "figures/composition.png" => {
            figures::composition(path, &circuits.composition, circuits.random_composition)
        }
        "figures/norms.png" => draw_norms(path, loaded, measured),
        "figures/ablation.png" => figures::ablation(path, &measured.heads),
        "figures/patching.png" => figures::patching(
            path,
            measured
                .patching
                .as_ref()
                .expect("a task with pairs has patching"),
        ),
        "figures/paths.png" => figures::paths(
            path,
            measured
                .patching
                .as_ref()
                .expect("a task with pairs has patching"),
        ),
        "figures/pruning.png" => figures::pruning(
            path,
            measured
                .pruning
                .as_ref()
                .expect("a scored model has pruning"),
        ),
        "figures/trajectories.png" => figures::trajectories(
            path,
            measured
                .trajectories
                .as_ref()
                .expect("a run with snapshots has trajectories"),
            &loaded.dir.metrics(),
        ),
        "figures/training.png" => figures::training(path, &loaded.dir.metrics()),
        "figures/relations-over-training.png" => figures::relations_over_training(
            path,
            measured
                .relations_over_training
                .as_ref()
                .expect("a treebank reading with snapshots has relations over training"),
            &loaded.dir.metrics(),
        ),
        other => unreachable!("no drawing for the figure {other}"),
    }
}

/// `norms.png`: every head's attention weights against their weighted norms on the probe,
/// titled with the head's `norm_weight_correlation`.
fn draw_norms(path: &Path, loaded: &LoadedRun, measured: &Measured) -> Result<(), FigureError> {
    let panels: Vec<Vec<figures::NormPanel>> = measured
        .layers
        .iter()
        .enumerate()
        .map(|(l, layer)| {
            let (_, n_heads, _) = layer.dims();
            let attention = &loaded.model.blocks[l].attention;
            (0..n_heads)
                .map(|h| {
                    let record = &measured.heads[l * n_heads + h];
                    let correlation = record
                        .norm_weight_correlation
                        .map_or_else(|| "none".to_string(), |r| format!("{r:.2}"));
                    figures::NormPanel {
                        caption: format!("{}: correlation {correlation}", record.id),
                        pairs: head_weight_norm_pairs(layer, h, &attention.head_weights(h)),
                    }
                })
                .collect()
        })
        .collect();
    figures::norms(path, &panels)
}

/// `attention.png`: every head's pattern on probe sequence 0, captioned with its role.
fn draw_attention(path: &Path, probe: &Probe, measured: &Measured) -> Result<(), FigureError> {
    // Sequence 0's own `len x len` block: its first `len` rows of `seq` keys, each cut to
    // its `len` keys (typed sentences of several lengths are padded to the longest).
    let seq = probe.seq_len();
    let len = probe.examples.first().map_or(0, |e| e.input.len());
    let first_sequence: Vec<Vec<Vec<f32>>> = measured
        .layers
        .iter()
        .map(|layer| {
            let (_, n_heads, _) = layer.dims();
            (0..n_heads)
                .map(|h| {
                    let rows = layer.head_pattern(h);
                    (0..len)
                        .flat_map(|q| rows[q * seq..q * seq + len].iter().copied())
                        .collect()
                })
                .collect()
        })
        .collect();
    let captions: Vec<Vec<String>> = first_sequence
        .iter()
        .enumerate()
        .map(|(l, layer)| {
            (0..layer.len())
                .map(|h| {
                    let record = &measured.heads[l * layer.len() + h];
                    format!("{}: {}", record.id, record.role)
                })
                .collect()
        })
        .collect();
    figures::attention_patterns(
        path,
        &figures::PatternFigure {
            title: "Attention of each head on probe sequence 0 (row: query, column: key)",
            patterns: &first_sequence,
            labels: &first_sequence_labels(probe),
            captions: &captions,
        },
    )
}

/// Axis labels of probe sequence 0: its words, or token ids for tasks of numbers.
pub fn first_sequence_labels(probe: &Probe) -> Vec<String> {
    figures::token_labels(&probe.examples[0].input, probe.token_names.as_deref())
}
