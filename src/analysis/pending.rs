//! Why is it Pending? For each pending pod, Kueue Workload or Volcano
//! PodGroup, the isolation chain: queue/quota → gang → per-node fit →
//! device plugin, each step with its evidence and the kubectl command that
//! proves it by hand, then what would unblock it.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::model::{
    ClusterEvent, Gang, GangKey, GangKind, Node, Pod, QueueKind, Resources, Snapshot, Sym, Timestamp, keys,
};

use super::fit::{self, NodeReason};
use super::fragmentation::{self, Demand, DemandKey, Fragmentation, PlanStatus, ShapeSource};
use super::gangs::{GangState, GangSummary};
use super::index::Index;
use super::queue_msg;
use super::queues;
use super::scheduler_msg;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Step {
    Quota,
    Gang,
    Fit,
    DevicePlugin,
}

impl Step {
    pub fn as_str(self) -> &'static str {
        match self {
            Step::Quota => "quota",
            Step::Gang => "gang",
            Step::Fit => "fit",
            Step::DevicePlugin => "device-plugin",
        }
    }
    pub fn title(self) -> &'static str {
        match self {
            Step::Quota => "queue / quota",
            Step::Gang => "gang",
            Step::Fit => "per-node fit",
            Step::DevicePlugin => "device plugin",
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
}

impl PendingItem {
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
    fleet: Option<FleetFacts>,
    /// The quota and gang steps of a pod outside queues and gangs.
    lone_pod_steps: Option<(StepReport, StepReport)>,
    /// The fit of gangs whose member shape is unknown.
    not_evaluated: Option<Arc<FitResult>>,
    /// Cross-checks by (fit, scheduler message): pods of one shape share
    /// the scheduler's message as often as not. Keyed by the fit's address,
    /// so every fit is kept alive (in `shapes`, `not_evaluated`) meanwhile.
    checks: HashMap<(*const FitResult, String), CrossCheck>,
    /// The newest FailedScheduling event of each pod, by (namespace, name).
    failed_scheduling: Option<HashMap<(Sym, &'a str), &'a ClusterEvent>>,
}

impl<'a> Memo<'a> {
    fn shape(&mut self, index: &Index<'a>, demand: &Demand) -> ShapeFindings {
        let fleet = self.fleet.get_or_insert_with(|| FleetFacts::of(index));
        self.shapes
            .entry(demand.key())
            .or_insert_with(|| ShapeFindings {
                fit: Arc::new(fit_step(index, demand)),
                hints: shape_hints(fleet, demand).into(),
            })
            .clone()
    }

    /// The scheduler's last word on a pod: its PodScheduled message, or the
    /// newest FailedScheduling event about it.
    fn scheduler_message(&mut self, snap: &'a Snapshot, pod: &Pod) -> Option<String> {
        if let Some(u) = &pod.unschedulable
            && !u.message.is_empty()
        {
            return Some(u.message.to_string());
        }
        let events = self.failed_scheduling.get_or_insert_with(|| {
            let mut newest: HashMap<(Sym, &str), &ClusterEvent> = HashMap::new();
            for e in snap.events.values() {
                if e.is_failed_scheduling() && e.object_kind.as_str() == "Pod" {
                    let slot = newest.entry((e.namespace, &*e.object_name)).or_insert(e);
                    // The last of equals wins, as a max over the events would.
                    if e.last >= slot.last {
                        *slot = e;
                    }
                }
            }
            newest
        });
        events.get(&(pod.namespace, &*pod.name)).map(|e| e.message.to_string())
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
    if let Some(p) = pod
        && p.requests.wants_gpu()
        && let Some(s) = p.scheduler.filter(|s| s.as_str() != "default-scheduler")
    {
        out.push(format!("scheduler: this pod is scheduled by '{s}', not default-scheduler"));
    }
    out
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
    index
        .pending_pods
        .iter()
        .filter(|pod| !index.gang_of(&pod.key()).is_some_and(|g| gang_keys.contains(g)))
        .map(|pod| pod_item(index, &mut memo, pod))
        .collect()
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
        }
    }
    let mut items: Vec<PendingItem> =
        waiting_gangs(index, gangs).map(|(summary, gang)| gang_item(index, &mut memo, gang, summary, gangs)).collect();
    items.extend(pod_items);
    // The defragmentation plan is the smallest change for the gang it targets.
    if plan.status == PlanStatus::Found
        && let Some(target) = &plan.target
        && let Some(item) =
            items.iter_mut().find(|i| target.ends_with(&i.display_name()) && i.blocking == Some(Step::Fit))
    {
        item.unblock.insert(
            0,
            format!(
                "run the defragmentation plan (Fleet pane, x): {} move(s), {:.1} GPU-hours disrupted, frees {}",
                plan.steps.len(),
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
    });
    items
}

fn ns_flag(ns: Sym) -> String {
    format!("-n {ns}")
}

fn shape_text(requests: &Resources, pods: u32) -> String {
    if requests.gpu > 0 {
        format!("{pods}×{}", requests.gpu)
    } else if let Some((profile, n)) = requests.mig().next() {
        if n > 1 { format!("{pods}×{n}·{profile}") } else { format!("{pods}×{profile}") }
    } else {
        format!("{pods}×cpu")
    }
}

fn pod_item<'a>(index: &Index<'a>, memo: &mut Memo<'a>, pod: &Pod) -> PendingItem {
    let (no_queue, no_gang) = memo.lone_pod_steps.get_or_insert_with(|| {
        let not_applicable = |step, summary: &str| StepReport {
            step,
            verdict: Verdict::NotApplicable,
            summary: summary.into(),
            details: Arc::default(),
            commands: Vec::new(),
        };
        (
            not_applicable(Step::Quota, "not queued by Kueue or Volcano"),
            not_applicable(Step::Gang, "not part of a gang"),
        )
    });
    let mut steps = Vec::with_capacity(4);
    steps.extend([no_queue.clone(), no_gang.clone()]);
    let shape = memo.shape(index, &pod_demand(pod));
    let fit = shape.fit;
    let scheduler = memo.scheduler_message(index.snap, pod);
    let mut item = PendingItem {
        kind: PendingKind::Pod,
        namespace: pod.namespace,
        name: pod.name.to_string(),
        age: index.now - pod.created,
        queue: pod.queue,
        shape: shape_text(&pod.requests, 1),
        gpus: pod.requests.gpu,
        priority: pod.priority,
        blocking: None,
        summary: String::new(),
        steps: Vec::new(),
        node_reasons: fit.node_reasons.clone(),
        scheduler_message: None,
        scheduler_recognised: None,
        scheduler_reasons: Arc::default(),
        agrees_with_scheduler: None,
        disagreement: None,
        hints: hints_for(&shape.hints, Some(pod)),
        unblock: Vec::new(),
    };
    if pod.gated {
        steps[0] = StepReport {
            step: Step::Quota,
            verdict: Verdict::Block,
            summary: "held by a scheduling gate (spec.schedulingGates): not yet released to the scheduler".into(),
            details: Arc::default(),
            commands: vec![format!(
                "kubectl get pod {} {} -o jsonpath='{{.spec.schedulingGates}}'",
                ns_flag(pod.namespace),
                pod.name
            )],
        };
    }
    memo.cross_check(&mut item, &fit, scheduler);
    steps.push(fit.report_for(Some(pod)));
    steps.push(fit.device_plugin.clone());
    finish(&mut item, steps, &fit);
    item
}

