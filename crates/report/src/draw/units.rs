//! The unit a page shows each field of `heads.json` in: a page's choice, so it lives beside
//! the pages; the file keeps every field in its own unit ([`inspect::measures::heads::unit_of`]).

use inspect::measures::heads::unit_of;
use run::units::Unit;

/// How a page shows a field of `heads.json`: an ablation drop in points (one point is 0.01 of
/// the fraction the file keeps), every other field in its own unit ([`unit_of`]).
pub fn shown_unit(field: &str) -> Unit {
    match unit_of(field) {
        Unit::Fraction if field.ends_with("ablation_drop") => Unit::Points,
        unit => unit,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ablation_drops_are_shown_in_points_and_the_rest_in_their_unit() {
        assert_eq!(shown_unit("resample_ablation_drop"), Unit::Points);
        assert_eq!(shown_unit("ablation_drop"), Unit::Points);
        assert_eq!(shown_unit("confidence"), Unit::Fraction);
    }
}
