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

use crate::model::{
    Gang, GangKey, Labels, Node, NodeSelectorTerm, Pod, PodKey, PodPhase, Resources, Sym, Timestamp, Toleration, keys,
};

use super::fit::{self, Filter, Shape};
use super::index::Index;
use super::tally::Tally;

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
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
    pub source: ShapeSource,
    pub priority: i32,
    pub created: Timestamp,
}

impl Demand {
    pub fn shape(&self) -> Shape<'_> {
        Shape {
            requests: &self.requests,
            tolerations: &self.tolerations,
            node_selector: &self.node_selector,
            affinity: &self.affinity,
        }
    }

    pub fn label(&self) -> String {
        match self.mig_profile {
            Some(p) => format!("{}×{p}", self.pods),
            None => format!("{}×{}", self.pods, self.gpus_per_pod),
        }
    }

    pub fn is_pending(&self) -> bool {
        self.source != ShapeSource::Canonical
    }
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
    /// Where the scheduler can put it afterwards.
    pub to_node: Sym,
    pub gpus: u64,
    pub gpu_hours_disrupted: f64,
    /// Set when the pod is a member of a running gang (the whole gang moves).
    pub gang: Option<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// The pending gang or pod the plan makes room for.
    pub target: Option<String>,
    pub target_shape: Option<String>,
    pub status: PlanStatus,
    pub steps: Vec<PlanStep>,
    pub gpu_hours: f64,
    /// Nodes that end up with room for the target.
    pub nodes_freed: Vec<Sym>,
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
        if gang.is_finished() || !gang.active {
            continue;
        }
        if let Some(d) = gang_demand(key, gang, members) {
            out.push(d);
        }
    }
    for pod in &index.pending_pods {
        if in_gang.contains(&pod.key()) || !pod.wants_gpu() {
            continue;
        }
        out.push(pod_demand(pod, 1, ShapeSource::Pod(pod.key())));
    }
    out.sort_by(|a, b| b.priority.cmp(&a.priority).then(a.created.cmp(&b.created)).then(a.source.cmp(&b.source)));
    out
}

fn pod_demand(pod: &Pod, pods: u32, source: ShapeSource) -> Demand {
    Demand {
        gpus_per_pod: pod.requests.gpu,
        mig_profile: pod.requests.mig().next().map(|(p, _)| Sym::new(p)),
        pods,
        requests: pod.requests.clone(),
        tolerations: pod.tolerations.clone(),
        node_selector: pod.node_selector.clone(),
        affinity: pod.affinity.clone(),
        source,
        priority: pod.priority,
        created: pod.created,
    }
}

fn gang_demand(key: &GangKey, gang: &Gang, members: &[&Pod]) -> Option<Demand> {
    let placed = members.iter().filter(|p| p.holds_resources()).count() as u32;
    let total = gang.total_pods().max(gang.min_members);
    if placed >= total {
        return None;
    }
    let missing = total - placed;
    // Constraints from a waiting member when one exists, else the template.
    if let Some(pending) = members.iter().find(|p| p.is_pending() && p.wants_gpu()) {
        let mut d = pod_demand(pending, missing, ShapeSource::Gang(key.clone()));
        d.priority = gang.priority.max(pending.priority);
        d.created = gang.created;
        return Some(d);
    }
    let set = gang.pod_sets.iter().max_by_key(|ps| ps.requests.gpu + ps.requests.mig_total())?;
    if !set.requests.wants_gpu() {
        return None;
    }
    Some(Demand {
        gpus_per_pod: set.requests.gpu,
        mig_profile: set.requests.mig().next().map(|(p, _)| Sym::new(p)),
        pods: missing,
        requests: set.requests.clone(),
        tolerations: set.tolerations.clone(),
        node_selector: set.node_selector.clone(),
        affinity: Box::new([]),
        source: ShapeSource::Gang(key.clone()),
        priority: gang.priority,
        created: gang.created,
    })
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
            source: ShapeSource::Canonical,
            priority: 0,
            created: 0,
        })
        .collect()
}

