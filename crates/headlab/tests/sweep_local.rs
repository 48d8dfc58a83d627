//! `sweep plan`, `run`, `status` and `report` on the local pool, with the real `train` and
//! `inspect` binaries: a 4-run sweep end to end, a rerun that redoes nothing, an interrupted
//! sweep finished by running it again, the runs a sweep must leave alone, and a sweep of
//! text models (seed groups, one tokenizer for every seed, relations over training).

#[path = "common/sweep.rs"]
mod common;
#[path = "common/train.rs"]
mod train_common;

use std::fs;
use std::path::Path;
use std::time::Duration;

use common::*;

const GRID: &str = r#"
seeds = { count = 2 }
[grid]
"model.head_layout" = ["split", "wide"]
[inspect]
probe = 16
"#;

fn mtime(path: &Path) -> std::time::SystemTime {
    fs::metadata(path)
        .and_then(|m| m.modified())
        .expect("mtime")
}

#[test]
fn a_sweep_of_four_runs_runs_reports_and_reruns_as_a_no_op() {
    let dir = tempfile::tempdir().unwrap();
    write_sweep(dir.path(), "grid.toml", GRID);

    let plan = run_sweep(dir.path(), &["plan", "grid.toml"]);
    assert!(plan.status.success(), "{}", text(&plan));
    let stdout = String::from_utf8_lossy(&plan.stdout);
    for name in [
        "tiny-split-s0",
        "tiny-wide-s0",
        "tiny-split-s1",
        "tiny-wide-s1",
    ] {
        assert!(
            stdout.contains(name),
            "{name} missing from the plan:\n{stdout}"
        );
    }
    assert!(
        stdout.contains("4 runs: 2 grid points x 2 seeds"),
        "{stdout}"
    );

    let run = run_sweep(dir.path(), &["run", "grid.toml", "--workers", "2"]);
    assert!(run.status.success(), "{}", text(&run));
    let out = dir.path().join("runs/grid");
    for name in [
        "tiny-split-s0",
        "tiny-wide-s0",
        "tiny-split-s1",
        "tiny-wide-s1",
    ] {
        let run_dir = out.join(name);
        assert!(
            run_dir.join("model.safetensors").is_file(),
            "{name} not trained"
        );
        assert!(
            run_dir.join("inspect/index.html").is_file(),
            "{name} not inspected"
        );
        let config = fs::read_to_string(run_dir.join("config.toml")).unwrap();
        let layout = name.split('-').nth(1).unwrap();
        assert!(
            config.contains(&format!("head_layout = \"{layout}\"")),
            "{config}"
        );
        let seed = &name[name.len() - 1..];
        assert!(config.contains(&format!("seed = {seed}")), "{config}");
    }

    let status = run_sweep(dir.path(), &["status", "grid.toml"]);
    let stdout = String::from_utf8_lossy(&status.stdout);
    assert!(stdout.contains("4 runs: 4 done, 0 running"), "{stdout}");

    // Again: nothing is trained twice.
    let weights = out.join("tiny-split-s0/model.safetensors");
    let before = mtime(&weights);
    let again = run_sweep(dir.path(), &["run", "grid.toml"]);
    assert!(again.status.success(), "{}", text(&again));
    let stdout = String::from_utf8_lossy(&again.stdout);
    assert!(stdout.contains("0 done now, 4 done before"), "{stdout}");
    assert_eq!(mtime(&weights), before);

    let report = run_sweep(dir.path(), &["report", "grid.toml"]);
    assert!(report.status.success(), "{}", text(&report));
    // Its stages on stderr, one line each with its time (not a terminal).
    let stages: Vec<&str> = std::str::from_utf8(&report.stderr)
        .unwrap()
        .lines()
        .filter_map(|line| line.strip_prefix("sweep report: "))
        .map(|line| line.rsplit_once(", ").map_or(line, |(stage, _)| stage))
        .collect();
    assert_eq!(
        stages,
        [
            "reading the runs",
            "matching heads across seeds",
            "the tables and figures"
        ]
    );
    let quiet = run_sweep(dir.path(), &["report", "grid.toml", "--quiet"]);
    assert!(
        quiet.status.success() && quiet.stderr.is_empty(),
        "{}",
        text(&quiet)
    );
    let report_dir = out.join("_sweep/report");
    let rows = read_csv(&report_dir.join("sweep.csv"));
    assert_eq!(rows.len(), 5, "a header and four runs: {rows:?}");
    assert_eq!(
        rows[0][..5],
        ["run", "state", "config", "seed", "model.head_layout"]
    );
    let acc = rows[0]
        .iter()
        .position(|c| c == "eval_token_acc_frac")
        .unwrap();
    // Every accuracy, drop and restored share is a fraction, and its column says so.
    for column in &rows[0][5..] {
        let a_fraction = [
            "acc",
            "drop",
            "restored",
            "ceiling",
            "agreement",
            "layer_path",
        ]
        .iter()
        .any(|word| column.contains(word));
        if a_fraction && column != "model_over_ceiling" {
            assert!(column.ends_with("_frac"), "{column}: {:?}", rows[0]);
        }
    }
    for row in &rows[1..] {
        assert_eq!(row[1], "done");
        assert_eq!(row[4], row[0].split('-').nth(1).unwrap());
        let value: f64 = row[acc].parse().expect("an accuracy");
        assert!((0.0..=1.0).contains(&value));
    }
    let heads = read_csv(&report_dir.join("heads.csv"));
    assert_eq!(heads.len(), 1 + 4 * 2, "a row per head of every run");
    // Every measure's column names its unit: fractions end in _frac (one point is 0.01).
    assert_eq!(
        heads[0][4..13],
        [
            "layer",
            "head",
            "role",
            "entropy_nats",
            "confidence_frac",
            "mean_distance_positions",
            "ablation_drop_frac",
            "mean_ablation_drop_frac",
            "resample_ablation_drop_frac",
        ]
    );
    assert!(
        heads[0][13..]
            .iter()
            .all(|c| c.starts_with("score_") && c.ends_with("_frac")),
        "{:?}",
        heads[0]
    );
    for kind in [
        "ablation_drop_frac",
        "mean_ablation_drop_frac",
        "resample_ablation_drop_frac",
    ] {
        let column = heads[0].iter().position(|c| c == kind).expect(kind);
        for row in &heads[1..] {
            let drop: f64 = row[column].parse().expect("an accuracy drop");
            assert!((-1.0..=1.0).contains(&drop), "{kind} {drop}");
        }
    }
    let markdown = fs::read_to_string(report_dir.join("report.md")).unwrap();
    assert!(
        markdown.contains("| tiny model.head_layout=split | 2 of 2 |"),
        "{markdown}"
    );
    assert!(markdown.contains("| L0H1 |"), "{markdown}");
    // The matched heads carry their own measures across seeds: each ablation, direct logit
    // attribution, copying, and activation patching on reverse's answer pairs (reverse has no
    // route pairs, and one layer has no composition or paths).
    assert!(
        markdown.contains(
            "| slot | most frequent role | seeds | mean similarity | ablation drop (fraction) | \
             mean-ablation drop (fraction) | resample-ablation drop (fraction) | direct logit \
             attribution (logits) | copying score | restored (answer pairs) (fraction) |\n"
        ),
        "{markdown}"
    );
    // The headline table first; every number per grid point in estimates.csv, linked.
    assert!(
        markdown.contains(
            "| grid point | seeds | reached 99% | eval token acc (fraction) | heads with a role \
             | mean pattern JS | largest ablation drop (fraction) | removable heads |\n"
        ),
        "{markdown}"
    );
    assert!(
        markdown.contains("[`estimates.csv`](estimates.csv)"),
        "{markdown}"
    );
    assert!(!markdown.contains("NaN"), "{markdown}");
    let estimates = read_csv(&report_dir.join("estimates.csv"));
    assert_eq!(
        estimates[0],
        [
            "grid_point",
            "number",
            "unit",
            "seeds",
            "mean",
            "ci95",
            "low",
            "high"
        ]
    );
    assert!(
        estimates.iter().all(|row| row.len() == estimates[0].len()),
        "a field per header column: {estimates:?}"
    );
    // A number's name carries its unit as its sweep.csv column does, and the unit column
    // says it in words.
    for row in &estimates[1..] {
        assert_eq!(row[1].ends_with("_frac"), row[2] == "fraction", "{row:?}");
    }
    let numbers: Vec<&str> = estimates[1..].iter().map(|row| row[1].as_str()).collect();
    for number in [
        "max_resample_ablation_drop_frac",
        "answer_best_restored_frac",
    ] {
        assert!(numbers.contains(&number), "{number}: {numbers:?}");
    }
    assert!(!numbers.contains(&"max_k_composition"), "one layer");
    for row in &estimates[1..] {
        let (mean, low, high) = (&row[4], &row[6], &row[7]);
        let parse = |v: &String| v.parse::<f64>().expect("a number");
        if !low.is_empty() {
            assert!(
                parse(low) <= parse(mean) && parse(mean) <= parse(high),
                "{row:?}"
            );
        }
    }
    // Links to every figure and to each grid point's compare page, which exist.
    for link in [
        "(figures/eval_token_acc.png)",
        "(matching/tiny_model.head_layout_split/compare.html)",
    ] {
        assert!(markdown.contains(link), "{link}: {markdown}");
    }
    let json: serde_json::Value =
        serde_json::from_slice(&fs::read(report_dir.join("report.json")).unwrap()).unwrap();
    assert_eq!(json["points"].as_array().unwrap().len(), 2);
    let split = &json["points"][0];
    assert_eq!(split["roles"].as_array().unwrap().len(), 1, "one layer");
    assert_eq!(
        split["slots"].as_array().unwrap().len(),
        2,
        "two heads matched"
    );
    let restored = &split["slots"][1]["numbers"]["answer_restored"];
    assert_eq!(restored["n"], 2, "both seeds' matched heads: {restored}");
    let mean = restored["mean"].as_f64().unwrap();
    assert!(mean.is_finite(), "{restored}");
    for figure in [
        "eval_token_acc",
        "steps_to_99",
        "heads_with_role",
        "removable_heads",
    ] {
        assert!(report_dir.join(format!("figures/{figure}.png")).is_file());
        let svg = fs::read_to_string(report_dir.join(format!("figures/{figure}.svg"))).unwrap();
        assert!(
            svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"),
            "{svg}"
        );
        // The x axis names the grid key its labels are values of.
        assert!(svg.contains("\nconfig, model.head_layout\n"), "{svg}");
        // An accuracy's axis says its unit and stays within 0 and 1.
        if figure == "eval_token_acc" {
            assert!(svg.contains("eval token acc (fraction)"), "{svg}");
            let ticks: Vec<f64> = svg
                .split('>')
                .filter_map(|part| part.split('<').next()?.trim().parse().ok())
                .collect();
            assert!(!ticks.is_empty(), "{svg}");
            assert!(ticks.iter().all(|t| (0.0..=1.0).contains(t)), "{ticks:?}");
        }
    }
    assert!(
        report_dir.join("matching").is_dir(),
        "compare's files per grid point"
    );
}

