//! Running one run of a sweep: `headlab train` (new, resumed or restarted as the run's state
//! says), then `headlab inspect`, as child processes of the running `headlab` binary. A child runs in its own process group, so a Ctrl-C at the terminal reaches only
//! `sweep`, which passes exactly one SIGTERM on: `train` then checkpoints and exits, and
//! the next `sweep run` (or `submit`) resumes it. Both the local pool and a Slurm array task
//! run a run through [`execute`].
//!
//! A run is claimed before anything looks at it: the worker takes `_sweep/claims/NAME.lock`
//! (an advisory `flock`, released when the worker's process dies however it dies) and holds
//! it while it decides what the run needs and runs it, so two runners of one sweep never
//! both work on a run; the second skips it as held. On Linux each child also asks the
//! kernel for SIGUSR2 when the thread that started it dies (`PR_SET_PDEATHSIG`), so a
//! `sweep` killed by any signal, SIGKILL included, leaves no `train` or `inspect` running:
//! each checkpoints and exits.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use run::StopSignal;
use run::dir::EXIT_RUN_IN_USE;

use crate::spec::{InspectStep, PlannedRun};
use crate::state::{
    Damaged, Part, RunState, SweepOut, directory_state, forget_damage, has_checkpoint,
    record_damage, record_resumed, verify_run,
};

/// The `headlab` binary a sweep runs its children with (`headlab train ...`, `headlab
/// inspect ...`): the one running `headlab sweep`, so a sweep's children are always of the
/// same build as the sweep.
#[derive(Debug, Clone)]
pub struct Headlab {
    /// The binary's path.
    pub path: PathBuf,
}

impl Headlab {
    /// The running binary.
    pub fn current() -> Result<Headlab, String> {
        let path = std::env::current_exe()
            .map_err(|e| format!("cannot find the headlab binary's own path: {e}"))?;
        Ok(Headlab { path })
    }

    /// `headlab SUBCOMMAND`, to add arguments to.
    pub fn command(&self, subcommand: &str) -> Command {
        let mut command = Command::new(&self.path);
        command.arg(subcommand);
        command
    }
}

/// How one attempt at a run ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Attempt {
    /// Already done: nothing ran.
    AlreadyDone,
    /// Trained (or resumed) and inspected now.
    Done,
    /// Stopped by a signal: `train` saved a checkpoint (or `inspect` stopped); run it again.
    Interrupted,
    /// Another process holds the run.
    Busy(String),
    /// Failed; the message says why (and is in `_sweep/failed/NAME.txt`).
    Failed(String),
}

/// What one run needs besides its plan.
#[derive(Debug, Clone)]
pub struct RunContext<'a> {
    /// The sweep's output directory.
    pub out: &'a SweepOut,
    /// The binary the children run.
    pub headlab: &'a Headlab,
    /// The inspect step.
    pub inspect: &'a InspectStep,
    /// Threads each child may use (`RAYON_NUM_THREADS`).
    pub threads: usize,
    /// Set when the sweep is asked to stop.
    pub stop: &'a StopSignal,
}

/// Brings `run` to done: trains, resumes or restarts it, then inspects it. Skips it as held
/// when another runner has claimed it or another process holds its directory.
pub fn execute(run: &PlannedRun, context: &RunContext) -> Attempt {
    let _claim = match claim(context.out, run) {
        Ok(Some(claim)) => claim,
        Ok(None) => return Attempt::Busy("another sweep runner".to_string()),
        Err(error) => {
            return record_failure(&context.out.failure_path(run), error);
        }
    };
    execute_claimed(run, context, Grouped::No)
}

/// Whether a run trains with a seed group of more than one: then only its group may train
/// it, even to repair it (alone, its numbers would differ from the group's in the last bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Grouped {
    No,
    Yes,
}

