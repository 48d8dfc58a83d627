//! The `inspect` binary on real (tiny) trained runs: every report file, patterns that can
//! be recomputed from the dumped weights and activations, and clear errors for runs that
//! cannot be inspected.

#[path = "../../report/tests/common/mod.rs"]
mod common;
#[path = "common/headlab.rs"]
mod headlab;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::{attribute, check_in_chromium, opening_tag};
use inspect::load::probe::Probe;
use run::RunConfig;
use run::tensor_file::read_tensors;

const TINY: &str = testkit::TINY_CONFIG;

/// Trains the tiny config (with `overrides`) into `dir` through the library.
fn train_tiny(dir: &Path, overrides: &[&str]) {
    common::train_run(Path::new(TINY), overrides, dir);
}

fn inspect(args: &[&str]) -> Output {
    headlab::run("inspect", args)
}

fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn matrix(value: &serde_json::Value) -> Vec<Vec<f64>> {
    serde_json::from_value(value.clone()).unwrap()
}

/// `explore.html` of the tiny run (probe of 8, one layer of two heads, sequences of 6):
/// its embedded data, then the page in Chromium, drawn without errors.
fn check_explore(page: &Path) {
    let html = std::fs::read_to_string(page).unwrap();
    assert!(!html.contains("http://") && !html.contains("https://") && !html.contains(" src="));
    let start = html.find("id=\"data\">").unwrap() + "id=\"data\">".len();
    let end = start + html[start..].find("</script>").unwrap();
    let data: serde_json::Value = serde_json::from_str(&html[start..end]).unwrap();
    assert_eq!(
        (data["n_layers"].as_u64(), data["n_heads"].as_u64()),
        (Some(1), Some(2))
    );
    let sequences = data["sequences"].as_array().unwrap();
    assert_eq!(sequences.len(), 8);
    let pattern = sequences[0]["patterns"][0][1].as_array().unwrap();
    assert_eq!(pattern.len(), 36, "6 x 6 in thousandths");
    for row in pattern.chunks(6) {
        let sum: u64 = row.iter().map(|v| v.as_u64().unwrap()).sum();
        assert!(
            sum.abs_diff(1000) <= 6,
            "a row sums to 1 up to rounding: {sum}"
        );
    }
    assert_eq!(data["heads"].as_array().unwrap().len(), 2);
    assert_eq!(data["qk"][0][1]["queries"].as_array().unwrap().len(), 48);
    assert_eq!(data["qk"][0][1]["keys"].as_array().unwrap().len(), 48);
    // The patching view's data is `patching.json` itself.
    let patching = read_json(&page.with_file_name("patching.json"));
    assert_eq!(data["patching"], patching);
    assert!(
        data["patching"]["route"].is_null(),
        "reverse has no route pairs"
    );
    if let Some(dom) = check_in_chromium(page, "data-ready=\"ok\"") {
        // The first views: layer 0, head 0 selected, lines drawn, every thumbnail there.
        assert!(dom.contains("data-heads=\"0\""), "{dom}");
        assert!(dom.contains("data-hover=\"none\""));
        assert!(
            !dom.contains("data-lines=\"0\""),
            "the head view drew lines"
        );
        assert!(dom.contains("data-points=\"96\""), "48 queries and 48 keys");
        assert!(dom.contains("id=\"thumb-0-1\""));
        // The patching view: answer pairs, two residual places and two heads by six
        // positions and "all" (the residual rows have no "all" cell).
        let canvas = opening_tag(&dom, "<canvas id=\"patching-canvas\"");
        assert_eq!(attribute(canvas, "data-kind"), "answer", "{canvas}");
        assert_eq!(attribute(canvas, "data-rows"), "4", "{canvas}");
        assert_eq!(attribute(canvas, "data-cols"), "7", "{canvas}");
        assert_eq!(attribute(canvas, "data-cells"), "26", "{canvas}");
        assert!(
            dom.contains("answer pairs; logit difference clean"),
            "{dom}"
        );
    }
}

/// `headlab inspect ARGS`, which must fail: its stderr, one `error:` line last, after the
/// progress lines of the stages it finished (stderr is no terminal here).
fn inspect_fails(args: &[&str]) -> String {
    let output = inspect(args);
    let err = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(!output.status.success(), "expected failure for {args:?}");
    assert!(!err.contains("panicked"), "{err}");
    let mut lines = err.lines().rev();
    assert!(
        lines.next().is_some_and(|last| last.starts_with("error: ")),
        "{err}"
    );
    assert!(lines.all(|line| line.starts_with("inspect: ")), "{err}");
    err
}

/// Checks one file of the report directory it is given.
type CheckFile = fn(&Path);

