//! Relations over training: when heads of a model trained here on text come to track
//! syntax. At every training snapshot, each UD label's best head and best fixed offset are
//! **chosen on the shipped treebank's development set** and **scored on the probe's
//! treebank** (EWT's test set by default), and one figure sums them up per snapshot.
//!
//! Defined before any result was looked at (issue 64):
//!
//! - **A label's head at a step.** Among every head in both directions (the dependent's
//!   most-attended word is its head; the head word's is the dependent, as in
//!   [`crate::measures::relations`]), the one with the highest score on the development sentences (ties: the
//!   first, layer-major, dependent-to-head first); its score is the fraction of the label's
//!   arcs in the scored sentences it finds in that direction.
//! - **A label's offset at a step.** The offset `head - dependent` shared by the most of the
//!   label's development arcs (ties as [`crate::measures::relations`]'s baseline); its score is the fraction of
//!   the label's scored arcs at that offset. It does not change with training: the figure it
//!   gives is the bar a head must clear.
//! - **The syntactic attention figure** of a step: the fraction of all scored arcs of the
//!   labels with at least [`MIN_ARCS`] of them that are found when each label uses its head
//!   (an arc-weighted mean of those labels' head scores); **the positional figure**: the same
//!   with each label's offset. A model whose heads attend by position alone stays at or
//!   below the positional figure.
//!
//! Why choose on one set and score on another: the best of 2 x layers x heads candidates,
//! chosen on the sentences it is scored on, is biased upward (the winner of many noisy
//! scores; an untrained model's best head beats chance this way). Chosen on the development
//! set, the test score is an honest estimate of the chosen head's.
//!
//! Each snapshot reads [`TRAINING_RELATION_SENTENCES`] sentences of each set, whole (no
//! masking), as the final model's relations are read.
//!
//! Beside them, for experiment 9 (issue 65):
//!
//! - **The replication**: the same with the sets' roles swapped (chosen on the probe's
//!   sentences, scored on the development set's), a second honest probe of each figure.
//! - **The held-out loss** at every snapshot: the masked-LM loss on the run's evaluation
//!   set, the one training reports in `metrics.jsonl`, so the figures and the loss share
//!   their steps.
//! - **Onsets** ([`crate::measures::onset`]): the window where the syntactic figure (and its
//!   replication) rises fastest per decade of steps, and where the held-out loss falls
//!   fastest.
//! - **The last snapshot's counts per sentence**: for each counted label, its arcs in every
//!   scored sentence and those its head and its offset find, the table a Multi-Bootstrap
//!   over seeds and sentences resamples (`headlab sweep stats`).

use burn::prelude::*;
use model::{Encoder, HeadId};
use run::snapshot::SnapshotError;
use serde::{Deserialize, Serialize};

use tasks::Example;
use tasks::evaluate::evaluate;

use crate::load::context::MeasureContext;
use crate::load::reading::{ReadSentences, ReadingError};
use crate::measures::onset::{Onset, fall, onset};
use crate::measures::relations::{InOrder, LabelCounts, RelationHits, SHOWN_MIN_ARCS, best_offset};

/// Sentences of each treebank read at every snapshot: enough for the common labels' arcs (in
/// EWT's first 500 test sentences `det` has about 400, `punct` over 700), at a few seconds a
/// snapshot for `configs/text.toml`'s model.
pub const TRAINING_RELATION_SENTENCES: usize = 500;

/// Fewest scored arcs for a label to count in a step's figures (as the report's tables).
pub const MIN_ARCS: usize = SHOWN_MIN_ARCS;

/// Which way a head is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// The dependent's most-attended word is its head.
    DependentToHead,
    /// The head word's most-attended word is the dependent.
    HeadToDependent,
}

/// One label at one snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabelAtStep {
    /// The label: "det", "obj", ...
    pub relation: String,
    /// Its arcs in the scored sentences.
    pub arcs: usize,
    /// Its head, chosen on the development sentences (`layer` and `head` in the JSON).
    #[serde(flatten)]
    pub head: HeadId,
    /// Which way the head is read.
    pub direction: Direction,
    /// The fraction of the scored arcs the head finds.
    pub score: f64,
    /// Its offset, chosen on the development sentences.
    pub offset: i64,
    /// The fraction of the scored arcs at that offset.
    pub offset_score: f64,
}

