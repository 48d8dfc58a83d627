//! When a curve over training rises fastest: the onset of a figure measured at snapshots
//! (the syntactic attention figure of experiment 9) and, turned over, the drop of a loss.
//!
//! Defined before any pilot result was looked at (issue 65):
//!
//! - Steps are read on a log scale, as the snapshots are spaced (`snapshots_per_decade`) and
//!   as the figures draw them; step 0 has no place there and is left out.
//! - A **window** runs from a snapshot to the first later one at least [`WINDOW_DECADES`]
//!   decades on (a quarter of a decade: three of the ten log-spaced snapshots a decade); its
//!   **rise** is the change of the value across it, and its **rate** the rise per decade.
//! - The **onset** is the window of the highest rate, if that rate is above 0, and its step
//!   the window's geometric midpoint (`sqrt(from * to)`, rounded). A curve that never rises
//!   over a window has none.
//! - A **fall** (a loss's drop) is the onset of the curve turned over.
//!
//! A window spans the same share of a decade whatever the snapshots' spacing, so a run with
//! more snapshots is not given more chances at a steep window; a single noisy snapshot moves
//! a quarter-decade window less than it moves one interval.

use serde::{Deserialize, Serialize};

/// The width of a window, in decades of steps.
pub const WINDOW_DECADES: f64 = 0.25;

/// The window of a curve's steepest rise.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Onset {
    /// The window's geometric midpoint, rounded: the onset's step.
    pub step: usize,
    /// The snapshot the window starts at.
    pub from_step: usize,
    /// The snapshot it ends at.
    pub to_step: usize,
    /// The value's change across the window (for a drop, its fall: positive).
    pub rise: f64,
    /// `rise` per decade of steps.
    pub rise_per_decade: f64,
}

/// The onset of `curve` (`(step, value)` by step; step 0 and values that are not finite are
/// left out): the window of at least [`WINDOW_DECADES`] with the steepest rise per decade;
/// `None` when no window rises.
pub fn onset(curve: &[(usize, f64)]) -> Option<Onset> {
    let points: Vec<(usize, f64, f64)> = curve
        .iter()
        .filter(|(step, value)| *step > 0 && value.is_finite())
        .map(|&(step, value)| (step, (step as f64).log10(), value))
        .collect();
    let mut best: Option<Onset> = None;
    for (i, &(from_step, from_log, from_value)) in points.iter().enumerate() {
        let Some(&(to_step, to_log, to_value)) = points[i + 1..]
            .iter()
            .find(|(_, log, _)| log - from_log >= WINDOW_DECADES - 1e-12)
        else {
            break;
        };
        let rise = to_value - from_value;
        let rate = rise / (to_log - from_log);
        if rate > 0.0 && best.is_none_or(|b| rate > b.rise_per_decade) {
            best = Some(Onset {
                step: ((from_step as f64) * (to_step as f64)).sqrt().round() as usize,
                from_step,
                to_step,
                rise,
                rise_per_decade: rate,
            });
        }
    }
    best
}

/// The window of `curve`'s steepest fall (a loss's drop): [`onset`] of the curve turned
/// over, its `rise` the fall.
pub fn fall(curve: &[(usize, f64)]) -> Option<Onset> {
    let turned: Vec<(usize, f64)> = curve.iter().map(|&(step, v)| (step, -v)).collect();
    onset(&turned)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ten snapshots a decade from step 1 to 100000, as `snapshots_per_decade = 10` spaces
    /// them (rounded; repeats dropped).
    fn log_steps() -> Vec<usize> {
        let mut steps: Vec<usize> = (0..=50)
            .map(|k| 10f64.powf(k as f64 / 10.0).round() as usize)
            .collect();
        steps.dedup();
        steps
    }

    /// A logistic rise of `height` centred at `centre` (a step), `width` decades wide.
    fn logistic(step: usize, centre: f64, width: f64, height: f64) -> f64 {
        let x = ((step as f64).log10() - centre.log10()) / width;
        height / (1.0 + (-x).exp())
    }

    #[test]
    fn a_logistic_rise_has_its_onset_at_its_centre() {
        for centre in [300.0, 2000.0, 30000.0] {
            let curve: Vec<(usize, f64)> = log_steps()
                .into_iter()
                .map(|s| (s, 0.1 + logistic(s, centre, 0.1, 0.5)))
                .collect();
            let found = onset(&curve).unwrap();
            // The window straddling the centre: its midpoint within a twentieth of a decade.
            let off = ((found.step as f64).log10() - centre.log10()).abs();
            assert!(off < 0.06, "centre {centre}: onset at {}", found.step);
            assert!(found.rise > 0.25 && found.rise < 0.5, "{found:?}");
            assert!(((found.to_step as f64).log10() - (found.from_step as f64).log10()) >= 0.25);
        }
    }

    #[test]
    fn a_flat_or_falling_curve_has_no_onset_and_a_loss_has_its_fall() {
        let steps = log_steps();
        let flat: Vec<(usize, f64)> = steps.iter().map(|&s| (s, 0.2)).collect();
        assert_eq!(onset(&flat), None);
        // A loss falling from 7 to 4 around step 1000, flat before and after.
        let loss: Vec<(usize, f64)> = steps
            .iter()
            .map(|&s| (s, 7.0 - logistic(s, 1000.0, 0.15, 3.0)))
            .collect();
        assert_eq!(onset(&loss), None, "a falling curve has no onset");
        let dropped = fall(&loss).unwrap();
        let off = ((dropped.step as f64).log10() - 3.0).abs();
        assert!(off < 0.06 && dropped.rise > 1.0, "{dropped:?}");
    }

    /// Hand-worked: steps 0 (left out), 10, 20, 100, 1000 with values 0, 0, 0.1, 0.5, 0.6.
    /// Windows: 10 to 20 is 0.30 decades (rise 0.1, rate 0.332), 20 to 100 is 0.70 (0.4,
    /// 0.572), 100 to 1000 is 1 (0.1, 0.1): the onset is 20 to 100, at sqrt(2000) = 44.7.
    #[test]
    fn the_steepest_window_is_chosen_by_its_rate_per_decade() {
        let curve = [(0, 0.0), (10, 0.0), (20, 0.1), (100, 0.5), (1000, 0.6)];
        let found = onset(&curve).unwrap();
        assert_eq!((found.from_step, found.to_step, found.step), (20, 100, 45));
        assert!((found.rise - 0.4).abs() < 1e-12);
        assert!((found.rise_per_decade - 0.4 / 5f64.log10()).abs() < 1e-12);
        // A window narrower than a quarter decade is widened to the next snapshot: from 10,
        // the snapshot at 15 (0.18 decades) is passed over for 20.
        let curve = [(10, 0.0), (15, 0.3), (20, 0.3), (1000, 0.3)];
        let found = onset(&curve).unwrap();
        assert_eq!((found.from_step, found.to_step), (10, 20));
        // Too few snapshots for a window: none.
        assert_eq!(onset(&[(10, 0.0), (11, 1.0)]), None);
        assert_eq!(onset(&[]), None);
    }
}
