//! explore.html of a trained run, in Chromium under WebDriver: a layer and a head chosen
//! through the controls, a query and a key hovered with the mouse (the lines drawn are those
//! of that row or column), a thumbnail of the model view clicked, and no console error.

use std::time::Duration;

use headlab_browser_tests::explore::{self, HeadView, expected_lines, head_view};
use headlab_browser_tests::{Browser, TINY_REVERSE, fixture, import, inspect, run_headlab, train};

#[tokio::test(flavor = "current_thread")]
async fn explore_page_of_a_trained_run_answers_the_controls_and_the_mouse() {
    let Some(browser) = Browser::start().await else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let run = train(tmp.path(), "reverse", TINY_REVERSE, &[]);
    let page = inspect(&run);
    browser.open(&page).await;

    // The first views: sequence 0, layer 0, head 0, every pair over the threshold drawn.
    let first = head_view(&browser).await;
    let layer0 = explore::patterns(&browser, 0, 0).await;
    assert_eq!(
        first,
        HeadView {
            sequence: "0".into(),
            layer: "0".into(),
            heads: "0".into(),
            hover: "none".into(),
            lines: expected_lines(&layer0, &[0], None),
        }
    );
    let thumbnails = browser
        .script(
            "return document.querySelectorAll('#model-grid .cell canvas').length;",
            vec![],
        )
        .await;
    assert_eq!(thumbnails, 4, "2 layers x 2 heads in the model view");
    // A model of a task's tokens has no pieces: no words/pieces choice.
    assert_eq!(
        browser
            .attribute("#unit-control", "hidden")
            .await
            .as_deref(),
        Some("true")
    );
    // Colour bars with their units: attention 0 to 1, patching's restored fraction -1 to 1.
    for (bar, range, unit) in [
        ("#model-colour-bar", ("0", "1"), "attention probability"),
        (
            "#patching-colour-bar",
            ("-1", "1"),
            "fraction of the logit difference restored",
        ),
    ] {
        let min = browser.attribute(bar, "data-min").await;
        let max = browser.attribute(bar, "data-max").await;
        assert_eq!(
            (min.as_deref(), max.as_deref()),
            (Some(range.0), Some(range.1))
        );
        assert_eq!(
            browser.attribute(bar, "data-unit").await.as_deref(),
            Some(unit)
        );
    }

    // Layer 1 in the layer menu, then head 1 on and head 0 off in the head toggles.
    browser.choose("#layer", "1").await;
    browser.click("#head-1").await;
    browser.click("#head-0").await;
    let layer1 = explore::patterns(&browser, 0, 1).await;
    let chosen = head_view(&browser).await;
    assert_eq!(
        (
            chosen.layer.as_str(),
            chosen.heads.as_str(),
            chosen.hover.as_str()
        ),
        ("1", "1", "none"),
        "the controls chose layer 1, head 1: {chosen:?}"
    );
    assert_eq!(chosen.lines, expected_lines(&layer1, &[1], None));

    // Both heads of layer 1, then the mouse over query 4: only its row is drawn, per head.
    browser.click("#head-0").await;
    assert_eq!(head_view(&browser).await.heads, "0,1");
    explore::hover(&browser, "query", 4).await;
    let hovered = head_view(&browser).await;
    assert_eq!(hovered.hover, "query 4", "{hovered:?}");
    let row = expected_lines(&layer1, &[0, 1], Some(("query", 4)));
    assert!(row > 0, "query 4 attends somewhere");
    assert_eq!(
        hovered.lines, row,
        "the lines of query 4's row: {hovered:?}"
    );
    assert!(
        hovered.lines < expected_lines(&layer1, &[0, 1], None),
        "hovering drew fewer lines"
    );

    // The mouse over key 1: the lines into it, from every query.
    explore::hover(&browser, "key", 1).await;
    let hovered = head_view(&browser).await;
    assert_eq!(hovered.hover, "key 1", "{hovered:?}");
    assert_eq!(
        hovered.lines,
        expected_lines(&layer1, &[0, 1], Some(("key", 1))),
        "the lines of key 1's column: {hovered:?}"
    );
    // The query/key view follows the first selected head.
    assert_eq!(
        browser
            .attribute("#qk-canvas", "data-head")
            .await
            .as_deref(),
        Some("0")
    );

    // A thumbnail of the model view: layer 0, head 1 opens in the head view.
    browser.click("#thumb-0-1").await;
    let opened = browser
        .wait_attribute("#head-canvas", "data-layer", Duration::from_secs(5), |v| {
            v == Some("0")
        })
        .await;
    assert_eq!(opened.as_deref(), Some("0"));
    let view = head_view(&browser).await;
    assert_eq!(
        (view.layer.as_str(), view.heads.as_str()),
        ("0", "1"),
        "the thumbnail opened layer 0, head 1: {view:?}"
    );
    assert_eq!(view.lines, expected_lines(&layer0, &[1], None));
    let class = browser.attribute("#thumb-0-1", "class").await.unwrap();
    assert!(
        class.contains("selected"),
        "the thumbnail is marked: {class}"
    );
    assert_eq!(
        browser
            .script(
                "return [document.getElementById('layer').value, \
             document.getElementById('head-0').checked, \
             document.getElementById('head-1').checked];",
                vec![],
            )
            .await,
        serde_json::json!(["0", false, true]),
        "the controls follow the thumbnail"
    );

    browser.assert_no_errors().await;
    browser.close().await;
}

