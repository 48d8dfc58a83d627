//! Every encoder family headlab imports, as a user runs it: `headlab import` of a random tiny
//! base model and masked LM of RoBERTa, XLM-RoBERTa, DistilBERT, ELECTRA (and ELECTRA-small),
//! ALBERT, ModernBERT, XLM-RoBERTa-XL and RoBERTa-PreLayerNorm
//! (`scripts/fixtures/families_reference.py`, crates/model/tests/fixtures/families/), then
//! `headlab inspect --text` of the reference's sentences: the words, the family's own special
//! pieces and every head's word-level attention equal `transformers`' reading of the same
//! words pre-split (within 1e-5); then the default inspect (the shipped treebank) measures
//! every head of every family.

#[path = "common/headlab.rs"]
mod headlab;
#[path = "common/word_attention.rs"]
mod word_attention;

use std::path::{Path, PathBuf};

use serde_json::Value;

/// The fixtures: `families/NAME`, its class and its `[import]` format.
const FIXTURES: [(&str, &str, &str); 19] = [
    ("roberta", "RobertaModel", "huggingface-roberta"),
    ("roberta-mlm", "RobertaForMaskedLM", "huggingface-roberta"),
    ("xlm-roberta", "XLMRobertaModel", "huggingface-xlm-roberta"),
    (
        "xlm-roberta-mlm",
        "XLMRobertaForMaskedLM",
        "huggingface-xlm-roberta",
    ),
    ("distilbert", "DistilBertModel", "huggingface-distilbert"),
    (
        "distilbert-mlm",
        "DistilBertForMaskedLM",
        "huggingface-distilbert",
    ),
    ("electra", "ElectraModel", "huggingface-electra"),
    ("electra-mlm", "ElectraForMaskedLM", "huggingface-electra"),
    (
        "electra-discriminator",
        "ElectraForPreTraining",
        "huggingface-electra",
    ),
    ("electra-small", "ElectraModel", "huggingface-electra"),
    (
        "electra-small-mlm",
        "ElectraForMaskedLM",
        "huggingface-electra",
    ),
    ("albert", "AlbertModel", "huggingface-albert"),
    ("albert-mlm", "AlbertForMaskedLM", "huggingface-albert"),
    ("modernbert", "ModernBertModel", "huggingface-modernbert"),
    (
        "modernbert-mlm",
        "ModernBertForMaskedLM",
        "huggingface-modernbert",
    ),
    (
        "xlm-roberta-xl",
        "XLMRobertaXLModel",
        "huggingface-xlm-roberta-xl",
    ),
    (
        "xlm-roberta-xl-mlm",
        "XLMRobertaXLForMaskedLM",
        "huggingface-xlm-roberta-xl",
    ),
    (
        "roberta-prelayernorm",
        "RobertaPreLayerNormModel",
        "huggingface-roberta-prelayernorm",
    ),
    (
        "roberta-prelayernorm-mlm",
        "RobertaPreLayerNormForMaskedLM",
        "huggingface-roberta-prelayernorm",
    ),
];

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../model/tests/fixtures/families")
        .join(name)
}

/// `headlab SUBCOMMAND ARGS...`, which must succeed; its stdout.
fn succeeds(subcommand: &str, args: &[&str]) -> String {
    let output = headlab::run(subcommand, args);
    assert!(
        output.status.success(),
        "headlab {subcommand} {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// `families/NAME` imported into `parent/NAME`, checked to name its class and format.
fn imported(name: &str, class: &str, format: &str, parent: &Path) -> PathBuf {
    let run = parent.join(name);
    let source = fixture(name);
    let stdout = succeeds(
        "import",
        &[source.to_str().unwrap(), "--out", run.to_str().unwrap()],
    );
    assert!(
        stdout.contains(&format!("({class}: {} layers x ", layers(name))),
        "{stdout}"
    );
    let config = std::fs::read_to_string(run.join("config.toml")).unwrap();
    assert!(
        config.contains(&format!("format = \"{format}\"")),
        "{config}"
    );
    // ELECTRA's discriminator: its encoder is read, its replaced-token head named as not.
    assert_eq!(
        stdout.contains("not read: discriminator_predictions.dense.bias and 3 more"),
        name == "electra-discriminator",
        "{name}: {stdout}"
    );
    run
}

/// The fixture's layer count, as its config.json gives it (DistilBERT: `n_layers`).
fn layers(name: &str) -> usize {
    let config: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture(name).join("config.json")).unwrap())
            .unwrap();
    let layers = config.get("num_hidden_layers").or(config.get("n_layers"));
    layers.and_then(Value::as_u64).unwrap() as usize
}

