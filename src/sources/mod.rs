//! Sources turn the outside world into `ModelEvent`s. Foreign types are
//! converted here, at the edge, and never reach the model.
//!
//! - `sim`: the embedded demo cluster (`kgpu demo`).
//! - `kube`, `file`, `agents`: live clusters, offline dumps and node agents.

pub mod agents;
pub mod file;
pub mod kinds;
pub mod kube;
pub mod sim;
