//! Named attention patterns: for each query position, the key positions a head following the
//! pattern would attend to. The inspector scores trained heads against these.

use serde::{Deserialize, Serialize};

/// An attention pattern: for each query position, the key positions a head with this pattern
/// attends to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttentionPattern {
    /// Attend to the position just before the query.
    PreviousToken,
    /// Attend to the position just after the query.
    NextToken,
    /// Attend to the query position itself.
    SelfToken,
    /// Attend to the mirrored position `len - 1 - query`.
    AntiDiagonal,
    /// Attend to every other position holding the same token as the query.
    SameToken,
    /// Attend to position 0.
    FirstToken,
    /// Attend to position `query + offset`.
    Offset(i64),
    /// Attend to the value paired with the query's key, in the associative-recall layout
    /// `k1 v1 k2 v2 ... kn vn q1 ... qm`: the position right after the first occurrence of the
    /// query's token, when that occurrence is earlier than the query and at an even position.
    /// Outside that layout the result is well defined but not meaningful.
    RecallValue,
}

impl AttentionPattern {
    /// Stable snake_case name used as a key in reports: "previous_token", "next_token", "self",
    /// "anti_diagonal", "same_token", "first_token", "offset_-2" / "offset_3", "recall_value".
    pub fn name(&self) -> String {
        match self {
            Self::PreviousToken => "previous_token".to_owned(),
            Self::NextToken => "next_token".to_owned(),
            Self::SelfToken => "self".to_owned(),
            Self::AntiDiagonal => "anti_diagonal".to_owned(),
            Self::SameToken => "same_token".to_owned(),
            Self::FirstToken => "first_token".to_owned(),
            Self::Offset(offset) => format!("offset_{offset}"),
            Self::RecallValue => "recall_value".to_owned(),
        }
    }

    /// Target key positions for query `query` in a sequence `tokens`, in ascending order; empty
    /// when the pattern says nothing for this query (e.g. previous_token at position 0,
    /// same_token when no other position holds the same token, or `query` out of range).
    /// `SameToken` means OTHER positions `j != query` with `tokens[j] == tokens[query]`.
    pub fn targets(&self, tokens: &[u32], query: usize) -> Vec<usize> {
        let len = tokens.len();
        if query >= len {
            return Vec::new();
        }
        match *self {
            Self::PreviousToken => query.checked_sub(1).into_iter().collect(),
            Self::NextToken => Some(query + 1)
                .filter(|&key| key < len)
                .into_iter()
                .collect(),
            Self::SelfToken => vec![query],
            Self::AntiDiagonal => vec![len - 1 - query],
            Self::SameToken => (0..len)
                .filter(|&key| key != query && tokens[key] == tokens[query])
                .collect(),
            Self::FirstToken => vec![0],
            Self::Offset(offset) => i64::try_from(query)
                .ok()
                .and_then(|query| query.checked_add(offset))
                .and_then(|key| usize::try_from(key).ok())
                .filter(|&key| key < len)
                .into_iter()
                .collect(),
            Self::RecallValue => {
                // Keys are distinct and come before the queries, so the first occurrence of a
                // query's token is its key; later occurrences are repeated queries, whose
                // successors are other queries rather than values.
                let key = tokens.iter().position(|&token| token == tokens[query]);
                key.filter(|&key| key < query && key % 2 == 0 && key + 1 < len)
                    .map(|key| key + 1)
                    .into_iter()
                    .collect()
            }
        }
    }

    /// The generic patterns every head is scored against: previous_token, next_token, self,
    /// anti_diagonal, same_token, first_token.
    pub fn generic() -> [AttentionPattern; 6] {
        [
            Self::PreviousToken,
            Self::NextToken,
            Self::SelfToken,
            Self::AntiDiagonal,
            Self::SameToken,
            Self::FirstToken,
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::AttentionPattern::{self, *};

    fn all_targets(pattern: AttentionPattern, tokens: &[u32]) -> Vec<Vec<usize>> {
        (0..tokens.len())
            .map(|query| pattern.targets(tokens, query))
            .collect()
    }

    #[test]
    fn names_are_stable() {
        let names: Vec<String> = AttentionPattern::generic()
            .iter()
            .map(|p| p.name())
            .collect();
        assert_eq!(
            names,
            [
                "previous_token",
                "next_token",
                "self",
                "anti_diagonal",
                "same_token",
                "first_token"
            ]
        );
        assert_eq!(Offset(-2).name(), "offset_-2");
        assert_eq!(Offset(3).name(), "offset_3");
        assert_eq!(RecallValue.name(), "recall_value");
    }

    #[test]
    fn positional_patterns() {
        let tokens = [5, 6, 7, 8];
        let none: Vec<usize> = Vec::new();
        assert_eq!(
            all_targets(PreviousToken, &tokens),
            [none.clone(), vec![0], vec![1], vec![2]]
        );
        assert_eq!(
            all_targets(NextToken, &tokens),
            [vec![1], vec![2], vec![3], none.clone()]
        );
        assert_eq!(all_targets(SelfToken, &tokens), [[0], [1], [2], [3]]);
        assert_eq!(all_targets(AntiDiagonal, &tokens), [[3], [2], [1], [0]]);
        assert_eq!(all_targets(FirstToken, &tokens), [[0], [0], [0], [0]]);
        assert_eq!(
            all_targets(Offset(-2), &tokens),
            [none.clone(), none.clone(), vec![0], vec![1]]
        );
        assert_eq!(
            all_targets(Offset(3), &tokens),
            [vec![3], none.clone(), none.clone(), none]
        );
        assert_eq!(
            all_targets(Offset(-1), &tokens),
            all_targets(PreviousToken, &tokens)
        );
        assert_eq!(
            all_targets(Offset(0), &tokens),
            all_targets(SelfToken, &tokens)
        );
    }

    #[test]
    fn same_token_excludes_the_query() {
        let tokens = [1, 2, 1, 3, 1];
        assert_eq!(
            all_targets(SameToken, &tokens),
            [vec![2, 4], vec![], vec![0, 4], vec![], vec![0, 2]]
        );
    }

    #[test]
    fn recall_value_points_at_the_paired_value() {
        // Pairs (0 -> 10), (3 -> 11), (1 -> 12); queries 3, 1, 3.
        let tokens = [0, 10, 3, 11, 1, 12, 3, 1, 3];
        let expected: [&[usize]; 9] = [&[], &[], &[], &[], &[], &[], &[3], &[5], &[3]];
        assert_eq!(all_targets(RecallValue, &tokens), expected);
    }

    #[test]
    fn out_of_range_query_has_no_targets() {
        for pattern in AttentionPattern::generic()
            .into_iter()
            .chain([Offset(1), RecallValue])
        {
            assert!(pattern.targets(&[1, 2], 2).is_empty(), "{}", pattern.name());
            assert!(pattern.targets(&[], 0).is_empty(), "{}", pattern.name());
        }
        assert!(Offset(i64::MIN).targets(&[1, 2], 1).is_empty());
        assert!(Offset(i64::MAX).targets(&[1, 2], 1).is_empty());
    }

    #[test]
    fn serde_names() {
        assert_eq!(
            serde_json::to_string(&PreviousToken).unwrap(),
            "\"previous_token\""
        );
        assert_eq!(
            serde_json::to_string(&Offset(-2)).unwrap(),
            "{\"offset\":-2}"
        );
        let back: AttentionPattern = serde_json::from_str("{\"offset\":-2}").unwrap();
        assert_eq!(back, Offset(-2));
    }
}
