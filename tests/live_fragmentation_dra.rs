//! Fragmentation through DRA against the real kube-scheduler: three nodes
//! publish four whole GPUs each as ResourceSlices (as NVIDIA's DRA driver
//! does), and claims the scheduler allocated hold 2, 3 and 1 of them. A pod
//! waits with a claim from a template asking two GPUs. kgpu says how many
//! such pods fit at once (its shape's largest gang), and which free GPUs
//! none of them can use; then as many pods with claims of the same spec are
//! created, one at a time, and the scheduler binds exactly that many and
//! refuses the next.
//!
//! No controller runs on this control plane, so the waiting pod's claim is
//! never made from its template (kgpu reads the template); the pods that
//! test the count use standalone claims of the same spec.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on broken fixtures

mod support;

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kgpu::analysis::{self, Thresholds};
use kgpu::runtime::load;
use kgpu::sources::kube::{client::Target, watch::Scope};
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::{Value, json};
use support::controlplane::ControlPlane;
use support::kube::{client, dra_api, eventually, namespace, publish_h100s};

const NS: &str = "frag-dra";
const CASE: &str = "kgpu.dev/frag-dra";

async fn create(api: &Api<DynamicObject>, object: Value) {
    let object: DynamicObject = serde_json::from_value(object).unwrap();
    api.create(&PostParams::default(), &object).await.unwrap();
}

/// A Ready node with no device-plugin GPUs, and its four GPUs as one ResourceSlice.
async fn dra_node(client: &kube::Client, name: &str) {
    let node = json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, CASE: "yes"}},
        "status": {
            "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110"},
            "capacity": {"cpu": "64", "memory": "512Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status"}]}});
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
    let created = nodes.create(&PostParams::default(), &serde_json::from_value(node.clone()).unwrap()).await.unwrap();
    let status = json!({"status": node["status"]});
    nodes
        .patch_status(
            created.metadata.name.as_deref().unwrap(),
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&status),
        )
        .await
        .unwrap();
    publish_h100s(client, name).await;
}

fn two_gpus() -> Value {
    json!({"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 2}}]}})
}

/// A pod of this test's nodes using `claim` (a standalone claim) or, with
/// `template`, a claim made from that template.
fn pod(name: &str, claim: &str, template: bool, host: Option<&str>) -> Pod {
    let source =
        if template { json!({"resourceClaimTemplateName": claim}) } else { json!({"resourceClaimName": claim}) };
    let mut selector = json!({CASE: "yes"});
    if let Some(host) = host {
        selector["kubernetes.io/hostname"] = json!(host);
    }
    let mut entry = json!({"name": "gpu"});
    entry.as_object_mut().unwrap().extend(source.as_object().unwrap().clone());
    serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS},
        "spec": {"nodeSelector": selector, "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "main", "image": "nvcr.io/nvidia/pytorch:25.01-py3", "resources": {"claims": [{"name": "gpu"}]}}],
            "resourceClaims": [entry]}}))
    .unwrap()
}

/// The node the scheduler bound `name` to, or its refusal.
async fn placed(pods: &Api<Pod>, name: &str) -> Result<String, String> {
    eventually(&format!("the scheduler decides on {name}"), Duration::from_secs(60), || {
        let pods = pods.clone();
        let name = name.to_string();
        async move {
            let pod = pods.get(&name).await.ok()?;
            if let Some(node) = pod.spec.as_ref()?.node_name.clone() {
                return Some(Ok(node));
            }
            let refused =
                pod.status?.conditions?.into_iter().find(|c| c.type_ == "PodScheduled" && c.status == "False");
            refused.map(|c| Err(c.message.unwrap_or_default()))
        }
    })
    .await
}

#[tokio::test]
async fn pods_asking_gpus_through_claims_fit_as_kgpu_counts() {
    let Some(cp) = ControlPlane::shared_if_enabled() else { return };
    let client = client(cp).await;
    let classes = dra_api(&client, "DeviceClass", "deviceclasses", None);
    create(&classes, json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.nvidia.com"},
        "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"}}]}}))
    .await;
    for i in 0..3 {
        dra_node(&client, &format!("fd-{i}")).await;
    }
    namespace(&client, NS).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let claims = dra_api(&client, "ResourceClaim", "resourceclaims", Some(NS));
    // Claims of 2, 3 and 1 GPUs, allocated by the scheduler on fd-0, fd-1, fd-2.
    for (i, held) in [2, 3, 1].into_iter().enumerate() {
        let spec = json!({"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": held}}]}});
        create(&claims, json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": format!("held-{i}"), "namespace": NS}, "spec": spec})).await;
        let name = format!("holder-{i}");
        pods.create(&PostParams::default(), &pod(&name, &format!("held-{i}"), false, Some(&format!("fd-{i}"))))
            .await
            .unwrap();
        assert_eq!(placed(&pods, &name).await, Ok(format!("fd-{i}")));
    }
    // The pod that waits: two GPUs from a template.
    create(
        &dra_api(&client, "ResourceClaimTemplate", "resourceclaimtemplates", Some(NS)),
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "two-gpus", "namespace": NS},
            "spec": {"spec": two_gpus()}}),
    )
    .await;
    pods.create(&PostParams::default(), &pod("serve-0", "two-gpus", true, None)).await.unwrap();

    // kgpu, from a live sync, once every claim it needs is allocated.
    let target = Target { kubeconfig: Some(cp.kubeconfig.clone()), context: None };
    let (snap, now) = load::kube(&target, &Scope::default()).await.unwrap();
    let a = analysis::analyze(&snap, now, &Thresholds::default());
    let shape = a
        .fragmentation
        .shapes
        .iter()
        .find(|s| s.demand.is_named(NS, "serve-0"))
        .unwrap_or_else(|| panic!("serve-0's shape: {:?}", a.fragmentation.shapes));
    assert_eq!(shape.demand.label(), "1×2 DRA");
    eprintln!("kgpu: largest {} usable {} stranded {}", shape.largest_gang, shape.usable_free, shape.stranded_free);
    // 2, 1 and 3 GPUs free: one pod on fd-0, one on fd-2; fd-1's and one of fd-2's are stranded.
    assert_eq!((shape.largest_gang, shape.usable_free, shape.stranded_free), (2, 4, 2));

    // The scheduler places exactly that many pods of the same spec, and refuses the next.
    for j in 0..=shape.largest_gang {
        create(&claims, json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": format!("like-{j}"), "namespace": NS}, "spec": two_gpus()})).await;
        let name = format!("like-serve-{j}");
        pods.create(&PostParams::default(), &pod(&name, &format!("like-{j}"), false, None)).await.unwrap();
        let decided = placed(&pods, &name).await;
        eprintln!("kube-scheduler on {name}: {decided:?}");
        if j < shape.largest_gang {
            assert!(decided.is_ok(), "kgpu said {} fit: {decided:?}", shape.largest_gang);
        } else {
            let refusal = decided.expect_err("one more than kgpu's count must not fit");
            assert!(refusal.contains("cannot allocate all claims"), "{refusal}");
        }
    }
}
