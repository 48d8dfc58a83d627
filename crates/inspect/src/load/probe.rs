//! The probe batch: a fixed, seeded set of sequences from the run's task, and what every
//! layer's attention does on it, copied to the host for measuring. Its size is checked
//! against the run before anything is allocated ([`Probe::check_size`]).
//!
//! A drawn probe holds sequences of one length, so that its positions line up across
//! sequences (a position's mean attention, a role's offset). For tasks whose examples vary
//! in length (`grammar`), [`Probe::of_tokens`] draws
//! [`CANDIDATES_PER_SEQUENCE`] times the size asked for, takes the most common length (ties:
//! the longer) and keeps the first `size` sequences of that length, in drawing order. For
//! tasks of one length that is the first `size` drawn, as before: generators draw
//! sequentially from the seed, so a longer draw starts with the shorter one.
//!
//! Typed sentences are the user's own and are all read, whatever their lengths: the
//! shorter are padded to the longest, each layer's [`LayerProbe::lengths`] says which
//! positions are real, and every measure reads those only (a padded position is no query
//! and no key).
//!
//! A probe is made by the model's reading ([`crate::load::reading::Reading::probe`]), which
//! checks its size and picks the task's tokens or word pieces.

use burn::prelude::*;
use hf::tokenizer::WordPieces;
use model::memory::forward_values_per_sequence;
use model::{Encoder, EncoderInput};
use run::ResolvedRun;
use run::config::MAX_TENSOR_VALUES;
use run::tensor_file::HostTensor;
use tasks::batch::{Batch, mix_seed};
use tasks::conllu::TreebankSentence;
use tasks::{Example, Task};

use crate::load::sentences::{ParsedPieces, PieceProbeError, PieceSentences, ProbeSentences};
use crate::load::words::{WordSpans, word_patterns};

/// The name of the id that pads a probe of words of several lengths (typed sentences) in
/// its `tokens` and `activations.safetensors`.
pub const PAD_NAME: &str = "[PAD]";

/// `examples`' inputs row-major `[batch * seq]` at the longest one's length, the shorter
/// padded with `pad` (0 where none is given: then every example has one length).
fn padded_ids(examples: &[Example], pad: Option<u32>) -> impl Iterator<Item = u32> + '_ {
    let longest = examples.iter().map(|e| e.input.len()).max().unwrap_or(0);
    let pad = pad.unwrap_or(0);
    examples
        .iter()
        .flat_map(move |e| (0..longest).map(move |i| e.input.get(i).copied().unwrap_or(pad)))
}

/// Stream of the probe batch, apart from training batches and the evaluation set.
const PROBE_STREAM: u64 = u64::MAX - 1;

/// Candidates drawn per probe sequence asked for, when looking for sequences of one length.
pub const CANDIDATES_PER_SEQUENCE: usize = 16;

/// Most bytes the probe's forward pass may hold (see [`Probe::max_size`]): 1 GiB. The
/// report keeps about three copies of the cached part at its peak (the layers on the host,
/// the activations map and its encoded file), so inspect stays within a few GiB; the
/// default probe of 64 sequences is far below it for headlab's models.
pub const MAX_PROBE_BYTES: u128 = 1 << 30;

// A probe within the byte budget has no tensor over train's per-tensor cap either.
const _: () = assert!(MAX_PROBE_BYTES / 4 <= MAX_TENSOR_VALUES);

/// A probe batch size that cannot be used for a run: the size asked for and what it would
/// hold, as data (the report's command line names its flag).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProbeSizeError {
    /// No sequences.
    #[error("a probe needs at least one sequence")]
    Empty,
    /// More than [`MAX_PROBE_BYTES`] of activations.
    #[error(
        "a probe of {size} sequences is too large for {}; {}",
        over_the_bound(*.runs, *.bytes),
        match *.max {
            0 => "even one sequence is over it".to_string(),
            max => format!("the largest accepted is {max} sequences"),
        }
    )]
    TooLarge {
        /// The size asked for.
        size: usize,
        /// The largest accepted (0: even one sequence is over the bound).
        max: usize,
        /// Runs probed together.
        runs: usize,
        /// Bytes the size asked for would take (saturating).
        bytes: u128,
    },
}

impl ProbeSizeError {
    /// For a probe too large, whom it was for and what its forward pass would hold, in
    /// words: "this run: the forward pass would hold about 1.0 GiB of activations, over the
    /// 1 GiB allowed"; `None` for an empty probe.
    pub fn over_the_bound(&self) -> Option<String> {
        match self {
            ProbeSizeError::Empty => None,
            ProbeSizeError::TooLarge { runs, bytes, .. } => Some(over_the_bound(*runs, *bytes)),
        }
    }
}

