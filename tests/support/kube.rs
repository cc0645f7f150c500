//! Small helpers for live tests: a kube client for the test control plane,
//! GPU nodes with capacity set through the status subresource, namespaces,
//! and waiting for conditions.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use kgpu::model::{Snapshot, SourceInfo, SourceKind};
use kgpu::sources::kube::watch;
use tokio::sync::watch as tokio_watch;

use super::controlplane::ControlPlane;

pub async fn client(cp: &ControlPlane) -> Client {
    kgpu::sources::kube::client::connect(&kgpu::sources::kube::client::Target {
        kubeconfig: Some(cp.kubeconfig.clone()),
        context: None,
    })
    .await
    .expect("client for the test control plane")
    .0
}

/// The `resource.k8s.io/v1` objects of `kind` (its `plural`), in `ns` or cluster-wide.
pub fn dra_api(client: &Client, kind: &str, plural: &str, ns: Option<&str>) -> Api<kube::api::DynamicObject> {
    let gvk = kube::api::GroupVersionKind::gvk("resource.k8s.io", "v1", kind);
    let ar = kube::api::ApiResource::from_gvk_with_plural(&gvk, plural);
    match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    }
}

/// Publishes `node`'s four H100s as NVIDIA's DRA driver does: one
/// ResourceSlice `<node>-gpu.nvidia.com` of whole GPUs with their uuid,
/// product, driver version and memory.
pub async fn publish_h100s(client: &Client, node: &str) {
    let devices: Vec<serde_json::Value> = (0..4)
        .map(|i| {
            json!({"name": format!("gpu-{i}"),
                "attributes": {"type": {"string": "gpu"}, "uuid": {"string": format!("GPU-{node}-{i}")},
                    "productName": {"string": "NVIDIA H100 80GB HBM3"}, "driverVersion": {"version": "580.95.5"}},
                "capacity": {"memory": {"value": "80Gi"}}})
        })
        .collect();
    let slice = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": format!("{node}-gpu.nvidia.com")},
        "spec": {"driver": "gpu.nvidia.com", "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}, "devices": devices}});
    let slice: kube::api::DynamicObject = serde_json::from_value(slice).expect("a ResourceSlice");
    dra_api(client, "ResourceSlice", "resourceslices", None)
        .create(&PostParams::default(), &slice)
        .await
        .expect("the ResourceSlice is created");
}

/// The node the scheduler bound `name` to (`bound to NODE`), or its refusal.
pub async fn decided(pods: &Api<Pod>, name: &str) -> String {
    eventually(&format!("the scheduler's word on {name}"), Duration::from_secs(60), || {
        let pods = pods.clone();
        let name = name.to_string();
        async move {
            let p = pods.get(&name).await.ok()?;
            if let Some(node) = p.spec.as_ref()?.node_name.clone() {
                return Some(format!("bound to {node}"));
            }
            // Not the gate's own condition: the scheduler's, once it tried.
            let tried = |c: &k8s_openapi::api::core::v1::PodCondition| {
                c.type_ == "PodScheduled" && c.reason.as_deref() != Some("SchedulingGated")
            };
            p.status?.conditions?.into_iter().find(tried).and_then(|c| c.message)
        }
    })
    .await
}

/// `kgpu snapshot -o json` of the control plane (no agents read).
pub fn snapshot_json(cp: &ControlPlane) -> serde_json::Value {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kgpu"))
        .args(["snapshot", "--agents", "off", "-o", "json", "--kubeconfig"])
        .arg(&cp.kubeconfig)
        .output()
        .expect("kgpu runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("kgpu's JSON")
}

/// A unique name for this test's objects.
pub fn unique(prefix: &str) -> String {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    format!("{prefix}-{}-{}", std::process::id() % 100_000, N.fetch_add(1, std::sync::atomic::Ordering::SeqCst))
}

pub async fn namespace(client: &Client, name: &str) {
    let api: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    let _ = api.create(&PostParams::default(), &ns).await;
}

/// A Ready GPU node with `gpus` nvidia.com/gpu, extra labels and taints.
pub async fn gpu_node(client: &Client, name: &str, gpus: u32, labels: serde_json::Value, taints: serde_json::Value) {
    let api: Api<Node> = Api::all(client.clone());
    let mut all_labels = json!({"kubernetes.io/hostname": name, "nvidia.com/gpu.present": "true", "nvidia.com/gpu.count": gpus.to_string(), "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"});
    if let (Some(a), Some(b)) = (all_labels.as_object_mut(), labels.as_object()) {
        for (k, v) in b {
            a.insert(k.clone(), v.clone());
        }
    }
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": all_labels},
        "spec": {"taints": taints}
    }))
    .unwrap();
    api.create(&PostParams::default(), &node).await.expect("create node");
    let status = json!({"status": {
        "capacity": {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": gpus.to_string()},
        "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": gpus.to_string()},
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status"}]
    }});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status)).await.expect("node status");
}

pub async fn delete_node(client: &Client, name: &str) {
    let api: Api<Node> = Api::all(client.clone());
    let _ = api.delete(name, &Default::default()).await;
}

/// A pod asking for `gpus` GPUs (limits), with optional extras merged into its spec.
pub fn gpu_pod(name: &str, gpus: u32, spec_extra: serde_json::Value) -> Pod {
    let mut spec = json!({
        "containers": [{"name": "main", "image": "nvidia/cuda:12.4.1-runtime-ubuntu22.04",
            "resources": {"limits": {"nvidia.com/gpu": gpus.to_string()}, "requests": {"cpu": "1", "memory": "1Gi"}}}],
        "terminationGracePeriodSeconds": 0
    });
    if let (Some(a), Some(b)) = (spec.as_object_mut(), spec_extra.as_object()) {
        for (k, v) in b {
            a.insert(k.clone(), v.clone());
        }
    }
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap()
}

/// Polls `check` until it returns Some, or panics after `timeout` with `what`.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out after {}s waiting for {what}", timeout.as_secs());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// kgpu's live source and model, in-process.
pub async fn source(
    cp: &ControlPlane,
    kubeconfig: &std::path::Path,
) -> (tokio_watch::Receiver<Arc<Snapshot>>, Vec<tokio::task::JoinHandle<()>>) {
    source_with(cp, kubeconfig, watch::Scope::default()).await
}

/// [`source`] with a scope of its own (a namespace, the agents' transport).
pub async fn source_with(
    cp: &ControlPlane,
    kubeconfig: &std::path::Path,
    scope: watch::Scope,
) -> (tokio_watch::Receiver<Arc<Snapshot>>, Vec<tokio::task::JoinHandle<()>>) {
    let target = kgpu::sources::kube::client::Target { kubeconfig: Some(kubeconfig.to_path_buf()), context: None };
    let (clients, _) = kgpu::sources::kube::client::connect_clients(&target, scope.liveness).await.unwrap();
    let (tx, rx) = tokio::sync::mpsc::channel(1024);
    let (snapshots, model) =
        kgpu::runtime::source::spawn_model(SourceInfo { kind: SourceKind::Kube, name: cp.server.clone() }, rx);
    let mut tasks = watch::spawn_all(clients, scope, tx, snapshots.clone());
    tasks.push(model);
    (snapshots, tasks)
}

pub async fn until(snapshots: &tokio_watch::Receiver<Arc<Snapshot>>, what: &str, check: impl Fn(&Snapshot) -> bool) {
    eventually(what, Duration::from_secs(20), || {
        let ok = check(&snapshots.borrow());
        async move { ok.then_some(()) }
    })
    .await
}
