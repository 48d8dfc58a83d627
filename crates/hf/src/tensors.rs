//! The checkpoint's tensors, read by name through the family's [`Layout`] into headlab's
//! [`Encoder`]: each one checked to be float32 of the shape the config gives and finite, and
//! every tensor left unread accounted for ([`Weights::check_unread`]).
//!
//! headlab keeps a layer's query, key and value projections as one `[d_model, 3 * n_heads *
//! d_head]` matrix (`[q | k | v]`, head-major within each), where a checkpoint has three
//! `[n_heads * d_head, d_model]` matrices: a rename cannot concatenate and transpose, so the
//! model is assembled here rather than loaded through burn-store's key remapping.

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};

use burn::module::Param;
use burn::nn::{LayerNorm, Linear};
use burn::prelude::*;
use model::Encoder;

use super::config::CheckpointConfig;
use super::error::HfError;
use super::family::{Blocks, Layout, Qkv};
use super::weights_file::{CheckpointTensors, Values};

/// The one tensor under the encoder's names a checkpoint may hold that headlab rightly leaves
/// unread: the position ids, a buffer (`0..max_position_embeddings`), not a weight.
const POSITION_IDS: &str = "embeddings.position_ids";

/// The checkpoint's tensors by name, without the base model's prefix a task model adds
/// (`bert.`, `roberta.`, ...).
pub(super) struct Weights<'a> {
    file: &'a CheckpointTensors,
    names: HashMap<String, String>,
    /// The names (without the prefix) read so far.
    read: RefCell<BTreeSet<String>>,
    layout: &'static Layout,
    /// Whether the linears (the decoder aside) and norms have biases (ModernBERT's: none).
    biases: bool,
    device: &'a Device,
}

impl<'a> Weights<'a> {
    pub(super) fn parse(
        file: &'a CheckpointTensors,
        config: &CheckpointConfig,
        device: &'a Device,
    ) -> Self {
        let layout = config.family.layout();
        let names = file
            .names()
            .map(|name| {
                (
                    name.strip_prefix(layout.base_prefix)
                        .unwrap_or(name)
                        .to_string(),
                    name.to_string(),
                )
            })
            .collect();
        Self {
            file,
            names,
            read: RefCell::new(BTreeSet::new()),
            layout,
            biases: config.modern.is_none_or(|modern| modern.biases),
            device,
        }
    }

    /// The tensors left unread once the model is filled, sorted, after refusing any of the
    /// encoder's own (the layout's `encoder_parts`, buffers aside): a layer beyond
    /// `num_hidden_layers`, or a part headlab's encoder lacks, would be dropped without a
    /// word and the imported model would not be the checkpoint. The rest (a pooler, a task's
    /// classifier) are named for the user, as `transformers` names unused weights.
    pub(super) fn check_unread(&self, config: &CheckpointConfig) -> Result<Vec<String>, HfError> {
        let read = self.read.borrow();
        let mut unread: Vec<String> = self
            .names
            .keys()
            .filter(|name| !read.contains(*name))
            .cloned()
            .collect();
        unread.sort();
        let layers = match self.layout.blocks {
            Blocks::PerLayer(prefix) => Some(format!("{prefix}.")),
            // Another group of shared layers is an encoder part the config does not describe.
            Blocks::Shared(_) => None,
        };
        let layer_of = |name: &str| {
            let rest = name.strip_prefix(layers.as_deref()?)?;
            rest.split('.').next()?.parse::<usize>().ok()
        };
        if let Some(layer) = unread.iter().filter_map(|n| layer_of(n)).max() {
            return Err(self.error(format!(
                "has tensors of layer {layer}, but config.json gives {} layers: headlab \
                 imports every layer or none; set the config's layer count to the \
                 checkpoint's",
                config.num_hidden_layers
            )));
        }
        let encoder_part: Vec<&String> = unread
            .iter()
            .filter(|n| self.layout.encoder_parts.iter().any(|p| n.starts_with(p)))
            .filter(|n| n.as_str() != POSITION_IDS)
            .collect();
        if let Some(first) = encoder_part.first() {
            return Err(self.error(format!(
                "has {} tensor(s) of the encoder that a {} config.json does not describe \
                 ({first}{}); headlab imports the encoder exactly, and would leave them out",
                encoder_part.len(),
                config.family.model_type(),
                if encoder_part.len() > 1 { ", ..." } else { "" }
            )));
        }
        Ok(unread)
    }

