//! The classed lexicon of the `grammar` task (`lexicon = "classes"`): nouns in six semantic
//! classes and verbs that say which classes they take as subject and as object (`eats`
//! food, `drives` vehicles, `visits` places or people), so that a verb tells something
//! about its object and the object about its verb. How strongly the grammar keeps to it is
//! one key, `selection` (the dose): with probability `selection` a verb's subject and
//! object are drawn from the classes it allows, otherwise from every noun.
//!
//! The lists are ordered so that any prefix is balanced: nouns go round the classes
//! (`man`, `dog`, `cake`, `car`, `city`, `hammer`, `woman`, ...), so the first 6 hold one of
//! each class; no noun starts with a vowel (the grammar has no `an`).

use serde::{Deserialize, Serialize};

/// Which lexicon the grammar draws its nouns and verbs from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Lexicon {
    /// 24 animate nouns, any of which can do or undergo any verb: the verb says nothing
    /// about its object (the grammar of experiment 6).
    #[default]
    Animate,
    /// 36 nouns in six classes and verbs that select the classes of their subject and
    /// object ([`CLASSED_NOUNS`], [`CLASSED_TRANSITIVE_VERBS`]).
    Classes,
}

/// A noun's semantic class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NounClass {
    /// man, woman, child, ...
    Person,
    /// dog, cat, horse, ...
    Animal,
    /// cake, pie, carrot, ...
    Food,
    /// car, bus, truck, ...
    Vehicle,
    /// city, park, school, ...
    Place,
    /// hammer, knife, rope, ...
    Tool,
}

use NounClass::{Animal, Food, Person, Place, Tool, Vehicle};

/// Every class, in the order the noun list goes round them.
pub const CLASSES: [NounClass; 6] = [Person, Animal, Food, Vehicle, Place, Tool];

/// Nouns as (singular, plural, class), round the classes.
pub const CLASSED_NOUNS: [(&str, &str, NounClass); 36] = [
    ("man", "men", Person),
    ("dog", "dogs", Animal),
    ("cake", "cakes", Food),
    ("car", "cars", Vehicle),
    ("city", "cities", Place),
    ("hammer", "hammers", Tool),
    ("woman", "women", Person),
    ("cat", "cats", Animal),
    ("pie", "pies", Food),
    ("bus", "buses", Vehicle),
    ("park", "parks", Place),
    ("knife", "knives", Tool),
    ("child", "children", Person),
    ("horse", "horses", Animal),
    ("carrot", "carrots", Food),
    ("truck", "trucks", Vehicle),
    ("school", "schools", Place),
    ("rope", "ropes", Tool),
    ("teacher", "teachers", Person),
    ("bird", "birds", Animal),
    ("sandwich", "sandwiches", Food),
    ("boat", "boats", Vehicle),
    ("market", "markets", Place),
    ("brush", "brushes", Tool),
    ("farmer", "farmers", Person),
    ("fox", "foxes", Animal),
    ("pear", "pears", Food),
    ("train", "trains", Vehicle),
    ("garden", "gardens", Place),
    ("spoon", "spoons", Tool),
    ("doctor", "doctors", Person),
    ("cow", "cows", Animal),
    ("loaf", "loaves", Food),
    ("bike", "bikes", Vehicle),
    ("village", "villages", Place),
    ("ladder", "ladders", Tool),
];

/// What a verb selects: the classes of its subject and (transitive verbs) of its object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame {
    /// Classes that can do the verb.
    pub subject: &'static [NounClass],
    /// Classes the verb takes as object (empty for intransitive verbs).
    pub object: &'static [NounClass],
}

const ANIMATE: &[NounClass] = &[Person, Animal];
const PEOPLE: &[NounClass] = &[Person];

/// Transitive verbs as (third person singular, plural, frame); the first eight take eight
/// different sets of objects.
pub const CLASSED_TRANSITIVE_VERBS: [(&str, &str, Frame); 12] = [
    (
        "eats",
        "eat",
        Frame {
            subject: ANIMATE,
            object: &[Food],
        },
    ),
    (
        "drives",
        "drive",
        Frame {
            subject: PEOPLE,
            object: &[Vehicle],
        },
    ),
    (
        "visits",
        "visit",
        Frame {
            subject: PEOPLE,
            object: &[Place, Person],
        },
    ),
    (
        "uses",
        "use",
        Frame {
            subject: PEOPLE,
            object: &[Tool],
        },
    ),
    (
        "feeds",
        "feed",
        Frame {
            subject: PEOPLE,
            object: &[Animal, Person],
        },
    ),
    (
        "chases",
        "chase",
        Frame {
            subject: ANIMATE,
            object: &[Animal, Person, Vehicle],
        },
    ),
    (
        "fixes",
        "fix",
        Frame {
            subject: PEOPLE,
            object: &[Vehicle, Tool],
        },
    ),
    (
        "sells",
        "sell",
        Frame {
            subject: PEOPLE,
            object: &[Food, Vehicle, Tool],
        },
    ),
    (
        "cooks",
        "cook",
        Frame {
            subject: PEOPLE,
            object: &[Food],
        },
    ),
    (
        "builds",
        "build",
        Frame {
            subject: PEOPLE,
            object: &[Place, Vehicle, Tool],
        },
    ),
    (
        "rides",
        "ride",
        Frame {
            subject: PEOPLE,
            object: &[Vehicle, Animal],
        },
    ),
    (
        "sees",
        "see",
        Frame {
            subject: ANIMATE,
            object: &CLASSES,
        },
    ),
];

