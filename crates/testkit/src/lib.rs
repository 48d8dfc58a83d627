//! What headlab's tests share, so that no test file writes it again:
//!
//! - [`skip_unless_required`]: the rule for a test whose real part (lavapipe, Chromium,
//!   chromedriver, a Slurm cluster, a private tmpfs, all-MiniLM-L6-v2) is missing on this
//!   machine: it says why and passes, unless its `HEADLAB_REQUIRE_*` variable is set, as
//!   `.ci/run` sets every one, where a missing part is a failure.
//! - [`minilm_dir`]: where `scripts/setup/setup.sh` unpacks all-MiniLM-L6-v2.
//! - [`TINY_CONFIG`]: the tiny run most tests train.
//!
//! It depends on nothing, so the tests of every crate, the lowest included, can use it.

use std::path::{Path, PathBuf};

/// The tiny config most tests train (`crates/train/tests/fixtures/tiny.toml`: reverse, one
/// layer of two heads, d_model 16, 20 steps with snapshots every 5), by absolute path.
pub const TINY_CONFIG: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../train/tests/fixtures/tiny.toml"
);

/// For a test that cannot run here because `why` (a missing real part): panics with `why`
/// when the environment variable `required` (`HEADLAB_REQUIRE_...`) is set, non-empty and not
/// `0`, so CI cannot pass without the part; otherwise prints `skipped <test>: <why>` and
/// returns, and the test returns as passed.
pub fn skip_unless_required(test: &str, required: &str, why: &str) {
    assert!(
        !is_required(required),
        "{required} is set but {test} cannot run: {why}"
    );
    eprintln!("skipped {test}: {why}");
}

/// Whether the environment variable `required` asks for the real part: set, not empty, not `0`.
pub fn is_required(required: &str) -> bool {
    std::env::var_os(required).is_some_and(|value| !value.is_empty() && value != "0")
}

/// all-MiniLM-L6-v2 as `scripts/setup/setup.sh` unpacks it: `HEADLAB_MINILM_DIR`, else
/// `~/.cache/headlab/all-MiniLM-L6-v2`. `None` where it is not there, after
/// [`skip_unless_required`] for `HEADLAB_REQUIRE_MINILM` (set by `.ci/run`).
pub fn minilm_dir(test: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("HEADLAB_MINILM_DIR")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .map(|home| Path::new(&home).join(".cache/headlab/all-MiniLM-L6-v2"))
        })
        .unwrap_or_else(|| PathBuf::from(".cache/headlab/all-MiniLM-L6-v2"));
    if dir.join("model.safetensors").is_file() {
        return Some(dir);
    }
    let why = format!(
        "no all-MiniLM-L6-v2 in {} (scripts/setup/setup.sh installs it)",
        dir.display()
    );
    skip_unless_required(test, "HEADLAB_REQUIRE_MINILM", &why);
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_part_fails_only_where_it_is_required() {
        // A variable no one sets: the test is skipped, not failed.
        skip_unless_required("this test", "HEADLAB_REQUIRE_NOTHING_AT_ALL", "nothing");
        assert!(!is_required("HEADLAB_REQUIRE_NOTHING_AT_ALL"));
        let failed = std::panic::catch_unwind(|| {
            skip_unless_required("this test", "PATH", "the part is missing")
        });
        let message = *failed.unwrap_err().downcast::<String>().unwrap();
        assert_eq!(
            message,
            "PATH is set but this test cannot run: the part is missing"
        );
    }
}
