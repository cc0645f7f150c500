//! The queue / quota step: Kueue's admission (quota in the ClusterQueue and
//! its cohort) and Volcano's queue, with their own words where they left some.

use crate::model::{Gang, GangKind, QueueKind, keys};

use super::super::index::Index;
use super::super::{queue_msg, queues};
use super::{Step, StepReport, Verdict, ns_flag};

pub(super) fn quota_step(index: &Index<'_>, gang: &Gang) -> StepReport {
    match gang.kind {
        GangKind::KueueWorkload => kueue_quota_step(index, gang),
        GangKind::VolcanoPodGroup => volcano_queue_step(index, gang),
    }
}

fn kueue_quota_step(index: &Index<'_>, gang: &Gang) -> StepReport {
    let snap = index.snap;
    let ns = ns_flag(&gang.namespace);
    let mut commands = vec![format!(
        "kubectl get workload {ns} {} -o jsonpath='{{range .status.conditions[*]}}{{.type}}={{.status}} {{.reason}}: {{.message}}{{\"\\n\"}}{{end}}'",
        gang.name
    )];
    let mut details = Vec::new();
    if !gang.active {
        // Why, when Kueue deactivated it (a rejected admission check, too
        // many requeues): the eviction says, its checks are reset by then.
        let why = ["DeactivationTarget", "Evicted"]
            .iter()
            .filter_map(|kind| gang.condition(kind))
            .find(|c| {
                c.status && (c.kind.as_str() == "DeactivationTarget" || c.reason.as_str().starts_with("Deactivated"))
            })
            .map(|c| c.message.to_string());
        return StepReport {
            step: Step::Quota,
            verdict: Verdict::Block,
            summary: match why {
                Some(why) => format!("deactivated (spec.active=false): {why}").into(),
                None => "deactivated (spec.active=false): Kueue will not admit it".into(),
            },
            details: vec![format!("unblock: set spec.active=true (kubectl kueue resume workload {} {ns})", gang.name)]
                .into(),
            commands,
            said_by: None,
        };
    }
    let local = gang.queue.clone();
    let cq = local.clone().and_then(|lq| queues::cluster_queue_of(snap, gang.namespace.clone(), lq));
    if let Some(lq) = &local {
        commands.push(format!("kubectl get localqueue {ns} {lq} -o wide"));
    }
    if let Some(cq) = cq {
        commands.push(format!("kubectl get clusterqueue {} -o yaml", cq.name));
    }
    let reserved = gang.condition("QuotaReserved");
    if let Some(c) = gang.condition("Evicted").filter(|c| c.status) {
        details.push(format!("Evicted ({}): {}", c.reason, c.message));
    }
    if let Some(r) = &gang.requeue {
        details.push(format!(
            "requeued {} time(s){}",
            r.count,
            r.requeue_at.map_or(String::new(), |t| format!(
                ", next attempt in {}",
                crate::model::time::age((t - index.now).max(0))
            ))
        ));
    }
    if gang.has_quota() {
        let admitted = gang.condition_true("Admitted");
        let cq_name = gang.admission.as_ref().map(|a| a.cluster_queue.to_string()).unwrap_or_else(|| "?".into());
        return StepReport {
            step: Step::Quota,
            verdict: Verdict::Pass,
            summary: if admitted {
                format!("admitted by ClusterQueue {cq_name}").into()
            } else {
                format!("quota reserved in ClusterQueue {cq_name}, not admitted yet (admission checks)").into()
            },
            details: details.into(),
            commands,
            said_by: None,
        };
    }
    // Not admitted: explain with Kueue's own words and the quota numbers.
    let mut kueue_said: Option<KueueSaid> = None;
    if let Some(c) = reserved.filter(|c| !c.status) {
        details.push(format!("QuotaReserved=False ({}): {}", c.reason, c.message));
        if let Some(said) = queue_msg::parse_quota(&c.message) {
            details.push(format!("Kueue: {}", said.describe()));
            if let queue_msg::QuotaProblem::Insufficient { resource, flavor, unused: true, more_needed: Some(n) } =
                &said.problem
                && let Ok(more) = crate::model::quantity::parse(resource, n)
            {
                kueue_said = Some(KueueSaid { resource: resource.clone(), flavor: flavor.clone(), more });
            }
        }
    }
    let Some(local) = local else {
        details.push("unblock: set the kueue.x-k8s.io/queue-name label to a LocalQueue".into());
        return quota_block("no queue name: Kueue does not know where to admit it", details, commands);
    };
    let Some(cq) = cq else {
        let summary = if queues::local_queue(snap, gang.namespace.clone(), local.clone()).is_some() {
            format!("LocalQueue {local} points at a ClusterQueue that does not exist")
        } else {
            format!("LocalQueue {local} doesn't exist in namespace {}", gang.namespace)
        };
        details.push(format!("unblock: create LocalQueue {local} in {} (or fix the queue-name label)", gang.namespace));
        return quota_block(summary, details, commands);
    };
    let lq = queues::local_queue(snap, gang.namespace.clone(), local);
    // The ClusterQueue first: a LocalQueue in front of a stopped one is
    // inactive only because of it.
    for queue in std::iter::once(cq).chain(lq) {
        let Some(summary) = held(queue) else { continue };
        if let Some(policy) = queue.stopped_with() {
            let (kind, ns) = match queue.kind {
                QueueKind::LocalQueue => ("localqueue", format!(" {ns}")),
                _ => ("clusterqueue", String::new()),
            };
            details.push(format!(
                "unblock: kubectl patch {kind} {}{ns} --type merge -p '{{\"spec\":{{\"stopPolicy\":\"None\"}}}}' (stopped with {policy}{})",
                queue.name,
                if policy.as_str() == "HoldAndDrain" { ": its admitted workloads were evicted too" } else { "" }
            ));
        }
        return quota_block(summary, details, commands);
    }
    // Kueue's DRA quota refused the workload before any quota was weighed.
    if let Some(c) = reserved.filter(|c| !c.status)
        && let Some(refusal) = queue_msg::parse_dra(&c.message)
    {
        let (summary, unblock) = dra_refusal_words(&refusal, &cq.name);
        details.push(format!("unblock: {unblock}"));
        return quota_block(summary, details, commands);
    }
    // Kueue's own word on this workload: what kgpu defers to where its
    // arithmetic finds room and Kueue says otherwise.
    let kueue_word =
        reserved.filter(|c| !c.status && !c.message.is_empty()).map(|c| format!("{}: {}", c.reason, c.message));
    kueue_quota_arithmetic(index, gang, cq, (kueue_said, kueue_word), details, commands)
}

