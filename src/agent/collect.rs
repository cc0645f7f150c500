//! Puts a snapshot together from what the agent has seen: the backend's
//! last reading, the XIDs since it started (bounded per GPU), and the
//! kubelet's device assignments. Pure: time is an argument.

use std::collections::{HashMap, VecDeque};

use super::backend::{Reading, XidSeen};
use super::wire::{AgentSnapshot, Availability, GpuReport, PodRef, VERSION, XidReport};
use crate::model::usage::IDLE_BELOW_PCT;
use crate::reference::xid;

/// XIDs kept per GPU (the newest).
pub const XIDS_PER_GPU: usize = 32;
/// Pods listed per GPU (time-slicing can share a GPU with many).
pub const PODS_PER_GPU: usize = 64;
/// A critical XID counts against a GPU's health for this long.
pub const XID_HEALTH_WINDOW: i64 = 24 * 3600;

#[derive(Default)]
pub struct XidHistory {
    per_gpu: HashMap<String, VecDeque<XidReport>>,
}

impl XidHistory {
    pub fn record(&mut self, seen: &XidSeen, at: i64) -> XidReport {
        let report = XidReport {
            code: seen.code,
            at,
            meaning: xid::lookup(seen.code).map(|x| format!("{}: {}", x.mnemonic, x.description)),
        };
        let list = self.per_gpu.entry(seen.gpu.clone()).or_default();
        if list.len() == XIDS_PER_GPU {
            list.pop_front();
        }
        list.push_back(report.clone());
        report
    }

    pub fn of(&self, gpu: &str) -> Vec<XidReport> {
        self.per_gpu.get(gpu).map(|l| l.iter().cloned().collect()).unwrap_or_default()
    }
}

/// Since when each GPU has been idle (under [`IDLE_BELOW_PCT`] busy), as
/// this agent has seen it: the cockpit's own history begins only when it
/// starts, the agent's when the node's agent did.
#[derive(Default)]
pub struct IdleClock {
    since: HashMap<String, i64>,
}

impl IdleClock {
    pub fn observe(&mut self, reading: &Reading, now: i64) {
        self.since.retain(|uuid, _| reading.gpus.iter().any(|g| &g.uuid == uuid));
        for g in &reading.gpus {
            match g.utilization_pct {
                Some(u) if (u as f32) < IDLE_BELOW_PCT => {
                    self.since.entry(g.uuid.clone()).or_insert(now);
                }
                Some(_) => {
                    self.since.remove(&g.uuid);
                }
                None => {}
            }
        }
    }

    pub fn of(&self, gpu: &str) -> Option<i64> {
        self.since.get(gpu).copied()
    }
}

/// `healthy`, or the first reason the GPU is not, as the device plugin
/// would judge it (critical XIDs it does not ignore) plus memory faults.
pub fn health(gpu: &GpuReport, xids: &[XidReport], now: i64) -> String {
    let critical = xids.iter().rev().find(|x| {
        now - x.at <= XID_HEALTH_WINDOW && xid::lookup(x.code).is_none_or(|entry| !entry.ignored_by_device_plugin)
    });
    if let Some(x) = critical {
        return format!(
            "unhealthy: Xid {}{} {} ago",
            x.code,
            x.meaning.as_deref().map_or(String::new(), |m| format!(" ({m})")),
            crate::model::time::age(now - x.at)
        );
    }
    if gpu.retired_pages.as_ref().is_some_and(|r| r.pending) {
        return "unhealthy: retired pages pending (reset the GPU to retire them)".into();
    }
    if gpu.remapped_rows.as_ref().is_some_and(|r| r.failure) {
        return "unhealthy: row remapping failed (the GPU needs service)".into();
    }
    if gpu.remapped_rows.as_ref().is_some_and(|r| r.pending) {
        return "unhealthy: row remapping pending (reset the GPU)".into();
    }
    "healthy".into()
}