/// The report's data files, each with what it must hold for the tiny run (one layer of two
/// heads, d_model 16, d_head 8, a probe of 8 sequences of 6, snapshots every 5 of 20 steps).
const REPORT_FILES: &[(&str, CheckFile)] = &[
    ("heads.json", check_heads),
    ("circuits.json", check_circuits),
    ("weights.safetensors", check_weights),
    ("activations.safetensors", check_activations),
    ("similarity.json", check_similarity),
    ("divergence.csv", check_divergence),
    ("pruning.json", check_pruning),
    ("provenance.json", check_provenance),
];

/// The figures, each as `figures/NAME.png` (and `.svg` with `--svg`).
const FIGURES: &[&str] = &[
    "attention",
    "rollout",
    "similarity",
    "divergence",
    "circuits",
    "norms",
    "ablation",
    "patching",
    "pruning",
    "trajectories",
    "training",
];

fn heads_of(report: &Path) -> Vec<serde_json::Value> {
    serde_json::from_slice(&std::fs::read(report.join("heads.json")).unwrap()).unwrap()
}

fn check_heads(report: &Path) {
    let heads = heads_of(report);
    assert_eq!(heads.len(), 2, "one layer of two heads");
    for key in [
        "layer",
        "head",
        "entropy",
        "confidence",
        "mean_distance",
        "pattern_scores",
        "ablation_drop",
        "role",
        "copying_score",
        "full_copying_score",
        "qk_effective_rank",
        "ov_effective_rank",
    ] {
        assert!(heads[1].get(key).is_some(), "{key} missing");
    }
    let scores = &heads[0]["pattern_scores"];
    for pattern in [
        "previous_token",
        "next_token",
        "self",
        "anti_diagonal",
        "same_token",
    ] {
        let score = scores[pattern].as_f64().unwrap();
        assert!((0.0..=1.0 + 1e-9).contains(&score), "{pattern}: {score}");
    }
    // Issue 66, item 5: every head says what takes most of its attention, offsets and
    // tokens, largest share first; a mixed head's is on the page.
    let page = std::fs::read_to_string(report.join("index.html")).unwrap();
    for head in &heads {
        let targets = &head["attends_to"];
        for kind in ["offsets", "tokens"] {
            let shares: Vec<f64> = (targets[kind].as_array().unwrap().iter())
                .map(|t| t["share"].as_f64().unwrap())
                .collect();
            assert!(!shares.is_empty() && shares.len() <= 3, "{targets}");
            assert!(shares.windows(2).all(|w| w[0] >= w[1]), "{targets}");
            assert!(shares.iter().sum::<f64>() <= 1.0 + 1e-6, "{targets}");
        }
        if head["role"] == "mixed" {
            let offset = targets["offsets"][0]["offset"].as_i64().unwrap();
            let shown = match offset {
                0 => "attends to offset 0 ".to_string(),
                offset => format!("attends to offset {offset:+} "),
            };
            assert!(
                page.contains(&shown),
                "a mixed head's targets are not on the page"
            );
        }
    }
}

/// One layer: nothing composes; reverse maps 5 tokens to 5 classes, so the full circuit is
/// scored; no rank above d_head.
fn check_circuits(report: &Path) {
    let circuits = read_json(&report.join("circuits.json"));
    assert_eq!(circuits["composition"].as_array().unwrap().len(), 0);
    for head in circuits["heads"].as_array().unwrap() {
        let copying = head["full_copying_score"].as_f64().unwrap();
        assert!((-1.0 - 1e-9..=1.0 + 1e-9).contains(&copying), "{head}");
        let rank = head["ov_effective_rank"].as_f64().unwrap();
        assert!(rank > 0.0 && rank <= 8.0 + 1e-9, "{head}");
    }
}

/// The report names the run's files it measured with the hashes of their bytes (the final
/// weights, the config, every snapshot; not the metrics, whose timings differ between equal
/// runs) and the options it was measured with.
fn check_provenance(report: &Path) {
    let provenance = read_json(&report.join("provenance.json"));
    let run = report.parent().unwrap();
    assert_eq!(provenance["weights"], "model.safetensors");
    let inputs = provenance["inputs"].as_object().unwrap();
    for file in [
        "model.safetensors",
        "config.toml",
        "snapshots/step-20.safetensors",
    ] {
        let bytes = std::fs::read(run.join(file)).unwrap();
        assert_eq!(
            inputs[file]["sha256"],
            run::hash::sha256_hex(&bytes).as_str(),
            "{file}"
        );
        assert_eq!(inputs[file]["bytes"], bytes.len(), "{file}");
    }
    assert!(!inputs.contains_key("metrics.jsonl") && !inputs.contains_key("run.json"));
    let with = &provenance["measured_with"];
    assert_eq!(with["probe_size"], 8);
    assert_eq!(with["backend"], "flex");
    assert_eq!(with["probe"]["kind"], "task");
    assert_eq!(with["patching"], true);
}

