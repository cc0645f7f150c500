//! Dynamic Resource Allocation (`resource.k8s.io`): the devices drivers
//! publish in ResourceSlices, the DeviceClasses that name kinds of device,
//! and the ResourceClaims (and their templates) through which pods ask for
//! and hold devices. Compacted as the rest of the model; selectors are kept
//! as the CEL text the analysis evaluates.

use std::sync::Arc;

use super::{Sym, TaintEffect, Timestamp};

/// Which DRA object, with its namespace (none for cluster-scoped kinds).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DraKey {
    pub kind: DraKind,
    pub namespace: Option<Sym>,
    pub name: Arc<str>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DraKind {
    ResourceSlice,
    DeviceClass,
    ResourceClaim,
    ResourceClaimTemplate,
    ComputeDomain,
}

#[derive(Clone, Debug, PartialEq)]
pub enum DraObject {
    Slice(ResourceSlice),
    Class(DeviceClass),
    /// A claim, or a template's claim spec (its `spec.spec`).
    Claim(ResourceClaim),
    /// NVIDIA's ComputeDomain (`resource.nvidia.com`): the IMEX domain a
    /// multi-node NVLink workload's channel claims join.
    Domain(ComputeDomain),
}

impl DraObject {
    pub fn key(&self) -> DraKey {
        match self {
            DraObject::Slice(s) => DraKey { kind: DraKind::ResourceSlice, namespace: None, name: s.name.clone() },
            DraObject::Class(c) => DraKey { kind: DraKind::DeviceClass, namespace: None, name: c.name.clone() },
            DraObject::Claim(c) => DraKey {
                kind: if c.template { DraKind::ResourceClaimTemplate } else { DraKind::ResourceClaim },
                namespace: Some(c.namespace.clone()),
                name: c.name.clone(),
            },
            DraObject::Domain(d) => {
                DraKey { kind: DraKind::ComputeDomain, namespace: Some(d.namespace.clone()), name: d.name.clone() }
            }
        }
    }
}

/// A typed device attribute, as the driver publishes it.
#[derive(Clone, Debug, PartialEq)]
pub enum AttributeValue {
    Int(i64),
    Bool(bool),
    String(Box<str>),
    /// A semantic version (`version` in the API).
    Version(Box<str>),
}

impl AttributeValue {
    pub fn as_str(&self) -> Option<&str> {
        match self {
            AttributeValue::String(s) | AttributeValue::Version(s) => Some(s),
            _ => None,
        }
    }
}

/// A device taint (KEP-5055): `NoSchedule` keeps new claims off the
/// device, `NoExecute` also evicts the pods using it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceTaint {
    pub key: Sym,
    pub value: Option<Sym>,
    pub effect: TaintEffect,
}

/// A named counter set and its counters (KEP-4815 partitionable devices):
/// what a pool offers, or what one device draws from it.
pub type CounterSet = (Sym, Box<[(Sym, u64)]>);

/// One device in a ResourceSlice.
#[derive(Clone, Debug, PartialEq)]
pub struct Device {
    pub name: Sym,
    /// By fully qualified name (`gpu.nvidia.com/productName`): an
    /// unqualified name in the API is in the driver's domain.
    pub attributes: Box<[(Sym, AttributeValue)]>,
    /// By fully qualified name, in the quantity's base unit (bytes, count).
    pub capacity: Box<[(Sym, u64)]>,
    pub taints: Box<[DeviceTaint]>,
    /// Partitionable devices (KEP-4815): the counter sets this device
    /// draws on, and how much of each counter.
    pub consumes: Box<[CounterSet]>,
}

impl Device {
    pub fn attribute(&self, qualified: &str) -> Option<&AttributeValue> {
        self.attributes.iter().find(|(k, _)| k.as_str() == qualified).map(|(_, v)| v)
    }
}

/// What DRA offers that kgpu's allocator does not model. An object that uses
/// one names it: verdicts that depend on it defer to the scheduler's word.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DraFeature {
    /// A device several claims share, each taking part of its capacity
    /// (KEP-5075: a device's `allowMultipleAllocations`, a request's `capacity`).
    ConsumableCapacity,
    /// A device the scheduler binds a pod to only once the driver reports
    /// it ready (KEP-5007: `bindingConditions`).
    BindingConditions,
    /// Devices of one slice that each name their nodes (KEP-4815:
    /// `perDeviceNodeSelection`, a device's `nodeName`, `nodeSelector`, `allNodes`).
    PerDeviceNodes,
    /// A slice reachable from several nodes (`nodeSelector`, `allNodes`):
    /// network-attached devices, in no one node's supply.
    NetworkAttached,
}