/// The quota step blocking, with what it found and the commands that show it.
fn quota_block(summary: impl Into<String>, details: Vec<String>, commands: Vec<String>) -> StepReport {
    StepReport {
        step: Step::Quota,
        verdict: Verdict::Block,
        summary: summary.into().into(),
        details: details.into(),
        commands,
        said_by: None,
    }
}

/// Kueue's DRA refusal in words: (summary, unblock). Kueue v0.17 counts
/// `exactly` requests of mapped DeviceClasses in claim templates only.
fn dra_refusal_words(refusal: &queue_msg::DraRefusal, cq: &crate::model::Sym) -> (String, String) {
    use queue_msg::DraRefusal;
    match refusal {
        DraRefusal::Claims => (
            "a pod set names a ResourceClaim (resourceClaimName): Kueue's DRA quota counts claim templates only".into(),
            "ask through a ResourceClaimTemplate (resourceClaimTemplateName), or run the workload outside Kueue".into(),
        ),
        DraRefusal::Unmapped { class, pod_set } => (
            format!("DeviceClass {class} (pod set {pod_set}) has no deviceClassMapping: Kueue cannot count it"),
            format!(
                "map {class} to a resource in Kueue's configuration (resources.deviceClassMappings) and cover that resource in ClusterQueue {cq}"
            ),
        ),
        DraRefusal::Unsupported { template, feature } => {
            let t = template.as_deref().map_or_else(|| "a claim template".to_string(), |t| format!("template {t}"));
            (
                // Cause first: two refusals cut at 80 columns read alike otherwise.
                format!(
                    "{feature} in {t}: Kueue's DRA quota does not count it (only `exactly` requests with a count, of a mapped DeviceClass)"
                ),
                format!(
                    "drop {feature} from {t} (choose devices through the DeviceClass instead), or run the workload outside Kueue"
                ),
            )
        }
        DraRefusal::TemplateMissing { template, pod_set } => (
            format!("Kueue cannot read ResourceClaimTemplate {template} (pod set {pod_set})"),
            format!("create ResourceClaimTemplate {template} in the workload's namespace"),
        ),
    }
}

