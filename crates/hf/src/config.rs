//! A checkpoint's `config.json`, read as its family writes it (`hidden_size` for BERT,
//! `dim` for DistilBERT, ...) into one [`CheckpointConfig`], and checked before anything is
//! allocated: an option the family's code path here does not implement is refused by name,
//! never ignored.

use std::path::Path;

use model::{
    Activation, EncoderConfig, EncoderIo, HeadLayout, InitScheme, NormPlacement, PositionalKind,
};
use serde::Deserialize;

use super::error::{HfError, MAX_CHECKPOINT_BYTES};
use super::family::Family;
use super::modernbert::{self, ModernOptions};

/// What headlab needs of a checkpoint's `config.json`, whatever its family calls it.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckpointConfig {
    /// The family, from `model_type` (BERT where a config names none, as old ones do).
    pub family: Family,
    /// The classes it was saved from (`BertModel`, `RobertaForMaskedLM`, ...).
    pub architectures: Vec<String>,
    /// Width of the residual stream.
    pub hidden_size: usize,
    /// Blocks.
    pub num_hidden_layers: usize,
    /// Heads per block.
    pub num_attention_heads: usize,
    /// Feed-forward width.
    pub intermediate_size: usize,
    /// Rows of the learned position table.
    pub max_position_embeddings: usize,
    /// Rows of the table before the first word's position: RoBERTa's position ids start
    /// after its padding id (`pad_token_id + 1`); 0 elsewhere.
    pub position_offset: usize,
    /// Token types (segments); 0 where the family has none (DistilBERT).
    pub type_vocab_size: usize,
    /// The layer norms' epsilon.
    pub layer_norm_eps: f64,
    /// Word pieces.
    pub vocab_size: usize,
    /// The width of the embeddings: `hidden_size` except where they are factorised (ALBERT,
    /// ELECTRA-small), then projected to `hidden_size`.
    pub embedding_size: usize,
    /// The feed-forward's activation (`gelu`, or `gelu_new`: the tanh approximation).
    pub activation: Activation,
    /// Whether every layer reads one set of weights (ALBERT).
    pub shared_layers: bool,
    /// ModernBERT's rotary positions, local attention, GeGLU and biases; none for the
    /// BERT-like families.
    pub modern: Option<ModernOptions>,
}

/// `config.json` of BERT, RoBERTa, XLM-RoBERTa, ELECTRA and ALBERT: one set of names.
#[derive(Debug, Deserialize)]
struct BertFields {
    hidden_size: usize,
    num_hidden_layers: usize,
    num_attention_heads: usize,
    intermediate_size: usize,
    #[serde(default = "default_activation")]
    hidden_act: String,
    max_position_embeddings: usize,
    #[serde(default = "default_type_vocab")]
    type_vocab_size: usize,
    #[serde(default = "default_epsilon")]
    layer_norm_eps: f64,
    vocab_size: usize,
    #[serde(default)]
    position_embedding_type: Option<String>,
    /// RoBERTa's padding id, which its position ids start after.
    #[serde(default)]
    pad_token_id: Option<usize>,
    /// ELECTRA's and ALBERT's embedding width.
    #[serde(default)]
    embedding_size: Option<usize>,
    /// ALBERT's groups of layers sharing weights (one: every layer shares one).
    #[serde(default)]
    num_hidden_groups: Option<usize>,
    /// ALBERT's layers per group (one).
    #[serde(default)]
    inner_group_num: Option<usize>,
}

/// DistilBERT's `config.json`.
#[derive(Debug, Deserialize)]
struct DistilBertFields {
    dim: usize,
    n_layers: usize,
    n_heads: usize,
    hidden_dim: usize,
    #[serde(default = "default_activation")]
    activation: String,
    max_position_embeddings: usize,
    vocab_size: usize,
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

/// DistilBERT's norms: `nn.LayerNorm(dim, eps=1e-12)` in `transformers`, not in its config.
const DISTILBERT_EPSILON: f64 = 1e-12;

/// RoBERTa's padding id where its config names none (`RobertaConfig`'s default).
const ROBERTA_PAD_ID: usize = 1;

/// The most of any one size an import accepts before allocating: BERT-large is 1024 wide
/// with 24 layers, 16 heads, 4096 feed-forward units and 30522 word pieces; XLM-R's
/// vocabulary is 250,002.
const MAX_SIZE: usize = 1 << 20;

impl CheckpointConfig {
    /// Reads `dir/config.json`.
    pub fn read(dir: &Path) -> Result<CheckpointConfig, HfError> {
        let path = dir.join("config.json");
        let text = run::small_file::read_to_string(&path, run::small_file::CONFIG_LIMIT).map_err(
            |error| HfError::Io {
                path: path.clone(),
                error,
            },
        )?;
        Self::parse(&text).map_err(|message| HfError::Config { path, message })
    }

