//! Where kgpu's DRA model ends, against the real API server: objects that use
//! what kgpu's allocator does not model (a device several claims share, a
//! device bound only once the driver says so, a claim that asks capacity, a
//! DeviceClass that serves an extended resource), as the server keeps them
//! with its default feature gates. For each field the server keeps, kgpu's
//! pending chain says it does not model it, and does not pass its own
//! refusal off as the cluster's.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on broken fixtures

mod support;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::{Value, json};
use support::controlplane::ControlPlane;
use support::kube::{client, decided, dra_api, namespace};

const NS: &str = "dra-beyond";

/// Creates `object` and returns it as the server kept it.
async fn create(api: &Api<DynamicObject>, object: Value) -> Value {
    let object: DynamicObject = serde_json::from_value(object).unwrap();
    let kept = api.create(&PostParams::default(), &object).await.unwrap();
    serde_json::to_value(kept).unwrap()
}

fn kgpu_json(cp: &ControlPlane, args: &[&str]) -> Value {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kgpu"))
        .args(args)
        .arg("--kubeconfig")
        .arg(&cp.kubeconfig)
        .args(["-o", "json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A pod using `claim`, or asking `gpus` example.com/gpu; `gated` holds it
/// from the scheduler until the gate is removed.
fn pod(name: &str, claim: &str, gpus: Option<u32>, gated: bool) -> Pod {
    let mut spec = json!({"terminationGracePeriodSeconds": 0,
        "containers": [{"name": "main", "image": "nvcr.io/nvidia/pytorch:25.01-py3"}]});
    if let Some(n) = gpus {
        spec["containers"][0]["resources"] = json!({"limits": {"example.com/gpu": n.to_string()}});
    } else {
        spec["containers"][0]["resources"] = json!({"claims": [{"name": "gpu"}]});
        spec["resourceClaims"] = json!([{"name": "gpu", "resourceClaimName": claim}]);
    }
    if gated {
        spec["schedulingGates"] = json!([{"name": "kgpu.dev/hold"}]);
    }
    serde_json::from_value(
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS}, "spec": spec}),
    )
    .unwrap()
}

fn claim_json(name: &str, gi: u32) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name, "namespace": NS},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "example.com",
            "selectors": [{"cel": {"expression": "device.attributes['example.com'].kind == 'shared'"}}],
            "capacity": {"requests": {"memory": format!("{gi}Gi")}}}}]}}})
}

