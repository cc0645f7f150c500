//! Nodes and pods as kgpu reads them, decoded straight from the API server's
//! JSON: only the fields the model keeps are read. The rest of an object
//! (`managedFields`, probes, volume mounts, the kubectl last-applied
//! annotation, container statuses' image digests…) is skipped while
//! decoding, never allocated; labels are interned as they are read, with no
//! `String` per key and value. k8s-openapi's complete types cost twice the
//! time to load a large fleet, and the allocator kept their pages.
//!
//! A field kgpu does not read cannot make an object fail to decode; one it
//! reads, malformed, still does (the watcher reports the page).

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::api::core::v1::{Affinity, ContainerState, ResourceRequirements, Taint, Toleration};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use serde::Deserialize;
use serde::de::{self, IgnoredAny, MapAccess, Visitor};

use crate::model::{Labels, Sym, keys};

use crate::model::keys::{DRIVER_UPGRADE_VALIDATION_START, DRIVER_UPGRADE_WAIT_FOR_JOBS_START};

/// The annotations conversion reads; every other one is skipped.
const KEPT_ANNOTATIONS: &[&str] = &[
    DRIVER_UPGRADE_VALIDATION_START,
    DRIVER_UPGRADE_WAIT_FOR_JOBS_START,
    keys::VOLCANO_GROUP_NAME,
    keys::VOLCANO_GROUP_NAME_NEW,
    keys::MIRROR_POD_ANNOTATION,
    keys::LAST_CHECKPOINT,
    keys::RESTART_SECONDS,
    keys::CHECKPOINT_INTERVAL,
];

/// Labels, interned while decoding; sorted by key, the last of a repeated key kept.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InternedLabels(pub Labels);

impl<'de> Deserialize<'de> for InternedLabels {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Pairs;
        impl<'de> Visitor<'de> for Pairs {
            type Value = InternedLabels;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a map of label keys to values")
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(InternedLabels::default())
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut pairs: Vec<(Sym, Sym)> = Vec::with_capacity(map.size_hint().unwrap_or(8));
                while let Some(InternedStr(k)) = map.next_key()? {
                    // Interned symbols are never freed: a value new every
                    // minute on every node grew the cockpit without end.
                    if k.as_str() == keys::GFD_TIMESTAMP {
                        map.next_value::<IgnoredAny>()?;
                        continue;
                    }
                    let InternedStr(v) = map.next_value()?;
                    pairs.push((k, v));
                }
                // The API server writes a map's keys in order: check, and sort
                // only what is not (a sort compares 197 keys of a real node
                // 1,500 times, sharing their prefixes).
                if !pairs.is_sorted_by(|a, b| a.0 < b.0) {
                    // Stable: of a repeated key, the last one read wins, as in the API server.
                    pairs.sort_by_key(|p| p.0.clone());
                    pairs.reverse();
                    pairs.dedup_by(|a, b| a.0 == b.0);
                    pairs.reverse();
                }
                Ok(InternedLabels(pairs.into_boxed_slice()))
            }
        }
        d.deserialize_any(Pairs)
    }
}

/// A string interned as it is read: no allocation when it is known.
#[derive(Clone, Debug)]
struct InternedStr(Sym);

impl<'de> Deserialize<'de> for InternedStr {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Text;
        impl Visitor<'_> for Text {
            type Value = InternedStr;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
                Ok(InternedStr(Sym::new(s)))
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(InternedStr(Sym::new("")))
            }
        }
        d.deserialize_any(Text)
    }
}

/// The annotations in [`KEPT_ANNOTATIONS`]; the others are skipped unread.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeptAnnotations(pub Vec<(&'static str, String)>);

impl KeptAnnotations {
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.iter().find(|(k, _)| *k == key).map(|(_, v)| v.as_str())
    }
}

