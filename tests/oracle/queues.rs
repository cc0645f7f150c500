//! The Kueue oracle: generated ClusterQueues (one or several in a cohort,
//! one or two flavors, nominal quotas, borrowing and lending limits,
//! sometimes an admission check, sometimes StrictFIFO, sometimes stopped
//! with `stopPolicy: Hold` or behind a stopped LocalQueue), flavors that
//! sometimes carry nodeLabels,
//! a NoSchedule nodeTaint and its toleration, and Workloads whose pod set
//! sometimes selects a pool (nodeSelector or required node affinity) or
//! tolerates the taint, on the real Kueue manager.
//! Each workload is created inactive; kgpu predicts from its model whether
//! Kueue will reserve quota for it (and, if not, the shortfall Kueue will
//! name); then it is activated and Kueue decides. Where quota is reserved
//! behind an admission check, kgpu must block at the admission-check step
//! until the check says Ready (or report the rejection).

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use kgpu::analysis::pending::{Step, Verdict};
use kgpu::analysis::{self, Thresholds};
use kgpu::model::{GangKey, GangKind, QueueKind, Snapshot, Sym};
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use proptest::prelude::*;
use serde_json::{Value, json};

use super::Snapshots;

/// Workloads Kueue held behind a StrictFIFO head, and in or behind a
/// stopped queue, as kgpu predicted (coverage).
pub static HELD_BEHIND_HEAD: AtomicU32 = AtomicU32::new(0);
pub static HELD_BY_STOP: AtomicU32 = AtomicU32::new(0);

#[derive(Clone, Debug)]
pub struct FlavorQuota {
    pub nominal: u32,
    pub borrowing_limit: Option<u32>,
    pub lending_limit: Option<u32>,
}

#[derive(Clone, Debug)]
pub struct CqCase {
    /// Quota in flavor 0, and maybe flavor 1 (tried in that order).
    pub flavors: Vec<FlavorQuota>,
    pub admission_check: bool,
    /// `queueingStrategy: StrictFIFO` (else Kueue's default BestEffortFIFO).
    pub strict_fifo: bool,
    /// `stopPolicy: Hold` on the ClusterQueue.
    pub stopped: bool,
    /// `stopPolicy: Hold` on its LocalQueue.
    pub local_queue_stopped: bool,
}

/// What the case's two flavors say of their nodes: flavor 0 is pool a,
/// flavor 1 pool b; either may carry the spot taint (nodeTaints) and
/// tolerate it itself (tolerations).
#[derive(Clone, Debug)]
pub struct FlavorNodes {
    pub labelled: bool,
    pub spot_taint: bool,
    pub tolerates_spot: bool,
}

#[derive(Clone, Copy, Debug)]
pub enum CheckOutcome {
    Ready,
    Rejected,
}

#[derive(Clone, Debug)]
pub struct WorkloadCase {
    pub cq: usize,
    pub pods: u32,
    pub gpus_per_pod: u32,
    pub check: CheckOutcome,
    /// nodeSelector kgpu.dev/pool: a or b.
    pub pool: Option<&'static str>,
    pub tolerates_spot: bool,
    /// Required node affinity on the pool label: operator and value.
    pub pool_affinity: Option<(&'static str, &'static str)>,
    /// `spec.priority` (Kueue orders a queue by it, then by creation).
    pub priority: Option<i32>,
}

#[derive(Clone, Debug)]
pub struct QueueCase {
    pub cohort: bool,
    pub cqs: Vec<CqCase>,
    pub workloads: Vec<WorkloadCase>,
    pub flavor_nodes: [FlavorNodes; 2],
}

fn flavor_nodes() -> impl Strategy<Value = FlavorNodes> {
    (prop::bool::weighted(0.4), prop::bool::weighted(0.25), prop::bool::weighted(0.2))
        .prop_map(|(labelled, spot_taint, tolerates_spot)| FlavorNodes { labelled, spot_taint, tolerates_spot })
}

fn flavor_quota(cohort: bool) -> impl Strategy<Value = FlavorQuota> {
    (
        prop::sample::select(vec![0u32, 4, 8, 16]),
        prop::option::of(prop::sample::select(vec![0u32, 4, 8])),
        prop::option::of(0u32..=16),
    )
        .prop_map(move |(nominal, borrowing_limit, lending)| FlavorQuota {
            nominal,
            // Limits need a cohort (Kueue's webhook); a lending limit is at most the nominal quota.
            borrowing_limit: borrowing_limit.filter(|_| cohort),
            lending_limit: lending.filter(|_| cohort).map(|l| l.min(nominal)),
        })
}

