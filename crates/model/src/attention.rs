//! Multi-head self-attention whose heads can be seen: scaled dot-product attention
//! (Vaswani et al. 2017, "Attention Is All You Need") in three head layouts, with optional
//! rotary positions, a per-head ablation mask, and, on request, the attention pattern and
//! the per-head outputs.

use burn::module::{Module, Param};
use burn::nn::{
    Dropout, DropoutConfig, Initializer, Linear, LinearConfig, RotaryEncoding, RotaryEncodingConfig,
};
use burn::prelude::*;
use serde::{Deserialize, Serialize};

use crate::attention_core::{CoreOutput, Qkv, attention_core, rotate, split_fused, split_headwise};
use crate::error::{ConfigError, divisors};
use crate::linear::linear_over_rows;

/// How the model width is shared between the heads of one layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HeadLayout {
    /// Every head projects the full input; `d_head = d_model / n_heads` unless set (Vaswani et al.).
    #[default]
    Split,
    /// Every head projects the full input and keeps the full width: `d_head = d_model`.
    Wide,
    /// Head `h` sees only input chunk `h` (`d_model / n_heads` wide) through its own small
    /// projections; `d_head` defaults to the chunk width.
    Narrow,
}

impl HeadLayout {
    /// The name used in config files.
    pub fn name(self) -> &'static str {
        match self {
            HeadLayout::Split => "split",
            HeadLayout::Wide => "wide",
            HeadLayout::Narrow => "narrow",
        }
    }
}

/// Configuration of a [`MultiHeadAttention`] layer.
#[derive(Debug, Clone, PartialEq)]
pub struct MultiHeadAttentionConfig {
    /// Width of the residual stream.
    pub d_model: usize,
    /// Number of heads.
    pub n_heads: usize,
    /// How the width is shared between heads. Default: [`HeadLayout::Split`].
    pub layout: HeadLayout,
    /// Explicit head size; `None` lets the layout decide. Default: `None`.
    pub d_head: Option<usize>,
    /// Dropout on the attention probabilities, in `[0, 1)`. Default: 0.
    pub dropout: f64,
    /// Rotary positions on queries and keys, with a table this many positions long.
    /// Default: `None` (no rotary positions).
    pub rotary_max_len: Option<usize>,
    /// The rotary positions' base: pair `i` of a head's dimensions turns by
    /// `position * theta^(-2i / d_head)`. Default: 10000 (RoFormer's).
    pub rotary_theta: f64,
    /// Local attention: a query sees only the keys at most this many positions away
    /// (ModernBERT's sliding window, half its `local_attention`). Default: `None` (every key).
    pub reach: Option<usize>,
    /// Whether the projections have biases. Default: true.
    pub bias: bool,
}

/// RoFormer's rotary base, Burn's default.
pub const DEFAULT_ROTARY_THETA: f64 = 10000.0;

impl MultiHeadAttentionConfig {
    /// A split-layout layer without dropout or rotary positions.
    pub fn new(d_model: usize, n_heads: usize) -> Self {
        Self {
            d_model,
            n_heads,
            layout: HeadLayout::Split,
            d_head: None,
            dropout: 0.0,
            rotary_max_len: None,
            rotary_theta: DEFAULT_ROTARY_THETA,
            reach: None,
            bias: true,
        }
    }

    /// Sets the head layout.
    pub fn with_layout(mut self, layout: HeadLayout) -> Self {
        self.layout = layout;
        self
    }

    /// Sets an explicit head size.
    pub fn with_d_head(mut self, d_head: Option<usize>) -> Self {
        self.d_head = d_head;
        self
    }

    /// Sets the dropout on attention probabilities.
    pub fn with_dropout(mut self, dropout: f64) -> Self {
        self.dropout = dropout;
        self
    }

    /// Applies rotary positions (Su et al. 2021, RoFormer) to queries and keys, per head.
    pub fn with_rotary(mut self, max_len: Option<usize>) -> Self {
        self.rotary_max_len = max_len;
        self
    }

