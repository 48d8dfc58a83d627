//! The report directory, `inspect`'s counterpart of [`run::RunDir`]: one table
//! ([`FILES`]) names every file a report may hold, with what it holds and when it is
//! written; [`ReportDir`] writes and reads each of them as a typed value, and knows when a
//! report is complete. `inspect` writes through it, `sweep` reads through it, the page's
//! list of files and the book's file table (docs/inspect.md) come from the same table (a test,
//! crates/report/tests/report_dir.rs, keeps the book in step).
//!
//! ```text
//! REPORT/weights.safetensors, activations.safetensors   tensors
//! REPORT/heads.json, circuits.json, ...                 records, one type each
//! REPORT/divergence.csv                                 with snapshots
//! REPORT/figures/NAME.png                               figures
//! REPORT/explore.html                                   the interactive page
//! REPORT/index.html                                     written last: the report is complete
//! ```

use std::path::{Path, PathBuf};

use run::manifest::{Depth, MANIFEST, Verdict};
use run::out_dir::{OutDirError, OutKind, OutLock};
use serde::Serialize;
use serde::de::DeserializeOwned;

use inspect::circuits::Circuits;
use inspect::inspection::Measured;
use inspect::inspection::summary::{SimilarityFile, Summary};
use inspect::interventions::patching::Patching;
use inspect::interventions::pruning::Pruning;
use inspect::load::loaded_run::LoadedRun;
use inspect::measures::agreement::Agreement;
use inspect::measures::ceiling::Ceiling;
use inspect::measures::divergence::{self, DivergencePoint};
use inspect::measures::heads::HeadRecord;
use inspect::measures::logit_lens::LogitLens;
use inspect::measures::relations::Relations;
use inspect::measures::relations_over_training::RelationsOverTraining;
use inspect::measures::trajectories::Trajectories;

use crate::provenance::Provenance;

/// `weights.safetensors`.
pub const WEIGHTS: &str = "weights.safetensors";
/// `activations.safetensors`.
pub const ACTIVATIONS: &str = "activations.safetensors";
/// `heads.json`.
pub const HEADS: &str = "heads.json";
/// `circuits.json`.
pub const CIRCUITS: &str = "circuits.json";
/// `similarity.json`.
pub const SIMILARITY: &str = "similarity.json";
/// `pruning.json`.
pub const PRUNING: &str = "pruning.json";
/// `summary.json`.
pub const SUMMARY: &str = "summary.json";
/// `relations.json`.
pub const RELATIONS: &str = "relations.json";
/// `provenance.json`.
pub const PROVENANCE: &str = "provenance.json";

/// `relation-sentences.conllu`.
pub const RELATION_SENTENCES: &str = "relation-sentences.conllu";
/// `ceiling.json`.
pub const CEILING: &str = "ceiling.json";
/// `agreement.json`.
pub const AGREEMENT: &str = "agreement.json";
/// `logit_lens.json`.
pub const LOGIT_LENS: &str = "logit_lens.json";
/// `patching.json`.
pub const PATCHING: &str = "patching.json";
/// `divergence.csv`.
pub const DIVERGENCE: &str = "divergence.csv";
/// `trajectories.json`.
pub const TRAJECTORIES: &str = "trajectories.json";
/// `relations-over-training.json`.
pub const RELATIONS_OVER_TRAINING: &str = "relations-over-training.json";
/// `explore.html`.
pub const EXPLORE: &str = "explore.html";
/// `index.html`, written last.
pub const INDEX: &str = "index.html";
/// The figures' folder.
pub const FIGURES: &str = "figures";

/// When a file of the report is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Presence {
    /// In every report.
    Always,
    /// For tasks with dependency parses (word tasks: `grammar`).
    WordTask,
    /// When the run took snapshots.
    Snapshots,
    /// For models of two layers or more.
    TwoLayers,
    /// When the run has metrics (`metrics.jsonl` with a record).
    Metrics,
    /// For tasks with minimal pairs, when patching is not turned off.
    Pairs,
    /// For tasks with minimal pairs and models of two layers or more (path patching).
    PairsTwoLayers,
    /// When the output layer is scored: every model headlab trained (on the task's
    /// examples), and an imported masked-LM checkpoint (on the probe's masked words).
    Outputs,
    /// For word tasks, when the output layer is scored.
    WordTaskOutputs,
    /// For word tasks of models headlab trained: what reads the grammar's own output classes.
    WordTaskTrained,
    /// When the run has snapshots and its model reads a treebank (a text model trained here).
    TreebankSnapshots,
}

