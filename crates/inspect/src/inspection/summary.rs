//! `summary.json`, the run's sizes and headline numbers for collecting many runs into a
//! table, and `similarity.json`'s top level.

use serde::{Deserialize, Serialize};

use crate::interventions::pruning::Pruning;
use crate::load::text::ProbeSource;
use crate::measures::similarity::{LayerSimilarity, mean_off_diagonal};

/// `similarity.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SimilarityFile {
    /// One entry per layer.
    pub layers: Vec<LayerSimilarity>,
}

/// `summary.json`: the run's sizes and headline numbers, one object per report, for
/// collecting many runs into a table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Run name from the config.
    pub name: String,
    /// Task kind.
    pub task: String,
    /// What the probe's sequences are: the run's task (with `inspect --set` overrides), the
    /// shipped treebank, or a treebank file, as `provenance.json` names it. A task probe in a
    /// `summary.json` written before it was recorded.
    #[serde(default)]
    pub probe: ProbeSource,
    /// `split`, `wide` or `narrow`.
    pub head_layout: String,
    /// Encoder blocks.
    pub n_layers: usize,
    /// Heads per block.
    pub n_heads: usize,
    /// Width of each head.
    pub d_head: usize,
    /// Parameters of the whole model; for an imported one, its checkpoint's count (the
    /// import's), tied embeddings counted once.
    pub n_params: usize,
    /// Parameters of the attention modules (every layer's q, k, v and output projection).
    pub attention_params: usize,
    /// Eval token accuracy with every head on; null for a model whose output layer is not
    /// scored on the task (an imported `BertModel`: see `left_out`).
    pub eval_token_acc: Option<f64>,
    /// Heads whose role is not "mixed".
    pub heads_with_role: usize,
    /// Mean pattern JS distance between the heads of a layer, averaged over layers with
    /// more than one head (0 when there are none).
    pub mean_pattern_js: f64,
    /// Heads greedy pruning removes before accuracy falls more than the tolerance; null
    /// where the output layer is not scored.
    pub removable_heads: Option<usize>,
    /// Spearman rank correlation, over heads, of gradient importance with the single-head
    /// ablation drop ([`crate::measures::importance`]); null when undefined (fewer than two
    /// heads, or one side all equal). Fields from here on are null in a `summary.json`
    /// written before they were measured.
    #[serde(default)]
    pub importance_ablation_spearman: Option<f64>,
    /// Spearman correlation of gradient importance with the step at which greedy pruning
    /// removes the head (later: more important).
    #[serde(default)]
    pub importance_pruning_spearman: Option<f64>,
    /// Spearman correlation of the ablation drop with the greedy removal step.
    #[serde(default)]
    pub ablation_pruning_spearman: Option<f64>,
    /// For an imported model (`headlab import`): the checkpoint it came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub imported_from: Option<String>,
    /// For an imported model whose layers share one set of weights (ALBERT): true. Its
    /// heads are measured per layer as any model's; a head's weights (and so its circuits)
    /// are the same in every layer, its attention is not.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub shared_layer_weights: bool,
    /// The `task.KEY=VALUE` overrides an imported model's probe was read with (`inspect
    /// --set`); empty: the run's own task.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub task_overrides: Vec<String>,
    /// The measures this report left out, each with why (an imported `BertModel` has no
    /// prediction head to score); empty for headlab's own models. Measuring fills in what
    /// the output layer's scoring leaves out; the report adds why relation scores are absent
    /// ([`crate::inspection::Measured::relations_absent`]), in words.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_out: Vec<String>,
    /// For a probe read as words (an imported model): the name of each token id of
    /// `activations.safetensors`' `tokens` (the task's words, then `[CLS]` and `[SEP]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_token_names: Option<Vec<String>>,
    /// For a probe read as words: each layer's attention on `[CLS]` and `[SEP]`
    /// ([`crate::measures::special`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub special_attention: Option<Vec<crate::measures::special::SpecialAttention>>,
}

/// The step (1-based) at which greedy pruning removes each head, layer-major: heads removed
/// later matter more. None without a greedy curve.
pub fn greedy_removal_steps(pruning: &Pruning, n_heads: usize) -> Option<Vec<f64>> {
    let greedy = pruning.greedy.as_ref()?;
    let mut steps = vec![0.0; pruning.total_heads];
    for step in &greedy.steps {
        steps[step.removed.flat_index(n_heads)] = step.heads_removed as f64;
    }
    Some(steps)
}

/// Mean pattern JS distance between the heads of a layer, over layers with more than one
/// head; 0 when there are none.
pub fn mean_pattern_js(similarity: &[LayerSimilarity]) -> f64 {
    let with_pairs: Vec<f64> = similarity
        .iter()
        .filter(|l| l.pattern_js.len() > 1)
        .map(|l| mean_off_diagonal(&l.pattern_js))
        .collect();
    if with_pairs.is_empty() {
        0.0
    } else {
        with_pairs.iter().sum::<f64>() / with_pairs.len() as f64
    }
}