#[test]
fn an_interrupted_sweep_finishes_when_run_again_without_redoing_runs() {
    let dir = tempfile::tempdir().unwrap();
    write_sweep(
        dir.path(),
        "long.toml",
        r#"
seeds = [0, 1, 2]
[set]
"train.steps" = 600
"train.checkpoint_every" = 20
"train.snapshot_every" = 0
[inspect]
probe = 8
"#,
    );
    let out = dir.path().join("runs/long");
    let child = sweep_cmd(
        dir.path(),
        &["run", "long.toml", "--workers", "1", "--quiet"],
    )
    .stdout(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    // Stop it once the first run is done and the second has a checkpoint.
    wait_for(
        Duration::from_secs(120),
        "run 0 done, run 1 checkpointed",
        || out.join("tiny-s0/inspect/index.html").is_file() && has_checkpoint(&out.join("tiny-s1")),
    );
    let status = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(143), "{}", text(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("run the same command again"), "{stdout}");
    assert!(
        !out.join("tiny-s1/model.safetensors").exists(),
        "s1 stopped before its end"
    );
    assert!(!out.join("tiny-s2").exists(), "s2 never started");

    let status = run_sweep(dir.path(), &["status", "long.toml"]);
    let stdout = String::from_utf8_lossy(&status.stdout);
    assert!(
        stdout.contains("1 done, 0 running, 1 interrupted"),
        "{stdout}"
    );

    let weights = out.join("tiny-s0/model.safetensors");
    let before = mtime(&weights);
    let again = run_sweep(dir.path(), &["run", "long.toml", "--quiet"]);
    assert!(again.status.success(), "{}", text(&again));
    let stdout = String::from_utf8_lossy(&again.stdout);
    assert!(
        stdout.contains("2 done now, 1 done before, 0 failed"),
        "{stdout}"
    );
    assert_eq!(
        mtime(&weights),
        before,
        "the finished run was not trained again"
    );
    let log = fs::read_to_string(out.join("_sweep/logs/tiny-s1.log")).unwrap();
    assert!(
        log.contains("\"--resume\""),
        "s1 resumed from its checkpoint:\n{log}"
    );
    let steps: Vec<u64> = fs::read_to_string(out.join("tiny-s1/metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["step"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert!(
        steps.windows(2).all(|w| w[0] < w[1]),
        "one metrics history: {steps:?}"
    );
    assert_eq!(steps.last(), Some(&600));
}

#[test]
fn a_sweep_leaves_foreign_and_changed_runs_alone_and_finishes_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let sweep = write_sweep(
        dir.path(),
        "mixed.toml",
        "seeds = [0, 1, 2]\n[inspect]\nenabled = false\n",
    );
    let out = dir.path().join("runs/mixed");
    // The sweep's own directory (its _sweep/, as a sweep before markers left it), where:
    fs::create_dir_all(out.join("_sweep")).unwrap();
    // s0's directory holds a user's file: not a run, never written into.
    fs::create_dir_all(out.join("tiny-s0")).unwrap();
    fs::write(out.join("tiny-s0/notes.txt"), "mine").unwrap();
    // s2's holds only the lock a `train` took before the disk filled: a run not yet started.
    fs::create_dir_all(out.join("tiny-s2")).unwrap();
    fs::write(out.join("tiny-s2/.lock"), "").unwrap();
    let status = run_sweep(dir.path(), &["status", "mixed.toml"]);
    let stdout = String::from_utf8_lossy(&status.stdout);
    assert!(
        stdout.contains("1 conflict") && stdout.contains("2 left"),
        "{stdout}"
    );

    let run = run_sweep(dir.path(), &["run", "mixed.toml"]);
    assert_eq!(run.status.code(), Some(1), "{}", text(&run));
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        stdout.contains("2 done now, 0 done before, 1 failed"),
        "{stdout}"
    );
    assert!(
        stdout.contains("failed: tiny-s0: ") && stdout.contains("not a headlab run"),
        "{stdout}"
    );
    assert_eq!(
        fs::read_to_string(out.join("tiny-s0/notes.txt")).unwrap(),
        "mine"
    );
    assert_eq!(fs::read_dir(out.join("tiny-s0")).unwrap().count(), 1);
    assert!(out.join("tiny-s1/model.safetensors").is_file());
    assert!(out.join("tiny-s2/model.safetensors").is_file());
    assert!(!out.join("tiny-s1/inspect").exists(), "inspect is off");
    let status = run_sweep(dir.path(), &["status", "mixed.toml"]);
    let stdout = String::from_utf8_lossy(&status.stdout);
    assert!(
        stdout.contains("2 done") && stdout.contains("1 conflict"),
        "{stdout}"
    );

    // The sweep file edited after the runs: they are not this config's runs any more.
    let edited = fs::read_to_string(&sweep).unwrap() + "[set]\n\"train.lr\" = 1e-2\n";
    fs::write(&sweep, edited).unwrap();
    let weights = out.join("tiny-s1/model.safetensors");
    let before = mtime(&weights);
    let run = run_sweep(dir.path(), &["run", "mixed.toml"]);
    assert_eq!(run.status.code(), Some(1), "{}", text(&run));
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        stdout.contains("another config than the sweep's"),
        "{stdout}"
    );
    assert_eq!(
        mtime(&weights),
        before,
        "a run of another config is never overwritten"
    );
}

