//! Actions against the real control plane, carried out by the same executor
//! the cockpit uses: cordon stops the real kube-scheduler placing pods; a
//! drain evicts what it may and is refused by a PodDisruptionBudget (shown,
//! retried, then reported); requeue toggles a Kueue Workload's spec.active;
//! a MIG repartition sets the label, finishes and uncordons when the state
//! reaches success, and reports a wedge when it stays pending; dry runs
//! change nothing. Every run is in the audit log.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on broken fixtures

mod support;

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kgpu::actions::backend::{Backend, Eviction};
use kgpu::actions::{Action, ActionRequest};
use kgpu::model::{GangKey, GangKind, PodKey, Sym};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use serde_json::{Value, json};
use support::actions::{harness, harness_as};
use support::controlplane::ControlPlane;
use support::kube::{client, eventually, gpu_node, gpu_pod, namespace, until};

async fn unschedulable(client: &kube::Client, node: &str) -> bool {
    let nodes: Api<Node> = Api::all(client.clone());
    nodes.get(node).await.unwrap().spec.and_then(|s| s.unschedulable).unwrap_or(false)
}

fn pool(name: &str) -> Value {
    json!({"nodeSelector": {"kubernetes.io/hostname": name}})
}

#[tokio::test]
async fn cordon_stops_the_real_scheduler_and_a_dry_run_changes_nothing() {
    let Some(cp) = ControlPlane::shared_if_enabled() else { return };
    let client = client(cp).await;
    gpu_node(&client, "act-cordon", 4, json!({}), json!([])).await;
    let mut h = harness(cp).await;
    let node = Sym::new("act-cordon");
    until(&h.snapshots, "node seen", |s| s.nodes.contains_key(&node)).await;

    h.executor.run(ActionRequest { action: Action::Cordon { node: node.clone() }, dry_run: true }).await;
    let (_, text, error) = h.reports();
    assert!(!error, "{text}");
    assert!(!unschedulable(&client, "act-cordon").await, "server-side dry run: {text}");

    h.executor.run(ActionRequest { action: Action::Cordon { node: node.clone() }, dry_run: false }).await;
    assert!(unschedulable(&client, "act-cordon").await);
    namespace(&client, "act-cordon").await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "act-cordon");
    pods.create(&PostParams::default(), &gpu_pod("after-cordon", 1, pool("act-cordon"))).await.unwrap();
    let said = eventually("the scheduler refuses the cordoned node", Duration::from_secs(30), || {
        let pods = pods.clone();
        async move {
            let c = pods.get("after-cordon").await.ok()?.status?.conditions?;
            c.into_iter().find(|c| c.type_ == "PodScheduled" && c.status == "False").and_then(|c| c.message)
        }
    })
    .await;
    assert!(said.contains("node(s) were unschedulable"), "{said}");

    // Uncordon: the real scheduler places the pod.
    assert!(h.snapshots.borrow().nodes[&node].unschedulable, "a cordon ends when the watch shows it");
    h.executor.run(ActionRequest { action: Action::Uncordon { node }, dry_run: false }).await;
    eventually("bound after uncordon", Duration::from_secs(30), || {
        let pods = pods.clone();
        async move { pods.get("after-cordon").await.ok()?.spec?.node_name }
    })
    .await;
    let audit = h.audit();
    let results: Vec<(&str, bool, &str)> = audit
        .iter()
        .map(|e| (e["action"].as_str().unwrap(), e["dryRun"].as_bool().unwrap(), e["result"].as_str().unwrap()))
        .collect();
    // A dry run when it ends; a real run when it starts and when it ends.
    assert_eq!(
        results,
        [
            ("cordon", true, "ok"),
            ("cordon", false, "started"),
            ("cordon", false, "ok"),
            ("uncordon", false, "started"),
            ("uncordon", false, "ok")
        ]
    );
}

