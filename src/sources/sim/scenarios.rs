//! The demo's scripted failure scenarios. Each builds a cluster at
//! [`EPOCH`](super::EPOCH) with a story and the signal it is built to show;
//! `tests/scenarios.rs` asserts every signal through `kgpu snapshot`.

use std::sync::Arc;

use thiserror::Error;

use crate::model::build::pod;
use crate::model::{
    Admission, Condition, Flavor, Gang, GangKey, GangKind, Owner, PodPhase, PodSet, PodSetAssignment, Queue, QueueKind,
    QueueQuota, Resources, ScenarioInfo, Sym, Toleration, XidEvent, keys,
};

use super::catalog::{self, A100_80, Driver, GpuModel, H100, L40S, NodeSpec, R535, R550, R570};
use super::{EPOCH, Fault, GangTemplate, PodPlan, SimCluster};

pub struct Scenario {
    pub name: &'static str,
    pub title: &'static str,
    pub story: &'static str,
    pub signal: &'static str,
    build: fn(&mut SimCluster),
}

pub const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "default",
        title: "A busy mixed fleet",
        story: "64 nodes: H100 training pools behind Kueue, A100s mid driver upgrade, MIG inference nodes, L40S serving, a Volcano queue. Work arrives and finishes while you watch; one GPU has thrown Xid 48.",
        signal: "a bit of everything: quota waits, a MIG slice shortage, an upgrade in progress, an unhealthy GPU",
        build: default,
    },
    Scenario {
        name: "fragmented",
        title: "Free GPUs nobody can use",
        story: "8 nodes × 8 H100. Small jobs are scattered so every node has 3 to 6 GPUs busy: 28 GPUs are free, yet the 2×8 fine-tuning gang cannot start.",
        signal: "28 free GPUs, 0 usable for the 2×8 gang (all 28 stranded); the plan moves 4 pods (14 GPU-hours) to free two nodes",
        build: fragmented,
    },
    Scenario {
        name: "plugin-crash",
        title: "Healthy GPUs, Kubernetes sees none",
        story: "The NVIDIA device plugin on gpu-07 crashed. The node is Ready, GFD still says 8 GPUs, but nvidia.com/gpu allocatable is 0, so a 2×8 job gets one member placed and waits for the other forever.",
        signal: "gpu-07 flagged device-plugin-not-advertising; the pending workload is blocked at the device-plugin step",
        build: plugin_crash,
    },
    Scenario {
        name: "gang-deadlock",
        title: "Two gangs, each waiting for the other",
        story: "Two 5×8 training jobs were admitted on a 64-GPU cluster without gang scheduling. The scheduler placed four members of each: 64 GPUs are held, idle, and neither job can ever start.",
        signal: "both gangs partially placed (4/5), 32 GPUs held idle each, deadlocked with each other",
        build: gang_deadlock,
    },
    Scenario {
        name: "quota-starvation",
        title: "Idle GPUs, no quota",
        story: "team-a's ClusterQueue has 16 H100 GPUs nominal, all in use, and may not borrow. Its next job waits at Kueue while 80 GPUs sit idle in the cluster.",
        signal: "the pending workload is blocked at the quota step (16 more needed, borrowing limit 0) while 80 GPUs are free",
        build: quota_starvation,
    },
    Scenario {
        name: "taint-mismatch",
        title: "Taints, tolerations and a selector that requests nothing",
        story: "Every GPU node carries nvidia.com/gpu=present:NoSchedule. One job forgot the toleration; another wrote nodeSelector nvidia.com/gpu: \"8\" instead of a resource limit.",
        signal: "untolerated-taint:nvidia.com/gpu on every GPU node, and the gpu-count-in-node-selector hint",
        build: taint_mismatch,
    },
    Scenario {
        name: "mig-mismatch",
        title: "The slice you need is not offered",
        story: "The inference pool is partitioned all-1g.10gb. A 70B model needs 3g.40gb slices, which no node offers; an attempt to repartition mig-08 to all-3g.40gb has been pending for 40 minutes with its GPU operands paused.",
        signal: "insufficient-mig:3g.40gb on every MIG node, the mig-profile-not-offered hint, and mig-08 flagged mig-config-pending (wedged)",
        build: mig_mismatch,
    },
    Scenario {
        name: "driver-skew",
        title: "A driver rollout half done",
        story: "The fleet is moving from 550 to 570 for CUDA 12.8. Eight nodes are done, one is stuck in validation-required for three hours, one failed, and CUDA 12.8 pods the scheduler put on 550 nodes cannot start.",
        signal: "the matrix shows CUDA 12.8 on 550.54.15 incompatible with pods placed there; the stuck node heads the upgrade board",
        build: driver_skew,
    },
    Scenario {
        name: "black-hole",
        title: "A Ready node that eats GPU pods",
        story: "gpu-03 is Ready and advertises 8 GPUs, but its device plugin rejects every allocation. Being the emptiest node, the scheduler keeps sending pods there; each one fails UnexpectedAdmissionError and is replaced.",
        signal: "gpu-03 flagged black-hole",
        build: black_hole,
    },
    Scenario {
        name: "topology-split",
        title: "A tensor-parallel job split over two nodes",
        story: "A 2×4-GPU tensor-parallel server should share one NVLink domain. The scheduler spread it: 4 GPUs on gpu-03 and 4 on gpu-11, while gpu-05 had all 8 free.",
        signal: "the gang is flagged topology-split across gpu-03 and gpu-11",
        build: topology_split,
    },
];

