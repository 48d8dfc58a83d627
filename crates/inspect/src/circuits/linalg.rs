//! Dense real linear algebra in plain f64 for the circuit measures (the dependency tree has
//! no LAPACK): a row-major [`Matrix`]; the eigenvalues of a real non-symmetric matrix by
//! balancing (Parlett and Reinsch 1969), Householder reduction to Hessenberg form and the
//! Francis double-shift QR iteration (Golub and Van Loan, "Matrix Computations", 4th ed.,
//! algorithms 7.4.2 and 7.5.1-7.5.2, with EISPACK `hqr`'s deflation and exceptional
//! shifts); singular values by one-sided Jacobi rotations (Hestenes 1958; Demmel and
//! Veselić 1992, "Jacobi's method is more accurate than QR").

use std::ops::{Index, IndexMut};

/// A dense `rows x cols` matrix of f64, row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct Matrix {
    rows: usize,
    cols: usize,
    data: Vec<f64>,
}

impl Matrix {
    /// A matrix of zeros.
    pub fn zeros(rows: usize, cols: usize) -> Self {
        Self {
            rows,
            cols,
            data: vec![0.0; rows * cols],
        }
    }

    /// The `n x n` identity.
    pub fn identity(n: usize) -> Self {
        let mut m = Self::zeros(n, n);
        for i in 0..n {
            m[(i, i)] = 1.0;
        }
        m
    }

    /// A matrix from row-major values.
    ///
    /// # Panics
    /// If `data` does not hold `rows * cols` values.
    pub fn from_vec(rows: usize, cols: usize, data: Vec<f64>) -> Self {
        assert_eq!(
            data.len(),
            rows * cols,
            "a {rows} x {cols} matrix needs {} values",
            rows * cols
        );
        Self { rows, cols, data }
    }

    /// A matrix from row-major f32 values (a tensor copied to the host), widened to f64.
    ///
    /// # Panics
    /// If `data` does not hold `rows * cols` values.
    pub fn from_f32(rows: usize, cols: usize, data: &[f32]) -> Self {
        Self::from_vec(rows, cols, data.iter().map(|&x| f64::from(x)).collect())
    }

    /// A matrix from its rows.
    ///
    /// # Panics
    /// If the rows differ in length.
    pub fn from_rows(rows: &[&[f64]]) -> Self {
        let cols = rows.first().map_or(0, |r| r.len());
        assert!(
            rows.iter().all(|r| r.len() == cols),
            "rows of different lengths"
        );
        Self::from_vec(rows.len(), cols, rows.concat())
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Number of columns.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Row `i`.
    pub fn row(&self, i: usize) -> &[f64] {
        &self.data[i * self.cols..(i + 1) * self.cols]
    }

    /// The transpose.
    pub fn transpose(&self) -> Self {
        let mut t = Self::zeros(self.cols, self.rows);
        for i in 0..self.rows {
            for j in 0..self.cols {
                t[(j, i)] = self[(i, j)];
            }
        }
        t
    }

    /// `self @ other`.
    ///
    /// # Panics
    /// If the inner sizes differ.
    #[allow(unsafe_code)] // gemm's API is raw pointers; see the SAFETY note
    pub fn matmul(&self, other: &Matrix) -> Matrix {
        assert_eq!(
            self.cols, other.rows,
            "cannot multiply a {} x {} matrix by a {} x {} one",
            self.rows, self.cols, other.rows, other.cols
        );
        let (m, k, n) = (self.rows, self.cols, other.cols);
        let mut product = Matrix::zeros(m, n);
        if m == 0 || n == 0 || k == 0 {
            return product;
        }
        // gemm's packed kernels (AVX-512 where the CPU has it) on one thread: the circuits
        // run their heads in parallel instead, so every product's summation order, and so
        // every number, is the same whatever the number of threads. `U E` of an imported
        // BERT (30522 pieces) is 4.5 G multiply-adds.
        // SAFETY: the three matrices are row-major with the sizes checked above (column
        // stride 1, row stride their width), and `product` is a distinct, owned buffer.
        unsafe {
            gemm::gemm(
                m,
                n,
                k,
                product.data.as_mut_ptr(),
                1,
                n as isize,
                false,
                self.data.as_ptr(),
                1,
                k as isize,
                other.data.as_ptr(),
                1,
                n as isize,
                0.0f64,
                1.0f64,
                false,
                false,
                false,
                gemm::Parallelism::None,
            );
        }
        product
    }

    /// Columns side by side: `[a | b | ...]`.
    ///
    /// # Panics
    /// If the matrices differ in rows.
    pub fn hstack(parts: &[Matrix]) -> Matrix {
        let rows = parts.first().map_or(0, |m| m.rows);
        assert!(
            parts.iter().all(|m| m.rows == rows),
            "stacking matrices with different numbers of rows"
        );
        let cols = parts.iter().map(|m| m.cols).sum();
        let mut out = Matrix::zeros(rows, cols);
        for i in 0..rows {
            let mut j0 = 0;
            for part in parts {
                out.data[i * cols + j0..i * cols + j0 + part.cols].copy_from_slice(part.row(i));
                j0 += part.cols;
            }
        }
        out
    }

    /// Frobenius norm: the square root of the sum of squares.
    pub fn frobenius_norm(&self) -> f64 {
        self.data.iter().map(|x| x * x).sum::<f64>().sqrt()
    }

    /// Sum of the diagonal.
    ///
    /// # Panics
    /// If the matrix is not square.
    pub fn trace(&self) -> f64 {
        self.assert_square("trace");
        (0..self.rows).map(|i| self[(i, i)]).sum()
    }

    /// Sum of the elementwise products with `other` (`tr(self^T other)`).
    pub fn dot(&self, other: &Matrix) -> f64 {
        assert_eq!(
            (self.rows, self.cols),
            (other.rows, other.cols),
            "elementwise product of matrices of different shapes"
        );
        self.data.iter().zip(&other.data).map(|(a, b)| a * b).sum()
    }

    /// Column `j` multiplied by `factor`, for every `j`.
    pub fn scale_columns(&self, factors: &[f64]) -> Matrix {
        assert_eq!(factors.len(), self.cols, "one factor per column");
        let mut out = self.clone();
        for i in 0..self.rows {
            for (x, f) in out.data[i * self.cols..(i + 1) * self.cols]
                .iter_mut()
                .zip(factors)
            {
                *x *= f;
            }
        }
        out
    }

    fn assert_square(&self, what: &str) {
        assert_eq!(
            self.rows, self.cols,
            "{what} of a {} x {} matrix: it must be square",
            self.rows, self.cols
        );
    }
}

/// A matrix kept as two factors, `left @ right` with `left` `[n, r]` and `right` `[r, m]`.
/// A head's QK and OV circuits are `[d_model, d_model]` but of rank at most `d_head`: in
/// this form their norms, products, eigenvalues and singular values cost `r x r` work.
#[derive(Debug, Clone, PartialEq)]
pub struct LowRank {
    /// `[n, r]`.
    pub left: Matrix,
    /// `[r, m]`.
    pub right: Matrix,
}

impl LowRank {
    /// `left @ right`, kept factored.
    ///
    /// # Panics
    /// If the inner sizes differ.
    pub fn new(left: Matrix, right: Matrix) -> Self {
        assert_eq!(
            left.cols, right.rows,
            "factors {} x {} and {} x {} do not multiply",
            left.rows, left.cols, right.rows, right.cols
        );
        Self { left, right }
    }

