//! DRA devices as GPU supply and claims as GPU demand: which published
//! devices are GPUs (NVIDIA's driver: `type` gpu or mig), which physical GPU
//! each belongs to, which are allocated to a claim, and what a pod's claims
//! ask for.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::model::dra::{Amount, Device, DeviceClass, DraFeature, ExactRequest, ResourceClaim, ResourceSlice};
use crate::model::{ClaimSource, DraObject, Pod, Snapshot, Sym, TaintEffect};

mod allocate;
pub mod bind;
pub mod cel;
pub mod claims;
pub mod partitions;
pub mod room;
#[cfg(test)]
mod tests;

/// NVIDIA's DRA Driver for GPUs.
pub const NVIDIA_GPU_DRIVER: &str = "gpu.nvidia.com";

/// A node's GPUs as DRA publishes them, in physical GPUs (a MIG device is a
/// share of its parent, counted with it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DraGpus {
    pub published: u64,
    /// A device on it (the GPU or one of its MIG devices) is allocated to a claim.
    pub allocated: u64,
    /// Not allocated, and tainted NoSchedule or NoExecute (device taints).
    pub tainted: u64,
    /// Published as a whole GPU (`type: gpu`) and not tainted (allocated
    /// or not): the most whole GPUs one claim could have here.
    pub whole: u64,
    /// Of `whole`, those with no device of theirs allocated: what a claim
    /// for whole GPUs can have here now.
    pub whole_free: u64,
}

/// GPUs a pod holds through DRA claims.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Held {
    pub gpus: u64,
    /// MIG devices.
    pub slices: u64,
    /// Physical GPUs' worth.
    pub share: f64,
    /// One of its claims serves other pods too (reserved for several): the
    /// same devices are theirs as well.
    pub shared: bool,
}

/// (driver, pool): a pool of devices, as allocations and counters name it.
pub type PoolId = (Sym, Sym);
/// (counter set, counter): one of a pool's shared counters.
pub type CounterKey = (Sym, Sym);
/// A pool's shared counters and what is left of each.
pub type Counters = HashMap<CounterKey, i128>;

/// A published device and the slice that carries it.
#[derive(Clone, Copy, Debug)]
pub struct SliceDevice<'a> {
    pub slice: &'a ResourceSlice,
    pub device: &'a Device,
}

impl<'a> SliceDevice<'a> {
    /// (driver, pool, device): how an allocation names it.
    pub fn id(&self) -> (Sym, Sym, Sym) {
        (self.slice.driver.clone(), self.slice.pool.clone(), self.device.name.clone())
    }

    /// A string attribute in NVIDIA's driver domain (`type`, `uuid`,
    /// `productName`, ...).
    pub fn nvidia_attribute(&self, name: &str) -> Option<&'a str> {
        // Compared in its two parts: this runs for every device of every
        // search, and a formatted key per call was a tenth of the time.
        let qualified = |k: &str| {
            k.strip_prefix(NVIDIA_GPU_DRIVER).and_then(|rest| rest.strip_prefix('/')).is_some_and(|n| n == name)
        };
        self.device.attributes.iter().find(|(k, _)| qualified(k.as_str())).and_then(|(_, v)| v.as_str())
    }

    /// A whole GPU (`type: gpu`), not a MIG device.
    pub fn is_whole_gpu(&self) -> bool {
        self.nvidia_attribute("type") == Some("gpu")
    }

    /// The physical GPU this device is or is part of, for NVIDIA's driver.
    /// Borrowed, not interned: the allocator's search asks it of every
    /// device for every node's room.
    pub fn physical_gpu(&self) -> Option<&'a str> {
        if self.slice.driver.as_str() != NVIDIA_GPU_DRIVER {
            return None;
        }
        match self.nvidia_attribute("type")? {
            "gpu" => self.nvidia_attribute("uuid").or(Some(self.device.name.as_str())),
            "mig" => self.nvidia_attribute("parentUUID"),
            _ => None,
        }
    }

    /// (driver, pool): where its shared counters are.
    pub fn pool_id(&self) -> PoolId {
        (self.slice.driver.clone(), self.slice.pool.clone())
    }

    /// What allocating it draws from its pool's shared counters.
    pub fn consumption(&self) -> impl Iterator<Item = (CounterKey, i128)> + '_ {
        self.device.consumes.iter().flat_map(move |(set, counters)| {
            counters.iter().map(move |(counter, amount)| ((set.clone(), counter.clone()), i128::from(*amount)))
        })
    }

    /// Where it is, for people: its node, else its slice (network-attached).
    pub fn place(&self) -> String {
        self.slice.node.as_ref().map_or_else(|| format!("slice {}", self.slice.name), |n| n.to_string())
    }

    /// Tainted so that new claims keep off it.
    pub fn tainted(&self) -> bool {
        self.device.taints.iter().any(|t| matches!(t.effect, TaintEffect::NoSchedule | TaintEffect::NoExecute))
    }
}

