//! Kueue-like admission: ClusterQueues with flavors, nominal quotas,
//! borrowing within a cohort; workloads admitted by priority then age
//! (BestEffortFIFO); member pods created on admission with the flavor's
//! node labels and tolerations, as Kueue's job integration does. Messages
//! use Kueue's own wording (see `shared/fixtures/real/kueue/`).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::model::quantity;
use crate::model::{Admission, Condition, EventType, GangKey, GangKind, PodSetAssignment, QueueKey, QueueKind, Sym};

use super::Involved;
use super::{PodPlan, SimCluster};

type Usage = HashMap<(Sym, Option<Sym>, Sym), u64>;

fn usage(sim: &SimCluster) -> Usage {
    let mut u: Usage = HashMap::new();
    for g in sim.gangs.values().filter(|g| g.kind == GangKind::KueueWorkload && !g.is_finished()) {
        let Some(adm) = &g.admission else { continue };
        let total = g.total_requests();
        for a in adm.assignments.iter() {
            for (resource, flavor) in a.flavors.iter() {
                *u.entry((adm.cluster_queue.clone(), Some(flavor.clone()), resource.clone())).or_default() +=
                    total.get(resource.as_str());
            }
        }
    }
    u
}

fn cluster_queue_for(sim: &SimCluster, namespace: Sym, local: Sym) -> Option<Sym> {
    sim.queues
        .get(&QueueKey { kind: QueueKind::LocalQueue, namespace: Some(namespace), name: local })
        .and_then(|lq| lq.cluster_queue.clone())
}

fn condition(kind: &str, status: bool, reason: &str, message: &str, now: i64) -> Condition {
    Condition { kind: Sym::new(kind), status, reason: Sym::new(reason), message: message.into(), since: now }
}

fn set_condition(conditions: &mut Vec<Condition>, c: Condition) {
    match conditions.iter_mut().find(|x| x.kind == c.kind) {
        Some(existing) => {
            if existing.status != c.status || existing.reason != c.reason || existing.message != c.message {
                *existing = c;
            }
        }
        None => conditions.push(c),
    }
}

pub(super) fn admit(sim: &mut SimCluster) {
    let mut used = usage(sim);
    let mut candidates: Vec<GangKey> = sim
        .gangs
        .values()
        .filter(|g| g.kind == GangKind::KueueWorkload && g.active && g.admission.is_none() && !g.is_finished())
        .map(|g| g.key())
        .collect();
    candidates.sort_by(|a, b| {
        let (ga, gb) = (&sim.gangs[a], &sim.gangs[b]);
        gb.priority.cmp(&ga.priority).then(ga.created.cmp(&gb.created)).then(a.cmp(b))
    });
    for key in candidates {
        let gang = &sim.gangs[&key];
        let now = sim.now;
        let Some(local) = gang.queue.clone() else { continue };
        let Some(cq_name) = cluster_queue_for(sim, gang.namespace.clone(), local.clone()) else {
            let msg = format!("LocalQueue {local} doesn't exist");
            update_pending(sim, &key, "Inadmissible", &msg);
            continue;
        };
        let Some(cq) = sim
            .queues
            .get(&QueueKey { kind: QueueKind::ClusterQueue, namespace: None, name: cq_name.clone() })
            .cloned()
        else {
            update_pending(sim, &key, "Inadmissible", &format!("ClusterQueue {cq_name} doesn't exist"));
            continue;
        };
        let need = gang.total_requests();
        let mut reasons = Vec::new();
        let mut chosen = None;
        for flavor in cq.flavor_order.iter() {
            let mut fits = true;
            for (resource, amount) in need.iter() {
                let Some(q) =
                    cq.quotas.iter().find(|q| q.flavor.as_ref() == Some(flavor) && q.resource.as_str() == resource)
                else {
                    continue;
                };
                let (available, max) = room(sim, &used, &cq, q);
                if amount > max {
                    reasons.push(format!(
                        "insufficient quota for {resource} in flavor {flavor}, previously considered podsets requests (0) + current podset request ({}) > maximum capacity ({})",
                        quantity::format(resource, amount),
                        quantity::format(resource, max)
                    ));
                    fits = false;
                    break;
                }
                if amount > available {
                    reasons.push(format!(
                        "insufficient unused quota for {resource} in flavor {flavor}, {} more needed",
                        quantity::format(resource, amount - available)
                    ));
                    fits = false;
                    break;
                }
            }
            if fits {
                chosen = Some(flavor.clone());
                break;
            }
        }
        let Some(flavor) = chosen else {
            let podset = gang.pod_sets.first().map_or("main", |p| p.name.as_str());
            let msg = format!("couldn't assign flavors to pod set {podset}: {}", reasons.join(", "));
            update_pending(sim, &key, "Pending", &msg);
            continue;
        };
        for (resource, amount) in need.iter() {
            if cq.quotas.iter().any(|q| q.flavor.as_ref() == Some(&flavor) && q.resource.as_str() == resource) {
                *used.entry((cq.name.clone(), Some(flavor.clone()), Sym::new(resource))).or_default() += amount;
            }
        }
        admit_one(sim, &key, cq.name, flavor, now);
    }
    refresh_queue_status(sim, &used);
}

