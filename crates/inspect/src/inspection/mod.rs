//! One run's inspection: the orchestrator that runs the individual measures
//! ([`crate::measures`], [`crate::interventions`], [`crate::circuits`]) for one report and
//! returns everything it measured as records, nothing written ([`measure`]): circuits from
//! the weights, the probe, relation scores, every head's record, similarity, pruning, the
//! summary ([`summary`]), and the heads followed through the run's snapshots; what it
//! measures beyond the defaults ([`options`]), and why it could not ([`error`]). Its names
//! keep the verb: [`measure`] measures a run, with [`MeasureOptions`], failing with
//! [`MeasureError`]. The `report` crate writes what it returns.

pub mod error;
pub mod options;
pub mod summary;

pub use error::MeasureError;
pub use options::MeasureOptions;

use burn::module::Module;
use run::snapshot::HeadTensorsByLayer;
use tasks::Example;

use crate::circuits::{Circuits, rollout};
use crate::inspection::summary::{Summary, greedy_removal_steps, mean_pattern_js};
use crate::interventions::ablation::ablation_drops;
use crate::interventions::patching::{Patching, patching};
use crate::interventions::pruning::{self, Pruning};
use crate::interventions::relation_ablation;
use crate::load::context::MeasureContext;
use crate::load::loaded_run::LoadedRun;
use crate::load::probe::{LayerProbe, Probe};
use crate::load::reading::{RelationsAbsent, Scoring};
use crate::measures::agreement::{self, Agreement};
use crate::measures::ceiling::{self, Ceiling};
use crate::measures::divergence::{self, DivergencePoint};
use crate::measures::heads::{HeadRecord, measure_heads};
use crate::measures::importance::spearman;
use crate::measures::logit_lens::{LogitLens, logit_lens};
use crate::measures::relations::{self, Relations};
use crate::measures::relations_over_training::{self as over_training, RelationsOverTraining};
use crate::measures::similarity::LayerSimilarity;
use crate::measures::special::probe_special_attention;
use crate::measures::trajectories::{self, Trajectories};
use tasks::conllu::TreebankSentence;

/// Everything the report measures.
#[derive(Debug, Clone)]
pub struct Measured {
    /// The probe batch every probe measure read.
    pub probe: Probe,
    /// Per-head weights and circuits (`weights.safetensors`).
    pub weights: HeadTensorsByLayer,
    /// Each layer's attention on the probe batch.
    pub layers: Vec<LayerProbe>,
    /// One record per head, layer-major.
    pub heads: Vec<HeadRecord>,
    /// Eval token accuracy with every head on; none where the output layer is not scored.
    pub eval_token_acc: Option<f64>,
    /// `circuits.json`.
    pub circuits: Circuits,
    /// One similarity record per layer.
    pub similarity: Vec<LayerSimilarity>,
    /// `pruning.json`; none where the output layer is not scored.
    pub pruning: Option<Pruning>,
    /// `relations.json`, for tasks with parses.
    pub relations: Option<Relations>,
    /// Why `relations` is none though the model reads text (typed sentences, which have no
    /// parse); none otherwise. The report says it in words, in `summary.json`'s `left_out`.
    pub relations_absent: Option<RelationsAbsent>,
    /// `relation-sentences.conllu`: the sentences `relations.json` scored, with their arcs.
    pub relation_sentences: Vec<TreebankSentence>,
    /// `summary.json`.
    pub summary: Summary,
    /// `divergence.csv` (empty without snapshots).
    pub divergence: Vec<DivergencePoint>,
    /// `trajectories.json` (none without snapshots).
    pub trajectories: Option<Trajectories>,
    /// `relations-over-training.json`: relations at every snapshot, for a model that reads
    /// a treebank (none without snapshots, or for a model of task tokens).
    pub relations_over_training: Option<RelationsOverTraining>,
    /// `logit_lens.json`; none where the output layer is not scored.
    pub logit_lens: Option<LogitLens>,
    /// `patching.json` (none for tasks without minimal pairs, or when turned off).
    pub patching: Option<Patching>,
    /// Why `patching` is none; none when it ran. The report says it in words.
    pub patching_absent: Option<PatchingAbsent>,
    /// `ceiling.json` (word tasks only).
    pub ceiling: Option<Ceiling>,
    /// `agreement.json` (word tasks only).
    pub agreement: Option<Agreement>,
}

