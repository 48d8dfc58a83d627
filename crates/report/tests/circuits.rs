//! `circuits.json` on a hand-built two-layer model whose circuits are known: the report must
//! find the composition, copying and ranks the weights were wired with, put the per-head
//! scores in `heads.json`, and draw and list the circuit figures; and it must write the
//! probe and gradient measures (attribution, importance, norms, rollout, rank
//! correlations) in their files (their known answers are in the modules' unit tests).
//!
//! The residual stream (d_model 16) has four blocks of four coordinates, B0 = e_0..e_3, B1,
//! B2, B3; each head uses 4 of its 8 dimensions. Layer 0: head 0 reads B0 and writes it
//! into B2, head 1 reads B1 and writes it into B3. Layer 1: head 0's query reads B0, its
//! key B2 (what L0H0 writes: K-composition), its value B3 (what L0H1 writes:
//! V-composition), and it writes B3 back onto itself (copying); head 1's query reads B3
//! (Q-composition with L0H1), its key B1, and it writes minus B0 onto B0 (anti-copying).
//! Token t embeds as e_t and the output layer reads class t from B2, so L0H0's full
//! circuit (embedding -> OV -> output) is the identity.

mod common;

use std::path::Path;

use burn::module::Param;
use burn::prelude::*;
use inspect::inspection::MeasureOptions;
use model::{Encoder, MultiHeadAttention};
use report::{ReportOptions, write_report};

const D_MODEL: usize = 16;
const N_HEADS: usize = 2;
const D_HEAD: usize = D_MODEL / N_HEADS;
/// Coordinates per block, and dimensions each head uses.
const BLOCK: usize = 4;
const VOCAB: usize = 4;

const CONFIG: &str = r#"
name = "hand-built circuits"
seed = 7

[task]
kind = "copy"
seq_len = 6
vocab_size = 4

[model]
d_model = 16
n_layers = 2
n_heads = 2
d_ff = 4

[train]
eval_size = 32
"#;

/// One head's wiring: the blocks its query, key and value read, the block its output
/// writes, and the sign it writes with.
struct Wiring {
    q: usize,
    k: usize,
    v: usize,
    o: usize,
    o_sign: f32,
}

fn param2(values: Vec<f32>, shape: [usize; 2], device: &Device) -> Param<Tensor<2>> {
    Param::from_tensor(Tensor::from_data(TensorData::new(values, shape), device))
}

/// Overwrites a split-layout attention layer's projections with `heads`' wiring.
fn wire_layer(attention: &mut MultiHeadAttention, heads: [Wiring; N_HEADS], device: &Device) {
    // Fused projection [d_model, 3 * heads * d_head]: q heads | k heads | v heads.
    let width = 3 * N_HEADS * D_HEAD;
    let mut qkv = vec![0.0; D_MODEL * width];
    let mut output = vec![0.0; N_HEADS * D_HEAD * D_MODEL];
    for (h, wiring) in heads.iter().enumerate() {
        for i in 0..BLOCK {
            for (part, block) in [wiring.q, wiring.k, wiring.v].into_iter().enumerate() {
                let column = (part * N_HEADS + h) * D_HEAD + i;
                qkv[(block * BLOCK + i) * width + column] = 1.0;
            }
            output[(h * D_HEAD + i) * D_MODEL + wiring.o * BLOCK + i] = wiring.o_sign;
        }
    }
    let fused = attention.qkv.as_mut().expect("split layout");
    fused.weight = param2(qkv, [D_MODEL, width], device);
    attention.output.weight = param2(output, [N_HEADS * D_HEAD, D_MODEL], device);
}

