//! The defragmentation plan for a pod whose GPUs come through DRA claims, run
//! end to end on the living lab (the real scheduler's DynamicResources
//! plugin, kube-controller-manager's resource-claim controller, KWOK):
//! three nodes publish four GPUs each as ResourceSlices; a ReplicaSet's six
//! pods hold one GPU each through claims made from a template, 2, 3 and 1
//! per node; a pod asking four GPUs through its template waits. kgpu's plan
//! moves the lone pod off its node; `kgpu defrag` reserves that node, evicts
//! the pod (its claim goes with it, the ReplicaSet makes another pod, the
//! controller another claim), and exits 0 only once the waiting pod is bound
//! there, its claim holding that node's four GPUs.
//!
//! Then the same where the GPUs are asked as `nvidia.com/gpu` and a
//! DeviceClass serves that resource (`extendedResourceName`, KEP-5004): the
//! scheduler makes each pod's claim as it binds it, and kgpu's plan weighs
//! the claim it would make for the waiting pod.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on broken fixtures

mod support;

use std::time::Duration;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use kgpu::actions::defrag::RESERVATION_TAINT;
use kgpu::analysis::{self, Thresholds};
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use support::controlplane::ControlPlane;
use support::kube::{client, dra_api, eventually, namespace, publish_h100s};

/// One run: through claim templates, or through a class that serves
/// `nvidia.com/gpu` (its nodes tainted, so that no other test's pod asking
/// `nvidia.com/gpu` lands there).
struct Variant {
    ns: &'static str,
    nodes: [&'static str; 3],
    pool: &'static str,
    extended: bool,
}

const TEMPLATES: Variant = Variant {
    ns: "dra-defrag",
    nodes: ["dra-defrag-0", "dra-defrag-1", "dra-defrag-2"],
    pool: "dra-defrag",
    extended: false,
};
const EXTENDED: Variant =
    Variant { ns: "dra-ext-defrag", nodes: ["dra-ext-0", "dra-ext-1", "dra-ext-2"], pool: "dra-ext", extended: true };
/// The extended variant's class and its nodes' taint.
const EXTENDED_CLASS: &str = "gpu-ext.kgpu.dev";
const EXTENDED_TAINT: &str = "kgpu.dev/dra-ext";

impl Variant {
    /// What its pods ask GPUs with, and tolerate.
    fn gpus(&self, count: u32, template: &str) -> (Value, Value) {
        let toleration = json!([{"key": EXTENDED_TAINT, "operator": "Exists", "effect": "NoSchedule"}]);
        if self.extended {
            (
                json!({"containers": [{"name": "main", "image": "nvcr.io/nvidia/pytorch:25.01-py3",
                    "resources": {"limits": {"nvidia.com/gpu": count.to_string()}}}]}),
                toleration,
            )
        } else {
            (
                json!({"containers": [{"name": "main", "image": "nvcr.io/nvidia/pytorch:25.01-py3", "resources": {"claims": [{"name": "gpu"}]}}],
                    "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}]}),
                json!([]),
            )
        }
    }

    /// A pod spec for `count` GPUs, on this variant's pool.
    fn pod_spec(&self, count: u32, template: &str) -> Value {
        let (mut spec, tolerations) = self.gpus(count, template);
        spec["terminationGracePeriodSeconds"] = json!(0);
        spec["nodeSelector"] = json!({"kgpu.dev/pool": self.pool});
        spec["tolerations"] = tolerations;
        spec
    }
}

async fn create(api: &Api<DynamicObject>, object: Value) {
    let object: DynamicObject = serde_json::from_value(object).unwrap();
    api.create(&PostParams::default(), &object).await.unwrap();
}

/// A node KWOK keeps, with no device-plugin GPUs, and its four GPUs as one
/// ResourceSlice (as NVIDIA's DRA driver publishes them).
async fn dra_node(client: &kube::Client, v: &Variant, name: &str) {
    let nodes: Api<Node> = Api::all(client.clone());
    let taints =
        if v.extended { json!([{"key": EXTENDED_TAINT, "value": "true", "effect": "NoSchedule"}]) } else { json!([]) };
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": name, "annotations": {"kwok.x-k8s.io/node": "fake"},
                     "labels": {"kubernetes.io/hostname": name, "kgpu.dev/pool": v.pool}},
        "spec": {"taints": taints},
        "status": {
            "capacity": {"cpu": "64", "memory": "512Gi", "pods": "110"},
            "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status"}]
        }
    }))
    .unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();
    publish_h100s(client, name).await;
}

