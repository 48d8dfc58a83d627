//! `headlab sweep stats`, the sweep reports' statistic for numbers of one's own, as the book's
//! scripts call it: JSON in (a file or stdin), JSON out, checked against hand-computed
//! intervals; bad input refused with one line naming the key, and no panic.

#[path = "common/headlab.rs"]
mod headlab;

use std::io::Write;
use std::process::{Output, Stdio};

/// `headlab sweep stats ARGS` with `input` on stdin.
fn stats(args: &[&str], input: &str) -> Output {
    let mut child = headlab::command("sweep", &[&["stats"], args].concat())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("headlab runs");
    // A refusal may come before stdin is read; a closed pipe is not the test's failure.
    let _ = child.stdin.take().unwrap().write_all(input.as_bytes());
    child.wait_with_output().expect("headlab ends")
}

fn json(output: &Output) -> serde_json::Value {
    assert!(
        output.status.success(),
        "{:?}: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("stdout is JSON")
}

fn close(value: &serde_json::Value, expected: f64) {
    let got = value
        .as_f64()
        .unwrap_or_else(|| panic!("{value} is not a number"));
    assert!((got - expected).abs() < 1e-12, "{got} against {expected}");
}

#[test]
fn named_lists_get_the_reports_interval_from_stdin_or_a_file() {
    let input = r#"{"four": [1, 2, 3, 4], "one": [7], "same": [0.5, 0.5, 0.5]}"#;
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("numbers.json");
    std::fs::write(&file, input).unwrap();
    let from_file = json(&stats(&[file.to_str().unwrap()], ""));
    for out in [json(&stats(&["-"], input)), json(&stats(&[], input))] {
        assert_eq!(out, from_file);
        // 1, 2, 3, 4: mean 2.5, sd sqrt(5/3), so se sqrt(5/12), and t(0.975; 3) = 3.182.
        let half = 3.182 * (5.0f64 / 12.0).sqrt();
        let four = &out["four"];
        assert_eq!(four["n"], 4);
        close(&four["mean"], 2.5);
        close(&four["ci95"], half);
        // One value: a mean, no interval.
        let one = &out["one"];
        assert_eq!(one["n"], 1);
        close(&one["mean"], 7.0);
        assert!(one["ci95"].is_null(), "{}", one["ci95"]);
        close(&out["same"]["ci95"], 0.0);
        assert_eq!(out.as_object().unwrap().len(), 3);
    }
    assert_eq!(json(&stats(&[], "{}")), serde_json::json!({}));
}

#[test]
fn bad_input_is_refused_naming_what_is_wrong() {
    for (input, says) in [
        ("", "stdin: not JSON"),
        (
            "[1, 2, 3]",
            "stdin: expected an object of named lists of numbers",
        ),
        (
            r#"{"steps": 3}"#,
            r#""steps": expected a list of numbers or {"hits": K, "of": N}, not a number"#,
        ),
        (
            r#"{"ok": [1], "steps": [1, "x"]}"#,
            r#""steps", value 1: expected a number, not a string"#,
        ),
        (
            r#"{"steps": [1, null]}"#,
            r#""steps", value 1: expected a number, not null"#,
        ),
        (r#"{"steps": []}"#, r#""steps": an empty list has no mean"#),
        (
            r#"{"verb": {"hits": 11, "of": 10}}"#,
            r#""verb": 11 hits of 10: a share needs"#,
        ),
        (r#"{"steps": [1e999]}"#, "stdin: not JSON"),
        (r#"{"steps": [NaN]}"#, "stdin: not JSON"),
    ] {
        let output = stats(&[], input);
        let err = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{input}: {err}");
        assert!(
            output.stdout.is_empty(),
            "{input}: wrote {:?}",
            output.stdout
        );
        assert!(!err.contains("panicked"), "{input}: {err}");
        assert!(
            err.starts_with("error: ") && err.contains(says) && err.lines().count() == 1,
            "{input}: {err}"
        );
    }
    let output = stats(&["/nonexistent/numbers.json"], "");
    let err = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{err}");
    assert!(
        err.contains("cannot read /nonexistent/numbers.json"),
        "{err}"
    );
}

#[test]
fn its_help_says_what_it_is_for() {
    let output = headlab::run("sweep", &["stats", "--help"]);
    assert!(output.status.success());
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        text.contains("The statistics every table of the book reports, for your own numbers"),
        "{text}"
    );
}

/// `sweep stats /dev/zero` read until the OOM killer came (issue 67): a device is refused by
/// what it is, before a byte is read, in one line.
#[test]
fn a_device_is_refused_without_reading_it() {
    let output = stats(&["/dev/zero"], "");
    assert_eq!(output.status.code(), Some(1));
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(
        err.contains("cannot read /dev/zero: it is a device, not a regular file"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

/// A count gets its share and the Wilson score interval, computed here by hand: 8 of 10 is
/// 0.8 in (0.4902, 0.9433).
#[test]
fn a_count_gets_its_share_with_the_wilson_interval() {
    let out = json(&stats(&[], r#"{"verb": {"hits": 8, "of": 10}}"#));
    let verb = &out["verb"];
    assert_eq!(
        (verb["n"].as_u64(), verb["hits"].as_u64()),
        (Some(10), Some(8))
    );
    close(&verb["share"], 0.8);
    let (z, n, p) = (1.959_963_985f64, 10.0f64, 0.8f64);
    let centre = (p + z * z / (2.0 * n)) / (1.0 + z * z / n);
    let spread = z * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt() / (1.0 + z * z / n);
    close(&verb["wilson95"][0], centre - spread);
    close(&verb["wilson95"][1], centre + spread);
    assert!((centre - spread - 0.4902).abs() < 1e-3 && (centre + spread - 0.9433).abs() < 1e-3);
}

/// Issue 65, item 3: a table of seeds by examples gets the Multi-Bootstrap, the same for
/// the same table and draws, beside the t interval over the seeds; `--draws` is bounded.
#[test]
fn a_table_of_seeds_by_examples_gets_the_multi_bootstrap() {
    // Seed 0 finds 3 of its 5 arcs, seed 1 4 of 5: 7 of 10 in all.
    let input = r#"{"det": {"hits": [[1, 2, 0], [1, 2, 1]], "of": [[1, 3, 1], [1, 3, 1]]}}"#;
    let out = json(&stats(&["--draws", "500"], input));
    let det = &out["det"];
    assert_eq!(
        (det["seeds"].as_u64(), det["examples"].as_u64()),
        (Some(2), Some(3))
    );
    assert_eq!(det["draws"], 500);
    close(&det["estimate"], 0.7);
    close(&det["over_seeds"]["mean"], 0.7);
    // Two seeds at 0.6 and 0.8: t(0.975; 1) = 12.706 times the standard error 0.1.
    close(&det["over_seeds"]["ci95"], 12.706 * 0.1);
    let [low, high] = [0, 1].map(|i| det["multi_bootstrap95"][i].as_f64().unwrap());
    assert!(
        (0.0..0.7).contains(&low) && 0.7 < high && high <= 1.0,
        "{low} to {high}"
    );
    assert_eq!(
        json(&stats(&["--draws", "500"], input)),
        out,
        "the draws are fixed"
    );

    for draws in ["0", "2000000", "x"] {
        let refused = stats(&["--draws", draws], input);
        let err = String::from_utf8_lossy(&refused.stderr);
        assert!(
            !refused.status.success() && err.contains("from 1 to 1000000"),
            "{err}"
        );
    }
}
