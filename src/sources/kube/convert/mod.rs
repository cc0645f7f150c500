//! Kubernetes objects → compact model records, at the edge. Nothing of
//! k8s-openapi or the raw JSON survives past this module. A malformed object
//! is an `Err` with a reason (the caller counts and logs it), never a panic.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Event as K8sEvent;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde_json::Value;

use crate::model::node::{label_value, labels_from};
use crate::model::{
    ClaimUse, ClusterEvent, CudaNeed, Endpoint, EndpointKind, EventType, HostPort, Labels, Node, NodeCondition,
    NodeSelectorTerm, Operand, OperandLayer, Owner, Pod, PodPhase, PortProtocol, Readiness, Requirement, Resources,
    SelectorOperator, Sym, Taint, TaintEffect, Timestamp, Toleration, TolerationOperator, Uid, Unschedulable, keys,
    quantity,
};

use super::lean::{Container, Node as ApiNode, Pod as ApiPod, PodSpec, PortName};
use crate::model::keys::{DRIVER_UPGRADE_VALIDATION_START, DRIVER_UPGRADE_WAIT_FOR_JOBS_START};

mod compute_domain;
mod crds;
mod dra;
mod dra_versions;
mod operator;
mod pod_rules;
mod storage;

pub use compute_domain::compute_domain;
pub use crds::*;
pub use dra::{device_class, resource_claim, resource_claim_template, resource_slice};
pub use dra_versions::as_v1 as dra_as_v1;
pub use operator::{cluster_policy, nvidia_driver};
pub use pod_rules::namespace;
pub use storage::{persistent_volume, storage_class, volume_claim};

pub type Result<T> = std::result::Result<T, String>;

/// An object's name; the API server never stores one without (an empty
/// name in a dump would be a row with no name and a key two objects share).
pub(super) fn named<'a>(name: Option<&'a str>, kind: &str) -> Result<&'a str> {
    name.filter(|n| !n.is_empty()).ok_or_else(|| format!("{kind} without metadata.name"))
}

fn ts(t: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time) -> Timestamp {
    t.0.as_second()
}

fn resources<'a>(map: impl IntoIterator<Item = (&'a String, &'a Quantity)>) -> Result<Vec<(&'a str, u64)>> {
    map.into_iter()
        .map(|(k, v)| quantity::parse(k, &v.0).map(|n| (k.as_str(), n)).map_err(|e| format!("{k}: {e}")))
        .collect()
}

fn resources_json(v: &Value) -> Result<Vec<(&str, u64)>> {
    let Some(m) = v.as_object() else { return Ok(Vec::new()) };
    m.iter()
        .map(|(k, q)| {
            let text = match q {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                other => return Err(format!("{k}: '{other}' is not a quantity")),
            };
            quantity::parse(k, &text).map(|n| (k.as_str(), n)).map_err(|e| format!("{k}: {e}"))
        })
        .collect()
}

fn taint_effect(s: &str) -> Result<TaintEffect> {
    TaintEffect::parse(s).ok_or_else(|| format!("unknown taint effect '{s}'"))
}

fn tolerations_of(list: Option<&Vec<k8s_openapi::api::core::v1::Toleration>>) -> Result<Box<[Toleration]>> {
    list.into_iter()
        .flatten()
        .map(|t| {
            Ok(Toleration {
                key: t.key.as_deref().filter(|k| !k.is_empty()).map(Sym::new),
                operator: match t.operator.as_deref() {
                    Some("Exists") => TolerationOperator::Exists,
                    None | Some("Equal") | Some("") => TolerationOperator::Equal,
                    Some(other) => return Err(format!("unknown toleration operator '{other}'")),
                },
                value: Sym::new(t.value.as_deref().unwrap_or("")),
                effect: match t.effect.as_deref() {
                    None | Some("") => None,
                    Some(e) => Some(taint_effect(e)?),
                },
            })
        })
        .collect()
}