fn check_weights(report: &Path) {
    let weights = read_tensors(&report.join("weights.safetensors")).unwrap();
    assert_eq!(weights["layers.0.heads.1.qk"].shape, [16, 16]);
    assert_eq!(weights["layers.0.heads.1.ov"].shape, [16, 16]);
    assert_eq!(weights["layers.0.heads.0.v_bias"].shape, [8]);
}

fn check_activations(report: &Path) {
    let activations = read_tensors(&report.join("activations.safetensors")).unwrap();
    assert_eq!(activations["tokens"].shape, [8, 6]);
    assert_eq!(activations["layers.0.pattern"].shape, [8, 2, 6, 6]);
    assert_eq!(activations["layers.0.head_out"].shape, [8, 6, 2, 8]);
    assert_eq!(activations["layers.0.attn_input"].shape, [8, 6, 16]);
    // Issue 66, item 4: token ids are whole numbers (I64), their names in the same file.
    let bytes = std::fs::read(report.join("activations.safetensors")).unwrap();
    let file = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    assert_eq!(
        file.tensor("tokens").unwrap().dtype(),
        safetensors::Dtype::I64
    );
    let (_, header) = safetensors::SafeTensors::read_metadata(&bytes).unwrap();
    let names: Vec<String> =
        serde_json::from_str(&header.metadata().as_ref().unwrap()["token_names"]).unwrap();
    let ids = &activations["tokens"].values;
    assert!(
        ids.iter()
            .all(|&id| id >= 0.0 && (id as usize) < names.len()),
        "{names:?}"
    );
}

/// Every similarity matrix is 2 x 2, symmetric, with a head's similarity to itself on the
/// diagonal.
fn check_similarity(report: &Path) {
    let similarity = read_json(&report.join("similarity.json"));
    let layer = &similarity["layers"][0];
    for (measure, same) in [
        ("qk_cosine", 1.0),
        ("ov_cosine", 1.0),
        ("pattern_js", 0.0),
        ("output_cka", 1.0),
    ] {
        let matrix = matrix(&layer[measure]);
        assert_eq!(matrix.len(), 2, "{measure}");
        for (h, row) in matrix.iter().enumerate() {
            assert!((row[h] - same).abs() < 1e-6, "{measure}[{h}][{h}]");
        }
        assert_eq!(matrix[0][1], matrix[1][0], "{measure} is symmetric");
    }
}

/// Snapshots every 5 steps of 20, one layer: a row each for steps 0, 5, 10, 15, 20.
fn check_divergence(report: &Path) {
    let csv = std::fs::read_to_string(report.join("divergence.csv")).unwrap();
    let rows: Vec<&str> = csv.lines().collect();
    assert_eq!(rows[0], "step,layer,qk_cosine,ov_cosine,pattern_js");
    let steps: Vec<&str> = rows[1..]
        .iter()
        .map(|r| r.split(',').next().unwrap())
        .collect();
    assert_eq!(steps, ["0", "5", "10", "15", "20"]);
}

