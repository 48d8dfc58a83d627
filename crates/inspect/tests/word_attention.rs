//! The word-level attention of the Rust reading ([`WordSpans`], [`word_patterns`]) against
//! `tests/fixtures/word-attention.json`, the cases that the Python references' one module
//! (`scripts/fixtures/word_attention.py`, tested by `scripts/fixtures/test_word_attention.py`)
//! must reproduce too: each case's word ids (`null` for a piece of no word: at the start, at
//! the end, and RoBERTa's `</s></s>` in the middle), two heads of piece attention whose rows
//! sum to one, and what Rust makes of them: each piece's word-level position, each word's, and
//! the word-level attention. Each case is read alone and all of them as one padded batch.
//!
//! The expected values come from this code: after a deliberate change of the reading, write
//! them again with
//!
//! ```sh
//! HEADLAB_REGENERATE_FIXTURES=1 cargo test --workspace --release --test word_attention
//! ```
//!
//! which keeps each case's name, pieces, word ids and attention and rewrites the rest (then
//! run the Python test, which must agree).

use std::path::PathBuf;

use inspect::load::words::{WordSpans, word_patterns};
use run::tensor_file::HostTensor;
use serde_json::Value;

const TOLERANCE: f32 = 1e-6;
const REGENERATE: &str = "HEADLAB_REGENERATE_FIXTURES";
const ABOUT: &str = "Word-level attention (Clark et al. 2019, section 2: to a word the sum \
over its pieces, from a word the mean of its pieces' rows; every piece of no word, null, a \
position of its own in sentence order). Inputs: name, pieces, word_ids, attention [heads][pieces][pieces]. \
positions (each piece's), word_positions (each word's) and expected [heads][len][len] are \
written by crates/inspect/tests/word_attention.rs from the Rust reading \
(HEADLAB_REGENERATE_FIXTURES=1); scripts/fixtures/test_word_attention.py checks the Python \
module against them.";

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/word-attention.json")
}

/// One case's inputs, read from the fixture.
struct Case {
    name: String,
    pieces: Vec<String>,
    word_ids: Vec<Option<usize>>,
    /// `[heads][pieces][pieces]`.
    attention: Vec<Vec<Vec<f32>>>,
}

/// What the Rust reading makes of a case.
struct Reading {
    positions: Vec<usize>,
    word_positions: Vec<usize>,
    /// `[heads][len][len]`.
    words: Vec<Vec<Vec<f32>>>,
}

fn cases(json: &Value) -> Vec<Case> {
    let cases = json["cases"].as_array().expect("a list of cases");
    cases
        .iter()
        .map(|case| Case {
            name: case["name"].as_str().expect("a name").to_string(),
            pieces: serde_json::from_value(case["pieces"].clone()).expect("pieces"),
            word_ids: serde_json::from_value(case["word_ids"].clone()).expect("word ids"),
            attention: serde_json::from_value(case["attention"].clone()).expect("attention"),
        })
        .collect()
}

fn spans(case: &Case) -> WordSpans {
    WordSpans::of(&case.word_ids).unwrap_or_else(|e| panic!("{}: {e}", case.name))
}

/// `[heads][pieces][pieces]` as one sentence's `[1, heads, seq, seq]`, padded with zeros.
fn piece_tensor(attention: &[Vec<Vec<f32>>], seq: usize) -> Vec<f32> {
    let mut values = vec![];
    for head in attention {
        for row in head {
            values.extend(row);
            values.extend(std::iter::repeat_n(0.0, seq - row.len()));
        }
        values.extend(std::iter::repeat_n(0.0, (seq - head.len()) * seq));
    }
    values
}

/// `[1, heads, len, len]` (or one sentence of a batch: `[heads, len, len]` values at the top
/// left of `[heads, stride, stride]`) as nested rows.
fn nested(values: &[f32], heads: usize, len: usize, stride: usize) -> Vec<Vec<Vec<f32>>> {
    (0..heads)
        .map(|h| {
            (0..len)
                .map(|r| values[(h * stride + r) * stride..][..len].to_vec())
                .collect()
        })
        .collect()
}

fn read(case: &Case) -> Reading {
    let spans = spans(case);
    let heads = case.attention.len();
    let seq = case.word_ids.len();
    let pattern = HostTensor {
        values: piece_tensor(&case.attention, seq),
        shape: vec![1, heads, seq, seq],
    };
    let words = word_patterns(&pattern, std::slice::from_ref(&spans));
    let len = spans.len();
    assert_eq!(words.shape, [1, heads, len, len], "{}", case.name);
    let mut positions = vec![usize::MAX; seq];
    for position in 0..len {
        for piece in spans.pieces_of(position) {
            positions[piece] = position;
        }
    }
    Reading {
        positions,
        word_positions: (0..spans.words())
            .map(|w| spans.position_of_word(w))
            .collect(),
        words: nested(&words.values, heads, len, len),
    }
}

fn close(got: &[Vec<Vec<f32>>], want: &[Vec<Vec<f32>>], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: heads");
    for (h, (got, want)) in got.iter().zip(want).enumerate() {
        assert_eq!(got.len(), want.len(), "{what}: head {h}'s rows");
        for (r, (got, want)) in got.iter().zip(want).enumerate() {
            assert_eq!(got.len(), want.len(), "{what}: head {h}, row {r}");
            for (c, (got, want)) in got.iter().zip(want).enumerate() {
                assert!(
                    (got - want).abs() <= TOLERANCE,
                    "{what}: head {h}, row {r}, column {c}: {got} != {want}"
                );
            }
        }
    }
}