#[tokio::test]
async fn drain_evicts_and_a_pdb_refusal_is_retried_then_reported() {
    let Some(cp) = ControlPlane::shared_if_enabled() else { return };
    let client = client(cp).await;
    gpu_node(&client, "act-drain", 8, json!({}), json!([])).await;
    let ns = "act-drain";
    namespace(&client, ns).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let mut guarded = gpu_pod("guarded", 1, pool("act-drain"));
    guarded.metadata.labels = Some([("app".to_string(), "guarded".to_string())].into());
    pods.create(&PostParams::default(), &guarded).await.unwrap();
    pods.create(&PostParams::default(), &gpu_pod("free", 1, pool("act-drain"))).await.unwrap();
    // minAvailable 1 over the one guarded pod: no disruption allowed.
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), ns);
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({"metadata": {"name": "keep-one"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}}}))
    .unwrap();
    pdbs.create(&PostParams::default(), &pdb).await.unwrap();

    let mut h = harness(cp).await;
    let node = Sym::new("act-drain");
    until(&h.snapshots, "both pods bound", |s| {
        ["guarded", "free"]
            .iter()
            .all(|p| s.pods.get(&PodKey::new(ns, p)).is_some_and(|p| p.node.as_ref() == Some(&node)))
    })
    .await;
    // What the kubelet would report (there is none here): the API server
    // ignores PDBs for pods that are still Pending.
    for name in ["guarded", "free"] {
        let running = json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}});
        pods.patch_status(name, &PatchParams::default(), &Patch::Merge(&running)).await.unwrap();
    }

    // Bare pods, as a test makes them: a drain leaves them unless forced.
    h.executor
        .run(ActionRequest {
            action: Action::Drain { node: node.clone(), gpu_only: false, force: false },
            dry_run: true,
        })
        .await;
    let (_, text, error) = h.reports();
    assert!(error && text.contains("nothing evicted") && text.contains("stop kubectl drain"), "{text}");
    // A dry run evicts nothing.
    h.executor
        .run(ActionRequest {
            action: Action::Drain { node: node.clone(), gpu_only: false, force: true },
            dry_run: true,
        })
        .await;
    h.reports();
    assert!(pods.get("free").await.is_ok(), "dry run kept the pod");
    assert!(!unschedulable(&client, "act-drain").await, "dry run kept the node schedulable");

    h.executor
        .run(ActionRequest { action: Action::Drain { node, gpu_only: false, force: true }, dry_run: false })
        .await;
    let (all, text, error) = h.reports();
    assert!(error, "{text}");
    assert!(text.contains("1 of 2 pod(s) evicted") && text.contains("PodDisruptionBudget"), "{text}");
    assert!(all.iter().any(|r| r.contains("PodDisruptionBudget refuses (429), retrying")), "{all:?}");
    assert!(unschedulable(&client, "act-drain").await, "cordoned first");
    eventually("the free pod evicted", Duration::from_secs(20), || {
        let pods = pods.clone();
        async move { pods.get_opt("free").await.ok()?.is_none().then_some(()) }
    })
    .await;
    assert!(pods.get("guarded").await.is_ok(), "the PDB kept it");
    let last = h.audit().pop().unwrap();
    assert_eq!((last["action"].as_str(), last["result"].as_str()), (Some("drain"), Some("error")));
}

