//! The animate lexicon of the `grammar` task (`lexicon = "animate"`, the default): nouns and
//! verbs where any noun can do or undergo any verb, so a verb says nothing about its object.
//! The closed-class words both lexicons share are in [`super::common_words`]; the classed
//! lexicon is in [`super::lexicon`].

/// Nouns as (singular, plural). All animate, so that any noun can see, sleep or be seen.
pub(crate) const NOUNS: [(&str, &str); 24] = [
    ("dog", "dogs"),
    ("cat", "cats"),
    ("bird", "birds"),
    ("horse", "horses"),
    ("child", "children"),
    ("teacher", "teachers"),
    ("farmer", "farmers"),
    ("king", "kings"),
    ("queen", "queens"),
    ("girl", "girls"),
    ("boy", "boys"),
    ("student", "students"),
    ("doctor", "doctors"),
    ("friend", "friends"),
    ("writer", "writers"),
    ("sailor", "sailors"),
    ("fox", "foxes"),
    ("wolf", "wolves"),
    ("mouse", "mice"),
    ("man", "men"),
    ("woman", "women"),
    ("baker", "bakers"),
    ("painter", "painters"),
    ("lawyer", "lawyers"),
];

/// Ditransitive verbs as (third person singular, plural): "gives the dog the bird".
pub(crate) const DITRANSITIVE_VERBS: [(&str, &str); 6] = [
    ("gives", "give"),
    ("shows", "show"),
    ("sends", "send"),
    ("brings", "bring"),
    ("hands", "hand"),
    ("offers", "offer"),
];

/// Transitive verbs as (third person singular, plural).
pub(crate) const TRANSITIVE_VERBS: [(&str, &str); 16] = [
    ("sees", "see"),
    ("likes", "like"),
    ("follows", "follow"),
    ("helps", "help"),
    ("finds", "find"),
    ("chases", "chase"),
    ("knows", "know"),
    ("watches", "watch"),
    ("meets", "meet"),
    ("loves", "love"),
    ("visits", "visit"),
    ("hears", "hear"),
    ("trusts", "trust"),
    ("calls", "call"),
    ("pushes", "push"),
    ("feeds", "feed"),
];

/// Intransitive verbs as (third person singular, plural).
pub(crate) const INTRANSITIVE_VERBS: [(&str, &str); 12] = [
    ("sleeps", "sleep"),
    ("runs", "run"),
    ("laughs", "laugh"),
    ("sings", "sing"),
    ("waits", "wait"),
    ("smiles", "smile"),
    ("jumps", "jump"),
    ("swims", "swim"),
    ("cries", "cry"),
    ("dances", "dance"),
    ("walks", "walk"),
    ("falls", "fall"),
];
