//! The kinds of object kgpu reads, in one table: the watchers, the
//! kubectl-dump loader, `kgpu scenario apply` and the scenario export all
//! take a kind's group, version, plural, scope, feed and conversion from here.

use serde_json::Value;

use crate::model::{
    DraKey, DraKind, DraObject, DriverPolicyKind, EventKey, Feed, GangKey, GangKind, Object, ObjectKey, PodKey,
    QueueKey, QueueKind, StorageKey, StorageKind, StorageObject, Sym,
};

use super::kube::convert;

/// One kind of object and how it becomes a model record.
pub struct Kind {
    pub feed: Feed,
    pub group: &'static str,
    /// The version read where the server serves it.
    pub version: &'static str,
    /// Older versions of the same kind, newest first, read where the server
    /// does not serve `version` (DRA on Kubernetes 1.32 and 1.33).
    pub older: &'static [&'static str],
    pub kind: &'static str,
    pub plural: &'static str,
    pub namespaced: bool,
    /// An API the server may not serve (a custom resource, or DRA on a
    /// cluster before 1.34): what to install or enable when it is missing.
    pub crd: Option<&'static str>,
    /// The object as JSON (a dump, a dynamic object) → a model record.
    pub convert: fn(&Value) -> convert::Result<Object>,
}

const KUEUE: &str = "the Kueue CRDs (kueue.x-k8s.io/v1beta2)";
const VOLCANO: &str = "the Volcano CRDs (scheduling.volcano.sh/v1beta1)";
const GPU_OPERATOR: &str = "the NVIDIA GPU Operator CRDs (nvidia.com)";

fn typed<T: serde::de::DeserializeOwned>(v: &Value, f: fn(&T) -> convert::Result<Object>) -> convert::Result<Object> {
    serde_json::from_value(v.clone()).map_err(|e| e.to_string()).and_then(|o| f(&o))
}

/// A DRA object of any version kgpu reads, through v1's conversion.
fn dra<T: serde::de::DeserializeOwned>(v: &Value, f: fn(&T) -> convert::Result<Object>) -> convert::Result<Object> {
    serde_json::from_value(convert::dra_as_v1(v)?).map_err(|e| e.to_string()).and_then(|o| f(&o))
}

pub const NODE: Kind = Kind {
    feed: Feed::Nodes,
    group: "",
    version: "v1",
    older: &[],
    kind: "Node",
    plural: "nodes",
    namespaced: false,
    crd: None,
    convert: |v| typed(v, |n| convert::node(n).map(Object::Node)),
};
pub const POD: Kind = Kind {
    feed: Feed::Pods,
    group: "",
    version: "v1",
    older: &[],
    kind: "Pod",
    plural: "pods",
    namespaced: true,
    crd: None,
    convert: |v| typed(v, |p| convert::pod(p).map(Object::Pod)),
};
pub const EVENT: Kind = Kind {
    feed: Feed::Events,
    group: "",
    version: "v1",
    older: &[],
    kind: "Event",
    plural: "events",
    namespaced: true,
    crd: None,
    convert: |v| typed(v, |e| convert::event(e).map(Object::Event)),
};
pub const WORKLOAD: Kind = Kind {
    feed: Feed::Workloads,
    group: "kueue.x-k8s.io",
    version: "v1beta2",
    older: &[],
    kind: "Workload",
    plural: "workloads",
    namespaced: true,
    crd: Some(KUEUE),
    convert: |v| convert::workload(v).map(Object::Gang),
};
pub const CLUSTER_QUEUE: Kind = Kind {
    feed: Feed::ClusterQueues,
    group: "kueue.x-k8s.io",
    version: "v1beta2",
    older: &[],
    kind: "ClusterQueue",
    plural: "clusterqueues",
    namespaced: false,
    crd: Some(KUEUE),
    convert: |v| convert::cluster_queue(v).map(Object::Queue),
};
pub const LOCAL_QUEUE: Kind = Kind {
    feed: Feed::LocalQueues,
    group: "kueue.x-k8s.io",
    version: "v1beta2",
    older: &[],
    kind: "LocalQueue",
    plural: "localqueues",
    namespaced: true,
    crd: Some(KUEUE),
    convert: |v| convert::local_queue(v).map(Object::Queue),
};
pub const RESOURCE_FLAVOR: Kind = Kind {
    feed: Feed::ResourceFlavors,
    group: "kueue.x-k8s.io",
    version: "v1beta2",
    older: &[],
    kind: "ResourceFlavor",
    plural: "resourceflavors",
    namespaced: false,
    crd: Some(KUEUE),
    convert: |v| convert::resource_flavor(v).map(Object::Flavor),
};
pub const POD_GROUP: Kind = Kind {
    feed: Feed::PodGroups,
    group: "scheduling.volcano.sh",
    version: "v1beta1",
    older: &[],
    kind: "PodGroup",
    plural: "podgroups",
    namespaced: true,
    crd: Some(VOLCANO),
    convert: |v| convert::podgroup(v).map(Object::Gang),
};
pub const VOLCANO_QUEUE: Kind = Kind {
    feed: Feed::VolcanoQueues,
    group: "scheduling.volcano.sh",
    version: "v1beta1",
    older: &[],
    kind: "Queue",
    plural: "queues",
    namespaced: false,
    crd: Some(VOLCANO),
    convert: |v| convert::volcano_queue(v).map(Object::Queue),
};

