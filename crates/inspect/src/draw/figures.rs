//! The report's PNG figures, drawn with plotters into an RGB buffer and encoded with `png`.
//! Text uses DejaVu Sans embedded in the binary, so figures look the same on every machine
//! and need no system fonts.

use std::error::Error;
use std::path::{Path, PathBuf};
use std::sync::Once;

use model::HeadId;
use plotters::coord::Shift;
use plotters::coord::ranged1d::SegmentedCoord;
use plotters::coord::types::RangedCoordi32;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::{FontStyle, FontTransform, register_font};
use run::metrics::MetricsRecord;
use tasks::PairKind;

use crate::circuits::{Circuits, HeadCircuits, LayerComposition};
use crate::draw::backend::FigureBackend;
use crate::interventions::patching::{PairPatching, Patching};
use crate::interventions::path_patching::PathChannel;
use crate::interventions::pruning::{PruneCurve, Pruning};
use crate::measures::divergence::DivergencePoint;
use crate::measures::heads::HeadRecord;
use crate::measures::relations::{HeadRelationScore, Relations};
use crate::measures::similarity::LayerSimilarity;
use crate::measures::trajectories::Trajectories;

/// What a drawing step returns; plotters' errors are boxed.
pub type DrawResult = Result<(), Box<dyn Error>>;
/// The drawing area a figure draws on: a bitmap or an SVG document ([`FigureBackend`]).
pub type Area<'a> = DrawingArea<FigureBackend<'a>, Shift>;
/// A similarity panel: its title, its matrix and the colour scale's range.
type Panel<'a> = (&'a str, &'a Vec<Vec<f64>>, (f64, f64));
/// One direction's score of a head on a relation (a panel of `relations.png`).
type RelationScore = fn(&HeadRelationScore) -> f64;

/// The embedded font's family name, for text styles.
pub const FONT: &str = "sans-serif";

/// Most pixels a figure may have: 2^28 (768 MiB of RGB), e.g. 16384 x 16384. Grids grow
/// with layers, heads and (in `compare`) runs; past this they have too many panels to read,
/// and the buffer alone would take gigabytes.
pub const MAX_FIGURE_PIXELS: u64 = 1 << 28;

/// A figure that could not be drawn or written.
#[derive(Debug, thiserror::Error)]
#[error("cannot draw {path}: {message}")]
pub struct FigureError {
    /// The figure.
    pub path: PathBuf,
    /// Why.
    pub message: String,
}

/// Registers the embedded font once per process.
fn register_fonts() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        for (style, bytes) in [
            (FontStyle::Normal, dejavu::sans::regular()),
            (FontStyle::Bold, dejavu::sans::bold()),
        ] {
            register_font(FONT, style, bytes)
                .unwrap_or_else(|_| panic!("the embedded DejaVu font parses"));
        }
    });
}

/// Draws a `width` x `height` figure with `draw` and writes it to `path` (atomically): as SVG
/// when `path` ends in `.svg`, else as PNG.
pub fn render(
    path: &Path,
    (width, height): (u32, u32),
    draw: impl FnOnce(&Area) -> DrawResult,
) -> Result<(), FigureError> {
    register_fonts();
    let fail = |message: String| FigureError {
        path: path.to_path_buf(),
        message,
    };
    if u64::from(width) * u64::from(height) > MAX_FIGURE_PIXELS {
        return Err(fail(format!(
            "{width} x {height} pixels is over the {MAX_FIGURE_PIXELS} pixels a figure may \
             have: too many panels (layers, heads or runs) to draw"
        )));
    }
    let paint = |backend: FigureBackend| -> DrawResult {
        let root = backend.into_drawing_area();
        root.fill(&WHITE)?;
        draw(&root)?;
        root.present()?;
        Ok(())
    };
    let bytes = if path.extension().is_some_and(|e| e == "svg") {
        let mut svg = String::new();
        paint(FigureBackend::Svg(SVGBackend::with_string(
            &mut svg,
            (width, height),
        )))
        .map_err(|e| fail(e.to_string()))?;
        svg.into_bytes()
    } else {
        let mut rgb = vec![0u8; width as usize * height as usize * 3];
        paint(FigureBackend::Bitmap(BitMapBackend::with_buffer(
            &mut rgb,
            (width, height),
        )))
        .map_err(|e| fail(e.to_string()))?;
        let mut png_bytes = vec![];
        let mut encoder = png::Encoder::new(&mut png_bytes, width, height);
        encoder.set_color(png::ColorType::Rgb);
        encoder.set_depth(png::BitDepth::Eight);
        let mut writer = encoder.write_header().map_err(|e| fail(e.to_string()))?;
        writer
            .write_image_data(&rgb)
            .map_err(|e| fail(e.to_string()))?;
        writer.finish().map_err(|e| fail(e.to_string()))?;
        png_bytes
    };
    run::atomic::write_atomic(path, &bytes).map_err(|e| fail(e.to_string()))
}

