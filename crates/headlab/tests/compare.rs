//! The `compare` binary on tiny trained runs: heads matched across seeds (a run matched to
//! itself keeps every head with similarity 1; another seed gets the best permutation), its
//! files (`compare.html` loaded in headless Chromium), and clear refusals for runs that
//! cannot be matched.

#[path = "../../report/tests/common/mod.rs"]
mod common;
#[path = "common/headlab.rs"]
mod headlab;

use std::path::Path;
use std::process::Output;

use common::{attribute, check_in_chromium, opening_tag};

const TINY: &str = testkit::TINY_CONFIG;

fn compare(args: &[&Path]) -> Output {
    headlab::run("compare", args)
}

fn compare_fails(args: &[&Path]) -> String {
    let output = compare(args);
    let err = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(!output.status.success(), "expected failure for {args:?}");
    assert!(!err.contains("panicked"), "{err}");
    err
}

#[test]
fn heads_are_matched_across_seeds() {
    let tmp = tempfile::tempdir().unwrap();
    let (seed_3, seed_4) = (tmp.path().join("seed-3"), tmp.path().join("seed-4"));
    common::train_run(Path::new(TINY), &[], &seed_3);
    common::train_run(Path::new(TINY), &["seed=4"], &seed_4);
    let out = tmp.path().join("compared");
    // The reference, another seed, and the reference again.
    let output = compare(&[&seed_3, &seed_4, &seed_3, Path::new("--out"), &out]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains("slot") && stdout.contains("L0H0") && stdout.contains("L0H1"),
        "{stdout}"
    );
    // Not a terminal: one line per stage on stderr, as it ends; none with --quiet.
    let stderr = String::from_utf8_lossy(&output.stderr);
    for stage in [
        "loading the runs",
        "matching the heads",
        "the page and figures",
    ] {
        assert!(stderr.contains(&format!("compare: {stage}, ")), "{stderr}");
    }
    let quiet_out = tmp.path().join("quiet");
    let quiet = compare(&[
        &seed_3,
        &seed_4,
        Path::new("--out"),
        &quiet_out,
        Path::new("--quiet"),
    ]);
    assert!(
        quiet.status.success() && quiet.stderr.is_empty(),
        "{quiet:?}"
    );

    // Two runs of one seed are told apart by their directories' names, not "seed 3" twice.
    let again = tmp.path().join("again");
    common::train_run(Path::new(TINY), &[], &again);
    let same_seed = tmp.path().join("same-seed");
    let output = compare(&[&seed_3, &again, Path::new("--out"), &same_seed]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8_lossy(&output.stdout);
    let header = text.lines().find(|l| l.starts_with("slot")).unwrap();
    assert!(
        header.contains("seed-3") && header.contains("again") && !header.contains("seed 3"),
        "{header}"
    );

    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("matching.json")).unwrap()).unwrap();
    let runs = json["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3);
    assert_eq!(runs[1]["seed"], 4);
    let layer = |run: usize| &runs[run]["layers"][0];
    let numbers =
        |value: &serde_json::Value| -> Vec<f64> { serde_json::from_value(value.clone()).unwrap() };
    let partners = |run: usize| -> Vec<usize> {
        serde_json::from_value(layer(run)["partner"].clone()).unwrap()
    };

    // A run matched to itself: identity, similarity 1.
    for run in [0, 2] {
        assert_eq!(partners(run), vec![0, 1]);
        for s in numbers(&layer(run)["similarity"]) {
            assert!((s - 1.0).abs() < 1e-9, "{s}");
        }
    }

    // Another seed: a permutation, at least as good as the other one, with the similarities
    // read from the matrix.
    let matrix: Vec<Vec<f64>> = serde_json::from_value(layer(1)["matrix"].clone()).unwrap();
    let partner = partners(1);
    let mut sorted = partner.clone();
    sorted.sort();
    assert_eq!(sorted, vec![0, 1]);
    let chosen: f64 = (0..2).map(|h| matrix[h][partner[h]]).sum();
    let other: f64 = (0..2).map(|h| matrix[h][1 - partner[h]]).sum();
    assert!(chosen >= other, "{matrix:?} {partner:?}");
    let similarity = numbers(&layer(1)["similarity"]);
    for h in 0..2 {
        assert_eq!(similarity[h], matrix[h][partner[h]]);
        assert!((0.0..=1.0).contains(&similarity[h]));
    }

    let slots = json["slots"].as_array().unwrap();
    assert_eq!(slots.len(), 2);
    for slot in slots {
        assert_eq!(slot["roles"].as_array().unwrap().len(), 3);
        // Reference and its copy agree, so the mean over the other runs is (s + 1) / 2.
        let h = slot["head"].as_u64().unwrap() as usize;
        let expected = (similarity[h] + 1.0) / 2.0;
        assert!((slot["mean_similarity"].as_f64().unwrap() - expected).abs() < 1e-9);
    }
    for count in json["runs_with_role"][0].as_object().unwrap().values() {
        assert!((1..=3).contains(&count.as_u64().unwrap()));
    }

    let figure = out.join("matched-attention.png");
    let decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(&figure).unwrap(),
    ));
    let info = decoder.read_info().unwrap().info().clone();
    // Two rows (reference heads), three columns (runs).
    assert!(info.width > info.height, "{}x{}", info.width, info.height);
    assert!(
        !out.join("matched-attention.svg").exists(),
        "SVG only with --svg"
    );
    let svg = compare(&[
        &seed_3,
        &seed_4,
        Path::new("--out"),
        &out,
        Path::new("--svg"),
    ]);
    assert!(
        svg.status.success(),
        "{}",
        String::from_utf8_lossy(&svg.stderr)
    );
    let text = std::fs::read_to_string(out.join("matched-attention.svg")).unwrap();
    assert!(
        text.starts_with("<svg") && text.contains("<rect"),
        "an SVG document"
    );

    // Without --svg again, the SVG the last comparison wrote goes (no stale figure)...
    let again = compare(&[&seed_3, &seed_4, Path::new("--out"), &out]);
    assert!(again.status.success());
    assert!(
        !out.join("matched-attention.svg").exists(),
        "stale SVG removed"
    );

    // ...but a directory compare did not write is the user's: refused before the runs are
    // read, every file in it as it was, nothing added.
    let users = tmp.path().join("users-own-dir");
    std::fs::create_dir(&users).unwrap();
    for name in ["matched-attention.svg", "compare.html", "matching.json"] {
        std::fs::write(users.join(name), "mine").unwrap();
    }
    let into_users = compare(&[&seed_3, &seed_4, Path::new("--out"), &users]);
    assert_eq!(into_users.status.code(), Some(1));
    let err = String::from_utf8_lossy(&into_users.stderr);
    assert!(
        err.contains("is not empty and holds no headlab comparison (it holds \"compare.html\")"),
        "{err}"
    );
    let mut left: Vec<_> = std::fs::read_dir(&users)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(
        left,
        ["compare.html", "matched-attention.svg", "matching.json"]
    );
    for name in left {
        assert_eq!(std::fs::read_to_string(users.join(name)).unwrap(), "mine");
    }
    // A report directory is no place for a comparison either.
    let report = tmp.path().join("report");
    let inspected = headlab::run("inspect", &[seed_3.as_path(), Path::new("--out"), &report]);
    assert!(inspected.status.success());
    let into_report = compare(&[&seed_3, &seed_4, Path::new("--out"), &report]);
    assert!(
        String::from_utf8_lossy(&into_report.stderr)
            .contains("holds a headlab report, not a comparison"),
        "{}",
        String::from_utf8_lossy(&into_report.stderr)
    );
}