#[test]
fn every_family_reads_typed_words_as_transformers_does() {
    let tmp = tempfile::tempdir().unwrap();
    for (name, class, format) in FIXTURES {
        let run = imported(name, class, format, tmp.path());
        let reference: Value = serde_json::from_str(
            &std::fs::read_to_string(fixture(name).join("words.json")).unwrap(),
        )
        .unwrap();
        let sentences = reference["sentences"].as_array().unwrap();
        let texts: Vec<String> = sentences
            .iter()
            .map(|s| {
                let words = s["words"].as_array().unwrap();
                let words: Vec<&str> = words.iter().map(|w| w.as_str().unwrap()).collect();
                words.join(" ")
            })
            .collect();
        let mut args = vec![run.to_str().unwrap()];
        for text in &texts {
            args.extend(["--text", text.as_str()]);
        }
        let typed = run.join("typed");
        args.extend(["--no-patching", "--quiet", "--out", typed.to_str().unwrap()]);
        succeeds("inspect", &args);
        let pieces = sentences[0]["pieces"].as_array().unwrap();
        let specials = [&pieces[0], &pieces[pieces.len() - 1]].map(|p| p.as_str().unwrap());
        let largest = word_attention::largest_difference(&typed, sentences, specials);
        // The reference read the words already split (`is_split_into_words`); typed text is
        // read raw, as `transformers` reads `tokenizer(text)` (its pieces checked against
        // transformers' in run's typed-words test). The two readings are the same pieces but
        // for a byte-level BPE, whose first word has no space before it when read raw: there
        // the words must agree and the attention differs.
        let tokenizer = hf::tokenizer::WordPieces::read(&run.join("tokenizer.json")).unwrap();
        let raw_is_split = sentences.iter().zip(&texts).all(|(sentence, text)| {
            let split: Vec<&str> = sentence["pieces"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p.as_str().unwrap())
                .collect();
            tokenizer.read_text(text).unwrap().encoded.pieces == split
        });
        let byte_level = name.starts_with("roberta") || name.starts_with("modernbert");
        assert_eq!(raw_is_split, !byte_level, "{name}");
        if !byte_level {
            assert!(
                largest < 1e-5,
                "{name}: word-level attention differs by up to {largest}"
            );
        }
    }
}

#[test]
fn every_family_is_measured_on_the_shipped_treebank() {
    let tmp = tempfile::tempdir().unwrap();
    for (name, class, format) in FIXTURES {
        let run = imported(name, class, format, tmp.path());
        succeeds("inspect", &[run.to_str().unwrap(), "--quiet"]);
        let report = run.join("inspect");
        let read = |file: &str| -> Value {
            serde_json::from_str(&std::fs::read_to_string(report.join(file)).unwrap()).unwrap()
        };
        let summary = read("summary.json");
        assert_eq!(summary["probe"]["kind"], "shipped_treebank", "{name}");
        // The family's own special pieces, and attention measured on them in every layer.
        let names = summary["probe_token_names"].as_array().unwrap();
        let specials = &names[names.len() - 2..];
        let want = match name.contains("roberta") {
            true => ["<s>", "</s>"],
            false => ["[CLS]", "[SEP]"],
        };
        assert_eq!(specials, want, "{name}");
        assert_eq!(
            summary["special_attention"].as_array().unwrap().len(),
            layers(name)
        );
        // Relations on the sentences that fit its 16 positions.
        let relations = read("relations.json");
        assert!(relations["sentences"].as_u64().unwrap() > 100, "{name}");
        // Every head measured; the output side (ablation, attribution) only with a head.
        let heads = read("heads.json");
        let heads = heads.as_array().unwrap();
        assert_eq!(
            heads.len(),
            layers(name) * summary["n_heads"].as_u64().unwrap() as usize
        );
        // ModernBERT's page says how its rotary positions enter the circuits, and which
        // layers are local.
        let page = std::fs::read_to_string(report.join("index.html")).unwrap();
        assert_eq!(
            page.contains("its QK circuit is its score at distance 0"),
            name.starts_with("modernbert"),
            "{name}"
        );
        if name.starts_with("modernbert") {
            assert!(
                page.contains("layer 1 attends locally, to the keys at most 2 positions away"),
                "{name}"
            );
        }
        let masked_lm = name.ends_with("-mlm");
        for head in heads {
            assert!(head["entropy"].as_f64().unwrap().is_finite(), "{name}");
            assert!(head["qk_effective_rank"].as_f64().unwrap() > 0.0, "{name}");
            assert_eq!(
                head["ablation_drop"].is_number(),
                masked_lm,
                "{name}: {head}"
            );
        }
    }
}

