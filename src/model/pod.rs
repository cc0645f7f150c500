//! Pods, reduced to scheduling-relevant facts.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use super::node::{NodeSelectorTerm, Toleration};
use super::resources::Resources;
use super::sym::Sym;
use super::{Labels, Timestamp};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PodPhase {
    Pending,
    Running,
    Succeeded,
    Failed,
    Unknown,
}

impl PodPhase {
    pub fn parse(s: &str) -> PodPhase {
        match s {
            "Pending" => PodPhase::Pending,
            "Running" => PodPhase::Running,
            "Succeeded" => PodPhase::Succeeded,
            "Failed" => PodPhase::Failed,
            _ => PodPhase::Unknown,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            PodPhase::Pending => "Pending",
            PodPhase::Running => "Running",
            PodPhase::Succeeded => "Succeeded",
            PodPhase::Failed => "Failed",
            PodPhase::Unknown => "Unknown",
        }
    }
    pub fn is_terminal(self) -> bool {
        matches!(self, PodPhase::Succeeded | PodPhase::Failed)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PodKey {
    pub namespace: Sym,
    pub name: Arc<str>,
}

impl PodKey {
    pub fn new(namespace: &str, name: &str) -> PodKey {
        PodKey { namespace: Sym::new(namespace), name: Arc::from(name) }
    }
}

impl std::fmt::Display for PodKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// `metadata.uid`: which pod of a name this is. A StatefulSet's
/// replacement has the same name and another uid, so an eviction bound to
/// the uid cannot reach the wrong one. Kept as the 16 bytes of the UUID the
/// API server generates; anything else is not kept (no precondition then).
/// Ordered as its canonical string is (Kueue breaks ties between
/// workloads of one priority and creation second by uid).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Uid([u8; 16]);

impl Uid {
    /// The canonical lower-case UUID form only, so that it prints back
    /// exactly as the API server wrote it.
    pub fn parse(s: &str) -> Option<Uid> {
        let b = s.as_bytes();
        if b.len() != 36 || [8, 13, 18, 23].iter().any(|&i| b[i] != b'-') {
            return None;
        }
        let hex: Vec<u8> = b.iter().copied().filter(|&c| c != b'-').collect();
        let mut out = [0u8; 16];
        for (i, pair) in hex.chunks(2).enumerate() {
            let digit = |c: u8| match c {
                b'0'..=b'9' => Some(c - b'0'),
                b'a'..=b'f' => Some(c - b'a' + 10),
                _ => None,
            };
            *out.get_mut(i)? = digit(pair[0])? << 4 | digit(*pair.get(1)?)?;
        }
        Some(Uid(out))
    }
}

impl std::fmt::Display for Uid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, byte) in self.0.iter().enumerate() {
            if matches!(i, 4 | 6 | 8 | 10) {
                f.write_str("-")?;
            }
            write!(f, "{byte:02x}")?;
        }
        Ok(())
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owner {
    pub kind: Sym,
    pub name: Sym,
}

/// `PodScheduled=False`: the scheduler's verdict, verbatim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unschedulable {
    pub reason: Sym,
    pub message: Box<str>,
    pub since: Timestamp,
}

/// What a container says about the CUDA it needs (environment of the GPU
/// container, verbatim; the grammar is decoded by `analysis::compat`).
/// Interned as a whole ([`CudaNeed::intern`]): every pod of an image
/// carries the same need, so the model keeps it once.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct CudaNeed {
    pub require_cuda: Option<Sym>,
    /// Other `NVIDIA_REQUIRE_*` variables, `NAME=value`.
    pub other_requires: Box<[Sym]>,
    pub cuda_version: Option<Sym>,
    pub disable_require: bool,
    pub image: Option<Sym>,
}

impl CudaNeed {
    /// The one copy of this need. Like `Sym`, the copies live for the rest of
    /// the process: their number is bounded by the images a cluster runs.
    /// Analyses group pods by a need's address (see `analysis::compat`).
    pub fn intern(self) -> &'static CudaNeed {
        static TABLE: OnceLock<Mutex<HashSet<&'static CudaNeed>>> = OnceLock::new();
        let mut set = TABLE.get_or_init(Mutex::default).lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(existing) = set.get(&self) {
            return existing;
        }
        let leaked: &'static CudaNeed = Box::leak(Box::new(self));
        set.insert(leaked);
        leaked
    }
}

