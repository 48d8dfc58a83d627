//! Means with 95% confidence intervals over seeds (Student's t), the statistic every sweep
//! table reports. The t quantiles are a table for 1 to 30 degrees of freedom and the
//! Cornish-Fisher expansion beyond (within 1e-4 of the exact value there); a statistics crate
//! would pull in a linear-algebra library for these thirty numbers.
//!
//! [`intervals_json`] is the same statistic for numbers of one's own (`headlab sweep stats`):
//! the scripts behind the book's other tables call it rather than computing it again. For a
//! table of seeds by examples it gives the Multi-Bootstrap ([`crate::multi_bootstrap`]), the
//! interval of experiment 9's headline claims, with the t interval over seeds beside it.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use crate::multi_bootstrap::{SeedExampleTable, multi_bootstrap};

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
    ///
    /// The values are divided by the largest magnitude first, so that neither two values
    /// near `f64::MAX` overflow their sum nor subnormal ones underflow their squares, and
    /// summed in sorted order with Neumaier's compensation, so the same values give the same
    /// numbers in any order.
    pub fn of(values: &[f64]) -> Option<Estimate> {
        let n = values.len();
        if n == 0 {
            return None;
        }
        let scale = values
            .iter()
            .fold(0.0f64, |largest, v| largest.max(v.abs()));
        let mut scaled: Vec<f64> = values
            .iter()
            .map(|v| if scale > 0.0 { v / scale } else { 0.0 })
            .collect();
        scaled.sort_by(f64::total_cmp);
        let mean_scaled = compensated_sum(scaled.iter().copied()) / n as f64;
        let half_width = if n < 2 {
            f64::NAN
        } else {
            let squares = compensated_sum(scaled.iter().map(|v| (v - mean_scaled).powi(2)));
            let variance_scaled = squares / (n - 1) as f64;
            t_975(n - 1) * (variance_scaled / n as f64).sqrt() * scale
        };
        Some(Estimate {
            n,
            mean: mean_scaled * scale,
            half_width,
        })
    }

    /// `0.912 ± 0.031`, with `digits` decimals (just the mean for one value; `-` for a mean
    /// that is no number, never `NaN`).
    pub fn show(&self, digits: usize) -> String {
        if !self.mean.is_finite() {
            "-".to_string()
        } else if self.half_width.is_nan() {
            format!("{:.digits$}", self.mean)
        } else {
            format!("{:.digits$} ± {:.digits$}", self.mean, self.half_width)
        }
    }
}

/// The sum of `values` with Neumaier's compensation (the rounding error of each addition
/// carried into the next).
fn compensated_sum(values: impl Iterator<Item = f64>) -> f64 {
    let (mut sum, mut carry) = (0.0f64, 0.0f64);
    for value in values {
        let next = sum + value;
        carry += if sum.abs() >= value.abs() {
            (sum - next) + value
        } else {
            (value - next) + sum
        };
        sum = next;
    }
    sum + carry
}

/// The names of a JSON object, in order, refusing the second of two equal ones (serde_json
/// would keep the last silently); anything but an object passes, for the caller to name.
struct UniqueNames;

impl<'de> serde::Deserialize<'de> for UniqueNames {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Names;
        impl<'de> serde::de::Visitor<'de> for Names {
            type Value = UniqueNames;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<UniqueNames, A::Error> {
                let mut seen = std::collections::BTreeSet::new();
                while let Some(name) = map.next_key::<String>()? {
                    map.next_value::<serde::de::IgnoredAny>()?;
                    if !seen.insert(name.clone()) {
                        return Err(serde::de::Error::custom(format!(
                            "{name:?} is named twice; give each list one name"
                        )));
                    }
                }
                Ok(UniqueNames)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<UniqueNames, A::Error> {
                while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(UniqueNames)
            }
            fn visit_bool<E>(self, _: bool) -> Result<UniqueNames, E> {
                Ok(UniqueNames)
            }
            fn visit_i64<E>(self, _: i64) -> Result<UniqueNames, E> {
                Ok(UniqueNames)
            }
            fn visit_u64<E>(self, _: u64) -> Result<UniqueNames, E> {
                Ok(UniqueNames)
            }
            fn visit_f64<E>(self, _: f64) -> Result<UniqueNames, E> {
                Ok(UniqueNames)
            }
            fn visit_str<E>(self, _: &str) -> Result<UniqueNames, E> {
                Ok(UniqueNames)
            }
            fn visit_unit<E>(self) -> Result<UniqueNames, E> {
                Ok(UniqueNames)
            }
        }
        deserializer.deserialize_any(Names)
    }
}

