//! The task's minimal pairs read as an imported model's word pieces, so that patching runs
//! on a masked-LM checkpoint as on a model headlab trained: the grammar's agreement pairs
//! (`the dog near the cats [MASK] ...` against `the dogs near the cats [MASK] ...`, the
//! answer the verb's two forms) written as words, read by the model's tokenizer, the masked
//! word a single `[MASK]`.
//!
//! Patching compares the two runs position by position and reads one logit difference at
//! one position, so a pair is kept only where that holds in pieces too: both sentences come
//! out as the same number of pieces, the masked word's two answers are each one piece of the
//! vocabulary (not `[UNK]`, not split), and the sentences fit the model's positions. The
//! rest are counted ([`PiecePairs::left_out`]). [`mask_in_pieces`] is the rule, shared
//! with the agreement test in pieces (`measures::agreement`).

use hf::tokenizer::WordPieces;
use tasks::{Example, MinimalPair};

use crate::load::sentences::PieceProbeError;
use crate::load::words::WordSpans;

/// Minimal pairs in word pieces.
#[derive(Debug, Clone, PartialEq)]
pub struct PiecePairs {
    /// The pairs kept: inputs are piece ids with the masked word as one `[MASK]`; the
    /// position, changed positions and answers are in pieces.
    pub pairs: Vec<MinimalPair>,
    /// Pairs left out: pieces that do not line up, an answer that is not one piece, or a
    /// sentence longer than the model's positions.
    pub left_out: usize,
}

impl PiecePairs {
    /// `pairs` (of a task whose token ids are named by `names`; each pair masks one word,
    /// at its `position`) read by `tokenizer`, its mask piece `mask`.
    pub fn of(
        pairs: &[MinimalPair],
        names: &[String],
        tokenizer: &WordPieces,
        mask: u32,
        max_positions: usize,
    ) -> Result<Self, PieceProbeError> {
        let mut read = PiecePairs {
            pairs: vec![],
            left_out: 0,
        };
        for pair in pairs {
            match piece_pair(pair, names, tokenizer, mask, max_positions)? {
                Some(pair) => read.pairs.push(pair),
                None => read.left_out += 1,
            }
        }
        Ok(read)
    }
}

/// A task sentence with one word masked, as the model reads it: for a model that reads word
/// pieces ([`mask_in_pieces`]), the word one piece of the vocabulary, spelled as the word,
/// replaced by the mask.
#[derive(Debug, Clone, PartialEq)]
pub struct MaskedWord {
    /// The sentence, the word masked and scored against `answer`.
    pub example: Example,
    /// Where the masked word (its one piece) is.
    pub position: usize,
    /// The word (its piece) the mask hides.
    pub answer: u32,
}

/// The sentence `input` (task ids named by `names`) with `answer` written at word
/// `position`, read by `tokenizer` and that word masked with piece `mask`; `None` where the
/// word is not one piece spelled as the word (split, `[UNK]`, out of the vocabulary) or the
/// pieces do not fit `max_positions`.
pub fn mask_in_pieces(
    input: &[u32],
    names: &[String],
    (position, answer): (usize, u32),
    tokenizer: &WordPieces,
    mask: u32,
    max_positions: usize,
) -> Result<Option<MaskedWord>, PieceProbeError> {
    let words: Vec<&str> = input
        .iter()
        .enumerate()
        .map(|(i, &id)| match i == position {
            true => names[answer as usize].as_str(),
            false => names[id as usize].as_str(),
        })
        .collect();
    let encoded = tokenizer.encode_words(&words)?;
    let Ok(spans) = WordSpans::of(&encoded.words) else {
        return Ok(None);
    };
    if spans.words() != words.len() || encoded.ids.len() > max_positions {
        return Ok(None);
    }
    let pieces = spans.pieces_of(spans.position_of_word(position));
    let word = words[position];
    let piece = &encoded.pieces[pieces.start];
    if pieces.len() != 1 || (piece != word && *piece != word.to_lowercase()) {
        return Ok(None);
    }
    let (at, answer) = (pieces.start, encoded.ids[pieces.start]);
    let mut input = encoded.ids;
    input[at] = mask;
    let mut target = vec![None; input.len()];
    target[at] = Some(answer);
    Ok(Some(MaskedWord {
        example: Example { input, target },
        position: at,
        answer,
    }))
}

