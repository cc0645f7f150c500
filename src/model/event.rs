//! Kubernetes Events (FailedScheduling and others), kept in a bounded window.

use std::sync::Arc;

use super::Timestamp;
use super::sym::Sym;

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EventKey {
    pub namespace: Sym,
    pub name: Arc<str>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    Normal,
    Warning,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ClusterEvent {
    pub namespace: Sym,
    pub name: Arc<str>,
    pub kind: EventType,
    pub reason: Sym,
    /// `involvedObject` kind and name (`Pod`, `train-0`).
    pub object_kind: Sym,
    pub object_name: Arc<str>,
    pub message: Box<str>,
    pub count: u32,
    pub first: Timestamp,
    pub last: Timestamp,
    /// Reporting component (`default-scheduler`, `kgpu`, ...).
    pub source: Sym,
}

impl ClusterEvent {
    pub fn key(&self) -> EventKey {
        EventKey { namespace: self.namespace.clone(), name: self.name.clone() }
    }

    pub fn is_failed_scheduling(&self) -> bool {
        self.reason.as_str() == "FailedScheduling"
    }
}
