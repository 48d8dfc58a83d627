//! The ceiling of masked-word prediction on the grammar: the accuracy of the Bayes-optimal
//! predictor, which knows the grammar and sees what the model sees (every unmasked word and
//! where the masks are), per class of the masked word. "16.5% accuracy" means little until
//! it is set against what the task allows.
//!
//! [`GrammarTask::probability_of`] sums the probability of every way the generator
//! ([`GrammarTask::draw_unbounded`]) can write a sentence that matches a masked input (a
//! masked position matches any word): the same choices in the same order, each constituent
//! as a distribution over where it ends, memoized by what it depends on. The posterior of a
//! masked position's word is that sum with the position fixed to each word, divided by the
//! sum with it open; the predictor picks the most probable word. Rejection on length does
//! not enter: the length is seen, and masks are drawn independently of the words.
//! [`GrammarTask::bayes_ceiling`] averages the predictor's chance of being right over masked
//! examples drawn as the evaluation set is, per class of the true word, with a standard
//! error.

use std::collections::HashMap;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::common_words::Number;
use super::lexicon::{CLASSES, NounClass};
use super::spec::MAX_ADJECTIVES;
use super::task::{GrammarTask, MASK, VerbChoice, VerbKind};
use crate::words::{ClassCeiling, Inflection, WordClass};

/// Where each constituent can end: `ends[e]` is the probability that it covers the words
/// from its start up to (not including) `e`.
type Ends = Vec<f64>;

/// A masked input: the word at each position, `None` where it is masked.
pub type Observed = [Option<u32>];

/// What a noun phrase's ends depend on: its number, clause depth, whether it may take a PP,
/// the classes a verb selects for it (a bit mask), and where it starts.
type NounPhraseKey = (Number, usize, bool, Option<u8>, usize);

/// What a verb phrase's ends depend on: number, depth, the verb chosen (transitive, index)
/// if it was chosen beforehand, and where it starts.
type VerbPhraseKey = (Number, usize, Option<(VerbKind, usize)>, usize);

/// Probabilities of constituents over one masked input, memoized.
struct Inside<'a> {
    task: &'a GrammarTask,
    observed: &'a Observed,
    noun_phrases: HashMap<NounPhraseKey, Ends>,
    verb_phrases: HashMap<VerbPhraseKey, Ends>,
}

/// The set of classes a verb selects, as a bit mask (a memo key).
fn class_bits(classes: &[NounClass]) -> u8 {
    classes
        .iter()
        .map(|c| 1u8 << CLASSES.iter().position(|x| x == c).unwrap_or(0))
        .fold(0, |bits, bit| bits | bit)
}

impl<'a> Inside<'a> {
    fn new(task: &'a GrammarTask, observed: &'a Observed) -> Self {
        Self {
            task,
            observed,
            noun_phrases: HashMap::new(),
            verb_phrases: HashMap::new(),
        }
    }

    fn len(&self) -> usize {
        self.observed.len()
    }

    fn zeros(&self) -> Ends {
        vec![0.0; self.len() + 1]
    }

    /// The chance that a word drawn uniformly from `words` matches position `at`.
    fn uniform_word(&self, at: usize, words: &[u32]) -> f64 {
        match self.observed.get(at) {
            None => 0.0,
            Some(None) => 1.0,
            Some(Some(word)) => {
                words.iter().filter(|w| *w == word).count() as f64 / words.len() as f64
            }
        }
    }

    /// Whether `word` matches position `at`.
    fn matches(&self, at: usize, word: u32) -> bool {
        matches!(self.observed.get(at), Some(None)) || self.observed.get(at) == Some(&Some(word))
    }

    /// `then` continued from every place `first` may end.
    fn and_then(&mut self, first: &Ends, mut then: impl FnMut(&mut Self, usize) -> Ends) -> Ends {
        let mut out = self.zeros();
        for (middle, &p) in first.iter().enumerate() {
            if p == 0.0 {
                continue;
            }
            let rest = then(self, middle);
            for (end, q) in rest.into_iter().enumerate() {
                out[end] += p * q;
            }
        }
        out
    }

    /// A single end at `at` with probability `p` (an empty part, or a word already matched).
    fn point(&self, at: usize, p: f64) -> Ends {
        let mut ends = self.zeros();
        if at <= self.len() {
            ends[at] = p;
        }
        ends
    }

