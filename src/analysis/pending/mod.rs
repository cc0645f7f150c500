//! Why is it Pending? For each pending pod, Kueue Workload or Volcano
//! PodGroup, the isolation chain: queue/quota → gang → per-node fit →
//! device plugin, each step with its evidence and the kubectl command that
//! proves it by hand, then what would unblock it.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::model::{ClusterEvent, Gang, GangKey, GangKind, Pod, Resources, Snapshot, Sym, Timestamp, keys};

mod bound;
mod claim_step;
mod compute_domain;
mod cross_check;
mod fit_step;
mod gang_step;
mod honesty;
mod kept_away;
mod make_room;
mod nomination;
mod quota;
mod repartition;
#[cfg(test)]
mod tests;
mod volume_step;

use super::fragmentation::{Demand, DemandKey, Fragmentation, PlanStatus, ShapeSource};
use super::gangs::{GangState, GangSummary};
use super::index::Index;
use cross_check::{CrossCheck, cross_check};
use fit_step::{FitResult, FleetFacts, fit_step, shape_hints};
use gang_step::gang_step;
use quota::quota_step;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Step {
    Quota,
    AdmissionCheck,
    Gang,
    /// DRA: the pod's ResourceClaims exist and can be allocated.
    Claims,
    /// The pod's PersistentVolumeClaims exist and are bound or can bind.
    Volumes,
    Fit,
    DevicePlugin,
    /// Bound to a Ready node, the pod's containers do not start: the image,
    /// the container runtime (the NVIDIA hook's CUDA requirement), a crash loop.
    Start,
    /// Where kgpu's model finds nothing in the way and the component that
    /// decides (kube-scheduler, another scheduler, Volcano) says otherwise:
    /// its word, not evaluated by kgpu.
    Scheduler,
}

impl Step {
    pub fn as_str(self) -> &'static str {
        match self {
            Step::Quota => "quota",
            Step::AdmissionCheck => "admission-check",
            Step::Gang => "gang",
            Step::Claims => "claims",
            Step::Volumes => "volumes",
            Step::Fit => "fit",
            Step::DevicePlugin => "device-plugin",
            Step::Start => "start",
            Step::Scheduler => "scheduler",
        }
    }
    pub fn title(self) -> &'static str {
        match self {
            Step::Quota => "queue / quota",
            Step::AdmissionCheck => "admission checks",
            Step::Gang => "gang",
            Step::Claims => "DRA resource claims",
            Step::Volumes => "persistent volumes",
            Step::Fit => "per-node fit",
            Step::DevicePlugin => "device plugin",
            Step::Start => "container start",
            Step::Scheduler => "the scheduler's verdict",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    Block,
    /// Not blocking, but worth knowing.
    Warn,
    /// Does not apply to this item.
    NotApplicable,
}

#[derive(Clone, Debug, PartialEq)]
pub struct StepReport {
    pub step: Step,
    pub verdict: Verdict,
    /// Summary and details are shared by the items of one shape.
    pub summary: Arc<str>,
    pub details: Arc<[String]>,
    /// The kubectl command that shows the same by hand.
    pub commands: Vec<String>,
    /// Whose verdict this is when not kgpu's own: the component that
    /// decides said so, in words kgpu does not (fully) model.
    pub said_by: Option<VerdictSource>,
}

/// Who gave a pending item's verdict: kgpu's own model, or the component
/// that decides (its condition or event), where kgpu's model ends.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum VerdictSource {
    #[default]
    Kgpu,
    Scheduler,
    Kueue,
    Volcano,
    /// Nobody's: the refusal rests on what kgpu does not model, and the
    /// component that decides has said nothing yet. kgpu's own reading is
    /// in the details; the item is not "nothing blocks it" either.
    Undecided,
}

