//! The book's experiment claims (docs/experiment-*.md), checked on models small enough to train in
//! a test: heads on the asymmetric neighbors rule split the two neighbours between them, with
//! dropout into a clean previous-token and next-token pair, heads that start identical (no dropout)
//! are still identical after training, and heads matched across seeds do the same job. The
//! full-size runs are the sweeps of `scripts/experiments/experiments.sh`.

mod common;

use std::path::Path;

use inspect::inspection::MeasureOptions;
use inspect::load::loaded_run::LoadedRun;
use inspect::measures::heads::head_roles;
use report::compare::compare;
use report::{Report, ReportOptions, write_report};

/// `(x[i-1] - x[i+1]) mod 5` on sequences of 8, one layer of two heads.
const NEIGHBORS_DIFFERENCE: &str = r#"
name = "tiny-neighbors-difference"
seed = 0

[task]
kind = "neighbors"
seq_len = 8
vocab_size = 5
combine = "difference"

[model]
d_model = 32
n_layers = 1
n_heads = 2
d_ff = 64

[train]
steps = 2000
batch_size = 32
lr = 3e-3
warmup_steps = 20
eval_every = 50
eval_size = 256
checkpoint_every = 1000
snapshot_every = 200
"#;

/// Trains `config_text` (with `overrides`) in a temporary directory and inspects it.
fn train_and_inspect(config_text: &str, overrides: &[&str]) -> Report {
    // One training at a time: the device RNG that draws the initial weights is shared by
    // every thread, and a run training beside another could start from other weights.
    let _rng = model::init::take_rng_turn();
    let tmp = tempfile::tempdir().unwrap();
    let config_path = tmp.path().join("config.toml");
    std::fs::write(&config_path, config_text).unwrap();
    let run_dir = tmp.path().join("run");
    common::train_run(&config_path, overrides, &run_dir);
    let loaded = inspect::load::loaded_run::load(&run_dir, None).unwrap();
    write_report(
        &loaded,
        Path::new(&run_dir.join("inspect")),
        &ReportOptions {
            measure: MeasureOptions {
                probe_size: 32,
                ..MeasureOptions::default()
            },
            ..ReportOptions::default()
        },
    )
    .unwrap()
}

#[test]
fn neighbors_difference_heads_split_the_two_neighbours() {
    let report = train_and_inspect(NEIGHBORS_DIFFERENCE, &[]);
    assert!(
        report.measured.eval_token_acc.unwrap() > 0.99,
        "{}",
        report.measured.eval_token_acc.unwrap()
    );
    let score = |h: usize, pattern: &str| report.measured.heads[h].pattern_scores[pattern];
    // One head looks mostly left, the other mostly right (which is which depends on the seed).
    let left = (0..2)
        .max_by(|&a, &b| score(a, "previous_token").total_cmp(&score(b, "previous_token")))
        .unwrap();
    let right = 1 - left;
    assert!(
        score(left, "previous_token") > 0.45
            && score(left, "previous_token") > 2.0 * score(left, "next_token"),
        "{:?}",
        report.measured.heads[left]
    );
    assert!(
        score(right, "next_token") > 0.4
            && score(right, "next_token") > 1.5 * score(right, "previous_token"),
        "{:?}",
        report.measured.heads[right]
    );
    // Both are needed: masking either costs at least a third of the accuracy.
    for head in &report.measured.heads {
        assert!(head.ablation_drop.unwrap() > 0.33, "{head:?}");
    }
}

