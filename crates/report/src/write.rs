//! The report on one run, `inspect`'s output: measured by [`inspect::inspection::measure`]
//! before anything is written, then written in order: tensors, records, figures,
//! `explore.html`, and `index.html` last, so a report with its `index.html` is complete; its
//! manifest seals it.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use run::BackendKind;
use run::tensor_file::{HostIds, write_tensors, write_tensors_and_ids};

use inspect::circuits::Circuits;
use inspect::inspection::summary::SimilarityFile;
use inspect::inspection::{MeasureOptions, Measured, Stages, measure_in_stages};
use inspect::load::loaded_run::LoadedRun;
use inspect::load::probe::Probe;
use inspect::load::reading::RelationsAbsent;

use crate::dir::{ACTIVATIONS, RELATION_SENTENCES, ReportDir, WEIGHTS, WriteError};
use crate::error::ReportError;
use crate::figures;
use crate::pages;
use crate::provenance::{MeasuredWith, PairsFileRecord, Provenance};

/// What the report wrote.
#[derive(Debug, Clone)]
pub struct Report {
    /// Everything measured: what the files written hold.
    pub measured: Measured,
    /// The files written.
    pub files: Vec<PathBuf>,
}

/// What a report measures beyond the defaults, and how its figures are written.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ReportOptions {
    /// What is measured.
    pub measure: MeasureOptions,
    /// Every figure also as SVG (`figures/NAME.svg` beside `figures/NAME.png`).
    pub svg: bool,
    /// Where the model runs (recorded in `provenance.json`; the loaded run's device is it).
    pub backend: BackendKind,
}

impl ReportOptions {
    /// `provenance.json` of a report of `loaded` with these options.
    pub fn provenance(&self, loaded: &LoadedRun) -> Provenance {
        let measured_with = MeasuredWith {
            backend: self.backend,
            probe: loaded.probe_source(),
            pairs: loaded.own_pairs.as_ref().map(|own| PairsFileRecord {
                file: own.file.path.display().to_string(),
                sha256: own.file.sha256.clone(),
            }),
            options: self.measure,
        };
        Provenance::of(loaded, measured_with)
    }
}

/// Measures every head of `loaded` on a probe batch and writes the report into `out`.
pub fn write_report(
    loaded: &LoadedRun,
    out: &Path,
    options: &ReportOptions,
) -> Result<Report, ReportError> {
    write_report_in_stages(loaded, out, options, &mut ())
}

/// [`write_report`], telling `stages` as each stage of measuring and writing starts.
pub fn write_report_in_stages(
    loaded: &LoadedRun,
    out: &Path,
    options: &ReportOptions,
    stages: &mut dyn Stages,
) -> Result<Report, ReportError> {
    // Measured before the directory is made: a measure that fails leaves nothing behind,
    // and an earlier report at `out` as it was.
    let provenance = options.provenance(loaded);
    let known = known_circuits(loaded);
    if let Some((from, _)) = &known {
        eprintln!(
            "note: the weight circuits are {}'s (the same weights, read before)",
            from.display()
        );
    }
    let known = known.map(|(_, circuits)| circuits);
    let mut measured = measure_in_stages(loaded, &options.measure, known, stages)?;
    // Why relation scores are absent, in words, after what the output layer's scoring left
    // out: `summary.json`, the page and the command line read it there.
    let absent = measured.relations_absent.map(relations_absent);
    (measured.summary.left_out).extend(absent.map(String::from));
    stages.start("the report's files and figures");
    let probe = &measured.probe;
    let dir = ReportDir::new(out);
    // Held until the manifest seals the report: one writer, one reading.
    let _lock = dir.create()?;
    let vocab_size = loaded.resolved.io.vocab_size;
    let mut files = write_tensor_files(&dir, (probe, vocab_size), &measured)?;
    files.push(dir.write_json(&provenance)?);
    files.extend(write_records(&dir, &measured)?);
    let figures = figures::draw_figures(&dir, loaded, probe, &measured)?;
    files.extend(figures.iter().map(|(path, _)| path.clone()));
    files.extend(figures::vector_copies(
        &dir,
        loaded,
        probe,
        &measured,
        options.svg,
    )?);
    files.push(pages::write_explore(&dir, loaded, probe, &measured)?);
    files.push(pages::write_page(&dir, loaded, probe, &measured, &figures)?);
    // Last: the manifest makes the report complete (run::manifest).
    let manifest = dir.seal(&files)?;
    files.push(manifest);

    Ok(Report { measured, files })
}

/// The weight circuits of `loaded`'s very weights from a report of another reading of the
/// same run (a directory `inspect*` of the run, claimed as a report, whole by its manifest,
/// whose provenance names the same weights file with the same size and SHA-256), with
/// where they were found; `None` when there is none, for a model made in memory, or when
/// its `circuits.json` does not read. Circuits depend on the weights alone.
fn known_circuits(loaded: &LoadedRun) -> Option<(PathBuf, Circuits)> {
    let weights = &loaded.inputs.weights;
    let record = loaded.inputs.files.get(weights)?;
    let mut candidates: Vec<PathBuf> = std::fs::read_dir(loaded.dir.root())
        .ok()?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| {
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
            name.is_some_and(|n| n.starts_with("inspect")) && path.is_dir()
        })
        .collect();
    candidates.sort();
    candidates.into_iter().find_map(|path| {
        let dir = ReportDir::new(&path);
        if !run::out_dir::is_claimed(&path, &crate::dir::REPORT_KIND) || !dir.is_complete() {
            return None;
        }
        let provenance: Provenance = dir.read_json().ok()?;
        let same = provenance.weights == *weights && provenance.inputs.get(weights) == Some(record);
        let circuits: Circuits = same.then(|| dir.read_json().ok()).flatten()?;
        Some((path, circuits))
    })
}

