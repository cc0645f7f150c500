//! kube-scheduler's two filters that look at other pods, as v1.36 writes
//! them: PodTopologySpread (hard constraints: `matchNum + selfMatch −
//! minMatch > maxSkew`, minDomains, the node inclusion policies) and
//! InterPodAffinity (the incoming pod's required affinity and
//! anti-affinity, and the required anti-affinity of the pods already
//! running). What the PreFilters count once, [`InterPod::prepare`] counts;
//! what each node's Filter decides, [`InterPod::reasons_into`] decides.
//!
//! Pods the scheduler nominated to a node (`status.nominatedNodeName`) of
//! equal or higher priority count as placed there in a first pass, and the
//! node must pass without them too ([`InterPod::node_reasons_into`]).
//!
//! A term's `namespaceSelector` reads the namespaces' labels (the
//! namespaces feed); a namespace kgpu has not read is known only by the
//! `kubernetes.io/metadata.name` label every namespace carries.

use std::collections::HashMap;

use crate::model::{Labels, NamespaceMap, Node, Pod, PodAffinityTerm, PodRules, SpreadConstraint, Sym, TaintEffect};

use super::fit::{self, NodeReason, Shape};
use super::index::Index;

/// The pod being placed: its namespace, labels and rules, and the node
/// constraints the spread's inclusion policies read.
#[derive(Clone)]
pub struct Incoming<'p> {
    pub namespace: Sym,
    pub labels: &'p Labels,
    pub rules: Option<&'p PodRules>,
    pub shape: Shape<'p>,
}

