//! Hugging Face encoder checkpoints opened as headlab encoders, against `transformers`
//! itself: random tiny `BertModel` and `BertForMaskedLM` checkpoints (1 and 3 layers, padded
//! rows, token types; `scripts/fixtures/bert_reference.py`, crates/model/tests/fixtures/bert/)
//! and a base model and a masked LM of RoBERTa, XLM-RoBERTa, DistilBERT, ELECTRA (as wide
//! as its hidden states, and ELECTRA-small's narrower embeddings with their projection),
//! ALBERT (factorised embeddings, one layer's weights shared, `gelu_new`), ModernBERT and the
//! pre-norm XLM-RoBERTa-XL and RoBERTa-PreLayerNorm (each with a final norm)
//! (`scripts/fixtures/families_reference.py`, fixtures/families/), whose every layer's hidden
//! states, every head's attention probabilities and the masked LMs' logits match within 1e-5; and all-MiniLM-L6-v2 (from the PyPI package `scripts/setup/setup.sh`
//! installs) against transformers' last hidden states (1e-4) and sentence-transformers'
//! embeddings (cosine 0.99999) on 20 sentences.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use burn::prelude::*;
use hf::import::{ImportRequest, import};
use hf::tokenizer::WordPieces;
use hf::{CheckpointConfig, HfError, load_checkpoint};
use model::{AttentionMask, EncoderInput};
use run::RunDir;
use run::manifest::{Depth, Verdict};
use run::tensor_file::HostTensor;
use run::weights;
use safetensors::{Dtype, SafeTensors};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../model/tests/fixtures")
}

/// A reference file's tensors: f32 ones as they are, int64 ones as i64.
struct Reference {
    floats: HashMap<String, HostTensor>,
    ints: HashMap<String, (Vec<usize>, Vec<i64>)>,
}

fn read_reference(path: &Path) -> Reference {
    let bytes = std::fs::read(path).unwrap();
    let file = SafeTensors::deserialize(&bytes).unwrap();
    let mut floats = HashMap::new();
    let mut ints = HashMap::new();
    for (name, view) in file.tensors() {
        let shape = view.shape().to_vec();
        match view.dtype() {
            Dtype::F32 => {
                let values = view
                    .data()
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
                    .collect();
                floats.insert(name, HostTensor { shape, values });
            }
            Dtype::I64 => {
                let values = view
                    .data()
                    .chunks_exact(8)
                    .map(|b| i64::from_le_bytes(b.try_into().unwrap()))
                    .collect();
                ints.insert(name, (shape, values));
            }
            other => panic!("{name}: unexpected {other:?}"),
        }
    }
    Reference { floats, ints }
}

impl Reference {
    fn int_tensor(&self, name: &str, device: &Device) -> Tensor<2, Int> {
        let (shape, values) = &self.ints[name];
        Tensor::from_data(TensorData::new(values.clone(), shape.clone()), device)
    }

    /// The model input: tokens, token types (where the family has them) and the padding
    /// mask (`attention_mask` 0).
    fn input(&self, device: &Device) -> EncoderInput {
        let mask = self.int_tensor("attention_mask", device).equal_elem(0);
        let input = EncoderInput::new(self.int_tensor("input_ids", device)).mask(AttentionMask {
            pad: Some(mask),
            attn: None,
        });
        match self.ints.contains_key("token_type_ids") {
            true => input.token_types(self.int_tensor("token_type_ids", device)),
            false => input,
        }
    }
}

/// The largest absolute difference between `got` and the reference tensor `want`.
fn max_difference(got: HostTensor, want: &HostTensor, what: &str) -> f32 {
    assert_eq!(got.shape, want.shape, "{what}: shapes");
    got.values
        .iter()
        .zip(&want.values)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f32::max)
}

/// The random checkpoints: BERT's three (`bert/`), then a base model and a masked LM of
/// each other family (`families/`, `scripts/fixtures/families_reference.py`).
const RANDOM_CHECKPOINTS: [&str; 22] = [
    "bert/one-layer",
    "bert/three-layers-mlm",
    "bert/padded",
    "families/roberta",
    "families/roberta-mlm",
    "families/xlm-roberta",
    "families/xlm-roberta-mlm",
    "families/distilbert",
    "families/distilbert-mlm",
    "families/electra",
    "families/electra-mlm",
    "families/electra-discriminator",
    "families/electra-small",
    "families/electra-small-mlm",
    "families/albert",
    "families/albert-mlm",
    "families/modernbert",
    "families/modernbert-mlm",
    "families/xlm-roberta-xl",
    "families/xlm-roberta-xl-mlm",
    "families/roberta-prelayernorm",
    "families/roberta-prelayernorm-mlm",
];