    /// The full `[n, m]` matrix.
    pub fn product(&self) -> Matrix {
        self.left.matmul(&self.right)
    }

    /// `(left right)^T = right^T left^T`.
    pub fn transpose(&self) -> LowRank {
        LowRank::new(self.right.transpose(), self.left.transpose())
    }

    /// `self @ other`, kept factored: `left (right other.left)` and `other.right`.
    pub fn then(&self, other: &LowRank) -> LowRank {
        let inner = self.right.matmul(&other.left);
        LowRank::new(self.left.matmul(&inner), other.right.clone())
    }

    /// `||left right||_F`, from `tr(left^T left right right^T)`, both Gram matrices `r x r`.
    pub fn frobenius_norm(&self) -> f64 {
        let left_gram = self.left.transpose().matmul(&self.left);
        let right_gram = self.right.matmul(&self.right.transpose());
        // Both are symmetric, so the trace of their product is their elementwise dot
        // product; rounding can take a zero norm a hair below 0.
        left_gram.dot(&right_gram).max(0.0).sqrt()
    }
}

impl Index<(usize, usize)> for Matrix {
    type Output = f64;

    fn index(&self, (i, j): (usize, usize)) -> &f64 {
        debug_assert!(i < self.rows && j < self.cols);
        &self.data[i * self.cols + j]
    }
}

impl IndexMut<(usize, usize)> for Matrix {
    fn index_mut(&mut self, (i, j): (usize, usize)) -> &mut f64 {
        debug_assert!(i < self.rows && j < self.cols);
        &mut self.data[i * self.cols + j]
    }
}

/// A complex number, for eigenvalues.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Complex {
    /// Real part.
    pub re: f64,
    /// Imaginary part.
    pub im: f64,
}

impl Complex {
    /// `re + i im`.
    pub fn new(re: f64, im: f64) -> Self {
        Self { re, im }
    }

    /// The modulus `|z|`.
    pub fn abs(self) -> f64 {
        self.re.hypot(self.im)
    }
}

/// The QR iteration did not converge (in practice never: exceptional shifts break the
/// cycles that stall it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the eigenvalues of a {n} x {n} matrix did not converge in {iterations} QR iterations")]
pub struct NoConvergence {
    /// Size of the matrix.
    pub n: usize,
    /// Iterations spent on the block that did not split.
    pub iterations: usize,
}

