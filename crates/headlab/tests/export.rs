//! `headlab export` as a user runs it: a tiny text model trained here, with each kind of
//! block, exported to the family that holds it (BERT, XLM-RoBERTa-XL, RoBERTa-PreLayerNorm)
//! as its masked LM; the export opened again (`hf::load_checkpoint`, the importer whose every
//! family matches `transformers` layer by layer) gives the run's own logits; `headlab import`
//! of the export and a second export give the same `model.safetensors` byte for byte. A toy
//! run goes as the base model with a padding row, its output layer left out and said. An
//! option no class holds, an unfinished run and a user's directory are refused in one line,
//! nothing written. That `transformers` itself opens an export with the same logits is
//! `scripts/fixtures/export_reference.py`'s committed reference, checked in `hf`'s tests.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use burn::prelude::*;
use model::{Encoder, EncoderInput};

#[path = "common/train.rs"]
mod common;
use common::{HEADLAB, TINY, run_train, write_text_corpus};

/// The tiny toy config most tests train (reverse, one layer of two heads).
fn tiny() -> String {
    std::fs::read_to_string(TINY).unwrap()
}

fn headlab(args: &[&str]) -> Output {
    Command::new(HEADLAB)
        .args(args)
        .env("XDG_RUNTIME_DIR", "/tmp")
        .output()
        .expect("the headlab binary runs")
}

