//! The per-node fit step (and the device-plugin step it hands over to):
//! where a shape can go, why not elsewhere, and the shape's hints.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::model::{HostPort, Node, Pod, keys};

use super::super::dra::claims::ThroughDra;
use super::super::fit::{self, NodeReason};
use super::super::fragmentation::{self, Demand, ShapeSource};
use super::super::index::Index;
use super::super::inter_pod::InterPod;
use super::super::tally::Tally;
use super::super::volumes::{Prepared, Refusal};
use super::{Step, StepReport, Verdict, ns_flag, shape_text};

/// The fit step's findings, shared by pods and gangs.
#[derive(Clone, Debug)]
pub(super) struct FitResult {
    pub(super) report: StepReport,
    pub(super) device_plugin: StepReport,
    pub(super) node_reasons: Arc<BTreeMap<String, u32>>,
    /// What the real scheduler would print, in kgpu's codes (comparison classes).
    pub(super) scheduler_view: BTreeMap<String, u32>,
    pub(super) total_nodes: u32,
    pub(super) unblock: Vec<String>,
    /// How many of `unblock`'s first entries lose no work (an uncordon):
    /// costlier fixes go after them.
    pub(super) lossless_fixes: usize,
    /// The volume filters stopped the pod before any node (their PreFilter).
    pub(super) volume_refusal: Option<Refusal>,
    /// Why the volume filters were not evaluated (storage kgpu cannot read).
    pub(super) volumes_unreadable: Option<String>,
    /// Why InterPodAffinity and PodTopologySpread were not evaluated
    /// (namespaces kgpu cannot read).
    pub(super) inter_pod_unreadable: Option<String>,
    /// Some nodes serve its extended resources through DRA devices (a
    /// DeviceClass's extendedResourceName): the claims step weighs those.
    pub(super) through_dra: bool,
}

impl FitResult {
    /// The fit report, its first command naming the pod where there is one.
    pub(super) fn report_for(&self, pod: Option<&Pod>) -> StepReport {
        let mut report = self.report.clone();
        if let Some(p) = pod
            && let Some(first) = report.commands.first_mut()
        {
            *first = format!("kubectl describe pod {} {}", ns_flag(&p.namespace), p.name);
        }
        // A pod whose GPUs come through DRA claims: this step is the rest of
        // the fit (the claims step judges the devices), and its GPUs are in
        // ResourceSlices, not in the nodes' nvidia.com/gpu.
        if self.through_dra || pod.is_some_and(|p| !p.claims.is_empty()) {
            if report.verdict == Verdict::Pass {
                report.summary = format!("{}, its DRA devices aside (the claims step)", report.summary).into();
            }
            for c in report.commands.iter_mut().filter(|c| c.contains("nvidia\\.com/gpu")) {
                *c = "kubectl get resourceslices -o wide".into();
            }
        }
        report
    }

    pub(super) fn not_evaluated() -> FitResult {
        let na = |step| StepReport {
            step,
            verdict: Verdict::NotApplicable,
            summary: "not evaluated: no member shape known".into(),
            details: Arc::default(),
            commands: Vec::new(),
            said_by: None,
        };
        FitResult {
            report: na(Step::Fit),
            device_plugin: na(Step::DevicePlugin),
            node_reasons: Arc::default(),
            scheduler_view: BTreeMap::new(),
            total_nodes: 0,
            unblock: Vec::new(),
            lossless_fixes: 0,
            volume_refusal: None,
            volumes_unreadable: None,
            inter_pod_unreadable: None,
            through_dra: false,
        }
    }

    /// No node is tried: a volume PreFilter refused the pod (its own step says why).
    fn refused_by_volumes(refusal: Refusal, total_nodes: u32) -> FitResult {
        let mut result = FitResult::not_evaluated();
        result.report.summary = "not evaluated: the scheduler tries no node until its volumes are in order".into();
        result.device_plugin.summary = result.report.summary.clone();
        result.total_nodes = total_nodes;
        result.volume_refusal = Some(refusal);
        result
    }
}

