//! Verbatim label, annotation and resource keys (see `../shared/fixtures/real`
//! `nodes/gfd-generated-labels-doc.md`, `gpu-operator/*.tsv`, and the Kueue and
//! Volcano label files). One place, so that a typo cannot hide in a parser.

pub const RESOURCE_GPU: &str = "nvidia.com/gpu";
pub const RESOURCE_GPU_SHARED: &str = "nvidia.com/gpu.shared";
pub const RESOURCE_MIG_PREFIX: &str = "nvidia.com/mig-";

// GPU Feature Discovery
pub const GPU_PRESENT: &str = "nvidia.com/gpu.present";
pub const GPU_PRODUCT: &str = "nvidia.com/gpu.product";
/// GFD's last labelling time, rewritten on every node at every pass (each
/// minute by default): a value kgpu never reads and must not keep.
pub const GFD_TIMESTAMP: &str = "nvidia.com/gfd.timestamp";
pub const GPU_COUNT: &str = "nvidia.com/gpu.count";
pub const GPU_MEMORY: &str = "nvidia.com/gpu.memory";
pub const GPU_FAMILY: &str = "nvidia.com/gpu.family";
pub const GPU_REPLICAS: &str = "nvidia.com/gpu.replicas";
pub const GPU_SHARING: &str = "nvidia.com/gpu.sharing-strategy";
pub const MIG_CAPABLE: &str = "nvidia.com/mig.capable";
pub const MIG_STRATEGY: &str = "nvidia.com/mig.strategy";
pub const DRIVER_FULL: &str = "nvidia.com/cuda.driver-version.full";
pub const DRIVER_MAJOR: &str = "nvidia.com/cuda.driver-version.major";
pub const DRIVER_MINOR: &str = "nvidia.com/cuda.driver-version.minor";
pub const DRIVER_REVISION: &str = "nvidia.com/cuda.driver-version.revision";
pub const DRIVER_MAJOR_DEPRECATED: &str = "nvidia.com/cuda.driver.major";
pub const DRIVER_MINOR_DEPRECATED: &str = "nvidia.com/cuda.driver.minor";
pub const DRIVER_REV_DEPRECATED: &str = "nvidia.com/cuda.driver.rev";
pub const CUDA_RUNTIME_MAJOR: &str = "nvidia.com/cuda.runtime-version.major";
pub const CUDA_RUNTIME_MINOR: &str = "nvidia.com/cuda.runtime-version.minor";
pub const CUDA_RUNTIME_MAJOR_DEPRECATED: &str = "nvidia.com/cuda.runtime.major";
pub const CUDA_RUNTIME_MINOR_DEPRECATED: &str = "nvidia.com/cuda.runtime.minor";

// GPU Operator
pub const DRIVER_UPGRADE_STATE: &str = "nvidia.com/gpu-driver-upgrade-state";
/// When the GPU Operator's upgrade controller entered `validation-required`
/// and `wait-for-jobs-required` (unix seconds): its timeouts count from them.
pub const DRIVER_UPGRADE_VALIDATION_START: &str = "nvidia.com/gpu-driver-upgrade-validation-start-time";
pub const DRIVER_UPGRADE_WAIT_FOR_JOBS_START: &str = "nvidia.com/gpu-driver-upgrade-wait-for-pod-completion-start-time";
/// When a pod last wrote a checkpoint (RFC 3339), for the work a restart loses.
pub const LAST_CHECKPOINT: &str = "kgpu.dev/last-checkpoint";
/// Seconds from a restart until the pod computes again.
pub const RESTART_SECONDS: &str = "kgpu.dev/restart-seconds";
/// Seconds between a pod's checkpoints.
pub const CHECKPOINT_INTERVAL: &str = "kgpu.dev/checkpoint-interval";
pub const DRIVER_UPGRADE_SKIP: &str = "nvidia.com/gpu-driver-upgrade.skip";
pub const MIG_CONFIG: &str = "nvidia.com/mig.config";
pub const MIG_CONFIG_STATE: &str = "nvidia.com/mig.config.state";
pub const GPU_DEPLOY_PREFIX: &str = "nvidia.com/gpu.deploy.";
pub const PAUSED_FOR_MIG_CHANGE: &str = "paused-for-mig-change";