impl Presence {
    /// Whether a report of a run like `contents` holds the file.
    pub fn holds(self, contents: &ReportContents) -> bool {
        match self {
            Presence::Always => true,
            Presence::WordTask => contents.word_task,
            Presence::Snapshots => contents.snapshots,
            Presence::TwoLayers => contents.n_layers >= 2,
            Presence::Metrics => contents.metrics,
            Presence::Pairs => contents.pairs,
            Presence::PairsTwoLayers => contents.pairs && contents.n_layers >= 2,
            Presence::Outputs => contents.outputs,
            Presence::WordTaskOutputs => contents.word_task && contents.outputs,
            Presence::WordTaskTrained => contents.word_task && contents.trained,
            Presence::TreebankSnapshots => contents.treebank_snapshots,
        }
    }

    /// The words the book's file table (docs/inspect.md) uses for the condition (none for
    /// `Always`).
    pub fn book_words(self) -> Option<&'static str> {
        match self {
            Presence::Always => None,
            Presence::WordTask => Some("word tasks"),
            Presence::Snapshots => Some("Written when the run has snapshots"),
            Presence::TwoLayers => Some("Written for models of two layers or more"),
            Presence::Metrics => Some("Written when the run has metrics"),
            Presence::Pairs => Some("Written for tasks with minimal pairs"),
            Presence::PairsTwoLayers => {
                Some("Written for tasks with minimal pairs and models of two layers or more")
            }
            Presence::Outputs => Some(
                "Written when the output layer is scored: models headlab trained and imported \
                 masked-LM checkpoints",
            ),
            Presence::WordTaskOutputs => Some(
                "word tasks, when the output layer is scored (imported masked-LM checkpoints \
                 too)",
            ),
            Presence::WordTaskTrained => Some("word tasks of models headlab trained"),
            Presence::TreebankSnapshots => Some(
                "Written when the run has snapshots and its model reads a treebank (a text \
                 model trained here)",
            ),
        }
    }
}

/// The facts about a run that decide which conditional files its report holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReportContents {
    /// The task has dependency parses.
    pub word_task: bool,
    /// The run took snapshots.
    pub snapshots: bool,
    /// Encoder blocks.
    pub n_layers: usize,
    /// The run has metrics.
    pub metrics: bool,
    /// The task has minimal pairs and patching was not turned off.
    pub pairs: bool,
    /// The output layer is scored (a model headlab trained, or an imported masked-LM).
    pub outputs: bool,
    /// Headlab trained the model (it was not imported).
    pub trained: bool,
    /// The run has snapshots and its model reads a treebank.
    pub treebank_snapshots: bool,
}

impl ReportContents {
    /// Which conditional files the report of `loaded` holds, given what was `measured`.
    pub fn of(measured: &Measured, loaded: &LoadedRun) -> Self {
        ReportContents {
            word_task: measured
                .relations
                .as_ref()
                .is_some_and(|r| !r.relations.is_empty()),
            snapshots: !measured.divergence.is_empty(),
            n_layers: loaded.model.n_layers(),
            metrics: !loaded.dir.metrics().is_empty(),
            pairs: measured.patching.is_some(),
            outputs: measured.pruning.is_some(),
            trained: loaded.resolved.config.import.is_none(),
            treebank_snapshots: measured.relations_over_training.is_some(),
        }
    }
}

/// One file of a report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReportFile {
    /// Path inside the report directory.
    pub name: &'static str,
    /// What it holds: `index.html`'s list of files, and a figure's caption on the page.
    pub description: &'static str,
    /// When it is written.
    pub presence: Presence,
}

impl ReportFile {
    /// A figure (under `figures/`), shown on `index.html` with its description as caption.
    pub fn is_figure(&self) -> bool {
        self.name.starts_with("figures/")
    }

    /// A data file or page listed on `index.html` (every file but the figures and the page
    /// itself).
    pub fn is_listed(&self) -> bool {
        !self.is_figure() && self.name != INDEX
    }
}

const fn file(name: &'static str, presence: Presence, description: &'static str) -> ReportFile {
    ReportFile {
        name,
        description,
        presence,
    }
}

