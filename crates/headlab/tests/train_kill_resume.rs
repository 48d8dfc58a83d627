//! SIGKILL at random moments, then `--resume`, until the run is done: the final weights,
//! every snapshot and every metric equal those of an uninterrupted run (flex is
//! deterministic), and after every kill each checkpoint that `checkpoint::list` offers loads
//! whole, so no partial checkpoint is ever read back.
//!
//! The kills follow a fixed schedule (a seeded generator): some after a random delay, some
//! aimed at a checkpoint write (the test watches `checkpoints/` and kills as soon as the
//! child's temporary `.step-N.tmp-PID` directory appears), and the first one right after the
//! run directory is made, before any checkpoint, where `--resume` must answer "nothing to
//! resume" and the run starts over with `--force`. A temporary directory still there after
//! the kill proves that the kill landed mid-write.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use burn::optim::AdamWConfig;
use burn::prelude::*;
use run::{BackendKind, RunConfig, checkpoint, tensor_file};

#[path = "common/train.rs"]
mod common;
use common::{TINY, final_tensors, train_cmd};

/// The run under test: the tiny fixture widened so that a checkpoint is 4.6 MB (its write
/// takes a third of the run's time, so kills can land in it), with a checkpoint every other
/// step and a 3 MB snapshot every 50. About three seconds uninterrupted on two cores; a run
/// directory ends at 20 MB.
const SETS: [&str; 9] = [
    "model.d_model=128",
    "model.d_ff=512",
    "model.n_layers=2",
    "train.steps=300",
    "train.checkpoint_every=2",
    "train.keep_checkpoints=2",
    "train.snapshot_every=50",
    "train.log_every=5",
    "train.eval_every=20",
];

/// Most kills before the test lets the run finish.
const MAX_KILLS: usize = 30;

fn train_command(dir: &Path, extra: &[&str]) -> Command {
    let mut command = train_cmd(&[TINY, "--out"]);
    command
        .arg(dir)
        .arg("--quiet")
        .args(SETS.iter().flat_map(|set| ["--set", set]))
        .args(extra);
    command
}

fn run_to_end(dir: &Path, extra: &[&str]) -> Output {
    train_command(dir, extra)
        .output()
        .expect("the train binary runs")
}

/// xorshift64: the same kill schedule on every run, with no dependency.
struct Schedule(u64);

impl Schedule {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// When to kill the child.
#[derive(Debug, Clone, Copy)]
enum Trigger {
    /// As soon as `config.toml` exists: the run directory is made, no checkpoint yet.
    RunDirMade,
    /// After this long.
    Delay(Duration),
    /// As soon as the child has started its `n`-th checkpoint write (1-based).
    CheckpointWrite(usize),
}

/// The child's temporary checkpoint directories now in `dir/checkpoints`.
fn temporaries_of(dir: &Path, pid: u32) -> BTreeSet<String> {
    let suffix = format!(".tmp-{pid}");
    std::fs::read_dir(dir.join("checkpoints"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with(".step-") && name.ends_with(&suffix))
        .collect()
}

/// Waits for `trigger`, then SIGKILLs the child. Returns false when the child finished on its
/// own first (and checks that it succeeded).
fn kill_when(mut child: Child, dir: &Path, trigger: Trigger) -> bool {
    let pid = child.id();
    let start = Instant::now();
    let mut writes_seen = BTreeSet::new();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
            assert!(status.success(), "the run failed on its own: {err}");
            return false;
        }
        let fire = match trigger {
            Trigger::RunDirMade => dir.join("config.toml").exists(),
            Trigger::Delay(delay) => start.elapsed() >= delay,
            Trigger::CheckpointWrite(n) => {
                writes_seen.extend(temporaries_of(dir, pid));
                writes_seen.len() >= n
            }
        };
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{trigger:?} never came"
        );
        if fire {
            child.kill().unwrap(); // SIGKILL
            child.wait().unwrap();
            return true;
        }
        std::thread::sleep(Duration::from_micros(100));
    }
}

/// What the checks after each kill need to load a checkpoint the way `--resume` does.
struct Loader {
    run: run::ResolvedRun,
    device: Device,
}