/// explore.html of an imported model read on the shipped treebank: a head's panel lists its
/// three best relation scores, each in its better direction, from heads.json, among the
/// relations of enough arcs (relations.json's `arcs`, at least 100 as the report's table).
#[tokio::test(flavor = "current_thread")]
async fn an_imported_models_head_panel_shows_its_best_relations() {
    let Some(browser) = Browser::start().await else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let run = import(
        &fixture("families/roberta-mlm"),
        &tmp.path().join("roberta"),
    );
    let page = inspect(&run);
    browser.open(&page).await;
    let panel = browser
        .script(
            "return document.getElementById('measures').textContent;",
            vec![],
        )
        .await;
    let panel = panel.as_str().unwrap();
    // Layer 0, head 0 (the first view), as heads.json has it.
    let heads: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("inspect/heads.json")).unwrap())
            .unwrap();
    let relations: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("inspect/relations.json")).unwrap())
            .unwrap();
    let shown: Vec<&str> = relations["relations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["arcs"].as_u64().unwrap() >= 100)
        .map(|r| r["relation"].as_str().unwrap())
        .collect();
    // The fixture reads few sentences (16 positions): one relation has 100 arcs or more.
    assert!(!shown.is_empty(), "{relations}");
    let scores = heads[0]["relation_scores"].as_object().unwrap();
    let mut best: Vec<(f64, &String)> = scores
        .iter()
        .filter(|(name, _)| shown.contains(&name.as_str()))
        .map(|(name, s)| {
            let up = s["dependent_to_head"].as_f64().unwrap();
            let down = s["head_to_dependent"].as_f64().unwrap();
            (up.max(down), name)
        })
        .collect();
    best.sort_by(|a, b| b.0.total_cmp(&a.0));
    assert!(panel.contains("best relations"), "{panel}");
    for (score, name) in &best[..best.len().min(3)] {
        assert!(
            panel.contains(&format!("{name} ")) && panel.contains(&format!("{score:.3}")),
            "{name} {score:.3} not in {panel}"
        );
    }
    // A relation of too few arcs to be scored is not among them.
    let rare: Vec<&String> = scores
        .keys()
        .filter(|name| !shown.contains(&name.as_str()))
        .collect();
    for name in rare {
        assert!(!panel.contains(&format!("{name} dep")), "{name}: {panel}");
    }
    browser.assert_no_errors().await;
    browser.close().await;
}