#[derive(Debug, Error)]
#[error("unknown scenario '{name}'; valid scenarios: {}", valid.join(", "))]
pub struct UnknownScenario {
    pub name: String,
    pub valid: Vec<&'static str>,
}

pub fn names() -> Vec<&'static str> {
    SCENARIOS.iter().map(|s| s.name).collect()
}

pub fn find(name: &str) -> Result<&'static Scenario, UnknownScenario> {
    SCENARIOS.iter().find(|s| s.name == name).ok_or_else(|| UnknownScenario { name: name.to_string(), valid: names() })
}

/// Builds a scenario's cluster and settles it (admission and scheduling
/// done, clock not moved).
pub fn build(name: &str, seed: u64) -> Result<SimCluster, UnknownScenario> {
    let scenario = find(name)?;
    let info = ScenarioInfo {
        name: scenario.name.into(),
        title: scenario.title.into(),
        story: scenario.story.into(),
        signal: scenario.signal.into(),
    };
    let mut sim = SimCluster::new(info, seed);
    (scenario.build)(&mut sim);
    sim.settle();
    Ok(sim)
}

// ---- building blocks -------------------------------------------------------

const REQUIRE_12_4: &str = include_str!("../../../assets/reference/nvidia-require-cuda-12.4.1.env");
pub const IMAGE_CUDA_12_4: &str = "nvidia/cuda:12.4.1-runtime-ubuntu22.04";
pub const IMAGE_CUDA_12_8: &str = "nvidia/cuda:12.8.1-runtime-ubuntu22.04";
const IMAGE_SERVE: &str = "ghcr.io/acme/llm-serve:v7-cu124";
const IMAGE_NOTEBOOK: &str = "quay.io/jupyter/pytorch-notebook:cuda12-python-3.11";

/// The real `NVIDIA_REQUIRE_CUDA` of `nvidia/cuda:12.4.1`.
pub fn require_12_4() -> &'static str {
    REQUIRE_12_4.lines().find_map(|l| l.strip_prefix("NVIDIA_REQUIRE_CUDA=")).unwrap_or("cuda>=12.4")
}

fn ago(minutes: i64) -> i64 {
    EPOCH - minutes * 60
}

/// `count` nodes named `<prefix>-01`... like `template` (its name is replaced).
fn gpu_pool(sim: &mut SimCluster, prefix: &str, count: u32, template: NodeSpec) -> Vec<Sym> {
    (1..=count)
        .map(|i| {
            let mut spec = template.clone();
            spec.name = format!("{prefix}-{i:02}");
            spec.created = ago(60 * 24 * 90);
            sim.add_gpu_node(spec)
        })
        .collect()
}

/// A pool template; `tainted` adds `nvidia.com/gpu=present:NoSchedule`.
fn pool(pool: &'static str, model: GpuModel, gpus: u32, driver: Driver, tainted: bool) -> NodeSpec {
    let mut spec = NodeSpec::new("", pool, model, gpus, driver);
    spec.tainted = tainted;
    spec
}

