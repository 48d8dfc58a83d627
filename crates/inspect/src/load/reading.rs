//! How a model reads its input, decided once, when its run is loaded ([`Reading`]): a model
//! headlab trained reads its task's token ids; an imported checkpoint reads word pieces
//! through its own tokenizer, and what it attends to is taken back to words
//! ([`crate::load::words`]). Every measure has one entry point that takes the reading with
//! its [`crate::load::context::MeasureContext`] and asks it for its input: the probe
//! ([`Reading::probe`]), parsed sentences ([`Reading::relation_sentences`], read in chunks by
//! [`ReadSentences::each_chunk`]), a sentence with one word masked
//! ([`Reading::mask_word`]), minimal pairs ([`Reading::read_pairs`]), the masked words of the
//! relation ablation ([`Reading::masked_relation_words`]) and the examples the output layer
//! is scored on ([`Reading::scoring`]). This file is the one place that tells the two
//! readings apart. A model that reads word pieces is probed with its task's sentences or with
//! natural text ([`ProbeSentences`]): a treebank's parsed sentences, or sentences a user typed,
//! which have no parse, so relations are scored on a treebank's alone and a typed probe's
//! report says why it has none ([`Reading::relations_absent`]). The reading is chosen once, as
//! its run loads ([`Reading::chosen`]), and has no method that changes it.

use std::path::{Path, PathBuf};

use burn::prelude::*;
use hf::tokenizer::WordPieces;
use model::Encoder;
use run::ResolvedRun;
use run::tensor_file::HostTensor;
use tasks::batch::{Batch, EVAL_CHUNK};
use tasks::conllu::TreebankSentence;
use tasks::{Example, MinimalPair, PairKind, ParsedSentence, Task};

use crate::load::masked_words::MaskedWords;
use crate::load::own_pairs::PairsFile;
use crate::load::piece_pairs::{MaskedWord, PiecePairs, mask_in_pieces};
use crate::load::probe::{Probe, ProbeSizeError};
use crate::load::probe_choice::{ProbeChoice, TypedInput};
use crate::load::sentences::{
    EncodedTree, ParsedPieces, PieceProbeError, PieceSentences, ProbeSentences,
};
use crate::load::text::{self, ProbeSource};
use crate::load::typed::TypedSentences;

/// Sentences per forward pass when a model reads its task's tokens: bounds the cached
/// activations held at once ([`PieceSentences::each_chunk`] has its own, for pieces).
const TOKEN_CHUNK: usize = 64;

/// How a model reads its input, decided by the run's files (whether it holds a
/// `tokenizer.json`), never by where the model came from.
#[derive(Debug)]
pub enum Reading {
    /// Its task's token ids, the words at positions `0..n` (the toys headlab trains).
    Tokens,
    /// Word pieces through its tokenizer, `[CLS]` before the words (an imported checkpoint).
    Pieces(Box<PieceReading>),
}

/// What a model that reads word pieces reads with.
#[derive(Debug)]
pub struct PieceReading {
    /// The checkpoint's tokenizer (`tokenizer.json` in the run).
    pub tokenizer: WordPieces,
    /// Its mask piece (`[MASK]`, `<mask>`), where it has one.
    pub mask: Option<u32>,
    /// The most pieces one sequence may hold (the model's positions).
    pub max_positions: usize,
    /// The sentences to probe with instead of the task's, as the tokenizer read them: the
    /// shipped treebank's by default, a treebank file's ([`ProbeChoice::Treebank`]) or typed
    /// ones ([`ProbeChoice::Text`]); `None`: the task's ([`ProbeChoice::Task`]).
    pub sentences: Option<ProbeSentences>,
    /// Where the probe's sentences come from (for a task probe, without its overrides: the
    /// loaded run holds those).
    pub source: ProbeSource,
}

/// Why a report has no relation scores though its model reads text, as data: the report says
/// it in words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RelationsAbsent {
    /// The probe is sentences a user typed, which have no parse.
    TypedText,
}

