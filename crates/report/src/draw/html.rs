//! `index.html`: one self-contained page (figures embedded as base64 PNG, no external
//! requests) with the run's summary, head table, the best head per dependency relation (for
//! tasks with parses), figures, config and the list of files.
//!
//! A few lines of script mark `<body data-figures="...">` once every figure has decoded
//! ("ok N" or "broken: ..."), so a headless browser can check the page without a screenshot.

use std::fmt::Write as _;
use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use super::embed::escape_html as escape;
use inspect::measures::heads::HeadRecord;

use crate::draw::units::shown_unit;
use inspect::measures::relations::intervals::DirectionIntervals;
use inspect::measures::relations::{BestHead, Relations, SHOWN_MIN_ARCS};

/// A figure to embed: its PNG file and what it shows.
pub struct Figure<'a> {
    /// The PNG written in the report's `figures/`.
    pub path: &'a Path,
    /// One sentence on how to read it.
    pub caption: &'a str,
}

/// Everything the page shows.
pub struct Page<'a> {
    /// Run name (from its config).
    pub title: &'a str,
    /// One line: task, weights, accuracy.
    pub summary: String,
    /// The head table.
    pub heads: &'a [HeadRecord],
    /// Dependency-relation scores, for tasks with parses.
    pub relations: Option<&'a Relations>,
    /// Figures, in order.
    pub figures: Vec<Figure<'a>>,
    /// The run's `config.toml`.
    pub config_toml: &'a str,
    /// Report files with a description each.
    pub files: Vec<(String, &'a str)>,
    /// The measures the report leaves out, each with why (`summary.json`'s `left_out`).
    pub left_out: &'a [String],
}

const STYLE: &str = "body{font-family:system-ui,-apple-system,'DejaVu Sans',sans-serif;\
margin:2rem auto;max-width:1300px;padding:0 1rem;color:#222}\
h1{margin-bottom:.2rem}table{border-collapse:collapse;font-size:.9rem}\
th,td{padding:.25rem .6rem;border-bottom:1px solid #ddd;text-align:right}\
th{background:#f4f4f4}td.role{text-align:left;font-weight:600}\
figure{margin:1.5rem 0;overflow-x:auto}img{max-width:100%;border:1px solid #eee;cursor:zoom-in}\
img.full{max-width:none;cursor:zoom-out}\
figcaption{color:#555;font-size:.9rem}pre{background:#f7f7f7;padding:1rem;overflow:auto}\
.summary{color:#555}code{background:#f4f4f4;padding:0 .2rem}";

const SELF_CHECK: &str = "window.addEventListener('load',function(){\
var imgs=Array.prototype.slice.call(document.images);\
var bad=imgs.filter(function(i){return !(i.complete&&i.naturalWidth>0);});\
document.body.setAttribute('data-figures',bad.length?'broken: '+bad.map(function(i){return i.alt;}).join(', '):'ok '+imgs.length);\
});";

/// The page as HTML. Reads the figures' PNG files to embed them.
pub fn render(page: &Page) -> std::io::Result<String> {
    let mut html = String::new();
    let w = &mut html;
    page_header(w, page);
    left_out(w, page.left_out);
    heads_table(w, page.heads);
    if let Some(relations) = page.relations {
        relations_table(w, relations);
    }
    figures_section(w, &page.figures)?;
    files_and_config(w, page);
    Ok(html)
}

/// What the report leaves out and why, where it leaves something out.
fn left_out(w: &mut String, left_out: &[String]) {
    if left_out.is_empty() {
        return;
    }
    let _ = writeln!(
        w,
        "<p class=\"summary\">Left out:</p>\n<ul class=\"summary\">"
    );
    for why in left_out {
        let _ = writeln!(w, "<li>{}</li>", escape(why));
    }
    let _ = writeln!(w, "</ul>");
}

