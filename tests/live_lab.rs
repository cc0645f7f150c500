//! The living lab (`kgpu lab`): the real kube-controller-manager and KWOK
//! next to the API server and scheduler. A scenario lives there as in the
//! demo: its GPU nodes stay Ready past the node-monitor grace period, its
//! pods run, the gang gets the real scheduler's FailedScheduling, kgpu reads
//! the story; a Job's deleted pod is recreated and runs, a drained node's
//! pods come back elsewhere, and a node whose kubelet is gone goes NotReady.
//! Chaos on a lab of its own: a plan through a hung API server, a drain
//! through an etcd restart and compaction, each audited truthfully and the
//! model equal to a fresh list afterwards.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on broken fixtures

mod support;

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use kgpu::actions::defrag::RESERVATION_TAINT;
use kgpu::actions::{Action, ActionRequest, PlanTarget};
use kgpu::analysis::{self, Thresholds};
use kgpu::model::{Readiness, Snapshot, Sym};
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;
use support::actions::harness;
use support::controlplane::ControlPlane;
use support::kube::{client, eventually, namespace, until};

fn ready(n: &Node) -> Option<bool> {
    let c = n.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == "Ready")?;
    Some(c.status == "True")
}

fn phase(p: &Pod) -> &str {
    p.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("")
}

/// A fake GPU node KWOK keeps (or, with `kubelet: false`, nobody keeps).
async fn lab_node(client: &kube::Client, name: &str, gpus: u32, taint: Option<&str>, kubelet: bool) {
    let api: Api<Node> = Api::all(client.clone());
    let annotations = if kubelet { json!({"kwok.x-k8s.io/node": "fake"}) } else { json!({}) };
    let taints = taint.map_or(json!([]), |t| json!([{"key": "kgpu.dev/test", "value": t, "effect": "NoSchedule"}]));
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": name, "annotations": annotations,
                     "labels": {"kubernetes.io/hostname": name, "nvidia.com/gpu.present": "true", "nvidia.com/gpu.count": gpus.to_string(),
                                "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "kgpu.dev/pool": taint.unwrap_or("lab")}},
        "spec": {"taints": taints},
        "status": {
            "capacity": {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": gpus.to_string()},
            "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": gpus.to_string()},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status"}]
        }
    }))
    .unwrap();
    api.create(&PostParams::default(), &node).await.expect("create node");
}

