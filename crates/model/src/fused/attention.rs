//! The attention core over `f32` slices, forward and backward: scores, mask, softmax,
//! dropout and the product with the values, one `(batch, head)` block at a time.
//!
//! Composed from tensor ops, this is nine ops forward (a matrix product, a transpose, a
//! scale, a mask fill, four for the softmax, the dropout, a second product) and as many
//! backward, each writing a `[batch, heads, seq, seq]` tensor. Here a block's scores live
//! in one row buffer while they are used, and the only tensor kept for the backward pass
//! is the pattern itself.
//!
//! Loops are arranged so that the innermost one runs over independent outputs (a row of
//! scores from the keys transposed, a row of the output from the values), which the
//! compiler vectorises without reordering a sum; batches run in parallel on rayon's pool.

use macerator::{Simd, WithSimd};
use rayon::prelude::*;

use super::gelu::exp_non_positive;

/// Score given to masked keys before the softmax, here and in the composed path
/// (`crate::attention`). Large enough that `exp` underflows to an exact zero in f32, finite
/// so that a fully masked row gives a uniform row instead of NaN.
pub const MASKED_SCORE: f32 = -1.0e9;

/// Sizes of one attention core call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dims {
    /// Sequences.
    pub batch: usize,
    /// Heads.
    pub heads: usize,
    /// Query positions.
    pub seq_q: usize,
    /// Key (and value) positions.
    pub seq_k: usize,
    /// Width of one head's queries, keys and values.
    pub d_head: usize,
}

impl Dims {
    /// Values in the pattern, `[batch, heads, seq_q, seq_k]`.
    pub fn pattern_len(&self) -> usize {
        self.batch * self.heads * self.seq_q * self.seq_k
    }
}

/// A `[batch, heads, seq, d_head]` tensor read in place: rows (the last axis) are
/// contiguous, the other axes may have any stride (queries, keys and values are views into
/// one projection).
#[derive(Debug, Clone, Copy)]
pub struct HeadRows<'a> {
    /// The storage the strides index.
    pub data: &'a [f32],
    /// Element `[0, 0, 0, 0]`.
    pub offset: usize,
    /// Strides of the batch, head and position axes, in elements.
    pub strides: [usize; 3],
    /// Row length.
    pub d_head: usize,
}

impl<'a> HeadRows<'a> {
    /// A contiguous `[batch, heads, seq, d_head]` buffer.
    pub fn contiguous(data: &'a [f32], heads: usize, seq: usize, d_head: usize) -> Self {
        Self {
            data,
            offset: 0,
            strides: [heads * seq * d_head, seq * d_head, d_head],
            d_head,
        }
    }

    /// Row `[b, h, i, ..]`.
    #[inline(always)]
    fn row(&self, b: usize, h: usize, i: usize) -> &'a [f32] {
        let start = self.offset + b * self.strides[0] + h * self.strides[1] + i * self.strides[2];
        &self.data[start..start + self.d_head]
    }
}

/// The inputs both passes read.
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    /// Queries, `[batch, heads, seq_q, d_head]`.
    pub q: HeadRows<'a>,
    /// Keys, `[batch, heads, seq_k, d_head]`.
    pub k: HeadRows<'a>,
    /// Values, `[batch, heads, seq_k, d_head]`.
    pub v: HeadRows<'a>,
    /// `[batch, seq_q, seq_k]`, non-zero where a query may not see a key.
    pub mask: Option<&'a [u8]>,
    /// Dropout on the pattern, `[batch, heads, seq_q, seq_k]`: 0 where dropped, else
    /// `1 / (1 - p)`.
    pub keep: Option<&'a [f32]>,
    /// Multiplies the scores, usually `1 / sqrt(d_head)`.
    pub scale: f32,
    /// Sizes.
    pub dims: Dims,
}