/// What `q` of ClusterQueue `cq` may take now and at most, as Kueue counts
/// it: the cohort pools every member's lendable quota (nominal, or its
/// lendingLimit), so a queue's idle nominal quota is what the others borrow.
fn room(sim: &SimCluster, used: &Usage, cq: &crate::model::Queue, q: &crate::model::QueueQuota) -> (u64, u64) {
    let in_use = |name: Sym| used.get(&(name, q.flavor.clone(), q.resource.clone())).copied().unwrap_or(0);
    let kept = |x: &crate::model::QueueQuota| x.lending_limit.map_or(0, |l| x.nominal.saturating_sub(l));
    let own_kept = kept(q);
    let Some(cohort) = cq.cohort.clone() else {
        return (q.nominal.saturating_sub(in_use(cq.name.clone())), q.nominal);
    };
    let (mut pool, mut pool_used) = (0u64, 0u64);
    for m in sim.queues.values().filter(|m| m.kind == QueueKind::ClusterQueue && m.cohort.as_ref() == Some(&cohort)) {
        let Some(x) = m.quotas.iter().find(|x| x.flavor == q.flavor && x.resource == q.resource) else { continue };
        pool += x.nominal - kept(x);
        pool_used += in_use(m.name.clone()).saturating_sub(kept(x));
    }
    let used_here = in_use(cq.name.clone());
    let mut from_cohort = pool.saturating_sub(pool_used);
    let mut max = own_kept + pool;
    if let Some(limit) = q.borrowing_limit {
        let lent_up = q.nominal - own_kept;
        from_cohort = from_cohort.min((lent_up + limit).saturating_sub(used_here.saturating_sub(own_kept)));
        max = max.min(q.nominal + limit);
    }
    (own_kept.saturating_sub(used_here) + from_cohort, max)
}

fn update_pending(sim: &mut SimCluster, key: &GangKey, reason: &str, message: &str) {
    let now = sim.now;
    let Some(g) = sim.gangs.get_mut(key) else { return };
    let before = g.conditions.clone();
    let mut conditions = g.conditions.to_vec();
    set_condition(&mut conditions, condition("QuotaReserved", false, reason, message, now));
    if *before != *conditions {
        g.conditions = conditions.into_boxed_slice();
        let (ns, name) = (g.namespace.clone(), g.name.to_string());
        sim.dirty.gangs.insert(key.clone());
        sim.bump();
        sim.record(
            EventType::Warning,
            Involved { kind: "Workload", namespace: ns, name: &name },
            "Pending",
            message,
            "kueue-admission",
        );
    }
}