/// Greedy pruning's first step removes the head whose single ablation costs least, so its
/// accuracy is the best of heads.json's single-head results; the summary agrees.
fn check_pruning(report: &Path) {
    let heads = heads_of(report);
    let pruning = read_json(&report.join("pruning.json"));
    let base = pruning["base_token_acc"].as_f64().unwrap();
    let tolerance = pruning["tolerance"].as_f64().unwrap();
    assert_eq!(tolerance, 0.01);
    let best_single = heads
        .iter()
        .map(|h| base - h["ablation_drop"].as_f64().unwrap())
        .fold(f64::NEG_INFINITY, f64::max);
    for order in ["greedy", "ranked"] {
        let curve = &pruning[order];
        let accs: Vec<f64> = curve["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["token_acc"].as_f64().unwrap())
            .collect();
        assert_eq!(accs.len(), 2, "{order}: one step per head");
        let removable = curve["removable"].as_u64().unwrap() as usize;
        assert!(accs[..removable].iter().all(|a| *a >= base - tolerance));
        assert!(accs.get(removable).is_none_or(|a| *a < base - tolerance));
    }
    let greedy_first = pruning["greedy"]["steps"][0]["token_acc"].as_f64().unwrap();
    assert!((greedy_first - best_single).abs() < 1e-9);
    let summary = read_json(&report.join("summary.json"));
    assert_eq!(summary["eval_token_acc"].as_f64().unwrap(), base);
    assert_eq!(summary["task"], "reverse");
    assert_eq!(summary["removable_heads"], pruning["greedy"]["removable"]);
}

/// Every figure a PNG of a readable size; with `--svg`, also a standalone SVG document with
/// the figure's text in it, which a later report without `--svg` removes again.
fn check_figures(run: &Path, report: &Path) {
    for name in FIGURES {
        let path = report.join("figures").join(format!("{name}.png"));
        let decoder =
            png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&path).unwrap()));
        let info = decoder.read_info().unwrap().info().clone();
        assert!(
            info.width >= 300 && info.height >= 200,
            "{name}: {}x{}",
            info.width,
            info.height
        );
    }
    assert!(!report.join("figures/attention.svg").exists());
    let with_svg = inspect(&[run.to_str().unwrap(), "--probe", "8", "--svg"]);
    assert!(
        with_svg.status.success(),
        "{}",
        String::from_utf8_lossy(&with_svg.stderr)
    );
    for name in FIGURES {
        let svg = std::fs::read_to_string(report.join("figures").join(format!("{name}.svg")))
            .unwrap_or_else(|e| panic!("{name}.svg: {e}"));
        assert!(
            svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"),
            "{name}"
        );
        assert!(
            svg.contains("<text") && svg.contains("<rect"),
            "{name}: shapes and text"
        );
    }
    // Every figure says what its values are in: the colour bar's or the value axis's unit.
    let units: [(&str, &[&str]); 11] = [
        ("attention", &["attention weight"]),
        ("rollout", &["rolled-out attention"]),
        ("similarity", &["cosine", "JS distance", "CKA"]),
        ("divergence", &["cosine", "JS distance"]),
        ("circuits", &["copying score", "effective rank"]),
        ("norms", &["attention weight", "weighted norm"]),
        ("ablation", &["accuracy drop (points)"]),
        ("patching", &["share restored"]),
        ("pruning", &["eval token accuracy (%)"]),
        ("trajectories", &["mean attention", "loss (nats)"]),
        ("training", &["fraction right", "cross-entropy, nats"]),
    ];
    assert_eq!(
        units.map(|(name, _)| name),
        FIGURES,
        "a unit for every figure"
    );
    for (name, said) in units {
        let svg =
            std::fs::read_to_string(report.join("figures").join(format!("{name}.svg"))).unwrap();
        for unit in said {
            assert!(svg.contains(unit), "{name}.svg does not say {unit:?}");
        }
    }
    let patching_svg = std::fs::read_to_string(report.join("figures/patching.svg")).unwrap();
    assert!(
        patching_svg.contains("Restored logit difference"),
        "the caption is text"
    );
    let without = inspect(&[run.to_str().unwrap(), "--probe", "8"]);
    assert!(without.status.success());
    assert!(
        !report.join("figures/patching.svg").exists(),
        "stale SVGs are removed"
    );
}

/// `index.html`: every figure inline, the heads table with the three ablations in points
/// (heads.json x 100), a link to explore.html; both pages load in Chromium.
fn check_pages(report: &Path) {
    let html = std::fs::read_to_string(report.join("index.html")).unwrap();
    assert_eq!(
        html.matches("data:image/png;base64,").count(),
        FIGURES.len()
    );
    assert!(html.contains("<th>role</th>") && html.contains("kind = &quot;reverse&quot;"));
    assert!(html.contains("href=\"explore.html\""));
    assert!(
        html.contains(
            "<th>zero drop (points)</th><th>mean drop (points)</th><th>resample drop (points)</th>"
        ),
        "{html}"
    );
    let mean_points = heads_of(report)[0]["mean_ablation_drop"].as_f64().unwrap() * 100.0;
    assert!(
        html.contains(&format!("<td>{mean_points:.2}</td>")),
        "{html}"
    );
    check_in_chromium(
        &report.join("index.html"),
        &format!("data-figures=\"ok {}\"", FIGURES.len()),
    );
    check_explore(&report.join("explore.html"));
}

