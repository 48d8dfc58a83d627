//! What every figure is drawn with: the canvas ([`render`], PNG or SVG, size-checked), the
//! embedded font, the colour scale, token labels, and the two shapes most figures are made of
//! (a labelled heatmap and a line chart).

use std::error::Error;
use std::path::{Path, PathBuf};
use std::sync::Once;

use plotters::coord::Shift;
use plotters::coord::ranged1d::{KeyPointHint, NoDefaultFormatting, ValueFormatter};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::{FontStyle, FontTransform, register_font};

use crate::draw::backend::FigureBackend;

/// What a drawing step returns; plotters' errors are boxed.
pub type DrawResult = Result<(), Box<dyn Error>>;

/// The drawing area a figure draws on: a bitmap or an SVG document ([`FigureBackend`]).
pub type Area<'a> = DrawingArea<FigureBackend<'a>, Shift>;

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
pub(crate) fn register_fonts() {
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

/// The colour of a cell with no number (NaN or infinite): a light grey, which viridis never
/// reaches.
pub(crate) const NO_VALUE: RGBColor = RGBColor(215, 215, 215);

/// Viridis colour of `value` in `[lo, hi]` (clamped); [`NO_VALUE`] for a value that is not a
/// number, and the low end for an empty or undefined range (plotters' colour map panics on
/// NaN).
pub(crate) fn viridis(value: f64, lo: f64, hi: f64) -> RGBColor {
    if !value.is_finite() {
        return NO_VALUE;
    }
    let span = hi - lo;
    let t = if span > 0.0 && span.is_finite() {
        ((value - lo) / span).clamp(0.0, 1.0)
    } else {
        0.0
    };
    ViridisRGB.get_color(t as f32)
}

/// How a figure's values turn into colours: one convention for every figure and page (the
/// book's Colours page, docs/colours.md; `embed/page.js` holds the pages' half).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ColourScale {
    /// Viridis, brighter is more: attention, scores, similarities (yellow: the same).
    More,
    /// Viridis reversed, brighter is less: a distance, so that yellow still means "the same"
    /// beside a similarity.
    Less,
    /// Signed values: white at 0, blue above it (restores, gains, B higher than A), red
    /// below; the range symmetric about 0.
    Signed,
}

/// [`ColourScale::Signed`]'s end for +1 (`#2166ac`, ColorBrewer's RdBu).
pub(crate) const SIGNED_POSITIVE: RGBColor = RGBColor(33, 102, 172);
/// [`ColourScale::Signed`]'s end for -1 (`#b2182b`).
pub(crate) const SIGNED_NEGATIVE: RGBColor = RGBColor(178, 24, 43);

impl ColourScale {
    /// The colour of `value` on a scale from `lo` to `hi` ([`NO_VALUE`] for no number).
    pub(crate) fn colour(self, value: f64, lo: f64, hi: f64) -> RGBColor {
        match self {
            ColourScale::More => viridis(value, lo, hi),
            ColourScale::Less if value.is_finite() => viridis(hi + lo - value, lo, hi),
            ColourScale::Less => NO_VALUE,
            ColourScale::Signed => signed(value, lo.abs().max(hi.abs())),
        }
    }
}

/// `value` on a diverging scale from `-bound` (red) through 0 (white) to `bound` (blue),
/// clamped; [`NO_VALUE`] for no number.
fn signed(value: f64, bound: f64) -> RGBColor {
    if !value.is_finite() {
        return NO_VALUE;
    }
    let t = match bound > 0.0 && bound.is_finite() {
        true => (value.abs() / bound).min(1.0),
        false => 0.0,
    };
    let end = if value >= 0.0 {
        SIGNED_POSITIVE
    } else {
        SIGNED_NEGATIVE
    };
    let fade = |c: u8| (255.0 + (f64::from(c) - 255.0) * t).round() as u8;
    RGBColor(fade(end.0), fade(end.1), fade(end.2))
}

/// The range of a [`ColourScale::Signed`] heatmap: symmetric about 0, at least -1 to 1 (a
/// restored fraction's full scale), wider where a value passes it.
pub(crate) fn signed_range(
    rows: usize,
    cols: usize,
    value: &dyn Fn(usize, usize) -> f64,
) -> (f64, f64) {
    let values = (0..rows).flat_map(|i| (0..cols).map(move |j| value(i, j)));
    let bound = values
        .filter(|v| v.is_finite())
        .fold(1.0f64, |m, v| m.max(v.abs()));
    (-bound, bound)
}

