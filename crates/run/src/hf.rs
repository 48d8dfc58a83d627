//! Hugging Face BERT-family checkpoints (`config.json` and `model.safetensors`, as
//! `save_pretrained` writes them, of a `BertModel` or a `BertForMaskedLM`) opened as
//! headlab [`Encoder`]s: BERT is headlab's encoder with its four options set (token types, an
//! embedding norm, post-norm without a final norm, the checkpoint's norm epsilon), so an
//! imported model runs every code path a trained one runs.
//!
//! The weights are read with the `safetensors` crate and assembled here rather than loaded
//! through burn-store's key remapping: headlab keeps a layer's query, key and value
//! projections as one `[d_model, 3 * n_heads * d_head]` matrix (`[q | k | v]`, head-major
//! within each), where the checkpoint has three `[n_heads * d_head, d_model]` matrices; a
//! rename cannot concatenate and transpose.
//!
//! A `BertForMaskedLM` keeps its prediction head: the transform (dense, GELU, norm) as the
//! encoder's `output_transform` and the decoder (the word embeddings, tied, and the
//! prediction bias) as its output layer, so its logits equal the reference's too. A
//! `BertModel` has no head: its output layer is the tied word embeddings alone, with no
//! bias (the unembedding), and no transform.

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use burn::module::Param;
use burn::nn::{LayerNorm, Linear};
use burn::prelude::*;
use model::{
    Encoder, EncoderConfig, EncoderIo, HeadLayout, InitScheme, NormPlacement, PositionalKind,
};
use safetensors::{Dtype, SafeTensors};
use serde::Deserialize;

/// Why a checkpoint could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum HfError {
    /// A file could not be read.
    #[error("cannot read {path}: {error}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why. Not a `source`: the message already says it, and `error: {e:#}` in main would
        /// print it twice.
        error: std::io::Error,
    },
    /// `config.json` is not a BERT config headlab can open.
    #[error("{path}: {message}")]
    Config {
        /// The config file.
        path: PathBuf,
        /// What is wrong, and what would be accepted.
        message: String,
    },
    /// The weights are not what the config describes.
    #[error("{path}: {message}")]
    Weights {
        /// The weights file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

/// The fields of a Hugging Face `config.json` that a BERT encoder needs.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct BertConfig {
    /// `bert` for BERT-family checkpoints.
    #[serde(default)]
    pub model_type: Option<String>,
    /// The classes it was saved from (`BertModel`, `BertForMaskedLM`, ...).
    #[serde(default)]
    pub architectures: Vec<String>,
    /// Width of the residual stream.
    pub hidden_size: usize,
    /// Blocks.
    pub num_hidden_layers: usize,
    /// Heads per block.
    pub num_attention_heads: usize,
    /// Feed-forward width.
    pub intermediate_size: usize,
    /// The feed-forward activation: only the exact `gelu` is headlab's.
    #[serde(default = "default_activation")]
    pub hidden_act: String,
    /// Length of the learned position table.
    pub max_position_embeddings: usize,
    /// Token types (segments).
    #[serde(default = "default_type_vocab")]
    pub type_vocab_size: usize,
    /// The layer norms' epsilon.
    #[serde(default = "default_epsilon")]
    pub layer_norm_eps: f64,
    /// Word pieces.
    pub vocab_size: usize,
    /// `absolute` (learned positions) is the only kind headlab has for BERT.
    #[serde(default)]
    pub position_embedding_type: Option<String>,
}

fn default_activation() -> String {
    "gelu".into()
}
fn default_type_vocab() -> usize {
    2
}
fn default_epsilon() -> f64 {
    1e-12
}

/// The largest `model.safetensors` read, checked before reading it: 4 GiB, room for
/// BERT-large (1.3 GB in float32) and then some. Also the bound on the parameters
/// `config.json` describes, checked before the model is allocated.
pub const MAX_CHECKPOINT_BYTES: u64 = 4 << 30;

