//! The one reader of the files a user names: configs (`config.toml`, a sweep file, a
//! checkpoint's `config.json`), tokenizers, datasets and treebanks. It lives in `tasks`, the
//! lowest crate that reads a user's file (a file task's dataset, a CoNLL-U treebank); `run`
//! re-exports it as `run::small_file`. Each is read only when it is a regular file
//! (a FIFO would block the read forever, `/dev/zero` would fill the memory) and at most
//! `limit` bytes long, checked before anything is allocated and again while reading (a file
//! that grows, or a `/proc` file whose size says 0, stops at the bound). The errors are
//! `std::io::Error`s, so every caller's "cannot read FILE: ..." message carries them as it
//! carries a missing file.

use std::fs;
use std::io::{self, Read};
use std::path::Path;

/// The most a config file (`config.toml`, a sweep file, a checkpoint's `config.json`) may
/// hold: the largest shipped is about 2 KB.
pub const CONFIG_LIMIT: u64 = 1 << 20;

/// The bytes of the regular file `path`, refused when it is something else or longer than
/// `limit` bytes.
pub fn read(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    let (file, size) = open(path, limit)?;
    let mut content = Vec::with_capacity(size as usize);
    file.take(limit + 1).read_to_end(&mut content)?;
    if content.len() as u64 > limit {
        // It grew past the limit since `open` measured it.
        return Err(too_large(format!("more than {}", bytes(limit)), limit));
    }
    Ok(content)
}

/// `path` opened for reading, and its size, once it is known to be a regular file of at
/// most `limit` bytes: for a file read in parts (a checkpoint's weights), which must not grow
/// past the limit while it is read (the reader stops at the size given).
pub fn open(path: &Path, limit: u64) -> io::Result<(fs::File, u64)> {
    // metadata, not open: opening a FIFO blocks until something writes to it.
    let metadata = fs::metadata(path)?;
    if !metadata.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "it is {}, not a regular file",
                describe(&metadata.file_type())
            ),
        ));
    }
    if metadata.len() > limit {
        return Err(too_large(bytes(metadata.len()), limit));
    }
    Ok((fs::File::open(path)?, metadata.len()))
}

/// A file of `size` (in words) over `limit` bytes.
fn too_large(size: String, limit: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::FileTooLarge,
        format!("it is {size}, over the {} this file may hold", bytes(limit)),
    )
}

/// [`read`] as UTF-8 text.
pub fn read_to_string(path: &Path, limit: u64) -> io::Result<String> {
    String::from_utf8(read(path, limit)?).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "it is not UTF-8 text (byte {})",
                e.utf8_error().valid_up_to()
            ),
        )
    })
}

/// What a file that is not a regular one is, for the message.
fn describe(kind: &fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_fifo() {
            return "a FIFO (named pipe)";
        }
        if kind.is_char_device() || kind.is_block_device() {
            return "a device";
        }
        if kind.is_socket() {
            return "a socket";
        }
    }
    if kind.is_dir() {
        "a directory"
    } else {
        "not a file"
    }
}

/// `512 bytes`, `3 KiB`, `2 MiB`, `5 GiB` (whole units, rounded down).
fn bytes(n: u64) -> String {
    match n {
        n if n >= 1 << 30 => format!("{} GiB", n >> 30),
        n if n >= 1 << 20 => format!("{} MiB", n >> 20),
        n if n >= 1 << 10 => format!("{} KiB", n >> 10),
        n => format!("{n} bytes"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_regular_file_reads_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.toml");
        fs::write(&path, "name = \"a\"\n").unwrap();
        assert_eq!(read_to_string(&path, 64).unwrap(), "name = \"a\"\n");
        // Exactly at the limit is allowed.
        assert_eq!(read(&path, 11).unwrap().len(), 11);
    }

    #[test]
    fn a_file_over_the_limit_is_refused_with_both_sizes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.toml");
        fs::write(&path, vec![b'#'; 3 << 10]).unwrap();
        let error = read(&path, 2 << 10).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::FileTooLarge);
        assert_eq!(
            error.to_string(),
            "it is 3 KiB, over the 2 KiB this file may hold"
        );
    }

    #[cfg(unix)]
    #[test]
    fn devices_fifos_and_directories_are_refused_before_reading() {
        // /dev/zero never ends; a read of it would fill the memory.
        let error = read(Path::new("/dev/zero"), CONFIG_LIMIT).unwrap_err();
        assert_eq!(error.to_string(), "it is a device, not a regular file");
        // A FIFO with no writer: opening it would block forever, so this returning at all
        // is the test.
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("config.json");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let error = read(&fifo, CONFIG_LIMIT).unwrap_err();
        assert_eq!(
            error.to_string(),
            "it is a FIFO (named pipe), not a regular file"
        );
        let error = read(dir.path(), CONFIG_LIMIT).unwrap_err();
        assert_eq!(error.to_string(), "it is a directory, not a regular file");
    }

    #[test]
    fn text_that_is_not_utf8_says_where() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("latin1.toml");
        fs::write(&path, b"name = \"caf\xe9\"").unwrap();
        let error = read_to_string(&path, 64).unwrap_err();
        assert_eq!(error.to_string(), "it is not UTF-8 text (byte 11)");
    }
}
