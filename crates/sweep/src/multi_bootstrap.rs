//! The Multi-Bootstrap (Sellam et al., "The MultiBERTs: BERT Reproductions for Robustness
//! Analysis", ICLR 2022): a 95% interval for a statistic measured on several seeds over the
//! same examples, which resamples the seeds and the examples together.
//!
//! A t interval over seeds ([`crate::stats::Estimate`]) treats each seed's number as exact;
//! it says how much the number moves when the model is trained again, on these examples. An
//! interval over examples alone says how much it moves with other sentences, for these
//! seeds. A claim about the training procedure on the language ("heads of a model trained
//! this way find determiners' nouns") needs both, and the two are not independent: the
//! seeds are measured on the same sentences. Each draw therefore picks seeds with
//! replacement and, independently, examples with replacement, and recomputes the statistic
//! on that table; the interval is the 2.5th and 97.5th percentiles of the draws.
//!
//! The statistic is a mean over the table's cells, or a ratio of sums (`hits` over `of`:
//! the arcs a head finds over the arcs there are, per seed and sentence), the form of every
//! relation figure of experiment 9. Draws come from a fixed stream (ChaCha8, value-stable
//! across platforms and `rand` versions), so the same table gives the same interval.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Draws `headlab sweep stats` takes unless told otherwise (MultiBERTs takes 1000; the
/// percentiles of 2000 move by under a tenth of the interval's width between streams).
pub const DEFAULT_DRAWS: usize = 2000;

/// The most draws asked for at once: a bound on the time and memory one request takes.
pub const MAX_DRAWS: usize = 1_000_000;

/// The seed of the draws' stream: fixed, so an interval recomputes to the digit.
const STREAM: u64 = 0x6d75_6c74_6962_6f6f;

/// Measurements of every seed on the same examples: cell (seed, example) holds a numerator
/// and a denominator (1 for a plain mean). The statistic of a table is the sum of its
/// numerators over the sum of its denominators.
#[derive(Debug, Clone, PartialEq)]
pub struct SeedExampleTable {
    /// `[seed][example]`.
    numerators: Vec<Vec<f64>>,
    /// `[seed][example]`; `None` for a plain mean (every denominator 1).
    denominators: Option<Vec<Vec<f64>>>,
    n_examples: usize,
}

impl SeedExampleTable {
    /// A plain mean's table: `rows[seed][example]`, every row as long, every value finite.
    pub fn means(rows: Vec<Vec<f64>>) -> Result<Self, String> {
        let n_examples = check_shape(&rows, "rows")?;
        if let Some((s, x)) = find_cell(&rows, |v| !v.is_finite()) {
            return Err(format!("seed {s}, example {x}: not a finite number"));
        }
        Ok(Self {
            numerators: rows,
            denominators: None,
            n_examples,
        })
    }

    /// A ratio of sums' table: `hits[seed][example]` of `of[seed][example]`, the two of one
    /// shape, each cell `0 <= hits <= of`, some `of` above 0.
    pub fn ratios(hits: Vec<Vec<f64>>, of: Vec<Vec<f64>>) -> Result<Self, String> {
        let n_examples = check_shape(&hits, "hits")?;
        if check_shape(&of, "of")? != n_examples || of.len() != hits.len() {
            return Err(format!(
                "hits is {} seeds by {n_examples} examples, of is {} by {}: they must match",
                hits.len(),
                of.len(),
                of[0].len()
            ));
        }
        for (s, (hit_row, of_row)) in hits.iter().zip(&of).enumerate() {
            for (x, (&hit, &total)) in hit_row.iter().zip(of_row).enumerate() {
                if !(hit.is_finite() && total.is_finite() && 0.0 <= hit && hit <= total) {
                    return Err(format!(
                        "seed {s}, example {x}: {hit} hits of {total}: a cell needs finite \
                         numbers with 0 <= hits <= of"
                    ));
                }
            }
        }
        if of.iter().flatten().all(|&total| total == 0.0) {
            return Err("every cell has of = 0: there is nothing to take a share of".into());
        }
        Ok(Self {
            numerators: hits,
            denominators: Some(of),
            n_examples,
        })
    }

