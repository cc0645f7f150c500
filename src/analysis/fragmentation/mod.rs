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
    Gang, GangKey, Labels, Node, NodeSelectorTerm, Pod, PodKey, Resources, Sym, Timestamp, Toleration, keys,
};

use super::fit::{self, PlacementKey, Shape};
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
        match self.mig_profile {
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
            pods: self.pods,
            pending: self.is_pending(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct DemandKey {
    requests: Resources,
    placement: PlacementKey,
    pods: u32,
    pending: bool,
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

/// What a gang still needs of GPUs. Pod sets differ (an MPIJob's CPU
/// launcher and GPU workers, a JobSet's replicated jobs): each GPU pod set
/// counts its own missing members — matched by shape — and the set missing
/// the most GPUs is the gang's demand; CPU-only sets are no GPU demand.
/// Kueue's partial admission makes a set expect what was admitted; a gang
/// without pod sets (a Volcano PodGroup) expects every member it has, so
/// the extra members of an elastic gang (minMember < replicas) are demand too.
fn gang_demand(key: &GangKey, gang: &Gang, members: &[&Pod]) -> Option<Demand> {
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
            let mut d = pod_demand(pending, missing, ShapeSource::Gang(key.clone()));
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
            source: ShapeSource::Gang(key.clone()),
            priority: gang.priority,
            created: gang.created,
        })
    };
    if gang.pod_sets.is_empty() {
        // No template: every member known, at least minMember, GPU members alone.
        let gpu_members: Vec<&&Pod> = members.iter().filter(|p| p.wants_gpu() && !p.phase.is_terminal()).collect();
        let expected = (gpu_members.len() as u32).max(gang.min_members);
        let placed = gpu_members.iter().filter(|p| p.holds_resources()).count() as u32;
        let pending = gpu_members.iter().find(|p| p.is_pending())?;
        let mut d = pod_demand(pending, expected.saturating_sub(placed).max(1), ShapeSource::Gang(key.clone()));
        d.priority = gang.priority.max(pending.priority);
        d.created = gang.created;
        return Some(d);
    }
    gang.pod_sets
        .iter()
        .filter_map(demand_of_set)
        .max_by_key(|d| (d.pods as u64 * (d.gpus_per_pod + d.requests.mig_total()), d.gpus_per_pod))
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
    if fit::placement_verdicts(&demand.shape(), node).is_empty() { room(demand, node, used) } else { 0 }
}

/// Pods of `demand` that fit in `node`'s free resources, placement aside.
pub fn room(demand: &Demand, node: &Node, used: &Tally) -> u64 {
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
    limit(a.gpu.saturating_sub(used.gpu), r.gpu);
    for (name, amount) in r.extended.iter() {
        limit(free(name.as_str(), a.get(name.as_str())), *amount);
    }
    if n == u64::MAX { 0 } else { n }
}

