//! `compare.html`: the interactive page `compare` writes beside `matching.json`, one
//! self-contained file (inline CSS and vanilla JS, no network) that works from `file://`.
//!
//! - **Matched heads**: for a chosen probe sequence and layer, a grid of small heatmaps, one
//!   row per reference head ("slot") and one column per run (the reference first), each the
//!   run's head matched to that slot, with its role and similarity. Clicking a cell opens
//!   the **slot view**: that slot's matched heads of every run side by side, larger;
//!   hovering a query row highlights that row in all of them.
//! - **Diff view**: two runs A and B; per slot, their heads, roles and measures with B - A,
//!   and the pattern similarity of the two heads; a row's B - A attention on a diverging
//!   colour scale.
//!
//! The data ([`CompareData`]) is embedded as explore's is ([`crate::draw::embed`]): JSON with `<`
//! escaped, patterns in thousandths, at most [`crate::draw::explore::EXPLORE_SEQUENCES`] probe
//! sequences and fewer
//! when the matched heads' patterns of every run would pass [`MAX_PATTERN_VALUES`] (the first
//! is always embedded). The measures are `heads.json`'s pattern measures
//! ([`inspect::measures::patterns`], [`inspect::measures::heads::head_roles`]), on the shared probe.

use serde::Serialize;

use crate::draw::embed::{PAGE_SCRIPT, PAGE_STYLE, escape_html, script_json, thousandths};
use crate::draw::explore::{MAX_PATTERN_VALUES, sequences_to_embed};
use inspect::load::probe::LayerProbe;
use inspect::measures::heads::{HeadMeasures, unit_of};
use inspect::measures::matching::{LayerMatch, head_similarity};

const STYLE: &str = include_str!("compare_page/compare.css");
const SCRIPT: &str = include_str!("compare_page/compare.js");
const BODY: &str = include_str!("compare_page/body.html");

/// Everything the page shows, serialized into it.
#[derive(Debug, Clone, Serialize)]
pub struct CompareData {
    /// Page title.
    pub title: String,
    /// One line: task, sizes, probe.
    pub summary: String,
    /// Encoder blocks.
    pub n_layers: usize,
    /// Heads per block: the slots of each layer.
    pub n_heads: usize,
    /// Sequences in the whole probe batch (the page embeds the first few).
    pub probe_sequences: usize,
    /// Every run, the reference first.
    pub runs: Vec<PageRun>,
    /// Names of the measures in [`MatchedHead::measures`], in order: `entropy`,
    /// `confidence`, `mean_distance`, `task_target_score` (when the task has targets), then
    /// `pattern_scores.NAME` for each pattern.
    pub measures: Vec<String>,
    /// The unit of each measure, in the order of `measures`
    /// ([`inspect::measures::heads::unit_of`]): "nats", "fraction", "positions", or "".
    pub units: Vec<String>,
    /// `[layer][slot]`.
    pub layers: Vec<Vec<PageSlot>>,
    /// The embedded probe sequences, in probe order.
    pub sequences: Vec<PageSequence>,
}

/// One compared run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PageRun {
    /// The run directory's name.
    pub name: String,
    /// The whole run directory, as given.
    pub dir: String,
    /// Its seed.
    pub seed: u64,
    /// The last eval token accuracy in its `metrics.jsonl`.
    pub eval_token_acc: Option<f64>,
}

/// One reference head and its matched heads.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PageSlot {
    /// Per run: the head matched to this slot.
    pub matched: Vec<MatchedHead>,
    /// `[a][b]`: pattern similarity (1 - JS distance on the whole probe, as the matching's)
    /// of run a's and run b's matched heads; symmetric, 1 on the diagonal. Column 0 is the
    /// matching's own similarity to the reference.
    pub similarity_between: Vec<Vec<f64>>,
}

