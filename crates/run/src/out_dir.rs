//! A directory a user names with `--out` for headlab to write into (`inspect`'s report,
//! `compare`'s comparison): claimed before anything is written, held by one writer at a time.
//!
//! The contract, the same as a run directory's ([`crate::dir`]):
//! - headlab writes only into a new directory, an empty one, or one that holds its own marker
//!   ([`MARKER`], naming what kind of output it holds) or, for output written before markers
//!   existed, the manifest of its kind ([`OutKind::recognises`]). Anything else is a user's
//!   directory and is refused, naming one of its entries, before a byte is written;
//! - `/` and the home directory are refused by name, whatever they hold;
//! - the directory itself must not be a symbolic link (writes and clean-up never go through
//!   one);
//! - one writer at a time: an exclusive advisory lock (`flock`) on `.lock` inside it, its
//!   file naming the holder to whoever is refused. A second `inspect --out DIR` while one
//!   writes is refused, so one sealed report never mixes two readings.
//!
//! Clean-up inside a claimed directory is its writer's business, and deletes only names of
//! its own layout (the `report` crate's `dir::FILES` table).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::dir::LockRefused;

/// The marker file: its presence makes a directory headlab's output of the kind it names.
pub const MARKER: &str = ".headlab-out.json";
/// The writer's lock, as in a run directory.
pub use crate::dir::LOCK;

/// Version of the marker; a newer one is refused rather than misread.
const FORMAT: u32 = 1;

/// What a claimed directory holds, and how to recognise one written before markers.
#[derive(Debug, Clone, Copy)]
pub struct OutKind {
    /// The kind, in the marker and in messages: `report`, `comparison`.
    pub name: &'static str,
    /// The command that writes it, for the lock file and messages: `inspect`, `compare`.
    pub program: &'static str,
    /// Whether a directory without the marker is one this kind wrote before markers existed
    /// (its manifest is there and is headlab's).
    pub recognises: fn(&Path) -> bool,
}

/// The marker's content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutMarker {
    /// Marker version ([`FORMAT`]).
    pub format: u32,
    /// The kind of output ([`OutKind::name`]).
    pub kind: String,
    /// The program and version that claimed the directory.
    pub created_by: String,
}

/// Why a directory could not be claimed.
#[derive(Debug, thiserror::Error)]
pub enum OutDirError {
    /// `/` or the home directory.
    #[error(
        "--out {path} is {what}; headlab writes its {kind} only into a new directory, an empty \
         one or one of its own, so nothing was written; give a new directory such as --out \
         {suggestion}"
    )]
    Reserved {
        /// The path as given.
        path: PathBuf,
        /// `the root directory`, `your home directory`.
        what: &'static str,
        /// The kind of output.
        kind: &'static str,
        /// A directory that would do.
        suggestion: String,
    },
    /// A symbolic link.
    #[error(
        "--out {0} is a symbolic link; headlab does not write or clean up through links, so \
         nothing was written; give the directory it points to, or a new directory"
    )]
    Symlink(PathBuf),
    /// Something other than a directory.
    #[error("--out {0} exists and is not a directory; give a new directory")]
    NotADirectory(PathBuf),
    /// A non-empty directory headlab did not write.
    #[error(
        "--out {path} is not empty and holds no headlab {kind} (it holds {example}); headlab \
         writes only into a new directory, an empty one or one of its own, so nothing there \
         was touched; give a new directory"
    )]
    Foreign {
        /// The directory.
        path: PathBuf,
        /// The kind of output that was to be written.
        kind: &'static str,
        /// One of its entries, quoted.
        example: String,
    },
    /// Headlab's output of another kind.
    #[error(
        "--out {path} holds a headlab {found}, not a {kind}; nothing there was touched; give \
         another directory"
    )]
    OtherKind {
        /// The directory.
        path: PathBuf,
        /// The kind it holds.
        found: String,
        /// The kind that was to be written.
        kind: &'static str,
    },
    /// A marker this build cannot read.
    #[error("{path} is unreadable: {message}; nothing there was touched")]
    BadMarker {
        /// The marker.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// Another process writes there.
    #[error(
        "--out {path} is being written by {holder}; wait for it to finish, or give another \
         directory"
    )]
    Locked {
        /// The directory.
        path: PathBuf,
        /// "process 1234 (inspect)", as the lock file says.
        holder: String,
    },
    /// File system failure.
    #[error("cannot {action} {path}: {error}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The path at fault.
        path: PathBuf,
        /// Why.
        error: io::Error,
    },
}

fn io_error<'a>(
    action: &'static str,
    path: &'a Path,
) -> impl FnOnce(io::Error) -> OutDirError + 'a {
    move |error| OutDirError::Io {
        action,
        path: path.to_path_buf(),
        error,
    }
}

/// The writer's hold on a claimed directory: the run directory's lock
/// ([`crate::dir::RunLock`]), released when dropped or when the process dies, its file
/// emptied first.
pub type OutLock = crate::dir::RunLock;