/// Every kind kgpu reads from the API server (the agents' feed aside).
pub const CLUSTER_POLICY: Kind = Kind {
    feed: Feed::ClusterPolicies,
    group: "nvidia.com",
    version: "v1",
    older: &[],
    kind: "ClusterPolicy",
    plural: "clusterpolicies",
    namespaced: false,
    crd: Some(GPU_OPERATOR),
    convert: |v| convert::cluster_policy(v).map(Object::DriverPolicy),
};
pub const NVIDIA_DRIVER: Kind = Kind {
    feed: Feed::NvidiaDrivers,
    group: "nvidia.com",
    version: "v1alpha1",
    older: &[],
    kind: "NVIDIADriver",
    plural: "nvidiadrivers",
    namespaced: false,
    crd: Some(GPU_OPERATOR),
    convert: |v| convert::nvidia_driver(v).map(Object::DriverPolicy),
};
const DRA: &str = "the DRA API (resource.k8s.io v1 from Kubernetes 1.34; v1beta2 or v1beta1 on 1.32-1.33, where it is off unless the API server's --runtime-config enables it)";
const DRA_OLDER: &[&str] = &["v1beta2", "v1beta1"];
pub const RESOURCE_SLICE: Kind = Kind {
    feed: Feed::ResourceSlices,
    group: "resource.k8s.io",
    version: "v1",
    older: DRA_OLDER,
    kind: "ResourceSlice",
    plural: "resourceslices",
    namespaced: false,
    crd: Some(DRA),
    convert: |v| dra(v, |s| convert::resource_slice(s).map(|s| Object::Dra(DraObject::Slice(s)))),
};
pub const DEVICE_CLASS: Kind = Kind {
    feed: Feed::DeviceClasses,
    group: "resource.k8s.io",
    version: "v1",
    older: DRA_OLDER,
    kind: "DeviceClass",
    plural: "deviceclasses",
    namespaced: false,
    crd: Some(DRA),
    convert: |v| dra(v, |c| convert::device_class(c).map(|c| Object::Dra(DraObject::Class(c)))),
};
pub const RESOURCE_CLAIM: Kind = Kind {
    feed: Feed::ResourceClaims,
    group: "resource.k8s.io",
    version: "v1",
    older: DRA_OLDER,
    kind: "ResourceClaim",
    plural: "resourceclaims",
    namespaced: true,
    crd: Some(DRA),
    convert: |v| dra(v, |c| convert::resource_claim(c).map(|c| Object::Dra(DraObject::Claim(c)))),
};
pub const RESOURCE_CLAIM_TEMPLATE: Kind = Kind {
    feed: Feed::ResourceClaimTemplates,
    group: "resource.k8s.io",
    version: "v1",
    older: DRA_OLDER,
    kind: "ResourceClaimTemplate",
    plural: "resourceclaimtemplates",
    namespaced: true,
    crd: Some(DRA),
    convert: |v| dra(v, |t| convert::resource_claim_template(t).map(|t| Object::Dra(DraObject::Claim(t)))),
};
pub const COMPUTE_DOMAIN: Kind = Kind {
    feed: Feed::ComputeDomains,
    group: "resource.nvidia.com",
    version: "v1beta1",
    older: &[],
    kind: "ComputeDomain",
    plural: "computedomains",
    namespaced: true,
    crd: Some("the CRDs of NVIDIA's DRA Driver for GPUs (resource.nvidia.com/v1beta1)"),
    convert: |v| convert::compute_domain(v).map(|d| Object::Dra(DraObject::Domain(d))),
};
pub const PERSISTENT_VOLUME_CLAIM: Kind = Kind {
    feed: Feed::PersistentVolumeClaims,
    group: "",
    version: "v1",
    older: &[],
    kind: "PersistentVolumeClaim",
    plural: "persistentvolumeclaims",
    namespaced: true,
    crd: None,
    convert: |v| typed(v, |c| convert::volume_claim(c).map(|c| Object::Storage(StorageObject::Claim(c)))),
};
pub const PERSISTENT_VOLUME: Kind = Kind {
    feed: Feed::PersistentVolumes,
    group: "",
    version: "v1",
    older: &[],
    kind: "PersistentVolume",
    plural: "persistentvolumes",
    namespaced: false,
    crd: None,
    convert: |v| typed(v, |p| convert::persistent_volume(p).map(|p| Object::Storage(StorageObject::Volume(p)))),
};
pub const STORAGE_CLASS: Kind = Kind {
    feed: Feed::StorageClasses,
    group: "storage.k8s.io",
    version: "v1",
    older: &[],
    kind: "StorageClass",
    plural: "storageclasses",
    namespaced: false,
    crd: None,
    convert: |v| typed(v, |c| convert::storage_class(c).map(|c| Object::Storage(StorageObject::Class(c)))),
};
pub const NAMESPACE: Kind = Kind {
    feed: Feed::Namespaces,
    group: "",
    version: "v1",
    older: &[],
    kind: "Namespace",
    plural: "namespaces",
    namespaced: false,
    crd: None,
    convert: |v| typed(v, |n| convert::namespace(n).map(Object::Namespace)),
};
pub const KINDS: [&Kind; 20] = [
    &NODE,
    &POD,
    &EVENT,
    &WORKLOAD,
    &CLUSTER_QUEUE,
    &LOCAL_QUEUE,
    &RESOURCE_FLAVOR,
    &POD_GROUP,
    &VOLCANO_QUEUE,
    &CLUSTER_POLICY,
    &NVIDIA_DRIVER,
    &RESOURCE_SLICE,
    &DEVICE_CLASS,
    &RESOURCE_CLAIM,
    &RESOURCE_CLAIM_TEMPLATE,
    &COMPUTE_DOMAIN,
    &PERSISTENT_VOLUME_CLAIM,
    &PERSISTENT_VOLUME,
    &STORAGE_CLASS,
    &NAMESPACE,
];