/// One run's head matched to a slot.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MatchedHead {
    /// Its layer: the slot's, unless the models were matched across layers.
    pub layer: usize,
    /// Its index in its own layer.
    pub head: usize,
    /// Its role on the shared probe.
    pub role: String,
    /// Its pattern similarity to the reference head.
    pub similarity: f64,
    /// Its measures, in the order of [`CompareData::measures`].
    pub measures: Vec<Option<f64>>,
}

/// One embedded probe sequence.
#[derive(Debug, Clone, Serialize)]
pub struct PageSequence {
    /// Its index in the probe batch.
    pub probe_index: usize,
    /// Token labels (words, or ids for tasks of numbers).
    pub tokens: Vec<String>,
    /// `[layer][slot][run][query * seq + key]`: the matched head's attention in thousandths.
    pub patterns: Vec<Vec<Vec<Vec<u16>>>>,
}

/// One run as [`build`] reads it.
pub struct PageRunInput<'a> {
    /// The run directory's name.
    pub name: String,
    /// The whole run directory.
    pub dir: String,
    /// Its seed.
    pub seed: u64,
    /// Its last eval token accuracy.
    pub eval_token_acc: Option<f64>,
    /// Each layer's probe (the shared probe sequences).
    pub layers: &'a [LayerProbe],
    /// Per layer, its matching to the reference (identity for the reference).
    pub matches: &'a [LayerMatch],
    /// `[layer][own head]`, from [`inspect::measures::heads::measure_layer`].
    pub measures: &'a [Vec<HeadMeasures>],
}

/// What [`build`] reads.
pub struct ComparePageInput<'a> {
    /// Page title.
    pub title: String,
    /// The summary line.
    pub summary: String,
    /// Every run, the reference first.
    pub runs: Vec<PageRunInput<'a>>,
    /// Token labels of every probe sequence, in probe order.
    pub labels: Vec<Vec<String>>,
}

/// The measure names of a head, in the page's order (see [`CompareData::measures`]).
fn measure_names(head: &HeadMeasures, with_targets: bool) -> Vec<String> {
    let mut names: Vec<String> = ["entropy", "confidence", "mean_distance"]
        .map(String::from)
        .to_vec();
    if with_targets {
        names.push("task_target_score".into());
    }
    names.extend(
        head.pattern_scores
            .keys()
            .map(|name| format!("pattern_scores.{name}")),
    );
    names
}

/// `head`'s values of the measures `names`.
fn measure_values(head: &HeadMeasures, names: &[String]) -> Vec<Option<f64>> {
    names
        .iter()
        .map(|name| match name.as_str() {
            "entropy" => Some(head.entropy),
            "confidence" => Some(head.confidence),
            "mean_distance" => Some(head.mean_distance),
            "task_target_score" => head.task_target_score,
            other => other
                .strip_prefix("pattern_scores.")
                .and_then(|pattern| head.pattern_scores.get(pattern).copied()),
        })
        .collect()
}

/// The page's data.
pub fn build(input: &ComparePageInput) -> CompareData {
    let runs = &input.runs;
    let reference = runs.first().expect("at least one run on the page");
    let n_layers = reference.layers.len();
    let (batch, n_heads, seq) = reference.layers.first().map_or((0, 0, 0), LayerProbe::dims);
    let measures = measure_columns(runs);
    let layers = (0..n_layers)
        .map(|l| layer_slots(runs, l, n_heads, &measures))
        .collect();
    let sequences = embedded_sequences(input, batch, n_layers, n_heads, seq);
    CompareData {
        title: input.title.clone(),
        summary: input.summary.clone(),
        n_layers,
        n_heads,
        probe_sequences: batch,
        runs: runs
            .iter()
            .map(|run| PageRun {
                name: run.name.clone(),
                dir: run.dir.clone(),
                seed: run.seed,
                eval_token_acc: run.eval_token_acc,
            })
            .collect(),
        units: measures
            .iter()
            .map(|m| unit_of(m).name().to_string())
            .collect(),
        measures,
        layers,
        sequences,
    }
}

