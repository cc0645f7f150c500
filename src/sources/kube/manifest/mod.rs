//! Model → Kubernetes objects: the demo scenarios as manifests any cluster
//! accepts (`kgpu scenario export|apply`). Times are written relative to
//! the demo's epoch; `shift_times` moves them to "now" when applying.
//! `pods` adds the controllers behind the pods, so a cluster that runs
//! controllers and KWOK (`kgpu lab`) lives the scenario.

mod dra;
mod pods;

use pods::container;

pub use pods::{COMPLETE_AFTER, JOB_TRACKING_FINALIZER, KUBELET, Life};

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use crate::analysis::index::Index;
use crate::model::keys::{DRIVER_UPGRADE_VALIDATION_START, DRIVER_UPGRADE_WAIT_FOR_JOBS_START};
use crate::model::time::{parse_rfc3339, rfc3339};
use crate::model::{
    Condition, Gang, GangKind, Node, NodeSelectorTerm, PodPhase, Queue, QueueKind, Resources, SelectorOperator,
    Snapshot, Taint, Toleration, TolerationOperator, keys, quantity,
};
use crate::sources::kinds;

/// Every object carries it, so `kgpu scenario delete` finds them all.
pub const SCENARIO_LABEL: &str = "kgpu.dev/scenario";
/// KWOK keeps nodes with this annotation (`fake`) Ready: the lab's GPU nodes,
/// or a kind cluster's with KWOK installed. NotReady nodes go without it.
pub const KWOK_ANNOTATION: &str = "kwok.x-k8s.io/node";

fn quantities(r: &Resources) -> Value {
    let mut m = Map::new();
    for (name, amount) in r.iter() {
        m.insert(name.to_string(), Value::String(quantity::format(name, amount)));
    }
    Value::Object(m)
}

fn labels_json(pairs: impl IntoIterator<Item = (String, String)>) -> Value {
    Value::Object(pairs.into_iter().map(|(k, v)| (k, Value::String(v))).collect())
}

fn taint_json(t: &Taint) -> Value {
    let mut m = json!({"key": t.key.as_str(), "effect": t.effect.as_str()});
    if !t.value.as_str().is_empty() {
        m["value"] = json!(t.value.as_str());
    }
    m
}

fn toleration_json(t: &Toleration) -> Value {
    let mut m = Map::new();
    if let Some(k) = t.key.clone() {
        m.insert("key".into(), json!(k.as_str()));
    }
    m.insert(
        "operator".into(),
        json!(match t.operator {
            TolerationOperator::Exists => "Exists",
            TolerationOperator::Equal => "Equal",
        }),
    );
    if t.operator == TolerationOperator::Equal {
        m.insert("value".into(), json!(t.value.as_str()));
    }
    if let Some(e) = t.effect {
        m.insert("effect".into(), json!(e.as_str()));
    }
    Value::Object(m)
}

fn affinity_json(terms: &[NodeSelectorTerm]) -> Value {
    let op = |o: SelectorOperator| match o {
        SelectorOperator::In => "In",
        SelectorOperator::NotIn => "NotIn",
        SelectorOperator::Exists => "Exists",
        SelectorOperator::DoesNotExist => "DoesNotExist",
        SelectorOperator::Gt => "Gt",
        SelectorOperator::Lt => "Lt",
    };
    let terms: Vec<Value> = terms
        .iter()
        .map(|t| {
            json!({"matchExpressions": t.expressions.iter().map(|r| json!({
                "key": r.key.as_str(), "operator": op(r.operator), "values": r.values.iter().map(|v| v.as_str()).collect::<Vec<_>>()
            })).collect::<Vec<_>>()})
        })
        .collect();
    json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}})
}

fn condition_json(c: &Condition) -> Value {
    json!({
        "type": c.kind.as_str(),
        "status": if c.status { "True" } else { "False" },
        "reason": c.reason.as_str(),
        "message": &*c.message,
        "lastTransitionTime": rfc3339(c.since),
    })
}

fn meta(
    name: &str,
    namespace: Option<&str>,
    scenario: &str,
    labels: Vec<(String, String)>,
    annotations: Vec<(String, String)>,
) -> Value {
    let mut labels = labels;
    labels.push((SCENARIO_LABEL.into(), scenario.into()));
    let mut m = json!({"name": name, "labels": labels_json(labels)});
    if let Some(ns) = namespace {
        m["namespace"] = json!(ns);
    }
    if !annotations.is_empty() {
        m["annotations"] = labels_json(annotations);
    }
    m
}

