//! What the GPU Operator is told to install: the driver of its
//! ClusterPolicy (`spec.driver`), or, when that says
//! `useNvidiaDriverCRD: true`, one NVIDIADriver per node selector.

use super::{DriverVersion, Labels, Sym};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DriverPolicyKind {
    ClusterPolicy,
    NvidiaDriver,
}

impl DriverPolicyKind {
    pub fn kind_name(self) -> &'static str {
        match self {
            DriverPolicyKind::ClusterPolicy => "ClusterPolicy",
            DriverPolicyKind::NvidiaDriver => "NVIDIADriver",
        }
    }
}

/// One ClusterPolicy or NVIDIADriver, reduced to the driver it asks for.
#[derive(Clone, Debug, PartialEq)]
pub struct DriverPolicy {
    pub kind: DriverPolicyKind,
    pub name: Sym,
    /// `spec.driver.version` / `spec.version`: `None` when unset (the
    /// operator's default) or not a driver version (a digest).
    pub version: Option<DriverVersion>,
    /// `spec.driver.enabled` (ClusterPolicy; an NVIDIADriver always is).
    pub enabled: bool,
    /// ClusterPolicy `spec.driver.useNvidiaDriverCRD`: the NVIDIADrivers decide.
    pub defers_to_nvidia_drivers: bool,
    /// NVIDIADriver `spec.nodeSelector` (empty: every GPU node).
    pub node_selector: Labels,
    /// `spec.driver.upgradePolicy` (ClusterPolicy) / `spec.upgradePolicy`
    /// (NVIDIADriver); `None` when unset.
    pub upgrade: Option<UpgradePolicy>,
}

/// The fields of k8s-operator-libs' `DriverUpgradePolicySpec` that bound a
/// rollout, as written (unset fields take the operator's defaults).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UpgradePolicy {
    /// `autoUpgrade`: false, and the operator upgrades no node by itself.
    pub auto_upgrade: bool,
    /// `maxParallelUpgrades` (0: no limit).
    pub max_parallel: Option<u32>,
    /// `maxUnavailable`, an IntOrString: `2` or `25%`.
    pub max_unavailable: Option<String>,
    /// `drain.enable`: the operator drains nodes (else deletes GPU pods only).
    pub drain: bool,
    /// `drain.timeoutSeconds` (0: forever).
    pub drain_timeout_seconds: Option<u64>,
}

/// The driver version the GPU Operator is moving the fleet to, and what says so.
#[derive(Clone, Debug, PartialEq)]
pub struct DriverTarget {
    pub version: DriverVersion,
    /// `ClusterPolicy gpu-cluster-policy`, `NVIDIADriver default`.
    pub source: String,
    /// The rollout's bounds those objects set, if they set any.
    pub upgrade: Option<UpgradePolicy>,
}

