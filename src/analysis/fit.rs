//! Per-node fit: could this pod run on that node, and if not, why?
//!
//! The same rules the scheduler's default filters apply, in its order
//! (NodeUnschedulable → TaintToleration → NodeAffinity → NodeResourcesFit),
//! with GPU-specific refinements (a MIG profile, a device plugin that
//! advertises nothing). `verdicts` returns *every* failing reason for a node;
//! `scheduler_view` keeps only what the real scheduler reports (the first
//! failing filter), so kgpu can be compared with its message.

use crate::model::{
    HostPort, Node, NodeSelectorTerm, Pod, Resources, SelectorOperator, Sym, Taint, TaintEffect, Toleration, keys,
};

use super::tally::Tally;

/// Why a node cannot take a pod. `code()` gives the stable codes of DESIGN.md.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NodeReason {
    Cordoned,
    NotReady,
    UntoleratedTaint {
        key: Sym,
        value: Sym,
    },
    SelectorMismatch,
    AffinityMismatch,
    /// Every required affinity term pins node names (`matchFields
    /// metadata.name In`) and this node is not one of them: the scheduler
    /// leaves it out before filtering.
    NotAmongPinnedNodes,
    /// A host port the pod binds is taken by a pod on the node (NodePorts).
    PortsTaken,
    DevicePluginNotAdvertising,
    InsufficientGpu,
    InsufficientMig(Sym),
    InsufficientCpu,
    InsufficientMemory,
    InsufficientPods,
    InsufficientOther(Sym),
    /// VolumeRestrictions: a ReadWriteOncePod claim of the pod is in use by
    /// another pod (every node says it; preemption may free it).
    VolumeInUse,
    /// VolumeBinding: a bound volume's node affinity excludes the node.
    VolumeNodeAffinity,
    /// VolumeBinding: a WaitForFirstConsumer claim finds no volume here and
    /// cannot be provisioned for this node.
    VolumeUnbindable,
    /// VolumeBinding: a bound claim's volume does not exist.
    VolumeMissing,
    /// VolumeZone: a bound volume's zone or region labels exclude the node.
    VolumeZone,
    /// PodTopologySpread: placing it here would exceed a DoNotSchedule
    /// constraint's maxSkew.
    SpreadSkew,
    /// PodTopologySpread: the node lacks a constraint's topology key.
    SpreadMissingLabel,
    /// InterPodAffinity: no pod its required podAffinity wants runs in
    /// this node's domain.
    PodAffinity,
    /// InterPodAffinity: a pod its required podAntiAffinity refuses runs
    /// in this node's domain.
    PodAntiAffinity,
    /// InterPodAffinity: a pod running in this node's domain refuses it
    /// by its own required anti-affinity.
    ExistingAntiAffinity,
}

/// The scheduler filter a reason belongs to, in the scheduler's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Filter {
    /// NodeAffinity's PreFilter: nodes outside pinned names are never filtered.
    PreFilter,
    NodeUnschedulable,
    TaintToleration,
    NodeAffinity,
    NodePorts,
    NodeResourcesFit,
    VolumeRestrictions,
    VolumeBinding,
    VolumeZone,
    PodTopologySpread,
    InterPodAffinity,
}

impl NodeReason {
    pub fn code(&self) -> String {
        match self {
            NodeReason::Cordoned => "cordoned".into(),
            NodeReason::NotReady => "not-ready".into(),
            NodeReason::UntoleratedTaint { key, .. } => format!("untolerated-taint:{key}"),
            NodeReason::SelectorMismatch => "selector-mismatch".into(),
            NodeReason::AffinityMismatch | NodeReason::NotAmongPinnedNodes => "affinity-mismatch".into(),
            NodeReason::PortsTaken => "ports-taken".into(),
            NodeReason::DevicePluginNotAdvertising => "device-plugin-not-advertising".into(),
            NodeReason::InsufficientGpu => "insufficient-gpu".into(),
            NodeReason::InsufficientMig(p) => format!("insufficient-mig:{p}"),
            NodeReason::InsufficientCpu => "insufficient-cpu".into(),
            NodeReason::InsufficientMemory => "insufficient-memory".into(),
            NodeReason::InsufficientPods => "insufficient-pods".into(),
            NodeReason::InsufficientOther(r) => format!("insufficient:{r}"),
            NodeReason::VolumeInUse => "volume-in-use".into(),
            NodeReason::VolumeNodeAffinity => "volume-node-affinity".into(),
            NodeReason::VolumeUnbindable => "volume-unbindable".into(),
            NodeReason::VolumeMissing => "volume-missing".into(),
            NodeReason::VolumeZone => "volume-zone".into(),
            NodeReason::SpreadSkew => "topology-spread".into(),
            NodeReason::SpreadMissingLabel => "topology-spread-missing-label".into(),
            NodeReason::PodAffinity => "pod-affinity".into(),
            NodeReason::PodAntiAffinity => "pod-anti-affinity".into(),
            NodeReason::ExistingAntiAffinity => "existing-anti-affinity".into(),
        }
    }

