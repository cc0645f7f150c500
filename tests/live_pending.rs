//! Why-pending against the real kube-scheduler. For four classic mistakes
//! (more GPUs than a node has, no toleration for the GPU taint, a wrong
//! nodeSelector, the only matching node cordoned) the scheduler's own
//! FailedScheduling message is read, and kgpu's per-node verdicts agree
//! with it. One test (one cluster, sequential cases): the scheduler's
//! message counts every node, so no other test may add nodes meanwhile.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on broken fixtures

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kgpu::analysis::pending::{PendingItem, Step};
use kgpu::analysis::{self, Thresholds};
use kgpu::runtime::load;
use kgpu::sources::kube::{client::Target, watch::Scope};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use support::controlplane::ControlPlane;
use support::kube::{client, eventually, gpu_node, gpu_pod, namespace};

/// The scheduler's last word on a pod (its PodScheduled=False message).
async fn scheduler_message(pods: &Api<Pod>, name: &str) -> String {
    eventually(&format!("the scheduler's verdict on {name}"), Duration::from_secs(60), || {
        let pods = pods.clone();
        let name = name.to_string();
        async move {
            let pod = pods.get(&name).await.ok()?;
            let conditions = pod.status?.conditions?;
            conditions
                .into_iter()
                .find(|c| {
                    c.type_ == "PodScheduled" && c.status == "False" && c.reason.as_deref() == Some("Unschedulable")
                })
                .and_then(|c| c.message)
        }
    })
    .await
}

/// kgpu's chain for `ns/name`, from a fresh sync of the live cluster.
async fn chain(cp: &ControlPlane, ns: &str, name: &str) -> PendingItem {
    let target = Target { kubeconfig: Some(cp.kubeconfig.clone()), context: None };
    let (snap, now) = load::kube(&target, &Scope::default()).await.unwrap();
    let analysis = analysis::analyze(&snap, now, &Thresholds::default());
    analysis.pending.into_iter().find(|i| i.namespace.as_str() == ns && i.name == name).expect("a pending item")
}

#[tokio::test]
async fn the_real_scheduler_agrees_with_kgpu_on_four_classic_mistakes() {
    let Some(cp) = ControlPlane::shared_if_enabled() else { return };
    let client = client(cp).await;
    // Three 4-GPU nodes of pool "a100", tainted like GPU Operator nodes; c is cordoned.
    let taint = json!([{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]);
    for n in ["mistake-a", "mistake-b", "mistake-c"] {
        gpu_node(&client, n, 4, json!({"kgpu.test/pool": "a100"}), taint.clone()).await;
    }
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .patch("mistake-c", &PatchParams::default(), &Patch::Merge(json!({"spec": {"unschedulable": true}})))
        .await
        .unwrap();
    let ns = "mistakes";
    namespace(&client, ns).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let tolerate = json!([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]);

    // (name, GPUs, spec extras, kgpu's expected per-node reasons)
    type Case = (&'static str, u32, Value, &'static [(&'static str, u32)]);
    let cases: [Case; 4] = [
        // Each open node has 4; the cordoned one is excluded first.
        ("too-many-gpus", 8, json!({"tolerations": tolerate}), &[("cordoned", 1), ("insufficient-gpu", 3)]),
        ("no-toleration", 1, json!({}), &[("cordoned", 1), ("untolerated-taint:nvidia.com/gpu", 3)]),
        (
            "wrong-selector",
            1,
            json!({"tolerations": tolerate, "nodeSelector": {"kgpu.test/pool": "h100"}}),
            &[("cordoned", 1), ("selector-mismatch", 3)],
        ),
        (
            "only-node-cordoned",
            1,
            json!({"tolerations": tolerate, "nodeSelector": {"kubernetes.io/hostname": "mistake-c"}}),
            &[("cordoned", 1), ("selector-mismatch", 2)],
        ),
    ];
    for (name, gpus, extra, expected) in cases {
        pods.create(&PostParams::default(), &gpu_pod(name, gpus, extra)).await.unwrap();
        let said = scheduler_message(&pods, name).await;
        eprintln!("{name}: kube-scheduler said: {said}");
        let item = chain(cp, ns, name).await;
        assert_eq!(item.scheduler_message.as_deref(), Some(said.as_str()), "{name}: kgpu read the same message");
        assert_eq!(item.scheduler_recognised, Some(true), "{name}: {said}");
        assert_eq!(item.agrees_with_scheduler, Some(true), "{name}: {:?}", item.disagreement);
        assert_eq!(item.blocking, Some(Step::Fit), "{name}");
        let expected: BTreeMap<String, u32> = expected.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        assert_eq!(*item.node_reasons, expected, "{name}: kgpu's verdicts for every node");
    }
    // The missing toleration is named with the fix.
    let item = chain(cp, ns, "no-toleration").await;
    assert!(item.hints.iter().any(|h| h.starts_with("missing-toleration")), "{:?}", item.hints);
}
