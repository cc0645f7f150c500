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
use crate::model::{CudaNeed, Feed, FeedState, Gang, GangKey, Node, Pod, PodKey, Snapshot, Sym, SymHash, SymMap};

use super::walk::{GangLookup, PARALLEL_WALK_FROM, Place, in_halves, in_pending_order, is_gpu_workload};
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

    /// Holds `pod`, which comes after every pod it holds in key order.
    fn push_holder(&mut self, pod: &Arc<Pod>) {
        self.holders.push(pod.clone());
        self.used.add_pod(&pod.requests);
        self.gpu_pods += u32::from(pod.wants_gpu());
    }

    /// Then the pods of `later`, whose keys all come after this one's.
    fn then(&mut self, later: NodePods) {
        self.holders.extend(later.holders);
        self.used.add_tally(&later.used);
        self.gpu_pods += later.gpu_pods;
        self.failed.extend(later.failed);
    }
}

fn by_key(a: &Pod, b: &Pod) -> std::cmp::Ordering {
    a.namespace.cmp(&b.namespace).then_with(|| a.name.cmp(&b.name))
}

fn insert_in_order(list: &mut Vec<Arc<Pod>>, pod: &Arc<Pod>) {
    let at = list.binary_search_by(|p| by_key(p, pod)).unwrap_or_else(|at| at);
    list.insert(at, pod.clone());
}

fn remove_in_order(list: &mut Vec<Arc<Pod>>, pod: &Pod) {
    if let Ok(at) = list.binary_search_by(|p| by_key(p, pod)) {
        list.remove(at);
    }
}

/// A snapshot whose pods differ from the last one's in more than this
/// share of the fleet (a resync, a burst) starts over: cheaper than taking
/// each pod out and putting it back.
const BULK_SHARE: usize = 8;
/// ... and in more than this many, so a small cluster is always kept.
const BULK_AT_LEAST: usize = 1_000;

