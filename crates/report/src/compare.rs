//! `headlab compare`'s output: what [`inspect::compare::compare`] measured, written as
//! `matching.json`, `matched-attention.png` (slots x runs, the matched heads' attention on
//! probe sequence 0; `.svg` too on request) and the interactive `compare.html`
//! ([`crate::draw::compare_page`]), and the slot table printed on the terminal.

use std::path::{Path, PathBuf};

use inspect::compare::{CompareError, Compared, ComparedRun, Comparison, Matching, Slot};
use inspect::load::loaded_run::LoadedRun;
use inspect::load::probe::{LayerProbe, Probe};
use inspect::measures::heads::HeadMeasures;
use model::HeadId;

use crate::draw::compare_page::{self, ComparePageInput, PageRunInput};
use crate::draw::figures::{self, FigureError};

/// A comparison that could not be measured or written.
#[derive(Debug, thiserror::Error)]
pub enum CompareOutputError {
    /// Runs that cannot be compared (boxed: it is large, and errors travel by value).
    #[error(transparent)]
    Compare(Box<CompareError>),
    /// The figure.
    #[error(transparent)]
    Figure(#[from] FigureError),
    /// `--out` is not a directory a comparison may be written into, or another `compare`
    /// writes there.
    #[error(transparent)]
    Claim(#[from] run::out_dir::OutDirError),
    /// A file of the comparison.
    #[error("cannot write {path}: {error}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Why. Not a `source`: the message already says it, and `error: {e:#}` in main
        /// would print it twice.
        error: std::io::Error,
    },
}

impl From<CompareError> for CompareOutputError {
    fn from(error: CompareError) -> Self {
        CompareOutputError::Compare(Box::new(error))
    }
}

/// What `compare` writes into `--out`, for [`run::out_dir`]: a comparison. One written before
/// markers is known by its `matching.json` listing the files it wrote; the default place,
/// `RUN/compare` inside the first run, is headlab's whatever it holds.
pub const COMPARISON_KIND: run::out_dir::OutKind = run::out_dir::OutKind {
    name: "comparison",
    program: "compare",
    recognises: |root| {
        run::out_dir::is_named_in_a_run(root, "compare") || earlier_files(root).is_some()
    },
};

/// The files an earlier `compare` into `out` wrote, as its `matching.json` lists them (read
/// through the bounded reader); `None` where there is no such list.
fn earlier_files(out: &Path) -> Option<Vec<String>> {
    let text = run::small_file::read(&out.join("matching.json"), 64 << 20).ok()?;
    let earlier: serde_json::Value = serde_json::from_slice(&text).ok()?;
    let files = earlier.get("files")?.as_array()?;
    Some(
        files
            .iter()
            .filter_map(|f| f.as_str().map(str::to_string))
            .collect(),
    )
}

/// Matches the heads of every run in `runs` to those of `runs[0]` on a probe of
/// `probe_size` sequences, layer by layer where the grids allow
/// ([`inspect::compare::compare`]), and writes the comparison into `out`
/// ([`write_comparison`]).
pub fn compare(
    runs: &[LoadedRun],
    out: &Path,
    probe_size: usize,
    svg: bool,
) -> Result<Comparison, CompareOutputError> {
    let compared = inspect::compare::compare(runs, probe_size, Matching::ByLayer)?;
    write_comparison(runs, compared, out, svg)
}

/// Writes what [`inspect::compare::compare`] measured on `runs` into `out`: the figure (and
/// its SVG copy when `svg`; otherwise none is left from an earlier call), the page, then
/// `matching.json`, which lists every file written.
pub fn write_comparison(
    runs: &[LoadedRun],
    compared: Compared,
    out: &Path,
    svg: bool,
) -> Result<Comparison, CompareOutputError> {
    let Compared {
        mut comparison,
        probe,
        layers,
        measures,
    } = compared;
    let write_error = |path: &Path| {
        let path = path.to_path_buf();
        move |error| CompareOutputError::Write { path, error }
    };
    // Held until matching.json, written last, lists what this comparison wrote.
    let _lock = run::out_dir::claim(out, &COMPARISON_KIND)?;
    let (compared_runs, slots) = (&comparison.runs, &comparison.slots);
    let figure_path = out.join("matched-attention.png");
    matched_attention_figure(&figure_path, &probe, &layers, compared_runs, slots)?;
    let svg_path = figure_path.with_extension("svg");
    if svg {
        matched_attention_figure(&svg_path, &probe, &layers, compared_runs, slots)?;
    } else if earlier_comparison_wrote(out, &svg_path) {
        std::fs::remove_file(&svg_path).map_err(write_error(&svg_path))?;
    }
    let page_path = out.join("compare.html");
    let page = page_data(runs, &probe, &layers, &comparison, &measures);
    run::atomic::write_atomic(&page_path, compare_page::render(&page).as_bytes())
        .map_err(write_error(&page_path))?;
    let json_path = out.join("matching.json");
    comparison.files = [json_path.clone(), figure_path, page_path]
        .into_iter()
        .chain(svg.then_some(svg_path))
        .collect();
    let json = serde_json::to_vec_pretty(&comparison).expect("comparison serializes");
    run::atomic::write_atomic(&json_path, &json).map_err(write_error(&json_path))?;
    comparison.files.sort();
    Ok(comparison)
}

/// Whether `file` in `out` is a plain file that an earlier `compare` into `out` wrote: its
/// `matching.json` lists it. `--out` may name a user's own directory, so a file there that
/// merely has the name `compare` writes is left alone (a link too: never followed).
fn earlier_comparison_wrote(out: &Path, file: &Path) -> bool {
    let is_plain_file = std::fs::symlink_metadata(file).is_ok_and(|meta| meta.is_file());
    is_plain_file
        && earlier_files(out).is_some_and(|files| {
            files
                .iter()
                .any(|listed| Path::new(listed).file_name() == file.file_name())
        })
}

/// `compare.html`'s data: every run's matched heads, their measures and patterns on the first
/// probe sequences; where the probe was cut for every run to fit it
/// ([`inspect::compare::ProbeCut`]), the summary says so.
fn page_data(
    runs: &[LoadedRun],
    probe: &Probe,
    probes: &[Vec<LayerProbe>],
    comparison: &Comparison,
    measures: &[Vec<Vec<HeadMeasures>>],
) -> compare_page::CompareData {
    let reference = &runs[0];
    let summary = page_summary(runs, probe, comparison);
    compare_page::build(&ComparePageInput {
        title: format!("{} ({} runs)", reference.resolved.config.name, runs.len()),
        summary: match &comparison.probe_cut {
            Some(cut) => format!("{summary}; {cut}"),
            None => summary,
        },
        runs: comparison
            .runs
            .iter()
            .zip(probes)
            .zip(measures)
            .map(|((run, layers), measures)| PageRunInput {
                name: run.dir.file_name().map_or_else(
                    || run.dir.display().to_string(),
                    |name| name.to_string_lossy().into_owned(),
                ),
                dir: run.dir.display().to_string(),
                seed: run.seed,
                eval_token_acc: run.eval_token_acc,
                layers,
                matches: &run.layers,
                measures,
            })
            .collect(),
        labels: probe
            .examples
            .iter()
            .map(|e| figures::token_labels(&e.input, probe.token_names.as_deref()))
            .collect(),
    })
}

/// The page's summary line: the task and grid, and how heads were matched; for imported
/// models, which each is and its tokenizer (a comparison across families says which).
fn page_summary(runs: &[LoadedRun], probe: &Probe, comparison: &Comparison) -> String {
    let reference = &runs[0];
    let grid_of = |run: &LoadedRun| (run.model.n_layers(), run.model.n_heads());
    let (n_layers, n_heads) = grid_of(reference);
    let plural = |n: usize| if n == 1 { "" } else { "s" };
    let grid = format!(
        "{n_layers} layer{} x {n_heads} head{}",
        plural(n_layers),
        plural(n_heads)
    );
    let models: Vec<String> = (comparison.runs.iter())
        .zip(runs)
        .filter_map(|(run, loaded)| {
            let imported = run.imported.as_ref()?;
            let name = run.dir.file_name()?.to_string_lossy();
            let (layers, heads) = grid_of(loaded);
            Some(format!(
                "{name} ({}, {} tokenizer, {layers} x {heads})",
                imported.architecture, imported.tokenizer
            ))
        })
        .collect();
    if !models.is_empty() {
        let how = match comparison.across_layers {
            true => {
                "each of the first model's heads matched to the most similar head of any \
                     layer of the others, one to one, by word-level attention-pattern \
                     similarity"
            }
            false => {
                "heads matched to the first model's by word-level attention-pattern \
                      similarity"
            }
        };
        return format!(
            "imported models, the first of {grid}, read on the same {} sentences as words: \
             {}; {how}",
            probe.examples.len(),
            models.join(", ")
        );
    }
    let how = match comparison.across_layers {
        true => {
            "each of the first run's heads matched to the most similar head of any layer, one to one"
        }
        false => "heads matched to the first run's layer by layer",
    };
    format!(
        "task {}, {grid}; {how}, by attention-pattern similarity on a probe batch of {} \
         sequences drawn with its seed ({})",
        reference.resolved.task.name(),
        probe.examples.len(),
        reference.resolved.config.seed,
    )
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
        let HeadId { layer, head } = slot.reference;
        for (run, layers) in compared.iter().zip(probes) {
            let matched = &run.layers[layer];
            let partner = matched.partner_of(head);
            row.push(layers[partner.layer].head_pattern(partner.head)[..seq * seq].to_vec());
            // An imported model by its run's name: they all have seed 0.
            let who = match (&run.imported, run.dir.file_name()) {
                (Some(_), Some(name)) => name.to_string_lossy().into_owned(),
                _ => format!("seed {}", run.seed),
            };
            row_captions.push(format!(
                "{who} {partner}: {} ({:.2})",
                run.roles[layer][head], matched.similarity[head]
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
            labels: &figures::token_labels(tokens, probe.token_names.as_deref()),
            captions: &captions,
        },
    )
}

/// Each run's column title: `seed N` where the seeds tell the runs apart, else the run
/// directory's name (two runs of one seed: another config, a copy), else its whole path.
fn run_labels(comparison: &Comparison) -> Vec<String> {
    let runs = &comparison.runs;
    let distinct = |labels: &[String]| {
        let mut sorted = labels.to_vec();
        sorted.sort();
        sorted.dedup();
        sorted.len() == labels.len()
    };
    let seeds: Vec<String> = runs.iter().map(|r| format!("seed {}", r.seed)).collect();
    if distinct(&seeds) {
        return seeds;
    }
    let names: Vec<String> = runs
        .iter()
        .map(|r| {
            r.dir.file_name().map_or_else(
                || r.dir.display().to_string(),
                |n| n.to_string_lossy().into(),
            )
        })
        .collect();
    if distinct(&names) {
        return names;
    }
    runs.iter().map(|r| r.dir.display().to_string()).collect()
}

/// The slot table printed on the terminal: one row per reference head, one column per run.
pub fn table(comparison: &Comparison) -> String {
    let mut header = format!("{:<6}", "slot");
    for label in run_labels(comparison) {
        header.push_str(&format!(" {label:<24}"));
    }
    header.push_str(" consistent");
    let mut lines = vec![header];
    for slot in &comparison.slots {
        let HeadId { layer, head } = slot.reference;
        let mut line = format!("{:<6} ", slot.reference);
        for (run, role) in comparison.runs.iter().zip(&slot.roles) {
            let matched = &run.layers[layer];
            let partner = matched.partner_of(head);
            line.push_str(&format!(
                "{:<24} ",
                format!("{role} {partner} {:.2}", matched.similarity[head])
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
    if comparison.across_layers {
        lines.push(
            "matched across layers: a slot's matched head may sit in another layer than the \
             slot's"
                .to_string(),
        );
    }
    lines.join("\n")
}
