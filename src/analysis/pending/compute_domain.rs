//! Pods bound to a Ready node that wait for their ComputeDomain (NVIDIA's
//! multi-node NVLink domains, GB200 NVL72). The scheduler allocates a pod's
//! channel claim like any claim and binds the pod; then the node's
//! compute-domain kubelet plugin refuses to prepare the claim until that
//! node's IMEX daemon is Ready in the domain (`AssertComputeDomainReady` in
//! the driver's `cmd/compute-domain-kubelet-plugin`). The pod sits in
//! ContainerCreating, `kubectl get pods` says Pending, and the scheduler has
//! nothing more to say: the domain is where to look.

use std::sync::Arc;

use crate::model::{ClusterEvent, ComputeDomain, Feed, FeedState, Node, Pod, ResourceClaim, Sym};

use super::super::index::Index;

/// The label NVIDIA's plugin puts on a node that prepares a domain's
/// channel (value: the domain's uid); the domain's IMEX daemons are a
/// DaemonSet selecting it, and their pods carry it too. A node belongs to
/// one domain at a time.
pub const DOMAIN_LABEL: &str = "resource.nvidia.com/computeDomain";

/// The kubelet's event when a DRA driver fails to prepare a pod's claims.
const PREPARE_FAILED: &str = "FailedPrepareDynamicResources";

/// Why the plugin does not prepare the channel, as kgpu can tell.
pub(super) enum DomainTrouble<'a> {
    /// No ComputeDomain has the uid the claim names: deleted after the claim
    /// was made (the plugin: "ComputeDomain not found").
    Missing(Arc<str>),
    /// kgpu cannot read ComputeDomains; the kubelet's event says the plugin
    /// fails to prepare the claim.
    Unread(Arc<str>, String),
    /// The claim lives in another namespace than its domain: the plugin
    /// refuses it for good.
    OtherNamespace(&'a ComputeDomain),
    /// The node carries another domain's label.
    NodeTaken(&'a ComputeDomain, Sym, Option<&'a ComputeDomain>),
    /// The node's IMEX daemon is not Ready in the domain (`Some(false)`), or
    /// has not joined it (`None`); the daemon's pod there, if any.
    NotReady(&'a ComputeDomain, Option<bool>, Option<&'a Pod>),
}

pub(super) struct DomainWait<'a> {
    pub pod: &'a Pod,
    pub node: &'a Node,
    pub claim: &'a ResourceClaim,
    pub trouble: DomainTrouble<'a>,
    /// The kubelet's newest FailedPrepareDynamicResources event about the pod.
    pub said: Option<&'a ClusterEvent>,
}

/// Every Pending pod on a Ready node whose channel claim its ComputeDomain
/// keeps from being prepared, after the grace.
pub(super) fn waits<'a>(index: &Index<'a>) -> Vec<DomainWait<'a>> {
    let dra = index.dra();
    let snap = index.snap;
    let mut out = Vec::new();
    let domains_read = matches!(snap.feed(Feed::ComputeDomains).map(|f| &f.state), Some(FeedState::Live));
    for node in index.nodes().filter(|n| n.readiness == crate::model::Readiness::Ready) {
        for pod in index.pods_on(&node.name).iter().copied() {
            let Some((claim, uid)) = dra.waiting_channel(pod, index.now) else { continue };
            let said = prepare_failed(snap, pod);
            let trouble = match dra.domain(&uid) {
                None if domains_read => DomainTrouble::Missing(uid),
                None => match said {
                    Some(_) => {
                        let why = snap
                            .feed_problem(Feed::ComputeDomains)
                            .map_or_else(|| "not read yet".to_string(), |p| p.label().to_string());
                        DomainTrouble::Unread(uid, why)
                    }
                    None => continue,
                },
                Some(domain) if domain.namespace != claim.namespace => DomainTrouble::OtherNamespace(domain),
                Some(domain) => match node.labels.get(&Sym::new(DOMAIN_LABEL)) {
                    Some(other) if other.as_str() != &*domain.uid => {
                        DomainTrouble::NodeTaken(domain, other.clone(), dra.domain(other.as_str()))
                    }
                    _ => match domain.node_ready(node.name.as_str()) {
                        Some(true) => continue,
                        joined => DomainTrouble::NotReady(domain, joined, daemon_on(index, node, domain)),
                    },
                },
            };
            out.push(DomainWait { pod, node, claim, trouble, said });
        }
    }
    out
}

/// The domain's IMEX daemon pod on `node` (its DaemonSet's pods carry the
/// domain's label).
fn daemon_on<'a>(index: &Index<'a>, node: &Node, domain: &ComputeDomain) -> Option<&'a Pod> {
    index.pods_on(&node.name).iter().copied().find(|p| {
        crate::model::node::label_value(&p.labels, DOMAIN_LABEL).is_some_and(|v| v.as_str() == &*domain.uid)
            && !p.terminating
    })
}

fn prepare_failed<'a>(snap: &'a crate::model::Snapshot, pod: &Pod) -> Option<&'a ClusterEvent> {
    snap.events
        .values()
        .filter(|e| {
            e.reason.as_str() == PREPARE_FAILED
                && e.object_kind.as_str() == "Pod"
                && e.namespace == pod.namespace
                && *e.object_name == *pod.name
        })
        .max_by_key(|e| e.last)
        .map(|e| &**e)
}

