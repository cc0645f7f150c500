//! Room for a shape of pods whose GPUs come through DRA claims: how many of
//! its pods one node's free devices can take at once, each pod's claims
//! (from its templates) allocated beside the others' as the scheduler's
//! allocator would (`allocate.rs`), a claim the pods share allocated once.
//! The fragmentation map's slots, usable and stranded devices for such pods.

use std::collections::{BTreeSet, HashMap, HashSet};

use crate::model::dra::{Amount, ResourceClaim};
use crate::model::{ClaimSource, Pod, PodClaim, Sym};

use super::allocate::{Alternative, Slot, allocate_slots, slots, taints_allow, usable_given};
use super::cel::Selectors;
use super::{DraIndex, SliceDevice};

/// A pod's claims resolved against the cluster, as one more pod like it
/// would ask them.
#[derive(Clone, Debug, Default)]
pub struct Ask<'a> {
    /// Claims the pods share (`resourceClaimName`) not allocated yet: the
    /// first pod's allocation serves the others.
    pub shared: Vec<&'a ResourceClaim>,
    /// Claims each pod has made for it from a template.
    pub per_pod: Vec<&'a ResourceClaim>,
    /// A shared claim allocated already limits every pod to its node.
    pub pinned: Option<Sym>,
}

/// What one node's devices offer a shape.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Room {
    /// Pods whose claims the node can allocate at once (at most the bound asked).
    pub pods: u64,
    /// GPU devices on the node one of its pod's GPU requests matches, held or not.
    pub matching: u64,
    /// Of those, the free ones: no claim holds them (nor a partition of
    /// their GPU), no taint keeps them off, the shared counters allow them.
    /// MIG devices (which overlap) count as the physical GPUs they are on.
    pub free: u64,
    /// Every matching device is a whole GPU (not a MIG device).
    pub whole: bool,
}

/// (driver, pool, device).
pub type DeviceId = (Sym, Sym, Sym);

/// A defragmentation plan's view of the devices: those its evictions free
/// (the claims made for an evicted pod go with it) and those its moved
/// pods' new claims take.
#[derive(Clone, Debug, Default)]
pub struct DeviceMoves {
    pub released: HashSet<DeviceId>,
    pub taken: HashSet<DeviceId>,
}

impl DeviceMoves {
    fn held(&self, ix: &DraIndex<'_>, d: &SliceDevice<'_>) -> bool {
        if self.taken.is_empty() && self.released.is_empty() {
            return ix.allocated_to(&d.id()).is_some();
        }
        let id = d.id();
        self.taken.contains(&id) || (ix.allocated_to(&id).is_some() && !self.released.contains(&id))
    }
}

impl<'a> DraIndex<'a> {
    /// The devices a running pod holds through claims made for it alone
    /// (from its templates, or by the scheduler for its extended
    /// resources), which its eviction frees and its replacement asks again;
    /// None where it uses a claim of its own name (shared or standalone: it
    /// stays allocated where it is, and pins a replacement there) or one
    /// whose devices draw on shared counters (partitions: not planned).
    pub fn movable_devices(&self, pod: &Pod) -> Option<Vec<DeviceId>> {
        let mut out = Vec::new();
        for state in self.pod_claims(pod) {
            let super::PodClaimState::Found(_, claim) = state else { return None };
            // Made for this pod (its template's, or the scheduler's): it goes with the pod.
            claim.owner_pod.as_ref()?;
            for a in claim.allocated.iter().filter(|a| !a.admin_access) {
                let id = (a.driver.clone(), a.pool.clone(), a.device.clone());
                if self.devices.get(&id).is_some_and(|d| !d.device.consumes.is_empty()) {
                    return None;
                }
                out.push(id);
            }
        }
        Some(out)
    }