/// [`ProbeSizeError::over_the_bound`] of a probe of `runs` runs that would hold `bytes`.
fn over_the_bound(runs: usize, bytes: u128) -> String {
    let whom = match runs {
        1 => "this run".to_string(),
        runs => format!("these {runs} runs"),
    };
    format!(
        "{whom}: the forward pass would hold about {:.1} GiB of activations, over the {} GiB \
         allowed",
        bytes as f64 / (1u64 << 30) as f64,
        MAX_PROBE_BYTES >> 30,
    )
}

/// The probe sequences, the same for every report on a run and every snapshot of it.
#[derive(Debug, Clone)]
pub struct Probe {
    /// The examples.
    pub examples: Vec<Example>,
    /// Their input tokens on the device, `[batch, seq]`.
    pub tokens: Tensor<2, Int>,
    /// The task's name for each token id ([`Task::token_names`]), for figure labels;
    /// `None` for tasks of numbers.
    pub token_names: Option<Vec<String>>,
    /// For a model that reads word pieces (an imported one): the sentences as its pieces.
    /// Then `examples` and `tokens` are word-level (`[CLS]`, the words, `[SEP]`), and
    /// [`Probe::forward`] takes the model's attention back to words.
    pub pieces: Option<PieceSentences>,
    /// For a probe of words, each sentence's punctuation at its word-level positions
    /// ([`Probe::punctuation`]); empty for a probe of a task's tokens.
    punctuation: Vec<Vec<usize>>,
    /// The id that pads the shorter sequences ([`Probe::pad_id`]).
    pad: Option<u32>,
}

impl Probe {
    /// `size` sequences of one length drawn from `task` with the run's `seed` (see the
    /// module doc). The file task has a fixed eval split: its first `size` records. Fewer
    /// than `size` when the split, or the most common length, has fewer.
    pub(crate) fn of_tokens(task: &Task, size: usize, seed: u64, device: &Device) -> Self {
        let seed = mix_seed(seed, PROBE_STREAM);
        let mut examples = task.eval_set(size, seed);
        examples.truncate(size);
        // Only a task whose sequences vary needs the larger draw (a large probe of a
        // fixed-length task would otherwise generate 16 times its size for nothing).
        if examples
            .iter()
            .any(|e| e.input.len() != examples[0].input.len())
        {
            let candidates = task.eval_set(size.saturating_mul(CANDIDATES_PER_SEQUENCE), seed);
            examples = of_one_length(candidates, size);
        }
        // One length: no padding, so `tokens` is the whole `[batch, seq]` input.
        let tokens = Batch::new(&examples, device).tokens;
        Self {
            examples,
            tokens,
            token_names: task.token_names(),
            pieces: None,
            punctuation: vec![],
            pad: None,
        }
    }