/// The wait in words: (summary, details, unblock, commands).
pub(super) fn words(w: &DomainWait<'_>) -> (String, Vec<String>, Vec<String>, Vec<String>) {
    let node = &w.node.name;
    let ns = &w.pod.namespace;
    let claim = format!("{}/{}", w.claim.namespace, w.claim.name);
    let mut details = vec![match &w.trouble {
        DomainTrouble::Missing(_) => format!(
            "its channel claim {claim} is allocated on {node}; NVIDIA's compute-domain kubelet plugin looks the domain up by uid to prepare it, finds none, and the pod waits in ContainerCreating"
        ),
        _ => format!(
            "its channel claim {claim} is allocated on {node}; NVIDIA's compute-domain kubelet plugin prepares it only once {node}'s IMEX daemon is Ready in the domain, so the pod waits in ContainerCreating"
        ),
    }];
    let mut commands = Vec::new();
    let (summary, unblock) = match &w.trouble {
        DomainTrouble::Missing(uid) => (
            format!("its ComputeDomain was deleted (uid {uid}): the channel claim {claim} cannot be prepared"),
            vec![format!(
                "recreate the workload with a ComputeDomain that exists (the claim names the domain by uid: a new domain of the same name is another one)"
            )],
        ),
        DomainTrouble::Unread(uid, why) => (
            format!(
                "its channel claim {claim} is not prepared on {node} (ComputeDomain uid {uid}; kgpu cannot read ComputeDomains: {why})"
            ),
            vec![format!(
                "kubectl get computedomains -A: find the domain with uid {uid} and whether {node} is Ready in it"
            )],
        ),
        DomainTrouble::OtherNamespace(d) => (
            format!(
                "its channel claim {claim} is in namespace {}, its ComputeDomain {}/{} in another: the plugin refuses it for good",
                w.claim.namespace, d.namespace, d.name
            ),
            vec![format!("run the workload in namespace {} (where the domain and its template are)", d.namespace)],
        ),
        DomainTrouble::NodeTaken(d, other, other_domain) => {
            let other_name = other_domain.map_or_else(
                || format!("uid {other}, which no longer exists"),
                |o| format!("{}/{}", o.namespace, o.name),
            );
            details.push(format!(
                "{node} carries {DOMAIN_LABEL}={other}: a node belongs to one ComputeDomain at a time, and the plugin will not relabel it"
            ));
            commands.push(format!("kubectl get node {node} -L {DOMAIN_LABEL}"));
            // What still runs there for the old domain (its daemon, its workloads' pods).
            commands
                .push(format!("kubectl get pods -A -l {DOMAIN_LABEL}={other} --field-selector spec.nodeName={node}"));
            (
                format!(
                    "{node} still belongs to ComputeDomain {other_name}: it cannot join {}/{}",
                    d.namespace, d.name
                ),
                vec![match other_domain {
                    Some(_) => format!(
                        "finish or delete the workloads of {other_name} on {node}, or keep this workload off {node}"
                    ),
                    None => format!(
                        "remove the stale label (kubectl label node {node} {DOMAIN_LABEL}-) once no pod of the old domain runs there"
                    ),
                }],
            )
        }
        DomainTrouble::NotReady(d, joined, daemon) => {
            let ready = d.nodes.iter().filter(|n| n.ready).count();
            // Cause first: a narrow Pending row shows the start of it.
            let state = match joined {
                Some(_) => format!("{node}'s IMEX daemon is not Ready in"),
                None => format!("{node}'s IMEX daemon has not joined"),
            };
            let of = if d.num_nodes > 0 {
                format!("{ready} of {} node(s) Ready", d.num_nodes)
            } else {
                format!("{ready} of {} joined node(s) Ready", d.nodes.len())
            };
            let daemon_words = match daemon {
                Some(p) => {
                    let how = p.reason.as_ref().map_or_else(|| format!("{:?}", p.phase), |r| r.to_string());
                    details.push(format!("the daemon's pod {}/{} on {node} is {how}", p.namespace, p.name));
                    commands.push(format!("kubectl logs -n {} {}", p.namespace, p.name));
                    format!("read its daemon's log (kubectl logs -n {} {})", p.namespace, p.name)
                }
                None => {
                    let unlabelled = match w.node.labels.get(&Sym::new(DOMAIN_LABEL)) {
                        Some(_) => String::new(),
                        None => format!(
                            ", and {node} does not carry it (the plugin labels a node when it first prepares a claim of the domain there)"
                        ),
                    };
                    details.push(format!(
                        "no IMEX daemon pod of the domain runs on {node}: its DaemonSet selects nodes labelled {DOMAIN_LABEL}={}{unlabelled}",
                        d.uid
                    ));
                    commands.push(format!("kubectl get node {node} -L {DOMAIN_LABEL}"));
                    format!(
                        "see why the domain's DaemonSet has no pod on {node} (its node label, taints, the driver's controller)"
                    )
                }
            };
            (
                format!("{state} ComputeDomain {}/{} ({of})", d.namespace, d.name),
                vec![format!(
                    "{daemon_words}; the pod starts once {node} is Ready in the domain (kubectl get computedomain -n {} {} -o yaml)",
                    d.namespace, d.name
                )],
            )
        }
    };
    if let Some(e) = w.said {
        details.push(format!("the kubelet says {PREPARE_FAILED}: {}", e.message.replace('\n', " ")));
    }
    if let DomainTrouble::NotReady(d, ..) | DomainTrouble::OtherNamespace(d) | DomainTrouble::NodeTaken(d, ..) =
        &w.trouble
    {
        commands.insert(0, format!("kubectl get computedomain -n {} {} -o yaml", d.namespace, d.name));
        commands.push(format!("kubectl get pods -A -l {DOMAIN_LABEL}={} -o wide", d.uid));
    }
    commands.push(format!(
        "kubectl get events -n {ns} --field-selector involvedObject.name={},reason={PREPARE_FAILED}",
        w.pod.name
    ));
    (summary, details, unblock, commands)
}
