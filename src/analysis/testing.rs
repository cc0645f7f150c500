//! Builders for analysis tests (re-exported from `model::build`).
pub use crate::model::build::{node, pod};
