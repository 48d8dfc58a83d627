//! The book's pictures of the pages, taken here from today's build: the README's quick start
//! (`configs/recall.toml`, as shipped) trained and inspected, a second seed compared with it,
//! and `index.html`, `explore.html` (model and head view, a hovered query, the patching view)
//! and `compare.html` shot in Chromium under WebDriver. Before each shot the test checks what
//! a reader needs to read it: the colour bars with their range and unit, the head labels,
//! every figure of `index.html` loaded with its caption, and each page's units: the head
//! table's and explore's head panel's drops in points (100 times `heads.json`), compare's
//! accuracy in points and its measures' units.
//!
//! A second test does the same for an imported model, all-MiniLM-L6-v2 (where
//! `scripts/setup/setup.sh` unpacked it), read on a typed sentence: `explore-minilm.png`.
//!
//! The PNGs go to `HEADLAB_SCREENSHOTS` when it is set (`scripts/experiments/screenshots.sh` sets it
//! to `docs/inspect/`, the book's pictures), else to a temporary directory that is removed.

use std::path::{Path, PathBuf};

use headlab_browser_tests::explore::{self, head_view};
use headlab_browser_tests::{Browser, compare, import, repo_root, run_headlab};
use serde_json::{Value, json};

/// The quick start's config, trained from the repository as the README says, seed `seed`.
fn quick_start_run(dir: &Path, seed: u64) -> PathBuf {
    let run = dir.join(format!("recall-seed{seed}"));
    let config = repo_root().join("configs/recall.toml");
    let seed_value = format!("seed={seed}");
    run_headlab(
        "train",
        &[
            config.as_os_str(),
            "--out".as_ref(),
            run.as_os_str(),
            "--quiet".as_ref(),
            "--set".as_ref(),
            seed_value.as_ref(),
        ],
    );
    run_headlab("inspect", &[run.as_os_str(), "--quiet".as_ref()]);
    run
}

/// Width and height of a PNG, read from its IHDR chunk; panics when `bytes` is not a PNG.
fn png_size(bytes: &[u8]) -> (u32, u32) {
    assert!(
        bytes.len() > 24 && bytes.starts_with(b"\x89PNG\r\n\x1a\n") && &bytes[12..16] == b"IHDR",
        "WebDriver's screenshot is not a PNG ({} bytes)",
        bytes.len()
    );
    let be = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap());
    (be(16), be(20))
}

/// Where the pictures go, and whether they are the book's.
struct Shots {
    dir: PathBuf,
    _scratch: Option<tempfile::TempDir>,
}

impl Shots {
    fn new() -> Shots {
        match std::env::var_os("HEADLAB_SCREENSHOTS") {
            Some(dir) => {
                let dir = PathBuf::from(dir);
                std::fs::create_dir_all(&dir).unwrap();
                Shots {
                    dir,
                    _scratch: None,
                }
            }
            None => {
                let scratch = tempfile::tempdir().unwrap();
                Shots {
                    dir: scratch.path().to_path_buf(),
                    _scratch: Some(scratch),
                }
            }
        }
    }

    /// Shoots the viewport, as it is, into `name`; checks the PNG is at least `min` pixels
    /// each way.
    async fn take(&self, browser: &Browser, name: &str, min: (u32, u32)) {
        let bytes = browser.client().screenshot().await.unwrap();
        let (width, height) = png_size(&bytes);
        assert!(
            width >= min.0 && height >= min.1,
            "{name}: a {width} x {height} picture, expected at least {} x {}",
            min.0,
            min.1
        );
        let path = self.dir.join(name);
        // Written whole under another name, then renamed: a reader never sees half a picture.
        let partial = self.dir.join(format!(".{name}.partial"));
        std::fs::write(&partial, &bytes).unwrap();
        std::fs::rename(&partial, &path).unwrap();
        println!("screenshot: {} ({width} x {height})", path.display());
    }
}

/// Scrolls the page so that the element matching `selector` is at the top of the viewport.
async fn scroll_to(browser: &Browser, selector: &str) {
    let found = browser
        .script(
            "var element = document.querySelector(arguments[0]);\
             if (element === null) { return false; }\
             element.scrollIntoView();\
             return true;",
            vec![json!(selector)],
        )
        .await;
    assert_eq!(found, json!(true), "no element {selector} to scroll to");
}

