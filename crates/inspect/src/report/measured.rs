//! Everything a report measures, before anything is written: circuits from the weights,
//! the probe, relation scores, every head's record, similarity, pruning, the summary, and
//! the heads followed through the run's snapshots.

use burn::module::Module;
use run::snapshot::HeadTensorsByLayer;
use tasks::Example;
use tasks::batch::EVAL_CHUNK;

use crate::circuits::{Circuits, rollout};
use crate::interventions::ablation::ablation_drops;
use crate::interventions::patching::{Patching, patching, patching_in_pieces};
use crate::interventions::pruning::{self, Pruning};
use crate::interventions::relation_ablation;
use crate::load::context::MeasureContext;
use crate::load::masked_words::MaskedWords;
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
use crate::measures::special::probe_special_attention;
use crate::measures::trajectories::{self, Trajectories};
use crate::report::dir::ReportContents;
use crate::report::error::ReportError;
use crate::report::options::ReportOptions;
use crate::report::summary::{Summary, greedy_removal_steps, mean_pattern_js};
use tasks::conllu::TreebankSentence;

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
    /// `relation-sentences.conllu`: the sentences `relations.json` scored, with their arcs.
    pub relation_sentences: Vec<TreebankSentence>,
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
            trained: loaded.run.config.import.is_none(),
        }
    }
}

/// Reads the circuits from the weights, runs the probe, scores the heads on the task's
/// dependency relations (if it has parses), measures and ablates every head, compares heads,
/// prunes, and follows the heads through the run's snapshots. An imported model's output
/// layer is scored on the probe's masked words where it has a prediction head; what its
/// report leaves out is said in `summary.left_out` ([`LEFT_OUT_NO_HEAD`],
/// [`LEFT_OUT_MASKED_LM`]).
pub fn measure(
    loaded: &LoadedRun,
    probe: &Probe,
    options: &ReportOptions,
) -> Result<Measured, ReportError> {
    let (config, model) = (&loaded.run.config, &loaded.model);
    let weights = HeadTensorsByLayer::of(model, true);
    let mut circuits = Circuits::of_model(model, &weights)?;
    let layers = probe.run(model);
    circuits.rollout = rollout::rollout(&rollout::mean_attention(&layers, 0));
    let context = MeasureContext::of_run(loaded);
    let Scoring {
        eval,
        left_out,
        mask,
    } = scoring(loaded, probe);
    let (relations, relation_sentences) = measure_relations(loaded, context, options, mask)?;
    let (mut heads, eval_token_acc) = measure_heads(
        loaded,
        eval.as_deref(),
        probe,
        &layers,
        &circuits,
        relations.as_ref(),
    );
    let similarity = layer_similarity(&weights, &layers);
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
    summary.special_attention = probe_special_attention(probe, &layers);
    summary.left_out = left_out;
    let (pruning, logit_lens) = outputs.map_or((None, None), |o| (Some(o.0), Some(o.1)));
    let patching = match options.patching {
        true => measure_patching(loaded, context, mask)?,
        false => None,
    };
    // The ceiling reads the task's own output classes.
    let trained = config.import.is_none();
    let ceiling = trained.then(|| ceiling::ceiling(context)).flatten();
    let agreement = match (&loaded.tokenizer, mask) {
        (None, _) => agreement::agreement(context),
        (Some(tokenizer), Some(mask)) => {
            let max_positions = loaded.run.io.max_seq_len;
            agreement::agreement_in_pieces(context, tokenizer, mask, max_positions)?
        }
        (Some(_), None) => None,
    };
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
        relation_sentences,
        summary,
        divergence,
        trajectories,
        logit_lens,
        patching,
        ceiling,
        agreement,
    })
}

/// How alike the heads of each layer are (`similarity.json`).
fn layer_similarity(weights: &HeadTensorsByLayer, layers: &[LayerProbe]) -> Vec<LayerSimilarity> {
    layers
        .iter()
        .enumerate()
        .map(|(l, layer)| LayerSimilarity::measure(l, weights, layer, true))
        .collect()
}

/// `relations.json` and the sentences it scored: on the task's tokens with relation ablation,
/// or for an imported model on words (of the task's sentences, or of the treebank given),
/// with relation ablation where it is a masked-LM scored with `mask`; none without parses.
fn measure_relations(
    loaded: &LoadedRun,
    context: MeasureContext,
    options: &ReportOptions,
    mask: Option<u32>,
) -> Result<(Option<Relations>, Vec<TreebankSentence>), ReportError> {
    let count = options.relation_sentences;
    // Masked as the task masks in training (`inspect --relations-masked`).
    let mask_fraction = match &loaded.run.config.task {
        tasks::TaskConfig::Grammar(spec) if options.relations_masked => Some(spec.mask_fraction),
        _ => None,
    };
    let scored = match &loaded.tokenizer {
        Some(tokenizer) => {
            let max_positions = loaded.run.io.max_seq_len;
            let treebank = loaded.treebank.as_deref();
            relations::measure_word_relations(
                context,
                tokenizer,
                max_positions,
                treebank,
                count,
                mask_fraction,
            )?
            .map(|(mut relations, pieces)| {
                // A masked-LM's best heads taken out, on masked words of the sentences.
                if let Some(mask) = mask {
                    let ablate = relation_ablation::add_relation_ablation_in_pieces;
                    ablate(&mut relations, context, &pieces, mask);
                }
                (relations, pieces.trees)
            })
        }
        None => {
            let count = count.unwrap_or(relations::RELATION_SENTENCES);
            let scored = relations::measure_relations(context, count, mask_fraction);
            scored.map(|(mut relations, sentences)| {
                relation_ablation::add_relation_ablation(&mut relations, context);
                (relations, sentences)
            })
        }
    };
    Ok(match scored {
        Some((relations, sentences)) => (Some(relations), sentences),
        None => (None, vec![]),
    })
}