fn pod_demand(pod: &Pod) -> Demand {
    Demand {
        gpus_per_pod: pod.requests.gpu,
        mig_profile: pod.requests.mig().next().map(|(p, _)| Sym::new(p)),
        pods: 1,
        requests: pod.requests.clone(),
        tolerations: pod.tolerations.clone(),
        node_selector: pod.node_selector.clone(),
        affinity: pod.affinity.clone(),
        source: ShapeSource::Pod(pod.key()),
        priority: pod.priority,
        created: pod.created,
    }
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
    let per_pod = gang
        .pod_sets
        .iter()
        .max_by_key(|ps| ps.requests.gpu + ps.requests.mig_total())
        .map(|ps| ps.requests.clone())
        .unwrap_or_default();
    let mut steps = vec![quota_step(index, gang), gang_step(index, gang, summary, all)];
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
    let mut item = PendingItem {
        kind,
        namespace: gang.namespace,
        name: gang.name.to_string(),
        age: index.now - gang.created,
        queue: gang.queue,
        shape: shape_text(&per_pod, summary.required.max(gang.total_pods())),
        gpus: gang.total_requests().gpu,
        priority: gang.priority,
        blocking: None,
        summary: String::new(),
        steps: Vec::new(),
        node_reasons: fit.node_reasons.clone(),
        scheduler_message: None,
        scheduler_recognised: None,
        scheduler_reasons: Arc::default(),
        agrees_with_scheduler: None,
        disagreement: None,
        hints: shape.as_ref().map(|s| hints_for(&s.hints, waiting_member)).unwrap_or_default(),
        unblock: Vec::new(),
    };
    memo.cross_check(&mut item, &fit, scheduler);
    steps.push(fit.report_for(waiting_member));
    steps.push(fit.device_plugin.clone());
    finish(&mut item, steps, &fit);
    item
}

