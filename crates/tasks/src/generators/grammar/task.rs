//! The `grammar` task's generator ([`GrammarTask`]): the vocabulary laid out from a spec
//! ([`super::spec::GrammarSpec`], [`super::vocabulary`]), sentences drawn with their parses,
//! masking, and agreement pairs. The grammar itself is described in [`super`]; the tests are
//! in `task/tests.rs`.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::words::{ClassCeiling, Inflection, WordClass, Words};

use super::lexicon::{
    CLASSED_INTRANSITIVE_VERBS, CLASSED_NOUNS, CLASSED_TRANSITIVE_VERBS, Frame, Lexicon, NounClass,
};
use crate::dependency::Arc;
use crate::dependency::ParsedSentence;
use crate::dependency::Relation;
use crate::error::TaskError;
use crate::example::Example;
use crate::generator::Generator;
use crate::pairs::{MAX_TRIES as PAIR_TRIES, MinimalPair, PairKind};
use crate::pattern::AttentionPattern;

use super::animate::{INTRANSITIVE_VERBS, NOUNS, TRANSITIVE_VERBS};
use super::common_words::{ADJECTIVES, Number, PREPOSITIONS, RELATIVE_PRONOUN};

use super::spec::{
    GrammarSpec, MAX_ADJECTIVES, check_lengths, check_probabilities, check_word_counts,
};
use super::vocabulary::Vocabulary;

/// The token that fills a masked position.
pub(crate) const MASK: u32 = crate::words::MASK_TOKEN;

/// Draws per sentence before giving up on the length range (see [`GrammarTask::draw_sentence`]).
const MAX_TRIES: usize = 1000;

/// Sentences drawn at build time to check that the length range is reachable.
const REACH_DRAWS: usize = 1000;

/// The fraction of sentences the length range must keep. At 5% the chance that
/// [`MAX_TRIES`] draws all miss is below 1e-22, so the fallback sentence never shows up in
/// practice.
const MIN_REACH_FRACTION: f64 = 0.05;

/// Seeds the build-time reach check: fixed, so a config is accepted or refused every time.
const REACH_SEED: u64 = 0x0067_7261_6d6d_6172; // "grammar" in ASCII

/// The grammar with its vocabulary laid out: ids of each word class, ready to draw from.
#[derive(Debug, Clone)]
pub(crate) struct GrammarTask {
    pub(crate) spec: GrammarSpec,
    /// Every token's text, indexed by id.
    pub(crate) names: Vec<&'static str>,
    pub(crate) singular_determiners: Vec<u32>,
    pub(crate) plural_determiners: Vec<u32>,
    pub(crate) relative_pronoun: u32,
    /// (singular, plural) ids per noun, likewise per verb.
    pub(crate) nouns: Vec<[u32; 2]>,
    pub(crate) transitive_verbs: Vec<[u32; 2]>,
    pub(crate) intransitive_verbs: Vec<[u32; 2]>,
    /// Each noun's class (classed lexicon; empty for the animate one).
    pub(crate) noun_classes: Vec<NounClass>,
    /// Each verb's frame, likewise.
    pub(crate) transitive_frames: Vec<Frame>,
    pub(crate) intransitive_frames: Vec<Frame>,
    /// (singular, plural) ids per ditransitive verb (empty when `ditransitive_prob` is 0),
    /// and (classed lexicon) each one's frame (`object`: the direct object's classes) and
    /// its indirect object's classes.
    pub(crate) ditransitive_verbs: Vec<[u32; 2]>,
    pub(crate) ditransitive_frames: Vec<Frame>,
    pub(crate) ditransitive_indirect: Vec<&'static [NounClass]>,
    pub(crate) adjectives: Vec<u32>,
    pub(crate) prepositions: Vec<u32>,
}

/// How many objects a verb takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum VerbKind {
    Intransitive,
    Transitive,
    Ditransitive,
}

/// A verb chosen before it is written: its kind, and its index in that kind's list.
#[derive(Debug, Clone, Copy)]
pub(crate) struct VerbChoice {
    pub(crate) kind: VerbKind,
    pub(crate) index: usize,
}

/// A sentence being drawn: words in order, and each one's head once it is known (a
/// determiner is written before the noun it depends on).
#[derive(Default)]
struct Draft {
    words: Vec<u32>,
    heads: Vec<Option<(usize, Relation)>>,
}

