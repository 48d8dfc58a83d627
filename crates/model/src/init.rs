//! Weight initialisation schemes. `symmetric` is the control experiment of headlab: every
//! head of a layer starts with the same weights, so nothing but the heads' inputs can make
//! them differ. In the split and wide layouts all heads read the same input, get the same
//! gradients and, with dropout 0, stay identical forever; in the narrow layout each head
//! reads its own chunk and may drift apart.

use burn::module::Param;
use burn::prelude::*;
use serde::{Deserialize, Serialize};

use crate::attention::MultiHeadAttention;

/// How the attention heads start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InitScheme {
    /// Independent random weights per head (Burn's default Kaiming-uniform init).
    #[default]
    Random,
    /// Every head of a layer is a copy of head 0: q, k, v (weights and biases) and its rows
    /// of the output projection.
    Symmetric,
}

impl MultiHeadAttention {
    /// Makes every head a copy of head 0, keeping the parameter ids (so an optimizer that
    /// already tracks them keeps working).
    pub fn tie_heads(mut self) -> Self {
        let (n_heads, d_head) = (self.n_heads, self.d_head);

        if let Some(qkv) = self.qkv.as_mut() {
            // [d_model, 3 * heads * d_head] viewed as [d_model, 3, heads, d_head]: copy head 0.
            qkv.weight = map_param(qkv.weight.clone(), |w| {
                let [d_model, _] = w.dims();
                let per_head = w.reshape([d_model, 3, n_heads, d_head]);
                repeat_first(per_head, 2).reshape([d_model, 3 * n_heads * d_head])
            });
            qkv.bias = qkv.bias.take().map(|bias| {
                map_param(bias, |b| {
                    let per_head = b.reshape([3, n_heads, d_head]);
                    repeat_first(per_head, 1).reshape([3 * n_heads * d_head])
                })
            });
        }
        if let Some(narrow) = self.qkv_narrow.as_mut() {
            // [heads, d_chunk, 3 * d_head] and [heads, 3 * d_head]: copy head 0.
            narrow.weight = map_param(narrow.weight.clone(), |w| repeat_first(w, 0));
            narrow.bias = map_param(narrow.bias.clone(), |b| repeat_first(b, 0));
        }
        // [heads * d_head, d_model] viewed as [heads, d_head, d_model]: copy head 0's rows.
        self.output.weight = map_param(self.output.weight.clone(), |w| {
            let [_, d_model] = w.dims();
            let per_head = w.reshape([n_heads, d_head, d_model]);
            repeat_first(per_head, 0).reshape([n_heads * d_head, d_model])
        });
        self
    }
}

/// Replaces `tensor` along `dim` by copies of its first slice.
fn repeat_first<const D: usize>(tensor: Tensor<D>, dim: usize) -> Tensor<D> {
    let count = tensor.dims()[dim];
    tensor.narrow(dim, 0, 1).repeat_dim(dim, count)
}

/// Applies `f` to a parameter's value; the parameter keeps its id.
fn map_param<const D: usize>(
    param: Param<Tensor<D>>,
    f: impl FnOnce(Tensor<D>) -> Tensor<D>,
) -> Param<Tensor<D>> {
    param.map(|value| {
        let require_grad = value.is_require_grad();
        let device = value.device();
        // Through host data: autodiff only tracks leaf tensors, and `f`'s result is not one.
        Tensor::from_data(f(value.detach()).into_data(), &device).set_require_grad(require_grad)
    })
}

/// The lock around a backend's random generator. flex and ndarray each keep one generator
/// for all threads: code that seeds it and then draws (a model's initial weights, dropout
/// masks) from several threads at once gets its draws interleaved with another thread's, and
/// so other numbers than its seed says. Whoever seeds and draws beside other threads holds
/// this while it does; every test that seeds the device does.
pub fn take_rng_turn() -> std::sync::MutexGuard<'static, ()> {
    static DEVICE_RNG: std::sync::Mutex<()> = std::sync::Mutex::new(());
    DEVICE_RNG.lock().unwrap_or_else(|e| e.into_inner())
}