/// Under StrictFIFO, the workload at the head of `cq` ahead of `gang` when
/// that head cannot be admitted itself: Kueue tries heads only, in priority
/// then creation order, and a StrictFIFO head stays at the front.
fn blocked_head<'g>(index: &Index<'g>, gang: &Gang, cq: &crate::model::Queue) -> Option<&'g Gang> {
    if !cq.strict_fifo {
        return None;
    }
    let snap = index.snap;
    let head = snap
        .gangs
        .values()
        .filter(|g| g.kind == GangKind::KueueWorkload && g.active && !g.has_quota() && !g.is_finished())
        .filter(|g| {
            g.queue
                .clone()
                .and_then(|lq| queues::cluster_queue_of(snap, g.namespace.clone(), lq))
                .is_some_and(|q| q.name == cq.name)
        })
        // A stopped LocalQueue's workloads leave Kueue's queues: never a head.
        .filter(|g| {
            g.queue
                .clone()
                .and_then(|lq| queues::local_queue(snap, g.namespace.clone(), lq))
                .is_none_or(|q| q.stopped_with().is_none())
        })
        .min_by(|a, b| {
            // Kueue's order: priority, queue-order time (creation, to the second), then uid.
            b.priority
                .cmp(&a.priority)
                .then(a.created.cmp(&b.created))
                .then(a.uid.cmp(&b.uid))
                .then(a.name.cmp(&b.name))
        })?;
    let is_self = head.namespace == gang.namespace && head.name == gang.name;
    (!is_self && quota_step(index, head).verdict == Verdict::Block).then_some(&**head)
}

/// Why Kueue admits nothing through `queue`, if so: its owner stopped it
/// (`spec.stopPolicy` Hold or HoldAndDrain, whether or not Kueue has said so
/// yet), or a ClusterQueue reports `Active=False` (a missing flavor or
/// admission check). A LocalQueue's own `Active` condition only echoes its
/// ClusterQueue's, and lags it: Kueue admits through it regardless (the
/// oracle caught kgpu trusting it).
fn held(queue: &crate::model::Queue) -> Option<String> {
    let kind = match queue.kind {
        QueueKind::LocalQueue => "LocalQueue",
        _ => "ClusterQueue",
    };
    let inactive = queue.conditions.iter().find(|c| c.kind.as_str() == "Active" && !c.status);
    if let Some(policy) = queue.stopped_with() {
        let said = inactive.map(|c| format!("; Kueue: {}", c.message)).unwrap_or_default();
        return Some(format!("{kind} {} is stopped (spec.stopPolicy {policy}){said}", queue.name));
    }
    if queue.kind == QueueKind::LocalQueue || queue.is_active() {
        return None;
    }
    let said = inactive.map(|c| format!(" ({}: {})", c.reason, c.message)).unwrap_or_default();
    Some(format!("{kind} {} is inactive{said}", queue.name))
}

/// Kueue's "N more needed" for one flavor and resource.
struct KueueSaid {
    resource: String,
    flavor: String,
    more: u64,
}

