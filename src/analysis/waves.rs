//! Driver-upgrade waves, following the GPU Operator's
//! `nvidia.com/gpu-driver-upgrade-state` label (every state in
//! `assets/reference/driver-upgrade-states.tsv`): the board (nodes by state,
//! time in state, stuck detection) and a planner for the next waves.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::model::{DriverVersion, Node, Sym, Timestamp};

use super::Thresholds;
use super::compat::{self, Verdict};
use super::index::Index;

/// The upgrade states in the order of the happy path (from the operator's
/// constants), then the side states.
pub const STATES: [&str; 13] = [
    "upgrade-required",
    "cordon-required",
    "wait-for-jobs-required",
    "pod-deletion-required",
    "drain-required",
    "node-maintenance-required",
    "post-maintenance-required",
    "pod-restart-required",
    "validation-required",
    "uncordon-required",
    "upgrade-done",
    "upgrade-failed",
    "",
];

pub fn state_rank(state: &str) -> usize {
    STATES.iter().position(|s| *s == state).unwrap_or(STATES.len())
}

#[derive(Clone, Debug, PartialEq)]
pub struct UpgradeRow {
    pub node: Sym,
    /// `None`: no label (the upgrade controller is off or has not seen the node).
    pub state: Option<Sym>,
    pub since: Option<Timestamp>,
    pub seconds_in_state: Option<i64>,
    pub stuck: bool,
    pub skip: bool,
    pub driver: Option<String>,
}

impl UpgradeRow {
    pub fn state_str(&self) -> &'static str {
        self.state.map_or("unknown", |s| s.as_str())
    }
    pub fn failed(&self) -> bool {
        self.state.is_some_and(|s| s.as_str() == "upgrade-failed")
    }
    fn in_progress(&self) -> bool {
        self.state.is_some_and(|s| !matches!(s.as_str(), "upgrade-done" | "upgrade-failed" | ""))
    }
}

fn stuck_after(state: Option<Sym>, t: &Thresholds) -> i64 {
    if state.is_some_and(|s| s.as_str() == "upgrade-required") {
        t.upgrade_queued_stuck_after
    } else {
        t.upgrade_stuck_after
    }
}

/// Every GPU node with its upgrade state; stuck ones first (longest first),
/// then failed, then in progress by state, then done, then unknown.
pub fn board<'a>(nodes: impl Iterator<Item = &'a Node>, now: Timestamp, t: &Thresholds) -> Vec<UpgradeRow> {
    let mut rows: Vec<UpgradeRow> = nodes
        .filter(|n| n.is_gpu_node())
        .map(|n| {
            let state = n.operator.upgrade_state;
            let secs = n.operator.upgrade_since.map(|s| (now - s).max(0));
            let in_progress = state.is_some_and(|s| !matches!(s.as_str(), "upgrade-done" | "upgrade-failed"));
            UpgradeRow {
                node: n.name,
                state,
                since: n.operator.upgrade_since,
                seconds_in_state: if state.is_some() { secs } else { None },
                stuck: in_progress && secs.is_some_and(|s| s >= stuck_after(state, t)),
                skip: n.operator.upgrade_skip,
                driver: n.gpu.driver.as_ref().map(|d| d.to_string()),
            }
        })
        .collect();
    rows.sort_by(|a, b| {
        let group = |r: &UpgradeRow| {
            if r.stuck {
                0
            } else if r.failed() {
                1
            } else if r.in_progress() {
                2
            } else if r.state.is_some() {
                3
            } else {
                4
            }
        };
        group(a)
            .cmp(&group(b))
            .then_with(|| {
                b.seconds_in_state.unwrap_or(0).cmp(&a.seconds_in_state.unwrap_or(0)).then(std::cmp::Ordering::Equal)
            })
            .then_with(|| state_rank(a.state_str()).cmp(&state_rank(b.state_str())))
            .then_with(|| a.node.cmp(&b.node))
    });
    rows
}

