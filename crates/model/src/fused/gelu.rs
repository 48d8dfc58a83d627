//! GELU over `f32` slices, forward and backward, written so the compiler vectorises them.
//!
//! flex computes the exact GELU with a scalar `libm::erff` call per value, in the forward
//! pass and again in the backward: about a quarter of a training step of the small model.
//! Here `erf` is a rational approximation (the one Eigen and XLA use for `f32`) and `exp` a
//! Cephes-style polynomial with the exponent set by bit manipulation: branch-free code with
//! no library call, which the compiler turns into vector instructions (AVX2 or AVX-512,
//! chosen at run time by macerator). Both stay within a few `f32` ulps of the exact
//! functions (erf within 4e-7, exp within 2.5e-7 relative); the tests bound the GELU
//! error at 1e-6.

use macerator::{Simd, WithSimd};
use rayon::prelude::*;

/// `1 / sqrt(2)`.
const FRAC_1_SQRT_2: f32 = std::f32::consts::FRAC_1_SQRT_2;
/// `1 / sqrt(2 pi)`, the normal density's constant.
const FRAC_1_SQRT_2PI: f32 = 0.398_942_3;

/// Slices at least this long are split over rayon's pool: below it, a thread hand-off
/// costs more than the work (the small model's largest GELU input is 512 K values).
const PARALLEL_MIN_LEN: usize = 1 << 16;
/// Values per parallel task.
const PARALLEL_CHUNK: usize = 1 << 14;

/// `erf(x)` within 4e-7 for every `x` (Eigen's `generic_fast_erf_float`; 3.2e-7 at worst on
/// the tests' grid).
///
/// `erf` is `+-1` in `f32` beyond `|x| = 4`, so `x` is clamped there, and the odd numerator
/// of degree 13 over the even denominator of degree 8 covers `[-4, 4]`. NaN stays NaN.
// The published coefficients, digit for digit; f32 rounds them.
#[allow(clippy::excessive_precision)]
#[inline(always)]
pub fn erf(x: f32) -> f32 {
    // `clamp` keeps NaN (as libm's erf does), unlike `max`/`min`.
    let clamped = x.clamp(-4.0, 4.0);
    let x2 = clamped * clamped;
    let mut p = x2 * -2.726_142_258_013_06e-10 + 2.770_681_424_959_02e-8;
    p = x2 * p - 2.101_024_020_825_08e-6;
    p = x2 * p - 5.692_506_394_623_46e-5;
    p = x2 * p - 7.349_906_303_268_55e-4;
    p = x2 * p - 2.954_599_808_540_25e-3;
    p = x2 * p - 1.609_603_332_624_15e-2;
    let p = clamped * p;
    let mut q = x2 * -1.456_607_184_649_96e-5 - 2.133_740_552_789_05e-4;
    q = x2 * q - 1.682_826_974_382_03e-3;
    q = x2 * q - 7.373_329_167_204_68e-3;
    q = x2 * q - 1.426_473_905_141_89e-2;
    p / q
}

/// `exp(x)` for `x <= 0` within 2.5e-7 relative (Cephes `expf`), flushing to 0 below
/// `-87.3` where the result would be subnormal.
///
/// `x = n ln2 + r` with `|r| <= ln2 / 2`; `e^r` by a degree-6 polynomial; `2^n` by writing
/// `n` into the exponent bits.
#[allow(clippy::excessive_precision)]
#[inline(always)]
pub fn exp_non_positive(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    // ln 2 split in two so that `n * LN2_HI` is exact.
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // Adding and subtracting 1.5 * 2^23 rounds to the nearest integer without a call.
    const ROUND: f32 = 12_582_912.0;
    let underflows = x < -87.3;
    let x = x.max(-87.3);
    let n = (x * LOG2E + ROUND) - ROUND;
    let r = (x - n * LN2_HI) - n * LN2_LO;
    let mut p = r * 1.987_569_15e-4 + 1.398_199_950_7e-3;
    p = r * p + 8.333_451_907_3e-3;
    p = r * p + 4.166_579_589_4e-2;
    p = r * p + 1.666_666_545_9e-1;
    p = r * p + 5.000_000_120_1e-1;
    let e_r = (r * r * p + r) + 1.0;
    // n is in [-126, 0]: a normal power of two.
    let two_n = f32::from_bits(((n as i32 + 127) as u32) << 23);
    if underflows { 0.0 } else { e_r * two_n }
}