/// Opens the checkpoint `families/NAME` (or `bert/NAME`) and compares what headlab computes
/// with its `reference.safetensors`, each tensor within 1e-5: the embeddings, every layer's
/// hidden state and attention, the last hidden state after a final norm, a masked LM's
/// logits. Returns the family, the tensors compared and the largest difference.
fn matches_reference(name: &str, device: &Device) -> (&'static str, usize, f32) {
    let dir = fixtures().join(name);
    let (encoder, config) = load_checkpoint(&dir, device).unwrap();
    let reference = read_reference(&dir.join("reference.safetensors"));
    let (logits, cache) = encoder.forward_with_cache(reference.input(device));
    let (mut checked, mut worst) = (0, 0.0f32);
    let mut compare = |got: HostTensor, key: &str| {
        let difference = max_difference(got, &reference.floats[key], key);
        worst = worst.max(difference);
        assert!(
            difference <= 1e-5,
            "{name}: {key} differs from transformers' by {difference}"
        );
        checked += 1;
    };
    compare(HostTensor::of(cache.embeddings.clone()), "hidden_states.0");
    assert_eq!(cache.layers.len(), config.num_hidden_layers);
    for (layer, record) in cache.layers.iter().enumerate() {
        // transformers 5 gives a model with a final norm (ModernBERT, XLM-RoBERTa-XL,
        // RoBERTa-PreLayerNorm) its normed output as the last hidden state; the script
        // keeps the last layer's own apart.
        let last = layer + 1 == cache.layers.len();
        let key = match reference.floats.contains_key("last_layer_output") && last {
            true => "last_layer_output".to_string(),
            false => format!("hidden_states.{}", layer + 1),
        };
        compare(HostTensor::of(record.resid_post.clone()), &key);
        compare(
            HostTensor::of(record.pattern.clone()),
            &format!("attentions.{layer}"),
        );
    }
    // A final norm (ModernBERT, the pre-norm RoBERTas): the last hidden state after it.
    if let Some(want) = reference.floats.get("last_hidden_state") {
        compare(
            HostTensor::of(cache.final_hidden.clone()),
            "last_hidden_state",
        );
        assert!(want.values.iter().any(|v| *v != 0.0));
    }
    // A masked LM keeps its prediction head: its logits too.
    assert_eq!(config.is_masked_lm(), name.ends_with("-mlm"), "{name}");
    if config.is_masked_lm() {
        compare(HostTensor::of(logits), "logits");
    }
    (config.family.model_type(), checked, worst)
}

#[test]
fn random_checkpoints_of_every_family_match_transformers_layer_by_layer() {
    let device = Device::flex();
    let mut checked = 0;
    let mut worst = 0.0f32;
    let mut families = std::collections::BTreeSet::new();
    for name in RANDOM_CHECKPOINTS {
        let (family, count, difference) = matches_reference(name, &device);
        families.insert(family);
        checked += count;
        worst = worst.max(difference);
    }
    assert_eq!(families.len(), 9, "{families:?}");
    // BERT: three embeddings, 1 + 3 + 2 layers' hidden states and attention, one logits;
    // the next thirteen (ELECTRA's discriminator among them): embeddings and two layers
    // each, six logits; ModernBERT's two: embeddings, three layers and the last hidden
    // state each, one logits; XLM-RoBERTa-XL's and RoBERTa-PreLayerNorm's four:
    // embeddings, two layers and the last hidden state each, two logits.
    assert_eq!(
        checked,
        (3 + 2 * 6 + 1) + 13 * (1 + 2 * 2) + 6 + 2 * (1 + 2 * 3 + 1) + 1 + 4 * (1 + 2 * 2 + 1) + 2
    );
    eprintln!("largest difference from transformers: {worst:e}");
}

