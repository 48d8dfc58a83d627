//! Minimal pairs a user writes (`inspect --pairs FILE`), the agreement tests of Linzen et al.
//! (2016) and of TransformerLens tutorials: a clean sentence and its corrupted twin, each with
//! the word to predict written `[MASK]`, and the two answers, read by the model's own
//! tokenizer into [`MinimalPair`]s that every patching analysis runs on, as on a task's
//! pairs (`patching.json`'s `own` section).
//!
//! The file is UTF-8 text, one pair a line, four fields separated by tabs:
//!
//! ```text
//! # clean<TAB>corrupted<TAB>clean answer<TAB>corrupted answer
//! The keys to the cabinet [MASK] on the table.<TAB>The key to the cabinet [MASK] on the table.<TAB>are<TAB>is
//! ```
//!
//! (`<TAB>` a tab character.)
//! Blank lines and lines starting with `#` are skipped. Patching compares the two runs
//! position by position and reads one logit difference at one position, so each pair must
//! hold that in pieces: both sentences read as the same number of pieces with the mask at
//! the same place, each answer one piece of the vocabulary there (read in the sentence, so
//! that a byte-level BPE's `Ġare` is the piece scored), and the two answers different. A
//! pair that does not is refused by its line, with the pieces the model reads, never
//! dropped in silence: a user's pairs are few and chosen.

use std::path::{Path, PathBuf};

use hf::tokenizer::{TokenizerError, WordPieces};
use serde::{Deserialize, Serialize};
use tasks::{Example, MinimalPair};

use crate::load::typed::{TypedTextError, read_small_file, text_lines};

/// How a pair's sentences mark the word to predict, whatever the model's mask piece
/// (`[MASK]`, `<mask>`).
pub const MASK_WORD: &str = "[MASK]";

/// Most pairs one file may hold: every pair runs in one batch, once per patched head.
pub const MAX_OWN_PAIRS: usize = 1024;

/// A pairs file as written: its lines' pairs, the file named and fingerprinted for the
/// report.
#[derive(Debug, Clone, PartialEq)]
pub struct PairsFile {
    /// The file, made absolute (the report names it wherever it is opened from).
    pub path: PathBuf,
    /// SHA-256 of its bytes.
    pub sha256: String,
    /// Its pairs, in order.
    pub pairs: Vec<WrittenPair>,
}

/// A pairs file with its pairs as the model reads them.
#[derive(Debug, Clone, PartialEq)]
pub struct OwnPairs {
    /// The file as written.
    pub file: PairsFile,
    /// Its pairs in the model's pieces, in the file's order.
    pub pairs: Vec<MinimalPair>,
}

/// One line of a pairs file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WrittenPair {
    /// Its 1-based line in the file.
    pub line: usize,
    /// The clean sentence, `[MASK]` where the answer goes.
    pub clean: String,
    /// The corrupted sentence, `[MASK]` at the same word.
    pub corrupted: String,
    /// The clean sentence's answer (`are`).
    pub clean_answer: String,
    /// The corrupted sentence's answer (`is`).
    pub corrupted_answer: String,
}

/// Why a pairs file cannot be patched: the file, and the line at fault with what would be
/// accepted.
#[derive(Debug, thiserror::Error)]
pub enum PairsFileError {
    /// The file cannot be read, or is not UTF-8, or has no line.
    #[error(transparent)]
    Read(#[from] TypedTextError),
    /// A line that is not a pair the model can be patched on.
    #[error("{path} line {line}: {problem}")]
    Line {
        /// The file.
        path: PathBuf,
        /// The 1-based line.
        line: usize,
        /// What is wrong, and what would do.
        problem: String,
    },
    /// More pairs than one run holds.
    #[error(
        "{path} holds {pairs} pairs; --pairs reads at most {MAX_OWN_PAIRS} (they run as one \
         batch per patched head): split the file"
    )]
    TooMany {
        /// The file.
        path: PathBuf,
        /// Its pairs.
        pairs: usize,
    },
    /// The model's tokenizer failed on a sentence.
    #[error(transparent)]
    Tokenizer(#[from] TokenizerError),
}

