//! Fragmentation: where the free GPUs are, which of them the pending work
//! can use, the largest gang that fits now, and a defragmentation plan.
//!
//! Definitions (also in docs/fragmentation.md):
//! - A *shape* is GPUs per pod × pods (or a MIG profile × pods), from each
//!   pending gang or pod, plus the canonical 1×1, 1×8, 2×8 and 4×8.
//! - For a shape, a node offers `slots` = how many such pods fit in its free
//!   resources, if the pod may run there at all (Ready, not cordoned, taints
//!   tolerated, selectors and affinity matched). *Usable free* GPUs are
//!   slots × GPUs per pod. On the nodes the shape may use and that could hold
//!   one of its pods when empty, the other free GPUs are *stranded* for that
//!   shape: free, but not enough of them together. The largest gang that
//!   fits now is Σ slots.
//! - Fleet-wide, a free GPU is stranded when it sits on a node some pending
//!   shape may use and no pending shape can use it. Free GPUs on nodes no
//!   pending work may use are idle, not stranded.
//! - The fragmentation score is the share of free GPUs that are not on a
//!   completely free node: `1 − free GPUs on fully free nodes / free GPUs`
//!   (schedulable nodes only). 0: every free GPU is part of a whole free node;
//!   1: every free GPU is a fragment.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use crate::model::{
    Gang, GangKey, HostPort, Labels, NamespaceMap, Node, NodeSelectorTerm, Pod, PodKey, Resources, Sym, Timestamp,
    Toleration, keys,
};

use super::fit::{self, PlacementKey, Shape};
use super::index::Index;
use super::inter_pod::InterPod;
use super::tally::Tally;
use super::volumes::Prepared;

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ShapeSource {
    Gang(GangKey),
    Pod(PodKey),
    Canonical,
}

/// A shape of demand and the constraints its pods carry.
#[derive(Clone, Debug)]
pub struct Demand {
    pub gpus_per_pod: u64,
    pub mig_profile: Option<Sym>,
    pub pods: u32,
    pub requests: Resources,
    pub tolerations: Box<[Toleration]>,
    pub node_selector: Labels,
    pub affinity: Box<[NodeSelectorTerm]>,
    /// Host ports each pod binds: at most one such pod per node.
    pub host_ports: Box<[HostPort]>,
    pub source: ShapeSource,
    pub priority: i32,
    pub created: Timestamp,
    /// Whose pods these are, for the filters that look at other pods
    /// (`inter_pod`): their namespace, labels and rules.
    pub namespace: Sym,
    pub labels: crate::model::Labels,
    pub rules: Option<Box<crate::model::PodRules>>,
    /// The claims its pod's volumes name, for the volume filters.
    pub volumes: Option<Arc<PodVolumes>>,
    /// The topology keys of its required anti-affinity terms that select
    /// its own pods: one of them per domain of each (per node for the
    /// hostname).
    pub own_domains: Box<[Sym]>,
}

/// A pod's PersistentVolumeClaims, with what the volume filters need of
/// the pod itself (its name and uid own its ephemeral volumes' claims).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PodVolumes {
    pub namespace: Sym,
    pub pod: Arc<str>,
    pub uid: Option<crate::model::Uid>,
    pub claims: Box<[crate::model::ClaimUse]>,
}

impl PodVolumes {
    pub fn of(pod: &Pod) -> Option<Arc<PodVolumes>> {
        (!pod.volumes.is_empty()).then(|| {
            Arc::new(PodVolumes {
                namespace: pod.namespace.clone(),
                pod: pod.name.clone(),
                uid: pod.uid,
                claims: pod.volumes.clone(),
            })
        })
    }

    /// The volume filters' PreFilters for these claims.
    pub fn prepare<'a>(&self, index: &crate::analysis::index::Index<'a>) -> crate::analysis::volumes::Prepared<'a> {
        crate::analysis::volumes::prepare(index, self.namespace.clone(), &self.pod, self.uid, &self.claims)
    }
}

impl Demand {
    /// Its pods' required anti-affinity refuses its own pods on one node
    /// (topology key `kubernetes.io/hostname`): one pod per node.
    pub fn repels_itself_per_node(&self) -> bool {
        self.own_domains.iter().any(|k| k.as_str() == keys::HOSTNAME)
    }