fn selector_op(s: &str) -> Result<SelectorOperator> {
    SelectorOperator::parse(s).ok_or_else(|| format!("unknown selector operator '{s}'"))
}

fn required_affinity(spec: &PodSpec) -> Result<Box<[NodeSelectorTerm]>> {
    match spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| n.required_during_scheduling_ignored_during_execution.as_ref())
    {
        Some(terms) => node_selector_terms(terms),
        None => Ok(Box::new([])),
    }
}

/// The pod that controls an object (a claim made for a pod), by its owner references.
fn controlling_pod(
    owners: Option<&Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference>>,
) -> Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference> {
    owners.into_iter().flatten().find(|o| o.kind == "Pod" && o.controller == Some(true))
}

/// Required node selector terms (a pod's node affinity, a volume's).
fn node_selector_terms(terms: &k8s_openapi::api::core::v1::NodeSelector) -> Result<Box<[NodeSelectorTerm]>> {
    terms
        .node_selector_terms
        .iter()
        .map(|t| {
            let req = |list: &Option<Vec<k8s_openapi::api::core::v1::NodeSelectorRequirement>>| -> Result<Box<[Requirement]>> {
                list.iter()
                    .flatten()
                    .map(|r| {
                        Ok(Requirement {
                            key: Sym::new(&r.key),
                            operator: selector_op(&r.operator)?,
                            values: r.values.iter().flatten().map(|v| Sym::new(v)).collect(),
                        })
                    })
                    .collect()
            };
            Ok(NodeSelectorTerm { expressions: req(&t.match_expressions)?, fields: req(&t.match_fields)? })
        })
        .collect()
}

/// A container's requests: limits stand in for missing requests (as the
/// API server defaults them), so GPUs come from limits.
fn container_requests(c: &Container) -> Result<BTreeMap<&str, u64>> {
    let mut m = BTreeMap::new();
    if let Some(r) = &c.resources {
        for (k, v) in resources(r.limits.iter().flatten())? {
            m.insert(k, v);
        }
        for (k, v) in resources(r.requests.iter().flatten())? {
            m.insert(k, v);
        }
    }
    Ok(m)
}

/// What the scheduler reserves for a pod (component-helpers' `PodRequests`):
/// the app containers' sum plus every native sidecar (an init container
/// with `restartPolicy: Always`, which keeps running); at least what the
/// heaviest moment of the init sequence needs (an init container together
/// with the sidecars started before it); pod-level requests (`spec.resources`)
/// in place of the containers' for cpu and memory; then the RuntimeClass's
/// overhead.
pub fn effective_requests(spec: &PodSpec) -> Result<Resources> {
    // Keys borrow the spec's: a pod's requests are summed without a String per resource.
    fn add<'a>(into: &mut BTreeMap<&'a str, u64>, from: &BTreeMap<&'a str, u64>) {
        for (k, v) in from {
            *into.entry(k).or_default() += v;
        }
    }
    fn at_least<'a>(into: &mut BTreeMap<&'a str, u64>, from: &BTreeMap<&'a str, u64>) {
        for (k, v) in from {
            let e = into.entry(k).or_default();
            *e = (*e).max(*v);
        }
    }
    let mut sum: BTreeMap<&str, u64> = BTreeMap::new();
    for c in &spec.containers {
        add(&mut sum, &container_requests(c)?);
    }
    let mut sidecars: BTreeMap<&str, u64> = BTreeMap::new();
    let mut init_peak: BTreeMap<&str, u64> = BTreeMap::new();
    for c in spec.init_containers.iter().flatten() {
        let own = container_requests(c)?;
        if c.restart_policy.as_deref() == Some("Always") {
            add(&mut sum, &own);
            add(&mut sidecars, &own);
            at_least(&mut init_peak, &sidecars);
        } else {
            let mut moment = own;
            add(&mut moment, &sidecars);
            at_least(&mut init_peak, &moment);
        }
    }
    at_least(&mut sum, &init_peak);
    if let Some(pod_level) = spec.resources.as_ref().and_then(|r| r.requests.as_ref()) {
        for (k, v) in resources(pod_level.iter())? {
            if k == "cpu" || k == "memory" || k.starts_with("hugepages-") {
                sum.insert(k, v);
            }
        }
    }
    add(&mut sum, &resources(spec.overhead.iter().flatten())?.into_iter().collect());
    Ok(Resources::from_pairs(sum))
}