    /// Sets the rotary positions' base ([`Self::rotary_theta`]).
    pub fn with_rotary_theta(mut self, theta: f64) -> Self {
        self.rotary_theta = theta;
        self
    }

    /// Limits every query to the keys at most `reach` positions away (local attention).
    pub fn with_reach(mut self, reach: Option<usize>) -> Self {
        self.reach = reach;
        self
    }

    /// Sets whether the projections have biases.
    pub fn with_bias(mut self, bias: bool) -> Self {
        self.bias = bias;
        self
    }

    /// The head size this configuration resolves to.
    pub fn resolved_d_head(&self) -> usize {
        match (self.layout, self.d_head) {
            (HeadLayout::Wide, _) => self.d_model,
            (_, Some(d_head)) => d_head,
            (_, None) => self.d_model / self.n_heads.max(1),
        }
    }

    /// Checks sizes, divisibility and ranges.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.d_model == 0 {
            return Err(ConfigError::ZeroSize {
                field: "model.d_model",
            });
        }
        if self.n_heads == 0 {
            return Err(ConfigError::ZeroSize {
                field: "model.n_heads",
            });
        }
        if self.d_head == Some(0) {
            return Err(ConfigError::ZeroSize {
                field: "model.d_head",
            });
        }
        let divides = self.d_model.is_multiple_of(self.n_heads);
        match self.layout {
            HeadLayout::Split if self.d_head.is_none() && !divides => {
                return Err(ConfigError::HeadsDoNotDivide {
                    n_heads: self.n_heads,
                    d_model: self.d_model,
                    layout: "split",
                    why: "each head gets d_model / n_heads dimensions",
                    divisors: divisors(self.d_model),
                    hint: ", or set model.d_head explicitly",
                });
            }
            HeadLayout::Narrow if !divides => {
                return Err(ConfigError::HeadsDoNotDivide {
                    n_heads: self.n_heads,
                    d_model: self.d_model,
                    layout: "narrow",
                    why: "head h reads input chunk h of width d_model / n_heads",
                    divisors: divisors(self.d_model),
                    hint: "",
                });
            }
            HeadLayout::Wide => {
                if let Some(d_head) = self.d_head.filter(|&d| d != self.d_model) {
                    return Err(ConfigError::WideHeadSize {
                        d_head,
                        d_model: self.d_model,
                    });
                }
            }
            _ => {}
        }
        if !(0.0..1.0).contains(&self.dropout) {
            return Err(ConfigError::Dropout {
                value: self.dropout,
            });
        }
        let d_head = self.resolved_d_head();
        if self.rotary_max_len.is_some() && !d_head.is_multiple_of(2) {
            return Err(ConfigError::OddRotaryHead { d_head });
        }
        if !(self.rotary_theta.is_finite() && self.rotary_theta > 1.0) {
            return Err(ConfigError::OutOfRange {
                field: "model.rotary_theta",
                value: crate::error::show_value(self.rotary_theta),
                accepted: "a finite number above 1 (10000 by default, ModernBERT's global \
                           layers 160000)",
            });
        }
        if self.layout == HeadLayout::Narrow && !self.bias {
            return Err(ConfigError::OutOfRange {
                field: "model.biases",
                value: "false".into(),
                accepted: "true with the narrow head layout, whose projections keep biases",
            });
        }
        Ok(())
    }

    /// Builds the layer with random weights (Burn's default Kaiming-uniform init).
    pub fn init(&self, device: &Device) -> Result<MultiHeadAttention, ConfigError> {
        self.validate()?;
        let n_heads = self.n_heads;
        let d_head = self.resolved_d_head();
        let initializer = Initializer::KaimingUniform {
            gain: 1.0 / 3.0f64.sqrt(),
            fan_out_only: false,
        };
        let (qkv, qkv_narrow) = match self.layout {
            HeadLayout::Split | HeadLayout::Wide => (
                Some(
                    LinearConfig::new(self.d_model, 3 * n_heads * d_head)
                        .with_bias(self.bias)
                        .init(device),
                ),
                None,
            ),
            HeadLayout::Narrow => {
                let d_chunk = self.d_model / n_heads;
                let weight = initializer.init_with(
                    [n_heads, d_chunk, 3 * d_head],
                    Some(d_chunk),
                    Some(3 * d_head),
                    device,
                );
                let bias = initializer.init_with(
                    [n_heads, 3 * d_head],
                    Some(d_chunk),
                    Some(3 * d_head),
                    device,
                );
                (None, Some(HeadwiseLinear { weight, bias }))
            }
        };
        Ok(MultiHeadAttention {
            qkv,
            qkv_narrow,
            output: LinearConfig::new(n_heads * d_head, self.d_model)
                .with_bias(self.bias)
                .init(device),
            dropout: DropoutConfig::new(self.dropout).init(),
            rotary: self.rotary_max_len.map(|len| {
                RotaryEncodingConfig::new(len, d_head)
                    .with_theta(self.rotary_theta as f32)
                    .init(device)
            }),
            reach: self.reach,
            layout: self.layout,
            d_model: self.d_model,
            n_heads,
            d_head,
        })
    }
}

