//! DRA objects as manifests: DeviceClasses, ResourceSlices (as a driver
//! would publish them: a lab has no driver), ResourceClaimTemplates and
//! standalone ResourceClaims. Claims made from templates are not written:
//! the resource-claim controller makes them, and the scheduler allocates.

use serde_json::{Value, json};

use crate::model::dra::{Amount, AttributeValue, DeviceClass, ExactRequest, ResourceClaim, ResourceSlice};
use crate::model::{DraObject, Snapshot, quantity};
use crate::sources::kinds;

use super::meta;

fn selectors_json(selectors: &[Box<str>]) -> Value {
    Value::Array(selectors.iter().map(|s| json!({"cel": {"expression": &**s}})).collect())
}

/// `domain/name` → `name` in the driver's own domain, as drivers write them.
fn local<'a>(driver: &str, qualified: &'a str) -> &'a str {
    qualified.strip_prefix(driver).and_then(|r| r.strip_prefix('/')).unwrap_or(qualified)
}

fn slice_json(s: &ResourceSlice, scenario: &str) -> Value {
    let driver = s.driver.as_str();
    let devices: Vec<Value> = s
        .devices
        .iter()
        .map(|d| {
            let attributes: serde_json::Map<String, Value> = d
                .attributes
                .iter()
                .map(|(k, v)| {
                    let typed = match v {
                        AttributeValue::Int(i) => json!({"int": i}),
                        AttributeValue::Bool(b) => json!({"bool": b}),
                        AttributeValue::String(s) => json!({"string": &**s}),
                        AttributeValue::Version(s) => json!({"version": &**s}),
                    };
                    (local(driver, k.as_str()).to_string(), typed)
                })
                .collect();
            let capacity: serde_json::Map<String, Value> = d
                .capacity
                .iter()
                .map(|(k, v)| (local(driver, k.as_str()).to_string(), json!({"value": quantity::format_bytes(*v)})))
                .collect();
            let mut device = json!({"name": d.name.as_str(), "attributes": attributes, "capacity": capacity});
            if !d.taints.is_empty() {
                device["taints"] = Value::Array(
                    d.taints
                        .iter()
                        .map(|t| {
                            let mut m = json!({"key": t.key.as_str(), "effect": t.effect.as_str()});
                            if let Some(v) = t.value.clone() {
                                m["value"] = json!(v.as_str());
                            }
                            m
                        })
                        .collect(),
                );
            }
            device
        })
        .collect();
    let mut spec = json!({
        "driver": driver,
        "pool": {"name": s.pool.as_str(), "generation": s.pool_generation, "resourceSliceCount": s.slice_count},
        "devices": devices,
    });
    match s.node.clone() {
        Some(n) => spec["nodeName"] = json!(n.as_str()),
        None => spec["allNodes"] = json!(true),
    }
    json!({
        "apiVersion": kinds::RESOURCE_SLICE.api_version(),
        "kind": kinds::RESOURCE_SLICE.kind,
        "metadata": meta(&s.name, None, scenario, Vec::new(), Vec::new()),
        "spec": spec,
    })
}

fn class_json(c: &DeviceClass, scenario: &str) -> Value {
    json!({
        "apiVersion": kinds::DEVICE_CLASS.api_version(),
        "kind": kinds::DEVICE_CLASS.kind,
        "metadata": meta(&c.name, None, scenario, Vec::new(), Vec::new()),
        "spec": match &c.extended_resource {
            Some(r) => json!({"selectors": selectors_json(&c.selectors), "extendedResourceName": r.as_str()}),
            None => json!({"selectors": selectors_json(&c.selectors)}),
        },
    })
}

fn exact_json(e: &ExactRequest) -> Value {
    let mut m = json!({"deviceClassName": e.class.as_str()});
    match e.amount {
        Amount::Count(n) => m["count"] = json!(n),
        Amount::All => m["allocationMode"] = json!("All"),
    }
    if !e.selectors.is_empty() {
        m["selectors"] = selectors_json(&e.selectors);
    }
    if e.admin_access {
        m["adminAccess"] = json!(true);
    }
    m
}

