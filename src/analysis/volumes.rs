//! kube-scheduler v1.36's volume filters, in its order: VolumeRestrictions
//! (a ReadWriteOncePod claim another pod uses), VolumeBinding (claims that
//! must exist and be bound, a bound volume's node affinity, a
//! WaitForFirstConsumer claim's matching volume or provisioner topology)
//! and VolumeZone (a bound volume's zone labels). Read from
//! `volumerestrictions/`, `volumebinding/binder.go` and `volumezone/` and
//! component-helpers' `FindMatchingVolume`.
//!
//! What is not modelled: CSI storage capacity ("did not have enough free
//! storage"), the attach limits of NodeVolumeLimits, in-tree disk
//! conflicts (the same GCE PD or EBS volume twice on a node) and the CSI
//! translation of in-tree volumes' topology. The scheduler's word stands
//! for those (the pending chain's honesty rule).

use std::sync::Arc;

use crate::model::node::label_value;
use crate::model::storage::{
    AccessModes, ClaimPhase, NO_PROVISIONER, PersistentVolume, StorageClass, VolumeClaim, VolumePhase,
};
use crate::model::{ClaimUse, Feed, FeedState, Node, StorageKey, StorageKind, StorageObject, Sym, Uid, keys};

use super::fit::{self, NodeReason};
use super::index::Index;

/// A whole-pod refusal: a PreFilter that stops the pod before any node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// A claim its volume names does not exist.
    ClaimMissing(Arc<str>),
    /// A generic ephemeral volume's claim is not made yet.
    EphemeralNotCreated(Arc<str>),
    /// A claim with an ephemeral volume's name belongs to another pod.
    EphemeralNotOwned(Arc<str>),
    /// The claim's volume was deleted (phase Lost).
    ClaimLost {
        claim: Arc<str>,
        volume: Arc<str>,
    },
    ClaimDeleting(Arc<str>),
    /// Claims that bind at once (Immediate, no class, a missing class, or
    /// pre-bound to a volume) and are not bound yet.
    UnboundImmediate(Vec<Arc<str>>),
    /// A bound claim's volume does not exist (VolumeZone's PreFilter).
    VolumeMissing {
        claim: Arc<str>,
        volume: Arc<str>,
    },
}

impl Refusal {
    /// The scheduler's words, as v1.36 writes them.
    pub fn scheduler_text(&self, namespace: Sym, pod: &str) -> String {
        match self {
            Refusal::ClaimMissing(c) => format!("persistentvolumeclaim \"{c}\" not found"),
            Refusal::EphemeralNotCreated(c) => {
                format!("waiting for ephemeral volume controller to create the persistentvolumeclaim \"{c}\"")
            }
            Refusal::EphemeralNotOwned(c) => {
                format!("PVC {namespace}/{c} was not created for pod {namespace}/{pod} (pod is not owner)")
            }
            Refusal::ClaimLost { claim, volume } => {
                format!("persistentvolumeclaim \"{claim}\" bound to non-existent persistentvolume \"{volume}\"")
            }
            Refusal::ClaimDeleting(c) => format!("persistentvolumeclaim \"{c}\" is being deleted"),
            Refusal::UnboundImmediate(_) => "pod has unbound immediate PersistentVolumeClaims".into(),
            Refusal::VolumeMissing { volume, .. } => format!("persistentvolume \"{volume}\" not found"),
        }
    }

    pub fn plugin(&self) -> &'static str {
        match self {
            Refusal::ClaimMissing(_) => "VolumeRestrictions",
            Refusal::VolumeMissing { .. } => "VolumeZone",
            _ => "VolumeBinding",
        }
    }
}

/// A WaitForFirstConsumer claim still to bind, with the volumes that could
/// take it wherever the node (class, size, mode, owner already checked).
#[derive(Clone, Debug)]
struct Delayed<'a> {
    claim: &'a VolumeClaim,
    class: &'a StorageClass,
    /// A volume reserved for this claim (`claimRef`): the only answer.
    reserved: Option<&'a PersistentVolume>,
    candidates: Vec<&'a PersistentVolume>,
}

