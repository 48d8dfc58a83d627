//! Subject-verb agreement across attractors (Linzen et al. 2016, "Assessing the ability of
//! LSTMs to learn syntax-sensitive dependencies"): in "the keys to the cabinet *are*", the
//! verb agrees with `keys`, not with `cabinet`, the noun nearest it. A model that finds the
//! subject through the parse gets the verb's number right whatever the attractor's number;
//! one that reads the nearest noun gets it wrong when the attractor's number differs.
//! `agreement.json` (word tasks).
//!
//! On the task's parsed sentences, every verb whose subject is a noun is masked alone (one
//! verb per example, every other word shown) and the model's two forms of that verb compared:
//! agreement is right when the form of the right number gets the higher logit. Verbs are
//! split by the attractor, the noun nearest the verb between it and its subject: `none`,
//! `same` number as the subject, or `different`. Word accuracy (the most probable word is the
//! verb itself) is given beside it. An imported masked-LM reads the same sentences as its
//! word pieces.

use crate::load::context::MeasureContext;
use crate::load::reading::ReadingError;
use run::tensor_file::HostTensor;
use serde::{Deserialize, Serialize};
use tasks::batch::{Batch, mix_seed};
use tasks::{Example, ParsedSentence, Relation, Task, WordClass};

/// Sentences drawn: with the default grammars about 1600 verbs with a noun subject, some
/// 250 of them past an attractor.
pub const AGREEMENT_SENTENCES: usize = 1000;

/// Stream of the sentences, apart from every other measure's (up to `u64::MAX - 6`).
const AGREEMENT_STREAM: u64 = u64::MAX - 7;

/// Sequences per forward pass.
const BATCH: usize = 64;

/// `agreement.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Agreement {
    /// Sentences drawn.
    pub sentences: usize,
    /// Per kind of attractor: `none`, `same`, `different`, in that order.
    pub cases: Vec<AttractorCase>,
    /// For an imported masked-LM: verbs left out because the verb or its other form is not
    /// one piece of the vocabulary, or the sentence is too long
    /// ([`crate::load::piece_pairs::mask_in_pieces`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verbs_left_out: Option<usize>,
}

/// The verbs of one kind of attractor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttractorCase {
    /// `none`, `same` or `different`.
    pub attractor: Attractor,
    /// Verbs counted.
    pub verbs: usize,
    /// Fraction whose right-number form has the higher logit.
    pub agreement: f64,
    /// Its standard error, `sqrt(p (1 - p) / verbs)`.
    pub agreement_standard_error: f64,
    /// Fraction whose most probable word is the verb itself.
    pub word_accuracy: f64,
}

/// The noun nearest a verb between it and its subject, by its number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Attractor {
    /// No noun between subject and verb.
    None,
    /// The nearest one has the subject's number.
    Same,
    /// The nearest one has the other number: the case that tells.
    Different,
}

impl Attractor {
    /// Every kind, in report order.
    pub const ALL: [Attractor; 3] = [Attractor::None, Attractor::Same, Attractor::Different];

    /// The name in files: `none`, `same`, `different`.
    pub fn name(self) -> &'static str {
        match self {
            Attractor::None => "none",
            Attractor::Same => "same",
            Attractor::Different => "different",
        }
    }
}

/// One verb to test: its sentence, its position, the right and the wrong form.
#[derive(Debug, Clone, PartialEq)]
pub struct AgreementItem {
    /// The sentence with the verb masked; its target is the verb alone.
    pub example: Example,
    /// The verb's position.
    pub position: usize,
    /// The verb as written (the right number).
    pub right: u32,
    /// The same verb in the other number.
    pub wrong: u32,
    /// What lies between the verb and its subject.
    pub attractor: Attractor,
}

/// Every verb of `sentence` whose subject is a noun, masked alone, with its attractor.
pub fn agreement_items(task: &Task, sentence: &ParsedSentence) -> Vec<AgreementItem> {
    let noun_number = |position: usize| {
        let word = sentence.words[position];
        (task.word_class(word) == Some(WordClass::Noun))
            .then(|| task.inflection(word).map(|i| i.plural))
            .flatten()
    };
    sentence
        .arcs
        .iter()
        .filter(|arc| arc.relation == Relation::Nsubj && arc.dependent < arc.head)
        .filter_map(|arc| {
            let subject = noun_number(arc.dependent)?;
            let verb = sentence.words[arc.head];
            let inflection = task.inflection(verb)?;
            let attractor = match (arc.dependent + 1..arc.head).rev().find_map(noun_number) {
                None => Attractor::None,
                Some(number) if number == subject => Attractor::Same,
                Some(_) => Attractor::Different,
            };
            let mut input = sentence.words.clone();
            input[arc.head] = Task::MASK_TOKEN;
            let mut target = vec![None; input.len()];
            target[arc.head] = Some(verb);
            Some(AgreementItem {
                example: Example { input, target },
                position: arc.head,
                right: verb,
                wrong: inflection.other_number,
                attractor,
            })
        })
        .collect()
}