#[test]
fn a_trained_run_gets_every_report_file() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run");
    train_tiny(&run, &[]);
    let output = inspect(&[run.to_str().unwrap(), "--probe", "8"]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("layer head  role"), "{stdout}");
    // Under the column names, their units: the ablations in points, the distance in positions.
    let names = stdout
        .lines()
        .position(|l| l.contains("layer head  role"))
        .unwrap();
    let units: Vec<&str> = stdout
        .lines()
        .nth(names + 1)
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(
        units,
        [
            "(nats)",
            "(fraction)",
            "(pos.)",
            "(points)",
            "(points)",
            "(points)"
        ],
        "{stdout}"
    );
    // The report's path and a URL to open it by, on a machine where nothing opens a browser.
    let index = run.join("inspect/index.html");
    assert!(
        stdout.contains(&format!(
            "the report: {} (file://{}); open it in a browser",
            index.display(),
            std::path::absolute(&index).unwrap().display()
        )),
        "{stdout}"
    );
    let report = run.join("inspect");
    for (file, check) in REPORT_FILES {
        assert!(report.join(file).is_file(), "no {file}");
        check(&report);
    }
    check_figures(&run, &report);
    check_pages(&report);

    // A checkpoint can be inspected too, into another directory.
    let other = tmp.path().join("at-10");
    let output = inspect(&[
        run.to_str().unwrap(),
        "--checkpoint",
        "step-10",
        "--out",
        other.to_str().unwrap(),
    ]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(other.join("heads.json").is_file());
    let provenance = read_json(&other.join("provenance.json"));
    assert_eq!(provenance["weights"], "checkpoints/step-10/model.bpk");
    assert!(provenance["inputs"]["checkpoints/step-10/model.bpk"]["sha256"].is_string());
}

/// softmax((x q + q_bias)(x k + k_bias)^T / sqrt(d_head)) for sequence 0 of layer 0, head h.
fn recomputed_pattern(report: &Path, head: usize) -> (Vec<f32>, Vec<f32>) {
    let weights = read_tensors(&report.join("weights.safetensors")).unwrap();
    let activations = read_tensors(&report.join("activations.safetensors")).unwrap();
    let x = &activations["layers.0.attn_input"]; // [batch, seq, d_model]
    let pattern = &activations["layers.0.pattern"]; // [batch, heads, seq, seq]
    let (seq, d_model) = (x.shape[1], x.shape[2]);
    let n_heads = pattern.shape[1];
    let name = |part: &str| format!("layers.0.heads.{head}.{part}");
    let (q, k) = (&weights[&name("q")], &weights[&name("k")]);
    let (qb, kb) = (&weights[&name("q_bias")], &weights[&name("k_bias")]);
    let d_head = q.shape[1];
    let project = |w: &[f32], b: &[f32], i: usize| -> Vec<f32> {
        (0..d_head)
            .map(|c| {
                b[c] + (0..d_model)
                    .map(|r| x.values[i * d_model + r] * w[r * d_head + c])
                    .sum::<f32>()
            })
            .collect()
    };
    let mut expected = vec![];
    for i in 0..seq {
        let qi = project(&q.values, &qb.values, i);
        let scores: Vec<f32> = (0..seq)
            .map(|j| {
                let kj = project(&k.values, &kb.values, j);
                qi.iter().zip(&kj).map(|(a, b)| a * b).sum::<f32>() / (d_head as f32).sqrt()
            })
            .collect();
        let max = scores.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
        let total: f32 = scores.iter().map(|s| (s - max).exp()).sum();
        expected.extend(scores.iter().map(|s| (s - max).exp() / total));
    }
    let start = head * seq * seq; // batch item 0
    let dumped = pattern.values[start..start + seq * seq].to_vec();
    assert_eq!(n_heads, 2);
    (expected, dumped)
}

#[test]
fn patterns_recompute_from_the_dumped_weights_in_every_layout() {
    // The tiny model: d_model 16, 2 heads. Attention parameters counted by hand: the q/k/v
    // projection with its bias, then the output projection (n_heads d_head -> d_model) with
    // its bias.
    let (d, h) = (16, 2);
    for (layout, d_head, qkv_params) in [
        ("split", 8, d * 3 * h * 8 + 3 * h * 8),
        ("wide", 16, d * 3 * h * 16 + 3 * h * 16),
        // Each head projects only its chunk of d / h inputs.
        ("narrow", 8, h * (d / h) * 3 * 8 + h * 3 * 8),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let run = tmp.path().join(layout);
        let set = format!("model.head_layout={layout}");
        train_tiny(&run, &[&set, "train.steps=5", "train.eval_every=5"]);
        let output = inspect(&[run.to_str().unwrap(), "--probe", "4"]);
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let summary = read_json(&run.join("inspect/summary.json"));
        assert_eq!(summary["head_layout"], layout);
        assert_eq!(summary["d_head"], d_head);
        let output_params = h * d_head * d + d;
        assert_eq!(
            summary["attention_params"],
            qkv_params + output_params,
            "{layout}"
        );
        for head in 0..2 {
            let (expected, dumped) = recomputed_pattern(&run.join("inspect"), head);
            let diff = expected
                .iter()
                .zip(&dumped)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f32::max);
            assert!(diff < 1e-5, "{layout} head {head}: differs by {diff}");
        }
    }
}