/// Every file of a report, in the order of `index.html`'s list of files and then of its
/// figures, then `index.html` and the manifest (written last, in that order).
pub const FILES: &[ReportFile] = &[
    file(
        WEIGHTS,
        Presence::Always,
        "per-head q, k, v, biases, o, qk and ov (f32)",
    ),
    file(
        ACTIVATIONS,
        Presence::Always,
        "the probe batch: tokens, and per layer attn_input, pattern, head_out",
    ),
    file(
        HEADS,
        Presence::Always,
        "one record per head: measures, pattern scores, ablation drops (zero, mean and \
         resample; fractions of eval token accuracy, 0.01 is one point), role, copying \
         score, QK and OV effective rank, direct logit attribution, gradient importance, \
         value and weighted norms and their correlation with the attention weight, \
         task_target_score (attention on the exact positions the task says solve each \
         query), relation_scores (per dependency relation, dependent_to_head and \
         head_to_dependent; null for tasks without parses)",
    ),
    file(
        CIRCUITS,
        Presence::Always,
        "from the weights: Q/K/V-composition matrices per pair of layers; per head \
         copying scores, eigenvalues, singular values, effective ranks; per layer the \
         effective rank of the heads' queries and keys side by side, and the attention \
         rollout of the first probe sequence",
    ),
    file(
        SIMILARITY,
        Presence::Always,
        "per layer: qk_cosine, ov_cosine, pattern_js, output_cka matrices",
    ),
    file(
        PRUNING,
        Presence::Outputs,
        "accuracy as heads are removed (ranked and greedy order), heads removable",
    ),
    file(
        SUMMARY,
        Presence::Always,
        "sizes, parameter counts, accuracy, specialisation, pruning, and the rank \
         correlations of gradient importance, ablation drop and pruning order",
    ),
    file(
        PROVENANCE,
        Presence::Always,
        "what the report measured: the run's files its numbers rest on (weights, config, \
         tokenizer, snapshots) with their sizes and SHA-256, and every option that changes a \
         number (backend, probe source, probe size, prune tolerance, patching, relation \
         sentences)",
    ),
    file(
        LOGIT_LENS,
        Presence::Outputs,
        "the logit lens: the residual stream after the embedding and after each block, read \
         through the final norm and the output layer, with its eval token accuracy and loss",
    ),
    file(
        PATCHING,
        Presence::Pairs,
        "causal tests on the task's minimal pairs, one section per kind (`answer`: the \
         token the answer reads changed; `route`: where it is found moved, recall only): \
         activation patching per head (at every position and at each one) and of the \
         residual stream per layer and position, path patching from each head to each \
         later head's query, key and value and to the skip connection, layer to layer, and \
         attribution patching's estimates beside the exact values with their agreement",
    ),
    file(
        EXPLORE,
        Presence::Always,
        "interactive views of every head (no network needed): the model view (each layer x \
         head as a heatmap), the head view (a probe sequence's queries and keys joined by \
         lines weighted by attention; hover a token for its row or column) and the query/key \
         view (a head's queries and keys projected together to 2-D by PCA); it embeds the \
         first probe sequences (at most 8) and heads.json",
    ),
    file(
        RELATIONS,
        Presence::WordTask,
        "on the task's parsed sentences (Clark et al. 2019): per dependency relation the \
         arcs counted, the baseline (the best fixed offset head - dependent and its \
         score), every head's dependent_to_head and head_to_dependent (fraction of arcs \
         whose one end attends most to the other; ties give 1/k), and the best head in \
         each direction with whether it beats the baseline, by headlab's rule (a word may \
         attend most to itself) and by Clark et al.'s (clark_rule: a word's attention to \
         itself left out)",
    ),
    file(
        RELATION_SENTENCES,
        Presence::WordTask,
        "the sentences relations.json scored, in order, as CoNLL-U (FORM, HEAD, DEPREL), \
         so every score can be recomputed without headlab's random streams",
    ),
    file(
        CEILING,
        Presence::WordTaskTrained,
        "the model's accuracy per class of masked word against the ceiling, the accuracy of \
         the Bayes-optimal predictor that knows the grammar and sees what the model sees, on \
         the same masked examples",
    ),
    file(
        AGREEMENT,
        Presence::WordTaskOutputs,
        "subject-verb agreement across attractors (Linzen et al. 2016): each verb with a noun \
         subject masked alone, agreement right when its right-number form gets the higher \
         logit; per attractor (the noun nearest the verb between it and its subject: none, \
         same or different number) the verbs, the agreement with its standard error and the \
         word accuracy",
    ),
    file(
        DIVERGENCE,
        Presence::Snapshots,
        "per snapshot and layer: mean pairwise qk_cosine, ov_cosine, pattern_js",
    ),
    file(
        TRAJECTORIES,
        Presence::Snapshots,
        "per final head: the matched head, role and pattern scores at each snapshot's \
         step, and role_formed_at, the step from which its final role stayed",
    ),
    file(
        RELATIONS_OVER_TRAINING,
        Presence::TreebankSnapshots,
        "per snapshot (`steps`): `step`, `syntactic` (the fraction of the scored arcs of the \
         labels with at least `min_arcs` found when each label uses its best head), \
         `positional` (the same with each label's best fixed offset), \
         `labels_beating_offset`, and `labels`, per UD label: `relation`, `arcs`, `layer`, \
         `head` and `direction` of its head and its `score`, `offset` and `offset_score`; \
         heads and offsets chosen on `chosen_sentences` sentences of `chosen_on` (EWT's \
         development set), scored on `scored_sentences` of the probe's treebank",
    ),
    file(
        "figures/relations-over-training.png",
        Presence::TreebankSnapshots,
        "at every snapshot (steps on a log scale), the fraction of the treebank's arcs found \
         when each UD label uses its best head, and when it uses its best fixed offset (both \
         chosen on EWT's development set, scored on the probe's sentences), above the \
         masked-LM loss (training and held-out): heads above the offsets' line track syntax \
         beyond position",
    ),
    file(
        "figures/attention.png",
        Presence::Always,
        "attention of every head (rows: layers, columns: heads) on the first probe sequence; \
         row i is where query position i looks, brighter is more attention",
    ),
    file(
        "figures/rollout.png",
        Presence::Always,
        "attention rollout on the first probe sequence after each layer (Abnar and \
         Zuidema 2020): the product of the layers' head-averaged attention, each mixed \
         half and half with the identity for the residual stream; row i is how much of \
         each input position query i holds if attention alone moved information",
    ),
    file(
        "figures/relations.png",
        Presence::WordTask,
        "per dependency relation (rows) and head (columns), the fraction of the \
         relation's arcs whose dependent attends most to its head (top) and whose head \
         attends most to its dependent (bottom), on the task's parsed sentences (Clark \
         et al. 2019); each row names the baseline, the fixed offset head - dependent \
         that finds the most arcs, and its score: a head above it does more than look \
         a fixed distance away",
    ),
    file(
        "figures/similarity.png",
        Presence::Always,
        "per layer, how alike each pair of heads is: QK and OV circuit cosine, attention \
         pattern JS distance, output CKA",
    ),
    file(
        "figures/divergence.png",
        Presence::Snapshots,
        "mean pairwise head similarity at each training snapshot: heads moving apart \
         (cosine falling, JS distance rising) or staying identical",
    ),
    file(
        "figures/circuits.png",
        Presence::Always,
        "per head, read from its weights: the copying score sum(lambda) / sum(|lambda|) of \
         the OV circuit's eigenvalues (1: writes back what it reads, -1: its negation, 0: \
         neither), the same for embedding -> OV -> output layer when the task's inputs and \
         outputs are the same tokens, and the effective rank of the QK and OV circuits (at \
         most d_head; lower: fewer directions matter)",
    ),
    file(
        "figures/composition.png",
        Presence::TwoLayers,
        "for each earlier layer's heads (rows) and later layer's heads (columns): how \
         much the later head's query (Q), key (K) or value (V) reads the subspace the \
         earlier head writes, ||W_A W_B|| / (||W_A|| ||W_B||) with W_A the earlier OV \
         circuit; heads with unrelated subspaces score about 1 / sqrt(d_model) (in \
         the title), higher: the later head reads what the earlier one writes",
    ),
    file(
        "figures/norms.png",
        Presence::Always,
        "per head (rows: layers, columns: heads), each query/key pair of the probe as its \
         attention weight alpha (x) against the size of what it moves, alpha ||f(x_j)|| \
         (y, one scale for every panel; Kobayashi et al. 2020), with the head's \
         norm_weight_correlation in its title: points near the x axis however far right \
         they reach mark a head that attends but writes almost nothing",
    ),
    file(
        "figures/ablation.png",
        Presence::Outputs,
        "eval token accuracy lost when each head alone is ablated: its output set to zero \
         (darkest bar), replaced by its mean over the evaluation set, or replaced by its \
         output on another sequence (lightest)",
    ),
    file(
        "figures/patching.png",
        Presence::Pairs,
        "per head (rows) and position (columns), the fraction of the clean answer's logit \
         difference restored when the head's clean output is put back into the corrupted \
         run at that position (last column: at every position), on the task's minimal \
         pairs, one panel per kind of pair: a head and position near 1 carry the answer's \
         dependence on the changed tokens",
    ),
    file(
        "figures/paths.png",
        Presence::PairsTwoLayers,
        "path patching, laid out as composition.png: per kind of pair and pair of layers, \
         the fraction of the clean answer restored when an earlier head's clean output \
         (rows) may reach the answer only through a later head's (columns) query, key or \
         value, everything else held at the corrupted run; the title gives all the \
         earlier layer's heads through each channel of all the later layer's",
    ),
    file(
        "figures/pruning.png",
        Presence::Outputs,
        "eval token accuracy as heads are removed at test time, least important first \
         (ranked by single-head drop) or the least harmful at each step (greedy)",
    ),
    file(
        "figures/trajectories.png",
        Presence::Snapshots,
        "each final head's mean attention on its final role's pattern at each training \
         snapshot (heads matched snapshot to snapshot by their patterns), above the \
         training loss on the same steps: a role that forms as the loss drops is the \
         phase change of Olsson et al. 2022; the step each role formed and stayed is \
         role_formed_at in trajectories.json",
    ),
    file(
        "figures/training.png",
        Presence::Metrics,
        "training loss and eval accuracy by step",
    ),
    file(
        INDEX,
        Presence::Always,
        "one self-contained page: the summary, the head table, every figure with how to \
         read it, the list of files and the run's config.toml",
    ),
    file(
        MANIFEST,
        Presence::Always,
        "every other file of the report with its size and SHA-256, written last: a report \
         without it is unfinished, one whose files differ from it is damaged (`headlab sweep` \
         inspects both again and leaves them out of its reports)",
    ),
];