/// A GPU job's pod: cpu and memory in proportion to its GPUs.
fn gpu_pod(ns: &str, name: &str, gpus: u64) -> crate::model::build::PodBuilder {
    pod(name)
        .ns(ns)
        .gpus(gpus)
        .cpu_milli(12_000 * gpus.max(1))
        .memory_gi(120 * gpus.max(1))
        .tolerate(keys::RESOURCE_GPU)
        .image(IMAGE_CUDA_12_4)
        .cuda_require(require_12_4())
}

/// A pod already running on `node` since `minutes` ago.
fn running_on(sim: &mut SimCluster, p: crate::model::build::PodBuilder, node: &str, minutes: i64) -> Sym {
    let p = p.on(node).running().created(ago(minutes + 1)).transitioned(ago(minutes)).build();
    let ns = p.namespace;
    sim.add_pod(p, PodPlan::default());
    ns
}

fn flavor(name: &str, pool: &str, tolerate_gpu_taint: bool) -> Flavor {
    Flavor {
        name: Sym::new(name),
        node_labels: crate::model::node::labels_from([("kgpu.dev/pool", pool)]),
        node_taints: Box::new([]),
        tolerations: if tolerate_gpu_taint { Box::new([Toleration::exists(keys::RESOURCE_GPU)]) } else { Box::new([]) },
    }
}

fn quota(flavor: &str, resource: &str, nominal: u64, borrowing_limit: Option<u64>) -> QueueQuota {
    QueueQuota {
        flavor: Some(Sym::new(flavor)),
        resource: Sym::new(resource),
        nominal,
        borrowing_limit,
        lending_limit: None,
        used: 0,
        reserved: 0,
        borrowed: 0,
    }
}

/// A ClusterQueue with GPU, cpu and memory quota per flavor.
fn cluster_queue(name: &str, cohort: Option<&str>, flavors: &[(&str, u64, Option<u64>)]) -> Queue {
    let mut quotas = Vec::new();
    for (f, gpus, borrow) in flavors {
        quotas.push(quota(f, keys::RESOURCE_GPU, *gpus, *borrow));
        quotas.push(quota(f, "cpu", gpus * 16_000, None));
        quotas.push(quota(f, "memory", (gpus * 160) << 30, None));
    }
    Queue {
        kind: QueueKind::ClusterQueue,
        namespace: None,
        name: Sym::new(name),
        cohort: cohort.map(Sym::new),
        cluster_queue: None,
        quotas: quotas.into_boxed_slice(),
        pending: 0,
        reserving: 0,
        admitted: 0,
        conditions: Box::new([Condition {
            kind: Sym::new("Active"),
            status: true,
            reason: Sym::new("Ready"),
            message: "Can admit new workloads".into(),
            since: ago(60 * 24 * 30),
        }]),
        stop_policy: None,
        state: None,
        flavor_order: flavors.iter().map(|(f, _, _)| Sym::new(f)).collect(),
    }
}

fn local_queue(ns: &str, name: &str, cq: &str) -> Queue {
    Queue {
        kind: QueueKind::LocalQueue,
        namespace: Some(Sym::new(ns)),
        name: Sym::new(name),
        cohort: None,
        cluster_queue: Some(Sym::new(cq)),
        quotas: Box::new([]),
        pending: 0,
        reserving: 0,
        admitted: 0,
        conditions: Box::new([]),
        stop_policy: None,
        state: None,
        flavor_order: Box::new([]),
    }
}

/// A Kueue Workload for a batch Job `job` of `pods` × `gpus` GPUs.
fn workload(ns: &str, job: &str, queue: &str, pods: u32, gpus: u64, priority: i32, created: i64) -> Gang {
    let template = gpu_pod(ns, job, gpus).build();
    let hash = format!("{:05x}", job.bytes().fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(b as u32)) & 0xfffff);
    Gang {
        kind: GangKind::KueueWorkload,
        namespace: Sym::new(ns),
        name: Arc::from(format!("job-{job}-{hash}").as_str()),
        queue: Some(Sym::new(queue)),
        min_members: pods,
        pod_sets: Box::new([PodSet {
            name: Sym::new("main"),
            count: pods,
            min_count: None,
            requests: template.requests.clone(),
            node_selector: Box::new([]),
            tolerations: template.tolerations.clone(),
        }]),
        priority,
        created,
        active: true,
        conditions: Box::new([]),
        admission: None,
        admission_checks: Box::new([]),
        requeue: None,
        phase: None,
        owner: Some(Owner { kind: Sym::new("Job"), name: Sym::new(job) }),
        min_resources: None,
        running: 0,
    }
}

