//! Head analysis for headlab runs: load a run ([`run`]), run the probe batch ([`probe`]),
//! measure every head ([`measures`], [`similarity`], [`divergence`], [`pruning`]), draw it
//! ([`figures`], [`html`]) and write the report ([`report`]); match heads across runs
//! ([`matching`], [`compare`]).

pub mod compare;
pub mod divergence;
pub mod figures;
pub mod html;
pub mod matching;
pub mod measures;
pub mod probe;
pub mod pruning;
pub mod report;
pub mod run;
pub mod similarity;
