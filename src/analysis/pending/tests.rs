//! Unit tests of the pending chain on small built clusters.

use super::*;
use crate::analysis::testing::{node, pod, podgroup, snapshot};
use crate::analysis::{fragmentation, gangs};
use crate::model::{Node, PodPhase, TaintEffect};

const NOW: Timestamp = 10_000;

fn items(nodes: Vec<Node>, pods: Vec<Pod>) -> Vec<PendingItem> {
    let snap = snapshot(nodes, pods, vec![], NOW);
    let index = Index::build(&snap, NOW);
    let gang_rows = gangs::analyze(&index);
    let frag = fragmentation::analyze(&index);
    analyze(&index, &gang_rows, &frag)
}

fn item<'a>(items: &'a [PendingItem], name: &str) -> &'a PendingItem {
    items.iter().find(|i| i.name == name).expect(name)
}

fn step(item: &PendingItem, step: Step) -> &StepReport {
    item.steps.iter().find(|s| s.step == step).expect("step")
}

#[test]
fn pods_of_one_shape_share_the_verdict_but_name_themselves() {
    let nodes = vec![node("n1").gpus(8).build()];
    let busy = pod("busy").gpus(6).owner("Job", "busy").on("n1").running().build();
    let pods = vec![busy, pod("a").gpus(4).build(), pod("b").gpus(4).build()];
    let items = items(nodes, pods);
    let (a, b) = (item(&items, "a"), item(&items, "b"));
    for it in [a, b] {
        assert_eq!(it.blocking, Some(Step::Fit));
        assert_eq!(&*step(it, Step::Fit).summary, "0/1 nodes can take it: 1 insufficient-gpu");
        // 8 − 6 = 2 free; 4 needed → free 2 more.
        assert!(
            it.unblock.iter().any(
                |u| u.starts_with("free 2 more GPU(s) on n1 (2 free of 8): stopping the cheapest pods there loses")
            ),
            "{:?}",
            it.unblock
        );
    }
    // The busy Job pod has nowhere else to go: the plan (for the older pod)
    // can only evict it, and says the work is lost.
    assert!(a.unblock[0].contains("1 eviction(s) (work lost)"), "{:?}", a.unblock);
    assert_eq!(step(a, Step::Fit).commands[0], "kubectl describe pod -n default a");
    assert_eq!(step(b, Step::Fit).commands[0], "kubectl describe pod -n default b");
}

#[test]
fn the_scheduler_is_cross_checked_and_the_missing_toleration_named() {
    let nodes = vec![node("n1").gpus(8).taint("nvidia.com/gpu", "present", TaintEffect::NoSchedule).build()];
    let v1_36 = "0/1 nodes are available: 1 node(s) had untolerated taint(s). no new claims to deallocate, preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.";
    let stale = "0/1 nodes are available: 1 Insufficient nvidia.com/gpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.";
    let pods = vec![
        pod("agrees").gpus(1).unschedulable(v1_36, NOW - 60).build(),
        pod("stale").gpus(1).unschedulable(stale, NOW - 60).build(),
        pod("odd").gpus(1).unschedulable("the scheduler was having a bad day", NOW - 60).build(),
    ];
    let items = items(nodes, pods);
    let agrees = item(&items, "agrees");
    assert_eq!(agrees.agrees_with_scheduler, Some(true));
    assert_eq!(agrees.node_reasons.get("untolerated-taint:nvidia.com/gpu"), Some(&1));
    assert!(
        agrees
            .hints
            .iter()
            .any(|h| h.starts_with("missing-toleration: every GPU node has taint nvidia.com/gpu=present:NoSchedule")),
        "{:?}",
        agrees.hints
    );
    let stale = item(&items, "stale");
    assert_eq!(stale.agrees_with_scheduler, Some(false));
    assert!(
        stale.disagreement.as_deref().is_some_and(|d| d.contains("1 insufficient-gpu")),
        "{:?}",
        stale.disagreement
    );
    // Unknown words are kept as they were, marked, and not compared.
    let odd = item(&items, "odd");
    assert_eq!(odd.scheduler_recognised, Some(false));
    assert_eq!(odd.scheduler_message.as_deref(), Some("the scheduler was having a bad day"));
    assert_eq!(odd.agrees_with_scheduler, None);
}

#[test]
fn a_gpu_count_in_the_node_selector_is_a_known_mistake() {
    let nodes = vec![node("n1").gpus(8).build()];
    let pods = vec![pod("sel").selector("nvidia.com/gpu", "8").build()];
    let items = items(nodes, pods);
    let it = item(&items, "sel");
    assert_eq!(it.blocking, Some(Step::Fit));
    assert_eq!(it.node_reasons.get("selector-mismatch"), Some(&1));
    assert!(it.hints.iter().any(|h| h.starts_with("gpu-count-in-node-selector")), "{:?}", it.hints);
}