/// Every label at one snapshot, and the two figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RelationsAtStep {
    /// The snapshot's training step.
    pub step: usize,
    /// The masked-LM loss on the run's evaluation set at this snapshot, the one training
    /// reports (absent in the replication, which shares the main steps').
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_out_loss: Option<f64>,
    /// The fraction of the counted labels' scored arcs their heads find.
    pub syntactic: f64,
    /// The fraction their offsets find.
    pub positional: f64,
    /// Counted labels whose head scores above their offset.
    pub labels_beating_offset: usize,
    /// Every label with scored arcs, in the relations' order; those under [`MIN_ARCS`] are
    /// listed but not counted in the figures.
    pub labels: Vec<LabelAtStep>,
}

/// `relations-over-training.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RelationsOverTraining {
    /// Where the heads and offsets are chosen: the shipped development set's file.
    pub chosen_on: String,
    /// Sentences of it read.
    pub chosen_sentences: usize,
    /// Sentences scored (of the probe's treebank).
    pub scored_sentences: usize,
    /// Fewest scored arcs for a label to count in the figures.
    pub min_arcs: usize,
    /// One entry per snapshot, by step.
    pub steps: Vec<RelationsAtStep>,
    /// The replication: per snapshot, each label's head and offset chosen on the probe's
    /// sentences and scored on the development set's.
    #[serde(default)]
    pub replication: Vec<RelationsAtStep>,
    /// When the figures rose fastest and the held-out loss fell fastest.
    #[serde(default)]
    pub onsets: Onsets,
    /// At the last snapshot, each counted label's counts in every scored sentence, in the
    /// probe's order.
    #[serde(default)]
    pub last_step_sentences: Vec<LabelSentences>,
}

/// The onsets of a run's curves over its snapshots ([`crate::measures::onset`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Onsets {
    /// The syntactic figure's steepest rise.
    pub syntactic: Option<Onset>,
    /// The replication's syntactic figure's.
    pub syntactic_replicated: Option<Onset>,
    /// The held-out loss's steepest fall.
    pub loss_fall: Option<Onset>,
}

/// One label at the last snapshot, sentence by sentence: what its head and offset (those
/// of [`RelationsAtStep::labels`]) find in each scored sentence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabelSentences {
    /// The label.
    pub relation: String,
    /// Its head (`layer` and `head` in the JSON).
    #[serde(flatten)]
    pub head: HeadId,
    /// Which way the head is read.
    pub direction: Direction,
    /// Its offset.
    pub offset: i64,
    /// Its arcs in each sentence.
    pub arcs: Vec<usize>,
    /// The arcs the head finds in each (tie-credited, so fractional where the head's
    /// attention ties).
    pub head_hits: Vec<f64>,
    /// The arcs at the offset in each.
    pub offset_hits: Vec<usize>,
}

