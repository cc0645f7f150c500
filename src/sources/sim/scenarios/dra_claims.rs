//! Scenario `dra-claims`: GPUs through DRA, and a claim that asks for a
//! product the fleet does not publish. The slices are shaped as NVIDIA's
//! DRA Driver for GPUs writes them; the scheduler's message is the one the
//! real kube-scheduler v1.36 wrote for the same claim in the lab
//! (tests/fixtures/verdicts/dra/).

use std::sync::Arc;

use crate::model::build::{node, pod};
use crate::model::dra::{
    AllocatedDevice, AttributeValue, Device, DeviceClass, DeviceRequest, ExactRequest, ResourceClaim, ResourceSlice,
};
use crate::model::{ClaimSource, DraObject, PodClaim, Sym};

use super::super::catalog::{H100, R550};
use super::super::{PodPlan, SimCluster};

use super::Scenario;
use super::blocks::*;

pub const SCENARIO: Scenario = Scenario {
    name: "dra-claims",
    title: "GPUs through DRA, and a claim no device matches",
    story: "Three H100 nodes publish their GPUs through NVIDIA's DRA driver (ResourceSlices), two still use the device plugin. The new llm-serve deployment's ResourceClaimTemplate asks for productName == 'NVIDIA H200'; 18 GPUs sit free, 10 of them on the DRA nodes. finetune-70b's claim for eight H100s on one node waits too: none of the DRA nodes has eight free.",
    signal: "ml/llm-serve blocked at the claims step: no published device matches the class and selectors — cannot allocate all claims",
    manifests: include_str!("../../../../assets/scenarios/dra-claims/scenario.yaml"),
    build,
};

const DRIVER: &str = "gpu.nvidia.com";
const PRODUCT: &str = "NVIDIA H100 80GB HBM3";

fn string(v: &str) -> AttributeValue {
    AttributeValue::String(v.into())
}

/// One GPU as the driver publishes it (cmd/gpu-kubelet-plugin/deviceinfo.go).
fn gpu(node: &str, minor: u32) -> Device {
    let q = |name: &str| Sym::new(&format!("{DRIVER}/{name}"));
    let mut attributes = vec![
        (q("type"), string("gpu")),
        (q("uuid"), string(&uuid(node, minor))),
        (q("productName"), string(PRODUCT)),
        (q("brand"), string("Nvidia")),
        (q("architecture"), string("Hopper")),
        (q("cudaComputeCapability"), AttributeValue::Version("9.0.0".into())),
        (q("driverVersion"), AttributeValue::Version("550.90.7".into())),
        (q("cudaDriverVersion"), AttributeValue::Version("12.4.0".into())),
        (Sym::new("resource.kubernetes.io/pciBusID"), string(&format!("0000:{:02x}:00.0", 0x18 + minor * 0x10))),
    ];
    attributes.sort_by_key(|a| a.0.clone());
    Device {
        name: Sym::new(&format!("gpu-{minor}")),
        attributes: attributes.into_boxed_slice(),
        capacity: Box::new([(q("memory"), 80 << 30)]),
        taints: Box::new([]),
        consumes: Box::new([]),
    }
}

/// The GPU's UUID, as NVML reports it and the driver publishes it.
fn uuid(node: &str, minor: u32) -> String {
    format!("GPU-{:08x}-5e1d-4c2b-9f0a-{:012x}", fnv(node), minor)
}

/// What kgpu's agent on a DRA node reads: the same GPUs, by the same UUIDs.
fn agent(node: &str, gpus: u32, now: crate::model::Timestamp) -> crate::model::NodeDevices {
    use crate::model::{AgentStatus, CudaVersion, DriverVersion, Gpu, GpuHealth, MigMode};
    crate::model::NodeDevices {
        node: Sym::new(node),
        status: AgentStatus::Reporting,
        driver: DriverVersion::parse("550.90.07"),
        cuda_driver: CudaVersion::parse("12.4"),
        gpus: (0..gpus)
            .map(|minor| Gpu {
                index: minor,
                uuid: Sym::new(&uuid(node, minor)),
                product: Sym::new(H100.nvml_name),
                memory_mib: H100.memory_mib,
                mig_mode: MigMode::Disabled,
                mig_pending: None,
                instances: Box::new([]),
                health: GpuHealth::Healthy,
                xids: Box::new([]),
                utilization: None,
            })
            .collect(),
        observed: now,
    }
}

/// A stable per-node number for made-up UUIDs.
fn fnv(s: &str) -> u32 {
    s.bytes().fold(0x811c_9dc5_u32, |h, b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193))
}

fn slice(node: &str, gpus: u32) -> DraObject {
    DraObject::Slice(ResourceSlice {
        name: format!("{node}-{DRIVER}-7q2xk").into(),
        driver: Sym::new(DRIVER),
        pool: Sym::new(node),
        pool_generation: 1,
        slice_count: 1,
        node: Some(Sym::new(node)),
        devices: (0..gpus).map(|m| gpu(node, m)).collect(),
        shared_counters: Box::new([]),
        unmodelled: Box::new([]),
    })
}

