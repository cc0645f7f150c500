//! Support code shared by the live test binaries.
#![allow(dead_code)]

pub mod actions;
pub mod controlplane;
pub mod exporter;
pub mod kube;
pub mod tmux;