impl VerdictSource {
    pub fn as_str(self) -> &'static str {
        match self {
            VerdictSource::Kgpu => "kgpu",
            VerdictSource::Scheduler => "scheduler",
            VerdictSource::Kueue => "kueue",
            VerdictSource::Volcano => "volcano",
            VerdictSource::Undecided => "undecided",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum PendingKind {
    Pod,
    Workload,
    PodGroup,
}

impl PendingKind {
    pub fn as_str(self) -> &'static str {
        match self {
            PendingKind::Pod => "Pod",
            PendingKind::Workload => "Workload",
            PendingKind::PodGroup => "PodGroup",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct PendingItem {
    pub kind: PendingKind,
    pub namespace: Sym,
    pub name: String,
    pub age: Timestamp,
    pub queue: Option<Sym>,
    /// `2×8` (pods × GPUs), `1×1g.10gb`, `1×cpu`.
    pub shape: String,
    pub gpus: u64,
    pub priority: i32,
    /// The first step that blocks; `None` when nothing does (it should schedule).
    pub blocking: Option<Step>,
    /// Whose verdict the headline is: kgpu's model, or the deciding
    /// component's where kgpu finds nothing in the way and it disagrees.
    pub verdict_source: VerdictSource,
    pub summary: String,
    pub steps: Vec<StepReport>,
    /// kgpu's per-node verdicts: reason code → nodes (a node can count for
    /// several). Shared by the items of one shape.
    pub node_reasons: Arc<BTreeMap<String, u32>>,
    pub scheduler_message: Option<String>,
    pub scheduler_recognised: Option<bool>,
    /// The scheduler's histogram (node reason code, or its raw text).
    pub scheduler_reasons: Arc<BTreeMap<String, u32>>,
    pub agrees_with_scheduler: Option<bool>,
    pub disagreement: Option<String>,
    pub hints: Vec<String>,
    /// The smallest changes that would unblock it.
    pub unblock: Vec<String>,
    /// How many of `unblock`'s first entries lose no work (an uncordon).
    pub lossless_fixes: usize,
    /// A pod that outranks pods holding what it needs: what preempting them costs.
    pub preemption: Option<Box<crate::analysis::preemption::Preemption>>,
    /// `status.nominatedNodeName`: the scheduler preempted for it there.
    pub nominated_node: Option<Sym>,
}

impl PendingItem {
    /// An item with its identity and shape, nothing found about it yet.
    #[allow(clippy::too_many_arguments)]
    fn new(
        kind: PendingKind,
        namespace: Sym,
        name: &str,
        age: Timestamp,
        queue: Option<Sym>,
        shape: String,
        gpus: u64,
        priority: i32,
    ) -> PendingItem {
        PendingItem {
            kind,
            namespace,
            name: name.to_string(),
            age,
            queue,
            shape,
            gpus,
            priority,
            blocking: None,
            verdict_source: VerdictSource::Kgpu,
            summary: String::new(),
            steps: Vec::new(),
            node_reasons: Arc::default(),
            scheduler_message: None,
            scheduler_recognised: None,
            scheduler_reasons: Arc::default(),
            agrees_with_scheduler: None,
            disagreement: None,
            hints: Vec::new(),
            unblock: Vec::new(),
            lossless_fixes: 0,
            preemption: None,
            nominated_node: None,
        }
    }

    /// The item of one pod.
    fn of_pod(pod: &Pod, now: Timestamp) -> PendingItem {
        PendingItem::new(
            PendingKind::Pod,
            pod.namespace.clone(),
            &pod.name,
            crate::model::time::since(now, pod.created),
            pod.queue.clone(),
            shape_text(&pod.requests, 1),
            pod.requests.gpu,
            pod.priority,
        )
    }

    pub fn blocking_str(&self) -> &'static str {
        self.blocking.map_or("none", |s| s.as_str())
    }
    pub fn display_name(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// What pending items that share a demand key share: a fleet's thousands
/// of pending pods come in a few dozen shapes, and the per-node work is done
/// once per shape.
#[derive(Clone)]
struct ShapeFindings {
    fit: Arc<FitResult>,
    /// Hints that follow from the shape alone.
    hints: Arc<[String]>,
}

/// Memoised work of one analysis.
#[derive(Default)]
struct Memo<'a> {
    shapes: HashMap<DemandKey, ShapeFindings>,
    gang_demands: HashMap<GangKey, Demand>,
    /// Each gang's room as the fragmentation map counted it (claims the
    /// scheduler would make for DRA-served resources included): (pods at
    /// once, pods it needs).
    gang_room: HashMap<GangKey, (u64, u32)>,
    fleet: Option<FleetFacts>,
    /// The quota and gang steps of a pod outside queues and gangs.
    lone_pod_steps: Option<(StepReport, StepReport)>,
    /// The fit of gangs whose member shape is unknown.
    not_evaluated: Option<Arc<FitResult>>,
    /// Cross-checks by (fit, scheduler message): pods of one shape share
    /// the scheduler's message as often as not. Keyed by the fit's address,
    /// so every fit is kept alive (in `shapes`, `not_evaluated`) meanwhile.
    checks: HashMap<(*const FitResult, String), CrossCheck>,
    /// Pods that finished on a node, newest first: what freed room since
    /// the scheduler last tried (`honesty`).
    finished: Option<Vec<honesty::Finished>>,
    /// The newest FailedScheduling event of each pod, by (namespace, name).
    failed_scheduling: Option<HashMap<(Sym, &'a str), &'a ClusterEvent>>,
    /// DRA device selectors, compiled once.
    selectors: crate::analysis::dra::cel::Selectors,
    /// GPU holders of the nodes asked about, priced once.
    holders: make_room::Holders,
    /// The node that joined last (`honesty`).
    newest_node: Option<Option<&'a crate::model::Node>>,
}

impl<'a> Memo<'a> {
    fn shape(&mut self, index: &Index<'a>, demand: &Demand) -> ShapeFindings {
        let fleet = self.fleet.get_or_insert_with(|| FleetFacts::of(index));
        let key = demand.key_in(index);
        self.shapes
            .entry(key)
            .or_insert_with(|| ShapeFindings {
                fit: Arc::new(fit_step(index, demand, &mut self.holders)),
                hints: shape_hints(fleet, demand).into(),
            })
            .clone()
    }

    /// The scheduler's last word on a pod: its PodScheduled message, or the
    /// newest FailedScheduling event about it.
    fn scheduler_message(&mut self, snap: &'a Snapshot, pod: &Pod) -> Option<String> {
        // A gated pod's condition says the gate holds it: the scheduler has not tried it.
        if let Some(u) = &pod.unschedulable
            && !u.message.is_empty()
            && u.reason.as_str() != "SchedulingGated"
        {
            return Some(u.message.to_string());
        }
        self.failed_scheduling(snap, pod).map(|e| e.message.to_string())
    }

    /// When the scheduler last said it: its newest FailedScheduling event,
    /// or when the PodScheduled condition turned False.
    fn scheduler_said_at(&mut self, snap: &'a Snapshot, pod: &Pod) -> Option<Timestamp> {
        let event = self.failed_scheduling(snap, pod).map(|e| e.last);
        let condition = pod.unschedulable.as_ref().map(|u| u.since);
        event.max(condition)
    }

    fn failed_scheduling(&mut self, snap: &'a Snapshot, pod: &Pod) -> Option<&'a ClusterEvent> {
        let events = self.failed_scheduling.get_or_insert_with(|| {
            let mut newest: HashMap<(Sym, &str), &ClusterEvent> = HashMap::new();
            for e in snap.events.values() {
                if e.is_failed_scheduling() && e.object_kind.as_str() == "Pod" {
                    let slot = newest.entry((e.namespace.clone(), &*e.object_name)).or_insert(e);
                    // The last of equals wins, as a max over the events would.
                    if e.last >= slot.last {
                        *slot = e;
                    }
                }
            }
            newest
        });
        events.get(&(pod.namespace.clone(), &*pod.name)).copied()
    }

    fn cross_check(&mut self, item: &mut PendingItem, fit: &Arc<FitResult>, message: Option<String>) {
        let Some(message) = message else { return };
        let check =
            self.checks.entry((Arc::as_ptr(fit), message.clone())).or_insert_with_key(|(_, m)| cross_check(fit, m));
        check.apply(item);
        item.scheduler_message = Some(message);
    }
}

fn hints_for(shape: &[String], pod: Option<&Pod>) -> Vec<String> {
    let mut out = shape.to_vec();
    // A gang scheduler's own pods (Volcano's PodGroup members) are meant to be
    // scheduled by it: that is no hint.
    if let Some(p) = pod
        && p.requests.wants_gpu()
        && p.group.is_none()
        && let Some(s) = p.scheduler.as_ref().filter(|s| s.as_str() != "default-scheduler")
    {
        out.push(format!("scheduler: this pod is scheduled by '{s}', not default-scheduler"));
    }
    out
}

/// Pods this many at most get a preemption cost: a fleet with priorities
/// everywhere has thousands of pending pods, and the first are the ones read.
const PREEMPTION_COSTS_AT_MOST: usize = 64;

/// Pending GPU pods blocked at the fit step that outrank pods on some node:
/// what preempting them would lose (`analysis::preemption`), as a hint too.
pub fn add_preemption_costs(index: &Index<'_>, items: &mut [PendingItem]) {
    // Only a pod above the lowest running priority can have victims: in a
    // fleet without priorities that is none, and the nodes are not walked.
    let Some(lowest) = index.lowest_holder_priority() else {
        return;
    };
    let mut done = 0;
    for item in items.iter_mut() {
        if done == PREEMPTION_COSTS_AT_MOST {
            break;
        }
        if item.kind != PendingKind::Pod
            || item.blocking != Some(Step::Fit)
            || item.nominated_node.is_some()
            || item.gpus == 0
            || item.priority <= lowest
        {
            continue;
        }
        let key = crate::model::PodKey::new(item.namespace.as_str(), &item.name);
        let Some(pod) = index.snap.pods.get(&key) else { continue };
        done += 1;
        let Some(cost) = crate::analysis::preemption::cost(index, pod) else { continue };
        item.hints.push(format!(
            "preemption: {}{}",
            cost.summary(),
            if cost.policy_never {
                " (its PriorityClass says preemptionPolicy: Never, so it waits instead)"
            } else {
                ""
            }
        ));
        if let Some((node, hours)) = &cost.cheapest {
            item.hints.push(format!(
                "preemption: on {node} it would lose {hours:.1} GPU-hours (the scheduler does not weigh lost work)"
            ));
        }
        item.preemption = Some(Box::new(cost));
    }
}

/// Every pending item, GPU work first, then oldest first.
pub fn analyze<'a>(index: &Index<'a>, gangs: &[GangSummary], fragmentation: &Fragmentation) -> Vec<PendingItem> {
    complete(index, gangs, fragmentation, pod_items(index, gangs))
}

/// The gangs that wait as a whole: they get an item of their own, their
/// pods do not.
fn waiting_gangs<'g, 'a>(
    index: &'g Index<'a>,
    gangs: &'g [GangSummary],
) -> impl Iterator<Item = (&'g GangSummary, &'a Gang)> + 'g {
    gangs
        .iter()
        .filter(|s| !matches!(s.state, GangState::Running | GangState::Placed | GangState::Finished))
        .filter_map(|s| index.snap.gangs.get(&s.key).map(|g| (s, &**g)))
}

/// The items of pending pods outside waiting gangs. They need no
/// fragmentation analysis, so [`super::analyze`] builds them beside it.
pub fn pod_items<'a>(index: &Index<'a>, gangs: &[GangSummary]) -> Vec<PendingItem> {
    let gang_keys: std::collections::HashSet<&GangKey> = waiting_gangs(index, gangs).map(|(s, _)| &s.key).collect();
    let mut memo = Memo::default();
    let mut items: Vec<PendingItem> = index
        .pending_pods()
        .iter()
        .filter(|pod| !index.gang_of(&pod.key()).is_some_and(|g| gang_keys.contains(g)))
        .map(|pod| {
            let mut item = pod_item(index, &mut memo, pod);
            // A member of a gang that has its minimum (an elastic gang's extra
            // member, a replacement): it waits as itself, in the gang's context.
            let gang = index
                .gang_of(&pod.key())
                .and_then(|k| Some((index.snap.gangs.get(k)?, gangs.iter().find(|g| g.key == *k)?)));
            if let Some((gang, summary)) = gang {
                item.steps[0] = quota_step(index, gang);
                item.steps[1] = gang_step::member_step(gang, summary);
                item.queue = gang.queue.clone();
                let steps = std::mem::take(&mut item.steps);
                let fit = memo.shape(index, &pod_demand(index, pod)).fit;
                finish(&mut item, steps, &fit);
                nomination::apply(index, pod, &mut item);
                honesty::defer_to_the_cluster(index, &mut memo, &mut item, Some(pod), &fit);
            }
            item
        })
        .collect();
    // Bound, yet Pending: the node the scheduler chose cannot start them.
    items.extend(bound::items(index));
    items
}

/// Every pending item, GPU work first, then oldest first: the gangs' items
/// and `pod_items` (from [`pod_items`]), with the defragmentation plan.
pub fn complete<'a>(
    index: &Index<'a>,
    gangs: &[GangSummary],
    fragmentation: &Fragmentation,
    pod_items: Vec<PendingItem>,
) -> Vec<PendingItem> {
    let plan = &fragmentation.plan;
    let mut memo = Memo::default();
    for shape in &fragmentation.shapes {
        if let ShapeSource::Gang(key) = &shape.demand.source {
            memo.gang_demands.insert(key.clone(), shape.demand.clone());
            memo.gang_room.insert(key.clone(), (shape.largest_gang, shape.demand.pods));
        }
    }
    let mut items: Vec<PendingItem> =
        waiting_gangs(index, gangs).map(|(summary, gang)| gang_item(index, &mut memo, gang, summary, gangs)).collect();
    items.extend(pod_items);
    // The defragmentation plan is the smallest change for the gang it targets.
    if plan.status == PlanStatus::Found
        && let Some(target) = &plan.target
        && let Some(item) = items.iter_mut().find(|i| {
            // Short of room: for its resources, or for its claims' devices.
            target.ends_with(&i.display_name())
                && matches!(i.blocking, Some(Step::Fit | Step::Claims))
                && i.nominated_node.is_none()
        })
    {
        // After an uncordon that would do (no work lost), never before it.
        item.unblock.insert(
            item.lossless_fixes,
            format!(
                "run the defragmentation plan (Fleet pane, x): {}, {:.1} GPU-hours disrupted, frees {}",
                plan.steps_summary(),
                plan.gpu_hours,
                plan.nodes_freed.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(", ")
            ),
        );
    }
    items.sort_by(|a, b| {
        (b.gpus > 0)
            .cmp(&(a.gpus > 0))
            .then(b.priority.cmp(&a.priority))
            .then(b.age.cmp(&a.age))
            .then(a.name.cmp(&b.name))
            // Same name in two namespaces: an order that does not depend on
            // the order the items were found in (incremental or full).
            .then(a.namespace.as_str().cmp(b.namespace.as_str()))
            .then(a.kind.cmp(&b.kind))
    });
    items
}

fn ns_flag(ns: &Sym) -> String {
    format!("-n {ns}")
}

fn shape_text(requests: &Resources, pods: u32) -> String {
    if requests.gpu > 0 {
        format!("{pods}×{}", requests.gpu)
    } else if let Some((profile, n)) = requests.mig().next() {
        if n > 1 { format!("{pods}×{n}·{profile}") } else { format!("{pods}×{profile}") }
    } else if let Some((name, n)) = requests.extended.iter().find(|(name, _)| name.as_str().contains('/')) {
        // Another vendor's device (`example.com/gpu`), not "cpu".
        format!("{pods}×{n} {name}")
    } else {
        format!("{pods}×cpu")
    }
}

/// A gang's shape, pod set by pod set (`1×cpu + 4×8`): each set as many
/// pods as it expects (what Kueue admitted, under partial admission).
fn gang_shape_text(gang: &Gang, required: u32) -> String {
    if gang.pod_sets.is_empty() {
        return format!("{required}×?");
    }
    gang.pod_sets.iter().map(|set| shape_text(&set.requests, gang.expected_pods(set))).collect::<Vec<_>>().join(" + ")
}

/// [`gang_shape_text`] with the GPUs the pod sets ask through DRA claims
/// (`4×2 DRA`; `4×? DRA` where a template does not exist), and the gang's
/// GPUs counted both ways.
fn gang_shape_and_gpus(index: &Index<'_>, memo: &mut Memo<'_>, gang: &Gang, required: u32) -> (String, u64) {
    let mut gpus = gang.total_requests().gpu;
    if gang.pod_sets.iter().all(|set| set.claims.is_empty()) {
        return (gang_shape_text(gang, required), gpus);
    }
    let shapes: Vec<String> = gang
        .pod_sets
        .iter()
        .map(|set| {
            let pods = gang.expected_pods(set);
            if set.claims.is_empty() {
                return shape_text(&set.requests, pods);
            }
            match index.dra().template_gpus(&mut memo.selectors, &gang.namespace, &set.claims) {
                Some(0) => shape_text(&set.requests, pods),
                Some(dra) => {
                    gpus += dra * u64::from(pods);
                    let partitions = index.dra().asks_partitions(&mut memo.selectors, &gang.namespace, &set.claims);
                    crate::analysis::dra::shape_label(pods.into(), set.requests.gpu + dra, partitions)
                }
                None => format!("{pods}×? DRA"),
            }
        })
        .collect();
    (shapes.join(" + "), gpus)
}

fn pod_item<'a>(index: &Index<'a>, memo: &mut Memo<'a>, pod: &Pod) -> PendingItem {
    let (no_queue, no_gang) = memo.lone_pod_steps.get_or_insert_with(|| {
        let not_applicable = |step, summary: &str| StepReport {
            step,
            verdict: Verdict::NotApplicable,
            summary: summary.into(),
            details: Arc::default(),
            commands: Vec::new(),
            said_by: None,
        };
        (
            not_applicable(Step::Quota, "not queued by Kueue or Volcano"),
            not_applicable(Step::Gang, "not part of a gang"),
        )
    });
    let mut steps = Vec::with_capacity(4);
    steps.extend([no_queue.clone(), no_gang.clone()]);
    let shape = memo.shape(index, &pod_demand(index, pod));
    let fit = shape.fit;
    let scheduler = memo.scheduler_message(index.snap, pod);
    let mut item = PendingItem {
        node_reasons: fit.node_reasons.clone(),
        hints: hints_for(&shape.hints, Some(pod)),
        ..PendingItem::of_pod(pod, index.now)
    };
    if pod.gated {
        steps[0] = StepReport {
            step: Step::Quota,
            verdict: Verdict::Block,
            summary: "held by a scheduling gate (spec.schedulingGates): not yet released to the scheduler".into(),
            details: Arc::default(),
            commands: vec![format!(
                "kubectl get pod {} {} -o jsonpath='{{.spec.schedulingGates}}'",
                ns_flag(&pod.namespace),
                pod.name
            )],
            said_by: None,
        };
    }
    let claims = crate::analysis::dra::claims::verdict(index, &mut memo.selectors, pod);
    if let Some(claims) = &claims {
        if claims.gpus > 0 {
            item.gpus += claims.gpus;
            let partitions = index.dra().asks_partitions(&mut memo.selectors, &pod.namespace, &pod.claims);
            item.shape = crate::analysis::dra::shape_label(1, item.gpus, partitions);
        } else if !claims.unresolved.is_empty() && pod.requests.gpu == 0 {
            // What a claim that does not exist asks for is unknown.
            item.shape = "1×? DRA".into();
        } else if !pod.claims.is_empty() && item.shape.ends_with("×cpu") {
            // Its claims ask devices that are not NVIDIA GPUs.
            item.shape = "1×DRA devices".into();
        }
        steps.push(claim_step::report(pod, claims, scheduler.as_deref()));
    }
    if let Some(volumes) = super::fragmentation::PodVolumes::of(pod) {
        steps.push(volume_step::report(
            index,
            pod,
            &volumes,
            fit.volume_refusal.as_ref(),
            fit.volumes_unreadable.as_deref(),
        ));
    }
    memo.cross_check(&mut item, &fit, scheduler);
    if let Some(claims) = &claims {
        claim_step::cross_check(&mut item, claims);
    }
    if let Some(refusal) = &fit.volume_refusal {
        volume_step::cross_check(&mut item, pod, refusal);
    }
    steps.push(fit.report_for(Some(pod)));
    match &claims {
        // Devices through DRA: the device plugin has no part in it.
        Some(c) if c.gpus > 0 && pod.requests.gpu == 0 => steps.push(StepReport {
            step: Step::DevicePlugin,
            verdict: Verdict::NotApplicable,
            summary: "its GPUs come through DRA claims, not a device plugin".into(),
            details: Arc::default(),
            commands: Vec::new(),
            said_by: None,
        }),
        // Its extended resources too, where no node advertises them.
        Some(c)
            if !c.extended.is_empty()
                && !c.extended_advertised
                && (pod.requests.gpu == 0 || c.extended.iter().any(|(r, _)| r.as_str() == keys::RESOURCE_GPU)) =>
        {
            let served: Vec<String> =
                c.extended.iter().map(|(r, class)| format!("{r} (DeviceClass {class})")).collect();
            steps.push(StepReport {
                step: Step::DevicePlugin,
                verdict: Verdict::NotApplicable,
                summary: format!("no node advertises {}: DRA serves it, not a device plugin", served.join(", ")).into(),
                details: Arc::default(),
                commands: Vec::new(),
                said_by: None,
            })
        }
        _ => steps.push(fit.device_plugin.clone()),
    }
    finish(&mut item, steps, &fit);
    nomination::apply(index, pod, &mut item);
    honesty::defer_to_the_cluster(index, memo, &mut item, Some(pod), &fit);
    item
}

fn pod_demand(index: &Index<'_>, pod: &Pod) -> Demand {
    super::fragmentation::pod_demand(pod, 1, ShapeSource::Pod(pod.key()), &index.snap.namespaces)
}

fn gang_item<'a>(
    index: &Index<'a>,
    memo: &mut Memo<'a>,
    gang: &Gang,
    summary: &GangSummary,
    all: &[GangSummary],
) -> PendingItem {
    let kind = match gang.kind {
        GangKind::KueueWorkload => PendingKind::Workload,
        GangKind::VolcanoPodGroup => PendingKind::PodGroup,
    };
    let members = index.members(&summary.key);
    let waiting_member = members.iter().find(|p| p.is_pending()).copied();
    let demand = memo.gang_demands.get(&summary.key).cloned();
    let mut steps = vec![quota_step(index, gang)];
    steps.extend(quota::admission_check_step(gang));
    steps.push(gang_step(index, gang, summary, all));
    let shape = demand.as_ref().map(|d| memo.shape(index, d));
    let fit = match &shape {
        Some(s) => s.fit.clone(),
        None => memo.not_evaluated.get_or_insert_with(|| Arc::new(FitResult::not_evaluated())).clone(),
    };
    let scheduler = match &demand {
        Some(_) if steps.iter().all(|s| s.verdict != Verdict::Block) || summary.state == GangState::PartiallyPlaced => {
            waiting_member.and_then(|p| memo.scheduler_message(index.snap, p))
        }
        _ => None,
    };
    let (shape_words, gpus) = gang_shape_and_gpus(index, memo, gang, summary.required);
    let mut item = PendingItem {
        node_reasons: fit.node_reasons.clone(),
        hints: shape.as_ref().map(|s| hints_for(&s.hints, waiting_member)).unwrap_or_default(),
        ..PendingItem::new(
            kind,
            gang.namespace.clone(),
            &gang.name,
            crate::model::time::since(index.now, gang.created),
            gang.queue.clone(),
            shape_words,
            gpus,
            gang.priority,
        )
    };
    memo.cross_check(&mut item, &fit, scheduler);
    let mut fit_report = fit.report_for(waiting_member);
    if shape.is_none() && gang.pod_sets.iter().any(|set| !set.claims.is_empty()) {
        // Said plainly where the shape is known in words (`1×2 DRA`).
        fit_report.summary =
            "not evaluated: its pods ask GPUs through DRA claims, judged pod by pod (the claims step) once they exist"
                .into();
    }
    if fit.through_dra && fit_report.verdict == Verdict::Pass {
        // The fit left its DRA-served resources to claims: the
        // fragmentation map searched the claims the scheduler would make
        // for all its pods at once.
        match memo.gang_room.get(&summary.key) {
            Some(&(room, pods)) if room >= u64::from(pods) => {
                fit_report.summary =
                    format!("{}, the claims for its DRA-served GPUs included (room for {room})", fit_report.summary)
                        .into();
            }
            Some(&(room, pods)) => {
                fit_report.verdict = Verdict::Block;
                fit_report.summary = format!(
                    "room for {room} of the {pods} pod(s) at once: the devices a DeviceClass serves their GPUs from (where nodes do not advertise them) are too few free"
                )
                .into();
            }
            None => {
                fit_report.verdict = Verdict::Block;
                fit_report.summary = match item.scheduler_message.as_deref() {
                    Some(message) => {
                        fit_report.said_by = Some(VerdictSource::Scheduler);
                        format!("the scheduler says: {}", message.trim()).into()
                    }
                    None => {
                        fit_report.said_by = Some(VerdictSource::Undecided);
                        "kgpu cannot tell: its pods' GPUs come through DRA where nodes do not advertise them, and its shape is not known".into()
                    }
                };
            }
        }
    }
    let mut device_plugin = fit.device_plugin.clone();
    if shape.is_none() && gang.pod_sets.iter().all(|set| set.requests.gpu == 0 && !set.claims.is_empty()) {
        device_plugin.summary = "its GPUs come through DRA claims, not a device plugin".into();
    }
    steps.push(fit_report);
    steps.push(device_plugin);
    finish(&mut item, steps, &fit);
    honesty::defer_to_the_cluster(index, memo, &mut item, waiting_member, &fit);
    item
}