impl<'de> Deserialize<'de> for KeptAnnotations {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Key(Option<&'static str>);
        impl<'de> Deserialize<'de> for Key {
            fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct Text;
                impl Visitor<'_> for Text {
                    type Value = Key;
                    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                        f.write_str("an annotation key")
                    }
                    fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
                        Ok(Key(KEPT_ANNOTATIONS.iter().copied().find(|k| *k == s)))
                    }
                }
                d.deserialize_str(Text)
            }
        }
        struct Kept;
        impl<'de> Visitor<'de> for Kept {
            type Value = KeptAnnotations;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a map of annotations")
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(KeptAnnotations::default())
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut kept = Vec::new();
                while let Some(Key(key)) = map.next_key()? {
                    match key {
                        Some(k) => kept.push((k, map.next_value::<Option<String>>()?.unwrap_or_default())),
                        None => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(KeptAnnotations(kept))
            }
        }
        d.deserialize_any(Kept)
    }
}

/// `metadata` as read: what kube-rs needs (name, namespace, resourceVersion)
/// and what conversion reads.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireMeta {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    creation_timestamp: Option<Time>,
    deletion_timestamp: Option<Time>,
    owner_references: Option<Vec<OwnerReference>>,
    #[serde(default)]
    labels: InternedLabels,
    #[serde(default)]
    annotations: KeptAnnotations,
}

impl WireMeta {
    /// kube-rs's metadata (no labels or annotations: those are read interned).
    fn split(self) -> (ObjectMeta, InternedLabels, KeptAnnotations) {
        let meta = ObjectMeta {
            name: self.name,
            namespace: self.namespace,
            uid: self.uid,
            resource_version: self.resource_version,
            creation_timestamp: self.creation_timestamp,
            deletion_timestamp: self.deletion_timestamp,
            owner_references: self.owner_references,
            ..ObjectMeta::default()
        };
        (meta, self.labels, self.annotations)
    }
}

/// A condition of a node or a pod.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type", default)]
    pub type_: String,
    #[serde(default)]
    pub status: String,
    pub reason: Option<String>,
    pub message: Option<String>,
    pub last_transition_time: Option<Time>,
}

// ---- Node ----

#[derive(Clone, Debug, Default)]
pub struct Node {
    pub metadata: ObjectMeta,
    pub labels: Labels,
    pub annotations: KeptAnnotations,
    pub spec: Option<NodeSpec>,
    pub status: Option<NodeStatus>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeSpec {
    pub unschedulable: Option<bool>,
    pub taints: Option<Vec<Taint>>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeStatus {
    pub capacity: Option<BTreeMap<String, Quantity>>,
    pub allocatable: Option<BTreeMap<String, Quantity>>,
    pub conditions: Option<Vec<Condition>>,
}

#[derive(Deserialize)]
struct WireNode {
    #[serde(default)]
    metadata: WireMeta,
    spec: Option<NodeSpec>,
    status: Option<NodeStatus>,
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let w = WireNode::deserialize(d)?;
        let (metadata, InternedLabels(labels), annotations) = w.metadata.split();
        Ok(Node { metadata, labels, annotations, spec: w.spec, status: w.status })
    }
}

// ---- Pod ----

#[derive(Clone, Debug, Default)]
pub struct Pod {
    pub metadata: ObjectMeta,
    pub labels: Labels,
    pub annotations: KeptAnnotations,
    pub spec: Option<PodSpec>,
    pub status: Option<PodStatus>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSpec {
    pub node_name: Option<String>,
    #[serde(default)]
    pub containers: Vec<Container>,
    pub init_containers: Option<Vec<Container>>,
    pub tolerations: Option<Vec<Toleration>>,
    pub node_selector: Option<BTreeMap<String, String>>,
    pub affinity: Option<Affinity>,
    pub priority: Option<i32>,
    pub scheduler_name: Option<String>,
    pub scheduling_gates: Option<Vec<IgnoredAny>>,
    pub volumes: Option<Vec<Volume>>,
    pub preemption_policy: Option<String>,
    /// Pod-level requests and limits.
    pub resources: Option<ResourceRequirements>,
    pub overhead: Option<BTreeMap<String, Quantity>>,
    pub resource_claims: Option<Vec<PodResourceClaim>>,
    pub topology_spread_constraints: Option<Vec<k8s_openapi::api::core::v1::TopologySpreadConstraint>>,
}

/// `spec.resourceClaims[]`: a claim the pod uses, by name or by template.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodResourceClaim {
    pub name: String,
    pub resource_claim_name: Option<String>,
    pub resource_claim_template_name: Option<String>,
}

/// `status.resourceClaimStatuses[]`: the claim made from a template.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodResourceClaimStatus {
    pub name: String,
    pub resource_claim_name: Option<String>,
}

