//! The probe batch: a fixed, seeded set of sequences from the run's task, and what every
//! layer's attention does on it, copied to the host for measuring.

use burn::prelude::*;
use model::{Encoder, EncoderInput};
use train::batch::{Batch, mix_seed};
use train::tasks::{Example, Task};
use train::tensor_file::HostTensor;

/// Stream of the probe batch, apart from training batches and the evaluation set.
const PROBE_STREAM: u64 = u64::MAX - 1;

/// The probe sequences, the same for every report on a run and every snapshot of it.
#[derive(Debug, Clone)]
pub struct Probe {
    /// The examples.
    pub examples: Vec<Example>,
    /// Their input tokens on the device, `[batch, seq]`.
    pub tokens: Tensor<2, Int>,
}

impl Probe {
    /// `size` sequences drawn from `task` with the run's `seed`.
    pub fn new(task: &Task, size: usize, seed: u64, device: &Device) -> Self {
        let examples = task.eval_set(size, mix_seed(seed, PROBE_STREAM));
        let tokens = Batch::new(&examples, device).tokens;
        Self { examples, tokens }
    }

    /// Input tokens, row-major `[batch * seq]`.
    pub fn token_ids(&self) -> Vec<u32> {
        self.examples
            .iter()
            .flat_map(|e| e.input.iter().copied())
            .collect()
    }

    /// Runs `model` on the probe and returns each layer's attention on the host.
    pub fn run(&self, model: &Encoder) -> Vec<LayerProbe> {
        let (_, cache) = model.forward_with_cache(EncoderInput::new(self.tokens.clone()));
        cache
            .layers
            .into_iter()
            .map(|layer| LayerProbe {
                attn_input: HostTensor::of(layer.attn_input),
                pattern: HostTensor::of(layer.pattern),
                head_out: HostTensor::of(layer.head_outputs),
            })
            .collect()
    }
}

/// One layer's attention on the probe batch.
#[derive(Debug, Clone)]
pub struct LayerProbe {
    /// What enters the attention, `[batch, seq, d_model]`.
    pub attn_input: HostTensor,
    /// Softmax probabilities, `[batch, heads, seq, seq]`.
    pub pattern: HostTensor,
    /// Per-head outputs, `[batch, seq, heads, d_head]`.
    pub head_out: HostTensor,
}

impl LayerProbe {
    /// `(batch, heads, seq)`.
    pub fn dims(&self) -> (usize, usize, usize) {
        let [batch, heads, seq, _] = self.pattern.shape[..] else {
            unreachable!("patterns are 4-D")
        };
        (batch, heads, seq)
    }

    /// Head `h`'s attention rows, `[batch * seq (queries), seq (keys)]` row-major.
    pub fn head_pattern(&self, h: usize) -> Vec<f32> {
        let (batch, heads, seq) = self.dims();
        (0..batch)
            .flat_map(|b| {
                let start = (b * heads + h) * seq * seq;
                self.pattern.values[start..start + seq * seq]
                    .iter()
                    .copied()
            })
            .collect()
    }

    /// Head `h`'s outputs, `[batch * seq, d_head]` row-major.
    pub fn head_output(&self, h: usize) -> Vec<f32> {
        let [batch, seq, heads, d_head] = self.head_out.shape[..] else {
            unreachable!("head outputs are 4-D")
        };
        (0..batch * seq)
            .flat_map(|row| {
                let start = (row * heads + h) * d_head;
                self.head_out.values[start..start + d_head].iter().copied()
            })
            .collect()
    }

    /// `d_head`.
    pub fn d_head(&self) -> usize {
        self.head_out.shape[3]
    }
}
