//! Which heads track syntax: dependency-relation detectors after Clark et al. 2019 ("What
//! Does BERT Look At? An Analysis of BERT's Attention", section 4.2). Each head is read as a
//! classifier that predicts, for every word, the word it attends to most; for each relation
//! (det, amod, nsubj, ...) a head scores the fraction of that relation's arcs it predicts,
//! in both directions:
//!
//! - `dependent_to_head`: the dependent's most-attended word is its head ("the" -> "dog");
//! - `head_to_dependent`: the head word's most-attended word is the dependent.
//!
//! The baseline, as in the paper, is the best fixed offset: for each relation the offset
//! `o = head - dependent` shared by the most arcs, and the fraction of arcs it predicts (the
//! same number for both directions, since an arc at offset `o` is found by "look `o` ahead"
//! from the dependent or "look `o` back" from the head). A head that beats it does more than
//! attend by position.
//!
//! The sentences are the task's own parsed sentences ([`tasks::Task::parsed_sentences`]), fed
//! unmasked (as Clark et al. fed BERT whole sentences), padded into batches whose padding is
//! masked as keys. Only the `grammar` task has parses; every other task gets no relations.
//!
//! **Ties.** The most-attended word is the argmax over the sentence's real words only
//! (padding never counts). When `k` words tie for the largest weight and the target is among
//! them, the arc gets `1/k` credit: the expected score of breaking ties at random, so a
//! uniform head over `n` words scores `1/n` rather than 1 (every word "is" an argmax) or 0.
//!
//! **A word's attention to itself.** headlab takes the most-attended word over every word
//! of the sentence, the word itself included ([`SelfAttention::Counted`]); Clark et al.
//! leave the word itself out ([`SelfAttention::Excluded`]). `relations.json` gives every
//! relation's best heads by both rules (`best`, and `clark_rule`), so a figure set beside
//! the paper's compares like with like. The offset baseline is the same under both: no arc
//! joins a word to itself.
//!
//! The scoring is a pure function of host data ([`RelationHits::add`], [`score_relations`]);
//! [`measure_relations`] only runs the model to get the patterns.

pub mod categories;
pub mod intervals;
pub mod masks;

use std::collections::BTreeMap;

use crate::load::context::MeasureContext;
use crate::load::reading::{ReadSentences, ReadingError};
use crate::measures::relations::categories::{CATEGORIES, category_name, word_categories};
pub use crate::measures::relations::categories::{
    OBJECT_PAST_A_NOUN, PAST_A_NOUN, categories, category_names,
};
use crate::measures::relations::intervals::{
    RelationIntervals, SentenceCredits, relation_intervals,
};
use crate::measures::relations::masks::{RelationMasking, masked_positions, training_masks};
use model::HeadId;
use run::tensor_file::HostTensor;
use serde::{Deserialize, Serialize};
use tasks::ParsedSentence;
use tasks::batch::mix_seed;
use tasks::conllu::TreebankSentence;

/// Sentences scored per report: enough arcs of every relation for fractions to about two
/// points (a relation on a quarter of 512 sentences still has over 100 arcs).
pub const RELATION_SENTENCES: usize = 512;

/// Most sentences `inspect --relation-sentences` scores: a few minutes on a CPU for a
/// MiniLM-sized model, and the bootstrap's per-sentence credits stay under about 100 MB.
pub const MAX_RELATION_SENTENCES: usize = 4096;

/// Reads `--relation-sentences`: a whole number in 1..=[`MAX_RELATION_SENTENCES`].
pub fn parse_relation_sentences(text: &str) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(n) if (1..=MAX_RELATION_SENTENCES).contains(&n) => Ok(n),
        _ => Err(format!(
            "expected a whole number of sentences from 1 to {MAX_RELATION_SENTENCES}, got {text:?}"
        )),
    }
}

/// Stream of the relation sentences, apart from the probe (`u64::MAX - 1`), the evaluation
/// set (`u64::MAX`) and the training batches.
pub const RELATION_STREAM: u64 = u64::MAX - 2;

/// One head's two scores on one relation, each the fraction of the relation's arcs it finds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DirectionScores {
    /// The dependent's most-attended word is its head.
    pub dependent_to_head: f64,
    /// The head word's most-attended word is the dependent.
    pub head_to_dependent: f64,
}

/// One head's scores on one relation, in `relations.json`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct HeadRelationScore {
    /// The head (`layer` and `head` in the JSON).
    #[serde(flatten)]
    pub id: HeadId,
    /// The dependent's most-attended word is its head.
    pub dependent_to_head: f64,
    /// The head word's most-attended word is the dependent.
    pub head_to_dependent: f64,
}

/// The best fixed offset of a relation.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Baseline {
    /// `head - dependent` shared by the most arcs (ties: the smaller `|offset|`, then the
    /// smaller offset).
    pub offset: i64,
    /// The fraction of arcs at that offset.
    pub score: f64,
}

/// The best head of a relation in one direction.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BestHead {
    /// The head (`layer` and `head` in the JSON).
    #[serde(flatten)]
    pub id: HeadId,
    /// Its score (ties: the first head, layer-major).
    pub score: f64,
    /// Whether the score is above the baseline's (strictly).
    pub beats_baseline: bool,
    /// Eval token accuracy lost on masked words that are this relation's dependents (an
    /// object noun for `dobj`) when this head is zeroed (`interventions::relation_ablation`);
    /// null in a file written before it existed, or with no such masked word.
    #[serde(default)]
    pub drop_on_relation: Option<f64>,
    /// The same on every other masked word.
    #[serde(default)]
    pub drop_elsewhere: Option<f64>,
    /// `drop_on_relation` with the head resample-ablated instead of zeroed (its output on
    /// each sentence taken from another sentence), which keeps later layers on their
    /// training distribution.
    #[serde(default)]
    pub resample_drop_on_relation: Option<f64>,
    /// `drop_elsewhere` with the head resample-ablated.
    #[serde(default)]
    pub resample_drop_elsewhere: Option<f64>,
    /// The masked-LM loss gained (nats per word, mean) on the masked words that are this
    /// relation's dependents when this head is zeroed: every word's loss moves where the
    /// accuracy moves a word at a time; null in a file written before it existed
    /// (2026-11-30), or with no such masked word.
    #[serde(default)]
    pub loss_rise_on_relation: Option<f64>,
    /// The same on every other masked word.
    #[serde(default)]
    pub loss_rise_elsewhere: Option<f64>,
    /// `loss_rise_on_relation` with the head resample-ablated.
    #[serde(default)]
    pub resample_loss_rise_on_relation: Option<f64>,
    /// `loss_rise_elsewhere` with the head resample-ablated.
    #[serde(default)]
    pub resample_loss_rise_elsewhere: Option<f64>,
    /// How many masked positions the drops and rises on the relation are over: words, or
    /// for a model that reads pieces every piece of a masked word (null where they were not
    /// measured).
    #[serde(default)]
    pub words_on_relation: Option<usize>,
}

/// The best head of a relation in each direction.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BestHeads {
    /// Dependent to head.
    pub dependent_to_head: BestHead,
    /// Head to dependent.
    pub head_to_dependent: BestHead,
}

/// One relation's entry in `relations.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RelationScores {
    /// The label: "det", "amod", ...
    pub relation: String,
    /// Arcs of this relation in the sentences.
    pub arcs: usize,
    /// The best fixed offset.
    pub baseline: Baseline,
    /// Every head's scores, layer-major.
    pub heads: Vec<HeadRelationScore>,
    /// The best head in each direction, and whether it beats the baseline.
    pub best: BestHeads,
    /// 95% intervals over sentences (a bootstrap, [`crate::measures::relations::intervals`]);
    /// absent in a file written before they were measured, and for a relation too rare to
    /// be in half the resamples.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intervals: Option<RelationIntervals>,
    /// The best head in each direction by Clark et al.'s rule, a word's attention to itself
    /// left out ([`SelfAttention::Excluded`]); absent in a file written before it was
    /// measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clark_rule: Option<BestHeads>,
    /// What the best head in each direction attends to most on each of the relation's
    /// arcs; absent in a file written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attended: Option<AttendedWords>,
}

