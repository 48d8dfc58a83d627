//! One file (or folder) per task kind, each implementing [`crate::generator::Generator`].
//! The sequence tasks share [`sequence`]'s generator and differ in a rule; `recall`,
//! `grammar`, `file` and `text` stand alone. A new task goes here, with a variant in
//! [`crate::task`]'s `TaskConfig` and `TaskKind`.

pub mod copy;
pub mod file;
pub mod grammar;
pub mod histogram;
pub mod neighbors;
pub mod recall;
pub mod reverse;
pub mod sequence;
pub mod shift;
pub mod sort;
pub mod text;