/// Brings the runs of `group` (one grid point, different seeds) to done: while any needs
/// training, the whole group trains together as one batched model (`group_training`), so
/// that a fault never leaves a seed to train alone or in a smaller stack (whose numbers would
/// differ in their last bits); then each goes on alone (inspect) as [`execute`] takes it. A
/// group of one is [`execute`]. Returns each run's attempt.
pub fn execute_group(group: &[PlannedRun], context: &RunContext) -> Vec<(PlannedRun, Attempt)> {
    if group.len() == 1 {
        return vec![(group[0].clone(), execute(&group[0], context))];
    }
    let out = context.out;
    // The group is claimed whole first: two runners never split a group between them.
    let _group_claim = match claim_group(out, &group[0]) {
        Ok(Some(claim)) => claim,
        Ok(None) => {
            return group
                .iter()
                .map(|run| (run.clone(), Attempt::Busy("another sweep runner".into())))
                .collect();
        }
        Err(error) => {
            return group
                .iter()
                .map(|run| {
                    (
                        run.clone(),
                        record_failure(&out.failure_path(run), error.clone()),
                    )
                })
                .collect();
        }
    };
    let mut results = Vec::new();
    let mut claimed = Vec::new();
    for run in group {
        match claim(out, run) {
            Ok(Some(file)) => claimed.push((run, file)),
            Ok(None) => results.push((run.clone(), Attempt::Busy("another sweep runner".into()))),
            Err(error) => {
                results.push((run.clone(), record_failure(&out.failure_path(run), error)))
            }
        }
    }
    // A child killed by a fault leaves the group to train again, at most three times here.
    let runs: Vec<&PlannedRun> = claimed.iter().map(|(run, _)| *run).collect();
    let mut plan = GroupPlan::Nothing;
    for _ in 0..3 {
        plan = if claimed.len() == group.len() {
            group_training(&runs, context)
        } else {
            GroupPlan::Blocked("another sweep runner holds a run of its seed group".into())
        };
        let GroupPlan::Train(mode) = plan else {
            break;
        };
        if context.stop.requested().is_some() {
            break;
        }
        train_together(&runs, mode, context);
    }
    // Each run on its own now: trained ones are inspected. One still to train is never
    // trained alone (its numbers would differ from its group's in the last bits): it waits
    // for its group, or fails with the group's log.
    for (run, _claim) in claimed {
        let attempt = if context.stop.requested().is_some() {
            Attempt::Interrupted
        } else if directory_state(out, run, context.inspect).needs_training() {
            match &plan {
                GroupPlan::Blocked(why) => Attempt::Busy(why.clone()),
                _ => record_failure(
                    &out.failure_path(run),
                    "its seed group trained together (train --seeds) did not finish it; see \
                     its log"
                        .to_string(),
                ),
            }
        } else {
            execute_claimed(run, context, Grouped::Yes)
        };
        results.push((run.clone(), attempt));
    }
    results.sort_by_key(|(run, _)| run.index);
    results
}