/// The word each best head attends to most on every arc of a relation, in the order the
/// arcs come in the report's `relation-sentences.conllu` (sentence by sentence, each
/// sentence's arcs in the order of their dependents): a 0-based position among the
/// sentence's words, the first of any that tie. With the sentences it lets anyone see what
/// a head looks at where it misses.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttendedWords {
    /// From each arc's dependent, by the best dependent-to-head head.
    pub dependent_to_head: Vec<u16>,
    /// From each arc's head word, by the best head-to-dependent head.
    pub head_to_dependent: Vec<u16>,
}

/// `relations.json`: every relation that occurs in the sentences, in [`tasks::Relation::ALL`]'s
/// order (relations without arcs are left out).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Relations {
    /// Sentences scored.
    pub sentences: usize,
    /// Arcs scored, over every relation.
    pub arcs: usize,
    /// One entry per relation.
    pub relations: Vec<RelationScores>,
    /// How the sentences were masked (`inspect --relations-masked`); absent: whole
    /// sentences.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub masking: Option<RelationMasking>,
    /// Sentences of the treebank left out because the model's positions cannot hold their
    /// pieces (a probe cut, said on the terminal and the page); absent when none was.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub too_long: usize,
}

fn is_zero(count: &usize) -> bool {
    *count == 0
}

/// Which words a head's most-attended word is taken over.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SelfAttention {
    /// Every word of the sentence, the word itself included (headlab's rule).
    #[default]
    Counted,
    /// The other words: a word's attention to itself is left out (Clark et al. 2019).
    Excluded,
}

/// Fewest arcs for a relation to be in a report's table and figure: with fewer, a fraction
/// moves by a point or more with each arc, and a treebank has dozens of such labels (EWT's
/// test set: 19 of 49). They stay in `relations.json`.
pub const SHOWN_MIN_ARCS: usize = 100;

impl Relations {
    /// Sets each relation's [`RelationScores::clark_rule`] from `best`, the best heads of the
    /// same sentences scored by Clark et al.'s rule ([`RelationHits::best_heads`]).
    pub fn set_clark_rule(&mut self, best: Vec<(String, BestHeads)>) {
        let mut best: BTreeMap<String, BestHeads> = best.into_iter().collect();
        for relation in &mut self.relations {
            relation.clark_rule = best.remove(&relation.relation);
        }
    }

    /// The relations a report's table and figure show, in order: those of at least
    /// [`SHOWN_MIN_ARCS`] arcs; every one where none has that many (a small probe).
    pub fn shown(&self) -> Vec<&RelationScores> {
        let many: Vec<&RelationScores> = self
            .relations
            .iter()
            .filter(|r| r.arcs >= SHOWN_MIN_ARCS)
            .collect();
        match many.is_empty() {
            true => self.relations.iter().collect(),
            false => many,
        }
    }

    /// Head `id`'s scores per relation name, for its `heads.json` record.
    pub fn head_scores(&self, id: HeadId) -> BTreeMap<String, DirectionScores> {
        self.relations
            .iter()
            .filter_map(|relation| {
                let scores = relation.heads.iter().find(|h| h.id == id)?;
                let pair = DirectionScores {
                    dependent_to_head: scores.dependent_to_head,
                    head_to_dependent: scores.head_to_dependent,
                };
                Some((relation.relation.clone(), pair))
            })
            .collect()
    }
}

/// Arcs found per relation and head, accumulated over batches of sentences, and the offsets
/// the arcs span (for the baseline). Relations are labels: the `grammar` task's categories
/// first, in their fixed order, then any other label met (a treebank's), in the order met.
#[derive(Debug, Clone, PartialEq)]
pub struct RelationHits {
    n_layers: usize,
    n_heads: usize,
    /// Whether a word's attention to itself counts.
    rule: SelfAttention,
    sentences: usize,
    /// Every arc once (a category such as [`PAST_A_NOUN`] counts some twice in `arcs`).
    total_arcs: usize,
    /// The labels: the relations in [`tasks::Relation::ALL`]'s order, then [`PAST_A_NOUN`] and
    /// [`OBJECT_PAST_A_NOUN`], then labels met since.
    labels: Vec<String>,
    /// Arcs per label.
    arcs: Vec<usize>,
    /// Tie-credited hits, `[label][layer * n_heads + head]`.
    dependent_to_head: Vec<Vec<f64>>,
    /// Likewise, head to dependent.
    head_to_dependent: Vec<Vec<f64>>,
    /// Per label, arcs per offset `head - dependent`.
    offsets: Vec<BTreeMap<i64, usize>>,
    /// Every sentence's arcs and credits, for the intervals over sentences.
    per_sentence: Vec<SentenceCredits>,
    /// Per sentence, each arc's labels, in the sentence's arc order.
    arc_labels: Vec<Vec<Vec<usize>>>,
    /// Per sentence, the most-attended word (first of ties) of every head from each arc's
    /// two ends, `[(arc * columns + column) * 2 + direction]` (direction 0: from the
    /// dependent, 1: from the head word).
    most_attended: Vec<Vec<u16>>,
}

/// One label's counts ([`RelationHits::label_counts`]).
#[derive(Debug, Clone, Copy)]
pub struct LabelCounts<'a> {
    /// Its arcs.
    pub arcs: usize,
    /// Tie-credited hits of every head (layer-major), dependent to head.
    pub dependent_to_head: &'a [f64],
    /// Likewise, head to dependent.
    pub head_to_dependent: &'a [f64],
    /// Its arcs per offset `head - dependent`.
    pub offsets: &'a BTreeMap<i64, usize>,
}

/// One label's counts in one sentence ([`RelationHits::label_counts_per_sentence`]).
#[derive(Debug, Clone, PartialEq)]
pub struct SentenceLabelCounts {
    /// Its arcs in the sentence.
    pub arcs: usize,
    /// Tie-credited hits of every head (layer-major), dependent to head.
    pub dependent_to_head: Vec<f64>,
    /// Likewise, head to dependent.
    pub head_to_dependent: Vec<f64>,
    /// The offset `head - dependent` of each of its arcs.
    pub offsets: Vec<i64>,
}

/// One arc as scored: its two ends (0-based word positions) and the labels it counts under.
struct ScoredArc {
    dependent: usize,
    head: usize,
    labels: Vec<usize>,
}

impl RelationHits {
    /// Nothing counted yet, for a model of `n_layers` x `n_heads`, by headlab's rule.
    pub fn new(n_layers: usize, n_heads: usize) -> Self {
        Self::with_rule(n_layers, n_heads, SelfAttention::Counted)
    }

    /// [`RelationHits::new`] with the most-attended word taken by `rule`.
    pub fn with_rule(n_layers: usize, n_heads: usize, rule: SelfAttention) -> Self {
        let mut hits = Self {
            n_layers,
            n_heads,
            rule,
            sentences: 0,
            total_arcs: 0,
            labels: vec![],
            arcs: vec![],
            dependent_to_head: vec![],
            head_to_dependent: vec![],
            offsets: vec![],
            per_sentence: vec![],
            arc_labels: vec![],
            most_attended: vec![],
        };
        for index in 0..CATEGORIES {
            hits.label(category_name(index));
        }
        hits
    }

