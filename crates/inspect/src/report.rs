//! The report on one run: per-head weights and the probe batch's activations as
//! safetensors, `heads.json` with one record per head (measures, pattern scores, ablation
//! drop, role), `similarity.json`, `divergence.csv`, the figures and `index.html`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use burn::prelude::*;
use serde::{Deserialize, Serialize};
use train::snapshot::{SnapshotError, head_tensors};
use train::tasks::AttentionPattern;
use train::tensor_file::{HostTensor, TensorFileError, write_tensors};
use train::trainer::{eval_examples, evaluate};

use crate::divergence::{self, DivergencePoint};
use crate::figures::{self, FigureError};
use crate::html;
use crate::measures::HeadPattern;
use crate::probe::{LayerProbe, Probe};
use crate::run::LoadedRun;
use crate::similarity::LayerSimilarity;
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
    /// Head-by-head similarity matrices, one per layer.
    pub similarity: Vec<LayerSimilarity>,
    /// The divergence curves (empty when the run took no snapshots).
    pub divergence: Vec<DivergencePoint>,
    /// Eval token accuracy with every head on.
    pub eval_token_acc: f64,
    /// The files written.
    pub files: Vec<PathBuf>,
}

/// `similarity.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SimilarityFile {
    /// One entry per layer.
    pub layers: Vec<LayerSimilarity>,
}

