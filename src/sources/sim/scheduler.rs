//! A simplified kube-scheduler: the default filters (through
//! `analysis::fit`, in the scheduler's order), LeastAllocated spreading on
//! cpu and memory as the default profile scores, and FailedScheduling
//! messages in the real format. Pods with DRA claims (or extended resources
//! a DeviceClass serves) get their devices from the DynamicResources
//! plugin's allocator (`analysis::dra::bind`). Pods of the `volcano`
//! scheduler are placed all-or-nothing per PodGroup, as Volcano's gang
//! plugin does.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::analysis::dra::cel::Selectors;
use crate::analysis::dra::claims::ThroughDra;
use crate::analysis::dra::{PodClaimState, bind};
use crate::analysis::fit::{self, Shape};
use crate::analysis::index::Index;
use crate::analysis::scheduler_msg::{self, NO_PREEMPTION_VICTIMS, PREEMPTION_NOT_HELPFUL};
use crate::analysis::tally::Tally;
use crate::model::dra::ResourceClaim;
use crate::model::{
    ClaimSource, Cluster, DraKey, DraKind, DraObject, EventType, GangKind, ModelEvent, Node, Object, Pod, PodClaim,
    PodKey, Snapshot, SourceInfo, SourceKind, Sym, Unschedulable,
};

use super::Involved;
use super::SimCluster;

pub const VOLCANO: &str = "volcano";

pub(super) fn schedule(sim: &mut SimCluster) {
    let mut used: HashMap<Sym, Tally> = HashMap::new();
    for p in sim.pods.values().filter(|p| p.holds_resources()) {
        if let Some(n) = p.node.clone() {
            used.entry(n).or_default().add_pod(&p.requests);
        }
    }
    let mut queue: Vec<PodKey> =
        sim.pods.values().filter(|p| p.is_pending() && !p.gated && p.scheduler.is_none()).map(|p| p.key()).collect();
    queue.sort_by(|a, b| {
        let (pa, pb) = (&sim.pods[a], &sim.pods[b]);
        pb.priority.cmp(&pa.priority).then(pa.created.cmp(&pb.created)).then(a.cmp(b))
    });
    // The nodes and DRA objects the DynamicResources plugin allocates from,
    // made again after each allocation.
    let mut dra: Option<(Snapshot, Selectors)> = None;
    for key in queue {
        let Some(pod) = sim.pods.get(&key) else { continue };
        if !sim.dra.is_empty() {
            let (snap, selectors) = dra.get_or_insert_with(|| (dra_snapshot(sim), Selectors::default()));
            match place_with_claims(sim, &Index::build(snap, sim.now), selectors, pod, &used) {
                Placement::WithoutClaims => {}
                Placement::Bind(node, allocation) => {
                    bind_claims(sim, &key, &node, *allocation);
                    bind(sim, &key, node, &mut used);
                    dra = None;
                    continue;
                }
                Placement::Refused(message) => {
                    mark_unschedulable(sim, &key, &message, "default-scheduler");
                    continue;
                }
                Placement::Waiting => continue,
            }
        }
        match choose_node(sim, pod, &used) {
            Ok(node) => {
                bind(sim, &key, node, &mut used);
            }
            Err(message) => mark_unschedulable(sim, &key, &message, "default-scheduler"),
        }
    }
    schedule_volcano(sim, &mut used);
}

fn choose_node(sim: &SimCluster, pod: &Pod, used: &HashMap<Sym, Tally>) -> Result<Sym, String> {
    let empty = Tally::default();
    let shape = Shape::of(pod);
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    let mut preemption: BTreeMap<String, usize> = BTreeMap::new();
    let mut best: Option<(u64, Sym)> = None;
    for node in sim.nodes.values() {
        let u = used.get(&node.name).unwrap_or(&empty);
        // Only a pod that binds host ports looks at who else is on the node.
        let holders: Vec<&Pod> = if pod.host_ports.is_empty() {
            Vec::new()
        } else {
            sim.pods.values().filter(|p| p.node.as_ref() == Some(&node.name) && p.holds_resources()).collect()
        };
        let verdicts = fit::verdicts(&shape, node, u, &holders);
        if verdicts.is_empty() {
            let score = least_allocated(node, u, pod);
            if best.clone().is_none_or(|(s, n)| score > s || score == s && node.name < n) {
                best = Some((score, node.name.clone()));
            }
            continue;
        }
        let shown = fit::scheduler_view(&verdicts);
        for r in &shown {
            *reasons.entry(r.scheduler_text()).or_default() += 1;
        }
        // Preemption could only help on a node short of resources that runs
        // lower-priority pods (as the real scheduler's dry run finds).
        let victims = sim
            .pods
            .values()
            .any(|p| p.node.as_ref() == Some(&node.name) && p.holds_resources() && p.priority < pod.priority);
        let post = if shown.iter().any(|r| r.unresolvable()) || !victims {
            PREEMPTION_NOT_HELPFUL
        } else {
            NO_PREEMPTION_VICTIMS
        };
        *preemption.entry(post.to_string()).or_default() += 1;
    }
    match best {
        Some((_, node)) => Ok(node),
        // A non-preempting PriorityClass: DefaultPreemption's eligibility check says so.
        None if pod.preempt_never => Err(format!(
            "{} {}, preemption: not eligible due to preemptionPolicy=Never.",
            scheduler_msg::format(sim.nodes.len(), &reasons, &BTreeMap::new()),
            scheduler_msg::DRA_POST_FILTER
        )),
        None => Err(scheduler_msg::format(sim.nodes.len(), &reasons, &preemption)),
    }
}