/// Checks, without writing anything, that `root` could be claimed for `kind`: what `--out`
/// is refused for is said before any work starts. The lock is not tried here.
pub fn check(root: &Path, kind: &OutKind) -> Result<(), OutDirError> {
    refuse_reserved(root, kind)?;
    match fs::symlink_metadata(root) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_error("read", root)(e)),
        Ok(meta) if meta.file_type().is_symlink() => Err(OutDirError::Symlink(root.to_path_buf())),
        Ok(meta) if !meta.is_dir() => Err(OutDirError::NotADirectory(root.to_path_buf())),
        Ok(_) => refuse_foreign(root, kind),
    }
}

/// Claims `root` for `kind`: checks it ([`check`]), makes it (and its parents) when new,
/// takes its lock, checks again under the lock and writes the marker. Hold the returned lock
/// until the output is sealed.
pub fn claim(root: &Path, kind: &OutKind) -> Result<OutLock, OutDirError> {
    check(root, kind)?;
    if let Some(parent) = root.parent().filter(|p| !p.as_os_str().is_empty()) {
        // Named by the directory asked for: the parent is a detail of it.
        fs::create_dir_all(parent).map_err(io_error("create", root))?;
    }
    match fs::create_dir(root) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io_error("create", root)(e)),
    }
    // Again: between the check and here another process may have made something there.
    check(root, kind)?;
    let lock = lock_exclusive(root, kind)?;
    refuse_foreign(root, kind)?;
    let marker = OutMarker {
        format: FORMAT,
        kind: kind.name.to_string(),
        created_by: format!("headlab {} {}", kind.program, env!("CARGO_PKG_VERSION")),
    };
    let json = serde_json::to_vec_pretty(&marker).expect("the marker serializes");
    let marker_path = root.join(MARKER);
    crate::atomic::write_atomic(&marker_path, &json).map_err(io_error("write", &marker_path))?;
    Ok(lock)
}

/// Whether `root` is `RUN/name` for a run directory `RUN`: a default place of a command's
/// output (`RUN/inspect`, `RUN/compare`), headlab's whatever it holds.
pub fn is_named_in_a_run(root: &Path, name: &str) -> bool {
    root.file_name() == Some(std::ffi::OsStr::new(name))
        && root
            .parent()
            .is_some_and(|run| run.join(crate::dir::MARKER).is_file())
}

/// Whether `root` is a directory headlab claimed for `kind` (its marker names the kind).
pub fn is_claimed(root: &Path, kind: &OutKind) -> bool {
    matches!(read_marker(root), Ok(Some(marker)) if marker.kind == kind.name)
}

/// `/` and the home directory, refused by name.
fn refuse_reserved(root: &Path, kind: &OutKind) -> Result<(), OutDirError> {
    let Ok(canonical) = fs::canonicalize(root) else {
        return Ok(()); // not there yet: neither
    };
    let home = std::env::var_os("HOME").and_then(|home| fs::canonicalize(home).ok());
    let what = if canonical.parent().is_none() {
        "the root directory"
    } else if home.as_ref() == Some(&canonical) {
        "your home directory"
    } else {
        return Ok(());
    };
    Err(OutDirError::Reserved {
        path: root.to_path_buf(),
        what,
        kind: kind.name,
        suggestion: format!(
            "{}",
            canonical.join(format!("headlab-{}", kind.name)).display()
        ),
    })
}

/// Refuses a non-empty directory that is neither claimed for `kind` nor recognised as its
/// output from before markers.
fn refuse_foreign(root: &Path, kind: &OutKind) -> Result<(), OutDirError> {
    match read_marker(root)? {
        Some(marker) if marker.kind == kind.name => return Ok(()),
        Some(marker) => {
            return Err(OutDirError::OtherKind {
                path: root.to_path_buf(),
                found: marker.kind,
                kind: kind.name,
            });
        }
        None => {}
    }
    let mut entries = Vec::new();
    for entry in fs::read_dir(root).map_err(io_error("read", root))? {
        let name = entry
            .map_err(io_error("read", root))?
            .file_name()
            .to_string_lossy()
            .into_owned();
        if name != LOCK && !is_marker_temporary(&name) {
            entries.push(name);
        }
    }
    entries.sort();
    match entries.first() {
        Some(_) if (kind.recognises)(root) => Ok(()),
        Some(example) => Err(OutDirError::Foreign {
            path: root.to_path_buf(),
            kind: kind.name,
            example: format!("\"{}\"", crate::config::excerpt(example, 60)),
        }),
        None => Ok(()),
    }
}

