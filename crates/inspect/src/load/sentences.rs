//! Sentences as a model's word pieces, for a model that reads them (an imported BERT): what
//! it is probed with instead of its task's ([`ProbeSentences`]: a treebank's parsed sentences,
//! [`EncodedTree`], or sentences a user typed, which have no parse,
//! [`crate::load::typed::TypedSentences`]), each read by the model's own tokenizer once, when
//! its reading is chosen; sentences as pieces word by word ([`PieceSentences`]), and parsed
//! ones with their trees ([`ParsedPieces`], the `grammar` task's or a treebank's: what
//! relations are scored on). The model's attention on them is taken back to words
//! ([`crate::load::words`]), so that what is measured is about words and their dependency
//! arcs, as for headlab's own models.
//!
//! Sentences are fed whole (no mask), as Clark et al. fed BERT, in chunks padded to their
//! longest (the padding masked as keys, as every batch of headlab's is).

use burn::prelude::*;
use hf::tokenizer::{Encoded, TokenizerError, WordPieces};
use model::Encoder;
use run::tensor_file::HostTensor;
use tasks::batch::Batch;
use tasks::conllu::TreebankSentence;
use tasks::{Example, ParsedSentence, Task};

use crate::load::typed::{TypedSentence, TypedSentences};
use crate::load::words::{WordSpans, word_patterns};

/// Most sentences per forward pass.
const CHUNK: usize = 32;

/// Most padded piece pairs per forward pass (sentences times the longest one's pieces,
/// squared): bounds the attention held at once, each layer's `[chunk, heads, len, len]`,
/// whatever the sentences' lengths: 32 sentences of up to 64 pieces, or 8 of 128, or one of
/// 512 alone. With a fixed 32 sentences, one long sentence padded its 31 neighbours to 512
/// pieces and a MiniLM inspect of the EWT test set held 3.3 GB.
const PIECE_PAIRS_PER_CHUNK: usize = CHUNK * 64 * 64;

/// Why sentences could not be read as word pieces.
#[derive(Debug, thiserror::Error)]
pub enum PieceProbeError {
    /// The task has no parsed sentences of words (only `grammar` has).
    #[error(
        "task {0} has no sentences of words; an imported model is probed with the grammar task's"
    )]
    NoWords(&'static str),
    /// Masked words (masked relation sentences) asked of a model whose tokenizer has no mask
    /// piece.
    #[error(
        "{tokenizer}: no mask piece ([MASK] or <mask>), so no word can be masked for this model"
    )]
    NoMaskPiece {
        /// The tokenizer file.
        tokenizer: String,
    },
    /// The tokenizer failed on a sentence.
    #[error(transparent)]
    Tokenizer(#[from] TokenizerError),
    /// No sentence left to read: none given, or none short enough for the model.
    #[error(
        "none of the {sentences} sentence(s) fits the model's {max_positions} positions (its \
         max_position_embeddings, [CLS] and [SEP] included){}; give sentences that fit",
        shortest.map_or(String::new(), |n| format!(": the shortest takes {n}"))
    )]
    NoneFits {
        /// Sentences offered.
        sentences: usize,
        /// The model's positions.
        max_positions: usize,
        /// Pieces the shortest sentence takes, `[CLS]` and `[SEP]` included (none offered).
        shortest: Option<usize>,
    },
    /// The tokenizer's pieces do not follow the words in order, or it adds tokens other
    /// than one before and one after the sentence.
    #[error("{tokenizer}: sentence {sentence:?}: {problem}")]
    Layout {
        /// The tokenizer file.
        tokenizer: String,
        /// The sentence.
        sentence: String,
        /// What is wrong.
        problem: String,
    },
}

/// The sentences a model that reads word pieces is probed with instead of its task's, each
/// read by its tokenizer once, when its reading is chosen. Only a treebank's have a parse:
/// relations are scored on those alone.
#[derive(Debug, Clone)]
pub enum ProbeSentences {
    /// A treebank's parsed sentences (the shipped treebank's, or a file's).
    Treebank(Vec<EncodedTree>),
    /// Sentences a user typed: words and pieces, no parse.
    Typed(TypedSentences),
}

impl ProbeSentences {
    /// Each sentence's length in words and in pieces (the special ones included), in order.
    pub fn lengths(&self) -> Vec<(usize, usize)> {
        match self {
            ProbeSentences::Treebank(trees) => trees
                .iter()
                .map(|t| (t.tree.words.len(), t.encoded.ids.len()))
                .collect(),
            ProbeSentences::Typed(typed) => (typed.sentences.iter())
                .map(|s| (s.words.len(), s.encoded.ids.len()))
                .collect(),
        }
    }
}