/// Agreement per kind of attractor on the task's sentences seeded from the run's seed, read
/// as the model reads them ([`crate::load::reading::Reading::mask_word`]): for an imported
/// masked-LM each sentence as its pieces with the verb one `[MASK]`, the two forms compared
/// as pieces, a verb kept where it and its other form are each one piece spelled as the word
/// (the rest counted in `verbs_left_out`). `None` for tasks without a parse.
pub fn agreement(context: MeasureContext) -> Result<Option<Agreement>, ReadingError> {
    let (Some(items), Some(names)) = (task_items(context), context.task.token_names()) else {
        return Ok(None);
    };
    let reading = context.reading;
    let mut read = vec![];
    for item in &items {
        let at = (item.position, item.right);
        let masked = reading.mask_word(&item.example, &names, at)?;
        if let (Some(masked), Some(wrong)) = (masked, reading.answer_id(&names, item.wrong)) {
            read.push(AgreementItem {
                example: masked.example,
                position: masked.position,
                right: masked.answer,
                wrong,
                attractor: item.attractor,
            });
        }
    }
    let left_out = items.len() - read.len();
    Ok(Some(Agreement {
        sentences: AGREEMENT_SENTENCES,
        cases: score_items(context, &read),
        verbs_left_out: reading.may_leave_words_out().then_some(left_out),
    }))
}

/// Every verb with a noun subject in the task's agreement sentences; `None` for tasks
/// without a parse.
fn task_items(context: MeasureContext) -> Option<Vec<AgreementItem>> {
    let MeasureContext { task, seed, .. } = context;
    let sentences = task.parsed_sentences(AGREEMENT_SENTENCES, mix_seed(seed, AGREEMENT_STREAM));
    (!sentences.is_empty()).then(|| {
        sentences
            .iter()
            .flat_map(|sentence| agreement_items(task, sentence))
            .collect()
    })
}

