//! What a head attends to most, in terms a reader can check against the probe: the
//! relative positions (`key - query`) and the tokens (by name: a task's tokens, or a word
//! probe's words, `[CLS]`, `[SEP]`, punctuation) that take the largest shares of its
//! attention. A head whose pattern scores name no role (`mixed`) is described by these
//! rather than left unexplained: `offset -1 0.42; [SEP] 0.35` says where its attention goes
//! without a Python script.
//!
//! A share is the attention mass a position or token receives, summed over every query of
//! the probe and divided by the number of queries: the mean fraction of a query's attention
//! it takes. The shares over all offsets (or all tokens) sum to 1.

use std::collections::BTreeMap;

use run::tensor_file::HostTensor;
use serde::{Deserialize, Serialize};

/// Offsets and tokens listed per head, the largest shares first.
pub const TOP: usize = 3;

/// A relative position and the mean share of a query's attention it takes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OffsetShare {
    /// `key - query`, in positions: -1 the previous token, 0 the token itself.
    pub offset: i64,
    /// The mean share of a query's attention on it.
    pub share: f64,
}

/// A token (by name) and the mean share of a query's attention it takes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenShare {
    /// The token's name.
    pub token: String,
    /// The mean share of a query's attention on its occurrences.
    pub share: f64,
}

/// A head's strongest attention targets (`heads.json`'s `attends_to`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttendsTo {
    /// The [`TOP`] offsets with the largest shares, largest first.
    pub offsets: Vec<OffsetShare>,
    /// The [`TOP`] tokens with the largest shares, largest first.
    pub tokens: Vec<TokenShare>,
}

impl AttendsTo {
    /// One line for a page: `offset -1 0.42, 0 0.20, +1 0.10; [SEP] 0.35, . 0.10, the 0.05`.
    pub fn describe(&self) -> String {
        let offsets: Vec<String> = self
            .offsets
            .iter()
            .map(|o| match o.offset {
                0 => format!("0 {:.2}", o.share),
                offset => format!("{offset:+} {:.2}", o.share),
            })
            .collect();
        let tokens: Vec<String> = self
            .tokens
            .iter()
            .map(|t| format!("{} {:.2}", t.token, t.share))
            .collect();
        format!("offset {}; {}", offsets.join(", "), tokens.join(", "))
    }
}

