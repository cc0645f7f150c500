//! What a node supplies, in physical GPUs: the one accounting every view
//! reads (header, pools, Fleet rows, fragmentation, JSON). Each physical GPU
//! is in exactly one bucket; a MIG slice or a time-slicing replica is a
//! share of a GPU, never a whole one.

use crate::model::{AgentStatus, GpuHealth, MigStrategy, Node};

use super::dra::DraGpus;

use super::index::Index;
use super::tally::Tally;

/// A node's GPUs as hardware, device plugin and agent report them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Supply {
    /// Physical GPUs as hardware reports them (agent, else GFD), if known.
    pub hardware: Option<u64>,
    /// Physical GPUs the device plugin advertises (as GPUs, slices or
    /// replicas), never counting one the agent reports unhealthy.
    pub advertised: u64,
    /// In hardware, not advertised, and not unhealthy.
    pub unadvertised: u64,
    /// Reported unhealthy by the agent, or withheld by the device plugin
    /// (capacity above allocatable).
    pub unhealthy: u64,
    /// Of `unhealthy`, those known only from capacity above allocatable.
    pub withheld: u64,
    /// Time-slicing: `nvidia.com/gpu` (or `.shared`) counts replicas.
    pub replicas: Option<Replicas>,
    /// GPUs published through DRA (ResourceSlices), none where it publishes none.
    pub dra: Option<DraGpus>,
}

/// What `node` supplies, from its object, its agent and its pods.
pub fn supply(index: &Index<'_>, node: &Node) -> Supply {
    let used = index.used(&node.name);
    let devices = index.snap.devices.get(&node.name).filter(|d| d.status == AgentStatus::Reporting);
    // Capacity above allocatable: GPUs the device plugin reports unhealthy
    // (or a plugin that stopped: the kubelet marks its devices unhealthy),
    // known from the Node object alone where neither GFD nor an agent says
    // what the hardware has (with them, the plugin's shortfall is named).
    let withheld = if devices.is_none() && node.hardware_gpus().is_none() { node.withheld_gpus() } else { 0 };
    let dra = index.dra().gpus(&node.name);
    let dra_published = dra.map_or(0, |d| d.published);
    // A GPU offered both ways (a device plugin beside the DRA driver) is
    // one GPU: the hardware count is the larger of the two.
    let hardware = devices
        .map(|d| d.gpus.len() as u64)
        .or(node.hardware_gpus().map(u64::from))
        .or_else(|| (withheld > 0).then_some(node.capacity.gpu))
        .map(|h| h.max(dra_published))
        .or(dra.map(|d| d.published));
    // A tainted DRA device is most likely the GPU the agent calls unhealthy.
    let unhealthy = devices
        .map_or(0, |d| d.gpus.iter().filter(|g| matches!(g.health, GpuHealth::Unhealthy(_))).count() as u64)
        .max(withheld)
        .max(dra.map_or(0, |d| d.tainted));
    // Each physical GPU in one bucket: a GPU the agent reports unhealthy is
    // unhealthy even while the plugin still advertises it (it drops it soon).
    // DRA's healthy GPUs are offered, as the device plugin's are.
    let dra_offered = dra.map_or(0, |d| d.published - d.tainted);
    let advertised = advertised_physical_gpus(node, devices.map(|d| &**d))
        .min(hardware.map_or(u64::MAX, |h| h.saturating_sub(unhealthy).saturating_sub(dra_offered)));
    // An unhealthy GPU drops out of capacity: that is health, not the plugin.
    let unadvertised =
        hardware.map_or(0, |h| h.saturating_sub(advertised).saturating_sub(dra_offered).saturating_sub(unhealthy));
    Supply { hardware, advertised, unadvertised, unhealthy, withheld, replicas: replicas_of(node, used), dra }
}

/// Physical GPUs by what they are doing: each GPU in exactly one bucket.
/// A MIG GPU is used when it holds an allocated slice (without the agent:
/// the fewest GPUs the allocated slices fit on); a time-sliced GPU when one
/// of its replicas is allocated (at least allocated ÷ replicas per GPU).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GpuBuckets {
    pub used: u64,
    /// Idle on a node that takes work (Ready, not cordoned, not a black hole).
    pub free: u64,
    /// Idle on a cordoned, NotReady or black-hole node.
    pub unavailable: u64,
    /// In hardware, not advertised by the device plugin.
    pub unadvertised: u64,
    /// Reported unhealthy by the node's agent (the device plugin drops them).
    pub unhealthy: u64,
}

impl GpuBuckets {
    pub fn total(&self) -> u64 {
        [self.free, self.unavailable, self.unadvertised, self.unhealthy]
            .iter()
            .fold(self.used, |s, v| s.saturating_add(*v))
    }
}

