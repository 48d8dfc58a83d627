//! The linear layer `x W + b` as one op forward and one backward, on plain `f32` slices.
//!
//! Composed, a linear layer under autodiff is a matrix product into a zero-filled buffer,
//! a broadcast add of the bias into another buffer, and backward passes that zero-fill
//! again and sum the bias gradient in a separate reduction. Here the output starts as the
//! bias, repeated per row, and the product is accumulated onto it (gemm's `read_dst`); the
//! gradients are written by gemm into buffers nothing fills first, and the bias gradient
//! is a column sum. The products are flex's own gemm calls, so they run the same
//! microkernels, split over the cores past the same size.

use gemm::Parallelism;

/// Products of at least this many multiply-adds are split over the cores: flex's
/// threshold (`192^3`), so the fused layer parallelises where the composed one did.
const PARALLEL_MULTIPLY_ADDS: usize = 192 * 192 * 192;

/// A strided `rows x cols` matrix: element `(r, c)` is
/// `data[offset + r * row_stride + c * col_stride]`. Strides are never negative.
#[derive(Debug, Clone, Copy)]
pub struct Matrix<'a> {
    /// The buffer the view reads.
    pub data: &'a [f32],
    /// Where element `(0, 0)` is.
    pub offset: usize,
    /// Rows in the view.
    pub rows: usize,
    /// Columns in the view.
    pub cols: usize,
    /// Step from one row to the next.
    pub row_stride: usize,
    /// Step from one column to the next.
    pub col_stride: usize,
}

impl<'a> Matrix<'a> {
    /// A row-major matrix over all of `data`.
    pub fn contiguous(data: &'a [f32], rows: usize, cols: usize) -> Self {
        assert_eq!(data.len(), rows * cols, "a {rows}x{cols} matrix");
        Self {
            data,
            offset: 0,
            rows,
            cols,
            row_stride: cols,
            col_stride: 1,
        }
    }

    /// The transposed view (no copy).
    fn transposed(self) -> Self {
        Self {
            rows: self.cols,
            cols: self.rows,
            row_stride: self.col_stride,
            col_stride: self.row_stride,
            ..self
        }
    }

    /// Panics unless every element lies inside `data`: what makes the raw pointers handed
    /// to gemm sound.
    fn check_bounds(&self) {
        if self.rows > 0 && self.cols > 0 {
            let last =
                self.offset + (self.rows - 1) * self.row_stride + (self.cols - 1) * self.col_stride;
            assert!(
                last < self.data.len(),
                "matrix view ends at {last}, past its {} values",
                self.data.len()
            );
        }
    }
}

/// The gradients of a linear layer's input, weight and bias.
#[derive(Debug)]
pub struct Gradients {
    /// `[rows, d_in]`.
    pub x: Vec<f32>,
    /// `[d_in, d_out]`.
    pub weight: Vec<f32>,
    /// `[d_out]`.
    pub bias: Vec<f32>,
}

/// `x W + b`, row-major `[rows, d_out]`.
///
/// # Shapes
/// - `x`: `[rows, d_in]`; `weight`: `[d_in, d_out]`; `bias`: `[d_out]`
pub fn forward(x: Matrix, weight: Matrix, bias: &[f32]) -> Vec<f32> {
    assert_eq!(
        x.cols, weight.rows,
        "linear: input width against weight rows"
    );
    assert_eq!(
        bias.len(),
        weight.cols,
        "linear: bias length against weight columns"
    );
    let (rows, d_out) = (x.rows, weight.cols);
    // [rows, d_out]: the bias in every row, then dst := dst + x W.
    let mut output = Vec::with_capacity(rows * d_out);
    for _ in 0..rows {
        output.extend_from_slice(bias);
    }
    multiply(x, weight, &mut output, true);
    output
}