/// Checks a colour bar: drawn, with its range and unit.
async fn assert_colour_bar(browser: &Browser, bar: &str, range: (&str, &str), unit: &str) {
    let attribute = async |name: &str| browser.attribute(bar, name).await;
    assert_eq!(
        (attribute("data-min").await, attribute("data-max").await),
        (Some(range.0.to_string()), Some(range.1.to_string())),
        "{bar}'s range"
    );
    assert_eq!(attribute("data-unit").await.as_deref(), Some(unit), "{bar}");
    let drawn = browser
        .script(
            "return document.querySelectorAll(arguments[0] + ' canvas').length;",
            vec![json!(bar)],
        )
        .await;
    assert_eq!(drawn, json!(1), "{bar}'s gradient is drawn");
    // One convention for signed values on every page (issue 66, item 7; the book's Colours
    // page): red below 0, white at it, blue above (restores, B higher).
    if range.0.starts_with('-') {
        let colours = (
            attribute("data-low-rgb").await,
            attribute("data-mid-rgb").await,
            attribute("data-high-rgb").await,
        );
        let rgb = |s: &str| Some(s.to_string());
        assert_eq!(
            colours,
            (rgb("178,24,43"), rgb("255,255,255"), rgb("33,102,172")),
            "{bar}'s colours"
        );
    }
}

/// index.html: every figure loaded (a decoded image, not a broken one) with a caption, the
/// head table's unit in its ablation headers, a wide figure fitted and zoomed by a click.
async fn shoot_index(browser: &Browser, run: &Path, shots: &Shots) {
    let page = run.join("inspect/index.html").canonicalize().unwrap();
    browser
        .client()
        .goto(&format!("file://{}", page.display()))
        .await
        .unwrap();
    let figures = browser
        .script(
            "return Array.prototype.map.call(document.querySelectorAll('figure'), function (f) {\
               var img = f.querySelector('img');\
               var caption = f.querySelector('figcaption');\
               return [img ? img.getAttribute('src') : null,\
                       img ? img.complete && img.naturalWidth > 0 : false,\
                       caption ? caption.textContent.trim().length : 0];\
             });",
            vec![],
        )
        .await;
    let figures = figures.as_array().expect("a list of figures");
    assert!(figures.len() >= 10, "index.html shows {figures:?}");
    for figure in figures {
        assert_eq!(figure[1], json!(true), "a figure did not load: {figure}");
        assert!(
            figure[2].as_u64().unwrap() > 20,
            "a figure without a caption: {figure}"
        );
    }
    let headers = texts(browser, "th").await;
    assert!(
        headers.iter().any(|h| h.contains("(points)")),
        "the head table's ablation headers say their unit: {headers:?}"
    );
    scroll_to(browser, "h1").await;
    shots.take(browser, "index-recall.png", (1000, 700)).await;
    // A figure wider than the page fits it, and a click shows it at full size, then fits it
    // back: a figure of many heads stays legible.
    let width = async |alt: &str| {
        let shown = browser
            .script(
                "var img = document.querySelector('img[alt=\"' + arguments[0] + '\"]');\
                 return [img.clientWidth, img.naturalWidth];",
                vec![json!(alt)],
            )
            .await;
        (shown[0].as_f64().unwrap(), shown[1].as_f64().unwrap())
    };
    let (fitted, natural) = width("attention.png").await;
    assert!(
        fitted < natural,
        "attention.png ({natural} px) fits the page: {fitted}"
    );
    browser.click("img[alt=\"attention.png\"]").await;
    assert_eq!(
        width("attention.png").await,
        (natural, natural),
        "at full size"
    );
    browser.click("img[alt=\"attention.png\"]").await;
    assert_eq!(width("attention.png").await.0, fitted, "fitted back");
}

/// The texts of the elements matching `selector`, in page order.
async fn texts(browser: &Browser, selector: &str) -> Vec<String> {
    let texts = browser
        .script(
            "return Array.prototype.map.call(document.querySelectorAll(arguments[0]),\
               function (e) { return e.textContent; });",
            vec![json!(selector)],
        )
        .await;
    serde_json::from_value(texts).unwrap()
}