/// The measure names the page has columns for (see [`CompareData::measures`]).
fn measure_columns(runs: &[PageRunInput]) -> Vec<String> {
    // Every head of the task has the same patterns; a measure without a value anywhere (the
    // file task's targets) gets no column.
    let all_heads = || runs.iter().flat_map(|r| r.measures.iter().flatten());
    let with_targets = all_heads().any(|h| h.task_target_score.is_some());
    all_heads()
        .next()
        .map_or_else(Vec::new, |head| measure_names(head, with_targets))
}

/// Layer `l`'s slots: per slot, every run's matched head and their similarities.
fn layer_slots(
    runs: &[PageRunInput],
    l: usize,
    n_heads: usize,
    measures: &[String],
) -> Vec<PageSlot> {
    similarity_between(runs, l, n_heads)
        .into_iter()
        .enumerate()
        .map(|(slot, similarity_between)| PageSlot {
            matched: runs
                .iter()
                .map(|run| {
                    let matched = &run.matches[l];
                    let partner = matched.partner_of(slot);
                    let own = &run.measures[partner.layer][partner.head];
                    MatchedHead {
                        layer: partner.layer,
                        head: partner.head,
                        role: own.role.clone(),
                        similarity: matched.similarity[slot],
                        measures: measure_values(own, measures),
                    }
                })
                .collect(),
            similarity_between,
        })
        .collect()
}

/// `[slot][a][b]`: in layer `l`, the pattern similarity of run a's and run b's heads matched
/// to each slot (see [`PageSlot::similarity_between`]).
fn similarity_between(runs: &[PageRunInput], l: usize, n_heads: usize) -> Vec<Vec<Vec<f64>>> {
    // Only the matched pairs: run a's head against run b's, each in its own layer.
    let mut between = vec![vec![vec![1.0; runs.len()]; runs.len()]; n_heads];
    for a in 0..runs.len() {
        for b in a + 1..runs.len() {
            for (slot, pairs) in between.iter_mut().enumerate() {
                let head_a = runs[a].matches[l].partner_of(slot);
                let head_b = runs[b].matches[l].partner_of(slot);
                let s = head_similarity(
                    &runs[a].layers[head_a.layer],
                    head_a.head,
                    &runs[b].layers[head_b.layer],
                    head_b.head,
                );
                pairs[a][b] = s;
                pairs[b][a] = s;
            }
        }
    }
    between
}

/// The first probe sequences, as many as fit in [`MAX_PATTERN_VALUES`], with every run's
/// matched heads' patterns.
fn embedded_sequences(
    input: &ComparePageInput,
    batch: usize,
    n_layers: usize,
    n_heads: usize,
    seq: usize,
) -> Vec<PageSequence> {
    let runs = &input.runs;
    let per_sequence = runs.len() * n_layers * n_heads * seq * seq;
    let count = sequences_to_embed(batch, per_sequence, MAX_PATTERN_VALUES);
    (0..count)
        .map(|b| PageSequence {
            probe_index: b,
            tokens: input.labels.get(b).cloned().unwrap_or_default(),
            patterns: (0..n_layers)
                .map(|l| {
                    (0..n_heads)
                        .map(|slot| {
                            runs.iter()
                                .map(|run| matched_pattern(run, b, l, slot, seq))
                                .collect()
                        })
                        .collect()
                })
                .collect(),
        })
        .collect()
}

/// `[query * seq + key]`: on probe sequence `b`, the attention in thousandths of `run`'s head
/// matched to `slot` of layer `l`.
fn matched_pattern(run: &PageRunInput, b: usize, l: usize, slot: usize, seq: usize) -> Vec<u16> {
    let partner = run.matches[l].partner_of(slot);
    let layer = &run.layers[partner.layer];
    // The run's own heads per layer: another grid's, matched across layers.
    let (_, n_heads, _) = layer.dims();
    let start = (b * n_heads + partner.head) * seq * seq;
    layer.pattern.values[start..start + seq * seq]
        .iter()
        .map(|&p| thousandths(p))
        .collect()
}