/// `headlab export` of runs trained here, opened by `transformers` itself
/// (`scripts/fixtures/export_reference.sh`: tiny text models of each kind of block as their
/// masked LMs, a toy run as XLM-RoBERTa-XL's base model with its padding row): the reference
/// equals what headlab computes from the same files. The masked LMs' files, imported and
/// exported again, are the same bytes.
#[test]
fn exports_of_runs_trained_here_open_in_transformers_with_their_numbers() {
    let device = Device::flex();
    let exports = [
        ("headlab-export-bert-mlm", "bert"),
        ("headlab-export-xlm-roberta-xl-mlm", "xlm-roberta-xl"),
        (
            "headlab-export-roberta-prelayernorm-mlm",
            "roberta-prelayernorm",
        ),
        ("headlab-export-toy", "xlm-roberta-xl"),
    ];
    let tmp = tempfile::tempdir().unwrap();
    for (name, family) in exports {
        let (got, checked, worst) = matches_reference(&format!("families/{name}"), &device);
        assert_eq!(got, family, "{name}");
        // Embeddings, two layers of two (one for the toy), the last hidden state, logits.
        let layers = if name.ends_with("toy") { 1 } else { 2 };
        let extra = usize::from(family != "bert") + usize::from(name.ends_with("-mlm"));
        assert_eq!(checked, 1 + 2 * layers + extra, "{name}");
        eprintln!("{name}: largest difference from transformers {worst:e}");
        if !name.ends_with("-mlm") {
            continue; // a toy has no tokenizer to import with
        }
        let fixture = fixtures().join("families").join(name);
        let run = tmp.path().join(name);
        hf::import::import(&hf::import::ImportRequest {
            checkpoint: fixture.clone(),
            out: Some(run.clone()),
            name: None,
            force: false,
        })
        .unwrap();
        let again = tmp.path().join(format!("{name}-again"));
        hf::export::export(&run, &again).unwrap();
        for file in [
            "model.safetensors",
            "tokenizer.json",
            "tokenizer_config.json",
        ] {
            assert!(
                std::fs::read(again.join(file)).unwrap()
                    == std::fs::read(fixture.join(file)).unwrap(),
                "{name}: {file} differs from the export transformers opened"
            );
        }
    }
}

#[test]
fn a_checkpoint_of_no_family_here_or_not_whole_is_refused_by_name() {
    let device = Device::flex();
    let source = fixtures().join("bert/one-layer");
    let tmp = tempfile::tempdir().unwrap();
    let copy = |dir: &Path| {
        std::fs::create_dir_all(dir).unwrap();
        for file in ["config.json", "model.safetensors"] {
            std::fs::copy(source.join(file), dir.join(file)).unwrap();
        }
    };
    let message = |dir: &Path| match load_checkpoint(dir, &device) {
        Ok(_) => panic!("{} opened", dir.display()),
        Err(error) => error.to_string(),
    };

    let missing = tmp.path().join("missing");
    assert!(matches!(
        load_checkpoint(&missing, &device),
        Err(HfError::Io { .. })
    ));

    let relu = tmp.path().join("relu");
    copy(&relu);
    let text = std::fs::read_to_string(relu.join("config.json")).unwrap();
    std::fs::write(
        relu.join("config.json"),
        text.replace("\"hidden_act\": \"gelu\"", "\"hidden_act\": \"relu\""),
    )
    .unwrap();
    let error = message(&relu);
    assert!(error.contains("hidden_act is \"relu\""), "{error}");

    let gpt = tmp.path().join("gpt");
    copy(&gpt);
    std::fs::write(
        gpt.join("config.json"),
        text.replace("\"model_type\": \"bert\"", "\"model_type\": \"gpt2\""),
    )
    .unwrap();
    assert!(message(&gpt).contains("model_type is \"gpt2\""));

    let wider = tmp.path().join("wider");
    copy(&wider);
    std::fs::write(
        wider.join("config.json"),
        text.replace("\"intermediate_size\": 64", "\"intermediate_size\": 65"),
    )
    .unwrap();
    let error = message(&wider);
    assert!(
        error.contains("encoder.layer.0.intermediate.dense.weight has shape [64, 32]"),
        "{error}"
    );

    let cut = tmp.path().join("cut");
    copy(&cut);
    let bytes = std::fs::read(cut.join("model.safetensors")).unwrap();
    std::fs::write(cut.join("model.safetensors"), &bytes[..bytes.len() / 2]).unwrap();
    assert!(message(&cut).contains("may be truncated"));

    // The config alone reads, and says what it is.
    let config = CheckpointConfig::read(&source).unwrap();
    assert_eq!((config.hidden_size, config.num_attention_heads), (32, 4));
}