/// A drain cancelled while it waits for its evicted pods to leave (a pod
/// with a grace period, and no kubelet here to end it) says, as one
/// cancelled during the evictions does, that the node stays cordoned and
/// how to undo it — in its report and in the audit log.
#[tokio::test]
async fn a_drain_cancelled_while_its_pods_leave_says_the_node_stays_cordoned() {
    let Some(cp) = ControlPlane::shared_if_enabled() else { return };
    let client = client(cp).await;
    gpu_node(&client, "act-slow-leave", 8, json!({}), json!([])).await;
    let ns = "act-slow-leave";
    namespace(&client, ns).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let mut spec = pool("act-slow-leave");
    spec["terminationGracePeriodSeconds"] = json!(300);
    pods.create(&PostParams::default(), &gpu_pod("lingers", 1, spec)).await.unwrap();
    let mut h = harness(cp).await;
    h.executor.drain_timeout = Duration::from_secs(120);
    let node = Sym::new("act-slow-leave");
    until(&h.snapshots, "the pod bound", |s| {
        s.pods.get(&PodKey::new(ns, "lingers")).is_some_and(|p| p.node.as_ref() == Some(&node))
    })
    .await;
    let running = json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}});
    pods.patch_status("lingers", &PatchParams::default(), &Patch::Merge(&running)).await.unwrap();

    let executor = h.executor.clone();
    let drain = tokio::spawn(async move {
        executor
            .run(ActionRequest { action: Action::Drain { node, gpu_only: false, force: true }, dry_run: false })
            .await;
    });
    let mut seen = Vec::new();
    loop {
        let report = tokio::time::timeout(Duration::from_secs(30), h.reports.recv()).await.unwrap().unwrap();
        seen.push(report.text.clone());
        assert!(!report.done, "ended before the cancel: {seen:#?}");
        if report.text.contains("waiting for 1 pod(s) to leave") {
            break;
        }
    }
    h.cancel.send_modify(|c| {
        c.insert(1);
    });
    tokio::time::timeout(Duration::from_secs(30), drain).await.expect("the cancel ends it").unwrap();
    let (_, text, error) = h.reports();
    assert!(error, "{text}");
    assert!(
        text.contains("drain cancelled: 1 of 1 pod(s) evicted or leaving; node/act-slow-leave left cordoned (undo: kubectl uncordon act-slow-leave)"),
        "{text}"
    );
    assert!(unschedulable(&client, "act-slow-leave").await, "left cordoned, as it says");
    let last = h.audit().pop().unwrap();
    assert_eq!(last["result"], "cancelled", "{last}");
    assert!(
        last["detail"].as_str().unwrap().contains("left cordoned (undo: kubectl uncordon act-slow-leave)"),
        "{last}"
    );
}