/// The marker of `root`, `None` where there is none.
fn read_marker(root: &Path) -> Result<Option<OutMarker>, OutDirError> {
    let path = root.join(MARKER);
    let bytes = match crate::small_file::read(&path, 64 * 1024) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(OutDirError::BadMarker {
                path,
                message: e.to_string(),
            });
        }
    };
    let bad = |message: String| OutDirError::BadMarker {
        path: path.clone(),
        message,
    };
    let marker: OutMarker = serde_json::from_slice(&bytes).map_err(|e| bad(e.to_string()))?;
    if marker.format != FORMAT {
        return Err(bad(format!(
            "marker version {} is not {FORMAT}, the one this build reads; use the headlab that \
             wrote it",
            marker.format
        )));
    }
    Ok(Some(marker))
}

/// The temporary name of a marker whose writer was killed before its rename.
fn is_marker_temporary(name: &str) -> bool {
    name.strip_prefix(&format!(".{MARKER}.tmp-"))
        .is_some_and(|pid| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()))
}

/// Takes the exclusive lock of `root` ([`crate::dir::take_exclusive_lock`]), naming this
/// process and `kind`'s program in the lock file.
fn lock_exclusive(root: &Path, kind: &OutKind) -> Result<OutLock, OutDirError> {
    crate::dir::take_exclusive_lock(root, kind.program).map_err(|refused| match refused {
        LockRefused::Held(holder) => OutDirError::Locked {
            path: root.to_path_buf(),
            holder: holder.0,
        },
        LockRefused::Io {
            action,
            path,
            error,
        } => OutDirError::Io {
            action,
            path,
            error,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const REPORT: OutKind = OutKind {
        name: "report",
        program: "inspect",
        recognises: |root| root.join("manifest.json").is_file(),
    };
    const COMPARISON: OutKind = OutKind {
        name: "comparison",
        program: "compare",
        recognises: |_| false,
    };

    #[test]
    fn a_new_or_empty_directory_is_claimed_and_marked() {
        let tmp = tempfile::tempdir().unwrap();
        let new = tmp.path().join("a/b/report");
        let lock = claim(&new, &REPORT).unwrap();
        assert!(is_claimed(&new, &REPORT));
        assert!(!is_claimed(&new, &COMPARISON));
        drop(lock);
        let empty = tmp.path().join("empty");
        fs::create_dir(&empty).unwrap();
        claim(&empty, &REPORT).unwrap();
        // Claimed once, claimed again (a second inspect into its own report).
        claim(&empty, &REPORT).unwrap();
    }

    #[test]
    fn a_users_directory_is_refused_and_left_as_it_was() {
        let tmp = tempfile::tempdir().unwrap();
        let users = tmp.path().join("mine");
        fs::create_dir(&users).unwrap();
        fs::write(users.join("index.html"), "my page").unwrap();
        let error = claim(&users, &REPORT).unwrap_err();
        assert!(matches!(error, OutDirError::Foreign { .. }), "{error}");
        assert!(error.to_string().contains("\"index.html\""), "{error}");
        let left: Vec<_> = fs::read_dir(&users)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(
            left,
            vec![std::ffi::OsString::from("index.html")],
            "no lock, no marker"
        );
        assert_eq!(
            fs::read_to_string(users.join("index.html")).unwrap(),
            "my page"
        );
    }

    #[test]
    fn a_report_from_before_markers_is_recognised_by_its_manifest() {
        let tmp = tempfile::tempdir().unwrap();
        let old = tmp.path().join("old");
        fs::create_dir(&old).unwrap();
        fs::write(old.join("manifest.json"), "{}").unwrap();
        fs::write(old.join("heads.json"), "[]").unwrap();
        claim(&old, &REPORT).unwrap();
        assert!(is_claimed(&old, &REPORT));
    }

    #[test]
    fn another_kind_a_link_a_file_and_the_root_are_refused_by_name() {
        let tmp = tempfile::tempdir().unwrap();
        let comparison = tmp.path().join("cmp");
        claim(&comparison, &COMPARISON).unwrap();
        let error = claim(&comparison, &REPORT).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("holds a headlab comparison, not a report"),
            "{error}"
        );

        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&comparison, &link).unwrap();
        assert!(matches!(
            claim(&link, &COMPARISON),
            Err(OutDirError::Symlink(_))
        ));

        let file = tmp.path().join("file");
        fs::write(&file, "x").unwrap();
        assert!(matches!(
            claim(&file, &REPORT),
            Err(OutDirError::NotADirectory(_))
        ));

        let error = check(Path::new("/"), &REPORT).unwrap_err();
        assert!(
            error.to_string().contains("is the root directory"),
            "{error}"
        );
    }

    #[test]
    fn a_second_writer_is_refused_with_the_holder_named() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("report");
        let held = claim(&dir, &REPORT).unwrap();
        let error = claim(&dir, &REPORT).unwrap_err();
        let message = error.to_string();
        assert!(
            message.contains(&format!("process {} (inspect)", std::process::id())),
            "{message}"
        );
        drop(held);
        claim(&dir, &REPORT).unwrap();
        assert_eq!(
            fs::read_to_string(dir.join(LOCK)).unwrap(),
            "",
            "no holder once let go"
        );
    }
}
