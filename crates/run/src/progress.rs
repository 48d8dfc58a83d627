//! The progress of the commands that work in stages (`headlab inspect`, `compare`, `import`,
//! `sweep report`: an imported model's report takes a minute and more, and printed nothing
//! until the end): on a terminal, a spinner naming the stage with its time, each finished
//! stage left as a line above it; otherwise one line per finished stage on stderr (a sweep's
//! log, a pipe); nothing with `--quiet`. `train` has its own bar of steps.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

/// Told as each stage of a command starts, so a long one can show where it is; `()` is told
/// nothing.
pub trait Stages {
    /// The stage named `stage` starts; the one before, if any, has ended.
    fn start(&mut self, stage: &'static str);
}

impl Stages for () {
    fn start(&mut self, _stage: &'static str) {}
}

/// Shows the stages of one command as they pass.
pub struct StageProgress {
    /// The command, first on every line: `inspect`, `compare`, `import`, `sweep report`.
    command: &'static str,
    /// The spinner, on a terminal.
    bar: Option<ProgressBar>,
    /// Whether finished stages are said at all.
    shown: bool,
    /// The stage under way, and when it started.
    current: Option<(&'static str, Instant)>,
}

impl StageProgress {
    /// `command`'s progress on stderr: a spinner on a terminal, lines elsewhere, nothing when
    /// `quiet`.
    pub fn on_stderr(command: &'static str, quiet: bool) -> Self {
        let bar = (!quiet && std::io::stderr().is_terminal()).then(|| {
            let bar = ProgressBar::new_spinner();
            let template = format!("{{spinner}} {command}: {{msg}} ({{elapsed}})");
            bar.set_style(
                ProgressStyle::with_template(&template).expect("a valid progress template"),
            );
            bar.enable_steady_tick(Duration::from_millis(120));
            bar
        });
        Self {
            command,
            bar,
            shown: !quiet,
            current: None,
        }
    }

    /// Ends the last stage; the spinner goes.
    pub fn finish(&mut self) {
        self.end_current();
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }

    fn end_current(&mut self) {
        let Some((stage, started)) = self.current.take() else {
            return;
        };
        if !self.shown {
            return;
        }
        let line = finished_line(self.command, stage, started.elapsed());
        match &self.bar {
            Some(bar) => bar.println(line),
            None => eprintln!("{line}"),
        }
    }
}

impl Stages for StageProgress {
    fn start(&mut self, stage: &'static str) {
        self.end_current();
        self.current = Some((stage, Instant::now()));
        if let Some(bar) = &self.bar {
            bar.set_message(stage);
        }
    }
}

impl Drop for StageProgress {
    fn drop(&mut self) {
        // An error part-way: the spinner must not stay on the terminal over the message.
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

/// `inspect: circuits, 15.2 s`.
fn finished_line(command: &str, stage: &str, took: Duration) -> String {
    format!("{command}: {stage}, {:.1} s", took.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_finished_stage_is_one_line_with_its_time() {
        assert_eq!(
            finished_line("inspect", "circuits", Duration::from_millis(15_240)),
            "inspect: circuits, 15.2 s"
        );
    }
}