impl PairsFile {
    /// The pairs of the file at `path`, each line's fields checked (four, the mask once in
    /// each sentence, one word per answer, two answers that differ).
    pub fn read(path: &Path) -> Result<Self, PairsFileError> {
        // Read once: the hash is of the bytes parsed.
        let bytes = read_small_file(path)?;
        let sha256 = run::hash::sha256_hex(&bytes);
        let lines = text_lines(path, bytes)?;
        let pairs = lines
            .into_iter()
            .filter(|(_, text)| !text.starts_with('#'))
            .map(|(line, text)| written_pair(line, &text).map_err(|problem| (line, problem)))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|(line, problem)| PairsFileError::Line {
                path: path.to_path_buf(),
                line,
                problem,
            })?;
        if pairs.is_empty() {
            return Err(TypedTextError::NoSentence(path.to_path_buf()).into());
        }
        if pairs.len() > MAX_OWN_PAIRS {
            return Err(PairsFileError::TooMany {
                path: path.to_path_buf(),
                pairs: pairs.len(),
            });
        }
        Ok(Self {
            path: std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()),
            sha256,
            pairs,
        })
    }

    /// The pairs as `tokenizer` reads them, the masked word its piece `mask`, each within
    /// `max_positions` pieces; the first pair that does not line up is refused by its line.
    pub fn in_pieces(
        &self,
        tokenizer: &WordPieces,
        mask: u32,
        max_positions: usize,
    ) -> Result<Vec<MinimalPair>, PairsFileError> {
        self.pairs
            .iter()
            .map(|pair| {
                piece_pair(pair, tokenizer, mask, max_positions)?.map_err(|problem| {
                    PairsFileError::Line {
                        path: self.path.clone(),
                        line: pair.line,
                        problem,
                    }
                })
            })
            .collect()
    }
}

/// One line's four fields, or what is wrong with them.
fn written_pair(line: usize, text: &str) -> Result<WrittenPair, String> {
    let fields: Vec<&str> = text.split('\t').map(str::trim).collect();
    let [clean, corrupted, clean_answer, corrupted_answer] = fields[..] else {
        return Err(format!(
            "{} field(s) separated by tabs; a pair is four: the clean sentence, the corrupted \
             one, the clean answer and the corrupted answer",
            fields.len()
        ));
    };
    for (name, sentence) in [("clean", clean), ("corrupted", corrupted)] {
        let masks = sentence.matches(MASK_WORD).count();
        if masks != 1 {
            return Err(format!(
                "the {name} sentence has {masks} {MASK_WORD}; write it once, where the answer \
                 goes: {sentence:?}"
            ));
        }
    }
    for (name, answer) in [("clean", clean_answer), ("corrupted", corrupted_answer)] {
        if answer.is_empty() || answer.contains(char::is_whitespace) || answer == MASK_WORD {
            return Err(format!(
                "the {name} answer {answer:?} is not one word; an answer is the word {MASK_WORD} \
                 stands for"
            ));
        }
    }
    if clean_answer == corrupted_answer {
        return Err(format!(
            "both answers are {clean_answer:?}; the logit difference compares two answers"
        ));
    }
    Ok(WrittenPair {
        line,
        clean: clean.to_string(),
        corrupted: corrupted.to_string(),
        clean_answer: clean_answer.to_string(),
        corrupted_answer: corrupted_answer.to_string(),
    })
}

/// One side of a pair in pieces: the masked sentence's ids, the mask's place, and the id of
/// the answer there.
struct MaskedSide {
    ids: Vec<u32>,
    pieces: Vec<String>,
    position: usize,
    answer: u32,
}