/// Reads the circuits from the weights, runs the probe, scores the heads on the task's
/// dependency relations (if it has parses), measures and ablates every head, compares heads,
/// prunes, and follows the heads through the run's snapshots. An imported model's output
/// layer is scored on the probe's masked words where it has a prediction head; what its
/// report leaves out is said in `summary.left_out`
/// ([`crate::load::reading::LEFT_OUT_NO_HEAD`], [`crate::load::reading::left_out_reading_pieces`]),
/// but for why relation scores are absent, which is data ([`Measured::relations_absent`]) for
/// the report to word.
/// What the model reads, and so which of its measures can run, is its reading's to say
/// ([`crate::load::reading::Reading`]).
pub fn measure(loaded: &LoadedRun, options: &MeasureOptions) -> Result<Measured, MeasureError> {
    measure_in_stages(loaded, options, None, &mut ())
}

/// [`measure`], telling `stages` as each stage starts (what `inspect` shows progress by).
///
/// `known_circuits` are the weight circuits of these very weights, measured before (another
/// reading's `circuits.json`): they depend on the weights alone, so they are taken as they
/// are (the probe's rollout recomputed) rather than measured again, most of an imported
/// model's time.
pub fn measure_in_stages(
    loaded: &LoadedRun,
    options: &MeasureOptions,
    known_circuits: Option<Circuits>,
    stages: &mut dyn Stages,
) -> Result<Measured, MeasureError> {
    let (config, model) = (&loaded.resolved.config, &loaded.model);
    let (probe, weights, circuits, layers) =
        read_probe(loaded, options.probe_size, known_circuits, stages)?;
    let context = MeasureContext::of_run(loaded);
    let eval_set = || config.eval_examples(&loaded.resolved.task);
    let Scoring {
        eval,
        sentence_of,
        left_out,
    } = loaded
        .reading
        .scoring(model, &loaded.resolved, &probe, eval_set);
    // The measures that read the output layer run where it is scored.
    let scored = eval.is_some();
    stages.start("relations");
    let (relations, relation_sentences) = measure_relations(loaded, context, options, scored)?;
    stages.start("heads");
    let (mut heads, eval_token_acc) = measure_heads(
        context,
        eval.as_deref(),
        &probe,
        &layers,
        &circuits,
        relations.as_ref(),
    );
    let similarity = layer_similarity(&weights, &layers);
    stages.start("ablations, pruning and the logit lens");
    let outputs = eval
        .as_deref()
        .map(|eval| measure_outputs(context, (eval, &sentence_of), &mut heads, options));
    let mut summary = summarise(
        loaded,
        &heads,
        &layers,
        &similarity,
        eval_token_acc,
        &outputs,
    );
    summary.probe_token_names = probe.word_names();
    summary.special_attention = probe_special_attention(&probe, &layers);
    summary.left_out = left_out;
    let (pruning, logit_lens) = outputs.map_or((None, None), |o| (Some(o.0), Some(o.1)));
    let flags = (options.patching, scored);
    let later = measure_later(
        (loaded, context),
        (&probe, &layers),
        flags,
        &eval_set,
        stages,
    )?;
    Ok(Measured {
        probe,
        weights,
        layers,
        heads,
        eval_token_acc,
        circuits,
        similarity,
        pruning,
        relations,
        relations_absent: loaded.reading.relations_absent(),
        relation_sentences,
        summary,
        divergence: later.divergence,
        trajectories: later.trajectories,
        relations_over_training: later.relations_over_training,
        logit_lens,
        patching_absent: later.patching.is_none().then(|| patching_absent(flags)),
        patching: later.patching,
        ceiling: later.ceiling,
        agreement: later.agreement,
    })
}

