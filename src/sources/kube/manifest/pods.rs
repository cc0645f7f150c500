//! A scenario's pods and the controllers behind them (Jobs, ReplicaSets,
//! StatefulSets), so the scenario lives on a cluster that runs controllers:
//! an evicted pod is recreated and scheduled again, a Job's pods finish when
//! the simulation says they would (KWOK's pod-complete stage reads the time
//! from an annotation). Pods whose owner kgpu cannot create stay bare.
//!
//! The pods are created first and their controllers adopt them (they match
//! the selector and have no owner): a controller created first would start
//! pods of its own before kgpu's arrived.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde_json::{Map, Value, json};

use crate::analysis::index::Index;
use crate::model::time::rfc3339;
use crate::model::{ClaimSource, GangKind, Owner, Pod, PodKey, PodPhase, Resources, Sym, Timestamp, keys, quantity};
use crate::sources::kinds;

use super::{affinity_json, labels_json, meta, toleration_json};

/// The Job controller counts a pod's end only while this finalizer holds it;
/// pods created for a Job by hand must carry it like the controller's own.
pub const JOB_TRACKING_FINALIZER: &str = "batch.kubernetes.io/job-tracking";
/// When KWOK's pod-complete stage finishes a Job's pod: a duration after it
/// started, or an RFC 3339 time.
pub const COMPLETE_AFTER: &str = "pod-complete.stage.kwok.x-k8s.io/delay";
/// What the lab's fake kubelet (KWOK) does with a pod it did not start:
/// `started` — the scenario wrote it running, with its start time: do not
/// start it again (it still finishes); `hold` — leave its status as written
/// (a container that cannot start stays so).
pub const KUBELET: &str = "kgpu.dev/kubelet";

/// What the simulation knows beyond the objects: when pods finish and which
/// nodes reject GPU pods.
#[derive(Clone, Debug, Default)]
pub struct Life {
    /// When a running pod's work ends; absent: it runs until deleted.
    pub finishes: HashMap<PodKey, Timestamp>,
    /// How long a controller's new pod works, by (namespace, owner name).
    pub runtimes: HashMap<(Sym, Sym), i64>,
    /// Nodes whose device plugin fails every GPU allocation.
    pub black_holes: Vec<Sym>,
}

/// The controller kinds kgpu creates, with their API versions.
fn controller_api_version(kind: &str) -> Option<&'static str> {
    match kind {
        "Job" => Some("batch/v1"),
        "ReplicaSet" | "StatefulSet" => Some("apps/v1"),
        _ => None,
    }
}

/// The labels that tie a pod to its controller's selector.
fn selector_labels(owner: &Owner) -> Vec<(String, String)> {
    match owner.kind.as_str() {
        "Job" => vec![
            ("batch.kubernetes.io/job-name".into(), owner.name.to_string()),
            ("job-name".into(), owner.name.to_string()),
        ],
        _ => vec![("app".into(), owner.name.to_string())],
    }
}

pub(super) fn container(requests: &Resources, image: &str, env: Vec<Value>) -> Value {
    let mut req_map = Map::new();
    let mut lim_map = Map::new();
    for (name, amount) in requests.iter() {
        if name == "pods" {
            continue;
        }
        let q = Value::String(quantity::format(name, amount));
        if keys::is_gpu_resource(name) || name.contains('/') {
            // Extended resources are requested through limits.
            lim_map.insert(name.to_string(), q);
        } else {
            req_map.insert(name.to_string(), q);
        }
    }
    let mut c = json!({"name": "main", "image": image, "resources": {"requests": Value::Object(req_map), "limits": Value::Object(lim_map)}});
    if !env.is_empty() {
        c["env"] = Value::Array(env);
    }
    c
}

fn image_of(p: &Pod) -> String {
    p.cuda.and_then(|c| c.image.clone()).map_or_else(|| "registry.k8s.io/pause:3.10".to_string(), |i| i.to_string())
}