/// `pair` in pieces, or `None` where it does not line up.
fn piece_pair(
    pair: &MinimalPair,
    names: &[String],
    tokenizer: &WordPieces,
    mask: u32,
    max_positions: usize,
) -> Result<Option<MinimalPair>, PieceProbeError> {
    // Each side with its answer written in: the answer must be one piece of its own.
    let side = |example: &Example, answer: u32| {
        let at = (pair.position, answer);
        mask_in_pieces(&example.input, names, at, tokenizer, mask, max_positions)
    };
    let (Some(clean), Some(corrupted)) = (
        side(&pair.clean, pair.clean_answer)?,
        side(&pair.corrupted, pair.corrupted_answer)?,
    ) else {
        return Ok(None);
    };
    let (a, b) = (&clean.example.input, &corrupted.example.input);
    if a.len() != b.len()
        || corrupted.position != clean.position
        || clean.answer == corrupted.answer
    {
        return Ok(None);
    }
    // Both sides are masked at the answer, so they differ only where the change is.
    let changed: Vec<usize> = (0..a.len()).filter(|&i| a[i] != b[i]).collect();
    if changed.is_empty() {
        return Ok(None);
    }
    Ok(Some(MinimalPair {
        position: clean.position,
        changed,
        clean_answer: clean.answer,
        corrupted_answer: corrupted.answer,
        clean: clean.example,
        corrupted: corrupted.example,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokenizer() -> WordPieces {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../model/tests/fixtures/bert/one-layer/tokenizer.json");
        WordPieces::read(&path).unwrap()
    }

    /// `the NOUN <mask>` against `the OTHER <mask>`, answers `runs` / `run`, in ids of
    /// `NAMES`.
    fn pair(noun: u32, other: u32) -> MinimalPair {
        let example = |subject: u32, answer: u32| Example {
            input: vec![2, subject, 1],
            target: vec![None, None, Some(answer)],
        };
        MinimalPair {
            clean: example(noun, 5),
            corrupted: example(other, 6),
            position: 2,
            changed: vec![1],
            clean_answer: 5,
            corrupted_answer: 6,
        }
    }

    const NAMES: [&str; 11] = [
        "<pad>", "<mask>", "the", "dog", "dogs", "runs", "run", "farmer", "farmers", "bird",
        "birds",
    ];

    #[test]
    fn a_pair_is_kept_only_where_its_pieces_line_up() {
        let tokenizer = tokenizer();
        let names: Vec<String> = NAMES.iter().map(|n| n.to_string()).collect();
        let mask = tokenizer.id("[MASK]").unwrap();
        let id = |piece: &str| tokenizer.id(piece).unwrap();
        let pairs = [
            pair(3, 4),  // dog / dogs: one piece each
            pair(7, 8),  // farm ##er / farm ##er ##s: three pieces against two
            pair(9, 10), // bird / birds: both [UNK], nothing changes
        ];
        let read = PiecePairs::of(&pairs, &names, &tokenizer, mask, 16).unwrap();
        assert_eq!(read.left_out, 2);
        let [kept] = &read.pairs[..] else {
            panic!("{:?}", read.pairs)
        };
        // [CLS] the dog [MASK] [SEP]
        let (cls, sep) = (id("[CLS]"), id("[SEP]"));
        assert_eq!(kept.clean.input, [cls, id("the"), id("dog"), mask, sep]);
        assert_eq!(
            kept.corrupted.input,
            [cls, id("the"), id("dogs"), mask, sep]
        );
        assert_eq!((kept.position, &kept.changed[..]), (3, &[2][..]));
        assert_eq!(
            (kept.clean_answer, kept.corrupted_answer),
            (id("runs"), id("run"))
        );
        assert_eq!(kept.clean.target[3], Some(id("runs")));
        assert_eq!(kept.corrupted.target[3], Some(id("run")));

        // Too long for the model's positions.
        let read = PiecePairs::of(&pairs[..1], &names, &tokenizer, mask, 4).unwrap();
        assert_eq!((read.pairs.len(), read.left_out), (0, 1));
    }
}