/// What a seed group's runs need of `train --seeds`.
#[derive(Debug, Clone, PartialEq)]
enum GroupPlan {
    /// No run needs training.
    Nothing,
    /// A run is held elsewhere or in conflict: the group cannot train now.
    Blocked(String),
    /// The whole group trains with this mode.
    Train(&'static str),
}

/// How the whole group trains now, if any of its runs needs training: `--resume` from the
/// newest step every run has a checkpoint of (finished runs too: they train from there to
/// the same result again), `--force` from the start when there is no such step or a run's
/// own files are damaged beyond its final weights (a checkpoint does not restore what was
/// written before it).
fn group_training(runs: &[&PlannedRun], context: &RunContext) -> GroupPlan {
    let out = context.out;
    let mut needs_training = false;
    let mut fresh_start = false;
    for run in runs {
        match verified_state(run, context) {
            RunState::Running(holder) => return GroupPlan::Blocked(holder),
            RunState::Conflict(why) => {
                return GroupPlan::Blocked(format!("a run of its seed group: {why}"));
            }
            RunState::Damaged(damaged) if damaged.part == Part::Run => {
                needs_training = true;
                fresh_start |= !damaged.only_final_weights();
            }
            state => needs_training |= state.needs_training(),
        }
    }
    if !needs_training {
        return GroupPlan::Nothing;
    }
    let dirs: Vec<run::RunDir> = runs
        .iter()
        .filter_map(|run| run::RunDir::open(&out.run_dir(run)).ok())
        .collect();
    let common = (dirs.len() == runs.len())
        .then(|| run::checkpoint::newest_common(dirs.iter()))
        .flatten();
    GroupPlan::Train(if common.is_some() && !fresh_start {
        "--resume"
    } else {
        "--force"
    })
}

/// The run's state, a trained run's own files read to the last byte: damage that only that
/// finds (a flipped sign, the same size) is recorded, and the run is damaged. What a seed
/// group asks before it decides how to train, so that the group, never the run alone,
/// repairs it.
fn verified_state(run: &PlannedRun, context: &RunContext) -> RunState {
    match directory_state(context.out, run, context.inspect) {
        state @ (RunState::Trained | RunState::StaleReport(_)) => {
            match verify_run(context.out, run, false) {
                Some(damaged) => {
                    record_damage(context.out, run, &damaged);
                    RunState::Damaged(damaged)
                }
                None => state,
            }
        }
        state => state,
    }
}

/// `train --seeds` for `runs` (one grid point) with `mode` (`--force` or `--resume`), its
/// output appended to every run's log. What it leaves each run to do is read back from the
/// run directories.
fn train_together(runs: &[&PlannedRun], mode: &str, context: &RunContext) {
    let first = runs[0];
    let seeds: Vec<String> = runs.iter().map(|r| r.seed.to_string()).collect();
    let mut command = context.headlab.command("train");
    command.arg(&first.config).arg("--quiet").arg(mode);
    command.arg("--seeds").arg(seeds.join(","));
    for run in runs {
        command.arg("--out").arg(context.out.run_dir(run));
    }
    // The fixed and grid overrides, not the seed: `--seeds` sets each run's.
    for set in first.overrides.iter().filter(|s| !s.starts_with("seed=")) {
        command.arg("--set").arg(set);
    }
    let group_log = context
        .out
        .sweep_dir()
        .join("logs")
        .join(format!("group-{}.log", first.name));
    let Ok(mut log) = open_log(&group_log) else {
        return; // each run then trains alone, and its own log says why if that fails too
    };
    let _ = run_child(command, &mut log, context);
    let text = fs::read_to_string(&group_log).unwrap_or_default();
    for run in runs {
        if let Ok(mut log) = open_log(&context.out.log_path(run)) {
            let _ = writeln!(
                log,
                "# trained together with {} other seeds ({}):",
                runs.len() - 1,
                group_log.display()
            );
            let _ = log.write_all(text.as_bytes());
        }
    }
    let _ = fs::remove_file(&group_log);
}

/// [`execute`] for a run this process has claimed.
fn execute_claimed(run: &PlannedRun, context: &RunContext, grouped: Grouped) -> Attempt {
    let out = context.out;
    let failure = out.failure_path(run);
    let log_path = out.log_path(run);
    let mut log = match open_log(&log_path) {
        Ok(log) => log,
        Err(error) => {
            return record_failure(
                &failure,
                format!("cannot write the log {}: {error}", log_path.display()),
            );
        }
    };
    // Train (or resume, or restart), then inspect: two children at most, a third pass only
    // to see the run done.
    let mut ran = false;
    for _ in 0..3 {
        if context.stop.requested().is_some() {
            return Attempt::Interrupted;
        }
        // The directory says what to do; a failure record only reports the last attempt.
        let command = match directory_state(out, run, context.inspect) {
            RunState::Done => {
                let _ = fs::remove_file(&failure);
                forget_damage(out, run);
                return if ran {
                    Attempt::Done
                } else {
                    Attempt::AlreadyDone
                };
            }
            RunState::Running(holder) => return Attempt::Busy(holder),
            RunState::Conflict(message) => return record_failure(&failure, message),
            RunState::NotStarted | RunState::Failed(_) => train_command(run, context, None),
            RunState::Unfinished => train_command(run, context, Some("--force")),
            RunState::Interrupted => train_command(run, context, Some("--resume")),
            state @ (RunState::Trained | RunState::StaleReport(_)) => {
                match verified_inspect(&state, run, context, &mut log, grouped) {
                    Ok(command) => command,
                    Err(attempt) => return attempt,
                }
            }
            RunState::Damaged(damaged) => repair_command(&damaged, run, context, &mut log),
        };
        ran = true;
        match run_child(command, &mut log, context) {
            Ok(status) if status.success() => {}
            Ok(status) => {
                if let Some(attempt) = refused_as_damaged(status, run, context, grouped, &mut log) {
                    return attempt;
                }
            }
            Err(error) => return record_failure(&failure, error),
        }
    }
    // The last child may have been the one that finished it (train, a repair, then inspect).
    if directory_state(out, run, context.inspect) == RunState::Done {
        let _ = fs::remove_file(&failure);
        forget_damage(out, run);
        return Attempt::Done;
    }
    record_failure(
        &failure,
        "train, repair and inspect succeeded but the run is still not done; see its log"
            .to_string(),
    )
}

/// For a child that ended with `status`, not a success: `None` when it refused the run's
/// files because they are damaged at the same size, made between the sweep's check and its
/// read (a weight flipped while `inspect` loaded it, which it refuses): the damage is
/// recorded, to be repaired as any damage `verify` finds, from the last checkpoint, in this
/// attempt (a run of a seed group: by its group, at the next sweep run, a failure recorded
/// meanwhile). Else how the attempt ended ([`unsuccessful`]). Not a failed attempt: a failure
/// record would make the repair train again from the start.
fn refused_as_damaged(
    status: ExitStatus,
    run: &PlannedRun,
    context: &RunContext,
    grouped: Grouped,
    log: &mut File,
) -> Option<Attempt> {
    let out = context.out;
    let damaged = (status.code() == Some(1))
        .then(|| verify_run(out, run, false))
        .flatten();
    let Some(damaged) = damaged else {
        return Some(unsuccessful(status, run, context));
    };
    record_damage(out, run, &damaged);
    let _ = writeln!(log, "# damaged while it was read: {}", damaged.describe());
    if grouped == Grouped::Yes {
        return Some(left_to_its_group(run, &damaged, context));
    }
    None
}

/// A damaged run of a seed group, never repaired alone: a failure recorded that says its
/// group repairs it at the next sweep run (which finds the damage record first).
fn left_to_its_group(run: &PlannedRun, damaged: &Damaged, context: &RunContext) -> Attempt {
    let why = format!(
        "damaged: {}; its seed group trains it again at the next sweep run",
        damaged.describe()
    );
    record_failure(&context.out.failure_path(run), why)
}

/// How an attempt whose child ended with `status`, not a success, ended: a clean stop, held
/// by another process, done after all, or a failure recorded with its cause.
fn unsuccessful(status: ExitStatus, run: &PlannedRun, context: &RunContext) -> Attempt {
    let out = context.out;
    let failure = out.failure_path(run);
    let log_path = out.log_path(run);
    match status.code() {
        // 128 + SIGHUP, SIGINT, SIGUSR2, SIGTERM: a clean stop with a checkpoint.
        Some(129 | 130 | 140 | 143) => Attempt::Interrupted,
        // Ended by one of those signals itself (an `inspect`, which has no checkpoint to
        // write, takes the signal's default action): a clean stop too, its report left
        // unsealed for the next run to write whole.
        None if stopped_by_request(&status) => Attempt::Interrupted,
        // A process outside the sweep (a user's own `train`) took the run between our look
        // and the child's lock: the run is held, not failed.
        Some(code) if code == i32::from(EXIT_RUN_IN_USE) => {
            Attempt::Busy(last_error_line(&log_tail(&log_path, 6)))
        }
        // A child that dies after its last write (an `inspect` killed once the report's
        // `index.html` was in place) left the run done: not a failure.
        _ if directory_state(out, run, context.inspect) == RunState::Done => {
            let _ = fs::remove_file(&failure);
            Attempt::Done
        }
        code => {
            let ended = code.map_or_else(
                || "was killed by a signal".to_string(),
                |c| format!("exited with {c}"),
            );
            let tail = log_tail(&log_path, 6);
            record_failure(
                &failure,
                format!("{ended}: {}\n{tail}", last_error_line(&tail)),
            )
        }
    }
}

/// The child for a trained run whose report is missing, unfinished or stale: `inspect`, once
/// the run's own files are read to the last byte against its manifest. A damage that only
/// reading every byte finds (a flipped sign, the same size) is repaired first: a report is
/// never measured of damaged weights (and `inspect` would refuse them).
///
/// A run of a seed group is never repaired alone: its damage is recorded, and its group
/// repairs it at the next `sweep run` (or `submit`), which finds the record first.
fn verified_inspect(
    state: &RunState,
    run: &PlannedRun,
    context: &RunContext,
    log: &mut File,
    grouped: Grouped,
) -> Result<Command, Attempt> {
    if let Some(damaged) = verify_run(context.out, run, false) {
        record_damage(context.out, run, &damaged);
        if grouped == Grouped::Yes {
            return Err(left_to_its_group(run, &damaged, context));
        }
        return Ok(repair_command(&damaged, run, context, log));
    }
    if let RunState::StaleReport(why) = state {
        let _ = writeln!(log, "# {why}; inspecting it again");
    }
    Ok(inspect_command(run, context))
}

/// The child that repairs a damaged run, said in its log: the report inspected again; only
/// the final weights written again from a checkpoint (`--resume`: from the last step's, no
/// training); anything else of the run, or final weights with no checkpoint left or whose
/// repair from one failed before, trained again from the start (`--force`: a checkpoint does
/// not record the metrics and snapshots before it). Training is deterministic, so either
/// repair writes the same bytes as the first training did.
fn repair_command(
    damaged: &Damaged,
    run: &PlannedRun,
    context: &RunContext,
    log: &mut File,
) -> Command {
    // Once only: a repair from the checkpoint that did not make the run whole (the damage
    // found again before it is done) is followed by training from the start. Any other
    // failure of the run (a full disk, a kill) does not stand in the way of it.
    let resumable = || {
        run::RunDir::open(&context.out.run_dir(run)).is_ok_and(|dir| has_checkpoint(&dir))
            && !context.out.resumed_path(run).exists()
    };
    let (repair, command) = match damaged.part {
        Part::Report => ("inspecting it again", inspect_command(run, context)),
        Part::Run if damaged.only_final_weights() && resumable() => {
            record_resumed(context.out, run);
            (
                "writing the final weights again from the last step's checkpoint",
                train_command(run, context, Some("--resume")),
            )
        }
        Part::Run => (
            "training it again from the start",
            train_command(run, context, Some("--force")),
        ),
    };
    let _ = writeln!(log, "# damaged: {}; {repair}", damaged.describe());
    command
}

fn train_command(run: &PlannedRun, context: &RunContext, mode: Option<&str>) -> Command {
    let mut command = context.headlab.command("train");
    command
        .arg(&run.config)
        .arg("--out")
        .arg(context.out.run_dir(run))
        .arg("--quiet");
    for set in &run.overrides {
        command.arg("--set").arg(set);
    }
    if let Some(mode) = mode {
        command.arg(mode);
    }
    command
}

fn inspect_command(run: &PlannedRun, context: &RunContext) -> Command {
    let mut command = context.headlab.command("inspect");
    command
        .arg(context.out.run_dir(run))
        .args(context.inspect.args());
    command
}

/// Runs `command` with its output appended to `log`, passing one SIGTERM on when the sweep
/// is asked to stop.
fn run_child(
    mut command: Command,
    log: &mut File,
    context: &RunContext,
) -> Result<ExitStatus, String> {
    let shown = format!("{command:?}");
    writeln!(log, "$ {shown}").map_err(|e| format!("cannot write the log: {e}"))?;
    let stdout = log.try_clone().map_err(|e| e.to_string())?;
    let stderr = log.try_clone().map_err(|e| e.to_string())?;
    command
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        .env("RAYON_NUM_THREADS", context.threads.to_string())
        // Its own process group: the terminal's Ctrl-C goes to `sweep` alone, which sends one
        // SIGTERM (a second signal would make `train` abort without its checkpoint).
        .process_group(0);
    terminate_with_parent(&mut command);
    let mut child = command
        .spawn()
        .map_err(|e| format!("cannot start {shown}: {e}"))?;
    wait_forwarding_stop(&mut child, context.stop).map_err(|e| format!("waiting for {shown}: {e}"))
}

fn wait_forwarding_stop(child: &mut Child, stop: &StopSignal) -> io::Result<ExitStatus> {
    let mut forwarded = false;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(status);
        }
        if !forwarded && stop.requested().is_some() {
            terminate(child.id());
            forwarded = true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Takes the claim on `run` (`_sweep/claims/NAME.lock`): `None` when another process holds
/// it. The claim lasts as long as the returned file is open, and no longer than this process.
fn claim(out: &SweepOut, run: &PlannedRun) -> Result<Option<File>, String> {
    lock_claim(out.claim_path(run))
}

/// The claim of the group whose first run is `first` (`_sweep/claims/groups/NAME.lock`),
/// taken before its runs' own.
fn claim_group(out: &SweepOut, first: &PlannedRun) -> Result<Option<File>, String> {
    let run_claim = out.claim_path(first);
    let dir = run_claim.parent().unwrap_or(Path::new(".")).join("groups");
    lock_claim(dir.join(format!("{}.lock", first.name)))
}

/// Takes the advisory lock at `path`: the file, or none when another process holds it.
fn lock_claim(path: PathBuf) -> Result<Option<File>, String> {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent)
            .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    }
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| format!("cannot open the claim {}: {e}", path.display()))?;
    match file.try_lock() {
        Ok(()) => Ok(Some(file)),
        Err(fs::TryLockError::WouldBlock) => Ok(None),
        Err(fs::TryLockError::Error(e)) => {
            Err(format!("cannot lock the claim {}: {e}", path.display()))
        }
    }
}

