//! The feed-forward's activation: the exact GELU every headlab model and most checkpoints
//! use, or its tanh approximation (`gelu_new` in `transformers`, ALBERT's).

use burn::prelude::*;
use serde::{Deserialize, Serialize};

/// The nonlinearity of the feed-forward and of a masked-LM prediction transform.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Activation {
    /// `x Φ(x)`, through the error function: BERT's `gelu` (fused on the CPU).
    #[default]
    Gelu,
    /// `x/2 (1 + tanh(sqrt(2/π) (x + 0.044715 x³)))`: `gelu_new` (ALBERT).
    GeluTanh,
}

impl Activation {
    /// The activation of every element of `x`.
    pub fn forward<const D: usize>(self, x: Tensor<D>) -> Tensor<D> {
        match self {
            Activation::Gelu => crate::fused::gelu(x),
            Activation::GeluTanh => burn::tensor::activation::gelu_approximate(x),
        }
    }

    /// Whether it is the default, exact GELU (kept out of a written config).
    pub fn is_default(&self) -> bool {
        *self == Activation::Gelu
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tanh_approximation_is_hand_computed_and_close_to_the_exact_gelu() {
        let device = Device::flex();
        let x = Tensor::<1>::from_floats([-2.0, -0.5, 0.0, 1.0, 3.0], &device);
        let values = |t: Tensor<1>| -> Vec<f32> { t.into_data().try_to_vec().unwrap() };
        let approximate = values(Activation::GeluTanh.forward(x.clone()));
        let exact = values(Activation::Gelu.forward(x));
        // 0.5 x (1 + tanh(0.7978845608 (x + 0.044715 x^3))), by hand in f64.
        let by_hand = [-2.0f64, -0.5, 0.0, 1.0, 3.0].map(|x| {
            0.5 * x
                * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x)).tanh())
        });
        for ((a, e), h) in approximate.iter().zip(&exact).zip(by_hand) {
            assert!((*a as f64 - h).abs() < 1e-6, "{a} vs {h}");
            assert!((a - e).abs() < 1e-3, "{a} vs exact {e}");
        }
        // And not the same function: they differ where the approximation is worst.
        assert!(
            approximate
                .iter()
                .zip(&exact)
                .any(|(a, e)| (a - e).abs() > 1e-5)
        );
    }
}
