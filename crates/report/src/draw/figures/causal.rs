//! The causal figures from `patching.json`: head patching (`patching.png`) and path
//! patching laid out as the composition figure (`paths.png`).

use std::path::Path;

use model::HeadId;

use inspect::interventions::patching::{PairPatching, PairSource, Patching};
use inspect::interventions::path_patching::PathChannel;

use super::canvas::{
    Area, ColourScale, DrawResult, FONT, FigureError, Heatmap, render, signed_range,
};

/// A section's pairs in a caption: `12 answer pairs`, `1 pair of yours`.
fn pairs_named(source: PairSource, pairs: usize) -> String {
    let plural = if pairs == 1 { "" } else { "s" };
    match source {
        PairSource::Own => format!("{pairs} pair{plural} of yours"),
        PairSource::Task(kind) => format!("{pairs} {} pair{plural}", kind.name()),
    }
}

/// `patching.png`: per kind of minimal pair (one panel each), per head (rows) and position
/// (columns), the fraction of the clean answer's logit difference restored when the head's
/// clean output is put back at that position, with the whole head (every position) as the
/// last column; one colour scale per panel from the smallest value (or 0) to the largest
/// (or 1).
pub fn patching(path: &Path, patching: &Patching) -> Result<(), FigureError> {
    let sections: Vec<(PairSource, &PairPatching)> = patching.sections().collect();
    let first = sections.first().map(|(_, s)| *s);
    let positions = first
        .and_then(|s| s.heads.first())
        .map_or(0, |h| h.by_position.len());
    let rows = first.map_or(0, |s| s.heads.len());
    let cols = positions + 1;
    let width = (140 + 44 * cols as u32).max(520);
    let panel_height = (120 + 30 * rows as u32).max(240);
    render(
        path,
        (width, panel_height * sections.len().max(1) as u32),
        |root| {
            let panels = root.split_evenly((sections.len().max(1), 1));
            for ((kind, section), panel) in sections.iter().zip(&panels) {
                let value = |i: usize, j: usize| {
                    let head = &section.heads[i];
                    let restored = if j < positions {
                        head.by_position.get(j).copied().flatten()
                    } else {
                        head.restored
                    };
                    restored.unwrap_or(0.0)
                };
                let (lo, hi) = signed_range(rows, cols, &value);
                let mut col_labels: Vec<String> = (0..positions).map(|p| p.to_string()).collect();
                col_labels.push("all".to_string());
                Heatmap {
                    caption: format!(
                        "Restored logit difference, clean head output patched in ({})",
                        pairs_named(*kind, section.pairs)
                    ),
                    values: &value,
                    rows,
                    cols,
                    row_labels: section.heads.iter().map(|h| h.id.to_string()).collect(),
                    col_labels,
                    range: (lo, hi),
                    scale: ColourScale::Signed,
                    unit: "share restored",
                    baseline: None,
                    annotate: cols <= 32,
                    x_desc: "position patched",
                    y_desc: "head",
                }
                .draw(panel)?;
            }
            Ok(())
        },
    )
}

/// `paths.png`: per kind of pair and pair of layers (rows of panels), path patching from each
/// earlier head (rows) to each later head (columns) through its query, key and value (one
/// panel each), laid out as `composition.png` so the two can be read side by side; each
/// row's title gives the layer-to-layer values of every channel (the only values of a
/// section without head-to-head paths: an imported model's).
pub fn paths(path: &Path, patching: &Patching) -> Result<(), FigureError> {
    let rows = path_rows(patching);
    let n_heads = rows.first().map_or(1, |(_, s, a, _)| {
        s.heads.iter().filter(|h| h.id.layer == *a).count()
    });
    let panel = (180 + 40 * n_heads as u32).min(520);
    // Without head-to-head paths (an imported model's), a row is its two lines of text.
    let head_to_head = rows
        .iter()
        .any(|(_, section, ..)| !section.paths.is_empty());
    let row_height = if head_to_head { panel + 24 } else { 48 };
    render(
        path,
        (panel * 3, row_height * rows.len().max(1) as u32 + 30),
        |root| {
            let (title, grid) = root.split_vertically(30);
            title.titled(
                "Path patching: restored fraction through one input of one later head",
                (FONT, 16),
            )?;
            let bands = grid.split_evenly((rows.len().max(1), 1));
            let labels: Vec<String> = (0..n_heads).map(|h| format!("H{h}")).collect();
            for ((kind, section, a, b), band) in rows.iter().zip(&bands) {
                let (heading, panels) = band.split_vertically(24);
                let layer_level: Vec<String> = section
                    .layer_paths
                    .iter()
                    .filter(|p| p.sender_layer == *a && p.receiver_layer == *b)
                    .map(|p| format!("{} {}", p.channel.short(), fmt_restored(p.restored)))
                    .collect();
                heading.titled(
                    &format!(
                        "{}, all of L{a} -> all of L{b}: {}",
                        pairs_named(*kind, section.pairs),
                        layer_level.join(", ")
                    ),
                    (FONT, 13),
                )?;
                if section.paths.is_empty() {
                    // An imported model's report measures layer to layer only.
                    panels.titled("head to head: not measured", (FONT, 13))?;
                    continue;
                }
                head_path_panels(&panels, section, (*a, *b), &labels)?;
            }
            Ok(())
        },
    )
}

/// One row of `paths.png`: head-to-head path patching from layer `a` to layer `b` through
/// Q, K and V, one heatmap each on `area`, the heads labelled `labels`.
fn head_path_panels(
    area: &Area,
    section: &PairPatching,
    (a, b): (usize, usize),
    labels: &[String],
) -> DrawResult {
    let n_heads = labels.len();
    let panels = area.split_evenly((1, 3));
    for (c, channel) in [PathChannel::Query, PathChannel::Key, PathChannel::Value]
        .into_iter()
        .enumerate()
    {
        let value = |i: usize, j: usize| {
            section
                .paths
                .iter()
                .find(|p| {
                    p.sender == HeadId::new(a, i)
                        && p.receiver_layer == b
                        && p.receiver_head == Some(j)
                        && p.channel == channel
                })
                .and_then(|p| p.restored)
                .unwrap_or(0.0)
        };
        let range = signed_range(n_heads, n_heads, &value);
        Heatmap {
            caption: format!("through {}, L{a} -> L{b}", channel.short().to_uppercase()),
            values: &value,
            rows: n_heads,
            cols: n_heads,
            row_labels: labels.to_vec(),
            col_labels: labels.to_vec(),
            range,
            scale: ColourScale::Signed,
            unit: "share restored",
            baseline: None,
            annotate: n_heads <= 8,
            x_desc: "later head (receives)",
            y_desc: "earlier head (sends)",
        }
        .draw(&panels[c])?;
    }
    Ok(())
}

/// The rows of `paths.png`: (kind, section, sender layer, receiver layer), one row of panels
/// each, in the order of the sections and their layer paths.
fn path_rows(patching: &Patching) -> Vec<(PairSource, &PairPatching, usize, usize)> {
    let mut rows = Vec::new();
    for (kind, section) in patching.sections() {
        let mut layer_pairs: Vec<(usize, usize)> = section
            .layer_paths
            .iter()
            .map(|p| (p.sender_layer, p.receiver_layer))
            .collect();
        layer_pairs.dedup();
        rows.extend(layer_pairs.into_iter().map(|(a, b)| (kind, section, a, b)));
    }
    rows
}

/// A restored fraction to two decimals, `-` when undefined.
pub(crate) fn fmt_restored(restored: Option<f64>) -> String {
    restored.map_or_else(|| "-".to_string(), |r| format!("{r:.2}"))
}