/// On Linux: the child gets SIGUSR2 when the thread that started it dies (by any signal,
/// SIGKILL included), and at once if that happened before the request took effect. `train`
/// stops on it as on SIGTERM, with a checkpoint, but never aborts on a repeat: the kernel
/// sends it again each time the child passes to another dying thread of the sweep, and a
/// second SIGTERM would abort without the checkpoint. Elsewhere nothing: a killed `sweep`
/// leaves its children running.
#[cfg(target_os = "linux")]
fn terminate_with_parent(command: &mut Command) {
    // SAFETY: runs in the child between fork and exec, where only async-signal-safe calls
    // are allowed: getpid, getppid, prctl and kill are. The closure reads only `parent`, a
    // plain integer copied in before the fork.
    let parent = std::process::id() as libc::pid_t;
    #[allow(unsafe_code)]
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGUSR2) != 0 {
                return Err(io::Error::last_os_error());
            }
            // The parent died before prctl: nobody will send the signal.
            if libc::getppid() != parent {
                libc::kill(libc::getpid(), libc::SIGUSR2);
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn terminate_with_parent(_command: &mut Command) {}

/// Sends SIGTERM to the child `pid`.
fn terminate(pid: u32) {
    // SAFETY: kill(2) takes plain integers and touches no memory of this process; `pid` is a
    // child this process has not yet reaped (try_wait returned None), so it names that child.
    #[allow(unsafe_code)]
    unsafe {
        libc::kill(pid as libc::pid_t, libc::SIGTERM);
    }
}

fn open_log(path: &Path) -> io::Result<File> {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent)?;
    }
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .read(true)
        .open(path)?;
    file.seek(SeekFrom::End(0))?;
    Ok(file)
}

