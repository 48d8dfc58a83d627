//! The grammar task's tests: the spec's checks, the vocabulary, sentences and their parses,
//! masking, agreement pairs and the ceiling's inputs.

use std::collections::HashSet;

use super::*;
use crate::generators::grammar::lexicon::CLASSES;
use crate::generators::grammar::spec::{MAX_CLAUSE_DEPTH, MAX_WORDS};
use serde::Deserialize;

fn task(spec: &GrammarSpec) -> GrammarTask {
    GrammarTask::new(spec).unwrap()
}

/// [`fingerprint`] of the default grammar's first 300 sentences and examples (seed 7).
const PINNED_DEFAULT_FINGERPRINT: u64 = 0xd1b8_7109_295c_47b4;

/// Agreement pairs: only the main verb is masked and scored; the changed word is the
/// subject noun in its other number; the answers are one verb's two forms, the clean one
/// agreeing with the clean subject; the subject's determiner fits either number; the
/// rest of the sentence is one the grammar can draw (checked by reparsing nothing: every
/// other word is the clean sentence's).
#[test]
fn agreement_pairs_flip_the_subject_and_the_verb_form() {
    let task = task(&GrammarSpec::default());
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let name = |id: u32| task.names[id as usize];
    for _ in 0..200 {
        let pair = task.minimal_pair(PairKind::Answer, &mut rng).unwrap();
        let (clean, corrupted) = (&pair.clean, &pair.corrupted);
        let scored: Vec<usize> = (0..clean.target.len())
            .filter(|&i| clean.target[i].is_some())
            .collect();
        assert_eq!(scored, [pair.position]);
        assert_eq!(clean.input[pair.position], MASK);
        let [subject] = pair.changed[..] else {
            panic!("one word changes: {pair:?}")
        };
        let noun = task
            .nouns
            .iter()
            .find(|f| f.contains(&clean.input[subject]))
            .expect("the changed word is a noun");
        assert!(noun.contains(&corrupted.input[subject]));
        assert_ne!(clean.input[subject], corrupted.input[subject]);
        let verb = task
            .transitive_verbs
            .iter()
            .chain(&task.intransitive_verbs)
            .find(|f| f.contains(&pair.clean_answer))
            .expect("the answer is a verb");
        let number = usize::from(clean.input[subject] == noun[1]);
        assert_eq!(
            (pair.clean_answer, pair.corrupted_answer),
            (verb[number], verb[1 - number]),
            "{} ... {}",
            name(clean.input[subject]),
            name(pair.clean_answer)
        );
        // The determiner before the subject (if the NP has one right there or after
        // adjectives) is "the" or "some".
        let determiner = (0..subject)
            .rev()
            .find(|&i| {
                task.singular_determiners.contains(&clean.input[i])
                    || task.plural_determiners.contains(&clean.input[i])
            })
            .unwrap();
        assert!(matches!(name(clean.input[determiner]), "the" | "some"));
    }
    assert!(
        task.minimal_pair(PairKind::Route, &mut rng).is_none(),
        "grammar has no route pairs"
    );
}

