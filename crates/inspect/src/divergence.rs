//! Divergence curves: how alike a layer's heads are at every training snapshot, as the mean
//! over pairs of heads of QK-circuit cosine, OV-circuit cosine and attention JS distance on
//! the probe batch. Heads that start identical (symmetric init) stay at cosine 1, distance 0
//! unless something breaks the symmetry; random init starts apart and moves.

use std::fmt::Write as _;
use train::snapshot::{SnapshotError, head_tensors, list_snapshots};

use crate::probe::Probe;
use crate::run::LoadedRun;
use crate::similarity::{LayerSimilarity, mean_off_diagonal};

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

/// The divergence curve of every layer over the snapshots of `loaded.dir` (empty when the
/// run took none).
pub fn divergence(
    loaded: &LoadedRun,
    probe: &Probe,
) -> Result<Vec<DivergencePoint>, SnapshotError> {
    let mut points = vec![];
    for (step, path) in list_snapshots(&loaded.dir.snapshots_dir()) {
        let model = loaded.snapshot_model(&path)?;
        let weights = head_tensors(&model, true);
        for (layer, layer_probe) in probe.run(&model).iter().enumerate() {
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

/// `divergence.csv`: a header, then one row per snapshot and layer; `nan` for layers with
/// one head (no pairs).
pub fn to_csv(points: &[DivergencePoint]) -> String {
    let mut csv = "step,layer,qk_cosine,ov_cosine,pattern_js\n".to_string();
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
