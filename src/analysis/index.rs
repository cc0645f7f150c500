//! Lookups every analysis needs, built once per snapshot: what each node
//! has in use, which pods sit where, which pods belong to which gang.

use std::collections::HashMap;

use crate::model::{GangKey, GangKind, Node, Pod, PodKey, Snapshot, Sym, Timestamp};

use super::tally::Tally;

pub struct Index<'a> {
    pub snap: &'a Snapshot,
    pub now: Timestamp,
    usage: HashMap<Sym, Tally>,
    pods_on: HashMap<Sym, Vec<&'a Pod>>,
    /// Unbound, not finished, not being deleted; oldest first.
    pub pending_pods: Vec<&'a Pod>,
    members: HashMap<GangKey, Vec<&'a Pod>>,
    gang_of: HashMap<PodKey, GangKey>,
    empty: Tally,
}

impl<'a> Index<'a> {
    pub fn build(snap: &'a Snapshot, now: Timestamp) -> Index<'a> {
        // (namespace, owner kind, owner name) → Kueue workload; (namespace, name) → gang
        let mut by_owner: HashMap<(Sym, Sym, Sym), GangKey> = HashMap::new();
        let mut by_name: HashMap<(Sym, &str), GangKey> = HashMap::new();
        for (key, gang) in snap.gangs.iter() {
            if let Some(owner) = &gang.owner {
                by_owner.insert((gang.namespace, owner.kind, owner.name), key.clone());
            }
            let entry = by_name.entry((gang.namespace, &*gang.name)).or_insert_with(|| key.clone());
            // A PodGroup wins a name clash: Volcano pods name their group.
            if key.kind == GangKind::VolcanoPodGroup {
                *entry = key.clone();
            }
        }

        let mut usage: HashMap<Sym, Tally> = HashMap::new();
        let mut pods_on: HashMap<Sym, Vec<&Pod>> = HashMap::new();
        let mut pending_pods = Vec::new();
        let mut members: HashMap<GangKey, Vec<&Pod>> = HashMap::new();
        let mut gang_of = HashMap::new();
        for pod in snap.pods.values() {
            let pod: &Pod = pod;
            if pod.holds_resources()
                && let Some(node) = pod.node
            {
                usage.entry(node).or_default().add_pod(&pod.requests);
                pods_on.entry(node).or_default().push(pod);
            } else if pod.is_pending() {
                pending_pods.push(pod);
            }
            let gang = pod
                .group
                .and_then(|g| by_name.get(&(pod.namespace, g.as_str())))
                .or_else(|| pod.owner.as_ref().and_then(|o| by_owner.get(&(pod.namespace, o.kind, o.name))));
            if let Some(gang) = gang {
                members.entry(gang.clone()).or_default().push(pod);
                gang_of.insert(pod.key(), gang.clone());
            }
        }
        pending_pods.sort_by(|a, b| a.created.cmp(&b.created).then_with(|| a.name.cmp(&b.name)));
        Index { snap, now, usage, pods_on, pending_pods, members, gang_of, empty: Tally::default() }
    }

    /// Resources in use on a node (pods bound and not finished).
    pub fn used(&self, node: Sym) -> &Tally {
        self.usage.get(&node).unwrap_or(&self.empty)
    }

    pub fn pods_on(&self, node: Sym) -> &[&'a Pod] {
        self.pods_on.get(&node).map_or(&[], |v| v.as_slice())
    }

    pub fn members(&self, gang: &GangKey) -> &[&'a Pod] {
        self.members.get(gang).map_or(&[], |v| v.as_slice())
    }

    pub fn gang_of(&self, pod: &PodKey) -> Option<&GangKey> {
        self.gang_of.get(pod)
    }

    pub fn nodes(&self) -> impl Iterator<Item = &'a Node> + 'a {
        self.snap.nodes.values().map(|n| &**n)
    }

    /// GPUs free on the node (advertised minus requested).
    pub fn free_gpus(&self, node: &Node) -> u64 {
        node.allocatable.gpu.saturating_sub(self.used(node.name).gpu)
    }

    /// Free slices of a MIG profile on the node.
    pub fn free_mig(&self, node: &Node, profile: &str) -> u64 {
        let resource = format!("{}{profile}", crate::model::keys::RESOURCE_MIG_PREFIX);
        node.allocatable.get(&resource).saturating_sub(self.used(node.name).get(&resource))
    }

    /// A node new work can land on at all.
    pub fn schedulable(node: &Node) -> bool {
        node.is_ready() && !node.unschedulable
    }
}