/// The last `lines` lines of the log.
fn log_tail(path: &Path, lines: usize) -> String {
    let mut text = String::new();
    if let Ok(mut file) = File::open(path) {
        let len = file.metadata().map_or(0, |m| m.len());
        let _ = file.seek(SeekFrom::Start(len.saturating_sub(16 * 1024)));
        let mut bytes = Vec::new();
        let _ = file.read_to_end(&mut bytes);
        text = String::from_utf8_lossy(&bytes).into_owned();
    }
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// The child's `error: ...` line, or its last line.
fn last_error_line(tail: &str) -> String {
    let line = tail
        .lines()
        .rev()
        .find(|l| l.starts_with("error"))
        .or_else(|| tail.lines().last())
        .unwrap_or("no output");
    run::config::excerpt(line, 300)
}

/// Whether a child that died of a signal died of one that asks for a clean stop (SIGHUP,
/// SIGINT, SIGTERM, SIGUSR2: a Ctrl-C passed on, a scheduler's cancel, its sweep's death) and
/// not of a kill or a crash.
fn stopped_by_request(status: &ExitStatus) -> bool {
    use std::os::unix::process::ExitStatusExt;
    status.signal().is_some_and(|signal| {
        [libc::SIGHUP, libc::SIGINT, libc::SIGTERM, libc::SIGUSR2].contains(&signal)
    })
}

fn record_failure(path: &Path, message: String) -> Attempt {
    if let Some(parent) = path.parent() {
        let _ = fs::create_dir_all(parent);
    }
    let _ = run::atomic::write_atomic(path, message.as_bytes());
    Attempt::Failed(message.lines().next().unwrap_or_default().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `sleep` ended by `signal`, as a sweep sees its child end.
    fn ended_by(signal: libc::c_int) -> ExitStatus {
        use std::os::unix::process::CommandExt;
        let mut command = Command::new("sleep");
        command.arg("30");
        // A shell that starts the tests in the background (`cmd &`) leaves SIGINT ignored,
        // and the child would inherit that and sleep on: give it the default action.
        // SAFETY: signal(2) is async-signal-safe, as pre_exec requires.
        #[allow(unsafe_code)]
        unsafe {
            command.pre_exec(move || {
                libc::signal(signal, libc::SIG_DFL);
                Ok(())
            });
        }
        let mut child = command.spawn().unwrap();
        // SAFETY: kill(2) on a child this test started and has not reaped.
        #[allow(unsafe_code)]
        unsafe {
            libc::kill(child.id() as libc::pid_t, signal);
        }
        child.wait().unwrap()
    }

    /// Issue 52, break 9: an `inspect` stopped by Ctrl-C or SIGTERM (its default action: it
    /// has no handler) is a clean stop, not a failure; a kill or a crash is a failure.
    #[test]
    fn a_child_ended_by_a_stop_signal_stopped_cleanly_and_a_killed_one_did_not() {
        for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGUSR2] {
            assert!(stopped_by_request(&ended_by(signal)), "signal {signal}");
        }
        for signal in [libc::SIGKILL, libc::SIGSEGV, libc::SIGABRT] {
            assert!(!stopped_by_request(&ended_by(signal)), "signal {signal}");
        }
    }
}