/// `status.extendedResourceClaimStatus`: the claim the scheduler made for
/// extended resources a DeviceClass serves through DRA (KEP-5004), and
/// which of the containers' resources it serves.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodExtendedResourceClaimStatus {
    #[serde(default)]
    pub request_mappings: Vec<ContainerExtendedResourceRequest>,
    #[serde(default)]
    pub resource_claim_name: String,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerExtendedResourceRequest {
    #[serde(default)]
    pub resource_name: String,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Container {
    pub image: Option<String>,
    /// Read for the agents' and exporters' ports only.
    pub ports: Option<Vec<ContainerPort>>,
    pub env: Option<Vec<EnvVar>>,
    pub resources: Option<ResourceRequirements>,
    pub restart_policy: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerPort {
    #[serde(default)]
    pub name: PortName,
    #[serde(default)]
    pub container_port: i32,
    /// Bound on the node (kube-scheduler's NodePorts filter); 0 for none.
    #[serde(default)]
    pub host_port: i32,
    #[serde(rename = "hostIP")]
    host_ip: Option<InternedStr>,
    protocol: Option<InternedStr>,
}

impl ContainerPort {
    pub fn host_ip(&self) -> Option<&str> {
        self.host_ip.as_ref().map(|s| s.0.as_str())
    }
    pub fn protocol(&self) -> Option<&str> {
        self.protocol.as_ref().map(|s| s.0.as_str())
    }
}

/// A port's name, as far as kgpu cares: the agent's `http`, the exporter's
/// `metrics`, or another (read without allocating).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PortName {
    Http,
    Metrics,
    #[default]
    Other,
}

impl<'de> Deserialize<'de> for PortName {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Name;
        impl Visitor<'_> for Name {
            type Value = PortName;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a port name")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<PortName, E> {
                Ok(match v {
                    "http" => PortName::Http,
                    "metrics" => PortName::Metrics,
                    _ => PortName::Other,
                })
            }
            fn visit_unit<E>(self) -> Result<PortName, E> {
                Ok(PortName::Other)
            }
        }
        d.deserialize_any(Name)
    }
}

/// `status.podIP`, read without allocating; anything but an address is none.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PodIp(pub Option<std::net::IpAddr>);