#[tokio::test]
async fn requeue_toggles_a_kueue_workloads_active_flag() {
    let Some(cp) = ControlPlane::shared_if_enabled() else { return };
    cp.install_crds(&cp.kueue_crds()).unwrap();
    let client = client(cp).await;
    let ns = "act-requeue";
    namespace(&client, ns).await;
    let ar = kube::api::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("kueue.x-k8s.io", "v1beta2", "Workload"),
        "workloads",
    );
    let workloads: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
    let w: DynamicObject = serde_json::from_value(json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": "job-stuck", "namespace": ns},
        "spec": {"queueName": "research", "active": true, "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [{"name": "c", "image": "x",
            "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}}]}}))
    .unwrap();
    let created = workloads.create(&PostParams::default(), &w).await.unwrap();
    let mut h = harness(cp).await;
    let gang = GangKey { kind: GangKind::KueueWorkload, namespace: Sym::new(ns), name: "job-stuck".into() };
    until(&h.snapshots, "workload seen", |s| s.gangs.contains_key(&gang)).await;

    // Watch spec.active from the creation on.
    let rv = created.metadata.resource_version.clone().unwrap();
    let mut stream = workloads.watch(&WatchParams::default().timeout(20), &rv).await.unwrap().boxed();
    h.executor.run(ActionRequest { action: Action::Requeue { gang: gang.clone() }, dry_run: false }).await;
    let (_, text, error) = h.reports();
    assert!(!error, "{text}");
    assert!(text.contains("re-enters LocalQueue research"), "{text}");
    let mut seen = Vec::new();
    while seen.len() < 2 {
        let Some(Ok(WatchEvent::Modified(o))) = stream.next().await else { continue };
        seen.push(o.data["spec"]["active"].as_bool());
    }
    assert_eq!(seen, [Some(false), Some(true)], "deactivated, then reactivated");
}

#[tokio::test]
async fn repartition_follows_the_mig_manager_and_reports_a_wedge() {
    let Some(cp) = ControlPlane::shared_if_enabled() else { return };
    let client = client(cp).await;
    let mig = json!({"nvidia.com/mig.config": "all-disabled", "nvidia.com/mig.config.state": "success",
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"});
    gpu_node(&client, "act-mig", 8, mig.clone(), json!([])).await;
    gpu_node(&client, "act-wedge", 8, mig, json!([])).await;
    let mut h = harness(cp).await;
    until(&h.snapshots, "nodes seen", |s| s.nodes.contains_key(&Sym::new("act-wedge"))).await;
    let nodes: Api<Node> = Api::all(client.clone());
    let label = |node: &str| {
        let nodes = nodes.clone();
        let node = node.to_string();
        async move { nodes.get(&node).await.unwrap().metadata.labels.unwrap_or_default() }
    };
    let set_state = |node: &'static str, state: &'static str| {
        let nodes = nodes.clone();
        async move {
            let patch = json!({"metadata": {"labels": {"nvidia.com/mig.config.state": state}}});
            nodes.patch(node, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
        }
    };

    // The test plays the mig-manager: it sees the new config, goes pending, then success.
    let executor = h.executor.clone();
    let run = tokio::spawn(async move {
        executor
            .run(ActionRequest {
                action: Action::RepartitionMig { node: Sym::new("act-mig"), config: "all-1g.10gb".into() },
                dry_run: false,
            })
            .await
    });
    eventually("mig.config set", Duration::from_secs(20), || {
        let l = label("act-mig");
        async move { (l.await.get("nvidia.com/mig.config").map(String::as_str) == Some("all-1g.10gb")).then_some(()) }
    })
    .await;
    assert!(unschedulable(&client, "act-mig").await, "cordoned while it changes");
    set_state("act-mig", "pending").await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    set_state("act-mig", "success").await;
    run.await.unwrap();
    let (_, text, error) = h.reports();
    assert!(!error, "{text}");
    assert!(text.contains("repartitioned to all-1g.10gb and uncordoned"), "{text}");
    assert!(!unschedulable(&client, "act-mig").await);

    // A mig-manager that never leaves pending: a wedge, node left cordoned.
    let executor = h.executor.clone();
    let run = tokio::spawn(async move {
        executor
            .run(ActionRequest {
                action: Action::RepartitionMig { node: Sym::new("act-wedge"), config: "all-1g.10gb".into() },
                dry_run: false,
            })
            .await
    });
    eventually("mig.config set", Duration::from_secs(20), || {
        let l = label("act-wedge");
        async move { (l.await.get("nvidia.com/mig.config").map(String::as_str) == Some("all-1g.10gb")).then_some(()) }
    })
    .await;
    set_state("act-wedge", "pending").await;
    run.await.unwrap();
    let (_, text, error) = h.reports();
    assert!(error);
    assert!(text.contains("still 'pending'") && text.contains("looks wedged"), "{text}");
    assert!(unschedulable(&client, "act-wedge").await, "left cordoned");
    let audit = h.audit();
    let results: Vec<&str> = audit.iter().map(|e| e["result"].as_str().unwrap()).collect();
    // A line when each starts (a crash in between still leaves a record), one when it ends.
    assert_eq!(results, ["started", "ok", "started", "error"]);
}

#[tokio::test]
async fn a_forbidden_action_names_the_missing_permission() {
    let Some(cp) = ControlPlane::shared_if_enabled() else { return };
    let client = client(cp).await;
    gpu_node(&client, "act-forbidden", 4, json!({}), json!([])).await;
    let mut h = harness_as(cp, &cp.viewer_kubeconfig).await;
    let node = Sym::new("act-forbidden");
    until(&h.snapshots, "node seen", |s| s.nodes.contains_key(&node)).await;
    h.executor.run(ActionRequest { action: Action::Cordon { node }, dry_run: false }).await;
    let (_, text, error) = h.reports();
    assert!(error);
    assert!(text.starts_with("RBAC: cannot 'patch' nodes"), "{text}");
    assert!(text.contains("kubectl auth can-i patch nodes"), "{text}");
    assert!(!unschedulable(&client, "act-forbidden").await);
}

#[tokio::test]
async fn a_volcano_requeue_without_a_job_evicts_its_pods_and_a_pdb_stops_it() {
    let Some(cp) = ControlPlane::shared_if_enabled() else { return };
    cp.install_crds(&cp.volcano_crds()).unwrap();
    let client = client(cp).await;
    gpu_node(&client, "act-vc", 8, json!({}), json!([])).await;
    let ns = "act-vc-requeue";
    namespace(&client, ns).await;
    let pgr = kube::api::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("scheduling.volcano.sh", "v1beta1", "PodGroup"),
        "podgroups",
    );
    let podgroups: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &pgr);
    let pg: DynamicObject = serde_json::from_value(json!({"apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup", "metadata": {"name": "gang", "namespace": ns}, "spec": {"minMember": 2},
        "status": {"phase": "Running"}}))
    .unwrap();
    podgroups.create(&PostParams::default(), &pg).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    for i in 0..2 {
        let mut pod = gpu_pod(&format!("gang-{i}"), 1, pool("act-vc"));
        pod.metadata.annotations = Some([("scheduling.k8s.io/group-name".to_string(), "gang".to_string())].into());
        pod.metadata.labels = Some([("app".to_string(), format!("gang-{i}"))].into());
        pods.create(&PostParams::default(), &pod).await.unwrap();
    }
    // gang-1 is guarded: no disruption allowed.
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), ns);
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({"metadata": {"name": "keep-gang-1"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "gang-1"}}}}))
    .unwrap();
    pdbs.create(&PostParams::default(), &pdb).await.unwrap();
    let mut h = harness(cp).await;
    let gang = GangKey { kind: GangKind::VolcanoPodGroup, namespace: Sym::new(ns), name: "gang".into() };
    until(&h.snapshots, "both members bound", |s| {
        (0..2).all(|i| s.pods.get(&PodKey::new(ns, &format!("gang-{i}"))).is_some_and(|p| p.node.is_some()))
    })
    .await;
    for i in 0..2 {
        let running = json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}});
        pods.patch_status(&format!("gang-{i}"), &PatchParams::default(), &Patch::Merge(&running)).await.unwrap();
    }
    h.executor.run(ActionRequest { action: Action::Requeue { gang }, dry_run: false }).await;
    let (_, text, error) = h.reports();
    // Through the Eviction API: the PDB is honoured, so the guarded pod stays and the requeue says so.
    assert!(error && text.contains("1 of 2 pod(s) evicted") && text.contains("PodDisruptionBudget"), "{text}");
    eventually("gang-0 evicted", Duration::from_secs(20), || {
        let pods = pods.clone();
        async move { pods.get_opt("gang-0").await.ok()?.is_none().then_some(()) }
    })
    .await;
    assert!(pods.get("gang-1").await.is_ok(), "a plain delete would have ignored the PDB");
}

