//! Means with 95% confidence intervals over seeds (Student's t), the statistic every sweep
//! table reports. The t quantiles are a table for 1 to 30 degrees of freedom and the
//! Cornish-Fisher expansion beyond (within 1e-4 of the exact value there); a statistics crate
//! would pull in a linear-algebra library for these thirty numbers.

/// t quantile at 0.975 for 1 to 30 degrees of freedom.
const T_975: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
    2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
    2.052, 2.048, 2.045, 2.042,
];

/// Student's t quantile at 0.975 (two-sided 95%) for `df` degrees of freedom (at least 1).
pub fn t_975(df: usize) -> f64 {
    if (1..=30).contains(&df) {
        return T_975[df - 1];
    }
    // Cornish-Fisher expansion around the normal quantile.
    let z: f64 = 1.959_963_985;
    let n = df.max(1) as f64;
    let z3 = z.powi(3);
    let z5 = z.powi(5);
    let z7 = z.powi(7);
    z + (z3 + z) / (4.0 * n)
        + (5.0 * z5 + 16.0 * z3 + 3.0 * z) / (96.0 * n * n)
        + (3.0 * z7 + 19.0 * z5 + 17.0 * z3 - 15.0 * z) / (384.0 * n.powi(3))
}

/// Mean and 95% confidence half-width of a sample.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    /// Values averaged.
    pub n: usize,
    /// The mean.
    pub mean: f64,
    /// Half-width of the 95% interval (NaN with fewer than two values).
    pub half_width: f64,
}

impl Estimate {
    /// Mean and interval of `values` (None when empty).
    pub fn of(values: &[f64]) -> Option<Estimate> {
        let n = values.len();
        if n == 0 {
            return None;
        }
        let mean = values.iter().sum::<f64>() / n as f64;
        let half_width = if n < 2 {
            f64::NAN
        } else {
            let variance = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
            t_975(n - 1) * (variance / n as f64).sqrt()
        };
        Some(Estimate {
            n,
            mean,
            half_width,
        })
    }

    /// `0.912 ± 0.031`, with `digits` decimals (just the mean for one value).
    pub fn show(&self, digits: usize) -> String {
        if self.half_width.is_nan() {
            format!("{:.digits$}", self.mean)
        } else {
            format!("{:.digits$} ± {:.digits$}", self.mean, self.half_width)
        }
    }
}

/// The Wilson score interval of a proportion `k / n` at 95%: (low, high). Better than the
/// normal interval near 0 and 1, where role frequencies often are.
pub fn wilson(k: usize, n: usize) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let z: f64 = 1.959_963_985;
    let n_f = n as f64;
    let p = k as f64 / n_f;
    let denominator = 1.0 + z * z / n_f;
    let centre = (p + z * z / (2.0 * n_f)) / denominator;
    let spread = z * (p * (1.0 - p) / n_f + z * z / (4.0 * n_f * n_f)).sqrt() / denominator;
    ((centre - spread).max(0.0), (centre + spread).min(1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t_quantiles_meet_the_table_at_30_and_approach_the_normal() {
        // Exact values: t(0.975; 40) = 2.0211, t(0.975; 120) = 1.9799.
        assert!((t_975(40) - 2.0211).abs() < 2e-4, "{}", t_975(40));
        assert!((t_975(120) - 1.9799).abs() < 1e-4, "{}", t_975(120));
        assert!((t_975(31) - 2.0395).abs() < 3e-4, "{}", t_975(31));
        assert!(t_975(1_000_000) > 1.95996 && t_975(1_000_000) < 1.9601);
    }

    #[test]
    fn estimate_matches_a_hand_computed_interval() {
        // 1, 2, 3, 4: mean 2.5, sd sqrt(5/3), se sqrt(5/12), t(3) = 3.182.
        let e = Estimate::of(&[1.0, 2.0, 3.0, 4.0]).unwrap();
        assert_eq!(e.n, 4);
        assert!((e.mean - 2.5).abs() < 1e-12);
        assert!((e.half_width - 3.182 * (5.0f64 / 12.0).sqrt()).abs() < 1e-9);
        assert_eq!(e.show(2), "2.50 ± 2.05");
        let one = Estimate::of(&[0.5]).unwrap();
        assert!(one.half_width.is_nan());
        assert_eq!(one.show(1), "0.5");
        assert!(Estimate::of(&[]).is_none());
    }

    #[test]
    fn wilson_interval_matches_known_values() {
        // 8 of 10: (0.4902, 0.9433); 0 of 16: (0, 0.1936).
        let (low, high) = wilson(8, 10);
        assert!(
            (low - 0.4902).abs() < 1e-3 && (high - 0.9433).abs() < 1e-3,
            "{low} {high}"
        );
        let (low, high) = wilson(0, 16);
        assert!(low == 0.0 && (high - 0.1936).abs() < 1e-3, "{high}");
    }
}
