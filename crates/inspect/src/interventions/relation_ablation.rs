//! Does a relation's best head serve that relation? Take it out and see where the model's
//! accuracy and its loss go: on masked words that are the relation's dependents (the object
//! nouns, for `dobj`) against every other masked word. A head that tracks the arc and
//! matters for it costs more on the first; a head that tracks the arc as a side effect costs
//! the same on both. Each best head is zeroed (`drop_on_relation`, `drop_elsewhere`,
//! `loss_rise_on_relation`, `loss_rise_elsewhere` in `relations.json`) and, apart,
//! resample-ablated (the same four keys with `resample_` before them): zeroing pushes later
//! layers off their training distribution, resampling does not. The loss's rise is measured
//! beside the accuracy's drop because on a few dozen words of a label the accuracy moves a
//! word at a time, while every word's loss moves.
//!
//! A model headlab trained is measured on its task's masked examples; an imported masked-LM
//! on the first [`RELATION_ABLATION_SENTENCES`] of its relation sentences, every word masked
//! alone in all its pieces (as its other output-side measures), each masked piece counted
//! under its word's categories.

use std::cmp::Reverse;
use std::collections::{BTreeMap, VecDeque};

use burn::prelude::*;
use model::{Encoder, HeadId, HeadPatch};
use tasks::Example;
use tasks::batch::mix_seed;

use crate::interventions::ablation::{donors, resampled};
use crate::interventions::activation_patching::head_weight;
use crate::load::context::MeasureContext;
use crate::load::reading::{ReadSentences, ReadingError};
use crate::measures::masked::{MaskedAnswer, answers_with};
use crate::measures::relations::Relations;
use crate::measures::relations::categories::word_categories;

/// Masked examples the drops are measured on: about 2800 masked words with the default
/// grammar, some 200 of them objects.
pub const RELATION_ABLATION_EXAMPLES: usize = 2000;

/// Stream of the examples, apart from every other measure's (up to `u64::MAX - 5`).
const RELATION_ABLATION_STREAM: u64 = u64::MAX - 6;

/// Sentences of an imported masked-LM's relation sentences whose words are masked for the
/// drops: about 1000 masked words, 64 passes over them at most (two ablations of the best
/// head in each direction of up to 16 relations).
pub const RELATION_ABLATION_SENTENCES: usize = 128;

/// Fills every best head's drops in `relations`, taking each best head out of the model in
/// turn on masked words the model's reading gives
/// ([`crate::load::reading::Reading::masked_relation_words`]): a model headlab trained on
/// [`RELATION_ABLATION_EXAMPLES`] of its task's masked examples (seeded from the run's seed);
/// an imported masked-LM on every word of the first [`RELATION_ABLATION_SENTENCES`] of
/// `sentences` (the relation sentences, whole) masked alone in all its pieces. Each masked
/// word (each of its pieces) counts under its categories as a dependent
/// ([`word_categories`]; none for the root).
pub fn add_relation_ablation(
    relations: &mut Relations,
    context: MeasureContext,
    sentences: &ReadSentences,
) -> Result<(), ReadingError> {
    let MeasureContext {
        model,
        reading,
        task,
        seed,
        device,
        ..
    } = context;
    let draw = (
        RELATION_ABLATION_EXAMPLES,
        mix_seed(seed, RELATION_ABLATION_STREAM),
    );
    let words =
        reading.masked_relation_words(task, sentences, draw, RELATION_ABLATION_SENTENCES)?;
    // Per example: its sentence, and its masked positions' words' categories (in the order
    // of `masked_targets`).
    let (mut sentence_of, mut categories) = (vec![], vec![]);
    let mut at = 0;
    for (e, example) in words.examples.iter().enumerate() {
        let masked = example.target.iter().filter(|t| t.is_some()).count();
        let targets = &words.targets[at..at + masked];
        at += masked;
        // An example with nothing masked is never scored: a sentence of its own.
        sentence_of.push(targets.first().map_or(usize::MAX - e, |&(s, _)| s));
        let of_example: Vec<Vec<&str>> = targets
            .iter()
            .map(|&(s, w)| word_categories(&words.trees[s], w))
            .collect();
        categories.push(of_example);
    }
    // A model that reads pieces has its sentences with each word masked alone, a
    // sentence's examples side by side; resampling takes a head's output from a neighbour,
    // which must be another sentence, not the same one with its neighbouring word masked
    // (that output has seen the word the example hides). So the examples are interleaved.
    let order = interleaved(&sentence_of);
    let examples: Vec<Example> = order.iter().map(|&e| words.examples[e].clone()).collect();
    let sentence_of: Vec<usize> = order.iter().map(|&e| sentence_of[e]).collect();
    let categories: Vec<Vec<&str>> = order
        .iter()
        .flat_map(|&e| categories[e].iter().cloned())
        .collect();
    fill_drops(
        relations,
        model,
        &examples,
        &categories,
        &sentence_of,
        device,
    );
    Ok(())
}