    /// The whole sentence: where it may end (the probability of the input is `[len]`).
    fn sentence(&mut self) -> Ends {
        let task = self.task;
        let plural = task.spec.plural_prob;
        let mut out = self.zeros();
        for (number, p_number) in [(Number::Singular, 1.0 - plural), (Number::Plural, plural)] {
            let ends = if task.classed() {
                let mut sum = self.zeros();
                for (choice, p_choice) in task.verb_choices(None) {
                    let selects = class_bits(task.frame(choice).subject);
                    let subject = self.noun_phrase(number, 0, true, Some(selects), 0);
                    let ends = self.and_then(&subject, |me, at| {
                        me.verb_phrase(number, 0, Some((choice.kind, choice.index)), at)
                    });
                    add(&mut sum, &ends, p_choice);
                }
                sum
            } else {
                let subject = self.noun_phrase(number, 0, true, None, 0);
                self.and_then(&subject, |me, at| me.verb_phrase(number, 0, None, at))
            };
            add(&mut out, &ends, p_number);
        }
        out
    }

    /// `NP -> Det Adj{0,2} Noun [PP] [RelClause]` from `start`, as
    /// [`GrammarTask::noun_phrase`] draws it.
    fn noun_phrase(
        &mut self,
        number: Number,
        depth: usize,
        may_take_pp: bool,
        selects: Option<u8>,
        start: usize,
    ) -> Ends {
        let key = (number, depth, may_take_pp, selects, start);
        if let Some(ends) = self.noun_phrases.get(&key) {
            return ends.clone();
        }
        let ends = self.noun_phrase_uncached(number, depth, may_take_pp, selects, start);
        self.noun_phrases.insert(key, ends.clone());
        ends
    }

    fn noun_phrase_uncached(
        &mut self,
        number: Number,
        depth: usize,
        may_take_pp: bool,
        selects: Option<u8>,
        start: usize,
    ) -> Ends {
        let task = self.task;
        let determiners = match number {
            Number::Singular => &task.singular_determiners,
            Number::Plural => &task.plural_determiners,
        };
        let p_determiner = self.uniform_word(start, determiners);
        if p_determiner == 0.0 {
            return self.zeros();
        }
        // Where the noun sits: after 0, 1 or 2 adjectives.
        let mut noun_at = self.zeros();
        for (count, p) in self.adjective_runs(start + 1) {
            if let Some(slot) = noun_at.get_mut(start + 1 + count) {
                *slot += p_determiner * p;
            }
        }
        let mut out = self.zeros();
        for (at, &p_here) in noun_at.iter().enumerate() {
            if p_here == 0.0 || at >= self.len() {
                continue;
            }
            // The continuation depends on the noun only through its class (classed lexicon)
            // or not at all (animate): group the nouns so.
            for (class, p_class) in self.noun_groups(at, number, selects) {
                let after = self.noun_continuation(number, depth, may_take_pp, class, at + 1);
                add(&mut out, &after, p_here * p_class);
            }
        }
        out
    }

    /// `(number of adjectives, probability that they are drawn and match)` from `start`.
    fn adjective_runs(&self, start: usize) -> Vec<(usize, f64)> {
        let task = self.task;
        let a = task.spec.adjective_prob;
        let adjectives = &task.adjectives;
        let max = MAX_ADJECTIVES.min(adjectives.len());
        let mut runs = vec![(0, 1.0 - a)];
        if max == 0 {
            return vec![(0, 1.0)];
        }
        let first = self.uniform_word(start, adjectives);
        if max == 1 {
            runs.push((1, a * first));
            return runs;
        }
        runs.push((1, a * (1.0 - a) * first));
        // Two different adjectives: sum over the first of its chance times the chance of a
        // different second one matching.
        let n = adjectives.len() as f64;
        let mut both = 0.0;
        for &first_word in adjectives {
            if !self.matches(start, first_word) {
                continue;
            }
            let others = adjectives
                .iter()
                .filter(|&&w| w != first_word && self.matches(start + 1, w))
                .count() as f64;
            both += (1.0 / n) * (others / (n - 1.0));
        }
        runs.push((2, a * a * both));
        runs
    }

