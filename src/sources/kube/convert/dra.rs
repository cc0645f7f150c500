//! `resource.k8s.io/v1` objects → the model's DRA records.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::NodeSelector;
use k8s_openapi::api::resource::v1 as dra;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::model::dra::{
    AllocatedDevice, Amount, AttributeValue, Device, DeviceClass, DeviceConstraint, DeviceRequest, DeviceTaint,
    DraFeature, ExactRequest, ResourceClaim, ResourceSlice,
};
use crate::model::{ClaimSource, PodClaim, Resources, Sym, TaintEffect, quantity};

use super::super::lean::{PodSpec, PodStatus};
use super::{Result, named, ts};

/// A slice's device attributes and capacities by fully qualified name: an
/// unqualified name is in the driver's domain (as CEL's
/// `device.attributes["gpu.nvidia.com"].productName` reads it).
fn qualified(driver: &str, name: &str) -> Sym {
    if name.contains('/') { Sym::new(name) } else { Sym::new(&format!("{driver}/{name}")) }
}

fn attribute(a: &dra::DeviceAttribute) -> Option<AttributeValue> {
    if let Some(v) = a.int {
        Some(AttributeValue::Int(v))
    } else if let Some(v) = a.bool {
        Some(AttributeValue::Bool(v))
    } else if let Some(v) = &a.string {
        Some(AttributeValue::String(v.as_str().into()))
    } else {
        a.version.as_ref().map(|v| AttributeValue::Version(v.as_str().into()))
    }
}

fn amount(q: &Quantity, what: &str) -> Result<u64> {
    quantity::parse_with_unit(quantity::Unit::Whole, &q.0).map_err(|e| format!("{what}: {e}"))
}

fn counters(driver: &str, map: &BTreeMap<String, dra::Counter>) -> Result<Box<[(Sym, u64)]>> {
    map.iter().map(|(k, c)| Ok((qualified(driver, k), amount(&c.value, k)?))).collect()
}

fn effect(s: &str) -> Result<TaintEffect> {
    TaintEffect::parse(s).ok_or_else(|| format!("unknown device taint effect '{s}'"))
}

fn device(driver: &str, d: &dra::Device) -> Result<Device> {
    let mut attributes: Vec<(Sym, AttributeValue)> =
        d.attributes.iter().flatten().filter_map(|(k, v)| Some((qualified(driver, k), attribute(v)?))).collect();
    attributes.sort_by_key(|a| a.0.clone());
    let capacity = d
        .capacity
        .iter()
        .flatten()
        .map(|(k, c)| Ok((qualified(driver, k), amount(&c.value, k)?)))
        .collect::<Result<Box<[_]>>>()
        .map_err(|e| format!("device {}: {e}", d.name))?;
    let taints = d
        .taints
        .iter()
        .flatten()
        .map(|t| {
            Ok(DeviceTaint {
                key: Sym::new(&t.key),
                value: t.value.as_deref().map(Sym::new),
                effect: effect(&t.effect)?,
            })
        })
        .collect::<Result<Box<[_]>>>()?;
    let consumes = d
        .consumes_counters
        .iter()
        .flatten()
        .map(|c| Ok((Sym::new(&c.counter_set), counters(driver, &c.counters)?)))
        .collect::<Result<Box<[_]>>>()?;
    Ok(Device { name: Sym::new(&d.name), attributes: attributes.into_boxed_slice(), capacity, taints, consumes })
}

pub fn resource_slice(s: &dra::ResourceSlice) -> Result<ResourceSlice> {
    let name = named(s.metadata.name.as_deref(), "resourceslice")?;
    let spec = &s.spec;
    let driver = spec.driver.as_str();
    let devices = spec
        .devices
        .iter()
        .flatten()
        .map(|d| device(driver, d))
        .collect::<Result<Box<[_]>>>()
        .map_err(|e| format!("resourceslice {name}: {e}"))?;
    let shared_counters = spec
        .shared_counters
        .iter()
        .flatten()
        .map(|c| Ok((Sym::new(&c.name), counters(driver, &c.counters)?)))
        .collect::<Result<Box<[_]>>>()?;
    Ok(ResourceSlice {
        unmodelled: slice_unmodelled(name, spec),
        name: name.into(),
        driver: Sym::new(driver),
        pool: Sym::new(&spec.pool.name),
        pool_generation: spec.pool.generation,
        slice_count: spec.pool.resource_slice_count,
        node: spec.node_name.as_deref().filter(|n| !n.is_empty()).map(Sym::new),
        devices,
        shared_counters,
    })
}

/// What a slice and its devices use that kgpu does not model.
fn slice_unmodelled(name: &str, spec: &dra::ResourceSliceSpec) -> Box<[(Sym, DraFeature)]> {
    let mut out = Vec::new();
    let has_devices = spec.devices.as_ref().is_some_and(|d| !d.is_empty());
    if has_devices && (spec.all_nodes == Some(true) || spec.node_selector.is_some()) {
        out.push((Sym::new(name), DraFeature::NetworkAttached));
    }
    if spec.per_device_node_selection == Some(true) {
        out.push((Sym::new(name), DraFeature::PerDeviceNodes));
    }
    for d in spec.devices.iter().flatten() {
        if d.allow_multiple_allocations == Some(true) {
            out.push((Sym::new(&d.name), DraFeature::ConsumableCapacity));
        }
        if d.binding_conditions.as_ref().is_some_and(|c| !c.is_empty()) {
            out.push((Sym::new(&d.name), DraFeature::BindingConditions));
        }
    }
    out.into_boxed_slice()
}