pub(super) fn fit_step(index: &Index<'_>, demand: &Demand, holders: &mut super::make_room::Holders) -> FitResult {
    let shape = demand.shape();
    let placement = index.placement(&shape);
    // Counted by reason first (a handful of distinct ones: a linear scan
    // beats a map), codes (strings) made once at the end.
    let mut by_reason: Vec<(NodeReason, u32)> = Vec::new();
    let mut by_first_filter: Vec<(NodeReason, u32)> = Vec::new();
    fn bump(counts: &mut Vec<(NodeReason, u32)>, r: &NodeReason, n: u32) {
        match counts.iter_mut().find(|(k, _)| k == r) {
            Some((_, c)) => *c += n,
            None => counts.push((r.clone(), n)),
        }
    }
    let mut fitting_nodes = 0u32;
    let mut black_holes = Vec::new();
    let mut slots_total = 0u64;
    let mut silent: Vec<(&Node, u32)> = Vec::new();
    // Nodes short only of GPUs, with what they have free: where room could be made.
    let mut closest: Vec<(u64, &Node)> = Vec::new();
    let total_nodes = index.snap.nodes.len() as u32;
    // Nodes counted per (placement class, resource shortfalls): a fleet of
    // thousands of nodes has a few dozen such combinations.
    let classes = placement.classes();
    let mut per_class: Vec<Vec<(Vec<NodeReason>, u32)>> = vec![Vec::new(); classes.len()];
    let mut shortfalls = Vec::new();
    // Nodes short only of CPU, memory or other non-GPU resources, with what they use.
    let mut short_elsewhere: Vec<(&Node, Tally)> = Vec::new();
    // Nodes where a pod of this shape could go but for a host port: who holds it.
    let mut port_holders: Vec<(&Node, &Pod)> = Vec::new();
    let mut with_nominated;
    // The volume filters' PreFilters, once for the shape.
    let volumes = demand.volumes.as_ref().map(|v| v.prepare(index));
    let mut volumes_unreadable = None;
    let volume_check = match volumes {
        Some(Prepared::Refused(refusal)) => return FitResult::refused_by_volumes(refusal, total_nodes),
        Some(Prepared::Check(check)) => Some(check),
        Some(Prepared::Unreadable(why)) => {
            volumes_unreadable = Some(why);
            None
        }
        Some(Prepared::Nothing) | None => None,
    };
    // Nodes only their volumes keep it off, for the advice.
    let mut volume_nodes: Vec<(&Node, NodeReason)> = Vec::new();
    // PodTopologySpread's and InterPodAffinity's counts, once for the shape.
    let incoming = demand.incoming();
    let (inter_pod, inter_pod_unreadable) = match InterPod::prepare_readable(index, &incoming) {
        Ok(prepared) => (prepared, None),
        Err(why) => (None, Some(why)),
    };
    // Nodes only the other pods keep it off, for the advice.
    let mut inter_pod_nodes: Vec<&Node> = Vec::new();
    // Nodes only the pods nominated there ahead of it keep it off.
    let mut kept_for_nominated = 0u32;
    // Its pods refuse each other per zone (or another domain): one per domain.
    let mut domains = fragmentation::OwnDomains::of(demand);
    // Cordoned nodes that would take it now but for the cordon, with room.
    let mut cordoned_with_room: Vec<(&Node, u64)> = Vec::new();
    // Extended resources a DeviceClass serves: on a node that does not
    // advertise them, NodeResourcesFit leaves them to the claims step.
    let through_dra = ThroughDra::of(index.dra(), &demand.requests);
    let mut stripped;
    for ((node, used), &class) in index.nodes_with_usage().zip(placement.class_of()) {
        let ahead = demand.nominated_ahead(index, &node.name);
        let held_for_nominated = used.with_pods(&ahead);
        let promised = held_for_nominated.is_some();
        let used = match held_for_nominated {
            Some(held) => {
                with_nominated = held;
                &with_nominated
            }
            None => used,
        };
        let requests = match through_dra.requests_on(&demand.requests, node) {
            Some(rest) => {
                stripped = rest;
                &stripped
            }
            None => &demand.requests,
        };
        fit::resource_shortfalls_into(requests, node, used, &mut shortfalls);
        // Nominated pods bind their host ports too (AddPodInfo in addGENominatedPods).
        let holder = port_holder(&demand.host_ports, index.pods_on(&node.name))
            .or_else(|| port_holder(&demand.host_ports, &ahead));
        if holder.is_some() {
            // NodePorts comes before NodeResourcesFit in the scheduler's order.
            shortfalls.insert(0, NodeReason::PortsTaken);
        }
        // Then VolumeRestrictions, VolumeBinding, VolumeZone.
        let before_volumes = shortfalls.len();
        if let Some(check) = &volume_check {
            check.reasons_into(node, &mut shortfalls);
        }
        let volume_refused = shortfalls.len() > before_volumes;
        // Then PodTopologySpread and InterPodAffinity.
        let before = shortfalls.len();
        InterPod::node_reasons_into(inter_pod.as_ref(), &incoming, node, &ahead, &mut shortfalls);
        let kept_away = shortfalls.len() > before;
        let combos = &mut per_class[class as usize];
        match combos.iter_mut().find(|(s, _)| *s == shortfalls) {
            Some((_, n)) => *n += 1,
            None => combos.push((shortfalls.clone(), 1)),
        }
        if !classes[class as usize].is_empty() {
            // Only its cordon keeps it out, with room now (a node just
            // drained, a maintenance over): the cheapest fix there is.
            if classes[class as usize][..] == [NodeReason::Cordoned]
                && shortfalls.is_empty()
                && node.readiness == crate::model::Readiness::Ready
                && !index.is_black_hole(node)
            {
                let room = fragmentation::room(demand, node, used);
                if room > 0 {
                    cordoned_with_room.push((node, room));
                }
            }
            continue;
        }
        if index.is_black_hole(node) {
            // The scheduler would send it there; the kubelet would refuse it.
            if shortfalls.is_empty() && demand.requests.wants_gpu() {
                black_holes.push(node.name.clone());
            }
            continue;
        }
        if let Some(pod) = holder {
            port_holders.push((node, pod));
            continue;
        }
        if volume_refused {
            // Its volumes cannot be used here: no room, whatever is free.
            if before_volumes == 0 {
                volume_nodes.push((node, shortfalls[0].clone()));
            }
            continue;
        }
        if kept_away {
            // Another pod keeps it off this node (spread, anti-affinity): no room here.
            if before == 0 {
                if kept_only_by(&ahead, inter_pod.as_ref(), node) {
                    kept_for_nominated += 1;
                } else {
                    inter_pod_nodes.push(node);
                }
            }
            continue;
        }
        slots_total += domains.take(node, fragmentation::room_for(demand, requests, node, used));
        if shortfalls.is_empty() {
            fitting_nodes += 1;
            continue;
        }
        // May run here, but short of resources.
        let free = node.allocatable.gpu.saturating_sub(used.gpu);
        let only_gpu = shortfalls
            .iter()
            .all(|r| matches!(r, NodeReason::DevicePluginNotAdvertising | NodeReason::InsufficientGpu));
        if only_gpu {
            let silent_here = index.silent_gpus(node);
            // Would the GPUs it hides be enough for one pod?
            if silent_here > 0 && free + silent_here as u64 >= demand.gpus_per_pod {
                silent.push((node, silent_here));
            }
        }
        // Closest node: short only of GPUs, and not promised to a preemptor.
        if demand.gpus_per_pod > 0
            && !promised
            && node.allocatable.gpu >= demand.gpus_per_pod
            && shortfalls.iter().all(|r| matches!(r, NodeReason::InsufficientGpu))
        {
            closest.push((free, node));
        }
        // A node that would take it but for CPU, memory or another
        // non-GPU resource: advice on that resource, not on GPUs.
        if !shortfalls.is_empty()
            && shortfalls.iter().all(|r| {
                matches!(
                    r,
                    NodeReason::InsufficientCpu | NodeReason::InsufficientMemory | NodeReason::InsufficientOther(_)
                )
            })
        {
            short_elsewhere.push((node, used.clone()));
        }
    }
    for (static_reasons, combos) in classes.iter().zip(&per_class) {
        for (shortfalls, n) in combos {
            for r in static_reasons.iter().chain(shortfalls) {
                bump(&mut by_reason, r, *n);
            }
            // Static reasons come before NodeResourcesFit in the scheduler's order.
            let first = if static_reasons.is_empty() { &shortfalls[..] } else { static_reasons };
            for r in fit::first_filter_reasons(first) {
                bump(&mut by_first_filter, r, *n);
            }
        }
    }
    let mut node_reasons: BTreeMap<String, u32> = BTreeMap::new();
    for (r, n) in by_reason {
        *node_reasons.entry(r.code()).or_default() += n;
    }
    let mut scheduler_view: BTreeMap<String, u32> = BTreeMap::new();
    for (r, n) in by_first_filter {
        *scheduler_view.entry(r.comparison_class()).or_default() += n;
    }
    let need = demand.pods as u64;
    // The first command names the pod where there is one (see report_for).
    let mut commands: Vec<String> = vec![
        "kubectl get events -A --field-selector reason=FailedScheduling".into(),
        "kubectl get nodes -o custom-columns='NAME:.metadata.name,GPU:.status.allocatable.nvidia\\.com/gpu,UNSCHEDULABLE:.spec.unschedulable,TAINTS:.spec.taints[*].key'".into(),
    ];
    if let Some((node, _)) = port_holders.first() {
        // Who binds which host ports there (sidecars' ports too, as the scheduler counts them).
        commands.push(format!(
            "kubectl get pods -A --field-selector spec.nodeName={} -o jsonpath='{{range .items[*]}}{{.metadata.namespace}}/{{.metadata.name}} {{.spec.initContainers[*].ports[*].hostPort}} {{.spec.containers[*].ports[*].hostPort}}{{\"\\n\"}}{{end}}'",
            node.name
        ));
    }
    let histogram =
        |m: &BTreeMap<String, u32>| m.iter().map(|(k, v)| format!("{v} {k}")).collect::<Vec<_>>().join(", ");
    let mut unblock = Vec::new();
    let mut lossless_fixes = 0;
    let black_hole_note = (!black_holes.is_empty()).then(|| {
        format!(
            "{} more node(s) would take it but fail every GPU pod at admission (black hole): {}",
            black_holes.len(),
            black_holes.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(", ")
        )
    });
    let report = if slots_total >= need && fitting_nodes > 0 {
        StepReport {
            step: Step::Fit,
            verdict: Verdict::Pass,
            summary: if need > 1 {
                format!("room for {slots_total} of the {need} pod(s) needed, on {fitting_nodes} node(s)").into()
            } else {
                format!("fits on {fitting_nodes} of {total_nodes} node(s) now").into()
            },
            details: black_hole_note.into_iter().collect(),
            commands,
            said_by: None,
        }
    } else if fitting_nodes == 0
        && slots_total == 0
        && !black_holes.is_empty()
        && node_reasons.values().sum::<u32>() < total_nodes
    {
        // Only black holes would take it: the scheduler binds it there and
        // the kubelet fails it, again and again.
        unblock.push(format!(
            "drain and fix {} (its device plugin fails every allocation), or keep the pod off it with a node affinity",
            black_holes[0]
        ));
        StepReport {
            step: Step::Fit,
            verdict: Verdict::Block,
            summary: format!(
                "only {} black-hole node(s) would take it: the scheduler sends it there and it fails admission",
                black_holes.len()
            )
            .into(),
            details: black_hole_note.into_iter().collect(),
            commands,
            said_by: None,
        }
    } else {
        let summary = if need > 1 {
            format!("room for {slots_total} of the {need} pod(s) of shape {} it needs", shape_text(&demand.requests, 1))
        } else {
            format!("0/{total_nodes} nodes can take it: {}", histogram(&node_reasons))
        };
        if let Some(text) = uncordon(&cordoned_with_room, need.saturating_sub(slots_total)) {
            unblock.push(text);
            lossless_fixes = unblock.len();
        }
        // Short of MIG slices: the node whose repartition serves it for the least work.
        if let Some(text) = (demand.mig_profile)
            .clone()
            .and_then(|p| super::repartition::advice(index, &demand.shape(), p, need.saturating_sub(slots_total)))
        {
            unblock.push(text);
        }
        // Where its own anti-affinity caps it per zone, freeing GPUs on a
        // node of a zone it already has does not help: no make-room advice.
        let capped_by_domains = domains.wider_key().is_some() && domains.cut > 0;
        if let Some(text) = (!capped_by_domains)
            .then(|| {
                super::make_room::make_room(
                    index,
                    holders,
                    &closest,
                    match &demand.source {
                        ShapeSource::Gang(key) => Some(key),
                        _ => None,
                    },
                    demand.gpus_per_pod,
                    need.saturating_sub(slots_total),
                )
            })
            .flatten()
        {
            unblock.push(text);
        }
        if let Some(check) = &volume_check {
            unblock.extend(super::volume_step::advice(index, check, &volume_nodes));
        }
        if let Some(check) = &inter_pod {
            unblock.extend(super::kept_away::advice(check, &inter_pod_nodes));
        }
        if let Some(key) = domains.wider_key().filter(|_| domains.cut > 0) {
            unblock.push(format!(
                "its pods' required anti-affinity refuses each other in one {key}: each {key} with room takes one of them ({} more pod(s) would fit on those nodes), so it needs more {key} domains with room, fewer pods, or a preferred rule",
                domains.cut
            ));
        }
        if kept_for_nominated > 0 {
            unblock.push(format!(
                "{kept_for_nominated} node(s) with room are kept for pods the scheduler nominated there (equal or higher priority): their rules or spread keep this pod away once they bind, so it waits for them"
            ));
        }
        if let Some(text) = free_ports(&port_holders, &demand.host_ports) {
            unblock.push(text);
        }
        if let Some(text) = free_other(&short_elsewhere, &demand.requests) {
            unblock.push(text);
        }
        if let Some(text) = never_fits(index, &demand.requests) {
            unblock.insert(0, text);
            lossless_fixes = 0;
        }
        let mut details: Vec<String> = node_reasons.iter().map(|(k, v)| format!("{v} node(s): {k}")).collect();
        details.extend(black_hole_note);
        let counted: u32 = node_reasons.values().sum();
        let short = total_nodes.saturating_sub(fitting_nodes);
        if counted > short {
            details.push(format!(
                "(a node can fail several checks, so these add up to {counted} for {short} node(s); the scheduler names only each node's first)"
            ));
        }
        StepReport {
            step: Step::Fit,
            verdict: Verdict::Block,
            summary: summary.into(),
            details: details.into(),
            commands,
            said_by: None,
        }
    };
    let device_plugin = if silent.is_empty() {
        let some_silent = index.nodes().any(|n| index.silent_gpus(n) > 0);
        // Capacity above allocatable: the plugin withholds devices it calls unhealthy.
        let withheld: Vec<String> = index
            .nodes()
            .filter(|n| {
                n.withheld_gpus() > 0 && n.hardware_gpus().is_none() && !index.snap.devices.contains_key(&n.name)
            })
            .map(|n| {
                format!("{}: capacity {}, allocatable {} nvidia.com/gpu", n.name, n.capacity.gpu, n.allocatable.gpu)
            })
            .collect();
        // GPUs the mig-manager holds back while it repartitions: expected
        // for minutes, a wedge after that; said, not "every node advertises".
        let repartitioning: Vec<Repartition> = repartitions(index)
            .into_iter()
            .filter(|r| {
                index.snap.nodes.get(&r.node).is_some_and(|n| {
                    n.operator.paused_for_mig_change
                        || n.hardware_gpus().is_some_and(|h| h as u64 > n.allocatable.gpu + n.allocatable.mig_total())
                })
            })
            .collect();
        if let Some(first) = repartitioning.first() {
            let texts: Vec<String> = repartitioning.iter().map(Repartition::text).collect();
            StepReport {
                step: Step::DevicePlugin,
                verdict: Verdict::Warn,
                summary: format!(
                    "{} node(s) advertise no GPUs while the mig-manager repartitions them: {}",
                    repartitioning.len(),
                    texts.join("; ")
                )
                .into(),
                commands: first.commands(),
                details: withheld.into(),
                said_by: None,
            }
        } else {
            let summary = match (some_silent, withheld.len()) {
                (false, 0) => "every node advertises the GPUs it has".to_string(),
                (true, 0) => {
                    "some nodes have GPUs their device plugin does not advertise (not where this could run)".into()
                }
                (_, n) => format!(
                    "{n} node(s) withhold GPUs their device plugin reports unhealthy (capacity above allocatable){}",
                    if some_silent { "; some others advertise fewer GPUs than they have" } else { "" }
                ),
            };
            StepReport {
                step: Step::DevicePlugin,
                verdict: if some_silent || !withheld.is_empty() { Verdict::Warn } else { Verdict::Pass },
                summary: summary.into(),
                commands: withheld
                    .first()
                    .and_then(|w| w.split(':').next())
                    .map(|n| vec![format!("kubectl describe node {n} | grep -A8 -E '^(Capacity|Allocatable)'")])
                    .unwrap_or_default(),
                details: withheld.into(),
                said_by: None,
            }
        }
    } else {
        let names: Vec<String> =
            silent.iter().map(|(n, missing)| format!("{} ({missing} unadvertised)", n.name)).collect();
        let first = silent[0].0;
        let broken = super::super::gpu_stack::first_break(index, first);
        let first = first.name.clone();
        lossless_fixes = 0;
        unblock.insert(
            0,
            match &broken {
                Some(b) => {
                    format!("fix {first} first: {} — the device plugin cannot advertise GPUs before it", b.text())
                }
                None => format!("restart the device plugin on {first} (it has GPUs but advertises too few)"),
            },
        );
        StepReport {
            step: Step::DevicePlugin,
            verdict: Verdict::Block,
            summary: format!(
                "{} node(s) would take it but their device plugin advertises fewer GPUs than the hardware has{}",
                silent.len(),
                stack_breaks(index, &silent)
            )
            .into(),
            details: names.into_iter().chain(broken.as_ref().map(|b| format!("{first}: {}", b.text()))).collect(),
            commands: vec![
                format!(
                    "kubectl get node {first} -o jsonpath='{{.metadata.labels.nvidia\\.com/gpu\\.count}} in hardware, {{.status.allocatable.nvidia\\.com/gpu}} allocatable{{\"\\n\"}}'"
                ),
                match &broken {
                    Some(b) => b.command(first),
                    None => format!(
                        "kubectl get pods -A -o wide --field-selector spec.nodeName={first} | grep -i device-plugin"
                    ),
                },
            ],
            said_by: None,
        }
    };
    // Isolation order: a device-plugin block explains the fit block; report it there.
    let mut report = report;
    if let Some(why) = &inter_pod_unreadable {
        report.details = report
            .details
            .iter()
            .cloned()
            .chain([format!("not evaluated: {why}: where the scheduler refuses it by pod affinity or spread, its word is the verdict")])
            .collect();
    }
    if device_plugin.verdict == Verdict::Block && report.verdict == Verdict::Block {
        report.verdict = Verdict::Warn;
        report.summary = format!("{} (see device plugin)", report.summary).into();
    }
    FitResult {
        report,
        device_plugin,
        node_reasons: Arc::new(node_reasons),
        scheduler_view,
        total_nodes,
        unblock,
        lossless_fixes,
        volume_refusal: None,
        volumes_unreadable,
        inter_pod_unreadable,
        through_dra: index.nodes().any(|n| through_dra.applies_on(n)),
    }
}

