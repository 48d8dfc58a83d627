//! Divergence curves: how alike a layer's heads are at every training snapshot, as the mean
//! over pairs of heads of QK-circuit cosine, OV-circuit cosine and attention JS distance on
//! the probe batch. Heads that start identical (symmetric init) stay at cosine 1, distance 0
//! unless something breaks the symmetry; random init starts apart and moves.

use run::snapshot::{HeadTensorsByLayer, SnapshotError};
use std::fmt::Write as _;

use crate::load::context::MeasureContext;
use crate::load::probe::Probe;
use crate::measures::similarity::{LayerSimilarity, mean_off_diagonal};

/// One row of `divergence.csv`.
#[derive(Debug, Clone, PartialEq)]
pub struct DivergencePoint {
    /// Training step of the snapshot.
    pub step: usize,
    /// Layer index.
    pub layer: usize,
    /// Mean pairwise cosine similarity of the heads' QK circuits.
    pub qk_cosine: f64,
    /// Mean pairwise cosine similarity of the heads' OV circuits.
    pub ov_cosine: f64,
    /// Mean pairwise Jensen-Shannon distance of the heads' patterns on the probe batch.
    pub pattern_js: f64,
}

/// The divergence curve of every layer over the run's snapshots (empty when the run took
/// none, or the context has no run).
pub fn divergence(
    context: MeasureContext,
    probe: &Probe,
) -> Result<Vec<DivergencePoint>, SnapshotError> {
    let mut points = vec![];
    let Some(snapshots) = context.snapshots else {
        return Ok(points);
    };
    for (step, path) in snapshots.list() {
        let model = snapshots.model(&path)?;
        let weights = HeadTensorsByLayer::of(&model, true);
        for (layer, layer_probe) in probe.forward(&model).iter().enumerate() {
            let similarity = LayerSimilarity::measure(layer, &weights, layer_probe, false);
            points.push(DivergencePoint {
                step,
                layer,
                qk_cosine: mean_off_diagonal(&similarity.qk_cosine),
                ov_cosine: mean_off_diagonal(&similarity.ov_cosine),
                pattern_js: mean_off_diagonal(&similarity.pattern_js),
            });
        }
    }
    Ok(points)
}

/// The first line of `divergence.csv`.
const HEADER: &str = "step,layer,qk_cosine,ov_cosine,pattern_js";

/// `divergence.csv`: a header, then one row per snapshot and layer; `nan` for layers with
/// one head (no pairs).
pub fn to_csv(points: &[DivergencePoint]) -> String {
    let mut csv = format!("{HEADER}\n");
    for p in points {
        let value = |v: f64| {
            if v.is_nan() {
                "nan".to_string()
            } else {
                format!("{v:.6}")
            }
        };
        writeln!(
            csv,
            "{},{},{},{},{}",
            p.step,
            p.layer,
            value(p.qk_cosine),
            value(p.ov_cosine),
            value(p.pattern_js)
        )
        .expect("writing to a String");
    }
    csv
}

/// Reads what [`to_csv`] wrote (values to its six decimals); the error names the line.
pub fn from_csv(csv: &str) -> Result<Vec<DivergencePoint>, String> {
    let mut lines = csv.lines();
    match lines.next() {
        Some(HEADER) => {}
        other => return Err(format!("first line {other:?}, expected {HEADER:?}")),
    }
    lines
        .enumerate()
        .map(|(i, line)| {
            let bad = || {
                format!(
                    "line {}: {line:?} is not step,layer and three numbers",
                    i + 2
                )
            };
            let fields: Vec<&str> = line.split(',').collect();
            let [step, layer, qk, ov, js] = fields[..] else {
                return Err(bad());
            };
            let number = |f: &str| f.trim().parse::<f64>().map_err(|_| bad());
            Ok(DivergencePoint {
                step: step.trim().parse().map_err(|_| bad())?,
                layer: layer.trim().parse().map_err(|_| bad())?,
                qk_cosine: number(qk)?,
                ov_cosine: number(ov)?,
                pattern_js: number(js)?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(step: usize, layer: usize, qk: f64) -> DivergencePoint {
        DivergencePoint {
            step,
            layer,
            qk_cosine: qk,
            ov_cosine: 0.25,
            pattern_js: f64::NAN,
        }
    }

    #[test]
    fn csv_reads_back_what_it_wrote() {
        let points = vec![point(0, 0, 1.0), point(0, 1, -0.5), point(50, 0, 0.123456)];
        let read = from_csv(&to_csv(&points)).unwrap();
        assert_eq!(read.len(), 3);
        for (a, b) in points.iter().zip(&read) {
            assert_eq!((a.step, a.layer), (b.step, b.layer));
            assert_eq!(a.qk_cosine, b.qk_cosine);
            assert_eq!(a.ov_cosine, b.ov_cosine);
            assert!(b.pattern_js.is_nan(), "nan reads back as NaN");
        }
        assert_eq!(to_csv(&read), to_csv(&points));
    }

    #[test]
    fn csv_errors_name_the_line() {
        assert!(from_csv("step,layer\n").unwrap_err().contains("first line"));
        let bad = format!("{HEADER}\n0,0,1,1,0\n0,1,x,1,0\n");
        let error = from_csv(&bad).unwrap_err();
        assert!(error.starts_with("line 3:"), "{error}");
        assert!(from_csv(&format!("{HEADER}\n1,2,3\n")).is_err());
    }
}