/// Adds a workload that Kueue will admit (or not) at settle time; its pods
/// are created on admission.
fn submit(sim: &mut SimCluster, gang: Gang, gpus: u64, runs_for: Option<i64>) -> GangKey {
    let ns = gang.namespace.as_str().to_string();
    let job = gang.owner.as_ref().map_or_else(String::new, |o| o.name.to_string());
    let mut template = gpu_pod(&ns, &job, gpus).owner("Job", &job).created(gang.created);
    if let Some(q) = gang.queue {
        template = template.queue(q.as_str());
    }
    let template = GangTemplate { pod: template.build(), plan: PodPlan { runs_for, replace_on_failure: true } };
    sim.add_gang(gang, Some(template))
}

/// Marks a workload admitted by `cq` in `flavor` (for gangs whose pods the
/// scenario places by hand).
fn admitted(mut gang: Gang, cq: &str, flavor: &str, since: i64) -> Gang {
    gang.conditions = Box::new([
        Condition {
            kind: Sym::new("QuotaReserved"),
            status: true,
            reason: Sym::new("QuotaReserved"),
            message: format!("Quota reserved in ClusterQueue {cq}").into(),
            since,
        },
        Condition {
            kind: Sym::new("Admitted"),
            status: true,
            reason: Sym::new("Admitted"),
            message: "The workload is admitted".into(),
            since,
        },
    ]);
    let resources: Vec<(Sym, Sym)> = gang
        .pod_sets
        .first()
        .map(|ps| ps.requests.iter().map(|(r, _)| (Sym::new(r), Sym::new(flavor))).collect())
        .unwrap_or_default();
    gang.admission = Some(Admission {
        cluster_queue: Sym::new(cq),
        assignments: Box::new([PodSetAssignment {
            name: Sym::new("main"),
            flavors: resources.into_boxed_slice(),
            count: gang.total_pods(),
        }]),
    });
    gang
}

/// A member pod of a Job-owned gang.
fn member(ns: &str, job: &str, index: u32, gpus: u64, suffix: &str) -> crate::model::build::PodBuilder {
    gpu_pod(ns, &format!("{job}-{index}-{suffix}"), gpus).owner("Job", job)
}

/// Back-dates pods the scenario let the scheduler place: they have been
/// running for a while when the demo starts. Pods of one owner (a gang)
/// started together, and none has run longer than its planned length.
fn age_running(sim: &mut SimCluster, min_minutes: i64, max_minutes: i64) {
    let keys: Vec<_> = sim
        .pods
        .values()
        .filter(|p| p.phase == PodPhase::Running && p.transitioned == EPOCH)
        .map(|p| p.key())
        .collect();
    let mut by_owner: std::collections::HashMap<String, i64> = std::collections::HashMap::new();
    for k in keys {
        let owner = sim
            .pods
            .get(&k)
            .and_then(|p| p.owner.as_ref())
            .map(|o| o.name.to_string())
            .unwrap_or_else(|| k.name.to_string());
        let limit = sim.plans.get(&k).and_then(|p| p.runs_for).map_or(max_minutes, |secs| (secs / 60 * 4 / 5).max(1));
        let drawn = sim.rng.range(min_minutes.min(limit), max_minutes.min(limit));
        let minutes = *by_owner.entry(owner).or_insert(drawn);
        if let Some(p) = sim.pods.get_mut(&k) {
            p.created = ago(minutes + 1);
            p.transitioned = ago(minutes);
        }
    }
}

// ---- the scenarios -------------------------------------------------------