/// What the index reads of a GPU workload (its CUDA need, its node), so
/// that listing them reads no pod.
type Workload = (Option<&'static CudaNeed>, Option<Sym>);

/// The pods of the last snapshot it was brought up to date with, gathered
/// as the index needs them.
#[derive(Default)]
pub struct PodLedger {
    /// The last snapshot's pods and gangs, while kept: the next update
    /// diffs against them, and the structure they share with it is skipped
    /// at no cost.
    pods: OrdMap<PodKey, Arc<Pod>>,
    gangs: OrdMap<GangKey, Arc<Gang>>,
    /// Whether `parts` hold `pods` (not while pods are still listing).
    kept: bool,
    parts: Parts,
    /// Pods taken out or put in by the last update.
    last_changes: usize,
}

/// The pods gathered as the index needs them.
#[derive(Default)]
struct Parts {
    nodes: SymMap<NodePods>,
    pending: BTreeSet<ByAge>,
    gpu_workloads: BTreeMap<ByKey, Workload>,
    /// Each gang's pods, in key order.
    members: HashMap<GangKey, Vec<Arc<Pod>>>,
    gang_of: HashMap<PodKey, GangKey>,
    /// Priorities of pods holding resources, with how many hold each.
    holder_priorities: BTreeMap<i32, u32>,
}

/// What a start over gathers from pods in key order: the parts but their
/// two ordered sets, which wait in lists to be built at once (a tree built
/// from sorted items costs a fraction of inserting them one by one).
#[derive(Default)]
struct Gathered {
    parts: Parts,
    pending: Vec<ByAge>,
    gpu_workloads: Vec<(ByKey, Workload)>,
}

impl Gathered {
    /// Counts a pod where the walk would ([`super::walk`]'s `PodPass::add`);
    /// it comes after every pod gathered so far in key order.
    fn add(&mut self, pod: &Arc<Pod>, lookup: &GangLookup<'_>) {
        let parts = &mut self.parts;
        match Place::of(pod) {
            Place::Holds(node) => {
                parts.nodes.entry(node).or_default().push_holder(pod);
                *parts.holder_priorities.entry(pod.priority).or_default() += 1;
            }
            Place::Waits => self.pending.push(ByAge(pod.clone())),
            Place::FailedOn(node) => parts.nodes.entry(node).or_default().failed.push(pod.clone()),
            Place::Nowhere => {}
        }
        if is_gpu_workload(pod) {
            self.gpu_workloads.push((ByKey(pod.clone()), (pod.cuda, pod.node.clone())));
        }
        if let Some(gang) = lookup.of(pod) {
            parts.members.entry(gang.clone()).or_default().push(pod.clone());
            parts.gang_of.insert(pod.key(), gang.clone());
        }
    }

    /// These pods, then those of `later` (whose keys come after).
    fn then(mut self, later: Gathered) -> Gathered {
        let (mine, theirs) = (&mut self.parts, later.parts);
        for (node, pods) in theirs.nodes {
            mine.nodes.entry(node).or_default().then(pods);
        }
        for (gang, pods) in theirs.members {
            mine.members.entry(gang).or_default().extend(pods);
        }
        mine.gang_of.extend(theirs.gang_of);
        for (priority, n) in theirs.holder_priorities {
            *mine.holder_priorities.entry(priority).or_default() += n;
        }
        self.pending.extend(later.pending);
        self.gpu_workloads.extend(later.gpu_workloads);
        self
    }

    fn into_parts(self) -> Parts {
        // Both sort what they are given; the workloads come sorted already.
        Parts {
            pending: self.pending.into_iter().collect(),
            gpu_workloads: self.gpu_workloads.into_iter().collect(),
            ..self.parts
        }
    }
}

impl Parts {
    /// Counts a pod where [`Gathered::add`] would, in its place among the
    /// pods already there; its node, if it holds one, is `touched`.
    fn put_in(&mut self, pod: &Arc<Pod>, lookup: &GangLookup<'_>, touched: &mut HashSet<Sym, SymHash>) {
        match Place::of(pod) {
            Place::Holds(node) => {
                insert_in_order(&mut self.nodes.entry(node.clone()).or_default().holders, pod);
                touched.insert(node);
                *self.holder_priorities.entry(pod.priority).or_default() += 1;
            }
            Place::Waits => {
                self.pending.insert(ByAge(pod.clone()));
            }
            Place::FailedOn(node) => insert_in_order(&mut self.nodes.entry(node).or_default().failed, pod),
            Place::Nowhere => {}
        }
        if is_gpu_workload(pod) {
            self.gpu_workloads.insert(ByKey(pod.clone()), (pod.cuda, pod.node.clone()));
        }
        if let Some(gang) = lookup.of(pod) {
            insert_in_order(self.members.entry(gang.clone()).or_default(), pod);
            self.gang_of.insert(pod.key(), gang.clone());
        }
    }

    /// Undoes [`Parts::put_in`] of the same pod.
    fn take_out(&mut self, pod: &Arc<Pod>, touched: &mut HashSet<Sym, SymHash>) {
        match Place::of(pod) {
            Place::Holds(node) => {
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
            }
            Place::Waits => {
                self.pending.remove(&ByAge(pod.clone()));
            }
            Place::FailedOn(node) => {
                if let Some(pods) = self.nodes.get_mut(&node) {
                    remove_in_order(&mut pods.failed, pod);
                }
                touched.insert(node);
            }
            Place::Nowhere => {}
        }
        if is_gpu_workload(pod) {
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

    /// Recounts the nodes whose pods changed; drops those left with none.
    fn recount(&mut self, touched: HashSet<Sym, SymHash>) {
        for node in touched {
            if let Some(pods) = self.nodes.get_mut(&node) {
                if pods.holders.is_empty() && pods.failed.is_empty() {
                    self.nodes.remove(&node);
                } else {
                    pods.recount();
                }
            }
        }
    }
}

/// The namespaces where a pod may belong to another gang in `now` than in
/// `was`: a gang came, went, or names another owner ([`GangLookup`] finds
/// a pod's gang among its namespace's only). A gang's status (admission,
/// conditions, counts), what changes most, moves no pod.
fn regrouped(was: &OrdMap<GangKey, Arc<Gang>>, now: &OrdMap<GangKey, Arc<Gang>>) -> Vec<Sym> {
    let mut namespaces = Vec::new();
    for change in was.diff(now) {
        let moved = match change {
            DiffItem::Add(key, _) | DiffItem::Remove(key, _) => Some(key.namespace.clone()),
            DiffItem::Update { old: (key, a), new: (_, b) } => {
                (a.owner != b.owner || a.namespace != b.namespace || a.name != b.name).then_some(key.namespace.clone())
            }
        };
        if let Some(namespace) = moved
            && !namespaces.contains(&namespace)
        {
            namespaces.push(namespace);
        }
    }
    namespaces
}

/// The pods of one namespace, in key order.
fn in_namespace(pods: &OrdMap<PodKey, Arc<Pod>>, namespace: Sym) -> impl Iterator<Item = &Arc<Pod>> {
    let first = PodKey { namespace: namespace.clone(), name: Arc::from("") };
    pods.range(first..).take_while(move |(key, _)| key.namespace == namespace).map(|(_, pod)| pod)
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
    /// them when it started over, none while pods are listing.
    pub fn last_changes(&self) -> usize {
        self.last_changes
    }

    /// Brings the ledger up to date with `snap`: the pods that differ from
    /// the last snapshot's are taken out and put back in, and so are all the
    /// pods of a namespace where a gang came, went or changed owner. A
    /// change in bulk costs more that way than gathering every pod again:
    /// it starts over. While the pods are listing (a first list, a relist)
    /// nothing is kept: they are walked until the list is complete.
    pub fn update(&mut self, snap: &Snapshot) {
        self.update_in_halves_from(snap, PARALLEL_WALK_FROM);
    }

    /// [`PodLedger::update`], starting over in two halves from `parallel_from` pods.
    pub(super) fn update_in_halves_from(&mut self, snap: &Snapshot, parallel_from: usize) {
        if self.is_current(snap) {
            self.last_changes = 0;
            return;
        }
        if snap.feed(Feed::Pods).is_some_and(|f| f.state == FeedState::Syncing) {
            // Nothing kept, not even the last pods: an old version of the
            // map holds nodes the new one has copied.
            *self = PodLedger::default();
            return;
        }
        let bulk = (snap.pods.len() / BULK_SHARE).max(BULK_AT_LEAST);
        // Pods of these namespaces are taken out and put back in whether
        // they changed or not: their gangs may have.
        let regrouped = if self.kept { regrouped(&self.gangs, &snap.gangs) } else { Vec::new() };
        let few = self.kept && {
            let changed = self.pods.diff(&snap.pods).take(bulk + 1).count();
            let again =
                |pods| regrouped.iter().map(|ns| in_namespace(pods, ns.clone()).take(bulk + 1).count()).sum::<usize>();
            changed + again(&self.pods) + again(&snap.pods) <= bulk
        };
        let lookup = GangLookup::new(&snap.gangs);
        if few {
            let mut touched: HashSet<Sym, SymHash> = HashSet::default();
            let mut changed = 0;
            for change in self.pods.diff(&snap.pods) {
                let (DiffItem::Add(key, _) | DiffItem::Update { new: (key, _), .. } | DiffItem::Remove(key, _)) =
                    change;
                if regrouped.contains(&key.namespace) {
                    continue;
                }
                match change {
                    DiffItem::Add(_, pod) => self.parts.put_in(pod, &lookup, &mut touched),
                    DiffItem::Update { old: (_, was), new: (_, pod) } => {
                        self.parts.take_out(was, &mut touched);
                        self.parts.put_in(pod, &lookup, &mut touched);
                    }
                    DiffItem::Remove(_, was) => self.parts.take_out(was, &mut touched),
                }
                changed += 1;
            }
            for namespace in &regrouped {
                for was in in_namespace(&self.pods, namespace.clone()) {
                    self.parts.take_out(was, &mut touched);
                    changed += 1;
                }
                for pod in in_namespace(&snap.pods, namespace.clone()) {
                    self.parts.put_in(pod, &lookup, &mut touched);
                    changed += 1;
                }
            }
            self.parts.recount(touched);
            self.last_changes = changed;
        } else {
            self.parts = Parts::default();
            let gather = |pods: &mut dyn Iterator<Item = &Arc<Pod>>| {
                let mut gathered = Gathered::default();
                for pod in pods {
                    gathered.add(pod, &lookup);
                }
                gathered
            };
            self.parts = in_halves(snap, parallel_from, gather, Gathered::then).into_parts();
            self.last_changes = snap.pods.len();
        }
        self.kept = true;
        self.pods = snap.pods.clone();
        self.gangs = snap.gangs.clone();
    }

    /// The index's parts for the snapshot's nodes: what the walk would
    /// gather, at the cost of copying references rather than reading pods.
    pub(super) fn parts<'a>(&'a self, node_list: &[&Node], position: &SymMap<u32>) -> PodParts<'a> {
        let mut usage_list = Vec::with_capacity(node_list.len());
        let mut gpu_pods = Vec::with_capacity(node_list.len());
        let mut bound: Vec<&Pod> = Vec::with_capacity(self.parts.holder_priorities.values().sum::<u32>() as usize);
        let mut bound_ends = Vec::with_capacity(node_list.len());
        for node in node_list {
            match self.parts.nodes.get(&node.name) {
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
        for (node, pods) in &self.parts.nodes {
            if !pods.holders.is_empty() && !position.contains_key(node) {
                stray.insert(node.clone(), (pods.used.clone(), pods.holders.iter().map(|p| &**p).collect()));
            }
            if !pods.failed.is_empty() {
                failed_on.insert(node.clone(), pods.failed.iter().map(|p| &**p).collect());
            }
        }
        let pending_pods: Vec<&Pod> = self.parts.pending.iter().map(|p| &*p.0).collect();
        debug_assert!(pending_pods.is_sorted_by(|a, b| in_pending_order(a, b).is_le()));
        let gpu_workloads = self
            .parts
            .gpu_workloads
            .iter()
            .map(|(p, (cuda, node))| GpuWorkload {
                pod: &p.0,
                cuda: *cuda,
                node: node.as_ref().and_then(|n| position.get(n)).map(|&i| i as usize),
            })
            .collect();
        let members =
            self.parts.members.iter().map(|(gang, pods)| (gang.clone(), pods.iter().map(|p| &**p).collect())).collect();
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
            gang_of: self.parts.gang_of.clone(),
            lowest_holder_priority: self.parts.holder_priorities.keys().next().copied(),
        }
    }
}
