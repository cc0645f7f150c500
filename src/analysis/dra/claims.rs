//! Can a pending pod's claims be allocated, and where? Per node, as the
//! scheduler's DynamicResources plugin decides: each request's device class
//! and selectors (CEL) against the devices the node publishes that no claim
//! holds and no taint keeps off, `count` devices each (or all of them),
//! alternatives (`firstAvailable`) in order, within the claims' constraints
//! and the pools' shared counters (`allocate.rs`).

use crate::analysis::fit::{self, NodeReason, Shape};
use crate::analysis::index::Index;
use crate::model::dra::{DeviceClass, DeviceRequest, DraFeature, ExactRequest, ResourceClaim};
use crate::model::{Node, Pod, Resources, Sym};

pub use super::PoolProblem;
use super::allocate::allocate_on;
pub use super::allocate::{ALLOCATION_RESULTS_MAX, Abort, AbortCause, Refusal, Shortfall, Together};
use super::cel::{SelectorError, Selectors};
use super::{PodClaimState, SliceDevice};

/// How many pods a claim's `status.reservedFor` may name
/// (`ResourceClaimReservedForMaxSize`): a shared claim serves at most these.
pub const RESERVED_FOR_MAX: usize = 256;

/// Why a pod's claims cannot be allocated anywhere yet, before any node.
#[derive(Clone, Debug, PartialEq)]
pub enum Unresolved {
    /// `resourceClaimName` names no claim in the namespace.
    MissingClaim { claim: String },
    /// `resourceClaimTemplateName` names no template in the namespace.
    MissingTemplate { template: String },
    /// The template exists; the claim controller has not made the claim.
    NotYetCreated { template: String },
    /// The claim is being deleted.
    Deleting { claim: String },
}

/// What a pending pod's claims need and where they can be had.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClaimsVerdict {
    /// Claims the pod uses (resolved or not).
    pub claims: Vec<String>,
    pub unresolved: Vec<Unresolved>,
    /// Why kgpu skipped an object `unresolved` names, where it did (it
    /// exists, but kgpu could not read it): the skip's reason.
    pub unreadable: Vec<String>,
    /// Every claim is allocated already: the node the allocation limits it to.
    pub allocated_on: Option<Sym>,
    /// Nodes that can allocate every claim and take the pod otherwise.
    pub nodes_fit: Vec<Sym>,
    /// Nodes with the devices where the pod does not fit for other reasons.
    pub devices_only: Vec<(Sym, Vec<NodeReason>)>,
    /// Nodes publishing devices that cannot allocate the claims, each with
    /// its first short request.
    pub shortfalls: Vec<Shortfall>,
    /// Each pending request's own selectors (`claim/request`, with the
    /// alternative where it has several): what the devices must satisfy.
    pub request_selectors: Vec<(String, Box<[Box<str>]>)>,
    /// A request names a DeviceClass that does not exist.
    pub missing_classes: Vec<Sym>,
    /// Selectors that do not compile or fail on a device: the scheduler
    /// fails the attempt on them.
    pub selector_errors: Vec<(String, SelectorError)>,
    /// Shared claims already reserved for as many pods as a claim can serve
    /// ([`RESERVED_FOR_MAX`]), none of them this one: it waits for one to go.
    pub claims_full: Vec<String>,
    /// The scheduler's allocator stops with an error on some node the pod
    /// fits otherwise (All meeting a device that breaks a constraint, a
    /// claim over the allocation limit, All on a pool not ready): every
    /// attempt fails, whatever other nodes offer.
    pub aborted: Vec<Abort>,
    /// Nodes publishing devices from a pool the scheduler allocates nothing
    /// from now, with the pool (`driver/pool`) and why.
    pub pools_not_ready: Vec<(Sym, String, PoolProblem)>,
    /// On nodes short of devices: claims still allocated though every pod
    /// they are reserved for has finished or is gone (the resource-claim
    /// controller has not released them), with the devices they hold.
    pub stale_holds: Vec<(Sym, String, u64)>,
    /// Extended resources it asks that DeviceClasses serve: (resource, class).
    pub extended: Vec<(Sym, Sym)>,
    /// Some node advertises one of them (its device plugin serves it there).
    pub extended_advertised: bool,
    /// Where no node has a device its requests match: what the nodes
    /// publish instead, (product or driver, devices, nodes), most first.
    pub published: Vec<(String, u64, u64)>,
    /// GPUs the claims ask for.
    pub gpus: u64,
    /// What its pending claims, or devices their requests match, use that
    /// kgpu's allocator does not model (where: a claim, a node's or a
    /// slice's device): its verdict on them may be wrong.
    pub unmodelled: Vec<(DraFeature, String)>,
}

