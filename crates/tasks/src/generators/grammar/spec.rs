//! The `grammar` task's `[task]` keys ([`GrammarSpec`]), their defaults, and the checks a
//! spec must pass before a vocabulary is laid out ([`super::task::GrammarTask::new`] calls
//! them): each word count within its built-in list, the length range, every probability.

use serde::{Deserialize, Serialize};

use super::lexicon::{
    CLASSED_INTRANSITIVE_VERBS, CLASSED_NOUNS, CLASSED_TRANSITIVE_VERBS, CLASSES, Lexicon,
};
use crate::error::TaskError;

use super::animate::{DITRANSITIVE_VERBS, INTRANSITIVE_VERBS, NOUNS, TRANSITIVE_VERBS};
use super::common_words::{ADJECTIVES, PREPOSITIONS};

/// Longest accepted `max_words`: far beyond the defaults, and a bound on the model's positions.
pub(super) const MAX_WORDS: usize = 64;

/// Deepest accepted `clause_depth`: relative clauses multiply a sentence's length, so deeper
/// nesting only yields sentences that the length range rejects.
pub(super) const MAX_CLAUSE_DEPTH: usize = 3;

/// Adjectives per noun at most, so that a noun phrase stays short.
pub(crate) const MAX_ADJECTIVES: usize = 2;

/// The `[task]` keys of `kind = "grammar"`: how many words of each class, how long sentences
/// are, and how often each optional part of the grammar is drawn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GrammarSpec {
    /// Nouns used, the first of the built-in list, 1..=24; each has two tokens (dog, dogs).
    pub nouns: usize,
    /// Transitive verbs used, 1..=16; each has two tokens (sees, see).
    pub transitive_verbs: usize,
    /// Intransitive verbs used, 1..=12; each has two tokens (sleeps, sleep).
    pub intransitive_verbs: usize,
    /// Adjectives used, 1..=16.
    pub adjectives: usize,
    /// Prepositions used, 1..=8.
    pub prepositions: usize,
    /// Shortest sentence kept, in words, 3..=64 (the shortest the grammar writes has 3).
    pub min_words: usize,
    /// Longest sentence kept, in words, min_words..=64; the task's sequence length.
    pub max_words: usize,
    /// How deep relative clauses nest, 0..=3 (0: none).
    pub clause_depth: usize,
    /// Probability of a first adjective before a noun, and of a second after the first.
    pub adjective_prob: f64,
    /// Probability that a noun phrase, or a verb phrase, takes a prepositional phrase.
    pub pp_prob: f64,
    /// Probability that a noun phrase takes a relative clause (while depth allows).
    pub relative_clause_prob: f64,
    /// Probability that a noun phrase is plural.
    pub plural_prob: f64,
    /// Probability that a verb phrase is transitive (has an object).
    pub transitive_prob: f64,
    /// Probability that a word is masked, in (0, 1]; at least one word per sentence is.
    pub mask_fraction: f64,
    /// Which nouns and verbs: `animate` (the default: any noun can do or undergo any verb)
    /// or `classes` (nouns in six classes, verbs that select them; [`Lexicon`]). With
    /// `classes`, `nouns` counts from a list of 36, `transitive_verbs` of 12 and
    /// `intransitive_verbs` of 6.
    #[serde(skip_serializing_if = "is_default")]
    pub lexicon: Lexicon,
    /// How strongly verbs select their subjects' and objects' classes, in [0, 1] (the
    /// dose): with this probability a verb's subject (and object) is drawn from the classes
    /// its frame allows, otherwise from every noun. Needs `lexicon = "classes"`. Default 0.
    #[serde(skip_serializing_if = "is_default")]
    pub selection: f64,
    /// Probability that a transitive verb phrase is ditransitive, in [0, 1]: a verb of its
    /// own list with an indirect object before its direct object ("gives the dog the cake"),
    /// so the direct object sits past a noun phrase of any length. Default 0: no
    /// ditransitive verbs, not even in the vocabulary.
    #[serde(skip_serializing_if = "is_default")]
    pub ditransitive_prob: f64,
    /// Ditransitive verbs used when `ditransitive_prob` > 0, 1..=6; each has two tokens
    /// (gives, give). Default 4.
    #[serde(skip_serializing_if = "is_default_ditransitive_verbs")]
    pub ditransitive_verbs: usize,
}

/// The default of `ditransitive_verbs`.
const DEFAULT_DITRANSITIVE_VERBS: usize = 4;

fn is_default_ditransitive_verbs(value: &usize) -> bool {
    *value == DEFAULT_DITRANSITIVE_VERBS
}

/// Whether `value` is its type's default (keys left out of a written config when they are).
fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