/// The most of any one size an import accepts before allocating: BERT-large is 1024 wide
/// with 24 layers, 16 heads, 4096 feed-forward units and 30522 word pieces.
const MAX_SIZE: usize = 1 << 20;

impl BertConfig {
    /// Reads `dir/config.json`.
    pub fn read(dir: &Path) -> Result<BertConfig, HfError> {
        let path = dir.join("config.json");
        let text = crate::small_file::read_to_string(&path, crate::small_file::CONFIG_LIMIT)
            .map_err(|error| HfError::Io {
                path: path.clone(),
                error,
            })?;
        let config: BertConfig = serde_json::from_str(&text).map_err(|e| HfError::Config {
            path: path.clone(),
            message: format!("not a BERT config.json: {e}"),
        })?;
        config
            .check()
            .map_err(|message| HfError::Config { path, message })?;
        Ok(config)
    }

    fn check(&self) -> Result<(), String> {
        if let Some(kind) = &self.model_type
            && kind != "bert"
        {
            return Err(format!(
                "model_type is {kind:?}; headlab opens BERT checkpoints (model_type \"bert\")"
            ));
        }
        if self.hidden_act != "gelu" {
            return Err(format!(
                "hidden_act is {:?}; headlab's feed-forward is the exact GELU (\"gelu\")",
                self.hidden_act
            ));
        }
        if let Some(kind) = &self.position_embedding_type
            && kind != "absolute"
        {
            return Err(format!(
                "position_embedding_type is {kind:?}; headlab has learned absolute positions \
                 (\"absolute\")"
            ));
        }
        for (name, value) in [
            ("hidden_size", self.hidden_size),
            ("num_hidden_layers", self.num_hidden_layers),
            ("num_attention_heads", self.num_attention_heads),
            ("intermediate_size", self.intermediate_size),
            ("max_position_embeddings", self.max_position_embeddings),
            ("type_vocab_size", self.type_vocab_size),
            ("vocab_size", self.vocab_size),
        ] {
            if value == 0 || value > MAX_SIZE {
                return Err(format!("{name} = {value} is out of range: 1 to {MAX_SIZE}"));
            }
        }
        if self.parameter_bytes() > MAX_CHECKPOINT_BYTES as u128 {
            return Err(format!(
                "describes {:.1} GiB of float32 parameters, over the {} GiB headlab imports",
                self.parameter_bytes() as f64 / (1u64 << 30) as f64,
                MAX_CHECKPOINT_BYTES >> 30
            ));
        }
        if !self.hidden_size.is_multiple_of(self.num_attention_heads) {
            return Err(format!(
                "hidden_size {} is not a multiple of num_attention_heads {}",
                self.hidden_size, self.num_attention_heads
            ));
        }
        Ok(())
    }

    /// Bytes of the float32 parameters this config describes (saturating): embeddings,
    /// every block, the masked-LM transform and bias where the checkpoint has them.
    pub fn parameter_bytes(&self) -> u128 {
        let [d, ff, vocab] =
            [self.hidden_size, self.intermediate_size, self.vocab_size].map(|size| size as u128);
        let embeddings =
            (vocab + self.max_position_embeddings as u128 + self.type_vocab_size as u128 + 2) * d;
        // q, k, v and output projections with biases, two norms, the feed-forward pair.
        let block = 4 * (d * d + d) + 4 * d + (d * ff + ff) + (ff * d + d);
        let head = match self.is_masked_lm() {
            true => d * d + 3 * d + vocab,
            false => 0,
        };
        (embeddings + self.num_hidden_layers as u128 * block + head).saturating_mul(4)
    }

    /// The class the checkpoint was saved from, as `architectures` names it: `BertModel`
    /// when it names none.
    pub fn architecture(&self) -> &str {
        match self.is_masked_lm() {
            true => "BertForMaskedLM",
            false => self
                .architectures
                .first()
                .map_or("BertModel", String::as_str),
        }
    }

    /// Whether the checkpoint is a `BertForMaskedLM` (it keeps its prediction head).
    pub fn is_masked_lm(&self) -> bool {
        self.architectures.iter().any(|a| a == "BertForMaskedLM")
    }

