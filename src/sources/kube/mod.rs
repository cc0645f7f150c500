//! The live source: kube-rs clients and watchers for a real cluster.

pub mod client;