/// `--out` names a directory a sweep fills with run directories: a user's directory (not
/// empty, no sweep's mark), `/` and the home directory are refused by every sweep command
/// before anything is written (issue 67); a new one is marked as the sweep's.
#[test]
fn a_sweep_never_writes_into_a_directory_it_did_not_make() {
    let dir = tempfile::tempdir().unwrap();
    write_sweep(
        dir.path(),
        "one.toml",
        "seeds = [0]\n[inspect]\nenabled = false\n",
    );
    let users = dir.path().join("mine");
    fs::create_dir_all(&users).unwrap();
    fs::write(users.join("notes.txt"), "mine").unwrap();
    for command in ["run", "status", "report", "verify", "plan"] {
        for (out, expected) in [
            (
                users.to_str().unwrap(),
                "holds no headlab sweep (it holds \"notes.txt\")",
            ),
            ("/", "is the root directory"),
        ] {
            let output = run_sweep(dir.path(), &[command, "one.toml", "--out", out]);
            assert_eq!(
                output.status.code(),
                Some(1),
                "{command}: {}",
                text(&output)
            );
            let err = String::from_utf8_lossy(&output.stderr);
            assert!(err.contains(expected), "{command} --out {out}: {err}");
        }
    }
    let names: Vec<_> = fs::read_dir(&users)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["notes.txt"], "nothing was added");

    // A directory of run directories alone (one trained by hand into the sweep's place
    // before the sweep, or one a killed `train` left empty) is a sweep's.
    let runs_only = dir.path().join("runs-only");
    let trained = std::process::Command::new(HEADLAB)
        .args(["train", TINY, "--quiet", "--out"])
        .arg(runs_only.join("tiny-s0"))
        .output()
        .unwrap();
    assert!(trained.status.success(), "{}", text(&trained));
    fs::create_dir_all(runs_only.join("tiny-s9")).unwrap();
    fs::write(runs_only.join("tiny-s9/.lock"), "").unwrap();
    let runs_only = runs_only.to_str().unwrap();
    let status = run_sweep(dir.path(), &["status", "one.toml", "--out", runs_only]);
    assert!(status.status.success(), "{}", text(&status));

    let out = dir.path().join("new");
    let run = run_sweep(
        dir.path(),
        &["run", "one.toml", "--out", out.to_str().unwrap()],
    );
    assert!(run.status.success(), "{}", text(&run));
    let marker = fs::read_to_string(out.join(".headlab-out.json")).unwrap();
    assert!(marker.contains("\"kind\": \"sweep\""), "{marker}");
    let again = run_sweep(
        dir.path(),
        &["run", "one.toml", "--out", out.to_str().unwrap()],
    );
    assert!(again.status.success(), "{}", text(&again));
}