impl Default for GrammarSpec {
    fn default() -> Self {
        Self {
            nouns: 12,
            transitive_verbs: 8,
            intransitive_verbs: 6,
            adjectives: 8,
            prepositions: 6,
            min_words: 4,
            max_words: 16,
            clause_depth: 1,
            adjective_prob: 0.3,
            pp_prob: 0.25,
            relative_clause_prob: 0.2,
            plural_prob: 0.5,
            transitive_prob: 0.6,
            mask_fraction: 0.15,
            lexicon: Lexicon::Animate,
            selection: 0.0,
            ditransitive_prob: 0.0,
            ditransitive_verbs: DEFAULT_DITRANSITIVE_VERBS,
        }
    }
}

pub(super) fn check_count(
    field: &'static str,
    value: usize,
    available: usize,
) -> Result<(), TaskError> {
    if (1..=available).contains(&value) {
        Ok(())
    } else {
        let expected = format!("1 <= {field} <= {available}, the length of the built-in list");
        Err(crate::error::out_of_range(field, value, expected))
    }
}

pub(super) fn check_probability(field: &'static str, value: f64) -> Result<(), TaskError> {
    if (0.0..=1.0).contains(&value) {
        Ok(())
    } else {
        Err(crate::error::out_of_range(
            field,
            value,
            format!("0 <= {field} <= 1"),
        ))
    }
}

/// Checks that each word class takes between one word and its whole built-in list (the
/// lexicon's), and that the classed lexicon has a noun of every class.
pub(super) fn check_word_counts(spec: &GrammarSpec) -> Result<(), TaskError> {
    let (nouns, transitive, intransitive) = match spec.lexicon {
        Lexicon::Animate => (
            NOUNS.len(),
            TRANSITIVE_VERBS.len(),
            INTRANSITIVE_VERBS.len(),
        ),
        Lexicon::Classes => (
            CLASSED_NOUNS.len(),
            CLASSED_TRANSITIVE_VERBS.len(),
            CLASSED_INTRANSITIVE_VERBS.len(),
        ),
    };
    check_count("nouns", spec.nouns, nouns)?;
    if spec.lexicon == Lexicon::Classes && spec.nouns < CLASSES.len() {
        let expected = format!(
            "{} <= nouns <= {nouns} with lexicon = \"classes\", so that every class has a noun",
            CLASSES.len()
        );
        return Err(crate::error::out_of_range("nouns", spec.nouns, expected));
    }
    check_count("transitive_verbs", spec.transitive_verbs, transitive)?;
    check_count("intransitive_verbs", spec.intransitive_verbs, intransitive)?;
    check_count(
        "ditransitive_verbs",
        spec.ditransitive_verbs,
        DITRANSITIVE_VERBS.len(),
    )?;
    check_count("adjectives", spec.adjectives, ADJECTIVES.len())?;
    check_count("prepositions", spec.prepositions, PREPOSITIONS.len())
}

/// Checks the length range and the nesting depth of relative clauses.
pub(super) fn check_lengths(spec: &GrammarSpec) -> Result<(), TaskError> {
    if !(3..=MAX_WORDS).contains(&spec.min_words) {
        let expected = format!(
            "3 <= min_words <= {MAX_WORDS} (the shortest sentence, \"the dog sleeps\", has 3 \
             words)"
        );
        return Err(crate::error::out_of_range(
            "min_words",
            spec.min_words,
            expected,
        ));
    }
    if !(spec.min_words..=MAX_WORDS).contains(&spec.max_words) {
        let expected = format!("min_words ({}) <= max_words <= {MAX_WORDS}", spec.min_words);
        return Err(crate::error::out_of_range(
            "max_words",
            spec.max_words,
            expected,
        ));
    }
    if spec.clause_depth > MAX_CLAUSE_DEPTH {
        let expected = format!("0 <= clause_depth <= {MAX_CLAUSE_DEPTH}");
        return Err(crate::error::out_of_range(
            "clause_depth",
            spec.clause_depth,
            expected,
        ));
    }
    Ok(())
}

/// Checks the grammar's probabilities and the mask fraction.
pub(super) fn check_probabilities(spec: &GrammarSpec) -> Result<(), TaskError> {
    check_probability("adjective_prob", spec.adjective_prob)?;
    check_probability("pp_prob", spec.pp_prob)?;
    check_probability("relative_clause_prob", spec.relative_clause_prob)?;
    check_probability("plural_prob", spec.plural_prob)?;
    check_probability("transitive_prob", spec.transitive_prob)?;
    check_probability("selection", spec.selection)?;
    check_probability("ditransitive_prob", spec.ditransitive_prob)?;
    if spec.selection > 0.0 && spec.lexicon != Lexicon::Classes {
        let expected = "selection = 0 with the animate lexicon, whose nouns all belong to one \
                        class; set lexicon = \"classes\" to give verbs something to select"
            .to_owned();
        return Err(crate::error::out_of_range(
            "selection",
            spec.selection,
            expected,
        ));
    }
    if !(spec.mask_fraction > 0.0 && spec.mask_fraction <= 1.0) {
        let expected = "0 < mask_fraction <= 1".to_owned();
        return Err(crate::error::out_of_range(
            "mask_fraction",
            spec.mask_fraction,
            expected,
        ));
    }
    Ok(())
}