/// GPU sharing by time-slicing (GFD `nvidia.com/gpu.replicas`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Replicas {
    pub per_gpu: u32,
    pub advertised: u64,
    pub allocated: u64,
}

/// Time-slicing: the replicas per GPU GFD reports, when the node shares its
/// GPUs (a `-SHARED` product, or replicas renamed to `nvidia.com/gpu.shared`).
pub fn replicas_per_gpu(node: &Node) -> Option<u32> {
    let per_gpu: u32 = node.label(crate::model::keys::GPU_REPLICAS)?.as_str().trim().parse().ok()?;
    let shared = node.allocatable.get(crate::model::keys::RESOURCE_GPU_SHARED);
    let sharing = shared > 0 || node.gpu.product.as_ref().is_some_and(|p| p.as_str().ends_with("-SHARED"));
    (per_gpu > 1 && sharing).then_some(per_gpu)
}

fn replicas_of(node: &Node, used: &Tally) -> Option<Replicas> {
    let per_gpu = replicas_per_gpu(node)?;
    let shared = node.allocatable.get(crate::model::keys::RESOURCE_GPU_SHARED);
    let (advertised, allocated) = if shared > 0 {
        (shared, used.get(crate::model::keys::RESOURCE_GPU_SHARED))
    } else {
        (node.allocatable.gpu, used.gpu)
    };
    Some(Replicas { per_gpu, advertised, allocated })
}

impl Supply {
    /// The node's physical GPUs, each in one bucket (see [`GpuBuckets`]):
    /// idle ones are free where the node takes work, unavailable elsewhere.
    pub fn buckets(&self, node: &Node, used: &Tally, accepts_work: bool) -> GpuBuckets {
        let advertised = self.advertised;
        let busy = match self.replicas {
            Some(r) => r.allocated.div_ceil(r.per_gpu as u64),
            None => {
                let whole = node.allocatable.gpu.min(advertised);
                let mig_gpus = advertised.saturating_sub(whole);
                used.gpu.min(whole) + mig_gpus_busy(node, used, mig_gpus)
            }
        }
        .min(advertised);
        let idle = advertised - busy;
        // DRA: a GPU with a device allocated to a claim is used.
        let (dra_used, dra_idle) = self.dra.map_or((0, 0), |d| (d.allocated, d.published - d.allocated - d.tainted));
        let (busy, idle) = (busy + dra_used, idle + dra_idle);
        GpuBuckets {
            used: busy,
            free: if accepts_work { idle } else { 0 },
            unavailable: if accepts_work { 0 } else { idle },
            unadvertised: self.unadvertised,
            unhealthy: self.unhealthy,
        }
    }

    /// Physical GPUs that `units` of `nvidia.com/gpu` (or `.shared`) take:
    /// a time-sliced GPU holds `per_gpu` replicas, any other one unit.
    pub fn gpus_of_units(&self, units: u64) -> u64 {
        match self.replicas {
            Some(r) => units.div_ceil(r.per_gpu.max(1) as u64),
            None => units,
        }
    }
}

/// MIG GPUs holding an allocated slice: the fewest GPUs the allocated
/// slices fit on (memory slices per GPU from the product's geometry).
fn mig_gpus_busy(node: &Node, used: &Tally, mig_gpus: u64) -> u64 {
    if mig_gpus == 0 {
        return 0;
    }
    let geometry = node.gpu.product.as_ref().and_then(|p| crate::reference::mig::geometry_for_product(p.as_str()));
    let mut slices = 0u64;
    let mut any = false;
    for (profile, _) in node.allocatable.mig() {
        let n = used.mig(profile);
        if n == 0 {
            continue;
        }
        any = true;
        let size = geometry.and_then(|g| g.profile(profile)).map_or(1, |p| p.size as u64);
        slices += n * size;
    }
    let per_gpu = geometry.map_or(8, |g| g.memory_slices as u64);
    let busy = slices.div_ceil(per_gpu.max(1));
    (if any { busy.max(1) } else { 0 }).min(mig_gpus)
}