#[test]
fn a_silent_device_plugin_is_the_blocking_step() {
    // 8 GPUs in hardware, none advertised: the fit failure is the plugin's.
    let nodes = vec![node("n1").hardware(8).build()];
    let pods = vec![pod("p").gpus(1).build()];
    let items = items(nodes, pods);
    let it = item(&items, "p");
    assert_eq!(it.blocking, Some(Step::DevicePlugin));
    assert_eq!(step(it, Step::Fit).verdict, Verdict::Warn);
    assert!(it.unblock[0].starts_with("restart the device plugin on n1"), "{:?}", it.unblock);
}

#[test]
fn bound_pods_that_cannot_start_are_pending_on_the_nodes_side() {
    let nodes = vec![node("up").gpus(8).build(), node("down").gpus(8).not_ready().build()];
    let pods = vec![
        pod("stuck").gpus(8).on("down").phase(PodPhase::Pending).owner("Job", "train").build(),
        pod("orphan").gpus(4).on("deleted-node").phase(PodPhase::Pending).build(),
        // Running on a NotReady node: the kubelet's last word was Running; not pending.
        pod("was-running").gpus(2).on("up").running().build(),
        pod("starting").gpus(2).on("up").phase(PodPhase::Pending).build(),
    ];
    let items = items(nodes, pods);
    let stuck = item(&items, "stuck");
    assert_eq!(stuck.blocking, Some(Step::DevicePlugin));
    assert!(stuck.summary.contains("bound to down, which is NotReady"), "{}", stuck.summary);
    assert!(step(stuck, Step::DevicePlugin).details[0].contains("its controller then creates a replacement"));
    let orphan = item(&items, "orphan");
    assert!(orphan.summary.contains("bound to deleted-node, which is no longer in the cluster"), "{}", orphan.summary);
    // A pod the kubelet of a Ready node is starting is not kgpu's to explain.
    assert!(items.iter().all(|i| i.name != "was-running" && i.name != "starting"));
}

#[test]
fn a_gang_short_of_two_nodes_is_told_to_make_room_on_two() {
    let nodes = vec![node("n1").gpus(8).build(), node("n2").gpus(8).build(), node("n3").gpus(8).build()];
    let pods = vec![
        pod("busy1").gpus(5).on("n1").running().build(),
        pod("busy2").gpus(2).on("n2").running().build(),
        pod("busy3").gpus(7).on("n3").running().build(),
        pod("train-0").gpus(8).group("train").build(),
        pod("train-1").gpus(8).group("train").build(),
    ];
    let snap = snapshot(nodes, pods, vec![podgroup("train", 2, 8).phase("Inqueue").build()], NOW);
    let index = Index::build(&snap, NOW);
    let items = analyze(&index, &gangs::analyze(&index), &fragmentation::analyze(&index));
    let it = items.iter().find(|i| i.name.contains("train")).expect("the gang is pending");
    // The two nodes whose holders lose the least work, here the ones with
    // the most free: n2 (6 free, a 2-GPU pod), n1 (3 free, a 5-GPU pod).
    // Running since the epoch with no checkpoint: NOW seconds busy + 10 min restart.
    let lost = (2.0 + 5.0) * (NOW as f64 + 600.0) / 3600.0;
    let wanted = format!(
        "free GPUs on 2 node(s), one pod of 8 each: 2 more on n2 (6 free of 8), 5 more on n1 (3 free of 8); stopping the cheapest pods there loses {lost:.1} GPU-hours of work"
    );
    assert!(it.unblock.contains(&wanted), "{:?}", it.unblock);
}

/// Verbatim shape from kubernetes/kubernetes issue threads about topology
/// spread (`N node(s) didn't match pod topology spread constraints`) for a
/// pod with no constraint of its own (the scheduler profile's
/// defaultConstraints, which kgpu cannot see): kgpu finds room, and must
/// not say "nothing blocks it" over the scheduler's word.
const SPREAD_MESSAGE: &str = "0/3 nodes are available: 1 Insufficient nvidia.com/gpu, 2 node(s) didn't match pod topology spread constraints. preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, 2 Preemption is not helpful for scheduling.";

fn three_nodes() -> Vec<Node> {
    vec![node("n1").gpus(8).build(), node("n2").gpus(8).build(), node("n3").gpus(8).build()]
}