/// Cordoned nodes that would take the pod now but for their cordon: the
/// cheapest fix when the reason for the cordon is over (a drain done, a
/// maintenance finished); a driver upgrade still under way is named.
fn uncordon(nodes: &[(&Node, u64)], missing: u64) -> Option<String> {
    let (first, _) = nodes.first()?;
    let room: u64 = nodes.iter().map(|(_, r)| r).sum();
    let upgrading = first.operator.upgrade_state.as_ref().filter(|s| s.as_str() != "upgrade-done");
    let why = match upgrading {
        Some(state) => format!("it is cordoned for its driver upgrade ({state}): let the upgrade finish"),
        None => format!("if its maintenance is over: kubectl uncordon {}", first.name),
    };
    let more =
        if nodes.len() > 1 { format!(" (and {} more cordoned node(s))", nodes.len() - 1) } else { String::new() };
    let enough = if room >= missing { "enough" } else { "part of what it needs" };
    Some(format!(
        "uncordon {}{more}: only the cordon keeps this pod out there, with room for {room} pod(s) of this shape now ({enough}); {why}",
        first.name
    ))
}

/// A resource the pod asks more of than any node offers at all: no
/// eviction, defragmentation or patience places it.
fn never_fits(index: &Index<'_>, requests: &crate::model::Resources) -> Option<String> {
    let asked = [("cpu", requests.cpu_milli), ("memory", requests.memory), (keys::RESOURCE_GPU, requests.gpu)]
        .into_iter()
        .chain(requests.extended.iter().map(|(r, n)| (r.as_str(), *n)));
    // A MIG profile no node offers today is a partitioning, not a size: a
    // repartition makes it (its own advice says which node).
    let partitioned = |r: &str| r.starts_with(keys::RESOURCE_MIG_PREFIX);
    for (resource, amount) in asked.filter(|(r, n)| *n > 0 && !partitioned(r)) {
        // GPUs a device plugin does not advertise yet still count: fixing it places the pod.
        let offers = |n: &Node| match resource {
            keys::RESOURCE_GPU => n.allocatable.gpu.max(n.hardware_gpus().map_or(0, u64::from)),
            _ => n.allocatable.get(resource),
        };
        let most = index.nodes().map(|n| (offers(n), n.name.clone())).max();
        let (most, node) = most.unwrap_or((0, crate::model::Sym::new("-")));
        if amount > most {
            let fmt = |v| crate::model::quantity::format(resource, v);
            return Some(format!(
                "no node can ever hold it: it asks {} {resource}, the most any node offers is {}{} — shrink the request or add larger nodes",
                fmt(amount),
                fmt(most),
                if most > 0 { format!(" ({node})") } else { String::new() }
            ));
        }
    }
    None
}

