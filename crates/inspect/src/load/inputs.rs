//! What a measurement of a run rests on ([`Inputs`]): the run's files whose bytes the numbers
//! come from, each with its size and SHA-256, checked against the run's manifest before
//! anything is measured. A report records them (`provenance.json`), so it always names the
//! weights it measured; a run whose files are not what its manifest recorded (a flipped byte
//! in its weights, a snapshot cut short) is refused, never measured.
//!
//! A sealed run is checked to the last byte ([`Depth::Contents`]), and its inputs are what its
//! manifest records ([`RunDir::measured_inputs`]). The weights are hashed as they are loaded
//! ([`run::weights::load_recorded`]), so a file changed between the check and the read is
//! caught too. A run still training (read from a checkpoint) has no manifest yet: its config
//! and the files beside it are hashed as they are now, and its snapshots are not named.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use run::RunDir;
use run::manifest::{self, Depth, FileRecord, Verdict};

/// The files a measurement of a run read, by their `/`-separated paths relative to the run.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Inputs {
    /// The weights measured: `model.safetensors`, or a checkpoint's model file; a key of
    /// `files`.
    pub weights: String,
    /// Every input with the size and SHA-256 of its bytes.
    pub files: BTreeMap<String, FileRecord>,
}

/// A run whose files cannot be vouched for: the run, what is wrong with its files, and where
/// it was imported from, as data (the report's command line adds the commands that repair
/// it).
#[derive(Debug, thiserror::Error)]
pub enum InputsError {
    /// Files differ from what the run's manifest recorded.
    #[error(
        "{run} is damaged: {damages}. A report of it would measure damaged data, so none is \
         written."
    )]
    Damaged {
        /// The run directory.
        run: PathBuf,
        /// Each damaged file with what is wrong, `; `-separated.
        damages: String,
        /// The checkpoint the run was imported from ([`imported_from`]); `None` for a run
        /// headlab trained. What repairs it depends on it.
        imported_from: Option<PathBuf>,
    },
    /// Final weights without the manifest that seals them: the run did not finish (killed
    /// between its weights and its manifest), or its manifest was removed. Either way nothing
    /// vouches for its files, and without the manifest a damaged file would go unseen.
    #[error(
        "{run} has final weights but no manifest.json: it did not finish, or its manifest was \
         removed, so its files cannot be checked and none is measured"
    )]
    Unfinished {
        /// The run directory.
        run: PathBuf,
        /// The checkpoint the run was imported from ([`imported_from`]); `None` for a run
        /// headlab trained.
        imported_from: Option<PathBuf>,
    },
    /// A file that could not be read to be hashed.
    #[error("cannot read {path} to record what the report measured: {error}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
}

/// The inputs of a measurement of the run in `dir`, whose weights were loaded from `weights`
/// (a path in the run) with the record `loaded` of the bytes read: refused when the run's
/// files are not what its manifest recorded.
pub fn verified(dir: &RunDir, weights: &Path, loaded: FileRecord) -> Result<Inputs, InputsError> {
    let damaged = |damages: String| InputsError::Damaged {
        run: dir.root().to_path_buf(),
        damages,
        imported_from: imported_from(dir),
    };
    let mut files = match dir.verify(Depth::Contents) {
        Verdict::Damaged(damages) => {
            let each: Vec<String> = damages.iter().map(ToString::to_string).collect();
            return Err(damaged(each.join("; ")));
        }
        Verdict::Intact => dir.measured_inputs().unwrap_or_default(),
        Verdict::Unsealed if weights == dir.final_weights_path() => {
            return Err(InputsError::Unfinished {
                run: dir.root().to_path_buf(),
                imported_from: imported_from(dir),
            });
        }
        Verdict::Unsealed => unsealed_inputs(dir)?,
    };
    let name = relative_name(dir, weights);
    match files.get(&name) {
        Some(recorded) if *recorded != loaded => {
            return Err(damaged(format!(
                "{name} changed while it was read (SHA-256 {} read, {} recorded)",
                loaded.sha256, recorded.sha256
            )));
        }
        _ => files.insert(name.clone(), loaded),
    };
    Ok(Inputs {
        weights: name,
        files,
    })
}

/// The checkpoint the run in `dir` was imported from (`headlab import`), as its config
/// records it; `None` for a run headlab trained, or a config that cannot be read. A run is
/// repaired as it was made: imported again, or trained.
pub fn imported_from(dir: &RunDir) -> Option<PathBuf> {
    let config = dir.config().ok()?;
    config.import.map(|import| import.source)
}

/// A run not sealed yet (still training): the files beside its weights that the numbers rest
/// on, hashed now.
fn unsealed_inputs(dir: &RunDir) -> Result<BTreeMap<String, FileRecord>, InputsError> {
    let mut files = BTreeMap::new();
    for path in [
        dir.config_path(),
        dir.dataset_path(),
        dir.vocab_path(),
        dir.tokenizer_path(),
    ] {
        if !path.is_file() {
            continue;
        }
        let (bytes, sha256) = manifest::hash_file(&path).map_err(|error| InputsError::Io {
            path: path.clone(),
            error,
        })?;
        files.insert(relative_name(dir, &path), FileRecord { bytes, sha256 });
    }
    Ok(files)
}

/// `path`'s name relative to the run, `/`-separated as in a manifest.
fn relative_name(dir: &RunDir, path: &Path) -> String {
    let relative = path.strip_prefix(dir.root()).unwrap_or(path);
    let parts: Vec<String> = relative
        .components()
        .map(|part| part.as_os_str().to_string_lossy().into_owned())
        .collect();
    parts.join("/")
}