/// An eviction is bound to the pod kgpu decided on (its uid): when a
/// StatefulSet-style replacement has taken the name meanwhile, the API
/// server refuses (409) and the new pod is left alone.
#[tokio::test]
async fn an_eviction_never_reaches_a_pod_recreated_under_the_same_name() {
    let Some(cp) = ControlPlane::shared_if_enabled() else { return };
    let client = client(cp).await;
    let ns = support::kube::unique("uid");
    namespace(&client, &ns).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let uid_of = |p: Pod| kgpu::model::Uid::parse(p.metadata.uid.as_deref().unwrap()).unwrap();
    let old = uid_of(pods.create(&PostParams::default(), &gpu_pod("web-0", 1, json!({}))).await.unwrap());
    pods.delete("web-0", &kube::api::DeleteParams { grace_period_seconds: Some(0), ..Default::default() })
        .await
        .unwrap();
    eventually("the old pod gone", Duration::from_secs(20), || {
        let pods = pods.clone();
        async move { pods.get_opt("web-0").await.unwrap().is_none().then_some(()) }
    })
    .await;
    let new = uid_of(pods.create(&PostParams::default(), &gpu_pod("web-0", 1, json!({}))).await.unwrap());
    assert_ne!(old, new);

    let target = kgpu::sources::kube::client::Target { kubeconfig: Some(cp.kubeconfig.clone()), context: None };
    let backend = Backend::Kube(kgpu::sources::kube::client::action_client(&target).await.unwrap());
    let key = PodKey::new(&ns, "web-0");
    assert_eq!(backend.evict(&key, Some(old), false).await.unwrap(), Eviction::Replaced);
    let still = pods.get("web-0").await.unwrap();
    assert_eq!(still.metadata.uid.as_deref(), Some(new.to_string().as_str()), "the new pod is untouched");
    assert!(still.metadata.deletion_timestamp.is_none());
    // Bound to its own uid, it goes.
    assert_eq!(backend.evict(&key, Some(new), false).await.unwrap(), Eviction::Evicted);
}

