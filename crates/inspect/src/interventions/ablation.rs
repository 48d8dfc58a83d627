//! Ablations that keep a layer on its training distribution. Zero ablation (`ablation_drop`
//! in `heads.json`, [`crate::measures::heads`]) sets a head's output to 0, a value the later
//! layers never saw in training, so its drop mixes "the head mattered" with "the model was
//! pushed off distribution". Two ablations avoid that, each one head at a time, on the
//! evaluation set, as the eval token accuracy lost:
//!
//! - **mean**: the head's output replaced, at every position, by its mean output over the
//!   evaluation set's real (non-padding) positions. The head still adds its average
//!   contribution (the bias it gives every position); only what depends on the input goes
//!   (Wang et al. 2022 use it for the IOI circuit).
//! - **resample**: the head's output on each sequence replaced by its output on another
//!   sentence of the same evaluation chunk (sequence i gets sequence i + 1's, the last the
//!   first's; for a model that reads pieces, whose examples are each probe sentence with one
//!   word masked, the next example of another sentence: the same sentence with another word
//!   masked has seen the word this example hides), position by position. Its outputs keep
//!   their exact distribution; only their link to this input goes (the resampling ablation
//!   of causal scrubbing, Chan et al. 2022). Where the other sequence is shorter, its padding
//!   positions' outputs stand in.
//!
//! A head whose zero drop is large but mean drop small writes a constant the model relies
//! on, not information about the input.

use burn::prelude::*;
use model::{Encoder, EncoderInput, HeadId, HeadPatch};

use crate::interventions::activation_patching::{head_weight, real_position_sum};
use crate::load::context::MeasureContext;
use tasks::Example;
use tasks::batch::{Accuracy, Batch, EVAL_CHUNK};

/// Every head's eval token accuracy lost under mean and resample ablation, layer-major.
#[derive(Debug, Clone, PartialEq)]
pub struct AblationDrops {
    /// Mean ablation.
    pub mean: Vec<f64>,
    /// Resample ablation.
    pub resample: Vec<f64>,
}

/// One evaluation chunk with every layer's head outputs on it.
struct Chunk<'a> {
    examples: &'a [Example],
    /// For each sequence, the sequence of the chunk whose head outputs resampling gives it
    /// ([`donors`]).
    donors: Vec<usize>,
    batch: Batch,
    /// Per layer `[batch, seq, n_heads, d_head]`.
    head_outputs: Vec<Tensor<4>>,
}

/// Mean and resample ablation of every head of the context's model on `eval` (its
/// inference copy, as `tasks::evaluate` runs it), each example's sentence in `sentence_of`.
pub fn ablation_drops(
    context: MeasureContext,
    eval: &[Example],
    sentence_of: &[usize],
) -> AblationDrops {
    let MeasureContext { model, device, .. } = context;
    let chunks: Vec<Chunk> = eval
        .chunks(EVAL_CHUNK)
        .zip(sentence_of.chunks(EVAL_CHUNK))
        .map(|(examples, sentence_of)| {
            let batch = Batch::new(examples, device);
            let (_, cache) = model.forward_with_cache(batch.encoder_input());
            let head_outputs = cache.layers.into_iter().map(|l| l.head_outputs).collect();
            Chunk {
                examples,
                donors: donors(sentence_of),
                batch,
                head_outputs,
            }
        })
        .collect();
    let base = unpatched_accuracy(model, &chunks);
    let means = mean_head_outputs(&chunks, model.n_layers());
    let n_heads = model.n_heads();
    let mut drops = AblationDrops {
        mean: vec![],
        resample: vec![],
    };
    for id in model.heads() {
        let weight = head_weight(id, None, 1, n_heads, device); // [1, 1, n_heads, 1]
        // [1, 1, n_heads, d_head]: the same values at every position of every sequence.
        let mean_values = means[id.layer]
            .clone()
            .reshape([1, 1, n_heads, model.d_head()]);
        let mean = accuracy(model, id, &chunks, |_| HeadPatch {
            values: mean_values.clone(),
            weight: weight.clone(),
        });
        let resample = accuracy(model, id, &chunks, |chunk| HeadPatch {
            // [batch, seq, n_heads, d_head]: each sequence's from its donor.
            values: resampled(chunk.head_outputs[id.layer].clone(), &chunk.donors),
            weight: weight.clone(),
        });
        drops.mean.push(base - mean);
        drops.resample.push(base - resample);
    }
    drops
}

/// For each example of a batch, the example of the same batch whose head output resampling
/// gives it: the next one, cyclically, from another sentence (the next one at all where the
/// whole batch is one sentence). With every example its own sentence, as a task's masked
/// examples are, each takes the next's and the last the first's.
pub fn donors(sentence_of: &[usize]) -> Vec<usize> {
    let n = sentence_of.len();
    (0..n)
        .map(|i| {
            (1..n)
                .map(|k| (i + k) % n)
                .find(|&j| sentence_of[j] != sentence_of[i])
                .unwrap_or((i + 1) % n)
        })
        .collect()
}

/// `[batch, ...]` with each sequence taking its donor's values (`donors[i]`, one per
/// sequence, as [`donors`] gives them).
pub(crate) fn resampled(values: Tensor<4>, donors: &[usize]) -> Tensor<4> {
    let device = values.device();
    let n = donors.len();
    let donors: Vec<i64> = donors.iter().map(|&d| d as i64).collect();
    values.select(0, Tensor::from_data(TensorData::new(donors, [n]), &device))
}

