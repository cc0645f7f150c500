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

use std::collections::{BTreeMap, HashMap};

use crate::model::{Node, Resources, Sym, keys};

use super::dra::cel::Selectors;
use super::dra::claims::ThroughDra;
use super::dra::room::Ask;
use super::fit;
use super::index::Index;
use super::tally::Tally;

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
    /// Nodes it may use that could hold one of its pods were they empty.
    pub nodes_big_enough: u64,
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
    /// Pending pods whose claims name a missing claim or template: what
    /// they ask is unknown, so they are in no shape and "everything pending
    /// fits" cannot be said.
    pub unplanned_claims: usize,
}

impl Fragmentation {
    /// Why no plan is needed, in words.
    pub fn not_needed_text(&self) -> String {
        match self.unplanned_claims {
            0 => "plan: not needed, everything pending fits".into(),
            n => format!(
                "plan: not needed for the shapes above; {n} pod(s) whose claims name a missing claim or template are not in them (see their claims step)"
            ),
        }
    }
}

/// Pods of `demand` that fit on `node` given `used`, 0 if it may not run there.
pub fn slots(demand: &Demand, node: &Node, used: &Tally) -> u64 {
    if fit::placement_verdicts(&demand.shape(), node).is_empty() { room(demand, node, used) } else { 0 }
}

/// Pods of `demand` that fit in `node`'s free resources, placement aside.
pub fn room(demand: &Demand, node: &Node, used: &Tally) -> u64 {
    room_with_dra(demand, node, used, 0)
}

/// [`room`] for `requests` in place of the demand's own: what the node's
/// resources must give where DRA serves some of them (its devices are the
/// claims step's to weigh).
pub fn room_for(demand: &Demand, requests: &Resources, node: &Node, used: &Tally) -> u64 {
    room_of(demand, requests, node, used, 0)
}

/// [`room`] where the node also has `dra_whole_free` whole GPUs free
/// through DRA: a what-if shape's pod takes its GPUs whichever way the node
/// offers them (one way: a GPU offered both ways is one GPU).
fn room_with_dra(demand: &Demand, node: &Node, used: &Tally, dra_whole_free: u64) -> u64 {
    room_of(demand, &demand.requests, node, used, dra_whole_free)
}

