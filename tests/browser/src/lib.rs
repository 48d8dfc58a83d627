//! What the browser tests share: the headlab binaries they run (`train`, `inspect`,
//! `compare`, already built), and Chromium driven over WebDriver through chromedriver.
//!
//! A test starts a [`Browser`] (chromedriver on a free port, headless Chromium with a fresh
//! profile), opens a page written by `inspect` or `compare`, drives it with real pointer
//! actions and reads the state the page publishes as `data-*` attributes. chromedriver and its
//! Chromium are killed when the [`Browser`] is dropped, also when a test fails.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::actions::{InputSource, MouseActions, PointerAction};
use fantoccini::wd::{Capabilities, TimeoutConfiguration, WebDriverCompatibleCommand};
use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{Value, json};

/// Where the `headlab` binary is: `HEADLAB_BIN_DIR`, else `$CARGO_TARGET_DIR/release`, else
/// the repository's `target/release`.
pub fn bin_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("HEADLAB_BIN_DIR") {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR") {
        return PathBuf::from(dir).join("release");
    }
    repo_root().join("target/release")
}

/// The headlab repository (two levels above this package).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The path of the built `headlab` binary; panics, saying how to build it, if missing.
pub fn headlab() -> PathBuf {
    let path = bin_dir().join("headlab");
    assert!(
        path.is_file(),
        "{} is missing: build headlab first (`cargo build --release --workspace --bins` in \
         the repository root, with the same CARGO_TARGET_DIR), or point HEADLAB_BIN_DIR at \
         its directory",
        path.display()
    );
    path
}

/// Runs `headlab SUBCOMMAND ARGS` and panics with its output if it fails.
pub fn run_headlab(subcommand: &str, args: &[&std::ffi::OsStr]) {
    let output = Command::new(headlab())
        .arg(subcommand)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("headlab {subcommand} does not start: {e}"));
    assert!(
        output.status.success(),
        "headlab {subcommand} {args:?} failed ({}):\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A small reverse task that the model learns (100% token accuracy) in about a second: two
/// layers of two heads, so that a layer and a head can both be changed.
pub const TINY_REVERSE: &str = r#"
name = "browser-reverse"
seed = 7
backend = "flex"

[task]
kind = "reverse"
seq_len = 6
vocab_size = 6

[model]
d_model = 32
n_layers = 2
n_heads = 2
d_ff = 64
dropout = 0.0

[train]
steps = 150
batch_size = 32
lr = 3e-3
warmup_steps = 10
eval_every = 50
eval_size = 64
checkpoint_every = 150
snapshot_every = 50
"#;

/// Reverse over 256 tokens, one layer of two small heads, ten steps: it learns nothing much,
/// but `inspect` writes a 256-token explore.html for it in a few seconds.
pub const LONG_REVERSE: &str = r#"
name = "browser-long"
seed = 11
backend = "flex"

[task]
kind = "reverse"
seq_len = 256
vocab_size = 8

[model]
d_model = 16
n_layers = 1
n_heads = 2
d_ff = 32
dropout = 0.0

[train]
steps = 10
batch_size = 4
lr = 3e-3
warmup_steps = 2
eval_every = 10
eval_size = 8
checkpoint_every = 10
snapshot_every = 10
"#;

/// Trains `config` (TOML text, with `overrides` as `--set` values) into `dir/name` and
/// returns the run directory.
pub fn train(dir: &Path, name: &str, config: &str, overrides: &[&str]) -> PathBuf {
    let config_path = dir.join(format!("{name}.toml"));
    std::fs::write(&config_path, config).unwrap();
    let run = dir.join(name);
    let mut args = vec![
        config_path.as_os_str(),
        "--out".as_ref(),
        run.as_os_str(),
        "--quiet".as_ref(),
    ];
    for value in overrides {
        args.push("--set".as_ref());
        args.push(value.as_ref());
    }
    run_headlab("train", &args);
    run
}

/// The checkpoint fixture `crates/model/tests/fixtures/NAME` (`bert/three-layers-mlm`,
/// `families/roberta-mlm`, ...).
pub fn fixture(name: &str) -> PathBuf {
    repo_root().join("crates/model/tests/fixtures").join(name)
}

/// Imports the checkpoint directory `checkpoint` into `run` and returns `run`.
pub fn import(checkpoint: &Path, run: &Path) -> PathBuf {
    run_headlab(
        "import",
        &[
            checkpoint.as_os_str(),
            "--out".as_ref(),
            run.as_os_str(),
            "--quiet".as_ref(),
        ],
    );
    run.to_path_buf()
}

/// Runs `inspect` on a run and returns the path of its `explore.html`.
pub fn inspect(run: &Path) -> PathBuf {
    run_headlab("inspect", &[run.as_os_str()]);
    let page = run.join("inspect/explore.html");
    assert!(page.is_file(), "inspect wrote no {}", page.display());
    page
}

/// Runs `compare RUNS... --out out`.
pub fn compare(runs: &[&Path], out: &Path) {
    let mut args: Vec<&std::ffi::OsStr> = runs.iter().map(|r| r.as_os_str()).collect();
    args.push("--out".as_ref());
    args.push(out.as_os_str());
    run_headlab("compare", &args);
}

/// The first of `names` found on the PATH.
fn on_path(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| names.iter().map(move |name| dir.join(name)))
        .find(|candidate| candidate.is_file())
}