/// Physical GPUs the device plugin covers. Under MIG `mixed` a GPU in MIG
/// mode is advertised as its slices, not as `nvidia.com/gpu`; without an
/// agent, advertised slices are taken to cover the remaining GPUs.
fn advertised_physical_gpus(node: &Node, devices: Option<&crate::model::NodeDevices>) -> u64 {
    let shared = node.allocatable.get(crate::model::keys::RESOURCE_GPU_SHARED);
    // Time-sliced under its own name: nvidia.com/gpu counts replicas, r per GPU.
    let replicas = node
        .label(crate::model::keys::GPU_REPLICAS)
        .and_then(|r| r.as_str().trim().parse::<u64>().ok())
        .filter(|r| *r > 1 && node.gpu.product.as_ref().is_some_and(|p| p.as_str().ends_with("-SHARED")))
        .unwrap_or(1);
    let whole = node.allocatable.gpu.div_ceil(replicas);
    // single with MIG on: GFD's count is MIG devices, like nvidia.com/gpu
    // (the product says `-MIG-`); single with MIG off is plain GPUs, one each.
    let single_mig = node.gpu.mig_strategy == Some(MigStrategy::Single)
        && node.gpu.product.as_ref().is_some_and(|p| p.as_str().to_ascii_uppercase().contains("-MIG-"));
    if single_mig || shared > 0 {
        // Time-slicing: replicas hide the physical count, compare presence only.
        return if whole > 0 || shared > 0 { node.hardware_gpus().map_or(whole, u64::from).max(whole) } else { 0 };
    }
    let mig_slices = node.allocatable.mig_total();
    if mig_slices == 0 {
        return whole;
    }
    match devices {
        Some(d) => {
            let mig_gpus = d.gpus.iter().filter(|g| g.mig_mode == crate::model::MigMode::Enabled).count() as u64;
            whole + mig_gpus
        }
        None => node.hardware_gpus().map_or(whole, u64::from).max(whole),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::testing::{node, snapshot};
    use crate::model::{Cluster, Gpu, MigMode, ModelEvent, NodeDevices, Object, Sym};

    fn gpu(index: u32, health: GpuHealth) -> Gpu {
        Gpu {
            index,
            uuid: Sym::new(&format!("GPU-{index}")),
            product: Sym::new("NVIDIA H100 80GB HBM3"),
            memory_mib: 81559,
            mig_mode: MigMode::Disabled,
            mig_pending: None,
            instances: Box::new([]),
            health,
            xids: Box::new([]),
            utilization: None,
        }
    }

    /// `n` with an agent reporting `hardware` GPUs, those in `unhealthy` so.
    fn with_agent(n: &Node, hardware: u32, unhealthy: &[u32]) -> crate::model::Snapshot {
        let mut c = Cluster::new(snapshot(vec![], vec![], vec![], 0).source.clone());
        c.apply(ModelEvent::Upsert(Object::Node(n.clone())));
        let health = |i| if unhealthy.contains(&i) { GpuHealth::Unhealthy("Xid".into()) } else { GpuHealth::Healthy };
        c.apply(ModelEvent::Upsert(Object::Devices(NodeDevices {
            node: n.name.clone(),
            status: AgentStatus::Reporting,
            driver: None,
            cuda_driver: None,
            gpus: (0..hardware).map(|i| gpu(i, health(i))).collect(),
            observed: 0,
        })));
        c.snapshot()
    }

    /// The demo's h100-07 and a real node after Xid 48: GFD labels the
    /// `single` strategy on GPUs not in MIG mode, the device plugin
    /// advertises 7, the agent reports 8 with one unhealthy.
    #[test]
    fn an_unhealthy_gpu_is_counted_once_under_the_single_strategy() {
        let n = node("h100-07")
            .gpus(7)
            .hardware(8)
            .product("NVIDIA-H100-80GB-HBM3")
            .label("nvidia.com/mig.strategy", "single")
            .build();
        let snap = with_agent(&n, 8, &[3]);
        let index = Index::build(&snap, 0);
        let s = supply(&index, &n);
        let b = s.buckets(&n, index.used(&n.name), true);
        assert_eq!((b.total(), b.free, b.unhealthy, b.unadvertised), (8, 7, 1, 0), "{s:?}");
    }

    /// The plugin still advertising a GPU its agent reports unhealthy (the
    /// few seconds before it notices): unhealthy, not free as well.
    #[test]
    fn a_gpu_still_advertised_but_unhealthy_is_unhealthy_only() {
        let n = node("g").gpus(8).hardware(8).build();
        let snap = with_agent(&n, 8, &[0, 1]);
        let index = Index::build(&snap, 0);
        let b = supply(&index, &n).buckets(&n, index.used(&n.name), true);
        assert_eq!((b.total(), b.free, b.unhealthy), (8, 6, 2));
    }

    /// Under `single` with MIG on, GFD's count and nvidia.com/gpu are both
    /// MIG devices: presence is all the plugin's count says.
    #[test]
    fn single_strategy_mig_devices_cover_their_gpus() {
        let n = node("a100")
            .gpus(56)
            .hardware(56)
            .product("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb")
            .label("nvidia.com/mig.strategy", "single")
            .build();
        let snap = snapshot(vec![n.clone()], vec![], vec![], 0);
        let index = Index::build(&snap, 0);
        let s = supply(&index, &n);
        assert_eq!((s.advertised, s.unadvertised), (56, 0));
    }
}