/// Viridis colour of `value` in `[lo, hi]` (clamped).
fn viridis(value: f64, lo: f64, hi: f64) -> RGBColor {
    let t = ((value - lo) / (hi - lo)).clamp(0.0, 1.0);
    ViridisRGB.get_color(t as f32)
}

/// Width of one character of a 12 px label, rounded up, for sizing label areas.
const LABEL_CHAR_PX: u32 = 7;

/// Axis labels for a sequence of token `ids`: the task's word for each id when it names
/// them ([`tasks::Task::token_names`]), else the id itself (and for ids past the
/// names). The one place figures turn tokens into labels.
pub fn token_labels(ids: &[u32], names: Option<&[String]>) -> Vec<String> {
    ids.iter()
        .map(|&id| {
            names
                .and_then(|names| names.get(id as usize))
                .cloned()
                .unwrap_or_else(|| id.to_string())
        })
        .collect()
}

/// A heatmap of `rows` x `cols` cells, row 0 at the top, with labelled rows and columns.
struct Heatmap<'a> {
    caption: String,
    values: &'a dyn Fn(usize, usize) -> f64,
    rows: usize,
    cols: usize,
    row_labels: Vec<String>,
    col_labels: Vec<String>,
    range: (f64, f64),
    /// Write each cell's value in it (small matrices only).
    annotate: bool,
    x_desc: &'a str,
    y_desc: &'a str,
}

/// The chart a [`Heatmap`] draws on: one segment per cell across and down.
type HeatmapChart<'a, 'b> = ChartContext<
    'a,
    FigureBackend<'b>,
    Cartesian2d<SegmentedCoord<RangedCoordi32>, SegmentedCoord<RangedCoordi32>>,
>;

/// How a heatmap's labels are laid out.
struct LabelLayout {
    /// Height of the column labels' area, in pixels.
    x_area: u32,
    /// Width of the row labels' area, in pixels.
    y_area: u32,
    /// Whether the column labels run downwards.
    rotate: bool,
}