/// The operator's target from its policies, as the operator reads them: the
/// ClusterPolicy's driver, unless it defers to NVIDIADrivers; then theirs,
/// when they agree on one version (several selectors with several versions
/// have no single target: `Err` says which).
pub fn target<'a>(policies: impl IntoIterator<Item = &'a DriverPolicy>) -> Result<Option<DriverTarget>, String> {
    let policies: Vec<&DriverPolicy> = policies.into_iter().collect();
    let cluster = policies.iter().find(|p| p.kind == DriverPolicyKind::ClusterPolicy);
    let from_crds = cluster.is_none_or(|c| c.defers_to_nvidia_drivers);
    if !from_crds {
        return Ok(cluster.filter(|c| c.enabled).and_then(|c| {
            c.version.clone().map(|version| DriverTarget {
                version,
                source: format!("ClusterPolicy {}", c.name),
                upgrade: c.upgrade.clone(),
            })
        }));
    }
    let drivers: Vec<&&DriverPolicy> =
        policies.iter().filter(|p| p.kind == DriverPolicyKind::NvidiaDriver && p.version.is_some()).collect();
    let mut versions: Vec<&DriverVersion> = drivers.iter().filter_map(|p| p.version.as_ref()).collect();
    versions.sort();
    versions.dedup();
    match versions.as_slice() {
        [] => Ok(None),
        [one] => {
            let names: Vec<&str> = drivers.iter().map(|p| p.name.as_str()).collect();
            Ok(Some(DriverTarget {
                version: (*one).clone(),
                source: format!("NVIDIADriver {}", names.join(", ")),
                upgrade: drivers.iter().find_map(|p| p.upgrade.clone()),
            }))
        }
        several => Err(format!(
            "NVIDIADrivers ask for {} versions ({}): plan each node pool with :plan VERSION",
            several.len(),
            drivers
                .iter()
                .filter_map(|p| p.version.as_ref().map(|v| format!("{} {v}", p.name)))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// The driver the operator installs on `node`: the ClusterPolicy's,
/// unless it defers to NVIDIADrivers; then the version of the one
/// NVIDIADriver whose nodeSelector the node matches (none, or several that
/// disagree: no target, as the operator itself would refuse to pick).
pub fn node_target<'a>(
    policies: impl IntoIterator<Item = &'a DriverPolicy>,
    node: &super::Node,
) -> Option<DriverVersion> {
    let policies: Vec<&DriverPolicy> = policies.into_iter().collect();
    let cluster = policies.iter().find(|p| p.kind == DriverPolicyKind::ClusterPolicy);
    if let Some(c) = cluster.filter(|c| !c.defers_to_nvidia_drivers) {
        return c.enabled.then(|| c.version.clone()).flatten();
    }
    let mut versions: Vec<&DriverVersion> = policies
        .iter()
        .filter(|p| p.kind == DriverPolicyKind::NvidiaDriver)
        .filter(|p| p.node_selector.iter().all(|(k, v)| node.label(k.as_str()) == Some(v)))
        .filter_map(|p| p.version.as_ref())
        .collect();
    versions.sort();
    versions.dedup();
    match versions.as_slice() {
        [one] => Some((*one).clone()),
        _ => None,
    }
}

/// What the upgrade waves go to: the version chosen (`:plan`,
/// `--target-driver`), else the operator's target.
#[derive(Clone, Debug, PartialEq)]
pub struct WaveTarget {
    pub version: Option<DriverVersion>,
    /// The operator object that asks for it; `None` when chosen (or none).
    pub from: Option<String>,
    /// Why the operator's objects give no single target, when they do not.
    pub problem: Option<String>,
    /// The operator's rollout bounds and the object that sets them.
    pub upgrade: Option<(UpgradePolicy, String)>,
}

pub fn wave_target<'a>(
    chosen: Option<&DriverVersion>,
    policies: impl IntoIterator<Item = &'a DriverPolicy>,
) -> WaveTarget {
    let (operator, problem) = match target(policies) {
        Ok(t) => (t, None),
        Err(why) => (None, Some(why)),
    };
    let upgrade = operator.as_ref().and_then(|t| Some((t.upgrade.clone()?, t.source.clone())));
    match (chosen, operator) {
        (Some(v), _) => WaveTarget { version: Some(v.clone()), from: None, problem, upgrade },
        (None, Some(t)) => WaveTarget { version: Some(t.version), from: Some(t.source), problem, upgrade },
        (None, None) => WaveTarget { version: None, from: None, problem, upgrade },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(kind: DriverPolicyKind, name: &str, version: Option<&str>) -> DriverPolicy {
        DriverPolicy {
            kind,
            name: Sym::new(name),
            version: version.and_then(DriverVersion::parse),
            enabled: true,
            defers_to_nvidia_drivers: false,
            node_selector: Labels::default(),
            upgrade: None,
        }
    }

    #[test]
    fn the_cluster_policy_decides_unless_it_defers_to_nvidia_drivers() {
        let cp = policy(DriverPolicyKind::ClusterPolicy, "gpu-cluster-policy", Some("570.124.06"));
        let nd = policy(DriverPolicyKind::NvidiaDriver, "default", Some("595.91.07"));
        let t = target([&cp, &nd]).unwrap().unwrap();
        assert_eq!(
            (t.version.to_string().as_str(), t.source.as_str()),
            ("570.124.06", "ClusterPolicy gpu-cluster-policy")
        );
        let deferring = DriverPolicy { defers_to_nvidia_drivers: true, ..cp.clone() };
        let t = target([&deferring, &nd]).unwrap().unwrap();
        assert_eq!(t.source, "NVIDIADriver default");
        // A disabled driver, or no version: no target.
        assert_eq!(target([&DriverPolicy { enabled: false, ..cp.clone() }]), Ok(None));
        assert_eq!(target([&policy(DriverPolicyKind::ClusterPolicy, "p", None)]), Ok(None));
        // Two NVIDIADrivers, two versions: no single target, said why.
        let other = policy(DriverPolicyKind::NvidiaDriver, "a100-pool", Some("550.54.15"));
        let err = target([&deferring, &nd, &other]).unwrap_err();
        assert!(err.contains("2 versions") && err.contains("a100-pool 550.54.15"), "{err}");
    }

    /// Per node, the NVIDIADriver whose nodeSelector matches it decides.
    #[test]
    fn each_node_is_judged_by_the_nvidia_driver_that_selects_it() {
        use crate::model::build::node;
        let deferring = DriverPolicy {
            defers_to_nvidia_drivers: true,
            ..policy(DriverPolicyKind::ClusterPolicy, "gpu-cluster-policy", Some("570.124.06"))
        };
        let pool = |name: &str, product: &str, version: &str| DriverPolicy {
            node_selector: crate::model::node::labels_from([("nvidia.com/gpu.product", product)]),
            ..policy(DriverPolicyKind::NvidiaDriver, name, Some(version))
        };
        let a100 = pool("a100", "NVIDIA-A100-SXM4-80GB", "535.104.05");
        let h100 = pool("h100", "NVIDIA-H100-80GB-HBM3", "550.54.15");
        let on_a100 = node("a").product("NVIDIA-A100-SXM4-80GB").build();
        let on_l40s = node("l").product("NVIDIA-L40S").build();
        let v = |n| node_target([&deferring, &a100, &h100], n).map(|v| v.to_string());
        assert_eq!(v(&on_a100).as_deref(), Some("535.104.05"));
        assert_eq!(v(&on_l40s), None, "no NVIDIADriver selects it");
        // Without deferring, the ClusterPolicy decides for every node.
        let cp = policy(DriverPolicyKind::ClusterPolicy, "p", Some("570.124.06"));
        assert_eq!(node_target([&cp, &a100], &on_a100).map(|v| v.to_string()).as_deref(), Some("570.124.06"));
    }
}
