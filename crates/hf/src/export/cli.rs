//! `headlab export`: the command line of [`super::checkpoint::export`].

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args as ClapArgs;

/// Export a finished run as a Hugging Face checkpoint (config.json, model.safetensors,
/// tokenizer.json) that transformers opens.
///
/// Post-norm blocks go to BERT, headlab's default pre-norm blocks to XLM-RoBERTa-XL,
/// pre-norm blocks after a normed embedding to RoBERTa-PreLayerNorm. A model trained on text
/// with a prediction transform (model.output_transform = true) is written as the family's
/// masked LM (BertForMaskedLM, ...), with the same logits; any other as the base model.
#[derive(ClapArgs, Debug)]
pub struct Args {
    /// The run directory (a finished run: its final model.safetensors is exported).
    pub run: PathBuf,
    /// The directory to write: new, empty, or an earlier export (replaced).
    #[arg(long)]
    pub out: PathBuf,
}

/// Runs `headlab export`.
pub fn main(args: Args) -> anyhow::Result<ExitCode> {
    let exported = super::checkpoint::export(&args.run, &args.out)?;
    let target = exported.target;
    println!(
        "exported {} as {} ({:.2}M parameters) into {}",
        args.run.display(),
        target.class(),
        exported.parameters as f64 / 1e6,
        exported.out.display()
    );
    if exported.output_left_out {
        println!(
            "left out: the run's output layer (a {} holds no prediction head but a masked LM's: \
             dense, GELU, norm and a decoder over the tokenizer's pieces; a text model trained \
             with model.output_transform = true is exported with it)",
            target.class()
        );
    }
    if exported.sizes.padding_row {
        println!(
            "added: a padding row, id {} (vocab_size {} + 1), which no task token uses: {}'s \
             position ids count from the first token that is not padding",
            exported.sizes.pad_token_id,
            exported.sizes.pad_token_id,
            target.family.model_type()
        );
    }
    let tokenizer = match exported.tokenizer {
        true => "AutoTokenizer.from_pretrained(DIR); ",
        false => "",
    };
    println!(
        "open it: {tokenizer}transformers.AutoModel{}.from_pretrained(DIR)",
        if target.masked_lm { "ForMaskedLM" } else { "" }
    );
    Ok(ExitCode::SUCCESS)
}
