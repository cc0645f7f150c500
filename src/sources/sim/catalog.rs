//! GPU products, drivers and node templates for the simulated fleet, shaped
//! like the real nodes in `shared/fixtures/real/nodes/` (GFD and GPU
//! Operator labels, MIG mixed-strategy resources, taints).

use crate::model::{
    AgentStatus, CudaVersion, DriverVersion, Gpu, GpuHealth, MigInstance, MigMode, Node, NodeDevices, Resources, Sym,
    TaintEffect, Timestamp, build, keys,
};
use crate::reference::mig;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GpuModel {
    /// GFD `nvidia.com/gpu.product`.
    pub product: &'static str,
    /// NVML's name (what an agent reports).
    pub nvml_name: &'static str,
    pub memory_mib: u64,
    pub family: &'static str,
    pub compute: (u8, u8),
    pub machine: &'static str,
    pub mig_capable: bool,
}

pub const H100: GpuModel = GpuModel {
    product: "NVIDIA-H100-80GB-HBM3",
    nvml_name: "NVIDIA H100 80GB HBM3",
    memory_mib: 81559,
    family: "hopper",
    compute: (9, 0),
    machine: "PowerEdge-XE9680",
    mig_capable: true,
};
pub const H200: GpuModel = GpuModel {
    product: "NVIDIA-H200",
    nvml_name: "NVIDIA H200",
    memory_mib: 143771,
    family: "hopper",
    compute: (9, 0),
    machine: "PowerEdge-XE9680",
    mig_capable: true,
};
pub const A100_80: GpuModel = GpuModel {
    product: "NVIDIA-A100-SXM4-80GB",
    nvml_name: "NVIDIA A100-SXM4-80GB",
    memory_mib: 81920,
    family: "ampere",
    compute: (8, 0),
    machine: "DGXA100-920-23687-2530-000",
    mig_capable: true,
};
pub const A100_40: GpuModel = GpuModel {
    product: "A100-SXM4-40GB",
    nvml_name: "A100-SXM4-40GB",
    memory_mib: 40537,
    family: "ampere",
    compute: (8, 0),
    machine: "DGXA100-920-23687-2530-000",
    mig_capable: true,
};
pub const L40S: GpuModel = GpuModel {
    product: "NVIDIA-L40S",
    nvml_name: "NVIDIA L40S",
    memory_mib: 46068,
    family: "ada-lovelace",
    compute: (8, 9),
    machine: "PowerEdge-R760xa",
    mig_capable: false,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Driver {
    pub version: &'static str,
    /// The newest CUDA this driver runs (GFD `cuda.runtime-version`).
    pub cuda: &'static str,
}

pub const R535: Driver = Driver { version: "535.104.05", cuda: "12.2" };
pub const R545: Driver = Driver { version: "545.23.08", cuda: "12.3" };
pub const R550: Driver = Driver { version: "550.54.15", cuda: "12.4" };
pub const R570: Driver = Driver { version: "570.124.06", cuda: "12.8" };
pub const R580: Driver = Driver { version: "580.65.06", cuda: "13.0" };

/// The taint GKE puts on GPU nodes (`nvidia.com/gpu=present:NoSchedule`).
pub const GPU_TAINT_VALUE: &str = "present";

/// A GPU node as it would be after GPU Operator setup.
#[derive(Clone, Debug)]
pub struct NodeSpec {
    pub name: String,
    pub pool: &'static str,
    pub zone: &'static str,
    pub model: GpuModel,
    pub gpus: u32,
    pub driver: Driver,
    pub tainted: bool,
    /// A mig-parted config name (mixed strategy) or `None` for whole GPUs.
    pub mig_config: Option<String>,
    pub cpu_cores: u64,
    pub memory_gi: u64,
    pub created: Timestamp,
    /// The device plugin's time-slicing: replicas advertised per GPU.
    pub time_slicing: Option<u32>,
}

impl NodeSpec {
    pub fn new(name: impl Into<String>, pool: &'static str, model: GpuModel, gpus: u32, driver: Driver) -> NodeSpec {
        NodeSpec {
            name: name.into(),
            pool,
            zone: "us-central1-a",
            model,
            gpus,
            driver,
            tainted: false,
            mig_config: None,
            cpu_cores: 192,
            memory_gi: 2048,
            created: 0,
            time_slicing: None,
        }
    }
}

/// Deterministic GPU UUIDs, shaped like NVML's.
pub fn gpu_uuid(node: &str, index: u32) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in node.bytes().chain(index.to_le_bytes()) {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    let h2 = h.rotate_left(29) ^ 0x5bd1_e995;
    format!(
        "GPU-{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        (h >> 32) as u32,
        (h >> 16) as u16,
        h as u16,
        (h2 >> 48) as u16,
        h2 & 0xffff_ffff_ffff
    )
}

/// The GPUs of a node; MIG instances placed per `config` (mig-parted).
pub fn devices(spec: &NodeSpec, observed: Timestamp) -> NodeDevices {
    let geometry = mig::geometry_for_product(spec.model.product);
    let config = spec.mig_config.as_deref().and_then(|name| {
        let model = mig::model_for_product(spec.model.product)?;
        mig::configs_for_model(model).into_iter().find(|c| c.name == name)
    });
    let gpus = (0..spec.gpus)
        .map(|i| {
            let (mode, instances) = match (&config, geometry) {
                (Some(c), Some(g)) if c.mig_enabled => (MigMode::Enabled, place_config(g, c)),
                _ => (MigMode::Disabled, Vec::new()),
            };
            Gpu {
                index: i,
                uuid: Sym::new(&gpu_uuid(&spec.name, i)),
                product: Sym::new(spec.model.nvml_name),
                memory_mib: spec.model.memory_mib,
                mig_mode: mode,
                mig_pending: None,
                instances: instances.into_boxed_slice(),
                health: GpuHealth::Healthy,
                xids: Box::new([]),
                utilization: None,
            }
        })
        .collect();
    NodeDevices {
        node: Sym::new(&spec.name),
        status: AgentStatus::Reporting,
        driver: DriverVersion::parse(spec.driver.version),
        cuda_driver: CudaVersion::parse(spec.driver.cuda),
        gpus,
        observed,
    }
}

/// Places a config's instances on one GPU (searching placements, as a
/// careful operator would; mig-parted's own order can fail).
pub fn place_config(geometry: &mig::Geometry, config: &mig::MigConfig) -> Vec<MigInstance> {
    let mut wanted: Vec<&mig::Profile> = Vec::new();
    for (name, count) in &config.devices {
        if let Some(p) = geometry.profile(name) {
            wanted.extend(std::iter::repeat_n(p, *count as usize));
        }
    }
    let Some(starts) = geometry.place(&[], &wanted) else {
        return Vec::new();
    };
    let mut instances: Vec<MigInstance> = wanted
        .iter()
        .zip(starts)
        .map(|(p, start)| MigInstance { profile: Sym::new(&p.name), start, size: p.size, uuid: None })
        .collect();
    instances.sort_by_key(|i| i.start);
    instances
}

/// Advertised resources, as the device plugin (mixed strategy) derives them
/// from the devices: whole GPUs not in MIG mode plus one resource per profile.
pub fn advertised(devices: &NodeDevices) -> Vec<(String, u64)> {
    let mut out: Vec<(String, u64)> = vec![(
        keys::RESOURCE_GPU.to_string(),
        devices.gpus.iter().filter(|g| g.mig_mode == MigMode::Disabled && g.health == GpuHealth::Healthy).count()
            as u64,
    )];
    for g in devices.gpus.iter().filter(|g| g.mig_mode == MigMode::Enabled) {
        for i in g.instances.iter() {
            let r = format!("{}{}", keys::RESOURCE_MIG_PREFIX, i.profile);
            match out.iter_mut().find(|(n, _)| *n == r) {
                Some((_, v)) => *v += 1,
                None => out.push((r, 1)),
            }
        }
    }
    out
}

/// The Node object for a spec and its devices.
pub fn node(spec: &NodeSpec, devices: &NodeDevices) -> Node {
    let gpu = spec.model;
    let mut b = build::node(&spec.name)
        .cpu(spec.cpu_cores)
        .memory_gi(spec.memory_gi)
        .created(spec.created)
        .label("kubernetes.io/arch", "amd64")
        .label("kubernetes.io/os", "linux")
        .label("beta.kubernetes.io/arch", "amd64")
        .label("beta.kubernetes.io/os", "linux")
        .label("topology.kubernetes.io/zone", spec.zone)
        .label("node.kubernetes.io/instance-type", gpu.machine)
        .label("kgpu.dev/pool", spec.pool)
        .product(gpu.product)
        .driver(spec.driver.version, spec.driver.cuda)
        .hardware(spec.gpus as u64)
        .label(keys::GPU_MEMORY, &gpu.memory_mib.to_string())
        .label(keys::GPU_FAMILY, gpu.family)
        .label("nvidia.com/gpu.compute.major", &gpu.compute.0.to_string())
        .label("nvidia.com/gpu.compute.minor", &gpu.compute.1.to_string())
        .label("nvidia.com/gpu.machine", gpu.machine)
        .label(keys::GPU_REPLICAS, "1")
        .label(keys::GPU_SHARING, "none")
        .label(keys::MIG_CAPABLE, if gpu.mig_capable { "true" } else { "false" })
        .label("nvidia.com/mps.capable", "false")
        .label("nvidia.com/gfd.timestamp", &spec.created.max(0).to_string())
        .label(keys::DRIVER_UPGRADE_STATE, "upgrade-done");
    for operand in [
        "container-toolkit",
        "dcgm",
        "dcgm-exporter",
        "device-plugin",
        "driver",
        "gpu-feature-discovery",
        "mig-manager",
        "node-status-exporter",
        "nvsm",
        "operator-validator",
    ] {
        b = b.label(&format!("{}{operand}", keys::GPU_DEPLOY_PREFIX), "true");
    }
    b = match spec.mig_config.as_deref() {
        Some(config) => b
            .label(keys::MIG_STRATEGY, "mixed")
            .label(keys::MIG_CONFIG, config)
            .label(keys::MIG_CONFIG_STATE, "success"),
        None => b
            .label(keys::MIG_STRATEGY, "single")
            .label(keys::MIG_CONFIG, "all-disabled")
            .label(keys::MIG_CONFIG_STATE, "success"),
    };
    for (resource, amount) in advertised(devices) {
        b = b.advertise(&resource, amount);
        if let Some(profile) = keys::mig_profile_of(&resource) {
            b = b
                .label(&format!("nvidia.com/mig-{profile}.count"), &amount.to_string())
                .label(&format!("nvidia.com/mig-{profile}.product"), &format!("{}-MIG-{profile}", gpu.product))
                .label(&format!("nvidia.com/mig-{profile}.replicas"), "1")
                .label(&format!("nvidia.com/mig-{profile}.sharing-strategy"), "none");
        }
    }
    if let Some(replicas) = spec.time_slicing {
        // What GFD labels under a time-slicing config (renameByDefault false).
        b = b
            .product(&format!("{}-SHARED", gpu.product))
            .label(keys::GPU_REPLICAS, &replicas.to_string())
            .label(keys::GPU_SHARING, "time-slicing")
            .advertise(keys::RESOURCE_GPU, u64::from(spec.gpus * replicas));
    }
    if spec.tainted {
        b = b.taint(keys::RESOURCE_GPU, GPU_TAINT_VALUE, TaintEffect::NoSchedule);
    }
    b.build()
}

/// A CPU-only node (system and data-loading pods).
pub fn cpu_node(name: &str, created: Timestamp) -> Node {
    build::node(name)
        .cpu(64)
        .memory_gi(256)
        .created(created)
        .label("kubernetes.io/arch", "amd64")
        .label("kubernetes.io/os", "linux")
        .label("node.kubernetes.io/instance-type", "n2-standard-64")
        .label("kgpu.dev/pool", "cpu")
        .build()
}

/// Resources used by nothing: a convenience for requests.
pub fn requests(gpus: u64, cpu_cores: u64, memory_gi: u64) -> Resources {
    Resources::from_pairs([(keys::RESOURCE_GPU, gpus), ("cpu", cpu_cores * 1000), ("memory", memory_gi << 30)])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mig_node_advertises_its_slices() {
        let mut spec = NodeSpec::new("h100-mig-1", "mig", H100, 8, R550);
        spec.mig_config = Some("all-balanced".into());
        let d = devices(&spec, 0);
        assert_eq!(d.gpus[0].instances.len(), 4, "2×1g.10gb + 2g.20gb + 3g.40gb");
        let n = node(&spec, &d);
        assert_eq!(n.allocatable.gpu, 0);
        assert_eq!(n.allocatable.get("nvidia.com/mig-1g.10gb"), 16);
        assert_eq!(n.allocatable.get("nvidia.com/mig-2g.20gb"), 8);
        assert_eq!(n.allocatable.get("nvidia.com/mig-3g.40gb"), 8);
        assert_eq!(n.gpu.count, Some(8));
        assert_eq!(n.label("nvidia.com/mig-1g.10gb.count").map(|s| s.as_str()), Some("16"));
    }

    #[test]
    fn uuids_are_stable_and_distinct() {
        assert_eq!(gpu_uuid("a", 0), gpu_uuid("a", 0));
        assert_ne!(gpu_uuid("a", 0), gpu_uuid("a", 1));
        assert!(gpu_uuid("a", 0).starts_with("GPU-"));
    }
}
