//! Sweeps: many headlab runs (seeds x configs x a grid of overrides) from one sweep file, run
//! on this machine by a pool of workers or on a Slurm cluster as one job array, and reported
//! with means and 95% confidence intervals over seeds.
//!
//! Data flow: [`spec`] expands the sweep file into a plan of runs; [`state`] reads where each
//! run stands from its run directory; [`exec`] brings one run to done (train or resume, then
//! inspect, as child processes); [`local`] runs the plan on a worker pool and [`slurm`]
//! submits it as a job array whose tasks call [`exec`] too; [`report`] collects the finished
//! runs into tables and [`figures`], with the means and 95% intervals of [`stats`]. [`cli`] is
//! the `headlab sweep` command, `sweep stats` included: [`stats`] for numbers of one's own,
//! which the book's Python tables call too, and [`multi_bootstrap`] for a table of seeds by
//! examples (seeds and examples resampled together).
//!
//! A sweep measures no head itself: each run's report is `headlab inspect`'s, run as a child
//! process. From the `inspect` crate it takes the records those reports hold (their types)
//! and what no single report holds: heads matched across a grid point's seeds
//! (`inspect::compare::compare`) and the null of untrained models
//! (`inspect::compare::null`). From the `report` crate it takes the report directory
//! (`report::dir::ReportDir`, to find and check reports), the writer of the matched heads'
//! files (`report::compare::write_comparison`) and the figure primitives
//! (`report::draw::figures`).

pub mod cli;
pub mod exec;
pub mod figures;
pub mod local;
pub mod multi_bootstrap;
pub mod report;
pub mod slurm;
pub mod spec;
pub mod state;
pub mod stats;