/// chromedriver, killed with every process of its group (its Chromium) when dropped.
struct Driver {
    child: Child,
    port: u16,
}

impl Driver {
    /// Starts `chromedriver` on a free port and waits until it listens.
    ///
    /// The port is free when picked but not reserved: if another test's chromedriver takes
    /// it first, this one exits (and something else answers on the port), so it is started
    /// again on another port.
    fn start(program: &Path) -> Driver {
        for _ in 0..5 {
            if let Some(driver) = Self::try_start(program) {
                return driver;
            }
        }
        panic!("chromedriver did not start on any of 5 free ports");
    }

    /// One attempt: None when this chromedriver exited before it listened.
    fn try_start(program: &Path) -> Option<Driver> {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("a free local port")
            .port();
        let mut command = Command::new(program);
        command
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // Its own process group, so that Drop also reaches the Chromium it starts.
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let child = command
            .spawn()
            .unwrap_or_else(|e| panic!("{} does not start: {e}", program.display()));
        let mut driver = Driver { child, port };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if driver.child.try_wait().ok().flatten().is_some() {
                return None;
            }
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                // Listening, and still ours a moment later (a chromedriver that lost the
                // port exits at once).
                std::thread::sleep(Duration::from_millis(100));
                return driver
                    .child
                    .try_wait()
                    .ok()
                    .flatten()
                    .is_none()
                    .then_some(driver);
            }
            assert!(
                Instant::now() < deadline,
                "chromedriver did not listen on port {port} within 20 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        // SIGKILL to the whole group: chromedriver and the browser processes it started.
        #[allow(unsafe_code)]
        // SAFETY: kill(2) with a negated process group id has no memory effects.
        unsafe {
            libc::kill(-(self.child.id() as libc::pid_t), libc::SIGKILL);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// chromedriver's browser log (the console), through its legacy endpoint
/// `POST /session/{id}/se/log`, which W3C WebDriver has no command for.
#[derive(Debug)]
struct BrowserLog;

impl WebDriverCompatibleCommand for BrowserLog {
    fn endpoint(
        &self,
        base: &url::Url,
        session: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        base.join(&format!("session/{}/se/log", session.unwrap_or_default()))
    }

    fn method_and_body(&self, _url: &url::Url) -> (http::Method, Option<String>) {
        (http::Method::POST, Some(r#"{"type":"browser"}"#.into()))
    }
}

/// Headless Chromium under WebDriver. Its fields drop in order: the session's client, then
/// chromedriver (killed with the browser), then the browser profile.
pub struct Browser {
    client: Client,
    _driver: Driver,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts chromedriver and a headless Chromium session. `None` (the test skips, saying
    /// so) when no chromedriver is installed, unless `HEADLAB_REQUIRE_WEBDRIVER=1`, then it
    /// panics.
    pub async fn start() -> Option<Browser> {
        let driver = std::env::var_os("HEADLAB_CHROMEDRIVER")
            .map(PathBuf::from)
            .or_else(|| on_path(&["chromedriver"]));
        let Some(driver) = driver else {
            assert!(
                std::env::var("HEADLAB_REQUIRE_WEBDRIVER").as_deref() != Ok("1"),
                "HEADLAB_REQUIRE_WEBDRIVER=1 but no chromedriver was found on the PATH \
                 (scripts/setup/setup.sh installs Debian's chromium-driver)"
            );
            eprintln!(
                "skipping the browser test: no chromedriver on the PATH (scripts/setup/setup.sh \
                 installs chromium-driver)"
            );
            return None;
        };
        let profile = tempfile::Builder::new()
            .prefix("headlab-chromium-")
            .tempdir()
            .unwrap();
        let program = driver;
        let mut options = json!({
            "args": [
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--window-size=1400,1000",
                format!("--user-data-dir={}", profile.path().display()),
            ],
        });
        let browser = std::env::var_os("HEADLAB_CHROMIUM")
            .map(PathBuf::from)
            .or_else(|| on_path(&["chromium", "chromium-browser", "google-chrome"]));
        if let Some(browser) = browser {
            options["binary"] = json!(browser);
        }
        let capabilities: Capabilities = serde_json::from_value(json!({
            "browserName": "chrome",
            "goog:chromeOptions": options,
            "goog:loggingPrefs": { "browser": "ALL" },
        }))
        .unwrap();
        // A session can fail to start when several tests start browsers at once on two
        // cores (chromedriver closes the connection): try again with a fresh chromedriver.
        let mut attempt = 1;
        let (client, driver) = loop {
            let driver = Driver::start(&program);
            match ClientBuilder::new(HttpConnector::new())
                .capabilities(capabilities.clone())
                .connect(&format!("http://127.0.0.1:{}", driver.port))
                .await
            {
                Ok(client) => break (client, driver),
                Err(e) if attempt < 3 => {
                    eprintln!("no WebDriver session from chromedriver (attempt {attempt}): {e}");
                    attempt += 1;
                }
                Err(e) => panic!("no WebDriver session from chromedriver after 3 attempts: {e}"),
            }
        };
        // So that a page or a script that hangs fails the test instead of stalling it.
        client
            .update_timeouts(TimeoutConfiguration::new(
                Some(Duration::from_secs(30)),
                Some(Duration::from_secs(60)),
                Some(Duration::ZERO),
            ))
            .await
            .unwrap();
        Some(Browser {
            client,
            _driver: driver,
            _profile: profile,
        })
    }

    /// The WebDriver client, for what the helpers here do not cover.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Opens a local page and waits (up to 30 s) until its body says `data-ready="ok"`.
    pub async fn open(&self, page: &Path) {
        let page = page.canonicalize().unwrap();
        self.client
            .goto(&format!("file://{}", page.display()))
            .await
            .unwrap_or_else(|e| panic!("cannot open {}: {e}", page.display()));
        let ready = self
            .wait_attribute("body", "data-ready", Duration::from_secs(30), |v| {
                v.is_some_and(|v| !v.is_empty())
            })
            .await;
        let errors = self.attribute("body", "data-errors").await;
        assert_eq!(
            ready.as_deref(),
            Some("ok"),
            "{} did not get ready; data-errors: {errors:?}",
            page.display()
        );
    }

    /// Runs `script` (a function body; `arguments` holds `args`) in the page.
    pub async fn script(&self, script: &str, args: Vec<Value>) -> Value {
        self.client
            .execute(script, args)
            .await
            .unwrap_or_else(|e| panic!("script failed: {e}\n{script}"))
    }

    /// The attribute `name` of the first element matching the CSS `selector` (panics when
    /// there is none).
    pub async fn attribute(&self, selector: &str, name: &str) -> Option<String> {
        self.client
            .find(Locator::Css(selector))
            .await
            .unwrap_or_else(|e| panic!("no element {selector}: {e}"))
            .attr(name)
            .await
            .unwrap()
    }

    /// Polls the attribute until `done` accepts it or `timeout` passes; returns the last
    /// value read.
    pub async fn wait_attribute(
        &self,
        selector: &str,
        name: &str,
        timeout: Duration,
        done: impl Fn(Option<&str>) -> bool,
    ) -> Option<String> {
        let deadline = Instant::now() + timeout;
        loop {
            let value = self.attribute(selector, name).await;
            if done(value.as_deref()) || Instant::now() >= deadline {
                return value;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Clicks the first element matching the CSS `selector`.
    pub async fn click(&self, selector: &str) {
        self.client
            .find(Locator::Css(selector))
            .await
            .unwrap_or_else(|e| panic!("no element {selector}: {e}"))
            .click()
            .await
            .unwrap_or_else(|e| panic!("cannot click {selector}: {e}"));
    }

    /// Chooses the option with `value` of the `<select>` matching `selector`, as a user does.
    pub async fn choose(&self, selector: &str, value: &str) {
        self.client
            .find(Locator::Css(selector))
            .await
            .unwrap_or_else(|e| panic!("no element {selector}: {e}"))
            .select_by_value(value)
            .await
            .unwrap_or_else(|e| panic!("cannot choose {value} in {selector}: {e}"));
    }

    /// Moves the mouse to `(x, y)`, CSS pixels from the viewport's top left corner, with one
    /// WebDriver pointer action (one mousemove at the target).
    pub async fn move_mouse(&self, x: f64, y: f64) {
        let mouse = MouseActions::new("mouse".into()).then(PointerAction::MoveTo {
            duration: Some(Duration::ZERO),
            x: x.round(),
            y: y.round(),
        });
        self.client
            .perform_actions(mouse)
            .await
            .unwrap_or_else(|e| panic!("cannot move the mouse to ({x}, {y}): {e}"));
    }

    /// The console errors so far: the SEVERE entries of the browser log (uncaught
    /// exceptions, `console.error`, failed loads). Reading the log empties it.
    pub async fn console_errors(&self) -> Vec<Value> {
        let log = self
            .client
            .issue_cmd(BrowserLog)
            .await
            .unwrap_or_else(|e| panic!("cannot read the browser log: {e}"));
        let Value::Array(entries) = log else {
            panic!("the browser log is not a list: {log}");
        };
        entries
            .into_iter()
            .filter(|entry| entry["level"] == "SEVERE")
            .collect()
    }

    /// Fails on any console error (see [`Browser::console_errors`]) and on a non-empty body
    /// `data-errors`.
    pub async fn assert_no_errors(&self) {
        let severe = self.console_errors().await;
        assert!(severe.is_empty(), "console errors: {severe:#?}");
        let errors = self.attribute("body", "data-errors").await;
        assert!(
            errors.as_deref().unwrap_or("").is_empty(),
            "script errors on the page: {errors:?}"
        );
    }

    /// Ends the WebDriver session (Chromium quits); chromedriver is killed on drop.
    pub async fn close(self) {
        let Browser {
            client,
            _driver,
            _profile,
        } = self;
        let _ = client.close().await;
    }
}

/// explore.html's head view (`#head-canvas`), read and driven through a [`Browser`].
pub mod explore {
    use super::Browser;
    use serde_json::json;

    /// Attention weights below this (in thousandths: 10) get no line; as in explore.js.
    pub const LINE_THRESHOLD_THOUSANDTHS: u64 = 10;

    /// The head view's published state: data-sequence, data-layer, data-heads, data-hover
    /// and data-lines.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct HeadView {
        pub sequence: String,
        pub layer: String,
        pub heads: String,
        pub hover: String,
        pub lines: usize,
    }

    /// Reads the head view's attributes.
    pub async fn head_view(browser: &Browser) -> HeadView {
        let get = async |name: &str| {
            browser
                .attribute("#head-canvas", name)
                .await
                .unwrap_or_else(|| panic!("#head-canvas has no {name}"))
        };
        HeadView {
            sequence: get("data-sequence").await,
            layer: get("data-layer").await,
            heads: get("data-heads").await,
            hover: get("data-hover").await,
            lines: get("data-lines").await.parse().unwrap(),
        }
    }

    /// The attention patterns embedded in the page for `sequence` and `layer`: per head, the
    /// n x n weights in thousandths, row-major by query.
    pub async fn patterns(browser: &Browser, sequence: usize, layer: usize) -> Vec<Vec<u64>> {
        let value = browser
            .script(
                "var data = JSON.parse(document.getElementById('data').textContent);\
                 return data.sequences[arguments[0]].patterns[arguments[1]];",
                vec![json!(sequence), json!(layer)],
            )
            .await;
        serde_json::from_value(value).unwrap()
    }

    /// The lines the head view draws for `heads` of `patterns` (see [`patterns`]) when
    /// nothing is hovered (`None`), or when query or key `index` is hovered: one per pair at
    /// or over the threshold, per head.
    pub fn expected_lines(
        patterns: &[Vec<u64>],
        heads: &[usize],
        hover: Option<(&str, usize)>,
    ) -> usize {
        heads
            .iter()
            .map(|&h| {
                let values = &patterns[h];
                let n = (values.len() as f64).sqrt() as usize;
                assert_eq!(n * n, values.len());
                (0..n * n)
                    .filter(|&i| match hover {
                        None => true,
                        Some(("query", q)) => i / n == q,
                        Some(("key", k)) => i % n == k,
                        Some((side, _)) => panic!("no side {side}"),
                    })
                    .filter(|&i| values[i] >= LINE_THRESHOLD_THOUSANDTHS)
                    .count()
            })
            .sum()
    }

    /// Scrolls token `index` of `side` ("query" or "key") of the head view into the viewport
    /// and returns where it is, in CSS pixels from the viewport's top left corner (checked to
    /// be on the head canvas).
    pub async fn token_point(browser: &Browser, side: &str, index: usize) -> (f64, f64) {
        let point = browser
            .script(
                "var canvas = document.getElementById('head-canvas');\
                 var p = window.headlabExplore.tokenPosition(arguments[0], arguments[1]);\
                 if (!p) { return 'explore.js has no head view geometry'; }\
                 var wrap = document.getElementById('head-wrap');\
                 wrap.scrollTop = Math.max(0, p.y - wrap.clientHeight / 2);\
                 var r = canvas.getBoundingClientRect();\
                 var y = r.top + p.y;\
                 if (y < 40 || y > window.innerHeight - 40) {\
                   window.scrollBy(0, y - window.innerHeight / 2);\
                   r = canvas.getBoundingClientRect();\
                 }\
                 var x = Math.round(r.left + p.x);\
                 y = Math.round(r.top + p.y);\
                 if (document.elementFromPoint(x, y) !== canvas) {\
                   return 'the head canvas is not at (' + x + ', ' + y + ')';\
                 }\
                 return [x, y];",
                vec![json!(side), json!(index)],
            )
            .await;
        match point.as_array() {
            Some(xy) => (xy[0].as_f64().unwrap(), xy[1].as_f64().unwrap()),
            None => panic!("no point for {side} {index}: {point}"),
        }
    }

    /// Hovers token `index` of `side` with a real mouse move (a WebDriver pointer action).
    pub async fn hover(browser: &Browser, side: &str, index: usize) {
        let (x, y) = token_point(browser, side, index).await;
        browser.move_mouse(x, y).await;
    }
}
