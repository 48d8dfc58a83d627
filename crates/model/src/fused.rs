//! Fused CPU kernels, reached through Burn's backend extensions.
//!
//! Two chains of composed tensor ops dominate a training step on the CPU: GELU (flex
//! computes the exact `erf` with a scalar library call per value, forward and backward)
//! and the attention core (nine ops forward and as many backward, each writing a
//! `[batch, heads, seq, seq]` tensor). Each runs here as one op per pass:
//!
//! - [`gelu`](fn@gelu): one vectorised pass each way ([`mod@gelu`] has the arithmetic);
//! - [`attention_core`]: scores, mask, softmax, dropout and the product with the values
//!   in one pass per `(batch, head)` block, and its backward in another
//!   ([`mod@attention`]);
//! - [`layer_norm`](fn@layer_norm) under autodiff (Burn composes it there from ten ops):
//!   one pass forward, one backward ([`mod@layer_norm`]);
//! - [`linear`](fn@linear): `x W + b` as one gemm onto the bias forward, and backward two
//!   gemms into unfilled buffers and a column sum ([`mod@linear`]).
//!
//! Burn routes the calls at run time: on flex (with or without autodiff) to the kernels
//! here, where the autodiff implementation records one op whose backward pass is the
//! fused one; the callers in this crate keep Burn's composed ops for every other backend
//! (ndarray, wgpu). The results match the composed ops within `f32` rounding (the tests
//! compare values and gradients); set `HEADLAB_COMPOSED_OPS=1` to run the composed ops
//! everywhere, for comparisons and benchmarks.

pub mod attention;
pub mod gelu;
pub mod layer_norm;
pub mod linear;

use std::sync::OnceLock;

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::flex::FlexTensor;
use burn::backend::ops::ActivationOps;
use burn::backend::tensor::{BoolTensor, FloatTensor};
use burn::backend::{
    Autodiff, AutodiffBackend, Backend, Dispatch, DispatchDevice, DispatchKindConversion,
    ExtensionType, Flex, backend_extension,
};
use burn::prelude::*;
use burn::tensor::{DType, DispatchTensor, TensorData};

/// The environment variable that turns the fused kernels off.
pub const COMPOSED_OPS_VAR: &str = "HEADLAB_COMPOSED_OPS";

/// What the attention core's forward pass keeps for its backward pass.
#[derive(ExtensionType)]
pub struct AttentionForward<B: Backend> {
    /// `[batch, seq_q, heads, d_head]`.
    pub head_outputs: FloatTensor<B>,
    /// `[batch, heads, seq_q, seq_k]`, before dropout.
    pub pattern: FloatTensor<B>,
}

/// Gradients of the attention core's inputs, each `[batch, heads, seq, d_head]`.
#[derive(ExtensionType)]
pub struct AttentionGradients<B: Backend> {
    /// Of the queries.
    pub q: FloatTensor<B>,
    /// Of the keys.
    pub k: FloatTensor<B>,
    /// Of the values.
    pub v: FloatTensor<B>,
}

/// What layer norm's forward pass keeps for its backward pass.
#[derive(ExtensionType)]
pub struct LayerNormForward<B: Backend> {
    /// The normalised, scaled and shifted input.
    pub output: FloatTensor<B>,
    /// Each row's mean, `[rows]`.
    pub mean: FloatTensor<B>,
    /// Each row's `1 / sqrt(var + eps)`, `[rows]`.
    pub rstd: FloatTensor<B>,
}

/// Gradients of layer norm's input, scale and shift.
#[derive(ExtensionType)]
pub struct LayerNormGradients<B: Backend> {
    /// Of the input.
    pub x: FloatTensor<B>,
    /// Of the scale, `[d]`.
    pub gamma: FloatTensor<B>,
    /// Of the shift, `[d]`.
    pub beta: FloatTensor<B>,
}

/// Gradients of a linear layer's input, weight and bias.
#[derive(ExtensionType)]
pub struct LinearGradients<B: Backend> {
    /// Of the input, `[rows, d_in]`.
    pub x: FloatTensor<B>,
    /// Of the weight, `[d_in, d_out]`.
    pub weight: FloatTensor<B>,
    /// Of the bias, `[d_out]`.
    pub bias: FloatTensor<B>,
}

/// Operations headlab fuses on the CPU. Listed backends only: the callers route the others
/// to Burn's ops before reaching the trait ([`runs_fused`]).
///
/// Shapes of the attention core: `q` `[batch, heads, seq_q, d_head]`, `k` and `v`
/// `[batch, heads, seq_k, d_head]`, `mask` `[batch, seq_q, seq_k]` (true where a query
/// may not see a key), `keep` `[batch, heads, seq_q, seq_k]` (dropout: 0 where dropped,
/// else `1 / (1 - p)`). An empty `mask` or `keep` (no elements) means none: the macro
/// does not route `Option`al tensors in 0.22.1.
#[backend_extension(Autodiff, Flex)]
pub trait FusedOps: Backend {
    /// The exact GELU, elementwise.
    fn fused_gelu(x: FloatTensor<Self>) -> FloatTensor<Self>;

