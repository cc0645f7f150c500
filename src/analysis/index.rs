//! Lookups every analysis needs, built once per snapshot: what each node
//! has in use, which pods sit where, which pods belong to which gang.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use crate::model::{GangKey, GangKind, Node, Pod, PodKey, PodPhase, Snapshot, Sym, SymHash, SymMap, Timestamp};

use super::fit::{self, NodeReason, PlacementKey, Shape};
use super::tally::Tally;

/// Per node (in [`Index::node_list`] order), the static reasons a pod with
/// given placement constraints cannot go there; empty where it may.
pub type Placement = Arc<PlacementTable>;

/// The reasons of every node in one buffer (no allocation per node).
#[derive(Debug, Default)]
pub struct PlacementTable {
    reasons: Vec<NodeReason>,
    /// Where each node's reasons end in `reasons`.
    ends: Vec<usize>,
}

impl PlacementTable {
    fn build<'n>(shape: &Shape<'_>, nodes: impl Iterator<Item = &'n Node>) -> PlacementTable {
        let mut table = PlacementTable::default();
        for node in nodes {
            fit::placement_verdicts_into(shape, node, &mut table.reasons);
            table.ends.push(table.reasons.len());
        }
        table
    }

    pub fn iter(&self) -> impl Iterator<Item = &[NodeReason]> {
        (0..self.ends.len()).map(|i| &self[i])
    }
}

impl std::ops::Index<usize> for PlacementTable {
    type Output = [NodeReason];

    fn index(&self, i: usize) -> &[NodeReason] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.reasons[start..self.ends[i]]
    }
}

pub struct Index<'a> {
    pub snap: &'a Snapshot,
    pub now: Timestamp,
    usage: SymMap<Tally>,
    /// `usage` in `node_list` order, for loops over every node.
    usage_list: Vec<Tally>,
    pods_on: SymMap<Vec<&'a Pod>>,
    failed_on: SymMap<Vec<&'a Pod>>,
    /// Unbound, not finished, not being deleted; oldest first.
    pub pending_pods: Vec<&'a Pod>,
    members: HashMap<GangKey, Vec<&'a Pod>>,
    gang_of: HashMap<PodKey, GangKey>,
    node_list: Vec<&'a Node>,
    /// Pods share placement constraints far more often than not (a Job's
    /// pods, a pool's workloads), so static verdicts are computed once per
    /// distinct constraint set: this keeps per-node fit linear in nodes.
    placements: Mutex<HashMap<PlacementKey, Placement>>,
    empty: Tally,
}

impl<'a> Index<'a> {
    pub fn build(snap: &'a Snapshot, now: Timestamp) -> Index<'a> {
        // (namespace, owner kind, owner name) → Kueue workload; (namespace, name) → gang
        let mut by_owner: HashMap<(Sym, Sym, Sym), GangKey, SymHash> = HashMap::default();
        let mut by_name: HashMap<(Sym, &str), GangKey, SymHash> = HashMap::default();
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

        let mut usage: SymMap<Tally> = SymMap::default();
        let mut pods_on: SymMap<Vec<&Pod>> = SymMap::default();
        let mut failed_on: SymMap<Vec<&Pod>> = SymMap::default();
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
            } else if pod.phase == PodPhase::Failed
                && let Some(node) = pod.node
            {
                failed_on.entry(node).or_default().push(pod);
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
        let node_list: Vec<&Node> = snap.nodes.values().map(|n| &**n).collect();
        let usage_list = node_list.iter().map(|n| usage.get(&n.name).cloned().unwrap_or_default()).collect();
        Index {
            snap,
            now,
            usage,
            usage_list,
            pods_on,
            failed_on,
            pending_pods,
            members,
            gang_of,
            node_list,
            placements: Mutex::default(),
            empty: Tally::default(),
        }
    }

    /// Every node, in name order; the order of [`Index::placement`].
    pub fn node_list(&self) -> &[&'a Node] {
        &self.node_list
    }

    /// Every node with what it has in use, in name order.
    pub fn nodes_with_usage(&self) -> impl Iterator<Item = (&'a Node, &Tally)> + '_ {
        self.node_list.iter().copied().zip(&self.usage_list)
    }

    /// The static verdicts of every node for `shape`'s placement constraints.
    pub fn placement(&self, shape: &Shape<'_>) -> Placement {
        let key = shape.placement_key();
        let mut placements = self.placements.lock().unwrap_or_else(PoisonError::into_inner);
        placements
            .entry(key)
            .or_insert_with(|| Arc::new(PlacementTable::build(shape, self.node_list.iter().copied())))
            .clone()
    }

    /// Resources in use on a node (pods bound and not finished).
    pub fn used(&self, node: Sym) -> &Tally {
        self.usage.get(&node).unwrap_or(&self.empty)
    }

    pub fn pods_on(&self, node: Sym) -> &[&'a Pod] {
        self.pods_on.get(&node).map_or(&[], |v| v.as_slice())
    }

    /// Failed pods that had been bound to the node.
    pub fn failed_on(&self, node: Sym) -> &[&'a Pod] {
        self.failed_on.get(&node).map_or(&[], |v| v.as_slice())
    }

    pub fn members(&self, gang: &GangKey) -> &[&'a Pod] {
        self.members.get(gang).map_or(&[], |v| v.as_slice())
    }

    pub fn gang_of(&self, pod: &PodKey) -> Option<&GangKey> {
        self.gang_of.get(pod)
    }

    pub fn nodes(&self) -> impl Iterator<Item = &'a Node> + '_ {
        self.node_list.iter().copied()
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
