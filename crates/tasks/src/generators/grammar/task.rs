//! The `grammar` task's `[task]` keys ([`GrammarSpec`]) and its generator ([`GrammarTask`]):
//! the vocabulary built from a lexicon, sentences drawn with their parses, masking, and
//! agreement pairs. The grammar itself is described in [`super`].

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::words::{ClassCeiling, Inflection, WordClass, Words};

use super::lexicon::{
    CLASSED_DITRANSITIVE_VERBS, CLASSED_INTRANSITIVE_VERBS, CLASSED_NOUNS,
    CLASSED_TRANSITIVE_VERBS, CLASSES, Frame, Lexicon, NounClass,
};
use crate::dependency::Arc;
use crate::dependency::ParsedSentence;
use crate::dependency::Relation;
use crate::error::TaskError;
use crate::example::Example;
use crate::generator::Generator;
use crate::pairs::{MAX_TRIES as PAIR_TRIES, MinimalPair, PairKind};
use crate::pattern::AttentionPattern;

use super::animate::{DITRANSITIVE_VERBS, INTRANSITIVE_VERBS, NOUNS, TRANSITIVE_VERBS};
use super::common_words::{ADJECTIVES, DETERMINERS, Number, PREPOSITIONS, RELATIVE_PRONOUN};

/// The token that fills a masked position.
pub(crate) const MASK: u32 = crate::words::MASK_TOKEN;

/// Longest accepted `max_words`: far beyond the defaults, and a bound on the model's positions.
const MAX_WORDS: usize = 64;

/// Deepest accepted `clause_depth`: relative clauses multiply a sentence's length, so deeper
/// nesting only yields sentences that the length range rejects.
const MAX_CLAUSE_DEPTH: usize = 3;

/// Adjectives per noun at most, so that a noun phrase stays short.
pub(crate) const MAX_ADJECTIVES: usize = 2;

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

/// The vocabulary as it is laid out: every token's text, ids handed out in order of adding.
struct Vocabulary {
    names: Vec<&'static str>,
}

impl Vocabulary {
    /// Adds `name`; its id.
    fn add(&mut self, name: &'static str) -> u32 {
        self.names.push(name);
        crate::error::to_id(self.names.len() - 1)
    }

    /// Adds each (singular, plural) pair, singular first; their ids.
    fn add_pairs(
        &mut self,
        pairs: impl IntoIterator<Item = (&'static str, &'static str)>,
    ) -> Vec<[u32; 2]> {
        pairs
            .into_iter()
            .map(|(singular, plural)| [self.add(singular), self.add(plural)])
            .collect()
    }

    /// Adds the determiners; their ids by the number of noun each goes with (one that goes
    /// with either is in both).
    fn add_determiners(&mut self) -> (Vec<u32>, Vec<u32>) {
        let (mut singular, mut plural) = (Vec::new(), Vec::new());
        for (name, number) in DETERMINERS {
            let id = self.add(name);
            if number != Some(Number::Plural) {
                singular.push(id);
            }
            if number != Some(Number::Singular) {
                plural.push(id);
            }
        }
        (singular, plural)
    }

    /// Adds the first `count` ditransitive verbs of the classed lexicon (with their frames
    /// and their indirect objects' classes) or of the animate one (neither).
    fn add_ditransitive_verbs(
        &mut self,
        classed: bool,
        count: usize,
    ) -> (Vec<[u32; 2]>, Vec<Frame>, Vec<&'static [NounClass]>) {
        let (mut verbs, mut frames, mut indirect) = (Vec::new(), Vec::new(), Vec::new());
        for index in 0..count {
            let (singular, plural) = if classed {
                let (s, p, frame, classes) = CLASSED_DITRANSITIVE_VERBS[index];
                frames.push(frame);
                indirect.push(classes);
                (s, p)
            } else {
                DITRANSITIVE_VERBS[index]
            };
            verbs.push([self.add(singular), self.add(plural)]);
        }
        (verbs, frames, indirect)
    }

    /// Adds the first `count` verbs of the classed list (with their frames) when there is
    /// one, else of the animate list (no frames).
    fn add_verbs(
        &mut self,
        classed: Option<&[(&'static str, &'static str, Frame)]>,
        animate: &[(&'static str, &'static str)],
        count: usize,
    ) -> (Vec<[u32; 2]>, Vec<Frame>) {
        match classed {
            Some(list) => {
                let list = &list[..count];
                let ids = self.add_pairs(list.iter().map(|&(s, p, _)| (s, p)));
                (ids, list.iter().map(|&(_, _, frame)| frame).collect())
            }
            None => (self.add_pairs(animate[..count].iter().copied()), Vec::new()),
        }
    }
}

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

fn check_count(field: &'static str, value: usize, available: usize) -> Result<(), TaskError> {
    if (1..=available).contains(&value) {
        Ok(())
    } else {
        let expected = format!("1 <= {field} <= {available}, the length of the built-in list");
        Err(crate::error::out_of_range(field, value, expected))
    }
}