#[test]
fn the_schedulers_word_is_the_headline_where_kgpu_finds_room() {
    let busy = pod("busy").gpus(8).owner("Job", "busy").on("n1").running().build();
    let pods = vec![busy, pod("spread").gpus(4).created(NOW - 3600).unschedulable(SPREAD_MESSAGE, NOW - 3500).build()];
    let items = items(three_nodes(), pods);
    let it = item(&items, "spread");
    assert_eq!(it.blocking, Some(Step::Scheduler), "{}", it.summary);
    assert_eq!(it.verdict_source, VerdictSource::Scheduler);
    assert!(it.summary.starts_with("the scheduler's verdict: the scheduler says: 0/3 nodes"), "{}", it.summary);
    let s = step(it, Step::Scheduler);
    assert_eq!(s.said_by, Some(VerdictSource::Scheduler));
    assert!(
        s.details.iter().any(|d| d.contains("pod topology spread")
            && d.contains("PodTopologySpread")
            && d.contains("not evaluated by kgpu")),
        "{:?}",
        s.details
    );
    assert!(
        s.details.iter().any(|d| d.contains("Insufficient nvidia.com/gpu") && d.contains("modelled by kgpu")),
        "{:?}",
        s.details
    );
    assert!(
        s.commands.iter().any(|c| c.contains("topologySpreadConstraints") && c.contains("spread -n default")),
        "{:?}",
        s.commands
    );
    assert!(!it.summary.contains("nothing blocks it"));
}

#[test]
fn a_change_kgpu_can_name_explains_the_difference() {
    // A node that joined after the scheduler's last attempt.
    let busy = pod("busy").gpus(8).owner("Job", "busy").on("n1").running().build();
    let nodes =
        vec![node("n1").gpus(8).build(), node("n2").gpus(8).build(), node("n3").gpus(8).created(NOW - 10).build()];
    let pods = vec![busy, pod("spread").gpus(4).unschedulable(SPREAD_MESSAGE, NOW - 60).build()];
    let found = items(nodes, pods);
    let it = item(&found, "spread");
    assert_eq!(it.blocking, None);
    assert_eq!(it.verdict_source, VerdictSource::Kgpu);
    assert!(it.summary.contains("node n3 joined after its last attempt"), "{}", it.summary);
    // A pod that finished after it: its GPUs are free now.
    let busy = pod("busy").gpus(8).owner("Job", "busy").on("n1").running().build();
    let done =
        pod("done").gpus(8).owner("Job", "done").on("n2").phase(PodPhase::Succeeded).transitioned(NOW - 5).build();
    let pods = vec![busy, done, pod("spread").gpus(4).unschedulable(SPREAD_MESSAGE, NOW - 60).build()];
    let found = items(three_nodes(), pods);
    let it = item(&found, "spread");
    assert_eq!(it.blocking, None);
    assert!(it.summary.contains("pod done finished on n2 after its last attempt"), "{}", it.summary);
}

#[test]
fn another_scheduler_is_named_and_never_the_default_one_promised() {
    let pods = vec![pod("kai").gpus(1).scheduler("kai-scheduler").build()];
    let found = items(three_nodes(), pods);
    let it = item(&found, "kai");
    assert_eq!(it.blocking, Some(Step::Scheduler));
    assert!(
        it.summary.contains("scheduled by 'kai-scheduler'") && it.summary.contains("is 'kai-scheduler' running?"),
        "{}",
        it.summary
    );
    assert!(!it.summary.contains("should place it"));
    // Its own words, where it left some.
    let said = "0/3 nodes are available: 3 node(s) didn't have enough resource: GPUs";
    let pods = vec![pod("kai").gpus(1).scheduler("kai-scheduler").unschedulable(said, NOW - 60).build()];
    let found = items(three_nodes(), pods);
    let it = item(&found, "kai");
    assert!(it.summary.contains(said), "{}", it.summary);
}

#[test]
fn words_kgpu_cannot_read_are_still_the_headline() {
    let pods = vec![pod("odd").gpus(1).unschedulable("the scheduler was having a bad day", NOW - 60).build()];
    let it = items(three_nodes(), pods).remove(0);
    assert_eq!(it.blocking, Some(Step::Scheduler));
    assert!(it.summary.contains("in words kgpu does not parse"), "{}", it.summary);
}

/// 1.26+ writes a PreFilter rejection once, without a count (from the
/// VolumeBinding plugin's source): the whole message is the headline.
#[test]
fn a_prefilter_rejection_is_the_headline_with_its_plugin() {
    let said = "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.";
    let pods = vec![pod("pvc").gpus(1).unschedulable(said, NOW - 60).build()];
    let it = items(three_nodes(), pods).remove(0);
    assert_eq!(it.blocking, Some(Step::Scheduler));
    let s = step(&it, Step::Scheduler);
    assert!(
        s.details[0].contains("VolumeBinding") && s.details[0].contains("not evaluated by kgpu"),
        "{:?}",
        s.details
    );
}