    /// The devices a replacement of `pod` would take on `node` (its claims
    /// made again, allocated beside what `moves` leaves held), or None
    /// where they do not fit there.
    pub fn land(&self, selectors: &mut Selectors, node: &Sym, pod: &Pod, moves: &DeviceMoves) -> Option<Vec<DeviceId>> {
        let ask = self.ask(&pod.namespace, &pod.claims)?;
        if !ask.shared.is_empty() || ask.pinned.is_some() {
            return None;
        }
        let devices = self.devices_on(node);
        let pending: Vec<(String, &ResourceClaim)> = ask.per_pod.iter().map(|c| (c.name.to_string(), *c)).collect();
        let slots = slots(self, selectors, devices, &pending, &mut Vec::new());
        let open = usable_given(devices, |d| moves.held(self, d));
        let given = allocate_slots(self, node.clone(), devices, &pending, &slots, open).ok()?;
        Some(given.into_iter().filter(|g| !g.admin_access).map(|g| devices[g.device].id()).collect())
    }

    /// `claims` (a pod's `spec.resourceClaims` in `namespace`) as one more
    /// such pod asks them; None where a claim or template does not exist or
    /// a claim is being deleted (the pending chain says which).
    pub fn ask(&self, namespace: &Sym, claims: &[PodClaim]) -> Option<Ask<'a>> {
        let mut ask = Ask::default();
        for c in claims {
            match &c.source {
                ClaimSource::Template(t) => ask.per_pod.push(self.templates.get(&(namespace.clone(), &**t))?),
                // The scheduler makes one like it for each such pod.
                ClaimSource::ExtendedResources(_) => {
                    ask.per_pod.push(self.claims.get(&(namespace.clone(), c.generated.as_deref()?))?)
                }
                ClaimSource::Claim(name) => {
                    let claim = *self.claims.get(&(namespace.clone(), &**name))?;
                    if claim.deleting {
                        return None;
                    }
                    if !claim.is_allocated() {
                        ask.shared.push(claim);
                    } else if let Some(node) = claim.allocated_node.clone() {
                        ask.pinned = Some(node);
                    }
                }
            }
        }
        Some(ask)
    }

    /// How many pods of `ask` the node's devices can take at once, at most
    /// `most` (what its CPU, memory and pod count leave).
    pub fn room(&self, selectors: &mut Selectors, node: &Sym, ask: &Ask<'_>, most: u64) -> Room {
        self.room_after(selectors, node, ask, most, &DeviceMoves::default())
    }

    /// [`DraIndex::room`] once a plan's `moves` are made.
    pub fn room_after(
        &self,
        selectors: &mut Selectors,
        node: &Sym,
        ask: &Ask<'_>,
        most: u64,
        moves: &DeviceMoves,
    ) -> Room {
        let devices = self.devices_on(node);
        if devices.is_empty() || ask.pinned.as_ref().is_some_and(|p| p != node) {
            return Room::default();
        }
        let base: Vec<(String, &ResourceClaim)> =
            ask.shared.iter().chain(&ask.per_pod).map(|c| (c.name.to_string(), *c)).collect();
        // Errors are the pending chain's to report; a device that fails a selector is not matched.
        let base_slots = slots(self, selectors, devices, &base, &mut Vec::new());
        let own: Vec<&Slot<'_>> = base_slots.iter().filter(|s| s.claim >= ask.shared.len()).collect();
        let counted: Vec<&Slot<'_>> = if own.is_empty() { base_slots.iter().collect() } else { own.clone() };
        let open = usable_given(devices, |d| moves.held(self, d));
        let (matching, free) = self.gpu_devices(selectors, devices, &open, &counted);
        let whole = matching.iter().all(|d| devices[*d].is_whole_gpu());
        let fits = |k: u64| {
            let (pending, slots) = copies(&base, &base_slots, ask.shared.len(), k);
            allocate_slots(self, node.clone(), devices, &pending, &slots, open.clone()).is_ok()
        };
        let pods = if own.is_empty() {
            if fits(0) { most } else { 0 }
        } else {
            // No more pods than the free devices any request matches can
            // serve at each request's smallest count (an upper bound: the
            // search says how many fit).
            let any_free = free_matching(self, devices, &open, &own);
            let per_pod: u64 = own
                .iter()
                .map(|s| {
                    let count = |a: &Alternative<'_>| match a.exact.amount {
                        Amount::Count(n) => n,
                        Amount::All => 1,
                    };
                    s.alternatives.iter().map(count).min().unwrap_or(0)
                })
                .fold(0, u64::saturating_add);
            let bound = any_free.checked_div(per_pod).unwrap_or(devices.len() as u64);
            largest(bound.min(most), fits)
        };
        // Partitions of one GPU overlap: free ones are counted as the
        // physical GPUs they are on, not added up past the GPUs there are.
        let free = if whole {
            free.len() as u64
        } else {
            free.iter().filter_map(|d| devices[*d].physical_gpu()).collect::<BTreeSet<_>>().len() as u64
        };
        Room { pods, matching: matching.len() as u64, free, whole }
    }

    /// The devices the slots' alternatives match that are GPUs (the
    /// alternative asks for GPUs), and of those the free ones.
    fn gpu_devices(
        &self,
        selectors: &mut Selectors,
        devices: &[SliceDevice<'_>],
        open: &[bool],
        slots: &[&Slot<'_>],
    ) -> (BTreeSet<usize>, BTreeSet<usize>) {
        let (mut matching, mut free) = (BTreeSet::new(), BTreeSet::new());
        for alt in slots.iter().flat_map(|s| &s.alternatives) {
            if !self.asks_for_gpus(selectors, alt.exact) {
                continue;
            }
            for &d in &alt.matching {
                matching.insert(d);
                if free_for(self, devices, open, alt, d) {
                    free.insert(d);
                }
            }
        }
        (matching, free)
    }
}

/// Whether device `d` is free for `alt` on its own: no claim holds it (nor
/// a partition of its GPU: `open`), its taints allow the request, and the
/// pool's shared counters have room for it.
fn free_for(ix: &DraIndex<'_>, devices: &[SliceDevice<'_>], open: &[bool], alt: &Alternative<'_>, d: usize) -> bool {
    open[d] && taints_allow(alt.exact, &devices[d]) && ix.fits_counters(&devices[d], &HashMap::new())
}