/// Pods of `demand` that fit on `node` given `used`, 0 if it may not run there.
pub fn slots(demand: &Demand, node: &Node, used: &Tally) -> u64 {
    let shape = demand.shape();
    let blocked = fit::verdicts(&shape, node, &Tally::default()).iter().any(|r| r.filter() != Filter::NodeResourcesFit);
    if blocked {
        return 0;
    }
    let free = |name: &str, alloc: u64| alloc.saturating_sub(used.get(name));
    let mut n = u64::MAX;
    let mut limit = |have: u64, need: u64| {
        if let Some(k) = have.checked_div(need) {
            n = n.min(k);
        }
    };
    let r = &demand.requests;
    limit(free("cpu", node.allocatable.cpu_milli), r.cpu_milli);
    limit(free("memory", node.allocatable.memory), r.memory);
    if node.allocatable.pods > 0 {
        limit(free("pods", node.allocatable.pods), 1);
    }
    limit(free(keys::RESOURCE_GPU, node.allocatable.gpu), r.gpu);
    for (name, amount) in r.extended.iter() {
        limit(free(name.as_str(), node.allocatable.get(name.as_str())), *amount);
    }
    if n == u64::MAX { 0 } else { n }
}

fn unit_size(d: &Demand) -> u64 {
    match d.mig_profile {
        Some(p) => d.requests.get(&format!("{}{p}", keys::RESOURCE_MIG_PREFIX)).max(1),
        None => d.gpus_per_pod,
    }
}

fn free_units(index: &Index<'_>, d: &Demand, node: &Node) -> u64 {
    match d.mig_profile {
        Some(p) => index.free_mig(node, p.as_str()),
        None => index.free_gpus(node),
    }
}

pub fn analyze(index: &Index<'_>) -> Fragmentation {
    let pending = pending_demands(index);
    let schedulable: Vec<&Node> = index.nodes().filter(|n| Index::schedulable(n)).collect();

    let mut shapes = Vec::new();
    let mut usable_by_node: HashMap<Sym, u64> = HashMap::new();
    let mut eligible_nodes: HashSet<Sym> = HashSet::new();
    for demand in pending.iter().cloned().chain(canonical_demands()) {
        let size = unit_size(&demand);
        let mut largest = 0;
        let mut usable = 0;
        let mut stranded = 0;
        for node in &schedulable {
            // Only nodes this shape may use at all, and that are big enough
            // for one pod when empty: elsewhere a free GPU is idle, not stranded.
            if slots(&demand, node, &Tally::default()) == 0 {
                continue;
            }
            let s = slots(&demand, node, index.used(node.name));
            largest += s;
            usable += s * size;
            stranded += free_units(index, &demand, node).saturating_sub(s * size);
            if demand.is_pending() && demand.mig_profile.is_none() {
                eligible_nodes.insert(node.name);
                let e = usable_by_node.entry(node.name).or_default();
                *e = (*e).max(s * size);
            }
        }
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
    for node in &schedulable {
        let free = index.free_gpus(node);
        free_total += free;
        if free > 0 && free == node.allocatable.gpu {
            free_on_whole_nodes += free;
        }
        if eligible_nodes.contains(&node.name) {
            let stranded = free.saturating_sub(usable_by_node.get(&node.name).copied().unwrap_or(0));
            if stranded > 0 {
                stranded_by_node.insert(node.name, stranded);
            }
        }
    }
    let stranded_total = stranded_by_node.values().sum();
    let score = if free_total == 0 { 0.0 } else { 1.0 - free_on_whole_nodes as f64 / free_total as f64 };
    let plan = plan(index, &shapes);
    Fragmentation { shapes, stranded_by_node, stranded_total, free_total, free_on_whole_nodes, score, plan }
}

/// The best option so far: (pods moved, GPU-hours, node freed, moves per unit).
type Candidate<'a> = (usize, f64, Sym, Vec<(Vec<&'a Pod>, Option<String>, Vec<Sym>)>);

/// A unit that moves as one: a lone pod, or every member of a running gang.
struct Unit<'a> {
    pods: Vec<&'a Pod>,
    gang: Option<String>,
    gpu_hours: f64,
}

fn pod_gpu_hours(pod: &Pod, now: Timestamp) -> f64 {
    let gpus = pod.requests.gpu as f64 + pod.requests.mig_total() as f64;
    let hours = (now - pod.transitioned).max(0) as f64 / 3600.0;
    gpus * hours
}

fn demand_name(index: &Index<'_>, d: &Demand) -> String {
    match &d.source {
        ShapeSource::Gang(k) => format!("{} {}/{}", k.kind.kind_name(), k.namespace, k.name),
        ShapeSource::Pod(k) => format!("Pod {}/{}", k.namespace, k.name),
        ShapeSource::Canonical => {
            let _ = index;
            "canonical shape".into()
        }
    }
}