/// The pod's spec without its node: what a controller's template holds.
fn pod_spec(p: &Pod) -> Value {
    let mut env = Vec::new();
    if let Some(c) = &p.cuda {
        if let Some(r) = c.require_cuda.clone() {
            env.push(json!({"name": "NVIDIA_REQUIRE_CUDA", "value": r.as_str()}));
        }
        if let Some(v) = c.cuda_version.clone() {
            env.push(json!({"name": "CUDA_VERSION", "value": v.as_str()}));
        }
    }
    // Resources a claim serves through DRA are asked as the pod asked them:
    // the scheduler makes that claim again.
    let mut requests = p.requests.clone();
    let mut claims: Vec<&crate::model::PodClaim> = Vec::new();
    for c in p.claims.iter() {
        match &c.source {
            ClaimSource::ExtendedResources(served) => requests = requests.plus(served),
            _ => claims.push(c),
        }
    }
    let mut spec = json!({
        "containers": [container(&requests, &image_of(p), env)],
        "terminationGracePeriodSeconds": 0,
    });
    if p.owner.as_ref().is_some_and(|o| o.kind.as_str() == "Job") {
        spec["restartPolicy"] = json!("Never");
    }
    if !p.tolerations.is_empty() {
        spec["tolerations"] = Value::Array(p.tolerations.iter().map(toleration_json).collect());
    }
    if !p.node_selector.is_empty() {
        spec["nodeSelector"] = labels_json(p.node_selector.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    }
    if !p.affinity.is_empty() {
        spec["affinity"] = affinity_json(&p.affinity);
    }
    if let Some(s) = p.scheduler.clone() {
        spec["schedulerName"] = json!(s.as_str());
    }
    if p.priority != 0 {
        spec["priorityClassName"] = json!(priority_class_name(p));
    }
    if !claims.is_empty() {
        spec["resourceClaims"] = Value::Array(
            claims
                .iter()
                .filter_map(|c| match &c.source {
                    ClaimSource::Claim(n) => Some(json!({"name": c.name.as_str(), "resourceClaimName": &**n})),
                    ClaimSource::Template(t) => {
                        Some(json!({"name": c.name.as_str(), "resourceClaimTemplateName": &**t}))
                    }
                    ClaimSource::ExtendedResources(_) => None,
                })
                .collect(),
        );
        spec["containers"][0]["resources"]["claims"] =
            Value::Array(claims.iter().map(|c| json!({"name": c.name.as_str()})).collect());
    }
    spec
}

/// A PriorityClass per priority (and preemption policy) the pods use: the
/// API server sets a pod's priority from its class only.
fn priority_class_name(p: &Pod) -> String {
    format!("kgpu-priority-{}{}", p.priority, if p.preempt_never { "-nonpreempting" } else { "" })
}

pub(super) fn priority_classes<'a>(pods: impl Iterator<Item = &'a Pod>, scenario: &str) -> Vec<Value> {
    let classes: BTreeSet<(i32, bool)> =
        pods.filter(|p| p.priority != 0).map(|p| (p.priority, p.preempt_never)).collect();
    classes
        .into_iter()
        .map(|(value, never)| {
            let probe = Pod { priority: value, preempt_never: never, ..Pod::new("", "") };
            json!({
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": meta(&priority_class_name(&probe), None, scenario, Vec::new(), Vec::new()),
                "value": value,
                "preemptionPolicy": if never { "Never" } else { "PreemptLowerPriority" },
                "globalDefault": false,
            })
        })
        .collect()
}

/// `key: value` pairs of labels or annotations, in order.
type Pairs = Vec<(String, String)>;

/// Labels and annotations a pod shares with its siblings (gang, queue, owner).
fn shared_meta(p: &Pod, index: &Index<'_>) -> (Pairs, Pairs) {
    let mut labels = p.owner.as_ref().map(selector_labels).unwrap_or_default();
    let mut annotations = Vec::new();
    if let Some(q) = p.queue.clone() {
        labels.push((keys::KUEUE_QUEUE_NAME.to_string(), q.to_string()));
    }
    if let Some(g) = index.gang_of(&p.key()) {
        match g.kind {
            GangKind::KueueWorkload => {
                labels.push((keys::KUEUE_POD_GROUP_NAME.to_string(), g.name.to_string()));
                if let Some(gang) = index.snap.gangs.get(g) {
                    annotations.push((keys::KUEUE_POD_GROUP_TOTAL.to_string(), gang.total_pods().to_string()));
                }
            }
            GangKind::VolcanoPodGroup => annotations.push((keys::VOLCANO_GROUP_NAME.to_string(), g.name.to_string())),
        }
    }
    (labels, annotations)
}