fn default(sim: &mut SimCluster) {
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
        state: Some(Sym::new("Open")),
        flavor_order: Box::new([]),
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
            }]),
            priority: 0,
            created: ago(20),
            active: true,
            conditions: Box::new([]),
            admission: None,
            admission_checks: Box::new([]),
            requeue: None,
            phase: Some(Sym::new("Inqueue")),
            owner: None,
            min_resources: Some(catalog::requests(gpus * members as u64, 8 * members as u64, 64 * members as u64)),
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
                .scheduler(super::scheduler::VOLCANO)
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
    let _ = l40s;
    sim.settle();
    age_running(sim, 5, 60 * 20);
}

/// Per node: (GPUs, minutes running) of each small job, chosen so the plan
/// can be checked by hand (see tests/scenarios.rs).
pub const FRAGMENTED_LAYOUT: [&[(u64, i64)]; 8] = [
    &[(2, 300), (2, 240), (1, 600)],
    &[(2, 180), (1, 120), (1, 90)],
    &[(2, 60), (1, 120)],
    &[(4, 300), (1, 60)],
    &[(2, 180), (2, 120)],
    &[(4, 360), (2, 60)],
    &[(1, 30), (1, 45), (1, 50)],
    &[(4, 180), (2, 120)],
];

fn fragmented(sim: &mut SimCluster) {
    let nodes = gpu_pool(sim, "gpu", 8, pool("h100", H100, 8, R550, false));
    sim.add_flavor(flavor("h100", "h100", false));
    sim.add_queue(cluster_queue("research", None, &[("h100", 64, None)]));
    sim.add_queue(local_queue("research", "research", "research"));
    for (node, jobs) in nodes.iter().zip(FRAGMENTED_LAYOUT) {
        for (j, (gpus, minutes)) in jobs.iter().enumerate() {
            let name = format!("sweep-{}-{j}", node.as_str().trim_start_matches("gpu-"));
            let p = gpu_pod("research", &format!("{name}-{}", sim.next_suffix()), *gpus).owner("Job", &name);
            running_on(sim, p, node.as_str(), *minutes);
        }
    }
    let gang = admitted(workload("research", "llm-sft", "research", 2, 8, 100, ago(35)), "research", "h100", ago(34));
    let key = sim.add_gang(gang, None);
    for i in 0..2 {
        let s = sim.next_suffix();
        let p = member("research", "llm-sft", i, 8, &s).created(ago(34)).build();
        sim.add_pod(p, PodPlan::default());
    }
    let _ = key;
}

fn plugin_crash(sim: &mut SimCluster) {
    let nodes = gpu_pool(sim, "gpu", 16, pool("h100", H100, 8, R550, true));
    sim.add_flavor(flavor("h100", "h100", true));
    sim.add_queue(cluster_queue("training", None, &[("h100", 128, None)]));
    sim.add_queue(local_queue("ml", "training", "training"));
    // The device plugin on gpu-07 is gone: kubelet reports 0 allocatable.
    sim.edit_node("gpu-07", |n| {
        n.allocatable =
            Resources::from_pairs(n.allocatable.iter().map(|(k, v)| (k, if k == keys::RESOURCE_GPU { 0 } else { v })));
    });
    sim.record(
        crate::model::EventType::Warning,
        super::Involved { kind: "Pod", namespace: Sym::new("gpu-operator"), name: "nvidia-device-plugin-daemonset-x7k2q" },
        "BackOff",
        "Back-off restarting failed container nvidia-device-plugin-ctr in pod nvidia-device-plugin-daemonset-x7k2q_gpu-operator",
        "kubelet",
    );
    for node in nodes.iter().filter(|n| !matches!(n.as_str(), "gpu-07" | "gpu-16")) {
        let job = format!("train-{}", node.as_str());
        let p = gpu_pod("ml", &format!("{job}-0-{}", sim.next_suffix()), 8).owner("Job", &job);
        running_on(sim, p, node.as_str(), 240);
    }
    submit(sim, workload("ml", "bert-large", "training", 2, 8, 100, ago(50)), 8, None);
    sim.settle();
    age_running(sim, 40, 45);
}