impl Heatmap<'_> {
    /// Draws the heatmap on `area`, its caption on top.
    fn draw(&self, area: &Area) -> DrawResult {
        let (rows, cols) = (self.rows as i32, self.cols as i32);
        let layout = self.label_layout(area);
        let mut chart = ChartBuilder::on(area)
            .caption(&self.caption, (FONT, 15))
            .margin(6)
            .x_label_area_size(layout.x_area)
            .y_label_area_size(layout.y_area)
            // A segmented `0..n` has n + 1 segments; `0..n - 1` has one per cell.
            .build_cartesian_2d(
                (0..cols - 1).into_segmented(),
                (0..rows - 1).into_segmented(),
            )?;
        self.draw_axes(&mut chart, layout.rotate)?;
        self.draw_cells(&mut chart)
    }

    /// The label areas' sizes on `area`, and whether the column labels must turn.
    fn label_layout(&self, area: &Area) -> LabelLayout {
        // Label areas grow with the labels (words, relation names); the axis description
        // shares the area.
        let longest = |labels: &[String]| labels.iter().map(|l| l.chars().count() as u32).max();
        let y_area = (20 + LABEL_CHAR_PX * longest(&self.row_labels).unwrap_or(0)).max(38);
        // Column labels too wide for their cells are turned to run downwards.
        let col_chars = longest(&self.col_labels).unwrap_or(0);
        let cell = (area.dim_in_pixel().0.saturating_sub(y_area + 12)) / self.cols.max(1) as u32;
        let rotate = LABEL_CHAR_PX * col_chars + 4 > cell;
        let x_area = if rotate {
            24 + LABEL_CHAR_PX * col_chars
        } else {
            34
        };
        LabelLayout {
            x_area,
            y_area,
            rotate,
        }
    }

    /// The axes: a label per row and column (the column labels turned when `rotate`) and
    /// the axis descriptions; no mesh.
    fn draw_axes(&self, chart: &mut HeatmapChart, rotate: bool) -> DrawResult {
        let rows = self.rows as i32;
        let label = |labels: &[String], v: &SegmentValue<i32>, flip: bool| match v {
            SegmentValue::CenterOf(i) => {
                let i = if flip { rows - 1 - i } else { *i };
                labels.get(i as usize).cloned().unwrap_or_default()
            }
            _ => String::new(),
        };
        chart
            .configure_mesh()
            .disable_mesh()
            .x_labels(self.cols)
            .y_labels(self.rows)
            .x_label_formatter(&|v| {
                let text = label(&self.col_labels, v, false);
                if rotate {
                    // plotters centres x labels on their tick whatever their rotation, so a
                    // turned label would reach up into the plot: leading spaces (about as
                    // wide as the word) move the word below the tick.
                    format!("{}{text}", " ".repeat(2 * text.chars().count()))
                } else {
                    text
                }
            })
            .y_label_formatter(&|v| label(&self.row_labels, v, true))
            .x_desc(self.x_desc)
            .y_desc(self.y_desc)
            .label_style((FONT, 12))
            .x_label_style(if rotate {
                TextStyle::from((FONT, 12).into_font()).transform(FontTransform::Rotate90)
            } else {
                TextStyle::from((FONT, 12).into_font())
            })
            .axis_desc_style((FONT, 12))
            .draw()?;
        Ok(())
    }

    /// Every cell filled with its value's colour, row 0 at the top, and its value written in
    /// it when `annotate`.
    fn draw_cells(&self, chart: &mut HeatmapChart) -> DrawResult {
        let rows = self.rows as i32;
        let (lo, hi) = self.range;
        let cells = (0..self.rows).flat_map(|i| (0..self.cols).map(move |j| (i, j)));
        chart.draw_series(cells.clone().map(|(i, j)| {
            let y = rows - 1 - i as i32;
            let x = j as i32;
            let color = viridis((self.values)(i, j), lo, hi);
            Rectangle::new(
                [
                    (SegmentValue::Exact(x), SegmentValue::Exact(y)),
                    (SegmentValue::Exact(x + 1), SegmentValue::Exact(y + 1)),
                ],
                color.filled(),
            )
        }))?;
        if self.annotate {
            chart.draw_series(cells.map(|(i, j)| {
                let value = (self.values)(i, j);
                let dark = (value - lo) / (hi - lo) < 0.6;
                let style = TextStyle::from((FONT, 12).into_font())
                    .color(if dark { &WHITE } else { &BLACK })
                    .pos(Pos::new(HPos::Center, VPos::Center));
                let at = (
                    SegmentValue::CenterOf(j as i32),
                    SegmentValue::CenterOf(rows - 1 - i as i32),
                );
                Text::new(format!("{value:.2}"), at, style)
            }))?;
        }
        Ok(())
    }
}

/// Inputs of an attention-pattern grid.
pub struct PatternFigure<'a> {
    /// The figure's title.
    pub title: &'a str,
    /// Per grid row, per column: `[seq, seq]` attention on one probe sequence, row-major.
    /// In `attention.png` rows are layers and columns heads.
    pub patterns: &'a [Vec<Vec<f32>>],
    /// That sequence's tokens as axis labels ([`token_labels`]).
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
                let measures: [Panel; 4] = [
                    ("QK cosine", &layer.qk_cosine, (-1.0, 1.0)),
                    ("OV cosine", &layer.ov_cosine, (-1.0, 1.0)),
                    ("pattern JS distance", &layer.pattern_js, (0.0, 1.0)),
                    ("output CKA", &layer.output_cka, (0.0, 1.0)),
                ];
                for (m, (name, matrix, range)) in measures.into_iter().enumerate() {
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

/// `rollout.png`: the attention rollout after each layer ([`crate::circuits::rollout`],
/// `[layer][query][input position]`) on one probe sequence whose tokens label the axes
/// (`labels`, from [`token_labels`]), one heatmap per layer side by side, on the 0-1 scale
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
                annotate: false,
                x_desc: "input token",
                y_desc: "query token",
            }
            .draw(area)?;
        }
        Ok(())
    })
}