#[test]
fn bad_sweep_files_are_refused_with_the_key_and_nothing_runs() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("seeds = []\n", "seeds: no seeds"),
        // Explained as every TOML file is (run::config::explain_toml): a close match named.
        ("seed = [0]\n", "unknown field `seed`"),
        ("seed = [0]\n", "did you mean `seeds`?"),
        (
            "seeds = [0]\n[grid]\n\"model.n_heads\" = 2\n",
            "grid.\"model.n_heads\"",
        ),
        (
            "seeds = [0]\n[grid]\n\"model.n_heads\" = [3]\n",
            "run tiny-3-s0",
        ),
        ("seeds = [0]\nrun_name = \"../escape-{seed}\"\n", "run_name"),
        // An unquoted dotted key is a table, which would replace the config's whole [model].
        (
            "seeds = [0]\n[set]\nmodel.n_heads = 2\n",
            "set.model: { n_heads = 2 } is a table, not a value",
        ),
        (
            "seeds = [0]\n[grid]\nmodel.n_heads = [1, 2]\n",
            "grid.model: { n_heads = [1, 2] } is a table",
        ),
        // [inspect] values in inspect's ranges, named by their keys here, at plan.
        (
            "seeds = [0]\n[inspect]\nprobe = 0\n",
            "inspect.probe: expected a whole number",
        ),
        (
            "seeds = [0]\n[inspect]\nprobe = 100000000\n",
            "inspect.probe: 100000000 sequences are too many for run tiny-s0",
        ),
        (
            "seeds = [0]\n[inspect]\nprune_tolerance = 2.0\n",
            "inspect.prune_tolerance: 2: expected accuracy points as a fraction in [0, 1]",
        ),
        (
            "seeds = [0]\n[inspect]\nprune_tolerance = nan\n",
            "inspect.prune_tolerance: NaN",
        ),
        (
            "seeds = [0]\n[inspect]\nprune_tolerance = -0.5\n",
            "inspect.prune_tolerance: -0.5",
        ),
    ];
    for (extra, expected) in cases {
        write_sweep(dir.path(), "bad.toml", extra);
        let output = run_sweep(dir.path(), &["run", "bad.toml"]);
        assert_eq!(output.status.code(), Some(1), "{extra}: {}", text(&output));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.starts_with("error: "), "{stderr}");
        assert!(stderr.contains(expected), "{extra}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
        assert!(!dir.path().join("runs").exists(), "nothing ran for {extra}");
    }
    let missing = run_sweep(dir.path(), &["plan", "nope.toml"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&missing.stderr).contains("cannot read the sweep file nope.toml")
    );
    let usage = run_sweep(dir.path(), &["submit", "bad.toml"]);
    assert_eq!(
        usage.status.code(),
        Some(2),
        "submit needs --slurm: {}",
        text(&usage)
    );
}