/// An [`Estimate`] as every JSON file of headlab writes it (`report.json`, `headlab sweep
/// stats`): the interval is `mean ± ci95`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct EstimateJson {
    /// Values averaged.
    pub n: usize,
    /// The mean.
    pub mean: f64,
    /// Half-width of the 95% interval (null with one value).
    pub ci95: Option<f64>,
}

impl EstimateJson {
    /// "mean ± half-width" with `digits` decimals, as [`Estimate::show`] writes it.
    pub fn show(&self, digits: usize) -> String {
        Estimate {
            n: self.n,
            mean: self.mean,
            half_width: self.ci95.unwrap_or(f64::NAN),
        }
        .show(digits)
    }
}

impl From<Estimate> for EstimateJson {
    fn from(e: Estimate) -> Self {
        EstimateJson {
            n: e.n,
            mean: e.mean,
            ci95: (!e.half_width.is_nan()).then_some(e.half_width),
        }
    }
}

/// A share with its 95% Wilson score interval, as `headlab sweep stats` writes it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ShareJson {
    /// Cases counted.
    pub n: usize,
    /// Cases that hit.
    pub hits: usize,
    /// `hits / n`.
    pub share: f64,
    /// The interval, `[low, high]` ([`wilson`]).
    pub wilson95: [f64; 2],
}

/// A table's statistic with its Multi-Bootstrap interval, as `headlab sweep stats` writes it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct MultiBootstrapJson {
    /// Seeds (the table's rows).
    pub seeds: usize,
    /// Examples every seed was measured on (its columns).
    pub examples: usize,
    /// The statistic on the whole table: the mean of its cells, or its hits over its of.
    pub estimate: f64,
    /// The Multi-Bootstrap's 95% interval, `[low, high]`: seeds and examples resampled
    /// together ([`crate::multi_bootstrap`]).
    pub multi_bootstrap95: [f64; 2],
    /// Draws taken.
    pub draws: usize,
    /// Draws left out for having nothing to divide (a ratio's resampled cells all `of` = 0).
    pub undefined_draws: usize,
    /// The t interval of the seeds' own statistics, each over every example: the interval
    /// over seeds alone, the examples held fixed (null when no seed has anything to divide).
    pub over_seeds: Option<EstimateJson>,
}

/// One name's statistic: a mean with its t interval, a share with its Wilson interval, or a
/// seeds-by-examples table's statistic with its Multi-Bootstrap interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(untagged)]
pub enum IntervalJson {
    /// Of a list of numbers.
    Mean(EstimateJson),
    /// Of `{"hits": K, "of": N}`.
    Share(ShareJson),
    /// Of a list of lists (seeds by examples), or `{"hits": [[..]], "of": [[..]]}`.
    MultiBootstrap(MultiBootstrapJson),
}

