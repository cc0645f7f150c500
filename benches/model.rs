//! Model budgets (DESIGN.md): ≤ 1 KiB per pod, ≤ 4 KiB per node, ≥ 200,000
//! pod events/s ingested on one core. Prints the measured figures and
//! whether each budget holds; exits non-zero if one is missed.
//!
//! `cargo bench --bench model`
//!
//! Pods are shaped like real GPU pods (requests, tolerations, owner, the
//! real 1.5 KB NVIDIA_REQUIRE_CUDA of nvidia/cuda:12.4.1); nodes carry the
//! complete label set of a real H100 node (tests/fixtures/nodes/).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on broken fixtures

#[path = "support/counting.rs"]
mod counting;

use std::time::Instant;

use kgpu::model::build::{node, pod};
use kgpu::model::{Cluster, ModelEvent, Object, SourceInfo, SourceKind};

#[global_allocator]
static ALLOC: counting::Counting = counting::Counting;

const REQUIRE: &str = include_str!("../tests/fixtures/compat/nvidia-require-cuda-12.4.1.env");
const LABELS: &str = include_str!("../tests/fixtures/nodes/h100-80gb-mig-mixed-all-balanced.labels.json");

fn real_node(i: usize) -> kgpu::model::Node {
    let labels: std::collections::BTreeMap<String, String> = serde_json::from_str(LABELS).expect("fixture parses");
    let mut b = node(&format!("gpu-node-{i:05}")).gpus(8).taint(
        "nvidia.com/gpu",
        "present",
        kgpu::model::TaintEffect::NoSchedule,
    );
    for (k, v) in &labels {
        // Each node's own: its hostname and the time GFD labelled it.
        let v = match k.as_str() {
            "kubernetes.io/hostname" => format!("gpu-node-{i:05}"),
            "nvidia.com/gfd.timestamp" => (1_715_709_242 + 7 * i).to_string(),
            _ => v.clone(),
        };
        b = b.label(k, &v);
    }
    b.build()
}

fn real_pod(i: usize, nodes: usize) -> kgpu::model::Pod {
    let require = REQUIRE.lines().find_map(|l| l.strip_prefix("NVIDIA_REQUIRE_CUDA=")).unwrap_or("cuda>=12.4");
    pod(&format!("train-{:05}-{}-x7k2q", i / 8, i % 8))
        .ns(["team-a", "team-b", "inference", "research"][i % 4])
        .gpus(1 + (i % 8) as u64)
        .cpu_milli(12_000)
        .memory_gi(120)
        .tolerate("nvidia.com/gpu")
        .toleration(kgpu::model::Toleration::exists("node.kubernetes.io/not-ready"))
        .toleration(kgpu::model::Toleration::exists("node.kubernetes.io/unreachable"))
        .owner("Job", &format!("train-{:05}", i / 8))
        .queue("research")
        .image("nvcr.io/nvidia/pytorch:24.03-py3")
        .cuda_require(require)
        .on(&format!("gpu-node-{:05}", i % nodes))
        .running()
        .created(1_796_000_000 + i as i64)
        .build()
}

fn main() {
    let source = SourceInfo { kind: SourceKind::Kube, name: "bench".into() };
    // Warm the interner with one node and one pod so shared strings are not
    // charged to the first object.
    {
        let mut warm = Cluster::new(source.clone());
        warm.apply(ModelEvent::Upsert(Object::Node(real_node(0))));
        warm.apply(ModelEvent::Upsert(Object::Pod(real_pod(0, 1))));
    }

    const NODES: usize = 10_000;
    const PODS: usize = 100_000;
    let mut cluster = Cluster::new(source.clone());
    let before = counting::live();
    for i in 0..NODES {
        cluster.apply(ModelEvent::Upsert(Object::Node(real_node(i))));
    }
    let after_nodes = counting::live();
    for i in 0..PODS {
        cluster.apply(ModelEvent::Upsert(Object::Pod(real_pod(i, NODES))));
    }
    let after_pods = counting::live();
    let per_node = (after_nodes - before) as f64 / NODES as f64;
    let per_pod = (after_pods - after_nodes) as f64 / PODS as f64;

    // Ingest: 300,000 pod events (adds and updates) on this one thread; the
    // events are built up front so only `apply` is timed.
    let events: Vec<ModelEvent> = (0..300_000usize)
        .map(|i| {
            let mut p = real_pod(i % 150_000, NODES);
            if i >= 150_000 {
                p.phase = kgpu::model::PodPhase::Succeeded;
            }
            ModelEvent::Upsert(Object::Pod(p))
        })
        .collect();
    let mut ingest = Cluster::new(source);
    let start = Instant::now();
    for e in events {
        ingest.apply(e);
    }
    let secs = start.elapsed().as_secs_f64();
    let rate = 300_000.0 / secs;
    let snap_start = Instant::now();
    let snap = ingest.snapshot();
    let snap_ns = snap_start.elapsed().as_nanos();

    println!(
        "model memory per node (real H100 label set, {} labels): {:.0} B (budget 4096 B)",
        real_node(1).labels.len(),
        per_node
    );
    println!("model memory per pod (real-shaped GPU pod):              {:.0} B (budget 1024 B)", per_pod);
    println!("ingest rate (pod upserts, one thread):                   {:.0} events/s (budget ≥ 200,000)", rate);
    println!("snapshot of {} pods: {} ns (O(1) clone)", snap.pods.len(), snap_ns);
    let ok = per_node <= 4096.0 && per_pod <= 1024.0 && rate >= 200_000.0;
    println!("budgets: {}", if ok { "met" } else { "MISSED" });
    if !ok {
        std::process::exit(1);
    }
}
