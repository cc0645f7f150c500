//! The GPU Operator's custom resources (raw JSON) → model records: what its
//! ClusterPolicy and NVIDIADrivers ask the fleet's driver to be.

use serde_json::Value;

use crate::model::node::labels_from;
use crate::model::{DriverPolicy, DriverPolicyKind, DriverVersion, Sym, UpgradePolicy};

use super::Result;

fn name(v: &Value) -> Result<&str> {
    v.pointer("/metadata/name").and_then(Value::as_str).ok_or_else(|| "object without metadata.name".to_string())
}

/// A version as the operator's image tag has it (`570.124.06`); a digest or
/// an unset field is no version kgpu can plan to.
fn version(v: Option<&Value>) -> Option<DriverVersion> {
    v.and_then(Value::as_str).and_then(DriverVersion::parse)
}

/// `nvidia.com/v1` ClusterPolicy: `spec.driver`.
pub fn cluster_policy(v: &Value) -> Result<DriverPolicy> {
    let name = name(v)?;
    let driver = v.pointer("/spec/driver");
    let flag = |key: &str, default: bool| driver.and_then(|d| d.get(key)).and_then(Value::as_bool).unwrap_or(default);
    Ok(DriverPolicy {
        kind: DriverPolicyKind::ClusterPolicy,
        name: Sym::new(name),
        version: version(driver.and_then(|d| d.get("version"))),
        enabled: flag("enabled", true),
        defers_to_nvidia_drivers: flag("useNvidiaDriverCRD", false),
        node_selector: Default::default(),
        upgrade: driver.and_then(|d| d.get("upgradePolicy")).map(upgrade_policy),
    })
}

/// `nvidia.com/v1alpha1` NVIDIADriver: `spec.version` for the nodes its
/// `spec.nodeSelector` picks.
pub fn nvidia_driver(v: &Value) -> Result<DriverPolicy> {
    let name = name(v)?;
    let selector = v.pointer("/spec/nodeSelector").and_then(Value::as_object);
    let pairs: Vec<(&str, &str)> =
        selector.into_iter().flatten().filter_map(|(k, v)| Some((k.as_str(), v.as_str()?))).collect();
    Ok(DriverPolicy {
        kind: DriverPolicyKind::NvidiaDriver,
        name: Sym::new(name),
        version: version(v.pointer("/spec/version")),
        enabled: true,
        defers_to_nvidia_drivers: false,
        node_selector: labels_from(pairs),
        upgrade: v.pointer("/spec/upgradePolicy").map(upgrade_policy),
    })
}

/// k8s-operator-libs' `DriverUpgradePolicySpec`; a field of the wrong type
/// reads as unset (the operator's default), never as a number kgpu made up.
fn upgrade_policy(v: &Value) -> UpgradePolicy {
    let max_unavailable = match v.get("maxUnavailable") {
        Some(Value::Number(n)) => n.as_u64().map(|n| n.to_string()),
        Some(Value::String(s)) => Some(s.trim().to_string()),
        _ => None,
    };
    UpgradePolicy {
        auto_upgrade: v.get("autoUpgrade").and_then(Value::as_bool).unwrap_or(false),
        max_parallel: v.get("maxParallelUpgrades").and_then(Value::as_u64).and_then(|n| u32::try_from(n).ok()),
        max_unavailable,
        drain: v.pointer("/drain/enable").and_then(Value::as_bool).unwrap_or(false),
        drain_timeout_seconds: v.pointer("/drain/timeoutSeconds").and_then(Value::as_u64),
    }
}
