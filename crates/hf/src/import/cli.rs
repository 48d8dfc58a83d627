//! `headlab import`: the command line of [`super::checkpoint::import`].

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args as ClapArgs;

use super::checkpoint::{ImportRequest, import_in_stages};
use run::progress::StageProgress;

/// Import a Hugging Face encoder checkpoint (config.json, model.safetensors,
/// tokenizer.json) as a run directory that `headlab inspect` and `compare` read.
///
/// The base model and masked LM of BERT, RoBERTa, XLM-RoBERTa, DistilBERT, ELECTRA, ALBERT
/// and ModernBERT in float32 are supported (all-MiniLM-L6-v2, bert-base-uncased,
/// roberta-base, distilbert-base-uncased, ModernBERT-base, ...). The run's config.toml names
/// the checkpoint and the SHA-256 of every file read.
#[derive(ClapArgs, Debug)]
pub struct Args {
    /// The checkpoint directory, as `save_pretrained` writes it.
    pub checkpoint: PathBuf,
    /// The run directory to write (default: runs/NAME).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// The run's name (default: the checkpoint directory's name).
    #[arg(long)]
    pub name: Option<String>,
    /// Replace the run already at --out (only a headlab run is ever replaced).
    #[arg(long)]
    pub force: bool,
    /// Print no progress (the stages: reading the checkpoint's files, writing the run).
    #[arg(long, short)]
    pub quiet: bool,
}

/// Runs `headlab import`.
pub fn main(args: Args) -> anyhow::Result<ExitCode> {
    let request = ImportRequest {
        checkpoint: args.checkpoint,
        out: args.out,
        name: args.name,
        force: args.force,
    };
    let mut progress = StageProgress::on_stderr("import", args.quiet);
    let imported = import_in_stages(&request, &mut progress)?;
    progress.finish();
    let (layers, heads, params) = imported.shape;
    let root = imported.dir.root().display();
    let shared = match imported.record.shared_layers {
        true => " sharing one layer's weights",
        false => "",
    };
    println!(
        "imported {} ({}: {layers} layers x {heads} heads{shared}, {:.1}M parameters) into \
         {root}",
        imported.record.source.display(),
        imported.record.architecture,
        params as f64 / 1e6,
    );
    if let Some(first) = imported.unread.first() {
        // As transformers names the weights a model did not use.
        let more = match imported.unread.len() {
            1 => String::new(),
            n => format!(" and {} more", n - 1),
        };
        println!(
            "not read: {first}{more} (headlab reads the encoder and a masked-LM head; a pooler \
             or a task's classifier is left out)"
        );
    }
    println!("next: headlab inspect {root}");
    Ok(ExitCode::SUCCESS)
}