    /// `grad * gelu'(x)`, elementwise: GELU's backward pass.
    fn fused_gelu_backward(x: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self>;

    /// Layer norm over the last axis: `(x - mean) / sqrt(var + epsilon) * gamma + beta`.
    fn fused_layer_norm(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        epsilon: f64,
    ) -> FloatTensor<Self>;

    /// [`fused_layer_norm`](FusedOps::fused_layer_norm) that also returns each row's mean
    /// and `1 / sqrt(var + epsilon)`, for the backward pass.
    fn fused_layer_norm_train(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        epsilon: f64,
    ) -> LayerNormForward<Self>;

    /// Layer norm's backward pass.
    fn fused_layer_norm_backward(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        mean: FloatTensor<Self>,
        rstd: FloatTensor<Self>,
        grad: FloatTensor<Self>,
    ) -> LayerNormGradients<Self>;

    /// `x weight + bias`: `x` `[rows, d_in]`, `weight` `[d_in, d_out]`, `bias` `[d_out]`.
    fn fused_linear(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: FloatTensor<Self>,
    ) -> FloatTensor<Self>;

    /// The linear layer's backward pass, given its input, weight and the gradient of its
    /// output (`[rows, d_out]`).
    fn fused_linear_backward(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        grad: FloatTensor<Self>,
    ) -> LinearGradients<Self>;

    /// `softmax(mask(q k^T * scale)) v` per head, with dropout on the pattern: the head
    /// outputs, `[batch, seq_q, heads, d_head]`.
    fn fused_attention(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        mask: BoolTensor<Self>,
        keep: FloatTensor<Self>,
        scale: f32,
    ) -> FloatTensor<Self>;

    /// [`fused_attention`](FusedOps::fused_attention) that also returns the pattern, for
    /// the backward pass.
    fn fused_attention_train(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        mask: BoolTensor<Self>,
        keep: FloatTensor<Self>,
        scale: f32,
    ) -> AttentionForward<Self>;

    /// The attention core's backward pass, given its inputs, the pattern and the gradient
    /// of the head outputs.
    #[allow(clippy::too_many_arguments)]
    fn fused_attention_backward(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        mask: BoolTensor<Self>,
        keep: FloatTensor<Self>,
        scale: f32,
        pattern: FloatTensor<Self>,
        grad_head_outputs: FloatTensor<Self>,
    ) -> AttentionGradients<Self>;
}

/// Whether float tensors on `device` take the fused kernels: flex (with or without
/// autodiff), unless [`COMPOSED_OPS_VAR`] is set to anything but `0`.
pub fn runs_fused(device: &Device) -> bool {
    static COMPOSED: OnceLock<bool> = OnceLock::new();
    let composed = *COMPOSED.get_or_init(|| {
        std::env::var(COMPOSED_OPS_VAR).is_ok_and(|value| !value.is_empty() && value != "0")
    });
    !composed
        && matches!(
            device.as_dispatch().clone().inner(),
            DispatchDevice::Flex(_)
        )
}

/// The exact GELU, `x * Phi(x)`: fused on flex for `f32`, Burn's `gelu` elsewhere.
///
/// # Shapes
/// - `x`: any -> the same
pub fn gelu<const D: usize>(x: Tensor<D>) -> Tensor<D> {
    if !runs_fused(&x.device()) || x.dtype() != DType::F32 {
        return burn::tensor::activation::gelu(x);
    }
    Tensor::from_dispatch(<Dispatch as FusedOps>::fused_gelu(x.into_dispatch()))
}

/// Layer norm over the last axis with `norm`'s scale and shift: fused on flex with
/// autodiff for `f32`, Burn's `LayerNorm::forward` elsewhere (without autodiff, flex's own
/// layer norm is already one op; and for a norm without a shift).
///
/// `epsilon` must be the one `norm` was built with: Burn keeps it private.
///
/// # Shapes
/// - `x`: `[.., d]` -> the same
pub fn layer_norm<const D: usize>(
    x: Tensor<D>,
    norm: &burn::nn::LayerNorm,
    epsilon: f64,
) -> Tensor<D> {
    let Some(beta) = norm.beta.as_ref() else {
        return norm.forward(x);
    };
    let device = x.device();
    if !runs_fused(&device) || !device.is_autodiff() || x.dtype() != DType::F32 {
        return norm.forward(x);
    }
    Tensor::from_dispatch(<Dispatch as FusedOps>::fused_layer_norm(
        x.into_dispatch(),
        norm.gamma.val().into_dispatch(),
        beta.val().into_dispatch(),
        epsilon,
    ))
}

/// Layer norm over the last axis without scale or shift, `(x - mean) / sqrt(var + epsilon)`:
/// what a [`crate::seed_stack::SeedNorm`] scales and shifts by each seed's own parameters.
/// Fused on flex with autodiff for `f32` (a unit scale and zero shift that need no
/// gradient), Burn's `layer_norm` elsewhere.
///
/// # Shapes
/// - `x`: `[.., d]` -> the same
pub fn normalize<const D: usize>(x: Tensor<D>, epsilon: f64) -> Tensor<D> {
    let device = x.device();
    let d = x.dims()[D - 1];
    let gamma = Tensor::<1>::ones([d], &device);
    if !runs_fused(&device) || !device.is_autodiff() || x.dtype() != DType::F32 {
        return burn::tensor::module::layer_norm(x, gamma, None, epsilon);
    }
    let beta = Tensor::<1>::zeros([d], &device);
    Tensor::from_dispatch(<Dispatch as FusedOps>::fused_layer_norm(
        x.into_dispatch(),
        gamma.into_dispatch(),
        beta.into_dispatch(),
        epsilon,
    ))
}

/// `layer` on the rows of `x`: fused on flex for `f32` (with a bias), Burn's
/// `Linear::forward` elsewhere.
///
/// # Shapes
/// - `x`: `[rows, d_in]` -> `[rows, d_out]`
pub fn linear(layer: &burn::nn::Linear, x: Tensor<2>) -> Tensor<2> {
    let Some(bias) = layer.bias.as_ref() else {
        return layer.forward(x);
    };
    if !runs_fused(&x.device()) || x.dtype() != DType::F32 {
        return layer.forward(x);
    }
    let (d_in, d_out) = (x.dims()[1], layer.weight.dims());
    assert_eq!(
        d_in, d_out[0],
        "linear layer: input width {d_in}, weight {d_out:?}"
    );
    Tensor::from_dispatch(<Dispatch as FusedOps>::fused_linear(
        x.into_dispatch(),
        layer.weight.val().into_dispatch(),
        bias.val().into_dispatch(),
    ))
}

/// The fused attention core. Call it only where [`runs_fused`] holds for `f32` tensors
/// (`model::attention` keeps the composed ops otherwise).
///
/// # Shapes
/// - `q`: `[batch, heads, seq_q, d_head]`; `k`, `v`: `[batch, heads, seq_k, d_head]`
/// - `mask`: `[batch, seq_q, seq_k]`; `keep`: `[batch, heads, seq_q, seq_k]`
/// - returns the head outputs, `[batch, seq_q, heads, d_head]`
pub fn attention_core(
    q: Tensor<4>,
    k: Tensor<4>,
    v: Tensor<4>,
    mask: Option<Tensor<3, Bool>>,
    keep: Option<Tensor<4>>,
    scale: f32,
) -> Tensor<4> {
    let device = q.device();
    let mask = mask.unwrap_or_else(|| Tensor::empty([0, 0, 0], &device));
    let keep = keep.unwrap_or_else(|| Tensor::empty([0, 0, 0, 0], &device));
    Tensor::from_dispatch(<Dispatch as FusedOps>::fused_attention(
        q.into_dispatch(),
        k.into_dispatch(),
        v.into_dispatch(),
        mask.into_dispatch(),
        keep.into_dispatch(),
        scale,
    ))
}

impl FusedOps for Flex {
    fn fused_gelu(x: FlexTensor) -> FlexTensor {
        if x.dtype() != DType::F32 {
            return <Flex as ActivationOps<Flex>>::gelu(x);
        }
        let x = x.to_contiguous();
        let input = contiguous_floats(&x);
        let mut output = vec![0.0f32; input.len()];
        gelu::forward(input, &mut output);
        FlexTensor::from_data(TensorData::new(output, x.layout().shape().clone()))
    }