fn cuda_need(spec: &PodSpec) -> Option<&'static CudaNeed> {
    let gpu_container = spec
        .containers
        .iter()
        .find(|c| container_requests(c).is_ok_and(|r| r.keys().any(|k| keys::is_gpu_resource(k))))
        .or(spec.containers.first())?;
    let mut need = CudaNeed { image: gpu_container.image.as_deref().map(Sym::new), ..CudaNeed::default() };
    let mut others = Vec::new();
    for e in gpu_container.env.iter().flatten() {
        let Some(v) = e.value.as_deref() else { continue };
        match e.name.as_str() {
            "NVIDIA_REQUIRE_CUDA" => need.require_cuda = Some(Sym::new(v)),
            "CUDA_VERSION" => need.cuda_version = Some(Sym::new(v)),
            "NVIDIA_DISABLE_REQUIRE" => {
                need.disable_require = matches!(v.to_ascii_lowercase().as_str(), "1" | "true" | "yes")
            }
            n if n.starts_with("NVIDIA_REQUIRE_") => others.push(Sym::new(&format!("{n}={v}"))),
            _ => {}
        }
    }
    need.other_requires = others.into_boxed_slice();
    Some(need.intern())
}

/// The top-level workload a pod's labels name (see `Pod::workload`).
fn workload_of_labels(labels: &Labels) -> Option<Owner> {
    let get = |k: &str| label_value(labels, k);
    let owner = |kind: Sym, name: Sym| Some(Owner { kind, name });
    if let Some(name) = get(keys::JOBSET_NAME) {
        return owner(Sym::new("JobSet"), name.clone());
    }
    if let Some(name) = get(keys::LWS_NAME) {
        return owner(Sym::new("LeaderWorkerSet"), name.clone());
    }
    if let (Some(kind), Some(name)) = (get(keys::RAY_ORIGIN_KIND), get(keys::RAY_ORIGIN_NAME)) {
        return owner(kind.clone(), name.clone());
    }
    get(keys::RAY_CLUSTER).and_then(|name| owner(Sym::new("RayCluster"), name.clone()))
}

fn owner_of(refs: Option<&Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference>>) -> Option<Owner> {
    let refs = refs?;
    refs.iter()
        .find(|r| r.controller == Some(true))
        .or(refs.first())
        .map(|r| Owner { kind: Sym::new(&r.kind), name: Sym::new(&r.name) })
}

