//! Everything a report measures, before anything is written: circuits from the weights,
//! the probe, relation scores, every head's record, similarity, pruning, the summary, and
//! the heads followed through the run's snapshots.

use burn::module::Module;
use run::snapshot::HeadTensorsByLayer;
use tasks::Example;

use crate::circuits::{Circuits, rollout};
use crate::interventions::ablation::ablation_drops;
use crate::interventions::patching::{Patching, patching};
use crate::interventions::pruning::{self, Pruning};
use crate::interventions::relation_ablation;
use crate::load::context::MeasureContext;
use crate::load::probe::{LayerProbe, Probe};
use crate::load::run::LoadedRun;
use crate::measures::agreement::{self, Agreement};
use crate::measures::ceiling::{self, Ceiling};
use crate::measures::divergence::{self, DivergencePoint};
use crate::measures::heads::{HeadRecord, measure_heads};
use crate::measures::importance::spearman;
use crate::measures::logit_lens::{LogitLens, logit_lens};
use crate::measures::relations::{self, Relations};
use crate::measures::similarity::LayerSimilarity;
use crate::measures::trajectories::{self, Trajectories};
use crate::report::dir::ReportContents;
use crate::report::error::ReportError;
use crate::report::options::ReportOptions;
use crate::report::summary::{Summary, greedy_removal_steps, mean_pattern_js};

/// Everything the report measures.
#[derive(Debug, Clone)]
pub struct Measured {
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
    /// `summary.json`.
    pub summary: Summary,
    /// `divergence.csv` (empty without snapshots).
    pub divergence: Vec<DivergencePoint>,
    /// `trajectories.json` (none without snapshots).
    pub trajectories: Option<Trajectories>,
    /// `logit_lens.json`; none where the output layer is not scored.
    pub logit_lens: Option<LogitLens>,
    /// `patching.json` (none for tasks without minimal pairs, or when turned off).
    pub patching: Option<Patching>,
    /// `ceiling.json` (word tasks only).
    pub ceiling: Option<Ceiling>,
    /// `agreement.json` (word tasks only).
    pub agreement: Option<Agreement>,
}

impl Measured {
    /// Which of the report's conditional files this report holds.
    pub fn contents(&self, loaded: &LoadedRun) -> ReportContents {
        ReportContents {
            word_task: self
                .relations
                .as_ref()
                .is_some_and(|r| !r.relations.is_empty()),
            snapshots: !self.divergence.is_empty(),
            n_layers: loaded.model.n_layers(),
            metrics: !loaded.dir.metrics().is_empty(),
            pairs: self.patching.is_some(),
            outputs: self.pruning.is_some(),
        }
    }
}

/// Reads the circuits from the weights, runs the probe, scores the heads on the task's
/// dependency relations (if it has parses), measures and ablates every head, compares heads,
/// prunes, and follows the heads through the run's snapshots. For an imported model the
/// measures that score its output layer on the task are left out ([`LEFT_OUT_IMPORTED`]).
pub fn measure(
    loaded: &LoadedRun,
    probe: &Probe,
    options: &ReportOptions,
) -> Result<Measured, ReportError> {
    let (config, task, model) = (&loaded.run.config, &loaded.run.task, &loaded.model);
    let weights = HeadTensorsByLayer::of(model, true);
    let mut circuits = Circuits::of_model(model, &weights)?;
    let layers = probe.run(model);
    circuits.rollout = rollout::rollout(&rollout::mean_attention(&layers, 0));
    let context = MeasureContext::of_run(loaded);
    let relations = match &loaded.tokenizer {
        Some(tokenizer) => {
            let max_positions = loaded.run.io.max_seq_len;
            let treebank = loaded.treebank.as_deref();
            relations::measure_word_relations(context, tokenizer, max_positions, treebank)?
                .map(|(relations, _)| relations)
        }
        None => relations::measure_relations(context).map(|mut relations| {
            relation_ablation::add_relation_ablation(&mut relations, context);
            relations
        }),
    };
    // The output layer is scored on the task's own examples only for models headlab trained.
    let eval = config.import.is_none().then(|| config.eval_examples(task));
    let (mut heads, eval_token_acc) = measure_heads(
        loaded,
        eval.as_deref(),
        probe,
        &layers,
        &circuits,
        relations.as_ref(),
    );
    let similarity: Vec<LayerSimilarity> = layers
        .iter()
        .enumerate()
        .map(|(l, layer)| LayerSimilarity::measure(l, &weights, layer, true))
        .collect();
    let outputs = eval
        .as_deref()
        .map(|eval| measure_outputs(loaded, eval, &mut heads, options));
    let mut summary = summarise(
        loaded,
        &heads,
        &layers,
        &similarity,
        eval_token_acc,
        &outputs,
    );
    summary.probe_token_names = probe.pieces.as_ref().and(probe.token_names.clone());
    let (pruning, logit_lens) = outputs.map_or((None, None), |o| (Some(o.0), Some(o.1)));
    let scored = eval.is_some();
    let patching = (scored && options.patching)
        .then(|| patching(context))
        .flatten();
    let ceiling = scored.then(|| ceiling::ceiling(context)).flatten();
    let agreement = scored.then(|| agreement::agreement(context)).flatten();
    let divergence = divergence::divergence(loaded, probe)?;
    let trajectories = trajectories::trajectories(loaded, probe, &layers)?;
    Ok(Measured {
        weights,
        layers,
        heads,
        eval_token_acc,
        circuits,
        similarity,
        pruning,
        relations,
        summary,
        divergence,
        trajectories,
        logit_lens,
        patching,
        ceiling,
        agreement,
    })
}

