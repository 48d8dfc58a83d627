//! `headlab inspect --text` and `--text-file` as a user runs them: an imported checkpoint
//! probed with sentences of one's own, read word by word, its report naming them and saying
//! why relation scores are left out; and every bad input refused in one line, nothing written.

#[path = "common/headlab.rs"]
mod headlab;

use std::path::{Path, PathBuf};
use std::process::Output;

use inspect::inspection::summary::Summary;
use report::dir::ReportDir;

/// The one-layer BERT fixture (16 positions, a vocabulary of the grammar's words) imported
/// into `parent/bert`.
fn imported(parent: &Path) -> PathBuf {
    let checkpoint =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../model/tests/fixtures/bert/one-layer");
    let run = parent.join("bert");
    let output = headlab::run("import", &[&checkpoint, Path::new("--out"), &run]);
    assert!(output.status.success(), "{}", stderr(&output));
    run
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// `inspect RUN ARGS... --out OUT`, quiet.
fn inspect(run: &Path, args: &[&str], out: &Path) -> Output {
    let mut all: Vec<&Path> = vec![run];
    all.extend(args.iter().map(Path::new));
    all.extend([Path::new("--out"), out, Path::new("--quiet")]);
    headlab::run("inspect", &all)
}

#[test]
fn a_typed_sentence_is_read_word_by_word_and_named_on_the_page() {
    let tmp = tempfile::tempdir().unwrap();
    let run = imported(tmp.path());
    let out = tmp.path().join("typed");
    let output = inspect(&run, &["--text", "the dog sees the cat."], &out);
    assert!(output.status.success(), "{}", stderr(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("left out: relation scores"), "{stdout}");

    let dir = ReportDir::new(&out);
    let summary: Summary = dir.read_json().unwrap();
    let probe = serde_json::to_value(&summary.probe).unwrap();
    assert_eq!(probe["kind"], "typed_text");
    assert_eq!(probe["sentences"][0], "the dog sees the cat.");
    // The words, the full stop its own, then [CLS] and [SEP].
    let names = summary.probe_token_names.clone().unwrap();
    for word in ["the", "dog", "sees", "cat", "."] {
        assert!(names.iter().any(|n| n == word), "{names:?}");
    }
    assert!(
        summary
            .left_out
            .iter()
            .any(|l| l.contains("typed sentences have no parse"))
    );
    assert!(
        !out.join("relations.json").exists(),
        "no parse, no relation scores"
    );
    let page = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(
        page.contains("typed text (1 sentence)"),
        "the page names its probe"
    );
    assert!(
        page.contains("typed sentences have no parse"),
        "and says why"
    );
    let explore = std::fs::read_to_string(out.join("explore.html")).unwrap();
    assert!(explore.contains("sees"), "explore.html shows the words");

    // A file of two sentences of one length.
    let file = tmp.path().join("sentences.txt");
    std::fs::write(&file, "the dog sees the cat\n\nthe cat sees the dog\n").unwrap();
    let out = tmp.path().join("from-file");
    let output = inspect(&run, &["--text-file", file.to_str().unwrap()], &out);
    assert!(output.status.success(), "{}", stderr(&output));
    let summary: Summary = ReportDir::new(&out).read_json().unwrap();
    let probe = serde_json::to_value(&summary.probe).unwrap();
    assert_eq!(probe["sentences"].as_array().unwrap().len(), 2);
    assert!(probe["file"].as_str().unwrap().ends_with("sentences.txt"));
}

/// Words are the tokenizer's own (issue 67): an emoji with its variation selector is one
/// word, read as `[UNK]` and named on the page; each CJK character is a word, as BERT's
/// normalizer splits them; a byte-order mark and a zero-width space are no word. A file
/// longer than the probe is read a probe's worth, with a note, and the report lists what it
/// measured.
#[test]
fn typed_words_are_the_tokenizers_own_and_an_unknown_word_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let run = imported(tmp.path());
    let out = tmp.path().join("hostile");
    let output = inspect(
        &run,
        &[
            "--text",
            "\u{feff}the dog \u{2764}\u{fe0f} the\u{200b} cat",
            "--text",
            "the \u{6211}\u{7231}\u{4f60} cat",
        ],
        &out,
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let summary: Summary = ReportDir::new(&out).read_json().unwrap();
    let probe = serde_json::to_value(&summary.probe).unwrap();
    assert_eq!(
        probe["unknown_words"],
        serde_json::json!(["\u{2764}", "\u{6211}", "\u{7231}", "\u{4f60}"])
    );
    let names = summary.probe_token_names.clone().unwrap();
    for word in [
        "the", "dog", "cat", "\u{2764}", "\u{6211}", "\u{7231}", "\u{4f60}",
    ] {
        assert!(names.iter().any(|n| n == word), "{word:?} in {names:?}");
    }
    assert!(
        !names
            .iter()
            .any(|n| n.contains('\u{feff}') || n.contains('\u{fe0f}')),
        "{names:?}"
    );
    let page = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(
        page.contains("read as the unknown piece"),
        "the page says so"
    );

    let file = tmp.path().join("many.txt");
    std::fs::write(&file, "the dog sees the cat\n".repeat(5)).unwrap();
    let out = tmp.path().join("first-three");
    let output = inspect(
        &run,
        &["--text-file", file.to_str().unwrap(), "--probe", "3"],
        &out,
    );
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("5 sentences given; the probe reads the first 3 (--probe 3)"),
        "{}",
        stderr(&output)
    );
    let summary: Summary = ReportDir::new(&out).read_json().unwrap();
    let probe = serde_json::to_value(&summary.probe).unwrap();
    assert_eq!(probe["sentences"].as_array().unwrap().len(), 3);
}

/// Issue 66, item 2: typed sentences of different lengths are read together, each on its
/// own positions (the shorter padded, its padding no query and no key), so every pattern
/// measure of the two together is the mean of each read alone, weighted by their positions;
/// explore.html shows each sentence at its own length, and activations.safetensors pads
/// with an id named [PAD].
#[test]
fn typed_sentences_of_different_lengths_are_read_as_each_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let run = imported(tmp.path());
    let (short, long) = ("the dog sees", "the cat sees the dog");
    let read = |name: &str, sentences: &[&str]| {
        let out = tmp.path().join(name);
        let mut args = vec![];
        for sentence in sentences {
            args.extend(["--text", sentence]);
        }
        let output = inspect(&run, &args, &out);
        assert!(output.status.success(), "{}", stderr(&output));
        (out, stdout(&output))
    };
    let (both, said) = read("both", &[short, long]);
    let (alone_short, _) = read("short", &[short]);
    let (alone_long, _) = read("long", &[long]);
    assert!(
        said.contains("probe batch 2 sentences of 3 to 5 words"),
        "{said}"
    );
    // [CLS], the words, [SEP]: 5 and 7 positions.
    let (rows_short, rows_long) = (5.0, 7.0);
    let pooled = |a: f64, b: f64| (rows_short * a + rows_long * b) / (rows_short + rows_long);
    let heads = |dir: &Path| -> Vec<serde_json::Value> {
        serde_json::from_slice(&std::fs::read(dir.join("heads.json")).unwrap()).unwrap()
    };
    let (together, first, second) = (heads(&both), heads(&alone_short), heads(&alone_long));
    for ((head, a), b) in together.iter().zip(&first).zip(&second) {
        for field in ["entropy", "confidence", "mean_distance", "mean_value_norm"] {
            let value = |record: &serde_json::Value| record[field].as_f64().unwrap();
            let expected = pooled(value(a), value(b));
            assert!(
                (value(head) - expected).abs() < 1e-4,
                "{field} of L{}H{}: {} together, {expected} from each alone",
                head["layer"],
                head["head"],
                value(head)
            );
        }
    }
    let special = |dir: &Path| {
        let summary: Summary = ReportDir::new(dir).read_json().unwrap();
        summary.special_attention.unwrap()
    };
    let (together, first, second) = (special(&both), special(&alone_short), special(&alone_long));
    for ((layer, a), b) in together.iter().zip(&first).zip(&second) {
        // Each sentence's own [SEP], not the longest's last position.
        assert!((layer.sep - pooled(a.sep, b.sep)).abs() < 1e-4, "{layer:?}");
        assert!((layer.cls - pooled(a.cls, b.cls)).abs() < 1e-4, "{layer:?}");
    }

    // explore.html: each sentence at its own length.
    let page = std::fs::read_to_string(both.join("explore.html")).unwrap();
    let start = page.find(r#"id="data">"#).expect("the embedded data") + r#"id="data">"#.len();
    let end = start + page[start..].find("</script>").unwrap();
    let data: serde_json::Value = serde_json::from_str(&page[start..end]).unwrap();
    for (sequence, positions) in data["sequences"].as_array().unwrap().iter().zip([5, 7]) {
        assert_eq!(sequence["tokens"].as_array().unwrap().len(), positions);
        let head = &sequence["patterns"][0][0];
        assert_eq!(head.as_array().unwrap().len(), positions * positions);
    }

    // activations.safetensors: the short sentence padded with the id named [PAD].
    let bytes = std::fs::read(both.join("activations.safetensors")).unwrap();
    let (_, metadata) = safetensors::SafeTensors::read_metadata(&bytes).unwrap();
    let names: Vec<String> =
        serde_json::from_str(&metadata.metadata().as_ref().unwrap()["token_names"]).unwrap();
    let file = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let tokens = file.tensor("tokens").unwrap();
    assert_eq!(tokens.shape(), [2, 7]);
    let ids: Vec<i64> = tokens
        .data()
        .chunks(8)
        .map(|b| i64::from_le_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(names[ids[5] as usize], "[PAD]");
    assert_eq!(names[ids[6] as usize], "[PAD]");
    assert_ne!(
        names[ids[4] as usize], "[PAD]",
        "the short sentence's own [SEP]"
    );
}

#[test]
fn bad_text_is_refused_in_one_line_and_nothing_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let run = imported(tmp.path());
    let out = tmp.path().join("never");
    let refused = |args: &[&str], code: i32, expected: &str| {
        let output = inspect(&run, args, &out);
        let err = stderr(&output);
        assert_eq!(output.status.code(), Some(code), "{args:?}: {err}");
        assert!(err.contains(expected), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
        assert!(!out.exists(), "{args:?} wrote {}", out.display());
    };
    refused(&["--text", "  "], 1, "--text \"  \" has no word");
    refused(
        &["--text", "\u{feff}\u{200b}"],
        1,
        "--text \"\\u{feff}\\u{200b}\" has no word",
    );
    // 16 positions: [CLS], 15 words, [SEP] is one too many.
    let long = ["the dog"; 8].join(" ") + " runs";
    refused(&["--text", &long], 1, "the model has 16 positions");
    let bad = tmp.path().join("latin1.txt");
    std::fs::write(&bad, b"the caf\xe9 runs\n").unwrap();
    refused(
        &["--text-file", bad.to_str().unwrap()],
        1,
        "is not UTF-8 text (line 1, byte 7",
    );
    let conllu = tmp.path().join("x.conllu");
    refused(
        &[
            "--text",
            "the dog",
            "--probe-conllu",
            conllu.to_str().unwrap(),
        ],
        2,
        "cannot be used with",
    );
    refused(
        &["--text", "the dog", "--probe-task"],
        2,
        "cannot be used with",
    );

    // A model headlab trained reads its task's tokens.
    let trained = tmp.path().join("trained");
    common_train(&trained);
    // What a model reads is decided by its run's files: a tokenizer.json put into the run
    // makes it read word pieces, and one that is not its model's own is refused by name.
    let tokenizer = run.join("tokenizer.json");
    std::fs::copy(&tokenizer, trained.join("tokenizer.json")).unwrap();
    let output = inspect(&trained, &[], &out);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("but the model's embedding has 5 rows; the tokenizer must be"),
        "{}",
        stderr(&output)
    );
    std::fs::remove_file(trained.join("tokenizer.json")).unwrap();
    let output = inspect(&trained, &["--text", "the dog"], &out);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("--text needs a model that reads text"),
        "{}",
        stderr(&output)
    );
    assert!(!out.exists());
}

