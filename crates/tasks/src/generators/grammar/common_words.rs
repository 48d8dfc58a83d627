//! The words both lexicons of the `grammar` task share (adjectives, prepositions,
//! determiners, the relative pronoun) and the grammatical number they agree in.

/// Grammatical number of a noun, a verb form or a determiner.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Number {
    Singular,
    Plural,
}

impl Number {
    /// Index into a (singular, plural) pair.
    pub(crate) fn index(self) -> usize {
        match self {
            Number::Singular => 0,
            Number::Plural => 1,
        }
    }
}

/// Adjectives; the vowel-initial ones last, so that defaults never write "a old".
pub(crate) const ADJECTIVES: [&str; 16] = [
    "big", "small", "happy", "sad", "tall", "quiet", "clever", "lazy", "brave", "young", "kind",
    "proud", "tired", "strange", "angry", "old",
];

pub(crate) const PREPOSITIONS: [&str; 8] = [
    "near", "with", "behind", "beside", "under", "above", "without", "beyond",
];

/// Determiners and the number of noun each goes with (`None`: either).
pub(crate) const DETERMINERS: [(&str, Option<Number>); 8] = [
    ("the", None),
    ("some", None),
    ("a", Some(Number::Singular)),
    ("every", Some(Number::Singular)),
    ("this", Some(Number::Singular)),
    ("these", Some(Number::Plural)),
    ("many", Some(Number::Plural)),
    ("those", Some(Number::Plural)),
];

pub(crate) const RELATIVE_PRONOUN: &str = "that";