fn node_json(n: &Node, scenario: &str) -> Value {
    // A NotReady node's kubelet is gone: KWOK must not heartbeat for it.
    let mut annotations = Vec::new();
    if n.is_ready() {
        annotations.push((KWOK_ANNOTATION.to_string(), "fake".to_string()));
    }
    if let (Some(state), Some(since)) = (n.operator.upgrade_state.clone(), n.operator.upgrade_since) {
        match state.as_str() {
            "validation-required" => annotations.push((DRIVER_UPGRADE_VALIDATION_START.into(), since.to_string())),
            "wait-for-jobs-required" => {
                annotations.push((DRIVER_UPGRADE_WAIT_FOR_JOBS_START.into(), since.to_string()))
            }
            _ => {}
        }
    }
    let labels: Vec<(String, String)> = n.labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let mut spec = json!({"taints": n.taints.iter().map(taint_json).collect::<Vec<_>>()});
    if n.unschedulable {
        spec["unschedulable"] = json!(true);
    }
    let ready = n.is_ready();
    json!({
        "apiVersion": kinds::NODE.api_version(),
        "kind": kinds::NODE.kind,
        "metadata": meta(n.name.as_str(), None, scenario, labels, annotations),
        "spec": spec,
        "status": {
            "capacity": quantities(&n.capacity),
            "allocatable": quantities(&n.allocatable),
            "conditions": [{
                "type": "Ready",
                "status": if ready { "True" } else { "False" },
                "reason": if ready { "KubeletReady" } else { "KubeletNotReady" },
                "message": if ready { "kubelet is posting ready status" } else { "container runtime network not ready" },
            }],
        },
    })
}

fn workload_json(g: &Gang, scenario: &str) -> Value {
    let pod_sets: Vec<Value> = g
        .pod_sets
        .iter()
        .map(|ps| {
            let mut spec = json!({"containers": [container(&ps.requests, "registry.k8s.io/pause:3.10", Vec::new())]});
            if !ps.tolerations.is_empty() {
                spec["tolerations"] = Value::Array(ps.tolerations.iter().map(toleration_json).collect());
            }
            if !ps.node_selector.is_empty() {
                spec["nodeSelector"] =
                    labels_json(ps.node_selector.iter().map(|(k, v)| (k.to_string(), v.to_string())));
            }
            let mut v = json!({"name": ps.name.as_str(), "count": ps.count, "template": {"spec": spec}});
            if let Some(m) = ps.min_count {
                v["minCount"] = json!(m);
            }
            v
        })
        .collect();
    let mut spec = json!({"active": g.active, "podSets": pod_sets, "priority": g.priority});
    if let Some(q) = g.queue.clone() {
        spec["queueName"] = json!(q.as_str());
    }
    let mut status = json!({"conditions": g.conditions.iter().map(condition_json).collect::<Vec<_>>()});
    if let Some(a) = &g.admission {
        let total = g.total_requests();
        status["admission"] = json!({
            "clusterQueue": a.cluster_queue.as_str(),
            "podSetAssignments": a.assignments.iter().map(|x| json!({
                "name": x.name.as_str(),
                "count": x.count,
                "flavors": labels_json(x.flavors.iter().map(|(r, f)| (r.to_string(), f.to_string()))),
                "resourceUsage": quantities(&total),
            })).collect::<Vec<_>>(),
        });
    }
    json!({
        "apiVersion": kinds::WORKLOAD.api_version(),
        "kind": kinds::WORKLOAD.kind,
        "metadata": meta(&g.name, Some(g.namespace.as_str()), scenario, Vec::new(), Vec::new()),
        "spec": spec,
        "status": status,
    })
}

fn podgroup_json(g: &Gang, scenario: &str) -> Value {
    let mut spec = json!({"minMember": g.min_members});
    if let Some(q) = g.queue.clone() {
        spec["queue"] = json!(q.as_str());
    }
    if let Some(r) = &g.min_resources {
        spec["minResources"] = quantities(r);
    }
    json!({
        "apiVersion": kinds::POD_GROUP.api_version(),
        "kind": kinds::POD_GROUP.kind,
        "metadata": meta(&g.name, Some(g.namespace.as_str()), scenario, Vec::new(), Vec::new()),
        "spec": spec,
        "status": {
            "phase": g.phase.as_ref().map_or("Pending", |p| p.as_str()),
            "running": g.running,
            "conditions": g.conditions.iter().map(|c| {
                let mut v = condition_json(c);
                v["transitionID"] = json!(format!("{}-{}", g.name, c.since));
                v
            }).collect::<Vec<_>>(),
        },
    })
}