fn finish(item: &mut PendingItem, steps: Vec<StepReport>, fit: &FitResult) {
    let blocking = steps.iter().find(|s| s.verdict == Verdict::Block);
    item.blocking = blocking.map(|s| s.step);
    item.summary = match blocking {
        Some(s) => format!("{}: {}", s.step.title(), s.summary),
        None => "nothing blocks it: the scheduler should place it on its next attempt".into(),
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
    item.steps = steps;
}

fn quota_step(index: &Index<'_>, gang: &Gang) -> StepReport {
    match gang.kind {
        GangKind::KueueWorkload => kueue_quota_step(index, gang),
        GangKind::VolcanoPodGroup => volcano_queue_step(index, gang),
    }
}

fn kueue_quota_step(index: &Index<'_>, gang: &Gang) -> StepReport {
    let snap = index.snap;
    let ns = ns_flag(gang.namespace);
    let mut commands = vec![format!(
        "kubectl get workload {ns} {} -o jsonpath='{{range .status.conditions[*]}}{{.type}}={{.status}} {{.reason}}: {{.message}}{{\"\\n\"}}{{end}}'",
        gang.name
    )];
    let mut details = Vec::new();
    if !gang.active {
        return StepReport {
            step: Step::Quota,
            verdict: Verdict::Block,
            summary: "deactivated (spec.active=false): Kueue will not admit it".into(),
            details: vec![format!("unblock: set spec.active=true (kubectl kueue resume workload {} {ns})", gang.name)]
                .into(),
            commands,
        };
    }
    let local = gang.queue;
    let cq = local.and_then(|lq| queues::cluster_queue_of(snap, gang.namespace, lq));
    if let Some(lq) = local {
        commands.push(format!("kubectl get localqueue {ns} {lq} -o wide"));
    }
    if let Some(cq) = cq {
        commands.push(format!("kubectl get clusterqueue {} -o yaml", cq.name));
    }
    let reserved = gang.condition("QuotaReserved");
    if let Some(c) = gang.condition("Evicted").filter(|c| c.status) {
        details.push(format!("Evicted ({}): {}", c.reason, c.message));
    }
    if let Some(r) = &gang.requeue {
        details.push(format!(
            "requeued {} time(s){}",
            r.count,
            r.requeue_at.map_or(String::new(), |t| format!(", next attempt in {}", super::age((t - index.now).max(0))))
        ));
    }
    if gang.has_quota() {
        let checks_pending = reserved.is_some_and(|c| c.status) && !gang.condition_true("Admitted");
        let cq_name = gang.admission.as_ref().map(|a| a.cluster_queue.to_string()).unwrap_or_else(|| "?".into());
        return StepReport {
            step: Step::Quota,
            verdict: if checks_pending { Verdict::Warn } else { Verdict::Pass },
            summary: if checks_pending {
                format!("quota reserved in ClusterQueue {cq_name}; admission checks not Ready yet").into()
            } else {
                format!("admitted by ClusterQueue {cq_name}").into()
            },
            details: details.into(),
            commands,
        };
    }
    // Not admitted: explain with Kueue's own words and the quota numbers.
    if let Some(c) = reserved.filter(|c| !c.status) {
        details.push(format!("QuotaReserved=False ({}): {}", c.reason, c.message));
        if let Some(said) = queue_msg::parse_quota(&c.message) {
            details.push(format!("Kueue: {}", said.describe()));
        }
    }
    let Some(local) = local else {
        details.push("unblock: set the kueue.x-k8s.io/queue-name label to a LocalQueue".into());
        return StepReport {
            step: Step::Quota,
            verdict: Verdict::Block,
            summary: "no queue name: Kueue does not know where to admit it".into(),
            details: details.into(),
            commands,
        };
    };
    let Some(cq) = cq else {
        let lq_exists = snap
            .queues
            .values()
            .any(|q| q.kind == QueueKind::LocalQueue && q.namespace == Some(gang.namespace) && q.name == local);
        let summary = if lq_exists {
            format!("LocalQueue {local} points at a ClusterQueue that does not exist")
        } else {
            format!("LocalQueue {local} doesn't exist in namespace {}", gang.namespace)
        };
        details.push(format!("unblock: create LocalQueue {local} in {} (or fix the queue-name label)", gang.namespace));
        return StepReport {
            step: Step::Quota,
            verdict: Verdict::Block,
            summary: summary.into(),
            details: details.into(),
            commands,
        };
    };
    if !cq.is_active() {
        let why = cq
            .conditions
            .iter()
            .find(|c| c.kind.as_str() == "Active")
            .map(|c| format!(" ({}: {})", c.reason, c.message))
            .unwrap_or_default();
        return StepReport {
            step: Step::Quota,
            verdict: Verdict::Block,
            summary: format!("ClusterQueue {} is inactive{why}", cq.name).into(),
            details: details.into(),
            commands,
        };
    }
    let need = gang.total_requests();
    let mut shortest: Option<(u64, String)> = None;
    for (resource, amount) in need.iter() {
        if resource == "pods" {
            continue;
        }
        let quotas: Vec<_> = cq.quotas.iter().filter(|q| q.resource.as_str() == resource).collect();
        if quotas.is_empty() {
            if keys::is_gpu_resource(resource) {
                details.push(format!("resource {resource} unavailable in ClusterQueue {}", cq.name));
            }
            continue;
        }
        for q in quotas {
            let flavor = q.flavor.map_or("-".to_string(), |f| f.to_string());
            let cap = queues::capacity(snap, cq, q);
            let lendable = queues::cohort_lendable(snap, cq, q.flavor, q.resource);
            let limit = q.borrowing_limit.map_or("none".into(), |l| crate::model::quantity::format(resource, l));
            let fmt = |v: u64| crate::model::quantity::format(resource, v);
            let line = format!(
                "needs {} {resource} in flavor {flavor}: nominal {}, used {}, borrowing limit {limit}{}",
                fmt(amount),
                fmt(q.nominal),
                fmt(q.used),
                cq.cohort.map_or(String::new(), |c| format!(", cohort {c} can lend {}", fmt(lendable)))
            );
            let blocks = q.used + amount > cap;
            if blocks || keys::is_gpu_resource(resource) {
                details.push(line);
            }
            if blocks {
                let short = q.used + amount - cap;
                if shortest.as_ref().is_none_or(|(s, _)| short < *s) {
                    shortest = Some((
                        short,
                        format!(
                            "unblock: {} more {resource} in flavor {flavor} of ClusterQueue {} (raise nominalQuota, lend from the cohort, or finish other work)",
                            fmt(short),
                            cq.name
                        ),
                    ));
                }
            }
        }
    }
    if let Some((_, unblock)) = shortest {
        details.push(unblock);
    }
    StepReport {
        step: Step::Quota,
        verdict: Verdict::Block,
        summary: format!("waiting for quota in ClusterQueue {}", cq.name).into(),
        details: details.into(),
        commands,
    }
}

fn volcano_queue_step(index: &Index<'_>, gang: &Gang) -> StepReport {
    let ns = ns_flag(gang.namespace);
    let mut commands = vec![format!("kubectl describe podgroup {ns} {}", gang.name)];
    let phase = gang.phase.map_or("Pending", |p| p.as_str());
    let mut details: Vec<String> = gang
        .conditions
        .iter()
        .flat_map(|c| {
            let raw = format!("{}={} ({}): {}", c.kind, if c.status { "True" } else { "False" }, c.reason, c.message);
            let read = queue_msg::parse_gang(&c.message).map(|g| {
                let pending: Vec<String> = g.pending_reasons.iter().map(|(r, n)| format!("{n} {r}")).collect();
                format!(
                    "Volcano: {} of {} task(s) waiting ({}){}{}",
                    g.waiting,
                    g.tasks,
                    g.why,
                    g.min_available.map_or(String::new(), |m| format!(", minAvailable {m}")),
                    if pending.is_empty() { String::new() } else { format!("; pending: {}", pending.join(", ")) }
                )
            });
            std::iter::once(raw).chain(read)
        })
        .collect();
    let queue =
        gang.queue.and_then(|q| index.snap.queues.values().find(|x| x.kind == QueueKind::VolcanoQueue && x.name == q));
    if let Some(q) = queue {
        commands.push(format!("kubectl get queue {} -o yaml", q.name));
        for quota in q.quotas.iter() {
            details.push(format!(
                "queue {} {}: capability {}, allocated {}",
                q.name,
                quota.resource,
                crate::model::quantity::format(quota.resource.as_str(), quota.nominal),
                crate::model::quantity::format(quota.resource.as_str(), quota.used)
            ));
        }
        if !q.is_active() {
            return StepReport {
                step: Step::Quota,
                verdict: Verdict::Block,
                summary: format!("Volcano queue {} is {}", q.name, q.state.map_or("not open", |s| s.as_str())).into(),
                details: details.into(),
                commands,
            };
        }
    }
    if gang.has_quota() {
        return StepReport {
            step: Step::Quota,
            verdict: Verdict::Pass,
            summary: format!("PodGroup is {phase}: enqueued").into(),
            details: details.into(),
            commands,
        };
    }
    StepReport {
        step: Step::Quota,
        verdict: Verdict::Block,
        summary: format!("PodGroup is {phase}: not enqueued (queue capacity or gang minimum)").into(),
        details: details.into(),
        commands,
    }
}

fn gang_step(index: &Index<'_>, gang: &Gang, summary: &GangSummary, all: &[GangSummary]) -> StepReport {
    let ns = ns_flag(gang.namespace);
    let selector = match (gang.kind, &gang.owner) {
        (_, Some(o)) if o.kind.as_str() == "Job" => format!("-l batch.kubernetes.io/job-name={}", o.name),
        (GangKind::VolcanoPodGroup, _) => format!("-l volcano.sh/job-name={}", gang.name),
        _ => format!("-l {}={}", keys::KUEUE_POD_GROUP_NAME, gang.name),
    };
    let commands = vec![format!("kubectl get pods {ns} {selector} -o wide")];
    let mut details = vec![format!(
        "{} of {} member(s) placed, {} running{}",
        summary.placed,
        summary.required,
        summary.running,
        if summary.gpus_per_pod > 0 { format!(", {} GPU(s) per member", summary.gpus_per_pod) } else { String::new() }
    )];
    if !summary.nodes.is_empty() {
        details.push(format!(
            "placed on: {}",
            summary.nodes.iter().map(|(n, g)| format!("{n} ({g} GPU)")).collect::<Vec<_>>().join(", ")
        ));
    }
    let _ = index;
    match summary.state {
        GangState::PartiallyPlaced => {
            // Partial placement is a symptom: the missing members' own step
            // says why. Only a deadlock blocks at this step.
            let mut s = StepReport {
                step: Step::Gang,
                verdict: Verdict::Warn,
                summary: format!(
                    "partially placed: {}/{} members, holding {} GPU(s) idle",
                    summary.placed, summary.required, summary.gpus_held_idle
                )
                .into(),
                details: Arc::default(),
                commands,
            };
            if !summary.deadlocked_with.is_empty() {
                let others: Vec<String> = summary
                    .deadlocked_with
                    .iter()
                    .map(|o| {
                        let held = all.iter().find(|g| o.ends_with(&g.display_name())).map_or(0, |g| g.gpus_held_idle);
                        format!("{o} (holding {held} GPU(s))")
                    })
                    .collect();
                s.verdict = Verdict::Block;
                s.summary = format!(
                    "deadlock: holds {} GPU(s) with {}/{} members placed; can only complete if {} lets go",
                    summary.gpus_held_idle,
                    summary.placed,
                    summary.required,
                    others.join(", ")
                )
                .into();
                details.push(format!("deadlocked with {}", others.join(", ")));
                details.push(
                    "unblock: requeue one of the deadlocked gangs (R) so the other can complete; gang scheduling (Kueue waitForPodsReady or Volcano) prevents this".into(),
                );
            }
            s.details = details.into();
            s
        }
        GangState::Queued | GangState::Inactive => StepReport {
            step: Step::Gang,
            verdict: Verdict::NotApplicable,
            summary: "no members created yet (waiting for admission)".into(),
            details: details.into(),
            commands,
        },
        _ => StepReport {
            step: Step::Gang,
            verdict: Verdict::Pass,
            summary: format!("{}/{} members placed", summary.placed, summary.required).into(),
            details: details.into(),
            commands,
        },
    }
}

/// The fit step's findings, shared by pods and gangs.
#[derive(Clone, Debug)]
struct FitResult {
    report: StepReport,
    device_plugin: StepReport,
    node_reasons: Arc<BTreeMap<String, u32>>,
    /// What the real scheduler would print, in kgpu's codes (comparison classes).
    scheduler_view: BTreeMap<String, u32>,
    total_nodes: u32,
    unblock: Vec<String>,
}

impl FitResult {
    /// The fit report, its first command naming the pod where there is one.
    fn report_for(&self, pod: Option<&Pod>) -> StepReport {
        let mut report = self.report.clone();
        if let Some(p) = pod
            && let Some(first) = report.commands.first_mut()
        {
            *first = format!("kubectl describe pod {} {}", ns_flag(p.namespace), p.name);
        }
        report
    }

    fn not_evaluated() -> FitResult {
        let na = |step| StepReport {
            step,
            verdict: Verdict::NotApplicable,
            summary: "not evaluated: no member shape known".into(),
            details: Arc::default(),
            commands: Vec::new(),
        };
        FitResult {
            report: na(Step::Fit),
            device_plugin: na(Step::DevicePlugin),
            node_reasons: Arc::default(),
            scheduler_view: BTreeMap::new(),
            total_nodes: 0,
            unblock: Vec::new(),
        }
    }
}

fn fit_step(index: &Index<'_>, demand: &Demand) -> FitResult {
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
    let mut slots_total = 0u64;
    let mut silent: Vec<(&Node, u32)> = Vec::new();
    let mut closest: Option<(u64, &Node)> = None;
    let total_nodes = index.snap.nodes.len() as u32;
    // Nodes counted per (placement class, resource shortfalls): a fleet of
    // thousands of nodes has a few dozen such combinations.
    let classes = placement.classes();
    let mut per_class: Vec<Vec<(Vec<NodeReason>, u32)>> = vec![Vec::new(); classes.len()];
    let mut shortfalls = Vec::new();
    for ((node, used), &class) in index.nodes_with_usage().zip(placement.class_of()) {
        fit::resource_shortfalls_into(&demand.requests, node, used, &mut shortfalls);
        let combos = &mut per_class[class as usize];
        match combos.iter_mut().find(|(s, _)| *s == shortfalls) {
            Some((_, n)) => *n += 1,
            None => combos.push((shortfalls.clone(), 1)),
        }
        if !classes[class as usize].is_empty() {
            continue;
        }
        slots_total += fragmentation::room(demand, node, used);
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
            let silent_here = silent_gpus(index, node);
            // Would the GPUs it hides be enough for one pod?
            if silent_here > 0 && free + silent_here as u64 >= demand.gpus_per_pod {
                silent.push((node, silent_here));
            }
        }
        // Closest node: short only of GPUs.
        if demand.gpus_per_pod > 0
            && shortfalls.iter().all(|r| matches!(r, NodeReason::InsufficientGpu))
            && closest.is_none_or(|(f, _)| free > f)
        {
            closest = Some((free, node));
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
    let commands = vec![
        "kubectl get events -A --field-selector reason=FailedScheduling".into(),
        "kubectl get nodes -o custom-columns='NAME:.metadata.name,GPU:.status.allocatable.nvidia\\.com/gpu,UNSCHEDULABLE:.spec.unschedulable,TAINTS:.spec.taints[*].key'".into(),
    ];
    let histogram =
        |m: &BTreeMap<String, u32>| m.iter().map(|(k, v)| format!("{v} {k}")).collect::<Vec<_>>().join(", ");
    let mut unblock = Vec::new();
    let report = if slots_total >= need && fitting_nodes > 0 {
        StepReport {
            step: Step::Fit,
            verdict: Verdict::Pass,
            summary: if need > 1 {
                format!("room for {slots_total} of the {need} pod(s) needed, on {fitting_nodes} node(s)").into()
            } else {
                format!("fits on {fitting_nodes} of {total_nodes} node(s) now").into()
            },
            details: Arc::default(),
            commands,
        }
    } else {
        let summary = if need > 1 {
            format!("room for {slots_total} of the {need} pod(s) of shape {} it needs", shape_text(&demand.requests, 1))
        } else {
            format!("0/{total_nodes} nodes can take it: {}", histogram(&node_reasons))
        };
        if let Some((free, node)) = closest {
            let short = demand.gpus_per_pod.saturating_sub(free);
            unblock
                .push(format!("free {short} more GPU(s) on {} ({} free of {})", node.name, free, node.allocatable.gpu));
        }
        let mut details: Vec<String> = node_reasons.iter().map(|(k, v)| format!("{v} node(s): {k}")).collect();
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
        }
    };
    let device_plugin = if silent.is_empty() {
        let some_silent = index.nodes().any(|n| silent_gpus(index, n) > 0);
        StepReport {
            step: Step::DevicePlugin,
            verdict: if some_silent { Verdict::Warn } else { Verdict::Pass },
            summary: if some_silent {
                "some nodes have GPUs their device plugin does not advertise (not where this could run)".into()
            } else {
                "every node advertises the GPUs it has".into()
            },
            details: Arc::default(),
            commands: Vec::new(),
        }
    } else {
        let names: Vec<String> =
            silent.iter().map(|(n, missing)| format!("{} ({missing} unadvertised)", n.name)).collect();
        let first = silent[0].0.name;
        unblock.insert(0, format!("restart the device plugin on {first} (it has GPUs but advertises too few)"));
        StepReport {
            step: Step::DevicePlugin,
            verdict: Verdict::Block,
            summary: format!(
                "{} node(s) would take it but their device plugin advertises fewer GPUs than the hardware has",
                silent.len()
            )
            .into(),
            details: names.into(),
            commands: vec![
                format!(
                    "kubectl get node {first} -o jsonpath='{{.metadata.labels.nvidia\\.com/gpu\\.count}} in hardware, {{.status.allocatable.nvidia\\.com/gpu}} allocatable{{\"\\n\"}}'"
                ),
                format!("kubectl get pods -A -o wide --field-selector spec.nodeName={first} | grep -i device-plugin"),
            ],
        }
    };
    // Isolation order: a device-plugin block explains the fit block; report it there.
    let mut report = report;
    if device_plugin.verdict == Verdict::Block && report.verdict == Verdict::Block {
        report.verdict = Verdict::Warn;
        report.summary = format!("{} (see device plugin)", report.summary).into();
    }
    FitResult { report, device_plugin, node_reasons: Arc::new(node_reasons), scheduler_view, total_nodes, unblock }
}

/// GPUs the node has in hardware but does not advertise, not counting
/// GPUs its agent reports unhealthy (those drop out for a reason).
fn silent_gpus(index: &Index<'_>, node: &Node) -> u32 {
    let hidden = node.hardware_gpus().unwrap_or(0).saturating_sub(node.allocatable.gpu as u32);
    if hidden == 0 || node.allocatable.mig_total() > 0 {
        return 0;
    }
    let unhealthy = index.snap.devices.get(&node.name).map_or(0, |d| {
        d.gpus.iter().filter(|g| matches!(g.health, crate::model::GpuHealth::Unhealthy(_))).count() as u32
    });
    hidden.saturating_sub(unhealthy)
}

/// What the shape hints read of the whole fleet, gathered once.
struct FleetFacts {
    /// MIG profiles some node advertises (a non-zero amount).
    advertised_mig: std::collections::BTreeSet<&'static str>,
    /// MIG profiles any node lists, zero or not.
    offered_mig: std::collections::BTreeSet<&'static str>,
    any_gpu_node: bool,
    /// Taints every GPU node has (but PreferNoSchedule ones).
    common_gpu_taints: Vec<crate::model::Taint>,
}

impl FleetFacts {
    fn of(index: &Index<'_>) -> FleetFacts {
        let mut advertised_mig = std::collections::BTreeSet::new();
        let mut offered_mig = std::collections::BTreeSet::new();
        for n in index.nodes() {
            for (profile, amount) in n.allocatable.mig() {
                offered_mig.insert(profile);
                if amount > 0 {
                    advertised_mig.insert(profile);
                }
            }
        }
        let gpu_nodes: Vec<&Node> = index.nodes().filter(|n| n.is_gpu_node()).collect();
        let common_gpu_taints = gpu_nodes.first().map_or_else(Vec::new, |first| {
            first
                .taints
                .iter()
                .filter(|t| t.effect != crate::model::TaintEffect::PreferNoSchedule)
                .filter(|t| gpu_nodes.iter().all(|n| n.taints.contains(t)))
                .cloned()
                .collect()
        });
        FleetFacts { advertised_mig, offered_mig, any_gpu_node: !gpu_nodes.is_empty(), common_gpu_taints }
    }
}

/// Hints that follow from the shape alone (not the particular pod).
fn shape_hints(fleet: &FleetFacts, demand: &Demand) -> Vec<String> {
    let mut out = Vec::new();
    let selector_gpu = demand.node_selector.iter().find(|(k, _)| k.as_str() == keys::RESOURCE_GPU).map(|(_, v)| *v);
    if let Some(v) = selector_gpu {
        out.push(format!(
            "gpu-count-in-node-selector: nodeSelector `{}: \"{v}\"` does not request GPUs — no node carries that label, so it matches nothing; request them with resources.limits `{}: {v}` and drop the selector",
            keys::RESOURCE_GPU,
            keys::RESOURCE_GPU
        ));
    }
    if let Some(profile) = demand.mig_profile
        && !fleet.advertised_mig.contains(profile.as_str())
    {
        let resource = format!("{}{profile}", keys::RESOURCE_MIG_PREFIX);
        out.push(format!(
            "mig-profile-not-offered: no node advertises {resource}{}; repartition a node (m) with a mig.config that includes {profile}",
            if fleet.offered_mig.is_empty() {
                String::new()
            } else {
                format!(" (offered: {})", fleet.offered_mig.iter().copied().collect::<Vec<_>>().join(", "))
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

/// kgpu's verdicts against the scheduler's message.
struct CrossCheck {
    recognised: bool,
    /// The scheduler's histogram (node reason code, or its raw text).
    reasons: Arc<BTreeMap<String, u32>>,
    agrees: Option<bool>,
    disagreement: Option<String>,
}

impl CrossCheck {
    fn apply(&self, item: &mut PendingItem) {
        item.scheduler_recognised = Some(self.recognised);
        item.scheduler_reasons = self.reasons.clone();
        item.agrees_with_scheduler = self.agrees;
        item.disagreement = self.disagreement.clone();
    }
}

fn cross_check(fit: &FitResult, message: &str) -> CrossCheck {
    let parsed = scheduler_msg::parse(message);
    let mut check =
        CrossCheck { recognised: parsed.recognised, reasons: Arc::default(), agrees: None, disagreement: None };
    if !parsed.recognised {
        return check;
    }
    let mut reasons = BTreeMap::new();
    for (reason, count) in &parsed.reasons {
        let key = scheduler_msg::reason_code(reason).unwrap_or_else(|| reason.clone());
        *reasons.entry(key).or_default() += count;
    }
    check.reasons = Arc::new(reasons);
    if fit.total_nodes == 0 {
        return check;
    }
    // Like with like: the scheduler's histogram and kgpu's (one entry per
    // node per class, each node counted under its first failing filter), in
    // the classes both can name, with their counts.
    let mut theirs: BTreeMap<String, u32> = BTreeMap::new();
    for (reason, count) in &parsed.reasons {
        *theirs.entry(scheduler_msg::comparison_class(reason)).or_default() += count;
    }
    let fmt = |m: &BTreeMap<String, u32>| {
        if m.is_empty() {
            "fits somewhere".to_string()
        } else {
            m.iter().map(|(k, v)| format!("{v} {k}")).collect::<Vec<_>>().join(", ")
        }
    };
    if parsed.total_nodes.is_some_and(|n| n != fit.total_nodes) {
        // Nodes came or went since its last attempt: nothing to compare.
        check.disagreement = Some(format!(
            "not compared: the scheduler's last attempt saw {} node(s), kgpu sees {} now",
            parsed.total_nodes.unwrap_or(0),
            fit.total_nodes
        ));
        return check;
    }
    let agrees = theirs == fit.scheduler_view;
    check.agrees = Some(agrees);
    if !agrees {
        check.disagreement = Some(format!(
            "scheduler (last attempt): {}; kgpu (now): {} — the cluster changed since, or the scheduler sees something kgpu does not (another scheduler, volumes, pod affinity)",
            fmt(&theirs),
            fmt(&fit.scheduler_view)
        ));
    }
    check
}

/// The chain for one item by `namespace/name` (pod, workload or podgroup).
pub fn find<'a>(items: &'a [PendingItem], namespace: &str, name: &str) -> Option<&'a PendingItem> {
    items.iter().find(|i| i.namespace.as_str() == namespace && i.name == name)
}

/// For a gang key, the pending item, if any.
pub fn for_gang<'a>(items: &'a [PendingItem], key: &GangKey) -> Option<&'a PendingItem> {
    items.iter().find(|i| i.namespace == key.namespace && i.name == *key.name && i.kind != PendingKind::Pod)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::testing::{node, pod, snapshot};
    use crate::analysis::{fragmentation, gangs};
    use crate::model::TaintEffect;

    const NOW: Timestamp = 10_000;

    fn items(nodes: Vec<Node>, pods: Vec<Pod>) -> Vec<PendingItem> {
        let snap = snapshot(nodes, pods, vec![], NOW);
        let index = Index::build(&snap, NOW);
        let gang_rows = gangs::analyze(&index);
        let frag = fragmentation::analyze(&index);
        analyze(&index, &gang_rows, &frag)
    }

    fn item<'a>(items: &'a [PendingItem], name: &str) -> &'a PendingItem {
        items.iter().find(|i| i.name == name).expect(name)
    }

    fn step(item: &PendingItem, step: Step) -> &StepReport {
        item.steps.iter().find(|s| s.step == step).expect("step")
    }

    #[test]
    fn pods_of_one_shape_share_the_verdict_but_name_themselves() {
        let nodes = vec![node("n1").gpus(8).build()];
        let pods =
            vec![pod("busy").gpus(6).on("n1").running().build(), pod("a").gpus(4).build(), pod("b").gpus(4).build()];
        let items = items(nodes, pods);
        let (a, b) = (item(&items, "a"), item(&items, "b"));
        for it in [a, b] {
            assert_eq!(it.blocking, Some(Step::Fit));
            assert_eq!(&*step(it, Step::Fit).summary, "0/1 nodes can take it: 1 insufficient-gpu");
            // 8 − 6 = 2 free; 4 needed → free 2 more.
            assert_eq!(it.unblock.first().map(String::as_str), Some("free 2 more GPU(s) on n1 (2 free of 8)"));
        }
        assert_eq!(step(a, Step::Fit).commands[0], "kubectl describe pod -n default a");
        assert_eq!(step(b, Step::Fit).commands[0], "kubectl describe pod -n default b");
    }

    #[test]
    fn the_scheduler_is_cross_checked_and_the_missing_toleration_named() {
        let nodes = vec![node("n1").gpus(8).taint("nvidia.com/gpu", "present", TaintEffect::NoSchedule).build()];
        let v1_36 = "0/1 nodes are available: 1 node(s) had untolerated taint(s). no new claims to deallocate, preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.";
        let stale = "0/1 nodes are available: 1 Insufficient nvidia.com/gpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.";
        let pods = vec![
            pod("agrees").gpus(1).unschedulable(v1_36, NOW - 60).build(),
            pod("stale").gpus(1).unschedulable(stale, NOW - 60).build(),
            pod("odd").gpus(1).unschedulable("the scheduler was having a bad day", NOW - 60).build(),
        ];
        let items = items(nodes, pods);
        let agrees = item(&items, "agrees");
        assert_eq!(agrees.agrees_with_scheduler, Some(true));
        assert_eq!(agrees.node_reasons.get("untolerated-taint:nvidia.com/gpu"), Some(&1));
        assert!(
            agrees.hints.iter().any(
                |h| h.starts_with("missing-toleration: every GPU node has taint nvidia.com/gpu=present:NoSchedule")
            ),
            "{:?}",
            agrees.hints
        );
        let stale = item(&items, "stale");
        assert_eq!(stale.agrees_with_scheduler, Some(false));
        assert!(
            stale.disagreement.as_deref().is_some_and(|d| d.contains("1 insufficient-gpu")),
            "{:?}",
            stale.disagreement
        );
        // Unknown words are kept as they were, marked, and not compared.
        let odd = item(&items, "odd");
        assert_eq!(odd.scheduler_recognised, Some(false));
        assert_eq!(odd.scheduler_message.as_deref(), Some("the scheduler was having a bad day"));
        assert_eq!(odd.agrees_with_scheduler, None);
    }

    #[test]
    fn a_gpu_count_in_the_node_selector_is_a_known_mistake() {
        let nodes = vec![node("n1").gpus(8).build()];
        let pods = vec![pod("sel").selector("nvidia.com/gpu", "8").build()];
        let items = items(nodes, pods);
        let it = item(&items, "sel");
        assert_eq!(it.blocking, Some(Step::Fit));
        assert_eq!(it.node_reasons.get("selector-mismatch"), Some(&1));
        assert!(it.hints.iter().any(|h| h.starts_with("gpu-count-in-node-selector")), "{:?}", it.hints);
    }

    #[test]
    fn a_silent_device_plugin_is_the_blocking_step() {
        // 8 GPUs in hardware, none advertised: the fit failure is the plugin's.
        let nodes = vec![node("n1").hardware(8).build()];
        let pods = vec![pod("p").gpus(1).build()];
        let items = items(nodes, pods);
        let it = item(&items, "p");
        assert_eq!(it.blocking, Some(Step::DevicePlugin));
        assert_eq!(step(it, Step::Fit).verdict, Verdict::Warn);
        assert!(it.unblock[0].starts_with("restart the device plugin on n1"), "{:?}", it.unblock);
    }
}
