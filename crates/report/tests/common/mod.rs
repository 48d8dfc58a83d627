//! What the `inspect` tests share (and the `headlab inspect` and `compare` tests in
//! crates/headlab): training a run through the `train` library, a hand-built run, and the check
//! that a page loads in headless Chromium.
// Each test file compiles this module on its own and uses only part of it.
#![allow(dead_code)]

use std::path::Path;
use std::process::Command;

use run::RunConfig;
use train::{Progress, TrainOptions};

/// Trains the config at `config` (with `--set`-style `overrides`) into `run_dir`, quietly.
pub fn train_run(config: &Path, overrides: &[&str], run_dir: &Path) {
    let overrides: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    let run = RunConfig::load(config, &overrides)
        .unwrap()
        .resolve(config)
        .unwrap();
    let options = TrainOptions {
        run_dir: run_dir.to_path_buf(),
        resume: false,
        force: false,
        progress: Progress::Quiet,
        stop: Default::default(),
        stop_at_step: None,
    };
    train::train(&run, &options).unwrap();
}

/// A run in `dir` with the model of `config_text` set by hand with `wire` (never trained),
/// loaded as `inspect` loads a run. The lock holds the run while the test reads it.
pub fn hand_built_run(
    dir: &Path,
    config_text: &str,
    wire: impl FnOnce(&mut model::Encoder, &burn::tensor::Device),
) -> (inspect::load::loaded_run::LoadedRun, run::dir::RunLock) {
    let config_path = dir.join("config.toml");
    std::fs::write(&config_path, config_text).unwrap();
    let run = RunConfig::from_toml(&config_path)
        .unwrap()
        .resolve(&config_path)
        .unwrap();
    let device = burn::tensor::Device::flex();
    let mut model = run.config.model.init(&run.io, &device).unwrap();
    wire(&mut model, &device);
    let (run_dir, lock) = run::RunDir::create(&dir.join("run"), &run, false, "test").unwrap();
    let weights = Path::new("hand-built").to_path_buf();
    let loaded = inspect::load::loaded_run::LoadedRun::from_model(run_dir, run, model, weights);
    (loaded, lock)
}

/// Opens `page` in headless Chromium and asserts it loads without script errors and that
/// the loaded DOM contains `expected` (index.html's own check sets `data-figures="ok N"`
/// once every figure decoded; explore.html and compare.html set `data-ready="ok"` once their
/// views are drawn and `data-errors` on any script error). Returns the DOM, or `None` when
/// skipped: when no Chromium is installed, unless `HEADLAB_REQUIRE_CHROMIUM` is set (as in
/// CI).
pub fn check_in_chromium(page: &Path, expected: &str) -> Option<String> {
    let candidates = ["chromium", "chromium-browser", "google-chrome"];
    let browser = std::env::var("HEADLAB_CHROMIUM").ok().or_else(|| {
        candidates
            .iter()
            .find(|name| {
                Command::new(name)
                    .arg("--version")
                    .output()
                    .is_ok_and(|o| o.status.success())
            })
            .map(|name| name.to_string())
    });
    let Some(browser) = browser else {
        let why = "no Chromium found (scripts/setup/setup.sh installs it)";
        testkit::skip_unless_required("the browser check", "HEADLAB_REQUIRE_CHROMIUM", why);
        return None;
    };
    let url = format!("file://{}", page.canonicalize().unwrap().display());
    let output = Command::new(&browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-background-networking",
            "--no-first-run",
            "--virtual-time-budget=5000",
            "--enable-logging=stderr",
            "--v=0",
            "--dump-dom",
            &url,
        ])
        .output()
        .expect("chromium runs");
    let dom = String::from_utf8_lossy(&output.stdout);
    let log = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "chromium failed: {log}");
    let console_errors: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("CONSOLE") && (l.contains("Uncaught") || l.contains("Error")))
        .collect();
    assert!(console_errors.is_empty(), "{console_errors:#?}");
    let body = opening_tag(&dom, "<body");
    assert!(
        body.contains(expected),
        "expected {expected} on the loaded page's {body}"
    );
    assert!(!body.contains("data-errors="), "script errors: {body}");
    Some(dom.into_owned())
}

/// The opening tag of `dom` that starts with `start` (attributes and all).
pub fn opening_tag<'a>(dom: &'a str, start: &str) -> &'a str {
    let at = dom
        .find(start)
        .unwrap_or_else(|| panic!("no {start} in {dom}"));
    let end = at + dom[at..].find('>').unwrap();
    &dom[at..=end]
}

/// The value of attribute `name` in the opening tag `tag`; panics naming the tag if there
/// is none (a page's driving script reports what it did in such an attribute).
pub fn attribute<'a>(tag: &'a str, name: &str) -> &'a str {
    tag.split(&format!("{name}=\""))
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("no {name} in {tag}"))
}