/// `maxUnavailable`: an absolute count or a percentage of GPU nodes (rounded up).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MaxUnavailable {
    Count(u32),
    Percent(u32),
}

impl MaxUnavailable {
    pub fn parse(s: &str) -> Option<MaxUnavailable> {
        match s.trim().strip_suffix('%') {
            Some(p) => p.trim().parse().ok().map(MaxUnavailable::Percent),
            None => s.trim().parse().ok().map(MaxUnavailable::Count),
        }
    }
    fn resolve(self, total: u32) -> u32 {
        match self {
            MaxUnavailable::Count(n) => n,
            MaxUnavailable::Percent(p) => (total * p).div_ceil(100),
        }
    }
}

/// The upgrade policy fields that bound a wave (defaults as in the operator:
/// `maxParallelUpgrades` 1, `maxUnavailable` 25%).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    /// 0 = unlimited.
    pub max_parallel: u32,
    pub max_unavailable: MaxUnavailable,
}

impl Default for Policy {
    fn default() -> Self {
        Policy { max_parallel: 1, max_unavailable: MaxUnavailable::Percent(25) }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Break {
    pub pod: String,
    pub node: Sym,
    pub before: Verdict,
    pub after: Verdict,
    pub reason: String,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Wave {
    pub index: usize,
    pub canary: bool,
    pub nodes: Vec<Sym>,
    /// Running gangs kept whole inside this wave.
    pub gangs: Vec<String>,
    /// Workloads on these nodes that the target driver would break.
    pub breaks: Vec<Break>,
    /// Set when a gang spans more nodes than a wave may take.
    pub oversized: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct WavePlan {
    pub target: String,
    pub wave_size: u32,
    pub waves: Vec<Wave>,
    /// Nodes left out, and why (skip label, already on target, not ready...).
    pub excluded: Vec<(Sym, String)>,
}

/// Waves that take every GPU node to `target`: a one-node canary first,
/// then waves of at most `min(maxParallelUpgrades, maxUnavailable − nodes
/// already unavailable)`, never splitting a running gang across waves,
/// least-loaded nodes first.
pub fn plan(index: &Index<'_>, target: &DriverVersion, policy: Policy) -> WavePlan {
    let gpu_nodes: Vec<&Node> = index.nodes().filter(|n| n.is_gpu_node()).collect();
    let total = gpu_nodes.len() as u32;
    let unavailable_now = gpu_nodes.iter().filter(|n| n.unschedulable || !n.is_ready()).count() as u32;
    let budget = policy.max_unavailable.resolve(total).saturating_sub(unavailable_now).max(1);
    let wave_size = if policy.max_parallel == 0 { budget } else { budget.min(policy.max_parallel) };

    let mut excluded = Vec::new();
    let mut candidates: Vec<&Node> = Vec::new();
    for n in &gpu_nodes {
        if n.operator.upgrade_skip {
            excluded.push((n.name, "nvidia.com/gpu-driver-upgrade.skip=true".to_string()));
        } else if n.gpu.driver.as_ref() == Some(target) {
            excluded.push((n.name, format!("already on {target}")));
        } else {
            candidates.push(n);
        }
    }

    // Nodes joined by running gangs move together (union-find over gang members).
    let names: Vec<Sym> = candidates.iter().map(|n| n.name).collect();
    let mut parent: HashMap<Sym, Sym> = names.iter().map(|n| (*n, *n)).collect();
    fn root(parent: &mut HashMap<Sym, Sym>, x: Sym) -> Sym {
        let mut r = x;
        while let Some(&p) = parent.get(&r) {
            if p == r {
                break;
            }
            r = p;
        }
        parent.insert(x, r);
        r
    }
    let mut gangs_of_node: HashMap<Sym, BTreeSet<String>> = HashMap::new();
    for (key, _) in index.snap.gangs.iter() {
        let nodes: BTreeSet<Sym> = index
            .members(key)
            .iter()
            .filter(|p| p.holds_resources())
            .filter_map(|p| p.node)
            .filter(|n| parent.contains_key(n))
            .collect();
        let label = format!("{}/{}", key.namespace, key.name);
        for n in &nodes {
            gangs_of_node.entry(*n).or_default().insert(label.clone());
        }
        let mut it = nodes.into_iter();
        if let Some(first) = it.next() {
            for other in it {
                let (a, b) = (root(&mut parent, first), root(&mut parent, other));
                if a != b {
                    parent.insert(b, a);
                }
            }
        }
    }
    let mut groups: BTreeMap<Sym, Vec<&Node>> = BTreeMap::new();
    for n in &candidates {
        let r = root(&mut parent, n.name);
        groups.entry(r).or_default().push(n);
    }
    let load = |nodes: &[&Node]| -> usize {
        nodes.iter().map(|n| index.pods_on(n.name).iter().filter(|p| p.wants_gpu()).count()).sum()
    };
    let mut units: Vec<Vec<&Node>> = groups.into_values().collect();
    units.sort_by(|a, b| load(a).cmp(&load(b)).then(a.len().cmp(&b.len())).then(a[0].name.cmp(&b[0].name)));

    let mut waves: Vec<Wave> = Vec::new();
    // Canary: the lightest single-node unit.
    if let Some(pos) = units.iter().position(|u| u.len() == 1) {
        let unit = units.remove(pos);
        waves.push(make_wave(index, target, 0, true, unit, &gangs_of_node, false));
    }
    let mut current: Vec<&Node> = Vec::new();
    for unit in units {
        if unit.len() as u32 > wave_size {
            if !current.is_empty() {
                let idx = waves.len();
                waves.push(make_wave(index, target, idx, false, std::mem::take(&mut current), &gangs_of_node, false));
            }
            let idx = waves.len();
            waves.push(make_wave(index, target, idx, false, unit, &gangs_of_node, true));
            continue;
        }
        if (current.len() + unit.len()) as u32 > wave_size {
            let idx = waves.len();
            waves.push(make_wave(index, target, idx, false, std::mem::take(&mut current), &gangs_of_node, false));
        }
        current.extend(unit);
    }
    if !current.is_empty() {
        let idx = waves.len();
        waves.push(make_wave(index, target, idx, false, current, &gangs_of_node, false));
    }
    WavePlan { target: target.to_string(), wave_size, waves, excluded }
}

fn make_wave(
    index: &Index<'_>,
    target: &DriverVersion,
    idx: usize,
    canary: bool,
    nodes: Vec<&Node>,
    gangs_of_node: &HashMap<Sym, BTreeSet<String>>,
    oversized: bool,
) -> Wave {
    let mut gangs = BTreeSet::new();
    let mut breaks = Vec::new();
    for n in &nodes {
        if let Some(g) = gangs_of_node.get(&n.name) {
            gangs.extend(g.iter().cloned());
        }
        let before = compat::node_facts(n);
        let mut after = before.clone();
        after.driver = Some(target.clone());
        after.cuda = crate::reference::cuda::tables().max_native_cuda(target);
        for p in index.pods_on(n.name) {
            let Some(need) = p.cuda.as_deref().and_then(compat::need_of) else { continue };
            let (vb, _) = compat::verdict(&need, &before, index.now);
            let (va, reason) = compat::verdict(&need, &after, index.now);
            if va > vb {
                breaks.push(Break {
                    pod: format!("{}/{}", p.namespace, p.name),
                    node: n.name,
                    before: vb,
                    after: va,
                    reason,
                });
            }
        }
    }
    Wave {
        index: idx,
        canary,
        nodes: nodes.iter().map(|n| n.name).collect(),
        gangs: gangs.into_iter().collect(),
        breaks,
        oversized,
    }
}