/// The eigenvalues of a real square matrix, complex ones in conjugate pairs, in no
/// particular order.
///
/// # Panics
/// If `a` is not square.
pub fn eigenvalues(a: &Matrix) -> Result<Vec<Complex>, NoConvergence> {
    a.assert_square("eigenvalues");
    let mut h = a.clone();
    balance(&mut h);
    reduce_to_hessenberg(&mut h);
    hessenberg_eigenvalues(h)
}

/// Scales rows and columns by powers of two (a similarity, so the eigenvalues stay, and
/// exact) until each row and its column have about the same norm: rounding errors in the
/// QR iteration are relative to the matrix's norm, which balancing makes as small as it
/// can (Parlett and Reinsch 1969; EISPACK `balanc` without the permutations).
fn balance(a: &mut Matrix) {
    const RADIX: f64 = 2.0;
    let n = a.rows;
    let mut done = false;
    while !done {
        done = true;
        for i in 0..n {
            let (mut c, mut r) = (0.0, 0.0);
            for j in (0..n).filter(|&j| j != i) {
                c += a[(j, i)].abs();
                r += a[(i, j)].abs();
            }
            if c == 0.0 || r == 0.0 {
                continue;
            }
            let s = c + r;
            let mut f = 1.0;
            while c < r / RADIX {
                f *= RADIX;
                c *= RADIX * RADIX;
            }
            while c > r * RADIX {
                f /= RADIX;
                c /= RADIX * RADIX;
            }
            if (c + r) / f < 0.95 * s {
                done = false;
                for j in 0..n {
                    a[(i, j)] /= f;
                    a[(j, i)] *= f;
                }
            }
        }
    }
}

/// Householder reflections `H_k` from both sides, `H_k a H_k`, zero everything below the
/// first subdiagonal (Golub and Van Loan, algorithm 7.4.2): a similarity, so the
/// eigenvalues stay.
fn reduce_to_hessenberg(a: &mut Matrix) {
    let n = a.rows;
    for k in 0..n.saturating_sub(2) {
        // The reflection that maps a[k+1.., k] onto alpha e_1.
        let mut v: Vec<f64> = (k + 1..n).map(|i| a[(i, k)]).collect();
        let sigma = v.iter().map(|x| x * x).sum::<f64>().sqrt();
        if sigma == 0.0 {
            continue;
        }
        let alpha = if v[0] >= 0.0 { -sigma } else { sigma };
        v[0] -= alpha;
        let vv: f64 = v.iter().map(|x| x * x).sum();
        if vv == 0.0 {
            continue;
        }
        let beta = 2.0 / vv;
        // From the left: rows k+1.., columns k...
        for j in k..n {
            let dot: f64 = v
                .iter()
                .enumerate()
                .map(|(t, vt)| vt * a[(k + 1 + t, j)])
                .sum();
            for (t, vt) in v.iter().enumerate() {
                a[(k + 1 + t, j)] -= beta * dot * vt;
            }
        }
        // From the right: every row, columns k+1...
        for i in 0..n {
            let dot: f64 = v
                .iter()
                .enumerate()
                .map(|(t, vt)| vt * a[(i, k + 1 + t)])
                .sum();
            for (t, vt) in v.iter().enumerate() {
                a[(i, k + 1 + t)] -= beta * dot * vt;
            }
        }
        a[(k + 1, k)] = alpha;
        for i in k + 2..n {
            a[(i, k)] = 0.0;
        }
    }
}