    /// The index of `name`, added when new.
    fn label(&mut self, name: &str) -> usize {
        if let Some(index) = self.labels.iter().position(|l| l == name) {
            return index;
        }
        self.labels.push(name.to_string());
        self.arcs.push(0);
        self.dependent_to_head
            .push(vec![0.0; self.n_layers * self.n_heads]);
        self.head_to_dependent
            .push(vec![0.0; self.n_layers * self.n_heads]);
        self.offsets.push(BTreeMap::new());
        self.labels.len() - 1
    }

    /// Counts the arcs of `sentences` against `patterns`, one per layer, each `[batch,
    /// heads, seq, seq]` row-major with sentence `b` in row `b` (its words at positions
    /// `0..words.len()`, padding after).
    pub fn add(&mut self, patterns: &[HostTensor], sentences: &[ParsedSentence]) {
        self.add_at(patterns, sentences, 0);
    }

    /// [`RelationHits::add`] for patterns whose sentence words sit at positions
    /// `first..first + words.len()`: 1 for word-level attention of a model that reads
    /// `[CLS]` first ([`crate::load::words`]). The most-attended word is still taken over the
    /// sentence's words only, never `[CLS]` or `[SEP]`, as for headlab's own models.
    pub fn add_at(&mut self, patterns: &[HostTensor], sentences: &[ParsedSentence], first: usize) {
        let scored: Vec<(usize, Vec<ScoredArc>)> = sentences
            .iter()
            .map(|sentence| {
                let arcs = sentence
                    .arcs
                    .iter()
                    .map(|arc| ScoredArc {
                        dependent: arc.dependent,
                        head: arc.head,
                        labels: categories(sentence, arc),
                    })
                    .collect();
                (sentence.words.len(), arcs)
            })
            .collect();
        self.add_scored(patterns, &scored, first);
    }

    /// [`RelationHits::add_at`] for a treebank's sentences: every arc counts under its
    /// DEPREL (`obj`, `nmod:poss`, ...), and `nsubj` and `dobj` arcs with a noun (a word some
    /// `det` depends on) between their ends under [`PAST_A_NOUN`] and [`OBJECT_PAST_A_NOUN`]
    /// too, as the grammar's. The root's arc (to HEAD 0) is not scored.
    pub fn add_trees_at(
        &mut self,
        patterns: &[HostTensor],
        trees: &[TreebankSentence],
        first: usize,
    ) {
        let scored = self.score_trees(trees);
        self.add_scored(patterns, &scored, first);
    }

    /// Each tree's number of words and its scored arcs (every arc but the root's, under its
    /// DEPREL and categories), its labels registered in the trees' order.
    fn score_trees(&mut self, trees: &[TreebankSentence]) -> Vec<(usize, Vec<ScoredArc>)> {
        trees
            .iter()
            .map(|tree| {
                let arcs = (0..tree.words.len())
                    .filter(|&w| tree.heads[w] > 0)
                    .map(|w| ScoredArc {
                        dependent: w,
                        head: tree.heads[w] - 1,
                        labels: word_categories(tree, w)
                            .into_iter()
                            .map(|name| self.label(name))
                            .collect(),
                    })
                    .collect();
                (tree.words.len(), arcs)
            })
            .collect()
    }

    /// Counts `sentences` (each its number of words and its arcs) against `patterns`.
    fn add_scored(
        &mut self,
        patterns: &[HostTensor],
        sentences: &[(usize, Vec<ScoredArc>)],
        first: usize,
    ) {
        let rows: Vec<&(usize, Vec<ScoredArc>)> = sentences.iter().collect();
        let (credits, most_attended) = self.credit(patterns, &rows, first);
        self.keep(sentences, credits, most_attended);
    }

    /// Each of `sentences`' credits and most-attended words in `patterns` (sentence `b` in
    /// row `b`, its words from position `first`), counted nowhere yet.
    fn credit(
        &self,
        patterns: &[HostTensor],
        sentences: &[&(usize, Vec<ScoredArc>)],
        first: usize,
    ) -> (Vec<SentenceCredits>, Vec<Vec<u16>>) {
        assert_eq!(
            patterns.len(),
            self.n_layers,
            "relations: one pattern per layer"
        );
        let columns = self.n_layers * self.n_heads;
        let mut credits: Vec<SentenceCredits> = sentences
            .iter()
            .map(|(_, arcs)| {
                let offset = |arc: &ScoredArc| arc.head as i64 - arc.dependent as i64;
                SentenceCredits::new(
                    arcs.iter().map(|a| (a.labels.as_slice(), offset(a))),
                    columns,
                )
            })
            .collect();
        let mut most_attended: Vec<Vec<u16>> = sentences
            .iter()
            .map(|(_, arcs)| vec![0; arcs.len() * columns * 2])
            .collect();
        for (l, pattern) in patterns.iter().enumerate() {
            let [batch, heads, seq, seq_k] = pattern.shape[..] else {
                panic!("relations: patterns are [batch, heads, seq, seq]")
            };
            assert!(
                batch == sentences.len() && heads == self.n_heads && seq == seq_k,
                "relations: pattern {:?} does not fit {} sentences and {} heads",
                pattern.shape,
                sentences.len(),
                self.n_heads
            );
            for (b, (n, arcs)) in sentences.iter().enumerate() {
                let n = *n;
                assert!(
                    first + n <= seq,
                    "relations: a sentence longer than its batch"
                );
                for h in 0..heads {
                    // Query `q`'s attention over the sentence's real words only: padding is
                    // never its most-attended word.
                    let row = |q: usize| {
                        let start = ((b * heads + h) * seq + first + q) * seq + first;
                        &pattern.values[start..start + n]
                    };
                    let column = l * self.n_heads + h;
                    // The word a query may not pick: itself, under Clark et al.'s rule.
                    let skip = |q: usize| (self.rule == SelfAttention::Excluded).then_some(q);
                    for (a, arc) in arcs.iter().enumerate() {
                        let cell = (a * columns + column) * 2;
                        let (from_dependent, from_head) = (row(arc.dependent), row(arc.head));
                        let (skip_dependent, skip_head) = (skip(arc.dependent), skip(arc.head));
                        most_attended[b][cell] = first_argmax(from_dependent, skip_dependent);
                        most_attended[b][cell + 1] = first_argmax(from_head, skip_head);
                        let to_head = argmax_credit(from_dependent, arc.head, skip_dependent);
                        let to_dependent = argmax_credit(from_head, arc.dependent, skip_head);
                        for &r in &arc.labels {
                            credits[b].add(r, column, to_head, to_dependent);
                        }
                    }
                }
            }
        }
        (credits, most_attended)
    }

    /// Adds scored `sentences`' credits and most-attended words to the totals and keeps
    /// them per sentence (for the intervals and `attended`).
    fn keep(
        &mut self,
        sentences: &[(usize, Vec<ScoredArc>)],
        credits: Vec<SentenceCredits>,
        most_attended: Vec<Vec<u16>>,
    ) {
        for sentence in &credits {
            for (r, arcs, offsets, to_head, to_dependent) in sentence.per_label() {
                self.arcs[r] += arcs;
                for &offset in offsets {
                    *self.offsets[r].entry(offset).or_insert(0) += 1;
                }
                for (sum, credit) in self.dependent_to_head[r].iter_mut().zip(to_head) {
                    *sum += credit;
                }
                for (sum, credit) in self.head_to_dependent[r].iter_mut().zip(to_dependent) {
                    *sum += credit;
                }
            }
        }
        self.total_arcs += sentences.iter().map(|(_, arcs)| arcs.len()).sum::<usize>();
        self.sentences += sentences.len();
        self.per_sentence.extend(credits);
        self.most_attended.extend(most_attended);
        self.arc_labels.extend(sentences.iter().map(|(_, arcs)| {
            arcs.iter()
                .map(|arc| arc.labels.clone())
                .collect::<Vec<_>>()
        }));
    }

