//! Relation scores on sentences masked as the models read them in training (`inspect
//! --relations-masked`). headlab's grammar models never see a whole sentence: training masks
//! each word with the task's `mask_fraction` (at least one per sentence); BERT-style models
//! were trained on text with 15% of it masked. `relations.json` is scored on whole sentences
//! by default, as Clark et al. scored BERT; masked, each scored sentence has words masked
//! the same way (each with probability `fraction`, one at random when none was), every arc
//! still scored, and the masked positions recorded ([`RelationMasking`]).
//!
//! A masked word reads as the task's `<mask>` token for a model headlab trained, and as
//! `[MASK]` in place of every one of its pieces for an imported one (whole-word masking, so
//! the word keeps its pieces' positions): the model's reading hides it
//! ([`crate::load::reading::ReadSentences::masked`]).

use serde::{Deserialize, Serialize};
use tasks::batch::mix_seed;

/// Stream of the masks' draws, apart from every other stream of a report.
pub const RELATION_MASK_STREAM: u64 = u64::MAX - 8;

/// How `relations.json`'s sentences were masked, when they were.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RelationMasking {
    /// Each word's probability of being masked (the task's `mask_fraction`).
    pub fraction: f64,
    /// Per scored sentence, in order, the masked words' positions (0-based).
    pub masked: Vec<Vec<u16>>,
}

/// Masks for sentences of `lengths` words: each word with probability `fraction`, and one at
/// random in a sentence where none was, drawn from `seed` (the run's seed; the stream is
/// [`RELATION_MASK_STREAM`]).
pub fn training_masks(lengths: &[usize], fraction: f64, seed: u64) -> Vec<Vec<bool>> {
    let stream = mix_seed(seed, RELATION_MASK_STREAM);
    // A uniform draw in [0, 1) from the top 53 bits of a counter's mix.
    let uniform = |counter: u64| (mix_seed(stream, counter) >> 11) as f64 / (1u64 << 53) as f64;
    let mut counter = 0u64;
    let mut next = || {
        counter += 1;
        uniform(counter)
    };
    lengths
        .iter()
        .map(|&n| {
            let mut mask: Vec<bool> = (0..n).map(|_| next() < fraction).collect();
            if n > 0 && !mask.contains(&true) {
                mask[((next() * n as f64) as usize).min(n - 1)] = true;
            }
            mask
        })
        .collect()
}

/// The positions each mask hides, for [`RelationMasking::masked`].
pub fn masked_positions(masks: &[Vec<bool>]) -> Vec<Vec<u16>> {
    masks
        .iter()
        .map(|mask| {
            (0..mask.len())
                .filter(|&w| mask[w])
                .map(|w| w as u16)
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_hide_about_the_fraction_and_at_least_one_word_each() {
        let lengths = vec![8; 2000];
        let masks = training_masks(&lengths, 0.15, 7);
        assert!(masks.iter().all(|m| m.len() == 8 && m.contains(&true)));
        // Each word with 0.15, plus one where none was (0.85^8 = 27% of sentences): an
        // expected 0.15 + 0.27 / 8 = 0.184 of the words.
        let hidden = masks.iter().flatten().filter(|&&h| h).count() as f64 / 16000.0;
        assert!((hidden - 0.184).abs() < 0.01, "{hidden}");
        // Seeded: the same masks again, other masks from another seed.
        assert_eq!(training_masks(&lengths, 0.15, 7), masks);
        assert_ne!(training_masks(&lengths, 0.15, 8), masks);
    }

    #[test]
    fn positions_follow_the_mask() {
        let mask = vec![false, true, false, true];
        assert_eq!(
            masked_positions(std::slice::from_ref(&mask)),
            vec![vec![1u16, 3]]
        );
    }
}
