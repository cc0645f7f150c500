//! One node's allocation of a pod's pending claims, searched as the
//! DynamicResources plugin's allocator searches: each request in turn, its
//! alternatives (`firstAvailable`) in order, devices first fit, going back
//! when a later request, a claim's constraint (`matchAttribute`,
//! `distinctAttribute`) or the pool's shared counters (KEP-4815
//! partitions) leave no way on. A request with admin access reaches devices
//! others hold, and takes none from them.

use std::collections::{HashMap, HashSet};

use crate::model::Sym;
use crate::model::dra::{Amount, AttributeValue, DeviceConstraint, ExactRequest, ResourceClaim};

use super::cel::{SelectorError, Selectors};
use super::{CounterKey, DraIndex, PoolId, PoolProblem, SliceDevice};

/// Devices the search may try on one node before it stops (the scheduler
/// stops after 10 s by default); a node where it stops counts as short.
const SEARCH_LIMIT: u32 = 100_000;

/// Why one node cannot allocate a pod's claims: the first request short
/// on its own, or, when each finds devices alone, why not all at once.
#[derive(Clone, Debug, PartialEq)]
pub struct Shortfall {
    pub node: Sym,
    /// `claim/request`.
    pub request: String,
    pub class: Sym,
    /// Devices asked (None: allocationMode All).
    pub wanted: Option<u64>,
    /// Devices on the node that match the class and selectors.
    pub matching: u64,
    /// Of those, not allocated to a claim, not tainted, within the counters.
    pub free: u64,
    /// Of those matching, how many no claim holds and no taint keeps off,
    /// but a held partition of the same GPU does (by the pool's shared
    /// counters, or the GPU whole beside its MIG devices).
    pub partition_held: u64,
    /// Of those matching, how many no claim holds but a device taint keeps
    /// off (NoSchedule or NoExecute the request does not tolerate).
    pub tainted: u64,
    /// The request's own selectors (the class's aside).
    pub selectors: Box<[Box<str>]>,
    /// Each request has enough on its own; together they do not.
    pub together: Option<Together>,
    /// The pod fits the node otherwise (selectors, taints, resources): the
    /// claims are what keeps it off.
    pub fits_otherwise: bool,
}

/// Why a node cannot allocate a pod's claims.
#[derive(Clone, Debug, PartialEq)]
pub enum Refusal {
    Short(Box<Shortfall>),
    /// The scheduler's allocator stops with an error on this node, which
    /// fails the pod's whole attempt.
    Aborted(Abort),
}

/// An error that ends the scheduler's attempt, in its words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Abort {
    pub cause: AbortCause,
    /// The allocator's error, as the scheduler writes it.
    pub message: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AbortCause {
    /// A request for all matching devices met one that breaks the claim's constraint.
    AllBreaksConstraint,
    /// A claim asks more devices than an allocation can hold
    /// ([`ALLOCATION_RESULTS_MAX`]): no node can ever allocate it.
    ClaimLimit { devices: u64 },
    /// A request for all devices, on a node whose pool is being updated
    /// (`invalid`: its slices contradict each other): "all" is not known.
    PoolNotReady { pool: String, invalid: bool },
}

/// The most devices one claim's allocation holds (`AllocationResultsMaxSize`).
pub const ALLOCATION_RESULTS_MAX: u64 = 32;

/// Why requests that each find devices alone cannot have them all at once.
#[derive(Clone, Debug, PartialEq)]
pub enum Together {
    /// A claim's constraint: no set of free devices has one value of the
    /// attribute (`matchAttribute`), or a different one each (`distinctAttribute`).
    Constraint { attribute: Sym, distinct: bool },
    /// The pool's shared counters (the partitions of one GPU) run out.
    Counters,
    /// The requests want the same devices.
    Overlap,
    /// The search stopped at its limit before it found a way.
    SearchLimit,
}

/// One request to allocate and its alternatives, each with the node's
/// devices that match it.
#[derive(Clone)]
pub(super) struct Slot<'p> {
    /// Index of its claim in the pending claims.
    pub(super) claim: usize,
    request: Sym,
    pub(super) alternatives: Vec<Alternative<'p>>,
}

