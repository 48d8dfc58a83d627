//! Writing what `inspect` measured, for people and for programs. One layer per entry; a
//! module imports only from the ones above it in this list (and from `inspect`, `model`,
//! `tasks` and `run`):
//!
//! - [`draw`]: figures (PNG or SVG, also used by `sweep` for its own), `index.html`,
//!   `explore.html`, `compare.html`.
//! - [`provenance`]: what a report measured (the run's files with their hashes, and every
//!   option that changes a number), `provenance.json`.
//! - [`dir`]: one run's report directory ([`dir::ReportDir`]: every file's name, contents,
//!   presence; typed readers and writers), [`error`]: why a report could not be made.
//! - [`figures`] and [`pages`]: which figures a report draws, its `index.html` and
//!   `explore.html`.
//! - [`write`](mod@write): `inspect`'s report ([`write::write_report`]: measured by
//!   [`inspect::inspection::measure`], then tensors, records, figures, `explore.html`, and
//!   `index.html` last); [`compare`]: `compare`'s output.
//! - [`cli`]: the `headlab inspect`, `headlab compare` and `headlab verify` commands, and
//!   their errors as a user reads them ([`cli::messages`]: `inspect`'s errors said with the
//!   flags).

pub mod cli;
pub mod compare;
pub mod dir;
pub mod draw;
pub mod error;
pub mod figures;
pub mod pages;
pub mod provenance;
pub mod write;

pub use write::{Report, ReportOptions, table, write_report};
