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

/// Storage for the volume filters' tests: builders of the three kinds, and
/// a snapshot's storage feeds filled as a full list would (live).
pub mod storage {
    use std::sync::Arc;

    use crate::model::storage::{
        AccessModes, ClaimPhase, NO_PROVISIONER, PersistentVolume, StorageClass, VolumeClaim, VolumePhase,
    };
    use crate::model::{
        Feed, FeedState, FeedStatus, NodeSelectorTerm, Requirement, SelectorOperator, Snapshot, StorageObject, Sym,
        keys,
    };

    pub const GI: u64 = 1 << 30;

    /// A class without a provisioner (`wffc`: WaitForFirstConsumer).
    pub fn class(name: &str, provisioner: &str, wffc: bool) -> StorageObject {
        StorageObject::Class(StorageClass {
            name: name.into(),
            provisioner: Sym::new(provisioner),
            wait_for_first_consumer: wffc,
            allowed_topologies: Box::new([]),
        })
    }

    /// `class(name, NO_PROVISIONER, false)`: static volumes bound at once.
    pub fn manual(name: &str) -> StorageObject {
        class(name, NO_PROVISIONER, false)
    }

    /// An unbound ReadWriteOnce claim in `ml`.
    pub fn claim(name: &str, class: &str, gi: u64) -> VolumeClaim {
        VolumeClaim {
            namespace: Sym::new("ml"),
            name: name.into(),
            uid: None,
            class: Some(Sym::new(class)),
            volume: None,
            bind_completed: false,
            phase: ClaimPhase::Pending,
            deleting: false,
            access_modes: AccessModes::READ_WRITE_ONCE,
            storage: gi * GI,
            block: false,
            selector: None,
            selected_node: None,
            owner_pod: None,
        }
    }

    /// `claim`, bound to `volume` as the PV controller leaves it.
    pub fn bound(name: &str, class: &str, volume: &str) -> StorageObject {
        let mut c = claim(name, class, 1);
        c.volume = Some(volume.into());
        c.bind_completed = true;
        c.phase = ClaimPhase::Bound;
        StorageObject::Claim(c)
    }

    /// An Available ReadWriteOnce volume, pinned to `host` if given.
    pub fn volume(name: &str, class: &str, gi: u64, host: Option<&str>) -> PersistentVolume {
        let node_affinity: Box<[NodeSelectorTerm]> = match host {
            Some(h) => Box::new([NodeSelectorTerm {
                expressions: Box::new([Requirement {
                    key: Sym::new(keys::HOSTNAME),
                    operator: SelectorOperator::In,
                    values: Box::new([Sym::new(h)]),
                }]),
                fields: Box::new([]),
            }]),
            None => Box::new([]),
        };
        PersistentVolume {
            name: name.into(),
            class: Some(Sym::new(class)),
            claim: None,
            phase: VolumePhase::Available,
            capacity: gi * GI,
            block: false,
            access_modes: AccessModes::READ_WRITE_ONCE,
            node_affinity,
            labels: Box::new([]),
            deleting: false,
        }
    }

    /// `snap` with these objects and its three storage feeds live.
    pub fn with(mut snap: Snapshot, objects: Vec<StorageObject>) -> Snapshot {
        for o in objects {
            snap.storage.insert(o.key(), Arc::new(o));
        }
        for feed in Feed::STORAGE {
            snap.feeds.insert(feed, FeedStatus { last_data: Some(snap.clock), ..FeedStatus::new(FeedState::Live) });
        }
        snap
    }
}
