//! DRA supply and claims on hand-built objects in the shapes NVIDIA's
//! driver publishes (a whole GPU beside its MIG devices, as on
//! kubernetes-sigs/dra-driver-nvidia-gpu#719).

use crate::analysis::index::Index;
use crate::analysis::testing::{node, pod, snapshot};
use crate::model::dra::{
    AllocatedDevice, Amount, AttributeValue, Device, DeviceClass, DeviceRequest, ExactRequest, ResourceClaim,
    ResourceSlice,
};
use crate::model::{ClaimSource, DraObject, ModelEvent, Object, PodClaim, Snapshot, Sym};

use super::cel::Selectors;
use super::claims::verdict;

fn device(name: &str, attrs: &[(&str, &str)]) -> Device {
    let mut attributes: Vec<(Sym, AttributeValue)> = attrs
        .iter()
        .map(|(k, v)| (Sym::new(&format!("gpu.nvidia.com/{k}")), AttributeValue::String((*v).into())))
        .collect();
    attributes.sort_by_key(|a| a.0.clone());
    Device {
        name: Sym::new(name),
        attributes: attributes.into_boxed_slice(),
        capacity: Box::new([]),
        taints: Box::new([]),
        consumes: Box::new([]),
    }
}

fn slice(node: &str, devices: Vec<Device>) -> DraObject {
    DraObject::Slice(ResourceSlice {
        name: format!("{node}-gpu.nvidia.com-abcde").into(),
        driver: Sym::new("gpu.nvidia.com"),
        pool: Sym::new(node),
        pool_generation: 1,
        slice_count: 1,
        node: Some(Sym::new(node)),
        devices: devices.into_boxed_slice(),
        shared_counters: Box::new([]),
    })
}

fn class(name: &str, kind: &str) -> DraObject {
    DraObject::Class(DeviceClass {
        name: name.into(),
        selectors: Box::new([format!(
            "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == '{kind}'"
        )
        .into()]),
    })
}

fn exact(class: &str, count: u64) -> ExactRequest {
    ExactRequest {
        class: Sym::new(class),
        selectors: Box::new([]),
        amount: Amount::Count(count),
        tolerates_taints: false,
    }
}

fn claim(name: &str, alternatives: Vec<ExactRequest>, allocated: &[(&str, &str)]) -> ResourceClaim {
    ResourceClaim {
        namespace: Sym::new("ml"),
        name: name.into(),
        template: false,
        requests: Box::new([DeviceRequest {
            name: Sym::new("gpu"),
            alternatives: alternatives
                .into_iter()
                .enumerate()
                .map(|(i, e)| (Sym::new(&format!("gpu/{i}")), e))
                .collect(),
        }]),
        allocated: allocated
            .iter()
            .map(|(node, device)| AllocatedDevice {
                request: Sym::new("gpu"),
                driver: Sym::new("gpu.nvidia.com"),
                pool: Sym::new(node),
                device: Sym::new(device),
            })
            .collect(),
        allocated_node: allocated.first().map(|(n, _)| Sym::new(n)),
        reserved_for: Box::new([]),
        owner_pod: None,
        deleting: false,
        created: 0,
    }
}

/// a: GPU U0 whole and as a 1g.10gb MIG device (allocated to `held`);
/// b: one whole GPU U1, free.
fn cluster(pending: ResourceClaim) -> Snapshot {
    let mut waiting = pod("waiting").ns("ml").build();
    waiting.claims = Box::new([PodClaim {
        name: Sym::new("gpu"),
        source: ClaimSource::Claim(pending.name.clone()),
        generated: None,
    }]);
    let snap = snapshot(vec![node("a").build(), node("b").build()], vec![waiting], vec![], 0);
    let mut c = crate::model::Cluster::new(snap.source.clone());
    c.apply_all(snap.nodes.values().map(|n| ModelEvent::Upsert(Object::Node((**n).clone()))));
    c.apply_all(snap.pods.values().map(|p| ModelEvent::Upsert(Object::Pod((**p).clone()))));
    let objects = [
        slice(
            "a",
            vec![
                device("gpu-0", &[("type", "gpu"), ("uuid", "GPU-U0"), ("productName", "NVIDIA A100 80GB PCIe")]),
                device("gpu-0-mig-1g10gb-19-0", &[("type", "mig"), ("parentUUID", "GPU-U0"), ("profile", "1g.10gb")]),
            ],
        ),
        slice(
            "b",
            vec![device("gpu-0", &[("type", "gpu"), ("uuid", "GPU-U1"), ("productName", "NVIDIA A100 80GB PCIe")])],
        ),
        class("gpu.nvidia.com", "gpu"),
        class("mig.nvidia.com", "mig"),
        DraObject::Claim(claim("held", vec![exact("mig.nvidia.com", 1)], &[("a", "gpu-0-mig-1g10gb-19-0")])),
        DraObject::Claim(pending),
    ];
    c.apply_all(objects.into_iter().map(|o| ModelEvent::Upsert(Object::Dra(o))));
    c.snapshot()
}

#[test]
fn a_gpu_published_whole_and_as_mig_devices_counts_once_and_is_busy_while_a_slice_is_held() {
    let snap = cluster(claim("wants", vec![exact("gpu.nvidia.com", 1)], &[]));
    let index = Index::build(&snap, 0);
    let a = index.dra().gpus(&Sym::new("a")).unwrap();
    assert_eq!((a.published, a.allocated, a.tainted), (1, 1, 0));
    let waiting = snap.pods.values().find(|p| &*p.name == "waiting").unwrap();
    let v = verdict(&index, &mut Selectors::default(), waiting).unwrap();
    // Its whole GPU is not free on a (a slice of it is held); b's is.
    assert_eq!(v.nodes_fit, [Sym::new("b")]);
    assert_eq!(v.shortfalls.len(), 1);
    assert_eq!((v.shortfalls[0].matching, v.shortfalls[0].free), (1, 0));
    assert_eq!(v.gpus, 1);
    assert!(!v.blocks());
}

#[test]
fn first_available_alternatives_are_tried_in_order() {
    // Two whole GPUs fit nowhere; one MIG device would, but a's is held:
    // the second alternative (one whole GPU) is what b gives.
    let snap = cluster(claim("wants", vec![exact("gpu.nvidia.com", 2), exact("gpu.nvidia.com", 1)], &[]));
    let index = Index::build(&snap, 0);
    let waiting = snap.pods.values().find(|p| &*p.name == "waiting").unwrap();
    let v = verdict(&index, &mut Selectors::default(), waiting).unwrap();
    assert_eq!(v.nodes_fit, [Sym::new("b")]);
    // Nothing at all: a class that does not exist.
    let snap = cluster(claim("wants", vec![exact("h200.example.com", 1)], &[]));
    let index = Index::build(&snap, 0);
    let waiting = snap.pods.values().find(|p| &*p.name == "waiting").unwrap();
    let v = verdict(&index, &mut Selectors::default(), waiting).unwrap();
    assert!(v.blocks());
    assert_eq!(v.missing_classes, [Sym::new("h200.example.com")]);
}