/// explore's head panel (L1H0) names each measure as index.html's head table does ("zero
/// drop", not `ablation_drop`) with its unit, and shows the drops in points: 100 times
/// heads.json's fractions.
async fn assert_measures_in_their_units(browser: &Browser, run: &Path) {
    let names = texts(browser, "#measures th").await;
    for name in [
        "entropy (nats)",
        "confidence (fraction)",
        "mean distance (positions)",
        "zero drop (points)",
        "resample drop (points)",
        "direct_logit_attribution (logits)",
    ] {
        assert!(names.iter().any(|n| n == name), "{name}: {names:?}");
    }
    let heads: Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("inspect/heads.json")).unwrap())
            .unwrap();
    let l1h0 = heads
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["layer"] == 1 && h["head"] == 0)
        .unwrap();
    let shown = browser
        .script(
            "var rows = document.querySelectorAll('#measures tr');\
             for (var i = 0; i < rows.length; i++) {\
               var th = rows[i].querySelector('th');\
               if (th && th.textContent === 'resample drop (points)') {\
                 return rows[i].querySelector('td').textContent;\
               }\
             }\
             return null;",
            vec![],
        )
        .await;
    let points = 100.0 * l1h0["resample_ablation_drop"].as_f64().unwrap();
    assert_eq!(shown, json!(format!("{points:.2}")), "in points");
}

/// explore.html: the recall head opened in the head view, then three recall heads with the
/// last query hovered, then the patching view on route pairs.
async fn shoot_explore(browser: &Browser, run: &Path, shots: &Shots) {
    browser.open(&run.join("inspect/explore.html")).await;
    assert_colour_bar(
        browser,
        "#model-colour-bar",
        ("0", "1"),
        "attention probability",
    )
    .await;
    // The heads of the model view, labelled with their roles under each thumbnail.
    let labels = texts(browser, "#model-grid .cell").await;
    assert_eq!(labels.len(), 8, "2 layers x 4 heads: {labels:?}");
    assert!(
        labels[4..].iter().all(|l| l.contains("recall_value")),
        "layer 1's heads are labelled recall heads: {labels:?}"
    );

    browser.click("#thumb-1-0").await;
    browser.choose("#colour", "token").await;
    let opened = head_view(browser).await;
    assert_eq!((opened.layer.as_str(), opened.heads.as_str()), ("1", "0"));
    assert_measures_in_their_units(browser, run).await;
    scroll_to(browser, "h1").await;
    shots.take(browser, "explore-recall.png", (1000, 700)).await;

    browser.click("#head-1").await;
    browser.click("#head-2").await;
    assert_eq!(head_view(browser).await.heads, "0,1,2");
    let last_query = browser
        .script(
            "return JSON.parse(document.getElementById('data').textContent)\
             .sequences[0].tokens.length - 1;",
            vec![],
        )
        .await;
    let last_query = last_query.as_u64().unwrap() as usize;
    scroll_to(browser, "#head-view-title").await;
    explore::hover(browser, "query", last_query).await;
    assert_eq!(
        head_view(browser).await.hover,
        format!("query {last_query}")
    );
    shots
        .take(browser, "explore-recall-hover.png", (1000, 700))
        .await;

    browser.choose("#pair-kind", "route").await;
    assert_colour_bar(
        browser,
        "#patching-colour-bar",
        ("-1", "1"),
        "fraction of the logit difference restored",
    )
    .await;
    let notes = texts(browser, "#patching-notes").await;
    assert!(
        notes[0].contains("route"),
        "the patching notes name the pairs: {notes:?}"
    );
    scroll_to(browser, "#patching-title").await;
    shots
        .take(browser, "explore-patching.png", (1000, 700))
        .await;
    browser.assert_no_errors().await;
}

/// compare.html of the two seeds: the grid with its colour bar, then a slot's difference.
async fn shoot_compare(browser: &Browser, runs: &[&Path], out: &Path, shots: &Shots) {
    compare(runs, out);
    browser.open(&out.join("compare.html")).await;
    assert_colour_bar(
        browser,
        "#grid-colour-bar",
        ("0", "1"),
        "attention probability",
    )
    .await;
    let runs = &texts(browser, "#runs").await[0];
    assert!(
        runs.contains("recall-seed0 (reference)") && runs.contains("recall-seed1"),
        "the runs table names both runs and the reference: {runs}"
    );
    let run_headers = texts(browser, "#runs th").await;
    assert!(
        run_headers.iter().any(|h| h == "eval token acc (points)"),
        "{run_headers:?}"
    );
    let diff_headers = texts(browser, "#diff-table th").await;
    for header in [
        "entropy (nats)",
        "mean distance (positions)",
        "recall_value (fraction)",
    ] {
        assert!(
            diff_headers.iter().any(|h| h == header),
            "{header}: {diff_headers:?}"
        );
    }
    browser.choose("#layer", "1").await;
    scroll_to(browser, "h1").await;
    shots.take(browser, "compare-recall.png", (1000, 700)).await;
    browser.assert_no_errors().await;
}

