//! A report's word-level attention, read back from its `activations.safetensors` (the probe
//! read as words: `tokens` are word ids named by `summary.json`'s `probe_token_names`,
//! `layers.L.pattern` every head's attention between word-level positions), against a
//! reference's: per sentence its `words` and `attention` `[layer][head][n + 2][n + 2]`, the
//! two special pieces at positions 0 and n + 1 (Clark et al.'s aggregation, as
//! `scripts/fixtures/text_reference.py` and `families_reference.py` compute it).
// Each test file compiles this module on its own.
#![allow(dead_code)]

use std::path::Path;

use serde_json::Value;

/// `name`'s values in a report's `activations.safetensors` as f32 (the token ids, I64, as
/// their values), with its shape.
pub fn activation(tensors: &safetensors::SafeTensors, name: &str) -> (Vec<usize>, Vec<f32>) {
    let view = tensors.tensor(name).unwrap();
    let values = match view.dtype() {
        safetensors::Dtype::I64 => view
            .data()
            .chunks_exact(8)
            .map(|b| i64::from_le_bytes(b.try_into().unwrap()) as f32)
            .collect(),
        _ => view
            .data()
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect(),
    };
    (view.shape().to_vec(), values)
}

/// Checks that the report in `report` read the reference's `sentences`, in order, as their
/// words between `specials` (`["[CLS]", "[SEP]"]`, `["<s>", "</s>"]`), and returns the
/// largest difference of any head's word-level attention from the reference's.
pub fn largest_difference(report: &Path, sentences: &[Value], specials: [&str; 2]) -> f32 {
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(report.join("summary.json")).unwrap())
            .unwrap();
    let names: Vec<&str> = summary["probe_token_names"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    let bytes = std::fs::read(report.join("activations.safetensors")).unwrap();
    let tensors = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let (shape, tokens) = activation(&tensors, "tokens");
    let (batch, seq) = (shape[0], shape[1]);
    assert_eq!(batch, sentences.len());
    let mut largest = 0.0f32;
    for (b, sentence) in sentences.iter().enumerate() {
        let words: Vec<&str> = tokens[b * seq..(b + 1) * seq]
            .iter()
            .map(|&id| names[id as usize])
            .collect();
        let expected: Vec<&str> = sentence["words"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w.as_str().unwrap())
            .collect();
        assert_eq!(words[1..seq - 1], expected[..], "sentence {b}");
        assert_eq!([words[0], words[seq - 1]], specials, "sentence {b}");
        for (l, layer) in sentence["attention"].as_array().unwrap().iter().enumerate() {
            let (shape, pattern) = activation(&tensors, &format!("layers.{l}.pattern"));
            let heads = shape[1];
            for h in 0..heads {
                for q in 0..seq {
                    for k in 0..seq {
                        let theirs = layer[h][q][k].as_f64().unwrap() as f32;
                        let ours = pattern[((b * heads + h) * seq + q) * seq + k];
                        largest = largest.max((ours - theirs).abs());
                    }
                }
            }
        }
    }
    largest
}