pub fn node(n: &ApiNode) -> Result<Node> {
    let name = named(n.metadata.name.as_deref(), "node")?;
    let mut node = Node::new(name, n.labels.clone());
    let spec = n.spec.as_ref();
    node.unschedulable = spec.and_then(|s| s.unschedulable).unwrap_or(false);
    node.taints = spec
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .map(|t| Ok(Taint::new(&t.key, t.value.as_deref().unwrap_or(""), taint_effect(&t.effect)?)))
        .collect::<Result<_>>()?;
    let status = n.status.as_ref();
    node.capacity = Resources::from_pairs(resources(status.and_then(|s| s.capacity.as_ref()).into_iter().flatten())?);
    node.allocatable =
        Resources::from_pairs(resources(status.and_then(|s| s.allocatable.as_ref()).into_iter().flatten())?);
    let conditions = status.and_then(|s| s.conditions.as_ref());
    node.readiness = match conditions.and_then(|c| c.iter().find(|x| x.type_ == "Ready")).map(|c| c.status.as_str()) {
        Some("True") => Readiness::Ready,
        Some("False") => Readiness::NotReady,
        _ => Readiness::Unknown,
    };
    node.problems = conditions
        .into_iter()
        .flatten()
        .filter(|c| c.type_ != "Ready" && c.status == "True")
        .map(|c| NodeCondition {
            kind: Sym::new(&c.type_),
            status: Sym::new(&c.status),
            reason: Sym::new(c.reason.as_deref().unwrap_or("")),
        })
        .collect();
    node.created = n.metadata.creation_timestamp.as_ref().map_or(0, ts);
    // The operator records when some states began; otherwise the model
    // tracks the time it first saw the state.
    let annotation = |k: &str| n.annotations.get(k).and_then(|v| v.parse::<i64>().ok());
    node.operator.upgrade_since = match node.operator.upgrade_state.as_ref().map(|s| s.as_str()) {
        Some("validation-required") => annotation(DRIVER_UPGRADE_VALIDATION_START),
        Some("wait-for-jobs-required") => annotation(DRIVER_UPGRADE_WAIT_FOR_JOBS_START),
        _ => None,
    };
    Ok(node)
}

/// Every GPU reporter listens here unless its pod names another port.
pub const ENDPOINT_DEFAULT_PORT: u16 = 9400;

/// A kgpu agent or dcgm-exporter, by its labels, with the port it serves
/// on: the container port named `http` (agent) or `metrics` (exporter),
/// or the default.
fn endpoint(p: &ApiPod) -> Option<Endpoint> {
    let has = |(k, v): (&str, &str)| label_value(&p.labels, k).is_some_and(|x| x.as_str() == v);
    let (kind, port_name) = if has(keys::AGENT_LABEL) {
        (EndpointKind::Agent, PortName::Http)
    } else if keys::DCGM_EXPORTER_LABELS.into_iter().any(has) {
        (EndpointKind::DcgmExporter, PortName::Metrics)
    } else {
        return None;
    };
    let port = p
        .spec
        .iter()
        .flat_map(|s| &s.containers)
        .flat_map(|c| c.ports.iter().flatten())
        .find(|port| port.name == port_name)
        .and_then(|port| u16::try_from(port.container_port).ok())
        .unwrap_or(ENDPOINT_DEFAULT_PORT);
    Some(Endpoint { kind, port, ip: p.status.as_ref().and_then(|s| s.pod_ip.0) })
}

/// The host ports a pod binds, as kube-scheduler v1.36 reads them
/// (`util.GetHostPorts`): its containers' and native sidecars' ports with a
/// `hostPort` (a port outside 1-65535 binds nothing; an unknown protocol is
/// left out rather than guessed). Only `0.0.0.0` or no `hostIP` means every
/// address, as the scheduler compares addresses as written.
fn host_ports(spec: &PodSpec) -> Box<[HostPort]> {
    let sidecars = spec.init_containers.iter().flatten().filter(|c| c.restart_policy.as_deref() == Some("Always"));
    let mut ports: Vec<HostPort> = sidecars
        .chain(&spec.containers)
        .flat_map(|c| c.ports.iter().flatten())
        .filter_map(|p| {
            Some(HostPort {
                port: u16::try_from(p.host_port).ok().filter(|&n| n > 0)?,
                protocol: PortProtocol::parse(p.protocol())?,
                ip: p
                    .host_ip()
                    .and_then(|ip| ip.parse::<IpAddr>().ok())
                    .filter(|ip| *ip != IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED)),
            })
        })
        .collect();
    ports.sort_unstable();
    ports.dedup();
    ports.into_boxed_slice()
}

/// A status message as the model keeps it: its first 512 characters.
fn truncated(message: &str) -> Box<str> {
    message.chars().take(512).collect::<String>().into_boxed_str()
}

