//! Driver-upgrade waves, following the GPU Operator's
//! `nvidia.com/gpu-driver-upgrade-state` label (every state in
//! `assets/reference/driver-upgrade-states.tsv`): the board (nodes by state,
//! time in state, stuck detection) and a planner for the next waves.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::model::{DriverVersion, Node, Sym, Timestamp, UpgradePolicy};

use super::Thresholds;
use super::compat::{self, Verdict};
use super::fleet::{has_gpus, node_driver};
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
    pub driver: Option<DriverVersion>,
    /// `upgrade-done` on a driver other than the operator's target: the
    /// label is not the driver (the controller has not reached the node yet).
    pub done_off_target: bool,
}

impl UpgradeRow {
    pub fn state_str(&self) -> &str {
        self.state.as_ref().map_or("unknown", |s| s.as_str())
    }
    pub fn failed(&self) -> bool {
        self.state.as_ref().is_some_and(|s| s.as_str() == "upgrade-failed")
    }
    fn in_progress(&self) -> bool {
        self.state.as_ref().is_some_and(|s| !matches!(s.as_str(), "upgrade-done" | "upgrade-failed" | ""))
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
/// then failed, then in progress by state, then done on an old driver,
/// then done, then unknown. A node labelled done on another driver than
/// `target_of` it (what the operator installs there) says so.
pub fn board<'a>(
    index: &Index<'a>,
    nodes: impl Iterator<Item = &'a Node>,
    now: Timestamp,
    t: &Thresholds,
    target_of: impl Fn(&Node) -> Option<DriverVersion>,
) -> Vec<UpgradeRow> {
    // GPU nodes whatever way they offer GPUs (a DRA-only node advertises no
    // nvidia.com/gpu and may carry no GFD label), with the driver they run.
    let mut rows: Vec<UpgradeRow> = nodes
        .filter(|n| has_gpus(index, n))
        .map(|n| {
            let driver = node_driver(index, n);
            let state = n.operator.upgrade_state.clone();
            let secs = n.operator.upgrade_since.map(|s| (now - s).max(0));
            let in_progress = state.as_ref().is_some_and(|s| !matches!(s.as_str(), "upgrade-done" | "upgrade-failed"));
            UpgradeRow {
                node: n.name.clone(),
                state: state.clone(),
                since: n.operator.upgrade_since,
                seconds_in_state: if state.is_some() { secs } else { None },
                stuck: in_progress && secs.is_some_and(|s| s >= stuck_after(state.clone(), t)),
                skip: n.operator.upgrade_skip,
                done_off_target: state.is_some_and(|s| s.as_str() == "upgrade-done")
                    && target_of(n).is_some_and(|t| driver.as_ref().is_some_and(|d| *d != t)),
                driver,
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
            } else if r.done_off_target {
                3
            } else if r.state.is_some() {
                4
            } else {
                5
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

impl Policy {
    /// The bounds an operator object sets: its `upgradePolicy`'s fields,
    /// the operator's defaults for those it leaves unset (or writes badly).
    pub fn from_operator(u: &UpgradePolicy) -> Policy {
        let d = Policy::default();
        Policy {
            max_parallel: u.max_parallel.unwrap_or(d.max_parallel),
            max_unavailable: u.max_unavailable.as_deref().and_then(MaxUnavailable::parse).unwrap_or(d.max_unavailable),
        }
    }
}

impl std::fmt::Display for MaxUnavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MaxUnavailable::Count(n) => write!(f, "{n}"),
            MaxUnavailable::Percent(p) => write!(f, "{p}%"),
        }
    }
}

/// The bounds waves keep: the ones chosen, else what the operator's object
/// sets, else the operator's defaults; and which of these they are.
pub fn bounds_for(chosen: Option<Policy>, operator: Option<&(UpgradePolicy, String)>) -> (Policy, Bounds) {
    match (chosen, operator) {
        (Some(p), _) => (p, Bounds::Chosen),
        (None, Some((u, object))) => (
            Policy::from_operator(u),
            Bounds::Operator { object: object.clone(), auto_upgrade: u.auto_upgrade, drain: u.drain },
        ),
        (None, None) => (Policy::default(), Bounds::Defaults),
    }
}

/// Where a plan's bounds come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Bounds {
    /// Chosen on the command line.
    Chosen,
    /// An operator object's `upgradePolicy` (`ClusterPolicy NAME`), with
    /// its `autoUpgrade` and `drain.enable`.
    Operator { object: String, auto_upgrade: bool, drain: bool },
    /// No object sets them: the operator's defaults.
    Defaults,
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
    /// Why no wave can start now: maxUnavailable is already used by
    /// cordoned or NotReady nodes, as the GPU Operator counts them.
    pub stalled: Option<String>,
    /// Nodes whose upgrade failed: the next wave should wait for them.
    pub halted: Option<Halt>,
    /// The bounds the waves keep, and where they come from.
    pub policy: Policy,
    pub bounds: Bounds,
}

/// A failed upgrade in the rollout. The GPU Operator itself goes on while
/// maxUnavailable allows (a failed node just stays cordoned), so an operator
/// has to stop the waves: a node that failed on the target is a canary
/// saying the target is bad on this hardware until shown otherwise.
#[derive(Clone, Debug, PartialEq)]
pub struct Halt {
    /// Nodes in `upgrade-failed`, longest first, with their driver now.
    pub failed: Vec<(Sym, Option<DriverVersion>)>,
    /// The driver most of the other GPU nodes run: what a rollback sets back.
    pub rollback_to: Option<DriverVersion>,
    /// GPU nodes on that driver.
    pub nodes_on_rollback: usize,
}

impl Halt {
    pub fn failed_names(&self) -> String {
        self.failed.iter().map(|(n, _)| n.to_string()).collect::<Vec<_>>().join(", ")
    }

