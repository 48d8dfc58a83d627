//! Figures over heads or steps: divergence and role trajectories through training,
//! ablation bars, pruning curves, and the training curves.

use std::path::Path;

use plotters::coord::combinators::BindKeyPoints;
use plotters::prelude::*;
use run::metrics::MetricsRecord;

use inspect::interventions::pruning::{PruneCurve, Pruning};
use inspect::measures::divergence::DivergencePoint;
use inspect::measures::heads::HeadRecord;
use inspect::measures::relations_over_training::RelationsOverTraining;
use inspect::measures::trajectories::Trajectories;

use super::canvas::{
    FONT, FigureError, draw_line, legend_below, line_chart, render, series_legend_below,
};

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
        )?;
        line_chart(
            &panels[1],
            "OV circuits: mean pairwise cosine",
            ("step", "cosine"),
            &curve(|p| p.ov_cosine),
            Some((-0.1, 1.05)),
        )?;
        line_chart(
            &panels[2],
            "Patterns: mean pairwise JS distance",
            ("step", "JS distance"),
            &curve(|p| p.pattern_js),
            Some((0.0, 1.0)),
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
            (format!("{}: {pattern}", t.id), line)
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
        )?;
        line_chart(
            &panels[1],
            "Training loss",
            ("step", "loss (nats)"),
            &loss,
            None,
        )
    })
}

/// `relations-over-training.png`: at every snapshot (log-scaled steps), the syntactic
/// attention figure and the positional one (each label's head, and its offset, chosen on the
/// development sentences and scored on the probe's: [`RelationsOverTraining`]), above the
/// training loss (every logged step) and the held-out loss (every evaluation).
pub fn relations_over_training(
    path: &Path,
    over: &RelationsOverTraining,
    records: &[MetricsRecord],
) -> Result<(), FigureError> {
    let figures = [
        (
            "heads: arcs found by each label's best head".to_string(),
            over.steps
                .iter()
                .map(|s| (s.step as f64, s.syntactic))
                .collect::<Vec<_>>(),
        ),
        (
            "offsets: arcs found by each label's best fixed offset".to_string(),
            over.steps
                .iter()
                .map(|s| (s.step as f64, s.positional))
                .collect(),
        ),
    ];
    let loss = vec![
        (
            "training loss".to_string(),
            records
                .iter()
                .map(|r| (r.step as f64, r.loss))
                .collect::<Vec<_>>(),
        ),
        (
            "held-out loss".to_string(),
            records
                .iter()
                .filter_map(|r| Some((r.step as f64, r.eval_loss?)))
                .collect::<Vec<_>>(),
        ),
    ];
    let x_max = figures[0]
        .1
        .iter()
        .chain(loss.iter().flat_map(|(_, points)| points))
        .map(|p| p.0)
        .fold(2.0, f64::max);
    render(path, (900, 700), |root| {
        let panels = root.split_evenly((2, 1));
        log_step_chart(
            &panels[0],
            "Syntactic attention by snapshot (chosen on EWT dev, scored on the probe)",
            "fraction of scored arcs",
            &figures,
            (0.0, 1.0),
            x_max,
        )?;
        let values: Vec<f64> = loss
            .iter()
            .flat_map(|(_, points)| points.iter().map(|p| p.1))
            .filter(|v| v.is_finite())
            .collect();
        let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let range = match lo.is_finite() && hi > lo {
            true => (lo - 0.05 * (hi - lo), hi + 0.05 * (hi - lo)),
            false => (0.0, 10.0),
        };
        log_step_chart(
            &panels[1],
            "Masked-LM loss",
            "nats per masked piece",
            &loss,
            range,
            x_max,
        )
    })
}