/// Device ID as the device plugin reports it → the pods holding it. IDs
/// are UUIDs (`GPU-…`, `MIG-…`) or indices, with a `::N` replica suffix
/// under time-slicing.
pub type DeviceMap = HashMap<String, Vec<PodRef>>;

pub fn device_map(assignments: impl IntoIterator<Item = PodRef>) -> DeviceMap {
    let mut map: DeviceMap = HashMap::new();
    for mut pod in assignments {
        let id = pod.device.split("::").next().unwrap_or(&pod.device).to_string();
        pod.device = id.clone();
        map.entry(id).or_default().push(pod);
    }
    for pods in map.values_mut() {
        pods.sort();
        pods.dedup();
    }
    map
}

/// The pods on a GPU: by its UUID, its index, or its MIG devices' UUIDs.
fn pods_of(gpu: &GpuReport, devices: &DeviceMap) -> Vec<PodRef> {
    let mut ids = vec![gpu.uuid.clone(), gpu.index.to_string()];
    if let Some(mig) = &gpu.mig {
        ids.extend(mig.instances.iter().filter_map(|i| i.uuid.clone()));
    }
    let mut pods: Vec<PodRef> = ids.iter().filter_map(|id| devices.get(id)).flatten().cloned().collect();
    pods.sort();
    pods.dedup();
    pods.truncate(PODS_PER_GPU);
    pods
}

pub struct Inputs<'a> {
    pub node: &'a str,
    pub backend: &'a str,
    pub now: i64,
    pub reading: &'a Result<Reading, String>,
    pub xids: &'a XidHistory,
    pub idle: &'a IdleClock,
    /// `Err`: why the kubelet's assignments are not known.
    pub devices: &'a Result<DeviceMap, String>,
}

pub fn assemble(i: Inputs<'_>) -> AgentSnapshot {
    let pod_resources = match i.devices {
        Ok(_) => Availability::yes(),
        Err(why) => Availability::no(why.clone()),
    };
    let empty = DeviceMap::new();
    let devices = i.devices.as_ref().unwrap_or(&empty);
    let (nvml, driver_version, cuda_driver_version, gpus) = match i.reading {
        Ok(r) => {
            let gpus = r
                .gpus
                .iter()
                .map(|g| {
                    let mut g = g.clone();
                    g.xids = i.xids.of(&g.uuid);
                    g.health = health(&g, &g.xids, i.now);
                    g.pods = pods_of(&g, devices);
                    g.idle_since = i.idle.of(&g.uuid);
                    g
                })
                .collect();
            (Availability::yes(), r.driver_version.clone(), r.cuda_driver_version.clone(), gpus)
        }
        Err(why) => (Availability::no(why.clone()), None, None, Vec::new()),
    };
    AgentSnapshot {
        version: VERSION,
        node: i.node.to_string(),
        collected_at: i.now,
        backend: i.backend.to_string(),
        nvml,
        driver_version,
        cuda_driver_version,
        gpus,
        pod_resources,
    }
}

