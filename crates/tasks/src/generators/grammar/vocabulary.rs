//! The grammar's vocabulary as it is laid out ([`Vocabulary`]): every token's text, ids
//! handed out in order of adding, each word class's ids and inflected pairs.

use super::lexicon::{CLASSED_DITRANSITIVE_VERBS, Frame, NounClass};

use super::animate::DITRANSITIVE_VERBS;
use super::common_words::{DETERMINERS, Number};

/// The vocabulary as it is laid out: every token's text, ids handed out in order of adding.
pub(super) struct Vocabulary {
    pub(super) names: Vec<&'static str>,
}

impl Vocabulary {
    /// Adds `name`; its id.
    pub(super) fn add(&mut self, name: &'static str) -> u32 {
        self.names.push(name);
        crate::error::to_id(self.names.len() - 1)
    }

    /// Adds each (singular, plural) pair, singular first; their ids.
    pub(super) fn add_pairs(
        &mut self,
        pairs: impl IntoIterator<Item = (&'static str, &'static str)>,
    ) -> Vec<[u32; 2]> {
        pairs
            .into_iter()
            .map(|(singular, plural)| [self.add(singular), self.add(plural)])
            .collect()
    }

    /// Adds the determiners; their ids by the number of noun each goes with (one that goes
    /// with either is in both).
    pub(super) fn add_determiners(&mut self) -> (Vec<u32>, Vec<u32>) {
        let (mut singular, mut plural) = (Vec::new(), Vec::new());
        for (name, number) in DETERMINERS {
            let id = self.add(name);
            if number != Some(Number::Plural) {
                singular.push(id);
            }
            if number != Some(Number::Singular) {
                plural.push(id);
            }
        }
        (singular, plural)
    }

    /// Adds the first `count` ditransitive verbs of the classed lexicon (with their frames
    /// and their indirect objects' classes) or of the animate one (neither).
    pub(super) fn add_ditransitive_verbs(
        &mut self,
        classed: bool,
        count: usize,
    ) -> (Vec<[u32; 2]>, Vec<Frame>, Vec<&'static [NounClass]>) {
        let (mut verbs, mut frames, mut indirect) = (Vec::new(), Vec::new(), Vec::new());
        for index in 0..count {
            let (singular, plural) = if classed {
                let (s, p, frame, classes) = CLASSED_DITRANSITIVE_VERBS[index];
                frames.push(frame);
                indirect.push(classes);
                (s, p)
            } else {
                DITRANSITIVE_VERBS[index]
            };
            verbs.push([self.add(singular), self.add(plural)]);
        }
        (verbs, frames, indirect)
    }

    /// Adds the first `count` verbs of the classed list (with their frames) when there is
    /// one, else of the animate list (no frames).
    pub(super) fn add_verbs(
        &mut self,
        classed: Option<&[(&'static str, &'static str, Frame)]>,
        animate: &[(&'static str, &'static str)],
        count: usize,
    ) -> (Vec<[u32; 2]>, Vec<Frame>) {
        match classed {
            Some(list) => {
                let list = &list[..count];
                let ids = self.add_pairs(list.iter().map(|&(s, p, _)| (s, p)));
                (ids, list.iter().map(|&(_, _, frame)| frame).collect())
            }
            None => (self.add_pairs(animate[..count].iter().copied()), Vec::new()),
        }
    }
}