/// Where a pod with DRA claims (or extended resources a DeviceClass serves)
/// goes, as the DynamicResources plugin allocates.
enum Placement {
    /// No claims, nothing served through DRA: the other filters decide.
    WithoutClaims,
    Bind(Sym, Box<bind::Allocation>),
    Refused(String),
    /// A claim or template does not exist yet: the scheduler's PreFilter
    /// stops without a word (no event, no condition).
    Waiting,
}

/// Nodes and DRA objects, what the allocator reads.
fn dra_snapshot(sim: &SimCluster) -> Snapshot {
    let mut c = Cluster::new(SourceInfo { kind: SourceKind::Demo, name: sim.info.name.clone() });
    c.apply(ModelEvent::Clock(sim.now));
    c.apply_all(sim.nodes.values().cloned().map(|n| ModelEvent::Upsert(Object::Node(n))));
    c.apply_all(sim.dra.values().cloned().map(|d| ModelEvent::Upsert(Object::Dra(d))));
    c.snapshot()
}

fn place_with_claims(
    sim: &SimCluster,
    index: &Index<'_>,
    selectors: &mut Selectors,
    pod: &Pod,
    used: &HashMap<Sym, Tally>,
) -> Placement {
    let ix = index.dra();
    let through_dra = ThroughDra::of(ix, &pod.requests);
    if pod.claims.is_empty() && through_dra.is_empty() {
        return Placement::WithoutClaims;
    }
    let states = ix.pod_claims(pod);
    if states.iter().any(|s| !matches!(s, PodClaimState::Found(..))) {
        return Placement::Waiting;
    }
    let pinned = states.iter().find_map(|s| match s {
        PodClaimState::Found(_, claim) => claim.allocated_node.clone(),
        _ => None,
    });
    let empty = Tally::default();
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    let mut best: Option<(u64, Sym, Box<bind::Allocation>)> = None;
    let mut resolvable = false;
    for node in sim.nodes.values() {
        let u = used.get(&node.name).unwrap_or(&empty);
        // NodeResourcesFit leaves what DRA serves on this node to the claims.
        let stripped = through_dra.requests_on(&pod.requests, node);
        let shape = Shape { requests: stripped.as_ref().unwrap_or(&pod.requests), ..Shape::of(pod) };
        let verdicts = fit::verdicts(&shape, node, u, &[]);
        if !verdicts.is_empty() {
            for r in fit::scheduler_view(&verdicts) {
                resolvable |= !r.unresolvable();
                *reasons.entry(r.scheduler_text()).or_default() += 1;
            }
            continue;
        }
        if pinned.as_ref().is_some_and(|p| *p != node.name) {
            *reasons.entry(NOT_ON_NODE.to_string()).or_default() += 1;
            continue;
        }
        match bind::allocation(index, selectors, pod, node) {
            Some(allocation) => {
                let score = least_allocated(node, u, pod);
                if best.as_ref().is_none_or(|(s, n, _)| score > *s || score == *s && node.name < *n) {
                    best = Some((score, node.name.clone(), Box::new(allocation)));
                }
            }
            None => *reasons.entry(CANNOT_ALLOCATE.to_string()).or_default() += 1,
        }
    }
    if let Some((_, node, allocation)) = best {
        return Placement::Bind(node, allocation);
    }
    let victims = resolvable && sim.pods.values().any(|p| p.holds_resources() && p.priority < pod.priority);
    let post = if victims { NO_PREEMPTION_VICTIMS } else { PREEMPTION_NOT_HELPFUL };
    let preemption = BTreeMap::from([(post.to_string(), sim.nodes.len())]);
    Placement::Refused(scheduler_msg::format_with_claims(sim.nodes.len(), &reasons, &preemption))
}

