//! NVIDIA's ComputeDomain (`resource.nvidia.com/v1beta1`, the DRA Driver for
//! GPUs) → the model's record. Read through a lean serde shape of the fields
//! kgpu uses, as the driver's `api/nvidia.com/resource/v1beta1` defines them.

use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;

use crate::model::{ComputeDomain, DomainNode, Sym};

use super::{Result, named};

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct Doc {
    metadata: Meta,
    spec: Spec,
    status: Status,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct Meta {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    creation_timestamp: Option<String>,
    deletion_timestamp: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct Spec {
    num_nodes: u32,
    channel: Option<Channel>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct Channel {
    resource_claim_template: Template,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Template {
    name: String,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct Status {
    status: Option<String>,
    // The API allows a null entry (`[]*ComputeDomainNode`).
    nodes: Vec<Option<Node>>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct Node {
    name: String,
    #[serde(rename = "cliqueID")]
    clique_id: String,
    status: Option<String>,
}

pub fn compute_domain(v: &Value) -> Result<ComputeDomain> {
    let doc: Doc = serde_json::from_value(v.clone()).map_err(|e| format!("computedomain: {e}"))?;
    let name = named(doc.metadata.name.as_deref(), "computedomain")?;
    let namespace = doc.metadata.namespace.as_deref().unwrap_or("default");
    let time = |t: &Option<String>| t.as_deref().and_then(crate::model::time::parse_rfc3339);
    Ok(ComputeDomain {
        namespace: Sym::new(namespace),
        name: name.into(),
        uid: doc.metadata.uid.as_deref().unwrap_or("").into(),
        num_nodes: doc.spec.num_nodes,
        template: doc.spec.channel.map_or_else(String::new, |c| c.resource_claim_template.name).into(),
        // The controller writes Ready or NotReady; anything else is not Ready.
        ready: doc.status.status.filter(|s| !s.is_empty()).map(|s| s == "Ready"),
        nodes: doc
            .status
            .nodes
            .into_iter()
            .flatten()
            .filter(|n| !n.name.is_empty())
            .map(|n| DomainNode {
                name: Sym::new(&n.name),
                ready: n.status.as_deref() == Some("Ready"),
                clique: Arc::from(n.clique_id.as_str()),
            })
            .collect(),
        deleting: doc.metadata.deletion_timestamp.is_some(),
        created: time(&doc.metadata.creation_timestamp).unwrap_or(0),
    })
}

/// The ComputeDomain uid a claim's opaque configuration names: the
/// `ComputeDomainChannelConfig` the domain's ResourceClaimTemplate carries
/// (the daemon's own `ComputeDomainDaemonConfig` is not a workload's).
pub fn channel_domain(config: &[(String, &Value)]) -> Option<Arc<str>> {
    config
        .iter()
        .filter(|(driver, _)| driver == crate::model::COMPUTE_DOMAIN_DRIVER)
        .filter(|(_, p)| p.get("kind").and_then(Value::as_str) == Some("ComputeDomainChannelConfig"))
        .find_map(|(_, p)| p.get("domainID").and_then(Value::as_str).filter(|id| !id.is_empty()))
        .map(Arc::from)
}