/// How long a pod bound to a node may wait for the node's IMEX daemon in
/// its ComputeDomain before kgpu calls it stuck: the daemon is scheduled,
/// pulled and started only after the first claim on the node asked for it.
pub const DOMAIN_GRACE_SECONDS: i64 = 60;

/// The DRA objects of a snapshot, looked up.
#[derive(Default)]
pub struct DraIndex<'a> {
    classes: HashMap<&'a str, &'a DeviceClass>,
    claims: HashMap<(Sym, &'a str), &'a ResourceClaim>,
    templates: HashMap<(Sym, &'a str), &'a ResourceClaim>,
    /// ComputeDomains by uid, as channel claims name them.
    domains: HashMap<&'a str, &'a crate::model::ComputeDomain>,
    /// Node-local devices by node, from each pool's newest generation.
    by_node: HashMap<Sym, Vec<SliceDevice<'a>>>,
    /// (driver, pool, device) → the claim it is allocated to (admin access
    /// aside: such a device stays free for others, as the scheduler counts).
    allocated: HashMap<(Sym, Sym, Sym), &'a ResourceClaim>,
    /// (driver, pool) → (counter set, counter) → what the allocated devices
    /// leave of the pool's shared counters (KEP-4815; may be negative).
    counters_left: HashMap<PoolId, Counters>,
    /// (driver, pool, device) → the published device.
    devices: HashMap<(Sym, Sym, Sym), SliceDevice<'a>>,
    /// Devices that use what kgpu does not model (network-attached ones
    /// included, which no node's list has), with what they use.
    unmodelled: Vec<(SliceDevice<'a>, DraFeature)>,
    gpus: HashMap<Sym, DraGpus>,
    /// Pools the scheduler allocates nothing from now.
    pool_problems: HashMap<PoolId, PoolProblem>,
    /// Allocated claims by the node their allocation is on.
    claims_by_node: HashMap<Sym, Vec<&'a ResourceClaim>>,
}

/// Why the scheduler's allocator skips a pool (`GatherPools`): it takes no
/// device of it, and a request for all devices on its node fails.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PoolProblem {
    /// Its newest generation has not as many slices as each says it has
    /// (`resourceSliceCount`): the driver is still writing them.
    Incomplete { slices: u64, expected: i64 },
    /// Two of its slices publish a device of this name.
    DuplicateDevice(Sym),
}

impl<'a> DraIndex<'a> {
    pub fn build(snap: &'a Snapshot) -> DraIndex<'a> {
        let mut ix = DraIndex::default();
        if snap.dra.is_empty() {
            return ix;
        }
        // The scheduler uses a pool's newest generation only: slices of an
        // older one are being replaced.
        let mut newest: HashMap<(Sym, Sym), i64> = HashMap::new();
        for o in snap.dra.values() {
            if let DraObject::Slice(s) = &**o {
                let g = newest.entry((s.driver.clone(), s.pool.clone())).or_insert(s.pool_generation);
                *g = (*g).max(s.pool_generation);
            }
        }
        for o in snap.dra.values() {
            match &**o {
                DraObject::Slice(s) => {
                    if newest.get(&(s.driver.clone(), s.pool.clone())) != Some(&s.pool_generation) {
                        continue;
                    }
                    for device in s.devices.iter() {
                        let d = SliceDevice { slice: s, device };
                        ix.devices.insert(d.id(), d);
                        let features = s
                            .unmodelled
                            .iter()
                            .filter(|(on, _)| on.as_str() == device.name.as_str() || on.as_str() == &*s.name);
                        ix.unmodelled.extend(features.map(|(_, f)| (d, *f)));
                        if let Some(node) = s.node.clone() {
                            ix.by_node.entry(node).or_default().push(d);
                        }
                    }
                }
                DraObject::Class(c) => {
                    ix.classes.insert(&c.name, c);
                }
                DraObject::Claim(c) if c.template => {
                    ix.templates.insert((c.namespace.clone(), &c.name), c);
                }
                DraObject::Domain(d) => {
                    ix.domains.insert(&d.uid, d);
                }
                DraObject::Claim(c) => {
                    ix.claims.insert((c.namespace.clone(), &c.name), c);
                    if let Some(node) = c.allocated_node.clone() {
                        ix.claims_by_node.entry(node).or_default().push(c);
                    }
                    for a in c.allocated.iter().filter(|a| !a.admin_access) {
                        ix.allocated.insert((a.driver.clone(), a.pool.clone(), a.device.clone()), c);
                    }
                }
            }
        }
        ix.counters_left = ix.counters_left(snap, &newest);
        ix.pool_problems = pool_problems(snap, &newest);
        let gpus: Vec<(Sym, DraGpus)> =
            ix.by_node.iter().map(|(node, devices)| (node.clone(), ix.count(devices))).collect();
        ix.gpus = gpus.into_iter().filter(|(_, g)| g.published > 0).collect();
        ix
    }

    /// Why the scheduler allocates nothing from this pool now; None when it does.
    pub fn pool_problem(&self, pool: &PoolId) -> Option<&PoolProblem> {
        if self.pool_problems.is_empty() {
            return None;
        }
        self.pool_problems.get(pool)
    }

    /// Each pool's shared counters (from any of its newest slices) less what
    /// its allocated devices consume.
    fn counters_left(&self, snap: &Snapshot, newest: &HashMap<PoolId, i64>) -> HashMap<PoolId, Counters> {
        let mut left: HashMap<PoolId, Counters> = HashMap::new();
        for o in snap.dra.values() {
            let DraObject::Slice(s) = &**o else { continue };
            let pool = (s.driver.clone(), s.pool.clone());
            if s.shared_counters.is_empty() || newest.get(&pool) != Some(&s.pool_generation) {
                continue;
            }
            let counters = left.entry(pool).or_default();
            for (set, values) in s.shared_counters.iter() {
                for (counter, value) in values.iter() {
                    counters.insert((set.clone(), counter.clone()), i128::from(*value));
                }
            }
        }
        for id in self.allocated.keys() {
            let Some(d) = self.devices.get(id) else { continue };
            let Some(counters) = left.get_mut(&d.pool_id()) else { continue };
            for (key, amount) in d.consumption() {
                if let Some(value) = counters.get_mut(&key) {
                    *value -= amount;
                }
            }
        }
        left
    }

    fn count(&self, devices: &[SliceDevice<'a>]) -> DraGpus {
        let mut allocated: HashSet<&str> = HashSet::new();
        let mut tainted: HashSet<&str> = HashSet::new();
        let mut all: HashSet<&str> = HashSet::new();
        let mut whole: HashSet<&str> = HashSet::new();
        for d in devices {
            let Some(gpu) = d.physical_gpu() else { continue };
            all.insert(gpu);
            if d.is_whole_gpu() {
                whole.insert(gpu);
            }
            if self.allocated.contains_key(&d.id()) {
                allocated.insert(gpu);
            } else if d.tainted() {
                tainted.insert(gpu);
            }
        }
        let untainted: Vec<&&str> = whole.iter().filter(|g| allocated.contains(*g) || !tainted.contains(*g)).collect();
        let whole_free = untainted.iter().filter(|g| !allocated.contains(**g)).count() as u64;
        let tainted = tainted.difference(&allocated).count() as u64;
        DraGpus {
            published: all.len() as u64,
            allocated: allocated.len() as u64,
            tainted,
            whole: untainted.len() as u64,
            whole_free,
        }
    }

    /// Devices that use what kgpu does not model, with what they use.
    pub fn unmodelled_devices(&self) -> &[(SliceDevice<'a>, DraFeature)] {
        &self.unmodelled
    }

    /// DeviceClasses that serve an extended resource, by resource name.
    pub fn extended_resources(&self) -> impl Iterator<Item = (&'a Sym, &'a DeviceClass)> + '_ {
        self.classes.values().filter_map(|c| c.extended_resource.as_ref().map(|r| (r, *c)))
    }

    pub fn is_empty(&self) -> bool {
        self.by_node.is_empty() && self.claims.is_empty() && self.templates.is_empty()
    }

    /// The node's GPUs as DRA publishes them; none where it publishes none.
    pub fn gpus(&self, node: &Sym) -> Option<DraGpus> {
        self.gpus.get(node).copied()
    }

    pub fn devices_on(&self, node: &Sym) -> &[SliceDevice<'a>] {
        self.by_node.get(node).map_or(&[], |v| v)
    }

    pub fn nodes(&self) -> impl Iterator<Item = (Sym, &[SliceDevice<'a>])> {
        self.by_node.iter().map(|(n, d)| (n.clone(), d.as_slice()))
    }

    pub fn class(&self, name: &str) -> Option<&'a DeviceClass> {
        self.classes.get(name).copied()
    }

    /// Claims allocated on this node, by namespace and name (the snapshot's order).
    pub fn claims_on(&self, node: &Sym) -> &[&'a ResourceClaim] {
        self.claims_by_node.get(node).map_or(&[], Vec::as_slice)
    }

    pub fn allocated_to(&self, id: &(Sym, Sym, Sym)) -> Option<&'a ResourceClaim> {
        self.allocated.get(id).copied()
    }

    /// Whether a device fits its pool's shared counters once the allocated
    /// devices and `consumed` have drawn on them: as the scheduler checks,
    /// every counter of the pool stays at or above zero.
    pub fn fits_counters(&self, d: &SliceDevice<'_>, consumed: &HashMap<CounterKey, i128>) -> bool {
        if d.device.consumes.is_empty() {
            return true;
        }
        let Some(left) = self.counters_left.get(&d.pool_id()) else { return true };
        let consumption: Vec<(CounterKey, i128)> = d.consumption().collect();
        left.iter().all(|(key, value)| {
            let this: i128 = consumption.iter().filter(|(k, _)| k == key).map(|(_, v)| v).sum();
            *value >= consumed.get(key).copied().unwrap_or(0) + this
        })
    }

    /// What a pod holds of GPUs through its allocated claims: whole GPUs,
    /// and physical GPUs' worth (a MIG device its compute share), as the
    /// price of lost work counts them.
    pub fn held_by(&self, pod: &Pod) -> Held {
        let mut held = Held::default();
        if pod.claims.is_empty() {
            return held;
        }
        for state in self.pod_claims(pod) {
            let PodClaimState::Found(_, claim) = state else { continue };
            for a in claim.allocated.iter().filter(|a| !a.admin_access) {
                let Some(d) = self.devices.get(&(a.driver.clone(), a.pool.clone(), a.device.clone())) else { continue };
                if d.physical_gpu().is_none() {
                    continue;
                }
                held.shared |= claim.reserved_for.len() > 1;
                match d.nvidia_attribute("profile") {
                    Some(profile) => {
                        let geometry =
                            d.nvidia_attribute("productName").and_then(crate::reference::mig::geometry_for_product);
                        held.slices += 1;
                        held.share += crate::reference::mig::compute_share(profile, geometry);
                    }
                    None => {
                        held.gpus += 1;
                        held.share += 1.0;
                    }
                }
            }
        }
        held
    }

    /// Whole GPUs (by UUID, as NVML and dcgm-exporter name them) allocated
    /// to claims, and the pods the claims are reserved for: who holds a GPU
    /// that the kubelet's device-plugin view does not name.
    pub fn whole_gpu_holders(&self) -> HashMap<Sym, Vec<crate::model::PodKey>> {
        let mut out: HashMap<Sym, Vec<crate::model::PodKey>> = HashMap::new();
        for claim in self.claims.values() {
            if claim.reserved_for.is_empty() {
                continue;
            }
            // Admin access (a monitoring pod) reaches a GPU without holding it.
            for a in claim.allocated.iter().filter(|a| !a.admin_access) {
                let Some(d) = self.devices.get(&(a.driver.clone(), a.pool.clone(), a.device.clone())) else { continue };
                let Some(uuid) = d.nvidia_attribute("uuid").filter(|_| d.is_whole_gpu()) else { continue };
                let holders = out.entry(Sym::new(uuid)).or_default();
                for pod in claim.reserved_for.iter() {
                    let key = crate::model::PodKey::new(claim.namespace.as_str(), pod);
                    if !holders.contains(&key) {
                        holders.push(key);
                    }
                }
            }
        }
        out
    }

    /// Whether `pod` holds GPUs through its claims, or its claims (or their
    /// templates) ask for some.
    pub fn wants_gpus(&self, selectors: &mut cel::Selectors, pod: &Pod) -> bool {
        self.held_by(pod).share > 0.0
            || self.pod_claims(pod).into_iter().any(|state| match state {
                PodClaimState::Found(_, claim) | PodClaimState::NotYetCreated(_, claim) => {
                    self.gpus_asked(selectors, claim) > 0
                }
                _ => false,
            })
    }

    /// GPUs one pod of a template asks through `claims` (a gang's pod set):
    /// None where a claim or template it names does not exist.
    pub fn template_gpus(
        &self,
        selectors: &mut cel::Selectors,
        namespace: &Sym,
        claims: &[crate::model::PodClaim],
    ) -> Option<u64> {
        let mut gpus = 0;
        for claim in self.spec_claims(namespace, claims)? {
            gpus += self.gpus_asked(selectors, claim);
        }
        Some(gpus)
    }

    /// Whether the GPUs `claims` ask are MIG devices (partitions of a GPU),
    /// not whole GPUs: a `1×2 DRA MIG` shape, as `1×2g.20gb` is for the
    /// device plugin.
    pub fn asks_partitions(
        &self,
        selectors: &mut cel::Selectors,
        namespace: &Sym,
        claims: &[crate::model::PodClaim],
    ) -> bool {
        let Some(resolved) = self.spec_claims(namespace, claims) else { return false };
        let requests: Vec<&ExactRequest> = resolved
            .iter()
            .flat_map(|c| c.requests.iter())
            .filter_map(|r| r.alternatives.first().map(|(_, e)| e))
            .filter(|e| self.asks_for_gpus(selectors, e))
            .collect();
        !requests.is_empty() && requests.into_iter().all(|e| self.matches_only_partitions(selectors, e))
    }

    /// A request whose class is NVIDIA's MIG class, or matches MIG devices
    /// of the fleet and no whole GPU.
    fn matches_only_partitions(&self, selectors: &mut cel::Selectors, request: &ExactRequest) -> bool {
        match request.class.as_str() {
            "mig.nvidia.com" => return true,
            "gpu.nvidia.com" => return false,
            _ => {}
        }
        let Some(class) = self.class(request.class.as_str()) else { return false };
        let mut matched = self.by_node.values().flatten().filter(|d| d.physical_gpu().is_some()).filter(|d| {
            selectors
                .all_match(
                    class.selectors.iter().chain(request.selectors.iter()).map(|s| &**s),
                    d.slice.driver.as_str(),
                    d.device,
                )
                .unwrap_or(false)
        });
        let mut any = false;
        for d in matched.by_ref().take(64) {
            if d.is_whole_gpu() {
                return false;
            }
            any = true;
        }
        any
    }

    /// The claims (or, for claims not made yet, the templates) a pod's
    /// entries name; None where one does not exist.
    fn spec_claims(&self, namespace: &Sym, claims: &[crate::model::PodClaim]) -> Option<Vec<&'a ResourceClaim>> {
        claims
            .iter()
            .map(|c| match &c.source {
                ClaimSource::Claim(name) => self.claims.get(&(namespace.clone(), &**name)).copied(),
                ClaimSource::Template(t) => self.templates.get(&(namespace.clone(), &**t)).copied(),
                ClaimSource::ExtendedResources(_) => {
                    self.claims.get(&(namespace.clone(), c.generated.as_deref()?)).copied()
                }
            })
            .collect()
    }

    /// The channel claim of a pod still Pending past [`DOMAIN_GRACE_SECONDS`]
    /// since the kubelet took it (its start time, else its creation), and
    /// the uid of the ComputeDomain it joins: a pod that may be waiting for
    /// its node's IMEX daemon (the pending chain and the Fleet say why).
    pub fn waiting_channel(&self, pod: &Pod, now: crate::model::Timestamp) -> Option<(&'a ResourceClaim, Arc<str>)> {
        let waiting = pod.phase == crate::model::PodPhase::Pending && !pod.terminating && !pod.mirror;
        if !waiting || pod.claims.is_empty() || now - pod.transitioned < DOMAIN_GRACE_SECONDS {
            return None;
        }
        self.channel_claim(pod)
    }

    /// A pod's channel claim and the uid of the ComputeDomain it joins.
    fn channel_claim(&self, pod: &Pod) -> Option<(&'a ResourceClaim, Arc<str>)> {
        self.pod_claims(pod).into_iter().find_map(|state| match state {
            PodClaimState::Found(_, claim) => claim.compute_domain.clone().map(|uid| (claim, uid)),
            _ => None,
        })
    }

    /// The ComputeDomain with this uid.
    pub fn domain(&self, uid: &str) -> Option<&'a crate::model::ComputeDomain> {
        self.domains.get(uid).copied()
    }

    /// Where each of a pod's claims stands.
    pub fn pod_claims(&self, pod: &Pod) -> Vec<PodClaimState<'a>> {
        pod.claims
            .iter()
            .map(|c| match &c.source {
                ClaimSource::Claim(name) => match self.claims.get(&(pod.namespace.clone(), &**name)) {
                    Some(claim) => PodClaimState::Found(c.name.clone(), claim),
                    None => PodClaimState::Missing(c.name.clone(), name.clone()),
                },
                ClaimSource::Template(t) => {
                    let generated = c.generated.as_deref().and_then(|n| self.claims.get(&(pod.namespace.clone(), n)));
                    match (generated, self.templates.get(&(pod.namespace.clone(), &**t))) {
                        (Some(claim), _) => PodClaimState::Found(c.name.clone(), claim),
                        (None, Some(template)) => PodClaimState::NotYetCreated(c.name.clone(), template),
                        (None, None) => PodClaimState::NoTemplate(c.name.clone(), t.clone()),
                    }
                }
                ClaimSource::ExtendedResources(_) => {
                    let name: Arc<str> = c.generated.clone().unwrap_or_default();
                    match self.claims.get(&(pod.namespace.clone(), &*name)) {
                        Some(claim) => PodClaimState::Found(c.name.clone(), claim),
                        None => PodClaimState::Missing(c.name.clone(), name),
                    }
                }
            })
            .collect()
    }

    /// Whether a request's first alternative asks for GPUs: its class
    /// selects NVIDIA GPU or MIG devices (by name as NVIDIA's chart
    /// installs them, else by the devices it matches in the fleet).
    pub fn asks_for_gpus(&self, selectors: &mut cel::Selectors, request: &ExactRequest) -> bool {
        if matches!(request.class.as_str(), "gpu.nvidia.com" | "mig.nvidia.com") {
            return true;
        }
        let Some(class) = self.class(request.class.as_str()) else { return false };
        self.by_node.values().flatten().filter(|d| d.physical_gpu().is_some()).take(64).any(|d| {
            selectors
                .all_match(class.selectors.iter().map(|s| &**s), d.slice.driver.as_str(), d.device)
                .unwrap_or(false)
        })
    }

    /// GPUs a claim asks for (whole devices; a MIG device counts one).
    pub fn gpus_asked(&self, selectors: &mut cel::Selectors, claim: &ResourceClaim) -> u64 {
        claim
            .requests
            .iter()
            .filter_map(|r| r.alternatives.first())
            .filter(|(_, e)| self.asks_for_gpus(selectors, e))
            .map(|(_, e)| match e.amount {
                Amount::Count(n) => n,
                Amount::All => 0,
            })
            .sum()
    }
}

