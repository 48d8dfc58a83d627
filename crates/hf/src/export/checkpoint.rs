//! The export itself: read the run and check that a class holds it, then write the
//! checkpoint into a claimed `--out`.

use std::path::{Path, PathBuf};

use burn::prelude::*;
use model::Encoder;
use run::dir::{RunDir, RunDirError};
use run::out_dir::{self, OutDirError, OutKind};
use run::weights::{self, WeightsError};

use super::target::{Target, Unexportable, target_of};
use super::written::{ExportSizes, NamedTensor, checkpoint_tensors, config_json};
use crate::tokenizer::{TokenizerError, WordPieces};

/// What `--out` holds: a checkpoint `headlab export` wrote.
pub const EXPORT_KIND: OutKind = OutKind {
    name: "export",
    program: "export",
    recognises: |_| false,
};

/// The files an export writes (and, when an export is written again, the only ones it
/// removes if this one has none of them).
pub const FILES: [&str; 4] = [
    "config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
];

/// The padding pieces a tokenizer may name, in the order looked for.
const PAD_PIECES: [&str; 2] = ["[PAD]", "<pad>"];

/// Why a run could not be exported. Nothing is written in any case but the last.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The run directory cannot be opened or its config read.
    #[error(transparent)]
    Run(#[from] RunDirError),
    /// A run still training.
    #[error(
        "{0} is still training; export it when train has finished (its final weights, \
         model.safetensors, are what is exported)"
    )]
    InProgress(PathBuf),
    /// The run has no final weights.
    #[error(
        "{run} has no final weights ({weights} is missing): export reads a finished run; \
         finish it with headlab train {run} --resume"
    )]
    Unfinished {
        /// The run.
        run: PathBuf,
        /// The missing file.
        weights: PathBuf,
    },
    /// The run's config does not build its model.
    #[error("{path}: {message}")]
    Model {
        /// The run's config.toml.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// The final weights do not load.
    #[error(transparent)]
    Weights(#[from] WeightsError),
    /// The run's tokenizer does not load.
    #[error(transparent)]
    Tokenizer(#[from] TokenizerError),
    /// An option no `transformers` class holds.
    #[error("{config}: {error}; headlab exports BERT's and RoBERTa's kinds of encoder")]
    Unexportable {
        /// The run's config.toml.
        config: PathBuf,
        /// The option.
        error: Unexportable,
    },
    /// `--out` is not a directory headlab may write.
    #[error(transparent)]
    OutDir(#[from] OutDirError),
    /// A file could not be written.
    #[error("cannot write {path}: {error}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
}

/// A finished export.
#[derive(Debug, Clone)]
pub struct Exported {
    /// The directory written.
    pub out: PathBuf,
    /// The class written.
    pub target: Target,
    /// The sizes decided beside the model's.
    pub sizes: ExportSizes,
    /// Parameters written.
    pub parameters: usize,
    /// Whether the run's output layer was left out (a base model export).
    pub output_left_out: bool,
    /// Whether the tokenizer was written.
    pub tokenizer: bool,
}

/// The run's model, read and checked, before anything is written.
struct ReadRun {
    encoder: Encoder,
    model: model::EncoderConfig,
    io: model::EncoderIo,
    tokenizer: Option<(WordPieces, Vec<u8>)>,
    provenance: serde_json::Value,
}

/// Exports the finished run in `run` to `out`.
pub fn export(run: &Path, out: &Path) -> Result<Exported, ExportError> {
    out_dir::check(out, &EXPORT_KIND)?;
    let read = read_run(run)?;
    let reads_pieces = read.tokenizer.is_some();
    let target = target_of(&read.model, &read.io, reads_pieces).map_err(|error| {
        ExportError::Unexportable {
            config: run.join("config.toml"),
            error,
        }
    })?;
    let pad = read.tokenizer.as_ref().and_then(|(pieces, _)| {
        PAD_PIECES
            .iter()
            .find_map(|piece| pieces.id(piece))
            .map(|id| id as usize)
    });
    let sizes = ExportSizes::new(target, read.io.vocab_size, pad);
    let tensors = checkpoint_tensors(&read.encoder, target, sizes, read.io.max_seq_len);
    let parameters = tensors.iter().map(|t| t.values.len()).sum();
    let config = config_json(&read.model, &read.io, target, sizes, read.provenance);
    let lock = out_dir::claim(out, &EXPORT_KIND)?;
    let write = |name: &str, bytes: &[u8]| {
        let path = out.join(name);
        run::atomic::write_atomic(&path, bytes).map_err(|error| ExportError::Write { path, error })
    };
    let mut written = vec!["config.json", "model.safetensors"];
    write("model.safetensors", &safetensors_bytes(&tensors))?;
    if let Some((pieces, bytes)) = &read.tokenizer {
        write("tokenizer.json", bytes)?;
        let settings = tokenizer_config(pieces, read.io.max_seq_len);
        write("tokenizer_config.json", &pretty(&settings))?;
        written.extend(["tokenizer.json", "tokenizer_config.json"]);
    }
    // Last: a directory with config.json names a whole checkpoint.
    write("config.json", &pretty(&config))?;
    for stale in FILES.iter().filter(|name| !written.contains(name)) {
        let path = out.join(stale);
        match std::fs::remove_file(&path) {
            Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
                return Err(ExportError::Write { path, error });
            }
            _ => {}
        }
    }
    drop(lock);
    Ok(Exported {
        out: out.to_path_buf(),
        target,
        sizes,
        parameters,
        output_left_out: !target.masked_lm,
        tokenizer: read.tokenizer.is_some(),
    })
}

/// Opens the run, builds its model from its config and loads its final weights and
/// tokenizer.
fn read_run(run: &Path) -> Result<ReadRun, ExportError> {
    let run_dir = RunDir::open(run)?;
    let _lock = run_dir
        .lock_for_reading()
        .map_err(|_| ExportError::InProgress(run.to_path_buf()))?;
    let weights_path = run_dir.final_weights_path();
    if !weights_path.is_file() {
        return Err(ExportError::Unfinished {
            run: run.to_path_buf(),
            weights: weights_path,
        });
    }
    let resolved = run_dir.resolve()?;
    let device = Device::flex();
    let config = resolved.config.model.clone();
    let encoder = config
        .init(&resolved.io, &device)
        .map_err(|e| ExportError::Model {
            path: run_dir.config_path(),
            message: e.to_string(),
        })?;
    let (encoder, record) = weights::load_recorded(&weights_path, encoder)?;
    let tokenizer_path = run_dir.tokenizer_path();
    let tokenizer = match tokenizer_path.is_file() {
        // Read once: the bytes written into the export are the bytes parsed.
        true => {
            let bytes = WordPieces::read_bytes(&tokenizer_path)?;
            Some((WordPieces::parse(&bytes, &tokenizer_path)?, bytes))
        }
        false => None,
    };
    let provenance = serde_json::json!({
        "exported_by": format!("headlab export {}", env!("CARGO_PKG_VERSION")),
        "run": resolved.config.name,
        "weights_sha256": record.sha256,
        "positions": format!("{:?}", config.positional).to_lowercase(),
        "token_names": resolved.task.token_names().filter(|_| tokenizer.is_none()),
    });
    Ok(ReadRun {
        encoder: encoder.no_grad(),
        model: config,
        io: resolved.io,
        tokenizer,
        provenance,
    })
}

/// `tokenizer_config.json`: the tokenizer's special pieces by role, so `AutoTokenizer`
/// opens `tokenizer.json` as the fast tokenizer it is, whatever the model's family.
fn tokenizer_config(pieces: &WordPieces, max_seq_len: usize) -> serde_json::Value {
    let mut settings = serde_json::Map::new();
    settings.insert("tokenizer_class".into(), "PreTrainedTokenizerFast".into());
    settings.insert("model_max_length".into(), max_seq_len.into());
    for (role, names) in [
        ("pad_token", PAD_PIECES),
        ("unk_token", ["[UNK]", "<unk>"]),
        ("cls_token", ["[CLS]", "<s>"]),
        ("sep_token", ["[SEP]", "</s>"]),
        ("mask_token", ["[MASK]", "<mask>"]),
    ] {
        if let Some(name) = names.iter().find(|name| pieces.id(name).is_some()) {
            settings.insert(role.into(), (*name).into());
        }
    }
    serde_json::Value::Object(settings)
}

fn pretty(value: &serde_json::Value) -> Vec<u8> {
    let mut bytes = serde_json::to_vec_pretty(value).expect("JSON values serialize");
    bytes.push(b'\n');
    bytes
}

/// The safetensors file of `tensors` (float32, in name order), as `safetensors` lays it out.
fn safetensors_bytes(tensors: &[NamedTensor]) -> Vec<u8> {
    let bytes: Vec<(String, Vec<u8>, Vec<usize>)> = tensors
        .iter()
        .map(|tensor| {
            let data = tensor.values.iter().flat_map(|v| v.to_le_bytes()).collect();
            (tensor.name.clone(), data, tensor.shape.clone())
        })
        .collect();
    let views: Vec<(String, safetensors::tensor::TensorView)> = bytes
        .iter()
        .map(|(name, data, shape)| {
            let view =
                safetensors::tensor::TensorView::new(safetensors::Dtype::F32, shape.clone(), data)
                    .expect("the shape matches the values");
            (name.clone(), view)
        })
        .collect();
    let metadata = std::collections::HashMap::from([("format".to_string(), "pt".to_string())]);
    safetensors::serialize(views, Some(metadata)).expect("float32 tensors serialize")
}