    /// A config from the text of a `config.json`; the error says what is wrong and what
    /// would be accepted.
    pub fn parse(text: &str) -> Result<CheckpointConfig, String> {
        let value: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| format!("not a config.json (JSON object): {e}"))?;
        let model_type = value.get("model_type").and_then(|t| t.as_str());
        let family = match model_type {
            None => Family::Bert,
            Some(name) => Family::of_model_type(name).ok_or_else(|| {
                format!(
                    "model_type is {name:?}; headlab imports the encoder families {}",
                    Family::supported_list()
                )
            })?,
        };
        let architectures = match value.get("architectures") {
            None | Some(serde_json::Value::Null) => vec![],
            Some(list) => serde_json::from_value(list.clone())
                .map_err(|e| format!("architectures is not a list of class names: {e}"))?,
        };
        let not_a =
            |e: serde_json::Error| format!("not a {} config.json: {e}", family.model_type());
        let config = match family {
            Family::ModernBert => Self::of_modernbert(modernbert::parse(value)?, architectures)?,
            Family::DistilBert => {
                let fields: DistilBertFields = serde_json::from_value(value).map_err(not_a)?;
                Self::of_distilbert(fields, architectures)?
            }
            _ => {
                let fields: BertFields = serde_json::from_value(value).map_err(not_a)?;
                Self::of_bert(family, fields, architectures)?
            }
        };
        config.check()?;
        Ok(config)
    }

    fn of_bert(
        family: Family,
        fields: BertFields,
        architectures: Vec<String>,
    ) -> Result<Self, String> {
        let activation = activation_of("hidden_act", &fields.hidden_act)?;
        if let Some(kind) = &fields.position_embedding_type
            && kind != "absolute"
        {
            return Err(format!(
                "position_embedding_type is {kind:?}; headlab has learned absolute positions \
                 (\"absolute\")"
            ));
        }
        if family == Family::Electra && activation != Activation::Gelu {
            // One activation serves the feed-forward and the prediction transform; ELECTRA's
            // generator head is always the exact GELU.
            return Err(format!(
                "hidden_act is {:?}; headlab imports ELECTRA with the exact GELU (\"gelu\"), \
                 which its generator head uses whatever hidden_act says",
                fields.hidden_act
            ));
        }
        for (name, value) in [
            ("num_hidden_groups", fields.num_hidden_groups),
            ("inner_group_num", fields.inner_group_num),
        ] {
            if let Some(count) = value
                && count != 1
            {
                return Err(format!(
                    "{name} is {count}; headlab imports ALBERT with one layer group of one layer \
                     (every ALBERT checkpoint Google released: 1)"
                ));
            }
        }
        // Only ELECTRA and ALBERT read embedding_size (BERT's config class has none).
        let embedding_size = match family {
            Family::Electra | Family::Albert => fields.embedding_size.unwrap_or(fields.hidden_size),
            _ => fields.hidden_size,
        };
        let position_offset = match family.positions_after_padding() {
            true => fields
                .pad_token_id
                .unwrap_or(ROBERTA_PAD_ID)
                .saturating_add(1),
            false => 0,
        };
        Ok(Self {
            family,
            architectures,
            hidden_size: fields.hidden_size,
            num_hidden_layers: fields.num_hidden_layers,
            num_attention_heads: fields.num_attention_heads,
            intermediate_size: fields.intermediate_size,
            max_position_embeddings: fields.max_position_embeddings,
            position_offset,
            type_vocab_size: fields.type_vocab_size,
            layer_norm_eps: fields.layer_norm_eps,
            vocab_size: fields.vocab_size,
            embedding_size,
            activation,
            shared_layers: family == Family::Albert,
            modern: None,
        })
    }

