//! Does a relation's best head serve that relation? Zero it and see where the model's
//! accuracy goes: on masked words that are the relation's dependents (the object nouns, for
//! `dobj`) against every other masked word. A head that tracks the arc and matters for it
//! costs more on the first; a head that tracks the arc as a side effect costs the same on
//! both. Fills `drop_on_relation` and `drop_elsewhere` of each best head in
//! `relations.json`.

use std::collections::BTreeMap;

use burn::prelude::*;
use model::{Encoder, HeadId};
use train::batch::mix_seed;
use train::tasks::{Example, ParsedSentence, Task};

use crate::measures::masked::{masked_targets, right_answers};
use crate::measures::relations::{Relations, category_names};

/// Masked examples the drops are measured on: about 2800 masked words with the default
/// grammar, some 200 of them objects.
pub const RELATION_ABLATION_EXAMPLES: usize = 2000;

/// Stream of the examples, apart from every other measure's (up to `u64::MAX - 5`).
const RELATION_ABLATION_STREAM: u64 = u64::MAX - 6;

/// Fills every best head's drops in `relations`, zeroing each best head of `model` in turn
/// on `task`'s masked examples (seeded from `seed`).
pub fn add_relation_ablation(
    relations: &mut Relations,
    task: &Task,
    model: &Encoder,
    seed: u64,
    device: &Device,
) {
    let seed = mix_seed(seed, RELATION_ABLATION_STREAM);
    let examples = task.eval_set(RELATION_ABLATION_EXAMPLES, seed);
    // Sentence i is example i unmasked: its arcs say what each masked word is.
    let sentences = task.parsed_sentences(RELATION_ABLATION_EXAMPLES, seed);
    let masked = masked_words(&examples, &sentences);
    let all_on = right_answers(model, &examples, None, device);
    let mut ablated: BTreeMap<HeadId, Vec<bool>> = BTreeMap::new();
    for relation in &mut relations.relations {
        for best in [
            &mut relation.best.dependent_to_head,
            &mut relation.best.head_to_dependent,
        ] {
            let id = HeadId::new(best.layer, best.head);
            let without = ablated
                .entry(id)
                .or_insert_with(|| right_answers(model, &examples, Some(id), device));
            let drop = |on: &dyn Fn(&[&str]) -> bool| {
                let (mut lost, mut count) = (0.0, 0usize);
                for (i, word) in masked.iter().enumerate() {
                    if on(word) {
                        lost += f64::from(u8::from(all_on[i])) - f64::from(u8::from(without[i]));
                        count += 1;
                    }
                }
                (count > 0).then(|| lost / count as f64)
            };
            let name = relation.relation.as_str();
            best.drop_on_relation = drop(&|r| r.contains(&name));
            best.drop_elsewhere = drop(&|r| !r.contains(&name));
        }
    }
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