/// Lines over training steps on a log-scaled step axis from step 1 (early snapshots are
/// dense: the onset of syntax, where it comes, is early).
fn log_step_chart(
    area: &super::canvas::Area,
    caption: &str,
    y_desc: &str,
    series: &[(String, Vec<(f64, f64)>)],
    (y_lo, y_hi): (f64, f64),
    x_max: f64,
) -> super::canvas::DrawResult {
    let (plot, colors) = series_legend_below(area, series)?;
    let mut chart = ChartBuilder::on(&plot)
        .caption(caption, (FONT, 15))
        .margin(10)
        .x_label_area_size(36)
        .y_label_area_size(52)
        .build_cartesian_2d(
            (1.0..x_max)
                .log_scale()
                .with_key_points(log_ticks(1.0, x_max)),
            y_lo..y_hi,
        )?;
    chart
        .configure_mesh()
        .x_desc("step (log scale)")
        .x_label_formatter(&|v| tick_label(*v))
        .y_desc(y_desc)
        .label_style((FONT, 12))
        .axis_desc_style((FONT, 12))
        .light_line_style(WHITE.mix(0.0))
        .draw()?;
    for ((_, points), color) in series.iter().zip(&colors) {
        let points: Vec<(f64, f64)> = points
            .iter()
            .copied()
            .filter(|(x, y)| *x >= 1.0 && y.is_finite())
            .collect();
        draw_line(&mut chart, &points, *color)?;
    }
    Ok(())
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
                    or_nan(h.ablation_drop),
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
                    Some(h) if centre => h.id.to_string(),
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
                            Palette99::pick(h.id.layer).mix(*shade).filled(),
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
    let ranked = (
        format!(
            "ranked by single-head drop ({} removable)",
            pruning.ranked.removable
        ),
        curve(&pruning.ranked),
    );
    let greedy = pruning.greedy.as_ref().map(|greedy| {
        (
            format!("greedy ({} removable)", greedy.removable),
            curve(greedy),
        )
    });
    let floor = (
        format!("full model - {:.1} points", pruning.tolerance * 100.0),
        vec![(0.0, floor), (total, floor)],
    );
    let series: Vec<_> = std::iter::once(ranked)
        .chain(greedy)
        .chain([floor])
        .collect();
    render(path, (720, 420), |root| {
        line_chart(
            root,
            "Pruning heads at test time: eval token accuracy as heads are removed",
            ("heads removed", "eval token accuracy (%)"),
            &series,
            Some((0.0, 101.0)),
        )
    })
}

/// Tick values for a log axis over `lo..hi`: the 1, 2, 5 of each decade when at least three
/// fall inside, else every 1..9 (and the halves) of the decades, thinned to at most eight;
/// never two ticks that print the same ([`tick_label`]).
pub(crate) fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let in_range = |mantissas: &[f64]| -> Vec<f64> {
        let (first, last) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
        (first..=last)
            .flat_map(|k| mantissas.iter().map(move |m| m * 10f64.powi(k)))
            .filter(|v| (lo..=hi).contains(v))
            .collect()
    };
    let mut ticks = in_range(&[1.0, 2.0, 5.0]);
    if ticks.len() < 3 {
        ticks = in_range(&[1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]);
        let step = ticks.len().div_ceil(8).max(1);
        ticks = ticks.into_iter().step_by(step).collect();
    }
    ticks.dedup_by(|a, b| tick_label(*a) == tick_label(*b));
    ticks
}