pub fn queue_case() -> impl Strategy<Value = QueueCase> {
    any::<bool>()
        .prop_flat_map(|cohort| {
            let cq = (
                prop::collection::vec(flavor_quota(cohort), 1..=2),
                prop::bool::weighted(0.25),
                prop::bool::weighted(0.35),
                prop::bool::weighted(0.08),
                prop::bool::weighted(0.08),
            )
                .prop_map(|(flavors, admission_check, strict_fifo, stopped, local_queue_stopped)| CqCase {
                    flavors,
                    admission_check,
                    strict_fifo,
                    stopped,
                    local_queue_stopped,
                });
            (Just(cohort), prop::collection::vec(cq, if cohort { 2..=3 } else { 1..=1 }))
        })
        .prop_flat_map(|(cohort, cqs)| {
            let n = cqs.len();
            let workload = (
                0..n,
                prop::sample::select(vec![1u32, 1, 2, 4]),
                prop::sample::select(vec![1u32, 2, 4, 8]),
                prop::bool::weighted(0.7),
                prop::option::weighted(0.3, prop::sample::select(vec!["a", "b"])),
                prop::bool::weighted(0.3),
                prop::option::weighted(
                    0.25,
                    (
                        prop::sample::select(vec!["In", "NotIn", "Exists", "DoesNotExist"]),
                        prop::sample::select(vec!["a", "b"]),
                    ),
                ),
                prop::option::weighted(0.3, prop::sample::select(vec![-10i32, 100])),
            )
                .prop_map(
                    |(cq, pods, gpus_per_pod, ready, pool, tolerates_spot, pool_affinity, priority)| WorkloadCase {
                        cq,
                        pods,
                        gpus_per_pod,
                        check: if ready { CheckOutcome::Ready } else { CheckOutcome::Rejected },
                        pool,
                        tolerates_spot,
                        pool_affinity,
                        priority,
                    },
                );
            (Just(cohort), Just(cqs), prop::collection::vec(workload, 1..=5), [flavor_nodes(), flavor_nodes()])
        })
        .prop_map(|(cohort, cqs, workloads, flavor_nodes)| QueueCase { cohort, cqs, workloads, flavor_nodes })
}

fn api(client: &kube::Client, kind: &str, plural: &str, namespace: Option<&str>) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("kueue.x-k8s.io", "v1beta2", kind), plural);
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    }
}

async fn apply(api: &Api<DynamicObject>, doc: &Value) -> Result<(), String> {
    let name = doc["metadata"]["name"].as_str().unwrap_or_default().to_string();
    api.patch(&name, &PatchParams::apply("kgpu-oracle").force(), &Patch::Apply(doc))
        .await
        .map(|_| ())
        .map_err(|e| format!("applying {} {name}: {e}", doc["kind"]))
}

async fn apply_status(api: &Api<DynamicObject>, doc: &Value) -> Result<(), String> {
    let name = doc["metadata"]["name"].as_str().unwrap_or_default().to_string();
    api.patch_status(&name, &PatchParams::apply("kgpu-oracle").force(), &Patch::Apply(doc))
        .await
        .map(|_| ())
        .map_err(|e| format!("status of {} {name}: {e}", doc["kind"]))
}

/// The objects of a case, as Kueue would be configured by hand.
pub fn objects(n: u32, case: &QueueCase) -> Vec<Value> {
    let mut out = Vec::new();
    for (f, nodes) in case.flavor_nodes.iter().enumerate() {
        let mut spec = json!({});
        if nodes.labelled {
            let pool = ["a", "b"][f];
            spec["nodeLabels"] = json!({"kgpu.dev/pool": pool});
        }
        if nodes.spot_taint {
            spec["nodeTaints"] = json!([{"key": "spot", "value": "true", "effect": "NoSchedule"}]);
        }
        if nodes.tolerates_spot {
            spec["tolerations"] = json!([{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}]);
        }
        out.push(json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": format!("o{n}-f{f}")}, "spec": spec}));
    }
    for (i, cq) in case.cqs.iter().enumerate() {
        let flavors: Vec<Value> = cq
            .flavors
            .iter()
            .enumerate()
            .map(|(f, q)| {
                let mut r = json!({"name": "nvidia.com/gpu", "nominalQuota": q.nominal.to_string()});
                if let Some(b) = q.borrowing_limit {
                    r["borrowingLimit"] = json!(b.to_string());
                }
                if let Some(l) = q.lending_limit {
                    r["lendingLimit"] = json!(l.to_string());
                }
                json!({"name": format!("o{n}-f{f}"), "resources": [r]})
            })
            .collect();
        let mut spec = json!({
            "namespaceSelector": {},
            "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": flavors}],
        });
        if case.cohort {
            spec["cohortName"] = json!(format!("o{n}-cohort"));
        }
        if cq.admission_check {
            spec["admissionChecksStrategy"] = json!({"admissionChecks": [{"name": format!("o{n}-check")}]});
        }
        if cq.strict_fifo {
            spec["queueingStrategy"] = json!("StrictFIFO");
        }
        if cq.stopped {
            spec["stopPolicy"] = json!("Hold");
        }
        out.push(json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": format!("o{n}-cq{i}")}, "spec": spec}));
        let mut local = json!({"clusterQueue": format!("o{n}-cq{i}")});
        if cq.local_queue_stopped {
            local["stopPolicy"] = json!("Hold");
        }
        out.push(json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                        "metadata": {"name": format!("lq{i}"), "namespace": format!("oq-{n}")},
                        "spec": local}));
    }
    out
}

