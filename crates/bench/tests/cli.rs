//! The `bench` binary as a user runs it, on the smallest budget: one timed step per case.

use std::process::Command;

fn bench(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_bench"))
        .args(args)
        .output()
        .expect("the bench binary runs")
}

#[test]
fn one_row_times_both_implementations_and_writes_table_and_json() {
    let tmp = tempfile::tempdir().unwrap();
    let (md, json) = (tmp.path().join("table.md"), tmp.path().join("cases.json"));
    let output = bench(&[
        "--sizes",
        "small",
        "--backends",
        "flex",
        "--seconds",
        "0",
        "--min-steps",
        "1",
        "--warmup",
        "0",
        "--out",
        md.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );

    let table = std::fs::read_to_string(&md).unwrap();
    assert!(
        stdout.contains(&table),
        "the printed table is the written one"
    );
    let row = table
        .lines()
        .find(|line| line.starts_with("| small | flex |"))
        .expect("a small flex row");
    let cells: Vec<&str> = row.split('|').map(str::trim).collect();
    // Every figure is there: no dash for a failed or missing case.
    assert!(!cells[3..13].contains(&"-"), "{row}");
    assert!(table.contains("train.shards = 2"), "{table}");

    let results: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(results.len(), 2);
    let implementations: Vec<&str> = results
        .iter()
        .map(|r| r["case"]["implementation"].as_str().unwrap())
        .collect();
    assert_eq!(implementations, ["headlab", "burn"]);
    for result in &results {
        for key in ["train_steps_per_s", "forward_passes_per_s", "peak_rss_mib"] {
            let value = result[key].as_f64().unwrap_or(f64::NAN);
            assert!(
                value.is_finite() && value > 0.0,
                "{key} = {value} in {result}"
            );
        }
        assert!(result["last_loss"].as_f64().unwrap().is_finite());
        assert!(result["train_steps"].as_u64().unwrap() >= 1);
    }
    // The same sizes: Burn's encoder and ours have the same parameter count.
    assert_eq!(results[0]["parameters"], results[1]["parameters"]);
    assert_eq!(results[0]["case"]["shards"], 2);
    assert_eq!(results[1]["case"]["shards"], 1);
}

#[test]
fn bad_options_are_refused_with_a_message() {
    let output = bench(&["--shards", "0"]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.starts_with("error: --shards must be at least 1"),
        "{stderr}"
    );

    let output = bench(&["--sizes", "huge"]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("small") && stderr.contains("large"),
        "{stderr}"
    );
}
