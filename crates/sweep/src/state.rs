//! Where each run of a sweep stands, read from its run directory and the sweep's own records
//! (`OUT/_sweep/`), so that `sweep run`, `sweep submit` and `sweep status` agree without a
//! database: a run is done when its report is complete and names the run's current files and
//! the sweep's inspect options (`provenance.json`), running while `train` or `inspect` holds its
//! lock, interrupted when it has checkpoints but no final weights, damaged when a file differs
//! from what its manifest recorded ([`run::manifest`]).
//!
//! A state is read from the directory as it is: a `train` killed in its first milliseconds
//! (a lock and a temporary marker) left a run not started, a report of other weights or
//! options is stale, damage found to the byte stays recorded until it is repaired.

use std::fs;
use std::path::{Path, PathBuf};

use report::dir::ReportDir;
use report::provenance::Provenance;
use run::RunDir;
use run::dir::{RunDirError, holds_nothing_yet};
use run::manifest::{Damage, Depth, Verdict};

use crate::spec::{InspectStep, PlannedRun};

/// The sweep's own directory inside its output directory (run names cannot start with `_`).
pub const SWEEP_DIR: &str = "_sweep";

/// A sweep's output directory, as `--out` claims it ([`run::out_dir`]): one written before
/// markers existed is recognised by its `_sweep/`, or by holding run directories alone (a
/// run trained into it by hand, or a `train` the sweep started that was killed before the
/// sweep's first mark).
pub const SWEEP_KIND: run::out_dir::OutKind = run::out_dir::OutKind {
    name: "sweep",
    program: "sweep",
    recognises: |root| root.join(SWEEP_DIR).is_dir() || holds_only_runs(root),
};

/// Whether every entry of `root` is a run directory (a directory, not a link, that holds a
/// run's marker, or nothing a run writes yet), its marker and lock aside.
fn holds_only_runs(root: &Path) -> bool {
    let Ok(entries) = fs::read_dir(root) else {
        return false;
    };
    entries.flatten().all(|entry| {
        let name = entry.file_name();
        let path = entry.path();
        let own = [run::out_dir::MARKER, run::out_dir::LOCK];
        own.iter().any(|n| name == *n)
            || (fs::symlink_metadata(&path).is_ok_and(|meta| meta.is_dir())
                && (path.join(run::dir::MARKER).is_file() || run::dir::holds_nothing_yet(&path)))
    })
}

/// Where a sweep keeps its files.
#[derive(Debug, Clone)]
pub struct SweepOut {
    /// The output directory: one run directory per run, and `_sweep/`.
    pub root: PathBuf,
}

impl SweepOut {
    /// The output directory at `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The run directory of `run`.
    pub fn run_dir(&self, run: &PlannedRun) -> PathBuf {
        self.root.join(&run.name)
    }

    /// `_sweep/`.
    pub fn sweep_dir(&self) -> PathBuf {
        self.root.join(SWEEP_DIR)
    }

    /// `_sweep/logs/NAME.log`: what `train` and `inspect` printed for the run.
    pub fn log_path(&self, run: &PlannedRun) -> PathBuf {
        self.sweep_dir()
            .join("logs")
            .join(format!("{}.log", run.name))
    }

    /// `_sweep/failed/NAME.txt`: why the run's last attempt failed (absent once it succeeds).
    pub fn failure_path(&self, run: &PlannedRun) -> PathBuf {
        self.sweep_dir()
            .join("failed")
            .join(format!("{}.txt", run.name))
    }

    /// `_sweep/damaged/NAME.txt`: damage that only reading every byte finds (a changed byte),
    /// found by `sweep verify` or `sweep report`; the run is read again while it is there.
    pub fn damage_path(&self, run: &PlannedRun) -> PathBuf {
        self.sweep_dir()
            .join("damaged")
            .join(format!("{}.txt", run.name))
    }

    /// `_sweep/damaged/NAME.resumed`: the damaged run's final weights were written again from
    /// its last checkpoint once; if it is damaged again before it is done, the next repair
    /// trains it from the start (the checkpoint may be what is wrong). Removed when it is done.
    pub fn resumed_path(&self, run: &PlannedRun) -> PathBuf {
        self.sweep_dir()
            .join("damaged")
            .join(format!("{}.resumed", run.name))
    }