/// Example indices in an order where neighbours come from different sentences wherever that
/// can be: at each step, the next example of the sentence with the most examples left, other
/// than the sentence just taken (ties: the sentence whose next example comes first).
/// Examples of one sentence keep their order, and examples that are each their own sentence
/// (a task's) keep theirs.
pub fn interleaved(sentence_of: &[usize]) -> Vec<usize> {
    let mut left: BTreeMap<usize, VecDeque<usize>> = BTreeMap::new();
    for (e, &sentence) in sentence_of.iter().enumerate() {
        left.entry(sentence).or_default().push_back(e);
    }
    let mut order = Vec::with_capacity(sentence_of.len());
    let mut last = None;
    while !left.is_empty() {
        // The sentence with the most examples left, ties to the one whose next example
        // comes first: examples that are each their own sentence keep their order.
        let most = |skip: Option<usize>| {
            left.iter()
                .filter(|(sentence, _)| Some(**sentence) != skip)
                .max_by_key(|(_, examples)| (examples.len(), Reverse(examples[0])))
                .map(|(&sentence, _)| sentence)
        };
        let sentence = most(last)
            .or_else(|| most(None))
            .expect("a sentence is left");
        let examples = left.get_mut(&sentence).expect("listed");
        order.push(examples.pop_front().expect("not empty"));
        if examples.is_empty() {
            left.remove(&sentence);
        }
        last = Some(sentence);
    }
    order
}

/// Fills every best head's drops in `relations` from `model`'s answers on `examples`, with
/// and without the head, each masked word counted under `categories` (one list per masked
/// position, in the order of [`crate::measures::masked::masked_targets`]).
fn fill_drops<S: AsRef<str>>(
    relations: &mut Relations,
    model: &Encoder,
    examples: &[Example],
    masked: &[Vec<S>],
    sentence_of: &[usize],
    device: &Device,
) {
    let all_on = answers_with(model, examples, device, |_, _, input| input);
    let mut ablated: BTreeMap<HeadAblation, Vec<MaskedAnswer>> = BTreeMap::new();
    for relation in &mut relations.relations {
        let name = relation.relation.as_str();
        let has = |r: &[S]| r.iter().any(|c| c.as_ref() == name);
        for best in [
            &mut relation.best.dependent_to_head,
            &mut relation.best.head_to_dependent,
        ] {
            let id = best.id;
            let mut changes = |ablation: HeadAblation| {
                let without = ablated.entry(ablation).or_insert_with(|| {
                    answers_without(model, examples, sentence_of, ablation, device)
                });
                let on_relation = Change::over(&all_on, without, masked, |r| has(r));
                let elsewhere = Change::over(&all_on, without, masked, |r| !has(r));
                (on_relation, elsewhere)
            };
            let (on, elsewhere) = changes(HeadAblation::Zero(id));
            best.words_on_relation = Some(on.words);
            (best.drop_on_relation, best.drop_elsewhere) = (on.accuracy(), elsewhere.accuracy());
            (best.loss_rise_on_relation, best.loss_rise_elsewhere) = (on.loss(), elsewhere.loss());
            let (on, elsewhere) = changes(HeadAblation::Resample(id));
            (best.resample_drop_on_relation, best.resample_drop_elsewhere) =
                (on.accuracy(), elsewhere.accuracy());
            (
                best.resample_loss_rise_on_relation,
                best.resample_loss_rise_elsewhere,
            ) = (on.loss(), elsewhere.loss());
        }
    }
}

/// What taking a head out changed on a set of masked words: the accuracy lost and the
/// cross-entropy gained, summed over the words, and how many words.
#[derive(Debug, Clone, Copy, Default)]
struct Change {
    accuracy_lost: f64,
    loss_gained: f64,
    words: usize,
}

