//! `patching.json`: the causal tests on minimal pairs ([`tasks::MinimalPair`]), one section
//! per kind of the task's pairs ([`PairKind`]) and one for a user's own (`inspect --pairs`,
//! [`crate::load::own_pairs`]), each with activation patching of heads and of the residual
//! stream ([`super::activation_patching`]), mean ablation of each head on the clean inputs,
//! path patching ([`super::path_patching`]) and attribution patching
//! ([`super::attribution_patching`]), all measured on the same passes ([`PairPasses`]).

use burn::prelude::*;
use model::Encoder;
use serde::{Deserialize, Serialize};
use tasks::batch::mix_seed;
use tasks::{MinimalPair, PairKind};

use super::activation_patching::{
    HeadPatching, ResidualPatching, head_patching, residual_patching,
};
use super::attribution_patching::{AttributionAgreement, attribution_patching};
use super::pair_passes::PairPasses;
use super::path_patching::{LayerPathPatching, PathPatching, head_paths, layer_paths};
use crate::load::context::MeasureContext;
use crate::load::own_pairs::{OwnPairs, WrittenPair};
use crate::load::reading::ReadingError;

/// Pairs patched per kind per report.
pub const PATCHING_PAIRS: usize = 64;

/// Stream of the pairs, apart from training, evaluation, the probe and the relations; each
/// kind of pair draws from its own counter of it.
const PAIRS_STREAM: u64 = u64::MAX - 3;

/// `patching.json`: one section per kind of minimal pair the task has, and one for the
/// pairs a user wrote.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Patching {
    /// Pairs whose answer token changes ([`PairKind::Answer`]); null when the task has none.
    pub answer: Option<PairPatching>,
    /// Pairs whose answer is found elsewhere ([`PairKind::Route`]); null when the task has
    /// none (every task but recall).
    pub route: Option<PairPatching>,
    /// The pairs of `inspect --pairs FILE` ([`PairPatching::written`] names the file and
    /// its lines); absent without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub own: Option<PairPatching>,
}

/// Where a section's pairs come from: the task (by kind) or a user's file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PairSource {
    /// The task's pairs of one kind.
    Task(PairKind),
    /// The pairs of `inspect --pairs FILE`.
    Own,
}

impl PairSource {
    /// The section's key in `patching.json`: `answer`, `route` or `own`.
    pub fn name(self) -> &'static str {
        match self {
            PairSource::Task(kind) => kind.name(),
            PairSource::Own => "own",
        }
    }
}

impl Patching {
    /// The sections present, with where their pairs come from: answer, route, own.
    pub fn sections(&self) -> impl Iterator<Item = (PairSource, &PairPatching)> {
        [
            (PairSource::Task(PairKind::Answer), self.answer.as_ref()),
            (PairSource::Task(PairKind::Route), self.route.as_ref()),
            (PairSource::Own, self.own.as_ref()),
        ]
        .into_iter()
        .filter_map(|(source, section)| section.map(|s| (source, s)))
    }
}

/// The file a section's pairs were written in (`inspect --pairs`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WrittenPairs {
    /// The file, as given.
    pub file: String,
    /// SHA-256 of its bytes.
    pub sha256: String,
    /// Its pairs as written, in the order of [`PairPatching::inputs`].
    pub pairs: Vec<WrittenPair>,
}

/// Every patching result on one set of minimal pairs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairPatching {
    /// Minimal pairs patched.
    pub pairs: usize,
    /// Mean logit difference on the clean inputs.
    pub clean_logit_diff: f64,
    /// Mean logit difference on the corrupted inputs.
    pub corrupted_logit_diff: f64,
    /// One record per head, layer-major.
    pub heads: Vec<HeadPatching>,
    /// The residual stream patched, one record per place: the input of each block, then
    /// the last block's output.
    pub residual: Vec<ResidualPatching>,
    /// Path patching from each head to each head of a later layer, through each input.
    pub paths: Vec<PathPatching>,
    /// Path patching from all heads of a layer to all heads of a later one.
    pub layer_paths: Vec<LayerPathPatching>,
    /// How well attribution patching (each head's record's `attribution`) agrees with the
    /// exact values.
    pub attribution: AttributionAgreement,
    /// The pairs patched, in order, as the model read them: every number above can be
    /// recomputed from these without headlab's random number generator. Empty in a report
    /// written before they were recorded.
    #[serde(default)]
    pub inputs: Vec<PairInputs>,
    /// Pairs drawn but left out because they do not line up in the model's word pieces (an
    /// imported model: [`crate::load::piece_pairs::PiecePairs`]); absent for headlab's own models.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pairs_left_out: Option<usize>,
    /// For the `own` section, the file its pairs were written in; absent for a task's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub written: Option<WrittenPairs>,
}