/// A reading that cannot do what was asked: what was wrong with the probe asked for (the
/// run, the sentences, the treebank, the size), as data; the report's command line names the
/// flags that asked for it.
#[derive(Debug, thiserror::Error)]
pub enum ReadingError {
    /// A treebank given to a model that reads its task's tokens.
    #[error("a treebank probe needs a model that reads text: {run} reads its task's own tokens")]
    TreebankForTokens {
        /// The run directory.
        run: PathBuf,
    },
    /// Sentences that cannot be read as word pieces.
    #[error(transparent)]
    Pieces(#[from] PieceProbeError),
    /// A probe over the memory bound.
    #[error(transparent)]
    Size(#[from] ProbeSizeError),
    /// A treebank that cannot be read.
    #[error(transparent)]
    Treebank(#[from] tasks::conllu::ConlluError),
    /// Typed sentences for a model that reads its task's tokens.
    #[error("typed sentences need a model that reads text: {run} reads its task's own tokens")]
    TextForTokens {
        /// The run directory.
        run: PathBuf,
    },
    /// A pairs file (`inspect --pairs`) that cannot be read or does not line up.
    #[error(transparent)]
    OwnPairs(#[from] crate::load::own_pairs::PairsFileError),
    /// Written pairs for a model that cannot score their masked word.
    #[error("--pairs needs a model that predicts a masked word: {run} {why}")]
    PairsNotScored {
        /// The run directory.
        run: PathBuf,
        /// What it is instead.
        why: String,
    },
    /// Typed sentences that cannot be read.
    #[error(transparent)]
    Typed(#[from] crate::load::typed::TypedTextError),
    /// A typed sentence longer than the model's positions.
    #[error(
        "{sentence} is {pieces} word pieces as {tokenizer} reads it, [CLS] and [SEP] included; \
         the model has {max_positions} positions: shorten it or split it (nothing is cut)"
    )]
    TypedTooLong {
        /// The sentence, by the name its caller gave it ([`TypedInput::names`]).
        sentence: String,
        /// Its pieces.
        pieces: usize,
        /// The tokenizer file.
        tokenizer: String,
        /// The model's positions.
        max_positions: usize,
    },
    /// A treebank's word that the tokenizer reads as no piece at all.
    #[error(
        "{path}{line}: word {word} ({form:?}) is no word piece at all as {tokenizer} reads it \
         (it drops the word: a zero-width or control character?), so no attention can reach \
         it; leave the word or its sentence out of the file"
    )]
    WordWithoutPiece {
        /// The treebank.
        path: String,
        /// `:LINE`, the word's line, where known.
        line: String,
        /// The word's ID in its sentence (1-based).
        word: usize,
        /// Its FORM.
        form: String,
        /// The tokenizer file.
        tokenizer: String,
    },
    /// A treebank that cannot be read to be hashed.
    #[error("cannot read {path}: {error}")]
    TreebankFile {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        error: std::io::Error,
    },
}

/// `trees` (read from `path`) as `tokenizer` reads their words, the first word it reads as no
/// piece refused, naming its line: the measures would find no position for it.
fn encoded_file(
    trees: Vec<TreebankSentence>,
    path: &Path,
    tokenizer: &WordPieces,
) -> Result<Vec<EncodedTree>, ReadingError> {
    let mut encoded = vec![];
    for tree in trees {
        let read = EncodedTree::of(tree, tokenizer).map_err(PieceProbeError::from)?;
        let tree = &read.tree;
        if let Some(word) = read.encoded.first_word_without_piece(tree.words.len()) {
            return Err(ReadingError::WordWithoutPiece {
                path: path.display().to_string(),
                line: tree
                    .lines
                    .get(word)
                    .map_or(String::new(), |l| format!(":{l}")),
                word: word + 1,
                form: tree.words[word].clone(),
                tokenizer: tokenizer.path().display().to_string(),
            });
        }
        encoded.push(read);
    }
    Ok(encoded)
}

/// The shipped treebank's sentences where `keep` marks them (all for `None`), as `tokenizer`
/// reads their words.
fn encoded_shipped(
    keep: Option<&[bool]>,
    tokenizer: &WordPieces,
) -> Result<Vec<EncodedTree>, ReadingError> {
    let mut trees = text::shipped_sentences();
    if let Some(keep) = keep {
        // `retain` visits the sentences in order: one mask entry each.
        let mut keep = keep.iter();
        trees.retain(|_| keep.next().copied().unwrap_or(false));
    }
    let encoded: Result<Vec<EncodedTree>, _> = (trees.into_iter())
        .map(|tree| EncodedTree::of(tree, tokenizer))
        .collect();
    Ok(encoded.map_err(PieceProbeError::from)?)
}

/// What the output layer is scored on, and what a report leaves out.
#[derive(Debug, Clone)]
pub struct Scoring {
    /// The examples the output layer is scored on; none where it is not.
    pub eval: Option<Vec<Example>>,
    /// Per example of `eval`, its sentence: a task's examples are each their own; a model
    /// that reads pieces has one example per word of each probe sentence, side by side.
    /// Resampling a head takes its output from another sentence
    /// ([`crate::interventions::ablation::donors`]).
    pub sentence_of: Vec<usize>,
    /// What the report leaves out, each with why.
    pub left_out: Vec<String>,
}

/// What the report of an imported `BertModel` leaves out, and why.
pub const LEFT_OUT_NO_HEAD: &str = "eval accuracy, ablation drops (zero, mean, resample), \
     direct logit attribution, gradient importance, pruning, the logit lens and the causal \
     tests on minimal pairs (patching): they score the output layer on masked words, and a base model (BertModel, RobertaModel, ...) has no \
     prediction head (a masked LM, BertForMaskedLM, RobertaForMaskedLM, ..., has)";

/// What the report of a masked LM read through its word pieces (an imported checkpoint or
/// a text model trained here) leaves out, and why, with the passes it would cost for its
/// `heads` (all layers').
pub fn left_out_reading_pieces(heads: usize) -> String {
    format!(
        "the Bayes ceiling: it reads a task's own output classes, and this model predicts \
         word pieces; greedy pruning ({} passes over the masked words for its {heads} heads, \
         H (H + 1) / 2; 2628 for all-MiniLM-L6-v2's 72: the ranked order is measured), \
         head-to-head path patching (layer to layer is measured) and head patching at each \
         position (whole heads are measured), which cost a pass per pair of heads or per \
         head and position",
        heads * (heads + 1) / 2
    )
}

/// Whether `model` has a prediction head over its pieces: an imported masked LM's (its
/// prediction transform), or the output layer of a model trained here on text through its
/// tokenizer (its task's classes are the pieces). An imported base model's output layer is
/// only its tied embeddings.
fn predicts_pieces(model: &Encoder, run: &ResolvedRun) -> bool {
    model.output_transform.is_some() || run.task.tokenizer_json().is_some()
}

/// Minimal pairs as the model reads them.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadPairs {
    /// The pairs kept.
    pub pairs: Vec<MinimalPair>,
    /// Pairs left out because they do not line up in the model's pieces; `None` for a model
    /// that reads its task's tokens, which reads every pair.
    pub left_out: Option<usize>,
}