fn room_of(demand: &Demand, r: &Resources, node: &Node, used: &Tally, dra_whole_free: u64) -> u64 {
    let free = |name: &str, alloc: u64| alloc.saturating_sub(used.get(name));
    let mut n = u64::MAX;
    let mut limit = |have: u64, need: u64| {
        if let Some(k) = have.checked_div(need) {
            n = n.min(k);
        }
    };
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
    // (largest gang, usable, stranded, nodes big enough) per distinct demand key.
    let mut seen: HashMap<DemandKey, (u64, u64, u64, u64)> = HashMap::new();
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
    let mut selectors = Selectors::default();
    // Running pods' required anti-affinity may refuse some pending pods and
    // not others of the same shape: then their namespace and labels count.
    for demand in pending.into_iter().chain(canonical_demands()) {
        let key = demand.key_in(index);
        let (largest, usable, stranded, big_enough) = match seen.get(&key) {
            Some(found) => *found,
            None => {
                let size = unit_size(&demand);
                let placement = index.placement(&demand.shape());
                // Its volumes, ports and pod rules keep it off nodes as the pending chain says.
                let mut allowed = allowed_nodes(index, &demand);
                // Claims through DRA: as the next pod like it asks them (None
                // where one is missing: no node helps).
                let ask = demand.dra.as_ref().map(|a| index.dra().ask(&a.namespace, &a.claims));
                if matches!(ask, Some(None)) {
                    allowed = None;
                }
                // Extended resources a DeviceClass serves: on a node that
                // does not advertise them, the claim the scheduler would make.
                let what_if = demand.source == ShapeSource::Canonical;
                let through_dra =
                    if what_if { ThroughDra::default() } else { ThroughDra::of(index.dra(), &demand.requests) };
                let (mut largest, mut usable, mut stranded, mut big_enough) = (0, 0, 0, 0);
                let mut domains = OwnDomains::of(&demand);
                for (i, ((node, used), blockers)) in index.nodes_with_usage().zip(placement.iter()).enumerate() {
                    if !allowed.as_ref().is_some_and(|ok| ok[i]) {
                        continue;
                    }
                    // Only nodes this shape may use at all, and that are big enough
                    // for one pod when empty: elsewhere a free GPU is idle, not stranded.
                    let NodeGpus { whole_free, replicas_per_gpu, dra_whole, dra_whole_free, .. } = gpus[i];
                    // A what-if shape takes DRA's whole GPUs too.
                    let (dra_all, dra) = if what_if { (dra_whole, dra_whole_free) } else { (0, 0) };
                    let extended = through_dra.claim_on(&demand.namespace, node);
                    let rest = through_dra.requests_on(&demand.requests, node);
                    let requests = rest.as_ref().unwrap_or(&demand.requests);
                    // A what-if shape asks for whole GPUs: a time-slicing replica
                    // is a turn on a shared GPU, not one (a pending pod that asks
                    // nvidia.com/gpu there gets replicas: the scheduler's truth).
                    let replicas_only = replicas_per_gpu.is_some() && demand.source == ShapeSource::Canonical;
                    if !index.accepts_work(node)
                        || !blockers.is_empty()
                        || replicas_only
                        || room_of(&demand, requests, node, &empty, dra_all) == 0
                    {
                        continue;
                    }
                    // Room the scheduler holds for pods nominated here ahead of it is not room.
                    let held = used.with_pods(&demand.nominated_ahead(index, &node.name));
                    let promised = held.as_ref().map_or(0, |h| h.gpu.saturating_sub(used.gpu));
                    // Usable and stranded count what the node could give the shape;
                    // how many pods fit at once counts one per domain of its own
                    // anti-affinity (a zone's second node is not stranded for that).
                    let mut s = room_of(&demand, requests, node, held.as_ref().unwrap_or(used), dra);
                    // Claims take the devices their requests match, as many
                    // pods' at once as the node can allocate.
                    let mut claims_room = |ask: &Ask<'_>, per_pod: u64| {
                        let room = index.dra().room(&mut selectors, &node.name, ask, s);
                        (room.matching >= per_pod).then_some(room)
                    };
                    let room = match (&ask, &extended) {
                        (Some(Some(ask)), None) => claims_room(ask, demand.dra.as_ref().map_or(0, |a| a.gpus)),
                        (Some(Some(ask)), Some(claim)) => {
                            let mut ask = ask.clone();
                            ask.per_pod.push(claim);
                            claims_room(&ask, demand.gpus_per_pod)
                        }
                        (_, Some(claim)) => {
                            claims_room(&Ask { per_pod: vec![claim], ..Ask::default() }, demand.gpus_per_pod)
                        }
                        _ => None,
                    };
                    let devices = match room {
                        Some(room) => {
                            s = room.pods;
                            Some(room)
                        }
                        None if extended.is_some() || matches!(ask, Some(Some(_))) => continue,
                        None => None,
                    };
                    big_enough += 1;
                    largest = u64::saturating_add(largest, domains.take(node, s));
                    // Usable and free in the demand's units: MIG slices, or physical
                    // GPUs (replicas taken by a shape fill whole GPUs only at r per GPU).
                    let (free, used_by_shape) = match (&demand.mig_profile, devices) {
                        // DRA: the devices its GPU requests match.
                        (_, Some(room)) => (room.free, s.saturating_mul(size).min(room.free)),
                        (Some(p), None) => (index.free_mig(node, p.as_str()), s.saturating_mul(size)),
                        // GPUs promised to a nominated pod are neither usable nor stranded.
                        (None, None) => {
                            let free = whole_free.saturating_sub(promised);
                            (free, s.saturating_mul(size).div_ceil(replicas_per_gpu.unwrap_or(1)).min(free))
                        }
                    };
                    usable = u64::saturating_add(usable, used_by_shape);
                    stranded = u64::saturating_add(stranded, free.saturating_sub(used_by_shape));
                    // Free GPUs a shape can use, by node, in whole GPUs.
                    if demand.is_pending() && demand.mig_profile.is_none() && devices.is_none_or(|r| r.whole) {
                        let e = usable_by_node[i].get_or_insert(0);
                        *e = (*e).max(used_by_shape);
                    }
                }
                seen.insert(key, (largest, usable, stranded, big_enough));
                (largest, usable, stranded, big_enough)
            }
        };
        shapes.push(ShapeFit {
            fits_now: largest >= demand.pods as u64,
            usable_free: usable,
            stranded_free: stranded,
            largest_gang: largest,
            nodes_big_enough: big_enough,
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
    let unplanned_claims = dra::unresolved(index, &mut selectors);
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

mod demand;
mod domains;
pub mod dra;
mod plan;
mod plan_dra;
mod workspace;
pub use demand::{
    CANONICAL, Demand, DemandKey, PodVolumes, ShapeSource, canonical_demands, pending_demands, pod_demand,
};
pub(crate) use demand::{allowed_nodes, stopped_by_volumes};
pub use domains::OwnDomains;
pub use plan::{MAX_NODES_FREED, plan};

#[cfg(test)]
mod tests;
