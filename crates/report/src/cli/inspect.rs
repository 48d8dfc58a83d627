//! `headlab inspect`: measure every attention head of a trained run and write a report.

use std::path::PathBuf;
use std::process::ExitCode;

use inspect::load::probe_choice::{ProbeChoice, TypedInput};

use crate::cli::messages::{self, Command};

// The doc comments below are the command's --help text, written for a terminal: `<NAME>`
// and `[MASK]` there are text, not HTML or links.
#[allow(rustdoc::invalid_html_tags, rustdoc::broken_intra_doc_links)]
/// Measure every attention head of a trained run and write a report (index.html).
///
/// Writes into RUN/inspect (or --out): weights.safetensors, activations.safetensors, heads.json,
/// circuits.json, similarity.json, pruning.json, summary.json, logit_lens.json, divergence.csv and
/// trajectories.json (from the run's snapshots), patching.json (tasks with minimal pairs),
/// relations.json, ceiling.json and agreement.json (word tasks), figures/*.png, explore.html and
/// index.html, and prints one line per head with its role, entropy, confidence, attention distance
/// and ablation drop.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The run directory written by `train`, e.g. runs/reverse.
    #[arg(value_name = "RUN")]
    run_dir: PathBuf,
    /// Report directory. Default: RUN/inspect for the run's own probe and final weights;
    /// another reading (--text, --text-file, --probe-conllu, --probe-task or --set,
    /// --checkpoint, or --pairs) gets a directory of its own beside it, named for it
    /// (RUN/inspect-text-<hash>, RUN/inspect-en_ewt-ud-dev, RUN/inspect-step-500,
    /// RUN/inspect-pairs-agreement, ...).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Write over --out's report even when it is another reading's (another probe or other
    /// weights); without it such a report is kept and the inspection refused.
    #[arg(long)]
    replace: bool,
    /// Inspect a checkpoint (e.g. step-500) instead of the final weights.
    #[arg(long, value_name = "step-N")]
    checkpoint: Option<String>,
    /// Sequences in the probe batch (drawn from the run's task with a fixed seed); at least
    /// 1, at most what keeps the probe's activations within 1 GiB for this run.
    // allow_negative_numbers: `-1` reaches the parser (and its message) instead of reading
    // as an unknown flag.
    #[arg(long, default_value_t = inspect::inspection::options::DEFAULT_PROBE_SIZE, allow_negative_numbers = true,
          value_parser = inspect::load::probe::parse_size)]
    probe: usize,
    /// Eval token accuracy (absolute, 0.01 = one point) that pruning may lose before the
    /// task counts as failed; in [0, 1].
    #[arg(long, default_value_t = inspect::interventions::pruning::DEFAULT_TOLERANCE,
          allow_negative_numbers = true, value_parser = inspect::interventions::pruning::parse_tolerance)]
    prune_tolerance: f64,
    /// Skip the causal tests on the task's minimal pairs (patching.json, figures/patching.png,
    /// figures/paths.png).
    #[arg(long)]
    no_patching: bool,
    /// Patch, ablate and path-patch the model on minimal pairs of your own: a UTF-8 file, one
    /// pair a line, four tab-separated fields (the clean sentence, the corrupted one, each with
    /// [MASK] where the answer goes, then the clean answer and the corrupted answer; # starts a
    /// comment). For a model with a prediction head (an imported masked LM, a text model
    /// trained here); patching.json's `own` section. The report goes to RUN/inspect-pairs-<FILE>.
    #[arg(long, value_name = "FILE", conflicts_with = "no_patching")]
    pairs: Option<PathBuf>,
    /// Write every figure also as SVG (figures/NAME.svg), for papers.
    #[arg(long)]
    svg: bool,
    /// Probe an imported model with the sentences of this Universal Dependencies treebank
    /// (CoNLL-U) instead of the shipped one (UD English EWT's test set, the default):
    /// relations.json scores its labels.
    #[arg(long, value_name = "FILE", conflicts_with = "probe_task")]
    probe_conllu: Option<PathBuf>,
    /// Probe an imported model with its task's sentences (the grammar's, as a model headlab
    /// trained is) instead of the shipped treebank's natural text; --set task.KEY=VALUE
    /// implies it.
    #[arg(long)]
    probe_task: bool,
    /// Probe an imported model with a sentence of your own (repeatable; sentences of one
    /// length in words), split into words at spaces and around punctuation: explore.html
    /// shows it word by word. No parse, so no relation scores.
    #[arg(long, value_name = "SENTENCE", allow_hyphen_values = true,
          conflicts_with_all = ["probe_conllu", "probe_task", "task_set", "text_file"])]
    text: Vec<String>,
    /// As --text, the sentences of a UTF-8 file, one a line (blank lines skipped).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["probe_conllu", "probe_task", "task_set"])]
    text_file: Option<PathBuf>,
    /// Where the model runs: flex (the default) or ndarray on the CPU, or wgpu (a GPU, or
    /// lavapipe's software Vulkan); the numbers agree within float rounding.
    #[arg(long, value_enum, default_value_t = run::BackendKind::Flex)]
    backend: run::BackendKind,
    /// Probe an imported model with another version of its task, e.g. --set
    /// task.lexicon=classes --set task.selection=1 (repeatable; task keys only, in memory:
    /// the run's config.toml is not changed; summary.json records them).
    #[arg(long = "set", value_name = "task.KEY=VALUE")]
    task_set: Vec<String>,
    /// Sentences relations.json scores, 1 to 4096. Default: 512 of the task's, or a
    /// treebank's first 4096.
    #[arg(long, value_parser = inspect::measures::relations::parse_relation_sentences)]
    relation_sentences: Option<usize>,
    /// Print no progress while measuring (the stages it is at, with their times, on stderr).
    #[arg(long)]
    quiet: bool,
    /// Score relations.json on sentences masked as the grammar task masks in training (each
    /// word with task.mask_fraction, at least one per sentence; [MASK] for an imported model)
    /// instead of whole sentences; relations.json records the masked words.
    #[arg(long)]
    relations_masked: bool,
}

