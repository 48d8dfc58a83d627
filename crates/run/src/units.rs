//! The unit of every number headlab writes, and how each place says it. One rule: files
//! (JSON, CSV, safetensors) keep fractions, 0.01 being one point of accuracy; pages and
//! terminals may show points (a fraction times 100) and then say "points". A CSV column
//! carries its unit in its name ([`Unit::csv_column`]: `ablation_drop_frac`), a table's header
//! or a figure's axis in words ([`Unit::titled`]: "ablation drop (fraction)").

/// What a number is measured in. Counts, steps, ranks, cosines and distances in [0, 1] are
/// [`Unit::Plain`]: their name says what they count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// A fraction of 1: an accuracy, the accuracy lost when a head is ablated, a share of a
    /// head's attention or of a relation's arcs, the share of a logit difference a patch
    /// restores (which can leave [0, 1]). 0.01 is one point.
    Fraction,
    /// Points: a fraction times 100. Only pages and terminals show them.
    Points,
    /// Nats: an entropy with the natural logarithm.
    Nats,
    /// Token positions: a distance between a query and the keys it attends to.
    Positions,
    /// Logits: a contribution to the output layer's logit of the right class.
    Logits,
    /// A count, a step, a rank, a cosine, a distance or a score whose name says what it is.
    Plain,
}

impl Unit {
    /// The unit in words, as a header or an axis says it ("" for [`Unit::Plain`]).
    pub fn name(self) -> &'static str {
        match self {
            Unit::Fraction => "fraction",
            Unit::Points => "points",
            Unit::Nats => "nats",
            Unit::Positions => "positions",
            Unit::Logits => "logits",
            Unit::Plain => "",
        }
    }

    /// The suffix a CSV column holding this unit ends with ("" for [`Unit::Plain`]).
    pub fn csv_suffix(self) -> &'static str {
        match self {
            Unit::Fraction => "_frac",
            Unit::Points => "_points",
            Unit::Nats => "_nats",
            Unit::Positions => "_positions",
            Unit::Logits => "_logits",
            Unit::Plain => "",
        }
    }

    /// The name of a CSV column holding `key` in this unit: `ablation_drop_frac`.
    pub fn csv_column(self, key: &str) -> String {
        format!("{key}{}", self.csv_suffix())
    }

    /// A header or axis title with its unit: "ablation drop (fraction)"; `title` as it is
    /// for [`Unit::Plain`].
    pub fn titled(self, title: &str) -> String {
        match self {
            Unit::Plain => title.to_string(),
            unit => format!("{title} ({})", unit.name()),
        }
    }
}

/// A fraction shown in points, with `decimals` decimals ("-" for a number not measured).
pub fn points(fraction: Option<f64>, decimals: usize) -> String {
    fraction.map_or_else(|| "-".to_string(), |f| format!("{:.decimals$}", f * 100.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_csv_column_names_its_unit_and_a_plain_one_stays_as_it_is() {
        assert_eq!(
            Unit::Fraction.csv_column("ablation_drop"),
            "ablation_drop_frac"
        );
        assert_eq!(Unit::Nats.csv_column("entropy"), "entropy_nats");
        assert_eq!(Unit::Plain.csv_column("steps_to_99"), "steps_to_99");
        assert_eq!(
            Unit::Fraction.titled("eval token acc"),
            "eval token acc (fraction)"
        );
        assert_eq!(Unit::Plain.titled("removable heads"), "removable heads");
    }

    #[test]
    fn points_are_a_fraction_times_100_and_a_dash_when_not_measured() {
        assert_eq!(points(Some(0.7472), 2), "74.72");
        assert_eq!(points(Some(-0.0005), 2), "-0.05");
        assert_eq!(points(None, 2), "-");
    }
}