/// What a claim's requests use that kgpu does not model.
fn claim_unmodelled(spec: &dra::ResourceClaimSpec) -> Box<[DraFeature]> {
    let asks_capacity =
        |c: Option<&dra::CapacityRequirements>| c.and_then(|c| c.requests.as_ref()).is_some_and(|r| !r.is_empty());
    let capacity = spec.devices.iter().flat_map(|d| d.requests.iter().flatten()).any(|r| {
        asks_capacity(r.exactly.as_ref().and_then(|e| e.capacity.as_ref()))
            || r.first_available.iter().flatten().any(|s| asks_capacity(s.capacity.as_ref()))
    });
    if capacity { Box::new([DraFeature::ConsumableCapacity]) } else { Box::new([]) }
}

fn selectors(list: Option<&Vec<dra::DeviceSelector>>) -> Box<[Box<str>]> {
    list.into_iter().flatten().filter_map(|s| s.cel.as_ref()).map(|c| c.expression.as_str().into()).collect()
}

pub fn device_class(c: &dra::DeviceClass) -> Result<DeviceClass> {
    let name = named(c.metadata.name.as_deref(), "deviceclass")?;
    Ok(DeviceClass {
        name: name.into(),
        selectors: selectors(c.spec.selectors.as_ref()),
        extended_resource: c.spec.extended_resource_name.as_deref().filter(|n| !n.is_empty()).map(Sym::new),
    })
}

fn exact(
    class: &str,
    sel: Option<&Vec<dra::DeviceSelector>>,
    mode: Option<&str>,
    count: Option<i64>,
    tolerations: Option<&Vec<dra::DeviceToleration>>,
    admin_access: Option<bool>,
) -> Result<ExactRequest> {
    let amount = match mode.unwrap_or("ExactCount") {
        "All" => Amount::All,
        "ExactCount" => Amount::Count(u64::try_from(count.unwrap_or(1)).map_err(|_| "a negative device count")?),
        other => return Err(format!("unknown allocationMode '{other}'")),
    };
    Ok(ExactRequest {
        class: Sym::new(class),
        selectors: selectors(sel),
        amount,
        tolerates_taints: tolerations.is_some_and(|t| !t.is_empty()),
        admin_access: admin_access.unwrap_or(false),
    })
}

fn request(r: &dra::DeviceRequest) -> Result<DeviceRequest> {
    let alternatives = match (&r.exactly, &r.first_available) {
        (Some(e), _) => vec![(
            Sym::new(&r.name),
            exact(
                &e.device_class_name,
                e.selectors.as_ref(),
                e.allocation_mode.as_deref(),
                e.count,
                e.tolerations.as_ref(),
                e.admin_access,
            )?,
        )],
        (None, Some(subs)) => subs
            .iter()
            .map(|s| {
                Ok((
                    Sym::new(&format!("{}/{}", r.name, s.name)),
                    exact(
                        &s.device_class_name,
                        s.selectors.as_ref(),
                        s.allocation_mode.as_deref(),
                        s.count,
                        s.tolerations.as_ref(),
                        None,
                    )?,
                ))
            })
            .collect::<Result<_>>()?,
        (None, None) => return Err(format!("request {} has neither exactly nor firstAvailable", r.name)),
    };
    Ok(DeviceRequest { name: Sym::new(&r.name), alternatives: alternatives.into_boxed_slice() })
}

fn requests(spec: &dra::ResourceClaimSpec) -> Result<Box<[DeviceRequest]>> {
    spec.devices.iter().flat_map(|d| d.requests.iter().flatten()).map(request).collect()
}

/// The ComputeDomain whose channel the claim asks for, from its opaque configuration.
fn compute_domain(spec: &dra::ResourceClaimSpec) -> Option<Arc<str>> {
    let config: Vec<(String, &serde_json::Value)> = spec
        .devices
        .iter()
        .flat_map(|d| d.config.iter().flatten())
        .filter_map(|c| c.opaque.as_ref())
        .map(|o| (o.driver.clone(), &o.parameters.0))
        .collect();
    super::compute_domain::channel_domain(&config)
}

fn constraints(spec: &dra::ResourceClaimSpec) -> Box<[DeviceConstraint]> {
    spec.devices
        .iter()
        .flat_map(|d| d.constraints.iter().flatten())
        .filter_map(|c| {
            let (attribute, distinct) = match (&c.match_attribute, &c.distinct_attribute) {
                (Some(a), _) => (a, false),
                (None, Some(a)) => (a, true),
                (None, None) => return None,
            };
            Some(DeviceConstraint {
                requests: c.requests.iter().flatten().map(|r| Sym::new(r)).collect(),
                attribute: Sym::new(attribute),
                distinct,
            })
        })
        .collect()
}

