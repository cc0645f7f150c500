//! The planner's workspace: the fleet as the plan's moves are committed
//! (usage per node, devices freed and taken through claims, best-fit
//! destinations), and where each moved pod lands.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::analysis::dra::room::DeviceMoves;
use crate::analysis::fit::{self, Shape};
use crate::analysis::index::Index;
use crate::analysis::tally::Tally;
use crate::model::{GangKey, Node, Pod, PodKey, Resources, Sym};

use super::plan_dra::DraTarget;
use super::{Demand, ShapeSource, room};

/// The planner's view of the fleet as moves are committed: usage per node,
/// schedulable nodes by free GPUs (for best-fit destinations), and which
/// nodes the target may use.
pub(super) struct Workspace<'i, 'a> {
    pub(super) index: &'i Index<'a>,
    pub(super) target: &'i Demand,
    pub(super) nodes: &'i [&'a Node],
    position: HashMap<Sym, usize>,
    used: Vec<Tally>,
    /// Schedulable nodes by free GPUs, then name.
    by_free: BTreeMap<u64, std::collections::BTreeSet<Sym>>,
    /// Positions of nodes the target may use and could hold one pod of when empty.
    pub(super) target_may_use: Vec<usize>,
    target_ok: Vec<bool>,
    /// The target's GPUs come through claims: its room is in devices.
    pub(super) dra: Option<DraTarget<'i, 'a>>,
    /// Nodes that publish devices through DRA, fewest free GPUs first
    /// (where a moved claim-holding pod lands: best fit).
    dra_order: Vec<usize>,
    /// Devices the committed moves freed and took.
    moves: DeviceMoves,
}

impl<'i, 'a> Workspace<'i, 'a> {
    pub(super) fn new(index: &'i Index<'a>, target: &'i Demand) -> Self {
        let nodes = index.node_list();
        let placement = index.placement(&target.shape());
        let empty = Tally::default();
        // Where its volumes, ports and pod rules let it run (waits_only_for_room left out a refused one).
        let allowed = super::allowed_nodes(index, target).unwrap_or_default();
        let dra = DraTarget::of(index, target);
        let target_ok: Vec<bool> = nodes
            .iter()
            .zip(placement.iter())
            .enumerate()
            .map(|(i, (n, blockers))| {
                index.accepts_work(n)
                    && blockers.is_empty()
                    && dra.as_ref().map_or_else(|| room(target, n, &empty), |d| d.most(target, n, &empty)) > 0
                    && allowed.get(i).copied().unwrap_or(false)
                    && dra.as_ref().is_none_or(|d| d.may_use(n))
            })
            .collect();
        let mut by_free: BTreeMap<u64, std::collections::BTreeSet<Sym>> = BTreeMap::new();
        for n in nodes.iter().filter(|n| index.accepts_work(n)) {
            by_free.entry(index.free_gpus(n)).or_default().insert(n.name.clone());
        }
        Workspace {
            index,
            target,
            nodes,
            position: nodes.iter().enumerate().map(|(i, n)| (n.name.clone(), i)).collect(),
            used: nodes.iter().map(|n| index.used(&n.name).clone()).collect(),
            by_free,
            target_may_use: (0..nodes.len()).filter(|&i| target_ok[i]).collect(),
            target_ok,
            dra_order: {
                let mut order: Vec<(u64, usize)> = (0..nodes.len())
                    .filter_map(|i| index.dra().gpus(&nodes[i].name).map(|g| (g.whole_free, i)))
                    .collect();
                order.sort();
                order.into_iter().map(|(_, i)| i).collect()
            },
            dra,
            moves: DeviceMoves::default(),
        }
    }

    /// Target pods the node has room for given `used` and `moves`.
    fn room_given(&self, i: usize, used: &Tally, moves: &DeviceMoves) -> u64 {
        match &self.dra {
            Some(dra) => dra.room(self.target, self.nodes[i], used, moves),
            None => room(self.target, self.nodes[i], used),
        }
    }

