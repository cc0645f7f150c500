//! Queues: Kueue ClusterQueues and LocalQueues, Volcano Queues, and Kueue
//! ResourceFlavors.

use super::node::{Taint, Toleration};
use super::sym::Sym;
use super::{Condition, Labels};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum QueueKind {
    ClusterQueue,
    LocalQueue,
    VolcanoQueue,
}

impl QueueKind {
    pub fn kind_name(self) -> &'static str {
        match self {
            QueueKind::ClusterQueue => "ClusterQueue",
            QueueKind::LocalQueue => "LocalQueue",
            QueueKind::VolcanoQueue => "Queue",
        }
    }

    /// Two letters for narrow columns (kubectl's short names where they exist).
    pub fn abbreviation(self) -> &'static str {
        match self {
            QueueKind::ClusterQueue => "CQ",
            QueueKind::LocalQueue => "LQ",
            QueueKind::VolcanoQueue => "VQ",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QueueKey {
    pub kind: QueueKind,
    /// LocalQueues are namespaced; the others are cluster-scoped.
    pub namespace: Option<Sym>,
    pub name: Sym,
}

/// One flavor × resource cell of a queue's quota (base units).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueQuota {
    pub flavor: Option<Sym>,
    pub resource: Sym,
    pub nominal: u64,
    pub borrowing_limit: Option<u64>,
    pub lending_limit: Option<u64>,
    /// `flavorsUsage` total (admitted workloads).
    pub used: u64,
    /// `flavorsReservation` total (quota reserved, maybe not yet admitted).
    pub reserved: u64,
    pub borrowed: u64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Queue {
    pub kind: QueueKind,
    pub namespace: Option<Sym>,
    pub name: Sym,
    pub cohort: Option<Sym>,
    /// For a LocalQueue, the ClusterQueue it feeds.
    pub cluster_queue: Option<Sym>,
    pub quotas: Box<[QueueQuota]>,
    pub pending: u32,
    pub reserving: u32,
    pub admitted: u32,
    pub conditions: Box<[Condition]>,
    pub stop_policy: Option<Sym>,
    /// ClusterQueue `spec.queueingStrategy: StrictFIFO`: a head that cannot
    /// be admitted holds back every workload behind it (the default,
    /// BestEffortFIFO, sets it aside).
    pub strict_fifo: bool,
    /// Volcano `status.state` (Open, Closed, ...).
    pub state: Option<Sym>,
    /// Flavor names in the order Kueue tries them.
    pub flavor_order: Box<[Sym]>,
    /// ClusterQueue `spec.fairSharing.weight`, in thousandths (unset: 1000).
    pub fair_weight_milli: Option<u64>,
    /// ClusterQueue `spec.preemption.reclaimWithinCohort` (unset: `Never`).
    pub reclaim_within_cohort: Option<Sym>,
}

impl Queue {
    pub fn key(&self) -> QueueKey {
        QueueKey { kind: self.kind, namespace: self.namespace.clone(), name: self.name.clone() }
    }

    pub fn quota(&self, flavor: Option<Sym>, resource: &str) -> Option<&QueueQuota> {
        self.quotas.iter().find(|q| q.flavor == flavor && q.resource.as_str() == resource)
    }

    /// Its `spec.stopPolicy` when it stops admission (`Hold`,
    /// `HoldAndDrain`); none for `None` or no policy.
    pub fn stopped_with(&self) -> Option<Sym> {
        self.stop_policy.clone().filter(|p| p.as_str() != "None")
    }

    /// False when the queue reports `Active=False` or is Closed.
    pub fn is_active(&self) -> bool {
        let inactive_condition = self.conditions.iter().any(|c| c.kind.as_str() == "Active" && !c.status);
        let closed = self.state.as_ref().is_some_and(|s| s.as_str() != "Open");
        !(inactive_condition || closed)
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Flavor {
    pub name: Sym,
    pub node_labels: Labels,
    pub node_taints: Box<[Taint]>,
    pub tolerations: Box<[Toleration]>,
}
