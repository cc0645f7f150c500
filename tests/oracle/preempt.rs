//! Preemption and nomination for the scheduler oracle: full GPU nodes, then
//! pods of several priorities with labels and rules about each other. The
//! real scheduler preempts for the higher ones (its victims stay
//! Terminating: no kubelet ends them), nominates them
//! (`status.nominatedNodeName`), clears a lower nomination when a higher pod
//! takes the node, and counts each nominated pod of equal or higher priority
//! as placed on its node — its GPUs, its host ports, its labels for the
//! others' affinity, anti-affinity and spread, and its own anti-affinity —
//! when it judges the next pod.

use proptest::prelude::*;
use serde_json::{Value, json};

use super::cases::{self, ClusterCase, ContainerCase, NodeCase, PodCase};
use super::inter_pod::{InterPodCase, PodTermCase};

/// The PriorityClasses the pods name (none: priority 0, the fillers').
pub const PRIORITY_CLASSES: [(&str, i32); 3] = [("oracle-mid", 500), ("oracle-high", 1000), ("oracle-top", 2000)];

pub fn priority_class_json(name: &str, value: i32) -> Value {
    json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value})
}

/// A Ready, untainted 8-GPU node (its hostname, pool and zone labels from
/// `node_json`).
fn gpu_node() -> impl Strategy<Value = NodeCase> {
    cases::roomy_node().prop_map(|n| NodeCase { labels: Some(0), gpus: 8, mig: None, ..n })
}

/// A pod of `gpus` GPUs with `inter_pod`'s labels and rules; it lingers
/// when preempted.
fn gpu_pod(
    base: PodCase,
    gpus: u32,
    inter_pod: super::inter_pod::InterPodCase,
    class: Option<&'static str>,
) -> PodCase {
    PodCase {
        main: ContainerCase { cpu_m: 100, memory_mi: 128, gpus },
        mig: None,
        inits: Vec::new(),
        sidecars: Vec::new(),
        overhead: false,
        tolerations: Vec::new(),
        selector: Vec::new(),
        affinity: Vec::new(),
        inter_pod,
        priority_class: class,
        lingers: true,
        scheduler_name: None,
        ..base
    }
}

/// 1–3 nodes, each with a priority-0 filler (2, 4 or 8 GPUs, mostly
/// labelled, no rules, sometimes binding a host port); then 1–2 preemptors
/// (priority 1000 or 2000, 1, 2 or 8 GPUs) whose required anti-affinity
/// keeps them off a labelled filler's host, so that the scheduler preempts
/// for labels and ports as well as for GPUs and the nominated preemptor
/// leaves room on its node; then 1–3 pods at priority 0, 500 or 1000 with
/// labels and rules, judged with the preemptors nominated ahead of them.
pub fn preempting() -> impl Strategy<Value = ClusterCase> {
    prop::collection::vec(gpu_node(), 1..=3)
        .prop_flat_map(|nodes| {
            let n = nodes.len();
            let filler = (cases::pod(n), prop::sample::select(vec![2u32, 2, 4, 8]), super::inter_pod::crowded())
                .prop_map(|(p, gpus, labels)| {
                    let labels = InterPodCase { app: labels.app, tier: labels.tier, ..Default::default() };
                    gpu_pod(p, gpus, labels, None)
                });
            let preemptor = (
                cases::pod(n),
                prop::sample::select(vec![1u32, 2, 8]),
                super::inter_pod::crowded(),
                prop::sample::select(vec!["a", "b"]),
                prop::sample::select(vec![PRIORITY_CLASSES[1].0, PRIORITY_CLASSES[2].0]),
            )
                .prop_map(|(p, gpus, rules, app, class)| {
                    let apart = PodTermCase {
                        app,
                        operator: "In",
                        topology_key: "kubernetes.io/hostname",
                        namespaces: super::inter_pod::NamespaceScope::Own,
                    };
                    gpu_pod(p, gpus, InterPodCase { anti_affinity: vec![apart], ..rules }, Some(class))
                });
            let class = prop::sample::select(vec![
                None,
                Some(PRIORITY_CLASSES[0].0),
                Some(PRIORITY_CLASSES[0].0),
                Some(PRIORITY_CLASSES[1].0),
            ]);
            let follower =
                (cases::pod(n), prop::sample::select(vec![1u32, 1, 2, 8]), super::inter_pod::crowded(), class)
                    .prop_map(|(p, gpus, rules, class)| gpu_pod(p, gpus, rules, class));
            (
                Just(nodes),
                prop::collection::vec(filler, n..=n),
                prop::collection::vec(preemptor, 1..=2),
                prop::collection::vec(follower, 1..=3),
            )
        })
        .prop_map(|(nodes, fillers, preemptors, followers)| ClusterCase {
            nodes,
            pods: fillers.into_iter().chain(preemptors).chain(followers).collect(),
        })
}
