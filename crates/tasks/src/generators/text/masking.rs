//! BERT's masking (Devlin et al. 2019, section 3.1): each piece of a sequence (never `[CLS]`
//! or `[SEP]`) is chosen with probability `mask_rate`; a chosen piece becomes `[MASK]` 80% of
//! the time, a random piece 10% and stays itself 10%, and only chosen pieces are scored. With
//! whole-word masking, words are chosen and every piece of a chosen word is masked.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::example::Example;

/// What masking needs to know of the vocabulary.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MaskVocab {
    /// The `[MASK]` piece.
    pub mask: u32,
    /// Random replacements are drawn from `first_ordinary..vocab_size` (no special piece).
    pub first_ordinary: u32,
    /// Pieces in the vocabulary.
    pub vocab_size: u32,
}

/// How pieces are chosen.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Masking {
    /// Probability that a piece (or a word, with `whole_word`) is chosen.
    pub rate: f64,
    /// Choose words and mask all their pieces.
    pub whole_word: bool,
}

impl Masking {
    /// `pieces` masked: the input with chosen pieces replaced, the original pieces as targets
    /// where chosen. `maskable[i]` is false for `[CLS]` and `[SEP]`; `starts_word[i]` marks
    /// the first piece of each word. Draws from `rng` in position order, the same number of
    /// draws for every sequence of one length, so a seed fixes every mask.
    pub fn apply(
        &self,
        pieces: &[u32],
        maskable: &[bool],
        starts_word: &[bool],
        vocab: MaskVocab,
        rng: &mut ChaCha8Rng,
    ) -> Example {
        let mut input = pieces.to_vec();
        let mut target = vec![None; pieces.len()];
        let mut word_chosen = false;
        for i in 0..pieces.len() {
            // One draw per position, chosen or not.
            let draw: f64 = rng.random();
            let kind: f64 = rng.random();
            let replacement = rng.random_range(vocab.first_ordinary..vocab.vocab_size);
            if !maskable[i] {
                word_chosen = false;
                continue;
            }
            let chosen = match self.whole_word {
                true if starts_word[i] => {
                    word_chosen = draw < self.rate;
                    word_chosen
                }
                true => word_chosen,
                false => draw < self.rate,
            };
            if !chosen {
                continue;
            }
            target[i] = Some(pieces[i]);
            input[i] = match kind {
                k if k < 0.8 => vocab.mask,
                k if k < 0.9 => replacement,
                _ => pieces[i],
            };
        }
        Example { input, target }
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    const VOCAB: MaskVocab = MaskVocab {
        mask: 4,
        first_ordinary: 5,
        vocab_size: 100,
    };

    #[test]
    fn about_fifteen_percent_are_chosen_and_eighty_percent_of_those_masked() {
        let n = 20_000;
        let pieces: Vec<u32> = (0..n).map(|i| 5 + (i % 90)).collect();
        let maskable = vec![true; n as usize];
        let starts = vec![true; n as usize];
        let masking = Masking {
            rate: 0.15,
            whole_word: false,
        };
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let example = masking.apply(&pieces, &maskable, &starts, VOCAB, &mut rng);
        let chosen: Vec<usize> = (0..n as usize)
            .filter(|&i| example.target[i].is_some())
            .collect();
        let share = chosen.len() as f64 / n as f64;
        assert!((share - 0.15).abs() < 0.01, "{share}");
        let masked = chosen.iter().filter(|&&i| example.input[i] == 4).count();
        let kept = chosen
            .iter()
            .filter(|&&i| example.input[i] == pieces[i])
            .count();
        let masked_share = masked as f64 / chosen.len() as f64;
        let kept_share = kept as f64 / chosen.len() as f64;
        assert!((masked_share - 0.8).abs() < 0.03, "{masked_share}");
        // Kept: the 10% kept, and a random piece that happens to be the same (1/95 of 10%).
        assert!((kept_share - 0.1).abs() < 0.03, "{kept_share}");
        // Unchosen positions are untouched and unscored; targets are the original pieces.
        for ((target, input), piece) in example.target.iter().zip(&example.input).zip(&pieces) {
            match target {
                None => assert_eq!(input, piece),
                Some(t) => assert_eq!(t, piece),
            }
        }
    }

    #[test]
    fn special_pieces_are_never_chosen_and_whole_words_go_together() {
        // [CLS] w1 ##a ##b w2 ##c [SEP], repeated.
        let unit = [2u32, 10, 11, 12, 13, 14, 3];
        let pieces: Vec<u32> = unit.iter().copied().cycle().take(7 * 500).collect();
        let maskable: Vec<bool> = pieces.iter().map(|&p| p != 2 && p != 3).collect();
        let starts: Vec<bool> = pieces
            .iter()
            .map(|&p| [2, 3, 10, 13].contains(&p))
            .collect();
        let masking = Masking {
            rate: 0.5,
            whole_word: true,
        };
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        let example = masking.apply(&pieces, &maskable, &starts, VOCAB, &mut rng);
        for chunk in example.target.chunks(7) {
            assert!(chunk[0].is_none() && chunk[6].is_none());
            let first = chunk[1..4].iter().map(Option::is_some).collect::<Vec<_>>();
            assert!(first.iter().all(|c| *c == first[0]), "{chunk:?}");
            assert_eq!(chunk[4].is_some(), chunk[5].is_some(), "{chunk:?}");
        }
        let words_chosen = example.target.iter().filter(|t| t.is_some()).count();
        assert!(words_chosen > 1000, "{words_chosen}");
    }
}