    fn error(&self, message: String) -> HfError {
        HfError::Weights {
            path: self.file.path.clone(),
            message,
        }
    }

    /// The tensor `name` (without the prefix), checked to be finite f32 of `shape`.
    fn get<const D: usize>(&self, name: &str, shape: [usize; D]) -> Result<Tensor<D>, HfError> {
        let full = self
            .names
            .get(name)
            .ok_or_else(|| self.error(format!("has no tensor {name}")))?;
        self.read.borrow_mut().insert(name.to_string());
        let entry = self.file.entry(full).expect("a name the file lists");
        if entry.dtype != "F32" {
            return Err(self.error(format!(
                "{full} is {}; headlab reads float32 checkpoints",
                entry.dtype
            )));
        }
        if entry.shape != shape {
            return Err(self.error(format!(
                "{full} has shape {:?}, where config.json gives {shape:?}",
                entry.shape
            )));
        }
        match &entry.values {
            Values::Finite(values) => Ok((**values).clone().reshape(shape)),
            Values::NonFinite { count, first } => Err(self.error(format!(
                "{full} holds {count} value(s) that are NaN or infinite (the first at index \
                 {first}); headlab imports finite weights only"
            ))),
            Values::Other => unreachable!("a float32 tensor is converted"),
        }
    }

    /// The first of `names` the checkpoint has (old checkpoints call a norm's scale `gamma`).
    fn first_of<const D: usize>(
        &self,
        names: [&str; 2],
        shape: [usize; D],
    ) -> Result<Tensor<D>, HfError> {
        match names.iter().find(|n| self.names.contains_key(**n)) {
            Some(name) => self.get(name, shape),
            None => self.get(names[0], shape),
        }
    }

    fn norm(&self, prefix: &str, norm: &mut LayerNorm, width: usize) -> Result<(), HfError> {
        norm.gamma = Param::from_tensor(self.first_of(
            [&format!("{prefix}.weight"), &format!("{prefix}.gamma")],
            [width],
        )?);
        norm.beta = match self.biases {
            true => Some(Param::from_tensor(self.first_of(
                [&format!("{prefix}.bias"), &format!("{prefix}.beta")],
                [width],
            )?)),
            false => None,
        };
        Ok(())
    }

    /// A PyTorch `nn.Linear` (`weight [out, in]`) into a Burn one (`[in, out]`).
    fn linear(
        &self,
        prefix: &str,
        linear: &mut Linear,
        d_in: usize,
        d_out: usize,
    ) -> Result<(), HfError> {
        let weight: Tensor<2> = self.get(&format!("{prefix}.weight"), [d_out, d_in])?;
        linear.weight = Param::from_tensor(weight.transpose());
        linear.bias = self.bias(prefix, d_out)?.map(Param::from_tensor);
        Ok(())
    }

    /// The bias of the linear `prefix`, where the model has biases.
    fn bias(&self, prefix: &str, width: usize) -> Result<Option<Tensor<1>>, HfError> {
        match self.biases {
            true => self.get(&format!("{prefix}.bias"), [width]).map(Some),
            false => Ok(None),
        }
    }