    fn of_modernbert(
        parsed: modernbert::Parsed,
        architectures: Vec<String>,
    ) -> Result<Self, String> {
        let activation = activation_of("hidden_activation", &parsed.hidden_activation)?;
        if activation_of("classifier_activation", &parsed.classifier_activation)? != activation {
            return Err(format!(
                "classifier_activation is {:?} and hidden_activation {:?}; headlab's \
                 prediction transform uses the feed-forward's activation, so they must be one",
                parsed.classifier_activation, parsed.hidden_activation
            ));
        }
        Ok(Self {
            family: Family::ModernBert,
            architectures,
            hidden_size: parsed.hidden_size,
            num_hidden_layers: parsed.num_hidden_layers,
            num_attention_heads: parsed.num_attention_heads,
            intermediate_size: parsed.intermediate_size,
            max_position_embeddings: parsed.max_position_embeddings,
            position_offset: 0,
            type_vocab_size: 0,
            layer_norm_eps: parsed.norm_eps,
            vocab_size: parsed.vocab_size,
            embedding_size: parsed.hidden_size,
            activation,
            shared_layers: false,
            modern: Some(parsed.modern),
        })
    }

    fn of_distilbert(fields: DistilBertFields, architectures: Vec<String>) -> Result<Self, String> {
        let activation = activation_of("activation", &fields.activation)?;
        Ok(Self {
            family: Family::DistilBert,
            architectures,
            hidden_size: fields.dim,
            num_hidden_layers: fields.n_layers,
            num_attention_heads: fields.n_heads,
            intermediate_size: fields.hidden_dim,
            max_position_embeddings: fields.max_position_embeddings,
            position_offset: 0,
            type_vocab_size: 0,
            layer_norm_eps: DISTILBERT_EPSILON,
            vocab_size: fields.vocab_size,
            embedding_size: fields.dim,
            activation,
            shared_layers: false,
            modern: None,
        })
    }