    fn fused_gelu_backward(x: FlexTensor, grad: FlexTensor) -> FlexTensor {
        if x.dtype() != DType::F32 || grad.dtype() != DType::F32 {
            return <Flex as ActivationOps<Flex>>::gelu_backward(x, grad);
        }
        let x = x.to_contiguous();
        let input = contiguous_floats(&x);
        // The incoming gradient is usually this op's alone: scale it in place. If it is
        // shared or a view, work on a contiguous copy.
        let mut grad = owned_contiguous(grad);
        let len = input.len();
        let storage = grad.try_storage_mut::<f32>().expect("owned after the copy");
        gelu::backward_in_place(input, &mut storage[..len]);
        grad
    }

    fn fused_layer_norm(
        x: FlexTensor,
        gamma: FlexTensor,
        beta: FlexTensor,
        epsilon: f64,
    ) -> FlexTensor {
        Self::fused_layer_norm_train(x, gamma, beta, epsilon).output
    }

    fn fused_layer_norm_train(
        x: FlexTensor,
        gamma: FlexTensor,
        beta: FlexTensor,
        epsilon: f64,
    ) -> LayerNormForward<Flex> {
        let (x, gamma, beta) = (
            x.to_contiguous(),
            gamma.to_contiguous(),
            beta.to_contiguous(),
        );
        let forward = layer_norm::forward(
            contiguous_floats(&x),
            contiguous_floats(&gamma),
            contiguous_floats(&beta),
            epsilon as f32,
        );
        let rows = forward.mean.len();
        LayerNormForward {
            output: FlexTensor::from_data(TensorData::new(
                forward.output,
                x.layout().shape().clone(),
            )),
            mean: flex_tensor(forward.mean, [rows]),
            rstd: flex_tensor(forward.rstd, [rows]),
        }
    }

