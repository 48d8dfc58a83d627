//! Training and inference speed of headlab's encoder against Burn's built-in
//! `TransformerEncoder` at the same sizes, on each CPU backend (and wgpu where a GPU is), and
//! against a PyTorch reference of the same model ([`pytorch`], optional: only when torch is
//! importable); and the time to a token accuracy ([`accuracy`]).
//!
//! `headlab bench` ([`cli`]) runs every [`case::Case`] in a child process of its own, so that peak
//! memory is per case and thread pools start fresh, and prints a markdown table
//! ([`table::markdown`]); `--rounds` repeats the cases interleaved and reports medians
//! ([`rounds`]). `scripts/bench/bench.sh` builds and runs it.
//!
//! The map: [`case`] (one case and its measurement), [`reference`](mod@reference) (Burn's built-in encoder
//! at the same sizes), [`pytorch`] (the PyTorch reference), [`accuracy`] (time to a token
//! accuracy), [`machine`] (what it ran on: CPU, threads, peak memory), [`rounds`] (repeats,
//! medians), [`table`] (the markdown table), [`profile`] (where a step's time goes, phase by
//! phase: `--profile`), [`cli`] (the command).

pub mod accuracy;
pub mod case;
pub mod cli;
pub mod machine;
pub mod profile;
pub mod pytorch;
pub mod reference;
pub mod rounds;
pub mod table;