    pub fn filter(&self) -> Filter {
        match self {
            NodeReason::NotAmongPinnedNodes => Filter::PreFilter,
            NodeReason::Cordoned => Filter::NodeUnschedulable,
            NodeReason::NotReady | NodeReason::UntoleratedTaint { .. } => Filter::TaintToleration,
            NodeReason::SelectorMismatch | NodeReason::AffinityMismatch => Filter::NodeAffinity,
            NodeReason::PortsTaken => Filter::NodePorts,
            NodeReason::VolumeInUse => Filter::VolumeRestrictions,
            NodeReason::VolumeNodeAffinity | NodeReason::VolumeUnbindable | NodeReason::VolumeMissing => {
                Filter::VolumeBinding
            }
            NodeReason::VolumeZone => Filter::VolumeZone,
            NodeReason::SpreadSkew | NodeReason::SpreadMissingLabel => Filter::PodTopologySpread,
            NodeReason::PodAffinity | NodeReason::PodAntiAffinity | NodeReason::ExistingAntiAffinity => {
                Filter::InterPodAffinity
            }
            _ => Filter::NodeResourcesFit,
        }
    }

    /// The reason as kube-scheduler v1.36 words it in a FailedScheduling
    /// message (older releases named the taint: `{key: value}`).
    pub fn scheduler_text(&self) -> String {
        match self {
            NodeReason::Cordoned => "node(s) were unschedulable".into(),
            NodeReason::NotReady | NodeReason::UntoleratedTaint { .. } => "node(s) had untolerated taint(s)".into(),
            NodeReason::SelectorMismatch | NodeReason::AffinityMismatch => {
                "node(s) didn't match Pod's node affinity/selector".into()
            }
            NodeReason::NotAmongPinnedNodes => PINNED_ELSEWHERE.into(),
            NodeReason::PortsTaken => PORTS_TAKEN.into(),
            NodeReason::DevicePluginNotAdvertising | NodeReason::InsufficientGpu => {
                format!("Insufficient {}", keys::RESOURCE_GPU)
            }
            NodeReason::InsufficientMig(p) => format!("Insufficient {}{p}", keys::RESOURCE_MIG_PREFIX),
            NodeReason::InsufficientCpu => "Insufficient cpu".into(),
            NodeReason::InsufficientMemory => "Insufficient memory".into(),
            NodeReason::InsufficientPods => "Too many pods".into(),
            NodeReason::InsufficientOther(r) => format!("Insufficient {r}"),
            NodeReason::VolumeInUse => VOLUME_IN_USE.into(),
            NodeReason::VolumeNodeAffinity => VOLUME_NODE_AFFINITY.into(),
            NodeReason::VolumeUnbindable => VOLUME_UNBINDABLE.into(),
            NodeReason::VolumeMissing => VOLUME_MISSING.into(),
            NodeReason::VolumeZone => VOLUME_ZONE.into(),
            NodeReason::SpreadSkew => SPREAD_SKEW.into(),
            NodeReason::SpreadMissingLabel => SPREAD_MISSING_LABEL.into(),
            NodeReason::PodAffinity => POD_AFFINITY.into(),
            NodeReason::PodAntiAffinity => POD_ANTI_AFFINITY.into(),
            NodeReason::ExistingAntiAffinity => EXISTING_ANTI_AFFINITY.into(),
        }
    }