/// What the forward pass returns.
#[derive(Debug, Clone, PartialEq)]
pub struct Forward {
    /// The attention pattern before dropout, `[batch, heads, seq_q, seq_k]`.
    pub pattern: Vec<f32>,
    /// Each head's output, `[batch, seq_q, heads, d_head]`: the layout the output
    /// projection reads after a reshape, so no transpose follows.
    pub head_outputs: Vec<f32>,
}

/// Gradients of the queries, keys and values, each `[batch, heads, seq, d_head]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Gradients {
    /// Of the queries.
    pub q: Vec<f32>,
    /// Of the keys.
    pub k: Vec<f32>,
    /// Of the values.
    pub v: Vec<f32>,
}

/// `softmax(mask(q k^T * scale)) (with dropout) v`, per head.
pub fn forward(inputs: &Inputs) -> Forward {
    let Dims {
        batch,
        heads,
        seq_q,
        seq_k,
        d_head,
    } = inputs.dims;
    let mut pattern = vec![0.0f32; inputs.dims.pattern_len()];
    let mut head_outputs = vec![0.0f32; batch * seq_q * heads * d_head];
    if pattern.is_empty() || head_outputs.is_empty() {
        return Forward {
            pattern,
            head_outputs,
        };
    }
    pattern
        .par_chunks_mut(heads * seq_q * seq_k)
        .zip(head_outputs.par_chunks_mut(seq_q * heads * d_head))
        .enumerate()
        .for_each(|(b, (pattern, head_outputs))| {
            macerator::AutoArch::new().dispatch(ForwardBatch {
                inputs,
                b,
                pattern,
                head_outputs,
            })
        });
    Forward {
        pattern,
        head_outputs,
    }
}

/// [`forward_batch`] for macerator's dispatch, which compiles `with_simd` (and all it
/// inlines) once per instruction set and runs the best one this CPU has. (A closure is not
/// inlined there, and would run without the wider instructions.)
struct ForwardBatch<'a, 'b> {
    inputs: &'b Inputs<'a>,
    b: usize,
    pattern: &'b mut [f32],
    head_outputs: &'b mut [f32],
}

impl WithSimd for ForwardBatch<'_, '_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self) {
        forward_batch(self.inputs, self.b, self.pattern, self.head_outputs);
    }
}

/// [`backward_batch`] for macerator's dispatch (see [`ForwardBatch`]).
struct BackwardBatch<'a, 'b> {
    inputs: &'b Inputs<'a>,
    b: usize,
    pattern: &'b [f32],
    grad: &'b [f32],
    out: BatchGrads<'b>,
}

impl WithSimd for BackwardBatch<'_, '_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self) {
        backward_batch(self.inputs, self.b, self.pattern, self.grad, self.out);
    }
}

/// Sequence `b`: `pattern` is its `[heads, seq_q, seq_k]`, `head_outputs` its
/// `[seq_q, heads, d_head]`.
#[inline(always)]
fn forward_batch(inputs: &Inputs, b: usize, pattern: &mut [f32], head_outputs: &mut [f32]) {
    let Dims {
        heads,
        seq_q,
        seq_k,
        d_head,
        ..
    } = inputs.dims;
    // Keys of one head transposed, `[d_head, seq_k]`: a row of scores is then the query
    // times this matrix.
    let mut keys_t = vec![0.0f32; d_head * seq_k];
    let mut dropped = vec![0.0f32; seq_k];
    for h in 0..heads {
        transpose_rows(&inputs.k, b, h, seq_k, &mut keys_t);
        let keys_t = Rows::contiguous(&keys_t, seq_k);
        let values = Rows::of_head(&inputs.v, b, h);
        for i in 0..seq_q {
            let row = &mut pattern[(h * seq_q + i) * seq_k..][..seq_k];
            vector_times_matrix(inputs.q.row(b, h, i), keys_t, row);
            for score in row.iter_mut() {
                *score *= inputs.scale;
            }
            if let Some(mask) = inputs.mask {
                let mask = &mask[(b * seq_q + i) * seq_k..][..seq_k];
                for (score, &masked) in row.iter_mut().zip(mask) {
                    if masked != 0 {
                        *score = MASKED_SCORE;
                    }
                }
            }
            softmax_in_place(row);

            let output = &mut head_outputs[(i * heads + h) * d_head..][..d_head];
            let weights = match inputs.keep {
                Some(keep) => {
                    let keep = &keep[((b * heads + h) * seq_q + i) * seq_k..][..seq_k];
                    for ((dropped, &p), &keep) in dropped.iter_mut().zip(row.iter()).zip(keep) {
                        *dropped = p * keep;
                    }
                    &dropped[..]
                }
                None => &row[..],
            };
            vector_times_matrix(weights, values, output);
        }
    }
}

