//! Attention figures: each head's pattern on probe sequences, and the attention rollout.

use std::path::Path;

use super::canvas::{ColourScale, FONT, FigureError, Heatmap, render};

/// Inputs of an attention-pattern grid.
pub struct PatternFigure<'a> {
    /// The figure's title.
    pub title: &'a str,
    /// Per grid row, per column: `[seq, seq]` attention on one probe sequence, row-major.
    /// In `attention.png` rows are layers and columns heads.
    pub patterns: &'a [Vec<Vec<f32>>],
    /// That sequence's tokens as axis labels ([`token_labels`](super::canvas::token_labels)).
    pub labels: &'a [String],
    /// One caption per panel, like `patterns`.
    pub captions: &'a [Vec<String>],
}

/// A grid of attention heatmaps for one probe sequence, queries down, keys across, tokens
/// on both axes: `attention.png` (layers x heads) and `compare`'s `matched-attention.png`
/// (runs x matched heads).
pub fn attention_patterns(path: &Path, figure: &PatternFigure) -> Result<(), FigureError> {
    let n_layers = figure.patterns.len();
    let n_heads = figure.patterns.first().map_or(1, Vec::len);
    let seq = figure.labels.len();
    // Large grids (many runs side by side) get smaller panels, down to 200 px.
    let largest_side = n_layers.max(n_heads) as u32;
    let panel = (200 + 14 * seq as u32)
        .min(420)
        .min((1800 / largest_side.max(1)).max(200));
    let labels = figure.labels.to_vec();
    render(
        path,
        (panel * n_heads as u32, panel * n_layers as u32 + 30),
        |root| {
            let (title, grid) = root.split_vertically(30);
            title.titled(figure.title, (FONT, 16))?;
            let panels = grid.split_evenly((n_layers, n_heads));
            for (index, area) in panels.iter().enumerate() {
                let (layer, head) = (index / n_heads, index % n_heads);
                let pattern = &figure.patterns[layer][head];
                Heatmap {
                    caption: figure.captions[layer][head].clone(),
                    values: &|i, j| pattern[i * seq + j] as f64,
                    rows: seq,
                    cols: seq,
                    row_labels: labels.clone(),
                    col_labels: labels.clone(),
                    range: (0.0, 1.0),
                    scale: ColourScale::More,
                    unit: "attention weight",
                    baseline: None,
                    annotate: false,
                    x_desc: "key token",
                    y_desc: "query token",
                }
                .draw(area)?;
            }
            Ok(())
        },
    )
}

/// `rollout.png`: the attention rollout after each layer ([`inspect::circuits::rollout`],
/// `[layer][query][input position]`) on one probe sequence whose tokens label the axes
/// (`labels`, from [`token_labels`](super::canvas::token_labels)), one heatmap per layer side by side, on the 0-1 scale
/// of attention.
pub fn rollout(
    path: &Path,
    rollout: &[Vec<Vec<f64>>],
    labels: &[String],
) -> Result<(), FigureError> {
    let n_layers = rollout.len().max(1);
    let seq = labels.len();
    let panel = (240 + 14 * seq as u32).min(420);
    let labels = labels.to_vec();
    render(path, (panel * n_layers as u32, panel + 30), |root| {
        let (title, grid) = root.split_vertically(30);
        title.titled(
            "Attention rollout on probe sequence 0 (row: query, column: input position)",
            (FONT, 16),
        )?;
        let panels = grid.split_evenly((1, n_layers));
        for (layer, (matrix, area)) in rollout.iter().zip(&panels).enumerate() {
            Heatmap {
                caption: format!("after layer {layer}"),
                values: &|i, j| matrix[i][j],
                rows: seq,
                cols: seq,
                row_labels: labels.clone(),
                col_labels: labels.clone(),
                range: (0.0, 1.0),
                scale: ColourScale::More,
                unit: "rolled-out attention",
                baseline: None,
                annotate: false,
                x_desc: "input token",
                y_desc: "query token",
            }
            .draw(area)?;
        }
        Ok(())
    })
}