/// The eigenvalues of an upper Hessenberg matrix by the Francis double-shift QR iteration,
/// deflating 1 x 1 and 2 x 2 blocks off the bottom (EISPACK `hqr`, as in Numerical
/// Recipes' `hqr`, 0-based). An exceptional shift every 10 iterations without deflation
/// breaks the cycles that stall the standard shifts (a cyclic permutation, say). Kept in one
/// piece, over 80 lines: it follows `hqr` line by line, which is how it is checked.
fn hessenberg_eigenvalues(mut a: Matrix) -> Result<Vec<Complex>, NoConvergence> {
    let n = a.rows;
    let max_iterations = 30 * n.max(10);
    let mut eigenvalues = vec![Complex::new(0.0, 0.0); n];
    let mut anorm = 0.0;
    for i in 0..n {
        for j in i.saturating_sub(1)..n {
            anorm += a[(i, j)].abs();
        }
    }
    // Exceptional shifts are accumulated in `t`: the working matrix is a - t I.
    let mut t = 0.0;
    let mut nn = n as isize - 1;
    while nn >= 0 {
        let mut its = 0;
        loop {
            let nu = nn as usize;
            // Look for a negligible subdiagonal element a[l][l-1] to split at.
            let mut l = nu;
            while l > 0 {
                let mut s = a[(l - 1, l - 1)].abs() + a[(l, l)].abs();
                if s == 0.0 {
                    s = anorm;
                }
                if a[(l, l - 1)].abs() <= f64::EPSILON * s {
                    a[(l, l - 1)] = 0.0;
                    break;
                }
                l -= 1;
            }
            let mut x = a[(nu, nu)];
            if l == nu {
                // A 1 x 1 block.
                eigenvalues[nu] = Complex::new(x + t, 0.0);
                nn -= 1;
            } else {
                let mut y = a[(nu - 1, nu - 1)];
                let mut w = a[(nu, nu - 1)] * a[(nu - 1, nu)];
                if l == nu - 1 {
                    // A 2 x 2 block: its two eigenvalues in closed form.
                    let p = 0.5 * (y - x);
                    let q = p * p + w;
                    let z = q.abs().sqrt();
                    x += t;
                    if q >= 0.0 {
                        let z = p + z.copysign(p);
                        eigenvalues[nu - 1] = Complex::new(x + z, 0.0);
                        eigenvalues[nu] = if z != 0.0 {
                            Complex::new(x - w / z, 0.0)
                        } else {
                            Complex::new(x + z, 0.0)
                        };
                    } else {
                        eigenvalues[nu] = Complex::new(x + p, -z);
                        eigenvalues[nu - 1] = Complex::new(x + p, z);
                    }
                    nn -= 2;
                } else {
                    if its >= max_iterations {
                        return Err(NoConvergence { n, iterations: its });
                    }
                    if its > 0 && its % 10 == 0 {
                        // Exceptional shift.
                        t += x;
                        for i in 0..=nu {
                            a[(i, i)] -= x;
                        }
                        let s = a[(nu, nu - 1)].abs() + a[(nu - 1, nu - 2)].abs();
                        x = 0.75 * s;
                        y = x;
                        w = -0.4375 * s * s;
                    }
                    its += 1;
                    francis_step(&mut a, l, nu, x, y, w);
                }
            }
            // Keep iterating on this block while it has not split off its bottom.
            if nn < 0 || l + 1 >= nn as usize {
                break;
            }
        }
    }
    Ok(eigenvalues)
}

/// One Francis double-shift QR step on the active block `l..=nu` of the Hessenberg matrix
/// `a`, with shifts the eigenvalues of the 2 x 2 matrix whose trace is `x + y` and whose
/// determinant is `x y - w`. Starts where two consecutive small subdiagonal elements make
/// the step independent of the rows above (EISPACK `hqr`), then chases the bulge down with
/// 3 x 3 Householder reflections. Kept in one piece, over 80 lines, for the same reason as
/// [`hessenberg_eigenvalues`].
fn francis_step(a: &mut Matrix, l: usize, nu: usize, x: f64, y: f64, w: f64) {
    let (mut p, mut q, mut r);
    let mut m = nu - 2;
    loop {
        let z = a[(m, m)];
        let rr = x - z;
        let s = y - z;
        p = (rr * s - w) / a[(m + 1, m)] + a[(m, m + 1)];
        q = a[(m + 1, m + 1)] - z - rr - s;
        r = a[(m + 2, m + 1)];
        let scale = p.abs() + q.abs() + r.abs();
        p /= scale;
        q /= scale;
        r /= scale;
        if m == l {
            break;
        }
        let u = a[(m, m - 1)].abs() * (q.abs() + r.abs());
        let v = p.abs() * (a[(m - 1, m - 1)].abs() + z.abs() + a[(m + 1, m + 1)].abs());
        if u <= f64::EPSILON * v {
            break;
        }
        m -= 1;
    }
    for i in m..nu - 1 {
        a[(i + 2, i)] = 0.0;
        if i != m {
            a[(i + 2, i - 1)] = 0.0;
        }
    }
    for k in m..nu {
        let mut scale = 1.0;
        if k != m {
            p = a[(k, k - 1)];
            q = a[(k + 1, k - 1)];
            r = if k + 1 != nu { a[(k + 2, k - 1)] } else { 0.0 };
            scale = p.abs() + q.abs() + r.abs();
            if scale != 0.0 {
                p /= scale;
                q /= scale;
                r /= scale;
            }
        }
        let s = (p * p + q * q + r * r).sqrt().copysign(p);
        if s == 0.0 {
            continue;
        }
        if k == m {
            if l != m {
                a[(k, k - 1)] = -a[(k, k - 1)];
            }
        } else {
            a[(k, k - 1)] = -s * scale;
        }
        p += s;
        let (hx, hy, hz) = (p / s, q / s, r / s);
        q /= p;
        r /= p;
        // Rows k..k+2 from the left.
        for j in k..=nu {
            let mut pj = a[(k, j)] + q * a[(k + 1, j)];
            if k + 1 != nu {
                pj += r * a[(k + 2, j)];
                a[(k + 2, j)] -= pj * hz;
            }
            a[(k + 1, j)] -= pj * hy;
            a[(k, j)] -= pj * hx;
        }
        // Columns k..k+2 from the right.
        let last = nu.min(k + 3);
        for i in l..=last {
            let mut pi = hx * a[(i, k)] + hy * a[(i, k + 1)];
            if k + 1 != nu {
                pi += hz * a[(i, k + 2)];
                a[(i, k + 2)] -= pi * r;
            }
            a[(i, k + 1)] -= pi * q;
            a[(i, k)] -= pi;
        }
    }
}

