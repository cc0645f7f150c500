//! The DRA step: a pod's ResourceClaims exist, are allocated or can be
//! allocated on some node, as the scheduler's DynamicResources plugin
//! decides (`analysis::dra::claims`).

use std::sync::Arc;

use crate::analysis::dra::cel::SelectorError;
use crate::analysis::dra::claims::{
    ALLOCATION_RESULTS_MAX, AbortCause, ClaimsVerdict, PoolProblem, Shortfall, Together, Unresolved,
};
use crate::model::Pod;

use super::Step;
use super::{StepReport, Verdict, ns_flag};

/// How many nodes a detail line lists by name.
const NODES_NAMED: usize = 5;

/// Up to five names, then how many more.
pub(super) fn names(nodes: impl Iterator<Item = String>) -> String {
    let all: Vec<String> = nodes.collect();
    let more = all.len().saturating_sub(NODES_NAMED);
    let mut text = all.into_iter().take(NODES_NAMED).collect::<Vec<_>>().join(", ");
    if more > 0 {
        text.push_str(&format!(" and {more} more"));
    }
    text
}

/// The claims step; `said`: the scheduler's last word on the pod, which
/// heads it where the claims use what kgpu does not model.
pub(super) fn report(pod: &Pod, v: &ClaimsVerdict, said: Option<&str>) -> StepReport {
    let ns = ns_flag(&pod.namespace);
    // Whether the verdict rests on kgpu's allocator (not a missing object or a selector error).
    let mut allocation = false;
    let mut details = vec![format!("claims: {}", v.claims.join(", "))];
    let mut commands = vec![format!("kubectl get resourceclaims {ns} -o wide")];
    let (verdict, summary) = if let Some(reason) = v.unreadable.first() {
        details.push(format!("kgpu skipped it: {reason}"));
        details.push("unblock: fix the object (the API server would refuse it as it is), or tell kgpu's maintainers if the server kept it".into());
        let what = match v.unresolved.first() {
            Some(Unresolved::MissingClaim { claim }) => format!("ResourceClaim {claim}"),
            Some(Unresolved::MissingTemplate { template }) => format!("ResourceClaimTemplate {template}"),
            _ => "a claim".into(),
        };
        (Verdict::Block, format!("{what} exists but kgpu could not read it"))
    } else if let Some(u) = v.unresolved.first() {
        // The scheduler does not try such a pod at all: no FailedScheduling
        // event, no PodScheduled condition.
        details.push("the scheduler does not try the pod until then: it writes no event and no condition".into());
        let summary = match u {
            Unresolved::MissingClaim { claim } => {
                details.push(format!("unblock: create ResourceClaim {claim} in {}", pod.namespace));
                format!("ResourceClaim {claim} does not exist")
            }
            Unresolved::MissingTemplate { template } => {
                details.push(format!("unblock: create ResourceClaimTemplate {template} in {}", pod.namespace));
                commands.push(format!("kubectl get resourceclaimtemplates {ns}"));
                format!("ResourceClaimTemplate {template} does not exist")
            }
            Unresolved::NotYetCreated { template } => {
                details.push(
                    "unblock: check kube-controller-manager's resource-claim controller (it makes the claim)".into(),
                );
                format!("its claim from template {template} is not created yet")
            }
            Unresolved::Deleting { claim } => format!("ResourceClaim {claim} is being deleted"),
        };
        (Verdict::Block, summary)
    } else if let Some((expression, e)) = v.selector_errors.first() {
        let (kind, text) = match e {
            SelectorError::Invalid(t) => ("does not compile", t),
            SelectorError::Runtime(t) => ("fails on a device", t),
        };
        details.push(format!("selector: {expression}"));
        details.push(format!("CEL: {text}"));
        details.push(
            "unblock: fix the selector (guard optional attributes with has(...)); the scheduler fails every attempt on it"
                .into(),
        );
        (Verdict::Block, format!("a device selector {kind}: the scheduler aborts each attempt"))
    } else if let Some(claim) = v.claims_full.first() {
        details.push(format!(
            "ResourceClaim {claim} is reserved for {} pods, the most one claim can serve: the scheduler picks a node, then cannot add the pod to the claim (its PreBind fails on the API server's limit; before 1.36 its PreFilter said `resourceclaim in use`), and tries again until one of them goes",
            crate::analysis::dra::claims::RESERVED_FOR_MAX
        ));
        details.push("unblock: give some of its pods a claim of their own (a ResourceClaimTemplate)".into());
        commands.push(format!("kubectl get resourceclaim {claim} {ns} -o jsonpath='{{.status.reservedFor[*].name}}'"));
        (Verdict::Block, format!("ResourceClaim {claim} already serves the most pods a claim can (256)"))
    } else if let Some(abort) = v.aborted.first() {
        details.push(format!("scheduler: {}", abort.message));
        let (why, unblock, summary) = match &abort.cause {
            AbortCause::AllBreaksConstraint => (
                "a request for all matching devices met one that breaks the claim's constraint: the scheduler stops with an error there, it does not try another alternative or node".to_string(),
                "narrow the request's selectors so every device it matches keeps the constraint, or drop the constraint".to_string(),
                "a request for all devices breaks the claim's constraint: the scheduler aborts each attempt".to_string(),
            ),
            AbortCause::ClaimLimit { devices } => (
                format!(
                    "one claim's allocation holds at most {ALLOCATION_RESULTS_MAX} devices (AllocationResultsMaxSize); this one asks at least {devices}: no node can ever allocate it, however many devices are free"
                ),
                format!("split the request into claims of at most {ALLOCATION_RESULTS_MAX} devices each"),
                format!("a claim asks {devices} devices, more than one claim can hold ({ALLOCATION_RESULTS_MAX}): the scheduler aborts each attempt"),
            ),
            AbortCause::PoolNotReady { pool, invalid: false } => (
                format!("a request for all devices cannot be counted while pool {pool} is being updated (not all its ResourceSlices are published)"),
                "wait for the DRA driver to publish the pool's slices (kubectl get resourceslices -o wide); a driver that never does needs its kubelet plugin restarted".to_string(),
                format!("a request for all devices meets pool {pool}, which is being updated: the scheduler aborts each attempt"),
            ),
            AbortCause::PoolNotReady { pool, invalid: true } => (
                format!("a request for all devices cannot be counted while pool {pool} is invalid (two slices publish one device)"),
                "fix the DRA driver's slices of that pool (kubectl get resourceslices -o yaml)".to_string(),
                format!("a request for all devices meets pool {pool}, which is invalid: the scheduler aborts each attempt"),
            ),
        };
        details.push(why);
        details.push(format!("unblock: {unblock}"));
        (Verdict::Block, summary)
    } else if let Some(class) = v.missing_classes.first().filter(|_| v.nodes_fit.is_empty()) {
        commands.push("kubectl get deviceclasses".into());
        details.push(format!("unblock: create DeviceClass {class} (or name an existing one)"));
        (Verdict::Block, format!("device class {class} does not exist"))
    } else if let Some(node) = v.allocated_on.clone() {
        (Verdict::Pass, format!("allocated on {node}: the pod can only run there"))
    } else if !v.nodes_fit.is_empty() {
        allocation = true;
        let summary = format!(
            "{} node(s) can allocate its claims: {}",
            v.nodes_fit.len(),
            names(v.nodes_fit.iter().map(|n| n.to_string()))
        );
        (Verdict::Pass, summary)
    } else {
        allocation = true;
        // The nodes the pod could go to but for its claims come first: a
        // node its selector or taints keep it off explains nothing.
        let where_it_fits: Vec<&Shortfall> = v.shortfalls.iter().filter(|s| s.fits_otherwise).collect();
        let named: Vec<&Shortfall> =
            if where_it_fits.is_empty() { v.shortfalls.iter().collect() } else { where_it_fits.clone() };
        for s in named.iter().take(NODES_NAMED) {
            let wanted = s.wanted.map_or("all".to_string(), |n| n.to_string());
            details.push(match &s.together {
                None => format!(
                    "{}: request {} ({}) wants {wanted}; {} device(s) match, {} of them free{}",
                    s.node,
                    s.request,
                    s.class,
                    s.matching,
                    s.free,
                    match (s.partition_held, s.tainted) {
                        (0, 0) => String::new(),
                        (held, 0) => format!(" ({held} more not free: a partition of the same GPU is held)"),
                        (0, tainted) => format!(" ({tainted} more kept off by a device taint the request does not tolerate)"),
                        (held, tainted) => format!(
                            " ({held} more not free: a partition of the same GPU is held; {tainted} kept off by a device taint)"
                        ),
                    }
                ),
                Some(why) => format!("{}: devices match each request on their own, but {}", s.node, together(why)),
            });
        }
        if named.len() > NODES_NAMED {
            details.push(format!("… and {} more node(s) short", named.len() - NODES_NAMED));
        }
        if !where_it_fits.is_empty() && v.shortfalls.len() > where_it_fits.len() {
            details.push(format!(
                "{} more node(s) short of devices where the pod does not fit anyway",
                v.shortfalls.len() - where_it_fits.len()
            ));
        }
        for (node, pool, problem) in v.pools_not_ready.iter().take(NODES_NAMED) {
            details.push(match problem {
                PoolProblem::Incomplete { slices, expected } => format!(
                    "{node}: pool {pool} is being updated ({slices} of its {expected} ResourceSlices published): the scheduler allocates none of its devices until all are"
                ),
                PoolProblem::DuplicateDevice(device) => format!(
                    "{node}: pool {pool} is invalid (two of its slices publish device {device}): the scheduler allocates none of its devices and says `invalid resource pools were encountered`"
                ),
            });
        }
        for (node, claim, held) in v.stale_holds.iter().take(NODES_NAMED) {
            details.push(format!(
                "{node}: claim {claim} still holds {held} device(s), though every pod it is reserved for has finished or is gone"
            ));
        }
        if !v.stale_holds.is_empty() {
            details.push(
                "unblock: the resource-claim controller (kube-controller-manager) releases such claims; if they stay, check it, or delete the finished pods"
                    .into(),
            );
        }
        for (node, reasons) in v.devices_only.iter().take(NODES_NAMED) {
            let why: Vec<String> = reasons.iter().map(|r| r.code()).collect();
            details.push(format!("{node}: has the devices, but the pod does not fit there ({})", why.join(", ")));
        }
        // The node nearest to enough: its slices say what the others lack.
        if let Some(s) = named.iter().max_by_key(|s| (s.free, std::cmp::Reverse(s.node.clone()))) {
            commands.push(format!("kubectl get resourceslices --field-selector spec.nodeName={} -o yaml", s.node));
        }
        // Every pending request's selectors (requests short together are
        // all in it), and the class of each request short somewhere.
        for (request, selectors) in &v.request_selectors {
            details.extend(selectors.iter().map(|selector| format!("selector of {request}: {selector}")));
        }
        if !v.published.is_empty() {
            let what: Vec<String> = v
                .published
                .iter()
                .take(NODES_NAMED)
                .map(|(what, devices, nodes)| format!("{devices} {what} on {nodes} node(s)"))
                .collect();
            details.push(format!("the nodes publish: {}", what.join(", ")));
        }
        let mut classes_said: Vec<&str> = Vec::new();
        for s in &named {
            if !classes_said.contains(&s.class.as_str()) {
                classes_said.push(s.class.as_str());
                commands.push(format!("kubectl get deviceclass {} -o yaml", s.class));
            }
        }
        let summary = if !where_it_fits.is_empty() {
            short_summary(&where_it_fits, &v.pools_not_ready)
        } else if !v.devices_only.is_empty() {
            format!(
                "the devices are free on {} node(s) where the pod does not fit otherwise: {}",
                v.devices_only.len(),
                names(v.devices_only.iter().map(|(n, _)| n.to_string()))
            )
        } else if v.shortfalls.is_empty() {
            "no node publishes devices through DRA".to_string()
        } else {
            short_summary(&named, &v.pools_not_ready)
        };
        (Verdict::Block, summary)
    };
    // Where kgpu's allocator ends: it says so, and a refusal is headed by
    // the scheduler's word, or says that kgpu cannot tell.
    for (feature, at) in &v.unmodelled {
        details
            .push(format!("kgpu does not model {} ({at}): its reading of these claims may be wrong", feature.name()));
    }
    let mut said_by = None;
    let summary = match (v.unmodelled.first(), allocation, verdict) {
        (Some((feature, at)), true, Verdict::Block) => match said {
            Some(message) => {
                said_by = Some(super::VerdictSource::Scheduler);
                details.push(format!("kgpu's own reading: {summary}"));
                format!("the scheduler says: {} (kgpu does not model the {} in use)", message.trim(), feature.short())
            }
            None => {
                said_by = Some(super::VerdictSource::Undecided);
                format!(
                    "kgpu cannot tell: {} in use ({at}), which it does not model, and the scheduler has said nothing yet; its own reading: {summary}",
                    feature.short()
                )
            }
        },
        (Some((feature, _)), true, _) => {
            // A pass that rests on what kgpu does not model is nobody's word either.
            said_by = Some(super::VerdictSource::Undecided);
            format!("{summary} (as kgpu reads them; it does not model the {} in use)", feature.short())
        }
        // An object kgpu could not read: what it says of it is nobody's word.
        _ if !v.unreadable.is_empty() => {
            said_by = Some(super::VerdictSource::Undecided);
            summary
        }
        _ => summary,
    };
    StepReport { step: Step::Claims, verdict, summary: summary.into(), details: Arc::from(details), commands, said_by }
}