/// Free devices any alternative of these slots matches.
fn free_matching(ix: &DraIndex<'_>, devices: &[SliceDevice<'_>], open: &[bool], slots: &[&Slot<'_>]) -> u64 {
    let free: BTreeSet<usize> = slots
        .iter()
        .flat_map(|s| &s.alternatives)
        .flat_map(|alt| alt.matching.iter().copied().filter(move |&d| free_for(ix, devices, open, alt, d)))
        .collect();
    free.len() as u64
}

/// The shared claims and `k` copies of the per-pod ones (each copy a claim
/// of its own), with their slots: the devices each matches found once.
fn copies<'c, 'p>(
    base: &[(String, &'c ResourceClaim)],
    base_slots: &[Slot<'p>],
    shared: usize,
    k: u64,
) -> (Vec<(String, &'c ResourceClaim)>, Vec<Slot<'p>>) {
    let per_pod = base.len() - shared;
    let mut pending: Vec<(String, &ResourceClaim)> = base[..shared].to_vec();
    let mut slots: Vec<Slot<'_>> = base_slots.iter().filter(|s| s.claim < shared).cloned().collect();
    for copy in 0..k as usize {
        for (name, claim) in &base[shared..] {
            pending.push((format!("{name}#{copy}"), *claim));
        }
        for s in base_slots.iter().filter(|s| s.claim >= shared) {
            let mut s = s.clone();
            s.claim += copy * per_pod;
            slots.push(s);
        }
    }
    (pending, slots)
}

/// The largest k in 0..=bound with `fits(k)`, trying the bound first (the
/// usual answer on GPUs alike) and halving after: fitting k pods means
/// fitting fewer.
fn largest(bound: u64, mut fits: impl FnMut(u64) -> bool) -> u64 {
    if bound == 0 || fits(bound) {
        return bound;
    }
    let (mut yes, mut no) = (0, bound);
    while no - yes > 1 {
        let mid = yes + (no - yes) / 2;
        if fits(mid) { yes = mid } else { no = mid }
    }
    yes
}