    fn fused_layer_norm_backward(
        x: FlexTensor,
        gamma: FlexTensor,
        mean: FlexTensor,
        rstd: FlexTensor,
        grad: FlexTensor,
    ) -> LayerNormGradients<Flex> {
        let (x, gamma, grad) = (
            x.to_contiguous(),
            gamma.to_contiguous(),
            grad.to_contiguous(),
        );
        let (mean, rstd) = (mean.to_contiguous(), rstd.to_contiguous());
        let grads = layer_norm::backward(
            contiguous_floats(&x),
            contiguous_floats(&gamma),
            contiguous_floats(&mean),
            contiguous_floats(&rstd),
            contiguous_floats(&grad),
        );
        let d = grads.gamma.len();
        LayerNormGradients {
            x: FlexTensor::from_data(TensorData::new(grads.x, x.layout().shape().clone())),
            gamma: flex_tensor(grads.gamma, [d]),
            beta: flex_tensor(grads.beta, [d]),
        }
    }

    fn fused_linear(x: FlexTensor, weight: FlexTensor, bias: FlexTensor) -> FlexTensor {
        let (x, weight, bias) = (
            non_negative_strides(x),
            non_negative_strides(weight),
            bias.to_contiguous(),
        );
        let (x_view, weight_view) = (matrix(&x), matrix(&weight));
        let output = linear::forward(x_view, weight_view, contiguous_floats(&bias));
        flex_tensor(output, [x_view.rows, weight_view.cols])
    }

    fn fused_linear_backward(
        x: FlexTensor,
        weight: FlexTensor,
        grad: FlexTensor,
    ) -> LinearGradients<Flex> {
        let (x, weight, grad) = (
            non_negative_strides(x),
            non_negative_strides(weight),
            grad.to_contiguous(),
        );
        let (x_view, weight_view) = (matrix(&x), matrix(&weight));
        assert_eq!(
            grad.layout().shape().dims::<2>(),
            [x_view.rows, weight_view.cols],
            "linear backward: the output gradient's shape"
        );
        let grads = linear::backward(x_view, weight_view, contiguous_floats(&grad));
        LinearGradients {
            x: flex_tensor(grads.x, [x_view.rows, x_view.cols]),
            weight: flex_tensor(grads.weight, [weight_view.rows, weight_view.cols]),
            bias: flex_tensor(grads.bias, [weight_view.cols]),
        }
    }

    fn fused_attention(
        q: FlexTensor,
        k: FlexTensor,
        v: FlexTensor,
        mask: FlexTensor,
        keep: FlexTensor,
        scale: f32,
    ) -> FlexTensor {
        Self::fused_attention_train(q, k, v, mask, keep, scale).head_outputs
    }

    fn fused_attention_train(
        q: FlexTensor,
        k: FlexTensor,
        v: FlexTensor,
        mask: FlexTensor,
        keep: FlexTensor,
        scale: f32,
    ) -> AttentionForward<Flex> {
        let parts = FlexAttention::new(q, k, v, mask, keep, scale);
        let inputs = parts.inputs();
        let dims = inputs.dims;
        let forward = attention::forward(&inputs);
        AttentionForward {
            head_outputs: flex_tensor(
                forward.head_outputs,
                [dims.batch, dims.seq_q, dims.heads, dims.d_head],
            ),
            pattern: flex_tensor(
                forward.pattern,
                [dims.batch, dims.heads, dims.seq_q, dims.seq_k],
            ),
        }
    }

    fn fused_attention_backward(
        q: FlexTensor,
        k: FlexTensor,
        v: FlexTensor,
        mask: FlexTensor,
        keep: FlexTensor,
        scale: f32,
        pattern: FlexTensor,
        grad_head_outputs: FlexTensor,
    ) -> AttentionGradients<Flex> {
        let parts = FlexAttention::new(q, k, v, mask, keep, scale);
        let inputs = parts.inputs();
        let Dims4 { q_dims, k_dims } = parts.dims4();
        let pattern = pattern.to_contiguous();
        let grad = grad_head_outputs.to_contiguous();
        let grads = attention::backward(
            &inputs,
            contiguous_floats(&pattern),
            contiguous_floats(&grad),
        );
        AttentionGradients {
            q: flex_tensor(grads.q, q_dims),
            k: flex_tensor(grads.k, k_dims),
            v: flex_tensor(grads.v, k_dims),
        }
    }
}

/// The attention core's flex inputs, each in a layout the kernels read in place.
struct FlexAttention {
    q: FlexTensor,
    k: FlexTensor,
    v: FlexTensor,
    mask: Option<FlexTensor>,
    keep: Option<FlexTensor>,
    scale: f32,
}

/// The shapes of the queries and of the keys (and values).
struct Dims4 {
    q_dims: [usize; 4],
    k_dims: [usize; 4],
}

impl FlexAttention {
    fn new(
        q: FlexTensor,
        k: FlexTensor,
        v: FlexTensor,
        mask: FlexTensor,
        keep: FlexTensor,
        scale: f32,
    ) -> Self {
        Self {
            q: unit_stride_rows(q),
            k: unit_stride_rows(k),
            v: unit_stride_rows(v),
            mask: present(mask),
            keep: present(keep),
            scale,
        }
    }

    fn dims4(&self) -> Dims4 {
        Dims4 {
            q_dims: self.q.layout().shape().dims::<4>(),
            k_dims: self.k.layout().shape().dims::<4>(),
        }
    }