// Kubernetes
pub const HOSTNAME: &str = "kubernetes.io/hostname";
/// The zone and region labels VolumeZone compares, beta keys first as it lists them.
pub const VOLUME_TOPOLOGY_LABELS: [&str; 4] = [
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
];

/// The GA key for a beta zone or region key (a node may carry only the GA one).
pub fn ga_topology_label(key: &str) -> &str {
    match key {
        "failure-domain.beta.kubernetes.io/zone" => "topology.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/region" => "topology.kubernetes.io/region",
        other => other,
    }
}
pub const TAINT_NOT_READY: &str = "node.kubernetes.io/not-ready";
pub const TAINT_UNREACHABLE: &str = "node.kubernetes.io/unreachable";
pub const TAINT_UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";
pub const MIRROR_POD_ANNOTATION: &str = "kubernetes.io/config.mirror";

// Kueue
pub const KUEUE_QUEUE_NAME: &str = "kueue.x-k8s.io/queue-name";
pub const KUEUE_POD_GROUP_NAME: &str = "kueue.x-k8s.io/pod-group-name";
pub const KUEUE_POD_GROUP_TOTAL: &str = "kueue.x-k8s.io/pod-group-total-count";

// Volcano
/// Labels the controllers of multi-level workloads put on their pods: the
/// top-level object a queue (Kueue) knows, however many owners lie between.
pub const JOBSET_NAME: &str = "jobset.sigs.k8s.io/jobset-name";
pub const LWS_NAME: &str = "leaderworkerset.sigs.k8s.io/name";
pub const RAY_CLUSTER: &str = "ray.io/cluster";
pub const RAY_ORIGIN_KIND: &str = "ray.io/originated-from-crd";
pub const RAY_ORIGIN_NAME: &str = "ray.io/originated-from-cr-name";

pub const VOLCANO_GROUP_NAME: &str = "scheduling.k8s.io/group-name";
pub const VOLCANO_GROUP_NAME_NEW: &str = "scheduling.volcano.sh/group-name";
pub const VOLCANO_QUEUE_NAME: &str = "scheduling.volcano.sh/queue-name";

/// `nvidia.com/mig-1g.10gb` → `1g.10gb`.
pub fn mig_profile_of(resource: &str) -> Option<&str> {
    resource.strip_prefix(RESOURCE_MIG_PREFIX).filter(|p| !p.is_empty())
}

/// True for the resources that take (part of) a GPU.
pub fn is_gpu_resource(resource: &str) -> bool {
    resource == RESOURCE_GPU || resource == RESOURCE_GPU_SHARED || mig_profile_of(resource).is_some()
}

// Pods kgpu reads GPU facts from (sources/agents.rs, sources/dcgm.rs)
/// kgpu's own node agent (assets/agent/).
pub const AGENT_LABEL: (&str, &str) = ("app.kubernetes.io/name", "kgpu-agent");
/// dcgm-exporter: the GPU Operator's DaemonSet labels its pods
/// `app=nvidia-dcgm-exporter`, the exporter's own Helm chart
/// `app.kubernetes.io/name=dcgm-exporter`.
pub const DCGM_EXPORTER_LABELS: [(&str, &str); 2] =
    [("app", "nvidia-dcgm-exporter"), ("app.kubernetes.io/name", "dcgm-exporter")];

/// The taint a running defragmentation plan reserves its nodes with
/// (`kgpu.dev/defrag=<namespace.name>:NoSchedule`; actions/defrag.rs).
pub const DEFRAG_RESERVATION: &str = "kgpu.dev/defrag";
