//! Fragmentation against the real kube-scheduler: four 2-GPU pods that the
//! scheduler spreads over four 8-GPU nodes leave 24 GPUs free and none of
//! them usable by a PodGroup of two 8-GPU pods; the scheduler refuses the
//! gang's pods, and kgpu says the shape does not fit, with a stranded count
//! equal to the free capacity computed from the API server's own objects.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on broken fixtures

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kgpu::analysis::fragmentation::PlanStatus;
use kgpu::analysis::{self, Thresholds};
use kgpu::runtime::load;
use kgpu::sources::kube::{client::Target, watch::Scope};
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use serde_json::json;
use support::controlplane::ControlPlane;
use support::kube::{client, eventually, gpu_node, gpu_pod, namespace};

fn gpus_of(pod: &Pod) -> u64 {
    let spec = pod.spec.as_ref().unwrap();
    spec.containers
        .iter()
        .filter_map(|c| c.resources.as_ref()?.limits.as_ref()?.get("nvidia.com/gpu"))
        .map(|q| q.0.parse::<u64>().unwrap())
        .sum()
}

#[tokio::test]
async fn spread_pods_strand_gpus_the_scheduler_and_kgpu_agree() {
    let Some(cp) = ControlPlane::shared_if_enabled() else { return };
    cp.install_crds(&cp.volcano_crds()).unwrap();
    let client = client(cp).await;
    for i in 0..4 {
        gpu_node(&client, &format!("frag-{i}"), 8, json!({}), json!([])).await;
    }
    let ns = "frag";
    namespace(&client, ns).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    // Owned by a controller, so the plan may move them.
    let owner = json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "small", "uid": "0b5c7a3e-6d1f-4c55-9a1e-2f1d1a7c0001", "controller": true}]);
    for i in 0..4 {
        let mut pod = gpu_pod(&format!("small-{i}"), 2, json!({}));
        pod.metadata.owner_references = serde_json::from_value(owner.clone()).unwrap();
        pods.create(&PostParams::default(), &pod).await.unwrap();
        let name = format!("small-{i}");
        eventually(&format!("{name} bound"), Duration::from_secs(30), || {
            let (pods, name) = (pods.clone(), name.clone());
            async move { pods.get(&name).await.ok()?.spec?.node_name }
        })
        .await;
    }

    // A Volcano PodGroup of two 8-GPU pods; the default scheduler places
    // its pods one by one, and refuses them.
    let pgr = kube::api::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("scheduling.volcano.sh", "v1beta1", "PodGroup"),
        "podgroups",
    );
    let podgroups: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &pgr);
    let pg: DynamicObject =
        serde_json::from_value(json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "big", "namespace": ns}, "spec": {"minMember": 2},
        // What vc-scheduler's enqueue action would set (this CRD has no
        // status subresource): the gang passed its queue.
        "status": {"phase": "Inqueue"}}))
        .unwrap();
    podgroups.create(&PostParams::default(), &pg).await.unwrap();
    for i in 0..2 {
        let mut pod = gpu_pod(&format!("big-{i}"), 8, json!({}));
        pod.metadata.annotations = Some([("scheduling.k8s.io/group-name".to_string(), "big".to_string())].into());
        pods.create(&PostParams::default(), &pod).await.unwrap();
    }
    let refused = eventually("the scheduler refuses big-0", Duration::from_secs(60), || {
        let pods = pods.clone();
        async move {
            let status = pods.get("big-0").await.ok()?.status?;
            status
                .conditions?
                .into_iter()
                .find(|c| c.type_ == "PodScheduled" && c.status == "False")
                .and_then(|c| c.message)
        }
    })
    .await;
    eprintln!("kube-scheduler on big-0: {refused}");
    assert!(refused.contains("Insufficient nvidia.com/gpu"), "{refused}");

    // Free GPUs per node from the API server's own objects.
    let nodes: Api<Node> = Api::all(client.clone());
    let mut free: BTreeMap<String, u64> = BTreeMap::new();
    for n in nodes.list(&ListParams::default()).await.unwrap() {
        let alloc = n
            .status
            .and_then(|s| s.allocatable)
            .and_then(|a| a.get("nvidia.com/gpu").map(|q| q.0.parse::<u64>().unwrap()));
        free.insert(n.metadata.name.unwrap(), alloc.unwrap_or(0));
    }
    for p in Api::<Pod>::all(client.clone()).list(&ListParams::default()).await.unwrap() {
        let phase = p.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default();
        if let Some(node) = p.spec.as_ref().and_then(|s| s.node_name.clone())
            && phase != "Succeeded"
            && phase != "Failed"
        {
            *free.get_mut(&node).unwrap() -= gpus_of(&p);
        }
    }
    eprintln!("free GPUs per node (API server): {free:?}");
    let total_free: u64 = free.values().sum();
    assert_eq!(total_free, 24, "4 × 8 − 4 × 2");
    assert!(free.values().all(|f| *f < 8), "the scheduler spread the small pods: {free:?}");

    // kgpu, from a live sync.
    let target = Target { kubeconfig: Some(cp.kubeconfig.clone()), context: None };
    let (snap, now) = load::kube(&target, &Scope::default()).await.unwrap();
    let a = analysis::analyze(&snap, now, &Thresholds::default());
    let f = &a.fragmentation;
    let gang = f.shapes.iter().find(|s| s.demand.label() == "2×8" && s.demand.is_pending()).expect("the gang's shape");
    assert!(!gang.fits_now);
    assert_eq!((gang.largest_gang, gang.usable_free, gang.stranded_free), (0, 0, total_free));
    assert_eq!(f.free_total, total_free);
    assert_eq!(f.stranded_total, total_free, "every free GPU is stranded for the only pending shape");
    let per_node: BTreeMap<String, u64> = f.stranded_by_node.iter().map(|(n, s)| (n.to_string(), *s)).collect();
    assert_eq!(per_node, free);
    // Two nodes must be emptied: one 2-GPU pod moved off each.
    assert_eq!(f.plan.status, PlanStatus::Found, "{:?}", f.plan.status);
    assert_eq!(f.plan.steps.len(), 2, "{:?}", f.plan.steps);
    assert_eq!(f.plan.nodes_freed.len(), 2);
    // The pending chain agrees: blocked at the fit step, with the plan as the unblock.
    let item = a.pending.iter().find(|i| i.name == "big").expect("the PodGroup is pending");
    assert_eq!(item.blocking_str(), "fit");
    assert!(item.unblock[0].starts_with("run the defragmentation plan"), "{:?}", item.unblock);
}
