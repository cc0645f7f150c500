//! Filling a real API server with GPU nodes and bound GPU pods, fast: 32
//! requests in flight, node status through the status subresource.

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

const REQUIRE: &str = include_str!("../../tests/fixtures/compat/nvidia-require-cuda-12.4.1.env");

/// The node `bench-{i:05}`: the labels of a real H100 node (its own
/// hostname and GFD timestamp), the GPU taint, Ready, 8 GPUs.
pub fn node(i: usize) -> Node {
    let name = format!("bench-{i:05}");
    let mut labels = super::labels::h100x8();
    labels.insert("kubernetes.io/hostname".into(), name.clone().into());
    // GFD stamps each node with the time it labelled it.
    labels.insert("nvidia.com/gfd.timestamp".into(), (1_715_709_242 + 7 * i).to_string().into());
    serde_json::from_value(json!({"metadata": {"name": name, "labels": labels},
        "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]}}))
    .unwrap()
}

/// A one-GPU pod of a training Job bound to `node`, or (`gpu` false) its
/// CPU-only data loader.
pub fn pod(i: usize, node: &str, gpu: bool) -> Pod {
    let require = REQUIRE.lines().find_map(|l| l.strip_prefix("NVIDIA_REQUIRE_CUDA=")).unwrap();
    if !gpu {
        return serde_json::from_value(json!({
            "metadata": {"name": format!("loader-{i:06}-5f7d9"), "namespace": format!("team-{}", i % 10), "labels": {"app": "loader"}},
            "spec": {"nodeName": node, "terminationGracePeriodSeconds": 0,
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                "containers": [{"name": "loader", "image": "python:3.11-slim", "resources": {"requests": {"cpu": "4", "memory": "16Gi"}}}]}
        }))
        .unwrap();
    }
    serde_json::from_value(json!({
        "metadata": {"name": format!("train-{i:05}-0-x7k2q"), "namespace": format!("team-{}", i % 10),
            "labels": {"batch.kubernetes.io/job-name": format!("train-{:05}", i / 8), "kueue.x-k8s.io/queue-name": "research"}},
        "spec": {"nodeName": node, "terminationGracePeriodSeconds": 0,
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{"name": "main", "image": "nvcr.io/nvidia/pytorch:24.03-py3",
                "env": [{"name": "NVIDIA_REQUIRE_CUDA", "value": require}, {"name": "NCCL_DEBUG", "value": "INFO"}],
                "resources": {"requests": {"cpu": "12", "memory": "120Gi"}, "limits": {"nvidia.com/gpu": "1"}}}]}
    }))
    .unwrap()
}

/// Creates `nodes` nodes and `pods` pods in ten namespaces, spread evenly:
/// the first 8 on a node hold a GPU each, the rest are CPU-only. Returns the
/// GPUs held.
pub async fn fleet(client: &kube::Client, nodes: usize, pods: usize) -> usize {
    let api: Api<Node> = Api::all(client.clone());
    futures::stream::iter(0..nodes)
        .for_each_concurrent(32, |i| {
            let api = api.clone();
            async move {
                let n = node(i);
                let name = n.metadata.name.clone().unwrap();
                api.create(&PostParams::default(), &n).await.unwrap();
                let status = json!({"status": {"capacity": {"cpu": "192", "memory": "2Ti", "pods": "110", "nvidia.com/gpu": "8"},
                    "allocatable": {"cpu": "192", "memory": "2Ti", "pods": "110", "nvidia.com/gpu": "8"},
                    "conditions": [{"type": "Ready", "status": "True"}]}});
                api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
            }
        })
        .await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for t in 0..10 {
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": format!("team-{t}")}})).unwrap();
        namespaces.create(&PostParams::default(), &ns).await.unwrap();
    }
    futures::stream::iter(0..pods)
        .for_each_concurrent(32, |i| {
            let client = client.clone();
            async move {
                let (node, gpu) = placement(i, pods, nodes);
                let p = pod(i, &format!("bench-{node:05}"), gpu);
                let pods: Api<Pod> = Api::namespaced(client, p.metadata.namespace.as_deref().unwrap());
                pods.create(&PostParams::default(), &p).await.unwrap();
            }
        })
        .await;
    (0..pods).filter(|&i| placement(i, pods, nodes).1).count()
}

/// Pod `i`'s node (pods spread in blocks) and whether it holds a GPU (the
/// first eight on each node do).
pub fn placement(i: usize, pods: usize, nodes: usize) -> (usize, bool) {
    let nodes = nodes.max(1);
    let node = i * nodes / pods.max(1);
    let first = (node * pods).div_ceil(nodes);
    (node, i - first < 8)
}

/// The GPU Operator's DaemonSet pods as they run on every GPU node of a real
/// fleet (its default ClusterPolicy on a MIG-capable node, plus the
/// node-feature-discovery worker its chart installs): `app` label, namespace,
/// and the container port kgpu reads metrics from.
const OPERANDS: [(&str, &str, Option<u16>); 8] = [
    ("nvidia-driver-daemonset", "gpu-operator", None),
    ("nvidia-container-toolkit-daemonset", "gpu-operator", None),
    ("nvidia-device-plugin-daemonset", "gpu-operator", None),
    ("gpu-feature-discovery", "gpu-operator", None),
    ("nvidia-dcgm-exporter", "gpu-operator", Some(9400)),
    ("nvidia-operator-validator", "gpu-operator", None),
    ("nvidia-mig-manager", "gpu-operator", None),
    ("node-feature-discovery-worker", "node-feature-discovery", None),
];

/// One operand pod on node `i`, Running and Ready at `ip`; the exporter's
/// metrics port is `exporter_port` (9400 on a real node).
fn operand(app: &str, namespace: &str, metrics: Option<u16>, i: usize, exporter_port: u16) -> (Pod, serde_json::Value) {
    let name = format!("{app}-{i:05x}");
    let ports = metrics.map_or(json!([]), |_| json!([{"name": "metrics", "containerPort": exporter_port}]));
    let pod = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": namespace,
            "labels": {"app": app, "app.kubernetes.io/part-of": "gpu-operator", "controller-revision-hash": "6b8f9d7c5d"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": app,
                "uid": "3e5d6f70-0000-4000-8000-000000000000", "controller": true}]},
        "spec": {"nodeName": format!("bench-{i:05}"), "priorityClassName": "system-node-critical",
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{"name": app, "image": format!("nvcr.io/nvidia/{app}:v25.3.0"), "ports": ports,
                "resources": {"requests": {"cpu": "10m", "memory": "64Mi"}}}]}
    }))
    .unwrap();
    (
        pod,
        json!({"status": {"phase": "Running", "startTime": "2026-12-01T09:00:30Z",
        "conditions": [{"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"}],
        "containerStatuses": [{"name": app, "ready": true, "restartCount": 0, "image": format!("nvcr.io/nvidia/{app}:v25.3.0"),
            "imageID": "", "state": {"running": {"startedAt": "2026-12-01T09:02:00Z"}}}]}}),
    )
}

/// Puts the GPU Operator's pods on every one of `nodes` nodes, Running at
/// `ip` (the dcgm-exporters answer on `exporter_port` there). Returns the
/// pods created.
pub async fn gpu_operator(client: &kube::Client, nodes: usize, ip: &str, exporter_port: u16) -> usize {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for ns in ["gpu-operator", "node-feature-discovery"] {
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
        namespaces.create(&PostParams::default(), &ns).await.unwrap();
    }
    let work = (0..nodes).flat_map(|i| OPERANDS.iter().map(move |o| (i, o)));
    futures::stream::iter(work)
        .for_each_concurrent(32, |(i, &(app, namespace, metrics))| {
            let client = client.clone();
            async move {
                let (pod, mut status) = operand(app, namespace, metrics, i, exporter_port);
                status["status"]["podIP"] = ip.into();
                status["status"]["podIPs"] = json!([{"ip": ip}]);
                let api: Api<Pod> = Api::namespaced(client, namespace);
                let name = pod.metadata.name.clone().unwrap();
                api.create(&PostParams::default(), &pod).await.unwrap();
                api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
            }
        })
        .await;
    nodes * OPERANDS.len()
}