/// One small linear map per head, applied to that head's input chunk (the narrow layout).
#[derive(Module, Debug)]
pub struct HeadwiseLinear {
    /// `[n_heads, d_chunk, 3 * d_head]`: head `h` maps chunk `h` to its q | k | v.
    pub weight: Param<Tensor<3>>,
    /// `[n_heads, 3 * d_head]`.
    pub bias: Param<Tensor<2>>,
}

/// Multi-head self-attention with inspectable heads.
///
/// Query, key and value projections are fused: in the split and wide layouts one
/// [`Linear`] maps `d_model` to `3 * n_heads * d_head` columns laid out as
/// `[q of head 0..n | k of head 0..n | v of head 0..n]`; in the narrow layout a
/// [`HeadwiseLinear`] maps each head's input chunk to its own `[q | k | v]`. The output
/// projection maps the concatenated head outputs (`n_heads * d_head`, head-major) back to
/// `d_model`. [`MultiHeadAttention::head_weights`] returns the exact slices of these
/// parameters that each head uses.
#[derive(Module, Debug)]
pub struct MultiHeadAttention {
    /// Split and wide layouts: `[d_model, 3 * n_heads * d_head]` (Burn stores `[in, out]`).
    pub qkv: Option<Linear>,
    /// Narrow layout: per-head projections of the input chunks.
    pub qkv_narrow: Option<HeadwiseLinear>,
    /// `[n_heads * d_head, d_model]`: rows `h * d_head..(h + 1) * d_head` belong to head `h`.
    pub output: Linear,
    /// Dropout on the attention probabilities.
    pub dropout: Dropout,
    /// Rotary position table, when rotary positions are on. Burn's rotates adjacent pairs
    /// of a head's dimensions (0 with 1, 2 with 3, ...); a checkpoint that rotates halves
    /// (dimension i with i + d_head / 2, as `transformers`' `rotate_half`) is imported with
    /// its query and key columns reordered to match, which leaves every score unchanged.
    pub rotary: Option<RotaryEncoding>,
    /// Local attention: a query sees only the keys at most this many positions away;
    /// none for every key.
    #[module(skip)]
    pub reach: Option<usize>,
    /// How the width is shared between heads.
    #[module(skip)]
    pub layout: HeadLayout,
    /// Width of the residual stream.
    pub d_model: usize,
    /// Number of heads.
    pub n_heads: usize,
    /// Size of each head's query, key and value.
    pub d_head: usize,
}

/// Which keys each query may not attend to; `true` marks a masked key, as in Burn.
#[derive(Debug, Clone, Default)]
pub struct AttentionMask {
    /// Padding: `[batch, seq]`, `true` where the key position is padding.
    pub pad: Option<Tensor<2, Bool>>,
    /// Arbitrary mask: `[batch, seq_q, seq_k]`, `true` where query may not see key.
    pub attn: Option<Tensor<3, Bool>>,
}