/// Most sweeps of one-sided Jacobi. It converges quadratically; 60 sweeps are far more
/// than any matrix here needs, and the column norms are close to the answer even if it
/// stops early.
const MAX_JACOBI_SWEEPS: usize = 60;

/// One-sided Jacobi (Hestenes 1958): plane rotations `V` applied to the columns of `a`
/// until they are mutually orthogonal. Returns `(a V, V)`: the norms of the columns of
/// `a V` are the singular values of `a` (so `a = (a V) V^T` is its SVD with `U Sigma = a V`).
pub fn orthogonalize_columns(a: &Matrix) -> (Matrix, Matrix) {
    let (m, n) = (a.rows, a.cols);
    // Columns stored contiguously, since every rotation reads and writes two of them.
    let mut cols: Vec<Vec<f64>> = (0..n)
        .map(|j| (0..m).map(|i| a[(i, j)]).collect())
        .collect();
    let mut v: Vec<Vec<f64>> = (0..n)
        .map(|j| (0..n).map(|i| if i == j { 1.0 } else { 0.0 }).collect())
        .collect();
    let tolerance = f64::EPSILON * (m.max(1) as f64).sqrt();
    for _ in 0..MAX_JACOBI_SWEEPS {
        let mut rotated = false;
        for p in 0..n {
            for q in p + 1..n {
                let alpha: f64 = cols[p].iter().map(|x| x * x).sum();
                let beta: f64 = cols[q].iter().map(|x| x * x).sum();
                let gamma: f64 = cols[p].iter().zip(&cols[q]).map(|(x, y)| x * y).sum();
                if gamma == 0.0 || gamma.abs() <= tolerance * (alpha * beta).sqrt() {
                    continue;
                }
                rotated = true;
                // The rotation that zeroes the (p, q) entry of the 2 x 2 Gram matrix.
                let zeta = (beta - alpha) / (2.0 * gamma);
                let t = zeta.signum() / (zeta.abs() + (1.0 + zeta * zeta).sqrt());
                let c = 1.0 / (1.0 + t * t).sqrt();
                let s = c * t;
                rotate(&mut cols, p, q, c, s);
                rotate(&mut v, p, q, c, s);
            }
        }
        if !rotated {
            break;
        }
    }
    let av = Matrix::from_vec(n, m, cols.concat()).transpose();
    let v = Matrix::from_vec(n, n, v.concat()).transpose();
    (av, v)
}

/// Columns `p`, `q` of a column-stored matrix replaced by `c x_p - s x_q`, `s x_p + c x_q`.
fn rotate(cols: &mut [Vec<f64>], p: usize, q: usize, c: f64, s: f64) {
    let (left, right) = cols.split_at_mut(q);
    for (x, y) in left[p].iter_mut().zip(right[0].iter_mut()) {
        let (xp, xq) = (*x, *y);
        *x = c * xp - s * xq;
        *y = s * xp + c * xq;
    }
}

/// Norms of the columns of a matrix.
pub fn column_norms(a: &Matrix) -> Vec<f64> {
    (0..a.cols)
        .map(|j| (0..a.rows).map(|i| a[(i, j)].powi(2)).sum::<f64>().sqrt())
        .collect()
}

/// The singular values of `a`, largest first: `min(rows, cols)` of them.
pub fn singular_values(a: &Matrix) -> Vec<f64> {
    // Rotating the shorter side costs less; a matrix and its transpose share singular values.
    let tall = if a.cols > a.rows {
        a.transpose()
    } else {
        a.clone()
    };
    let (av, _) = orthogonalize_columns(&tall);
    let mut values = column_norms(&av);
    values.sort_by(|x, y| y.total_cmp(x));
    values
}

