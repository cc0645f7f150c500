//! Room for a demand whose pods refuse each other in a topology domain
//! (required anti-affinity that selects its own pods, on a zone, a rack,
//! a node pool): however many GPUs a zone has free, it takes one of them.

use std::collections::HashSet;

use crate::model::{NamespaceMap, Node, Pod, Sym};

use super::Demand;

/// The topology keys on which `pod`'s required anti-affinity refuses pods
/// like itself (its namespace and labels).
pub(super) fn own_domains(pod: &Pod, namespaces: &NamespaceMap) -> Box<[Sym]> {
    let terms = pod.rules.as_ref().map_or(&[][..], |r| &r.anti_affinity[..]);
    let mut keys: Vec<Sym> = terms
        .iter()
        .filter(|t| t.selects_as_incoming(&pod.namespace, &pod.labels, namespaces))
        .map(|t| t.topology_key.clone())
        .collect();
    keys.sort();
    keys.dedup();
    keys.into()
}

/// Counts a demand's room node by node, at most one pod in each domain of
/// each of its own anti-affinity keys. A node without a key's label is not
/// limited by that key (the scheduler finds no domain to refuse there).
/// Nodes a running pod of the demand already refuses never get here: the
/// filters keep them away first.
pub struct OwnDomains<'d> {
    demand: &'d Demand,
    taken: HashSet<(Sym, Sym)>,
    /// Room the domains cut: pods the nodes would hold but for them.
    pub cut: u64,
}

impl<'d> OwnDomains<'d> {
    pub fn of(demand: &'d Demand) -> OwnDomains<'d> {
        OwnDomains { demand, taken: HashSet::new(), cut: 0 }
    }

    /// Of the `room` pods `node` holds, those the demand can still place
    /// there, given the domains earlier nodes took.
    pub fn take(&mut self, node: &Node, room: u64) -> u64 {
        if room == 0 || self.demand.own_domains.is_empty() {
            return room;
        }
        let domains: Vec<(Sym, Sym)> =
            self.demand.own_domains.iter().filter_map(|k| node.labels.get(k).map(|v| (k.clone(), v.clone()))).collect();
        if domains.is_empty() {
            return room;
        }
        if domains.iter().any(|d| self.taken.contains(d)) {
            self.cut += room;
            return 0;
        }
        self.taken.extend(domains);
        self.cut += room - 1;
        1
    }

    /// The key that limits the demand beyond its nodes, if it has one.
    pub fn wider_key(&self) -> Option<Sym> {
        self.demand.wider_own_domain()
    }
}
