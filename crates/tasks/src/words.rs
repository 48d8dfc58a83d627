//! What tasks whose tokens are words have and other tasks lack: the [`Words`] a generator
//! answers (today only `grammar`'s), and the word classes, inflections and ceilings it
//! answers with.

use serde::{Deserialize, Serialize};

use crate::dependency::ParsedSentence;

/// The id of the mask token of word tasks (what a masked word reads as); also
/// [`crate::Task::MASK_TOKEN`].
pub const MASK_TOKEN: u32 = 1;

/// The word classes the ceiling is reported for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WordClass {
    /// `the`, `some`, `a`, ...
    Determiner,
    /// Nouns, both numbers.
    Noun,
    /// Transitive and intransitive verbs, both forms.
    Verb,
    /// Adjectives.
    Adjective,
    /// Prepositions.
    Preposition,
    /// The relative pronoun `that`.
    Relative,
}

impl WordClass {
    /// Every class, in report order.
    pub const ALL: [WordClass; 6] = [
        WordClass::Determiner,
        WordClass::Noun,
        WordClass::Verb,
        WordClass::Adjective,
        WordClass::Preposition,
        WordClass::Relative,
    ];
}

/// A noun's or verb's grammatical number, and the same word in the other number: what an
/// agreement test compares (`runs` against `run` after a singular subject).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Inflection {
    /// Whether the word is the plural form.
    pub plural: bool,
    /// The id of the same noun or verb in the other number.
    pub other_number: u32,
}

/// The ceiling of one word class.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClassCeiling {
    /// The class of the masked (true) word.
    pub class: WordClass,
    /// Masked words of the class in the sample.
    pub masked: usize,
    /// The Bayes-optimal predictor's expected accuracy on them.
    pub accuracy: f64,
    /// Its standard error over the sample (the spread of the per-word chance of being right
    /// over the square root of their number).
    pub standard_error: f64,
}

/// What a task whose tokens are words answers (today `grammar`): the words' names, the
/// sentences' parses, the Bayes ceiling per word class, and each word's class and inflection.
pub(crate) trait Words {
    fn token_names(&self) -> Vec<String>;
    fn parsed_sentences(&self, size: usize, seed: u64) -> Vec<ParsedSentence>;
    fn ceiling(&self, size: usize, seed: u64) -> Vec<ClassCeiling>;
    fn word_class(&self, id: u32) -> Option<WordClass>;
    fn inflection(&self, id: u32) -> Option<Inflection>;
}