/// What a JSON value is, in words, for messages.
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// `{"name": [numbers] or {"hits": K, "of": N} or a table, ...}` (JSON text) to each name's
/// statistic, by name: a list's mean with its t interval ([`EstimateJson`]), a count's share
/// with its Wilson interval ([`ShareJson`]), a table's statistic with its Multi-Bootstrap
/// interval of `draws` draws ([`MultiBootstrapJson`]). A table is a list of lists, one per
/// seed, of the same examples' values (their mean), or `{"hits": [[..]], "of": [[..]]}` (its
/// hits over its of). Refuses, naming the key, anything else: a list that is empty or holds
/// what is not a finite number, a count that is not whole numbers with `hits <= of` and
/// `of > 0`, a table whose seeds differ in length.
pub fn intervals_json(text: &str, draws: usize) -> Result<BTreeMap<String, IntervalJson>, String> {
    let input: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    serde_json::from_str::<UniqueNames>(text).map_err(|e| e.to_string())?;
    let Value::Object(groups) = input else {
        return Err(format!(
            "expected an object of named lists of numbers, like {{\"a\": [1, 2]}}, not {}",
            kind(&input)
        ));
    };
    let mut out = BTreeMap::new();
    for (name, list) in groups {
        let items = match list {
            Value::Array(items) if items.iter().any(Value::is_array) => {
                let table = SeedExampleTable::means(table_rows(&name, "", &items)?)
                    .map_err(|why| format!("{name:?}: {why}"))?;
                out.insert(name.clone(), bootstrapped(&name, &table, draws)?);
                continue;
            }
            Value::Array(items) => items,
            Value::Object(count) if count.get("hits").is_some_and(Value::is_array) => {
                let table = ratio_table(&name, &count)?;
                out.insert(name.clone(), bootstrapped(&name, &table, draws)?);
                continue;
            }
            Value::Object(count) => {
                out.insert(name.clone(), IntervalJson::Share(share_of(&name, &count)?));
                continue;
            }
            other => {
                return Err(format!(
                    "{name:?}: expected a list of numbers or {{\"hits\": K, \"of\": N}}, not {}",
                    kind(&other)
                ));
            }
        };
        let mut values = Vec::with_capacity(items.len());
        for (at, item) in items.iter().enumerate() {
            match item.as_f64() {
                Some(v) if v.is_finite() => values.push(v),
                Some(_) => return Err(format!("{name:?}, value {at}: not a finite number")),
                None => {
                    return Err(format!(
                        "{name:?}, value {at}: expected a number, not {}",
                        kind(item)
                    ));
                }
            }
        }
        let Some(estimate) = Estimate::of(&values) else {
            return Err(format!(
                "{name:?}: an empty list has no mean; leave the name out"
            ));
        };
        if !estimate.mean.is_finite() || estimate.half_width.is_infinite() {
            return Err(format!(
                "{name:?}: its mean or interval is beyond what a 64-bit float holds"
            ));
        }
        out.insert(name, IntervalJson::Mean(estimate.into()));
    }
    Ok(out)
}

/// The rows of a table (`what`: "" for a plain table, "hits" or "of"): a list of lists of
/// finite numbers, each named by its place when it is not.
fn table_rows(name: &str, what: &str, items: &[Value]) -> Result<Vec<Vec<f64>>, String> {
    let place = if what.is_empty() {
        format!("{name:?}")
    } else {
        format!("{name:?}, {what}")
    };
    items
        .iter()
        .enumerate()
        .map(|(s, row)| {
            let Value::Array(cells) = row else {
                return Err(format!(
                    "{place}, seed {s}: expected a list of the examples' numbers (a table is \
                     one list per seed), not {}",
                    kind(row)
                ));
            };
            cells
                .iter()
                .enumerate()
                .map(|(x, cell)| match cell.as_f64() {
                    Some(v) if v.is_finite() => Ok(v),
                    _ => Err(format!(
                        "{place}, seed {s}, example {x}: expected a finite number, not {}",
                        kind(cell)
                    )),
                })
                .collect()
        })
        .collect()
}

/// `{"hits": [[..]], "of": [[..]]}` of `name` as a ratio table.
fn ratio_table(
    name: &str,
    count: &serde_json::Map<String, Value>,
) -> Result<SeedExampleTable, String> {
    if let Some(other) = count.keys().find(|k| *k != "hits" && *k != "of") {
        return Err(format!(
            "{name:?}: a table of counts has the keys hits and of, not {other:?}"
        ));
    }
    let rows = |key: &str| match count.get(key) {
        Some(Value::Array(items)) => table_rows(name, key, items),
        _ => Err(format!(
            "{name:?}: a table of counts is {{\"hits\": [[..]], \"of\": [[..]]}}, one list per \
             seed each; {key} is missing or not a list"
        )),
    };
    SeedExampleTable::ratios(rows("hits")?, rows("of")?).map_err(|why| format!("{name:?}: {why}"))
}

/// A table's Multi-Bootstrap, with the t interval over its seeds beside it.
fn bootstrapped(
    name: &str,
    table: &SeedExampleTable,
    draws: usize,
) -> Result<IntervalJson, String> {
    let result = multi_bootstrap(table, draws).ok_or_else(|| {
        format!("{name:?}: no draw of the table has anything to divide; it has no statistic")
    })?;
    let seeds: Vec<f64> = table.per_seed().into_iter().flatten().collect();
    Ok(IntervalJson::MultiBootstrap(MultiBootstrapJson {
        seeds: table.n_seeds(),
        examples: table.n_examples(),
        estimate: result.estimate,
        multi_bootstrap95: result.interval95,
        draws: result.draws,
        undefined_draws: result.undefined_draws,
        over_seeds: Estimate::of(&seeds).map(EstimateJson::from),
    }))
}