fn rows_sum_to_one(attention: &[Vec<Vec<f32>>], what: &str) {
    for (h, head) in attention.iter().enumerate() {
        for (r, row) in head.iter().enumerate() {
            let sum: f32 = row.iter().sum();
            assert!(
                (sum - 1.0).abs() < 1e-5,
                "{what}: head {h}, row {r} sums to {sum}"
            );
        }
    }
}

fn line<T: serde::Serialize + ?Sized>(value: &T) -> String {
    serde_json::to_string(value).expect("serializable")
}

/// `[heads][rows][columns]`, one row a line.
fn block(attention: &[Vec<Vec<f32>>]) -> String {
    let heads: Vec<String> = attention
        .iter()
        .map(|head| {
            let rows: Vec<String> = head
                .iter()
                .map(|row| format!("     {}", line(row)))
                .collect();
            format!("    [\n{}\n    ]", rows.join(",\n"))
        })
        .collect();
    format!("[\n{}\n   ]", heads.join(",\n"))
}

fn write(cases: &[Case]) {
    let entries: Vec<String> = cases
        .iter()
        .map(|case| {
            let reading = read(case);
            [
                format!("   \"name\": {}", line(&case.name)),
                format!("   \"pieces\": {}", line(&case.pieces)),
                format!("   \"word_ids\": {}", line(&case.word_ids)),
                format!("   \"attention\": {}", block(&case.attention)),
                format!("   \"positions\": {}", line(&reading.positions)),
                format!("   \"word_positions\": {}", line(&reading.word_positions)),
                format!("   \"expected\": {}", block(&reading.words)),
            ]
            .join(",\n")
        })
        .map(|entry| format!("  {{\n{entry}\n  }}"))
        .collect();
    let text = format!(
        "{{\n \"about\": {},\n \"cases\": [\n{}\n ]\n}}\n",
        line(ABOUT),
        entries.join(",\n")
    );
    serde_json::from_str::<Value>(&text).expect("the fixture written is JSON");
    std::fs::write(fixture(), text).expect("the fixture is writable");
    eprintln!("{REGENERATE}: wrote {}", fixture().display());
}

#[test]
fn the_rust_reading_gives_the_fixture_s_word_level_attention() {
    let text = std::fs::read_to_string(fixture()).expect("the fixture");
    let json: Value = serde_json::from_str(&text).expect("the fixture is JSON");
    let cases = cases(&json);
    assert!(cases.len() >= 3, "a few cases");
    for case in &cases {
        rows_sum_to_one(&case.attention, &case.name);
    }
    if std::env::var_os(REGENERATE).is_some_and(|v| !v.is_empty() && v != "0") {
        write(&cases);
        return;
    }
    for (case, expected) in cases.iter().zip(json["cases"].as_array().unwrap()) {
        let reading = read(case);
        let want = |key: &str| expected[key].clone();
        let positions: Vec<usize> = serde_json::from_value(want("positions")).expect("positions");
        let word_positions: Vec<usize> =
            serde_json::from_value(want("word_positions")).expect("word positions");
        let words: Vec<Vec<Vec<f32>>> = serde_json::from_value(want("expected")).expect("expected");
        assert_eq!(reading.positions, positions, "{}: positions", case.name);
        assert_eq!(
            reading.word_positions, word_positions,
            "{}: word positions",
            case.name
        );
        close(&reading.words, &words, &case.name);
        rows_sum_to_one(&reading.words, &case.name);
    }
}

#[test]
fn the_fixture_s_cases_read_as_one_padded_batch_give_the_same_attention() {
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture()).expect("the fixture"))
            .expect("the fixture is JSON");
    let cases = cases(&json);
    let heads = cases[0].attention.len();
    let seq = cases.iter().map(|c| c.word_ids.len()).max().unwrap();
    let spans: Vec<WordSpans> = cases.iter().map(spans).collect();
    let values: Vec<f32> = cases
        .iter()
        .flat_map(|c| piece_tensor(&c.attention, seq))
        .collect();
    let pattern = HostTensor {
        values,
        shape: vec![cases.len(), heads, seq, seq],
    };
    let words = word_patterns(&pattern, &spans);
    let len = spans.iter().map(WordSpans::len).max().unwrap();
    assert_eq!(words.shape, [cases.len(), heads, len, len]);
    for (b, (case, sentence)) in cases.iter().zip(&spans).enumerate() {
        let block = &words.values[b * heads * len * len..(b + 1) * heads * len * len];
        let got = nested(block, heads, sentence.len(), len);
        close(
            &got,
            &read(case).words,
            &format!("{} in a batch", case.name),
        );
    }
}

#[test]
fn the_special_pieces_are_positions_of_their_own_in_sentence_order() {
    // RoBERTa's two segments: <s> the dog </s> </s> barks </s>.
    let spans = WordSpans::of(&[None, Some(0), Some(1), None, None, Some(2), None]).unwrap();
    assert_eq!((spans.len(), spans.words()), (7, 3));
    assert_eq!(
        (0..3)
            .map(|w| spans.position_of_word(w))
            .collect::<Vec<_>>(),
        [1, 2, 5]
    );
}
