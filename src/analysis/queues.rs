//! Queues: quota per flavor and resource, what is used and borrowed, and
//! what a cohort could lend.

use crate::model::{Queue, QueueKind, QueueQuota, Snapshot, Sym};

#[derive(Clone, Debug, PartialEq)]
pub struct QueueRow {
    pub kind: QueueKind,
    pub namespace: Option<Sym>,
    pub name: Sym,
    pub cohort: Option<Sym>,
    pub flavor: Option<Sym>,
    pub resource: Sym,
    pub nominal: u64,
    pub used: u64,
    pub borrowed: u64,
    pub borrowing_limit: Option<u64>,
    pub pending: u32,
    pub admitted: u32,
    /// Workloads Kueue found inadmissible (QuotaReserved=False, reason
    /// Inadmissible: a missing queue, a DRA claim it cannot count): not in
    /// its pending count, yet waiting all the same.
    pub inadmissible: u32,
    pub active: bool,
    /// A ClusterQueue in a cohort: its weighted fair share (`u64::MAX` for weight 0).
    pub fair_share: Option<u64>,
}

impl QueueRow {
    /// An amount of this row's resource, in its unit (`8`, `640Gi`).
    /// Kueue's pending count, with the inadmissible ones after a `+`
    /// (`2+4`): Kueue counts only the first, the Pending pane lists both.
    pub fn pending_cell(&self) -> String {
        if self.inadmissible > 0 { format!("{}+{}", self.pending, self.inadmissible) } else { self.pending.to_string() }
    }

    pub fn amount(&self, v: u64) -> String {
        crate::model::quantity::format(self.resource.as_str(), v)
    }
}

/// One row per queue × flavor × resource; LocalQueues without quotas of
/// their own get one row with their counts.
pub fn rows(snap: &Snapshot) -> Vec<QueueRow> {
    let mut out = Vec::new();
    let mut shares: std::collections::HashMap<Sym, u64> = Default::default();
    let cohorts: std::collections::BTreeSet<Sym> = snap.queues.values().filter_map(|q| q.cohort.clone()).collect();
    for cohort in cohorts {
        shares.extend(fair_shares(snap, cohort).into_iter().map(|s| (s.queue, s.weighted.unwrap_or(u64::MAX))));
    }
    // Inadmissible workloads by the LocalQueue they name, and by its ClusterQueue.
    let mut inadmissible: std::collections::HashMap<(Option<Sym>, Sym), u32> = Default::default();
    for g in snap.gangs.values().filter(|g| g.kind == crate::model::GangKind::KueueWorkload && !g.has_quota()) {
        let refused = g.condition("QuotaReserved").is_some_and(|c| !c.status && c.reason.as_str() == "Inadmissible");
        let Some(local) = g.queue.clone().filter(|_| refused) else { continue };
        *inadmissible.entry((Some(g.namespace.clone()), local.clone())).or_default() += 1;
        if let Some(cq) = cluster_queue_of(snap, g.namespace.clone(), local) {
            *inadmissible.entry((None, cq.name.clone())).or_default() += 1;
        }
    }
    for q in snap.queues.values() {
        let scope = if q.kind == QueueKind::LocalQueue { q.namespace.clone() } else { None };
        let refused = inadmissible.get(&(scope, q.name.clone())).copied().unwrap_or(0);
        let base = |quota: Option<&QueueQuota>| QueueRow {
            kind: q.kind,
            namespace: q.namespace.clone(),
            name: q.name.clone(),
            cohort: q.cohort.clone(),
            flavor: quota.and_then(|x| x.flavor.clone()),
            resource: quota.map_or_else(|| Sym::new("-"), |x| x.resource.clone()),
            nominal: quota.map_or(0, |x| x.nominal),
            used: quota.map_or(0, |x| x.used),
            borrowed: quota.map_or(0, |x| x.borrowed),
            borrowing_limit: quota.and_then(|x| x.borrowing_limit),
            pending: q.pending,
            admitted: q.admitted,
            inadmissible: refused,
            active: q.is_active(),
            fair_share: (q.kind == QueueKind::ClusterQueue).then(|| shares.get(&q.name).copied()).flatten(),
        };
        if q.quotas.is_empty() {
            out.push(base(None));
        } else {
            out.extend(q.quotas.iter().map(|quota| base(Some(quota))));
        }
    }
    out
}