/// The probe of `size` sequences, the model's head weights, its weight circuits (measured,
/// or `known_circuits` where given; with the rollout of the probe's first sequence) and each
/// layer's attention on the probe.
fn read_probe(
    loaded: &LoadedRun,
    size: usize,
    known_circuits: Option<Circuits>,
    stages: &mut dyn Stages,
) -> Result<(Probe, HeadTensorsByLayer, Circuits, Vec<LayerProbe>), MeasureError> {
    let (resolved, model) = (&loaded.resolved, &loaded.model);
    stages.start("the probe");
    let seed = resolved.config.seed;
    let probe = (loaded.reading).probe(resolved, (size, seed), 1, &loaded.device)?;
    let weights = HeadTensorsByLayer::of(model, true);
    stages.start("circuits");
    let mut circuits = match known_circuits {
        Some(known) => known,
        None => Circuits::of_model(model, &weights)?,
    };
    stages.start("attention on the probe");
    let layers = probe.forward(model);
    circuits.rollout = rollout::rollout(&rollout::mean_attention(&layers, 0));
    Ok((probe, weights, circuits, layers))
}

/// Why the causal tests on minimal pairs were not measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchingAbsent {
    /// They were not asked for ([`MeasureOptions::patching`] off).
    NotAsked,
    /// The output layer is not scored: the model has no prediction head.
    NoPredictionHead,
    /// The task has no minimal pairs.
    NoMinimalPairs,
}

/// Why a report has no `patching.json`, given whether patching was asked for and whether
/// the output layer is scored (when both hold, the task has no minimal pairs).
fn patching_absent((patching_asked, scored): (bool, bool)) -> PatchingAbsent {
    match (patching_asked, scored) {
        (false, _) => PatchingAbsent::NotAsked,
        (true, false) => PatchingAbsent::NoPredictionHead,
        (true, true) => PatchingAbsent::NoMinimalPairs,
    }
}

/// What [`measure_later`] measures.
struct Later {
    patching: Option<Patching>,
    ceiling: Option<Ceiling>,
    agreement: Option<Agreement>,
    divergence: Vec<DivergencePoint>,
    trajectories: Option<Trajectories>,
    relations_over_training: Option<RelationsOverTraining>,
}

/// The measures after the heads' of `loaded` (measured in `context`): patching (of the task's
/// pairs and a user's own, [`LoadedRun::own_pairs`]) where it is asked for and the output
/// layer is `scored`, the Bayes ceiling, agreement where the output layer is scored, and the
/// divergence, role trajectories and (for a model reading a treebank) relations over the
/// run's snapshots, with the loss on `held_out` (the run's evaluation set, training's).
fn measure_later(
    (loaded, context): (&LoadedRun, MeasureContext),
    (probe, layers): (&Probe, &[LayerProbe]),
    (patching_asked, scored): (bool, bool),
    held_out: &dyn Fn() -> Vec<Example>,
    stages: &mut dyn Stages,
) -> Result<Later, MeasureError> {
    let own = loaded.own_pairs.as_ref();
    stages.start("patching");
    let patching = match patching_asked && scored {
        true => patching(context, own)?,
        false => None,
    };
    stages.start("ceiling and agreement");
    let ceiling = ceiling::ceiling(context);
    let agreement = match scored {
        true => agreement::agreement(context)?,
        false => None,
    };
    stages.start("snapshots");
    Ok(Later {
        patching,
        ceiling,
        agreement,
        divergence: divergence::divergence(context, probe)?,
        trajectories: trajectories::trajectories(context, probe, layers)?,
        relations_over_training: over_training::relations_over_training(context, held_out)?,
    })
}

/// Told as each stage of a measurement starts ([`measure_in_stages`]): `run::progress`'s.
pub use run::progress::Stages;

/// How alike the heads of each layer are (`similarity.json`).
fn layer_similarity(weights: &HeadTensorsByLayer, layers: &[LayerProbe]) -> Vec<LayerSimilarity> {
    layers
        .iter()
        .enumerate()
        .map(|(l, layer)| LayerSimilarity::measure(l, weights, layer, true))
        .collect()
}