impl Draft {
    /// Appends `word` and returns its position.
    fn push(&mut self, word: u32) -> usize {
        self.words.push(word);
        self.heads.push(None);
        self.words.len() - 1
    }

    fn attach(&mut self, dependent: usize, head: usize, relation: Relation) {
        self.heads[dependent] = Some((head, relation));
    }

    fn finish(self, root: usize) -> ParsedSentence {
        let arcs = self
            .heads
            .iter()
            .enumerate()
            .filter_map(|(dependent, head)| {
                head.map(|(head, relation)| Arc {
                    dependent,
                    head,
                    relation,
                })
            })
            .collect();
        ParsedSentence {
            words: self.words,
            root,
            arcs,
        }
    }
}

/// A uniformly drawn element of `items`, which validation keeps non-empty.
fn pick<T: Copy>(rng: &mut ChaCha8Rng, items: &[T]) -> T {
    items[rng.random_range(0..items.len())]
}

impl GrammarTask {
    /// Validates every key, lays out the vocabulary, and checks that the grammar writes
    /// sentences within the length range often enough.
    pub(crate) fn new(spec: &GrammarSpec) -> Result<Self, TaskError> {
        let task = Self::unchecked(spec)?;
        task.check_reach()?;
        Ok(task)
    }

    /// Validates each key on its own and lays out the vocabulary, without the reach check.
    fn unchecked(spec: &GrammarSpec) -> Result<Self, TaskError> {
        check_word_counts(spec)?;
        check_lengths(spec)?;
        check_probabilities(spec)?;
        Ok(Self::with_vocabulary(spec))
    }

    /// The task for an already checked `spec`, its vocabulary laid out in the order the
    /// module documents: `<pad>`, `<mask>`, determiners, `that`, nouns, verbs, adjectives,
    /// prepositions, then the ditransitive verbs when `ditransitive_prob` > 0.
    fn with_vocabulary(spec: &GrammarSpec) -> Self {
        let mut vocabulary = Vocabulary {
            names: vec!["<pad>", "<mask>"],
        };
        let (singular_determiners, plural_determiners) = vocabulary.add_determiners();
        let relative_pronoun = vocabulary.add(RELATIVE_PRONOUN);
        let classed = spec.lexicon == Lexicon::Classes;
        let (nouns, noun_classes) = if classed {
            let list = &CLASSED_NOUNS[..spec.nouns];
            let pairs = vocabulary.add_pairs(list.iter().map(|&(s, p, _)| (s, p)));
            (pairs, list.iter().map(|&(_, _, class)| class).collect())
        } else {
            (
                vocabulary.add_pairs(NOUNS[..spec.nouns].iter().copied()),
                Vec::new(),
            )
        };
        let (transitive_verbs, transitive_frames) = vocabulary.add_verbs(
            classed.then_some(&CLASSED_TRANSITIVE_VERBS[..]),
            &TRANSITIVE_VERBS,
            spec.transitive_verbs,
        );
        let (intransitive_verbs, intransitive_frames) = vocabulary.add_verbs(
            classed.then_some(&CLASSED_INTRANSITIVE_VERBS[..]),
            &INTRANSITIVE_VERBS,
            spec.intransitive_verbs,
        );
        let adjectives = ADJECTIVES[..spec.adjectives]
            .iter()
            .map(|&name| vocabulary.add(name))
            .collect();
        let prepositions = PREPOSITIONS[..spec.prepositions]
            .iter()
            .map(|&name| vocabulary.add(name))
            .collect();
        // Last, and only when drawn: every other word keeps the id it always had.
        let count = if spec.ditransitive_prob > 0.0 {
            spec.ditransitive_verbs
        } else {
            0
        };
        let (ditransitive_verbs, ditransitive_frames, ditransitive_indirect) =
            vocabulary.add_ditransitive_verbs(classed, count);
        Self {
            spec: spec.clone(),
            names: vocabulary.names,
            singular_determiners,
            plural_determiners,
            relative_pronoun,
            nouns,
            transitive_verbs,
            intransitive_verbs,
            noun_classes,
            transitive_frames,
            intransitive_frames,
            ditransitive_verbs,
            ditransitive_frames,
            ditransitive_indirect,
            adjectives,
            prepositions,
        }
    }

