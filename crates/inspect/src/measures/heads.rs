//! One record per head, as in `heads.json`: its pattern measures on the probe batch, its
//! mean attention on each named pattern, the role that follows from them, the eval
//! accuracy lost when it alone is ablated, its copying score and effective ranks (from
//! [`Circuits`]), its direct logit attribution ([`crate::measures::attribution`]), gradient
//! importance ([`crate::measures::importance`]), norm-based attention ([`crate::measures::norms`]), its
//! attention on the task's exact targets ([`crate::measures::patterns::task_target_score`]) and, for
//! tasks with dependency parses, its relation scores ([`crate::measures::relations`]).

use std::collections::BTreeMap;

use model::HeadId;
use run::units::Unit;
use serde::{Deserialize, Serialize};
use tasks::evaluate;
use tasks::{AttentionPattern, Example, Task};

use crate::circuits::Circuits;
use crate::load::context::MeasureContext;
use crate::load::probe::{LayerProbe, Probe};
use crate::measures::attribution::mean_direct_attribution;
use crate::measures::importance::gradient_importance;
use crate::measures::norms::head_norm_scores;
use crate::measures::patterns::{HeadPattern, task_target_score};
use crate::measures::relations::{DirectionScores, Relations};
use crate::measures::strongest::{AttendsTo, attends_to};

/// A head takes a pattern's name as its role when that pattern gets at least this much of
/// its attention on average.
pub const ROLE_THRESHOLD: f64 = 0.5;

/// The unit of each number of a head's record that has one (`pattern_scores.NAME` is a
/// fraction too, see [`unit_of`]); the others are ranks and scores whose name says what they
/// are. The pages, the terminal, `heads.csv` and the book's description of `heads.json` name
/// their units from here, and a test holds the book to it.
pub const FIELD_UNITS: [(&str, Unit); 8] = [
    ("entropy", Unit::Nats),
    ("confidence", Unit::Fraction),
    ("mean_distance", Unit::Positions),
    ("ablation_drop", Unit::Fraction),
    ("mean_ablation_drop", Unit::Fraction),
    ("resample_ablation_drop", Unit::Fraction),
    ("task_target_score", Unit::Fraction),
    ("direct_logit_attribution", Unit::Logits),
];

/// The unit of a field of a head's record: [`FIELD_UNITS`], a fraction for a pattern score
/// (`pattern_scores.NAME`), else [`Unit::Plain`].
pub fn unit_of(field: &str) -> Unit {
    if field.starts_with("pattern_scores.") {
        return Unit::Fraction;
    }
    FIELD_UNITS
        .iter()
        .find(|(name, _)| *name == field)
        .map_or(Unit::Plain, |(_, unit)| *unit)
}