    /// `_sweep/claims/NAME.lock`: held by the worker that is bringing the run to done.
    pub fn claim_path(&self, run: &PlannedRun) -> PathBuf {
        self.sweep_dir()
            .join("claims")
            .join(format!("{}.lock", run.name))
    }

    /// `_sweep/slurm/`: batch scripts, job ids and Slurm's output files.
    pub fn slurm_dir(&self) -> PathBuf {
        self.sweep_dir().join("slurm")
    }
}

/// A run's state.
#[derive(Debug, Clone, PartialEq)]
pub enum RunState {
    /// No run directory yet (or an empty one).
    NotStarted,
    /// A run whose creation was cut short before its first checkpoint: started again.
    Unfinished,
    /// Checkpoints but no final weights: resumed.
    Interrupted,
    /// Trained, report missing or incomplete.
    Trained,
    /// Trained, with a complete report of other weights or other options than the sweep's
    /// (the message says which): measured again.
    StaleReport(String),
    /// Trained and (if the sweep inspects) inspected.
    Done,
    /// Another process (`train` or `inspect`) holds the run.
    Running(String),
    /// The last attempt failed; the message says why.
    Failed(String),
    /// The directory is not this run: another config, not a run, unreadable. Never touched.
    Conflict(String),
    /// A finished run or report whose files are not what its manifest recorded: never
    /// counted in a report; `sweep run` trains or inspects it again.
    Damaged(Damaged),
}

/// What is damaged in a run: which part, and each file's damage.
#[derive(Debug, Clone, PartialEq)]
pub struct Damaged {
    /// The run's own files, or its report's.
    pub part: Part,
    /// Each file not as recorded, its path relative to the part's directory.
    pub damages: Vec<Damage>,
}

/// The two sealed parts of a run directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// What `train` wrote (manifest.json at the top of the run directory).
    Run,
    /// What `inspect` wrote (inspect/manifest.json).
    Report,
}

impl Damaged {
    /// One line: every damaged file with what is wrong, paths from the run directory.
    pub fn describe(&self) -> String {
        let prefix = match self.part {
            Part::Run => "",
            Part::Report => "inspect/",
        };
        let files: Vec<String> = self
            .damages
            .iter()
            .map(|d| format!("{prefix}{d}"))
            .collect();
        files.join("; ")
    }

    /// Whether only the final weights are damaged: the newest checkpoint (the run's last
    /// step) writes them again exactly, without training.
    pub fn only_final_weights(&self) -> bool {
        self.part == Part::Run
            && self
                .damages
                .iter()
                .all(|d| d.file == run::dir::FINAL_WEIGHTS)
    }
}

impl RunState {
    /// Short label for tables and `sweep status`.
    pub fn label(&self) -> &'static str {
        match self {
            RunState::NotStarted | RunState::Unfinished => "left",
            RunState::Interrupted => "interrupted",
            RunState::Trained => "trained",
            RunState::StaleReport(_) => "stale",
            RunState::Done => "done",
            RunState::Running(_) => "running",
            RunState::Failed(_) => "failed",
            RunState::Conflict(_) => "conflict",
            RunState::Damaged(_) => "damaged",
        }
    }

    /// Whether the run needs `train` (rather than `inspect` or nothing): not started,
    /// interrupted, failed, or its own files damaged.
    pub fn needs_training(&self) -> bool {
        match self {
            RunState::NotStarted
            | RunState::Unfinished
            | RunState::Interrupted
            | RunState::Failed(_) => true,
            RunState::Damaged(damaged) => damaged.part == Part::Run,
            RunState::Trained
            | RunState::StaleReport(_)
            | RunState::Done
            | RunState::Running(_)
            | RunState::Conflict(_) => false,
        }
    }

    /// Whether `sweep run` and `sweep submit` have work to do on the run.
    pub fn needs_work(&self) -> bool {
        matches!(
            self,
            RunState::NotStarted
                | RunState::Unfinished
                | RunState::Interrupted
                | RunState::Trained
                | RunState::StaleReport(_)
                | RunState::Failed(_)
                | RunState::Damaged(_)
        )
    }
}