/// Masked words of parsed sentences, for the relation ablation: the examples, and for every
/// scored position (in example order, then position) the sentence and word it hides.
#[derive(Debug, Clone)]
pub struct MaskedSentenceWords {
    /// The masked examples.
    pub examples: Vec<Example>,
    /// Per scored position: (sentence in `trees`, word, 0-based).
    pub targets: Vec<(usize, usize)>,
    /// The sentences, unmasked.
    pub trees: Vec<TreebankSentence>,
}

/// Parsed sentences as the model reads them (see [`Reading::relation_sentences`]).
#[derive(Debug, Clone)]
pub enum ReadSentences {
    /// Task sentences as token ids.
    Tokens {
        /// Each sentence's word ids.
        ids: Vec<Vec<u32>>,
        /// The sentences as trees of named words.
        trees: Vec<TreebankSentence>,
    },
    /// Parsed sentences as word pieces.
    Pieces(ParsedPieces),
}

/// The sentences of the treebank at `path` (CoNLL-U) as `tokenizer` reads them, and the file
/// as the report names it.
fn treebank_file(
    path: &Path,
    tokenizer: &WordPieces,
) -> Result<(Vec<EncodedTree>, ProbeSource), ReadingError> {
    let trees = encoded_file(tasks::conllu::read(path)?, path, tokenizer)?;
    let source = ProbeSource::file(path).map_err(|error| ReadingError::TreebankFile {
        path: path.to_path_buf(),
        error,
    })?;
    Ok((trees, source))
}

/// Sentences the user typed (`input`: each with the name a message gives it, and the file
/// they were read from, for the report), their words the tokenizer's own
/// ([`crate::load::typed`]), and where they came from as the report names it: refused for a
/// sentence over the model's `max_positions` in pieces. Sentences of several lengths are
/// read together, padded to the longest ([`crate::load::probe::LayerProbe::lengths`]).
fn typed_text(
    input: &TypedInput,
    tokenizer: &WordPieces,
    max_positions: usize,
) -> Result<(TypedSentences, ProbeSource), ReadingError> {
    let typed = crate::load::typed::sentences_of(input, tokenizer)?;
    for (sentence, name) in typed.sentences.iter().zip(&input.names) {
        let pieces = sentence.encoded.ids.len();
        if pieces > max_positions {
            return Err(ReadingError::TypedTooLong {
                sentence: name.clone(),
                pieces,
                tokenizer: tokenizer.path().display().to_string(),
                max_positions,
            });
        }
    }
    let source = ProbeSource::TypedText {
        file: input.file.clone(),
        sentences: input.texts.clone(),
        unknown_words: typed.unknown_words.clone(),
    };
    Ok((typed, source))
}

impl Reading {
    /// The reading of a model that reads its task's tokens (one made in memory, say).
    pub fn of_task_tokens() -> Self {
        Reading::Tokens
    }

    /// The reading of `run` (in the directory `dir`, which messages name) probed as `choice`
    /// says: its tokenizer's pieces where the run holds one (`tokenizer`), probed by default
    /// with the shipped treebank's natural text ([`crate::load::text`]), else its task's
    /// tokens. The one way a reading is made, and it is not changed afterwards; a treebank's
    /// or typed sentences are read by the tokenizer here, once.
    pub fn chosen(
        run: &ResolvedRun,
        tokenizer: Option<WordPieces>,
        choice: &ProbeChoice,
        dir: &Path,
    ) -> Result<Self, ReadingError> {
        let Some(tokenizer) = tokenizer else {
            // Refused before a file is read.
            let run = dir.to_path_buf();
            return match choice {
                ProbeChoice::Treebank(_) => Err(ReadingError::TreebankForTokens { run }),
                ProbeChoice::Text(_) => Err(ReadingError::TextForTokens { run }),
                _ => Ok(Reading::Tokens),
            };
        };
        let max_positions = run.io.max_seq_len;
        let (sentences, source) = match choice {
            ProbeChoice::Own | ProbeChoice::OwnSentences { .. } => {
                let trees = encoded_shipped(choice.kept(), &tokenizer)?;
                let sentences = ProbeSentences::Treebank(trees);
                (Some(sentences), ProbeSource::shipped())
            }
            // The grammar's sentences instead of the shipped treebank.
            ProbeChoice::Task { .. } => (None, ProbeSource::default()),
            ProbeChoice::Treebank(path) => {
                let (trees, source) = treebank_file(path, &tokenizer)?;
                (Some(ProbeSentences::Treebank(trees)), source)
            }
            ProbeChoice::Text(input) => {
                let (typed, source) = typed_text(input, &tokenizer, max_positions)?;
                (Some(ProbeSentences::Typed(typed)), source)
            }
        };
        Ok(Reading::Pieces(Box::new(PieceReading {
            mask: tokenizer.mask_id(),
            tokenizer,
            max_positions,
            sentences,
            source,
        })))
    }