    /// Reasons that preemption cannot fix (the scheduler marks them
    /// UnschedulableAndUnresolvable); evicting the pod on a port, or the
    /// pods that skew a spread or an anti-affinity refuses, frees the node.
    pub fn unresolvable(&self) -> bool {
        !matches!(
            self,
            NodeReason::SpreadSkew
                | NodeReason::PodAntiAffinity
                | NodeReason::ExistingAntiAffinity
                | NodeReason::VolumeInUse
        ) && !matches!(self.filter(), Filter::NodeResourcesFit | Filter::NodePorts)
    }

    /// Coarse class for comparing kgpu with the scheduler, whose wording
    /// merges some of kgpu's distinctions (selector vs affinity; a silent
    /// device plugin shows as plain `Insufficient nvidia.com/gpu`; v1.36
    /// names no taint, so every taint and NotReady is one class).
    pub fn comparison_class(&self) -> String {
        match self {
            NodeReason::SelectorMismatch | NodeReason::AffinityMismatch => "selector-mismatch".into(),
            NodeReason::DevicePluginNotAdvertising => "insufficient-gpu".into(),
            NodeReason::NotReady | NodeReason::UntoleratedTaint { .. } => "untolerated-taint".into(),
            NodeReason::NotAmongPinnedNodes => PINNED_ELSEWHERE_CLASS.into(),
            other => other.code(),
        }
    }
}

/// What kube-scheduler v1.36 says of nodes its NodeAffinity PreFilter left out.
pub const PINNED_ELSEWHERE: &str = "node(s) didn't satisfy plugin(s) [NodeAffinity]";
/// Its comparison class: not the same as a selector mismatch in the histogram.
pub const PINNED_ELSEWHERE_CLASS: &str = "affinity-node-names";
/// PodTopologySpread's reasons (v1.16 and v1.19 to v1.36).
pub const SPREAD_SKEW: &str = "node(s) didn't match pod topology spread constraints";
pub const SPREAD_MISSING_LABEL: &str = "node(s) didn't match pod topology spread constraints (missing required label)";
/// InterPodAffinity's reasons, the same wording v1.10 to v1.36.
pub const POD_AFFINITY: &str = "node(s) didn't match pod affinity rules";
pub const POD_ANTI_AFFINITY: &str = "node(s) didn't match pod anti-affinity rules";
pub const EXISTING_ANTI_AFFINITY: &str = "node(s) didn't satisfy existing pods anti-affinity rules";
/// The volume filters' reasons as v1.36 words them (older wordings:
/// `scheduler_msg::reason_code`).
pub const VOLUME_IN_USE: &str =
    "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod";
pub const VOLUME_NODE_AFFINITY: &str = "node(s) didn't match PersistentVolume's node affinity";
pub const VOLUME_UNBINDABLE: &str = "node(s) didn't find available persistent volumes to bind";
pub const VOLUME_MISSING: &str = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)";
pub const VOLUME_ZONE: &str = "node(s) had no available volume zone";
/// NodePorts' reason, the same wording since v1.10.
pub const PORTS_TAKEN: &str = "node(s) didn't have free ports for the requested pod ports";

/// What the pod (or one member of a gang) asks of a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Shape<'a> {
    pub requests: &'a Resources,
    pub tolerations: &'a [Toleration],
    pub node_selector: &'a [(Sym, Sym)],
    pub affinity: &'a [NodeSelectorTerm],
    /// Host ports each pod binds (NodePorts).
    pub host_ports: &'a [HostPort],
}

impl<'a> Shape<'a> {
    /// The constraints that decide placement (not the amounts): pods that
    /// share them share every static verdict.
    pub fn placement_key(&self) -> PlacementKey {
        PlacementKey {
            tolerations: self.tolerations.into(),
            node_selector: self.node_selector.into(),
            affinity: self.affinity.into(),
        }
    }

