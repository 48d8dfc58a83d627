//! `headlab inspect RUN --pairs FILE` as a user runs it (issue 66, item 3): minimal pairs of
//! one's own, patched on an imported masked LM, their logit differences equal to a direct
//! forward pass; the report in a directory of its own that names the file; every bad input
//! refused in one line with nothing written.

#[path = "common/headlab.rs"]
mod headlab;

use std::path::{Path, PathBuf};
use std::process::Output;

use hf::tokenizer::WordPieces;
use inspect::interventions::patching::Patching;
use report::dir::ReportDir;
use tasks::Example;
use tasks::batch::Batch;

/// The three-layer masked-LM fixture (16 positions, the grammar's words) imported into
/// `parent/<name>`, or the one-layer base model when `base`.
fn imported(parent: &Path, base: bool) -> PathBuf {
    let fixture = match base {
        true => "one-layer",
        false => "three-layers-mlm",
    };
    let checkpoint = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../model/tests/fixtures/bert")
        .join(fixture);
    let run = parent.join(fixture);
    let output = headlab::run("import", &[&checkpoint, Path::new("--out"), &run]);
    assert!(output.status.success(), "{}", stderr(&output));
    run
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// `inspect RUN ARGS... --quiet`.
fn inspect(run: &Path, args: &[&str]) -> Output {
    let mut all: Vec<&str> = vec![run.to_str().unwrap()];
    all.extend(args);
    all.push("--quiet");
    headlab::run("inspect", &all)
}

/// Three agreement pairs, of three lengths, the verb masked.
const PAIRS: &str = "# clean\tcorrupted\tclean answer\tcorrupted answer\n\
    the dog near the cats [MASK] .\tthe dogs near the cats [MASK] .\truns\trun\n\
    \n\
    the cat [MASK] .\tthe cats [MASK] .\tsleeps\tsleep\n\
    the child who the horse sees [MASK] the dog .\tthe children who the horse sees [MASK] the dog .\tchases\tchase\n";

/// Mean over the pairs of `logit[clean answer] - logit[corrupted answer]` at the mask, each
/// sentence run alone (no padding), read by the tokenizer here, not by headlab's reading.
fn direct_logit_diffs(run: &Path, written: &[[&str; 4]]) -> (f64, f64) {
    let loaded = inspect::load::loaded_run::load(run, None).unwrap();
    let tokenizer = WordPieces::read(&run.join("tokenizer.json")).unwrap();
    let mask = tokenizer.id("[MASK]").unwrap();
    let logit_diff = |sentence: &str, answers: (&str, &str)| -> f64 {
        let ids = tokenizer.encode_text(sentence).unwrap().ids;
        let at = ids.iter().position(|&id| id == mask).unwrap();
        let example = Example {
            target: vec![None; ids.len()],
            input: ids,
        };
        let batch = Batch::new(&[example], &loaded.device);
        let logits = loaded.model.forward_input(batch.encoder_input()); // [1, seq, vocab]
        let [_, _, vocab] = logits.dims();
        let row: Vec<f32> = logits
            .narrow(1, at, 1)
            .reshape([vocab])
            .into_data()
            .try_to_vec::<f32>()
            .unwrap();
        let logit = |word: &str| row[tokenizer.id(word).unwrap() as usize] as f64;
        logit(answers.0) - logit(answers.1)
    };
    let n = written.len() as f64;
    let clean: f64 = written
        .iter()
        .map(|[c, _, a, b]| logit_diff(c, (a, b)))
        .sum();
    let corrupted: f64 = written
        .iter()
        .map(|[_, c, a, b]| logit_diff(c, (a, b)))
        .sum();
    (clean / n, corrupted / n)
}

#[test]
fn own_pairs_are_patched_and_their_logit_differences_are_the_models() {
    let tmp = tempfile::tempdir().unwrap();
    let run = imported(tmp.path(), false);
    let file = tmp.path().join("agreement.tsv");
    std::fs::write(&file, PAIRS).unwrap();
    let output = inspect(&run, &["--pairs", file.to_str().unwrap()]);
    assert!(output.status.success(), "{}", stderr(&output));

    // A reading of its own, named for the file; the run's own report is not touched.
    let out = run.join("inspect-pairs-agreement");
    assert!(!run.join("inspect").exists());
    let dir = ReportDir::new(&out);
    let patching: Patching = dir.read_json().unwrap();
    let own = patching.own.as_ref().expect("an own section");
    assert!(
        patching.answer.is_some(),
        "the task's pairs are patched too"
    );
    let written = own.written.as_ref().unwrap();
    assert_eq!(
        written.file,
        std::path::absolute(&file).unwrap().display().to_string()
    );
    let lines: Vec<usize> = written.pairs.iter().map(|p| p.line).collect();
    assert_eq!(lines, [2, 4, 5]);
    assert_eq!(own.pairs, 3);
    assert_eq!(own.inputs.len(), 3);
    let lengths: Vec<usize> = own.inputs.iter().map(|p| p.clean.len()).collect();
    assert_eq!(lengths, [9, 6, 12], "[CLS] and [SEP] around the words");

    let sentences = [
        [
            "the dog near the cats [MASK] .",
            "the dogs near the cats [MASK] .",
            "runs",
            "run",
        ],
        ["the cat [MASK] .", "the cats [MASK] .", "sleeps", "sleep"],
        [
            "the child who the horse sees [MASK] the dog .",
            "the children who the horse sees [MASK] the dog .",
            "chases",
            "chase",
        ],
    ];
    let (clean, corrupted) = direct_logit_diffs(&run, &sentences);
    assert!(
        (own.clean_logit_diff - clean).abs() < 1e-4,
        "{} against {clean}",
        own.clean_logit_diff
    );
    assert!(
        (own.corrupted_logit_diff - corrupted).abs() < 1e-4,
        "{} against {corrupted}",
        own.corrupted_logit_diff
    );
    // Every head patched, ablated and attributed; layer-to-layer paths for an imported model.
    assert_eq!(own.heads.len(), 9);
    assert!(own.heads.iter().all(|h| h.restored.is_some()
        && h.mean_ablation_lost.is_some()
        && h.attribution.is_some()));
    assert!(!own.layer_paths.is_empty());
    // The residual stream at the input of each block and at the last block's output.
    assert_eq!(own.residual.len(), 4);

    // The provenance names the file; a reading without the pairs into the same directory
    // is another reading, refused.
    let provenance = std::fs::read_to_string(out.join("provenance.json")).unwrap();
    assert!(provenance.contains("\"pairs\""), "{provenance}");
    let output = inspect(&run, &["--out", out.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("with the pairs of"),
        "{}",
        stderr(&output)
    );
    // The page lists the pairs.
    let page = std::fs::read_to_string(out.join("explore.html")).unwrap();
    assert!(page.contains("the dogs near the cats [MASK] ."));
}

#[test]
fn pairs_are_refused_where_they_cannot_be_patched_and_nothing_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let mlm = imported(tmp.path(), false);
    let base = imported(tmp.path(), true);
    let file = tmp.path().join("agreement.tsv");
    std::fs::write(&file, PAIRS).unwrap();
    let bad = tmp.path().join("bad.tsv");
    std::fs::write(
        &bad,
        "the dog [MASK] .\tthe dogs [MASK] .\truns\trun\nthe dog [MASK] .\tthe farmer [MASK] .\truns\trun\n",
    )
    .unwrap();
    let out = tmp.path().join("never");
    let refused = |run: &Path, args: &[&str], code: i32, expected: &str| {
        let mut args = args.to_vec();
        args.extend(["--out", out.to_str().unwrap()]);
        let output = inspect(run, &args);
        let err = stderr(&output);
        assert_eq!(output.status.code(), Some(code), "{args:?}: {err}");
        assert!(err.contains(expected), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
        assert!(!out.exists(), "{args:?} wrote {}", out.display());
    };
    let file = file.to_str().unwrap();
    refused(
        &base,
        &["--pairs", file],
        1,
        "is a base model (BertModel, RobertaModel, ...), which has no prediction head",
    );
    refused(
        &mlm,
        &["--pairs", bad.to_str().unwrap()],
        1,
        "bad.tsv line 2: the sentences do not line up in pieces (clean: [CLS] the dog [MASK] . \
         [SEP]; corrupted: [CLS] the farm ##er [MASK] . [SEP])",
    );
    refused(
        &mlm,
        &["--pairs", tmp.path().join("missing.tsv").to_str().unwrap()],
        1,
        "missing.tsv",
    );
    refused(
        &mlm,
        &["--pairs", file, "--no-patching"],
        2,
        "cannot be used with",
    );
    // A model headlab trained on a toy task reads its task's tokens.
    let trained = tmp.path().join("trained");
    let output = headlab::run(
        "train",
        &[
            testkit::TINY_CONFIG,
            "--out",
            trained.to_str().unwrap(),
            "--quiet",
        ],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    refused(
        &trained,
        &["--pairs", file],
        1,
        "reads its task's own tokens, and its task's pairs are patched already",
    );
}
