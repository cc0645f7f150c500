//! Persistent storage as the scheduler's volume plugins see it
//! (VolumeRestrictions, VolumeBinding, VolumeZone): the claims pods name,
//! the volumes that back them and the classes that say how they bind.
//! Compacted to what those plugins read; sizes in bytes.

use std::sync::Arc;

use super::{LabelSelector, Labels, NodeSelectorTerm, Sym, Uid};

/// Which storage object, with its namespace (claims only).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StorageKey {
    pub kind: StorageKind,
    pub namespace: Option<Sym>,
    pub name: Arc<str>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StorageKind {
    Claim,
    Volume,
    Class,
}

#[derive(Clone, Debug, PartialEq)]
pub enum StorageObject {
    Claim(VolumeClaim),
    Volume(PersistentVolume),
    Class(StorageClass),
}

impl StorageObject {
    pub fn key(&self) -> StorageKey {
        match self {
            StorageObject::Claim(c) => {
                StorageKey { kind: StorageKind::Claim, namespace: Some(c.namespace.clone()), name: c.name.clone() }
            }
            StorageObject::Volume(v) => StorageKey { kind: StorageKind::Volume, namespace: None, name: v.name.clone() },
            StorageObject::Class(c) => StorageKey { kind: StorageKind::Class, namespace: None, name: c.name.clone() },
        }
    }
}

/// Access modes as a small bit set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AccessModes(u8);

impl AccessModes {
    pub const READ_WRITE_ONCE: AccessModes = AccessModes(1);
    pub const READ_ONLY_MANY: AccessModes = AccessModes(2);
    pub const READ_WRITE_MANY: AccessModes = AccessModes(4);
    pub const READ_WRITE_ONCE_POD: AccessModes = AccessModes(8);

    /// `ReadWriteOnce`… as the API writes them; unknown ones are ignored.
    pub fn parse<'a>(modes: impl IntoIterator<Item = &'a str>) -> AccessModes {
        let mut bits = 0;
        for m in modes {
            bits |= match m {
                "ReadWriteOnce" => 1,
                "ReadOnlyMany" => 2,
                "ReadWriteMany" => 4,
                "ReadWriteOncePod" => 8,
                _ => 0,
            };
        }
        AccessModes(bits)
    }

    /// Every mode of `other` is one of these (CheckAccessModes).
    pub fn covers(self, other: AccessModes) -> bool {
        other.0 & !self.0 == 0
    }

    pub fn has(self, mode: AccessModes) -> bool {
        self.0 & mode.0 != 0
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ClaimPhase {
    #[default]
    Pending,
    Bound,
    /// Its volume was deleted.
    Lost,
}

/// A PersistentVolumeClaim.
#[derive(Clone, Debug, PartialEq)]
pub struct VolumeClaim {
    pub namespace: Sym,
    pub name: Arc<str>,
    pub uid: Option<Uid>,
    /// `spec.storageClassName` (or the beta annotation); `None` for none.
    pub class: Option<Sym>,
    /// `spec.volumeName`: the volume it is bound (or pre-bound) to.
    pub volume: Option<Arc<str>>,
    /// `pv.kubernetes.io/bind-completed`: the binding is finished.
    pub bind_completed: bool,
    pub phase: ClaimPhase,
    pub deleting: bool,
    pub access_modes: AccessModes,
    /// `spec.resources.requests.storage`, bytes.
    pub storage: u64,
    /// `volumeMode: Block`.
    pub block: bool,
    pub selector: Option<Box<LabelSelector>>,
    /// `volume.kubernetes.io/selected-node`: the scheduler chose a node
    /// for its provisioning.
    pub selected_node: Option<Sym>,
    /// The pod that controls it (a generic ephemeral volume's claim).
    pub owner_pod: Option<Uid>,
}

impl VolumeClaim {
    /// Fully bound, as the scheduler's volume binder reads it.
    pub fn is_bound(&self) -> bool {
        self.volume.is_some() && self.bind_completed
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum VolumePhase {
    #[default]
    Pending,
    Available,
    Bound,
    Released,
    Failed,
}

/// Who a volume is reserved for (`spec.claimRef`).
#[derive(Clone, Debug, PartialEq)]
pub struct ClaimRef {
    pub namespace: Sym,
    pub name: Arc<str>,
    pub uid: Option<Uid>,
}

/// A PersistentVolume.
#[derive(Clone, Debug, PartialEq)]
pub struct PersistentVolume {
    pub name: Arc<str>,
    pub class: Option<Sym>,
    pub claim: Option<ClaimRef>,
    pub phase: VolumePhase,
    pub capacity: u64,
    pub block: bool,
    pub access_modes: AccessModes,
    /// `spec.nodeAffinity.required` terms (ORed); empty when none.
    pub node_affinity: Box<[NodeSelectorTerm]>,
    /// Labels: zone and region (VolumeZone) and what claim selectors match.
    pub labels: Labels,
    pub deleting: bool,
}

/// A StorageClass.
#[derive(Clone, Debug, PartialEq)]
pub struct StorageClass {
    pub name: Arc<str>,
    pub provisioner: Sym,
    /// `volumeBindingMode: WaitForFirstConsumer`.
    pub wait_for_first_consumer: bool,
    /// `allowedTopologies` terms (ORed).
    pub allowed_topologies: Box<[TopologyTerm]>,
}

/// One `allowedTopologies` term: each key In its values, ANDed.
pub type TopologyTerm = Box<[(Sym, Box<[Sym]>)]>;

/// A claim a pod's volume names.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClaimUse {
    pub claim: Arc<str>,
    /// A generic ephemeral volume: the claim `<pod>-<volume>` its
    /// controller makes for the pod.
    pub ephemeral: bool,
}

/// The provisioner name that means "no dynamic provisioning".
pub const NO_PROVISIONER: &str = "kubernetes.io/no-provisioner";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_modes_cover_as_the_binder_checks() {
        let rwo_rwx = AccessModes::parse(["ReadWriteOnce", "ReadWriteMany"]);
        assert!(rwo_rwx.covers(AccessModes::parse(["ReadWriteOnce"])));
        assert!(!rwo_rwx.covers(AccessModes::parse(["ReadWriteOncePod"])));
        assert!(rwo_rwx.covers(AccessModes::default()), "a claim asking nothing");
        assert!(AccessModes::parse(["ReadWriteOncePod", "x"]).has(AccessModes::READ_WRITE_ONCE_POD));
    }
}