/// The entry of [`FILES`] named `name`.
///
/// # Panics
/// If no file of the report has that name (a typo in this crate, not a user's input).
pub fn report_file(name: &str) -> &'static ReportFile {
    FILES
        .iter()
        .find(|f| f.name == name)
        .unwrap_or_else(|| panic!("{name} is not a file of the report"))
}

/// A record of the report stored as one JSON file.
pub trait JsonFile: Serialize + DeserializeOwned {
    /// Its name in the report directory.
    const NAME: &'static str;
}

impl JsonFile for Vec<HeadRecord> {
    const NAME: &'static str = HEADS;
}
impl JsonFile for Circuits {
    const NAME: &'static str = CIRCUITS;
}
impl JsonFile for SimilarityFile {
    const NAME: &'static str = SIMILARITY;
}
impl JsonFile for Pruning {
    const NAME: &'static str = PRUNING;
}
impl JsonFile for Provenance {
    const NAME: &'static str = PROVENANCE;
}
impl JsonFile for Summary {
    const NAME: &'static str = SUMMARY;
}
impl JsonFile for Relations {
    const NAME: &'static str = RELATIONS;
}
impl JsonFile for Agreement {
    const NAME: &'static str = AGREEMENT;
}
impl JsonFile for Ceiling {
    const NAME: &'static str = CEILING;
}
impl JsonFile for Trajectories {
    const NAME: &'static str = TRAJECTORIES;
}
impl JsonFile for LogitLens {
    const NAME: &'static str = LOGIT_LENS;
}
impl JsonFile for Patching {
    const NAME: &'static str = PATCHING;
}
impl JsonFile for RelationsOverTraining {
    const NAME: &'static str = RELATIONS_OVER_TRAINING;
}

