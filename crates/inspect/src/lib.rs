//! Head analysis for headlab runs: load a run ([`run`]), run the probe batch ([`probe`]),
//! measure every head ([`measures`], [`similarity`], [`divergence`]), draw it ([`figures`],
//! [`html`]) and write the report ([`report`]).

pub mod divergence;
pub mod figures;
pub mod html;
pub mod measures;
pub mod probe;
pub mod report;
pub mod run;
pub mod similarity;
