//! The sweep report's figures: for one number, every grid point's seeds as dots with the
//! mean and its 95% confidence interval beside them, so a reader sees the spread and not
//! only the average. Drawn with `inspect`'s figure code (same font, same PNG writer).

use std::path::Path;

use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use report::draw::backend::FigureBackend;
use report::draw::figures::{Area, DrawResult, FONT, FigureError, render, tick_label};
use run::units::Unit;

use crate::report::aggregate::{PointReport, RelationAcrossSeeds};
use crate::report::collect::{Number, RunRow};
use crate::stats::{Estimate, EstimateJson};

/// Draws `number`'s values per grid point (`points`: name and done runs) into `path`, its
/// unit on the value axis.
pub fn distribution(
    path: &Path,
    number: &Number,
    x_desc: &str,
    points: &[(&str, Vec<&RunRow>)],
) -> Result<(), FigureError> {
    let width = (160 + 125 * points.len().max(1)).clamp(520, 4000) as u32;
    render(path, (width, 440), |area| {
        draw(area, number, x_desc, points)
    })
}

/// Whether `number` is an accuracy, a fraction that cannot leave 0 to 1, whose axis stays
/// within it (a drop or a restored share can).
fn is_accuracy(number: &Number) -> bool {
    number.unit == Unit::Fraction
        && (number.key.ends_with("_acc") || number.key.starts_with("acc_"))
}

/// The chart a distribution is drawn on: grid points across (point `i` at `x = i`), values
/// up.
type DistributionChart<'a, 'b> =
    ChartContext<'a, FigureBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// Draws `number`'s values per grid point on `area`, one column per point.
fn draw(area: &Area, number: &Number, x_desc: &str, points: &[(&str, Vec<&RunRow>)]) -> DrawResult {
    let values = values_per_point(points, number.key);
    let (lo, hi) = value_range(&values);
    let pad = ((hi - lo) * 0.08).max(1e-3);
    // An accuracy's axis (and an interval drawn on it) ends at 0 and 1.
    let (lo, hi) = match is_accuracy(number) {
        true => ((lo - pad).max(0.0), (hi + pad).min(1.0)),
        false => (lo - pad, hi + pad),
    };
    let n = points.len().max(1) as f64;
    let mut chart = ChartBuilder::on(area)
        .caption(
            format!("{}: every seed, mean and 95% interval", number.title),
            (FONT, 16),
        )
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(-0.5..n - 0.5, lo..hi)?;
    let labels: Vec<String> = points.iter().map(|(name, _)| short(name)).collect();
    draw_axes(&mut chart, (&number.header(), x_desc), &labels, (11, 12))?;
    for (i, values) in values.iter().enumerate() {
        draw_column(&mut chart, i as f64, values)?;
    }
    Ok(())
}

/// Per grid point, `key`'s value in each of its runs that has it.
fn values_per_point(points: &[(&str, Vec<&RunRow>)], key: &str) -> Vec<Vec<f64>> {
    points
        .iter()
        .map(|(_, rows)| {
            rows.iter()
                .filter_map(|r| r.numbers.get(key))
                .copied()
                .collect()
        })
        .collect()
}

/// The smallest and largest of `values` and of their means' intervals; (0, 1) when there
/// are no values.
fn value_range(values: &[Vec<f64>]) -> (f64, f64) {
    // The axis spans every value and every interval.
    let mut all: Vec<f64> = values.iter().flatten().copied().collect();
    for e in values.iter().filter_map(|v| Estimate::of(v)) {
        if e.half_width.is_finite() {
            all.extend([e.mean - e.half_width, e.mean + e.half_width]);
        }
    }
    let (mut lo, mut hi) = all
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(*v), hi.max(*v))
        });
    if all.is_empty() {
        (lo, hi) = (0.0, 1.0);
    }
    (lo, hi)
}