/// A file of the report that could not be written.
#[derive(Debug, thiserror::Error)]
#[error("cannot write {path}: {error}")]
pub struct WriteError {
    /// The file.
    pub path: PathBuf,
    /// Why. Not a `source`: the message already says it, and `error: {e:#}` in main would
    /// print it twice.
    pub error: std::io::Error,
}

/// A file of the report that could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// Not there: the report is incomplete, or the run's kind never has it.
    #[error("{} is missing", path.display())]
    Missing {
        /// The file.
        path: PathBuf,
    },
    /// There, but unreadable.
    #[error("cannot read {}: {error}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// Read, but not what the report writes.
    #[error("{} is not a valid {name}: {error}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The file's name in the report.
        name: &'static str,
        /// What is wrong.
        error: String,
    },
}

/// One report directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportDir {
    root: PathBuf,
}

impl ReportDir {
    /// The report directory at `root` (nothing is created or read).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// A run's report at its default place, `RUN/inspect`.
    pub fn of_run(run: &run::RunDir) -> Self {
        Self::new(run.report_dir())
    }

    /// The directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The path of the report's file `name` (a name of [`FILES`]).
    pub fn path(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }

    /// Claims the directory for this report ([`run::out_dir::claim`]: a new or empty
    /// directory, or a report headlab wrote; a user's directory is refused untouched), makes
    /// its `figures/`, and clears the temporary files that a killed `inspect` left in them
    /// (`.NAME.tmp-PID` of a process that is gone). Hold the returned lock until
    /// [`ReportDir::seal`]: a second writer is refused meanwhile.
    pub fn create(&self) -> Result<OutLock, ClaimError> {
        let lock = run::out_dir::claim(&self.root, &REPORT_KIND)?;
        let figures = self.root.join(FIGURES);
        std::fs::create_dir_all(&figures).map_err(|error| WriteError {
            path: figures.clone(),
            error,
        })?;
        for dir in [&self.root, &figures] {
            remove_dead_temporaries(dir).map_err(|error| WriteError {
                path: dir.to_path_buf(),
                error,
            })?;
        }
        // The report is about to be rewritten: it is not complete until sealed again, and its
        // page, written last, goes too, so that a killed inspect leaves no old index.html
        // that opens over half-new files.
        run::manifest::unseal(&self.root).map_err(|error| WriteError {
            path: self.path(MANIFEST),
            error,
        })?;
        let index = self.path(INDEX);
        if std::fs::symlink_metadata(&index).is_ok_and(|meta| meta.is_file()) {
            std::fs::remove_file(&index).map_err(|error| WriteError { path: index, error })?;
        }
        Ok(lock)
    }