/// `gelu(x) = x * Phi(x) = x / 2 * (1 + erf(x / sqrt(2)))`, the exact (not tanh) GELU.
#[inline(always)]
pub fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + erf(x * FRAC_1_SQRT_2))
}

/// `d gelu / dx = Phi(x) + x * phi(x)`.
#[inline(always)]
pub fn gelu_derivative(x: f32) -> f32 {
    let cdf = 0.5 * (1.0 + erf(x * FRAC_1_SQRT_2));
    let pdf = FRAC_1_SQRT_2PI * exp_non_positive(-0.5 * x * x);
    x * pdf + cdf
}

/// `out[i] = gelu(x[i])`.
///
/// # Panics
/// If the slices differ in length.
pub fn forward(x: &[f32], out: &mut [f32]) {
    assert_eq!(x.len(), out.len(), "gelu: input and output lengths differ");
    if x.len() >= PARALLEL_MIN_LEN {
        out.par_chunks_mut(PARALLEL_CHUNK)
            .zip(x.par_chunks(PARALLEL_CHUNK))
            .for_each(|(out, x)| forward_serial(x, out));
    } else {
        forward_serial(x, out);
    }
}

/// `grad[i] *= gelu'(x[i])`: the backward pass, in place on the incoming gradient.
///
/// # Panics
/// If the slices differ in length.
pub fn backward_in_place(x: &[f32], grad: &mut [f32]) {
    assert_eq!(
        x.len(),
        grad.len(),
        "gelu backward: input and gradient lengths differ"
    );
    if x.len() >= PARALLEL_MIN_LEN {
        grad.par_chunks_mut(PARALLEL_CHUNK)
            .zip(x.par_chunks(PARALLEL_CHUNK))
            .for_each(|(grad, x)| backward_serial(x, grad));
    } else {
        backward_serial(x, grad);
    }
}

fn forward_serial(x: &[f32], out: &mut [f32]) {
    macerator::AutoArch::new().dispatch(Forward { x, out });
}

fn backward_serial(x: &[f32], grad: &mut [f32]) {
    macerator::AutoArch::new().dispatch(Backward { x, grad });
}

/// The forward loop for macerator's dispatch, which compiles `with_simd` (and all it
/// inlines) once per instruction set and runs the best one this CPU has, so the loop is
/// vectorised for it. (A closure is not inlined there, and would run without the wider
/// instructions.)
struct Forward<'a> {
    x: &'a [f32],
    out: &'a mut [f32],
}

impl WithSimd for Forward<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self) {
        for (out, &x) in self.out.iter_mut().zip(self.x) {
            *out = gelu(x);
        }
    }
}

/// The backward loop for macerator's dispatch (see [`Forward`]).
struct Backward<'a> {
    x: &'a [f32],
    grad: &'a mut [f32],
}

