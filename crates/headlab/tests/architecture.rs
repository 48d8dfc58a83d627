//! The shape of the code, read from the source files: the workspace's crates depend only
//! downwards (the order in docs/architecture.md), inspect's folders import only
//! downwards (the order in `src/lib.rs`), no crate of the workspace has an import circle
//! between its files, and no file imports from a module above it in its own folder tree
//! (its parent `mod.rs`), which is how a circle hides from the circle check. Only inspect's
//! `load::reading` tells a model that reads its task's tokens from one that reads word
//! pieces (`only_the_reading_tells_tokens_from_pieces`). And the rooms
//! stay small: no source file over 1,000 lines before its tests, no function over 80 lines
//! unless it is a numerical kernel whose comment says why it is kept in one piece.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// inspect's folders, lowest first: a file may import from its own folder and the ones
/// before it. `inspection` (one run's report, measured) and `compare` (heads matched across
/// runs) share the top layer and import neither each other.
const LAYERS: &[&[&str]] = &[
    &["load"],
    &["circuits"],
    &["measures"],
    &["interventions"],
    &["inspection", "compare"],
];

/// report's modules, lowest first, likewise: drawing, what a report measured, then the
/// report directory and the errors, which figures and pages a report has, the writers of a
/// report and of a comparison, and the command line on top.
const REPORT_LAYERS: &[&[&str]] = &[
    &["draw"],
    &["provenance"],
    &["dir"],
    &["error"],
    &["figures", "pages"],
    &["write", "compare"],
    &["cli"],
];

fn crates_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every `.rs` file under `dir`, recursively, but a module's tests kept in a file of their
/// own (`tests.rs`, a `#[cfg(test)] mod tests;`): test code is left out of every check here,
/// as the `#[cfg(test)]` module of a file is.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = vec![];
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") && !path.ends_with("tests.rs") {
            files.push(path);
        }
    }
    files.sort();
    files
}

/// The module path of a source file relative to `src`: `measures/heads.rs` is
/// `measures::heads`, `circuits/mod.rs` is `circuits`, `lib.rs` is the root "".
fn module_of(src: &Path, file: &Path) -> String {
    let relative = file.strip_prefix(src).unwrap().with_extension("");
    let parts: Vec<String> = relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .filter(|p| p != "mod" && p != "lib")
        .collect();
    parts.join("::")
}

/// The `crate::...` paths a file names outside its `#[cfg(test)]` module (tests may reach
/// anywhere), with `use crate::a::{b, c::d}` expanded to `a::b` and `a::c::d`; with
/// `prefix` "super::", the paths it names through `super::`.
fn named_paths(text: &str, prefix: &str) -> Vec<String> {
    let code = text.split("#[cfg(test)]").next().unwrap();
    // Drop comments: doc links name modules without importing them.
    let code: String = code
        .lines()
        .map(|line| line.split("//").next().unwrap())
        .collect::<Vec<_>>()
        .join("\n");
    let mut paths = vec![];
    let mut rest = code.as_str();
    while let Some(at) = rest.find(prefix) {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + prefix.len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue; // `super::` inside `crate::a::super`-like paths, or part of a name
        }
        let end = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
            .unwrap_or(rest.len());
        let head = &rest[..end];
        if rest[end..].starts_with('{') {
            // A group: each item, after the prefix.
            let prefix = head;
            let close = rest.find('}').unwrap();
            for item in rest[end + 1..close].split(',') {
                let item = item.trim().trim_start_matches('{');
                if !item.is_empty() {
                    paths.push(format!("{prefix}{item}"));
                }
            }
        } else {
            paths.push(head.trim_end_matches(':').to_string());
        }
    }
    paths
}

/// The longest known module that `path` starts with.
fn resolve<'a>(path: &str, modules: &'a BTreeSet<String>) -> Option<&'a String> {
    modules
        .iter()
        .filter(|m| !m.is_empty() && (path == m.as_str() || path.starts_with(&format!("{m}::"))))
        .max_by_key(|m| m.len())
}

/// Each module of the crate at `src` with the modules of the same crate it imports (itself
/// and its own ancestors left out: a `mod.rs` declaring its children is no import).
fn import_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    imports_of(src, false)
}

/// Each module of the crate at `src` with the ancestors it imports from (`super::x` in
/// `a/b.rs` naming an item of `a/mod.rs`), the root left out.
fn upward_imports(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    imports_of(src, true)
}

