//! Loading: a run directory opened for measuring ([`run`]) and the probe batch every
//! measure reads, with each layer's attention on it ([`probe`]). Imports nothing else of
//! this crate.

pub mod probe;
pub mod run;