/// `relations.png`: per dependency relation (rows, labelled with the best fixed offset and
/// its score) and head (columns, `L0H0`...), the fraction of the relation's arcs the head
/// finds, dependent to head (top panel) and head to dependent (bottom), annotated.
pub fn relations(path: &Path, relations: &Relations) -> Result<(), FigureError> {
    let rows = relations.relations.len().max(1);
    let heads: Vec<String> = relations
        .relations
        .first()
        .map(|r| {
            r.heads
                .iter()
                .map(|h| HeadId::new(h.layer, h.head).to_string())
                .collect()
        })
        .unwrap_or_default();
    let cols = heads.len().max(1);
    let row_labels: Vec<String> = relations
        .relations
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
    let width = (60 + LABEL_CHAR_PX * label_width + 46 * cols as u32).max(520);
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
                values: &|i, j| score(&relations.relations[i].heads[j]),
                rows: relations.relations.len(),
                cols: heads.len(),
                row_labels: row_labels.clone(),
                col_labels: heads.clone(),
                range: (0.0, 1.0),
                annotate: cols <= 32,
                x_desc: "head",
                y_desc: "relation",
            }
            .draw(area)?;
        }
        Ok(())
    })
}

/// `patching.png`: per kind of minimal pair (one panel each), per head (rows) and position
/// (columns), the fraction of the clean answer's logit difference restored when the head's
/// clean output is put back at that position, with the whole head (every position) as the
/// last column; one colour scale per panel from the smallest value (or 0) to the largest
/// (or 1).
pub fn patching(path: &Path, patching: &Patching) -> Result<(), FigureError> {
    let sections: Vec<(PairKind, &PairPatching)> = patching.sections().collect();
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
                let (lo, hi) = value_range(rows, cols, &value);
                let mut col_labels: Vec<String> = (0..positions).map(|p| p.to_string()).collect();
                col_labels.push("all".to_string());
                Heatmap {
                    caption: format!(
                        "Restored logit difference, clean head output patched in ({} {} pairs)",
                        section.pairs,
                        kind.name()
                    ),
                    values: &value,
                    rows,
                    cols,
                    row_labels: section
                        .heads
                        .iter()
                        .map(|h| HeadId::new(h.layer, h.head).to_string())
                        .collect(),
                    col_labels,
                    range: (lo, hi),
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

/// The colour range of a restored-fraction heatmap: from the smallest value (or 0) to the
/// largest (or 1).
fn value_range(rows: usize, cols: usize, value: &dyn Fn(usize, usize) -> f64) -> (f64, f64) {
    let values = (0..rows).flat_map(|i| (0..cols).map(move |j| value(i, j)));
    values.fold((0.0, 1.0), |(lo, hi), v| (f64::min(lo, v), f64::max(hi, v)))
}

/// `paths.png`: per kind of pair and pair of layers (rows of panels), path patching from each
/// earlier head (rows) to each later head (columns) through its query, key and value (one
/// panel each), laid out as `composition.png` so the two can be read side by side; each
/// row's title gives the layer-to-layer values of every channel.
pub fn paths(path: &Path, patching: &Patching) -> Result<(), FigureError> {
    // (kind, section, sender layer, receiver layer), one row of panels each.
    let mut rows: Vec<(PairKind, &PairPatching, usize, usize)> = Vec::new();
    for (kind, section) in patching.sections() {
        let mut layer_pairs: Vec<(usize, usize)> = section
            .layer_paths
            .iter()
            .map(|p| (p.sender_layer, p.receiver_layer))
            .collect();
        layer_pairs.dedup();
        rows.extend(layer_pairs.into_iter().map(|(a, b)| (kind, section, a, b)));
    }
    let n_heads = rows.first().map_or(1, |(_, s, a, _)| {
        s.heads.iter().filter(|h| h.layer == *a).count()
    });
    let panel = (180 + 40 * n_heads as u32).min(520);
    render(
        path,
        (panel * 3, (panel + 24) * rows.len().max(1) as u32 + 30),
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
                        "{} pairs, all of L{a} -> all of L{b}: {}",
                        kind.name(),
                        layer_level.join(", ")
                    ),
                    (FONT, 13),
                )?;
                let panels = panels.split_evenly((1, 3));
                for (c, channel) in [PathChannel::Query, PathChannel::Key, PathChannel::Value]
                    .into_iter()
                    .enumerate()
                {
                    let value = |i: usize, j: usize| {
                        section
                            .paths
                            .iter()
                            .find(|p| {
                                p.sender == HeadId::new(*a, i)
                                    && p.receiver_layer == *b
                                    && p.receiver_head == Some(j)
                                    && p.channel == channel
                            })
                            .and_then(|p| p.restored)
                            .unwrap_or(0.0)
                    };
                    let range = value_range(n_heads, n_heads, &value);
                    Heatmap {
                        caption: format!(
                            "through {}, L{a} -> L{b}",
                            channel.short().to_uppercase()
                        ),
                        values: &value,
                        rows: n_heads,
                        cols: n_heads,
                        row_labels: labels.clone(),
                        col_labels: labels.clone(),
                        range,
                        annotate: n_heads <= 8,
                        x_desc: "later head (receives)",
                        y_desc: "earlier head (sends)",
                    }
                    .draw(&panels[c])?;
                }
            }
            Ok(())
        },
    )
}

