//! The defragmentation plan: the moves that lose the least work (evict a
//! pod whose controller recreates it elsewhere), then the fewest, that make room for the top pending
//! GPU gang or pod, then — when moves alone cannot — the cheapest evictions
//! of work no more important than the target (lost work, marked as such).
//! docs/fragmentation.md has the search; docs/actions.md how it is run.

use std::collections::{HashMap, HashSet};

use crate::model::{Node, Pod, PodKey, Sym};

use super::super::dra::claims::ThroughDra;
use super::super::index::Index;
use super::super::tally::Tally;
use super::workspace::{Unit, Workspace, units_on};
use super::{Demand, Plan, PlanStatus, PlanStep, ShapeFit, ShapeSource, room};

/// The best option so far: (pods moved, GPU-hours, node freed, moves per unit).
type Candidate<'a> = (usize, f64, Sym, Vec<(Vec<&'a Pod>, Option<String>, Vec<Option<Sym>>)>);

/// Emptying more nodes than this is a rebalancing, not a defragmentation.
pub const MAX_NODES_FREED: usize = 16;
/// Units per source node whose subsets are tried (2^10 subsets at most).
const UNITS_TRIED: usize = 10;
/// GPU-hours closer than this are the same price (then fewer moves win).
const COST_EPSILON: f64 = 0.05;

/// The plan abandoned: why, and none of the steps tried on the way.
fn given_up(mut plan: Plan, why: impl Into<String>) -> Plan {
    plan.status = PlanStatus::Impossible(why.into());
    plan.steps.clear();
    plan.gpu_hours = 0.0;
    plan
}

/// Whether room is all the demand waits for: work still held by Kueue
/// (quota, admission checks), a Volcano queue or a scheduling gate would
/// not start on freed nodes, so a plan for it only throws work away; a pod
/// the scheduler nominated to a node is already getting room by preemption.
fn waits_only_for_room(index: &Index<'_>, demand: &Demand) -> bool {
    match &demand.source {
        ShapeSource::Gang(key) => index.snap.gangs.get(key).is_some_and(|g| match g.kind {
            crate::model::GangKind::KueueWorkload => g.condition_true("Admitted"),
            crate::model::GangKind::VolcanoPodGroup => g.has_quota(),
        }),
        ShapeSource::Pod(key) => {
            index.snap.pods.get(key).is_some_and(|p| !p.gated && p.nominated.is_none())
                && !super::stopped_by_volumes(index, demand)
        }
        ShapeSource::Canonical => false,
    }
}

/// The node the scheduler nominated for the pod of `demand`, if it did.
fn nominated(index: &Index<'_>, demand: &Demand) -> Option<crate::model::Sym> {
    match &demand.source {
        ShapeSource::Pod(key) => index.snap.pods.get(key)?.nominated.clone(),
        _ => None,
    }
}