/// Equal but for the time of the reading: no news for the stream.
pub fn same_content(a: &AgentSnapshot, b: &AgentSnapshot) -> bool {
    AgentSnapshot { collected_at: 0, ..a.clone() } == AgentSnapshot { collected_at: 0, ..b.clone() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::wire::{Mig, MigInstanceReport, RetiredPages};

    fn gpu(index: u32, uuid: &str) -> GpuReport {
        GpuReport { index, uuid: uuid.into(), name: "NVIDIA H100 80GB HBM3".into(), ..GpuReport::default() }
    }

    fn pod(name: &str, device: &str) -> PodRef {
        PodRef { namespace: "ml".into(), name: name.into(), container: "main".into(), device: device.into() }
    }

    #[test]
    fn a_critical_xid_makes_a_gpu_unhealthy_an_ignored_one_does_not() {
        let mut h = XidHistory::default();
        let g = gpu(0, "GPU-a");
        // Xid 13 (graphics engine exception) is on the device plugin's ignore list.
        h.record(&XidSeen { gpu: "GPU-a".into(), code: 13 }, 100);
        assert_eq!(health(&g, &h.of("GPU-a"), 200), "healthy");
        h.record(&XidSeen { gpu: "GPU-a".into(), code: 79 }, 150);
        let verdict = health(&g, &h.of("GPU-a"), 200);
        assert!(verdict.starts_with("unhealthy: Xid 79 ("), "{verdict}");
        // A day later it no longer counts.
        assert_eq!(health(&g, &h.of("GPU-a"), 150 + XID_HEALTH_WINDOW + 1), "healthy");
    }

    #[test]
    fn xid_history_is_bounded_per_gpu() {
        let mut h = XidHistory::default();
        for t in 0..(XIDS_PER_GPU as i64 + 10) {
            h.record(&XidSeen { gpu: "GPU-a".into(), code: 31 }, t);
        }
        let kept = h.of("GPU-a");
        assert_eq!(kept.len(), XIDS_PER_GPU);
        assert_eq!(kept[0].at, 10, "the oldest went first");
    }

    #[test]
    fn pods_are_matched_by_uuid_index_and_mig_device_with_time_slicing_suffixes() {
        let mut mig = gpu(1, "GPU-b");
        mig.mig = Some(Mig {
            enabled: true,
            pending_enabled: true,
            instances: vec![MigInstanceReport {
                profile: "3g.40gb".into(),
                uuid: Some("MIG-x".into()),
                ..Default::default()
            }],
        });
        let devices = device_map([pod("a", "GPU-a::0"), pod("b", "GPU-a::1"), pod("c", "MIG-x"), pod("d", "1")]);
        let reading = Ok(Reading { gpus: vec![gpu(0, "GPU-a"), mig], ..Reading::default() });
        let snap = assemble(Inputs {
            node: "n1",
            backend: "fake",
            now: 0,
            reading: &reading,
            xids: &XidHistory::default(),
            idle: &IdleClock::default(),
            devices: &Ok(devices),
        });
        let names = |i: usize| snap.gpus[i].pods.iter().map(|p| p.name.as_str()).collect::<Vec<_>>();
        assert_eq!(names(0), ["a", "b"]);
        assert_eq!(names(1), ["c", "d"]);
        assert_eq!(snap.gpus[0].pods[0].device, "GPU-a", "suffix stripped");
    }

    #[test]
    fn the_idle_clock_runs_while_a_gpu_is_idle_and_stops_when_it_works() {
        let with = |util: Option<u32>| Reading {
            gpus: vec![GpuReport { utilization_pct: util, ..gpu(0, "GPU-a") }],
            ..Reading::default()
        };
        let mut idle = IdleClock::default();
        idle.observe(&with(Some(0)), 100);
        idle.observe(&with(Some(3)), 110);
        idle.observe(&with(None), 120);
        assert_eq!(idle.of("GPU-a"), Some(100), "an unknown reading neither ends nor begins a run");
        idle.observe(&with(Some(40)), 130);
        assert_eq!(idle.of("GPU-a"), None);
        idle.observe(&with(Some(0)), 140);
        idle.observe(&Reading::default(), 150);
        assert_eq!(idle.of("GPU-a"), None, "a GPU gone is forgotten");
    }

    #[test]
    fn missing_nvml_and_kubelet_are_states_not_failures() {
        let snap = assemble(Inputs {
            node: "n1",
            backend: "nvml",
            now: 5,
            reading: &Err("NVML not found".into()),
            xids: &XidHistory::default(),
            idle: &IdleClock::default(),
            devices: &Err("no socket".into()),
        });
        assert_eq!(snap.nvml, Availability::no("NVML not found"));
        assert_eq!(snap.pod_resources, Availability::no("no socket"));
        assert!(snap.gpus.is_empty());
        let mut g = gpu(0, "GPU-a");
        g.retired_pages = Some(RetiredPages { pending: true, ..RetiredPages::default() });
        assert!(health(&g, &[], 0).contains("retired pages pending"));
    }
}
