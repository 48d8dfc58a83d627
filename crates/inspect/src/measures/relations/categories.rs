//! The categories `relations.json` scores a grammar sentence's arcs under: each arc's
//! relation ([`Relation::ALL`]), and two that no fixed offset can find, an arc past a noun
//! ([`PAST_A_NOUN`], [`OBJECT_PAST_A_NOUN`]). A sentence read as a tree of words
//! ([`word_categories`]: a treebank's, or the grammar's written as one) counts under its own
//! labels, added as met (`RelationHits::add_trees_at`), and the same two.

use tasks::conllu::TreebankSentence;
use tasks::{Arc, ParsedSentence, Relation};

/// The first extra category after the relations: `nsubj` arcs from a noun to its verb with
/// another noun between them (`the keys to the cabinet are`: the attractor of Linzen et al.
/// 2016, of either number), where no fixed offset can find the verb and agreement must reach
/// past a noun.
pub const PAST_A_NOUN: &str = "nsubj_past_noun";

/// The second: `dobj` arcs from a noun to its verb with another noun between them, the
/// direct objects of ditransitive verbs past their indirect object (`gives the dog the
/// cake`), which no fixed offset finds either.
pub const OBJECT_PAST_A_NOUN: &str = "dobj_past_noun";

/// The relations, then [`PAST_A_NOUN`] and [`OBJECT_PAST_A_NOUN`].
pub const CATEGORIES: usize = Relation::ALL.len() + 2;

/// Category `index`'s name as `relations.json` writes it.
pub fn category_name(index: usize) -> &'static str {
    match Relation::ALL.get(index) {
        Some(relation) => relation.name(),
        None if index == Relation::ALL.len() => PAST_A_NOUN,
        None => OBJECT_PAST_A_NOUN,
    }
}

/// The categories `arc` counts in: its relation, and [`PAST_A_NOUN`] (for `nsubj`) or
/// [`OBJECT_PAST_A_NOUN`] (for `dobj`) for a noun's arc with another noun (a word some
/// determiner depends on) between its two ends.
pub fn categories(sentence: &ParsedSentence, arc: &Arc) -> Vec<usize> {
    let mut found = vec![relation_index(arc.relation)];
    let is_noun = |position: usize| {
        sentence
            .arcs
            .iter()
            .any(|a| a.relation == Relation::Det && a.head == position)
    };
    let extra = match arc.relation {
        Relation::Nsubj => Some(Relation::ALL.len()),
        Relation::Dobj => Some(Relation::ALL.len() + 1),
        _ => None,
    };
    if let Some(extra) = extra.filter(|_| is_noun(arc.dependent)) {
        let (low, high) = (arc.dependent.min(arc.head), arc.dependent.max(arc.head));
        if (low + 1..high).any(is_noun) {
            found.push(extra);
        }
    }
    found
}

/// The categories word `w` of `tree` counts in as a dependent: its label (DEPREL), and
/// [`PAST_A_NOUN`] (for `nsubj`) or [`OBJECT_PAST_A_NOUN`] (for `dobj`) where it is a noun (a
/// word some `det` depends on) with another noun between it and its head, as [`categories`]
/// counts a grammar's arcs. None for the root, which has no arc.
pub fn word_categories(tree: &TreebankSentence, w: usize) -> Vec<&str> {
    if tree.heads[w] == 0 {
        return vec![];
    }
    let is_noun = |position: usize| {
        (0..tree.words.len()).any(|d| tree.relations[d] == "det" && tree.heads[d] == position + 1)
    };
    let (dependent, head) = (w, tree.heads[w] - 1);
    let relation = tree.relations[w].as_str();
    let mut found = vec![relation];
    let extra = match relation {
        "nsubj" => Some(PAST_A_NOUN),
        "dobj" => Some(OBJECT_PAST_A_NOUN),
        _ => None,
    };
    let (low, high) = (dependent.min(head), dependent.max(head));
    if let Some(extra) = extra
        && is_noun(dependent)
        && (low + 1..high).any(is_noun)
    {
        found.push(extra);
    }
    found
}

/// The names of the categories `arc` counts in ([`categories`]).
pub fn category_names(sentence: &ParsedSentence, arc: &Arc) -> Vec<&'static str> {
    categories(sentence, arc)
        .into_iter()
        .map(category_name)
        .collect()
}

/// `relation`'s position in [`Relation::ALL`].
fn relation_index(relation: Relation) -> usize {
    Relation::ALL
        .iter()
        .position(|r| *r == relation)
        .expect("Relation::ALL lists every relation")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A word of a grammar sentence written as a tree counts in the categories its arc
    /// counts in as a parse: the same names, in the same order, past a noun included.
    #[test]
    fn a_tree_word_counts_where_its_arc_counts() {
        let spec = tasks::GrammarSpec {
            ditransitive_prob: 0.5,
            ..Default::default()
        };
        let task = tasks::TaskConfig::Grammar(spec)
            .build(std::path::Path::new("."))
            .unwrap();
        let names = task.token_names().unwrap();
        let mut past_a_noun = 0;
        for sentence in task.parsed_sentences(200, 1) {
            let tree = TreebankSentence::of_parsed(&sentence, &names);
            for w in 0..sentence.words.len() {
                let from_arc = match sentence.arcs.iter().find(|a| a.dependent == w) {
                    Some(arc) => category_names(&sentence, arc),
                    None => vec![],
                };
                past_a_noun += usize::from(from_arc.len() > 1);
                assert_eq!(word_categories(&tree, w), from_arc, "word {w} of {tree:?}");
            }
        }
        assert!(past_a_noun > 0, "some arcs pass a noun");
    }
}