#[test]
fn submit_dry_run_writes_an_array_of_the_runs_left() {
    let dir = tempfile::tempdir().unwrap();
    write_sweep(dir.path(), "grid.toml", GRID);
    let output = run_sweep(
        dir.path(),
        &[
            "submit",
            "grid.toml",
            "--slurm",
            "--dry-run",
            "--max-parallel",
            "2",
            "--time",
            "10",
        ],
    );
    assert!(output.status.success(), "{}", text(&output));
    let script = fs::read_to_string(dir.path().join("runs/grid/_sweep/slurm/grid.sbatch")).unwrap();
    assert!(script.contains("#SBATCH --array=0-3%2\n"), "{script}");
    assert!(script.contains("#SBATCH --time=10\n"), "{script}");
    assert!(script.contains(" task "), "{script}");
    assert!(
        !dir.path().join("runs/grid/_sweep/slurm/jobs.txt").exists(),
        "not submitted"
    );
}

/// `group_seeds`: the seeds of a grid point train together as one batched model (one
/// `train --seeds` per group, its output in every run's log), and the runs are the runs
/// each seed trains alone: the same metrics and final weights within float rounding.
#[test]
fn grouped_seeds_train_together_into_the_runs_each_trains_alone() {
    let dir = tempfile::tempdir().unwrap();
    let body = |group: usize| {
        format!(
            "seeds = [0, 1, 2, 3, 4]\ngroup_seeds = {group}\n[grid]\n\"model.head_layout\" = \
             [\"split\", \"narrow\"]\n[inspect]\nprobe = 8\n"
        )
    };
    write_sweep(dir.path(), "grouped.toml", &body(3));
    write_sweep(dir.path(), "alone.toml", &body(1));
    let plan = run_sweep(dir.path(), &["plan", "grouped.toml"]);
    assert!(
        text(&plan).contains("trained in 4 groups of up to 3 seeds"),
        "{}",
        text(&plan)
    );
    // On Slurm one array task per group, indexed by its first run (plan order is seed-major:
    // split s0 is run 0, narrow s0 run 1, ...; the groups start at 0, 1, 6 and 7).
    let submit = run_sweep(
        dir.path(),
        &["submit", "--slurm", "--dry-run", "grouped.toml"],
    );
    assert!(
        text(&submit).contains("--array=0-1,6-7"),
        "{}",
        text(&submit)
    );

    let grouped = run_sweep(dir.path(), &["run", "grouped.toml", "--workers", "1"]);
    assert!(grouped.status.success(), "{}", text(&grouped));
    let alone = run_sweep(dir.path(), &["run", "alone.toml", "--workers", "2"]);
    assert!(alone.status.success(), "{}", text(&alone));

    let (grouped, alone) = (
        dir.path().join("runs/grouped"),
        dir.path().join("runs/alone"),
    );
    for layout in ["split", "narrow"] {
        for seed in 0..5 {
            let name = format!("tiny-{layout}-s{seed}");
            let log = fs::read_to_string(grouped.join(format!("_sweep/logs/{name}.log"))).unwrap();
            // Seeds 0-2 train as a group of three, 3-4 as a group of two.
            let together = if seed < 3 { 2 } else { 1 };
            assert!(
                log.contains(&format!("trained together with {together} other seeds"))
                    && log.contains("\"--seeds\""),
                "{name}: {log}"
            );
            assert!(
                grouped.join(&name).join("inspect/index.html").is_file(),
                "{name}"
            );
            let losses = |root: &Path| -> Vec<f64> {
                fs::read_to_string(root.join(&name).join("metrics.jsonl"))
                    .unwrap()
                    .lines()
                    .map(|l| {
                        serde_json::from_str::<serde_json::Value>(l).unwrap()["loss"]
                            .as_f64()
                            .unwrap()
                    })
                    .collect()
            };
            let (got, want) = (losses(&grouped), losses(&alone));
            assert_eq!(got.len(), want.len(), "{name}");
            for (a, b) in got.iter().zip(&want) {
                assert!(
                    (a - b).abs() <= 1e-5 * b.abs().max(1.0),
                    "{name}: {a} vs {b}"
                );
            }
        }
    }
    let submit = run_sweep(
        dir.path(),
        &["submit", "--slurm", "--dry-run", "grouped.toml"],
    );
    assert!(
        text(&submit).contains("nothing to submit"),
        "{}",
        text(&submit)
    );
}