/// FNV-1a over every id of `sentences` and `examples`, a fingerprint of what was drawn.
fn fingerprint(sentences: &[ParsedSentence], examples: &[Example]) -> u64 {
    let ids = sentences
        .iter()
        .flat_map(|s| s.words.iter().copied().chain(std::iter::once(u32::MAX)))
        .chain(examples.iter().flat_map(|e| {
            e.input
                .iter()
                .copied()
                .chain(e.target.iter().map(|t| t.unwrap_or(u32::MAX - 1)))
        }));
    ids.fold(0xcbf2_9ce4_8422_2325, |hash, id| {
        (hash ^ u64::from(id)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The default grammar draws exactly the sentences and masks it drew before the classed
/// lexicon and selection existed (the value pinned on 2026-11-25 from the code of then),
/// so experiment 6's runs stay reproducible.
#[test]
fn the_default_grammar_draws_what_it_always_drew() {
    let task = task(&GrammarSpec::default());
    let print = fingerprint(&task.parsed_sentences(300, 7), &task.eval_set(300, 7));
    assert_eq!(print, PINNED_DEFAULT_FINGERPRINT, "got {print:#x}");
}

/// The classed lexicon's full lists at a dose of selection, lengths hardly rejected.
fn classed(selection: f64) -> GrammarSpec {
    GrammarSpec {
        lexicon: Lexicon::Classes,
        nouns: 36,
        transitive_verbs: 12,
        intransitive_verbs: 6,
        selection,
        ..wide()
    }
}

/// Per verb lemma (index into the transitive list), how many objects of each class,
/// and how many main-clause subjects fit the verb's frame, out of how many.
fn object_counts(task: &GrammarTask, n: usize) -> (Vec<[usize; 6]>, (usize, usize)) {
    let lemma = |word: u32| task.transitive_verbs.iter().position(|f| f.contains(&word));
    let noun_class = |word: u32| {
        let index = task.nouns.iter().position(|f| f.contains(&word))?;
        Some(task.noun_classes[index])
    };
    let class_index = |class| CLASSES.iter().position(|&c| c == class).unwrap();
    let mut counts = vec![[0usize; 6]; task.transitive_verbs.len()];
    let (mut fitting_subjects, mut subjects) = (0, 0);
    for sentence in task.parsed_sentences(n, 21) {
        for arc in &sentence.arcs {
            let (dependent, head) = (sentence.words[arc.dependent], sentence.words[arc.head]);
            match arc.relation {
                Relation::Dobj => {
                    let verb = lemma(head).expect("a dobj's head is a transitive verb");
                    counts[verb][class_index(noun_class(dependent).unwrap())] += 1;
                }
                Relation::Nsubj if arc.head == sentence.root => {
                    let class = noun_class(dependent).expect("the main subject is a noun");
                    let frame = match lemma(head) {
                        Some(verb) => task.transitive_frames[verb],
                        None => {
                            let verb = task
                                .intransitive_verbs
                                .iter()
                                .position(|f| f.contains(&head))
                                .unwrap();
                            task.intransitive_frames[verb]
                        }
                    };
                    subjects += 1;
                    fitting_subjects += usize::from(frame.subject.contains(&class));
                }
                _ => {}
            }
        }
    }
    (counts, (fitting_subjects, subjects))
}

/// Selection 1: no verb ever takes an object (or a main-clause subject) outside its
/// frame. Selection 0: a verb's objects are the nouns' own distribution, a sixth of each
/// class whatever the verb (within 0.035 of 1/6 on about 1500 objects per verb).
/// Selection 0.5: the allowed share is the mixture, 0.5 + 0.5 x (the allowed classes'
/// share), within 0.05.
#[test]
fn selection_is_a_dose_of_fitting_subjects_and_objects() {
    let strict = task(&classed(1.0));
    let (counts, (fitting, subjects)) = object_counts(&strict, 20_000);
    for (verb, classes) in counts.iter().enumerate() {
        let frame = strict.transitive_frames[verb];
        for (class, &count) in CLASSES.iter().zip(classes) {
            if !frame.object.contains(class) {
                assert_eq!(count, 0, "verb {verb} took a {class:?} object");
            }
        }
        assert!(
            classes.iter().sum::<usize>() > 300,
            "verb {verb}: {classes:?}"
        );
    }
    assert_eq!(fitting, subjects, "every main-clause subject fits its verb");

    let uniform = task(&classed(0.0));
    let (counts, (fitting, subjects)) = object_counts(&uniform, 20_000);
    for (verb, classes) in counts.iter().enumerate() {
        let total: usize = classes.iter().sum();
        for &count in classes {
            let share = count as f64 / total as f64;
            assert!(
                (share - 1.0 / 6.0).abs() < 0.035,
                "verb {verb}: {classes:?}"
            );
        }
    }
    let animate_share = fitting as f64 / subjects as f64;
    assert!(
        animate_share < 0.5,
        "subjects ignore the verb: {animate_share}"
    );

    let half = task(&classed(0.5));
    let (counts, _) = object_counts(&half, 20_000);
    for (verb, classes) in counts.iter().enumerate() {
        let frame = half.transitive_frames[verb];
        let allowed: usize = CLASSES
            .iter()
            .zip(classes)
            .filter(|(c, _)| frame.object.contains(c))
            .map(|(_, n)| n)
            .sum();
        let share = allowed as f64 / classes.iter().sum::<usize>() as f64;
        let expected = 0.5 + 0.5 * frame.object.len() as f64 / 6.0;
        assert!(
            (share - expected).abs() < 0.05,
            "verb {verb}: {share} vs {expected}"
        );
    }
}

/// At full selection a ditransitive verb's indirect and direct objects are always of
/// the classes it takes; with ditransitive_prob 1 every verb with an object has two.
#[test]
fn ditransitive_verbs_select_both_objects() {
    let spec = GrammarSpec {
        ditransitive_prob: 1.0,
        ditransitive_verbs: 6,
        max_words: MAX_WORDS,
        ..classed(1.0)
    };
    let task = task(&spec);
    let (mut indirect, mut direct) = (0, 0);
    for sentence in task.parsed_sentences(2000, 4) {
        for arc in &sentence.arcs {
            let verb = sentence.words[arc.head];
            let Some(index) = task
                .ditransitive_verbs
                .iter()
                .position(|f| f.contains(&verb))
            else {
                assert_ne!(
                    arc.relation,
                    Relation::Iobj,
                    "an iobj of a non-ditransitive verb"
                );
                if arc.relation == Relation::Dobj {
                    panic!("a transitive verb at ditransitive_prob 1: {sentence:?}");
                }
                continue;
            };
            let noun = sentence.words[arc.dependent];
            let class = task
                .nouns
                .iter()
                .position(|f| f.contains(&noun))
                .map(|n| task.noun_classes[n]);
            match arc.relation {
                Relation::Iobj => {
                    indirect += 1;
                    let allowed = task.ditransitive_indirect[index];
                    assert!(allowed.contains(&class.unwrap()), "{sentence:?}");
                }
                Relation::Dobj => {
                    direct += 1;
                    let allowed = task.ditransitive_frames[index].object;
                    assert!(allowed.contains(&class.unwrap()), "{sentence:?}");
                }
                _ => {}
            }
        }
    }
    assert!(indirect > 500 && indirect == direct, "{indirect} {direct}");
}

#[test]
fn selection_needs_the_classed_lexicon_and_every_class() {
    let error = |spec: GrammarSpec| GrammarTask::new(&spec).unwrap_err().to_string();
    let message = error(GrammarSpec {
        selection: 0.5,
        ..GrammarSpec::default()
    });
    assert!(
        message.starts_with(
            "task.selection = 0.5 is out of range: expected selection = 0 \
                             with the animate lexicon"
        ),
        "{message}"
    );
    assert!(message.contains("lexicon = \"classes\""), "{message}");
    let message = error(GrammarSpec {
        nouns: 5,
        ..classed(1.0)
    });
    assert!(
        message.starts_with("task.nouns = 5 is out of range: expected 6 <= nouns <= 36"),
        "{message}"
    );
    let message = error(GrammarSpec {
        transitive_verbs: 13,
        ..classed(1.0)
    });
    assert!(message.contains("1 <= transitive_verbs <= 12"), "{message}");
    let message = error(classed(1.5));
    assert!(
        message.starts_with("task.selection = 1.5 is out of range"),
        "{message}"
    );
}

/// A spec whose length range rejects almost nothing, so that measured frequencies are
/// the grammar's own.
fn wide() -> GrammarSpec {
    GrammarSpec {
        min_words: 3,
        max_words: MAX_WORDS,
        ..GrammarSpec::default()
    }
}

/// Several specs that exercise every part of the grammar.
fn varied_specs() -> Vec<GrammarSpec> {
    vec![
        GrammarSpec::default(),
        GrammarSpec {
            clause_depth: 2,
            relative_clause_prob: 0.5,
            pp_prob: 0.4,
            adjective_prob: 0.6,
            ..wide()
        },
        GrammarSpec {
            nouns: 1,
            transitive_verbs: 1,
            intransitive_verbs: 1,
            adjectives: 1,
            prepositions: 1,
            adjective_prob: 0.9,
            plural_prob: 0.9,
            transitive_prob: 0.9,
            ..wide()
        },
        GrammarSpec {
            min_words: 7,
            max_words: 9,
            clause_depth: 3,
            ..GrammarSpec::default()
        },
        GrammarSpec {
            lexicon: Lexicon::Classes,
            nouns: 36,
            transitive_verbs: 12,
            intransitive_verbs: 6,
            selection: 1.0,
            clause_depth: 2,
            relative_clause_prob: 0.4,
            ..wide()
        },
        GrammarSpec {
            lexicon: Lexicon::Classes,
            selection: 0.5,
            ..GrammarSpec::default()
        },
        GrammarSpec {
            ditransitive_prob: 0.5,
            ditransitive_verbs: 6,
            ..GrammarSpec::default()
        },
        GrammarSpec {
            lexicon: Lexicon::Classes,
            selection: 1.0,
            ditransitive_prob: 0.6,
            ditransitive_verbs: 6,
            max_words: 20,
            ..GrammarSpec::default()
        },
    ]
}

/// What kind of word a vocabulary entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Category {
    /// `<pad>` or `<mask>`.
    Special,
    /// A determiner and the noun number it goes with (`None`: either).
    Determiner(Option<Number>),
    /// The relative pronoun `that`.
    Relative,
    Noun(Number),
    TransitiveVerb(Number),
    IntransitiveVerb(Number),
    DitransitiveVerb(Number),
    Adjective,
    Preposition,
}

/// The class of word `id`, read from the id lists the grammar draws from.
fn class_of(task: &GrammarTask, id: u32) -> Category {
    let number_in = |pairs: &[[u32; 2]]| {
        pairs
            .iter()
            .find_map(|pair| match pair.iter().position(|&w| w == id) {
                Some(0) => Some(Number::Singular),
                Some(_) => Some(Number::Plural),
                None => None,
            })
    };
    let singular = task.singular_determiners.contains(&id);
    let plural = task.plural_determiners.contains(&id);
    if id < 2 {
        Category::Special
    } else if singular || plural {
        Category::Determiner(match (singular, plural) {
            (true, true) => None,
            (true, false) => Some(Number::Singular),
            _ => Some(Number::Plural),
        })
    } else if id == task.relative_pronoun {
        Category::Relative
    } else if let Some(number) = number_in(&task.nouns) {
        Category::Noun(number)
    } else if let Some(number) = number_in(&task.transitive_verbs) {
        Category::TransitiveVerb(number)
    } else if let Some(number) = number_in(&task.intransitive_verbs) {
        Category::IntransitiveVerb(number)
    } else if let Some(number) = number_in(&task.ditransitive_verbs) {
        Category::DitransitiveVerb(number)
    } else if task.adjectives.contains(&id) {
        Category::Adjective
    } else if task.prepositions.contains(&id) {
        Category::Preposition
    } else {
        panic!("word {id} is in no list of the grammar")
    }
}

fn class(task: &GrammarTask, sentence: &ParsedSentence, position: usize) -> Category {
    class_of(task, sentence.words[position])
}

fn verb_number(class: Category) -> Option<Number> {
    match class {
        Category::TransitiveVerb(n)
        | Category::IntransitiveVerb(n)
        | Category::DitransitiveVerb(n) => Some(n),
        _ => None,
    }
}

fn noun_number(class: Category) -> Option<Number> {
    match class {
        Category::Noun(n) => Some(n),
        _ => None,
    }
}

/// The head of each position (`None` at the root).
fn heads(sentence: &ParsedSentence) -> Vec<Option<(usize, Relation)>> {
    let mut heads = vec![None; sentence.words.len()];
    for arc in &sentence.arcs {
        heads[arc.dependent] = Some((arc.head, arc.relation));
    }
    heads
}

fn dependents(sentence: &ParsedSentence, head: usize, relation: Relation) -> usize {
    sentence
        .arcs
        .iter()
        .filter(|arc| arc.head == head && arc.relation == relation)
        .count()
}

#[test]
fn parses_are_trees_rooted_at_the_main_verb() {
    for spec in varied_specs() {
        let task = task(&spec);
        for sentence in task.parsed_sentences(2000, 1) {
            let n = sentence.words.len();
            let dependents: Vec<usize> = sentence.arcs.iter().map(|a| a.dependent).collect();
            let expected: Vec<usize> = (0..n).filter(|&i| i != sentence.root).collect();
            assert_eq!(dependents, expected, "one arc per non-root word, in order");
            for arc in &sentence.arcs {
                assert!(arc.head < n && arc.head != arc.dependent, "{sentence:?}");
            }
            assert!(verb_number(class(&task, &sentence, sentence.root)).is_some());
            let heads = heads(&sentence);
            for start in 0..n {
                let mut at = start;
                let mut steps = 0;
                while let Some((head, _)) = heads[at] {
                    at = head;
                    steps += 1;
                    assert!(steps < n, "cycle from {start} in {sentence:?}");
                }
                assert_eq!(at, sentence.root);
            }
        }
    }
}

#[test]
fn relations_join_the_right_word_classes() {
    use Category::*;
    for spec in varied_specs() {
        let task = task(&spec);
        for sentence in task.parsed_sentences(2000, 2) {
            for arc in &sentence.arcs {
                let dependent = class(&task, &sentence, arc.dependent);
                let head = class(&task, &sentence, arc.head);
                let fits = match arc.relation {
                    Relation::Det => matches!((dependent, head), (Determiner(_), Noun(_))),
                    Relation::Amod => matches!((dependent, head), (Adjective, Noun(_))),
                    Relation::Nsubj => {
                        matches!(dependent, Noun(_) | Relative) && verb_number(head).is_some()
                    }
                    Relation::Dobj => matches!(
                        (dependent, head),
                        (Noun(_), TransitiveVerb(_) | DitransitiveVerb(_))
                    ),
                    Relation::Iobj => {
                        matches!((dependent, head), (Noun(_), DitransitiveVerb(_)))
                    }
                    Relation::Prep => {
                        dependent == Preposition
                            && (matches!(head, Noun(_)) || verb_number(head).is_some())
                    }
                    Relation::Pobj => matches!((dependent, head), (Noun(_), Preposition)),
                    Relation::Relcl => verb_number(dependent).is_some() && matches!(head, Noun(_)),
                };
                assert!(fits, "{arc:?} joins {dependent:?} to {head:?}");
            }
            for (position, &word) in sentence.words.iter().enumerate() {
                let count = |relation| dependents(&sentence, position, relation);
                match class_of(&task, word) {
                    Noun(_) => {
                        assert_eq!(count(Relation::Det), 1);
                        assert!(count(Relation::Amod) <= MAX_ADJECTIVES);
                    }
                    TransitiveVerb(_) => {
                        assert_eq!((count(Relation::Nsubj), count(Relation::Dobj)), (1, 1));
                    }
                    IntransitiveVerb(_) => {
                        assert_eq!((count(Relation::Nsubj), count(Relation::Dobj)), (1, 0));
                    }
                    DitransitiveVerb(_) => {
                        let counts = [Relation::Nsubj, Relation::Iobj, Relation::Dobj].map(&count);
                        assert_eq!(counts, [1, 1, 1]);
                        // The indirect object comes between the verb and the direct
                        // object: verb < iobj < dobj.
                        let of = |relation| {
                            sentence
                                .arcs
                                .iter()
                                .find(|a| a.head == position && a.relation == relation)
                                .map(|a| a.dependent)
                                .expect("counted above")
                        };
                        assert!(position < of(Relation::Iobj));
                        assert!(of(Relation::Iobj) < of(Relation::Dobj));
                    }
                    Preposition => assert_eq!(count(Relation::Pobj), 1),
                    Special => panic!("{sentence:?} holds <pad> or <mask>"),
                    Determiner(_) | Relative | Adjective => {}
                }
            }
        }
    }
}

#[test]
fn verbs_and_determiners_agree_with_their_nouns() {
    let mut checked_relative = 0;
    for spec in varied_specs() {
        let task = task(&spec);
        for sentence in task.parsed_sentences(2000, 3) {
            let heads = heads(&sentence);
            for arc in &sentence.arcs {
                let dependent = class(&task, &sentence, arc.dependent);
                let head = class(&task, &sentence, arc.head);
                match (arc.relation, dependent) {
                    (Relation::Nsubj, Category::Noun(number)) => {
                        assert_eq!(verb_number(head), Some(number), "{sentence:?}");
                    }
                    (Relation::Nsubj, Category::Relative) => {
                        // "that"'s verb agrees with the noun the clause modifies.
                        let Some((antecedent, Relation::Relcl)) = heads[arc.head] else {
                            panic!("a relative verb without relcl in {sentence:?}");
                        };
                        let antecedent = class(&task, &sentence, antecedent);
                        assert_eq!(noun_number(antecedent), verb_number(head));
                        checked_relative += 1;
                    }
                    (Relation::Det, Category::Determiner(Some(number))) => {
                        assert_eq!(noun_number(head), Some(number), "{sentence:?}");
                    }
                    (Relation::Relcl, _) => {
                        assert_eq!(verb_number(dependent), noun_number(head));
                    }
                    _ => {}
                }
            }
        }
    }
    assert!(
        checked_relative > 100,
        "only {checked_relative} relative clauses"
    );
}

#[test]
fn lengths_stay_within_the_configured_range() {
    for spec in varied_specs() {
        let task = task(&spec);
        let range = spec.min_words..=spec.max_words;
        let sentences = task.parsed_sentences(2000, 4);
        let lengths: HashSet<usize> = sentences.iter().map(|s| s.words.len()).collect();
        assert!(lengths.iter().all(|len| range.contains(len)), "{lengths:?}");
        assert!(lengths.len() >= 3.min(range.clone().count()), "{lengths:?}");
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        for _ in 0..500 {
            let example = task.sample(&mut rng);
            assert!(range.contains(&example.input.len()));
            assert_eq!(example.input.len(), example.target.len());
            assert!(example.input.len() <= task.seq_len());
        }
    }
    let default = task(&GrammarSpec::default());
    let sentences = default.parsed_sentences(4000, 5);
    let mean = sentences.iter().map(|s| s.words.len()).sum::<usize>() as f64 / 4000.0;
    assert!((6.0..=10.0).contains(&mean), "mean length {mean}");
}

/// Rejection that cannot succeed still ends, with a sentence no longer than max_words.
#[test]
fn an_unreachable_range_still_ends_within_max_words() {
    let never = GrammarSpec {
        min_words: 40,
        max_words: 41,
        adjective_prob: 0.0,
        pp_prob: 0.0,
        relative_clause_prob: 0.0,
        ..GrammarSpec::default()
    };
    let task = GrammarTask::unchecked(&never).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(6);
    let sentence = task.draw_sentence(&mut rng);
    assert!(sentence.words.len() <= 41);
    assert_eq!(
        sentence.words.len(),
        5,
        "the longest drawn: Det Noun Verb Det Noun"
    );
    let only_long = GrammarSpec {
        min_words: 3,
        max_words: 3,
        adjective_prob: 1.0,
        ..GrammarSpec::default()
    };
    let task = GrammarTask::unchecked(&only_long).unwrap();
    let sentence = task.draw_sentence(&mut rng);
    assert_eq!(sentence, task.shortest_sentence());
    assert_eq!(sentence.words.len(), 3);
}

/// `count` successes out of `trials` lie within four standard errors of `p`.
fn assert_rate(what: &str, count: usize, trials: usize, p: f64) {
    let rate = count as f64 / trials as f64;
    let se = (p * (1.0 - p) / trials as f64).sqrt();
    assert!(
        (rate - p).abs() <= 4.0 * se + 1e-9,
        "{what}: {rate:.4} over {trials}, expected {p} (se {se:.4})"
    );
}

#[test]
fn frequencies_follow_the_config() {
    let spec = GrammarSpec {
        plural_prob: 0.3,
        transitive_prob: 0.7,
        ditransitive_prob: 0.3,
        adjective_prob: 0.4,
        mask_fraction: 0.25,
        ..wide()
    };
    let task = task(&spec);
    let size = 4000;
    let sentences = task.parsed_sentences(size, 7);
    let examples = task.eval_set(size, 7);

    let subject_of_root = |s: &ParsedSentence| {
        let arc = s
            .arcs
            .iter()
            .find(|a| a.head == s.root && a.relation == Relation::Nsubj);
        arc.map(|a| class(&task, s, a.dependent))
    };
    let plural_subjects = sentences
        .iter()
        .filter(|s| subject_of_root(s) == Some(Category::Noun(Number::Plural)))
        .count();
    assert_rate("plural subjects", plural_subjects, size, spec.plural_prob);

    let transitive = sentences
        .iter()
        .filter(|s| matches!(class(&task, s, s.root), Category::TransitiveVerb(_)))
        .count();
    let ditransitive = sentences
        .iter()
        .filter(|s| matches!(class(&task, s, s.root), Category::DitransitiveVerb(_)))
        .count();
    // Among main verbs with an object, ditransitive_prob have two.
    assert_rate(
        "main verbs with an object",
        transitive + ditransitive,
        size,
        spec.transitive_prob,
    );
    assert_rate(
        "ditransitive among them",
        ditransitive,
        transitive + ditransitive,
        spec.ditransitive_prob,
    );

    // Every noun phrase draws its first adjective with adjective_prob.
    let (mut nouns, mut with_adjective) = (0, 0);
    for sentence in &sentences {
        for (position, &word) in sentence.words.iter().enumerate() {
            if matches!(class_of(&task, word), Category::Noun(_)) {
                nouns += 1;
                with_adjective += usize::from(dependents(sentence, position, Relation::Amod) > 0);
            }
        }
    }
    assert_rate(
        "nouns with an adjective",
        with_adjective,
        nouns,
        spec.adjective_prob,
    );

    // Each word is masked with mask_fraction, plus one where none was: per sentence of n
    // words, n * p + (1 - p)^n masked words are expected.
    let p = spec.mask_fraction;
    let words: usize = sentences.iter().map(|s| s.words.len()).sum();
    let masked: usize = examples
        .iter()
        .map(|e| e.target.iter().flatten().count())
        .sum();
    let expected: f64 = sentences
        .iter()
        .map(|s| {
            let n = s.words.len() as f64;
            n * p + (1.0 - p).powf(n)
        })
        .sum();
    let se = (words as f64 * p * (1.0 - p)).sqrt();
    assert!(
        (masked as f64 - expected).abs() <= 4.0 * se,
        "{masked} of {words} words masked, expected {expected:.0} (se {se:.1})"
    );

    let relations: HashSet<Relation> = sentences
        .iter()
        .flat_map(|s| s.arcs.iter().map(|a| a.relation))
        .collect();
    assert_eq!(
        relations.len(),
        Relation::ALL.len(),
        "every relation occurs"
    );
}

#[test]
fn masking_hides_words_and_targets_them() {
    let task = task(&GrammarSpec::default());
    let sentences = task.parsed_sentences(1000, 8);
    let examples = task.eval_set(1000, 8);
    assert_eq!(sentences.len(), examples.len());
    for (sentence, example) in sentences.iter().zip(&examples) {
        assert_eq!(example.input.len(), sentence.words.len());
        assert!(example.target.iter().any(Option::is_some), "nothing masked");
        for ((&input, &target), &word) in example
            .input
            .iter()
            .zip(&example.target)
            .zip(&sentence.words)
        {
            match target {
                Some(class) => assert_eq!((input, class), (MASK, word)),
                None => assert_eq!(input, word),
            }
        }
    }
    let every_word_masked = GrammarSpec {
        mask_fraction: 1.0,
        ..GrammarSpec::default()
    };
    let masked_task = GrammarTask::new(&every_word_masked).unwrap();
    for example in masked_task.eval_set(50, 8) {
        assert!(example.input.iter().all(|&t| t == MASK));
    }
}

#[test]
fn parsed_sentences_are_the_eval_sentences_unmasked() {
    for spec in varied_specs() {
        let task = task(&spec);
        for seed in [0, 9] {
            let sentences = task.parsed_sentences(300, seed);
            let examples = task.eval_set(300, seed);
            assert_eq!(sentences.len(), 300);
            for (sentence, example) in sentences.iter().zip(&examples) {
                let unmasked: Vec<u32> = example
                    .input
                    .iter()
                    .zip(&example.target)
                    .map(|(&input, target)| target.unwrap_or(input))
                    .collect();
                assert_eq!(unmasked, sentence.words);
            }
            // A prefix of a longer set is the same set: sentence i is example i.
            assert_eq!(task.parsed_sentences(100, seed), sentences[..100]);
        }
    }
}

#[test]
fn draws_are_deterministic_per_seed() {
    let task = task(&GrammarSpec::default());
    assert_eq!(task.parsed_sentences(200, 1), task.parsed_sentences(200, 1));
    assert_ne!(task.parsed_sentences(200, 1), task.parsed_sentences(200, 2));
    let samples = |seed| {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        (0..200).map(|_| task.sample(&mut rng)).collect::<Vec<_>>()
    };
    assert_eq!(samples(3), samples(3));
    assert_ne!(samples(3), samples(4));
}

/// How many relative clauses enclose each verb, at most.
fn deepest_clause(sentence: &ParsedSentence) -> usize {
    let heads = heads(sentence);
    (0..sentence.words.len())
        .map(|start| {
            let mut at = start;
            let mut depth = 0;
            while let Some((head, relation)) = heads[at] {
                depth += usize::from(relation == Relation::Relcl);
                at = head;
            }
            depth
        })
        .max()
        .unwrap_or(0)
}

#[test]
fn clause_depth_bounds_nested_relative_clauses() {
    for clause_depth in 0..=MAX_CLAUSE_DEPTH {
        let spec = GrammarSpec {
            clause_depth,
            relative_clause_prob: 0.5,
            pp_prob: 0.0,
            adjective_prob: 0.0,
            transitive_prob: 0.5,
            ..wide()
        };
        let task = task(&spec);
        let sentences = task.parsed_sentences(2000, 10);
        let deepest = sentences.iter().map(deepest_clause).max().unwrap_or(0);
        assert_eq!(deepest, clause_depth);
        let pronouns = sentences
            .iter()
            .flat_map(|s| &s.words)
            .filter(|&&w| w == task.relative_pronoun)
            .count();
        assert_eq!(pronouns == 0, clause_depth == 0);
    }
}

#[test]
fn vocabulary_has_the_configured_words() {
    let task = task(&GrammarSpec::default());
    assert_eq!(task.input_vocab(), 77);
    assert_eq!(task.output_vocab(), 77);
    assert_eq!(task.seq_len(), 16);
    let names = task.token_names();
    assert_eq!(names.len(), 77);
    assert_eq!(names[..4], ["<pad>", "<mask>", "the", "some"]);
    assert_eq!(names[10], "that");
    assert_eq!(names[11..13], ["dog", "dogs"]);
    assert_eq!(
        names.iter().collect::<HashSet<_>>().len(),
        names.len(),
        "distinct"
    );
    assert_eq!(names.iter().filter(|&n| n == "that").count(), 1);
    assert!(task.solving_patterns().is_empty());
    assert_eq!(
        task.attention_targets(&[2, 11, 3]),
        vec![Vec::<usize>::new(); 3]
    );

    let largest = GrammarSpec {
        nouns: NOUNS.len(),
        transitive_verbs: TRANSITIVE_VERBS.len(),
        intransitive_verbs: INTRANSITIVE_VERBS.len(),
        adjectives: ADJECTIVES.len(),
        prepositions: PREPOSITIONS.len(),
        ..GrammarSpec::default()
    };
    assert_eq!(
        GrammarTask::new(&largest).unwrap().input_vocab(),
        2 + 9 + 48 + 32 + 24 + 16 + 8
    );

    // Every word the grammar writes is within the configured lists.
    let used: HashSet<u32> = task
        .parsed_sentences(3000, 11)
        .iter()
        .flat_map(|s| s.words.clone())
        .collect();
    assert_eq!(used.len(), 75, "every word but <pad> and <mask> occurs");
}

/// Where a key of the spec lives, to set it to a bad value.
type Key<T> = fn(&mut GrammarSpec) -> &mut T;

#[test]
fn bad_values_are_refused_by_key() {
    let error = |spec: GrammarSpec| GrammarTask::new(&spec).unwrap_err().to_string();
    let base = GrammarSpec::default();
    assert_eq!(
        error(GrammarSpec {
            nouns: 0,
            ..base.clone()
        }),
        "task.nouns = 0 is out of range: expected 1 <= nouns <= 24, the length of the \
         built-in list"
    );
    assert!(
        error(GrammarSpec {
            nouns: 25,
            ..base.clone()
        })
        .starts_with("task.nouns = 25 ")
    );
    let counts: [(&str, Key<usize>, usize); 4] = [
        ("transitive_verbs", |s| &mut s.transitive_verbs, 16),
        ("intransitive_verbs", |s| &mut s.intransitive_verbs, 12),
        ("adjectives", |s| &mut s.adjectives, 16),
        ("prepositions", |s| &mut s.prepositions, 8),
    ];
    for (key, field, len) in counts {
        for bad in [0, len + 1] {
            let mut spec = base.clone();
            *field(&mut spec) = bad;
            let message = error(spec);
            let prefix =
                format!("task.{key} = {bad} is out of range: expected 1 <= {key} <= {len}");
            assert!(message.starts_with(&prefix), "{message}");
        }
    }
    assert_eq!(
        error(GrammarSpec {
            min_words: 2,
            ..base.clone()
        }),
        "task.min_words = 2 is out of range: expected 3 <= min_words <= 64 (the shortest \
         sentence, \"the dog sleeps\", has 3 words)"
    );
    assert_eq!(
        error(GrammarSpec {
            max_words: 3,
            ..base.clone()
        }),
        "task.max_words = 3 is out of range: expected min_words (4) <= max_words <= 64"
    );
    assert!(
        error(GrammarSpec {
            max_words: 65,
            ..base.clone()
        })
        .starts_with("task.max_words = 65")
    );
    assert_eq!(
        error(GrammarSpec {
            clause_depth: 4,
            ..base.clone()
        }),
        "task.clause_depth = 4 is out of range: expected 0 <= clause_depth <= 3"
    );
    let probabilities: [(&str, Key<f64>); 5] = [
        ("adjective_prob", |s| &mut s.adjective_prob),
        ("pp_prob", |s| &mut s.pp_prob),
        ("relative_clause_prob", |s| &mut s.relative_clause_prob),
        ("plural_prob", |s| &mut s.plural_prob),
        ("transitive_prob", |s| &mut s.transitive_prob),
    ];
    for (key, field) in probabilities {
        for bad in [-0.1, 1.5, f64::NAN] {
            let mut spec = base.clone();
            *field(&mut spec) = bad;
            assert_eq!(
                error(spec),
                format!("task.{key} = {bad} is out of range: expected 0 <= {key} <= 1")
            );
        }
    }
    for bad in [0.0, -0.5, 1.01, f64::NAN] {
        assert_eq!(
            error(GrammarSpec {
                mask_fraction: bad,
                ..base.clone()
            }),
            format!("task.mask_fraction = {bad} is out of range: expected 0 < mask_fraction <= 1")
        );
    }
}

#[test]
fn unreachable_lengths_are_refused_at_build() {
    let bare = GrammarSpec {
        adjective_prob: 0.0,
        pp_prob: 0.0,
        relative_clause_prob: 0.0,
        transitive_prob: 0.0,
        ..GrammarSpec::default()
    };
    // Every sentence is "Det Noun Verb": 3 words, below min_words = 4.
    let message = GrammarTask::new(&bare).unwrap_err().to_string();
    assert!(
        message.starts_with("task.min_words = 4 is out of range: expected"),
        "{message}"
    );
    assert!(
        message.contains("only 0 of 1000 drawn had 4 to 16 words"),
        "{message}"
    );
    assert!(message.contains("lower min_words"), "{message}");
    assert!(
        GrammarTask::new(&GrammarSpec {
            min_words: 3,
            ..bare
        })
        .is_ok()
    );

    let lush = GrammarSpec {
        adjective_prob: 1.0,
        pp_prob: 1.0,
        relative_clause_prob: 1.0,
        transitive_prob: 1.0,
        clause_depth: 3,
        ..GrammarSpec::default()
    };
    let message = GrammarTask::new(&lush).unwrap_err().to_string();
    assert!(
        message.starts_with("task.max_words = 16 is out of range: expected"),
        "{message}"
    );
    assert!(message.contains("raise max_words"), "{message}");
}

#[test]
fn parses_a_grammar_section() {
    #[derive(Debug, Deserialize)]
    struct Config {
        task: crate::TaskConfig,
    }
    let text = "[task]\nkind = \"grammar\"\nnouns = 5\nmin_words = 5\nmax_words = 20\n\
                pp_prob = 0.5\nclause_depth = 2\n";
    let config: Config = toml::from_str(text).unwrap();
    let expected = GrammarSpec {
        nouns: 5,
        min_words: 5,
        max_words: 20,
        pp_prob: 0.5,
        clause_depth: 2,
        ..GrammarSpec::default()
    };
    assert_eq!(config.task, crate::TaskConfig::Grammar(expected));
    let task = config.task.build(std::path::Path::new(".")).unwrap();
    assert_eq!((task.name(), task.seq_len()), ("grammar", 20));
    assert_eq!(task.input_vocab(), 77 - 2 * 7);

    // The classed lexicon and its dose; a written spec leaves them out at their defaults,
    // so configs of runs from before they existed read back the same.
    let text = "[task]\nkind = \"grammar\"\nlexicon = \"classes\"\nselection = 0.75\n";
    let config: Config = toml::from_str(text).unwrap();
    let crate::TaskConfig::Grammar(spec) = &config.task else {
        panic!("{config:?}")
    };
    assert_eq!((spec.lexicon, spec.selection), (Lexicon::Classes, 0.75));
    let task = config.task.build(std::path::Path::new(".")).unwrap();
    assert_eq!(
        task.input_vocab(),
        77,
        "12 nouns, 8 + 6 verbs: the default sizes"
    );
    let written = toml::to_string(&GrammarSpec::default()).unwrap();
    assert!(
        !written.contains("lexicon") && !written.contains("selection"),
        "{written}"
    );

    let error = toml::from_str::<Config>("[task]\nkind = \"grammar\"\nnoun = 5\n")
        .unwrap_err()
        .to_string();
    assert!(error.contains("unknown field `noun`"), "{error}");
    let wrong = toml::from_str::<toml::Table>("kind = \"grammar\"\npp_prob = \"high\"\n").unwrap();
    assert_eq!(
        crate::TaskConfig::key_at_fault(&wrong).as_deref(),
        Some("pp_prob")
    );
}
