//! The resourceclaim controller, as kube-controller-manager runs it: a pod's
//! claim is made from its template (named `<pod>-<entry>-<suffix>`, recorded
//! in the pod's status); a claim's reservation for a pod that is gone or
//! finished is dropped, an unreserved claim is deallocated, and a claim made
//! for a pod goes with it. The scheduler (`scheduler.rs`) allocates.

use std::sync::Arc;

use crate::model::dra::ResourceClaim;
use crate::model::{ClaimSource, DraKey, DraKind, DraObject, Pod, PodKey, Sym};

use super::SimCluster;

/// Makes the claims pods' templates ask for, then releases what finished
/// or deleted pods held.
pub(super) fn sync(sim: &mut SimCluster) {
    if sim.dra.is_empty() {
        return;
    }
    make_from_templates(sim);
    release(sim);
}

fn make_from_templates(sim: &mut SimCluster) {
    let now = sim.now;
    let wanting: Vec<PodKey> = sim
        .pods
        .values()
        .filter(|p| !p.phase.is_terminal() && !p.terminating)
        .filter(|p| p.claims.iter().any(|c| matches!(c.source, ClaimSource::Template(_)) && c.generated.is_none()))
        .map(|p| p.key())
        .collect();
    for key in wanting {
        let Some(pod) = sim.pods.get(&key) else { continue };
        let mut made: Vec<(usize, ResourceClaim)> = Vec::new();
        for (i, entry) in pod.claims.iter().enumerate() {
            let ClaimSource::Template(template) = &entry.source else { continue };
            if entry.generated.is_some() {
                continue;
            }
            let template_key = DraKey {
                kind: DraKind::ResourceClaimTemplate,
                namespace: Some(pod.namespace.clone()),
                name: template.clone(),
            };
            // A missing template leaves the pod waiting (the pending chain says so).
            let Some(DraObject::Claim(t)) = sim.dra.get(&template_key) else { continue };
            let name = format!("{}-{}-{}", pod.name, entry.name, sim.rng.suffix());
            made.push((
                i,
                ResourceClaim {
                    name: name.as_str().into(),
                    template: false,
                    owner_pod: Some(pod.name.clone()),
                    created: now,
                    ..t.clone()
                },
            ));
        }
        if made.is_empty() {
            continue;
        }
        let Some(pod) = sim.pods.get_mut(&key) else { continue };
        let mut entries = pod.claims.to_vec();
        for (i, claim) in made {
            entries[i].generated = Some(claim.name.clone());
            let object = DraObject::Claim(claim);
            sim.dirty.dra.insert(object.key());
            sim.dra.insert(object.key(), object);
        }
        pod.claims = entries.into_boxed_slice();
        sim.dirty.pods.insert(key);
        sim.bump();
    }
}

fn release(sim: &mut SimCluster) {
    let live = |sim: &SimCluster, namespace: &Sym, name: &str| {
        sim.pods.get(&PodKey::new(namespace.as_str(), name)).is_some_and(|p| !p.phase.is_terminal())
    };
    let mut changed: Vec<(DraKey, Option<ResourceClaim>)> = Vec::new();
    for (key, object) in &sim.dra {
        let DraObject::Claim(claim) = object else { continue };
        if claim.template {
            continue;
        }
        // A claim made for a pod goes when the pod does (its owner reference).
        if let Some(owner) = &claim.owner_pod
            && !sim.pods.contains_key(&PodKey::new(claim.namespace.as_str(), owner))
        {
            changed.push((key.clone(), None));
            continue;
        }
        let reserved: Box<[Arc<str>]> =
            claim.reserved_for.iter().filter(|p| live(sim, &claim.namespace, p)).cloned().collect();
        if reserved.len() == claim.reserved_for.len() {
            continue;
        }
        let mut released = ResourceClaim { reserved_for: reserved, ..claim.clone() };
        if released.reserved_for.is_empty() {
            released.allocated = Box::new([]);
            released.allocated_node = None;
        }
        changed.push((key.clone(), Some(released)));
    }
    for (key, claim) in changed {
        match claim {
            Some(claim) => {
                sim.dra.insert(key.clone(), DraObject::Claim(claim));
            }
            None => {
                sim.dra.remove(&key);
            }
        }
        sim.dirty.dra.insert(key);
        sim.bump();
    }
}

/// A replacement pod's claims as its controller writes it: from its
/// templates, not made yet; the extended resources DRA served back among its
/// requests (the scheduler makes their claim again where it binds it).
pub(super) fn fresh(pod: &mut Pod) {
    let mut requests = pod.requests.clone();
    let entries: Vec<_> = pod
        .claims
        .iter()
        .filter_map(|c| match &c.source {
            ClaimSource::ExtendedResources(served) => {
                requests = requests.plus(served);
                None
            }
            ClaimSource::Template(_) => Some(crate::model::PodClaim { generated: None, ..c.clone() }),
            ClaimSource::Claim(_) => Some(c.clone()),
        })
        .collect();
    pod.requests = requests;
    pod.claims = entries.into_boxed_slice();
}