/// A restored fraction to two decimals, `-` when undefined.
fn fmt_restored(restored: Option<f64>) -> String {
    restored.map_or_else(|| "-".to_string(), |r| format!("{r:.2}"))
}

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
    let largest = pairs
        .iter()
        .flat_map(|p| [&p.q, &p.k, &p.v])
        .flatten()
        .flatten()
        .copied()
        .fold(0.0, f64::max);
    let range = (0.0, if largest > 0.0 { largest } else { 1.0 });
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
    let n_heads = circuits.heads.iter().map(|h| h.head + 1).max().unwrap_or(1);
    let d_head = circuits.d_head.max(1) as f64;
    type Measure<'a> = (&'a str, fn(&HeadCircuits) -> f64, (f64, f64));
    let mut measures: Vec<Measure> =
        vec![("copying score of OV", |h| h.copying_score, (-1.0, 1.0))];
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
                    .find(|r| r.layer == l && r.head == h)
                    .map_or(0.0, value)
            };
            Heatmap {
                caption: name.to_string(),
                values: &cell,
                rows: n_layers,
                cols: n_heads,
                row_labels: layer_labels.clone(),
                col_labels: head_labels.clone(),
                range: *range,
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
    /// ([`crate::measures::norms::weight_norm_pairs`]); at most [`NORM_POINTS`] are drawn.
    pub pairs: Vec<(f64, f64)>,
}

/// At most `max` of `points`, the same ones on every call: all of them if they fit, else
/// those at `k * step mod n` for `k < max`, a prime `step` that does not divide `n` (a
/// spread that no row or column structure of the pairs lines up with, unlike the even
/// stride of [`crate::measures::trajectories::subsample`], which could keep a single key column).
fn spread_sample<T: Copy>(points: &[T], max: usize) -> Vec<T> {
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

/// A line chart of `series` (name, points) on `area`.
fn line_chart(
    area: &Area,
    caption: &str,
    (x_desc, y_desc): (&str, &str),
    series: &[(String, Vec<(f64, f64)>)],
    y_range: Option<(f64, f64)>,
    legend_at: SeriesLabelPosition,
) -> DrawResult {
    let points = series.iter().flat_map(|(_, p)| p.iter());
    let finite: Vec<&(f64, f64)> = points.filter(|(_, y)| y.is_finite()).collect();
    let x_max = finite.iter().map(|p| p.0).fold(1.0, f64::max);
    let (y_lo, y_hi) = y_range.unwrap_or_else(|| {
        let lo = finite.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
        let hi = finite.iter().map(|p| p.1).fold(f64::NEG_INFINITY, f64::max);
        if lo.is_finite() && hi > lo {
            (lo - 0.05 * (hi - lo), hi + 0.05 * (hi - lo))
        } else {
            (0.0, 1.0)
        }
    });
    let mut chart = ChartBuilder::on(area)
        .caption(caption, (FONT, 15))
        .margin(10)
        .x_label_area_size(36)
        .y_label_area_size(52)
        .build_cartesian_2d(0.0..x_max, y_lo..y_hi)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_desc(y_desc)
        .label_style((FONT, 12))
        .axis_desc_style((FONT, 12))
        .light_line_style(WHITE.mix(0.0))
        .draw()?;
    for (i, (name, points)) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let finite = points.iter().copied().filter(|(_, y)| y.is_finite());
        chart
            .draw_series(LineSeries::new(finite, color.stroke_width(2)))?
            .label(name)
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 18, y)], color.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .position(legend_at)
        .label_font((FONT, 12))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.4))
        .draw()?;
    Ok(())
}