/// Width of one character of a 12 px label, rounded up, for sizing label areas.
pub(crate) const LABEL_CHAR_PX: u32 = 7;

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

/// A heatmap of `rows` x `cols` cells, row 0 at the top, with labelled rows and columns and a
/// colour bar at its right: the scale from `range`'s low end (bottom) to its high end (top),
/// both written, and `unit` under it, so a colour is read as a number, never guessed.
pub(crate) struct Heatmap<'a> {
    pub(crate) caption: String,
    pub(crate) values: &'a dyn Fn(usize, usize) -> f64,
    pub(crate) rows: usize,
    pub(crate) cols: usize,
    pub(crate) row_labels: Vec<String>,
    pub(crate) col_labels: Vec<String>,
    pub(crate) range: (f64, f64),
    /// How values turn into colours.
    pub(crate) scale: ColourScale,
    /// What the values are, in a few words (`attention weight`, `cosine`): the bar's label.
    pub(crate) unit: &'a str,
    /// What unrelated heads would score, marked on the bar (a line and its number), so a
    /// colour near it reads as nothing found; `None` where the measure has no such baseline.
    pub(crate) baseline: Option<f64>,
    /// Write each cell's value in it (small matrices only).
    pub(crate) annotate: bool,
    pub(crate) x_desc: &'a str,
    pub(crate) y_desc: &'a str,
}

/// The chart a [`Heatmap`] draws on: cell `j` spans `j..j + 1` across (row `i` spans
/// `rows - 1 - i..rows - i` down), its label at its centre. Continuous rather than plotters'
/// segmented coordinates, which put a one-cell axis at a point (a one-column heatmap drew
/// no cells).
pub(crate) type HeatmapChart<'a, 'b> =
    ChartContext<'a, FigureBackend<'b>, Cartesian2d<CellAxis, CellAxis>>;

/// A heatmap's axis: `0..cells`, cell `c` spanning `c..c + 1`, a key point (where a label
/// goes) at each cell's centre.
#[derive(Clone, Copy)]
pub(crate) struct CellAxis {
    cells: usize,
}

fn cell_axis(cells: usize) -> CellAxis {
    CellAxis {
        cells: cells.max(1),
    }
}

impl Ranged for CellAxis {
    type FormatOption = NoDefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let share = value / self.cells as f64;
        limit.0 + (f64::from(limit.1 - limit.0) * share).round() as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, _hint: Hint) -> Vec<f64> {
        (0..self.cells).map(|c| c as f64 + 0.5).collect()
    }

    fn range(&self) -> std::ops::Range<f64> {
        0.0..self.cells as f64
    }
}

/// Labels come from the heatmap's own formatters; this one is never shown.
impl ValueFormatter<f64> for CellAxis {
    fn format(value: &f64) -> String {
        value.to_string()
    }
}

/// The cell whose centre is `centre`, as [`cell_axis`] places it.
fn cell_at(centre: f64) -> usize {
    (centre - 0.5).round().max(0.0) as usize
}

/// How a heatmap's labels are laid out.
pub(crate) struct LabelLayout {
    /// Height of the column labels' area, in pixels.
    pub(crate) x_area: u32,
    /// Width of the row labels' area, in pixels.
    pub(crate) y_area: u32,
    /// Whether the column labels run downwards.
    pub(crate) rotate: bool,
}

/// Width of a heatmap's colour bar strip, in pixels: the bar, its numbers and its unit.
const COLOUR_BAR_PX: u32 = 52;