    /// Where the probe comes from, a task probe with `task_overrides`.
    pub fn probe_source(&self, task_overrides: &[String]) -> ProbeSource {
        match self {
            Reading::Pieces(pieces) if pieces.sentences.is_some() => pieces.source.clone(),
            _ => ProbeSource::Task {
                overrides: task_overrides.to_vec(),
            },
        }
    }

    /// Whether the model reads text (word pieces), so it can be probed with any sentences.
    pub fn reads_text(&self) -> bool {
        matches!(self, Reading::Pieces(_))
    }

    /// For a model probed with a treebank's sentences: whether it fits each (its pieces within
    /// its positions), in the treebank's order; none for a model that reads its task's
    /// tokens or sentences, or typed ones. A comparison probes every model with the sentences
    /// all of them fit ([`ProbeChoice::OwnSentences`]).
    pub fn treebank_fits(&self) -> Option<Vec<bool>> {
        let Reading::Pieces(pieces) = self else {
            return None;
        };
        let Some(ProbeSentences::Treebank(trees)) = &pieces.sentences else {
            return None;
        };
        let fits = trees
            .iter()
            .map(|t| t.encoded.ids.len() <= pieces.max_positions);
        Some(fits.collect())
    }

    /// The tokenizer of an imported model; none for a model that reads its task's tokens.
    pub fn tokenizer(&self) -> Option<&WordPieces> {
        match self {
            Reading::Tokens => None,
            Reading::Pieces(pieces) => Some(&pieces.tokenizer),
        }
    }

    /// Why the report has no relation scores though the model reads text: its probe is typed
    /// sentences, which have no parse; `None` otherwise.
    pub fn relations_absent(&self) -> Option<RelationsAbsent> {
        match self {
            Reading::Pieces(pieces) => match pieces.sentences {
                Some(ProbeSentences::Typed(_)) => Some(RelationsAbsent::TypedText),
                _ => None,
            },
            Reading::Tokens => None,
        }
    }

    /// Whether the measures that cost one pass per head and position, or per pair of heads
    /// (greedy pruning, head-to-head path patching, head patching at each position), run:
    /// for headlab's models; an imported model's 72 heads and more would take thousands.
    pub fn per_head_detail(&self) -> bool {
        matches!(self, Reading::Tokens)
    }

    /// Whether the model's outputs are its task's own classes (what the Bayes ceiling
    /// reads); an imported model predicts word pieces.
    pub fn outputs_task_classes(&self) -> bool {
        matches!(self, Reading::Tokens)
    }

    /// Whether reading a task's words can leave some out (a word that is not one piece),
    /// so a measure says how many it left out.
    pub fn may_leave_words_out(&self) -> bool {
        matches!(self, Reading::Pieces(_))
    }

    /// The probe of `size` sequences, checked against the memory bound of `runs` runs
    /// probed together before the model runs on it: the task's own tokens (`seed` the run's),
    /// or its sentences (or the treebank's) read as words, whose length in pieces is known
    /// only once they are read.
    pub fn probe(
        &self,
        run: &ResolvedRun,
        (size, seed): (usize, u64),
        runs: usize,
        device: &Device,
    ) -> Result<Probe, ReadingError> {
        Probe::check_size(size, run, runs)?; // the empty probe, and the bound in words
        let probe = match self {
            Reading::Tokens => Probe::of_tokens(&run.task, size, seed, device),
            Reading::Pieces(pieces) => Probe::of_pieces(
                &run.task,
                pieces.sentences.as_ref(),
                &pieces.tokenizer,
                (size, seed),
                pieces.max_positions,
                device,
            )?,
        };
        // Checked for the sequences it holds: a probe of one typed sentence of 510 words is
        // one sequence, whatever `size` allowed.
        Probe::check_size_at(probe.len(), run, runs, probe.forward_len())?;
        Ok(probe)
    }

