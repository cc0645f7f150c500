//! Lookups every analysis needs, built once per snapshot: what each node
//! has in use, which pods sit where, which pods belong to which gang. From
//! a walk over every pod ([`walk`]), or from a [`PodLedger`] kept between
//! snapshots, which gives the same.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use crate::model::{CudaNeed, GangKey, Node, Pod, PodKey, Snapshot, Sym, SymHash, SymMap, Taint, Timestamp};

use super::fit::{self, NodeReason, PlacementKey, Shape};
use super::tally::Tally;

mod ledger;
mod walk;

pub use ledger::PodLedger;

/// Per node (in [`Index::node_list`] order), the static reasons a pod with
/// given placement constraints cannot go there; empty where it may.
pub type Placement = Arc<PlacementTable>;

/// The reasons of every node, as classes: nodes of one pool share their
/// reasons, so a fleet of 10,000 nodes has a handful of distinct lists and
/// callers can count per class instead of per node.
#[derive(Debug)]
pub struct PlacementTable {
    /// Distinct reason lists; class 0 is the empty one (the pod may go there).
    classes: Vec<Box<[NodeReason]>>,
    /// Per node (in [`Index::node_list`] order), its class.
    class_of: Vec<u32>,
}

/// A node's values of the labels a shape names (and its name, where the
/// shape selects by field).
type Signature = Box<[Option<Sym>]>;

impl PlacementTable {
    /// Verdicts read a node's cordon, readiness and taints (its group, see
    /// [`Index::placement_groups`]), the labels the shape names, and its name
    /// only under field selectors: nodes alike in those are judged once.
    fn build(index: &Index<'_>, shape: &Shape<'_>) -> PlacementTable {
        let mut label_keys: Vec<Sym> = Vec::new();
        let mut by_name = false;
        let named = shape.node_selector.iter().map(|(k, _)| k.clone());
        for key in named.chain(shape.affinity.iter().flat_map(|t| t.expressions.iter().map(|r| r.key.clone()))) {
            if !label_keys.contains(&key) {
                label_keys.push(key);
            }
        }
        for term in shape.affinity.iter() {
            by_name |= !term.fields.is_empty();
        }
        let columns: Vec<Arc<[Option<Sym>]>> = label_keys.iter().map(|k| index.label_column(k)).collect();
        let groups = index.placement_groups();
        let group_count = groups.iter().max().map_or(0, |g| *g as usize + 1);
        // Per group: the values of the named labels (and the name) → class.
        let mut alike: Vec<HashMap<Signature, u32, SymHash>> = vec![HashMap::default(); group_count];
        let mut class_ids: HashMap<Box<[NodeReason]>, u32> = HashMap::new();
        let mut table = PlacementTable { classes: vec![Box::default()], class_of: Vec::new() };
        class_ids.insert(Box::default(), 0);
        let mut signature: Vec<Option<Sym>> = Vec::new();
        let mut reasons = Vec::new();
        for (i, node) in index.node_list.iter().enumerate() {
            signature.clear();
            signature.extend(columns.iter().map(|c| c[i].clone()));
            if by_name {
                signature.push(Some(node.name.clone()));
            }
            let seen = &mut alike[groups[i] as usize];
            let class = match seen.get(signature.as_slice()) {
                Some(&c) => c,
                None => {
                    reasons.clear();
                    fit::placement_verdicts_into(shape, node, &mut reasons);
                    let c = match class_ids.get(reasons.as_slice()) {
                        Some(&c) => c,
                        None => {
                            let c = table.classes.len() as u32;
                            let list: Box<[NodeReason]> = reasons.as_slice().into();
                            table.classes.push(list.clone());
                            class_ids.insert(list, c);
                            c
                        }
                    };
                    seen.insert(signature.as_slice().into(), c);
                    c
                }
            };
            table.class_of.push(class);
        }
        table
    }

    pub fn iter(&self) -> impl Iterator<Item = &[NodeReason]> {
        self.class_of.iter().map(|&c| &*self.classes[c as usize])
    }

    /// Per node, its class: an index into [`PlacementTable::classes`].
    pub fn class_of(&self) -> &[u32] {
        &self.class_of
    }