/// The gradients of `q`, `k`, `v` given the forward `pattern` and the gradient of the
/// head outputs (`[batch, seq_q, heads, d_head]`, contiguous).
///
/// # Panics
/// If `pattern` or `grad_head_outputs` has the wrong length.
pub fn backward(inputs: &Inputs, pattern: &[f32], grad_head_outputs: &[f32]) -> Gradients {
    let Dims {
        batch,
        heads,
        seq_q,
        seq_k,
        d_head,
    } = inputs.dims;
    assert_eq!(
        pattern.len(),
        inputs.dims.pattern_len(),
        "attention backward: pattern"
    );
    assert_eq!(
        grad_head_outputs.len(),
        batch * seq_q * heads * d_head,
        "attention backward: gradient of the head outputs"
    );
    let mut grads = Gradients {
        q: vec![0.0f32; batch * heads * seq_q * d_head],
        k: vec![0.0f32; batch * heads * seq_k * d_head],
        v: vec![0.0f32; batch * heads * seq_k * d_head],
    };
    if pattern.is_empty() || grads.q.is_empty() {
        return grads;
    }
    grads
        .q
        .par_chunks_mut(heads * seq_q * d_head)
        .zip(grads.k.par_chunks_mut(heads * seq_k * d_head))
        .zip(grads.v.par_chunks_mut(heads * seq_k * d_head))
        .enumerate()
        .for_each(|(b, ((dq, dk), dv))| {
            let pattern = &pattern[b * heads * seq_q * seq_k..][..heads * seq_q * seq_k];
            let grad = &grad_head_outputs[b * seq_q * heads * d_head..][..seq_q * heads * d_head];
            macerator::AutoArch::new().dispatch(BackwardBatch {
                inputs,
                b,
                pattern,
                grad,
                out: BatchGrads { dq, dk, dv },
            })
        });
    grads
}

/// Sequence `b`'s gradients, each `[heads, seq, d_head]`.
struct BatchGrads<'a> {
    dq: &'a mut [f32],
    dk: &'a mut [f32],
    dv: &'a mut [f32],
}

