//! The report's two pages: `index.html` (summary, head table, figures with their captions,
//! the list of files from [`FILES`], the config) and `explore.html` (the interactive views,
//! [`crate::draw::explore`]).

use std::path::PathBuf;

use run::tensor_file::HostTensor;

use crate::dir::{EXPLORE, FILES, INDEX, ReportContents, ReportDir, WriteError};
use crate::draw::explore::{self, ExploreInput, QkWeights};
use crate::draw::{figures, html};
use inspect::inspection::{Measured, PatchingAbsent};
use inspect::load::loaded_run::LoadedRun;
use inspect::load::probe::Probe;
use inspect::measures::relations::Relations;

/// `index.html`: the summary line, head table, figures, the run's config and the files.
pub fn write_page(
    dir: &ReportDir,
    loaded: &LoadedRun,
    probe: &Probe,
    measured: &Measured,
    figures: &[(PathBuf, &str)],
) -> Result<PathBuf, WriteError> {
    let config = &loaded.resolved.config;
    let config_toml = std::fs::read_to_string(loaded.dir.config_path()).unwrap_or_default();
    let contents = ReportContents::of(measured, loaded);
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
        left_out: &measured.summary.left_out,
        files: FILES
            .iter()
            .filter(|f| f.is_listed() && f.presence.holds(&contents))
            .map(|f| (f.name.to_string(), f.description))
            .collect(),
    };
    let page = html::render(&page).map_err(|error| WriteError {
        path: dir.path(INDEX),
        error,
    })?;
    dir.write(INDEX, page.as_bytes())
}

/// The pages' summary line: task, sizes, weights, accuracy, probe size.
fn summary_line(loaded: &LoadedRun, probe: &Probe, measured: &Measured) -> String {
    let model = &loaded.model;
    let accuracy = measured.eval_token_acc.map_or_else(
        || "not scored (an imported model)".to_string(),
        |acc| format!("{:.2}%", acc * 100.0),
    );
    // The weights named by their hash too (provenance.json has it whole): a path says where
    // they were, the hash which they were.
    let sha256 =
        loaded
            .inputs
            .files
            .get(&loaded.inputs.weights)
            .map_or_else(String::new, |record| {
                format!(
                    " (SHA-256 {}…)",
                    &record.sha256[..record.sha256.len().min(12)]
                )
            });
    // An import says what it is: its class, its family, and that headlab never trained it
    // (its config's [task] is only a probe).
    let imported = match &loaded.resolved.config.import {
        Some(import) => {
            let family = import.format.strip_prefix("huggingface-");
            let shared = match import.shared_layers {
                true => {
                    ": its layers share one set of weights, so a head's weights are the same \
                         in every layer and its attention is not"
                }
                false => "",
            };
            // A base model's output layer is headlab's, made from its tied embeddings.
            let head = match loaded.model.output_transform {
                Some(_) => "",
                None => {
                    "; no prediction head: the output layer in its model.safetensors is a \
                         copy of its word embeddings, which nothing scores"
                }
            };
            format!(
                " (an imported {} of the {} family, trained elsewhere, not by headlab{shared}{head})",
                import.architecture,
                family.unwrap_or(&import.format)
            )
        }
        None => trained_on(loaded),
    };
    format!(
        "{}, {} layers x {} heads{imported} ({} layout), weights {}{sha256}, eval token \
         accuracy {}, {}{}",
        measured.summary.probe.describe(loaded.resolved.task.name()),
        model.n_layers(),
        model.n_heads(),
        measured.summary.head_layout,
        loaded.weights.display(),
        accuracy,
        probe_read(probe, measured.relations.as_ref()),
        position_note(&loaded.resolved.config.model),
    )
}

