//! What the simulated agents and dcgm-exporter say about utilization: each
//! running GPU pod is given the node's next free GPUs (or a MIG instance of
//! its profile), busy at a level of its own that wanders a little per
//! reading; the pods a scenario names as idle holders read 0–2%. As on a
//! real cluster, a MIG node is read by dcgm-exporter (NVML measures no MIG
//! instance, so an agent could not say), which keeps no idle-since: kgpu
//! counts from its first reading there. Whole-GPU nodes are read by the
//! agents, which say since when a GPU has been idle.

use std::collections::BTreeMap;

use crate::model::{
    DeviceReading, MigMode, MigSlice, NodeDevices, NodeUsage, Pod, PodKey, Sym, Timestamp, UsageSource,
};

/// The simulated agents report this often (seconds), as real ones do.
pub const READING_EVERY: i64 = 10;

/// A number in `0..n` from a name and a time step: the same every run.
fn jitter(name: &str, step: i64, n: u64) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes().chain(step.to_le_bytes()) {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h % n.max(1)
}

/// How busy a working pod is: training near full, serving in the middle.
fn busy_level(pod: &Pod, step: i64) -> f32 {
    let training = pod.group.is_some() || pod.workload.is_some() || pod.owner_kind() == Some("Job");
    let base = if training { 88 } else { 45 };
    let name = format!("{}/{}", pod.namespace, pod.name);
    (base + jitter(&name, 0, 10) as i64 + jitter(&name, step, 9) as i64 - 4).clamp(0, 100) as f32
}

/// What the scenario says about a node's pods: who is idle since when, what
/// memory they use, and how many pods share a GPU (time-slicing replicas).
pub struct Said<'a> {
    pub idle: &'a BTreeMap<PodKey, Timestamp>,
    pub memory: &'a BTreeMap<PodKey, u64>,
    pub replicas: u32,
    /// GPUs (by UUID) allocated to a running pod's DRA claims.
    pub dra: &'a BTreeMap<Sym, &'a Pod>,
}

