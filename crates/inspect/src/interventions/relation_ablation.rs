//! Does a relation's best head serve that relation? Take it out and see where the model's
//! accuracy goes: on masked words that are the relation's dependents (the object nouns, for
//! `dobj`) against every other masked word. A head that tracks the arc and matters for it
//! costs more on the first; a head that tracks the arc as a side effect costs the same on
//! both. Each best head is zeroed (`drop_on_relation`, `drop_elsewhere` in `relations.json`)
//! and, apart, resample-ablated (`resample_drop_on_relation`, `resample_drop_elsewhere`):
//! zeroing pushes later layers off their training distribution, resampling does not.
//!
//! A model headlab trained is measured on its task's masked examples; an imported masked-LM
//! ([`add_relation_ablation_in_pieces`]) on the first [`RELATION_ABLATION_SENTENCES`] of
//! its relation sentences, every word masked alone in all its pieces (as its other
//! output-side measures), each masked piece counted under its word's label.

use std::collections::BTreeMap;

use burn::prelude::*;
use model::{Encoder, HeadId, HeadPatch};
use tasks::batch::mix_seed;
use tasks::{Example, ParsedSentence};

use crate::interventions::ablation::rolled;
use crate::interventions::activation_patching::head_weight;
use crate::load::context::MeasureContext;
use crate::load::masked_words::MaskedWords;
use crate::load::sentences::PieceSentences;
use crate::measures::masked::{masked_targets, right_answers_with};
use crate::measures::relations::{Relations, category_names};

/// Masked examples the drops are measured on: about 2800 masked words with the default
/// grammar, some 200 of them objects.
pub const RELATION_ABLATION_EXAMPLES: usize = 2000;

/// Stream of the examples, apart from every other measure's (up to `u64::MAX - 5`).
const RELATION_ABLATION_STREAM: u64 = u64::MAX - 6;

/// Fills every best head's drops in `relations`, zeroing each best head of `model` in turn
/// on `task`'s masked examples (seeded from `seed`).
pub fn add_relation_ablation(relations: &mut Relations, context: MeasureContext) {
    let MeasureContext {
        model,
        task,
        seed,
        device,
    } = context;
    let seed = mix_seed(seed, RELATION_ABLATION_STREAM);
    let examples = task.eval_set(RELATION_ABLATION_EXAMPLES, seed);
    // Sentence i is example i unmasked: its arcs say what each masked word is.
    let sentences = task.parsed_sentences(RELATION_ABLATION_EXAMPLES, seed);
    let masked = masked_words(&examples, &sentences);
    fill_drops(relations, model, &examples, &masked, device);
}

/// Sentences of an imported masked-LM's relation sentences whose words are masked for the
/// drops: about 1000 masked words, 64 passes over them at most (two ablations of the best
/// head in each direction of up to 16 relations).
pub const RELATION_ABLATION_SENTENCES: usize = 128;

/// [`add_relation_ablation`] for an imported masked-LM reading `sentences` (the relation
/// sentences as its pieces, unmasked) with mask piece `mask`: every word of the first
/// [`RELATION_ABLATION_SENTENCES`] masked alone, each of its pieces counted under the
/// word's label (its DEPREL; none for the root). Arcs past a noun (`nsubj_past_noun`,
/// `dobj_past_noun`) are not told apart here: their best heads' drops on the relation stay
/// null.
pub fn add_relation_ablation_in_pieces(
    relations: &mut Relations,
    context: MeasureContext,
    sentences: &PieceSentences,
    mask: u32,
) {
    let mut first = sentences.clone();
    let keep = first.len().min(RELATION_ABLATION_SENTENCES);
    first.truncate(keep);
    let words = MaskedWords::of(&first, mask);
    // Per masked piece, in the order of `masked_targets`: its word's label.
    let labels: Vec<Vec<String>> = words
        .examples
        .iter()
        .zip(&words.masked)
        .flat_map(|(example, &(s, w))| {
            let tree = &first.trees[s];
            let label: Vec<String> = (tree.heads[w] > 0)
                .then(|| tree.relations[w].clone())
                .into_iter()
                .collect();
            let pieces = example.target.iter().filter(|t| t.is_some()).count();
            std::iter::repeat_n(label, pieces)
        })
        .collect();
    fill_drops(
        relations,
        context.model,
        &words.examples,
        &labels,
        context.device,
    );
}

/// Fills every best head's drops in `relations` from `model`'s answers on `examples`, with
/// and without the head, each masked word counted under `categories` (one list per masked
/// position, in the order of [`masked_targets`]).
fn fill_drops<S: AsRef<str>>(
    relations: &mut Relations,
    model: &Encoder,
    examples: &[Example],
    masked: &[Vec<S>],
    device: &Device,
) {
    let all_on = right_answers_with(model, examples, device, |_, input| input);
    let mut ablated: BTreeMap<HeadAblation, Vec<bool>> = BTreeMap::new();
    for relation in &mut relations.relations {
        let name = relation.relation.as_str();
        for best in [
            &mut relation.best.dependent_to_head,
            &mut relation.best.head_to_dependent,
        ] {
            let id = HeadId::new(best.layer, best.head);
            let mut drops = |ablation: HeadAblation| {
                let without = ablated
                    .entry(ablation)
                    .or_insert_with(|| answers_without(model, examples, ablation, device));
                let drop = |on: &dyn Fn(&[S]) -> bool| {
                    let (mut lost, mut count) = (0.0, 0usize);
                    for (i, word) in masked.iter().enumerate() {
                        if on(word) {
                            lost +=
                                f64::from(u8::from(all_on[i])) - f64::from(u8::from(without[i]));
                            count += 1;
                        }
                    }
                    (count > 0).then(|| lost / count as f64)
                };
                let has = |r: &[S]| r.iter().any(|c| c.as_ref() == name);
                (drop(&has), drop(&|r| !has(r)))
            };
            (best.drop_on_relation, best.drop_elsewhere) = drops(HeadAblation::Zero(id));
            (best.resample_drop_on_relation, best.resample_drop_elsewhere) =
                drops(HeadAblation::Resample(id));
        }
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

/// Per masked word (in the order of [`masked_targets`]): whether `model` without the head
/// `ablation` takes out predicts it.
fn answers_without(
    model: &Encoder,
    examples: &[Example],
    ablation: HeadAblation,
    device: &Device,
) -> Vec<bool> {
    right_answers_with(model, examples, device, |batch, input| match ablation {
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

/// Per masked word, in the order of [`masked_targets`]: the categories of its arc as a
/// dependent (its relation, and `nsubj_past_noun` where it applies; none for the main verb,
/// which has no arc).
fn masked_words(examples: &[Example], sentences: &[ParsedSentence]) -> Vec<Vec<&'static str>> {
    masked_targets(examples)
        .map(|(e, position, _)| {
            let sentence = &sentences[e];
            sentence
                .arcs
                .iter()
                .find(|arc| arc.dependent == position)
                .map(|arc| category_names(sentence, arc))
                .unwrap_or_default()
        })
        .collect()
}