#[tokio::test]
async fn what_kgpu_does_not_model_of_dra_it_says_so() {
    let Some(cp) = ControlPlane::shared_if_enabled() else { return };
    let client = client(cp).await;
    namespace(&client, NS).await;
    // One node; its slice: a device several claims may share, and one
    // bound only once the driver reports it attached.
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
    let node: k8s_openapi::api::core::v1::Node = serde_json::from_value(
        json!({"metadata": {"name": "beyond-0", "labels": {"kubernetes.io/hostname": "beyond-0"}}}),
    )
    .unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();
    let status = json!({"status": {
        "capacity": {"cpu": "64", "memory": "512Gi", "pods": "110"},
        "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110"},
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status"}]}});
    nodes
        .patch_status("beyond-0", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&status))
        .await
        .unwrap();
    let slice = create(
        &dra_api(&client, "ResourceSlice", "resourceslices", None),
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "beyond-0-example.com"},
            "spec": {"driver": "example.com", "nodeName": "beyond-0", "pool": {"name": "beyond-0", "generation": 1, "resourceSliceCount": 1},
                "devices": [
                    {"name": "shared-0", "allowMultipleAllocations": true,
                        "attributes": {"kind": {"string": "shared"}},
                        "capacity": {"memory": {"value": "80Gi", "requestPolicy": {"default": "10Gi", "validRange": {"min": "10Gi"}}}}},
                    {"name": "attached-0", "bindingConditions": ["example.com/attached"], "bindingFailureConditions": ["example.com/failed"],
                        "attributes": {"kind": {"string": "attached"}}}]}}),
    )
    .await;
    let device =
        |name: &str| slice["spec"]["devices"].as_array().unwrap().iter().find(|d| d["name"] == name).unwrap().clone();
    let kept_sharing = device("shared-0")["allowMultipleAllocations"] == true;
    let kept_binding = device("attached-0")["bindingConditions"].is_array();
    let class = create(
        &dra_api(&client, "DeviceClass", "deviceclasses", None),
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "example.com"},
            "spec": {"selectors": [{"cel": {"expression": "device.driver == 'example.com'"}}], "extendedResourceName": "example.com/gpu"}}),
    )
    .await;
    let kept_extended = class["spec"]["extendedResourceName"] == "example.com/gpu";
    let claims = dra_api(&client, "ResourceClaim", "resourceclaims", Some(NS));
    let claim = create(&claims, claim_json("a-slice-of-memory", 20)).await;
    let kept_capacity = claim["spec"]["devices"]["requests"][0]["exactly"]["capacity"].is_object();
    eprintln!(
        "kube-apiserver kept: allowMultipleAllocations {kept_sharing}, bindingConditions {kept_binding}, extendedResourceName {kept_extended}, a request's capacity {kept_capacity}"
    );
    assert!(kept_sharing && kept_binding && kept_extended && kept_capacity, "Kubernetes 1.36 serves them by default");

    // The scheduler gives the shareable device to one claim...
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    pods.create(&PostParams::default(), &pod("uses-capacity", "a-slice-of-memory", None, false)).await.unwrap();
    let first = decided(&pods, "uses-capacity").await;
    eprintln!("kube-scheduler on uses-capacity: {first}");
    assert_eq!(first, "bound to beyond-0");
    // ... and two more pods wait behind a scheduling gate: a second claim
    // on the same device, and a pod asking example.com/gpu, which no node
    // advertises.
    create(&claims, claim_json("another-slice", 20)).await;
    pods.create(&PostParams::default(), &pod("shares-too", "another-slice", None, true)).await.unwrap();
    pods.create(&PostParams::default(), &pod("asks-extended", "", Some(1), true)).await.unwrap();

    let doc = kgpu_json(cp, &["snapshot"]);
    let features: Vec<&str> = doc["draUnmodelled"]
        .as_array()
        .unwrap_or_else(|| panic!("{doc}"))
        .iter()
        .map(|f| f["feature"].as_str().unwrap())
        .collect();
    for f in ["consumable capacity", "device binding conditions"] {
        assert!(features.contains(&f), "{f} not named: {features:?}");
    }
    let item = |name: &str| {
        doc["pending"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name}: {}", doc["pending"]))
    };
    let step = |item: &Value, step: &str| {
        item["steps"].as_array().into_iter().flatten().find(|s| s["step"] == step).cloned().unwrap_or(Value::Null)
    };
    // kgpu's own allocator counts the held device as taken: it says it cannot tell.
    let shares = step(&item("shares-too"), "claims");
    assert!(
        shares["summary"].as_str().unwrap().starts_with("kgpu cannot tell: consumable capacity in use"),
        "{shares}"
    );
    // The claim the scheduler would make for example.com/gpu: kgpu weighs
    // it as a claim (attached-0 is free), naming what it does not model.
    let extended = step(&item("asks-extended"), "claims");
    assert_eq!(extended["verdict"], "pass", "{extended}");
    assert!(
        extended["summary"].as_str().unwrap().starts_with("1 node(s) can allocate its claims: beyond-0"),
        "{extended}"
    );

    // Released, the real scheduler places both: kgpu's own reading would
    // have refused the first, which is why it did not pass it off as a verdict.
    for name in ["shares-too", "asks-extended"] {
        let patch = json!({"spec": {"schedulingGates": []}});
        pods.patch(name, &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&patch)).await.unwrap();
        let said = decided(&pods, name).await;
        eprintln!("kube-scheduler on {name}: {said}");
        assert_eq!(said, "bound to beyond-0", "{name}");
    }
}
