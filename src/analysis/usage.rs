//! Who holds GPUs and does nothing with them: per pod and per workload,
//! the GPUs held, how busy they are, and for how long they have been idle,
//! from the utilization the agents or dcgm-exporter report.
//!
//! Per node one reporter is believed: dcgm-exporter where it reports the
//! node (it measures MIG instances and names the pods itself), else the
//! agent. GPU-hours held idle are GPU equivalents × idle time: a MIG
//! instance counts its compute slices out of its GPU's, a GPU shared by n pods 1/n.

use std::collections::{BTreeMap, HashMap};

use crate::model::usage::{DeviceHistory, IDLE_BELOW_PCT, WINDOW_SECONDS};
use crate::model::{Gang, GangKey, Pod, PodKey, Snapshot, Sym, Timestamp, UsageSource};
use crate::reference::mig;

/// A workload: what owns the pods, as an SRE names it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WorkloadRef {
    pub kind: Sym,
    pub namespace: Sym,
    pub name: Sym,
}

impl std::fmt::Display for WorkloadRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}/{}", self.kind, self.namespace, self.name)
    }
}

/// One device a pod holds.
#[derive(Clone, Debug, PartialEq)]
pub struct HeldDevice {
    pub gpu: Sym,
    pub index: u32,
    /// The MIG profile, when a slice.
    pub profile: Option<Sym>,
    /// Pods sharing the device (time-slicing, MPS), this one included.
    pub sharers: usize,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Holder {
    pub pod: PodKey,
    pub node: Sym,
    pub source: UsageSource,
    pub devices: Vec<HeldDevice>,
    /// GPU equivalents held.
    pub gpus: f64,
    /// The last reading's busy percent (mean over its devices).
    pub recent_pct: Option<f32>,
    /// Mean busy percent over the window kept.
    pub mean_pct: Option<f32>,
    pub memory_used_mib: Option<u64>,
    /// Idle (every device under the threshold) for this long, as of the last reading.
    pub idle_seconds: Option<i64>,
    /// The idle time began before anyone watched: it is at least this.
    pub idle_at_least: bool,
    pub idle_gpu_hours: f64,
    pub workload: Option<WorkloadRef>,
    /// The gang (Kueue Workload, Volcano PodGroup) the pod is a member of.
    pub gang: Option<GangKey>,
    /// The pod's queue, else its gang's.
    pub queue: Option<Sym>,
    /// Since the pod was created.
    pub age_seconds: Option<i64>,
    /// The pod is not among the API server's pods kgpu reads (another
    /// namespace than the one watched, or gone since the reading).
    pub unknown_to_api: bool,
}

impl Holder {
    pub fn is_idle(&self) -> bool {
        self.idle_seconds.is_some()
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct WorkloadUse {
    /// `None`: pods without a controller, each its own row.
    pub workload: Option<WorkloadRef>,
    /// The pod, for a row of a pod without a controller.
    pub lone_pod: Option<PodKey>,
    pub pods: usize,
    pub idle_pods: usize,
    pub gpus: f64,
    /// GPU equivalents its idle pods hold: what reclaiming them frees.
    pub idle_gpus: f64,
    /// Its pods' queue (the first one known).
    pub queue: Option<Sym>,
    /// GPU-weighted mean of its pods' means.
    pub mean_pct: Option<f32>,
    pub idle_gpu_hours: f64,
    /// Idle for this long when every pod is idle (the shortest of them).
    pub idle_seconds: Option<i64>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Utilization {
    /// Every pod that holds a reported device: idle ones first, most
    /// idle GPU-hours first; then the busy ones, least busy first.
    pub holders: Vec<Holder>,
    pub workloads: Vec<WorkloadUse>,
    /// Nodes whose usage is read, per reporter.
    pub nodes_by_source: BTreeMap<UsageSource, usize>,
    /// GPU nodes with no reporter.
    pub nodes_unreported: usize,
    /// Devices reported without a holder though busy or using memory: the
    /// exporter's pod mapping is off, or a process outside Kubernetes.
    pub unattributed_busy: usize,
    pub gpus_held: f64,
    pub gpus_idle: f64,
    pub idle_gpu_hours: f64,
    /// Reporters that did not answer at their last reading: node and why.
    /// Their nodes fall back to the other source, if any.
    pub unreadable: Vec<(Sym, UsageSource, String)>,
}

impl Utilization {
    pub fn has_source(&self) -> bool {
        !self.nodes_by_source.is_empty()
    }

    /// `agent`, `dcgm-exporter`, both joined by `+`, or `none`.
    pub fn source_label(&self) -> String {
        if self.nodes_by_source.is_empty() {
            return "none".into();
        }
        self.nodes_by_source.keys().map(|s| s.as_str()).collect::<Vec<_>>().join("+")
    }
}

/// The window the means are over, for the views' headings.
pub fn window_minutes() -> i64 {
    WINDOW_SECONDS / 60
}

pub fn idle_below_pct() -> f32 {
    IDLE_BELOW_PCT
}

/// GPU equivalents of one device: a MIG instance's compute slices out of
/// its GPU's (7; 4 on an A30), from the product's geometry where known,
/// else read from the profile's name out of 7.
fn equivalents(profile: Option<&Sym>, geometry: Option<&mig::Geometry>) -> f64 {
    profile.map_or(1.0, |p| mig::compute_share(p.as_str(), geometry))
}

/// The workload a pod belongs to: the top-level owner its controllers
/// name, its gang, or its controller (a ReplicaSet stands for its Deployment).
pub fn workload_of(pod: &Pod) -> Option<WorkloadRef> {
    let of = |kind: &str, name: &str| WorkloadRef {
        kind: Sym::new(kind),
        namespace: pod.namespace.clone(),
        name: Sym::new(name),
    };
    if let Some(w) = &pod.workload {
        return Some(of(w.kind.as_str(), w.name.as_str()));
    }
    if let Some(group) = &pod.group {
        return Some(of("Gang", group.as_str()));
    }
    let owner = pod.owner.as_ref()?;
    if owner.kind.as_str() == "ReplicaSet"
        && let Some(deployment) = deployment_of(owner.name.as_str())
    {
        return Some(of("Deployment", deployment));
    }
    Some(of(owner.kind.as_str(), owner.name.as_str()))
}

/// `name-<pod-template-hash>` → `name`: the hash is a 32-bit number written
/// in Kubernetes' safe alphabet (no vowels, no 0, 1, 3), so 5–10 characters
/// but for one hash in 400,000.
fn deployment_of(replica_set: &str) -> Option<&str> {
    let (name, hash) = replica_set.rsplit_once('-')?;
    let alphabet = |c: char| "bcdfghjklmnpqrstvwxz2456789".contains(c);
    (!name.is_empty() && (5..=10).contains(&hash.len()) && hash.chars().all(alphabet)).then_some(name)
}

/// The reporter believed for each node: dcgm-exporter where it has
/// devices for it, else the agent.
fn believed(snap: &Snapshot) -> BTreeMap<Sym, &crate::model::NodeUsageHistory> {
    let mut out: BTreeMap<Sym, &crate::model::NodeUsageHistory> = BTreeMap::new();
    for ((source, node), history) in &snap.usage {
        if history.devices.is_empty() || history.problem.is_some() {
            continue;
        }
        let better = match out.get(node) {
            None => true,
            Some(h) => *source == UsageSource::DcgmExporter && h.source != UsageSource::DcgmExporter,
        };
        if better {
            out.insert(node.clone(), &**history);
        }
    }
    out
}

struct Acc<'a> {
    node: Sym,
    source: UsageSource,
    devices: Vec<(&'a DeviceHistory, usize)>,
}

pub fn analyze(snap: &Snapshot, now: Timestamp) -> Utilization {
    analyze_with(snap, now, &crate::analysis::dra::DraIndex::build(snap))
}

/// [`analyze`] with the snapshot's DRA index built already (the full
/// analysis's: building it is a walk of every slice and claim).
pub fn analyze_with(snap: &Snapshot, now: Timestamp, dra: &crate::analysis::dra::DraIndex<'_>) -> Utilization {
    let believed = believed(snap);
    let mut util = Utilization {
        unreadable: snap
            .usage
            .values()
            .filter_map(|h| h.problem.as_ref().map(|p| (h.node.clone(), h.source, p.to_string())))
            .collect(),
        ..Utilization::default()
    };
    for h in believed.values() {
        *util.nodes_by_source.entry(h.source).or_default() += 1;
    }
    // GPU nodes either way: a DRA-only node advertises no nvidia.com/gpu.
    let gpu_node = |n: &crate::model::Node| n.is_gpu_node() || dra.gpus(&n.name).is_some();
    util.nodes_unreported = snap.nodes.values().filter(|n| gpu_node(n) && !believed.contains_key(&n.name)).count();
    let mut by_pod: BTreeMap<PodKey, Acc<'_>> = BTreeMap::new();
    // GPUs held through DRA claims: the kubelet's device-plugin view (what
    // the agent reads) does not name their pods; the claims do.
    let dra_holders = dra.whole_gpu_holders();
    for history in believed.values() {
        for device in history.devices.iter() {
            let r = &device.reading;
            let named = match (&r.slice, r.holders.is_empty()) {
                (None, true) => dra_holders.get(&r.gpu).map_or(&[][..], Vec::as_slice),
                _ => &r.holders[..],
            };
            // A finished pod the kubelet still lists holds nothing.
            let holders: Vec<&PodKey> =
                named.iter().filter(|k| snap.pods.get(*k).is_none_or(|p| !p.phase.is_terminal())).collect();
            if holders.is_empty() {
                let busy = r.busy_pct.is_some_and(|b| b >= IDLE_BELOW_PCT);
                if busy || r.memory_used_mib.is_some_and(|m| m > 0) {
                    util.unattributed_busy += 1;
                }
                continue;
            }
            for key in &holders {
                by_pod
                    .entry((*key).clone())
                    .or_insert_with(|| Acc { node: history.node.clone(), source: history.source, devices: Vec::new() })
                    .devices
                    .push((device, holders.len()));
            }
        }
    }
    let gangs = gangs_by_member_name(snap);
    for (key, acc) in by_pod {
        util.holders.push(holder(snap, now, &gangs, key, acc));
    }
    util.holders.sort_by(|a, b| {
        b.is_idle()
            .cmp(&a.is_idle())
            .then(b.idle_gpu_hours.total_cmp(&a.idle_gpu_hours))
            .then(a.mean_pct.unwrap_or(f32::MAX).total_cmp(&b.mean_pct.unwrap_or(f32::MAX)))
            .then(b.gpus.total_cmp(&a.gpus))
            .then(a.pod.cmp(&b.pod))
    });
    util.gpus_held = util.holders.iter().map(|h| h.gpus).sum();
    util.gpus_idle = util.holders.iter().filter(|h| h.is_idle()).map(|h| h.gpus).sum();
    util.idle_gpu_hours = util.holders.iter().map(|h| h.idle_gpu_hours).sum();
    util.workloads = workloads(&util.holders);
    util
}

/// Gangs by what their member pods name them by: a Volcano group name,
/// or the owner a Kueue Workload shares with its pods (the Job, the JobSet).
fn gangs_by_member_name(snap: &Snapshot) -> HashMap<(Sym, Sym), &Gang> {
    let mut out = HashMap::new();
    for g in snap.gangs.values() {
        out.insert((g.namespace.clone(), Sym::new(&g.name)), &**g);
        if let Some(o) = &g.owner {
            out.insert((g.namespace.clone(), o.name.clone()), &**g);
        }
    }
    out
}

fn gang_of<'a>(pod: &Pod, gangs: &HashMap<(Sym, Sym), &'a Gang>) -> Option<&'a Gang> {
    let names =
        [pod.group.clone(), pod.workload.as_ref().map(|w| w.name.clone()), pod.owner.as_ref().map(|o| o.name.clone())];
    names.into_iter().flatten().find_map(|n| gangs.get(&(pod.namespace.clone(), n)).copied())
}

fn holder(snap: &Snapshot, now: Timestamp, gangs: &HashMap<(Sym, Sym), &Gang>, key: PodKey, acc: Acc<'_>) -> Holder {
    let pod = snap.pods.get(&key);
    let gang = pod.and_then(|p| gang_of(p, gangs));
    let geometry = snap
        .nodes
        .get(&acc.node)
        .and_then(|n| n.gpu.product.clone())
        .and_then(|p| mig::geometry_for_product(p.as_str()));
    let gpus: f64 = acc
        .devices
        .iter()
        .map(|(d, n)| equivalents(d.reading.slice.as_ref().map(|s| &s.profile), geometry) / *n as f64)
        .sum();
    let mean = |values: Vec<f32>| (!values.is_empty()).then(|| values.iter().sum::<f32>() / values.len() as f32);
    let recent = mean(acc.devices.iter().filter_map(|(d, _)| d.reading.busy_pct).collect());
    // Since the pod started: the device's readings before it are another's.
    let since = pod.map_or(0, |p| p.transitioned);
    let mean_pct = mean(acc.devices.iter().filter_map(|(d, _)| d.mean_busy_pct_since(since)).collect());
    let memory: Vec<u64> = acc.devices.iter().filter_map(|(d, _)| d.reading.memory_used_mib).collect();
    // Idle only while every device is: as long as the shortest run.
    let idle =
        acc.devices.iter().map(|(d, _)| d.idle_seconds().map(|s| (s, d.idle_at_least))).collect::<Option<Vec<_>>>();
    let mut shortest = idle.as_ref().and_then(|runs| runs.iter().min_by_key(|(s, _)| *s).copied());
    // A reporter's idle clock is per GPU: a pod given a GPU idle before it
    // started has been idle since it started, not longer.
    let last = acc.devices.iter().filter_map(|(d, _)| d.last_reading_at()).max();
    if let (Some((seconds, _)), Some(pod), Some(last)) = (shortest, pod, last)
        && pod.transitioned > 0
        && last - pod.transitioned <= seconds
    {
        shortest = Some(((last - pod.transitioned).max(0), false));
    }
    Holder {
        node: acc.node,
        source: acc.source,
        devices: acc
            .devices
            .iter()
            .map(|(d, n)| HeldDevice {
                gpu: d.reading.gpu.clone(),
                index: d.reading.index,
                profile: d.reading.slice.as_ref().map(|s| s.profile.clone()),
                sharers: *n,
            })
            .collect(),
        gpus,
        recent_pct: recent,
        mean_pct,
        memory_used_mib: (!memory.is_empty()).then(|| memory.iter().sum()),
        idle_seconds: shortest.map(|(s, _)| s),
        idle_at_least: shortest.is_some_and(|(_, at_least)| at_least),
        idle_gpu_hours: shortest.map_or(0.0, |(s, _)| gpus * s as f64 / 3600.0),
        workload: pod.and_then(|p| workload_of(p)),
        queue: pod.and_then(|p| p.queue.clone()).or_else(|| gang.and_then(|g| g.queue.clone())),
        gang: gang.map(|g| g.key()),
        age_seconds: pod.filter(|p| p.created > 0).map(|p| (now - p.created).max(0)),
        unknown_to_api: pod.is_none(),
        pod: key,
    }
}

fn workloads(holders: &[Holder]) -> Vec<WorkloadUse> {
    let mut groups: BTreeMap<Option<WorkloadRef>, Vec<&Holder>> = BTreeMap::new();
    let mut loose = Vec::new();
    for h in holders {
        match &h.workload {
            Some(w) => groups.entry(Some(w.clone())).or_default().push(h),
            None => loose.push(h),
        }
    }
    let mut out: Vec<WorkloadUse> = groups
        .into_iter()
        .map(|(w, hs)| summarize(w, &hs))
        .chain(loose.into_iter().map(|h| summarize(None, &[h])))
        .collect();
    out.sort_by(|a, b| b.idle_gpu_hours.total_cmp(&a.idle_gpu_hours).then(b.gpus.total_cmp(&a.gpus)));
    out
}

fn summarize(workload: Option<WorkloadRef>, pods: &[&Holder]) -> WorkloadUse {
    let gpus: f64 = pods.iter().map(|h| h.gpus).sum();
    let weighted: Vec<(f64, f32)> = pods.iter().filter_map(|h| h.mean_pct.map(|m| (h.gpus, m))).collect();
    let weight: f64 = weighted.iter().map(|(g, _)| g).sum();
    let idle: Option<Vec<i64>> = pods.iter().map(|h| h.idle_seconds).collect();
    WorkloadUse {
        lone_pod: if workload.is_none() { pods.first().map(|h| h.pod.clone()) } else { None },
        workload,
        pods: pods.len(),
        idle_pods: pods.iter().filter(|h| h.is_idle()).count(),
        gpus,
        idle_gpus: pods.iter().filter(|h| h.is_idle()).map(|h| h.gpus).sum(),
        queue: pods.iter().find_map(|h| h.queue.clone()),
        mean_pct: (weight > 0.0)
            .then(|| (weighted.iter().map(|(g, m)| g * f64::from(*m)).sum::<f64>() / weight) as f32),
        idle_gpu_hours: pods.iter().map(|h| h.idle_gpu_hours).sum(),
        idle_seconds: idle.and_then(|runs| runs.into_iter().min()),
    }
}

/// Idle time per pod that holds GPUs idle: what the defragmentation plan
/// weighs (work done while idle is not work lost).
pub fn idle_by_pod(snap: &Snapshot, now: Timestamp) -> HashMap<PodKey, i64> {
    analyze(snap, now).holders.into_iter().filter_map(|h| Some((h.pod, h.idle_seconds?))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replica_set_stands_for_its_deployment_only_with_a_template_hash() {
        assert_eq!(
            deployment_of("text-embedding-predictor-00008-deployment-57946f6c67"),
            Some("text-embedding-predictor-00008-deployment")
        );
        assert_eq!(deployment_of("vllm-medgemma-4b-it-d599b4c99"), Some("vllm-medgemma-4b-it"));
        assert_eq!(deployment_of("my-rs"), None, "a vowel: not a hash");
        assert_eq!(deployment_of("plain"), None);
        assert_eq!(deployment_of("rerank-2g"), None, "too short for a hash");
    }

    #[test]
    fn mig_instances_count_their_compute_slices() {
        let p = |s: &str| equivalents(Some(&Sym::new(s)), None);
        assert_eq!(equivalents(None, None), 1.0);
        assert!((p("1g.10gb") - 1.0 / 7.0).abs() < 1e-9);
        assert!((p("3g.40gb") - 3.0 / 7.0).abs() < 1e-9);
        assert_eq!(p("7g.80gb"), 1.0);
        assert!((p("weird") - 1.0 / 7.0).abs() < 1e-9);
        // The product's geometry knows its compute slices: an A30 has 4.
        let a30 = mig::geometry_for_product("NVIDIA-A30");
        assert!(a30.is_some());
        assert_eq!(equivalents(Some(&Sym::new("2g.12gb")), a30), 0.5);
        assert_eq!(equivalents(Some(&Sym::new("1g.6gb")), a30), 0.25);
        let h100 = mig::geometry_for_product("NVIDIA-H100-80GB-HBM3");
        assert!((equivalents(Some(&Sym::new("3g.40gb")), h100) - 3.0 / 7.0).abs() < 1e-9);
    }
}
