//! `manifest.json`: what a finished directory consists of, so that a reader can tell a
//! complete result from a damaged one. A finished run holds one (its weights, metrics,
//! config, marker and snapshots), and so does a finished `inspect` report (every file it
//! wrote). Each file is recorded with its size and SHA-256.
//!
//! Two depths of check: [`Depth::Sizes`] only stats the files (a truncated, grown or deleted
//! file; what `sweep status` and `sweep run` check every time) and [`Depth::Contents`]
//! hashes them too (a flipped byte; `sweep verify` and `sweep report`).
//!
//! The manifest is written last, after every file it lists, and atomically: a directory
//! with a manifest was complete when it was sealed, and one without is not known to be.

use std::collections::BTreeMap;
use std::fmt;
use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::atomic::write_atomic;
use crate::hash::hex;

/// The manifest's file name, in the directory it describes.
pub const MANIFEST: &str = "manifest.json";

/// The layout of the manifest this build writes and reads.
const FORMAT: u32 = 1;

/// What a sealed directory holds: each file by its path relative to the directory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// The manifest's layout version.
    pub format: u32,
    /// Every file, by its `/`-separated path relative to the directory.
    pub files: BTreeMap<String, FileRecord>,
}

/// One file of a manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileRecord {
    /// Size in bytes.
    pub bytes: u64,
    /// SHA-256 of the contents, lowercase hex.
    pub sha256: String,
}

/// How far [`check`] looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Depth {
    /// Every file is there with its size (a `stat` each): cheap, run always.
    Sizes,
    /// And its contents hash as recorded: reads every byte.
    Contents,
}

/// One thing wrong with a sealed directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    /// The file, relative to the directory.
    pub file: String,
    /// What is wrong with it.
    pub problem: String,
}

impl fmt::Display for Damage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.file, self.problem)
    }
}

/// Where a directory stands against its manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// No manifest: the directory was never sealed (not finished, or cut short just before).
    Unsealed,
    /// Every file as recorded, to the depth checked.
    Intact,
    /// At least one file is not as recorded (or the manifest itself is unreadable).
    Damaged(Vec<Damage>),
}

/// Records `files` (paths relative to `root`) with their sizes and hashes in
/// `root/manifest.json`, replacing any manifest there. Call it once everything is written.
/// A file this process wrote ([`crate::atomic::written`]) is recorded as written while its
/// size on disk is the size written: a change since (a flipped byte) is then damage that
/// [`check`] finds, not a new truth. Any other file (appended to, or written elsewhere) is
/// recorded as it is on disk.
pub fn seal(root: &Path, files: &[String]) -> io::Result<Manifest> {
    let mut records = BTreeMap::new();
    for name in files {
        let path = root.join(name);
        let with_path = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", path.display()));
        let size_now = std::fs::metadata(&path).map_err(with_path)?.len();
        let (bytes, sha256) = match crate::atomic::written(&path) {
            Some((bytes, sha256)) if bytes == size_now => (bytes, sha256),
            _ => hash_file(&path).map_err(with_path)?,
        };
        records.insert(name.clone(), FileRecord { bytes, sha256 });
    }
    let manifest = Manifest {
        format: FORMAT,
        files: records,
    };
    let json = serde_json::to_vec_pretty(&manifest).expect("a manifest serializes");
    write_atomic(&root.join(MANIFEST), &json)?;
    Ok(manifest)
}

/// Removes `root/manifest.json`, if there: the directory is no longer known complete (it is
/// about to be rewritten).
pub fn unseal(root: &Path) -> io::Result<()> {
    match std::fs::remove_file(root.join(MANIFEST)) {
        Err(error) if error.kind() != io::ErrorKind::NotFound => Err(error),
        _ => Ok(()),
    }
}

/// Checks the directory at `root` against its manifest, to `depth`.
pub fn check(root: &Path, depth: Depth) -> Verdict {
    let manifest = match read(root) {
        Ok(Some(manifest)) => manifest,
        Ok(None) => return Verdict::Unsealed,
        Err(damage) => return Verdict::Damaged(vec![damage]),
    };
    let damages: Vec<Damage> = manifest
        .files
        .iter()
        .filter_map(|(name, record)| check_file(root, name, record, depth))
        .collect();
    if damages.is_empty() {
        Verdict::Intact
    } else {
        Verdict::Damaged(damages)
    }
}

/// The manifest of the directory at `root`: `None` when there is none.
pub fn read(root: &Path) -> Result<Option<Manifest>, Damage> {
    let damaged = |problem: String| Damage {
        file: MANIFEST.to_string(),
        problem,
    };
    let bytes = match std::fs::read(root.join(MANIFEST)) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(damaged(format!("is unreadable: {error}"))),
    };
    let manifest: Manifest = serde_json::from_slice(&bytes)
        .map_err(|error| damaged(format!("is not a valid manifest: {error}")))?;
    if manifest.format != FORMAT {
        return Err(damaged(format!(
            "has layout {}, which this build does not read (it reads {FORMAT})",
            manifest.format
        )));
    }
    Ok(Some(manifest))
}