/// Each module's imports within its crate: of other modules (`ancestors` false) or of its
/// own ancestors (`ancestors` true).
fn imports_of(src: &Path, ancestors: bool) -> BTreeMap<String, BTreeSet<String>> {
    let files = rust_files(src);
    let modules: BTreeSet<String> = files.iter().map(|f| module_of(src, f)).collect();
    let mut graph = BTreeMap::new();
    for file in &files {
        let module = module_of(src, file);
        let text = std::fs::read_to_string(file).unwrap();
        // `super::` in `a/b.rs` (module a::b) and in `a/b/mod.rs` (module a::b) both mean a.
        let parent = module.rsplit_once("::").map_or("", |(p, _)| p);
        let through_super = named_paths(&text, "super::").into_iter().map(|p| {
            if parent.is_empty() {
                p
            } else {
                format!("{parent}::{p}")
            }
        });
        let imports: BTreeSet<String> = named_paths(&text, "crate::")
            .into_iter()
            .chain(through_super)
            .collect::<Vec<_>>()
            .iter()
            .filter_map(|p| resolve(p, &modules))
            .filter(|target| {
                let is_ancestor = module.starts_with(&format!("{target}::"));
                **target != module && is_ancestor == ancestors
            })
            .cloned()
            .collect();
        graph.insert(module, imports);
    }
    graph
}

/// A circle in `graph`, if it has one, as the modules along it.
fn find_circle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(node.to_string(), 1);
        stack.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            match state.get(next.as_str()) {
                Some(1) => {
                    let at = stack.iter().position(|m| m == next).unwrap();
                    let mut circle = stack[at..].to_vec();
                    circle.push(next.clone());
                    return Some(circle);
                }
                Some(_) => {}
                None => {
                    if let Some(circle) = visit(next, graph, state, stack) {
                        return Some(circle);
                    }
                }
            }
        }
        stack.pop();
        state.insert(node.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for node in graph.keys() {
        if !state.contains_key(node) {
            let mut stack = vec![];
            if let Some(circle) = visit(node, graph, &mut state, &mut stack) {
                return Some(circle);
            }
        }
    }
    None
}