impl DraFeature {
    /// Its name in a headline.
    pub fn short(self) -> &'static str {
        match self {
            DraFeature::ConsumableCapacity => "consumable capacity",
            DraFeature::BindingConditions => "device binding conditions",
            DraFeature::PerDeviceNodes => "per-device node selection",
            DraFeature::NetworkAttached => "network-attached devices",
        }
    }

    /// What it is, as the API spells it.
    pub fn name(self) -> &'static str {
        match self {
            DraFeature::ConsumableCapacity => "consumable capacity (allowMultipleAllocations, a request's capacity)",
            DraFeature::BindingConditions => "device binding conditions (bindingConditions)",
            DraFeature::PerDeviceNodes => "per-device node selection (perDeviceNodeSelection)",
            DraFeature::NetworkAttached => "network-attached devices (a slice's nodeSelector or allNodes)",
        }
    }
}

/// A ResourceSlice: some or all of one pool's devices.
#[derive(Clone, Debug, PartialEq)]
pub struct ResourceSlice {
    pub name: Arc<str>,
    pub driver: Sym,
    pub pool: Sym,
    pub pool_generation: i64,
    pub slice_count: i64,
    /// `spec.nodeName`: devices local to one node. None for network-
    /// attached devices (`allNodes`, `nodeSelector`), which kgpu counts in
    /// no node's supply.
    pub node: Option<Sym>,
    pub devices: Box<[Device]>,
    /// Counter sets shared by the pool's partitionable devices.
    pub shared_counters: Box<[CounterSet]>,
    /// What its devices (by name; the slice's name for the slice) use that
    /// kgpu does not model.
    pub unmodelled: Box<[(Sym, DraFeature)]>,
}

/// A DeviceClass: the selectors every request for it adds.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceClass {
    pub name: Arc<str>,
    pub selectors: Box<[Box<str>]>,
    /// The extended resource it serves (`extendedResourceName`), if any.
    pub extended_resource: Option<Sym>,
}

/// How many devices one request (or one of its alternatives) asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Amount {
    Count(u64),
    /// `allocationMode: All`: every matching device on the node.
    All,
}

impl ExactRequest {
    /// `count` devices of `class`, with these selectors, no taints
    /// tolerated, no admin access.
    pub fn count(class: &str, count: u64, selectors: Box<[Box<str>]>) -> ExactRequest {
        ExactRequest {
            class: Sym::new(class),
            selectors,
            amount: Amount::Count(count),
            tolerates_taints: false,
            admin_access: false,
        }
    }
}

/// One way to satisfy a request: a device class, selectors and an amount.
#[derive(Clone, Debug, PartialEq)]
pub struct ExactRequest {
    pub class: Sym,
    pub selectors: Box<[Box<str>]>,
    pub amount: Amount,
    /// Tolerates device taints (any key with Exists, or key=value).
    pub tolerates_taints: bool,
    /// `adminAccess`: the devices are reached for monitoring or
    /// maintenance, whoever else holds them, and are not taken from anyone.
    pub admin_access: bool,
}

/// A claim's constraint across the devices of some of its requests (all of
/// them when `requests` is empty): each must have the attribute, and its
/// value must be the same on all (`matchAttribute`), or differ on each
/// (`distinctAttribute`).
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceConstraint {
    /// Request names, or `request/subrequest`.
    pub requests: Box<[Sym]>,
    /// Fully qualified (`resource.kubernetes.io/pcieRoot`).
    pub attribute: Sym,
    pub distinct: bool,
}

/// A request of a claim: `exactly`, or `firstAvailable` alternatives in
/// the order the scheduler tries them.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceRequest {
    pub name: Sym,
    pub alternatives: Box<[(Sym, ExactRequest)]>,
}

/// A device allocated to a claim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AllocatedDevice {
    /// The request (or `request/subrequest`) it serves.
    pub request: Sym,
    pub driver: Sym,
    pub pool: Sym,
    pub device: Sym,
    /// Allocated for admin access: the device stays free for others.
    pub admin_access: bool,
}