fn admit_one(sim: &mut SimCluster, key: &GangKey, cq: Sym, flavor: Sym, now: i64) {
    let Some(g) = sim.gangs.get_mut(key) else { return };
    let mut conditions = g.conditions.to_vec();
    let queued_for = now - g.created;
    set_condition(
        &mut conditions,
        condition("QuotaReserved", true, "QuotaReserved", &format!("Quota reserved in ClusterQueue {cq}"), now),
    );
    set_condition(&mut conditions, condition("Admitted", true, "Admitted", "The workload is admitted", now));
    conditions.retain(|c| c.kind.as_str() != "Evicted");
    g.conditions = conditions.into_boxed_slice();
    g.admission = Some(Admission {
        cluster_queue: cq.clone(),
        assignments: g
            .pod_sets
            .iter()
            .map(|ps| PodSetAssignment {
                name: ps.name.clone(),
                flavors: ps.requests.iter().map(|(r, _)| (Sym::new(r), flavor.clone())).collect(),
                count: ps.count,
            })
            .collect(),
    });
    let (ns, name) = (g.namespace.clone(), g.name.to_string());
    let count = g.pod_sets.first().map_or(0, |p| p.count);
    sim.dirty.gangs.insert(key.clone());
    sim.bump();
    sim.record(
        EventType::Normal,
        Involved { kind: "Workload", namespace: ns.clone(), name: &name },
        "QuotaReserved",
        &format!("Quota reserved in ClusterQueue {cq}, wait time since queued was {queued_for}s"),
        "kueue-admission",
    );
    sim.record(
        EventType::Normal,
        Involved { kind: "Workload", namespace: ns, name: &name },
        "Admitted",
        &format!("Admitted by ClusterQueue {cq}, wait time since reservation was 0s"),
        "kueue-admission",
    );
    create_members(sim, key, flavor, count);
}

/// Kueue unsuspends the Job; the Job controller creates its pods with the
/// flavor's node labels and tolerations injected.
pub(super) fn create_members(sim: &mut SimCluster, key: &GangKey, flavor: Sym, count: u32) {
    let Some(template) = sim.templates.get(key).cloned() else { return };
    let flavor = sim.flavors.get(&flavor).cloned();
    let job = template.pod.owner.as_ref().map_or_else(|| key.name.to_string(), |o| o.name.to_string());
    for i in 0..count {
        let mut pod = template.pod.clone();
        let suffix = sim.next_suffix();
        pod.name = Arc::from(format!("{job}-{i}-{suffix}").as_str());
        pod.created = sim.now;
        pod.transitioned = sim.now;
        if let Some(f) = &flavor {
            let mut selector: BTreeMap<Sym, Sym> = pod.node_selector.iter().cloned().collect();
            selector.extend(f.node_labels.iter().cloned());
            pod.node_selector = selector.into_iter().collect();
            let mut tolerations = pod.tolerations.to_vec();
            tolerations.extend(f.tolerations.iter().cloned());
            pod.tolerations = tolerations.into_boxed_slice();
        }
        let plan: PodPlan = template.plan.clone();
        sim.add_pod(pod, plan);
    }
    sim.bump();
}

fn refresh_queue_status(sim: &mut SimCluster, used: &Usage) {
    let mut pending: HashMap<(Option<Sym>, Sym), u32> = HashMap::new();
    let mut admitted: HashMap<(Option<Sym>, Sym), u32> = HashMap::new();
    for g in sim.gangs.values().filter(|g| g.kind == GangKind::KueueWorkload && !g.is_finished()) {
        let Some(local) = g.queue.clone() else { continue };
        let cq = cluster_queue_for(sim, g.namespace.clone(), local.clone());
        let target = if g.admission.is_some() {
            &mut admitted
        } else if g.active {
            &mut pending
        } else {
            continue;
        };
        *target.entry((Some(g.namespace.clone()), local)).or_default() += 1;
        if let Some(cq) = cq {
            *target.entry((None, cq)).or_default() += 1;
        }
    }
    let keys: Vec<QueueKey> = sim.queues.keys().cloned().collect();
    for key in keys {
        let Some(q) = sim.queues.get_mut(&key) else { continue };
        let before = q.clone();
        let id = (q.namespace.clone(), q.name.clone());
        match q.kind {
            QueueKind::ClusterQueue => {
                let mut quotas = q.quotas.to_vec();
                for quota in quotas.iter_mut() {
                    let u =
                        used.get(&(q.name.clone(), quota.flavor.clone(), quota.resource.clone())).copied().unwrap_or(0);
                    quota.used = u;
                    quota.reserved = u;
                    quota.borrowed = u.saturating_sub(quota.nominal);
                }
                q.quotas = quotas.into_boxed_slice();
            }
            QueueKind::LocalQueue => {}
            QueueKind::VolcanoQueue => continue,
        }
        q.pending = pending.get(&id).copied().unwrap_or(0);
        q.admitted = admitted.get(&id).copied().unwrap_or(0);
        q.reserving = q.admitted;
        if *q != before {
            sim.dirty.queues.insert(key);
        }
    }
}
