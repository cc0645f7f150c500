//! The full walk over a snapshot's pods: what each node has in use, which
//! pods wait, which belong to which gang. [`super::ledger`] keeps the same
//! between snapshots instead.

use std::collections::HashMap;
use std::sync::Arc;

use imbl::OrdMap;

use crate::analysis::tally::Tally;
use crate::model::{Gang, GangKey, GangKind, Pod, PodKey, PodPhase, Snapshot, Sym, SymHash, SymMap};

use super::{GpuWorkload, PodParts};

/// Below this many pods one thread walks them all.
pub(super) const PARALLEL_WALK_FROM: usize = 20_000;

/// Gangs by what their pods name: (namespace, owner kind, owner name) for
/// Kueue workloads — the pod's own owner, or the top-level workload its
/// labels name (JobSet → Job → Pod) — and (namespace, group name) for the rest.
pub(super) struct GangLookup<'a> {
    by_owner: HashMap<(Sym, Sym, Sym), GangKey, SymHash>,
    /// By namespace, then name: a pod's group name is looked up as text.
    by_name: HashMap<Sym, HashMap<&'a str, GangKey>, SymHash>,
}

impl<'a> GangLookup<'a> {
    pub(super) fn new(gangs: &'a OrdMap<GangKey, Arc<Gang>>) -> GangLookup<'a> {
        let mut by_owner: HashMap<(Sym, Sym, Sym), GangKey, SymHash> = HashMap::default();
        let mut by_name: HashMap<Sym, HashMap<&str, GangKey>, SymHash> = HashMap::default();
        for (key, gang) in gangs.iter() {
            if let Some(owner) = &gang.owner {
                by_owner.insert((gang.namespace.clone(), owner.kind.clone(), owner.name.clone()), key.clone());
            }
            let entry =
                by_name.entry(gang.namespace.clone()).or_default().entry(&*gang.name).or_insert_with(|| key.clone());
            // A PodGroup wins a name clash: Volcano pods name their group.
            if key.kind == GangKind::VolcanoPodGroup {
                *entry = key.clone();
            }
        }
        GangLookup { by_owner, by_name }
    }

    pub(super) fn of(&self, pod: &Pod) -> Option<&GangKey> {
        let owned =
            |o: &crate::model::Owner| self.by_owner.get(&(pod.namespace.clone(), o.kind.clone(), o.name.clone()));
        pod.group
            .as_ref()
            .and_then(|g| self.by_name.get(&pod.namespace)?.get(g.as_str()))
            .or_else(|| pod.owner.as_ref().and_then(owned))
            .or_else(|| pod.workload.as_ref().and_then(owned))
    }
}

/// What one walk over (a range of) the pods gathers: the index's parts,
/// with the bound pods in walk order until they are grouped by node.
struct PodPass<'a> {
    parts: PodParts<'a>,
    bound_by_node: Vec<(u32, &'a Pod)>,
}

impl<'a> PodPass<'a> {
    fn new(nodes: usize) -> PodPass<'a> {
        PodPass {
            parts: PodParts {
                usage_list: vec![Tally::default(); nodes],
                gpu_pods: vec![0; nodes],
                bound: Vec::new(),
                bound_ends: Vec::new(),
                stray: SymMap::default(),
                failed_on: SymMap::default(),
                pending_pods: Vec::new(),
                gpu_workloads: Vec::new(),
                members: HashMap::new(),
                gang_of: HashMap::new(),
                lowest_holder_priority: None,
            },
            bound_by_node: Vec::new(),
        }
    }

    fn add(&mut self, pod: &'a Pod, position: &SymMap<u32>, gangs: &GangLookup<'_>) {
        let at = pod.node.as_ref().and_then(|n| position.get(n)).copied();
        match Place::of(pod) {
            Place::Holds(node) => {
                self.parts.lowest_holder_priority =
                    Some(self.parts.lowest_holder_priority.map_or(pod.priority, |p| p.min(pod.priority)));
                match at {
                    Some(i) => {
                        self.parts.usage_list[i as usize].add_pod(&pod.requests);
                        self.parts.gpu_pods[i as usize] += u32::from(pod.wants_gpu());
                        self.bound_by_node.push((i, pod));
                    }
                    None => {
                        let (used, pods) = self.parts.stray.entry(node).or_default();
                        used.add_pod(&pod.requests);
                        pods.push(pod);
                    }
                }
            }
            Place::Waits => self.parts.pending_pods.push(pod),
            Place::FailedOn(node) => self.parts.failed_on.entry(node).or_default().push(pod),
            Place::Nowhere => {}
        }
        if is_gpu_workload(pod) {
            self.parts.gpu_workloads.push(GpuWorkload { pod, cuda: pod.cuda, node: at.map(|i| i as usize) });
        }
        if let Some(gang) = gangs.of(pod) {
            self.parts.members.entry(gang.clone()).or_default().push(pod);
            self.parts.gang_of.insert(pod.key(), gang.clone());
        }
    }