/// The document's head, the title, the summary line and the link to `explore.html`.
fn page_header(w: &mut String, page: &Page) {
    // Writing into a String cannot fail; `let _ =` keeps the many writes short.
    let _ = write!(
        w,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>headlab: {title}</title>\n<style>{STYLE}</style>\n<script>{SELF_CHECK}</script>\n\
         </head>\n<body data-figures=\"loading\">\n<h1>headlab: {title}</h1>\n\
         <p class=\"summary\">{summary}</p>\n\
         <p><a href=\"explore.html\">Explore every head interactively</a> \
         (<code>explore.html</code>: model, head and query/key views).</p>\n",
        title = escape(page.title),
        summary = escape(&page.summary),
    );
}

/// The head table's columns: title, and the field of `heads.json` it shows (whose unit the
/// header names; "" for none). `explore.html`'s head panel names the fields by the same
/// titles.
pub(crate) const HEAD_COLUMNS: [(&str, &str); 14] = [
    ("layer", ""),
    ("head", ""),
    ("role", ""),
    ("entropy", "entropy"),
    ("confidence", "confidence"),
    ("mean distance", "mean_distance"),
    ("zero drop", "ablation_drop"),
    ("mean drop", "mean_ablation_drop"),
    ("resample drop", "resample_ablation_drop"),
    ("copying", "copying_score"),
    ("QK rank", "qk_effective_rank"),
    ("OV rank", "ov_effective_rank"),
    ("task target", "task_target_score"),
    ("pattern scores", "pattern_scores.any"),
];

/// The head table: how to read it, then one row per head.
fn heads_table(w: &mut String, heads: &[HeadRecord]) {
    let _ = write!(
        w,
        "<h2>Heads</h2>\n<p>Role: the pattern that gets at least half of the head's attention \
         on the probe batch, else <em>mixed</em>, with the offsets and tokens that take the largest \
         shares of its attention beneath (mean share of a query's attention). Zero, mean, resample: eval token accuracy lost, \
         in points, when only this head's output is set to 0, to its mean, or to its output on \
         another sequence (&ndash; where not measured). Copying: sum(&lambda;) / sum(|&lambda;|) of the OV circuit's \
         eigenvalues (1 writes back what the head reads). Ranks: effective rank of the QK and \
         OV circuits, at most d_head (<code>circuits.json</code> has the rest). Task target: \
         mean attention on the exact positions the task says solve each query (1: the head \
         reads exactly them; a uniform head scores their count over the sequence length; \
         &ndash; where the task names none).</p>\n<table>\n<tr>"
    );
    // Each column's title with the unit the table shows its field in (drops in points).
    for (title, field) in HEAD_COLUMNS {
        let _ = write!(w, "<th>{}</th>", shown_unit(field).titled(title));
    }
    let _ = writeln!(w, "</tr>");
    for head in heads {
        let scores: Vec<String> = head
            .pattern_scores
            .iter()
            .map(|(name, score)| format!("{name} {score:.2}"))
            .collect();
        let _ = writeln!(
            w,
            "<tr><td>{}</td><td>{}</td><td class=\"role\">{}</td><td>{:.3}</td><td>{:.3}</td>\
             <td>{:.2}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td><td>{}</td>\
             <td style=\"text-align:left\">{}</td></tr>",
            head.id.layer,
            head.id.head,
            role_cell(head),
            head.entropy,
            head.confidence,
            head.mean_distance,
            points(head.ablation_drop),
            points(head.mean_ablation_drop),
            points(head.resample_ablation_drop),
            head.copying_score,
            head.qk_effective_rank,
            head.ov_effective_rank,
            head.task_target_score
                .map_or_else(|| "&ndash;".to_string(), |score| format!("{score:.2}")),
            escape(&scores.join(", ")),
        );
    }
    let _ = writeln!(w, "</table>");
}

/// A head's role, and for a `mixed` head what takes most of its attention (offsets and
/// tokens, [`inspect::measures::strongest`]), so that no head is left unexplained.
fn role_cell(head: &HeadRecord) -> String {
    match (&head.attends_to, head.role.as_str()) {
        (Some(targets), "mixed") => format!(
            "mixed<br><small style=\"font-weight:normal\">attends to {}</small>",
            escape(&targets.describe())
        ),
        _ => escape(&head.role),
    }
}