    /// Parsed sentences to score relations on: `count` of `task`'s, drawn from `seed` (a
    /// measure's stream), or for a model probed with a treebank its first `treebank_count`.
    /// `None` for a task without parses, and for typed sentences, which have none.
    pub fn relation_sentences(
        &self,
        task: &Task,
        (count, treebank_count): (usize, usize),
        seed: u64,
    ) -> Result<Option<ReadSentences>, ReadingError> {
        if let Reading::Pieces(pieces) = self {
            match &pieces.sentences {
                Some(ProbeSentences::Typed(_)) => return Ok(None),
                Some(ProbeSentences::Treebank(trees)) => {
                    let trees = trees[..trees.len().min(treebank_count)].to_vec();
                    let (tokenizer, max) = (&pieces.tokenizer, pieces.max_positions);
                    let read = ParsedPieces::of_treebank(trees, tokenizer, max)?;
                    return Ok(Some(ReadSentences::Pieces(read)));
                }
                None => {}
            }
        }
        let sentences = task.parsed_sentences(count, seed);
        if sentences.is_empty() {
            return Ok(None);
        }
        Ok(Some(match self {
            Reading::Tokens => {
                let trees = task_trees(task, &sentences);
                let ids = sentences.into_iter().map(|s| s.words).collect();
                ReadSentences::Tokens { ids, trees }
            }
            Reading::Pieces(pieces) => ReadSentences::Pieces(ParsedPieces::of_task(
                task,
                sentences,
                &pieces.tokenizer,
                pieces.max_positions,
            )?),
        }))
    }

    /// The first `count` sentences of the shipped treebank's development set as the model
    /// reads them, where it reads a treebank (a text run or an import probed with one): what
    /// relations over training choose heads on. `None` for any other reading.
    pub fn dev_sentences(&self, count: usize) -> Result<Option<ReadSentences>, ReadingError> {
        let Reading::Pieces(pieces) = self else {
            return Ok(None);
        };
        if !matches!(pieces.sentences, Some(ProbeSentences::Treebank(_))) {
            return Ok(None);
        }
        let mut trees = crate::load::text::shipped_dev_sentences();
        trees.truncate(count);
        let path = Path::new(crate::load::text::SHIPPED_DEV_FILE);
        let encoded = encoded_file(trees, path, &pieces.tokenizer)?;
        let read = ParsedPieces::of_treebank(encoded, &pieces.tokenizer, pieces.max_positions)?;
        Ok(Some(ReadSentences::Pieces(read)))
    }

    /// The mask a word is hidden behind: the task's `<mask>` token, or the `[MASK]` piece.
    pub fn mask(&self) -> Result<u32, ReadingError> {
        match self {
            Reading::Tokens => Ok(Task::MASK_TOKEN),
            Reading::Pieces(pieces) => pieces.mask.ok_or_else(|| {
                let tokenizer = pieces.tokenizer.path().display().to_string();
                ReadingError::Pieces(PieceProbeError::NoMaskPiece { tokenizer })
            }),
        }
    }

    /// The task sentence `input` (ids named by `names`) with `answer` at word `position`,
    /// that word masked: as it is for a model that reads the task's tokens; read as pieces
    /// for an imported one, `None` where the word is not one piece or the sentence does not
    /// fit ([`mask_in_pieces`]).
    pub fn mask_word(
        &self,
        example: &Example,
        names: &[String],
        (position, answer): (usize, u32),
    ) -> Result<Option<MaskedWord>, ReadingError> {
        match self {
            Reading::Tokens => Ok(Some(MaskedWord {
                example: example.clone(),
                position,
                answer,
            })),
            Reading::Pieces(pieces) => Ok(mask_in_pieces(
                &example.input,
                names,
                (position, answer),
                &pieces.tokenizer,
                self.mask()?,
                pieces.max_positions,
            )?),
        }
    }

    /// The id the model predicts for the task's word `word` (named by `names`): the word's
    /// own id, or its piece where it is one piece of the vocabulary.
    pub fn answer_id(&self, names: &[String], word: u32) -> Option<u32> {
        match self {
            Reading::Tokens => Some(word),
            Reading::Pieces(pieces) => pieces.tokenizer.id(&names[word as usize]),
        }
    }

    /// `pairs` of `kind` as the model reads them: as drawn for a model that reads its task's
    /// tokens; for an imported one the answer pairs of a task of words read as its pieces
    /// ([`PiecePairs`]), `None` for other kinds and tasks.
    pub fn read_pairs(
        &self,
        task: &Task,
        kind: PairKind,
        pairs: Vec<MinimalPair>,
    ) -> Result<Option<ReadPairs>, ReadingError> {
        match self {
            Reading::Tokens => Ok(Some(ReadPairs {
                pairs,
                left_out: None,
            })),
            Reading::Pieces(pieces) => {
                let (PairKind::Answer, Some(names)) = (kind, task.token_names()) else {
                    return Ok(None);
                };
                let read = PiecePairs::of(
                    &pairs,
                    &names,
                    &pieces.tokenizer,
                    self.mask()?,
                    pieces.max_positions,
                )?;
                Ok(Some(ReadPairs {
                    pairs: read.pairs,
                    left_out: Some(read.left_out),
                }))
            }
        }
    }