/// Why relations over training could not be measured.
#[derive(Debug, thiserror::Error)]
pub enum OverTrainingError {
    /// A snapshot does not load.
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    /// The sentences cannot be read as the model reads.
    #[error(transparent)]
    Reading(#[from] ReadingError),
}

/// Relations at every snapshot of the run `context` comes from, for a model that reads a
/// treebank, with the loss on the examples `held_out` gives (the run's evaluation set, the
/// one training reports); `None` for a run without snapshots, a model reading its task's
/// tokens or typed text.
pub fn relations_over_training(
    context: MeasureContext,
    held_out: &dyn Fn() -> Vec<Example>,
) -> Result<Option<RelationsOverTraining>, OverTrainingError> {
    let Some(snapshots) = context.snapshots else {
        return Ok(None);
    };
    let list = snapshots.list();
    if list.is_empty() {
        return Ok(None);
    }
    let count = TRAINING_RELATION_SENTENCES;
    let Some(chosen_on) = context.reading.dev_sentences(count)? else {
        return Ok(None);
    };
    let Some(scored) =
        context
            .reading
            .relation_sentences(context.task, (count, count), context.seed)?
    else {
        return Ok(None);
    };
    let held_out = held_out();
    let (mut steps, mut replication) = (vec![], vec![]);
    let mut last_scored = None;
    for (step, path) in &list {
        let model = snapshots.model(path)?;
        let chosen_hits = hits_of(&model, &chosen_on, context.device);
        let scored_hits = hits_of(&model, &scored, context.device);
        let mut at = at_step(*step, &chosen_hits, &scored_hits);
        at.held_out_loss = Some(evaluate(&model, &held_out, context.device, None).0);
        steps.push(at);
        replication.push(at_step(*step, &scored_hits, &chosen_hits));
        last_scored = Some(scored_hits);
    }
    let last_step_sentences = match (steps.last(), &last_scored) {
        (Some(last), Some(hits)) => per_sentence(last, hits),
        _ => vec![],
    };
    Ok(Some(RelationsOverTraining {
        chosen_on: crate::load::text::SHIPPED_DEV_FILE.to_string(),
        chosen_sentences: chosen_on.trees().len(),
        scored_sentences: scored.trees().len(),
        min_arcs: MIN_ARCS,
        onsets: onsets_of(&steps, &replication),
        steps,
        replication,
        last_step_sentences,
    }))
}

/// The onsets of the syntactic figures and the fall of the held-out loss.
pub fn onsets_of(steps: &[RelationsAtStep], replication: &[RelationsAtStep]) -> Onsets {
    let curve = |steps: &[RelationsAtStep]| -> Vec<(usize, f64)> {
        steps.iter().map(|s| (s.step, s.syntactic)).collect()
    };
    let loss: Vec<(usize, f64)> = steps
        .iter()
        .filter_map(|s| s.held_out_loss.map(|loss| (s.step, loss)))
        .collect();
    Onsets {
        syntactic: onset(&curve(steps)),
        syntactic_replicated: onset(&curve(replication)),
        loss_fall: fall(&loss),
    }
}

/// Each counted label of `at` (heads and offsets chosen) sentence by sentence in `scored`.
pub fn per_sentence(at: &RelationsAtStep, scored: &RelationHits) -> Vec<LabelSentences> {
    let n_heads = scored.n_heads();
    at.labels
        .iter()
        .filter(|label| label.arcs >= MIN_ARCS)
        .filter_map(|label| {
            let sentences = scored.label_counts_per_sentence(&label.relation)?;
            let column = label.head.flat_index(n_heads);
            Some(LabelSentences {
                relation: label.relation.clone(),
                head: label.head,
                direction: label.direction,
                offset: label.offset,
                arcs: sentences.iter().map(|s| s.arcs).collect(),
                head_hits: sentences
                    .iter()
                    .map(|s| match label.direction {
                        Direction::DependentToHead => s.dependent_to_head[column],
                        Direction::HeadToDependent => s.head_to_dependent[column],
                    })
                    .collect(),
                offset_hits: sentences
                    .iter()
                    .map(|s| s.offsets.iter().filter(|&&o| o == label.offset).count())
                    .collect(),
            })
        })
        .collect()
}

/// Every head's relation counts of `model` on `sentences`.
fn hits_of(model: &Encoder, sentences: &ReadSentences, device: &Device) -> RelationHits {
    let hits = RelationHits::new(model.n_layers(), model.n_heads());
    let mut in_order = InOrder::new(hits, sentences.trees());
    sentences.each_chunk(model, device, |patterns, rows, first| {
        in_order.add_rows_at(patterns, rows, first);
    });
    in_order.finish()
}

/// One snapshot's labels and figures: each label's head and offset chosen on `chosen`,
/// scored on `scored`. A pure function of the counts.
pub fn at_step(step: usize, chosen: &RelationHits, scored: &RelationHits) -> RelationsAtStep {
    let mut labels = vec![];
    for label in scored.labels() {
        let (Some(on_scored), Some(on_chosen)) =
            (scored.label_counts(label), chosen.label_counts(label))
        else {
            continue;
        };
        if on_scored.arcs == 0 || on_chosen.arcs == 0 {
            continue;
        }
        let (column, direction) = best_column(&on_chosen);
        let found = match direction {
            Direction::DependentToHead => on_scored.dependent_to_head[column],
            Direction::HeadToDependent => on_scored.head_to_dependent[column],
        };
        let offset = best_offset(on_chosen.offsets, on_chosen.arcs).offset;
        let at_offset = on_scored.offsets.get(&offset).copied().unwrap_or(0);
        let arcs = on_scored.arcs as f64;
        labels.push(LabelAtStep {
            relation: label.clone(),
            arcs: on_scored.arcs,
            head: HeadId::from_flat_index(column, scored.n_heads()),
            direction,
            score: found / arcs,
            offset,
            offset_score: at_offset as f64 / arcs,
        });
    }
    let counted: Vec<&LabelAtStep> = labels.iter().filter(|l| l.arcs >= MIN_ARCS).collect();
    let arcs: f64 = counted.iter().map(|l| l.arcs as f64).sum();
    let found = |score: fn(&LabelAtStep) -> f64| match arcs > 0.0 {
        true => {
            counted
                .iter()
                .map(|l| score(l) * l.arcs as f64)
                .sum::<f64>()
                / arcs
        }
        false => 0.0,
    };
    RelationsAtStep {
        step,
        held_out_loss: None,
        syntactic: found(|l| l.score),
        positional: found(|l| l.offset_score),
        labels_beating_offset: counted.iter().filter(|l| l.score > l.offset_score).count(),
        labels,
    }
}

/// The head and direction with the most hits (ties: the first column, layer-major, and
/// dependent-to-head before head-to-dependent).
fn best_column(counts: &LabelCounts) -> (usize, Direction) {
    let mut best = (0, Direction::DependentToHead, f64::NEG_INFINITY);
    for (direction, hits) in [
        (Direction::DependentToHead, counts.dependent_to_head),
        (Direction::HeadToDependent, counts.head_to_dependent),
    ] {
        for (column, &found) in hits.iter().enumerate() {
            if found > best.2 {
                best = (column, direction, found);
            }
        }
    }
    (best.0, best.1)
}

/// `relations-over-training.csv`'s header: one row per snapshot.
const HEADER: &str = "step,syntactic,positional,labels_beating_offset,labels_counted";

/// `relations-over-training.csv`: a header, then one row per snapshot (the figures; the
/// labels are in the JSON).
pub fn to_csv(over: &RelationsOverTraining) -> String {
    let mut text = format!("{HEADER}\n");
    for step in &over.steps {
        let counted = step
            .labels
            .iter()
            .filter(|l| l.arcs >= over.min_arcs)
            .count();
        text.push_str(&format!(
            "{},{:.6},{:.6},{},{}\n",
            step.step, step.syntactic, step.positional, step.labels_beating_offset, counted
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use run::tensor_file::HostTensor;
    use tasks::conllu::TreebankSentence;

    /// A tree of `n` words where word `i` depends on word `i + 1` under `label` (the last is
    /// the root).
    fn chain(n: usize, label: &str) -> TreebankSentence {
        TreebankSentence {
            sent_id: None,
            text: None,
            words: (0..n).map(|i| format!("w{i}")).collect(),
            heads: (0..n).map(|i| if i + 1 < n { i + 2 } else { 0 }).collect(),
            relations: (0..n)
                .map(|i| if i + 1 < n { label } else { "root" }.to_string())
                .collect(),
            lines: vec![],
        }
    }

    /// One layer of `heads` heads over `trees` (each `n` words, no padding): head `h`'s
    /// query `q` attends wholly to `target(h, q)`.
    fn pattern(
        trees: usize,
        heads: usize,
        n: usize,
        target: impl Fn(usize, usize) -> usize,
    ) -> HostTensor {
        let mut values = vec![0.0f32; trees * heads * n * n];
        for b in 0..trees {
            for h in 0..heads {
                for q in 0..n {
                    values[((b * heads + h) * n + q) * n + target(h, q)] = 1.0;
                }
            }
        }
        HostTensor {
            shape: vec![trees, heads, n, n],
            values,
        }
    }

    fn hits(trees: &[TreebankSentence], pattern: &HostTensor, heads: usize) -> RelationHits {
        let mut hits = RelationHits::new(1, heads);
        hits.add_trees_at(std::slice::from_ref(pattern), trees, 0);
        hits
    }

    /// Head 1 looks one word ahead (finds every arc from the dependent); head 0 looks back.
    /// Chosen on one set, scored on another: head 1, dependent-to-head, every arc found; the
    /// offset +1 finds every arc too, so the head does not beat it.
    #[test]
    fn the_head_and_offset_are_chosen_on_one_set_and_scored_on_the_other() {
        let trees: Vec<TreebankSentence> = (0..3).map(|_| chain(5, "obj")).collect();
        let ahead = pattern(3, 2, 5, |h, q| match h {
            1 => (q + 1).min(4),
            _ => q.saturating_sub(1),
        });
        let chosen = hits(&trees, &ahead, 2);
        let step = at_step(7, &chosen, &chosen);
        let obj = step.labels.iter().find(|l| l.relation == "obj").unwrap();
        assert_eq!(
            (
                obj.head,
                obj.direction,
                obj.score,
                obj.offset,
                obj.offset_score
            ),
            (HeadId::new(0, 1), Direction::DependentToHead, 1.0, 1, 1.0)
        );
        assert_eq!(obj.arcs, 12);
        // Under MIN_ARCS: listed, not counted.
        assert_eq!((step.syntactic, step.labels_beating_offset), (0.0, 0));

        // Scored where head 1 misses every arc (it looks back there): the choice stands.
        let back = pattern(3, 2, 5, |_, q| q.saturating_sub(1));
        let scored = hits(&trees, &back, 2);
        let step = at_step(7, &chosen, &scored);
        let obj = step.labels.iter().find(|l| l.relation == "obj").unwrap();
        assert_eq!((obj.head, obj.score), (HeadId::new(0, 1), 0.0));
    }

    /// With enough arcs, the figures are the arc-weighted fractions.
    #[test]
    fn the_figures_weigh_labels_by_their_arcs() {
        let trees: Vec<TreebankSentence> = (0..30).map(|_| chain(5, "det")).collect();
        // Head 0 finds every arc from the dependent but the first word's.
        let mostly = pattern(30, 1, 5, |_, q| if q == 0 { 0 } else { (q + 1).min(4) });
        let counts = hits(&trees, &mostly, 1);
        let step = at_step(1, &counts, &counts);
        assert!((step.syntactic - 0.75).abs() < 1e-12, "{}", step.syntactic);
        assert_eq!((step.positional, step.labels_beating_offset), (1.0, 0));
        let over = RelationsOverTraining {
            chosen_on: "dev".into(),
            chosen_sentences: 30,
            scored_sentences: 30,
            min_arcs: MIN_ARCS,
            steps: vec![step],
            replication: vec![],
            onsets: Onsets::default(),
            last_step_sentences: vec![],
        };
        assert_eq!(
            to_csv(&over),
            format!("{HEADER}\n1,0.750000,1.000000,0,1\n")
        );
    }

    /// The last snapshot's counts per sentence add up to its label's figures; a sentence
    /// without the label's arcs counts zero.
    #[test]
    fn counts_per_sentence_add_up_to_the_labels_scores() {
        let mut trees: Vec<TreebankSentence> = (0..30).map(|_| chain(5, "det")).collect();
        trees.push(chain(3, "obj"));
        // Head 0 finds every arc from the dependent but the first word's.
        let mostly = pattern(31, 1, 5, |_, q| if q == 0 { 0 } else { (q + 1).min(4) });
        let counts = hits(&trees, &mostly, 1);
        let step = at_step(1, &counts, &counts);
        let sentences = per_sentence(&step, &counts);
        assert_eq!(sentences.len(), 1, "obj's 2 arcs are under MIN_ARCS");
        let det = &sentences[0];
        assert_eq!((det.relation.as_str(), det.offset), ("det", 1));
        assert_eq!(det.arcs.len(), 31);
        assert_eq!(&det.arcs[..2], [4, 4]);
        assert_eq!(det.arcs[30], 0);
        assert_eq!(&det.head_hits[..2], [3.0, 3.0]);
        assert_eq!(det.offset_hits[0], 4);
        let label = step.labels.iter().find(|l| l.relation == "det").unwrap();
        let (hits, arcs): (f64, usize) = (det.head_hits.iter().sum(), det.arcs.iter().sum());
        assert_eq!((arcs, hits / arcs as f64), (label.arcs, label.score));
    }

    /// The onsets read the syntactic figures and the held-out loss, step by step.
    #[test]
    fn onsets_read_the_figures_and_the_loss() {
        let at = |step: usize, syntactic: f64, loss: Option<f64>| RelationsAtStep {
            step,
            held_out_loss: loss,
            syntactic,
            positional: 0.5,
            labels_beating_offset: 0,
            labels: vec![],
        };
        let steps = [
            at(0, 0.0, Some(9.0)),
            at(10, 0.1, Some(8.0)),
            at(100, 0.1, Some(5.0)),
            at(1000, 0.4, Some(4.9)),
        ];
        let replication = [at(10, 0.1, None), at(100, 0.3, None), at(1000, 0.3, None)];
        let onsets = onsets_of(&steps, &replication);
        let window = |o: Option<Onset>| o.map(|o| (o.from_step, o.to_step));
        assert_eq!(window(onsets.syntactic), Some((100, 1000)));
        assert_eq!(window(onsets.syntactic_replicated), Some((10, 100)));
        assert_eq!(window(onsets.loss_fall), Some((10, 100)));
    }
}
