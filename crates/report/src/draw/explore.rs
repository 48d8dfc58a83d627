//! `explore.html`: an interactive page beside `index.html`, one self-contained file (inline
//! CSS and vanilla JS, no network) that works from `file://`.
//!
//! - **Model view**: every layer x head as a small heatmap of its pattern on the chosen
//!   probe sequence; clicking one opens it in the head view with its `heads.json` record.
//! - **Head view** (as BertViz): queries on the left, keys on the right, a line per
//!   query/key pair weighted by attention, one colour per selected head; hovering a query
//!   shows only its row (where it looks), hovering a key only its column (who looks at it).
//!   Drawn on a canvas; only pairs with weight at least `LINE_THRESHOLD` in `explore.js`
//!   (0.01) get a line, so a 256-token sequence stays responsive.
//! - **Query/key view** (as AttentionViz): per head, the embedded sequences' queries and
//!   keys projected together to 2-D by PCA ([`project_queries_keys`]), coloured by position
//!   or by token.
//! - **Patching view**: `patching.json` per kind of minimal pair as one heatmap, the
//!   residual stream entering each block and every head (rows) by position patched (columns,
//!   the last one every position), with the layer-to-layer paths and attribution patching's
//!   agreement beneath; clicking a head's row opens it in the head view. Only for tasks with
//!   pairs.
//!
//! The data is JSON ([`ExploreData`]) inside `<script type="application/json" id="data">`,
//! with every `<` written as `\u003c` so no token name can close the script tag. Patterns
//! are stored in thousandths (attention rounded to 3 decimals, as integers 0..=1000) to keep
//! the file small. At most [`EXPLORE_SEQUENCES`] probe sequences are embedded, and fewer
//! when their patterns would pass [`MAX_PATTERN_VALUES`] (the first is always embedded).
//! Everything is built from the report's own records in a fixed order, so the same run
//! gives the same file.

use std::collections::BTreeMap;

use serde::Serialize;

pub use crate::draw::embed::script_json;
use crate::draw::embed::{PAGE_SCRIPT, PAGE_STYLE, escape_html, thousandths};
use inspect::circuits::linalg::{Matrix, column_norms, orthogonalize_columns};
use inspect::interventions::patching::Patching;
use inspect::load::probe::{LayerProbe, PiecePatterns};
use inspect::measures::heads::{FIELD_UNITS, HeadRecord};

use crate::draw::units::shown_unit;

/// Probe sequences embedded in the page (the first ones of the probe batch).
pub const EXPLORE_SEQUENCES: usize = 8;

/// Most attention values (layers x heads x seq x seq, summed over the embedded sequences)
/// the page holds: 4 million, at most about 16 MB of JSON and far less in practice (most
/// values round to 0). A 4-layer, 4-head model on 256 tokens fits 3 sequences.
pub const MAX_PATTERN_VALUES: usize = 4_000_000;

const STYLE: &str = include_str!("explore/explore.css");
const SCRIPT: &str = include_str!("explore/explore.js");
const BODY: &str = include_str!("explore/body.html");

/// The key of [`ExploreData::units`] that gives the pattern scores' unit (every pattern's
/// score is a share of attention: [`inspect::measures::heads::unit_of`]).
const PATTERN_SCORES: &str = "pattern_scores.";

/// Everything the page shows, serialized into it.
#[derive(Debug, Clone, Serialize)]
pub struct ExploreData {
    /// Run name.
    pub title: String,
    /// One line: task, sizes, accuracy.
    pub summary: String,
    /// Encoder blocks.
    pub n_layers: usize,
    /// Heads per block.
    pub n_heads: usize,
    /// Sequences in the whole probe batch (the page embeds the first few).
    pub probe_sequences: usize,
    /// The embedded sequences, in probe order.
    pub sequences: Vec<Sequence>,
    /// `heads.json`, layer-major.
    pub heads: Vec<HeadRecord>,
    /// The unit each field of `heads` is shown in, beside its name, where it has one
    /// ([`crate::draw::units::shown_unit`]): "points" (the page multiplies by 100),
    /// "fraction", "nats", "positions", "logits"; the pattern scores' under
    /// `pattern_scores.`.
    pub units: BTreeMap<String, String>,
    /// What the page calls a field of `heads.json`, where `index.html`'s head table has a
    /// name for it (`ablation_drop`: "zero drop"); the rest by their field names.
    pub labels: BTreeMap<String, String>,
    /// Per layer and head, the embedded sequences' queries and keys in 2-D; empty when the
    /// page was built without the heads' weights.
    pub qk: Vec<Vec<QkProjection>>,
    /// `patching.json`; null for tasks without minimal pairs or when patching was off.
    pub patching: Option<Patching>,
    /// Why `patching` is null, as the patching view says it; null when it is not.
    pub patching_absent: Option<String>,
    /// The relations a head panel's best relations are chosen among: those the report's
    /// table shows, of enough arcs that a score is not an accident of a few.
    pub shown_relations: Vec<String>,
}