    /// The probe of a model that reads word pieces: `size` of `task`'s parsed sentences,
    /// or of `sentences` when given (a treebank's or typed ones, read by `tokenizer` when its
    /// reading was chosen), with one number of words (the most common, ties the longer, as
    /// [`Probe::of_tokens`] picks; for a treebank's sentences, among those that fit
    /// `max_positions` pieces and are at least the median length, [`typical_sentences`];
    /// typed sentences are the first `size`, whatever their lengths) as [`PieceSentences`]
    /// (fewer when some are over `max_positions` pieces). Its examples are word-level: the
    /// sentences' word ids ([`PieceSentences::names`]), with `[CLS]` and `[SEP]` as the two
    /// ids after them, named so in `token_names` (and [`PAD_NAME`] after them where typed
    /// sentences differ in length).
    pub(crate) fn of_pieces(
        task: &Task,
        sentences: Option<&ProbeSentences>,
        tokenizer: &WordPieces,
        (size, seed): (usize, u64),
        max_positions: usize,
        device: &Device,
    ) -> Result<Self, PieceProbeError> {
        let (pieces, punctuation) = match sentences {
            Some(sentences) => given_pieces(sentences, tokenizer, size, max_positions)?,
            None => {
                let candidates = size.saturating_mul(CANDIDATES_PER_SEQUENCE);
                let parsed = task.parsed_sentences(candidates, mix_seed(seed, PROBE_STREAM));
                let lengths: Vec<usize> = parsed.iter().map(|s| s.words.len()).collect();
                let keep: Vec<usize> = of_most_common_length(&lengths, size).collect();
                let chosen = keep.iter().map(|&i| parsed[i].clone()).collect();
                let parsed = ParsedPieces::of_task(task, chosen, tokenizer, max_positions)?;
                let punctuation = parsed.trees.iter().map(punctuation_of).collect();
                (parsed.pieces, punctuation)
            }
        };
        let vocab = pieces.names.len() as u32;
        let (cls, sep) = (vocab, vocab + 1);
        let examples: Vec<Example> = pieces
            .ids
            .iter()
            .map(|ids| {
                let mut input = vec![cls];
                input.extend(ids);
                input.push(sep);
                Example {
                    target: vec![None; input.len()],
                    input,
                }
            })
            .collect();
        let mut token_names = pieces.names.clone();
        token_names.extend(pieces.special_names());
        // Sentences of several lengths (typed text) are padded to the longest with an id of
        // their own, named `[PAD]`, so no word stands for the padding.
        let longest = examples.iter().map(|e| e.input.len()).max().unwrap_or(0);
        let pad = (examples.iter().any(|e| e.input.len() < longest)).then(|| {
            token_names.push(PAD_NAME.to_string());
            vocab + 2
        });
        let ids: Vec<i64> = padded_ids(&examples, pad).map(i64::from).collect();
        let tokens = Tensor::from_data(TensorData::new(ids, [examples.len(), longest]), device);
        Ok(Self {
            examples,
            tokens,
            token_names: Some(token_names),
            pieces: Some(pieces),
            punctuation,
            pad,
        })
    }

    /// The probe's examples as the model reads them, where they can be scored as they are:
    /// a task's tokens; `None` for a probe of words, whose examples are word-level (the model
    /// reads their pieces, and an imported masked-LM is scored on its masked words instead).
    pub fn scorable_examples(&self) -> Option<&[Example]> {
        match self.pieces {
            Some(_) => None,
            None => Some(&self.examples),
        }
    }

    /// For a probe of words (a model that reads word pieces), the name of each word id and
    /// of `[CLS]` and `[SEP]` (`summary.json`'s `probe_token_names`: the ids are the probe's
    /// own); `None` for a probe of a task's tokens, whose names are the task's.
    pub fn word_names(&self) -> Option<Vec<String>> {
        self.pieces.as_ref().and(self.token_names.clone())
    }

    /// For a probe of words, each sentence's words as ids into [`Probe::word_names`]; `None`
    /// for a probe of a task's tokens.
    pub fn word_ids(&self) -> Option<&[Vec<u32>]> {
        self.pieces.as_ref().map(|pieces| pieces.ids.as_slice())
    }

    /// For a probe of words, each sentence's punctuation (its words labelled `punct`, as a
    /// treebank labels them; typed sentences have no labels, so none) at their word-level
    /// positions, after `[CLS]`; `None` for a probe of a task's tokens.
    pub fn punctuation(&self) -> Option<Vec<Vec<usize>>> {
        self.pieces.as_ref().map(|_| self.punctuation.clone())
    }

    /// The most word pieces in one probe sentence (the sequence length of the forward pass);
    /// the probe's sequence length for a probe of the task's own tokens.
    pub fn forward_len(&self) -> usize {
        match &self.pieces {
            Some(pieces) => pieces
                .encoded
                .iter()
                .map(|e| e.ids.len())
                .max()
                .unwrap_or(0),
            None => self.seq_len(),
        }
    }

    /// The probe's sequence length: the longest sequence's (a probe of typed sentences may
    /// hold several lengths; every other probe holds one).
    pub fn seq_len(&self) -> usize {
        self.examples
            .iter()
            .map(|e| e.input.len())
            .max()
            .unwrap_or(0)
    }

    /// Each sequence's length (the real positions of [`LayerProbe::lengths`]).
    pub fn lengths(&self) -> Vec<usize> {
        self.examples.iter().map(|e| e.input.len()).collect()
    }

    /// The most sequences a probe of `run` may hold when `runs` runs of its shape are probed
    /// and kept together (`compare`), so that their forward passes hold at most
    /// [`MAX_PROBE_BYTES`]. 0 when even one sequence is over it.
    pub fn max_size(run: &ResolvedRun, runs: usize) -> usize {
        Self::max_size_at(run, runs, run.task.seq_len())
    }