/// `divergence.png`: per layer, mean pairwise QK cosine, OV cosine and pattern JS distance
/// over the training snapshots.
pub fn divergence(path: &Path, points: &[DivergencePoint]) -> Result<(), FigureError> {
    let n_layers = points.iter().map(|p| p.layer + 1).max().unwrap_or(0);
    let curve = |value: fn(&DivergencePoint) -> f64| -> Vec<(String, Vec<(f64, f64)>)> {
        (0..n_layers)
            .map(|l| {
                let line = points
                    .iter()
                    .filter(|p| p.layer == l)
                    .map(|p| (p.step as f64, value(p)))
                    .collect();
                (format!("layer {l}"), line)
            })
            .collect()
    };
    render(path, (1260, 400), |root| {
        let panels = root.split_evenly((1, 3));
        line_chart(
            &panels[0],
            "QK circuits: mean pairwise cosine",
            ("step", "cosine"),
            &curve(|p| p.qk_cosine),
            Some((-0.1, 1.05)),
            SeriesLabelPosition::UpperRight,
        )?;
        line_chart(
            &panels[1],
            "OV circuits: mean pairwise cosine",
            ("step", "cosine"),
            &curve(|p| p.ov_cosine),
            Some((-0.1, 1.05)),
            SeriesLabelPosition::UpperRight,
        )?;
        line_chart(
            &panels[2],
            "Patterns: mean pairwise JS distance",
            ("step", "JS distance"),
            &curve(|p| p.pattern_js),
            Some((0.0, 1.0)),
            SeriesLabelPosition::UpperRight,
        )
    })
}

/// `trajectories.png`: each final head's score on its final role's pattern by step (top;
/// "mixed" heads follow their best final pattern), and the training loss (bottom).
pub fn trajectories(
    path: &Path,
    trajectories: &Trajectories,
    records: &[MetricsRecord],
) -> Result<(), FigureError> {
    let scores: Vec<(String, Vec<(f64, f64)>)> = trajectories
        .heads
        .iter()
        .map(|t| {
            let last = t.pattern_scores.last().cloned().unwrap_or_default();
            let best = last
                .iter()
                .max_by(|a, b| a.1.total_cmp(b.1))
                .map(|(name, _)| name.clone())
                .unwrap_or_default();
            let pattern = t
                .roles
                .last()
                .filter(|r| last.contains_key(*r))
                .unwrap_or(&best);
            let line = t
                .steps
                .iter()
                .zip(&t.pattern_scores)
                .map(|(&step, s)| (step as f64, s.get(pattern).copied().unwrap_or(f64::NAN)))
                .collect();
            (format!("L{} H{}: {pattern}", t.layer, t.head), line)
        })
        .collect();
    let loss = vec![(
        "train loss".to_string(),
        records.iter().map(|r| (r.step as f64, r.loss)).collect(),
    )];
    render(path, (900, 700), |root| {
        let panels = root.split_evenly((2, 1));
        line_chart(
            &panels[0],
            "Score on the final role's pattern, by snapshot",
            ("step", "mean attention"),
            &scores,
            Some((0.0, 1.05)),
            SeriesLabelPosition::LowerRight,
        )?;
        line_chart(
            &panels[1],
            "Training loss",
            ("step", "loss"),
            &loss,
            None,
            SeriesLabelPosition::UpperRight,
        )
    })
}

