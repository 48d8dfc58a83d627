//! The model against the task's ceiling (word tasks): on one set of masked examples, the
//! model's accuracy per class of masked word beside the Bayes-optimal predictor's
//! ([`tasks::Task::ceiling`]), so that an accuracy reads as a fraction of what the
//! task allows. `ceiling.json`.

use std::collections::BTreeMap;

use burn::prelude::*;
use model::Encoder;
use serde::{Deserialize, Serialize};
use tasks::batch::mix_seed;
use tasks::{Example, Task, WordClass};

use crate::load::context::MeasureContext;
use crate::measures::masked::{masked_targets, right_answers};

/// Masked examples the ceiling is measured on: about 1400 masked words with the default
/// grammar, standard errors of 0.01 to 0.03 per class; 0.5 s for the default grammar and
/// 3 s for the classed one on this machine.
pub const CEILING_EXAMPLES: usize = 1000;

/// Stream of the examples, apart from training, evaluation, the probe, the relations and
/// the minimal pairs (`u64::MAX - 3` and `- 4`).
const CEILING_STREAM: u64 = u64::MAX - 5;

/// `ceiling.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ceiling {
    /// Masked examples drawn.
    pub examples: usize,
    /// Per class of masked word, in a fixed order; classes never masked are left out.
    pub classes: Vec<ClassAgainstCeiling>,
    /// Over every masked word: the Bayes-optimal accuracy.
    pub ceiling: f64,
    /// Over every masked word: the model's accuracy.
    pub model: f64,
}

/// One class of masked word.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClassAgainstCeiling {
    /// `determiner`, `noun`, `verb`, `adjective`, `preposition` or `relative`.
    pub class: WordClass,
    /// Masked words of the class.
    pub masked: usize,
    /// The Bayes-optimal predictor's expected accuracy on them.
    pub ceiling: f64,
    /// Its standard error.
    pub ceiling_standard_error: f64,
    /// The model's accuracy on them (its most probable class right).
    pub model: f64,
    /// Its standard error, `sqrt(model (1 - model) / masked)`: the realized right and wrong
    /// answers are noisier than the ceiling's expected ones, so compare the two with this.
    pub model_standard_error: f64,
    /// `model / ceiling` (null when the ceiling is 0).
    pub fraction_of_ceiling: Option<f64>,
}

/// The model against the ceiling on `task`'s masked examples seeded from `seed`; `None`
/// for tasks without a ceiling (every task but `grammar`), and for a model whose outputs are
/// not the task's own classes (an imported one predicts word pieces).
pub fn ceiling(context: MeasureContext) -> Option<Ceiling> {
    let MeasureContext {
        model,
        reading,
        task,
        seed,
        device,
        ..
    } = context;
    if !reading.outputs_task_classes() {
        return None;
    }
    let seed = mix_seed(seed, CEILING_STREAM);
    let bayes = task.ceiling(CEILING_EXAMPLES, seed);
    if bayes.is_empty() {
        return None;
    }
    let examples = task.eval_set(CEILING_EXAMPLES, seed);
    let right = model_right_by_class(model, task, &examples, device);
    let total: usize = bayes.iter().map(|c| c.masked).sum();
    let classes: Vec<ClassAgainstCeiling> = bayes
        .iter()
        .map(|c| {
            let (correct, masked) = right.get(&c.class).copied().unwrap_or((0, 0));
            let model = correct as f64 / masked.max(1) as f64;
            ClassAgainstCeiling {
                class: c.class,
                masked: c.masked,
                ceiling: c.accuracy,
                ceiling_standard_error: c.standard_error,
                model,
                model_standard_error: (model * (1.0 - model) / masked.max(1) as f64).sqrt(),
                fraction_of_ceiling: (c.accuracy > 0.0).then(|| model / c.accuracy),
            }
        })
        .collect();
    let weighted = |f: fn(&ClassAgainstCeiling) -> f64| {
        classes.iter().map(|c| f(c) * c.masked as f64).sum::<f64>() / total.max(1) as f64
    };
    Some(Ceiling {
        examples: CEILING_EXAMPLES,
        ceiling: weighted(|c| c.ceiling),
        model: weighted(|c| c.model),
        classes,
    })
}

/// Per class of masked word: (the model's right answers, masked words).
fn model_right_by_class(
    model: &Encoder,
    task: &Task,
    examples: &[Example],
    device: &Device,
) -> BTreeMap<WordClass, (usize, usize)> {
    let mut counts: BTreeMap<WordClass, (usize, usize)> = BTreeMap::new();
    let right = right_answers(model, examples, None, device);
    for ((_, _, target), right) in masked_targets(examples).zip(right) {
        if let Some(class) = task.word_class(target) {
            let entry = counts.entry(class).or_default();
            entry.0 += usize::from(right);
            entry.1 += 1;
        }
    }
    counts
}
