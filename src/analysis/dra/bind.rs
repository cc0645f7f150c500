//! What the scheduler's DynamicResources plugin writes as it binds a pod to
//! a node: each pending claim's allocation (the devices the allocator's
//! search gives it there), and for extended resources a DeviceClass serves
//! on a node that does not advertise them, the claim it makes for them.
//! The simulator binds with it; the pending chain asks the same search.

use std::sync::Arc;

use crate::analysis::index::Index;
use crate::model::dra::{AllocatedDevice, ResourceClaim};
use crate::model::{Node, Pod, Resources};

use super::PodClaimState;
use super::allocate::{Given, allocate_on};
use super::cel::Selectors;
use super::claims::ThroughDra;

/// The claims' state once the pod is bound to the node.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Allocation {
    /// Each of the pod's claims not allocated yet, by name, with its devices.
    pub claims: Vec<(Arc<str>, Vec<AllocatedDevice>)>,
    /// The extended resources DRA serves on this node (they leave the pod's
    /// device-plugin requests) and the claim the scheduler makes for them,
    /// allocated (kgpu's name for it: the scheduler names it as it makes it).
    pub extended: Option<(Resources, ResourceClaim)>,
}

/// The allocation of `pod`'s claims on `node`, or None where they cannot
/// all be allocated there (or a claim is missing, being deleted, or
/// allocated on another node). It does not check the node's other filters:
/// the pending chain's verdict says where the pod fits.
pub fn allocation(index: &Index<'_>, selectors: &mut Selectors, pod: &Pod, node: &Node) -> Option<Allocation> {
    let ix = index.dra();
    let mut pending: Vec<(String, &ResourceClaim)> = Vec::new();
    for state in ix.pod_claims(pod) {
        let PodClaimState::Found(_, claim) = state else { return None };
        if claim.deleting || claim.allocated_node.as_ref().is_some_and(|n| *n != node.name) {
            return None;
        }
        if !claim.is_allocated() {
            pending.push((claim.name.to_string(), claim));
        }
    }
    let through_dra = ThroughDra::of(ix, &pod.requests);
    let extended = through_dra.claim_on(&pod.namespace, node);
    let mut asked = pending.clone();
    asked.extend(extended.as_ref().map(|c| (c.name.to_string(), c)));
    if asked.is_empty() {
        return Some(Allocation::default());
    }
    let devices = ix.devices_on(&node.name);
    let given = allocate_on(ix, selectors, node.name.clone(), devices, &asked, &mut Vec::new()).ok()?;
    let of_claim = |claim: usize| -> Vec<AllocatedDevice> {
        given
            .iter()
            .filter(|g| g.claim == claim)
            .map(|g: &Given| {
                let d = &devices[g.device];
                AllocatedDevice {
                    request: g.request.clone(),
                    driver: d.slice.driver.clone(),
                    pool: d.slice.pool.clone(),
                    device: d.device.name.clone(),
                    admin_access: g.admin_access,
                }
            })
            .collect()
    };
    let claims = pending.iter().enumerate().map(|(i, (name, _))| (Arc::from(name.as_str()), of_claim(i))).collect();
    let extended = extended.map(|claim| {
        let served: Vec<&str> = through_dra.here(node).map(|(resource, ..)| resource.as_str()).collect();
        let allocated = ResourceClaim {
            allocated: of_claim(pending.len()).into_boxed_slice(),
            allocated_node: Some(node.name.clone()),
            ..claim
        };
        (pod.requests.split_off(&served).0, allocated)
    });
    Some(Allocation { claims, extended })
}
