//! What the index gathers from the pods, kept between snapshots: the pods
//! that changed since the last snapshot are taken out and put back in,
//! instead of walking every pod of a big fleet for every analysis.
//!
//! The full walk ([`super::walk`]) stays the reference: the ledger yields
//! the same parts in the same order (`tests/incremental.rs` checks it after
//! random sequences of changes).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use imbl::OrdMap;
use imbl::ordmap::DiffItem;

use crate::analysis::tally::Tally;
use crate::model::{
    CudaNeed, Feed, FeedState, Gang, GangKey, Node, Pod, PodKey, PodPhase, Snapshot, Sym, SymHash, SymMap,
};

use super::walk::{GangLookup, in_pending_order};
use super::{GpuWorkload, PodParts};

/// A pod, in the order of its key (namespace, name), as the snapshot keeps them.
#[derive(Clone, Debug)]
struct ByKey(Arc<Pod>);

impl Ord for ByKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        by_key(&self.0, &other.0)
    }
}
impl PartialOrd for ByKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl PartialEq for ByKey {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}
impl Eq for ByKey {}

/// A pending pod, in the index's order: oldest first, then by name, then
/// by namespace (what a stable sort of key order by age and name gives).
#[derive(Clone, Debug)]
struct ByAge(Arc<Pod>);

impl Ord for ByAge {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        in_pending_order(&self.0, &other.0).then_with(|| self.0.namespace.cmp(&other.0.namespace))
    }
}
impl PartialOrd for ByAge {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl PartialEq for ByAge {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}
impl Eq for ByAge {}

/// The pods bound to one node (known to the snapshot or not), each list in
/// key order.
#[derive(Default, Debug)]
struct NodePods {
    /// Unfinished: they hold what they request.
    holders: Vec<Arc<Pod>>,
    /// What `holders` use, summed in key order as the walk sums them.
    used: Tally,
    gpu_pods: u32,
    failed: Vec<Arc<Pod>>,
}

impl NodePods {
    fn recount(&mut self) {
        self.used = Tally::default();
        for pod in &self.holders {
            self.used.add_pod(&pod.requests);
        }
        self.gpu_pods = self.holders.iter().filter(|p| p.wants_gpu()).count() as u32;
    }
}

fn by_key(a: &Pod, b: &Pod) -> std::cmp::Ordering {
    a.namespace.cmp(&b.namespace).then_with(|| a.name.cmp(&b.name))
}

/// Puts `pod` in its place in a list in key order; at the end, when the
/// pods come in key order.
fn insert_in_order(list: &mut Vec<Arc<Pod>>, pod: &Arc<Pod>, in_key_order: bool) {
    if in_key_order {
        list.push(pod.clone());
    } else {
        let at = list.binary_search_by(|p| by_key(p, pod)).unwrap_or_else(|at| at);
        list.insert(at, pod.clone());
    }
}

fn remove_in_order(list: &mut Vec<Arc<Pod>>, pod: &Pod) {
    if let Ok(at) = list.binary_search_by(|p| by_key(p, pod)) {
        list.remove(at);
    }
}

/// A snapshot whose pods differ from the last one's in more than this
/// share of the fleet (a first list, a resync, a switch of source) is
/// walked instead: a ledger of pods that keep arriving in bulk costs more
/// to keep than the walk, in time and in memory.
const BULK_SHARE: usize = 8;
/// ... and in more than this many, so a small cluster is always kept.
const BULK_AT_LEAST: usize = 1_000;

/// The pods of the last snapshot it was brought up to date with, gathered
/// as the index needs them.
#[derive(Default)]
pub struct PodLedger {
    /// The last snapshot's pods and gangs: the next update diffs against
    /// them, and the structure they share with it is skipped at no cost.
    pods: OrdMap<PodKey, Arc<Pod>>,
    gangs: OrdMap<GangKey, Arc<Gang>>,
    /// Whether the parts below hold `pods` (not while pods change in bulk).
    kept: bool,
    nodes: SymMap<NodePods>,
    pending: BTreeSet<ByAge>,
    /// With what the index reads of them (its CUDA need, its node), so
    /// that listing them reads no pod.
    gpu_workloads: BTreeMap<ByKey, (Option<&'static CudaNeed>, Option<Sym>)>,
    /// Each gang's pods, in key order.
    members: HashMap<GangKey, Vec<Arc<Pod>>>,
    gang_of: HashMap<PodKey, GangKey>,
    /// Priorities of pods holding resources, with how many hold each.
    holder_priorities: BTreeMap<i32, u32>,
    /// Pods taken out or put in by the last update.
    last_changes: usize,
}

impl PodLedger {
    pub fn new() -> PodLedger {
        PodLedger::default()
    }

