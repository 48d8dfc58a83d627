//! The one rule for a run's name: one directory name under `runs/` (or a sweep's
//! directory), where `train` puts the run and `--force` may later remove it. The config
//! checks it, and `sweep` adds its own, stricter rule on top (its names become CSV columns,
//! file names and Slurm arguments). [`file_safe`] is the one way a piece of a file name is
//! made from text a user wrote.

/// Longest run name, in bytes: a file name on every common file system.
pub const MAX_NAME_BYTES: usize = 255;

/// What is wrong with `name` as a run name, if anything: empty, `.` or `..`, a path
/// separator, a control character, or longer than [`MAX_NAME_BYTES`]. Anything of these
/// could put a run (or a `--force`) outside its parent directory.
pub fn problem(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        Some("it is empty")
    } else if name == "." || name == ".." {
        Some("`.` and `..` name directories, not runs")
    } else if name.contains(['/', '\\']) {
        Some("it holds a path separator")
    } else if name.chars().any(char::is_control) {
        Some("it holds a control character")
    } else if name.len() > MAX_NAME_BYTES {
        Some("it is longer than 255 bytes")
    } else {
        None
    }
}

/// `text` with every character but ASCII letters, digits, `.`, `_` and `-` replaced by
/// `replacement`: a piece of a file name made from something a user or a config wrote (a
/// checkpoint's directory, a grid point, a treebank's file name).
pub fn file_safe(text: &str, replacement: char) -> String {
    text.chars()
        .map(|c| match c.is_ascii_alphanumeric() || "._-".contains(c) {
            true => c,
            false => replacement,
        })
        .collect()
}