#[test]
fn runs_that_cannot_be_inspected_get_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let missing: PathBuf = tmp.path().join("nope");
    let err = inspect_fails(&[missing.to_str().unwrap()]);
    assert!(
        err.contains("nope does not exist: give the run directory train wrote"),
        "{err}"
    );
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let err = inspect_fails(&[empty.to_str().unwrap()]);
    assert!(err.contains("not a headlab run directory"), "{err}");
    // A config where the run belongs: said so, with the command that makes the run.
    let config = tmp.path().join("reverse.toml");
    std::fs::write(&config, "name = \"reverse\"\n").unwrap();
    let err = inspect_fails(&[config.to_str().unwrap()]);
    assert!(
        err.contains(&format!(
            "{0} is a config file, not a run directory: train it first (headlab train {0})",
            config.display()
        )),
        "{err}"
    );

    let run = tmp.path().join("run");
    train_tiny(&run, &["train.steps=10"]);
    let err = inspect_fails(&[run.to_str().unwrap(), "--checkpoint", "step-7"]);
    assert!(
        err.contains("does not exist") && err.contains("step-10"),
        "{err}"
    );

    let weights = run.join("model.safetensors");
    let bytes = std::fs::read(&weights).unwrap();
    std::fs::write(&weights, &bytes[..bytes.len() / 2]).unwrap();
    let err = inspect_fails(&[run.to_str().unwrap()]);
    assert!(
        err.contains("cannot load weights") && err.contains("model.safetensors"),
        "{err}"
    );

    std::fs::write(&weights, &bytes).unwrap();
    // An output directory that cannot be made is named, with its cause said once. /proc
    // refuses new directories even to root.
    let err = inspect_fails(&[run.to_str().unwrap(), "--out", "/proc/headlab-test/report"]);
    assert!(
        err.contains("cannot create /proc/headlab-test/report"),
        "{err}"
    );
    assert_eq!(err.matches("(os error").count(), 1, "{err}");

    // A torn snapshot is named, not skipped: the divergence curve would silently lose a step.
    // The run is sealed, so its manifest finds it before the snapshot is read.
    let snapshot = run.join("snapshots").join("step-5.safetensors");
    std::fs::write(&snapshot, b"not a safetensors file").unwrap();
    let err = inspect_fails(&[run.to_str().unwrap()]);
    assert!(
        err.contains("is damaged: snapshots/step-5.safetensors has 22 bytes where the manifest"),
        "{err}"
    );

    std::fs::remove_file(&weights).unwrap();
    let err = inspect_fails(&[run.to_str().unwrap()]);
    assert!(
        err.contains("has not finished") && err.contains("--checkpoint"),
        "{err}"
    );
}

#[test]
fn flag_values_out_of_range_are_usage_errors_with_the_accepted_range() {
    // clap's own errors never carry a backtrace; the variable makes sure nothing panics
    // on the way.
    let usage_error = |args: &[&str]| {
        let output = headlab::command("inspect", args)
            .env("RUST_BACKTRACE", "1")
            .output()
            .expect("the inspect binary runs");
        let err = String::from_utf8_lossy(&output.stderr).into_owned();
        assert_eq!(output.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.starts_with("error: "), "{args:?}: {err}");
        assert!(
            !err.contains("panicked") && !err.contains("backtrace"),
            "{args:?}: {err}"
        );
        err
    };
    for (flag, value, accepted) in [
        ("--probe", "-1", "at least 1"),
        ("--probe", "0", "at least 1"),
        ("--probe", "many", "at least 1"),
        ("--prune-tolerance", "-1", "in [0, 1]"),
        ("--prune-tolerance", "-0.5", "in [0, 1]"),
        ("--prune-tolerance", "2", "in [0, 1]"),
    ] {
        let err = usage_error(&["runs/any", flag, value]);
        assert!(
            err.contains(&format!("invalid value '{value}' for '{flag} "))
                && err.contains(accepted),
            "{flag} {value}: {err}"
        );
    }
    let err = usage_error(&["runs/any", "--bogus"]);
    assert!(err.contains("unexpected argument '--bogus'"), "{err}");
}

#[test]
fn a_probe_too_large_for_the_run_is_refused_before_allocating() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run");
    train_tiny(&run, &["train.steps=5"]);
    let config = RunConfig::load(Path::new(TINY), &[]).unwrap();
    let max = Probe::max_size(&config.resolve(Path::new(TINY)).unwrap(), 1);

    // It used to allocate until the machine ran out of memory.
    for size in ["100000000", &(max + 1).to_string()] {
        let err = inspect_fails(&[run.to_str().unwrap(), "--probe", size]);
        assert!(
            err.starts_with(&format!("error: --probe {size} is too large for this run"))
                && err.contains(&format!("the largest accepted is --probe {max}")),
            "{err}"
        );
    }
    assert!(!run.join("inspect").exists(), "nothing written");
}

