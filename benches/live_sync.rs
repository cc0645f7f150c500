//! Time to the first complete frame on a real API server with 2,000 nodes
//! and 20,000 pods, next to `kubectl get pods -A -o json --chunk-size=500`
//! timed in the same run (DESIGN.md budget: within 1.2×), and model bytes per
//! pod for real-shaped pods as the API server returns them (budget ≤ 1 KiB).
//!
//! `cargo bench --bench live_sync` (builds and starts the test control plane)

#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark may panic on setup failure

#[path = "support/counting.rs"]
mod counting;

#[path = "../tests/support/controlplane.rs"]
mod controlplane;

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

#[global_allocator]
static ALLOC: counting::Counting = counting::Counting;

const NODES: usize = 2_000;
const PODS: usize = 20_000;
const REQUIRE: &str = include_str!("../tests/fixtures/compat/nvidia-require-cuda-12.4.1.env");

fn main() {
    let cp = controlplane::ControlPlane::start().expect("control plane");
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let target = kgpu::sources::kube::client::Target { kubeconfig: Some(cp.kubeconfig.clone()), context: None };
        let (client, _) = kgpu::sources::kube::client::connect(&target).await.unwrap();
        let t0 = Instant::now();
        populate(&client).await;
        eprintln!("created {NODES} nodes and {PODS} pods in {:.1}s", t0.elapsed().as_secs_f64());

        // kubectl, the baseline.
        let kubectl = cp.bin().join("kubectl");
        let mut kubectl_times = Vec::new();
        for _ in 0..3 {
            let start = Instant::now();
            let status = Command::new(&kubectl)
                .args(["get", "pods", "-A", "-o", "json", "--chunk-size=500", "--kubeconfig"])
                .arg(&cp.kubeconfig)
                .stdout(Stdio::null())
                .status()
                .unwrap();
            assert!(status.success());
            kubectl_times.push(start.elapsed().as_secs_f64());
        }
        // kgpu: connect, list and watch every feed, first complete snapshot and frame.
        let mut kgpu_times = Vec::new();
        for _ in 0..3 {
            let start = Instant::now();
            let (snap, now) = kgpu::runtime::load::kube(&target, &Default::default()).await.unwrap();
            let views = kgpu::view_model::panes::Views::build(Arc::new(snap), now, &Default::default(), None);
            let mut term = ratatui::Terminal::new(ratatui::backend::TestBackend::new(200, 60)).unwrap();
            let app = kgpu::app::App::new(true, "dark", false);
            let theme = kgpu::ui::Theme::builtin("dark");
            term.draw(|f| {
                kgpu::ui::draw(f, &app, &views, &theme, &Default::default());
            })
            .unwrap();
            kgpu_times.push(start.elapsed().as_secs_f64());
            assert_eq!(views.snap.pods.len(), PODS);
            assert_eq!(views.snap.nodes.len(), NODES);
        }
        let median = |v: &mut Vec<f64>| {
            v.sort_by(|a, b| a.total_cmp(b));
            v[v.len() / 2]
        };
        let (k, g) = (median(&mut kubectl_times), median(&mut kgpu_times));

        // Bytes per pod: real API objects converted into the model.
        let pods: Api<Pod> = Api::all(client.clone());
        let list = pods.list(&ListParams::default().limit(5000)).await.unwrap();
        let mut cluster = kgpu::model::Cluster::new(kgpu::model::SourceInfo {
            kind: kgpu::model::SourceKind::Kube,
            name: "bench".into(),
        });
        // The first pod interns the shared strings (namespace, image, the requirement).
        let first = kgpu::sources::kube::convert::pod(&list.items[0]).unwrap();
        cluster.apply(kgpu::model::ModelEvent::Upsert(kgpu::model::Object::Pod(first)));
        let before = counting::live();
        let n = list.items.len() - 1;
        for p in &list.items[1..] {
            let pod = kgpu::sources::kube::convert::pod(p).unwrap();
            cluster.apply(kgpu::model::ModelEvent::Upsert(kgpu::model::Object::Pod(pod)));
        }
        let per_pod = (counting::live() - before) as f64 / n as f64;

        println!("kubectl get pods -A -o json --chunk-size=500: {k:.2}s (median of 3)");
        println!("kgpu first complete frame (all feeds, {NODES} nodes, {PODS} pods): {g:.2}s (median of 3)");
        println!("ratio: {:.2}× (budget ≤ 1.2×)", g / k);
        println!("model memory per real-shaped pod from the API server: {per_pod:.0} B (budget 1024 B)");
        let ok = g / k <= 1.2 && per_pod <= 1024.0;
        println!("budgets: {}", if ok { "met" } else { "MISSED" });
        if !ok {
            std::process::exit(1);
        }
    });
}

async fn populate(client: &kube::Client) {
    let nodes: Api<Node> = Api::all(client.clone());
    futures::stream::iter(0..NODES)
        .for_each_concurrent(32, |i| {
            let nodes = nodes.clone();
            async move {
                let name = format!("bench-{i:05}");
                let node: Node = serde_json::from_value(json!({"metadata": {"name": name, "labels": {
                    "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": "8", "nvidia.com/gpu.present": "true",
                    "nvidia.com/cuda.driver-version.full": "550.54.15", "nvidia.com/cuda.runtime-version.major": "12",
                    "nvidia.com/cuda.runtime-version.minor": "4", "kubernetes.io/hostname": name}},
                    "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]}}))
                .unwrap();
                nodes.create(&PostParams::default(), &node).await.unwrap();
                let status = json!({"status": {"capacity": {"cpu": "192", "memory": "2Ti", "pods": "110", "nvidia.com/gpu": "8"},
                    "allocatable": {"cpu": "192", "memory": "2Ti", "pods": "110", "nvidia.com/gpu": "8"},
                    "conditions": [{"type": "Ready", "status": "True"}]}});
                nodes.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
            }
        })
        .await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for t in 0..10 {
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": format!("team-{t}")}})).unwrap();
        namespaces.create(&PostParams::default(), &ns).await.unwrap();
    }
    let require = REQUIRE.lines().find_map(|l| l.strip_prefix("NVIDIA_REQUIRE_CUDA=")).unwrap();
    futures::stream::iter(0..PODS)
        .for_each_concurrent(32, |i| {
            let client = client.clone();
            async move {
                let ns = format!("team-{}", i % 10);
                let pods: Api<Pod> = Api::namespaced(client, &ns);
                let pod: Pod = serde_json::from_value(json!({
                    "metadata": {"name": format!("train-{i:05}-0-x7k2q"), "labels": {"batch.kubernetes.io/job-name": format!("train-{:05}", i / 8),
                        "kueue.x-k8s.io/queue-name": "research"}},
                    "spec": {"nodeName": format!("bench-{:05}", i % NODES), "terminationGracePeriodSeconds": 0,
                        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                        "containers": [{"name": "main", "image": "nvcr.io/nvidia/pytorch:24.03-py3",
                            "env": [{"name": "NVIDIA_REQUIRE_CUDA", "value": require}, {"name": "NCCL_DEBUG", "value": "INFO"}],
                            "resources": {"requests": {"cpu": "12", "memory": "120Gi"}, "limits": {"nvidia.com/gpu": "1"}}}]}
                }))
                .unwrap();
                pods.create(&PostParams::default(), &pod).await.unwrap();
            }
        })
        .await;
}