    /// [`Probe::max_size`] for sequences of `seq` positions in the forward pass (a probe of
    /// word pieces: its longest sentence in pieces, [`Probe::forward_len`]).
    pub fn max_size_at(run: &ResolvedRun, runs: usize, seq: usize) -> usize {
        let bytes_per_sequence = values_per_sequence(run, seq)
            .saturating_mul(runs.max(1) as u128)
            .saturating_mul(4);
        usize::try_from(MAX_PROBE_BYTES / bytes_per_sequence.max(1)).unwrap_or(usize::MAX)
    }

    /// Checks `size` against [`Probe::max_size`], before anything is allocated.
    pub fn check_size(size: usize, run: &ResolvedRun, runs: usize) -> Result<(), ProbeSizeError> {
        Self::check_size_at(size, run, runs, run.task.seq_len())
    }

    /// [`Probe::check_size`] for sequences of `seq` positions in the forward pass.
    pub fn check_size_at(
        size: usize,
        run: &ResolvedRun,
        runs: usize,
        seq: usize,
    ) -> Result<(), ProbeSizeError> {
        let max = Self::max_size_at(run, runs, seq);
        if size == 0 {
            Err(ProbeSizeError::Empty)
        } else if size > max {
            let bytes = values_per_sequence(run, seq)
                .saturating_mul(runs.max(1) as u128)
                .saturating_mul(size as u128)
                .saturating_mul(4);
            Err(ProbeSizeError::TooLarge {
                size,
                max,
                runs,
                bytes,
            })
        } else {
            Ok(())
        }
    }

    /// Sequences the probe holds.
    pub fn len(&self) -> usize {
        self.examples.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.examples.is_empty()
    }

    /// Input tokens, row-major `[batch * seq]`, a shorter sequence padded with the
    /// [`PAD_NAME`] id (a probe of typed sentences of several lengths).
    pub fn token_ids(&self) -> Vec<u32> {
        padded_ids(&self.examples, self.pad).collect()
    }

    /// The id that pads a probe of several lengths, named [`PAD_NAME`]; `None` for a probe
    /// of one length.
    pub fn pad_id(&self) -> Option<u32> {
        self.pad
    }

    /// Runs `model` on the probe and returns each layer's attention on the host; for a
    /// probe of word pieces, taken back to words ([`crate::load::words`]).
    pub fn forward(&self, model: &Encoder) -> Vec<LayerProbe> {
        if let Some(pieces) = &self.pieces {
            return forward_on_pieces(model, pieces, &self.tokens.device());
        }
        let (_, cache) = model.forward_with_cache(EncoderInput::new(self.tokens.clone()));
        cache
            .layers
            .into_iter()
            .map(|layer| {
                let pattern = HostTensor::of(layer.pattern);
                LayerProbe {
                    attn_input: HostTensor::of(layer.attn_input),
                    lengths: vec![pattern.shape[2]; pattern.shape[0]],
                    pattern,
                    head_outputs: HostTensor::of(layer.head_outputs),
                }
            })
            .collect()
    }
}

/// One sentence's attention between its pieces, as the model computes it, before it is taken
/// to words: what `explore.html` shows when pieces are chosen.
#[derive(Debug, Clone, PartialEq)]
pub struct PiecePatterns {
    /// The pieces, `[CLS]` and `[SEP]` included.
    pub pieces: Vec<String>,
    /// `[layer][head]`, each `[query * n + key]` for the sentence's `n` pieces.
    pub patterns: Vec<Vec<Vec<f32>>>,
}

impl Probe {
    /// The attention between the pieces of the probe's first `count` sentences (fewer when
    /// it has fewer), one forward pass of them padded together; `None` for a probe of a
    /// task's tokens, which has no pieces.
    pub fn piece_patterns(&self, model: &Encoder, count: usize) -> Option<Vec<PiecePatterns>> {
        let pieces = self.pieces.as_ref()?;
        let count = count.min(pieces.len());
        let batch = pieces.batch(0..count, &self.tokens.device()); // [count, longest]
        let (_, cache) = model.forward_with_cache(batch.encoder_input());
        // Per layer `[count, heads, longest, longest]`.
        let layers: Vec<HostTensor> = (cache.layers.into_iter())
            .map(|layer| HostTensor::of(layer.pattern))
            .collect();
        let sentences = (0..count).map(|b| {
            let n = pieces.encoded[b].ids.len();
            let patterns = layers
                .iter()
                .map(|pattern| {
                    let [_, heads, longest, _] = pattern.shape[..] else {
                        unreachable!("attention patterns are 4-D")
                    };
                    (0..heads)
                        .map(|h| {
                            let start = (b * heads + h) * longest * longest;
                            // The sentence's own n x n block; its padding keys hold 0.
                            (0..n)
                                .flat_map(|q| {
                                    let row = start + q * longest;
                                    pattern.values[row..row + n].iter().copied()
                                })
                                .collect()
                        })
                        .collect()
                })
                .collect();
            PiecePatterns {
                pieces: pieces.encoded[b].pieces.clone(),
                patterns,
            }
        });
        Some(sentences.collect())
    }
}