/// The status a kubelet would have written for a bound pod: running with
/// its conditions, failed with a reason, or a container that cannot start.
fn bound_status(p: &Pod) -> Value {
    let image = image_of(p);
    let mut status = json!({"phase": p.phase.as_str(), "startTime": rfc3339(p.transitioned)});
    match (p.phase, p.reason.clone()) {
        (PodPhase::Pending, Some(r)) => {
            status["containerStatuses"] = json!([{
                "name": "main", "image": image, "imageID": "", "ready": false, "restartCount": 3,
                "state": {"waiting": {"reason": r.as_str(), "message": p.message.as_deref().unwrap_or("")}},
            }]);
        }
        (_, Some(r)) => {
            status["reason"] = json!(r.as_str());
            status["message"] = json!(p.message.as_deref().unwrap_or(""));
        }
        (PodPhase::Running, None) => {
            let at = rfc3339(p.transitioned);
            status["conditions"] = json!(
                ["PodScheduled", "Initialized", "ContainersReady", "Ready"]
                    .iter()
                    .map(|t| json!({"type": t, "status": "True", "lastTransitionTime": at}))
                    .collect::<Vec<_>>()
            );
            status["containerStatuses"] = json!([{
                "name": "main", "image": image, "imageID": "", "ready": true, "started": true, "restartCount": 0,
                "state": {"running": {"startedAt": at}},
            }]);
        }
        _ => {}
    }
    status
}

pub(super) fn pod_json(p: &Pod, index: &Index<'_>, life: &Life, scenario: &str) -> Option<Value> {
    if p.phase == PodPhase::Succeeded {
        return None;
    }
    let (mut labels, mut annotations) = shared_meta(p, index);
    if let Some(o) = p.owner.as_ref().filter(|o| o.kind.as_str() == "StatefulSet") {
        // The StatefulSet controller checks each pod's identity.
        labels.push(("statefulset.kubernetes.io/pod-name".into(), p.name.to_string()));
        if let Some(ordinal) = p.name.strip_prefix(&format!("{}-", o.name)) {
            labels.push(("apps.kubernetes.io/pod-index".into(), ordinal.to_string()));
        }
    }
    if let Some(t) = life.finishes.get(&p.key()) {
        annotations.push((COMPLETE_AFTER.into(), rfc3339(*t)));
    }
    if let Some(r) = &p.resume {
        if let Some(t) = r.last_checkpoint {
            annotations.push((keys::LAST_CHECKPOINT.into(), rfc3339(t)));
        }
        if let Some(s) = r.restart_seconds {
            annotations.push((keys::RESTART_SECONDS.into(), s.to_string()));
        }
        if let Some(s) = r.checkpoint_interval_seconds {
            annotations.push((keys::CHECKPOINT_INTERVAL.into(), s.to_string()));
        }
    }
    match (p.node.clone(), p.phase, p.reason.clone()) {
        // KWOK renders a stage from the pod as it was created (Pending): a
        // pod written as failed would be started anyway, over its status.
        (Some(_), PodPhase::Pending, Some(_)) | (Some(_), PodPhase::Failed, _) => {
            annotations.push((KUBELET.into(), "hold".into()))
        }
        // A DRA pod is scheduled afresh, and then started as any new pod.
        (Some(_), PodPhase::Running, _) if p.claims.is_empty() => annotations.push((KUBELET.into(), "started".into())),
        _ => {}
    }
    let mut metadata = meta(&p.name, Some(p.namespace.as_str()), scenario, labels, annotations);
    let mut spec = pod_spec(p);
    // No ownerReferences: a reference needs the owner's uid, and a controller
    // that existed first would start pods of its own at once. The pods come
    // first, matching their controller's selector, and the controller adopts them.
    match p.owner.as_ref().map(|o| (o.kind.as_str(), o)) {
        Some(("Job", _)) if !p.phase.is_terminal() => {
            metadata["finalizers"] = json!([JOB_TRACKING_FINALIZER]);
        }
        Some(("StatefulSet", o)) => {
            spec["hostname"] = json!(&*p.name);
            spec["subdomain"] = json!(o.name.as_str());
        }
        _ => {}
    }
    // A pod with DRA claims is left to the scheduler, bound or not: only it
    // allocates the claims the controller makes from the templates.
    let bound = p.node.as_ref().filter(|_| p.claims.is_empty());
    if let Some(n) = &bound {
        spec["nodeName"] = json!(n.as_str());
    }
    let mut obj =
        json!({"apiVersion": kinds::POD.api_version(), "kind": kinds::POD.kind, "metadata": metadata, "spec": spec});
    // Bound pods report what their kubelet would; unbound ones are left to the scheduler.
    if bound.is_some() {
        obj["status"] = bound_status(p);
    }
    Some(obj)
}