// Kept in one piece, over 80 lines: one (batch, head) block's backward pass in the order
// of the forward pass it inverts, with its buffers in registers; split, the helpers would
// pass a dozen slices each.
#[inline(always)]
fn backward_batch(inputs: &Inputs, b: usize, pattern: &[f32], grad: &[f32], out: BatchGrads) {
    let Dims {
        heads,
        seq_q,
        seq_k,
        d_head,
        ..
    } = inputs.dims;
    let BatchGrads { dq, dk, dv } = out;
    // Per head: the values transposed `[d_head, seq_k]`; the dropped-out pattern
    // transposed `[seq_k, seq_q]`; d loss / d scores `[seq_q, seq_k]` and transposed.
    let mut values_t = vec![0.0f32; d_head * seq_k];
    let mut dropped_t = vec![0.0f32; seq_k * seq_q];
    let mut grad_scores = vec![0.0f32; seq_q * seq_k];
    let mut grad_scores_t = vec![0.0f32; seq_k * seq_q];
    for h in 0..heads {
        let p = &pattern[h * seq_q * seq_k..][..seq_q * seq_k];
        let keep = inputs
            .keep
            .map(|keep| &keep[(b * heads + h) * seq_q * seq_k..][..seq_q * seq_k]);
        // The head's rows of the gradient of the outputs `[seq_q, heads, d_head]`.
        let grad_out = Rows {
            data: grad,
            offset: h * d_head,
            row_stride: heads * d_head,
        };
        transpose_rows(&inputs.v, b, h, seq_k, &mut values_t);

        // output_i = sum_j p'_ij v_j with p' the dropped-out pattern:
        // d v = p'^T d output, and d p' = d output v^T.
        for i in 0..seq_q {
            for j in 0..seq_k {
                let at = i * seq_k + j;
                dropped_t[j * seq_q + i] = keep.map_or(p[at], |keep| p[at] * keep[at]);
            }
        }
        for j in 0..seq_k {
            let dv_j = &mut dv[(h * seq_k + j) * d_head..][..d_head];
            vector_times_matrix(&dropped_t[j * seq_q..][..seq_q], grad_out, dv_j);
        }
        for i in 0..seq_q {
            let ds = &mut grad_scores[i * seq_k..][..seq_k];
            vector_times_matrix(
                grad_out.row(i, d_head),
                Rows::contiguous(&values_t, seq_k),
                ds,
            );
            let p_i = &p[i * seq_k..][..seq_k];
            if let Some(keep) = keep {
                for (ds, &keep) in ds.iter_mut().zip(&keep[i * seq_k..][..seq_k]) {
                    *ds *= keep;
                }
            }
            // Softmax: d s_ij = p_ij (d p_ij - sum_k d p_ik p_ik); masked scores were
            // overwritten, so they pass no gradient on. The scale comes in here too.
            let row_dot: f32 = ds.iter().zip(p_i).map(|(dp, p)| dp * p).sum();
            for (ds, &p) in ds.iter_mut().zip(p_i) {
                *ds = p * (*ds - row_dot) * inputs.scale;
            }
            if let Some(mask) = inputs.mask {
                let mask = &mask[(b * seq_q + i) * seq_k..][..seq_k];
                for (ds, &masked) in ds.iter_mut().zip(mask) {
                    if masked != 0 {
                        *ds = 0.0;
                    }
                }
            }
            for (j, &ds) in ds.iter().enumerate() {
                grad_scores_t[j * seq_q + i] = ds;
            }
        }

        // scores = q k^T * scale: d q = d s k, d k = d s^T q.
        let keys = Rows::of_head(&inputs.k, b, h);
        let queries = Rows::of_head(&inputs.q, b, h);
        for i in 0..seq_q {
            let dq_i = &mut dq[(h * seq_q + i) * d_head..][..d_head];
            vector_times_matrix(&grad_scores[i * seq_k..][..seq_k], keys, dq_i);
        }
        for j in 0..seq_k {
            let dk_j = &mut dk[(h * seq_k + j) * d_head..][..d_head];
            vector_times_matrix(&grad_scores_t[j * seq_q..][..seq_q], queries, dk_j);
        }
    }
}

/// The rows of a matrix in a buffer: row `r` starts at `offset + r * row_stride`.
#[derive(Debug, Clone, Copy)]
struct Rows<'a> {
    data: &'a [f32],
    offset: usize,
    row_stride: usize,
}

impl<'a> Rows<'a> {
    /// A row-major matrix `row_len` wide.
    fn contiguous(data: &'a [f32], row_len: usize) -> Self {
        Self {
            data,
            offset: 0,
            row_stride: row_len,
        }
    }

    /// Head `[b, h]` of `rows`: a `[seq, d_head]` matrix.
    fn of_head(rows: &HeadRows<'a>, b: usize, h: usize) -> Self {
        Self {
            data: rows.data,
            offset: rows.offset + b * rows.strides[0] + h * rows.strides[1],
            row_stride: rows.strides[2],
        }
    }

