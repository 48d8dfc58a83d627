//! Comparing runs of one task (typically one config trained with several seeds): every run
//! is probed on the reference run's probe sequences, its heads are matched to the
//! reference's per layer ([`crate::measures::matching`]), and for each reference head ("slot") we
//! collect the matched heads' roles. A role found in the slot of every run is a regularity
//! of the task; one found in some runs only is an accident of the seed.
//!
//! Measures only: `report::compare` writes `matching.json`, `matched-attention.png` and the
//! interactive `compare.html`.

pub mod null;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use burn::prelude::*;
use model::HeadId;
use serde::{Deserialize, Serialize};
use tasks::{Task, TaskConfig};

use crate::load::loaded_run::{ImportedModel, LoadedRun, RunError, load_with, reading_of};
use crate::load::probe::{LayerProbe, Probe};
use crate::load::probe_choice::ProbeChoice;
use crate::measures::heads::{HeadMeasures, measure_layer};
use crate::measures::matching::{LayerMatch, match_across_layers, match_layers};

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
    /// For an imported model: what it is and how it reads text, so that a comparison across
    /// families says which it compared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub imported: Option<ImportedModel>,
}

/// One reference head and what its matched heads did across runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Slot {
    /// The reference run's head (`layer` and `head` in the JSON).
    #[serde(flatten)]
    pub reference: HeadId,
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
    /// Whether some run's heads were matched across layers ([`match_across_layers`]: runs of
    /// different grids, or every run with [`Matching::AcrossLayers`]): a slot's matched
    /// heads may sit in other layers.
    #[serde(default)]
    pub across_layers: bool,
    /// Where the probe had to be cut so every run reads it ([`ProbeCut::describe`]): the
    /// treebank sentences some run's positions do not hold left out; absent where nothing
    /// was cut.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_cut: Option<String>,
}

/// The treebank sentences a comparison leaves out because some run's positions do not hold
/// them: each run's probe is drawn from the `kept` sentences every run fits, of `sentences`.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeCut {
    /// Sentences every run fits.
    pub kept: usize,
    /// Sentences in the treebank.
    pub sentences: usize,
    /// Each run that fits fewer than all, with how many it fits alone.
    pub fits: Vec<(PathBuf, usize)>,
}

impl ProbeCut {
    /// The cut in words, for the terminal and the page: `the probe is drawn from the 1204
    /// of 2077 treebank sentences every run fits in its positions (bert: 1204)`, and
    /// the length in words of the sentences it read (`words`).
    pub fn describe(&self, words: usize) -> String {
        let fits: Vec<String> = (self.fits.iter())
            .map(|(run, fits)| {
                // By the run's name, as the comparison's page and table name runs.
                let name = run.file_name().map_or_else(
                    || run.display().to_string(),
                    |name| name.to_string_lossy().into_owned(),
                );
                format!("{name}: {fits}")
            })
            .collect();
        format!(
            "the probe is drawn from the {} of {} treebank sentences every run fits in its \
             positions ({}), and its sentences are {words} word{} long",
            self.kept,
            self.sentences,
            fits.join(", "),
            if words == 1 { "" } else { "s" }
        )
    }
}