    /// The nouns that can stand at `at`, grouped by class (one group for the animate
    /// lexicon): `(class, probability that the drawn noun is of it and matches)`.
    fn noun_groups(
        &self,
        at: usize,
        number: Number,
        selects: Option<u8>,
    ) -> Vec<(Option<NounClass>, f64)> {
        let task = self.task;
        let probabilities = task.noun_probabilities(selects);
        let mut groups: Vec<(Option<NounClass>, f64)> = Vec::new();
        for (index, p) in probabilities.into_iter().enumerate() {
            if p == 0.0 || !self.matches(at, task.nouns[index][number.index()]) {
                continue;
            }
            let class = task.noun_classes.get(index).copied();
            match groups.iter_mut().find(|(c, _)| *c == class) {
                Some(group) => group.1 += p,
                None => groups.push((class, p)),
            }
        }
        groups
    }

    /// After the noun: `[PP] [RelClause]`.
    fn noun_continuation(
        &mut self,
        number: Number,
        depth: usize,
        may_take_pp: bool,
        class: Option<NounClass>,
        start: usize,
    ) -> Ends {
        let task = self.task;
        let pp = task.spec.pp_prob;
        let after_pp = if may_take_pp {
            let mut ends = self.point(start, 1.0 - pp);
            let phrase = self.prepositional_phrase(depth, start);
            add(&mut ends, &phrase, pp);
            ends
        } else {
            self.point(start, 1.0)
        };
        if depth >= task.spec.clause_depth {
            return after_pp;
        }
        let rc = task.spec.relative_clause_prob;
        self.and_then(&after_pp, |me, at| {
            let mut ends = me.point(at, 1.0 - rc);
            if me.matches(at, me.task.relative_pronoun) {
                let clause = me.relative_clause(number, depth, class, at + 1);
                add(&mut ends, &clause, rc);
            }
            ends
        })
    }

    /// The relative clause's verb phrase, its verb chosen for the modified noun's class.
    fn relative_clause(
        &mut self,
        number: Number,
        depth: usize,
        class: Option<NounClass>,
        start: usize,
    ) -> Ends {
        let task = self.task;
        if !task.classed() {
            return self.verb_phrase(number, depth + 1, None, start);
        }
        let mut out = self.zeros();
        for (choice, p) in task.verb_choices(class) {
            let ends =
                self.verb_phrase(number, depth + 1, Some((choice.kind, choice.index)), start);
            add(&mut out, &ends, p);
        }
        out
    }

    /// VP from `start`: the verb `choice` if made (else every choice, uniformly), its object,
    /// an optional PP.
    fn verb_phrase(
        &mut self,
        number: Number,
        depth: usize,
        choice: Option<(VerbKind, usize)>,
        start: usize,
    ) -> Ends {
        let key = (number, depth, choice, start);
        if let Some(ends) = self.verb_phrases.get(&key) {
            return ends.clone();
        }
        let ends = match choice {
            Some((kind, index)) => {
                self.verb_phrase_of(number, depth, VerbChoice { kind, index }, start)
            }
            None => {
                let mut out = self.zeros();
                for (choice, p) in self.task.verb_choices(None) {
                    let ends = self.verb_phrase_of(number, depth, choice, start);
                    add(&mut out, &ends, p);
                }
                out
            }
        };
        self.verb_phrases.insert(key, ends.clone());
        ends
    }

    fn verb_phrase_of(
        &mut self,
        number: Number,
        depth: usize,
        choice: VerbChoice,
        start: usize,
    ) -> Ends {
        let task = self.task;
        if !self.matches(
            start,
            task.verbs_of(choice.kind).0[choice.index][number.index()],
        ) {
            return self.zeros();
        }
        let plural = task.spec.plural_prob;
        let numbers = [(Number::Singular, 1.0 - plural), (Number::Plural, plural)];
        // An indirect object (no PP of its own), then the direct object, as drawn.
        let after_indirect = if choice.kind == VerbKind::Ditransitive {
            let selects = task
                .classed()
                .then(|| class_bits(task.ditransitive_indirect[choice.index]));
            let mut ends = self.zeros();
            for (indirect_number, p) in numbers {
                let indirect = self.noun_phrase(indirect_number, depth, false, selects, start + 1);
                add(&mut ends, &indirect, p);
            }
            ends
        } else {
            self.point(start + 1, 1.0)
        };
        let after_verb = if choice.kind == VerbKind::Intransitive {
            after_indirect
        } else {
            let selects = task
                .classed()
                .then(|| class_bits(task.frame(choice).object));
            self.and_then(&after_indirect, |me, at| {
                let mut ends = me.zeros();
                for (object_number, p) in numbers {
                    let object = me.noun_phrase(object_number, depth, true, selects, at);
                    add(&mut ends, &object, p);
                }
                ends
            })
        };
        let pp = task.spec.pp_prob;
        self.and_then(&after_verb, |me, at| {
            let mut ends = me.point(at, 1.0 - pp);
            let phrase = me.prepositional_phrase(depth, at);
            add(&mut ends, &phrase, pp);
            ends
        })
    }

