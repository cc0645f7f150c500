//! Gangs: groups of pods that must run together — Kueue Workloads and
//! Volcano PodGroups.

use std::sync::Arc;

use super::resources::Resources;
use super::sym::Sym;
use super::{Condition, Timestamp};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GangKind {
    KueueWorkload,
    VolcanoPodGroup,
}

impl GangKind {
    /// The Kubernetes kind, as the JSON snapshot names it.
    pub fn kind_name(self) -> &'static str {
        match self {
            GangKind::KueueWorkload => "Workload",
            GangKind::VolcanoPodGroup => "PodGroup",
        }
    }

    /// Two letters for a narrow column (`WL`, `PG`).
    pub fn abbreviation(self) -> &'static str {
        match self {
            GangKind::KueueWorkload => "WL",
            GangKind::VolcanoPodGroup => "PG",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GangKey {
    pub kind: GangKind,
    pub namespace: Sym,
    pub name: Arc<str>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct PodSet {
    pub name: Sym,
    pub count: u32,
    pub min_count: Option<u32>,
    /// Requests of one pod of the set.
    pub requests: Resources,
    /// The pod template's placement constraints.
    pub node_selector: super::Labels,
    pub tolerations: Box<[super::Toleration]>,
    /// Required node affinity terms (ORed); Kueue's flavor fit reads them.
    pub affinity: Box<[super::NodeSelectorTerm]>,
    /// The template's `resourceClaims`: DRA devices each pod asks for.
    pub claims: Box<[super::PodClaim]>,
}

impl PodSet {
    /// What every pod of `sets` requests, together.
    pub fn total_of(sets: &[PodSet]) -> Resources {
        sets.iter().fold(Resources::default(), |acc, ps| acc.plus(&ps.requests.times(u64::from(ps.count))))
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct PodSetAssignment {
    pub name: Sym,
    /// resource → flavor
    pub flavors: Box<[(Sym, Sym)]>,
    pub count: u32,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Admission {
    pub cluster_queue: Sym,
    pub assignments: Box<[PodSetAssignment]>,
}

/// One admission check's state on a Kueue Workload (`status.admissionChecks[]`):
/// a controller (ProvisioningRequest, MultiKueue, a custom one) that must say
/// Ready before Kueue admits a workload whose quota it has reserved.
#[derive(Clone, Debug, PartialEq)]
pub struct AdmissionCheckState {
    pub name: Sym,
    /// `Pending`, `Ready`, `Retry` or `Rejected`.
    pub state: Sym,
    pub message: Box<str>,
    pub since: Timestamp,
}

#[derive(Clone, Debug, PartialEq)]
pub struct RequeueState {
    pub count: u32,
    pub requeue_at: Option<Timestamp>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Gang {
    pub kind: GangKind,
    pub namespace: Sym,
    pub name: Arc<str>,
    /// LocalQueue (Kueue) or Queue (Volcano).
    pub queue: Option<Sym>,
    /// Members that must be placed together: Volcano `minMember`, or the
    /// sum of Kueue pod-set counts (`minCount` when partial admission is on).
    pub min_members: u32,
    pub pod_sets: Box<[PodSet]>,
    pub priority: i32,
    pub created: Timestamp,
    /// `metadata.uid`: Kueue orders workloads of one priority created in
    /// the same second by it.
    pub uid: Option<super::pod::Uid>,
    /// Kueue `spec.active` (false = deactivated).
    pub active: bool,
    pub conditions: Box<[Condition]>,
    pub admission: Option<Admission>,
    /// Kueue: the admission checks and their states.
    pub admission_checks: Box<[AdmissionCheckState]>,
    pub requeue: Option<RequeueState>,
    /// Volcano `status.phase`.
    pub phase: Option<Sym>,
    /// The object that owns a Kueue Workload (a Job, JobSet, ...); its pods
    /// carry the same owner.
    pub owner: Option<super::pod::Owner>,
    /// Volcano `minResources`.
    pub min_resources: Option<Resources>,
    /// Kueue: what it counts for the workload that its pod sets do not
    /// request themselves — DRA devices under the names its
    /// `deviceClassMappings` give them (`whole-gpus: 2`) — in total, from
    /// `status.resourceRequests` or the admission's `resourceUsage`.
    pub kueue_counted: Option<Resources>,
    pub running: u32,
}

impl Gang {
    pub fn key(&self) -> GangKey {
        GangKey { kind: self.kind, namespace: self.namespace.clone(), name: self.name.clone() }
    }

    pub fn condition(&self, kind: &str) -> Option<&Condition> {
        self.conditions.iter().find(|c| c.kind.as_str() == kind)
    }

    pub fn condition_true(&self, kind: &str) -> bool {
        self.condition(kind).is_some_and(|c| c.status)
    }

    /// Total requests of every member.
    pub fn total_requests(&self) -> Resources {
        let pods = PodSet::total_of(&self.pod_sets);
        match &self.kueue_counted {
            Some(extra) => pods.plus(extra),
            None => pods,
        }
    }

    /// GPUs per member pod, when the gang is uniform in whole GPUs.
    pub fn gpus_per_pod(&self) -> u64 {
        self.pod_sets.iter().map(|ps| ps.requests.gpu).max().unwrap_or(0)
    }

    pub fn total_pods(&self) -> u32 {
        self.pod_sets.iter().map(|ps| ps.count).sum()
    }

    /// The pods a pod set should have now: what Kueue admitted (partial
    /// admission may grant fewer than asked, down to `minCount`), else its count.
    pub fn expected_pods(&self, set: &PodSet) -> u32 {
        self.admission
            .as_ref()
            .and_then(|a| a.assignments.iter().find(|x| x.name == set.name))
            .filter(|x| x.count > 0)
            .map_or(set.count, |x| x.count)
    }

    /// Kueue: quota reserved (admitted or waiting for checks). Volcano: past Pending.
    pub fn has_quota(&self) -> bool {
        match self.kind {
            GangKind::KueueWorkload => self.condition_true("QuotaReserved") || self.admission.is_some(),
            GangKind::VolcanoPodGroup => {
                matches!(self.phase.as_ref().map(|p| p.as_str()), Some("Inqueue" | "Running" | "Unknown" | "Completed"))
            }
        }
    }

    pub fn is_finished(&self) -> bool {
        self.condition_true("Finished") || self.phase.as_ref().is_some_and(|p| p.as_str() == "Completed")
    }
}
