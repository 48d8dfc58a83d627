//! The sweep report's figures: for one number, every grid point's seeds as dots with the
//! mean and its 95% confidence interval beside them, so a reader sees the spread and not
//! only the average. Drawn with `inspect`'s figure code (same font, same PNG writer).

use std::path::Path;

use inspect::draw::backend::FigureBackend;
use inspect::draw::figures::{Area, DrawResult, FONT, FigureError, render};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use crate::report::collect::RunRow;
use crate::stats::Estimate;

/// Draws `key`'s values per grid point (`points`: name and done runs) into `path`.
pub fn distribution(
    path: &Path,
    title: &str,
    key: &str,
    points: &[(&str, Vec<&RunRow>)],
) -> Result<(), FigureError> {
    let width = (160 + 125 * points.len().max(1)).clamp(520, 4000) as u32;
    render(path, (width, 420), |area| draw(area, title, key, points))
}

/// The chart a distribution is drawn on: grid points across (point `i` at `x = i`), values
/// up.
type DistributionChart<'a, 'b> =
    ChartContext<'a, FigureBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// Draws `key`'s values per grid point on `area`, one column per point.
fn draw(area: &Area, title: &str, key: &str, points: &[(&str, Vec<&RunRow>)]) -> DrawResult {
    let values = values_per_point(points, key);
    let (lo, hi) = value_range(&values);
    let pad = ((hi - lo) * 0.08).max(1e-3);
    let n = points.len().max(1) as f64;
    let mut chart = ChartBuilder::on(area)
        .caption(
            format!("{title}: every seed, mean and 95% interval"),
            (FONT, 16),
        )
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(-0.5..n - 0.5, (lo - pad)..(hi + pad))?;
    draw_axes(&mut chart, title, points)?;
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

/// The axes: each grid point's short name under its column, `title` up the side.
fn draw_axes(
    chart: &mut DistributionChart,
    title: &str,
    points: &[(&str, Vec<&RunRow>)],
) -> DrawResult {
    let labels: Vec<String> = points.iter().map(|(name, _)| short(name)).collect();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(points.len() + 1)
        .x_label_formatter(&|x| {
            let i = x.round();
            if (x - i).abs() < 1e-6 && i >= 0.0 {
                labels.get(i as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .y_desc(title)
        .label_style((FONT, 11))
        .axis_desc_style((FONT, 12))
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
        let at = x + 0.2;
        chart.draw_series(std::iter::once(PathElement::new(
            vec![(at, e.mean - half), (at, e.mean + half)],
            BLACK.stroke_width(2),
        )))?;
        chart.draw_series(std::iter::once(Circle::new(
            (at, e.mean),
            5,
            BLACK.filled(),
        )))?;
    }
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