    fn inputs(&self) -> attention::Inputs<'_> {
        let Dims4 { q_dims, k_dims } = self.dims4();
        let [batch, heads, seq_q, d_head] = q_dims;
        let seq_k = k_dims[2];
        assert_eq!(
            k_dims,
            [batch, heads, seq_k, d_head],
            "attention core: keys' shape"
        );
        assert_eq!(
            self.v.layout().shape().dims::<4>(),
            k_dims,
            "attention core: values' shape"
        );
        let dims = attention::Dims {
            batch,
            heads,
            seq_q,
            seq_k,
            d_head,
        };
        let mask = self.mask.as_ref().map(|mask| {
            assert_eq!(
                mask.layout().shape().dims::<3>(),
                [batch, seq_q, seq_k],
                "attention core: mask's shape"
            );
            contiguous_bools(mask)
        });
        let keep = self.keep.as_ref().map(|keep| {
            assert_eq!(
                keep.layout().shape().dims::<4>(),
                [batch, heads, seq_q, seq_k],
                "attention core: dropout's shape"
            );
            contiguous_floats(keep)
        });
        attention::Inputs {
            q: head_rows(&self.q),
            k: head_rows(&self.k),
            v: head_rows(&self.v),
            mask,
            keep,
            scale: self.scale,
            dims,
        }
    }
}

/// A contiguous `tensor`, or None if it is empty (the extension's "no mask").
fn present(tensor: FlexTensor) -> Option<FlexTensor> {
    (tensor.layout().num_elements() > 0).then(|| tensor.to_contiguous())
}

/// `tensor` if its last axis has unit stride and no axis runs backwards, else a
/// contiguous copy: the layout [`attention::HeadRows`] reads.
fn unit_stride_rows(tensor: FlexTensor) -> FlexTensor {
    let strides = tensor.layout().strides();
    if strides.last() == Some(&1) && strides.iter().all(|&stride| stride >= 0) {
        tensor
    } else {
        tensor.to_contiguous()
    }
}

/// `tensor` if no axis runs backwards, else a contiguous copy: what [`linear::Matrix`]
/// reads.
fn non_negative_strides(tensor: FlexTensor) -> FlexTensor {
    if tensor.layout().strides().iter().all(|&stride| stride >= 0) {
        tensor
    } else {
        tensor.to_contiguous()
    }
}

/// A 2-d `f32` tensor with non-negative strides as a matrix view.
fn matrix(tensor: &FlexTensor) -> linear::Matrix<'_> {
    let layout = tensor.layout();
    let [rows, cols] = layout.shape().dims::<2>();
    let strides = layout.strides();
    linear::Matrix {
        data: tensor.storage::<f32>(),
        offset: layout.start_offset(),
        rows,
        cols,
        row_stride: strides[0] as usize,
        col_stride: strides[1] as usize,
    }
}

/// The rows of a `[batch, heads, seq, d_head]` tensor with unit-stride rows.
fn head_rows(tensor: &FlexTensor) -> attention::HeadRows<'_> {
    let layout = tensor.layout();
    let strides = layout.strides();
    attention::HeadRows {
        data: tensor.storage::<f32>(),
        offset: layout.start_offset(),
        strides: [strides[0], strides[1], strides[2]].map(|stride| stride as usize),
        d_head: layout.shape().dims::<4>()[3],
    }
}

/// The values of a contiguous bool tensor (flex stores one byte per value).
fn contiguous_bools(tensor: &FlexTensor) -> &[u8] {
    let (start, end) = tensor
        .layout()
        .contiguous_offsets()
        .expect("made contiguous");
    &tensor.storage::<u8>()[start..end]
}

/// The values of a contiguous `f32` tensor.
fn contiguous_floats(tensor: &FlexTensor) -> &[f32] {
    let (start, end) = tensor
        .layout()
        .contiguous_offsets()
        .expect("made contiguous");
    &tensor.storage::<f32>()[start..end]
}

/// A contiguous tensor that owns its buffer from offset 0, so it can be written in place.
fn owned_contiguous(mut tensor: FlexTensor) -> FlexTensor {
    tensor = tensor.to_contiguous();
    if tensor.layout().start_offset() != 0 || tensor.try_storage_mut::<f32>().is_none() {
        let copy = contiguous_floats(&tensor).to_vec();
        tensor = FlexTensor::from_data(TensorData::new(copy, tensor.layout().shape().clone()));
    }
    tensor
}

fn flex_tensor<const D: usize>(values: Vec<f32>, shape: [usize; D]) -> FlexTensor {
    FlexTensor::from_data(TensorData::new(values, shape))
}

/// What the kernels' unit tests share.
#[cfg(test)]
pub(crate) mod test_values {
    /// `len` deterministic pseudo-random values, uniform in `[-half_width, half_width)`,
    /// a different sequence for each `seed` (a 64-bit linear congruential generator).
    pub(crate) fn uniform(len: usize, seed: u64, half_width: f32) -> Vec<f32> {
        let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15).wrapping_add(7);
        (0..len)
            .map(|_| {
                state = state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                ((state >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * half_width
            })
            .collect()
    }
}

/// GELU's backward pass as one autodiff op; its state is the forward input.
#[derive(Debug)]
struct GeluBackward;

impl<B: FusedOps> Backward<B, 1> for GeluBackward {
    type State = B::FloatTensorPrimitive;

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let grad = grads.consume::<B>(&ops.node);
        if let [Some(parent)] = ops.parents {
            grads.register::<B>(parent.id, B::fused_gelu_backward(ops.state, grad));
        }
    }
}