fn unit_size(d: &Demand) -> u64 {
    match d.mig_profile {
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
    for demand in pending.into_iter().chain(canonical_demands()) {
        let key = demand.key();
        let (largest, usable, stranded) = match seen.get(&key) {
            Some(found) => *found,
            None => {
                let size = unit_size(&demand);
                let placement = index.placement(&demand.shape());
                let (mut largest, mut usable, mut stranded) = (0, 0, 0);
                for (i, ((node, used), blockers)) in index.nodes_with_usage().zip(placement.iter()).enumerate() {
                    // Only nodes this shape may use at all, and that are big enough
                    // for one pod when empty: elsewhere a free GPU is idle, not stranded.
                    if !index.accepts_work(node) || !blockers.is_empty() || room(&demand, node, &empty) == 0 {
                        continue;
                    }
                    let s = room(&demand, node, used);
                    let free = match demand.mig_profile {
                        Some(p) => index.free_mig(node, p.as_str()),
                        None => node.allocatable.gpu.saturating_sub(used.gpu),
                    };
                    largest += s;
                    usable += s * size;
                    stranded += free.saturating_sub(s * size);
                    if demand.is_pending() && demand.mig_profile.is_none() {
                        let e = usable_by_node[i].get_or_insert(0);
                        *e = (*e).max(s * size);
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
    for ((node, used), usable) in index.nodes_with_usage().zip(usable_by_node) {
        if !index.accepts_work(node) {
            continue;
        }
        let free = node.allocatable.gpu.saturating_sub(used.gpu);
        free_total += free;
        if free > 0 && free == node.allocatable.gpu {
            free_on_whole_nodes += free;
        }
        if let Some(usable) = usable {
            let stranded = free.saturating_sub(usable);
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

mod plan;
pub use plan::{MAX_NODES_FREED, plan};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::testing::{node, pod, podgroup, snapshot};
    use crate::model::TaintEffect;

    const NOW: Timestamp = 100_000;
    const HOUR: Timestamp = 3600;

    /// A running, controller-owned pod of `gpus` GPUs on `node`, started `hours` ago.
    fn running(name: &str, gpus: u64, node: &str, hours: i64) -> Pod {
        pod(name).gpus(gpus).owner("Job", name).on(node).running().transitioned(NOW - hours * HOUR).build()
    }

    fn shape<'a>(f: &'a Fragmentation, label: &str, pending: bool) -> &'a ShapeFit {
        f.shapes.iter().find(|s| s.demand.label() == label && s.demand.is_pending() == pending).expect(label)
    }

    #[test]
    fn sixty_four_gpus_of_mixed_job_sizes() {
        // 8 nodes × 8 GPUs = 64. Running jobs of 1, 2, 4 and 8 GPUs:
        //   n1: 4+2+1 = 7 used → 1 free     n5: 8         → 0 free
        //   n2: 4+2   = 6 used → 2 free     n6: 1         → 7 free
        //   n3: 4         used → 4 free     n7: (empty)   → 8 free
        //   n4: 2+2+1 = 5 used → 3 free     n8: 2         → 6 free
        // used 33, free 31; only n7 is a whole free node.
        let nodes = (1..=8).map(|i| node(&format!("n{i}")).gpus(8).build()).collect();
        let layout: [(&str, &[u64]); 7] = [
            ("n1", &[4, 2, 1]),
            ("n2", &[4, 2]),
            ("n3", &[4]),
            ("n4", &[2, 2, 1]),
            ("n5", &[8]),
            ("n6", &[1]),
            ("n8", &[2]),
        ];
        let mut pods: Vec<Pod> = layout
            .iter()
            .flat_map(|(n, sizes)| sizes.iter().enumerate().map(move |(i, g)| running(&format!("{n}-{i}"), *g, n, 1)))
            .collect();
        pods.push(pod("wants-8").gpus(8).build());
        pods.push(pod("wants-2").gpus(2).build());
        let snap = snapshot(nodes, pods, vec![], NOW);
        let f = analyze(&Index::build(&snap, NOW));

        assert_eq!(f.free_total, 31);
        assert_eq!(f.free_on_whole_nodes, 8);
        // score = 1 − 8/31 = 23/31
        assert!((f.score - 23.0 / 31.0).abs() < 1e-9, "{}", f.score);

        // 1×8: only n7 has 8 free. Usable 8; the other 31 − 8 = 23 free GPUs
        // are stranded for this shape.
        let s = shape(&f, "1×8", true);
        assert_eq!((s.largest_gang, s.usable_free, s.stranded_free, s.fits_now), (1, 8, 23, true));
        // 1×2: slots per node = ⌊free/2⌋ = 0+1+2+1+0+3+4+3 = 14 → 28 usable;
        // the odd GPUs on n1, n4 and n6 (1 each) are stranded: 31 − 28 = 3.
        let s = shape(&f, "1×2", true);
        assert_eq!((s.largest_gang, s.usable_free, s.stranded_free), (14, 28, 3));
        // Canonical 4×8 (four 8-GPU pods): one fits, so it does not.
        let s = shape(&f, "4×8", false);
        assert_eq!((s.largest_gang, s.fits_now), (1, false));
        // Canonical 1×1: every free GPU is usable.
        let s = shape(&f, "1×1", false);
        assert_eq!((s.largest_gang, s.usable_free, s.stranded_free), (31, 31, 0));

        // Fleet-wide a free GPU is stranded when no pending shape can use it.
        // Per node, free − most usable by a pending shape (8-GPU or 2-GPU):
        //   n1 1−0 = 1, n2 2−2 = 0, n3 4−4 = 0, n4 3−2 = 1, n6 7−6 = 1,
        //   n7 8−8 = 0, n8 6−6 = 0 → 3.
        assert_eq!(f.stranded_total, 3);
        let stranded: Vec<(&str, u64)> = f.stranded_by_node.iter().map(|(n, s)| (n.as_str(), *s)).collect();
        assert_eq!(stranded, [("n1", 1), ("n4", 1), ("n6", 1)]);
        // Everything pending fits somewhere: no plan needed.
        assert_eq!(f.plan.status, PlanStatus::NotNeeded);
    }

    #[test]
    fn the_plan_moves_the_cheapest_work_that_frees_whole_nodes() {
        // 8 × 8 GPUs. A PodGroup needs 2 pods × 8 GPUs; no node has 8 free.
        //   n1: 1-GPU pod a, 1 h old  → 1 GPU-hour   (7 free)
        //   n2: 1-GPU pod b, 3 h old  → 3 GPU-hours  (7 free)
        //   n3: 2-GPU pod c, 1 h old  → 2 GPU-hours  (6 free)
        //   n4..n8: a 4-GPU pod each, 1 h → 4 GPU-hours (4 free each)
        // Free 7+7+6+5×4 = 40, all stranded for 2×8; usable 0.
        let nodes = (1..=8).map(|i| node(&format!("n{i}")).gpus(8).build()).collect();
        let mut pods = vec![running("a", 1, "n1", 1), running("b", 1, "n2", 3), running("c", 2, "n3", 1)];
        pods.extend((4..=8).map(|i| running(&format!("d{i}"), 4, &format!("n{i}"), 1)));
        pods.extend((0..2).map(|i| pod(&format!("train-{i}")).gpus(8).group("train").build()));
        let snap = snapshot(nodes, pods, vec![podgroup("train", 2, 8).phase("Inqueue").build()], NOW);
        let f = analyze(&Index::build(&snap, NOW));

        let s = shape(&f, "2×8", true);
        assert_eq!((s.largest_gang, s.usable_free, s.stranded_free, s.fits_now), (0, 0, 40, false));
        assert_eq!(f.plan.target.as_deref(), Some("PodGroup default/train"));
        assert_eq!(f.plan.status, PlanStatus::Found);
        // One move per node is the fewest; by GPU-hours: a (1) then c (2);
        // b (3) and the 4-GPU pods (4) cost more. Each lands on the fullest
        // node that takes it without costing the gang a slot: n4 (4 free,
        // then 3 free after a).
        let moves: Vec<(&str, &str, &str)> =
            f.plan.steps.iter().map(|s| (s.pod.as_str(), s.from_node.as_str(), s.to_node.unwrap().as_str())).collect();
        assert_eq!(moves, [("a", "n1", "n4"), ("c", "n3", "n4")]);
        // 1 + 2 GPU-hours disrupted.
        assert!((f.plan.gpu_hours - 3.0).abs() < 1e-9, "{}", f.plan.gpu_hours);
        let freed: Vec<&str> = f.plan.nodes_freed.iter().map(|n| n.as_str()).collect();
        assert_eq!(freed, ["n1", "n3"]);
        // The freed nodes hold the gang: they are what running it reserves.
        assert_eq!(f.plan.reserve, f.plan.nodes_freed);
        assert_eq!(f.plan.target_key, Some(ShapeSource::Gang(snap.gangs.keys().next().unwrap().clone())));
    }

    #[test]
    fn work_held_before_fit_gets_no_plan_and_says_why() {
        // The same fleet, but the PodGroup is still Pending in its Volcano
        // queue: freed nodes would not start it.
        let nodes = (1..=2).map(|i| node(&format!("n{i}")).gpus(8).build()).collect();
        let mut pods = vec![running("a", 1, "n1", 1), running("b", 1, "n2", 1)];
        pods.extend((0..2).map(|i| pod(&format!("train-{i}")).gpus(8).group("train").build()));
        let snap = snapshot(nodes, pods, vec![podgroup("train", 2, 8).build()], NOW);
        let f = analyze(&Index::build(&snap, NOW));
        let PlanStatus::Impossible(why) = &f.plan.status else { panic!("{:?}", f.plan.status) };
        assert!(why.contains("waits for admission"), "{why}");
        assert!(f.plan.steps.is_empty() && f.plan.reserve.is_empty());
    }

    #[test]
    fn a_plan_reserves_the_nodes_that_already_have_room_too() {
        // n1 has 8 free already; n2 needs a move. The 2×8 gang lands on
        // both, so both are reserved, or a replacement could take n1.
        let nodes = (1..=3).map(|i| node(&format!("n{i}")).gpus(8).build()).collect();
        let mut pods = vec![running("small", 1, "n2", 1), running("half", 4, "n3", 1)];
        pods.extend((0..2).map(|i| pod(&format!("train-{i}")).gpus(8).group("train").build()));
        let snap = snapshot(nodes, pods, vec![podgroup("train", 2, 8).phase("Inqueue").build()], NOW);
        let f = analyze(&Index::build(&snap, NOW));
        assert_eq!(f.plan.status, PlanStatus::Found);
        let freed: Vec<&str> = f.plan.nodes_freed.iter().map(|n| n.as_str()).collect();
        let reserve: Vec<&str> = f.plan.reserve.iter().map(|n| n.as_str()).collect();
        assert_eq!(freed, ["n2"]);
        assert_eq!(reserve, ["n2", "n1"]);
    }

    #[test]
    fn no_plan_when_the_fleet_is_too_small_or_the_pods_cannot_move() {
        // Two 8-GPU nodes cannot hold a 3×8 gang even when empty.
        let nodes = vec![node("n1").gpus(8).build(), node("n2").gpus(8).build()];
        let pods: Vec<Pod> = (0..3).map(|i| pod(&format!("big-{i}")).gpus(8).group("big").build()).collect();
        let snap = snapshot(nodes, pods, vec![podgroup("big", 3, 8).phase("Inqueue").build()], NOW);
        let f = analyze(&Index::build(&snap, NOW));
        let PlanStatus::Impossible(why) = &f.plan.status else { panic!("{:?}", f.plan.status) };
        assert!(why.contains("room for only 2 of 3"), "{why}");

        // One node, one pod in the way of higher priority than the gang,
        // with nowhere else to go: neither a move nor an eviction.
        let mut blocker = running("blocker", 1, "n1", 1);
        blocker.priority = 1000;
        let snap = snapshot(
            vec![node("n1").gpus(8).build()],
            vec![blocker, pod("w").gpus(8).group("w").build()],
            vec![podgroup("w", 1, 8).phase("Inqueue").build()],
            NOW,
        );
        let f = analyze(&Index::build(&snap, NOW));
        let PlanStatus::Impossible(why) = &f.plan.status else { panic!("{:?}", f.plan.status) };
        assert!(why.contains("more important than the target"), "{why}");
    }

    #[test]
    fn when_moves_cannot_make_room_the_cheapest_evictions_can() {
        // n1: a bare pod (nothing recreates it) of 2 GPUs, 3 h old, and a
        // Job pod of 1 GPU, 1 h old, with no other node to go to: the gang
        // of one 8-GPU pod needs n1 empty. Both are evicted as lost work,
        // lowest priority first.
        let bare = pod("notebook").gpus(2).on("n1").running().transitioned(NOW - 3 * HOUR).build();
        let snap = snapshot(
            vec![node("n1").gpus(8).build()],
            vec![bare, running("eval", 1, "n1", 1), pod("w").gpus(8).group("w").build()],
            vec![podgroup("w", 1, 8).phase("Inqueue").build()],
            NOW,
        );
        let f = analyze(&Index::build(&snap, NOW));
        assert_eq!(f.plan.status, PlanStatus::Found, "{:?}", f.plan);
        let steps: Vec<(&str, Option<Sym>)> = f.plan.steps.iter().map(|s| (s.pod.as_str(), s.to_node)).collect();
        assert_eq!(steps, [("eval", None), ("notebook", None)], "least GPU-hours first at equal priority");
        assert_eq!(f.plan.steps_summary(), "0 move(s) and 2 eviction(s) (work lost)");
        assert!((f.plan.gpu_hours - 7.0).abs() < 1e-9, "1 + 6 GPU-hours lost: {}", f.plan.gpu_hours);
        assert_eq!(f.plan.reserve, [Sym::new("n1")]);

        // The same, beside a node whose device plugin hides its 8 GPUs: fix
        // the plugin rather than evict anyone.
        let bare = pod("notebook").gpus(2).on("n1").running().transitioned(NOW - 3 * HOUR).build();
        let snap = snapshot(
            vec![node("n1").gpus(8).build(), node("n2").hardware(8).build()],
            vec![bare, running("eval", 1, "n1", 1), pod("w").gpus(8).group("w").build()],
            vec![podgroup("w", 1, 8).phase("Inqueue").build()],
            NOW,
        );
        let f = analyze(&Index::build(&snap, NOW));
        let PlanStatus::Impossible(why) = &f.plan.status else { panic!("{:?}", f.plan.status) };
        assert!(why.contains("device plugin does not advertise"), "{why}");
    }

    #[test]
    fn a_plan_that_empties_too_many_nodes_is_a_rebalancing() {
        // 20 nodes with one 1-GPU pod each; an 18×8 gang would need 18
        // nodes emptied, more than MAX_NODES_FREED.
        let nodes = (0..20).map(|i| node(&format!("n{i:02}")).gpus(8).build()).collect();
        let mut pods: Vec<Pod> = (0..20).map(|i| running(&format!("p{i:02}"), 1, &format!("n{i:02}"), 1)).collect();
        pods.extend((0..18).map(|i| pod(&format!("g-{i}")).gpus(8).group("g").build()));
        let snap = snapshot(nodes, pods, vec![podgroup("g", 18, 8).phase("Inqueue").build()], NOW);
        let f = analyze(&Index::build(&snap, NOW));
        let PlanStatus::Impossible(why) = &f.plan.status else { panic!("{:?}", f.plan.status) };
        assert!(why.contains("rebalancing"), "{why}");
        assert!(f.plan.steps.is_empty());
    }

    #[test]
    fn mig_profiles_that_fit_and_that_do_not() {
        // m1 offers 7 × 1g.10gb, 3 in use; m2 offers 2 × 3g.40gb, none in use.
        let nodes = vec![node("m1").mig("1g.10gb", 7).build(), node("m2").mig("3g.40gb", 2).build()];
        let mut pods: Vec<Pod> =
            (0..3).map(|i| pod(&format!("small-{i}")).mig("1g.10gb", 1).on("m1").running().build()).collect();
        pods.push(pod("wants-1g").mig("1g.10gb", 1).build());
        pods.push(pod("wants-3g").mig("3g.40gb", 1).build());
        pods.push(pod("wants-2g").mig("2g.20gb", 1).build());
        let snap = snapshot(nodes, pods, vec![], NOW);
        let f = analyze(&Index::build(&snap, NOW));
        // 1g.10gb: 7 − 3 = 4 free slices on m1 → 4 pods fit.
        let s = shape(&f, "1×1g.10gb", true);
        assert_eq!((s.largest_gang, s.usable_free, s.fits_now), (4, 4, true));
        // 3g.40gb: both slices on m2 are free.
        let s = shape(&f, "1×3g.40gb", true);
        assert_eq!((s.largest_gang, s.usable_free, s.fits_now), (2, 2, true));
        // 2g.20gb: no node offers it; nothing is usable.
        let s = shape(&f, "1×2g.20gb", true);
        assert_eq!((s.largest_gang, s.usable_free, s.fits_now), (0, 0, false));
        // The plan moves whole-GPU work only: a missing MIG profile needs a
        // repartition, not evictions, and the plan says so.
        let PlanStatus::Impossible(why) = &f.plan.status else { panic!("{:?}", f.plan.status) };
        assert!(why.contains("needs MIG slices") && why.contains("repartition"), "{why}");
    }

    #[test]
    fn placement_rules_decide_where_free_gpus_count() {
        // A tainted pool the pending pod does not tolerate: its free GPUs are
        // idle for that pod, not usable and not stranded.
        let nodes = vec![
            node("open").gpus(8).build(),
            node("tainted").gpus(8).taint("dedicated", "infer", TaintEffect::NoSchedule).build(),
        ];
        let pods = vec![running("x", 6, "open", 1), pod("w").gpus(4).build()];
        let snap = snapshot(nodes, pods, vec![], NOW);
        let f = analyze(&Index::build(&snap, NOW));
        let s = shape(&f, "1×4", true);
        // open has 2 free (stranded for 4 GPUs); tainted's 8 do not count.
        assert_eq!((s.largest_gang, s.usable_free, s.stranded_free), (0, 0, 2));
        assert_eq!(f.stranded_by_node.keys().map(|n| n.as_str()).collect::<Vec<_>>(), ["open"]);
        assert_eq!(f.free_total, 10);
    }
}