    /// The pairs of `file` as the model of `run` (in `dir`) reads them: in its word pieces,
    /// the masked word its mask piece. Refused for a model that reads its task's tokens, a
    /// base model (no prediction head) and a tokenizer without a mask piece, each said.
    pub fn read_own_pairs(
        &self,
        file: &PairsFile,
        model: &Encoder,
        run: &ResolvedRun,
        dir: &Path,
    ) -> Result<Vec<MinimalPair>, ReadingError> {
        let not_scored = |why: &str| ReadingError::PairsNotScored {
            run: dir.to_path_buf(),
            why: why.to_string(),
        };
        let Reading::Pieces(pieces) = self else {
            return Err(not_scored(
                "reads its task's own tokens, and its task's pairs are patched already                  (patching.json's answer and route sections)",
            ));
        };
        if !predicts_pieces(model, run) {
            return Err(not_scored(
                "is a base model (BertModel, RobertaModel, ...), which has no prediction head;                  import the masked LM (BertForMaskedLM, RobertaForMaskedLM, ...)",
            ));
        }
        Ok(file.in_pieces(&pieces.tokenizer, self.mask()?, pieces.max_positions)?)
    }

    /// The masked words a relation's best heads are taken out on: for a model that reads its
    /// task's tokens, `examples` of the task's masked examples drawn from `seed` (sentence
    /// `i` is example `i` unmasked); for an imported masked-LM, every word of the first
    /// `first_sentences` of `sentences` masked alone in all its pieces, each piece a target.
    pub fn masked_relation_words(
        &self,
        task: &Task,
        sentences: &ReadSentences,
        (examples, seed): (usize, u64),
        first_sentences: usize,
    ) -> Result<MaskedSentenceWords, ReadingError> {
        match (self, sentences) {
            (Reading::Pieces(_), ReadSentences::Pieces(parsed)) => {
                let mut first = parsed.clone();
                first.truncate(first.trees.len().min(first_sentences));
                let words = MaskedWords::of(&first.pieces, self.mask()?);
                let targets = words
                    .examples
                    .iter()
                    .zip(&words.masked)
                    .flat_map(|(example, &at)| {
                        let pieces = example.target.iter().filter(|t| t.is_some()).count();
                        std::iter::repeat_n(at, pieces)
                    })
                    .collect();
                Ok(MaskedSentenceWords {
                    examples: words.examples,
                    targets,
                    trees: first.trees,
                })
            }
            _ => {
                let masked = task.eval_set(examples, seed);
                let trees = task_trees(task, &task.parsed_sentences(examples, seed));
                let targets = masked
                    .iter()
                    .enumerate()
                    .flat_map(|(e, example)| {
                        let scored = example.target.iter().enumerate();
                        scored.filter_map(move |(at, t)| t.is_some().then_some((e, at)))
                    })
                    .collect();
                Ok(MaskedSentenceWords {
                    examples: masked,
                    targets,
                    trees,
                })
            }
        }
    }

    /// What `model`'s output layer is scored on: a model headlab trained on its task's tokens
    /// on the task's evaluation set (`eval`, made only then); a masked LM that reads pieces
    /// (imported, or trained here on text) on `probe`'s sentences,
    /// each word masked alone ([`MaskedWords`]), when its tokenizer has a `[MASK]` piece
    /// and a chunk of them fits the memory bound; an imported `BertModel` is not scored.
    pub fn scoring(
        &self,
        model: &Encoder,
        run: &ResolvedRun,
        probe: &Probe,
        eval: impl FnOnce() -> Vec<Example>,
    ) -> Scoring {
        let not_scored = |left_out: Vec<String>| Scoring {
            eval: None,
            sentence_of: vec![],
            left_out,
        };
        let (Reading::Pieces(reading), Some(pieces)) = (self, &probe.pieces) else {
            let eval = eval();
            return Scoring {
                sentence_of: (0..eval.len()).collect(),
                eval: Some(eval),
                left_out: vec![],
            };
        };
        if !predicts_pieces(model, run) {
            return not_scored(vec![LEFT_OUT_NO_HEAD.to_string()]);
        }
        let heads = model.n_heads() * model.blocks.len();
        let left_out_because = |why: String| {
            let what = LEFT_OUT_NO_HEAD.split(": they").next().unwrap_or_default();
            vec![
                format!("{what}, patching and agreement: {why}"),
                left_out_reading_pieces(heads),
            ]
        };
        let Some(mask) = reading.mask else {
            let file = reading.tokenizer.path().display();
            return not_scored(left_out_because(format!(
                "{file} has no mask piece ([MASK] or <mask>)"
            )));
        };
        let masked = MaskedWords::of(pieces, mask);
        let chunk = masked.len().clamp(1, EVAL_CHUNK);
        if let Err(e) = Probe::check_size_at(chunk, run, 1, probe.forward_len()) {
            let why = format!("a chunk of {chunk} masked sentences is over the memory bound ({e})");
            return not_scored(left_out_because(why));
        }
        Scoring {
            sentence_of: masked
                .masked
                .iter()
                .map(|&(sentence, _)| sentence)
                .collect(),
            eval: Some(masked.examples),
            left_out: vec![left_out_reading_pieces(heads)],
        }
    }
}

/// A task's parsed `sentences` as trees of named words (a grammar's words always have names;
/// ids stand in otherwise).
fn task_trees(task: &Task, sentences: &[ParsedSentence]) -> Vec<TreebankSentence> {
    let names: Vec<String> = task
        .token_names()
        .unwrap_or_else(|| (0..task.input_vocab()).map(|id| id.to_string()).collect());
    sentences
        .iter()
        .map(|sentence| TreebankSentence::of_parsed(sentence, &names))
        .collect()
}