/// [`Probe::forward`] for sentences of word pieces: the model on the padded pieces, each layer's
/// pattern taken to words (sum to, mean from) and its input and head outputs to the mean of
/// each word's pieces.
fn forward_on_pieces(model: &Encoder, pieces: &PieceSentences, device: &Device) -> Vec<LayerProbe> {
    let batch = pieces.batch(0..pieces.len(), device); // [batch, pieces], padding masked
    let (_, cache) = model.forward_with_cache(batch.encoder_input());
    let spans = &pieces.spans;
    // Sentences of several lengths (typed text) are padded to the longest.
    let len = spans.iter().map(WordSpans::len).max().unwrap_or(0);
    // `[batch, seq, ...]` per piece to `[batch, len, ...]` per word.
    let pool = |tensor: HostTensor| {
        let (batch, seq) = (tensor.shape[0], tensor.shape[1]);
        let width: usize = tensor.shape[2..].iter().product();
        let values: Vec<f32> = (0..batch)
            .flat_map(|b| {
                let rows = &tensor.values[b * seq * width..(b + 1) * seq * width];
                let mut words = spans[b].mean_rows(rows, width);
                words.resize(len * width, 0.0); // a shorter sentence's padding
                words
            })
            .collect();
        let mut shape = tensor.shape.clone();
        shape[1] = len;
        HostTensor { values, shape }
    };
    cache
        .layers
        .into_iter()
        .map(|layer| LayerProbe {
            attn_input: pool(HostTensor::of(layer.attn_input)),
            pattern: word_patterns(&HostTensor::of(layer.pattern), spans),
            head_outputs: pool(HostTensor::of(layer.head_outputs)),
            lengths: spans.iter().map(WordSpans::len).collect(),
        })
        .collect()
}

/// The probe's sentences of `sentences` (see [`Probe::of_pieces`]) as pieces, with each
/// one's punctuation: chosen among the sentences that fit, since the most common length could
/// be one that does not and leave the probe empty.
fn given_pieces(
    sentences: &ProbeSentences,
    tokenizer: &WordPieces,
    size: usize,
    max_positions: usize,
) -> Result<(PieceSentences, Vec<Vec<usize>>), PieceProbeError> {
    let lengths = sentences.lengths();
    let fitting: Vec<usize> = (0..lengths.len())
        .filter(|&i| lengths[i].1 <= max_positions)
        .collect();
    let offered = match fitting.is_empty() {
        true => (0..lengths.len()).collect(), // refused below, with the numbers
        false => fitting,
    };
    let words: Vec<usize> = offered.iter().map(|&i| lengths[i].0).collect();
    let typical = typical_sentences(&words);
    let typical_words: Vec<usize> = typical.iter().map(|&i| words[i]).collect();
    let chosen = of_most_common_length(&typical_words, size).map(|j| offered[typical[j]]);
    match sentences {
        // Typed sentences are the user's own: every one is read, whatever its length (the
        // first `size`), padded to the longest.
        ProbeSentences::Typed(typed) => {
            let chosen: Vec<_> = offered
                .iter()
                .take(size)
                .map(|&i| typed.sentences[i].clone())
                .collect();
            let pieces = PieceSentences::of_typed(&chosen, tokenizer, max_positions)?;
            let punctuation = vec![vec![]; pieces.len()];
            Ok((pieces, punctuation))
        }
        ProbeSentences::Treebank(trees) => {
            let chosen = chosen.map(|i| trees[i].clone()).collect();
            let parsed = ParsedPieces::of_treebank(chosen, tokenizer, max_positions)?;
            let punctuation = parsed.trees.iter().map(punctuation_of).collect();
            Ok((parsed.pieces, punctuation))
        }
    }
}

/// The word-level positions (after `[CLS]`) of `tree`'s words labelled `punct`.
fn punctuation_of(tree: &TreebankSentence) -> Vec<usize> {
    (0..tree.words.len())
        .filter(|&w| tree.relations[w] == "punct")
        .map(|w| w + 1)
        .collect()
}