/// The moves (evict, then the controller's replacement lands on a named
/// node) that let the top pending GPU gang fit for the least work lost;
/// ties go to the fewest moves. Whole-GPU shapes only: GPUs a device plugin
/// advertises, or whole GPUs through claims (`plan_dra.rs`).
pub fn plan(index: &Index<'_>, shapes: &[ShapeFit]) -> Plan {
    let not_needed = Plan {
        target: None,
        target_key: None,
        target_shape: None,
        status: PlanStatus::NotNeeded,
        steps: Vec::new(),
        gpu_hours: 0.0,
        nodes_freed: Vec::new(),
        reserve: Vec::new(),
    };
    let Some(target) = shapes.iter().find(|s| {
        s.demand.is_pending()
            && !s.fits_now
            && s.demand.mig_profile.is_none()
            && s.demand.dra.as_ref().is_none_or(|a| !a.partitions && s.nodes_big_enough > 0)
            && served_both_ways(index, &s.demand).is_none()
            && (s.nodes_big_enough > 0 || !through_dra(index, &s.demand))
            && s.demand.gpus_per_pod > 0
            && s.demand.wider_own_domain().is_none()
            && waits_only_for_room(index, &s.demand)
    }) else {
        // Pending work that does not fit, but no plan can help it: say so
        // rather than "not needed".
        let unplaced = shapes.iter().find(|s| s.demand.is_pending() && !s.fits_now);
        return match unplaced {
            None => not_needed,
            Some(s) => Plan {
                target: Some(s.demand.name()),
                target_shape: Some(s.demand.label()),
                status: PlanStatus::Impossible(if s.demand.dra.is_some() && s.nodes_big_enough == 0 {
                    format!(
                        "no node it may use publishes the devices {}'s claims ask, free or held: freeing nodes would not help; see its claims step",
                        s.demand.name()
                    )
                } else if s.demand.dra.is_some() {
                    format!(
                        "{} asks MIG devices through DRA: the plan frees whole GPUs, not partitions; see its claims step",
                        s.demand.name()
                    )
                } else if let Some((resource, class)) = served_both_ways(index, &s.demand) {
                    format!(
                        "{}'s {resource} comes through a device plugin on some nodes and through DRA (DeviceClass {class}) on others: the plan weighs one way, not both; see its claims step",
                        s.demand.name(),
                    )
                } else if let Some((resource, class, amount)) =
                    first_served(index, &s.demand).filter(|_| s.nodes_big_enough == 0)
                {
                    format!(
                        "no node it may use publishes {amount} devices of DeviceClass {class}, which serves {}'s {resource}, free or held: freeing nodes would not help; see its claims step",
                        s.demand.name()
                    )
                } else if s.demand.mig_profile.is_some() {
                    format!(
                        "{} needs MIG slices; the plan moves whole GPUs: repartition a node (m) for it",
                        s.demand.name()
                    )
                } else if let Some(key) = s.demand.wider_own_domain() {
                    format!(
                        "{}'s pods refuse each other in one {key} (required anti-affinity): the plan frees nodes, not {key} domains; see its fit step",
                        s.demand.name()
                    )
                } else if super::stopped_by_volumes(index, &s.demand) {
                    format!(
                        "{} waits for its volumes (a claim missing, unbound or going), not for room: see its volumes step",
                        s.demand.name()
                    )
                } else if let Some(node) = nominated(index, &s.demand) {
                    format!(
                        "the scheduler is preempting for {} on {node}: it waits for the pods it preempted to terminate, not for a plan",
                        s.demand.name()
                    )
                } else {
                    format!(
                        "{} waits for admission (Kueue quota or admission checks, a Volcano queue, a scheduling gate), not for room: freeing nodes would not start it",
                        s.demand.name()
                    )
                }),
                ..not_needed
            },
        };
    };
    let demand = &target.demand;
    let g = demand.gpus_per_pod;
    let mut result = Plan {
        target: Some(demand.name()),
        target_key: Some(demand.source.clone()),
        target_shape: Some(demand.label()),
        status: PlanStatus::Impossible(String::new()),
        steps: Vec::new(),
        gpu_hours: 0.0,
        nodes_freed: Vec::new(),
        reserve: Vec::new(),
    };
    let mut fleet = Workspace::new(index, demand);
    // Nodes the target may use at all, with room for at least one pod when empty.
    let empty = Tally::default();
    let eligible: Vec<&Node> = fleet.target_may_use.iter().map(|&i| fleet.nodes[i]).collect();
    // Claims: each node it may use publishes devices for one pod at least.
    let capacity: u64 = match fleet.dra {
        Some(_) => eligible.len() as u64,
        None => eligible.iter().map(|n| room(demand, n, &empty)).sum(),
    };
    if capacity < demand.pods as u64 && fleet.dra.is_none() {
        result.status = PlanStatus::Impossible(format!(
            "even an empty fleet has room for only {capacity} of {} pod(s) of {} GPU(s) on nodes this work may use",
            demand.pods, g
        ));
        return result;
    }

    let mut have: u64 = eligible.iter().map(|n| fleet.target_room(&n.name)).sum();
    let need = demand.pods as u64;
    let mut moved: HashSet<PodKey> = HashSet::new();
    let mut freed_nodes = Vec::new();
    // Nodes whose slots are promised to the target: never a destination.
    let mut reserved: HashSet<Sym> = HashSet::new();

    while have < need {
        if freed_nodes.len() >= MAX_NODES_FREED {
            return given_up(
                result,
                format!(
                    "{have} of {need} slot(s) after emptying {MAX_NODES_FREED} nodes: this needs a rebalancing (drain whole nodes or add capacity), not a defragmentation"
                ),
            );
        }
        let sources = fleet.sources(&eligible, &moved);
        // Best single-node option: the cheapest set of units whose moves
        // raise that node's slots by at least one.
        let mut best: Option<Candidate> = None;
        for (node, units) in sources {
            let current = fleet.target_room(&node.name);
            let mut candidates: Vec<&Unit> = units.iter().collect();
            candidates.sort_by(|a, b| a.gpu_hours.total_cmp(&b.gpu_hours));
            candidates.truncate(UNITS_TRIED);
            let n = candidates.len();
            for mask in 1u32..(1 << n) {
                let chosen: Vec<&Unit> = (0..n).filter(|i| mask & (1 << i) != 0).map(|i| candidates[i]).collect();
                let pods: usize = chosen.iter().map(|u| u.pods.len()).sum();
                let cost: f64 = chosen.iter().map(|u| u.gpu_hours).sum();
                // The least work lost first (an idle holder before a busy
                // one, however many), then the fewest pods moved.
                if let Some((bp, bc, _, _)) = &best
                    && (cost > *bc + COST_EPSILON || cost >= *bc - COST_EPSILON && pods >= *bp)
                {
                    continue;
                }
                // Usage that differs from the fleet's during this trial.
                let mut trial: HashMap<Sym, Tally> = HashMap::new();
                let leaving: Vec<&Pod> = chosen.iter().flat_map(|u| u.pods.iter().copied()).collect();
                let Some((source, mut trial_moves, after)) = fleet.without(node, &leaving) else { continue };
                if after <= current {
                    continue;
                }
                trial.insert(node.name.clone(), source);
                // Every moved pod must land elsewhere without costing the target a slot.
                let Some(destinations) =
                    fleet.place(&chosen, &mut trial, &mut trial_moves, &reserved, node.name.clone())
                else {
                    continue;
                };
                let plan_units = chosen
                    .iter()
                    .zip(destinations)
                    .map(|(u, d)| (u.pods.clone(), u.gang.clone(), d.into_iter().map(Some).collect()))
                    .collect();
                best = Some((pods, cost, node.name.clone(), plan_units));
            }
        }
        // Moves alone cannot make room: the cheapest evictions can, as lost work.
        let (node_name, units) = match best {
            Some((_, _, node_name, units)) => (node_name, units),
            // GPUs a device plugin does not advertise: fix that before
            // throwing anyone's work away.
            None if fleet.silent_room() => {
                return given_up(
                    result,
                    "a node this work may use has GPUs its device plugin does not advertise: restart the plugin there (the pending drilldown names it) before evicting anyone",
                );
            }
            None => match cheapest_evictions(&fleet, &eligible, &moved, &reserved) {
                Some((node_name, units)) => {
                    let units = units
                        .into_iter()
                        .map(|u| {
                            let nowhere = vec![None; u.pods.len()];
                            (u.pods, u.gang, nowhere)
                        })
                        .collect();
                    (node_name, units)
                }
                None => {
                    return given_up(
                        result,
                        format!(
                            "{have} of {need} slot(s) reachable: the pods in the way cannot move (DaemonSets, static pods, pods without a controller, gangs spread over nodes, or nowhere else fits them) and evicting them would stop work more important than the target or delete pods nothing recreates"
                        ),
                    );
                }
            },
        };
        for (pods, gang, destinations) in units {
            // The unit's price, shared out by the GPUs each pod holds.
            let lost = crate::analysis::lost_work::of(index, &pods);
            let share_of = |pod: &Pod| crate::analysis::lost_work::share_held(index, pod);
            for (pod, to) in pods.iter().copied().zip(destinations) {
                let from = pod.node.clone().unwrap_or(node_name.clone());
                let room_of = |fleet: &Workspace, n: Option<Sym>| n.map_or(0, |n| fleet.target_room(&n));
                have -= fleet.target_room(&from) + room_of(&fleet, to.clone());
                fleet.move_pod(pod, from.clone(), to.clone());
                have += fleet.target_room(&from) + room_of(&fleet, to.clone());
                let hours = if lost.gpu_share > 0.0 { lost.gpu_hours * share_of(pod) / lost.gpu_share } else { 0.0 };
                result.gpu_hours += hours;
                moved.insert(pod.key());
                result.steps.push(PlanStep {
                    namespace: pod.namespace.clone(),
                    pod: pod.name.to_string(),
                    from_node: from,
                    to_node: to,
                    gpus: pod.requests.gpu + index.dra().held_by(pod).gpus,
                    gpu_hours_disrupted: hours,
                    gang: gang.clone(),
                    idle_seconds: index.idle_seconds(&pod.key()),
                });
            }
        }
        reserved.insert(node_name.clone());
        if !freed_nodes.contains(&node_name) {
            freed_nodes.push(node_name);
        }
    }
    result.status = PlanStatus::Found;
    let mut covered: u64 = freed_nodes.iter().map(|n| fleet.target_room(n)).sum();
    result.reserve = freed_nodes.clone();
    for node in &eligible {
        if covered >= need {
            break;
        }
        let room = fleet.target_room(&node.name);
        if room > 0 && !result.reserve.contains(&node.name) {
            result.reserve.push(node.name.clone());
            covered += room;
        }
    }
    result.nodes_freed = freed_nodes;
    result
}

