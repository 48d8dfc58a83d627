//! Word-level attention, for models that read word pieces (an imported BERT): the
//! definition of Clark et al. 2019 ("What Does BERT Look At?", section 2). Attention *to* a
//! word is the sum of the attention to its pieces; attention *from* a word is the mean of its
//! pieces' attention rows. So every word-level row still sums to one, and a word of one piece
//! keeps its row and column exactly. Pieces of no word (`[CLS]`, `[SEP]`) stay positions of
//! their own, in sentence order, so what a head gives them is reported, not lost.

use run::tensor_file::HostTensor;

/// How a sentence's pieces group into word-level positions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WordSpans {
    /// For each word-level position, in order, the pieces it holds (consecutive).
    groups: Vec<std::ops::Range<usize>>,
    /// For each word, its word-level position.
    word_positions: Vec<usize>,
    /// Pieces in the sentence.
    pieces: usize,
}

/// Pieces that cannot be grouped into words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("word pieces out of order: piece {piece} belongs to word {word} after word {previous}")]
pub struct SpanError {
    /// The piece at fault.
    pub piece: usize,
    /// Its word.
    pub word: usize,
    /// The word of the piece before it.
    pub previous: usize,
}

impl WordSpans {
    /// Groups pieces by the word each belongs to (`None`: a special token, its own
    /// position), as a tokenizer reports them ([`hf::tokenizer::Encoded::words`]). Words
    /// must come in order, each in consecutive pieces, starting at word 0.
    pub fn of(words: &[Option<usize>]) -> Result<WordSpans, SpanError> {
        let mut groups: Vec<std::ops::Range<usize>> = vec![];
        let mut word_positions = vec![];
        let mut previous: Option<usize> = None;
        for (piece, word) in words.iter().enumerate() {
            match word {
                None => groups.push(piece..piece + 1),
                // The word goes on only where its last piece is the last position so far (a
                // special piece between two of its pieces ends it).
                Some(word)
                    if Some(*word) == previous
                        && word_positions.last() == Some(&(groups.len() - 1)) =>
                {
                    groups.last_mut().expect("checked").end = piece + 1;
                }
                Some(word) => {
                    let expected = previous.map_or(0, |p| p + 1);
                    if *word != expected {
                        return Err(SpanError {
                            piece,
                            word: *word,
                            previous: previous.unwrap_or(0),
                        });
                    }
                    word_positions.push(groups.len());
                    groups.push(piece..piece + 1);
                    previous = Some(*word);
                }
            }
        }
        Ok(WordSpans {
            groups,
            word_positions,
            pieces: words.len(),
        })
    }

    /// Word-level positions: the words and the special tokens.
    pub fn len(&self) -> usize {
        self.groups.len()
    }

    /// Whether there are no positions.
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// Pieces in the sentence.
    pub fn pieces(&self) -> usize {
        self.pieces
    }

    /// Words (positions that are not special tokens).
    pub fn words(&self) -> usize {
        self.word_positions.len()
    }

    /// The word-level position of word `word`.
    pub fn position_of_word(&self, word: usize) -> usize {
        self.word_positions[word]
    }

    /// The pieces of word-level position `position`.
    pub fn pieces_of(&self, position: usize) -> std::ops::Range<usize> {
        self.groups[position].clone()
    }

    /// One head's attention over pieces, `pattern[q * stride + k]` for pieces `q` and `k`
    /// (`stride` at least [`Self::pieces`]: a padded batch's row length), as word-level
    /// attention, `[len, len]` row-major.
    pub fn aggregate(&self, pattern: &[f32], stride: usize) -> Vec<f32> {
        let n = self.len();
        let mut words = vec![0.0f32; n * n];
        for (from, queries) in self.groups.iter().enumerate() {
            let share = 1.0 / queries.len() as f32;
            for q in queries.clone() {
                let row = &pattern[q * stride..q * stride + self.pieces];
                for (to, keys) in self.groups.iter().enumerate() {
                    let to_word: f32 = row[keys.clone()].iter().sum();
                    words[from * n + to] += share * to_word;
                }
            }
        }
        words
    }

