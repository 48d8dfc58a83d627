//! The front door: `headlab --help` lists every subcommand with one line each, every
//! subcommand answers `--help`, `--version` works at both levels, completions come out for
//! each shell clap supports, and a missing or unknown subcommand is a usage error (status 2)
//! that names what exists.

#[path = "common/headlab.rs"]
mod headlab;

use std::process::Command;

const SUBCOMMANDS: [&str; 8] = [
    "train",
    "import",
    "inspect",
    "compare",
    "verify",
    "sweep",
    "bench",
    "completions",
];

fn headlab(args: &[&str]) -> std::process::Output {
    Command::new(headlab::HEADLAB)
        .args(args)
        .output()
        .expect("headlab runs")
}

#[test]
fn help_lists_every_subcommand_on_one_line_each() {
    let output = headlab(&["--help"]);
    assert!(output.status.success());
    let text = String::from_utf8_lossy(&output.stdout);
    for name in SUBCOMMANDS {
        let line = text
            .lines()
            .find(|line| line.trim_start().starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no line for {name} in:\n{text}"));
        // A name, then a sentence of its own: what the subcommand does.
        let words = line.split_whitespace().count();
        assert!(words >= 5, "{name}'s line says too little: {line:?}");
    }
}

#[test]
fn every_subcommand_answers_help_and_version() {
    for name in SUBCOMMANDS {
        let output = headlab(&[name, "--help"]);
        assert!(output.status.success(), "headlab {name} --help failed");
        let text = String::from_utf8_lossy(&output.stdout);
        assert!(
            text.contains(&format!("Usage: headlab {name}")),
            "headlab {name} --help:\n{text}"
        );
        // Doc comments are the help text: a rustdoc link there shows as `[`x`]` syntax.
        assert!(
            !text.contains("[`"),
            "headlab {name} --help shows rustdoc link syntax:\n{text}"
        );
    }
    for name in ["sweep run", "sweep verify", "sweep report"] {
        let mut args: Vec<&str> = name.split(' ').collect();
        args.push("--help");
        let output = headlab(&args);
        assert!(output.status.success(), "headlab {name} --help failed");
    }
    let version = env!("CARGO_PKG_VERSION");
    for args in [vec!["--version"], vec!["train", "--version"]] {
        let output = headlab(&args);
        assert!(output.status.success());
        assert!(String::from_utf8_lossy(&output.stdout).contains(version));
    }
}

#[test]
fn completions_come_out_for_each_shell() {
    for (shell, marker) in [
        ("bash", "_headlab()"),
        ("zsh", "#compdef headlab"),
        ("fish", "complete -c headlab"),
    ] {
        let output = headlab(&["completions", shell]);
        assert!(output.status.success(), "completions {shell} failed");
        let script = String::from_utf8_lossy(&output.stdout);
        assert!(script.contains(marker), "{shell}: no {marker:?}");
        // The subcommands are completed too.
        assert!(script.contains("inspect"), "{shell}: no subcommands");
    }
}

#[test]
fn no_or_an_unknown_subcommand_is_a_usage_error_naming_the_subcommands() {
    for args in [vec![], vec!["trian"]] {
        let output = headlab(&args);
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let text = String::from_utf8_lossy(&output.stderr);
        assert!(
            text.contains("train") && !text.contains("panicked"),
            "{args:?}:\n{text}"
        );
    }
}