    /// One sentence: what failed, what to do.
    pub fn summary(&self, target: &str) -> String {
        let rollback = match &self.rollback_to {
            Some(v) => format!(
                "find why (the driver pod's and nvidia-operator-validator's logs) or roll back: set the driver back to {v} (the {} node(s) not yet moved run it), then label {} upgrade-required so the operator reinstalls it",
                self.nodes_on_rollback,
                self.failed_names()
            ),
            None => "find why in the driver pod's and nvidia-operator-validator's logs".to_string(),
        };
        format!(
            "{} failed the upgrade to {target}; start no further wave, and stop the GPU Operator's own rollout (ClusterPolicy spec.driver.upgradePolicy.autoUpgrade=false, or label the nodes still to go {}=true): {rollback}",
            self.failed_names(),
            crate::model::keys::DRIVER_UPGRADE_SKIP
        )
    }
}

/// A halt when GPU nodes are in `upgrade-failed` (rows of the board, so
/// longest in the state first). Without a target, the rollback driver is the
/// most common one the failed nodes do not run.
pub fn halt(rows: &[UpgradeRow], target: Option<&DriverVersion>) -> Option<Halt> {
    let failed: Vec<&UpgradeRow> = rows.iter().filter(|r| r.failed()).collect();
    if failed.is_empty() {
        return None;
    }
    let new: Vec<&DriverVersion> = match target {
        Some(t) => vec![t],
        None => failed.iter().filter_map(|r| r.driver.as_ref()).collect(),
    };
    let mut drivers: BTreeMap<&DriverVersion, usize> = BTreeMap::new();
    for r in rows.iter().filter(|r| !r.failed()) {
        if let Some(d) = r.driver.as_ref().filter(|d| !new.contains(d)) {
            *drivers.entry(d).or_default() += 1;
        }
    }
    let most = drivers.iter().max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0))).map(|(d, n)| ((*d).clone(), *n));
    Some(Halt {
        failed: failed.iter().map(|r| (r.node.clone(), r.driver.clone())).collect(),
        nodes_on_rollback: most.as_ref().map_or(0, |(_, n)| *n),
        rollback_to: most.map(|(d, _)| d),
    })
}

