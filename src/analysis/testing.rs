//! Builders for analysis tests (re-exported from `model::build`) and a
//! snapshot from plain lists.
pub use crate::model::build::{node, pod, podgroup};

use crate::model::{Cluster, Gang, ModelEvent, Node, Object, Pod, Snapshot, SourceInfo, SourceKind, Timestamp};

/// A snapshot of these objects at `now`.
pub fn snapshot(nodes: Vec<Node>, pods: Vec<Pod>, gangs: Vec<Gang>, now: Timestamp) -> Snapshot {
    let mut c = Cluster::new(SourceInfo { kind: SourceKind::Demo, name: "test".into() });
    c.apply(ModelEvent::Clock(now));
    c.apply_all(nodes.into_iter().map(|n| ModelEvent::Upsert(Object::Node(n))));
    c.apply_all(gangs.into_iter().map(|g| ModelEvent::Upsert(Object::Gang(g))));
    c.apply_all(pods.into_iter().map(|p| ModelEvent::Upsert(Object::Pod(p))));
    c.snapshot()
}
