//! Why a model configuration was refused. Every message names the config key (as it is
//! spelled in the `[model]` section of a headlab config file) and what would be accepted.

/// A model configuration that cannot be built.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// A size that must be at least one is zero.
    #[error("{field} = 0 is out of range: it must be at least 1")]
    ZeroSize {
        /// The config key, e.g. `model.d_model`.
        field: &'static str,
    },

    /// The layout splits the model width between heads, and the heads do not divide it.
    #[error(
        "model.n_heads = {n_heads} does not divide model.d_model = {d_model}, which the \
         {layout} layout needs ({why}); choose n_heads among the divisors of d_model {divisors:?}{hint}"
    )]
    HeadsDoNotDivide {
        /// Number of heads asked for.
        n_heads: usize,
        /// Model width.
        d_model: usize,
        /// Layout name (`split` or `narrow`).
        layout: &'static str,
        /// What the division is used for in that layout.
        why: &'static str,
        /// The head counts that would work.
        divisors: Vec<usize>,
        /// An alternative fix, if any.
        hint: &'static str,
    },

    /// `wide` fixes the head size; an explicit, different `d_head` contradicts it.
    #[error(
        "model.d_head = {d_head} contradicts head_layout = \"wide\", where every head has \
         d_head = d_model = {d_model}; remove d_head, or use head_layout = \"split\" to choose it"
    )]
    WideHeadSize {
        /// The explicit head size.
        d_head: usize,
        /// Model width.
        d_model: usize,
    },

    /// Rotary positions rotate pairs of coordinates.
    #[error(
        "positional = \"rotary\" needs an even head size, but d_head = {d_head}; choose an even \
         d_head (or d_model / n_heads), or another positional encoding"
    )]
    OddRotaryHead {
        /// The resolved head size.
        d_head: usize,
    },

    /// Sinusoidal tables interleave sine and cosine.
    #[error(
        "positional = \"sinusoidal\" needs an even d_model, but d_model = {d_model}; choose an \
         even d_model or another positional encoding"
    )]
    OddSinusoidalWidth {
        /// Model width.
        d_model: usize,
    },

    /// Dropout must leave something.
    #[error("model.dropout = {} is out of range: it must be in [0, 1)", show_value(*value))]
    Dropout {
        /// The value given.
        value: f64,
    },

    /// Another value out of its range.
    #[error("{field} = {value} is out of range: it must be {accepted}")]
    OutOfRange {
        /// The config key, e.g. `model.norm_epsilon`.
        field: &'static str,
        /// The value given.
        value: String,
        /// What is accepted.
        accepted: &'static str,
    },
}

/// A config value as a message shows it: as written for everyday sizes, in exponent form
/// for the very large or small (`1e308`, not a 309-digit echo; `1e-12`, not `0.000000000001`).
pub fn show_value(value: f64) -> String {
    let magnitude = value.abs();
    if magnitude != 0.0 && magnitude.is_finite() && !(1e-5..1e16).contains(&magnitude) {
        format!("{value:e}")
    } else {
        value.to_string()
    }
}

/// The divisors of `n`, ascending; used to suggest head counts that would work. Pairs up
/// to the square root, so an absurd `d_model` in a config costs microseconds, not minutes.
pub(crate) fn divisors(n: usize) -> Vec<usize> {
    let mut small = Vec::new();
    let mut large = Vec::new();
    let mut d = 1;
    while d <= n / d {
        if n.is_multiple_of(d) {
            small.push(d);
            if d != n / d {
                large.push(n / d);
            }
        }
        d += 1;
    }
    small.extend(large.into_iter().rev());
    small
}

#[cfg(test)]
mod tests {
    use super::{divisors, show_value};

    #[test]
    fn divisors_match_a_plain_count() {
        for n in [1usize, 2, 12, 36, 64, 97, 100, 1 << 20] {
            let expected: Vec<usize> = (1..=n).filter(|d| n.is_multiple_of(*d)).collect();
            assert_eq!(divisors(n), expected, "n = {n}");
        }
        assert!(divisors(0).is_empty());
    }

    #[test]
    fn values_show_as_written_or_in_exponent_form_when_extreme() {
        assert_eq!(show_value(1e308), "1e308");
        assert_eq!(show_value(-2.5e20), "-2.5e20");
        assert_eq!(show_value(1e-12), "1e-12");
        assert_eq!(show_value(0.001), "0.001");
        assert_eq!(show_value(2.0), "2");
        assert_eq!(show_value(0.0), "0");
        assert_eq!(show_value(f64::NAN), "NaN");
    }
}
