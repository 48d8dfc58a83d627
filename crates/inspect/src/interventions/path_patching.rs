//! Path patching (Wang et al. 2022, "Interpretability in the Wild"; Goldowsky-Dill et al.
//! 2023, "Localizing Model Behavior with Path Patching"): how much of the clean answer a
//! sender head's clean output restores when it may reach the answer only through one input
//! of one receiver, everything else frozen at the corrupted pass. The causal counterpart of
//! the composition scores (`circuits.json`), which say only that two heads *could* talk.
//!
//! For a sender (a head, or every head of a layer) in layer `s` and a receiver layer `r > s`:
//! 1. Run the corrupted input with the senders' clean outputs put back and every head of
//!    the layers between `s` and `r` held at its corrupted output (feed-forward networks
//!    run: a path through them counts as the sender's). The residual stream entering block
//!    `r` is the senders' stream.
//! 2. Run the corrupted input again with the receiver's query, key or value projection (or
//!    block `r`'s skip connection, [`PathChannel::Skip`]: the residual path around its
//!    heads, read by its feed-forward network and every later block) reading the senders'
//!    stream ([`model::InputPatch`]); everything from there on runs freely.
//!
//! The restored fraction of that run is the path's. Through every channel of every head of
//! block `s + 1` and its skip connection at once ([`PathChannel::All`]), path patching is
//! activation patching of the senders, which the tests check.

use burn::prelude::*;
use model::{HeadId, HeadPatch, InputPatch, QkvChannel};
use serde::{Deserialize, Serialize};

use super::pair_passes::PairPasses;

/// Which input of the receiver the senders' output may reach it through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PathChannel {
    /// The receiver's query projection.
    Query,
    /// The receiver's key projection.
    Key,
    /// The receiver's value projection.
    Value,
    /// The receiving block's skip connection: around its heads, into its feed-forward
    /// network and every later block.
    Skip,
    /// Every head's three projections and the skip connection: everything the receiving
    /// block reads.
    All,
}

impl PathChannel {
    /// The channels a layer-to-layer record is made for.
    pub const ALL: [PathChannel; 5] = [
        PathChannel::Query,
        PathChannel::Key,
        PathChannel::Value,
        PathChannel::Skip,
        PathChannel::All,
    ];

    /// `q`, `k`, `v`, `skip` or `all`, as figures write it.
    pub fn short(self) -> &'static str {
        match self {
            PathChannel::Query => "q",
            PathChannel::Key => "k",
            PathChannel::Value => "v",
            PathChannel::Skip => "skip",
            PathChannel::All => "all",
        }
    }

    /// The head input this channel is, if it is one.
    fn qkv(self) -> Option<QkvChannel> {
        match self {
            PathChannel::Query => Some(QkvChannel::Query),
            PathChannel::Key => Some(QkvChannel::Key),
            PathChannel::Value => Some(QkvChannel::Value),
            PathChannel::Skip | PathChannel::All => None,
        }
    }
}

/// One head-to-head (or head-to-skip) path.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PathPatching {
    /// The sending head.
    pub sender: HeadId,
    /// The receiving block.
    pub receiver_layer: usize,
    /// The receiving head; null for the skip connection.
    pub receiver_head: Option<usize>,
    /// The receiver's input the path goes through (`query`, `key`, `value` or `skip`).
    pub channel: PathChannel,
    /// Restored fraction through this path alone; null when there is nothing to restore.
    pub restored: Option<f64>,
}

/// All heads of one layer to all heads of a later one, through one channel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LayerPathPatching {
    /// The sending block (all its heads at once).
    pub sender_layer: usize,
    /// The receiving block (all its heads' `channel` at once).
    pub receiver_layer: usize,
    /// The receiving heads' input, the skip connection, or everything (`all`).
    pub channel: PathChannel,
    /// Restored fraction; null when there is nothing to restore.
    pub restored: Option<f64>,
}