/// A tick value to three significant digits, trailing zeros dropped: 0.8, 1.25, 20, and a
/// step count as a whole number (3200, never "3200.0").
pub fn tick_label(value: f64) -> String {
    if value == 0.0 || !value.is_finite() {
        return format!("{value}");
    }
    let decimals = (2 - value.abs().log10().floor() as i32).max(0) as usize;
    let text = format!("{value:.decimals$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
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
        let colors = [Palette99::pick(0).to_rgba(), Palette99::pick(1).to_rgba()];
        let legend: Vec<(String, RGBAColor)> = loss
            .iter()
            .zip(colors)
            .map(|((name, _), color)| (name.clone(), color))
            .collect();
        let plot = legend_below(&panels[0], &legend)?;
        let mut chart = ChartBuilder::on(&plot)
            .caption("Loss", (FONT, 15))
            .margin(10)
            .x_label_area_size(36)
            .y_label_area_size(60)
            .build_cartesian_2d(
                0.0..x_max,
                (lo..hi).log_scale().with_key_points(log_ticks(lo, hi)),
            )?;
        chart
            .configure_mesh()
            .x_desc("step")
            .x_label_formatter(&|v| format!("{v:.0}"))
            .y_desc("cross-entropy, nats (log scale)")
            .y_label_formatter(&|v| tick_label(*v))
            .label_style((FONT, 12))
            .axis_desc_style((FONT, 12))
            .light_line_style(WHITE.mix(0.0))
            .draw()?;
        for ((_, points), color) in loss.iter().zip(colors) {
            let points: Vec<(f64, f64)> =
                points.iter().copied().filter(|(_, y)| *y > 0.0).collect();
            draw_line(&mut chart, &points, color)?;
        }
        line_chart(
            &panels[1],
            "Eval accuracy",
            ("step", "fraction right"),
            &[
                series("token accuracy", |r| r.eval_token_acc),
                series("sequence accuracy", |r| r.eval_seq_acc),
            ],
            Some((0.0, 1.02)),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::draw::figures::circuits::{NORM_POINTS, spread_sample};
    use model::HeadId;

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
                id: HeadId::new(0, h),
                entropy: 0.0,
                confidence: 1.0,
                mean_distance: 0.0,
                pattern_scores: Default::default(),
                ablation_drop: Some(0.0),
                role: "mixed".into(),
                copying_score: 0.0,
                full_copying_score: None,
                qk_effective_rank: 0.0,
                ov_effective_rank: 0.0,
                direct_logit_attribution: Some(0.0),
                gradient_importance: Some(0.0),
                mean_value_norm: 0.0,
                mean_weighted_norm: 0.0,
                norm_weight_correlation: None,
                task_target_score: None,
                relation_scores: None,
                mean_ablation_drop: None,
                resample_ablation_drop: None,
                attends_to: None,
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

    #[test]
    fn log_ticks_are_round_distinct_and_inside() {
        // Four decades: the 1, 2, 5 of each.
        let labels =
            |lo, hi| -> Vec<String> { log_ticks(lo, hi).into_iter().map(tick_label).collect() };
        assert_eq!(
            labels(0.01, 20.0),
            [
                "0.01", "0.02", "0.05", "0.1", "0.2", "0.5", "1", "2", "5", "10", "20"
            ]
        );
        // Less than a decade (a short run's loss): finer steps, still round and distinct.
        assert_eq!(labels(1.3, 2.9), ["1.5", "2", "2.5"]);
        let labels: Vec<String> = log_ticks(0.8, 1.25).into_iter().map(tick_label).collect();
        assert!(labels.len() >= 2, "{labels:?}");
        let mut distinct = labels.clone();
        distinct.dedup();
        assert_eq!(distinct, labels);
        assert_eq!(
            [0.8, 1.25, 20.0, 0.0123].map(tick_label),
            ["0.8", "1.25", "20", "0.0123"]
        );
        // Steps (a sweep's steps_to_99 axis) are whole numbers, never "3200.0".
        assert_eq!(
            [3200.0, 12800.0, 250.0].map(tick_label),
            ["3200", "12800", "250"]
        );
    }

    #[test]
    fn a_run_with_one_evaluation_gets_a_dot_above_the_legend() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("training.png");
        let record = MetricsRecord {
            step: 10,
            loss: 1.5,
            lr: 1e-3,
            tokens_per_s: 0.0,
            elapsed_s: 0.0,
            eval_loss: Some(1.4),
            eval_token_acc: Some(0.5),
            eval_seq_acc: Some(0.1),
        };
        training(&path, &[record]).unwrap();
        let mut reader =
            png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&path).unwrap()))
                .read_info()
                .unwrap();
        let mut pixels = vec![0; reader.output_buffer_size().unwrap()];
        let info = reader.next_frame(&mut pixels).unwrap();
        let (width, height) = (info.width as usize, info.height as usize);
        let token = Palette99::pick(0).to_rgba();
        // The accuracy panel (right half), above its legend strip (the bottom 30 pixels).
        let dot = (0..height - 30)
            .flat_map(|y| (width / 2..width).map(move |x| (x, y)))
            .filter(|&(x, y)| {
                let at = (y * width + x) * 3;
                pixels[at..at + 3] == [token.0, token.1, token.2]
            })
            .count();
        assert!(
            dot >= 9,
            "the one token-accuracy point is drawn: {dot} pixels"
        );
    }
}
