//! Gangs: how many members are placed, the GPUs a partial gang holds idle,
//! deadlocks between partial gangs, and gangs split across nodes.

use std::collections::{BTreeMap, HashMap};

use crate::model::{Gang, GangKey, Pod, PodPhase, Sym, Timestamp};

use super::fragmentation::{self, Demand, ShapeSource};
use super::index::Index;
use super::tally::Tally;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum GangState {
    /// Kueue: no quota reserved yet; Volcano: PodGroup Pending.
    Queued,
    /// Deactivated (`spec.active: false`).
    Inactive,
    /// Quota granted, no member placed yet.
    Admitted,
    /// Some members placed, others waiting: the placed ones hold GPUs idle.
    PartiallyPlaced,
    /// Every member placed; not all running yet.
    Placed,
    Running,
    Finished,
}

impl GangState {
    pub fn as_str(self) -> &'static str {
        match self {
            GangState::Queued => "queued",
            GangState::Inactive => "inactive",
            GangState::Admitted => "admitted",
            GangState::PartiallyPlaced => "partially-placed",
            GangState::Placed => "placed",
            GangState::Running => "running",
            GangState::Finished => "finished",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct GangSummary {
    pub key: GangKey,
    pub queue: Option<Sym>,
    pub required: u32,
    pub placed: u32,
    pub running: u32,
    pub gpus_per_pod: u64,
    pub gpus_total: u64,
    pub gpus_held_idle: u64,
    pub state: GangState,
    pub age: Timestamp,
    /// Partial gangs this one can never complete alongside, as `ns/name`.
    pub deadlocked_with: Vec<String>,
    /// Nodes holding members, with the GPUs each holds there.
    pub nodes: Vec<(Sym, u64)>,
    /// Placed across several nodes although one eligible node could hold it all.
    pub topology_split: bool,
    pub topology: Topology,
    /// Kueue: GPUs its pod sets ask through DRA claim templates that Kueue
    /// reserved no quota for (its DynamicResourceAllocation gate off, or the
    /// class not mapped): the ClusterQueue's quota does not limit them.
    pub dra_not_in_quota: u64,
}

impl GangSummary {
    pub fn display_name(&self) -> String {
        format!("{}/{}", self.key.namespace, self.key.name)
    }

    /// Kueue admitted it without counting its DRA GPUs, for people.
    pub fn quota_note(&self) -> Option<String> {
        (self.dra_not_in_quota > 0).then(|| {
            format!(
                "{} DRA GPU(s) not counted in Kueue's quota: admitted without them (Kueue counts DRA devices only with its DynamicResourceAllocation gate and a deviceClassMapping for the class)",
                self.dra_not_in_quota
            )
        })
    }

    /// What the spread means, for people: `None` when it is on one node.
    pub fn topology_note(&self) -> Option<String> {
        match &self.topology {
            Topology::Together => None,
            Topology::SpreadOfNecessity => {
                Some("spread over nodes: no single node had room for it when it was placed".into())
            }
            Topology::Split { node, free } => Some(format!(
                "topology-split: {node} had up to {free} GPU(s) free when it was placed (pods there now that started later not counted)"
            )),
            Topology::Unknown => {
                Some("spread over nodes; whether one node had room then is unknown (no start times)".into())
            }
        }
    }
}

pub fn analyze(index: &Index<'_>) -> Vec<GangSummary> {
    let mut selectors = super::dra::cel::Selectors::default();
    let mut out: Vec<GangSummary> =
        index.snap.gangs.iter().map(|(key, gang)| summarize(index, &mut selectors, key, gang)).collect();
    find_deadlocks(index, &mut out);
    out.sort_by(|a, b| {
        (!a.deadlocked_with.is_empty())
            .cmp(&!b.deadlocked_with.is_empty())
            .reverse()
            .then(b.gpus_held_idle.cmp(&a.gpus_held_idle))
            .then(a.state.cmp(&b.state))
            .then(a.key.cmp(&b.key))
    });
    out
}

fn summarize(index: &Index<'_>, selectors: &mut super::dra::cel::Selectors, key: &GangKey, gang: &Gang) -> GangSummary {
    let members = index.members(key);
    let placed_pods: Vec<&&Pod> = members.iter().filter(|p| p.holds_resources()).collect();
    let placed = placed_pods.len() as u32;
    let running = placed_pods.iter().filter(|p| p.phase == PodPhase::Running).count() as u32;
    let required = if gang.min_members > 0 { gang.min_members } else { gang.total_pods() };
    // GPUs a pod of each set asks through claim templates, beside the device plugin's.
    let dra_per_pod: Vec<u64> = gang
        .pod_sets
        .iter()
        .map(|set| {
            if set.claims.is_empty() {
                0
            } else {
                index.dra().template_gpus(selectors, &gang.namespace, &set.claims).unwrap_or(0)
            }
        })
        .collect();
    let dra_total: u64 = gang.pod_sets.iter().zip(&dra_per_pod).map(|(set, dra)| dra * u64::from(set.count)).sum();
    let gpus_per_pod =
        gang.pod_sets.iter().zip(&dra_per_pod).map(|(set, dra)| set.requests.gpu + dra).max().unwrap_or(0);
    let mut per_node: BTreeMap<Sym, u64> = BTreeMap::new();
    for p in &placed_pods {
        if let Some(n) = p.node.clone() {
            // GPUs held through DRA claims count as the device plugin's do.
            let dra = index.dra().held_by(p);
            *per_node.entry(n).or_default() += p.requests.gpu + p.requests.mig_total() + dra.gpus + dra.slices;
        }
    }
    let state = if gang.is_finished() {
        GangState::Finished
    } else if !gang.active {
        GangState::Inactive
    } else if placed == 0 && !gang.has_quota() {
        GangState::Queued
    } else if placed == 0 && gang.condition_true("PodsReady") {
        // Kueue says its pods run, though kgpu cannot tell which they are
        // (an integration whose pods name their workload in no way it reads).
        GangState::Running
    } else if placed == 0 {
        GangState::Admitted
    } else if placed < required {
        GangState::PartiallyPlaced
    } else if running < placed {
        GangState::Placed
    } else {
        GangState::Running
    };
    let gpus_held_idle = if state == GangState::PartiallyPlaced { per_node.values().sum() } else { 0 };
    let device_plugin_gpus = gang.total_requests().gpu;
    let gpus_total = device_plugin_gpus + dra_total;
    // Nodes' room is read in device-plugin GPUs there.
    let topology = topology_of(index, &placed_pods, &per_node, device_plugin_gpus);
    let kueue_counts_none = gang.kind == crate::model::GangKind::KueueWorkload && gang.kueue_counted.is_none();
    let dra_not_in_quota = if kueue_counts_none && gang.has_quota() { dra_total } else { 0 };
    GangSummary {
        key: key.clone(),
        queue: gang.queue.clone(),
        required,
        placed,
        running,
        gpus_per_pod,
        gpus_total,
        gpus_held_idle,
        state,
        age: crate::model::time::since(index.now, gang.created),
        deadlocked_with: Vec::new(),
        nodes: per_node.into_iter().collect(),
        topology_split: matches!(topology, Topology::Split { .. }),
        topology,
        dra_not_in_quota,
    }
}

/// Was a gang spread over nodes although one node had room for all of it
/// when it was placed? What was free then is known only roughly: the node's
/// GPUs less those of the pods there now that started before the gang (pods
/// that have finished since are not known, so this is the most that could
/// have been free). Without start times, unknown.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Topology {
    /// On one node (or not placed).
    Together,
    /// Spread, and no node it may use could have held it all then.
    SpreadOfNecessity,
    /// Spread, though `node` had as many as `free` GPUs free then.
    Split { node: Sym, free: u64 },
    /// Spread; when it was placed is unknown.
    Unknown,
}

fn topology_of(index: &Index<'_>, placed: &[&&Pod], per_node: &BTreeMap<Sym, u64>, gpus_total: u64) -> Topology {
    if per_node.len() <= 1 {
        return Topology::Together;
    }
    let need = per_node.values().sum::<u64>().max(gpus_total);
    // Placed when its last member started.
    let Some(placed_at) = placed.iter().map(|p| p.transitioned).filter(|t| *t > 0).max() else {
        return Topology::Unknown;
    };
    let Some(member) = placed.first() else { return Topology::Unknown };
    let members: std::collections::HashSet<crate::model::PodKey> = placed.iter().map(|p| p.key()).collect();
    let placement = index.placement(&super::fit::Shape::of(member));
    let best = index
        .nodes()
        .zip(placement.iter())
        .filter(|(n, blockers)| blockers.is_empty() && n.allocatable.gpu >= need)
        .map(|(n, _)| {
            let busy_then: u64 = index
                .pods_on(&n.name)
                .iter()
                .filter(|p| !members.contains(&p.key()) && p.transitioned > 0 && p.transitioned <= placed_at)
                .map(|p| p.requests.gpu)
                .sum();
            let free_now = index.free_gpus(n);
            // Among nodes as free then, name the one still free now: the
            // likeliest to convince, and the one to re-place the gang on.
            (n.allocatable.gpu.saturating_sub(busy_then), free_now, std::cmp::Reverse(n.name.clone()))
        })
        .filter(|(free, _, _)| *free >= need)
        .max();
    match best {
        Some((free, _, std::cmp::Reverse(node))) => Topology::Split { node, free },
        None => Topology::SpreadOfNecessity,
    }
}

/// Partial gangs whose missing members fit only if another partial gang let
/// go of its GPUs: neither can complete; name them together.
fn find_deadlocks(index: &Index<'_>, gangs: &mut [GangSummary]) {
    let demands: HashMap<GangKey, Demand> = fragmentation::pending_demands(index)
        .into_iter()
        .filter_map(|d| match &d.source {
            ShapeSource::Gang(k) => Some((k.clone(), d)),
            _ => None,
        })
        .collect();
    let partial: Vec<usize> = gangs
        .iter()
        .enumerate()
        .filter(|(_, g)| g.state == GangState::PartiallyPlaced)
        .filter(|(_, g)| demands.get(&g.key).is_some_and(|d| !fits(index, d, &[])))
        .map(|(i, _)| i)
        .collect();
    if partial.len() < 2 {
        return;
    }
    let mut found: Vec<(usize, Vec<String>)> = Vec::new();
    for &i in &partial {
        let Some(demand) = demands.get(&gangs[i].key) else { continue };
        let others: Vec<&GangKey> = partial.iter().filter(|&&j| j != i).map(|&j| &gangs[j].key).collect();
        if fits(index, demand, &others) {
            let names = partial
                .iter()
                .filter(|&&j| j != i)
                .map(|&j| format!("{} {}", gangs[j].key.kind.kind_name(), gangs[j].display_name()))
                .collect();
            found.push((i, names));
        }
    }
    for (i, names) in found {
        gangs[i].deadlocked_with = names;
    }
}

/// Would `demand` fit if the members of `released` gave their GPUs back?
fn fits(index: &Index<'_>, demand: &Demand, released: &[&GangKey]) -> bool {
    let mut freed: HashMap<Sym, Vec<&Pod>> = HashMap::new();
    for key in released {
        for p in index.members(key) {
            if p.holds_resources()
                && let Some(n) = p.node.clone()
            {
                freed.entry(n).or_default().push(p);
            }
        }
    }
    let mut slots = 0;
    for node in index.nodes().filter(|n| Index::schedulable(n)) {
        let mut used: Tally = index.used(&node.name).clone();
        for p in freed.get(&node.name).into_iter().flatten() {
            used.cpu_milli = used.cpu_milli.saturating_sub(p.requests.cpu_milli);
            used.memory = used.memory.saturating_sub(p.requests.memory);
            used.gpu = used.gpu.saturating_sub(p.requests.gpu);
            used.pods = used.pods.saturating_sub(1);
        }
        slots += fragmentation::slots(demand, node, &used);
    }
    slots >= demand.pods as u64
}