/// The gradients of `x W + b` given the output's gradient `grad`, row-major
/// `[rows, d_out]`.
pub fn backward(x: Matrix, weight: Matrix, grad: &[f32]) -> Gradients {
    let (rows, d_out) = (x.rows, weight.cols);
    let grad = Matrix::contiguous(grad, rows, d_out);
    Gradients {
        x: product(grad, weight.transposed()), // [rows, d_out] x [d_out, d_in]
        weight: product(x.transposed(), grad), // [d_in, rows] x [rows, d_out]
        bias: column_sums(grad),
    }
}

/// `lhs rhs` into a new row-major buffer that nothing fills first.
#[allow(unsafe_code)] // gemm's API is raw pointers; see the SAFETY notes
fn product(lhs: Matrix, rhs: Matrix) -> Vec<f32> {
    let len = lhs.rows * rhs.cols;
    if lhs.cols == 0 {
        return vec![0.0; len]; // an empty sum; gemm would leave the buffer unwritten
    }
    let mut output = Vec::with_capacity(len);
    // SAFETY: with `read_dst` false and a non-empty inner dimension gemm writes every
    // element of the `len` values reserved above before anything reads them, and never
    // reads them itself; `set_len` comes after.
    unsafe {
        multiply_raw(lhs, rhs, output.as_mut_ptr(), false);
        output.set_len(len);
    }
    output
}

/// `dst := dst + lhs rhs` (`accumulate`) or `dst := lhs rhs`, `dst` row-major.
#[allow(unsafe_code)]
fn multiply(lhs: Matrix, rhs: Matrix, dst: &mut [f32], accumulate: bool) {
    assert_eq!(dst.len(), lhs.rows * rhs.cols, "linear: output size");
    // SAFETY: `dst` holds exactly the `lhs.rows x rhs.cols` values gemm writes.
    unsafe { multiply_raw(lhs, rhs, dst.as_mut_ptr(), accumulate) }
}

/// gemm on two checked views.
///
/// # Safety
/// `dst` must be valid for writes of `lhs.rows * rhs.cols` values, and for reads of them
/// when `accumulate` is set.
#[allow(unsafe_code)]
unsafe fn multiply_raw(lhs: Matrix, rhs: Matrix, dst: *mut f32, accumulate: bool) {
    assert_eq!(lhs.cols, rhs.rows, "linear: inner dimensions");
    lhs.check_bounds();
    rhs.check_bounds();
    let (m, k, n) = (lhs.rows, lhs.cols, rhs.cols);
    assert!(
        k > 0 || accumulate,
        "an empty product must be filled by the caller"
    );
    if m == 0 || n == 0 || k == 0 {
        return; // nothing to write, or nothing to add
    }
    let parallelism = if m.saturating_mul(n).saturating_mul(k) >= PARALLEL_MULTIPLY_ADDS {
        Parallelism::Rayon(0) // all of rayon's threads
    } else {
        Parallelism::None
    };
    // SAFETY: both views lie inside their slices (checked above) and `dst` is valid as the
    // caller promises; gemm computes dst := alpha dst + beta lhs rhs, reading dst only
    // when `accumulate` (read_dst) is set.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst,
            1,
            n as isize,
            accumulate,
            lhs.data.as_ptr().add(lhs.offset),
            lhs.col_stride as isize,
            lhs.row_stride as isize,
            rhs.data.as_ptr().add(rhs.offset),
            rhs.col_stride as isize,
            rhs.row_stride as isize,
            1.0f32,
            1.0f32,
            false,
            false,
            false,
            parallelism,
        );
    }
}