    fn check(&self) -> Result<(), String> {
        for (name, value) in [
            ("hidden_size", self.hidden_size),
            ("num_hidden_layers", self.num_hidden_layers),
            ("num_attention_heads", self.num_attention_heads),
            ("intermediate_size", self.intermediate_size),
            ("max_position_embeddings", self.max_position_embeddings),
            ("vocab_size", self.vocab_size),
            ("embedding_size", self.embedding_size),
        ] {
            if value == 0 || value > MAX_SIZE {
                return Err(format!("{name} = {value} is out of range: 1 to {MAX_SIZE}"));
            }
        }
        // A family whose checkpoints hold a token-type table needs a row in it (ELECTRA's
        // with 0 rows used to panic while its weights were read).
        let fewest_types = usize::from(self.family.layout().token_type.is_some());
        if self.type_vocab_size < fewest_types || self.type_vocab_size > MAX_SIZE {
            return Err(format!(
                "type_vocab_size = {} is out of range: {fewest_types} to {MAX_SIZE} ({} \
                 checkpoints {} a token-type table)",
                self.type_vocab_size,
                self.family.model_type(),
                if fewest_types == 1 {
                    "hold"
                } else {
                    "may lack"
                }
            ));
        }
        if self.max_position_embeddings <= self.position_offset {
            return Err(format!(
                "max_position_embeddings = {} leaves no position: {}'s positions start at row \
                 {} (pad_token_id + 1)",
                self.max_position_embeddings,
                self.family.model_type(),
                self.position_offset
            ));
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

    /// Bytes of the float32 parameters this config describes (saturating): embeddings
    /// (and their projection where factorised), every block (once where they share
    /// weights), the masked-LM transform and bias where the checkpoint has them.
    pub fn parameter_bytes(&self) -> u128 {
        if let Some(modern) = &self.modern {
            let sizes = [
                self.hidden_size,
                self.intermediate_size,
                self.vocab_size,
                self.num_hidden_layers,
            ];
            return modernbert::parameter_bytes(sizes, self.is_masked_lm(), modern);
        }
        let [d, ff, vocab, e] = [
            self.hidden_size,
            self.intermediate_size,
            self.vocab_size,
            self.embedding_size,
        ]
        .map(|size| size as u128);
        let mut embeddings =
            (vocab + self.max_position_embeddings as u128 + self.type_vocab_size as u128 + 2) * e;
        if e != d {
            embeddings += e * d + d;
        }
        // q, k, v and output projections with biases, two norms, the feed-forward pair.
        let block = 4 * (d * d + d) + 4 * d + (d * ff + ff) + (ff * d + d);
        let blocks = match self.shared_layers {
            true => 1,
            false => self.num_hidden_layers as u128,
        };
        let head = match self.is_masked_lm() {
            true => d * e + 3 * e + vocab,
            false => 0,
        };
        (embeddings + blocks * block + head).saturating_mul(4)
    }

    /// The class the checkpoint was saved from, as `architectures` names it: the family's
    /// base model (`BertModel`) when it names none.
    pub fn architecture(&self) -> String {
        match self.is_masked_lm() {
            true => self.family.masked_lm_class(),
            false => self
                .architectures
                .first()
                .cloned()
                .unwrap_or_else(|| self.family.base_class()),
        }
    }

    /// Whether the checkpoint is its family's masked LM (it keeps its prediction head).
    pub fn is_masked_lm(&self) -> bool {
        let class = self.family.masked_lm_class();
        self.architectures.contains(&class)
    }

    /// The longest sequence the model reads: the position table's rows after the offset.
    pub fn max_positions(&self) -> usize {
        self.max_position_embeddings - self.position_offset
    }

    /// headlab's encoder config and sizes for this checkpoint.
    pub fn encoder(&self) -> (EncoderConfig, EncoderIo) {
        let layout = self.family.layout();
        let bert_like = EncoderConfig {
            d_model: self.hidden_size,
            n_layers: self.num_hidden_layers,
            n_heads: self.num_attention_heads,
            head_layout: HeadLayout::Split,
            d_head: None,
            d_ff: self.intermediate_size,
            dropout: 0.0,
            positional: PositionalKind::Learned,
            init: InitScheme::Random,
            norm_epsilon: self.layer_norm_eps,
            token_types: self.type_vocab_size,
            embedding_norm: layout.embedding_norm.is_some(),
            norm: match layout.pre_norm {
                true => NormPlacement::Pre,
                false => NormPlacement::Post,
            },
            final_norm: layout.final_norm.is_some(),
            output_transform: self.is_masked_lm(),
            embedding_size: (self.embedding_size != self.hidden_size)
                .then_some(self.embedding_size),
            activation: self.activation,
            ..EncoderConfig::default()
        };
        // ModernBERT: pre-norm with a final norm, rotary positions (one base for the global
        // layers, another for the local), GeGLU, its own biases, and a first block whose
        // attention reads the normed embeddings as they are.
        let config = match self.modern {
            None => bert_like,
            Some(modern) => EncoderConfig {
                positional: PositionalKind::Rotary,
                gated_feed_forward: true,
                biases: modern.biases,
                first_attention_norm: false,
                rotary_theta: modern.global_theta,
                local_attention: Some(modern.local),
                ..bert_like
            },
        };
        let io = EncoderIo {
            vocab_size: self.vocab_size,
            n_outputs: self.vocab_size,
            max_seq_len: self.max_positions(),
        };
        (config, io)
    }
}

/// The feed-forward activation `name` names: the exact GELU or its tanh approximation;
/// any other refused.
fn activation_of(field: &str, name: &str) -> Result<Activation, String> {
    match name {
        "gelu" => Ok(Activation::Gelu),
        "gelu_new" | "gelu_pytorch_tanh" => Ok(Activation::GeluTanh),
        other => Err(format!(
            "{field} is {other:?}; headlab's feed-forward is the exact GELU (\"gelu\") or its \
             tanh approximation (\"gelu_new\", \"gelu_pytorch_tanh\")"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROBERTA: &str = r#"{"model_type": "roberta", "architectures": ["RobertaForMaskedLM"],
        "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2,
        "intermediate_size": 16, "max_position_embeddings": 18, "type_vocab_size": 1,
        "vocab_size": 50, "pad_token_id": 1, "layer_norm_eps": 1e-5}"#;

    /// ELECTRA with `type_vocab_size = 0` panicked while its weights were read (issue 67):
    /// a family whose checkpoints hold a token-type table is refused without one, by name.
    #[test]
    fn a_token_type_table_of_no_rows_is_refused_where_the_family_has_one() {
        let electra = ROBERTA
            .replace("roberta", "electra")
            .replace("Roberta", "Electra")
            .replace("\"type_vocab_size\": 1", "\"type_vocab_size\": 0");
        let error = CheckpointConfig::parse(&electra).unwrap_err();
        assert!(
            error.contains("type_vocab_size = 0 is out of range: 1 to")
                && error.contains("electra checkpoints hold a token-type table"),
            "{error}"
        );
    }

    #[test]
    fn roberta_positions_start_after_the_padding_id() {
        let config = CheckpointConfig::parse(ROBERTA).unwrap();
        assert_eq!(config.family, Family::Roberta);
        assert_eq!((config.position_offset, config.max_positions()), (2, 16));
        assert_eq!(config.architecture(), "RobertaForMaskedLM");
        assert!(config.is_masked_lm());
        let (encoder, io) = config.encoder();
        assert_eq!((encoder.token_types, io.max_seq_len), (1, 16));
        assert_eq!(encoder.norm_epsilon, 1e-5);
    }

    #[test]
    fn factorised_embeddings_and_shared_layers_become_model_options() {
        let electra = ROBERTA
            .replace("roberta", "electra")
            .replace("RobertaForMaskedLM", "ElectraForMaskedLM")
            .replace("\"pad_token_id\": 1", "\"embedding_size\": 4");
        let config = CheckpointConfig::parse(&electra).unwrap();
        let (encoder, _) = config.encoder();
        assert_eq!(
            (encoder.embedding_size, config.shared_layers),
            (Some(4), false)
        );
        let albert = electra
            .replace("electra", "albert")
            .replace("ElectraForMaskedLM", "AlbertForMaskedLM")
            .replace(
                "\"vocab_size\"",
                "\"hidden_act\": \"gelu_new\", \"vocab_size\"",
            );
        let config = CheckpointConfig::parse(&albert).unwrap();
        let (encoder, _) = config.encoder();
        assert_eq!(encoder.activation, Activation::GeluTanh);
        assert!(config.shared_layers);
        // One block's weights, not two: d 8, ff 16, vocab 50, e 4, 18 positions, 1 type.
        let (d, ff, v, e) = (8u128, 16, 50, 4);
        let embeddings = (v + 18 + 1 + 2) * e + e * d + d;
        let block = 4 * (d * d + d) + 4 * d + (d * ff + ff) + (ff * d + d);
        let head = d * e + 3 * e + v;
        assert_eq!(config.parameter_bytes(), 4 * (embeddings + block + head));
        // A RoBERTa config's embedding_size (none of its own) changes nothing.
        let roberta = ROBERTA.replace("\"pad_token_id\": 1", "\"embedding_size\": 4");
        let (encoder, _) = CheckpointConfig::parse(&roberta).unwrap().encoder();
        assert_eq!(encoder.embedding_size, None);
    }

    #[test]
    fn distilbert_names_become_the_same_sizes_without_token_types() {
        let config = CheckpointConfig::parse(
            r#"{"model_type": "distilbert", "dim": 16, "n_layers": 2, "n_heads": 2,
                "hidden_dim": 40, "max_position_embeddings": 16, "vocab_size": 60,
                "activation": "gelu", "sinusoidal_pos_embds": false}"#,
        )
        .unwrap();
        assert_eq!(
            (
                config.hidden_size,
                config.num_hidden_layers,
                config.intermediate_size
            ),
            (16, 2, 40)
        );
        assert_eq!((config.type_vocab_size, config.layer_norm_eps), (0, 1e-12));
        assert_eq!(config.architecture(), "DistilBertModel");
    }

    #[test]
    fn what_a_family_here_does_not_implement_is_refused_by_name() {
        let refused = |text: &str| CheckpointConfig::parse(text).unwrap_err();
        let error = refused(r#"{"model_type": "gpt2"}"#);
        assert!(
            error.contains("\"gpt2\"") && error.contains("\"distilbert\""),
            "{error}"
        );
        let albert = ROBERTA
            .replace("roberta", "albert")
            .replace("\"pad_token_id\": 1", "\"num_hidden_groups\": 2");
        let error = refused(&albert);
        assert!(error.contains("num_hidden_groups is 2"), "{error}");
        let error =
            refused(&ROBERTA.replace("\"vocab_size\"", "\"hidden_act\": \"relu\", \"vocab_size\""));
        assert!(error.contains("hidden_act is \"relu\""), "{error}");
        let error = refused(&ROBERTA.replace(
            "\"max_position_embeddings\": 18",
            "\"max_position_embeddings\": 2",
        ));
        assert!(error.contains("leaves no position"), "{error}");
        let error = refused(
            r#"{"model_type": "distilbert", "dim": 16, "n_layers": 2, "n_heads": 2,
            "hidden_dim": 40, "max_position_embeddings": 16, "vocab_size": 60, "activation": "relu"}"#,
        );
        assert!(error.contains("activation is \"relu\""), "{error}");
        let error = refused(r#"{"model_type": "distilbert", "dim": 16}"#);
        assert!(
            error.starts_with("not a distilbert config.json: missing field"),
            "{error}"
        );
    }
}