impl Loader {
    fn new() -> Self {
        let sets: Vec<String> = SETS.iter().map(|s| s.to_string()).collect();
        let config = RunConfig::load(Path::new(TINY), &sets).unwrap();
        let run = config.resolve(Path::new(TINY)).unwrap();
        let device = BackendKind::Flex.device().unwrap().autodiff();
        Self { run, device }
    }

    /// Every checkpoint `list` offers loads whole, and holds the step its name says.
    fn check_listed_checkpoints(&self, dir: &Path) -> usize {
        let listed = common::checkpoints(dir);
        for (step, path) in &listed {
            let run = run::RunDir::open(dir).unwrap();
            let model = self.run.config.model.init(&self.run.io, &self.device);
            let optim = AdamWConfig::new().init();
            let loaded = checkpoint::load(&run, *step, usize::MAX, model.unwrap(), optim);
            match loaded {
                Ok((_, _, state)) => assert_eq!(state.step, *step, "{}", path.display()),
                Err(e) => panic!("a listed checkpoint does not load: {e}"),
            }
        }
        listed.len()
    }
}

/// Every visible file under `dir` that a reader could pick up is whole: snapshots and the
/// final weights parse.
fn check_visible_files(dir: &Path) {
    for entry in std::fs::read_dir(dir.join("snapshots"))
        .into_iter()
        .flatten()
    {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !name.starts_with('.') {
            tensor_file::read_tensors(&path)
                .unwrap_or_else(|e| panic!("a visible snapshot is partial: {e}"));
        }
    }
    let weights = dir.join("model.safetensors");
    if weights.exists() {
        let bytes = std::fs::read(&weights).unwrap();
        safetensors::SafeTensors::deserialize(&bytes).expect("model.safetensors is whole");
    }
}

/// Every snapshot of a run, by file name (temporaries aside).
fn snapshots(dir: &Path) -> BTreeMap<String, BTreeMap<String, tensor_file::HostTensor>> {
    std::fs::read_dir(dir.join("snapshots"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| !p.file_name().unwrap().to_string_lossy().starts_with('.'))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, tensor_file::read_tensors(&p).unwrap())
        })
        .collect()
}

/// The deterministic part of each metrics line (not the timings).
fn metric_values(dir: &Path) -> Vec<String> {
    run::metrics::read(&dir.join("metrics.jsonl"))
        .iter()
        .map(|r| {
            format!(
                "{} {} {} {:?} {:?} {:?}",
                r.step, r.loss, r.lr, r.eval_loss, r.eval_token_acc, r.eval_seq_acc
            )
        })
        .collect()
}

/// Hidden entries anywhere under `dir` (temporaries).
fn hidden_entries(dir: &Path) -> Vec<PathBuf> {
    let mut found = vec![];
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        // The run's lock file is meant to stay; anything else hidden is a temporary.
        if name.starts_with('.') && name != ".lock" {
            found.push(path.clone());
        }
        if path.is_dir() {
            found.extend(hidden_entries(&path));
        }
    }
    found
}

