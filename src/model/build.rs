//! Readable builders for model records: used by the simulator, the tests and
//! the benchmarks. `node("gpu-1").gpus(8).cordoned().build()`,
//! `pod("train-0").gpus(4).on("gpu-1").running().build()`.

use std::sync::Arc;

use super::node::labels_from;
use super::{
    CudaNeed, Node, NodeSelectorTerm, Owner, Pod, PodPhase, Readiness, Requirement, Resources, SelectorOperator, Sym,
    Taint, TaintEffect, Timestamp, Toleration, Unschedulable, keys,
};

pub struct NodeBuilder {
    name: String,
    labels: Vec<(String, String)>,
    taints: Vec<Taint>,
    capacity: Vec<(String, u64)>,
    allocatable_override: Option<Vec<(String, u64)>>,
    unschedulable: bool,
    readiness: Readiness,
    created: Timestamp,
}

pub fn node(name: &str) -> NodeBuilder {
    NodeBuilder {
        name: name.to_string(),
        labels: vec![(keys::HOSTNAME.into(), name.into())],
        taints: Vec::new(),
        capacity: vec![("cpu".into(), 64_000), ("memory".into(), 512 << 30), ("pods".into(), 110)],
        allocatable_override: None,
        unschedulable: false,
        readiness: Readiness::Ready,
        created: 0,
    }
}

impl NodeBuilder {
    fn set_capacity(&mut self, resource: &str, amount: u64) {
        self.capacity.retain(|(r, _)| r != resource);
        self.capacity.push((resource.to_string(), amount));
    }

    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.labels.retain(|(k, _)| k != key);
        self.labels.push((key.into(), value.into()));
        self
    }

    /// `n` whole GPUs: hardware (GFD count) and advertised.
    pub fn gpus(mut self, n: u64) -> Self {
        self.set_capacity(keys::RESOURCE_GPU, n);
        self.label(keys::GPU_PRESENT, "true").label(keys::GPU_COUNT, &n.to_string())
    }

    /// GPUs present in hardware (GFD) whatever the device plugin advertises.
    pub fn hardware(self, n: u64) -> Self {
        self.label(keys::GPU_PRESENT, "true").label(keys::GPU_COUNT, &n.to_string())
    }

    /// Advertised MIG slices of one profile (mixed strategy).
    pub fn mig(mut self, profile: &str, n: u64) -> Self {
        self.set_capacity(&format!("{}{profile}", keys::RESOURCE_MIG_PREFIX), n);
        self.label(keys::MIG_STRATEGY, "mixed")
    }

    pub fn advertise(mut self, resource: &str, n: u64) -> Self {
        self.set_capacity(resource, n);
        self
    }

    /// Allocatable different from capacity (e.g. an unhealthy GPU dropped out).
    pub fn allocatable(mut self, resource: &str, n: u64) -> Self {
        let mut alloc = self.allocatable_override.take().unwrap_or_else(|| self.capacity.clone());
        alloc.retain(|(r, _)| r != resource);
        alloc.push((resource.to_string(), n));
        self.allocatable_override = Some(alloc);
        self
    }

    pub fn cpu(mut self, cores: u64) -> Self {
        self.set_capacity("cpu", cores * 1000);
        self
    }

    pub fn memory_gi(mut self, gi: u64) -> Self {
        self.set_capacity("memory", gi << 30);
        self
    }

    pub fn product(self, product: &str) -> Self {
        self.label(keys::GPU_PRODUCT, product)
    }

    /// Sets the GFD driver labels (new and deprecated) and the CUDA version
    /// the driver supports.
    pub fn driver(self, version: &str, cuda: &str) -> Self {
        let parts: Vec<&str> = version.split('.').collect();
        let (cmaj, cmin) = cuda.split_once('.').unwrap_or((cuda, "0"));
        let mut b = self
            .label(keys::DRIVER_FULL, version)
            .label(keys::DRIVER_MAJOR, parts.first().copied().unwrap_or(""))
            .label(keys::DRIVER_MINOR, parts.get(1).copied().unwrap_or("0"))
            .label(keys::DRIVER_MAJOR_DEPRECATED, parts.first().copied().unwrap_or(""))
            .label(keys::DRIVER_MINOR_DEPRECATED, parts.get(1).copied().unwrap_or("0"))
            .label(keys::CUDA_RUNTIME_MAJOR, cmaj)
            .label(keys::CUDA_RUNTIME_MINOR, cmin)
            .label(keys::CUDA_RUNTIME_MAJOR_DEPRECATED, cmaj)
            .label(keys::CUDA_RUNTIME_MINOR_DEPRECATED, cmin)
            .label("nvidia.com/cuda.runtime-version.full", cuda);
        if let Some(rev) = parts.get(2) {
            b = b.label(keys::DRIVER_REVISION, rev).label(keys::DRIVER_REV_DEPRECATED, rev);
        }
        b
    }

    pub fn taint(mut self, key: &str, value: &str, effect: TaintEffect) -> Self {
        self.taints.push(Taint::new(key, value, effect));
        self
    }

    pub fn cordoned(mut self) -> Self {
        self.unschedulable = true;
        self
    }

    pub fn not_ready(mut self) -> Self {
        self.readiness = Readiness::NotReady;
        self
    }

    pub fn created(mut self, at: Timestamp) -> Self {
        self.created = at;
        self
    }

    pub fn build(self) -> Node {
        let labels = labels_from(self.labels.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let mut node = Node::new(&self.name, labels);
        node.capacity = Resources::from_pairs(self.capacity.iter().map(|(r, n)| (r.as_str(), *n)));
        node.allocatable = match &self.allocatable_override {
            Some(alloc) => Resources::from_pairs(alloc.iter().map(|(r, n)| (r.as_str(), *n))),
            None => node.capacity.clone(),
        };
        node.taints = self.taints.into_boxed_slice();
        node.unschedulable = self.unschedulable;
        node.readiness = self.readiness;
        node.created = self.created;
        node
    }
}