/// Layer norm's backward pass as one autodiff op, with the input, scale and shift as
/// parents.
#[derive(Debug)]
struct LayerNormBackward;

/// What [`LayerNormBackward`] keeps: the input (not a copy), the scale, the row statistics.
#[derive(Debug, Clone)]
struct LayerNormState<B: Backend> {
    x: B::FloatTensorPrimitive,
    gamma: B::FloatTensorPrimitive,
    mean: B::FloatTensorPrimitive,
    rstd: B::FloatTensorPrimitive,
}

impl<B: FusedOps> Backward<B, 3> for LayerNormBackward {
    type State = LayerNormState<B>;

    fn backward(self, ops: Ops<Self::State, 3>, grads: &mut Gradients, _: &mut Checkpointer) {
        let grad = grads.consume::<B>(&ops.node);
        let LayerNormState {
            x,
            gamma,
            mean,
            rstd,
        } = ops.state;
        let LayerNormGradients { x, gamma, beta } =
            B::fused_layer_norm_backward(x, gamma, mean, rstd, grad);
        let [x_parent, gamma_parent, beta_parent] = ops.parents;
        for (parent, grad) in [(x_parent, x), (gamma_parent, gamma), (beta_parent, beta)] {
            if let Some(parent) = parent {
                grads.register::<B>(parent.id, grad);
            }
        }
    }
}

/// The linear layer's backward pass as one autodiff op, with the input, weight and bias as
/// parents.
#[derive(Debug)]
struct LinearBackward;

/// What [`LinearBackward`] keeps: the input and the weight (not copies).
#[derive(Debug, Clone)]
struct LinearState<B: Backend> {
    x: B::FloatTensorPrimitive,
    weight: B::FloatTensorPrimitive,
}

impl<B: FusedOps> Backward<B, 3> for LinearBackward {
    type State = LinearState<B>;

    fn backward(self, ops: Ops<Self::State, 3>, grads: &mut Gradients, _: &mut Checkpointer) {
        let grad = grads.consume::<B>(&ops.node);
        let LinearState { x, weight } = ops.state;
        let LinearGradients { x, weight, bias } = B::fused_linear_backward(x, weight, grad);
        let [x_parent, weight_parent, bias_parent] = ops.parents;
        for (parent, grad) in [(x_parent, x), (weight_parent, weight), (bias_parent, bias)] {
            if let Some(parent) = parent {
                grads.register::<B>(parent.id, grad);
            }
        }
    }
}

/// The attention core's backward pass as one autodiff op, with `q`, `k`, `v` as parents.
#[derive(Debug)]
struct AttentionBackward;

/// What [`AttentionBackward`] keeps: the inputs (views, not copies) and the pattern.
#[derive(Debug, Clone)]
struct AttentionState<B: Backend> {
    q: B::FloatTensorPrimitive,
    k: B::FloatTensorPrimitive,
    v: B::FloatTensorPrimitive,
    mask: B::BoolTensorPrimitive,
    keep: B::FloatTensorPrimitive,
    scale: f32,
    pattern: B::FloatTensorPrimitive,
}

impl<B: FusedOps> Backward<B, 3> for AttentionBackward {
    type State = AttentionState<B>;

    fn backward(self, ops: Ops<Self::State, 3>, grads: &mut Gradients, _: &mut Checkpointer) {
        let grad = grads.consume::<B>(&ops.node);
        let AttentionState {
            q,
            k,
            v,
            mask,
            keep,
            scale,
            pattern,
        } = ops.state;
        let AttentionGradients { q, k, v } =
            B::fused_attention_backward(q, k, v, mask, keep, scale, pattern, grad);
        let [q_parent, k_parent, v_parent] = ops.parents;
        for (parent, grad) in [(q_parent, q), (k_parent, k), (v_parent, v)] {
            if let Some(parent) = parent {
                grads.register::<B>(parent.id, grad);
            }
        }
    }
}

