//! kgpu — a terminal cockpit for Kubernetes GPU clusters.
//!
//! Data flows one way: `sources` → `model` → `analysis` → `view_model` → `ui`;
//! commands come back through `app` → `actions`. See DESIGN.md in docs/.
// Unsafe code is denied everywhere but in the agent's NVML MIG queries
// (agent::nvml::mig_placements), which the safe wrapper does not offer.
#![deny(unsafe_code)]

pub mod actions;
pub mod agent;
pub mod analysis;
pub mod app;
pub mod cli;
pub mod clock;
pub mod config;
pub mod inputs;
pub mod lab;
pub mod model;
pub mod reference;
pub mod runtime;
pub mod sources;
pub mod ui;
pub mod view_model;
