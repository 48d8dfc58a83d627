//! `--rounds`: every case measured several times, interleaved with the others, and each
//! figure reported as its median over the rounds.

use crate::case::CaseResult;

/// The median of `values` (the mean of the middle two for an even count); NaN when empty.
/// NaNs sort last.
pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => sorted[n / 2],
        _ => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

/// One case's rounds as one result: the median of training and forward speed and of peak
/// memory, the timed steps of all rounds added, the loss of the last round, and every
/// round's training speed kept in `train_steps_per_s_rounds` (when there are several).
/// `None` for no rounds.
pub fn median_result(rounds: &[CaseResult]) -> Option<CaseResult> {
    let last = rounds.last()?;
    if rounds.len() == 1 {
        return Some(last.clone());
    }
    let of = |f: fn(&CaseResult) -> f64| median(&rounds.iter().map(f).collect::<Vec<_>>());
    let memory: Vec<f64> = rounds.iter().filter_map(|r| r.peak_rss_mib).collect();
    Some(CaseResult {
        train_steps: rounds.iter().map(|r| r.train_steps).sum(),
        train_steps_per_s: of(|r| r.train_steps_per_s),
        forward_passes_per_s: of(|r| r.forward_passes_per_s),
        peak_rss_mib: (!memory.is_empty()).then(|| median(&memory)),
        rounds: rounds.len(),
        train_steps_per_s_rounds: rounds.iter().map(|r| r.train_steps_per_s).collect(),
        ..last.clone()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::Implementation;

    fn round(steps_per_s: f64, forward: f64, memory: Option<f64>) -> CaseResult {
        let mut round = CaseResult::example(Implementation::Headlab, steps_per_s);
        round.case.shards = 2;
        round.forward_passes_per_s = forward;
        round.last_loss = steps_per_s as f32;
        round.peak_rss_mib = memory;
        round
    }

    #[test]
    fn medians_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(&[7.0]), 7.0);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn each_figure_is_its_median_over_rounds() {
        let rounds = [
            round(40.0, 100.0, Some(150.0)),
            round(45.0, 90.0, Some(170.0)),
            round(10.0, 95.0, Some(160.0)),
        ];
        let median = median_result(&rounds).unwrap();
        assert_eq!(median.train_steps_per_s, 40.0);
        assert_eq!(median.forward_passes_per_s, 95.0);
        assert_eq!(median.peak_rss_mib, Some(160.0));
        assert_eq!(median.train_steps, 30);
        assert_eq!(median.rounds, 3);
        assert_eq!(median.train_steps_per_s_rounds, [40.0, 45.0, 10.0]);
        assert_eq!(median.last_loss, 10.0, "the last round's loss");

        assert_eq!(median_result(&rounds[..1]).unwrap(), rounds[0]);
        assert!(median_result(&[]).is_none());
        let no_memory = [round(1.0, 1.0, None), round(3.0, 1.0, None)];
        let median = median_result(&no_memory).unwrap();
        assert_eq!(median.peak_rss_mib, None);
        assert_eq!(median.train_steps_per_s, 2.0);
    }
}
