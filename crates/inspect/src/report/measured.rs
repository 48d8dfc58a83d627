//! Everything a report measures, before anything is written: circuits from the weights,
//! the probe, relation scores, every head's record, similarity, pruning, the summary, and
//! the heads followed through the run's snapshots.

use burn::module::Module;
use run::snapshot::HeadTensorsByLayer;

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
    /// Eval token accuracy with every head on.
    pub eval_token_acc: f64,
    /// `circuits.json`.
    pub circuits: Circuits,
    /// One similarity record per layer.
    pub similarity: Vec<LayerSimilarity>,
    /// `pruning.json`.
    pub pruning: Pruning,
    /// `relations.json`, for tasks with parses.
    pub relations: Option<Relations>,
    /// `summary.json`.
    pub summary: Summary,
    /// `divergence.csv` (empty without snapshots).
    pub divergence: Vec<DivergencePoint>,
    /// `trajectories.json` (none without snapshots).
    pub trajectories: Option<Trajectories>,
    /// `logit_lens.json`.
    pub logit_lens: LogitLens,
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
        }
    }
}

/// Reads the circuits from the weights, runs the probe, scores the heads on the task's
/// dependency relations (if it has parses), measures and ablates every head, compares heads,
/// prunes, and follows the heads through the run's snapshots.
pub fn measure(
    loaded: &LoadedRun,
    probe: &Probe,
    options: &ReportOptions,
) -> Result<Measured, ReportError> {
    let (config, task, model, device) = (
        &loaded.run.config,
        &loaded.run.task,
        &loaded.model,
        &loaded.device,
    );
    let weights = HeadTensorsByLayer::of(model, true);
    let mut circuits = Circuits::of_model(model, &weights)?;
    let layers = probe.run(model);
    circuits.rollout = rollout::rollout(&rollout::mean_attention(&layers, 0));
    let context = MeasureContext::of_run(loaded);
    let mut relations = relations::measure_relations(context);
    if let Some(relations) = relations.as_mut() {
        relation_ablation::add_relation_ablation(relations, context);
    }
    let eval = config.eval_examples(task);
    let (mut heads, eval_token_acc) =
        measure_heads(loaded, &eval, probe, &layers, &circuits, relations.as_ref());
    let drops = ablation_drops(model, &eval, device);
    for (head, (mean, resample)) in heads.iter_mut().zip(drops.mean.iter().zip(&drops.resample)) {
        head.mean_ablation_drop = Some(*mean);
        head.resample_ablation_drop = Some(*resample);
    }
    let similarity: Vec<LayerSimilarity> = layers
        .iter()
        .enumerate()
        .map(|(l, layer)| LayerSimilarity::measure(l, &weights, layer, true))
        .collect();
    let drops: Vec<f64> = heads.iter().map(|h| h.ablation_drop).collect();
    let pruning = pruning::prune_model(model, &eval, device, &drops, options.prune_tolerance);
    let importance: Vec<f64> = heads.iter().map(|h| h.gradient_importance).collect();
    let removal_steps = greedy_removal_steps(&pruning, model.n_heads());
    let summary = Summary {
        name: config.name.clone(),
        task: task.name().to_string(),
        head_layout: format!("{:?}", config.model.head_layout).to_lowercase(),
        n_layers: model.n_layers(),
        n_heads: model.n_heads(),
        d_head: layers.first().map_or(0, LayerProbe::d_head),
        n_params: model.num_params(),
        attention_params: model.blocks.iter().map(|b| b.attention.num_params()).sum(),
        eval_token_acc,
        heads_with_role: heads.iter().filter(|h| h.role != "mixed").count(),
        mean_pattern_js: mean_pattern_js(&similarity),
        removable_heads: pruning.greedy.removable,
        importance_ablation_spearman: spearman(&importance, &drops),
        importance_pruning_spearman: spearman(&importance, &removal_steps),
        ablation_pruning_spearman: spearman(&drops, &removal_steps),
    };
    let logit_lens = logit_lens(model, &eval, device);
    let patching = options.patching.then(|| patching(context)).flatten();
    let ceiling = ceiling::ceiling(context);
    let agreement = agreement::agreement(context);
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