/// The axes: each grid point's short name (`labels`) under its column, `y_desc` up the
/// side, text at `sizes` (tick labels, axis description).
fn draw_axes(
    chart: &mut DistributionChart,
    (y_desc, x_desc): (&str, &str),
    labels: &[String],
    (label_size, desc_size): (u32, u32),
) -> DrawResult {
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(labels.len() + 1)
        .x_label_formatter(&|x| {
            let i = x.round();
            if (x - i).abs() < 1e-6 && i >= 0.0 {
                labels.get(i as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        // Whole numbers where the values are (steps), three significant digits otherwise.
        .y_label_formatter(&|v| tick_label(*v))
        .y_desc(y_desc)
        .x_desc(x_desc)
        .label_style((FONT, label_size))
        .axis_desc_style((FONT, desc_size))
        .draw()?;
    Ok(())
}

/// One grid point's column at `x`: its seeds' `values` as dots, their mean and 95% interval.
fn draw_column(chart: &mut DistributionChart, x: f64, values: &[f64]) -> DrawResult {
    // Seeds as dots spread over the left of the column (so equal values stay visible),
    // the mean and its interval on the right.
    chart.draw_series(values.iter().enumerate().map(|(j, v)| {
        let jitter = ((j * 7919) % 17) as f64 / 16.0;
        Circle::new((x - 0.3 + 0.25 * jitter, *v), 3, BLUE.mix(0.5).filled())
    }))?;
    if let Some(e) = Estimate::of(values) {
        let half = if e.half_width.is_nan() {
            0.0
        } else {
            e.half_width
        };
        draw_estimate(chart, x + 0.2, e.mean, half, BLACK, 5)?;
    }
    Ok(())
}

/// A mean at `x` as a dot of `radius` with its interval `mean ± half` as a bar, in `colour`.
fn draw_estimate(
    chart: &mut DistributionChart,
    x: f64,
    mean: f64,
    half: f64,
    colour: RGBColor,
    radius: u32,
) -> DrawResult {
    chart.draw_series(std::iter::once(PathElement::new(
        vec![(x, mean - half), (x, mean + half)],
        colour.stroke_width(2),
    )))?;
    chart.draw_series(std::iter::once(Circle::new(
        (x, mean),
        radius,
        colour.filled(),
    )))?;
    Ok(())
}

/// A grid point's label, short enough for an axis: values without their keys.
fn short(point: &str) -> String {
    point
        .split(' ')
        .map(|part| part.rsplit_once('=').map_or(part, |(_, v)| v))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `relations.png`: per relation and direction (one panel each), across grid points, the
/// seeds' best head's score with its 95% interval (black), the same on untrained models of
/// the same seeds (grey) and the best fixed offset's score (dashed): where the black line
/// leaves both, training made a head that tracks the relation.
pub fn relations(path: &Path, points: &[PointReport]) -> Result<(), FigureError> {
    // (relation, direction) in the first point's order.
    let panels: Vec<(String, &str)> = points
        .iter()
        .flat_map(|p| {
            p.relations
                .iter()
                .map(|r| (r.relation.clone(), r.direction))
        })
        .fold(Vec::new(), |mut seen, key| {
            if !seen.contains(&key) {
                seen.push(key);
            }
            seen
        });
    let columns = 2;
    let rows = panels.len().div_ceil(columns).max(1);
    let width = (300 + 60 * points.len() as u32).clamp(420, 900);
    render(
        path,
        (width * columns as u32, 260 * rows as u32 + 30),
        |root| {
            let (title, grid) = root.split_vertically(30);
            title.titled(
            "Best head per relation across grid points: trained (black), untrained (grey), best offset (dashed)",
            (FONT, 15),
        )?;
            let areas = grid.split_evenly((rows, columns));
            for ((relation, direction), area) in panels.iter().zip(&areas) {
                let series: Vec<Option<&RelationAcrossSeeds>> = points
                    .iter()
                    .map(|p| {
                        p.relations
                            .iter()
                            .find(|r| &r.relation == relation && r.direction == *direction)
                    })
                    .collect();
                relation_panel(area, relation, direction, points, &series)?;
            }
            Ok(())
        },
    )
}

/// One relation and direction across the grid points.
fn relation_panel(
    area: &Area,
    relation: &str,
    direction: &str,
    points: &[PointReport],
    series: &[Option<&RelationAcrossSeeds>],
) -> DrawResult {
    let n = points.len().max(1) as f64;
    let arrow = if direction == "dependent_to_head" {
        "dep -> head"
    } else {
        "head -> dep"
    };
    let mut chart = ChartBuilder::on(area)
        .caption(format!("{relation}, {arrow}"), (FONT, 13))
        .margin(8)
        .x_label_area_size(30)
        .y_label_area_size(40)
        .build_cartesian_2d(-0.5..n - 0.5, 0.0..1.0)?;
    let labels: Vec<String> = points.iter().map(|p| short(&p.point)).collect();
    draw_axes(&mut chart, ("score", "grid point"), &labels, (10, 11))?;
    type Pick = fn(&RelationAcrossSeeds) -> Option<&EstimateJson>;
    let lines: [(Pick, RGBColor, f64); 3] = [
        (
            |r| r.untrained_best_score.as_ref(),
            RGBColor(150, 150, 150),
            -0.08,
        ),
        (|r| Some(&r.baseline), RGBColor(90, 90, 200), 0.0),
        (|r| Some(&r.best_score), BLACK, 0.08),
    ];
    for (index, (pick, colour, shift)) in lines.into_iter().enumerate() {
        let estimates: Vec<(f64, &EstimateJson)> = series
            .iter()
            .enumerate()
            .filter_map(|(i, r)| Some((i as f64 + shift, pick((*r)?)?)))
            .collect();
        let path: Vec<(f64, f64)> = estimates.iter().map(|(x, e)| (*x, e.mean)).collect();
        if index == 1 {
            // The baseline, dashed.
            chart.draw_series(DashedLineSeries::new(path, 6, 4, colour.stroke_width(2)))?;
        } else {
            chart.draw_series(LineSeries::new(path, colour.stroke_width(2)))?;
        }
        for (x, e) in estimates {
            draw_estimate(&mut chart, x, e.mean, e.ci95.unwrap_or(0.0), colour, 3)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn estimate(mean: f64) -> EstimateJson {
        EstimateJson {
            n: 16,
            mean,
            ci95: Some(0.05),
        }
    }

    /// Two grid points, one relation in both directions: the figure is drawn, as PNG and
    /// as SVG with the panels' captions as text.
    #[test]
    fn the_relations_figure_draws_every_relation_and_direction() {
        let point = |name: &str, score: f64| {
            let relations = ["dependent_to_head", "head_to_dependent"]
                .into_iter()
                .map(|direction| RelationAcrossSeeds {
                    relation: "dobj".to_string(),
                    direction,
                    best_score: estimate(score),
                    baseline: estimate(0.7),
                    baseline_offset: -2,
                    beats_baseline: 3,
                    untrained_beats_baseline: Some(0),
                    untrained_best_score: Some(estimate(0.3)),
                    drop_on_relation: None,
                    drop_elsewhere: None,
                    resample_drop_on_relation: None,
                    resample_drop_elsewhere: None,
                    loss_rise_on_relation: None,
                    loss_rise_elsewhere: None,
                    resample_loss_rise_on_relation: None,
                    resample_loss_rise_elsewhere: None,
                    resample_loss_rise_difference: None,
                    of: 16,
                    best_layers: BTreeMap::new(),
                })
                .collect();
            PointReport::with_relations(name, 16, relations)
        };
        let points = [
            point("g task.selection=0.0", 0.4),
            point("g task.selection=1.0", 0.9),
        ];
        let dir = tempfile::tempdir().unwrap();
        relations(&dir.path().join("relations.png"), &points).unwrap();
        // A PNG's signature, then its IHDR chunk: width and height, big-endian.
        let bytes = std::fs::read(dir.path().join("relations.png")).unwrap();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
        let size = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap());
        let (width, height) = (size(16), size(20));
        assert!(width >= 800 && height >= 250, "{width}x{height}");
        relations(&dir.path().join("relations.svg"), &points).unwrap();
        let svg = std::fs::read_to_string(dir.path().join("relations.svg")).unwrap();
        assert!(
            svg.contains("dobj, dep -&gt; head") && svg.contains("dobj, head -&gt; dep"),
            "{svg}"
        );
    }
}
