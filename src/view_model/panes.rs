//! Per-pane view models: rows the widgets draw, computed once per snapshot.
//! Selection in the app is by `id`, so rows may reorder under updates.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::analysis::fleet::{IssueCode, NodeSummary};
use crate::analysis::{self, Analysis, Thresholds, waves};
use crate::model::audit::AuditEntry;
use crate::model::time::age;
use crate::model::{EventType, GpuHealth, MigMode, Node, Snapshot, Sym, Timestamp, keys};

/// One GPU (or MIG slice) cell of the fleet map.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cell {
    Used,
    Free,
    /// Free, but no pending shape can use it.
    Stranded,
    /// In hardware, not advertised by the device plugin.
    Unadvertised,
    Unhealthy,
    /// A GPU (in use or free) with a recent XID.
    Xid,
    /// Free on a cordoned or NotReady node.
    Unavailable,
    MigUsed,
    MigFree,
    /// Between the slices of two MIG GPUs.
    Gap,
}

/// A node's GPUs in use of its GPUs, as every view shows them: its
/// advertised whole GPUs, or on a node that advertises none (MIG slices,
/// DRA devices) its GPUs in use of its GPUs as the header counts them.
pub fn used_of(used: u64, allocatable: u64, buckets: &crate::analysis::fleet::GpuBuckets) -> (u64, u64) {
    if allocatable == 0 && buckets.total() > 0 { (buckets.used, buckets.total()) } else { (used, allocatable) }
}