/// A treebank's sentence and its word pieces, read word by word as parsed (Clark et al.'s
/// reading, `transformers`' `is_split_into_words`).
#[derive(Debug, Clone)]
pub struct EncodedTree {
    /// The sentence: words as text, each word's head and label.
    pub tree: TreebankSentence,
    /// Its pieces, the special ones included.
    pub encoded: Encoded,
}

impl EncodedTree {
    /// `tree` as `tokenizer` reads its words.
    pub fn of(tree: TreebankSentence, tokenizer: &WordPieces) -> Result<Self, TokenizerError> {
        let encoded = encode_words(&tree.words, tokenizer)?;
        Ok(EncodedTree { tree, encoded })
    }
}

/// `words` as `tokenizer` reads them one by one.
fn encode_words(words: &[String], tokenizer: &WordPieces) -> Result<Encoded, TokenizerError> {
    let refs: Vec<&str> = words.iter().map(String::as_str).collect();
    tokenizer.encode_words(&refs)
}

/// Sentences as the model's word pieces, word by word.
#[derive(Debug, Clone)]
pub struct PieceSentences {
    /// Each sentence's words as ids into `names` (the word-level probe's tokens).
    pub ids: Vec<Vec<u32>>,
    /// The name of each word id.
    pub names: Vec<String>,
    /// Each sentence as pieces, `[CLS]` and `[SEP]` included.
    pub encoded: Vec<Encoded>,
    /// Each sentence's word-level positions: `[CLS]`, its words, `[SEP]`.
    pub spans: Vec<WordSpans>,
    /// Sentences left out because their pieces would not fit the model's positions.
    pub too_long: usize,
}

/// Parsed sentences as word pieces, with their trees: what relations are scored on.
#[derive(Debug, Clone)]
pub struct ParsedPieces {
    /// The sentences kept: words as text, each word's head and label.
    pub trees: Vec<TreebankSentence>,
    /// The same sentences as pieces.
    pub pieces: PieceSentences,
}

impl ParsedPieces {
    /// Parsed `sentences` of `task` (its word ids named by [`Task::token_names`]) read by
    /// `tokenizer` word by word (see [`PieceSentences::of_read`]).
    pub fn of_task(
        task: &Task,
        sentences: Vec<ParsedSentence>,
        tokenizer: &WordPieces,
        max_positions: usize,
    ) -> Result<Self, PieceProbeError> {
        let names = task
            .token_names()
            .ok_or_else(|| PieceProbeError::NoWords(task.name()))?;
        let trees: Vec<TreebankSentence> = sentences
            .iter()
            .map(|s| TreebankSentence::of_parsed(s, &names))
            .collect();
        let ids = sentences.into_iter().map(|s| s.words);
        let read = trees.iter().zip(ids).map(|(tree, ids)| {
            let encoded = encode_words(&tree.words, tokenizer);
            (tree.words.as_slice(), ids, encoded)
        });
        let (pieces, kept) = PieceSentences::of_read(names, read, tokenizer, max_positions)?;
        Ok(ParsedPieces {
            trees: only(trees, &kept),
            pieces,
        })
    }

    /// A treebank's sentences, as its tokenizer read them, their word ids numbering the
    /// distinct forms in sorted order; `tokenizer` names the file in messages.
    pub fn of_treebank(
        trees: Vec<EncodedTree>,
        tokenizer: &WordPieces,
        max_positions: usize,
    ) -> Result<Self, PieceProbeError> {
        let (names, ids) = named_words(trees.iter().map(|t| t.tree.words.as_slice()));
        let read = trees.iter().zip(ids).map(|(t, ids)| {
            let encoded = Ok(t.encoded.clone());
            (t.tree.words.as_slice(), ids, encoded)
        });
        let (pieces, kept) = PieceSentences::of_read(names, read, tokenizer, max_positions)?;
        let trees = trees.into_iter().map(|t| t.tree).collect();
        Ok(ParsedPieces {
            trees: only(trees, &kept),
            pieces,
        })
    }

    /// Keeps the first `n` sentences.
    pub fn truncate(&mut self, n: usize) {
        self.trees.truncate(n);
        self.pieces.truncate(n);
    }
}

/// The distinct words of `sentences`, sorted, and each sentence's words as ids into them.
fn named_words<'a>(
    sentences: impl Iterator<Item = &'a [String]> + Clone,
) -> (Vec<String>, Vec<Vec<u32>>) {
    let names: Vec<String> = (sentences.clone())
        .flat_map(|words| words.iter().cloned())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let ids = sentences
        .map(|words| {
            let id = |w: &String| names.binary_search(w).expect("every form is named") as u32;
            words.iter().map(id).collect()
        })
        .collect();
    (names, ids)
}