#[derive(Clone)]
pub(super) struct Alternative<'p> {
    /// The request's name, or `request/subrequest`.
    name: Sym,
    pub(super) exact: &'p ExactRequest,
    /// Indices into the node's devices.
    pub(super) matching: Vec<usize>,
}

/// A device an allocation gives one of the pending claims.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Given {
    /// Index of the claim in the pending claims.
    pub claim: usize,
    /// The request's name, or `request/subrequest` (as `status.allocation` names it).
    pub request: Sym,
    /// Index into the node's devices.
    pub device: usize,
    /// Reached through admin access: the device stays free for others.
    pub admin_access: bool,
}

/// Allocates every pending claim's requests from the node's devices (the
/// devices each gets), or says which request falls short. Selectors that
/// fail are added to `errors`.
pub fn allocate_on(
    ix: &DraIndex<'_>,
    selectors: &mut Selectors,
    node: Sym,
    devices: &[SliceDevice<'_>],
    pending: &[(String, &ResourceClaim)],
    errors: &mut Vec<(String, SelectorError)>,
) -> Result<Vec<Given>, Refusal> {
    let slots = slots(ix, selectors, devices, pending, errors);
    allocate_slots(ix, node, devices, pending, &slots, usable(ix, devices))
}

/// [`allocate_on`] with each request's matching devices found already, and
/// which devices no claim holds (`usable`, or a plan's view of them).
pub(super) fn allocate_slots(
    ix: &DraIndex<'_>,
    node: Sym,
    devices: &[SliceDevice<'_>],
    pending: &[(String, &ResourceClaim)],
    slots: &[Slot<'_>],
    usable: Vec<bool>,
) -> Result<Vec<Given>, Refusal> {
    let mut search = Search {
        ix,
        devices,
        claims: pending.iter().map(|(_, c)| *c).collect(),
        usable,
        holders: vec![Vec::new(); devices.len()],
        consumed: HashMap::new(),
        constraints: pending.iter().map(|(_, c)| c.constraints.iter().map(Kept::new).collect()).collect(),
        steps: 0,
        aborted: None,
    };
    let shortfall = |search: &Search<'_, '_>, slot: &Slot<'_>, alt: &Alternative<'_>, together| {
        search.shortfall(node.clone(), &pending[slot.claim].0, alt, together)
    };
    if let Some(abort) = before_search(ix, devices, pending, slots) {
        return Err(Refusal::Aborted(abort));
    }
    // Each request on its own first: the one that falls short is the answer.
    let mut alone = None;
    for slot in slots {
        let mut first_short = None;
        for alt in &slot.alternatives {
            let free = alt.matching.iter().filter(|d| search.free_alone(**d, alt.exact)).count();
            let enough = match alt.exact.amount {
                Amount::Count(n) => free as u64 >= n,
                Amount::All => !alt.matching.is_empty() && free == alt.matching.len(),
            };
            if enough {
                first_short = None;
                break;
            }
            first_short.get_or_insert_with(|| shortfall(&search, slot, alt, None));
        }
        if first_short.is_some() {
            alone = first_short;
            break;
        }
    }
    // The search itself only where it could succeed, or where the scheduler's
    // would stop at an error first (All meeting a constraint).
    let may_abort = pending.iter().any(|(_, c)| !c.constraints.is_empty())
        && slots.iter().flat_map(|s| &s.alternatives).any(|a| a.exact.amount == Amount::All);
    let placed = (alone.is_none() || may_abort) && search.place(slots, 0);
    if let Some(error) = search.aborted.take() {
        return Err(Refusal::Aborted(Abort { cause: AbortCause::AllBreaksConstraint, message: error }));
    }
    if let Some(short) = alone {
        return Err(Refusal::Short(Box::new(short)));
    }
    if placed {
        let given = search
            .holders
            .iter()
            .enumerate()
            .flat_map(|(device, held)| {
                held.iter().map(move |(claim, request, admin_access)| Given {
                    claim: *claim,
                    request: request.clone(),
                    device,
                    admin_access: *admin_access,
                })
            })
            .collect();
        return Ok(given);
    }
    let cause = if search.steps > SEARCH_LIMIT {
        Together::SearchLimit
    } else if let Some(c) = pending.iter().flat_map(|(_, c)| c.constraints.iter()).next() {
        Together::Constraint { attribute: c.attribute.clone(), distinct: c.distinct }
    } else if slots
        .iter()
        .flat_map(|s| &s.alternatives)
        .flat_map(|a| &a.matching)
        .any(|d| !devices[*d].device.consumes.is_empty())
    {
        Together::Counters
    } else {
        Together::Overlap
    };
    let first = slots.first().and_then(|s| Some((s, s.alternatives.first()?)));
    match first {
        Some((slot, alt)) => Err(Refusal::Short(Box::new(shortfall(&search, slot, alt, Some(cause))))),
        None => Ok(Vec::new()),
    }
}

/// What the scheduler's allocator checks before it searches, in its order:
/// a request for all devices needs every pool on the node ready (else it
/// cannot know what "all" is); then a claim's fewest devices (each request
/// at its smallest alternative, All at what it matches) must fit one
/// allocation.
fn before_search(
    ix: &DraIndex<'_>,
    devices: &[SliceDevice<'_>],
    pending: &[(String, &ResourceClaim)],
    slots: &[Slot<'_>],
) -> Option<Abort> {
    let all_asked = slots
        .iter()
        .flat_map(|s| s.alternatives.iter().map(move |a| (s, a)))
        .find(|(_, a)| a.exact.amount == Amount::All);
    if let Some((slot, alt)) = all_asked
        && let Some((pool, problem)) = devices.iter().find_map(|d| Some((d.pool_id(), ix.pool_problem(&d.pool_id())?)))
    {
        let claim = pending[slot.claim].1;
        let invalid = matches!(problem, PoolProblem::DuplicateDevice(_));
        let pool = format!("{}/{}", pool.0, pool.1);
        let state = if invalid { "currently invalid" } else { "currently being updated" };
        return Some(Abort {
            message: format!(
                "claim {}/{}, request {}: asks for all devices, but resource pool {pool} is {state}",
                claim.namespace, claim.name, alt.name
            ),
            cause: AbortCause::PoolNotReady { pool, invalid },
        });
    }
    for (index, (_, claim)) in pending.iter().enumerate() {
        let fewest: u64 = slots
            .iter()
            .filter(|s| s.claim == index)
            .map(|s| {
                s.alternatives
                    .iter()
                    .map(|a| match a.exact.amount {
                        Amount::Count(n) => n,
                        Amount::All => a.matching.len() as u64,
                    })
                    .min()
                    .unwrap_or(0)
            })
            .sum();
        if fewest > ALLOCATION_RESULTS_MAX {
            return Some(Abort {
                message: format!(
                    "claim {}/{}: number of requested devices {fewest} exceeds the claim limit of {ALLOCATION_RESULTS_MAX}",
                    claim.namespace, claim.name
                ),
                cause: AbortCause::ClaimLimit { devices: fewest },
            });
        }
    }
    None
}

/// The pending claims' requests, each alternative with the devices that
/// match its class and selectors (none of a pool the scheduler does not
/// allocate from: being updated, or invalid).
pub(super) fn slots<'p>(
    ix: &DraIndex<'_>,
    selectors: &mut Selectors,
    devices: &[SliceDevice<'_>],
    pending: &[(String, &'p ResourceClaim)],
    errors: &mut Vec<(String, SelectorError)>,
) -> Vec<Slot<'p>> {
    let mut slots = Vec::new();
    for (claim, (_, c)) in pending.iter().enumerate() {
        for request in c.requests.iter() {
            let alternatives = request
                .alternatives
                .iter()
                .map(|(name, exact)| {
                    let class = ix.class(exact.class.as_str());
                    let expressions: Vec<&str> = class
                        .into_iter()
                        .flat_map(|c| c.selectors.iter())
                        .chain(exact.selectors.iter())
                        .map(|s| &**s)
                        .collect();
                    let mut matching = Vec::new();
                    if class.is_some() {
                        for (i, d) in devices.iter().enumerate() {
                            if ix.pool_problem(&d.pool_id()).is_some() {
                                continue;
                            }
                            match selectors.all_match(expressions.iter().copied(), d.slice.driver.as_str(), d.device) {
                                Ok(true) => matching.push(i),
                                Ok(false) => {}
                                Err(e) => {
                                    let text = expressions.join(" && ");
                                    if !errors.iter().any(|(t, _)| *t == text) {
                                        errors.push((text, e));
                                    }
                                }
                            }
                        }
                    }
                    Alternative { name: name.clone(), exact, matching }
                })
                .collect();
            slots.push(Slot { claim, request: request.name.clone(), alternatives });
        }
    }
    slots
}

/// Devices no claim holds. NVIDIA's driver without partitions publishes a
/// GPU whole beside its MIG devices: a GPU with a device of it allocated is
/// not free whole, and one allocated whole has no MIG device free (with
/// partitions, the counters say the same).
pub(super) fn usable(ix: &DraIndex<'_>, devices: &[SliceDevice<'_>]) -> Vec<bool> {
    usable_given(devices, |d| ix.allocated_to(&d.id()).is_some())
}

/// [`usable`] where `held` says which devices a claim holds.
pub(super) fn usable_given(devices: &[SliceDevice<'_>], held: impl Fn(&SliceDevice<'_>) -> bool) -> Vec<bool> {
    let mut busy_gpus: HashSet<&str> = HashSet::new();
    let mut whole_taken: HashSet<&str> = HashSet::new();
    for d in devices {
        if held(d)
            && let Some(gpu) = d.physical_gpu()
        {
            if d.is_whole_gpu() {
                whole_taken.insert(gpu);
            }
            busy_gpus.insert(gpu);
        }
    }
    devices
        .iter()
        .map(|d| {
            !held(d)
                && match d.physical_gpu() {
                    Some(gpu) if d.is_whole_gpu() => !busy_gpus.contains(&gpu),
                    Some(gpu) => !whole_taken.contains(&gpu),
                    None => true,
                }
        })
        .collect()
}

struct Search<'s, 'a> {
    ix: &'s DraIndex<'a>,
    devices: &'s [SliceDevice<'a>],
    claims: Vec<&'s ResourceClaim>,
    usable: Vec<bool>,
    /// Per device, the pending claims the search gave it to: the claim,
    /// the request (or `request/subrequest`), and whether by admin access.
    holders: Vec<Vec<(usize, Sym, bool)>>,
    /// What the search's devices draw from each pool's counters.
    consumed: HashMap<PoolId, HashMap<CounterKey, i128>>,
    /// Per claim, per constraint: what it holds of the devices so far.
    constraints: Vec<Vec<Kept>>,
    steps: u32,
    /// The scheduler's error that ends the attempt, in its words.
    aborted: Option<String>,
}

/// What became of a device offered to a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Added {
    Yes,
    /// In use, tainted, or beyond the counters.
    No,
    /// Free, but its attribute breaks one of the claim's constraints.
    BreaksConstraint,
}

impl Search<'_, '_> {
    /// Why `alt` of a claim falls short here, its devices counted alone.
    fn shortfall(&self, node: Sym, claim: &str, alt: &Alternative<'_>, together: Option<Together>) -> Shortfall {
        let free = alt.matching.iter().filter(|d| self.free_alone(**d, alt.exact)).count();
        let partition_held = alt
            .matching
            .iter()
            .filter(|d| {
                let device = &self.devices[**d];
                self.ix.allocated_to(&device.id()).is_none()
                    && taints_allow(alt.exact, device)
                    && !self.free_alone(**d, alt.exact)
            })
            .count();
        let tainted = alt
            .matching
            .iter()
            .filter(|d| {
                let device = &self.devices[**d];
                self.ix.allocated_to(&device.id()).is_none() && !taints_allow(alt.exact, device)
            })
            .count();
        Shortfall {
            node,
            request: format!("{claim}/{}", alt.name),
            class: alt.exact.class.clone(),
            wanted: match alt.exact.amount {
                Amount::Count(n) => Some(n),
                Amount::All => None,
            },
            matching: alt.matching.len() as u64,
            free: free as u64,
            partition_held: partition_held as u64,
            tainted: tainted as u64,
            selectors: alt.exact.selectors.clone(),
            together,
            fits_otherwise: false,
        }
    }

    /// Free for this request with nothing else allocated by the search.
    fn free_alone(&self, d: usize, exact: &ExactRequest) -> bool {
        let device = &self.devices[d];
        (exact.admin_access || self.usable[d]) && taints_allow(exact, device) && self.counters_fit(d, &HashMap::new())
    }

    /// The pool's counters after this device too: none below zero.
    fn counters_fit(&self, d: usize, consumed: &HashMap<CounterKey, i128>) -> bool {
        self.ix.fits_counters(&self.devices[d], consumed)
    }

    /// Gives device `d` to the slot's claim if it can have it; says whether it did.
    fn add(&mut self, slot: &Slot<'_>, alt: &Alternative<'_>, d: usize) -> Added {
        let device = self.devices[d];
        let free = if alt.exact.admin_access {
            !self.holders[d].iter().any(|(c, _, _)| *c == slot.claim)
        } else {
            self.usable[d] && self.holders[d].is_empty()
        };
        let pool = device.pool_id();
        let no_counters = HashMap::new();
        let consumed = self.consumed.get(&pool).unwrap_or(&no_counters);
        if !free || !taints_allow(alt.exact, &device) || !self.counters_fit(d, consumed) {
            return Added::No;
        }
        let claim = self.claims[slot.claim];
        let mut added = 0;
        for (k, c) in claim.constraints.iter().enumerate() {
            if !applies(c, &slot.request, &alt.name) {
                continue;
            }
            let Some(value) = device.device.attribute(c.attribute.as_str()) else { break };
            if !self.constraints[slot.claim][k].add(&slot.request, value) {
                break;
            }
            added += 1;
        }
        if added < claim.constraints.iter().filter(|c| applies(c, &slot.request, &alt.name)).count() {
            self.undo_constraints(slot, alt, added);
            return Added::BreaksConstraint;
        }
        let counters = self.consumed.entry(pool).or_default();
        for (key, amount) in device.consumption() {
            *counters.entry(key).or_default() += amount;
        }
        self.holders[d].push((slot.claim, alt.name.clone(), alt.exact.admin_access));
        Added::Yes
    }

    /// Takes device `d` back from the slot's claim (the last one given).
    fn remove(&mut self, slot: &Slot<'_>, alt: &Alternative<'_>, d: usize) {
        let device = self.devices[d];
        self.holders[d].pop();
        if let Some(counters) = self.consumed.get_mut(&device.pool_id()) {
            for (key, amount) in device.consumption() {
                *counters.entry(key).or_default() -= amount;
            }
        }
        let applying =
            self.claims[slot.claim].constraints.iter().filter(|c| applies(c, &slot.request, &alt.name)).count();
        self.undo_constraints(slot, alt, applying);
    }

    /// Drops the last value of the first `n` constraints that apply to the slot.
    fn undo_constraints(&mut self, slot: &Slot<'_>, alt: &Alternative<'_>, n: usize) {
        let claim = self.claims[slot.claim];
        let applying = claim.constraints.iter().enumerate().filter(|(_, c)| applies(c, &slot.request, &alt.name));
        for (k, _) in applying.take(n) {
            self.constraints[slot.claim][k].remove(&slot.request);
        }
    }

    /// Whether slots `i..` can all be allocated after what is given so far.
    fn place(&mut self, slots: &[Slot<'_>], i: usize) -> bool {
        let Some(slot) = slots.get(i) else { return true };
        for alt in &slot.alternatives {
            let placed = match alt.exact.amount {
                Amount::Count(n) => self.choose(slots, i, alt, n as usize, 0),
                Amount::All => self.take_all(slots, i, alt),
            };
            if placed {
                return true;
            }
            if self.steps > SEARCH_LIMIT || self.aborted.is_some() {
                return false;
            }
        }
        false
    }

    /// `k` more of the alternative's devices from position `start` on, then the next slots.
    fn choose(&mut self, slots: &[Slot<'_>], i: usize, alt: &Alternative<'_>, k: usize, start: usize) -> bool {
        if k == 0 {
            return self.place(slots, i + 1);
        }
        for pos in start..alt.matching.len() {
            if alt.matching.len() - pos < k {
                break;
            }
            self.steps += 1;
            if self.steps > SEARCH_LIMIT {
                return false;
            }
            let d = alt.matching[pos];
            if self.add(&slots[i], alt, d) == Added::Yes {
                if self.choose(slots, i, alt, k - 1, pos + 1) {
                    return true;
                }
                self.remove(&slots[i], alt, d);
                if self.aborted.is_some() {
                    return false;
                }
            }
        }
        false
    }

    /// Every matching device (allocationMode All), then the next slots. A
    /// device that would break a constraint is an error to the scheduler's
    /// allocator, not a way that fails: it aborts the whole attempt.
    fn take_all(&mut self, slots: &[Slot<'_>], i: usize, alt: &Alternative<'_>) -> bool {
        if alt.matching.is_empty() {
            return false;
        }
        let mut given = Vec::new();
        for &d in &alt.matching {
            self.steps += 1;
            match self.add(&slots[i], alt, d) {
                Added::Yes => given.push(d),
                Added::No => break,
                Added::BreaksConstraint => {
                    let claim = self.claims[slots[i].claim];
                    let (driver, pool, device) = self.devices[d].id();
                    let request = alt.name.as_str().rsplit('/').next().unwrap_or(alt.name.as_str());
                    self.aborted = Some(format!(
                        "claim {}/{}, request {request}: cannot add device {driver}/{pool}/{device} because a claim constraint would not be satisfied",
                        claim.namespace, claim.name
                    ));
                    break;
                }
            }
        }
        let placed = given.len() == alt.matching.len() && self.place(slots, i + 1);
        if !placed {
            for d in given.into_iter().rev() {
                self.remove(&slots[i], alt, d);
            }
        }
        placed
    }
}

/// What a claim's constraint holds of the devices given so far, kept as the
/// scheduler's allocator keeps it (1.36, `incubating`): matchAttribute the
/// values in order (the first is the one all must have); distinctAttribute
/// one value per request, the last device's (a request's own devices are not
/// compared with each other), and a removal forgets the request's value.
#[derive(Clone, Debug)]
enum Kept {
    Match(Vec<AttributeValue>),
    Distinct { by_request: Vec<(Sym, AttributeValue)>, devices: usize },
}

impl Kept {
    fn new(c: &DeviceConstraint) -> Kept {
        if c.distinct { Kept::Distinct { by_request: Vec::new(), devices: 0 } } else { Kept::Match(Vec::new()) }
    }

    fn add(&mut self, request: &Sym, value: &AttributeValue) -> bool {
        match self {
            Kept::Match(values) => {
                if values.first().is_some_and(|first| first != value) {
                    return false;
                }
                values.push(value.clone());
            }
            Kept::Distinct { by_request, devices } => {
                if *devices > 0 && by_request.iter().any(|(_, v)| v == value) {
                    return false;
                }
                by_request.retain(|(r, _)| r != request);
                by_request.push((request.clone(), value.clone()));
                *devices += 1;
            }
        }
        true
    }

    fn remove(&mut self, request: &Sym) {
        match self {
            Kept::Match(values) => {
                values.pop();
            }
            Kept::Distinct { by_request, devices } => {
                by_request.retain(|(r, _)| r != request);
                *devices = devices.saturating_sub(1);
            }
        }
    }
}

/// Whether the device's taints let the request have it.
pub(super) fn taints_allow(exact: &ExactRequest, device: &SliceDevice<'_>) -> bool {
    exact.tolerates_taints || !device.tainted()
}

/// Whether a constraint covers a request (all of the claim's when it names none).
fn applies(c: &DeviceConstraint, request: &Sym, alternative: &Sym) -> bool {
    c.requests.is_empty() || c.requests.iter().any(|r| r == request || r == alternative)
}