/// A node that would take it but for CPU, memory or another non-GPU
/// resource, and how much more of each it needs there (a node short of the
/// fewest resources first).
fn free_other(nodes: &[(&Node, Tally)], requests: &crate::model::Resources) -> Option<String> {
    // (resource, more needed, free, allocatable)
    let deficits = |node: &Node, used: &Tally| -> Vec<(&str, u64, u64, u64)> {
        [
            ("cpu", requests.cpu_milli, node.allocatable.cpu_milli, used.cpu_milli),
            ("memory", requests.memory, node.allocatable.memory, used.memory),
        ]
        .into_iter()
        .filter_map(|(r, want, alloc, used)| {
            let free = alloc.saturating_sub(used);
            want.checked_sub(free).filter(|more| *more > 0).map(|more| (r, more, free, alloc))
        })
        .collect()
    };
    let (node, used) = nodes.iter().min_by_key(|(n, u)| (deficits(n, u).len(), n.name.clone()))?;
    let short = deficits(node, used);
    if short.is_empty() {
        return Some(format!("free the other resources it asks for on {} (it has the GPUs)", node.name));
    }
    let fmt = |r: &str, v: u64| crate::model::quantity::format(r, v);
    // Short even when empty: the node is too small, not too busy.
    if short.iter().all(|(_, _, free, alloc)| free == alloc) {
        let offers: Vec<String> = short.iter().map(|(r, _, _, alloc)| format!("{} {r}", fmt(r, *alloc))).collect();
        return Some(format!(
            "{} has the GPUs but offers only {} in all: ask for no more than that",
            node.name,
            offers.join(" and ")
        ));
    }
    let parts: Vec<String> = short
        .iter()
        .map(|(r, more, free, alloc)| {
            format!("{} more {r} ({} free of {})", fmt(r, *more), fmt(r, *free), fmt(r, *alloc))
        })
        .collect();
    Some(format!("free {} on {} (it has the GPUs), or ask for less", parts.join(" and "), node.name))
}

