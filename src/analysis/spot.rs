//! Spot (preemptible) GPU nodes: how often the cloud takes them back, and
//! whether a job on them gains from the discount. Each preemption loses, on
//! average, half a checkpoint interval plus the restart; a gang loses it
//! when any of its spot nodes goes. So the share of its time a job loses is
//!
//!   f = spot nodes × preemptions per node-hour × (interval ÷ 2 + restart)
//!
//! and spot pays when its discount is above f (a useful hour on spot costs
//! (1 − discount) ÷ (1 − f) of one on demand).
//!
//! The preemption rate is estimated from the spot nodes alive: a pool keeps
//! its size, so nodes created in the last 24 hours replaced preempted ones
//! (a scale-up counts too: an upper bound), over the node-hours observed.

use std::collections::{BTreeMap, BTreeSet};

use crate::model::{GangKey, Node, Pod, Sym, Timestamp};

use super::index::Index;
use super::preemption::DEFAULT_RESTART_SECONDS;

/// The labels that mark spot capacity: Karpenter, GKE, EKS managed node
/// groups, AKS.
pub const SPOT_LABELS: [(&str, &str); 4] = [
    ("karpenter.sh/capacity-type", "spot"),
    ("cloud.google.com/gke-spot", "true"),
    ("eks.amazonaws.com/capacityType", "SPOT"),
    ("kubernetes.azure.com/scalesetpriority", "spot"),
];

/// How far back node creations count as replacements.
pub const WINDOW_SECONDS: i64 = 24 * 3600;

/// A loss share above this is called too high (a typical lesson threshold).
pub const TARGET_LOSS: f64 = 0.10;

pub fn is_spot(node: &Node) -> bool {
    SPOT_LABELS.iter().any(|(k, v)| node.label(k).is_some_and(|x| x.as_str() == *v))
}

#[derive(Clone, Debug, PartialEq)]
pub struct SpotJob {
    /// `ns/name` of the gang, or of the pod.
    pub name: String,
    pub gang: Option<GangKey>,
    pub spot_nodes: usize,
    pub gpus: u64,
    /// `kgpu.dev/checkpoint-interval`, when a member says.
    pub interval_seconds: Option<i64>,
    pub restart_seconds: i64,
    /// Share of its time lost to preemptions; `None` without an interval.
    pub lost_fraction: Option<f64>,
    /// The interval that keeps the loss at [`TARGET_LOSS`]; `None` when no
    /// interval can (the restart alone costs more).
    pub interval_for_target: Option<i64>,
}

