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

use std::collections::BTreeMap;

use burn::prelude::*;
use model::{Encoder, HeadId, HeadPatch};
use tasks::Example;
use tasks::batch::mix_seed;

use crate::interventions::ablation::rolled;
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
    // Per masked position, in the order of `masked_targets`: its word's categories.
    let categories: Vec<Vec<&str>> = words
        .targets
        .iter()
        .map(|&(s, w)| word_categories(&words.trees[s], w))
        .collect();
    fill_drops(relations, model, &words.examples, &categories, device);
    Ok(())
}

/// Fills every best head's drops in `relations` from `model`'s answers on `examples`, with
/// and without the head, each masked word counted under `categories` (one list per masked
/// position, in the order of [`crate::measures::masked::masked_targets`]).
fn fill_drops<S: AsRef<str>>(
    relations: &mut Relations,
    model: &Encoder,
    examples: &[Example],
    masked: &[Vec<S>],
    device: &Device,
) {
    let all_on = answers_with(model, examples, device, |_, input| input);
    let mut ablated: BTreeMap<HeadAblation, Vec<MaskedAnswer>> = BTreeMap::new();
    for relation in &mut relations.relations {
        let name = relation.relation.as_str();
        let has = |r: &[S]| r.iter().any(|c| c.as_ref() == name);
        for best in [
            &mut relation.best.dependent_to_head,
            &mut relation.best.head_to_dependent,
        ] {
            let id = best.id;
            best.words_on_relation = Some(masked.iter().filter(|word| has(word)).count());
            let mut changes = |ablation: HeadAblation| {
                let without = ablated
                    .entry(ablation)
                    .or_insert_with(|| answers_without(model, examples, ablation, device));
                let on_relation = Change::over(&all_on, without, masked, |r| has(r));
                let elsewhere = Change::over(&all_on, without, masked, |r| !has(r));
                (on_relation, elsewhere)
            };
            let (on, elsewhere) = changes(HeadAblation::Zero(id));
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
    /// Its output on each sentence replaced by its output on the next sentence of the
    /// same batch (the last takes the first's), as [`super::ablation`] resamples.
    Resample(HeadId),
}

/// Per masked word (in the order of [`crate::measures::masked::masked_targets`]): `model`'s
/// answer without the head `ablation` takes out.
fn answers_without(
    model: &Encoder,
    examples: &[Example],
    ablation: HeadAblation,
    device: &Device,
) -> Vec<MaskedAnswer> {
    answers_with(model, examples, device, |batch, input| match ablation {
        HeadAblation::Zero(id) => input.head_mask(model.head_mask_keeping(|h| h != id, device)),
        HeadAblation::Resample(id) => {
            let (_, cache) = model.forward_with_cache(batch.encoder_input());
            // [batch, seq, heads, d_head]: the head's outputs, one sentence over.
            let values = rolled(cache.layers[id.layer].head_outputs.clone());
            let weight = head_weight(id, None, 1, model.n_heads(), device);
            input.head_patch(id.layer, HeadPatch { values, weight })
        }
    })
}
