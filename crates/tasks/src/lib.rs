//! headlab's toy sequence tasks: seeded generators, a JSONL-file dataset, the `[task]`
//! config section that selects one, the batches a model reads, and the scoring of a model on
//! a task's examples. Nothing here trains (that is the `train` crate) or touches a run
//! directory (the `run` crate).
//!
//! The map, lowest first (a file imports only from the ones above it):
//! - [`small_file`]: the one reader of a file a user names (configs, datasets, treebanks,
//!   tokenizers): regular files only, a size bound checked before and while reading. `run`
//!   re-exports it.
//! - [`example`]: one example (input tokens, a target per position).
//! - [`error`]: [`TaskError`] and the range checks every generator runs on its sizes.
//! - [`pattern`], [`pairs`], [`dependency`], [`words`]: what tasks answer besides examples:
//!   the attention patterns that solve them, minimal pairs, dependency parses, and the
//!   word-only answers ([`words::Words`]: token names, parses, ceilings, word classes).
//! - [`generator`]: the trait every generator implements.
//! - [`generators`]: one file per task kind (`copy`, `reverse`, `shift`, `neighbors`,
//!   `sort`, `histogram` on [`generators::sequence`]; `recall`; `grammar` with its lexicons
//!   and its Bayes ceiling; `file`).
//! - [`task`]: the `[task]` section ([`TaskConfig`]) and the ready [`Task`].
//! - [`batch`]: examples padded into tensors ([`Batch`]), the training stream's seeds, the
//!   masked loss and accuracy.
//! - [`evaluate`](mod@evaluate): a model's loss and accuracy on examples, with heads ablated or not.
//! - [`conllu`]: Universal Dependencies treebanks (CoNLL-U) read as trees, and the
//!   `grammar` task's sentences written as CoNLL-U.

pub mod batch;
pub mod conllu;
pub mod dependency;
pub mod error;
pub mod evaluate;
pub mod example;
pub mod generator;
pub mod generators;
pub mod pairs;
pub mod pattern;
pub mod small_file;
pub mod task;
pub mod words;

pub use batch::{Accuracy, Batch, mix_seed};
pub use dependency::{Arc, ParsedSentence, Relation};
pub use error::TaskError;
pub use evaluate::evaluate;
pub use example::Example;
pub use generators::file::FileSpec;
pub use generators::grammar::GrammarSpec;
pub use generators::grammar::lexicon::{Lexicon, NounClass};
pub use generators::neighbors::{Combine, NeighborsSpec};
pub use generators::recall::RecallSpec;
pub use generators::sequence::SequenceSpec;
pub use generators::shift::ShiftSpec;
pub use generators::text::TextSpec;
pub use pairs::{MinimalPair, PairKind};
pub use pattern::AttentionPattern;
pub use task::{Task, TaskConfig};
pub use words::{ClassCeiling, Inflection, WordClass};
