//! Figures over heads or steps: divergence and role trajectories through training,
//! ablation bars, pruning curves, and the training curves.

use std::path::Path;

use model::HeadId;
use plotters::prelude::*;
use run::metrics::MetricsRecord;

use crate::interventions::pruning::{PruneCurve, Pruning};
use crate::measures::divergence::DivergencePoint;
use crate::measures::heads::HeadRecord;
use crate::measures::trajectories::Trajectories;

use super::canvas::{FONT, FigureError, line_chart, render};

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
    use crate::draw::figures::circuits::{NORM_POINTS, spread_sample};

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