impl AttentionMask {
    /// Whether any mask is set.
    pub fn is_empty(&self) -> bool {
        self.pad.is_none() && self.attn.is_none()
    }

    /// This mask with every key more than `reach` positions from its query hidden too
    /// (local attention: ModernBERT's sliding window).
    ///
    /// # Shapes
    /// - the result's `attn`: `[batch, seq, seq]`
    pub fn within_reach(mut self, reach: usize, batch: usize, seq: usize, device: &Device) -> Self {
        let positions = Tensor::<1, Int>::arange(0..seq as i64, device);
        let query = positions.clone().reshape([seq, 1]).expand([seq, seq]);
        let key = positions.reshape([1, seq]).expand([seq, seq]);
        let far = (query - key).abs().greater_elem(reach as i64); // [seq, seq]
        let far = far.unsqueeze_dim::<3>(0).expand([batch, seq, seq]);
        self.attn = Some(match self.attn {
            Some(attn) => attn.bool_or(far),
            None => far,
        });
        self
    }
}

/// A replacement of some heads' outputs, the primitive of every intervention on a head
/// (mean and resample ablation, activation patching): where `weight` is 1 a head's output
/// is `values`, where 0 its own, in between a mix. Applied after the head mask, before the
/// output projection.
#[derive(Debug, Clone)]
pub struct HeadPatch {
    /// `[batch, seq, n_heads, d_head]`, or any shape that broadcasts to it
    /// (`[1, 1, n_heads, d_head]` for one value per head).
    pub values: Tensor<4>,
    /// `[batch, seq, n_heads, 1]`, or any shape that broadcasts to the head outputs
    /// (`[1, 1, n_heads, 1]` for whole heads).
    pub weight: Tensor<4>,
}

impl HeadPatch {
    /// `head_outputs` (`[batch, seq, n_heads, d_head]`) with the patch applied.
    pub fn apply(&self, head_outputs: Tensor<4>) -> Tensor<4> {
        let keep = self.weight.clone().neg().add_scalar(1.0);
        head_outputs * keep + self.values.clone() * self.weight.clone()
    }
}

/// One of the three inputs of a head: what its query, key or value projection reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QkvChannel {
    /// The query projection (what a position looks for).
    Query,
    /// The key projection (what a position is found by).
    Key,
    /// The value projection (what a position hands on).
    Value,
}

impl QkvChannel {
    /// The three channels, query first.
    pub const ALL: [QkvChannel; 3] = [QkvChannel::Query, QkvChannel::Key, QkvChannel::Value];

    /// `q`, `k` or `v`, as headlab writes a channel in tables.
    pub fn letter(self) -> &'static str {
        match self {
            QkvChannel::Query => "q",
            QkvChannel::Key => "k",
            QkvChannel::Value => "v",
        }
    }
}

/// Path patching's primitive inside a layer: some heads' query, key or value projections
/// read another input `x` instead of the layer's own, while every other projection reads
/// the layer's own. Where a weight is 1 a head's projection reads `x`, where 0 its own input;
/// projections are affine, so a fraction reads the same mix of the two inputs.
#[derive(Debug, Clone)]
pub struct QkvPatch {
    /// `[batch, seq, d_model]`: the other input, in the same place as the layer's own (after
    /// a pre-norm block's norm).
    pub x: Tensor<3>,
    /// `[n_heads]`: how much each head's query reads `x`.
    pub query: Tensor<1>,
    /// `[n_heads]`: how much each head's key reads `x`.
    pub key: Tensor<1>,
    /// `[n_heads]`: how much each head's value reads `x`.
    pub value: Tensor<1>,
}

impl QkvPatch {
    /// `own` projections (each `[batch, heads, seq, d_head]`) mixed with `other`, the
    /// projections of `x`, head by head as the weights say.
    fn mix(&self, own: Qkv, other: Qkv) -> Qkv {
        let mix = |own: Tensor<4>, other: Tensor<4>, weight: &Tensor<1>| {
            let [n_heads] = weight.dims();
            let weight = weight.clone().reshape([1, n_heads, 1, 1]);
            own * weight.clone().neg().add_scalar(1.0) + other * weight
        };
        (
            mix(own.0, other.0, &self.query),
            mix(own.1, other.1, &self.key),
            mix(own.2, other.2, &self.value),
        )
    }
}

