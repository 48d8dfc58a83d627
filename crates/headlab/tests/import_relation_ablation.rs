//! Relation ablation of an imported masked-LM: each relation's best head zeroed, the
//! accuracy lost and the loss gained on masked words of that relation and elsewhere, against
//! a count done here (the loss from a log-sum-exp over the vocabulary in f64):
//! the report's own relation sentences (`relation-sentences.conllu`) read by the model's
//! tokenizer, each word masked alone in all its pieces, one sentence at a time, unpadded,
//! each masked word counted under its label and, for a subject or object with another noun
//! between it and its verb, under `nsubj_past_noun` or `dobj_past_noun` too.

#[path = "common/headlab.rs"]
mod headlab;

use std::path::{Path, PathBuf};

use burn::prelude::*;
use inspect::interventions::relation_ablation::RELATION_ABLATION_SENTENCES;
use inspect::measures::relations::Relations;
use model::{EncoderInput, HeadId};
use report::dir::ReportDir;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../model/tests/fixtures/bert")
        .join(name)
}

/// The labels word `w` of `tree` counts under: its DEPREL (none for the root), and for an
/// `nsubj` or `dobj` noun (a word some `det` depends on) with another noun strictly between
/// it and its head, the category past a noun.
fn labels(tree: &tasks::conllu::TreebankSentence, w: usize) -> Vec<String> {
    if tree.heads[w] == 0 {
        return vec![];
    }
    let noun = |p: usize| {
        (0..tree.words.len()).any(|d| tree.relations[d] == "det" && tree.heads[d] == p + 1)
    };
    let head = tree.heads[w] - 1;
    let mut labels = vec![tree.relations[w].clone()];
    let between = (w.min(head) + 1..w.max(head)).any(noun);
    if noun(w) && between && tree.relations[w] == "nsubj" {
        labels.push("nsubj_past_noun".to_string());
    }
    if noun(w) && between && tree.relations[w] == "dobj" {
        labels.push("dobj_past_noun".to_string());
    }
    labels
}

/// Per masked piece of the first sentences (each word masked alone): its word's labels,
/// whether the model, with `head` zeroed or not, predicts it, and its cross-entropy.
fn answers(
    model: &model::Encoder,
    tokenizer: &hf::tokenizer::WordPieces,
    trees: &[tasks::conllu::TreebankSentence],
    head: Option<HeadId>,
) -> Vec<(Vec<String>, bool, f64)> {
    let device = Device::flex();
    let mask = tokenizer.id("[MASK]").unwrap();
    let mut found = vec![];
    for tree in trees.iter().take(RELATION_ABLATION_SENTENCES) {
        let words: Vec<&str> = tree.words.iter().map(String::as_str).collect();
        let encoded = tokenizer.encode_words(&words).unwrap();
        for w in 0..words.len() {
            let pieces: Vec<usize> = (0..encoded.ids.len())
                .filter(|&p| encoded.words[p] == Some(w))
                .collect();
            let ids: Vec<i64> = (0..encoded.ids.len())
                .map(|p| if pieces.contains(&p) { mask } else { encoded.ids[p] } as i64)
                .collect();
            let len = ids.len();
            let tokens = Tensor::<2, Int>::from_data(TensorData::new(ids, [1, len]), &device);
            let mut input = EncoderInput::new(tokens);
            if let Some(id) = head {
                input = input.head_mask(model.head_mask_keeping(|h| h != id, &device));
            }
            let logits = model.forward_input(input); // [1, len, vocab]
            let [_, _, vocab] = logits.dims();
            let predicted = logits
                .clone()
                .argmax(2)
                .into_data()
                .try_into_vec_as::<i64>()
                .unwrap();
            let logits = logits.into_data().try_into_vec_as::<f32>().unwrap();
            for p in pieces {
                let row: Vec<f64> = logits[p * vocab..(p + 1) * vocab]
                    .iter()
                    .map(|&l| f64::from(l))
                    .collect();
                let max = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let log_sum_exp = max + row.iter().map(|l| (l - max).exp()).sum::<f64>().ln();
                let loss = log_sum_exp - row[encoded.ids[p] as usize];
                let right = predicted[p] as u32 == encoded.ids[p];
                found.push((labels(tree, w), right, loss));
            }
        }
    }
    found
}

