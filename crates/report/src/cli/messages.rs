//! What a user reads when `inspect`, `compare` or `verify` refuses. The `inspect` crate's
//! errors say what was wrong with the input (a probe size, a typed sentence, a text file, a
//! treebank for a model that reads no text, a run's weights or files, a task override) as
//! data, in its own words, and name no flag; here they become the messages a user sees,
//! naming the flags that gave the input and the commands that help ([`repair_advice`]). One
//! place per message: an error with nothing of the command line to name keeps `inspect`'s
//! words, and a message that only adds advice is `inspect`'s words followed by it.

use std::path::Path;

use inspect::compare::CompareError;
use inspect::inspection::MeasureError;
use inspect::load::inputs::InputsError;
use inspect::load::loaded_run::{RunError, TaskOverrideError};
use inspect::load::probe::ProbeSizeError;
use inspect::load::reading::ReadingError;
use inspect::load::sentences::PieceProbeError;
use inspect::load::typed::TypedTextError;

use crate::error::ReportError;

/// The command a message is for, with what it was asked where a message depends on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// `headlab inspect`.
    Inspect {
        /// Typed sentences came from `--text-file` (not `--text`).
        text_file: bool,
        /// `--relations-masked` was given.
        relations_masked: bool,
    },
    /// `headlab compare`, which has no `--checkpoint`.
    Compare,
}

/// `error` as the user reads it: an error of `inspect`'s said with `command`'s flags and
/// advice; any other as it is.
pub fn for_user(error: anyhow::Error, command: Command) -> anyhow::Error {
    match said(&error, command) {
        Some(message) => anyhow::Error::msg(message),
        None => error,
    }
}

/// The message for `error` where the command line has something to name in it.
fn said(error: &anyhow::Error, command: Command) -> Option<String> {
    if let Some(error) = error.downcast_ref::<RunError>() {
        return run_error(error, command);
    }
    if let Some(ReportError::Measure(MeasureError::Reading(error))) = error.downcast_ref() {
        return reading(error, command);
    }
    if let Some(error) = error.downcast_ref::<TypedTextError>() {
        return typed_text(error, command);
    }
    if let Some(error) = error.downcast_ref::<CompareError>() {
        return compare_error(error);
    }
    None
}

/// A run that cannot be loaded.
fn run_error(error: &RunError, command: Command) -> Option<String> {
    match error {
        RunError::NoFinalWeights {
            run,
            weights,
            available,
        } => Some(match command {
            Command::Inspect { .. } => format!(
                "{} is missing: the run has not finished; inspect a checkpoint with \
                 --checkpoint step-N (available: {available}), or finish it with headlab train \
                 {} --resume",
                weights.display(),
                run.display()
            ),
            Command::Compare => unfinished_for_compare(run, weights, available),
        }),
        RunError::Inputs(error) => inputs(error),
        RunError::Reading(error) => reading(error, command),
        RunError::TaskOverride(error) => Some(task_override(error)),
        _ => None,
    }
}

/// A run without final weights, given to `compare`: `inspect`'s advice (`--checkpoint`) is
/// no option of `compare`, so it names the `inspect` that reads a checkpoint.
fn unfinished_for_compare(run: &Path, weights: &Path, available: &str) -> String {
    let run = run.display();
    let checkpoints = match available {
        "none" => String::new(),
        available => format!(
            ", or inspect one of its checkpoints alone with `headlab inspect {run} --checkpoint \
             step-N` (available: {available})"
        ),
    };
    format!(
        "{run} has not finished training ({} is missing), and compare matches final weights: \
         let it finish (`headlab train {run} --resume` continues it from its newest \
         checkpoint){checkpoints}",
        weights.display()
    )
}

/// A probe the model cannot read, or one too large.
fn reading(error: &ReadingError, command: Command) -> Option<String> {
    const IMPORT: &str = "import a checkpoint with `headlab import` and inspect that";
    let from_file = matches!(
        command,
        Command::Inspect {
            text_file: true,
            ..
        }
    );
    match error {
        ReadingError::TreebankForTokens { run } => Some(format!(
            "--probe-conllu needs a model that reads text: {} reads its task's own tokens; \
             {IMPORT}",
            run.display()
        )),
        ReadingError::TextForTokens { run } => Some(format!(
            "{} needs a model that reads text: {} reads its task's own tokens; {IMPORT}",
            if from_file { "--text-file" } else { "--text" },
            run.display()
        )),
        ReadingError::Size(error) => Some(probe_size(error)),
        ReadingError::Typed(error) => typed_text(error, command),
        ReadingError::Pieces(PieceProbeError::NoMaskPiece { tokenizer }) => match command {
            Command::Inspect {
                relations_masked: true,
                ..
            } => Some(format!(
                "{tokenizer}: no mask piece ([MASK] or <mask>), so --relations-masked cannot \
                 mask words for this model"
            )),
            _ => None,
        },
        _ => None,
    }
}