#[test]
fn runs_that_cannot_be_matched_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let reference = tmp.path().join("reference");
    common::train_run(Path::new(TINY), &["train.steps=5"], &reference);

    let longer = tmp.path().join("longer");
    common::train_run(
        Path::new(TINY),
        &["train.steps=5", "task.seq_len=7"],
        &longer,
    );
    let err = compare_fails(&[&reference, &longer]);
    let (reference_name, longer_name) = (reference.display(), longer.display());
    assert!(
        err.contains(&format!(
            "the tasks differ: {reference_name} is reverse (seq_len = 6), {longer_name} is \
             reverse (seq_len = 7)"
        )),
        "{err}"
    );

    // Another kind of task: said in words (kind and keys), not as Rust debug text.
    let copy = tmp.path().join("copy");
    common::train_run(Path::new(TINY), &["train.steps=5", "task.kind=copy"], &copy);
    let err = compare_fails(&[&reference, &copy]);
    assert!(
        err.contains(&format!(
            "{reference_name} is reverse (seq_len = 6, vocab_size = 5), {} is copy (seq_len = \
             6, vocab_size = 5)",
            copy.display()
        )),
        "{err}"
    );
    assert!(
        !err.contains("SequenceSpec") && !err.contains("Copy("),
        "{err}"
    );

    let wider = tmp.path().join("four-heads");
    common::train_run(
        Path::new(TINY),
        &["train.steps=5", "model.n_heads=4"],
        &wider,
    );
    let err = compare_fails(&[&reference, &wider]);
    assert!(
        err.contains(&format!(
            "the model shapes differ: {reference_name} has 1 layer x 2 heads, {} has 1 layer x \
             4 heads",
            wider.display()
        )),
        "{err}"
    );

    let err = compare_fails(&[&reference, &tmp.path().join("nope")]);
    assert!(
        err.contains("nope does not exist: give the run directory train wrote"),
        "{err}"
    );

    // One run is nothing to compare: a usage error.
    let output = compare(&[&reference]);
    let err = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{err}");
    assert!(err.contains("required"), "{err}");
}

