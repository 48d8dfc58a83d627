//! How much attention an imported model gives `[CLS]` and `[SEP]` (Clark et al. 2019,
//! section 3: much of BERT's attention, in its middle layers, rests on `[SEP]`): per layer
//! and per head, the mean over the probe's sentences and query positions of the attention on
//! the first word-level position (`[CLS]`) and on the last (`[SEP]`). Only for a probe read
//! as words, whose sentences all have one number of words, so `[SEP]` is the last position
//! of every row. Where the probe's sentences have punctuation (a treebank's words labelled
//! `punct`; the grammar writes none), the attention on it too: Clark et al. found BERT's
//! attention resting on periods and commas as well as on `[SEP]`.

use serde::{Deserialize, Serialize};

use crate::load::probe::{LayerProbe, Probe};

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
    /// Mean attention on punctuation (every `punct` word of the sentence together) over the
    /// layer's heads; absent when the probe has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub punct: Option<f64>,
    /// Each head's mean attention on punctuation; absent when the probe has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heads_punct: Option<Vec<f64>>,
}

/// [`special_attention`] of a probe read as words (`layers` its word-level patterns), each
/// sentence's `punct` words as its punctuation; `None` for a probe of a task's tokens.
pub fn probe_special_attention(
    probe: &Probe,
    layers: &[LayerProbe],
) -> Option<Vec<SpecialAttention>> {
    let punctuation = probe.punctuation()?;
    Some(special_attention(layers, &punctuation))
}

/// Every layer's attention on the first and the last position of each sentence of `layers`
/// (word-level patterns `[batch, heads, len, len]`, `[CLS]` first and `[SEP]` at the
/// sentence's last real position), and on the positions `punctuation[b]` of each sentence
/// `b` where any sentence has some; a mean over the real queries.
pub fn special_attention(
    layers: &[LayerProbe],
    punctuation: &[Vec<usize>],
) -> Vec<SpecialAttention> {
    let has_punctuation = punctuation.iter().any(|p| !p.is_empty());
    layers
        .iter()
        .enumerate()
        .map(|(layer, probe)| {
            let (_, heads, len) = probe.dims();
            let values = &probe.pattern.values;
            let lengths = &probe.lengths;
            let rows = probe.rows().max(1) as f64;
            // Head `h`'s mean attention on the keys `keys(b)` of each sentence `b`, over
            // the real queries (a shorter sentence's padding is no query).
            let mean_on = |h: usize, keys: &dyn Fn(usize) -> Vec<usize>| {
                let sum: f64 = (lengths.iter().enumerate())
                    .flat_map(|(b, &real)| {
                        let keys = keys(b);
                        (0..real).map(move |q| {
                            let row = ((b * heads + h) * len + q) * len;
                            keys.iter().map(|&k| values[row + k] as f64).sum::<f64>()
                        })
                    })
                    .sum();
                sum / rows
            };
            let heads_cls: Vec<f64> = (0..heads).map(|h| mean_on(h, &|_| vec![0])).collect();
            // Each sentence's own `[SEP]`, its last real position.
            let sep = |b: usize| vec![lengths[b].saturating_sub(1)];
            let heads_sep: Vec<f64> = (0..heads).map(|h| mean_on(h, &sep)).collect();
            let heads_punct: Option<Vec<f64>> = has_punctuation.then(|| {
                let keys = |b: usize| punctuation.get(b).cloned().unwrap_or_default();
                (0..heads).map(|h| mean_on(h, &keys)).collect()
            });
            let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
            SpecialAttention {
                layer,
                cls: mean(&heads_cls),
                sep: mean(&heads_sep),
                heads_cls,
                heads_sep,
                punct: heads_punct.as_deref().map(mean),
                heads_punct,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use run::tensor_file::HostTensor;

    use super::*;

    /// Sentences of two lengths: each sentence's own `[SEP]` is its last real position,
    /// and the padded rows are no queries.
    #[test]
    fn a_shorter_sentence_has_its_own_sep_and_no_padded_queries() {
        // One head; sentence 0 of 3 positions rests on its [SEP] (2), sentence 1 of 2 on
        // its [SEP] (1); the padded row of sentence 1 rests on [CLS] and must not count.
        let (len, mut values) = (3, vec![0.0f32; 2 * 3 * 3]);
        for q in 0..3 {
            values[q * len + 2] = 1.0;
        }
        for q in 0..2 {
            values[len * len + q * len + 1] = 1.0;
        }
        values[len * len + 2 * len] = 1.0; // sentence 1's padded row
        let zeros = |shape: Vec<usize>| HostTensor {
            values: vec![0.0; shape.iter().product()],
            shape,
        };
        let layer = LayerProbe {
            attn_input: zeros(vec![2, len, 2]),
            pattern: HostTensor {
                values,
                shape: vec![2, 1, len, len],
            },
            head_outputs: zeros(vec![2, len, 1, 2]),
            lengths: vec![3, 2],
        };
        let [special] = &special_attention(&[layer], &[])[..] else {
            panic!("one layer")
        };
        assert_eq!(special.heads_sep, [1.0]);
        assert_eq!(special.heads_cls, [0.0]);
    }

    #[test]
    fn heads_that_rest_on_cls_or_sep_score_one_there() {
        // Head 0 on [CLS], head 1 on [SEP], head 2 on a word, over five positions.
        let layer = LayerProbe::attending_to(&[0, 4, 2], 5);
        let [special] = &special_attention(std::slice::from_ref(&layer), &[])[..] else {
            panic!("one layer")
        };
        assert_eq!(special.heads_cls, [1.0, 0.0, 0.0]);
        assert_eq!(special.heads_sep, [0.0, 1.0, 0.0]);
        assert!((special.cls - 1.0 / 3.0).abs() < 1e-12);
        assert!((special.sep - 1.0 / 3.0).abs() < 1e-12);
        // No punctuation in the probe: nothing said about it.
        assert_eq!((special.punct, special.heads_punct.clone()), (None, None));
        // Position 2 is a comma: head 2 rests on it, the others never.
        let [special] = &special_attention(&[layer], &[vec![2]])[..] else {
            panic!("one layer")
        };
        assert_eq!(special.heads_punct, Some(vec![0.0, 0.0, 1.0]));
        assert!((special.punct.unwrap() - 1.0 / 3.0).abs() < 1e-12);
    }
}