/// Every head to every head of every later layer through its query, key and value, and to
/// each later block's skip connection.
pub(crate) fn head_paths(passes: &PairPasses) -> Vec<PathPatching> {
    let model = passes.model;
    let n_heads = model.n_heads();
    let mut paths = Vec::new();
    for sender in model.heads() {
        for receiver_layer in sender.layer + 1..model.n_layers() {
            let stream = senders_stream(passes, sender.layer, Some(sender.head), receiver_layer);
            for head in 0..n_heads {
                for channel in [PathChannel::Query, PathChannel::Key, PathChannel::Value] {
                    paths.push(PathPatching {
                        sender,
                        receiver_layer,
                        receiver_head: Some(head),
                        channel,
                        restored: through(passes, &stream, receiver_layer, Some(head), channel),
                    });
                }
            }
            paths.push(PathPatching {
                sender,
                receiver_layer,
                receiver_head: None,
                channel: PathChannel::Skip,
                restored: through(passes, &stream, receiver_layer, None, PathChannel::Skip),
            });
        }
    }
    paths
}

/// Every layer's heads together to every later layer's heads together, per channel.
pub(crate) fn layer_paths(passes: &PairPasses) -> Vec<LayerPathPatching> {
    let n_layers = passes.model.n_layers();
    let mut paths = Vec::new();
    for sender_layer in 0..n_layers {
        for receiver_layer in sender_layer + 1..n_layers {
            let stream = senders_stream(passes, sender_layer, None, receiver_layer);
            for channel in PathChannel::ALL {
                paths.push(LayerPathPatching {
                    sender_layer,
                    receiver_layer,
                    channel,
                    restored: through(passes, &stream, receiver_layer, None, channel),
                });
            }
        }
    }
    paths
}

/// Step 1: the residual stream entering block `receiver_layer` (`[pairs, seq, d_model]`)
/// when the corrupted pass gets the clean output of head `sender_head` of `sender_layer`
/// (of all its heads for `None`), every head between held at its corrupted output.
pub(crate) fn senders_stream(
    passes: &PairPasses,
    sender_layer: usize,
    sender_head: Option<usize>,
    receiver_layer: usize,
) -> Tensor<3> {
    let n_heads = passes.model.n_heads();
    let mut weight = vec![0.0f32; n_heads];
    for (head, w) in weight.iter_mut().enumerate() {
        if sender_head.is_none_or(|sender| sender == head) {
            *w = 1.0;
        }
    }
    let weight =
        Tensor::<1>::from_floats(weight.as_slice(), &passes.device).reshape([1, 1, n_heads, 1]);
    let mut input = passes.corrupted_input().head_patch(
        sender_layer,
        HeadPatch {
            values: passes.clean_cache.layers[sender_layer].head_outputs.clone(),
            weight,
        },
    );
    for frozen in sender_layer + 1..receiver_layer {
        input = input.head_patch(
            frozen,
            HeadPatch {
                values: passes.corrupted_cache.layers[frozen].head_outputs.clone(),
                weight: Tensor::ones([1, 1, n_heads, 1], &passes.device),
            },
        );
    }
    let (_, cache) = passes.model.forward_with_cache(input);
    cache.layers[receiver_layer].resid_pre.clone()
}

/// Step 2: the restored fraction when `channel` of head `receiver_head` of block
/// `receiver_layer` (of every head for `None`) reads `stream` and all else the corrupted pass.
pub(crate) fn through(
    passes: &PairPasses,
    stream: &Tensor<3>,
    receiver_layer: usize,
    receiver_head: Option<usize>,
    channel: PathChannel,
) -> Option<f64> {
    let n_heads = passes.model.n_heads();
    let mut patch = InputPatch::new(stream.clone(), n_heads);
    match (channel.qkv(), receiver_head) {
        (Some(qkv), Some(head)) => patch = patch.read_by(head, qkv),
        (Some(qkv), None) => {
            for head in 0..n_heads {
                patch = patch.read_by(head, qkv);
            }
        }
        (None, _) if channel == PathChannel::Skip => patch = patch.skip(true),
        (None, _) => patch = patch.read_by_all_heads().skip(true),
    }
    passes.restored_by(passes.corrupted_input().input_patch(receiver_layer, patch))
}

#[cfg(test)]
mod tests {
    use tasks::PairKind;

    use super::*;
    use crate::interventions::activation_patching::head_weight;
    use crate::interventions::pair_passes::testing::recall_model;