/// The per-node half of the volume filters for one pod.
#[derive(Clone, Debug, Default)]
pub struct VolumeCheck<'a> {
    /// ReadWriteOncePod claims of the pod that another pod uses.
    pub in_use: Vec<(Arc<str>, crate::model::PodKey)>,
    /// Bound claims and their volumes (`None`: the volume is gone).
    pub bound: Vec<(&'a VolumeClaim, Option<&'a PersistentVolume>)>,
    delayed: Vec<Delayed<'a>>,
    /// Zone and region labels of bound volumes: (key, values, volume).
    zones: Vec<(Sym, Vec<&'a str>, Arc<str>)>,
}

/// What the volume filters make of a pod before any node.
#[derive(Clone, Debug)]
pub enum Prepared<'a> {
    /// No claims: the volume filters skip it.
    Nothing,
    /// kgpu cannot read the storage objects the filters need (a feed
    /// forbidden, not served, not in the files, still listing): not
    /// evaluated, and why.
    Unreadable(String),
    Refused(Refusal),
    Check(VolumeCheck<'a>),
}

/// The storage object of this kind and name, if kgpu has it.
fn lookup<'a>(
    index: &Index<'a>,
    kind: StorageKind,
    namespace: Option<Sym>,
    name: Arc<str>,
) -> Option<&'a StorageObject> {
    index.snap.storage.get(&StorageKey { kind, namespace, name }).map(|o| &**o)
}

pub fn claim<'a>(index: &Index<'a>, namespace: Sym, name: &Arc<str>) -> Option<&'a VolumeClaim> {
    match lookup(index, StorageKind::Claim, Some(namespace), name.clone())? {
        StorageObject::Claim(c) => Some(c),
        _ => None,
    }
}

fn volume<'a>(index: &Index<'a>, name: &Arc<str>) -> Option<&'a PersistentVolume> {
    match lookup(index, StorageKind::Volume, None, name.clone())? {
        StorageObject::Volume(v) => Some(v),
        _ => None,
    }
}

fn class<'a>(index: &Index<'a>, name: Sym) -> Option<&'a StorageClass> {
    match lookup(index, StorageKind::Class, None, Arc::from(name.as_str()))? {
        StorageObject::Class(c) => Some(c),
        _ => None,
    }
}

/// Why the storage feeds cannot be trusted, if they cannot: each must
/// have delivered a full list (live, or stale while reconnecting).
fn unreadable(index: &Index<'_>) -> Option<String> {
    Feed::STORAGE.into_iter().find_map(|feed| {
        let status = index.snap.feed(feed);
        match status.map(|s| &s.state) {
            Some(FeedState::Live | FeedState::Reconnecting { .. }) if status.is_some_and(|s| s.last_data.is_some()) => {
                None
            }
            Some(FeedState::Unavailable(problem)) => {
                Some(format!("{} {}: {}", feed.name(), problem.label(), problem.describe()))
            }
            Some(FeedState::Syncing) => Some(format!("{} still listing", feed.name())),
            _ => Some(format!("kgpu has no {}", feed.name())),
        }
    })
}

/// `spec.claimRef` names this claim (IsVolumeBoundToClaim: the uid counts
/// only where the volume names one).
fn reserved_for(v: &PersistentVolume, c: &VolumeClaim) -> bool {
    v.claim
        .as_ref()
        .is_some_and(|r| r.namespace == c.namespace && r.name == c.name && (r.uid.is_none() || r.uid == c.uid))
}

