//! explore.html of a 256-token run in Chromium under WebDriver: it renders, and a hover with
//! the mouse redraws the head view; the time from the pointer action to the changed
//! attribute is printed (speed goals belong to benchmarks, so no threshold here).

use std::time::Instant;

use headlab_browser_tests::explore::{self, expected_lines, head_view, token_point};
use headlab_browser_tests::{Browser, LONG_REVERSE, inspect, train};
use serde_json::json;

/// Hovers token `index` of `side` with the mouse; returns the milliseconds from sending the
/// pointer action to reading the changed `data-hover` back over WebDriver, and those from the
/// page's mousemove event to the attribute change (the page's own work).
async fn timed_hover(browser: &Browser, side: &str, index: usize) -> (f64, f64) {
    let (x, y) = token_point(browser, side, index).await;
    let expected = format!("{side} {index}");
    // In the page: when the mousemove arrives (capture on window, before explore.js's
    // handler) and when data-hover changes.
    browser
        .script(
            "var canvas = document.getElementById('head-canvas');\
             var expected = arguments[0];\
             var t = window.__headlabTiming = { move: null, change: null };\
             window.addEventListener('mousemove', function () {\
               if (t.change === null) { t.move = performance.now(); }\
             }, true);\
             new MutationObserver(function (records, observer) {\
               if (t.change === null && canvas.getAttribute('data-hover') === expected) {\
                 t.change = performance.now();\
                 observer.disconnect();\
               }\
             }).observe(canvas, { attributes: true, attributeFilter: ['data-hover'] });",
            vec![json!(expected)],
        )
        .await;
    let start = Instant::now();
    browser.move_mouse(x, y).await;
    loop {
        let hover = browser.attribute("#head-canvas", "data-hover").await;
        if hover.as_deref() == Some(expected.as_str()) {
            break;
        }
        assert!(
            start.elapsed().as_secs() < 30,
            "the hover never reached {expected}: data-hover is {hover:?}"
        );
    }
    let end_to_end = start.elapsed().as_secs_f64() * 1e3;
    let timing = browser
        .script("return window.__headlabTiming;", vec![])
        .await;
    let in_page = match (timing["move"].as_f64(), timing["change"].as_f64()) {
        (Some(moved), Some(changed)) => changed - moved,
        _ => panic!("the page saw no mousemove or no change: {timing}"),
    };
    (end_to_end, in_page)
}

#[tokio::test(flavor = "current_thread")]
async fn a_256_token_explore_page_renders_and_answers_a_hover() {
    let Some(browser) = Browser::start().await else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let run = train(tmp.path(), "long", LONG_REVERSE, &[]);
    let page = inspect(&run);
    let opened = Instant::now();
    browser.open(&page).await;
    let load_ms = opened.elapsed().as_secs_f64() * 1e3;

    // Rendered: 256 rows, every pair over the threshold drawn, both thumbnails there.
    let n = browser
        .script(
            "return JSON.parse(document.getElementById('data').textContent)\
             .sequences[0].tokens.length;",
            vec![],
        )
        .await;
    assert_eq!(n, json!(256));
    let patterns = explore::patterns(&browser, 0, 0).await;
    let first = head_view(&browser).await;
    assert_eq!((first.layer.as_str(), first.heads.as_str()), ("0", "0"));
    assert_eq!(first.lines, expected_lines(&patterns, &[0], None));
    assert!(first.lines > 0);
    let height = browser
        .script(
            "return document.getElementById('head-canvas').getBoundingClientRect().height;",
            vec![],
        )
        .await;
    assert!(
        height.as_f64().unwrap() > 256.0 * 4.0,
        "a row of at least 4 px per token: {height}"
    );
    assert_eq!(
        browser
            .script(
                "return document.querySelectorAll('#model-grid .cell canvas').length;",
                vec![]
            )
            .await,
        json!(2)
    );

    // Query 200 (below the fold: the head view scrolls), then key 30, each timed.
    let (query_ms, query_page_ms) = timed_hover(&browser, "query", 200).await;
    let hovered = head_view(&browser).await;
    assert_eq!(
        hovered.lines,
        expected_lines(&patterns, &[0], Some(("query", 200))),
        "{hovered:?}"
    );
    let (key_ms, key_page_ms) = timed_hover(&browser, "key", 30).await;
    let hovered = head_view(&browser).await;
    assert_eq!(
        hovered.lines,
        expected_lines(&patterns, &[0], Some(("key", 30))),
        "{hovered:?}"
    );
    println!(
        "256-token explore.html: loaded and drawn in {load_ms:.0} ms; hover query 200: \
         {query_ms:.1} ms from the WebDriver action to data-hover read back ({query_page_ms:.1} \
         ms in the page, mousemove to redrawn); hover key 30: {key_ms:.1} ms \
         ({key_page_ms:.1} ms in the page)"
    );

    browser.assert_no_errors().await;
    browser.close().await;
}
