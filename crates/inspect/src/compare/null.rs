//! The null that roles and relation heads across seeds are read against: untrained models of
//! the compared runs, each initialised from its run's seed as its training began, measured on
//! the same probe ([`untrained_null`]). A role that untrained models have as often as trained
//! ones is a property of the architecture, not something training found.

use std::collections::{BTreeMap, BTreeSet};

use burn::prelude::*;

use crate::load::context::MeasureContext;
use crate::load::loaded_run::LoadedRun;
use crate::load::probe::Probe;
use crate::load::reading::ReadingError;
use crate::measures::heads::head_roles;
use crate::measures::relations::{RELATION_SENTENCES, Relations, measure_relations};

/// What untrained models of the runs show.
#[derive(Debug, Clone, PartialEq)]
pub struct UntrainedNull {
    /// Per layer: role -> untrained models with a head of it.
    pub roles: Vec<BTreeMap<String, usize>>,
    /// `relations.json` of each untrained model (tasks with parses only).
    pub relations: Vec<Relations>,
}

/// Every run's model as initialised from its seed, on `probe` (the reference run's, as
/// [`crate::compare::compare`] drew it): each layer's roles, and the relation scores on
/// [`RELATION_SENTENCES`] of the task's sentences.
pub fn untrained_null(runs: &[LoadedRun], probe: &Probe) -> Result<UntrainedNull, ReadingError> {
    let tokens = probe.token_ids();
    let n_layers = runs.first().map_or(0, |run| run.model.n_layers());
    let mut null = UntrainedNull {
        roles: vec![BTreeMap::new(); n_layers],
        relations: vec![],
    };
    for run in runs {
        let device = Device::flex();
        device.seed(run.resolved.config.seed);
        let model = (run.resolved.config.model)
            .init(&run.resolved.io, &device)
            .expect("a resolved config builds");
        for (layer, probed) in probe.forward(&model).iter().enumerate() {
            let roles: BTreeSet<String> = head_roles(&run.resolved.task, probed, &tokens)
                .into_iter()
                .map(|(_, role)| role)
                .collect();
            for role in roles {
                *null.roles[layer].entry(role).or_default() += 1;
            }
        }
        let context = MeasureContext {
            model: &model,
            reading: &run.reading,
            task: &run.resolved.task,
            seed: run.resolved.config.seed,
            device: &device,
            snapshots: None,
        };
        let scored = measure_relations(context, Some(RELATION_SENTENCES), None)?;
        null.relations
            .extend(scored.map(|(relations, _)| relations));
    }
    Ok(null)
}
