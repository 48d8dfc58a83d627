//! One record per head, as in `heads.json`: its pattern measures on the probe batch, its
//! mean attention on each named pattern, the role that follows from them, and the eval
//! accuracy lost when it alone is ablated.

use std::collections::BTreeMap;

use burn::prelude::*;
use serde::{Deserialize, Serialize};
use train::tasks::{AttentionPattern, Example, Task};
use train::trainer::evaluate;

use crate::measures::HeadPattern;
use crate::probe::{LayerProbe, Probe};
use crate::run::LoadedRun;

/// A head takes a pattern's name as its role when that pattern gets at least this much of
/// its attention on average.
pub const ROLE_THRESHOLD: f64 = 0.5;

/// One head's line of `heads.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeadRecord {
    /// Layer index.
    pub layer: usize,
    /// Head index within the layer.
    pub head: usize,
    /// Mean entropy of the attention rows, in nats.
    pub entropy: f64,
    /// Mean largest attention probability (Voita et al. 2019).
    pub confidence: f64,
    /// Mean |query - key| weighted by attention.
    pub mean_distance: f64,
    /// Mean attention mass on each pattern's positions.
    pub pattern_scores: BTreeMap<String, f64>,
    /// Eval token accuracy lost when only this head is ablated.
    pub ablation_drop: f64,
    /// The best-scoring pattern if its score reaches [`ROLE_THRESHOLD`], else "mixed".
    pub role: String,
}

/// Every head's record (measures on the probe, ablation on the eval set), and the eval
/// token accuracy with all heads on.
pub fn measure_heads(
    loaded: &LoadedRun,
    eval: &[Example],
    probe: &Probe,
    layers: &[LayerProbe],
) -> (Vec<HeadRecord>, f64) {
    let (task, model, device) = (&loaded.run.task, &loaded.model, &loaded.device);
    let (_, base) = evaluate(model, eval, device, None);
    let (n_layers, n_heads) = (model.blocks.len(), model.n_heads());
    let tokens = probe.token_ids();

    let mut heads = vec![];
    for (l, layer) in layers.iter().enumerate() {
        let (batch, _, seq) = layer.dims();
        let roles = head_roles(task, layer, &tokens);
        for (h, (pattern_scores, role)) in roles.into_iter().enumerate() {
            let probs = layer.head_pattern(h);
            let head = HeadPattern {
                probs: &probs,
                tokens: &tokens,
                batch,
                seq,
            };
            let mut mask = vec![1.0f32; n_layers * n_heads];
            mask[l * n_heads + h] = 0.0;
            let mask = Tensor::from_data(TensorData::new(mask, [n_layers, n_heads]), device);
            let (_, ablated) = evaluate(model, eval, device, Some(mask));
            heads.push(HeadRecord {
                layer: l,
                head: h,
                entropy: head.entropy(),
                confidence: head.confidence(),
                mean_distance: head.mean_distance(),
                pattern_scores,
                ablation_drop: base.token_accuracy() - ablated.token_accuracy(),
                role,
            });
        }
    }
    (heads, base.token_accuracy())
}

/// Each head's mean attention on every pattern (the generic ones and the task's solving
/// patterns), and its role: the best pattern if it reaches [`ROLE_THRESHOLD`], else
/// "mixed". `tokens` are the probe's inputs, `[batch * seq]`.
pub fn head_roles(
    task: &Task,
    layer: &LayerProbe,
    tokens: &[u32],
) -> Vec<(BTreeMap<String, f64>, String)> {
    let mut scored_patterns: Vec<AttentionPattern> = AttentionPattern::generic().to_vec();
    for pattern in task.solving_patterns() {
        if !scored_patterns.contains(&pattern) {
            scored_patterns.push(pattern);
        }
    }
    let (batch, n_heads, seq) = layer.dims();
    (0..n_heads)
        .map(|h| {
            let probs = layer.head_pattern(h);
            let head = HeadPattern {
                probs: &probs,
                tokens,
                batch,
                seq,
            };
            let pattern_scores: BTreeMap<String, f64> = scored_patterns
                .iter()
                .map(|p| (p.name(), head.pattern_score(*p)))
                .collect();
            let role = pattern_scores
                .iter()
                .max_by(|a, b| a.1.total_cmp(b.1))
                .filter(|(_, score)| **score >= ROLE_THRESHOLD)
                .map_or_else(|| "mixed".to_string(), |(name, _)| name.clone());
            (pattern_scores, role)
        })
        .collect()
}