    /// Refuses a length range that too few sentences land in: rejection sampling would then
    /// spend long on each sentence, or fall back to the shortest one.
    fn check_reach(&self) -> Result<(), TaskError> {
        let (min, max) = (self.spec.min_words, self.spec.max_words);
        let mut rng = ChaCha8Rng::seed_from_u64(REACH_SEED);
        let mut lengths: Vec<usize> = (0..REACH_DRAWS)
            .map(|_| self.draw_unbounded(&mut rng).words.len())
            .collect();
        let shorter = lengths.iter().filter(|&&len| len < min).count();
        let longer = lengths.iter().filter(|&&len| len > max).count();
        let in_range = REACH_DRAWS - shorter - longer;
        if in_range as f64 >= MIN_REACH_FRACTION * REACH_DRAWS as f64 {
            return Ok(());
        }
        lengths.sort_unstable();
        let median = lengths[REACH_DRAWS / 2];
        let (field, value, hint) = if shorter >= longer {
            (
                "min_words",
                min,
                "lower min_words, or raise adjective_prob, pp_prob, relative_clause_prob or \
                 transitive_prob",
            )
        } else {
            (
                "max_words",
                max,
                "raise max_words, or lower adjective_prob, pp_prob, relative_clause_prob, \
                 transitive_prob or clause_depth",
            )
        };
        let expected = format!(
            "a length range that holds at least {percent}% of the sentences the grammar \
             writes, but only {in_range} of {REACH_DRAWS} drawn had {min} to {max} words \
             ({shorter} fewer, {longer} more; median {median}): {hint}",
            percent = MIN_REACH_FRACTION * 100.0,
        );
        Err(crate::error::out_of_range(field, value, expected))
    }

    fn number(&self, rng: &mut ChaCha8Rng) -> Number {
        if rng.random_bool(self.spec.plural_prob) {
            Number::Plural
        } else {
            Number::Singular
        }
    }

    /// A sentence of any length the grammar writes. With the classed lexicon the main verb
    /// is chosen first (written after its subject, as always), so that it can select its
    /// subject; the animate lexicon draws in the order it always has.
    pub(crate) fn draw_unbounded(&self, rng: &mut ChaCha8Rng) -> ParsedSentence {
        let mut draft = Draft::default();
        let number = self.number(rng);
        let choice = self.classed().then(|| self.choose_verb(rng, None));
        let selects = choice.map(|c| self.frame(c).subject);
        let subject = self.noun_phrase(&mut draft, rng, number, 0, true, selects);
        let verb = self.verb_phrase(&mut draft, rng, number, 0, choice);
        draft.attach(subject, verb, Relation::Nsubj);
        draft.finish(verb)
    }

    pub(crate) fn classed(&self) -> bool {
        self.spec.lexicon == Lexicon::Classes
    }

    /// The frame of a chosen verb (classed lexicon only).
    pub(crate) fn frame(&self, choice: VerbChoice) -> Frame {
        match choice.kind {
            VerbKind::Transitive => self.transitive_frames[choice.index],
            VerbKind::Intransitive => self.intransitive_frames[choice.index],
            VerbKind::Ditransitive => self.ditransitive_frames[choice.index],
        }
    }

    /// The verbs of `kind`, as (singular, plural) ids, and (classed lexicon) their frames.
    pub(crate) fn verbs_of(&self, kind: VerbKind) -> (&[[u32; 2]], &[Frame]) {
        match kind {
            VerbKind::Transitive => (&self.transitive_verbs, &self.transitive_frames),
            VerbKind::Intransitive => (&self.intransitive_verbs, &self.intransitive_frames),
            VerbKind::Ditransitive => (&self.ditransitive_verbs, &self.ditransitive_frames),
        }
    }

    /// Whether a verb phrase is transitive, and which verb: uniform, or (classed lexicon,
    /// with probability `selection`) among the verbs that take `subject`'s class as subject,
    /// when any does.
    fn choose_verb(&self, rng: &mut ChaCha8Rng, subject: Option<NounClass>) -> VerbChoice {
        let transitive = rng.random_bool(self.spec.transitive_prob);
        // A draw of its own only when ditransitives are on: the default grammar draws as
        // it always has.
        let kind = if !transitive {
            VerbKind::Intransitive
        } else if self.spec.ditransitive_prob > 0.0 && rng.random_bool(self.spec.ditransitive_prob)
        {
            VerbKind::Ditransitive
        } else {
            VerbKind::Transitive
        };
        let (verbs, frames) = self.verbs_of(kind);
        let count = verbs.len();
        if let Some(class) = subject.filter(|_| self.spec.selection > 0.0) {
            let fitting: Vec<usize> = (0..count)
                .filter(|&i| frames[i].subject.contains(&class))
                .collect();
            if rng.random_bool(self.spec.selection) && !fitting.is_empty() {
                let index = fitting[rng.random_range(0..fitting.len())];
                return VerbChoice { kind, index };
            }
        }
        VerbChoice {
            kind,
            index: rng.random_range(0..count),
        }
    }