    /// The distinct reason lists; class 0 is empty.
    pub fn classes(&self) -> &[Box<[NodeReason]>] {
        &self.classes
    }
}

impl std::ops::Index<usize> for PlacementTable {
    type Output = [NodeReason];

    fn index(&self, i: usize) -> &[NodeReason] {
        &self.classes[self.class_of[i] as usize]
    }
}

pub struct Index<'a> {
    pub snap: &'a Snapshot,
    pub now: Timestamp,
    node_list: Vec<&'a Node>,
    /// A node's place in `node_list`, by name.
    position: SymMap<u32>,
    /// What the pods add up to, by node position.
    pods: PodParts<'a>,
    /// Pods share placement constraints far more often than not (a Job's
    /// pods, a pool's workloads), so static verdicts are computed once per
    /// distinct constraint set: this keeps per-node fit linear in nodes.
    placements: Mutex<HashMap<PlacementKey, Arc<OnceLock<Placement>>>>,
    placement_groups: OnceLock<Vec<u32>>,
    /// Idle time per pod holding GPUs idle, worked out when first asked.
    idle: OnceLock<HashMap<PodKey, i64>>,
    /// By label key, each node's value (in node position order).
    label_columns: Mutex<SymMap<Arc<[Option<Sym>]>>>,
    /// Nodes that fail every GPU pod at admission (`fleet::black_hole_nodes`):
    /// the scheduler would use them, the work would not run.
    black_holes: std::collections::HashSet<Sym>,
    empty: Tally,
    /// The DRA objects looked up, built when first asked.
    dra: OnceLock<crate::analysis::dra::DraIndex<'a>>,
    /// Pending pods the scheduler nominated to a node, by node.
    nominated: OnceLock<SymMap<Vec<&'a Pod>>>,
    /// The GPU Operator's operands that have a pod on some node.
    operand_layers: OnceLock<Vec<crate::model::OperandLayer>>,
    /// Bound pods with required anti-affinity, with their node's position.
    anti_affinity: OnceLock<Vec<(&'a Pod, usize)>>,
}

/// What the index gathers from the pods, by node position: from a walk
/// over every pod ([`walk`]) or from a [`PodLedger`].
struct PodParts<'a> {
    /// By node position: what its pods use, and how many of them want a GPU.
    usage_list: Vec<Tally>,
    gpu_pods: Vec<u32>,
    /// Pods bound to each node, in node position order: node `i`'s pods are
    /// `bound[bound_ends[i - 1]..bound_ends[i]]` (one buffer, not a vector per node).
    bound: Vec<&'a Pod>,
    bound_ends: Vec<u32>,
    /// Pods bound to nodes the snapshot no longer holds.
    stray: SymMap<(Tally, Vec<&'a Pod>)>,
    failed_on: SymMap<Vec<&'a Pod>>,
    /// Unbound, not finished, not being deleted; oldest first.
    pending_pods: Vec<&'a Pod>,
    gpu_workloads: Vec<GpuWorkload<'a>>,
    members: HashMap<GangKey, Vec<&'a Pod>>,
    gang_of: HashMap<PodKey, GangKey>,
    lowest_holder_priority: Option<i32>,
}

/// An unfinished pod that wants a GPU.
#[derive(Clone, Copy, Debug)]
pub struct GpuWorkload<'a> {
    pub pod: &'a Pod,
    pub cuda: Option<&'static CudaNeed>,
    /// Its node's position in [`Index::node_list`], when bound to a known node.
    pub node: Option<usize>,
}

impl<'a> Index<'a> {
    /// How long the pod has held its GPUs idle, per the utilization read.
    pub fn idle_seconds(&self, pod: &PodKey) -> Option<i64> {
        self.idle.get_or_init(|| super::usage::idle_by_pod(self.snap, self.now)).get(pod).copied()
    }