/// Per layer, every head's mean output over the real positions of every chunk,
/// `[n_heads, d_head]`.
fn mean_head_outputs(chunks: &[Chunk], n_layers: usize) -> Vec<Tensor<2>> {
    (0..n_layers)
        .map(|layer| {
            let mut sum: Option<Tensor<2>> = None;
            let mut count = 0.0f64;
            for chunk in chunks {
                let outputs = chunk.head_outputs[layer].clone();
                let (chunk_sum, chunk_count) = real_position_sum(outputs, &chunk.batch.padding);
                count += chunk_count;
                sum = Some(match sum {
                    Some(sum) => sum + chunk_sum,
                    None => chunk_sum,
                });
            }
            sum.expect("at least one evaluation chunk")
                .div_scalar(count.max(1.0))
        })
        .collect()
}

/// Eval token accuracy over the chunks, each run with the patch of head `id`'s layer that
/// `patch_of` gives it.
fn accuracy(
    model: &Encoder,
    id: HeadId,
    chunks: &[Chunk],
    patch_of: impl Fn(&Chunk) -> HeadPatch,
) -> f64 {
    token_accuracy(model, chunks, |chunk| {
        chunk
            .batch
            .encoder_input()
            .head_patch(id.layer, patch_of(chunk))
    })
}

/// Eval token accuracy over the chunks as they are.
fn unpatched_accuracy(model: &Encoder, chunks: &[Chunk]) -> f64 {
    token_accuracy(model, chunks, |chunk| chunk.batch.encoder_input())
}

/// Eval token accuracy over the chunks, each run on the input `input_of` makes of it.
fn token_accuracy(
    model: &Encoder,
    chunks: &[Chunk],
    input_of: impl Fn(&Chunk) -> EncoderInput,
) -> f64 {
    let mut accuracy = Accuracy::default();
    for chunk in chunks {
        let logits = model.forward_input(input_of(chunk));
        accuracy.add(Accuracy::of(logits, chunk.examples));
    }
    accuracy.token_accuracy()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(t: Tensor<4>) -> Vec<f32> {
        t.into_data().try_to_vec::<f32>().unwrap()
    }

    #[test]
    fn every_example_its_own_sentence_takes_the_next_one_as_resampling_always_did() {
        assert_eq!(donors(&[7, 8, 9]), vec![1, 2, 0]);
    }

    #[test]
    fn a_donor_is_from_another_sentence_wherever_the_batch_has_one() {
        assert_eq!(donors(&[0, 0, 1, 1]), vec![2, 2, 0, 0]);
        assert_eq!(donors(&[3, 4, 4, 4]), vec![1, 0, 0, 0]);
        // A batch of one sentence has no other to take from.
        assert_eq!(donors(&[5, 5]), vec![1, 0]);
    }

    #[test]
    fn resampling_gives_each_sequence_the_next_ones_outputs() {
        let device = Device::flex();
        let t = Tensor::<1>::from_floats([0.0, 1.0, 2.0], &device).reshape([3, 1, 1, 1]);
        assert_eq!(values(resampled(t, &donors(&[0, 1, 2]))), [1.0, 2.0, 0.0]);
        let single = Tensor::<1>::from_floats([7.0], &device).reshape([1, 1, 1, 1]);
        let kept = resampled(single, &donors(&[0]));
        assert_eq!(values(kept), [7.0], "one sequence keeps its own");
    }

    #[test]
    fn a_sequence_takes_its_outputs_from_another_sentence_not_its_own_with_another_word_masked() {
        let device = Device::flex();
        let t = Tensor::<1>::from_floats([0.0, 1.0, 2.0, 3.0], &device).reshape([4, 1, 1, 1]);
        // Sequences 0 and 1 are one sentence, 2 and 3 another.
        assert_eq!(
            values(resampled(t, &donors(&[5, 5, 8, 8]))),
            [2.0, 2.0, 0.0, 0.0]
        );
    }

    #[test]
    fn the_mean_output_counts_real_positions_only() {
        let device = Device::flex();
        let examples = [
            Example {
                input: vec![1, 2, 3],
                target: vec![Some(0); 3],
            },
            Example {
                input: vec![1, 2],
                target: vec![Some(0); 2],
            },
        ];
        let batch = Batch::new(&examples, &device);
        // [batch 2, seq 3, heads 2, d_head 1]: head 0 holds 1 2 3 / 4 5 (100 at the padding);
        // head 1 is 10 times head 0.
        let head0 = [1.0f32, 2.0, 3.0, 4.0, 5.0, 100.0];
        let outputs: Vec<f32> = head0.iter().flat_map(|v| [*v, 10.0 * v]).collect();
        let outputs = Tensor::<1>::from_floats(outputs.as_slice(), &device).reshape([2, 3, 2, 1]);
        let chunk = Chunk {
            examples: &examples,
            donors: vec![1, 0],
            batch,
            head_outputs: vec![outputs],
        };
        let means = mean_head_outputs(&[chunk], 1);
        let means: Vec<f32> = means[0].clone().into_data().try_to_vec().unwrap();
        assert!((means[0] - 3.0).abs() < 1e-6, "{means:?}"); // (1 + 2 + 3 + 4 + 5) / 5
        assert!((means[1] - 30.0).abs() < 1e-5, "{means:?}");
    }
}