/// A GPU Operator operand, by the `app` label its DaemonSet gives it (an
/// NVIDIADriver's driver pods by their component label), and what its status
/// says: ready, restarts, the first container that does not run and why.
fn operand(p: &ApiPod) -> Option<Operand> {
    let layer = label_value(&p.labels, "app").and_then(|app| OperandLayer::of_app(app.as_str())).or_else(|| {
        (label_value(&p.labels, "app.kubernetes.io/component").map(|c| c.as_str()) == Some("nvidia-driver"))
            .then_some(OperandLayer::Driver)
    })?;
    let status = p.status.as_ref();
    let inits = status.and_then(|s| s.init_container_statuses.as_deref()).unwrap_or(&[]);
    let mains = status.and_then(|s| s.container_statuses.as_deref()).unwrap_or(&[]);
    let done = |c: &&super::lean::ContainerStatus| {
        c.state.as_ref().and_then(|s| s.terminated.as_ref()).is_some_and(|t| t.exit_code == 0)
            // A native sidecar that runs counts as started.
            || c.state.as_ref().is_some_and(|s| s.running.is_some())
    };
    let init_done = inits.iter().filter(done).count();
    let why_not = |c: &super::lean::ContainerStatus| {
        let state = c.state.as_ref()?;
        if let Some(w) = &state.waiting {
            let reason = w.reason.as_deref().filter(|r| !r.is_empty())?;
            return Some((Sym::new(reason), truncated(w.message.as_deref().unwrap_or(""))));
        }
        let t = state.terminated.as_ref().filter(|t| t.exit_code != 0)?;
        let reason = t.reason.as_deref().unwrap_or("Error");
        Some((Sym::new(reason), truncated(t.message.as_deref().unwrap_or(""))))
    };
    Some(Operand {
        layer,
        ready: status
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True")),
        restarts: inits.iter().chain(mains).map(|c| c.restart_count.max(0) as u32).sum(),
        waiting: inits.iter().chain(mains).find_map(why_not),
        init: (init_done < inits.len()).then_some((init_done as u16, inits.len() as u16)),
    })
}

