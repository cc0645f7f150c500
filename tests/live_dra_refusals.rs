//! Refusals the scheduler's DRA allocator makes before it looks for
//! devices, against the real scheduler: a claim for more devices than one
//! allocation holds (32), and a pool whose driver has not published all its
//! ResourceSlices (the allocator takes none of its devices, and a request for
//! all devices on its node fails the attempt). kgpu's claims step blocks each
//! pod for the reason the scheduler gives.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on broken fixtures

mod support;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use support::controlplane::ControlPlane;
use support::kube::{client, decided, dra_api, namespace, publish_h100s, snapshot_json};

const NS: &str = "dra-refusals";

async fn create(api: &Api<DynamicObject>, object: Value) {
    let object: DynamicObject = serde_json::from_value(object).unwrap();
    api.create(&PostParams::default(), &object).await.unwrap();
}

async fn ready_node(nodes: &Api<Node>, name: &str) {
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}});
    nodes.create(&PostParams::default(), &serde_json::from_value(node).unwrap()).await.unwrap();
    let status = json!({"status": {
        "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110"},
        "capacity": {"cpu": "64", "memory": "512Gi", "pods": "110"},
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status"}]}});
    nodes.patch_status(name, &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
}

/// A claim named `name` with one request `gpu` (`count`, or all devices).
fn claim(name: &str, count: Option<u32>) -> Value {
    let mut exactly = json!({"deviceClassName": "gpu.nvidia.com"});
    match count {
        Some(n) => exactly["count"] = json!(n),
        None => exactly["allocationMode"] = json!("All"),
    }
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name, "namespace": NS},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}})
}

/// A pod using claim `name` (of the same name), kept to `node` if given.
fn pod(name: &str, node: Option<&str>) -> Pod {
    let mut spec = json!({"terminationGracePeriodSeconds": 0,
        "containers": [{"name": "main", "image": "nvcr.io/nvidia/pytorch:25.01-py3", "resources": {"claims": [{"name": "gpu"}]}}],
        "resourceClaims": [{"name": "gpu", "resourceClaimName": name}]});
    if let Some(node) = node {
        spec["nodeSelector"] = json!({"kubernetes.io/hostname": node});
    }
    serde_json::from_value(
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS}, "spec": spec}),
    )
    .unwrap()
}

/// The scheduler's refusal of `name` (it must not bind it).
async fn refusal(pods: &Api<Pod>, name: &str) -> String {
    let said = decided(pods, name).await;
    assert!(!said.starts_with("bound to "), "{name}: {said}");
    said
}

#[tokio::test]
async fn the_claim_limit_and_a_pool_being_updated_block_as_the_scheduler_says() {
    let Some(cp) = ControlPlane::shared_if_enabled() else { return };
    let client = client(cp).await;
    namespace(&client, NS).await;
    let nodes: Api<Node> = Api::all(client.clone());
    ready_node(&nodes, "lim-0").await;
    publish_h100s(&client, "lim-0").await;
    // upd-0's driver says its pool has two slices and has written one.
    ready_node(&nodes, "upd-0").await;
    let devices: Vec<Value> = (0..4)
        .map(|i| json!({"name": format!("gpu-{i}"), "attributes": {"type": {"string": "gpu"}, "uuid": {"string": format!("GPU-upd-0-{i}")}}}))
        .collect();
    create(
        &dra_api(&client, "ResourceSlice", "resourceslices", None),
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "upd-0-gpu.nvidia.com-1"},
            "spec": {"driver": "gpu.nvidia.com", "nodeName": "upd-0",
                "pool": {"name": "upd-0", "generation": 1, "resourceSliceCount": 2}, "devices": devices}}),
    )
    .await;
    create(
        &dra_api(&client, "DeviceClass", "deviceclasses", None),
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.nvidia.com"},
            "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"}}]}}),
    )
    .await;
    let claims = dra_api(&client, "ResourceClaim", "resourceclaims", Some(NS));
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    // Forty devices: more than an allocation holds, on any node.
    create(&claims, claim("forty", Some(40))).await;
    // All of upd-0's devices, and one of them: its pool is being updated.
    create(&claims, claim("all-upd", None)).await;
    create(&claims, claim("one-upd", Some(1))).await;
    pods.create(&PostParams::default(), &pod("forty", None)).await.unwrap();
    pods.create(&PostParams::default(), &pod("all-upd", Some("upd-0"))).await.unwrap();
    pods.create(&PostParams::default(), &pod("one-upd", Some("upd-0"))).await.unwrap();

    let said = [
        ("forty", refusal(&pods, "forty").await),
        ("all-upd", refusal(&pods, "all-upd").await),
        ("one-upd", refusal(&pods, "one-upd").await),
    ];
    for (name, message) in &said {
        eprintln!("kube-scheduler on {name}: {message}");
    }
    assert!(said[0].1.contains("number of requested devices 40 exceeds the claim limit of 32"), "{}", said[0].1);
    assert!(said[1].1.contains("resource pool gpu.nvidia.com/upd-0 is currently being updated"), "{}", said[1].1);
    assert!(said[2].1.contains("cannot allocate all claims"), "{}", said[2].1);

    // kgpu blocks each at its claims step, for the scheduler's reason, and agrees.
    let doc = snapshot_json(cp);
    let item = |name: &str| {
        doc["pending"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} not pending: {}", doc["pending"]))
    };
    for (name, summary) in [
        ("forty", "a claim asks 40 devices, more than one claim can hold (32)"),
        ("all-upd", "a request for all devices meets pool gpu.nvidia.com/upd-0, which is being updated"),
    ] {
        let p = item(name);
        eprintln!("kgpu on {name}: {}", p["summary"]);
        assert_eq!(p["blockingStep"], "claims", "{p}");
        assert!(p["summary"].as_str().unwrap().contains(summary), "{p}");
        assert_eq!(p["agreesWithScheduler"], true, "{p}");
    }
    let one = item("one-upd");
    eprintln!("kgpu on one-upd: {}", one["summary"]);
    assert_eq!(one["blockingStep"], "claims", "{one}");
    assert!(one["summary"].as_str().unwrap().contains("the DRA pool of upd-0 is being updated"), "{one}");
    assert_eq!(one["agreesWithScheduler"], true, "{one}");
    let claims_step = one["steps"].as_array().unwrap().iter().find(|s| s["step"] == "claims").cloned().unwrap();
    assert!(
        claims_step["details"].as_array().unwrap().iter().any(|d| d
            .as_str()
            .unwrap()
            .contains("pool gpu.nvidia.com/upd-0 is being updated (1 of its 2 ResourceSlices published)")),
        "{claims_step}"
    );
}