/// A workload Kueue has not reserved quota for yet: Kueue's own flavor
/// assignment and quota arithmetic (`flavorassigner`, `resource_node.go`).
/// Flavors are tried in order; the first where every requested resource
/// fits is the one Kueue takes (borrowing if it must). A resource the
/// ClusterQueue does not cover keeps the workload out whatever the quota.
fn kueue_quota_arithmetic(
    index: &Index<'_>,
    gang: &Gang,
    cq: &crate::model::Queue,
    (kueue_said, kueue_word): (Option<KueueSaid>, Option<String>),
    mut details: Vec<String>,
    commands: Vec<String>,
) -> StepReport {
    let snap = index.snap;
    let fmt = |resource: &str, v: u64| crate::model::quantity::format(resource, v);
    let total = gang.total_requests();
    let need: Vec<(&str, u64)> = total.iter().filter(|(r, n)| *n > 0 && *r != "pods").collect();
    let block = |summary: String, details: Vec<String>| StepReport {
        step: Step::Quota,
        verdict: Verdict::Block,
        summary: summary.into(),
        details: details.into(),
        commands: commands.clone(),
        said_by: None,
    };
    if let Some((resource, _)) = need.iter().find(|(r, _)| !cq.quotas.iter().any(|q| q.resource.as_str() == *r)) {
        // A fleet whose GPUs come through DRA only has no nvidia.com/gpu to cover.
        let dra_only =
            *resource == keys::RESOURCE_GPU && !index.nodes().any(|n| n.allocatable.gpu > 0) && !index.dra().is_empty();
        details.push(if dra_only {
            "unblock: no node advertises nvidia.com/gpu: this fleet's GPUs come through DRA, so ask for them through a ResourceClaimTemplate (resourceClaims) instead".to_string()
        } else {
            format!("unblock: add {resource} to the coveredResources of ClusterQueue {} (or drop the request)", cq.name)
        });
        return block(format!("resource {resource} unavailable in ClusterQueue {}", cq.name), details);
    }
    let mut flavors: Vec<Option<crate::model::Sym>> = cq.flavor_order.iter().map(|f| Some(f.clone())).collect();
    for q in cq.quotas.iter() {
        if !flavors.contains(&q.flavor) {
            flavors.push(q.flavor.clone());
        }
    }
    // The smallest shortfall over the flavors: what would unblock it. One
    // that finishing other work can close comes before one that never can.
    let mut shortest: Option<((bool, u64), String)> = None;
    // Flavors whose nodeLabels or nodeTaints the pod sets cannot use, as Kueue words them.
    let mut mismatches: Vec<String> = Vec::new();
    for flavor in flavors {
        let cells: Vec<(&str, u64, &crate::model::QueueQuota)> =
            need.iter().filter_map(|(r, n)| Some((*r, *n, cq.quota(flavor.clone(), r)?))).collect();
        if cells.is_empty() {
            continue;
        }
        let name = flavor.as_ref().map_or("-".to_string(), |f| f.to_string());
        if let Some(mismatch) = flavor.clone().and_then(|f| flavor_mismatch(snap, cq, f, gang)) {
            details.push(format!("skipped: {mismatch}"));
            mismatches.push(mismatch);
            continue;
        }
        let mut fits = true;
        let mut borrowing = Vec::new();
        for (resource, amount, quota) in cells {
            let room = queues::room(snap, cq, quota);
            let limit = quota.borrowing_limit.map_or("none".into(), |l| fmt(resource, l));
            let line = format!(
                "needs {} {resource} in flavor {name}: nominal {}, reserved {}, borrowing limit {limit}, available now {}{}",
                fmt(resource, amount),
                fmt(resource, quota.nominal),
                fmt(resource, quota.reserved.max(quota.used)),
                fmt(resource, room.available),
                cq.cohort.as_ref().map_or(String::new(), |c| format!(
                    " (with cohort {c}; at most {})",
                    fmt(resource, room.max_capacity)
                ))
            );
            if amount > room.available || keys::is_gpu_resource(resource) {
                details.push(line);
            }
            if amount > room.max_capacity {
                fits = false;
                let short = (true, amount - room.max_capacity);
                let text = format!(
                    "unblock: it can never fit flavor {name} of ClusterQueue {}: {} {resource} needed, at most {} (raise nominalQuota or the borrowing limit, or shrink it)",
                    cq.name,
                    fmt(resource, amount),
                    fmt(resource, room.max_capacity)
                );
                if shortest.as_ref().is_none_or(|(s, _)| short < *s) {
                    shortest = Some((short, text));
                }
            } else if amount > room.available {
                fits = false;
                let short = (false, amount - room.available);
                // Kueue rewrites the message only when it retries the workload,
                // and an admission elsewhere in the cohort does not make it retry.
                if kueue_said.as_ref().is_some_and(|k| k.resource == resource && k.flavor == name && k.more != short.1)
                {
                    details.push(format!(
                        "Kueue's message predates the cohort's latest admissions: by the queues' usage now, {} more are needed",
                        fmt(resource, short.1)
                    ));
                }
                let borrowers = cohort_borrowers(snap, cq, flavor.clone(), resource);
                let within_nominal = quota.reserved.max(quota.used) + amount <= quota.nominal;
                let reclaimable = !borrowers.is_empty() && within_nominal && keys::is_gpu_resource(resource);
                details.extend(borrowers);
                // Its own nominal quota is lent out: the fix is taking it back,
                // not more quota (the detail and the advice say the same).
                let used = quota.reserved.max(quota.used);
                let text = if reclaimable {
                    let (lines, advice) = reclaim(snap, cq);
                    details.extend(lines);
                    format!("unblock: {advice}")
                } else if used > quota.nominal {
                    // Already past its own quota on what the cohort lends:
                    // more lending is not the queue's to ask.
                    format!(
                        "unblock: {} more {resource} in flavor {name} of ClusterQueue {}, which already borrows {} over its nominal {} from the cohort: it waits for the cohort's unused quota (the lenders' own work comes first) or its own workloads to finish; raise its nominalQuota if it should own more",
                        fmt(resource, short.1),
                        cq.name,
                        fmt(resource, used - quota.nominal),
                        fmt(resource, quota.nominal)
                    )
                } else {
                    format!(
                        "unblock: {} more {resource} in flavor {name} of ClusterQueue {} (raise nominalQuota, lend from the cohort, or finish other work)",
                        fmt(resource, short.1),
                        cq.name
                    )
                };
                if shortest.as_ref().is_none_or(|(s, _)| short < *s) {
                    shortest = Some((short, text));
                }
            } else if amount > room.available - room.from_cohort.min(room.available) {
                borrowing.push(format!("{} {resource}", fmt(resource, amount.min(room.from_cohort))));
            }
        }
        if fits {
            let borrowing = if borrowing.is_empty() {
                String::new()
            } else {
                format!(
                    " (borrowing {} from cohort {})",
                    borrowing.join(", "),
                    cq.cohort.as_ref().map_or("-".into(), |c| c.to_string())
                )
            };
            if let Some(head) = blocked_head(index, gang, cq) {
                details.push(format!(
                    "kgpu's quota arithmetic finds room in flavor {name} of ClusterQueue {}{borrowing}",
                    cq.name
                ));
                if let Some(word) = &kueue_word {
                    details.push(format!("Kueue says: {word}"));
                }
                details.push(format!(
                    "unblock: let the head through (admit or shrink {}/{}, or lower its priority), or queue past it: kubectl patch clusterqueue {} --type merge -p '{{\"spec\":{{\"queueingStrategy\":\"BestEffortFIFO\"}}}}'",
                    head.namespace, head.name, cq.name
                ));
                return block(
                    format!(
                        "waits behind the head of StrictFIFO ClusterQueue {}: workload {}/{} (priority {}, {}) cannot be admitted, and StrictFIFO admits nothing past it",
                        cq.name,
                        head.namespace,
                        head.name,
                        head.priority,
                        super::gang_shape_text(head, head.min_members)
                    ),
                    details,
                );
            }
            // Kueue decides: where it says no, its word is the verdict.
            if let Some(word) = kueue_word {
                details.push(format!(
                    "kgpu's quota arithmetic finds room in flavor {name} of ClusterQueue {}{borrowing}; Kueue also weighs what kgpu does not model here (admission fair sharing, topology-aware scheduling), or its last attempt predates freed quota",
                    cq.name
                ));
                return StepReport {
                    step: Step::Quota,
                    verdict: Verdict::Block,
                    summary: format!("Kueue says: {word}").into(),
                    details: details.into(),
                    commands,
                    said_by: Some(super::VerdictSource::Kueue),
                };
            }
            // Kueue stops at the first flavor that fits, borrowing or not.
            return StepReport {
                step: Step::Quota,
                verdict: Verdict::Warn,
                summary: format!(
                    "not admitted yet, but it fits flavor {name} of ClusterQueue {}{borrowing}: Kueue should reserve it on its next attempt",
                    cq.name
                )
                .into(),
                details: details.into(),
                commands,
                said_by: None,
            };
        }
    }
    if let Some((_, unblock)) = shortest {
        details.push(unblock);
    } else if !mismatches.is_empty() {
        details.push(format!(
            "unblock: make the pod set's nodeSelector and tolerations match a flavor of ClusterQueue {} (its nodeLabels and nodeTaints), or add a flavor that matches them",
            cq.name
        ));
        return block(
            format!("no flavor of ClusterQueue {} suits its pod sets: {}", cq.name, mismatches.join("; ")),
            details,
        );
    }
    block(format!("waiting for quota in ClusterQueue {}", cq.name), details)
}

