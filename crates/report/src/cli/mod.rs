//! The command line of the `headlab` binary's `inspect`, `compare` and `verify` subcommands: each
//! file holds one subcommand's arguments and the `main` that runs them (their progress is
//! `run::progress`'s).

pub mod compare;
pub mod inspect;
pub mod verify;