    /// Seeds (rows).
    pub fn n_seeds(&self) -> usize {
        self.numerators.len()
    }

    /// Examples (columns).
    pub fn n_examples(&self) -> usize {
        self.n_examples
    }

    /// The statistic on the whole table.
    pub fn estimate(&self) -> Option<f64> {
        self.weighted(&vec![1; self.n_seeds()], &vec![1; self.n_examples])
    }

    /// Each seed's statistic over every example (`None` for a seed with nothing to divide).
    pub fn per_seed(&self) -> Vec<Option<f64>> {
        (0..self.n_seeds())
            .map(|s| {
                let mut counts = vec![0; self.n_seeds()];
                counts[s] = 1;
                self.weighted(&counts, &vec![1; self.n_examples])
            })
            .collect()
    }

    /// The statistic of the table in which seed `s` appears `seed_counts[s]` times and
    /// example `x` `example_counts[x]` times: a draw of the bootstrap, without building the
    /// resampled table. `None` when its denominators sum to 0.
    fn weighted(&self, seed_counts: &[u32], example_counts: &[u32]) -> Option<f64> {
        let row_sum = |row: &[f64]| -> f64 {
            row.iter()
                .zip(example_counts)
                .map(|(v, &c)| v * c as f64)
                .sum()
        };
        let (mut numerator, mut denominator) = (0.0, 0.0);
        for (s, &count) in seed_counts.iter().enumerate().filter(|(_, c)| **c > 0) {
            numerator += count as f64 * row_sum(&self.numerators[s]);
            denominator += count as f64
                * match &self.denominators {
                    Some(of) => row_sum(&of[s]),
                    None => example_counts.iter().map(|&c| c as f64).sum(),
                };
        }
        (denominator > 0.0).then(|| numerator / denominator)
    }
}

/// A table's statistic with its Multi-Bootstrap interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MultiBootstrap {
    /// The statistic on the whole table.
    pub estimate: f64,
    /// The 2.5th and 97.5th percentiles of the draws.
    pub interval95: [f64; 2],
    /// Draws taken.
    pub draws: usize,
    /// Draws whose resampled table had nothing to divide (a ratio whose chosen cells all
    /// have `of` = 0); left out of the percentiles.
    pub undefined_draws: usize,
}

/// The Multi-Bootstrap of `table` with `draws` draws (at least 1): each draw picks
/// `n_seeds` seeds and `n_examples` examples, each with replacement, from the fixed stream.
/// `None` when the whole table or every draw has nothing to divide.
pub fn multi_bootstrap(table: &SeedExampleTable, draws: usize) -> Option<MultiBootstrap> {
    let estimate = table.estimate()?;
    let mut rng = ChaCha8Rng::seed_from_u64(STREAM);
    let mut values = Vec::with_capacity(draws);
    let (n_seeds, n_examples) = (table.n_seeds(), table.n_examples());
    let mut seed_counts = vec![0u32; n_seeds];
    let mut example_counts = vec![0u32; n_examples];
    for _ in 0..draws {
        seed_counts.fill(0);
        example_counts.fill(0);
        for _ in 0..n_seeds {
            seed_counts[rng.random_range(0..n_seeds)] += 1;
        }
        for _ in 0..n_examples {
            example_counts[rng.random_range(0..n_examples)] += 1;
        }
        values.extend(table.weighted(&seed_counts, &example_counts));
    }
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    Some(MultiBootstrap {
        estimate,
        interval95: [percentile(&values, 0.025), percentile(&values, 0.975)],
        draws,
        undefined_draws: draws - values.len(),
    })
}

/// The `p` quantile of `sorted` (not empty), interpolated linearly between order statistics
/// (Hyndman and Fan's type 7, the default of R and NumPy).
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    let h = (sorted.len() - 1) as f64 * p;
    let (below, fraction) = (h.floor() as usize, h - h.floor());
    match sorted.get(below + 1) {
        Some(above) => sorted[below] + fraction * (above - sorted[below]),
        None => sorted[below],
    }
}

