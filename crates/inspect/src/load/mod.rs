//! Loading: a run directory opened for measuring ([`run`]), the probe batch every
//! measure reads, with each layer's attention on it ([`probe`]), and what a seeded measure
//! runs on ([`context`]); for models that read word pieces, word-level attention
//! ([`words`]) and parsed sentences as pieces ([`sentences`]). Imports nothing else of this
//! crate.

pub mod context;
pub mod probe;
pub mod run;
pub mod sentences;
pub mod words;