    #[inline(always)]
    fn row(&self, r: usize, len: usize) -> &'a [f32] {
        &self.data[self.offset + r * self.row_stride..][..len]
    }
}

/// Lanes of one accumulator in [`vector_times_matrix`]: one AVX2 register.
const LANES: usize = 8;

/// `out[j] = sum_r a[r] * m[r][j]`, `m` being `a.len()` rows of at least `out.len()`.
///
/// Outputs are summed in local arrays that stay in vector registers while the rows stream
/// past, four, two or one register's worth at a time (independent additions keep the
/// vector unit busy instead of each waiting for the last); each sum runs over `r` in
/// order, as a plain loop would, so the result does not depend on the instruction set.
#[inline(always)]
fn vector_times_matrix(a: &[f32], m: Rows, out: &mut [f32]) {
    let n = out.len();
    let mut j0 = 0;
    j0 = accumulate_blocks::<4>(a, m, out, j0);
    j0 = accumulate_blocks::<2>(a, m, out, j0);
    j0 = accumulate_blocks::<1>(a, m, out, j0);
    for (j, out) in out.iter_mut().enumerate().skip(j0) {
        let mut sum = 0.0f32;
        for (r, &ar) in a.iter().enumerate() {
            sum += ar * m.row(r, n)[j];
        }
        *out = sum;
    }
}

/// [`vector_times_matrix`]'s outputs from `j0` on, `BLOCKS` registers at a time while they
/// fit; returns the first output not written.
#[inline(always)]
fn accumulate_blocks<const BLOCKS: usize>(a: &[f32], m: Rows, out: &mut [f32], j0: usize) -> usize {
    let n = out.len();
    let mut j0 = j0;
    while j0 + BLOCKS * LANES <= n {
        let mut acc = [[0.0f32; LANES]; BLOCKS];
        for (r, &ar) in a.iter().enumerate() {
            let m_row = &m.row(r, n)[j0..j0 + BLOCKS * LANES];
            for (acc, m_block) in acc.iter_mut().zip(m_row.chunks_exact(LANES)) {
                for (acc, &m) in acc.iter_mut().zip(m_block) {
                    *acc += ar * m;
                }
            }
        }
        for (k, acc) in acc.iter().enumerate() {
            out[j0 + k * LANES..][..LANES].copy_from_slice(acc);
        }
        j0 += BLOCKS * LANES;
    }
    j0
}

/// Rows `[b, h, 0..seq, ..]` of `rows`, transposed into `out` (`[d_head, seq]`).
#[inline(always)]
fn transpose_rows(rows: &HeadRows, b: usize, h: usize, seq: usize, out: &mut [f32]) {
    for j in 0..seq {
        for (c, &x) in rows.row(b, h, j).iter().enumerate() {
            out[c * seq + j] = x;
        }
    }
}