/// `group_seeds` left out: grid points on wgpu train in groups of 16, those on a CPU backend
/// alone (where a group is measured no faster); the Slurm array follows the groups. Planned
/// and submitted dry, so no GPU is needed.
#[test]
fn left_out_group_seeds_groups_by_backend() {
    let dir = tempfile::tempdir().unwrap();
    let body = "seeds = { from = 0, count = 20 }\n[grid]\nbackend = [\"flex\", \"wgpu\"]\n";
    write_sweep(dir.path(), "auto.toml", body);
    let plan = run_sweep(dir.path(), &["plan", "auto.toml"]);
    assert!(plan.status.success(), "{}", text(&plan));
    // wgpu: seeds 0-15 and 16-19 (2 groups); flex: 20 runs alone.
    assert!(
        text(&plan).contains("trained in 22 groups of up to 16 seeds"),
        "{}",
        text(&plan)
    );
    // Plan order is seed-major (flex s0 is run 0, wgpu s0 run 1, flex s1 run 2, ...): every
    // flex run is a task, and the wgpu groups start at runs 1 (s0) and 33 (s16).
    let submit = run_sweep(dir.path(), &["submit", "--slurm", "--dry-run", "auto.toml"]);
    let mut tasks: Vec<usize> = text(&submit)
        .split("--array=")
        .nth(1)
        .expect("an array in the dry run")
        .split(|c: char| c.is_whitespace() || c == '%')
        .next()
        .unwrap()
        .split(',')
        .flat_map(|part| match part.split_once('-') {
            Some((a, b)) => (a.parse::<usize>().unwrap()..=b.parse().unwrap()).collect(),
            None => vec![part.parse::<usize>().unwrap()],
        })
        .collect();
    tasks.sort();
    let mut want: Vec<usize> = (0..20).map(|seed| 2 * seed).collect();
    want.extend([1, 33]);
    want.sort();
    assert_eq!(tasks, want, "{}", text(&submit));

    // Set in the file, the size holds on every backend: 1 trains every run alone.
    write_sweep(
        dir.path(),
        "alone.toml",
        &format!("group_seeds = 1\n{body}"),
    );
    let plan = run_sweep(dir.path(), &["plan", "alone.toml"]);
    assert!(!text(&plan).contains("groups of up to"), "{}", text(&plan));
}

