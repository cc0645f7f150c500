//! The DRA API as older servers serve it, read as `resource.k8s.io/v1`.
//!
//! v1beta2 (Kubernetes 1.33; still served, off by default, later) has v1's
//! shape. v1beta1 (1.32 and 1.33) nests a device's fields under `basic`, and
//! a request's fields sit beside its name where v1 has them under `exactly`.
//! v1alpha3 (1.31, alpha) is not read: its devices and capacities differ more.

use serde_json::{Map, Value};

use super::Result;

/// The group every DRA kind belongs to.
const GROUP: &str = "resource.k8s.io";

/// `resource.k8s.io/v1`: the version the conversions read.
const V1: &str = "resource.k8s.io/v1";

/// The object in v1's shape, whatever DRA version it was written in (an
/// object without `apiVersion`, as list items come, is taken as v1).
pub fn as_v1(object: &Value) -> Result<Value> {
    let version = object.get("apiVersion").and_then(Value::as_str).unwrap_or(V1);
    let mut object = object.clone();
    match version.strip_prefix(GROUP).and_then(|v| v.strip_prefix('/')) {
        Some("v1" | "v1beta2") => {}
        Some("v1beta1") => from_v1beta1(&mut object),
        _ => return Err(format!("apiVersion {version} is not read (kgpu reads {GROUP} v1, v1beta2 and v1beta1)")),
    }
    if let Some(fields) = object.as_object_mut() {
        fields.insert("apiVersion".into(), V1.into());
    }
    Ok(object)
}

/// A v1beta1 ResourceSlice, ResourceClaim or ResourceClaimTemplate in v1's
/// shape (a DeviceClass is the same in both), told apart by where their
/// devices are: a slice's `spec.devices` is a list, a claim's requests are in
/// `spec.devices.requests`, a template's in `spec.spec.devices.requests`.
fn from_v1beta1(object: &mut Value) {
    let Some(spec) = object.get_mut("spec") else { return };
    if let Some(devices) = spec.get_mut("devices").and_then(Value::as_array_mut) {
        devices.iter_mut().filter_map(Value::as_object_mut).for_each(unnest_basic);
    }
    lift_requests(spec);
    if let Some(template_spec) = spec.get_mut("spec") {
        lift_requests(template_spec);
    }
}

/// v1beta1's `{name, basic: {attributes, capacity, …}}` → v1's
/// `{name, attributes, capacity, …}`.
fn unnest_basic(device: &mut Map<String, Value>) {
    if let Some(Value::Object(basic)) = device.remove("basic") {
        device.extend(basic);
    }
}

/// The fields v1 moved from a request into `exactly`.
const EXACT_FIELDS: [&str; 7] =
    ["deviceClassName", "selectors", "allocationMode", "count", "adminAccess", "tolerations", "capacity"];

/// v1beta1's `{name, deviceClassName, count, …}` → v1's `{name, exactly:
/// {deviceClassName, count, …}}`; a request of alternatives
/// (`firstAvailable`) has the same shape in both.
fn lift_requests(claim_spec: &mut Value) {
    let Some(requests) = claim_spec.pointer_mut("/devices/requests").and_then(Value::as_array_mut) else { return };
    for request in requests.iter_mut().filter_map(Value::as_object_mut) {
        if request.contains_key("exactly") || request.contains_key("firstAvailable") {
            continue;
        }
        let exactly: Map<String, Value> =
            EXACT_FIELDS.iter().filter_map(|f| request.remove(*f).map(|v| ((*f).to_string(), v))).collect();
        if !exactly.is_empty() {
            request.insert("exactly".into(), Value::Object(exactly));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_v1beta1_slice_claim_and_template_read_as_v1() {
        let slice = json!({"apiVersion": "resource.k8s.io/v1beta1", "kind": "ResourceSlice",
            "metadata": {"name": "n-gpu"},
            "spec": {"driver": "gpu.nvidia.com", "nodeName": "n", "pool": {"name": "n", "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": "gpu-0", "basic": {"attributes": {"productName": {"string": "NVIDIA H100 80GB HBM3"}},
                    "capacity": {"memory": {"value": "80Gi"}}}}]}});
        assert_eq!(
            as_v1(&slice).unwrap(),
            json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "n-gpu"},
                "spec": {"driver": "gpu.nvidia.com", "nodeName": "n", "pool": {"name": "n", "generation": 1, "resourceSliceCount": 1},
                    "devices": [{"name": "gpu-0", "attributes": {"productName": {"string": "NVIDIA H100 80GB HBM3"}},
                        "capacity": {"memory": {"value": "80Gi"}}}]}})
        );
        let requests = json!([
            {"name": "gpus", "deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 2,
                "selectors": [{"cel": {"expression": "true"}}]},
            {"name": "any", "firstAvailable": [{"name": "big", "deviceClassName": "gpu.nvidia.com"}]}
        ]);
        let lifted = json!([
            {"name": "gpus", "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 2,
                "selectors": [{"cel": {"expression": "true"}}]}},
            {"name": "any", "firstAvailable": [{"name": "big", "deviceClassName": "gpu.nvidia.com"}]}
        ]);
        let claim = json!({"apiVersion": "resource.k8s.io/v1beta1", "spec": {"devices": {"requests": requests}}});
        assert_eq!(as_v1(&claim).unwrap()["spec"]["devices"]["requests"], lifted);
        let template =
            json!({"apiVersion": "resource.k8s.io/v1beta1", "spec": {"spec": {"devices": {"requests": requests}}}});
        assert_eq!(as_v1(&template).unwrap()["spec"]["spec"]["devices"]["requests"], lifted);
    }

    #[test]
    fn v1_and_v1beta2_are_read_as_they_are_and_other_versions_are_refused() {
        let claim = json!({"spec": {"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "c"}}]}}});
        for version in [None, Some("resource.k8s.io/v1"), Some("resource.k8s.io/v1beta2")] {
            let mut written = claim.clone();
            if let Some(v) = version {
                written["apiVersion"] = v.into();
            }
            let mut expected = claim.clone();
            expected["apiVersion"] = V1.into();
            assert_eq!(as_v1(&written).unwrap(), expected, "{version:?}");
        }
        let alpha = json!({"apiVersion": "resource.k8s.io/v1alpha3", "spec": {}});
        assert!(as_v1(&alpha).unwrap_err().contains("v1alpha3 is not read"));
        assert!(as_v1(&json!({"apiVersion": "nvidia.com/v1", "spec": {}})).is_err());
    }
}
