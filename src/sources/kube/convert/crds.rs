//! Kueue and Volcano custom resources (raw JSON) → model records.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::sources::kube::lean::PodSpec;
use serde_json::Value;

use crate::model::node::labels_from;
use crate::model::{
    Admission, AdmissionCheckState, Condition, Flavor, Gang, GangKind, Owner, PodSet, PodSetAssignment, Queue,
    QueueKind, QueueQuota, RequeueState, Sym, Taint, Timestamp, quantity,
};

use super::*;
use crate::model::time::parse_rfc3339;

fn str_at<'a>(v: &'a Value, path: &str) -> Option<&'a str> {
    v.pointer(path).and_then(|x| x.as_str())
}

fn name_of(v: &Value) -> Result<&str> {
    super::named(str_at(v, "/metadata/name"), "object")
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
            affinity: required_affinity(&spec)?,
            claims: super::dra::pod_claims(&spec, None),
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
    let kueue_counted = kueue_counted(v, &pod_sets)?;
    Ok(Gang {
        kind: GangKind::KueueWorkload,
        namespace: Sym::new(namespace),
        name: Arc::from(name),
        queue: str_at(v, "/spec/queueName").map(Sym::new),
        min_members,
        pod_sets: pod_sets.into_boxed_slice(),
        priority: v.pointer("/spec/priority").and_then(|p| p.as_i64()).unwrap_or(0) as i32,
        created: time_at(v, "/metadata/creationTimestamp").unwrap_or(0),
        uid: str_at(v, "/metadata/uid").and_then(crate::model::Uid::parse),
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
        kueue_counted,
        running: 0,
    })
}

/// What Kueue counts for a workload beyond its pod sets' own requests: the
/// DRA devices its `deviceClassMappings` name (Kueue v0.17 adds them to a
/// pod set's totals in `status.resourceRequests` while pending, and to the
/// admission's `resourceUsage` once admitted).
fn kueue_counted(v: &Value, pod_sets: &[PodSet]) -> Result<Option<Resources>> {
    let totals = v
        .pointer("/status/admission/podSetAssignments")
        .and_then(Value::as_array)
        .filter(|a| !a.is_empty())
        .map(|a| a.iter().filter_map(|psa| psa.get("resourceUsage")).collect::<Vec<_>>())
        .or_else(|| {
            v.pointer("/status/resourceRequests")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(|r| r.get("resources")).collect())
        })
        .unwrap_or_default();
    let own = PodSet::total_of(pod_sets);
    let mut extra: Vec<(&str, u64)> = Vec::new();
    for list in totals {
        for (resource, amount) in resources_json(list)? {
            // Kueue's own totals of what the pod sets request (LimitRange
            // defaults, overheads) are not kgpu's to second-guess here.
            if own.get(resource) == 0 && !matches!(resource, "cpu" | "memory" | "pods") {
                extra.push((resource, amount));
            }
        }
    }
    Ok((!extra.is_empty()).then(|| Resources::from_pairs(extra)))
}

/// A Volcano `v1beta1` PodGroup.
pub fn podgroup(v: &Value) -> Result<Gang> {
    let name = name_of(v)?;
    let namespace = str_at(v, "/metadata/namespace").unwrap_or("default");
    let min_resources = match v.pointer("/spec/minResources") {
        Some(r) if !r.is_null() => Some(Resources::from_pairs(resources_json(r)?)),
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
        uid: str_at(v, "/metadata/uid").and_then(crate::model::Uid::parse),
        active: true,
        conditions: conditions(v.pointer("/status/conditions").unwrap_or(&Value::Null)),
        admission: None,
        admission_checks: Box::new([]),
        requeue: None,
        phase: str_at(v, "/status/phase").map(Sym::new),
        owner: owner_json(v),
        min_resources,
        kueue_counted: None,
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
        strict_fifo: str_at(v, "/spec/queueingStrategy") == Some("StrictFIFO"),
        state: None,
        flavor_order: order.into_boxed_slice(),
        fair_weight_milli: match v.pointer("/spec/fairSharing/weight") {
            Some(Value::String(s)) => quantity::parse("cpu", s).ok(),
            Some(Value::Number(n)) => quantity::parse("cpu", &n.to_string()).ok(),
            _ => None,
        },
        reclaim_within_cohort: str_at(v, "/spec/preemption/reclaimWithinCohort").map(Sym::new),
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
        strict_fifo: false,
        state: None,
        flavor_order: Box::new([]),
        fair_weight_milli: None,
        reclaim_within_cohort: None,
    })
}

/// A Volcano Queue: `capability` as the nominal quota, `allocated` as used.
pub fn volcano_queue(v: &Value) -> Result<Queue> {
    let name = name_of(v)?;
    let capability = resources_json(v.pointer("/spec/capability").unwrap_or(&Value::Null))?;
    let allocated: BTreeMap<&str, u64> =
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
        strict_fifo: false,
        state: str_at(v, "/status/state").map(Sym::new),
        flavor_order: Box::new([]),
        fair_weight_milli: None,
        reclaim_within_cohort: None,
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
