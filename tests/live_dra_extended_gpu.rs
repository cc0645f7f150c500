//! A pod asking `nvidia.com/gpu` where no node advertises it, served through
//! DRA by a DeviceClass that declares that extended resource (KEP-5004, on by
//! default in Kubernetes 1.36): the real scheduler binds it and makes a claim
//! for it. kgpu's fragmentation map counts as many such pods as the
//! scheduler places, and once placed, kgpu counts their GPUs once.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on broken fixtures

mod support;

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::{Value, json};
use support::controlplane::ControlPlane;
use support::kube::{client, dra_api, eventually, namespace, publish_h100s, snapshot_json};

const NS: &str = "dra-extended";

async fn create(api: &Api<DynamicObject>, object: Value) {
    let object: DynamicObject = serde_json::from_value(object).unwrap();
    api.create(&PostParams::default(), &object).await.unwrap();
}

#[tokio::test]
async fn a_pod_asking_nvidia_gpu_served_through_dra_is_counted_once() {
    let Some(cp) = ControlPlane::shared_if_enabled() else { return };
    let client = client(cp).await;
    namespace(&client, NS).await;
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "ext-0", "labels": {"kubernetes.io/hostname": "ext-0"}}});
    nodes.create(&PostParams::default(), &serde_json::from_value(node).unwrap()).await.unwrap();
    let status = json!({"status": {
        "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110"},
        "capacity": {"cpu": "64", "memory": "512Gi", "pods": "110"},
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status"}]}});
    nodes.patch_status("ext-0", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&status)).await.unwrap();
    publish_h100s(&client, "ext-0").await;
    create(
        &dra_api(&client, "DeviceClass", "deviceclasses", None),
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.nvidia.com"},
            "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"}}],
                "extendedResourceName": "nvidia.com/gpu"}}),
    )
    .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    // Held behind a gate first: what kgpu says of it before the scheduler has.
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "trainer", "namespace": NS},
        "spec": {"terminationGracePeriodSeconds": 0, "schedulingGates": [{"name": "kgpu.dev/hold"}],
            "containers": [{"name": "main", "image": "nvcr.io/nvidia/pytorch:25.01-py3",
                "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}});
    pods.create(&PostParams::default(), &serde_json::from_value(pod).unwrap()).await.unwrap();
    let doc = snapshot_json(cp);
    let shape = doc["fragmentation"]["shapes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["source"] == "Pod dra-extended/trainer")
        .cloned()
        .unwrap_or_else(|| panic!("trainer's shape: {}", doc["fragmentation"]));
    eprintln!("kgpu on trainer, gated: {shape}");
    // Two such pods fit in ext-0's four GPUs through the class, none through a device plugin.
    assert_eq!((shape["fitsNow"].as_bool(), shape["largestGang"].as_u64()), (Some(true), Some(2)), "{shape}");
    // Its chain says where before the scheduler has: ext-0 can allocate the claim it would make.
    let trainer = doc["pending"].as_array().unwrap().iter().find(|p| p["name"] == "trainer").cloned().unwrap();
    let claims = trainer["steps"].as_array().unwrap().iter().find(|s| s["step"] == "claims").cloned();
    assert_eq!(
        claims.as_ref().and_then(|c| c["summary"].as_str()),
        Some("1 node(s) can allocate its claims: ext-0"),
        "{trainer}"
    );
    pods.patch(
        "trainer",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&json!({"spec": {"schedulingGates": []}})),
    )
    .await
    .unwrap();
    let bound = eventually("the scheduler binds trainer", Duration::from_secs(60), || {
        let pods = pods.clone();
        async move {
            let p = pods.get("trainer").await.ok()?;
            p.spec?.node_name
        }
    })
    .await;
    assert_eq!(bound, "ext-0");
    // The scheduler made a claim for it and named it in the pod's status.
    let status = pods.get("trainer").await.unwrap().status.unwrap();
    let made = status.extended_resource_claim_status.expect("the scheduler's claim for nvidia.com/gpu");
    let claim =
        dra_api(&client, "ResourceClaim", "resourceclaims", Some(NS)).get(&made.resource_claim_name).await.unwrap();
    let held = claim.data["status"]["allocation"]["devices"]["results"].as_array().map_or(0, Vec::len);
    eprintln!("kube-scheduler made {} holding {held} device(s) of ext-0", made.resource_claim_name);
    assert_eq!(held, 2);

    // kgpu: two of ext-0's four GPUs in use, in the node row as in the header.
    let doc = snapshot_json(cp);
    let totals = &doc["fleet"]["totals"];
    let row = &doc["fleet"]["nodes"].as_array().unwrap().iter().find(|n| n["name"] == "ext-0").unwrap()["gpu"];
    eprintln!("kgpu: totals {totals}, ext-0 {row}");
    assert_eq!(
        (totals["gpus"].as_u64(), totals["allocated"].as_u64(), totals["free"].as_u64()),
        (Some(4), Some(2), Some(2))
    );
    assert_eq!(
        (row["allocatable"].as_u64(), row["allocated"].as_u64(), row["free"].as_u64()),
        (Some(4), Some(2), Some(2))
    );
    assert_eq!(row["physical"]["used"], 2);
    // A drain's blast radius counts the pod's GPUs once.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kgpu"))
        .args(["drain", "ext-0", "--gpu-only", "--force", "--dry-run", "-y", "--agents", "off", "--kubeconfig"])
        .arg(&cp.kubeconfig)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("pod dra-extended/trainer on ext-0 (2 GPU)"), "{said}");

    // kgpu's count was two such pods: the scheduler places one more beside
    // trainer, and refuses the next.
    for (name, fits) in [("second", true), ("third", false)] {
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS},
            "spec": {"terminationGracePeriodSeconds": 0,
                "containers": [{"name": "main", "image": "nvcr.io/nvidia/pytorch:25.01-py3",
                    "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}});
        pods.create(&PostParams::default(), &serde_json::from_value(pod).unwrap()).await.unwrap();
        let decided = eventually(&format!("the scheduler decides on {name}"), Duration::from_secs(60), || {
            let pods = pods.clone();
            async move {
                let p = pods.get(name).await.ok()?;
                if let Some(node) = p.spec.as_ref()?.node_name.clone() {
                    return Some(Ok(node));
                }
                let refused =
                    p.status?.conditions?.into_iter().find(|c| c.type_ == "PodScheduled" && c.status == "False");
                refused.map(|c| Err(c.message.unwrap_or_default()))
            }
        })
        .await;
        eprintln!("kube-scheduler on {name}: {decided:?}");
        assert_eq!(decided.is_ok(), fits, "{name}: {decided:?}");
    }
    let doc = snapshot_json(cp);
    let third = doc["pending"].as_array().unwrap().iter().find(|p| p["name"] == "third").cloned().unwrap();
    // kgpu weighs the claim the scheduler would make for it, and refuses it
    // for the reason the scheduler gives.
    assert_eq!(
        (third["blockingStep"].as_str(), third["verdictSource"].as_str()),
        (Some("claims"), Some("kgpu")),
        "{third}"
    );
    assert!(
        third["summary"].as_str().unwrap().contains("too few free devices on ext-0 — cannot allocate all claims"),
        "{third}"
    );
    assert_eq!(third["agreesWithScheduler"], true, "{third}");
    let shape = doc["fragmentation"]["shapes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["source"] == "Pod dra-extended/third")
        .cloned()
        .unwrap();
    assert_eq!((shape["fitsNow"].as_bool(), shape["largestGang"].as_u64()), (Some(false), Some(0)), "{shape}");
}
