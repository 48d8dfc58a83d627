//! Helpers shared by the `train` binary's integration tests.

use std::path::Path;

/// The final weights of a run, tensor by tensor, sorted by name: safetensors' header order
/// is not fixed, so runs are compared by their tensors, not their file bytes.
pub fn final_tensors(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let bytes = std::fs::read(dir.join("model.safetensors")).unwrap();
    let file = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let mut tensors: Vec<(String, Vec<u8>)> = file
        .tensors()
        .into_iter()
        .map(|(name, view)| (name, view.data().to_vec()))
        .collect();
    tensors.sort();
    tensors
}