/// Runs that cannot be compared: the runs at fault and what differs, as data (the report's
/// command line adds the commands that help).
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    /// A run that does not load (one without final weights among them: a comparison
    /// matches final weights).
    #[error(transparent)]
    Run(#[from] RunError),
    /// A model that reads text among models that read their task's tokens: they read
    /// different inputs (words, as word pieces, and a toy task's tokens).
    #[error(
        "{text} reads text (word pieces: an imported model or a text model trained here) and \
         {tokens} its task's tokens: compare matches models that read text with each other \
         (on the same sentences as words) and models of a toy task with each other (on its \
         tokens)"
    )]
    Imported {
        /// A run that reads text.
        text: PathBuf,
        /// A run that reads its task's tokens.
        tokens: PathBuf,
    },
    /// Imported models whose tokenizers kept different sentences (one too long for a
    /// model's positions).
    #[error(
        "{other} reads other probe sentences than {reference} (a sentence too long for one \
         model's positions)"
    )]
    OtherSentences {
        /// The reference run.
        reference: PathBuf,
        /// The run that differs.
        other: PathBuf,
    },
    /// Imported models of different grids, the first with more heads: every head of the
    /// first is matched to a different head of each other.
    #[error(
        "{reference} has {reference_heads} heads and {other} {other_heads}: a comparison \
         matches each head of the first run to a different head of the others, so across \
         grids the model with fewer heads comes first"
    )]
    ReferenceLarger {
        /// The reference run.
        reference: PathBuf,
        /// The run with fewer heads.
        other: PathBuf,
        /// The reference's heads, all layers.
        reference_heads: usize,
        /// The other's.
        other_heads: usize,
    },
    /// A probe too large for the runs, or of words that could not be read.
    #[error(transparent)]
    Probe(#[from] crate::load::reading::ReadingError),
    /// A run of another task or shape.
    #[error(
        "{other} cannot be matched to {reference}: the {what} differ: {reference} \
         {reference_value}, {other} {other_value}; compare runs of one task and one model shape"
    )]
    Mismatch {
        /// The reference run.
        reference: PathBuf,
        /// The run that differs.
        other: PathBuf,
        /// What differs: "tasks" or "model shapes".
        what: &'static str,
        /// The reference's, in words: "is reverse (seq_len = 6)", "has 1 layer x 2 heads".
        reference_value: String,
        /// The other run's, in words.
        other_value: String,
    },
}

/// Loads every run in `dirs` with its final weights, each probed with the sentences every
/// one of them reads ([`sentences_every_model_fits`]).
pub fn load_runs(dirs: &[PathBuf]) -> Result<Vec<LoadedRun>, CompareError> {
    Ok(load_runs_with_cut(dirs)?.0)
}

/// [`load_runs`], with where the probe's sentences had to be cut for some run to fit them
/// (`None` where no run left a sentence out).
pub fn load_runs_with_cut(
    dirs: &[PathBuf],
) -> Result<(Vec<LoadedRun>, Option<ProbeCut>), CompareError> {
    let fits = sentences_every_model_fits(dirs)?;
    let cut = fits.as_ref().and_then(|(every, each)| {
        let fits: Vec<(PathBuf, usize)> = (dirs.iter().zip(each))
            .filter_map(|(dir, fits)| fits.map(|n| (dir.clone(), n)))
            .filter(|(_, n)| *n < every.len())
            .collect();
        let kept = every.iter().filter(|k| **k).count();
        (!fits.is_empty()).then_some(ProbeCut {
            kept,
            sentences: every.len(),
            fits,
        })
    });
    let choice = match fits {
        Some((keep, _)) => ProbeChoice::OwnSentences { keep },
        None => ProbeChoice::Own,
    };
    let load = |dir: &PathBuf| load_with(dir, None, Device::flex(), &choice);
    let runs = dirs.iter().map(load).collect::<Result<Vec<_>, _>>()?;
    let text = runs.iter().find(|r| r.reading.reads_text());
    let tokens = runs.iter().find(|r| !r.reading.reads_text());
    match (text, tokens) {
        (Some(text), Some(tokens)) => Err(CompareError::Imported {
            text: text.dir.root().to_path_buf(),
            tokens: tokens.dir.root().to_path_buf(),
        }),
        _ => Ok((runs, cut)),
    }
}

/// Of the treebank imported models are probed with, the sentences every one of the runs in
/// `dirs` fits in its positions (a flag per sentence, read before any model is loaded): each
/// then picks the same probe (the choice depends on the sentences alone), so models of
/// different tokenizers (and families) are read on the same words and their word-level
/// attention lines up; with how many sentences each run fits alone (`None` for a run that
/// reads no treebank). `None` where no run reads a treebank, or where their treebanks differ
/// in length (not one treebank: `probes_of` refuses what does not line up).
#[allow(clippy::type_complexity)]
fn sentences_every_model_fits(
    dirs: &[PathBuf],
) -> Result<Option<(Vec<bool>, Vec<Option<usize>>)>, CompareError> {
    let mut every: Option<Vec<bool>> = None;
    let mut each = vec![];
    for dir in dirs {
        let Some(fits) = reading_of(dir, &ProbeChoice::Own)?.treebank_fits() else {
            each.push(None);
            continue;
        };
        each.push(Some(fits.iter().filter(|f| **f).count()));
        every = Some(match every {
            Some(all) if all.len() != fits.len() => return Ok(None),
            Some(all) => all.iter().zip(&fits).map(|(a, b)| *a && *b).collect(),
            None => fits,
        });
    }
    Ok(every.map(|every| (every, each)))
}