/// A deterministic matrix of values in [-1, 1) from a linear congruential generator.
#[cfg(test)]
pub(crate) fn pseudo_random(rows: usize, cols: usize, seed: u64) -> Matrix {
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let data = (0..rows * cols)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
        })
        .collect();
    Matrix::from_vec(rows, cols, data)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sorts eigenvalues by real part, then imaginary part, for comparing.
    fn sorted(mut values: Vec<Complex>) -> Vec<Complex> {
        values.sort_by(|a, b| a.re.total_cmp(&b.re).then(a.im.total_cmp(&b.im)));
        values
    }

    fn assert_eigenvalues(a: &Matrix, expected: &[Complex], tolerance: f64) {
        let got = sorted(eigenvalues(a).unwrap());
        let expected = sorted(expected.to_vec());
        assert_eq!(got.len(), expected.len());
        for (g, e) in got.iter().zip(&expected) {
            assert!(
                (g.re - e.re).abs() < tolerance && (g.im - e.im).abs() < tolerance,
                "eigenvalues {got:?}, expected {expected:?}"
            );
        }
    }

    #[test]
    fn matmul_transpose_and_norms_match_hand_values() {
        let a = Matrix::from_rows(&[&[1.0, 2.0], &[3.0, 4.0], &[5.0, 6.0]]);
        let b = Matrix::from_rows(&[&[1.0, 0.0, -1.0], &[2.0, 1.0, 0.0]]);
        let ab = a.matmul(&b);
        assert_eq!(
            ab,
            Matrix::from_rows(&[&[5.0, 2.0, -1.0], &[11.0, 4.0, -3.0], &[17.0, 6.0, -5.0]])
        );
        assert_eq!(ab.trace(), 4.0);
        assert_eq!(a.transpose().row(1), [2.0, 4.0, 6.0]);
        assert!((a.frobenius_norm() - 91.0f64.sqrt()).abs() < 1e-12);
        assert_eq!(
            Matrix::hstack(&[a.clone(), Matrix::identity(3)]).row(2),
            [5.0, 6.0, 0.0, 0.0, 1.0]
        );
        assert_eq!(a.dot(&a), 91.0);
    }

    #[test]
    fn a_rotation_has_eigenvalues_on_the_unit_circle() {
        let theta = 0.7f64;
        let a = Matrix::from_rows(&[&[theta.cos(), -theta.sin()], &[theta.sin(), theta.cos()]]);
        let (c, s) = (theta.cos(), theta.sin());
        assert_eigenvalues(&a, &[Complex::new(c, s), Complex::new(c, -s)], 1e-12);
        // 90 degrees: +-i.
        let quarter = Matrix::from_rows(&[&[0.0, -1.0], &[1.0, 0.0]]);
        assert_eigenvalues(
            &quarter,
            &[Complex::new(0.0, 1.0), Complex::new(0.0, -1.0)],
            1e-12,
        );
    }

    #[test]
    fn a_triangular_matrix_has_its_diagonal_as_eigenvalues() {
        let a = Matrix::from_rows(&[
            &[2.0, 1.0, 5.0, -3.0],
            &[0.0, -1.0, 4.0, 2.0],
            &[0.0, 0.0, 0.5, 7.0],
            &[0.0, 0.0, 0.0, 3.0],
        ]);
        let expected: Vec<Complex> = [2.0, -1.0, 0.5, 3.0]
            .iter()
            .map(|&x| Complex::new(x, 0.0))
            .collect();
        assert_eigenvalues(&a, &expected, 1e-10);
        // Its transpose (lower triangular) too.
        assert_eigenvalues(&a.transpose(), &expected, 1e-10);
    }

    /// The companion matrix of the monic polynomial with the given roots' coefficients.
    fn companion(coefficients: &[f64]) -> Matrix {
        // x^n + c_{n-1} x^{n-1} + ... + c_0: ones on the subdiagonal, -c in the last column.
        let n = coefficients.len();
        let mut a = Matrix::zeros(n, n);
        for i in 1..n {
            a[(i, i - 1)] = 1.0;
        }
        for (i, c) in coefficients.iter().enumerate() {
            a[(i, n - 1)] = -c;
        }
        a
    }

    #[test]
    fn companion_matrices_have_their_polynomials_roots() {
        // (x - 1)(x - 2)(x - 3)(x + 4) = x^4 - 2x^3 - 13x^2 + 38x - 24.
        let a = companion(&[-24.0, 38.0, -13.0, -2.0]);
        let expected: Vec<Complex> = [1.0, 2.0, 3.0, -4.0]
            .iter()
            .map(|&x| Complex::new(x, 0.0))
            .collect();
        assert_eigenvalues(&a, &expected, 1e-9);
        // x^2 + 1 times (x - 2): x^3 - 2x^2 + x - 2, roots 2, +-i.
        let a = companion(&[-2.0, 1.0, -2.0]);
        let expected = [
            Complex::new(2.0, 0.0),
            Complex::new(0.0, 1.0),
            Complex::new(0.0, -1.0),
        ];
        assert_eigenvalues(&a, &expected, 1e-9);
    }

    #[test]
    fn a_cyclic_permutation_has_the_roots_of_unity_as_eigenvalues() {
        // The companion of x^n - 1: a cycle, on which the plain shifts stall and the
        // exceptional shift must take over.
        for n in [3, 5, 8, 12] {
            let mut coefficients = vec![0.0; n];
            coefficients[0] = -1.0;
            let a = companion(&coefficients);
            let expected: Vec<Complex> = (0..n)
                .map(|k| {
                    let angle = 2.0 * std::f64::consts::PI * k as f64 / n as f64;
                    Complex::new(angle.cos(), angle.sin())
                })
                .collect();
            assert_eigenvalues(&a, &expected, 1e-9);
        }
    }

    #[test]
    fn eigenvalues_of_random_matrices_sum_to_the_trace_in_conjugate_pairs() {
        for (n, seed) in [(1, 1), (2, 2), (7, 3), (16, 4), (40, 5)] {
            let a = pseudo_random(n, n, seed);
            let values = eigenvalues(&a).unwrap();
            assert_eq!(values.len(), n);
            let sum_re: f64 = values.iter().map(|z| z.re).sum();
            let sum_im: f64 = values.iter().map(|z| z.im).sum();
            assert!((sum_re - a.trace()).abs() < 1e-9, "n = {n}");
            assert!(sum_im.abs() < 1e-9, "conjugate pairs, n = {n}");
            // tr(A^2) = sum of lambda^2.
            let sum_sq: f64 = values.iter().map(|z| z.re * z.re - z.im * z.im).sum();
            assert!((sum_sq - a.matmul(&a).trace()).abs() < 1e-8, "n = {n}");
        }
    }

    #[test]
    fn a_similarity_transform_keeps_the_eigenvalues() {
        // S diag(3, -2, 0.5, 1 +- 2i block) S^-1 with S unit upper triangular.
        let d = Matrix::from_rows(&[
            &[3.0, 0.0, 0.0, 0.0, 0.0],
            &[0.0, -2.0, 0.0, 0.0, 0.0],
            &[0.0, 0.0, 0.5, 0.0, 0.0],
            &[0.0, 0.0, 0.0, 1.0, 2.0],
            &[0.0, 0.0, 0.0, -2.0, 1.0],
        ]);
        let s = Matrix::from_rows(&[
            &[1.0, 2.0, -1.0, 0.5, 3.0],
            &[0.0, 1.0, 4.0, -2.0, 1.0],
            &[0.0, 0.0, 1.0, 1.5, -1.0],
            &[0.0, 0.0, 0.0, 1.0, 2.0],
            &[0.0, 0.0, 0.0, 0.0, 1.0],
        ]);
        // Inverse of a unit upper triangular matrix by back substitution.
        let n = 5;
        let mut inverse = Matrix::identity(n);
        for col in 0..n {
            for i in (0..n).rev() {
                let mut x = if i == col { 1.0 } else { 0.0 };
                for k in i + 1..n {
                    x -= s[(i, k)] * inverse[(k, col)];
                }
                inverse[(i, col)] = x;
            }
        }
        let check = s.matmul(&inverse);
        for i in 0..n {
            for j in 0..n {
                let expected = if i == j { 1.0 } else { 0.0 };
                assert!((check[(i, j)] - expected).abs() < 1e-12);
            }
        }
        let a = s.matmul(&d).matmul(&inverse);
        let expected = [
            Complex::new(3.0, 0.0),
            Complex::new(-2.0, 0.0),
            Complex::new(0.5, 0.0),
            Complex::new(1.0, 2.0),
            Complex::new(1.0, -2.0),
        ];
        assert_eigenvalues(&a, &expected, 1e-9);
    }

    #[test]
    fn zero_and_badly_scaled_matrices_have_their_eigenvalues() {
        assert_eigenvalues(&Matrix::zeros(4, 4), &[Complex::new(0.0, 0.0); 4], 1e-300);
        assert!(eigenvalues(&Matrix::zeros(0, 0)).unwrap().is_empty());
        // diag(1e6, 1e-6) conjugated by a scaling: balancing undoes the scaling.
        let a = Matrix::from_rows(&[&[1.0, 1e8], &[1e-8, 2.0]]);
        // Eigenvalues of [[1, 1], [1, 2]]: (3 +- sqrt 5) / 2.
        let r = 5.0f64.sqrt();
        assert_eigenvalues(
            &a,
            &[
                Complex::new((3.0 + r) / 2.0, 0.0),
                Complex::new((3.0 - r) / 2.0, 0.0),
            ],
            1e-9,
        );
    }

    #[test]
    fn singular_values_match_hand_values() {
        // [[3, 0], [4, 5]]: A^T A = [[25, 20], [20, 25]], eigenvalues 45 and 5.
        let a = Matrix::from_rows(&[&[3.0, 0.0], &[4.0, 5.0]]);
        let values = singular_values(&a);
        assert!((values[0] - 45.0f64.sqrt()).abs() < 1e-12, "{values:?}");
        assert!((values[1] - 5.0f64.sqrt()).abs() < 1e-12, "{values:?}");
        // A diagonal matrix with signs: the absolute values, sorted.
        let d = Matrix::from_rows(&[&[-2.0, 0.0, 0.0], &[0.0, 0.5, 0.0], &[0.0, 0.0, 3.0]]);
        assert_eq!(singular_values(&d), [3.0, 2.0, 0.5]);
        // A rank-1 outer product u v^T: one value |u| |v|, the rest 0.
        let u = Matrix::from_rows(&[&[1.0], &[2.0], &[2.0]]);
        let v = Matrix::from_rows(&[&[3.0, 4.0]]);
        let values = singular_values(&u.matmul(&v));
        assert_eq!(values.len(), 2);
        assert!((values[0] - 15.0).abs() < 1e-12 && values[1].abs() < 1e-12);
        // Wide matrices are handled through their transpose.
        assert_eq!(singular_values(&u.matmul(&v).transpose()).len(), 2);
    }

    #[test]
    fn jacobi_gives_a_factorisation_with_orthogonal_columns() {
        let a = pseudo_random(9, 5, 7);
        let (av, v) = orthogonalize_columns(&a);
        // V is orthogonal and a V (V^T) = a.
        let vtv = v.transpose().matmul(&v);
        let back = av.matmul(&v.transpose());
        for i in 0..5 {
            for j in 0..5 {
                let expected = if i == j { 1.0 } else { 0.0 };
                assert!((vtv[(i, j)] - expected).abs() < 1e-12);
            }
        }
        for i in 0..9 {
            for j in 0..5 {
                assert!((back[(i, j)] - a[(i, j)]).abs() < 1e-12);
            }
        }
        // The columns of a V are orthogonal, and their squared norms sum to ||a||_F^2.
        let gram = av.transpose().matmul(&av);
        for i in 0..5 {
            for j in (0..5).filter(|&j| j != i) {
                assert!(gram[(i, j)].abs() < 1e-12, "({i}, {j}) = {}", gram[(i, j)]);
            }
        }
        let total: f64 = column_norms(&av).iter().map(|s| s * s).sum();
        assert!((total - a.frobenius_norm().powi(2)).abs() < 1e-10);
    }

    #[test]
    fn squared_singular_values_are_the_eigenvalues_of_the_gram_matrix() {
        let a = pseudo_random(12, 6, 11);
        let values = singular_values(&a);
        let mut gram_eigenvalues: Vec<f64> = eigenvalues(&a.transpose().matmul(&a))
            .unwrap()
            .iter()
            .map(|z| z.re)
            .collect();
        gram_eigenvalues.sort_by(|x, y| y.total_cmp(x));
        for (s, e) in values.iter().zip(&gram_eigenvalues) {
            assert!(
                (s * s - e).abs() < 1e-9,
                "{values:?} vs {gram_eigenvalues:?}"
            );
        }
    }

    #[test]
    fn a_low_rank_product_has_the_norm_and_products_of_its_full_matrix() {
        let a = LowRank::new(pseudo_random(10, 3, 21), pseudo_random(3, 10, 22));
        let b = LowRank::new(pseudo_random(10, 4, 23), pseudo_random(4, 7, 24));
        let full = a.product();
        assert!((a.frobenius_norm() - full.frobenius_norm()).abs() < 1e-12);
        assert_eq!(a.transpose().product(), full.transpose());
        let composed = a.then(&b);
        let naive = full.matmul(&b.product());
        for i in 0..10 {
            for j in 0..7 {
                assert!((composed.product()[(i, j)] - naive[(i, j)]).abs() < 1e-12);
            }
        }
        assert!((composed.frobenius_norm() - naive.frobenius_norm()).abs() < 1e-10);
        let zero = LowRank::new(Matrix::zeros(5, 2), pseudo_random(2, 5, 25));
        assert_eq!(zero.frobenius_norm(), 0.0);
    }

    #[test]
    fn orthogonal_matrices_have_every_eigenvalue_on_the_unit_circle() {
        // Orthogonal matrices (Jacobi's V of a random matrix) and random permutations: the
        // cases where shifted QR is slowest to split, up to 36 x 36.
        for seed in 0..200u64 {
            let n = 1 + (seed as usize % 36);
            let a = if seed % 2 == 0 {
                orthogonalize_columns(&pseudo_random(n, n, seed + 100)).1
            } else {
                // Sort random keys to get a random permutation.
                let keys = pseudo_random(1, n, seed + 100);
                let mut perm: Vec<usize> = (0..n).collect();
                perm.sort_by(|&i, &j| keys[(0, i)].total_cmp(&keys[(0, j)]));
                let mut p = Matrix::zeros(n, n);
                for (i, &j) in perm.iter().enumerate() {
                    p[(i, j)] = 1.0;
                }
                p
            };
            let values = eigenvalues(&a).unwrap();
            let off_circle = values
                .iter()
                .map(|z| (z.abs() - 1.0).abs())
                .fold(0.0, f64::max);
            assert!(off_circle < 1e-9, "seed {seed}, n {n}: {off_circle}");
            let sum: f64 = values.iter().map(|z| z.re).sum();
            assert!((sum - a.trace()).abs() < 1e-9, "seed {seed}, n {n}");
        }
    }
}