impl<B, C> FusedOps for Autodiff<B, C>
where
    B: FusedOps,
    C: CheckpointStrategy,
    DispatchTensor: DispatchKindConversion<B>,
{
    fn fused_gelu(x: FloatTensor<Self>) -> FloatTensor<Self> {
        let node = x.node();
        let (x, _) = x.into_parts();
        match GeluBackward.prepare::<C>([node]).compute_bound().stateful() {
            OpsKind::Tracked(prep) => {
                let output = B::fused_gelu(x.clone());
                prep.finish(x, output)
            }
            OpsKind::UnTracked(prep) => prep.finish(B::fused_gelu(x)),
        }
    }

    fn fused_gelu_backward(x: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self> {
        // Reached only by differentiating twice, which headlab never does: Burn's
        // composed derivative keeps that possible.
        Self::gelu_backward(x, grad)
    }

    fn fused_layer_norm(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        epsilon: f64,
    ) -> FloatTensor<Self> {
        let nodes = [x.node(), gamma.node(), beta.node()];
        let (x, _) = x.into_parts();
        let (gamma, _) = gamma.into_parts();
        let (beta, _) = beta.into_parts();
        match LayerNormBackward
            .prepare::<C>(nodes)
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => {
                let forward = B::fused_layer_norm_train(x.clone(), gamma.clone(), beta, epsilon);
                let state = LayerNormState {
                    x,
                    gamma,
                    mean: forward.mean,
                    rstd: forward.rstd,
                };
                prep.finish(state, forward.output)
            }
            OpsKind::UnTracked(prep) => prep.finish(B::fused_layer_norm(x, gamma, beta, epsilon)),
        }
    }

    fn fused_layer_norm_train(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        epsilon: f64,
    ) -> LayerNormForward<Self> {
        let forward = B::fused_layer_norm_train(
            x.into_primitive(),
            gamma.into_primitive(),
            beta.into_primitive(),
            epsilon,
        );
        LayerNormForward {
            output: Self::from_inner(forward.output),
            mean: Self::from_inner(forward.mean),
            rstd: Self::from_inner(forward.rstd),
        }
    }

    fn fused_layer_norm_backward(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        mean: FloatTensor<Self>,
        rstd: FloatTensor<Self>,
        grad: FloatTensor<Self>,
    ) -> LayerNormGradients<Self> {
        let grads = B::fused_layer_norm_backward(
            x.into_primitive(),
            gamma.into_primitive(),
            mean.into_primitive(),
            rstd.into_primitive(),
            grad.into_primitive(),
        );
        LayerNormGradients {
            x: Self::from_inner(grads.x),
            gamma: Self::from_inner(grads.gamma),
            beta: Self::from_inner(grads.beta),
        }
    }

    fn fused_linear(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        let nodes = [x.node(), weight.node(), bias.node()];
        let (x, _) = x.into_parts();
        let (weight, _) = weight.into_parts();
        let (bias, _) = bias.into_parts();
        match LinearBackward
            .prepare::<C>(nodes)
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => {
                let output = B::fused_linear(x.clone(), weight.clone(), bias);
                prep.finish(LinearState { x, weight }, output)
            }
            OpsKind::UnTracked(prep) => prep.finish(B::fused_linear(x, weight, bias)),
        }
    }

    fn fused_linear_backward(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        grad: FloatTensor<Self>,
    ) -> LinearGradients<Self> {
        // Serves the tracked op above on the inner backend; on autodiff it returns
        // constants (headlab never differentiates a backward pass).
        let grads = B::fused_linear_backward(
            x.into_primitive(),
            weight.into_primitive(),
            grad.into_primitive(),
        );
        LinearGradients {
            x: Self::from_inner(grads.x),
            weight: Self::from_inner(grads.weight),
            bias: Self::from_inner(grads.bias),
        }
    }

    fn fused_attention(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        mask: BoolTensor<Self>,
        keep: FloatTensor<Self>,
        scale: f32,
    ) -> FloatTensor<Self> {
        let nodes = [q.node(), k.node(), v.node()];
        let (q, _) = q.into_parts();
        let (k, _) = k.into_parts();
        let (v, _) = v.into_parts();
        // The dropout mask is a constant: no gradient flows into it.
        let keep = keep.into_primitive();
        match AttentionBackward
            .prepare::<C>(nodes)
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => {
                let forward = B::fused_attention_train(
                    q.clone(),
                    k.clone(),
                    v.clone(),
                    mask.clone(),
                    keep.clone(),
                    scale,
                );
                let state = AttentionState {
                    q,
                    k,
                    v,
                    mask,
                    keep,
                    scale,
                    pattern: forward.pattern,
                };
                prep.finish(state, forward.head_outputs)
            }
            OpsKind::UnTracked(prep) => prep.finish(B::fused_attention(q, k, v, mask, keep, scale)),
        }
    }

    // The two below serve the tracked op above, which calls them on the inner backend.
    // Called on an autodiff backend they run there and return constants: headlab never
    // differentiates a backward pass.

    fn fused_attention_train(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        mask: BoolTensor<Self>,
        keep: FloatTensor<Self>,
        scale: f32,
    ) -> AttentionForward<Self> {
        let forward = B::fused_attention_train(
            q.into_primitive(),
            k.into_primitive(),
            v.into_primitive(),
            mask,
            keep.into_primitive(),
            scale,
        );
        AttentionForward {
            head_outputs: Self::from_inner(forward.head_outputs),
            pattern: Self::from_inner(forward.pattern),
        }
    }

    fn fused_attention_backward(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        mask: BoolTensor<Self>,
        keep: FloatTensor<Self>,
        scale: f32,
        pattern: FloatTensor<Self>,
        grad_head_outputs: FloatTensor<Self>,
    ) -> AttentionGradients<Self> {
        let grads = B::fused_attention_backward(
            q.into_primitive(),
            k.into_primitive(),
            v.into_primitive(),
            mask,
            keep.into_primitive(),
            scale,
            pattern.into_primitive(),
            grad_head_outputs.into_primitive(),
        );
        AttentionGradients {
            q: Self::from_inner(grads.q),
            k: Self::from_inner(grads.k),
            v: Self::from_inner(grads.v),
        }
    }
}

