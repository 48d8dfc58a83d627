//! The gradients of one training step, with the batch optionally split into shards that
//! run forward and backward at the same time on the CPU's cores.
//!
//! Why shards: flex and ndarray spread a large matrix product over the cores, but run
//! elementwise work (GELU, layer norm, softmax, their gradients) and the autodiff
//! bookkeeping on one thread, and at headlab's sizes that is most of a step. Two shards of
//! half a batch each keep both cores of a small machine busy for the whole step.
//!
//! The loss of each shard is its summed cross-entropy divided by the scored positions of
//! the whole batch, so the shards' gradients add up to the gradient of the batch's mean
//! loss: the same update as one pass, up to float rounding. The split depends only on the
//! batch and `shards`, never on the number of threads, so a run stays reproducible.

use std::ops::Range;

use burn::module::{Module, ModuleVisitor, Param};
use burn::optim::GradientsParams;
use burn::prelude::*;

use tasks::Example;
use tasks::batch::{Batch, masked_cross_entropy_sum, scored_cross_entropy_sum, scored_rows};

/// A step's gradients and loss.
pub struct StepGradients {
    /// Every parameter's gradient, the shards' parts added.
    pub grads: GradientsParams,
    /// The batch's mean loss, `[1]` (for a seed stack `[seeds]`, each seed's), on the
    /// training device (the shards' parts added).
    pub loss: Tensor<1>,
}

/// Half-open ranges of `shards` near-equal parts of `0..batch` (fewer when the batch is
/// smaller than `shards`); the first `batch % shards` parts are one longer.
pub fn shard_ranges(batch: usize, shards: usize) -> Vec<Range<usize>> {
    let shards = shards.clamp(1, batch.max(1));
    let (base, longer) = (batch / shards, batch % shards);
    let mut start = 0;
    (0..shards)
        .map(|shard| {
            let end = start + base + usize::from(shard < longer);
            let range = start..end;
            start = end;
            range
        })
        .collect()
}

/// The gradients of the mean masked cross-entropy of `forward(model, batch)` over
/// `examples`, computed in `shards` parts.
///
/// With `parallel`, the shards run at the same time on rayon's pool; without, one after
/// the other (needed when the step draws random numbers, such as dropout masks, from the
/// device's one generator: the order of draws must not depend on thread timing). Either
/// way the numbers are the same. With one shard the model is used as it is; with more,
/// each shard works on a fork of it (same parameters and ids, its own autodiff graph).
pub fn step_gradients<M, F>(
    model: &M,
    forward: F,
    examples: &[Example],
    shards: usize,
    parallel: bool,
    device: &Device,
) -> StepGradients
where
    M: Module + Sync,
    F: Fn(&M, &Batch) -> Tensor<3> + Sync,
{
    // Every shard divides by the whole batch's scored positions.
    let scored = scored_positions(examples);
    let ranges = shard_ranges(examples.len(), shards);
    sharded_gradients(model, &ranges, parallel, device, |model, _, range| {
        let batch = Batch::new(&examples[range.clone()], device);
        let logits = forward(model, &batch); // [shard, seq, classes]
        masked_cross_entropy_sum(logits, batch.targets, batch.weights).div_scalar(scored)
    })
}

/// As [`step_gradients`], with the output layer applied at the scored positions only:
/// `forward_at(model, batch, rows)` gives the logits `[rows, classes]` at the batch's flat
/// positions `rows` ([`tasks::batch::scored_rows`]). The same loss and gradients up to float
/// rounding, without the unscored positions' logits. A shard without a scored position (a
/// few short sequences can draw none) scores position 0 times 0: its loss and gradients are
/// 0, as the every-position loss's are.
pub fn scored_step_gradients<M, F>(
    model: &M,
    forward_at: F,
    examples: &[Example],
    shards: usize,
    parallel: bool,
    device: &Device,
) -> StepGradients
where
    M: Module + Sync,
    F: Fn(&M, &Batch, Tensor<1, Int>) -> Tensor<2> + Sync,
{
    let scored = scored_positions(examples);
    let ranges = shard_ranges(examples.len(), shards);
    sharded_gradients(model, &ranges, parallel, device, |model, _, range| {
        let shard = &examples[range.clone()];
        let batch = Batch::new(shard, device);
        let (rows, targets) = scored_rows(shard, device);
        let none = rows.dims()[0] == 0;
        let (rows, targets) = match none {
            true => (Tensor::zeros([1], device), Tensor::zeros([1], device)),
            false => (rows, targets),
        };
        let loss = scored_cross_entropy_sum(forward_at(model, &batch, rows), targets);
        let weight = if none { 0.0 } else { 1.0 / scored };
        loss.mul_scalar(weight)
    })
}

