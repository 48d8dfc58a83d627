//! compare.html of two seeds of one run, in Chromium under WebDriver: a layer chosen in the
//! menu shows in the grid and the slot view (one panel per run), the mouse over a panel's
//! query row sets the hovered query, a row of the diff table clicked draws that slot's
//! difference, a grid cell clicked opens its slot, and no console error.

use std::path::{Path, PathBuf};

use headlab_browser_tests::{Browser, TINY_REVERSE, compare, train};
use serde_json::json;

/// A point on the slot view's panel `run`, as (x, y) in CSS pixels from the panel canvas's
/// top left corner, moved to with the mouse; returns the slot view's data-hover then.
async fn hover_panel(browser: &Browser, run: usize, x: f64, y: f64) -> String {
    let point = browser
        .script(
            "var canvas = document.querySelector('#slot-view canvas[data-run=\"' + arguments[0] + '\"]');\
             canvas.scrollIntoView({ block: 'center' });\
             var r = canvas.getBoundingClientRect();\
             var x = arguments[1] < 0 ? r.width + arguments[1] : arguments[1];\
             var y = arguments[2] < 0 ? r.height + arguments[2] : arguments[2];\
             x = Math.round(r.left + x);\
             y = Math.round(r.top + y);\
             if (document.elementFromPoint(x, y) !== canvas) {\
               return 'panel ' + arguments[0] + ' is not at (' + x + ', ' + y + ')';\
             }\
             return [x, y];",
            vec![json!(run), json!(x), json!(y)],
        )
        .await;
    let Some(xy) = point.as_array() else {
        panic!("{point}");
    };
    browser
        .move_mouse(xy[0].as_f64().unwrap(), xy[1].as_f64().unwrap())
        .await;
    browser
        .attribute("#slot-view", "data-hover")
        .await
        .expect("#slot-view has data-hover")
}

/// Trains two seeds of the tiny reverse run into `dir`, compares them and returns the path
/// of `compare.html` (failing, naming what `compare` wrote, when it is missing).
fn two_seeds_compared(dir: &Path) -> PathBuf {
    let a = train(dir, "seed7", TINY_REVERSE, &[]);
    let b = train(dir, "seed8", TINY_REVERSE, &["seed=8"]);
    let out = dir.join("compare");
    compare(&[&a, &b], &out);
    let page = out.join("compare.html");
    assert!(
        page.is_file(),
        "compare ran but wrote no compare.html (it wrote {:?}); the page comes with \
         crates/report/src/draw/compare_page.rs",
        std::fs::read_dir(&out)
            .map(|dir| dir.map(|e| e.unwrap().file_name()).collect::<Vec<_>>())
            .unwrap_or_default()
    );
    page
}

/// The page's first views: layer 0 of both runs in the grid, slot 0 in the slot view.
async fn open_page(browser: &Browser, page: &Path) {
    browser.open(page).await;
    let cells = browser
        .script(
            "return document.querySelectorAll('#grid canvas.cell').length;",
            vec![],
        )
        .await;
    assert_eq!(cells, 4, "2 slots x 2 runs of layer 0");
    assert_eq!(
        browser
            .attribute("#slot-view", "data-slot")
            .await
            .as_deref(),
        Some("0")
    );
    // The grid's colour bar: attention probability from 0 to 1, drawn.
    let bar = async |name: &str| browser.attribute("#grid-colour-bar", name).await;
    assert_eq!(bar("data-min").await.as_deref(), Some("0"));
    assert_eq!(bar("data-max").await.as_deref(), Some("1"));
    assert_eq!(
        bar("data-unit").await.as_deref(),
        Some("attention probability")
    );
    let drawn = browser
        .script(
            "return document.querySelectorAll('#grid-colour-bar canvas').length;",
            vec![],
        )
        .await;
    assert_eq!(drawn, 1, "the bar's gradient");
}

/// A click on a grid cell opens its slot in the slot view.
#[tokio::test(flavor = "current_thread")]
async fn compare_page_grid_cell_click_opens_its_slot() {
    let Some(browser) = Browser::start().await else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let page = two_seeds_compared(tmp.path());
    open_page(&browser, &page).await;
    // Layer 1 in the layer menu, then the cell of slot 1 in run 1.
    browser.choose("#layer", "1").await;
    browser
        .click("#grid canvas.cell[data-layer=\"1\"][data-slot=\"1\"][data-run=\"1\"]")
        .await;
    let errors = browser.attribute("body", "data-errors").await;
    assert_eq!(errors, None, "clicking a grid cell raised a script error");
    let slot_view = async |name: &str| browser.attribute("#slot-view", name).await;
    assert_eq!(slot_view("data-layer").await.as_deref(), Some("1"));
    assert_eq!(slot_view("data-slot").await.as_deref(), Some("1"));
    assert_eq!(slot_view("data-runs").await.as_deref(), Some("2"));
    let selected = browser
        .script(
            "return Array.prototype.map.call(\
               document.querySelectorAll('#grid .grid-cell.selected canvas'),\
               function (c) { return c.getAttribute('data-slot'); });",
            vec![],
        )
        .await;
    assert_eq!(selected, json!(["1", "1"]), "slot 1 marked in both runs");
    browser.assert_no_errors().await;
    browser.close().await;
}