impl Kind {
    /// `kueue.x-k8s.io/v1beta2`, or `v1` for the core group.
    pub fn api_version(&self) -> String {
        self.api_version_at(self.version)
    }

    /// `resource.k8s.io/v1beta1`: the kind's group at `version`.
    pub fn api_version_at(&self, version: &str) -> String {
        if self.group.is_empty() { version.to_string() } else { format!("{}/{version}", self.group) }
    }

    /// The versions to ask for, preferred first.
    pub fn versions(&self) -> impl Iterator<Item = &'static str> + use<> {
        std::iter::once(self.version).chain(self.older.iter().copied())
    }

    /// `workloads.kueue.x-k8s.io`, or `pods`: the resource as kubectl names it.
    pub fn resource(&self) -> String {
        if self.group.is_empty() { self.plural.to_string() } else { format!("{}.{}", self.plural, self.group) }
    }

    /// Why the server answered 404 for this kind.
    pub fn missing(&self) -> String {
        let what = self.crd.unwrap_or("its API");
        if self.group == RESOURCE_SLICE.group {
            format!("{} is not served by this cluster in any version kgpu reads: {what}", self.resource())
        } else {
            format!("{what} are not installed in this cluster ({})", self.resource())
        }
    }

    /// The model's key of an object of this kind.
    pub fn key(&self, namespace: Option<&str>, name: &str) -> ObjectKey {
        let ns = || Sym::new(namespace.unwrap_or("default"));
        let gang = |kind| ObjectKey::Gang(GangKey { kind, namespace: ns(), name: name.into() });
        let queue = |kind, namespace| ObjectKey::Queue(QueueKey { kind, namespace, name: Sym::new(name) });
        let dra = |kind, namespace| ObjectKey::Dra(DraKey { kind, namespace, name: name.into() });
        let storage = |kind, namespace| ObjectKey::Storage(StorageKey { kind, namespace, name: name.into() });
        match self.feed {
            Feed::Nodes => ObjectKey::Node(Sym::new(name)),
            Feed::Pods => ObjectKey::Pod(PodKey::new(namespace.unwrap_or("default"), name)),
            Feed::Events => {
                ObjectKey::Event(EventKey { namespace: Sym::new(namespace.unwrap_or("")), name: name.into() })
            }
            Feed::Workloads => gang(GangKind::KueueWorkload),
            Feed::PodGroups => gang(GangKind::VolcanoPodGroup),
            Feed::ClusterQueues => queue(QueueKind::ClusterQueue, None),
            Feed::LocalQueues => queue(QueueKind::LocalQueue, Some(ns())),
            Feed::VolcanoQueues => queue(QueueKind::VolcanoQueue, None),
            Feed::ResourceFlavors => ObjectKey::Flavor(Sym::new(name)),
            Feed::Agents => ObjectKey::Devices(Sym::new(name)),
            Feed::DcgmExporter => ObjectKey::Usage(crate::model::UsageSource::DcgmExporter, Sym::new(name)),
            Feed::ClusterPolicies => ObjectKey::DriverPolicy(DriverPolicyKind::ClusterPolicy, Sym::new(name)),
            Feed::NvidiaDrivers => ObjectKey::DriverPolicy(DriverPolicyKind::NvidiaDriver, Sym::new(name)),
            Feed::ResourceSlices => dra(DraKind::ResourceSlice, None),
            Feed::DeviceClasses => dra(DraKind::DeviceClass, None),
            Feed::ResourceClaims => dra(DraKind::ResourceClaim, Some(ns())),
            Feed::ResourceClaimTemplates => dra(DraKind::ResourceClaimTemplate, Some(ns())),
            Feed::ComputeDomains => dra(DraKind::ComputeDomain, Some(ns())),
            Feed::PersistentVolumeClaims => storage(StorageKind::Claim, Some(ns())),
            Feed::PersistentVolumes => storage(StorageKind::Volume, None),
            Feed::StorageClasses => storage(StorageKind::Class, None),
            Feed::Namespaces => ObjectKey::Namespace(Sym::new(name)),
        }
    }
}