/// Why Kueue skips `flavor` for this workload, in Kueue's words
/// (`flavorassigner.checkFlavorForPodSets`, v0.17): a NoSchedule or
/// NoExecute nodeTaint of the flavor no pod set tolerates (the flavor's
/// own tolerations count), or a pod set nodeSelector or required node
/// affinity that the flavor's nodeLabels do not satisfy — on the label keys
/// the ClusterQueue's flavors carry, the others being left to the scheduler.
fn flavor_mismatch(
    snap: &crate::model::Snapshot,
    cq: &crate::model::Queue,
    flavor: crate::model::Sym,
    gang: &Gang,
) -> Option<String> {
    let f = snap.flavors.get(&flavor)?;
    let label_keys: Vec<crate::model::Sym> = cq
        .flavor_order
        .iter()
        .filter_map(|name| snap.flavors.get(name))
        .flat_map(|fl| fl.node_labels.iter().map(|(k, _)| k.clone()))
        .collect();
    for set in gang.pod_sets.iter() {
        let untolerated = f.node_taints.iter().find(|t| {
            matches!(t.effect, crate::model::TaintEffect::NoSchedule | crate::model::TaintEffect::NoExecute)
                && !set.tolerations.iter().chain(f.tolerations.iter()).any(|tol| tol.tolerates(t))
        });
        if let Some(t) = untolerated {
            return Some(format!("untolerated taint {}={}:{} in flavor {flavor}", t.key, t.value, t.effect.as_str()));
        }
        let label = |key: crate::model::Sym| f.node_labels.iter().find(|(k, _)| *k == key).map(|(_, v)| v.clone());
        let selector_ok = set
            .node_selector
            .iter()
            .filter(|(k, _)| label_keys.contains(k))
            .all(|(k, v)| label(k.clone()) == Some(v.clone()));
        // Required node affinity on the same keys: a term left without
        // expressions lets any flavor through (the terms are ORed).
        let terms: Vec<Vec<&crate::model::Requirement>> = set
            .affinity
            .iter()
            .map(|t| t.expressions.iter().filter(|r| label_keys.contains(&r.key)).collect())
            .collect();
        let affinity_ok = terms.is_empty()
            || terms.iter().any(|t| t.is_empty())
            || terms.iter().any(|t| t.iter().all(|r| r.operator.matches(&r.values, label(r.key.clone()))));
        if !(selector_ok && affinity_ok) {
            return Some(format!("flavor {flavor} doesn't match node affinity"));
        }
    }
    None
}