/// Storage kgpu cannot read (a dump without PersistentVolumeClaims, RBAC
/// that forbids them): its claims are not judged missing; the volumes step
/// says why it is not evaluated, and the scheduler's words are the headline.
#[test]
fn claims_kgpu_cannot_read_are_not_evaluated_and_the_scheduler_speaks() {
    let said = "0/3 nodes are available: persistentvolumeclaim \"data\" not found. not found";
    let mut p = pod("reader").gpus(1).unschedulable(said, NOW - 60).build();
    p.volumes = Box::new([crate::model::ClaimUse { claim: "data".into(), ephemeral: false }]);
    let it = items(three_nodes(), vec![p]).remove(0);
    assert_eq!(it.blocking, Some(Step::Scheduler));
    let v = step(&it, Step::Volumes);
    assert_eq!(v.verdict, Verdict::NotApplicable);
    assert!(v.summary.contains("not evaluated: kgpu has no persistentvolumeclaims"), "{}", v.summary);
    assert!(it.summary.contains(said), "{}", it.summary);
}

#[test]
fn a_host_port_taken_on_every_node_blocks_as_the_scheduler_says_and_names_who_holds_it() {
    let nodes = vec![node("n1").gpus(8).build(), node("n2").gpus(8).build(), node("n3").gpus(8).build()];
    let exporter =
        |name: &str, on: &str| pod(name).host_port(9400).owner("DaemonSet", "exporter").on(on).running().build();
    let message = "0/3 nodes are available: 2 node(s) didn't have free ports for the requested pod ports, 1 Insufficient nvidia.com/gpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.";
    let pods = vec![
        exporter("exporter-1", "n1"),
        exporter("exporter-2", "n2"),
        pod("big").gpus(8).owner("Job", "big").on("n3").running().build(),
        pod("train").gpus(1).host_port(9400).unschedulable(message, NOW - 60).build(),
        // Another port: room on every node but the full one.
        pod("serve").gpus(1).host_port(8080).build(),
    ];
    let items = items(nodes, pods);
    let train = item(&items, "train");
    assert_eq!(train.blocking, Some(Step::Fit));
    assert_eq!(train.node_reasons.get("ports-taken"), Some(&2), "{:?}", train.node_reasons);
    assert_eq!(train.agrees_with_scheduler, Some(true), "{:?}", train.disagreement);
    assert!(
        train
            .unblock
            .iter()
            .any(|u| u.starts_with("host port 9400/TCP is taken on n1 by default/exporter-1 (and 1 more node(s))")),
        "{:?}",
        train.unblock
    );
    let serve = item(&items, "serve");
    assert_eq!(serve.blocking, None, "{}", serve.summary);
    assert_eq!(&*step(serve, Step::Fit).summary, "fits on 2 of 3 node(s) now");
}

#[test]
fn pods_binding_one_host_port_take_a_node_each() {
    // A gang of four hostNetwork workers on two empty 8-GPU nodes: the GPUs
    // would hold all four, the port only two.
    let nodes = vec![node("n1").gpus(8).build(), node("n2").gpus(8).build()];
    let members: Vec<Pod> =
        (0..4).map(|i| pod(&format!("w-{i}")).gpus(2).host_port(29500).group("pg").build()).collect();
    let snap = snapshot(nodes, members, vec![podgroup("pg", 4, 2).phase("Inqueue").build()], NOW);
    let index = Index::build(&snap, NOW);
    let items = analyze(&index, &gangs::analyze(&index), &fragmentation::analyze(&index));
    let pg = item(&items, "pg");
    assert_eq!(pg.blocking, Some(Step::Fit), "{}", pg.summary);
    assert!(step(pg, Step::Fit).summary.starts_with("room for 2 of the 4 pod(s)"), "{}", step(pg, Step::Fit).summary);
}

