//! ModernBERT's `config.json` (Warner et al. 2024): rotary positions with one base for the
//! global layers and another for the local ones, sliding-window attention in all but every
//! `global_attn_every_n_layers`-th layer, a gated (GeGLU) feed-forward, pre-norm blocks with
//! a final norm, and no biases. Read in both spellings `transformers` has written: the
//! released checkpoints' (`global_attn_every_n_layers`, `global_rope_theta`,
//! `local_rope_theta`) and version 5's (`layer_types`, `rope_parameters`).

use std::collections::BTreeMap;

use model::LocalAttention;
use serde::Deserialize;

/// What ModernBERT adds to the BERT-like families' sizes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModernOptions {
    /// The global layers' rotary base (`global_rope_theta`, 160000 in the releases).
    pub global_theta: f64,
    /// The local layers: their window, how often a layer is global, and their rotary base.
    pub local: LocalAttention,
    /// Whether the linears and norms have biases (`attention_bias`, `mlp_bias`,
    /// `norm_bias`, `classifier_bias`: false in the releases).
    pub biases: bool,
    /// Whether the masked LM's decoder has a bias (`decoder_bias`).
    pub decoder_bias: bool,
}

/// ModernBERT's `config.json`, both spellings.
#[derive(Debug, Deserialize)]
struct Fields {
    hidden_size: usize,
    num_hidden_layers: usize,
    num_attention_heads: usize,
    intermediate_size: usize,
    max_position_embeddings: usize,
    vocab_size: usize,
    #[serde(default = "gelu")]
    hidden_activation: String,
    #[serde(default = "gelu")]
    classifier_activation: String,
    #[serde(default = "default_epsilon")]
    norm_eps: f64,
    #[serde(default = "default_window")]
    local_attention: usize,
    #[serde(default)]
    global_attn_every_n_layers: Option<usize>,
    #[serde(default)]
    layer_types: Option<Vec<String>>,
    #[serde(default)]
    global_rope_theta: Option<f64>,
    #[serde(default)]
    local_rope_theta: Option<f64>,
    #[serde(default)]
    rope_parameters: Option<BTreeMap<String, RopeParameters>>,
    #[serde(default)]
    attention_bias: bool,
    #[serde(default)]
    mlp_bias: bool,
    #[serde(default)]
    norm_bias: bool,
    #[serde(default)]
    classifier_bias: bool,
    #[serde(default = "yes")]
    decoder_bias: bool,
}

/// One entry of version 5's `rope_parameters`.
#[derive(Debug, Deserialize)]
struct RopeParameters {
    rope_theta: f64,
    #[serde(default = "default_rope")]
    rope_type: String,
}

fn gelu() -> String {
    "gelu".into()
}
fn default_epsilon() -> f64 {
    1e-5
}
fn default_window() -> usize {
    128
}
fn yes() -> bool {
    true
}
fn default_rope() -> String {
    "default".into()
}

/// `ModernBertConfig`'s defaults where a config names no base.
const GLOBAL_THETA: f64 = 160_000.0;
const LOCAL_THETA: f64 = 10_000.0;
const GLOBAL_EVERY: usize = 3;

/// A ModernBERT `config.json`'s sizes in BERT's names, its activations as written (checked
/// by the caller, which knows every family's), and its own options.
#[derive(Debug)]
pub(super) struct Parsed {
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    pub max_position_embeddings: usize,
    pub vocab_size: usize,
    pub norm_eps: f64,
    pub hidden_activation: String,
    pub classifier_activation: String,
    pub modern: ModernOptions,
}

/// Reads a ModernBERT `config.json` value.
pub(super) fn parse(value: serde_json::Value) -> Result<Parsed, String> {
    let fields: Fields =
        serde_json::from_value(value).map_err(|e| format!("not a modernbert config.json: {e}"))?;
    let modern = ModernOptions {
        global_theta: theta(&fields, "full_attention")?,
        local: LocalAttention {
            window: fields.local_attention,
            global_every: global_every(&fields)?,
            rotary_theta: Some(theta(&fields, "sliding_attention")?),
        },
        biases: biases(&fields)?,
        decoder_bias: fields.decoder_bias,
    };
    Ok(Parsed {
        hidden_size: fields.hidden_size,
        num_hidden_layers: fields.num_hidden_layers,
        num_attention_heads: fields.num_attention_heads,
        intermediate_size: fields.intermediate_size,
        max_position_embeddings: fields.max_position_embeddings,
        vocab_size: fields.vocab_size,
        norm_eps: fields.norm_eps,
        hidden_activation: fields.hidden_activation,
        classifier_activation: fields.classifier_activation,
        modern,
    })
}