impl ClaimsVerdict {
    pub fn blocks(&self) -> bool {
        !self.unresolved.is_empty()
            || (self.allocated_on.is_none() && self.nodes_fit.is_empty())
            || !self.selector_errors.is_empty()
            || !self.aborted.is_empty()
            || !self.claims_full.is_empty()
    }
}

/// Extended resources a pod asks (`nvidia.com/gpu`, ...) that DeviceClasses
/// serve (KEP-5004, `extendedResourceName`): on a node that does not
/// advertise one, the scheduler's NodeResourcesFit leaves it to the
/// DynamicResources plugin, which allocates a claim of the class for the
/// amount asked and makes that claim as it binds the pod.
#[derive(Clone, Debug, Default)]
pub struct ThroughDra<'a> {
    /// (resource, the class that serves it, the amount asked).
    pub served: Vec<(Sym, &'a DeviceClass, u64)>,
}

impl<'a> ThroughDra<'a> {
    pub fn of(ix: &super::DraIndex<'a>, requests: &Resources) -> ThroughDra<'a> {
        let served = ix
            .extended_resources()
            .filter_map(|(resource, class)| {
                let amount = requests.get(resource.as_str());
                (amount > 0).then(|| (resource.clone(), class, amount))
            })
            .collect();
        ThroughDra { served }
    }

    pub fn is_empty(&self) -> bool {
        self.served.is_empty()
    }

    /// The served resources this node does not advertise: those its
    /// devices must give.
    pub(super) fn here<'s>(&'s self, node: &'s Node) -> impl Iterator<Item = &'s (Sym, &'a DeviceClass, u64)> + 's {
        self.served.iter().filter(|(resource, ..)| node.allocatable.get(resource.as_str()) == 0)
    }

    /// Whether this node's device plugin serves one of them.
    pub fn advertised_on(&self, node: &Node) -> bool {
        self.served.iter().any(|(resource, ..)| node.allocatable.get(resource.as_str()) > 0)
    }

    /// Whether some of the requests go through DRA on this node.
    pub fn applies_on(&self, node: &Node) -> bool {
        self.here(node).next().is_some()
    }

    /// The requests NodeResourcesFit checks on this node: without those
    /// DRA serves here. None where it checks them all.
    pub fn requests_on(&self, requests: &Resources, node: &Node) -> Option<Resources> {
        let names: Vec<&str> = self.here(node).map(|(r, ..)| r.as_str()).collect();
        (!names.is_empty()).then(|| requests.split_off(&names).1)
    }

    /// The claim the scheduler would allocate for the pod on this node:
    /// one request per resource served here, named after the resource.
    pub fn claim_on(&self, namespace: &Sym, node: &Node) -> Option<ResourceClaim> {
        self.claim_of(namespace, self.here(node))
    }

    /// The claim where no node advertises what it serves.
    pub fn claim(&self, namespace: &Sym) -> Option<ResourceClaim> {
        self.claim_of(namespace, self.served.iter())
    }

    fn claim_of<'s>(
        &'s self,
        namespace: &Sym,
        served: impl Iterator<Item = &'s (Sym, &'a DeviceClass, u64)>,
    ) -> Option<ResourceClaim>
    where
        'a: 's,
    {
        let requests: Box<[DeviceRequest]> = served
            .map(|(resource, class, amount)| DeviceRequest {
                name: resource.clone(),
                alternatives: Box::new([(resource.clone(), ExactRequest::count(&class.name, *amount, Box::new([])))]),
            })
            .collect();
        (!requests.is_empty()).then(|| ResourceClaim::asking(namespace.clone(), EXTENDED_CLAIM, true, requests))
    }
}