    /// The labels met, in order.
    pub fn labels(&self) -> &[String] {
        &self.labels
    }

    /// Heads per layer.
    pub fn n_heads(&self) -> usize {
        self.n_heads
    }

    /// Label `label`'s counts so far, for a measure that chooses on one set of sentences and
    /// scores on another ([`crate::measures::relations_over_training`]); `None` for a label not met.
    pub fn label_counts(&self, label: &str) -> Option<LabelCounts<'_>> {
        let r = self.labels.iter().position(|l| l == label)?;
        Some(LabelCounts {
            arcs: self.arcs[r],
            dependent_to_head: &self.dependent_to_head[r],
            head_to_dependent: &self.head_to_dependent[r],
            offsets: &self.offsets[r],
        })
    }

    /// Label `label`'s counts in each sentence, in the order the sentences were counted
    /// (zero arcs where a sentence has none of it); `None` for a label not met. What a
    /// Multi-Bootstrap over sentences resamples.
    pub fn label_counts_per_sentence(&self, label: &str) -> Option<Vec<SentenceLabelCounts>> {
        let r = self.labels.iter().position(|l| l == label)?;
        let columns = self.n_layers * self.n_heads;
        Some(
            self.per_sentence
                .iter()
                .map(|sentence| {
                    sentence
                        .per_label()
                        .find(|(label, ..)| *label == r)
                        .map_or_else(
                            || SentenceLabelCounts {
                                arcs: 0,
                                dependent_to_head: vec![0.0; columns],
                                head_to_dependent: vec![0.0; columns],
                                offsets: vec![],
                            },
                            |(_, arcs, offsets, to_head, to_dependent)| SentenceLabelCounts {
                                arcs,
                                dependent_to_head: to_head.to_vec(),
                                head_to_dependent: to_dependent.to_vec(),
                                offsets: offsets.to_vec(),
                            },
                        )
                })
                .collect(),
        )
    }

    /// Each label with arcs and its best head in each direction: what a second rule adds to
    /// [`RelationHits::scores`]'s (no intervals, no most-attended words).
    pub fn best_heads(&self) -> Vec<(String, BestHeads)> {
        (0..self.labels.len())
            .filter(|r| self.arcs[*r] > 0)
            .map(|r| (self.labels[r].clone(), self.label_scores(r).2))
            .collect()
    }

    /// Label `r`'s every head's scores, its baseline and its best heads.
    fn label_scores(&self, r: usize) -> (Vec<HeadRelationScore>, Baseline, BestHeads) {
        let arcs = self.arcs[r] as f64;
        let heads: Vec<HeadRelationScore> = (0..self.n_layers * self.n_heads)
            .map(|column| HeadRelationScore {
                id: HeadId::from_flat_index(column, self.n_heads),
                dependent_to_head: self.dependent_to_head[r][column] / arcs,
                head_to_dependent: self.head_to_dependent[r][column] / arcs,
            })
            .collect();
        let baseline = best_offset(&self.offsets[r], self.arcs[r]);
        let best = BestHeads {
            dependent_to_head: best_head(&heads, baseline, |h| h.dependent_to_head),
            head_to_dependent: best_head(&heads, baseline, |h| h.head_to_dependent),
        };
        (heads, baseline, best)
    }

    /// The fractions: per relation with arcs, every head's scores, the baseline and the best
    /// heads.
    pub fn scores(&self) -> Relations {
        let relations = (0..self.labels.len())
            .filter(|r| self.arcs[*r] > 0)
            .map(|r| {
                let (heads, baseline, best) = self.label_scores(r);
                let column = |b: &BestHead| b.id.flat_index(self.n_heads);
                let best_columns = [
                    column(&best.dependent_to_head),
                    column(&best.head_to_dependent),
                ];
                let intervals =
                    relation_intervals(&self.per_sentence, r, baseline.offset, best_columns);
                let attended = Some(self.attended(r, best_columns));
                RelationScores {
                    relation: self.labels[r].clone(),
                    arcs: self.arcs[r],
                    baseline,
                    heads,
                    best,
                    intervals,
                    clark_rule: None,
                    attended,
                }
            })
            .collect();
        Relations {
            sentences: self.sentences,
            arcs: self.total_arcs,
            relations,
            masking: None,
            too_long: 0,
        }
    }

    /// The most-attended word of head `columns[0]` from the dependent and of head
    /// `columns[1]` from the head word, on every arc of label `r` in order.
    fn attended(&self, r: usize, columns: [usize; 2]) -> AttendedWords {
        let all = self.n_layers * self.n_heads;
        let mut words = AttendedWords {
            dependent_to_head: vec![],
            head_to_dependent: vec![],
        };
        for (labels, attended) in self.arc_labels.iter().zip(&self.most_attended) {
            for (a, arc_labels) in labels.iter().enumerate() {
                if arc_labels.contains(&r) {
                    let cell = |c: usize, d: usize| attended[(a * all + c) * 2 + d];
                    words.dependent_to_head.push(cell(columns[0], 0));
                    words.head_to_dependent.push(cell(columns[1], 1));
                }
            }
        }
        words
    }
}

/// Scores every head of one batch: [`RelationHits::add`] then [`RelationHits::scores`].
/// `patterns`: one per layer, `[batch, heads, seq, seq]`.
pub fn score_relations(patterns: &[HostTensor], sentences: &[ParsedSentence]) -> Relations {
    let n_heads = patterns.first().map_or(0, |p| p.shape[1]);
    let mut hits = RelationHits::new(patterns.len(), n_heads);
    hits.add(patterns, sentences);
    hits.scores()
}

/// Most treebank sentences scored: the probe's memory bound aside, a treebank's whole
/// development set (UD English EWT's has 2001 sentences) in a minute or two on a CPU.
pub const MAX_TREEBANK_SENTENCES: usize = 4096;

/// Runs the model on `count` of the task's parsed sentences (seeded from the run's seed,
/// apart from the probe; [`RELATION_SENTENCES`] unless `inspect --relation-sentences` says
/// otherwise), or on the first `count` (at most [`MAX_TREEBANK_SENTENCES`]) of the treebank
/// an imported model is probed with, read as the model reads ([`crate::load::reading::Reading::relation_sentences`]:
/// an imported model's sentences over its positions are left out and counted), and scores
/// every head on its word-level attention. With `mask_fraction`, the sentences are masked as
/// in training ([`crate::measures::relations::masks`]). Returns the scores and the sentences,
/// whole; `None` for tasks without parses.
pub fn measure_relations(
    context: MeasureContext,
    count: Option<usize>,
    mask_fraction: Option<f64>,
) -> Result<Option<(Relations, ReadSentences)>, ReadingError> {
    let MeasureContext {
        model,
        reading,
        task,
        seed,
        device,
        ..
    } = context;
    let counts = (
        count.unwrap_or(RELATION_SENTENCES),
        count.unwrap_or(MAX_TREEBANK_SENTENCES),
    );
    let seeded = mix_seed(seed, RELATION_STREAM);
    let Some(sentences) = reading.relation_sentences(task, counts, seeded)? else {
        return Ok(None);
    };
    // What the model reads: the sentences, or a copy with the masked words hidden (the
    // sentences returned stay whole, for measures that mask words of their own).
    let (masking, masked);
    let read = match mask_fraction {
        Some(fraction) => {
            let mask = reading.mask()?;
            let lengths: Vec<usize> = sentences.trees().iter().map(|t| t.words.len()).collect();
            let masks = training_masks(&lengths, fraction, seed);
            masking = Some(RelationMasking {
                fraction,
                masked: masked_positions(&masks),
            });
            masked = sentences.masked(&masks, mask);
            &masked
        }
        None => {
            masking = None;
            &sentences
        }
    };
    let (layers, heads) = (model.n_layers(), model.n_heads());
    let mut counted = InOrder::new(RelationHits::new(layers, heads), read.trees());
    let excluded = RelationHits::with_rule(layers, heads, SelfAttention::Excluded);
    let mut excluded = InOrder::new(excluded, read.trees());
    read.each_chunk(model, device, |patterns, rows, first| {
        counted.add_rows_at(patterns, rows, first);
        excluded.add_rows_at(patterns, rows, first);
    });
    let mut relations = counted.finish().scores();
    relations.set_clark_rule(excluded.finish().best_heads());
    relations.masking = masking;
    relations.too_long = sentences.too_long();
    Ok(Some((relations, sentences)))
}

