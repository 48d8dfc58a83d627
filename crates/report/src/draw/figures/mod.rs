//! The report's figures, PNG or SVG, drawn with plotters ([`canvas`]: the canvas, the
//! embedded DejaVu Sans, so figures look the same on every machine and need no system fonts,
//! and the shapes most figures share). One file per family of figures; a new figure goes in
//! its family's file, or a new one here.
//!
//! - [`attention`]: `attention_L*.png` (patterns on probe sequences) and `rollout.png`.
//! - [`similarity`](mod@similarity), `similarity.png`.
//! - [`relations`](mod@relations), `relations.png`.
//! - [`circuits`](mod@circuits): `composition.png`, `circuits.png`, `norms.png`.
//! - [`causal`]: `patching.png`, `paths.png`.
//! - [`curves`]: `divergence.png`, `trajectories.png`, `ablation.png`, `pruning.png`,
//!   `training.png`.

pub mod attention;
pub mod canvas;
pub mod causal;
pub mod circuits;
pub mod curves;
pub mod relations;
pub mod similarity;

pub use attention::{PatternFigure, attention_patterns, rollout};
pub use canvas::{Area, DrawResult, FONT, FigureError, MAX_FIGURE_PIXELS, render, token_labels};
pub use causal::{patching, paths};
pub use circuits::{NORM_POINTS, NormPanel, circuits, composition, norms};
pub use curves::{
    ablation, divergence, pruning, relations_over_training, tick_label, training, trajectories,
};
pub use relations::relations;
pub use similarity::similarity;