#[test]
fn an_unfinished_run_gets_advice_that_compare_can_follow() {
    let tmp = tempfile::tempdir().unwrap();
    let reference = tmp.path().join("reference");
    common::train_run(Path::new(TINY), &["train.steps=10"], &reference);
    let unfinished = tmp.path().join("unfinished");
    common::train_run(Path::new(TINY), &["train.steps=10"], &unfinished);
    std::fs::remove_file(unfinished.join("model.safetensors")).unwrap();

    let err = compare_fails(&[&reference, &unfinished]);
    assert!(err.starts_with("error: "), "{err}");
    assert!(
        err.contains(&format!(
            "{} has not finished training",
            unfinished.display()
        )) && err.contains(&format!(
            "`headlab train {} --resume`",
            unfinished.display()
        )) && err.contains(&format!(
            "`headlab inspect {} --checkpoint step-N` (available: step-10)",
            unfinished.display()
        )),
        "{err}"
    );
    // inspect's advice, which names a flag compare does not have.
    assert!(
        !err.contains("inspect a checkpoint with --checkpoint"),
        "{err}"
    );
}

#[test]
fn probe_sizes_are_checked_before_anything_is_allocated() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run");
    common::train_run(Path::new(TINY), &["train.steps=5"], &run);
    let probe = |size: &str| {
        let output = compare(&[&run, &run, Path::new("--probe"), Path::new(size)]);
        let err = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(
            !err.contains("panicked") && !err.contains("backtrace"),
            "{err}"
        );
        (output.status.code(), err)
    };

    for size in ["-1", "0"] {
        let (code, err) = probe(size);
        assert_eq!(code, Some(2), "--probe {size}: {err}");
        assert!(
            err.contains("'--probe <PROBE>'") && err.contains("at least 1"),
            "--probe {size}: {err}"
        );
    }

    // Both runs' activations are kept together, so the limit is half a single run's.
    let config = run::RunConfig::load(Path::new(TINY), &[]).unwrap();
    let max = inspect::load::probe::Probe::max_size(&config.resolve(Path::new(TINY)).unwrap(), 2);
    let (code, err) = probe("100000000");
    assert_eq!(code, Some(1), "{err}");
    assert!(
        // After the progress line of the stage that loaded the runs.
        err.lines()
            .any(|line| line.starts_with("error: --probe 100000000 is too large for these 2 runs"))
            && err.contains(&format!("the largest accepted is --probe {max}")),
        "{err}"
    );
    assert!(!run.join("compare").exists(), "nothing written");
}

/// The JSON embedded in a page's `<script id="data">`.
fn embedded_data(html: &str) -> serde_json::Value {
    let start = html.find("id=\"data\">").unwrap() + "id=\"data\">".len();
    let end = start + html[start..].find("</script>").unwrap();
    serde_json::from_str(&html[start..end]).unwrap()
}

