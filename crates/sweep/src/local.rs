//! `sweep run`: the runs of a sweep on this machine, N at once (N groups of seeds trained
//! together, with `group_seeds`), with one progress bar over runs. Finished runs are skipped and interrupted ones resumed, so running the sweep again
//! after a crash or a Ctrl-C finishes what is left; one failed run is reported by name and
//! does not stop the others.

use std::collections::VecDeque;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use indicatif::{ProgressBar, ProgressStyle};

use crate::exec::{Attempt, RunContext, execute_group};
use crate::spec::{PlannedRun, Sweep};
use crate::state::{SweepOut, run_state};

/// What a local sweep did.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct PoolSummary {
    /// Runs done before this sweep started.
    pub already_done: usize,
    /// Runs brought to done now.
    pub done: usize,
    /// Failed runs: name and why.
    pub failed: Vec<(String, String)>,
    /// Runs another process holds.
    pub busy: Vec<String>,
    /// Runs stopped by a signal, or not started because of one.
    pub interrupted: usize,
}

/// How to show progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Display {
    /// A progress bar on a terminal, lines otherwise.
    Auto,
    /// Nothing but the final summary.
    Quiet,
}

/// Default workers: the cores, over the threads a run uses (its `train.shards`, or
/// `train.threads` when set), at least one.
pub fn default_workers(sweep: &Sweep) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let per_run = sweep
        .runs
        .iter()
        .filter_map(|run| run.resolved_config().ok())
        .map(|config| config.train.threads.unwrap_or(config.train.shards).max(1))
        .max()
        .unwrap_or(1);
    (cores / per_run).max(1)
}

/// Runs every run of `sweep` that is not done, `workers` at a time.
pub fn run_pool(
    sweep: &Sweep,
    out: &SweepOut,
    context_template: &RunContext,
    workers: usize,
    display: Display,
) -> PoolSummary {
    let mut summary = PoolSummary::default();
    let queue = unfinished_runs(sweep, out, &mut summary);
    let total = sweep.runs.len() as u64;
    let bar = progress_bar(display, total);
    bar.set_position(summary.already_done as u64);
    let queue = Arc::new(Mutex::new(queue));
    let queued_runs = |queue: &VecDeque<Vec<PlannedRun>>| queue.iter().map(Vec::len).sum::<usize>();
    let (sender, results) = mpsc::channel::<(PlannedRun, Attempt)>();
    let running = Arc::new(Mutex::new(Vec::<String>::new()));

    std::thread::scope(|scope| {
        for _ in 0..workers.max(1) {
            let queue = Arc::clone(&queue);
            let sender = sender.clone();
            let running = Arc::clone(&running);
            let bar = bar.clone();
            scope.spawn(move || work(&queue, &sender, &running, &bar, context_template));
        }
        drop(sender);
        for (run, attempt) in results {
            record(&mut summary, &bar, display, total, run, attempt);
        }
    });
    // Runs never taken from the queue because of a stop.
    summary.interrupted += queued_runs(&queue.lock().expect("queue lock"));
    bar.finish_and_clear();
    summary
}

/// The groups of `sweep` with a run still to do ([`Sweep::groups`]), in order, each whole:
/// a group trains again as the group it was (its done runs too, when one of them must), so
/// its numbers are the group's. Groups with nothing to do are counted in `summary`.
fn unfinished_runs(
    sweep: &Sweep,
    out: &SweepOut,
    summary: &mut PoolSummary,
) -> VecDeque<Vec<PlannedRun>> {
    let mut queue = VecDeque::new();
    for group in sweep.groups() {
        let done = group
            .iter()
            .filter(|run| run_state(out, run, &sweep.inspect) == crate::state::RunState::Done)
            .count();
        if done == group.len() {
            summary.already_done += done;
        } else {
            queue.push_back(group.into_iter().cloned().collect());
        }
    }
    queue
}

/// The bar over the sweep's `total` runs: drawn for [`Display::Auto`], hidden when quiet.
fn progress_bar(display: Display, total: u64) -> ProgressBar {
    let bar = match display {
        Display::Auto => ProgressBar::new(total),
        Display::Quiet => ProgressBar::hidden(),
    };
    bar.set_style(
        ProgressStyle::with_template(
            "{elapsed_precise} [{bar:30}] {pos}/{len} runs (eta {eta}) {wide_msg}",
        )
        .expect("a valid template")
        .progress_chars("=> "),
    );
    bar
}

/// One worker: takes groups of runs from `queue` and executes them, sending each run's
/// attempt back, until the queue is empty, a stop is requested or nobody listens any more.
fn work(
    queue: &Mutex<VecDeque<Vec<PlannedRun>>>,
    sender: &mpsc::Sender<(PlannedRun, Attempt)>,
    running: &Mutex<Vec<String>>,
    bar: &ProgressBar,
    context_template: &RunContext,
) {
    loop {
        if context_template.stop.requested().is_some() {
            break;
        }
        let Some(group) = queue.lock().expect("queue lock").pop_front() else {
            break;
        };
        let names: Vec<String> = group.iter().map(|run| run.name.clone()).collect();
        set_running(bar, running, |running| {
            running.extend(names.iter().cloned())
        });
        let attempts = execute_group(&group, context_template);
        set_running(bar, running, |running| {
            running.retain(|n| !names.contains(n))
        });
        for attempt in attempts {
            if sender.send(attempt).is_err() {
                return;
            }
        }
    }
}

/// Counts one finished attempt in `summary` and the bar, and says what happened to the run.
fn record(
    summary: &mut PoolSummary,
    bar: &ProgressBar,
    display: Display,
    total: u64,
    run: PlannedRun,
    attempt: Attempt,
) {
    match attempt {
        Attempt::AlreadyDone => {
            summary.already_done += 1;
            bar.inc(1);
        }
        Attempt::Done => {
            summary.done += 1;
            bar.inc(1);
            say(bar, display, total, format!("done     {}", run.name));
        }
        Attempt::Interrupted => summary.interrupted += 1,
        Attempt::Busy(holder) => {
            say(
                bar,
                display,
                total,
                format!("busy     {} (held by {holder})", run.name),
            );
            summary.busy.push(run.name);
        }
        Attempt::Failed(why) => {
            bar.inc(1);
            say(bar, display, total, format!("failed   {}: {why}", run.name));
            summary.failed.push((run.name, why));
        }
    }
}

/// Prints `line` above the bar, or as a plain line numbered with the bar's position.
fn say(bar: &ProgressBar, display: Display, total: u64, line: String) {
    // indicatif draws nothing (println included) when stderr is not a terminal: a log file
    // or CI gets plain lines instead.
    if bar.is_hidden() {
        if display == Display::Auto {
            println!("[{}/{total}] {line}", bar.position());
        }
    } else {
        bar.println(line);
    }
}

/// Changes the names of the runs under way and shows them as the bar's message.
fn set_running(
    bar: &ProgressBar,
    running: &Mutex<Vec<String>>,
    change: impl FnOnce(&mut Vec<String>),
) {
    let mut names = running.lock().expect("running lock");
    change(&mut names);
    bar.set_message(names.join(", "));
}
