//! Advice for a pod that other pods keep off nodes with room: which pod,
//! in which topology domain, by whose rule (PodTopologySpread,
//! InterPodAffinity).

use crate::model::{Node, Pod, Sym};

use super::super::fit::NodeReason;
use super::super::inter_pod::InterPod;

fn who(pod: &Pod) -> String {
    format!("{}/{}", pod.namespace, pod.name)
}

/// One line per rule that keeps it off `nodes` (nodes with room otherwise),
/// naming the first pod and domain each time.
pub(super) fn advice(check: &InterPod<'_>, nodes: &[&Node]) -> Vec<String> {
    let mut out = Vec::new();
    // Each node's reasons, once.
    let reasons: Vec<Vec<NodeReason>> = nodes
        .iter()
        .map(|n| {
            let mut r = Vec::new();
            check.reasons_into(n, &mut r);
            r
        })
        .collect();
    let count = |reason: &NodeReason| reasons.iter().filter(|r| r.contains(reason)).count();
    let domain = |(key, value): (Sym, Sym)| format!("{key}={value}");
    if let Some((pod, d)) = nodes.iter().find_map(|n| check.anti_refuser(n)) {
        out.push(format!(
            "its required pod anti-affinity will not share {} with {}, and keeps it off {} node(s) with room: fewer replicas than domains, more nodes, or make the rule preferred",
            domain(d),
            who(pod),
            count(&NodeReason::PodAntiAffinity)
        ));
    }
    if let Some((pod, d)) = nodes.iter().find_map(|n| check.existing_refuser(n)) {
        out.push(format!(
            "{}'s own required anti-affinity refuses this pod in {}, and {} node(s) with room are kept this way: move that pod or relax its rule",
            who(pod),
            domain(d),
            count(&NodeReason::ExistingAntiAffinity)
        ));
    }
    let affinity = count(&NodeReason::PodAffinity);
    if affinity > 0 {
        out.push(format!(
            "its required pod affinity finds no partner pod in the domain of {affinity} node(s) with room: start the pods it wants there first, or make the rule preferred"
        ));
    }
    let skewed = count(&NodeReason::SpreadSkew);
    if skewed > 0 {
        for (key, max_skew, counts) in check.spread_domains() {
            let per_domain = counts.iter().map(|(v, n)| format!("{v}: {n}")).collect::<Vec<_>>().join(", ");
            out.push(format!(
                "topology spread over {key} (maxSkew {max_skew}) keeps it off {skewed} node(s) with room; matching pods per domain: {per_domain} — add capacity in the emptiest domain, or raise maxSkew / use ScheduleAnyway"
            ));
        }
    }
    let unlabelled = count(&NodeReason::SpreadMissingLabel);
    if unlabelled > 0 {
        out.push(format!("{unlabelled} node(s) with room lack a spread constraint's topology key label"));
    }
    out
}