pub fn reading(devices: &NodeDevices, pods: &[&Pod], said: &Said<'_>, now: Timestamp) -> NodeUsage {
    if said.replicas > 1 {
        return shared_reading(devices, pods, said, now);
    }
    let idle = said.idle;
    let step = now / READING_EVERY;
    let mig = devices.gpus.iter().any(|g| g.mig_mode == MigMode::Enabled);
    let source = if mig { UsageSource::DcgmExporter } else { UsageSource::Agent };
    let mut out = Vec::new();
    // GPUs a DRA claim holds are busy as their pod is; the kubelet's
    // device-plugin view (what the agent reads) names no holder for them:
    // the cockpit finds it in the claims.
    for g in devices.gpus.iter().filter(|g| g.mig_mode == MigMode::Disabled) {
        if let Some(pod) = said.dra.get(&g.uuid) {
            let key = pod.key();
            let name = key.to_string();
            let idle_since = idle.get(&key).copied().filter(|&s| s <= now);
            let busy = if idle_since.is_some() { jitter(&name, step, 3) as f32 } else { busy_level(pod, step) };
            out.push(DeviceReading {
                gpu: g.uuid.clone(),
                index: g.index,
                slice: None,
                holders: Box::new([]),
                busy_pct: Some(busy),
                memory_used_mib: Some(
                    said.memory.get(&key).copied().unwrap_or_else(|| 20_000 + jitter(&name, 0, 40) * 1000),
                ),
                idle_since: idle_since.filter(|_| source == UsageSource::Agent),
            });
        }
    }
    let mut whole = devices.gpus.iter().filter(|g| g.mig_mode == MigMode::Disabled && !said.dra.contains_key(&g.uuid));
    let mut slices: Vec<(Sym, u32, MigSlice, bool)> = devices
        .gpus
        .iter()
        .filter(|g| g.mig_mode == MigMode::Enabled)
        .flat_map(|g| {
            g.instances.iter().enumerate().map(move |(n, i)| {
                (
                    g.uuid.clone(),
                    g.index,
                    MigSlice { profile: i.profile.clone(), id: u32::try_from(n).unwrap_or(0) + 1 },
                    false,
                )
            })
        })
        .collect();
    let mut held_whole = Vec::new();
    for pod in pods {
        let key = pod.key();
        let idle_since = idle.get(&key).copied().filter(|&s| s <= now);
        let name = key.to_string();
        let busy = if idle_since.is_some() { jitter(&name, step, 3) as f32 } else { busy_level(pod, step) };
        let idle_since = idle_since.filter(|_| source == UsageSource::Agent);
        let memory = said.memory.get(&key).copied().unwrap_or_else(|| 20_000 + jitter(&name, 0, 40) * 1000);
        let read = |gpu: Sym, index: u32, slice: Option<MigSlice>| DeviceReading {
            gpu,
            index,
            slice,
            holders: Box::new([key.clone()]),
            busy_pct: Some(busy),
            memory_used_mib: Some(memory),
            idle_since,
        };
        for _ in 0..pod.requests.gpu {
            if let Some(g) = whole.next() {
                held_whole.push(g.uuid.clone());
                out.push(read(g.uuid.clone(), g.index, None));
            }
        }
        for (profile, count) in pod.requests.mig() {
            for _ in 0..count {
                if let Some(s) = slices.iter_mut().find(|s| !s.3 && s.2.profile.as_str() == profile) {
                    s.3 = true;
                    // Unsaid, a slice holds a share of what a whole GPU would.
                    let on_slice = if said.memory.contains_key(&key) { memory } else { memory / 8 };
                    out.push(DeviceReading {
                        memory_used_mib: Some(on_slice),
                        ..read(s.0.clone(), s.1, Some(s.2.clone()))
                    });
                }
            }
        }
    }
    // Free devices read idle and empty.
    let free = |gpu: Sym, index: u32, slice: Option<MigSlice>| DeviceReading {
        gpu,
        index,
        slice,
        holders: Box::new([]),
        busy_pct: Some(0.0),
        memory_used_mib: Some(0),
        idle_since: None,
    };
    out.extend(whole.map(|g| free(g.uuid.clone(), g.index, None)));
    out.extend(slices.into_iter().filter(|s| !s.3).map(|s| free(s.0, s.1, Some(s.2))));
    NodeUsage { problem: None, node: devices.node.clone(), source, at: now, devices: out.into_boxed_slice() }
}

/// A time-sliced node: each GPU's replicas go to pods in turn, and a GPU's
/// reading lists every pod on it with their memory summed (NVML sees one
/// device; it cannot tell the pods' shares of compute apart).
fn shared_reading(devices: &NodeDevices, pods: &[&Pod], said: &Said<'_>, now: Timestamp) -> NodeUsage {
    let step = now / READING_EVERY;
    let per_gpu = said.replicas as usize;
    let mut slots: Vec<(PodKey, f32, u64)> = Vec::new();
    for pod in pods {
        let key = pod.key();
        let name = key.to_string();
        let busy =
            if said.idle.contains_key(&key) { jitter(&name, step, 3) as f32 } else { busy_level(pod, step) / 2.0 };
        let memory = said.memory.get(&key).copied().unwrap_or(8_000);
        for _ in 0..pod.requests.gpu {
            slots.push((key.clone(), busy, memory));
        }
    }
    let out = devices
        .gpus
        .iter()
        .enumerate()
        .map(|(i, g)| {
            let on: &[(PodKey, f32, u64)] = slots.get(i * per_gpu..((i + 1) * per_gpu).min(slots.len())).unwrap_or(&[]);
            let memory: u64 = on.iter().map(|s| s.2).sum();
            DeviceReading {
                gpu: g.uuid.clone(),
                index: g.index,
                slice: None,
                holders: on.iter().map(|s| s.0.clone()).collect(),
                busy_pct: Some(on.iter().map(|s| s.1).sum::<f32>().min(100.0)),
                memory_used_mib: Some(memory.min(g.memory_mib)),
                idle_since: None,
            }
        })
        .collect();
    NodeUsage { problem: None, node: devices.node.clone(), source: UsageSource::Agent, at: now, devices: out }
}