    /// headlab's encoder config and sizes for this checkpoint.
    pub fn encoder(&self) -> (EncoderConfig, EncoderIo) {
        let config = EncoderConfig {
            d_model: self.hidden_size,
            n_layers: self.num_hidden_layers,
            n_heads: self.num_attention_heads,
            head_layout: HeadLayout::Split,
            d_head: None,
            d_ff: self.intermediate_size,
            dropout: 0.0,
            norm: NormPlacement::Post,
            positional: PositionalKind::Learned,
            init: InitScheme::Random,
            norm_epsilon: self.layer_norm_eps,
            token_types: self.type_vocab_size,
            embedding_norm: true,
            final_norm: false,
            output_transform: self.is_masked_lm(),
        };
        let io = EncoderIo {
            vocab_size: self.vocab_size,
            n_outputs: self.vocab_size,
            max_seq_len: self.max_position_embeddings,
        };
        (config, io)
    }
}

/// Opens the checkpoint in `dir` (`config.json`, `model.safetensors`) on `device`.
pub fn load_bert(dir: &Path, device: &Device) -> Result<(Encoder, BertConfig), HfError> {
    let config = BertConfig::read(dir)?;
    let bytes = read_weights(dir)?;
    let (encoder, _) = bert_from_bytes(dir, &config, &bytes, device)?;
    Ok((encoder, config))
}

/// The bytes of `dir/model.safetensors`, refusing a file over [`MAX_CHECKPOINT_BYTES`]
/// before reading it.
pub fn read_weights(dir: &Path) -> Result<Vec<u8>, HfError> {
    let path = dir.join("model.safetensors");
    let io_error = |error| HfError::Io {
        path: path.clone(),
        error,
    };
    let size = std::fs::metadata(&path).map_err(io_error)?.len();
    if size > MAX_CHECKPOINT_BYTES {
        return Err(HfError::Weights {
            path,
            message: format!(
                "is {:.1} GiB, over the {} GiB headlab imports",
                size as f64 / (1u64 << 30) as f64,
                MAX_CHECKPOINT_BYTES >> 30
            ),
        });
    }
    crate::small_file::read(&path, MAX_CHECKPOINT_BYTES).map_err(io_error)
}

/// The encoder `config` describes, with the weights in `bytes` (the contents of
/// `dir/model.safetensors`, [`read_weights`]), on `device`.
pub fn bert_from_bytes(
    dir: &Path,
    config: &BertConfig,
    bytes: &[u8],
    device: &Device,
) -> Result<(Encoder, Vec<String>), HfError> {
    let path = dir.join("model.safetensors");
    let weights = Weights::parse(bytes, &path, device)?;
    let (encoder_config, io) = config.encoder();
    let mut encoder = encoder_config
        .init(&io, device)
        .map_err(|e| HfError::Config {
            path: dir.join("config.json"),
            message: e.to_string(),
        })?;
    weights.fill(&mut encoder, config)?;
    let unread = weights.check_unread(config)?;
    Ok((encoder.no_grad(), unread))
}

/// The one tensor under `embeddings.` or `encoder.` a checkpoint may hold that headlab
/// rightly leaves unread: the position ids, a buffer (`0..max_position_embeddings`), not a
/// weight.
const POSITION_IDS: &str = "embeddings.position_ids";

/// The checkpoint's tensors by name, without the `bert.` prefix a task model adds.
struct Weights<'a> {
    file: SafeTensors<'a>,
    names: HashMap<String, String>,
    /// The names (without `bert.`) read so far.
    read: RefCell<BTreeSet<String>>,
    path: &'a Path,
    device: &'a Device,
}