#[test]
fn killed_at_random_moments_and_resumed_equals_an_uninterrupted_run() {
    let tmp = tempfile::tempdir().unwrap();
    let whole = tmp.path().join("whole");
    let started = Instant::now();
    let output = run_to_end(&whole, &[]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // Random delays up to a quarter of the whole run: on any machine, the run then takes
    // about a dozen kills to finish.
    let longest_delay = started.elapsed().as_micros() as u64 / 4;

    let dir = tmp.path().join("killed");
    let loader = Loader::new();
    let mut schedule = Schedule(0x6865_6164_6c61_6221);
    let (mut kills, mut mid_write, mut before_first, mut resumes) = (0, 0, 0, 0);
    let mut finished = false;
    while kills < MAX_KILLS {
        let trigger = match kills {
            0 => Trigger::RunDirMade,
            k if k % 2 == 1 => Trigger::CheckpointWrite(1 + schedule.below(4) as usize),
            _ => Trigger::Delay(Duration::from_micros(schedule.below(longest_delay))),
        };
        let flags: &[&str] = if common::checkpoints(&dir).is_empty() {
            if dir.exists() {
                // Killed before the first checkpoint: nothing to resume, so start over.
                let refused = run_to_end(&dir, &["--resume"]);
                let err = String::from_utf8_lossy(&refused.stderr);
                assert!(!refused.status.success(), "resumed from nothing");
                assert!(err.contains("nothing to resume"), "{err}");
                &["--force"]
            } else {
                &[]
            }
        } else {
            resumes += 1;
            &["--resume"]
        };
        let child = train_command(&dir, flags)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id();
        if !kill_when(child, &dir, trigger) {
            finished = true;
            break;
        }
        kills += 1;
        if !temporaries_of(&dir, pid).is_empty() {
            mid_write += 1;
        }
        let listed = loader.check_listed_checkpoints(&dir);
        if listed == 0 {
            before_first += 1;
        }
        check_visible_files(&dir);
    }
    if !finished {
        resumes += 1;
        let output = run_to_end(&dir, &["--resume"]);
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    eprintln!(
        "{kills} kills: {before_first} before the first checkpoint, {mid_write} during a \
         checkpoint write; {resumes} resumes"
    );
    assert!(kills >= 10, "only {kills} kills before the run finished");
    assert!(
        before_first >= 1,
        "no kill landed before the first checkpoint"
    );
    assert!(
        mid_write >= 3,
        "only {mid_write} kills landed in a checkpoint write"
    );

    // The last resume cleared what the kills left; nothing it wrote is left half-done.
    assert_eq!(hidden_entries(&dir), Vec::<PathBuf>::new());
    assert_eq!(
        final_tensors(&whole),
        final_tensors(&dir),
        "final weights differ"
    );
    assert_eq!(snapshots(&whole), snapshots(&dir), "snapshots differ");
    assert_eq!(metric_values(&whole), metric_values(&dir), "metrics differ");
    let steps = |d: &Path| -> Vec<usize> { common::checkpoints(d).iter().map(|c| c.0).collect() };
    assert_eq!(steps(&whole), steps(&dir));
    assert_eq!(steps(&dir), [300, 298]);
}

/// A run that reached its target accuracy writes its last checkpoint, then the final weights.
/// Killed in between (here: the state that kill leaves, with half of the weights file under
/// its temporary name), `--resume` must finish that run, not train on past its target.
#[test]
fn a_kill_after_the_target_was_reached_resumes_to_the_same_end() {
    let tmp = tempfile::tempdir().unwrap();
    let target: &[&str] = &[
        "--set",
        "train.target_accuracy=0.05",
        "--set",
        "train.steps=40",
    ];
    let run = |dir: &Path, extra: &[&str]| {
        let output = train_cmd(&[TINY, "--out"])
            .arg(dir)
            .args(target)
            .args(extra)
            .output()
            .unwrap();
        let (out, err) = (
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr),
        );
        assert!(output.status.success(), "{err}");
        out
    };
    let (whole, killed) = (tmp.path().join("whole"), tmp.path().join("killed"));
    // The first evaluation (step 10) reaches 5% token accuracy.
    assert!(run(&whole, &[]).contains("reached the target accuracy at step 10"));
    run(&killed, &[]);
    let weights = std::fs::read(killed.join("model.safetensors")).unwrap();
    std::fs::remove_file(killed.join("model.safetensors")).unwrap();
    std::fs::write(
        killed.join(".model.safetensors.tmp"),
        &weights[..weights.len() / 2],
    )
    .unwrap();

    let resumed = run(&killed, &["--resume"]);
    assert!(
        resumed.contains("reached the target accuracy at step 10"),
        "{resumed}"
    );
    assert_eq!(final_tensors(&whole), final_tensors(&killed));
    assert_eq!(metric_values(&whole), metric_values(&killed));
    let steps: Vec<usize> = common::checkpoints(&killed).iter().map(|c| c.0).collect();
    assert_eq!(steps, [10]);
    assert_eq!(hidden_entries(&killed), Vec::<PathBuf>::new());
}
