//! The report on a hand-built model whose answer is known: on the shift task, head 0 of its
//! one layer is wired (by its QK circuit) to attend to the previous token and (by its OV
//! circuit and the output head) to copy that token to the output; head 1 is switched off.
//! The report must call head 0 a previous-token head that the task cannot do without, and
//! head 1 a head that does not matter.
//!
//! The residual stream has three blocks of one-hot coordinates:
//! `[0, SEQ)` position, `[SEQ, SEQ + VOCAB)` token, `[SEQ + VOCAB, D_MODEL)` copied token.

mod common;

use burn::module::Param;
use burn::prelude::*;
use inspect::inspection::MeasureOptions;
use inspect::interventions::patching::Patching;
use inspect::measures::heads::HeadRecord;
use model::Encoder;
use report::{ReportOptions, write_report};
use run::tensor_file::HostTensor;
use tasks::{Batch, Example};

const SEQ: usize = 6;
const VOCAB: usize = 5;
const D_MODEL: usize = SEQ + 2 * VOCAB;
const N_HEADS: usize = 2;
const D_HEAD: usize = D_MODEL / N_HEADS;
/// Sharpness of head 0's previous-token pattern.
const QK_GAIN: f32 = 10.0;

const CONFIG: &str = r#"
name = "hand-built previous-token head"
seed = 5

[task]
kind = "shift"
seq_len = 6
vocab_size = 5
shift = 1

[model]
d_model = 16
n_layers = 1
n_heads = 2
d_ff = 4
positional = "learned"
norm = "pre"

[train]
eval_size = 256
"#;

fn param2(values: Vec<f32>, shape: [usize; 2], device: &Device) -> Param<Tensor<2>> {
    Param::from_tensor(Tensor::from_data(TensorData::new(values, shape), device))
}

fn zeros1(n: usize, device: &Device) -> Param<Tensor<1>> {
    Param::from_tensor(Tensor::zeros([n], device))
}

/// Overwrites `model`'s weights with the circuit described at the top of the file.
fn wire_previous_token_copier(model: &mut Encoder, device: &Device) {
    let token = |t: usize| SEQ + t;
    let copy = |t: usize| SEQ + VOCAB + t;

    // Embeddings: token t -> e_{token(t)}; position i -> e_i.
    let mut embedding = vec![0.0; VOCAB * D_MODEL];
    for t in 0..VOCAB {
        embedding[t * D_MODEL + token(t)] = 1.0;
    }
    model.embedding.weight = param2(embedding, [VOCAB, D_MODEL], device);
    let mut positions = vec![0.0; SEQ * D_MODEL];
    for i in 0..SEQ {
        positions[i * D_MODEL + i] = 1.0;
    }
    let learned = model.positions.learned.as_mut().expect("learned positions");
    learned.weight = param2(positions, [SEQ, D_MODEL], device);

    // Fused projection [d_model, 3 * heads * d_head]: columns q heads | k heads | v heads.
    // Head 0: query of position i is e_{i-1}, key of position j is e_j, value of token t
    // is e_t. Head 1 stays all zero (uniform attention, no output).
    let width = 3 * N_HEADS * D_HEAD;
    let (q_col, k_col, v_col) = (0, N_HEADS * D_HEAD, 2 * N_HEADS * D_HEAD);
    let mut qkv = vec![0.0; D_MODEL * width];
    for i in 1..SEQ {
        qkv[i * width + q_col + (i - 1)] = QK_GAIN;
    }
    for j in 0..SEQ {
        qkv[j * width + k_col + j] = 1.0;
    }
    for t in 0..VOCAB {
        qkv[token(t) * width + v_col + t] = 1.0;
    }
    let attention = &mut model.blocks[0].attention;
    let fused = attention
        .qkv
        .as_mut()
        .expect("split layout has a fused projection");
    fused.weight = param2(qkv, [D_MODEL, width], device);
    fused.bias = Some(zeros1(width, device));
    // Output projection [heads * d_head, d_model]: head 0's value t -> e_{copy(t)}.
    let mut output = vec![0.0; N_HEADS * D_HEAD * D_MODEL];
    for t in 0..VOCAB {
        output[t * D_MODEL + copy(t)] = 1.0;
    }
    attention.output.weight = param2(output, [N_HEADS * D_HEAD, D_MODEL], device);
    attention.output.bias = Some(zeros1(D_MODEL, device));

    // The feed-forward adds nothing.
    let block = &mut model.blocks[0];
    let d_ff = block.ff_in.weight.dims()[1];
    block.ff_out.weight = param2(vec![0.0; d_ff * D_MODEL], [d_ff, D_MODEL], device);
    block.ff_out.bias = Some(zeros1(D_MODEL, device));

    // Output head reads the copied token: class t <- e_{copy(t)}; the blank class (VOCAB)
    // gets logit 0, which wins only when nothing was copied.
    let classes = VOCAB + 1;
    let mut unembed = vec![0.0; D_MODEL * classes];
    for t in 0..VOCAB {
        unembed[copy(t) * classes + t] = 1.0;
    }
    model.output.weight = param2(unembed, [D_MODEL, classes], device);
    model.output.bias = Some(zeros1(classes, device));
}