    /// Records every file of the finished report (`written`, paths under this directory) in
    /// `manifest.json` with its size and hash ([`run::manifest`]). Called last.
    /// A file of the report's layout that this report did not write (left by an earlier
    /// report of another reading: `relations.json` after a `--text` one) is removed first, so
    /// the directory holds one reading; nothing else in it is touched.
    pub fn seal(&self, written: &[PathBuf]) -> Result<PathBuf, WriteError> {
        let names: Vec<String> = written
            .iter()
            .filter_map(|path| path.strip_prefix(&self.root).ok())
            .map(|relative| relative.to_string_lossy().into_owned())
            .collect();
        self.remove_stale(&names)?;
        run::manifest::seal(&self.root, &names).map_err(|error| WriteError {
            path: self.path(MANIFEST),
            error,
        })?;
        Ok(self.path(MANIFEST))
    }

    /// Removes the files of the report's layout ([`FILES`], a figure's SVG copy too) that are
    /// not among `kept`: plain files only (a link is left), and only in a directory claimed as
    /// a report.
    fn remove_stale(&self, kept: &[String]) -> Result<(), WriteError> {
        if !run::out_dir::is_claimed(&self.root, &REPORT_KIND) {
            return Ok(());
        }
        for name in layout_names() {
            let path = self.path(&name);
            let is_plain_file = std::fs::symlink_metadata(&path).is_ok_and(|meta| meta.is_file());
            if name != MANIFEST && is_plain_file && !kept.contains(&name) {
                std::fs::remove_file(&path).map_err(|error| WriteError { path, error })?;
            }
        }
        Ok(())
    }

    /// The report against its manifest, to `depth`: [`Verdict::Unsealed`] while `inspect`
    /// has not finished it.
    pub fn verify(&self, depth: Depth) -> Verdict {
        run::manifest::check(&self.root, depth)
    }

    /// Whether the report is complete: sealed by `inspect` (which seals last), every sealed
    /// file there at its size, and every file every report has among them.
    pub fn is_complete(&self) -> bool {
        self.verify(Depth::Sizes) == Verdict::Intact && self.has_every_report_file()
    }

    /// Whether every file every report has is there (what a sealed report must also hold).
    pub fn has_every_report_file(&self) -> bool {
        FILES
            .iter()
            .filter(|f| f.presence == Presence::Always)
            .all(|f| self.path(f.name).is_file())
    }

    /// The files a report of a run like `contents` should hold but this one lacks.
    pub fn missing(&self, contents: &ReportContents) -> Vec<&'static str> {
        FILES
            .iter()
            .filter(|f| f.presence.holds(contents) && !self.path(f.name).is_file())
            .map(|f| f.name)
            .collect()
    }

    /// Writes `value` as pretty JSON into its file and returns the path.
    pub fn write_json<T: JsonFile>(&self, value: &T) -> Result<PathBuf, WriteError> {
        let json = serde_json::to_vec_pretty(value).expect("report records serialize");
        self.write(T::NAME, &json)
    }

    /// Reads a JSON record of the report.
    pub fn read_json<T: JsonFile>(&self) -> Result<T, ReadError> {
        let (path, text) = self.read_text(T::NAME)?;
        serde_json::from_str(&text).map_err(|e| ReadError::Invalid {
            path,
            name: T::NAME,
            error: e.to_string(),
        })
    }

    /// Writes `divergence.csv`.
    pub fn write_divergence(&self, points: &[DivergencePoint]) -> Result<PathBuf, WriteError> {
        self.write(DIVERGENCE, divergence::to_csv(points).as_bytes())
    }

    /// Reads `divergence.csv`.
    pub fn read_divergence(&self) -> Result<Vec<DivergencePoint>, ReadError> {
        let (path, text) = self.read_text(DIVERGENCE)?;
        divergence::from_csv(&text).map_err(|error| ReadError::Invalid {
            path,
            name: DIVERGENCE,
            error,
        })
    }

    /// Writes `bytes` into the report's file `name` atomically and returns its path.
    pub fn write(&self, name: &str, bytes: &[u8]) -> Result<PathBuf, WriteError> {
        let path = self.path(name);
        run::atomic::write_atomic(&path, bytes).map_err(|error| WriteError {
            path: path.clone(),
            error,
        })?;
        Ok(path)
    }

    fn read_text(&self, name: &str) -> Result<(PathBuf, String), ReadError> {
        let path = self.path(name);
        match std::fs::read_to_string(&path) {
            Ok(text) => Ok((path, text)),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                Err(ReadError::Missing { path })
            }
            Err(error) => Err(ReadError::Io { path, error }),
        }
    }
}

