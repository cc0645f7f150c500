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

use crate::model::{GangKey, Pod, PodKey, Sym, Timestamp};

use super::fit::{self, Shape};
use super::index::Index;
use super::tally::Tally;

/// Restart cost when a pod does not say (`kgpu.dev/restart-seconds`):
/// rescheduling, image pull, NCCL initialisation and checkpoint load.
pub const DEFAULT_RESTART_SECONDS: i64 = 600;

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
    /// Seconds of work since its last checkpoint (or since it started).
    pub since_checkpoint: i64,
    /// `false`: no checkpoint annotation; all its run so far is counted.
    pub checkpoint_known: bool,
    pub restart_seconds: i64,
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
        self.victims
            .iter()
            .map(|v| {
                format!(
                    "{}: {} GPUs × ({} since its {} + {} restart) = {:.1} GPU-hours",
                    v.name,
                    v.gpus,
                    crate::model::time::age(v.since_checkpoint),
                    if v.checkpoint_known { "last checkpoint" } else { "start (no checkpoint annotation)" },
                    crate::model::time::age(v.restart_seconds),
                    v.gpu_hours
                )
            })
            .collect()
    }
}

/// The cost of preempting for `pod`, when some node would fit it once
/// lower-priority pods are gone; `None` when preemption cannot help.
pub fn cost(index: &Index<'_>, pod: &Pod) -> Option<Preemption> {
    let shape = Shape::of(pod);
    let mut candidates: Vec<(Sym, Vec<&Pod>)> = Vec::new();
    for node in index.nodes() {
        let on_node: Vec<&Pod> = index.pods_on(node.name).iter().copied().filter(|p| p.holds_resources()).collect();
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
        candidates.push((node.name, victims));
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
            (*node, units, hours)
        })
        .collect();
    let (node, victims, gpu_hours) = costed.first().cloned()?;
    let cheapest = costed
        .iter()
        .min_by(|a, b| a.2.total_cmp(&b.2).then(a.0.cmp(&b.0)))
        .filter(|c| c.0 != node && c.2 + 0.05 < gpu_hours)
        .map(|c| (c.0, c.2));
    Some(Preemption { node, victims, gpu_hours, cheapest, policy_never: pod.preempt_never })
}

/// The victims as units of work: a gang member stands for its whole gang.
fn units_of(index: &Index<'_>, victims: &[&Pod]) -> Vec<Victim> {
    let now = index.now;
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
        out.push(unit(name, gang, &members, now));
    }
    out
}

fn unit(name: String, gang: bool, members: &[&Pod], now: Timestamp) -> Victim {
    let started = members.iter().map(|m| m.transitioned).min().unwrap_or(now);
    let checkpoint = members.iter().filter_map(|m| m.resume.as_ref().and_then(|r| r.last_checkpoint)).max();
    let since = checkpoint.map_or(started, |c| c.max(started));
    let restart = members
        .iter()
        .filter_map(|m| m.resume.as_ref().and_then(|r| r.restart_seconds))
        .max()
        .map_or(DEFAULT_RESTART_SECONDS, i64::from);
    let gpus: u64 = members.iter().map(|m| m.requests.gpu).sum();
    let since_checkpoint = (now - since).max(0);
    Victim {
        name,
        gang,
        pods: members.len(),
        gpus,
        priority: members.iter().map(|m| m.priority).max().unwrap_or(0),
        since_checkpoint,
        checkpoint_known: checkpoint.is_some(),
        restart_seconds: restart,
        gpu_hours: gpus as f64 * (since_checkpoint + restart) as f64 / 3600.0,
    }
}