/// Head `head`'s strongest targets in `pattern` (`[batch, heads, seq, seq]`, one layer;
/// sequence `b` holds `lengths[b]` real positions, its padding neither a query nor a key),
/// `tokens` the probe's token ids row-major (`[batch * seq]`) and `names` their names by id
/// (an id without one is named by its number). Ties: the smaller `|offset|`, then the
/// smaller offset; tokens by name.
pub fn attends_to(
    pattern: &HostTensor,
    lengths: &[usize],
    head: usize,
    tokens: &[u32],
    names: Option<&[String]>,
) -> AttendsTo {
    let [batch, heads, seq, seq_k] = pattern.shape[..] else {
        panic!("strongest: a pattern is [batch, heads, seq, seq]")
    };
    assert!(seq == seq_k && head < heads && tokens.len() == batch * seq);
    assert!(lengths.len() == batch && lengths.iter().all(|&len| len <= seq));
    let mut by_offset: BTreeMap<i64, f64> = BTreeMap::new();
    let mut by_token: BTreeMap<u32, f64> = BTreeMap::new();
    for (b, &len) in lengths.iter().enumerate() {
        for q in 0..len {
            let row = ((b * heads + head) * seq + q) * seq;
            for (k, &p) in pattern.values[row..row + len].iter().enumerate() {
                *by_offset.entry(k as i64 - q as i64).or_default() += p as f64;
                *by_token.entry(tokens[b * seq + k]).or_default() += p as f64;
            }
        }
    }
    let queries = lengths.iter().sum::<usize>().max(1) as f64;
    let mut offsets: Vec<OffsetShare> = by_offset
        .into_iter()
        .map(|(offset, mass)| OffsetShare {
            offset,
            share: mass / queries,
        })
        .collect();
    offsets.sort_by(|a, b| {
        (b.share.total_cmp(&a.share))
            .then(a.offset.abs().cmp(&b.offset.abs()))
            .then(a.offset.cmp(&b.offset))
    });
    offsets.truncate(TOP);
    let name = |id: u32| {
        names
            .and_then(|names| names.get(id as usize).cloned())
            .unwrap_or_else(|| id.to_string())
    };
    let mut tokens: Vec<TokenShare> = by_token
        .into_iter()
        .map(|(id, mass)| TokenShare {
            token: name(id),
            share: mass / queries,
        })
        .collect();
    tokens.sort_by(|a, b| b.share.total_cmp(&a.share).then(a.token.cmp(&b.token)));
    tokens.truncate(TOP);
    AttendsTo { offsets, tokens }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two sequences of 4 tokens, two heads: head 0 puts 0.75 on the previous token (the
    /// first query on itself) and 0.25 on the first token; head 1 attends evenly.
    fn probe() -> (HostTensor, Vec<u32>) {
        let (batch, heads, seq) = (2, 2, 4);
        let mut values = vec![0.0f32; batch * heads * seq * seq];
        for b in 0..batch {
            for q in 0..seq {
                let row = |h: usize| ((b * heads + h) * seq + q) * seq;
                values[row(0) + q.saturating_sub(1)] += 0.75;
                values[row(0)] += 0.25;
                for k in 0..seq {
                    values[row(1) + k] = 0.25;
                }
            }
        }
        let tokens = vec![0, 1, 2, 1, 0, 2, 2, 1];
        (
            HostTensor {
                shape: vec![batch, heads, seq, seq],
                values,
            },
            tokens,
        )
    }

    /// Worked by hand. Head 0, per sequence: query 0 gives all to itself (offset 0); query 1
    /// all to position 0, the previous token and the first at once (offset -1); queries 2
    /// and 3 give 0.75 to the previous token and 0.25 to the first. Offset -1 takes
    /// (1 + 0.75 + 0.75) per sequence, over 4 queries: 0.625; offset 0, 0.25. Position 0
    /// ([CLS], id 0) takes 1 + 1 + 0.25 + 0.25 of 4: 0.625.
    #[test]
    fn shares_are_the_mean_fraction_of_a_querys_attention() {
        let (pattern, tokens) = probe();
        let names: Vec<String> = ["[CLS]", "dog", "."].map(String::from).to_vec();
        let head0 = attends_to(&pattern, &[4, 4], 0, &tokens, Some(&names));
        assert_eq!(head0.offsets[0].offset, -1);
        assert!((head0.offsets[0].share - 0.625).abs() < 1e-9);
        assert_eq!(head0.offsets[1].offset, 0);
        assert!((head0.offsets[1].share - 0.25).abs() < 1e-9);
        assert_eq!(head0.tokens[0].token, "[CLS]");
        assert!((head0.tokens[0].share - 0.625).abs() < 1e-9);
        // "." (id 2) takes 0.75 three times, "dog" once: 2.25 and 0.75 of 8 queries.
        assert_eq!(head0.tokens[1].token, ".");
        assert!((head0.tokens[1].share - 2.25 / 8.0).abs() < 1e-9);
        let total: f64 = head0.tokens.iter().map(|t| t.share).sum();
        assert!(
            (total - 1.0).abs() < 1e-9,
            "three token ids share everything"
        );
        let head1 = attends_to(&pattern, &[4, 4], 1, &tokens, None);
        // Even attention: offset 0 takes 1/4 of every query; ties go to the nearest.
        assert_eq!(head1.offsets[0].offset, 0);
        assert!((head1.offsets[0].share - 0.25).abs() < 1e-9);
        // Ids 1 and 2 each take 3 of 8 (three occurrences, each a quarter of 4 queries): a
        // tie, broken by name.
        assert_eq!(head1.tokens[0].token, "1", "unnamed ids by their numbers");
        assert_eq!(head1.tokens[1].token, "2");
        let line = head0.describe();
        assert_eq!(
            line,
            "offset -1 0.62, 0 0.25, -2 0.06; [CLS] 0.62, . 0.28, dog 0.09"
        );
    }
}