/// Where the GPU Operator's stack is broken on the silent nodes, layer by
/// node (`; GPU Operator stack broken: driver on gpu-12, device plugin on gpu-13`).
fn stack_breaks(index: &Index<'_>, silent: &[(&Node, u32)]) -> String {
    let broken: Vec<String> = silent
        .iter()
        .filter_map(|(n, _)| {
            super::super::gpu_stack::first_break(index, n).map(|b| format!("{} on {}", b.layer.title(), n.name))
        })
        .collect();
    if broken.is_empty() { String::new() } else { format!("; GPU Operator stack broken: {}", broken.join(", ")) }
}

/// Whether only the nominated pods `ahead` keep a pod off `node`: the
/// inter-pod rules refuse it there with them and not without them.
fn kept_only_by(ahead: &[&Pod], check: Option<&InterPod<'_>>, node: &Node) -> bool {
    if ahead.is_empty() {
        return false;
    }
    let mut without = Vec::new();
    if let Some(check) = check {
        check.reasons_into(node, &mut without);
    }
    without.is_empty()
}

/// A pod on the node that binds a host port the shape wants.
fn port_holder<'a>(wanted: &[HostPort], on_node: &[&'a Pod]) -> Option<&'a Pod> {
    if wanted.is_empty() {
        return None;
    }
    on_node.iter().copied().find(|p| fit::port_conflict(wanted, p))
}