/// Why a report has no relation scores though its model reads text, as `summary.json`'s
/// `left_out` says it (and so its page and the command line).
pub fn relations_absent(why: RelationsAbsent) -> &'static str {
    match why {
        RelationsAbsent::TypedText => {
            "relation scores (relations.json): typed sentences have no parse; inspect without \
             --text for the shipped treebank's, or --probe-conllu FILE for your own parsed \
             sentences"
        }
    }
}

/// `weights.safetensors` and `activations.safetensors` (the probe's tokens, named in the
/// file's metadata, and per layer `attn_input`, `pattern`, `head_out`); a task's tokens
/// without names of their own are named by their numbers, `0..vocab_size`.
fn write_tensor_files(
    dir: &ReportDir,
    (probe, vocab_size): (&Probe, usize),
    measured: &Measured,
) -> Result<Vec<PathBuf>, ReportError> {
    let weights_path = dir.path(WEIGHTS);
    write_tensors(&weights_path, &measured.weights.named(), None)?;

    let mut activations = BTreeMap::new();
    // The probe's token ids as whole numbers, and their names beside them in the file's
    // metadata (`token_names`, a JSON list indexed by id), so the file reads on its own.
    let ids = BTreeMap::from([("tokens".to_string(), HostIds::of(probe.tokens.clone()))]);
    // A task whose tokens have no names of their own names each by its number.
    let names = probe
        .token_names
        .clone()
        .unwrap_or_else(|| (0..vocab_size).map(|id| id.to_string()).collect());
    let names = serde_json::to_string(&names).expect("names serialize");
    let metadata = Some(HashMap::from([("token_names".to_string(), names)]));
    for (l, layer) in measured.layers.iter().enumerate() {
        activations.insert(format!("layers.{l}.attn_input"), layer.attn_input.clone());
        activations.insert(format!("layers.{l}.pattern"), layer.pattern.clone());
        activations.insert(format!("layers.{l}.head_out"), layer.head_outputs.clone());
    }
    let activations_path = dir.path(ACTIVATIONS);
    write_tensors_and_ids(&activations_path, &activations, &ids, metadata)?;
    Ok(vec![weights_path, activations_path])
}

/// `heads.json`, `circuits.json`, `similarity.json`, `pruning.json`, `summary.json`,
/// `logit_lens.json`, `relations.json` when the task has parses, and `divergence.csv` and `trajectories.json`
/// when the run took snapshots.
fn write_records(dir: &ReportDir, measured: &Measured) -> Result<Vec<PathBuf>, WriteError> {
    let similarity = SimilarityFile {
        layers: measured.similarity.clone(),
    };
    let mut files = vec![
        dir.write_json(&measured.heads)?,
        dir.write_json(&measured.circuits)?,
        dir.write_json(&similarity)?,
        dir.write_json(&measured.summary)?,
    ];
    if let Some(pruning) = &measured.pruning {
        files.push(dir.write_json(pruning)?);
    }
    if let Some(logit_lens) = &measured.logit_lens {
        files.push(dir.write_json(logit_lens)?);
    }
    if let Some(relations) = &measured.relations {
        files.push(dir.write_json(relations)?);
        let sentences = tasks::conllu::write_trees(&measured.relation_sentences);
        files.push(dir.write(RELATION_SENTENCES, sentences.as_bytes())?);
    }
    if let Some(ceiling) = &measured.ceiling {
        files.push(dir.write_json(ceiling)?);
    }
    if let Some(agreement) = &measured.agreement {
        files.push(dir.write_json(agreement)?);
    }
    if !measured.divergence.is_empty() {
        files.push(dir.write_divergence(&measured.divergence)?);
    }
    if let Some(trajectories) = &measured.trajectories {
        files.push(dir.write_json(trajectories)?);
    }
    if let Some(over_training) = &measured.relations_over_training {
        files.push(dir.write_json(over_training)?);
    }
    if let Some(patching) = &measured.patching {
        files.push(dir.write_json(patching)?);
    }
    Ok(files)
}

/// The head table printed on the terminal.
pub fn table(report: &Report) -> String {
    let mut lines = vec![format!(
        "{:>5} {:>4}  {:<16} {:>7} {:>10} {:>8} {:>9} {:>9} {:>9}",
        "layer", "head", "role", "entropy", "confidence", "distance", "zero", "mean", "resample"
    )];
    // The units, under the names: every column says what its numbers are in.
    lines.push(format!(
        "{:>5} {:>4}  {:<16} {:>7} {:>10} {:>8} {:>9} {:>9} {:>9}",
        "", "", "", "(nats)", "(fraction)", "(pos.)", "(points)", "(points)", "(points)"
    ));
    let points = |drop: Option<f64>| run::units::points(drop, 2);
    for h in &report.measured.heads {
        lines.push(format!(
            "{:>5} {:>4}  {:<16} {:>7.3} {:>10.3} {:>8.2} {:>9} {:>9} {:>9}",
            h.id.layer,
            h.id.head,
            h.role,
            h.entropy,
            h.confidence,
            h.mean_distance,
            points(h.ablation_drop),
            points(h.mean_ablation_drop),
            points(h.resample_ablation_drop),
        ));
    }
    lines.push(
        "(zero, mean, resample: eval token accuracy lost when one head is ablated, in points: \
         heads.json keeps fractions, one point is 0.01; distance: in token positions)"
            .to_string(),
    );
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn why_relations_are_absent_names_the_flags_that_give_a_parse() {
        assert_eq!(
            relations_absent(RelationsAbsent::TypedText),
            "relation scores (relations.json): typed sentences have no parse; inspect without \
             --text for the shipped treebank's, or --probe-conllu FILE for your own parsed \
             sentences"
        );
    }
}
