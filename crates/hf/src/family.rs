//! The encoder families headlab imports and where each keeps its tensors.
//!
//! BERT, RoBERTa, XLM-RoBERTa, DistilBERT, ELECTRA and ALBERT are one network (learned
//! absolute positions, token embeddings normed before the first block (and projected to the
//! hidden width where they are narrower: ALBERT, ELECTRA-small), post-norm blocks of attention
//! and a GELU feed-forward, a masked-LM head of dense, GELU, norm and the tied word
//! embeddings) saved under different names. A [`Layout`] is those names; one reader
//! ([`super::tensors`]) fills headlab's [`model::Encoder`] from any of them, so a family is
//! a row of a table, not a second importer. ModernBERT is the same table's row with its
//! differences named: no position table (rotary), one fused query-key-value projection,
//! pre-norm blocks with a final norm (the first block's attention unnormed).
//! XLM-RoBERTa-XL and RoBERTa-PreLayerNorm are RoBERTa's network with pre-norm blocks and a
//! final norm, the first without an embedding norm: headlab's own default blocks, which is why
//! `headlab export` writes a pre-norm run as one of them ([`crate::export`]).

/// A family of encoders, by its `config.json`'s `model_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// `bert`: BertModel, BertForMaskedLM (and task models, whose encoder is read).
    Bert,
    /// `roberta`: BERT with byte-level BPE and position ids that start after the padding id.
    Roberta,
    /// `xlm-roberta`: RoBERTa's network with a SentencePiece vocabulary.
    XlmRoberta,
    /// `distilbert`: six layers distilled from BERT, without token types.
    DistilBert,
    /// `electra`: BERT's network trained as a discriminator (or the generator's masked LM).
    Electra,
    /// `albert`: factorised embeddings and one layer's weights shared by every layer.
    Albert,
    /// `modernbert`: rotary positions, local and global attention, GeGLU, no biases.
    ModernBert,
    /// `xlm-roberta-xl`: RoBERTa's network with pre-norm blocks, a final norm and no
    /// embedding norm.
    XlmRobertaXl,
    /// `roberta-prelayernorm`: RoBERTa's network with pre-norm blocks and a final norm.
    RobertaPreLayerNorm,
}

impl Family {
    /// Every family, in the order messages list them.
    pub const ALL: [Family; 9] = [
        Family::Bert,
        Family::Roberta,
        Family::XlmRoberta,
        Family::DistilBert,
        Family::Electra,
        Family::Albert,
        Family::ModernBert,
        Family::XlmRobertaXl,
        Family::RobertaPreLayerNorm,
    ];

    /// The family whose `model_type` is `name`.
    pub fn of_model_type(name: &str) -> Option<Family> {
        Self::ALL
            .into_iter()
            .find(|family| family.model_type() == name)
    }

    /// The `model_type` of its `config.json`.
    pub fn model_type(self) -> &'static str {
        match self {
            Family::Bert => "bert",
            Family::Roberta => "roberta",
            Family::XlmRoberta => "xlm-roberta",
            Family::DistilBert => "distilbert",
            Family::Electra => "electra",
            Family::Albert => "albert",
            Family::ModernBert => "modernbert",
            Family::XlmRobertaXl => "xlm-roberta-xl",
            Family::RobertaPreLayerNorm => "roberta-prelayernorm",
        }
    }

    /// The start of its classes' names in `transformers` (`RobertaModel`, ...).
    pub fn class_prefix(self) -> &'static str {
        match self {
            Family::Bert => "Bert",
            Family::Roberta => "Roberta",
            Family::XlmRoberta => "XLMRoberta",
            Family::DistilBert => "DistilBert",
            Family::Electra => "Electra",
            Family::Albert => "Albert",
            Family::ModernBert => "ModernBert",
            Family::XlmRobertaXl => "XLMRobertaXL",
            Family::RobertaPreLayerNorm => "RobertaPreLayerNorm",
        }
    }

    /// The base model's class (`BertModel`).
    pub fn base_class(self) -> String {
        format!("{}Model", self.class_prefix())
    }

    /// The masked-LM class (`BertForMaskedLM`), whose prediction head headlab keeps.
    pub fn masked_lm_class(self) -> String {
        format!("{}ForMaskedLM", self.class_prefix())
    }

    /// Every supported `model_type`, for messages: `"bert", "roberta", ...`.
    pub fn supported_list() -> String {
        Self::ALL
            .map(|family| format!("{:?}", family.model_type()))
            .join(", ")
    }

    /// Where its checkpoints keep each tensor.
    pub fn layout(self) -> &'static Layout {
        match self {
            Family::Bert => &BERT,
            Family::Roberta | Family::XlmRoberta => &ROBERTA,
            Family::DistilBert => &DISTILBERT,
            Family::Electra => &ELECTRA,
            Family::Albert => &ALBERT,
            Family::ModernBert => &MODERNBERT,
            Family::XlmRobertaXl => &XLM_ROBERTA_XL,
            Family::RobertaPreLayerNorm => &ROBERTA_PRELAYERNORM,
        }
    }

    /// Whether its position ids start after its padding id (RoBERTa's kind: the first word
    /// reads row `pad_token_id + 1` of the table, and padding reads row `pad_token_id`).
    pub fn positions_after_padding(self) -> bool {
        matches!(
            self,
            Family::Roberta
                | Family::XlmRoberta
                | Family::XlmRobertaXl
                | Family::RobertaPreLayerNorm
        )
    }
}