    /// Fills every weight of `encoder` (made from `config`) from the checkpoint.
    pub(super) fn fill(
        &self,
        encoder: &mut Encoder,
        config: &CheckpointConfig,
    ) -> Result<(), HfError> {
        let layout = self.layout;
        let (d, width) = (config.hidden_size, config.embedding_size);
        let vocab = config.vocab_size;
        let word: Tensor<2> = self.get(&format!("{}.weight", layout.word), [vocab, width])?;
        encoder.embedding.weight = Param::from_tensor(word.clone());
        self.fill_positions(encoder, config)?;
        if let Some(name) = layout.token_type {
            let types = encoder
                .token_types
                .as_mut()
                .expect("a family with token types has their table");
            types.weight = Param::from_tensor(
                self.get(&format!("{name}.weight"), [config.type_vocab_size, width])?,
            );
        }
        if let Some(name) = layout.embedding_norm {
            let embedding_norm = encoder
                .embedding_norm
                .as_mut()
                .expect("a family with an embedding norm has it in the encoder");
            self.norm(name, embedding_norm, width)?;
        }
        if let Some(projection) = encoder.embedding_projection.as_mut() {
            let name = layout
                .embedding_projection
                .expect("only a family with a projection has factorised embeddings");
            self.linear(name, projection, width, d)?;
        }
        for (index, block) in encoder.blocks.iter_mut().enumerate() {
            self.block(&layout.blocks.prefix(index), block, config)?;
        }
        if let Some(name) = layout.final_norm {
            let norm = encoder
                .final_norm
                .as_mut()
                .expect("a family with a final norm has it in the encoder");
            self.norm(name, norm, d)?;
        }
        if let Some(transform) = encoder.output_transform.as_mut() {
            let [dense, norm] = layout.head_transform;
            self.linear(dense, &mut transform.dense, d, width)?;
            self.norm(norm, &mut transform.norm, width)?;
        }
        self.fill_decoder(encoder, config, word)
    }

    /// The learned positions: the table's rows from the family's offset on (RoBERTa's
    /// position ids start after its padding id, so its first word reads row
    /// `pad_token_id + 1`; the rows before are never read for a word).
    fn fill_positions(
        &self,
        encoder: &mut Encoder,
        config: &CheckpointConfig,
    ) -> Result<(), HfError> {
        let Some(position) = self.layout.position else {
            return Ok(()); // rotary: no table
        };
        let width = config.embedding_size;
        let table: Tensor<2> = self.get(
            &format!("{position}.weight"),
            [config.max_position_embeddings, width],
        )?; // [max_position_embeddings, width]
        let positions = encoder
            .positions
            .learned
            .as_mut()
            .expect("an imported encoder has learned positions");
        let rows = config.position_offset..config.max_position_embeddings;
        positions.weight = Param::from_tensor(table.slice([rows, 0..width])); // [max_positions, width]
        Ok(())
    }

    /// The output layer: the decoder's own weight where the checkpoint saved one (untied),
    /// else the word embeddings (tied: `save_pretrained` writes them once); the prediction
    /// bias where there is one. A base model has no head: its output layer is the
    /// unembedding, the tied word embeddings with no bias (through the projection where they
    /// are factorised).
    fn fill_decoder(
        &self,
        encoder: &mut Encoder,
        config: &CheckpointConfig,
        word: Tensor<2>,
    ) -> Result<(), HfError> {
        let [weight_name, bias_name] = self.layout.decoder;
        let (width, vocab) = (config.embedding_size, config.vocab_size);
        let decoder = match config.is_masked_lm() {
            true if self.names.contains_key(weight_name) => {
                self.get(weight_name, [vocab, width])?
            }
            true => word, // [vocab, width]
            // No head: the output layer reads the residual stream, so factorised embeddings
            // are read through their projection ([`Encoder::token_embeddings`]).
            false => encoder.token_embeddings(), // [vocab, d]
        };
        encoder.output.weight = Param::from_tensor(decoder.transpose());
        let decoder_bias = config.modern.is_none_or(|modern| modern.decoder_bias);
        // Untied (a decoder weight of its own), transformers' head adds the decoder linear's
        // own bias (`cls.predictions.decoder.bias`, as headlab's export writes it beside
        // `cls.predictions.bias`), which tying would have made the prediction bias.
        let own_bias = crate::export::written::decoder_bias_name(weight_name);
        let untied = self.names.contains_key(weight_name);
        let both = self.names.contains_key(&own_bias) && self.names.contains_key(bias_name);
        if config.is_masked_lm() && untied && own_bias != bias_name && both {
            self.get::<1>(bias_name, [vocab])?; // read: the untied head does not add it
        }
        let bias_name = match untied && self.names.contains_key(&own_bias) {
            true => own_bias.as_str(),
            false => bias_name,
        };
        let bias = match config.is_masked_lm() && decoder_bias && self.names.contains_key(bias_name)
        {
            true => self.get(bias_name, [vocab])?,
            false => Tensor::zeros([vocab], self.device),
        };
        encoder.output.bias = Some(Param::from_tensor(bias));
        Ok(())
    }

