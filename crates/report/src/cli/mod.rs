//! The command line of the `headlab` binary's `inspect`, `compare` and `verify` subcommands: each
//! file holds one subcommand's arguments and the `main` that runs them (their progress is
//! `run::progress`'s); [`messages`] says their errors, `inspect`'s among them, as a user
//! reads them, with the flags and the commands that help.

pub mod compare;
pub mod inspect;
pub mod messages;
pub mod verify;