/// `ablation.png`: per head, the eval token accuracy lost under zero, mean and resample
/// ablation, three bars side by side in the head's layer colour (darkest: zero); a report
/// written before mean and resample ablation existed shows the zero bars alone.
pub fn ablation(path: &Path, heads: &[HeadRecord]) -> Result<(), FigureError> {
    let width = (240 + 60 * heads.len() as u32).max(480);
    render(path, (width, 380), |root| {
        // Per head: zero, mean, resample, in points (NaN where not measured).
        let drops: Vec<[f64; 3]> = heads
            .iter()
            .map(|h| {
                let or_nan = |d: Option<f64>| d.map_or(f64::NAN, |d| d * 100.0);
                [
                    h.ablation_drop * 100.0,
                    or_nan(h.mean_ablation_drop),
                    or_nan(h.resample_ablation_drop),
                ]
            })
            .collect();
        let values = drops.iter().flatten().copied().filter(|d| d.is_finite());
        let hi = values.clone().fold(1.0, f64::max) * 1.1;
        let lo = values.fold(0.0, f64::min) * 1.1;
        let n = heads.len() as f64;
        let mut chart = ChartBuilder::on(root)
            .caption(
                "Accuracy lost when one head is ablated: zero, mean, resample (points)",
                (FONT, 15),
            )
            .margin(10)
            .x_label_area_size(36)
            .y_label_area_size(52)
            .build_cartesian_2d(0.0..n, lo..hi)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(heads.len() * 2 + 1)
            .x_label_formatter(&|x| {
                // Labels at each head's centre only.
                let i = x.floor() as usize;
                let centre = (x - x.floor() - 0.5).abs() < 1e-6;
                match heads.get(i) {
                    Some(h) if centre => HeadId::new(h.layer, h.head).to_string(),
                    _ => String::new(),
                }
            })
            .y_desc("accuracy drop (points)")
            .y_label_formatter(&|v| format!("{v:.1}"))
            .light_line_style(WHITE.mix(0.0))
            .label_style((FONT, 12))
            .axis_desc_style((FONT, 12))
            .draw()?;
        // Kinds left to right, each a third of the head's slot less a margin.
        const SHADES: [f64; 3] = [1.0, 0.6, 0.3];
        for (kind, shade) in SHADES.iter().enumerate() {
            chart.draw_series(heads.iter().zip(&drops).enumerate().filter_map(
                |(i, (h, drop))| {
                    let drop = drop[kind];
                    let left = i as f64 + 0.1 + kind as f64 * 0.8 / 3.0;
                    drop.is_finite().then(|| {
                        Rectangle::new(
                            [(left, 0.0), (left + 0.8 / 3.0 - 0.02, drop)],
                            Palette99::pick(h.layer).mix(*shade).filled(),
                        )
                    })
                },
            ))?;
        }
        Ok(())
    })
}

/// `pruning.png`: eval token accuracy as heads are removed, in both orders, with the
/// line the accuracy may not cross (full model minus the tolerance).
pub fn pruning(path: &Path, pruning: &Pruning) -> Result<(), FigureError> {
    let curve = |curve: &PruneCurve| -> Vec<(f64, f64)> {
        std::iter::once((0.0, pruning.base_token_acc * 100.0))
            .chain(
                curve
                    .steps
                    .iter()
                    .map(|s| (s.heads_removed as f64, s.token_acc * 100.0)),
            )
            .collect()
    };
    let total = pruning.total_heads as f64;
    let floor = (pruning.base_token_acc - pruning.tolerance) * 100.0;
    let series = [
        (
            format!(
                "ranked by single-head drop ({} removable)",
                pruning.ranked.removable
            ),
            curve(&pruning.ranked),
        ),
        (
            format!("greedy ({} removable)", pruning.greedy.removable),
            curve(&pruning.greedy),
        ),
        (
            format!("full model - {:.1} points", pruning.tolerance * 100.0),
            vec![(0.0, floor), (total, floor)],
        ),
    ];
    render(path, (720, 420), |root| {
        line_chart(
            root,
            "Pruning heads at test time: eval token accuracy as heads are removed",
            ("heads removed", "eval token accuracy (%)"),
            &series,
            Some((0.0, 101.0)),
            SeriesLabelPosition::LowerLeft,
        )
    })
}

