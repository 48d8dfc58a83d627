//! Linear layers over every position of a batch as one matrix product.
//!
//! Burn's [`Linear::forward`] on `[batch, seq, d_in]` keeps the batch axis when `seq`
//! already fills the matmul's row tiles (a multiple of 32, as in both benchmark sizes),
//! so flex multiplies `batch` small `[seq, d_in] x [d_in, d_out]` matrices,
//! packing the weight again for each. Under autodiff it is worse: the weight's gradient
//! becomes `batch` products with only `seq` terms each, written out in full and then
//! summed. Folding the positions into the rows first gives one `[batch * seq, d_in]`
//! product forward, and one product over all `batch * seq` rows for the weight's
//! gradient. The numbers are the same up to float rounding (the sums run in another
//! order); the ops are plain Burn ops, so this holds on every backend.

use burn::nn::Linear;
use burn::prelude::*;

/// `layer` applied to every position of `x` as one `[batch * seq, d_in]` product.
///
/// # Shapes
/// - `x`: `[batch, seq, d_in]`
/// - output: `[batch, seq, d_out]`
pub fn linear_over_rows(layer: &Linear, x: Tensor<3>) -> Tensor<3> {
    let [batch, seq, d_in] = x.dims();
    let d_out = layer.weight.dims()[1];
    crate::fused::linear(layer, x.reshape([batch * seq, d_in])) // [batch * seq, d_out]
        .reshape([batch, seq, d_out])
}

#[cfg(test)]
mod tests {
    use burn::nn::LinearConfig;
    use burn::tensor::Distribution;

    use super::*;

    /// The output and the gradients of `sum(w * output)` for the input, weight and bias.
    fn run(layer: &Linear, x: &Tensor<3>, w: &Tensor<3>, over_rows: bool) -> [TensorData; 4] {
        let x = x.clone().require_grad();
        let output = if over_rows {
            linear_over_rows(layer, x.clone())
        } else {
            layer.forward(x.clone())
        };
        let grads = (output.clone() * w.clone()).sum().backward();
        let bias = layer.bias.as_ref().expect("the layer has a bias");
        [
            output.into_data(),
            x.grad(&grads).expect("input gradient").into_data(),
            layer
                .weight
                .grad(&grads)
                .expect("weight gradient")
                .into_data(),
            bias.grad(&grads).expect("bias gradient").into_data(),
        ]
    }

    /// Folded and unfolded give the same values and gradients, within float rounding,
    /// on both CPU backends, for a sequence length that keeps Burn's batch axis (8) and
    /// one that does not (5).
    #[test]
    #[allow(deprecated)] // ndarray is still a supported backend in 0.22
    fn matches_burns_linear_in_values_and_gradients() {
        for device in [Device::flex().autodiff(), Device::ndarray().autodiff()] {
            for seq in [32, 5] {
                device.seed(3);
                let layer = LinearConfig::new(12, 7).init(&device);
                let normal = Distribution::Normal(0.0, 1.0);
                let x = Tensor::<3>::random([4, seq, 12], normal, &device);
                let w = Tensor::<3>::random([4, seq, 7], normal, &device);
                let folded = run(&layer, &x, &w, true);
                let reference = run(&layer, &x, &w, false);
                assert_eq!(folded[0].shape(), reference[0].shape());
                for (name, (got, want)) in ["output", "input grad", "weight grad", "bias grad"]
                    .iter()
                    .zip(folded.iter().zip(&reference))
                {
                    got.assert_approx_eq::<f32>(want, burn::tensor::Tolerance::absolute(1e-5));
                    assert!(
                        got.iter::<f32>().any(|value| value != 0.0),
                        "{name} is all zeros on {device:?}, seq {seq}"
                    );
                }
            }
        }
    }
}
