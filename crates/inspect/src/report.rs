//! The report on one run: per-head weights and the probe batch's activations as
//! safetensors, `heads.json` with one record per head (measures, pattern scores, ablation
//! drop, role, copying score, effective ranks, direct logit attribution, gradient
//! importance, norm-based attention, relation scores), `circuits.json` (with the attention
//! rollout), `similarity.json`, `pruning.json`, `summary.json`, `relations.json` (for tasks
//! with dependency parses), `divergence.csv` and `trajectories.json` (with snapshots), the
//! figures, `index.html` and the interactive `explore.html` ([`crate::explore`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use burn::module::Module;
use serde::{Deserialize, Serialize};
use train::snapshot::{SnapshotError, head_tensors};
use train::tensor_file::{HostTensor, TensorFileError, write_tensors};
use train::trainer::eval_examples;

use crate::circuits::{CircuitError, Circuits};
use crate::divergence::{self, DivergencePoint};
use crate::explore::{self, ExploreInput, QkWeights};
use crate::figures::{self, FigureError};
use crate::heads::{HeadRecord, measure_heads};
use crate::html;
use crate::importance::spearman;
use crate::norms::head_weight_norm_pairs;
use crate::probe::{LayerProbe, Probe, ProbeSizeError};
use crate::pruning::{self, Pruning};
use crate::relations::{self, Relations};
use crate::rollout;
use crate::run::LoadedRun;
use crate::similarity::{LayerSimilarity, mean_off_diagonal};
use crate::trajectories::{self, Trajectories};

