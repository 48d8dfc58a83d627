//! Drawing: everything a person looks at, from the records below it
//! ([`inspect::measures`], [`inspect::circuits`], [`inspect::interventions`]):
//!
//! - [`figures`]: the figures, PNG or SVG (plotters, through [`backend`]), also used by
//!   `sweep` for its own.
//! - [`html`]: the static `index.html`.
//! - [`units`]: the unit a page shows each field of `heads.json` in.
//! - [`explore`]: the interactive `explore.html`; [`compare_page`]: `compare.html`.
//! - [`embed`]: what both interactive pages share (JSON embedding, escaping, the
//!   `embed/page.css` and `embed/page.js` assets).

pub mod backend;
pub mod compare_page;
pub mod embed;
pub mod explore;
pub mod figures;
pub mod html;
pub mod units;