/// The DynamicResources plugin's words for a node that cannot allocate the
/// pod's claims, and for a node other than the one a claim is allocated on.
const CANNOT_ALLOCATE: &str = "cannot allocate all claims";
const NOT_ON_NODE: &str = "resourceclaim not available on the node";

/// Writes the allocation into the claims and the pod, as the scheduler's
/// PreBind does: each claim allocated and reserved for the pod; the claim
/// for its extended resources made, and named in the pod's status.
fn bind_claims(sim: &mut SimCluster, key: &PodKey, node: &Sym, allocation: bind::Allocation) {
    let Some(pod) = sim.pods.get(key) else { return };
    let (namespace, pod_name) = (pod.namespace.clone(), pod.name.clone());
    let names: Vec<Arc<str>> = pod
        .claims
        .iter()
        .filter_map(|c| match &c.source {
            ClaimSource::Claim(name) => Some(name.clone()),
            _ => c.generated.clone(),
        })
        .collect();
    for name in names {
        let claim_key = DraKey { kind: DraKind::ResourceClaim, namespace: Some(namespace.clone()), name: name.clone() };
        let Some(DraObject::Claim(claim)) = sim.dra.get_mut(&claim_key) else { continue };
        if let Some((_, devices)) = allocation.claims.iter().find(|(n, _)| *n == name) {
            claim.allocated = devices.clone().into_boxed_slice();
            claim.allocated_node = Some(node.clone());
        }
        if !claim.reserved_for.contains(&pod_name) {
            claim.reserved_for = claim.reserved_for.iter().cloned().chain([pod_name.clone()]).collect();
        }
        sim.dirty.dra.insert(claim_key);
    }
    if let Some((served, claim)) = allocation.extended {
        let name = format!("{pod_name}-extended-resources-{}", sim.rng.suffix());
        let made = ResourceClaim {
            name: name.as_str().into(),
            owner_pod: Some(pod_name.clone()),
            reserved_for: Box::new([pod_name.clone()]),
            created: sim.now,
            ..claim
        };
        let object = DraObject::Claim(made);
        sim.dirty.dra.insert(object.key());
        sim.dra.insert(object.key(), object);
        if let Some(pod) = sim.pods.get_mut(key) {
            let resources: Vec<&str> = served.iter().map(|(name, _)| name).collect();
            pod.requests = pod.requests.split_off(&resources).1;
            pod.claims = pod
                .claims
                .iter()
                .cloned()
                .chain([PodClaim {
                    name: Sym::new(&resources.join(",")),
                    source: ClaimSource::ExtendedResources(served.clone()),
                    generated: Some(name.as_str().into()),
                }])
                .collect();
        }
    }
}

/// NodeResourcesFit LeastAllocated over cpu and memory (0..=100 each).
fn least_allocated(node: &Node, used: &Tally, pod: &Pod) -> u64 {
    let score = |cap: u64, used: u64, req: u64| (cap.saturating_sub(used + req) * 100).checked_div(cap).unwrap_or(0);
    score(node.allocatable.cpu_milli, used.cpu_milli, pod.requests.cpu_milli)
        + score(node.allocatable.memory, used.memory, pod.requests.memory)
}

fn bind(sim: &mut SimCluster, key: &PodKey, node: Sym, used: &mut HashMap<Sym, Tally>) {
    let now = sim.now;
    let Some(pod) = sim.pods.get_mut(key) else { return };
    pod.node = Some(node.clone());
    pod.unschedulable = None;
    pod.transitioned = now;
    used.entry(node.clone()).or_default().add_pod(&pod.requests);
    let (ns, name) = (pod.namespace.clone(), pod.name.to_string());
    sim.dirty.pods.insert(key.clone());
    sim.bump();
    let source =
        if sim.pods.get(key).and_then(|p| p.scheduler.clone()).is_some() { VOLCANO } else { "default-scheduler" };
    sim.record(
        EventType::Normal,
        Involved { kind: "Pod", namespace: ns.clone(), name: &name },
        "Scheduled",
        &format!("Successfully assigned {ns}/{name} to {node}"),
        source,
    );
}