/// One head's line of `heads.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeadRecord {
    /// The head (`layer` and `head` in the JSON).
    #[serde(flatten)]
    pub id: HeadId,
    /// Mean entropy of the attention rows, in nats.
    pub entropy: f64,
    /// Mean largest attention probability, a fraction (Voita et al. 2019).
    pub confidence: f64,
    /// Mean |query - key| weighted by attention, in token positions.
    pub mean_distance: f64,
    /// Mean attention mass on each pattern's positions, a fraction.
    pub pattern_scores: BTreeMap<String, f64>,
    /// Eval token accuracy lost when only this head is ablated (its output set to 0), a
    /// fraction (0.01 is one point; pages and the terminal show points); null for a model whose output layer is not scored (an imported `BertModel`, which has no
    /// prediction head).
    pub ablation_drop: Option<f64>,
    /// The best-scoring pattern if its score reaches [`ROLE_THRESHOLD`], else "mixed".
    pub role: String,
    /// `sum(lambda) / sum(|lambda|)` of the OV circuit's eigenvalues, in [-1, 1]: 1 copies
    /// what the head attends to ([`crate::circuits::copying`]). Fields from here on are 0 (or
    /// null) in a `heads.json` written before they were measured.
    #[serde(default)]
    pub copying_score: f64,
    /// The same score for the full circuit embedding -> OV -> output layer; null unless the
    /// task has as many output classes as input tokens.
    #[serde(default)]
    pub full_copying_score: Option<f64>,
    /// Effective rank of the QK circuit, in [0, d_head] ([`crate::circuits::rank`]).
    #[serde(default)]
    pub qk_effective_rank: f64,
    /// Effective rank of the OV circuit, in [0, d_head].
    #[serde(default)]
    pub ov_effective_rank: f64,
    /// The head's direct logit on the correct class through the frozen final norm (and,
    /// post-norm, the later blocks' norms) and the output layer, averaged over the probe's
    /// scored positions, or an imported masked-LM's masked words
    /// ([`crate::measures::attribution`]): positive pushes the right answer up. Null where
    /// the output layer is not scored (as `ablation_drop`).
    #[serde(default)]
    pub direct_logit_attribution: Option<f64>,
    /// `mean over batches |dL/d xi|` for the head's mask `xi` on the eval set (Michel et
    /// al. 2019, [`crate::measures::importance`]). Null where the output layer is not scored.
    #[serde(default)]
    pub gradient_importance: Option<f64>,
    /// Mean `||f(x_j)||`, `f(x) = (x v + b_v) o`, over the probe's positions: how much the
    /// head can write ([`crate::measures::norms`]).
    #[serde(default)]
    pub mean_value_norm: f64,
    /// Mean `alpha_ij ||f(x_j)||` over the probe's queries and keys (Kobayashi et al. 2020).
    #[serde(default)]
    pub mean_weighted_norm: f64,
    /// Correlation of `alpha_ij` with `alpha_ij ||f(x_j)||`: low or negative when the head
    /// attends most where it writes least; null when either does not vary.
    #[serde(default)]
    pub norm_weight_correlation: Option<f64>,
    /// Mean attention mass on the exact positions that solve each query, from the task's
    /// own generator ([`tasks::Task::attention_targets`]), over the probe's queries
    /// that have any ([`crate::measures::patterns::task_target_score`]); null for tasks without
    /// targets (`file`).
    #[serde(default)]
    pub task_target_score: Option<f64>,
    /// Per dependency relation ("det", "amod", ...), the fraction of its arcs whose
    /// dependent attends most to its head and whose head attends most to its dependent
    /// ([`crate::measures::relations`], Clark et al. 2019); null for tasks without parses.
    #[serde(default)]
    pub relation_scores: Option<BTreeMap<String, DirectionScores>>,
    /// Eval token accuracy lost when only this head's output is replaced by its mean over
    /// the evaluation set ([`crate::interventions::ablation`]), a fraction; null where not
    /// measured.
    #[serde(default)]
    pub mean_ablation_drop: Option<f64>,
    /// Eval token accuracy lost when only this head's output on each sequence is replaced
    /// by its output on another sequence, a fraction; null where not measured.
    #[serde(default)]
    pub resample_ablation_drop: Option<f64>,
    /// The offsets and tokens that take the largest shares of its attention on the probe
    /// ([`crate::measures::strongest`]): what a `mixed` head does, in checkable terms;
    /// absent in a `heads.json` written before it was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attends_to: Option<AttendsTo>,
}

/// What the output layer says of every head, layer-major (see [`measure_heads`]).
struct OutputMeasures {
    /// Eval token accuracy with every head on.
    accuracy: f64,
    /// Accuracy lost with each head zeroed.
    drops: Vec<f64>,
    /// Direct logit attribution.
    attribution: Vec<f64>,
    /// Gradient importance.
    importance: Vec<f64>,
}

/// Every head's record (measures, direct logit attribution and norms on the probe;
/// ablation and gradient importance on the eval set; circuit scores from `circuits`;
/// relation scores from `relations`, when the task has parses), and the eval token
/// accuracy with all heads on. Without `eval` (a model whose output layer is not scored: an
/// imported `BertModel`), the measures that read the output layer are null. For a probe of
/// words (an imported masked-LM), `eval` holds its masked words and the direct logit
/// attribution is taken on them.
pub fn measure_heads(
    context: MeasureContext,
    eval: Option<&[Example]>,
    probe: &Probe,
    layers: &[LayerProbe],
    circuits: &Circuits,
    relations: Option<&Relations>,
) -> (Vec<HeadRecord>, Option<f64>) {
    let MeasureContext { task, model, .. } = context;
    let n_heads = model.n_heads();
    let tokens = probe.token_ids();
    let outputs = eval.map(|eval| output_measures(context, probe, eval));
    let targets: Vec<Vec<Vec<usize>>> = probe
        .examples
        .iter()
        .map(|example| task.attention_targets(&example.input))
        .collect();

    let names = probe.token_names.as_deref();
    let mut heads = vec![];
    for (l, layer) in layers.iter().enumerate() {
        let measured = measure_layer(task, layer, &tokens, &targets);
        for (h, pattern) in measured.into_iter().enumerate() {
            let flat = HeadId::new(l, h).flat_index(n_heads);
            let output =
                |pick: fn(&OutputMeasures) -> &Vec<f64>| outputs.as_ref().map(|o| pick(o)[flat]);
            let circuit = circuits.head(HeadId::new(l, h));
            let norms = head_norm_scores(layer, h, &model.blocks[l].attention.head_weights(h));
            heads.push(HeadRecord {
                id: HeadId::new(l, h),
                entropy: pattern.entropy,
                confidence: pattern.confidence,
                mean_distance: pattern.mean_distance,
                pattern_scores: pattern.pattern_scores,
                ablation_drop: output(|o| &o.drops),
                role: pattern.role,
                copying_score: circuit.copying_score,
                full_copying_score: circuit.full_copying_score,
                qk_effective_rank: circuit.qk_effective_rank,
                ov_effective_rank: circuit.ov_effective_rank,
                direct_logit_attribution: output(|o| &o.attribution),
                gradient_importance: output(|o| &o.importance),
                mean_value_norm: norms.mean_value_norm,
                mean_weighted_norm: norms.mean_weighted_norm,
                norm_weight_correlation: norms.norm_weight_correlation,
                task_target_score: pattern.task_target_score,
                relation_scores: relations.map(|r| r.head_scores(HeadId::new(l, h))),
                mean_ablation_drop: None,
                resample_ablation_drop: None,
                attends_to: Some(attends_to(
                    &layer.pattern,
                    &layer.lengths,
                    h,
                    &tokens,
                    names,
                )),
            });
        }
    }
    (heads, outputs.map(|o| o.accuracy))
}

