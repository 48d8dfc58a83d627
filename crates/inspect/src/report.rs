//! The report on one run: per-head weights and the probe batch's activations as
//! safetensors, `heads.json` with one record per head (measures, pattern scores, ablation
//! drop, role), `similarity.json`, `pruning.json`, `summary.json`, `divergence.csv`, the
//! figures and `index.html`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use burn::prelude::*;
use serde::{Deserialize, Serialize};
use train::snapshot::{SnapshotError, head_tensors};
use train::tasks::{AttentionPattern, Example, Task};
use train::tensor_file::{HostTensor, TensorFileError, write_tensors};
use train::trainer::{eval_examples, evaluate};

use crate::divergence::{self, DivergencePoint};
use crate::figures::{self, FigureError};
use crate::html;
use crate::measures::HeadPattern;
use crate::probe::{LayerProbe, Probe};
use crate::pruning::{self, Pruning};
use crate::run::LoadedRun;
use crate::similarity::{LayerSimilarity, mean_off_diagonal};
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
    /// Accuracy as heads are removed.
    pub pruning: Pruning,
    /// `summary.json`.
    pub summary: Summary,
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
    #[error("cannot write {path}: {error}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Why. Not a `source`: the message already says it, and `error: {e:#}` in main
        /// would print it twice.
        error: std::io::Error,
    },
}

/// What a report measures beyond the defaults.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReportOptions {
    /// Sequences in the probe batch.
    pub probe_size: usize,
    /// Accuracy a pruned model may lose and still count as solving the task (0.01: one
    /// point).
    pub prune_tolerance: f64,
}

impl Default for ReportOptions {
    fn default() -> Self {
        Self {
            probe_size: 64,
            prune_tolerance: pruning::DEFAULT_TOLERANCE,
        }
    }
}

/// `summary.json`: the run's sizes and headline numbers, one object per report, for
/// collecting many runs into a table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Run name from the config.
    pub name: String,
    /// Task kind.
    pub task: String,
    /// `split`, `wide` or `narrow`.
    pub head_layout: String,
    /// Encoder blocks.
    pub n_layers: usize,
    /// Heads per block.
    pub n_heads: usize,
    /// Width of each head.
    pub d_head: usize,
    /// Trainable parameters of the whole model.
    pub n_params: usize,
    /// Parameters of the attention modules (every layer's q, k, v and output projection).
    pub attention_params: usize,
    /// Eval token accuracy with every head on.
    pub eval_token_acc: f64,
    /// Heads whose role is not "mixed".
    pub heads_with_role: usize,
    /// Mean pattern JS distance between the heads of a layer, averaged over layers with
    /// more than one head (0 when there are none).
    pub mean_pattern_js: f64,
    /// Heads greedy pruning removes before accuracy falls more than the tolerance.
    pub removable_heads: usize,
}

/// Measures every head of `loaded` on a probe batch and writes the report into `out`.
pub fn write_report(
    loaded: &LoadedRun,
    out: &Path,
    options: &ReportOptions,
) -> Result<Report, ReportError> {
    let probe_size = options.probe_size;
    let write_error = |path: &Path| {
        let path = path.to_path_buf();
        move |error| ReportError::Write { path, error }
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

    let eval = eval_examples(config, task);
    let (heads, eval_token_acc) = measure_heads(loaded, &eval, &probe, &layers);
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

    let drops: Vec<f64> = heads.iter().map(|h| h.ablation_drop).collect();
    let pruning = pruning::prune_model(model, &eval, device, &drops, options.prune_tolerance);
    let pruning_path = out.join("pruning.json");
    let json = serde_json::to_vec_pretty(&pruning).expect("curves serialize");
    train::atomic::write_atomic(&pruning_path, &json).map_err(write_error(&pruning_path))?;
    files.push(pruning_path);

    let with_pairs: Vec<f64> = similarity
        .iter()
        .filter(|l| l.pattern_js.len() > 1)
        .map(|l| mean_off_diagonal(&l.pattern_js))
        .collect();
    let summary = Summary {
        name: config.name.clone(),
        task: task.name().to_string(),
        head_layout: format!("{:?}", config.model.head_layout).to_lowercase(),
        n_layers: model.blocks.len(),
        n_heads: model.n_heads(),
        d_head: layers.first().map_or(0, LayerProbe::d_head),
        n_params: model.num_params(),
        attention_params: model.blocks.iter().map(|b| b.attention.num_params()).sum(),
        eval_token_acc,
        heads_with_role: heads.iter().filter(|h| h.role != "mixed").count(),
        mean_pattern_js: if with_pairs.is_empty() {
            0.0
        } else {
            with_pairs.iter().sum::<f64>() / with_pairs.len() as f64
        },
        removable_heads: pruning.greedy.removable,
    };
    let summary_path = out.join("summary.json");
    let json = serde_json::to_vec_pretty(&summary).expect("summary serializes");
    train::atomic::write_atomic(&summary_path, &json).map_err(write_error(&summary_path))?;
    files.push(summary_path);

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
    let captions: Vec<Vec<String>> = first_sequence
        .iter()
        .enumerate()
        .map(|(l, layer)| {
            (0..layer.len())
                .map(|h| format!("L{l} H{h}: {}", heads[l * layer.len() + h].role))
                .collect()
        })
        .collect();
    let mut figures: Vec<(PathBuf, &str)> = vec![];
    let path = figures_dir.join("attention.png");
    figures::attention_patterns(
        &path,
        &figures::PatternFigure {
            title: "Attention of each head on probe sequence 0 (row: query, column: key)",
            patterns: &first_sequence,
            tokens: &probe.examples[0].input,
            captions: &captions,
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
    let path = figures_dir.join("pruning.png");
    figures::pruning(&path, &pruning)?;
    figures.push((
        path,
        "eval token accuracy as heads are removed at test time, least important first \
         (ranked by single-head drop) or the least harmful at each step (greedy)",
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
        (
            "pruning.json".into(),
            "accuracy as heads are removed (ranked and greedy order), heads removable",
        ),
        (
            "summary.json".into(),
            "sizes, parameter counts, accuracy, specialisation and pruning in one object",
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
            summary.head_layout,
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
        pruning,
        summary,
        eval_token_acc,
        files,
    })
}

/// Every head's record (measures on the probe, ablation on the eval set), and the eval
/// token accuracy with all heads on.
fn measure_heads(
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
