//! Relation scores of a model that reads word pieces (an imported BERT checkpoint), against
//! an independent reckoning: the batched, padded, word-level scoring of
//! [`measure_relations`] on a model that reads word pieces equals scoring each sentence alone, unpadded, with its
//! word-level attention cut down to its words; on whole sentences and on sentences masked
//! as in training (`inspect --relations-masked`: every piece of a masked word `[MASK]`).

use std::path::Path;

use burn::prelude::*;
use hf::import::{ImportRequest, import};
use hf::tokenizer::WordPieces;
use inspect::load::context::MeasureContext;
use inspect::load::reading::Reading;
use inspect::load::words::WordSpans;
use inspect::measures::relations::{
    RELATION_SENTENCES, RELATION_STREAM, RelationHits, Relations, measure_relations,
};
use model::EncoderInput;
use run::tensor_file::HostTensor;
use run::{RunDir, weights};
use tasks::mix_seed;

#[test]
fn word_level_relation_scores_equal_sentence_by_sentence_scores() {
    let whole = scored_both_ways(None);
    assert!(whole.masking.is_none());
    let masked = scored_both_ways(Some(0.15));
    let masking = masked
        .masking
        .as_ref()
        .expect("masked sentences are recorded");
    assert_eq!(masking.fraction, 0.15);
    assert_eq!(masking.masked.len(), masked.sentences);
    assert!(masking.masked.iter().all(|words| !words.is_empty()));
    // Hiding words changes what the heads attend to.
    let scores = |r: &Relations| -> Vec<f64> {
        r.relations
            .iter()
            .flat_map(|rel| rel.heads.iter().map(|h| h.dependent_to_head))
            .collect()
    };
    assert_ne!(scores(&whole), scores(&masked));
}

/// Scores the grammar's sentences (masked with `mask_fraction`, or whole) batched and one by
/// one, checks they agree, and returns the batched scores.
fn scored_both_ways(mask_fraction: Option<f64>) -> Relations {
    let tmp = tempfile::tempdir().unwrap();
    let checkpoint =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../model/tests/fixtures/bert/three-layers-mlm");
    let out = tmp.path().join("run");
    import(&ImportRequest {
        checkpoint,
        out: Some(out.clone()),
        name: None,
        force: false,
    })
    .unwrap();
    let dir = RunDir::open(&out).unwrap();
    let run = dir.resolve().unwrap();
    let device = Device::flex();
    let fresh = run.config.model.init(&run.io, &device).unwrap();
    let model = weights::load(&dir.final_weights_path(), fresh).unwrap();
    let tokenizer = WordPieces::read(&dir.tokenizer_path()).unwrap();
    // The grammar's sentences, not the shipped treebank.
    let task = inspect::load::probe_choice::ProbeChoice::Task { overrides: vec![] };
    let reading = Reading::chosen(&run, Some(tokenizer.clone()), &task, &out).unwrap();
    let context = MeasureContext {
        model: &model,
        reading: &reading,
        task: &run.task,
        seed: 0,
        device: &device,
        snapshots: None,
    };
    let (relations, sentences) = measure_relations(context, None, mask_fraction)
        .unwrap()
        .expect("the grammar task has parses");
    let pieces = sentences.pieces().expect("an imported model reads pieces");
    // The sentences come back whole; the recorded masks say which words the model read as
    // [MASK] (every piece of each).
    let mask_piece = tokenizer.id("[MASK]").unwrap();
    assert!(pieces.encoded.iter().all(|e| !e.ids.contains(&mask_piece)));
    let masked = relations.masking.as_ref().map(|m| m.masked.clone());
    let read_ids = |s: usize, encoded: &hf::tokenizer::Encoded| -> Vec<i64> {
        encoded
            .ids
            .iter()
            .zip(&encoded.words)
            .map(|(&id, word)| match (word, &masked) {
                (Some(w), Some(masked)) if masked[s].contains(&(*w as u16)) => mask_piece,
                _ => id,
            } as i64)
            .collect()
    };
    assert!(pieces.len() > 100, "{} sentences kept", pieces.len());
    assert_eq!(relations.sentences, pieces.len());

    // The task's own parsed sentences, as the measure drew them (those over the model's 16
    // positions were left out), scored through the path headlab's own models take.
    let names = run.task.token_names().unwrap();
    let drawn = run
        .task
        .parsed_sentences(RELATION_SENTENCES, mix_seed(0, RELATION_STREAM));
    let mut parsed = drawn.iter().filter(|sentence| {
        let words: Vec<&str> = sentence
            .words
            .iter()
            .map(|&w| names[w as usize].as_str())
            .collect();
        tokenizer.encode_words(&words).unwrap().ids.len() <= 16
    });
    assert_eq!(drawn.len() - pieces.too_long, pieces.len());

    // Each sentence alone: its pieces unpadded, each head's attention to words by
    // WordSpans::aggregate, [CLS] and [SEP] cut away, scored with words at 0..n.
    let mut alone = RelationHits::new(model.n_layers(), model.n_heads());
    for (s, encoded) in pieces.encoded.iter().enumerate() {
        let ids = read_ids(s, encoded);
        let tokens = Tensor::from_data(TensorData::new(ids, [1, encoded.ids.len()]), &device);
        let (_, cache) = model.forward_with_cache(EncoderInput::new(tokens));
        let spans = WordSpans::of(&encoded.words).unwrap();
        let (len, n) = (spans.len(), spans.words());
        let patterns: Vec<HostTensor> = cache
            .layers
            .iter()
            .map(|layer| {
                let pattern = HostTensor::of(layer.pattern.clone()); // [1, heads, seq, seq]
                let [_, heads, seq, _] = pattern.shape[..] else {
                    unreachable!()
                };
                let mut values = vec![];
                for h in 0..heads {
                    let head = &pattern.values[h * seq * seq..(h + 1) * seq * seq];
                    let words = spans.aggregate(head, seq); // [len, len]
                    for q in 1..=n {
                        values.extend_from_slice(&words[q * len + 1..q * len + 1 + n]);
                    }
                }
                HostTensor {
                    values,
                    shape: vec![1, heads, n, n],
                }
            })
            .collect();
        alone.add(&patterns, std::slice::from_ref(parsed.next().unwrap()));
    }
    let alone = alone.scores();
    assert_eq!(alone.relations.len(), relations.relations.len());
    let mut compared = 0;
    for (want, got) in alone.relations.iter().zip(&relations.relations) {
        assert_eq!((&want.relation, want.arcs), (&got.relation, got.arcs));
        for (a, b) in want.heads.iter().zip(&got.heads) {
            for (x, y) in [
                (a.dependent_to_head, b.dependent_to_head),
                (a.head_to_dependent, b.head_to_dependent),
            ] {
                assert!((x - y).abs() < 1e-9, "{}: {x} != {y}", want.relation);
                compared += 1;
            }
        }
    }
    assert!(compared >= 2 * 9 * 4, "{compared} scores compared");
    relations
}