pub fn workload_json(n: u32, i: usize, w: &WorkloadCase, active: bool) -> Value {
    let mut doc = json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": format!("w{i}"), "namespace": format!("oq-{n}")},
        "spec": {
            "active": active,
            "queueName": format!("lq{}", w.cq),
            "podSets": [{"name": "main", "count": w.pods, "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                "resources": {"requests": {"nvidia.com/gpu": w.gpus_per_pod.to_string()},
                                              "limits": {"nvidia.com/gpu": w.gpus_per_pod.to_string()}}}]}}}],
        },
    });
    if let Some(priority) = w.priority {
        doc["spec"]["priority"] = json!(priority);
    }
    let spec = &mut doc["spec"]["podSets"][0]["template"]["spec"];
    if let Some(pool) = w.pool {
        spec["nodeSelector"] = json!({"kgpu.dev/pool": pool});
    }
    if let Some((operator, pool)) = w.pool_affinity {
        let mut requirement = json!({"key": "kgpu.dev/pool", "operator": operator});
        if matches!(operator, "In" | "NotIn") {
            requirement["values"] = json!([pool]);
        }
        spec["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
            {"nodeSelectorTerms": [{"matchExpressions": [requirement]}]}}});
    }
    if w.tolerates_spot {
        spec["tolerations"] = json!([{"key": "spot", "operator": "Equal", "value": "true", "effect": "NoSchedule"}]);
    }
    doc
}

fn condition<'a>(w: &'a Value, kind: &str) -> Option<&'a Value> {
    w["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == kind)
}