/// `patching.json`: on the task's minimal pairs, or for an imported masked-LM (its mask
/// piece `mask`) on them read as its pieces; none for an imported model that is not
/// scored, or a task without pairs.
fn measure_patching(
    loaded: &LoadedRun,
    context: MeasureContext,
    mask: Option<u32>,
) -> Result<Option<Patching>, ReportError> {
    Ok(match (&loaded.tokenizer, mask) {
        (None, _) => patching(context),
        (Some(tokenizer), Some(mask)) => {
            let max_positions = loaded.run.io.max_seq_len;
            patching_in_pieces(context, tokenizer, mask, max_positions)?
        }
        (Some(_), None) => None,
    })
}

/// What the report of an imported `BertModel` leaves out, and why.
pub const LEFT_OUT_NO_HEAD: &str = "eval accuracy, ablation drops (zero, mean, resample), \
     direct logit attribution, gradient importance, pruning and the logit lens: they score \
     the output layer on masked words, and a BertModel checkpoint has no prediction head \
     (a BertForMaskedLM has)";

/// What the report of an imported masked-LM checkpoint leaves out, and why.
pub const LEFT_OUT_MASKED_LM: &str = "the Bayes ceiling: it reads the grammar task's own \
     output classes, and the model predicts word pieces; \
     greedy pruning (H (H + 1) / 2 passes over the masked words, 2628 for 72 heads: the \
     ranked order is measured), head-to-head path patching (6660 runs for 6 layers of 12 \
     heads: layer to layer is measured) and head patching at each position (one run per \
     head and position: whole heads are measured)";

/// What the output layer is scored on, and what the report leaves out.
struct Scoring {
    /// The examples the output layer is scored on; none where it is not.
    eval: Option<Vec<Example>>,
    /// What the report leaves out, each with why.
    left_out: Vec<String>,
    /// An imported masked-LM's mask piece, when it is scored.
    mask: Option<u32>,
}

/// A model headlab trained is scored on its task's evaluation set; an imported masked-LM
/// checkpoint on the probe's sentences, each word masked alone ([`MaskedWords`]), when its
/// tokenizer has a `[MASK]` piece and a chunk of them fits the memory bound; an imported
/// `BertModel` is not scored.
fn scoring(loaded: &LoadedRun, probe: &Probe) -> Scoring {
    let config = &loaded.run.config;
    let not_scored = |left_out: Vec<String>| Scoring {
        eval: None,
        left_out,
        mask: None,
    };
    let (Some(tokenizer), Some(pieces)) = (&loaded.tokenizer, &probe.pieces) else {
        return Scoring {
            eval: Some(config.eval_examples(&loaded.run.task)),
            left_out: vec![],
            mask: None,
        };
    };
    if loaded.model.output_transform.is_none() {
        return not_scored(vec![LEFT_OUT_NO_HEAD.to_string()]);
    }
    let left_out_because = |why: String| {
        let what = LEFT_OUT_NO_HEAD.split(": they").next().unwrap_or_default();
        vec![
            format!("{what}, patching and agreement: {why}"),
            LEFT_OUT_MASKED_LM.to_string(),
        ]
    };
    let Some(mask) = tokenizer.id("[MASK]") else {
        let file = tokenizer.path().display();
        return not_scored(left_out_because(format!("{file} has no [MASK] piece")));
    };
    let masked = MaskedWords::of(pieces, mask);
    let chunk = masked.len().clamp(1, EVAL_CHUNK);
    if let Err(e) = Probe::check_size_at(chunk, &loaded.run, 1, probe.forward_len()) {
        let why = format!("a chunk of {chunk} masked sentences is over the memory bound ({e})");
        return not_scored(left_out_because(why));
    }
    Scoring {
        eval: Some(masked.examples),
        left_out: vec![LEFT_OUT_MASKED_LM.to_string()],
        mask: Some(mask),
    }
}

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
    // The greedy search costs H (H + 1) / 2 evaluations: left out for imported models.
    let greedy = loaded.run.config.import.is_none();
    let pruning = pruning::prune_model(
        model,
        eval,
        device,
        &drops,
        (options.prune_tolerance, greedy),
    );
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
    let removal_steps = pruning.and_then(|p| greedy_removal_steps(p, model.n_heads()));
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
        removable_heads: pruning.and_then(|p| p.greedy.as_ref()).map(|g| g.removable),
        importance_ablation_spearman: spearman(&importance, &drops),
        importance_pruning_spearman: correlate(&importance, removal_steps.as_ref()),
        ablation_pruning_spearman: correlate(&drops, removal_steps.as_ref()),
        imported_from: imported.map(|i| i.source.display().to_string()),
        task_overrides: loaded.task_overrides.clone(),
        left_out: vec![],
        probe_token_names: None,
        special_attention: None,
    }
}
