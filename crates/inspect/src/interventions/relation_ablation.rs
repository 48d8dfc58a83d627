//! Does a relation's best head serve that relation? Take it out and see where the model's
//! accuracy goes: on masked words that are the relation's dependents (the object nouns, for
//! `dobj`) against every other masked word. A head that tracks the arc and matters for it
//! costs more on the first; a head that tracks the arc as a side effect costs the same on
//! both. Each best head is zeroed (`drop_on_relation`, `drop_elsewhere` in `relations.json`)
//! and, apart, resample-ablated (`resample_drop_on_relation`, `resample_drop_elsewhere`):
//! zeroing pushes later layers off their training distribution, resampling does not.

use std::collections::BTreeMap;

use burn::prelude::*;
use model::{Encoder, HeadId, HeadPatch};
use tasks::batch::mix_seed;
use tasks::{Example, ParsedSentence};

use crate::interventions::ablation::rolled;
use crate::interventions::activation_patching::head_weight;
use crate::load::context::MeasureContext;
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
    let all_on = right_answers_with(model, &examples, device, |_, input| input);
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
                    .or_insert_with(|| answers_without(model, &examples, ablation, device));
                let drop = |on: &dyn Fn(&[&str]) -> bool| {
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
                (drop(&|r| r.contains(&name)), drop(&|r| !r.contains(&name)))
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