/// Credit for `target` being the most-attended position of `row` (position `skip` left
/// out, when given): `1/k` when it is one of `k` positions tied for the largest weight, else
/// 0 (see the module doc).
fn argmax_credit(row: &[f32], target: usize, skip: Option<usize>) -> f64 {
    let weights = || {
        row.iter()
            .enumerate()
            .filter(move |(i, _)| Some(*i) != skip)
            .map(|(_, &p)| p)
    };
    let max = weights().fold(f32::NEG_INFINITY, f32::max);
    // A NaN weight is never the maximum (`f32::max` skips NaN, and NaN != max).
    if Some(target) == skip || row[target] != max {
        return 0.0;
    }
    let ties = weights().filter(|&p| p == max).count();
    1.0 / ties as f64
}

/// The position of `row`'s largest weight (position `skip` left out, when given), the first
/// of any that tie (NaN never counts).
fn first_argmax(row: &[f32], skip: Option<usize>) -> u16 {
    let weights = || row.iter().enumerate().filter(|(i, _)| Some(*i) != skip);
    let max = weights().map(|(_, &p)| p).fold(f32::NEG_INFINITY, f32::max);
    weights().find(|(_, p)| **p == max).map_or(0, |(i, _)| i) as u16
}

/// The offset shared by the most arcs, with its fraction; ties go to the smaller
/// `|offset|`, then the smaller offset.
pub(crate) fn best_offset(offsets: &BTreeMap<i64, usize>, arcs: usize) -> Baseline {
    let (offset, count) = offsets
        .iter()
        .max_by(|a, b| {
            a.1.cmp(b.1)
                .then(b.0.abs().cmp(&a.0.abs()))
                .then(b.0.cmp(a.0))
        })
        .map_or((0, 0), |(&o, &c)| (o, c));
    Baseline {
        offset,
        score: count as f64 / arcs.max(1) as f64,
    }
}

/// The head with the highest `score` (the first, layer-major, on ties).
fn best_head(
    heads: &[HeadRelationScore],
    baseline: Baseline,
    score: impl Fn(&HeadRelationScore) -> f64,
) -> BestHead {
    let best = heads
        .iter()
        .fold(None::<&HeadRelationScore>, |best, h| match best {
            Some(b) if score(b) >= score(h) => Some(b),
            _ => Some(h),
        });
    best.map_or(
        BestHead {
            id: HeadId::new(0, 0),
            score: 0.0,
            beats_baseline: false,
            drop_on_relation: None,
            drop_elsewhere: None,
            resample_drop_on_relation: None,
            resample_drop_elsewhere: None,
            loss_rise_on_relation: None,
            loss_rise_elsewhere: None,
            resample_loss_rise_on_relation: None,
            resample_loss_rise_elsewhere: None,
            words_on_relation: None,
        },
        |h| BestHead {
            id: h.id,
            score: score(h),
            beats_baseline: score(h) > baseline.score,
            drop_on_relation: None,
            drop_elsewhere: None,
            resample_drop_on_relation: None,
            resample_drop_elsewhere: None,
            loss_rise_on_relation: None,
            loss_rise_elsewhere: None,
            resample_loss_rise_on_relation: None,
            resample_loss_rise_elsewhere: None,
            words_on_relation: None,
        },
    )
}

/// [`RelationHits`] of sentences read out of order, counted in their own order.
///
/// A treebank's sentences are read in chunks of similar length
/// ([`crate::load::sentences::PieceSentences::each_chunk`]), since a chunk is padded to its
/// longest sentence: read in file order, EWT's test set pads to nearly three times its
/// pieces. `InOrder` scores each chunk's rows as they come and holds their credits until
/// every sentence before them is counted, so the totals are added in the sentences' order
/// and `relations.json` is what reading them in order gives, byte for byte. The labels are
/// registered from the trees in their order first, so they keep their order too.
pub struct InOrder {
    hits: RelationHits,
    /// Every sentence's number of words and scored arcs, in order.
    scored: Vec<(usize, Vec<ScoredArc>)>,
    /// Sentences scored before one of those ahead of them: credits and most-attended words.
    waiting: BTreeMap<usize, (SentenceCredits, Vec<u16>)>,
    /// The first sentence not counted yet.
    next: usize,
}

impl InOrder {
    /// Counting `trees` into `hits`, their labels registered in order.
    pub fn new(mut hits: RelationHits, trees: &[TreebankSentence]) -> Self {
        let scored = hits.score_trees(trees);
        Self {
            hits,
            scored,
            waiting: BTreeMap::new(),
            next: 0,
        }
    }

    /// Scores sentences `rows` (indices into the trees, in the patterns' row order) against
    /// `patterns` (one per layer, `[rows, heads, seq, seq]`, words from position `first`),
    /// and counts every sentence whose predecessors are all counted.
    pub fn add_rows_at(&mut self, patterns: &[HostTensor], rows: &[usize], first: usize) {
        let sentences: Vec<&(usize, Vec<ScoredArc>)> =
            rows.iter().map(|&i| &self.scored[i]).collect();
        let (credits, most_attended) = self.hits.credit(patterns, &sentences, first);
        for ((&row, credit), attended) in rows.iter().zip(credits).zip(most_attended) {
            assert!(
                row >= self.next && self.waiting.insert(row, (credit, attended)).is_none(),
                "relations: sentence {row} read twice"
            );
        }
        while let Some((credit, attended)) = self.waiting.remove(&self.next) {
            let sentence = std::slice::from_ref(&self.scored[self.next]);
            self.hits.keep(sentence, vec![credit], vec![attended]);
            self.next += 1;
        }
    }

    /// The counts, every sentence read.
    ///
    /// # Panics
    /// If a sentence was never read.
    pub fn finish(self) -> RelationHits {
        assert!(
            self.next == self.scored.len() && self.waiting.is_empty(),
            "relations: {} of {} sentences read",
            self.next + self.waiting.len(),
            self.scored.len()
        );
        self.hits
    }
}

#[cfg(test)]
mod tests {
    use tasks::{Arc, Relation};

    use super::*;

    fn arc(dependent: usize, head: usize, relation: Relation) -> Arc {
        Arc {
            dependent,
            head,
            relation,
        }
    }

    /// "the big dog sees the cat": det 0 -> 2, amod 1 -> 2, nsubj 2 -> 3 (root), det 4 -> 5,
    /// dobj 5 -> 3.
    fn dog_sees_cat() -> ParsedSentence {
        ParsedSentence {
            words: vec![1, 2, 3, 4, 1, 5],
            root: 3,
            arcs: vec![
                arc(0, 2, Relation::Det),
                arc(1, 2, Relation::Amod),
                arc(2, 3, Relation::Nsubj),
                arc(4, 5, Relation::Det),
                arc(5, 3, Relation::Dobj),
            ],
        }
    }

