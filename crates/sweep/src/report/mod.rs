//! `sweep report`: every run of a sweep in one table, and what holds across seeds, in three
//! steps: [`collect`] reads each run, [`aggregate`] computes what holds over seeds per grid
//! point, [`render`] writes the tables; [`write_report`] runs them and draws the figures.
//!
//! Writes into `OUT/_sweep/report/`:
//! - `sweep.csv`: one row per run (its state, the grid keys as columns, its training and
//!   report numbers); `heads.csv`: one row per head per run.
//! - `report.md`: per grid point, the mean and 95% confidence interval over seeds of the
//!   headline numbers ([`render::HEADLINE`]; every number in `estimates.csv`); per grid point and layer, how many seeds have a head of each role, against the
//!   same count on untrained models of the same configs and seeds (the null: a role that
//!   untrained models "have" as often says nothing); per grid point, the heads matched across
//!   seeds as `compare` matches them, with each slot's most frequent role; for word tasks
//!   (`grammar`), per relation and direction, the best head's score over seeds against the
//!   best-offset baseline, in how many seeds it beats it (trained, and untrained as the
//!   null), and in which layer it sits.
//! - `estimates.csv`: per grid point and number, the mean and 95% interval over seeds.
//! - `report.json`: all of it, for Python.
//! - `figures/*.png`: per number, its distribution over seeds at each grid point, the grid
//!   keys named on the x axis; `report.md` links them and each point's `compare.html`.

pub mod aggregate;
pub mod collect;
pub mod render;

pub use aggregate::SweepReport;
pub use render::markdown;

use std::path::{Path, PathBuf};

use crate::report::aggregate::{PointReport, group_by_point, match_seeds, point_report};
use crate::report::collect::{NUMBERS, RunRow, read_run};
use crate::report::render::{estimates_csv, heads_csv, runs_csv, slug};
use run::progress::Stages;

use crate::spec::{PlannedRun, Sweep};
use crate::state::SweepOut;

/// The numbers drawn as figures.
const FIGURES: [&str; 4] = [
    "eval_token_acc",
    "steps_to_99",
    "heads_with_role",
    "removable_heads",
];

/// Reads every run, writes the report into `OUT/_sweep/report/` and returns it, telling
/// `stages` as each stage starts.
pub fn write_report(
    sweep: &Sweep,
    out: &SweepOut,
    stages: &mut dyn Stages,
) -> anyhow::Result<SweepReport> {
    let dir = out.sweep_dir().join("report");
    let figures = dir.join("figures");
    std::fs::create_dir_all(&figures)?;
    stages.start("reading the runs");
    let rows: Vec<RunRow> = sweep
        .runs
        .iter()
        .map(|run| read_run(sweep, out, run))
        .collect();
    stages.start("matching heads across seeds");
    let mut points = Vec::new();
    for (point, runs) in group_by_point(sweep) {
        let point_rows: Vec<&RunRow> = runs
            .iter()
            .map(|run| &rows[run.index])
            .filter(|row| row.state == "done")
            .collect();
        let done_runs: Vec<&PlannedRun> = runs
            .iter()
            .copied()
            .filter(|run| rows[run.index].state == "done")
            .collect();
        let matching = match_seeds(out, &done_runs, &dir.join("matching").join(slug(&point)));
        points.push(point_report(point, runs.len(), &point_rows, matching));
    }
    stages.start("the tables and figures");
    let mut files = vec![
        write_file(&dir.join("sweep.csv"), &runs_csv(sweep, &rows))?,
        write_file(&dir.join("heads.csv"), &heads_csv(sweep, &rows))?,
    ];
    // Each figure as PNG and as SVG (a handful of dots per seed: small either way).
    for number in NUMBERS.iter().filter(|n| FIGURES.contains(&n.key)) {
        for extension in ["png", "svg"] {
            let path = figures.join(format!("{}.{extension}", number.key));
            let points = sweep_points(&points, &rows, sweep);
            crate::figures::distribution(&path, number, &x_description(sweep), &points)?;
            files.push(path);
        }
    }
    if points.iter().any(|p| !p.relations.is_empty()) {
        for extension in ["png", "svg"] {
            let path = figures.join(format!("relations.{extension}"));
            crate::figures::relations(&path, &points)?;
            files.push(path);
        }
    }
    let mut report = SweepReport {
        sweep: sweep.name.clone(),
        grid_keys: sweep.grid_keys.clone(),
        runs: rows,
        points,
        files: Vec::new(),
        dir: dir.clone(),
    };
    files.push(write_file(
        &dir.join("estimates.csv"),
        &estimates_csv(&report),
    )?);
    files.extend(["report.md", "report.json"].map(|name| dir.join(name)));
    report.files = files;
    write_file(&dir.join("report.md"), &markdown(&report))?;
    write_file(
        &dir.join("report.json"),
        &serde_json::to_string_pretty(&report)?,
    )?;
    Ok(report)
}

/// Values of each grid point's done runs, for the figures.
fn sweep_points<'a>(
    points: &'a [PointReport],
    rows: &'a [RunRow],
    sweep: &'a Sweep,
) -> Vec<(&'a str, Vec<&'a RunRow>)> {
    points
        .iter()
        .map(|point| {
            let runs = sweep
                .runs
                .iter()
                .filter(|run| run.point() == point.point)
                .map(|run| &rows[run.index])
                .filter(|row| row.state == "done")
                .collect();
            (point.point.as_str(), runs)
        })
        .collect()
}

/// What a figure's x axis shows: the config and each grid key, as its labels list them.
fn x_description(sweep: &Sweep) -> String {
    let mut parts = vec!["config".to_string()];
    parts.extend(sweep.grid_keys.iter().cloned());
    parts.join(", ")
}

fn write_file(path: &Path, text: &str) -> anyhow::Result<PathBuf> {
    run::atomic::write_atomic(path, text.as_bytes())
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    Ok(path.to_path_buf())
}
