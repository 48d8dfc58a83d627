//! `similarity.png`: how alike each layer's heads are, four matrices per layer.

use std::path::Path;

use inspect::measures::similarity::LayerSimilarity;

use super::canvas::{ColourScale, FONT, FigureError, Heatmap, render};

/// A similarity panel: its title, its matrix, the colour scale's range and its direction.
pub(crate) type Panel<'a> = (&'a str, &'a Vec<Vec<f64>>, (f64, f64), ColourScale);

/// `similarity.png`: per layer (rows), the four head-by-head matrices (columns).
pub fn similarity(path: &Path, layers: &[LayerSimilarity]) -> Result<(), FigureError> {
    let n_heads = layers.first().map_or(1, |l| l.qk_cosine.len());
    let panel = (180 + 40 * n_heads as u32).min(520);
    render(
        path,
        (panel * 4, panel * layers.len() as u32 + 30),
        |root| {
            let (title, grid) = root.split_vertically(30);
            title.titled(
            "Head similarity per layer (cosine: 1 = same circuit; JS distance: 0 = same pattern)",
            (FONT, 16),
        )?;
            let panels = grid.split_evenly((layers.len(), 4));
            let labels: Vec<String> = (0..n_heads).map(|h| format!("H{h}")).collect();
            for (l, layer) in layers.iter().enumerate() {
                // Yellow is "the same" in every panel: a distance's scale is reversed.
                let measures: [Panel; 4] = [
                    (
                        "QK cosine",
                        &layer.qk_cosine,
                        (-1.0, 1.0),
                        ColourScale::More,
                    ),
                    (
                        "OV cosine",
                        &layer.ov_cosine,
                        (-1.0, 1.0),
                        ColourScale::More,
                    ),
                    (
                        "pattern JS distance",
                        &layer.pattern_js,
                        (0.0, 1.0),
                        ColourScale::Less,
                    ),
                    (
                        "output CKA",
                        &layer.output_cka,
                        (0.0, 1.0),
                        ColourScale::More,
                    ),
                ];
                for (m, (name, matrix, range, scale)) in measures.into_iter().enumerate() {
                    // The bar's unit: the measure without its object (`cosine`, `CKA`).
                    let unit = name.split_once(' ').map_or(name, |(_, unit)| unit);
                    if matrix.is_empty() {
                        continue;
                    }
                    Heatmap {
                        caption: format!("L{} {name}", layer.layer),
                        values: &|i, j| matrix[i][j],
                        rows: n_heads,
                        cols: n_heads,
                        row_labels: labels.clone(),
                        col_labels: labels.clone(),
                        range,
                        scale,
                        unit,
                        baseline: None,
                        annotate: n_heads <= 8,
                        x_desc: "head",
                        y_desc: "head",
                    }
                    .draw(&panels[l * 4 + m])?;
                }
            }
            Ok(())
        },
    )
}