impl<'de> Deserialize<'de> for PodIp {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Ip;
        impl Visitor<'_> for Ip {
            type Value = PodIp;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an IP address")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<PodIp, E> {
                Ok(PodIp(v.parse().ok()))
            }
            fn visit_unit<E>(self) -> Result<PodIp, E> {
                Ok(PodIp(None))
            }
        }
        d.deserialize_any(Ip)
    }
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct EnvVar {
    #[serde(default)]
    pub name: String,
    pub value: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Volume {
    #[serde(default)]
    pub name: String,
    pub empty_dir: Option<IgnoredAny>,
    pub persistent_volume_claim: Option<ClaimSource>,
    /// A generic ephemeral volume: its claim is `<pod>-<volume>`.
    pub ephemeral: Option<IgnoredAny>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimSource {
    #[serde(default)]
    pub claim_name: String,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodStatus {
    pub phase: Option<String>,
    #[serde(default, rename = "podIP")]
    pub pod_ip: PodIp,
    pub reason: Option<String>,
    pub message: Option<String>,
    pub start_time: Option<Time>,
    pub conditions: Option<Vec<Condition>>,
    pub container_statuses: Option<Vec<ContainerStatus>>,
    pub init_container_statuses: Option<Vec<ContainerStatus>>,
    pub resource_claim_statuses: Option<Vec<PodResourceClaimStatus>>,
    pub extended_resource_claim_status: Option<PodExtendedResourceClaimStatus>,
    pub nominated_node_name: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerStatus {
    pub state: Option<ContainerState>,
    /// Read for the GPU Operator's operands only.
    #[serde(default)]
    pub restart_count: i32,
}

#[derive(Deserialize)]
struct WirePod {
    #[serde(default)]
    metadata: WireMeta,
    spec: Option<PodSpec>,
    status: Option<PodStatus>,
}

impl<'de> Deserialize<'de> for Pod {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let w = WirePod::deserialize(d)?;
        let (metadata, InternedLabels(labels), annotations) = w.metadata.split();
        Ok(Pod { metadata, labels, annotations, spec: w.spec, status: w.status })
    }
}

// ---- what kube-rs needs to list and watch them ----

macro_rules! resource {
    ($t:ty, $kind:literal, $plural:literal, $scope:ty) => {
        impl k8s_openapi::Resource for $t {
            const API_VERSION: &'static str = "v1";
            const GROUP: &'static str = "";
            const KIND: &'static str = $kind;
            const VERSION: &'static str = "v1";
            const URL_PATH_SEGMENT: &'static str = $plural;
            type Scope = $scope;
        }
        impl k8s_openapi::Metadata for $t {
            type Ty = ObjectMeta;
            fn metadata(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn metadata_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

resource!(Node, "Node", "nodes", k8s_openapi::ClusterResourceScope);
resource!(Pod, "Pod", "pods", k8s_openapi::NamespaceResourceScope);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_interned_sorted_and_the_last_repeat_wins() {
        let l: InternedLabels = serde_json::from_str(r#"{"b":"2","a":"1","b":"3"}"#).unwrap();
        let pairs: Vec<(&str, &str)> = l.0.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(pairs, [("a", "1"), ("b", "3")]);
        let none: InternedLabels = serde_json::from_str("null").unwrap();
        assert!(none.0.is_empty());
    }

    #[test]
    fn gfds_timestamp_is_skipped_never_interned() {
        let l: InternedLabels =
            serde_json::from_str(r#"{"nvidia.com/gfd.timestamp":"1777986932917","nvidia.com/gpu.count":"8"}"#).unwrap();
        let pairs: Vec<(&str, &str)> = l.0.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(pairs, [("nvidia.com/gpu.count", "8")]);
        assert_eq!(Sym::get("1777986932917"), None, "a value new every minute is not kept for ever");
    }

    #[test]
    fn only_the_annotations_conversion_reads_are_kept() {
        let a: KeptAnnotations = serde_json::from_str(
            r#"{"kubectl.kubernetes.io/last-applied-configuration":"{\"huge\":true}","kgpu.dev/last-checkpoint":"2026-01-01T00:00:00Z","kubernetes.io/config.mirror":"x"}"#,
        )
        .unwrap();
        assert_eq!(a.get(keys::LAST_CHECKPOINT), Some("2026-01-01T00:00:00Z"));
        assert_eq!(a.get(keys::MIRROR_POD_ANNOTATION), Some("x"));
        assert_eq!(a.0.len(), 2);
    }

    #[test]
    fn managed_fields_and_unread_fields_cannot_fail_a_pod() {
        let p: Pod = serde_json::from_str(
            r#"{"metadata":{"name":"p","namespace":"n","resourceVersion":"7","managedFields":[{"manager":"kubectl","fieldsV1":{"f:spec":{}}}]},
                "spec":{"containers":[{"name":"c","livenessProbe":{"anything":[1,2,3]},"resources":{"limits":{"nvidia.com/gpu":"1"}}}]},
                "status":{"phase":"Running","containerStatuses":[{"imageID":"sha256:…","state":{"running":{}}}]}}"#,
        )
        .unwrap();
        assert_eq!(p.metadata.name.as_deref(), Some("p"));
        assert_eq!(p.metadata.resource_version.as_deref(), Some("7"));
        assert!(p.metadata.managed_fields.is_none());
        assert_eq!(p.spec.unwrap().containers.len(), 1);
    }

    #[test]
    fn a_malformed_field_that_is_read_fails_the_pod() {
        assert!(serde_json::from_str::<Pod>(r#"{"metadata":{"name":"p"},"spec":{"priority":"high"}}"#).is_err());
        assert!(serde_json::from_str::<Pod>(r#"{"metadata":{"name":"p","labels":{"a":1}}}"#).is_err());
    }
}