impl ReadSentences {
    /// Sentences left out because the model's positions cannot hold their pieces; none for
    /// a task's tokens.
    pub fn too_long(&self) -> usize {
        match self {
            ReadSentences::Pieces(read) => read.pieces.too_long,
            ReadSentences::Tokens { .. } => 0,
        }
    }

    /// The sentences, as trees of named words.
    pub fn trees(&self) -> &[TreebankSentence] {
        match self {
            ReadSentences::Tokens { trees, .. } => trees,
            ReadSentences::Pieces(parsed) => &parsed.trees,
        }
    }

    /// How many.
    pub fn len(&self) -> usize {
        self.trees().len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.trees().is_empty()
    }

    /// A copy with the words `masks` hides (one mask per sentence, one flag per word)
    /// replaced by `mask` ([`Reading::mask`]): a word's token, or every one of its pieces
    /// (whole-word masking; positions and word spans stay as they were).
    pub fn masked(&self, masks: &[Vec<bool>], mask: u32) -> Self {
        match self {
            ReadSentences::Tokens { ids, trees } => ReadSentences::Tokens {
                ids: ids
                    .iter()
                    .zip(masks)
                    .map(|(words, hidden)| {
                        let each = words.iter().zip(hidden);
                        each.map(|(&word, &hide)| if hide { mask } else { word })
                            .collect()
                    })
                    .collect(),
                trees: trees.clone(),
            },
            ReadSentences::Pieces(parsed) => {
                let mut masked = parsed.clone();
                for (encoded, hidden) in masked.pieces.encoded.iter_mut().zip(masks) {
                    for (id, word) in encoded.ids.iter_mut().zip(&encoded.words) {
                        if word.is_some_and(|w| hidden[w]) {
                            *id = mask;
                        }
                    }
                }
                ReadSentences::Pieces(masked)
            }
        }
    }

    /// Runs `model` on the sentences a chunk at a time and calls `each` with the chunk's
    /// word-level attention (one tensor per layer, `[chunk, heads, seq, seq]`, shorter
    /// sentences padded), the indices of its sentences in [`ReadSentences::trees`], row by
    /// row (task tokens in order; pieces shortest first), and the position of their first
    /// word (0 for task tokens; 1 for pieces, after `[CLS]`).
    pub fn each_chunk(
        &self,
        model: &Encoder,
        device: &Device,
        mut each: impl FnMut(&[HostTensor], &[usize], usize),
    ) {
        match self {
            ReadSentences::Tokens { ids, .. } => {
                for (chunk, words) in ids.chunks(TOKEN_CHUNK).enumerate() {
                    let start = chunk * TOKEN_CHUNK;
                    let rows: Vec<usize> = (start..start + words.len()).collect();
                    let examples: Vec<Example> = words
                        .iter()
                        .map(|words| Example {
                            input: words.clone(),
                            target: vec![None; words.len()],
                        })
                        .collect();
                    // Padded to the chunk's longest sentence, the padding masked as keys.
                    let batch = Batch::new(&examples, device);
                    let (_, cache) = model.forward_with_cache(batch.encoder_input());
                    let patterns: Vec<HostTensor> = cache
                        .layers
                        .into_iter()
                        .map(|layer| HostTensor::of(layer.pattern)) // [chunk, heads, seq, seq]
                        .collect();
                    each(&patterns, &rows, 0);
                }
            }
            ReadSentences::Pieces(parsed) => {
                (parsed.pieces).each_chunk(model, device, |patterns, rows| each(patterns, rows, 1));
            }
        }
    }