    pub fn of(pod: &'a Pod) -> Shape<'a> {
        Shape {
            requests: &pod.requests,
            tolerations: &pod.tolerations,
            node_selector: &pod.node_selector,
            affinity: &pod.affinity,
            host_ports: &pod.host_ports,
        }
    }
}

/// Owned placement constraints, a memo key (see [`Shape::placement_key`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PlacementKey {
    tolerations: Box<[Toleration]>,
    node_selector: Box<[(Sym, Sym)]>,
    affinity: Box<[NodeSelectorTerm]>,
}

pub fn tolerates(tolerations: &[Toleration], taint: &Taint) -> bool {
    tolerations.iter().any(|t| t.tolerates(taint))
}

fn is_not_ready_taint(t: &Taint) -> bool {
    matches!(t.key.as_str(), keys::TAINT_NOT_READY | keys::TAINT_UNREACHABLE)
}

/// Every reason `node` (already holding `used`, for the pods `holders`)
/// cannot take `shape`, in scheduler filter order. Empty means it fits.
pub fn verdicts(shape: &Shape<'_>, node: &Node, used: &Tally, holders: &[&Pod]) -> Vec<NodeReason> {
    let mut reasons = placement_verdicts(shape, node);
    if holders.iter().any(|p| port_conflict(shape.host_ports, p)) {
        reasons.push(NodeReason::PortsTaken);
    }
    reasons.extend(resource_shortfalls(shape.requests, node, used));
    reasons
}

/// The reasons that do not depend on what the node already runs: cordon,
/// taints, readiness, selector and affinity. Preemption cannot fix these.
pub fn placement_verdicts(shape: &Shape<'_>, node: &Node) -> Vec<NodeReason> {
    let mut reasons = Vec::new();
    placement_verdicts_into(shape, node, &mut reasons);
    reasons
}

/// [`placement_verdicts`], appended to `reasons`.
pub fn placement_verdicts_into(shape: &Shape<'_>, node: &Node, reasons: &mut Vec<NodeReason>) {
    // NodeUnschedulable: a cordon keeps out pods that do not tolerate the
    // unschedulable taint (DaemonSets do).
    if node.unschedulable {
        let cordon = Taint::new(keys::TAINT_UNSCHEDULABLE, "", TaintEffect::NoSchedule);
        if !tolerates(shape.tolerations, &cordon) {
            reasons.push(NodeReason::Cordoned);
        }
    }
    // TaintToleration: NoSchedule and NoExecute taints, in the node's order
    // (older schedulers named the first untolerated one). The node lifecycle
    // controller taints a NotReady node twice (NoSchedule and NoExecute);
    // pods tolerate only the NoExecute one by default, so the node is
    // "not ready" whichever comes first. A cordon's own taint is the cordon.
    let mut not_ready = false;
    for taint in node.taints.iter() {
        if taint.effect == TaintEffect::PreferNoSchedule
            || (node.unschedulable && taint.key.as_str() == keys::TAINT_UNSCHEDULABLE)
            || tolerates(shape.tolerations, taint)
        {
            continue;
        }
        if !is_not_ready_taint(taint) {
            reasons.push(NodeReason::UntoleratedTaint { key: taint.key.clone(), value: taint.value.clone() });
        } else if !not_ready {
            not_ready = true;
            reasons.push(NodeReason::NotReady);
        }
    }
    // A NotReady node the controller has not tainted yet will be: it cannot
    // run the pod either way (a bare API server's scheduler would still bind it).
    if !node.is_ready() && !node.taints.iter().any(is_not_ready_taint) {
        reasons.push(NodeReason::NotReady);
    }
    if !selector_matches(shape.node_selector, node) {
        reasons.push(NodeReason::SelectorMismatch);
    }
    if pinned_elsewhere(shape.affinity, node) {
        reasons.insert(0, NodeReason::NotAmongPinnedNodes);
    } else if !affinity_matches(shape.affinity, node) {
        reasons.push(NodeReason::AffinityMismatch);
    }
}

/// The reasons the real scheduler would print for this node: those of the
/// first failing filter only (it stops at the first failure per node).
pub fn scheduler_view(reasons: &[NodeReason]) -> Vec<NodeReason> {
    first_filter_reasons(reasons).cloned().collect()
}

