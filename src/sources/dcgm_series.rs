//! dcgm-exporter's series (from an exporter's `/metrics` or a Prometheus
//! query) as a node's per-device usage, with the pods that hold each device.

use std::collections::BTreeMap;

use crate::model::usage::WINDOW_SAMPLES;
use crate::model::{DeviceReading, MigSlice, NodeUsage, PodKey, Sym, UsageSource};

/// Devices kept per node: 8 GPUs of 7 MIG instances each fit many times over.
pub const DEVICES_PER_NODE: usize = 256;
/// Holders kept per device (time-slicing shares one GPU with many pods).
const HOLDERS_PER_DEVICE: usize = 64;

/// The metrics that say how busy a device is and how much memory it uses.
/// Names are matched without regard to case: relabelled setups lower-case them.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Metric {
    /// Percent, whole GPUs only (not measured per MIG instance).
    GpuUtil,
    /// A ratio 0–1, per GPU or per MIG instance: the one MIG measure.
    EngineActive,
    /// MiB.
    FramebufferUsed,
}

fn metric(name: &str) -> Option<Metric> {
    [
        ("DCGM_FI_DEV_GPU_UTIL", Metric::GpuUtil),
        ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", Metric::EngineActive),
        ("DCGM_FI_DEV_FB_USED", Metric::FramebufferUsed),
    ]
    .into_iter()
    .find(|(n, _)| n.eq_ignore_ascii_case(name))
    .map(|(_, m)| m)
}

#[derive(Default)]
struct Device {
    index: u32,
    profile: Option<String>,
    holders: Vec<PodKey>,
    util: Option<f32>,
    engine: Option<f32>,
    memory: Option<u64>,
}

/// One series' latest value, as an exporter or Prometheus gives it.
pub struct Sample<'a> {
    pub metric: &'a str,
    pub labels: BTreeMap<&'a str, &'a str>,
    pub value: f64,
}

/// A node's usage and how many samples spoke of its devices.
pub struct Read {
    pub usage: NodeUsage,
    pub recognised: usize,
}

/// A node's samples as its devices' usage; `not_a_holder` names pods the
/// series carry that hold no GPU (Prometheus's own `pod` label: the exporter).
pub fn usage_of<'a>(
    node: &str,
    samples: impl IntoIterator<Item = Sample<'a>>,
    at: i64,
    not_a_holder: impl Fn(&PodKey) -> bool,
) -> Read {
    // (GPU UUID, GPU instance id) → what its lines say.
    let mut devices: BTreeMap<(String, Option<u32>), Device> = BTreeMap::new();
    let mut recognised = 0usize;
    for sample in samples {
        let Some(metric) = metric(sample.metric) else { continue };
        let value = sample.value;
        if !value.is_finite() {
            continue;
        }
        let labels = &sample.labels;
        let label = |names: &[&str]| names.iter().find_map(|n| labels.get(n).copied()).filter(|v| !v.is_empty());
        let Some(uuid) = label(&["UUID", "uuid", "gpu_uuid"]) else { continue };
        let slice = label(&["GPU_I_ID"]).and_then(|id| id.parse::<u32>().ok());
        let key = (uuid.to_string(), slice);
        if !devices.contains_key(&key) && devices.len() >= DEVICES_PER_NODE {
            continue;
        }
        recognised += 1;
        let d = devices.entry(key).or_default();
        d.index = label(&["gpu"]).and_then(|g| g.parse().ok()).unwrap_or(d.index);
        if slice.is_some() {
            d.profile = label(&["GPU_I_PROFILE"]).map(str::to_string);
        }
        // Scraped by a Prometheus that keeps its own target labels, the
        // workload's are `exported_*`; each name goes with its namespace.
        let holder = [("exported_namespace", "exported_pod"), ("namespace", "pod"), ("pod_namespace", "pod_name")]
            .iter()
            .find_map(|(ns, pod)| Some(PodKey::new(label(&[ns])?, label(&[pod])?)));
        if let Some(key) = holder.filter(|k| !not_a_holder(k))
            && !d.holders.contains(&key)
            && d.holders.len() < HOLDERS_PER_DEVICE
        {
            d.holders.push(key);
        }
        // Several lines for one device (one per pod sharing it) carry the
        // device's value: the highest is kept.
        let keep = |old: Option<f32>, new: f32| Some(old.map_or(new, |o| o.max(new)));
        match metric {
            Metric::GpuUtil => d.util = keep(d.util, value.clamp(0.0, 100.0) as f32),
            Metric::EngineActive => d.engine = keep(d.engine, (value.clamp(0.0, 1.0) * 100.0) as f32),
            Metric::FramebufferUsed => d.memory = Some(d.memory.unwrap_or(0).max(value.max(0.0) as u64)),
        }
    }
    // A MIG GPU's own lines (memory of the whole GPU) say nothing of one
    // slice or its holder: its slices stand for it.
    let mig_gpus: Vec<String> = devices.keys().filter(|(_, s)| s.is_some()).map(|(u, _)| u.clone()).collect();
    let readings = devices
        .into_iter()
        .filter(|((uuid, slice), _)| slice.is_some() || !mig_gpus.contains(uuid))
        .map(|((uuid, slice), mut d)| {
            d.holders.sort();
            DeviceReading {
                gpu: Sym::new(&uuid),
                index: d.index,
                slice: slice.map(|id| MigSlice { profile: Sym::new(d.profile.as_deref().unwrap_or("mig")), id }),
                holders: d.holders.into_boxed_slice(),
                // Whole GPUs: the higher of the two, so that a GPU is never
                // called idle while either says it works (engine-active can
                // read 0 under full load when profiling stops; dcgm-exporter#662).
                busy_pct: match (d.util, d.engine) {
                    (Some(u), Some(e)) if slice.is_none() => Some(u.max(e)),
                    (_, Some(e)) => Some(e),
                    (u, None) if slice.is_none() => u,
                    _ => None,
                },
                memory_used_mib: d.memory,
                idle_since: None,
            }
        })
        .collect();
    let usage =
        NodeUsage { problem: None, node: Sym::new(node), source: UsageSource::DcgmExporter, at, devices: readings };
    Read { usage, recognised }
}

// The window's bound is per device; a node's devices are bounded here.
const _: () = assert!(DEVICES_PER_NODE * WINDOW_SAMPLES < 1 << 20);