#[test]
fn an_imported_masked_lm_loses_what_a_count_without_the_head_loses() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run");
    let output = headlab::run(
        "import",
        &[fixture("three-layers-mlm"), "--out".into(), run.clone()],
    );
    assert!(output.status.success());
    let report = tmp.path().join("report");
    let args = [
        run.to_str().unwrap(),
        "--probe",
        "4",
        "--no-patching",
        "--probe-task",
        "--relation-sentences",
        "40",
        "--out",
        report.to_str().unwrap(),
    ];
    let output = headlab::run("inspect", &args);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let relations: Relations = ReportDir::new(&report).read_json().unwrap();
    let trees = tasks::conllu::read(&report.join("relation-sentences.conllu")).unwrap();

    let dir = run::RunDir::open(&run).unwrap();
    let resolved = dir.resolve().unwrap();
    let fresh = resolved
        .config
        .model
        .init(&resolved.io, &Device::flex())
        .unwrap();
    let model = run::weights::load(&dir.final_weights_path(), fresh).unwrap();
    let tokenizer = hf::tokenizer::WordPieces::read(&dir.tokenizer_path()).unwrap();
    let all_on = answers(&model, &tokenizer, &trees, None);

    let (mut checked, mut past_a_noun) = (0, 0);
    for relation in &relations.relations {
        let name = relation.relation.as_str();
        let best = relation.best.dependent_to_head;
        let without = answers(&model, &tokenizer, &trees, Some(best.id));
        // (accuracy lost, loss gained), each a mean over the words `on` passes.
        let change = |on: &dyn Fn(&[String]) -> bool| {
            let (mut lost, mut gained, mut n) = (0.0, 0.0, 0);
            for ((label, right, loss), (_, still, loss_without)) in all_on.iter().zip(&without) {
                if on(label) {
                    lost += f64::from(u8::from(*right)) - f64::from(u8::from(*still));
                    gained += loss_without - loss;
                    n += 1;
                }
            }
            (n > 0).then(|| (lost / n as f64, gained / n as f64, n))
        };
        let has = |labels: &[String]| labels.iter().any(|l| l == name);
        let (on_change, elsewhere_change) = (change(&has), change(&|l| !has(l)));
        let (on, elsewhere) = (on_change.map(|c| c.0), elsewhere_change.map(|c| c.0));
        // Padding and batching move a loss by float noise; a rise is tens of millinats.
        let near = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) => (a - b).abs() < 1e-4 * (1.0 + b.abs()),
            (a, b) => a == b,
        };
        for (measured, counted) in [
            (best.loss_rise_on_relation, on_change),
            (best.loss_rise_elsewhere, elsewhere_change),
        ] {
            let counted = counted.map(|c| c.1);
            assert!(
                near(measured, counted),
                "{name}: loss rise {measured:?} vs {counted:?}"
            );
        }
        assert_eq!(
            best.words_on_relation,
            Some(on_change.map_or(0, |c| c.2)),
            "{name}"
        );
        assert!(
            best.resample_loss_rise_on_relation.is_some() == on.is_some()
                && best
                    .resample_loss_rise_on_relation
                    .is_none_or(f64::is_finite),
            "{name}: {:?}",
            best.resample_loss_rise_on_relation
        );
        let close = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) => (a - b).abs() < 1e-9,
            (a, b) => a == b,
        };
        assert!(
            close(best.drop_on_relation, on),
            "{name}: {:?} vs {on:?}",
            best.drop_on_relation
        );
        assert!(
            close(best.drop_elsewhere, elsewhere),
            "{name}: {:?} vs {elsewhere:?}",
            best.drop_elsewhere
        );
        assert!(best.resample_drop_on_relation.is_some() == on.is_some());
        checked += 1;
        past_a_noun += usize::from(name.ends_with("_past_noun") && on.is_some());
    }
    assert!(checked >= 5, "{checked} relations checked");
    assert!(past_a_noun > 0, "a relation past a noun is told apart");
}