#[test]
fn a_nominated_pod_waits_for_the_pods_preempted_for_it_and_gets_no_plan_of_its_own() {
    let nodes = vec![node("n1").gpus(8).build()];
    let pods = vec![
        pod("low").gpus(8).owner("Job", "low").on("n1").running().terminating().build(),
        pod("high").gpus(8).priority(1000).nominated("n1").build(),
    ];
    let items = items(nodes, pods);
    let high = item(&items, "high");
    assert_eq!(high.blocking, Some(Step::Fit));
    assert_eq!(high.nominated_node, Some(Sym::new("n1")));
    assert_eq!(
        &*step(high, Step::Fit).summary,
        "the scheduler preempted for it on n1 and waits for 1 pod(s) to terminate: default/low"
    );
    assert!(high.summary.ends_with("waits for 1 pod(s) to terminate: default/low"), "{}", high.summary);
    assert_eq!(high.unblock.len(), 1, "{:?}", high.unblock);
    assert!(high.unblock[0].starts_with("none by hand while they terminate"), "{:?}", high.unblock);
    assert!(high.hints.iter().all(|h| !h.starts_with("preemption: ")), "{:?}", high.hints);
    assert!(high.preemption.is_none());
    // The Fleet pane's plan does not evict for it either.
    let snap = snapshot(
        vec![node("n1").gpus(8).build()],
        vec![
            pod("low").gpus(8).owner("Job", "low").on("n1").running().terminating().build(),
            pod("high").gpus(8).priority(1000).nominated("n1").build(),
        ],
        vec![],
        NOW,
    );
    let frag = fragmentation::analyze(&Index::build(&snap, NOW));
    match &frag.plan.status {
        fragmentation::PlanStatus::Impossible(why) => {
            assert!(why.starts_with("the scheduler is preempting for Pod default/high on n1"), "{why}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn room_held_for_a_nominated_pod_is_taken_for_pods_of_equal_or_lower_priority_only() {
    // The preempted pods are gone: n1's 8 GPUs are free and held for `high`.
    let nodes = vec![node("n1").gpus(8).build()];
    let pods = vec![
        pod("high").gpus(8).priority(100).nominated("n1").created(NOW - 300).build(),
        pod("same").gpus(4).priority(100).created(NOW - 200).build(),
        pod("lower").gpus(4).priority(10).created(NOW - 100).build(),
        pod("higher").gpus(4).priority(500).created(NOW - 50).build(),
    ];
    let items = items(nodes, pods);
    assert_eq!(item(&items, "high").blocking, None, "{}", item(&items, "high").summary);
    for name in ["same", "lower"] {
        let it = item(&items, name);
        assert_eq!(it.blocking, Some(Step::Fit), "{name}: {}", it.summary);
        assert_eq!(it.node_reasons.get("insufficient-gpu"), Some(&1), "{name}");
    }
    assert_eq!(item(&items, "higher").blocking, None);
}

#[test]
fn a_request_no_node_can_ever_hold_says_so() {
    let nodes = vec![node("n1").gpus(8).build(), node("n2").gpus(8).build()];
    let items = items(nodes, vec![pod("huge").gpus(16).build()]);
    let huge = item(&items, "huge");
    assert_eq!(huge.blocking, Some(Step::Fit));
    assert!(
        huge.unblock.iter().any(
            |u| u.starts_with("no node can ever hold it: it asks 16 nvidia.com/gpu, the most any node offers is 8")
        ),
        "{:?}",
        huge.unblock
    );
}

#[test]
fn a_gpu_node_short_of_cpu_is_advised_on_cpu_not_gpus() {
    let nodes = vec![node("n1").gpus(8).cpu(16).build()];
    let pods = vec![
        pod("prep").cpu_milli(12_000).owner("Job", "prep").on("n1").running().build(),
        pod("train").gpus(2).cpu_milli(8_000).build(),
    ];
    let items = items(nodes, pods);
    let train = item(&items, "train");
    assert_eq!(train.blocking, Some(Step::Fit));
    assert!(train.unblock.iter().all(|u| !u.contains("GPU(s) on")), "{:?}", train.unblock);
    assert_eq!(train.unblock, ["free 4 more cpu (4 free of 16) on n1 (it has the GPUs), or ask for less"]);
}

#[test]
fn a_nominated_pods_host_port_is_taken_for_pods_below_it() {
    let nodes = vec![node("n1").gpus(8).build()];
    let pods = vec![
        pod("high").gpus(2).host_port(29500).priority(100).nominated("n1").created(NOW - 300).build(),
        pod("low").gpus(2).host_port(29500).priority(10).created(NOW - 100).build(),
    ];
    let items = items(nodes, pods);
    let low = item(&items, "low");
    assert_eq!(low.blocking, Some(Step::Fit), "{}", low.summary);
    assert_eq!(low.node_reasons.get("ports-taken"), Some(&1), "{:?}", low.node_reasons);
    assert!(low.unblock.iter().any(|u| u.contains("taken on n1 by default/high")), "{:?}", low.unblock);
}

#[test]
fn room_is_made_where_the_least_work_is_lost_not_where_the_most_is_free() {
    // n1 has 4 free beside a busy 4-GPU trainer; n2 has none free, all 8
    // held by a notebook idle for the last 3 hours (agent readings).
    let nodes = vec![node("n1").gpus(8).build(), node("n2").gpus(8).build()];
    let pods = vec![
        pod("trainer").gpus(4).owner("Job", "trainer").on("n1").running().transitioned(NOW - 7200).build(),
        pod("notebook").gpus(8).on("n2").running().transitioned(NOW - 3 * 3600).build(),
        pod("wants-8").gpus(8).build(),
    ];
    let mut snap = snapshot(nodes, pods, vec![], NOW);
    let mut cluster = crate::model::Cluster::new(snap.source.clone());
    cluster.apply(crate::model::ModelEvent::Clock(NOW));
    cluster.apply(crate::model::ModelEvent::Upsert(crate::model::Object::Usage(crate::model::NodeUsage {
        problem: None,
        node: crate::model::Sym::new("n2"),
        source: crate::model::UsageSource::Agent,
        at: NOW,
        devices: (0..8)
            .map(|i| crate::model::DeviceReading {
                gpu: crate::model::Sym::new(&format!("GPU-n2-{i}")),
                index: i,
                slice: None,
                holders: Box::new([crate::model::PodKey::new("default", "notebook")]),
                busy_pct: Some(0.0),
                memory_used_mib: Some(1_000),
                idle_since: Some(NOW - 3 * 3600),
            })
            .collect(),
    })));
    snap.usage = cluster.snapshot().usage;
    let index = Index::build(&snap, NOW);
    let items = analyze(&index, &gangs::analyze(&index), &fragmentation::analyze(&index));
    let it = item(&items, "wants-8");
    assert!(
        it.unblock.iter().any(|u| u
            == "free 8 more GPU(s) on n2 (0 free of 8): stopping the cheapest pods there loses 0.0 GPU-hours of work"),
        "{:?}",
        it.unblock
    );
    assert!(!it.unblock.iter().any(|u| u.contains("on n1")), "{:?}", it.unblock);
}

#[test]
fn replicas_that_refuse_each_other_per_node_take_a_node_each() {
    // Two 1-GPU members with required anti-affinity on the hostname: one
    // 8-GPU node holds one of them, not eight.
    let nodes = vec![node("n1").gpus(8).label("kubernetes.io/hostname", "n1").build()];
    let member = |name: &str| {
        pod(name)
            .gpus(1)
            .group("apart")
            .pod_label("app", "apart")
            .anti_affinity("app", "apart", "kubernetes.io/hostname")
            .build()
    };
    let pods = vec![member("apart-0"), member("apart-1")];
    let snap = snapshot(nodes, pods, vec![podgroup("apart", 2, 1).phase("Inqueue").build()], NOW);
    let index = Index::build(&snap, NOW);
    let items = analyze(&index, &gangs::analyze(&index), &fragmentation::analyze(&index));
    let it = items.iter().find(|i| i.name.contains("apart")).expect("the gang is pending");
    assert_eq!(&*step(it, Step::Fit).summary, "room for 1 of the 2 pod(s) of shape 1×1 it needs", "{it:?}");
}

#[test]
fn a_cordoned_node_with_room_is_the_first_fix() {
    // n1 was drained and stays cordoned with 8 free GPUs; n2 is full. The
    // cheapest fix is the uncordon, before any eviction.
    let nodes = vec![node("n1").gpus(8).cordoned().build(), node("n2").gpus(8).build()];
    let pods = vec![
        pod("busy").gpus(8).owner("Job", "busy").on("n2").running().build(),
        pod("train").gpus(8).owner("Job", "train").build(),
    ];
    let items = items(nodes, pods);
    let it = item(&items, "train");
    assert_eq!(it.blocking, Some(Step::Fit));
    assert!(
        it.unblock[0].starts_with("uncordon n1: only the cordon keeps this pod out there, with room for 1 pod(s) of this shape now (enough); if its maintenance is over: kubectl uncordon n1"),
        "{:?}",
        it.unblock
    );
}

#[test]
fn replicas_that_refuse_each_other_per_zone_take_a_zone_each() {
    // Three 1-GPU members that refuse to share a zone; three 8-GPU nodes in
    // two zones hold two of them, however many GPUs are free.
    const ZONE: &str = "topology.kubernetes.io/zone";
    let nodes = vec![
        node("a1").gpus(8).label(ZONE, "a").build(),
        node("a2").gpus(8).label(ZONE, "a").build(),
        node("b1").gpus(8).label(ZONE, "b").build(),
    ];
    let member = |name: &str| {
        pod(name).gpus(1).group("zonal").pod_label("app", "zonal").anti_affinity("app", "zonal", ZONE).build()
    };
    let pods = vec![member("zonal-0"), member("zonal-1"), member("zonal-2")];
    let snap = snapshot(nodes, pods, vec![podgroup("zonal", 3, 1).phase("Inqueue").build()], NOW);
    let index = Index::build(&snap, NOW);
    let frag = fragmentation::analyze(&index);
    let items = analyze(&index, &gangs::analyze(&index), &frag);
    let it = items.iter().find(|i| i.name.contains("zonal")).expect("the gang is pending");
    let fit = step(it, Step::Fit);
    assert_eq!(&*fit.summary, "room for 2 of the 3 pod(s) of shape 1×1 it needs", "{it:?}");
    assert!(
        it.unblock.iter().any(
            |u| u.contains("refuses each other in one topology.kubernetes.io/zone") && u.contains("22 more pod(s)")
        ),
        "{:?}",
        it.unblock
    );
    // The fragmentation pane counts the same room, and the plan says why it cannot help.
    let shape = frag.shapes.iter().find(|s| s.demand.name().contains("zonal")).expect("its shape");
    assert_eq!((shape.largest_gang, shape.fits_now), (2, false));
    assert!(
        matches!(&frag.plan.status, fragmentation::PlanStatus::Impossible(why) if why.contains("not topology.kubernetes.io/zone domains")),
        "{:?}",
        frag.plan.status
    );
}

#[test]
fn a_namespace_selector_reads_the_namespaces_labels() {
    // `guard` (in ml, labelled team=vision) refuses pods labelled app=web in
    // the namespaces labelled team=vision on its node: a web pod of ml, not
    // one of batch.
    const HOST: &str = "kubernetes.io/hostname";
    let nodes = vec![node("n1").gpus(8).label(HOST, "n1").build()];
    let guard = pod("guard")
        .ns("ml")
        .gpus(1)
        .anti_affinity("app", "web", HOST)
        .in_namespaces_labelled("team", "vision")
        .on("n1")
        .running()
        .build();
    let web = |ns: &str| pod(&format!("web-{ns}")).ns(ns).gpus(1).pod_label("app", "web").build();
    let mut snap = snapshot(nodes, vec![guard, web("ml"), web("batch")], vec![], NOW);
    let labelled = |name: &str, team: &str| {
        let labels =
            crate::model::node::labels_from([("team", team), (crate::model::pod_rules::NAMESPACE_NAME_LABEL, name)]);
        std::sync::Arc::new(crate::model::Namespace { name: Sym::new(name), labels })
    };
    snap.namespaces.insert(Sym::new("ml"), labelled("ml", "vision"));
    snap.namespaces.insert(Sym::new("batch"), labelled("batch", "speech"));
    let index = Index::build(&snap, NOW);
    let items = analyze(&index, &gangs::analyze(&index), &fragmentation::analyze(&index));
    let refused = item(&items, "web-ml");
    assert_eq!(refused.node_reasons.get("existing-anti-affinity"), Some(&1), "{:?}", refused.node_reasons);
    assert!(item(&items, "web-batch").node_reasons.is_empty(), "{:?}", item(&items, "web-batch"));
}

#[test]
fn a_nominated_pods_rules_count_on_its_node_for_pods_below_it() {
    const HOST: &str = "kubernetes.io/hostname";
    let nodes = vec![node("n1").gpus(8).label(HOST, "n1").build(), node("n2").gpus(8).label(HOST, "n2").build()];
    // `web-0` was nominated to n1 (the scheduler preempted there for it);
    // n2 is full. `web-1` refuses to share a host with another web pod.
    let full = pod("full").gpus(8).owner("Job", "full").on("n2").running().build();
    let web0 = pod("web-0").gpus(2).pod_label("app", "web").priority(100).nominated("n1").created(NOW - 300).build();
    let web1 = |priority: i32| {
        pod("web-1").gpus(2).pod_label("app", "web").anti_affinity("app", "web", HOST).priority(priority).build()
    };
    let below = items(nodes.clone(), vec![full.clone(), web0.clone(), web1(10)]);
    let it = item(&below, "web-1");
    assert_eq!(it.blocking, Some(Step::Fit), "{}", it.summary);
    assert_eq!(it.node_reasons.get("pod-anti-affinity"), Some(&1), "{:?}", it.node_reasons);
    assert!(it.unblock.iter().any(|u| u.contains("kept for pods the scheduler nominated there")), "{:?}", it.unblock);
    // Above the nominated pod, the scheduler does not count it.
    let above = items(nodes.clone(), vec![full.clone(), web0.clone(), web1(500)]);
    assert_eq!(item(&above, "web-1").blocking, None, "{}", item(&above, "web-1").summary);
    // The nominated pod's own anti-affinity refuses a pod below it too, if
    // InterPodAffinity runs for that pod at all: it has rules of its own
    // (or a bound pod's anti-affinity selects it). A pod with none is not
    // checked (the plugin's PreFilter says Skip): the scheduler places it.
    let loner = pod("loner").gpus(2).anti_affinity("team", "noisy", HOST).priority(100).nominated("n1").build();
    let noisy = pod("noisy").gpus(2).pod_label("team", "noisy").anti_affinity("app", "x", HOST).priority(10).build();
    let got = items(nodes.clone(), vec![full.clone(), loner.clone(), noisy]);
    let it = item(&got, "noisy");
    assert_eq!(it.node_reasons.get("existing-anti-affinity"), Some(&1), "{:?}", it.node_reasons);
    let plain = pod("noisy").gpus(2).pod_label("team", "noisy").priority(10).build();
    let got = items(nodes.clone(), vec![full.clone(), loner, plain]);
    assert_eq!(item(&got, "noisy").blocking, None, "{}", item(&got, "noisy").summary);
    // A partner that is only nominated does not satisfy affinity yet (the
    // scheduler's second pass, without the nominated pods).
    let cache = pod("cache").gpus(2).pod_label("app", "cache").priority(100).nominated("n1").build();
    let worker = pod("worker").gpus(2).pod_affinity("app", "cache", HOST).priority(10).build();
    let got = items(nodes, vec![full, cache, worker]);
    let it = item(&got, "worker");
    assert_eq!(it.blocking, Some(Step::Fit), "{}", it.summary);
    // n1 (the partner is only nominated there) and the full n2 (which has no partner either).
    assert_eq!(it.node_reasons.get("pod-affinity"), Some(&2), "{:?}", it.node_reasons);
}

#[test]
fn the_fragmentation_pane_sees_room_held_for_a_nominated_pod_as_the_chain_does() {
    const HOST: &str = "kubernetes.io/hostname";
    let nodes = vec![node("n1").gpus(8).label(HOST, "n1").build()];
    let pods = vec![
        pod("high").gpus(4).priority(100).nominated("n1").created(NOW - 300).build(),
        pod("low").gpus(6).priority(10).created(NOW - 100).build(),
        pod("web-0").gpus(1).pod_label("app", "web").priority(100).nominated("n1").build(),
        pod("web-1").gpus(1).pod_label("app", "web").anti_affinity("app", "web", HOST).build(),
    ];
    let snap = snapshot(nodes, pods, vec![], NOW);
    let index = Index::build(&snap, NOW);
    let frag = fragmentation::analyze(&index);
    let chain = analyze(&index, &gangs::analyze(&index), &frag);
    for name in ["low", "web-1"] {
        let shape = frag.shapes.iter().find(|s| s.demand.is_named("default", name)).expect(name);
        assert!(!shape.fits_now, "{name}: the pane says it fits now");
        assert_eq!(item(&chain, name).blocking, Some(Step::Fit), "{name}");
    }
    let low = frag.shapes.iter().find(|s| s.demand.is_named("default", "low")).expect("low");
    // 5 of n1's 8 free GPUs are promised to `high` and `web-0`: 3 are stranded for it.
    assert_eq!((low.usable_free, low.stranded_free), (0, 3));
}

#[test]
fn a_pod_created_ahead_of_the_clock_is_new_not_negative_and_stays_listed() {
    let nodes = vec![node("n1").gpus(8).build()];
    let pods =
        vec![pod("skewed").gpus(16).created(NOW + 86_400).build(), pod("old").gpus(16).created(NOW - 60).build()];
    let items = items(nodes, pods);
    assert_eq!(item(&items, "skewed").age, 0);
    assert_eq!(item(&items, "old").age, 60);
    assert_eq!(item(&items, "skewed").blocking, Some(Step::Fit));
}

/// A ReplicaSet whose pods a Ready node refuses at admission: its newest
/// refused pod stands for the unserved demand, at the device-plugin step;
/// once a pod of it runs elsewhere (the node cordoned), nothing is pending.
#[test]
fn a_controllers_pods_refused_at_admission_are_demand_until_one_runs() {
    let refused = |name: &str, at: Timestamp| {
        pod(name)
            .gpus(1)
            .owner("ReplicaSet", "serve-7f9c4")
            .on("gpu-03")
            .failed("UnexpectedAdmissionError", "Allocate failed due to requested number of devices unavailable")
            .transitioned(at)
            .build()
    };
    let nodes = vec![node("gpu-03").gpus(8).build(), node("gpu-04").gpus(8).build()];
    let pods = vec![refused("serve-a", NOW - 300), refused("serve-b", NOW - 60), refused("serve-c", NOW - 7200)];
    let found = items(nodes.clone(), pods.clone());
    assert_eq!(found.len(), 1, "{found:?}");
    let it = item(&found, "serve-b");
    assert_eq!(it.blocking, Some(Step::DevicePlugin));
    let said = step(it, Step::DevicePlugin);
    assert!(said.summary.starts_with("gpu-03's kubelet refused it at admission (UnexpectedAdmissionError)"));
    // The one refused two hours ago is out of the window.
    assert!(said.details.iter().any(|d| d.starts_with("2 pod(s) of ReplicaSet serve-7f9c4 refused there")), "{said:?}");
    let mut served = pods;
    served.push(pod("serve-d").gpus(1).owner("ReplicaSet", "serve-7f9c4").on("gpu-04").running().build());
    assert!(items(nodes, served).is_empty());
}
