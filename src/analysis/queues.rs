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
    pub active: bool,
}

/// One row per queue × flavor × resource; LocalQueues without quotas of
/// their own get one row with their counts.
pub fn rows(snap: &Snapshot) -> Vec<QueueRow> {
    let mut out = Vec::new();
    for q in snap.queues.values() {
        let base = |quota: Option<&QueueQuota>| QueueRow {
            kind: q.kind,
            namespace: q.namespace,
            name: q.name,
            cohort: q.cohort,
            flavor: quota.and_then(|x| x.flavor),
            resource: quota.map_or_else(|| Sym::new("-"), |x| x.resource),
            nominal: quota.map_or(0, |x| x.nominal),
            used: quota.map_or(0, |x| x.used),
            borrowed: quota.map_or(0, |x| x.borrowed),
            borrowing_limit: quota.and_then(|x| x.borrowing_limit),
            pending: q.pending,
            admitted: q.admitted,
            active: q.is_active(),
        };
        if q.quotas.is_empty() {
            out.push(base(None));
        } else {
            out.extend(q.quotas.iter().map(|quota| base(Some(quota))));
        }
    }
    out
}

/// What other ClusterQueues of the cohort leave unused (and may lend) of
/// `resource` in `flavor`.
pub fn cohort_lendable(snap: &Snapshot, queue: &Queue, flavor: Option<Sym>, resource: Sym) -> u64 {
    let Some(cohort) = queue.cohort else { return 0 };
    snap.queues
        .values()
        .filter(|q| q.kind == QueueKind::ClusterQueue && q.cohort == Some(cohort) && q.name != queue.name)
        .filter_map(|q| q.quotas.iter().find(|x| x.flavor == flavor && x.resource == resource))
        .map(|x| {
            let unused = x.nominal.saturating_sub(x.used);
            match x.lending_limit {
                Some(limit) => unused.min(limit),
                None => unused,
            }
        })
        .sum()
}

/// The most `queue` can hold of `resource` in `flavor`: nominal plus what it
/// may borrow from its cohort.
pub fn capacity(snap: &Snapshot, queue: &Queue, quota: &QueueQuota) -> u64 {
    let lendable = cohort_lendable(snap, queue, quota.flavor, quota.resource);
    let borrowable = match quota.borrowing_limit {
        Some(limit) => lendable.min(limit),
        None => lendable,
    };
    quota.nominal + borrowable
}

/// The ClusterQueue a LocalQueue feeds.
pub fn cluster_queue_of(snap: &Snapshot, namespace: Sym, local: Sym) -> Option<&Queue> {
    let lq = snap
        .queues
        .values()
        .find(|q| q.kind == QueueKind::LocalQueue && q.namespace == Some(namespace) && q.name == local)?;
    let cq = lq.cluster_queue?;
    snap.queues.values().find(|q| q.kind == QueueKind::ClusterQueue && q.name == cq).map(|q| &**q)
}