/// How a node gives its GPUs to pods, in the Fleet's VIA column (shown
/// where some node gives them through DRA): its device plugin (`plugin`),
/// DRA ResourceSlices (`DRA`), both, or none (`-`).
pub fn gpus_via(node: Option<&Node>, n: &crate::analysis::fleet::NodeSummary) -> &'static str {
    // What the device plugin advertises (whole GPUs, shared replicas, MIG slices).
    let plugin = node.is_some_and(|node| node.allocatable.wants_gpu());
    let dra = n.dra.is_some_and(|d| d.published > 0);
    match (plugin, dra) {
        (true, true) => "both",
        (false, true) => "DRA",
        (true, false) => "plugin",
        (false, false) => "-",
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct NodeRow {
    pub name: Sym,
    pub ready: bool,
    pub cordoned: bool,
    pub product: String,
    pub driver: String,
    pub cells: Vec<Cell>,
    pub used: u64,
    pub allocatable: u64,
    pub free: u64,
    pub stranded: u64,
    pub hardware: Option<u64>,
    pub mig: String,
    pub issues: Vec<IssueCode>,
    pub issue_details: Vec<String>,
    pub pool: Sym,
    /// Physical GPUs by bucket (as the totals count them).
    pub buckets: crate::analysis::fleet::GpuBuckets,
    /// GPUs published through DRA, where the node publishes some.
    pub dra: Option<crate::analysis::dra::DraGpus>,
    /// [`gpus_via`].
    pub via: &'static str,
}

impl NodeRow {
    /// USED as the Fleet pane shows, filters and sorts it: allocated of the
    /// advertised whole GPUs; on a node that advertises none (MIG slices,
    /// DRA devices) its GPUs in use of its GPUs, as the header counts them,
    /// rather than `0/0`.
    pub fn used_of(&self) -> (u64, u64) {
        used_of(self.used, self.allocatable, &self.buckets)
    }

    pub fn used_text(&self) -> String {
        let (used, of) = self.used_of();
        format!("{used}/{of}")
    }

    pub fn id(&self) -> String {
        self.name.to_string()
    }
}

/// Nodes of one pool, for the aggregated map of large fleets.
#[derive(Clone, Debug, PartialEq)]
pub struct PoolRow {
    pub name: String,
    pub nodes: usize,
    pub gpus: u64,
    pub used: u64,
    pub free: u64,
    pub stranded: u64,
    /// Nodes by free GPUs: index i counts nodes with i free (last bucket: ≥ 8).
    pub free_histogram: [u32; 9],
    pub issues: BTreeMap<&'static str, u32>,
}

/// Pool label keys, in the order we look for them.
const POOL_LABELS: [&str; 6] = [
    "kgpu.dev/pool",
    "cloud.google.com/gke-nodepool",
    "eks.amazonaws.com/nodegroup",
    "karpenter.sh/nodepool",
    "agentpool",
    "node.kubernetes.io/instance-type",
];

/// A node's pool: the first of [`POOL_LABELS`] it carries, else its GPU
/// product, else `cpu`.
pub fn pool_of(node: &Node) -> Sym {
    POOL_LABELS
        .iter()
        .find_map(|k| node.label(k))
        .or(node.gpu.product.as_ref())
        .cloned()
        .unwrap_or_else(|| Sym::new("cpu"))
}

/// Shortens `NVIDIA-H100-80GB-HBM3` to `H100-80GB-HBM3`.
pub fn short_product(p: &str) -> String {
    p.strip_prefix("NVIDIA-").unwrap_or(p).to_string()
}

/// The most cells a node's row keeps: more than the widest map shows.
pub const MAX_CELLS: usize = 256;

fn cells(snap: &Snapshot, n: &NodeSummary, stranded: u64) -> Vec<Cell> {
    let mut out = Vec::new();
    let devices = snap.devices.get(&n.name);
    // MIG GPUs: one cell per instance, used ones first per profile.
    let mig_gpus: Vec<_> =
        devices.map(|d| d.gpus.iter().filter(|g| g.mig_mode == MigMode::Enabled).collect()).unwrap_or_default();
    if !n.mig.is_empty() && !mig_gpus.is_empty() {
        let mut used_left: BTreeMap<Sym, u64> = n.mig.iter().map(|m| (m.profile.clone(), m.allocated)).collect();
        let advertised: BTreeMap<Sym, u64> = n.mig.iter().map(|m| (m.profile.clone(), m.allocatable)).collect();
        let mut advertised_left = advertised.clone();
        for (i, g) in mig_gpus.iter().enumerate() {
            if out.len() >= MAX_CELLS {
                break;
            }
            if i > 0 {
                out.push(Cell::Gap);
            }
            for inst in g.instances.iter().take(MAX_CELLS) {
                let a = advertised_left.entry(inst.profile.clone()).or_default();
                if *a == 0 {
                    out.push(Cell::Unadvertised);
                    continue;
                }
                *a -= 1;
                let u = used_left.entry(inst.profile.clone()).or_default();
                if *u > 0 {
                    *u -= 1;
                    out.push(Cell::MigUsed);
                } else {
                    out.push(Cell::MigFree);
                }
            }
        }
        if n.gpu_allocatable > 0 {
            out.push(Cell::Gap);
        }
    }
    // MIG GPUs published through DRA, drawn as the device plugin's: one cell
    // per instance (a static GPU's, held or not; a DynamicMIG GPU's held
    // partitions, the only ones that exist). Their GPUs leave the whole-GPU
    // cells: held (one instance held), else free.
    let (mut dra_mig_used, mut dra_mig_free) = (0u64, 0u64);
    for g in n.dra_mig.iter().filter(|g| g.instances().next().is_some()) {
        if out.len() >= MAX_CELLS {
            break;
        }
        if !out.is_empty() {
            out.push(Cell::Gap);
        }
        let mut held = false;
        for p in g.instances().take(MAX_CELLS) {
            held |= p.held_by.is_some();
            out.push(if p.held_by.is_some() { Cell::MigUsed } else { Cell::MigFree });
        }
        if held {
            dra_mig_used += 1;
        } else {
            dra_mig_free += 1;
        }
    }
    let unhealthy = n.gpu_unhealthy;
    let unadvertised = n.gpu_unadvertised.saturating_sub(unhealthy);
    let whole_unadvertised = if !n.mig.is_empty() && !mig_gpus.is_empty() { 0 } else { unadvertised };
    let used = n.gpu_allocated.min(n.gpu_allocatable).saturating_sub(dra_mig_used);
    let free = n.gpu_free.saturating_sub(dra_mig_free);
    if dra_mig_used + dra_mig_free > 0 && used + free > 0 {
        out.push(Cell::Gap);
    }
    // The counts come from the node object: a node that claims 10^12 GPUs
    // gets a full row of cells, not 10^12 of them (the row's numbers say the rest).
    let mut add = |cell: Cell, count: u64| {
        let room = MAX_CELLS.saturating_sub(out.len());
        out.extend(std::iter::repeat_n(cell, usize::try_from(count).unwrap_or(usize::MAX).min(room)));
    };
    add(Cell::Used, used);
    // A black hole's free GPUs are unavailable, as the header counts them.
    if n.accepts_work() {
        add(Cell::Free, free.saturating_sub(stranded));
        add(Cell::Stranded, stranded.min(free));
    } else {
        add(Cell::Unavailable, free);
    }
    add(Cell::Unadvertised, whole_unadvertised);
    if devices.is_some_and(|d| d.gpus.iter().any(|g| matches!(g.health, GpuHealth::Unhealthy(_)))) || unhealthy > 0 {
        add(Cell::Unhealthy, unhealthy);
    }
    // GPUs with recent XIDs: marked in place of their used (else free) cells.
    let mut xids = n.gpu_recent_xid as usize;
    for wanted in [Cell::Used, Cell::Free, Cell::Stranded, Cell::Unavailable] {
        for c in out.iter_mut().filter(|c| **c == wanted) {
            if xids == 0 {
                break;
            }
            *c = Cell::Xid;
            xids -= 1;
        }
    }
    out
}

pub fn node_rows(snap: &Snapshot, a: &Analysis) -> Vec<NodeRow> {
    // The summaries come in the snapshot's node order: each node is the
    // next one, not looked up by name (a string compare per tree level).
    let mut in_order = snap.nodes.values();
    a.nodes
        .iter()
        .map(|n| {
            let node = in_order.next().filter(|node| node.name == n.name).or_else(|| snap.nodes.get(&n.name));
            let stranded = a.fragmentation.stranded_by_node.get(&n.name).copied().unwrap_or(0);
            NodeRow {
                name: n.name.clone(),
                ready: n.ready,
                cordoned: n.cordoned,
                product: n.product.as_ref().map_or_else(|| "-".into(), |p| short_product(p.as_str())),
                driver: n.driver.clone().unwrap_or_else(|| "-".into()),
                cells: cells(snap, n, stranded),
                used: n.gpu_allocated,
                allocatable: n.gpu_allocatable,
                free: n.gpu_free,
                stranded,
                hardware: n.hardware,
                mig: n
                    .mig_slices()
                    .iter()
                    .map(|m| format!("{}:{}/{}", m.profile, m.allocated, m.allocatable))
                    .collect::<Vec<_>>()
                    .join(" "),
                issues: n.issues.iter().map(|i| i.code).collect(),
                issue_details: n.issues.iter().map(|i| format!("{}: {}", i.code.as_str(), i.detail)).collect(),
                pool: node.map_or_else(|| Sym::new("-"), |node| pool_of(node)),
                buckets: n.buckets,
                dra: n.dra,
                via: gpus_via(node.map(|n| &**n), n),
            }
        })
        .collect()
}

pub fn pool_rows(rows: &[NodeRow]) -> Vec<PoolRow> {
    // Keyed by symbol (ordered by its text): no copy of the name per node.
    let mut pools: BTreeMap<Sym, PoolRow> = BTreeMap::new();
    for r in rows {
        let p = pools.entry(r.pool.clone()).or_insert_with(|| PoolRow {
            name: r.pool.to_string(),
            nodes: 0,
            gpus: 0,
            used: 0,
            free: 0,
            stranded: 0,
            free_histogram: [0; 9],
            issues: BTreeMap::new(),
        });
        // The totals' buckets: a pool's numbers add up to the header's.
        p.nodes += 1;
        // Saturating, as the totals (absurd inputs cap, never wrap).
        p.gpus = p.gpus.saturating_add(r.buckets.total());
        p.used = p.used.saturating_add(r.buckets.used);
        p.free = p.free.saturating_add(r.buckets.free);
        p.stranded = p.stranded.saturating_add(r.stranded.min(r.buckets.free));
        p.free_histogram[(r.buckets.free as usize).min(8)] += 1;
        for i in &r.issues {
            *p.issues.entry(i.as_str()).or_default() += 1;
        }
    }
    pools.into_values().collect()
}

/// One GPU of the MIG pane: its 8 memory slices and the instances on them.
#[derive(Clone, Debug, PartialEq)]
pub struct MigGpuRow {
    pub index: u32,
    pub enabled: bool,
    pub healthy: bool,
    /// (profile, start, size, used)
    pub instances: Vec<(Sym, u8, u8, bool)>,
    /// A claim holds the GPU whole (DRA): no partition of it is free.
    pub held_whole: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct MigNodeRow {
    pub node: Sym,
    pub product: String,
    pub config: String,
    pub state: String,
    pub paused: bool,
    pub gpus: Vec<MigGpuRow>,
    pub summary: String,
    pub source: MigSource,
    /// Lines for the detail panel: who holds which partition, what a claim could get.
    pub notes: Vec<String>,
}

/// Where a node's MIG devices are read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MigSource {
    /// The device plugin's resources and the agent's instances.
    DevicePlugin,
    /// ResourceSlices: instances mig-manager made, published by NVIDIA's DRA driver.
    Dra,
    /// ResourceSlices: every placement, made when a claim is allocated (DynamicMIG).
    DraDynamic,
}

impl MigNodeRow {
    pub fn id(&self) -> String {
        self.node.to_string()
    }
}

pub fn mig_rows(snap: &Snapshot, a: &Analysis) -> Vec<MigNodeRow> {
    a.nodes
        .iter()
        .filter_map(|n| {
            let node = snap.nodes.get(&n.name)?;
            if !n.dra_mig.is_empty() {
                return Some(dra_mig_row(node, n));
            }
            if !super::is_mig_node(snap, node) {
                return None;
            }
            let mut used_left: BTreeMap<Sym, u64> = n.mig.iter().map(|m| (m.profile.clone(), m.allocated)).collect();
            let gpus = snap
                .devices
                .get(&n.name)
                .map(|d| {
                    d.gpus
                        .iter()
                        .map(|g| MigGpuRow {
                            held_whole: false,
                            index: g.index,
                            enabled: g.mig_mode == MigMode::Enabled,
                            healthy: g.health == GpuHealth::Healthy,
                            instances: g
                                .instances
                                .iter()
                                .map(|i| {
                                    let u = used_left.entry(i.profile.clone()).or_default();
                                    let used = *u > 0;
                                    if used {
                                        *u -= 1;
                                    }
                                    (i.profile.clone(), i.start, i.size, used)
                                })
                                .collect(),
                        })
                        .collect()
                })
                .unwrap_or_default();
            Some(MigNodeRow {
                node: n.name.clone(),
                product: n.product.as_ref().map_or_else(|| "-".into(), |p| short_product(p.as_str())),
                config: node.operator.mig_config.as_ref().map_or_else(|| "-".into(), |c| c.to_string()),
                state: node.operator.mig_config_state.as_ref().map_or_else(|| "-".into(), |c| c.to_string()),
                paused: node.operator.paused_for_mig_change,
                source: MigSource::DevicePlugin,
                notes: Vec::new(),
                gpus,
                summary: {
                    // A profile the node no longer advertises (0/0 while
                    // mig-manager applies another config) is not a slice count.
                    let advertised: Vec<String> = n
                        .mig
                        .iter()
                        .filter(|m| m.allocatable > 0 || m.allocated > 0)
                        .map(|m| format!("{} {}/{}", m.profile, m.allocated, m.allocatable))
                        .collect();
                    if n.mig.is_empty() {
                        format!("{} whole GPU(s), MIG off", n.gpu_allocatable)
                    } else if advertised.is_empty() && node.operator.paused_for_mig_change {
                        "none advertised: reconfiguring".into()
                    } else if advertised.is_empty() {
                        "none advertised".into()
                    } else {
                        advertised.join("  ")
                    }
                },
            })
        })
        .collect()
}

/// A node whose MIG devices DRA publishes: the partitions that exist (all
/// of static MIG's, the held ones of DynamicMIG's) on each GPU's slices, and
/// what a claim could have now.
fn dra_mig_row(node: &crate::model::Node, n: &crate::analysis::fleet::NodeSummary) -> MigNodeRow {
    let dynamic = n.dra_mig.iter().any(|g| g.dynamic);
    let mut held: BTreeMap<Sym, usize> = BTreeMap::new();
    let mut free: BTreeMap<Sym, usize> = BTreeMap::new();
    for g in &n.dra_mig {
        if g.held_whole.is_some() {
            *held.entry(Sym::new("whole GPU")).or_default() += 1;
        }
        for p in g.partitions.iter().filter(|p| p.held_by.is_some()) {
            *held.entry(p.profile.clone()).or_default() += 1;
        }
        for (profile, count) in g.free_profiles() {
            *free.entry(profile).or_default() += count;
        }
    }
    let counted = |m: &BTreeMap<Sym, usize>| m.iter().map(|(p, n)| format!("{p} ×{n}")).collect::<Vec<_>>().join(", ");
    let held_text = if held.is_empty() { "none held".to_string() } else { format!("held {}", counted(&held)) };
    let free_text = match (free.is_empty(), dynamic) {
        (true, _) => "nothing free".to_string(),
        // Placements, not instances: they overlap.
        (false, true) => format!("placeable {} (overlapping)", counted(&free)),
        (false, false) => format!("free {}", counted(&free)),
    };
    let mut notes = Vec::new();
    for g in &n.dra_mig {
        let gpu = g.index.map_or_else(|| g.uuid.to_string(), |i| format!("GPU{i}"));
        if let Some(claim) = &g.held_whole {
            notes.push(format!("{gpu} held whole by claim {claim}: none of its partitions can be had while it is"));
        }
        // A device whose memory slices the driver does not publish has no
        // known placement: said as a count, not as "at 0".
        for p in g.partitions.iter() {
            if let Some(claim) = &p.held_by {
                let at = if p.size > 0 { format!(" at {}", p.start) } else { String::new() };
                notes.push(format!("{gpu} {}{at}: held by claim {claim}", p.profile));
            }
        }
        let mut starts: BTreeMap<Sym, (Vec<String>, usize)> = BTreeMap::new();
        for p in g.partitions.iter().filter(|p| p.free) {
            let entry = starts.entry(p.profile.clone()).or_default();
            if p.size > 0 {
                entry.0.push(p.start.to_string());
            } else {
                entry.1 += 1;
            }
        }
        if !starts.is_empty() {
            let list: Vec<String> = starts
                .iter()
                .map(|(p, (at, unplaced))| match (at.is_empty(), unplaced) {
                    (false, 0) => format!("{p} at {}", at.join(",")),
                    (true, n) => format!("{p} ×{n}"),
                    (false, n) => format!("{p} at {} and ×{n} more", at.join(",")),
                })
                .collect();
            // Placements, not instances: taking one may rule out another.
            let what = if g.dynamic { "a claim could get now (one rules out those it overlaps)" } else { "free" };
            notes.push(format!("{gpu} {what}: {}", list.join(" · ")));
        }
    }
    MigNodeRow {
        node: n.name.clone(),
        product: n.product.as_ref().map_or_else(|| "-".into(), |p| short_product(p.as_str())),
        config: if dynamic {
            "DRA, dynamic".into()
        } else {
            node.operator.mig_config.as_ref().map_or_else(|| "DRA".into(), |c| format!("DRA, {c}"))
        },
        state: "-".into(),
        paused: false,
        source: if dynamic { MigSource::DraDynamic } else { MigSource::Dra },
        gpus: n
            .dra_mig
            .iter()
            .enumerate()
            .map(|(i, g)| MigGpuRow {
                held_whole: g.held_whole.is_some(),
                index: g.index.unwrap_or(i as u32),
                enabled: true,
                healthy: !g.tainted,
                instances: g
                    .instances()
                    .filter(|p| p.size > 0)
                    .map(|p| (p.profile.clone(), p.start, p.size, p.held_by.is_some()))
                    .collect(),
            })
            .collect(),
        summary: format!("DRA: {held_text} · {free_text}"),
        notes,
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct EventRow {
    pub age: String,
    pub warning: bool,
    pub reason: String,
    pub object: String,
    pub message: String,
    pub count: u32,
    pub source: String,
}

pub fn event_rows(snap: &Snapshot, now: Timestamp) -> Vec<EventRow> {
    let mut v: Vec<_> = snap.events.values().collect();
    v.sort_by(|a, b| b.last.cmp(&a.last).then(a.name.cmp(&b.name)));
    v.into_iter()
        .map(|e| EventRow {
            age: age(now - e.last),
            warning: e.kind == EventType::Warning,
            reason: e.reason.to_string(),
            object: if e.namespace.as_str().is_empty() {
                format!("{}/{}", e.object_kind.as_str().to_ascii_lowercase(), e.object_name)
            } else {
                format!("{}/{}/{}", e.namespace, e.object_kind.as_str().to_ascii_lowercase(), e.object_name)
            },
            message: e.message.replace('\n', " "),
            count: e.count,
            source: e.source.to_string(),
        })
        .collect()
}

/// `EventRow::source` of kgpu's own audit entries.
pub const AUDIT_SOURCE: &str = "kgpu audit";

/// kgpu's own actions from its audit log, newest first, as Events rows.
/// Their ages are from the wall clock `wall_now`: the audit log is
/// written in real time even when the cluster is the demo's.
pub fn audit_rows(entries: &[AuditEntry], wall_now: Timestamp) -> Vec<EventRow> {
    entries
        .iter()
        .map(|e| EventRow {
            age: crate::model::time::parse_rfc3339(&e.time).map_or_else(|| "?".into(), |t| age((wall_now - t).max(0))),
            warning: matches!(e.result.as_str(), "error" | "cancelled"),
            reason: format!("kgpu {}{}", e.action, if e.dry_run { " (dry run: would, nothing changed)" } else { "" }),
            object: e.targets.join(" "),
            message: if e.detail.is_empty() {
                format!("{} (by {})", e.result, e.user)
            } else {
                format!("{}: {} (by {})", e.result, e.detail.replace('\n', " "), e.user)
            },
            count: 1,
            source: AUDIT_SOURCE.into(),
        })
        .collect()
}

/// Everything the cockpit draws, for one snapshot at one time.
pub struct Views {
    pub snap: Arc<Snapshot>,
    pub analysis: Analysis,
    pub nodes: Vec<NodeRow>,
    pub pools: Vec<PoolRow>,
    pub mig: Vec<MigNodeRow>,
    pub events: Vec<EventRow>,
    /// The Usage pane's rows: pods holding reported GPUs.
    pub usage: Vec<super::usage::UsageRow>,
    /// Its second table: the same pods by workload.
    pub usage_workloads: Vec<super::usage::WorkloadRow>,
    pub waves: Option<waves::WavePlan>,
    /// Where the waves' target comes from: `None` when chosen (`:plan`),
    /// else the GPU Operator object that asks for it.
    pub waves_from: Option<String>,
    /// Why the operator's objects give no single target, when they do not.
    pub target_problem: Option<String>,
    /// Actions of a kgpu that ended without finishing them (from the audit
    /// log): `:release` offers to release what they left.
    pub abandoned: Vec<AuditEntry>,
}

impl Views {
    /// The views of `snap` at `now`, from a full analysis.
    pub fn build(
        snap: Arc<Snapshot>,
        now: Timestamp,
        thresholds: &Thresholds,
        wave_target: Option<(&crate::model::DriverVersion, Option<waves::Policy>)>,
    ) -> Views {
        let analysis = analysis::analyze(&snap, now, thresholds);
        Views::assemble(snap, analysis, wave_target, |snap, target, policy| {
            waves::plan(&analysis::index::Index::build(snap, now), target, policy)
        })
    }

    /// [`Views::build`] by an analyzer that keeps what it can between the
    /// snapshots of one source.
    pub fn build_with(
        analyzer: &mut analysis::Analyzer,
        snap: Arc<Snapshot>,
        now: Timestamp,
        thresholds: &Thresholds,
        wave_target: Option<(&crate::model::DriverVersion, Option<waves::Policy>)>,
    ) -> Views {
        let analysis = analyzer.analyze(&snap, now, thresholds);
        let analyzer = &*analyzer;
        Views::assemble(snap, analysis, wave_target, |snap, target, policy| {
            waves::plan(&analyzer.index(snap, now), target, policy)
        })
    }

    fn assemble(
        snap: Arc<Snapshot>,
        analysis: Analysis,
        wave_target: Option<(&crate::model::DriverVersion, Option<waves::Policy>)>,
        plan_waves: impl FnOnce(&Snapshot, &crate::model::DriverVersion, waves::Policy) -> waves::WavePlan,
    ) -> Views {
        let nodes = node_rows(&snap, &analysis);
        let pools = pool_rows(&nodes);
        let mig = mig_rows(&snap, &analysis);
        let events = event_rows(&snap, analysis.now);
        let usage = super::usage::rows(&analysis);
        let usage_workloads = super::usage::workload_rows(&analysis);
        // Without a chosen target, the waves go to what the GPU Operator is told.
        let target = crate::model::driver_policy::wave_target(
            wave_target.map(|(t, _)| t),
            snap.driver_policies.values().map(|p| &**p),
        );
        // Their bounds: chosen, else the operator's upgradePolicy, else its defaults.
        let (policy, bounds) = waves::bounds_for(wave_target.and_then(|(_, p)| p), target.upgrade.as_ref());
        let waves = target.version.as_ref().map(|t| waves::WavePlan { bounds, ..plan_waves(&snap, t, policy) });
        let (waves_from, target_problem) = (target.from, target.problem);
        Views {
            snap,
            analysis,
            nodes,
            pools,
            mig,
            events,
            usage,
            usage_workloads,
            waves,
            waves_from,
            target_problem,
            abandoned: Vec::new(),
        }
    }

    /// Puts kgpu's audit rows at the top of the events, in place of the
    /// ones there before.
    pub fn set_audit(&mut self, rows: &[EventRow]) {
        self.events.retain(|e| e.source != AUDIT_SOURCE);
        self.events.splice(0..0, rows.iter().cloned());
    }

    pub fn gpu_resource_name() -> &'static str {
        keys::RESOURCE_GPU
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::testing::{node, snapshot};

    fn pools(rows: &[NodeRow]) -> Vec<(String, String)> {
        rows.iter().map(|r| (r.name.to_string(), r.pool.to_string())).collect()
    }

    /// Each row names its own node's pool, whether the analysis lists the
    /// nodes in the snapshot's order (the rows then read them in turn) or not.
    #[test]
    fn each_node_row_names_its_own_pool() {
        let nodes = vec![
            node("a1").gpus(8).label("kgpu.dev/pool", "train").build(),
            node("b1").gpus(8).label("node.kubernetes.io/instance-type", "p5.48xlarge").build(),
            node("c1").gpus(8).product("NVIDIA-H100-80GB-HBM3").build(),
            node("d1").build(),
        ];
        let snap = snapshot(nodes.clone(), vec![], vec![], 0);
        let thresholds = Thresholds::default();
        let want = [("a1", "train"), ("b1", "p5.48xlarge"), ("c1", "NVIDIA-H100-80GB-HBM3"), ("d1", "cpu")]
            .map(|(n, p)| (n.to_string(), p.to_string()));
        let analysis = analysis::analyze(&snap, 0, &thresholds);
        assert_eq!(pools(&node_rows(&snap, &analysis)), want);
        // An analysis one node short, and in another order: found by name.
        let mut fewer = analysis::analyze(&snapshot(nodes[1..].to_vec(), vec![], vec![], 0), 0, &thresholds);
        fewer.nodes.reverse();
        assert_eq!(pools(&node_rows(&snap, &fewer)), want[1..].iter().rev().cloned().collect::<Vec<_>>());
        let pool_names: Vec<String> = pool_rows(&node_rows(&snap, &analysis)).into_iter().map(|p| p.name).collect();
        assert_eq!(pool_names, ["NVIDIA-H100-80GB-HBM3", "cpu", "p5.48xlarge", "train"]);
    }
}