pub struct PodBuilder {
    pod: Pod,
    cuda: Option<CudaNeed>,
    requests: Vec<(String, u64)>,
    selector: Vec<(String, String)>,
    affinity: Vec<Requirement>,
    tolerations: Vec<Toleration>,
}

pub fn pod(name: &str) -> PodBuilder {
    PodBuilder {
        pod: Pod::new("default", name),
        cuda: None,
        requests: vec![("cpu".into(), 1000), ("memory".into(), 4 << 30)],
        selector: Vec::new(),
        affinity: Vec::new(),
        tolerations: Vec::new(),
    }
}

impl PodBuilder {
    fn set_request(&mut self, resource: &str, amount: u64) {
        self.requests.retain(|(r, _)| r != resource);
        self.requests.push((resource.to_string(), amount));
    }

    pub fn ns(mut self, namespace: &str) -> Self {
        self.pod.namespace = Sym::new(namespace);
        self
    }

    pub fn gpus(mut self, n: u64) -> Self {
        self.set_request(keys::RESOURCE_GPU, n);
        self
    }

    pub fn mig(mut self, profile: &str, n: u64) -> Self {
        self.set_request(&format!("{}{profile}", keys::RESOURCE_MIG_PREFIX), n);
        self
    }

    pub fn request(mut self, resource: &str, amount: u64) -> Self {
        self.set_request(resource, amount);
        self
    }

    pub fn cpu_milli(mut self, milli: u64) -> Self {
        self.set_request("cpu", milli);
        self
    }

    pub fn memory_gi(mut self, gi: u64) -> Self {
        self.set_request("memory", gi << 30);
        self
    }

    pub fn selector(mut self, key: &str, value: &str) -> Self {
        self.selector.push((key.into(), value.into()));
        self
    }

    pub fn affinity_in(mut self, key: &str, values: &[&str]) -> Self {
        self.affinity.push(Requirement {
            key: Sym::new(key),
            operator: SelectorOperator::In,
            values: values.iter().map(|v| Sym::new(v)).collect(),
        });
        self
    }

    pub fn tolerate(mut self, key: &str) -> Self {
        self.tolerations.push(Toleration::exists(key));
        self
    }

    pub fn toleration(mut self, t: Toleration) -> Self {
        self.tolerations.push(t);
        self
    }

    pub fn on(mut self, node: &str) -> Self {
        self.pod.node = Some(Sym::new(node));
        self
    }

    pub fn running(mut self) -> Self {
        self.pod.phase = PodPhase::Running;
        self
    }

    pub fn phase(mut self, phase: PodPhase) -> Self {
        self.pod.phase = phase;
        self
    }

    pub fn failed(mut self, reason: &str, message: &str) -> Self {
        self.pod.phase = PodPhase::Failed;
        self.pod.reason = Some(Sym::new(reason));
        self.pod.message = Some(message.into());
        self
    }

    pub fn priority(mut self, p: i32) -> Self {
        self.pod.priority = p;
        self
    }

