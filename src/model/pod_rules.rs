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
    pub fn matches(&self, labels: &Labels) -> bool {
        self.requirements.iter().all(|r| r.operator.matches(&r.values, label_of(labels, r.key)))
    }

    /// `{}`: every pod (but PodTopologySpread counts no pod with it).
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// The label keys it reads.
    pub fn keys(&self) -> impl Iterator<Item = Sym> + '_ {
        self.requirements.iter().map(|r| r.key)
    }
}

/// Where an affinity term looks for pods.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Namespaces {
    /// `namespaces` listed (the pod's own when neither field is set).
    Listed(Box<[Sym]>),
    /// `namespaceSelector: {}`: every namespace (with any listed).
    All,
    /// A `namespaceSelector` with requirements: it needs the namespaces'
    /// labels, which kgpu does not read; the term is not evaluated.
    BySelector,
}

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
    /// Whether `pod` (its namespace and labels) is one this term selects
    /// (`AffinityTerm.Matches`; a namespace selector is never evaluated).
    pub fn selects(&self, namespace: Sym, labels: &Labels) -> bool {
        let in_scope = match &self.namespaces {
            Namespaces::Listed(list) => list.contains(&namespace),
            Namespaces::All => true,
            Namespaces::BySelector => false,
        };
        in_scope && self.selector.as_ref().is_some_and(|s| s.matches(labels))
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
        assert!(own.selects(Sym::new("ml"), &pod));
        assert!(!own.selects(Sym::new("other"), &pod), "another namespace");
        let nothing = PodAffinityTerm { selector: None, ..own };
        assert!(!nothing.selects(Sym::new("ml"), &pod), "an unset selector selects nothing");
    }
}