fn finish(item: &mut PendingItem, steps: Vec<StepReport>, fit: &FitResult) {
    let blocking = steps.iter().find(|s| s.verdict == Verdict::Block);
    // A step passed on kgpu's reading of what it does not model.
    let unsure = steps.iter().find(|s| s.verdict == Verdict::Pass && s.said_by == Some(VerdictSource::Undecided));
    item.blocking = blocking.map(|s| s.step);
    item.verdict_source =
        blocking.and_then(|s| s.said_by).or(unsure.and(Some(VerdictSource::Undecided))).unwrap_or_default();
    item.summary = match (blocking, unsure) {
        (Some(s), _) => format!("{}: {}", s.step.title(), s.summary),
        (None, Some(s)) => format!(
            "nothing blocks it as kgpu reads it, but its {} step rests on what kgpu does not model: the scheduler's next attempt decides",
            s.step.title()
        ),
        (None, None) => "nothing blocks it: the scheduler should place it on its next attempt".into(),
    };
    item.unblock = steps
        .iter()
        .filter(|s| s.verdict == Verdict::Block)
        .take(1)
        .flat_map(|s| match s.step {
            Step::Fit | Step::DevicePlugin => fit.unblock.clone(),
            _ => s
                .details
                .iter()
                .filter(|d| d.starts_with("unblock: "))
                .map(|d| d["unblock: ".len()..].to_string())
                .collect(),
        })
        .collect();
    item.lossless_fixes =
        if matches!(item.blocking, Some(Step::Fit | Step::DevicePlugin)) { fit.lossless_fixes } else { 0 };
    item.steps = steps;
}

/// The chain for one item by `namespace/name` (pod, workload or podgroup).
pub fn find<'a>(items: &'a [PendingItem], namespace: &str, name: &str) -> Option<&'a PendingItem> {
    items.iter().find(|i| i.namespace.as_str() == namespace && i.name == name)
}

/// For a gang key, the pending item, if any.
pub fn for_gang<'a>(items: &'a [PendingItem], key: &GangKey) -> Option<&'a PendingItem> {
    items.iter().find(|i| i.namespace == key.namespace && i.name == *key.name && i.kind != PendingKind::Pod)
}