/// Where the host ports it wants are taken, and by whom.
fn free_ports(holders: &[(&Node, &Pod)], wanted: &[HostPort]) -> Option<String> {
    let (node, pod) = holders.first()?;
    let ports = wanted.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(", ");
    let more = match holders.len() {
        1 => String::new(),
        n => format!(" (and {} more node(s))", n - 1),
    };
    Some(format!(
        "host port {ports} is taken on {} by {}/{}{more}: move that pod, or drop hostPort/hostNetwork from this one",
        node.name, pod.namespace, pod.name
    ))
}

/// What the shape hints read of the whole fleet, gathered once.
pub(super) struct FleetFacts {
    /// MIG profiles some node advertises (a non-zero amount).
    advertised_mig: std::collections::BTreeSet<String>,
    /// MIG profiles any node lists, zero or not.
    offered_mig: std::collections::BTreeSet<String>,
    any_gpu_node: bool,
    /// Taints every GPU node has (but PreferNoSchedule ones).
    common_gpu_taints: Vec<crate::model::Taint>,
    /// Nodes the mig-manager is repartitioning now.
    repartitions: Vec<Repartition>,
}

/// A node the mig-manager is repartitioning (`mig.config.state` pending or
/// rebooting): it advertises none of the GPUs it repartitions until done.
pub(super) struct Repartition {
    node: crate::model::Sym,
    config: String,
    state: String,
    for_seconds: Option<i64>,
}