/// A claim's `spec`: its requests, `exactly` or `firstAvailable`.
fn claim_spec(c: &ResourceClaim) -> Value {
    let requests: Vec<Value> = c
        .requests
        .iter()
        .map(|r| match &*r.alternatives {
            [(_, only)] => json!({"name": r.name.as_str(), "exactly": exact_json(only)}),
            many => {
                let subs: Vec<Value> = many
                    .iter()
                    .map(|(name, e)| {
                        let mut m = exact_json(e);
                        let sub = name.as_str().rsplit('/').next().unwrap_or(name.as_str());
                        m["name"] = json!(sub);
                        m
                    })
                    .collect();
                json!({"name": r.name.as_str(), "firstAvailable": subs})
            }
        })
        .collect();
    let mut devices = json!({"requests": requests});
    if !c.constraints.is_empty() {
        let constraints: Vec<Value> = c
            .constraints
            .iter()
            .map(|k| {
                let key = if k.distinct { "distinctAttribute" } else { "matchAttribute" };
                let mut m = json!({key: k.attribute.as_str()});
                if !k.requests.is_empty() {
                    m["requests"] = json!(k.requests.iter().map(|r| r.as_str()).collect::<Vec<_>>());
                }
                m
            })
            .collect();
        devices["constraints"] = Value::Array(constraints);
    }
    json!({"devices": devices})
}

fn claim_json(c: &ResourceClaim, scenario: &str) -> Value {
    let (kind, spec) = if c.template {
        (&kinds::RESOURCE_CLAIM_TEMPLATE, json!({"spec": claim_spec(c)}))
    } else {
        (&kinds::RESOURCE_CLAIM, claim_spec(c))
    };
    json!({
        "apiVersion": kind.api_version(),
        "kind": kind.kind,
        "metadata": meta(&c.name, Some(c.namespace.as_str()), scenario, Vec::new(), Vec::new()),
        "spec": spec,
    })
}

/// The snapshot's DRA objects a cluster needs to live the scenario.
pub(super) fn manifests(snap: &Snapshot, scenario: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let objects = || snap.dra.values().map(|o| &**o);
    out.extend(
        objects().filter_map(|o| if let DraObject::Class(c) = o { Some(class_json(c, scenario)) } else { None }),
    );
    out.extend(
        objects().filter_map(|o| if let DraObject::Slice(s) = o { Some(slice_json(s, scenario)) } else { None }),
    );
    out.extend(objects().filter_map(|o| match o {
        DraObject::Claim(c) if c.template || c.owner_pod.is_none() => Some(claim_json(c, scenario)),
        _ => None,
    }));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Object;
    use crate::model::Sym;
    use crate::model::dra::{DeviceConstraint, DeviceRequest};

    /// A template's constraints and admin access survive the way out and back.
    #[test]
    fn a_claim_template_is_written_as_it_is_read() {
        let exact = |admin_access| ExactRequest {
            class: Sym::new("gpu.nvidia.com"),
            selectors: Box::new(["device.attributes['gpu.nvidia.com'].type == 'gpu'".into()]),
            amount: Amount::Count(2),
            tolerates_taints: false,
            admin_access,
        };
        let request = |name: &str, admin| DeviceRequest {
            name: Sym::new(name),
            alternatives: Box::new([(Sym::new(name), exact(admin))]),
        };
        let template = ResourceClaim {
            constraints: Box::new([
                DeviceConstraint {
                    requests: Box::new([Sym::new("gpus")]),
                    attribute: Sym::new("resource.kubernetes.io/pcieRoot"),
                    distinct: false,
                },
                DeviceConstraint { requests: Box::new([]), attribute: Sym::new("gpu.nvidia.com/uuid"), distinct: true },
            ]),
            ..ResourceClaim::asking(
                Sym::new("ml"),
                "pair",
                true,
                Box::new([request("gpus", false), request("watch", true)]),
            )
        };
        let back = (kinds::RESOURCE_CLAIM_TEMPLATE.convert)(&claim_json(&template, "test"));
        let Ok(Object::Dra(DraObject::Claim(back))) = back else { panic!("{back:?}") };
        assert_eq!((back.requests, back.constraints), (template.requests, template.constraints));
    }
}
