//! The report on one run: per-head weights and the probe batch's activations as
//! safetensors, and `heads.json` with one record per head (measures, pattern scores,
//! ablation drop, role).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use burn::prelude::*;
use model::EncoderInput;
use serde::{Deserialize, Serialize};
use train::batch::{Batch, mix_seed};
use train::snapshot::head_tensors;
use train::tasks::AttentionPattern;
use train::tensor_file::{HostTensor, TensorFileError, write_tensors};
use train::trainer::{eval_examples, evaluate};

use crate::measures::HeadPattern;
use crate::run::LoadedRun;

/// Stream of the probe batch, apart from training batches and the evaluation set.
const PROBE_STREAM: u64 = u64::MAX - 1;
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

/// What the report wrote.
#[derive(Debug, Clone)]
pub struct Report {
    /// One record per head, layer-major.
    pub heads: Vec<HeadRecord>,
    /// Eval token accuracy with every head on.
    pub eval_token_acc: f64,
    /// The files written.
    pub files: Vec<PathBuf>,
}

/// A report that could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// A tensor file.
    #[error(transparent)]
    Tensors(#[from] TensorFileError),
    /// Another file.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// Measures every head of `loaded` on a probe batch of `probe` sequences and writes the
/// report into `out`.
pub fn write_report(loaded: &LoadedRun, out: &Path, probe: usize) -> Result<Report, ReportError> {
    let write_error = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ReportError::Write { path, source }
    };
    std::fs::create_dir_all(out).map_err(write_error(out))?;
    let (config, task, model, device) = (
        &loaded.run.config,
        &loaded.run.task,
        &loaded.model,
        &loaded.device,
    );

    let weights_path = out.join("weights.safetensors");
    write_tensors(&weights_path, &head_tensors(model, true), None)?;

    let probe_examples = task.eval_set(probe, mix_seed(config.seed, PROBE_STREAM));
    let batch = Batch::new(&probe_examples, device);
    let (_, cache) = model.forward_with_cache(EncoderInput::new(batch.tokens.clone()));
    let mut activations = BTreeMap::new();
    activations.insert("tokens".to_string(), HostTensor::of_int(batch.tokens));
    let mut patterns = vec![];
    for (l, layer) in cache.layers.iter().enumerate() {
        let pattern = HostTensor::of(layer.pattern.clone());
        activations.insert(
            format!("layers.{l}.attn_input"),
            HostTensor::of(layer.attn_input.clone()),
        );
        activations.insert(
            format!("layers.{l}.head_out"),
            HostTensor::of(layer.head_outputs.clone()),
        );
        activations.insert(format!("layers.{l}.pattern"), pattern.clone());
        patterns.push(pattern);
    }
    let activations_path = out.join("activations.safetensors");
    write_tensors(&activations_path, &activations, None)?;

    let eval = eval_examples(config, task);
    let (_, base) = evaluate(model, &eval, device, None);
    let (n_layers, n_heads) = (model.blocks.len(), model.n_heads());
    let tokens: Vec<u32> = probe_examples
        .iter()
        .flat_map(|e| e.input.iter().copied())
        .collect();
    let mut scored_patterns: Vec<AttentionPattern> = AttentionPattern::generic().to_vec();
    for pattern in task.solving_patterns() {
        if !scored_patterns.contains(&pattern) {
            scored_patterns.push(pattern);
        }
    }

    let mut heads = vec![];
    for (l, pattern) in patterns.iter().enumerate() {
        let [batch, _, seq, _] = pattern.shape[..] else {
            unreachable!("patterns are 4-D")
        };
        for h in 0..n_heads {
            // [batch, heads, seq, seq] -> this head's [batch, seq, seq]
            let probs: Vec<f32> = (0..batch)
                .flat_map(|b| {
                    let start = (b * n_heads + h) * seq * seq;
                    pattern.values[start..start + seq * seq].iter().copied()
                })
                .collect();
            let head = HeadPattern {
                probs: &probs,
                tokens: &tokens,
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
            let mut mask = vec![1.0f32; n_layers * n_heads];
            mask[l * n_heads + h] = 0.0;
            let mask = Tensor::from_data(TensorData::new(mask, [n_layers, n_heads]), device);
            let (_, ablated) = evaluate(model, &eval, device, Some(mask));
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
    let heads_path = out.join("heads.json");
    let json = serde_json::to_vec_pretty(&heads).expect("records serialize");
    train::atomic::write_atomic(&heads_path, &json).map_err(write_error(&heads_path))?;

    Ok(Report {
        heads,
        eval_token_acc: base.token_accuracy(),
        files: vec![weights_path, activations_path, heads_path],
    })
}

/// The head table printed on the terminal.
pub fn table(report: &Report) -> String {
    let mut lines = vec![format!(
        "{:>5} {:>4}  {:<16} {:>7} {:>10} {:>8} {:>9}",
        "layer", "head", "role", "entropy", "confidence", "distance", "ablation"
    )];
    for h in &report.heads {
        lines.push(format!(
            "{:>5} {:>4}  {:<16} {:>7.3} {:>10.3} {:>8.2} {:>8.2}%",
            h.layer,
            h.head,
            h.role,
            h.entropy,
            h.confidence,
            h.mean_distance,
            h.ablation_drop * 100.0
        ));
    }
    lines.join("\n")
}