    /// A noun's index: uniform over every noun, or (with `selects`, with probability
    /// `selection`) over the nouns of the classes a verb selects.
    fn pick_noun(&self, rng: &mut ChaCha8Rng, selects: Option<&[NounClass]>) -> usize {
        if let Some(classes) = selects.filter(|_| self.spec.selection > 0.0)
            && rng.random_bool(self.spec.selection)
        {
            let fitting: Vec<usize> = (0..self.nouns.len())
                .filter(|&i| classes.contains(&self.noun_classes[i]))
                .collect();
            if !fitting.is_empty() {
                return fitting[rng.random_range(0..fitting.len())];
            }
        }
        rng.random_range(0..self.nouns.len())
    }

    /// A sentence of `min_words..=max_words` words, by rejection. Should [`MAX_TRIES`] draws
    /// all miss (the reach check makes that vanishingly rare), it returns the longest drawn
    /// sentence that is not too long, or else the shortest sentence there is: never more than
    /// `max_words` words, which the model's positions are sized for.
    fn draw_sentence(&self, rng: &mut ChaCha8Rng) -> ParsedSentence {
        let (min, max) = (self.spec.min_words, self.spec.max_words);
        let mut fallback: Option<ParsedSentence> = None;
        for _ in 0..MAX_TRIES {
            let sentence = self.draw_unbounded(rng);
            let len = sentence.words.len();
            if (min..=max).contains(&len) {
                return sentence;
            }
            let closer = fallback.as_ref().is_none_or(|best| len > best.words.len());
            if len < min && closer {
                fallback = Some(sentence);
            }
        }
        fallback.unwrap_or_else(|| self.shortest_sentence())
    }

    /// "the dog sleeps" (in the first words of each class): 3 words, within any `max_words`.
    fn shortest_sentence(&self) -> ParsedSentence {
        let mut draft = Draft::default();
        let determiner = draft.push(self.singular_determiners[0]);
        let noun = draft.push(self.nouns[0][Number::Singular.index()]);
        let verb = draft.push(self.intransitive_verbs[0][Number::Singular.index()]);
        draft.attach(determiner, noun, Relation::Det);
        draft.attach(noun, verb, Relation::Nsubj);
        draft.finish(verb)
    }

    /// `NP -> Det Adj{0,2} Noun [PP] [RelClause]`, of `number`, at clause `depth`, its noun
    /// selected by a verb's `selects` (classed lexicon). Returns the noun's position.
    fn noun_phrase(
        &self,
        draft: &mut Draft,
        rng: &mut ChaCha8Rng,
        number: Number,
        depth: usize,
        may_take_pp: bool,
        selects: Option<&[NounClass]>,
    ) -> usize {
        let determiners = match number {
            Number::Singular => &self.singular_determiners,
            Number::Plural => &self.plural_determiners,
        };
        let determiner = draft.push(pick(rng, determiners));
        let mut adjectives: Vec<(usize, usize)> = Vec::with_capacity(MAX_ADJECTIVES);
        // A second adjective differs from the first: "the big big dog" reads as a typo.
        let max_adjectives = MAX_ADJECTIVES.min(self.adjectives.len());
        while adjectives.len() < max_adjectives && rng.random_bool(self.spec.adjective_prob) {
            let mut taken: Vec<usize> = adjectives.iter().map(|&(_, index)| index).collect();
            taken.sort_unstable();
            // Draw among the untaken, then step over the taken ones below the draw.
            let mut index = rng.random_range(0..self.adjectives.len() - taken.len());
            for taken in taken {
                if index >= taken {
                    index += 1;
                }
            }
            adjectives.push((draft.push(self.adjectives[index]), index));
        }
        let noun_index = self.pick_noun(rng, selects);
        let noun = draft.push(self.nouns[noun_index][number.index()]);
        draft.attach(determiner, noun, Relation::Det);
        for (position, _) in adjectives {
            draft.attach(position, noun, Relation::Amod);
        }
        if may_take_pp && rng.random_bool(self.spec.pp_prob) {
            self.prepositional_phrase(draft, rng, noun, depth);
        }
        if depth < self.spec.clause_depth && rng.random_bool(self.spec.relative_clause_prob) {
            let pronoun = draft.push(self.relative_pronoun);
            // The clause's verb agrees with the noun it modifies, which is its subject, and
            // (classed lexicon) is chosen for it: uniformly when no verb takes the noun's
            // class as subject (a relative clause on a cake draws any verb).
            let choice = self
                .classed()
                .then(|| self.choose_verb(rng, Some(self.noun_classes[noun_index])));
            let verb = self.verb_phrase(draft, rng, number, depth + 1, choice);
            draft.attach(pronoun, verb, Relation::Nsubj);
            draft.attach(verb, noun, Relation::Relcl);
        }
        noun
    }