/// [`scheduler_view`] without allocating.
pub fn first_filter_reasons(reasons: &[NodeReason]) -> impl Iterator<Item = &NodeReason> {
    let first = reasons.iter().map(|r| r.filter()).min();
    // One message per node from TaintToleration (however many taints),
    // NodeAffinity (selector and affinity alike) and the two inter-pod
    // filters (each returns at its first failing rule); NodeResourcesFit
    // names every resource short.
    let keep = match first {
        Some(Filter::TaintToleration | Filter::NodeAffinity | Filter::PodTopologySpread | Filter::InterPodAffinity) => {
            1
        }
        _ => usize::MAX,
    };
    reasons.iter().filter(move |r| Some(r.filter()) == first).take(keep)
}

pub fn selector_matches(selector: &[(Sym, Sym)], node: &Node) -> bool {
    selector.iter().all(|(k, v)| node.labels.get(k) == Some(v))
}

/// Whether every term pins node names (`matchFields metadata.name In`, the
/// values of one term's requirements intersected, the terms' united) and
/// this node is not among them (NodeAffinity's PreFilter).
fn pinned_elsewhere(terms: &[NodeSelectorTerm], node: &Node) -> bool {
    if terms.is_empty() {
        return false;
    }
    let mut pinned_here = false;
    for term in terms {
        let mut names = term
            .fields
            .iter()
            .filter(|r| r.key.as_str() == "metadata.name" && r.operator == SelectorOperator::In)
            .peekable();
        if names.peek().is_none() {
            // A term without names: every node is eligible.
            return false;
        }
        if names.all(|r| r.values.contains(&node.name)) {
            pinned_here = true;
        }
    }
    !pinned_here
}

pub fn affinity_matches(terms: &[NodeSelectorTerm], node: &Node) -> bool {
    terms.is_empty() || terms.iter().any(|term| term_matches(term, node))
}

fn term_matches(term: &NodeSelectorTerm, node: &Node) -> bool {
    if term.expressions.is_empty() && term.fields.is_empty() {
        return false;
    }
    term.expressions.iter().all(|r| {
        let value = node.labels.get(&r.key);
        r.operator.matches(&r.values, value.cloned())
    }) && term.fields.iter().all(|r| {
        let value = (r.key.as_str() == "metadata.name").then_some(node.name.clone());
        r.operator.matches(&r.values, value)
    })
}

/// NodePorts: whether `holder` (a pod on the node) binds a port of `wanted`.
pub fn port_conflict(wanted: &[HostPort], holder: &Pod) -> bool {
    holder.host_ports.iter().any(|used| wanted.iter().any(|w| w.conflicts(used)))
}

/// NodeResourcesFit: every requested resource must fit in allocatable − used.
pub fn resource_shortfalls(requests: &Resources, node: &Node, used: &Tally) -> Vec<NodeReason> {
    let mut reasons = Vec::new();
    resource_shortfalls_into(requests, node, used, &mut reasons);
    reasons
}

