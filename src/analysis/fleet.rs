//! The fleet: per node, GPUs in hardware, advertised, allocated and free,
//! MIG slices per profile, and the node's problems.

use std::collections::BTreeMap;

use crate::model::{AgentStatus, GpuHealth, Node, PodPhase, Sym, Timestamp};
use crate::reference::xid;

use super::Thresholds;
use super::index::Index;
pub use super::node_issue::{IssueCode, NodeIssue};
pub use super::supply::{GpuBuckets, Replicas, supply};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MigUsage {
    pub profile: Sym,
    pub allocatable: u64,
    pub allocated: u64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct NodeSummary {
    pub name: Sym,
    pub ready: bool,
    pub cordoned: bool,
    pub product: Option<Sym>,
    pub driver: Option<String>,
    /// Physical GPUs as hardware reports them (agent, else GFD), if known.
    pub hardware: Option<u64>,
    pub gpu_allocatable: u64,
    pub gpu_allocated: u64,
    pub gpu_free: u64,
    /// GPUs the agent reports unhealthy.
    pub gpu_unhealthy: u64,
    /// Healthy GPUs with a recent XID the device plugin would act on.
    pub gpu_recent_xid: u32,
    /// Those recent XIDs, as (GPU index, code), for the advice.
    pub recent_xids: Vec<(u32, u32)>,
    /// GPUs in hardware the device plugin does not advertise.
    pub gpu_unadvertised: u64,
    pub mig: Vec<MigUsage>,
    pub gpu_pods: usize,
    pub issues: Vec<NodeIssue>,
    /// Every physical GPU of the node in exactly one bucket.
    pub buckets: GpuBuckets,
    /// Time-slicing: `nvidia.com/gpu` (or `.shared`) counts replicas, not GPUs.
    pub replicas: Option<Replicas>,
    /// GPUs published through DRA (ResourceSlices).
    pub dra: Option<super::dra::DraGpus>,
    /// GPUs whose MIG devices DRA publishes, with their placements and holders.
    pub dra_mig: Vec<super::dra::partitions::MigGpu>,
}

impl NodeSummary {
    /// MIG slices by profile, allocated of those there are: the device
    /// plugin's, else the static MIG devices DRA publishes (DynamicMIG's
    /// partitions are made on allocation: there is no count of them).
    pub fn mig_slices(&self) -> Vec<MigUsage> {
        if !self.mig.is_empty() || self.dra_mig.iter().any(|g| g.dynamic) {
            return self.mig.clone();
        }
        let mut by: std::collections::BTreeMap<Sym, (u64, u64)> = std::collections::BTreeMap::new();
        for p in self.dra_mig.iter().flat_map(|g| g.instances()) {
            let e = by.entry(p.profile.clone()).or_default();
            e.0 += 1;
            e.1 += u64::from(p.held_by.is_some());
        }
        by.into_iter().map(|(profile, (allocatable, allocated))| MigUsage { profile, allocatable, allocated }).collect()
    }

    pub fn has(&self, code: IssueCode) -> bool {
        self.issues.iter().any(|i| i.code == code)
    }
    pub fn schedulable(&self) -> bool {
        self.ready && !self.cordoned
    }

    /// Its free GPUs are usable: schedulable and not a black hole.
    pub fn accepts_work(&self) -> bool {
        self.schedulable() && !self.has(IssueCode::BlackHole)
    }
}

/// The nodes that fail every GPU pod at admission (see `black_hole`).
pub fn black_hole_nodes(index: &Index<'_>, thresholds: &Thresholds) -> Vec<Sym> {
    index.nodes().filter(|n| black_hole(index, n, thresholds).is_some()).map(|n| n.name.clone()).collect()
}

/// A string attribute of the node's first NVIDIA GPU published through DRA.
fn dra_attribute(index: &Index<'_>, node: &Node, name: &str) -> Option<String> {
    index
        .dra()
        .devices_on(&node.name)
        .iter()
        .filter(|d| d.physical_gpu().is_some())
        .find_map(|d| d.nvidia_attribute(name).map(str::to_string))
}

/// The NVIDIA driver a node runs, as GFD labels it, else as its agent
/// reads it, else as its DRA slices publish it: one answer for the Fleet
/// rows and the Drivers pane.
pub fn node_driver(index: &Index<'_>, node: &Node) -> Option<crate::model::DriverVersion> {
    let agent = || index.snap.devices.get(&node.name).filter(|d| d.status == crate::model::AgentStatus::Reporting);
    node.gpu
        .driver
        .clone()
        .or_else(|| agent().and_then(|d| d.driver.clone()))
        .or_else(|| dra_attribute(index, node, "driverVersion").and_then(|v| crate::model::DriverVersion::parse(&v)))
}

/// The product a node's DRA slices publish, written as GFD labels it.
pub fn node_product(index: &Index<'_>, node: &Node) -> Option<Sym> {
    dra_attribute(index, node, "productName").map(|p| Sym::new(&p.replace(' ', "-")))
}

/// A node with GPUs, the device plugin's or DRA's.
pub fn has_gpus(index: &Index<'_>, node: &Node) -> bool {
    node.is_gpu_node() || index.dra().gpus(&node.name).is_some()
}

/// Pods bound to a Ready node that wait for a ComputeDomain in which the
/// node is not Ready (its IMEX daemon), past the pending chain's grace:
/// the node's trouble as much as theirs.
fn compute_domain_issue(index: &Index<'_>, node: &crate::model::Node) -> Option<NodeIssue> {
    use std::collections::BTreeMap;
    if !node.is_ready() {
        return None;
    }
    let mut waiting: BTreeMap<String, usize> = BTreeMap::new();
    for pod in index.pods_on(&node.name) {
        let Some((_, uid)) = index.dra().waiting_channel(pod, index.now) else { continue };
        let Some(domain) = index.dra().domain(&uid) else { continue };
        if domain.node_ready(node.name.as_str()) != Some(true) {
            *waiting.entry(format!("{}/{}", domain.namespace, domain.name)).or_default() += 1;
        }
    }
    let said: Vec<String> =
        waiting.into_iter().map(|(domain, pods)| format!("{domain} ({pods} pod(s) wait)")).collect();
    (!said.is_empty()).then(|| NodeIssue {
        code: IssueCode::ComputeDomainNotReady,
        detail: format!("this node's IMEX daemon is not Ready in ComputeDomain {}", said.join(", ")),
    })
}

pub fn summarize(index: &Index<'_>, thresholds: &Thresholds) -> Vec<NodeSummary> {
    index.nodes().map(|node| summarize_node(index, node, thresholds)).collect()
}

pub fn summarize_node(index: &Index<'_>, node: &Node, thresholds: &Thresholds) -> NodeSummary {
    let used = index.used(&node.name);
    let supply = supply(index, node);
    let (hardware, withheld, gpu_unhealthy) = (supply.hardware, supply.withheld, supply.unhealthy);
    let (advertised_physical, gpu_unadvertised) = (supply.advertised, supply.unadvertised);
    let devices = index.snap.devices.get(&node.name).filter(|d| d.status == AgentStatus::Reporting);
    let mig: Vec<MigUsage> = node
        .allocatable
        .mig()
        .map(|(profile, allocatable)| MigUsage {
            profile: Sym::new(profile),
            allocatable,
            allocated: used.mig(profile),
        })
        .collect();
    let gpu_pods = index.gpu_pods_on(&node.name);

    let mut issues = Vec::new();
    // The mig-manager pauses the device plugin while it repartitions: GPUs
    // missing then are expected (the MIG issue says so), not a crash.
    if gpu_unadvertised > 0 && !node.operator.paused_for_mig_change {
        let hw = hardware.unwrap_or(0);
        issues.push(NodeIssue {
            code: IssueCode::DevicePluginNotAdvertising,
            detail: format!(
                "{hw} GPU(s) in hardware, {advertised_physical} advertised to Kubernetes ({gpu_unadvertised} missing)"
            ),
        });
    }
    if withheld > 0 {
        issues.push(NodeIssue {
            code: IssueCode::DevicePluginUnhealthy,
            detail: format!(
                "capacity {} nvidia.com/gpu, allocatable {}: the device plugin reports {withheld} GPU(s) unhealthy, or has stopped (its log: kubectl logs -n gpu-operator -l app=nvidia-device-plugin-daemonset --field-selector spec.nodeName={})",
                node.capacity.gpu, node.allocatable.gpu, node.name
            ),
        });
    }
    if let Some(broken) = super::gpu_stack::first_break(index, node) {
        let waits = if broken.layer == crate::model::OperandLayer::Validator {
            String::new()
        } else {
            "; the layers above it wait for it".into()
        };
        issues.push(NodeIssue {
            code: IssueCode::GpuStack,
            detail: format!("{}{waits} ({})", broken.text(), broken.command(node.name.clone())),
        });
    }
    if let Some(product) =
        node.gpu.product.as_ref().filter(|p| crate::reference::mig::is_invalid_mig_product(p.as_str()))
    {
        issues.push(NodeIssue {
            code: IssueCode::MigInvalid,
            detail: format!(
                "GPU Feature Discovery labels the product {product}: under the single MIG strategy every GPU must be in MIG mode with one profile; none is advertised"
            ),
        });
    }
    let tainted: Vec<String> = index
        .dra()
        .devices_on(&node.name)
        .iter()
        .filter(|d| d.tainted())
        .flat_map(|d| {
            d.device.taints.iter().map(move |t| {
                format!(
                    "{} {}={}:{}",
                    d.device.name,
                    t.key,
                    t.value.as_ref().map_or("", |v| v.as_str()),
                    t.effect.as_str()
                )
            })
        })
        .collect();
    if !tainted.is_empty() {
        // NoExecute on a held device: since 1.36 (DRADeviceTaints, beta, on by
        // default) kube-controller-manager's device-taint eviction deletes the
        // pods using it, unless their claim tolerates the taint.
        let mut evicted: Vec<String> = Vec::new();
        for d in index.dra().devices_on(&node.name) {
            if !d.device.taints.iter().any(|t| t.effect == crate::model::TaintEffect::NoExecute) {
                continue;
            }
            let Some(claim) = index.dra().allocated_to(&d.id()) else { continue };
            for pod in claim.reserved_for.iter() {
                let name = format!("{}/{pod}", claim.namespace);
                if !evicted.contains(&name) {
                    evicted.push(name);
                }
            }
        }
        let eviction = if evicted.is_empty() {
            String::new()
        } else {
            format!(
                "; NoExecute on devices in use: the device-taint eviction controller deletes {} unless its claim tolerates the taint",
                evicted.join(", ")
            )
        };
        issues.push(NodeIssue {
            code: IssueCode::DeviceTainted,
            detail: format!(
                "DRA device taints keep new claims off: {}{eviction} (kubectl get resourceslices --field-selector spec.nodeName={} -o yaml)",
                tainted.join("; "),
                node.name
            ),
        });
    }
    if !node.is_ready() {
        issues.push(NodeIssue { code: IssueCode::NotReady, detail: "Ready condition is not True".into() });
    }
    if node.unschedulable {
        issues.push(NodeIssue { code: IssueCode::Cordoned, detail: "spec.unschedulable is true".into() });
    }
    if let Some(t) = node.defrag_reservation() {
        issues.push(NodeIssue {
            code: IssueCode::DefragReserved,
            detail: format!(
                "reserved by a kgpu defrag plan for {} (taint {}={}:{}); if no kgpu runs that plan now, release it: kubectl taint node {} {}-",
                t.value, t.key, t.value, t.effect.as_str(), node.name, t.key
            ),
        });
    }
    if let Some(detail) = black_hole(index, node, thresholds) {
        issues.push(NodeIssue { code: IssueCode::BlackHole, detail });
    }
    issues.extend(compute_domain_issue(index, node));
    issues.extend(mig_config_issue(node, index.now, thresholds));
    issues.extend(super::sharing::shared_memory_issue(index, node));
    issues.extend(upgrade_issue(node, index.now, thresholds));
    if let Some(AgentStatus::Unavailable(why)) = index.snap.devices.get(&node.name).map(|d| &d.status) {
        issues.push(NodeIssue { code: IssueCode::AgentUnavailable, detail: format!("agent: {why}") });
    }
    // Recent XIDs the device plugin acts on, as (GPU index, code), each once.
    let mut recent_xids: Vec<(u32, u32)> = devices
        .into_iter()
        .flat_map(|d| d.gpus.iter())
        .flat_map(|g| g.xids.iter().map(move |x| (g.index, x)))
        .filter(|(_, x)| index.now - x.at <= thresholds.xid_window)
        .filter(|(_, x)| !xid::lookup(x.code).is_some_and(|info| info.ignored_by_device_plugin))
        .map(|(gpu, x)| (gpu, x.code))
        .collect();
    recent_xids.dedup();
    if !recent_xids.is_empty() {
        let recent: Vec<String> = recent_xids
            .iter()
            .map(|&(gpu, code)| match xid::lookup(code) {
                Some(info) => format!("Xid {code} on GPU {gpu} ({})", info.description),
                None => format!("Xid {code} on GPU {gpu}"),
            })
            .collect();
        issues.push(NodeIssue { code: IssueCode::XidErrors, detail: recent.join("; ") });
    }
    let gpu_recent_xid = devices.map_or(0, |d| {
        d.gpus
            .iter()
            .filter(|g| g.health == GpuHealth::Healthy)
            .filter(|g| {
                g.xids.iter().any(|x| {
                    index.now - x.at <= thresholds.xid_window
                        && !xid::lookup(x.code).is_some_and(|info| info.ignored_by_device_plugin)
                })
            })
            .count() as u32
    });

    // Black holes are judged here as well as marked on the index (a lone
    // summary, as tests build it, has no marks).
    let accepts_work = node.is_ready() && !node.unschedulable && !issues.iter().any(|i| i.code == IssueCode::BlackHole);
    let replicas = supply.replicas;
    let buckets = supply.buckets(node, used, accepts_work);
    // DRA's GPUs are allocatable and allocated as the device plugin's are.
    let (dra_offered, dra_allocated) = supply.dra.map_or((0, 0), |d| (d.published - d.tainted, d.allocated));

    NodeSummary {
        buckets,
        replicas,
        dra: supply.dra,
        dra_mig: if supply.dra.is_some() { index.dra().mig_gpus(&node.name) } else { Vec::new() },
        name: node.name.clone(),
        ready: node.is_ready(),
        cordoned: node.unschedulable,
        product: node.gpu.product.clone().or_else(|| node_product(index, node)),
        driver: node_driver(index, node).map(|d| d.to_string()),
        hardware,
        gpu_allocatable: node.allocatable.gpu + dra_offered,
        gpu_allocated: used.gpu + dra_allocated,
        gpu_free: (node.allocatable.gpu + dra_offered).saturating_sub(used.gpu + dra_allocated),
        gpu_unhealthy,
        gpu_recent_xid,
        recent_xids,
        gpu_unadvertised,
        mig,
        gpu_pods,
        issues,
    }
}

fn black_hole(index: &Index<'_>, node: &Node, t: &Thresholds) -> Option<String> {
    if !node.is_ready() || node.allocatable.gpu == 0 && node.allocatable.mig_total() == 0 {
        return None;
    }
    let failed = index
        .failed_on(&node.name)
        .iter()
        .filter(|p| p.wants_gpu())
        .filter(|p| index.now - p.transitioned <= t.black_hole_window)
        .filter(|p| p.reason.as_ref().is_some_and(|r| r.as_str() == "UnexpectedAdmissionError"))
        .count();
    if failed < t.black_hole_min_failures {
        return None;
    }
    let running = index.pods_on(&node.name).iter().filter(|p| p.wants_gpu() && p.phase == PodPhase::Running).count();
    (failed >= t.black_hole_min_failures && failed > running).then(|| {
        format!(
            "Ready and advertising GPUs, but {failed} GPU pod(s) failed admission (UnexpectedAdmissionError) in the last {}; {running} running",
            crate::model::time::age(t.black_hole_window)
        )
    })
}

fn mig_config_issue(node: &Node, now: Timestamp, t: &Thresholds) -> Option<NodeIssue> {
    let state = node.operator.mig_config_state.as_ref()?.as_str();
    let config = node.operator.mig_config.as_ref().map_or("?", |c| c.as_str());
    let since = node.operator.mig_config_since.map(|s| now - s);
    match state {
        "failed" => Some(NodeIssue {
            code: IssueCode::MigConfigFailed,
            detail: format!("mig.config={config}: mig-manager reports failed"),
        }),
        "pending" | "rebooting" => {
            let wedged = since.is_some_and(|s| s >= t.mig_pending_wedged_after);
            let paused = if node.operator.paused_for_mig_change { "; GPU operands paused-for-mig-change" } else { "" };
            Some(NodeIssue {
                code: IssueCode::MigConfigPending,
                detail: format!(
                    "mig.config={config} {state} for {}{paused}{}",
                    since.map_or("an unknown time".into(), crate::model::time::age),
                    if wedged { " — looks wedged" } else { "" }
                ),
            })
        }
        _ => None,
    }
}

fn upgrade_issue(node: &Node, now: Timestamp, t: &Thresholds) -> Option<NodeIssue> {
    let state = node.operator.upgrade_state.as_ref()?.as_str();
    let since = node.operator.upgrade_since.map(|s| now - s);
    if state == "upgrade-failed" {
        return Some(NodeIssue {
            code: IssueCode::UpgradeFailed,
            detail: format!(
                "driver upgrade failed{}",
                since.map_or(String::new(), |s| format!(" {} ago", crate::model::time::age(s)))
            ),
        });
    }
    if state == "upgrade-done" {
        return None;
    }
    let secs = since?;
    let limit = if state == "upgrade-required" { t.upgrade_queued_stuck_after } else { t.upgrade_stuck_after };
    (secs >= limit).then(|| NodeIssue {
        code: IssueCode::UpgradeStuck,
        detail: format!("in {state} for {}", crate::model::time::age(secs)),
    })
}

/// Fleet-wide GPU totals: every physical GPU in one bucket
/// (`gpus = allocated + free + unavailable + unadvertised + unhealthy`),
/// MIG GPUs and time-sliced GPUs counted as GPUs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    /// Every GPU kgpu knows of.
    pub gpus: u64,
    /// In use (a pod, a MIG slice or a replica allocated on it).
    pub allocated: u64,
    /// Idle on nodes that accept work (Ready, not cordoned, not a black hole).
    pub free: u64,
    /// Part of `free` that no pending shape can use.
    pub stranded: u64,
    /// Idle on cordoned, NotReady or black-hole nodes.
    pub unavailable: u64,
    /// In hardware, not advertised.
    pub unadvertised: u64,
    /// Reported unhealthy by the agents.
    pub unhealthy: u64,
    /// Of `gpus`, those partitioned into MIG slices (mixed strategy).
    pub mig_gpus: u64,
    /// Time-slicing replicas advertised and allocated (not GPUs).
    pub replicas: (u64, u64),
    pub mig_slices: BTreeMap<Sym, (u64, u64)>,
}

