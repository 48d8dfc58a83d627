//! The probe of a model that reads word pieces (an imported BERT): parsed sentences of the
//! `grammar` task or of a treebank (CoNLL-U), their words as text, read by the model's own
//! tokenizer; the model's
//! attention on them taken back to words ([`crate::load::words`]), so that what is measured
//! is about words and their dependency arcs, as for headlab's own models.
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

/// How a sentence becomes word pieces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadAs {
    /// Its words one by one, as parsed (a treebank's, the task's): Clark et al.'s reading,
    /// `transformers`' `is_split_into_words`.
    Words,
    /// Its raw text, its words the tokenizer's own ([`WordPieces::read_text`]): sentences
    /// a user typed, as `transformers` reads `tokenizer(text)`.
    Text,
}

impl ReadAs {
    /// `tree` as `tokenizer` reads it this way (a tree without its text is read by its words).
    pub fn encode(
        self,
        tree: &TreebankSentence,
        tokenizer: &WordPieces,
    ) -> Result<Encoded, TokenizerError> {
        match (self, &tree.text) {
            (ReadAs::Text, Some(text)) => Ok(tokenizer.read_text(text)?.encoded),
            _ => {
                let refs: Vec<&str> = tree.words.iter().map(String::as_str).collect();
                tokenizer.encode_words(&refs)
            }
        }
    }
}

/// Sentences with their dependency trees, as the model's word pieces.
#[derive(Debug, Clone)]
pub struct PieceSentences {
    /// The sentences: words as text, each word's head and label.
    pub trees: Vec<TreebankSentence>,
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

impl PieceSentences {
    /// Parsed `sentences` of `task` (its word ids named by [`Task::token_names`]) read by
    /// `tokenizer` (see [`PieceSentences::of_trees`]).
    pub fn of_task(
        task: &Task,
        sentences: Vec<ParsedSentence>,
        tokenizer: &WordPieces,
        max_positions: usize,
    ) -> Result<Self, PieceProbeError> {
        let names = task
            .token_names()
            .ok_or_else(|| PieceProbeError::NoWords(task.name()))?;
        let trees = sentences
            .iter()
            .map(|s| TreebankSentence::of_parsed(s, &names))
            .collect();
        let ids = sentences.into_iter().map(|s| s.words).collect();
        Self::of_trees(names, ids, trees, (tokenizer, ReadAs::Words), max_positions)
    }

    /// A treebank's sentences read by `tokenizer` (`read_as`), their word ids numbering the
    /// distinct forms in sorted order.
    pub fn of_treebank(
        trees: Vec<TreebankSentence>,
        reader: (&WordPieces, ReadAs),
        max_positions: usize,
    ) -> Result<Self, PieceProbeError> {
        let names: Vec<String> = trees
            .iter()
            .flat_map(|t| t.words.iter().cloned())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let ids = trees
            .iter()
            .map(|t| {
                t.words
                    .iter()
                    .map(|w| names.binary_search(w).expect("every form is named") as u32)
                    .collect()
            })
            .collect();
        Self::of_trees(names, ids, trees, reader, max_positions)
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

    /// `trees` (word ids `ids` into `names`) read by a tokenizer; sentences of more than
    /// `max_positions` pieces are left out and counted. Every sentence must come out as one
    /// special token, its words in order, one special token: word `i` at word-level
    /// position `i + 1`.
    fn of_trees(
        names: Vec<String>,
        ids: Vec<Vec<u32>>,
        trees: Vec<TreebankSentence>,
        (tokenizer, read_as): (&WordPieces, ReadAs),
        max_positions: usize,
    ) -> Result<Self, PieceProbeError> {
        let mut kept = PieceSentences {
            trees: vec![],
            ids: vec![],
            names,
            encoded: vec![],
            spans: vec![],
            too_long: 0,
        };
        let offered = trees.len();
        let mut shortest: Option<usize> = None;
        for (tree, ids) in trees.into_iter().zip(ids) {
            let words = &tree.words;
            let encoded = read_as.encode(&tree, tokenizer)?;
            if encoded.ids.len() > max_positions {
                kept.too_long += 1;
                shortest = Some(shortest.map_or(encoded.ids.len(), |s| s.min(encoded.ids.len())));
                continue;
            }
            let layout = |problem: String| PieceProbeError::Layout {
                tokenizer: tokenizer.path().display().to_string(),
                sentence: words.join(" "),
                problem,
            };
            // A word the tokenizer drops (a zero-width or control character: BERT's
            // normalizer removes them) has no piece to give attention to or receive it.
            if let Some(empty) = encoded.first_word_without_piece(words.len()) {
                return Err(layout(format!(
                    "word {} ({:?}) is no word piece at all as the tokenizer reads it (it drops \
                     the word: a zero-width or control character?), so no attention can reach \
                     it; leave the word or its sentence out of the file",
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
                    "expected one special piece, the {} words, one special piece ([CLS] ... \
                     [SEP], <s> ... </s>); the tokenizer gave {:?}",
                    words.len(),
                    encoded.pieces
                )));
            }
            kept.trees.push(tree);
            kept.ids.push(ids);
            kept.encoded.push(encoded);
            kept.spans.push(spans);
        }
        if kept.trees.is_empty() {
            // Read on, an empty probe would fail deep in a forward pass.
            return Err(PieceProbeError::NoneFits {
                sentences: offered,
                max_positions,
                shortest,
            });
        }
        Ok(kept)
    }

    /// Whether `tree` fits `max_positions` as a tokenizer reads it (`reader`), `[CLS]` and
    /// `[SEP]` included.
    pub fn fits(
        tree: &TreebankSentence,
        (tokenizer, read_as): (&WordPieces, ReadAs),
        max_positions: usize,
    ) -> Result<bool, TokenizerError> {
        Ok(read_as.encode(tree, tokenizer)?.ids.len() <= max_positions)
    }

    /// Keeps the first `n` sentences.
    pub fn truncate(&mut self, n: usize) {
        self.trees.truncate(n);
        self.ids.truncate(n);
        self.encoded.truncate(n);
        self.spans.truncate(n);
    }

    /// Sentences kept.
    pub fn len(&self) -> usize {
        self.trees.len()
    }

    /// Whether none was kept.
    pub fn is_empty(&self) -> bool {
        self.trees.is_empty()
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