/// What the report read, for the page's summary and the terminal: the probe batch (what
/// the head table, the patterns and explore.html read: `64 sentences of 12 words`, or a
/// task's `64 sequences of 10 tokens`) and the sentences relations are scored on, often
/// many more: each count is said where it applies.
pub fn probe_read(probe: &Probe, relations: Option<&Relations>) -> String {
    let size = probe.examples.len();
    let plural = if size == 1 { "" } else { "s" };
    // Typed sentences may differ in length: `of 3 to 9 words`.
    let lengths = probe.lengths();
    let (shortest, longest) = (
        lengths.iter().copied().min().unwrap_or(0),
        lengths.iter().copied().max().unwrap_or(0),
    );
    let span = |less: usize| match shortest == longest {
        true => format!("{}", longest.saturating_sub(less)),
        false => format!(
            "{} to {}",
            shortest.saturating_sub(less),
            longest.saturating_sub(less)
        ),
    };
    let batch = match &probe.pieces {
        // A probe of words holds `[CLS]` and `[SEP]` around each sentence's words.
        Some(_) => format!("{size} sentence{plural} of {} words", span(2)),
        None => format!("{size} sequence{plural} of {} tokens", span(0)),
    };
    let relations = relations.map_or_else(String::new, |r| {
        let cut = match r.too_long {
            0 => String::new(),
            n => format!("; {n} more left out, over the model's positions"),
        };
        format!(
            ", relations scored on {} sentences ({} arcs{cut})",
            r.sentences, r.arcs
        )
    });
    format!("probe batch {batch} (the head table, the patterns and explore.html){relations}")
}

/// What a model trained here on text was trained on: the corpus, the tokenizer's pieces and
/// the steps (the run's `run.json` records the corpus's and tokenizer's SHA-256). Empty for a
/// toy, whose task the header names.
fn trained_on(loaded: &LoadedRun) -> String {
    let resolved = &loaded.resolved;
    match resolved.task.corpus() {
        Some((corpus, _)) => format!(
            " (a masked LM trained here on {corpus}, {} word pieces, {} steps)",
            resolved.io.vocab_size, resolved.config.train.steps
        ),
        None => String::new(),
    }
}

/// What a reader of the circuits needs to know about how positions enter: rotary
/// positions turn queries and keys by their distance, which the QK circuit leaves out, and
/// local layers see only near keys. Empty for absolute positions.
pub fn position_note(model: &model::EncoderConfig) -> String {
    if model.positional != model::PositionalKind::Rotary {
        return String::new();
    }
    let mut note = ". Positions are rotary: a head's score of key j from query i is \
                    q_i R(j - i) k_j, so its QK circuit is its score at distance 0 (the \
                    turn by distance is left out)"
        .to_string();
    if let Some(local) = model.local_attention {
        let local_layers: Vec<String> = (0..model.n_layers)
            .filter(|&layer| local.is_local(layer))
            .map(|layer| layer.to_string())
            .collect();
        let which = match local_layers.len() {
            1 => format!("layer {} attends", local_layers[0]),
            _ => format!("layers {} attend", local_layers.join(", ")),
        };
        note.push_str(&format!(
            "; {which} locally, to the keys at most {} positions away",
            local.window / 2
        ));
    }
    note
}

/// `explore.html`: the first probe sequences' patterns, the head records and every head's
/// queries and keys in 2-D ([`crate::draw::explore`]).
pub fn write_explore(
    dir: &ReportDir,
    loaded: &LoadedRun,
    probe: &Probe,
    measured: &Measured,
) -> Result<PathBuf, WriteError> {
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
        title: &loaded.resolved.config.name,
        summary: summary_line(loaded, probe, measured),
        layers: &measured.layers,
        labels,
        pieces: probe.piece_patterns(&loaded.model, explore::EXPLORE_SEQUENCES),
        heads: &measured.heads,
        weights: Some(weights),
        patching: measured.patching.as_ref(),
        patching_absent: measured.patching_absent.map(patching_absent),
        shown_relations: measured
            .relations
            .as_ref()
            .map_or_else(Vec::new, |relations| {
                relations
                    .shown()
                    .iter()
                    .map(|r| r.relation.clone())
                    .collect()
            }),
    });
    dir.write(EXPLORE, explore::render(&data).as_bytes())
}

/// Why a report has no `patching.json`, as its pages say it in the empty view.
fn patching_absent(why: PatchingAbsent) -> &'static str {
    match why {
        PatchingAbsent::NotAsked => "The report was written with --no-patching.",
        PatchingAbsent::NoPredictionHead => {
            "Not measured: patching compares the output layer's logits, and this model has \
             no prediction head (an imported base model; a masked LM has one)."
        }
        PatchingAbsent::NoMinimalPairs => {
            "This task has no minimal pairs (the file task has none)."
        }
    }
}