/// What `inspect` writes into `--out`, for [`run::out_dir`]: a report. One written before
/// markers is known by its manifest listing only the report's own files; a run's own report
/// directory (`RUN/inspect`, a name of the run's layout) is headlab's whatever it holds.
pub const REPORT_KIND: OutKind = OutKind {
    name: "report",
    program: "inspect",
    recognises: |root| {
        run::out_dir::is_named_in_a_run(root, run::dir::REPORT)
            || matches!(run::manifest::read(root), Ok(Some(manifest))
                if manifest.files.keys().all(|name| layout_names().any(|own| own == *name)))
    },
};

/// Every name of the report's layout: [`FILES`], and each figure's SVG copy.
fn layout_names() -> impl Iterator<Item = String> {
    FILES.iter().flat_map(|file| {
        let svg = file.is_figure().then(|| {
            Path::new(file.name)
                .with_extension("svg")
                .to_string_lossy()
                .into_owned()
        });
        std::iter::once(file.name.to_string()).chain(svg)
    })
}

/// Why the report's directory could not be made ready for writing.
#[derive(Debug, thiserror::Error)]
pub enum ClaimError {
    /// `--out` is not a directory headlab may write a report into, or another writer holds it.
    #[error(transparent)]
    Claim(#[from] OutDirError),
    /// A file system failure while preparing it.
    #[error(transparent)]
    Write(#[from] WriteError),
}

/// Refuses `out` as the report directory of the run at `run` when a report there would be
/// taken for another run's, or would overwrite the run's own files: `out` is the run
/// directory itself (the report's `manifest.json` would replace the run's), or lies inside
/// another run directory (`inspect RUN_1 --out RUN_0/inspect` would pass seed 1's model off
/// as seed 0's). Anywhere inside its own run, or outside every run, is fine. Links are
/// followed, as the writes would follow them.
pub fn check_report_place(out: &Path, run: &Path) -> Result<(), String> {
    let run = std::fs::canonicalize(run).unwrap_or_else(|_| run.to_path_buf());
    let out_absolute = std::path::absolute(out).unwrap_or_else(|_| out.to_path_buf());
    for (depth, ancestor) in out_absolute.ancestors().enumerate() {
        let Ok(canonical) = std::fs::canonicalize(ancestor) else {
            continue; // not made yet
        };
        if canonical == run {
            return match depth {
                0 => Err(format!(
                    "--out {} is the run directory itself: the report's manifest.json would \
                     replace the run's; leave --out out (the report goes to RUN/inspect) or \
                     give a directory inside the run or outside every run",
                    out.display()
                )),
                _ => Ok(()),
            };
        }
        if canonical.join(run::dir::MARKER).is_file() {
            return Err(format!(
                "--out {} is inside another run, {}: a report there would be read as that \
                 run's; write it inside the run it measures ({}) or outside every run",
                out.display(),
                ancestor.display(),
                run.display()
            ));
        }
    }
    Ok(())
}

/// Removes from `dir` the files named as [`run::atomic::write_atomic`] names its temporary
/// files, `.NAME.tmp-PID`, whose process no longer runs (a writer that was killed). Those of a
/// live process are another `inspect` at work and stay. Only Linux tells which processes run
/// (`/proc`); elsewhere nothing is removed.
fn remove_dead_temporaries(dir: &Path) -> std::io::Result<()> {
    if !Path::new("/proc/self").exists() {
        return Ok(());
    }
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = temporary_pid(&name) else {
            continue;
        };
        if entry.file_type()?.is_file() && !runs(pid) {
            std::fs::remove_file(entry.path())?;
        }
    }
    Ok(())
}

/// Whether process `pid` still runs. A zombie does not: a killed writer whose parent has not
/// reaped it keeps its `/proc/PID` (for good, where the container's first process reaps no
/// orphans), and counting it alive kept its temporary file beside a finished report (seen in
/// the sweep's fault test: a `.weights.safetensors.tmp-PID` of an `inspect` killed a second
/// before the next one started).
fn runs(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        // `pid (comm) state ...`: the state follows the last ')' (comm may hold one).
        stat.rsplit(')')
            .next()
            .is_some_and(|rest| !matches!(rest.trim_start().chars().next(), Some('Z' | 'X')))
    })
}