/// What the model is probed with, as the flags say: typed text, a treebank file, its task
/// (with `--set`'s overrides), or by default its own (its task, or for a model that reads
/// word pieces the shipped treebank).
fn probe_choice(args: &Args) -> anyhow::Result<ProbeChoice> {
    if !args.text.is_empty() || args.text_file.is_some() {
        return Ok(ProbeChoice::Text(typed_input(args)?));
    }
    Ok(match &args.probe_conllu {
        Some(path) => ProbeChoice::Treebank(path.clone()),
        // Task overrides change the task's sentences: they ask for the task probe.
        None if args.probe_task || !args.task_set.is_empty() => ProbeChoice::Task {
            overrides: args.task_set.clone(),
        },
        None => ProbeChoice::Own,
    })
}

/// `--text`'s sentences or `--text-file`'s: a probe's worth (`--probe`), the first of a
/// longer file, with a note, so the report lists the sentences it measured.
fn typed_input(args: &Args) -> anyhow::Result<TypedInput> {
    use inspect::load::typed;
    let (mut texts, mut names, file): (Vec<String>, Vec<String>, _) = match &args.text_file {
        Some(path) => {
            let lines = typed::read_text_file(path)?;
            let names = lines
                .iter()
                .map(|(line, _)| format!("{} line {line}", path.display()))
                .collect();
            let absolute = std::path::absolute(path).unwrap_or_else(|_| path.clone());
            let texts = lines.into_iter().map(|(_, text)| text).collect();
            (texts, names, Some(absolute))
        }
        None => {
            let names = args.text.iter().map(|t| format!("--text {t:?}")).collect();
            (args.text.clone(), names, None)
        }
    };
    if texts.len() > args.probe {
        eprintln!(
            "note: {} sentences given; the probe reads the first {} (--probe {}): give \
             --probe N to read more",
            texts.len(),
            args.probe,
            args.probe
        );
        texts.truncate(args.probe);
        names.truncate(args.probe);
    }
    Ok(TypedInput { texts, names, file })
}