/// [`resource_shortfalls`] into a caller's buffer (cleared first), for loops over every node.
pub fn resource_shortfalls_into(requests: &Resources, node: &Node, used: &Tally, reasons: &mut Vec<NodeReason>) {
    reasons.clear();
    let free = |name: &str, alloc: u64| alloc.saturating_sub(used.get(name));
    let a = &node.allocatable;
    if a.pods > 0 && a.pods <= used.pods {
        reasons.push(NodeReason::InsufficientPods);
    }
    if requests.cpu_milli > a.cpu_milli.saturating_sub(used.cpu_milli) {
        reasons.push(NodeReason::InsufficientCpu);
    }
    if requests.memory > a.memory.saturating_sub(used.memory) {
        reasons.push(NodeReason::InsufficientMemory);
    }
    if requests.gpu > a.gpu.saturating_sub(used.gpu) {
        let silent_plugin = node.allocatable.gpu == 0
            && node.allocatable.mig_total() == 0
            && node.hardware_gpus().is_some_and(|n| n > 0);
        reasons.push(if silent_plugin { NodeReason::DevicePluginNotAdvertising } else { NodeReason::InsufficientGpu });
    }
    for (name, amount) in requests.extended.iter() {
        if *amount == 0 || *amount <= free(name.as_str(), node.allocatable.get(name.as_str())) {
            continue;
        }
        reasons.push(match keys::mig_profile_of(name.as_str()) {
            Some(profile) => NodeReason::InsufficientMig(Sym::new(profile)),
            None => NodeReason::InsufficientOther(name.clone()),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::testing::{node, pod};

    #[test]
    fn a_fitting_node_has_no_reasons() {
        let n = node("n1").gpus(8).build();
        let p = pod("p").gpus(4).build();
        assert!(verdicts(&Shape::of(&p), &n, &Tally::default(), &[]).is_empty());
    }

    #[test]
    fn every_reason_is_reported_in_filter_order() {
        let n = node("n1").gpus(4).cordoned().taint("nvidia.com/gpu", "present", TaintEffect::NoSchedule).build();
        let p = pod("p").gpus(8).selector("pool", "a100").build();
        let reasons = verdicts(&Shape::of(&p), &n, &Tally::default(), &[]);
        let codes: Vec<String> = reasons.iter().map(|r| r.code()).collect();
        assert_eq!(codes, ["cordoned", "untolerated-taint:nvidia.com/gpu", "selector-mismatch", "insufficient-gpu"]);
        // the scheduler stops at the first failing filter
        assert_eq!(scheduler_view(&reasons), vec![NodeReason::Cordoned]);
    }

    #[test]
    fn tolerated_taints_and_prefer_no_schedule_do_not_block() {
        let n = node("n1")
            .gpus(8)
            .taint("nvidia.com/gpu", "present", TaintEffect::NoSchedule)
            .taint("soft", "x", TaintEffect::PreferNoSchedule)
            .build();
        let p = pod("p").gpus(1).tolerate("nvidia.com/gpu").build();
        assert!(verdicts(&Shape::of(&p), &n, &Tally::default(), &[]).is_empty());
    }

    #[test]
    fn not_ready_is_one_reason_with_or_without_the_taint() {
        let bare = node("n1").gpus(8).not_ready().build();
        let tainted = node("n2").gpus(8).not_ready().taint(keys::TAINT_NOT_READY, "", TaintEffect::NoSchedule).build();
        let p = pod("p").gpus(1).build();
        for n in [bare, tainted] {
            assert_eq!(verdicts(&Shape::of(&p), &n, &Tally::default(), &[]), vec![NodeReason::NotReady]);
        }
    }

    #[test]
    fn mig_profiles_and_silent_device_plugins() {
        let mig = node("m1").mig("1g.10gb", 2).build();
        let p = pod("p").mig("3g.40gb", 1).build();
        assert_eq!(
            verdicts(&Shape::of(&p), &mig, &Tally::default(), &[]),
            vec![NodeReason::InsufficientMig(Sym::new("3g.40gb"))]
        );
        let silent = node("s1").hardware(8).build();
        let p = pod("p").gpus(1).build();
        let reasons = verdicts(&Shape::of(&p), &silent, &Tally::default(), &[]);
        assert_eq!(reasons, vec![NodeReason::DevicePluginNotAdvertising]);
        assert_eq!(reasons[0].scheduler_text(), "Insufficient nvidia.com/gpu");
    }

    #[test]
    fn used_resources_count() {
        let n = node("n1").gpus(8).build();
        let mut used = Tally::default();
        used.add(&pod("a").gpus(6).build().requests);
        let p = pod("p").gpus(4).build();
        assert_eq!(verdicts(&Shape::of(&p), &n, &used, &[]), vec![NodeReason::InsufficientGpu]);
    }

    #[test]
    fn required_affinity_terms_are_ored() {
        let n = node("n1").gpus(8).label("nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3").build();
        let h100 =
            pod("p").gpus(1).affinity_in("nvidia.com/gpu.product", &["NVIDIA-H100-80GB-HBM3", "NVIDIA-H200"]).build();
        let a100 = pod("q").gpus(1).affinity_in("nvidia.com/gpu.product", &["NVIDIA-A100-SXM4-80GB"]).build();
        assert!(verdicts(&Shape::of(&h100), &n, &Tally::default(), &[]).is_empty());
        assert_eq!(verdicts(&Shape::of(&a100), &n, &Tally::default(), &[]), vec![NodeReason::AffinityMismatch]);
    }
}
