//! Per-head weights under stable names, `layers.{l}.heads.{h}.{q,k,v,q_bias,k_bias,v_bias,o}`
//! (and `.qk`, `.ov` when circuits are asked for): what a snapshot during training holds and
//! what `inspect` dumps.

use std::collections::BTreeMap;
use std::path::Path;

use model::Encoder;

use crate::tensor_file::{HostTensor, TensorFileError, write_tensors};

/// Every head's weights, by name. Shapes: `q`, `k`, `v`: `[d_model, d_head]`; biases:
/// `[d_head]`; `o`: `[d_head, d_model]`; `qk`, `ov`: `[d_model, d_model]`.
pub fn head_tensors(model: &Encoder, circuits: bool) -> BTreeMap<String, HostTensor> {
    let mut tensors = BTreeMap::new();
    for (l, block) in model.blocks.iter().enumerate() {
        for h in 0..block.attention.n_heads {
            let w = block.attention.head_weights(h);
            let name = |part: &str| format!("layers.{l}.heads.{h}.{part}");
            if circuits {
                tensors.insert(name("qk"), HostTensor::of(w.qk()));
                tensors.insert(name("ov"), HostTensor::of(w.ov()));
            }
            tensors.insert(name("q"), HostTensor::of(w.q));
            tensors.insert(name("k"), HostTensor::of(w.k));
            tensors.insert(name("v"), HostTensor::of(w.v));
            tensors.insert(name("q_bias"), HostTensor::of(w.q_bias));
            tensors.insert(name("k_bias"), HostTensor::of(w.k_bias));
            tensors.insert(name("v_bias"), HostTensor::of(w.v_bias));
            tensors.insert(name("o"), HostTensor::of(w.o));
        }
    }
    tensors
}

/// Writes a snapshot of every head's weights at `step` to `path`.
pub fn write_snapshot(path: &Path, model: &Encoder, step: usize) -> Result<(), TensorFileError> {
    let metadata = [("step".to_string(), step.to_string())]
        .into_iter()
        .collect();
    write_tensors(path, &head_tensors(model, false), Some(metadata))
}