/// `row = exp(row - max) / sum(exp(row - max))`.
#[inline(always)]
fn softmax_in_place(row: &mut [f32]) {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    for x in row.iter_mut() {
        *x = exp_non_positive(*x - max);
    }
    let sum: f32 = row.iter().sum();
    for x in row.iter_mut() {
        *x /= sum;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A naive per-head loop in f64, straight from the definitions: the independent
    /// reference. Returns (pattern, head outputs `[b, i, h, c]`).
    fn naive_forward(inputs: &Inputs) -> (Vec<f64>, Vec<f64>) {
        let Dims {
            batch,
            heads,
            seq_q,
            seq_k,
            d_head,
        } = inputs.dims;
        let mut pattern = vec![0.0; inputs.dims.pattern_len()];
        let mut out = vec![0.0; batch * seq_q * heads * d_head];
        for b in 0..batch {
            for h in 0..heads {
                for i in 0..seq_q {
                    let scores: Vec<f64> = (0..seq_k)
                        .map(|j| {
                            let masked = inputs
                                .mask
                                .is_some_and(|m| m[(b * seq_q + i) * seq_k + j] != 0);
                            if masked {
                                MASKED_SCORE as f64
                            } else {
                                let dot: f64 = (0..d_head)
                                    .map(|c| {
                                        inputs.q.row(b, h, i)[c] as f64
                                            * inputs.k.row(b, h, j)[c] as f64
                                    })
                                    .sum();
                                dot * inputs.scale as f64
                            }
                        })
                        .collect();
                    let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    let exps: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
                    let sum: f64 = exps.iter().sum();
                    for (j, exp) in exps.iter().enumerate() {
                        let p = exp / sum;
                        let at = ((b * heads + h) * seq_q + i) * seq_k + j;
                        pattern[at] = p;
                        let weight = p * inputs.keep.map_or(1.0, |k| k[at] as f64);
                        for c in 0..d_head {
                            out[((b * seq_q + i) * heads + h) * d_head + c] +=
                                weight * inputs.v.row(b, h, j)[c] as f64;
                        }
                    }
                }
            }
        }
        (pattern, out)
    }

    /// Deterministic pseudo-random values in [-2, 2).
    fn values(n: usize, seed: u64) -> Vec<f32> {
        crate::fused::test_values::uniform(n, seed, 2.0)
    }

    struct Case {
        dims: Dims,
        q: Vec<f32>,
        k: Vec<f32>,
        v: Vec<f32>,
        mask: Option<Vec<u8>>,
        keep: Option<Vec<f32>>,
    }

    impl Case {
        fn new(dims: Dims, masked: bool, dropout: bool) -> Self {
            let Dims {
                batch,
                heads,
                seq_q,
                seq_k,
                d_head,
            } = dims;
            let mask = masked.then(|| {
                // Every third key, and the whole of query 0's row in sequence 0.
                (0..batch * seq_q * seq_k)
                    .map(|at| {
                        let (b, i, j) = (at / (seq_q * seq_k), (at / seq_k) % seq_q, at % seq_k);
                        u8::from(j % 3 == 1 || (b == 0 && i == 0))
                    })
                    .collect()
            });
            let keep = dropout.then(|| {
                values(dims.pattern_len(), 9)
                    .into_iter()
                    .map(|x| if x < -0.8 { 0.0 } else { 1.0 / 0.8 })
                    .collect()
            });
            Self {
                dims,
                q: values(batch * heads * seq_q * d_head, 1),
                k: values(batch * heads * seq_k * d_head, 2),
                v: values(batch * heads * seq_k * d_head, 3),
                mask,
                keep,
            }
        }

        fn inputs(&self) -> Inputs<'_> {
            let Dims {
                heads,
                seq_q,
                seq_k,
                d_head,
                ..
            } = self.dims;
            Inputs {
                q: HeadRows::contiguous(&self.q, heads, seq_q, d_head),
                k: HeadRows::contiguous(&self.k, heads, seq_k, d_head),
                v: HeadRows::contiguous(&self.v, heads, seq_k, d_head),
                mask: self.mask.as_deref(),
                keep: self.keep.as_deref(),
                scale: 1.0 / (d_head as f32).sqrt(),
                dims: self.dims,
            }
        }
    }

    fn assert_close(got: &[f32], expected: &[f64], tolerance: f64, what: &str) {
        assert_eq!(got.len(), expected.len(), "{what}: lengths");
        for (at, (&g, &e)) in got.iter().zip(expected).enumerate() {
            assert!(
                (g as f64 - e).abs() <= tolerance * e.abs().max(1.0),
                "{what}[{at}]: {g} against {e}"
            );
        }
    }

    fn dims(batch: usize, heads: usize, seq: usize, d_head: usize) -> Dims {
        Dims {
            batch,
            heads,
            seq_q: seq,
            seq_k: seq,
            d_head,
        }
    }

    #[test]
    fn forward_matches_a_naive_loop() {
        for (dims, masked, dropout) in [
            (dims(1, 1, 1, 1), false, false),
            (dims(2, 3, 7, 5), false, false),
            (dims(2, 3, 7, 5), true, false),
            (dims(3, 1, 9, 4), true, true),
            (dims(2, 4, 32, 16), false, true),
            (
                Dims {
                    batch: 2,
                    heads: 2,
                    seq_q: 3,
                    seq_k: 6,
                    d_head: 3,
                },
                true,
                false,
            ),
        ] {
            let case = Case::new(dims, masked, dropout);
            let inputs = case.inputs();
            let got = forward(&inputs);
            let (pattern, out) = naive_forward(&inputs);
            assert_close(&got.pattern, &pattern, 1e-6, "pattern");
            assert_close(&got.head_outputs, &out, 1e-5, "head outputs");
        }
    }

    #[test]
    fn a_fully_masked_row_is_uniform() {
        let case = Case::new(dims(1, 1, 4, 2), true, false);
        let got = forward(&case.inputs());
        // Query 0 of sequence 0 sees no key.
        assert_eq!(&got.pattern[..4], &[0.25; 4]);
    }

    /// Gradients against central differences of `sum(w * head_outputs)` computed by
    /// the naive f64 loop.
    #[test]
    fn backward_matches_finite_differences() {
        for (dims, masked, dropout) in [
            (dims(1, 1, 1, 1), false, false),
            (dims(2, 2, 5, 3), true, false),
            (dims(1, 3, 6, 4), true, true),
        ] {
            let case = Case::new(dims, masked, dropout);
            let forward_result = forward(&case.inputs());
            let weights = values(forward_result.head_outputs.len(), 7);
            let grads = backward(&case.inputs(), &forward_result.pattern, &weights);

            let loss = |case: &Case| -> f64 {
                let (_, out) = naive_forward(&case.inputs());
                out.iter().zip(&weights).map(|(o, &w)| o * w as f64).sum()
            };
            let eps = 1e-3f32;
            for (which, analytic) in [("q", &grads.q), ("k", &grads.k), ("v", &grads.v)] {
                for (at, &analytic) in analytic.iter().enumerate() {
                    let nudge = |delta: f32| {
                        let mut moved = Case::new(dims, masked, dropout);
                        match which {
                            "q" => moved.q[at] += delta,
                            "k" => moved.k[at] += delta,
                            _ => moved.v[at] += delta,
                        }
                        loss(&moved)
                    };
                    let numeric = (nudge(eps) - nudge(-eps)) / (2.0 * eps as f64);
                    assert!(
                        (analytic as f64 - numeric).abs() <= 2e-3 * numeric.abs().max(1.0),
                        "d{which}[{at}]: {analytic} against {numeric} ({dims:?})"
                    );
                }
            }
        }
    }

    #[test]
    fn strided_rows_read_the_same_values() {
        // q, k, v interleaved in one [batch, seq, 3, heads, d_head] buffer, as the input
        // projection writes them.
        let d = dims(2, 3, 5, 4);
        let case = Case::new(d, true, false);
        let mut packed = vec![0.0f32; 2 * 5 * 3 * 3 * 4];
        for (part, source) in [&case.q, &case.k, &case.v].into_iter().enumerate() {
            for b in 0..2 {
                for h in 0..3 {
                    for i in 0..5 {
                        for c in 0..4 {
                            packed[(((b * 5 + i) * 3 + part) * 3 + h) * 4 + c] =
                                source[((b * 3 + h) * 5 + i) * 4 + c];
                        }
                    }
                }
            }
        }
        let view = |part: usize| HeadRows {
            data: &packed,
            offset: part * 3 * 4,
            strides: [5 * 3 * 3 * 4, 4, 3 * 3 * 4],
            d_head: 4,
        };
        let strided = Inputs {
            q: view(0),
            k: view(1),
            v: view(2),
            ..case.inputs()
        };
        assert_eq!(forward(&strided), forward(&case.inputs()));
    }
}