/// Input of [`MultiHeadAttention::forward`].
#[derive(Debug, Clone)]
pub struct AttentionInput {
    /// `[batch, seq, d_model]`.
    pub x: Tensor<3>,
    /// Keys to ignore.
    pub mask: AttentionMask,
    /// `[n_heads]`: 1 keeps a head, 0 ablates it (its output is zeroed before the output
    /// projection); fractions scale it.
    pub head_mask: Option<Tensor<1>>,
    /// Heads' outputs replaced ([`HeadPatch`]).
    pub head_patch: Option<HeadPatch>,
    /// Heads' query, key or value inputs replaced ([`QkvPatch`]).
    pub qkv_patch: Option<QkvPatch>,
    /// Whether to return the pattern and the per-head outputs.
    pub capture: bool,
}

impl AttentionInput {
    /// Plain self-attention over `x` (`[batch, seq, d_model]`), nothing masked or captured.
    pub fn new(x: Tensor<3>) -> Self {
        Self {
            x,
            mask: AttentionMask::default(),
            head_mask: None,
            head_patch: None,
            qkv_patch: None,
            capture: false,
        }
    }

    /// Sets the key masks.
    pub fn mask(mut self, mask: AttentionMask) -> Self {
        self.mask = mask;
        self
    }

    /// Sets the head mask (`[n_heads]`, 1 keep / 0 ablate).
    pub fn head_mask(mut self, head_mask: Option<Tensor<1>>) -> Self {
        self.head_mask = head_mask;
        self
    }

    /// Sets the head patch.
    pub fn head_patch(mut self, head_patch: Option<HeadPatch>) -> Self {
        self.head_patch = head_patch;
        self
    }

    /// Sets the patch of the heads' query, key and value inputs.
    pub fn qkv_patch(mut self, qkv_patch: Option<QkvPatch>) -> Self {
        self.qkv_patch = qkv_patch;
        self
    }

    /// Asks for the attention pattern and the per-head outputs.
    pub fn capture(mut self, capture: bool) -> Self {
        self.capture = capture;
        self
    }
}

/// Output of [`MultiHeadAttention::forward`].
#[derive(Debug, Clone)]
pub struct AttentionOutput {
    /// `[batch, seq, d_model]`.
    pub context: Tensor<3>,
    /// `[batch, n_heads, seq_q, seq_k]`: softmax probabilities before dropout (rows sum to 1),
    /// when captured.
    pub pattern: Option<Tensor<4>>,
    /// `[batch, seq, n_heads, d_head]`: what each head hands to the output projection
    /// (after the head mask and the patch), when captured.
    pub head_outputs: Option<Tensor<4>>,
}