/// A ResourceClaim, or the claim a ResourceClaimTemplate stamps out.
#[derive(Clone, Debug, PartialEq)]
pub struct ResourceClaim {
    pub namespace: Sym,
    pub name: Arc<str>,
    pub template: bool,
    pub requests: Box<[DeviceRequest]>,
    pub constraints: Box<[DeviceConstraint]>,
    pub allocated: Box<[AllocatedDevice]>,
    /// The node the allocation is limited to, when it is node-local.
    pub allocated_node: Option<Sym>,
    /// Pods it is reserved for (`status.reservedFor`, at most 256).
    pub reserved_for: Box<[Arc<str>]>,
    /// The pod that owns it: a claim made from a template for that pod.
    pub owner_pod: Option<Arc<str>>,
    /// The uid of the ComputeDomain whose IMEX channel it asks for (its
    /// opaque `ComputeDomainChannelConfig`, as the domain's template writes it).
    pub compute_domain: Option<Arc<str>>,
    /// What its requests use that kgpu does not model.
    pub unmodelled: Box<[DraFeature]>,
    pub deleting: bool,
    pub created: Timestamp,
}

impl ResourceClaim {
    /// A claim (or a template's, with `template`) of these requests,
    /// nothing allocated, reserved or owned yet.
    pub fn asking(namespace: Sym, name: &str, template: bool, requests: Box<[DeviceRequest]>) -> ResourceClaim {
        ResourceClaim {
            namespace,
            name: name.into(),
            template,
            requests,
            constraints: Box::new([]),
            allocated: Box::new([]),
            allocated_node: None,
            reserved_for: Box::new([]),
            owner_pod: None,
            compute_domain: None,
            unmodelled: Box::new([]),
            deleting: false,
            created: Timestamp::default(),
        }
    }

    pub fn is_allocated(&self) -> bool {
        !self.allocated.is_empty()
    }
}

/// A pod's entry in `spec.resourceClaims`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PodClaim {
    pub name: Sym,
    pub source: ClaimSource,
    /// The claim made for it from a template (`status.resourceClaimStatuses`).
    pub generated: Option<Arc<str>>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ClaimSource {
    /// `resourceClaimName`: a claim that exists on its own, maybe shared.
    Claim(Arc<str>),
    /// `resourceClaimTemplateName`: a claim made per pod.
    Template(Arc<str>),
    /// Not in the pod's spec: the claim the scheduler made for the
    /// extended resources (`nvidia.com/gpu`, …) a DeviceClass serves through
    /// DRA on a node that does not advertise them (KEP-5004), with the
    /// amounts it serves. Made again for a replacement pod, as a template's.
    ExtendedResources(crate::model::Resources),
}

/// The driver that prepares a ComputeDomain's channels on a node.
pub const COMPUTE_DOMAIN_DRIVER: &str = "compute-domain.nvidia.com";

/// A ComputeDomain: the nodes whose IMEX daemons broker GPU memory between
/// a multi-node workload's pods. A pod's channel claim is allocated by the
/// scheduler like any claim, but its node's kubelet plugin refuses to
/// prepare it until that node's IMEX daemon is Ready in the domain: the
/// pod waits in ContainerCreating, bound and not started.
#[derive(Clone, Debug, PartialEq)]
pub struct ComputeDomain {
    pub namespace: Sym,
    pub name: Arc<str>,
    pub uid: Arc<str>,
    /// `spec.numNodes` (deprecated; 0 when the daemons start on their own).
    pub num_nodes: u32,
    /// The ResourceClaimTemplate its workloads name (`spec.channel.resourceClaimTemplate.name`).
    pub template: Arc<str>,
    /// `status.status`; None before the controller first wrote it.
    pub ready: Option<bool>,
    /// `status.nodes`: each node that joined, and whether its daemon is Ready.
    pub nodes: Box<[DomainNode]>,
    pub deleting: bool,
    pub created: Timestamp,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DomainNode {
    pub name: Sym,
    pub ready: bool,
    pub clique: Arc<str>,
}

impl ComputeDomain {
    /// Whether `node`'s IMEX daemon is Ready in the domain; None when the
    /// node has not joined it (its daemon has not reported).
    pub fn node_ready(&self, node: &str) -> Option<bool> {
        self.nodes.iter().find(|n| n.name.as_str() == node).map(|n| n.ready)
    }
}
