//! Training and inference speed of headlab's encoder against Burn's built-in
//! `TransformerEncoder` at the same sizes, on each CPU backend (and wgpu where a GPU is).
//!
//! The `bench` binary runs every [`case::Case`] in a child process of its own, so that peak
//! memory is per case and thread pools start fresh, and prints a markdown table
//! ([`table::markdown`]). `scripts/bench.sh` builds and runs it.

pub mod case;
pub mod machine;
pub mod reference;
pub mod table;
