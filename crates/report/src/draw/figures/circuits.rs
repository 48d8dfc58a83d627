//! What the weights say: composition between layers, per-head circuit scores, and
//! norm-based attention against attention weights.

use std::path::Path;

use model::HeadId;
use plotters::prelude::*;

use inspect::circuits::{Circuits, HeadCircuits, LayerComposition};

use super::canvas::{ColourScale, FONT, FigureError, Heatmap, render};

/// `composition.png`: per pair of layers (rows), the Q-, K- and V-composition matrices
/// (columns), the earlier layer's heads down, the later layer's across; one colour scale
/// from 0 to the largest score of the figure. `random` is what unrelated heads score, for
/// the title.
pub fn composition(
    path: &Path,
    pairs: &[LayerComposition],
    random: f64,
) -> Result<(), FigureError> {
    let n_heads = pairs.first().map_or(1, |p| p.q.len());
    let panel = (180 + 40 * n_heads as u32).min(520);
    // A composition score is a ratio of norms, in [0, 1]: drawn on all of it, one scale for
    // every panel, with what unrelated heads score marked. Stretched to the largest score,
    // 0.10 against 0.13 (both about the random 0.12) looked like structure.
    let range = (0.0, 1.0);
    render(path, (panel * 3, panel * pairs.len() as u32 + 30), |root| {
        let (title, grid) = root.split_vertically(30);
        let heading = format!(
            "Composition of earlier into later heads; unrelated heads score about {random:.2}"
        );
        title.titled(&heading, (FONT, 16))?;
        let panels = grid.split_evenly((pairs.len(), 3));
        let labels: Vec<String> = (0..n_heads).map(|h| format!("H{h}")).collect();
        for (row, pair) in pairs.iter().enumerate() {
            for (c, (name, matrix)) in [("Q", &pair.q), ("K", &pair.k), ("V", &pair.v)]
                .into_iter()
                .enumerate()
            {
                let (a, b) = (pair.layer_a, pair.layer_b);
                Heatmap {
                    caption: format!("{name}-composition, L{a} -> L{b}"),
                    values: &|i, j| matrix[i][j],
                    rows: n_heads,
                    cols: n_heads,
                    row_labels: labels.clone(),
                    col_labels: labels.clone(),
                    range,
                    scale: ColourScale::More,
                    unit: "composition score",
                    baseline: Some(random),
                    annotate: n_heads <= 8,
                    x_desc: "later head (reads)",
                    y_desc: "earlier head (writes)",
                }
                .draw(&panels[row * 3 + c])?;
            }
        }
        Ok(())
    })
}

/// `circuits.png`: per head (layers down, heads across), the copying score of the OV
/// circuit, of the full circuit (when the task's inputs and outputs match), and the
/// effective ranks of the QK and OV circuits.
pub fn circuits(path: &Path, circuits: &Circuits) -> Result<(), FigureError> {
    let n_layers = circuits.layers.len().max(1);
    let n_heads = circuits
        .heads
        .iter()
        .map(|h| h.id.head + 1)
        .max()
        .unwrap_or(1);
    let d_head = circuits.d_head.max(1) as f64;
    type Measure<'a> = (&'a str, fn(&HeadCircuits) -> f64, (f64, f64));
    let mut measures: Vec<Measure> =
        vec![("copying score of OV", |h| h.copying_score, (-1.0, 1.0))];
    // The bar's unit: the caption's first words (`copying score`, `effective rank`).
    let unit = |name: &str| -> String { name.split(" of ").next().unwrap_or(name).to_string() };
    if circuits
        .heads
        .iter()
        .any(|h| h.full_copying_score.is_some())
    {
        measures.push((
            "copying score of embedding -> OV -> output",
            |h| h.full_copying_score.unwrap_or(0.0),
            (-1.0, 1.0),
        ));
    }
    measures.push((
        "effective rank of QK",
        |h| h.qk_effective_rank,
        (0.0, d_head),
    ));
    measures.push((
        "effective rank of OV",
        |h| h.ov_effective_rank,
        (0.0, d_head),
    ));
    let width = (160 + 60 * n_heads as u32).clamp(300, 600);
    let height = (120 + 50 * n_layers as u32).clamp(220, 600);
    render(path, (width * measures.len() as u32, height + 30), |root| {
        let (title, grid) = root.split_vertically(30);
        title.titled(
            "Circuits per head: copying (1 copies, -1 negates) and effective rank (at most \
             d_head)",
            (FONT, 16),
        )?;
        let panels = grid.split_evenly((1, measures.len()));
        let head_labels: Vec<String> = (0..n_heads).map(|h| format!("H{h}")).collect();
        let layer_labels: Vec<String> = (0..n_layers).map(|l| format!("L{l}")).collect();
        for ((name, value, range), area) in measures.iter().zip(&panels) {
            let cell = |l: usize, h: usize| {
                circuits
                    .heads
                    .iter()
                    .find(|r| r.id == HeadId::new(l, h))
                    .map_or(0.0, value)
            };
            let unit = unit(name);
            Heatmap {
                caption: name.to_string(),
                values: &cell,
                rows: n_layers,
                cols: n_heads,
                row_labels: layer_labels.clone(),
                col_labels: head_labels.clone(),
                range: *range,
                scale: ColourScale::More,
                unit: &unit,
                baseline: None,
                annotate: n_heads <= 8,
                x_desc: "head",
                y_desc: "layer",
            }
            .draw(area)?;
        }
        Ok(())
    })
}