/// The probe of `size` sequences each run reads ([`crate::load::reading::Reading::probe`]),
/// checked against the memory bound of all of them: the task's tokens, the same for all; for
/// imported models, the task's sentences read by each model's own tokenizer, which must keep
/// the same sentences, so that their word-level attention lines up.
fn probes_of(runs: &[LoadedRun], size: usize) -> Result<Vec<Probe>, CompareError> {
    let reference = &runs[0];
    let seed = reference.resolved.config.seed;
    let mut probes: Vec<Probe> = vec![];
    for run in runs {
        let probe = (run.reading).probe(&run.resolved, (size, seed), runs.len(), &run.device)?;
        if probes
            .first()
            .is_some_and(|first| first.word_ids() != probe.word_ids())
        {
            return Err(CompareError::OtherSentences {
                reference: reference.dir.root().to_path_buf(),
                other: run.dir.root().to_path_buf(),
            });
        }
        probes.push(probe);
    }
    Ok(probes)
}

/// Checks that `other` has the reference's task and head grid.
fn check_comparable(reference: &LoadedRun, other: &LoadedRun) -> Result<(), CompareError> {
    let mismatch = |what, a: String, b: String| CompareError::Mismatch {
        reference: reference.dir.root().to_path_buf(),
        other: other.dir.root().to_path_buf(),
        what,
        reference_value: a,
        other_value: b,
    };
    // Models that read text are probed with the same sentences as words, whatever they
    // were trained on: two seeds of a text config (each run holds its own copy of the
    // tokenizer), a text model trained here beside an imported one.
    let both_read_text = reference.reading.reads_text() && other.reading.reads_text();
    let (a, b) = (&reference.resolved.config.task, &other.resolved.config.task);
    if a != b && !both_read_text {
        let (a, b) = task_difference(a, b);
        return Err(mismatch("tasks", format!("is {a}"), format!("is {b}")));
    }
    let grid = |run: &LoadedRun| {
        let (layers, heads) = (run.model.n_layers(), run.model.n_heads());
        let plural = |n: usize, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
        format!(
            "has {} x {}",
            plural(layers, "layer"),
            plural(heads, "head")
        )
    };
    if grid(reference) == grid(other) {
        return Ok(());
    }
    // Imported models of different grids are matched across layers; trained runs of one
    // config (seeds) have one grid, and another grid is another experiment.
    if !both_read_text {
        return Err(mismatch("model shapes", grid(reference), grid(other)));
    }
    let heads = |run: &LoadedRun| run.model.n_layers() * run.model.n_heads();
    if heads(reference) > heads(other) {
        return Err(CompareError::ReferenceLarger {
            reference: reference.dir.root().to_path_buf(),
            other: other.dir.root().to_path_buf(),
            reference_heads: heads(reference),
            other_heads: heads(other),
        });
    }
    Ok(())
}

/// Whether `a` and `b` have one grid (layers and heads per layer).
fn same_grid(a: &LoadedRun, b: &LoadedRun) -> bool {
    (a.model.n_layers(), a.model.n_heads()) == (b.model.n_layers(), b.model.n_heads())
}

