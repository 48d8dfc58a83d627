//! The command line of the `headlab` binary's `inspect` and `compare` subcommands: each
//! file holds one subcommand's arguments and the `main` that runs them; [`progress`] is what
//! `inspect` shows while it measures.

pub mod compare;
pub mod inspect;
pub mod progress;
