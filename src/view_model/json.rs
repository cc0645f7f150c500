//! The stable machine-readable snapshot (`kgpu snapshot -o json`), as
//! DESIGN.md's "Machine-readable output" defines it. Field names are a
//! contract: add fields, never rename or repurpose them.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::analysis::Analysis;
use crate::analysis::fragmentation::{PlanStatus, ShapeSource};
use crate::model::{Feed, FeedState, Snapshot};

use super::Section;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Document {
    pub kgpu_snapshot: u32,
    pub source: Source,
    /// The time the views were computed for (seconds since the epoch).
    pub at: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scenario: Option<Scenario>,
    pub feeds: BTreeMap<String, FeedJson>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fleet: Option<Fleet>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fragmentation: Option<Fragmentation>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pending: Option<Vec<Pending>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gangs: Option<Vec<GangJson>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queues: Option<Vec<QueueJson>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drivers: Option<Drivers>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mig: Option<Vec<MigNode>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub events: Option<Vec<EventJson>>,
}

#[derive(Serialize)]
pub struct Source {
    pub kind: &'static str,
    pub name: String,
}

#[derive(Serialize)]
pub struct Scenario {
    pub name: String,
    pub title: String,
    pub story: String,
    pub signal: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FeedJson {
    pub state: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub age_seconds: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<u64>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Fleet {
    pub totals: Totals,
    pub nodes: Vec<NodeJson>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Totals {
    /// Every GPU, each in one of allocated, free, unavailable, unadvertised, unhealthy.
    pub gpus: u64,
    pub allocated: u64,
    pub free: u64,
    pub stranded: u64,
    pub unavailable: u64,
    pub unadvertised: u64,
    pub unhealthy: u64,
    /// Of `gpus`, partitioned into MIG slices.
    pub mig_gpus: u64,
    /// Time-slicing replicas (not GPUs), when any node shares its GPUs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replicas: Option<ReplicasJson>,
    pub fragmentation_score: f64,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplicasJson {
    pub advertised: u64,
    pub allocated: u64,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeJson {
    pub name: String,
    pub ready: bool,
    pub cordoned: bool,
    pub product: Option<String>,
    pub driver: Option<String>,
    pub gpu: NodeGpu,
    pub mig: BTreeMap<String, MigCount>,
    pub issues: Vec<String>,
    pub issue_details: Vec<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeGpu {
    pub hardware: Option<u32>,
    pub allocatable: u64,
    pub allocated: u64,
    pub free: u64,
    pub stranded: u64,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MigCount {
    pub allocatable: u64,
    pub allocated: u64,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Fragmentation {
    pub score: f64,
    pub free: u64,
    pub free_on_whole_nodes: u64,
    pub stranded: u64,
    pub shapes: Vec<ShapeJson>,
    pub plan: Vec<PlanStepJson>,
    pub plan_summary: PlanSummary,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ShapeJson {
    pub gpus_per_pod: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mig_profile: Option<String>,
    pub pods: u32,
    pub fits_now: bool,
    pub usable_free: u64,
    pub stranded_free: u64,
    pub largest_gang: u64,
    /// `canonical`, or the pending Pod/Workload/PodGroup it comes from.
    pub source: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanStepJson {
    pub action: &'static str,
    pub namespace: String,
    pub pod: String,
    pub from_node: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to_node: Option<String>,
    pub gpus: u64,
    pub gpu_hours_disrupted: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gang: Option<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanSummary {
    pub status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub target: Option<String>,
    pub target_shape: Option<String>,
    pub evictions: usize,
    pub gpu_hours_disrupted: f64,
    pub nodes_freed: Vec<String>,
    /// Nodes running the plan reserves for the target (freed ones first).
    pub nodes_reserved: Vec<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Pending {
    pub kind: &'static str,
    pub namespace: String,
    pub name: String,
    pub blocking_step: &'static str,
    pub summary: String,
    pub node_reasons: BTreeMap<String, u32>,
    pub scheduler_message: Option<String>,
    pub scheduler_recognised: Option<bool>,
    pub scheduler_reasons: BTreeMap<String, u32>,
    pub agrees_with_scheduler: Option<bool>,
    pub hints: Vec<String>,
    pub age_seconds: i64,
    pub queue: Option<String>,
    pub shape: String,
    pub unblock: Vec<String>,
    pub steps: Vec<StepJson>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StepJson {
    pub step: &'static str,
    pub verdict: &'static str,
    pub summary: String,
    pub details: Vec<String>,
    pub commands: Vec<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GangJson {
    pub kind: &'static str,
    pub namespace: String,
    pub name: String,
    pub required: u32,
    pub placed: u32,
    pub gpus_held_idle: u64,
    pub state: &'static str,
    pub deadlocked_with: Vec<String>,
    pub queue: Option<String>,
    pub nodes: BTreeMap<String, u64>,
    pub issues: Vec<&'static str>,
    /// How it is spread over nodes, and whether one node had room then.
    pub topology: Option<String>,
    pub age_seconds: i64,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueJson {
    pub kind: &'static str,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub flavor: Option<String>,
    pub resource: String,
    pub nominal: u64,
    pub used: u64,
    pub borrowing_limit: Option<u64>,
    pub pending: u32,
    pub admitted: u32,
    pub cohort: Option<String>,
    pub active: bool,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Drivers {
    pub matrix: Vec<CellJson>,
    pub upgrades: Vec<UpgradeJson>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waves: Option<WavesJson>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CellJson {
    pub driver: String,
    pub nodes: usize,
    pub cuda: String,
    pub workloads: usize,
    pub placed: usize,
    pub verdict: &'static str,
    pub reason: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UpgradeJson {
    pub node: String,
    pub state: String,
    pub since_seconds: Option<i64>,
    pub stuck: bool,
    pub skip: bool,
    pub driver: Option<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WavesJson {
    pub target: String,
    pub wave_size: u32,
    pub waves: Vec<WaveJson>,
    pub excluded: BTreeMap<String, String>,
    /// Why no wave can start now (maxUnavailable used up), when so.
    pub stalled: Option<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WaveJson {
    pub index: usize,
    pub canary: bool,
    pub nodes: Vec<String>,
    pub gangs: Vec<String>,
    pub oversized: bool,
    pub breaks: Vec<BreakJson>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BreakJson {
    pub pod: String,
    pub node: String,
    pub before: &'static str,
    pub after: &'static str,
    pub reason: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MigNode {
    pub node: String,
    pub config: Option<String>,
    pub state: Option<String>,
    pub gpus: Vec<MigGpu>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MigGpu {
    pub index: u32,
    pub uuid: String,
    pub mig_enabled: bool,
    pub instances: Vec<MigInstanceJson>,
    pub healthy: bool,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MigInstanceJson {
    pub profile: String,
    pub start: u8,
    pub size: u8,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventJson {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub reason: String,
    pub object: String,
    pub namespace: String,
    pub message: String,
    pub count: u32,
    pub last_seen_seconds: i64,
    pub source: String,
}

fn feed_json(snap: &Snapshot, now: i64) -> BTreeMap<String, FeedJson> {
    Feed::ALL
        .iter()
        .filter_map(|f| {
            let status = snap.feed(*f)?;
            let (state, reason) = match &status.state {
                FeedState::Syncing => ("syncing", None),
                FeedState::Live => ("live", None),
                FeedState::Unavailable(p) => (p.label(), Some(p.describe().to_string())),
                FeedState::Reconnecting { error, .. } => ("reconnecting", Some(error.clone())),
            };
            Some((
                f.name().to_string(),
                FeedJson {
                    state,
                    reason,
                    age_seconds: status.last_data.map(|t| (now - t).max(0)),
                    skipped: snap.skipped.get(f).map(|(n, _)| *n),
                },
            ))
        })
        .collect()
}

pub fn document(
    snap: &Snapshot,
    a: &Analysis,
    section: Option<Section>,
    waves: Option<&crate::analysis::waves::WavePlan>,
) -> Document {
    let want = |s: Section| section.is_none_or(|x| x == s);
    let now = a.now;
    Document {
        kgpu_snapshot: 1,
        source: Source { kind: snap.source.kind.as_str(), name: snap.source.name.clone() },
        at: now,
        scenario: snap.scenario.as_ref().map(|s| Scenario {
            name: s.name.clone(),
            title: s.title.clone(),
            story: s.story.clone(),
            signal: s.signal.clone(),
        }),
        feeds: feed_json(snap, now),
        fleet: want(Section::Fleet).then(|| fleet(a)),
        fragmentation: want(Section::Fragmentation).then(|| fragmentation(a)),
        pending: want(Section::Pending).then(|| a.pending.iter().map(pending).collect()),
        gangs: want(Section::Gangs).then(|| gangs(a)),
        queues: want(Section::Queues).then(|| queues(a)),
        drivers: want(Section::Drivers).then(|| drivers(a, waves)),
        mig: want(Section::Mig).then(|| mig(snap)),
        events: want(Section::Events).then(|| events(snap, now)),
    }
}

fn fleet(a: &Analysis) -> Fleet {
    let t = &a.totals;
    Fleet {
        totals: Totals {
            gpus: t.gpus,
            allocated: t.allocated,
            free: t.free,
            stranded: t.stranded,
            unavailable: t.unavailable,
            unadvertised: t.unadvertised,
            unhealthy: t.unhealthy,
            mig_gpus: t.mig_gpus,
            replicas: (t.replicas.0 > 0).then_some(ReplicasJson { advertised: t.replicas.0, allocated: t.replicas.1 }),
            fragmentation_score: round3(a.fragmentation.score),
        },
        nodes: a
            .nodes
            .iter()
            .map(|n| NodeJson {
                name: n.name.to_string(),
                ready: n.ready,
                cordoned: n.cordoned,
                product: n.product.map(|p| p.to_string()),
                driver: n.driver.clone(),
                gpu: NodeGpu {
                    hardware: n.hardware,
                    allocatable: n.gpu_allocatable,
                    allocated: n.gpu_allocated,
                    free: n.gpu_free,
                    stranded: a.fragmentation.stranded_by_node.get(&n.name).copied().unwrap_or(0),
                },
                mig: n
                    .mig
                    .iter()
                    .map(|m| (m.profile.to_string(), MigCount { allocatable: m.allocatable, allocated: m.allocated }))
                    .collect(),
                issues: n.issues.iter().map(|i| i.code.as_str().to_string()).collect(),
                issue_details: n.issues.iter().map(|i| format!("{}: {}", i.code.as_str(), i.detail)).collect(),
            })
            .collect(),
    }
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

fn source_label(s: &ShapeSource) -> String {
    match s {
        ShapeSource::Canonical => "canonical".into(),
        ShapeSource::Pod(k) => format!("Pod {}/{}", k.namespace, k.name),
        ShapeSource::Gang(k) => format!("{} {}/{}", k.kind.kind_name(), k.namespace, k.name),
    }
}

fn fragmentation(a: &Analysis) -> Fragmentation {
    let f = &a.fragmentation;
    let p = &f.plan;
    let (status, reason) = match &p.status {
        PlanStatus::NotNeeded => ("not-needed", None),
        PlanStatus::Found => ("found", None),
        PlanStatus::Impossible(why) => ("impossible", Some(why.clone())),
    };
    Fragmentation {
        score: round3(f.score),
        free: f.free_total,
        free_on_whole_nodes: f.free_on_whole_nodes,
        stranded: f.stranded_total,
        shapes: f
            .shapes
            .iter()
            .map(|s| ShapeJson {
                gpus_per_pod: s.demand.gpus_per_pod,
                mig_profile: s.demand.mig_profile.map(|p| p.to_string()),
                pods: s.demand.pods,
                fits_now: s.fits_now,
                usable_free: s.usable_free,
                stranded_free: s.stranded_free,
                largest_gang: s.largest_gang,
                source: source_label(&s.demand.source),
            })
            .collect(),
        plan: p
            .steps
            .iter()
            .map(|s| PlanStepJson {
                action: if s.to_node.is_some() { "move" } else { "evict" },
                namespace: s.namespace.to_string(),
                pod: s.pod.clone(),
                from_node: s.from_node.to_string(),
                to_node: s.to_node.map(|n| n.to_string()),
                gpus: s.gpus,
                gpu_hours_disrupted: round3(s.gpu_hours_disrupted),
                gang: s.gang.clone(),
            })
            .collect(),
        plan_summary: PlanSummary {
            status,
            reason,
            target: p.target.clone(),
            target_shape: p.target_shape.clone(),
            evictions: p.steps.len(),
            gpu_hours_disrupted: round3(p.gpu_hours),
            nodes_freed: p.nodes_freed.iter().map(|n| n.to_string()).collect(),
            nodes_reserved: p.reserve.iter().map(|n| n.to_string()).collect(),
        },
    }
}

fn verdict_str(v: crate::analysis::pending::Verdict) -> &'static str {
    use crate::analysis::pending::Verdict;
    match v {
        Verdict::Pass => "pass",
        Verdict::Block => "block",
        Verdict::Warn => "warn",
        Verdict::NotApplicable => "n/a",
    }
}

fn pending(p: &crate::analysis::pending::PendingItem) -> Pending {
    Pending {
        kind: p.kind.as_str(),
        namespace: p.namespace.to_string(),
        name: p.name.clone(),
        blocking_step: p.blocking_str(),
        summary: p.summary.clone(),
        node_reasons: (*p.node_reasons).clone(),
        scheduler_message: p.scheduler_message.clone(),
        scheduler_recognised: p.scheduler_recognised,
        scheduler_reasons: (*p.scheduler_reasons).clone(),
        agrees_with_scheduler: p.agrees_with_scheduler,
        hints: p.hints.clone(),
        age_seconds: p.age,
        queue: p.queue.map(|q| q.to_string()),
        shape: p.shape.clone(),
        unblock: p.unblock.clone(),
        steps: p
            .steps
            .iter()
            .map(|s| StepJson {
                step: s.step.as_str(),
                verdict: verdict_str(s.verdict),
                summary: s.summary.to_string(),
                details: s.details.to_vec(),
                commands: s.commands.clone(),
            })
            .collect(),
    }
}

fn gangs(a: &Analysis) -> Vec<GangJson> {
    a.gangs
        .iter()
        .map(|g| GangJson {
            kind: g.key.kind.kind_name(),
            namespace: g.key.namespace.to_string(),
            name: g.key.name.to_string(),
            required: g.required,
            placed: g.placed,
            gpus_held_idle: g.gpus_held_idle,
            state: if g.deadlocked_with.is_empty() { g.state.as_str() } else { "deadlocked" },
            deadlocked_with: g.deadlocked_with.clone(),
            queue: g.queue.map(|q| q.to_string()),
            nodes: g.nodes.iter().map(|(n, c)| (n.to_string(), *c)).collect(),
            issues: match g.topology {
                crate::analysis::gangs::Topology::Split { .. } => vec!["topology-split"],
                crate::analysis::gangs::Topology::Unknown => vec!["topology-unknown"],
                _ => Vec::new(),
            },
            topology: g.topology_note(),
            age_seconds: g.age,
        })
        .collect()
}

fn queues(a: &Analysis) -> Vec<QueueJson> {
    a.queues
        .iter()
        .map(|q| QueueJson {
            kind: q.kind.kind_name(),
            name: q.name.to_string(),
            namespace: q.namespace.map(|n| n.to_string()),
            flavor: q.flavor.map(|f| f.to_string()),
            resource: q.resource.to_string(),
            nominal: q.nominal,
            used: q.used,
            borrowing_limit: q.borrowing_limit,
            pending: q.pending,
            admitted: q.admitted,
            cohort: q.cohort.map(|c| c.to_string()),
            active: q.active,
        })
        .collect()
}

fn drivers(a: &Analysis, waves: Option<&crate::analysis::waves::WavePlan>) -> Drivers {
    Drivers {
        matrix: a
            .matrix
            .cells
            .iter()
            .map(|c| CellJson {
                driver: c.driver.clone(),
                nodes: c.nodes.len(),
                cuda: c.cuda.clone(),
                workloads: c.workloads.count,
                placed: c.placed.count,
                verdict: c.verdict.as_str(),
                reason: c.reason.clone(),
            })
            .collect(),
        upgrades: a
            .upgrades
            .iter()
            .map(|u| UpgradeJson {
                node: u.node.to_string(),
                state: u.state_str().to_string(),
                since_seconds: u.seconds_in_state,
                stuck: u.stuck,
                skip: u.skip,
                driver: u.driver.as_ref().map(|d| d.to_string()),
            })
            .collect(),
        waves: waves.map(|w| WavesJson {
            target: w.target.clone(),
            wave_size: w.wave_size,
            waves: w
                .waves
                .iter()
                .map(|x| WaveJson {
                    index: x.index,
                    canary: x.canary,
                    nodes: x.nodes.iter().map(|n| n.to_string()).collect(),
                    gangs: x.gangs.clone(),
                    oversized: x.oversized,
                    breaks: x
                        .breaks
                        .iter()
                        .map(|b| BreakJson {
                            pod: b.pod.clone(),
                            node: b.node.to_string(),
                            before: b.before.as_str(),
                            after: b.after.as_str(),
                            reason: b.reason.clone(),
                        })
                        .collect(),
                })
                .collect(),
            excluded: w.excluded.iter().map(|(n, r)| (n.to_string(), r.clone())).collect(),
            stalled: w.stalled.clone(),
        }),
    }
}

fn mig(snap: &Snapshot) -> Vec<MigNode> {
    snap.nodes
        .values()
        .filter(|n| super::is_mig_node(snap, n))
        .map(|n| MigNode {
            node: n.name.to_string(),
            config: n.operator.mig_config.map(|c| c.to_string()),
            state: n.operator.mig_config_state.map(|c| c.to_string()),
            gpus: snap
                .devices
                .get(&n.name)
                .map(|d| {
                    d.gpus
                        .iter()
                        .map(|g| MigGpu {
                            index: g.index,
                            uuid: g.uuid.to_string(),
                            mig_enabled: g.mig_mode == crate::model::MigMode::Enabled,
                            instances: g
                                .instances
                                .iter()
                                .map(|i| MigInstanceJson {
                                    profile: i.profile.to_string(),
                                    start: i.start,
                                    size: i.size,
                                })
                                .collect(),
                            healthy: g.health == crate::model::GpuHealth::Healthy,
                        })
                        .collect()
                })
                .unwrap_or_default(),
        })
        .collect()
}

fn events(snap: &Snapshot, now: i64) -> Vec<EventJson> {
    let mut v: Vec<_> = snap.events.values().collect();
    v.sort_by(|a, b| b.last.cmp(&a.last).then(a.name.cmp(&b.name)));
    v.into_iter()
        .take(500)
        .map(|e| EventJson {
            kind: match e.kind {
                crate::model::EventType::Normal => "Normal",
                crate::model::EventType::Warning => "Warning",
            },
            reason: e.reason.to_string(),
            object: format!("{}/{}", e.object_kind.as_str().to_ascii_lowercase(), e.object_name),
            namespace: e.namespace.to_string(),
            message: e.message.to_string(),
            count: e.count,
            last_seen_seconds: (now - e.last).max(0),
            source: e.source.to_string(),
        })
        .collect()
}
