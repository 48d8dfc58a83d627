//! Which `transformers` class holds a headlab encoder, decided from its `[model]` options
//! alone, or the option no class can hold, named.
//!
//! Three families hold headlab's blocks exactly: BERT's post-norm blocks after a normed
//! embedding; XLM-RoBERTa-XL's pre-norm blocks with a final norm and no embedding norm
//! (headlab's defaults); RoBERTa-PreLayerNorm's, the same with an embedding norm. Each has
//! learned absolute positions (a sinusoidal table is written into it, the values headlab
//! adds), query, key and value projections of `d_model` wide, biases everywhere, and a
//! masked-LM head of dense, GELU, norm and decoder: a model with a prediction transform over
//! its vocabulary is exported with that head, any other as the base model.

use model::{Activation, EncoderConfig, EncoderIo, HeadLayout, NormPlacement, PositionalKind};

use crate::family::Family;

/// Where a headlab encoder goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    /// The family whose classes hold its blocks.
    pub family: Family,
    /// Whether it is exported as the family's masked LM (its prediction transform and output
    /// layer as the head), or as the base model (the output layer left out).
    pub masked_lm: bool,
}

impl Target {
    /// The class `architectures` names (`BertForMaskedLM`, `XLMRobertaXLModel`).
    pub fn class(self) -> String {
        match self.masked_lm {
            true => self.family.masked_lm_class(),
            false => self.family.base_class(),
        }
    }
}

/// An option no `transformers` class holds, with what would be accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("model.{key} = {value}: {reason}")]
pub struct Unexportable {
    /// The `[model]` key.
    pub key: &'static str,
    /// Its value in the run's config.
    pub value: String,
    /// Why no class holds it, and what would.
    pub reason: String,
}

fn refuse(key: &'static str, value: impl ToString, reason: &str) -> Unexportable {
    Unexportable {
        key,
        value: value.to_string(),
        reason: reason.to_string(),
    }
}

/// The class that holds `config` (with the task's sizes `io`), or the first option none
/// holds. `reads_pieces`: the model reads a tokenizer's pieces, so an output layer over its
/// vocabulary is a masked LM's decoder.
pub fn target_of(
    config: &EncoderConfig,
    io: &EncoderIo,
    reads_pieces: bool,
) -> Result<Target, Unexportable> {
    check_blocks(config)?;
    let family = match (config.norm, config.embedding_norm, config.final_norm) {
        (NormPlacement::Post, true, false) => Family::Bert,
        (NormPlacement::Pre, false, true) => Family::XlmRobertaXl,
        (NormPlacement::Pre, true, true) => Family::RobertaPreLayerNorm,
        (NormPlacement::Post, false, _) => {
            return Err(refuse(
                "embedding_norm",
                false,
                "BERT, the one transformers encoder of post-norm blocks, norms its embeddings; \
                 set model.embedding_norm = true",
            ));
        }
        (NormPlacement::Post, true, true) => {
            return Err(refuse(
                "final_norm",
                true,
                "BERT's post-norm blocks have no norm after the last one; set \
                 model.final_norm = false",
            ));
        }
        (NormPlacement::Pre, _, false) => {
            return Err(refuse(
                "final_norm",
                false,
                "the transformers encoders of pre-norm blocks (XLM-RoBERTa-XL, \
                 RoBERTa-PreLayerNorm) norm the last block's output; set model.final_norm = true",
            ));
        }
    };
    // Roberta-like heads apply the exact GELU whatever the config says; BERT's applies
    // hidden_act, so either activation is held there.
    let head_fits = family == Family::Bert || config.activation == Activation::Gelu;
    let masked_lm =
        config.output_transform && reads_pieces && io.n_outputs == io.vocab_size && head_fits;
    Ok(Target { family, masked_lm })
}