/// Two different `[task]` sections in words, as `kind (key = value, ...)`: of the same
/// kind, only the keys that differ; of different kinds, every key.
fn task_difference(a: &TaskConfig, b: &TaskConfig) -> (String, String) {
    let keys = |task: &TaskConfig| -> BTreeMap<String, String> {
        match serde_json::to_value(task) {
            Ok(serde_json::Value::Object(fields)) => fields
                .into_iter()
                .filter(|(key, _)| key != "kind")
                .map(|(key, value)| (key, value.to_string()))
                .collect(),
            _ => BTreeMap::new(),
        }
    };
    let (keys_a, keys_b) = (keys(a), keys(b));
    let same_kind = a.kind_name() == b.kind_name();
    let describe =
        |task: &TaskConfig, own: &BTreeMap<String, String>, other: &BTreeMap<String, String>| {
            let mut shown: Vec<String> = own
                .iter()
                .filter(|(key, value)| !same_kind || other.get(*key) != Some(*value))
                .map(|(key, value)| format!("{key} = {value}"))
                .collect();
            if same_kind {
                let unset = other.keys().filter(|key| !own.contains_key(*key));
                shown.extend(unset.map(|key| format!("{key} unset")));
            }
            if shown.is_empty() {
                task.kind_name().to_string()
            } else {
                format!("{} ({})", task.kind_name(), shown.join(", "))
            }
        };
    (describe(a, &keys_a, &keys_b), describe(b, &keys_b, &keys_a))
}

/// How [`compare`] pairs each run's heads with the reference's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Matching {
    /// Layer by layer for runs of the reference's grid (heads of a layer are
    /// interchangeable, layers are not); across layers for runs of another grid, which have
    /// no layer to pair with.
    ByLayer,
    /// Across layers for every run, one to one over the whole model
    /// ([`match_across_layers`]): whether runs of one grid grew a role in different layers.
    AcrossLayers,
}

/// Matches the heads of every run in `runs` to those of `runs[0]` on a probe of
/// `probe_size` sequences, as `matching` says: what `compare` writes (`report::compare`).
pub fn compare(
    runs: &[LoadedRun],
    probe_size: usize,
    matching: Matching,
) -> Result<Compared, CompareError> {
    let reference = runs.first().expect("at least one run to compare");
    for other in &runs[1..] {
        check_comparable(reference, other)?;
    }
    let run_probes = probes_of(runs, probe_size)?;
    let layers: Vec<Vec<LayerProbe>> = runs
        .iter()
        .zip(&run_probes)
        .map(|(run, probe)| probe.forward(&run.model))
        .collect();
    let probe = run_probes.into_iter().next().expect("a probe per run");
    let measures = measure_heads(&reference.resolved.task, &probe, &layers);
    let by_layer = |run: &LoadedRun| matching == Matching::ByLayer && same_grid(reference, run);
    let across_layers = !runs.iter().all(by_layer);
    let compared: Vec<ComparedRun> = runs
        .iter()
        .zip(&layers)
        .zip(&measures)
        .map(|((run, own), measures)| {
            let matches = match by_layer(run) {
                true => match_layers(&layers[0], own),
                false => match_across_layers(&layers[0], own),
            };
            compare_run(run, matches, measures)
        })
        .collect();
    let slots: Vec<Slot> = reference
        .model
        .heads()
        .map(|id| slot(id, &compared))
        .collect();
    let runs_with_role = runs_with_role(reference.model.n_layers(), &compared);
    Ok(Compared {
        comparison: Comparison {
            probe_size,
            runs: compared,
            slots,
            runs_with_role,
            files: vec![],
            across_layers,
            probe_cut: None,
        },
        probe,
        layers,
        measures,
    })
}

/// What [`compare`] measured: the matching, and what its figure and page show.
#[derive(Debug, Clone)]
pub struct Compared {
    /// `matching.json` (its `files` empty until written).
    pub comparison: Comparison,
    /// The reference run's probe.
    pub probe: Probe,
    /// Each run's attention on its probe, `[run][layer]`.
    pub layers: Vec<Vec<LayerProbe>>,
    /// Each run's head measures, `[run][layer][head]`.
    pub measures: Vec<Vec<Vec<HeadMeasures>>>,
}