    /// The node's usage and the devices once `pods` leave it, and the
    /// target's room then; None where one of them holds a device the plan
    /// may not move.
    pub(super) fn without(&self, node: &Node, pods: &[&Pod]) -> Option<(Tally, DeviceMoves, u64)> {
        let mut used = self.used(&node.name).clone();
        let mut moves = self.moves.clone();
        for p in pods {
            subtract(&mut used, &p.requests);
            if let Some(dra) = &self.dra {
                moves.released.extend(dra.movable(p)?);
            }
        }
        let room = match self.position.get(&node.name) {
            Some(&i) if self.target_ok[i] => self.room_given(i, &used, &moves),
            _ => 0,
        };
        Some((used, moves, room))
    }

    pub(super) fn used(&self, node: &Sym) -> &Tally {
        self.position.get(node).map_or(self.index.used(node), |&i| &self.used[i])
    }

    /// Whether a node the target may run on hides enough GPUs (hardware
    /// its device plugin does not advertise) for one of its pods.
    pub(super) fn silent_room(&self) -> bool {
        let placement = self.index.placement(&self.target.shape());
        self.nodes.iter().zip(placement.iter()).any(|(n, blockers)| {
            blockers.is_empty()
                && self.index.accepts_work(n)
                && u64::from(self.index.silent_gpus(n)) >= self.target.gpus_per_pod.max(1)
        })
    }

    /// Target pods the node has room for now (0 where it may not run).
    pub(super) fn target_room(&self, node: &Sym) -> u64 {
        match self.position.get(node) {
            Some(&i) if self.target_ok[i] => self.room_given(i, &self.used[i], &self.moves),
            _ => 0,
        }
    }

    fn free_gpus(&self, i: usize) -> u64 {
        self.nodes[i].allocatable.gpu.saturating_sub(self.used[i].gpu)
    }

    /// `pod` leaves `from` and lands on `to` (`None`: evicted, lands nowhere).
    pub(super) fn move_pod(&mut self, pod: &Pod, from: Sym, to: Option<Sym>) {
        if let Some(dra) = &self.dra {
            self.moves.released.extend(dra.movable(pod).unwrap_or_default());
            if let Some(taken) = to.as_ref().and_then(|t| dra.land(pod, t, &self.moves)) {
                self.moves.taken.extend(taken);
            }
        }
        for (node, leaving) in std::iter::once((from, true)).chain(to.map(|t| (t, false))) {
            let Some(&i) = self.position.get(&node) else { continue };
            let schedulable = self.index.accepts_work(self.nodes[i]);
            if schedulable {
                let before = self.free_gpus(i);
                if let Some(set) = self.by_free.get_mut(&before) {
                    set.remove(&node);
                }
            }
            if leaving {
                subtract(&mut self.used[i], &pod.requests);
            } else {
                self.used[i].add_pod(&pod.requests);
            }
            if schedulable {
                self.by_free.entry(self.free_gpus(i)).or_default().insert(node);
            }
        }
    }

    /// Source nodes worth trying, with their movable work, in name order:
    /// all of them on a small fleet, else the closest to one more slot.
    pub(super) fn sources(&self, eligible: &[&'a Node], moved: &HashSet<PodKey>) -> Vec<(&'a Node, Vec<Unit<'a>>)> {
        let g = self.target.gpus_per_pod.max(1);
        let mut ranked: Vec<(u64, &'a Node)> = eligible
            .iter()
            .map(|n| {
                if self.dra.is_some() {
                    // Through claims a node's room is a search: rank by its
                    // free GPUs as published (the search then weighs each).
                    let free = self.index.dra().gpus(&n.name).map_or(0, |d| d.whole_free);
                    return ((free / g + 1) * g - free, *n);
                }
                let free = n.allocatable.gpu.saturating_sub(self.used(&n.name).gpu);
                let next_slot = (self.target_room(&n.name) + 1) * g;
                (next_slot.saturating_sub(free), *n)
            })
            .collect();
        if ranked.len() > SEARCH_WIDTH {
            ranked.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.name.cmp(&b.1.name)));
        }
        let mut out = Vec::new();
        for (_, node) in ranked {
            let units = units_on(self.index, self.target, self.dra.as_ref(), node.name.clone(), moved);
            if units.is_empty() {
                continue;
            }
            out.push((node, units));
            if out.len() == SEARCH_WIDTH {
                break;
            }
        }
        out.sort_by_key(|(node, _)| node.name.clone());
        out
    }