impl MultiHeadAttention {
    /// Self-attention.
    ///
    /// # Shapes
    /// - `input.x`: `[batch, seq, d_model]`
    /// - `input.mask.pad`: `[batch, seq]`; `input.mask.attn`: `[batch, seq, seq]`
    /// - `input.head_mask`: `[n_heads]`
    /// - output `context`: `[batch, seq, d_model]`; `pattern`: `[batch, n_heads, seq, seq]`;
    ///   `head_outputs`: `[batch, seq, n_heads, d_head]`
    ///
    /// # Panics
    /// If the last axis of `x` is not `d_model` or a mask's shape does not match.
    pub fn forward(&self, input: AttentionInput) -> AttentionOutput {
        let [batch, seq, d_model] = input.x.dims();
        assert_eq!(
            d_model, self.d_model,
            "attention input has d_model {d_model}, the layer expects {}",
            self.d_model
        );
        let (n_heads, d_head) = (self.n_heads, self.d_head);
        let device = input.x.device();
        let mut input = input;
        if let Some(reach) = self.reach {
            input.mask = input.mask.within_reach(reach, batch, seq, &device);
        }

        let qkv = self.project_qkv(input.x); // each [batch, heads, seq, d_head]
        let qkv = match &input.qkv_patch {
            Some(patch) => patch.mix(qkv, self.project_qkv(patch.x.clone())),
            None => qkv,
        };
        let qkv = rotate(self.rotary.as_ref(), qkv);
        let hidden = combined_mask(&input.mask, batch, seq, seq);
        let keep = self.dropout_keep([batch, n_heads, seq, seq], &device);
        let CoreOutput {
            pattern,
            mut head_outputs,
        } = attention_core(qkv, hidden, keep, input.capture); // head_outputs: [batch, seq, heads, d_head]
        if let Some(head_mask) = input.head_mask {
            assert_eq!(
                head_mask.dims(),
                [n_heads],
                "head mask must have one entry per head"
            );
            head_outputs = head_outputs * head_mask.reshape([1, 1, n_heads, 1]);
        }
        if let Some(patch) = &input.head_patch {
            head_outputs = patch.apply(head_outputs); // [batch, seq, heads, d_head]
        }
        let concatenated = head_outputs.clone().reshape([batch, seq, n_heads * d_head]);
        let context = linear_over_rows(&self.output, concatenated);

        AttentionOutput {
            context,
            pattern,
            head_outputs: input.capture.then_some(head_outputs),
        }
    }

    /// Dropout on the pattern as the fused core's `keep` tensor: 0 where dropped, else
    /// `1 / (1 - p)`, drawn by the same [`Dropout`] the composed path uses; None when
    /// dropout is off (p = 0, or no autodiff).
    fn dropout_keep(&self, shape: [usize; 4], device: &Device) -> Option<Tensor<4>> {
        (self.dropout.prob > 0.0 && device.is_autodiff())
            .then(|| self.dropout.forward(Tensor::ones(shape, device)))
    }

    /// Queries, keys and values, each `[batch, n_heads, seq, d_head]`.
    fn project_qkv(&self, x: Tensor<3>) -> Qkv {
        let [batch, seq, d_model] = x.dims();
        let n_heads = self.n_heads;
        match (&self.qkv, &self.qkv_narrow) {
            (Some(qkv), _) => {
                split_fused(linear_over_rows(qkv, x), batch, seq, n_heads, self.d_head)
            }
            (None, Some(narrow)) => {
                let d_chunk = d_model / n_heads;
                // [batch, seq, d_model] -> [heads, batch * seq, d_chunk]
                let chunks = x.reshape([batch * seq, n_heads, d_chunk]).swap_dims(0, 1);
                let qkv =
                    chunks.matmul(narrow.weight.val()) + narrow.bias.val().unsqueeze_dim::<3>(1); // [heads, batch * seq, 3 * d_head]
                let qkv = qkv.reshape([n_heads, batch, seq, 3 * self.d_head]);
                split_headwise(qkv.swap_dims(0, 1)) // from [batch, heads, seq, 3 * d_head]
            }
            (None, None) => unreachable!("attention built without input projections"),
        }
    }
}

/// The padding and attention masks as one `[batch, seq_q, seq_k]` mask (true = hidden),
/// or None if neither is set.
pub(crate) fn combined_mask(
    mask: &AttentionMask,
    batch: usize,
    seq_q: usize,
    seq_k: usize,
) -> Option<Tensor<3, Bool>> {
    let pad = mask.pad.as_ref().map(|pad| {
        assert_eq!(
            pad.dims(),
            [batch, seq_k],
            "padding mask must be [batch, seq]"
        );
        pad.clone()
            .reshape([batch, 1, seq_k])
            .expand([batch, seq_q, seq_k])
    });
    let attn = mask.attn.as_ref().map(|attn| {
        assert_eq!(
            attn.dims(),
            [batch, seq_q, seq_k],
            "attention mask must be [batch, seq_q, seq_k]"
        );
        attn.clone()
    });
    match (pad, attn) {
        (Some(pad), Some(attn)) => Some(pad.bool_or(attn)),
        (pad, attn) => pad.or(attn),
    }
}
