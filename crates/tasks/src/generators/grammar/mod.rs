//! The `grammar` task: English sentences drawn from a small probabilistic grammar, each drawn
//! together with its dependency parse, and trained as BERT-style masked-word prediction. The
//! parses are not trained on; inspect scores heads against them ("does a head attend from a
//! determiner to its noun?", Clark et al. 2019).
//!
//! # Vocabulary
//!
//! Id 0 is `<pad>`, id 1 is `<mask>`, then the eight determiners (`the`, `some`: either
//! number; `a`, `every`, `this`: singular; `these`, `many`, `those`: plural), the relative
//! pronoun `that` (never a determiner, so the word has one role), then the first `nouns`
//! nouns (singular and plural form side by side: `dog`, `dogs`, ...), the first
//! `transitive_verbs` transitive verbs (third person singular and plural: `sees`, `see`), the
//! first `intransitive_verbs` intransitive verbs (`sleeps`, `sleep`), the first `adjectives`
//! adjectives and the first `prepositions` prepositions of the built-in lists. With the
//! defaults that is 2 + 9 + 24 + 16 + 12 + 8 + 6 = 77 tokens. The lists are ordered so that no
//! word a default vocabulary reaches after `a` starts with a vowel; beyond the defaults
//! "a old dog" can happen (the grammar has no `an`).
//!
//! # Grammar
//!
//! ```text
//! S         -> NP(subject) VP
//! NP        -> Det Adj{0,2} Noun [PP] [RelClause]
//! VP        -> IntransVerb [PP] | TransVerb NP(object) [PP]
//! PP        -> Prep NP                 the PP's NP takes no PP of its own
//! RelClause -> "that" VP               only while the clause depth is below clause_depth
//! ```
//!
//! Each NP draws its number (plural with `plural_prob`); its determiner and noun take that
//! number, and so does the verb it is the subject of: the main verb agrees with the subject,
//! a relative clause's verb with the noun the clause modifies. An NP takes a first adjective
//! with `adjective_prob` and a second, different one with `adjective_prob` again; a PP with
//! `pp_prob` (after a noun, or after a verb and its object); a relative clause with
//! `relative_clause_prob`. A VP is transitive with `transitive_prob`. Recursion ends because
//! a PP's NP has no PP and relative clauses nest at most `clause_depth` deep.
//!
//! # Parse
//!
//! The main verb is the root; every other word has exactly one arc, to a word of the same
//! sentence: `det` (determiner -> noun), `amod` (adjective -> noun), `nsubj` (subject noun ->
//! verb; `that` -> its clause's verb), `dobj` (object noun -> verb), `prep` (preposition ->
//! the noun or verb its phrase attaches to), `pobj` (noun -> preposition), `relcl` (relative
//! clause's verb -> the noun it modifies).
//!
//! # Examples
//!
//! Sentences outside `min_words..=max_words` are rejected and drawn again. Each word is then
//! masked with probability `mask_fraction` (at least one per sentence): a masked position holds
//! `<mask>` and its target is the word's id; every other position is unscored. Examples have
//! the length of their sentence; [`Generator::seq_len`](crate::generator::Generator::seq_len) is `max_words`.
//!
//! # Files
//!
//! [`spec`]: the `[task]` keys and their checks; [`lexicon`], [`animate`] and
//! [`common_words`]: the words; [`vocabulary`]: the vocabulary as laid out; [`task`]: the
//! generator (sentences, parses, masking, agreement pairs), its tests in `task/tests.rs`;
//! [`ceiling`]: the Bayes-optimal ceiling of the masked words.

pub mod animate;
pub mod ceiling;
pub mod common_words;
pub mod lexicon;
pub mod spec;
pub mod task;
pub mod vocabulary;

pub use spec::GrammarSpec;
pub(crate) use task::GrammarTask;
