//! What an export writes: a headlab [`Encoder`]'s weights under the names of its target
//! family's checkpoints ([`checkpoint_tensors`]), the inverse of the import's
//! [`crate::tensors`], and the `config.json` that describes them ([`config_json`]).
//!
//! headlab keeps a layer's query, key and value projections as one `[d_model, 3 d_model]`
//! matrix (`[q | k | v]`, head-major within each) and every linear as `[in, out]`;
//! `transformers` keeps three `[d_model, d_model]` matrices, each `[out, in]`. Positions:
//! RoBERTa's kinds read row `pad_token_id + 1 + p` for the word at `p`, so the table is written
//! from that row on, with zero rows before it (the padding's row among them).

use burn::prelude::*;
use model::{Activation, Encoder, EncoderConfig, EncoderIo};

use super::target::Target;
use crate::family::Layout;

/// One tensor of the checkpoint: float32, row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct NamedTensor {
    /// Its name in the checkpoint (`bert.encoder.layer.0.attention.self.query.weight`).
    pub name: String,
    /// Its shape, PyTorch's.
    pub shape: Vec<usize>,
    /// Its values.
    pub values: Vec<f32>,
}

/// The sizes the export decides beside the model's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExportSizes {
    /// The padding piece: the tokenizer's `[PAD]`, or for a model of task tokens a row
    /// appended to the word embeddings (RoBERTa's kinds need one that no token uses).
    pub pad_token_id: usize,
    /// Whether the word embeddings gained that row (`vocab_size` is one more than the task's).
    pub padding_row: bool,
    /// Rows of the position table before the first word's (RoBERTa's kinds:
    /// `pad_token_id + 1`; BERT: 0).
    pub position_offset: usize,
}

impl ExportSizes {
    /// The sizes for `target`: the padding piece `pad` where the model reads a tokenizer that
    /// has one, else a row after the task's `vocab` tokens.
    pub fn new(target: Target, vocab: usize, pad: Option<usize>) -> Self {
        let roberta_like = target.family.positions_after_padding();
        let (pad_token_id, padding_row) = match pad {
            Some(id) => (id, false),
            None if roberta_like => (vocab, true),
            None => (0, false),
        };
        Self {
            pad_token_id,
            padding_row,
            position_offset: if roberta_like { pad_token_id + 1 } else { 0 },
        }
    }
}

/// The values of `tensor`, row-major.
fn values<const D: usize>(tensor: Tensor<D>) -> Vec<f32> {
    tensor
        .into_data()
        .try_to_vec::<f32>()
        .expect("headlab's weights are float32")
}

/// Collects tensors under one name prefix (the base model's inside a masked LM).
struct Out<'a> {
    prefix: &'a str,
    tensors: Vec<NamedTensor>,
}

impl Out<'_> {
    fn push<const D: usize>(&mut self, name: &str, tensor: Tensor<D>) {
        self.tensors.push(NamedTensor {
            name: format!("{}{name}", self.prefix),
            shape: tensor.dims().to_vec(),
            values: values(tensor),
        });
    }

    /// A Burn linear (`[in, out]`) as PyTorch's `nn.Linear` (`weight [out, in]`, `bias`).
    fn linear(&mut self, name: &str, linear: &burn::nn::Linear) {
        self.push(&format!("{name}.weight"), linear.weight.val().transpose());
        let bias = linear.bias.as_ref().expect("an exported model has biases");
        self.push(&format!("{name}.bias"), bias.val());
    }

    fn norm(&mut self, name: &str, norm: &burn::nn::LayerNorm) {
        self.push(&format!("{name}.weight"), norm.gamma.val());
        let beta = norm.beta.as_ref().expect("an exported model has biases");
        self.push(&format!("{name}.bias"), beta.val());
    }
}

/// `encoder`'s weights under the names of `target`'s checkpoints, sorted by name.
pub fn checkpoint_tensors(
    encoder: &Encoder,
    target: Target,
    sizes: ExportSizes,
    max_seq_len: usize,
) -> Vec<NamedTensor> {
    let layout: &Layout = target.family.layout();
    let prefix = if target.masked_lm {
        layout.base_prefix
    } else {
        ""
    };
    let mut out = Out {
        prefix,
        tensors: Vec::new(),
    };
    let d = encoder.embedding.weight.dims()[1];
    embeddings(&mut out, encoder, layout, sizes, max_seq_len);
    for (index, block) in encoder.blocks.iter().enumerate() {
        block_tensors(&mut out, block, layout, index, d);
    }
    if let (Some(name), Some(norm)) = (layout.final_norm, &encoder.final_norm) {
        out.norm(name, norm);
    }
    if target.masked_lm {
        head(&mut out, encoder, layout);
    }
    let mut tensors = out.tensors;
    tensors.sort_by(|a, b| a.name.cmp(&b.name));
    tensors
}

/// The embeddings: words (with the padding row where one is added), positions from the
/// family's offset, token types, and the embedding norm where the family has one.
fn embeddings(
    out: &mut Out,
    encoder: &Encoder,
    layout: &Layout,
    sizes: ExportSizes,
    max_seq_len: usize,
) {
    let word = encoder.embedding.weight.val(); // [vocab, d]
    let [_, d] = word.dims();
    let device = word.device();
    let word = match sizes.padding_row {
        true => Tensor::cat(vec![word, Tensor::zeros([1, d], &device)], 0), // [vocab + 1, d]
        false => word,
    };
    out.push(&format!("{}.weight", layout.word), word);
    let position = layout
        .position
        .expect("every export family has a position table");
    let table = position_table(encoder, max_seq_len, d, &device); // [max_seq_len, d]
    let table = Tensor::cat(
        vec![Tensor::zeros([sizes.position_offset, d], &device), table],
        0,
    ); // [offset + max_seq_len, d]
    out.push(&format!("{position}.weight"), table);
    let token_type = layout
        .token_type
        .expect("every export family has token types");
    let types = match &encoder.token_types {
        Some(types) => types.weight.val(), // [types, d]
        None => Tensor::zeros([1, d], &device),
    };
    out.push(&format!("{token_type}.weight"), types);
    if let (Some(name), Some(norm)) = (layout.embedding_norm, &encoder.embedding_norm) {
        out.norm(name, norm);
    }
}