/// The sum of each column of a row-major matrix, adding the rows in order.
fn column_sums(matrix: Matrix) -> Vec<f32> {
    let mut sums = vec![0.0f32; matrix.cols];
    for row in matrix
        .data
        .chunks_exact(matrix.cols.max(1))
        .take(matrix.rows)
    {
        for (sum, value) in sums.iter_mut().zip(row) {
            *sum += value;
        }
    }
    sums
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic values in [-1, 1).
    fn values(len: usize, seed: u64) -> Vec<f32> {
        crate::fused::test_values::uniform(len, seed, 1.0)
    }

    /// `(r, c)` of a strided view, in f64.
    fn at(matrix: &Matrix, r: usize, c: usize) -> f64 {
        matrix.data[matrix.offset + r * matrix.row_stride + c * matrix.col_stride] as f64
    }

    fn assert_close(got: &[f32], want: &[f64], what: &str) {
        assert_eq!(got.len(), want.len(), "{what}: length");
        for (index, (&g, &w)) in got.iter().zip(want).enumerate() {
            assert!(
                (g as f64 - w).abs() <= 1e-5 * (1.0 + w.abs()),
                "{what}[{index}]: {g} against {w}"
            );
        }
    }

    /// Forward and backward against naive f64 loops, for row-major inputs and for an input
    /// read through a transposed view (strided rows), with sizes from 1 up past gemm's
    /// tiles and past the parallel threshold.
    #[test]
    fn matches_naive_loops() {
        let shapes = [
            (1, 1, 1),
            (7, 5, 3),
            (33, 17, 9),
            (64, 48, 80),
            (300, 200, 130),
        ];
        for (rows, d_in, d_out) in shapes {
            for transposed_input in [false, true] {
                let x_values = values(rows * d_in, 1);
                // As stored: [rows, d_in], or [d_in, rows] read transposed.
                let x = if transposed_input {
                    Matrix::contiguous(&x_values, d_in, rows).transposed()
                } else {
                    Matrix::contiguous(&x_values, rows, d_in)
                };
                let w_values = values(d_in * d_out, 2);
                let w = Matrix::contiguous(&w_values, d_in, d_out);
                let bias = values(d_out, 3);
                let grad = values(rows * d_out, 4);
                let what = format!("{rows}x{d_in}x{d_out} transposed {transposed_input}");

                let mut want = vec![0.0f64; rows * d_out];
                for r in 0..rows {
                    for c in 0..d_out {
                        want[r * d_out + c] = bias[c] as f64
                            + (0..d_in).map(|i| at(&x, r, i) * at(&w, i, c)).sum::<f64>();
                    }
                }
                assert_close(&forward(x, w, &bias), &want, &format!("output {what}"));

                let grads = backward(x, w, &grad);
                let g = |r: usize, c: usize| grad[r * d_out + c] as f64;
                let want_x: Vec<f64> = (0..rows * d_in)
                    .map(|at_| {
                        let (r, i) = (at_ / d_in, at_ % d_in);
                        (0..d_out).map(|c| g(r, c) * at(&w, i, c)).sum()
                    })
                    .collect();
                let want_w: Vec<f64> = (0..d_in * d_out)
                    .map(|at_| {
                        let (i, c) = (at_ / d_out, at_ % d_out);
                        (0..rows).map(|r| at(&x, r, i) * g(r, c)).sum()
                    })
                    .collect();
                let want_b: Vec<f64> = (0..d_out)
                    .map(|c| (0..rows).map(|r| g(r, c)).sum())
                    .collect();
                assert_close(&grads.x, &want_x, &format!("input grad {what}"));
                assert_close(&grads.weight, &want_w, &format!("weight grad {what}"));
                assert_close(&grads.bias, &want_b, &format!("bias grad {what}"));
            }
        }
    }

    #[test]
    fn an_empty_inner_dimension_gives_the_bias_and_zero_gradients() {
        let x = Matrix::contiguous(&[], 3, 0);
        let w = Matrix::contiguous(&[], 0, 2);
        assert_eq!(forward(x, w, &[1.0, -2.0]), [1.0, -2.0].repeat(3));
        let grads = backward(x, w, &[1.0; 6]);
        assert!(grads.x.is_empty());
        assert!(grads.weight.is_empty());
        assert_eq!(grads.bias, [3.0, 3.0]);
    }

    #[test]
    #[should_panic(expected = "past its")]
    fn a_view_past_its_data_is_refused() {
        let data = [0.0f32; 5];
        let x = Matrix {
            data: &data,
            offset: 0,
            rows: 2,
            cols: 3,
            row_stride: 3,
            col_stride: 1,
        };
        let w = Matrix::contiguous(&[0.0; 3], 3, 1);
        forward(x, w, &[0.0]);
    }
}