    /// Whether the ledger holds `snap`'s pods, gathered by `snap`'s gangs.
    pub fn is_current(&self, snap: &Snapshot) -> bool {
        self.kept && self.pods.ptr_eq(&snap.pods) && self.gangs.ptr_eq(&snap.gangs)
    }

    /// Pods taken out or put in by the last [`PodLedger::update`]: all of
    /// them when it started over, none when it let a bulk change be walked.
    pub fn last_changes(&self) -> usize {
        self.last_changes
    }

    /// Brings the ledger up to date with `snap`: the pods that differ from
    /// the last snapshot's are taken out and put back in. A change to the
    /// gangs can move any pod in or out of one, so it starts over; a change
    /// in bulk (or the first list still arriving) is left to the walk: the
    /// ledger is not current until pods change a few at a time again.
    pub fn update(&mut self, snap: &Snapshot) {
        if self.is_current(snap) {
            self.last_changes = 0;
            return;
        }
        let bulk = (snap.pods.len() / BULK_SHARE).max(BULK_AT_LEAST);
        // The first list arrives page by page: walked until it is complete.
        let listing = snap.feed(Feed::Pods).is_some_and(|f| f.state == FeedState::Syncing);
        let in_bulk = listing || self.pods.diff(&snap.pods).take(bulk + 1).count() > bulk;
        let lookup = GangLookup::new(&snap.gangs);
        if in_bulk {
            self.forget();
        } else if self.kept && self.gangs.ptr_eq(&snap.gangs) {
            let mut touched: HashSet<Sym, SymHash> = HashSet::default();
            let mut changed = 0;
            let old = std::mem::take(&mut self.pods);
            for change in old.diff(&snap.pods) {
                match change {
                    DiffItem::Add(_, pod) => self.put_in(pod, &lookup, &mut touched, false),
                    DiffItem::Update { old: (_, was), new: (_, pod) } => {
                        self.take_out(was, &mut touched);
                        self.put_in(pod, &lookup, &mut touched, false);
                    }
                    DiffItem::Remove(_, was) => self.take_out(was, &mut touched),
                }
                changed += 1;
            }
            for node in touched {
                if let Some(pods) = self.nodes.get_mut(&node) {
                    if pods.holders.is_empty() && pods.failed.is_empty() {
                        self.nodes.remove(&node);
                    } else {
                        pods.recount();
                    }
                }
            }
            self.last_changes = changed;
        } else {
            self.forget();
            let mut untouched = HashSet::default();
            for pod in snap.pods.values() {
                self.put_in(pod, &lookup, &mut untouched, true);
            }
            self.kept = true;
            self.last_changes = snap.pods.len();
        }
        self.pods = snap.pods.clone();
        self.gangs = snap.gangs.clone();
    }

    /// Empties the parts (the last snapshot's maps stay, to diff against).
    fn forget(&mut self) {
        let (pods, gangs) = (std::mem::take(&mut self.pods), std::mem::take(&mut self.gangs));
        *self = PodLedger { pods, gangs, ..PodLedger::default() };
    }

    /// Counts a pod where the walk would ([`super::walk`]'s `PodPass::add`);
    /// `in_key_order` when the pods come in key order (a start over): its
    /// node's tally is summed at once, else the node is `touched` (recounted).
    fn put_in(
        &mut self,
        pod: &Arc<Pod>,
        lookup: &GangLookup<'_>,
        touched: &mut HashSet<Sym, SymHash>,
        in_key_order: bool,
    ) {
        if pod.holds_resources()
            && let Some(node) = pod.node
        {
            let pods = self.nodes.entry(node).or_default();
            insert_in_order(&mut pods.holders, pod, in_key_order);
            if in_key_order {
                // Summed as they come, in key order: what a recount would give.
                pods.used.add_pod(&pod.requests);
                pods.gpu_pods += u32::from(pod.wants_gpu());
            } else {
                touched.insert(node);
            }
            *self.holder_priorities.entry(pod.priority).or_default() += 1;
        } else if pod.is_pending() {
            self.pending.insert(ByAge(pod.clone()));
        } else if pod.phase == PodPhase::Failed
            && let Some(node) = pod.node
        {
            insert_in_order(&mut self.nodes.entry(node).or_default().failed, pod, in_key_order);
        }
        if pod.wants_gpu() && !pod.phase.is_terminal() {
            self.gpu_workloads.insert(ByKey(pod.clone()), (pod.cuda, pod.node));
        }
        if let Some(gang) = lookup.of(pod) {
            insert_in_order(self.members.entry(gang.clone()).or_default(), pod, in_key_order);
            self.gang_of.insert(pod.key(), gang.clone());
        }
    }