/// Intransitive verbs as (third person singular, plural, frame).
pub const CLASSED_INTRANSITIVE_VERBS: [(&str, &str, Frame); 6] = [
    (
        "sleeps",
        "sleep",
        Frame {
            subject: ANIMATE,
            object: &[],
        },
    ),
    (
        "laughs",
        "laugh",
        Frame {
            subject: PEOPLE,
            object: &[],
        },
    ),
    (
        "runs",
        "run",
        Frame {
            subject: ANIMATE,
            object: &[],
        },
    ),
    (
        "sings",
        "sing",
        Frame {
            subject: ANIMATE,
            object: &[],
        },
    ),
    (
        "waits",
        "wait",
        Frame {
            subject: ANIMATE,
            object: &[],
        },
    ),
    (
        "swims",
        "swim",
        Frame {
            subject: ANIMATE,
            object: &[],
        },
    ),
];

/// Ditransitive verbs as (third person singular, plural, frame, indirect object's
/// classes): "gives the dog the cake". The frame's `object` is the direct object's classes.
pub const CLASSED_DITRANSITIVE_VERBS: [(&str, &str, Frame, &[NounClass]); 6] = [
    (
        "gives",
        "give",
        Frame {
            subject: PEOPLE,
            object: &[Food, Tool],
        },
        ANIMATE,
    ),
    (
        "shows",
        "show",
        Frame {
            subject: PEOPLE,
            object: &[Place, Vehicle, Animal],
        },
        PEOPLE,
    ),
    (
        "sends",
        "send",
        Frame {
            subject: PEOPLE,
            object: &[Food, Tool, Vehicle],
        },
        PEOPLE,
    ),
    (
        "brings",
        "bring",
        Frame {
            subject: ANIMATE,
            object: &[Food, Tool, Animal],
        },
        PEOPLE,
    ),
    (
        "hands",
        "hand",
        Frame {
            subject: PEOPLE,
            object: &[Tool, Food],
        },
        PEOPLE,
    ),
    (
        "throws",
        "throw",
        Frame {
            subject: PEOPLE,
            object: &[Food, Tool],
        },
        ANIMATE,
    ),
];

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn every_prefix_of_six_nouns_holds_every_class_and_no_word_repeats() {
        for (i, &(_, _, class)) in CLASSED_NOUNS.iter().enumerate() {
            assert_eq!(class, CLASSES[i % 6], "noun {i} breaks the round");
        }
        let words: Vec<&str> = CLASSED_NOUNS
            .iter()
            .flat_map(|&(s, p, _)| [s, p])
            .chain(
                CLASSED_TRANSITIVE_VERBS
                    .iter()
                    .flat_map(|&(s, p, _)| [s, p]),
            )
            .chain(
                CLASSED_INTRANSITIVE_VERBS
                    .iter()
                    .flat_map(|&(s, p, _)| [s, p]),
            )
            .chain(
                CLASSED_DITRANSITIVE_VERBS
                    .iter()
                    .flat_map(|&(s, p, _, _)| [s, p]),
            )
            .collect();
        assert_eq!(words.len(), words.iter().collect::<HashSet<_>>().len());
        for &(singular, _, _) in &CLASSED_NOUNS {
            assert!(
                !singular.starts_with(['a', 'e', 'i', 'o', 'u']),
                "a {singular}"
            );
        }
    }

    #[test]
    fn every_verb_selects_animate_subjects_and_transitive_ones_an_object() {
        for (verb, _, frame) in CLASSED_TRANSITIVE_VERBS {
            assert!(!frame.object.is_empty(), "{verb}");
            assert!(frame.subject.iter().all(|c| ANIMATE.contains(c)), "{verb}");
        }
        for (verb, _, frame) in CLASSED_INTRANSITIVE_VERBS {
            assert!(frame.object.is_empty(), "{verb}");
        }
        let first_eight: HashSet<Vec<NounClass>> = CLASSED_TRANSITIVE_VERBS[..8]
            .iter()
            .map(|(_, _, f)| f.object.to_vec())
            .collect();
        assert_eq!(
            first_eight.len(),
            8,
            "the first eight select eight object sets"
        );
    }
}