    fn block(
        &self,
        layer: &str,
        block: &mut model::EncoderBlock,
        config: &CheckpointConfig,
    ) -> Result<(), HfError> {
        let layout = self.layout;
        let d = config.hidden_size;
        let (weight, bias) = self.qkv(layer, d)?; // [3 d, d], [3 d]
        // transformers turns dimension i of a head with i + d_head / 2 (`rotate_half`), Burn
        // turns adjacent pairs: the same rows in another order give every score unchanged.
        let (weight, bias) = match config.modern {
            Some(_) => {
                let order = rotary_order(d, config.num_attention_heads, self.device);
                (
                    weight.select(0, order.clone()),
                    bias.map(|bias| bias.select(0, order)),
                )
            }
            None => (weight, bias),
        };
        let projection = block
            .attention
            .qkv
            .as_mut()
            .expect("an imported encoder has the split layout");
        projection.weight = Param::from_tensor(weight.transpose()); // [d, 3 d]: q | k | v
        projection.bias = bias.map(Param::from_tensor); // [3 d]
        let name = |part: &str| format!("{layer}.{part}");
        self.linear(
            &name(layout.attention_output),
            &mut block.attention.output,
            d,
            d,
        )?;
        if let Some(norm) = block.norm_attention.as_mut() {
            self.norm(&name(layout.attention_norm), norm, d)?;
        }
        let ff = config.intermediate_size;
        let [ff_in, ff_out] = layout.feed_forward;
        // A gated feed-forward's first linear holds the activation's input and the gate.
        let ff_in_width = if block.gated { 2 * ff } else { ff };
        self.linear(&name(ff_in), &mut block.ff_in, d, ff_in_width)?;
        self.linear(&name(ff_out), &mut block.ff_out, ff, d)?;
        self.norm(&name(layout.feed_forward_norm), &mut block.norm_ff, d)?;
        Ok(())
    }
}

impl Weights<'_> {
    /// A block's query, key and value projections as one `[3 d, d]` weight (PyTorch's
    /// `[out, in]`: every head's queries, then keys, then values) and its `[3 d]` bias.
    fn qkv(&self, layer: &str, d: usize) -> Result<(Tensor<2>, Option<Tensor<1>>), HfError> {
        match self.layout.qkv {
            Qkv::Fused(part) => {
                let name = format!("{layer}.{part}");
                let weight = self.get(&format!("{name}.weight"), [3 * d, d])?;
                Ok((weight, self.bias(&name, 3 * d)?))
            }
            Qkv::Separate(parts) => {
                let mut weights = Vec::with_capacity(3);
                let mut biases = Vec::with_capacity(3);
                for part in parts {
                    let name = format!("{layer}.{part}");
                    weights.push(self.get(&format!("{name}.weight"), [d, d])?);
                    biases.extend(self.bias(&name, d)?);
                }
                let bias = (biases.len() == 3).then(|| Tensor::cat(biases, 0));
                Ok((Tensor::cat(weights, 0), bias))
            }
        }
    }
}

/// The rows of a `[3 d, d]` query-key-value weight reordered from halves to pairs: within
/// each head's query and key, dimension `i` of the first half and `i` of the second become
/// neighbours (`2 i`, `2 i + 1`), which Burn's rotary encoding turns together; values keep
/// their order.
fn rotary_order(d: usize, n_heads: usize, device: &Device) -> Tensor<1, Int> {
    let d_head = d / n_heads;
    let half = d_head / 2;
    let mut order = Vec::with_capacity(3 * d);
    for part in 0..2 {
        for head in 0..n_heads {
            let start = part * d + head * d_head;
            for i in 0..half {
                order.extend([start + i, start + half + i]);
            }
        }
    }
    order.extend(2 * d..3 * d);
    let order: Vec<i64> = order.into_iter().map(|row| row as i64).collect();
    Tensor::from_data(TensorData::new(order, [3 * d]), device)
}