/// How much more of one resource in one flavor a ClusterQueue can take now,
/// and the most it could ever hold (Kueue v0.17, `resource_node.go`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Room {
    /// What a new workload may reserve now: its own unlent quota left, plus
    /// what the cohort has free, within the borrowing limit.
    pub available: u64,
    /// With nothing else running: the unlent quota plus every member's
    /// lendable quota, within nominal + the borrowing limit.
    pub max_capacity: u64,
    /// Of `available`, how much would be borrowed from the cohort.
    pub from_cohort: u64,
}

/// Quota counts from the moment it is reserved (admitted or waiting for
/// admission checks): `flavorsReservation`, never less than `flavorsUsage`.
fn usage(q: &QueueQuota) -> u64 {
    q.reserved.max(q.used)
}

/// The part of a member's nominal quota it never lends (`nominal −
/// lendingLimit`; all of it is lendable without a lending limit).
fn guaranteed(q: &QueueQuota) -> u64 {
    q.lending_limit.map_or(0, |l| q.nominal.saturating_sub(l))
}

/// Kueue's arithmetic for `quota` of ClusterQueue `cq`, with the other
/// members of its cohort (a flat cohort: a Cohort object's own quota and
/// parents are not modelled).
pub fn room(snap: &Snapshot, cq: &Queue, quota: &QueueQuota) -> Room {
    let used = usage(quota) as i128;
    let nominal = quota.nominal as i128;
    let Some(cohort) = cq.cohort.clone() else {
        let available = (nominal - used).max(0) as u64;
        return Room { available, max_capacity: quota.nominal, from_cohort: 0 };
    };
    let members = snap
        .queues
        .values()
        .filter(|q| q.kind == QueueKind::ClusterQueue && q.cohort.as_ref() == Some(&cohort))
        .filter_map(|q| q.quotas.iter().find(|x| x.flavor == quota.flavor && x.resource == quota.resource));
    let (mut pool, mut pool_used) = (0i128, 0i128);
    for m in members {
        let local = guaranteed(m) as i128;
        pool += m.nominal as i128 - local;
        pool_used += (usage(m) as i128 - local).max(0);
    }
    let local = guaranteed(quota) as i128;
    let local_left = (local - used).max(0);
    let mut from_cohort = (pool - pool_used).max(0);
    if let Some(limit) = quota.borrowing_limit {
        let lent_up = nominal - local;
        let used_up = (used - local).max(0);
        from_cohort = from_cohort.min((lent_up - used_up + limit as i128).max(0));
    }
    let mut max_capacity = local + pool;
    if let Some(limit) = quota.borrowing_limit {
        max_capacity = max_capacity.min(nominal + limit as i128);
    }
    let available = (local_left + from_cohort).max(0) as u64;
    // Borrowed: what this would take beyond its nominal quota.
    let borrow = (used + available as i128 - nominal).max(0).min(available as i128);
    Room { available, max_capacity: max_capacity.max(0) as u64, from_cohort: borrow as u64 }
}

/// The ClusterQueue a LocalQueue feeds.
/// The LocalQueue `local` of `namespace`.
pub fn local_queue(snap: &Snapshot, namespace: Sym, local: Sym) -> Option<&Queue> {
    snap.queues
        .values()
        .find(|q| q.kind == QueueKind::LocalQueue && q.namespace.as_ref() == Some(&namespace) && q.name == local)
        .map(|q| &**q)
}

pub fn cluster_queue_of(snap: &Snapshot, namespace: Sym, local: Sym) -> Option<&Queue> {
    let cq = (local_queue(snap, namespace, local)?.cluster_queue).clone()?;
    snap.queues.values().find(|q| q.kind == QueueKind::ClusterQueue && q.name == cq).map(|q| &**q)
}