impl Change {
    /// The change over the masked words whose categories pass `on`: `all_on` the answers
    /// with every head, `without` those with the head taken out, `masked` each word's
    /// categories (all three in the order of the masked words).
    fn over<S>(
        all_on: &[MaskedAnswer],
        without: &[MaskedAnswer],
        masked: &[Vec<S>],
        on: impl Fn(&[S]) -> bool,
    ) -> Self {
        let mut change = Self::default();
        for ((before, after), categories) in all_on.iter().zip(without).zip(masked) {
            if on(categories) {
                change.accuracy_lost +=
                    f64::from(u8::from(before.right)) - f64::from(u8::from(after.right));
                change.loss_gained += after.loss - before.loss;
                change.words += 1;
            }
        }
        change
    }

    /// The mean accuracy lost per word (None over no word).
    fn accuracy(self) -> Option<f64> {
        (self.words > 0).then(|| self.accuracy_lost / self.words as f64)
    }

    /// The mean cross-entropy gained per word, in nats (None over no word).
    fn loss(self) -> Option<f64> {
        (self.words > 0).then(|| self.loss_gained / self.words as f64)
    }
}

/// How one head is taken out of the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum HeadAblation {
    /// Its output set to 0.
    Zero(HeadId),
    /// Its output on each sentence replaced by its output on another sentence of the same
    /// batch ([`donors`]), as [`super::ablation`] resamples.
    Resample(HeadId),
}

/// Per masked word (in the order of [`crate::measures::masked::masked_targets`]): `model`'s
/// answer without the head `ablation` takes out, each example's sentence in `sentence_of`
/// (resampling takes a head's output from another sentence: [`donors`]).
fn answers_without(
    model: &Encoder,
    examples: &[Example],
    sentence_of: &[usize],
    ablation: HeadAblation,
    device: &Device,
) -> Vec<MaskedAnswer> {
    answers_with(
        model,
        examples,
        device,
        |first, batch, input| match ablation {
            HeadAblation::Zero(id) => input.head_mask(model.head_mask_keeping(|h| h != id, device)),
            HeadAblation::Resample(id) => {
                let [sequences, _] = batch.tokens.dims();
                let donors = donors(&sentence_of[first..first + sequences]);
                let (_, cache) = model.forward_with_cache(batch.encoder_input());
                // [batch, seq, heads, d_head]: the head's outputs, each from its donor sentence.
                let values = resampled(cache.layers[id.layer].head_outputs.clone(), &donors);
                let weight = head_weight(id, None, 1, model.n_heads(), device);
                input.head_patch(id.layer, HeadPatch { values, weight })
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interleaving_by_hand() {
        // Sentence 0 has three examples, 1 two, 2 one: the fullest other sentence each time,
        // ties to the one whose next example comes first.
        assert_eq!(interleaved(&[0, 0, 0, 1, 1, 2]), vec![0, 3, 1, 4, 2, 5]);
        assert_eq!(interleaved(&[2, 2, 1, 0]), vec![0, 2, 1, 3]);
        // Every example its own sentence, whatever the ids: the order is kept.
        assert_eq!(interleaved(&[9, 3, usize::MAX, 4]), vec![0, 1, 2, 3]);
    }

    #[test]
    fn interleaved_sentences_never_sit_side_by_side_and_keep_their_word_order() {
        // Sentences of 1 to 17 words, as the treebank's examples come: sentence by sentence.
        let sentence_of: Vec<usize> = (0..40)
            .flat_map(|s| std::iter::repeat_n(s, 1 + (s * 7) % 17))
            .collect();
        let order = interleaved(&sentence_of);
        let mut sorted = order.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..sentence_of.len()).collect::<Vec<_>>());
        for pair in order.windows(2) {
            assert_ne!(sentence_of[pair[0]], sentence_of[pair[1]], "{pair:?}");
        }
        for sentence in 0..40 {
            let own: Vec<usize> = order
                .iter()
                .copied()
                .filter(|&e| sentence_of[e] == sentence)
                .collect();
            assert!(own.windows(2).all(|w| w[0] < w[1]), "{own:?}");
        }
        // So every batch's donors, however the examples are cut into batches, are from
        // another sentence.
        for batch in order.chunks(64) {
            let of: Vec<usize> = batch.iter().map(|&e| sentence_of[e]).collect();
            for (i, d) in donors(&of).into_iter().enumerate() {
                assert_ne!(of[i], of[d]);
            }
        }
    }
}