    pub fn build(snap: &'a Snapshot, now: Timestamp) -> Index<'a> {
        Index::build_walking_apart_from(snap, now, walk::PARALLEL_WALK_FROM)
    }

    /// [`Index::build`], walking the pods in two halves from `parallel_from` pods.
    fn build_walking_apart_from(snap: &'a Snapshot, now: Timestamp, parallel_from: usize) -> Index<'a> {
        let (node_list, position) = Index::nodes_of(snap);
        let parts = walk::walk(snap, &position, parallel_from);
        Index::assemble(snap, now, node_list, position, parts)
    }

    /// [`Index::build`] from a ledger of the pods kept between snapshots:
    /// no walk over every pod. A ledger not brought up to date with `snap`
    /// (see [`PodLedger::update`]) is not used: the pods are walked instead.
    pub fn with_ledger(snap: &'a Snapshot, now: Timestamp, ledger: &'a PodLedger) -> Index<'a> {
        if !ledger.is_current(snap) {
            return Index::build(snap, now);
        }
        let (node_list, position) = Index::nodes_of(snap);
        let parts = ledger.parts(&node_list, &position);
        Index::assemble(snap, now, node_list, position, parts)
    }

    fn nodes_of(snap: &'a Snapshot) -> (Vec<&'a Node>, SymMap<u32>) {
        let node_list: Vec<&Node> = snap.nodes.values().map(|n| &**n).collect();
        let position: SymMap<u32> = node_list.iter().enumerate().map(|(i, n)| (n.name.clone(), i as u32)).collect();
        (node_list, position)
    }

    fn assemble(
        snap: &'a Snapshot,
        now: Timestamp,
        node_list: Vec<&'a Node>,
        position: SymMap<u32>,
        pods: PodParts<'a>,
    ) -> Index<'a> {
        Index {
            snap,
            now,
            node_list,
            position,
            pods,
            placements: Mutex::default(),
            placement_groups: OnceLock::new(),
            idle: OnceLock::new(),
            label_columns: Mutex::default(),
            black_holes: Default::default(),
            empty: Tally::default(),
            dra: OnceLock::new(),
            nominated: OnceLock::new(),
            operand_layers: OnceLock::new(),
            anti_affinity: OnceLock::new(),
        }
    }

    /// Bound pods whose required anti-affinity may keep other pods away,
    /// with their node's position: found once over the bound pods.
    pub fn anti_affinity_pods(&self) -> &[(&'a Pod, usize)] {
        self.anti_affinity.get_or_init(|| {
            (0..self.node_list.len())
                .flat_map(|i| {
                    self.pods_at(i)
                        .iter()
                        .filter(|p| p.rules.as_ref().is_some_and(|r| !r.anti_affinity.is_empty()))
                        .map(move |p| (*p, i))
                })
                .collect()
        })
    }

    /// Whether the GPU Operator's `layer` has a pod on any node (its
    /// DaemonSet runs), worked out once over the bound pods when first asked.
    pub fn operand_runs(&self, layer: crate::model::OperandLayer) -> bool {
        self.operand_layers
            .get_or_init(|| {
                let mut layers: Vec<crate::model::OperandLayer> =
                    self.pods.bound.iter().filter_map(|p| p.operand.as_ref().map(|o| o.layer)).collect();
                layers.sort_unstable();
                layers.dedup();
                layers
            })
            .contains(&layer)
    }

    /// Pending pods nominated to `node` (`status.nominatedNodeName`): the
    /// scheduler preempted for them there and counts them as placed for any
    /// pod of equal or lower priority.
    pub fn nominated_to(&self, node: Sym) -> &[&'a Pod] {
        self.nominations().get(&node).map_or(&[], Vec::as_slice)
    }

    fn nominations(&self) -> &SymMap<Vec<&'a Pod>> {
        self.nominated.get_or_init(|| {
            let mut by_node: SymMap<Vec<&'a Pod>> = SymMap::default();
            for pod in self.pending_pods() {
                if let Some(n) = pod.nominated.clone() {
                    by_node.entry(n).or_default().push(pod);
                }
            }
            by_node
        })
    }

    /// Whether any pending pod is nominated to a node.
    pub fn has_nominations(&self) -> bool {
        !self.nominations().is_empty()
    }