/// Experiment 1's finding at tiny size: with dropout, whether the heads start apart or
/// identical, one becomes a `previous_token` head and the other a `next_token` head (seed 1,
/// where without dropout both heads stay `mixed`).
#[test]
fn with_dropout_the_heads_become_a_previous_and_a_next_token_head() {
    for init in ["random", "symmetric"] {
        let init = format!("model.init={init}");
        let report = train_and_inspect(
            NEIGHBORS_DIFFERENCE,
            &[
                "seed=1",
                "model.dropout=0.1",
                "train.snapshot_every=0",
                &init,
            ],
        );
        let mut roles: Vec<&str> = report
            .measured
            .heads
            .iter()
            .map(|h| h.role.as_str())
            .collect();
        roles.sort();
        assert_eq!(
            roles,
            ["next_token", "previous_token"],
            "{init}: {:?}",
            report.measured.heads
        );
    }
    let without = train_and_inspect(NEIGHBORS_DIFFERENCE, &["seed=1", "train.snapshot_every=0"]);
    assert!(
        without.measured.heads.iter().all(|h| h.role == "mixed"),
        "{:?}",
        without.measured.heads
    );
}

#[test]
fn symmetric_heads_without_dropout_stay_identical_through_training() {
    let report = train_and_inspect(NEIGHBORS_DIFFERENCE, &["model.init=symmetric"]);
    assert_eq!(
        report.measured.divergence.len(),
        11,
        "snapshots at 0, 200, ..., 2000"
    );
    for point in &report.measured.divergence {
        assert!(point.qk_cosine > 1.0 - 1e-6, "{point:?}");
        assert!(point.ov_cosine > 1.0 - 1e-6, "{point:?}");
        assert!(point.pattern_js < 1e-3, "{point:?}");
    }
    let [a, b] = &report.measured.heads[..] else {
        panic!("two heads")
    };
    assert_eq!(a.pattern_scores, b.pattern_scores);
    assert_eq!(a.ablation_drop, b.ablation_drop);
}

/// Experiment 4 at tiny size: train three seeds, match their heads, and check that the
/// matching pairs heads that lean to the same neighbour.
#[test]
fn heads_matched_across_seeds_lean_to_the_same_neighbour() {
    let tmp = tempfile::tempdir().unwrap();
    let config_path = tmp.path().join("config.toml");
    std::fs::write(&config_path, NEIGHBORS_DIFFERENCE).unwrap();
    let runs: Vec<LoadedRun> = (0..3)
        .map(|seed| {
            // One training at a time: the device RNG that draws the initial weights is shared by
            // every thread, and a run training beside another could start from other weights.
            let _rng = model::init::take_rng_turn();
            let run_dir = tmp.path().join(format!("seed-{seed}"));
            let seed = format!("seed={seed}");
            common::train_run(&config_path, &[&seed, "train.snapshot_every=0"], &run_dir);
            inspect::load::loaded_run::load(&run_dir, None).unwrap()
        })
        .collect();
    let comparison = compare(&runs, &tmp.path().join("compare"), 32, false).unwrap();

    // Each head's lean, measured independently of `compare` on the reference's probe:
    // previous-token score minus next-token score.
    let reference = &runs[0];
    let seed = reference.resolved.config.seed;
    let probe = (reference.reading)
        .probe(&reference.resolved, (32, seed), 1, &reference.device)
        .unwrap();
    let tokens = probe.token_ids();
    let leans = |run: &LoadedRun| -> Vec<f64> {
        let layers = probe.forward(&run.model);
        head_roles(&run.resolved.task, &layers[0], &tokens)
            .iter()
            .map(|(scores, _)| scores["previous_token"] - scores["next_token"])
            .collect()
    };
    let reference_leans = leans(reference);
    // The reference has one head on each side (the split of the test above).
    assert!(
        reference_leans[0] * reference_leans[1] < 0.0,
        "{reference_leans:?}"
    );
    for (run, compared) in runs.iter().zip(&comparison.runs).skip(1) {
        let run_leans = leans(run);
        assert!(
            run_leans[0] * run_leans[1] < 0.0,
            "seed {}: {run_leans:?}",
            compared.seed
        );
        for (slot, &partner) in compared.layers[0].partner.iter().enumerate() {
            assert!(
                reference_leans[slot] * run_leans[partner] > 0.0,
                "seed {}: slot {slot} (lean {}) matched to head {partner} (lean {})",
                compared.seed,
                reference_leans[slot],
                run_leans[partner]
            );
        }
    }
}
