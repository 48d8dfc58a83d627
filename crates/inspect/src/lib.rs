//! Head analysis for headlab runs: load a run ([`run`]), run the probe batch ([`probe`]),
//! measure every head ([`measures`], [`heads`], [`similarity`], [`divergence`],
//! [`pruning`], [`attribution`], [`importance`], [`norms`], [`rollout`], and on the task's
//! dependency parses [`relations`]), read its circuits from the weights ([`circuits`]:
//! [`composition`], [`copying`], [`rank`], on [`linalg`]), draw it ([`figures`], [`html`],
//! the interactive [`explore`], with [`embed`]) and write the report ([`report`]); match
//! heads across runs ([`matching`], [`compare`], its page [`compare_page`]) and through a
//! run's snapshots ([`trajectories`]).
//!
//! Modules only import downwards: `report` and `compare` use everything below them;
//! `compare_page` draws what `compare` matched, from `matching`, `heads` and `measures`;
//! `figures`, `html` and `explore` draw the records of `heads`, `circuits`, `similarity`, `divergence`,
//! `trajectories`, `pruning` and `relations`; those build on `probe`, `measures` and `run`
//! (as do `attribution`, `importance`, `norms` and `rollout`; `heads` also takes
//! `relations`' scores), and `circuits` on `composition`, `copying` and
//! `rank`, which build on `linalg`.

pub mod attribution;
pub mod circuits;
pub mod compare;
pub mod compare_page;
pub mod composition;
pub mod copying;
pub mod divergence;
pub mod embed;
pub mod explore;
pub mod figures;
pub mod heads;
pub mod html;
pub mod importance;
pub mod linalg;
pub mod matching;
pub mod measures;
pub mod norms;
pub mod probe;
pub mod pruning;
pub mod rank;
pub mod relations;
pub mod report;
pub mod rollout;
pub mod run;
pub mod similarity;
pub mod trajectories;
