//! MIG through DRA, per physical GPU: the MIG devices NVIDIA's driver
//! publishes (static MIG: the instances that exist; DynamicMIG: every
//! placement it could create, drawing on the GPU's shared counters), where
//! each sits on the GPU's eight memory slices, which a claim holds, and which
//! could be allocated now.

use std::collections::BTreeMap;

use crate::model::Sym;

use super::{DraIndex, SliceDevice};

/// One MIG device of a GPU as DRA publishes it.
#[derive(Clone, Debug, PartialEq)]
pub struct Partition {
    pub device: Sym,
    pub profile: Sym,
    /// First memory slice and how many (0 when the driver says neither).
    pub start: u8,
    pub size: u8,
    /// The claim it is allocated to (namespace/name).
    pub held_by: Option<String>,
    /// A claim could have it now: not held, not tainted, within the counters.
    pub free: bool,
}

/// A physical GPU whose MIG devices DRA publishes.
#[derive(Clone, Debug, PartialEq)]
pub struct MigGpu {
    pub uuid: Sym,
    /// The GPU's minor, from the driver's device names (`gpu-3`, `gpu-3-mig-…`).
    pub index: Option<u32>,
    pub product: Option<Sym>,
    /// Partitions published as possibilities drawing on shared counters
    /// (DynamicMIG), not as instances that exist.
    pub dynamic: bool,
    /// A device of it is tainted NoSchedule or NoExecute.
    pub tainted: bool,
    pub partitions: Vec<Partition>,
    /// The claim that holds the GPU whole (namespace/name): none of its
    /// partitions can be had while it does.
    pub held_whole: Option<String>,
}

impl MigGpu {
    /// The partitions that exist: every published one for static MIG, the
    /// held ones where the driver creates them on allocation.
    pub fn instances(&self) -> impl Iterator<Item = &Partition> {
        self.partitions.iter().filter(|p| !self.dynamic || p.held_by.is_some())
    }

    /// Profiles a claim could have now, each with how many placements
    /// (alternatives: allocating one may rule out others).
    pub fn free_profiles(&self) -> Vec<(Sym, usize)> {
        let mut free: BTreeMap<Sym, usize> = BTreeMap::new();
        for p in self.partitions.iter().filter(|p| p.free) {
            *free.entry(p.profile.clone()).or_default() += 1;
        }
        free.into_iter().collect()
    }
}

/// `…/memory-slice-3` (a DynamicMIG counter) or `…/memorySlice3` (a static
/// MIG device's capacity): the slice's index.
fn memory_slice(name: &str) -> Option<u8> {
    let local = name.rsplit('/').next()?;
    local.strip_prefix("memory-slice-").or_else(|| local.strip_prefix("memorySlice"))?.parse().ok()
}

/// The device's memory slices: those it consumes, else those it has as capacity.
fn placement(d: &SliceDevice<'_>) -> (u8, u8) {
    let consumed = d.device.consumes.iter().flat_map(|(_, counters)| counters.iter()).map(|(name, _)| name);
    let mut slices: Vec<u8> = consumed.filter_map(|n| memory_slice(n.as_str())).collect();
    if slices.is_empty() {
        slices = d.device.capacity.iter().filter_map(|(n, _)| memory_slice(n.as_str())).collect();
    }
    match (slices.iter().min(), slices.len()) {
        (Some(start), n) => (*start, u8::try_from(n).unwrap_or(u8::MAX)),
        (None, _) => (0, 0),
    }
}

/// `gpu-3` and `gpu-3-mig-1g10gb-19-0` → 3.
fn minor(device: &str) -> Option<u32> {
    device.strip_prefix("gpu-")?.split('-').next()?.parse().ok()
}

impl<'a> DraIndex<'a> {
    /// The node's GPUs with MIG devices published through DRA, by minor.
    pub fn mig_gpus(&self, node: &Sym) -> Vec<MigGpu> {
        let devices = self.devices_on(node);
        let usable = super::allocate::usable(self, devices);
        let mut gpus: BTreeMap<Sym, MigGpu> = BTreeMap::new();
        for (i, d) in devices.iter().enumerate() {
            if d.is_whole_gpu() || d.nvidia_attribute("type") != Some("mig") {
                continue;
            }
            let (Some(uuid), Some(profile)) = (d.physical_gpu().map(Sym::new), d.nvidia_attribute("profile")) else {
                continue;
            };
            let gpu = gpus.entry(uuid.clone()).or_insert_with(|| MigGpu {
                uuid,
                index: minor(d.device.name.as_str()),
                product: d.nvidia_attribute("productName").map(Sym::new),
                dynamic: false,
                tainted: false,
                partitions: Vec::new(),
                held_whole: None,
            });
            let (start, size) = placement(d);
            let held_by = self.allocated_to(&d.id()).map(|c| format!("{}/{}", c.namespace, c.name));
            gpu.dynamic |= !d.device.consumes.is_empty();
            gpu.tainted |= d.tainted();
            gpu.partitions.push(Partition {
                device: d.device.name.clone(),
                profile: Sym::new(profile),
                start,
                size,
                free: held_by.is_none() && usable[i] && !d.tainted() && self.fits_counters(d, &Default::default()),
                held_by,
            });
        }
        for d in devices.iter().filter(|d| d.is_whole_gpu()) {
            let Some(gpu) = d.physical_gpu().and_then(|uuid| gpus.get_mut(&Sym::new(uuid))) else { continue };
            if let Some(c) = self.allocated_to(&d.id()) {
                gpu.held_whole = Some(format!("{}/{}", c.namespace, c.name));
            }
        }
        let mut out: Vec<MigGpu> = gpus.into_values().collect();
        for g in &mut out {
            g.partitions.sort_by(|a, b| (a.start, a.size, &a.profile).cmp(&(b.start, b.size, &b.profile)));
        }
        out.sort_by_key(|g| (g.index, g.uuid.clone()));
        out
    }

    /// Every node with MIG devices published through DRA.
    pub fn mig_nodes(&self) -> impl Iterator<Item = Sym> + '_ {
        self.nodes()
            .filter(|(_, devices)| devices.iter().any(|d| d.nvidia_attribute("type") == Some("mig")))
            .map(|(n, _)| n)
    }
}