/// An accuracy drop (a fraction) in points to two decimals, `&ndash;` where not measured.
fn points(drop: Option<f64>) -> String {
    drop.map_or_else(|| "&ndash;".to_string(), |d| format!("{:.2}", d * 100.0))
}

/// Every figure embedded as base64 PNG with its caption, read from its file.
fn figures_section(w: &mut String, figures: &[Figure]) -> std::io::Result<()> {
    let _ = writeln!(
        w,
        "<h2>Figures</h2>\n<p>Each figure fits the page's width; click one to see it at full \
         size (a figure of many heads is wider than the page: scroll it sideways), and again \
         to fit it back.</p>"
    );
    for figure in figures {
        let png = std::fs::read(figure.path)?;
        let name = figure
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let _ = writeln!(
            w,
            "<figure><img alt=\"{alt}\" title=\"click for full size\" \
             onclick=\"this.classList.toggle('full')\" src=\"data:image/png;base64,{data}\">\
             <figcaption><code>figures/{alt}</code>: {caption}</figcaption></figure>",
            alt = escape(&name),
            data = STANDARD.encode(png),
            caption = escape(figure.caption),
        );
    }
    Ok(())
}

/// The list of report files, the run's config, and the end of the document.
fn files_and_config(w: &mut String, page: &Page) {
    let _ = writeln!(w, "<h2>Files</h2>\n<ul>");
    for (name, description) in &page.files {
        let _ = writeln!(
            w,
            "<li><code>{}</code>: {}</li>",
            escape(name),
            escape(description)
        );
    }
    let _ = write!(
        w,
        "</ul>\n<h2>Config</h2>\n<pre>{}</pre>\n</body>\n</html>\n",
        escape(page.config_toml)
    );
}

/// The best head per relation and direction against the fixed-offset baseline.
fn relations_table(w: &mut String, relations: &Relations) {
    let shown = relations.shown();
    let left_out = match relations.relations.len() - shown.len() {
        0 => String::new(),
        1 => format!(
            " 1 relation of fewer than {SHOWN_MIN_ARCS} arcs is left out here and in the \
             figure (<code>relations.json</code> has it)."
        ),
        n => format!(
            " {n} relations of fewer than {SHOWN_MIN_ARCS} arcs are left out here and in the \
             figure (<code>relations.json</code> has them)."
        ),
    };
    let _ = write!(
        w,
        "<h2>Dependency relations</h2>\n<p>On {} parsed sentences ({} arcs; Clark et al. 2019): \
         the fraction of a relation's arcs whose dependent attends most to its head, and whose \
         head attends most to its dependent, for the best head in each direction (ties among \
         the most-attended words give 1/k), with its 95% interval over sentences where \
         measured; the baseline is the fixed offset head - dependent that finds the most arcs. \
         <strong>Bold</strong>: above the baseline (where intervals were measured: in at least \
         97.5% of the resamples).{left_out} (<code>relations.json</code> has every head.)</p>\n\
         <table>\n<tr><th>relation</th><th>arcs</th><th>baseline (fraction of arcs)</th>\
         <th>dependent &rarr; head (fraction of arcs)</th>\
         <th>head &rarr; dependent (fraction of arcs)</th></tr>\n",
        relations.sentences, relations.arcs,
    );
    for r in shown {
        let _ = writeln!(
            w,
            "<tr><td class=\"role\">{}</td><td>{}</td><td>offset {:+}: {:.2}</td><td>{}</td>\
             <td>{}</td></tr>",
            escape(&r.relation),
            r.arcs,
            r.baseline.offset,
            r.baseline.score,
            best_cell(
                &r.best.dependent_to_head,
                r.intervals.map(|i| i.dependent_to_head)
            ),
            best_cell(
                &r.best.head_to_dependent,
                r.intervals.map(|i| i.head_to_dependent)
            ),
        );
    }
    let _ = writeln!(w, "</table>");
}