/// The whole page.
pub fn render(data: &CompareData) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>headlab compare: {title}</title>\n<style>\n{PAGE_STYLE}{STYLE}</style>\n</head>\n\
         <body data-ready=\"loading\">\n<h1>headlab compare: {title}</h1>\n\
         <p class=\"summary\">{summary} &middot; {shown} of {total} probe sequences embedded \
         &middot; <a href=\"matching.json\">matching.json</a> &middot; \
         <a href=\"matched-attention.png\">matched-attention.png</a></p>\n{BODY}\
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
    use std::path::Path;

    use run::tensor_file::HostTensor;
    use tasks::{SequenceSpec, Task, TaskConfig};

    use super::*;
    use crate::draw::explore::EXPLORE_SEQUENCES;
    use inspect::measures::heads::measure_layer;
    use inspect::measures::matching::match_layers;

    fn reverse() -> Task {
        TaskConfig::Reverse(SequenceSpec {
            seq_len: 4,
            vocab_size: 5,
        })
        .build(Path::new("."))
        .unwrap()
    }

    /// `batch` sequences of length `seq`; head `h` puts `1 - spread` of each query's
    /// attention on key `(q + offsets[h]) mod seq` and `spread` evenly over the others.
    fn layer(offsets: &[usize], batch: usize, seq: usize, spread: f32) -> LayerProbe {
        let heads = offsets.len();
        let mut pattern = vec![spread / (seq - 1) as f32; batch * heads * seq * seq];
        for b in 0..batch {
            for (h, offset) in offsets.iter().enumerate() {
                for q in 0..seq {
                    pattern[((b * heads + h) * seq + q) * seq + (q + offset) % seq] = 1.0 - spread;
                }
            }
        }
        let zeros = |shape: Vec<usize>| HostTensor {
            values: vec![0.0; shape.iter().product()],
            shape,
        };
        LayerProbe {
            attn_input: zeros(vec![batch, seq, 4]),
            pattern: HostTensor {
                values: pattern,
                shape: vec![batch, heads, seq, seq],
            },
            head_outputs: zeros(vec![batch, seq, heads, 2]),
            lengths: vec![seq; batch],
        }
    }

    /// Three runs of 2 layers x 3 heads on `batch` sequences of 4 tokens: the reference, the
    /// reference with its heads permuted, and a run whose heads are blurred.
    struct Fixture {
        layers: Vec<Vec<LayerProbe>>,
        matches: Vec<Vec<LayerMatch>>,
        measures: Vec<Vec<Vec<HeadMeasures>>>,
    }

    fn fixture(batch: usize) -> Fixture {
        let seq = 4;
        let layers = vec![
            vec![
                layer(&[0, 1, 3], batch, seq, 0.0),
                layer(&[2, 0, 1], batch, seq, 0.0),
            ],
            vec![
                layer(&[3, 0, 1], batch, seq, 0.0),
                layer(&[1, 0, 2], batch, seq, 0.0),
            ],
            vec![
                layer(&[1, 3, 0], batch, seq, 0.3),
                layer(&[2, 1, 0], batch, seq, 0.3),
            ],
        ];
        let matches = layers
            .iter()
            .map(|run| match_layers(&layers[0], run))
            .collect();
        let task = reverse();
        let tokens: Vec<u32> = (0..batch * seq).map(|i| (i % 5) as u32).collect();
        let targets: Vec<Vec<Vec<usize>>> = tokens
            .chunks(seq)
            .map(|input| task.attention_targets(input))
            .collect();
        let measures = layers
            .iter()
            .map(|run| {
                run.iter()
                    .map(|l| measure_layer(&task, l, &tokens, &targets))
                    .collect()
            })
            .collect();
        Fixture {
            layers,
            matches,
            measures,
        }
    }

    fn input(fixture: &Fixture, labels: Vec<Vec<String>>) -> ComparePageInput<'_> {
        ComparePageInput {
            title: "t".into(),
            summary: "s".into(),
            runs: (0..fixture.layers.len())
                .map(|r| PageRunInput {
                    name: format!("seed-{r}"),
                    dir: format!("runs/x/seed-{r}"),
                    seed: r as u64,
                    eval_token_acc: Some(0.5 + r as f64 / 10.0),
                    layers: &fixture.layers[r],
                    matches: &fixture.matches[r],
                    measures: &fixture.measures[r],
                })
                .collect(),
            labels,
        }
    }

    #[test]
    fn the_data_has_a_slot_per_reference_head_and_a_head_per_run() {
        let fixture = fixture(10);
        let labels = (0..10).map(|b| vec![format!("w{b}"); 4]).collect();
        let data = build(&input(&fixture, labels));
        assert_eq!(
            (data.n_layers, data.n_heads, data.probe_sequences),
            (2, 3, 10)
        );
        assert_eq!(data.runs.len(), 3);
        assert_eq!(data.runs[1].name, "seed-1");
        assert_eq!(data.runs[2].eval_token_acc, Some(0.7));
        assert_eq!(data.layers.len(), 2);
        assert_eq!(
            data.measures[..4],
            [
                "entropy",
                "confidence",
                "mean_distance",
                "task_target_score"
            ]
        );
        assert!(
            data.measures
                .contains(&"pattern_scores.previous_token".to_string())
        );
        for slots in &data.layers {
            assert_eq!(slots.len(), 3);
            for slot in slots {
                assert_eq!(slot.matched.len(), 3);
                assert_eq!(slot.similarity_between.len(), 3);
                assert!(
                    slot.matched
                        .iter()
                        .all(|m| m.measures.len() == data.measures.len())
                );
                assert!(
                    slot.matched
                        .iter()
                        .flat_map(|m| &m.measures)
                        .all(Option::is_some)
                );
            }
        }
        assert_eq!(data.sequences.len(), EXPLORE_SEQUENCES);
        for (b, sequence) in data.sequences.iter().enumerate() {
            assert_eq!(sequence.probe_index, b);
            assert_eq!(sequence.tokens, vec![format!("w{b}"); 4]);
            assert_eq!(sequence.patterns.len(), 2);
            for slots in &sequence.patterns {
                assert_eq!(slots.len(), 3);
                assert!(slots.iter().all(|runs| runs.len() == 3));
                assert!(slots.iter().flatten().all(|p| p.len() == 16));
            }
        }
        // The same input gives the same bytes.
        let again = build(&input(
            &fixture,
            (0..10).map(|b| vec![format!("w{b}"); 4]).collect(),
        ));
        assert_eq!(script_json(&data), script_json(&again));
    }

    #[test]
    fn matched_heads_follow_the_matching() {
        let fixture = fixture(2);
        let data = build(&input(&fixture, vec![]));
        for (l, slots) in data.layers.iter().enumerate() {
            for (slot, page_slot) in slots.iter().enumerate() {
                for (r, matched) in page_slot.matched.iter().enumerate() {
                    let matching = &fixture.matches[r][l];
                    assert_eq!(matched.head, matching.partner[slot]);
                    assert_eq!(matched.similarity, matching.similarity[slot]);
                    let own = &fixture.measures[r][l][matched.head];
                    assert_eq!(matched.role, own.role);
                    assert_eq!(matched.measures[0], Some(own.entropy));
                    // The embedded pattern is the matched head's, not the slot's index.
                    let seq = 4;
                    let start = matched.head * seq * seq;
                    let expected: Vec<u16> = fixture.layers[r][l].pattern.values
                        [start..start + seq * seq]
                        .iter()
                        .map(|&p| thousandths(p))
                        .collect();
                    assert_eq!(data.sequences[0].patterns[l][slot][r], expected);
                }
                // Column 0 is the matching's similarity; the matrix is symmetric.
                let between = &page_slot.similarity_between;
                for (r, row) in between.iter().enumerate() {
                    assert_eq!(row[0], fixture.matches[r][l].similarity[slot]);
                    assert_eq!(row[r], 1.0);
                    for (s, value) in row.iter().enumerate() {
                        assert_eq!(*value, between[s][r]);
                    }
                }
            }
        }
        // The permuted copy is matched back exactly: reference head 0 of layer 0 attends to
        // itself (offset 0), which is run 1's head 1.
        assert_eq!(data.layers[0][0].matched[1].head, 1);
        assert!((data.layers[0][0].matched[1].similarity - 1.0).abs() < 1e-9);
        assert_eq!(data.layers[0][0].matched[0].role, "self");
        assert_eq!(data.layers[0][0].matched[1].role, "self");
        // The blurred run keeps the role (0.7 on itself) but is less similar.
        assert_eq!(data.layers[0][0].matched[2].head, 2);
        assert!(data.layers[0][0].matched[2].similarity < 0.99);
        // Runs 1 and 2 compared directly, not through the reference.
        let between = &data.layers[0][0].similarity_between;
        assert!((between[1][2] - between[0][2]).abs() < 1e-9, "{between:?}");
    }

    #[test]
    fn the_size_cap_limits_the_sequences_but_keeps_one() {
        // 3 runs x 2 layers x 3 heads x 16 values = 288 per sequence.
        let ten = fixture(10);
        let data = build(&input(&ten, vec![]));
        assert_eq!(data.sequences.len(), EXPLORE_SEQUENCES);
        assert_eq!(
            sequences_to_embed(10, 288, MAX_PATTERN_VALUES),
            EXPLORE_SEQUENCES
        );
        // The cap counts every run: 8 runs of 4 layers x 4 heads on 256 tokens fit one.
        assert_eq!(
            sequences_to_embed(64, 8 * 16 * 256 * 256, MAX_PATTERN_VALUES),
            1
        );
        let short = fixture(1);
        assert_eq!(build(&input(&short, vec![])).sequences.len(), 1);
    }

    #[test]
    fn a_task_without_targets_gets_no_target_column() {
        let fixture = fixture(1);
        let mut measures = fixture.measures.clone();
        for head in measures.iter_mut().flatten().flatten() {
            head.task_target_score = None;
        }
        let without = Fixture {
            measures,
            ..fixture
        };
        let data = build(&input(&without, vec![]));
        assert!(!data.measures.iter().any(|m| m == "task_target_score"));
        assert_eq!(data.measures[3], "pattern_scores.anti_diagonal");
        let matched = &data.layers[0][0].matched[0];
        assert_eq!(matched.measures.len(), data.measures.len());
    }

    #[test]
    fn a_token_or_run_name_cannot_close_the_script() {
        let fixture = fixture(1);
        let labels = vec![vec![
            "</script>".into(),
            "<!--".into(),
            "a&b".into(),
            "x".into(),
        ]];
        let mut input = input(&fixture, labels);
        input.runs[1].name = "</script><b>".into();
        input.title = "<i>".into();
        let html = render(&build(&input));
        assert_eq!(
            html.matches("</script>").count(),
            3,
            "only the page's own three (data, shared script, page script)"
        );
        assert!(html.contains("headlab compare: &lt;i&gt;"));
        let start = html.find("id=\"data\">").unwrap() + "id=\"data\">".len();
        let end = start + html[start..].find("</script>").unwrap();
        let parsed: serde_json::Value = serde_json::from_str(&html[start..end]).unwrap();
        assert_eq!(parsed["sequences"][0]["tokens"][0], "</script>");
        assert_eq!(parsed["sequences"][0]["tokens"][1], "<!--");
        assert_eq!(parsed["runs"][1]["name"], "</script><b>");
        // Self-contained: nothing fetched.
        assert!(!html.contains("http://") && !html.contains("https://"));
        assert!(!html.contains(" src="));
    }
}