/// Laid out in declaration order (`repr(C)`), what every analysis reads of
/// every pod first: an index walks 100,000 pods that are not in cache, and
/// these fields then share the first two cache lines.
#[derive(Clone, Debug, PartialEq)]
#[repr(C)]
pub struct Pod {
    pub node: Option<Sym>,
    /// Effective requests (GPUs from limits), per the Kubernetes rules.
    pub requests: Resources,
    pub cuda: Option<&'static CudaNeed>,
    pub namespace: Sym,
    /// Gang membership by name: Volcano's group-name annotation or Kueue's
    /// pod-group-name label.
    pub group: Option<Sym>,
    pub owner: Option<Owner>,
    /// The top-level workload when its controllers say so by label (a JobSet
    /// over Jobs, a LeaderWorkerSet over StatefulSets, a RayJob over a
    /// RayCluster): what a Kueue Workload is owned by.
    pub workload: Option<Owner>,
    pub phase: PodPhase,
    pub terminating: bool,
    pub mirror: bool,
    /// Has an `emptyDir` volume: its data go with the pod.
    pub local_data: bool,
    /// Has `spec.schedulingGates` (e.g. Kueue's admission gate).
    pub gated: bool,
    /// `spec.preemptionPolicy: Never` (from its PriorityClass): it waits
    /// rather than preempt lower-priority pods.
    pub preempt_never: bool,
    pub priority: i32,
    pub uid: Option<Uid>,
    pub name: Arc<str>,
    /// `status.reason`, e.g. `UnexpectedAdmissionError`, `Evicted`.
    pub reason: Option<Sym>,
    /// `status.message` of a failed pod, truncated.
    pub message: Option<Box<str>>,
    pub tolerations: Box<[Toleration]>,
    pub node_selector: Labels,
    /// Required node affinity terms (ORed); empty when there are none.
    pub affinity: Box<[NodeSelectorTerm]>,
    /// `kueue.x-k8s.io/queue-name`.
    pub queue: Option<Sym>,
    /// `spec.schedulerName` when not the default scheduler.
    pub scheduler: Option<Sym>,
    pub unschedulable: Option<Box<Unschedulable>>,
    pub created: Timestamp,
    /// Last status change known (start, failure or completion time).
    pub transitioned: Timestamp,
    /// What restarting it costs, when its annotations say (rare: boxed).
    pub resume: Option<Box<Resume>>,
    /// A kgpu agent or dcgm-exporter, found by its labels: where kgpu reads
    /// its node's GPUs (rare: boxed).
    pub endpoint: Option<Box<Endpoint>>,
    /// `spec.resourceClaims`: devices through DRA (empty for most pods).
    pub claims: Box<[crate::model::PodClaim]>,
    /// The PersistentVolumeClaims its volumes name (generic ephemeral
    /// volumes' included). Empty for most pods.
    pub volumes: Box<[crate::model::ClaimUse]>,
    /// Host ports its containers bind (`hostPort`; with `hostNetwork` the
    /// API server sets it to each containerPort). Empty for most pods.
    pub host_ports: Box<[HostPort]>,
    /// `status.nominatedNodeName`: the scheduler preempted pods on this node
    /// for it and holds the room while they terminate.
    pub nominated: Option<Sym>,
    /// A GPU Operator operand (driver, toolkit, device plugin…) and whether
    /// it works (rare: boxed).
    pub operand: Option<Box<Operand>>,
    /// `metadata.labels`, sorted: what other pods' affinity terms and spread
    /// constraints select.
    pub labels: crate::model::Labels,
    /// Required inter-pod (anti-)affinity and hard spread constraints
    /// (rare: boxed).
    pub rules: Option<Box<crate::model::PodRules>>,
}

/// The GPU Operator's operands on a node, in the order each waits for the
/// one before (the toolkit's init container waits for the driver, the
/// device plugin's for the toolkit, and so on).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum OperandLayer {
    Driver,
    ContainerToolkit,
    DevicePlugin,
    FeatureDiscovery,
    DcgmExporter,
    Validator,
}

impl OperandLayer {
    pub const ALL: [OperandLayer; 6] = [
        OperandLayer::Driver,
        OperandLayer::ContainerToolkit,
        OperandLayer::DevicePlugin,
        OperandLayer::FeatureDiscovery,
        OperandLayer::DcgmExporter,
        OperandLayer::Validator,
    ];

    /// By the `app` label the operator's DaemonSets give their pods.
    pub fn of_app(app: &str) -> Option<OperandLayer> {
        OperandLayer::ALL.into_iter().find(|l| l.app() == app)
    }

    /// The `app` label (and DaemonSet name) of its pods.
    pub fn app(self) -> &'static str {
        match self {
            OperandLayer::Driver => "nvidia-driver-daemonset",
            OperandLayer::ContainerToolkit => "nvidia-container-toolkit-daemonset",
            OperandLayer::DevicePlugin => "nvidia-device-plugin-daemonset",
            OperandLayer::FeatureDiscovery => "gpu-feature-discovery",
            OperandLayer::DcgmExporter => "nvidia-dcgm-exporter",
            OperandLayer::Validator => "nvidia-operator-validator",
        }
    }

    /// The `nvidia.com/gpu.deploy.<suffix>` label that puts it on a node.
    pub fn deploy_label_suffix(self) -> &'static str {
        match self {
            OperandLayer::Driver => "driver",
            OperandLayer::ContainerToolkit => "container-toolkit",
            OperandLayer::DevicePlugin => "device-plugin",
            OperandLayer::FeatureDiscovery => "gpu-feature-discovery",
            OperandLayer::DcgmExporter => "dcgm-exporter",
            OperandLayer::Validator => "operator-validator",
        }
    }

    pub fn title(self) -> &'static str {
        match self {
            OperandLayer::Driver => "driver",
            OperandLayer::ContainerToolkit => "container toolkit",
            OperandLayer::DevicePlugin => "device plugin",
            OperandLayer::FeatureDiscovery => "GPU Feature Discovery",
            OperandLayer::DcgmExporter => "dcgm-exporter",
            OperandLayer::Validator => "operator validator",
        }
    }
}