/// The items of `all` at the indices `kept` (ascending), in order.
fn only<T>(all: Vec<T>, kept: &[usize]) -> Vec<T> {
    let mut kept = kept.iter().peekable();
    let mut taken = vec![];
    for (i, item) in all.into_iter().enumerate() {
        if kept.next_if(|&&k| k == i).is_some() {
            taken.push(item);
        }
    }
    taken
}

impl PieceSentences {
    /// Typed sentences, as their tokenizer read them, their word ids numbering the distinct
    /// words in sorted order; `tokenizer` names the file in messages.
    pub fn of_typed(
        sentences: &[TypedSentence],
        tokenizer: &WordPieces,
        max_positions: usize,
    ) -> Result<Self, PieceProbeError> {
        let (names, ids) = named_words(sentences.iter().map(|s| s.words.as_slice()));
        let read = sentences.iter().zip(ids).map(|(s, ids)| {
            let encoded = Ok(s.encoded.clone());
            (s.words.as_slice(), ids, encoded)
        });
        Ok(Self::of_read(names, read, tokenizer, max_positions)?.0)
    }

    /// The pieces before and after every sentence's words, as the tokenizer writes them:
    /// `[CLS]` and `[SEP]` for BERT, `<s>` and `</s>` for RoBERTa.
    pub fn special_names(&self) -> [String; 2] {
        let first = self.encoded.first();
        let piece = |end: Option<&String>, default: &str| {
            end.cloned().unwrap_or_else(|| default.to_string())
        };
        [
            piece(first.and_then(|e| e.pieces.first()), "[CLS]"),
            piece(first.and_then(|e| e.pieces.last()), "[SEP]"),
        ]
    }

    /// Sentences as `tokenizer` read them, each its words, their ids into `names` and its
    /// pieces, read one at a time; those of more than `max_positions` pieces are left out
    /// and counted. Every sentence must come out as one special token, its words in order,
    /// one special token: word `i` at word-level position `i + 1`. Returns the sentences
    /// kept and their indices among those read.
    fn of_read<'a>(
        names: Vec<String>,
        sentences: impl Iterator<Item = (&'a [String], Vec<u32>, Result<Encoded, TokenizerError>)>,
        tokenizer: &WordPieces,
        max_positions: usize,
    ) -> Result<(Self, Vec<usize>), PieceProbeError> {
        let mut kept = PieceSentences {
            ids: vec![],
            names,
            encoded: vec![],
            spans: vec![],
            too_long: 0,
        };
        let (mut offered, mut indices) = (0, vec![]);
        let mut shortest: Option<usize> = None;
        for (at, (words, ids, encoded)) in sentences.enumerate() {
            offered += 1;
            let encoded = encoded?;
            if encoded.ids.len() > max_positions {
                kept.too_long += 1;
                shortest = Some(shortest.map_or(encoded.ids.len(), |s| s.min(encoded.ids.len())));
                continue;
            }
            let spans = in_place(words, &encoded, tokenizer)?;
            kept.ids.push(ids);
            kept.encoded.push(encoded);
            kept.spans.push(spans);
            indices.push(at);
        }
        if kept.is_empty() {
            // Read on, an empty probe would fail deep in a forward pass.
            return Err(PieceProbeError::NoneFits {
                sentences: offered,
                max_positions,
                shortest,
            });
        }
        Ok((kept, indices))
    }

    /// Keeps the first `n` sentences.
    pub fn truncate(&mut self, n: usize) {
        self.ids.truncate(n);
        self.encoded.truncate(n);
        self.spans.truncate(n);
    }

    /// Sentences kept.
    pub fn len(&self) -> usize {
        self.encoded.len()
    }

    /// Whether none was kept.
    pub fn is_empty(&self) -> bool {
        self.encoded.is_empty()
    }

    /// Runs `model` on the sentences a chunk at a time and calls `each` with every chunk's
    /// word-level attention (one tensor per layer, `[chunk, heads, len, len]`, `len` the
    /// chunk's longest sentence in words plus `[CLS]` and `[SEP]`, shorter ones padded with
    /// zeros) and the indices of the chunk's sentences, row by row. The chunks take the
    /// sentences shortest first ([`chunk_ranges`] over them), since a chunk is padded to its
    /// longest: in file order EWT's test set pads to nearly three times its pieces.
    pub fn each_chunk(
        &self,
        model: &Encoder,
        device: &Device,
        mut each: impl FnMut(&[HostTensor], &[usize]),
    ) {
        let mut by_length: Vec<usize> = (0..self.len()).collect();
        by_length.sort_by_key(|&i| self.encoded[i].ids.len()); // stable: ties in file order
        let lengths = by_length.iter().map(|&i| self.encoded[i].ids.len());
        for range in chunk_ranges(lengths) {
            let rows = &by_length[range];
            let batch = self.batch_of(rows, device); // [chunk, pieces], padding masked
            let (_, cache) = model.forward_with_cache(batch.encoder_input());
            let spans: Vec<WordSpans> = rows.iter().map(|&i| self.spans[i].clone()).collect();
            let patterns: Vec<HostTensor> = cache
                .layers
                .into_iter()
                .map(|layer| word_patterns(&HostTensor::of(layer.pattern), &spans))
                .collect();
            each(&patterns, rows);
        }
    }