#[cfg(test)]
mod tests {
    use burn::tensor::Distribution;

    use super::*;

    fn max_difference<const D: usize>(a: Tensor<D>, b: Tensor<D>) -> f32 {
        (a - b).abs().max().into_scalar()
    }

    /// Values and gradients against Burn's own GELU (flex's exact `libm::erff`).
    #[test]
    fn fused_gelu_matches_burns_values_and_gradients() {
        for device in [Device::flex(), Device::flex().autodiff()] {
            device.seed(3);
            for shape in [[1, 1, 1], [2, 3, 5], [4, 33, 257]] {
                let x = Tensor::<3>::random(shape, Distribution::Normal(0.0, 3.0), &device);
                assert!(runs_fused(&device));
                let fused = gelu(x.clone());
                let reference = burn::tensor::activation::gelu(x.clone());
                assert!(max_difference(fused.clone(), reference.clone()) < 1e-6);
                if !device.is_autodiff() {
                    continue;
                }
                // A non-trivial upstream gradient: d/dx sum(w * gelu(x)).
                let w = Tensor::<3>::random(shape, Distribution::Normal(0.0, 1.0), &device);
                let x_fused = x.clone().detach().require_grad();
                let grads = (gelu(x_fused.clone()) * w.clone()).sum().backward();
                let fused_grad = x_fused.grad(&grads).expect("x has a gradient");
                let x_ref = x.detach().require_grad();
                let grads = (burn::tensor::activation::gelu(x_ref.clone()) * w)
                    .sum()
                    .backward();
                let reference_grad = x_ref.grad(&grads).expect("x has a gradient");
                assert!(max_difference(fused_grad, reference_grad) < 1e-6);
            }
        }
    }

    /// A strided view (a transpose and a slice) takes the copy paths, and an upstream
    /// gradient shared by two uses is not written in place.
    #[test]
    fn non_contiguous_inputs_give_the_same_values() {
        let device = Device::flex().autodiff();
        device.seed(5);
        let x = Tensor::<2>::random([6, 9], Distribution::Normal(0.0, 2.0), &device);
        let strided = x.transpose().slice([2..7, 1..5]).require_grad();
        let reference = burn::tensor::activation::gelu(strided.clone());
        assert!(max_difference(gelu(strided.clone()), reference.clone()) < 1e-6);

        let fused = gelu(strided.clone());
        let grads = (fused.clone() + fused).sum().backward();
        let grad = strided.grad(&grads).expect("gradient");
        let grads = (reference.clone() + reference).sum().backward();
        let expected = strided.grad(&grads).expect("gradient");
        assert!(max_difference(grad, expected) < 1e-6);
    }

    /// Values and the gradients of the input, scale and shift against Burn's composed
    /// layer norm under autodiff.
    #[test]
    fn fused_layer_norm_matches_burns_values_and_gradients() {
        let device = Device::flex().autodiff();
        device.seed(9);
        for shape in [[1, 1, 3], [2, 7, 64], [3, 33, 5]] {
            let d = shape[2];
            let mut norm = burn::nn::LayerNormConfig::new(d).init(&device);
            // Not the initial ones and zeros, so that a mix-up of scale and shift shows.
            norm.gamma = burn::module::Param::from_tensor(Tensor::random(
                [d],
                Distribution::Normal(1.0, 0.5),
                &device,
            ));
            norm.beta = Some(burn::module::Param::from_tensor(Tensor::random(
                [d],
                Distribution::Normal(0.0, 0.5),
                &device,
            )));
            let x =
                Tensor::<3>::random(shape, Distribution::Normal(1.0, 2.0), &device).require_grad();
            let w = Tensor::<3>::random(shape, Distribution::Normal(0.0, 1.0), &device);
            let fused = layer_norm(x.clone(), &norm, 1e-5);
            let reference = norm.forward(x.clone());
            assert!(max_difference(fused.clone(), reference.clone()) < 1e-5);
            let fused_grads = (fused * w.clone()).sum().backward();
            let reference_grads = (reference * w).sum().backward();
            let grad = |grads: &_| x.grad(grads).expect("x has a gradient");
            assert!(max_difference(grad(&fused_grads), grad(&reference_grads)) < 1e-4);
            let gamma = |grads: &_| norm.gamma.grad(grads).expect("gamma has a gradient");
            assert!(max_difference(gamma(&fused_grads), gamma(&reference_grads)) < 1e-4);
            let beta = norm.beta.as_ref().expect("a shift");
            let beta = |grads: &_| beta.grad(grads).expect("beta has a gradient");
            assert!(max_difference(beta(&fused_grads), beta(&reference_grads)) < 1e-4);
        }
    }

    #[test]
    fn other_backends_take_burns_gelu() {
        #[allow(deprecated)] // ndarray still ships, and still takes Burn's GELU.
        let device = Device::ndarray();
        assert!(!runs_fused(&device));
        let x = Tensor::<1>::from_floats([-1.0, 0.0, 1.0], &device);
        let y: Vec<f32> = gelu(x).into_data().try_into_vec().expect("f32");
        assert!((y[2] - 0.841_344_7).abs() < 1e-6);
    }
}