    /// A non-preempting PriorityClass (`preemptionPolicy: Never`).
    pub fn preempt_never(mut self) -> Self {
        self.pod.preempt_never = true;
        self
    }

    /// `kgpu.dev/last-checkpoint` and `kgpu.dev/restart-seconds`.
    pub fn checkpointed(mut self, at: Timestamp, restart_seconds: u32) -> Self {
        let resume = self.pod.resume.get_or_insert_with(Default::default);
        resume.last_checkpoint = Some(at);
        resume.restart_seconds = Some(restart_seconds);
        self
    }

    /// `kgpu.dev/checkpoint-interval` and `kgpu.dev/restart-seconds`.
    pub fn checkpoint_every(mut self, interval_seconds: u32, restart_seconds: u32) -> Self {
        let resume = self.pod.resume.get_or_insert_with(Default::default);
        resume.checkpoint_interval_seconds = Some(interval_seconds);
        resume.restart_seconds = Some(restart_seconds);
        self
    }

    /// Binds `port`/TCP on every address of its node.
    pub fn host_port(mut self, port: u16) -> Self {
        let mut ports = self.pod.host_ports.to_vec();
        ports.push(crate::model::HostPort { port, protocol: crate::model::PortProtocol::Tcp, ip: None });
        self.pod.host_ports = ports.into();
        self
    }

    /// A `metadata.labels` entry.
    pub fn pod_label(mut self, key: &str, value: &str) -> Self {
        let mut labels: Vec<(Sym, Sym)> = self.pod.labels.iter().filter(|&(k, _)| k.as_str() != key).cloned().collect();
        labels.push((Sym::new(key), Sym::new(value)));
        labels.sort_by_key(|l| l.0.clone());
        self.pod.labels = labels.into();
        self
    }

    /// A required anti-affinity term: no pod of its namespace labelled
    /// `key=value` in the same `topology_key` domain.
    pub fn anti_affinity(mut self, key: &str, value: &str, topology_key: &str) -> Self {
        let term = self.term(key, value, topology_key);
        let rules = self.pod.rules.get_or_insert_with(Default::default);
        rules.anti_affinity = rules.anti_affinity.iter().cloned().chain([term]).collect();
        self
    }

    /// A required affinity term: a pod of its namespace labelled
    /// `key=value` in the same `topology_key` domain.
    pub fn pod_affinity(mut self, key: &str, value: &str, topology_key: &str) -> Self {
        let term = self.term(key, value, topology_key);
        let rules = self.pod.rules.get_or_insert_with(Default::default);
        rules.affinity = rules.affinity.iter().cloned().chain([term]).collect();
        self
    }

    /// Its affinity and anti-affinity terms look in the namespaces labelled
    /// `key=value` (a `namespaceSelector`), not in its own.
    pub fn in_namespaces_labelled(mut self, key: &str, value: &str) -> Self {
        if let Some(rules) = self.pod.rules.as_mut() {
            let selected = || crate::model::Namespaces::Selected {
                listed: Box::new([]),
                selector: crate::model::LabelSelector {
                    requirements: Box::new([crate::model::pod_rules::equals(key, value)]),
                },
            };
            for term in rules.affinity.iter_mut().chain(rules.anti_affinity.iter_mut()) {
                term.namespaces = selected();
            }
        }
        self
    }

    fn term(&self, key: &str, value: &str, topology_key: &str) -> crate::model::PodAffinityTerm {
        crate::model::PodAffinityTerm {
            selector: Some(crate::model::LabelSelector {
                requirements: Box::new([crate::model::pod_rules::equals(key, value)]),
            }),
            namespaces: crate::model::Namespaces::Listed(Box::new([self.pod.namespace.clone()])),
            topology_key: Sym::new(topology_key),
        }
    }

    /// A DoNotSchedule spread constraint over pods labelled `key=value`.
    pub fn spread(mut self, key: &str, value: &str, topology_key: &str, max_skew: i32) -> Self {
        let constraint = crate::model::SpreadConstraint {
            max_skew,
            topology_key: Sym::new(topology_key),
            selector: Some(crate::model::LabelSelector {
                requirements: Box::new([crate::model::pod_rules::equals(key, value)]),
            }),
            min_domains: 1,
            honor_node_affinity: true,
            honor_node_taints: false,
        };
        let rules = self.pod.rules.get_or_insert_with(Default::default);
        rules.spread = rules.spread.iter().cloned().chain([constraint]).collect();
        self
    }

