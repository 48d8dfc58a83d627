//! Dependency parses of generated sentences: which word each word depends on, and how. The
//! `grammar` task draws every sentence together with its parse; inspect scores heads against
//! the arcs (Clark et al. 2019, "What does BERT look at?").

use serde::{Deserialize, Serialize};

/// The label of a dependency arc, as in Universal Dependencies (Stanford's older `dobj` and
/// `prep`/`pobj` for objects and prepositional phrases, as Clark et al. scored BERT).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Relation {
    /// Determiner to its noun: "the" -> "dog".
    Det,
    /// Adjective to its noun: "big" -> "dog".
    Amod,
    /// Subject noun (or relative pronoun) to its verb: "dog" -> "sees".
    Nsubj,
    /// Direct object noun to its verb: "cat" -> "sees".
    Dobj,
    /// Indirect object noun to its verb: "dog" -> "gives" in "gives the dog the cake".
    Iobj,
    /// Preposition to the noun or verb its phrase modifies: "near" -> "dog".
    Prep,
    /// Noun to its preposition: "tree" -> "near".
    Pobj,
    /// Relative clause's verb to the noun it modifies: "sees" -> "dog" in "the dog that sees".
    Relcl,
}

impl Relation {
    /// Every relation, in a fixed order (rows of tables and figures).
    pub const ALL: [Relation; 8] = [
        Relation::Det,
        Relation::Amod,
        Relation::Nsubj,
        Relation::Dobj,
        Relation::Iobj,
        Relation::Prep,
        Relation::Pobj,
        Relation::Relcl,
    ];

    /// The label as written in files: "det", "amod", ...
    pub fn name(self) -> &'static str {
        match self {
            Relation::Det => "det",
            Relation::Amod => "amod",
            Relation::Nsubj => "nsubj",
            Relation::Dobj => "dobj",
            Relation::Iobj => "iobj",
            Relation::Prep => "prep",
            Relation::Pobj => "pobj",
            Relation::Relcl => "relcl",
        }
    }
}

/// One arc: word `dependent` depends on word `head` (0-based positions in the sentence).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Arc {
    /// Position of the dependent word.
    pub dependent: usize,
    /// Position of its head word.
    pub head: usize,
    /// How it depends.
    pub relation: Relation,
}

/// A sentence with its parse: every word but the root has exactly one arc.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParsedSentence {
    /// Word ids (the task's input vocabulary), no mask tokens, no padding.
    pub words: Vec<u32>,
    /// Position of the root (the main verb).
    pub root: usize,
    /// One arc per word except the root, ordered by dependent.
    pub arcs: Vec<Arc>,
}