/// The tiny test config trained into `dir`.
fn common_train(dir: &Path) {
    let output = headlab::run(
        "train",
        &[
            Path::new(testkit::TINY_CONFIG),
            Path::new("--out"),
            dir,
            Path::new("--quiet"),
        ],
    );
    assert!(output.status.success(), "{}", stderr(&output));
}

/// Issue 66, item 2: readings side by side. Without --out, the run's own reading goes to
/// RUN/inspect and any other to a directory of its own named for it, so a --text reading
/// never replaces the treebank's; --out onto another reading's report is refused naming
/// --replace, which writes over it and leaves no file of the old reading behind.
#[test]
fn each_reading_keeps_its_own_report_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let run = imported(tmp.path());
    let quiet = |args: &[&str]| {
        let mut all: Vec<&Path> = vec![&run];
        all.extend(args.iter().map(Path::new));
        all.push(Path::new("--quiet"));
        headlab::run("inspect", &all)
    };
    let own = quiet(&[]);
    assert!(own.status.success(), "{}", stderr(&own));
    let treebank = run.join("inspect");
    let manifest = std::fs::read(treebank.join("manifest.json")).unwrap();
    assert!(treebank.join("relations.json").is_file());
    // Issue 66, item 6: the header says how many sentences relations were scored on, beside
    // the probe batch's sentences and their length, each where it applies; the terminal
    // says the same.
    let relations: inspect::measures::relations::Relations =
        ReportDir::new(&treebank).read_json().unwrap();
    let activations = std::fs::read(treebank.join("activations.safetensors")).unwrap();
    let activations = safetensors::SafeTensors::deserialize(&activations).unwrap();
    let tokens = activations.tensor("tokens").unwrap();
    let &[batch, seq] = tokens.shape() else {
        panic!("tokens is not [batch, seq]");
    };
    // The fixture's 16 positions hold few of the treebank's sentences: the cut is said.
    assert!(relations.too_long > 0, "no sentence over 16 positions");
    let said = format!(
        "probe batch {batch} sentences of {} words (the head table, the patterns and \
         explore.html), relations scored on {} sentences ({} arcs; {} more left out, over \
         the model's positions)",
        seq - 2,
        relations.sentences,
        relations.arcs,
        relations.too_long
    );
    let page = std::fs::read_to_string(treebank.join("index.html")).unwrap();
    assert!(page.contains(&said), "{said}");
    assert!(stdout(&own).contains(&said), "{}", stdout(&own));

    let typed = quiet(&["--text", "the dog sees the cat."]);
    assert!(typed.status.success(), "{}", stderr(&typed));
    let beside: Vec<PathBuf> = std::fs::read_dir(&run)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("inspect-text-")
        })
        .collect();
    assert_eq!(beside.len(), 1, "{beside:?}");
    let summary: Summary = ReportDir::new(&beside[0]).read_json().unwrap();
    assert_eq!(
        serde_json::to_value(&summary.probe).unwrap()["kind"],
        "typed_text"
    );
    assert_eq!(
        std::fs::read(treebank.join("manifest.json")).unwrap(),
        manifest
    );
    // The weight circuits depend on the weights alone: the second reading takes the first's,
    // says so, and writes the same numbers (its rollout is its own probe's).
    let note = stderr(&typed);
    assert!(
        note.contains("the weight circuits are") && note.contains("inspect'"),
        "{note}"
    );
    let circuits = |dir: &Path| {
        let mut circuits: inspect::circuits::Circuits = ReportDir::new(dir).read_json().unwrap();
        circuits.rollout.clear();
        circuits
    };
    assert_eq!(circuits(&beside[0]), circuits(&treebank));

    let conllu = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../data/ud-english-ewt/en_ewt-ud-dev.conllu");
    let dev = quiet(&[
        "--probe-conllu",
        conllu.to_str().unwrap(),
        "--relation-sentences",
        "8",
    ]);
    assert!(dev.status.success(), "{}", stderr(&dev));
    assert!(run.join("inspect-en_ewt-ud-dev/relations.json").is_file());

    // --out onto the treebank's report: refused, the report kept.
    let onto = [
        "--text",
        "the dog sees the cat.",
        "--out",
        treebank.to_str().unwrap(),
    ];
    let refused = quiet(&onto);
    let err = stderr(&refused);
    assert!(
        !refused.status.success() && err.contains("--replace"),
        "{err}"
    );
    assert!(err.contains("holds the report of another reading"), "{err}");
    assert_eq!(
        std::fs::read(treebank.join("manifest.json")).unwrap(),
        manifest
    );

    let mut replacing = onto.to_vec();
    replacing.push("--replace");
    let replaced = quiet(&replacing);
    assert!(replaced.status.success(), "{}", stderr(&replaced));
    assert!(
        !treebank.join("relations.json").exists(),
        "a file of the old reading stayed"
    );
    assert!(!treebank.join("relation-sentences.conllu").exists());
}