fn head(heads: &[HeadRecord], h: usize) -> &HeadRecord {
    heads.iter().find(|r| r.id.head == h).unwrap()
}

#[test]
fn a_hand_built_previous_token_head_is_detected_and_matters() {
    let tmp = tempfile::tempdir().unwrap();
    let (loaded, _lock) = common::hand_built_run(tmp.path(), CONFIG, wire_previous_token_copier);

    let report = write_report(
        &loaded,
        &tmp.path().join("report"),
        &ReportOptions {
            measure: MeasureOptions {
                probe_size: 32,
                ..MeasureOptions::default()
            },
            ..ReportOptions::default()
        },
    )
    .unwrap();

    // Position 0 has nothing to copy and is scored wrong; the other 5 of 6 are right.
    let expected_accuracy = (SEQ - 1) as f64 / SEQ as f64;
    assert!(
        (report.measured.eval_token_acc.unwrap() - expected_accuracy).abs() < 1e-9,
        "accuracy {}",
        report.measured.eval_token_acc.unwrap()
    );
    // The logit lens: the embedding, then the one block, whose reading is the model itself.
    let lens = &report.measured.logit_lens.as_ref().unwrap().points;
    assert_eq!(lens.len(), 2);
    assert_eq!((lens[0].after_layer, lens[1].after_layer), (None, Some(0)));
    assert!(
        (lens[1].token_acc - expected_accuracy).abs() < 1e-9,
        "{lens:?}"
    );
    assert!(
        lens.iter().all(|p| p.loss.is_finite() && p.loss >= 0.0),
        "{lens:?}"
    );
    // Activation patching on the shift task's minimal pairs (one token changed, the answer
    // one position later moves). In this one-layer model the answer at a position is its
    // embedding plus what the heads write there, so: the copier's clean output put back
    // everywhere restores all of it; put back at one position it restores exactly the pairs
    // whose answer sits there, so the positions add up to the whole; the idle head writes 0
    // in both runs and restores nothing.
    let sections = report
        .measured
        .patching
        .as_ref()
        .expect("shift has minimal pairs");
    assert!(sections.route.is_none(), "only recall has route pairs");
    let patching = sections.answer.as_ref().expect("shift has answer pairs");
    assert_eq!(patching.pairs, 64);
    assert!(
        patching.clean_logit_diff > patching.corrupted_logit_diff,
        "{patching:?}"
    );
    let copier_patch = &patching.heads[0];
    assert!(
        (copier_patch.restored.unwrap() - 1.0).abs() < 1e-4,
        "{copier_patch:?}"
    );
    let summed: f64 = copier_patch.by_position.iter().map(|r| r.unwrap()).sum();
    assert!((summed - 1.0).abs() < 1e-4, "{copier_patch:?}");
    assert_eq!(
        copier_patch.by_position[0],
        Some(0.0),
        "no answer reads position 0"
    );
    let idle_patch = &patching.heads[1];
    assert_eq!(idle_patch.restored, Some(0.0), "{idle_patch:?}");
    assert!(
        idle_patch.by_position.iter().all(|r| *r == Some(0.0)),
        "{idle_patch:?}"
    );
    // Its output is the same in both runs, so attribution patching gives it exactly 0 too.
    assert_eq!(idle_patch.attribution, Some(0.0), "{idle_patch:?}");
    // The residual stream: at the embedding only the changed token's position differs, and
    // putting it back restores that pair whole, so the positions add up to 1; at the block's
    // output only the answer's position is read, so again they add up to 1, and position 0,
    // where no answer is read, restores nothing.
    for place in &patching.residual {
        let summed: f64 = place.by_position.iter().map(|r| r.unwrap()).sum();
        assert!((summed - 1.0).abs() < 1e-4, "{place:?}");
    }
    assert!(patching.residual[1].by_position[0].unwrap().abs() < 1e-6);
    // One layer: no path to patch.
    assert!(patching.paths.is_empty() && patching.layer_paths.is_empty());
    // patching.json carries its pairs: the logit differences recomputed from the recorded
    // tokens alone, with no generator, are the ones it reports.
    let written: Patching = serde_json::from_str(
        &std::fs::read_to_string(tmp.path().join("report/patching.json")).unwrap(),
    )
    .unwrap();
    let recorded = &written.answer.as_ref().unwrap().inputs;
    assert_eq!(recorded.len(), patching.pairs);
    let mean_logit_diff = |tokens: &dyn Fn(usize) -> Vec<u32>| {
        let examples: Vec<Example> = (0..recorded.len())
            .map(|i| Example {
                target: vec![None; tokens(i).len()],
                input: tokens(i),
            })
            .collect();
        let batch = Batch::new(&examples, &loaded.device);
        let logits = loaded.model.forward_input(batch.encoder_input()); // [pairs, seq, vocab]
        let [_, seq, vocab] = logits.dims();
        let values = HostTensor::of(logits).values;
        let at = |i: usize, class: u32| {
            values[(i * seq + recorded[i].position) * vocab + class as usize] as f64
        };
        (0..recorded.len())
            .map(|i| at(i, recorded[i].clean_answer) - at(i, recorded[i].corrupted_answer))
            .sum::<f64>()
            / recorded.len() as f64
    };
    let clean = mean_logit_diff(&|i| recorded[i].clean.clone());
    let corrupted = mean_logit_diff(&|i| recorded[i].corrupted.clone());
    assert!((clean - patching.clean_logit_diff).abs() < 1e-5, "{clean}");
    assert!(
        (corrupted - patching.corrupted_logit_diff).abs() < 1e-5,
        "{corrupted}"
    );
    for pair in recorded {
        let differ: Vec<usize> = (0..pair.clean.len())
            .filter(|&p| pair.clean[p] != pair.corrupted[p])
            .collect();
        assert_eq!(differ, pair.changed, "{pair:?}");
    }
    let copier = head(&report.measured.heads, 0);
    assert_eq!(copier.role, "previous_token", "{copier:?}");
    assert!(copier.pattern_scores["previous_token"] > 0.99, "{copier:?}");
    assert!(copier.confidence > 0.9, "{copier:?}");
    // Without it nothing is copied: every position predicts blank, right only at position 0.
    assert!(
        (copier.ablation_drop.unwrap() - (expected_accuracy - 1.0 / SEQ as f64)).abs() < 1e-9,
        "{copier:?}"
    );

    let idle = head(&report.measured.heads, 1);
    assert_eq!(idle.role, "mixed", "{idle:?}");
    assert!(
        (idle.entropy - (SEQ as f64).ln()).abs() < 1e-4,
        "uniform attention: {idle:?}"
    );
    assert_eq!(idle.ablation_drop, Some(0.0), "{idle:?}");
    // It writes nothing, so nothing changes whatever replaces its output.
    assert_eq!(idle.mean_ablation_drop, Some(0.0), "{idle:?}");
    assert_eq!(idle.resample_ablation_drop, Some(0.0), "{idle:?}");
    // The copier's output is all about its input: its mean or another sequence's copy
    // loses most of what zeroing it loses.
    let (mean, resample) = (
        copier.mean_ablation_drop.unwrap(),
        copier.resample_ablation_drop.unwrap(),
    );
    assert!(mean > 0.5 * copier.ablation_drop.unwrap(), "{copier:?}");
    assert!(resample > 0.5 * copier.ablation_drop.unwrap(), "{copier:?}");

    // The two heads share nothing: the idle head's circuits are zero, and their patterns
    // are far apart.
    let layer = &report.measured.similarity[0];
    assert_eq!(layer.qk_cosine[0][1], 0.0);
    assert!(layer.pattern_js[0][1] > 0.7, "{layer:?}");
    assert!(
        report.measured.divergence.is_empty(),
        "no snapshots, no curve"
    );
}