/// Each pool's newest generation checked as the scheduler's `GatherPools`
/// does: all its slices there, and no device name twice.
fn pool_problems(snap: &Snapshot, newest: &HashMap<PoolId, i64>) -> HashMap<PoolId, PoolProblem> {
    /// One pool's newest generation as read so far.
    #[derive(Default)]
    struct Seen<'s> {
        slices: u64,
        expected: i64,
        names: HashSet<&'s Sym>,
        duplicate: Option<Sym>,
    }
    let mut pools: HashMap<PoolId, Seen<'_>> = HashMap::new();
    for o in snap.dra.values() {
        let DraObject::Slice(s) = &**o else { continue };
        let pool = (s.driver.clone(), s.pool.clone());
        if newest.get(&pool) != Some(&s.pool_generation) {
            continue;
        }
        let seen = pools.entry(pool).or_insert_with(|| Seen { expected: s.slice_count, ..Seen::default() });
        seen.slices += 1;
        for d in s.devices.iter() {
            if !seen.names.insert(&d.name) && seen.duplicate.is_none() {
                seen.duplicate = Some(d.name.clone());
            }
        }
    }
    pools
        .into_iter()
        .filter_map(|(pool, seen)| {
            let problem = if seen.slices as i64 != seen.expected {
                PoolProblem::Incomplete { slices: seen.slices, expected: seen.expected }
            } else {
                PoolProblem::DuplicateDevice(seen.duplicate?)
            };
            Some((pool, problem))
        })
        .collect()
}