/// Kueue's decision on a workload: quota reserved, or its message. Kueue
/// writes nothing on a workload behind a StrictFIFO head: where kgpu
/// predicts no reservation, 5 s without one is Kueue's "no" too.
async fn decision(
    workloads: &Api<DynamicObject>,
    name: &str,
    predicts_admit: bool,
) -> Result<Result<(), String>, String> {
    let start = Instant::now();
    let deadline = start + Duration::from_secs(30);
    loop {
        let w = workloads.get(name).await.map_err(|e| format!("reading workload {name}: {e}"))?;
        match condition(&w.data, "QuotaReserved") {
            Some(c) if c["status"] == "True" => return Ok(Ok(())),
            Some(c) if c["status"] == "False" && (c["reason"] == "Pending" || c["reason"] == "Inadmissible") => {
                return Ok(Err(c["message"].as_str().unwrap_or_default().to_string()));
            }
            None if !predicts_admit && start.elapsed() > Duration::from_secs(5) => {
                return Ok(Err("(no condition written)".into()));
            }
            _ => {}
        }
        if Instant::now() > deadline {
            return Err(format!("workload {name}: no decision from Kueue within 30 s"));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// kgpu's model of the case has caught up: every workload it should see,
/// every ClusterQueue's reservations as Kueue counts them.
fn settled(s: &Snapshot, n: u32, case: &QueueCase, created: usize) -> bool {
    let ns = Sym::new(&format!("oq-{n}"));
    let gangs: Vec<_> = s.gangs.values().filter(|g| g.namespace == ns).collect();
    if gangs.len() != created {
        return false;
    }
    (0..case.cqs.len()).all(|i| {
        let name = Sym::new(&format!("o{n}-cq{i}"));
        let reserving = gangs
            .iter()
            // Kueue counts the reservations of active workloads only.
            .filter(|g| {
                g.active
                    && g.condition_true("QuotaReserved")
                    && g.admission.as_ref().is_some_and(|a| a.cluster_queue == name)
            })
            .count() as u32;
        s.queues.values().any(|q| q.kind == QueueKind::ClusterQueue && q.name == name && q.reserving == reserving)
    })
}

/// The smallest "N more needed" of Kueue's message, over its flavors (None
/// when no flavor could fit by finishing work).
fn more_needed(message: &str) -> Option<u64> {
    message.split(" more needed").filter_map(|before| before.rsplit(' ').next()?.parse().ok()).min()
}

pub async fn run_queue_case(
    client: &kube::Client,
    snapshots: &Snapshots,
    n: u32,
    case: &QueueCase,
) -> Result<u32, String> {
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let ns = format!("oq-{n}");
    let ns_doc = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
    namespaces
        .patch(&ns, &PatchParams::apply("kgpu-oracle"), &Patch::Apply(&ns_doc))
        .await
        .map_err(|e| format!("namespace: {e}"))?;
    if case.cqs.iter().any(|c| c.admission_check) {
        let checks = api(client, "AdmissionCheck", "admissionchecks", None);
        let check = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck", "metadata": {"name": format!("o{n}-check")},
                           "spec": {"controllerName": "kgpu.dev/oracle"}});
        apply(&checks, &check).await?;
        // Kueue never marks a custom check Active: its controller (here, the oracle) does.
        let active = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck", "metadata": {"name": format!("o{n}-check")},
                            "status": {"conditions": [{"type": "Active", "status": "True", "reason": "Active", "message": "the oracle answers",
                                                       "lastTransitionTime": "2026-12-01T00:00:00Z"}]}});
        apply_status(&checks, &active).await?;
    }
    let objects = objects(n, case);
    for doc in &objects {
        let (kind, plural, namespace) = match doc["kind"].as_str() {
            Some("ResourceFlavor") => ("ResourceFlavor", "resourceflavors", None),
            Some("ClusterQueue") => ("ClusterQueue", "clusterqueues", None),
            _ => ("LocalQueue", "localqueues", Some(ns.as_str())),
        };
        apply(&api(client, kind, plural, namespace), doc).await?;
    }
    // Kueue must have made up its mind on every queue (Active, or stopped)
    // before it is asked to admit anything into it.
    let expected: Vec<(QueueKind, Sym, bool)> = case
        .cqs
        .iter()
        .enumerate()
        .flat_map(|(i, c)| {
            [
                (QueueKind::ClusterQueue, Sym::new(&format!("o{n}-cq{i}")), !c.stopped),
                (QueueKind::LocalQueue, Sym::new(&format!("lq{i}")), !c.stopped && !c.local_queue_stopped),
            ]
        })
        .collect();
    let ns_sym = Sym::new(&ns);
    super::kgpu_sees(snapshots, "the queues active or stopped", |s| {
        expected.iter().all(|(kind, name, active)| {
            s.queues.values().any(|q| {
                q.kind == *kind
                    && q.name == *name
                    && (q.kind == QueueKind::ClusterQueue || q.namespace.as_ref() == Some(&ns_sym))
                    && q.conditions.iter().any(|c| c.kind.as_str() == "Active" && c.status == *active)
            })
        })
    })
    .await?;
    let workloads = api(client, "Workload", "workloads", Some(&ns));
    let mut report = Vec::new();
    for (i, w) in case.workloads.iter().enumerate() {
        let name = format!("w{i}");
        apply(&workloads, &workload_json(n, i, w, false)).await?;
        let snap = super::kgpu_sees(snapshots, "the new workload and the queues' reservations", |s| {
            settled(s, n, case, i + 1)
        })
        .await?;
        // kgpu's prediction: this workload as if it were active.
        let key = GangKey { kind: GangKind::KueueWorkload, namespace: Sym::new(&ns), name: name.as_str().into() };
        let mut as_active = snap.clone();
        let Some(gang) = as_active.gangs.get(&key).cloned() else { return Err(format!("kgpu does not see {name}")) };
        let mut gang = (*gang).clone();
        gang.active = true;
        as_active.gangs.insert(key.clone(), std::sync::Arc::new(gang));
        let now = kgpu::clock::wall_clock();
        let a = analysis::analyze(&as_active, now, &Thresholds::default());
        let item = analysis::pending::find(&a.pending, &ns, &name)
            .ok_or_else(|| format!("kgpu has no pending item for {name}"))?;
        let quota = item.steps.iter().find(|s| s.step == Step::Quota).ok_or("no quota step")?;
        let predicts_admit = quota.verdict != Verdict::Block;
        let predicted_more: Option<u64> =
            item.unblock.iter().find_map(|u| u.split_once(" more nvidia.com/gpu").and_then(|(n, _)| n.parse().ok()));
        // Kueue decides.
        workloads
            .patch(&name, &PatchParams::default(), &Patch::Merge(&json!({"spec": {"active": true}})))
            .await
            .map_err(|e| format!("activating {name}: {e}"))?;
        let decided = decision(&workloads, &name, predicts_admit).await?;
        if decided.is_err() && !predicts_admit {
            if quota.summary.contains("StrictFIFO") {
                HELD_BEHIND_HEAD.fetch_add(1, Ordering::SeqCst);
            } else if quota.summary.contains("is stopped") {
                HELD_BY_STOP.fetch_add(1, Ordering::SeqCst);
            }
        }
        match (&decided, predicts_admit) {
            (Ok(()), false) => {
                report.push(format!("{name}: Kueue reserved quota; kgpu said: {} {:?}", quota.summary, quota.details))
            }
            (Err(message), true) => {
                report.push(format!("{name}: Kueue: {message}; kgpu said it fits: {}", quota.summary))
            }
            (Err(message), false) if more_needed(message).is_some() && more_needed(message) != predicted_more => report
                .push(format!("{name}: Kueue: {message}; kgpu's shortfall: {predicted_more:?} ({:?})", item.unblock)),
            _ => {}
        }
        // Behind an admission check: kgpu blocks there until the check answers.
        if decided.is_ok() && case.cqs[w.cq].admission_check {
            let snap = super::kgpu_sees(snapshots, "the reservation and its check", |s| {
                s.gangs.get(&key).is_some_and(|g| g.condition_true("QuotaReserved") && !g.admission_checks.is_empty())
            })
            .await?;
            let a = analysis::analyze(&snap, kgpu::clock::wall_clock(), &Thresholds::default());
            match analysis::pending::find(&a.pending, &ns, &name) {
                Some(item) if item.blocking == Some(Step::AdmissionCheck) => {}
                other => report.push(format!(
                    "{name}: quota reserved behind check o{n}-check; kgpu: {:?}",
                    other.map(|i| (&i.blocking, &i.summary))
                )),
            }
            let state = match w.check {
                CheckOutcome::Ready => "Ready",
                CheckOutcome::Rejected => "Rejected",
            };
            let answer = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {"name": name, "namespace": ns},
                                "status": {"admissionChecks": [{"name": format!("o{n}-check"), "state": state, "message": format!("the oracle says {state}"),
                                                                "lastTransitionTime": "2026-12-01T00:00:00Z"}]}});
            apply_status(&workloads, &answer).await?;
            let snap = super::kgpu_sees(snapshots, "Kueue's answer to the check", |s| {
                s.gangs.get(&key).is_some_and(|g| match w.check {
                    CheckOutcome::Ready => g.condition_true("Admitted"),
                    CheckOutcome::Rejected => !g.active,
                })
            })
            .await?;
            let a = analysis::analyze(&snap, kgpu::clock::wall_clock(), &Thresholds::default());
            let item = analysis::pending::find(&a.pending, &ns, &name);
            let ok = match w.check {
                // Admitted: no longer waiting at quota or a check.
                CheckOutcome::Ready => {
                    item.is_none_or(|i| !matches!(i.blocking, Some(Step::Quota | Step::AdmissionCheck)))
                }
                CheckOutcome::Rejected => item.is_some_and(|i| {
                    matches!(i.blocking, Some(Step::Quota | Step::AdmissionCheck)) && i.summary.contains("rejected")
                }),
            };
            if !ok {
                report.push(format!("{name}: check {state}; kgpu: {:?}", item.map(|i| (&i.blocking, &i.summary))));
            }
        }
    }
    if report.is_empty() {
        Ok(case.workloads.len() as u32)
    } else {
        Err(format!(
            "{}\nobjects:\n{}\nworkloads:\n{}",
            report.join("\n"),
            objects.iter().map(|d| serde_json::to_string(d).unwrap_or_default()).collect::<Vec<_>>().join("\n"),
            case.workloads
                .iter()
                .enumerate()
                .map(|(i, w)| serde_json::to_string(&workload_json(n, i, w, true)).unwrap_or_default())
                .collect::<Vec<_>>()
                .join("\n")
        ))
    }
}