/// The node an allocation is limited to: `matchFields metadata.name In [node]`.
fn allocated_node(selector: Option<&NodeSelector>) -> Option<Sym> {
    let term = selector?.node_selector_terms.first()?;
    let field = term.match_fields.iter().flatten().find(|f| f.key == "metadata.name" && f.operator == "In")?;
    field.values.as_ref()?.first().map(|v| Sym::new(v))
}

pub fn resource_claim(c: &dra::ResourceClaim) -> Result<ResourceClaim> {
    let name = named(c.metadata.name.as_deref(), "resourceclaim")?;
    let namespace = c.metadata.namespace.as_deref().unwrap_or("default");
    let requests = requests(&c.spec).map_err(|e| format!("resourceclaim {namespace}/{name}: {e}"))?;
    let status = c.status.as_ref();
    let allocation = status.and_then(|s| s.allocation.as_ref());
    let allocated = allocation
        .and_then(|a| a.devices.as_ref())
        .into_iter()
        .flat_map(|d| d.results.iter().flatten())
        .map(|r| AllocatedDevice {
            request: Sym::new(&r.request),
            driver: Sym::new(&r.driver),
            pool: Sym::new(&r.pool),
            device: Sym::new(&r.device),
            admin_access: r.admin_access.unwrap_or(false),
        })
        .collect();
    let owner_pod = super::controlling_pod(c.metadata.owner_references.as_ref()).map(|o| Arc::from(o.name.as_str()));
    Ok(ResourceClaim {
        namespace: Sym::new(namespace),
        name: name.into(),
        template: false,
        requests,
        constraints: constraints(&c.spec),
        allocated,
        allocated_node: allocation.and_then(|a| allocated_node(a.node_selector.as_ref())),
        reserved_for: status
            .and_then(|s| s.reserved_for.as_ref())
            .into_iter()
            .flatten()
            .filter(|r| r.resource == "pods" && r.api_group.as_deref().unwrap_or("").is_empty())
            .map(|r| Arc::from(r.name.as_str()))
            .collect(),
        owner_pod,
        compute_domain: compute_domain(&c.spec),
        unmodelled: claim_unmodelled(&c.spec),
        deleting: c.metadata.deletion_timestamp.is_some(),
        created: c.metadata.creation_timestamp.as_ref().map_or(0, ts),
    })
}

pub fn resource_claim_template(t: &dra::ResourceClaimTemplate) -> Result<ResourceClaim> {
    let name = named(t.metadata.name.as_deref(), "resourceclaimtemplate")?;
    let namespace = t.metadata.namespace.as_deref().unwrap_or("default");
    let requests = requests(&t.spec.spec).map_err(|e| format!("resourceclaimtemplate {namespace}/{name}: {e}"))?;
    Ok(ResourceClaim {
        namespace: Sym::new(namespace),
        name: name.into(),
        template: true,
        requests,
        constraints: constraints(&t.spec.spec),
        allocated: Box::new([]),
        allocated_node: None,
        reserved_for: Box::new([]),
        owner_pod: None,
        compute_domain: compute_domain(&t.spec.spec),
        unmodelled: claim_unmodelled(&t.spec.spec),
        deleting: t.metadata.deletion_timestamp.is_some(),
        created: t.metadata.creation_timestamp.as_ref().map_or(0, ts),
    })
}

/// A pod's `spec.resourceClaims`, with the claims made for it from templates.
pub fn pod_claims(spec: &PodSpec, status: Option<&PodStatus>) -> Box<[PodClaim]> {
    let generated = |name: &str| {
        status?
            .resource_claim_statuses
            .iter()
            .flatten()
            .find(|s| s.name == name)
            .and_then(|s| s.resource_claim_name.as_deref())
            .map(Arc::from)
    };
    spec.resource_claims
        .iter()
        .flatten()
        .filter_map(|c| {
            let source = match (&c.resource_claim_name, &c.resource_claim_template_name) {
                (Some(n), _) => ClaimSource::Claim(n.as_str().into()),
                (None, Some(t)) => ClaimSource::Template(t.as_str().into()),
                (None, None) => return None,
            };
            Some(PodClaim { name: Sym::new(&c.name), source, generated: generated(&c.name) })
        })
        .collect()
}

/// The claim the scheduler made for the extended resources a DeviceClass
/// serves through DRA on the pod's node (KEP-5004), as one more of the
/// pod's claims; those resources leave `requests`, since the claim's
/// devices hold them and no device plugin does. None where it has none.
pub fn extended_resource_claim(requests: &mut Resources, status: Option<&PodStatus>) -> Option<PodClaim> {
    let served = status?.extended_resource_claim_status.as_ref().filter(|s| !s.resource_claim_name.is_empty())?;
    let mut names: Vec<&str> = served.request_mappings.iter().map(|m| m.resource_name.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    let (through_dra, rest) = requests.split_off(&names);
    *requests = rest;
    Some(PodClaim {
        name: Sym::new(&names.join(",")),
        source: ClaimSource::ExtendedResources(through_dra),
        generated: Some(served.resource_claim_name.as_str().into()),
    })
}