/// What the report wrote.
#[derive(Debug, Clone)]
pub struct Report {
    /// One record per head, layer-major.
    pub heads: Vec<HeadRecord>,
    /// Composition, copying and ranks read from the weights.
    pub circuits: Circuits,
    /// Head-by-head similarity matrices, one per layer.
    pub similarity: Vec<LayerSimilarity>,
    /// The divergence curves (empty when the run took no snapshots).
    pub divergence: Vec<DivergencePoint>,
    /// Every final head's role through the snapshots (`None` when the run took none).
    pub trajectories: Option<Trajectories>,
    /// Accuracy as heads are removed.
    pub pruning: Pruning,
    /// Each head's dependency-relation scores (`None` for tasks without parses).
    pub relations: Option<Relations>,
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
    /// A probe batch too large for the run.
    #[error(transparent)]
    ProbeSize(#[from] ProbeSizeError),
    /// A tensor file.
    #[error(transparent)]
    Tensors(#[from] TensorFileError),
    /// A snapshot that does not load.
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    /// A figure.
    #[error(transparent)]
    Figure(#[from] FigureError),
    /// A circuit whose eigenvalues did not converge.
    #[error(transparent)]
    Circuits(#[from] CircuitError),
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
    /// Spearman rank correlation, over heads, of gradient importance with the single-head
    /// ablation drop ([`crate::importance`]); null when undefined (fewer than two heads, or
    /// one side all equal). Fields from here on are null in a `summary.json` written
    /// before they were measured.
    #[serde(default)]
    pub importance_ablation_spearman: Option<f64>,
    /// Spearman correlation of gradient importance with the step at which greedy pruning
    /// removes the head (later: more important).
    #[serde(default)]
    pub importance_pruning_spearman: Option<f64>,
    /// Spearman correlation of the ablation drop with the greedy removal step.
    #[serde(default)]
    pub ablation_pruning_spearman: Option<f64>,
}

/// Measures every head of `loaded` on a probe batch and writes the report into `out`.
pub fn write_report(
    loaded: &LoadedRun,
    out: &Path,
    options: &ReportOptions,
) -> Result<Report, ReportError> {
    Probe::check_size(options.probe_size, &loaded.run, 1)?;
    let figures_dir = out.join("figures");
    std::fs::create_dir_all(&figures_dir).map_err(|error| ReportError::Write {
        path: figures_dir.clone(),
        error,
    })?;
    let run = &loaded.run;
    let probe = Probe::new(
        &run.task,
        options.probe_size,
        run.config.seed,
        &loaded.device,
    );

    let measured = measure(loaded, &probe, options)?;
    let mut files = write_tensor_files(out, &probe, &measured)?;
    files.extend(write_measures(out, &measured)?);
    let figures = draw_figures(&figures_dir, loaded, &probe, &measured)?;
    files.extend(figures.iter().map(|(path, _)| path.clone()));
    files.push(write_page(out, loaded, &probe, &measured, &figures)?);
    files.push(write_explore(out, loaded, &probe, &measured)?);

    let Measured {
        heads,
        eval_token_acc,
        circuits,
        similarity,
        pruning,
        relations,
        summary,
        divergence,
        trajectories,
        ..
    } = measured;
    Ok(Report {
        heads,
        circuits,
        similarity,
        divergence,
        trajectories,
        pruning,
        relations,
        summary,
        eval_token_acc,
        files,
    })
}

/// Everything the report measures, before anything is written.
struct Measured {
    /// Per-head weights and circuits, named as in `weights.safetensors`.
    weights: BTreeMap<String, HostTensor>,
    /// Each layer's attention on the probe batch.
    layers: Vec<LayerProbe>,
    heads: Vec<HeadRecord>,
    eval_token_acc: f64,
    circuits: Circuits,
    similarity: Vec<LayerSimilarity>,
    pruning: Pruning,
    relations: Option<Relations>,
    summary: Summary,
    divergence: Vec<DivergencePoint>,
    trajectories: Option<Trajectories>,
}

/// Reads the circuits from the weights, runs the probe, scores the heads on the task's
/// dependency relations (if it has parses), measures and ablates every head, compares heads,
/// prunes, and follows the heads through the run's snapshots.
fn measure(
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
    let weights = head_tensors(model, true);
    let mut circuits = Circuits::of_model(model, &weights)?;
    let layers = probe.run(model);
    circuits.rollout = rollout::rollout(&rollout::mean_attention(&layers, 0));
    let relations = relations::measure_relations(task, model, config.seed, device);
    let eval = eval_examples(config, task);
    let (heads, eval_token_acc) =
        measure_heads(loaded, &eval, probe, &layers, &circuits, relations.as_ref());
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
        n_layers: model.blocks.len(),
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
    })
}

/// The step (1-based) at which greedy pruning removes each head, layer-major: heads removed
/// later matter more.
fn greedy_removal_steps(pruning: &Pruning, n_heads: usize) -> Vec<f64> {
    let mut steps = vec![0.0; pruning.total_heads];
    for step in &pruning.greedy.steps {
        steps[step.layer * n_heads + step.head] = step.heads_removed as f64;
    }
    steps
}

/// Mean pattern JS distance between the heads of a layer, over layers with more than one
/// head; 0 when there are none.
fn mean_pattern_js(similarity: &[LayerSimilarity]) -> f64 {
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

/// `weights.safetensors` and `activations.safetensors` (the probe's tokens, and per layer
/// `attn_input`, `pattern`, `head_out`).
fn write_tensor_files(
    out: &Path,
    probe: &Probe,
    measured: &Measured,
) -> Result<Vec<PathBuf>, ReportError> {
    let weights_path = out.join("weights.safetensors");
    write_tensors(&weights_path, &measured.weights, None)?;

    let mut activations = BTreeMap::new();
    activations.insert(
        "tokens".to_string(),
        HostTensor::of_int(probe.tokens.clone()),
    );
    for (l, layer) in measured.layers.iter().enumerate() {
        activations.insert(format!("layers.{l}.attn_input"), layer.attn_input.clone());
        activations.insert(format!("layers.{l}.pattern"), layer.pattern.clone());
        activations.insert(format!("layers.{l}.head_out"), layer.head_out.clone());
    }
    let activations_path = out.join("activations.safetensors");
    write_tensors(&activations_path, &activations, None)?;
    Ok(vec![weights_path, activations_path])
}

/// `heads.json`, `circuits.json`, `similarity.json`, `pruning.json`, `summary.json`,
/// `relations.json` when the task has parses, and `divergence.csv` and `trajectories.json`
/// when the run took snapshots.
fn write_measures(out: &Path, measured: &Measured) -> Result<Vec<PathBuf>, ReportError> {
    let similarity = SimilarityFile {
        layers: measured.similarity.clone(),
    };
    let mut files = vec![
        write_json(&out.join("heads.json"), &measured.heads)?,
        write_json(&out.join("circuits.json"), &measured.circuits)?,
        write_json(&out.join("similarity.json"), &similarity)?,
        write_json(&out.join("pruning.json"), &measured.pruning)?,
        write_json(&out.join("summary.json"), &measured.summary)?,
    ];
    if let Some(relations) = &measured.relations {
        files.push(write_json(&out.join("relations.json"), relations)?);
    }
    if !measured.divergence.is_empty() {
        let path = out.join("divergence.csv");
        let csv = divergence::to_csv(&measured.divergence);
        write_file(&path, csv.as_bytes())?;
        files.push(path);
    }
    if let Some(trajectories) = &measured.trajectories {
        files.push(write_json(&out.join("trajectories.json"), trajectories)?);
    }
    Ok(files)
}

/// Every figure with its caption, in the page's order: attention, rollout, relations (for
/// tasks with parses), similarity, divergence (with snapshots), circuits, composition (with
/// two layers or more), norms, ablation, pruning, trajectories (with snapshots), training
/// (with metrics).
fn draw_figures(
    figures_dir: &Path,
    loaded: &LoadedRun,
    probe: &Probe,
    measured: &Measured,
) -> Result<Vec<(PathBuf, &'static str)>, ReportError> {
    let mut figures: Vec<(PathBuf, &'static str)> = vec![];
    let path = figures_dir.join("attention.png");
    draw_attention(&path, probe, measured)?;
    figures.push((
        path,
        "attention of every head (rows: layers, columns: heads) on the first probe sequence; \
         row i is where query position i looks, brighter is more attention",
    ));
    if !measured.circuits.rollout.is_empty() {
        let path = figures_dir.join("rollout.png");
        figures::rollout(
            &path,
            &measured.circuits.rollout,
            &first_sequence_labels(probe),
        )?;
        figures.push((
            path,
            "attention rollout on the first probe sequence after each layer (Abnar and \
             Zuidema 2020): the product of the layers' head-averaged attention, each mixed \
             half and half with the identity for the residual stream; row i is how much of \
             each input position query i holds if attention alone moved information",
        ));
    }
    if let Some(relations) = measured
        .relations
        .as_ref()
        .filter(|r| !r.relations.is_empty())
    {
        let path = figures_dir.join("relations.png");
        figures::relations(&path, relations)?;
        figures.push((
            path,
            "per dependency relation (rows) and head (columns), the fraction of the \
             relation's arcs whose dependent attends most to its head (top) and whose head \
             attends most to its dependent (bottom), on the task's parsed sentences (Clark \
             et al. 2019); each row names the baseline, the fixed offset head - dependent \
             that finds the most arcs, and its score: a head above it does more than look \
             a fixed distance away",
        ));
    }
    let path = figures_dir.join("similarity.png");
    figures::similarity(&path, &measured.similarity)?;
    figures.push((
        path,
        "per layer, how alike each pair of heads is: QK and OV circuit cosine, attention \
         pattern JS distance, output CKA",
    ));
    if !measured.divergence.is_empty() {
        let path = figures_dir.join("divergence.png");
        figures::divergence(&path, &measured.divergence)?;
        figures.push((
            path,
            "mean pairwise head similarity at each training snapshot: heads moving apart \
             (cosine falling, JS distance rising) or staying identical",
        ));
    }
    let path = figures_dir.join("circuits.png");
    figures::circuits(&path, &measured.circuits)?;
    figures.push((
        path,
        "per head, read from its weights: the copying score sum(lambda) / sum(|lambda|) of \
         the OV circuit's eigenvalues (1: writes back what it reads, -1: its negation, 0: \
         neither), the same for embedding -> OV -> output layer when the task's inputs and \
         outputs are the same tokens, and the effective rank of the QK and OV circuits (at \
         most d_head; lower: fewer directions matter)",
    ));
    if !measured.circuits.composition.is_empty() {
        let path = figures_dir.join("composition.png");
        let circuits = &measured.circuits;
        figures::composition(&path, &circuits.composition, circuits.random_composition)?;
        figures.push((
            path,
            "for each earlier layer's heads (rows) and later layer's heads (columns): how \
             much the later head's query (Q), key (K) or value (V) reads the subspace the \
             earlier head writes, ||W_A W_B|| / (||W_A|| ||W_B||) with W_A the earlier OV \
             circuit; heads with unrelated subspaces score about 1 / sqrt(d_model) (in \
             the title), higher: the later head reads what the earlier one writes",
        ));
    }
    let path = figures_dir.join("norms.png");
    draw_norms(&path, loaded, measured)?;
    figures.push((
        path,
        "per head (rows: layers, columns: heads), each query/key pair of the probe as its \
         attention weight alpha (x) against the size of what it moves, alpha ||f(x_j)|| \
         (y, one scale for every panel; Kobayashi et al. 2020), with the head's \
         norm_weight_correlation in its title: points near the x axis however far right \
         they reach mark a head that attends but writes almost nothing",
    ));
    let path = figures_dir.join("ablation.png");
    figures::ablation(&path, &measured.heads)?;
    figures.push((
        path,
        "eval token accuracy lost when each head alone is masked",
    ));
    let path = figures_dir.join("pruning.png");
    figures::pruning(&path, &measured.pruning)?;
    figures.push((
        path,
        "eval token accuracy as heads are removed at test time, least important first \
         (ranked by single-head drop) or the least harmful at each step (greedy)",
    ));
    let metrics = loaded.dir.metrics();
    if let Some(trajectories) = &measured.trajectories {
        let path = figures_dir.join("trajectories.png");
        figures::trajectories(&path, trajectories, &metrics)?;
        figures.push((
            path,
            "each final head's mean attention on its final role's pattern at each training \
             snapshot (heads matched snapshot to snapshot by their patterns), above the \
             training loss on the same steps: a role that forms as the loss drops is the \
             phase change of Olsson et al. 2022; the step each role formed and stayed is \
             role_formed_at in trajectories.json",
        ));
    }
    if !metrics.is_empty() {
        let path = figures_dir.join("training.png");
        figures::training(&path, &metrics)?;
        figures.push((path, "training loss and eval accuracy by step"));
    }
    Ok(figures)
}

/// `norms.png`: every head's attention weights against their weighted norms on the probe,
/// titled with the head's `norm_weight_correlation`.
fn draw_norms(path: &Path, loaded: &LoadedRun, measured: &Measured) -> Result<(), FigureError> {
    let panels: Vec<Vec<figures::NormPanel>> = measured
        .layers
        .iter()
        .enumerate()
        .map(|(l, layer)| {
            let (_, n_heads, _) = layer.dims();
            let attention = &loaded.model.blocks[l].attention;
            (0..n_heads)
                .map(|h| {
                    let correlation = measured.heads[l * n_heads + h]
                        .norm_weight_correlation
                        .map_or_else(|| "none".to_string(), |r| format!("{r:.2}"));
                    figures::NormPanel {
                        caption: format!("L{l} H{h}: correlation {correlation}"),
                        pairs: head_weight_norm_pairs(layer, h, &attention.head_weights(h)),
                    }
                })
                .collect()
        })
        .collect();
    figures::norms(path, &panels)
}

/// `attention.png`: every head's pattern on probe sequence 0, captioned with its role.
fn draw_attention(path: &Path, probe: &Probe, measured: &Measured) -> Result<(), FigureError> {
    // The probe's own length: a task whose sentences vary draws its probe of one length.
    let seq = probe.seq_len();
    let first_sequence: Vec<Vec<Vec<f32>>> = measured
        .layers
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
                .map(|h| format!("L{l} H{h}: {}", measured.heads[l * layer.len() + h].role))
                .collect()
        })
        .collect();
    figures::attention_patterns(
        path,
        &figures::PatternFigure {
            title: "Attention of each head on probe sequence 0 (row: query, column: key)",
            patterns: &first_sequence,
            labels: &first_sequence_labels(probe),
            captions: &captions,
        },
    )
}

/// Axis labels of probe sequence 0: its words, or token ids for tasks of numbers.
fn first_sequence_labels(probe: &Probe) -> Vec<String> {
    figures::token_labels(&probe.examples[0].input, probe.token_names.as_deref())
}

/// `index.html`: the summary line, head table, figures, the run's config and the files.
fn write_page(
    out: &Path,
    loaded: &LoadedRun,
    probe: &Probe,
    measured: &Measured,
    figures: &[(PathBuf, &str)],
) -> Result<PathBuf, ReportError> {
    let config = &loaded.run.config;
    let html_path = out.join("index.html");
    let config_toml = std::fs::read_to_string(loaded.dir.config_path()).unwrap_or_default();
    let page = html::Page {
        title: &config.name,
        summary: summary_line(loaded, probe, measured),
        heads: &measured.heads,
        relations: measured.relations.as_ref(),
        figures: figures
            .iter()
            .map(|(path, caption)| html::Figure { path, caption })
            .collect(),
        config_toml: &config_toml,
        files: described_files(
            !measured.divergence.is_empty(),
            measured.trajectories.is_some(),
            measured.relations.is_some(),
        ),
    };
    let page = html::render(&page).map_err(|error| ReportError::Write {
        path: html_path.clone(),
        error,
    })?;
    write_file(&html_path, page.as_bytes())?;
    Ok(html_path)
}

/// The pages' summary line: task, sizes, weights, accuracy, probe size.
fn summary_line(loaded: &LoadedRun, probe: &Probe, measured: &Measured) -> String {
    let model = &loaded.model;
    format!(
        "task {}, {} layers x {} heads ({} layout), weights {}, eval token accuracy {:.2}%, \
         probe batch {} sequences",
        loaded.run.task.name(),
        model.blocks.len(),
        model.n_heads(),
        measured.summary.head_layout,
        loaded.weights.display(),
        measured.eval_token_acc * 100.0,
        probe.examples.len(),
    )
}

/// `explore.html`: the first probe sequences' patterns, the head records and every head's
/// queries and keys in 2-D ([`crate::explore`]).
fn write_explore(
    out: &Path,
    loaded: &LoadedRun,
    probe: &Probe,
    measured: &Measured,
) -> Result<PathBuf, ReportError> {
    let path = out.join("explore.html");
    let weights = loaded
        .model
        .blocks
        .iter()
        .map(|block| {
            (0..loaded.model.n_heads())
                .map(|h| {
                    let w = block.attention.head_weights(h);
                    let host = |t| HostTensor::of::<1>(t).values;
                    QkWeights {
                        q: HostTensor::of(w.q).values,
                        q_bias: host(w.q_bias),
                        k: HostTensor::of(w.k).values,
                        k_bias: host(w.k_bias),
                    }
                })
                .collect()
        })
        .collect();
    let labels = probe
        .examples
        .iter()
        .map(|e| figures::token_labels(&e.input, probe.token_names.as_deref()))
        .collect();
    let data = explore::build(&ExploreInput {
        title: &loaded.run.config.name,
        summary: summary_line(loaded, probe, measured),
        layers: &measured.layers,
        labels,
        heads: &measured.heads,
        weights: Some(weights),
    });
    write_file(&path, explore::render(&data).as_bytes())?;
    Ok(path)
}

/// The page's list of data files, with what each holds.
fn described_files(
    with_divergence: bool,
    with_trajectories: bool,
    with_relations: bool,
) -> Vec<(String, &'static str)> {
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
            "one record per head: measures, pattern scores, ablation drop, role, copying \
             score, QK and OV effective rank, direct logit attribution, gradient importance, \
             value and weighted norms and their correlation with the attention weight, \
             task_target_score (attention on the exact positions the task says solve each \
             query), relation_scores (per dependency relation, dependent_to_head and \
             head_to_dependent; null for tasks without parses)",
        ),
        (
            "circuits.json".into(),
            "from the weights: Q/K/V-composition matrices per pair of layers; per head \
             copying scores, eigenvalues, singular values, effective ranks; per layer the \
             effective rank of the heads' queries and keys side by side, and the attention \
             rollout of the first probe sequence",
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
            "sizes, parameter counts, accuracy, specialisation, pruning, and the rank \
             correlations of gradient importance, ablation drop and pruning order",
        ),
    ];
    described.push((
        "explore.html".into(),
        "interactive views of every head (no network needed): the model view (each layer x \
         head as a heatmap), the head view (a probe sequence's queries and keys joined by \
         lines weighted by attention; hover a token for its row or column) and the query/key \
         view (a head's queries and keys projected together to 2-D by PCA); it embeds the \
         first probe sequences (at most 8) and heads.json",
    ));
    if with_relations {
        described.push((
            "relations.json".into(),
            "on the task's parsed sentences (Clark et al. 2019): per dependency relation the \
             arcs counted, the baseline (the best fixed offset head - dependent and its \
             score), every head's dependent_to_head and head_to_dependent (fraction of arcs \
             whose one end attends most to the other; ties give 1/k), and the best head in \
             each direction with whether it beats the baseline",
        ));
    }
    if with_divergence {
        described.push((
            "divergence.csv".into(),
            "per snapshot and layer: mean pairwise qk_cosine, ov_cosine, pattern_js",
        ));
    }
    if with_trajectories {
        described.push((
            "trajectories.json".into(),
            "per final head: the matched head, role and pattern scores at each snapshot's \
             step, and role_formed_at, the step from which its final role stayed",
        ));
    }
    described
}

/// Writes `value` as pretty JSON to `path` and returns the path.
fn write_json(path: &Path, value: &impl Serialize) -> Result<PathBuf, ReportError> {
    let json = serde_json::to_vec_pretty(value).expect("report records serialize");
    write_file(path, &json)?;
    Ok(path.to_path_buf())
}

/// Writes `bytes` to `path` atomically.
fn write_file(path: &Path, bytes: &[u8]) -> Result<(), ReportError> {
    train::atomic::write_atomic(path, bytes).map_err(|error| ReportError::Write {
        path: path.to_path_buf(),
        error,
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
