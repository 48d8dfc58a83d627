//! The fused CPU kernels (`model::fused`) change a run's numbers only within float
//! rounding: the `train` binary on the tiny config, with them (the default on flex) and
//! with `HEADLAB_COMPOSED_OPS=1`, ends with the same weights up to a small tolerance.

#[path = "common/train.rs"]
mod common;

use common::*;
use model::fused::COMPOSED_OPS_VAR;

/// The final weights of a tiny run as f32 values, tensor by tensor.
fn final_weights(composed: bool) -> Vec<(String, Vec<f32>)> {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let mut command = train_cmd(&[TINY, "--out", out.to_str().unwrap()]);
    if composed {
        command.env(COMPOSED_OPS_VAR, "1");
    } else {
        command.env_remove(COMPOSED_OPS_VAR);
    }
    let output = command.output().expect("the train binary runs");
    assert!(
        output.status.success(),
        "train failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    final_tensors(&out)
        .into_iter()
        .map(|(name, bytes)| {
            let values = bytes
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect();
            (name, values)
        })
        .collect()
}

#[test]
fn fused_and_composed_runs_end_with_the_same_weights_within_rounding() {
    let fused = final_weights(false);
    let composed = final_weights(true);
    assert_eq!(fused.len(), composed.len());
    let mut worst = 0.0f32;
    let mut bitwise_equal = true;
    for ((name, a), (other, b)) in fused.iter().zip(&composed) {
        assert_eq!(name, other);
        for (x, y) in a.iter().zip(b) {
            worst = worst.max((x - y).abs());
            bitwise_equal &= x.to_bits() == y.to_bits();
        }
    }
    // 20 AdamW steps at lr 3e-3 move weights by ~0.06; rounding differences stay far below.
    assert!(worst < 1e-4, "weights differ by up to {worst}");
    // Otherwise the composed switch did nothing and this test compares a path with itself.
    assert!(
        !bitwise_equal,
        "the two runs are bitwise equal: was the fused path taken?"
    );
}