fn layer_of(
    module: &str,
    layers: &'static [&'static [&'static str]],
) -> Option<(usize, &'static str)> {
    let folder = module.split("::").next()?;
    layers
        .iter()
        .enumerate()
        .find_map(|(rank, names)| names.iter().find(|n| **n == folder).map(|n| (rank, *n)))
}

/// In crate `name`, every module imports only from its own layer's folder and the ones
/// below it in `layers`, and every folder or file under `src` is in a layer.
fn check_layers(name: &str, layers: &'static [&'static [&'static str]]) {
    let src = crates_dir().join(name).join("src");
    let graph = import_graph(&src);
    let mut wrong = vec![];
    for (module, imports) in &graph {
        let Some((rank, folder)) = layer_of(module, layers) else {
            continue; // lib.rs, main.rs, bin/: the crate's roots may use everything
        };
        for target in imports {
            let (target_rank, target_folder) = layer_of(target, layers)
                .unwrap_or_else(|| panic!("{module} imports {target}, which is in no layer"));
            if target_folder != folder && target_rank >= rank {
                wrong.push(format!("{module} -> {target}"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports that go up or sideways between {name}'s layers: {wrong:?}"
    );
    // Every folder and file of src is in a layer, so a new one is placed on purpose.
    for entry in std::fs::read_dir(&src).unwrap() {
        let path = entry.unwrap().path();
        let module = path.file_stem().unwrap().to_string_lossy().into_owned();
        if module != "bin" && module != "lib" && module != "main" {
            assert!(
                layer_of(&module, layers).is_some(),
                "{name}/src/{module} is in no layer in tests/architecture.rs"
            );
        }
    }
}

#[test]
fn inspect_folders_import_only_downwards() {
    check_layers("inspect", LAYERS);
}

#[test]
fn report_modules_import_only_downwards() {
    check_layers("report", REPORT_LAYERS);
}

/// Names that tell a model reading its task's tokens from one reading word pieces: only
/// inspect's `load` folder may use the second group, and only `load/reading.rs` (the one
/// reading, built once when a run is loaded) the first; every measure takes the reading in
/// its context and asks it.
const READING_VARIANTS: &[&str] = &[
    "Reading::Tokens",
    "Reading::Pieces",
    "ReadSentences::Tokens",
    "ReadSentences::Pieces",
];
const PIECE_NAMES: &[&str] = &["WordPieces", "PieceSentences", ".pieces", "tokenizer"];

/// Code lines of `text` outside its `#[cfg(test)]` module, numbered from 1, comments left
/// out.
fn code_lines(text: &str) -> Vec<(usize, &str)> {
    let code = text.split("#[cfg(test)]").next().unwrap();
    code.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim_start().starts_with("//"))
        .map(|(n, line)| (n + 1, line))
        .collect()
}

/// Where `names` occur in the code of `file`, as `file:line: name`.
fn uses_of(file: &Path, names: &[&str]) -> Vec<String> {
    let text = std::fs::read_to_string(file).unwrap();
    let mut found = vec![];
    for (n, line) in code_lines(&text) {
        for name in names.iter().filter(|name| line.contains(**name)) {
            found.push(format!("{}:{n}: {name}", file.display()));
        }
    }
    found
}

#[test]
fn only_the_reading_tells_tokens_from_pieces() {
    let mut wrong = vec![];
    for name in ["inspect", "sweep", "bench", "headlab", "train"] {
        let src = crates_dir().join(name).join("src");
        for file in rust_files(&src) {
            let module = module_of(&src, &file);
            let in_load = name == "inspect" && module.starts_with("load");
            if !(name == "inspect" && module == "load::reading") {
                wrong.extend(uses_of(&file, READING_VARIANTS));
            }
            if !in_load {
                wrong.extend(uses_of(&file, PIECE_NAMES));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "outside inspect's load::reading, code that tells task tokens from word pieces: {wrong:?}"
    );
    // The check finds what it looks for.
    let reading = crates_dir().join("inspect/src/load/reading.rs");
    assert!(!uses_of(&reading, READING_VARIANTS).is_empty());
}

#[test]
fn no_crate_has_an_import_circle() {
    let mut checked = 0;
    for entry in std::fs::read_dir(crates_dir()).unwrap() {
        let src = entry.unwrap().path().join("src");
        if !src.is_dir() {
            continue;
        }
        let graph = import_graph(&src);
        checked += graph.len();
        if let Some(circle) = find_circle(&graph) {
            panic!("{}: import circle {}", src.display(), circle.join(" -> "));
        }
    }
    assert!(
        checked > 50,
        "only {checked} modules found: wrong directory?"
    );
}

/// The workspace's crates, lowest first: a crate may depend (normal or dev) only on crates
/// of earlier layers. The workspace-hack crate is Cargo's, outside the layers.
const CRATE_LAYERS: &[&[&str]] = &[
    &["testkit"],
    &["model"],
    &["tasks"],
    &["run"],
    &["hf", "train"],
    &["inspect"],
    &["report"],
    &["bench", "sweep"],
    &["headlab"],
];

fn crate_rank(name: &str) -> Option<usize> {
    CRATE_LAYERS.iter().position(|layer| layer.contains(&name))
}

/// The workspace crates `manifest` (a Cargo.toml's text) names under `[dependencies]` and
/// `[dev-dependencies]`.
fn workspace_dependencies(manifest: &str) -> Vec<String> {
    let mut names = vec![];
    let mut in_dependencies = false;
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_dependencies = line == "[dependencies]" || line == "[dev-dependencies]";
        } else if in_dependencies && let Some((name, _)) = line.split_once('=') {
            let name = name.trim();
            if crate_rank(name).is_some() {
                names.push(name.to_string());
            }
        }
    }
    names
}

#[test]
fn crates_depend_only_downwards() {
    let mut wrong = vec![];
    let mut seen = vec![];
    for entry in std::fs::read_dir(crates_dir()).unwrap() {
        let dir = entry.unwrap().path();
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        if name == "workspace-hack" || !dir.join("Cargo.toml").is_file() {
            continue;
        }
        let rank = crate_rank(&name)
            .unwrap_or_else(|| panic!("crates/{name} is in no layer of CRATE_LAYERS"));
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        for dependency in workspace_dependencies(&manifest) {
            if crate_rank(&dependency).unwrap() >= rank {
                wrong.push(format!("{name} -> {dependency}"));
            }
        }
        seen.push(name);
    }
    assert!(
        wrong.is_empty(),
        "crates that depend up or sideways: {wrong:?}"
    );
    assert!(seen.len() >= 7, "only {seen:?} found: wrong directory?");
}

#[test]
fn no_file_imports_from_its_parent_module() {
    let mut wrong = vec![];
    for entry in std::fs::read_dir(crates_dir()).unwrap() {
        let krate = entry.unwrap().path();
        let src = krate.join("src");
        if !src.is_dir() {
            continue;
        }
        let name = krate.file_name().unwrap().to_string_lossy().into_owned();
        for (module, ancestors) in upward_imports(&src) {
            for ancestor in ancestors {
                wrong.push(format!("{name}: {module} -> {ancestor}"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "files that import from their parent module (move what they need into a sibling \
         file, or below): {wrong:#?}"
    );
}

/// Longest source file, in lines before its `#[cfg(test)]` module.
const MAX_FILE_LINES: usize = 1000;
/// Longest function, in lines, unless its comment says "Kept in one piece" and why.
const MAX_FUNCTION_LINES: usize = 80;

/// Each function of `text` (outside its tests) longer than [`MAX_FUNCTION_LINES`] whose
/// comment does not say it is kept in one piece: its name and length.
fn long_functions(text: &str) -> Vec<(String, usize)> {
    let lines: Vec<&str> = text.split("#[cfg(test)]").next().unwrap().lines().collect();
    let mut long = vec![];
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let trimmed = line.trim_start();
        let indent = &line[..line.len() - trimmed.len()];
        let signature = [
            "fn ",
            "pub fn ",
            "pub(crate) fn ",
            "pub(super) fn ",
            "const fn ",
        ]
        .iter()
        .any(|start| trimmed.starts_with(start));
        if !signature {
            i += 1;
            continue;
        }
        // A declaration without a body (in a trait) ends at its `;`.
        let mut end = i;
        while end < lines.len() && !lines[end].trim_end().ends_with('{') {
            if lines[end].trim_end().ends_with(';') {
                break;
            }
            end += 1;
        }
        if end < lines.len() && lines[end].trim_end().ends_with(';') {
            i = end + 1;
            continue;
        }
        let close = format!("{indent}}}");
        while end < lines.len() && lines[end] != close {
            end += 1;
        }
        let length = end - i + 1;
        // The comment above it, its lines' words joined (a phrase may wrap).
        let mut comment_lines: Vec<&str> = lines[..i]
            .iter()
            .rev()
            .take_while(|l| {
                let t = l.trim_start();
                t.starts_with("//") || t.starts_with("#[")
            })
            .copied()
            .collect();
        comment_lines.reverse();
        let comment: Vec<&str> = comment_lines
            .iter()
            .flat_map(|l| l.trim_start().trim_start_matches('/').split_whitespace())
            .collect();
        let comment = comment.join(" ");
        if length > MAX_FUNCTION_LINES && !comment.contains("Kept in one piece") {
            let name = trimmed.split("fn ").nth(1).unwrap_or("");
            let name = name.split(['(', '<']).next().unwrap_or(name);
            long.push((name.to_string(), length));
        }
        i = end + 1;
    }
    long
}

#[test]
fn files_and_functions_stay_small() {
    let mut wrong = vec![];
    for entry in std::fs::read_dir(crates_dir()).unwrap() {
        let src = entry.unwrap().path().join("src");
        if !src.is_dir() {
            continue;
        }
        for file in rust_files(&src) {
            let text = std::fs::read_to_string(&file).unwrap();
            let before_tests = text.split("#[cfg(test)]").next().unwrap().lines().count();
            if before_tests > MAX_FILE_LINES {
                wrong.push(format!("{}: {before_tests} lines", file.display()));
            }
            for (name, length) in long_functions(&text) {
                wrong.push(format!("{}: fn {name}, {length} lines", file.display()));
            }
        }
    }
    assert!(wrong.is_empty(), "rooms too large: {wrong:#?}");
}

#[test]
fn the_size_checker_measures_functions() {
    let body = "    x += 1;\n".repeat(MAX_FUNCTION_LINES);
    let text = format!(
        "fn short() {{\n}}\n\ntrait T {{\n    fn declared(&self);\n}}\n\nfn long() {{\n{body}}}\n\n\
         // Kept in one piece: a kernel.\nfn kernel() {{\n{body}}}\n"
    );
    assert_eq!(
        long_functions(&text),
        [("long".to_string(), MAX_FUNCTION_LINES + 2)]
    );
}

#[test]
fn the_checker_finds_a_circle_and_expands_groups() {
    let paths = named_paths(
        "use crate::a::{b, c::d};\nuse crate::e::F; // crate::g",
        "crate::",
    );
    assert_eq!(paths, ["a::b", "a::c::d", "e::F"]);
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a", &["b"][..]),
        ("b", &["c"][..]),
        ("c", &["a"][..]),
        ("d", &[][..]),
    ]
    .iter()
    .map(|(m, to)| (m.to_string(), to.iter().map(|t| t.to_string()).collect()))
    .collect();
    assert_eq!(find_circle(&graph).unwrap(), ["a", "b", "c", "a"]);
}

#[test]
fn the_checker_finds_an_import_from_the_parent_module() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::create_dir_all(src.join("a")).unwrap();
    std::fs::write(src.join("lib.rs"), "pub mod a;\npub mod c;\n").unwrap();
    std::fs::write(src.join("a/mod.rs"), "pub mod b;\npub struct X;\n").unwrap();
    std::fs::write(src.join("a/b.rs"), "use super::X;\nuse crate::c::Y;\n").unwrap();
    std::fs::write(src.join("c.rs"), "pub struct Y;\n").unwrap();
    let upward = upward_imports(src);
    assert_eq!(upward["a::b"], BTreeSet::from(["a".to_string()]));
    assert!(upward["c"].is_empty());
    // The sideways import is an ordinary edge, not an upward one.
    assert_eq!(import_graph(src)["a::b"], BTreeSet::from(["c".to_string()]));
}
