//! How much attention an imported model gives `[CLS]` and `[SEP]` (Clark et al. 2019,
//! section 3: much of BERT's attention, in its middle layers, rests on `[SEP]`): per layer
//! and per head, the mean over the probe's sentences and query positions of the attention on
//! the first word-level position (`[CLS]`) and on the last (`[SEP]`). Only for a probe read
//! as words, whose sentences all have one number of words, so `[SEP]` is the last position
//! of every row.

use serde::{Deserialize, Serialize};

use crate::load::probe::LayerProbe;

/// One layer's attention on `[CLS]` and `[SEP]`, in `summary.json`'s `special_attention`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpecialAttention {
    /// Layer index.
    pub layer: usize,
    /// Mean attention on `[CLS]` over the layer's heads.
    pub cls: f64,
    /// Mean attention on `[SEP]` over the layer's heads.
    pub sep: f64,
    /// Each head's mean attention on `[CLS]`.
    pub heads_cls: Vec<f64>,
    /// Each head's mean attention on `[SEP]`.
    pub heads_sep: Vec<f64>,
}

/// Every layer's attention on the first and the last position of `layers` (word-level
/// patterns `[batch, heads, len, len]`, `[CLS]` first and `[SEP]` last).
pub fn special_attention(layers: &[LayerProbe]) -> Vec<SpecialAttention> {
    layers
        .iter()
        .enumerate()
        .map(|(layer, probe)| {
            let (batch, heads, len) = probe.dims();
            let values = &probe.pattern.values;
            let rows = (batch * len).max(1) as f64;
            let mean_on = |h: usize, key: usize| {
                let sum: f64 = (0..batch)
                    .flat_map(|b| (0..len).map(move |q| ((b * heads + h) * len + q) * len))
                    .map(|row| values[row + key] as f64)
                    .sum();
                sum / rows
            };
            let heads_cls: Vec<f64> = (0..heads).map(|h| mean_on(h, 0)).collect();
            let last = len.saturating_sub(1);
            let heads_sep: Vec<f64> = (0..heads).map(|h| mean_on(h, last)).collect();
            let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
            SpecialAttention {
                layer,
                cls: mean(&heads_cls),
                sep: mean(&heads_sep),
                heads_cls,
                heads_sep,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_that_rest_on_cls_or_sep_score_one_there() {
        // Head 0 on [CLS], head 1 on [SEP], head 2 on a word, over five positions.
        let layer = LayerProbe::attending_to(&[0, 4, 2], 5);
        let [special] = &special_attention(&[layer])[..] else {
            panic!("one layer")
        };
        assert_eq!(special.heads_cls, [1.0, 0.0, 0.0]);
        assert_eq!(special.heads_sep, [0.0, 1.0, 0.0]);
        assert!((special.cls - 1.0 / 3.0).abs() < 1e-12);
        assert!((special.sep - 1.0 / 3.0).abs() < 1e-12);
    }
}