/// Waves that take every GPU node to `target`: a one-node canary first,
/// then waves of at most `min(maxParallelUpgrades, maxUnavailable − nodes
/// already unavailable)`, never splitting a running gang across waves,
/// least-loaded nodes first. As the GPU Operator's upgrade controller
/// (k8s-operator-libs `GetUpgradesAvailable`) counts them, cordoned and
/// NotReady nodes use up maxUnavailable: when they use all of it, no upgrade
/// starts and the plan says it is stalled (the waves show the order for
/// when they are back). NotReady nodes are not planned: the operator's
/// cordon, drain and driver restart need a kubelet.
pub fn plan(index: &Index<'_>, target: &DriverVersion, policy: Policy) -> WavePlan {
    let gpu_nodes: Vec<&Node> = index.nodes().filter(|n| has_gpus(index, n)).collect();
    let total = gpu_nodes.len() as u32;
    let out: Vec<&&Node> = gpu_nodes.iter().filter(|n| n.unschedulable || !n.is_ready()).collect();
    let unavailable_now = out.len() as u32;
    let max_unavailable = policy.max_unavailable.resolve(total);
    let stalled = (max_unavailable <= unavailable_now && unavailable_now > 0).then(|| {
        let names: Vec<String> = out.iter().take(5).map(|n| n.name.to_string()).collect();
        format!(
            "stalled: maxUnavailable is {max_unavailable} and {unavailable_now} node(s) are already cordoned or NotReady ({}{}); the GPU Operator starts no upgrade until some return",
            names.join(", "),
            if out.len() > 5 { ", ..." } else { "" }
        )
    });
    let budget = max_unavailable.saturating_sub(unavailable_now).max(1);
    let wave_size = if policy.max_parallel == 0 { budget } else { budget.min(policy.max_parallel) };

    let mut excluded = Vec::new();
    let mut candidates: Vec<&Node> = Vec::new();
    for n in &gpu_nodes {
        if !n.is_ready() {
            excluded.push((
                n.name.clone(),
                "NotReady: the operator's cordon, drain and driver restart need a kubelet".to_string(),
            ));
        } else if n.operator.upgrade_skip {
            excluded.push((n.name.clone(), "nvidia.com/gpu-driver-upgrade.skip=true".to_string()));
        } else if n.operator.upgrade_state.as_ref().is_some_and(|s| s.as_str() == "upgrade-failed") {
            // A failed node is the halt's to settle, whatever driver it shows.
            excluded.push((n.name.clone(), "upgrade-failed, to settle first: see the halt".to_string()));
        } else if node_driver(index, n).as_ref() == Some(target) {
            match n.operator.upgrade_state.as_ref().map(|s| s.as_str()).filter(|s| !matches!(*s, "upgrade-done" | "")) {
                Some(state) => excluded.push((n.name.clone(), format!("on {target}, upgrade still in {state}"))),
                None => excluded.push((n.name.clone(), format!("already on {target}"))),
            }
        } else {
            candidates.push(n);
        }
    }

    // Nodes joined by running gangs move together (union-find over gang members).
    let names: Vec<Sym> = candidates.iter().map(|n| n.name.clone()).collect();
    let mut parent: HashMap<Sym, Sym> = names.iter().map(|n| (n.clone(), n.clone())).collect();
    fn root(parent: &mut HashMap<Sym, Sym>, x: Sym) -> Sym {
        let mut r = x.clone();
        while let Some(p) = parent.get(&r).cloned() {
            if p == r {
                break;
            }
            r = p;
        }
        parent.insert(x, r.clone());
        r
    }
    let mut gangs_of_node: HashMap<Sym, BTreeSet<String>> = HashMap::new();
    for (key, _) in index.snap.gangs.iter() {
        let nodes: BTreeSet<Sym> = index
            .members(key)
            .iter()
            .filter(|p| p.holds_resources())
            .filter_map(|p| p.node.clone())
            .filter(|n| parent.contains_key(n))
            .collect();
        let label = format!("{}/{}", key.namespace, key.name);
        for n in &nodes {
            gangs_of_node.entry(n.clone()).or_default().insert(label.clone());
        }
        let mut it = nodes.into_iter();
        if let Some(first) = it.next() {
            for other in it {
                let (a, b) = (root(&mut parent, first.clone()), root(&mut parent, other));
                if a != b {
                    parent.insert(b, a);
                }
            }
        }
    }
    let mut groups: BTreeMap<Sym, Vec<&Node>> = BTreeMap::new();
    for n in &candidates {
        let r = root(&mut parent, n.name.clone());
        groups.entry(r).or_default().push(n);
    }
    let load = |nodes: &[&Node]| -> usize { nodes.iter().map(|n| index.gpu_pods_on(&n.name)).sum() };
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
    let halted = halt(
        &board(index, gpu_nodes.iter().copied(), index.now, &Thresholds::default(), |_| Some(target.clone())),
        Some(target),
    );
    WavePlan {
        target: target.to_string(),
        wave_size,
        waves,
        excluded,
        stalled,
        halted,
        policy,
        bounds: Bounds::Defaults,
    }
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
        for p in index.pods_on(&n.name) {
            let Some(need) = p.cuda.and_then(compat::need_of) else { continue };
            let (vb, _) = compat::verdict(&need, &before, index.now);
            let (va, reason) = compat::verdict(&need, &after, index.now);
            if va > vb {
                breaks.push(Break {
                    pod: format!("{}/{}", p.namespace, p.name),
                    node: n.name.clone(),
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
        nodes: nodes.iter().map(|n| n.name.clone()).collect(),
        gangs: gangs.into_iter().collect(),
        breaks,
        oversized,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::testing::{node, pod, podgroup, snapshot};
    use crate::model::{Node, Pod};

    const NOW: Timestamp = 50_000;

    fn h100(name: &str) -> crate::model::build::NodeBuilder {
        node(name).gpus(8).product("NVIDIA-H100-80GB-HBM3").driver("550.54.15", "12.4")
    }

    fn gpu_pod(name: &str, node: &str) -> Pod {
        pod(name).gpus(1).on(node).running().build()
    }

    fn names(w: &Wave) -> Vec<&str> {
        w.nodes.iter().map(|n| n.as_str()).collect()
    }

    #[test]
    fn canary_first_then_waves_within_the_budget_gangs_whole_breaks_listed() {
        let nodes: Vec<Node> = vec![
            h100("n1").build(),
            h100("n2").build(),
            h100("n3").build(),
            h100("n4").build(),
            // already unavailable: it uses up one of maxUnavailable
            h100("n5").cordoned().build(),
            // a GeForce card: no forward compatibility to lean on
            node("n6").gpus(1).product("NVIDIA-GeForce-RTX-4090").driver("550.54.15", "12.4").build(),
            node("n7").gpus(8).product("NVIDIA-H100-80GB-HBM3").driver("535.161.08", "12.2").build(),
            h100("n8").label("nvidia.com/gpu-driver-upgrade.skip", "true").build(),
        ];
        let pods = vec![
            gpu_pod("a", "n2"),
            pod("needs-12-4").gpus(1).on("n6").running().cuda_require("cuda>=12.4").build(),
            gpu_pod("b", "n5"),
            gpu_pod("c", "n5"),
            pod("train-0").gpus(8).group("train").on("n3").running().build(),
            pod("train-1").gpus(8).group("train").on("n4").running().build(),
        ];
        let snap = snapshot(nodes, pods, vec![podgroup("train", 2, 8).build()], NOW);
        let index = Index::build(&snap, NOW);
        let target = DriverVersion::parse("535.161.08").unwrap();
        // maxParallelUpgrades 3, maxUnavailable 3 − 1 already cordoned = 2.
        let plan = plan(&index, &target, Policy { max_parallel: 3, max_unavailable: MaxUnavailable::Count(3) });
        assert_eq!(plan.wave_size, 2);
        let excluded: Vec<(&str, &str)> = plan.excluded.iter().map(|(n, why)| (n.as_str(), why.as_str())).collect();
        assert_eq!(excluded, [("n7", "already on 535.161.08"), ("n8", "nvidia.com/gpu-driver-upgrade.skip=true")]);
        // Least-loaded first (GPU pods: n1 0, n2 1, n6 1, n5 2, n3+n4 2 as one
        // unit); the lightest single node is the canary; the gang's nodes
        // move together.
        let waves: Vec<(bool, Vec<&str>)> = plan.waves.iter().map(|w| (w.canary, names(w))).collect();
        assert_eq!(
            waves,
            [(true, vec!["n1"]), (false, vec!["n2", "n6"]), (false, vec!["n5"]), (false, vec!["n3", "n4"])]
        );
        assert_eq!(plan.waves[3].gangs, ["default/train"]);
        // CUDA Toolkit Release Notes, Table 3: CUDA 12.4 needs ≥ 550.54.14
        // natively; R535 gives 12.2. On a GeForce card there is no forward
        // compatibility, so the 12.4 workload breaks in wave 1.
        let breaks: Vec<(&str, Verdict)> = plan.waves[1].breaks.iter().map(|b| (b.pod.as_str(), b.after)).collect();
        assert_eq!(breaks, [("default/needs-12-4", Verdict::Incompatible)]);
        assert!(plan.waves.iter().enumerate().all(|(i, w)| i == 1 || w.breaks.is_empty()));
    }

    #[test]
    fn a_gang_wider_than_a_wave_is_its_own_oversized_wave() {
        let nodes: Vec<Node> = ["n1", "n2", "n3", "n4"].iter().map(|n| h100(n).build()).collect();
        let pods: Vec<Pod> =
            (2..=4).map(|i| pod(&format!("g-{i}")).gpus(8).group("g").on(&format!("n{i}")).running().build()).collect();
        let snap = snapshot(nodes, pods, vec![podgroup("g", 3, 8).build()], NOW);
        let index = Index::build(&snap, NOW);
        let target = DriverVersion::parse("570.124.06").unwrap();
        let plan = plan(&index, &target, Policy::default());
        // 25% of 4 nodes = 1, maxParallelUpgrades 1: one node per wave.
        assert_eq!(plan.wave_size, 1);
        let waves: Vec<(bool, bool, Vec<&str>)> =
            plan.waves.iter().map(|w| (w.canary, w.oversized, names(w))).collect();
        assert_eq!(waves, [(true, false, vec!["n1"]), (false, true, vec!["n2", "n3", "n4"])]);
    }

    #[test]
    fn cordoned_and_not_ready_nodes_using_up_max_unavailable_stall_the_plan() {
        // 8 nodes, maxUnavailable 25% = 2: one cordoned and one NotReady use it up.
        let mut nodes: Vec<Node> = (1..=6).map(|i| h100(&format!("n{i}")).build()).collect();
        nodes.push(h100("n7").cordoned().build());
        nodes.push(h100("n8").not_ready().build());
        let snap = snapshot(nodes, vec![], vec![], NOW);
        let index = Index::build(&snap, NOW);
        let target = DriverVersion::parse("570.124.06").unwrap();
        let plan = plan(&index, &target, Policy::default());
        let stalled = plan.stalled.as_deref().unwrap_or_default();
        assert!(stalled.starts_with("stalled: maxUnavailable is 2 and 2 node(s)"), "{stalled}");
        assert!(stalled.contains("n7") && stalled.contains("n8"), "{stalled}");
        // The NotReady node is not planned; the cordoned one is.
        assert!(plan.excluded.iter().any(|(n, why)| n.as_str() == "n8" && why.starts_with("NotReady")));
        assert!(plan.waves.iter().all(|w| !w.nodes.iter().any(|n| n.as_str() == "n8")));
        assert!(plan.waves.iter().any(|w| w.nodes.iter().any(|n| n.as_str() == "n7")));
        // One node back: a wave may start.
        let mut nodes: Vec<Node> = (1..=7).map(|i| h100(&format!("n{i}")).build()).collect();
        nodes.push(h100("n8").not_ready().build());
        let snap = snapshot(nodes, vec![], vec![], NOW);
        let plan = super::plan(&Index::build(&snap, NOW), &target, Policy::default());
        assert_eq!(plan.stalled, None);
        assert_eq!(plan.wave_size, 1);
    }

    #[test]
    fn max_unavailable_reads_counts_and_percentages() {
        assert_eq!(MaxUnavailable::parse("25%").map(|m| m.resolve(10)), Some(3), "rounded up, like the operator");
        assert_eq!(MaxUnavailable::parse("2").map(|m| m.resolve(10)), Some(2));
        assert_eq!(MaxUnavailable::parse("lots"), None);
    }
}
