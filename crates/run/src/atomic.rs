//! The one writer of files: write to a temporary name in the same directory, flush to disk,
//! then rename into place, so a reader never sees half a file and a crash never leaves one.
//! It remembers the size and SHA-256 of what it wrote ([`written`]), so that a manifest
//! sealed later records the bytes written, not whatever is on disk by then
//! ([`crate::manifest::seal`]): a file changed between its write and the seal (a flipped
//! byte, the same size) is found damaged, never sealed in.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use sha2::{Digest, Sha256};

/// What this process last wrote under each path (absolute): size and SHA-256.
static WRITTEN: Mutex<BTreeMap<PathBuf, (u64, String)>> = Mutex::new(BTreeMap::new());

/// The size and SHA-256 of the bytes this process last wrote to `path` with
/// [`write_atomic`]; `None` for a file it did not write (or wrote otherwise, as an append).
pub fn written(path: &Path) -> Option<(u64, String)> {
    let key = std::path::absolute(path).ok()?;
    let written = WRITTEN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    written.get(&key).cloned()
}

/// The temporary name `path` is written under before the rename.
fn temporary_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.tmp-{}", std::process::id()))
}

/// Writes `bytes` to `path` atomically.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_atomic_streamed(path, |out| out.write_all(bytes))
}

/// Writes to `path` atomically what `fill` writes, streamed: for a file too large to build
/// in memory first (a base-size model's weights). The size and SHA-256 remembered are of
/// the bytes `fill` wrote, hashed as they pass.
pub fn write_atomic_streamed(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    let tmp = temporary_path(path);
    let result = (|| {
        let mut out = HashingWriter {
            inner: io::BufWriter::with_capacity(1 << 20, File::create(&tmp)?),
            hasher: Sha256::new(),
            bytes: 0,
        };
        fill(&mut out)?;
        let HashingWriter {
            inner,
            hasher,
            bytes,
        } = out;
        let file = inner.into_inner().map_err(io::IntoInnerError::into_error)?;
        file.sync_all()?;
        fs::rename(&tmp, path)?;
        Ok((bytes, crate::hash::hex(&hasher.finalize())))
    })();
    match result {
        Ok(record) => {
            remember_record(path, record);
            Ok(())
        }
        Err(error) => {
            let _ = fs::remove_file(&tmp);
            Err(error)
        }
    }
}

/// A writer that hashes and counts what it passes on.
struct HashingWriter<W> {
    inner: W,
    hasher: Sha256,
    bytes: u64,
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let written = self.inner.write(buf)?;
        self.hasher.update(&buf[..written]);
        self.bytes += written as u64;
        Ok(written)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

fn remember_record(path: &Path, record: (u64, String)) {
    let Ok(key) = std::path::absolute(path) else {
        return;
    };
    let mut written = WRITTEN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    written.insert(key, record);
}

/// Fills a fresh temporary directory through `fill`, then renames it to `dir`
/// (replacing an existing `dir`). A crash leaves at most a hidden `.name.tmp-PID` directory.
pub fn create_dir_atomic(dir: &Path, fill: impl FnOnce(&Path) -> io::Result<()>) -> io::Result<()> {
    let tmp = temporary_path(dir);
    if tmp.exists() {
        fs::remove_dir_all(&tmp)?;
    }
    fs::create_dir_all(&tmp)?;
    let result = fill(&tmp).and_then(|()| {
        // Move an old copy aside rather than deleting it first: there is never a moment
        // without a complete directory under one of the two names.
        let old = dir.with_file_name(format!(
            ".{}.old-{}",
            dir.file_name().unwrap_or_default().to_string_lossy(),
            std::process::id()
        ));
        let had_old = dir.exists();
        if had_old {
            fs::rename(dir, &old)?;
        }
        fs::rename(&tmp, dir)?;
        if had_old {
            fs::remove_dir_all(&old)?;
        }
        Ok(())
    });
    if result.is_err() {
        let _ = fs::remove_dir_all(&tmp);
    }
    result
}

/// Deletes `dir` by renaming it to a hidden temporary name first: a kill halfway through
/// the deletion leaves a `.name.tmp-PID` directory (which [`remove_temporaries`] clears), never
/// a `dir` that has lost some of its files. For checkpoints that matters: a `step-N` directory
/// that still holds `state.json` is listed as complete.
pub fn remove_dir_atomic(dir: &Path) -> io::Result<()> {
    let doomed = temporary_path(dir);
    if doomed.exists() {
        fs::remove_dir_all(&doomed)?;
    }
    fs::rename(dir, &doomed)?;
    fs::remove_dir_all(&doomed)
}

/// Whether `name` is one that a writer of this module uses for a file or directory on its
/// way in or out: `.name.tmp-PID`, `.name.old-PID`, or Burn's `.name.tmp`.
fn is_temporary_name(name: &str) -> bool {
    let Some(rest) = name.strip_prefix('.') else {
        return false;
    };
    let pid_suffix = |marker: &str| {
        rest.rsplit_once(marker).is_some_and(|(stem, pid)| {
            !stem.is_empty() && !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit())
        })
    };
    pid_suffix(".tmp-")
        || pid_suffix(".old-")
        || (rest.len() > ".tmp".len() && rest.ends_with(".tmp"))
}