    /// The key of its own anti-affinity that limits it beyond its nodes
    /// (a zone, a rack: not the hostname, which room counts per node).
    pub fn wider_own_domain(&self) -> Option<Sym> {
        self.own_domains.iter().find(|&k| k.as_str() != keys::HOSTNAME).cloned()
    }

    /// The pod being placed, as PodTopologySpread and InterPodAffinity see it.
    pub fn incoming(&self) -> crate::analysis::inter_pod::Incoming<'_> {
        crate::analysis::inter_pod::Incoming {
            namespace: self.namespace.clone(),
            labels: &self.labels,
            rules: self.rules.as_deref(),
            shape: self.shape(),
        }
    }

    pub fn shape(&self) -> Shape<'_> {
        Shape {
            requests: &self.requests,
            tolerations: &self.tolerations,
            node_selector: &self.node_selector,
            affinity: &self.affinity,
            host_ports: &self.host_ports,
        }
    }

    /// The pods nominated to `node` that the scheduler counts as placed
    /// there for a pod of this demand (`addGENominatedPods`): of equal or
    /// higher priority, and not its own.
    pub fn nominated_ahead<'a>(&self, index: &Index<'a>, node: &Sym) -> Vec<&'a Pod> {
        if !index.has_nominations() {
            return Vec::new();
        }
        index
            .nominated_to(node.clone())
            .iter()
            .copied()
            .filter(|pod| {
                let own = match &self.source {
                    ShapeSource::Pod(key) => pod.namespace == key.namespace && pod.name == key.name,
                    ShapeSource::Gang(key) => index.gang_of(&pod.key()) == Some(key),
                    ShapeSource::Canonical => false,
                };
                pod.priority >= self.priority && !own
            })
            .collect()
    }

    /// Whether this is the demand of the gang or pod `namespace/name`.
    pub fn is_named(&self, namespace: &str, name: &str) -> bool {
        match &self.source {
            ShapeSource::Gang(k) => k.namespace.as_str() == namespace && &*k.name == name,
            ShapeSource::Pod(k) => k.namespace.as_str() == namespace && &*k.name == name,
            ShapeSource::Canonical => false,
        }
    }

    /// Whose demand this is: `PodGroup ns/name`, `Pod ns/name`, or the
    /// canonical shape.
    pub fn name(&self) -> String {
        match &self.source {
            ShapeSource::Gang(k) => format!("{} {}/{}", k.kind.kind_name(), k.namespace, k.name),
            ShapeSource::Pod(k) => format!("Pod {}/{}", k.namespace, k.name),
            ShapeSource::Canonical => "canonical shape".into(),
        }
    }

    pub fn label(&self) -> String {
        match self.mig_profile.clone() {
            Some(p) => format!("{}×{p}", self.pods),
            None => format!("{}×{}", self.pods, self.gpus_per_pod),
        }
    }

    pub fn is_pending(&self) -> bool {
        self.source != ShapeSource::Canonical
    }

    /// Demands with equal keys get the same answer from every per-node
    /// computation; a fleet's pending pods share a few dozen keys.
    pub fn key(&self) -> DemandKey {
        DemandKey {
            requests: self.requests.clone(),
            placement: self.shape().placement_key(),
            host_ports: self.host_ports.clone(),
            pods: self.pods,
            pending: self.is_pending(),
            nominations: None,
            inter_pod: self.rules.as_ref().map(|r| (self.namespace.clone(), self.labels.clone(), Some(r.clone()))),
            volumes: self.volumes.clone(),
        }
    }

    /// [`Demand::key`] as it must read on this cluster for a pending
    /// demand: where pods are nominated to nodes, what a node holds for them
    /// (their resources, ports and rules) depends on this demand's priority
    /// and on whose it is; where running pods have required anti-affinity,
    /// whether it refuses these pods depends on their namespace and labels.
    pub fn key_in(&self, index: &Index<'_>) -> DemandKey {
        let mut key = self.key();
        if !self.is_pending() {
            return key;
        }
        if index.has_nominations() {
            key.nominations = Some((self.priority, self.source.clone()));
        }
        if !index.anti_affinity_pods().is_empty() {
            key.inter_pod = Some((self.namespace.clone(), self.labels.clone(), self.rules.clone()));
        }
        key
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct DemandKey {
    requests: Resources,
    placement: PlacementKey,
    host_ports: Box<[HostPort]>,
    pods: u32,
    pending: bool,
    nominations: Option<(i32, ShapeSource)>,
    inter_pod: Option<(Sym, crate::model::Labels, Option<Box<crate::model::PodRules>>)>,
    volumes: Option<Arc<PodVolumes>>,
}

#[derive(Clone, Debug)]
pub struct ShapeFit {
    pub demand: Demand,
    pub fits_now: bool,
    /// Free GPUs (or MIG slices) this shape could use.
    pub usable_free: u64,
    /// Free GPUs (or slices) on schedulable nodes this shape cannot use.
    pub stranded_free: u64,
    /// Most pods of this shape placeable at once.
    pub largest_gang: u64,
}

#[derive(Clone, Debug, PartialEq)]
pub enum PlanStatus {
    /// Nothing is pending that doesn't fit.
    NotNeeded,
    Found,
    Impossible(String),
}

#[derive(Clone, Debug, PartialEq)]
pub struct PlanStep {
    pub namespace: Sym,
    pub pod: String,
    pub from_node: Sym,
    /// Where the scheduler can put it afterwards; `None`: evicted with
    /// nowhere to go (its work is lost; a controller's replacement waits).
    pub to_node: Option<Sym>,
    pub gpus: u64,
    pub gpu_hours_disrupted: f64,
    /// Set when the pod is a member of a running gang (the whole gang moves).
    pub gang: Option<String>,
    /// The pod has held its GPUs idle this long: the cheapest to move.
    pub idle_seconds: Option<i64>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// The pending gang or pod the plan makes room for.
    pub target: Option<String>,
    /// The target's object: a gang or a lone pod.
    pub target_key: Option<ShapeSource>,
    pub target_shape: Option<String>,
    pub status: PlanStatus,
    pub steps: Vec<PlanStep>,
    pub gpu_hours: f64,
    /// Nodes the plan makes room on.
    pub nodes_freed: Vec<Sym>,
    /// Nodes whose room the target is placed in after the moves: the freed
    /// ones, then nodes that already had room. Running the plan reserves
    /// them so that the evicted pods' replacements land elsewhere.
    pub reserve: Vec<Sym>,
}

impl Plan {
    /// `4 move(s)`, or `3 move(s) and 1 eviction(s) (work lost)`.
    pub fn steps_summary(&self) -> String {
        let evictions = self.steps.iter().filter(|s| s.to_node.is_none()).count();
        let moves = self.steps.len() - evictions;
        if evictions == 0 {
            format!("{moves} move(s)")
        } else {
            format!("{moves} move(s) and {evictions} eviction(s) (work lost)")
        }
    }
}

#[derive(Clone, Debug)]
pub struct Fragmentation {
    pub shapes: Vec<ShapeFit>,
    /// Stranded free GPUs per schedulable node.
    pub stranded_by_node: BTreeMap<Sym, u64>,
    pub stranded_total: u64,
    pub free_total: u64,
    pub free_on_whole_nodes: u64,
    pub score: f64,
    pub plan: Plan,
    /// Pending pods whose GPUs come through DRA claims: not in the shapes
    /// nor the plan yet, so "everything pending fits" cannot be said.
    pub unplanned_claims: usize,
}

impl Fragmentation {
    /// Why no plan is needed, in words: DRA claims are not planned yet.
    pub fn not_needed_text(&self) -> String {
        match self.unplanned_claims {
            0 => "plan: not needed, everything pending fits".into(),
            n => format!("plan: not needed for device-plugin GPUs; {n} pod(s) waiting on DRA claims are not planned"),
        }
    }
}

pub const CANONICAL: [(u64, u32); 4] = [(1, 1), (8, 1), (8, 2), (8, 4)];

/// Pending demand: each gang with members still to place, each pending pod
/// that is not in a gang. Ordered by priority (high first), then age.
pub fn pending_demands(index: &Index<'_>) -> Vec<Demand> {
    let mut out = Vec::new();
    let mut in_gang: HashSet<PodKey> = HashSet::new();
    for (key, gang) in index.snap.gangs.iter() {
        let members = index.members(key);
        for m in members {
            in_gang.insert(m.key());
        }
        // Kueue's PodsReady: its pods run (kgpu may not tell which they are).
        if gang.is_finished() || !gang.active || gang.condition_true("PodsReady") {
            continue;
        }
        if let Some(d) = gang_demand(key, gang, members, &index.snap.namespaces) {
            out.push(d);
        }
    }
    for pod in index.pending_pods() {
        if in_gang.contains(&pod.key()) || !pod.wants_gpu() {
            continue;
        }
        out.push(pod_demand(pod, 1, ShapeSource::Pod(pod.key()), &index.snap.namespaces));
    }
    out.sort_by(|a, b| b.priority.cmp(&a.priority).then(a.created.cmp(&b.created)).then(a.source.cmp(&b.source)));
    out
}

/// What `pods` pods like `pod` ask of the fleet (`namespaces`: what its
/// rules' namespaceSelectors read).
pub fn pod_demand(pod: &Pod, pods: u32, source: ShapeSource, namespaces: &NamespaceMap) -> Demand {
    Demand {
        own_domains: domains::own_domains(pod, namespaces),
        gpus_per_pod: pod.requests.gpu,
        mig_profile: pod.requests.mig().next().map(|(p, _)| Sym::new(p)),
        pods,
        requests: pod.requests.clone(),
        tolerations: pod.tolerations.clone(),
        node_selector: pod.node_selector.clone(),
        affinity: pod.affinity.clone(),
        host_ports: pod.host_ports.clone(),
        source,
        priority: pod.priority,
        created: pod.created,
        namespace: pod.namespace.clone(),
        labels: pod.labels.clone(),
        rules: pod.rules.clone(),
        volumes: PodVolumes::of(pod),
    }
}

/// What a gang still needs of GPUs. Pod sets differ (an MPIJob's CPU
/// launcher and GPU workers, a JobSet's replicated jobs): each GPU pod set
/// counts its own missing members — matched by shape — and the set missing
/// the most GPUs is the gang's demand; CPU-only sets are no GPU demand.
/// Kueue's partial admission makes a set expect what was admitted; a gang
/// without pod sets (a Volcano PodGroup) expects every member it has, so
/// the extra members of an elastic gang (minMember < replicas) are demand too.
fn gang_demand(key: &GangKey, gang: &Gang, members: &[&Pod], namespaces: &NamespaceMap) -> Option<Demand> {
    let placed_like = |requests: &crate::model::Resources| {
        members
            .iter()
            .filter(|p| p.holds_resources() && p.requests.gpu == requests.gpu && p.requests.mig().eq(requests.mig()))
            .count() as u32
    };
    let demand_of_set = |set: &crate::model::PodSet| -> Option<Demand> {
        let missing = gang.expected_pods(set).saturating_sub(placed_like(&set.requests));
        if missing == 0 || !set.requests.wants_gpu() {
            return None;
        }
        // Constraints from a waiting member of this shape, else the template.
        if let Some(pending) = members
            .iter()
            .find(|p| p.is_pending() && p.requests.gpu == set.requests.gpu && p.requests.mig().eq(set.requests.mig()))
        {
            let mut d = pod_demand(pending, missing, ShapeSource::Gang(key.clone()), namespaces);
            d.priority = gang.priority.max(pending.priority);
            d.created = gang.created;
            return Some(d);
        }
        Some(Demand {
            gpus_per_pod: set.requests.gpu,
            mig_profile: set.requests.mig().next().map(|(p, _)| Sym::new(p)),
            pods: missing,
            requests: set.requests.clone(),
            tolerations: set.tolerations.clone(),
            node_selector: set.node_selector.clone(),
            affinity: Box::new([]),
            host_ports: Box::new([]),
            source: ShapeSource::Gang(key.clone()),
            priority: gang.priority,
            created: gang.created,
            namespace: key.namespace.clone(),
            labels: Box::new([]),
            rules: None,
            volumes: None,
            own_domains: Box::new([]),
        })
    };
    if gang.pod_sets.is_empty() {
        // No template: every member known, at least minMember, GPU members alone.
        let gpu_members: Vec<&&Pod> = members.iter().filter(|p| p.wants_gpu() && !p.phase.is_terminal()).collect();
        let expected = (gpu_members.len() as u32).max(gang.min_members);
        let placed = gpu_members.iter().filter(|p| p.holds_resources()).count() as u32;
        let pending = gpu_members.iter().find(|p| p.is_pending())?;
        let mut d =
            pod_demand(pending, expected.saturating_sub(placed).max(1), ShapeSource::Gang(key.clone()), namespaces);
        d.priority = gang.priority.max(pending.priority);
        d.created = gang.created;
        return Some(d);
    }
    gang.pod_sets
        .iter()
        .filter_map(demand_of_set)
        .max_by_key(|d| (d.pods as u64 * (d.gpus_per_pod + d.requests.mig_total()), d.gpus_per_pod))
}

/// Its volumes stop a pod of this demand before any node (a missing or
/// unbound claim): no node's room helps it.
pub(crate) fn stopped_by_volumes(index: &Index<'_>, demand: &Demand) -> bool {
    matches!(demand.volumes.as_ref().map(|v| v.prepare(index)), Some(Prepared::Refused(_)))
}

/// Per node (in `Index::node_list` order), whether the rules about other
/// objects let a pod of this demand run there, as the pending chain's fit
/// step decides: its volumes (the volume filters), the host ports pods
/// there already bind (NodePorts), and the other pods' and its own
/// inter-pod rules (PodTopologySpread, InterPodAffinity). Every node for a
/// demand with none of these. `None`: its volumes stop it before any node
/// (a missing or unbound claim).
pub(crate) fn allowed_nodes(index: &Index<'_>, demand: &Demand) -> Option<Vec<bool>> {
    let nodes = index.node_list();
    let volumes = demand.volumes.as_ref().map(|v| v.prepare(index));
    let check = match volumes {
        Some(Prepared::Refused(_)) => return None,
        Some(Prepared::Check(check)) => Some(check),
        _ => None,
    };
    let incoming = demand.incoming();
    // As the pending chain: rules kgpu cannot evaluate (namespaces it cannot read) keep nothing away.
    let inter_pod =
        if demand.is_pending() { InterPod::prepare_readable(index, &incoming).ok().flatten() } else { None };
    if check.is_none() && inter_pod.is_none() && demand.host_ports.is_empty() && !index.has_nominations() {
        return Some(vec![true; nodes.len()]);
    }
    let mut reasons = Vec::new();
    Some(
        nodes
            .iter()
            .map(|n| {
                reasons.clear();
                if let Some(c) = &check {
                    c.reasons_into(n, &mut reasons);
                }
                let ahead = if demand.is_pending() { demand.nominated_ahead(index, &n.name) } else { Vec::new() };
                InterPod::node_reasons_into(inter_pod.as_ref(), &incoming, n, &ahead, &mut reasons);
                // Nominated pods bind their host ports too (as in the pending chain's fit step).
                let ports_taken =
                    index.pods_on(&n.name).iter().chain(&ahead).any(|p| fit::port_conflict(&demand.host_ports, p));
                reasons.is_empty() && !ports_taken
            })
            .collect(),
    )
}

/// The canonical shapes; their pods tolerate the usual GPU taint keys.
pub fn canonical_demands() -> Vec<Demand> {
    CANONICAL
        .iter()
        .map(|&(gpus, pods)| Demand {
            gpus_per_pod: gpus,
            mig_profile: None,
            pods,
            requests: Resources::from_pairs([(keys::RESOURCE_GPU, gpus)]),
            tolerations: Box::new([Toleration::exists(keys::RESOURCE_GPU), Toleration::exists("gpu")]),
            node_selector: Box::new([]),
            affinity: Box::new([]),
            host_ports: Box::new([]),
            source: ShapeSource::Canonical,
            priority: 0,
            created: 0,
            namespace: Sym::new("default"),
            labels: Box::new([]),
            rules: None,
            volumes: None,
            own_domains: Box::new([]),
        })
        .collect()
}

/// Pods of `demand` that fit on `node` given `used`, 0 if it may not run there.
pub fn slots(demand: &Demand, node: &Node, used: &Tally) -> u64 {
    if fit::placement_verdicts(&demand.shape(), node).is_empty() { room(demand, node, used) } else { 0 }
}

/// Pods of `demand` that fit in `node`'s free resources, placement aside.
pub fn room(demand: &Demand, node: &Node, used: &Tally) -> u64 {
    room_with_dra(demand, node, used, 0)
}

/// [`room`] where the node also has `dra_whole_free` whole GPUs free
/// through DRA: a what-if shape's pod takes its GPUs whichever way the node
/// offers them (one way: a GPU offered both ways is one GPU).
fn room_with_dra(demand: &Demand, node: &Node, used: &Tally, dra_whole_free: u64) -> u64 {
    let free = |name: &str, alloc: u64| alloc.saturating_sub(used.get(name));
    let mut n = u64::MAX;
    let mut limit = |have: u64, need: u64| {
        if let Some(k) = have.checked_div(need) {
            n = n.min(k);
        }
    };
    let r = &demand.requests;
    let a = &node.allocatable;
    limit(a.cpu_milli.saturating_sub(used.cpu_milli), r.cpu_milli);
    limit(a.memory.saturating_sub(used.memory), r.memory);
    if a.pods > 0 {
        limit(a.pods.saturating_sub(used.pods), 1);
    }
    limit(a.gpu.saturating_sub(used.gpu).max(dra_whole_free), r.gpu);
    for (name, amount) in r.extended.iter() {
        limit(free(name.as_str(), a.get(name.as_str())), *amount);
    }
    // Two pods binding the same host port cannot share a node, nor two
    // replicas whose anti-affinity refuses each other per node.
    if !demand.host_ports.is_empty() || demand.repels_itself_per_node() {
        n = n.min(1);
    }
    if n == u64::MAX { 0 } else { n }
}

/// A node's GPUs as the fleet counts them (see `supply`).
#[derive(Clone, Copy)]
struct NodeGpus {
    buckets: super::supply::GpuBuckets,
    /// Free GPUs a whole-GPU pod can have: not MIG, not replicas.
    whole_free: u64,
    /// Time-slicing: replicas per GPU.
    replicas_per_gpu: Option<u64>,
    /// Whole GPUs through DRA: published (untainted), and free (counted in `whole_free` too).
    dra_whole: u64,
    dra_whole_free: u64,
}

fn unit_size(d: &Demand) -> u64 {
    match d.mig_profile.clone() {
        Some(p) => d.requests.get(&format!("{}{p}", keys::RESOURCE_MIG_PREFIX)).max(1),
        None => d.gpus_per_pod,
    }
}

pub fn analyze(index: &Index<'_>) -> Fragmentation {
    let pending = pending_demands(index);
    let nodes = index.node_list();

    let mut shapes = Vec::new();
    // Per node (by position): may some pending whole-GPU shape use it, and
    // the most free GPUs any of them can use there.
    let mut usable_by_node: Vec<Option<u64>> = vec![None; nodes.len()];
    // (largest gang, usable, stranded) per distinct demand key.
    let mut seen: HashMap<DemandKey, (u64, u64, u64)> = HashMap::new();
    let empty = Tally::default();
    // Per node (by position), its GPUs as the fleet counts them: the
    // physical GPUs free, and whole GPUs free (not MIG, not a replica).
    let gpus: Vec<NodeGpus> = index
        .nodes_with_usage()
        .map(|(node, used)| {
            let supply = super::supply::supply(index, node);
            let buckets = supply.buckets(node, used, true);
            let (dra_whole, dra_whole_free) = supply.dra.map_or((0, 0), |d| (d.whole, d.whole_free));
            let whole_free = match supply.replicas {
                // Time-sliced: the GPUs none of whose replicas is allocated.
                Some(_) => buckets.free,
                // MIG GPUs are not whole GPUs; unhealthy ones are not free.
                None => node.allocatable.gpu.saturating_sub(used.gpu).max(dra_whole_free).min(buckets.free),
            };
            NodeGpus {
                buckets,
                whole_free,
                replicas_per_gpu: supply.replicas.map(|r| r.per_gpu as u64),
                dra_whole,
                dra_whole_free,
            }
        })
        .collect();
    // Running pods' required anti-affinity may refuse some pending pods and
    // not others of the same shape: then their namespace and labels count.
    for demand in pending.into_iter().chain(canonical_demands()) {
        let key = demand.key_in(index);
        let (largest, usable, stranded) = match seen.get(&key) {
            Some(found) => *found,
            None => {
                let size = unit_size(&demand);
                let placement = index.placement(&demand.shape());
                // Its volumes, ports and pod rules keep it off nodes as the pending chain says.
                let allowed = allowed_nodes(index, &demand);
                let (mut largest, mut usable, mut stranded) = (0, 0, 0);
                let mut domains = OwnDomains::of(&demand);
                for (i, ((node, used), blockers)) in index.nodes_with_usage().zip(placement.iter()).enumerate() {
                    if !allowed.as_ref().is_some_and(|ok| ok[i]) {
                        continue;
                    }
                    // Only nodes this shape may use at all, and that are big enough
                    // for one pod when empty: elsewhere a free GPU is idle, not stranded.
                    let NodeGpus { whole_free, replicas_per_gpu, dra_whole, dra_whole_free, .. } = gpus[i];
                    // A what-if shape takes DRA's whole GPUs too; a pending pod
                    // that asks nvidia.com/gpu cannot (its claims are not planned).
                    let what_if = demand.source == ShapeSource::Canonical;
                    let (dra_all, dra) = if what_if { (dra_whole, dra_whole_free) } else { (0, 0) };
                    // A what-if shape asks for whole GPUs: a time-slicing replica
                    // is a turn on a shared GPU, not one (a pending pod that asks
                    // nvidia.com/gpu there gets replicas: the scheduler's truth).
                    let replicas_only = replicas_per_gpu.is_some() && demand.source == ShapeSource::Canonical;
                    if !index.accepts_work(node)
                        || !blockers.is_empty()
                        || replicas_only
                        || room_with_dra(&demand, node, &empty, dra_all) == 0
                    {
                        continue;
                    }
                    // Room the scheduler holds for pods nominated here ahead of it is not room.
                    let held = used.with_pods(&demand.nominated_ahead(index, &node.name));
                    let promised = held.as_ref().map_or(0, |h| h.gpu.saturating_sub(used.gpu));
                    // Usable and stranded count what the node could give the shape;
                    // how many pods fit at once counts one per domain of its own
                    // anti-affinity (a zone's second node is not stranded for that).
                    let s = room_with_dra(&demand, node, held.as_ref().unwrap_or(used), dra);
                    largest = u64::saturating_add(largest, domains.take(node, s));
                    // Usable and free in the demand's units: MIG slices, or physical
                    // GPUs (replicas taken by a shape fill whole GPUs only at r per GPU).
                    let (free, used_by_shape) = match &demand.mig_profile {
                        Some(p) => (index.free_mig(node, p.as_str()), s.saturating_mul(size)),
                        // GPUs promised to a nominated pod are neither usable nor stranded.
                        None => {
                            let free = whole_free.saturating_sub(promised);
                            (free, s.saturating_mul(size).div_ceil(replicas_per_gpu.unwrap_or(1)).min(free))
                        }
                    };
                    usable = u64::saturating_add(usable, used_by_shape);
                    stranded = u64::saturating_add(stranded, free.saturating_sub(used_by_shape));
                    if demand.is_pending() && demand.mig_profile.is_none() {
                        let e = usable_by_node[i].get_or_insert(0);
                        *e = (*e).max(used_by_shape);
                    }
                }
                seen.insert(key, (largest, usable, stranded));
                (largest, usable, stranded)
            }
        };
        shapes.push(ShapeFit {
            fits_now: largest >= demand.pods as u64,
            usable_free: usable,
            stranded_free: stranded,
            largest_gang: largest,
            demand,
        });
    }

    let mut stranded_by_node = BTreeMap::new();
    let mut free_total = 0;
    let mut free_on_whole_nodes = 0;
    for ((node, usable), NodeGpus { buckets, whole_free, .. }) in index.node_list().iter().zip(usable_by_node).zip(gpus)
    {
        if !index.accepts_work(node) {
            continue;
        }
        // Physical GPUs, as the fleet's totals count them (MIG GPUs with no
        // slice allocated included; a replica is not a GPU).
        free_total = u64::saturating_add(free_total, buckets.free);
        if buckets.free > 0 && buckets.used == 0 {
            free_on_whole_nodes = u64::saturating_add(free_on_whole_nodes, buckets.free);
        }
        if let Some(usable) = usable {
            let stranded = whole_free.saturating_sub(usable);
            if stranded > 0 {
                stranded_by_node.insert(node.name.clone(), stranded);
            }
        }
    }
    let stranded_total = stranded_by_node.values().fold(0u64, |s, v| s.saturating_add(*v));
    let score = if free_total == 0 { 0.0 } else { 1.0 - free_on_whole_nodes as f64 / free_total as f64 };
    let plan = plan(index, &shapes);
    let unplanned_claims = index.pending_pods().iter().filter(|p| !p.claims.is_empty()).count();
    Fragmentation {
        shapes,
        stranded_by_node,
        stranded_total,
        free_total,
        free_on_whole_nodes,
        score,
        plan,
        unplanned_claims,
    }
}

mod domains;
mod plan;
pub use domains::OwnDomains;
pub use plan::{MAX_NODES_FREED, plan};

#[cfg(test)]
mod tests;
