//! kgpu — a terminal cockpit for Kubernetes GPU clusters.
//!
//! Data flows one way: `sources` → `model` → `analysis` → `view_model` → `ui`;
//! commands come back through `app` → `actions`. See DESIGN.md in docs/.
#![forbid(unsafe_code)]

pub mod actions;
pub mod analysis;
pub mod app;
pub mod cli;
pub mod config;
pub mod model;
pub mod reference;
pub mod runtime;
pub mod sources;
pub mod ui;
pub mod view_model;
