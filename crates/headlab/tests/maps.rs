//! The maps stay true: `docs/architecture.md` names every crate, and every script under the
//! heading of the folder of `scripts/` it is in (and no folder that is not there), the
//! README's crate map names every crate, and each crate's `lib.rs` (or `main.rs`) map names
//! every module at its top. A file added or moved without its line on the map fails here, so
//! the map a newcomer reads first lists what exists, where it is.

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

/// The `scripts/` entry of the chapter's workspace map, split by folder heading (a line
/// whose first word is `NAME/`): the text before the first heading under `""`, then each
/// folder's text under its name.
fn scripts_map(chapter: &str) -> Vec<(String, String)> {
    let mut lines = chapter
        .lines()
        .skip_while(|line| !line.starts_with("scripts/ "))
        .take_while(|line| line.starts_with("scripts/ ") || line.starts_with(' '));
    let first = lines
        .next()
        .expect("docs/architecture.md's map has no scripts/ entry");
    let mut map = vec![(String::new(), first["scripts/".len()..].to_string())];
    for line in lines {
        let word = line.split_whitespace().next().unwrap_or("");
        match word.strip_suffix('/') {
            Some(folder) if line.starts_with("  ") && !folder.contains('/') => {
                map.push((
                    folder.to_string(),
                    line.trim_start()[word.len()..].to_string(),
                ));
            }
            _ => map.last_mut().unwrap().1.push_str(&format!("\n{line}")),
        }
    }
    map
}

#[test]
fn the_architecture_chapter_names_every_crate_and_script_in_its_folder() {
    let chapter = std::fs::read_to_string(root().join("docs/architecture.md")).unwrap();
    let mut missing = vec![];
    for name in crates() {
        if !names(&chapter, &format!("crates/{name}")) {
            missing.push(format!("crates/{name}"));
        }
    }
    let map = scripts_map(&chapter);
    let scripts = root().join("scripts");
    // Python's bytecode caches are not scripts.
    let listed = |dir: &Path| -> Vec<String> {
        entries(dir)
            .into_iter()
            .filter(|name| name != "__pycache__" && !name.starts_with('.'))
            .collect()
    };
    for entry in listed(&scripts) {
        let path = scripts.join(&entry);
        let (folder, files) = if path.is_dir() {
            (entry.clone(), listed(&path))
        } else {
            (String::new(), vec![entry.clone()])
        };
        let Some((_, text)) = map.iter().find(|(name, _)| *name == folder) else {
            missing.push(format!("scripts/{folder}/ (a heading of its own)"));
            continue;
        };
        for file in files {
            if !names(text, &file) {
                let place = if folder.is_empty() {
                    String::new()
                } else {
                    format!("{folder}/")
                };
                missing.push(format!("scripts/{place}{file}"));
            }
        }
    }
    let stale: Vec<&String> = map
        .iter()
        .map(|(folder, _)| folder)
        .filter(|folder| !folder.is_empty() && !scripts.join(folder).is_dir())
        .collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "docs/architecture.md's map does not name {missing:?} (each script goes under its \
         folder's heading) or names folders of scripts/ that do not exist: {stale:?}"
    );
}

#[test]
fn the_scripts_map_is_read_by_folder() {
    let chapter = [
        "crates/x          x",
        "scripts/          one folder per job:",
        "  setup/          setup.sh (a),",
        "                  more.sh",
        "  check/          test.sh",
        ".ci/run           y",
    ]
    .join("\n");
    let map = scripts_map(&chapter);
    let folders: Vec<&str> = map.iter().map(|(folder, _)| folder.as_str()).collect();
    assert_eq!(folders, ["", "setup", "check"]);
    assert!(names(&map[1].1, "more.sh") && !names(&map[1].1, "test.sh"));
    assert!(names(&map[2].1, "test.sh") && !map[2].1.contains(".ci/run"));
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

/// The workspace crates `manifest`'s `[dependencies]` table names (a small reader of the
/// table's keys: `name = ...` or `name.workspace = true`).
fn dependencies(manifest: &Path, workspace: &[String]) -> Vec<String> {
    let text = std::fs::read_to_string(manifest).unwrap();
    let mut found = vec![];
    let mut inside = false;
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            inside = line == "[dependencies]";
            continue;
        }
        let key = line.split(['=', '.', ' ']).next().unwrap_or("");
        if inside && workspace.iter().any(|name| name == key) {
            found.push(key.to_string());
        }
    }
    found.sort();
    found
}

