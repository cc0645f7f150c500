//! What preempting lower-priority pods for a pending pod would cost: the
//! victims kube-scheduler would pick, and the work they lose. "Eviction is
//! free" is wrong for training: a victim loses everything since its last
//! checkpoint, plus the time to start again, and a gang member's victim
//! restarts its whole gang.
//!
//! Victims follow kube-scheduler's DefaultPreemption: on each node every
//! lower-priority pod is removed, then the most important (higher priority,
//! then longer running) are reprieved while the pod still fits; the node
//! chosen has the lowest highest-victim priority, then the smallest sum of
//! victim priorities, then the fewest victims, then the latest-started
//! highest-priority victims (`pickOneNodeForPreemption`; PodDisruptionBudgets
//! are not modelled). None of these weighs the work lost.

use std::collections::BTreeSet;

use crate::model::{GangKey, Pod, PodKey, Sym};

use super::lost_work::LostWork;

use super::fit::{self, Shape};
use super::index::Index;
use super::tally::Tally;

pub use super::lost_work::DEFAULT_RESTART_SECONDS;

/// One unit of work a preemption restarts: a pod, or the whole gang of a pod.
#[derive(Clone, Debug, PartialEq)]
pub struct Victim {
    /// `ns/name` of the pod, or of its gang.
    pub name: String,
    pub gang: bool,
    /// Pods that restart (the gang's members on every node).
    pub pods: usize,
    pub gpus: u64,
    pub priority: i32,
    /// Its price, as every eviction is priced (see `lost_work`).
    pub lost: LostWork,
    pub gpu_hours: f64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Preemption {
    /// The node kube-scheduler would preempt on, and its victims.
    pub node: Sym,
    pub victims: Vec<Victim>,
    pub gpu_hours: f64,
    /// The node where preempting loses the least work, when not the same.
    pub cheapest: Option<(Sym, f64)>,
    /// The pending pod's PriorityClass says `preemptionPolicy: Never`.
    pub policy_never: bool,
}

impl Preemption {
    /// `preempting on gpu-03 evicts gang ml/pretrain (4 pods, 32 GPUs): 25.6 GPU-hours of work lost`.
    pub fn summary(&self) -> String {
        let victims: Vec<String> = self
            .victims
            .iter()
            .map(|v| format!("{} {} ({} pod(s), {} GPUs)", if v.gang { "gang" } else { "pod" }, v.name, v.pods, v.gpus))
            .collect();
        format!(
            "preempting on {} evicts {}: {:.1} GPU-hours of work lost",
            self.node,
            victims.join(", "),
            self.gpu_hours
        )
    }

    /// One line per victim: the arithmetic.
    pub fn arithmetic(&self) -> Vec<String> {
        self.victims.iter().map(|v| format!("{}: {}", v.name, super::lost_work::arithmetic(&v.lost))).collect()
    }
}

/// The cost of preempting for `pod`, when some node would fit it once
/// lower-priority pods are gone; `None` when preemption cannot help.
pub fn cost(index: &Index<'_>, pod: &Pod) -> Option<Preemption> {
    let shape = Shape::of(pod);
    let mut candidates: Vec<(Sym, Vec<&Pod>)> = Vec::new();
    for node in index.nodes() {
        let on_node: Vec<&Pod> = index.pods_on(&node.name).iter().copied().filter(|p| p.holds_resources()).collect();
        let mut lower: Vec<&Pod> = on_node.iter().copied().filter(|p| p.priority < pod.priority).collect();
        // Cheap first: a node without lower-priority pods offers no victims.
        if lower.is_empty() || !fit::placement_verdicts(&shape, node).is_empty() {
            continue;
        }
        let mut kept = Tally::default();
        for p in on_node.iter().filter(|p| p.priority >= pod.priority) {
            kept.add_pod(&p.requests);
        }
        if !fit::resource_shortfalls(&pod.requests, node, &kept).is_empty() {
            continue;
        }
        // Reprieve the most important first.
        lower.sort_by(|a, b| b.priority.cmp(&a.priority).then(a.transitioned.cmp(&b.transitioned)));
        let mut victims = Vec::new();
        for p in lower {
            let mut with = kept.clone();
            with.add_pod(&p.requests);
            if fit::resource_shortfalls(&pod.requests, node, &with).is_empty() {
                kept = with;
            } else {
                victims.push(p);
            }
        }
        candidates.push((node.name.clone(), victims));
    }
    let key = |v: &[&Pod]| {
        let top = v.iter().map(|p| p.priority).max().unwrap_or(i32::MIN);
        let sum: i64 = v.iter().map(|p| i64::from(p.priority)).sum();
        // Then the latest start among the top-priority victims' earliest.
        let earliest = v.iter().filter(|p| p.priority == top).map(|p| p.transitioned).min().unwrap_or(0);
        (top, sum, v.len(), std::cmp::Reverse(earliest))
    };
    candidates.sort_by(|a, b| key(&a.1).cmp(&key(&b.1)).then(a.0.cmp(&b.0)));
    let costed: Vec<(Sym, Vec<Victim>, f64)> = candidates
        .iter()
        .map(|(node, victims)| {
            let units = units_of(index, victims);
            let hours = units.iter().map(|v| v.gpu_hours).sum();
            (node.clone(), units, hours)
        })
        .collect();
    let (node, victims, gpu_hours) = costed.first().cloned()?;
    let cheapest = costed
        .iter()
        .min_by(|a, b| a.2.total_cmp(&b.2).then(a.0.cmp(&b.0)))
        .filter(|c| c.0 != node && c.2 + 0.05 < gpu_hours)
        .map(|c| (c.0.clone(), c.2));
    Some(Preemption { node, victims, gpu_hours, cheapest, policy_never: pod.preempt_never })
}

/// The victims as units of work: a gang member stands for its whole gang.
fn units_of(index: &Index<'_>, victims: &[&Pod]) -> Vec<Victim> {
    let mut seen: BTreeSet<GangKey> = BTreeSet::new();
    let mut out = Vec::new();
    for p in victims {
        let (name, gang, members): (String, bool, Vec<&Pod>) = match index.gang_of(&p.key()) {
            Some(g) => {
                if !seen.insert(g.clone()) {
                    continue;
                }
                let members = index.members(g).iter().copied().filter(|m| m.holds_resources()).collect();
                (format!("{}/{}", g.namespace, g.name), true, members)
            }
            None => (PodKey::to_string(&p.key()), false, vec![*p]),
        };
        out.push(unit(index, name, gang, &members));
    }
    out
}

fn unit(index: &Index<'_>, name: String, gang: bool, members: &[&Pod]) -> Victim {
    let lost = super::lost_work::of(index, members);
    Victim {
        name,
        gang,
        pods: members.len(),
        gpus: members.iter().map(|m| m.requests.gpu).sum(),
        priority: members.iter().map(|m| m.priority).max().unwrap_or(0),
        gpu_hours: lost.gpu_hours,
        lost,
    }
}
