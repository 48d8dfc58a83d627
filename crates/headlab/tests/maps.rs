//! The maps stay true: `docs/architecture.md` names every crate and every script, the
//! README's crate map names every crate, and each crate's `lib.rs` (or `main.rs`) map names
//! every module at its top. A file added without a line on the map fails here, so the map a
//! newcomer reads first lists what exists.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The names of the entries of `dir`, sorted (files with their extension).
fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Whether `text` has `word` with no letter, digit, `_` or `-` on either side.
fn names(text: &str, word: &str) -> bool {
    let is_name = |c: char| c.is_alphanumeric() || c == '_' || c == '-';
    text.match_indices(word).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        !before.is_some_and(is_name) && !after.is_some_and(is_name)
    })
}

fn crates() -> Vec<String> {
    entries(&root().join("crates"))
}

#[test]
fn the_architecture_chapter_names_every_crate_and_script() {
    let chapter = std::fs::read_to_string(root().join("docs/architecture.md")).unwrap();
    let mut missing = vec![];
    for name in crates() {
        if !names(&chapter, &format!("crates/{name}")) {
            missing.push(format!("crates/{name}"));
        }
    }
    for script in entries(&root().join("scripts")) {
        if !names(&chapter, &script) {
            missing.push(format!("scripts/{script}"));
        }
    }
    assert!(
        missing.is_empty(),
        "docs/architecture.md does not name {missing:?}: add a line for each to its map"
    );
}

#[test]
fn the_readme_names_every_crate() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let missing: Vec<String> = crates()
        .into_iter()
        .filter(|name| !names(&readme, &format!("crates/{name}")))
        .collect();
    assert!(
        missing.is_empty(),
        "README.md's crate map does not name {missing:?}"
    );
}

#[test]
fn every_crate_map_names_its_modules() {
    let mut missing = vec![];
    for name in crates() {
        let src = root().join("crates").join(&name).join("src");
        let Some(map) = ["lib.rs", "main.rs"]
            .iter()
            .map(|file| src.join(file))
            .find(|path| path.is_file())
        else {
            continue;
        };
        let text = std::fs::read_to_string(&map).unwrap();
        let doc: String = text
            .lines()
            .filter(|line| line.starts_with("//!"))
            .collect::<Vec<_>>()
            .join("\n");
        for entry in entries(&src) {
            let module = entry.trim_end_matches(".rs");
            let is_root = ["lib", "main", "bin"].contains(&module);
            if !is_root && !names(&doc, module) {
                missing.push(format!("{}: {module}", map.display()));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "crate maps (the //! docs of lib.rs or main.rs) that do not name a module: {missing:?}"
    );
}

#[test]
fn the_name_check_needs_a_whole_name() {
    assert!(names("setup.sh (system packages)", "setup.sh"));
    assert!(!names("slurm-local.sh", "local.sh"));
    assert!(!names("relation_masks", "masks"));
    assert!(names("[`masks`]", "masks"));
}
