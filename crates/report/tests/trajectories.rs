//! Role trajectories and task-target scores on a tiny trained run with snapshots: the
//! trajectory of every head ends on the final model, so its last point is that head's role
//! and pattern scores in `heads.json`; and on the reverse task, whose exact targets are the
//! anti-diagonal, `task_target_score` is the anti-diagonal pattern score.

mod common;

use std::path::{Path, PathBuf};

use inspect::inspection::MeasureOptions;
use inspect::measures::trajectories::Trajectories;
use report::{Report, ReportOptions, write_report};

const TINY: &str = testkit::TINY_CONFIG;

/// Trains the tiny config with `overrides` and writes its report (probe of 8) into
/// `TMP/report`: the temporary directory (kept alive), the report directory and the report.
fn trained_report(overrides: &[&str]) -> (tempfile::TempDir, PathBuf, Report) {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run");
    common::train_run(Path::new(TINY), overrides, &run);
    let loaded = inspect::load::loaded_run::load(&run, None).unwrap();
    let out = tmp.path().join("report");
    let options = ReportOptions {
        measure: MeasureOptions {
            probe_size: 8,
            ..MeasureOptions::default()
        },
        ..ReportOptions::default()
    };
    let report = write_report(&loaded, &out, &options).unwrap();
    (tmp, out, report)
}

#[test]
fn the_last_point_of_each_trajectory_is_the_final_head() {
    // Two layers, so the matches are chained per layer; snapshots every 5 of 20 steps.
    let (_tmp, out, report) = trained_report(&["model.n_layers=2"]);

    let written: Trajectories =
        serde_json::from_slice(&std::fs::read(out.join("trajectories.json")).unwrap()).unwrap();
    let trajectories = report.measured.trajectories.as_ref().unwrap();
    // What was written reads back, up to the last digit serde_json prints.
    for (read, kept) in written.heads.iter().zip(&trajectories.heads) {
        assert_eq!((&read.steps, &read.roles), (&kept.steps, &kept.roles));
        assert_eq!(
            (&read.heads, read.role_formed_at),
            (&kept.heads, kept.role_formed_at)
        );
        for (a, b) in read.pattern_scores.iter().zip(&kept.pattern_scores) {
            assert!(
                a.iter()
                    .zip(b)
                    .all(|(a, b)| a.0 == b.0 && (a.1 - b.1).abs() < 1e-12)
            );
        }
    }
    assert_eq!(
        (written.snapshots_available, written.snapshots_used),
        (5, 4)
    );
    assert_eq!(trajectories.heads.len(), report.measured.heads.len());
    for (trajectory, head) in trajectories.heads.iter().zip(&report.measured.heads) {
        assert_eq!(trajectory.id, head.id);
        // Snapshots at 0..15, then the final model at step 20 (its snapshot is the same
        // weights and is left out).
        assert_eq!(trajectory.steps, [0, 5, 10, 15, 20]);
        assert_eq!(trajectory.heads.last(), Some(&head.id.head));
        assert_eq!(trajectory.roles.last(), Some(&head.role));
        assert_eq!(trajectory.pattern_scores.last(), Some(&head.pattern_scores));
        let n_heads = 2;
        assert!(trajectory.heads.iter().all(|&h| h < n_heads));
        if head.role == "mixed" {
            assert_eq!(trajectory.role_formed_at, None);
        } else {
            let formed = trajectory.role_formed_at.unwrap();
            let from = trajectory.steps.iter().position(|&s| s == formed).unwrap();
            assert!(trajectory.roles[from..].iter().all(|r| *r == head.role));
        }
        // Reverse: the exact target of position i is n-1-i.
        let target = head.task_target_score.unwrap();
        assert_eq!(target, head.pattern_scores["anti_diagonal"]);
    }
    assert!(out.join("figures").join("trajectories.png").exists());
    let page = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(page.contains("trajectories.json"), "listed on the page");
}

#[test]
fn a_run_without_snapshots_has_no_trajectories() {
    let (_tmp, out, report) = trained_report(&["train.snapshot_every=0"]);
    assert_eq!(report.measured.trajectories, None);
    assert!(!out.join("trajectories.json").exists());
    assert!(!out.join("figures").join("trajectories.png").exists());
}