/// `training.png`: training and eval loss (log scale), and eval accuracy, by step.
pub fn training(path: &Path, records: &[MetricsRecord]) -> Result<(), FigureError> {
    render(path, (1000, 380), |root| {
        let panels = root.split_evenly((1, 2));
        let series = |name: &str, value: fn(&MetricsRecord) -> Option<f64>| {
            let points: Vec<(f64, f64)> = records
                .iter()
                .filter_map(|r| Some((r.step as f64, value(r)?)))
                .collect();
            (name.to_string(), points)
        };
        let loss = [
            series("train loss", |r| Some(r.loss)),
            series("eval loss", |r| r.eval_loss),
        ];
        let x_max = records.iter().map(|r| r.step as f64).fold(1.0, f64::max);
        let positive: Vec<f64> = loss
            .iter()
            .flat_map(|(_, p)| p.iter().map(|q| q.1))
            .filter(|y| y.is_finite() && *y > 0.0)
            .collect();
        let lo = positive.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = positive.iter().copied().fold(0.0, f64::max);
        let (lo, hi) = if lo.is_finite() && hi > lo {
            (lo * 0.8, hi * 1.25)
        } else {
            (1e-3, 10.0)
        };
        let mut chart = ChartBuilder::on(&panels[0])
            .caption("Loss", (FONT, 15))
            .margin(10)
            .x_label_area_size(36)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..x_max, (lo..hi).log_scale())?;
        chart
            .configure_mesh()
            .x_desc("step")
            .x_label_formatter(&|v| format!("{v:.0}"))
            .y_desc("cross-entropy (log scale)")
            .y_label_formatter(&|v| format!("{v:.3}"))
            .label_style((FONT, 12))
            .axis_desc_style((FONT, 12))
            .light_line_style(WHITE.mix(0.0))
            .draw()?;
        for (i, (name, points)) in loss.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            let points = points.iter().copied().filter(|(_, y)| *y > 0.0);
            chart
                .draw_series(LineSeries::new(points, color.stroke_width(2)))?
                .label(name)
                .legend(move |(x, y)| {
                    PathElement::new([(x, y), (x + 18, y)], color.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .label_font((FONT, 12))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.4))
            .draw()?;
        line_chart(
            &panels[1],
            "Eval accuracy",
            ("step", "fraction right"),
            &[
                series("token accuracy", |r| r.eval_token_acc),
                series("sequence accuracy", |r| r.eval_seq_acc),
            ],
            Some((0.0, 1.02)),
            SeriesLabelPosition::LowerRight,
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_sampling_is_deterministic_distinct_and_spread() {
        let points: Vec<usize> = (0..10_000).collect();
        let picked = spread_sample(&points, NORM_POINTS);
        assert_eq!(picked, spread_sample(&points, NORM_POINTS));
        assert_eq!(picked.len(), NORM_POINTS);
        let distinct: std::collections::BTreeSet<_> = picked.iter().collect();
        assert_eq!(distinct.len(), NORM_POINTS);
        // Pairs of 10 x 10 attention rows: every key column is drawn, not one.
        let columns: std::collections::BTreeSet<_> = picked.iter().map(|i| i % 10).collect();
        assert_eq!(columns.len(), 10);
        assert_eq!(spread_sample(&points[..5], NORM_POINTS), points[..5]);
    }

    #[test]
    fn a_figure_too_large_to_hold_is_refused_before_drawing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ablation.png");
        // 46 px per bar: 20000 heads make a 920240 x 380 canvas, 350 M pixels.
        let heads: Vec<HeadRecord> = (0..20_000)
            .map(|h| HeadRecord {
                layer: 0,
                head: h,
                entropy: 0.0,
                confidence: 1.0,
                mean_distance: 0.0,
                pattern_scores: Default::default(),
                ablation_drop: 0.0,
                role: "mixed".into(),
                copying_score: 0.0,
                full_copying_score: None,
                qk_effective_rank: 0.0,
                ov_effective_rank: 0.0,
                direct_logit_attribution: 0.0,
                gradient_importance: 0.0,
                mean_value_norm: 0.0,
                mean_weighted_norm: 0.0,
                norm_weight_correlation: None,
                task_target_score: None,
                relation_scores: None,
                mean_ablation_drop: None,
                resample_ablation_drop: None,
            })
            .collect();
        let error = ablation(&path, &heads).unwrap_err();
        assert!(
            error.to_string().starts_with(&format!(
                "cannot draw {}: 1200240 x 380 pixels",
                path.display()
            )),
            "{error}"
        );
        assert!(!path.exists());
    }
}