pub(in crate::sources::sim) fn mark_unschedulable(sim: &mut SimCluster, key: &PodKey, message: &str, source: &str) {
    let now = sim.now;
    let Some(pod) = sim.pods.get_mut(key) else { return };
    let same = pod.unschedulable.as_ref().is_some_and(|u| &*u.message == message);
    if !same {
        pod.unschedulable =
            Some(Box::new(Unschedulable { reason: Sym::new("Unschedulable"), message: message.into(), since: now }));
    }
    let (ns, name) = (pod.namespace.clone(), pod.name.to_string());
    if !same {
        sim.dirty.pods.insert(key.clone());
        sim.bump();
    }
    // The recorder aggregates retries; don't refresh the event every tick.
    let event_key = crate::model::EventKey { namespace: ns.clone(), name: format!("{name}.failedscheduling").into() };
    let stale = sim.events.get(&event_key).is_none_or(|e| &*e.message != message || now - e.last >= 60);
    if stale {
        sim.record(
            EventType::Warning,
            Involved { kind: "Pod", namespace: ns, name: &name },
            "FailedScheduling",
            message,
            source,
        );
    }
}

/// Volcano: every PodGroup places its minMember pods at once or none.
fn schedule_volcano(sim: &mut SimCluster, used: &mut HashMap<Sym, Tally>) {
    let groups: Vec<_> = sim
        .gangs
        .iter()
        .filter(|(k, g)| k.kind == GangKind::VolcanoPodGroup && g.active && !g.is_finished())
        .map(|(k, g)| (k.clone(), g.min_members, g.namespace.clone(), g.name.clone()))
        .collect();
    for (key, min_members, ns, name) in groups {
        let waiting: Vec<PodKey> = sim
            .pods
            .values()
            .filter(|p| p.namespace == ns && p.group.as_ref().is_some_and(|g| g.as_str() == &*name) && p.is_pending())
            .map(|p| p.key())
            .collect();
        if waiting.is_empty() {
            continue;
        }
        let placed_already = sim
            .pods
            .values()
            .filter(|p| {
                p.namespace == ns && p.group.as_ref().is_some_and(|g| g.as_str() == &*name) && p.holds_resources()
            })
            .count() as u32;
        // Trial placement on a copy of the usage.
        let mut trial = used.clone();
        let mut plan: Vec<(PodKey, Sym)> = Vec::new();
        for k in &waiting {
            let Some(pod) = sim.pods.get(k) else { continue };
            if let Ok(n) = choose_node(sim, pod, &trial) {
                trial.entry(n.clone()).or_default().add_pod(&pod.requests);
                plan.push((k.clone(), n));
            }
        }
        let ready = placed_already + plan.len() as u32 >= min_members && plan.len() == waiting.len();
        if ready {
            for (k, n) in plan {
                bind(sim, &k, n, used);
            }
            set_podgroup(sim, &key, "Running", None);
            continue;
        }
        let unschedulable = waiting.len() - plan.len();
        let total = waiting.len() + placed_already as usize;
        let mut statuses = vec![format!("{} Pending", waiting.len()), format!("{min_members} minAvailable")];
        if placed_already > 0 {
            statuses.push(format!("{placed_already} Running"));
        }
        statuses.sort();
        let mut reasons = vec![format!("{unschedulable} Unschedulable")];
        if !plan.is_empty() {
            reasons.push(format!("{} Schedulable", plan.len()));
        }
        reasons.sort();
        let message = format!(
            "{}/{total} tasks in gang unschedulable: pod group is not ready, {}; Pending: {}",
            waiting.len(),
            statuses.join(", "),
            reasons.join(", ")
        );
        for k in &waiting {
            mark_unschedulable(sim, k, &message, VOLCANO);
        }
        set_podgroup(sim, &key, "Inqueue", Some(message));
    }
}

fn set_podgroup(sim: &mut SimCluster, key: &crate::model::GangKey, phase: &str, unschedulable: Option<String>) {
    let now = sim.now;
    let Some(g) = sim.gangs.get_mut(key) else { return };
    let phase_sym = Sym::new(phase);
    let condition = unschedulable.map(|m| crate::model::Condition {
        kind: Sym::new("Unschedulable"),
        status: true,
        reason: Sym::new("NotEnoughResources"),
        message: m.into(),
        since: now,
    });
    let changed = g.phase.as_ref() != Some(&phase_sym)
        || g.conditions.first().map(|c| &c.message) != condition.as_ref().map(|c| &c.message);
    if changed {
        g.phase = Some(phase_sym);
        g.conditions = condition.into_iter().collect();
        sim.dirty.gangs.insert(key.clone());
        sim.bump();
    }
}
