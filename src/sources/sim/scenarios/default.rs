//! Scenario `default`: A busy mixed fleet.

use std::sync::Arc;

use crate::model::build::pod;
use crate::model::{Gang, GangKind, PodSet, Queue, QueueKind, QueueQuota, Resources, Sym, XidEvent, keys};

use super::super::catalog::{self, A100_80, H100, L40S, NodeSpec, R535, R550};
use super::super::{PodPlan, SimCluster};

use super::Scenario;
use super::blocks::*;

pub const SCENARIO: Scenario = Scenario {
    name: "default",
    title: "A busy mixed fleet",
    story: "64 nodes: H100 training pools behind Kueue, A100s mid driver upgrade, MIG inference nodes, L40S serving, a Volcano queue. Work arrives and finishes while you watch; one GPU has thrown Xid 48; four notebooks and two inference replicas hold GPUs and do nothing.",
    signal: "a bit of everything: quota waits, a MIG slice shortage, an upgrade in progress, an unhealthy GPU, idle holders",
    manifests: include_str!("../../../../assets/scenarios/default/scenario.yaml"),
    build,
};

fn build(sim: &mut SimCluster) {
    sim.churn_per_hour = 40.0;
    let h100 = gpu_pool(sim, "h100", 24, pool("h100", H100, 8, R550, true));
    let a100 = gpu_pool(sim, "a100", 16, pool("a100", A100_80, 8, R535, false));
    for i in 1..=8 {
        let mut spec = NodeSpec::new(format!("h100-mig-{i:02}"), "mig", H100, 8, R550);
        spec.tainted = true;
        spec.mig_config = Some("all-balanced".into());
        spec.created = ago(60 * 24 * 60);
        sim.add_gpu_node(spec);
    }
    let l40s = gpu_pool(sim, "l40s", 8, pool("l40s", L40S, 4, R550, false));
    for i in 1..=8 {
        sim.add_node(catalog::cpu_node(&format!("cpu-{i:02}"), ago(60 * 24 * 120)));
    }

    // Kueue: two research teams share H100 and A100 quota in a cohort.
    sim.add_flavor(flavor("h100", "h100", true));
    sim.add_flavor(flavor("a100", "a100", false));
    sim.add_queue(cluster_queue("research-a", Some("research"), &[("h100", 96, None), ("a100", 32, None)]));
    sim.add_queue(cluster_queue("research-b", Some("research"), &[("h100", 48, Some(16)), ("a100", 64, None)]));
    sim.add_queue(local_queue("team-a", "research", "research-a"));
    sim.add_queue(local_queue("team-b", "research", "research-b"));

    submit(sim, workload("team-a", "llama-pretrain", "research", 8, 8, 100, ago(60 * 14)), 8, None);
    submit(sim, workload("team-b", "sd-finetune", "research", 4, 8, 50, ago(60 * 3)), 8, Some(3 * 3600));
    submit(sim, workload("team-a", "eval-sweep", "research", 2, 8, 50, ago(45)), 8, Some(5400));
    submit(sim, workload("team-b", "moe-ablation", "research", 6, 8, 50, ago(25)), 8, Some(4 * 3600));
    submit(sim, workload("team-b", "rlhf-policy", "research", 4, 8, 40, ago(12)), 8, Some(2 * 3600));

    // Serving on L40S, notebooks on A100, inference on MIG slices.
    for i in 0..12 {
        let p = pod(&format!("llm-serve-6d9f7c-{}", sim.next_suffix()))
            .ns("serving")
            .gpus(1)
            .cpu_milli(8000)
            .memory_gi(48)
            .selector("kgpu.dev/pool", "l40s")
            .owner("ReplicaSet", "llm-serve-6d9f7c")
            .image(IMAGE_SERVE)
            .created(ago(600 + i))
            .build();
        sim.add_pod(p, PodPlan { runs_for: None, replace_on_failure: true });
    }
    for i in 0..6 {
        let p = pod(&format!("notebooks-{i}"))
            .ns("notebooks")
            .gpus(1)
            .cpu_milli(8000)
            .memory_gi(64)
            .selector("kgpu.dev/pool", "a100")
            .owner("StatefulSet", "notebooks")
            .image(IMAGE_NOTEBOOK)
            .created(ago(300 + i))
            .build();
        sim.add_pod(p, PodPlan::default());
    }
    for (i, profile) in (0..24)
        .map(|i| (i, "1g.10gb"))
        .chain((0..8).map(|i| (i + 100, "2g.20gb")))
        .chain((0..7).map(|i| (i + 200, "3g.40gb")))
    {
        let p = pod(&format!("embed-{profile}-{i}"))
            .ns("inference")
            .mig(profile, 1)
            .cpu_milli(4000)
            .memory_gi(32)
            .tolerate(keys::RESOURCE_GPU)
            .owner("ReplicaSet", &format!("embed-{profile}"))
            .image(IMAGE_SERVE)
            .created(ago(200 + i))
            .build();
        sim.add_pod(p, PodPlan { runs_for: None, replace_on_failure: true });
    }
    // 68 pods for the 64 2g.20gb slices of the pool (all-balanced: one per GPU): four wait.
    for i in 0..60 {
        let p = pod(&format!("rerank-2g-{i}"))
            .ns("inference")
            .mig("2g.20gb", 1)
            .cpu_milli(4000)
            .memory_gi(32)
            .tolerate(keys::RESOURCE_GPU)
            .owner("ReplicaSet", "rerank-2g")
            .image(IMAGE_SERVE)
            .created(ago(30) + i)
            .build();
        sim.add_pod(p, PodPlan { runs_for: None, replace_on_failure: true });
    }

    // Volcano: an RL sweep that fits, and a 4×4 job that needs four whole L40S nodes while serving pods sit on all of them.
    let vq = Queue {
        kind: QueueKind::VolcanoQueue,
        namespace: None,
        name: Sym::new("rl"),
        cohort: None,
        cluster_queue: None,
        quotas: Box::new([QueueQuota {
            flavor: None,
            resource: Sym::new(keys::RESOURCE_GPU),
            nominal: 48,
            borrowing_limit: None,
            lending_limit: None,
            used: 8,
            reserved: 8,
            borrowed: 0,
        }]),
        pending: 1,
        reserving: 0,
        admitted: 1,
        conditions: Box::new([]),
        stop_policy: None,
        strict_fifo: false,
        state: Some(Sym::new("Open")),
        flavor_order: Box::new([]),
        fair_weight_milli: None,
        reclaim_within_cohort: None,
    };
    sim.add_queue(vq);
    for (name, members, gpus, pool) in [("rl-sweep", 4u32, 2u64, "l40s"), ("rl-big", 4, 4, "l40s")] {
        let pg = Gang {
            kind: GangKind::VolcanoPodGroup,
            namespace: Sym::new("rl"),
            name: Arc::from(name),
            queue: Some(Sym::new("rl")),
            min_members: members,
            pod_sets: Box::new([PodSet {
                name: Sym::new("worker"),
                count: members,
                min_count: Some(members),
                requests: catalog::requests(gpus, 8, 64),
                node_selector: crate::model::node::labels_from([("kgpu.dev/pool", pool)]),
                tolerations: Box::new([]),
                affinity: Box::new([]),
                claims: Box::new([]),
            }]),
            priority: 0,
            created: ago(20),
            uid: None,
            active: true,
            conditions: Box::new([]),
            admission: None,
            admission_checks: Box::new([]),
            requeue: None,
            phase: Some(Sym::new("Inqueue")),
            owner: None,
            min_resources: Some(catalog::requests(gpus * members as u64, 8 * members as u64, 64 * members as u64)),
            kueue_counted: None,
            running: 0,
        };
        sim.add_gang(pg, None);
        for i in 0..members {
            let p = pod(&format!("{name}-worker-{i}"))
                .ns("rl")
                .gpus(gpus)
                .cpu_milli(8000)
                .memory_gi(64)
                .selector("kgpu.dev/pool", pool)
                .group(name)
                .scheduler(super::super::scheduler::VOLCANO)
                .owner("Job", name)
                .image(IMAGE_CUDA_12_4)
                .cuda_require(require_12_4())
                .created(ago(20))
                .build();
            sim.add_pod(p, PodPlan::default());
        }
    }

    // Maintenance and faults: a cordoned node, an A100 upgrade to 550 in progress,
    // an H100 GPU that threw Xid 48 (double-bit ECC) and dropped out.
    let cordoned = h100[23].as_str().to_string();
    sim.edit_node(&cordoned, |n| n.unschedulable = true);
    sim.set_upgrade_target(R550);
    for (i, node) in a100.iter().enumerate().rev().take(4) {
        let state = if i == a100.len() - 1 { "validation-required" } else { "upgrade-required" };
        let n = node.as_str().to_string();
        sim.set_node_label(&n, keys::DRIVER_UPGRADE_STATE, Some(state));
        sim.edit_node(&n, |x| x.operator.upgrade_since = Some(ago(10)));
    }
    let sick = h100[6].as_str().to_string();
    sim.edit_devices(&sick, |d| {
        if let Some(g) = d.gpus.get_mut(3) {
            g.health = crate::model::GpuHealth::Unhealthy("Xid 48: double-bit ECC error".into());
            g.xids = Box::new([XidEvent { code: 48, at: ago(20) }]);
        }
    });
    sim.edit_node(&sick, |n| {
        n.capacity =
            Resources::from_pairs(n.capacity.iter().map(|(k, v)| (k, if k == keys::RESOURCE_GPU { 7 } else { v })));
        n.allocatable = n.capacity.clone();
    });
    // Idle holders: four notebooks nobody has touched for a while, and two
    // inference replicas that get no traffic, hold GPUs at 0–2%.
    for (i, minutes) in [(0, 200), (1, 130), (2, 70), (3, 40)] {
        sim.idle_holder("notebooks", &format!("notebooks-{i}"), ago(minutes));
    }
    for i in [3, 11] {
        sim.idle_holder("inference", &format!("embed-1g.10gb-{i}"), ago(90));
    }
    let _ = l40s;
    sim.settle();
    age_running(sim, 5, 60 * 20);
}

