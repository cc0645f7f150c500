//! What a pod asks of the pods around it: required inter-pod affinity and
//! anti-affinity, and hard topology spread constraints — the inputs of
//! kube-scheduler's InterPodAffinity and PodTopologySpread filters, as the
//! API server stores them (kube-scheduler v1.36's reading of each field is
//! noted where it matters). Rare: a pod holds them boxed.

use super::node::{Requirement, SelectorOperator, label_of};
use super::{Labels, Sym};

/// A `metav1.LabelSelector` read as the scheduler does: `None` (the field
/// unset) selects nothing; `Some` of no requirement (`{}`) selects every pod.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LabelSelector {
    /// `matchLabels` (as `In [value]`) and `matchExpressions`, ANDed.
    pub requirements: Box<[Requirement]>,
}

impl LabelSelector {
    pub fn matches(&self, labels: &[(Sym, Sym)]) -> bool {
        self.requirements.iter().all(|r| r.operator.matches(&r.values, label_of(labels, &r.key).cloned()))
    }

    /// `{}`: every pod (but PodTopologySpread counts no pod with it).
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// The label keys it reads.
    pub fn keys(&self) -> impl Iterator<Item = Sym> + '_ {
        self.requirements.iter().map(|r| r.key.clone())
    }
}

/// Where an affinity term looks for pods.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Namespaces {
    /// `namespaces` listed (the pod's own when neither field is set).
    Listed(Box<[Sym]>),
    /// `namespaceSelector: {}`: every namespace (with any listed).
    All,
    /// A `namespaceSelector` with requirements: the namespaces whose labels
    /// it matches, and those listed.
    Selected { listed: Box<[Sym]>, selector: LabelSelector },
}

/// A Namespace, for the labels a `namespaceSelector` reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Namespace {
    pub name: Sym,
    pub labels: Labels,
}

/// The namespaces kgpu has read, by name.
pub type NamespaceMap = imbl::OrdMap<Sym, std::sync::Arc<Namespace>>;

/// The label the API server sets on every namespace (since 1.21): what a
/// `namespaceSelector` can read of a namespace kgpu has not read (the
/// namespaces feed forbidden, or a dump without them).
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// One required `podAffinity` / `podAntiAffinity` term.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PodAffinityTerm {
    /// `labelSelector`, with `matchLabelKeys` (In the pod's value) and
    /// `mismatchLabelKeys` (NotIn) merged as the API server does since 1.33.
    pub selector: Option<LabelSelector>,
    pub namespaces: Namespaces,
    pub topology_key: Sym,
}

impl PodAffinityTerm {
    /// Whether `pod` (its namespace and labels) is one this term of a
    /// running pod selects (`AffinityTerm.Matches` with the namespace's
    /// labels: its namespace listed or its labels matching the
    /// namespaceSelector, then the pod's own labels).
    pub fn selects(&self, namespace: &Sym, labels: &Labels, known: &NamespaceMap) -> bool {
        self.in_scope(namespace.clone(), known, false) && self.selector.as_ref().is_some_and(|s| s.matches(labels))
    }

    /// [`PodAffinityTerm::selects`] for a term of the pod being placed, as
    /// kube-scheduler v1.36 matches those: its PreFilter adds the namespaces
    /// the namespaceSelector matches to the term's list, but the selector it
    /// meant to clear stays on the term (`mergeAffinityTermNamespacesIfNotEmpty`
    /// takes the term by value), and the term is then matched against no
    /// namespace labels at all. So a selector that matches an empty label
    /// set (only NotIn and DoesNotExist) selects pods of every namespace
    /// (the oracle found it: a pod whose affinity looks in namespaces
    /// without `team` was placed next to its own kind in a `team` namespace).
    pub fn selects_as_incoming(&self, namespace: &Sym, labels: &Labels, known: &NamespaceMap) -> bool {
        self.in_scope(namespace.clone(), known, true) && self.selector.as_ref().is_some_and(|s| s.matches(labels))
    }

    /// Whether its namespaceSelector reads a namespace label other than the
    /// name the API server puts on every namespace: what kgpu cannot tell
    /// without the namespaces themselves.
    pub fn reads_namespace_labels(&self) -> bool {
        match &self.namespaces {
            Namespaces::Selected { selector, .. } => selector.keys().any(|k| k.as_str() != NAMESPACE_NAME_LABEL),
            _ => false,
        }
    }

    fn in_scope(&self, namespace: Sym, known: &NamespaceMap, incoming: bool) -> bool {
        match &self.namespaces {
            Namespaces::Listed(list) => list.contains(&namespace),
            Namespaces::All => true,
            Namespaces::Selected { listed, selector } => {
                listed.contains(&namespace)
                    || (incoming && selector.matches(&[]))
                    || match known.get(&namespace) {
                        Some(ns) => selector.matches(&ns.labels),
                        None => selector.matches(&[(Sym::new(NAMESPACE_NAME_LABEL), namespace)][..]),
                    }
            }
        }
    }
}

