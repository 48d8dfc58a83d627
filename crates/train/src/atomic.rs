//! The one writer of files: write to a temporary name in the same directory, flush to disk,
//! then rename into place, so a reader never sees half a file and a crash never leaves one.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

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
    let tmp = temporary_path(path);
    let result = (|| {
        let mut file = File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
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
}