/// `compare.html` of two tiny runs (1 layer x 2 heads, sequences of 6, probe of 64): its
/// data follows `matching.json`, it loads in Chromium with every view drawn, and
/// `window.headlabCompare` drives the views as the mouse does.
#[test]
fn compare_writes_a_page_that_loads_in_chromium() {
    let tmp = tempfile::tempdir().unwrap();
    let (seed_3, seed_4) = (tmp.path().join("seed-3"), tmp.path().join("seed-4"));
    common::train_run(Path::new(TINY), &[], &seed_3);
    common::train_run(Path::new(TINY), &["seed=4"], &seed_4);
    let out = tmp.path().join("compared");
    let output = compare(&[&seed_3, &seed_4, Path::new("--out"), &out]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let page = out.join("compare.html");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains(&format!("wrote {}", page.display())),
        "{stdout}"
    );

    let html = std::fs::read_to_string(&page).unwrap();
    assert!(!html.contains("http://") && !html.contains("https://") && !html.contains(" src="));
    let data = embedded_data(&html);
    let matching: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("matching.json")).unwrap()).unwrap();
    assert_eq!(
        (data["n_layers"].as_u64(), data["n_heads"].as_u64()),
        (Some(1), Some(2))
    );
    let runs = data["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!(
        (runs[0]["name"].as_str(), runs[1]["seed"].as_u64()),
        (Some("seed-3"), Some(4))
    );
    assert_eq!(
        runs[1]["eval_token_acc"],
        matching["runs"][1]["eval_token_acc"]
    );
    let measures = data["measures"].as_array().unwrap();
    assert!(
        measures.iter().any(|m| m == "pattern_scores.anti_diagonal"),
        "{measures:?}"
    );
    for slot in 0..2 {
        let page_slot = &data["layers"][0][slot];
        for run in 0..2 {
            let matched = &page_slot["matched"][run];
            let layer = &matching["runs"][run]["layers"][0];
            assert_eq!(matched["head"], layer["partner"][slot]);
            assert_eq!(matched["similarity"], layer["similarity"][slot]);
            assert_eq!(matched["role"], matching["runs"][run]["roles"][0][slot]);
            assert_eq!(
                matched["measures"].as_array().unwrap().len(),
                measures.len()
            );
        }
        assert_eq!(
            page_slot["similarity_between"][1][0],
            matching["runs"][1]["layers"][0]["similarity"][slot]
        );
    }
    let sequences = data["sequences"].as_array().unwrap();
    assert_eq!(sequences.len(), 8, "the first 8 of 64");
    assert_eq!(sequences[0]["tokens"].as_array().unwrap().len(), 6);
    assert_eq!(
        sequences[0]["patterns"][0][1][1].as_array().unwrap().len(),
        36
    );

    let Some(dom) = check_in_chromium(&page, "data-ready=\"ok\"") else {
        return;
    };
    // Two slots x two runs in the grid; slot 0 in the slot view; A = the reference, B = the
    // other run; no diff picked yet.
    assert_eq!(dom.matches("class=\"cell\"").count(), 4, "{dom}");
    assert!(
        dom.contains("class=\"cell\" data-layer=\"0\" data-slot=\"1\" data-run=\"1\""),
        "{dom}"
    );
    let slot_view = opening_tag(&dom, "<div id=\"slot-view\"");
    for expected in ["data-slot=\"0\"", "data-runs=\"2\"", "data-hover=\"none\""] {
        assert!(slot_view.contains(expected), "{slot_view}");
    }
    let table = opening_tag(&dom, "<table id=\"diff-table\"");
    for expected in ["data-a=\"0\"", "data-b=\"1\"", "data-rows=\"2\""] {
        assert!(table.contains(expected), "{table}");
    }
    assert!(opening_tag(&dom, "<canvas id=\"diff-canvas\"").contains("data-slot=\"none\""));

    // Driven through the test hooks: slot 1 on sequence 2, query 4 hovered, the runs
    // swapped, slot 1's diff drawn, and a slot that does not exist refused.
    let drive = "<script>(function () {\
        var c = window.headlabCompare;\
        c.select(0, 1, 2); c.hover(4); c.pair(1, 0); c.diff(0, 1);\
        var refused = 'no'; try { c.select(0, 7); } catch (e) { refused = e.message; }\
        var get = function (id, name) { return document.getElementById(id).getAttribute(name); };\
        document.body.setAttribute('data-driven', [get('slot-view', 'data-slot'),\
          get('slot-view', 'data-sequence'), get('slot-view', 'data-hover'),\
          get('slot-view', 'data-runs'), get('diff-table', 'data-a'),\
          get('diff-table', 'data-b'), get('diff-canvas', 'data-layer'),\
          get('diff-canvas', 'data-slot'), refused].join(';'));\
        })();</script></body>";
    let driven_page = out.join("driven.html");
    std::fs::write(&driven_page, html.replace("</body>", drive)).unwrap();
    let dom = check_in_chromium(&driven_page, "data-ready=\"ok\"").unwrap();
    let body = opening_tag(&dom, "<body");
    let driven = attribute(body, "data-driven"); // set by the driving script
    assert_eq!(driven, "1;2;4;2;1;0;0;1;no slot 7");
}