/// Bytes of a ModernBERT's float32 parameters (saturating): the word embeddings, every
/// block (fused q, k, v; output; the GeGLU's doubled first linear), the norms, the
/// masked-LM head and decoder bias where the checkpoint has them.
///
/// `sizes`: the width, the feed-forward width, the vocabulary and the layers.
pub(super) fn parameter_bytes(sizes: [usize; 4], masked_lm: bool, modern: &ModernOptions) -> u128 {
    let [d, ff, vocab, layers] = sizes.map(|size| size as u128);
    let norm = if modern.biases { 2 * d } else { d };
    let bias = |width: u128| if modern.biases { width } else { 0 };
    let block = (3 * d * d + bias(3 * d))
        + (d * d + bias(d))
        + (d * 2 * ff + bias(2 * ff))
        + (ff * d + bias(d))
        + 2 * norm;
    let head = match masked_lm {
        true => d * d + bias(d) + norm + vocab,
        false => 0,
    };
    (vocab * d + norm + layers * block + norm + head).saturating_mul(4)
}

/// The rotary base of the layers of `kind` (`full_attention` or `sliding_attention`).
fn theta(fields: &Fields, kind: &str) -> Result<f64, String> {
    if let Some(parameters) = &fields.rope_parameters {
        let entry = parameters.get(kind).ok_or_else(|| {
            format!("rope_parameters has no {kind:?} entry; headlab needs the base of each kind")
        })?;
        if entry.rope_type != "default" {
            return Err(format!(
                "rope_parameters.{kind}.rope_type is {:?}; headlab's rotary positions are \
                 the unscaled RoFormer ones (\"default\")",
                entry.rope_type
            ));
        }
        return Ok(entry.rope_theta);
    }
    Ok(match kind {
        "full_attention" => fields.global_rope_theta.unwrap_or(GLOBAL_THETA),
        _ => fields.local_rope_theta.unwrap_or(LOCAL_THETA),
    })
}

/// How often a layer is global: `global_attn_every_n_layers`, or read from `layer_types`,
/// which must then be ModernBERT's pattern (layer `i` global when `i` is a multiple of it).
fn global_every(fields: &Fields) -> Result<usize, String> {
    let Some(types) = &fields.layer_types else {
        return match fields.global_attn_every_n_layers.unwrap_or(GLOBAL_EVERY) {
            0 => Err("global_attn_every_n_layers is 0; it must be 1 or more".into()),
            every => Ok(every),
        };
    };
    if types.len() != fields.num_hidden_layers {
        return Err(format!(
            "layer_types lists {} layers and num_hidden_layers is {}",
            types.len(),
            fields.num_hidden_layers
        ));
    }
    if let Some(other) = types
        .iter()
        .find(|t| *t != "full_attention" && *t != "sliding_attention")
    {
        return Err(format!(
            "layer_types has {other:?}; headlab reads \"full_attention\" and \
             \"sliding_attention\""
        ));
    }
    let global: Vec<usize> = (0..types.len())
        .filter(|&i| types[i] == "full_attention")
        .collect();
    // The second global layer's index is the period; one global layer: no other is.
    let every = global.get(1).copied().unwrap_or(types.len().max(1));
    let pattern = LocalAttention {
        window: fields.local_attention,
        global_every: every,
        rotary_theta: None,
    };
    match (0..types.len()).all(|i| pattern.is_local(i) == (types[i] == "sliding_attention")) {
        true => Ok(every),
        false => Err(format!(
            "layer_types is {types:?}; headlab reads ModernBERT's pattern, a global layer \
             every n layers from layer 0 (global_attn_every_n_layers)"
        )),
    }
}