/// `sentence` with `[MASK]` read as the model's mask piece, and as `answer`: the answer must
/// be one piece in the sentence, the rest of the pieces unchanged.
fn masked_side(
    (name, sentence, answer): (&str, &str, &str),
    tokenizer: &WordPieces,
    mask: u32,
) -> Result<Result<MaskedSide, String>, TokenizerError> {
    let mask_piece = tokenizer
        .piece(mask)
        .unwrap_or_else(|| MASK_WORD.to_string());
    let masked = tokenizer.read_text(&sentence.replace(MASK_WORD, &mask_piece))?;
    let filled = tokenizer.read_text(&sentence.replace(MASK_WORD, answer))?;
    let (masked, filled) = (masked.encoded, filled.encoded);
    let places: Vec<usize> = (0..masked.ids.len())
        .filter(|&i| masked.ids[i] == mask)
        .collect();
    let [position] = places[..] else {
        return Ok(Err(format!(
            "the {name} sentence reads as {} mask pieces, not one: {}",
            places.len(),
            masked.pieces.join(" ")
        )));
    };
    let same_elsewhere = filled.ids.len() == masked.ids.len()
        && (0..masked.ids.len()).all(|i| i == position || filled.ids[i] == masked.ids[i]);
    if !same_elsewhere {
        let pieces = filled.pieces.join(" ");
        return Ok(Err(format!(
            "the {name} answer {answer:?} is not one piece of the vocabulary in its sentence \
             (it reads {pieces}); an answer must be one piece, the word the mask hides"
        )));
    }
    if Some(filled.ids[position]) == tokenizer.unknown_id() {
        return Ok(Err(format!(
            "the {name} answer {answer:?} is not in the vocabulary (it reads as the unknown \
             piece {}); an answer must be one piece of it",
            filled.pieces[position]
        )));
    }
    Ok(Ok(MaskedSide {
        ids: masked.ids,
        pieces: masked.pieces,
        position,
        answer: filled.ids[position],
    }))
}

