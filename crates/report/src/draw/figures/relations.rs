//! `relations.png`: each head's score on each dependency relation, both directions.

use std::path::Path;

use inspect::measures::relations::{HeadRelationScore, Relations};

use super::canvas::{ColourScale, FONT, FigureError, Heatmap, LABEL_CHAR_PX, render};

/// One direction's score of a head on a relation (a panel of `relations.png`).
pub(crate) type RelationScore = fn(&HeadRelationScore) -> f64;

/// `relations.png`: per dependency relation of at least
/// [`inspect::measures::relations::SHOWN_MIN_ARCS`] arcs ([`Relations::shown`]; rows,
/// labelled with the best fixed offset and its score) and head (columns, `L0H0`...), the fraction of the relation's arcs the head
/// finds, dependent to head (top panel) and head to dependent (bottom), annotated.
pub fn relations(path: &Path, relations: &Relations) -> Result<(), FigureError> {
    let shown = relations.shown(); // the rarest relations stay in relations.json only
    let rows = shown.len().max(1);
    let heads: Vec<String> = shown
        .first()
        .map(|r| r.heads.iter().map(|h| h.id.to_string()).collect())
        .unwrap_or_default();
    let cols = heads.len().max(1);
    let row_labels: Vec<String> = shown
        .iter()
        .map(|r| {
            format!(
                "{} (offset {:+}: {:.2})",
                r.relation, r.baseline.offset, r.baseline.score
            )
        })
        .collect();
    let label_width = row_labels
        .iter()
        .map(|l| l.chars().count())
        .max()
        .unwrap_or(0) as u32;
    // Cells wide enough for their values where annotated; narrow past 32 heads (MiniLM's 72:
    // 1,600 px, not 3,600), their labels turned to run downwards.
    let annotate = cols <= 32;
    let cell_px = if annotate { 46 } else { 18 };
    let width = (60 + LABEL_CHAR_PX * label_width + cell_px * cols as u32).max(520);
    let panel_height = 90 + 30 * rows as u32;
    let panels: [(&str, RelationScore); 2] = [
        (
            "dependent -> head: the dependent's most-attended word is its head",
            |h| h.dependent_to_head,
        ),
        (
            "head -> dependent: the head word's most-attended word is the dependent",
            |h| h.head_to_dependent,
        ),
    ];
    render(path, (width, 2 * panel_height + 30), |root| {
        let (title, grid) = root.split_vertically(30);
        title.titled(
            &format!(
                "Dependency relations over {} sentences (row: relation, best fixed offset)",
                relations.sentences
            ),
            (FONT, 16),
        )?;
        let areas = grid.split_evenly((2, 1));
        for ((caption, score), area) in panels.into_iter().zip(&areas) {
            Heatmap {
                caption: caption.to_string(),
                values: &|i, j| score(&shown[i].heads[j]),
                rows: shown.len(),
                cols: heads.len(),
                row_labels: row_labels.clone(),
                col_labels: heads.clone(),
                range: (0.0, 1.0),
                scale: ColourScale::More,
                unit: "share of arcs found",
                baseline: None,
                annotate,
                x_desc: "head",
                y_desc: "relation",
            }
            .draw(area)?;
        }
        Ok(())
    })
}