/// Reads the state of `run` under `out`. `inspect` is the sweep's inspect step: whether and
/// how it inspects its runs.
pub fn run_state(out: &SweepOut, run: &PlannedRun, inspect: &InspectStep) -> RunState {
    let state = directory_state(out, run, inspect);
    if state.needs_work()
        && let Ok(reason) = fs::read_to_string(out.failure_path(run))
    {
        let first = reason.lines().next().unwrap_or("failed").to_string();
        return RunState::Failed(first);
    }
    state
}

/// [`run_state`] from the run directory alone, without the failure record. The manifests are
/// checked to [`Depth::Sizes`] (a `stat` per file): a truncated, grown or deleted file shows;
/// [`verify_run`] reads the contents too.
pub fn directory_state(out: &SweepOut, run: &PlannedRun, inspect: &InspectStep) -> RunState {
    let path = out.run_dir(run);
    match fs::symlink_metadata(&path) {
        Err(_) => return RunState::NotStarted,
        Ok(meta) if meta.file_type().is_symlink() => {
            return RunState::Conflict(format!(
                "{} is a symbolic link; a sweep writes only into directories it made",
                path.display()
            ));
        }
        Ok(_) => {}
    }
    let dir = match RunDir::open(&path) {
        Ok(dir) => dir,
        Err(RunDirError::Unfinished(_)) => return RunState::Unfinished,
        // Empty, or only the lock a `train` took before the disk filled: nothing to lose.
        Err(RunDirError::NotARun(_)) if holds_nothing_yet(&path) => return RunState::NotStarted,
        // A finished run whose marker or config was damaged does not open: say so. Damage at
        // the same size (a flipped byte) shows only to the byte, read where `verify` or
        // `report` recorded damage: then it is repaired, never a conflict forever.
        Err(error) => {
            let depth = match out.damage_path(run).exists() {
                true => Depth::Contents,
                false => Depth::Sizes,
            };
            return damaged_part(&path, Part::Run, depth)
                .map_or_else(|| RunState::Conflict(error.to_string()), RunState::Damaged);
        }
    };
    if let Err(holder) = dir.lock_for_reading() {
        return RunState::Running(holder.0);
    }
    if let Err(message) = same_config(&dir, run) {
        return RunState::Conflict(message);
    }
    let sealed = match dir.verify(Depth::Sizes) {
        Verdict::Damaged(damages) => {
            return RunState::Damaged(Damaged {
                part: Part::Run,
                damages,
            });
        }
        Verdict::Intact => true,
        Verdict::Unsealed => false,
    };
    // Not sealed: not finished, or cut short between its final weights and its manifest
    // (the newest checkpoint, of the last step, writes both again).
    if !sealed {
        return if has_checkpoint(&dir) {
            RunState::Interrupted
        } else {
            RunState::Unfinished
        };
    }
    // Damage found by reading every byte (`verify`, `report`): checked again to the byte,
    // so that `sweep run` repairs it, and a file restored by hand counts as done again. Before
    // the report's own state: a report is never written of damaged weights.
    if out.damage_path(run).exists()
        && let Some(damaged) = verify_run(out, run, inspect.enabled)
    {
        return RunState::Damaged(damaged);
    }
    match inspect.enabled {
        true => report_state(&dir, inspect),
        false => RunState::Done,
    }
}

/// The state of a trained, intact run's report: its manifest read once, then damaged, not
/// sealed yet, complete but stale, or done.
fn report_state(dir: &RunDir, inspect: &InspectStep) -> RunState {
    let report = ReportDir::of_run(dir);
    match report.verify(Depth::Sizes) {
        Verdict::Damaged(damages) => {
            return RunState::Damaged(Damaged {
                part: Part::Report,
                damages,
            });
        }
        Verdict::Unsealed => return RunState::Trained,
        Verdict::Intact if !report.has_every_report_file() => return RunState::Trained,
        Verdict::Intact => {}
    }
    match stale_report(dir, &report, inspect) {
        Some(why) => RunState::StaleReport(why),
        None => RunState::Done,
    }
}