    /// Activation patching of `senders` (head weights `[1, 1, n_heads, 1]`) of `layer`.
    fn activation_patching(passes: &PairPasses, layer: usize, weight: Tensor<4>) -> Option<f64> {
        let patch = HeadPatch {
            values: passes.clean_cache.layers[layer].head_outputs.clone(),
            weight,
        };
        passes.restored_by(passes.corrupted_input().head_patch(layer, patch))
    }

    /// Through every input of the next block, a path is the sender's activation patching;
    /// through none it restores nothing; and the parts the file reports are not the whole
    /// (the skip and the three channels of every head do not add up, or nothing would need
    /// path patching), but every one is a number.
    #[test]
    fn a_path_through_every_input_of_the_next_block_is_activation_patching() {
        for kind in [PairKind::Answer, PairKind::Route] {
            let (model, pairs, device) = recall_model(2, kind);
            let passes = PairPasses::new(&model, &pairs, &device).unwrap();
            assert!(
                passes.span().abs() > 1e-3,
                "{kind:?}: the pairs move the answer"
            );
            for sender in 0..2 {
                let stream = senders_stream(&passes, 0, Some(sender), 1);
                let all = through(&passes, &stream, 1, None, PathChannel::All).unwrap();
                let id = HeadId::new(0, sender);
                let exact =
                    activation_patching(&passes, 0, head_weight(id, None, 1, 2, &device)).unwrap();
                assert!(
                    (all - exact).abs() < 1e-4,
                    "{kind:?} {id}: {all} vs {exact}"
                );
                let unread = InputPatch::new(stream.clone(), 2);
                let nothing = passes
                    .restored_by(passes.corrupted_input().input_patch(1, unread))
                    .unwrap();
                assert!(nothing.abs() < 1e-5, "{nothing}");
            }
            let stream = senders_stream(&passes, 0, None, 1);
            let all = through(&passes, &stream, 1, None, PathChannel::All).unwrap();
            let exact =
                activation_patching(&passes, 0, Tensor::ones([1, 1, 2, 1], &device)).unwrap();
            assert!(
                (all - exact).abs() < 1e-4,
                "{kind:?} layer: {all} vs {exact}"
            );
            let paths = head_paths(&passes);
            assert_eq!(
                paths.len(),
                2 * (2 * 3 + 1),
                "each sender: 2 heads x q k v, skip"
            );
            assert!(paths.iter().all(|p| p.restored.is_some_and(f64::is_finite)));
        }
    }

    /// With a block in between, its heads are held at their corrupted outputs: a path from
    /// block 0 to block 2 through everything equals the run with block 0's senders patched
    /// and block 1's heads frozen, not activation patching (which lets block 1 move).
    #[test]
    fn heads_between_sender_and_receiver_are_frozen() {
        let (model, pairs, device) = recall_model(3, PairKind::Answer);
        let passes = PairPasses::new(&model, &pairs, &device).unwrap();
        let stream = senders_stream(&passes, 0, None, 2);
        let through_all = through(&passes, &stream, 2, None, PathChannel::All).unwrap();
        let frozen = passes
            .restored_by(
                passes
                    .corrupted_input()
                    .head_patch(
                        0,
                        HeadPatch {
                            values: passes.clean_cache.layers[0].head_outputs.clone(),
                            weight: Tensor::ones([1, 1, 2, 1], &device),
                        },
                    )
                    .head_patch(
                        1,
                        HeadPatch {
                            values: passes.corrupted_cache.layers[1].head_outputs.clone(),
                            weight: Tensor::ones([1, 1, 2, 1], &device),
                        },
                    ),
            )
            .unwrap();
        assert!(
            (through_all - frozen).abs() < 1e-4,
            "{through_all} vs {frozen}"
        );
        let free = activation_patching(&passes, 0, Tensor::ones([1, 1, 2, 1], &device)).unwrap();
        assert!(
            (through_all - free).abs() > 1e-4,
            "block 1 is frozen: {through_all} vs {free}"
        );
        assert_eq!(
            layer_paths(&passes).len(),
            3 * PathChannel::ALL.len(),
            "L0->L1, L0->L2, L1->L2"
        );
    }
}