/// One `topologySpreadConstraints` entry with `whenUnsatisfiable:
/// DoNotSchedule` (ScheduleAnyway ones only score).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SpreadConstraint {
    pub max_skew: i32,
    pub topology_key: Sym,
    /// `labelSelector` with `matchLabelKeys` merged (the scheduler merges
    /// them itself where the API server has not).
    pub selector: Option<LabelSelector>,
    /// `minDomains`, 1 when unset.
    pub min_domains: i32,
    /// `nodeAffinityPolicy: Honor` (the default): only nodes that match the
    /// pod's nodeSelector and required node affinity count.
    pub honor_node_affinity: bool,
    /// `nodeTaintsPolicy: Honor` (default Ignore): only nodes whose taints
    /// the pod tolerates count.
    pub honor_node_taints: bool,
}

/// A pod's rules about other pods.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct PodRules {
    pub affinity: Box<[PodAffinityTerm]>,
    pub anti_affinity: Box<[PodAffinityTerm]>,
    pub spread: Box<[SpreadConstraint]>,
}

impl PodRules {
    pub fn is_empty(&self) -> bool {
        self.affinity.is_empty() && self.anti_affinity.is_empty() && self.spread.is_empty()
    }
}

/// A requirement from `matchLabels`' `key: value`.
pub fn equals(key: &str, value: &str) -> Requirement {
    Requirement { key: Sym::new(key), operator: SelectorOperator::In, values: Box::new([Sym::new(value)]) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        let mut v: Vec<(Sym, Sym)> = pairs.iter().map(|(k, v)| (Sym::new(k), Sym::new(v))).collect();
        v.sort_by(|a, b| a.0.as_str().cmp(b.0.as_str()));
        v.into()
    }

    #[test]
    fn selectors_read_as_the_scheduler_reads_them() {
        let pod = labels(&[("app", "web"), ("tier", "gpu")]);
        let sel = |reqs: Vec<Requirement>| LabelSelector { requirements: reqs.into() };
        assert!(sel(vec![equals("app", "web")]).matches(&pod));
        assert!(!sel(vec![equals("app", "db")]).matches(&pod));
        assert!(sel(vec![]).matches(&pod), "{{}} selects every pod");
        let not_in = Requirement { key: Sym::new("app"), operator: SelectorOperator::NotIn, values: Box::new([]) };
        assert!(sel(vec![not_in]).matches(&labels(&[])), "NotIn matches a pod without the key");
        let gone = Requirement { key: Sym::new("x"), operator: SelectorOperator::DoesNotExist, values: Box::new([]) };
        assert!(sel(vec![gone]).matches(&pod));
        let own = PodAffinityTerm {
            selector: Some(sel(vec![equals("app", "web")])),
            namespaces: Namespaces::Listed(Box::new([Sym::new("ml")])),
            topology_key: Sym::new("kubernetes.io/hostname"),
        };
        let known = NamespaceMap::new();
        assert!(own.selects(&Sym::new("ml"), &pod, &known));
        assert!(!own.selects(&Sym::new("other"), &pod, &known), "another namespace");
        let nothing = PodAffinityTerm { selector: None, ..own.clone() };
        assert!(!nothing.selects(&Sym::new("ml"), &pod, &known), "an unset selector selects nothing");
    }

    #[test]
    fn a_namespace_selector_reads_the_namespaces_labels() {
        let pod = labels(&[("app", "web")]);
        let sel = |reqs: Vec<Requirement>| LabelSelector { requirements: reqs.into() };
        let term = |listed: &[&str], selector| PodAffinityTerm {
            selector: Some(sel(vec![equals("app", "web")])),
            namespaces: Namespaces::Selected { listed: listed.iter().map(|n| Sym::new(n)).collect(), selector },
            topology_key: Sym::new("kubernetes.io/hostname"),
        };
        let mut known = NamespaceMap::new();
        let ns = |name: &str, pairs: &[(&str, &str)]| {
            std::sync::Arc::new(Namespace { name: Sym::new(name), labels: labels(pairs) })
        };
        known.insert(Sym::new("ml"), ns("ml", &[("team", "vision"), (NAMESPACE_NAME_LABEL, "ml")]));
        known.insert(Sym::new("batch"), ns("batch", &[(NAMESPACE_NAME_LABEL, "batch")]));
        let vision = term(&[], sel(vec![equals("team", "vision")]));
        assert!(vision.selects(&Sym::new("ml"), &pod, &known));
        assert!(!vision.selects(&Sym::new("batch"), &pod, &known), "its labels do not match");
        assert!(
            term(&["batch"], sel(vec![equals("team", "vision")])).selects(&Sym::new("batch"), &pod, &known),
            "listed"
        );
        // A namespace kgpu has not read is known by the label every namespace has.
        let by_name = term(&[], sel(vec![equals(NAMESPACE_NAME_LABEL, "infer")]));
        assert!(by_name.selects(&Sym::new("infer"), &pod, &known));
        assert!(!vision.selects(&Sym::new("infer"), &pod, &known));
        // The pod being placed: a selector that matches no labels at all
        // selects every namespace (kube-scheduler v1.36), others as above.
        let no_team = term(
            &[],
            sel(vec![Requirement {
                key: Sym::new("team"),
                operator: SelectorOperator::DoesNotExist,
                values: Box::new([]),
            }]),
        );
        assert!(!no_team.selects(&Sym::new("ml"), &pod, &known));
        assert!(no_team.selects_as_incoming(&Sym::new("ml"), &pod, &known));
        assert!(!vision.selects_as_incoming(&Sym::new("batch"), &pod, &known));
    }
}
