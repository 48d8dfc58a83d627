//! What every patching analysis starts from: one set of minimal pairs' clean and corrupted
//! inputs as batches, both passes' activations, and the measure a patched run is read by, the
//! logit difference at each pair's answer position, `logit[clean answer] - logit[corrupted
//! answer]`, averaged over pairs. A patch's restored fraction is
//! `(LD_patched - LD_corrupted) / (LD_clean - LD_corrupted)`: 0 changes nothing, 1 brings the
//! clean answer's margin back whole.

use burn::prelude::*;
use model::{ActivationCache, Encoder, EncoderInput};
use run::tensor_file::HostTensor;
use tasks::batch::Batch;
use tasks::{Example, MinimalPair};

/// A model's clean and corrupted passes on one set of pairs.
pub(crate) struct PairPasses<'a> {
    /// The model patched.
    pub model: &'a Encoder,
    /// The pairs, all run at once (padded to the longest: padding is never attended to, so
    /// a patch there changes nothing).
    pub pairs: &'a [MinimalPair],
    /// The corrupted inputs as examples (attribution patching batches them on its own
    /// device).
    pub corrupted_examples: Vec<Example>,
    /// The corrupted inputs' batch, the run every patch changes.
    pub corrupted: Batch,
    /// The clean inputs' batch, the run an ablation changes.
    pub clean: Batch,
    /// Activations of the clean pass.
    pub clean_cache: ActivationCache,
    /// Activations of the corrupted pass.
    pub corrupted_cache: ActivationCache,
    /// Mean logit difference on the clean inputs.
    pub clean_ld: f64,
    /// Mean logit difference on the corrupted inputs.
    pub corrupted_ld: f64,
    /// The device the passes are on.
    pub device: Device,
}

impl<'a> PairPasses<'a> {
    /// Runs `model` on both sides of `pairs`; `None` without pairs.
    pub fn new(model: &'a Encoder, pairs: &'a [MinimalPair], device: &Device) -> Option<Self> {
        if pairs.is_empty() {
            return None;
        }
        let clean: Vec<Example> = pairs.iter().map(|p| p.clean.clone()).collect();
        let corrupted_examples: Vec<Example> = pairs.iter().map(|p| p.corrupted.clone()).collect();
        let clean_batch = Batch::new(&clean, device);
        let corrupted = Batch::new(&corrupted_examples, device);
        let (clean_logits, clean_cache) = model.forward_with_cache(clean_batch.encoder_input());
        let (corrupted_logits, corrupted_cache) =
            model.forward_with_cache(corrupted.encoder_input());
        Some(Self {
            model,
            pairs,
            clean_ld: logit_diff(clean_logits, pairs),
            corrupted_ld: logit_diff(corrupted_logits, pairs),
            corrupted_examples,
            corrupted,
            clean: clean_batch,
            clean_cache,
            corrupted_cache,
            device: device.clone(),
        })
    }

    /// Positions per run (the longest pair).
    pub fn seq_len(&self) -> usize {
        self.corrupted.tokens.dims()[1]
    }

    /// The corrupted pass's input, for a patch to be added to.
    pub fn corrupted_input(&self) -> EncoderInput {
        self.corrupted.encoder_input()
    }

    /// `LD_clean - LD_corrupted`, what a patch can restore.
    pub fn span(&self) -> f64 {
        self.clean_ld - self.corrupted_ld
    }

    /// The restored fraction of a logit difference; `None` when the clean and corrupted
    /// logit differences are equal (nothing to restore).
    pub fn restored(&self, patched_ld: f64) -> Option<f64> {
        let span = self.span();
        (span.abs() > 1e-9).then(|| (patched_ld - self.corrupted_ld) / span)
    }

    /// The share of `LD_clean - LD_corrupted` lost in the run `input` gives (a clean input
    /// with an ablation): `(LD_clean - LD_ablated) / (LD_clean - LD_corrupted)`, 1 when the
    /// ablation takes the clean answer's whole margin away; `None` when there is none.
    pub fn lost_by(&self, input: EncoderInput) -> Option<f64> {
        let span = self.span();
        let ablated = self.logit_diff(self.model.forward_input(input));
        (span.abs() > 1e-9).then(|| (self.clean_ld - ablated) / span)
    }

    /// The restored fraction of the run `input` gives (a corrupted input with patches).
    pub fn restored_by(&self, input: EncoderInput) -> Option<f64> {
        self.restored(self.logit_diff(self.model.forward_input(input)))
    }

    /// The mean logit difference of `logits` (`[pairs, seq, n_outputs]`).
    pub fn logit_diff(&self, logits: Tensor<3>) -> f64 {
        logit_diff(logits, self.pairs)
    }

    /// `[pairs, seq, n_outputs]` coefficients whose product with the logits, summed, is the
    /// mean logit difference: `+1/N` at each pair's clean answer, `-1/N` at its corrupted one.
    pub fn logit_diff_weights(&self, n_outputs: usize, device: &Device) -> Tensor<3> {
        let (n, seq) = (self.pairs.len(), self.seq_len());
        let mut weights = vec![0.0f32; n * seq * n_outputs];
        for (i, pair) in self.pairs.iter().enumerate() {
            let row = (i * seq + pair.position) * n_outputs;
            weights[row + pair.clean_answer as usize] += 1.0 / n as f32;
            weights[row + pair.corrupted_answer as usize] -= 1.0 / n as f32;
        }
        Tensor::<1>::from_floats(weights.as_slice(), device).reshape([n, seq, n_outputs])
    }
}

/// Mean over `pairs` of `logit[clean answer] - logit[corrupted answer]` at each pair's
/// position; `logits` is `[pairs, seq, n_outputs]`.
fn logit_diff(logits: Tensor<3>, pairs: &[MinimalPair]) -> f64 {
    let [_, seq, outputs] = logits.dims();
    let values = HostTensor::of(logits).values;
    let at = |pair: usize, position: usize, class: u32| {
        values[(pair * seq + position) * outputs + class as usize] as f64
    };
    let sum: f64 = pairs
        .iter()
        .enumerate()
        .map(|(i, p)| at(i, p.position, p.clean_answer) - at(i, p.position, p.corrupted_answer))
        .sum();
    sum / pairs.len().max(1) as f64
}

/// Models and pairs for the patching tests.
#[cfg(test)]
pub(crate) mod testing {
    use burn::prelude::*;
    use model::{Encoder, EncoderConfig, EncoderIo};
    use tasks::{MinimalPair, PairKind, RecallSpec, TaskConfig};

    /// A seeded random encoder of `n_layers` blocks (d_model 16, 2 heads) on recall, with
    /// 16 of recall's pairs of `kind`.
    pub fn recall_model(n_layers: usize, kind: PairKind) -> (Encoder, Vec<MinimalPair>, Device) {
        let _turn = model::init::take_rng_turn();
        let device = Device::flex();
        device.seed(3);
        let task = TaskConfig::Recall(RecallSpec::default())
            .build(std::path::Path::new("."))
            .unwrap();
        let io = EncoderIo {
            vocab_size: task.input_vocab(),
            n_outputs: task.output_vocab(),
            max_seq_len: task.seq_len(),
        };
        let model = EncoderConfig {
            d_model: 16,
            n_layers,
            n_heads: 2,
            d_ff: 32,
            ..EncoderConfig::default()
        }
        .init(&io, &device)
        .unwrap();
        (model, task.minimal_pairs(kind, 16, 5), device)
    }
}