    /// ResourceSlices, claims and classes, looked up (empty on a cluster
    /// without DRA).
    pub fn dra(&self) -> &crate::analysis::dra::DraIndex<'a> {
        self.dra.get_or_init(|| crate::analysis::dra::DraIndex::build(self.snap))
    }

    /// The lowest priority of a pod holding resources on a node: only a
    /// pod above it can have preemption victims.
    pub fn lowest_holder_priority(&self) -> Option<i32> {
        self.pods.lowest_holder_priority
    }

    /// Unbound, not finished, not being deleted; oldest first.
    pub fn pending_pods(&self) -> &[&'a Pod] {
        &self.pods.pending_pods
    }

    /// Unfinished pods that want a GPU, in key order, with what the
    /// compatibility matrix reads of them: walking every pod costs a cache
    /// miss per pod, so the index walks them once for all analyses.
    pub fn gpu_workloads(&self) -> &[GpuWorkload<'a>] {
        &self.pods.gpu_workloads
    }

    /// Every node, in name order; the order of [`Index::placement`].
    pub fn node_list(&self) -> &[&'a Node] {
        &self.node_list
    }

    /// Every node with what it has in use, in name order.
    pub fn nodes_with_usage(&self) -> impl Iterator<Item = (&'a Node, &Tally)> + '_ {
        self.node_list.iter().copied().zip(&self.pods.usage_list)
    }

    /// The static verdicts of every node for `shape`'s placement constraints.
    pub fn placement(&self, shape: &Shape<'_>) -> Placement {
        let cell = self
            .placements
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(shape.placement_key())
            .or_default()
            .clone();
        // Built outside the map's lock, once: a second thread asking for the
        // same table waits for the first.
        cell.get_or_init(|| Arc::new(PlacementTable::build(self, shape))).clone()
    }

    /// Per node (in position order), its group: nodes alike in cordon,
    /// readiness and taints share one.
    fn placement_groups(&self) -> &[u32] {
        self.placement_groups.get_or_init(|| {
            let mut ids: HashMap<(bool, bool, &[Taint]), u32> = HashMap::new();
            self.node_list
                .iter()
                .map(|n| {
                    let next = ids.len() as u32;
                    *ids.entry((n.unschedulable, n.is_ready(), &n.taints)).or_insert(next)
                })
                .collect()
        })
    }

    /// Every node's value of one label, in position order.
    fn label_column(&self, key: &Sym) -> Arc<[Option<Sym>]> {
        let mut columns = self.label_columns.lock().unwrap_or_else(PoisonError::into_inner);
        columns
            .entry(key.clone())
            .or_insert_with(|| self.node_list.iter().map(|n| n.labels.get(key).cloned()).collect())
            .clone()
    }

    /// Resources in use on a node (pods bound and not finished).
    pub fn used(&self, node: &Sym) -> &Tally {
        match self.position.get(node) {
            Some(&i) => &self.pods.usage_list[i as usize],
            None => self.pods.stray.get(node).map_or(&self.empty, |(used, _)| used),
        }
    }

    /// Pods bound to a node and not finished.
    pub fn pods_on(&self, node: &Sym) -> &[&'a Pod] {
        match self.position.get(node) {
            Some(&i) => self.pods_at(i as usize),
            None => self.pods.stray.get(node).map_or(&[], |(_, pods)| pods.as_slice()),
        }
    }

    /// [`Index::pods_on`] by node position.
    pub fn pods_at(&self, position: usize) -> &[&'a Pod] {
        let start = if position == 0 { 0 } else { self.pods.bound_ends[position - 1] as usize };
        &self.pods.bound[start..self.pods.bound_ends[position] as usize]
    }

    /// How many of [`Index::pods_on`] want a GPU.
    /// Pods bound to nodes that are not in the snapshot (deleted, or not listed).
    pub fn stray_pods(&self) -> impl Iterator<Item = (Sym, &[&'a Pod])> + '_ {
        self.pods.stray.iter().map(|(node, (_, pods))| (node.clone(), pods.as_slice()))
    }

    pub fn gpu_pods_on(&self, node: &Sym) -> usize {
        match self.position.get(node) {
            Some(&i) => self.pods.gpu_pods[i as usize] as usize,
            None => self.pods.stray.get(node).map_or(0, |(_, pods)| pods.iter().filter(|p| p.wants_gpu()).count()),
        }
    }

    /// Failed pods that had been bound to the node.
    pub fn failed_on(&self, node: &Sym) -> &[&'a Pod] {
        self.pods.failed_on.get(node).map_or(&[], |v| v.as_slice())
    }

    pub fn members(&self, gang: &GangKey) -> &[&'a Pod] {
        self.pods.members.get(gang).map_or(&[], |v| v.as_slice())
    }

    pub fn gang_of(&self, pod: &PodKey) -> Option<&GangKey> {
        self.pods.gang_of.get(pod)
    }

    pub fn nodes(&self) -> impl Iterator<Item = &'a Node> + '_ {
        self.node_list.iter().copied()
    }

    /// GPUs free on the node (advertised minus requested).
    pub fn free_gpus(&self, node: &Node) -> u64 {
        node.allocatable.gpu.saturating_sub(self.used(&node.name).gpu)
    }

    /// Free slices of a MIG profile on the node.
    pub fn free_mig(&self, node: &Node, profile: &str) -> u64 {
        let resource = format!("{}{profile}", crate::model::keys::RESOURCE_MIG_PREFIX);
        node.allocatable.get(&resource).saturating_sub(self.used(&node.name).get(&resource))
    }

    /// A node new work can land on at all.
    /// GPUs the node has in hardware but does not advertise, not counting
    /// GPUs its agent reports unhealthy (those drop out for a reason).
    pub fn silent_gpus(&self, node: &Node) -> u32 {
        let hidden = node.hardware_gpus().unwrap_or(0).saturating_sub(node.allocatable.gpu as u32);
        // Not silent: MIG slices advertised instead, time-slicing renamed to
        // nvidia.com/gpu.shared, or the mig-manager pausing the plugin on purpose.
        if hidden == 0
            || node.allocatable.mig_total() > 0
            || node.allocatable.get(crate::model::keys::RESOURCE_GPU_SHARED) > 0
            || node.operator.paused_for_mig_change
        {
            return 0;
        }
        let unhealthy = self.snap.devices.get(&node.name).map_or(0, |d| {
            d.gpus.iter().filter(|g| matches!(g.health, crate::model::GpuHealth::Unhealthy(_))).count() as u32
        });
        hidden.saturating_sub(unhealthy)
    }

    pub fn schedulable(node: &Node) -> bool {
        node.is_ready() && !node.unschedulable
    }

    /// Marks the nodes that fail every GPU pod at admission.
    pub fn mark_black_holes(&mut self, nodes: impl IntoIterator<Item = Sym>) {
        self.black_holes.extend(nodes);
    }

    pub fn is_black_hole(&self, node: &Node) -> bool {
        self.black_holes.contains(&node.name)
    }

    /// A node work can land on *and run*: schedulable, and not a black hole.
    pub fn accepts_work(&self, node: &Node) -> bool {
        Index::schedulable(node) && !self.is_black_hole(node)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::testing::{node, pod, snapshot};
    use crate::model::{NodeSelectorTerm, Requirement, SelectorOperator, TaintEffect};

    /// The table judges alike nodes once; it must still say of every node
    /// what judging that node alone says.
    #[test]
    fn the_placement_table_agrees_with_each_node_judged_alone() {
        let mut nodes = Vec::new();
        for i in 0..40 {
            let mut b = node(&format!("n{i:02}")).gpus(8).label("pool", ["a", "b", "c"][i % 3]);
            if i % 4 == 0 {
                b = b.taint("nvidia.com/gpu", "present", TaintEffect::NoSchedule);
            }
            if i % 5 == 0 {
                b = b.label("zone", "z1");
            }
            if i % 7 == 0 {
                b = b.cordoned();
            }
            if i % 9 == 0 {
                b = b.not_ready();
            }
            nodes.push(b.build());
        }
        let mut by_field = pod("by-field").gpus(1).build();
        by_field.affinity = Box::new([NodeSelectorTerm {
            expressions: Box::new([]),
            fields: Box::new([Requirement {
                key: Sym::new("metadata.name"),
                operator: SelectorOperator::In,
                values: Box::new([Sym::new("n03"), Sym::new("n17")]),
            }]),
        }]);
        let pods = vec![
            pod("plain").gpus(1).build(),
            pod("selector").gpus(1).selector("pool", "b").build(),
            pod("tolerant").gpus(1).tolerate("nvidia.com/gpu").selector("zone", "z1").build(),
            pod("affinity").gpus(1).affinity_in("pool", &["a", "c"]).affinity_in("zone", &["z1"]).build(),
            by_field,
        ];
        let snap = snapshot(nodes, pods.clone(), Vec::new(), 0);
        let index = Index::build(&snap, 0);
        for p in &pods {
            let shape = Shape::of(p);
            let table = index.placement(&shape);
            let mut classes_seen = std::collections::HashSet::new();
            for (i, node) in index.node_list().iter().enumerate() {
                assert_eq!(&table[i], fit::placement_verdicts(&shape, node).as_slice(), "{} on {}", p.name, node.name);
                classes_seen.insert(table.class_of()[i]);
            }
            assert!(classes_seen.len() > 1, "{}: the fleet is varied, so are the verdicts", p.name);
        }
    }

    /// Two half walks joined say what one walk says, in the same order; so
    /// does a ledger started over in one pass or in two halves.
    #[test]
    fn walking_the_pods_in_halves_changes_nothing() {
        let nodes: Vec<_> = (0..6).map(|i| node(&format!("n{i}")).gpus(8).build()).collect();
        let mut pods = Vec::new();
        for i in 0..60 {
            let mut b =
                pod(&format!("p{i:02}")).gpus(1 + i % 3).cuda_require(["cuda>=12.4", "cuda>=12.8"][i as usize % 2]);
            b = match i % 5 {
                0 => b.created(i as i64),
                1 => b.on("gone").running(),
                2 => b.on(&format!("n{}", i % 6)).failed("UnexpectedAdmissionError", "Allocate failed"),
                _ => b.on(&format!("n{}", i % 6)).running(),
            };
            if i % 4 == 0 {
                b = b.group("train");
            }
            pods.push(b.build());
        }
        let gang = crate::analysis::testing::podgroup("train", 4, 1).build();
        let snap = snapshot(nodes, pods, vec![gang], 100);
        let one = Index::build_walking_apart_from(&snap, 100, usize::MAX);
        let (mut kept_whole, mut kept_in_halves) = (PodLedger::new(), PodLedger::new());
        kept_whole.update_in_halves_from(&snap, usize::MAX);
        kept_in_halves.update_in_halves_from(&snap, 0);
        let names = |pods: &[&Pod]| pods.iter().map(|p| p.name.to_string()).collect::<Vec<_>>();
        let workloads = |i: &Index<'_>| {
            i.gpu_workloads().iter().map(|w| (w.pod.name.to_string(), w.node, w.cuda.cloned())).collect::<Vec<_>>()
        };
        let others = [
            ("two half walks", Index::build_walking_apart_from(&snap, 100, 0)),
            ("a ledger", Index::with_ledger(&snap, 100, &kept_whole)),
            ("a ledger in halves", Index::with_ledger(&snap, 100, &kept_in_halves)),
        ];
        for (way, two) in &others {
            for n in ["n0", "n1", "n2", "n3", "n4", "n5", "gone"].map(Sym::new) {
                assert_eq!(one.used(&n), two.used(&n), "{way}: {n}");
                assert_eq!(names(one.pods_on(&n)), names(two.pods_on(&n)), "{way}: {n}");
                assert_eq!(names(one.failed_on(&n)), names(two.failed_on(&n)), "{way}: {n}");
                assert_eq!(one.gpu_pods_on(&n), two.gpu_pods_on(&n), "{way}: {n}");
            }
            assert_eq!(names(one.pending_pods()), names(two.pending_pods()), "{way}");
            assert_eq!(workloads(&one), workloads(two), "{way}");
            for (key, _) in snap.gangs.iter() {
                assert_eq!(names(one.members(key)), names(two.members(key)), "{way}");
            }
            assert_eq!(one.lowest_holder_priority(), two.lowest_holder_priority(), "{way}");
        }
        assert!(!one.pods_on(&Sym::new("gone")).is_empty() && !one.failed_on(&Sym::new("n2")).is_empty());
        assert!(snap.gangs.iter().all(|(key, _)| !one.members(key).is_empty()));
    }
}