    /// Finds a destination for every pod of every unit (best fit: the
    /// fullest node that takes it), never on `reserved` nodes or the source,
    /// and never costing the target a slot. Records the landings in `trial`.
    pub(super) fn place(
        &self,
        units: &[&Unit],
        trial: &mut HashMap<Sym, Tally>,
        trial_moves: &mut DeviceMoves,
        reserved: &HashSet<Sym>,
        source: Sym,
    ) -> Option<Vec<Vec<Sym>>> {
        let mut all = Vec::new();
        for unit in units {
            let mut dests = Vec::new();
            for pod in &unit.pods {
                let placement = self.index.placement(&Shape::of(pod));
                if let Some(dra) = self.dra.as_ref().filter(|d| d.holds_devices(pod)) {
                    let dest = self.land_claims(dra, pod, &placement, trial, trial_moves, reserved, &source)?;
                    dests.push(dest);
                    continue;
                }
                let takes = |i: usize, used: &Tally| {
                    let node = self.nodes[i];
                    if reserved.contains(&node.name) || node.name == source || Some(node.name.clone()) == pod.node {
                        return false;
                    }
                    if !placement[i].is_empty() || !fit::resource_shortfalls(&pod.requests, node, used).is_empty() {
                        return false;
                    }
                    if !self.target_ok[i] {
                        return true;
                    }
                    let mut after = used.clone();
                    after.add_pod(&pod.requests);
                    room(self.target, node, &after) >= room(self.target, node, used)
                };
                // The fullest untouched node that takes it...
                let untouched = self
                    .by_free
                    .range(pod.requests.gpu..)
                    .flat_map(|(free, names)| names.iter().map(move |n| (*free, n.clone())))
                    .filter(|(_, n)| !trial.contains_key(n))
                    .find(|(_, n)| self.position.get(n).is_some_and(|&i| takes(i, &self.used[i])));
                // ...against the nodes this trial already changed.
                let touched = trial
                    .iter()
                    .filter_map(|(n, used)| {
                        let &i = self.position.get(n)?;
                        let node = self.nodes[i];
                        (self.index.accepts_work(node) && takes(i, used))
                            .then(|| (node.allocatable.gpu.saturating_sub(used.gpu), n.clone()))
                    })
                    .min();
                let (_, dest) = match (untouched, touched) {
                    (Some(a), Some(b)) => a.min(b),
                    (a, b) => a.or(b)?,
                };
                let base = trial.get(&dest).cloned().unwrap_or_else(|| self.used(&dest).clone());
                trial.entry(dest.clone()).or_insert(base).add_pod(&pod.requests);
                dests.push(dest);
            }
            all.push(dests);
        }
        Some(all)
    }
}

impl<'a> Workspace<'_, 'a> {
    /// Where a pod holding devices through claims made for it lands: the
    /// fullest node (fewest free GPUs through DRA) its selectors, taints and
    /// resources allow whose devices take its claims made again, never
    /// costing the target a slot. Records the landing in the trial.
    #[allow(clippy::too_many_arguments)]
    fn land_claims(
        &self,
        dra: &DraTarget<'_, 'a>,
        pod: &Pod,
        placement: &crate::analysis::index::Placement,
        trial: &mut HashMap<Sym, Tally>,
        trial_moves: &mut DeviceMoves,
        reserved: &HashSet<Sym>,
        source: &Sym,
    ) -> Option<Sym> {
        let fullest_first = self.dra_order.iter().copied();
        let (i, taken) = fullest_first
            .filter_map(|i| {
                let node = self.nodes[i];
                if reserved.contains(&node.name)
                    || node.name == *source
                    || pod.node.as_ref() == Some(&node.name)
                    || !self.index.accepts_work(node)
                    || !placement[i].is_empty()
                {
                    return None;
                }
                let used = trial.get(&node.name).unwrap_or(&self.used[i]);
                if !fit::resource_shortfalls(&pod.requests, node, used).is_empty() {
                    return None;
                }
                let taken = dra.land(pod, &node.name, trial_moves)?;
                if self.target_ok[i] {
                    let mut after_moves = trial_moves.clone();
                    after_moves.taken.extend(taken.iter().cloned());
                    let mut after = used.clone();
                    after.add_pod(&pod.requests);
                    if self.room_given(i, &after, &after_moves) < self.room_given(i, used, trial_moves) {
                        return None;
                    }
                }
                Some((i, taken))
            })
            .next()?;
        trial_moves.taken.extend(taken);
        let dest = self.nodes[i].name.clone();
        let base = trial.get(&dest).cloned().unwrap_or_else(|| self.used[i].clone());
        trial.entry(dest.clone()).or_insert(base).add_pod(&pod.requests);
        Some(dest)
    }
}