/// `pair` in pieces, or what keeps it from lining up.
fn piece_pair(
    pair: &WrittenPair,
    tokenizer: &WordPieces,
    mask: u32,
    max_positions: usize,
) -> Result<Result<MinimalPair, String>, TokenizerError> {
    let clean = match masked_side(("clean", &pair.clean, &pair.clean_answer), tokenizer, mask)? {
        Ok(side) => side,
        Err(problem) => return Ok(Err(problem)),
    };
    let corrupted = match masked_side(
        ("corrupted", &pair.corrupted, &pair.corrupted_answer),
        tokenizer,
        mask,
    )? {
        Ok(side) => side,
        Err(problem) => return Ok(Err(problem)),
    };
    if clean.ids.len() != corrupted.ids.len() || clean.position != corrupted.position {
        return Ok(Err(format!(
            "the sentences do not line up in pieces (clean: {}; corrupted: {}); patching \
             compares them position by position, so both must be as many pieces with the \
             mask at the same place",
            clean.pieces.join(" "),
            corrupted.pieces.join(" ")
        )));
    }
    if clean.ids.len() > max_positions {
        return Ok(Err(format!(
            "the sentences are {} pieces; the model reads at most {max_positions}",
            clean.ids.len()
        )));
    }
    if clean.answer == corrupted.answer {
        return Ok(Err(format!(
            "both answers read as the piece {:?}",
            tokenizer.piece(clean.answer).unwrap_or_default()
        )));
    }
    let changed: Vec<usize> = (0..clean.ids.len())
        .filter(|&i| clean.ids[i] != corrupted.ids[i])
        .collect();
    if changed.is_empty() {
        return Ok(Err(
            "the clean and corrupted sentences read as the same pieces; the corrupted one \
             changes a word"
                .to_string(),
        ));
    }
    let example = |side: &MaskedSide| {
        let mut target = vec![None; side.ids.len()];
        target[side.position] = Some(side.answer);
        Example {
            input: side.ids.clone(),
            target,
        }
    };
    Ok(Ok(MinimalPair {
        clean: example(&clean),
        corrupted: example(&corrupted),
        position: clean.position,
        changed,
        clean_answer: clean.answer,
        corrupted_answer: corrupted.answer,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokenizer() -> WordPieces {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../model/tests/fixtures/bert/one-layer/tokenizer.json");
        WordPieces::read(&path).unwrap()
    }

    fn file_of(text: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pairs.tsv");
        std::fs::write(&path, text).unwrap();
        (dir, path)
    }

    /// The pairs of `text` in the fixture's pieces, or the error's words.
    fn read(text: &str) -> Result<Vec<MinimalPair>, String> {
        let (_dir, path) = file_of(text);
        let tokenizer = tokenizer();
        let mask = tokenizer.mask_id().unwrap();
        PairsFile::read(&path)
            .and_then(|file| file.in_pieces(&tokenizer, mask, 16))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn a_written_pair_reads_as_the_pieces_the_model_reads() {
        let tokenizer = tokenizer();
        let id = |piece: &str| tokenizer.id(piece).unwrap();
        let pairs = read(
            "# clean\tcorrupted\tclean answer\tcorrupted answer\n\n\
             the dog near the cats [MASK] .\tthe dogs near the cats [MASK] .\truns\trun\n",
        )
        .unwrap();
        let [pair] = &pairs[..] else {
            panic!("{pairs:?}")
        };
        let (cls, sep, mask) = (id("[CLS]"), id("[SEP]"), id("[MASK]"));
        let sentence = |noun: &str| {
            vec![
                cls,
                id("the"),
                id(noun),
                id("near"),
                id("the"),
                id("cats"),
                mask,
                id("."),
                sep,
            ]
        };
        assert_eq!(pair.clean.input, sentence("dog"));
        assert_eq!(pair.corrupted.input, sentence("dogs"));
        assert_eq!((pair.position, &pair.changed[..]), (6, &[2][..]));
        assert_eq!(
            (pair.clean_answer, pair.corrupted_answer),
            (id("runs"), id("run"))
        );
        assert_eq!(pair.clean.target[6], Some(id("runs")));
        assert_eq!(pair.corrupted.target[6], Some(id("run")));
        assert_eq!(pair.clean.target.iter().flatten().count(), 1);
    }

    #[test]
    fn each_bad_line_is_refused_by_its_line_with_what_would_do() {
        let good = "the dog [MASK] .\tthe dogs [MASK] .\truns\trun";
        let cases = [
            (
                "the dog [MASK] .\tthe dogs [MASK] .\truns",
                "line 2: 3 field(s)",
            ),
            (
                "the dog runs .\tthe dogs [MASK] .\truns\trun",
                "has 0 [MASK]",
            ),
            (
                "the [MASK] dog [MASK] .\tthe dogs [MASK] .\truns\trun",
                "has 2 [MASK]",
            ),
            (
                "the dog [MASK] .\tthe dogs [MASK] .\truns\truns",
                "both answers",
            ),
            (
                "the dog [MASK] .\tthe dogs [MASK] .\truns\tre run",
                "not one word",
            ),
            // farm ##er ##s: three pieces where the mask is one.
            (
                "the dog [MASK] .\tthe dogs [MASK] .\truns\tfarmers",
                "answer \"farmers\" is not one piece",
            ),
            // farm ##er against dog: the sentences do not line up.
            (
                "the dog [MASK] .\tthe farmer [MASK] .\truns\trun",
                "do not line up in pieces",
            ),
            (
                "the dog [MASK] .\tthe dog [MASK] .\truns\trun",
                "read as the same pieces",
            ),
            (
                "the dog [MASK] .\tthe dogs [MASK] .\truns\tswims",
                "answer \"swims\" is not in the vocabulary",
            ),
        ];
        for (line, expected) in cases {
            let error = read(&format!("{good}\n{line}\n")).unwrap_err();
            assert!(
                error.contains("pairs.tsv line 2: ") && error.contains(expected),
                "{line:?}: {error}"
            );
        }
        let long = format!(
            "{} [MASK]\t{} [MASK]\truns\trun",
            "the dog ".repeat(8),
            "the dogs ".repeat(8)
        );
        let error = read(&long).unwrap_err();
        assert!(error.contains("the model reads at most 16"), "{error}");
        let error = read("# only a comment\n").unwrap_err();
        assert!(error.contains("has no sentence"), "{error}");
    }

    #[test]
    fn the_file_is_fingerprinted_and_bounded() {
        let text = "the dog [MASK] .\tthe dogs [MASK] .\truns\trun\n";
        let (_dir, path) = file_of(text);
        let file = PairsFile::read(&path).unwrap();
        assert_eq!(file.sha256, run::hash::sha256_hex(text.as_bytes()));
        assert_eq!(file.pairs[0].line, 1);
        let (_dir, path) = file_of(&text.repeat(MAX_OWN_PAIRS + 1));
        let error = PairsFile::read(&path).unwrap_err().to_string();
        assert!(error.contains("1025 pairs"), "{error}");
    }
}