fn gang_deadlock(sim: &mut SimCluster) {
    let nodes = gpu_pool(sim, "gpu", 8, pool("h100", H100, 8, R550, false));
    sim.add_flavor(flavor("h100", "h100", false));
    sim.add_queue(cluster_queue("shared", None, &[("h100", 128, None)]));
    sim.add_queue(local_queue("team-a", "shared", "shared"));
    sim.add_queue(local_queue("team-b", "shared", "shared"));
    for (team, job, first_node) in [("team-a", "gpt-a", 0usize), ("team-b", "gpt-b", 1)] {
        let gang = admitted(workload(team, job, "shared", 5, 8, 50, ago(25)), "shared", "h100", ago(24));
        sim.add_gang(gang, None);
        for i in 0..5u32 {
            let s = sim.next_suffix();
            let p = member(team, job, i, 8, &s);
            // Interleaved binding: a on gpu-01,03,05,07; b on gpu-02,04,06,08.
            if i < 4 {
                let node = nodes[first_node + 2 * i as usize];
                running_on(sim, p, node.as_str(), 23);
            } else {
                sim.add_pod(p.created(ago(24)).build(), PodPlan::default());
            }
        }
    }
}

fn quota_starvation(sim: &mut SimCluster) {
    let nodes = gpu_pool(sim, "gpu", 16, pool("h100", H100, 8, R550, false));
    sim.add_flavor(flavor("h100", "h100", false));
    sim.add_queue(cluster_queue("team-a", Some("ml"), &[("h100", 16, Some(0))]));
    sim.add_queue(cluster_queue("team-b", Some("ml"), &[("h100", 32, None)]));
    sim.add_queue(local_queue("team-a", "default", "team-a"));
    sim.add_queue(local_queue("team-b", "default", "team-b"));
    let _ = nodes;
    submit(sim, workload("team-a", "pretrain-7b", "default", 2, 8, 50, ago(180)), 8, None);
    submit(sim, workload("team-b", "pretrain-13b", "default", 4, 8, 50, ago(170)), 8, None);
    sim.settle();
    age_running(sim, 150, 160);
    submit(sim, workload("team-a", "finetune-xl", "default", 2, 8, 50, ago(40)), 8, None);
}

fn taint_mismatch(sim: &mut SimCluster) {
    let nodes = gpu_pool(sim, "gpu", 8, pool("h100", H100, 8, R550, true));
    for i in 1..=4 {
        sim.add_node(catalog::cpu_node(&format!("cpu-{i:02}"), ago(60 * 24 * 100)));
    }
    for node in nodes.iter().take(4) {
        let job = format!("serve-{}", node.as_str());
        let p = gpu_pod("vision", &format!("{job}-{}", sim.next_suffix()), 4).owner("ReplicaSet", &job);
        running_on(sim, p, node.as_str(), 300);
    }
    // Forgot the toleration for the GPU taint.
    let p = pod("resnet-train-0-k9xq2")
        .ns("vision")
        .gpus(1)
        .cpu_milli(12_000)
        .memory_gi(120)
        .owner("Job", "resnet-train")
        .image(IMAGE_CUDA_12_4)
        .cuda_require(require_12_4())
        .created(ago(18))
        .build();
    sim.add_pod(p, PodPlan::default());
    // Asked for GPUs with a node selector instead of resources.limits.
    let p = pod("bert-infer-5c8d9-wq7tn")
        .ns("vision")
        .cpu_milli(4000)
        .memory_gi(32)
        .selector(keys::RESOURCE_GPU, "8")
        .tolerate(keys::RESOURCE_GPU)
        .owner("ReplicaSet", "bert-infer-5c8d9")
        .image(IMAGE_CUDA_12_4)
        .created(ago(12))
        .build();
    sim.add_pod(p, PodPlan::default());
}