/// Each kind of attractor's agreement and word accuracy on `items`.
fn score_items(context: MeasureContext, items: &[AgreementItem]) -> Vec<AttractorCase> {
    let MeasureContext { model, device, .. } = context;
    // Per item: (right form beats wrong form, most probable word is the verb).
    let mut scored = Vec::with_capacity(items.len());
    for chunk in items.chunks(BATCH) {
        let examples: Vec<Example> = chunk.iter().map(|i| i.example.clone()).collect();
        let batch = Batch::new(&examples, device);
        let logits = model.forward_input(batch.encoder_input()); // [batch, seq, classes]
        let [_, seq, classes] = logits.dims();
        let predicted = HostTensor::of(logits.clone().argmax(2).squeeze_dim::<2>(2).float()).values;
        let logits = HostTensor::of(logits).values;
        for (b, item) in chunk.iter().enumerate() {
            let at = (b * seq + item.position) * classes;
            let beats = logits[at + item.right as usize] > logits[at + item.wrong as usize];
            let word_right = predicted[b * seq + item.position] as u32 == item.right;
            scored.push((beats, word_right));
        }
    }
    Attractor::ALL
        .iter()
        .map(|&attractor| {
            let of_kind: Vec<(bool, bool)> = items
                .iter()
                .zip(&scored)
                .filter(|(item, _)| item.attractor == attractor)
                .map(|(_, &s)| s)
                .collect();
            let verbs = of_kind.len();
            let fraction = |f: fn(&(bool, bool)) -> bool| {
                of_kind.iter().filter(|s| f(s)).count() as f64 / verbs.max(1) as f64
            };
            let agreement = fraction(|s| s.0);
            AttractorCase {
                attractor,
                verbs,
                agreement,
                agreement_standard_error: (agreement * (1.0 - agreement) / verbs.max(1) as f64)
                    .sqrt(),
                word_accuracy: fraction(|s| s.1),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use tasks::{Arc, GrammarSpec, TaskConfig};

    fn task() -> Task {
        TaskConfig::Grammar(GrammarSpec::default())
            .build(Path::new("."))
            .expect("the default grammar builds")
    }

    fn id(task: &Task, word: &str) -> u32 {
        let names = task.token_names().expect("a word task names its tokens");
        names
            .iter()
            .position(|n| n == word)
            .unwrap_or_else(|| panic!("{word} is not in the vocabulary")) as u32
    }

    /// "the dogs near the cat run": subject `dogs` (plural), attractor `cat` (singular).
    #[test]
    fn the_nearest_noun_between_subject_and_verb_is_the_attractor() {
        let task = task();
        let plural = |plural: bool| {
            let task = &task;
            move |w: u32| task.inflection(w).is_some_and(|i| i.plural == plural)
        };
        let (dogs, cat) = (
            first_of(&task, WordClass::Noun, plural(true)),
            first_of(&task, WordClass::Noun, plural(false)),
        );
        let run = first_of(&task, WordClass::Verb, plural(true));
        let (the, near) = (
            id(&task, "the"),
            first_of(&task, WordClass::Preposition, |_| true),
        );
        // the(0) dogs(1) near(2) the(3) cat(4) run(5)
        let sentence = ParsedSentence {
            words: vec![the, dogs, near, the, cat, run],
            root: 5,
            arcs: vec![
                Arc {
                    dependent: 0,
                    head: 1,
                    relation: Relation::Det,
                },
                Arc {
                    dependent: 1,
                    head: 5,
                    relation: Relation::Nsubj,
                },
                Arc {
                    dependent: 2,
                    head: 1,
                    relation: Relation::Prep,
                },
                Arc {
                    dependent: 3,
                    head: 4,
                    relation: Relation::Det,
                },
                Arc {
                    dependent: 4,
                    head: 2,
                    relation: Relation::Pobj,
                },
            ],
        };
        let items = agreement_items(&task, &sentence);
        assert_eq!(items.len(), 1);
        let item = &items[0];
        assert_eq!(item.attractor, Attractor::Different);
        assert_eq!((item.position, item.right), (5, run));
        assert_eq!(task.inflection(item.wrong).map(|i| i.plural), Some(false));
        assert_eq!(item.example.input[5], Task::MASK_TOKEN);
        assert_eq!(item.example.input[..5], sentence.words[..5]);
        assert_eq!(item.example.target.iter().flatten().count(), 1);

        // The same with a plural attractor, and with none.
        let cats = task.inflection(cat).unwrap().other_number;
        let mut same = sentence.clone();
        same.words[4] = cats;
        assert_eq!(agreement_items(&task, &same)[0].attractor, Attractor::Same);
        let plain = ParsedSentence {
            words: vec![the, dogs, run],
            root: 2,
            arcs: vec![
                Arc {
                    dependent: 0,
                    head: 1,
                    relation: Relation::Det,
                },
                Arc {
                    dependent: 1,
                    head: 2,
                    relation: Relation::Nsubj,
                },
            ],
        };
        assert_eq!(agreement_items(&task, &plain)[0].attractor, Attractor::None);
    }

    /// The first token of `class` that `also` accepts.
    fn first_of(task: &Task, class: WordClass, also: impl Fn(u32) -> bool) -> u32 {
        (0..task.input_vocab() as u32)
            .find(|&w| task.word_class(w) == Some(class) && also(w))
            .unwrap()
    }

    /// On generated sentences every verb with a noun subject is tested once, and all three
    /// kinds of attractor occur.
    #[test]
    fn generated_sentences_give_every_kind_of_attractor() {
        let task = task();
        let sentences = task.parsed_sentences(300, 5);
        let mut counts = [0usize; 3];
        for sentence in &sentences {
            let items = agreement_items(&task, sentence);
            let noun_subjects = sentence
                .arcs
                .iter()
                .filter(|a| {
                    a.relation == Relation::Nsubj
                        && task.word_class(sentence.words[a.dependent]) == Some(WordClass::Noun)
                })
                .count();
            assert_eq!(items.len(), noun_subjects);
            for item in items {
                counts[item.attractor as usize] += 1;
                // The two forms are one verb in both numbers.
                assert_eq!(
                    task.inflection(item.wrong).unwrap().other_number,
                    item.right
                );
            }
        }
        assert!(counts.iter().all(|&c| c > 10), "{counts:?}");
    }
}