pub fn pod(p: &ApiPod) -> Result<Pod> {
    let name = named(p.metadata.name.as_deref(), "pod")?;
    let namespace = p.metadata.namespace.as_deref().unwrap_or("default");
    let spec = p.spec.as_ref().ok_or_else(|| format!("pod {namespace}/{name} without spec"))?;
    let mut pod = Pod::new(namespace, name);
    pod.requests = effective_requests(spec).map_err(|e| format!("pod {namespace}/{name}: {e}"))?;
    pod.node = spec.node_name.as_deref().filter(|n| !n.is_empty()).map(Sym::new);
    pod.tolerations = tolerations_of(spec.tolerations.as_ref())?;
    pod.node_selector = labels_from(spec.node_selector.iter().flatten().map(|(k, v)| (k.as_str(), v.as_str())));
    pod.affinity = required_affinity(spec)?;
    pod.priority = spec.priority.unwrap_or(0);
    pod.scheduler = spec.scheduler_name.as_deref().filter(|s| *s != "default-scheduler").map(Sym::new);
    pod.gated = spec.scheduling_gates.as_ref().is_some_and(|g| !g.is_empty());
    pod.owner = owner_of(p.metadata.owner_references.as_ref());
    pod.uid = p.metadata.uid.as_deref().and_then(Uid::parse);
    let labels = &p.labels;
    pod.workload = workload_of_labels(labels);
    let annotations = &p.annotations;
    pod.group = label_value(labels, keys::KUEUE_POD_GROUP_NAME)
        .cloned()
        .or_else(|| annotations.get(keys::VOLCANO_GROUP_NAME).map(Sym::new))
        .or_else(|| annotations.get(keys::VOLCANO_GROUP_NAME_NEW).map(Sym::new));
    pod.queue = label_value(labels, keys::KUEUE_QUEUE_NAME).cloned();
    pod.mirror = annotations.get(keys::MIRROR_POD_ANNOTATION).is_some();
    pod.preempt_never = spec.preemption_policy.as_deref() == Some("Never");
    let resume = crate::model::Resume {
        last_checkpoint: annotations.get(keys::LAST_CHECKPOINT).and_then(crate::model::time::parse_rfc3339),
        restart_seconds: annotations.get(keys::RESTART_SECONDS).and_then(|s| s.trim().parse().ok()),
        checkpoint_interval_seconds: annotations.get(keys::CHECKPOINT_INTERVAL).and_then(|s| s.trim().parse().ok()),
    };
    if resume != crate::model::Resume::default() {
        pod.resume = Some(Box::new(resume));
    }
    pod.local_data = spec.volumes.iter().flatten().any(|v| v.empty_dir.is_some());
    pod.volumes = spec
        .volumes
        .iter()
        .flatten()
        .filter_map(|v| match (&v.persistent_volume_claim, &v.ephemeral) {
            (Some(c), _) => Some(ClaimUse { claim: Arc::from(c.claim_name.as_str()), ephemeral: false }),
            (None, Some(_)) => Some(ClaimUse { claim: Arc::from(format!("{name}-{}", v.name)), ephemeral: true }),
            (None, None) => None,
        })
        .collect();
    pod.endpoint = endpoint(p).map(Box::new);
    pod.claims = dra::pod_claims(spec, p.status.as_ref());
    // Asked as an extended resource, a GPU is a GPU whoever serves it.
    let asks_gpu = pod.requests.wants_gpu();
    if let Some(claim) = dra::extended_resource_claim(&mut pod.requests, p.status.as_ref()) {
        pod.claims = pod.claims.iter().cloned().chain([claim]).collect();
    }
    pod.host_ports = host_ports(spec);
    pod.labels = p.labels.clone();
    pod.rules =
        pod_rules::of(spec, pod.namespace.clone(), &pod.labels).map_err(|e| format!("pod {namespace}/{name}: {e}"))?;
    pod.operand = operand(p).map(Box::new);
    pod.nominated =
        p.status.as_ref().and_then(|s| s.nominated_node_name.as_deref()).filter(|n| !n.is_empty()).map(Sym::new);
    pod.terminating = p.metadata.deletion_timestamp.is_some();
    pod.created = p.metadata.creation_timestamp.as_ref().map_or(0, ts);
    if asks_gpu {
        pod.cuda = cuda_need(spec);
    }
    // From the start time where there is one: a kubelet never starts a pod
    // before it exists, but a replayed scenario writes the start it had.
    let mut transitioned = p.status.as_ref().and_then(|s| s.start_time.as_ref()).map_or(pod.created, ts);
    if let Some(status) = &p.status {
        pod.phase = PodPhase::parse(status.phase.as_deref().unwrap_or("Pending"));
        pod.reason = status.reason.as_deref().map(Sym::new);
        pod.message = status.message.as_deref().map(truncated);
        for c in status.conditions.iter().flatten() {
            if let Some(t) = &c.last_transition_time {
                transitioned = transitioned.max(ts(t));
            }
            if c.type_ == "PodScheduled" && c.status == "False" {
                pod.unschedulable = Some(Box::new(Unschedulable {
                    reason: Sym::new(c.reason.as_deref().unwrap_or("")),
                    message: c.message.as_deref().unwrap_or("").into(),
                    since: c.last_transition_time.as_ref().map_or(pod.created, ts),
                }));
            }
        }
        // A container that does not start (init containers first, as the
        // kubelet runs them): its waiting reason is the pod's, while Pending,
        // or Running with a container in CrashLoopBackOff.
        let statuses =
            status.init_container_statuses.iter().flatten().chain(status.container_statuses.iter().flatten());
        for cs in statuses {
            if let Some(state) = &cs.state {
                if let Some(w) = &state.waiting
                    && matches!(pod.phase, PodPhase::Pending | PodPhase::Running)
                    && pod.reason.is_none()
                    && let Some(r) =
                        w.reason.as_deref().filter(|r| *r != "ContainerCreating" && *r != "PodInitializing")
                {
                    pod.reason = Some(Sym::new(r));
                    pod.message = w.message.as_deref().map(truncated);
                }
                if let Some(t) = state.running.as_ref().and_then(|r| r.started_at.as_ref()) {
                    transitioned = transitioned.max(ts(t));
                }
                if let Some(t) = state.terminated.as_ref().and_then(|r| r.finished_at.as_ref()) {
                    transitioned = transitioned.max(ts(t));
                }
            }
        }
    }
    pod.transitioned = transitioned;
    Ok(pod)
}