/// How the claim for a pod's extended resources is named in kgpu's words
/// (the scheduler names it `<pod>-extended-resources-<suffix>` when it makes it).
pub const EXTENDED_CLAIM: &str = "extended resources";

/// The verdict for `pod`'s claims, the claim the scheduler would make for
/// its extended resources served through DRA included; None when it has none.
pub fn verdict(index: &Index<'_>, selectors: &mut Selectors, pod: &Pod) -> Option<ClaimsVerdict> {
    let ix = index.dra();
    let through_dra = ThroughDra::of(ix, &pod.requests);
    if pod.claims.is_empty() && through_dra.is_empty() {
        return None;
    }
    let mut v = ClaimsVerdict {
        extended_advertised: !through_dra.is_empty() && index.nodes().any(|n| through_dra.advertised_on(n)),
        ..ClaimsVerdict::default()
    };
    for (resource, class, amount) in &through_dra.served {
        v.extended.push((resource.clone(), Sym::new(&class.name)));
        v.claims.push(format!(
            "{amount} {resource} through DeviceClass {} where a node does not advertise it (the scheduler makes the claim as it binds the pod)",
            class.name
        ));
    }
    let mut pending: Vec<(String, &ResourceClaim)> = Vec::new();
    let mut allocated: Vec<&ResourceClaim> = Vec::new();
    for state in ix.pod_claims(pod) {
        match state {
            PodClaimState::Found(_, claim) => {
                v.claims.push(claim.name.to_string());
                v.gpus += ix.gpus_asked(selectors, claim);
                let reserved_here = claim.reserved_for.iter().any(|p| **p == *pod.name);
                if claim.deleting {
                    v.unresolved.push(Unresolved::Deleting { claim: claim.name.to_string() });
                } else if claim.is_allocated() && claim.reserved_for.len() >= RESERVED_FOR_MAX && !reserved_here {
                    // The scheduler's PreBind fails to add it (1.36; its
                    // PreFilter said `resourceclaim in use` before).
                    v.claims_full.push(claim.name.to_string());
                } else if claim.is_allocated() {
                    allocated.push(claim);
                } else {
                    pending.push((claim.name.to_string(), claim));
                }
            }
            PodClaimState::Missing(_, name) => {
                v.claims.push(name.to_string());
                v.unresolved.push(Unresolved::MissingClaim { claim: name.to_string() });
            }
            PodClaimState::NotYetCreated(entry, template) => {
                v.claims.push(format!("{entry} (from template {})", template.name));
                v.gpus += ix.gpus_asked(selectors, template);
                v.unresolved.push(Unresolved::NotYetCreated { template: template.name.to_string() });
            }
            PodClaimState::NoTemplate(_, template) => {
                v.claims.push(format!("from template {template}"));
                v.unresolved.push(Unresolved::MissingTemplate { template: template.to_string() });
            }
        }
    }
    if !v.unresolved.is_empty() {
        v.unreadable = unreadable(index, &pod.namespace, &v.unresolved);
        return Some(v);
    }
    // What the devices its extended resources may take use counts too.
    let extended = through_dra.claim(&pod.namespace);
    let mut weighed = pending.clone();
    weighed.extend(extended.as_ref().map(|c| (c.name.to_string(), c)));
    v.unmodelled = unmodelled(ix, selectors, &weighed);
    for c in pending.iter().flat_map(|(_, c)| c.requests.iter()).flat_map(|r| r.alternatives.iter()) {
        if ix.class(c.1.class.as_str()).is_none() && !v.missing_classes.contains(&c.1.class) {
            v.missing_classes.push(c.1.class.clone());
        }
    }
    for (name, claim) in &pending {
        for r in claim.requests.iter() {
            for (alternative, e) in r.alternatives.iter().filter(|(_, e)| !e.selectors.is_empty()) {
                let label = if r.alternatives.len() > 1 {
                    format!("{name}/{}/{alternative}", r.name)
                } else {
                    format!("{name}/{}", r.name)
                };
                v.request_selectors.push((label, e.selectors.clone()));
            }
        }
    }
    // An allocated claim limits the pod to its node.
    let pinned = allocated.iter().find_map(|c| c.allocated_node.clone());
    if pending.is_empty() && through_dra.is_empty() {
        v.allocated_on = pinned.clone();
        if pinned.is_none() {
            // Allocated without a node (network-attached devices): any node.
            v.nodes_fit = index
                .nodes()
                .filter(|n| fits_otherwise(index, pod, n, &through_dra).is_empty())
                .map(|n| n.name.clone())
                .collect();
        }
        return Some(v);
    }
    if pending.is_empty() {
        // Only its extended resources may need devices: a node that
        // advertises them serves them through its device plugin.
        v.nodes_fit = index
            .nodes()
            .filter(|n| pinned.as_ref().is_none_or(|p| *p == n.name))
            .filter(|n| !through_dra.applies_on(n) && fits_otherwise(index, pod, n, &through_dra).is_empty())
            .map(|n| n.name.clone())
            .collect();
    }
    let mut nodes: Vec<(Sym, &[SliceDevice<'_>])> = ix.nodes().collect();
    nodes.sort_by_key(|(n, _)| n.clone());
    for (node_name, devices) in nodes {
        if pinned.clone().is_some_and(|p| p != node_name) {
            continue;
        }
        // Devices of a node the cluster no longer has count nowhere.
        let Some(node) = index.nodes().find(|n| n.name == node_name) else { continue };
        let extended = through_dra.claim_on(&pod.namespace, node);
        if extended.is_none() && pending.is_empty() {
            // Served by its device plugin: counted above.
            continue;
        }
        let reasons = fits_otherwise(index, pod, node, &through_dra);
        for d in devices {
            let pool = d.pool_id();
            if let Some(problem) = ix.pool_problem(&pool) {
                let name = format!("{}/{}", pool.0, pool.1);
                if !v.pools_not_ready.iter().any(|(n, p, _)| *n == node_name && *p == name) {
                    v.pools_not_ready.push((node_name.clone(), name, problem.clone()));
                }
            }
        }
        let mut asked = pending.clone();
        asked.extend(extended.as_ref().map(|c| (c.name.to_string(), c)));
        match allocate_on(ix, selectors, node_name.clone(), devices, &asked, &mut v.selector_errors) {
            // The DynamicResources filter runs only where the others passed.
            Err(Refusal::Aborted(error)) if reasons.is_empty() => {
                if !v.aborted.contains(&error) {
                    v.aborted.push(error);
                }
            }
            Err(Refusal::Aborted(_)) => {}
            Err(Refusal::Short(short)) => v.shortfalls.push(Shortfall { fits_otherwise: reasons.is_empty(), ..*short }),
            Ok(_) if reasons.is_empty() => v.nodes_fit.push(node_name),
            Ok(_) => v.devices_only.push((node_name, reasons)),
        }
    }
    if v.nodes_fit.is_empty() {
        v.stale_holds = stale_holds(index, &v.shortfalls);
    }
    if !v.shortfalls.is_empty() && v.shortfalls.iter().all(|s| s.matching == 0) && v.nodes_fit.is_empty() {
        v.published = published(ix);
    }
    Some(v)
}

/// The reasons kgpu skipped the objects `unresolved` names, where the last
/// skip of their feed names one of them (a dump's malformed object, or one
/// kgpu cannot read).
fn unreadable(index: &Index<'_>, namespace: &Sym, unresolved: &[Unresolved]) -> Vec<String> {
    use crate::model::Feed;
    unresolved
        .iter()
        .filter_map(|u| {
            let (feed, name) = match u {
                Unresolved::MissingClaim { claim } => (Feed::ResourceClaims, claim),
                Unresolved::MissingTemplate { template } => (Feed::ResourceClaimTemplates, template),
                _ => return None,
            };
            let (_, reason) = index.snap.skipped.get(&feed)?;
            reason.contains(&format!("{namespace}/{name}:")).then(|| reason.clone())
        })
        .collect()
}

/// Claims allocated on the short nodes whose pods have all finished or gone:
/// their devices stay held until the resource-claim controller releases them.
fn stale_holds(index: &Index<'_>, shortfalls: &[Shortfall]) -> Vec<(Sym, String, u64)> {
    let done = |claim: &ResourceClaim, pod: &str| {
        index
            .snap
            .pods
            .get(&crate::model::PodKey::new(claim.namespace.as_str(), pod))
            .is_none_or(|p| p.phase.is_terminal())
    };
    let mut out = Vec::new();
    for s in shortfalls {
        for claim in index.dra().claims_on(&s.node) {
            if claim.reserved_for.is_empty() || !claim.reserved_for.iter().all(|p| done(claim, p)) {
                continue;
            }
            let name = format!("{}/{}", claim.namespace, claim.name);
            if !out.iter().any(|(n, c, _)| *n == s.node && *c == name) {
                let held = claim.allocated.iter().filter(|a| !a.admin_access).count() as u64;
                out.push((s.node.clone(), name, held));
            }
        }
    }
    out
}

/// What the nodes publish, by NVIDIA product (or driver and device type
/// where there is none): the comparison an SRE makes with a selector that
/// matches nothing.
fn published(ix: &super::DraIndex<'_>) -> Vec<(String, u64, u64)> {
    let mut by: std::collections::BTreeMap<String, (u64, std::collections::BTreeSet<Sym>)> = Default::default();
    for (node, devices) in ix.nodes() {
        for d in devices {
            let what = match (d.nvidia_attribute("productName"), d.nvidia_attribute("type")) {
                (Some(product), Some("mig")) => format!("{product} MIG devices"),
                (Some(product), _) => product.to_string(),
                (None, _) => format!("{} devices", d.slice.driver),
            };
            let entry = by.entry(what).or_default();
            entry.0 += 1;
            entry.1.insert(node.clone());
        }
    }
    let mut out: Vec<(String, u64, u64)> =
        by.into_iter().map(|(what, (n, nodes))| (what, n, nodes.len() as u64)).collect();
    out.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    out
}

/// What the pending claims use, or the devices their requests match, that
/// kgpu does not model: each feature once, with where it first met it.
fn unmodelled(
    ix: &super::DraIndex<'_>,
    selectors: &mut Selectors,
    pending: &[(String, &ResourceClaim)],
) -> Vec<(DraFeature, String)> {
    let mut out: Vec<(DraFeature, String)> = Vec::new();
    let mut add = |f: DraFeature, at: String| {
        if !out.iter().any(|(g, _)| *g == f) {
            out.push((f, at));
        }
    };
    for (name, claim) in pending {
        for f in claim.unmodelled.iter() {
            add(*f, format!("claim {name}"));
        }
    }
    for (d, f) in ix.unmodelled_devices() {
        let matched =
            pending.iter().flat_map(|(_, c)| c.requests.iter()).flat_map(|r| r.alternatives.iter()).any(|(_, e)| {
                let Some(class) = ix.class(e.class.as_str()) else { return false };
                let expressions = class.selectors.iter().chain(e.selectors.iter()).map(|s| &**s);
                selectors.all_match(expressions, d.slice.driver.as_str(), d.device).unwrap_or(false)
            });
        if matched {
            add(*f, format!("device {} on {}", d.device.name, d.place()));
        }
    }
    out
}

/// Why the node cannot take the pod, devices aside (those DRA serves
/// for its extended resources on this node too).
fn fits_otherwise(index: &Index<'_>, pod: &Pod, node: &Node, through_dra: &ThroughDra<'_>) -> Vec<NodeReason> {
    let rest = through_dra.requests_on(&pod.requests, node);
    let shape = Shape { requests: rest.as_ref().unwrap_or(&pod.requests), ..Shape::of(pod) };
    fit::verdicts(&shape, node, index.used(&node.name), index.pods_on(&node.name))
}