/// What the output layer says of every head on `eval`: the accuracy with all heads on, each
/// head's zero-ablation drop, its direct logit attribution (on the probe where it can be
/// scored as it is, else on `eval`) and its gradient importance.
fn output_measures(context: MeasureContext, probe: &Probe, eval: &[Example]) -> OutputMeasures {
    let MeasureContext { model, device, .. } = context;
    let n_heads = model.n_heads();
    let (_, base) = evaluate(model, eval, device, None);
    // A probe of words scores nothing; its masked words (the eval set) are scored instead.
    let attributed = probe.scorable_examples().unwrap_or(eval);
    let attribution = mean_direct_attribution(model, attributed, device);
    let importance = gradient_importance(model, eval, device);
    let drops: Vec<f64> = (0..model.n_layers() * n_heads)
        .map(|flat| {
            let id = HeadId::new(flat / n_heads, flat % n_heads);
            let mask = model.head_mask_keeping(|other| other != id, device);
            let (_, ablated) = evaluate(model, eval, device, Some(mask));
            base.token_accuracy() - ablated.token_accuracy()
        })
        .collect();
    OutputMeasures {
        accuracy: base.token_accuracy(),
        drops,
        attribution,
        importance,
    }
}

/// One head's pattern measures on the probe, as `heads.json` names them: part of each
/// [`HeadRecord`], and what `compare` shows and takes its roles from, so the page,
/// `matching.json` and `heads.json` agree.
#[derive(Debug, Clone, PartialEq)]
pub struct HeadMeasures {
    /// The best pattern if its score reaches the role threshold, else "mixed".
    pub role: String,
    /// Mean entropy of the attention rows, in nats.
    pub entropy: f64,
    /// Mean largest attention probability.
    pub confidence: f64,
    /// Mean |query - key| weighted by attention, in token positions.
    pub mean_distance: f64,
    /// Mean attention on the task's exact targets; None for tasks without any (`file`).
    pub task_target_score: Option<f64>,
    /// Mean attention mass on each named pattern.
    pub pattern_scores: BTreeMap<String, f64>,
}

/// Every head of `layer` measured on the probe (`tokens`: `[batch * seq]`; `targets`: per
/// sequence, the task's attention targets), with the functions `inspect` uses for
/// `heads.json`.
pub fn measure_layer(
    task: &Task,
    layer: &LayerProbe,
    tokens: &[u32],
    targets: &[Vec<Vec<usize>>],
) -> Vec<HeadMeasures> {
    let patterns = scored_patterns(task);
    let (_, n_heads, seq) = layer.dims();
    (0..n_heads)
        .map(|h| {
            let probs = layer.head_pattern(h);
            let head = HeadPattern {
                probs: &probs,
                tokens,
                lengths: &layer.lengths,
                seq,
            };
            let (pattern_scores, role) = scores_and_role(&head, &patterns);
            HeadMeasures {
                role,
                entropy: head.entropy(),
                confidence: head.confidence(),
                mean_distance: head.mean_distance(),
                task_target_score: task_target_score(&head, targets),
                pattern_scores,
            }
        })
        .collect()
}

/// Each head's mean attention on every pattern (the generic ones and the task's solving
/// patterns), and its role: the best pattern if it reaches [`ROLE_THRESHOLD`], else
/// "mixed". `tokens` are the probe's inputs, `[batch * seq]`.
pub fn head_roles(
    task: &Task,
    layer: &LayerProbe,
    tokens: &[u32],
) -> Vec<(BTreeMap<String, f64>, String)> {
    let patterns = scored_patterns(task);
    let (_, n_heads, seq) = layer.dims();
    (0..n_heads)
        .map(|h| {
            let probs = layer.head_pattern(h);
            let head = HeadPattern {
                probs: &probs,
                tokens,
                lengths: &layer.lengths,
                seq,
            };
            scores_and_role(&head, &patterns)
        })
        .collect()
}