pub(super) fn subtract(t: &mut Tally, r: &Resources) {
    t.cpu_milli = t.cpu_milli.saturating_sub(r.cpu_milli);
    t.memory = t.memory.saturating_sub(r.memory);
    t.gpu = t.gpu.saturating_sub(r.gpu);
    t.pods = t.pods.saturating_sub(1);
    for (name, amount) in r.extended.iter() {
        if let Some((_, v)) = t.extended.iter_mut().find(|(s, _)| s == name) {
            *v = v.saturating_sub(*amount);
        }
    }
}

/// On a big fleet, each step weighs only this many source nodes: those
/// closest to one more slot for the target. Smaller fleets are searched whole.
const SEARCH_WIDTH: usize = 64;

/// A unit that moves as one: a lone pod, or every member of a running gang.
pub(super) struct Unit<'a> {
    pub(super) pods: Vec<&'a Pod>,
    pub(super) gang: Option<String>,
    pub(super) gpu_hours: f64,
    /// The highest priority among its pods.
    pub(super) priority: i32,
}

/// The work a move or an eviction of `pods` (a pod, or a whole gang)
/// throws away, priced as every eviction is (`lost_work`): busy time since
/// the last checkpoint and the restart, idle time free, so an idle holder
/// is the cheapest to move.
fn unit_gpu_hours(index: &Index<'_>, pods: &[&Pod]) -> f64 {
    crate::analysis::lost_work::of(index, pods).gpu_hours
}

/// Running GPU work on `node`: lone pods, and running gangs whose members
/// all sit on this node. Never a pod without a controller: nothing would
/// recreate it, so evicting it deletes it for good (kubectl drain refuses
/// them too unless forced).
pub(super) fn units_on<'a>(
    index: &Index<'a>,
    target: &Demand,
    dra: Option<&DraTarget<'_, 'a>>,
    node: Sym,
    moved: &HashSet<PodKey>,
) -> Vec<Unit<'a>> {
    // For a target whose GPUs come through claims, the work in its way
    // holds devices through claims the plan may move.
    let in_the_way = |pod: &Pod| match dra {
        Some(dra) => dra.holds_devices(pod) && dra.movable(pod).is_some(),
        None => pod.wants_gpu(),
    };
    let mut units = Vec::new();
    // The target's own placed members are never in its way.
    let mut seen_gangs: HashSet<GangKey> = match &target.source {
        ShapeSource::Gang(k) => HashSet::from([k.clone()]),
        _ => HashSet::new(),
    };
    for pod in index.pods_on(&node) {
        if !in_the_way(pod) || pod.owner.is_none() || pod.mirror || moved.contains(&pod.key()) {
            continue;
        }
        // Bound work that holds GPUs (running, or still starting); DaemonSet
        // pods come back on the same node.
        if pod.owner_kind() == Some("DaemonSet") || !pod.holds_resources() {
            continue;
        }
        match index.gang_of(&pod.key()) {
            Some(gang) => {
                if !seen_gangs.insert(gang.clone()) {
                    continue;
                }
                let members: Vec<&Pod> = index.members(gang).iter().copied().filter(|p| p.holds_resources()).collect();
                if members.iter().any(|p| p.node.as_ref() != Some(&node)) {
                    continue; // a gang spread over nodes moves as a whole elsewhere; not planned
                }
                if dra.is_some_and(|d| members.iter().any(|p| d.movable(p).is_none())) {
                    continue;
                }
                let hours = unit_gpu_hours(index, &members);
                let priority = members.iter().map(|p| p.priority).max().unwrap_or(pod.priority);
                units.push(Unit {
                    pods: members,
                    gang: Some(format!("{}/{}", gang.namespace, gang.name)),
                    gpu_hours: hours,
                    priority,
                });
            }
            None => units.push(Unit {
                pods: vec![pod],
                gang: None,
                gpu_hours: unit_gpu_hours(index, &[pod]),
                priority: pod.priority,
            }),
        }
    }
    units
}