/// An operand pod and what says whether it works.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Operand {
    pub layer: OperandLayer,
    /// `Ready=True`.
    pub ready: bool,
    /// Restarts of its containers, init containers included.
    pub restarts: u32,
    /// Why the first container that does not run is not running
    /// (`CrashLoopBackOff`, `ImagePullBackOff`, `Error`), with its message.
    pub waiting: Option<(Sym, Box<str>)>,
    /// Init containers done and in all, while some are not done (kubectl's
    /// `Init:1/3`): it waits for the layer below.
    pub init: Option<(u16, u16)>,
}

/// A port a pod binds on its node, as kube-scheduler's NodePorts sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HostPort {
    pub port: u16,
    pub protocol: PortProtocol,
    /// `hostIP`; none means every address (`0.0.0.0`).
    pub ip: Option<core::net::IpAddr>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PortProtocol {
    Tcp,
    Udp,
    Sctp,
}

impl PortProtocol {
    /// The API's spelling; an absent protocol is TCP.
    pub fn parse(s: Option<&str>) -> Option<PortProtocol> {
        match s.unwrap_or("TCP") {
            "TCP" | "" => Some(PortProtocol::Tcp),
            "UDP" => Some(PortProtocol::Udp),
            "SCTP" => Some(PortProtocol::Sctp),
            _ => None,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            PortProtocol::Tcp => "TCP",
            PortProtocol::Udp => "UDP",
            PortProtocol::Sctp => "SCTP",
        }
    }
}

impl HostPort {
    /// Whether two pods binding these could not share a node: the same port
    /// and protocol, on the same address or where either takes every address.
    pub fn conflicts(&self, other: &HostPort) -> bool {
        self.port == other.port
            && self.protocol == other.protocol
            && (self.ip.is_none() || other.ip.is_none() || self.ip == other.ip)
    }
}

impl std::fmt::Display for HostPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.ip {
            Some(ip) => write!(f, "{ip}:{}/{}", self.port, self.protocol.as_str()),
            None => write!(f, "{}/{}", self.port, self.protocol.as_str()),
        }
    }
}

/// What kind of GPU reporter a pod is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EndpointKind {
    Agent,
    DcgmExporter,
}

/// A pod that reports its node's GPUs, and how to reach it: its port (the
/// one named `http` for an agent, `metrics` for an exporter, or the
/// default) and its IP for a cockpit inside the cluster network.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    pub kind: EndpointKind,
    pub port: u16,
    pub ip: Option<core::net::IpAddr>,
}

/// How much work a restart loses, as the pod's owner tells kgpu by
/// annotation (`kgpu.dev/last-checkpoint`, RFC 3339; `kgpu.dev/restart-seconds`:
/// rescheduling, image pull, initialisation and checkpoint load until it
/// computes again; `kgpu.dev/checkpoint-interval`, seconds).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Resume {
    pub last_checkpoint: Option<Timestamp>,
    pub restart_seconds: Option<u32>,
    /// `kgpu.dev/checkpoint-interval`: seconds between checkpoints.
    pub checkpoint_interval_seconds: Option<u32>,
}

impl Pod {
    pub fn new(namespace: &str, name: &str) -> Pod {
        Pod {
            namespace: Sym::new(namespace),
            name: Arc::from(name),
            uid: None,
            node: None,
            phase: PodPhase::Pending,
            reason: None,
            message: None,
            requests: Resources::default(),
            tolerations: Box::new([]),
            node_selector: Box::new([]),
            affinity: Box::new([]),
            priority: 0,
            owner: None,
            workload: None,
            group: None,
            queue: None,
            scheduler: None,
            unschedulable: None,
            cuda: None,
            created: 0,
            transitioned: 0,
            terminating: false,
            mirror: false,
            local_data: false,
            gated: false,
            preempt_never: false,
            resume: None,
            endpoint: None,
            claims: Box::new([]),
            host_ports: Box::new([]),
            volumes: Box::new([]),
            nominated: None,
            operand: None,
            labels: Box::new([]),
            rules: None,
        }
    }

    pub fn key(&self) -> PodKey {
        PodKey { namespace: self.namespace.clone(), name: self.name.clone() }
    }

    /// Holds node resources: bound and not finished.
    pub fn holds_resources(&self) -> bool {
        self.node.is_some() && !self.phase.is_terminal()
    }

    /// Waiting for a node: not bound, not finished, not being deleted.
    pub fn is_pending(&self) -> bool {
        self.node.is_none() && self.phase == PodPhase::Pending && !self.terminating
    }

    pub fn wants_gpu(&self) -> bool {
        self.requests.wants_gpu()
    }

    pub fn owner_kind(&self) -> Option<&str> {
        self.owner.as_ref().map(|o| o.kind.as_str())
    }
}