/// The PreFilters of VolumeRestrictions, VolumeBinding and VolumeZone, in
/// that order, and what the Filters will need per node.
pub fn prepare<'a>(
    index: &Index<'a>,
    namespace: Sym,
    pod: &str,
    pod_uid: Option<Uid>,
    uses: &[ClaimUse],
) -> Prepared<'a> {
    if uses.is_empty() {
        return Prepared::Nothing;
    }
    if let Some(why) = unreadable(index) {
        return Prepared::Unreadable(why);
    }
    // VolumeRestrictions reads every claim a volume names directly.
    for u in uses.iter().filter(|u| !u.ephemeral) {
        if claim(index, namespace.clone(), &u.claim).is_none() {
            return Prepared::Refused(Refusal::ClaimMissing(u.claim.clone()));
        }
    }
    // VolumeBinding: each claim exists, is not lost or going, is the pod's own.
    let mut claims = Vec::with_capacity(uses.len());
    for u in uses {
        let Some(c) = claim(index, namespace.clone(), &u.claim) else {
            return Prepared::Refused(Refusal::EphemeralNotCreated(u.claim.clone()));
        };
        if c.phase == ClaimPhase::Lost {
            let volume = c.volume.clone().unwrap_or_else(|| Arc::from(""));
            return Prepared::Refused(Refusal::ClaimLost { claim: u.claim.clone(), volume });
        }
        if c.deleting {
            return Prepared::Refused(Refusal::ClaimDeleting(u.claim.clone()));
        }
        if u.ephemeral && (c.owner_pod.is_none() || c.owner_pod != pod_uid) {
            return Prepared::Refused(Refusal::EphemeralNotOwned(u.claim.clone()));
        }
        claims.push((u, c));
    }
    let mut check = VolumeCheck::default();
    let mut immediate = Vec::new();
    for &(_, c) in &claims {
        if c.is_bound() {
            check.bound.push((c, c.volume.as_ref().and_then(|v| volume(index, v))));
            continue;
        }
        let delayed = c.class.clone().and_then(|name| class(index, name)).filter(|k| k.wait_for_first_consumer);
        match delayed {
            Some(k) if c.volume.is_none() => {
                check.delayed.push(Delayed { claim: c, class: k, reserved: None, candidates: Vec::new() })
            }
            _ => immediate.push(c.name.clone()),
        }
    }
    if !immediate.is_empty() {
        return Prepared::Refused(Refusal::UnboundImmediate(immediate));
    }
    // VolumeZone reads the volume of each claim a volume names directly.
    for &(u, c) in claims.iter().filter(|(u, _)| !u.ephemeral) {
        let Some(name) = &c.volume else { continue };
        match volume(index, name) {
            None => return Prepared::Refused(Refusal::VolumeMissing { claim: u.claim.clone(), volume: name.clone() }),
            Some(v) => {
                for key in keys::VOLUME_TOPOLOGY_LABELS {
                    if let Some(value) = label_value(&v.labels, key) {
                        check.zones.push((Sym::new(key), value.as_str().split("__").collect(), v.name.clone()));
                    }
                }
            }
        }
    }
    // What a WaitForFirstConsumer claim could bind to, wherever the node.
    if !check.delayed.is_empty() {
        let volumes: Vec<&PersistentVolume> = index
            .snap
            .storage
            .values()
            .filter_map(|o| match &**o {
                StorageObject::Volume(v) => Some(v),
                _ => None,
            })
            .collect();
        for d in &mut check.delayed {
            let c = d.claim;
            let pvs = volumes.iter().copied().filter(|v| v.class == c.class);
            for v in pvs {
                let reserved = reserved_for(v, c);
                if v.claim.is_some() && !reserved {
                    continue;
                }
                if v.capacity < c.storage || v.block != c.block || v.deleting {
                    continue;
                }
                if reserved {
                    d.reserved.get_or_insert(v);
                    continue;
                }
                if v.phase != VolumePhase::Available
                    || c.selector.as_ref().is_some_and(|s| !s.matches(&v.labels))
                    || !v.access_modes.covers(c.access_modes)
                {
                    continue;
                }
                d.candidates.push(v);
            }
            // Smallest first, as the binder prefers.
            d.candidates.sort_by(|a, b| a.capacity.cmp(&b.capacity).then_with(|| a.name.cmp(&b.name)));
        }
        // The binder matches the smallest claims first.
        check.delayed.sort_by_key(|d| d.claim.storage);
    }
    // VolumeRestrictions: a ReadWriteOncePod claim another pod uses.
    for &(u, c) in claims.iter().filter(|(u, _)| !u.ephemeral) {
        if !c.access_modes.has(AccessModes::READ_WRITE_ONCE_POD) {
            continue;
        }
        let holder = index.snap.pods.values().find(|p| {
            p.namespace == namespace
                && p.node.is_some()
                && !p.phase.is_terminal()
                && p.name.as_ref() != pod
                && p.volumes.iter().any(|v| v.claim == u.claim)
        });
        if let Some(p) = holder {
            check.in_use.push((u.claim.clone(), p.key()));
        }
    }
    Prepared::Check(check)
}