/// A probe size (`--probe`) the run cannot take.
fn probe_size(error: &ProbeSizeError) -> String {
    match error {
        ProbeSizeError::Empty => "--probe must be at least 1".to_string(),
        ProbeSizeError::TooLarge { size, max, .. } => {
            let largest = match max {
                0 => "even one sequence is over it".to_string(),
                max => format!("the largest accepted is --probe {max}"),
            };
            let over = error.over_the_bound().unwrap_or_default();
            format!("--probe {size} is too large for {over}; {largest}")
        }
    }
}

/// Typed sentences (`--text`, `--text-file`) that cannot be read.
fn typed_text(error: &TypedTextError, command: Command) -> Option<String> {
    let from_file = matches!(
        command,
        Command::Inspect {
            text_file: true,
            ..
        }
    );
    Some(match error {
        TypedTextError::Empty { .. } if from_file => format!("{error}: give one sentence a line"),
        TypedTextError::Empty { .. } => {
            format!("{error}: type a sentence, e.g. --text \"The dog sees the cat.\"")
        }
        TypedTextError::Read { path, error } => {
            format!("cannot read --text-file {}: {error}", path.display())
        }
        TypedTextError::NotUtf8 { path, line, byte } => format!(
            "--text-file {} is not UTF-8 text (line {line}, byte {byte} of the file): save it as \
             UTF-8, one sentence a line",
            path.display()
        ),
        TypedTextError::NoSentence(path) => format!(
            "--text-file {} has no sentence: give one sentence a line",
            path.display()
        ),
        TypedTextError::Tokenizer(_) => return None,
    })
}

/// Task overrides (`--set task.KEY=VALUE`) that cannot apply.
fn task_override(error: &TaskOverrideError) -> String {
    match error {
        TaskOverrideError::Trained(run) => format!(
            "--set: {} is a model headlab trained, which reads the tokens of the task it was \
             trained on; --set task.KEY=VALUE is for an imported model (headlab import)",
            run.display()
        ),
        TaskOverrideError::Key(key) => format!(
            "--set {key}: inspect changes only the probe's task, keys task.KEY other than \
             task.kind (e.g. --set task.lexicon=classes --set task.selection=1)"
        ),
        TaskOverrideError::Config { overrides, error } => {
            format!("inspect --set {}: {error}", overrides.join(" --set "))
        }
    }
}

/// A run whose files cannot be vouched for, with the commands that repair it.
fn inputs(error: &InputsError) -> Option<String> {
    match error {
        InputsError::Damaged {
            run, imported_from, ..
        } => Some(format!(
            "{error} Repair it first: {}",
            repair_advice(run, imported_from.as_deref(), Repair::Damaged)
        )),
        InputsError::Unfinished { run, imported_from } => Some(format!(
            "{error}; {}",
            repair_advice(run, imported_from.as_deref(), Repair::Unfinished)
        )),
        InputsError::Io { .. } => None,
    }
}

/// Runs that cannot be compared, where a command helps.
fn compare_error(error: &CompareError) -> Option<String> {
    match error {
        CompareError::Run(error) => run_error(error, Command::Compare),
        CompareError::Probe(error) => reading(error, Command::Compare),
        CompareError::OtherSentences { .. } => {
            Some(format!("{error}; compare them with a smaller --probe"))
        }
        CompareError::ReferenceLarger {
            reference, other, ..
        } => Some(format!(
            "{error} (headlab compare {} {})",
            other.display(),
            reference.display()
        )),
        _ => None,
    }
}

/// Why a run cannot be measured as it is, for [`repair_advice`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repair {
    /// Files differ from its manifest.
    Damaged,
    /// Final weights without a manifest.
    Unfinished,
}