fn wire(model: &mut Encoder, device: &Device) {
    let head = |q, k, v, o, o_sign| Wiring { q, k, v, o, o_sign };
    wire_layer(
        &mut model.blocks[0].attention,
        [head(0, 1, 0, 2, 1.0), head(0, 1, 1, 3, 1.0)],
        device,
    );
    wire_layer(
        &mut model.blocks[1].attention,
        [head(0, 2, 3, 3, 1.0), head(3, 1, 0, 0, -1.0)],
        device,
    );
    let mut embedding = vec![0.0; VOCAB * D_MODEL];
    let mut unembedding = vec![0.0; D_MODEL * VOCAB];
    for t in 0..VOCAB {
        embedding[t * D_MODEL + t] = 1.0;
        unembedding[(2 * BLOCK + t) * VOCAB + t] = 1.0;
    }
    model.embedding.weight = param2(embedding, [VOCAB, D_MODEL], device);
    model.output.weight = param2(unembedding, [D_MODEL, VOCAB], device);
}

fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn number(value: &serde_json::Value) -> f64 {
    value
        .as_f64()
        .unwrap_or_else(|| panic!("{value} is a number"))
}

#[test]
fn a_hand_built_model_has_the_circuits_it_was_wired_with() {
    let tmp = tempfile::tempdir().unwrap();
    let (loaded, _lock) = common::hand_built_run(tmp.path(), CONFIG, wire);
    let out = tmp.path().join("report");
    let report = write_report(
        &loaded,
        &out,
        &ReportOptions {
            measure: MeasureOptions {
                probe_size: 8,
                ..MeasureOptions::default()
            },
            ..ReportOptions::default()
        },
    )
    .unwrap();

    let circuits = read_json(&out.join("circuits.json"));
    assert_eq!(circuits["d_model"], D_MODEL);
    assert_eq!(circuits["d_head"], D_HEAD);
    assert_eq!(circuits["vocab_size"], VOCAB);
    assert_eq!(circuits["n_outputs"], VOCAB);

    // One pair of layers; [earlier head][later head]. Four aligned unit directions score
    // ||A B|| / (||A|| ||B||) = 2 / (2 * 2).
    let pairs = circuits["composition"].as_array().unwrap();
    assert_eq!(pairs.len(), 1);
    let pair = &pairs[0];
    assert_eq!(pair["layer_a"], 0);
    assert_eq!(pair["layer_b"], 1);
    let matrix =
        |kind: &str| -> Vec<Vec<f64>> { serde_json::from_value(pair[kind].clone()).unwrap() };
    let (q, k, v) = (matrix("q"), matrix("k"), matrix("v"));
    assert!(
        (k[0][0] - 0.5).abs() < 1e-12,
        "L1H0's key reads what L0H0 writes: {k:?}"
    );
    assert_eq!(k[1][0], 0.0, "nor what L0H1 writes, an unrelated head");
    assert!(k[0][0] > q[0][0] && k[0][0] > v[0][0]);
    assert!(
        (q[1][1] - 0.5).abs() < 1e-12,
        "L1H1's query reads L0H1's output: {q:?}"
    );
    assert!(
        (v[1][0] - 0.5).abs() < 1e-12,
        "L1H0's value reads L0H1's output: {v:?}"
    );
    let total: f64 = [&q, &k, &v].iter().flat_map(|m| m.iter().flatten()).sum();
    assert!(
        (total - 1.5).abs() < 1e-12,
        "nothing else composes: {q:?} {k:?} {v:?}"
    );

    // Copying: L0H0 writes where it does not read (0) but maps token t to class t (1).
    let heads = circuits["heads"].as_array().unwrap();
    assert_eq!(heads.len(), 4);
    let expected = [(0.0, 1.0), (0.0, 0.0), (1.0, 0.0), (-1.0, 0.0)];
    for (head, (copying, full)) in heads.iter().zip(expected) {
        assert!(
            (number(&head["copying_score"]) - copying).abs() < 1e-12,
            "{head}"
        );
        assert!(
            (number(&head["full_copying_score"]) - full).abs() < 1e-12,
            "{head}"
        );
        assert!(
            (number(&head["qk_effective_rank"]) - 4.0).abs() < 1e-12,
            "{head}"
        );
        assert!(
            (number(&head["ov_effective_rank"]) - 4.0).abs() < 1e-12,
            "{head}"
        );
        assert_eq!(head["ov_eigenvalues"].as_array().unwrap().len(), D_HEAD);
        assert_eq!(head["qk_singular_values"].as_array().unwrap().len(), D_HEAD);
    }
    // Layer 0's heads both query B0 and key B1 (rank 4 together); layer 1's read
    // different blocks (8).
    let layers = circuits["layers"].as_array().unwrap();
    for (layer, rank) in layers.iter().zip([4.0, 8.0]) {
        assert!(
            (number(&layer["query_effective_rank"]) - rank).abs() < 1e-12,
            "{layer}"
        );
        assert!(
            (number(&layer["key_effective_rank"]) - rank).abs() < 1e-12,
            "{layer}"
        );
    }

    // heads.json carries the per-head scores, as does the returned report.
    let records: Vec<serde_json::Value> =
        serde_json::from_slice(&std::fs::read(out.join("heads.json")).unwrap()).unwrap();
    for (record, circuit) in records.iter().zip(heads) {
        for key in [
            "copying_score",
            "full_copying_score",
            "qk_effective_rank",
            "ov_effective_rank",
        ] {
            assert_eq!(record[key], circuit[key], "{key}");
        }
    }
    assert_eq!(report.measured.heads[3].copying_score, -1.0);
    assert_eq!(report.measured.circuits.composition.len(), 1);

    // Rollout of probe sequence 0 after each layer: [n_layers][seq][seq], rows summing to 1.
    let rollout: Vec<Vec<Vec<f64>>> = serde_json::from_value(circuits["rollout"].clone()).unwrap();
    assert_eq!(rollout.len(), 2);
    for layer in &rollout {
        assert_eq!(layer.len(), 6);
        for row in layer {
            assert_eq!(row.len(), 6);
            assert!((row.iter().sum::<f64>() - 1.0).abs() < 1e-9, "{row:?}");
        }
    }
    let returned = report.measured.circuits.rollout.iter().flatten().flatten();
    for (a, b) in returned.zip(rollout.iter().flatten().flatten()) {
        assert!((a - b).abs() < 1e-12, "the report returns what it wrote");
    }

    // The probe and gradient measures are in every record; the three rank correlations are
    // in summary.json, numbers in [-1, 1] or null.
    for record in &records {
        for key in [
            "direct_logit_attribution",
            "gradient_importance",
            "mean_value_norm",
            "mean_weighted_norm",
        ] {
            assert!(record[key].is_number(), "{key}: {record}");
        }
        assert!(number(&record["gradient_importance"]) >= 0.0);
        assert!(record.get("norm_weight_correlation").is_some());
    }
    let summary = read_json(&out.join("summary.json"));
    for key in [
        "importance_ablation_spearman",
        "importance_pruning_spearman",
        "ablation_pruning_spearman",
    ] {
        let value = &summary[key];
        assert!(
            value.is_null() || number(value).abs() <= 1.0 + 1e-12,
            "{key}: {value}"
        );
    }

    // The circuit figures, the rollout and the norms are drawn, embedded and listed with
    // circuits.json.
    for name in ["circuits", "composition", "rollout", "norms"] {
        assert!(
            out.join("figures").join(format!("{name}.png")).is_file(),
            "{name}"
        );
    }
    let html = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(html.contains("<code>figures/composition.png</code>"));
    assert!(html.contains("<code>figures/circuits.png</code>"));
    assert!(html.contains("<code>figures/rollout.png</code>"));
    assert!(html.contains("<code>figures/norms.png</code>"));
    assert!(html.contains("<li><code>circuits.json</code>"));
    assert!(html.contains("<th>copying</th>"));
    assert!(report.files.contains(&out.join("circuits.json")));
}
