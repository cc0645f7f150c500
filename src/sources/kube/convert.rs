//! Kubernetes objects → compact model records, at the edge. Nothing of
//! k8s-openapi or the raw JSON survives past this module. A malformed object
//! is an `Err` with a reason (the caller counts and logs it), never a panic.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Container, Event as K8sEvent, Node as K8sNode, Pod as K8sPod, PodSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde_json::Value;

use crate::model::node::labels_from;
use crate::model::{
    Admission, AdmissionCheckState, ClusterEvent, Condition, CudaNeed, EventType, Flavor, Gang, GangKind, Labels, Node,
    NodeCondition, NodeSelectorTerm, Owner, Pod, PodPhase, PodSet, PodSetAssignment, Queue, QueueKind, QueueQuota,
    Readiness, RequeueState, Requirement, Resources, SelectorOperator, Sym, Taint, TaintEffect, Timestamp, Toleration,
    TolerationOperator, Unschedulable, keys, quantity,
};

use super::manifest::{VALIDATION_START, WAIT_FOR_JOBS_START};
use crate::model::time::parse_rfc3339;

pub type Result<T> = std::result::Result<T, String>;

fn ts(t: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time) -> Timestamp {
    t.0.as_second()
}

fn resources<'a>(map: impl IntoIterator<Item = (&'a String, &'a Quantity)>) -> Result<Vec<(String, u64)>> {
    map.into_iter()
        .map(|(k, v)| quantity::parse(k, &v.0).map(|n| (k.clone(), n)).map_err(|e| format!("{k}: {e}")))
        .collect()
}

fn resources_json(v: &Value) -> Result<Vec<(String, u64)>> {
    let Some(m) = v.as_object() else { return Ok(Vec::new()) };
    m.iter()
        .map(|(k, q)| {
            let text = match q {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                other => return Err(format!("{k}: '{other}' is not a quantity")),
            };
            quantity::parse(k, &text).map(|n| (k.clone(), n)).map_err(|e| format!("{k}: {e}"))
        })
        .collect()
}