impl Heatmap<'_> {
    /// Draws the heatmap on `area`, its caption on top and its colour bar at its right.
    pub(crate) fn draw(&self, area: &Area) -> DrawResult {
        let width = area.dim_in_pixel().0;
        let (area, bar) = area.split_horizontally(width.saturating_sub(COLOUR_BAR_PX));
        let area = &area;
        let layout = self.label_layout(area);
        self.draw_colour_bar(&bar, layout.x_area)?;
        let mut chart = ChartBuilder::on(area)
            .caption(&self.caption, (FONT, 15))
            .margin(6)
            .x_label_area_size(layout.x_area)
            .y_label_area_size(layout.y_area)
            .build_cartesian_2d(cell_axis(self.cols), cell_axis(self.rows))?;
        self.draw_axes(&mut chart, layout.rotate)?;
        self.draw_cells(&mut chart)
    }

    /// The colour bar on `strip`, level with the cells (below the caption, above the column
    /// labels' `x_area`): the colours from the range's low end at the bottom to its high end
    /// at the top, the two ends written beside it, the unit turned along it.
    fn draw_colour_bar(&self, strip: &Area, x_area: u32) -> DrawResult {
        const STEPS: i32 = 48;
        let (lo, hi) = self.range;
        let height = strip.dim_in_pixel().1 as i32;
        let (top, bottom) = (32, (height - x_area as i32 - 8).max(40));
        let (left, right) = (4, 14);
        let span = (bottom - top) as f64;
        for step in 0..STEPS {
            // Step 0 at the bottom: the low end.
            let y1 = bottom - (span * f64::from(step) / f64::from(STEPS)) as i32;
            let y0 = bottom - (span * f64::from(step + 1) / f64::from(STEPS)) as i32;
            let t = (f64::from(step) + 0.5) / f64::from(STEPS);
            let colour = self.scale.colour(lo + t * (hi - lo), lo, hi);
            strip.draw(&Rectangle::new([(left, y0), (right, y1)], colour.filled()))?;
        }
        strip.draw(&Rectangle::new(
            [(left, top), (right, bottom)],
            BLACK.stroke_width(1),
        ))?;
        let number = TextStyle::from((FONT, 11).into_font());
        strip.draw_text(&bar_number(hi), &number, (right + 3, top - 5))?;
        strip.draw_text(&bar_number(lo), &number, (right + 3, bottom - 7))?;
        let level =
            |value: f64| bottom - (span * ((value - lo) / (hi - lo)).clamp(0.0, 1.0)) as i32;
        match self.baseline.filter(|b| b.is_finite() && hi > lo) {
            Some(baseline) => {
                let y = level(baseline);
                strip.draw(&PathElement::new(
                    [(left - 3, y), (right + 2, y)],
                    BLACK.stroke_width(2),
                ))?;
                strip.draw_text(&bar_number(baseline), &number, (right + 3, y - 6))?;
            }
            None if hi > lo => {
                let middle = (lo + hi) / 2.0;
                strip.draw_text(&bar_number(middle), &number, (right + 3, level(middle) - 6))?;
            }
            None => {}
        }
        let turned = TextStyle::from((FONT, 11).into_font()).transform(FontTransform::Rotate90);
        let unit_at = (right + 30, top + 6);
        strip.draw_text(
            &excerpt(self.unit, (bottom - top - 12).max(0) as usize / 6),
            &turned,
            unit_at,
        )?;
        Ok(())
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
        let label = |labels: &[String], v: &f64, flip: bool| {
            let cell = cell_at(*v);
            let i = if flip {
                self.rows.checked_sub(cell + 1)
            } else {
                Some(cell)
            };
            i.and_then(|i| labels.get(i)).cloned().unwrap_or_default()
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
        let rows = self.rows as f64;
        let (lo, hi) = self.range;
        let cells = (0..self.rows).flat_map(|i| (0..self.cols).map(move |j| (i, j)));
        chart.draw_series(cells.clone().map(|(i, j)| {
            // Row 0 at the top.
            let (x, y) = (j as f64, rows - 1.0 - i as f64);
            let color = self.scale.colour((self.values)(i, j), lo, hi);
            Rectangle::new([(x, y), (x + 1.0, y + 1.0)], color.filled())
        }))?;
        if self.annotate {
            chart.draw_series(cells.map(|(i, j)| {
                let value = (self.values)(i, j);
                // White on a dark cell, black on a light one, whatever the scale.
                let RGBColor(r, g, b) = self.scale.colour(value, lo, hi);
                let dark =
                    0.299 * f64::from(r) + 0.587 * f64::from(g) + 0.114 * f64::from(b) < 140.0;
                let style = TextStyle::from((FONT, 12).into_font())
                    .color(if dark { &WHITE } else { &BLACK })
                    .pos(Pos::new(HPos::Center, VPos::Center));
                let at = (j as f64 + 0.5, rows - 0.5 - i as f64);
                Text::new(format!("{value:.2}"), at, style)
            }))?;
        }
        Ok(())
    }
}