/// Mean pairwise QK cosine and pattern JS distance of layer 0, per divergence.csv row.
fn divergence_rows(report: &Path) -> Vec<(usize, f64, f64)> {
    std::fs::read_to_string(report.join("divergence.csv"))
        .unwrap()
        .lines()
        .skip(1)
        .map(|row| {
            let cells: Vec<&str> = row.split(',').collect();
            (
                cells[0].parse().unwrap(),
                cells[2].parse().unwrap(),
                cells[4].parse().unwrap(),
            )
        })
        .collect()
}

#[test]
fn symmetric_heads_never_diverge_and_random_ones_start_apart() {
    let tmp = tempfile::tempdir().unwrap();
    let symmetric = tmp.path().join("symmetric");
    train_tiny(&symmetric, &["model.init=symmetric", "model.dropout=0"]);
    let random = tmp.path().join("random");
    train_tiny(&random, &["model.dropout=0"]);
    for run in [&symmetric, &random] {
        let output = inspect(&[run.to_str().unwrap(), "--probe", "8"]);
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }

    let rows = divergence_rows(&symmetric.join("inspect"));
    assert_eq!(rows.len(), 5);
    for (step, qk_cosine, pattern_js) in rows {
        assert!(qk_cosine > 1.0 - 1e-6, "step {step}: QK cosine {qk_cosine}");
        assert!(pattern_js < 1e-3, "step {step}: JS distance {pattern_js}");
    }
    let (step, qk_cosine, _) = divergence_rows(&random.join("inspect"))[0];
    assert_eq!(step, 0);
    assert!(
        qk_cosine.abs() < 0.5,
        "independent random heads: QK cosine {qk_cosine}"
    );
}

/// A made-up layer of `batch` sequences of `seq` tokens, `heads` heads over d_model 8: head
/// `h` puts most of each row on key `(q + h) % seq` and spreads the rest thinly, so every
/// row has a few weights over the line threshold.
fn long_layer(batch: usize, heads: usize, seq: usize) -> inspect::load::probe::LayerProbe {
    use run::tensor_file::HostTensor;
    let mut pattern = vec![0.0f32; batch * heads * seq * seq];
    for b in 0..batch {
        for h in 0..heads {
            for q in 0..seq {
                let row = ((b * heads + h) * seq + q) * seq;
                for k in 0..seq {
                    pattern[row + k] = 0.2 / seq as f32;
                }
                pattern[row + (q + h) % seq] += 0.5;
                pattern[row + (q * 7 + b) % seq] += 0.3;
            }
        }
    }
    let attn_input = (0..batch * seq * 8)
        .map(|i| ((i * 37 % 101) as f32 / 50.0) - 1.0)
        .collect();
    inspect::load::probe::LayerProbe {
        attn_input: HostTensor {
            values: attn_input,
            shape: vec![batch, seq, 8],
        },
        pattern: HostTensor {
            values: pattern,
            shape: vec![batch, heads, seq, seq],
        },
        head_outputs: HostTensor {
            values: vec![0.0; batch * seq * heads * 4],
            shape: vec![batch, seq, heads, 4],
        },
        lengths: vec![seq; batch],
    }
}