/// The patterns every head is scored on: the generic ones, then the task's solving patterns
/// not among them.
fn scored_patterns(task: &Task) -> Vec<AttentionPattern> {
    let mut patterns: Vec<AttentionPattern> = AttentionPattern::generic().to_vec();
    for pattern in task.solving_patterns() {
        if !patterns.contains(&pattern) {
            patterns.push(pattern);
        }
    }
    patterns
}

/// `head`'s mean attention on each of `patterns`, and its role: the best pattern if it
/// reaches [`ROLE_THRESHOLD`], else "mixed".
fn scores_and_role(
    head: &HeadPattern,
    patterns: &[AttentionPattern],
) -> (BTreeMap<String, f64>, String) {
    let pattern_scores: BTreeMap<String, f64> = patterns
        .iter()
        .map(|p| (p.name(), head.pattern_score(*p)))
        .collect();
    let role = pattern_scores
        .iter()
        .max_by(|a, b| a.1.total_cmp(b.1))
        .filter(|(_, score)| **score >= ROLE_THRESHOLD)
        .map_or_else(|| "mixed".to_string(), |(name, _)| name.clone());
    (pattern_scores, role)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_with_a_unit_is_a_field_of_the_record_and_drops_show_in_points() {
        let record = serde_json::to_value(HeadRecord {
            id: HeadId { layer: 0, head: 0 },
            entropy: 0.0,
            confidence: 0.0,
            mean_distance: 0.0,
            pattern_scores: BTreeMap::from([("self".to_string(), 1.0)]),
            ablation_drop: None,
            role: "self".into(),
            copying_score: 0.0,
            full_copying_score: None,
            qk_effective_rank: 0.0,
            ov_effective_rank: 0.0,
            direct_logit_attribution: None,
            gradient_importance: None,
            mean_value_norm: 0.0,
            mean_weighted_norm: 0.0,
            norm_weight_correlation: None,
            task_target_score: None,
            relation_scores: None,
            mean_ablation_drop: None,
            resample_ablation_drop: None,
            attends_to: None,
        })
        .unwrap();
        for (field, _) in FIELD_UNITS {
            assert!(record.get(field).is_some(), "{field} is not in heads.json");
        }
        assert_eq!(unit_of("pattern_scores.self"), Unit::Fraction);
        assert_eq!(unit_of("qk_effective_rank"), Unit::Plain);
    }

    #[test]
    fn a_heads_json_written_before_the_circuit_scores_still_parses() {
        let old = r#"[{"layer": 1, "head": 0, "entropy": 0.5, "confidence": 0.9,
            "mean_distance": 1.0, "pattern_scores": {"self": 0.75}, "ablation_drop": 0.25,
            "role": "self"}]"#;
        let heads: Vec<HeadRecord> = serde_json::from_str(old).unwrap();
        assert_eq!(heads[0].id, HeadId::new(1, 0));
        assert_eq!(heads[0].role, "self");
        assert_eq!(heads[0].pattern_scores["self"], 0.75);
        assert_eq!(heads[0].copying_score, 0.0);
        assert_eq!(heads[0].full_copying_score, None);
        assert_eq!(heads[0].qk_effective_rank, 0.0);
        assert_eq!(heads[0].ov_effective_rank, 0.0);
        assert_eq!(heads[0].direct_logit_attribution, None);
        assert_eq!(heads[0].gradient_importance, None);
        assert_eq!(heads[0].mean_weighted_norm, 0.0);
        assert_eq!(heads[0].norm_weight_correlation, None);
        assert_eq!(heads[0].task_target_score, None);
        assert_eq!(heads[0].relation_scores, None);
        // A new record reads back whole.
        let new = HeadRecord {
            copying_score: -0.5,
            full_copying_score: Some(1.0),
            qk_effective_rank: 3.5,
            ov_effective_rank: 2.0,
            direct_logit_attribution: Some(1.25),
            gradient_importance: Some(0.5),
            mean_value_norm: 3.0,
            mean_weighted_norm: 0.75,
            norm_weight_correlation: Some(-0.25),
            task_target_score: Some(0.5),
            relation_scores: Some(BTreeMap::from([(
                "det".to_string(),
                DirectionScores {
                    dependent_to_head: 0.75,
                    head_to_dependent: 0.25,
                },
            )])),
            mean_ablation_drop: Some(0.125),
            resample_ablation_drop: Some(0.25),
            attends_to: None,
            ..heads[0].clone()
        };
        let json = serde_json::to_string(&new).unwrap();
        // The head is written as before, `layer` and `head` first.
        assert!(
            json.starts_with(r#"{"layer":1,"head":0,"entropy":"#),
            "{json}"
        );
        assert_eq!(serde_json::from_str::<HeadRecord>(&json).unwrap(), new);
    }
}
