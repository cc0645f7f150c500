//! PersistentVolumeClaims, PersistentVolumes and StorageClasses, read as
//! kube-scheduler v1.36's volume plugins read them (component-helpers'
//! `GetPersistentVolumeClaimClass`, `IsVolumeBoundToClaim`…).

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolume as ApiVolume, PersistentVolumeClaim as ApiClaim};
use k8s_openapi::api::storage::v1::StorageClass as ApiClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::model::node::labels_from;
use crate::model::storage::{
    AccessModes, ClaimPhase, ClaimRef, PersistentVolume, StorageClass, VolumeClaim, VolumePhase,
};
use crate::model::{Sym, Uid, quantity};

use super::{Result, named};

/// The beta annotation that still overrides `storageClassName`.
const BETA_CLASS: &str = "volume.beta.kubernetes.io/storage-class";
const BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
const SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";

fn class_of(annotations: Option<&BTreeMap<String, String>>, spec: Option<&String>) -> Option<Sym> {
    annotations.and_then(|a| a.get(BETA_CLASS)).or(spec).filter(|c| !c.is_empty()).map(|c| Sym::new(c))
}

fn storage(q: Option<&Quantity>, what: &str) -> Result<u64> {
    q.map_or(Ok(0), |q| quantity::parse("storage", &q.0).map_err(|e| format!("{what}: storage: {e}")))
}

fn modes(list: Option<&Vec<String>>) -> AccessModes {
    AccessModes::parse(list.into_iter().flatten().map(String::as_str))
}

pub fn volume_claim(c: &ApiClaim) -> Result<VolumeClaim> {
    let name = named(c.metadata.name.as_deref(), "persistentvolumeclaim")?;
    let namespace = c.metadata.namespace.as_deref().unwrap_or("default");
    let what = format!("persistentvolumeclaim {namespace}/{name}");
    let spec = c.spec.as_ref();
    let annotations = c.metadata.annotations.as_ref();
    let selector = match spec.and_then(|s| s.selector.as_ref()) {
        Some(s) => super::pod_rules::selector(Some(s)).map_err(|e| format!("{what}: {e}"))?.map(Box::new),
        None => None,
    };
    let phase = match c.status.as_ref().and_then(|s| s.phase.as_deref()) {
        Some("Bound") => ClaimPhase::Bound,
        Some("Lost") => ClaimPhase::Lost,
        _ => ClaimPhase::Pending,
    };
    let owner_pod = super::controlling_pod(c.metadata.owner_references.as_ref()).and_then(|o| Uid::parse(&o.uid));
    Ok(VolumeClaim {
        namespace: Sym::new(namespace),
        name: Arc::from(name),
        uid: c.metadata.uid.as_deref().and_then(Uid::parse),
        class: class_of(annotations, spec.and_then(|s| s.storage_class_name.as_ref())),
        volume: spec.and_then(|s| s.volume_name.as_deref()).filter(|v| !v.is_empty()).map(Arc::from),
        bind_completed: annotations.is_some_and(|a| a.contains_key(BIND_COMPLETED)),
        phase,
        deleting: c.metadata.deletion_timestamp.is_some(),
        access_modes: modes(spec.and_then(|s| s.access_modes.as_ref())),
        storage: storage(
            spec.and_then(|s| s.resources.as_ref()).and_then(|r| r.requests.as_ref()).and_then(|r| r.get("storage")),
            &what,
        )?,
        block: spec.and_then(|s| s.volume_mode.as_deref()) == Some("Block"),
        selector,
        selected_node: annotations.and_then(|a| a.get(SELECTED_NODE)).filter(|n| !n.is_empty()).map(|n| Sym::new(n)),
        owner_pod,
    })
}

pub fn persistent_volume(v: &ApiVolume) -> Result<PersistentVolume> {
    let name = named(v.metadata.name.as_deref(), "persistentvolume")?;
    let what = format!("persistentvolume {name}");
    let spec = v.spec.as_ref();
    let phase = match v.status.as_ref().and_then(|s| s.phase.as_deref()) {
        Some("Available") => VolumePhase::Available,
        Some("Bound") => VolumePhase::Bound,
        Some("Released") => VolumePhase::Released,
        Some("Failed") => VolumePhase::Failed,
        _ => VolumePhase::Pending,
    };
    let node_affinity = match spec.and_then(|s| s.node_affinity.as_ref()).and_then(|a| a.required.as_ref()) {
        Some(terms) => super::node_selector_terms(terms).map_err(|e| format!("{what}: node affinity: {e}"))?,
        None => Box::new([]),
    };
    let claim = spec.and_then(|s| s.claim_ref.as_ref()).map(|r| ClaimRef {
        namespace: Sym::new(r.namespace.as_deref().unwrap_or("")),
        name: Arc::from(r.name.as_deref().unwrap_or("")),
        uid: r.uid.as_deref().and_then(Uid::parse),
    });
    Ok(PersistentVolume {
        name: Arc::from(name),
        class: class_of(v.metadata.annotations.as_ref(), spec.and_then(|s| s.storage_class_name.as_ref())),
        claim,
        phase,
        capacity: storage(spec.and_then(|s| s.capacity.as_ref()).and_then(|c| c.get("storage")), &what)?,
        block: spec.and_then(|s| s.volume_mode.as_deref()) == Some("Block"),
        access_modes: modes(spec.and_then(|s| s.access_modes.as_ref())),
        node_affinity,
        labels: labels_from(v.metadata.labels.iter().flatten().map(|(k, v)| (k.as_str(), v.as_str()))),
        deleting: v.metadata.deletion_timestamp.is_some(),
    })
}

pub fn storage_class(c: &ApiClass) -> Result<StorageClass> {
    let name = named(c.metadata.name.as_deref(), "storageclass")?;
    let allowed_topologies = c
        .allowed_topologies
        .iter()
        .flatten()
        .map(|term| {
            term.match_label_expressions
                .iter()
                .flatten()
                .map(|e| (Sym::new(&e.key), e.values.iter().map(|v| Sym::new(v)).collect()))
                .collect()
        })
        .collect();
    Ok(StorageClass {
        name: Arc::from(name),
        provisioner: Sym::new(&c.provisioner),
        // The API server defaults an unset mode to Immediate.
        wait_for_first_consumer: c.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer"),
        allowed_topologies,
    })
}