/// The scored positions of `examples`, at least 1: what a batch's mean loss divides by.
pub fn scored_positions(examples: &[Example]) -> f64 {
    examples
        .iter()
        .flat_map(|e| &e.target)
        .filter(|t| t.is_some())
        .count()
        .max(1) as f64
}

/// The gradients of the sum of `shard_loss` over the shards `ranges` (each range's index and
/// itself given to `shard_loss`), and the shards' losses added elementwise: one value for a
/// single model, one per seed for a [`model::SeedStack`]. Shards run in parallel or in turn
/// as [`step_gradients`] says; their gradients are added in shard order.
pub fn sharded_gradients<M, L>(
    model: &M,
    ranges: &[Range<usize>],
    parallel: bool,
    device: &Device,
    shard_loss: L,
) -> StepGradients
where
    M: Module + Sync,
    L: Fn(&M, usize, &Range<usize>) -> Tensor<1> + Sync,
{
    let shard_pass = |model: &M, index: usize, range: &Range<usize>| {
        let loss = shard_loss(model, index, range); // [1] or [seeds]
        let grads = GradientsParams::from_grads(loss.clone().sum().backward(), model);
        (grads, loss.detach())
    };
    let results: Vec<(GradientsParams, Tensor<1>)> = if ranges.len() == 1 {
        vec![shard_pass(model, 0, &ranges[0])]
    } else {
        let run = |(index, range): (usize, &Range<usize>)| {
            let fork = model.clone().fork(device);
            shard_pass(&fork, index, range)
        };
        if parallel {
            use rayon::prelude::*;
            ranges.par_iter().enumerate().map(run).collect()
        } else {
            ranges.iter().enumerate().map(run).collect()
        }
    };

    let (shard_grads, shard_losses): (Vec<GradientsParams>, Vec<Tensor<1>>) =
        results.into_iter().unzip();
    let loss = shard_losses
        .into_iter()
        .reduce(|total, part| total + part)
        .expect("at least one shard");
    StepGradients {
        grads: add_in_shard_order(model, shard_grads),
        loss,
    }
}