/// The commands that make the run in `run` whole again, each one a command that works on a
/// run of its kind (`crates/headlab/tests/advice.rs` runs them as given): a run imported
/// from `imported_from` is imported again; a trained one (`None`) is finished by `train
/// --resume` (from its last checkpoint it writes the final weights again and seals the run),
/// or trained again.
pub fn repair_advice(run: &Path, imported_from: Option<&Path>, why: Repair) -> String {
    let run = run.display();
    if let Some(source) = imported_from {
        return format!(
            "import it again: headlab import {} --out {run} --force",
            source.display()
        );
    }
    match why {
        Repair::Damaged => format!(
            "`headlab sweep run` does so for a run of a sweep; otherwise `headlab train {run} \
             --resume` writes damaged final weights again from the last checkpoint, and \
             `headlab train CONFIG --out {run} --force` trains the run again from the start"
        ),
        Repair::Unfinished => format!(
            "finish it with headlab train {run} --resume (it writes the final weights again \
             from the last checkpoint and seals the run), or inspect a checkpoint with \
             --checkpoint step-N"
        ),
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    const INSPECT: Command = Command::Inspect {
        text_file: false,
        relations_masked: false,
    };

    fn said_as(error: impl Into<anyhow::Error>, command: Command) -> String {
        for_user(error.into(), command).to_string()
    }

    #[test]
    fn a_probe_size_is_said_with_the_flag_that_gave_it() {
        let too_large = ProbeSizeError::TooLarge {
            size: 900,
            max: 300,
            runs: 2,
            bytes: 3 << 30,
        };
        let error = ReadingError::Size(too_large.clone());
        assert_eq!(
            said_as(CompareError::Probe(error), Command::Compare),
            "--probe 900 is too large for these 2 runs: the forward pass would hold about 3.0 GiB \
             of activations, over the 1 GiB allowed; the largest accepted is --probe 300"
        );
        assert!(
            too_large
                .to_string()
                .starts_with("a probe of 900 sequences")
        );
        assert_eq!(
            probe_size(&ProbeSizeError::Empty),
            "--probe must be at least 1"
        );
    }

    #[test]
    fn typed_text_is_said_by_the_flag_it_came_from() {
        let empty = || TypedTextError::Empty {
            sentence: "--text \"  \"".to_string(),
        };
        assert_eq!(
            said_as(empty(), INSPECT),
            "--text \"  \" has no word: type a sentence, e.g. --text \"The dog sees the cat.\""
        );
        let from_file = Command::Inspect {
            text_file: true,
            relations_masked: false,
        };
        let none = TypedTextError::NoSentence(PathBuf::from("t.txt"));
        assert_eq!(
            said_as(none, from_file),
            "--text-file t.txt has no sentence: give one sentence a line"
        );
        let run = PathBuf::from("runs/copy");
        let error = RunError::from(ReadingError::TextForTokens { run });
        assert!(said_as(error, from_file).starts_with("--text-file needs a model that reads text"));
    }

    #[test]
    fn an_unfinished_run_gets_the_advice_of_its_command() {
        let error = || RunError::NoFinalWeights {
            run: PathBuf::from("runs/a"),
            weights: PathBuf::from("runs/a/model.safetensors"),
            available: "step-10".to_string(),
        };
        let inspect = said_as(error(), INSPECT);
        assert!(
            inspect.contains("--checkpoint step-N (available: step-10)")
                && inspect.ends_with("headlab train runs/a --resume"),
            "{inspect}"
        );
        let compare = said_as(CompareError::Run(error()), Command::Compare);
        assert!(
            compare.starts_with("runs/a has not finished training")
                && compare.contains("`headlab inspect runs/a --checkpoint step-N`"),
            "{compare}"
        );
    }

    #[test]
    fn a_damaged_run_is_repaired_as_it_was_made() {
        let damaged = |imported_from: Option<PathBuf>| InputsError::Damaged {
            run: PathBuf::from("runs/a"),
            damages: "model.safetensors has other contents".to_string(),
            imported_from,
        };
        let trained = said_as(RunError::from(damaged(None)), INSPECT);
        assert!(
            trained.starts_with("runs/a is damaged: model.safetensors has other contents.")
                && trained.contains("Repair it first: `headlab sweep run`"),
            "{trained}"
        );
        let imported = said_as(
            RunError::from(damaged(Some(PathBuf::from("bert")))),
            INSPECT,
        );
        assert!(
            imported.ends_with("import it again: headlab import bert --out runs/a --force"),
            "{imported}"
        );
    }

    #[test]
    fn other_errors_keep_their_words() {
        let error = anyhow::anyhow!("cannot create /proc/x");
        assert_eq!(said_as(error, INSPECT), "cannot create /proc/x");
        let no_mask = ReadingError::Pieces(PieceProbeError::NoMaskPiece {
            tokenizer: "tokenizer.json".to_string(),
        });
        assert!(reading(&no_mask, INSPECT).is_none());
        let masked = Command::Inspect {
            text_file: false,
            relations_masked: true,
        };
        assert!(reading(&no_mask, masked).is_some_and(|m| m.contains("--relations-masked")));
    }
}