#[tokio::test]
async fn the_fragmented_scenario_lives_and_kgpu_tells_its_story() {
    let Some(lab) = ControlPlane::lab_if_enabled() else { return };
    let client = client(lab).await;
    let applied = Instant::now();
    let summary = kgpu::runtime::scenario::apply_now(&client, "fragmented", false, |_| {}).await.unwrap();
    assert!(summary.missing.is_empty(), "the lab has every CRD: {:?}", summary.missing);
    let nodes: Api<Node> = Api::all(client.clone());
    let gpu_nodes = || async {
        let list = nodes.list(&ListParams::default().labels("kgpu.dev/scenario=fragmented")).await.ok()?;
        Some(list.items)
    };
    // KWOK makes the scenario's nodes Ready (the API server's admission put
    // the not-ready taint on them; the node lifecycle controller lifts it).
    eventually("the 8 GPU nodes Ready and untainted", Duration::from_secs(60), || async {
        let items = gpu_nodes().await?;
        (items.len() == 8
            && items.iter().all(|n| ready(n) == Some(true))
            && items.iter().all(|n| n.spec.as_ref().and_then(|s| s.taints.as_ref()).is_none_or(|t| t.is_empty())))
        .then_some(())
    })
    .await;
    // The Jobs adopt the scenario's pods (the pods came first).
    let research: Api<Pod> = Api::namespaced(client.clone(), "research");
    eventually("every pod adopted by its Job", Duration::from_secs(60), || async {
        let pods = research.list(&ListParams::default()).await.ok()?;
        pods.items.iter().all(|p| p.metadata.owner_references.as_ref().is_some_and(|o| !o.is_empty())).then_some(())
    })
    .await;
    // The 2×8 gang's members get the real scheduler's verdict.
    let said = eventually("FailedScheduling for the gang", Duration::from_secs(60), || async {
        let pods = research.list(&ListParams::default().labels("batch.kubernetes.io/job-name=llm-sft")).await.ok()?;
        let messages: Vec<String> = pods
            .items
            .iter()
            .filter_map(|p| {
                p.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == "PodScheduled")?.message.clone()
            })
            .collect();
        (messages.len() == 2).then(|| messages.join(" | "))
    })
    .await;
    assert!(said.contains("Insufficient nvidia.com/gpu"), "{said}");

    // kgpu on the lab's context shows the demo's story.
    let target = kgpu::sources::kube::client::Target { kubeconfig: Some(lab.kubeconfig.clone()), context: None };
    let (snap, now) = kgpu::runtime::load::kube(&target, &Default::default()).await.unwrap();
    let a = analysis::analyze(&snap, now, &Thresholds::default());
    // (Other tests of this binary add tainted nodes of their own: count the scenario's.)
    let stranded: u64 =
        a.fragmentation.stranded_by_node.iter().filter(|(n, _)| n.as_str().starts_with("gpu-")).map(|(_, g)| g).sum();
    assert_eq!(stranded, 28, "{:?}", a.fragmentation.stranded_by_node);
    assert_eq!(a.fragmentation.plan.status, analysis::fragmentation::PlanStatus::Found, "{:?}", a.fragmentation.plan);
    assert_eq!(a.fragmentation.plan.nodes_freed.len(), 2, "{:?}", a.fragmentation.plan);
    let gang = a.pending.iter().find(|p| p.name.contains("llm-sft")).expect("the gang is pending");
    assert_eq!(gang.blocking_str(), "fit", "{}", gang.summary);
    assert_eq!(gang.agrees_with_scheduler, Some(true), "{:?}", gang.disagreement);

    // A Job's pod deleted: the Job controller creates another, the scheduler
    // places it and KWOK runs it.
    let victim = research
        .list(&ListParams::default().labels("batch.kubernetes.io/job-name=sweep-01-0"))
        .await
        .unwrap()
        .items
        .remove(0);
    let victim_name = victim.metadata.name.clone().unwrap();
    research.delete(&victim_name, &Default::default()).await.unwrap();
    let replacement = eventually("a Running replacement from the Job", Duration::from_secs(60), || async {
        let pods =
            research.list(&ListParams::default().labels("batch.kubernetes.io/job-name=sweep-01-0")).await.ok()?;
        pods.items
            .into_iter()
            .find(|p| p.metadata.name.as_deref() != Some(victim_name.as_str()) && phase(p) == "Running")
    })
    .await;
    let owner = &replacement.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!((owner.kind.as_str(), owner.name.as_str()), ("Job", "sweep-01-0"));
    assert!(replacement.spec.as_ref().unwrap().node_name.is_some());

    // Past the node-monitor grace period (50 s), KWOK's leases keep the nodes Ready.
    let grace = Duration::from_secs(65);
    if let Some(left) = grace.checked_sub(applied.elapsed()) {
        tokio::time::sleep(left).await;
    }
    let items = gpu_nodes().await.unwrap();
    assert!(items.iter().all(|n| ready(n) == Some(true)), "a node went NotReady despite KWOK's heartbeats");

    // The plan, run as the cockpit runs it: the gang ends up bound on the
    // nodes it freed, the moved pods' replacements run elsewhere, and no
    // reservation taint is left behind.
    let h = harness(lab).await;
    until(&h.snapshots, "the gang seen pending", |s| {
        s.gangs.keys().any(|k| k.name.contains("llm-sft"))
            && s.pods.values().any(|p| p.name.starts_with("llm-sft") && p.node.is_none())
    })
    .await;
    let snap = h.snapshots.borrow().clone();
    let a = analysis::analyze(&snap, snap.clock, &Thresholds::default());
    let action = Action::run_plan(&a.fragmentation.plan).expect("a plan with a target");
    let Action::RunPlan { reserve, evictions, target: PlanTarget::Gang(gang), .. } = action.clone() else {
        panic!("{action:?}")
    };
    // From the command line, as a runbook would: exit 0 only once the gang is placed.
    let data = tempfile::tempdir().unwrap();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_kgpu"))
        .args(["--kubeconfig", lab.kubeconfig.to_str().unwrap(), "--agents", "off", "defrag"])
        .arg(format!("{}/{}", gang.namespace, gang.name))
        .arg("--yes")
        .env("KGPU_DATA_DIR", data.path())
        .output()
        .await
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{said}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(said.contains("placed on"), "{said}");
    let gang = research.list(&ListParams::default().labels("batch.kubernetes.io/job-name=llm-sft")).await.unwrap();
    for p in &gang.items {
        let on = p.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default();
        assert!(reserve.iter().any(|r| r.as_str() == on), "{:?} on {on:?}, reserved {reserve:?}", p.metadata.name);
    }
    let all_nodes = nodes.list(&ListParams::default()).await.unwrap().items;
    let reserved: Vec<_> = all_nodes
        .iter()
        .filter(|n| {
            n.spec
                .as_ref()
                .and_then(|s| s.taints.as_ref())
                .is_some_and(|t| t.iter().any(|t| t.key == RESERVATION_TAINT))
        })
        .filter_map(|n| n.metadata.name.clone())
        .collect();
    assert!(reserved.is_empty(), "reservation left on {reserved:?}");
    // Every evicted pod's Job has a replacement, off the reserved nodes.
    let evicted_jobs: Vec<String> =
        evictions.iter().filter_map(|k| Some(snap.pods.get(k)?.owner.as_ref()?.name.to_string())).collect();
    assert_eq!(evicted_jobs.len(), evictions.len(), "every moved pod has a controller");
    eventually("each moved pod's replacement Running off the reserved nodes", Duration::from_secs(60), || async {
        let pods = research.list(&ListParams::default()).await.ok()?;
        evicted_jobs
            .iter()
            .all(|job| {
                pods.items.iter().any(|p| {
                    let owned = p.metadata.owner_references.as_ref().is_some_and(|o| o.iter().any(|o| &o.name == job));
                    let on = p.spec.as_ref().and_then(|s| s.node_name.as_deref()).unwrap_or("");
                    owned && phase(p) == "Running" && !reserve.iter().any(|r| r.as_str() == on)
                })
            })
            .then_some(())
    })
    .await;
    let audit = std::fs::read_to_string(data.path().join("audit.jsonl")).unwrap();
    let results: Vec<String> = audit
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["result"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(results, ["started", "ok"], "{audit}");
}