/// Every head's measures on the shared probe, `[run][layer][head]`: the roles and the page's
/// measures come from here.
fn measure_heads(
    task: &Task,
    probe: &Probe,
    probes: &[Vec<LayerProbe>],
) -> Vec<Vec<Vec<HeadMeasures>>> {
    let tokens = probe.token_ids();
    let targets: Vec<Vec<Vec<usize>>> = probe
        .examples
        .iter()
        .map(|example| task.attention_targets(&example.input))
        .collect();
    probes
        .iter()
        .map(|layers| {
            layers
                .iter()
                .map(|layer| measure_layer(task, layer, &tokens, &targets))
                .collect()
        })
        .collect()
}

/// One run's heads matched to the reference's (`matches`), with the matched heads' roles.
fn compare_run(
    run: &LoadedRun,
    matches: Vec<LayerMatch>,
    measures: &[Vec<HeadMeasures>],
) -> ComparedRun {
    let roles = matches
        .iter()
        .map(|matched| {
            (0..matched.partner.len())
                .map(|h| {
                    let partner = matched.partner_of(h);
                    measures[partner.layer][partner.head].role.clone()
                })
                .collect()
        })
        .collect();
    let eval_token_acc = run
        .dir
        .metrics()
        .iter()
        .rev()
        .find_map(|r| r.eval_token_acc);
    let imported = run.imported_model();
    ComparedRun {
        dir: run.dir.root().to_path_buf(),
        seed: run.resolved.config.seed,
        eval_token_acc,
        layers: matches,
        roles,
        imported,
    }
}

/// The slot of the reference's head `id`: its matched heads' roles across runs, the role
/// they share (if every run agrees and it is not "mixed") and their mean similarity to it.
fn slot(id: HeadId, compared: &[ComparedRun]) -> Slot {
    let HeadId { layer, head } = id;
    let roles: Vec<String> = compared
        .iter()
        .map(|r| r.roles[layer][head].clone())
        .collect();
    let consistent_role =
        Some(roles[0].clone()).filter(|role| role != "mixed" && roles.iter().all(|r| r == role));
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
        reference: id,
        roles,
        consistent_role,
        mean_similarity,
    }
}

/// Per layer, for each role, how many runs have a head with it.
fn runs_with_role(n_layers: usize, compared: &[ComparedRun]) -> Vec<BTreeMap<String, usize>> {
    (0..n_layers)
        .map(|layer| {
            let mut counts = BTreeMap::new();
            for run in compared {
                let distinct: BTreeSet<&String> = run.roles[layer].iter().collect();
                for role in distinct {
                    *counts.entry(role.clone()).or_insert(0) += 1;
                }
            }
            counts
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use tasks::{Combine, NeighborsSpec, SequenceSpec};

    use super::*;

    fn sequence(seq_len: usize, vocab_size: usize) -> SequenceSpec {
        SequenceSpec {
            seq_len,
            vocab_size,
        }
    }

    #[test]
    fn tasks_of_different_kinds_are_told_apart_by_kind_and_keys() {
        let (a, b) = task_difference(
            &TaskConfig::Reverse(sequence(8, 5)),
            &TaskConfig::Copy(sequence(8, 5)),
        );
        assert_eq!(a, "reverse (seq_len = 8, vocab_size = 5)");
        assert_eq!(b, "copy (seq_len = 8, vocab_size = 5)");
    }

    #[test]
    fn tasks_of_one_kind_name_only_the_keys_that_differ() {
        let (a, b) = task_difference(
            &TaskConfig::Reverse(sequence(6, 5)),
            &TaskConfig::Reverse(sequence(7, 5)),
        );
        assert_eq!(
            (a.as_str(), b.as_str()),
            ("reverse (seq_len = 6)", "reverse (seq_len = 7)")
        );

        let sum = NeighborsSpec {
            combine: Combine::Sum,
            ..NeighborsSpec::default()
        };
        let difference = NeighborsSpec {
            combine: Combine::Difference,
            ..NeighborsSpec::default()
        };
        let (a, b) = task_difference(
            &TaskConfig::Neighbors(sum),
            &TaskConfig::Neighbors(difference),
        );
        assert_eq!(a, "neighbors (combine = \"sum\")");
        assert_eq!(b, "neighbors (combine = \"difference\")");
    }
}