/// The number of columns of `rows`, checked to be at least one seed of at least one example,
/// every row as long.
fn check_shape(rows: &[Vec<f64>], what: &str) -> Result<usize, String> {
    let Some(first) = rows.first() else {
        return Err(format!(
            "{what}: no seeds; give one list of examples per seed"
        ));
    };
    if first.is_empty() {
        return Err(format!("{what}: seed 0 has no examples"));
    }
    if let Some((s, row)) = rows
        .iter()
        .enumerate()
        .find(|(_, r)| r.len() != first.len())
    {
        return Err(format!(
            "{what}: seed {s} has {} examples and seed 0 {}: every seed is measured on the \
             same examples",
            row.len(),
            first.len()
        ));
    }
    Ok(first.len())
}

/// The first cell (seed, example) of `rows` where `bad` holds.
fn find_cell(rows: &[Vec<f64>], bad: impl Fn(f64) -> bool) -> Option<(usize, usize)> {
    rows.iter()
        .enumerate()
        .find_map(|(s, row)| row.iter().position(|&v| bad(v)).map(|x| (s, x)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The draws of the Multi-Bootstrap, computed the direct way: each draw's table built
    /// cell by cell from the same picks, its sums taken.
    fn direct_draws(hits: &[Vec<f64>], of: &[Vec<f64>], draws: usize) -> Vec<Option<f64>> {
        let mut rng = ChaCha8Rng::seed_from_u64(STREAM);
        let (n_seeds, n_examples) = (hits.len(), hits[0].len());
        (0..draws)
            .map(|_| {
                let seeds: Vec<usize> =
                    (0..n_seeds).map(|_| rng.random_range(0..n_seeds)).collect();
                let examples: Vec<usize> = (0..n_examples)
                    .map(|_| rng.random_range(0..n_examples))
                    .collect();
                let (mut numerator, mut denominator) = (0.0, 0.0);
                for &s in &seeds {
                    for &x in &examples {
                        numerator += hits[s][x];
                        denominator += of[s][x];
                    }
                }
                (denominator > 0.0).then(|| numerator / denominator)
            })
            .collect()
    }

    fn sorted(values: impl IntoIterator<Item = Option<f64>>) -> Vec<f64> {
        let mut values: Vec<f64> = values.into_iter().flatten().collect();
        values.sort_by(f64::total_cmp);
        values
    }

    #[test]
    fn a_ratio_table_gives_the_percentiles_of_the_directly_resampled_tables() {
        let hits = vec![
            vec![1.0, 0.0, 2.0, 3.0, 0.0],
            vec![2.0, 1.0, 0.0, 3.0, 1.0],
            vec![0.0, 0.0, 1.0, 2.0, 0.0],
        ];
        let of = vec![
            vec![2.0, 1.0, 2.0, 4.0, 0.0],
            vec![2.0, 1.0, 2.0, 4.0, 1.0],
            vec![2.0, 1.0, 2.0, 4.0, 1.0],
        ];
        let table = SeedExampleTable::ratios(hits.clone(), of.clone()).unwrap();
        let result = multi_bootstrap(&table, 500).unwrap();
        let direct = sorted(direct_draws(&hits, &of, 500));
        assert_eq!(result.undefined_draws, 500 - direct.len());
        for (got, p) in result.interval95.iter().zip([0.025, 0.975]) {
            let want = percentile(&direct, p);
            assert!((got - want).abs() < 1e-12, "{got} against {want}");
        }
        // Hand-computed: 16 hits of 29 arcs.
        assert!((result.estimate - 16.0 / 29.0).abs() < 1e-15);
        let per_seed = table.per_seed();
        assert_eq!(
            per_seed,
            [Some(6.0 / 9.0), Some(7.0 / 10.0), Some(3.0 / 10.0)]
        );
    }

    /// Two seeds by two examples: 4 seed picks times 4 example picks, equally likely. The
    /// draws' mean and spread approach those of the 16 tables enumerated.
    #[test]
    fn the_draws_follow_the_enumerated_distribution_of_a_two_by_two_table() {
        let rows = vec![vec![0.0, 1.0], vec![2.0, 5.0]];
        let mut exact = Vec::new();
        for seeds in [[0, 0], [0, 1], [1, 0], [1, 1]] {
            for examples in [[0, 0], [0, 1], [1, 0], [1, 1]] {
                let cells: Vec<f64> = seeds
                    .iter()
                    .flat_map(|&s| examples.iter().map(move |&x| (s, x)))
                    .map(|(s, x): (usize, usize)| rows[s][x])
                    .collect();
                exact.push(cells.iter().sum::<f64>() / 4.0);
            }
        }
        let moments = |values: &[f64]| {
            let mean = values.iter().sum::<f64>() / values.len() as f64;
            let variance =
                values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / values.len() as f64;
            (mean, variance)
        };
        let table = SeedExampleTable::means(rows.clone()).unwrap();
        let ones = vec![vec![1.0; 2]; 2];
        let draws = sorted(direct_draws(&rows, &ones, 40_000));
        let (mean, variance) = moments(&draws);
        let (exact_mean, exact_variance) = moments(&exact);
        assert!(
            (mean - exact_mean).abs() < 0.02,
            "{mean} against {exact_mean}"
        );
        assert!(
            (variance / exact_variance - 1.0).abs() < 0.03,
            "{variance} against {exact_variance}"
        );
        // The exact 2.5th and 97.5th percentiles of the 16 tables: the smallest and largest
        // values (1/16 of the mass each, over 2.5%).
        let result = multi_bootstrap(&table, 40_000).unwrap();
        assert_eq!(result.interval95, [0.0, 5.0]);
        assert_eq!(result.estimate, 2.0);
    }

    #[test]
    fn resampling_only_what_varies_matters() {
        // Seeds that agree cell by cell: only the examples move the statistic. Examples that
        // agree within each seed: only the seeds do. Both intervals cover the estimate.
        let same_seeds = SeedExampleTable::means(vec![vec![0.0, 1.0, 0.0, 1.0]; 4]).unwrap();
        let same_examples =
            SeedExampleTable::means(vec![vec![0.0; 4], vec![1.0; 4], vec![0.0; 4], vec![1.0; 4]])
                .unwrap();
        for table in [same_seeds, same_examples] {
            let result = multi_bootstrap(&table, 2000).unwrap();
            let [low, high] = result.interval95;
            assert!(low < 0.5 && 0.5 < high, "{low} to {high}");
        }
        let constant = SeedExampleTable::means(vec![vec![0.25; 3]; 3]).unwrap();
        assert_eq!(
            multi_bootstrap(&constant, 100).unwrap().interval95,
            [0.25, 0.25]
        );
    }

    #[test]
    fn malformed_tables_are_refused_by_seed_and_example() {
        let err = SeedExampleTable::means(vec![vec![1.0, 2.0], vec![1.0]]).unwrap_err();
        assert!(err.contains("seed 1 has 1 examples and seed 0 2"), "{err}");
        let err = SeedExampleTable::means(vec![]).unwrap_err();
        assert!(err.contains("no seeds"), "{err}");
        let err = SeedExampleTable::means(vec![vec![1.0, f64::NAN]]).unwrap_err();
        assert!(
            err.contains("seed 0, example 1: not a finite number"),
            "{err}"
        );
        let err = SeedExampleTable::ratios(vec![vec![2.0]], vec![vec![1.0]]).unwrap_err();
        assert!(err.contains("seed 0, example 0: 2 hits of 1"), "{err}");
        let err = SeedExampleTable::ratios(vec![vec![0.0]], vec![vec![0.0]]).unwrap_err();
        assert!(err.contains("of = 0"), "{err}");
        let err = SeedExampleTable::ratios(vec![vec![0.0]], vec![vec![1.0, 1.0]]).unwrap_err();
        assert!(err.contains("they must match"), "{err}");
    }

    #[test]
    fn percentiles_interpolate_between_order_statistics() {
        let values = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert_eq!(percentile(&values, 0.0), 1.0);
        assert_eq!(percentile(&values, 0.5), 3.0);
        assert_eq!(percentile(&values, 1.0), 5.0);
        // numpy.percentile([1, 2, 3, 4, 5], 2.5) == 1.1
        assert!((percentile(&values, 0.025) - 1.1).abs() < 1e-12);
        assert_eq!(percentile(&[7.0], 0.975), 7.0);
    }
}