    /// Sentences `range` as one batch of pieces, padded to the longest, the padding masked.
    pub fn batch(&self, range: std::ops::Range<usize>, device: &Device) -> Batch {
        self.batch_of(&range.collect::<Vec<_>>(), device)
    }

    /// Sentences `rows`, in that order, as one batch of pieces, padded to the longest.
    fn batch_of(&self, rows: &[usize], device: &Device) -> Batch {
        let examples: Vec<Example> = rows
            .iter()
            .map(|&i| Example {
                input: self.encoded[i].ids.clone(),
                target: vec![None; self.encoded[i].ids.len()],
            })
            .collect();
        Batch::new(&examples, device)
    }
}

/// Where the words of a sentence (`words`, read by `tokenizer` as `encoded`) sit among its
/// pieces, refused unless every word has a piece and they come out as one special piece, the
/// words in order, one special piece.
fn in_place(
    words: &[String],
    encoded: &Encoded,
    tokenizer: &WordPieces,
) -> Result<WordSpans, PieceProbeError> {
    let layout = |problem: String| PieceProbeError::Layout {
        tokenizer: tokenizer.path().display().to_string(),
        sentence: words.join(" "),
        problem,
    };
    // A word the tokenizer drops (a zero-width or control character: BERT's normalizer
    // removes them) has no piece to give attention to or receive it.
    if let Some(empty) = encoded.first_word_without_piece(words.len()) {
        return Err(layout(format!(
            "word {} ({:?}) is no word piece at all as the tokenizer reads it (it drops the \
             word: a zero-width or control character?), so no attention can reach it; leave \
             the word or its sentence out of the file",
            empty + 1,
            words[empty]
        )));
    }
    let spans = WordSpans::of(&encoded.words).map_err(|e| layout(e.to_string()))?;
    let in_place = spans.words() == words.len()
        && spans.len() == words.len() + 2
        && (0..words.len()).all(|w| spans.position_of_word(w) == w + 1);
    if !in_place {
        return Err(layout(format!(
            "expected one special piece, the {} words, one special piece ([CLS] ... [SEP], \
             <s> ... </s>); the tokenizer gave {:?}",
            words.len(),
            encoded.pieces
        )));
    }
    Ok(spans)
}

/// Consecutive ranges of sentences of `lengths` pieces, in order, each at most [`CHUNK`]
/// sentences and [`PIECE_PAIRS_PER_CHUNK`] padded piece pairs (a longer sentence alone).
fn chunk_ranges(lengths: impl Iterator<Item = usize>) -> Vec<std::ops::Range<usize>> {
    let mut ranges = vec![];
    let (mut start, mut longest, mut end) = (0, 0, 0);
    for (at, len) in lengths.enumerate() {
        let wider = longest.max(len);
        let full = at - start == CHUNK || (at - start + 1) * wider * wider > PIECE_PAIRS_PER_CHUNK;
        if at > start && full {
            ranges.push(start..at);
            (start, longest) = (at, len);
        } else {
            longest = wider;
        }
        end = at + 1;
    }
    if start < end {
        ranges.push(start..end);
    }
    ranges
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_hold_every_sentence_in_order_within_the_bound() {
        // 40 short sentences, one of 512 pieces, 10 of 100.
        let lengths: Vec<usize> = [vec![20; 40], vec![512], vec![100; 10]].concat();
        let ranges = chunk_ranges(lengths.iter().copied());
        let covered: Vec<usize> = ranges.iter().flat_map(|r| r.clone()).collect();
        assert_eq!(covered, (0..lengths.len()).collect::<Vec<_>>());
        for range in &ranges {
            let longest = lengths[range.clone()].iter().max().unwrap();
            let pairs = range.len() * longest * longest;
            assert!(range.len() <= CHUNK, "{range:?}");
            assert!(
                range.len() == 1 || pairs <= PIECE_PAIRS_PER_CHUNK,
                "{range:?}: {pairs}"
            );
        }
        // The short ones 32 at a time, the long one alone, the ten of 100 pieces together.
        assert_eq!(ranges, vec![0..32, 32..40, 40..41, 41..51]);
        assert!(chunk_ranges(std::iter::empty()).is_empty());
    }
}