/// The block options every target family shares, or the first one that differs.
fn check_blocks(config: &EncoderConfig) -> Result<(), Unexportable> {
    match config.positional {
        PositionalKind::Learned | PositionalKind::Sinusoidal => {}
        other => {
            return Err(refuse(
                "positional",
                format!("{other:?}").to_lowercase(),
                "the transformers classes headlab exports to add a table of absolute \
                 positions; \"learned\" and \"sinusoidal\" (written as a table) are held",
            ));
        }
    }
    if config.head_layout != HeadLayout::Split {
        return Err(refuse(
            "head_layout",
            config.head_layout.name(),
            "transformers' attention splits one d_model-wide projection into heads; \"split\" \
             is held",
        ));
    }
    if let Some(d_head) = config.d_head
        && d_head * config.n_heads != config.d_model
    {
        return Err(refuse(
            "d_head",
            d_head,
            "transformers' heads are d_model / n_heads wide; leave model.d_head unset",
        ));
    }
    if config
        .embedding_size
        .is_some_and(|size| size != config.d_model)
    {
        return Err(refuse(
            "embedding_size",
            config.embedding_size.unwrap_or_default(),
            "factorised embeddings are ALBERT's and ELECTRA's, whose blocks headlab does not \
             export; leave model.embedding_size unset",
        ));
    }
    if config.gated_feed_forward {
        return Err(refuse(
            "gated_feed_forward",
            true,
            "BERT's and RoBERTa's feed-forward is not gated",
        ));
    }
    if !config.biases {
        return Err(refuse(
            "biases",
            false,
            "BERT's and RoBERTa's linears and norms have biases",
        ));
    }
    if !config.first_attention_norm {
        return Err(refuse(
            "first_attention_norm",
            false,
            "every block of a transformers pre-norm encoder norms its attention's input",
        ));
    }
    if config.local_attention.is_some() {
        return Err(refuse(
            "local_attention",
            "(set)",
            "BERT's and RoBERTa's attention is global in every layer",
        ));
    }
    if config.norm == NormPlacement::Pre && config.token_types > 1 {
        return Err(refuse(
            "token_types",
            config.token_types,
            "RoBERTa's kinds hold one token type; BERT (post-norm blocks) holds more",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn io(vocab: usize, outputs: usize) -> EncoderIo {
        EncoderIo {
            vocab_size: vocab,
            n_outputs: outputs,
            max_seq_len: 16,
        }
    }

    #[test]
    fn each_block_kind_goes_to_the_family_that_holds_it() {
        let defaults = EncoderConfig::default();
        let target = target_of(&defaults, &io(20, 20), true).unwrap();
        // headlab's defaults have no prediction transform: the base model.
        assert_eq!(
            (target.family, target.class()),
            (Family::XlmRobertaXl, "XLMRobertaXLModel".to_string())
        );
        let text = EncoderConfig {
            output_transform: true,
            ..defaults.clone()
        };
        let target = target_of(&text, &io(20, 20), true).unwrap();
        assert_eq!(target.class(), "XLMRobertaXLForMaskedLM");
        // A toy task's classes are no vocabulary, and a toy reads no pieces.
        assert!(!target_of(&text, &io(20, 5), true).unwrap().masked_lm);
        assert!(!target_of(&text, &io(20, 20), false).unwrap().masked_lm);
        let bert = EncoderConfig {
            norm: NormPlacement::Post,
            embedding_norm: true,
            final_norm: false,
            activation: Activation::GeluTanh,
            ..text.clone()
        };
        assert_eq!(
            target_of(&bert, &io(20, 20), true).unwrap().class(),
            "BertForMaskedLM"
        );
        let pre_layer_norm = EncoderConfig {
            embedding_norm: true,
            ..text.clone()
        };
        assert_eq!(
            target_of(&pre_layer_norm, &io(20, 20), true)
                .unwrap()
                .family,
            Family::RobertaPreLayerNorm
        );
        // RoBERTa's heads are the exact GELU: a tanh-GELU model goes without its head.
        let tanh = EncoderConfig {
            activation: Activation::GeluTanh,
            ..text
        };
        assert!(!target_of(&tanh, &io(20, 20), true).unwrap().masked_lm);
    }

    #[test]
    fn an_option_no_class_holds_is_refused_by_its_key() {
        let refused = |config: EncoderConfig| {
            target_of(&config, &io(20, 20), true)
                .unwrap_err()
                .to_string()
        };
        let defaults = EncoderConfig::default();
        let message = refused(EncoderConfig {
            positional: PositionalKind::Rotary,
            ..defaults.clone()
        });
        assert!(
            message.starts_with("model.positional = rotary: "),
            "{message}"
        );
        let message = refused(EncoderConfig {
            final_norm: false,
            ..defaults.clone()
        });
        assert!(message.contains("set model.final_norm = true"), "{message}");
        let message = refused(EncoderConfig {
            norm: NormPlacement::Post,
            final_norm: false,
            ..defaults.clone()
        });
        assert!(
            message.starts_with("model.embedding_norm = false"),
            "{message}"
        );
        let message = refused(EncoderConfig {
            gated_feed_forward: true,
            ..defaults.clone()
        });
        assert!(message.starts_with("model.gated_feed_forward"), "{message}");
        let message = refused(EncoderConfig {
            head_layout: HeadLayout::Wide,
            ..defaults
        });
        assert!(message.starts_with("model.head_layout = wide"), "{message}");
    }
}