    /// `VP -> IntransVerb [PP] | TransVerb NP [PP] | DitransVerb NP NP [PP]`, agreeing with a
    /// subject of `number`:
    /// the verb `choice` made beforehand, or one chosen now. Returns the verb's position.
    fn verb_phrase(
        &self,
        draft: &mut Draft,
        rng: &mut ChaCha8Rng,
        number: Number,
        depth: usize,
        choice: Option<VerbChoice>,
    ) -> usize {
        let choice = choice.unwrap_or_else(|| self.choose_verb(rng, None));
        let verb = draft.push(self.verbs_of(choice.kind).0[choice.index][number.index()]);
        if choice.kind == VerbKind::Ditransitive {
            // The indirect object takes no PP: "gives the dog near the tree the cake" would
            // leave a reader (and the parse) to guess where the PP attaches.
            let indirect_number = self.number(rng);
            let selects = self
                .classed()
                .then(|| self.ditransitive_indirect[choice.index]);
            let indirect = self.noun_phrase(draft, rng, indirect_number, depth, false, selects);
            draft.attach(indirect, verb, Relation::Iobj);
        }
        if choice.kind != VerbKind::Intransitive {
            let object_number = self.number(rng);
            let selects = self.classed().then(|| self.frame(choice).object);
            let object = self.noun_phrase(draft, rng, object_number, depth, true, selects);
            draft.attach(object, verb, Relation::Dobj);
        }
        if rng.random_bool(self.spec.pp_prob) {
            self.prepositional_phrase(draft, rng, verb, depth);
        }
        verb
    }

    /// PP -> Prep NP, attached to the word at `head`; the NP takes no PP of its own.
    fn prepositional_phrase(
        &self,
        draft: &mut Draft,
        rng: &mut ChaCha8Rng,
        head: usize,
        depth: usize,
    ) {
        let preposition = draft.push(pick(rng, &self.prepositions));
        draft.attach(preposition, head, Relation::Prep);
        let number = self.number(rng);
        let object = self.noun_phrase(draft, rng, number, depth, false, None);
        draft.attach(object, preposition, Relation::Pobj);
    }

    /// Masks each word with probability `mask_fraction`, and one at random if none was.
    fn mask(&self, words: &[u32], rng: &mut ChaCha8Rng) -> Example {
        let mut masked: Vec<bool> = words
            .iter()
            .map(|_| rng.random_bool(self.spec.mask_fraction))
            .collect();
        // Without a masked word an example would carry no loss at all.
        if !masked.contains(&true) {
            masked[rng.random_range(0..words.len())] = true;
        }
        let input = words
            .iter()
            .zip(&masked)
            .map(|(&word, &hidden)| if hidden { MASK } else { word })
            .collect();
        let target = words
            .iter()
            .zip(&masked)
            .map(|(&word, &hidden)| hidden.then_some(word))
            .collect();
        Example { input, target }
    }