/// A report that could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// A tensor file.
    #[error(transparent)]
    Tensors(#[from] TensorFileError),
    /// A snapshot that does not load.
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    /// A figure.
    #[error(transparent)]
    Figure(#[from] FigureError),
    /// Another file.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// Measures every head of `loaded` on a probe batch of `probe_size` sequences and writes the
/// report into `out`.
pub fn write_report(
    loaded: &LoadedRun,
    out: &Path,
    probe_size: usize,
) -> Result<Report, ReportError> {
    let write_error = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ReportError::Write { path, source }
    };
    let figures_dir = out.join("figures");
    std::fs::create_dir_all(&figures_dir).map_err(write_error(&figures_dir))?;
    let (config, task, model, device) = (
        &loaded.run.config,
        &loaded.run.task,
        &loaded.model,
        &loaded.device,
    );
    let mut files = vec![];

    let weights = head_tensors(model, true);
    let weights_path = out.join("weights.safetensors");
    write_tensors(&weights_path, &weights, None)?;
    files.push(weights_path);

    let probe = Probe::new(task, probe_size, config.seed, device);
    let layers = probe.run(model);
    let mut activations = BTreeMap::new();
    activations.insert(
        "tokens".to_string(),
        HostTensor::of_int(probe.tokens.clone()),
    );
    for (l, layer) in layers.iter().enumerate() {
        activations.insert(format!("layers.{l}.attn_input"), layer.attn_input.clone());
        activations.insert(format!("layers.{l}.pattern"), layer.pattern.clone());
        activations.insert(format!("layers.{l}.head_out"), layer.head_out.clone());
    }
    let activations_path = out.join("activations.safetensors");
    write_tensors(&activations_path, &activations, None)?;
    files.push(activations_path);

    let (heads, eval_token_acc) = measure_heads(loaded, &probe, &layers);
    let heads_path = out.join("heads.json");
    let json = serde_json::to_vec_pretty(&heads).expect("records serialize");
    train::atomic::write_atomic(&heads_path, &json).map_err(write_error(&heads_path))?;
    files.push(heads_path);

    let similarity: Vec<LayerSimilarity> = layers
        .iter()
        .enumerate()
        .map(|(l, layer)| LayerSimilarity::measure(l, &weights, layer, true))
        .collect();
    let similarity_path = out.join("similarity.json");
    let file = SimilarityFile {
        layers: similarity.clone(),
    };
    let json = serde_json::to_vec_pretty(&file).expect("matrices serialize");
    train::atomic::write_atomic(&similarity_path, &json).map_err(write_error(&similarity_path))?;
    files.push(similarity_path);

    let divergence = divergence::divergence(loaded, &probe)?;
    if !divergence.is_empty() {
        let path = out.join("divergence.csv");
        let csv = divergence::to_csv(&divergence);
        train::atomic::write_atomic(&path, csv.as_bytes()).map_err(write_error(&path))?;
        files.push(path);
    }

    let seq = task.seq_len();
    let first_sequence: Vec<Vec<Vec<f32>>> = layers
        .iter()
        .map(|layer| {
            let (_, n_heads, _) = layer.dims();
            (0..n_heads)
                .map(|h| layer.head_pattern(h)[..seq * seq].to_vec())
                .collect()
        })
        .collect();
    let mut figures: Vec<(PathBuf, &str)> = vec![];
    let path = figures_dir.join("attention.png");
    figures::attention_patterns(
        &path,
        &figures::PatternFigure {
            patterns: &first_sequence,
            tokens: &probe.examples[0].input,
            heads: &heads,
        },
    )?;
    figures.push((
        path,
        "attention of every head (rows: layers, columns: heads) on the first probe sequence; \
         row i is where query position i looks, brighter is more attention",
    ));
    let path = figures_dir.join("similarity.png");
    figures::similarity(&path, &similarity)?;
    figures.push((
        path,
        "per layer, how alike each pair of heads is: QK and OV circuit cosine, attention \
         pattern JS distance, output CKA",
    ));
    if !divergence.is_empty() {
        let path = figures_dir.join("divergence.png");
        figures::divergence(&path, &divergence)?;
        figures.push((
            path,
            "mean pairwise head similarity at each training snapshot: heads moving apart \
             (cosine falling, JS distance rising) or staying identical",
        ));
    }
    let path = figures_dir.join("ablation.png");
    figures::ablation(&path, &heads)?;
    figures.push((
        path,
        "eval token accuracy lost when each head alone is masked",
    ));
    let metrics = train::metrics::read(&loaded.dir.join("metrics.jsonl"));
    if !metrics.is_empty() {
        let path = figures_dir.join("training.png");
        figures::training(&path, &metrics)?;
        figures.push((path, "training loss and eval accuracy by step"));
    }
    files.extend(figures.iter().map(|(path, _)| path.clone()));

    let html_path = out.join("index.html");
    let config_toml = std::fs::read_to_string(loaded.dir.join("config.toml")).unwrap_or_default();
    let mut described: Vec<(String, &str)> = vec![
        (
            "weights.safetensors".into(),
            "per-head q, k, v, biases, o, qk and ov (f32)",
        ),
        (
            "activations.safetensors".into(),
            "the probe batch: tokens, and per layer attn_input, pattern, head_out",
        ),
        (
            "heads.json".into(),
            "one record per head: measures, pattern scores, ablation drop, role",
        ),
        (
            "similarity.json".into(),
            "per layer: qk_cosine, ov_cosine, pattern_js, output_cka matrices",
        ),
    ];
    if !divergence.is_empty() {
        described.push((
            "divergence.csv".into(),
            "per snapshot and layer: mean pairwise qk_cosine, ov_cosine, pattern_js",
        ));
    }
    let page = html::Page {
        title: &config.name,
        summary: format!(
            "task {}, {} layers x {} heads ({} layout), weights {}, eval token accuracy {:.2}%, \
             probe batch {} sequences",
            task.name(),
            model.blocks.len(),
            model.n_heads(),
            format!("{:?}", config.model.head_layout).to_lowercase(),
            loaded.weights.display(),
            eval_token_acc * 100.0,
            probe_size,
        ),
        heads: &heads,
        figures: figures
            .iter()
            .map(|(path, caption)| html::Figure { path, caption })
            .collect(),
        config_toml: &config_toml,
        files: described,
    };
    let page = html::render(&page).map_err(write_error(&html_path))?;
    train::atomic::write_atomic(&html_path, page.as_bytes()).map_err(write_error(&html_path))?;
    files.push(html_path);

    Ok(Report {
        heads,
        similarity,
        divergence,
        eval_token_acc,
        files,
    })
}

/// Every head's record (measures on the probe, ablation on the eval set), and the eval
/// token accuracy with all heads on.
fn measure_heads(
    loaded: &LoadedRun,
    probe: &Probe,
    layers: &[LayerProbe],
) -> (Vec<HeadRecord>, f64) {
    let (config, task, model, device) = (
        &loaded.run.config,
        &loaded.run.task,
        &loaded.model,
        &loaded.device,
    );
    let eval = eval_examples(config, task);
    let (_, base) = evaluate(model, &eval, device, None);
    let (n_layers, n_heads) = (model.blocks.len(), model.n_heads());
    let tokens = probe.token_ids();
    let mut scored_patterns: Vec<AttentionPattern> = AttentionPattern::generic().to_vec();
    for pattern in task.solving_patterns() {
        if !scored_patterns.contains(&pattern) {
            scored_patterns.push(pattern);
        }
    }

    let mut heads = vec![];
    for (l, layer) in layers.iter().enumerate() {
        let (batch, _, seq) = layer.dims();
        for h in 0..n_heads {
            let probs = layer.head_pattern(h);
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
    (heads, base.token_accuracy())
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