/// `--across-layers`: runs of one grid matched over the whole model, one to one, on the same
/// probe as layer by layer, so its best assignment can only do as well or better.
#[test]
fn seeds_are_matched_across_layers_on_request() {
    let tmp = tempfile::tempdir().unwrap();
    let (seed_3, seed_4) = (tmp.path().join("seed-3"), tmp.path().join("seed-4"));
    common::train_run(Path::new(TINY), &["model.n_layers=2"], &seed_3);
    common::train_run(Path::new(TINY), &["model.n_layers=2", "seed=4"], &seed_4);
    let matched = |out: &Path, flags: &[&str]| -> (serde_json::Value, String) {
        let mut args = vec![seed_3.as_path(), seed_4.as_path(), Path::new("--out"), out];
        args.extend(flags.iter().map(Path::new));
        let output = compare(&args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{stderr}");
        let json = std::fs::read(out.join("matching.json")).unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        (serde_json::from_slice(&json).unwrap(), stdout)
    };
    let (by_layer, by_layer_table) = matched(&tmp.path().join("by-layer"), &["--quiet"]);
    let across_out = tmp.path().join("across");
    let (across, across_table) = matched(&across_out, &["--across-layers", "--quiet"]);
    assert_eq!(by_layer["across_layers"], false);
    assert_eq!(across["across_layers"], true);
    assert!(!by_layer_table.contains("matched across layers"));
    assert!(
        across_table.contains("matched across layers: a slot's matched head may sit"),
        "{across_table}"
    );
    let page = std::fs::read_to_string(across_out.join("compare.html")).unwrap();
    assert!(
        page.contains(
            "each of the first run's heads matched to the most similar head of any layer"
        )
    );

    let numbers =
        |value: &serde_json::Value| -> Vec<f64> { serde_json::from_value(value.clone()).unwrap() };
    let indices = |value: &serde_json::Value| -> Vec<usize> {
        serde_json::from_value(value.clone()).unwrap()
    };
    // The reference matched to itself across layers: every head similarity 1.
    for layer in across["runs"][0]["layers"].as_array().unwrap() {
        for s in numbers(&layer["similarity"]) {
            assert!((s - 1.0).abs() < 1e-9, "{layer}");
        }
    }
    let (mut summed_by_layer, mut summed_across) = (0.0, 0.0);
    let mut partners = std::collections::BTreeSet::new();
    for l in 0..2 {
        let own = &by_layer["runs"][1]["layers"][l];
        let other = &across["runs"][1]["layers"][l];
        // One probe: the layer's own block of the whole-model matrix is the by-layer matrix.
        let (own_matrix, matrix): (Vec<Vec<f64>>, Vec<Vec<f64>>) = (
            serde_json::from_value(own["matrix"].clone()).unwrap(),
            serde_json::from_value(other["matrix"].clone()).unwrap(),
        );
        for h in 0..2 {
            assert_eq!(matrix[h].len(), 4, "every head of the other run");
            for b in 0..2 {
                assert!((matrix[h][l * 2 + b] - own_matrix[h][b]).abs() < 1e-9);
            }
        }
        let own_layers = indices(&own["partner_layer"]);
        assert!(own_layers.iter().all(|&p| p == l), "{own}");
        let (heads, layers) = (indices(&other["partner"]), indices(&other["partner_layer"]));
        let similarity = numbers(&other["similarity"]);
        for h in 0..2 {
            let column = layers[h] * 2 + heads[h];
            assert_eq!(similarity[h], matrix[h][column]);
            partners.insert(column);
        }
        summed_by_layer += numbers(&own["similarity"]).iter().sum::<f64>();
        summed_across += similarity.iter().sum::<f64>();
    }
    assert_eq!(partners.len(), 4, "one to one over the whole model");
    assert!(
        summed_across >= summed_by_layer - 1e-9,
        "{summed_across} < {summed_by_layer}"
    );
}
