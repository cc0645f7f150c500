//! The snapshot document's types: the JSON contract itself (DESIGN.md,
//! "Machine-readable output"). Add fields, never rename or repurpose them.

use std::collections::BTreeMap;

use serde::Serialize;

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
    #[serde(skip_serializing_if = "Option::is_none")]
    pub utilization: Option<UtilizationJson>,
    /// With the gangs, when spot nodes exist.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spot: Option<SpotJson>,
    /// What the cluster's DRA objects use that kgpu does not model.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub dra_unmodelled: Vec<DraUnmodelledJson>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DraUnmodelledJson {
    /// `consumable capacity`, `device binding conditions`, …
    pub feature: &'static str,
    /// The objects that use it (`device shared-0 on node-3`, `DeviceClass x (example.com/gpu)`).
    pub objects: Vec<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SpotJson {
    pub nodes: usize,
    pub replaced_last_24h: usize,
    pub exposure_hours: f64,
    pub preemptions_per_node_hour: f64,
    pub jobs: Vec<SpotJobJson>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SpotJobJson {
    pub name: String,
    pub gang: bool,
    pub spot_nodes: usize,
    pub gpus: u64,
    pub checkpoint_interval_seconds: Option<i64>,
    pub restart_seconds: i64,
    /// The share of its time preemptions cost: spot pays above this discount.
    pub break_even_discount: Option<f64>,
    pub interval_for_ten_percent_seconds: Option<i64>,
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
    /// Why the last skipped object was skipped (file, object, field).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped_reason: Option<String>,
    /// A polled feed's reporter pods (agents, dcgm-exporters), one per node.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reporters: Option<u32>,
    /// Of those, read at least once (the budget reaches them in turn).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reporters_read: Option<u32>,
    /// Seconds since the least recently read reporter was read, once every one has been.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oldest_reading_age_seconds: Option<i64>,
    /// Requests a second the feed may send the API server (absent when read directly).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_budget_per_second: Option<f64>,
    /// Read all at once from this (`--prometheus`), not reporter by reporter.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_from: Option<String>,
    /// How a watched feed took its whole collection from the API server:
    /// `stream` (a watch with `sendInitialEvents`) or `pages`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listed_by: Option<&'static str>,
    /// Why pages: the server's refusal of a streamed list.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream_refused: Option<String>,
    /// The older API version the feed is read at, where the server does not
    /// serve the one kgpu prefers (`resource.k8s.io/v1beta1`); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
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
    /// Of `allocated`, held by pods placed on Ready nodes that do not start.
    pub held_not_started: u64,
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
    pub hardware: Option<u64>,
    /// `nvidia.com/gpu` as the scheduler counts it (replicas on a
    /// time-sliced node; MIG slices are under `mig`).
    pub allocatable: u64,
    pub allocated: u64,
    pub free: u64,
    pub stranded: u64,
    /// The node's physical GPUs, each in one bucket: these add up to
    /// `fleet.totals` over the nodes.
    pub physical: PhysicalGpus,
    /// GPUs published through DRA (ResourceSlices), in physical GPUs: also
    /// counted in `allocatable`, `allocated` and `physical`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dra: Option<DraGpusJson>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DraGpusJson {
    pub published: u64,
    pub allocated: u64,
    pub tainted: u64,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PhysicalGpus {
    pub used: u64,
    pub free: u64,
    pub unavailable: u64,
    pub unadvertised: u64,
    pub unhealthy: u64,
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
    /// Its GPUs come through DRA claims: `gpusPerPod` counts the devices
    /// they ask, usable and stranded count the devices their requests match.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub dra: bool,
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
    /// The pod holds its GPUs idle, this long: the cheapest to move.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_seconds: Option<i64>,
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
    /// Whose verdict `blockingStep` and `summary` are: `kgpu` (its model),
    /// or `scheduler`, `kueue`, `volcano` where kgpu's model finds nothing
    /// in the way and the component that decides says otherwise.
    pub verdict_source: &'static str,
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
    /// A pod that outranks pods holding what it needs: what preempting costs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preemption: Option<PreemptionJson>,
    /// `status.nominatedNodeName`: the node the scheduler preempted on for it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nominated_node: Option<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PreemptionJson {
    /// The node kube-scheduler would preempt on.
    pub node: String,
    pub gpu_hours: f64,
    pub victims: Vec<VictimJson>,
    /// Where preempting would lose the least work, when elsewhere.
    pub cheapest_node: Option<String>,
    pub cheapest_gpu_hours: Option<f64>,
    /// Its PriorityClass says `preemptionPolicy: Never`.
    pub policy_never: bool,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VictimJson {
    pub name: String,
    pub gang: bool,
    pub pods: usize,
    pub gpus: u64,
    /// Physical GPUs held (a MIG slice or a replica is a share of one).
    pub gpu_share: f64,
    pub seconds_since_checkpoint: i64,
    /// Of those, the seconds it computed (idle time is not lost).
    pub busy_seconds: i64,
    pub checkpoint_known: bool,
    pub restart_seconds: i64,
    pub gpu_hours: f64,
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
    /// Workloads Kueue found inadmissible: not in its pending count.
    pub inadmissible: u32,
    pub cohort: Option<String>,
    pub active: bool,
    /// What it holds beyond its nominal quota.
    pub borrowed: u64,
    /// A ClusterQueue in a cohort: Kueue's weighted fair share (borrowed of
    /// what the cohort lends ×1000 ÷ weight, dominant resource).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fair_share: Option<u64>,
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
    /// `upgrade-done` on a driver other than the GPU Operator's target.
    pub done_off_target: bool,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WavesJson {
    pub target: String,
    /// What asks for the target: `--target-driver`, or the GPU Operator's
    /// `ClusterPolicy NAME` / `NVIDIADriver NAME`.
    pub source: String,
    pub wave_size: u32,
    /// The bounds kept: `maxParallelUpgrades`, `maxUnavailable` as the
    /// operator writes them, and where they come from, in words.
    pub max_parallel_upgrades: u32,
    pub max_unavailable: String,
    pub bounds: String,
    pub waves: Vec<WaveJson>,
    pub excluded: BTreeMap<String, String>,
    /// Why no wave can start now (maxUnavailable used up), when so.
    pub stalled: Option<String>,
    /// A node's upgrade failed: stop the waves; what a rollback sets back.
    pub halted: Option<HaltJson>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HaltJson {
    pub failed: Vec<String>,
    pub rollback_to: Option<String>,
    pub summary: String,
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
    /// `dra` where the MIG devices are published in ResourceSlices (the
    /// instances then say which claim holds each).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub through: Option<&'static str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MigGpu {
    pub index: u32,
    pub uuid: String,
    pub mig_enabled: bool,
    pub instances: Vec<MigInstanceJson>,
    pub healthy: bool,
    /// DRA: the partitions a claim could have now (not held, within the
    /// GPU's shared counters); DynamicMIG creates one on allocation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub placeable: Option<Vec<MigInstanceJson>>,
    /// DRA: the claim that holds the GPU whole (namespace/name).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held_whole_by: Option<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MigInstanceJson {
    pub profile: String,
    pub start: u8,
    pub size: u8,
    /// DRA: the claim it is allocated to (namespace/name).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held_by: Option<String>,
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

/// Who holds GPUs and how busy they are (`analysis::usage`).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UtilizationJson {
    /// `agent`, `dcgm-exporter`, `agent+dcgm-exporter` (per node, one) or `none`.
    pub source: String,
    /// Nodes read, per source.
    pub nodes_reporting: BTreeMap<&'static str, usize>,
    /// GPU nodes with no source.
    pub nodes_unreported: usize,
    /// A device under this is idle.
    pub idle_below_percent: f32,
    /// The window `meanPercent` is over, at most.
    pub window_seconds: i64,
    pub gpus_held: f64,
    pub gpus_idle: f64,
    pub idle_gpu_hours: f64,
    /// Devices that work or hold memory with no pod named.
    pub unattributed_busy_devices: usize,
    /// Idle holders first, most idle GPU-hours first.
    pub pods: Vec<PodUsageJson>,
    pub workloads: Vec<WorkloadUsageJson>,
    /// What to install, when there is no source.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodUsageJson {
    pub namespace: String,
    pub name: String,
    pub node: String,
    pub source: &'static str,
    /// GPU equivalents: a MIG instance counts its compute slices out of 7, a shared GPU 1/n.
    pub gpus: f64,
    pub devices: Vec<HeldDeviceJson>,
    pub recent_percent: Option<f32>,
    pub mean_percent: Option<f32>,
    pub memory_used_mib: Option<u64>,
    /// Idle (every device under `idleBelowPercent`) this long; null while busy.
    pub idle_seconds: Option<i64>,
    /// The idle time started before anyone watched: a lower bound.
    pub idle_at_least: bool,
    pub idle_gpu_hours: f64,
    pub workload: Option<WorkloadRefJson>,
    pub queue: Option<String>,
    pub age_seconds: Option<i64>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HeldDeviceJson {
    pub gpu: String,
    pub index: u32,
    pub profile: Option<String>,
    /// Pods sharing the device (time-slicing, MPS), this one included.
    pub shared_by: usize,
}

#[derive(Serialize)]
pub struct WorkloadRefJson {
    pub kind: String,
    pub namespace: String,
    pub name: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadUsageJson {
    /// Null for a pod without a controller.
    pub workload: Option<WorkloadRefJson>,
    pub pods: usize,
    pub idle_pods: usize,
    pub gpus: f64,
    /// GPU equivalents its idle pods hold.
    pub idle_gpus: f64,
    pub queue: Option<String>,
    pub mean_percent: Option<f32>,
    pub idle_gpu_hours: f64,
    /// Set when every pod is idle: the shortest of their idle times.
    pub idle_seconds: Option<i64>,
}