impl SpotJob {
    /// `4 spot node(s) × 0.047 preemptions/node-hour × (4h ÷ 2 + 20m restart) = 43.4% of its time lost: …`.
    pub fn explain(&self, rate: f64) -> String {
        let age = crate::model::time::age;
        match (self.interval_seconds, self.lost_fraction) {
            (Some(t), Some(f)) => format!(
                "{} spot node(s) × {rate:.3} preemptions/node-hour × ({} ÷ 2 + {} restart) = {:.1}% of its time lost: spot pays only above a {:.1}% discount",
                self.spot_nodes,
                age(t),
                age(self.restart_seconds),
                f * 100.0,
                f * 100.0
            ),
            _ => format!(
                "{} spot node(s), no checkpoint interval known (kgpu.dev/checkpoint-interval): each preemption loses its whole run",
                self.spot_nodes
            ),
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Spot {
    pub nodes: usize,
    /// Spot nodes created within the window: replacements (or scale-ups).
    pub replaced: usize,
    pub exposure_hours: f64,
    pub rate_per_node_hour: f64,
    /// Work on spot nodes, the largest loss first.
    pub jobs: Vec<SpotJob>,
}

impl Spot {
    pub fn rate_explained(&self) -> String {
        format!(
            "{} of {} spot nodes were created in the last 24h over {:.0} node-hours observed: {:.3} preemptions per node-hour (one per node every {:.0}h)",
            self.replaced,
            self.nodes,
            self.exposure_hours,
            self.rate_per_node_hour,
            if self.rate_per_node_hour > 0.0 { 1.0 / self.rate_per_node_hour } else { f64::INFINITY }
        )
    }

    pub fn job(&self, gang: &GangKey) -> Option<&SpotJob> {
        self.jobs.iter().find(|j| j.gang.as_ref() == Some(gang))
    }
}

pub fn analyze(index: &Index<'_>, now: Timestamp) -> Spot {
    let spot: BTreeSet<Sym> = index.nodes().filter(|n| is_spot(n)).map(|n| n.name.clone()).collect();
    if spot.is_empty() {
        return Spot::default();
    }
    let mut replaced = 0;
    let mut exposure = 0.0;
    for n in index.nodes().filter(|n| spot.contains(&n.name)) {
        let age = (now - n.created).clamp(0, WINDOW_SECONDS);
        if now - n.created < WINDOW_SECONDS {
            replaced += 1;
        }
        exposure += age as f64 / 3600.0;
    }
    let rate = if exposure > 0.0 { replaced as f64 / exposure } else { 0.0 };
    // Units of work: a gang, or a pod outside gangs.
    let mut units: BTreeMap<String, (Option<GangKey>, Vec<&Pod>)> = BTreeMap::new();
    for node in &spot {
        for p in index.pods_on(node).iter().filter(|p| p.holds_resources() && p.requests.gpu > 0) {
            let (name, gang) = match index.gang_of(&p.key()) {
                Some(g) => (format!("{}/{}", g.namespace, g.name), Some(g.clone())),
                None => (p.key().to_string(), None),
            };
            let entry = units.entry(name).or_insert_with(|| (gang.clone(), Vec::new()));
            if entry.1.is_empty() {
                entry.1 = match &gang {
                    Some(g) => index.members(g).iter().copied().filter(|m| m.holds_resources()).collect(),
                    None => vec![*p],
                };
            }
        }
    }
    let mut jobs: Vec<SpotJob> =
        units.into_iter().map(|(name, (gang, members))| job(name, gang, &members, &spot, rate)).collect();
    jobs.sort_by(|a, b| {
        b.lost_fraction
            .unwrap_or(f64::INFINITY)
            .total_cmp(&a.lost_fraction.unwrap_or(f64::INFINITY))
            .then(a.name.cmp(&b.name))
    });
    Spot { nodes: spot.len(), replaced, exposure_hours: exposure, rate_per_node_hour: rate, jobs }
}

fn job(name: String, gang: Option<GangKey>, members: &[&Pod], spot: &BTreeSet<Sym>, rate: f64) -> SpotJob {
    let spot_nodes =
        members.iter().filter_map(|m| m.node.clone()).filter(|n| spot.contains(n)).collect::<BTreeSet<_>>().len();
    let resume = members.iter().filter_map(|m| m.resume.as_deref());
    let interval = resume.clone().filter_map(|r| r.checkpoint_interval_seconds).max().map(i64::from);
    let restart = resume.filter_map(|r| r.restart_seconds).max().map_or(DEFAULT_RESTART_SECONDS, i64::from);
    let per_hour = spot_nodes as f64 * rate;
    let lost_fraction = interval.map(|t| (per_hour * (t as f64 / 2.0 + restart as f64) / 3600.0).min(1.0));
    // f = k·r·(T/2 + R) ≤ target  ⇔  T ≤ 2·(target ÷ (k·r) − R)
    let interval_for_target = (per_hour > 0.0)
        .then(|| 2.0 * (TARGET_LOSS * 3600.0 / per_hour - restart as f64))
        .filter(|t| *t > 0.0)
        .map(|t| t as i64);
    SpotJob {
        name,
        gang,
        spot_nodes,
        gpus: members.iter().map(|m| m.requests.gpu).sum(),
        interval_seconds: interval,
        restart_seconds: restart,
        lost_fraction,
        interval_for_target,
    }
}