/// `relations.json` and the sentences it scored (the task's, or the treebank an imported
/// model is probed with, as the model reads them), with relation ablation where the output
/// layer is `scored`; none without parses.
fn measure_relations(
    loaded: &LoadedRun,
    context: MeasureContext,
    options: &MeasureOptions,
    scored: bool,
) -> Result<(Option<Relations>, Vec<TreebankSentence>), MeasureError> {
    // Masked as the task masks in training (`inspect --relations-masked`).
    let mask_fraction = match &loaded.resolved.config.task {
        tasks::TaskConfig::Grammar(spec) if options.relations_masked => Some(spec.mask_fraction),
        _ => None,
    };
    let count = options.relation_sentences;
    let Some((mut relations, sentences)) =
        relations::measure_relations(context, count, mask_fraction)?
    else {
        return Ok((None, vec![]));
    };
    if scored {
        relation_ablation::add_relation_ablation(&mut relations, context, &sentences)?;
    }
    Ok((Some(relations), sentences.trees().to_vec()))
}

/// The measures that score the output layer on `eval` (with each example's sentence, as
/// [`Scoring::sentence_of`]): mean and resample ablation drops (into `heads`), pruning and
/// the logit lens.
fn measure_outputs(
    context: MeasureContext,
    (eval, sentence_of): (&[Example], &[usize]),
    heads: &mut [HeadRecord],
    options: &MeasureOptions,
) -> (Pruning, LogitLens) {
    let drops = ablation_drops(context, eval, sentence_of);
    for (head, (mean, resample)) in heads.iter_mut().zip(drops.mean.iter().zip(&drops.resample)) {
        head.mean_ablation_drop = Some(*mean);
        head.resample_ablation_drop = Some(*resample);
    }
    let drops: Vec<f64> = heads
        .iter()
        .map(|h| h.ablation_drop.unwrap_or(0.0))
        .collect();
    // The greedy search costs H (H + 1) / 2 evaluations: left out where the reading says
    // per-head detail costs too much (imported models).
    let greedy = context.reading.per_head_detail();
    let pruning = pruning::prune_model(context, eval, &drops, (options.prune_tolerance, greedy));
    (pruning, logit_lens(context, eval))
}

/// `summary.json` from what was measured; the pruning figures where the output layer was
/// scored.
fn summarise(
    loaded: &LoadedRun,
    heads: &[HeadRecord],
    layers: &[LayerProbe],
    similarity: &[LayerSimilarity],
    eval_token_acc: Option<f64>,
    outputs: &Option<(Pruning, LogitLens)>,
) -> Summary {
    let (config, model) = (&loaded.resolved.config, &loaded.model);
    let drops: Vec<f64> = heads.iter().filter_map(|h| h.ablation_drop).collect();
    let importance: Vec<f64> = heads.iter().filter_map(|h| h.gradient_importance).collect();
    let pruning = outputs.as_ref().map(|(pruning, _)| pruning);
    let removal_steps = pruning.and_then(|p| greedy_removal_steps(p, model.n_heads()));
    let correlate = |a: &[f64], b: Option<&Vec<f64>>| b.and_then(|b| spearman(a, b));
    let imported = config.import.as_ref();
    Summary {
        name: config.name.clone(),
        task: loaded.resolved.task.name().to_string(),
        probe: loaded.probe_source(),
        head_layout: format!("{:?}", config.model.head_layout).to_lowercase(),
        n_layers: model.n_layers(),
        n_heads: model.n_heads(),
        d_head: layers.first().map_or(0, LayerProbe::d_head),
        // An imported model's count is its checkpoint's, as the import said it.
        n_params: imported
            .and_then(|import| import.parameters)
            .unwrap_or_else(|| model.num_params()),
        attention_params: model.blocks.iter().map(|b| b.attention.num_params()).sum(),
        eval_token_acc,
        heads_with_role: heads.iter().filter(|h| h.role != "mixed").count(),
        mean_pattern_js: mean_pattern_js(similarity),
        removable_heads: pruning.and_then(|p| p.greedy.as_ref()).map(|g| g.removable),
        importance_ablation_spearman: spearman(&importance, &drops),
        importance_pruning_spearman: correlate(&importance, removal_steps.as_ref()),
        ablation_pruning_spearman: correlate(&drops, removal_steps.as_ref()),
        imported_from: imported.map(|i| i.source.display().to_string()),
        shared_layer_weights: imported.is_some_and(|i| i.shared_layers),
        task_overrides: loaded.task_overrides.clone(),
        left_out: vec![],
        probe_token_names: None,
        special_attention: None,
    }
}