/// A ClusterQueue's share of what its cohort lends, as Kueue's fair sharing
/// orders and preempts by it (Kueue v0.17 `dominantResourceShare`): per
/// resource, what it holds beyond its nominal quota over what the cohort's
/// members lend; the largest of those (×1000), divided by its weight.
#[derive(Clone, Debug, PartialEq)]
pub struct FairShare {
    pub queue: Sym,
    pub cohort: Sym,
    pub weight_milli: u64,
    /// The dominant resource, what the queue borrows of it and what the cohort lends.
    pub resource: Sym,
    pub borrowed: u64,
    pub lendable: u64,
    /// `None` with weight 0: an infinite share, always preempted first.
    pub weighted: Option<u64>,
    pub reclaim_within_cohort: Sym,
}

impl FairShare {
    /// `300 (24 of 80 nvidia.com/gpu lent, weight 1)`.
    pub fn explain(&self) -> String {
        if self.borrowed == 0 {
            return "0".into();
        }
        let fmt = |v| crate::model::quantity::format(self.resource.as_str(), v);
        format!(
            "{} ({} of the {} {} the cohort lends, weight {})",
            self.weighted.map_or_else(|| "infinite".into(), |w| w.to_string()),
            fmt(self.borrowed),
            fmt(self.lendable),
            self.resource,
            crate::model::quantity::format("cpu", self.weight_milli)
        )
    }
}