/// The fewest moves (evict, then the controller's replacement lands on a
/// named node) that let the top pending GPU gang fit; ties go to the least
/// GPU-hours disrupted. Whole-GPU shapes only.
pub fn plan(index: &Index<'_>, shapes: &[ShapeFit]) -> Plan {
    let not_needed = Plan {
        target: None,
        target_shape: None,
        status: PlanStatus::NotNeeded,
        steps: Vec::new(),
        gpu_hours: 0.0,
        nodes_freed: Vec::new(),
    };
    let Some(target) = shapes
        .iter()
        .find(|s| s.demand.is_pending() && !s.fits_now && s.demand.mig_profile.is_none() && s.demand.gpus_per_pod > 0)
    else {
        return not_needed;
    };
    let demand = &target.demand;
    let g = demand.gpus_per_pod;
    let mut result = Plan {
        target: Some(demand_name(index, demand)),
        target_shape: Some(demand.label()),
        status: PlanStatus::Impossible(String::new()),
        steps: Vec::new(),
        gpu_hours: 0.0,
        nodes_freed: Vec::new(),
    };
    let schedulable: Vec<&Node> = index.nodes().filter(|n| Index::schedulable(n)).collect();
    // Nodes the target may use at all, with room for at least one pod when empty.
    let eligible: Vec<&Node> =
        schedulable.iter().copied().filter(|n| slots(demand, n, &Tally::default()) > 0).collect();
    let capacity: u64 = eligible.iter().map(|n| slots(demand, n, &Tally::default())).sum();
    if capacity < demand.pods as u64 {
        result.status = PlanStatus::Impossible(format!(
            "even an empty fleet has room for only {capacity} of {} pod(s) of {} GPU(s) on nodes this work may use",
            demand.pods, g
        ));
        return result;
    }

    // Working copy of usage per node.
    let mut used: HashMap<Sym, Tally> = index.nodes().map(|n| (n.name, index.used(n.name).clone())).collect();
    let slots_now = |used: &HashMap<Sym, Tally>, n: &Node| slots(demand, n, &used[&n.name]);
    let mut have: u64 = eligible.iter().map(|n| slots_now(&used, n)).sum();
    let need = demand.pods as u64;
    let mut moved: HashSet<PodKey> = HashSet::new();
    let mut freed_nodes = Vec::new();
    // Nodes whose slots are promised to the target: never a destination.
    let mut reserved: HashSet<Sym> = HashSet::new();

    while have < need {
        // Best single-node option: the cheapest set of units whose moves
        // raise that node's slots by at least one.
        let mut best: Option<Candidate> = None;
        for node in &eligible {
            let units = movable_units(index, node.name, &moved);
            if units.is_empty() {
                continue;
            }
            let current = slots_now(&used, node);
            // Try subsets of the (at most 10) cheapest units.
            let mut candidates: Vec<&Unit> = units.iter().collect();
            candidates.sort_by(|a, b| a.gpu_hours.total_cmp(&b.gpu_hours));
            candidates.truncate(10);
            let n = candidates.len();
            for mask in 1u32..(1 << n) {
                let chosen: Vec<&Unit> = (0..n).filter(|i| mask & (1 << i) != 0).map(|i| candidates[i]).collect();
                let pods: usize = chosen.iter().map(|u| u.pods.len()).sum();
                let cost: f64 = chosen.iter().map(|u| u.gpu_hours).sum();
                if let Some((bp, bc, _, _)) = &best
                    && (pods > *bp || pods == *bp && cost >= *bc)
                {
                    continue;
                }
                let mut trial = used.clone();
                for u in &chosen {
                    for p in &u.pods {
                        if let Some(pn) = p.node
                            && let Some(t) = trial.get_mut(&pn)
                        {
                            subtract(t, &p.requests);
                        }
                    }
                }
                if slots_now(&trial, node) <= current {
                    continue;
                }
                // Every moved pod must land elsewhere without costing the target a slot.
                let mut blocked = reserved.clone();
                blocked.insert(node.name);
                let Some(destinations) = place_units(index, demand, &chosen, &mut trial, &blocked) else {
                    continue;
                };
                let plan_units =
                    chosen.iter().zip(destinations).map(|(u, d)| (u.pods.clone(), u.gang.clone(), d)).collect();
                best = Some((pods, cost, node.name, plan_units));
            }
        }
        let Some((_, _, node_name, units)) = best else {
            result.status = PlanStatus::Impossible(format!(
                "{have} of {need} slot(s) reachable: the pods in the way cannot land anywhere else (their own taints, selectors or sizes)"
            ));
            result.steps.clear();
            result.gpu_hours = 0.0;
            return result;
        };
        for (pods, gang, destinations) in units {
            for (pod, to) in pods.into_iter().zip(destinations) {
                let from = pod.node.unwrap_or(node_name);
                if let Some(t) = used.get_mut(&from) {
                    subtract(t, &pod.requests);
                }
                if let Some(t) = used.get_mut(&to) {
                    t.add_pod(&pod.requests);
                }
                let hours = pod_gpu_hours(pod, index.now);
                result.gpu_hours += hours;
                moved.insert(pod.key());
                result.steps.push(PlanStep {
                    namespace: pod.namespace,
                    pod: pod.name.to_string(),
                    from_node: from,
                    to_node: to,
                    gpus: pod.requests.gpu,
                    gpu_hours_disrupted: hours,
                    gang: gang.clone(),
                });
            }
        }
        reserved.insert(node_name);
        if !freed_nodes.contains(&node_name) {
            freed_nodes.push(node_name);
        }
        have = eligible.iter().map(|n| slots_now(&used, n)).sum();
    }
    result.status = PlanStatus::Found;
    result.nodes_freed = freed_nodes;
    result
}