/// One embedded probe sequence.
#[derive(Debug, Clone, Serialize)]
pub struct Sequence {
    /// Its index in the probe batch.
    pub probe_index: usize,
    /// Token labels (words, or ids for tasks of numbers).
    pub tokens: Vec<String>,
    /// `[layer][head][query * seq + key]`, attention in thousandths (0..=1000).
    pub patterns: Vec<Vec<Vec<u16>>>,
    /// For a model that reads word pieces, the same sentence as its pieces with their own
    /// attention (the page's words/pieces choice); absent for a task's tokens, and for
    /// sequences past what [`MAX_PATTERN_VALUES`] leaves room for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pieces: Option<PieceSequence>,
}

/// One embedded sentence as the pieces its model reads.
#[derive(Debug, Clone, Serialize)]
pub struct PieceSequence {
    /// The pieces, `[CLS]` and `[SEP]` included.
    pub tokens: Vec<String>,
    /// `[layer][head][query * n + key]` for its `n` pieces, in thousandths.
    pub patterns: Vec<Vec<Vec<u16>>>,
}

/// One head's queries and keys projected together onto their first two principal
/// components, scaled so the largest coordinate is 1, rounded to 3 decimals.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QkProjection {
    /// `[x, y]` per query: the embedded sequences' positions in order.
    pub queries: Vec<[f64; 2]>,
    /// `[x, y]` per key, in the same order.
    pub keys: Vec<[f64; 2]>,
    /// Fraction of the variance along each of the two components.
    pub explained: [f64; 2],
}

/// A head's query and key projections, host-side: `x W + b` gives its queries or keys
/// (before rotary positions, if the model has them).
#[derive(Debug, Clone)]
pub struct QkWeights {
    /// `[d_model, d_head]` row-major.
    pub q: Vec<f32>,
    /// `[d_head]`.
    pub q_bias: Vec<f32>,
    /// `[d_model, d_head]` row-major.
    pub k: Vec<f32>,
    /// `[d_head]`.
    pub k_bias: Vec<f32>,
}

/// What [`build`] reads.
pub struct ExploreInput<'a> {
    /// Run name.
    pub title: &'a str,
    /// The summary line.
    pub summary: String,
    /// Each layer's probe.
    pub layers: &'a [LayerProbe],
    /// Token labels of every probe sequence, in probe order.
    pub labels: Vec<Vec<String>>,
    /// For a model that reads word pieces, the first probe sentences' attention between
    /// their pieces ([`inspect::load::probe::Probe::piece_patterns`]); `None` otherwise.
    pub pieces: Option<Vec<PiecePatterns>>,
    /// `heads.json`.
    pub heads: &'a [HeadRecord],
    /// Per layer and head, its query and key weights (`None`: no query/key view).
    pub weights: Option<Vec<Vec<QkWeights>>>,
    /// `patching.json` (`None`: no patching view).
    pub patching: Option<&'a Patching>,
    /// Why there is no `patching.json`, for the empty patching view.
    pub patching_absent: Option<&'a str>,
    /// The relations the report's table shows (`Relations::shown`: enough arcs to score);
    /// empty for tasks without parses.
    pub shown_relations: Vec<String>,
}