/// What the nodes short of devices have in common, as the headline says it:
/// the cause first (a narrow Pending row shows the start), then the
/// scheduler's words.
fn short_summary(shorts: &[&Shortfall], not_ready: &[(crate::model::Sym, String, PoolProblem)]) -> String {
    const SAID: &str = "cannot allocate all claims";
    let matching = shorts.iter().filter(|s| s.matching > 0).count();
    let pool_problem = |s: &Shortfall| not_ready.iter().find(|(n, ..)| *n == s.node).map(|(.., p)| p);
    if matching == 0 && shorts.iter().all(|s| pool_problem(s).is_some()) {
        let nodes = names(shorts.iter().map(|s| s.node.to_string()));
        let invalid = shorts.iter().any(|s| matches!(pool_problem(s), Some(PoolProblem::DuplicateDevice(_))));
        let state = if invalid { "invalid" } else { "being updated" };
        return format!("the DRA pool of {nodes} is {state}: the scheduler takes none of its devices — {SAID}");
    }
    match shorts.first().and_then(|s| s.together.as_ref()) {
        Some(why) if shorts.iter().all(|s| s.together.is_some()) => {
            let cause = match why {
                Together::Constraint { attribute, distinct: false } => {
                    format!("no free devices share one {attribute} (matchAttribute)")
                }
                Together::Constraint { attribute, distinct: true } => {
                    format!("no free devices differ in {attribute} (distinctAttribute)")
                }
                Together::Counters => "the GPU's shared counters run out (its partitions overlap)".into(),
                Together::Overlap => "the requests want the same devices".into(),
                Together::SearchLimit => "kgpu stopped searching after 100,000 tries".into(),
            };
            format!("{cause} on {} node(s) — {SAID}", shorts.len())
        }
        _ if matching == 0 => format!("no published device matches the class and selectors — {SAID}"),
        // Never here, however much is freed: no node has that many.
        _ if shorts.iter().all(|s| s.wanted.is_some_and(|w| s.matching < w)) => {
            let most = shorts.iter().map(|s| s.matching).max().unwrap_or(0);
            let wanted = shorts.iter().filter_map(|s| s.wanted).max().unwrap_or(0);
            format!("no node has {wanted} matching devices (at most {most}) — {SAID}")
        }
        _ if shorts.iter().all(|s| s.partition_held > 0) => {
            let nodes = names(shorts.iter().map(|s| s.node.to_string()));
            format!("a held partition of the same GPU keeps the devices on {nodes} — {SAID}")
        }
        _ => {
            let nodes = names(shorts.iter().map(|s| s.node.to_string()));
            format!("too few free devices on {nodes} — {SAID}")
        }
    }
}