#[test]
fn all_minilm_l6_v2_matches_transformers_and_sentence_transformers() {
    let Some(dir) = testkit::minilm_dir("the MiniLM reference test") else {
        return;
    };
    // The very checkpoint the reference was made from.
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fixtures().join("minilm/sentences.json")).unwrap())
            .unwrap();
    let weights = std::fs::read(dir.join("model.safetensors")).unwrap();
    assert_eq!(
        run::hash::sha256_hex(&weights),
        record["model_sha256"].as_str().unwrap(),
        "{} is another all-MiniLM-L6-v2 than the reference's",
        dir.display()
    );
    let device = Device::flex();
    let (encoder, config) = load_checkpoint(&dir, &device).unwrap();
    assert_eq!(
        (
            config.num_hidden_layers,
            config.num_attention_heads,
            config.hidden_size
        ),
        (6, 12, 384)
    );
    let reference = read_reference(&fixtures().join("minilm/reference.safetensors"));
    let (_, cache) = encoder.forward_with_cache(reference.input(&device));
    let last = cache.layers.last().unwrap().resid_post.clone(); // [batch, seq, 384]
    let (mask_shape, mask) = &reference.ints["attention_mask"];
    let [batch, seq] = [mask_shape[0], mask_shape[1]];
    let got = HostTensor::of(last);
    let want = &reference.floats["last_hidden_state"];
    let width = 384;
    // Padded positions are no word's: transformers computes them too, but nothing reads them.
    let mut worst = 0.0f32;
    for (row, keep) in mask.iter().enumerate() {
        if *keep == 1 {
            for k in 0..width {
                let i = row * width + k;
                worst = worst.max((got.values[i] - want.values[i]).abs());
            }
        }
    }
    assert!(worst <= 1e-4, "last hidden states differ by {worst}");
    let mut lowest_cosine = 1.0f64;

    // sentence-transformers: the mean over a sentence's tokens, normalised.
    let embeddings = &reference.floats["sentence_embeddings"];
    for sentence in 0..batch {
        let mut pooled = vec![0.0f64; width];
        let mut count = 0.0;
        for position in 0..seq {
            if mask[sentence * seq + position] == 1 {
                count += 1.0;
                for (k, value) in pooled.iter_mut().enumerate() {
                    *value += got.values[(sentence * seq + position) * width + k] as f64;
                }
            }
        }
        let norm = pooled
            .iter()
            .map(|v| (v / count).powi(2))
            .sum::<f64>()
            .sqrt();
        let want = &embeddings.values[sentence * width..(sentence + 1) * width];
        let cosine: f64 = pooled
            .iter()
            .zip(want)
            .map(|(a, b)| a / count / norm * *b as f64)
            .sum();
        assert!(cosine >= 0.99999, "sentence {sentence}: cosine {cosine}");
        lowest_cosine = lowest_cosine.min(cosine);
    }
    eprintln!(
        "all-MiniLM-L6-v2: last hidden states within {worst:e} of transformers', lowest \
         cosine with sentence-transformers {lowest_cosine:.9}"
    );
}

#[test]
fn an_imported_run_holds_the_model_transformers_ran() {
    let device = Device::flex();
    let tmp = tempfile::tempdir().unwrap();
    for name in ["one-layer", "three-layers-mlm", "padded"] {
        let checkpoint = fixtures().join("bert").join(name);
        let out = tmp.path().join(name);
        let imported = import(&ImportRequest {
            checkpoint: checkpoint.clone(),
            out: Some(out.clone()),
            name: None,
            force: false,
        })
        .unwrap();
        assert_eq!(imported.dir.root(), out);

        // Read back as inspect reads any run: the directory, its config, its weights.
        let dir = RunDir::open(&out).unwrap();
        assert_eq!(dir.verify(Depth::Contents), Verdict::Intact);
        let run = dir.resolve().unwrap();
        assert_eq!(
            run.config.name, name,
            "named after the checkpoint directory"
        );
        let record = run.config.import.as_ref().unwrap();
        let sha =
            |file: &str| run::hash::sha256_hex(&std::fs::read(checkpoint.join(file)).unwrap());
        assert_eq!(record.config_sha256, sha("config.json"));
        assert_eq!(record.weights_sha256, sha("model.safetensors"));
        assert_eq!(record.tokenizer_sha256, sha("tokenizer.json"));
        assert_eq!(
            record.source,
            std::fs::canonicalize(&checkpoint).unwrap(),
            "{name}"
        );
        assert_eq!((record.vocab_size, record.max_positions), (60, 16));
        assert_eq!(
            std::fs::read(dir.tokenizer_path()).unwrap(),
            std::fs::read(checkpoint.join("tokenizer.json")).unwrap()
        );
        let vocab = std::fs::read_to_string(dir.vocab_path()).unwrap();
        let pieces: Vec<&str> = vocab.lines().collect();
        assert_eq!((pieces.len(), pieces[2], pieces[32]), (60, "[CLS]", "##er"));

        let fresh = run.config.model.init(&run.io, &device).unwrap();
        let model = weights::load(&dir.final_weights_path(), fresh).unwrap();
        let reference = read_reference(&checkpoint.join("reference.safetensors"));
        let (logits, cache) = model.forward_with_cache(reference.input(&device));
        for (layer, record) in cache.layers.iter().enumerate() {
            for (got, key) in [
                (
                    HostTensor::of(record.resid_post.clone()),
                    format!("hidden_states.{}", layer + 1),
                ),
                (
                    HostTensor::of(record.pattern.clone()),
                    format!("attentions.{layer}"),
                ),
            ] {
                let difference = max_difference(got, &reference.floats[&key], &key);
                assert!(difference <= 1e-5, "{name}: {key} differs by {difference}");
            }
        }
        if let Some(want) = reference.floats.get("logits") {
            let difference = max_difference(HostTensor::of(logits), want, "logits");
            assert!(difference <= 1e-5, "{name}: logits differ by {difference}");
        }
    }
}