/// Why the run's complete report is not the sweep's report of the run: it names other files
/// than the run's manifest (other weights: damaged and repaired since, or another run's), or
/// was measured with other options than the sweep file's `[inspect]` (a hand-run `inspect`, an
/// edited sweep file); `None` when it is the one.
fn stale_report(dir: &RunDir, report: &ReportDir, inspect: &InspectStep) -> Option<String> {
    let provenance = match report.read_json::<Provenance>() {
        Ok(provenance) => provenance,
        Err(error) => return Some(format!("its report does not say what it measured: {error}")),
    };
    let Some(current) = dir.measured_inputs() else {
        return Some("the run's manifest cannot be read".to_string());
    };
    if let Some(why) = provenance.unmatched_inputs(&current) {
        return Some(format!("its report is of other files: {why}"));
    }
    let differences = provenance
        .measured_with
        .differences(&inspect.measured_with(inspect::load::text::default_probe(dir)));
    (!differences.is_empty()).then(|| {
        format!(
            "its report was measured with other options than the sweep file's: {}",
            differences.join(", ")
        )
    })
}

/// Records damage that [`verify_run`] found, so that `status` and `run` see it without
/// reading every byte themselves. Best effort: without the record the damage is found again
/// by the next `verify` or `report`.
pub fn record_damage(out: &SweepOut, run: &PlannedRun, damaged: &Damaged) {
    write_note(&out.damage_path(run), &damaged.describe());
}

/// Notes that the damaged run's final weights are being written again from its last
/// checkpoint ([`SweepOut::resumed_path`]); best effort, as [`record_damage`].
pub fn record_resumed(out: &SweepOut, run: &PlannedRun) {
    write_note(&out.resumed_path(run), "repaired from the last checkpoint");
}

/// Forgets what [`record_damage`] and [`record_resumed`] noted of a run that is done.
pub fn forget_damage(out: &SweepOut, run: &PlannedRun) {
    let _ = fs::remove_file(out.damage_path(run));
    let _ = fs::remove_file(out.resumed_path(run));
}

/// `line` as the file at `path` (under `_sweep/`), its folder made first; best effort.
fn write_note(path: &Path, line: &str) {
    if let Some(dir) = path.parent() {
        let _ = fs::create_dir_all(dir);
    }
    let _ = run::atomic::write_atomic(path, format!("{line}\n").as_bytes());
}

/// The damage of the part at `root` against its manifest, to `depth`; none when it is intact
/// or unsealed.
fn damaged_part(root: &Path, part: Part, depth: Depth) -> Option<Damaged> {
    match run::manifest::check(root, depth) {
        Verdict::Damaged(damages) => Some(Damaged { part, damages }),
        Verdict::Intact | Verdict::Unsealed => None,
    }
}

/// A done run checked to the last byte ([`Depth::Contents`]): its own files, then its report's
/// (when the sweep inspects). What `sweep verify` and `sweep report` ask of every done run.
pub fn verify_run(out: &SweepOut, run: &PlannedRun, inspect: bool) -> Option<Damaged> {
    let root = out.run_dir(run);
    damaged_part(&root, Part::Run, Depth::Contents).or_else(|| {
        inspect
            .then(|| damaged_part(&root.join(run::dir::REPORT), Part::Report, Depth::Contents))
            .flatten()
    })
}

/// The run's own config must be the one the sweep would give it ([`RunDir::config_difference`],
/// the rule `train --resume` uses too): a sweep file edited after the run started must not
/// resume a run of another config or count it as this one.
fn same_config(dir: &RunDir, run: &PlannedRun) -> Result<(), String> {
    let planned = run.resolved_config().map_err(|e| e.to_string())?;
    match dir.config_difference(&planned).map_err(|e| e.to_string())? {
        None => Ok(()),
        Some(key) => Err(format!(
            "{} holds a run of another config than the sweep's (`{key}` differs: was the \
             sweep file or a base config edited?); it was left as it is: move it away to train \
             it again, or restore the sweep file",
            dir.root().display()
        )),
    }
}

/// Whether the run has a checkpoint to resume from.
pub(crate) fn has_checkpoint(dir: &RunDir) -> bool {
    !run::checkpoint::list(dir).is_empty()
}