fn mig_mismatch(sim: &mut SimCluster) {
    for i in 1..=8 {
        let mut spec = NodeSpec::new(format!("mig-{i:02}"), "mig", H100, 8, R550);
        spec.tainted = true;
        spec.mig_config = Some("all-1g.10gb".into());
        spec.created = ago(60 * 24 * 60);
        sim.add_gpu_node(spec);
    }
    for i in 0..40 {
        let p = pod(&format!("embed-small-{i}"))
            .ns("inference")
            .mig("1g.10gb", 1)
            .cpu_milli(2000)
            .memory_gi(16)
            .tolerate(keys::RESOURCE_GPU)
            .owner("ReplicaSet", "embed-small")
            .image(IMAGE_SERVE)
            .created(ago(400))
            .build();
        sim.add_pod(p, PodPlan::default());
    }
    for i in 0..3 {
        let p = pod(&format!("llm-70b-7f6c5-{i}"))
            .ns("inference")
            .mig("3g.40gb", 1)
            .cpu_milli(8000)
            .memory_gi(64)
            .tolerate(keys::RESOURCE_GPU)
            .owner("ReplicaSet", "llm-70b-7f6c5")
            .image(IMAGE_SERVE)
            .created(ago(45))
            .build();
        sim.add_pod(p, PodPlan::default());
    }
    // Someone asked mig-08 for all-3g.40gb 40 minutes ago; the mig-manager wedged.
    sim.fault("mig-08", Fault::MigWedge);
    sim.set_node_label("mig-08", keys::MIG_CONFIG, Some("all-3g.40gb"));
    sim.set_node_label("mig-08", keys::MIG_CONFIG_STATE, Some("pending"));
    for operand in ["device-plugin", "gpu-feature-discovery", "dcgm-exporter", "dcgm", "nvsm"] {
        sim.set_node_label(
            "mig-08",
            &format!("{}{operand}", keys::GPU_DEPLOY_PREFIX),
            Some(keys::PAUSED_FOR_MIG_CHANGE),
        );
    }
    sim.edit_node("mig-08", |n| {
        n.operator.mig_config_since = Some(ago(40));
        // The paused device plugin advertises nothing.
        n.allocatable =
            Resources::from_pairs(n.allocatable.iter().map(|(k, v)| (k, if keys::is_gpu_resource(k) { 0 } else { v })));
    });
    sim.mig_jobs.insert(Sym::new("mig-08"), super::MigJob { config: "all-3g.40gb".into(), done_at: None });
    sim.settle();
    age_running(sim, 300, 400);
}

fn driver_skew(sim: &mut SimCluster) {
    let done = gpu_pool(sim, "h100", 10, pool("h100", H100, 8, R570, false));
    let old: Vec<Sym> = (11..=20)
        .map(|i| {
            let mut spec = NodeSpec::new(format!("h100-{i:02}"), "h100", H100, 8, R550);
            spec.created = ago(60 * 24 * 90);
            sim.add_gpu_node(spec)
        })
        .collect();
    let a100 = gpu_pool(sim, "a100", 4, pool("a100", A100_80, 8, R535, false));
    sim.set_upgrade_target(R570);
    // h100-09: done with the driver but never validated; h100-10: failed.
    for (node, state, minutes) in [("h100-09", "validation-required", 180), ("h100-10", "upgrade-failed", 95)] {
        sim.set_node_label(node, keys::DRIVER_UPGRADE_STATE, Some(state));
        sim.edit_node(node, |n| n.operator.upgrade_since = Some(ago(minutes)));
    }
    sim.fault("h100-09", Fault::UpgradeStuck);
    sim.edit_node("h100-09", |n| n.unschedulable = true);
    for node in &old {
        let n = node.as_str().to_string();
        sim.set_node_label(&n, keys::DRIVER_UPGRADE_STATE, Some("upgrade-required"));
        sim.edit_node(&n, |x| x.operator.upgrade_since = Some(ago(200)));
    }
    // CUDA 12.8 jobs: three landed on 570 nodes and run, three on 550 nodes and cannot start.
    for (i, node) in done.iter().take(3).chain(old.iter().take(3)).enumerate() {
        let name = format!("vlm-train-{i}-{}", sim.next_suffix());
        let p = pod(&name)
            .ns("llm")
            .gpus(8)
            .cpu_milli(96_000)
            .memory_gi(960)
            .owner("Job", &format!("vlm-train-{i}"))
            .image(IMAGE_CUDA_12_8)
            .cuda_require("cuda>=12.8")
            .created(ago(30))
            .build();
        let key = sim.add_pod(p, PodPlan::default());
        if let Some(p) = sim.pods.get_mut(&key) {
            p.node = Some(*node);
            p.transitioned = ago(29);
        }
    }
    // 12.4 work runs everywhere; on R535 it relies on minor-version compatibility.
    for node in done.iter().skip(4).take(3).chain(old.iter().skip(4).take(3)).chain(a100.iter()) {
        let job = format!("bert-{}", node.as_str());
        let p = gpu_pod("nlp", &format!("{job}-{}", sim.next_suffix()), 4).owner("Job", &job);
        running_on(sim, p, node.as_str(), 120);
    }
    let p = pod("notebook-cu126-0")
        .ns("notebooks")
        .gpus(1)
        .cpu_milli(8000)
        .memory_gi(64)
        .owner("StatefulSet", "notebook-cu126")
        .image("pytorch/pytorch:2.6.0-cuda12.6-cudnn9-runtime")
        .on(a100[0].as_str())
        .running()
        .created(ago(300))
        .transitioned(ago(299))
        .build();
    sim.add_pod(p, PodPlan::default());
    sim.settle();
}