fn queue_json(q: &Queue, scenario: &str) -> Value {
    match q.kind {
        QueueKind::ClusterQueue => {
            let resources: Vec<String> =
                q.quotas.iter().map(|x| x.resource.to_string()).collect::<BTreeSet<_>>().into_iter().collect();
            let flavors: Vec<Value> = q
                .flavor_order
                .iter()
                .map(|f| {
                    json!({"name": f.as_str(), "resources": q.quotas.iter().filter(|x| x.flavor.as_ref() == Some(f)).map(|x| {
                        let mut r = json!({"name": x.resource.as_str(), "nominalQuota": quantity::format(x.resource.as_str(), x.nominal)});
                        if let Some(b) = x.borrowing_limit { r["borrowingLimit"] = json!(quantity::format(x.resource.as_str(), b)); }
                        if let Some(l) = x.lending_limit { r["lendingLimit"] = json!(quantity::format(x.resource.as_str(), l)); }
                        r
                    }).collect::<Vec<_>>()})
                })
                .collect();
            let usage: Vec<Value> = q
                .flavor_order
                .iter()
                .map(|f| {
                    json!({"name": f.as_str(), "resources": q.quotas.iter().filter(|x| x.flavor.as_ref() == Some(f)).map(|x| json!({
                        "name": x.resource.as_str(),
                        "total": quantity::format(x.resource.as_str(), x.used),
                        "borrowed": quantity::format(x.resource.as_str(), x.borrowed),
                    })).collect::<Vec<_>>()})
                })
                .collect();
            let mut spec = json!({
                "namespaceSelector": {},
                "queueingStrategy": "BestEffortFIFO",
                "resourceGroups": [{"coveredResources": resources, "flavors": flavors}],
            });
            if let Some(c) = q.cohort.clone() {
                spec["cohortName"] = json!(c.as_str());
            }
            if let Some(w) = q.fair_weight_milli {
                spec["fairSharing"] = json!({"weight": quantity::format("cpu", w)});
            }
            if let Some(r) = q.reclaim_within_cohort.clone() {
                spec["preemption"] = json!({"reclaimWithinCohort": r.as_str()});
            }
            json!({
                "apiVersion": kinds::CLUSTER_QUEUE.api_version(),
                "kind": kinds::CLUSTER_QUEUE.kind,
                "metadata": meta(q.name.as_str(), None, scenario, Vec::new(), Vec::new()),
                "spec": spec,
                "status": {
                    "conditions": q.conditions.iter().map(condition_json).collect::<Vec<_>>(),
                    "flavorsUsage": usage.clone(),
                    "flavorsReservation": usage,
                    "pendingWorkloads": q.pending,
                    "reservingWorkloads": q.reserving,
                    "admittedWorkloads": q.admitted,
                },
            })
        }
        QueueKind::LocalQueue => json!({
            "apiVersion": kinds::LOCAL_QUEUE.api_version(),
            "kind": kinds::LOCAL_QUEUE.kind,
            "metadata": meta(q.name.as_str(), q.namespace.as_ref().map(|n| n.as_str()), scenario, Vec::new(), Vec::new()),
            "spec": {"clusterQueue": q.cluster_queue.as_ref().map_or("", |c| c.as_str())},
            "status": {"pendingWorkloads": q.pending, "reservingWorkloads": q.reserving, "admittedWorkloads": q.admitted},
        }),
        QueueKind::VolcanoQueue => {
            let capability = Value::Object(
                q.quotas
                    .iter()
                    .map(|x| (x.resource.to_string(), Value::String(quantity::format(x.resource.as_str(), x.nominal))))
                    .collect(),
            );
            let allocated = Value::Object(
                q.quotas
                    .iter()
                    .map(|x| (x.resource.to_string(), Value::String(quantity::format(x.resource.as_str(), x.used))))
                    .collect(),
            );
            json!({
                "apiVersion": kinds::VOLCANO_QUEUE.api_version(),
                "kind": kinds::VOLCANO_QUEUE.kind,
                "metadata": meta(q.name.as_str(), None, scenario, Vec::new(), Vec::new()),
                "spec": {"weight": 1, "reclaimable": true, "capability": capability},
                "status": {"state": q.state.as_ref().map_or("Open", |s| s.as_str()), "allocated": allocated, "pending": q.pending, "running": q.admitted},
            })
        }
    }
}

