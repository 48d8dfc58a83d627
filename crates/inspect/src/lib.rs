//! Head analysis for headlab runs: load a run ([`run`]), run the probe batch ([`probe`]),
//! measure every head ([`measures`], [`heads`], [`similarity`], [`divergence`],
//! [`pruning`]), draw it ([`figures`], [`html`]) and write the report ([`report`]); match
//! heads across runs ([`matching`], [`compare`]).
//!
//! Modules only import downwards: `report` and `compare` use everything below them;
//! `figures` and `html` draw the records of `heads`, `similarity`, `divergence` and
//! `pruning`; those build on `probe`, `measures` and `run`.

pub mod compare;
pub mod divergence;
pub mod figures;
pub mod heads;
pub mod html;
pub mod matching;
pub mod measures;
pub mod probe;
pub mod pruning;
pub mod report;
pub mod run;
pub mod similarity;