/// A colour bar's end, as short as it reads: `1`, `0.25`, `-0.5`, `1e-3`.
fn bar_number(value: f64) -> String {
    if value == value.round() && value.abs() < 1e4 {
        format!("{value:.0}")
    } else if value.abs() >= 0.01 && value.abs() < 1e4 {
        let text = format!("{value:.2}");
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        format!("{value:.0e}")
    }
}

/// `text` cut to `chars` characters (an ellipsis marking the cut).
fn excerpt(text: &str, chars: usize) -> String {
    match text.chars().count() <= chars {
        true => text.to_string(),
        false => text
            .chars()
            .take(chars.saturating_sub(1))
            .chain(['…'])
            .collect(),
    }
}

/// A line chart of `series` (name, points) on `area`, its legend in a strip below the plot
/// so it never covers a line ([`legend_below`]); a series of one point is drawn as a dot.
/// `y_range` fixes the y axis; `None` fits it to the data.
pub(crate) fn line_chart(
    area: &Area,
    caption: &str,
    (x_desc, y_desc): (&str, &str),
    series: &[(String, Vec<(f64, f64)>)],
    y_range: Option<(f64, f64)>,
) -> DrawResult {
    let points = series.iter().flat_map(|(_, p)| p.iter());
    let finite: Vec<&(f64, f64)> = points.filter(|(_, y)| y.is_finite()).collect();
    let x_max = finite.iter().map(|p| p.0).fold(1.0, f64::max);
    let (y_lo, y_hi) = y_range.unwrap_or_else(|| {
        let lo = finite.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
        let hi = finite.iter().map(|p| p.1).fold(f64::NEG_INFINITY, f64::max);
        if lo.is_finite() && hi > lo {
            (lo - 0.05 * (hi - lo), hi + 0.05 * (hi - lo))
        } else if lo.is_finite() {
            (lo - 0.5, lo + 0.5) // one value: centred
        } else {
            (0.0, 1.0)
        }
    });
    let (plot, colors) = series_legend_below(area, series)?;
    let mut chart = ChartBuilder::on(&plot)
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
    for ((_, points), color) in series.iter().zip(&colors) {
        let finite: Vec<(f64, f64)> = points
            .iter()
            .copied()
            .filter(|(_, y)| y.is_finite())
            .collect();
        draw_line(&mut chart, &finite, *color)?;
    }
    Ok(())
}

/// `points` as a line in `color`, or as a dot when there is only one (a line needs two).
pub(crate) fn draw_line<X, Y>(
    chart: &mut ChartContext<'_, FigureBackend<'_>, Cartesian2d<X, Y>>,
    points: &[(f64, f64)],
    color: RGBAColor,
) -> DrawResult
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    if let [point] = points {
        chart.draw_series(std::iter::once(Circle::new(*point, 4, color.filled())))?;
    } else {
        chart.draw_series(LineSeries::new(
            points.iter().copied(),
            color.stroke_width(2),
        ))?;
    }
    Ok(())
}

/// Each of `series`' colour (the palette in order) and the area left above their legend
/// ([`legend_below`]): what a chart of named lines draws on.
pub(crate) fn series_legend_below<'a>(
    area: &Area<'a>,
    series: &[(String, Vec<(f64, f64)>)],
) -> Result<(Area<'a>, Vec<RGBAColor>), Box<dyn Error>> {
    let colors: Vec<RGBAColor> = (0..series.len())
        .map(|i| Palette99::pick(i).to_rgba())
        .collect();
    let legend: Vec<(String, RGBAColor)> = series
        .iter()
        .zip(&colors)
        .map(|((name, _), color)| (name.clone(), *color))
        .collect();
    Ok((legend_below(area, &legend)?, colors))
}

/// Height of one row of a legend strip, in pixels.
const LEGEND_ROW_PX: u32 = 18;