/// What an imported model's report leaves out, and why: its output layer is not scored on
/// the task (a `BertModel` has no prediction head; a `BertForMaskedLM`'s masked-word
/// scoring is not built yet).
pub const LEFT_OUT_IMPORTED: &str = "eval accuracy, ablation drops (zero, mean, resample), \
     direct logit attribution, gradient importance, pruning, the logit lens, relation \
     ablation, patching, the Bayes ceiling and agreement: they score the output layer on the \
     task's masked words, which an imported model is not scored on";

/// The measures that score the output layer on `eval`: mean and resample ablation drops
/// (into `heads`), pruning and the logit lens.
fn measure_outputs(
    loaded: &LoadedRun,
    eval: &[Example],
    heads: &mut [HeadRecord],
    options: &ReportOptions,
) -> (Pruning, LogitLens) {
    let (model, device) = (&loaded.model, &loaded.device);
    let drops = ablation_drops(model, eval, device);
    for (head, (mean, resample)) in heads.iter_mut().zip(drops.mean.iter().zip(&drops.resample)) {
        head.mean_ablation_drop = Some(*mean);
        head.resample_ablation_drop = Some(*resample);
    }
    let drops: Vec<f64> = heads
        .iter()
        .map(|h| h.ablation_drop.unwrap_or(0.0))
        .collect();
    let pruning = pruning::prune_model(model, eval, device, &drops, options.prune_tolerance);
    (pruning, logit_lens(model, eval, device))
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
    let (config, model) = (&loaded.run.config, &loaded.model);
    let drops: Vec<f64> = heads.iter().filter_map(|h| h.ablation_drop).collect();
    let importance: Vec<f64> = heads.iter().filter_map(|h| h.gradient_importance).collect();
    let pruning = outputs.as_ref().map(|(pruning, _)| pruning);
    let removal_steps = pruning.map(|p| greedy_removal_steps(p, model.n_heads()));
    let correlate = |a: &[f64], b: Option<&Vec<f64>>| b.and_then(|b| spearman(a, b));
    let imported = config.import.as_ref();
    Summary {
        name: config.name.clone(),
        task: loaded.run.task.name().to_string(),
        head_layout: format!("{:?}", config.model.head_layout).to_lowercase(),
        n_layers: model.n_layers(),
        n_heads: model.n_heads(),
        d_head: layers.first().map_or(0, LayerProbe::d_head),
        n_params: model.num_params(),
        attention_params: model.blocks.iter().map(|b| b.attention.num_params()).sum(),
        eval_token_acc,
        heads_with_role: heads.iter().filter(|h| h.role != "mixed").count(),
        mean_pattern_js: mean_pattern_js(similarity),
        removable_heads: pruning.map(|p| p.greedy.removable),
        importance_ablation_spearman: spearman(&importance, &drops),
        importance_pruning_spearman: correlate(&importance, removal_steps.as_ref()),
        ablation_pruning_spearman: correlate(&drops, removal_steps.as_ref()),
        imported_from: imported.map(|i| i.source.display().to_string()),
        left_out: match imported {
            Some(_) => vec![LEFT_OUT_IMPORTED.to_string()],
            None => vec![],
        },
        probe_token_names: None,
    }
}