    /// PP -> Prep NP (the NP takes no PP).
    fn prepositional_phrase(&mut self, depth: usize, start: usize) -> Ends {
        let task = self.task;
        let p_preposition = self.uniform_word(start, &task.prepositions);
        if p_preposition == 0.0 {
            return self.zeros();
        }
        let plural = task.spec.plural_prob;
        let mut out = self.zeros();
        for (number, p) in [(Number::Singular, 1.0 - plural), (Number::Plural, plural)] {
            let object = self.noun_phrase(number, depth, false, None, start + 1);
            add(&mut out, &object, p * p_preposition);
        }
        out
    }
}

/// The chance that predicting the most probable word of `scores` (each word's probability,
/// or anything proportional to it) gets `truth`: 1 if it alone is the most probable, `1/k`
/// if it is one of `k` tied within a relative 1e-9, else 0.
fn chance_of_being_right(scores: impl IntoIterator<Item = (u32, f64)>, truth: u32) -> f64 {
    let scores: Vec<(u32, f64)> = scores.into_iter().filter(|(_, p)| *p > 0.0).collect();
    let best = scores.iter().map(|(_, p)| *p).fold(0.0, f64::max);
    let tied: Vec<u32> = scores
        .iter()
        .filter(|(_, p)| *p >= best * (1.0 - 1e-9))
        .map(|(w, _)| *w)
        .collect();
    if tied.contains(&truth) {
        1.0 / tied.len() as f64
    } else {
        0.0
    }
}

/// `into += weight * ends`.
fn add(into: &mut Ends, ends: &Ends, weight: f64) {
    for (sum, p) in into.iter_mut().zip(ends) {
        *sum += weight * p;
    }
}

impl GrammarTask {
    /// The probability that the grammar writes a sentence matching `observed` (any word at
    /// a `None`), before rejection on length.
    pub fn probability_of(&self, observed: &Observed) -> f64 {
        if observed.is_empty() {
            return 0.0;
        }
        Inside::new(self, observed).sentence()[observed.len()]
    }

    /// Each choice of verb and its probability, as [`GrammarTask::choose_verb`] makes it for
    /// a subject of `class`.
    fn verb_choices(&self, class: Option<NounClass>) -> Vec<(VerbChoice, f64)> {
        let t = self.spec.transitive_prob;
        let d = self.spec.ditransitive_prob;
        let s = self.spec.selection;
        let mut choices = Vec::new();
        for (kind, p_kind) in [
            (VerbKind::Transitive, t * (1.0 - d)),
            (VerbKind::Ditransitive, t * d),
            (VerbKind::Intransitive, 1.0 - t),
        ] {
            let (verbs, frames) = self.verbs_of(kind);
            let count = verbs.len();
            if count == 0 || p_kind == 0.0 {
                continue;
            }
            let fitting: Vec<bool> = match class.filter(|_| s > 0.0) {
                Some(class) => (0..count)
                    .map(|i| frames[i].subject.contains(&class))
                    .collect(),
                None => vec![false; count],
            };
            let n_fitting = fitting.iter().filter(|f| **f).count();
            for (index, &fits) in fitting.iter().enumerate() {
                let p_index = if n_fitting > 0 {
                    s * f64::from(u8::from(fits)) / n_fitting as f64 + (1.0 - s) / count as f64
                } else {
                    1.0 / count as f64
                };
                choices.push((VerbChoice { kind, index }, p_kind * p_index));
            }
        }
        choices
    }

    /// Each noun's probability, as [`GrammarTask::pick_noun`] draws it for a verb selecting
    /// the classes in `selects` (a bit mask).
    fn noun_probabilities(&self, selects: Option<u8>) -> Vec<f64> {
        let n = self.nouns.len();
        let s = self.spec.selection;
        let fits = |index: usize| {
            let class = self.noun_classes[index];
            selects.is_some_and(|bits| bits & class_bits(&[class]) != 0)
        };
        let n_fitting = match selects.filter(|_| s > 0.0) {
            Some(_) => (0..n).filter(|&i| fits(i)).count(),
            None => 0,
        };
        (0..n)
            .map(|i| {
                if n_fitting > 0 {
                    s * f64::from(u8::from(fits(i))) / n_fitting as f64 + (1.0 - s) / n as f64
                } else {
                    1.0 / n as f64
                }
            })
            .collect()
    }