/// How many of the first sequences fit: at most [`EXPLORE_SEQUENCES`], at least one (when
/// the probe has any), and no more than `cap` values of `per_sequence` each.
pub fn sequences_to_embed(available: usize, per_sequence: usize, cap: usize) -> usize {
    let fit = cap / per_sequence.max(1);
    available.min(EXPLORE_SEQUENCES).min(fit.max(1))
}

/// The page's data.
pub fn build(input: &ExploreInput) -> ExploreData {
    let n_layers = input.layers.len();
    let (batch, n_heads, seq) = input.layers.first().map_or((0, 0, 0), LayerProbe::dims);
    let count = sequences_to_embed(batch, n_layers * n_heads * seq * seq, MAX_PATTERN_VALUES);
    let words_values = count * n_layers * n_heads * seq * seq;
    let room = MAX_PATTERN_VALUES.saturating_sub(words_values);
    let mut pieces = piece_sequences(input.pieces.as_deref().unwrap_or_default(), count, room);
    pieces.resize_with(count, || None);
    let sequences = (0..count)
        .zip(pieces)
        .map(|(b, pieces)| Sequence {
            pieces,
            probe_index: b,
            tokens: input.labels.get(b).cloned().unwrap_or_default(),
            patterns: input
                .layers
                .iter()
                .map(|layer| {
                    // The sentence's own `len x len` block (a shorter one's padding left out).
                    let len = layer.lengths[b];
                    (0..n_heads)
                        .map(|h| {
                            let start = (b * n_heads + h) * seq * seq;
                            (0..len)
                                .flat_map(|q| {
                                    let row = start + q * seq;
                                    layer.pattern.values[row..row + len].iter()
                                })
                                .map(|&p| thousandths(p))
                                .collect()
                        })
                        .collect()
                })
                .collect(),
        })
        .collect();
    let qk = match &input.weights {
        Some(weights) => input
            .layers
            .iter()
            .zip(weights)
            .map(|(layer, heads)| {
                heads
                    .iter()
                    .map(|w| project_queries_keys(layer, count, w))
                    .collect()
            })
            .collect(),
        None => vec![],
    };
    ExploreData {
        title: input.title.to_string(),
        summary: input.summary.clone(),
        n_layers,
        n_heads,
        probe_sequences: batch,
        sequences,
        heads: input.heads.to_vec(),
        units: FIELD_UNITS
            .iter()
            .map(|(field, _)| *field)
            .chain([PATTERN_SCORES])
            .map(|field| (field.to_string(), shown_unit(field).name().to_string()))
            .collect(),
        labels: (crate::draw::html::HEAD_COLUMNS.iter())
            .filter(|(title, field)| !field.is_empty() && !field.contains('.') && title != field)
            .map(|(title, field)| (field.to_string(), title.to_string()))
            .collect(),
        qk,
        patching: input.patching.cloned(),
        patching_absent: input.patching_absent.map(String::from),
        shown_relations: input.shown_relations.clone(),
    }
}

/// The first `count` sentences' pieces for the page, while their patterns take at most `room`
/// values (what [`MAX_PATTERN_VALUES`] leaves after the words'): those past it are left out,
/// and the page shows them by words.
fn piece_sequences(
    sentences: &[PiecePatterns],
    count: usize,
    mut room: usize,
) -> Vec<Option<PieceSequence>> {
    sentences
        .iter()
        .take(count)
        .map_while(|sentence| {
            let values: usize = sentence.patterns.iter().flatten().map(Vec::len).sum();
            room = room.checked_sub(values)?;
            Some(Some(PieceSequence {
                tokens: sentence.pieces.clone(),
                patterns: (sentence.patterns.iter())
                    .map(|heads| {
                        (heads.iter())
                            .map(|values| values.iter().map(|&p| thousandths(p)).collect())
                            .collect()
                    })
                    .collect(),
            }))
        })
        .collect()
}

/// `x W + b` for each row of `x` (`[rows, d_model]`), as f64 `[rows, d_head]`.
fn project(x: &[f32], rows: usize, d_model: usize, w: &[f32], b: &[f32]) -> Matrix {
    let d_head = b.len();
    let mut out = Matrix::zeros(rows, d_head);
    for i in 0..rows {
        for c in 0..d_head {
            out[(i, c)] = b[c] as f64
                + (0..d_model)
                    .map(|r| x[i * d_model + r] as f64 * w[r * d_head + c] as f64)
                    .sum::<f64>();
        }
    }
    out
}