#[test]
fn the_minilm_tokenizer_reads_the_sentences_as_transformers_did() {
    let Some(dir) = testkit::minilm_dir("the MiniLM reference test") else {
        return;
    };
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fixtures().join("minilm/sentences.json")).unwrap())
            .unwrap();
    let tokenizer = WordPieces::read(&dir.join("tokenizer.json")).unwrap();
    assert_eq!(tokenizer.vocab_size(), 30522);
    let reference = read_reference(&fixtures().join("minilm/reference.safetensors"));
    let (shape, ids) = &reference.ints["input_ids"];
    let seq = shape[1];
    let sentences = record["sentences"].as_array().unwrap();
    for (row, sentence) in sentences.iter().enumerate() {
        let encoded = tokenizer.encode_text(sentence.as_str().unwrap()).unwrap();
        let want: Vec<&str> = record["tokens"][row]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap())
            .filter(|t| *t != "[PAD]")
            .collect();
        assert_eq!(encoded.pieces, want, "sentence {row}");
        let want_ids: Vec<u32> = ids[row * seq..row * seq + want.len()]
            .iter()
            .map(|&id| id as u32)
            .collect();
        assert_eq!(encoded.ids, want_ids, "sentence {row}");
    }
}

/// Hostile typed text (an emoji with its variation selector, an NFD accent, CJK, a byte-order
/// mark, a zero-width space, two spaces) reads as `transformers` read it
/// (`scripts/fixtures/typed_words_reference.py`): the same pieces, the same words of each
/// piece, each word the text its pieces came from.
#[test]
fn typed_text_reads_into_the_words_transformers_reads_in_every_family() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/typed-words.json");
    let record: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let strings = |list: &serde_json::Value| -> Vec<String> {
        let list = list.as_array().unwrap();
        list.iter()
            .map(|s| s.as_str().unwrap().to_string())
            .collect()
    };
    let mut read = 0;
    for (name, readings) in record["readings"].as_object().unwrap() {
        let file = match name.as_str() {
            "minilm" => match testkit::minilm_dir("the typed-words test of MiniLM") {
                Some(dir) => dir.join("tokenizer.json"),
                None => continue,
            },
            family => fixtures()
                .join("families")
                .join(family)
                .join("tokenizer.json"),
        };
        let tokenizer = WordPieces::read(&file).unwrap();
        for reading in readings.as_array().unwrap() {
            let text = reading["text"].as_str().unwrap();
            let got = tokenizer.read_text(text).unwrap();
            let pieces = strings(&reading["pieces"]);
            assert_eq!(got.encoded.pieces, pieces, "{name}: {text:?}");
            let word_ids: Vec<Option<usize>> = reading["word_ids"]
                .as_array()
                .unwrap()
                .iter()
                .map(|w| w.as_u64().map(|w| w as usize))
                .collect();
            assert_eq!(got.encoded.words, word_ids, "{name}: {text:?}");
            // transformers' word text, without its leading space; a word of spaces alone is
            // named by its pieces.
            let want: Vec<String> = strings(&reading["words"])
                .iter()
                .enumerate()
                .map(|(w, word)| match word.trim() {
                    "" => (0..pieces.len())
                        .filter(|&p| word_ids[p] == Some(w))
                        .map(|p| pieces[p].as_str())
                        .collect(),
                    word => word.to_string(),
                })
                .collect();
            assert_eq!(got.words, want, "{name}: {text:?}");
            let unknown: Vec<usize> = (0..want.len())
                .filter(|&w| {
                    (0..pieces.len())
                        .filter(|&p| word_ids[p] == Some(w))
                        .all(|p| ["[UNK]", "<unk>"].contains(&pieces[p].as_str()))
                })
                .collect();
            assert_eq!(got.unknown, unknown, "{name}: {text:?}");
            read += 1;
        }
    }
    assert!(read >= 35, "every family's readings were checked: {read}");
}