/// The process id of a temporary file's name, `.NAME.tmp-PID`.
fn temporary_pid(name: &str) -> Option<u32> {
    let (stem, pid) = name.rsplit_once(".tmp-")?;
    if !name.starts_with('.') || stem.len() < 2 || !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    pid.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_goes_inside_its_own_run_or_outside_every_run() {
        let tmp = tempfile::tempdir().unwrap();
        let (run_0, run_1) = (tmp.path().join("run-0"), tmp.path().join("run-1"));
        for run in [&run_0, &run_1] {
            std::fs::create_dir_all(run).unwrap();
            std::fs::write(run.join(run::dir::MARKER), b"{}").unwrap();
        }
        std::os::unix::fs::symlink(&run_0, tmp.path().join("link-to-0")).unwrap();
        for fine in [
            run_1.join("inspect"),
            run_1.join("reports/probe-2"),
            tmp.path().join("elsewhere/report"),
        ] {
            assert_eq!(
                check_report_place(&fine, &run_1),
                Ok(()),
                "{}",
                fine.display()
            );
        }
        for (refused, says) in [
            (run_0.join("inspect"), "inside another run"),
            (tmp.path().join("link-to-0/inspect"), "inside another run"),
            (run_0.clone(), "inside another run"),
            (run_1.clone(), "is the run directory itself"),
        ] {
            let message = check_report_place(&refused, &run_1).unwrap_err();
            assert!(message.contains(says), "{}: {message}", refused.display());
        }
    }

    #[test]
    fn temporaries_of_dead_writers_go_and_everything_else_stays() {
        assert_eq!(temporary_pid(".pruning.png.tmp-24340"), Some(24340));
        for name in [
            "pruning.png",
            ".tmp-12",
            ".x.tmp-",
            ".x.tmp-12a",
            "x.tmp-12",
        ] {
            assert_eq!(temporary_pid(name), None, "{name}");
        }
        let dir = tempfile::tempdir().unwrap();
        let report = ReportDir::new(dir.path());
        // A report directory already (an earlier inspect claimed it).
        drop(report.create().unwrap());
        let ours = format!(".heads.json.tmp-{}", std::process::id());
        // Process ids wrap below 2^22 on Linux: this one runs nowhere.
        let dead = ".heads.json.tmp-4294967290";
        for name in [ours.as_str(), dead, "heads.json", "notes.txt"] {
            std::fs::write(dir.path().join(name), "x").unwrap();
        }
        let _lock = report.create().unwrap();
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        let mut expected = vec![
            FIGURES.to_string(),
            "heads.json".into(),
            "notes.txt".into(),
            run::out_dir::MARKER.into(),
            run::out_dir::LOCK.into(),
        ];
        if !Path::new("/proc/self").exists() {
            expected.push(dead.to_string());
        }
        expected.push(ours);
        expected.sort();
        assert_eq!(left, expected);
    }

    /// A process that has exited but not been waited for (a zombie) does not run, so its
    /// temporary files count as dead; this process runs.
    #[test]
    #[cfg(target_os = "linux")]
    fn a_zombie_writer_counts_as_gone() {
        assert!(runs(std::process::id()));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        // Not waited for yet: once it exits it stays a zombie of this process.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while runs(pid) {
            assert!(
                std::time::Instant::now() < deadline,
                "`true` still runs after 10 s"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(
            Path::new(&format!("/proc/{pid}")).exists(),
            "a zombie keeps /proc/PID until it is waited for"
        );
        let dir = tempfile::tempdir().unwrap();
        drop(ReportDir::new(dir.path()).create().unwrap());
        let temporary = format!(".heads.json.tmp-{pid}");
        std::fs::write(dir.path().join(&temporary), "x").unwrap();
        drop(ReportDir::new(dir.path()).create().unwrap());
        assert!(
            !dir.path().join(&temporary).exists(),
            "the zombie's temporary file went"
        );
        child.wait().unwrap();
    }
}
