//! `headlab verify DIR`: a run or a report directory checked against its manifest, every file
//! to the last byte. The same check `inspect` and `compare` make of a run before they read
//! it, and `sweep` of a report, run on its own: to trust a directory copied from elsewhere,
//! or to find what a crash left behind.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use run::RunDir;
use run::manifest::{self, Depth, Verdict};

use crate::cli::messages::{Repair, repair_advice};

/// Check a run or report directory against its manifest: every file at its size and SHA-256.
///
/// Prints what it found and exits 0 when the directory is intact; 1 when a file differs from
/// what the manifest records, is missing, or the directory has no manifest (it was never
/// finished, or the manifest was removed), with the command that repairs it; 75 when a
/// process is writing it (a `train` or an `inspect`), naming it.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// A run directory (`train`, `import`) or a report directory (`inspect`'s RUN/inspect or
    /// its --out).
    dir: PathBuf,
    /// Compare sizes only, without reading the files (fast, but a flipped byte goes unseen).
    #[arg(long)]
    sizes_only: bool,
}

/// What a directory is, for the messages and the repair.
#[derive(Debug)]
enum Kind {
    /// A run, trained or imported (boxed: a run directory is large).
    Run(Box<RunDir>),
    /// An `inspect` report.
    Report,
}

/// Runs `headlab verify` as `args` say.
pub fn main(args: Args) -> anyhow::Result<ExitCode> {
    let dir = &args.dir;
    let kind = kind_of(dir)?;
    let depth = if args.sizes_only {
        Depth::Sizes
    } else {
        Depth::Contents
    };
    let what = match kind {
        Kind::Run(_) => "run",
        Kind::Report => "report",
    };
    // Read under a shared lock: files a writer is replacing would read as damage.
    let _reading = match run::dir::lock_for_reading(dir) {
        Ok(lock) => lock,
        Err(holder) => {
            eprintln!(
                "error: {} is being written by {holder}: its files are not all there yet; verify \
                 it when that ends",
                dir.display()
            );
            return Ok(ExitCode::from(run::dir::EXIT_RUN_IN_USE));
        }
    };
    match manifest::check(dir, depth) {
        Verdict::Intact => {
            let files = manifest::read(dir)
                .ok()
                .flatten()
                .map_or(0, |manifest| manifest.files.len());
            let checked = if args.sizes_only {
                "sizes"
            } else {
                "sizes and SHA-256"
            };
            println!(
                "{}: an intact {what}: its {files} files have the {checked} its manifest records",
                dir.display()
            );
            Ok(ExitCode::SUCCESS)
        }
        Verdict::Unsealed => anyhow::bail!(
            "{} is an unfinished {what}: it has no manifest.json (it was never finished, or the \
             manifest was removed), so nothing vouches for its files; {}",
            dir.display(),
            repair(dir, &kind, Repair::Unfinished)
        ),
        Verdict::Damaged(damages) => {
            for damage in &damages {
                println!("damaged: {damage}");
            }
            anyhow::bail!(
                "{} is a damaged {what}: {} of its files differ from its manifest; {}",
                dir.display(),
                damages.len(),
                repair(dir, &kind, Repair::Damaged)
            )
        }
    }
}

/// A run (it holds `run.json`), a report (headlab's marker or a manifest of report files), or
/// refused by name.
fn kind_of(dir: &Path) -> anyhow::Result<Kind> {
    if !dir.is_dir() {
        anyhow::bail!(
            "{} is not a directory: give a run directory or a report directory",
            dir.display()
        );
    }
    if dir.join(run::dir::MARKER).is_file() {
        return Ok(Kind::Run(Box::new(RunDir::open(dir)?)));
    }
    let report = &crate::dir::REPORT_KIND;
    if run::out_dir::is_claimed(dir, report) || (report.recognises)(dir) {
        return Ok(Kind::Report);
    }
    anyhow::bail!(
        "{} is neither a headlab run (no {}) nor a report (no {} naming a report, no \
         manifest.json of report files)",
        dir.display(),
        run::dir::MARKER,
        run::out_dir::MARKER
    )
}

/// The command that makes `dir` whole again: a run's is the one `inspect` names
/// ([`repair_advice`]).
fn repair(dir: &Path, kind: &Kind, why: Repair) -> String {
    match kind {
        Kind::Run(run) => {
            let imported_from = inspect::load::inputs::imported_from(run);
            repair_advice(run.root(), imported_from.as_deref(), why)
        }
        Kind::Report => format!(
            "write it again: headlab inspect RUN --out {}",
            dir.display()
        ),
    }
}
