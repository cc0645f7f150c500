//! The live source: kube-rs clients and watchers for a real cluster.

pub mod apply;
pub mod client;
pub mod convert;
pub mod lean;
pub mod manifest;
pub mod pages;
pub mod stream;
pub mod watch;
