//! Head analysis for headlab runs. So far: the per-head measures ([`measures`]) and the
//! head-similarity measures ([`similarity`]) that the `inspect` report will be built from;
//! the command that loads a run and writes the report is not there yet (issue 4).

pub mod measures;
pub mod similarity;