/// Who in the cohort holds more than its own nominal quota of a resource:
/// the queues whose borrowing leaves this one short.
fn cohort_borrowers(
    snap: &crate::model::Snapshot,
    cq: &crate::model::Queue,
    flavor: Option<crate::model::Sym>,
    resource: &str,
) -> Vec<String> {
    let Some(cohort) = cq.cohort.clone() else { return Vec::new() };
    snap.queues
        .values()
        .filter(|q| q.kind == QueueKind::ClusterQueue && q.cohort.as_ref() == Some(&cohort) && q.name != cq.name)
        .filter_map(|q| {
            let quota = q.quota(flavor.clone(), resource)?;
            let holds = quota.reserved.max(quota.used);
            (holds > quota.nominal).then(|| {
                let fmt = |v| crate::model::quantity::format(resource, v);
                format!(
                    "cohort {cohort}: ClusterQueue {} holds {} {resource} on a nominal {} (borrowing {})",
                    q.name,
                    fmt(holds),
                    fmt(quota.nominal),
                    fmt(holds - quota.nominal)
                )
            })
        })
        .collect()
}

/// A queue under its nominal quota while others borrow: the fair shares in
/// the cohort and whether Kueue will take the quota back by preemption
/// (detail lines), and the advice that follows from it.
fn reclaim(snap: &crate::model::Snapshot, cq: &crate::model::Queue) -> (Vec<String>, String) {
    let Some(cohort) = cq.cohort.clone() else { return (Vec::new(), String::new()) };
    let shares = queues::fair_shares(snap, cohort.clone());
    let mut out = vec![format!(
        "fair share in cohort {cohort} (borrowed ÷ lent ×1000 ÷ weight; Kueue reclaims from the largest): {}",
        shares.iter().map(|s| format!("{} {}", s.queue, s.explain())).collect::<Vec<_>>().join("; ")
    )];
    let policy = shares.iter().find(|s| s.queue == cq.name).map_or("Never", |s| s.reclaim_within_cohort.as_str());
    // The borrower Kueue reclaims from first: the largest weighted share (an infinite one first).
    let first = shares
        .iter()
        .filter(|s| s.queue != cq.name && s.borrowed > 0)
        .max_by_key(|s| s.weighted.map_or(u64::MAX, |w| w))
        .map_or_else(|| "the borrowers".to_string(), |s| format!("ClusterQueue {}", s.queue));
    let advice = if policy == "Never" {
        format!(
            "set spec.preemption.reclaimWithinCohort: Any (or LowerPriority) on ClusterQueue {}: it fits within its own nominal quota, which the cohort lends to {first}; Kueue then preempts borrowed work to take it back",
            cq.name
        )
    } else {
        format!(
            "wait for Kueue to preempt borrowed work of {first} (reclaimWithinCohort {policy} on ClusterQueue {}); if nothing is preempted, read the borrowers' Workloads' Evicted/Preempted conditions",
            cq.name
        )
    };
    out.push(if policy == "Never" {
        format!(
            "it fits within {}'s own nominal quota, but reclaimWithinCohort is Never: Kueue preempts no borrower, so it waits until their workloads finish; set spec.preemption.reclaimWithinCohort: Any (or LowerPriority) on ClusterQueue {} to take the quota back",
            cq.name, cq.name
        )
    } else {
        format!(
            "it fits within {}'s own nominal quota and reclaimWithinCohort is {policy}: Kueue preempts borrowers' workloads to take it back (if it does not, see the Workloads' Preempted conditions)",
            cq.name
        )
    });
    (out, advice)
}

