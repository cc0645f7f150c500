//! The building blocks the scenarios are written with: pools of nodes,
//! pods, Kueue queues and workloads, images with real CUDA requirements.

use std::sync::Arc;

use crate::model::build::pod;
use crate::model::{
    Admission, Condition, Flavor, Gang, GangKey, GangKind, Owner, PodPhase, PodSet, PodSetAssignment, Queue, QueueKind,
    QueueQuota, Sym, Toleration, keys,
};

use super::super::catalog::{Driver, GpuModel, NodeSpec};
use super::super::{EPOCH, GangTemplate, PodPlan, SimCluster};

pub(super) const REQUIRE_12_4: &str = include_str!("../../../../assets/reference/nvidia-require-cuda-12.4.1.env");
pub const IMAGE_CUDA_12_4: &str = "nvidia/cuda:12.4.1-runtime-ubuntu22.04";
pub const IMAGE_CUDA_12_8: &str = "nvidia/cuda:12.8.1-runtime-ubuntu22.04";
pub(super) const IMAGE_SERVE: &str = "ghcr.io/acme/llm-serve:v7-cu124";
pub(super) const IMAGE_NOTEBOOK: &str = "quay.io/jupyter/pytorch-notebook:cuda12-python-3.11";

/// The real `NVIDIA_REQUIRE_CUDA` of `nvidia/cuda:12.4.1`.
pub fn require_12_4() -> &'static str {
    REQUIRE_12_4.lines().find_map(|l| l.strip_prefix("NVIDIA_REQUIRE_CUDA=")).unwrap_or("cuda>=12.4")
}

pub(super) fn ago(minutes: i64) -> i64 {
    EPOCH - minutes * 60
}

/// `count` nodes named `<prefix>-01`... like `template` (its name is replaced).
pub(super) fn gpu_pool(sim: &mut SimCluster, prefix: &str, count: u32, template: NodeSpec) -> Vec<Sym> {
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
pub(super) fn pool(pool: &'static str, model: GpuModel, gpus: u32, driver: Driver, tainted: bool) -> NodeSpec {
    let mut spec = NodeSpec::new("", pool, model, gpus, driver);
    spec.tainted = tainted;
    spec
}

/// A GPU job's pod: cpu and memory in proportion to its GPUs.
pub(super) fn gpu_pod(ns: &str, name: &str, gpus: u64) -> crate::model::build::PodBuilder {
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
pub(super) fn running_on(sim: &mut SimCluster, p: crate::model::build::PodBuilder, node: &str, minutes: i64) -> Sym {
    let p = p.on(node).running().created(ago(minutes + 1)).transitioned(ago(minutes)).build();
    let ns = p.namespace.clone();
    sim.add_pod(p, PodPlan::default());
    ns
}

pub(super) fn flavor(name: &str, pool: &str, tolerate_gpu_taint: bool) -> Flavor {
    Flavor {
        name: Sym::new(name),
        node_labels: crate::model::node::labels_from([("kgpu.dev/pool", pool)]),
        node_taints: Box::new([]),
        tolerations: if tolerate_gpu_taint { Box::new([Toleration::exists(keys::RESOURCE_GPU)]) } else { Box::new([]) },
    }
}

pub(super) fn quota(flavor: &str, resource: &str, nominal: u64, borrowing_limit: Option<u64>) -> QueueQuota {
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
pub(super) fn cluster_queue(name: &str, cohort: Option<&str>, flavors: &[(&str, u64, Option<u64>)]) -> Queue {
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
        strict_fifo: false,
        state: None,
        flavor_order: flavors.iter().map(|(f, _, _)| Sym::new(f)).collect(),
        fair_weight_milli: None,
        reclaim_within_cohort: None,
    }
}

pub(super) fn local_queue(ns: &str, name: &str, cq: &str) -> Queue {
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
        strict_fifo: false,
        state: None,
        flavor_order: Box::new([]),
        fair_weight_milli: None,
        reclaim_within_cohort: None,
    }
}

/// A Kueue Workload for a batch Job `job` of `pods` × `gpus` GPUs.
pub(super) fn workload(ns: &str, job: &str, queue: &str, pods: u32, gpus: u64, priority: i32, created: i64) -> Gang {
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
            affinity: Box::new([]),
            claims: Box::new([]),
        }]),
        priority,
        created,
        uid: None,
        active: true,
        conditions: Box::new([]),
        admission: None,
        admission_checks: Box::new([]),
        requeue: None,
        phase: None,
        owner: Some(Owner { kind: Sym::new("Job"), name: Sym::new(job) }),
        min_resources: None,
        kueue_counted: None,
        running: 0,
    }
}

/// Adds a workload that Kueue will admit (or not) at settle time; its pods
/// are created on admission.
pub(super) fn submit(sim: &mut SimCluster, gang: Gang, gpus: u64, runs_for: Option<i64>) -> GangKey {
    let ns = gang.namespace.as_str().to_string();
    let job = gang.owner.as_ref().map_or_else(String::new, |o| o.name.to_string());
    let mut template = gpu_pod(&ns, &job, gpus).owner("Job", &job).created(gang.created);
    if let Some(q) = &gang.queue {
        template = template.queue(q.as_str());
    }
    let template = GangTemplate { pod: template.build(), plan: PodPlan { runs_for, replace_on_failure: true } };
    sim.add_gang(gang, Some(template))
}

/// Marks a workload admitted by `cq` in `flavor` (for gangs whose pods the
/// scenario places by hand).
pub(super) fn admitted(mut gang: Gang, cq: &str, flavor: &str, since: i64) -> Gang {
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
pub(super) fn member(ns: &str, job: &str, index: u32, gpus: u64, suffix: &str) -> crate::model::build::PodBuilder {
    gpu_pod(ns, &format!("{job}-{index}-{suffix}"), gpus).owner("Job", job)
}

/// Back-dates pods the scenario let the scheduler place: they have been
/// running for a while when the demo starts. Pods of one owner (a gang)
/// started together, and none has run longer than its planned length.
pub(super) fn age_running(sim: &mut SimCluster, min_minutes: i64, max_minutes: i64) {
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
