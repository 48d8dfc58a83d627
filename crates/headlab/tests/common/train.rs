//! Helpers shared by the `headlab train` tests: the one way they start it, and the tiny run
//! they start it on.
// Each test file compiles this module on its own and uses only part of it.
#![allow(dead_code)]

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The `headlab` binary Cargo built for these tests.
pub const HEADLAB: &str = env!("CARGO_BIN_EXE_headlab");

/// A config that trains in about a second on two cores.
pub const TINY: &str = testkit::TINY_CONFIG;

/// `headlab train` with `args`, to adjust further or to spawn. XDG_RUNTIME_DIR is kept, or set to
/// /tmp where it is unset: graphics drivers probed by the wgpu backend complain on stderr
/// without it, and the tests read stderr.
pub fn train_cmd<S: AsRef<OsStr>>(args: &[S]) -> Command {
    let mut command = Command::new(HEADLAB);
    command.arg("train").args(args).env(
        "XDG_RUNTIME_DIR",
        std::env::var_os("XDG_RUNTIME_DIR").unwrap_or("/tmp".into()),
    );
    command
}

/// Runs `headlab train` with `args` to its end and collects its output.
pub fn run_train<S: AsRef<OsStr>>(args: &[S]) -> Output {
    train_cmd(args).output().expect("the headlab binary runs")
}

/// The final weights of a run, tensor by tensor, sorted by name: safetensors' header order
/// is not fixed, so runs are compared by their tensors, not their file bytes.
pub fn final_tensors(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let bytes = std::fs::read(dir.join("model.safetensors")).unwrap();
    let file = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let mut tensors: Vec<(String, Vec<u8>)> = file
        .tensors()
        .into_iter()
        .map(|(name, view)| (name, view.data().to_vec()))
        .collect();
    tensors.sort();
    tensors
}

/// The complete checkpoints of the run in `dir`, newest first; none when `dir` is not (yet)
/// a run that opens.
pub fn checkpoints(dir: &Path) -> Vec<(usize, PathBuf)> {
    run::RunDir::open(dir)
        .map(|run| run::checkpoint::list(&run))
        .unwrap_or_default()
}

/// Sentences of the small corpus the text-model tests train on.
const TEXT_SENTENCES: [&str; 6] = [
    "The farmers sell the crops at the market every week.",
    "A nation that buys its own grain grows strong and free.",
    "Congress will consider the treaty with great care this year.",
    "The people expect the government to keep the peace at home.",
    "Our commerce with foreign nations has grown beyond all hope.",
    "The treasury reports a surplus, and the debt is falling.",
];

/// Writes a corpus for the text task at `path`: 30 documents of a few sentences each, as
/// JSON Lines.
pub fn write_text_corpus(path: &Path) {
    let text: String = (0..30)
        .map(|i| {
            let body: Vec<&str> = (0..4 + i % 3)
                .map(|j| TEXT_SENTENCES[(i + j) % 6])
                .collect();
            format!(
                "{}\n",
                serde_json::json!({ "text": body.join(" "), "year": 1800 + i })
            )
        })
        .collect();
    std::fs::write(path, text).unwrap();
}

/// A config training a tiny masked LM on `corpus` (in `dir`) for `steps` steps.
pub fn write_text_config(dir: &Path, corpus: &str, steps: usize) -> PathBuf {
    let path = dir.join("text.toml");
    let corpus = dir.join(corpus);
    let corpus = corpus.display();
    std::fs::write(
        &path,
        format!(
            "name = \"text\"\nseed = 0\nbackend = \"flex\"\n\n[task]\nkind = \"text\"\n\
             corpus = \"{corpus}\"\nvocab_size = 150\nseq_len = 48\n\n[model]\nd_model = 16\n\
             n_layers = 2\nn_heads = 2\nd_ff = 32\n\n[train]\nsteps = {steps}\nbatch_size = 8\n\
             eval_every = 5\neval_size = 16\ncheckpoint_every = 5\nsnapshot_every = 5\n"
        ),
    )
    .unwrap();
    path
}