/// A head's queries and keys on the real positions of the first `count` probe sequences,
/// in order, in 2-D. As in
/// AttentionViz (Yeh et al. 2023), the keys are first translated so their mean is the
/// queries' mean, and both are scaled so their mean norms match (queries by `s`, keys by
/// `1 / s`); the head's attention is unchanged by either (a translation of the keys adds one
/// constant per query row before the softmax). Then one PCA of both together.
pub fn project_queries_keys(layer: &LayerProbe, count: usize, w: &QkWeights) -> QkProjection {
    let d_model = layer.attn_input.shape[2];
    // The real positions of the first `count` sequences, in order.
    let rows: usize = layer.lengths[..count].iter().sum();
    let inputs = layer.real_inputs();
    let x = &inputs[..rows * d_model];
    let mut q = project(x, rows, d_model, &w.q, &w.q_bias);
    let mut k = project(x, rows, d_model, &w.k, &w.k_bias);
    let d_head = q.cols();
    let mean = |m: &Matrix| -> Vec<f64> {
        (0..d_head)
            .map(|c| (0..rows).map(|i| m[(i, c)]).sum::<f64>() / rows.max(1) as f64)
            .collect()
    };
    let (q_mean, k_mean) = (mean(&q), mean(&k));
    for i in 0..rows {
        for c in 0..d_head {
            k[(i, c)] += q_mean[c] - k_mean[c];
        }
    }
    let mean_norm = |m: &Matrix| -> f64 {
        (0..rows)
            .map(|i| m.row(i).iter().map(|v| v * v).sum::<f64>().sqrt())
            .sum::<f64>()
            / rows.max(1) as f64
    };
    let (q_norm, k_norm) = (mean_norm(&q), mean_norm(&k));
    if q_norm > 0.0 && k_norm > 0.0 {
        let s = (k_norm / q_norm).sqrt();
        for i in 0..rows {
            for c in 0..d_head {
                q[(i, c)] *= s;
                k[(i, c)] /= s;
            }
        }
    }
    let mut both = Vec::with_capacity(2 * rows * d_head);
    for m in [&q, &k] {
        for i in 0..rows {
            both.extend_from_slice(m.row(i));
        }
    }
    let (points, explained) = pca_2d(&Matrix::from_vec(2 * rows, d_head, both));
    let scale = points
        .iter()
        .flat_map(|p| p.iter())
        .fold(0.0f64, |m, v| m.max(v.abs()));
    let round = |v: f64| {
        if scale > 0.0 {
            (v / scale * 1000.0).round() / 1000.0
        } else {
            0.0
        }
    };
    let points: Vec<[f64; 2]> = points.iter().map(|p| [round(p[0]), round(p[1])]).collect();
    let keys = points[rows..].to_vec();
    let mut queries = points;
    queries.truncate(rows);
    QkProjection {
        queries,
        keys,
        explained: explained.map(|e| (e * 1000.0).round() / 1000.0),
    }
}

/// Each row of `data` (`[n, d]`) on the first two principal components of the rows, and the
/// fraction of the variance along each. Components come from the one-sided Jacobi SVD of
/// the centred data (its right singular vectors), largest first; each is signed so its
/// largest entry is positive, so the result does not depend on rotation order. With fewer
/// than two dimensions the missing coordinate is 0.
pub fn pca_2d(data: &Matrix) -> (Vec<[f64; 2]>, [f64; 2]) {
    let (n, d) = (data.rows(), data.cols());
    let mut centred = data.clone();
    for c in 0..d {
        let mean = (0..n).map(|i| data[(i, c)]).sum::<f64>() / n.max(1) as f64;
        for i in 0..n {
            centred[(i, c)] -= mean;
        }
    }
    let (av, v) = orthogonalize_columns(&centred);
    let norms = column_norms(&av);
    let mut order: Vec<usize> = (0..d).collect();
    order.sort_by(|&a, &b| norms[b].total_cmp(&norms[a]).then(a.cmp(&b)));
    let total: f64 = norms.iter().map(|s| s * s).sum();
    let mut points = vec![[0.0; 2]; n];
    let mut explained = [0.0; 2];
    for (slot, &c) in order.iter().take(2).enumerate() {
        let column: Vec<f64> = (0..d).map(|r| v[(r, c)]).collect();
        let largest = column
            .iter()
            .copied()
            .fold(0.0f64, |m, x| if x.abs() > m.abs() { x } else { m });
        let sign = if largest < 0.0 { -1.0 } else { 1.0 };
        for (i, point) in points.iter_mut().enumerate() {
            point[slot] = sign * av[(i, c)];
        }
        if total > 0.0 {
            explained[slot] = norms[c] * norms[c] / total;
        }
    }
    (points, explained)
}