fn succeeds(args: &[&str]) -> String {
    let output = headlab(args);
    assert!(
        output.status.success(),
        "headlab {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// One line on stderr, a failure, no backtrace: the message.
fn refused(args: &[&str]) -> String {
    let output = headlab(args);
    assert!(!output.status.success(), "headlab {args:?} succeeded");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(!stderr.contains("panicked"), "{stderr}");
    stderr
}

/// Trains a tiny text model with the `[model]` lines `model` into `dir/NAME`.
fn text_run(dir: &Path, name: &str, model: &str) -> PathBuf {
    let corpus = dir.join("corpus.jsonl");
    if !corpus.exists() {
        write_text_corpus(&corpus);
    }
    let config = dir.join(format!("{name}.toml"));
    std::fs::write(
        &config,
        format!(
            "name = \"{name}\"\nseed = 0\nbackend = \"flex\"\n\n[task]\nkind = \"text\"\n\
             corpus = \"{}\"\nvocab_size = 150\nseq_len = 16\n\n[model]\nd_model = 16\n\
             n_layers = 2\nn_heads = 2\nd_ff = 32\noutput_transform = true\n{model}\n\n\
             [train]\nsteps = 4\nbatch_size = 8\neval_every = 4\neval_size = 16\n\
             checkpoint_every = 4\nsnapshot_every = 0\n",
            corpus.display()
        ),
    )
    .unwrap();
    let run = dir.join(name);
    let output = run_train(&[config.to_str().unwrap(), "--out", run.to_str().unwrap()]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    run
}

/// The run's model with its final weights, as headlab reads it.
fn run_model(run: &Path) -> Encoder {
    let dir = run::RunDir::open(run).unwrap();
    let resolved = dir.resolve().unwrap();
    let model = resolved
        .config
        .model
        .init(&resolved.io, &Device::flex())
        .unwrap();
    run::weights::load(&dir.final_weights_path(), model).unwrap()
}

/// Logits and the last hidden state of `encoder` on two fixed sequences of 16 pieces.
fn outputs(encoder: &Encoder) -> (Vec<f32>, Vec<f32>) {
    let ids: Vec<i64> = (0..32).map(|i| 5 + (i * 7) % 100).collect();
    let tokens = Tensor::<2, Int>::from_data(TensorData::new(ids, [2, 16]), &Device::flex());
    let (logits, cache) = encoder.forward_with_cache(EncoderInput::new(tokens));
    let values = |t: Tensor<3>| t.into_data().try_to_vec::<f32>().unwrap();
    (values(logits), values(cache.final_hidden))
}

fn max_difference(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

#[test]
fn a_text_model_of_each_block_kind_exports_as_its_masked_lm_and_comes_back_the_same() {
    let tmp = tempfile::tempdir().unwrap();
    let kinds = [
        (
            "bert",
            "norm = \"post\"\nembedding_norm = true\nfinal_norm = false\npositional = \"learned\"",
            "BertForMaskedLM",
        ),
        ("pre", "", "XLMRobertaXLForMaskedLM"),
        (
            "prelayernorm",
            "embedding_norm = true",
            "RobertaPreLayerNormForMaskedLM",
        ),
    ];
    for (name, model, class) in kinds {
        let run = text_run(tmp.path(), name, model);
        let export = tmp.path().join(format!("{name}-export"));
        let stdout = succeeds(&[
            "export",
            run.to_str().unwrap(),
            "--out",
            export.to_str().unwrap(),
        ]);
        assert!(stdout.contains(&format!("as {class}")), "{stdout}");
        assert!(!stdout.contains("left out"), "{stdout}");
        let config = json(&export.join("config.json"));
        assert_eq!(config["architectures"][0], class, "{config}");
        assert_eq!(config["tie_word_embeddings"], false);
        assert_eq!(
            std::fs::read(export.join("tokenizer.json")).unwrap(),
            std::fs::read(run.join("tokenizer.json")).unwrap()
        );
        assert_eq!(
            json(&export.join("tokenizer_config.json"))["mask_token"],
            "[MASK]"
        );

        // The checkpoint, opened as any Hugging Face checkpoint is, is the run's model.
        let (exported, _) = hf::load_checkpoint(&export, &Device::flex()).unwrap();
        let (want_logits, want_hidden) = outputs(&run_model(&run));
        let (logits, hidden) = outputs(&exported);
        assert!(max_difference(&logits, &want_logits) <= 1e-6, "{name}");
        assert!(max_difference(&hidden, &want_hidden) <= 1e-6, "{name}");

        // Imported as a run and exported again: the same tensors, byte for byte.
        let imported = tmp.path().join(format!("{name}-imported"));
        succeeds(&[
            "import",
            export.to_str().unwrap(),
            "--out",
            imported.to_str().unwrap(),
            "--quiet",
        ]);
        let again = tmp.path().join(format!("{name}-again"));
        succeeds(&[
            "export",
            imported.to_str().unwrap(),
            "--out",
            again.to_str().unwrap(),
        ]);
        assert_eq!(
            std::fs::read(again.join("model.safetensors")).unwrap(),
            std::fs::read(export.join("model.safetensors")).unwrap(),
            "{name}"
        );
        let mut first = config.clone();
        let mut second = json(&again.join("config.json"));
        first["headlab"] = serde_json::Value::Null;
        second["headlab"] = serde_json::Value::Null;
        assert_eq!(first, second, "{name}");

        // Exporting into the same directory again replaces the export.
        succeeds(&[
            "export",
            run.to_str().unwrap(),
            "--out",
            export.to_str().unwrap(),
        ]);
    }
}

#[test]
fn a_toy_run_goes_as_the_base_model_with_a_padding_row_and_its_outputs_left_out() {
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("tiny.toml");
    std::fs::write(&config, tiny()).unwrap();
    let run = tmp.path().join("tiny");
    let output = run_train(&[config.to_str().unwrap(), "--out", run.to_str().unwrap()]);
    assert!(output.status.success());
    let export = tmp.path().join("export");
    let stdout = succeeds(&[
        "export",
        run.to_str().unwrap(),
        "--out",
        export.to_str().unwrap(),
    ]);
    assert!(stdout.contains("as XLMRobertaXLModel"), "{stdout}");
    assert!(
        stdout.contains("left out: the run's output layer"),
        "{stdout}"
    );
    assert!(stdout.contains("added: a padding row"), "{stdout}");
    assert!(!export.join("tokenizer.json").exists());
    let config = json(&export.join("config.json"));
    let model = run_model(&run);
    let vocab = model.embedding.weight.dims()[0];
    assert_eq!(config["vocab_size"], vocab + 1);
    assert_eq!(config["pad_token_id"], vocab);
    assert_eq!(config["headlab"]["positions"], "sinusoidal", "{config}");

    // The base model: the last hidden state is the run's, sinusoids written as a table.
    let (exported, _) = hf::load_checkpoint(&export, &Device::flex()).unwrap();
    let ids: Vec<i64> = (0..12).map(|i| (i * 3) % vocab as i64).collect();
    let tokens = Tensor::<2, Int>::from_data(TensorData::new(ids, [2, 6]), &Device::flex());
    let hidden = |encoder: &Encoder| {
        let (_, cache) = encoder.forward_with_cache(EncoderInput::new(tokens.clone()));
        cache.final_hidden.into_data().try_to_vec::<f32>().unwrap()
    };
    assert!(max_difference(&hidden(&exported), &hidden(&model)) <= 1e-6);
}

#[test]
fn what_no_class_holds_an_unfinished_run_and_a_users_directory_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("rotary.toml");
    std::fs::write(
        &config,
        tiny().replace("[model]\n", "[model]\npositional = \"rotary\"\n"),
    )
    .unwrap();
    let run = tmp.path().join("rotary");
    assert!(
        run_train(&[config.to_str().unwrap(), "--out", run.to_str().unwrap()])
            .status
            .success()
    );
    let export = tmp.path().join("export");
    let message = refused(&[
        "export",
        run.to_str().unwrap(),
        "--out",
        export.to_str().unwrap(),
    ]);
    assert!(
        message.contains("config.toml: model.positional = rotary"),
        "{message}"
    );
    assert!(!export.exists(), "nothing is written");

    // A run without its final weights.
    std::fs::remove_file(run.join("model.safetensors")).unwrap();
    let message = refused(&[
        "export",
        run.to_str().unwrap(),
        "--out",
        export.to_str().unwrap(),
    ]);
    assert!(message.contains("has no final weights"), "{message}");
    assert!(!export.exists());

    // A directory of the user's is never written into.
    let mine = tmp.path().join("mine");
    std::fs::create_dir(&mine).unwrap();
    std::fs::write(mine.join("notes.txt"), "mine").unwrap();
    let good = tmp.path().join("good.toml");
    std::fs::write(&good, tiny()).unwrap();
    let good_run = tmp.path().join("good");
    assert!(
        run_train(&[good.to_str().unwrap(), "--out", good_run.to_str().unwrap()])
            .status
            .success()
    );
    let message = refused(&[
        "export",
        good_run.to_str().unwrap(),
        "--out",
        mine.to_str().unwrap(),
    ]);
    assert!(message.contains("notes.txt"), "{message}");
    let entries: Vec<_> = std::fs::read_dir(&mine).unwrap().collect();
    assert_eq!(entries.len(), 1);
}