fn template(name: &str, count: u64, selectors: &[&str]) -> ResourceClaim {
    let request = DeviceRequest {
        name: Sym::new("gpu"),
        alternatives: Box::new([(
            Sym::new("gpu"),
            ExactRequest::count(DRIVER, count, selectors.iter().map(|s| (*s).into()).collect()),
        )]),
    };
    ResourceClaim {
        created: ago(60 * 24 * 7),
        ..ResourceClaim::asking(Sym::new("ml"), name, true, Box::new([request]))
    }
}

/// A pod using `template`, running on `node` with `devices` allocated to
/// the claim the controller made for it.
fn claim_pod(
    sim: &mut SimCluster,
    name: &str,
    owner: (&str, &str),
    template: &ResourceClaim,
    place: Option<(&str, &[u32])>,
) {
    let generated = format!("{name}-gpu-{:05x}", fnv(name) & 0xfffff);
    let mut b = pod(name).ns("ml").cpu_milli(8000).memory_gi(96).owner(owner.0, owner.1).image(IMAGE_SERVE);
    b = match place {
        Some((node, _)) => b.on(node).running().created(ago(181)).transitioned(ago(180)),
        None => b.created(ago(14)),
    };
    let mut p = b.build();
    p.claims = Box::new([PodClaim {
        name: Sym::new("gpu"),
        source: ClaimSource::Template(template.name.clone()),
        generated: Some(generated.as_str().into()),
    }]);
    let mut claim = ResourceClaim {
        name: generated.as_str().into(),
        template: false,
        owner_pod: Some(Arc::from(name)),
        created: p.created,
        ..template.clone()
    };
    if let Some((node, minors)) = place {
        claim.allocated = minors
            .iter()
            .map(|m| AllocatedDevice {
                request: Sym::new("gpu"),
                driver: Sym::new(DRIVER),
                pool: Sym::new(node),
                device: Sym::new(&format!("gpu-{m}")),
                admin_access: false,
            })
            .collect();
        claim.allocated_node = Some(Sym::new(node));
        claim.reserved_for = Box::new([Arc::from(name)]);
    }
    sim.add_pod(p, PodPlan::default());
    sim.add_dra(DraObject::Claim(claim));
}

fn build(sim: &mut SimCluster) {
    // Two device-plugin nodes, half used.
    let classic = gpu_pool(sim, "h100-dp", 2, pool("h100", H100, 8, R550, false));
    for node in &classic {
        let p = gpu_pod("ml", &format!("eval-{}-{}", node.as_str(), sim.next_suffix()), 4).owner("Job", "eval-nightly");
        running_on(sim, p, node.as_str(), 95);
    }
    // Three DRA nodes: no nvidia.com/gpu, their GPUs in ResourceSlices.
    for i in 1..=3 {
        let name = format!("h100-dra-{i:02}");
        sim.add_node(
            node(&name)
                .cpu(192)
                .memory_gi(2048)
                .created(ago(60 * 24 * 30))
                .label("kubernetes.io/arch", "amd64")
                .label("kubernetes.io/os", "linux")
                .label("node.kubernetes.io/instance-type", "PowerEdge-XE9680")
                .label("kgpu.dev/pool", "h100-dra")
                .build(),
        );
        sim.add_dra(slice(&name, 8));
        sim.add_devices(agent(&name, 8, sim.now));
    }
    sim.add_dra(DraObject::Class(DeviceClass {
        name: DRIVER.into(),
        selectors: Box::new([
            "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'".into()
        ]),
        extended_resource: None,
    }));
    let one = template("one-h100", 1, &[]);
    let eight = template("eight-h100", 8, &[]);
    let h200 = template("one-h200", 1, &["device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H200'"]);
    for t in [&one, &eight, &h200] {
        sim.add_dra(DraObject::Claim(t.clone()));
    }
    claim_pod(sim, "pretrain-7b-0", ("Job", "pretrain-7b"), &eight, Some(("h100-dra-01", &[0, 1, 2, 3, 4, 5, 6, 7])));
    for (i, node) in ["h100-dra-02", "h100-dra-02", "h100-dra-02", "h100-dra-02", "h100-dra-03", "h100-dra-03"]
        .into_iter()
        .enumerate()
    {
        let minor = if i < 4 { i as u32 } else { i as u32 - 4 };
        claim_pod(sim, &format!("embed-5d8c7-{i}"), ("ReplicaSet", "embed-5d8c7"), &one, Some((node, &[minor])));
    }
    claim_pod(sim, "llm-serve-7f9c4-x2kq8", ("ReplicaSet", "llm-serve-7f9c4"), &h200, None);
    // Ten GPUs free on the DRA nodes, none with eight: the plan frees one.
    claim_pod(sim, "finetune-70b-0", ("Job", "finetune-70b"), &eight, None);
}