/// An imported masked LM's explore.html (issue 66, items 3 and 4). Words or pieces: the
/// head view shows the words by default and, chosen, the pieces the model attends between
/// (`[CLS]` and `[SEP]` included), each row of their attention summing to 1. The patching view
/// of a report written with `--pairs FILE`: "your pairs" is a choice beside the task's, it
/// draws the residual rows and every head, its notes name the pairs and the heads most
/// needed, and it lists the pairs as written, by line.
#[tokio::test(flavor = "current_thread")]
async fn an_imported_masked_lm_shows_pieces_and_your_own_pairs() {
    let Some(browser) = Browser::start().await else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let run = import(&fixture("bert/three-layers-mlm"), &tmp.path().join("mlm"));
    let pairs = tmp.path().join("agreement.tsv");
    std::fs::write(
        &pairs,
        "the dog near the cats [MASK] .\tthe dogs near the cats [MASK] .\truns\trun\n\
         the cat [MASK] .\tthe cats [MASK] .\tsleeps\tsleep\n",
    )
    .unwrap();
    run_headlab(
        "inspect",
        &[
            run.as_os_str(),
            "--pairs".as_ref(),
            pairs.as_os_str(),
            "--quiet".as_ref(),
        ],
    );
    browser
        .open(&run.join("inspect-pairs-agreement/explore.html"))
        .await;

    // Words, then pieces.
    let head = "#head-canvas";
    assert_eq!(browser.attribute("#unit-control", "hidden").await, None);
    assert_eq!(
        browser.attribute(head, "data-unit").await.as_deref(),
        Some("words")
    );
    let sequence = browser
        .script(
            "return JSON.parse(document.getElementById('data').textContent).sequences[0];",
            vec![],
        )
        .await;
    let words = sequence["tokens"].as_array().unwrap().len();
    let pieces: Vec<String> = serde_json::from_value(sequence["pieces"]["tokens"].clone()).unwrap();
    assert_eq!(
        browser.attribute(head, "data-tokens").await,
        Some(words.to_string())
    );
    assert_eq!(pieces.first().map(String::as_str), Some("[CLS]"));
    assert_eq!(pieces.last().map(String::as_str), Some("[SEP]"));
    let row: Vec<u64> =
        serde_json::from_value(sequence["pieces"]["patterns"][0][0].clone()).unwrap();
    let n = pieces.len();
    for q in 0..n {
        let sum: u64 = row[q * n..(q + 1) * n].iter().sum();
        assert!(sum.abs_diff(1000) <= n as u64, "query {q}: {sum}");
    }
    browser.choose("#unit", "pieces").await;
    assert_eq!(
        browser.attribute(head, "data-unit").await.as_deref(),
        Some("pieces")
    );
    assert_eq!(
        browser.attribute(head, "data-tokens").await,
        Some(n.to_string())
    );
    browser.choose("#unit", "words").await;
    assert_eq!(
        browser.attribute(head, "data-tokens").await,
        Some(words.to_string())
    );

    let options = browser
        .script(
            "return Array.prototype.map.call(document.querySelectorAll('#pair-kind option'),\
               function (o) { return o.value + '=' + o.textContent; });",
            vec![],
        )
        .await;
    let options: Vec<String> = serde_json::from_value(options).unwrap();
    assert_eq!(options.len(), 2, "{options:?}");
    assert_eq!(options[0], "answer=answer pairs");
    assert!(
        options[1].starts_with("own=your pairs (") && options[1].ends_with("agreement.tsv)"),
        "{options:?}"
    );
    browser.choose("#pair-kind", "own").await;
    let canvas = "#patching-canvas";
    assert_eq!(
        browser.attribute(canvas, "data-kind").await.as_deref(),
        Some("own")
    );
    // Four residual places (3 blocks) and 9 heads; whole heads only for an imported model.
    assert_eq!(
        browser.attribute(canvas, "data-rows").await.as_deref(),
        Some("13")
    );
    assert_eq!(
        browser.attribute(canvas, "data-cols").await.as_deref(),
        Some("1")
    );
    let notes = browser
        .script(
            "return Array.prototype.map.call(document.querySelectorAll('#patching-notes p, \
               #own-pairs li'), function (e) { return e.textContent; });",
            vec![],
        )
        .await;
    let notes: Vec<String> = serde_json::from_value(notes).unwrap();
    assert!(
        notes[0].starts_with("2 pairs of your own; logit difference clean "),
        "{notes:?}"
    );
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("Most needed (mean-ablated")),
        "{notes:?}"
    );
    let listed: Vec<&String> = notes.iter().filter(|n| n.starts_with("line ")).collect();
    assert_eq!(
        listed,
        [
            "line 1: the dog near the cats [MASK] . (runs) / the dogs near the cats [MASK] . (run)",
            "line 2: the cat [MASK] . (sleeps) / the cats [MASK] . (sleep)",
        ],
        "{notes:?}"
    );
    // Back to the task's pairs: the list of yours goes with them.
    browser.choose("#pair-kind", "answer").await;
    assert_eq!(
        browser.attribute(canvas, "data-kind").await.as_deref(),
        Some("answer")
    );
    let listed = browser
        .script(
            "return document.querySelectorAll('#own-pairs li').length;",
            vec![],
        )
        .await;
    assert_eq!(listed.as_u64(), Some(0));
    browser.assert_no_errors().await;
    browser.close().await;
}

/// The console check itself: a page that throws and logs an error shows both in the browser
/// log read from chromedriver (so a silent log cannot pass the test above).
#[tokio::test(flavor = "current_thread")]
async fn the_console_check_sees_script_errors() {
    let Some(browser) = Browser::start().await else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let page = tmp.path().join("broken.html");
    std::fs::write(
        &page,
        "<!doctype html><html><body><script>console.error('logged on purpose');\
         document.body.setAttribute('data-ready', 'ok');\
         throw new Error('thrown on purpose');</script></body></html>",
    )
    .unwrap();
    browser.open(&page).await;
    let errors = format!("{:?}", browser.console_errors().await);
    assert!(
        errors.contains("logged on purpose") && errors.contains("thrown on purpose"),
        "{errors}"
    );
    browser.close().await;
}