#[tokio::test]
async fn a_node_whose_kubelet_is_gone_goes_not_ready_and_kgpu_says_so() {
    let Some(lab) = ControlPlane::lab_if_enabled() else { return };
    let client = client(lab).await;
    lab_node(&client, "lab-silent", 8, Some("silent"), false).await;
    let (snapshots, _tasks) = support::kube::source(lab, &lab.kubeconfig).await;
    let node = Sym::new("lab-silent");
    // The node lifecycle controller: no heartbeat for the grace period → Unknown, tainted.
    let nodes: Api<Node> = Api::all(client.clone());
    eventually("lab-silent NotReady with the unreachable taint", Duration::from_secs(120), || async {
        let n = nodes.get("lab-silent").await.ok()?;
        let tainted = n
            .spec
            .as_ref()?
            .taints
            .as_ref()?
            .iter()
            .any(|t| t.key == "node.kubernetes.io/unreachable" && t.effect == "NoSchedule");
        (ready(&n) == Some(false) && tainted).then_some(())
    })
    .await;
    until(&snapshots, "kgpu sees it NotReady", |s| s.nodes.get(&node).is_some_and(|n| n.readiness != Readiness::Ready))
        .await;
}

#[tokio::test]
async fn a_drained_nodes_pods_are_recreated_elsewhere_and_run() {
    let Some(lab) = ControlPlane::lab_if_enabled() else { return };
    let client = client(lab).await;
    // Two nodes of their own (a taint keeps other tests' pods off them).
    for name in ["lab-drain-a", "lab-drain-b"] {
        lab_node(&client, name, 4, Some("drain"), true).await;
    }
    namespace(&client, "lab-drain").await;
    let rs: ReplicaSet = serde_json::from_value(json!({
        "metadata": {"name": "serve", "namespace": "lab-drain"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "serve"}},
                 "template": {"metadata": {"labels": {"app": "serve"}}, "spec": {
                     "terminationGracePeriodSeconds": 0,
                     "nodeSelector": {"kgpu.dev/pool": "drain"},
                     "tolerations": [{"key": "kgpu.dev/test", "operator": "Equal", "value": "drain", "effect": "NoSchedule"}],
                     "containers": [{"name": "main", "image": "ghcr.io/acme/llm-serve:v7",
                                     "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}
    }))
    .unwrap();
    Api::<ReplicaSet>::namespaced(client.clone(), "lab-drain").create(&PostParams::default(), &rs).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "lab-drain");
    let running_on = |node: &'static str| {
        let pods = pods.clone();
        async move {
            let list = pods.list(&ListParams::default()).await.ok()?;
            let on: Vec<Pod> = list
                .items
                .into_iter()
                .filter(|p| phase(p) == "Running" && p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node))
                .collect();
            Some(on)
        }
    };
    let before = eventually("3 pods Running", Duration::from_secs(60), || async {
        let a = running_on("lab-drain-a").await?;
        let b = running_on("lab-drain-b").await?;
        (a.len() + b.len() == 3).then_some((a.len(), b.len()))
    })
    .await;
    let (drained, other) = if before.0 > 0 { ("lab-drain-a", "lab-drain-b") } else { ("lab-drain-b", "lab-drain-a") };

    let mut h = harness(lab).await;
    let node = Sym::new(drained);
    until(&h.snapshots, "node seen", |s| s.nodes.contains_key(&node)).await;
    h.executor
        .run(ActionRequest { action: Action::Drain { node, gpu_only: false, force: false }, dry_run: false })
        .await;
    let (_, text, error) = h.reports();
    assert!(!error, "{text}");
    let after = eventually("every replica Running on the other node", Duration::from_secs(90), || async {
        let there = running_on(other).await?;
        let left = running_on(drained).await?;
        (there.len() == 3 && left.is_empty()).then_some(there.len())
    })
    .await;
    assert_eq!(after, 3);
    let audit = h.audit();
    assert_eq!(audit.last().unwrap()["action"], "drain");
}