/// A drain that runs through an API server restart: evictions that get no
/// answer are retried (said in the progress), the drain finishes once the
/// server is back, and the audit log and a fresh list agree that the node
/// is empty.
#[tokio::test]
async fn a_drain_goes_on_through_an_apiserver_restart() {
    if !ControlPlane::enabled() {
        return;
    }
    let cp = ControlPlane::start().unwrap();
    let client = client(&cp).await;
    gpu_node(&client, "restart-drain", 8, json!({}), json!([])).await;
    let ns = "restart-drain";
    namespace(&client, ns).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let names = ["a-guarded", "b-free", "c-free"];
    for name in names {
        let mut pod = gpu_pod(name, 1, pool("restart-drain"));
        pod.metadata.labels = Some([("app".to_string(), name.to_string())].into());
        pods.create(&PostParams::default(), &pod).await.unwrap();
    }
    // The first pod is held by a PDB until the API server has restarted.
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), ns);
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({"metadata": {"name": "hold"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "a-guarded"}}}}))
    .unwrap();
    pdbs.create(&PostParams::default(), &pdb).await.unwrap();
    let mut h = harness(&cp).await;
    h.executor.drain_timeout = Duration::from_secs(120);
    let node = Sym::new("restart-drain");
    until(&h.snapshots, "the pods bound", |s| {
        names.iter().all(|p| s.pods.get(&PodKey::new(ns, p)).is_some_and(|p| p.node.as_ref() == Some(&node)))
    })
    .await;
    for name in names {
        let running = json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}});
        pods.patch_status(name, &PatchParams::default(), &Patch::Merge(&running)).await.unwrap();
    }
    until(&h.snapshots, "the pods running", |s| {
        names.iter().all(|p| s.pods.get(&PodKey::new(ns, p)).is_some_and(|p| p.phase == kgpu::model::PodPhase::Running))
    })
    .await;

    let drain = tokio::spawn(async move {
        h.executor
            .run(ActionRequest { action: Action::Drain { node, gpu_only: false, force: true }, dry_run: false })
            .await;
        h
    });
    eventually("cordoned", Duration::from_secs(20), || {
        let client = client.clone();
        async move { unschedulable(&client, "restart-drain").await.then_some(()) }
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    cp.stop_apiserver();
    tokio::time::sleep(Duration::from_secs(5)).await;
    cp.start_apiserver().unwrap();
    pdbs.delete("hold", &Default::default()).await.unwrap();

    let mut h = tokio::time::timeout(Duration::from_secs(150), drain).await.expect("the drain ends").unwrap();
    let (all, text, error) = h.reports();
    assert!(!error, "{text}\n{all:#?}");
    assert!(text.contains("drained: cordoned, 3 pod(s) evicted; all gone"), "done when the pods are gone: {text}");
    assert!(all.iter().any(|r| r.contains("the API server did not answer")), "{all:#?}");
    let audit = h.audit();
    let results: Vec<&str> = audit.iter().filter_map(|e| e["result"].as_str()).collect();
    assert_eq!(results, ["started", "ok"], "{audit:?}");
    // What a fresh list says, kgpu's model says too: nothing left running there.
    eventually("the node empty", Duration::from_secs(30), || {
        let pods = pods.clone();
        async move {
            let left = pods.list(&Default::default()).await.ok()?;
            left.items.iter().all(|p| p.metadata.deletion_timestamp.is_some()).then_some(())
        }
    })
    .await;
    until(&h.snapshots, "kgpu sees the node empty", |s| {
        names.iter().all(|p| s.pods.get(&PodKey::new(ns, p)).is_none_or(|p| p.terminating))
    })
    .await;
}

/// What a kgpu killed mid-action left on the real cluster: a defrag's
/// reservation taint and a drain's cordon, with only their `started` lines
/// in the audit log (a process that no longer runs, on this host).
/// `kgpu release --yes` takes the reservation off, leaves the cordon (said,
/// with its undo) and closes both lines as `abandoned`.
#[tokio::test]
async fn release_takes_off_what_a_killed_kgpu_reserved_and_closes_its_lines() {
    use std::io::Write;
    let Some(cp) = ControlPlane::shared_if_enabled() else { return };
    let client = client(cp).await;
    let taint = json!([{"key": "kgpu.dev/defrag", "value": "ml.train-x", "effect": "NoSchedule"}]);
    gpu_node(&client, "act-left-reserved", 8, json!({}), taint).await;
    gpu_node(&client, "act-left-drained", 8, json!({}), json!([])).await;
    let data = tempfile::tempdir().unwrap();
    let kgpu = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_kgpu"))
            .args(args)
            .args(["--kubeconfig", &cp.kubeconfig.display().to_string()])
            .env("KGPU_DATA_DIR", data.path())
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        (out.status.code(), text)
    };
    // A real cordon gives the audit log its context; the drain it stands for was killed after it.
    let (code, text) = kgpu(&["cordon", "act-left-drained", "--yes"]);
    assert_eq!(code, Some(0), "{text}");
    let log = data.path().join("audit.jsonl");
    let first: Value = serde_json::from_str(std::fs::read_to_string(&log).unwrap().lines().next().unwrap()).unwrap();
    let gone = {
        let mut c = std::process::Command::new("true").spawn().unwrap();
        c.wait().unwrap();
        c.id()
    };
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap().trim().to_string();
    let started = |n: u64, action: &str, targets: Value| {
        let mut e = first.clone();
        e["action"] = action.into();
        e["targets"] = targets;
        e["result"] = "started".into();
        e["run"] = json!({"host": host, "pid": gone, "action": n});
        format!("{e}\n")
    };
    let mut text = started(1, "drain", json!(["node/act-left-drained"]));
    text += &started(
        2,
        "run-defrag-plan",
        json!(["target workload/ml/train-x", "reserve node/act-left-reserved", "pod/ml/other-0"]),
    );
    std::fs::OpenOptions::new().append(true).open(&log).unwrap().write_all(text.as_bytes()).unwrap();

    let (code, text) = kgpu(&["release"]);
    assert_eq!(code, Some(2), "listed, not run without --yes: {text}");
    assert!(text.contains("left act-left-reserved reserved"), "{text}");
    assert!(
        text.contains("act-left-drained cordoned (release leaves it so: kubectl uncordon act-left-drained"),
        "{text}"
    );
    assert!(text.contains("kubectl taint node act-left-reserved kgpu.dev/defrag-"), "{text}");
    let (code, text) = kgpu(&["release", "--yes"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("reservation released on act-left-reserved"), "{text}");
    assert!(text.contains("2 abandoned action(s) closed"), "{text}");
    let nodes: Api<Node> = Api::all(client.clone());
    let taints = nodes.get("act-left-reserved").await.unwrap().spec.unwrap().taints.unwrap_or_default();
    assert!(taints.iter().all(|t| t.key != "kgpu.dev/defrag"), "{taints:?}");
    assert!(unschedulable(&client, "act-left-drained").await, "a killed drain's cordon is the user's to undo");
    let closed: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["result"] == "abandoned")
        .collect();
    assert_eq!(closed.len(), 2);
    assert!(closed.iter().any(|e| e["detail"].as_str().unwrap().contains("left cordoned: act-left-drained")));
    let (code, text) = kgpu(&["release"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("no abandoned kgpu action"), "{text}");
}
