//! `headlab compare`: match the heads of several runs of one task (for example one config trained
//! with several seeds) and show which roles every run has.

use std::path::PathBuf;
use std::process::ExitCode;

use inspect::inspection::Stages as _;

use crate::cli::messages::{self, Command};

/// Match the heads of several runs of one task and show which roles every run has.
///
/// The runs must share the task and the model shape. Every run is probed on the first run's probe
/// sequences; per layer, its heads are paired with the first run's by the permutation that
/// maximises attention-pattern similarity (Hungarian algorithm); with --across-layers, over the
/// whole model. Prints one row per head of the first run with the matched head's role in every
/// run, and writes matching.json, matched-attention.png and the interactive compare.html into
/// --out.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Run directories written by `train`; the first is the reference.
    #[arg(required = true, num_args = 2..)]
    runs: Vec<PathBuf>,
    /// Output directory. Default: FIRST_RUN/compare.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Sequences in the shared probe batch; at least 1, at most what keeps the probe's
    /// activations of all runs within 1 GiB.
    // allow_negative_numbers: `-1` reaches the parser (and its message) instead of reading
    // as an unknown flag.
    #[arg(long, default_value_t = 64, allow_negative_numbers = true,
          value_parser = inspect::load::probe::parse_size)]
    probe: usize,
    /// Match each head of the first run to the most similar head of any layer of the others, one
    /// to one over the whole model, not layer by layer: whether seeds grew a role in different
    /// layers. Models of different grids are always matched so.
    #[arg(long)]
    across_layers: bool,
    /// Write matched-attention also as SVG (matched-attention.svg), for papers.
    #[arg(long)]
    svg: bool,
    /// Print no progress (by default each stage is said as it ends, on stderr).
    #[arg(long)]
    quiet: bool,
}

/// Runs `headlab compare` as `args` say: the exit status, or the error for `headlab`'s `main`
/// to print (usage errors, clap's, exit with 2 before this is called).
pub fn main(args: Args) -> anyhow::Result<ExitCode> {
    compare_runs(args)
        .map(|()| ExitCode::SUCCESS)
        .map_err(|error| messages::for_user(error, Command::Compare))
}

/// Loads the runs `args` name, matches their heads, writes the comparison and prints its
/// table.
fn compare_runs(args: Args) -> anyhow::Result<()> {
    let out = args.out.unwrap_or_else(|| args.runs[0].join("compare"));
    // Before the work: a directory headlab did not write is refused untouched.
    run::out_dir::check(&out, &crate::compare::COMPARISON_KIND)?;
    let mut progress = run::progress::StageProgress::on_stderr("compare", args.quiet);
    progress.start("loading the runs");
    let (loaded, cut) = inspect::compare::load_runs_with_cut(&args.runs)?;
    progress.start("matching the heads");
    let matching = match args.across_layers {
        true => inspect::compare::Matching::AcrossLayers,
        false => inspect::compare::Matching::ByLayer,
    };
    let mut compared = inspect::compare::compare(&loaded, args.probe, matching)?;
    if let Some(cut) = cut {
        // A probe of words: [CLS], the words, [SEP].
        let words = compared.probe.seq_len().saturating_sub(2);
        let said = cut.describe(words);
        progress.finish();
        eprintln!("note: {said}");
        compared.comparison.probe_cut = Some(said);
    }
    progress.start("the page and figures");
    let comparison = crate::compare::write_comparison(&loaded, compared, &out, args.svg)?;
    progress.finish();
    println!("{}", crate::compare::table(&comparison));
    for file in &comparison.files {
        println!("wrote {}", file.display());
    }
    Ok(())
}