/// The objects of a snapshot, in the order they must be created.
pub fn manifests(snap: &Snapshot, life: &Life, scenario: &str) -> Vec<Value> {
    let index = Index::build(snap, snap.clock);
    let mut namespaces = BTreeSet::new();
    for p in snap.pods.values() {
        if p.phase != PodPhase::Succeeded {
            namespaces.insert(p.namespace.to_string());
        }
    }
    for g in snap.gangs.values() {
        namespaces.insert(g.namespace.to_string());
    }
    for q in snap.queues.values() {
        if let Some(ns) = &q.namespace {
            namespaces.insert(ns.to_string());
        }
    }
    let mut out: Vec<Value> = namespaces
        .iter()
        .map(|ns| json!({"apiVersion": "v1", "kind": "Namespace", "metadata": meta(ns, None, scenario, Vec::new(), Vec::new())}))
        .collect();
    for f in snap.flavors.values() {
        let mut spec =
            json!({"nodeLabels": labels_json(f.node_labels.iter().map(|(k, v)| (k.to_string(), v.to_string())))});
        if !f.tolerations.is_empty() {
            spec["tolerations"] = Value::Array(f.tolerations.iter().map(toleration_json).collect());
        }
        out.push(json!({
            "apiVersion": kinds::RESOURCE_FLAVOR.api_version(),
            "kind": kinds::RESOURCE_FLAVOR.kind,
            "metadata": meta(f.name.as_str(), None, scenario, Vec::new(), Vec::new()),
            "spec": spec,
        }));
    }
    for kind in [QueueKind::ClusterQueue, QueueKind::LocalQueue, QueueKind::VolcanoQueue] {
        out.extend(snap.queues.values().filter(|q| q.kind == kind).map(|q| queue_json(q, scenario)));
    }
    out.extend(pods::priority_classes(snap.pods.values().map(|p| &**p), scenario));
    out.extend(snap.nodes.values().map(|n| node_json(n, scenario)));
    out.extend(dra::manifests(snap, scenario));
    for g in snap.gangs.values() {
        if g.is_finished() {
            continue;
        }
        out.push(match g.kind {
            GangKind::KueueWorkload => workload_json(g, scenario),
            GangKind::VolcanoPodGroup => podgroup_json(g, scenario),
        });
    }
    // A faulty node's KWOK stages before any pod: KWOK picks a pod's stage
    // when it sees the pod, and a pod placed before the stage existed was
    // started as on a healthy node (seen on the lab: the black hole ran its
    // first pod).
    out.extend(pods::fault_stages(life, scenario));
    let all: Vec<&crate::model::Pod> = snap.pods.values().map(|p| &**p).collect();
    // Bound pods first: the scheduler must see the capacity they hold
    // before it tries to place the pending ones. Then the controllers that
    // adopt them.
    out.extend(all.iter().filter(|p| p.node.is_some()).filter_map(|p| pods::pod_json(p, &index, life, scenario)));
    out.extend(all.iter().filter(|p| p.node.is_none()).filter_map(|p| pods::pod_json(p, &index, life, scenario)));
    out.extend(pods::controllers_json(&all, &index, life, scenario));
    out
}

/// Multi-document YAML with a header comment.
pub fn to_yaml(docs: &[Value], header: &str) -> Result<String, serde_yaml::Error> {
    let mut s = String::new();
    for line in header.lines() {
        s.push_str("# ");
        s.push_str(line);
        s.push('\n');
    }
    for d in docs {
        s.push_str("---\n");
        s.push_str(&serde_yaml::to_string(d)?);
    }
    Ok(s)
}

/// Moves every timestamp by `delta` seconds: RFC 3339 strings under the
/// time fields, and the operator's Unix-seconds annotations.
pub fn shift_times(v: &mut Value, delta: i64) {
    match v {
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                match (k.as_str(), &*x) {
                    (
                        "lastTransitionTime"
                        | "startTime"
                        | "startedAt"
                        | "finishedAt"
                        | COMPLETE_AFTER
                        | keys::LAST_CHECKPOINT,
                        Value::String(s),
                    ) => {
                        if let Some(t) = parse_rfc3339(s) {
                            *x = Value::String(rfc3339(t + delta));
                        }
                    }
                    (DRIVER_UPGRADE_VALIDATION_START | DRIVER_UPGRADE_WAIT_FOR_JOBS_START, Value::String(s)) => {
                        if let Ok(t) = s.parse::<i64>() {
                            *x = Value::String((t + delta).to_string());
                        }
                    }
                    _ => shift_times(x, delta),
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| shift_times(x, delta)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_shift() {
        let mut v = json!({"status": {"startTime": "2026-11-30T09:00:00Z", "conditions": [{"lastTransitionTime": "2026-11-30T08:00:00Z"}]},
                           "metadata": {"annotations": {DRIVER_UPGRADE_VALIDATION_START: "1796029200"}}});
        shift_times(&mut v, 60);
        assert_eq!(v["status"]["startTime"], "2026-11-30T09:01:00Z");
        assert_eq!(v["status"]["conditions"][0]["lastTransitionTime"], "2026-11-30T08:01:00Z");
        assert_eq!(v["metadata"]["annotations"][DRIVER_UPGRADE_VALIDATION_START], "1796029260");
    }
}