    /// "the cat sleeps": det 0 -> 1, nsubj 1 -> 2 (root).
    fn cat_sleeps() -> ParsedSentence {
        ParsedSentence {
            words: vec![1, 5, 6],
            root: 2,
            arcs: vec![arc(0, 1, Relation::Det), arc(1, 2, Relation::Nsubj)],
        }
    }

    /// One layer's `[batch, heads, seq, seq]` pattern from `row(b, h, q) -> weights over seq`.
    fn layer(
        batch: usize,
        heads: usize,
        seq: usize,
        row: impl Fn(usize, usize, usize) -> Vec<f32>,
    ) -> HostTensor {
        let mut values = vec![];
        for b in 0..batch {
            for h in 0..heads {
                for q in 0..seq {
                    let weights = row(b, h, q);
                    assert_eq!(weights.len(), seq);
                    values.extend(weights);
                }
            }
        }
        HostTensor {
            values,
            shape: vec![batch, heads, seq, seq],
        }
    }

    fn one_hot(seq: usize, at: usize) -> Vec<f32> {
        let mut row = vec![0.0; seq];
        row[at] = 1.0;
        row
    }

    fn relation<'a>(relations: &'a Relations, name: &str) -> &'a RelationScores {
        relations
            .relations
            .iter()
            .find(|r| r.relation == name)
            .unwrap_or_else(|| panic!("no {name}"))
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    /// Head 0 sends every det dependent to its head and every other word to itself; head 1
    /// is uniform over the sentence.
    fn det_and_uniform(sentence: &ParsedSentence) -> HostTensor {
        let seq = sentence.words.len();
        layer(1, 2, seq, |_, h, q| {
            if h == 1 {
                return vec![1.0 / seq as f32; seq];
            }
            let det = sentence
                .arcs
                .iter()
                .find(|a| a.dependent == q && a.relation == Relation::Det);
            one_hot(seq, det.map_or(q, |a| a.head))
        })
    }

    #[test]
    fn a_head_along_det_scores_one_in_that_direction_only() {
        let sentence = dog_sees_cat();
        let relations = score_relations(&[det_and_uniform(&sentence)], &[sentence]);
        let det = relation(&relations, "det");
        assert_eq!(det.arcs, 2);
        assert_eq!(det.heads[0].dependent_to_head, 1.0);
        // The nouns attend to themselves, never back to their determiners.
        assert_eq!(det.heads[0].head_to_dependent, 0.0);
        assert_eq!(det.best.dependent_to_head.id.head, 0);
        assert_eq!(det.best.dependent_to_head.score, 1.0);
        // amod's dependent attends to itself: head 0 finds no amod arc.
        assert_eq!(relation(&relations, "amod").heads[0].dependent_to_head, 0.0);
        assert_eq!(relations.sentences, 1);
        assert_eq!(relations.arcs, 5);
        // Only the relations that occur, in Relation::ALL's order.
        let names: Vec<&str> = relations
            .relations
            .iter()
            .map(|r| r.relation.as_str())
            .collect();
        assert_eq!(names, ["det", "amod", "nsubj", "dobj"]);
    }

    /// "the dog near the cat sees the bird": the subject reaches its verb past `cat`, so its
    /// nsubj arc also counts in `nsubj_past_noun`; "the cat sleeps" has no noun between and
    /// does not. A head from each subject to its verb scores 1 on both; the extra category's
    /// arcs are not counted twice in the total.
    #[test]
    fn a_subject_past_a_noun_counts_in_its_own_category() {
        let past = ParsedSentence {
            words: vec![1, 2, 7, 1, 5, 4, 1, 8],
            root: 5,
            arcs: vec![
                arc(0, 1, Relation::Det),
                arc(1, 5, Relation::Nsubj),
                arc(2, 1, Relation::Prep),
                arc(3, 4, Relation::Det),
                arc(4, 2, Relation::Pobj),
                arc(6, 7, Relation::Det),
                arc(7, 5, Relation::Dobj),
            ],
        };
        let plain = cat_sleeps();
        assert_eq!(category_names(&past, &past.arcs[1]), ["nsubj", PAST_A_NOUN]);
        assert_eq!(category_names(&plain, &plain.arcs[1]), ["nsubj"]);
        assert_eq!(
            category_names(&past, &past.arcs[6]),
            ["dobj"],
            "a dobj arc next to its verb's phrase is not"
        );
        // "the man gives the dog the cake": the direct object reaches its verb past `dog`.
        let gives = ParsedSentence {
            words: vec![1, 2, 9, 1, 3, 1, 8],
            root: 2,
            arcs: vec![
                arc(0, 1, Relation::Det),
                arc(1, 2, Relation::Nsubj),
                arc(3, 4, Relation::Det),
                arc(4, 2, Relation::Iobj),
                arc(5, 6, Relation::Det),
                arc(6, 2, Relation::Dobj),
            ],
        };
        assert_eq!(
            category_names(&gives, &gives.arcs[5]),
            ["dobj", OBJECT_PAST_A_NOUN]
        );
        assert_eq!(category_names(&gives, &gives.arcs[3]), ["iobj"]);
        // Head 0: every nsubj dependent attends to its verb, everything else to itself.
        let subject_to_verb = |sentence: &ParsedSentence| {
            let seq = sentence.words.len();
            layer(1, 1, seq, |_, _, q| {
                let nsubj = sentence
                    .arcs
                    .iter()
                    .find(|a| a.dependent == q && a.relation == Relation::Nsubj);
                one_hot(seq, nsubj.map_or(q, |a| a.head))
            })
        };
        let mut hits = RelationHits::new(1, 1);
        hits.add(&[subject_to_verb(&past)], std::slice::from_ref(&past));
        hits.add(&[subject_to_verb(&plain)], std::slice::from_ref(&plain));
        let relations = hits.scores();
        let category = relation(&relations, PAST_A_NOUN);
        assert_eq!(category.arcs, 1);
        assert_eq!(category.heads[0].dependent_to_head, 1.0);
        assert_eq!(category.baseline.offset, 4);
        assert_eq!(relation(&relations, "nsubj").arcs, 2);
        assert_eq!(relations.arcs, 7 + 2, "every arc once");
        let names: Vec<&str> = relations
            .relations
            .iter()
            .map(|r| r.relation.as_str())
            .collect();
        assert_eq!(names.last(), Some(&PAST_A_NOUN), "after the relations");
        assert!(
            !names.contains(&OBJECT_PAST_A_NOUN),
            "no such arc, no entry"
        );
    }

    #[test]
    fn uniform_attention_gives_each_arc_one_over_the_sentence_length() {
        let sentence = dog_sees_cat();
        let relations = score_relations(&[det_and_uniform(&sentence)], &[sentence]);
        for r in &relations.relations {
            assert!(close(r.heads[1].dependent_to_head, 1.0 / 6.0), "{r:?}");
            assert!(close(r.heads[1].head_to_dependent, 1.0 / 6.0), "{r:?}");
        }
    }

    #[test]
    fn ties_give_one_over_the_tied_count_and_misses_nothing() {
        assert_eq!(argmax_credit(&[0.4, 0.4, 0.2], 0, None), 0.5);
        assert_eq!(argmax_credit(&[0.4, 0.4, 0.2], 1, None), 0.5);
        assert_eq!(argmax_credit(&[0.4, 0.4, 0.2], 2, None), 0.0);
        assert_eq!(argmax_credit(&[0.1, 0.7, 0.2], 1, None), 1.0);
        assert_eq!(argmax_credit(&[f32::NAN, 0.7, 0.3], 1, None), 1.0);
        assert_eq!(argmax_credit(&[f32::NAN, 0.7, 0.3], 0, None), 0.0);
    }

    /// Issue 65, item 6, by hand. "the cat sleeps": det 0 -> 1, nsubj 1 -> 2. One head whose
    /// every word attends most to itself (0.5), then to the next word (0.3), then the rest:
    /// by headlab's rule it finds no arc from the dependent (each dependent picks itself);
    /// by Clark et al.'s, which leaves the word itself out, each dependent picks the next word,
    /// its head: det and nsubj are found. From the head word, "cat" picks "sleeps" (0.3) by
    /// Clark's rule, not "the": det head-to-dependent stays 0; "sleeps" (the last word) gives
    /// its 0.3 to "the" and 0.2 to "cat", so nsubj head-to-dependent is 0 too.
    #[test]
    fn clarks_rule_leaves_a_words_attention_to_itself_out() {
        let sentence = cat_sleeps();
        let self_then_next = layer(1, 1, 3, |_, _, q| match q {
            0 => vec![0.5, 0.3, 0.2],
            1 => vec![0.2, 0.5, 0.3],
            _ => vec![0.3, 0.2, 0.5],
        });
        let score = |rule| {
            let mut hits = RelationHits::with_rule(1, 1, rule);
            hits.add(
                std::slice::from_ref(&self_then_next),
                std::slice::from_ref(&sentence),
            );
            hits.best_heads()
        };
        let found = |best: &[(String, BestHeads)], name: &str| {
            let (_, heads) = best.iter().find(|(label, _)| label == name).unwrap();
            (heads.dependent_to_head.score, heads.head_to_dependent.score)
        };
        let counted = score(SelfAttention::Counted);
        assert_eq!(found(&counted, "det"), (0.0, 0.0));
        assert_eq!(found(&counted, "nsubj"), (0.0, 0.0));
        let excluded = score(SelfAttention::Excluded);
        assert_eq!(found(&excluded, "det"), (1.0, 0.0));
        assert_eq!(found(&excluded, "nsubj"), (1.0, 0.0));
        // A tie among the other words shares the credit; the word itself never takes it.
        assert_eq!(argmax_credit(&[0.2, 0.6, 0.2], 0, Some(1)), 0.5);
        assert_eq!(argmax_credit(&[0.2, 0.6, 0.2], 1, Some(1)), 0.0);
        assert_eq!(first_argmax(&[0.2, 0.6, 0.3], Some(1)), 2);
        assert_eq!(first_argmax(&[0.2, 0.6, 0.3], None), 1);
    }

    /// `relations.json` carries both rules: `best` by headlab's, `clark_rule` by Clark's.
    #[test]
    fn relations_carry_the_best_heads_by_both_rules() {
        let sentence = cat_sleeps();
        let pattern = layer(1, 2, 3, |_, h, q| match (h, q) {
            (0, 0) => vec![0.5, 0.3, 0.2],
            (0, 1) => vec![0.2, 0.5, 0.3],
            (0, _) => vec![0.3, 0.2, 0.5],
            (_, _) => vec![1.0 / 3.0; 3],
        });
        let mut counted = RelationHits::new(1, 2);
        let mut excluded = RelationHits::with_rule(1, 2, SelfAttention::Excluded);
        for hits in [&mut counted, &mut excluded] {
            hits.add(
                std::slice::from_ref(&pattern),
                std::slice::from_ref(&sentence),
            );
        }
        let mut relations = counted.scores();
        relations.set_clark_rule(excluded.best_heads());
        let det = relation(&relations, "det");
        // headlab's rule: head 1 (uniform) gets a third of the credit, head 0 none.
        assert_eq!(det.best.dependent_to_head.id, HeadId::new(0, 1));
        let clark = det.clark_rule.unwrap().dependent_to_head;
        assert_eq!((clark.id, clark.score), (HeadId::new(0, 0), 1.0));
        let json = serde_json::to_string(&relations).unwrap();
        assert!(json.contains("\"clark_rule\""), "{json}");
    }

    #[test]
    fn padding_is_never_the_most_attended_word() {
        // Two sentences padded to 6: "the cat sleeps" has positions 3..6 as padding.
        let (long, short) = (dog_sees_cat(), cat_sleeps());
        let seq = 6;
        let pattern = layer(2, 1, seq, |b, _, q| {
            let sentence = if b == 0 { &long } else { &short };
            let mut row = vec![0.0; seq];
            if b == 1 && q == 0 {
                // Most weight on padding; among the real words the head wins.
                row[4] = 0.8;
                row[1] = 0.15;
                row[0] = 0.05;
            } else if b == 1 && q == 1 {
                // Every real word at 0, the padding at 1: all three tie.
                row[5] = 1.0;
            } else if let Some(a) = sentence.arcs.iter().find(|a| a.dependent == q) {
                row[a.head] = 1.0;
            } else {
                row[q] = 1.0;
            }
            row
        });
        let relations = score_relations(&[pattern], &[long, short]);
        let det = relation(&relations, "det");
        assert_eq!(det.arcs, 3);
        assert_eq!(det.heads[0].dependent_to_head, 1.0);
        // nsubj: "dog" -> "sees" found, "cat" -> "sleeps" a three-way tie among real words.
        let nsubj = relation(&relations, "nsubj");
        assert!(close(
            nsubj.heads[0].dependent_to_head,
            (1.0 + 1.0 / 3.0) / 2.0
        ));
    }

    #[test]
    fn the_baseline_is_the_most_common_offset() {
        // det offsets: +2, +1 (dog_sees_cat), +1 (cat_sleeps): +1 on 2 of 3 arcs.
        // nsubj offsets: +1, +1: 2 of 2. amod: +1. dobj: -2.
        let sentences = [dog_sees_cat(), cat_sleeps()];
        let seq = 6;
        let pattern = layer(2, 1, seq, |_, _, q| one_hot(seq, q));
        let relations = score_relations(&[pattern], &sentences);
        let det = relation(&relations, "det");
        assert_eq!(det.baseline.offset, 1);
        assert!(close(det.baseline.score, 2.0 / 3.0));
        let nsubj = relation(&relations, "nsubj");
        assert_eq!((nsubj.baseline.offset, nsubj.baseline.score), (1, 1.0));
        let dobj = relation(&relations, "dobj");
        assert_eq!((dobj.baseline.offset, dobj.baseline.score), (-2, 1.0));
        // A self-attending head finds nothing and beats no baseline.
        assert_eq!(det.best.dependent_to_head.score, 0.0);
        assert!(!det.best.dependent_to_head.beats_baseline);
    }

    #[test]
    fn offset_ties_go_to_the_nearest_then_the_smaller() {
        let counts = BTreeMap::from([(-1, 2), (1, 2), (3, 2), (2, 1)]);
        assert_eq!(
            best_offset(&counts, 7),
            Baseline {
                offset: -1,
                score: 2.0 / 7.0
            }
        );
        let counts = BTreeMap::from([(-3, 2), (2, 2)]);
        assert_eq!(best_offset(&counts, 4).offset, 2);
    }

    #[test]
    fn a_head_above_the_baseline_is_marked() {
        // Head 0 finds det both ways round (dependent -> head, and head -> dependent).
        let sentence = cat_sleeps();
        let pattern = layer(1, 2, 3, |_, h, q| match (h, q) {
            (0, 0) => one_hot(3, 1),
            (0, 1) => one_hot(3, 0),
            _ => one_hot(3, 2),
        });
        let relations = score_relations(&[pattern], &[sentence]);
        let det = relation(&relations, "det");
        assert_eq!(det.baseline.score, 1.0, "one arc: its own offset");
        assert_eq!(det.best.dependent_to_head.score, 1.0);
        assert!(
            !det.best.dependent_to_head.beats_baseline,
            "1.0 is not above 1.0"
        );
        // Head 1 puts every word on "sleeps": nsubj's dependent finds it, and ties break
        // towards the first head.
        let nsubj = relation(&relations, "nsubj");
        assert_eq!(nsubj.heads[1].dependent_to_head, 1.0);
        assert_eq!(nsubj.best.dependent_to_head.id.head, 1);
    }

    #[test]
    fn counting_in_chunks_equals_counting_at_once() {
        let (a, b) = (dog_sees_cat(), cat_sleeps());
        let rows = |seq: usize| move |_: usize, h: usize, q: usize| one_hot(seq, (q + h) % seq);
        let both = layer(2, 2, 6, rows(6));
        let mut at_once = RelationHits::new(1, 2);
        at_once.add(&[both], &[a.clone(), b.clone()]);
        let mut chunked = RelationHits::new(1, 2);
        chunked.add(&[layer(1, 2, 6, rows(6))], std::slice::from_ref(&a));
        // The second chunk is shorter: its batch is padded to 3, not 6.
        chunked.add(&[layer(1, 2, 3, rows(3))], std::slice::from_ref(&b));
        // Same arcs and offsets; head scores differ only where the rows differ (q + h wraps
        // at 3 rather than 6), so compare the shared parts.
        let (x, y) = (at_once.scores(), chunked.scores());
        assert_eq!(x.sentences, y.sentences);
        assert_eq!(x.arcs, y.arcs);
        for (r, s) in x.relations.iter().zip(&y.relations) {
            assert_eq!((r.arcs, r.baseline), (s.arcs, s.baseline));
            assert_eq!(r.heads[0], s.heads[0], "head 0 attends to itself in both");
        }
    }

    /// A model that reads its task's tokens is scored through the same tree path as an
    /// imported one ([`RelationHits::add_trees_at`] on the sentences written as trees): on
    /// the grammar's own sentences (ditransitive, so both categories past a noun occur) it
    /// counts exactly what the arcs of the parsed sentences count.
    #[test]
    fn grammar_sentences_score_the_same_as_parses_and_as_trees() {
        let spec = tasks::GrammarSpec {
            ditransitive_prob: 0.5,
            ..Default::default()
        };
        let task = tasks::TaskConfig::Grammar(spec)
            .build(std::path::Path::new("."))
            .unwrap();
        let names = task.token_names().unwrap();
        let sentences = task.parsed_sentences(40, 3);
        let seq = sentences.iter().map(|s| s.words.len()).max().unwrap();
        // Attention that varies with the sentence, head and query, padding included.
        let rows = |b: usize, h: usize, q: usize| -> Vec<f32> {
            (0..seq)
                .map(|k| ((b * 7 + h * 5 + q * 3 + k * 11) % 13) as f32)
                .collect()
        };
        let patterns = [
            layer(40, 3, seq, rows),
            layer(40, 3, seq, |b, h, q| rows(q, b, h)),
        ];
        let mut parsed = RelationHits::new(2, 3);
        parsed.add(&patterns, &sentences);
        let trees: Vec<TreebankSentence> = sentences
            .iter()
            .map(|sentence| TreebankSentence::of_parsed(sentence, &names))
            .collect();
        let mut read = RelationHits::new(2, 3);
        read.add_trees_at(&patterns, &trees, 0);
        assert_eq!(parsed, read);
        let past = read.arcs[read
            .labels
            .iter()
            .position(|l| l == OBJECT_PAST_A_NOUN)
            .unwrap()];
        assert!(past > 0, "the sentences have objects past a noun");
    }

    #[test]
    fn relations_round_trip_and_give_each_head_its_scores() {
        let sentence = dog_sees_cat();
        let relations = score_relations(&[det_and_uniform(&sentence)], &[sentence]);
        let json = serde_json::to_string(&relations).unwrap();
        assert_eq!(serde_json::from_str::<Relations>(&json).unwrap(), relations);
        let head = relations.head_scores(HeadId::new(0, 0));
        assert_eq!(
            head.keys().collect::<Vec<_>>(),
            ["amod", "det", "dobj", "nsubj"]
        );
        assert_eq!(head["det"].dependent_to_head, 1.0);
        assert!(relations.head_scores(HeadId::new(3, 0)).is_empty());
    }

    mod in_order {
        use super::*;

        /// A sentence of `n` words, each word's head the next word (the last one the root).
        fn chain(n: usize, label: &str) -> TreebankSentence {
            TreebankSentence {
                sent_id: None,
                text: None,
                words: (0..n).map(|w| format!("w{w}")).collect(),
                heads: (0..n).map(|w| if w + 1 < n { w + 2 } else { 0 }).collect(),
                relations: (0..n)
                    .map(|w| {
                        if w + 1 < n {
                            label.to_string()
                        } else {
                            "root".into()
                        }
                    })
                    .collect(),
                lines: vec![],
            }
        }

        /// One layer of one head over sentences `rows` of `trees`, padded to `seq`: in an
        /// odd-numbered sentence word `q` attends to the next word (the first after the last), in
        /// an even-numbered one to itself; padding gets nothing. A row reads the same whatever
        /// its padding.
        fn pattern(trees: &[TreebankSentence], rows: &[usize], seq: usize) -> HostTensor {
            let mut values = vec![];
            for &row in rows {
                let n = trees[row].words.len();
                for q in 0..seq {
                    let mut weights = vec![0.0f32; seq];
                    if q < n {
                        weights[if row % 2 == 1 { (q + 1) % n } else { q }] = 1.0;
                    }
                    values.extend(weights);
                }
            }
            HostTensor {
                values,
                shape: vec![rows.len(), 1, seq, seq],
            }
        }

        #[test]
        fn sentences_read_out_of_order_count_as_read_in_order() {
            // Treebank labels, not the grammar's: registered as first met, "obl" (sentence 0)
            // before "nmod" (sentence 1), though sentence 1 is read last.
            let trees = vec![
                chain(3, "obl"),
                chain(5, "nmod"),
                chain(4, "obl"),
                chain(2, "nmod"),
            ];
            let mut in_file_order = RelationHits::new(1, 1);
            in_file_order.add_trees_at(&[pattern(&trees, &[0, 1, 2, 3], 5)], &trees, 0);
            // Read by length: the short ones first, in two chunks each padded to its longest.
            let mut by_length = InOrder::new(RelationHits::new(1, 1), &trees);
            by_length.add_rows_at(&[pattern(&trees, &[3, 0], 3)], &[3, 0], 0);
            by_length.add_rows_at(&[pattern(&trees, &[2, 1], 5)], &[2, 1], 0);
            let (expected, got) = (in_file_order.scores(), by_length.finish().scores());
            assert_eq!(got, expected);
            assert_eq!(got.sentences, 4);
            let score = |name: &str| {
                let relation = got.relations.iter().find(|r| r.relation == name).unwrap();
                relation.heads[0].dependent_to_head
            };
            // Sentences 1 and 3 (nmod) attend to the next word, their head: every arc found;
            // sentences 0 and 2 (obl) to themselves: none.
            assert_eq!((score("nmod"), score("obl")), (1.0, 0.0));
            let names: Vec<&str> = got.relations.iter().map(|r| r.relation.as_str()).collect();
            assert_eq!(names, ["obl", "nmod"]);
        }

        #[test]
        #[should_panic(expected = "1 of 2 sentences read")]
        fn a_sentence_never_read_is_a_bug() {
            let trees = vec![chain(3, "amod"), chain(3, "amod")];
            let mut hits = InOrder::new(RelationHits::new(1, 1), &trees);
            hits.add_rows_at(&[pattern(&trees, &[0], 3)], &[0], 0);
            hits.finish();
        }
    }
}
