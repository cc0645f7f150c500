//! A pod's inter-pod affinity, anti-affinity and hard spread constraints
//! (`model::PodRules`), read as kube-scheduler v1.36 reads them.

use k8s_openapi::api::core::v1::{Namespace as ApiNamespace, PodAffinityTerm as ApiTerm, TopologySpreadConstraint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector as ApiSelector;

use crate::model::node::{Requirement, SelectorOperator};
use crate::model::node::{label_value, labels_from};
use crate::model::pod_rules;
use crate::model::{LabelSelector, Labels, Namespace, Namespaces, PodAffinityTerm, PodRules, SpreadConstraint, Sym};

use super::super::lean::PodSpec;
use super::{Result, named};

/// `matchLabels` and `matchExpressions` as requirements; `None` when unset.
pub(super) fn selector(s: Option<&ApiSelector>) -> Result<Option<LabelSelector>> {
    let Some(s) = s else { return Ok(None) };
    let mut requirements: Vec<Requirement> =
        s.match_labels.iter().flatten().map(|(k, v)| pod_rules::equals(k, v)).collect();
    for e in s.match_expressions.iter().flatten() {
        let operator = match e.operator.as_str() {
            "In" => SelectorOperator::In,
            "NotIn" => SelectorOperator::NotIn,
            "Exists" => SelectorOperator::Exists,
            "DoesNotExist" => SelectorOperator::DoesNotExist,
            other => return Err(format!("unknown label selector operator '{other}'")),
        };
        requirements.push(Requirement {
            key: Sym::new(&e.key),
            operator,
            values: e.values.iter().flatten().map(|v| Sym::new(v)).collect(),
        });
    }
    Ok(Some(LabelSelector { requirements: requirements.into() }))
}

/// A Namespace: its name and labels (what a `namespaceSelector` reads).
pub fn namespace(n: &ApiNamespace) -> Result<Namespace> {
    let name = named(n.metadata.name.as_deref(), "namespace")?;
    Ok(Namespace {
        name: Sym::new(name),
        labels: labels_from(n.metadata.labels.iter().flatten().map(|(k, v)| (k.as_str(), v.as_str()))),
    })
}

/// Adds `key In/NotIn [the pod's value]` for each key the pod has
/// (`matchLabelKeys` / `mismatchLabelKeys`); an unset selector stays unset.
fn merge_keys(selector: &mut Option<LabelSelector>, keys: Option<&Vec<String>>, own: &Labels, op: SelectorOperator) {
    let Some(s) = selector else { return };
    let mut requirements = s.requirements.to_vec();
    for key in keys.into_iter().flatten() {
        if let Some(value) = label_value(own, key) {
            requirements.push(Requirement { key: Sym::new(key), operator: op, values: Box::new([value.clone()]) });
        }
    }
    s.requirements = requirements.into();
}

fn term(t: &ApiTerm, namespace: Sym, own: &Labels) -> Result<PodAffinityTerm> {
    let mut sel = selector(t.label_selector.as_ref())?;
    merge_keys(&mut sel, t.match_label_keys.as_ref(), own, SelectorOperator::In);
    merge_keys(&mut sel, t.mismatch_label_keys.as_ref(), own, SelectorOperator::NotIn);
    let listed: Box<[Sym]> = t.namespaces.iter().flatten().map(|n| Sym::new(n)).collect();
    let namespaces = match &t.namespace_selector {
        None if listed.is_empty() => Namespaces::Listed(Box::new([namespace])),
        None => Namespaces::Listed(listed),
        Some(s)
            if s.match_labels.as_ref().is_none_or(|m| m.is_empty())
                && s.match_expressions.as_ref().is_none_or(|e| e.is_empty()) =>
        {
            Namespaces::All
        }
        Some(s) => Namespaces::Selected {
            listed,
            selector: selector(Some(s))?.unwrap_or(LabelSelector { requirements: Box::new([]) }),
        },
    };
    Ok(PodAffinityTerm { selector: sel, namespaces, topology_key: Sym::new(&t.topology_key) })
}

fn spread(c: &TopologySpreadConstraint, own: &Labels) -> Result<SpreadConstraint> {
    let mut sel = selector(c.label_selector.as_ref())?;
    merge_keys(&mut sel, c.match_label_keys.as_ref(), own, SelectorOperator::In);
    Ok(SpreadConstraint {
        max_skew: c.max_skew,
        topology_key: Sym::new(&c.topology_key),
        selector: sel,
        min_domains: c.min_domains.unwrap_or(1),
        honor_node_affinity: c.node_affinity_policy.as_deref() != Some("Ignore"),
        honor_node_taints: c.node_taints_policy.as_deref() == Some("Honor"),
    })
}

/// The pod's rules about other pods; `None` for the many that have none.
pub(super) fn of(spec: &PodSpec, namespace: Sym, own: &Labels) -> Result<Option<Box<PodRules>>> {
    let affinity = spec.affinity.as_ref();
    let terms = |list: Option<&Vec<ApiTerm>>| -> Result<Box<[PodAffinityTerm]>> {
        list.into_iter().flatten().map(|t| term(t, namespace.clone(), own)).collect()
    };
    let rules = PodRules {
        affinity: terms(
            affinity
                .and_then(|a| a.pod_affinity.as_ref())
                .and_then(|p| p.required_during_scheduling_ignored_during_execution.as_ref()),
        )?,
        anti_affinity: terms(
            affinity
                .and_then(|a| a.pod_anti_affinity.as_ref())
                .and_then(|p| p.required_during_scheduling_ignored_during_execution.as_ref()),
        )?,
        spread: spec
            .topology_spread_constraints
            .iter()
            .flatten()
            .filter(|c| c.when_unsatisfiable == "DoNotSchedule")
            .map(|c| spread(c, own))
            .collect::<Result<_>>()?,
    };
    Ok((!rules.is_empty()).then(|| Box::new(rules)))
}