/// The fair shares of every ClusterQueue in `cohort`, largest first.
pub fn fair_shares(snap: &Snapshot, cohort: Sym) -> Vec<FairShare> {
    let members: Vec<&Queue> = snap
        .queues
        .values()
        .filter(|q| q.kind == QueueKind::ClusterQueue && q.cohort.as_ref() == Some(&cohort))
        .map(|q| &**q)
        .collect();
    let mut lendable: std::collections::BTreeMap<Sym, u64> = Default::default();
    for q in &members {
        for x in q.quotas.iter() {
            *lendable.entry(x.resource.clone()).or_default() += x.lending_limit.unwrap_or(x.nominal);
        }
    }
    let mut out: Vec<FairShare> = members
        .iter()
        .map(|q| {
            let mut borrowed: std::collections::BTreeMap<Sym, u64> = Default::default();
            for x in q.quotas.iter() {
                *borrowed.entry(x.resource.clone()).or_default() += usage(x).saturating_sub(x.nominal);
            }
            // The dominant resource; ties go to the GPU, what people read.
            let (resource, b, l, ratio) = lendable
                .iter()
                .map(|(r, l)| {
                    let b = borrowed.get(r).copied().unwrap_or(0);
                    (r.clone(), b, *l, if *l == 0 { 0 } else { b * 1000 / l })
                })
                .max_by_key(|(r, _, _, ratio)| (*ratio, r.as_str().contains("gpu")))
                .unwrap_or((Sym::new(crate::model::keys::RESOURCE_GPU), 0, 0, 0));
            let weight_milli = q.fair_weight_milli.unwrap_or(1000);
            FairShare {
                queue: q.name.clone(),
                cohort: cohort.clone(),
                weight_milli,
                resource,
                borrowed: b,
                lendable: l,
                weighted: (weight_milli > 0).then(|| ratio * 1000 / weight_milli),
                reclaim_within_cohort: q.reclaim_within_cohort.clone().unwrap_or_else(|| Sym::new("Never")),
            }
        })
        .collect();
    out.sort_by(|a, b| b.weighted.unwrap_or(u64::MAX).cmp(&a.weighted.unwrap_or(u64::MAX)).then(a.queue.cmp(&b.queue)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::testing::snapshot;
    use crate::model::{Queue, QueueQuota, Sym};

    fn cq(
        name: &str,
        cohort: Option<&str>,
        nominal: u64,
        borrowing: Option<u64>,
        lending: Option<u64>,
        reserved: u64,
    ) -> Queue {
        Queue {
            kind: QueueKind::ClusterQueue,
            namespace: None,
            name: Sym::new(name),
            cohort: cohort.map(Sym::new),
            cluster_queue: None,
            quotas: Box::new([QueueQuota {
                flavor: Some(Sym::new("f")),
                resource: Sym::new("nvidia.com/gpu"),
                nominal,
                borrowing_limit: borrowing,
                lending_limit: lending,
                used: reserved,
                reserved,
                borrowed: reserved.saturating_sub(nominal),
            }]),
            pending: 0,
            reserving: 0,
            admitted: 0,
            conditions: Box::new([]),
            stop_policy: None,
            strict_fifo: false,
            state: None,
            flavor_order: Box::new([Sym::new("f")]),
            fair_weight_milli: None,
            reclaim_within_cohort: None,
        }
    }

    fn room_of(queues: &[Queue], name: &str) -> Room {
        let mut snap = snapshot(vec![], vec![], vec![], 0);
        for q in queues {
            snap.queues.insert(q.key(), std::sync::Arc::new(q.clone()));
        }
        let q = queues.iter().find(|q| q.name.as_str() == name).unwrap();
        room(&snap, q, &q.quotas[0])
    }

    #[test]
    fn fair_share_is_borrowed_over_lent_by_weight_largest_first() {
        // 80 GPUs nominal in the cohort; b holds 56 on 32: 24 borrowed of 80 = 300.
        let mut b = cq("b", Some("c"), 32, None, None, 56);
        let mut heavy = cq("heavy", Some("c"), 8, None, None, 8);
        heavy.fair_weight_milli = Some(2000);
        let mut snap = snapshot(vec![], vec![], vec![], 0);
        for q in [cq("a", Some("c"), 24, None, None, 8), cq("z", Some("c"), 16, None, None, 16), heavy.clone()] {
            snap.queues.insert(q.key(), std::sync::Arc::new(q));
        }
        snap.queues.insert(b.key(), std::sync::Arc::new(b.clone()));
        let shares = fair_shares(&snap, Sym::new("c"));
        let got: Vec<(&str, Option<u64>)> = shares.iter().map(|s| (s.queue.as_str(), s.weighted)).collect();
        assert_eq!(got, [("b", Some(300)), ("a", Some(0)), ("heavy", Some(0)), ("z", Some(0))]);
        assert_eq!(shares[0].explain(), "300 (24 of the 80 nvidia.com/gpu the cohort lends, weight 1)");
        assert_eq!(shares[0].reclaim_within_cohort.as_str(), "Never", "Kueue's default");
        // Weight 2 halves it; weight 0 is infinite and first.
        b.fair_weight_milli = Some(2000);
        snap.queues.insert(b.key(), std::sync::Arc::new(b.clone()));
        assert_eq!(fair_shares(&snap, Sym::new("c"))[0].weighted, Some(150));
        b.fair_weight_milli = Some(0);
        snap.queues.insert(b.key(), std::sync::Arc::new(b));
        assert_eq!(fair_shares(&snap, Sym::new("c"))[0].weighted, None);
    }

    #[test]
    fn without_a_cohort_the_nominal_quota_is_all() {
        let q = cq("a", None, 16, None, None, 10);
        assert_eq!(room_of(&[q], "a"), Room { available: 6, max_capacity: 16, from_cohort: 0 });
    }

    #[test]
    fn kueues_worked_example_lending_and_borrowing_limits() {
        // A{N=10, lendingLimit=4} keeps 6; B{N=10, borrowingLimit=2}; the pool is 4 + 10.
        let a = cq("a", Some("c"), 10, None, Some(4), 8);
        let b = cq("b", Some("c"), 10, Some(2), None, 0);
        let both = [a.clone(), b.clone()];
        assert_eq!(room_of(&both, "a"), Room { available: 12, max_capacity: 20, from_cohort: 10 });
        assert_eq!(room_of(&both, "b"), Room { available: 12, max_capacity: 12, from_cohort: 2 });
        // B borrowing its 2 and using its 10 leaves A nothing, though A uses 8 of 10.
        let busy = [a, cq("b", Some("c"), 10, Some(2), None, 12)];
        assert_eq!(room_of(&busy, "a").available, 0);
    }

    #[test]
    fn a_borrowing_limit_of_zero_keeps_a_queue_at_its_nominal_quota() {
        let a = cq("a", Some("c"), 16, Some(0), None, 16);
        let b = cq("b", Some("c"), 64, None, None, 0);
        assert_eq!(room_of(&[a, b], "a"), Room { available: 0, max_capacity: 16, from_cohort: 0 });
    }
}