/// Most points a panel of `norms.png` draws: enough to show the cloud's shape, few enough
/// to stay readable and quick to draw.
pub const NORM_POINTS: usize = 2000;

/// One head's panel of `norms.png`.
pub struct NormPanel {
    /// The panel's title: the head and its `norm_weight_correlation`.
    pub caption: String,
    /// `(alpha_ij, alpha_ij ||f(x_j)||)` for the probe's query/key pairs
    /// ([`inspect::measures::norms::weight_norm_pairs`]); at most [`NORM_POINTS`] are drawn.
    pub pairs: Vec<(f64, f64)>,
}

/// At most `max` of `points`, the same ones on every call: all of them if they fit, else
/// those at `k * step mod n` for `k < max`, a prime `step` that does not divide `n` (a
/// spread that no row or column structure of the pairs lines up with, unlike the even
/// stride of [`inspect::measures::trajectories::subsample`], which could keep a single key column).
pub(crate) fn spread_sample<T: Copy>(points: &[T], max: usize) -> Vec<T> {
    let n = points.len();
    if n <= max {
        return points.to_vec();
    }
    let step = [7919, 7927]
        .into_iter()
        .find(|p| !n.is_multiple_of(*p))
        .expect("no n under 62 million is a multiple of both primes");
    (0..max).map(|k| points[k * step % n]).collect()
}

/// `norms.png`: per head (layers down, heads across), a scatter of attention weight
/// against weighted norm over the probe's query/key pairs, on one y scale for every panel,
/// so a head whose points stay near the x axis attends but writes almost nothing.
pub fn norms(path: &Path, panels: &[Vec<NormPanel>]) -> Result<(), FigureError> {
    let n_layers = panels.len().max(1);
    let n_heads = panels.first().map_or(1, Vec::len).max(1);
    let largest_side = n_layers.max(n_heads) as u32;
    let panel = (1800 / largest_side).clamp(220, 320);
    let y_max = panels
        .iter()
        .flatten()
        .flat_map(|p| p.pairs.iter().map(|q| q.1))
        .filter(|y| y.is_finite())
        .fold(0.0, f64::max);
    let y_max = if y_max > 0.0 { y_max * 1.05 } else { 1.0 };
    render(
        path,
        (panel * n_heads as u32, panel * n_layers as u32 + 30),
        |root| {
            let (title, grid) = root.split_vertically(30);
            title.titled(
                "Attention weight against weighted norm alpha ||f(x)|| per query/key pair \
                 (one y scale)",
                (FONT, 16),
            )?;
            let areas = grid.split_evenly((n_layers, n_heads));
            for (head, area) in panels.iter().flatten().zip(&areas) {
                let mut chart = ChartBuilder::on(area)
                    .caption(&head.caption, (FONT, 14))
                    .margin(8)
                    .x_label_area_size(32)
                    .y_label_area_size(52)
                    .build_cartesian_2d(0.0..1.0, 0.0..y_max)?;
                chart
                    .configure_mesh()
                    .x_labels(3)
                    .y_labels(4)
                    .x_desc("attention weight")
                    .y_desc("weighted norm")
                    .x_label_formatter(&|v| format!("{v:.1}"))
                    .y_label_formatter(&|v| format!("{v:.1}"))
                    .label_style((FONT, 11))
                    .axis_desc_style((FONT, 11))
                    .light_line_style(WHITE.mix(0.0))
                    .draw()?;
                let color = Palette99::pick(0).mix(0.35);
                chart.draw_series(
                    spread_sample(&head.pairs, NORM_POINTS)
                        .into_iter()
                        .filter(|(x, y)| x.is_finite() && y.is_finite())
                        .map(|point| Circle::new(point, 2, color.filled())),
                )?;
            }
            Ok(())
        },
    )
}