/// `headlab compare` across two families of one grid: RoBERTa (byte-level BPE) and XLM-R
/// (SentencePiece), each reading the shipped treebank's sentences that both fit, matched
/// head to head; the page and matching.json say which model and tokenizer each is.
#[test]
fn compare_matches_two_families_on_the_same_words_and_names_them() {
    let tmp = tempfile::tempdir().unwrap();
    let roberta = imported(
        "roberta-mlm",
        "RobertaForMaskedLM",
        "huggingface-roberta",
        tmp.path(),
    );
    let xlmr = imported(
        "xlm-roberta",
        "XLMRobertaModel",
        "huggingface-xlm-roberta",
        tmp.path(),
    );
    let out = tmp.path().join("compared");
    let args = [roberta.to_str().unwrap(), xlmr.to_str().unwrap()];
    succeeds(
        "compare",
        &[args[0], args[1], "--out", out.to_str().unwrap(), "--quiet"],
    );
    let matching: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("matching.json")).unwrap()).unwrap();
    let runs = matching["runs"].as_array().unwrap();
    let described: Vec<(&str, &str)> = runs
        .iter()
        .map(|run| {
            let imported = &run["imported"];
            (
                imported["architecture"].as_str().unwrap(),
                imported["tokenizer"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        described,
        [
            ("RobertaForMaskedLM", "byte-level BPE"),
            ("XLMRobertaModel", "Unigram (SentencePiece)")
        ]
    );
    // Every head of the reference has a partner of the other family.
    assert_eq!(matching["slots"].as_array().unwrap().len(), 4);
    let page = std::fs::read_to_string(out.join("compare.html")).unwrap();
    assert!(
        page.contains("roberta-mlm (RobertaForMaskedLM, byte-level BPE tokenizer, 2 x 2)")
            && page.contains(
                "xlm-roberta (XLMRobertaModel, Unigram (SentencePiece) tokenizer, 2 x 2)"
            ),
        "the page names neither family"
    );
    assert_eq!(matching["across_layers"], false, "one grid: layer by layer");
    // Issue 66, item 6: the probe was cut to the sentences both fit, and that is said, with
    // each model's own count and the sentences' length, in matching.json and on the page.
    let cut = matching["probe_cut"].as_str().expect("a probe cut");
    assert_eq!(
        cut,
        "the probe is drawn from the 363 of 2077 treebank sentences every run fits in its \
         positions (roberta-mlm: 370, xlm-roberta: 435), and its sentences are 2 words long"
    );
    assert!(page.contains(cut), "the page does not say the cut");
    compare_across_grids(tmp.path(), &roberta);
}

/// Models of different grids (RoBERTa's 2 x 2 heads, ModernBERT's 3 x 2) are matched across
/// layers: every head of the first to a different head of any layer of the other; the larger
/// first is refused, saying which order works.
fn compare_across_grids(tmp: &Path, roberta: &Path) {
    let modern = imported(
        "modernbert",
        "ModernBertModel",
        "huggingface-modernbert",
        tmp,
    );
    let out = tmp.join("across");
    let args = [roberta.to_str().unwrap(), modern.to_str().unwrap()];
    succeeds(
        "compare",
        &[args[0], args[1], "--out", out.to_str().unwrap(), "--quiet"],
    );
    let matching: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("matching.json")).unwrap()).unwrap();
    assert_eq!(matching["across_layers"], true);
    let layers = matching["runs"][1]["layers"].as_array().unwrap();
    let mut partners = vec![];
    for layer in layers {
        let heads = layer["partner"].as_array().unwrap();
        let in_layers = layer["partner_layer"].as_array().unwrap();
        let similarity = layer["similarity"].as_array().unwrap();
        let matrix = layer["matrix"].as_array().unwrap();
        for (h, (head, in_layer)) in heads.iter().zip(in_layers).enumerate() {
            let (l, p) = (in_layer.as_u64().unwrap(), head.as_u64().unwrap());
            assert!(l < 3 && p < 2, "a head of ModernBERT's grid: L{l}H{p}");
            partners.push((l, p));
            // A row of every ModernBERT head, layer-major; the partner's entry is its
            // similarity.
            let row = matrix[h].as_array().unwrap();
            assert_eq!(row.len(), 6);
            assert_eq!(row[(l * 2 + p) as usize], similarity[h]);
        }
    }
    partners.sort();
    partners.dedup();
    assert_eq!(partners.len(), 4, "one to one: {partners:?}");
    let page = std::fs::read_to_string(out.join("compare.html")).unwrap();
    assert!(
        page.contains("modernbert (ModernBertModel, byte-level BPE tokenizer, 3 x 2)")
            && page.contains("most similar head of any layer of the others"),
        "{}",
        &page[..page.len().min(3000)]
    );
    let output = headlab::run(
        "compare",
        &[
            args[1],
            args[0],
            "--out",
            tmp.join("reversed").to_str().unwrap(),
        ],
    );
    let error = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success()
            && error.contains("has 6 heads")
            && error.contains("the model with fewer heads comes first"),
        "{error}"
    );
}