/// One arrival in the live default demo.
pub(in crate::sources::sim) fn arrival(sim: &mut SimCluster) {
    let roll = sim.rng.range(0, 99);
    let now = sim.now;
    let suffix = sim.next_suffix();
    if roll < 40 {
        let runs = sim.rng.range(20, 90) * 60;
        let p = pod(&format!("llm-serve-6d9f7c-{suffix}"))
            .ns("serving")
            .gpus(1)
            .cpu_milli(8000)
            .memory_gi(48)
            .selector("kgpu.dev/pool", "l40s")
            .owner("ReplicaSet", "llm-serve-6d9f7c")
            .image(IMAGE_SERVE)
            .created(now)
            .build();
        sim.add_pod(p, PodPlan { runs_for: Some(runs), replace_on_failure: true });
    } else if roll < 65 {
        let runs = sim.rng.range(30, 180) * 60;
        let p = pod(&format!("notebook-{suffix}"))
            .ns("notebooks")
            .gpus(1)
            .cpu_milli(8000)
            .memory_gi(64)
            .selector("kgpu.dev/pool", "a100")
            .owner("StatefulSet", "notebooks")
            .image(IMAGE_NOTEBOOK)
            .created(now)
            .build();
        sim.add_pod(p, PodPlan { runs_for: Some(runs), replace_on_failure: false });
    } else if roll < 85 {
        let runs = sim.rng.range(10, 60) * 60;
        let p = pod(&format!("embed-batch-{suffix}"))
            .ns("inference")
            .mig("1g.10gb", 1)
            .cpu_milli(4000)
            .memory_gi(32)
            .tolerate(keys::RESOURCE_GPU)
            .owner("Job", &format!("embed-batch-{suffix}"))
            .image(IMAGE_SERVE)
            .created(now)
            .build();
        sim.add_pod(p, PodPlan { runs_for: Some(runs), replace_on_failure: true });
    } else {
        let team = if sim.rng.chance(0.5) { "team-a" } else { "team-b" };
        let pods = if sim.rng.chance(0.6) { 2 } else { 4 };
        let runs = sim.rng.range(60, 240) * 60;
        let job = format!("exp-{suffix}");
        submit(sim, workload(team, &job, "research", pods, 8, 50, now), 8, Some(runs));
    }
}