/// The indices of the sentences of `lengths` words that are typical text: at least the
/// median length (the upper median). A treebank of web text holds many lines of one to three
/// words (greetings, headers, signatures) and one of those is its most common length (EWT's
/// test set: 3 words, 154 sentences, where the median is 9); a probe of them would say little
/// about how the model reads a sentence. Among these the probe takes the most common length
/// (EWT test: 10 words, 90 sentences).
fn typical_sentences(lengths: &[usize]) -> Vec<usize> {
    let mut sorted = lengths.to_vec();
    sorted.sort_unstable();
    let median = sorted.get(sorted.len() / 2).copied().unwrap_or(0);
    (0..lengths.len())
        .filter(|&i| lengths[i] >= median)
        .collect()
}

/// The indices of the first `size` of `lengths` that have the most common length (ties: the
/// longer), in order.
fn of_most_common_length(lengths: &[usize], size: usize) -> impl Iterator<Item = usize> + '_ {
    let mut counts: std::collections::BTreeMap<usize, usize> = Default::default();
    for &length in lengths {
        *counts.entry(length).or_insert(0) += 1;
    }
    // `max_by_key` keeps the last maximum: over ascending lengths, the longest of a tie.
    let common = counts
        .iter()
        .max_by_key(|(_, count)| **count)
        .map(|(l, _)| *l);
    (0..lengths.len())
        .filter(move |&i| Some(lengths[i]) == common)
        .take(size)
}

/// The first `size` of `candidates` whose length is the most common one (ties: the
/// longer), in order.
fn of_one_length(candidates: Vec<Example>, size: usize) -> Vec<Example> {
    let lengths: Vec<usize> = candidates.iter().map(|e| e.input.len()).collect();
    let keep: std::collections::BTreeSet<usize> = of_most_common_length(&lengths, size).collect();
    candidates
        .into_iter()
        .enumerate()
        .filter_map(|(i, example)| keep.contains(&i).then_some(example))
        .collect()
}

/// Values (f32) the forward pass on one probe sequence holds, at most: the embeddings; per
/// layer its input, q/k/v, scores and probabilities, head outputs, attention output,
/// feed-forward hidden layer and output, residual sum; the logits. Every layout is counted
/// as if each head read the full input, as train's size check does.
fn values_per_sequence(run: &ResolvedRun, seq: usize) -> u128 {
    forward_values_per_sequence(&run.config.model, seq, run.io.n_outputs)
}

/// `--probe` as typed: a whole number of sequences, at least 1 (the most depends on the run:
/// [`Probe::check_size`]). For clap's `value_parser`, so `-1` gets this message too.
pub fn parse_size(text: &str) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(size) if size > 0 => Ok(size),
        _ => Err("expected a whole number of probe sequences, at least 1".to_string()),
    }
}

/// One layer's attention on the probe batch. A probe of sentences of several lengths (typed
/// text) is padded to the longest: sequence `b` holds `lengths[b]` real positions, and its
/// rows and keys past them are zeros. [`LayerProbe::head_pattern`] and
/// [`LayerProbe::head_output`] give the real positions only, so a mean over their rows is a
/// mean over real queries.
#[derive(Debug, Clone)]
pub struct LayerProbe {
    /// What enters the attention, `[batch, seq, d_model]`.
    pub attn_input: HostTensor,
    /// Softmax probabilities, `[batch, heads, seq, seq]`.
    pub pattern: HostTensor,
    /// Per-head outputs, `[batch, seq, heads, d_head]`.
    pub head_outputs: HostTensor,
    /// Each sequence's real positions (`seq` for every one of a probe of one length).
    pub lengths: Vec<usize>,
}

impl LayerProbe {
    /// A one-sequence probe whose head `h` puts all its attention on key `targets[h]`
    /// (the matching tests' known answer).
    #[cfg(test)]
    pub(crate) fn attending_to(targets: &[usize], seq: usize) -> LayerProbe {
        let heads = targets.len();
        let mut pattern = vec![0.0f32; heads * seq * seq];
        for (h, &target) in targets.iter().enumerate() {
            for q in 0..seq {
                pattern[(h * seq + q) * seq + target] = 1.0;
            }
        }
        let zeros = |shape: Vec<usize>| HostTensor {
            values: vec![0.0; shape.iter().product()],
            shape,
        };
        LayerProbe {
            attn_input: zeros(vec![1, seq, 4]),
            pattern: HostTensor {
                values: pattern,
                shape: vec![1, heads, seq, seq],
            },
            head_outputs: zeros(vec![1, seq, heads, 2]),
            lengths: vec![seq],
        }
    }