impl<'a> Weights<'a> {
    fn parse(bytes: &'a [u8], path: &'a Path, device: &'a Device) -> Result<Self, HfError> {
        let file = SafeTensors::deserialize(bytes).map_err(|e| HfError::Weights {
            path: path.to_path_buf(),
            message: format!("not a valid safetensors file ({e}); it may be truncated"),
        })?;
        let names = file
            .names()
            .into_iter()
            .map(|name| {
                (
                    name.strip_prefix("bert.").unwrap_or(name).to_string(),
                    name.to_string(),
                )
            })
            .collect();
        Ok(Self {
            file,
            names,
            read: RefCell::new(BTreeSet::new()),
            path,
            device,
        })
    }

    /// The tensors left unread once the model is filled, sorted, after refusing any of the
    /// encoder's own (under `embeddings.` or `encoder.`, buffers aside): a layer beyond
    /// `num_hidden_layers`, or a part headlab's BERT lacks, would be dropped without a word
    /// and the imported model would not be the checkpoint. The rest (a pooler, a task's
    /// classifier) are named for the user, as `transformers` names unused weights.
    fn check_unread(&self, config: &BertConfig) -> Result<Vec<String>, HfError> {
        let read = self.read.borrow();
        let mut unread: Vec<String> = self
            .names
            .keys()
            .filter(|name| !read.contains(*name))
            .cloned()
            .collect();
        unread.sort();
        let layer_of = |name: &str| {
            let rest = name.strip_prefix("encoder.layer.")?;
            rest.split('.').next()?.parse::<usize>().ok()
        };
        if let Some(layer) = unread.iter().filter_map(|n| layer_of(n)).max() {
            return Err(self.error(format!(
                "has tensors of layer {layer}, but config.json gives num_hidden_layers = {}: \
                 headlab imports every layer or none; set num_hidden_layers to the checkpoint's \
                 layer count",
                config.num_hidden_layers
            )));
        }
        let encoder_part: Vec<&String> = unread
            .iter()
            .filter(|n| n.starts_with("embeddings.") || n.starts_with("encoder."))
            .filter(|n| n.as_str() != POSITION_IDS)
            .collect();
        if let Some(first) = encoder_part.first() {
            return Err(self.error(format!(
                "has {} tensor(s) of the encoder that a BERT config.json does not describe \
                 ({first}{}); headlab imports BERT's encoder exactly, and would leave them out",
                encoder_part.len(),
                if encoder_part.len() > 1 { ", ..." } else { "" }
            )));
        }
        Ok(unread)
    }

    fn error(&self, message: String) -> HfError {
        HfError::Weights {
            path: self.path.to_path_buf(),
            message,
        }
    }

    /// The tensor `name` (without `bert.`), checked to be f32 of `shape`.
    fn get<const D: usize>(&self, name: &str, shape: [usize; D]) -> Result<Tensor<D>, HfError> {
        let full = self
            .names
            .get(name)
            .ok_or_else(|| self.error(format!("has no tensor {name}")))?;
        self.read.borrow_mut().insert(name.to_string());
        let view = self
            .file
            .tensor(full)
            .map_err(|e| self.error(format!("{full}: {e}")))?;
        if view.dtype() != Dtype::F32 {
            return Err(self.error(format!(
                "{full} is {:?}; headlab reads float32 checkpoints",
                view.dtype()
            )));
        }
        if view.shape() != shape {
            return Err(self.error(format!(
                "{full} has shape {:?}, where config.json gives {shape:?}",
                view.shape()
            )));
        }
        let values = crate::tensor_file::f32_values(&view);
        if let Some(first) = values.iter().position(|v| !v.is_finite()) {
            // Counted only here: a finite tensor is read once.
            let non_finite = values[first..].iter().filter(|v| !v.is_finite()).count();
            return Err(self.error(format!(
                "{full} holds {non_finite} value(s) that are NaN or infinite (the first at \
                 index {first}); headlab imports finite weights only"
            )));
        }
        Ok(Tensor::from_data(
            TensorData::new(values, shape.to_vec()),
            self.device,
        ))
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
        norm.beta = Some(Param::from_tensor(self.first_of(
            [&format!("{prefix}.bias"), &format!("{prefix}.beta")],
            [width],
        )?));
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
        linear.bias = Some(Param::from_tensor(
            self.get(&format!("{prefix}.bias"), [d_out])?,
        ));
        Ok(())
    }