impl<'p> Incoming<'p> {
    pub fn of(pod: &'p Pod) -> Incoming<'p> {
        Incoming {
            namespace: pod.namespace.clone(),
            labels: &pod.labels,
            rules: pod.rules.as_deref(),
            shape: Shape::of(pod),
        }
    }
}

/// A topology domain: a label key and the value a node has for it.
type Domain = (Sym, Sym);

/// One hard spread constraint, counted over the eligible nodes.
#[derive(Clone)]
struct Spread {
    topology_key: Sym,
    max_skew: i64,
    /// Matching pods per domain value; a domain with none is present at 0.
    counts: HashMap<Sym, i64>,
    /// The least count, or 0 when fewer domains than minDomains exist.
    min: i64,
    min_domains: i64,
    self_match: i64,
}

impl Spread {
    fn update_min(&mut self) {
        self.min = if (self.counts.len() as i64) < self.min_domains {
            0
        } else {
            self.counts.values().copied().min().unwrap_or(i64::MAX)
        };
    }
}

/// What the two filters need, counted once for one incoming pod.
#[derive(Clone)]
pub struct InterPod<'a> {
    spread: Vec<Spread>,
    affinity_keys: Vec<Sym>,
    affinity_counts: HashMap<Domain, i64>,
    /// The incoming pod matches all its own affinity terms (the first pod
    /// of a group may start where none runs yet).
    self_affinity: bool,
    anti_keys: Vec<Sym>,
    anti_counts: HashMap<Domain, (i64, &'a Pod)>,
    existing_anti: HashMap<Domain, (i64, &'a Pod)>,
    /// What the terms' namespaceSelectors read.
    namespaces: &'a NamespaceMap,
}

/// Whether every term selects `pod` (`podMatchesAllAffinityTerms`).
/// The terms are the incoming pod's ([`PodAffinityTerm::selects_as_incoming`]).
fn selected_by_all(terms: &[PodAffinityTerm], namespace: Sym, labels: &Labels, known: &NamespaceMap) -> bool {
    !terms.is_empty() && terms.iter().all(|t| t.selects_as_incoming(&namespace, labels, known))
}

/// Untolerated NoSchedule or NoExecute taints (`nodeTaintsPolicy: Honor`).
fn untolerated(shape: &Shape<'_>, node: &Node) -> bool {
    node.taints.iter().any(|t| t.effect != TaintEffect::PreferNoSchedule && !fit::tolerates(shape.tolerations, t))
}

/// The pod's nodeSelector and required node affinity match `node`.
fn affinity_matches(shape: &Shape<'_>, node: &Node) -> bool {
    fit::selector_matches(shape.node_selector, node) && fit::affinity_matches(shape.affinity, node)
}

/// Whether `node`'s domain counts for constraint `c` (the node inclusion
/// policies; `affinity_ok`: [`affinity_matches`]).
fn included(c: &SpreadConstraint, shape: &Shape<'_>, node: &Node, affinity_ok: bool) -> bool {
    !((c.honor_node_affinity && !affinity_ok) || (c.honor_node_taints && untolerated(shape, node)))
}

/// Why the two filters cannot be evaluated for `incoming`, if so: some
/// term that would decide (its own, or a running pod's anti-affinity whose
/// label selector matches it) selects namespaces by a label, and kgpu has
/// not read the namespaces (the feed forbidden or still listing, or a dump
/// without them). The scheduler's word is then the verdict.
fn namespaces_unreadable(index: &Index<'_>, incoming: &Incoming<'_>) -> Option<String> {
    let feed = index.snap.feed(crate::model::Feed::Namespaces)?;
    let why = match &feed.state {
        crate::model::FeedState::Live | crate::model::FeedState::Reconnecting { .. } => return None,
        crate::model::FeedState::Syncing => "kgpu is still listing the namespaces".to_string(),
        crate::model::FeedState::Unavailable(problem) => {
            format!("kgpu cannot read the namespaces ({})", problem.describe())
        }
    };
    let own = incoming
        .rules
        .is_some_and(|r| r.affinity.iter().chain(r.anti_affinity.iter()).any(|t| t.reads_namespace_labels()));
    let theirs = || {
        index.anti_affinity_pods().iter().any(|(pod, _)| {
            pod.rules.as_ref().is_some_and(|r| {
                r.anti_affinity.iter().any(|t| {
                    t.reads_namespace_labels() && t.selector.as_ref().is_some_and(|s| s.matches(incoming.labels))
                })
            })
        })
    };
    (own || theirs()).then(|| format!("pod affinity rules that decide here select namespaces by label, and {why}"))
}

impl<'a> InterPod<'a> {
    /// [`InterPod::prepare`] where kgpu can evaluate the rules; `Err` with
    /// why not where a deciding term reads namespaces kgpu has not read
    /// ([`namespaces_unreadable`]): such rules keep nothing away in kgpu's
    /// count, and the scheduler's word is the verdict.
    pub fn prepare_readable(index: &Index<'a>, incoming: &Incoming<'_>) -> Result<Option<InterPod<'a>>, String> {
        match namespaces_unreadable(index, incoming) {
            Some(why) => Err(why),
            None => Ok(InterPod::prepare(index, incoming)),
        }
    }

    /// The PreFilters of both plugins for `incoming`; `None` when neither
    /// has anything to check (no rules of its own, no running pod's
    /// anti-affinity refuses it).
    pub fn prepare(index: &Index<'a>, incoming: &Incoming<'_>) -> Option<InterPod<'a>> {
        let mut existing_anti: HashMap<Domain, (i64, &'a Pod)> = HashMap::new();
        let nodes = index.node_list();
        let known = &index.snap.namespaces;
        for &(pod, position) in index.anti_affinity_pods() {
            let terms = pod.rules.as_ref().map_or(&[][..], |r| &r.anti_affinity[..]);
            for term in terms.iter().filter(|t| t.selects(&incoming.namespace, incoming.labels, known)) {
                if let Some(value) = nodes[position].labels.get(&term.topology_key) {
                    existing_anti.entry((term.topology_key.clone(), value.clone())).or_insert((0, pod)).0 += 1;
                }
            }
        }
        let empty = PodRules::default();
        let rules = incoming.rules.unwrap_or(&empty);
        if existing_anti.is_empty() && rules.is_empty() {
            return None;
        }
        let mut affinity_counts: HashMap<Domain, i64> = HashMap::new();
        let mut anti_counts: HashMap<Domain, (i64, &'a Pod)> = HashMap::new();
        if !rules.affinity.is_empty() || !rules.anti_affinity.is_empty() {
            for (position, node) in nodes.iter().enumerate() {
                for pod in index.pods_at(position) {
                    if selected_by_all(&rules.affinity, pod.namespace.clone(), &pod.labels, known) {
                        for term in rules.affinity.iter() {
                            if let Some(value) = node.labels.get(&term.topology_key) {
                                *affinity_counts.entry((term.topology_key.clone(), value.clone())).or_default() += 1;
                            }
                        }
                    }
                    for term in
                        rules.anti_affinity.iter().filter(|t| t.selects_as_incoming(&pod.namespace, &pod.labels, known))
                    {
                        if let Some(value) = node.labels.get(&term.topology_key) {
                            anti_counts.entry((term.topology_key.clone(), value.clone())).or_insert((0, pod)).0 += 1;
                        }
                    }
                }
            }
        }
        let spread = spread_counts(index, incoming, rules);
        Some(InterPod {
            spread,
            affinity_keys: rules.affinity.iter().map(|t| t.topology_key.clone()).collect(),
            affinity_counts,
            self_affinity: selected_by_all(&rules.affinity, incoming.namespace.clone(), incoming.labels, known),
            anti_keys: rules.anti_affinity.iter().map(|t| t.topology_key.clone()).collect(),
            anti_counts,
            existing_anti,
            namespaces: known,
        })
    }

    /// Why `node` fails either filter: at most one reason of each (each
    /// Filter returns at its first failing rule), spread first.
    pub fn reasons_into(&self, node: &Node, reasons: &mut Vec<NodeReason>) {
        if let Some(r) = self.spread_reason(node) {
            reasons.push(r);
        }
        if let Some(r) = self.affinity_reason(node) {
            reasons.push(r);
        }
    }

    /// Why `node` fails either filter where `ahead` (the pods nominated to
    /// it of equal or higher priority, [`Demand::nominated_ahead`]) may be
    /// placed there first: kube-scheduler's two passes
    /// (`RunFilterPluginsWithNominatedPods`) — with them counted on the node
    /// (the PreFilters' AddPod), then, if that passes, without them (a
    /// partner that is only nominated does not satisfy affinity yet).
    /// `check`: [`InterPod::prepare`]'s; `None` when it had nothing to
    /// check, and then the nominated pods are not looked at either: the
    /// PreFilters returned Skip, and a skipped plugin's AddPod is not run (a
    /// nominated pod's own anti-affinity does not refuse a pod that has no
    /// rules where no bound pod's anti-affinity selects it; the oracle found
    /// it).
    ///
    /// [`Demand::nominated_ahead`]: super::fragmentation::Demand::nominated_ahead
    pub fn node_reasons_into(
        check: Option<&InterPod<'a>>,
        incoming: &Incoming<'_>,
        node: &Node,
        ahead: &[&'a Pod],
        out: &mut Vec<NodeReason>,
    ) {
        let Some(check) = check else { return };
        let before = out.len();
        if !ahead.is_empty() {
            let mut with_ahead = check.clone();
            for pod in ahead {
                with_ahead.add_pod(incoming, node, pod);
            }
            with_ahead.reasons_into(node, out);
        }
        if out.len() == before {
            check.reasons_into(node, out);
        }
    }

    /// Counts `pod` as placed on `node` (the PreFilters' AddPod:
    /// InterPodAffinity's `updateWithPod`, PodTopologySpread's).
    fn add_pod(&mut self, incoming: &Incoming<'_>, node: &Node, pod: &'a Pod) {
        let empty = PodRules::default();
        let rules = incoming.rules.unwrap_or(&empty);
        // The nominated pod's own anti-affinity against the incoming pod.
        for term in pod.rules.as_ref().map_or(&[][..], |r| &r.anti_affinity[..]) {
            if term.selects(&incoming.namespace, incoming.labels, self.namespaces)
                && let Some(value) = node.labels.get(&term.topology_key)
            {
                self.existing_anti.entry((term.topology_key.clone(), value.clone())).or_insert((0, pod)).0 += 1;
            }
        }
        if selected_by_all(&rules.affinity, pod.namespace.clone(), &pod.labels, self.namespaces) {
            for term in rules.affinity.iter() {
                if let Some(value) = node.labels.get(&term.topology_key) {
                    *self.affinity_counts.entry((term.topology_key.clone(), value.clone())).or_default() += 1;
                }
            }
        }
        for term in
            rules.anti_affinity.iter().filter(|t| t.selects_as_incoming(&pod.namespace, &pod.labels, self.namespaces))
        {
            if let Some(value) = node.labels.get(&term.topology_key) {
                self.anti_counts.entry((term.topology_key.clone(), value.clone())).or_insert((0, pod)).0 += 1;
            }
        }
        // Spread: a pod of the incoming pod's namespace, on a node with every
        // constraint's key that the inclusion policies count.
        if pod.namespace != incoming.namespace
            || rules.spread.iter().any(|c| node.labels.get(&c.topology_key).is_none())
        {
            return;
        }
        let affinity_ok = affinity_matches(&incoming.shape, node);
        for (c, s) in rules.spread.iter().zip(self.spread.iter_mut()) {
            let selected = c.selector.as_ref().is_some_and(|sel| sel.matches(&pod.labels));
            if !selected || !included(c, &incoming.shape, node, affinity_ok) {
                continue;
            }
            if let Some(value) = node.labels.get(&c.topology_key) {
                *s.counts.entry(value.clone()).or_default() += 1;
                s.update_min();
            }
        }
    }

    fn spread_reason(&self, node: &Node) -> Option<NodeReason> {
        for s in &self.spread {
            let Some(value) = node.labels.get(&s.topology_key) else {
                return Some(NodeReason::SpreadMissingLabel);
            };
            let here = s.counts.get(value).copied().unwrap_or(0);
            if (here + s.self_match).saturating_sub(s.min) > s.max_skew {
                return Some(NodeReason::SpreadSkew);
            }
        }
        None
    }

    fn affinity_reason(&self, node: &Node) -> Option<NodeReason> {
        let mut pods_exist = true;
        for key in &self.affinity_keys {
            // A node without the term's key never satisfies it.
            let Some(value) = node.labels.get(key) else { return Some(NodeReason::PodAffinity) };
            if self.affinity_counts.get(&(key.clone(), value.clone())).copied().unwrap_or(0) <= 0 {
                pods_exist = false;
            }
        }
        // The first pod of a group that selects itself may go where none runs.
        let first_of_group = self.affinity_counts.is_empty() && self.self_affinity;
        if !(pods_exist || first_of_group) {
            return Some(NodeReason::PodAffinity);
        }
        if self.anti_refuser(node).is_some() {
            return Some(NodeReason::PodAntiAffinity);
        }
        self.existing_refuser(node).map(|_| NodeReason::ExistingAntiAffinity)
    }

    /// A pod in `node`'s domain that the incoming pod's anti-affinity refuses.
    pub fn anti_refuser(&self, node: &Node) -> Option<(&'a Pod, Domain)> {
        self.anti_keys.iter().find_map(|key| {
            let domain = (key.clone(), node.labels.get(key)?.clone());
            self.anti_counts.get(&domain).filter(|(n, _)| *n > 0).map(|(_, pod)| (*pod, domain))
        })
    }

    /// A running pod whose own anti-affinity refuses the incoming pod in
    /// `node`'s domain.
    pub fn existing_refuser(&self, node: &Node) -> Option<(&'a Pod, Domain)> {
        self.existing_anti.iter().find_map(|(domain, (n, pod))| {
            (*n > 0 && node.labels.get(&domain.0) == Some(&domain.1)).then_some((*pod, domain.clone()))
        })
    }

    /// Per hard spread constraint: its key, maxSkew and the matching pods
    /// per domain (for the advice: where the pods are).
    pub fn spread_domains(&self) -> impl Iterator<Item = (Sym, i64, Vec<(Sym, i64)>)> + '_ {
        self.spread.iter().map(|s| {
            let mut counts: Vec<(Sym, i64)> = s.counts.iter().map(|(v, n)| (v.clone(), *n)).collect();
            counts.sort();
            (s.topology_key.clone(), s.max_skew, counts)
        })
    }
}

/// PodTopologySpread's PreFilter: per constraint, the matching pods of the
/// pod's namespace (not being deleted) in each domain of the eligible
/// nodes — those with every constraint's key that pass the inclusion
/// policies.
fn spread_counts(index: &Index<'_>, incoming: &Incoming<'_>, rules: &PodRules) -> Vec<Spread> {
    let mut spread: Vec<Spread> = rules
        .spread
        .iter()
        .map(|c| Spread {
            topology_key: c.topology_key.clone(),
            max_skew: i64::from(c.max_skew),
            counts: HashMap::new(),
            min: 0,
            min_domains: i64::from(c.min_domains),
            self_match: i64::from(c.selector.as_ref().is_some_and(|s| s.matches(incoming.labels))),
        })
        .collect();
    if spread.is_empty() {
        return spread;
    }
    let shape = &incoming.shape;
    for (position, node) in index.node_list().iter().enumerate() {
        if rules.spread.iter().any(|c| node.labels.get(&c.topology_key).is_none()) {
            continue;
        }
        let affinity_ok = affinity_matches(shape, node);
        for (c, s) in rules.spread.iter().zip(spread.iter_mut()) {
            if !included(c, shape, node, affinity_ok) {
                continue;
            }
            let Some(value) = node.labels.get(&c.topology_key) else { continue };
            let count = match c.selector.as_ref().filter(|sel| !sel.is_empty()) {
                Some(sel) => index
                    .pods_at(position)
                    .iter()
                    .filter(|p| !p.terminating && p.namespace == incoming.namespace && sel.matches(&p.labels))
                    .count() as i64,
                None => 0,
            };
            *s.counts.entry(value.clone()).or_default() += count;
        }
    }
    spread.iter_mut().for_each(Spread::update_min);
    spread
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::testing::{node, pod, snapshot};

    const HOST: &str = "kubernetes.io/hostname";
    const ZONE: &str = "topology.kubernetes.io/zone";

    fn zoned(name: &str, zone: &str) -> Node {
        node(name).gpus(8).label(HOST, name).label(ZONE, zone).build()
    }

    fn reasons(nodes: Vec<Node>, pods: Vec<Pod>, incoming: &Pod) -> Vec<(String, Vec<NodeReason>)> {
        let snap = snapshot(nodes, pods, vec![], 0);
        let index = Index::build(&snap, 0);
        let check = InterPod::prepare(&index, &Incoming::of(incoming));
        index
            .nodes()
            .map(|n| {
                let mut r = Vec::new();
                if let Some(c) = &check {
                    c.reasons_into(n, &mut r);
                }
                (n.name.to_string(), r)
            })
            .collect()
    }

    #[test]
    fn anti_affinity_keeps_a_replica_off_its_siblings_node_and_zone() {
        let nodes = vec![zoned("a", "z1"), zoned("b", "z1"), zoned("c", "z2")];
        let running = pod("web-0").pod_label("app", "web").on("a").running().build();
        let by_host = pod("web-1").pod_label("app", "web").anti_affinity("app", "web", HOST).build();
        let got = reasons(nodes.clone(), vec![running.clone()], &by_host);
        assert_eq!(got[0].1, [NodeReason::PodAntiAffinity]);
        assert!(got[1].1.is_empty() && got[2].1.is_empty(), "{got:?}");
        let by_zone = pod("web-1").pod_label("app", "web").anti_affinity("app", "web", ZONE).build();
        let got = reasons(nodes, vec![running], &by_zone);
        assert_eq!(got.iter().map(|(_, r)| r.len()).collect::<Vec<_>>(), [1, 1, 0], "z1 is taken: {got:?}");
    }

    #[test]
    fn a_running_pods_anti_affinity_refuses_the_newcomer() {
        let nodes = vec![zoned("a", "z1"), zoned("b", "z2")];
        let loner = pod("loner").anti_affinity("team", "noisy", HOST).on("a").running().build();
        let noisy = pod("noisy").pod_label("team", "noisy").build();
        let got = reasons(nodes, vec![loner], &noisy);
        assert_eq!(got[0].1, [NodeReason::ExistingAntiAffinity]);
        assert!(got[1].1.is_empty());
    }

    #[test]
    fn affinity_wants_a_partner_unless_it_is_the_first_of_its_group() {
        let nodes = vec![zoned("a", "z1"), zoned("b", "z2"), node("bare").gpus(8).build()];
        let cache = pod("cache").pod_label("app", "cache").on("b").running().build();
        let worker = pod("w").pod_affinity("app", "cache", ZONE).build();
        let got = reasons(nodes.clone(), vec![cache], &worker);
        assert_eq!(got[0].1, [NodeReason::PodAffinity], "no cache in z1");
        assert!(got[1].1.is_empty());
        assert_eq!(got[2].1, [NodeReason::PodAffinity], "a node without the key never matches");
        // The first pod of a group that selects itself may start anywhere with the key.
        let first = pod("c0").pod_label("app", "cache").pod_affinity("app", "cache", ZONE).build();
        let got = reasons(nodes, vec![], &first);
        assert_eq!(got.iter().map(|(_, r)| r.len()).collect::<Vec<_>>(), [0, 0, 1], "{got:?}");
    }

    #[test]
    fn spread_counts_skew_min_domains_and_missing_keys() {
        let nodes = vec![zoned("a", "z1"), zoned("b", "z2"), node("bare").gpus(8).build()];
        let pods: Vec<Pod> =
            (0..2).map(|i| pod(&format!("s{i}")).pod_label("app", "s").on("a").running().build()).collect();
        let next = pod("s9").pod_label("app", "s").spread("app", "s", ZONE, 1).build();
        let got = reasons(nodes.clone(), pods.clone(), &next);
        // z1 has 2, z2 has 0: 2 + 1 − 0 > 1 in z1; z2 is fine; bare lacks the key.
        assert_eq!(got[0].1, [NodeReason::SpreadSkew]);
        assert!(got[1].1.is_empty());
        assert_eq!(got[2].1, [NodeReason::SpreadMissingLabel]);
        // A pod the selector does not match skews nothing of its own: 2 + 0 − 0 > 1 still.
        let other = pod("x").spread("app", "s", ZONE, 1).build();
        assert_eq!(reasons(nodes, pods, &other)[0].1, [NodeReason::SpreadSkew]);
        // minDomains 3 with two domains: the minimum counts as 0.
        let nodes = vec![zoned("a", "z1"), zoned("b", "z2")];
        let even = vec![
            pod("p0").pod_label("app", "s").on("a").running().build(),
            pod("p1").pod_label("app", "s").on("b").running().build(),
        ];
        let mut wants = pod("s9").pod_label("app", "s").spread("app", "s", ZONE, 1).build();
        assert!(reasons(nodes.clone(), even.clone(), &wants).iter().all(|(_, r)| r.is_empty()));
        if let Some(rules) = wants.rules.as_mut() {
            rules.spread[0].min_domains = 3;
        }
        assert!(reasons(nodes, even, &wants).iter().all(|(_, r)| r == &[NodeReason::SpreadSkew]));
    }

    #[test]
    fn node_inclusion_policies_decide_which_nodes_count() {
        // a (z1) is tainted and holds the only matching pod; b (z2) is empty.
        let tainted = node("a")
            .gpus(8)
            .label(HOST, "a")
            .label(ZONE, "z1")
            .taint("dedicated", "ml", TaintEffect::NoSchedule)
            .build();
        let running = pod("s0").pod_label("app", "s").tolerate("dedicated").on("a").running().build();
        let mut next = pod("s1").pod_label("app", "s").spread("app", "s", ZONE, 1).build();
        // Ignore (the default): z1 counts 1, z2 0: z2 is the place, z1 skews 2 − 0 > 1.
        let got = reasons(vec![tainted.clone(), zoned("b", "z2")], vec![running.clone()], &next);
        assert_eq!(got[0].1, [NodeReason::SpreadSkew]);
        // Honor: the untolerated node's domain is not counted, so the
        // minimum is z2's 0 and z1 (not counted: 0) is no longer skewed.
        if let Some(r) = next.rules.as_mut() {
            r.spread[0].honor_node_taints = true;
        }
        let got = reasons(vec![tainted, zoned("b", "z2")], vec![running], &next);
        assert!(got.iter().all(|(_, r)| r.is_empty()), "{got:?}");
    }
}
