//! Pending demand as the fragmentation map sees it: each pending gang or
//! pod (and the canonical what-if shapes) as a shape with its pods'
//! constraints, and the rules about other objects (volumes, ports, inter-pod
//! rules) that keep it off nodes.

use std::collections::HashSet;
use std::sync::Arc;

use crate::analysis::dra::cel::Selectors;
use crate::analysis::fit::{self, PlacementKey, Shape};
use crate::analysis::index::Index;
use crate::analysis::inter_pod::InterPod;
use crate::analysis::volumes::Prepared;
use crate::model::{
    Gang, GangKey, HostPort, Labels, NamespaceMap, NodeSelectorTerm, Pod, PodKey, Resources, Sym, Timestamp,
    Toleration, keys,
};

use super::domains;
use super::dra::{self, DraAsk};
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
    /// Its GPUs come through DRA claims (`gpus_per_pod` counts them).
    pub dra: Option<Arc<DraAsk>>,
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
    /// It asks for GPUs or MIG slices, through the device plugin or DRA.
    pub fn wants_gpu(&self) -> bool {
        self.requests.wants_gpu() || self.dra.is_some()
    }

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
        match (self.mig_profile.clone(), &self.dra) {
            (Some(p), _) => format!("{}×{p}", self.pods),
            (None, Some(ask)) => crate::analysis::dra::shape_label(self.pods.into(), self.gpus_per_pod, ask.partitions),
            (None, None) => format!("{}×{}", self.pods, self.gpus_per_pod),
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
            dra: self.dra.clone(),
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
    dra: Option<Arc<DraAsk>>,
}

pub const CANONICAL: [(u64, u32); 4] = [(1, 1), (8, 1), (8, 2), (8, 4)];

/// Pending demand: each gang with members still to place, each pending pod
/// that is not in a gang. Ordered by priority (high first), then age.
pub fn pending_demands(index: &Index<'_>) -> Vec<Demand> {
    let mut selectors = Selectors::default();
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
        if let Some(d) = gang_demand(index, &mut selectors, key, gang, members) {
            out.push(d);
        }
    }
    for pod in index.pending_pods() {
        if in_gang.contains(&pod.key()) {
            continue;
        }
        let d = with_claims(
            index,
            &mut selectors,
            pod,
            pod_demand(pod, 1, ShapeSource::Pod(pod.key()), &index.snap.namespaces),
        );
        if d.wants_gpu() {
            out.push(d);
        }
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
        dra: None,
    }
}

/// `demand` of `pod` with the GPUs its DRA claims ask, if they ask some.
fn with_claims(index: &Index<'_>, selectors: &mut Selectors, pod: &Pod, mut demand: Demand) -> Demand {
    if let Some(ask) = DraAsk::of(index, selectors, &pod.namespace, &pod.claims) {
        demand.gpus_per_pod += ask.gpus;
        demand.dra = Some(ask);
    }
    demand
}

/// What a gang still needs of GPUs. Pod sets differ (an MPIJob's CPU
/// launcher and GPU workers, a JobSet's replicated jobs): each GPU pod set
/// counts its own missing members — matched by shape — and the set missing
/// the most GPUs is the gang's demand; CPU-only sets are no GPU demand.
/// Kueue's partial admission makes a set expect what was admitted; a gang
/// without pod sets (a Volcano PodGroup) expects every member it has, so
/// the extra members of an elastic gang (minMember < replicas) are demand too.
fn gang_demand(
    index: &Index<'_>,
    selectors: &mut Selectors,
    key: &GangKey,
    gang: &Gang,
    members: &[&Pod],
) -> Option<Demand> {
    let namespaces = &index.snap.namespaces;
    // Members of a set: its resources, and its claims' entries.
    let like = |p: &Pod, set: &crate::model::PodSet| {
        p.requests.gpu == set.requests.gpu
            && p.requests.mig().eq(set.requests.mig())
            && dra::same_claims(&p.claims, &set.claims)
    };
    let mut demand_of_set = |set: &crate::model::PodSet| -> Option<Demand> {
        let placed = members.iter().filter(|p| p.holds_resources() && like(p, set)).count() as u32;
        let missing = gang.expected_pods(set).saturating_sub(placed);
        let ask = DraAsk::of(index, selectors, &key.namespace, &set.claims);
        if missing == 0 || !(set.requests.wants_gpu() || ask.is_some()) {
            return None;
        }
        // Constraints from a waiting member of this shape, else the template.
        if let Some(pending) = members.iter().find(|p| p.is_pending() && like(p, set)) {
            let mut d = pod_demand(pending, missing, ShapeSource::Gang(key.clone()), namespaces);
            d.priority = gang.priority.max(pending.priority);
            d.created = gang.created;
            if let Some(ask) = ask {
                d.gpus_per_pod += ask.gpus;
                d.dra = Some(ask);
            }
            return Some(d);
        }
        Some(Demand {
            gpus_per_pod: set.requests.gpu + ask.as_ref().map_or(0, |a| a.gpus),
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
            dra: ask,
        })
    };
    if gang.pod_sets.is_empty() {
        // No template: every member known, at least minMember, GPU members alone.
        let mut asks_gpus = |p: &Pod| {
            p.wants_gpu() || (!p.claims.is_empty() && DraAsk::of(index, selectors, &p.namespace, &p.claims).is_some())
        };
        let gpu_members: Vec<&&Pod> = members.iter().filter(|p| !p.phase.is_terminal() && asks_gpus(p)).collect();
        let expected = (gpu_members.len() as u32).max(gang.min_members);
        let placed = gpu_members.iter().filter(|p| p.holds_resources()).count() as u32;
        let pending = gpu_members.iter().find(|p| p.is_pending())?;
        let d = pod_demand(pending, expected.saturating_sub(placed).max(1), ShapeSource::Gang(key.clone()), namespaces);
        let mut d = with_claims(index, selectors, pending, d);
        d.priority = gang.priority.max(pending.priority);
        d.created = gang.created;
        return Some(d);
    }
    gang.pod_sets
        .iter()
        .filter_map(&mut demand_of_set)
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
            dra: None,
        })
        .collect()
}