    /// `(batch, heads, seq)`, `seq` the longest sequence's length.
    pub fn dims(&self) -> (usize, usize, usize) {
        let [batch, heads, seq, _] = self.pattern.shape[..] else {
            unreachable!("patterns are 4-D")
        };
        (batch, heads, seq)
    }

    /// Real positions over all sequences: the rows of [`LayerProbe::head_pattern`].
    pub fn rows(&self) -> usize {
        self.lengths.iter().sum()
    }

    /// Head `h`'s attention rows at every real query, sequence by sequence, `[rows, seq
    /// (keys)]` row-major (a shorter sequence's keys past its end hold 0).
    pub fn head_pattern(&self, h: usize) -> Vec<f32> {
        let (_, heads, seq) = self.dims();
        (self.lengths.iter().enumerate())
            .flat_map(|(b, &len)| {
                let start = (b * heads + h) * seq * seq;
                self.pattern.values[start..start + len * seq]
                    .iter()
                    .copied()
            })
            .collect()
    }

    /// Head `h`'s outputs at every real position, sequence by sequence, `[rows, d_head]`
    /// row-major.
    pub fn head_output(&self, h: usize) -> Vec<f32> {
        let [_, seq, heads, d_head] = self.head_outputs.shape[..] else {
            unreachable!("head outputs are 4-D")
        };
        (self.lengths.iter().enumerate())
            .flat_map(|(b, &len)| b * seq..b * seq + len)
            .flat_map(|row| {
                let start = (row * heads + h) * d_head;
                self.head_outputs.values[start..start + d_head]
                    .iter()
                    .copied()
            })
            .collect()
    }

    /// What enters the attention at every real position, sequence by sequence, `[rows,
    /// d_model]` row-major.
    pub fn real_inputs(&self) -> Vec<f32> {
        let [_, seq, d_model] = self.attn_input.shape[..] else {
            unreachable!("attention inputs are 3-D")
        };
        (self.lengths.iter().enumerate())
            .flat_map(|(b, &len)| {
                self.attn_input.values[b * seq * d_model..(b * seq + len) * d_model]
                    .iter()
                    .copied()
            })
            .collect()
    }