impl WithSimd for Backward<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self) {
        for (grad, &x) in self.grad.iter_mut().zip(self.x) {
            *grad *= gelu_derivative(x);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `erf` in f64 by its Taylor series (|x| <= 3) or continued fraction (beyond): an
    /// independent reference, accurate to ~1e-13 where it is used.
    fn erf_f64(x: f64) -> f64 {
        let sign = x.signum();
        let a = x.abs();
        if a <= 3.0 {
            // erf(x) = 2/sqrt(pi) * sum_n (-1)^n x^(2n+1) / (n! (2n+1))
            let mut term = a;
            let mut sum = a;
            for n in 1..200 {
                term *= -a * a / n as f64;
                let add = term / (2 * n + 1) as f64;
                sum += add;
                if add.abs() < 1e-18 {
                    break;
                }
            }
            sign * sum * 2.0 / std::f64::consts::PI.sqrt()
        } else {
            // erfc(x) = exp(-x^2) / sqrt(pi) / (x + 1/2 / (x + 1 / (x + 3/2 / (x + ...))))
            let mut fraction = a;
            for k in (1..60).rev() {
                fraction = a + (k as f64 / 2.0) / fraction;
            }
            let erfc = (-a * a).exp() / std::f64::consts::PI.sqrt() / fraction;
            sign * (1.0 - erfc)
        }
    }

    fn gelu_f64(x: f64) -> f64 {
        0.5 * x * (1.0 + erf_f64(x / 2f64.sqrt()))
    }

    fn gelu_derivative_f64(x: f64) -> f64 {
        0.5 * (1.0 + erf_f64(x / 2f64.sqrt()))
            + x * (-0.5 * x * x).exp() / (2.0 * std::f64::consts::PI).sqrt()
    }

    /// Every 1/1000 in [-12, 12] and a few far values.
    fn grid() -> Vec<f32> {
        let mut values: Vec<f32> = (-12_000..=12_000).map(|i| i as f32 / 1000.0).collect();
        values.extend([
            -1e30, -1e4, -90.0, -40.0, 40.0, 90.0, 1e4, 1e30, 1e-30, -1e-30,
        ]);
        values
    }

    #[test]
    fn known_values() {
        // Hand-checked: Phi(1) = 0.841344746, Phi(-1) = 0.158655254.
        assert!((gelu(1.0) - 0.841_344_7).abs() < 1e-7);
        assert!((gelu(-1.0) + 0.158_655_25).abs() < 1e-7);
        assert_eq!(gelu(0.0), 0.0);
        assert_eq!(erf(10.0), 1.0);
        assert_eq!(erf(-10.0), -1.0);
        assert!(erf(f32::NAN).is_nan());
        assert!(gelu(f32::NAN).is_nan());
    }

    #[test]
    fn erf_is_within_4e7_of_the_exact_value() {
        let worst = grid()
            .into_iter()
            .map(|x| (erf(x) as f64 - erf_f64(x as f64)).abs())
            .fold(0.0, f64::max);
        assert!(worst < 4e-7, "worst erf error {worst:e}");
    }

    #[test]
    fn exp_is_within_2_5e7_relative() {
        for i in 0..=87_000 {
            let x = -(i as f32) / 1000.0;
            let exact = (x as f64).exp();
            let got = exp_non_positive(x) as f64;
            assert!(
                ((got - exact) / exact).abs() < 2.5e-7,
                "exp({x}) = {got}, exact {exact}"
            );
        }
        assert_eq!(exp_non_positive(-100.0), 0.0);
        assert_eq!(exp_non_positive(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp_non_positive(0.0), 1.0);
    }

    #[test]
    fn gelu_and_its_derivative_are_within_1e6_of_the_exact_values() {
        let xs = grid();
        let mut out = vec![0.0; xs.len()];
        forward(&xs, &mut out);
        let mut grad = vec![1.0; xs.len()];
        backward_in_place(&xs, &mut grad);
        for ((&x, &y), &dy) in xs.iter().zip(&out).zip(&grad) {
            let exact = gelu_f64(x as f64);
            // Relative far out, where gelu(x) = x is large.
            let tolerance = 1e-6 * exact.abs().max(1.0);
            assert!(
                (y as f64 - exact).abs() <= tolerance,
                "gelu({x}) = {y}, exact {exact}"
            );
            let exact_dy = gelu_derivative_f64(x as f64);
            assert!(
                (dy as f64 - exact_dy).abs() <= 1e-6,
                "gelu'({x}) = {dy}, exact {exact_dy}"
            );
        }
    }

    #[test]
    fn long_slices_split_over_threads_give_the_serial_answer() {
        let xs: Vec<f32> = (0..PARALLEL_MIN_LEN * 3 + 17)
            .map(|i| (i as f32 * 0.013).sin() * 5.0)
            .collect();
        let mut parallel = vec![0.0; xs.len()];
        forward(&xs, &mut parallel);
        let mut serial = vec![0.0; xs.len()];
        forward_serial(&xs, &mut serial);
        assert_eq!(parallel, serial);

        let upstream: Vec<f32> = (0..xs.len()).map(|i| (i % 7) as f32 - 3.0).collect();
        let (mut parallel, mut serial) = (upstream.clone(), upstream);
        backward_in_place(&xs, &mut parallel);
        backward_serial(&xs, &mut serial);
        assert_eq!(parallel, serial);
    }

    #[test]
    #[should_panic(expected = "lengths differ")]
    fn mismatched_lengths_are_refused() {
        forward(&[1.0, 2.0], &mut [0.0]);
    }
}