fn check_probability(field: &'static str, value: f64) -> Result<(), TaskError> {
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
fn check_word_counts(spec: &GrammarSpec) -> Result<(), TaskError> {
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
fn check_lengths(spec: &GrammarSpec) -> Result<(), TaskError> {
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
fn check_probabilities(spec: &GrammarSpec) -> Result<(), TaskError> {
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
mod tests {
    use std::collections::HashSet;

    use super::*;

    fn task(spec: &GrammarSpec) -> GrammarTask {
        GrammarTask::new(spec).unwrap()
    }

    /// [`fingerprint`] of the default grammar's first 300 sentences and examples (seed 7).
    const PINNED_DEFAULT_FINGERPRINT: u64 = 0xd1b8_7109_295c_47b4;

    /// Agreement pairs: only the main verb is masked and scored; the changed word is the
    /// subject noun in its other number; the answers are one verb's two forms, the clean one
    /// agreeing with the clean subject; the subject's determiner fits either number; the
    /// rest of the sentence is one the grammar can draw (checked by reparsing nothing: every
    /// other word is the clean sentence's).
    #[test]
    fn agreement_pairs_flip_the_subject_and_the_verb_form() {
        let task = task(&GrammarSpec::default());
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let name = |id: u32| task.names[id as usize];
        for _ in 0..200 {
            let pair = task.minimal_pair(PairKind::Answer, &mut rng).unwrap();
            let (clean, corrupted) = (&pair.clean, &pair.corrupted);
            let scored: Vec<usize> = (0..clean.target.len())
                .filter(|&i| clean.target[i].is_some())
                .collect();
            assert_eq!(scored, [pair.position]);
            assert_eq!(clean.input[pair.position], MASK);
            let [subject] = pair.changed[..] else {
                panic!("one word changes: {pair:?}")
            };
            let noun = task
                .nouns
                .iter()
                .find(|f| f.contains(&clean.input[subject]))
                .expect("the changed word is a noun");
            assert!(noun.contains(&corrupted.input[subject]));
            assert_ne!(clean.input[subject], corrupted.input[subject]);
            let verb = task
                .transitive_verbs
                .iter()
                .chain(&task.intransitive_verbs)
                .find(|f| f.contains(&pair.clean_answer))
                .expect("the answer is a verb");
            let number = usize::from(clean.input[subject] == noun[1]);
            assert_eq!(
                (pair.clean_answer, pair.corrupted_answer),
                (verb[number], verb[1 - number]),
                "{} ... {}",
                name(clean.input[subject]),
                name(pair.clean_answer)
            );
            // The determiner before the subject (if the NP has one right there or after
            // adjectives) is "the" or "some".
            let determiner = (0..subject)
                .rev()
                .find(|&i| {
                    task.singular_determiners.contains(&clean.input[i])
                        || task.plural_determiners.contains(&clean.input[i])
                })
                .unwrap();
            assert!(matches!(name(clean.input[determiner]), "the" | "some"));
        }
        assert!(
            task.minimal_pair(PairKind::Route, &mut rng).is_none(),
            "grammar has no route pairs"
        );
    }

    /// FNV-1a over every id of `sentences` and `examples`, a fingerprint of what was drawn.
    fn fingerprint(sentences: &[ParsedSentence], examples: &[Example]) -> u64 {
        let ids = sentences
            .iter()
            .flat_map(|s| s.words.iter().copied().chain(std::iter::once(u32::MAX)))
            .chain(examples.iter().flat_map(|e| {
                e.input
                    .iter()
                    .copied()
                    .chain(e.target.iter().map(|t| t.unwrap_or(u32::MAX - 1)))
            }));
        ids.fold(0xcbf2_9ce4_8422_2325, |hash, id| {
            (hash ^ u64::from(id)).wrapping_mul(0x0100_0000_01b3)
        })
    }

    /// The default grammar draws exactly the sentences and masks it drew before the classed
    /// lexicon and selection existed (the value pinned on 2026-11-25 from the code of then),
    /// so experiment 6's runs stay reproducible.
    #[test]
    fn the_default_grammar_draws_what_it_always_drew() {
        let task = task(&GrammarSpec::default());
        let print = fingerprint(&task.parsed_sentences(300, 7), &task.eval_set(300, 7));
        assert_eq!(print, PINNED_DEFAULT_FINGERPRINT, "got {print:#x}");
    }

    /// The classed lexicon's full lists at a dose of selection, lengths hardly rejected.
    fn classed(selection: f64) -> GrammarSpec {
        GrammarSpec {
            lexicon: Lexicon::Classes,
            nouns: 36,
            transitive_verbs: 12,
            intransitive_verbs: 6,
            selection,
            ..wide()
        }
    }

    /// Per verb lemma (index into the transitive list), how many objects of each class,
    /// and how many main-clause subjects fit the verb's frame, out of how many.
    fn object_counts(task: &GrammarTask, n: usize) -> (Vec<[usize; 6]>, (usize, usize)) {
        let lemma = |word: u32| task.transitive_verbs.iter().position(|f| f.contains(&word));
        let noun_class = |word: u32| {
            let index = task.nouns.iter().position(|f| f.contains(&word))?;
            Some(task.noun_classes[index])
        };
        let class_index = |class| CLASSES.iter().position(|&c| c == class).unwrap();
        let mut counts = vec![[0usize; 6]; task.transitive_verbs.len()];
        let (mut fitting_subjects, mut subjects) = (0, 0);
        for sentence in task.parsed_sentences(n, 21) {
            for arc in &sentence.arcs {
                let (dependent, head) = (sentence.words[arc.dependent], sentence.words[arc.head]);
                match arc.relation {
                    Relation::Dobj => {
                        let verb = lemma(head).expect("a dobj's head is a transitive verb");
                        counts[verb][class_index(noun_class(dependent).unwrap())] += 1;
                    }
                    Relation::Nsubj if arc.head == sentence.root => {
                        let class = noun_class(dependent).expect("the main subject is a noun");
                        let frame = match lemma(head) {
                            Some(verb) => task.transitive_frames[verb],
                            None => {
                                let verb = task
                                    .intransitive_verbs
                                    .iter()
                                    .position(|f| f.contains(&head))
                                    .unwrap();
                                task.intransitive_frames[verb]
                            }
                        };
                        subjects += 1;
                        fitting_subjects += usize::from(frame.subject.contains(&class));
                    }
                    _ => {}
                }
            }
        }
        (counts, (fitting_subjects, subjects))
    }

    /// Selection 1: no verb ever takes an object (or a main-clause subject) outside its
    /// frame. Selection 0: a verb's objects are the nouns' own distribution, a sixth of each
    /// class whatever the verb (within 0.035 of 1/6 on about 1500 objects per verb).
    /// Selection 0.5: the allowed share is the mixture, 0.5 + 0.5 x (the allowed classes'
    /// share), within 0.05.
    #[test]
    fn selection_is_a_dose_of_fitting_subjects_and_objects() {
        let strict = task(&classed(1.0));
        let (counts, (fitting, subjects)) = object_counts(&strict, 20_000);
        for (verb, classes) in counts.iter().enumerate() {
            let frame = strict.transitive_frames[verb];
            for (class, &count) in CLASSES.iter().zip(classes) {
                if !frame.object.contains(class) {
                    assert_eq!(count, 0, "verb {verb} took a {class:?} object");
                }
            }
            assert!(
                classes.iter().sum::<usize>() > 300,
                "verb {verb}: {classes:?}"
            );
        }
        assert_eq!(fitting, subjects, "every main-clause subject fits its verb");

        let uniform = task(&classed(0.0));
        let (counts, (fitting, subjects)) = object_counts(&uniform, 20_000);
        for (verb, classes) in counts.iter().enumerate() {
            let total: usize = classes.iter().sum();
            for &count in classes {
                let share = count as f64 / total as f64;
                assert!(
                    (share - 1.0 / 6.0).abs() < 0.035,
                    "verb {verb}: {classes:?}"
                );
            }
        }
        let animate_share = fitting as f64 / subjects as f64;
        assert!(
            animate_share < 0.5,
            "subjects ignore the verb: {animate_share}"
        );

        let half = task(&classed(0.5));
        let (counts, _) = object_counts(&half, 20_000);
        for (verb, classes) in counts.iter().enumerate() {
            let frame = half.transitive_frames[verb];
            let allowed: usize = CLASSES
                .iter()
                .zip(classes)
                .filter(|(c, _)| frame.object.contains(c))
                .map(|(_, n)| n)
                .sum();
            let share = allowed as f64 / classes.iter().sum::<usize>() as f64;
            let expected = 0.5 + 0.5 * frame.object.len() as f64 / 6.0;
            assert!(
                (share - expected).abs() < 0.05,
                "verb {verb}: {share} vs {expected}"
            );
        }
    }

    /// At full selection a ditransitive verb's indirect and direct objects are always of
    /// the classes it takes; with ditransitive_prob 1 every verb with an object has two.
    #[test]
    fn ditransitive_verbs_select_both_objects() {
        let spec = GrammarSpec {
            ditransitive_prob: 1.0,
            ditransitive_verbs: 6,
            max_words: MAX_WORDS,
            ..classed(1.0)
        };
        let task = task(&spec);
        let (mut indirect, mut direct) = (0, 0);
        for sentence in task.parsed_sentences(2000, 4) {
            for arc in &sentence.arcs {
                let verb = sentence.words[arc.head];
                let Some(index) = task
                    .ditransitive_verbs
                    .iter()
                    .position(|f| f.contains(&verb))
                else {
                    assert_ne!(
                        arc.relation,
                        Relation::Iobj,
                        "an iobj of a non-ditransitive verb"
                    );
                    if arc.relation == Relation::Dobj {
                        panic!("a transitive verb at ditransitive_prob 1: {sentence:?}");
                    }
                    continue;
                };
                let noun = sentence.words[arc.dependent];
                let class = task
                    .nouns
                    .iter()
                    .position(|f| f.contains(&noun))
                    .map(|n| task.noun_classes[n]);
                match arc.relation {
                    Relation::Iobj => {
                        indirect += 1;
                        let allowed = task.ditransitive_indirect[index];
                        assert!(allowed.contains(&class.unwrap()), "{sentence:?}");
                    }
                    Relation::Dobj => {
                        direct += 1;
                        let allowed = task.ditransitive_frames[index].object;
                        assert!(allowed.contains(&class.unwrap()), "{sentence:?}");
                    }
                    _ => {}
                }
            }
        }
        assert!(indirect > 500 && indirect == direct, "{indirect} {direct}");
    }

    #[test]
    fn selection_needs_the_classed_lexicon_and_every_class() {
        let error = |spec: GrammarSpec| GrammarTask::new(&spec).unwrap_err().to_string();
        let message = error(GrammarSpec {
            selection: 0.5,
            ..GrammarSpec::default()
        });
        assert!(
            message.starts_with(
                "task.selection = 0.5 is out of range: expected selection = 0 \
                                 with the animate lexicon"
            ),
            "{message}"
        );
        assert!(message.contains("lexicon = \"classes\""), "{message}");
        let message = error(GrammarSpec {
            nouns: 5,
            ..classed(1.0)
        });
        assert!(
            message.starts_with("task.nouns = 5 is out of range: expected 6 <= nouns <= 36"),
            "{message}"
        );
        let message = error(GrammarSpec {
            transitive_verbs: 13,
            ..classed(1.0)
        });
        assert!(message.contains("1 <= transitive_verbs <= 12"), "{message}");
        let message = error(classed(1.5));
        assert!(
            message.starts_with("task.selection = 1.5 is out of range"),
            "{message}"
        );
    }

    /// A spec whose length range rejects almost nothing, so that measured frequencies are
    /// the grammar's own.
    fn wide() -> GrammarSpec {
        GrammarSpec {
            min_words: 3,
            max_words: MAX_WORDS,
            ..GrammarSpec::default()
        }
    }

    /// Several specs that exercise every part of the grammar.
    fn varied_specs() -> Vec<GrammarSpec> {
        vec![
            GrammarSpec::default(),
            GrammarSpec {
                clause_depth: 2,
                relative_clause_prob: 0.5,
                pp_prob: 0.4,
                adjective_prob: 0.6,
                ..wide()
            },
            GrammarSpec {
                nouns: 1,
                transitive_verbs: 1,
                intransitive_verbs: 1,
                adjectives: 1,
                prepositions: 1,
                adjective_prob: 0.9,
                plural_prob: 0.9,
                transitive_prob: 0.9,
                ..wide()
            },
            GrammarSpec {
                min_words: 7,
                max_words: 9,
                clause_depth: 3,
                ..GrammarSpec::default()
            },
            GrammarSpec {
                lexicon: Lexicon::Classes,
                nouns: 36,
                transitive_verbs: 12,
                intransitive_verbs: 6,
                selection: 1.0,
                clause_depth: 2,
                relative_clause_prob: 0.4,
                ..wide()
            },
            GrammarSpec {
                lexicon: Lexicon::Classes,
                selection: 0.5,
                ..GrammarSpec::default()
            },
            GrammarSpec {
                ditransitive_prob: 0.5,
                ditransitive_verbs: 6,
                ..GrammarSpec::default()
            },
            GrammarSpec {
                lexicon: Lexicon::Classes,
                selection: 1.0,
                ditransitive_prob: 0.6,
                ditransitive_verbs: 6,
                max_words: 20,
                ..GrammarSpec::default()
            },
        ]
    }

    /// What kind of word a vocabulary entry is.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Category {
        /// `<pad>` or `<mask>`.
        Special,
        /// A determiner and the noun number it goes with (`None`: either).
        Determiner(Option<Number>),
        /// The relative pronoun `that`.
        Relative,
        Noun(Number),
        TransitiveVerb(Number),
        IntransitiveVerb(Number),
        DitransitiveVerb(Number),
        Adjective,
        Preposition,
    }

    /// The class of word `id`, read from the id lists the grammar draws from.
    fn class_of(task: &GrammarTask, id: u32) -> Category {
        let number_in = |pairs: &[[u32; 2]]| {
            pairs
                .iter()
                .find_map(|pair| match pair.iter().position(|&w| w == id) {
                    Some(0) => Some(Number::Singular),
                    Some(_) => Some(Number::Plural),
                    None => None,
                })
        };
        let singular = task.singular_determiners.contains(&id);
        let plural = task.plural_determiners.contains(&id);
        if id < 2 {
            Category::Special
        } else if singular || plural {
            Category::Determiner(match (singular, plural) {
                (true, true) => None,
                (true, false) => Some(Number::Singular),
                _ => Some(Number::Plural),
            })
        } else if id == task.relative_pronoun {
            Category::Relative
        } else if let Some(number) = number_in(&task.nouns) {
            Category::Noun(number)
        } else if let Some(number) = number_in(&task.transitive_verbs) {
            Category::TransitiveVerb(number)
        } else if let Some(number) = number_in(&task.intransitive_verbs) {
            Category::IntransitiveVerb(number)
        } else if let Some(number) = number_in(&task.ditransitive_verbs) {
            Category::DitransitiveVerb(number)
        } else if task.adjectives.contains(&id) {
            Category::Adjective
        } else if task.prepositions.contains(&id) {
            Category::Preposition
        } else {
            panic!("word {id} is in no list of the grammar")
        }
    }

    fn class(task: &GrammarTask, sentence: &ParsedSentence, position: usize) -> Category {
        class_of(task, sentence.words[position])
    }

    fn verb_number(class: Category) -> Option<Number> {
        match class {
            Category::TransitiveVerb(n)
            | Category::IntransitiveVerb(n)
            | Category::DitransitiveVerb(n) => Some(n),
            _ => None,
        }
    }

    fn noun_number(class: Category) -> Option<Number> {
        match class {
            Category::Noun(n) => Some(n),
            _ => None,
        }
    }

    /// The head of each position (`None` at the root).
    fn heads(sentence: &ParsedSentence) -> Vec<Option<(usize, Relation)>> {
        let mut heads = vec![None; sentence.words.len()];
        for arc in &sentence.arcs {
            heads[arc.dependent] = Some((arc.head, arc.relation));
        }
        heads
    }

    fn dependents(sentence: &ParsedSentence, head: usize, relation: Relation) -> usize {
        sentence
            .arcs
            .iter()
            .filter(|arc| arc.head == head && arc.relation == relation)
            .count()
    }

    #[test]
    fn parses_are_trees_rooted_at_the_main_verb() {
        for spec in varied_specs() {
            let task = task(&spec);
            for sentence in task.parsed_sentences(2000, 1) {
                let n = sentence.words.len();
                let dependents: Vec<usize> = sentence.arcs.iter().map(|a| a.dependent).collect();
                let expected: Vec<usize> = (0..n).filter(|&i| i != sentence.root).collect();
                assert_eq!(dependents, expected, "one arc per non-root word, in order");
                for arc in &sentence.arcs {
                    assert!(arc.head < n && arc.head != arc.dependent, "{sentence:?}");
                }
                assert!(verb_number(class(&task, &sentence, sentence.root)).is_some());
                let heads = heads(&sentence);
                for start in 0..n {
                    let mut at = start;
                    let mut steps = 0;
                    while let Some((head, _)) = heads[at] {
                        at = head;
                        steps += 1;
                        assert!(steps < n, "cycle from {start} in {sentence:?}");
                    }
                    assert_eq!(at, sentence.root);
                }
            }
        }
    }

    #[test]
    fn relations_join_the_right_word_classes() {
        use Category::*;
        for spec in varied_specs() {
            let task = task(&spec);
            for sentence in task.parsed_sentences(2000, 2) {
                for arc in &sentence.arcs {
                    let dependent = class(&task, &sentence, arc.dependent);
                    let head = class(&task, &sentence, arc.head);
                    let fits = match arc.relation {
                        Relation::Det => matches!((dependent, head), (Determiner(_), Noun(_))),
                        Relation::Amod => matches!((dependent, head), (Adjective, Noun(_))),
                        Relation::Nsubj => {
                            matches!(dependent, Noun(_) | Relative) && verb_number(head).is_some()
                        }
                        Relation::Dobj => matches!(
                            (dependent, head),
                            (Noun(_), TransitiveVerb(_) | DitransitiveVerb(_))
                        ),
                        Relation::Iobj => {
                            matches!((dependent, head), (Noun(_), DitransitiveVerb(_)))
                        }
                        Relation::Prep => {
                            dependent == Preposition
                                && (matches!(head, Noun(_)) || verb_number(head).is_some())
                        }
                        Relation::Pobj => matches!((dependent, head), (Noun(_), Preposition)),
                        Relation::Relcl => {
                            verb_number(dependent).is_some() && matches!(head, Noun(_))
                        }
                    };
                    assert!(fits, "{arc:?} joins {dependent:?} to {head:?}");
                }
                for (position, &word) in sentence.words.iter().enumerate() {
                    let count = |relation| dependents(&sentence, position, relation);
                    match class_of(&task, word) {
                        Noun(_) => {
                            assert_eq!(count(Relation::Det), 1);
                            assert!(count(Relation::Amod) <= MAX_ADJECTIVES);
                        }
                        TransitiveVerb(_) => {
                            assert_eq!((count(Relation::Nsubj), count(Relation::Dobj)), (1, 1));
                        }
                        IntransitiveVerb(_) => {
                            assert_eq!((count(Relation::Nsubj), count(Relation::Dobj)), (1, 0));
                        }
                        DitransitiveVerb(_) => {
                            let counts =
                                [Relation::Nsubj, Relation::Iobj, Relation::Dobj].map(&count);
                            assert_eq!(counts, [1, 1, 1]);
                            // The indirect object comes between the verb and the direct
                            // object: verb < iobj < dobj.
                            let of = |relation| {
                                sentence
                                    .arcs
                                    .iter()
                                    .find(|a| a.head == position && a.relation == relation)
                                    .map(|a| a.dependent)
                                    .expect("counted above")
                            };
                            assert!(position < of(Relation::Iobj));
                            assert!(of(Relation::Iobj) < of(Relation::Dobj));
                        }
                        Preposition => assert_eq!(count(Relation::Pobj), 1),
                        Special => panic!("{sentence:?} holds <pad> or <mask>"),
                        Determiner(_) | Relative | Adjective => {}
                    }
                }
            }
        }
    }

    #[test]
    fn verbs_and_determiners_agree_with_their_nouns() {
        let mut checked_relative = 0;
        for spec in varied_specs() {
            let task = task(&spec);
            for sentence in task.parsed_sentences(2000, 3) {
                let heads = heads(&sentence);
                for arc in &sentence.arcs {
                    let dependent = class(&task, &sentence, arc.dependent);
                    let head = class(&task, &sentence, arc.head);
                    match (arc.relation, dependent) {
                        (Relation::Nsubj, Category::Noun(number)) => {
                            assert_eq!(verb_number(head), Some(number), "{sentence:?}");
                        }
                        (Relation::Nsubj, Category::Relative) => {
                            // "that"'s verb agrees with the noun the clause modifies.
                            let Some((antecedent, Relation::Relcl)) = heads[arc.head] else {
                                panic!("a relative verb without relcl in {sentence:?}");
                            };
                            let antecedent = class(&task, &sentence, antecedent);
                            assert_eq!(noun_number(antecedent), verb_number(head));
                            checked_relative += 1;
                        }
                        (Relation::Det, Category::Determiner(Some(number))) => {
                            assert_eq!(noun_number(head), Some(number), "{sentence:?}");
                        }
                        (Relation::Relcl, _) => {
                            assert_eq!(verb_number(dependent), noun_number(head));
                        }
                        _ => {}
                    }
                }
            }
        }
        assert!(
            checked_relative > 100,
            "only {checked_relative} relative clauses"
        );
    }

    #[test]
    fn lengths_stay_within_the_configured_range() {
        for spec in varied_specs() {
            let task = task(&spec);
            let range = spec.min_words..=spec.max_words;
            let sentences = task.parsed_sentences(2000, 4);
            let lengths: HashSet<usize> = sentences.iter().map(|s| s.words.len()).collect();
            assert!(lengths.iter().all(|len| range.contains(len)), "{lengths:?}");
            assert!(lengths.len() >= 3.min(range.clone().count()), "{lengths:?}");
            let mut rng = ChaCha8Rng::seed_from_u64(4);
            for _ in 0..500 {
                let example = task.sample(&mut rng);
                assert!(range.contains(&example.input.len()));
                assert_eq!(example.input.len(), example.target.len());
                assert!(example.input.len() <= task.seq_len());
            }
        }
        let default = task(&GrammarSpec::default());
        let sentences = default.parsed_sentences(4000, 5);
        let mean = sentences.iter().map(|s| s.words.len()).sum::<usize>() as f64 / 4000.0;
        assert!((6.0..=10.0).contains(&mean), "mean length {mean}");
    }

    /// Rejection that cannot succeed still ends, with a sentence no longer than max_words.
    #[test]
    fn an_unreachable_range_still_ends_within_max_words() {
        let never = GrammarSpec {
            min_words: 40,
            max_words: 41,
            adjective_prob: 0.0,
            pp_prob: 0.0,
            relative_clause_prob: 0.0,
            ..GrammarSpec::default()
        };
        let task = GrammarTask::unchecked(&never).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(6);
        let sentence = task.draw_sentence(&mut rng);
        assert!(sentence.words.len() <= 41);
        assert_eq!(
            sentence.words.len(),
            5,
            "the longest drawn: Det Noun Verb Det Noun"
        );
        let only_long = GrammarSpec {
            min_words: 3,
            max_words: 3,
            adjective_prob: 1.0,
            ..GrammarSpec::default()
        };
        let task = GrammarTask::unchecked(&only_long).unwrap();
        let sentence = task.draw_sentence(&mut rng);
        assert_eq!(sentence, task.shortest_sentence());
        assert_eq!(sentence.words.len(), 3);
    }

    /// `count` successes out of `trials` lie within four standard errors of `p`.
    fn assert_rate(what: &str, count: usize, trials: usize, p: f64) {
        let rate = count as f64 / trials as f64;
        let se = (p * (1.0 - p) / trials as f64).sqrt();
        assert!(
            (rate - p).abs() <= 4.0 * se + 1e-9,
            "{what}: {rate:.4} over {trials}, expected {p} (se {se:.4})"
        );
    }

    #[test]
    fn frequencies_follow_the_config() {
        let spec = GrammarSpec {
            plural_prob: 0.3,
            transitive_prob: 0.7,
            ditransitive_prob: 0.3,
            adjective_prob: 0.4,
            mask_fraction: 0.25,
            ..wide()
        };
        let task = task(&spec);
        let size = 4000;
        let sentences = task.parsed_sentences(size, 7);
        let examples = task.eval_set(size, 7);

        let subject_of_root = |s: &ParsedSentence| {
            let arc = s
                .arcs
                .iter()
                .find(|a| a.head == s.root && a.relation == Relation::Nsubj);
            arc.map(|a| class(&task, s, a.dependent))
        };
        let plural_subjects = sentences
            .iter()
            .filter(|s| subject_of_root(s) == Some(Category::Noun(Number::Plural)))
            .count();
        assert_rate("plural subjects", plural_subjects, size, spec.plural_prob);

        let transitive = sentences
            .iter()
            .filter(|s| matches!(class(&task, s, s.root), Category::TransitiveVerb(_)))
            .count();
        let ditransitive = sentences
            .iter()
            .filter(|s| matches!(class(&task, s, s.root), Category::DitransitiveVerb(_)))
            .count();
        // Among main verbs with an object, ditransitive_prob have two.
        assert_rate(
            "main verbs with an object",
            transitive + ditransitive,
            size,
            spec.transitive_prob,
        );
        assert_rate(
            "ditransitive among them",
            ditransitive,
            transitive + ditransitive,
            spec.ditransitive_prob,
        );

        // Every noun phrase draws its first adjective with adjective_prob.
        let (mut nouns, mut with_adjective) = (0, 0);
        for sentence in &sentences {
            for (position, &word) in sentence.words.iter().enumerate() {
                if matches!(class_of(&task, word), Category::Noun(_)) {
                    nouns += 1;
                    with_adjective +=
                        usize::from(dependents(sentence, position, Relation::Amod) > 0);
                }
            }
        }
        assert_rate(
            "nouns with an adjective",
            with_adjective,
            nouns,
            spec.adjective_prob,
        );

        // Each word is masked with mask_fraction, plus one where none was: per sentence of n
        // words, n * p + (1 - p)^n masked words are expected.
        let p = spec.mask_fraction;
        let words: usize = sentences.iter().map(|s| s.words.len()).sum();
        let masked: usize = examples
            .iter()
            .map(|e| e.target.iter().flatten().count())
            .sum();
        let expected: f64 = sentences
            .iter()
            .map(|s| {
                let n = s.words.len() as f64;
                n * p + (1.0 - p).powf(n)
            })
            .sum();
        let se = (words as f64 * p * (1.0 - p)).sqrt();
        assert!(
            (masked as f64 - expected).abs() <= 4.0 * se,
            "{masked} of {words} words masked, expected {expected:.0} (se {se:.1})"
        );

        let relations: HashSet<Relation> = sentences
            .iter()
            .flat_map(|s| s.arcs.iter().map(|a| a.relation))
            .collect();
        assert_eq!(
            relations.len(),
            Relation::ALL.len(),
            "every relation occurs"
        );
    }

    #[test]
    fn masking_hides_words_and_targets_them() {
        let task = task(&GrammarSpec::default());
        let sentences = task.parsed_sentences(1000, 8);
        let examples = task.eval_set(1000, 8);
        assert_eq!(sentences.len(), examples.len());
        for (sentence, example) in sentences.iter().zip(&examples) {
            assert_eq!(example.input.len(), sentence.words.len());
            assert!(example.target.iter().any(Option::is_some), "nothing masked");
            for ((&input, &target), &word) in example
                .input
                .iter()
                .zip(&example.target)
                .zip(&sentence.words)
            {
                match target {
                    Some(class) => assert_eq!((input, class), (MASK, word)),
                    None => assert_eq!(input, word),
                }
            }
        }
        let every_word_masked = GrammarSpec {
            mask_fraction: 1.0,
            ..GrammarSpec::default()
        };
        let masked_task = GrammarTask::new(&every_word_masked).unwrap();
        for example in masked_task.eval_set(50, 8) {
            assert!(example.input.iter().all(|&t| t == MASK));
        }
    }

    #[test]
    fn parsed_sentences_are_the_eval_sentences_unmasked() {
        for spec in varied_specs() {
            let task = task(&spec);
            for seed in [0, 9] {
                let sentences = task.parsed_sentences(300, seed);
                let examples = task.eval_set(300, seed);
                assert_eq!(sentences.len(), 300);
                for (sentence, example) in sentences.iter().zip(&examples) {
                    let unmasked: Vec<u32> = example
                        .input
                        .iter()
                        .zip(&example.target)
                        .map(|(&input, target)| target.unwrap_or(input))
                        .collect();
                    assert_eq!(unmasked, sentence.words);
                }
                // A prefix of a longer set is the same set: sentence i is example i.
                assert_eq!(task.parsed_sentences(100, seed), sentences[..100]);
            }
        }
    }

    #[test]
    fn draws_are_deterministic_per_seed() {
        let task = task(&GrammarSpec::default());
        assert_eq!(task.parsed_sentences(200, 1), task.parsed_sentences(200, 1));
        assert_ne!(task.parsed_sentences(200, 1), task.parsed_sentences(200, 2));
        let samples = |seed| {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            (0..200).map(|_| task.sample(&mut rng)).collect::<Vec<_>>()
        };
        assert_eq!(samples(3), samples(3));
        assert_ne!(samples(3), samples(4));
    }

    /// How many relative clauses enclose each verb, at most.
    fn deepest_clause(sentence: &ParsedSentence) -> usize {
        let heads = heads(sentence);
        (0..sentence.words.len())
            .map(|start| {
                let mut at = start;
                let mut depth = 0;
                while let Some((head, relation)) = heads[at] {
                    depth += usize::from(relation == Relation::Relcl);
                    at = head;
                }
                depth
            })
            .max()
            .unwrap_or(0)
    }

    #[test]
    fn clause_depth_bounds_nested_relative_clauses() {
        for clause_depth in 0..=MAX_CLAUSE_DEPTH {
            let spec = GrammarSpec {
                clause_depth,
                relative_clause_prob: 0.5,
                pp_prob: 0.0,
                adjective_prob: 0.0,
                transitive_prob: 0.5,
                ..wide()
            };
            let task = task(&spec);
            let sentences = task.parsed_sentences(2000, 10);
            let deepest = sentences.iter().map(deepest_clause).max().unwrap_or(0);
            assert_eq!(deepest, clause_depth);
            let pronouns = sentences
                .iter()
                .flat_map(|s| &s.words)
                .filter(|&&w| w == task.relative_pronoun)
                .count();
            assert_eq!(pronouns == 0, clause_depth == 0);
        }
    }

    #[test]
    fn vocabulary_has_the_configured_words() {
        let task = task(&GrammarSpec::default());
        assert_eq!(task.input_vocab(), 77);
        assert_eq!(task.output_vocab(), 77);
        assert_eq!(task.seq_len(), 16);
        let names = task.token_names();
        assert_eq!(names.len(), 77);
        assert_eq!(names[..4], ["<pad>", "<mask>", "the", "some"]);
        assert_eq!(names[10], "that");
        assert_eq!(names[11..13], ["dog", "dogs"]);
        assert_eq!(
            names.iter().collect::<HashSet<_>>().len(),
            names.len(),
            "distinct"
        );
        assert_eq!(names.iter().filter(|&n| n == "that").count(), 1);
        assert!(task.solving_patterns().is_empty());
        assert_eq!(
            task.attention_targets(&[2, 11, 3]),
            vec![Vec::<usize>::new(); 3]
        );

        let largest = GrammarSpec {
            nouns: NOUNS.len(),
            transitive_verbs: TRANSITIVE_VERBS.len(),
            intransitive_verbs: INTRANSITIVE_VERBS.len(),
            adjectives: ADJECTIVES.len(),
            prepositions: PREPOSITIONS.len(),
            ..GrammarSpec::default()
        };
        assert_eq!(
            GrammarTask::new(&largest).unwrap().input_vocab(),
            2 + 9 + 48 + 32 + 24 + 16 + 8
        );

        // Every word the grammar writes is within the configured lists.
        let used: HashSet<u32> = task
            .parsed_sentences(3000, 11)
            .iter()
            .flat_map(|s| s.words.clone())
            .collect();
        assert_eq!(used.len(), 75, "every word but <pad> and <mask> occurs");
    }

    /// Where a key of the spec lives, to set it to a bad value.
    type Key<T> = fn(&mut GrammarSpec) -> &mut T;

    #[test]
    fn bad_values_are_refused_by_key() {
        let error = |spec: GrammarSpec| GrammarTask::new(&spec).unwrap_err().to_string();
        let base = GrammarSpec::default();
        assert_eq!(
            error(GrammarSpec {
                nouns: 0,
                ..base.clone()
            }),
            "task.nouns = 0 is out of range: expected 1 <= nouns <= 24, the length of the \
             built-in list"
        );
        assert!(
            error(GrammarSpec {
                nouns: 25,
                ..base.clone()
            })
            .starts_with("task.nouns = 25 ")
        );
        let counts: [(&str, Key<usize>, usize); 4] = [
            ("transitive_verbs", |s| &mut s.transitive_verbs, 16),
            ("intransitive_verbs", |s| &mut s.intransitive_verbs, 12),
            ("adjectives", |s| &mut s.adjectives, 16),
            ("prepositions", |s| &mut s.prepositions, 8),
        ];
        for (key, field, len) in counts {
            for bad in [0, len + 1] {
                let mut spec = base.clone();
                *field(&mut spec) = bad;
                let message = error(spec);
                let prefix =
                    format!("task.{key} = {bad} is out of range: expected 1 <= {key} <= {len}");
                assert!(message.starts_with(&prefix), "{message}");
            }
        }
        assert_eq!(
            error(GrammarSpec {
                min_words: 2,
                ..base.clone()
            }),
            "task.min_words = 2 is out of range: expected 3 <= min_words <= 64 (the shortest \
             sentence, \"the dog sleeps\", has 3 words)"
        );
        assert_eq!(
            error(GrammarSpec {
                max_words: 3,
                ..base.clone()
            }),
            "task.max_words = 3 is out of range: expected min_words (4) <= max_words <= 64"
        );
        assert!(
            error(GrammarSpec {
                max_words: 65,
                ..base.clone()
            })
            .starts_with("task.max_words = 65")
        );
        assert_eq!(
            error(GrammarSpec {
                clause_depth: 4,
                ..base.clone()
            }),
            "task.clause_depth = 4 is out of range: expected 0 <= clause_depth <= 3"
        );
        let probabilities: [(&str, Key<f64>); 5] = [
            ("adjective_prob", |s| &mut s.adjective_prob),
            ("pp_prob", |s| &mut s.pp_prob),
            ("relative_clause_prob", |s| &mut s.relative_clause_prob),
            ("plural_prob", |s| &mut s.plural_prob),
            ("transitive_prob", |s| &mut s.transitive_prob),
        ];
        for (key, field) in probabilities {
            for bad in [-0.1, 1.5, f64::NAN] {
                let mut spec = base.clone();
                *field(&mut spec) = bad;
                assert_eq!(
                    error(spec),
                    format!("task.{key} = {bad} is out of range: expected 0 <= {key} <= 1")
                );
            }
        }
        for bad in [0.0, -0.5, 1.01, f64::NAN] {
            assert_eq!(
                error(GrammarSpec {
                    mask_fraction: bad,
                    ..base.clone()
                }),
                format!(
                    "task.mask_fraction = {bad} is out of range: expected 0 < mask_fraction <= 1"
                )
            );
        }
    }

    #[test]
    fn unreachable_lengths_are_refused_at_build() {
        let bare = GrammarSpec {
            adjective_prob: 0.0,
            pp_prob: 0.0,
            relative_clause_prob: 0.0,
            transitive_prob: 0.0,
            ..GrammarSpec::default()
        };
        // Every sentence is "Det Noun Verb": 3 words, below min_words = 4.
        let message = GrammarTask::new(&bare).unwrap_err().to_string();
        assert!(
            message.starts_with("task.min_words = 4 is out of range: expected"),
            "{message}"
        );
        assert!(
            message.contains("only 0 of 1000 drawn had 4 to 16 words"),
            "{message}"
        );
        assert!(message.contains("lower min_words"), "{message}");
        assert!(
            GrammarTask::new(&GrammarSpec {
                min_words: 3,
                ..bare
            })
            .is_ok()
        );

        let lush = GrammarSpec {
            adjective_prob: 1.0,
            pp_prob: 1.0,
            relative_clause_prob: 1.0,
            transitive_prob: 1.0,
            clause_depth: 3,
            ..GrammarSpec::default()
        };
        let message = GrammarTask::new(&lush).unwrap_err().to_string();
        assert!(
            message.starts_with("task.max_words = 16 is out of range: expected"),
            "{message}"
        );
        assert!(message.contains("raise max_words"), "{message}");
    }

    #[test]
    fn parses_a_grammar_section() {
        #[derive(Debug, Deserialize)]
        struct Config {
            task: crate::TaskConfig,
        }
        let text = "[task]\nkind = \"grammar\"\nnouns = 5\nmin_words = 5\nmax_words = 20\n\
                    pp_prob = 0.5\nclause_depth = 2\n";
        let config: Config = toml::from_str(text).unwrap();
        let expected = GrammarSpec {
            nouns: 5,
            min_words: 5,
            max_words: 20,
            pp_prob: 0.5,
            clause_depth: 2,
            ..GrammarSpec::default()
        };
        assert_eq!(config.task, crate::TaskConfig::Grammar(expected));
        let task = config.task.build(std::path::Path::new(".")).unwrap();
        assert_eq!((task.name(), task.seq_len()), ("grammar", 20));
        assert_eq!(task.input_vocab(), 77 - 2 * 7);

        // The classed lexicon and its dose; a written spec leaves them out at their defaults,
        // so configs of runs from before they existed read back the same.
        let text = "[task]\nkind = \"grammar\"\nlexicon = \"classes\"\nselection = 0.75\n";
        let config: Config = toml::from_str(text).unwrap();
        let crate::TaskConfig::Grammar(spec) = &config.task else {
            panic!("{config:?}")
        };
        assert_eq!((spec.lexicon, spec.selection), (Lexicon::Classes, 0.75));
        let task = config.task.build(std::path::Path::new(".")).unwrap();
        assert_eq!(
            task.input_vocab(),
            77,
            "12 nouns, 8 + 6 verbs: the default sizes"
        );
        let written = toml::to_string(&GrammarSpec::default()).unwrap();
        assert!(
            !written.contains("lexicon") && !written.contains("selection"),
            "{written}"
        );

        let error = toml::from_str::<Config>("[task]\nkind = \"grammar\"\nnoun = 5\n")
            .unwrap_err()
            .to_string();
        assert!(error.contains("unknown field `noun`"), "{error}");
        let wrong =
            toml::from_str::<toml::Table>("kind = \"grammar\"\npp_prob = \"high\"\n").unwrap();
        assert_eq!(
            crate::TaskConfig::key_at_fault(&wrong).as_deref(),
            Some("pp_prob")
        );
    }
}