/// The most of an event's message kgpu keeps. The API server bounds only the
/// whole object (about 1.5 MB; the events.k8s.io note is 1 KB), and the
/// longest real messages — a scheduler's reasons on a large fleet — are a few
/// KB; a 20 MB one was printed whole.
pub const MAX_EVENT_MESSAGE: usize = 16 << 10;

fn bounded_message(message: &str) -> std::borrow::Cow<'_, str> {
    if message.len() <= MAX_EVENT_MESSAGE {
        return message.into();
    }
    let mut end = MAX_EVENT_MESSAGE;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} more bytes)", &message[..end], message.len() - end).into()
}

pub fn event(e: &K8sEvent) -> Result<ClusterEvent> {
    let name = named(e.metadata.name.as_deref(), "event")?;
    let namespace = e.metadata.namespace.as_deref().unwrap_or("");
    let last = e
        .last_timestamp
        .as_ref()
        .map(ts)
        .or_else(|| e.series.as_ref().and_then(|s| s.last_observed_time.as_ref()).map(|t| t.0.as_second()))
        .or_else(|| e.event_time.as_ref().map(|t| t.0.as_second()))
        .or_else(|| e.metadata.creation_timestamp.as_ref().map(ts))
        .unwrap_or(0);
    Ok(ClusterEvent {
        namespace: Sym::new(namespace),
        name: Arc::from(name),
        kind: if e.type_.as_deref() == Some("Warning") { EventType::Warning } else { EventType::Normal },
        reason: Sym::new(e.reason.as_deref().unwrap_or("")),
        object_kind: Sym::new(e.involved_object.kind.as_deref().unwrap_or("")),
        object_name: Arc::from(e.involved_object.name.as_deref().unwrap_or("")),
        message: bounded_message(e.message.as_deref().unwrap_or("")).into(),
        count: e.count.or_else(|| e.series.as_ref().and_then(|s| s.count)).unwrap_or(1).max(1) as u32,
        first: e.first_timestamp.as_ref().map(ts).unwrap_or(last),
        last,
        source: Sym::new(
            e.reporting_component
                .as_deref()
                .filter(|c| !c.is_empty())
                .or_else(|| e.source.as_ref().and_then(|s| s.component.as_deref()))
                .unwrap_or(""),
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_message_is_kept_to_its_bound_on_a_character_boundary() {
        let mut e = K8sEvent::default();
        e.metadata.name = Some("e".into());
        e.message = Some(format!("{}é{}", "x".repeat(MAX_EVENT_MESSAGE - 1), "y".repeat(20 << 20)));
        let kept = event(&e).unwrap().message;
        assert!(kept.len() < MAX_EVENT_MESSAGE + 64, "{}", kept.len());
        assert!(kept.ends_with(&format!("… ({} more bytes)", (20 << 20) + 2)), "{}", &kept[kept.len() - 40..]);
        e.message = Some("0/8 nodes are available: 8 Insufficient nvidia.com/gpu.".into());
        assert_eq!(&*event(&e).unwrap().message, "0/8 nodes are available: 8 Insufficient nvidia.com/gpu.");
    }
}