/// `allowedTopologies`: no terms, or one whose every key the node has
/// with one of its values.
fn topology_allows(class: &StorageClass, node: &Node) -> bool {
    class.allowed_topologies.is_empty()
        || class
            .allowed_topologies
            .iter()
            .any(|term| term.iter().all(|(key, values)| node.labels.get(key).is_some_and(|v| values.contains(v))))
}

impl VolumeCheck<'_> {
    /// Bound volumes' zone and region labels: (key, values, volume).
    pub fn zones(&self) -> impl Iterator<Item = (Sym, &[&str], &Arc<str>)> {
        self.zones.iter().map(|(k, v, pv)| (k.clone(), v.as_slice(), pv))
    }

    /// This node's reasons, in the filters' order, appended to `out`.
    pub fn reasons_into(&self, node: &Node, out: &mut Vec<NodeReason>) {
        if !self.in_use.is_empty() {
            out.push(NodeReason::VolumeInUse);
        }
        // VolumeBinding: bound claims first (their first failure ends the
        // check), then the claims to bind; its reasons in the binder's order.
        let mut affinity_conflict = false;
        let mut volume_gone = false;
        for (_, v) in &self.bound {
            match v {
                None => {
                    volume_gone = true;
                    break;
                }
                Some(v) if !v.node_affinity.is_empty() && !fit::affinity_matches(&v.node_affinity, node) => {
                    affinity_conflict = true;
                    break;
                }
                Some(_) => {}
            }
        }
        let unbindable = !self.delayed_satisfied(node);
        if affinity_conflict {
            out.push(NodeReason::VolumeNodeAffinity);
        }
        if unbindable {
            out.push(NodeReason::VolumeUnbindable);
        }
        if volume_gone {
            out.push(NodeReason::VolumeMissing);
        }
        // VolumeZone: only where the node has any zone or region label.
        let zoned = keys::VOLUME_TOPOLOGY_LABELS.iter().any(|k| node.labels.value(k).is_some());
        if zoned {
            let conflict = self.zones.iter().any(|(key, values, _)| {
                let value = node.labels.get(key).or_else(|| node.labels.value(keys::ga_topology_label(key.as_str())));
                value.is_none_or(|v| !values.contains(&v.as_str()))
            });
            if conflict {
                out.push(NodeReason::VolumeZone);
            }
        }
    }

    /// Every WaitForFirstConsumer claim finds a volume here, or can be
    /// provisioned for this node.
    fn delayed_satisfied(&self, node: &Node) -> bool {
        let mut chosen: Vec<&str> = Vec::new();
        let mut to_provision: Vec<&Delayed<'_>> = Vec::new();
        for d in &self.delayed {
            if let Some(selected) = d.claim.selected_node.clone() {
                if selected != node.name {
                    return false;
                }
                to_provision.push(d);
                continue;
            }
            let fits =
                |v: &PersistentVolume| v.node_affinity.is_empty() || fit::affinity_matches(&v.node_affinity, node);
            if let Some(v) = d.reserved {
                if fits(v) {
                    chosen.push(&v.name);
                } else {
                    to_provision.push(d);
                }
                continue;
            }
            match d.candidates.iter().find(|v| !chosen.contains(&v.name.as_ref()) && fits(v)) {
                Some(v) => chosen.push(&v.name),
                None => to_provision.push(d),
            }
        }
        to_provision.iter().all(|d| {
            let provisioner = d.class.provisioner.as_str();
            !provisioner.is_empty() && provisioner != NO_PROVISIONER && topology_allows(d.class, node)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::testing::node;
    use crate::analysis::testing::storage::{claim, class, volume};
    use crate::model::storage::ClaimRef;
    use crate::model::{Cluster, Feed, ModelEvent, Object, Snapshot, SourceInfo, SourceKind};

    /// Two nodes, the storage feeds listed (or not).
    fn cluster(storage: Vec<StorageObject>, listed: bool) -> Snapshot {
        let mut c = Cluster::new(SourceInfo { kind: SourceKind::Demo, name: "test".into() });
        for n in ["n1", "n2"] {
            c.apply(ModelEvent::Upsert(Object::Node(node(n).gpus(8).label(keys::HOSTNAME, n).build())));
        }
        let feeds = Feed::STORAGE;
        for feed in feeds.into_iter().filter(|_| listed) {
            let objects = storage.iter().filter(|o| {
                o.key().kind
                    == match feed {
                        Feed::PersistentVolumeClaims => StorageKind::Claim,
                        Feed::PersistentVolumes => StorageKind::Volume,
                        _ => StorageKind::Class,
                    }
            });
            c.apply(ModelEvent::Resync { feed, objects: objects.cloned().map(Object::Storage).collect() });
        }
        c.snapshot()
    }

    fn uses(claims: &[&str]) -> Vec<ClaimUse> {
        claims.iter().map(|c| ClaimUse { claim: (*c).into(), ephemeral: false }).collect()
    }

    /// Each node's volume reasons for a pod naming `claims`.
    fn reasons(snap: &Snapshot, claims: &[&str]) -> Result<Vec<(String, Vec<NodeReason>)>, String> {
        let index = Index::build(snap, 0);
        match prepare(&index, Sym::new("ml"), "p", None, &uses(claims)) {
            Prepared::Check(check) => Ok(index
                .nodes()
                .map(|n| {
                    let mut out = Vec::new();
                    check.reasons_into(n, &mut out);
                    (n.name.to_string(), out)
                })
                .collect()),
            other => Err(format!("{other:?}")),
        }
    }

    #[test]
    fn storage_kgpu_cannot_read_is_not_evaluated() {
        let snap = cluster(vec![], false);
        let index = Index::build(&snap, 0);
        assert!(matches!(prepare(&index, Sym::new("ml"), "p", None, &uses(&["data"])), Prepared::Unreadable(_)));
        // Read, and the claim is not there: the PreFilter's refusal.
        let snap = cluster(vec![], true);
        let index = Index::build(&snap, 0);
        assert_eq!(
            match prepare(&index, Sym::new("ml"), "p", None, &uses(&["data"])) {
                Prepared::Refused(r) => r.scheduler_text(Sym::new("ml"), "p"),
                other => format!("{other:?}"),
            },
            "persistentvolumeclaim \"data\" not found"
        );
    }

    /// Two WaitForFirstConsumer claims of one pod cannot share a volume, and
    /// the smallest volume that fits goes to the smallest claim first.
    #[test]
    fn each_volume_binds_one_claim_of_the_pod() {
        let base = vec![
            class("local", NO_PROVISIONER, true),
            StorageObject::Claim(claim("a", "local", 10)),
            StorageObject::Claim(claim("b", "local", 50)),
            StorageObject::Volume(volume("pv-100", "local", 100, Some("n1"))),
        ];
        let one = reasons(&cluster(base.clone(), true), &["a", "b"]).unwrap();
        assert_eq!(one[0].1, [NodeReason::VolumeUnbindable], "n1 has one volume for two claims");
        assert_eq!(one[1].1, [NodeReason::VolumeUnbindable]);
        let mut two = base.clone();
        two.push(StorageObject::Volume(volume("pv-20", "local", 20, Some("n1"))));
        let two = reasons(&cluster(two, true), &["a", "b"]).unwrap();
        assert!(two[0].1.is_empty(), "a takes pv-20, b pv-100: {:?}", two[0].1);
        // Too small for b: pv-20 only fits a, and a would take it first.
        let mut small = base;
        small[3] = StorageObject::Volume(volume("pv-20", "local", 20, Some("n1")));
        small.push(StorageObject::Volume(volume("pv-30", "local", 30, Some("n1"))));
        assert_eq!(reasons(&cluster(small, true), &["a", "b"]).unwrap()[0].1, [NodeReason::VolumeUnbindable]);
    }

    /// A volume reserved for the claim (claimRef) is its only answer: where
    /// its node affinity does not hold, the claim must be provisioned.
    #[test]
    fn a_volume_reserved_for_the_claim_is_its_only_answer() {
        let mut reserved = volume("pv-r", "local", 100, Some("n2"));
        reserved.claim = Some(ClaimRef { namespace: Sym::new("ml"), name: "a".into(), uid: None });
        let free = volume("pv-free", "local", 100, Some("n1"));
        let storage = vec![
            class("local", NO_PROVISIONER, true),
            StorageObject::Claim(claim("a", "local", 10)),
            StorageObject::Volume(reserved),
            StorageObject::Volume(free),
        ];
        let r = reasons(&cluster(storage, true), &["a"]).unwrap();
        assert_eq!(r[0].1, [NodeReason::VolumeUnbindable], "n1's free volume is not considered");
        assert!(r[1].1.is_empty());
    }

    /// A claim the scheduler already chose a node for binds there only; a
    /// provisioner class binds anywhere its allowed topologies reach.
    #[test]
    fn a_selected_node_and_allowed_topologies_bound_provisioning() {
        let mut chosen = claim("a", "csi", 10);
        chosen.selected_node = Some(Sym::new("n2"));
        let storage = vec![class("csi", "ebs.csi.aws.com", true), StorageObject::Claim(chosen)];
        let r = reasons(&cluster(storage, true), &["a"]).unwrap();
        assert_eq!((r[0].1.len(), r[1].1.len()), (1, 0));
        let mut zoned = class("csi", "ebs.csi.aws.com", true);
        if let StorageObject::Class(c) = &mut zoned {
            c.allowed_topologies =
                Box::new([Box::new([(Sym::new(keys::HOSTNAME), Box::new([Sym::new("n1")]) as Box<[Sym]>)])]);
        }
        let storage = vec![zoned, StorageObject::Claim(claim("a", "csi", 10))];
        let r = reasons(&cluster(storage, true), &["a"]).unwrap();
        assert_eq!((r[0].1.len(), r[1].1.len()), (0, 1));
    }

    /// VolumeZone: a beta zone key on the volume against the GA key on the
    /// node; a node with no zone or region label at all is not checked.
    #[test]
    fn zones_compare_beta_and_ga_keys_and_skip_unzoned_nodes() {
        let mut pv = volume("pv-z", "manual", 10, None);
        pv.labels = Box::new([(Sym::new("failure-domain.beta.kubernetes.io/zone"), Sym::new("a__b"))]);
        let mut bound = claim("a", "manual", 10);
        bound.volume = Some("pv-z".into());
        bound.bind_completed = true;
        let storage =
            vec![class("manual", NO_PROVISIONER, false), StorageObject::Claim(bound), StorageObject::Volume(pv)];
        let mut snap = cluster(storage, true);
        let zoned = |name: &str, zone: &str| {
            node(name).gpus(8).label(keys::HOSTNAME, name).label("topology.kubernetes.io/zone", zone).build()
        };
        snap.nodes.insert(Sym::new("n1"), Arc::new(zoned("n1", "b")));
        snap.nodes.insert(Sym::new("n2"), Arc::new(zoned("n2", "c")));
        snap.nodes.insert(Sym::new("n3"), Arc::new(node("n3").gpus(8).build()));
        let r = reasons(&snap, &["a"]).unwrap();
        assert_eq!(r.iter().map(|(_, v)| v.len()).collect::<Vec<_>>(), [0, 1, 0], "{r:?}");
    }
}