/// Kueue's admission checks: once quota is reserved, every check must say
/// Ready before the workload is admitted; Retry evicts and requeues it,
/// Rejected deactivates it. `None` for workloads without checks.
pub(super) fn admission_check_step(gang: &Gang) -> Option<StepReport> {
    if gang.kind != GangKind::KueueWorkload || gang.admission_checks.is_empty() {
        return None;
    }
    let ns = ns_flag(&gang.namespace);
    let commands = vec![format!(
        "kubectl get workload {ns} {} -o jsonpath='{{range .status.admissionChecks[*]}}{{.name}}={{.state}}: {{.message}}{{\"\\n\"}}{{end}}'",
        gang.name
    )];
    let details: Vec<String> = gang
        .admission_checks
        .iter()
        .map(|c| {
            format!(
                "{}: {}{}",
                c.name,
                c.state,
                if c.message.is_empty() { String::new() } else { format!(" — {}", c.message) }
            )
        })
        .collect();
    let named = |state: &str| -> Vec<String> {
        gang.admission_checks.iter().filter(|c| c.state.as_str() == state).map(|c| c.name.to_string()).collect()
    };
    let (rejected, retry, pending) = (named("Rejected"), named("Retry"), named("Pending"));
    let reserved = gang.condition_true("QuotaReserved");
    let (verdict, summary) = if !rejected.is_empty() {
        (Verdict::Block, format!("rejected by admission check {}: Kueue deactivates the workload", rejected.join(", ")))
    } else if !retry.is_empty() {
        (
            Verdict::Block,
            format!(
                "admission check {} asks to retry: Kueue evicts it, releases its quota and tries again",
                retry.join(", ")
            ),
        )
    } else if !pending.is_empty() && reserved {
        (Verdict::Block, format!("quota reserved, waiting for admission check {} to be Ready", pending.join(", ")))
    } else if !pending.is_empty() {
        (Verdict::NotApplicable, format!("admission check {} runs once quota is reserved", pending.join(", ")))
    } else {
        (Verdict::Pass, "every admission check is Ready".to_string())
    };
    Some(StepReport {
        step: Step::AdmissionCheck,
        verdict,
        summary: summary.into(),
        details: details.into(),
        commands,
        said_by: None,
    })
}

