//! Sources turn the outside world into `ModelEvent`s. Foreign types are
//! converted here, at the edge, and never reach the model.
//!
//! - `sim`: the embedded demo cluster (`kgpu demo`).
//! - `kube`, `file`, `agents`, `dcgm`: live clusters, offline dumps, node
//!   agents and NVIDIA's dcgm-exporter; `poll`: how the last two are found
//!   and read within a request budget.

pub mod agents;
pub mod bounded_value;
pub mod dcgm;
pub mod dcgm_series;
pub mod file;
pub mod http_get;
pub mod kinds;
pub mod kube;
pub mod kubectl_yaml;
pub mod poll;
pub mod prometheus;
pub mod sim;