    /// The posterior of the word at masked position `at` of `observed`: each candidate word
    /// with its probability given everything observed (empty if nothing matches).
    pub fn posterior(&self, observed: &Observed, at: usize) -> Vec<(u32, f64)> {
        let mut fixed = observed.to_vec();
        let mut posterior = Vec::new();
        let mut total = 0.0;
        for word in (MASK + 1)..self.names.len() as u32 {
            fixed[at] = Some(word);
            let p = self.probability_of(&fixed);
            if p > 0.0 {
                posterior.push((word, p));
                total += p;
            }
        }
        for (_, p) in &mut posterior {
            *p /= total;
        }
        posterior
    }

    /// The class of word `id` (`None` for `<pad>` and `<mask>`).
    pub fn word_class_of(&self, id: u32) -> Option<WordClass> {
        let in_pairs = |table: &[[u32; 2]]| table.iter().any(|f| f.contains(&id));
        if self.singular_determiners.contains(&id) || self.plural_determiners.contains(&id) {
            Some(WordClass::Determiner)
        } else if id == self.relative_pronoun {
            Some(WordClass::Relative)
        } else if in_pairs(&self.nouns) {
            Some(WordClass::Noun)
        } else if in_pairs(&self.transitive_verbs)
            || in_pairs(&self.intransitive_verbs)
            || in_pairs(&self.ditransitive_verbs)
        {
            Some(WordClass::Verb)
        } else if self.adjectives.contains(&id) {
            Some(WordClass::Adjective)
        } else if self.prepositions.contains(&id) {
            Some(WordClass::Preposition)
        } else {
            None
        }
    }

    /// The number of noun or verb `id` and the id of the same word in the other number
    /// (`dog`: singular, `dogs`); `None` for every other token.
    pub fn inflection_of(&self, id: u32) -> Option<Inflection> {
        [
            &self.nouns,
            &self.transitive_verbs,
            &self.intransitive_verbs,
            &self.ditransitive_verbs,
        ]
        .into_iter()
        .flatten()
        .find_map(|&[singular, plural]| {
            if id == singular {
                Some(Inflection {
                    plural: false,
                    other_number: plural,
                })
            } else if id == plural {
                Some(Inflection {
                    plural: true,
                    other_number: singular,
                })
            } else {
                None
            }
        })
    }