/// The chapter's table of each crate's dependencies: the first fenced block after "## Which
/// way things depend", a crate a line with what it depends on (`-`: nothing).
fn dependency_table(chapter: &str) -> Vec<(String, Vec<String>)> {
    let section = chapter
        .split("## Which way things depend")
        .nth(1)
        .expect("docs/architecture.md has a section \"Which way things depend\"");
    let block = section
        .split("```")
        .nth(1)
        .expect("the section opens with its table, fenced");
    block
        .lines()
        .skip(2) // the fence's rest, then the header
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            let mut words = line.split_whitespace();
            let name = words.next().unwrap().to_string();
            let mut deps: Vec<String> = words
                .map(|w| w.trim_end_matches(',').to_string())
                .filter(|w| w != "-")
                .collect();
            deps.sort();
            (name, deps)
        })
        .collect()
}

#[test]
fn the_dependency_table_is_what_the_manifests_say() {
    let chapter = std::fs::read_to_string(root().join("docs/architecture.md")).unwrap();
    let table = dependency_table(&chapter);
    let workspace: Vec<String> = crates()
        .into_iter()
        .filter(|name| name != "workspace-hack")
        .collect();
    let mut wrong = vec![];
    for name in &workspace {
        let manifest = root().join("crates").join(name).join("Cargo.toml");
        let actual = dependencies(&manifest, &workspace);
        match table.iter().find(|(crate_name, _)| crate_name == name) {
            None => wrong.push(format!("{name} is not in the table")),
            Some((_, claimed)) if *claimed != actual => wrong.push(format!(
                "{name}: the table says {claimed:?}, its Cargo.toml {actual:?}"
            )),
            Some(_) => {}
        }
    }
    for (name, _) in &table {
        if !workspace.contains(name) {
            wrong.push(format!("{name} is in the table but is no crate"));
        }
    }
    assert!(
        wrong.is_empty(),
        "docs/architecture.md's dependency table: {wrong:?}"
    );
}

/// Every file (`NAME.rs`) and folder (`NAME/`) that the workspace map names in a crate's
/// entry is somewhere in that crate: a file renamed or removed leaves no stale line.
#[test]
fn every_file_a_crate_entry_names_is_in_the_crate() {
    let chapter = std::fs::read_to_string(root().join("docs/architecture.md")).unwrap();
    let block = chapter.split("```").nth(1).expect("the workspace map");
    let mut entries_of: Vec<(String, String)> = vec![];
    for line in block.lines() {
        if let Some(rest) = line.strip_prefix("crates/") {
            let name = rest.split_whitespace().next().unwrap_or("").to_string();
            entries_of.push((name, rest.to_string()));
        } else if line.starts_with(' ') && !entries_of.is_empty() {
            entries_of
                .last_mut()
                .unwrap()
                .1
                .push_str(&format!("\n{line}"));
        } else if !line.starts_with(' ') {
            entries_of.push((String::new(), String::new())); // another entry: not a crate's
        }
    }
    let mut stale = vec![];
    for (name, text) in entries_of.iter().filter(|(name, _)| !name.is_empty()) {
        let dir = root().join("crates").join(name);
        let mut files = vec![];
        walk(&dir, &mut files);
        let tokens = text.split(|c: char| !(c.is_alphanumeric() || "_./-".contains(c)));
        for token in tokens {
            let token = token.trim_end_matches(['.', ',']);
            let last = token.trim_end_matches('/').rsplit('/').next().unwrap_or("");
            let is_file = token.ends_with(".rs");
            let is_folder = token.ends_with('/') && !token.contains('.') && last != name;
            let there = files.iter().any(|path| {
                path.file_name().is_some_and(|f| f == last)
                    && (is_file == path.is_file() || is_folder == path.is_dir())
            });
            if (is_file || is_folder) && !last.is_empty() && !there {
                stale.push(format!("crates/{name}: {token}"));
            }
        }
    }
    assert!(
        stale.is_empty(),
        "docs/architecture.md's workspace map names files or folders its crate does not have: \
         {stale:?}"
    );
}

/// Every path under `dir`, `target` and hidden entries left out.
fn walk(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || name == "target" {
            continue;
        }
        found.push(path.clone());
        if path.is_dir() {
            walk(&path, found);
        }
    }
}