/// `{"hits": K, "of": N}` of `name` as a share with its Wilson interval.
fn share_of(name: &str, count: &serde_json::Map<String, Value>) -> Result<ShareJson, String> {
    let whole = |key: &str| {
        count.get(key).and_then(Value::as_u64).ok_or_else(|| {
            format!("{name:?}: a count is {{\"hits\": K, \"of\": N}}, {key} a whole number")
        })
    };
    if let Some(other) = count.keys().find(|k| *k != "hits" && *k != "of") {
        return Err(format!(
            "{name:?}: a count has the keys hits and of, not {other:?}"
        ));
    }
    let (hits, n) = (whole("hits")? as usize, whole("of")? as usize);
    if n == 0 || hits > n {
        return Err(format!(
            "{name:?}: {hits} hits of {n}: a share needs 0 <= hits <= of and of > 0"
        ));
    }
    let (low, high) = wilson(hits, n);
    Ok(ShareJson {
        n,
        hits,
        share: hits as f64 / n as f64,
        wilson95: [low, high],
    })
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
    use crate::multi_bootstrap::DEFAULT_DRAWS;

    #[test]
    fn an_estimate_of_no_number_shows_as_a_dash() {
        let shown = |mean, half_width| {
            Estimate {
                n: 2,
                mean,
                half_width,
            }
            .show(2)
        };
        assert_eq!(shown(f64::NAN, f64::NAN), "-");
        assert_eq!(shown(0.5, f64::NAN), "0.50");
        assert_eq!(shown(0.5, 0.125), "0.50 ± 0.12");
    }

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
    fn named_lists_get_their_intervals_and_bad_input_names_its_key() {
        let out = intervals_json(r#"{"b": [1, 2, 3, 4], "a": [0.5]}"#, DEFAULT_DRAWS).unwrap();
        let mean = |name: &str| match out[name] {
            IntervalJson::Mean(estimate) => estimate,
            _ => panic!("{name} is a list"),
        };
        let b = mean("b");
        assert_eq!((b.n, b.mean), (4, 2.5));
        let half = 3.182 * (5.0f64 / 12.0).sqrt();
        assert!((b.ci95.unwrap() - half).abs() < 1e-12);
        assert_eq!(b.show(2), "2.50 ± 2.05");
        let a = mean("a");
        assert_eq!((a.n, a.mean, a.ci95), (1, 0.5, None));
        for (input, says) in [
            ("[1, 2]", "not a list"),
            (
                "{\"x\": 3}",
                "\"x\": expected a list of numbers or {\"hits\": K, \"of\": N}, not a number",
            ),
            ("{\"x\": {\"hits\": 3, \"of\": 2}}", "3 hits of 2"),
            ("{\"x\": {\"hits\": 0, \"of\": 0}}", "of > 0"),
            ("{\"x\": {\"hits\": 1.5, \"of\": 2}}", "hits a whole number"),
            ("{\"x\": {\"hits\": 1, \"n\": 2}}", "not \"n\""),
            (
                "{\"x\": [1, \"2\"]}",
                "\"x\", value 1: expected a number, not a string",
            ),
            (
                "{\"x\": [1, null]}",
                "\"x\", value 1: expected a number, not null",
            ),
            ("{\"x\": []}", "\"x\": an empty list"),
            ("{\"x\": [1e999]}", "not JSON"),
            ("{\"x\": [NaN]}", "not JSON"),
        ] {
            let error = intervals_json(input, DEFAULT_DRAWS).unwrap_err();
            assert!(error.contains(says), "{input}: {error}");
        }
    }

    /// Issue 67: `[1e308, 1e308]` had a null mean, `[1e-320, 2e-320]` an interval of 0, the
    /// result hung on the order of the values, and a name given twice kept its last list.
    #[test]
    fn extreme_values_any_order_and_a_name_given_twice() {
        let huge = Estimate::of(&[1e308, 1e308]).unwrap();
        assert_eq!(huge.mean, 1e308);
        assert_eq!(huge.half_width, 0.0);
        let tiny = Estimate::of(&[1e-320, 2e-320]).unwrap();
        assert!(
            tiny.mean > 1.4e-320 && tiny.mean < 1.6e-320,
            "{}",
            tiny.mean
        );
        // 12.706 * sd / sqrt(2) = 12.706 * 0.5e-320.
        assert!(
            tiny.half_width > 5e-320 && tiny.half_width < 7.5e-320,
            "{}",
            tiny.half_width
        );
        let values = [0.1, 1e16, -1e16, 0.3, 7.0, 1e-3];
        let forward = Estimate::of(&values).unwrap();
        let mut reversed = values;
        reversed.reverse();
        assert_eq!(Estimate::of(&reversed).unwrap(), forward);
        let mut shuffled = values;
        shuffled.swap(0, 3);
        shuffled.swap(1, 5);
        assert_eq!(Estimate::of(&shuffled).unwrap(), forward);
        // Compensated: 1e16 and -1e16 cancel, the small ones survive.
        assert!(
            (forward.mean * 6.0 - 7.401).abs() < 1e-9,
            "{}",
            forward.mean
        );

        let error = intervals_json(r#"{"a": [1], "a": [2]}"#, DEFAULT_DRAWS).unwrap_err();
        assert!(error.contains("\"a\" is named twice"), "{error}");
        let error = intervals_json(r#"{"wide": [-1.7e308, 1.7e308]}"#, DEFAULT_DRAWS).unwrap_err();
        assert!(
            error.contains("beyond what a 64-bit float holds"),
            "{error}"
        );
    }

    /// A count gets its share and Wilson interval, as `wilson` gives them.
    #[test]
    fn a_count_gets_its_share_and_wilson_interval() {
        let out = intervals_json(r#"{"verb": {"hits": 8, "of": 10}}"#, DEFAULT_DRAWS).unwrap();
        let IntervalJson::Share(share) = out["verb"] else {
            panic!("a count is a share");
        };
        let (low, high) = wilson(8, 10);
        assert_eq!((share.n, share.hits, share.share), (10, 8, 0.8));
        assert_eq!(share.wilson95, [low, high]);
        let json = serde_json::to_string(&out).unwrap();
        assert!(json.contains("\"wilson95\":["), "{json}");
    }

    /// Issue 65, item 3: a table (a list of lists, or hits and of as lists of lists) gets the
    /// Multi-Bootstrap of `multi_bootstrap`, with the t interval of its seeds beside it; a
    /// table whose seeds differ in length, or a cell that is not a number, is named.
    #[test]
    fn a_table_gets_the_multi_bootstrap_and_the_interval_over_seeds() {
        let text = r#"{"figure": {"hits": [[1, 0, 2], [2, 1, 1]], "of": [[2, 1, 2], [2, 2, 2]]},
                       "plain": [[0.1, 0.3], [0.2, 0.6]]}"#;
        let out = intervals_json(text, 300).unwrap();
        let IntervalJson::MultiBootstrap(figure) = out["figure"] else {
            panic!("hits and of as lists of lists are a table");
        };
        let table = SeedExampleTable::ratios(
            vec![vec![1.0, 0.0, 2.0], vec![2.0, 1.0, 1.0]],
            vec![vec![2.0, 1.0, 2.0], vec![2.0, 2.0, 2.0]],
        )
        .unwrap();
        let direct = multi_bootstrap(&table, 300).unwrap();
        assert_eq!((figure.seeds, figure.examples, figure.draws), (2, 3, 300));
        assert_eq!(figure.estimate, 7.0 / 11.0);
        assert_eq!(figure.multi_bootstrap95, direct.interval95);
        let over_seeds = Estimate::of(&[3.0 / 5.0, 4.0 / 6.0]).unwrap();
        assert_eq!(figure.over_seeds, Some(over_seeds.into()));
        let IntervalJson::MultiBootstrap(plain) = out["plain"] else {
            panic!("a list of lists is a table");
        };
        assert!((plain.estimate - 0.3).abs() < 1e-15);
        let json = serde_json::to_string(&out).unwrap();
        assert!(json.contains("\"multi_bootstrap95\":["), "{json}");
        for (input, says) in [
            (
                r#"{"t": [[1, 2], [3]]}"#,
                "\"t\": rows: seed 1 has 1 examples and seed 0 2",
            ),
            (
                r#"{"t": [[1, "x"]]}"#,
                "\"t\", seed 0, example 1: expected a finite number",
            ),
            (r#"{"t": [[1], 2]}"#, "\"t\", seed 1: expected a list"),
            (
                r#"{"t": {"hits": [[1]], "of": [[1]], "n": 3}}"#,
                "keys hits and of, not \"n\"",
            ),
            (r#"{"t": {"hits": [[1]]}}"#, "of is missing or not a list"),
            (r#"{"t": {"hits": [[3]], "of": [[2]]}}"#, "3 hits of 2"),
        ] {
            let error = intervals_json(input, 10).unwrap_err();
            assert!(error.contains(says), "{input}: {error}");
        }
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
