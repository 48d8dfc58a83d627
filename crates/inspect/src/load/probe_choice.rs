//! What a model is probed with, chosen before its run is loaded ([`ProbeChoice`]) and applied
//! once, as it loads ([`crate::load::loaded_run::load_with`]): the reading is not changed
//! afterwards. The command line's flags (`--probe-task`, `--set task.KEY=VALUE`,
//! `--probe-conllu`, `--text`, `--text-file`) are turned into a choice by the report's CLI,
//! and a comparison chooses the sentences every model it compares fits; this module knows no
//! flag.

use std::path::PathBuf;

/// What a model is probed with.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum ProbeChoice {
    /// The run's own: its task's tokens, or for a model that reads word pieces the treebank
    /// headlab ships.
    #[default]
    Own,
    /// The run's own, its treebank narrowed to the sentences `keep` marks (one flag per
    /// sentence, in the treebank's order; none past its end): what a comparison probes every
    /// model with, the sentences all of them fit in their positions, so that each picks the
    /// same probe. For a model that reads its task's tokens, as [`ProbeChoice::Own`].
    OwnSentences {
        /// Whether each sentence is kept.
        keep: Vec<bool>,
    },
    /// Its task's sentences, the task changed in memory by `overrides` (`task.KEY=VALUE`;
    /// none: the task as trained or imported).
    Task {
        /// `task.KEY=VALUE`, as given.
        overrides: Vec<String>,
    },
    /// The sentences of a treebank file (CoNLL-U).
    Treebank(PathBuf),
    /// Sentences a user typed, which have no parse.
    Text(TypedInput),
}

impl ProbeChoice {
    /// For [`ProbeChoice::OwnSentences`], the sentences of the treebank kept; `None` for
    /// every other choice.
    pub fn kept(&self) -> Option<&[bool]> {
        match self {
            ProbeChoice::OwnSentences { keep } => Some(keep),
            _ => None,
        }
    }
}

/// Typed sentences, each with the name a message gives it.
#[derive(Debug, Clone, PartialEq)]
pub struct TypedInput {
    /// The sentences, as typed.
    pub texts: Vec<String>,
    /// How a message names each (`--text "..."`, `FILE line N`).
    pub names: Vec<String>,
    /// The file they were read from, its absolute path; `None` for sentences typed on the
    /// command line.
    pub file: Option<PathBuf>,
}