/// Where a checkpoint keeps its blocks' tensors.
#[derive(Debug, Clone, Copy)]
pub enum Blocks {
    /// One set per layer: `{prefix}.{index}.` starts layer `index`'s names.
    PerLayer(&'static str),
    /// One set every layer reads (ALBERT's one layer group of one layer): `{prefix}.`.
    Shared(&'static str),
}

impl Blocks {
    /// Where layer `index`'s names start (without the final dot).
    pub fn prefix(self, index: usize) -> String {
        match self {
            Blocks::PerLayer(prefix) => format!("{prefix}.{index}"),
            Blocks::Shared(prefix) => prefix.to_string(),
        }
    }
}

/// Where a block keeps its query, key and value projections.
#[derive(Debug, Clone, Copy)]
pub enum Qkv {
    /// Three linears, `[d, d]` each.
    Separate([&'static str; 3]),
    /// One linear, `[3 d, d]`: the queries of every head, then the keys, then the values.
    Fused(&'static str),
}

/// Where a family's checkpoint keeps each tensor, by name without its `.weight` or `.bias`.
/// Encoder names are relative to the base model: a task model (`BertForMaskedLM`) saves
/// them under `base_prefix`, a base model without it.
#[derive(Debug)]
pub struct Layout {
    /// The base model's name inside a task model (`bert.`).
    pub base_prefix: &'static str,
    /// The word embeddings, `[vocab, d]`.
    pub word: &'static str,
    /// The learned positions, `[max_positions, d]`; none with rotary positions.
    pub position: Option<&'static str>,
    /// The token-type (segment) embeddings, where the family has them.
    pub token_type: Option<&'static str>,
    /// The norm after the embeddings (none in XLM-RoBERTa-XL).
    pub embedding_norm: Option<&'static str>,
    /// Factorised embeddings' projection to the hidden width, where the config gives an
    /// embedding size unlike the hidden size.
    pub embedding_projection: Option<&'static str>,
    /// Where each block's names start.
    pub blocks: Blocks,
    /// Within a block: the query, key and value projections.
    pub qkv: Qkv,
    /// The attention's output projection.
    pub attention_output: &'static str,
    /// Whether the blocks are pre-norm (each sublayer reads its input normed; a final norm
    /// follows the last block), or post-norm (each residual sum is normed).
    pub pre_norm: bool,
    /// The attention's norm: after its residual add (post-norm), or before it (pre-norm,
    /// where the first block may have none).
    pub attention_norm: &'static str,
    /// The feed-forward's two linears.
    pub feed_forward: [&'static str; 2],
    /// The feed-forward's norm (after its residual add in post-norm, before in pre-norm).
    pub feed_forward_norm: &'static str,
    /// The norm after the last block, where the family has one.
    pub final_norm: Option<&'static str>,
    /// The masked-LM head: its dense transform and norm (GELU between them).
    pub head_transform: [&'static str; 2],
    /// The decoder's weight (absent when tied to the word embeddings, as saved) and bias.
    pub decoder: [&'static str; 2],
    /// Names under which every tensor belongs to the encoder: one left unread there would
    /// change the model, so the import refuses it.
    pub encoder_parts: &'static [&'static str],
}

const BERT: Layout = Layout {
    base_prefix: "bert.",
    word: "embeddings.word_embeddings",
    position: Some("embeddings.position_embeddings"),
    token_type: Some("embeddings.token_type_embeddings"),
    embedding_norm: Some("embeddings.LayerNorm"),
    embedding_projection: None,
    blocks: Blocks::PerLayer("encoder.layer"),
    pre_norm: false,
    qkv: Qkv::Separate([
        "attention.self.query",
        "attention.self.key",
        "attention.self.value",
    ]),
    attention_output: "attention.output.dense",
    attention_norm: "attention.output.LayerNorm",
    feed_forward: ["intermediate.dense", "output.dense"],
    feed_forward_norm: "output.LayerNorm",
    final_norm: None,
    head_transform: [
        "cls.predictions.transform.dense",
        "cls.predictions.transform.LayerNorm",
    ],
    decoder: ["cls.predictions.decoder.weight", "cls.predictions.bias"],
    encoder_parts: &["embeddings.", "encoder."],
};

/// RoBERTa and XLM-RoBERTa: BERT's encoder under `roberta.`, its own head's names.
const ROBERTA: Layout = Layout {
    base_prefix: "roberta.",
    head_transform: ["lm_head.dense", "lm_head.layer_norm"],
    decoder: ["lm_head.decoder.weight", "lm_head.bias"],
    ..BERT
};

/// ELECTRA's encoder is BERT's under `electra.`, with `embeddings_project` where the
/// embeddings are narrower (electra-small); the masked LM is the generator's head.
const ELECTRA: Layout = Layout {
    base_prefix: "electra.",
    embedding_projection: Some("embeddings_project"),
    head_transform: [
        "generator_predictions.dense",
        "generator_predictions.LayerNorm",
    ],
    decoder: ["generator_lm_head.weight", "generator_lm_head.bias"],
    encoder_parts: &["embeddings.", "encoder.", "embeddings_project."],
    ..BERT
};

const DISTILBERT: Layout = Layout {
    base_prefix: "distilbert.",
    word: "embeddings.word_embeddings",
    position: Some("embeddings.position_embeddings"),
    token_type: None,
    embedding_norm: Some("embeddings.LayerNorm"),
    embedding_projection: None,
    blocks: Blocks::PerLayer("transformer.layer"),
    pre_norm: false,
    qkv: Qkv::Separate(["attention.q_lin", "attention.k_lin", "attention.v_lin"]),
    attention_output: "attention.out_lin",
    attention_norm: "sa_layer_norm",
    feed_forward: ["ffn.lin1", "ffn.lin2"],
    feed_forward_norm: "output_layer_norm",
    final_norm: None,
    head_transform: ["vocab_transform", "vocab_layer_norm"],
    decoder: ["vocab_projector.weight", "vocab_projector.bias"],
    encoder_parts: &["embeddings.", "transformer."],
};

/// ALBERT: BERT's block names inside its one layer group, read by every layer; the
/// embeddings' projection in the encoder; the masked LM's head under `predictions`.
const ALBERT: Layout = Layout {
    base_prefix: "albert.",
    embedding_projection: Some("encoder.embedding_hidden_mapping_in"),
    blocks: Blocks::Shared("encoder.albert_layer_groups.0.albert_layers.0"),
    qkv: Qkv::Separate(["attention.query", "attention.key", "attention.value"]),
    attention_output: "attention.dense",
    attention_norm: "attention.LayerNorm",
    feed_forward: ["ffn", "ffn_output"],
    feed_forward_norm: "full_layer_layer_norm",
    head_transform: ["predictions.dense", "predictions.LayerNorm"],
    decoder: ["predictions.decoder.weight", "predictions.bias"],
    ..BERT
};

/// ModernBERT: its encoder under `model.` in the masked LM, pre-norm blocks (`attn_norm`
/// before the attention, absent in layer 0; `mlp_norm` before the GeGLU), a final norm, the
/// prediction head's dense and norm and the decoder at the top level.
const MODERNBERT: Layout = Layout {
    base_prefix: "model.",
    word: "embeddings.tok_embeddings",
    position: None,
    token_type: None,
    embedding_norm: Some("embeddings.norm"),
    embedding_projection: None,
    blocks: Blocks::PerLayer("layers"),
    pre_norm: true,
    qkv: Qkv::Fused("attn.Wqkv"),
    attention_output: "attn.Wo",
    attention_norm: "attn_norm",
    feed_forward: ["mlp.Wi", "mlp.Wo"],
    feed_forward_norm: "mlp_norm",
    final_norm: Some("final_norm"),
    head_transform: ["head.dense", "head.norm"],
    decoder: ["decoder.weight", "decoder.bias"],
    encoder_parts: &["embeddings.", "layers.", "final_norm."],
};

/// XLM-RoBERTa-XL: RoBERTa's names with pre-norm blocks (the attention's norm
/// `attention.self_attn_layer_norm`, the feed-forward's the layer's `LayerNorm`), the final
/// norm in the encoder, and no norm after the embeddings.
const XLM_ROBERTA_XL: Layout = Layout {
    embedding_norm: None,
    pre_norm: true,
    attention_norm: "attention.self_attn_layer_norm",
    feed_forward_norm: "LayerNorm",
    final_norm: Some("encoder.LayerNorm"),
    ..ROBERTA
};

/// RoBERTa-PreLayerNorm: its encoder under `roberta_prelayernorm.`, pre-norm blocks (the
/// attention's norm `attention.LayerNorm`, the feed-forward's `intermediate.LayerNorm`) and
/// the final norm at the base model's top level.
const ROBERTA_PRELAYERNORM: Layout = Layout {
    base_prefix: "roberta_prelayernorm.",
    pre_norm: true,
    attention_norm: "attention.LayerNorm",
    feed_forward_norm: "intermediate.LayerNorm",
    final_norm: Some("LayerNorm"),
    encoder_parts: &["embeddings.", "encoder.", "LayerNorm."],
    ..ROBERTA
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_is_found_by_its_model_type_and_names_its_classes() {
        for family in Family::ALL {
            assert_eq!(Family::of_model_type(family.model_type()), Some(family));
        }
        assert_eq!(Family::of_model_type("gpt2"), None);
        assert_eq!(
            Family::XlmRoberta.masked_lm_class(),
            "XLMRobertaForMaskedLM"
        );
        assert_eq!(Family::DistilBert.base_class(), "DistilBertModel");
        assert_eq!(
            Family::supported_list(),
            "\"bert\", \"roberta\", \"xlm-roberta\", \"distilbert\", \"electra\", \"albert\", \
             \"modernbert\", \"xlm-roberta-xl\", \"roberta-prelayernorm\""
        );
    }
}
