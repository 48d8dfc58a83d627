//! The masked words an imported masked-LM checkpoint (a `BertForMaskedLM`) is scored on:
//! every word of every probe sentence masked alone, all its pieces replaced by `[MASK]`
//! (whole-word masking, as BERT's later checkpoints were trained), each of those pieces
//! scored against the piece it hides. No random draw: the set follows from the probe, so
//! the same probe gives the same examples, and each example's sentence and word are kept
//! ([`MaskedWords::masked`]) for anyone recomputing a score.
//!
//! These examples are the evaluation set of the output-side measures (accuracy, the three
//! ablations, direct logit attribution, gradient importance, pruning, the logit lens), as
//! the task's own masked examples are for a model headlab trained.

use tasks::Example;

use crate::load::sentences::PieceSentences;

/// The probe's sentences with one word masked in each example.
#[derive(Debug, Clone, PartialEq)]
pub struct MaskedWords {
    /// One example per (sentence, word): the sentence's pieces, `[CLS]` and `[SEP]`
    /// included, with the word's pieces replaced by the mask and scored (target: the piece
    /// hidden); every other position unscored.
    pub examples: Vec<Example>,
    /// For each example, the sentence (index into the probe's sentences) and the word
    /// (0-based) masked.
    pub masked: Vec<(usize, usize)>,
}

impl MaskedWords {
    /// Every word of every sentence of `sentences` masked alone with piece `mask`, in order
    /// of sentence then word.
    pub fn of(sentences: &PieceSentences, mask: u32) -> Self {
        let mut words = MaskedWords {
            examples: vec![],
            masked: vec![],
        };
        for (sentence, (encoded, spans)) in
            sentences.encoded.iter().zip(&sentences.spans).enumerate()
        {
            for word in 0..spans.words() {
                let pieces = spans.pieces_of(spans.position_of_word(word));
                let mut input = encoded.ids.clone();
                let mut target = vec![None; input.len()];
                for piece in pieces {
                    target[piece] = Some(input[piece]);
                    input[piece] = mask;
                }
                words.examples.push(Example { input, target });
                words.masked.push((sentence, word));
            }
        }
        words
    }

    /// Examples.
    pub fn len(&self) -> usize {
        self.examples.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.examples.is_empty()
    }
}