/// The controllers of the exported pods, one object per owner, created
/// after their pods (which they adopt). Replicas count the pods that have
/// not finished.
pub(super) fn controllers_json(snap_pods: &[&Pod], index: &Index<'_>, life: &Life, scenario: &str) -> Vec<Value> {
    let mut by_owner: BTreeMap<(Sym, Sym, Sym), Vec<&Pod>> = BTreeMap::new();
    for p in snap_pods.iter().filter(|p| p.phase != PodPhase::Succeeded) {
        if let Some(o) = p.owner.as_ref().filter(|o| controller_api_version(o.kind.as_str()).is_some()) {
            by_owner.entry((p.namespace.clone(), o.kind.clone(), o.name.clone())).or_default().push(p);
        }
    }
    by_owner
        .into_iter()
        .filter_map(|((ns, kind, name), pods)| {
            let owner = Owner { kind: kind.clone(), name: name.clone() };
            let active: Vec<&Pod> = pods.iter().copied().filter(|p| !p.phase.is_terminal()).collect();
            // The newest pod shows what the controller creates now.
            let model: &Pod =
                active.iter().copied().max_by_key(|p| (p.created, p.name.clone())).or(pods.first().copied())?;
            let (mut labels, mut annotations) = shared_meta(model, index);
            if let Some(seconds) = life.runtimes.get(&(ns.clone(), name.clone())) {
                annotations.push((COMPLETE_AFTER.into(), format!("{seconds}s")));
            }
            labels.push((super::SCENARIO_LABEL.into(), scenario.into()));
            let mut template = json!({"metadata": {"labels": labels_json(labels)}, "spec": pod_spec(model)});
            if !annotations.is_empty() {
                template["metadata"]["annotations"] = labels_json(annotations);
            }
            let selector = json!({"matchLabels": labels_json(selector_labels(&owner))});
            let replicas = active.len().max(1);
            let spec = match kind.as_str() {
                "Job" => json!({
                    "parallelism": replicas, "completions": replicas,
                    // Evictions and failed admissions are retried, as the demo's controllers do.
                    "backoffLimit": 1000,
                    "manualSelector": true, "selector": selector, "template": template,
                }),
                "ReplicaSet" => json!({"replicas": replicas, "selector": selector, "template": template}),
                _ => json!({
                    "replicas": pods.len().max(1), "serviceName": name.as_str(), "podManagementPolicy": "Parallel",
                    // Pods made by hand carry no revision hash: never roll them.
                    "updateStrategy": {"type": "OnDelete"},
                    "selector": selector, "template": template,
                }),
            };
            Some(json!({
                "apiVersion": controller_api_version(kind.as_str())?,
                "kind": kind.as_str(),
                "metadata": meta(name.as_str(), Some(ns.as_str()), scenario, Vec::new(), Vec::new()),
                "spec": spec,
            }))
        })
        .collect()
}

/// KWOK stages that give faulty nodes their behaviour on the lab (skipped
/// where KWOK's Stage CRD is not installed).
pub(super) fn fault_stages(life: &Life, scenario: &str) -> Vec<Value> {
    life.black_holes
        .iter()
        .map(|node| {
            json!({
                "apiVersion": "kwok.x-k8s.io/v1alpha1",
                "kind": "Stage",
                "metadata": meta(&format!("kgpu-black-hole-{node}"), None, scenario, Vec::new(), Vec::new()),
                "spec": {
                    "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
                    "selector": {"matchExpressions": [
                        {"key": ".spec.nodeName", "operator": "In", "values": [node.as_str()]},
                        {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"},
                        {"key": format!(".metadata.annotations[\"{KUBELET}\"]"), "operator": "DoesNotExist"},
                        // Running too: a pod that came before KWOK had read this Stage (a
                        // scenario applied in one burst) was started by the ordinary
                        // stage; refusing it now keeps the loop the story tells going.
                        // The scenario's own running pods carry the kubelet annotation.
                        {"key": ".status.phase", "operator": "In", "values": ["Pending", "Running"]},
                        {"key": format!(".spec.containers.[].resources.limits[\"{}\"]", keys::RESOURCE_GPU), "operator": "Exists"},
                    ]},
                    // Outweighs the ordinary pod-ready stage (weight 1): KWOK picks by weight.
                    "weight": 1_000_000,
                    // A real kubelet refuses at once and the ReplicaSet replaces the pod at
                    // once (thousands an hour); slower here, so a lab left running stays small.
                    "delay": {"durationMilliseconds": 15000},
                    "next": {
                        "event": {"type": "Warning", "reason": "UnexpectedAdmissionError",
                                  "message": "Allocate failed due to requested number of devices unavailable for nvidia.com/gpu, which is unexpected"},
                        "statusTemplate": "phase: Failed\nreason: UnexpectedAdmissionError\nmessage: 'Pod was rejected: Allocate failed due to requested number of devices unavailable for nvidia.com/gpu, which is unexpected'\n",
                    },
                },
            })
        })
        .collect()
}