fn to_resources(pairs: &[(String, u64)]) -> Resources {
    Resources::from_pairs(pairs.iter().map(|(k, v)| (k.as_str(), *v)))
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
    let Some(terms) = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| n.required_during_scheduling_ignored_during_execution.as_ref())
    else {
        return Ok(Box::new([]));
    };
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
fn container_requests(c: &Container) -> Result<BTreeMap<String, u64>> {
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
    fn add(into: &mut BTreeMap<String, u64>, from: &BTreeMap<String, u64>) {
        for (k, v) in from {
            *into.entry(k.clone()).or_default() += v;
        }
    }
    fn at_least(into: &mut BTreeMap<String, u64>, from: &BTreeMap<String, u64>) {
        for (k, v) in from {
            let e = into.entry(k.clone()).or_default();
            *e = (*e).max(*v);
        }
    }
    let mut sum: BTreeMap<String, u64> = BTreeMap::new();
    for c in &spec.containers {
        add(&mut sum, &container_requests(c)?);
    }
    let mut sidecars: BTreeMap<String, u64> = BTreeMap::new();
    let mut init_peak: BTreeMap<String, u64> = BTreeMap::new();
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
    let pairs: Vec<(String, u64)> = sum.into_iter().collect();
    Ok(to_resources(&pairs))
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
fn workload_of_labels(labels: &BTreeMap<String, String>) -> Option<Owner> {
    let owner = |kind: &str, name: &String| Some(Owner { kind: Sym::new(kind), name: Sym::new(name) });
    if let Some(name) = labels.get(keys::JOBSET_NAME) {
        return owner("JobSet", name);
    }
    if let Some(name) = labels.get(keys::LWS_NAME) {
        return owner("LeaderWorkerSet", name);
    }
    if let (Some(kind), Some(name)) = (labels.get(keys::RAY_ORIGIN_KIND), labels.get(keys::RAY_ORIGIN_NAME)) {
        return owner(kind, name);
    }
    labels.get(keys::RAY_CLUSTER).and_then(|name| owner("RayCluster", name))
}

fn owner_of(refs: Option<&Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference>>) -> Option<Owner> {
    let refs = refs?;
    refs.iter()
        .find(|r| r.controller == Some(true))
        .or(refs.first())
        .map(|r| Owner { kind: Sym::new(&r.kind), name: Sym::new(&r.name) })
}

pub fn node(n: &K8sNode) -> Result<Node> {
    let name = n.metadata.name.as_deref().ok_or("node without metadata.name")?;
    let labels: Labels = labels_from(n.metadata.labels.iter().flatten().map(|(k, v)| (k.as_str(), v.as_str())));
    let mut node = Node::new(name, labels);
    let spec = n.spec.as_ref();
    node.unschedulable = spec.and_then(|s| s.unschedulable).unwrap_or(false);
    node.taints = spec
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .map(|t| Ok(Taint::new(&t.key, t.value.as_deref().unwrap_or(""), taint_effect(&t.effect)?)))
        .collect::<Result<_>>()?;
    let status = n.status.as_ref();
    node.capacity = to_resources(&resources(status.and_then(|s| s.capacity.as_ref()).into_iter().flatten())?);
    node.allocatable = to_resources(&resources(status.and_then(|s| s.allocatable.as_ref()).into_iter().flatten())?);
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
    let annotation =
        |k: &str| n.metadata.annotations.as_ref().and_then(|a| a.get(k)).and_then(|v| v.parse::<i64>().ok());
    node.operator.upgrade_since = match node.operator.upgrade_state.map(|s| s.as_str()) {
        Some("validation-required") => annotation(VALIDATION_START),
        Some("wait-for-jobs-required") => annotation(WAIT_FOR_JOBS_START),
        _ => None,
    };
    Ok(node)
}

pub fn pod(p: &K8sPod) -> Result<Pod> {
    let name = p.metadata.name.as_deref().ok_or("pod without metadata.name")?;
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
    let labels = p.metadata.labels.as_ref();
    pod.workload = labels.and_then(workload_of_labels);
    let annotations = p.metadata.annotations.as_ref();
    pod.group = labels
        .and_then(|l| l.get(keys::KUEUE_POD_GROUP_NAME))
        .or_else(|| annotations.and_then(|a| a.get(keys::VOLCANO_GROUP_NAME)))
        .or_else(|| annotations.and_then(|a| a.get(keys::VOLCANO_GROUP_NAME_NEW)))
        .map(|g| Sym::new(g));
    pod.queue = labels.and_then(|l| l.get(keys::KUEUE_QUEUE_NAME)).map(|q| Sym::new(q));
    pod.mirror = annotations.is_some_and(|a| a.contains_key(keys::MIRROR_POD_ANNOTATION));
    pod.terminating = p.metadata.deletion_timestamp.is_some();
    pod.created = p.metadata.creation_timestamp.as_ref().map_or(0, ts);
    if pod.requests.wants_gpu() {
        pod.cuda = cuda_need(spec);
    }
    // From the start time where there is one: a kubelet never starts a pod
    // before it exists, but a replayed scenario writes the start it had.
    let mut transitioned = p.status.as_ref().and_then(|s| s.start_time.as_ref()).map_or(pod.created, ts);
    if let Some(status) = &p.status {
        pod.phase = PodPhase::parse(status.phase.as_deref().unwrap_or("Pending"));
        pod.reason = status.reason.as_deref().map(Sym::new);
        pod.message = status.message.as_deref().map(|m| m.chars().take(512).collect::<String>().into_boxed_str());
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
        for cs in status.container_statuses.iter().flatten() {
            if let Some(state) = &cs.state {
                if let Some(w) = &state.waiting
                    && pod.phase == PodPhase::Pending
                    && pod.reason.is_none()
                    && let Some(r) =
                        w.reason.as_deref().filter(|r| *r != "ContainerCreating" && *r != "PodInitializing")
                {
                    pod.reason = Some(Sym::new(r));
                    pod.message =
                        w.message.as_deref().map(|m| m.chars().take(512).collect::<String>().into_boxed_str());
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

pub fn event(e: &K8sEvent) -> Result<ClusterEvent> {
    let name = e.metadata.name.as_deref().ok_or("event without metadata.name")?;
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
        message: e.message.as_deref().unwrap_or("").into(),
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

// ---- custom resources (JSON) -------------------------------------------------

fn str_at<'a>(v: &'a Value, path: &str) -> Option<&'a str> {
    v.pointer(path).and_then(|x| x.as_str())
}

fn name_of(v: &Value) -> Result<&str> {
    str_at(v, "/metadata/name").ok_or_else(|| "object without metadata.name".to_string())
}

fn time_at(v: &Value, path: &str) -> Option<Timestamp> {
    str_at(v, path).and_then(parse_rfc3339)
}

fn conditions(v: &Value) -> Box<[Condition]> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| {
            Some(Condition {
                kind: Sym::new(c.get("type")?.as_str()?),
                status: c.get("status").and_then(|s| s.as_str()) == Some("True"),
                reason: Sym::new(c.get("reason").and_then(|s| s.as_str()).unwrap_or("")),
                message: c.get("message").and_then(|s| s.as_str()).unwrap_or("").into(),
                since: c.get("lastTransitionTime").and_then(|t| t.as_str()).and_then(parse_rfc3339).unwrap_or(0),
            })
        })
        .collect()
}

fn owner_json(v: &Value) -> Option<Owner> {
    let refs = v.pointer("/metadata/ownerReferences")?.as_array()?;
    let r = refs.iter().find(|r| r.get("controller").and_then(|c| c.as_bool()) == Some(true)).or(refs.first())?;
    Some(Owner { kind: Sym::new(r.get("kind")?.as_str()?), name: Sym::new(r.get("name")?.as_str()?) })
}

fn pod_spec_json(v: &Value) -> Result<PodSpec> {
    serde_json::from_value(v.clone()).map_err(|e| format!("pod template: {e}"))
}

/// A Kueue `v1beta2` Workload.
pub fn workload(v: &Value) -> Result<Gang> {
    let name = name_of(v)?;
    let namespace = str_at(v, "/metadata/namespace").unwrap_or("default");
    let mut pod_sets = Vec::new();
    for ps in v.pointer("/spec/podSets").and_then(|p| p.as_array()).into_iter().flatten() {
        let spec_value = ps.pointer("/template/spec").cloned().unwrap_or(Value::Null);
        let spec = if spec_value.is_null() { PodSpec::default() } else { pod_spec_json(&spec_value)? };
        pod_sets.push(PodSet {
            name: Sym::new(ps.get("name").and_then(|n| n.as_str()).unwrap_or("main")),
            count: ps.get("count").and_then(|c| c.as_u64()).unwrap_or(1) as u32,
            min_count: ps.get("minCount").and_then(|c| c.as_u64()).map(|c| c as u32),
            requests: effective_requests(&spec)?,
            node_selector: labels_from(spec.node_selector.iter().flatten().map(|(k, v)| (k.as_str(), v.as_str()))),
            tolerations: tolerations_of(spec.tolerations.as_ref())?,
        });
    }
    let min_members = pod_sets.iter().map(|p| p.min_count.unwrap_or(p.count)).sum();
    let admission = v.pointer("/status/admission").filter(|a| !a.is_null()).map(|a| Admission {
        cluster_queue: Sym::new(a.get("clusterQueue").and_then(|c| c.as_str()).unwrap_or("")),
        assignments: a
            .get("podSetAssignments")
            .and_then(|x| x.as_array())
            .into_iter()
            .flatten()
            .map(|psa| PodSetAssignment {
                name: Sym::new(psa.get("name").and_then(|n| n.as_str()).unwrap_or("main")),
                flavors: psa
                    .get("flavors")
                    .and_then(|f| f.as_object())
                    .into_iter()
                    .flatten()
                    .filter_map(|(r, f)| Some((Sym::new(r), Sym::new(f.as_str()?))))
                    .collect(),
                count: psa.get("count").and_then(|c| c.as_u64()).unwrap_or(0) as u32,
            })
            .collect(),
    });
    Ok(Gang {
        kind: GangKind::KueueWorkload,
        namespace: Sym::new(namespace),
        name: Arc::from(name),
        queue: str_at(v, "/spec/queueName").map(Sym::new),
        min_members,
        pod_sets: pod_sets.into_boxed_slice(),
        priority: v.pointer("/spec/priority").and_then(|p| p.as_i64()).unwrap_or(0) as i32,
        created: time_at(v, "/metadata/creationTimestamp").unwrap_or(0),
        active: v.pointer("/spec/active").and_then(|a| a.as_bool()).unwrap_or(true),
        conditions: conditions(v.pointer("/status/conditions").unwrap_or(&Value::Null)),
        admission,
        admission_checks: v
            .pointer("/status/admissionChecks")
            .and_then(|a| a.as_array())
            .into_iter()
            .flatten()
            .filter_map(|c| {
                Some(AdmissionCheckState {
                    name: Sym::new(c.get("name")?.as_str()?),
                    state: Sym::new(c.get("state").and_then(|s| s.as_str()).unwrap_or("Pending")),
                    message: c.get("message").and_then(|m| m.as_str()).unwrap_or("").into(),
                    since: c.get("lastTransitionTime").and_then(|t| t.as_str()).and_then(parse_rfc3339).unwrap_or(0),
                })
            })
            .collect(),
        requeue: v.pointer("/status/requeueState").filter(|r| !r.is_null()).map(|r| RequeueState {
            count: r.get("count").and_then(|c| c.as_u64()).unwrap_or(0) as u32,
            requeue_at: r.get("requeueAt").and_then(|t| t.as_str()).and_then(parse_rfc3339),
        }),
        phase: None,
        owner: owner_json(v),
        min_resources: None,
        running: 0,
    })
}

/// A Volcano `v1beta1` PodGroup.
pub fn podgroup(v: &Value) -> Result<Gang> {
    let name = name_of(v)?;
    let namespace = str_at(v, "/metadata/namespace").unwrap_or("default");
    let min_resources = match v.pointer("/spec/minResources") {
        Some(r) if !r.is_null() => Some(to_resources(&resources_json(r)?)),
        _ => None,
    };
    Ok(Gang {
        kind: GangKind::VolcanoPodGroup,
        namespace: Sym::new(namespace),
        name: Arc::from(name),
        queue: str_at(v, "/spec/queue").map(Sym::new),
        min_members: v.pointer("/spec/minMember").and_then(|m| m.as_u64()).unwrap_or(1) as u32,
        pod_sets: Box::new([]),
        priority: 0,
        created: time_at(v, "/metadata/creationTimestamp").unwrap_or(0),
        active: true,
        conditions: conditions(v.pointer("/status/conditions").unwrap_or(&Value::Null)),
        admission: None,
        admission_checks: Box::new([]),
        requeue: None,
        phase: str_at(v, "/status/phase").map(Sym::new),
        owner: owner_json(v),
        min_resources,
        running: v.pointer("/status/running").and_then(|r| r.as_u64()).unwrap_or(0) as u32,
    })
}

fn count(v: &Value, path: &str) -> u32 {
    v.pointer(path).and_then(|c| c.as_u64()).unwrap_or(0) as u32
}

/// Flavor usage blocks (`flavorsUsage`, `flavorsReservation`): (flavor, resource) → (total, borrowed).
fn usage(v: &Value, path: &str) -> Result<BTreeMap<(String, String), (u64, u64)>> {
    let mut out = BTreeMap::new();
    for f in v.pointer(path).and_then(|x| x.as_array()).into_iter().flatten() {
        let flavor = f.get("name").and_then(|n| n.as_str()).unwrap_or("").to_string();
        for r in f.get("resources").and_then(|x| x.as_array()).into_iter().flatten() {
            let Some(res) = r.get("name").and_then(|n| n.as_str()) else { continue };
            let q = |k: &str| -> Result<u64> {
                match r.get(k) {
                    Some(Value::String(s)) => quantity::parse(res, s).map_err(|e| e.to_string()),
                    Some(Value::Number(n)) => quantity::parse(res, &n.to_string()).map_err(|e| e.to_string()),
                    _ => Ok(0),
                }
            };
            out.insert((flavor.clone(), res.to_string()), (q("total")?, q("borrowed")?));
        }
    }
    Ok(out)
}

/// A Kueue ClusterQueue (`cohortName` in v1beta2, `cohort` before).
pub fn cluster_queue(v: &Value) -> Result<Queue> {
    let name = name_of(v)?;
    let used = usage(v, "/status/flavorsUsage")?;
    let reserved = usage(v, "/status/flavorsReservation")?;
    let mut quotas = Vec::new();
    let mut order = Vec::new();
    for rg in v.pointer("/spec/resourceGroups").and_then(|x| x.as_array()).into_iter().flatten() {
        for f in rg.get("flavors").and_then(|x| x.as_array()).into_iter().flatten() {
            let flavor = f.get("name").and_then(|n| n.as_str()).ok_or("flavor without a name")?;
            order.push(Sym::new(flavor));
            for r in f.get("resources").and_then(|x| x.as_array()).into_iter().flatten() {
                let res = r.get("name").and_then(|n| n.as_str()).ok_or("resource without a name")?;
                let q = |k: &str| -> Result<Option<u64>> {
                    match r.get(k) {
                        Some(Value::String(s)) => quantity::parse(res, s).map(Some).map_err(|e| format!("{k}: {e}")),
                        Some(Value::Number(n)) => {
                            quantity::parse(res, &n.to_string()).map(Some).map_err(|e| format!("{k}: {e}"))
                        }
                        _ => Ok(None),
                    }
                };
                let key = (flavor.to_string(), res.to_string());
                let (total, borrowed) = used.get(&key).copied().unwrap_or((0, 0));
                quotas.push(QueueQuota {
                    flavor: Some(Sym::new(flavor)),
                    resource: Sym::new(res),
                    nominal: q("nominalQuota")?.unwrap_or(0),
                    borrowing_limit: q("borrowingLimit")?,
                    lending_limit: q("lendingLimit")?,
                    used: total,
                    reserved: reserved.get(&key).map_or(total, |r| r.0),
                    borrowed,
                });
            }
        }
    }
    Ok(Queue {
        kind: QueueKind::ClusterQueue,
        namespace: None,
        name: Sym::new(name),
        cohort: str_at(v, "/spec/cohortName").or_else(|| str_at(v, "/spec/cohort")).map(Sym::new),
        cluster_queue: None,
        quotas: quotas.into_boxed_slice(),
        pending: count(v, "/status/pendingWorkloads"),
        reserving: count(v, "/status/reservingWorkloads"),
        admitted: count(v, "/status/admittedWorkloads"),
        conditions: conditions(v.pointer("/status/conditions").unwrap_or(&Value::Null)),
        stop_policy: str_at(v, "/spec/stopPolicy").map(Sym::new),
        state: None,
        flavor_order: order.into_boxed_slice(),
    })
}

pub fn local_queue(v: &Value) -> Result<Queue> {
    let name = name_of(v)?;
    Ok(Queue {
        kind: QueueKind::LocalQueue,
        namespace: Some(Sym::new(str_at(v, "/metadata/namespace").unwrap_or("default"))),
        name: Sym::new(name),
        cohort: None,
        cluster_queue: str_at(v, "/spec/clusterQueue").map(Sym::new),
        quotas: Box::new([]),
        pending: count(v, "/status/pendingWorkloads"),
        reserving: count(v, "/status/reservingWorkloads"),
        admitted: count(v, "/status/admittedWorkloads"),
        conditions: conditions(v.pointer("/status/conditions").unwrap_or(&Value::Null)),
        stop_policy: str_at(v, "/spec/stopPolicy").map(Sym::new),
        state: None,
        flavor_order: Box::new([]),
    })
}

/// A Volcano Queue: `capability` as the nominal quota, `allocated` as used.
pub fn volcano_queue(v: &Value) -> Result<Queue> {
    let name = name_of(v)?;
    let capability = resources_json(v.pointer("/spec/capability").unwrap_or(&Value::Null))?;
    let allocated: BTreeMap<String, u64> =
        resources_json(v.pointer("/status/allocated").unwrap_or(&Value::Null))?.into_iter().collect();
    let quotas = capability
        .iter()
        .map(|(r, n)| QueueQuota {
            flavor: None,
            resource: Sym::new(r),
            nominal: *n,
            borrowing_limit: None,
            lending_limit: None,
            used: allocated.get(r).copied().unwrap_or(0),
            reserved: allocated.get(r).copied().unwrap_or(0),
            borrowed: 0,
        })
        .collect();
    Ok(Queue {
        kind: QueueKind::VolcanoQueue,
        namespace: None,
        name: Sym::new(name),
        cohort: None,
        cluster_queue: None,
        quotas,
        pending: count(v, "/status/pending"),
        reserving: count(v, "/status/inqueue"),
        admitted: count(v, "/status/running"),
        conditions: Box::new([]),
        stop_policy: None,
        state: str_at(v, "/status/state").map(Sym::new),
        flavor_order: Box::new([]),
    })
}

pub fn resource_flavor(v: &Value) -> Result<Flavor> {
    let name = name_of(v)?;
    let tolerations: Option<Vec<k8s_openapi::api::core::v1::Toleration>> = match v.pointer("/spec/tolerations") {
        Some(t) if !t.is_null() => Some(serde_json::from_value(t.clone()).map_err(|e| format!("tolerations: {e}"))?),
        _ => None,
    };
    let taints: Vec<Taint> = v
        .pointer("/spec/nodeTaints")
        .and_then(|t| t.as_array())
        .into_iter()
        .flatten()
        .map(|t| {
            Ok(Taint::new(
                t.get("key").and_then(|k| k.as_str()).unwrap_or(""),
                t.get("value").and_then(|k| k.as_str()).unwrap_or(""),
                taint_effect(t.get("effect").and_then(|k| k.as_str()).unwrap_or(""))?,
            ))
        })
        .collect::<Result<_>>()?;
    Ok(Flavor {
        name: Sym::new(name),
        node_labels: labels_from(
            v.pointer("/spec/nodeLabels")
                .and_then(|l| l.as_object())
                .into_iter()
                .flatten()
                .filter_map(|(k, v)| Some((k.as_str(), v.as_str()?))),
        ),
        node_taints: taints.into_boxed_slice(),
        tolerations: tolerations_of(tolerations.as_ref())?,
    })
}