pub fn totals(nodes: &[NodeSummary], stranded: u64) -> Totals {
    let mut t = Totals::default();
    for n in nodes {
        // Saturating: absurd inputs (a quantity near the bound on many
        // nodes) give a capped total, never a panic or a wrapped one.
        let b = n.buckets;
        let add = |sum: &mut u64, v: u64| *sum = sum.saturating_add(v);
        add(&mut t.gpus, b.total());
        add(&mut t.allocated, b.used);
        add(&mut t.free, b.free);
        add(&mut t.unavailable, b.unavailable);
        add(&mut t.unadvertised, b.unadvertised);
        add(&mut t.unhealthy, b.unhealthy);
        if n.replicas.is_none() {
            add(
                &mut t.mig_gpus,
                b.used.saturating_add(b.free).saturating_add(b.unavailable).saturating_sub(n.gpu_allocatable),
            );
        }
        if let Some(r) = n.replicas {
            add(&mut t.replicas.0, r.advertised);
            add(&mut t.replicas.1, r.allocated);
        }
        for m in &n.mig {
            let e = t.mig_slices.entry(m.profile.clone()).or_insert((0, 0));
            add(&mut e.0, m.allocatable);
            add(&mut e.1, m.allocated);
        }
    }
    // Stranded GPUs are free ones (counted in what the scheduler sees,
    // replicas included): never more than the free GPUs.
    t.stranded = stranded.min(t.free);
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::testing::{node, pod, snapshot};
    use crate::model::{TaintEffect, keys};

    #[test]
    fn a_reservation_left_by_a_killed_defrag_is_named_with_its_release() {
        let reserved = node("g1").gpus(8).taint(keys::DEFRAG_RESERVATION, "research.job-a", TaintEffect::NoSchedule);
        let other = node("g2").gpus(8).taint("dedicated", "infer", TaintEffect::NoSchedule);
        let snap = snapshot(vec![reserved.build(), other.build()], vec![], vec![], 0);
        let s = summarize(&Index::build(&snap, 0), &Thresholds::default());
        let issue = s[0].issues.iter().find(|i| i.code == IssueCode::DefragReserved).expect("reserved");
        assert!(issue.detail.contains("for research.job-a"), "{}", issue.detail);
        assert!(issue.detail.contains("kubectl taint node g1 kgpu.dev/defrag-"), "{}", issue.detail);
        assert!(!IssueCode::DefragReserved.is_fault());
        assert!(!s[1].has(IssueCode::DefragReserved));
    }

    /// The issue's node: `capacity nvidia.com/gpu: 16, allocatable: 0`, no
    /// GFD, no agent. It was a 0-GPU node with no issue.
    #[test]
    fn gpus_in_capacity_but_not_allocatable_are_unhealthy_in_the_plugin() {
        let n = node("g1").advertise("nvidia.com/gpu", 16).allocatable("nvidia.com/gpu", 0).build();
        let snap = snapshot(vec![n], vec![], vec![], 0);
        let s = summarize(&Index::build(&snap, 0), &Thresholds::default());
        assert_eq!(s[0].hardware, Some(16));
        assert_eq!((s[0].gpu_unhealthy, s[0].gpu_unadvertised, s[0].gpu_allocatable), (16, 0, 0));
        let issue = s[0].issues.iter().find(|i| i.code == IssueCode::DevicePluginUnhealthy).expect("issue");
        assert!(issue.detail.contains("capacity 16 nvidia.com/gpu, allocatable 0"), "{}", issue.detail);
        assert!(!s[0].has(IssueCode::DevicePluginNotAdvertising));
        // Time-slicing counts replicas in both: no GPU is withheld by the difference.
        let shared = node("g2").gpus(16).allocatable("nvidia.com/gpu", 8).label(keys::GPU_REPLICAS, "4").build();
        assert_eq!(shared.withheld_gpus(), 0);
    }

    #[test]
    fn silent_device_plugin_is_flagged() {
        // plugin-crash: 8 GPUs in hardware (GFD gpu.count=8), 0 allocatable
        let snap = snapshot(vec![node("g1").hardware(8).build()], vec![], vec![], 0);
        let index = Index::build(&snap, 0);
        let s = summarize(&index, &Thresholds::default());
        assert_eq!(s[0].hardware, Some(8));
        assert_eq!(s[0].gpu_allocatable, 0);
        assert!(s[0].has(IssueCode::DevicePluginNotAdvertising), "{:?}", s[0].issues);
    }

    #[test]
    fn one_unhealthy_gpu_of_eight_is_seven_advertised() {
        // describe-node-xid79-7-of-8-allocatable.txt: capacity and allocatable 7, 8 in hardware
        let snap = snapshot(vec![node("g1").gpus(7).label("nvidia.com/gpu.count", "8").build()], vec![], vec![], 0);
        let index = Index::build(&snap, 0);
        let s = summarize_node(&index, index.snap.nodes.values().next().unwrap(), &Thresholds::default());
        assert_eq!(s.gpu_unadvertised, 1);
        assert!(s.issues[0].detail.contains("8 GPU(s) in hardware, 7 advertised"));
    }

    #[test]
    fn a_time_sliced_node_counts_its_physical_gpus_not_its_replicas() {
        // GFD under time-slicing (renameByDefault false): 8 GPUs, 4 replicas
        // each, advertised as 32 nvidia.com/gpu, product -SHARED; 6 replicas used.
        let n = node("ts")
            .gpus(32)
            .hardware(8)
            .product("NVIDIA-H100-80GB-HBM3-SHARED")
            .label("nvidia.com/gpu.replicas", "4")
            .label("nvidia.com/mig.strategy", "single")
            .build();
        let pods: Vec<crate::model::Pod> =
            (0..6).map(|i| pod(&format!("p{i}")).gpus(1).on("ts").running().build()).collect();
        let snap = snapshot(vec![n], pods, vec![], 0);
        let index = Index::build(&snap, 0);
        let s = summarize(&index, &Thresholds::default());
        assert_eq!(s[0].buckets.total(), 8, "{:?}", s[0].buckets);
        // 6 replicas fill 2 GPUs (at least); the rest is free.
        assert_eq!((s[0].buckets.used, s[0].buckets.free), (2, 6));
        assert!(!s[0].has(IssueCode::DevicePluginNotAdvertising));
    }

    #[test]
    fn mixed_mig_nodes_are_not_flagged() {
        // describe-node-dgx-h100-mig-mixed-ocp.txt: gpu 0, mig-1g.10gb 16, mig-2g.20gb 8, mig-3g.40gb 8
        let n = node("dgx").hardware(8).mig("1g.10gb", 16).mig("2g.20gb", 8).mig("3g.40gb", 8).build();
        let snap = snapshot(vec![n], vec![], vec![], 0);
        let index = Index::build(&snap, 0);
        let s = summarize(&index, &Thresholds::default());
        assert!(!s[0].has(IssueCode::DevicePluginNotAdvertising));
        assert_eq!(s[0].mig.len(), 3);
    }

    #[test]
    fn black_hole_node_rejects_every_gpu_pod() {
        let failed = |i: usize| {
            pod(&format!("p{i}"))
                .gpus(1)
                .on("bh")
                .failed("UnexpectedAdmissionError", "Pod was rejected: Allocate failed due to requested number of devices unavailable for nvidia.com/gpu. Requested: 1, Available: 0, which is unexpected")
                .transitioned(1000 - i as i64 * 60)
                .build()
        };
        let snap = snapshot(vec![node("bh").gpus(8).build()], (0..5).map(failed).collect(), vec![], 1000);
        let index = Index::build(&snap, 1000);
        let s = summarize(&index, &Thresholds::default());
        assert!(s[0].has(IssueCode::BlackHole), "{:?}", s[0].issues);
        assert_eq!(s[0].gpu_free, 8, "failed pods hold nothing");
    }

    #[test]
    fn totals_split_free_by_schedulability() {
        let snap = snapshot(
            vec![node("a").gpus(8).build(), node("b").gpus(8).cordoned().build()],
            vec![pod("p").gpus(3).on("a").running().build()],
            vec![],
            0,
        );
        let index = Index::build(&snap, 0);
        let s = summarize(&index, &Thresholds::default());
        let t = totals(&s, 0);
        assert_eq!((t.gpus, t.allocated, t.free, t.unavailable), (16, 3, 5, 8));
    }
}