/// One patched pair as the model read it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PairInputs {
    /// The clean input's tokens.
    pub clean: Vec<u32>,
    /// The corrupted input's tokens (the clean ones with `changed` changed).
    pub corrupted: Vec<u32>,
    /// The position whose logits are scored.
    pub position: usize,
    /// The positions where the two inputs differ, ascending.
    pub changed: Vec<usize>,
    /// The clean answer at `position`: the logit difference is `logit[clean_answer] -
    /// logit[corrupted_answer]` there.
    pub clean_answer: u32,
    /// The corrupted answer at `position`.
    pub corrupted_answer: u32,
}

impl From<&MinimalPair> for PairInputs {
    fn from(pair: &MinimalPair) -> Self {
        Self {
            clean: pair.clean.input.clone(),
            corrupted: pair.corrupted.input.clone(),
            position: pair.position,
            changed: pair.changed.clone(),
            clean_answer: pair.clean_answer,
            corrupted_answer: pair.corrupted_answer,
        }
    }
}

/// Patching of every kind of minimal pair the task makes (seeded from the run's seed), and of
/// `own` pairs a user wrote where given, read
/// as the model reads them ([`crate::load::reading::Reading::read_pairs`]): every pair for a
/// model headlab trained; for an imported masked-LM the answer pairs that line up in its
/// word pieces ([`crate::load::piece_pairs::PiecePairs`]), those left out counted. Where the
/// reading says per-head detail costs too much (an imported model), two details are left
/// out: head-to-head path patching (`paths` empty: one run per sender, receiver and channel
/// is 6660 passes for 6 layers of 12 heads) and head patching at each position (`by_position`
/// empty); whole heads, the residual stream by position, layer-to-layer paths and
/// attribution patching are kept. `None` without pairs of either.
pub fn patching(
    context: MeasureContext,
    own: Option<&OwnPairs>,
) -> Result<Option<Patching>, ReadingError> {
    let MeasureContext {
        model,
        reading,
        task,
        seed,
        device,
        ..
    } = context;
    let head_detail = reading.per_head_detail();
    let section = |kind: PairKind, counter: u64| -> Result<Option<PairPatching>, ReadingError> {
        let pairs =
            task.minimal_pairs(kind, PATCHING_PAIRS, mix_seed(seed, PAIRS_STREAM - counter));
        let Some(read) = reading.read_pairs(task, kind, pairs)? else {
            return Ok(None);
        };
        Ok(
            patch_pairs(model, &read.pairs, device, head_detail).map(|patched| PairPatching {
                pairs_left_out: read.left_out,
                ..patched
            }),
        )
    };
    // The answer pairs keep the stream they had before route pairs existed.
    let answer = section(PairKind::Answer, 0)?;
    let route = section(PairKind::Route, 1)?;
    let own = own.and_then(|own| {
        let patched = patch_pairs(model, &own.pairs, device, head_detail)?;
        let written = WrittenPairs {
            file: own.file.path.display().to_string(),
            sha256: own.file.sha256.clone(),
            pairs: own.file.pairs.clone(),
        };
        Some(PairPatching {
            written: Some(written),
            ..patched
        })
    });
    let any = answer.is_some() || route.is_some() || own.is_some();
    Ok(any.then_some(Patching { answer, route, own }))
}

/// Every patching analysis of `model` on `pairs` (path patching head to head, and head
/// patching at each position, only when `head_detail`); `None` without pairs.
pub fn patch_pairs(
    model: &Encoder,
    pairs: &[MinimalPair],
    device: &Device,
    head_detail: bool,
) -> Option<PairPatching> {
    let passes = PairPasses::new(model, pairs, device)?;
    let mut heads = head_patching(&passes, head_detail);
    let attribution = attribution_patching(&passes, &mut heads);
    Some(PairPatching {
        pairs: pairs.len(),
        clean_logit_diff: passes.clean_ld,
        corrupted_logit_diff: passes.corrupted_ld,
        residual: residual_patching(&passes),
        paths: match head_detail {
            true => head_paths(&passes),
            false => vec![],
        },
        layer_paths: layer_paths(&passes),
        attribution,
        heads,
        inputs: pairs.iter().map(PairInputs::from).collect(),
        pairs_left_out: None,
        written: None,
    })
}