    /// The Bayes-optimal predictor's accuracy per class of masked word, on the masked
    /// examples of `eval_set(examples, seed)`: for each masked word, the chance that the posterior's most probable word is the
    /// true one (a tie counts as a share), averaged per class.
    pub fn bayes_ceiling(&self, examples: usize, seed: u64) -> Vec<ClassCeiling> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut chances: HashMap<WordClass, Vec<f64>> = HashMap::new();
        for _ in 0..examples {
            let (sentence, example) = self.draw_example(&mut rng);
            let observed: Vec<Option<u32>> = example
                .input
                .iter()
                .map(|&w| (w != MASK).then_some(w))
                .collect();
            for (at, target) in example.target.iter().enumerate() {
                let Some(truth) = *target else { continue };
                let chance = chance_of_being_right(self.posterior(&observed, at), truth);
                if let Some(class) = self.word_class_of(sentence.words[at]) {
                    chances.entry(class).or_default().push(chance);
                }
            }
        }
        WordClass::ALL
            .iter()
            .filter_map(|class| {
                let values = chances.get(class)?;
                let n = values.len() as f64;
                let mean = values.iter().sum::<f64>() / n;
                let variance =
                    values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0).max(1.0);
                Some(ClassCeiling {
                    class: *class,
                    masked: values.len(),
                    accuracy: mean,
                    standard_error: (variance / n).sqrt(),
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    use super::super::GrammarSpec;
    use super::super::lexicon::Lexicon;
    use super::*;

    /// Tiny grammars whose every part still occurs: the animate lexicon, and the classed one
    /// at a middling dose.
    fn tiny_specs() -> Vec<GrammarSpec> {
        let tiny = GrammarSpec {
            nouns: 2,
            transitive_verbs: 2,
            intransitive_verbs: 1,
            adjectives: 2,
            prepositions: 1,
            min_words: 3,
            max_words: 64,
            adjective_prob: 0.3,
            pp_prob: 0.3,
            relative_clause_prob: 0.3,
            plural_prob: 0.4,
            ..GrammarSpec::default()
        };
        vec![
            tiny.clone(),
            GrammarSpec {
                lexicon: Lexicon::Classes,
                nouns: 6,
                transitive_verbs: 3,
                intransitive_verbs: 2,
                selection: 0.7,
                ..tiny.clone()
            },
            // Ditransitive verbs, with their indirect objects' classes selected too.
            GrammarSpec {
                lexicon: Lexicon::Classes,
                nouns: 6,
                transitive_verbs: 2,
                intransitive_verbs: 1,
                ditransitive_prob: 0.5,
                ditransitive_verbs: 2,
                selection: 0.7,
                ..tiny
            },
        ]
    }

    fn task(spec: &GrammarSpec) -> GrammarTask {
        GrammarTask::new(spec).unwrap()
    }

    /// The exact probability of a complete sentence is the generator's own frequency: on
    /// 200,000 draws of each tiny grammar, every sentence drawn at least 400 times (about
    /// 0.2%) is within 5 standard errors of its exact probability, and the exact
    /// probabilities of all sentences drawn add up to the share of draws they cover.
    #[test]
    fn exact_probabilities_are_the_generators_frequencies() {
        for spec in tiny_specs() {
            let task = task(&spec);
            let mut rng = ChaCha8Rng::seed_from_u64(11);
            let draws = 200_000;
            let mut counts: HashMap<Vec<u32>, usize> = HashMap::new();
            for _ in 0..draws {
                *counts
                    .entry(task.draw_unbounded(&mut rng).words)
                    .or_default() += 1;
            }
            let mut checked = 0;
            let mut exact_total = 0.0;
            let (mut frequent_exact, mut frequent_drawn) = (0.0, 0.0);
            for (words, &count) in &counts {
                let observed: Vec<Option<u32>> = words.iter().map(|&w| Some(w)).collect();
                let exact = task.probability_of(&observed);
                assert!(
                    exact > 0.0,
                    "{:?}: a drawn sentence has probability 0",
                    spec.lexicon
                );
                exact_total += exact;
                if count >= 400 {
                    let frequency = count as f64 / draws as f64;
                    let error = (exact * (1.0 - exact) / draws as f64).sqrt();
                    assert!(
                        (frequency - exact).abs() < 5.0 * error,
                        "{:?} {words:?}: drawn {frequency}, exact {exact}",
                        spec.lexicon
                    );
                    checked += 1;
                    frequent_exact += exact;
                    frequent_drawn += frequency;
                }
            }
            assert!(checked >= 20, "{checked} frequent sentences");
            assert!(
                (frequent_exact - frequent_drawn).abs() < 0.01,
                "{frequent_exact} vs {frequent_drawn}"
            );
            assert!(exact_total <= 1.0 + 1e-9, "{exact_total}");
        }
    }

    /// Brute force on the tiny grammars: a masked position's posterior computed with the
    /// other masked positions open equals the one summed over every filling of them with
    /// complete sentences' probabilities; and the sum over a position's words is the
    /// probability with it open.
    #[test]
    fn posteriors_equal_brute_force_over_fillings() {
        for spec in tiny_specs() {
            let task = task(&spec);
            let mut rng = ChaCha8Rng::seed_from_u64(4);
            let words: Vec<u32> = ((MASK + 1)..task.names.len() as u32).collect();
            let mut compared = 0;
            while compared < 30 {
                let sentence = task.draw_unbounded(&mut rng);
                let n = sentence.words.len();
                if !(4..=9).contains(&n) {
                    continue;
                }
                // Two masked positions.
                let (i, j) = (compared % n, (compared * 7 + 3) % n);
                if i == j {
                    compared += 1;
                    continue;
                }
                let mut observed: Vec<Option<u32>> =
                    sentence.words.iter().map(|&w| Some(w)).collect();
                observed[i] = None;
                observed[j] = None;
                let open = task.probability_of(&observed);
                let mut brute: HashMap<u32, f64> = HashMap::new();
                let mut total = 0.0;
                for &a in &words {
                    for &b in &words {
                        let mut filled = observed.clone();
                        filled[i] = Some(a);
                        filled[j] = Some(b);
                        let p = task.probability_of(&filled);
                        *brute.entry(a).or_default() += p;
                        total += p;
                    }
                }
                assert!(
                    (total - open).abs() <= 1e-12 + 1e-9 * open,
                    "{total} vs {open}"
                );
                for (word, p) in task.posterior(&observed, i) {
                    let expected = brute[&word] / total;
                    assert!((p - expected).abs() < 1e-9, "{word}: {p} vs {expected}");
                }
                compared += 1;
            }
        }
    }

    /// The ceiling on a tiny grammar equals the brute-force one: on the same masked
    /// examples, the most probable filling of each masked position found by enumerating
    /// every filling of all masked positions.
    #[test]
    fn the_ceiling_equals_brute_force_on_a_tiny_grammar() {
        for base in &tiny_specs()[1..] {
            ceiling_equals_brute_force(base);
        }
    }

    fn ceiling_equals_brute_force(base: &GrammarSpec) {
        let spec = GrammarSpec {
            max_words: 7,
            min_words: 3,
            mask_fraction: 0.3,
            ..base.clone()
        };
        let task = task(&spec);
        let ceiling = task.bayes_ceiling(120, 9);
        let words: Vec<u32> = ((MASK + 1)..task.names.len() as u32).collect();
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let mut chances: HashMap<WordClass, Vec<f64>> = HashMap::new();
        for _ in 0..120 {
            let (sentence, example) = task.draw_example(&mut rng);
            let masked: Vec<usize> = (0..example.input.len())
                .filter(|&i| example.target[i].is_some())
                .collect();
            if masked.len() > 3 {
                // 19^4 fillings: the brute force is too slow; the ceiling's own code took
                // these into account, so this test compares the rest only.
                continue;
            }
            // Every filling of all masked positions, with its complete sentence's probability.
            let mut marginals: Vec<HashMap<u32, f64>> = vec![HashMap::new(); masked.len()];
            let mut filling = vec![0usize; masked.len()];
            loop {
                let mut observed: Vec<Option<u32>> =
                    example.input.iter().map(|&w| Some(w)).collect();
                for (k, &at) in masked.iter().enumerate() {
                    observed[at] = Some(words[filling[k]]);
                }
                let p = task.probability_of(&observed);
                for (k, marginal) in marginals.iter_mut().enumerate() {
                    *marginal.entry(words[filling[k]]).or_default() += p;
                }
                // Next filling, like an odometer.
                let mut k = 0;
                while k < filling.len() {
                    filling[k] += 1;
                    if filling[k] < words.len() {
                        break;
                    }
                    filling[k] = 0;
                    k += 1;
                }
                if k == filling.len() {
                    break;
                }
            }
            for (k, &at) in masked.iter().enumerate() {
                let truth = sentence.words[at];
                let chance = chance_of_being_right(marginals[k].clone(), truth);
                let class = task.word_class_of(truth).unwrap();
                chances.entry(class).or_default().push(chance);
            }
        }
        // Recompute the ceiling on the same examples, leaving out those the brute force
        // skipped, by running it per example.
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let mut own: HashMap<WordClass, Vec<f64>> = HashMap::new();
        for _ in 0..120 {
            let (sentence, example) = task.draw_example(&mut rng);
            let masked: Vec<usize> = (0..example.input.len())
                .filter(|&i| example.target[i].is_some())
                .collect();
            if masked.len() > 3 {
                continue;
            }
            let observed: Vec<Option<u32>> = example
                .input
                .iter()
                .map(|&w| (w != MASK).then_some(w))
                .collect();
            for &at in &masked {
                let truth = sentence.words[at];
                let chance = chance_of_being_right(task.posterior(&observed, at), truth);
                own.entry(task.word_class_of(truth).unwrap())
                    .or_default()
                    .push(chance);
            }
        }
        assert_eq!(own, chances, "per example, the same chance of being right");
        // And the ceiling itself covers these classes with sensible numbers.
        assert!(!ceiling.is_empty());
        for class in &ceiling {
            assert!((0.0..=1.0).contains(&class.accuracy), "{class:?}");
            assert!(class.standard_error >= 0.0 && class.masked > 0, "{class:?}");
        }
        let determiners = ceiling
            .iter()
            .find(|c| c.class == WordClass::Determiner)
            .unwrap();
        assert!(
            determiners.accuracy < 0.9,
            "determiners are partly guesswork: {determiners:?}"
        );
    }
}