impl Repartition {
    /// `mig-08 to all-3g.40gb (pending for 40m, looks wedged)`.
    fn text(&self) -> String {
        let wedged =
            self.for_seconds.is_some_and(|s| s >= super::super::Thresholds::default().mig_pending_wedged_after);
        format!(
            "{} to {} ({} for {}{})",
            self.node,
            self.config,
            self.state,
            self.for_seconds.map_or("an unknown time".into(), crate::model::time::age),
            if wedged { ", looks wedged" } else { "" }
        )
    }

    fn commands(&self) -> Vec<String> {
        vec![
            format!("kubectl get node {} -L nvidia.com/mig.config,nvidia.com/mig.config.state", self.node),
            format!(
                "kubectl logs -n gpu-operator $(kubectl get pods -n gpu-operator -l app=nvidia-mig-manager --field-selector spec.nodeName={} -o name) --tail=50",
                self.node
            ),
        ]
    }
}

fn repartitions(index: &Index<'_>) -> Vec<Repartition> {
    index
        .nodes()
        .filter_map(|n| {
            let state = n.operator.mig_config_state.as_ref()?.as_str();
            matches!(state, "pending" | "rebooting").then(|| Repartition {
                node: n.name.clone(),
                config: n.operator.mig_config.as_ref().map_or("?", |c| c.as_str()).to_string(),
                state: state.to_string(),
                for_seconds: n.operator.mig_config_since.map(|s| index.now - s),
            })
        })
        .collect()
}