    /// Undoes [`PodLedger::put_in`] of the same pod.
    fn take_out(&mut self, pod: &Arc<Pod>, touched: &mut HashSet<Sym, SymHash>) {
        if pod.holds_resources()
            && let Some(node) = pod.node
        {
            if let Some(pods) = self.nodes.get_mut(&node) {
                remove_in_order(&mut pods.holders, pod);
            }
            if let Some(n) = self.holder_priorities.get_mut(&pod.priority) {
                *n -= 1;
                if *n == 0 {
                    self.holder_priorities.remove(&pod.priority);
                }
            }
            touched.insert(node);
        } else if pod.is_pending() {
            self.pending.remove(&ByAge(pod.clone()));
        } else if pod.phase == PodPhase::Failed
            && let Some(node) = pod.node
        {
            if let Some(pods) = self.nodes.get_mut(&node) {
                remove_in_order(&mut pods.failed, pod);
            }
            touched.insert(node);
        }
        if pod.wants_gpu() && !pod.phase.is_terminal() {
            self.gpu_workloads.remove(&ByKey(pod.clone()));
        }
        if let Some(gang) = self.gang_of.remove(&pod.key())
            && let Some(members) = self.members.get_mut(&gang)
        {
            remove_in_order(members, pod);
            if members.is_empty() {
                self.members.remove(&gang);
            }
        }
    }

    /// The index's parts for the snapshot's nodes: what the walk would
    /// gather, at the cost of copying references rather than reading pods.
    pub(super) fn parts<'a>(&'a self, node_list: &[&Node], position: &SymMap<u32>) -> PodParts<'a> {
        let mut usage_list = Vec::with_capacity(node_list.len());
        let mut gpu_pods = Vec::with_capacity(node_list.len());
        let mut bound: Vec<&Pod> = Vec::with_capacity(self.holder_priorities.values().sum::<u32>() as usize);
        let mut bound_ends = Vec::with_capacity(node_list.len());
        for node in node_list {
            match self.nodes.get(&node.name) {
                Some(pods) => {
                    usage_list.push(pods.used.clone());
                    gpu_pods.push(pods.gpu_pods);
                    bound.extend(pods.holders.iter().map(|p| &**p));
                }
                None => {
                    usage_list.push(Tally::default());
                    gpu_pods.push(0);
                }
            }
            bound_ends.push(bound.len() as u32);
        }
        let mut stray = SymMap::default();
        let mut failed_on = SymMap::default();
        for (node, pods) in &self.nodes {
            if !pods.holders.is_empty() && !position.contains_key(node) {
                stray.insert(*node, (pods.used.clone(), pods.holders.iter().map(|p| &**p).collect()));
            }
            if !pods.failed.is_empty() {
                failed_on.insert(*node, pods.failed.iter().map(|p| &**p).collect());
            }
        }
        let pending_pods: Vec<&Pod> = self.pending.iter().map(|p| &*p.0).collect();
        debug_assert!(pending_pods.is_sorted_by(|a, b| in_pending_order(a, b).is_le()));
        let gpu_workloads = self
            .gpu_workloads
            .iter()
            .map(|(p, (cuda, node))| GpuWorkload {
                pod: &p.0,
                cuda: *cuda,
                node: node.and_then(|n| position.get(&n)).map(|&i| i as usize),
            })
            .collect();
        let members =
            self.members.iter().map(|(gang, pods)| (gang.clone(), pods.iter().map(|p| &**p).collect())).collect();
        PodParts {
            usage_list,
            gpu_pods,
            bound,
            bound_ends,
            stray,
            failed_on,
            pending_pods,
            gpu_workloads,
            members,
            gang_of: self.gang_of.clone(),
            lowest_holder_priority: self.holder_priorities.keys().next().copied(),
        }
    }
}
