//! Analysis of a fleet whose GPUs come through DRA: 1,000 nodes publish
//! eight whole GPUs each as ResourceSlices (as NVIDIA's DRA driver does),
//! 5,000 pods hold one each through claims made from a template (five per
//! node), 500 pods of that template wait, and one pod asking eight through
//! its template waits too: the fragmentation map searches each node's room
//! by the allocator's search, and the plan replays moves of claim-held
//! devices. Same budgets as the device-plugin fleet (DESIGN.md: a full
//! analysis ≤ 50 ms at 10k nodes).
//!
//! `cargo bench --bench dra`

#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark may panic on setup failure

use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use kgpu::analysis::index::Index;
use kgpu::analysis::{self, Thresholds, fragmentation};
use kgpu::model::build::{node, pod};
use kgpu::model::dra::{
    AllocatedDevice, AttributeValue, Device, DeviceClass, DeviceRequest, ExactRequest, ResourceClaim, ResourceSlice,
};
use kgpu::model::{ClaimSource, Cluster, DraObject, ModelEvent, Object, PodClaim, SourceInfo, SourceKind, Sym};

const DRIVER: &str = "gpu.nvidia.com";
const NODES: usize = 1_000;
const HELD_PER_NODE: usize = 5;
const WAITING: usize = 500;

fn gpu(node: &str, minor: usize) -> Device {
    let q = |name: &str| Sym::new(&format!("{DRIVER}/{name}"));
    let s = |v: &str| AttributeValue::String(v.into());
    let mut attributes = vec![
        (q("type"), s("gpu")),
        (q("uuid"), s(&format!("GPU-{node}-{minor}"))),
        (q("productName"), s("NVIDIA H100 80GB HBM3")),
        (q("driverVersion"), AttributeValue::Version("580.95.5".into())),
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

fn template(name: &str, count: u64) -> ResourceClaim {
    let request = DeviceRequest {
        name: Sym::new("gpu"),
        alternatives: Box::new([(Sym::new("gpu"), ExactRequest::count(DRIVER, count, Box::new([])))]),
    };
    ResourceClaim::asking(Sym::new("ml"), name, true, Box::new([request]))
}

fn claim_entry(template: &str, generated: Option<&str>) -> Box<[PodClaim]> {
    Box::new([PodClaim {
        name: Sym::new("gpu"),
        source: ClaimSource::Template(template.into()),
        generated: generated.map(Arc::from),
    }])
}

fn dra_fleet() -> Cluster {
    let mut c = Cluster::new(SourceInfo { kind: SourceKind::Kube, name: "bench-dra".into() });
    c.apply(ModelEvent::Clock(1_796_029_200));
    let mut events = Vec::new();
    let one = template("one-gpu", 1);
    let eight = template("eight-gpus", 8);
    events.push(ModelEvent::Upsert(Object::Dra(DraObject::Class(DeviceClass {
        name: DRIVER.into(),
        selectors: Box::new([
            "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'".into()
        ]),
        extended_resource: None,
    }))));
    for t in [&one, &eight] {
        events.push(ModelEvent::Upsert(Object::Dra(DraObject::Claim(t.clone()))));
    }
    for n in 0..NODES {
        let name = format!("h100-dra-{n:04}");
        events.push(ModelEvent::Upsert(Object::Node(node(&name).cpu(192).memory_gi(2048).build())));
        events.push(ModelEvent::Upsert(Object::Dra(DraObject::Slice(ResourceSlice {
            name: format!("{name}-{DRIVER}-7q2xk").into(),
            driver: Sym::new(DRIVER),
            pool: Sym::new(&name),
            pool_generation: 1,
            slice_count: 1,
            node: Some(Sym::new(&name)),
            devices: (0..8).map(|m| gpu(&name, m)).collect(),
            shared_counters: Box::new([]),
            unmodelled: Box::new([]),
        }))));
        for k in 0..HELD_PER_NODE {
            let pod_name = format!("serve-{n:04}-{k}");
            let generated = format!("{pod_name}-gpu-x1y2z");
            let mut p = pod(&pod_name)
                .ns("ml")
                .cpu_milli(8000)
                .owner("ReplicaSet", "serve-5d8c7")
                .on(&name)
                .running()
                .transitioned(1_796_000_000)
                .build();
            p.claims = claim_entry("one-gpu", Some(&generated));
            let claim = ResourceClaim {
                name: generated.as_str().into(),
                template: false,
                owner_pod: Some(Arc::from(pod_name.as_str())),
                reserved_for: Box::new([Arc::from(pod_name.as_str())]),
                allocated: Box::new([AllocatedDevice {
                    request: Sym::new("gpu"),
                    driver: Sym::new(DRIVER),
                    pool: Sym::new(&name),
                    device: Sym::new(&format!("gpu-{k}")),
                    admin_access: false,
                }]),
                allocated_node: Some(Sym::new(&name)),
                ..one.clone()
            };
            events.push(ModelEvent::Upsert(Object::Pod(p)));
            events.push(ModelEvent::Upsert(Object::Dra(DraObject::Claim(claim))));
        }
    }
    let message = format!("0/{NODES} nodes are available: {NODES} cannot allocate all claims.");
    for i in 0..=WAITING {
        let (name, t) =
            if i == WAITING { ("train-8".to_string(), "eight-gpus") } else { (format!("wait-{i}"), "one-gpu") };
        let mut p = pod(&name)
            .ns("ml")
            .cpu_milli(8000)
            .owner("ReplicaSet", "wait-7f9c4")
            .created(1_796_000_000)
            .unschedulable(&message, 1_796_000_000)
            .build();
        p.claims = claim_entry(t, None);
        events.push(ModelEvent::Upsert(Object::Pod(p)));
    }
    c.apply_all(events);
    c
}

fn bench(crit: &mut Criterion) {
    let snap = dra_fleet().snapshot();
    let now = snap.clock;
    let thresholds = Thresholds::default();
    let a = analysis::analyze(&snap, now, &thresholds);
    eprintln!(
        "dra fleet: {} GPUs, {} free; plan for {:?}: {:?}, {} step(s)",
        a.totals.gpus,
        a.totals.free,
        a.fragmentation.plan.target,
        a.fragmentation.plan.status,
        a.fragmentation.plan.steps.len()
    );
    let mut g = crit.benchmark_group("dra");
    g.sample_size(10);
    g.bench_function("analysis 1k DRA nodes, 5k claim pods, 501 waiting", |b| {
        b.iter(|| analysis::analyze(&snap, now, &thresholds))
    });
    g.bench_function("stage: fragmentation (shapes and the plan)", |b| {
        b.iter(|| fragmentation::analyze(&Index::build(&snap, now)))
    });
    let index = Index::build(&snap, now);
    let shapes = fragmentation::analyze(&index).shapes;
    g.bench_function("stage: the plan alone", |b| b.iter(|| fragmentation::plan(&Index::build(&snap, now), &shapes)));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