/// A `group_seeds` outside 1 to 1024 is refused, naming the key.
#[test]
fn a_bad_group_size_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    write_sweep(dir.path(), "bad.toml", "seeds = [0, 1]\ngroup_seeds = 0\n");
    let plan = run_sweep(dir.path(), &["plan", "bad.toml"]);
    assert!(!plan.status.success());
    let stderr = String::from_utf8_lossy(&plan.stderr);
    assert!(
        stderr.contains("group_seeds") && stderr.contains("1 (every run alone)"),
        "{stderr}"
    );
}

/// A sweep of a tiny text model: three seeds, two trained as a group and one alone, each
/// run with the same tokenizer (the same bytes), inspected on the treebank with relations
/// over training, and the sweep's report made.
#[test]
fn a_sweep_of_text_models_trains_groups_and_inspects_them_on_the_treebank() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("corpus.jsonl");
    train_common::write_text_corpus(&corpus);
    let config = dir.path().join("text.toml");
    fs::write(
        &config,
        format!(
            "name = \"text\"\nseed = 0\nbackend = \"flex\"\n\n[task]\nkind = \"text\"\n\
             corpus = {corpus:?}\nvocab_size = 150\nseq_len = 16\n\n[model]\nd_model = 16\n\
             n_layers = 2\nn_heads = 2\nd_ff = 32\noutput_transform = true\n\n[train]\n\
             steps = 6\nbatch_size = 8\neval_every = 3\neval_size = 16\ncheckpoint_every = 3\n\
             snapshot_every = 3\n"
        ),
    )
    .unwrap();
    fs::write(
        dir.path().join("text-sweep.toml"),
        format!(
            "configs = [{config:?}]\nseeds = [0, 1, 2]\ngroup_seeds = 2\n[inspect]\nprobe = 8\n"
        ),
    )
    .unwrap();
    let run = run_sweep(dir.path(), &["run", "text-sweep.toml", "--workers", "1"]);
    assert!(run.status.success(), "{}", text(&run));
    let out = dir.path().join("runs/text-sweep");
    let tokenizer = fs::read(out.join("text-s0/tokenizer.json")).unwrap();
    for seed in 0..3 {
        let run_dir = out.join(format!("text-s{seed}"));
        assert_eq!(fs::read(run_dir.join("tokenizer.json")).unwrap(), tokenizer);
        let log = fs::read_to_string(out.join(format!("_sweep/logs/text-s{seed}.log"))).unwrap();
        assert_eq!(
            log.contains("trained together with 1 other seeds"),
            seed < 2,
            "{log}"
        );
        for file in [
            "index.html",
            "relations.json",
            "relations-over-training.json",
        ] {
            assert!(
                run_dir.join("inspect").join(file).is_file(),
                "text-s{seed}: {file}"
            );
        }
    }
    let report = run_sweep(dir.path(), &["report", "text-sweep.toml"]);
    assert!(report.status.success(), "{}", text(&report));
    let rows = read_csv(&out.join("_sweep/report/sweep.csv"));
    assert_eq!(rows.len(), 4, "a header and three runs: {rows:?}");
    // The syntax heads across seeds carry each seed's relation ablation: the loss gained on
    // the relation's words minus elsewhere, paired within each seed, is the mean over the
    // seeds of what each run's own relations.json says.
    let read_json = |path: &Path| -> serde_json::Value {
        serde_json::from_slice(&fs::read(path).unwrap()).unwrap()
    };
    let runs: Vec<serde_json::Value> = (0..3)
        .map(|seed| read_json(&out.join(format!("text-s{seed}/inspect/relations.json"))))
        .collect();
    let report_json = read_json(&out.join("_sweep/report/report.json"));
    let mut ablated = 0;
    for across in report_json["points"][0]["relations"].as_array().unwrap() {
        let direction = across["direction"].as_str().unwrap();
        let differences: Vec<f64> = runs
            .iter()
            .filter_map(|run| {
                let relation = run["relations"]
                    .as_array()?
                    .iter()
                    .find(|r| r["relation"] == across["relation"])?;
                let best = &relation["best"][direction];
                Some(
                    best["resample_loss_rise_on_relation"].as_f64()?
                        - best["resample_loss_rise_elsewhere"].as_f64()?,
                )
            })
            .collect();
        let difference = &across["resample_loss_rise_difference"];
        if differences.is_empty() {
            assert!(difference.is_null(), "{across}");
            continue;
        }
        let mean = differences.iter().sum::<f64>() / differences.len() as f64;
        assert_eq!(difference["n"], differences.len(), "{across}");
        assert!(
            (difference["mean"].as_f64().unwrap() - mean).abs() < 1e-9,
            "{across}"
        );
        ablated += 1;
    }
    assert!(ablated > 0, "no relation's best heads were ablated");
    let markdown = fs::read_to_string(out.join("_sweep/report/report.md")).unwrap();
    assert!(
        markdown.contains("resampled: loss gained, dependents minus elsewhere (nats)"),
        "{markdown}"
    );
}