/// Removes what killed writers left in `dir` (not recursive): temporary files and
/// directories named as [`write_atomic`], [`create_dir_atomic`] and [`remove_dir_atomic`]
/// name them. Returns how many entries went. Only for a directory that no other process is
/// writing, such as a run being resumed.
pub fn remove_temporaries(dir: &Path) -> io::Result<usize> {
    let mut removed = 0;
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let entry = entry?;
        if !is_temporary_name(&entry.file_name().to_string_lossy()) {
            continue;
        }
        let path = entry.path();
        if entry.file_type()?.is_dir() {
            fs::remove_dir_all(&path)?;
        } else {
            fs::remove_file(&path)?;
        }
        removed += 1;
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_file_replaces_the_old_one_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.json");
        write_atomic(&path, b"old").unwrap();
        write_atomic(&path, b"new").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"new");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_failed_directory_fill_leaves_the_old_directory() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("step-5");
        create_dir_atomic(&target, |d| fs::write(d.join("x"), b"1")).unwrap();
        let err = create_dir_atomic(&target, |_| Err(io::Error::other("disk full")));
        assert!(err.is_err());
        assert_eq!(fs::read(target.join("x")).unwrap(), b"1");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn temporaries_are_told_apart_from_real_files() {
        for name in [
            ".step-10.tmp-4242",
            ".metrics.jsonl.tmp-1",
            ".step-10.old-77",
            ".model.safetensors.tmp",
        ] {
            assert!(is_temporary_name(name), "{name}");
        }
        for name in [
            "step-10",
            "model.safetensors",
            ".tmp",
            ".step-10.tmp-",
            ".step-10.tmp-12a",
            ".hidden",
            "x.tmp-12",
        ] {
            assert!(!is_temporary_name(name), "{name}");
        }
    }

    #[test]
    fn leftovers_of_killed_writers_are_removed_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let keep = dir.path().join("step-5");
        create_dir_atomic(&keep, |d| fs::write(d.join("state.json"), b"{}")).unwrap();
        fs::create_dir(dir.path().join(".step-6.tmp-123")).unwrap();
        fs::write(dir.path().join(".step-6.tmp-123/model.bpk"), b"half").unwrap();
        fs::write(dir.path().join(".a.json.tmp-9"), b"half").unwrap();
        fs::write(dir.path().join(".notes"), b"the user's").unwrap();
        assert_eq!(remove_temporaries(dir.path()).unwrap(), 2);
        let mut left: Vec<String> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, [".notes", "step-5"]);
        assert_eq!(remove_temporaries(&dir.path().join("absent")).unwrap(), 0);
    }

    #[test]
    fn a_directory_removed_atomically_is_gone_without_leftovers() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("step-5");
        create_dir_atomic(&target, |d| fs::write(d.join("x"), b"1")).unwrap();
        remove_dir_atomic(&target).unwrap();
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
