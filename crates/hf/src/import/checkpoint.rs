//! The import itself: read and check every file of the checkpoint, then write the run.

use std::path::{Path, PathBuf};

use burn::prelude::*;
use model::Encoder;
use tasks::TaskConfig;

use crate::tokenizer::{TokenizerError, WordPieces};
use crate::{CheckpointConfig, CheckpointTensors, HfError, encoder_from_tensors};
use run::config::{ConfigError, ImportRecord, RunConfig, TrainConfig};
use run::dir::{RunDir, RunDirError};
use run::manifest::hash_file;
use run::progress::Stages;
use run::weights::{self, WeightsError};
use run::{BackendKind, name};

/// The `format` of an `[import]` section written here for a checkpoint of `family`:
/// `huggingface-bert`, `huggingface-roberta`, ...
pub fn format_of(family: crate::Family) -> String {
    format!("huggingface-{}", family.model_type())
}

/// Why a checkpoint could not be imported. Nothing of the run is written in any case but the
/// last three, which come from writing it (and leave no complete run behind).
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The checkpoint path is not a directory.
    #[error(
        "{0} is not a directory; give a Hugging Face checkpoint directory (config.json, \
         model.safetensors and tokenizer.json, as save_pretrained writes them)"
    )]
    NotADirectory(PathBuf),
    /// `config.json` or `model.safetensors` is not what headlab opens.
    #[error(transparent)]
    Checkpoint(#[from] HfError),
    /// `tokenizer.json` is missing or not a tokenizer.
    #[error(transparent)]
    Tokenizer(#[from] TokenizerError),
    /// The tokenizer is not the checkpoint's.
    #[error(
        "{tokenizer} has {pieces} pieces, but {config} gives vocab_size {rows} (the rows of the \
         word embeddings); the tokenizer must be the checkpoint's own"
    )]
    VocabularyMismatch {
        /// The tokenizer file.
        tokenizer: PathBuf,
        /// Its pieces (ids 0 to pieces - 1).
        pieces: usize,
        /// The checkpoint's config.json.
        config: PathBuf,
        /// Its vocabulary size.
        rows: usize,
    },
    /// A tokenizer whose ids are not one piece each.
    #[error(
        "{tokenizer}: {problem}: each id from 0 to {bound} must be one piece, as each is one row \
         of the model's embedding; the file's vocabulary is damaged: save it again with \
         tokenizer.save_pretrained(DIR)",
        bound = .pieces - 1
    )]
    IdsNotOnePieceEach {
        /// The tokenizer file.
        tokenizer: PathBuf,
        /// What is wrong.
        problem: String,
        /// Its ids (0 to pieces - 1).
        pieces: usize,
    },
    /// The run's config could not be made (a name that is not a run name, say).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The run directory could not be made (a run there without --force, a user's directory).
    #[error(transparent)]
    RunDir(#[from] RunDirError),
    /// The weights could not be written.
    #[error(transparent)]
    Weights(#[from] WeightsError),
}

/// What `headlab import` was asked to do.
#[derive(Debug, Clone)]
pub struct ImportRequest {
    /// The checkpoint directory.
    pub checkpoint: PathBuf,
    /// The run directory to write; default: `runs/NAME`.
    pub out: Option<PathBuf>,
    /// The run's name; default: the checkpoint directory's name.
    pub name: Option<String>,
    /// Replace a run already at `out`.
    pub force: bool,
}

/// An imported run.
#[derive(Debug)]
pub struct Imported {
    /// The run directory, sealed.
    pub dir: RunDir,
    /// What was read.
    pub record: ImportRecord,
    /// Layers, heads per layer and the checkpoint's parameters (the tied embeddings once,
    /// no pooler), for the summary line.
    pub shape: (usize, usize, usize),
    /// The checkpoint's tensors headlab did not read (a pooler, a task's classifier), sorted.
    pub unread: Vec<String>,
}

/// The checkpoint's files, read and checked, before anything is written.
struct Checkpoint {
    config: CheckpointConfig,
    model: Encoder,
    /// Tensors not read ([`crate::encoder_from_tensors`]).
    unread: Vec<String>,
    tokenizer: WordPieces,
    tokenizer_bytes: Vec<u8>,
    record: ImportRecord,
}

/// Imports `request.checkpoint` into `request.out`.
pub fn import(request: &ImportRequest) -> Result<Imported, ImportError> {
    import_in_stages(request, &mut ())
}

/// [`import`], telling `stages` as each stage starts.
pub fn import_in_stages(
    request: &ImportRequest,
    stages: &mut dyn Stages,
) -> Result<Imported, ImportError> {
    let checkpoint = read_checkpoint(&request.checkpoint, stages)?;
    let name = match &request.name {
        Some(name) => name.clone(),
        None => default_name(&request.checkpoint),
    };
    let (model_config, _) = checkpoint.config.encoder();
    let config = RunConfig {
        name,
        seed: 0,
        backend: BackendKind::Flex,
        // What inspect probes the model with: the grammar task's sentences, read as words.
        task: TaskConfig::Grammar(Default::default()),
        model: model_config,
        train: TrainConfig::default(),
        import: Some(checkpoint.record.clone()),
    };
    let source = request.checkpoint.join("config.json");
    let run = config.resolve(&source)?;
    let out = match &request.out {
        Some(out) => out.clone(),
        None => PathBuf::from("runs").join(&run.config.name),
    };
    stages.start("writing the run");
    // A run replaced with --force is written whole beside it first and then takes its
    // place, so an import killed part-way leaves the old run, not neither.
    let replacing = request.force && RunDir::holds_a_run(&out)?;
    let target = match replacing {
        true => RunDir::replacement_path(&out),
        false => out.clone(),
    };
    let (dir, _lock) = RunDir::create(&target, &run, request.force, "import")?;
    dir.write(&dir.tokenizer_path(), &checkpoint.tokenizer_bytes)?;
    let pieces: String = (0..checkpoint.record.vocab_size as u32)
        .map(|id| {
            let piece = checkpoint.tokenizer.piece(id).unwrap_or_default();
            format!("{piece}\n")
        })
        .collect();
    dir.write(&dir.vocab_path(), pieces.as_bytes())?;
    weights::write(&dir.final_weights_path(), &checkpoint.model)?;
    dir.seal()?;
    let dir = match replacing {
        true => dir.replace(&out, "import")?,
        false => dir,
    };
    let model = &checkpoint.model;
    // The checkpoint's own count: headlab's encoder holds the tied embeddings twice (as
    // the input table and as the output layer), so its `num_params` is larger. The run's
    // record keeps it, so the reports give the same number.
    let params = (checkpoint.config.parameter_bytes() / 4) as usize;
    Ok(Imported {
        dir,
        record: checkpoint.record,
        shape: (model.n_layers(), model.n_heads(), params),
        unread: checkpoint.unread,
    })
}

/// Reads and checks every file of the checkpoint in `dir`.
fn read_checkpoint(dir: &Path, stages: &mut dyn Stages) -> Result<Checkpoint, ImportError> {
    if !dir.is_dir() {
        return Err(ImportError::NotADirectory(dir.to_path_buf()));
    }
    let config_path = dir.join("config.json");
    let tokenizer_path = dir.join("tokenizer.json");
    // The small files first, checked against each other before the weights are read.
    stages.start("reading config.json and tokenizer.json");
    let config = CheckpointConfig::read(dir)?;
    let tokenizer_bytes = WordPieces::read_bytes(&tokenizer_path)?;
    let tokenizer = WordPieces::parse(&tokenizer_bytes, &tokenizer_path)?;
    if tokenizer.id_bound() != config.vocab_size || tokenizer.vocab_size() != config.vocab_size {
        return Err(ImportError::VocabularyMismatch {
            tokenizer: tokenizer_path,
            pieces: tokenizer.id_bound().max(tokenizer.vocab_size()),
            config: config_path,
            rows: config.vocab_size,
        });
    }
    if let Some(problem) = tokenizer.ids_not_one_piece_each() {
        return Err(ImportError::IdsNotOnePieceEach {
            tokenizer: tokenizer_path,
            problem,
            pieces: tokenizer.id_bound(),
        });
    }
    // Read once, tensor by tensor: the model is made from these bytes and their hash is the
    // one recorded. The tensors the model did not take are dropped before anything is
    // written (a base-size checkpoint is 500 MB).
    stages.start("reading model.safetensors");
    let device = Device::flex();
    let tensors = CheckpointTensors::read(dir, &device)?;
    let weights_sha256 = tensors.sha256.clone();
    let (model, unread) = encoder_from_tensors(dir, &config, &tensors, &device)?;
    drop(tensors);
    let config_sha256 = hash_file(&config_path)
        .map(|(_, sha)| sha)
        .map_err(|error| HfError::Io {
            path: config_path.clone(),
            error,
        })?;
    let record = ImportRecord {
        format: format_of(config.family),
        architecture: config.architecture(),
        source: std::fs::canonicalize(dir).map_err(|error| HfError::Io {
            path: dir.to_path_buf(),
            error,
        })?,
        config_sha256,
        weights_sha256,
        tokenizer_sha256: run::hash::sha256_hex(&tokenizer_bytes),
        vocab_size: config.vocab_size,
        max_positions: config.max_positions(),
        shared_layers: config.shared_layers,
        parameters: Some((config.parameter_bytes() / 4) as usize),
    };
    Ok(Checkpoint {
        config,
        model,
        unread,
        tokenizer,
        tokenizer_bytes,
        record,
    })
}

/// The checkpoint directory's name as a run name: characters a run name may not hold
/// become `-` (`all-MiniLM-L6-v2` stays as it is).
fn default_name(checkpoint: &Path) -> String {
    let base = std::fs::canonicalize(checkpoint)
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "imported".to_string());
    let cleaned = name::file_safe(&base, '-');
    match name::problem(&cleaned) {
        None => cleaned,
        Some(_) => "imported".to_string(),
    }
}
