//! Loading: a run directory opened for measuring ([`loaded_run`]), with the files it rests on
//! checked against its manifest ([`inputs`]), how its model reads its input ([`reading`]: the
//! one place that tells task tokens from word pieces) and what it is probed with, chosen
//! before loading ([`probe_choice`]) and named in the report ([`text`]: its task, or natural
//! text, the shipped treebank by default; or sentences a user typed, [`typed`]), the probe
//! batch every measure
//! reads, with each layer's attention on it ([`probe`]), what a seeded measure
//! runs on ([`context`]) and the run's training snapshots ([`snapshots`]); for models that read
//! word pieces, word-level attention ([`words`]), sentences as pieces ([`sentences`]: a
//! treebank's parsed ones, or typed ones, which have no parse, each read by the tokenizer once),
//! their masked words ([`masked_words`]), the task's minimal pairs as pieces
//! ([`piece_pairs`]) and a user's own pairs ([`own_pairs`], `inspect --pairs`). Imports nothing else of this crate.

pub mod context;
pub mod inputs;
pub mod loaded_run;
pub mod masked_words;
pub mod own_pairs;
pub mod piece_pairs;
pub mod probe;
pub mod probe_choice;
pub mod reading;
pub mod sentences;
pub mod snapshots;
pub mod text;
pub mod typed;
pub mod words;