    /// One sentence's per-piece vectors, `rows[p * width..(p + 1) * width]` for piece `p`,
    /// as per-position vectors `[len, width]`: the mean over each position's pieces (the
    /// "from a word" rule, for what a head reads and writes at a word).
    pub fn mean_rows(&self, rows: &[f32], width: usize) -> Vec<f32> {
        let mut out = vec![0.0f32; self.len() * width];
        for (position, pieces) in self.groups.iter().enumerate() {
            let share = 1.0 / pieces.len() as f32;
            let target = &mut out[position * width..(position + 1) * width];
            for p in pieces.clone() {
                for (t, v) in target.iter_mut().zip(&rows[p * width..(p + 1) * width]) {
                    *t += share * v;
                }
            }
        }
        out
    }
}

/// Every head's attention of a padded batch, `[batch, heads, pieces, pieces]`, as word-level
/// attention `[batch, heads, len, len]`, sentence `b` grouped by `spans[b]`: `len` is the
/// longest sentence's word-level length, and a shorter sentence's `[len_b, len_b]` block
/// sits at the top left, zeros around it.
pub fn word_patterns(pattern: &HostTensor, spans: &[WordSpans]) -> HostTensor {
    let [batch, heads, seq, seq_k] = pattern.shape[..] else {
        panic!("patterns are [batch, heads, seq, seq]")
    };
    assert!(
        seq == seq_k && batch == spans.len(),
        "one span per sentence"
    );
    let len = spans.iter().map(WordSpans::len).max().unwrap_or(0);
    let mut values = vec![0.0f32; batch * heads * len * len];
    for (b, sentence) in spans.iter().enumerate() {
        assert!(sentence.pieces() <= seq, "a sentence longer than its batch");
        let n = sentence.len();
        for h in 0..heads {
            let start = (b * heads + h) * seq * seq;
            let words = sentence.aggregate(&pattern.values[start..start + seq * seq], seq);
            let out = (b * heads + h) * len * len;
            for row in 0..n {
                values[out + row * len..out + row * len + n]
                    .copy_from_slice(&words[row * n..(row + 1) * n]);
            }
        }
    }
    HostTensor {
        values,
        shape: vec![batch, heads, len, len],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `[CLS] the farm ##er barks [SEP]`: words 0, 1 (two pieces), 2.
    fn farmer() -> WordSpans {
        WordSpans::of(&[None, Some(0), Some(1), Some(1), Some(2), None]).unwrap()
    }

    #[test]
    fn pieces_group_into_words_with_the_special_tokens_on_their_own() {
        let spans = farmer();
        assert_eq!((spans.len(), spans.words(), spans.pieces()), (5, 3, 6));
        assert_eq!(spans.pieces_of(2), 2..4);
        assert_eq!(
            (0..3)
                .map(|w| spans.position_of_word(w))
                .collect::<Vec<_>>(),
            [1, 2, 3]
        );
        let error = WordSpans::of(&[None, Some(1)]).unwrap_err();
        assert_eq!(
            error.to_string(),
            "word pieces out of order: piece 1 belongs to word 1 after word 0"
        );
        // A word split by another word is two words, out of order.
        assert!(WordSpans::of(&[Some(0), Some(1), Some(0)]).is_err());
        // A word's pieces are consecutive: a special piece between two of them is refused,
        // not folded into the special piece's position.
        assert!(WordSpans::of(&[Some(0), None, Some(0)]).is_err());
    }

    #[test]
    fn attention_to_a_word_is_summed_and_from_a_word_averaged() {
        let spans = farmer();
        // Row q of the piece pattern: q's attention over the 6 pieces (padded to stride 7).
        #[rustfmt::skip]
        let pieces = [
            // [CLS]  the  farm ##er barks [SEP] pad
            0.5,  0.1, 0.1, 0.1, 0.1, 0.1, 0.0, // [CLS]
            0.0,  0.0, 0.6, 0.2, 0.2, 0.0, 0.0, // the
            0.2,  0.2, 0.0, 0.4, 0.2, 0.0, 0.0, // farm
            0.0,  0.0, 0.6, 0.0, 0.0, 0.4, 0.0, // ##er
            0.0,  0.0, 0.5, 0.5, 0.0, 0.0, 0.0, // barks
            0.0,  0.0, 0.0, 0.0, 0.0, 1.0, 0.0, // [SEP]
            0.0,  0.0, 0.0, 0.0, 0.0, 0.0, 0.0, // pad
        ];
        let words = spans.aggregate(&pieces, 7);
        #[rustfmt::skip]
        let want = [
            // [CLS] the  farmer barks [SEP]
            0.5,  0.1, 0.2,  0.1, 0.1, // [CLS]
            0.0,  0.0, 0.8,  0.2, 0.0, // the: 0.6 + 0.2 to farmer
            0.1,  0.1, 0.5,  0.1, 0.2, // farmer: the mean of farm's and ##er's rows
            0.0,  0.0, 1.0,  0.0, 0.0, // barks
            0.0,  0.0, 0.0,  0.0, 1.0, // [SEP]
        ];
        for (i, (got, want)) in words.iter().zip(want).enumerate() {
            assert!((got - want).abs() < 1e-6, "entry {i}: {got} != {want}");
        }
        for row in words.chunks(5) {
            assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-6);
        }
    }

    #[test]
    fn vectors_from_a_word_are_the_mean_over_its_pieces() {
        let spans = farmer();
        // Piece p's vector is [p, 10 p].
        let rows: Vec<f32> = (0..6).flat_map(|p| [p as f32, 10.0 * p as f32]).collect();
        let words = spans.mean_rows(&rows, 2);
        assert_eq!(
            words,
            [0.0, 0.0, 1.0, 10.0, 2.5, 25.0, 4.0, 40.0, 5.0, 50.0]
        );
    }

    #[test]
    fn a_batch_becomes_word_level_head_by_head() {
        // Two sentences of three word-level positions: one of three pieces, one of four.
        let short = WordSpans::of(&[None, Some(0), None]).unwrap();
        let long = WordSpans::of(&[None, Some(0), Some(0), None]).unwrap();
        let (heads, seq) = (2, 4);
        let values: Vec<f32> = (0..2 * heads * seq * seq).map(|i| i as f32).collect();
        let pattern = HostTensor {
            values: values.clone(),
            shape: vec![2, heads, seq, seq],
        };
        let words = word_patterns(&pattern, &[short.clone(), long.clone()]);
        assert_eq!(words.shape, [2, heads, 3, 3]);
        // Sentence 1, head 1 against its own aggregate.
        let start = (heads + 1) * seq * seq;
        let want = long.aggregate(&values[start..start + seq * seq], seq);
        assert_eq!(words.values[(heads + 1) * 9..(heads + 2) * 9], want[..]);
        // The short sentence reads only its three pieces of each padded row.
        assert_eq!(words.values[..9], short.aggregate(&values[..16], 4)[..]);
    }

    #[test]
    fn a_shorter_sentence_sits_at_the_top_left_with_zeros_around_it() {
        let long = WordSpans::of(&[None, Some(0), Some(1), None]).unwrap(); // 4 positions
        let short = WordSpans::of(&[None, None]).unwrap(); // 2 positions
        let seq = 4;
        let values: Vec<f32> = (0..2 * seq * seq).map(|i| i as f32).collect();
        let pattern = HostTensor {
            values: values.clone(),
            shape: vec![2, 1, seq, seq],
        };
        let words = word_patterns(&pattern, &[long, short.clone()]);
        assert_eq!(words.shape, [2, 1, 4, 4]);
        let block = short.aggregate(&values[16..], seq); // [2, 2]
        let second = &words.values[16..];
        assert_eq!(second[..2], block[..2]);
        assert_eq!(second[4..6], block[2..]);
        assert!(second[2..4].iter().chain(&second[6..]).all(|&v| v == 0.0));
    }
}