    /// Subject-verb agreement as a minimal pair: a sentence with only its main verb masked,
    /// and the same sentence with the subject noun in its other number, so the verb's form
    /// flips. Sentences where anything else tells the subject's number (a determiner of one
    /// number, a relative clause's verb agreeing with it) are drawn again, so that the
    /// noun is the only evidence; a PP's noun of the other number ("the dog near the cats")
    /// stays, an attractor as in Linzen et al. (2016).
    fn agreement_pair(&self, rng: &mut ChaCha8Rng) -> Option<MinimalPair> {
        let either_number = |word: u32| {
            self.singular_determiners.contains(&word) && self.plural_determiners.contains(&word)
        };
        let forms_of =
            |word: u32, table: &[[u32; 2]]| table.iter().copied().find(|f| f.contains(&word));
        for _ in 0..PAIR_TRIES {
            let sentence = self.draw_sentence(rng);
            let (words, root) = (&sentence.words, sentence.root);
            let Some(subject) = sentence
                .arcs
                .iter()
                .find(|a| a.head == root && a.relation == Relation::Nsubj)
                .map(|a| a.dependent)
            else {
                continue;
            };
            let other_evidence = sentence.arcs.iter().any(|a| {
                a.head == subject
                    && match a.relation {
                        Relation::Det => !either_number(words[a.dependent]),
                        Relation::Relcl => true,
                        _ => false,
                    }
            });
            let verb = forms_of(words[root], &self.transitive_verbs)
                .or_else(|| forms_of(words[root], &self.intransitive_verbs))
                .or_else(|| forms_of(words[root], &self.ditransitive_verbs));
            let (Some(noun), Some(verb), false) =
                (forms_of(words[subject], &self.nouns), verb, other_evidence)
            else {
                continue;
            };
            let example = |words: &[u32], verb_form: u32| Example {
                input: (0..words.len())
                    .map(|i| if i == root { MASK } else { words[i] })
                    .collect(),
                target: (0..words.len())
                    .map(|i| (i == root).then_some(verb_form))
                    .collect(),
            };
            let number = usize::from(words[subject] == noun[1]);
            let clean = example(words, verb[number]);
            let mut flipped = words.clone();
            flipped[subject] = noun[1 - number];
            let corrupted = example(&flipped, verb[1 - number]);
            return MinimalPair::read(clean, corrupted, root, vec![subject]);
        }
        None
    }

    /// One sentence and the example made of it. The one place both are drawn, so that
    /// `parsed_sentences` and `eval_set` consume the rng identically.
    pub(crate) fn draw_example(&self, rng: &mut ChaCha8Rng) -> (ParsedSentence, Example) {
        let sentence = self.draw_sentence(rng);
        let example = self.mask(&sentence.words, rng);
        (sentence, example)
    }
}

impl Generator for GrammarTask {
    fn input_vocab(&self) -> usize {
        self.names.len()
    }

    /// Targets are the masked words' own ids.
    fn output_vocab(&self) -> usize {
        self.names.len()
    }

    fn seq_len(&self) -> usize {
        self.spec.max_words
    }

    fn sample(&self, rng: &mut ChaCha8Rng) -> Example {
        self.draw_example(rng).1
    }

    /// Syntax is scored against each sentence's parse instead (`parsed_sentences`).
    fn solving_patterns(&self) -> Vec<AttentionPattern> {
        Vec::new()
    }

    fn attention_targets(&self, input: &[u32]) -> Vec<Vec<usize>> {
        vec![Vec::new(); input.len()]
    }

    fn words(&self) -> Option<&dyn Words> {
        Some(self)
    }

    /// Agreement pairs ([`GrammarTask::agreement_pair`]); no route pairs.
    fn minimal_pair(&self, kind: PairKind, rng: &mut ChaCha8Rng) -> Option<MinimalPair> {
        match kind {
            PairKind::Answer => self.agreement_pair(rng),
            PairKind::Route => None,
        }
    }
}

impl Words for GrammarTask {
    fn token_names(&self) -> Vec<String> {
        self.names.iter().map(|name| (*name).to_owned()).collect()
    }

    fn ceiling(&self, size: usize, seed: u64) -> Vec<ClassCeiling> {
        self.bayes_ceiling(size, seed)
    }

    fn word_class(&self, id: u32) -> Option<WordClass> {
        self.word_class_of(id)
    }

    fn inflection(&self, id: u32) -> Option<Inflection> {
        self.inflection_of(id)
    }

    /// The sentences of `eval_set(size, seed)`, in order, unmasked: the same rng draws the
    /// same sentences and masks, and only the masks are dropped.
    fn parsed_sentences(&self, size: usize, seed: u64) -> Vec<ParsedSentence> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        (0..size).map(|_| self.draw_example(&mut rng).0).collect()
    }
}

#[cfg(test)]
mod tests;