    /// This walk, then `later` (a walk over the keys after this one's).
    fn then(mut self, later: PodPass<'a>) -> PodPass<'a> {
        let (mine, theirs) = (&mut self.parts, later.parts);
        for (mine, theirs) in mine.usage_list.iter_mut().zip(&theirs.usage_list) {
            mine.add_tally(theirs);
        }
        for (mine, theirs) in mine.gpu_pods.iter_mut().zip(&theirs.gpu_pods) {
            *mine += theirs;
        }
        self.bound_by_node.extend(later.bound_by_node);
        for (node, (used, pods)) in theirs.stray {
            let (my_used, my_pods) = mine.stray.entry(node).or_default();
            my_used.add_tally(&used);
            my_pods.extend(pods);
        }
        for (node, pods) in theirs.failed_on {
            mine.failed_on.entry(node).or_default().extend(pods);
        }
        mine.pending_pods.extend(theirs.pending_pods);
        mine.gpu_workloads.extend(theirs.gpu_workloads);
        for (gang, pods) in theirs.members {
            mine.members.entry(gang).or_default().extend(pods);
        }
        mine.gang_of.extend(theirs.gang_of);
        mine.lowest_holder_priority = match (mine.lowest_holder_priority, theirs.lowest_holder_priority) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self
    }

    /// The parts of an index: bound pods grouped by node (each node's in
    /// snapshot order), pending pods oldest first.
    fn into_parts(self) -> PodParts<'a> {
        let PodPass { mut parts, bound_by_node } = self;
        sort_pending(&mut parts.pending_pods);
        let mut bound_ends = vec![0u32; parts.usage_list.len()];
        for &(i, _) in &bound_by_node {
            bound_ends[i as usize] += 1;
        }
        let mut end = 0;
        for e in bound_ends.iter_mut() {
            end += *e;
            *e = end;
        }
        let mut next: Vec<u32> = std::iter::once(0).chain(bound_ends.iter().copied()).collect();
        let mut bound: Vec<&Pod> = bound_by_node.iter().map(|&(_, p)| p).collect();
        for &(i, pod) in &bound_by_node {
            bound[next[i as usize] as usize] = pod;
            next[i as usize] += 1;
        }
        PodParts { bound, bound_ends, ..parts }
    }
}

/// Pending pods as the index lists them: oldest first, then by name (a
/// stable sort of key order, so ties fall to the namespace).
fn sort_pending(pods: &mut [&Pod]) {
    pods.sort_by(|a, b| in_pending_order(a, b));
}

pub(super) fn in_pending_order(a: &Pod, b: &Pod) -> std::cmp::Ordering {
    a.created.cmp(&b.created).then_with(|| a.name.cmp(&b.name))
}

/// Where a pod counts in the index (the walk and the ledger both ask).
pub(super) enum Place {
    /// Bound and unfinished: it holds what it requests on its node.
    Holds(Sym),
    /// Unbound, not finished, not being deleted.
    Waits,
    /// Failed on its node (kept apart: admission errors say much about a node).
    FailedOn(Sym),
    Nowhere,
}

impl Place {
    pub(super) fn of(pod: &Pod) -> Place {
        match pod.node.clone() {
            Some(node) if pod.holds_resources() => Place::Holds(node),
            _ if pod.is_pending() => Place::Waits,
            Some(node) if pod.phase == PodPhase::Failed => Place::FailedOn(node),
            _ => Place::Nowhere,
        }
    }
}

/// An unfinished pod that wants a GPU: the matrix and the waves list it.
/// An unfinished pod that asks for GPUs, or may through DRA claims (which
/// of those ask for GPUs, the claims say: see `DraIndex::wants_gpus`).
pub(super) fn is_gpu_workload(pod: &Pod) -> bool {
    (pod.wants_gpu() || !pod.claims.is_empty()) && !pod.phase.is_terminal()
}

/// `gather` over every pod of `snap` in key order: from `parallel_from`
/// pods in two halves side by side (a cache miss per pod), the first
/// half's result then `join`ed with the second's.
pub(super) fn in_halves<'a, T: Send>(
    snap: &'a Snapshot,
    parallel_from: usize,
    gather: impl Fn(&mut dyn Iterator<Item = &'a Arc<Pod>>) -> T + Sync,
    join: impl FnOnce(T, T) -> T,
) -> T {
    let middle = (snap.pods.len() >= parallel_from).then(|| snap.pods.keys().nth(snap.pods.len() / 2)).flatten();
    match middle {
        Some(middle) => std::thread::scope(|scope| {
            let first = scope.spawn(|| gather(&mut snap.pods.range::<_, PodKey>(..middle).map(|(_, p)| p)));
            let second = gather(&mut snap.pods.range::<_, PodKey>(middle..).map(|(_, p)| p));
            let first = first.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            join(first, second)
        }),
        None => gather(&mut snap.pods.values()),
    }
}

/// Walks every pod of `snap` (in halves from `parallel_from` pods).
pub(super) fn walk<'a>(snap: &'a Snapshot, position: &SymMap<u32>, parallel_from: usize) -> PodParts<'a> {
    let gangs = GangLookup::new(&snap.gangs);
    let walk = |pods: &mut dyn Iterator<Item = &'a Arc<Pod>>| {
        let mut pass = PodPass::new(position.len());
        for pod in pods {
            pass.add(pod, position, &gangs);
        }
        pass
    };
    in_halves(snap, parallel_from, walk, PodPass::then).into_parts()
}