/// The whole page.
pub fn render(data: &ExploreData) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>headlab explore: {title}</title>\n<style>\n{PAGE_STYLE}{STYLE}</style>\n</head>\n\
         <body data-ready=\"loading\">\n<h1>headlab explore: {title}</h1>\n\
         <p class=\"summary\">{summary} &middot; {shown} of {total} probe sequences embedded \
         &middot; <a href=\"index.html\">static report (index.html)</a></p>\n{BODY}\
         <script type=\"application/json\" id=\"data\">{json}</script>\n\
         <script>\n{PAGE_SCRIPT}</script>\n<script>\n{SCRIPT}</script>\n</body>\n</html>\n",
        title = escape_html(&data.title),
        summary = escape_html(&data.summary),
        shown = data.sequences.len(),
        total = data.probe_sequences,
        json = script_json(data),
    )
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use model::HeadId;
    use run::tensor_file::HostTensor;

    use super::*;

    fn record(layer: usize, head: usize) -> HeadRecord {
        HeadRecord {
            id: HeadId::new(layer, head),
            entropy: 0.5,
            confidence: 0.9,
            mean_distance: 1.0,
            pattern_scores: BTreeMap::from([("previous".to_string(), 0.75)]),
            ablation_drop: Some(0.1),
            role: "previous".into(),
            copying_score: 0.2,
            full_copying_score: None,
            qk_effective_rank: 1.0,
            ov_effective_rank: 2.0,
            direct_logit_attribution: Some(0.0),
            gradient_importance: Some(0.0),
            mean_value_norm: 0.0,
            mean_weighted_norm: 0.0,
            norm_weight_correlation: None,
            task_target_score: Some(0.5),
            relation_scores: None,
            mean_ablation_drop: None,
            resample_ablation_drop: None,
            attends_to: None,
        }
    }

    /// `batch` sequences of `seq`, 2 heads, d_model 3, with patterns `1/3` and inputs
    /// `x[b, i] = (i, b, 1)`.
    fn layer(batch: usize, seq: usize) -> LayerProbe {
        let heads = 2;
        let attn_input: Vec<f32> = (0..batch * seq)
            .flat_map(|r| [(r % seq) as f32, (r / seq) as f32, 1.0])
            .collect();
        LayerProbe {
            attn_input: HostTensor {
                values: attn_input,
                shape: vec![batch, seq, 3],
            },
            pattern: HostTensor {
                values: vec![1.0 / 3.0; batch * heads * seq * seq],
                shape: vec![batch, heads, seq, seq],
            },
            head_outputs: HostTensor {
                values: vec![0.0; batch * seq * heads * 2],
                shape: vec![batch, seq, heads, 2],
            },
            lengths: vec![seq; batch],
        }
    }

    fn weights() -> QkWeights {
        // q reads (x0, x1), k reads (x0, 0): d_head 2.
        QkWeights {
            q: vec![1.0, 0.0, 0.0, 1.0, 0.0, 0.0],
            q_bias: vec![0.0, 0.0],
            k: vec![1.0, 0.0, 0.0, 0.0, 0.0, 0.0],
            k_bias: vec![0.5, 0.0],
        }
    }

    fn input<'a>(
        layers: &'a [LayerProbe],
        heads: &'a [HeadRecord],
        labels: Vec<Vec<String>>,
    ) -> ExploreInput<'a> {
        ExploreInput {
            title: "t",
            summary: "s".into(),
            layers,
            labels,
            pieces: None,
            heads,
            weights: Some(vec![vec![weights(), weights()]; layers.len()]),
            patching: None,
            patching_absent: Some("This task has no minimal pairs."),
            shown_relations: vec![],
        }
    }

    #[test]
    fn patterns_are_embedded_in_thousandths_per_layer_and_head() {
        let layers = vec![layer(10, 3), layer(10, 3)];
        let heads: Vec<HeadRecord> = (0..4).map(|i| record(i / 2, i % 2)).collect();
        let labels = (0..10).map(|b| vec![format!("w{b}"); 3]).collect();
        let data = build(&input(&layers, &heads, labels));
        assert_eq!(
            (data.n_layers, data.n_heads, data.probe_sequences),
            (2, 2, 10)
        );
        assert_eq!(data.sequences.len(), EXPLORE_SEQUENCES);
        for (b, s) in data.sequences.iter().enumerate() {
            assert_eq!(s.probe_index, b);
            assert_eq!(s.tokens, vec![format!("w{b}"); 3]);
            assert_eq!(s.patterns.len(), 2);
            assert!(s.patterns.iter().all(|l| l.len() == 2));
            assert!(s.patterns.iter().flatten().all(|p| *p == vec![333; 9]));
        }
        assert_eq!(data.heads.len(), 4);
        assert_eq!(data.qk.len(), 2);
        assert_eq!(data.qk[0].len(), 2);
        assert_eq!(data.qk[1][1].queries.len(), EXPLORE_SEQUENCES * 3);
        assert_eq!(data.qk[1][1].keys.len(), EXPLORE_SEQUENCES * 3);
        let json = script_json(&data);
        assert!(json.contains("[333,333,333,333,333,333,333,333,333]"));
        // The same input gives the same bytes.
        let labels = (0..10).map(|b| vec![format!("w{b}"); 3]).collect();
        assert_eq!(json, script_json(&build(&input(&layers, &heads, labels))));
    }

    #[test]
    fn rounding_keeps_three_decimals() {
        assert_eq!(thousandths(0.0), 0);
        assert_eq!(thousandths(0.12345), 123);
        assert_eq!(thousandths(0.9996), 1000);
        assert_eq!(thousandths(1.0), 1000);
        assert_eq!(thousandths(-0.0001), 0);
    }

    #[test]
    fn the_size_cap_limits_the_sequences_but_keeps_one() {
        assert_eq!(
            sequences_to_embed(64, 100, MAX_PATTERN_VALUES),
            EXPLORE_SEQUENCES
        );
        assert_eq!(sequences_to_embed(3, 100, MAX_PATTERN_VALUES), 3);
        assert_eq!(sequences_to_embed(64, 100, 350), 3);
        assert_eq!(sequences_to_embed(64, 1000, 350), 1);
        assert_eq!(sequences_to_embed(0, 1000, 350), 0);
        // 4 layers x 4 heads on 256 tokens: 3 sequences.
        assert_eq!(
            sequences_to_embed(64, 16 * 256 * 256, MAX_PATTERN_VALUES),
            3
        );
        let layers = vec![layer(8, 40)];
        let data = build(&ExploreInput {
            weights: None,
            patching: None,
            patching_absent: Some("This task has no minimal pairs."),
            ..input(&layers, &[], vec![])
        });
        assert_eq!(data.sequences.len(), EXPLORE_SEQUENCES);
        assert!(data.qk.is_empty());
    }

    /// Pieces ride beside the words, in thousandths, for the first sentences whose patterns
    /// fit the room the words leave; the rest are shown by words.
    #[test]
    fn pieces_are_embedded_beside_the_words_while_they_fit() {
        let layers = vec![layer(3, 2)];
        let sentence = |n: usize| PiecePatterns {
            pieces: (0..n).map(|i| format!("p{i}")).collect(),
            // 1 layer, 2 heads; attention 1/n everywhere.
            patterns: vec![vec![vec![1.0 / n as f32; n * n]; 2]],
        };
        let data = build(&ExploreInput {
            pieces: Some(vec![sentence(4), sentence(5)]),
            ..input(&layers, &[], vec![])
        });
        let first = data.sequences[0].pieces.as_ref().unwrap();
        assert_eq!(first.tokens, ["p0", "p1", "p2", "p3"]);
        assert_eq!(first.patterns[0][1], vec![250u16; 16]);
        assert_eq!(data.sequences[1].pieces.as_ref().unwrap().tokens.len(), 5);
        assert!(
            data.sequences[2].pieces.is_none(),
            "no third sentence of pieces"
        );
        // Room for the first only: 2 heads x 16 values, then 2 x 25 more would pass it.
        let kept = piece_sequences(&[sentence(4), sentence(5)], 2, 40);
        assert!(kept[0].is_some());
        assert_eq!(kept.len(), 1);
        let json = serde_json::to_string(&data.sequences[2]).unwrap();
        assert!(!json.contains("pieces"), "{json}");
    }

    #[test]
    fn a_token_cannot_close_the_script() {
        let layers = vec![layer(1, 3)];
        let labels = vec![vec!["</script>".into(), "<!--".into(), "a&b".into()]];
        let mut data = build(&input(&layers, &[], labels));
        data.title = "</script><b>".into();
        let html = render(&data);
        assert_eq!(
            html.matches("</script>").count(),
            3,
            "only the page's own three (data, shared script, page script)"
        );
        assert!(html.contains("\\u003c/script>"));
        assert!(html.contains("headlab explore: &lt;/script&gt;&lt;b&gt;"));
        // The escaped JSON parses back to the same tokens.
        let start = html.find("id=\"data\">").unwrap() + "id=\"data\">".len();
        let end = start + html[start..].find("</script>").unwrap();
        let parsed: serde_json::Value = serde_json::from_str(&html[start..end]).unwrap();
        assert_eq!(parsed["sequences"][0]["tokens"][0], "</script>");
        assert_eq!(parsed["sequences"][0]["tokens"][1], "<!--");
    }

    #[test]
    fn pca_finds_the_long_axis_of_a_point_cloud() {
        // Points along (3, 4) / 5 with spread 10, and a small spread 1 along (-4, 3) / 5,
        // plus an offset: the first component is +-(0.6, 0.8) and holds 100 / 101 of the
        // variance.
        let mut rows = vec![];
        for (t, u) in [(-10.0, 1.0), (10.0, -1.0), (-10.0, -1.0), (10.0, 1.0)] {
            rows.push(vec![5.0 + 0.6 * t - 0.8 * u, -2.0 + 0.8 * t + 0.6 * u, 7.0]);
        }
        let refs: Vec<&[f64]> = rows.iter().map(|r| r.as_slice()).collect();
        let (points, explained) = pca_2d(&Matrix::from_rows(&refs));
        assert!((explained[0] - 100.0 / 101.0).abs() < 1e-9, "{explained:?}");
        assert!((explained[1] - 1.0 / 101.0).abs() < 1e-9, "{explained:?}");
        for (p, (t, u)) in
            points
                .iter()
                .zip([(-10.0f64, 1.0f64), (10.0, -1.0), (-10.0, -1.0), (10.0, 1.0)])
        {
            // The sign rule makes the first component (0.6, 0.8, 0): its largest entry
            // positive. The second is (-0.8, 0.6, 0) negated; compare its magnitude.
            assert!((p[0] - t).abs() < 1e-9, "{p:?}");
            assert!((p[1].abs() - u.abs()).abs() < 1e-9, "{p:?}");
        }
    }

    #[test]
    fn queries_and_keys_share_one_centred_plane() {
        let layers = [layer(2, 4)];
        let projection = project_queries_keys(&layers[0], 2, &weights());
        assert_eq!(projection.queries.len(), 8);
        assert_eq!(projection.keys.len(), 8);
        let all = projection.queries.iter().chain(&projection.keys);
        let max = all
            .clone()
            .fold(0.0f64, |m, p| m.max(p[0].abs()).max(p[1].abs()));
        assert_eq!(max, 1.0);
        assert!(projection.explained[0] >= projection.explained[1]);
        assert!((projection.explained[0] + projection.explained[1] - 1.0).abs() < 1e-3);
    }
}