fn subtract(t: &mut Tally, r: &Resources) {
    t.cpu_milli = t.cpu_milli.saturating_sub(r.cpu_milli);
    t.memory = t.memory.saturating_sub(r.memory);
    t.gpu = t.gpu.saturating_sub(r.gpu);
    t.pods = t.pods.saturating_sub(1);
    for (name, amount) in r.extended.iter() {
        if let Some((_, v)) = t.extended.iter_mut().find(|(s, _)| s == name) {
            *v = v.saturating_sub(*amount);
        }
    }
}

/// Running GPU work on `node` that a controller would recreate: lone pods,
/// and running gangs whose members all sit on this node.
fn movable_units<'a>(index: &Index<'a>, node: Sym, moved: &HashSet<PodKey>) -> Vec<Unit<'a>> {
    let mut units = Vec::new();
    let mut seen_gangs = HashSet::new();
    for pod in index.pods_on(node) {
        if !pod.wants_gpu() || pod.owner.is_none() || pod.mirror || moved.contains(&pod.key()) {
            continue;
        }
        if pod.owner_kind() == Some("DaemonSet") || pod.phase != PodPhase::Running {
            continue;
        }
        match index.gang_of(&pod.key()) {
            Some(gang) => {
                if !seen_gangs.insert(gang.clone()) {
                    continue;
                }
                let members: Vec<&Pod> = index.members(gang).iter().copied().filter(|p| p.holds_resources()).collect();
                if members.iter().any(|p| p.node != Some(node)) {
                    continue; // a gang spread over nodes moves as a whole elsewhere; not planned
                }
                let hours = members.iter().map(|p| pod_gpu_hours(p, index.now)).sum();
                units.push(Unit {
                    pods: members,
                    gang: Some(format!("{}/{}", gang.namespace, gang.name)),
                    gpu_hours: hours,
                });
            }
            None => units.push(Unit { pods: vec![pod], gang: None, gpu_hours: pod_gpu_hours(pod, index.now) }),
        }
    }
    units
}

/// Finds a destination for every pod of every unit (best fit: the fullest
/// node that takes it), never on `blocked` nodes and never costing the
/// target a slot. Updates `trial`.
fn place_units(
    index: &Index<'_>,
    target: &Demand,
    units: &[&Unit],
    trial: &mut HashMap<Sym, Tally>,
    blocked: &HashSet<Sym>,
) -> Option<Vec<Vec<Sym>>> {
    let mut all = Vec::new();
    for unit in units {
        let mut dests = Vec::new();
        for pod in &unit.pods {
            let shape = Shape::of(pod);
            let mut best: Option<(u64, Sym)> = None;
            for node in index.nodes() {
                if blocked.contains(&node.name) || Some(node.name) == pod.node || !Index::schedulable(node) {
                    continue;
                }
                let used = &trial[&node.name];
                if !fit::verdicts(&shape, node, used).is_empty() {
                    continue;
                }
                let before = slots(target, node, used);
                let mut after_used = used.clone();
                after_used.add_pod(&pod.requests);
                if slots(target, node, &after_used) < before {
                    continue;
                }
                let free = node.allocatable.gpu.saturating_sub(used.gpu);
                if best.is_none_or(|(f, n)| free < f || free == f && node.name < n) {
                    best = Some((free, node.name));
                }
            }
            let (_, dest) = best?;
            if let Some(t) = trial.get_mut(&dest) {
                t.add_pod(&pod.requests);
            }
            dests.push(dest);
        }
        all.push(dests);
    }
    Some(all)
}
