//! Shapes whose GPUs come through DRA claims: what a pending pod (or a
//! gang's pod set) asks through its claims, and how many such pods a node's
//! free devices take (`dra::room`). Device-plugin shapes count GPUs; these
//! count the devices their GPU requests match.

use std::sync::Arc;

use crate::analysis::dra::cel::Selectors;
use crate::analysis::index::Index;
use crate::model::{PodClaim, Sym};

/// A pod's `spec.resourceClaims` as every pod like it asks them.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct DraAsk {
    pub namespace: Sym,
    /// The entries, without the names of the claims made for this one pod
    /// (its siblings' are made from the same templates).
    pub claims: Box<[PodClaim]>,
    /// GPUs one pod asks through them (whole devices; a MIG device is one).
    pub gpus: u64,
    /// They are MIG devices (partitions), not whole GPUs.
    pub partitions: bool,
}

impl DraAsk {
    /// What `claims` ask, if they ask for GPUs; None where they ask none or
    /// a claim or template is missing (the pending chain says which).
    pub fn of(
        index: &Index<'_>,
        selectors: &mut Selectors,
        namespace: &Sym,
        claims: &[PodClaim],
    ) -> Option<Arc<DraAsk>> {
        if claims.is_empty() {
            return None;
        }
        let gpus = index.dra().template_gpus(selectors, namespace, claims).filter(|g| *g > 0)?;
        let partitions = index.dra().asks_partitions(selectors, namespace, claims);
        let claims = claims.iter().map(|c| PodClaim { generated: None, ..c.clone() }).collect();
        Some(Arc::new(DraAsk { namespace: namespace.clone(), claims, gpus, partitions }))
    }
}

/// Whether two pods' (or a pod's and its pod set's) claims come from the
/// same entries: pods of one shape.
pub fn same_claims(a: &[PodClaim], b: &[PodClaim]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.name == y.name && x.source == y.source)
}

/// Pending pods with claims that name a missing claim or template: their
/// demand is unknown, so they are in no shape.
pub fn unresolved(index: &Index<'_>, selectors: &mut Selectors) -> usize {
    index
        .pending_pods()
        .iter()
        .filter(|p| !p.claims.is_empty() && index.dra().template_gpus(selectors, &p.namespace, &p.claims).is_none())
        .count()
}