async fn cordon(nodes: &Api<Node>, name: &str, on: bool) {
    nodes.patch(name, &PatchParams::default(), &Patch::Merge(json!({"spec": {"unschedulable": on}}))).await.unwrap();
}

/// The nodes the ReplicaSet's Running pods are on, by node.
async fn serving(v: &Variant, pods: &Api<Pod>) -> Vec<(String, usize)> {
    let list = pods.list(&ListParams::default().labels("app=serve")).await.unwrap();
    v.nodes
        .iter()
        .map(|n| {
            let running = list.items.iter().filter(|p| {
                p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(*n)
                    && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
                    && p.metadata.deletion_timestamp.is_none()
            });
            (n.to_string(), running.count())
        })
        .collect()
}

#[tokio::test]
async fn the_plan_frees_a_node_of_claim_held_gpus_and_the_waiting_pod_is_placed_there() {
    let Some(lab) = ControlPlane::lab_if_enabled() else { return };
    // One after the other: each checks that no reservation is left anywhere.
    run(lab, &TEMPLATES).await;
    run(lab, &EXTENDED).await;
}

async fn run(lab: &ControlPlane, v: &Variant) {
    let (ns, names) = (v.ns, v.nodes);
    let client = client(lab).await;
    namespace(&client, ns).await;
    let classes = dra_api(&client, "DeviceClass", "deviceclasses", None);
    if v.extended {
        // Its own nodes' GPUs only (their uuids), served as nvidia.com/gpu.
        create(&classes, json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": EXTENDED_CLASS},
            "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].uuid.startsWith('GPU-dra-ext-')"}}],
                "extendedResourceName": "nvidia.com/gpu"}}))
        .await;
    } else {
        create(&classes, json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": "gpu.nvidia.com"},
            "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"}}]}}))
        .await;
        let templates = dra_api(&client, "ResourceClaimTemplate", "resourceclaimtemplates", Some(ns));
        for (name, count) in [("one-gpu", 1), ("four-gpus", 4)] {
            create(&templates, json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": {"name": name, "namespace": ns},
                "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": count}}]}}}}))
            .await;
        }
    }
    let nodes: Api<Node> = Api::all(client.clone());
    for n in names {
        dra_node(&client, v, n).await;
    }
    // KWOK keeps them Ready; the node lifecycle controller lifts the not-ready taint.
    let selector = format!("kgpu.dev/pool={}", v.pool);
    eventually("the DRA nodes Ready and untainted", Duration::from_secs(60), || async {
        let list = nodes.list(&ListParams::default().labels(&selector)).await.ok()?;
        (list.items.len() == 3
            && list.items.iter().all(|n| {
                n.spec
                    .as_ref()
                    .and_then(|s| s.taints.as_ref())
                    .is_none_or(|t| t.iter().all(|t| t.key == EXTENDED_TAINT))
            }))
        .then_some(())
    })
    .await;

    // The ReplicaSet's pods: 2 on the first node, 3 on the second, 1 on the
    // third, steered by cordons while it scales (its pods pin nothing, so
    // a replacement may go anywhere).
    let sets: Api<ReplicaSet> = Api::namespaced(client.clone(), ns);
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let rs: ReplicaSet = serde_json::from_value(json!({
        "metadata": {"name": "serve", "namespace": ns},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "serve"}},
            "template": {"metadata": {"labels": {"app": "serve"}}, "spec": v.pod_spec(1, "one-gpu")}}
    }))
    .unwrap();
    sets.create(&PostParams::default(), &rs).await.unwrap();
    let mut replicas = 0;
    for (i, n) in [2, 3, 1].into_iter().enumerate() {
        for (j, other) in names.iter().enumerate() {
            cordon(&nodes, other, j != i).await;
        }
        replicas += n;
        sets.patch("serve", &PatchParams::default(), &Patch::Merge(json!({"spec": {"replicas": replicas}})))
            .await
            .unwrap();
        eventually(&format!("{n} serve pod(s) Running on {}", names[i]), Duration::from_secs(60), || async {
            (serving(v, &pods).await[i].1 == n).then_some(())
        })
        .await;
    }
    for n in names {
        cordon(&nodes, n, false).await;
    }
    eprintln!("serve: {:?}", serving(v, &pods).await);

    // The pod asking four GPUs: no node has four free.
    let big: Pod = serde_json::from_value(json!({
        "metadata": {"name": "big", "namespace": ns}, "spec": v.pod_spec(4, "four-gpus")
    }))
    .unwrap();
    pods.create(&PostParams::default(), &big).await.unwrap();
    let refused = eventually("the scheduler's refusal of big", Duration::from_secs(60), || async {
        let p = pods.get("big").await.ok()?;
        let c = p.status?.conditions?.into_iter().find(|c| c.type_ == "PodScheduled" && c.status == "False")?;
        c.message
    })
    .await;
    eprintln!("kube-scheduler on big: {refused}");
    assert!(refused.contains("cannot allocate all claims"), "{refused}");

    // kgpu's plan: move the third node's one pod, free its four GPUs.
    let target = kgpu::sources::kube::client::Target { kubeconfig: Some(lab.kubeconfig.clone()), context: None };
    let (snap, now) = kgpu::runtime::load::kube(&target, &Default::default()).await.unwrap();
    let a = analysis::analyze(&snap, now, &Thresholds::default());
    let plan = &a.fragmentation.plan;
    eprintln!("kgpu's plan: {plan:?}");
    assert_eq!(plan.status, analysis::fragmentation::PlanStatus::Found, "{plan:?}");
    assert_eq!(plan.target.as_deref(), Some(format!("Pod {ns}/big").as_str()));
    assert_eq!(plan.nodes_freed.iter().map(|n| n.as_str()).collect::<Vec<_>>(), [names[2]]);
    assert_eq!(plan.steps.len(), 1, "{plan:?}");
    assert_eq!((plan.steps[0].from_node.as_str(), plan.steps[0].gpus), (names[2], 1));

    // Run from the command line: exit 0 only once big is placed.
    let data = tempfile::tempdir().unwrap();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_kgpu"))
        .args([
            "--kubeconfig",
            lab.kubeconfig.to_str().unwrap(),
            "--agents",
            "off",
            "defrag",
            &format!("{ns}/big"),
            "--yes",
        ])
        .env("KGPU_DATA_DIR", data.path())
        .output()
        .await
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    eprintln!("kgpu defrag: {said}");
    assert_eq!(out.status.code(), Some(0), "{said}\n{}", String::from_utf8_lossy(&out.stderr));
    let placed = pods.get("big").await.unwrap();
    assert_eq!(placed.spec.as_ref().and_then(|s| s.node_name.as_deref()), Some(names[2]));
    // Its claim holds the freed node's four GPUs: from its template, or the
    // one the scheduler made for its nvidia.com/gpu (read as the server
    // keeps it: the status field is newer than the typed Pod).
    let claims = dra_api(&client, "ResourceClaim", "resourceclaims", Some(ns));
    let raw: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &kube::api::ApiResource::erase::<Pod>(&()));
    let status = raw.get("big").await.unwrap().data["status"].clone();
    let made = if v.extended {
        &status["extendedResourceClaimStatus"]["resourceClaimName"]
    } else {
        &status["resourceClaimStatuses"][0]["resourceClaimName"]
    };
    let claim = claims.get(made.as_str().unwrap_or_else(|| panic!("{status}"))).await.unwrap();
    let held: Vec<&str> = claim.data["status"]["allocation"]["devices"]["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["pool"].as_str().unwrap())
        .collect();
    assert_eq!(held, [names[2]; 4], "{}", claim.data);
    // The ReplicaSet's six pods run again, off the reserved node.
    eventually("six serve pods Running, none on the freed node", Duration::from_secs(60), || async {
        let by_node = serving(v, &pods).await;
        (by_node.iter().map(|(_, n)| n).sum::<usize>() == 6 && by_node[2].1 == 0).then_some(by_node)
    })
    .await;
    // No reservation left; the audit log has the start and the outcome.
    let left: Vec<String> = nodes
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|n| {
            n.spec
                .as_ref()
                .and_then(|s| s.taints.as_ref())
                .is_some_and(|t| t.iter().any(|t| t.key == RESERVATION_TAINT))
        })
        .filter_map(|n| n.metadata.name)
        .collect();
    assert!(left.is_empty(), "reservation left on {left:?}");
    let audit = std::fs::read_to_string(data.path().join("audit.jsonl")).unwrap();
    let results: Vec<String> = audit
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["result"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(results, ["started", "ok"], "{audit}");
    if v.extended {
        // Other tests' pods asking nvidia.com/gpu get no DRA devices.
        classes.delete(EXTENDED_CLASS, &Default::default()).await.unwrap();
    }
}