#[tokio::test(flavor = "current_thread")]
async fn the_books_pictures_of_the_quick_start_report() {
    let Some(browser) = Browser::start().await else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let shots = Shots::new();
    let seed0 = quick_start_run(tmp.path(), 0);
    let seed1 = quick_start_run(tmp.path(), 1);
    shoot_index(&browser, &seed0, &shots).await;
    shoot_explore(&browser, &seed0, &shots).await;
    shoot_compare(
        &browser,
        &[&seed0, &seed1],
        &tmp.path().join("compare"),
        &shots,
    )
    .await;
    browser.close().await;
}

/// all-MiniLM-L6-v2 where `scripts/setup/setup.sh` unpacks it: `HEADLAB_MINILM_DIR`, else
/// `~/.cache/headlab/all-MiniLM-L6-v2`. `None` (the test skips, saying so) where it is not
/// there, unless `HEADLAB_REQUIRE_MINILM=1` (`.ci/run`), then it panics.
fn minilm_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("HEADLAB_MINILM_DIR")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .map(|home| Path::new(&home).join(".cache/headlab/all-MiniLM-L6-v2"))
        })?;
    if dir.join("model.safetensors").is_file() {
        return Some(dir);
    }
    assert!(
        std::env::var("HEADLAB_REQUIRE_MINILM").as_deref() != Ok("1"),
        "HEADLAB_REQUIRE_MINILM=1 but there is no all-MiniLM-L6-v2 in {} \
         (scripts/setup/setup.sh installs it)",
        dir.display()
    );
    eprintln!("skipping: no all-MiniLM-L6-v2 in {}", dir.display());
    None
}

/// The sentence the imported model's picture reads: a subject whose verb is past another
/// noun, as the book's relation chapters discuss.
const SENTENCE: &str = "The keys to the old cabinet are on the kitchen table .";

#[tokio::test(flavor = "current_thread")]
async fn the_books_picture_of_an_imported_model() {
    let Some(minilm) = minilm_dir() else {
        return;
    };
    let Some(browser) = Browser::start().await else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let shots = Shots::new();
    let run = import(&minilm, &tmp.path().join("all-MiniLM-L6-v2"));
    // A reading of typed text goes beside the run's own report unless --out says where.
    let report = run.join("inspect-typed");
    run_headlab(
        "inspect",
        &[
            run.as_os_str(),
            "--text".as_ref(),
            SENTENCE.as_ref(),
            "--out".as_ref(),
            report.as_os_str(),
            "--quiet".as_ref(),
        ],
    );
    browser.open(&report.join("explore.html")).await;
    assert_colour_bar(
        &browser,
        "#model-colour-bar",
        ("0", "1"),
        "attention probability",
    )
    .await;
    assert_eq!(
        texts(&browser, "#model-grid .cell").await.len(),
        6 * 12,
        "6 layers x 12 heads"
    );
    let words = browser
        .script(
            "return JSON.parse(document.getElementById('data').textContent).sequences[0].tokens;",
            vec![],
        )
        .await;
    let mut expected = vec!["[CLS]"];
    expected.extend(SENTENCE.split(' '));
    expected.push("[SEP]");
    assert_eq!(words, json!(expected), "read word by word");
    // The empty patching view gives the real reason: no prediction head to score.
    let notes = texts(&browser, "#patching-notes").await;
    assert!(
        notes[0].contains("no prediction head"),
        "the patching view's reason: {notes:?}"
    );
    scroll_to(&browser, "h1").await;
    shots
        .take(&browser, "explore-minilm.png", (1000, 700))
        .await;
    browser.assert_no_errors().await;
    browser.close().await;
}