/// Whether the model has biases: ModernBERT's four flags, which headlab's one option needs
/// to agree.
fn biases(fields: &Fields) -> Result<bool, String> {
    let flags = [
        ("attention_bias", fields.attention_bias),
        ("mlp_bias", fields.mlp_bias),
        ("norm_bias", fields.norm_bias),
        ("classifier_bias", fields.classifier_bias),
    ];
    match flags.iter().all(|(_, on)| *on == flags[0].1) {
        true => Ok(flags[0].1),
        false => Err(format!(
            "{}; headlab imports ModernBERT with biases everywhere or nowhere (the released \
             checkpoints: nowhere)",
            flags.map(|(name, on)| format!("{name} is {on}")).join(", ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::super::config::CheckpointConfig;

    /// The released checkpoints' spelling (answerdotai/ModernBERT-base's keys, small sizes).
    const RELEASED: &str = r#"{"model_type": "modernbert", "architectures": ["ModernBertForMaskedLM"],
        "hidden_size": 16, "num_hidden_layers": 4, "num_attention_heads": 2,
        "intermediate_size": 24, "max_position_embeddings": 64, "vocab_size": 50,
        "global_attn_every_n_layers": 3, "global_rope_theta": 160000.0,
        "local_rope_theta": 10000.0, "local_attention": 8, "hidden_activation": "gelu",
        "norm_eps": 1e-05, "attention_bias": false, "mlp_bias": false, "norm_bias": false,
        "classifier_bias": false, "decoder_bias": true}"#;

    /// transformers 5's spelling of the same model.
    const VERSION_5: &str = r#"{"model_type": "modernbert", "architectures": ["ModernBertForMaskedLM"],
        "hidden_size": 16, "num_hidden_layers": 4, "num_attention_heads": 2,
        "intermediate_size": 24, "max_position_embeddings": 64, "vocab_size": 50,
        "layer_types": ["full_attention", "sliding_attention", "sliding_attention",
                        "full_attention"],
        "rope_parameters": {"full_attention": {"rope_theta": 160000.0, "rope_type": "default"},
                            "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"}},
        "local_attention": 8, "norm_eps": 1e-05}"#;

    #[test]
    fn both_spellings_give_one_model() {
        let released = CheckpointConfig::parse(RELEASED).unwrap();
        assert_eq!(released, CheckpointConfig::parse(VERSION_5).unwrap());
        let modern = released.modern.unwrap();
        assert_eq!(
            (
                modern.global_theta,
                modern.local.global_every,
                modern.local.window
            ),
            (160_000.0, 3, 8)
        );
        assert_eq!(modern.local.rotary_theta, Some(10_000.0));
        assert!(!modern.biases && modern.decoder_bias);
        assert_eq!(released.max_positions(), 64);
        let (encoder, io) = released.encoder();
        assert_eq!(
            (encoder.positional, encoder.norm, encoder.final_norm),
            (
                model::PositionalKind::Rotary,
                model::NormPlacement::Pre,
                true
            )
        );
        assert!(encoder.gated_feed_forward && !encoder.biases && !encoder.first_attention_norm);
        assert_eq!((encoder.token_types, io.max_seq_len), (0, 64));
        // Sizes: no position table, the GeGLU's first linear twice as wide, one norm
        // weight (no bias) each, the head's dense and norm and the decoder's bias.
        let (d, ff, v) = (16u128, 24, 50);
        let block = 3 * d * d + d * d + 2 * d * ff + ff * d + 2 * d;
        let head = d * d + d + v;
        assert_eq!(
            released.parameter_bytes(),
            4 * (v * d + d + 4 * block + d + head)
        );
    }

    #[test]
    fn what_headlab_does_not_implement_is_refused_by_name() {
        let refused = |text: String| CheckpointConfig::parse(&text).unwrap_err();
        let error = refused(RELEASED.replace("\"mlp_bias\": false", "\"mlp_bias\": true"));
        assert!(
            error.contains("mlp_bias is true") && error.contains("everywhere or nowhere"),
            "{error}"
        );
        let error = refused(VERSION_5.replace(
            "\"rope_theta\": 10000.0, \"rope_type\": \"default\"",
            "\"rope_theta\": 10000.0, \"rope_type\": \"yarn\"",
        ));
        assert!(error.contains("rope_type is \"yarn\""), "{error}");
        let error = refused(VERSION_5.replace(
            "\"sliding_attention\", \"sliding_attention\"",
            "\"full_attention\", \"sliding_attention\"",
        ));
        assert!(error.contains("global layer every n layers"), "{error}");
        let error = refused(RELEASED.replace(
            "\"hidden_activation\": \"gelu\"",
            "\"hidden_activation\": \"gelu\", \"classifier_activation\": \"silu\"",
        ));
        assert!(
            error.contains("classifier_activation is \"silu\""),
            "{error}"
        );
        let error = refused(RELEASED.replace(
            "\"global_attn_every_n_layers\": 3",
            "\"global_attn_every_n_layers\": 0",
        ));
        assert!(error.contains("global_attn_every_n_layers is 0"), "{error}");
    }
}