    /// `d_head`.
    pub fn d_head(&self) -> usize {
        self.head_outputs.shape[3]
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use run::RunConfig;
    use tasks::TaskConfig;

    use super::*;

    /// The tiny test config: one layer, d_model 16, 2 heads of 8, d_ff 32, reverse on
    /// sequences of 6 over 5 tokens.
    fn tiny() -> ResolvedRun {
        let path = Path::new(testkit::TINY_CONFIG);
        RunConfig::load(path, &[]).unwrap().resolve(path).unwrap()
    }

    #[test]
    fn a_treebank_probe_is_typical_text_not_its_many_short_lines() {
        // Six one-word lines (the most common length) and seven sentences of 5 to 9 words:
        // the median (upper) is 5.
        let lengths = [1, 1, 1, 1, 1, 1, 5, 6, 9, 9, 6, 9, 7];
        let typical = typical_sentences(&lengths);
        assert_eq!(typical, vec![6, 7, 8, 9, 10, 11, 12]);
        let typical_lengths: Vec<usize> = typical.iter().map(|&i| lengths[i]).collect();
        let chosen: Vec<usize> = of_most_common_length(&typical_lengths, 8)
            .map(|j| typical[j])
            .collect();
        assert_eq!(
            chosen,
            vec![8, 9, 11],
            "the 9-word sentences, not the one-word lines"
        );
        assert!(typical_sentences(&[]).is_empty());
    }

    #[test]
    fn the_largest_probe_is_counted_from_the_run_sizes() {
        // Per sequence: embeddings 6 x 16; the layer's input, attention output, feed-forward
        // output and residual 4 x 6 x 16, q/k/v and head outputs 4 x 6 x 2 x 8, scores and
        // probabilities 2 x 2 x 6 x 6, feed-forward hidden 6 x 32; logits 6 x 5.
        let values: u128 = 96 + (384 + 384 + 144 + 192) + 30;
        assert_eq!(values_per_sequence(&tiny(), 6), values);
        let max = (MAX_PROBE_BYTES / (4 * values)) as usize;
        assert_eq!(Probe::max_size(&tiny(), 1), max);
        assert_eq!(Probe::max_size(&tiny(), 3), max / 3);
        assert_eq!(Probe::check_size(max, &tiny(), 1), Ok(()));
    }

    #[test]
    fn a_probe_over_the_budget_is_refused_before_allocating() {
        let run = tiny();
        let max = Probe::max_size(&run, 1);
        let error = Probe::check_size(max + 1, &run, 1).unwrap_err();
        assert_eq!(
            error,
            ProbeSizeError::TooLarge {
                size: max + 1,
                max,
                runs: 1,
                bytes: 4 * (max as u128 + 1) * values_per_sequence(&run, 6),
            }
        );
        assert_eq!(
            error.to_string(),
            format!(
                "a probe of {} sequences is too large for this run: the forward pass would hold \
                 about 1.0 GiB of activations, over the 1 GiB allowed; the largest accepted is \
                 {max} sequences",
                max + 1
            )
        );
        let error = Probe::check_size(100_000_000, &run, 2).unwrap_err();
        assert!(
            matches!(error, ProbeSizeError::TooLarge { runs: 2, max, .. } if max == Probe::max_size(&run, 2)),
            "{error}"
        );
        assert!(
            error.to_string().contains("too large for these 2 runs"),
            "{error}"
        );
        assert_eq!(
            Probe::check_size(0, &run, 1),
            Err(ProbeSizeError::Empty),
            "an empty probe has no sequence 0 to draw"
        );
        // A size that would not even fit in memory's address space is refused, not wrapped.
        assert!(Probe::check_size(usize::MAX, &run, usize::MAX).is_err());
    }

    #[test]
    fn probe_sizes_parse_as_whole_positive_numbers() {
        assert_eq!(parse_size("64"), Ok(64));
        for bad in ["0", "-1", "1.5", "lots", ""] {
            let error = parse_size(bad).unwrap_err();
            assert!(error.contains("at least 1"), "{bad}: {error}");
        }
    }

    fn example(len: usize, first: u32) -> Example {
        let mut input = vec![0; len];
        input[0] = first;
        Example {
            target: vec![None; len],
            input,
        }
    }

    #[test]
    fn a_probe_keeps_the_first_sequences_of_the_most_common_length() {
        // Lengths 3, 5, 5, 3, 5, 4: five is the most common.
        let lengths = [3, 5, 5, 3, 5, 4];
        let candidates: Vec<Example> = lengths
            .iter()
            .enumerate()
            .map(|(i, &len)| example(len, i as u32))
            .collect();
        let kept: Vec<u32> = of_one_length(candidates.clone(), 2)
            .iter()
            .map(|e| e.input[0])
            .collect();
        assert_eq!(kept, [1, 2]);
        assert_eq!(
            of_one_length(candidates.clone(), 10).len(),
            3,
            "only three of 5"
        );
        // A tie between 3 and 5 (two each) goes to the longer.
        let tied: Vec<u32> = of_one_length(candidates[..4].to_vec(), 10)
            .iter()
            .map(|e| e.input[0])
            .collect();
        assert_eq!(tied, [1, 2]);
        assert!(of_one_length(vec![], 4).is_empty());
    }

    #[test]
    fn a_probe_of_a_one_length_task_is_the_first_sequences_drawn() {
        let task = tiny().task;
        let seed = mix_seed(3, PROBE_STREAM);
        let probe = Probe::of_tokens(&task, 7, 3, &Device::flex());
        assert_eq!(probe.examples, task.eval_set(7, seed));
        assert_eq!(probe.tokens.dims(), [7, 6]);
        assert_eq!(probe.seq_len(), 6);
        assert_eq!(probe.token_names, None);
    }

    #[test]
    fn a_file_task_probe_takes_at_most_the_size_asked_for() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data.jsonl");
        let records: String = (0..40)
            .map(|i| format!("{{\"input\": [{}, 1, 2], \"target\": [0, 1, 2]}}\n", i % 3))
            .collect();
        std::fs::write(&data, records).unwrap();
        let spec: tasks::FileSpec = serde_json::from_value(serde_json::json!({
            "path": data,
            "eval_fraction": 0.5,
        }))
        .unwrap();
        let task = TaskConfig::File(spec).build(Path::new(".")).unwrap();
        assert_eq!(task.eval_set(3, 0).len(), 20, "the whole eval split");
        let probe = Probe::of_tokens(&task, 3, 0, &Device::flex());
        assert_eq!(probe.examples.len(), 3);
        assert_eq!(probe.tokens.dims(), [3, 3]);
    }
}
