//! The lab's `black-hole` lives its story on a real cluster: gpu-03 is
//! Ready and the emptiest node, so the real scheduler keeps sending the
//! ReplicaSet's pod there; KWOK (the scenario's Stage) refuses each at
//! admission as a broken device plugin would, the ReplicaSet replaces it,
//! and kgpu flags the node and counts its GPUs unavailable, as in the demo.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on broken fixtures

mod support;

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kgpu::analysis::{self, Thresholds};
use kgpu::lab::cluster::Options;
use kgpu::sources::kube::manifest::KUBELET;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use support::controlplane::ControlPlane;
use support::kube::{client, eventually, gpu_pod};

fn phase(p: &Pod) -> &str {
    p.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("")
}

fn reason(p: &Pod) -> &str {
    p.status.as_ref().and_then(|s| s.reason.as_deref()).unwrap_or("")
}

fn node(p: &Pod) -> &str {
    p.spec.as_ref().and_then(|s| s.node_name.as_deref()).unwrap_or("")
}

#[tokio::test]
async fn the_black_hole_refuses_each_new_pod_and_kgpu_flags_it() {
    if !ControlPlane::enabled() {
        return;
    }
    // A lab of its own: the scenario's node names are the other lab tests' too.
    let lab = ControlPlane::start_with(|dir, bins| Options::living(dir, bins, false)).unwrap();
    let client = client(&lab).await;
    let exported: BTreeSet<String> = kgpu::runtime::scenario::documents("black-hole")
        .unwrap()
        .iter()
        .filter(|d| d["kind"] == "Pod")
        .filter_map(|d| Some(d["metadata"]["name"].as_str()?.to_string()))
        .collect();
    kgpu::runtime::scenario::apply_now(&client, "black-hole", false, |_| {}).await.unwrap();
    let serving: Api<Pod> = Api::namespaced(client.clone(), "serving");

    // Two pods the ReplicaSet made on the cluster, both sent to gpu-03 and
    // both refused there: the loop the story tells, not a single accident.
    // Each change of the new pods' story is printed, so a failure shows where the loop stopped.
    let last_story = std::sync::Mutex::new(String::new());
    let started = std::time::Instant::now();
    let refused = eventually("two new pods refused at admission on gpu-03", Duration::from_secs(120), || async {
        let pods = serving.list(&ListParams::default()).await.ok()?.items;
        let story: Vec<String> = pods
            .iter()
            .filter(|p| !exported.contains(p.metadata.name.as_deref().unwrap_or("")))
            .map(|p| {
                format!("{} on '{}' {} {}", p.metadata.name.as_deref().unwrap_or(""), node(p), phase(p), reason(p))
            })
            .collect();
        let story = story.join("; ");
        let mut last = last_story.lock().unwrap();
        if *last != story {
            eprintln!("{:>5.1}s new pods: [{story}]", started.elapsed().as_secs_f64());
            *last = story;
        }
        drop(last);
        let refused: Vec<String> = pods
            .iter()
            .filter(|p| !exported.contains(p.metadata.name.as_deref().unwrap_or("")))
            .filter(|p| node(p) == "gpu-03" && phase(p) == "Failed" && reason(p) == "UnexpectedAdmissionError")
            .filter_map(|p| p.metadata.name.clone())
            .collect();
        (refused.len() >= 2).then_some(refused)
    })
    .await;
    eprintln!("refused on gpu-03: {refused:?}");

    // The scenario's past failures stay failed: the fake kubelet does not
    // start a pod written as refused, and nothing of the ReplicaSet runs.
    let pods = serving.list(&ListParams::default()).await.unwrap().items;
    for p in pods.iter().filter(|p| exported.contains(p.metadata.name.as_deref().unwrap_or(""))) {
        if node(p) == "gpu-03" {
            assert_eq!((phase(p), reason(p)), ("Failed", "UnexpectedAdmissionError"), "{:?}", p.metadata.name);
        }
    }
    assert!(pods.iter().all(|p| phase(p) != "Running"), "a pod runs on the black hole");

    // A GPU pod that KWOK started on gpu-03 before it had read the Stage (the
    // scenario comes in one burst) is refused too, so the loop still starts.
    let early = gpu_pod("started-before-the-stage", 1, json!({"nodeName": "gpu-03"}));
    let mut early: Pod = early;
    early.metadata.annotations = Some([(KUBELET.to_string(), "hold".to_string())].into());
    serving.create(&PostParams::default(), &early).await.unwrap();
    let running = json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}});
    serving.patch_status("started-before-the-stage", &PatchParams::default(), &Patch::Merge(&running)).await.unwrap();
    let released = json!({"metadata": {"annotations": {KUBELET: null}}});
    serving.patch("started-before-the-stage", &PatchParams::default(), &Patch::Merge(&released)).await.unwrap();
    eventually("the pod started before the Stage refused", Duration::from_secs(90), || async {
        let p = serving.get("started-before-the-stage").await.ok()?;
        (phase(&p) == "Failed" && reason(&p) == "UnexpectedAdmissionError").then_some(())
    })
    .await;

    // kgpu on the lab: gpu-03 flagged, its GPUs not counted free.
    let target = kgpu::sources::kube::client::Target { kubeconfig: Some(lab.kubeconfig.clone()), context: None };
    let (snap, now) = kgpu::runtime::load::kube(&target, &Default::default()).await.unwrap();
    let a = analysis::analyze(&snap, now, &Thresholds::default());
    let flagged: Vec<&str> = a
        .nodes
        .iter()
        .filter(|n| n.issues.iter().any(|i| i.code.as_str() == "black-hole"))
        .map(|n| n.name.as_str())
        .collect();
    assert_eq!(flagged, ["gpu-03"]);
    let gpu_03 = a.nodes.iter().find(|n| n.name.as_str() == "gpu-03").unwrap();
    assert_eq!(gpu_03.buckets.free, 0, "a black hole's GPUs are not free: {:?}", gpu_03.buckets);
    assert!(gpu_03.buckets.unavailable > 0, "{:?}", gpu_03.buckets);
}