impl FleetFacts {
    pub(super) fn of(index: &Index<'_>) -> FleetFacts {
        let mut advertised_mig = std::collections::BTreeSet::new();
        let mut offered_mig = std::collections::BTreeSet::new();
        for n in index.nodes() {
            for (profile, amount) in n.allocatable.mig() {
                offered_mig.insert(profile.to_string());
                if amount > 0 {
                    advertised_mig.insert(profile.to_string());
                }
            }
        }
        let gpu_nodes: Vec<&Node> = index.nodes().filter(|n| n.is_gpu_node()).collect();
        let common_gpu_taints = gpu_nodes.first().map_or_else(Vec::new, |first| {
            first
                .taints
                .iter()
                .filter(|t| t.effect != crate::model::TaintEffect::PreferNoSchedule)
                // The cluster's own condition taints (cordon, NotReady, pressure)
                // are never something to tolerate.
                .filter(|t| !t.key.as_str().starts_with("node.kubernetes.io/"))
                .filter(|t| gpu_nodes.iter().all(|n| n.taints.contains(t)))
                .cloned()
                .collect()
        });
        FleetFacts {
            advertised_mig,
            offered_mig,
            any_gpu_node: !gpu_nodes.is_empty(),
            common_gpu_taints,
            repartitions: repartitions(index),
        }
    }
}

/// Hints that follow from the shape alone (not the particular pod).
pub(super) fn shape_hints(fleet: &FleetFacts, demand: &Demand) -> Vec<String> {
    let mut out = Vec::new();
    let selector_gpu =
        demand.node_selector.iter().find(|(k, _)| k.as_str() == keys::RESOURCE_GPU).map(|(_, v)| v.clone());
    if let Some(v) = selector_gpu {
        out.push(format!(
            "gpu-count-in-node-selector: nodeSelector `{}: \"{v}\"` does not request GPUs — no node carries that label, so it matches nothing; request them with resources.limits `{}: {v}` and drop the selector",
            keys::RESOURCE_GPU,
            keys::RESOURCE_GPU
        ));
    }
    if let Some(profile) = demand.mig_profile.clone()
        && !fleet.advertised_mig.contains(profile.as_str())
    {
        let resource = format!("{}{profile}", keys::RESOURCE_MIG_PREFIX);
        // A repartition to this very profile under way: it comes first, and
        // no second one should start while it is stuck.
        let under_way: Vec<&Repartition> =
            fleet.repartitions.iter().filter(|r| r.config.contains(profile.as_str())).collect();
        if let Some(r) = under_way.first() {
            out.push(format!(
                "mig-repartition-under-way: {}: that node offers {profile} once it is done; find why it has not finished before you start another ({})",
                r.text(),
                r.commands().join("; ")
            ));
        }
        out.push(format!(
            "mig-profile-not-offered: no node advertises {resource}{}; {} with a mig.config that includes {profile}",
            if fleet.offered_mig.is_empty() {
                String::new()
            } else {
                format!(" (offered: {})", fleet.offered_mig.iter().cloned().collect::<Vec<_>>().join(", "))
            },
            if under_way.is_empty() {
                "repartition a node (m)"
            } else {
                "then, if still needed, repartition another node (m)"
            }
        ));
    }
    // A taint every GPU node has and the pod does not tolerate.
    if demand.requests.wants_gpu() && fleet.any_gpu_node {
        for t in fleet.common_gpu_taints.iter().filter(|t| !fit::tolerates(&demand.tolerations, t)) {
            out.push(format!(
                "missing-toleration: every GPU node has taint {}={}:{}; add tolerations: [{{key: {}, operator: Exists, effect: {}}}]",
                t.key,
                t.value,
                t.effect.as_str(),
                t.key,
                t.effect.as_str()
            ));
        }
    }
    out
}