/// The layer menu, the slot view under the mouse, and a click on a row of the diff table.
#[tokio::test(flavor = "current_thread")]
async fn compare_page_of_two_seeds_answers_the_controls_and_the_mouse() {
    let Some(browser) = Browser::start().await else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let page = two_seeds_compared(tmp.path());
    open_page(&browser, &page).await;

    // Layer 1 in the layer menu: the grid and the slot view (one panel per run) follow.
    browser.choose("#layer", "1").await;
    let cells = browser
        .script(
            "return Array.prototype.map.call(document.querySelectorAll('#grid canvas.cell'),\
               function (c) { return c.getAttribute('data-layer'); });",
            vec![],
        )
        .await;
    assert_eq!(cells, json!(["1", "1", "1", "1"]), "the grid shows layer 1");
    let slot_view = async |name: &str| browser.attribute("#slot-view", name).await;
    assert_eq!(slot_view("data-layer").await.as_deref(), Some("1"));
    assert_eq!(slot_view("data-slot").await.as_deref(), Some("0"));
    assert_eq!(slot_view("data-sequence").await.as_deref(), Some("0"));
    assert_eq!(slot_view("data-runs").await.as_deref(), Some("2"));
    let panels = browser
        .script(
            "return Array.prototype.map.call(\
               document.querySelectorAll('#slot-view canvas'),\
               function (c) { return c.getAttribute('data-run'); });",
            vec![],
        )
        .await;
    assert_eq!(panels, json!(["0", "1"]), "one panel per run");

    // The mouse over run 1's panel: its middle is on some query row, a little inside the
    // heatmap's bottom right corner (past 4 px of padding and the border) on the last one,
    // the top left corner (the label margin) on none.
    let n = browser
        .script(
            "return window.headlabCompare.data.sequences[0].tokens.length;",
            vec![],
        )
        .await
        .as_u64()
        .unwrap();
    let middle = browser
        .script(
            "var c = document.querySelector('#slot-view canvas[data-run=\"1\"]');\
             var r = c.getBoundingClientRect(); return [r.width / 2, r.height / 2];",
            vec![],
        )
        .await;
    let hovered = hover_panel(
        &browser,
        1,
        middle[0].as_f64().unwrap(),
        middle[1].as_f64().unwrap(),
    )
    .await;
    let row: u64 = hovered
        .parse()
        .unwrap_or_else(|_| panic!("the middle of the panel hovers a query: {hovered}"));
    assert!(row < n);
    let titles = browser
        .script(
            "return Array.prototype.map.call(\
               document.querySelectorAll('#slot-view canvas'),\
               function (c) { return c.title; });",
            vec![],
        )
        .await;
    for title in titles.as_array().unwrap() {
        assert!(
            title
                .as_str()
                .unwrap()
                .starts_with(&format!("query {row}: ")),
            "every panel names the hovered query: {titles}"
        );
    }
    let last = hover_panel(&browser, 1, -10.0, -10.0).await;
    assert_eq!(last, (n - 1).to_string(), "the last query row");
    let none = hover_panel(&browser, 1, 2.0, 2.0).await;
    assert_eq!(none, "none", "outside the heatmap");

    // The diff table: runs 0 and 1, a row per layer and slot; clicking layer 1, slot 1.
    let table = async |name: &str| browser.attribute("#diff-table", name).await;
    assert_eq!(table("data-a").await.as_deref(), Some("0"));
    assert_eq!(table("data-b").await.as_deref(), Some("1"));
    assert_eq!(table("data-rows").await.as_deref(), Some("4"));
    assert_eq!(
        browser
            .attribute("#diff-canvas", "data-slot")
            .await
            .as_deref(),
        Some("none")
    );
    browser
        .click("#diff-table tr[data-layer=\"1\"][data-slot=\"1\"]")
        .await;
    assert_eq!(
        browser
            .attribute("#diff-canvas", "data-slot")
            .await
            .as_deref(),
        Some("1")
    );
    assert_eq!(
        browser
            .attribute("#diff-canvas", "data-layer")
            .await
            .as_deref(),
        Some("1")
    );
    // The diff's diverging colour bar: centred on 0, to the largest difference.
    let bar = async |name: &str| browser.attribute("#diff-colour-bar", name).await;
    let (low, high) = (
        bar("data-min").await.unwrap(),
        bar("data-max").await.unwrap(),
    );
    let (low, high): (f64, f64) = (low.parse().unwrap(), high.parse().unwrap());
    assert!(high >= 0.05 && (low + high).abs() < 1e-9, "{low} {high}");
    assert_eq!(
        bar("data-unit").await.as_deref(),
        Some("B \u{2212} A attention probability")
    );
    // Blue where B is higher, red where it is lower, as every signed value in headlab's
    // pages and figures (issue 66, item 7).
    assert_eq!(bar("data-high-rgb").await.as_deref(), Some("33,102,172"));
    assert_eq!(bar("data-low-rgb").await.as_deref(), Some("178,24,43"));
    let legend = browser
        .script("return document.querySelector('.pos').textContent;", vec![])
        .await;
    assert_eq!(legend.as_str(), Some("blue: B higher"));

    browser.assert_no_errors().await;
    browser.close().await;
}