fn black_hole(sim: &mut SimCluster) {
    let nodes = gpu_pool(sim, "gpu", 16, pool("h100", H100, 8, R550, false));
    sim.fault("gpu-03", Fault::BlackHole);
    for (i, node) in nodes.iter().enumerate().filter(|(_, n)| n.as_str() != "gpu-03") {
        let job = format!("train-{i}");
        let p = gpu_pod("ml", &format!("{job}-0-{}", sim.next_suffix()), 4 + (i as u64 % 2) * 2).owner("Job", &job);
        running_on(sim, p, node.as_str(), 100 + i as i64 * 7);
    }
    // The last hour on gpu-03: a failed pod every few minutes.
    for i in 0..12 {
        let minutes = 55 - i * 4;
        let p = pod(&format!("serve-llama-64f9d-{}", sim.next_suffix()))
            .ns("serving")
            .gpus(1)
            .cpu_milli(8000)
            .memory_gi(64)
            .owner("ReplicaSet", "serve-llama-64f9d")
            .image(IMAGE_SERVE)
            .on("gpu-03")
            .failed(
                "UnexpectedAdmissionError",
                "Pod was rejected: Allocate failed due to requested number of devices unavailable for nvidia.com/gpu. Requested: 1, Available: 0, which is unexpected",
            )
            .created(ago(minutes + 1))
            .transitioned(ago(minutes))
            .build();
        sim.add_pod(p, PodPlan::default());
    }
    let p = pod(&format!("serve-llama-64f9d-{}", sim.next_suffix()))
        .ns("serving")
        .gpus(1)
        .cpu_milli(8000)
        .memory_gi(64)
        .owner("ReplicaSet", "serve-llama-64f9d")
        .image(IMAGE_SERVE)
        .created(ago(1))
        .build();
    sim.add_pod(p, PodPlan { runs_for: None, replace_on_failure: true });
}

fn topology_split(sim: &mut SimCluster) {
    let nodes = gpu_pool(sim, "gpu", 16, pool("h100", H100, 8, R550, false));
    sim.add_flavor(flavor("h100", "h100", false));
    sim.add_queue(cluster_queue("serving", None, &[("h100", 64, None)]));
    sim.add_queue(local_queue("serving", "serving", "serving"));
    for (i, node) in nodes.iter().enumerate() {
        let used = match node.as_str() {
            "gpu-05" => continue,
            "gpu-03" | "gpu-11" => 4,
            _ => [6u64, 7, 8][i % 3],
        };
        let job = format!("batch-{}", node.as_str());
        let p = gpu_pod("batch", &format!("{job}-{}", sim.next_suffix()), used).owner("Job", &job);
        running_on(sim, p, node.as_str(), 60 + i as i64 * 5);
    }
    let gang = admitted(workload("serving", "tp-llama-70b", "serving", 2, 4, 200, ago(90)), "serving", "h100", ago(89));
    sim.add_gang(gang, None);
    for (i, node) in ["gpu-03", "gpu-11"].iter().enumerate() {
        let s = sim.next_suffix();
        let p = member("serving", "tp-llama-70b", i as u32, 4, &s);
        running_on(sim, p, node, 88);
    }
}

/// One arrival in the live default demo.
pub(super) fn arrival(sim: &mut SimCluster) {
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