    /// The scheduler nominated `node` for it (it preempted there).
    pub fn nominated(mut self, node: &str) -> Self {
        self.pod.nominated = Some(Sym::new(node));
        self
    }

    /// Being deleted (`metadata.deletionTimestamp` set).
    pub fn terminating(mut self) -> Self {
        self.pod.terminating = true;
        self
    }

    /// An `emptyDir` volume.
    pub fn local_data(mut self) -> Self {
        self.pod.local_data = true;
        self
    }

    pub fn owner(mut self, kind: &str, name: &str) -> Self {
        self.pod.owner = Some(Owner { kind: Sym::new(kind), name: Sym::new(name) });
        self
    }

    pub fn group(mut self, group: &str) -> Self {
        self.pod.group = Some(Sym::new(group));
        self
    }

    pub fn queue(mut self, queue: &str) -> Self {
        self.pod.queue = Some(Sym::new(queue));
        self
    }

    pub fn created(mut self, at: Timestamp) -> Self {
        self.pod.created = at;
        self.pod.transitioned = self.pod.transitioned.max(at);
        self
    }

    pub fn transitioned(mut self, at: Timestamp) -> Self {
        self.pod.transitioned = at;
        self
    }

    pub fn unschedulable(mut self, message: &str, since: Timestamp) -> Self {
        self.pod.unschedulable =
            Some(Box::new(Unschedulable { reason: Sym::new("Unschedulable"), message: message.into(), since }));
        self
    }

    pub fn cuda_require(mut self, require: &str) -> Self {
        self.cuda.get_or_insert_with(Default::default).require_cuda = Some(Sym::new(require));
        self
    }

    pub fn cuda_version(mut self, version: &str) -> Self {
        self.cuda.get_or_insert_with(Default::default).cuda_version = Some(Sym::new(version));
        self
    }

    pub fn image(mut self, image: &str) -> Self {
        self.cuda.get_or_insert_with(Default::default).image = Some(Sym::new(image));
        self
    }

    pub fn scheduler(mut self, name: &str) -> Self {
        self.pod.scheduler = Some(Sym::new(name));
        self
    }

    pub fn build(mut self) -> Pod {
        self.pod.requests = Resources::from_pairs(self.requests.iter().map(|(r, n)| (r.as_str(), *n)));
        self.pod.node_selector = labels_from(self.selector.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        if !self.affinity.is_empty() {
            self.pod.affinity =
                Box::new([NodeSelectorTerm { expressions: self.affinity.into_boxed_slice(), fields: Box::new([]) }]);
        }
        self.pod.tolerations = self.tolerations.into_boxed_slice();
        self.pod.cuda = self.cuda.map(CudaNeed::intern);
        self.pod
    }
}

/// The pod's name as a shared string (for keys built in tests).
pub fn name(s: &str) -> Arc<str> {
    Arc::from(s)
}

/// A Volcano PodGroup of `min_members` pods of `gpus` GPUs each:
/// `podgroup("train", 2, 8).build()`.
pub fn podgroup(name: &str, min_members: u32, gpus: u64) -> GangBuilder {
    GangBuilder {
        gang: super::Gang {
            kind: super::GangKind::VolcanoPodGroup,
            namespace: Sym::new("default"),
            name: Arc::from(name),
            queue: None,
            min_members,
            pod_sets: Box::new([super::PodSet {
                name: Sym::new("worker"),
                count: min_members,
                min_count: None,
                requests: Resources::from_pairs([(keys::RESOURCE_GPU, gpus)]),
                node_selector: Box::new([]),
                tolerations: Box::new([]),
                affinity: Box::new([]),
                claims: Box::new([]),
            }]),
            priority: 0,
            created: 0,
            uid: None,
            active: true,
            conditions: Box::new([]),
            admission: None,
            admission_checks: Box::new([]),
            requeue: None,
            phase: Some(Sym::new("Pending")),
            owner: None,
            min_resources: None,
            kueue_counted: None,
            running: 0,
        },
    }
}

pub struct GangBuilder {
    gang: super::Gang,
}

impl GangBuilder {
    pub fn ns(mut self, namespace: &str) -> Self {
        self.gang.namespace = Sym::new(namespace);
        self
    }

    pub fn created(mut self, at: Timestamp) -> Self {
        self.gang.created = at;
        self
    }

    /// Volcano `status.phase` (`Pending`, `Inqueue`, `Running`, ...).
    pub fn phase(mut self, phase: &str) -> Self {
        self.gang.phase = Some(Sym::new(phase));
        self
    }

    pub fn build(self) -> super::Gang {
        self.gang
    }
}
