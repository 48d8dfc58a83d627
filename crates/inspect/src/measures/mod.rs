//! Per-head measures on the probe batch and the evaluation set, built on [`crate::load`]
//! and [`crate::circuits`]:
//!
//! - [`patterns`]: entropy, confidence, distance, mass on named patterns and task targets;
//!   [`strongest`]: the offsets and tokens that take most of a head's attention.
//! - [`heads`]: one record per head (`heads.json`), gathering every measure below.
//! - [`attribution`]: direct logit attribution; [`importance`]: gradient importance and
//!   rank correlations; [`norms`]: norm-based attention.
//! - [`relations`]: dependency-relation scores on parsed sentences (word tasks), with the
//!   categories arcs count in ([`relations::categories`](mod@relations::categories)), their
//!   95% intervals over sentences (a bootstrap, [`relations::intervals`]), and masks for
//!   scoring sentences masked as in training ([`relations::masks`]).
//! - [`similarity`]: how alike two heads are; [`matching`]: heads paired across runs or
//!   snapshots by that similarity.
//! - [`divergence`] and [`trajectories`]: the same measures through a run's snapshots;
//!   [`relations_over_training`]: the relations at every snapshot of a model reading a
//!   treebank (heads chosen on EWT's development set, scored on the probe's), the held-out
//!   loss beside them, and [`onset`]: the step a figure rises fastest or a loss falls.
//! - [`logit_lens`]: each layer's residual stream read through the output layer.
//! - [`ceiling`]: the model's accuracy per class of masked word against the Bayes-optimal
//!   predictor's (word tasks); [`masked`]: the model's answers on masked words, which it
//!   and `interventions::relation_ablation` count; [`agreement`]: subject-verb agreement across
//!   attractors (word tasks); [`special`]: an imported model's attention on `[CLS]` and
//!   `[SEP]`.

pub mod agreement;
pub mod attribution;
pub mod ceiling;
pub mod divergence;
pub mod heads;
pub mod importance;
pub mod logit_lens;
pub mod masked;
pub mod matching;
pub mod norms;
pub mod onset;
pub mod patterns;
pub mod relations;
pub mod relations_over_training;
pub mod similarity;
pub mod special;
pub mod strongest;
pub mod trajectories;
