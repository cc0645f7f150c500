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
    let ns = ns_flag(gang.namespace);
    let mut commands = vec![format!(
        "kubectl get workload {ns} {} -o jsonpath='{{range .status.conditions[*]}}{{.type}}={{.status}} {{.reason}}: {{.message}}{{\"\\n\"}}{{end}}'",
        gang.name
    )];
    let mut details = Vec::new();
    if !gang.active {
        return StepReport {
            step: Step::Quota,
            verdict: Verdict::Block,
            summary: "deactivated (spec.active=false): Kueue will not admit it".into(),
            details: vec![format!("unblock: set spec.active=true (kubectl kueue resume workload {} {ns})", gang.name)]
                .into(),
            commands,
        };
    }
    let local = gang.queue;
    let cq = local.and_then(|lq| queues::cluster_queue_of(snap, gang.namespace, lq));
    if let Some(lq) = local {
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
            r.requeue_at
                .map_or(String::new(), |t| format!(", next attempt in {}", super::super::age((t - index.now).max(0))))
        ));
    }
    if gang.has_quota() {
        let checks_pending = reserved.is_some_and(|c| c.status) && !gang.condition_true("Admitted");
        let cq_name = gang.admission.as_ref().map(|a| a.cluster_queue.to_string()).unwrap_or_else(|| "?".into());
        return StepReport {
            step: Step::Quota,
            verdict: if checks_pending { Verdict::Warn } else { Verdict::Pass },
            summary: if checks_pending {
                format!("quota reserved in ClusterQueue {cq_name}; admission checks not Ready yet").into()
            } else {
                format!("admitted by ClusterQueue {cq_name}").into()
            },
            details: details.into(),
            commands,
        };
    }
    // Not admitted: explain with Kueue's own words and the quota numbers.
    if let Some(c) = reserved.filter(|c| !c.status) {
        details.push(format!("QuotaReserved=False ({}): {}", c.reason, c.message));
        if let Some(said) = queue_msg::parse_quota(&c.message) {
            details.push(format!("Kueue: {}", said.describe()));
        }
    }
    let Some(local) = local else {
        details.push("unblock: set the kueue.x-k8s.io/queue-name label to a LocalQueue".into());
        return StepReport {
            step: Step::Quota,
            verdict: Verdict::Block,
            summary: "no queue name: Kueue does not know where to admit it".into(),
            details: details.into(),
            commands,
        };
    };
    let Some(cq) = cq else {
        let lq_exists = snap
            .queues
            .values()
            .any(|q| q.kind == QueueKind::LocalQueue && q.namespace == Some(gang.namespace) && q.name == local);
        let summary = if lq_exists {
            format!("LocalQueue {local} points at a ClusterQueue that does not exist")
        } else {
            format!("LocalQueue {local} doesn't exist in namespace {}", gang.namespace)
        };
        details.push(format!("unblock: create LocalQueue {local} in {} (or fix the queue-name label)", gang.namespace));
        return StepReport {
            step: Step::Quota,
            verdict: Verdict::Block,
            summary: summary.into(),
            details: details.into(),
            commands,
        };
    };
    if !cq.is_active() {
        let why = cq
            .conditions
            .iter()
            .find(|c| c.kind.as_str() == "Active")
            .map(|c| format!(" ({}: {})", c.reason, c.message))
            .unwrap_or_default();
        return StepReport {
            step: Step::Quota,
            verdict: Verdict::Block,
            summary: format!("ClusterQueue {} is inactive{why}", cq.name).into(),
            details: details.into(),
            commands,
        };
    }
    let need = gang.total_requests();
    let mut shortest: Option<(u64, String)> = None;
    for (resource, amount) in need.iter() {
        if resource == "pods" {
            continue;
        }
        let quotas: Vec<_> = cq.quotas.iter().filter(|q| q.resource.as_str() == resource).collect();
        if quotas.is_empty() {
            if keys::is_gpu_resource(resource) {
                details.push(format!("resource {resource} unavailable in ClusterQueue {}", cq.name));
            }
            continue;
        }
        for q in quotas {
            let flavor = q.flavor.map_or("-".to_string(), |f| f.to_string());
            let cap = queues::capacity(snap, cq, q);
            let lendable = queues::cohort_lendable(snap, cq, q.flavor, q.resource);
            let limit = q.borrowing_limit.map_or("none".into(), |l| crate::model::quantity::format(resource, l));
            let fmt = |v: u64| crate::model::quantity::format(resource, v);
            let line = format!(
                "needs {} {resource} in flavor {flavor}: nominal {}, used {}, borrowing limit {limit}{}",
                fmt(amount),
                fmt(q.nominal),
                fmt(q.used),
                cq.cohort.map_or(String::new(), |c| format!(", cohort {c} can lend {}", fmt(lendable)))
            );
            let blocks = q.used + amount > cap;
            if blocks || keys::is_gpu_resource(resource) {
                details.push(line);
            }
            if blocks {
                let short = q.used + amount - cap;
                if shortest.as_ref().is_none_or(|(s, _)| short < *s) {
                    shortest = Some((
                        short,
                        format!(
                            "unblock: {} more {resource} in flavor {flavor} of ClusterQueue {} (raise nominalQuota, lend from the cohort, or finish other work)",
                            fmt(short),
                            cq.name
                        ),
                    ));
                }
            }
        }
    }
    if let Some((_, unblock)) = shortest {
        details.push(unblock);
    }
    StepReport {
        step: Step::Quota,
        verdict: Verdict::Block,
        summary: format!("waiting for quota in ClusterQueue {}", cq.name).into(),
        details: details.into(),
        commands,
    }
}

fn volcano_queue_step(index: &Index<'_>, gang: &Gang) -> StepReport {
    let ns = ns_flag(gang.namespace);
    let mut commands = vec![format!("kubectl describe podgroup {ns} {}", gang.name)];
    let phase = gang.phase.map_or("Pending", |p| p.as_str());
    let mut details: Vec<String> = gang
        .conditions
        .iter()
        .flat_map(|c| {
            let raw = format!("{}={} ({}): {}", c.kind, if c.status { "True" } else { "False" }, c.reason, c.message);
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
    let queue =
        gang.queue.and_then(|q| index.snap.queues.values().find(|x| x.kind == QueueKind::VolcanoQueue && x.name == q));
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
                summary: format!("Volcano queue {} is {}", q.name, q.state.map_or("not open", |s| s.as_str())).into(),
                details: details.into(),
                commands,
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
        };
    }
    StepReport {
        step: Step::Quota,
        verdict: Verdict::Block,
        summary: format!("PodGroup is {phase}: not enqueued (queue capacity or gang minimum)").into(),
        details: details.into(),
        commands,
    }
}