    fn fill(&self, encoder: &mut Encoder, config: &BertConfig) -> Result<(), HfError> {
        let d = config.hidden_size;
        let vocab = config.vocab_size;
        let word: Tensor<2> = self.get("embeddings.word_embeddings.weight", [vocab, d])?;
        encoder.embedding.weight = Param::from_tensor(word.clone());
        let positions = encoder
            .positions
            .learned
            .as_mut()
            .expect("an imported encoder has learned positions");
        positions.weight = Param::from_tensor(self.get(
            "embeddings.position_embeddings.weight",
            [config.max_position_embeddings, d],
        )?);
        let types = encoder
            .token_types
            .as_mut()
            .expect("an imported encoder has token types");
        types.weight = Param::from_tensor(self.get(
            "embeddings.token_type_embeddings.weight",
            [config.type_vocab_size, d],
        )?);
        let embedding_norm = encoder
            .embedding_norm
            .as_mut()
            .expect("an imported encoder has an embedding norm");
        self.norm("embeddings.LayerNorm", embedding_norm, d)?;
        for (index, block) in encoder.blocks.iter_mut().enumerate() {
            let layer = format!("encoder.layer.{index}");
            self.block(&layer, block, config)?;
        }
        if let Some(transform) = encoder.output_transform.as_mut() {
            let prefix = "cls.predictions.transform";
            self.linear(&format!("{prefix}.dense"), &mut transform.dense, d, d)?;
            self.norm(&format!("{prefix}.LayerNorm"), &mut transform.norm, d)?;
        }
        // The decoder: the word embeddings (tied), and the prediction bias if there is one.
        encoder.output.weight = Param::from_tensor(word.transpose());
        let bias = match self.names.contains_key("cls.predictions.bias") {
            true => self.get("cls.predictions.bias", [vocab])?,
            false => Tensor::zeros([vocab], self.device),
        };
        encoder.output.bias = Some(Param::from_tensor(bias));
        Ok(())
    }

    fn block(
        &self,
        layer: &str,
        block: &mut model::EncoderBlock,
        config: &BertConfig,
    ) -> Result<(), HfError> {
        let d = config.hidden_size;
        let qkv = ["query", "key", "value"].map(|part| {
            let name = format!("{layer}.attention.self.{part}");
            let weight: Result<Tensor<2>, _> = self.get(&format!("{name}.weight"), [d, d]);
            let bias: Result<Tensor<1>, _> = self.get(&format!("{name}.bias"), [d]);
            weight.and_then(|w| bias.map(|b| (w.transpose(), b))) // [d_in, d_out], [d_out]
        });
        let mut weights = Vec::with_capacity(3);
        let mut biases = Vec::with_capacity(3);
        for part in qkv {
            let (weight, bias) = part?;
            weights.push(weight);
            biases.push(bias);
        }
        let projection = block
            .attention
            .qkv
            .as_mut()
            .expect("an imported encoder has the split layout");
        projection.weight = Param::from_tensor(Tensor::cat(weights, 1)); // [d, 3 d]: q | k | v
        projection.bias = Some(Param::from_tensor(Tensor::cat(biases, 0))); // [3 d]
        self.linear(
            &format!("{layer}.attention.output.dense"),
            &mut block.attention.output,
            d,
            d,
        )?;
        self.norm(
            &format!("{layer}.attention.output.LayerNorm"),
            &mut block.norm_attention,
            d,
        )?;
        let ff = config.intermediate_size;
        self.linear(
            &format!("{layer}.intermediate.dense"),
            &mut block.ff_in,
            d,
            ff,
        )?;
        self.linear(&format!("{layer}.output.dense"), &mut block.ff_out, ff, d)?;
        self.norm(&format!("{layer}.output.LayerNorm"), &mut block.norm_ff, d)?;
        Ok(())
    }
}