/// One direction's best head: `L2H0 0.74 (0.71-0.76)`, bold where it beats the baseline
/// (clearly, where intervals were measured).
fn best_cell(best: &BestHead, intervals: Option<DirectionIntervals>) -> String {
    let (cell, above) = match intervals {
        Some(i) => (
            format!(
                "{} {:.2} ({:.2}&ndash;{:.2})",
                best.id, best.score, i.best_head.low, i.best_head.high
            ),
            i.margin.low > 0.0,
        ),
        None => (
            format!("{} {:.2}", best.id, best.score),
            best.beats_baseline,
        ),
    };
    match above {
        true => format!("<strong>{cell}</strong>"),
        false => cell,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_from_the_run_is_escaped() {
        assert_eq!(
            escape("<b>&\"x\"</b>"),
            "&lt;b&gt;&amp;&quot;x&quot;&lt;/b&gt;"
        );
        let page = Page {
            title: "a<script>",
            summary: "s".into(),
            heads: &[],
            relations: None,
            figures: vec![],
            config_toml: "name = \"<x>\"",
            files: vec![],
            left_out: &["relation scores: no <parse>".to_string()],
        };
        let html = render(&page).unwrap();
        assert!(html.contains("headlab: a&lt;script&gt;"));
        assert!(html.contains("name = &quot;&lt;x&gt;&quot;"));
        assert!(!html.contains("a<script>"));
        assert!(
            html.contains("<li>relation scores: no &lt;parse&gt;</li>"),
            "{html}"
        );
    }

    #[test]
    fn the_relations_table_shows_labels_of_enough_arcs_with_their_intervals() {
        let head = |score: f64, above: bool| serde_json::json!({"layer": 2, "head": 0, "score": score, "beats_baseline": above});
        let relation = |name: &str, arcs: usize, intervals: serde_json::Value| {
            serde_json::json!({
                "relation": name, "arcs": arcs, "baseline": {"offset": -2, "score": 0.35},
                "heads": [{"layer": 2, "head": 0, "dependent_to_head": 0.74,
                           "head_to_dependent": 0.36}],
                "best": {"dependent_to_head": head(0.74, true),
                         "head_to_dependent": head(0.36, true)},
                "intervals": intervals,
            })
        };
        let direction = |low: f64, margin_low: f64| {
            serde_json::json!({"best_head": {"low": low, "high": 0.76},
                               "margin": {"low": margin_low, "high": 0.4},
                               "heads_above_baseline": 1, "heads_clearly_above_baseline": 1})
        };
        let intervals = serde_json::json!({
            "resamples": 1000, "baseline": {"low": 0.3, "high": 0.4},
            "dependent_to_head": direction(0.71, 0.35),
            // Above the baseline on all sentences, not in 97.5% of the resamples: not bold.
            "head_to_dependent": direction(0.30, -0.02),
        });
        let relations: Relations = serde_json::from_value(serde_json::json!({
            "sentences": 40, "arcs": 170,
            "relations": [relation("obj", 150, intervals), relation("vocative", 20, serde_json::Value::Null)],
        }))
        .unwrap();
        let mut html = String::new();
        relations_table(&mut html, &relations);
        assert!(
            html.contains("<strong>L2H0 0.74 (0.71&ndash;0.76)</strong>"),
            "{html}"
        );
        assert!(
            html.contains("<td>L2H0 0.36 (0.30&ndash;0.76)</td>"),
            "{html}"
        );
        assert!(
            !html.contains("vocative"),
            "a label of 20 arcs is left out: {html}"
        );
        assert!(
            html.contains("1 relation of fewer than 100 arcs is left out"),
            "{html}"
        );
        // None of enough arcs (a small probe): every relation is shown.
        let mut small = relations.clone();
        small.relations.remove(0);
        let mut html = String::new();
        relations_table(&mut html, &small);
        assert!(
            html.contains("vocative") && !html.contains("left out"),
            "{html}"
        );
    }
}