fn volcano_queue_step(index: &Index<'_>, gang: &Gang) -> StepReport {
    let ns = ns_flag(&gang.namespace);
    let mut commands = vec![format!("kubectl describe podgroup {ns} {}", gang.name)];
    let phase = gang.phase.as_ref().map_or("Pending", |p| p.as_str());
    let mut details: Vec<String> = gang
        .conditions
        .iter()
        .flat_map(|c| {
            let status = if c.status { "True" } else { "False" };
            let raw = if c.message.is_empty() {
                format!("{}={status} ({})", c.kind, c.reason)
            } else {
                format!("{}={status} ({}): {}", c.kind, c.reason, c.message)
            };
            let read = queue_msg::parse_gang(&c.message).map(|g| {
                let pending: Vec<String> = g.pending_reasons.iter().map(|(r, n)| format!("{n} {r}")).collect();
                format!(
                    "Volcano: {} of {} task(s) waiting ({}){}{}",
                    g.waiting,
                    g.tasks,
                    g.why,
                    g.min_available.map_or(String::new(), |m| format!(", minAvailable {m}")),
                    if pending.is_empty() { String::new() } else { format!("; pending: {}", pending.join(", ")) }
                )
            });
            std::iter::once(raw).chain(read)
        })
        .collect();
    let queue = gang
        .queue
        .clone()
        .and_then(|q| index.snap.queues.values().find(|x| x.kind == QueueKind::VolcanoQueue && x.name == q));
    if let Some(q) = queue {
        commands.push(format!("kubectl get queue {} -o yaml", q.name));
        for quota in q.quotas.iter() {
            details.push(format!(
                "queue {} {}: capability {}, allocated {}",
                q.name,
                quota.resource,
                crate::model::quantity::format(quota.resource.as_str(), quota.nominal),
                crate::model::quantity::format(quota.resource.as_str(), quota.used)
            ));
        }
        if !q.is_active() {
            return StepReport {
                step: Step::Quota,
                verdict: Verdict::Block,
                summary: format!("Volcano queue {} is {}", q.name, q.state.as_ref().map_or("not open", |s| s.as_str()))
                    .into(),
                details: details.into(),
                commands,
                said_by: None,
            };
        }
    }
    if gang.has_quota() {
        return StepReport {
            step: Step::Quota,
            verdict: Verdict::Pass,
            summary: format!("PodGroup is {phase}: enqueued").into(),
            details: details.into(),
            commands,
            said_by: None,
        };
    }
    StepReport {
        step: Step::Quota,
        verdict: Verdict::Block,
        summary: format!("PodGroup is {phase}: not enqueued (queue capacity or gang minimum)").into(),
        details: details.into(),
        commands,
        said_by: None,
    }
}