/// The highest priority stopped, the pods stopped, the GPU-hours lost.
type EvictionCost = (i32, usize, f64);

/// When no move makes room: on the one node where it costs least, the
/// evictions that raise its room for the target by one pod — work of no
/// higher priority than the target, lowest priority first, then the least
/// GPU-hours. The cost compares the highest priority stopped, then pods,
/// then GPU-hours.
fn cheapest_evictions<'a>(
    fleet: &Workspace<'_, 'a>,
    eligible: &[&'a Node],
    moved: &HashSet<PodKey>,
    reserved: &HashSet<Sym>,
) -> Option<(Sym, Vec<Unit<'a>>)> {
    let target = fleet.target;
    let mut best: Option<(EvictionCost, Sym, Vec<Unit<'a>>)> = None;
    for node in eligible.iter().filter(|n| !reserved.contains(&n.name)) {
        let current = fleet.target_room(&node.name);
        let mut units: Vec<Unit<'a>> = units_on(fleet.index, target, fleet.dra.as_ref(), node.name.clone(), moved)
            .into_iter()
            .filter(|u| u.priority <= target.priority)
            .collect();
        units.sort_by(|a, b| a.priority.cmp(&b.priority).then(a.gpu_hours.total_cmp(&b.gpu_hours)));
        let mut leaving: Vec<&Pod> = Vec::new();
        let mut after = current;
        let mut taken = Vec::new();
        for unit in units {
            leaving.extend(unit.pods.iter().copied());
            taken.push(unit);
            after = fleet.without(node, &leaving).map_or(0, |(_, _, room)| room);
            if after > current {
                break;
            }
        }
        if after <= current {
            continue;
        }
        let cost = (
            taken.iter().map(|u| u.priority).max().unwrap_or(i32::MIN),
            taken.iter().map(|u| u.pods.len()).sum::<usize>(),
            taken.iter().map(|u| u.gpu_hours).sum::<f64>(),
        );
        // Never more important work; then the least work lost; then fewest pods.
        let cheaper = best.as_ref().is_none_or(|((p, n, h), _, _)| {
            let hours = if (cost.2 - h).abs() < COST_EPSILON { std::cmp::Ordering::Equal } else { cost.2.total_cmp(h) };
            cost.0.cmp(p).then(hours).then(cost.1.cmp(n)) == std::cmp::Ordering::Less
        });
        if cheaper {
            best = Some((cost, node.name.clone(), taken));
        }
    }
    best.map(|(_, node, units)| (node, units))
}

/// An extended resource the demand asks that the device plugin of a node
/// it may run on advertises, and a DeviceClass serves: (resource, class).
fn served_both_ways(index: &Index<'_>, demand: &Demand) -> Option<(Sym, Sym)> {
    let through = ThroughDra::of(index.dra(), &demand.requests);
    let resource = super::plan_dra::advertised_where_it_may_run(index, demand, &through)?;
    let class = through.served.iter().find(|(r, ..)| *r == resource).map(|(_, c, _)| Sym::new(&c.name))?;
    Some((resource, class))
}

/// Whether a DeviceClass serves some of the demand's extended resources.
fn through_dra(index: &Index<'_>, demand: &Demand) -> bool {
    first_served(index, demand).is_some()
}

/// The first extended resource of the demand a DeviceClass serves:
/// (resource, class, amount).
fn first_served(index: &Index<'_>, demand: &Demand) -> Option<(Sym, Sym, u64)> {
    let through = ThroughDra::of(index.dra(), &demand.requests);
    through.served.first().map(|(resource, class, amount)| (resource.clone(), Sym::new(&class.name), *amount))
}