/// Why requests that each have devices cannot have them together.
fn together(why: &Together) -> String {
    match why {
        Together::Constraint { attribute, distinct: false } => {
            format!("no set of free devices has one value of {attribute} (the claim's matchAttribute)")
        }
        Together::Constraint { attribute, distinct: true } => {
            format!("no set of free devices has a different {attribute} each (the claim's distinctAttribute)")
        }
        Together::Counters => "the partitions draw on the GPU's shared counters (memory slices, multiprocessors), \
             which run out before every request is met"
            .into(),
        Together::Overlap => "the requests want the same devices, and there are not enough for all".into(),
        Together::SearchLimit => "kgpu stopped searching after 100,000 tries without finding a way".into(),
    }
}

/// What the DynamicResources plugin writes when a pod's claims cannot be
/// allocated, its selectors fail, or a claim cannot take one more pod
/// (kube-scheduler v1.32–v1.36).
const DRA_REASONS: [&str; 9] = [
    "cannot allocate all claims",
    "resourceclaim in use",
    "running PreBind plugin \"DynamicResources\"",
    "resourceclaim not available on the node",
    "timed out trying to allocate devices",
    "is in the process of being allocated",
    "running \"DynamicResources\" filter plugin",
    "invalid resource pools were encountered",
    "does not exist",
];

/// The scheduler's message against the claims step: when both say the
/// claims are what blocks, they agree, whatever the rest of the fit says.
pub(super) fn cross_check(item: &mut super::PendingItem, v: &ClaimsVerdict) {
    let Some(message) = item.scheduler_message.as_deref() else { return };
    if v.blocks() && DRA_REASONS.iter().any(|r| message.contains(r)) {
        item.agrees_with_scheduler = Some(true);
        item.disagreement = None;
        // A plugin's error (`running "DynamicResources" filter plugin: …`)
        // is no histogram, but the claims step read it.
        item.scheduler_recognised = Some(true);
    }
}