    /// The sentences as word pieces, for a model that reads them.
    pub fn pieces(&self) -> Option<&PieceSentences> {
        match self {
            ReadSentences::Tokens { .. } => None,
            ReadSentences::Pieces(parsed) => Some(&parsed.pieces),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grammar() -> Task {
        tasks::TaskConfig::Grammar(tasks::GrammarSpec::default())
            .build(Path::new("."))
            .expect("the default grammar builds")
    }

    #[test]
    fn a_treebank_is_refused_for_a_model_that_reads_tokens_before_it_is_read() {
        let config = Path::new(testkit::TINY_CONFIG);
        let run = run::RunConfig::load(config, &[])
            .unwrap()
            .resolve(config)
            .unwrap();
        let choice = ProbeChoice::Treebank("/no/such/file.conllu".into());
        let error = Reading::chosen(&run, None, &choice, Path::new("runs/copy")).unwrap_err();
        assert!(
            matches!(&error, ReadingError::TreebankForTokens { run } if run == Path::new("runs/copy")),
            "{error}"
        );
        assert_eq!(
            error.to_string(),
            "a treebank probe needs a model that reads text: runs/copy reads its task's own tokens"
        );
    }

    /// The tiny test config, with `positions` positions, and the one-layer BERT fixture's
    /// tokenizer.
    fn tiny_reading_pieces(positions: usize) -> (ResolvedRun, WordPieces) {
        let config = Path::new(testkit::TINY_CONFIG);
        let mut run = run::RunConfig::load(config, &[])
            .unwrap()
            .resolve(config)
            .unwrap();
        run.io.max_seq_len = positions;
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../model/tests/fixtures");
        let tokenizer = WordPieces::read(&fixtures.join("bert/one-layer/tokenizer.json"));
        (run, tokenizer.unwrap())
    }

    #[test]
    fn typed_text_is_its_own_probe_with_no_relations_to_score() {
        let (run, tokenizer) = tiny_reading_pieces(16);
        let input = TypedInput {
            texts: vec!["the dog sees the cat.".into()],
            names: vec!["--text \"the dog sees the cat.\"".into()],
            file: None,
        };
        let choice = ProbeChoice::Text(input);
        let reading = Reading::chosen(&run, Some(tokenizer), &choice, Path::new("bert")).unwrap();
        assert_eq!(reading.relations_absent(), Some(RelationsAbsent::TypedText));
        assert_eq!(reading.treebank_fits(), None, "no treebank to fit");
        let sentences = reading.relation_sentences(&run.task, (5, 5), 0).unwrap();
        assert!(sentences.is_none(), "no parse, no relation sentences");
        let probe = reading.probe(&run, (4, 0), 1, &Device::flex()).unwrap();
        assert_eq!(probe.len(), 1);
        assert_eq!(
            probe.punctuation(),
            Some(vec![vec![]]),
            "no labels, no punctuation"
        );
    }

    #[test]
    fn a_treebank_is_read_once_and_a_comparison_keeps_what_every_model_fits() {
        let (run, tokenizer) = tiny_reading_pieces(16);
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../tasks/tests/fixtures/ud-sample.conllu");
        let choice = ProbeChoice::Treebank(path.clone());
        let reading = Reading::chosen(&run, Some(tokenizer.clone()), &choice, Path::new("bert"));
        let reading = reading.unwrap();
        assert_eq!(reading.relations_absent(), None);
        let fits = reading.treebank_fits().expect("a treebank");
        let trees = tasks::conllu::read(&path).unwrap();
        assert_eq!(fits.len(), trees.len());
        // As the tokenizer reads each sentence's words now.
        for (tree, fits) in trees.iter().zip(&fits) {
            let words: Vec<&str> = tree.words.iter().map(String::as_str).collect();
            let pieces = tokenizer.encode_words(&words).unwrap().ids.len();
            assert_eq!(*fits, pieces <= 16, "{words:?}");
        }
        // The shipped treebank narrowed as a comparison chooses: its first and third sentences.
        let keep = [true, false, true];
        let choice = ProbeChoice::OwnSentences {
            keep: keep.to_vec(),
        };
        let kept = Reading::chosen(&run, Some(tokenizer), &choice, Path::new("bert")).unwrap();
        assert_eq!(kept.treebank_fits().map(|f| f.len()), Some(2));
        assert_eq!(kept.probe_source(&[]), ProbeSource::shipped());
    }

    #[test]
    fn task_sentences_are_masked_word_by_word_and_keep_their_trees() {
        let task = grammar();
        let sentences = Reading::Tokens
            .relation_sentences(&task, (5, 5), 9)
            .unwrap()
            .expect("the grammar has parses");
        assert_eq!(sentences.len(), 5);
        let masks: Vec<Vec<bool>> = sentences
            .trees()
            .iter()
            .map(|t| (0..t.words.len()).map(|w| w % 2 == 1).collect())
            .collect();
        let masked = sentences.masked(&masks, Task::MASK_TOKEN);
        let (ReadSentences::Tokens { ids, trees }, ReadSentences::Tokens { ids: hidden, .. }) =
            (&sentences, &masked)
        else {
            panic!("a model that reads tokens reads token sentences")
        };
        assert_eq!(masked.trees(), trees.as_slice(), "the trees stay whole");
        for (whole, hidden) in ids.iter().zip(hidden) {
            for (w, (&word, &read)) in whole.iter().zip(hidden).enumerate() {
                let expected = if w % 2 == 1 { Task::MASK_TOKEN } else { word };
                assert_eq!(read, expected);
            }
        }
    }

    #[test]
    fn the_relation_ablation_words_of_task_tokens_are_the_masked_examples_words() {
        let task = grammar();
        let sentences = Reading::Tokens
            .relation_sentences(&task, (1, 1), 0)
            .unwrap()
            .unwrap();
        let words = Reading::Tokens
            .masked_relation_words(&task, &sentences, (50, 4), 0)
            .unwrap();
        assert_eq!((words.examples.len(), words.trees.len()), (50, 50));
        let names = task.token_names().unwrap();
        // In example order then position; each target hides its sentence's word.
        let mut expected = vec![];
        for (e, example) in words.examples.iter().enumerate() {
            for (at, target) in example.target.iter().enumerate() {
                if let Some(word) = target {
                    expected.push((e, at));
                    assert_eq!(words.trees[e].words[at], names[*word as usize]);
                }
            }
        }
        assert!(!expected.is_empty());
        assert_eq!(words.targets, expected);
    }
}