/// What the cluster's DRA objects use that kgpu does not model, each
/// feature with the objects that use it (devices, claims, device classes).
pub fn unmodelled(index: &crate::analysis::index::Index<'_>) -> Vec<(DraFeature, Vec<String>)> {
    let ix = index.dra();
    let mut by: std::collections::BTreeMap<DraFeature, Vec<String>> = std::collections::BTreeMap::new();
    for (d, f) in ix.unmodelled_devices() {
        by.entry(*f).or_default().push(format!("device {} on {}", d.device.name, d.place()));
    }
    for c in ix.claims.values().chain(ix.templates.values()) {
        let kind = if c.template { "ResourceClaimTemplate" } else { "ResourceClaim" };
        for f in c.unmodelled.iter() {
            by.entry(*f).or_default().push(format!("{kind} {}/{}", c.namespace, c.name));
        }
    }
    by.into_iter()
        .map(|(f, mut at)| {
            at.sort();
            at.dedup();
            (f, at)
        })
        .collect()
}

/// Where one of a pod's claims stands.
#[derive(Clone, Debug)]
pub enum PodClaimState<'a> {
    Found(Sym, &'a ResourceClaim),
    /// `resourceClaimName` names a claim that does not exist.
    Missing(Sym, Arc<str>),
    /// The template exists; the claim controller has not made the claim yet.
    NotYetCreated(Sym, &'a ResourceClaim),
    /// `resourceClaimTemplateName` names a template that does not exist.
    NoTemplate(Sym, Arc<str>),
}

/// A shape whose GPUs come through claims: `1×2 DRA`, or `1×2 DRA MIG`
/// where they are MIG devices (what kgpu counts is then partitions).
pub fn shape_label(pods: u64, gpus: u64, partitions: bool) -> String {
    format!("{pods}×{gpus} DRA{}", if partitions { " MIG" } else { "" })
}