/// The shards' gradients added per parameter in shard order: `((g0 + g1) + g2) + ...`.
/// Burn's `MultiGradientsParams` starts each sum at a shard picked from the parameter's
/// id, which is random per process; with three or more shards that order changes the
/// rounding, so a run would not repeat.
fn add_in_shard_order<M: Module>(model: &M, mut shards: Vec<GradientsParams>) -> GradientsParams {
    if shards.len() == 1 {
        return shards.pop().expect("one shard");
    }
    struct AddInOrder {
        shards: Vec<GradientsParams>,
        total: GradientsParams,
    }
    impl ModuleVisitor for AddInOrder {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            let sum = self
                .shards
                .iter_mut()
                .filter_map(|grads| grads.remove::<D>(param.id))
                .reduce(|total, grad| total + grad);
            if let Some(sum) = sum {
                self.total.register(param.id, sum);
            }
        }
    }
    let mut visitor = AddInOrder {
        shards,
        total: GradientsParams::new(),
    };
    model.visit(&mut visitor);
    visitor.total
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::{Encoder, EncoderConfig, EncoderIo};
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    use tasks::{SequenceSpec, TaskConfig};

    /// Every parameter's summed gradient, flattened, in module order.
    struct Flatten {
        grads: GradientsParams,
        values: Vec<Vec<f32>>,
    }

    impl ModuleVisitor for Flatten {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            let grad = self
                .grads
                .remove::<D>(param.id)
                .expect("every parameter has a gradient");
            self.values
                .push(grad.into_data().try_to_vec::<f32>().expect("f32 gradients"));
        }
    }

    fn gradients(shards: usize, parallel: bool) -> (Vec<Vec<f32>>, f32) {
        gradients_of(shards, parallel, false, |_| {})
    }

    /// A step's gradients and loss on 7 examples of the reverse task (`sparsify` may unscore
    /// some targets), every position's logits or (`at_scored`) the scored ones' only.
    fn gradients_of(
        shards: usize,
        parallel: bool,
        at_scored: bool,
        sparsify: impl Fn(&mut Vec<Example>),
    ) -> (Vec<Vec<f32>>, f32) {
        let _rng = model::init::take_rng_turn();
        let device = Device::flex().autodiff();
        device.seed(3);
        let task = TaskConfig::Reverse(SequenceSpec {
            seq_len: 6,
            vocab_size: 5,
        })
        .build(std::path::Path::new("."))
        .unwrap();
        let io = EncoderIo {
            vocab_size: task.input_vocab(),
            n_outputs: task.output_vocab(),
            max_seq_len: task.seq_len(),
        };
        let config = EncoderConfig {
            d_model: 16,
            n_heads: 2,
            d_ff: 32,
            ..EncoderConfig::default()
        };
        let model = config.init(&io, &device).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut examples: Vec<Example> = (0..7).map(|_| task.sample(&mut rng)).collect();
        sparsify(&mut examples);
        let step = match at_scored {
            false => step_gradients(
                &model,
                |model: &Encoder, batch: &Batch| model.forward_input(batch.encoder_input()),
                &examples,
                shards,
                parallel,
                &device,
            ),
            true => scored_step_gradients(
                &model,
                |model: &Encoder, batch: &Batch, rows: Tensor<1, Int>| {
                    model.forward_at(batch.encoder_input(), rows)
                },
                &examples,
                shards,
                parallel,
                &device,
            ),
        };
        let loss = step.loss.into_scalar::<f32>();
        let mut flatten = Flatten {
            grads: step.grads,
            values: Vec::new(),
        };
        model.visit(&mut flatten);
        (flatten.values, loss)
    }

    /// The output layer at the scored positions only gives the every-position loss and
    /// gradients (unscored positions contribute nothing to either), with one shard and with
    /// shards of which one has no scored position at all.
    #[test]
    fn logits_at_scored_positions_give_the_every_position_loss_and_gradients() {
        // Two positions in three scored; the first three examples (shard 0 of 3) not at all.
        let sparsify = |examples: &mut Vec<Example>| {
            for (b, example) in examples.iter_mut().enumerate() {
                for (s, target) in example.target.iter_mut().enumerate() {
                    if b < 3 || s % 3 == 0 {
                        *target = None;
                    }
                }
            }
        };
        for shards in [1, 3] {
            let (dense, dense_loss) = gradients_of(shards, false, false, sparsify);
            let (scored, scored_loss) = gradients_of(shards, false, true, sparsify);
            assert!(
                (dense_loss - scored_loss).abs() < 1e-6,
                "{shards} shards: {scored_loss} vs {dense_loss}"
            );
            assert!(dense_loss > 0.0);
            for (a, b) in scored.iter().flatten().zip(dense.iter().flatten()) {
                assert!(
                    (a - b).abs() <= 1e-6 + 1e-5 * b.abs(),
                    "{shards} shards: {a} vs {b}"
                );
            }
        }
    }

    #[test]
    fn sharded_gradients_equal_the_whole_batch_gradients() {
        let (whole, whole_loss) = gradients(1, false);
        for shards in [2, 3, 7] {
            let (sharded, loss) = gradients(shards, true);
            assert!(
                (loss - whole_loss).abs() < 1e-5,
                "{shards} shards: loss {loss} vs {whole_loss}"
            );
            assert_eq!(sharded.len(), whole.len());
            for (a, b) in sharded.iter().flatten().zip(whole.iter().flatten()) {
                assert!(
                    (a - b).abs() <= 1e-5 + 1e-4 * b.abs(),
                    "{shards} shards: {a} vs {b}"
                );
            }
        }
    }

    #[test]
    fn shards_give_the_same_numbers_in_parallel_and_in_turn() {
        // Three shards: with two, any order of adding gives the same sum. Each call builds
        // its model afresh, with new random parameter ids, so an order taken from the ids
        // would show here.
        assert_eq!(gradients(3, true), gradients(3, false));
        let one_thread = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        assert_eq!(
            one_thread.install(|| gradients(3, true)),
            gradients(3, true)
        );
    }

    #[test]
    fn shards_cover_the_batch_in_order_and_differ_by_at_most_one() {
        assert_eq!(shard_ranges(64, 2), vec![0..32, 32..64]);
        assert_eq!(shard_ranges(7, 3), vec![0..3, 3..5, 5..7]);
        assert_eq!(shard_ranges(2, 4), vec![0..1, 1..2]);
        assert_eq!(shard_ranges(5, 1), vec![0..5]);
    }
}