/// The kind of a manifest's `apiVersion` group and `kind` (Volcano's old
/// `scheduling.incubator.k8s.io` PodGroups included).
pub fn find(group: &str, kind: &str) -> Option<&'static Kind> {
    let group = if group == "scheduling.incubator.k8s.io" && kind == "PodGroup" { POD_GROUP.group } else { group };
    KINDS.into_iter().find(|k| k.group == group && k.kind == kind)
}

/// The kind behind a feed.
pub fn of_feed(feed: Feed) -> Option<&'static Kind> {
    KINDS.into_iter().find(|k| k.feed == feed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_feed_of_the_api_server_has_one_kind() {
        for feed in crate::model::Feed::ALL.iter().filter(|f| !matches!(f, Feed::Agents | Feed::DcgmExporter)) {
            assert_eq!(KINDS.iter().filter(|k| k.feed == *feed).count(), 1, "{feed:?}");
        }
        assert_eq!(find("scheduling.incubator.k8s.io", "PodGroup").map(|k| k.feed), Some(Feed::PodGroups));
        assert_eq!(WORKLOAD.resource(), "workloads.kueue.x-k8s.io");
        assert_eq!(POD.api_version(), "v1");
        assert!(find("apps", "Deployment").is_none());
    }

    /// A dump of a 1.32 cluster (`kubectl get resourceslices -o yaml`) reads
    /// as a 1.34 one: the version is the object's own.
    #[test]
    fn a_dra_object_of_an_older_version_converts_by_its_own_api_version() {
        let slice = |version: &str, device: Value| {
            serde_json::json!({"apiVersion": format!("resource.k8s.io/{version}"), "kind": "ResourceSlice",
                "metadata": {"name": "n-gpu"},
                "spec": {"driver": "gpu.nvidia.com", "nodeName": "n", "pool": {"name": "n", "generation": 1, "resourceSliceCount": 1},
                    "devices": [device]}})
        };
        let fields =
            serde_json::json!({"attributes": {"type": {"string": "gpu"}}, "capacity": {"memory": {"value": "80Gi"}}});
        let v1 = (RESOURCE_SLICE.convert)(&slice(
            "v1",
            serde_json::json!({"name": "gpu-0", "attributes": fields["attributes"], "capacity": fields["capacity"]}),
        ));
        let v1beta1 =
            (RESOURCE_SLICE.convert)(&slice("v1beta1", serde_json::json!({"name": "gpu-0", "basic": fields})));
        let (Ok(Object::Dra(DraObject::Slice(v1))), Ok(Object::Dra(DraObject::Slice(v1beta1)))) = (v1, v1beta1) else {
            panic!("both convert")
        };
        assert_eq!(v1beta1.devices[0].attributes.len(), 1);
        assert_eq!(v1, v1beta1);
        assert_eq!(RESOURCE_SLICE.versions().collect::<Vec<_>>(), ["v1", "v1beta2", "v1beta1"]);
        assert_eq!(NODE.versions().collect::<Vec<_>>(), ["v1"]);
    }
}