/// Runs `headlab inspect` as `args` say: the exit status, or the error for `headlab`'s `main`
/// to print (usage errors, clap's, exit with 2 before this is called).
///
/// A report directory another `inspect` is writing is said with the status a held run gets
/// (`run::dir::EXIT_RUN_IN_USE`): nothing was done and nothing is wrong, so `sweep` skips
/// the run as held instead of recording a failure.
pub fn main(args: Args) -> anyhow::Result<ExitCode> {
    let command = Command::Inspect {
        text_file: args.text_file.is_some(),
        relations_masked: args.relations_masked,
    };
    match inspect_run(args) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(error)
            if error
                .downcast_ref::<crate::error::ReportError>()
                .is_some_and(|e| e.is_held()) =>
        {
            eprintln!("error: {error:#}");
            Ok(ExitCode::from(run::dir::EXIT_RUN_IN_USE))
        }
        Err(error) => Err(messages::for_user(error, command)),
    }
}

/// Loads the run directory `args` name, probed as its flags say, measures it, writes its
/// report and prints what it found.
fn inspect_run(args: Args) -> anyhow::Result<()> {
    if args.backend == run::BackendKind::Wgpu {
        run::cli::give_graphics_a_runtime_dir();
    }
    // Before anything is read: a report must never be written where it passes for another
    // run's, or over the run's own files.
    // Nor into a directory headlab did not write: refused here, before the work, and
    // claimed (locked) when the report is written.
    if let Some(out) = &args.out {
        crate::dir::check_report_place(out, &args.run_dir).map_err(anyhow::Error::msg)?;
        run::out_dir::check(out, &crate::dir::REPORT_KIND)?;
    }
    let device = args.backend.device()?;
    let choice = probe_choice(&args)?;
    let loaded = inspect::load::loaded_run::load_with(
        &args.run_dir,
        args.checkpoint.as_deref(),
        device,
        &choice,
    )?;
    if let Some(note) = &loaded.note {
        eprintln!("note: {note}");
    }
    // Read before anything is measured: a pair that does not line up is refused in a second.
    let loaded = match &args.pairs {
        Some(pairs) => loaded.with_own_pairs(pairs)?,
        None => loaded,
    };
    let out = match &args.out {
        Some(out) => out.clone(),
        None => default_report_dir(&loaded, args.checkpoint.as_deref()),
    };
    let options = crate::write::ReportOptions {
        measure: inspect::inspection::MeasureOptions {
            probe_size: args.probe,
            prune_tolerance: args.prune_tolerance,
            patching: !args.no_patching,
            relation_sentences: args.relation_sentences,
            relations_masked: args.relations_masked,
        },
        svg: args.svg,
        backend: args.backend,
    };
    if !args.replace {
        check_same_reading(&out, &options.provenance(&loaded))?;
    }
    let mut progress = run::progress::StageProgress::on_stderr("inspect", args.quiet);
    let report = crate::write::write_report_in_stages(&loaded, &out, &options, &mut progress)?;
    progress.finish();
    print_report(&args.run_dir, &loaded, &report, &out);
    Ok(())
}

/// Where a reading's report goes when no `--out` is given: `RUN/inspect` for the run's own
/// probe (its task's tokens, or the shipped treebank for a model that reads words) and its
/// final weights; any other reading a directory of its own beside it, named for its weights
/// and probe, so that one reading never replaces another.
fn default_report_dir(
    loaded: &inspect::load::loaded_run::LoadedRun,
    checkpoint: Option<&str>,
) -> PathBuf {
    use inspect::load::text::ProbeSource;
    let short_hash = |text: &str| run::hash::sha256_hex(text.as_bytes())[..8].to_string();
    let stem = |path: &std::path::Path| {
        let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned());
        let safe = run::name::file_safe(&stem.unwrap_or_default(), '_');
        let short: String = safe.chars().take(60).collect();
        short.trim_start_matches('.').to_string()
    };
    let mut parts: Vec<String> = checkpoint
        .map(|step| stem(std::path::Path::new(step)))
        .into_iter()
        .collect();
    match loaded.probe_source() {
        ProbeSource::Task { overrides } if overrides.is_empty() => {
            if loaded.reading.reads_text() {
                parts.push("task".to_string());
            }
        }
        ProbeSource::Task { overrides } => {
            parts.push(format!("task-{}", short_hash(&overrides.join("\n"))));
        }
        ProbeSource::ShippedTreebank { .. } => {}
        ProbeSource::Treebank { file, .. } => parts.push(stem(&file)),
        ProbeSource::TypedText {
            file: Some(file), ..
        } => parts.push(format!("text-{}", stem(&file))),
        ProbeSource::TypedText { sentences, .. } => {
            parts.push(format!("text-{}", short_hash(&sentences.join("\n"))));
        }
    }
    if let Some(own) = &loaded.own_pairs {
        parts.push(format!("pairs-{}", stem(&own.file.path)));
    }
    let parts: Vec<String> = parts.into_iter().filter(|p| !p.is_empty()).collect();
    match parts.is_empty() {
        true => loaded.dir.report_dir(),
        false => loaded
            .dir
            .root()
            .join(format!("inspect-{}", parts.join("-"))),
    }
}