/// Block `index`: the query, key and value projections split out of headlab's one, the
/// attention's output, the feed-forward and both norms.
fn block_tensors(
    out: &mut Out,
    block: &model::EncoderBlock,
    layout: &Layout,
    index: usize,
    d: usize,
) {
    let name = |part: &str| format!("{}.{part}", layout.blocks.prefix(index));
    let qkv = block
        .attention
        .qkv
        .as_ref()
        .expect("an exported model has the split layout");
    let weight = qkv.weight.val(); // [d, 3 d]: q | k | v, head-major within each
    let bias = qkv
        .bias
        .as_ref()
        .expect("an exported model has biases")
        .val(); // [3 d]
    let crate::family::Qkv::Separate(parts) = layout.qkv else {
        unreachable!("every export family has separate projections")
    };
    for (which, part) in parts.iter().enumerate() {
        let columns = which * d..(which + 1) * d;
        out.push(
            &format!("{}.weight", name(part)),
            weight.clone().slice([0..d, columns.clone()]).transpose(), // [d, d], [out, in]
        );
        out.push(
            &format!("{}.bias", name(part)),
            bias.clone().slice([columns]),
        );
    }
    out.linear(&name(layout.attention_output), &block.attention.output);
    let attention_norm = block
        .norm_attention
        .as_ref()
        .expect("an exported model norms every attention");
    out.norm(&name(layout.attention_norm), attention_norm);
    let [ff_in, ff_out] = layout.feed_forward;
    out.linear(&name(ff_in), &block.ff_in);
    out.linear(&name(ff_out), &block.ff_out);
    out.norm(&name(layout.feed_forward_norm), &block.norm_ff);
}

/// The masked-LM head, at the checkpoint's top level: the transform, and the decoder untied
/// (`tie_word_embeddings` false), its bias under both names a family's head reads.
fn head(out: &mut Out, encoder: &Encoder, layout: &Layout) {
    out.prefix = "";
    let transform = encoder
        .output_transform
        .as_ref()
        .expect("a masked LM export has the prediction transform");
    let [dense, norm] = layout.head_transform;
    out.linear(dense, &transform.dense);
    out.norm(norm, &transform.norm);
    let [weight_name, bias_name] = layout.decoder;
    out.push(weight_name, encoder.output.weight.val().transpose()); // [vocab, d]
    let bias = encoder
        .output
        .bias
        .as_ref()
        .expect("the output layer has a bias")
        .val(); // [vocab]
    // Untied, transformers' head adds the decoder's own bias; `bias_name` is the one it ties
    // to when tied. Both hold the same values.
    out.push(&decoder_bias_name(weight_name), bias.clone());
    out.push(bias_name, bias);
}

/// The decoder linear's own bias (`cls.predictions.decoder.bias`), beside its weight.
pub(crate) fn decoder_bias_name(weight_name: &str) -> String {
    match weight_name.strip_suffix(".weight") {
        Some(stem) => format!("{stem}.bias"),
        None => format!("{weight_name}.bias"),
    }
}

/// The positions the model adds to the word at each of `max_seq_len` places: the learned
/// table, or the sinusoids Burn adds (taken from the module itself, so they are its values
/// to the bit).
fn position_table(encoder: &Encoder, max_seq_len: usize, d: usize, device: &Device) -> Tensor<2> {
    if let Some(learned) = &encoder.positions.learned {
        return learned.weight.val(); // [max_seq_len, d]
    }
    let zeros = Tensor::<3>::zeros([1, max_seq_len, d], device);
    let added = encoder.positions.forward(zeros.clone()); // [1, max_seq_len, d]
    (added - zeros).squeeze_dim::<2>(0)
}

/// The `config.json` of the export: the family's own fields, then a `headlab` object that
/// says where it came from (transformers keeps unknown fields as attributes).
pub fn config_json(
    config: &EncoderConfig,
    io: &EncoderIo,
    target: Target,
    sizes: ExportSizes,
    provenance: serde_json::Value,
) -> serde_json::Value {
    let hidden_act = match config.activation {
        Activation::Gelu => "gelu",
        Activation::GeluTanh => "gelu_new",
    };
    let vocab_size = io.vocab_size + usize::from(sizes.padding_row);
    serde_json::json!({
        "architectures": [target.class()],
        "model_type": target.family.model_type(),
        "vocab_size": vocab_size,
        "hidden_size": config.d_model,
        "num_hidden_layers": config.n_layers,
        "num_attention_heads": config.n_heads,
        "intermediate_size": config.d_ff,
        "hidden_act": hidden_act,
        "hidden_dropout_prob": config.dropout,
        "attention_probs_dropout_prob": config.dropout,
        "max_position_embeddings": sizes.position_offset + io.max_seq_len,
        "type_vocab_size": config.token_types.max(1),
        "layer_norm_eps": config.norm_epsilon,
        "initializer_range": 0.02,
        "pad_token_id": sizes.pad_token_id,
        "position_embedding_type": "absolute",
        "tie_word_embeddings": false,
        "is_decoder": false,
        "dtype": "float32",
        "headlab": provenance,
    })
}
