//! Head analysis for headlab runs: load a run ([`run`]), measure every head ([`measures`],
//! [`similarity`]) and write the report ([`report`]).

pub mod measures;
pub mod report;
pub mod run;
pub mod similarity;