/// Draws a legend of `entries` (name, colour) in a strip at the bottom of `area`, as many
/// rows as the names need, and returns the part above it for the chart: the legend sits off
/// the data wherever the lines run.
pub(crate) fn legend_below<'a>(
    area: &Area<'a>,
    entries: &[(String, RGBAColor)],
) -> Result<Area<'a>, Box<dyn Error>> {
    if entries.is_empty() {
        return Ok(area.clone());
    }
    let (width, height) = area.dim_in_pixel();
    // Each entry: a short line, a gap, the name, a gap to the next; wrapped at the width.
    let mut places = Vec::with_capacity(entries.len());
    let (mut x, mut row) = (60u32, 0u32);
    for (name, _) in entries {
        let entry = 24 + LABEL_CHAR_PX * name.chars().count() as u32 + 20;
        if x > 60 && x + entry > width {
            (x, row) = (60, row + 1);
        }
        places.push((x, row));
        x += entry;
    }
    let strip = (row + 1) * LEGEND_ROW_PX + 6;
    let (plot, legend) = area.split_vertically(height.saturating_sub(strip));
    for ((name, color), (x, row)) in entries.iter().zip(places) {
        let (x, y) = (x as i32, (row * LEGEND_ROW_PX + LEGEND_ROW_PX / 2) as i32);
        legend.draw(&PathElement::new(
            [(x, y), (x + 18, y)],
            color.stroke_width(2),
        ))?;
        legend.draw(&Text::new(
            name.clone(),
            (x + 24, y),
            TextStyle::from((FONT, 12).into_font()).pos(Pos::new(HPos::Left, VPos::Center)),
        ))?;
    }
    Ok(plot)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 54: every heatmap has a colour bar: in the strip at its right, the top step's
    /// colour (the high end) above the bottom step's (the low end), colours no cell has.
    #[test]
    fn a_heatmap_draws_its_colour_bar_low_end_at_the_bottom() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("map.png");
        let (width, height) = (300u32, 240u32);
        render(&path, (width, height), |area| {
            Heatmap {
                caption: "one value".into(),
                values: &|_, _| 0.5,
                rows: 2,
                cols: 2,
                row_labels: vec!["a".into(), "b".into()],
                col_labels: vec!["c".into(), "d".into()],
                range: (0.0, 1.0),
                scale: ColourScale::More,
                unit: "attention weight",
                baseline: Some(0.25),
                annotate: false,
                x_desc: "x",
                y_desc: "y",
            }
            .draw(area)
        })
        .unwrap();
        let rgb = read_rgb(&path);
        let rows_with = |colour: RGBColor| -> Vec<u32> {
            (0..height)
                .filter(|&y| {
                    (width - COLOUR_BAR_PX..width).any(|x| {
                        let at = 3 * (y * width + x) as usize;
                        rgb[at..at + 3] == [colour.0, colour.1, colour.2]
                    })
                })
                .collect()
        };
        let top = rows_with(viridis(47.5 / 48.0, 0.0, 1.0));
        let bottom = rows_with(viridis(0.5 / 48.0, 0.0, 1.0));
        assert!(!top.is_empty() && !bottom.is_empty(), "no colour bar");
        assert!(
            top.iter().max() < bottom.iter().min(),
            "the high end is not on top"
        );
    }

    /// A PNG's pixels, 3 bytes each, row by row.
    fn read_rgb(path: &Path) -> Vec<u8> {
        let decoder =
            png::Decoder::new(std::io::BufReader::new(std::fs::File::open(path).unwrap()));
        let mut reader = decoder.read_info().unwrap();
        let mut rgb = vec![0; reader.output_buffer_size().unwrap()];
        reader.next_frame(&mut rgb).unwrap();
        rgb
    }

    /// A heatmap of one column (a layer's patching of an imported model, one head of one
    /// layer) fills its cells: plotters' segmented axis once put a one-cell axis at a point,
    /// and the figure was empty. Row 0 is on top, and the cells fill most of the plot.
    #[test]
    fn a_heatmap_of_one_column_or_one_cell_draws_its_cells() {
        let dir = tempfile::tempdir().unwrap();
        let (width, height) = (300u32, 240u32);
        let colours = [0.0, 0.5, 1.0].map(|v| viridis(v, 0.0, 1.0));
        for rows in [1usize, 3] {
            let path = dir.path().join(format!("map-{rows}.png"));
            render(&path, (width, height), |area| {
                Heatmap {
                    caption: "one column".into(),
                    values: &|i, _| [0.0, 0.5, 1.0][i],
                    rows,
                    cols: 1,
                    row_labels: (0..rows).map(|i| format!("L{i}")).collect(),
                    col_labels: vec!["H0".into()],
                    range: (0.0, 1.0),
                    scale: ColourScale::More,
                    unit: "share",
                    baseline: None,
                    annotate: false,
                    x_desc: "head",
                    y_desc: "layer",
                }
                .draw(area)
            })
            .unwrap();
            let rgb = read_rgb(&path);
            // Pixels of `colour` left of the colour bar, as (count, mean row).
            let cells_of = |colour: RGBColor| {
                let at: Vec<u32> = (0..height)
                    .flat_map(|y| (0..width - COLOUR_BAR_PX).map(move |x| (x, y)))
                    .filter(|&(x, y)| {
                        let at = 3 * (y * width + x) as usize;
                        rgb[at..at + 3] == [colour.0, colour.1, colour.2]
                    })
                    .map(|(_, y)| y)
                    .collect();
                let mean = at.iter().map(|&y| f64::from(y)).sum::<f64>() / at.len().max(1) as f64;
                (at.len(), mean)
            };
            let drawn: Vec<(usize, f64)> = colours[..rows].iter().map(|&c| cells_of(c)).collect();
            let plot = (width - COLOUR_BAR_PX) as usize * height as usize;
            let filled: usize = drawn.iter().map(|d| d.0).sum();
            assert!(
                filled > plot / 4,
                "{rows} row(s): the cells fill {filled} of {plot} pixels"
            );
            assert!(drawn.iter().all(|d| d.0 > 0), "{rows} row(s): {drawn:?}");
            assert!(
                drawn.windows(2).all(|w| w[0].1 < w[1].1),
                "row 0 is not on top: {drawn:?}"
            );
        }
    }

    /// Issue 66, item 7: one convention. Signed values are white at 0, blue above (restores,
    /// gains, B higher) and red below, symmetric; a distance's scale is viridis reversed, so
    /// yellow is "the same" beside a similarity's.
    #[test]
    fn colour_scales_keep_one_convention() {
        let signed = ColourScale::Signed;
        assert_eq!(signed.colour(0.0, -1.0, 1.0), RGBColor(255, 255, 255));
        assert_eq!(signed.colour(1.0, -1.0, 1.0), SIGNED_POSITIVE);
        assert_eq!(signed.colour(-1.0, -1.0, 1.0), SIGNED_NEGATIVE);
        assert_eq!(signed.colour(3.0, -2.0, 2.0), SIGNED_POSITIVE, "clamped");
        assert_eq!(signed.colour(f64::NAN, -1.0, 1.0), NO_VALUE);
        // The range is symmetric about 0 and at least -1 to 1: -1e-3 is not its low end.
        let values = [[-1e-3, 0.4], [0.2, 0.9]];
        assert_eq!(signed_range(2, 2, &|i, j| values[i][j]), (-1.0, 1.0));
        assert_eq!(signed_range(1, 2, &|_, j| [1.5, -0.2][j]), (-1.5, 1.5));
        let (less, more) = (ColourScale::Less, ColourScale::More);
        assert_eq!(less.colour(0.0, 0.0, 1.0), more.colour(1.0, 0.0, 1.0));
        assert_eq!(less.colour(1.0, 0.0, 1.0), more.colour(0.0, 0.0, 1.0));
        assert_eq!(less.colour(f64::NAN, 0.0, 1.0), NO_VALUE);
    }

    #[test]
    fn a_value_that_is_no_number_gets_the_no_value_grey_not_a_panic() {
        assert_eq!(viridis(f64::NAN, 0.0, 1.0), NO_VALUE);
        assert_eq!(viridis(f64::INFINITY, 0.0, 1.0), NO_VALUE);
        assert_eq!(viridis(0.5, f64::NAN, 1.0), viridis(0.0, 0.0, 1.0));
        assert_eq!(viridis(0.5, 0.5, 0.5), viridis(0.0, 0.0, 1.0));
        assert_eq!(viridis(2.0, 0.0, 1.0), viridis(1.0, 0.0, 1.0));
        assert_ne!(viridis(1.0, 0.0, 1.0), NO_VALUE);
    }
}