fn check_file(root: &Path, name: &str, record: &FileRecord, depth: Depth) -> Option<Damage> {
    let damage = |problem: String| {
        Some(Damage {
            file: name.to_string(),
            problem,
        })
    };
    let path = root.join(name);
    let size = match std::fs::metadata(&path) {
        Ok(meta) if meta.is_file() => meta.len(),
        Ok(_) => return damage("is not a file".to_string()),
        Err(error) if error.kind() == io::ErrorKind::NotFound => {
            return damage("is missing".to_string());
        }
        Err(error) => return damage(format!("is unreadable: {error}")),
    };
    if size != record.bytes {
        return damage(format!(
            "has {size} bytes where the manifest records {}",
            record.bytes
        ));
    }
    if depth == Depth::Contents {
        match hash_file(&path) {
            Ok((_, sha256)) if sha256 == record.sha256 => {}
            Ok(_) => return damage("has other contents than the manifest records".to_string()),
            Err(error) => return damage(format!("is unreadable: {error}")),
        }
    }
    None
}

/// Size and SHA-256 (lowercase hex) of the file at `path`, read in blocks.
pub fn hash_file(path: &Path) -> io::Result<(u64, String)> {
    let mut file = File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 16];
    let mut total = 0u64;
    loop {
        let read = file.read(&mut buffer)?;
        if read == 0 {
            break;
        }
        hasher.update(&buffer[..read]);
        total += read as u64;
    }
    Ok((total, hex(&hasher.finalize())))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file changed after this process wrote it and before the seal (the same size) is
    /// damage the manifest finds, not what it records; a file appended to is recorded as it
    /// is on disk.
    #[test]
    fn a_seal_records_the_bytes_written_not_a_change_made_since() {
        let dir = tempfile::tempdir().unwrap();
        let (heads, metrics) = (
            dir.path().join("heads.json"),
            dir.path().join("metrics.jsonl"),
        );
        crate::atomic::write_atomic(&heads, b"[0.25]").unwrap();
        crate::atomic::write_atomic(&metrics, b"{}\n").unwrap();
        std::fs::write(&heads, b"[0.75]").unwrap(); // flipped between write and seal
        let mut appended = std::fs::OpenOptions::new()
            .append(true)
            .open(&metrics)
            .unwrap();
        std::io::Write::write_all(&mut appended, b"{}\n").unwrap();
        seal(dir.path(), &["heads.json".into(), "metrics.jsonl".into()]).unwrap();
        match check(dir.path(), Depth::Contents) {
            Verdict::Damaged(damages) => {
                let files: Vec<&str> = damages.iter().map(|d| d.file.as_str()).collect();
                assert_eq!(files, ["heads.json"]);
            }
            other => panic!("the flip was sealed in: {other:?}"),
        }
    }

    fn sealed_dir() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "hello\n").unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/b.bin"), [1u8, 2, 3]).unwrap();
        seal(dir.path(), &["a.txt".into(), "sub/b.bin".into()]).unwrap();
        dir
    }

    #[test]
    fn an_untouched_directory_is_intact_at_both_depths() {
        let dir = sealed_dir();
        assert_eq!(check(dir.path(), Depth::Sizes), Verdict::Intact);
        assert_eq!(check(dir.path(), Depth::Contents), Verdict::Intact);
        // The recorded hash is SHA-256 of the bytes (from `sha256sum`).
        let manifest = read(dir.path()).unwrap().unwrap();
        assert_eq!(
            manifest.files["a.txt"].sha256,
            "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03"
        );
        assert_eq!(manifest.files["a.txt"].bytes, 6);
    }

    #[test]
    fn no_manifest_is_unsealed_and_unseal_removes_it() {
        let dir = sealed_dir();
        unseal(dir.path()).unwrap();
        assert_eq!(check(dir.path(), Depth::Contents), Verdict::Unsealed);
        unseal(dir.path()).unwrap(); // twice is fine
    }

    #[test]
    fn truncation_and_deletion_show_at_the_cheap_depth() {
        let dir = sealed_dir();
        std::fs::write(dir.path().join("a.txt"), "hel").unwrap();
        std::fs::remove_file(dir.path().join("sub/b.bin")).unwrap();
        let Verdict::Damaged(damages) = check(dir.path(), Depth::Sizes) else {
            panic!("damage not found");
        };
        let text: Vec<String> = damages.iter().map(|d| d.to_string()).collect();
        assert_eq!(
            text,
            [
                "a.txt has 3 bytes where the manifest records 6",
                "sub/b.bin is missing"
            ]
        );
    }

    #[test]
    fn a_flipped_byte_shows_only_when_contents_are_read() {
        let dir = sealed_dir();
        std::fs::write(dir.path().join("a.txt"), "hellO\n").unwrap();
        assert_eq!(check(dir.path(), Depth::Sizes), Verdict::Intact);
        assert_eq!(
            check(dir.path(), Depth::Contents),
            Verdict::Damaged(vec![Damage {
                file: "a.txt".into(),
                problem: "has other contents than the manifest records".into()
            }])
        );
    }

    #[test]
    fn a_damaged_manifest_is_damage_not_absence() {
        let dir = sealed_dir();
        let path = dir.path().join(MANIFEST);
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, &text[..text.len() / 2]).unwrap();
        let Verdict::Damaged(damages) = check(dir.path(), Depth::Sizes) else {
            panic!("damage not found");
        };
        assert_eq!(damages.len(), 1);
        assert_eq!(damages[0].file, MANIFEST);
        assert!(damages[0].problem.starts_with("is not a valid manifest"));
    }
}