#[tokio::test]
async fn a_cancelled_plan_on_the_lab_leaves_no_reservation_behind() {
    let Some(lab) = ControlPlane::lab_if_enabled() else { return };
    let client = client(lab).await;
    // Two 4-GPU nodes of their own, one 2-GPU pod on each, and a bare 4-GPU
    // pod that fits once one node is empty.
    for name in ["lab-plan-a", "lab-plan-b"] {
        lab_node(&client, name, 4, Some("plan"), true).await;
    }
    namespace(&client, "lab-plan").await;
    let tolerate = json!([{"key": "kgpu.dev/test", "operator": "Equal", "value": "plan", "effect": "NoSchedule"}]);
    // One ReplicaSet per node, pinned: nothing can move, so the plan evicts.
    for node in ["lab-plan-a", "lab-plan-b"] {
        let rs: ReplicaSet = serde_json::from_value(json!({
            "metadata": {"name": format!("fill-{node}"), "namespace": "lab-plan"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "fill", "node": node}},
                     "template": {"metadata": {"labels": {"app": "fill", "node": node}}, "spec": {
                         "terminationGracePeriodSeconds": 0,
                         "nodeSelector": {"kubernetes.io/hostname": node},
                         "tolerations": tolerate,
                         "containers": [{"name": "main", "image": "ghcr.io/acme/eval:v1",
                                         "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}}}
        }))
        .unwrap();
        Api::<ReplicaSet>::namespaced(client.clone(), "lab-plan").create(&PostParams::default(), &rs).await.unwrap();
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), "lab-plan");
    eventually("one fill pod Running on each node", Duration::from_secs(60), || async {
        let list = pods.list(&ListParams::default().labels("app=fill")).await.ok()?;
        let mut on: Vec<String> = list
            .items
            .iter()
            .filter(|p| phase(p) == "Running")
            .filter_map(|p| p.spec.as_ref()?.node_name.clone())
            .collect();
        on.sort();
        (on == ["lab-plan-a", "lab-plan-b"]).then_some(())
    })
    .await;
    let big: Pod = serde_json::from_value(json!({
        "metadata": {"name": "big", "namespace": "lab-plan"},
        "spec": {"nodeSelector": {"kgpu.dev/pool": "plan"}, "tolerations": tolerate,
                 "containers": [{"name": "main", "image": "ghcr.io/acme/train:v1",
                                 "resources": {"limits": {"nvidia.com/gpu": "4"}}}]}
    }))
    .unwrap();
    pods.create(&PostParams::default(), &big).await.unwrap();

    let mut h = harness(lab).await;
    until(&h.snapshots, "the big pod seen pending", |s| {
        s.pods.values().any(|p| p.name.as_ref() == "big" && p.node.is_none())
            && s.pods.values().filter(|p| p.namespace.as_str() == "lab-plan" && p.node.is_some()).count() == 2
    })
    .await;
    let snap = h.snapshots.borrow().clone();
    let a = analysis::analyze(&snap, snap.clock, &Thresholds::default());
    let plan = analysis::defrag_plan_for(&snap, &a, &Thresholds::default(), "lab-plan", "big").expect("pending");
    let action = Action::run_plan(&plan).unwrap_or_else(|| panic!("a plan: {:?}", plan.status));
    let executor = h.executor.clone();
    let run = tokio::spawn(async move { executor.run(ActionRequest { action, dry_run: false }).await });
    // Cancel as soon as the nodes are reserved.
    loop {
        match h.reports.recv().await.expect("reports") {
            kgpu::actions::Progress { text, .. } if text.starts_with("defrag: reserved") => break,
            kgpu::actions::Progress { done: true, text, .. } => panic!("ended before reserving: {text}"),
            _ => {}
        }
    }
    h.cancel.send_modify(|c| {
        c.insert(1);
    });
    run.await.unwrap();
    let (_, text, _) = h.reports();
    eprintln!("final report: {text}");
    // Cancelled (or, on a fast day, placed before the cancel landed): either
    // way no node keeps kgpu's taint.
    assert!(text.contains("cancelled") || text.contains("placed on"), "{text}");
    let nodes: Api<Node> = Api::all(client.clone());
    for name in ["lab-plan-a", "lab-plan-b"] {
        let n = nodes.get(name).await.unwrap();
        let taints = n.spec.and_then(|s| s.taints).unwrap_or_default();
        assert!(taints.iter().all(|t| t.key != RESERVATION_TAINT), "{name} keeps {taints:?} after: {text}");
    }
    let audit = h.audit();
    assert_eq!(audit.first().unwrap()["result"], "started");
    assert!(matches!(audit.last().unwrap()["result"].as_str(), Some("cancelled" | "ok")), "{audit:?}");
}

/// The pods of `ns` that are not going, as `name on node`: what a fresh
/// list says and what kgpu's model must say too.
async fn pods_listed(pods: &Api<Pod>) -> Vec<String> {
    let mut out: Vec<String> = pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| {
            let on = p.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default();
            format!("{} on {on}", p.metadata.name.clone().unwrap_or_default())
        })
        .collect();
    out.sort();
    out
}

fn pods_modelled(snap: &Snapshot, ns: &str) -> Vec<String> {
    let mut out: Vec<String> = snap
        .pods
        .values()
        .filter(|p| p.namespace.as_str() == ns && !p.terminating)
        .map(|p| format!("{} on {}", p.name, p.node.as_ref().map(|n| n.to_string()).unwrap_or_default()))
        .collect();
    out.sort();
    out
}

/// Chaos on a lab of its own: the API server paused (SIGSTOP, a hung
/// server) in the middle of a defragmentation plan, then etcd stopped,
/// started again and compacted (watches end with 410) in the middle of a
/// drain. Each action rides through: the
/// plan places its target and releases its reservation, the drain ends when
/// its pods are gone; the audit log says `started` then `ok` for each, and
/// kgpu's model equals a fresh list afterwards.
#[tokio::test]
async fn a_plan_and_a_drain_ride_through_a_paused_apiserver_and_an_etcd_restart() {
    if !ControlPlane::enabled() {
        return;
    }
    let lab = ControlPlane::start_with(|dir, bins| kgpu::lab::cluster::Options::living(dir, bins, false)).unwrap();
    let client = client(&lab).await;
    for name in ["chaos-a", "chaos-b"] {
        lab_node(&client, name, 4, Some("chaos"), true).await;
    }
    let ns = "lab-chaos";
    namespace(&client, ns).await;
    let tolerate = json!([{"key": "kgpu.dev/test", "operator": "Equal", "value": "chaos", "effect": "NoSchedule"}]);
    for node in ["chaos-a", "chaos-b"] {
        let rs: ReplicaSet = serde_json::from_value(json!({
            "metadata": {"name": format!("fill-{node}"), "namespace": ns},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "fill", "node": node}},
                     "template": {"metadata": {"labels": {"app": "fill", "node": node}}, "spec": {
                         "terminationGracePeriodSeconds": 0,
                         "tolerations": tolerate,
                         "nodeSelector": {"kgpu.dev/pool": "chaos"},
                         "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                             {"labelSelector": {"matchLabels": {"app": "fill"}}, "topologyKey": "kubernetes.io/hostname"}]}},
                         "containers": [{"name": "main", "image": "ghcr.io/acme/eval:v1",
                                         "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}
        }))
        .unwrap();
        Api::<ReplicaSet>::namespaced(client.clone(), ns).create(&PostParams::default(), &rs).await.unwrap();
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    eventually("one fill pod Running on each node", Duration::from_secs(60), || async {
        let list = pods.list(&ListParams::default().labels("app=fill")).await.ok()?;
        let mut on: Vec<String> = list
            .items
            .iter()
            .filter(|p| phase(p) == "Running")
            .filter_map(|p| p.spec.as_ref()?.node_name.clone())
            .collect();
        on.sort();
        (on == ["chaos-a", "chaos-b"]).then_some(())
    })
    .await;
    let big: Pod = serde_json::from_value(json!({
        "metadata": {"name": "big", "namespace": ns},
        "spec": {"nodeSelector": {"kgpu.dev/pool": "chaos"}, "tolerations": tolerate,
                 "terminationGracePeriodSeconds": 0,
                 "containers": [{"name": "main", "image": "ghcr.io/acme/train:v1",
                                 "resources": {"limits": {"nvidia.com/gpu": "4"}}}]}
    }))
    .unwrap();
    pods.create(&PostParams::default(), &big).await.unwrap();

    let mut h = harness(&lab).await;
    h.executor.drain_timeout = Duration::from_secs(120);
    h.executor.place_timeout = Duration::from_secs(120);
    until(&h.snapshots, "the big pod seen pending", |s| {
        s.pods.values().any(|p| p.name.as_ref() == "big" && p.node.is_none())
            && s.pods.values().filter(|p| p.namespace.as_str() == ns && p.node.is_some()).count() == 2
    })
    .await;
    let snap = h.snapshots.borrow().clone();
    let a = analysis::analyze(&snap, snap.clock, &Thresholds::default());
    let plan = analysis::defrag_plan_for(&snap, &a, &Thresholds::default(), ns, "big").expect("pending");
    let action = Action::run_plan(&plan).unwrap_or_else(|| panic!("a plan: {:?}", plan.status));

    // The plan; the API server hangs for 8 s once the nodes are reserved.
    let executor = h.executor.clone();
    let run = tokio::spawn(async move { executor.run(ActionRequest { action, dry_run: false }).await });
    let mut seen = Vec::new();
    loop {
        let report = tokio::time::timeout(Duration::from_secs(60), h.reports.recv()).await.unwrap().unwrap();
        seen.push(report.text.clone());
        assert!(!report.done, "ended before reserving: {seen:#?}");
        if report.text.starts_with("defrag: reserved") {
            break;
        }
    }
    lab.pause_apiserver();
    tokio::time::sleep(Duration::from_secs(8)).await;
    lab.resume_apiserver();
    tokio::time::timeout(Duration::from_secs(240), run).await.expect("the plan ends").unwrap();
    let (all, text, error) = h.reports();
    assert!(!error && text.contains("placed on"), "{text}\n{seen:#?}\n{all:#?}");
    let nodes: Api<Node> = Api::all(client.clone());
    for name in ["chaos-a", "chaos-b"] {
        let taints = nodes.get(name).await.unwrap().spec.and_then(|s| s.taints).unwrap_or_default();
        assert!(taints.iter().all(|t| t.key != RESERVATION_TAINT), "{name} keeps {taints:?} after: {text}");
    }
    let results: Vec<String> = h.audit().iter().map(|e| e["result"].as_str().unwrap().to_string()).collect();
    assert_eq!(results, ["started", "ok"]);
    let listed = pods_listed(&pods).await;
    until(&h.snapshots, "the model equal to a fresh list after the pause", |s| pods_modelled(s, ns) == listed).await;

    // A drain of the node the big pod left alone; etcd goes away for 5 s
    // once the drain has begun.
    let big_on = pods.get("big").await.unwrap().spec.unwrap().node_name.unwrap();
    let drained = if big_on == "chaos-a" { "chaos-b" } else { "chaos-a" };
    let node = Sym::new(drained);
    let executor = h.executor.clone();
    let drain = tokio::spawn(async move {
        executor
            .run(ActionRequest { action: Action::Drain { node, gpu_only: false, force: true }, dry_run: false })
            .await
    });
    eventually("the drain's cordon", Duration::from_secs(30), || async {
        nodes.get(drained).await.ok()?.spec?.unschedulable.filter(|u| *u).map(|_| ())
    })
    .await;
    lab.stop_etcd();
    tokio::time::sleep(Duration::from_secs(5)).await;
    lab.start_etcd().unwrap();
    // And its history compacted: watches that resume from before get 410 Gone.
    lab.compact_etcd();
    tokio::time::timeout(Duration::from_secs(240), drain).await.expect("the drain ends").unwrap();
    let (all, text, error) = h.reports();
    assert!(!error && text.contains("all gone"), "{text}\n{all:#?}");
    let audit = h.audit();
    let results: Vec<&str> = audit.iter().map(|e| e["result"].as_str().unwrap()).collect();
    assert_eq!(results, ["started", "ok", "started", "ok"], "{audit:#?}");
    eventually("nothing of the namespace left on the drained node", Duration::from_secs(60), || async {
        let listed = pods_listed(&pods).await;
        (!listed.iter().any(|p| p.ends_with(&format!(" on {drained}")))).then_some(())
    })
    .await;
    let listed = pods_listed(&pods).await;
    until(&h.snapshots, "the model equal to a fresh list after etcd's restart", |s| pods_modelled(s, ns) == listed)
        .await;
}