/// Refuses to write a reading over the report of another reading in `out` (its probe or its
/// weights differ), which would be lost: that report is kept unless `--replace` is given. A
/// directory without a report's provenance is left to the report directory's own checks.
fn check_same_reading(
    out: &std::path::Path,
    reading: &crate::provenance::Provenance,
) -> anyhow::Result<()> {
    let dir = crate::dir::ReportDir::new(out);
    let Ok(existing) = dir.read_json::<crate::provenance::Provenance>() else {
        return Ok(());
    };
    let (was, is) = (&existing.measured_with, &reading.measured_with);
    if existing.weights == reading.weights && was.probe == is.probe && was.pairs == is.pairs {
        return Ok(());
    }
    let with_pairs = |with: &crate::provenance::MeasuredWith| {
        let probe = with.probe.describe("its task");
        match &with.pairs {
            Some(pairs) => format!("{probe} with the pairs of {}", pairs.file),
            None => probe,
        }
    };
    anyhow::bail!(
        "{} holds the report of another reading ({} of {}; this one reads {} of {}): give \
         another --out, or leave --out out (each reading gets a directory of its own beside \
         the run's report), or add --replace to write over it",
        out.display(),
        with_pairs(was),
        existing.weights,
        with_pairs(is),
        reading.weights,
    )
}

/// What `inspect` prints once the report is written: the accuracy line, the head table, the
/// files, pruning, what was left out, and where the report is.
fn print_report(
    run_dir: &std::path::Path,
    loaded: &inspect::load::loaded_run::LoadedRun,
    report: &crate::write::Report,
    out: &std::path::Path,
) {
    let accuracy = report.measured.eval_token_acc.map_or_else(
        || "not scored".to_string(),
        |acc| format!("{:.2}%", acc * 100.0),
    );
    println!(
        "{} ({}), eval token accuracy {accuracy}",
        run_dir.display(),
        loaded.weights.display(),
    );
    let measured = &report.measured;
    println!(
        "{}",
        crate::pages::probe_read(&measured.probe, measured.relations.as_ref())
    );
    println!("{}", crate::write::table(report));
    for file in &report.files {
        println!("wrote {}", file.display());
    }
    if let Some(pruning) = &report.measured.pruning {
        let greedy = match &pruning.greedy {
            Some(greedy) => format!("{} greedily, ", greedy.removable),
            None => String::new(),
        };
        println!(
            "pruning: {greedy}{} in single-head-drop order, of {} heads, can go with accuracy \
             within {:.1} points of {:.2}%",
            pruning.ranked.removable,
            pruning.total_heads,
            pruning.tolerance * 100.0,
            pruning.base_token_acc * 100.0,
        );
    }
    for left_out in &report.measured.summary.left_out {
        println!("left out: {left_out}");
    }
    if report.measured.divergence.is_empty() && !loaded.reading.reads_text() {
        println!("no snapshots in the run (train.snapshot_every = 0): no divergence curves");
    }
    // The path and a file:// URL to paste into a browser: on a headless machine nothing
    // opens one, and a terminal turns the URL into a link.
    let index = crate::dir::ReportDir::new(out).path(crate::dir::INDEX);
    let url = std::path::absolute(&index).map_or_else(
        |_| String::new(),
        |absolute| format!(" (file://{})", absolute.display()),
    );
    println!("the report: {}{url}; open it in a browser", index.display());
}