/// A 256-token page (2 layers x 4 heads, 3 sequences) loads in Chromium, and the head view
/// answers a hover and a change of heads through `window.headlabExplore`; each is timed in
/// the page, and must take under a second (hundreds of lines on a canvas).
#[test]
fn a_256_token_explore_page_renders_and_responds() {
    use report::draw::explore::{ExploreInput, QkWeights, build, render};
    let (batch, heads, seq) = (3, 4, 256);
    let layers = vec![long_layer(batch, heads, seq), long_layer(batch, heads, seq)];
    let weights = QkWeights {
        q: (0..32).map(|i| ((i % 5) as f32 - 2.0) / 3.0).collect(),
        q_bias: vec![0.1; 4],
        k: (0..32).map(|i| ((i % 3) as f32 - 1.0) / 2.0).collect(),
        k_bias: vec![0.0; 4],
    };
    let labels = (0..batch)
        .map(|b| {
            (0..seq)
                .map(|i| format!("t{}", (i * 13 + b) % 50))
                .collect()
        })
        .collect();
    let data = build(&ExploreInput {
        title: "long",
        summary: "256 tokens".into(),
        layers: &layers,
        labels,
        pieces: None,
        heads: &[],
        weights: Some(vec![vec![weights; heads]; 2]),
        patching: None,
        patching_absent: None,
        shown_relations: vec![],
    });
    assert_eq!(data.sequences.len(), batch);
    let drive = "<script>(function () {\
        var now = function () { return performance.now(); };\
        var t0 = now(); headlabExplore.hover('query', 100); var t1 = now();\
        headlabExplore.select(1, [0, 1, 2, 3], 2); var t2 = now();\
        var canvas = document.getElementById('head-canvas');\
        document.body.setAttribute('data-driven', canvas.getAttribute('data-hover') + ';' +\
          canvas.getAttribute('data-lines') + ';' + (t1 - t0).toFixed(0) + ';' +\
          (t2 - t1).toFixed(0));\
        })();</script></body>";
    let page = render(&data).replace("</body>", drive);
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("explore.html");
    std::fs::write(&path, page).unwrap();
    let Some(dom) = check_in_chromium(&path, "data-ready=\"ok\"") else {
        return;
    };
    let body = opening_tag(&dom, "<body");
    let driven = attribute(body, "data-driven"); // set by the driving script
    let parts: Vec<&str> = driven.split(';').collect();
    assert_eq!(
        parts[0], "none",
        "selecting heads clears the hover: {driven}"
    );
    // One line per pair of sequence 2, layer 1 at or over the threshold, 0.01 (the thin
    // spread, 0.2 / 256, is under it): about two per query and head.
    let over: usize = data.sequences[2].patterns[1]
        .iter()
        .map(|head| head.iter().filter(|&&v| v >= 10).count())
        .sum();
    assert!(over > 4 * seq && over <= 4 * seq * 2, "{over}");
    assert_eq!(parts[1], over.to_string(), "{driven}");
    for ms in &parts[2..] {
        let ms: f64 = ms.parse().unwrap();
        assert!(ms < 1000.0, "a redraw took {ms} ms: {driven}");
    }
}

/// `--out` writes only into a new, empty or headlab's own report directory (issue 67): a
/// user's directory is refused before the run is read, every file in it kept and nothing
/// added; `/` and the home directory are refused by name; while another writer holds a report
/// directory, a second `inspect` into it is refused naming the holder; a report directory is
/// written into again, and the SVGs an earlier `--svg` left are removed by a report without it.
#[test]
fn out_writes_only_into_a_directory_of_its_own_one_writer_at_a_time() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run");
    train_tiny(&run, &["train.steps=5"]);
    let run_arg = run.to_str().unwrap();

    let users = tmp.path().join("mine");
    std::fs::create_dir_all(users.join("figures")).unwrap();
    for name in ["index.html", "summary.json", "figures/attention.svg"] {
        std::fs::write(users.join(name), "mine").unwrap();
    }
    let err = inspect_fails(&[run_arg, "--out", users.to_str().unwrap()]);
    assert!(
        err.contains("is not empty and holds no headlab report (it holds \"figures\")"),
        "{err}"
    );
    assert!(
        !err.contains("inspect: "),
        "refused before any stage: {err}"
    );
    let mut left: Vec<String> = ["", "figures"]
        .iter()
        .flat_map(|sub| std::fs::read_dir(users.join(sub)).unwrap())
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(
        left,
        ["attention.svg", "figures", "index.html", "summary.json"]
    );
    for name in ["index.html", "summary.json", "figures/attention.svg"] {
        assert_eq!(std::fs::read_to_string(users.join(name)).unwrap(), "mine");
    }

    let err = inspect_fails(&[run_arg, "--out", "/"]);
    assert!(err.contains("--out / is the root directory"), "{err}");

    // A report directory, with SVGs, then again without: the SVGs go, the rest is rewritten.
    let report = tmp.path().join("report");
    let report_arg = report.to_str().unwrap();
    assert!(
        inspect(&[run_arg, "--out", report_arg, "--svg"])
            .status
            .success()
    );
    assert!(report.join("figures/attention.svg").is_file());
    assert!(inspect(&[run_arg, "--out", report_arg]).status.success());
    assert!(
        !report.join("figures/attention.svg").exists(),
        "stale SVG removed"
    );
    assert!(report.join("figures/attention.png").is_file());
    assert!(report::dir::ReportDir::new(&report).is_complete());

    // Another writer holds it (this test, as a second inspect would): refused, by name, with
    // the status of a held run (a sweep skips the run as held, records no failure).
    let held = run::out_dir::claim(&report, &report::dir::REPORT_KIND).unwrap();
    assert_eq!(
        inspect(&[run_arg, "--out", report_arg, "--quiet"])
            .status
            .code(),
        Some(i32::from(run::dir::EXIT_RUN_IN_USE))
    );
    let err = inspect_fails(&[run_arg, "--out", report_arg]);
    assert!(
        err.contains(&format!(
            "is being written by process {} (inspect)",
            std::process::id()
        )),
        "{err}"
    );
    drop(held);
    assert!(inspect(&[run_arg, "--out", report_arg]).status.success());
}
