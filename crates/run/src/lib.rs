//! Everything a headlab run directory holds, and the process around a run. `train` writes
//! runs through this crate, `inspect`, `compare`, `sweep` and `bench` read them through it,
//! and none of them names a file of a run by hand. Hugging Face's formats (checkpoints,
//! `tokenizer.json`, `headlab import`) are the `hf` crate's, above this one.
//!
//! The map, lowest first (a file imports only from the ones above it):
//! - [`hash`]: SHA-256 in lowercase hex, as every record of headlab writes it; [`units`]: the
//!   unit of every number written, and how a CSV column, a header or an axis says it.
//! - [`atomic`]: the one writer of files (temporary name, flush, rename; it remembers what it
//!   wrote, for the manifests); [`small_file`]: the
//!   one reader of the small files a user names (configs, tokenizers); [`name`]: the one
//!   rule for a run's name; [`manifest`]: what a finished directory consists of (sizes and
//!   hashes), and the checks that tell a complete one from a damaged one.
//! - [`backend`]: a backend name ([`BackendKind`]) to a Burn device; the wgpu adapter.
//! - [`config`]: `config.toml` and `--set` overrides ([`RunConfig`]), validated, resolved
//!   into a task and a model ([`ResolvedRun`]); the run's evaluation set.
//! - [`inputs`]: what a run was trained on besides its config (a file run's dataset, a text
//!   run's corpus and tokenizer), as the marker records it, and what changed since.
//! - [`metrics`], [`tensor_file`]: `metrics.jsonl`; named f32 tensors in safetensors files.
//! - [`snapshot`], [`weights`]: per-head weights under stable names; `model.safetensors`.
//! - [`dir`]: the run directory itself ([`RunDir`]): create, lock, open, verify, its layout;
//!   [`out_dir`]: a directory `--out` names for a report or a comparison, claimed (new, empty
//!   or headlab's own) and locked before anything is written.
//! - [`checkpoint`]: `checkpoints/step-N/`, written whole or not at all.
//! - [`stop`], [`cli`], [`progress`]: a signal as a clean stop; the conventions every binary
//!   shares; a command's stages as they pass.
//!
//! A new file in the run directory gets its name in [`dir`] (the one owner of the layout)
//! and its writer here, beside the files it sits with.

pub mod atomic;
pub mod backend;
pub mod checkpoint;
pub mod cli;
pub mod config;
pub mod dir;
pub mod hash;
pub mod inputs;
pub mod manifest;
pub mod metrics;
pub mod name;
pub mod out_dir;
pub mod progress;
/// The one bounded reader of a file a user names, kept in `tasks` (which reads datasets and
/// treebanks through it too).
pub use tasks::small_file;
pub mod snapshot;
pub mod stop;
pub mod tensor_file;
pub mod units;
pub mod weights;

pub use backend::{BackendKind, WgpuAdapter, wgpu_adapter};
pub use config::{ResolvedRun, RunConfig, TrainConfig};
pub use dir::RunDir;
pub use stop::StopSignal;
