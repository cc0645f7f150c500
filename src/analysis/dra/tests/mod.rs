//! DRA supply and claims on hand-built objects in the shapes NVIDIA's
//! driver publishes (a whole GPU beside its MIG devices, as on
//! kubernetes-sigs/dra-driver-nvidia-gpu#719).

use std::sync::Arc;

use crate::analysis::index::Index;
use crate::analysis::testing::{node, pod, snapshot};
use crate::model::dra::{
    AllocatedDevice, Amount, AttributeValue, Device, DeviceClass, DeviceConstraint, DeviceRequest, ExactRequest,
    ResourceClaim, ResourceSlice,
};
use crate::model::{ClaimSource, DraObject, ModelEvent, Object, PodClaim, Snapshot, Sym};

use super::cel::Selectors;
use super::claims::{Together, verdict};

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
        unmodelled: Box::new([]),
    })
}

fn class(name: &str, kind: &str) -> DraObject {
    DraObject::Class(DeviceClass {
        name: name.into(),
        selectors: Box::new([format!(
            "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == '{kind}'"
        )
        .into()]),
        extended_resource: None,
    })
}

fn exact(class: &str, count: u64) -> ExactRequest {
    ExactRequest {
        class: Sym::new(class),
        selectors: Box::new([]),
        amount: Amount::Count(count),
        tolerates_taints: false,
        admin_access: false,
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
        constraints: Box::new([]),
        allocated: allocated
            .iter()
            .map(|(node, device)| AllocatedDevice {
                request: Sym::new("gpu"),
                driver: Sym::new("gpu.nvidia.com"),
                pool: Sym::new(node),
                device: Sym::new(device),
                admin_access: false,
            })
            .collect(),
        allocated_node: allocated.first().map(|(n, _)| Sym::new(n)),
        reserved_for: Box::new([]),
        owner_pod: None,
        compute_domain: None,
        unmodelled: Box::new([]),
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

/// A whole GPU on a PCIe root (`resource.kubernetes.io/pcieRoot`).
fn gpu_on_root(name: &str, uuid: &str, root: &str) -> Device {
    let mut d = device(name, &[("type", "gpu"), ("uuid", uuid)]);
    let mut attributes = d.attributes.to_vec();
    attributes.push((Sym::new("resource.kubernetes.io/pcieRoot"), AttributeValue::String(root.into())));
    d.attributes = attributes.into_boxed_slice();
    d
}

/// Nodes with their devices, the classes, claims already there, and a pod
/// waiting for `pending`.
fn world(slices: Vec<DraObject>, held: Vec<ResourceClaim>, pending: ResourceClaim) -> Snapshot {
    let mut waiting = pod("waiting").ns("ml").build();
    waiting.claims = Box::new([PodClaim {
        name: Sym::new("gpu"),
        source: ClaimSource::Claim(pending.name.clone()),
        generated: None,
    }]);
    let nodes: Vec<_> = slices
        .iter()
        .filter_map(|s| match s {
            DraObject::Slice(s) => s.node.clone(),
            _ => None,
        })
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .map(|n| node(n.as_str()).build())
        .collect();
    let snap = snapshot(nodes, vec![waiting], vec![], 0);
    let mut c = crate::model::Cluster::new(snap.source.clone());
    c.apply_all(snap.nodes.values().map(|n| ModelEvent::Upsert(Object::Node((**n).clone()))));
    c.apply_all(snap.pods.values().map(|p| ModelEvent::Upsert(Object::Pod((**p).clone()))));
    let objects = slices
        .into_iter()
        .chain([class("gpu.nvidia.com", "gpu"), class("mig.nvidia.com", "mig")])
        .chain(held.into_iter().map(DraObject::Claim))
        .chain([DraObject::Claim(pending)]);
    c.apply_all(objects.map(|o| ModelEvent::Upsert(Object::Dra(o))));
    c.snapshot()
}

fn judge(snap: &Snapshot) -> super::claims::ClaimsVerdict {
    let index = Index::build(snap, 0);
    let waiting = snap.pods.values().find(|p| &*p.name == "waiting").unwrap();
    verdict(&index, &mut Selectors::default(), waiting).unwrap()
}

/// A claim of several requests (each `exactly`), with constraints.
fn claim_of(requests: Vec<(&str, ExactRequest)>, constraints: Vec<DeviceConstraint>) -> ResourceClaim {
    let mut c = claim("wants", vec![exact("gpu.nvidia.com", 1)], &[]);
    c.requests = requests
        .into_iter()
        .map(|(name, e)| DeviceRequest { name: Sym::new(name), alternatives: Box::new([(Sym::new(name), e)]) })
        .collect();
    c.constraints = constraints.into_boxed_slice();
    c
}

fn with_selector(mut e: ExactRequest, cel: &str) -> ExactRequest {
    e.selectors = Box::new([cel.into()]);
    e
}

#[test]
fn a_later_request_makes_an_earlier_one_choose_again() {
    // Any GPU, then one on root 15: first fit gives gpu-0 (root 15) to the
    // first request and leaves the second nothing; the scheduler's search
    // goes back and gives the first gpu-1.
    let slices =
        vec![slice("a", vec![gpu_on_root("gpu-0", "U0", "pci0000:15"), gpu_on_root("gpu-1", "U1", "pci0000:b1")])];
    let near = with_selector(
        exact("gpu.nvidia.com", 1),
        "device.attributes['resource.kubernetes.io'].pcieRoot == 'pci0000:15'",
    );
    let v = judge(&world(slices, vec![], claim_of(vec![("any", exact("gpu.nvidia.com", 1)), ("near", near)], vec![])));
    assert_eq!(v.nodes_fit, [Sym::new("a")], "{v:?}");
}

#[test]
fn constraints_want_one_value_or_a_different_one_on_every_device() {
    let slices = || {
        vec![
            slice("split", vec![gpu_on_root("gpu-0", "U0", "pci0000:15"), gpu_on_root("gpu-1", "U1", "pci0000:b1")]),
            slice("same", vec![gpu_on_root("gpu-0", "U2", "pci0000:15"), gpu_on_root("gpu-1", "U3", "pci0000:15")]),
        ]
    };
    let root = Sym::new("resource.kubernetes.io/pcieRoot");
    let pair = |distinct| {
        claim_of(
            vec![("gpus", exact("gpu.nvidia.com", 2))],
            vec![DeviceConstraint { requests: Box::new([]), attribute: root.clone(), distinct }],
        )
    };
    let v = judge(&world(slices(), vec![], pair(false)));
    assert_eq!(v.nodes_fit, [Sym::new("same")]);
    assert_eq!(v.shortfalls.len(), 1);
    assert_eq!(v.shortfalls[0].node, Sym::new("split"));
    assert_eq!(v.shortfalls[0].together, Some(Together::Constraint { attribute: root.clone(), distinct: false }));
    let v = judge(&world(slices(), vec![], pair(true)));
    assert_eq!(v.nodes_fit, [Sym::new("split")]);
    assert_eq!(v.shortfalls[0].together, Some(Together::Constraint { attribute: root.clone(), distinct: true }));
    // A constraint on another request leaves this one alone; a device
    // without the attribute never satisfies one that applies.
    let mut other = pair(false);
    other.constraints[0].requests = Box::new([Sym::new("nic")]);
    assert_eq!(judge(&world(slices(), vec![], other)).nodes_fit.len(), 2);
    let mut no_attribute = pair(false);
    no_attribute.constraints[0].attribute = Sym::new("resource.kubernetes.io/numaNode");
    assert!(judge(&world(slices(), vec![], no_attribute)).nodes_fit.is_empty());
}

/// One H100 as NVIDIA's driver publishes it with partitions: the whole GPU
/// and its 1g.10gb and 3g.40gb partitions, drawing on one counter set of
/// memory slices (and multiprocessors); `held` partitions allocated.
fn partitioned(held: &[&str]) -> (Vec<DraObject>, Vec<ResourceClaim>) {
    let counters = |sm: u64, start: usize, size: usize| -> Box<[(Sym, u64)]> {
        std::iter::once((Sym::new("gpu.nvidia.com/multiprocessors"), sm))
            .chain((start..start + size).map(|i| (Sym::new(&format!("gpu.nvidia.com/memory-slice-{i}")), 1)))
            .collect()
    };
    let set = Sym::new("gpu-0-counter-set");
    let mut whole = device("gpu-0", &[("type", "gpu"), ("uuid", "U0")]);
    whole.consumes = Box::new([(set.clone(), counters(132, 0, 8))]);
    let mut devices = vec![whole];
    for (profile, sm, size, starts) in [("1g.10gb", 16, 1, vec![0, 1, 2, 3, 4, 5, 6]), ("3g.40gb", 60, 4, vec![0, 4])] {
        for start in starts {
            let name = format!("gpu-0-mig-{}-{start}", profile.replace('.', ""));
            let mut d = device(&name, &[("type", "mig"), ("parentUUID", "U0"), ("profile", profile)]);
            d.consumes = Box::new([(set.clone(), counters(sm, start, size))]);
            devices.push(d);
        }
    }
    let DraObject::Slice(mut s) = slice("m", devices) else { unreachable!() };
    s.shared_counters = Box::new([(set, counters(132, 0, 8))]);
    let held =
        held.iter().map(|d| claim(&format!("held-{d}"), vec![exact("mig.nvidia.com", 1)], &[("m", d)])).collect();
    (vec![DraObject::Slice(s)], held)
}

fn partitions(profile: &str, count: u64) -> ExactRequest {
    with_selector(
        exact("mig.nvidia.com", count),
        &format!("device.attributes['gpu.nvidia.com'].profile == '{profile}'"),
    )
}

#[test]
fn partitions_are_free_while_the_shared_counters_last() {
    // 1g.10gb at memory slice 0 is held: the 3g.40gb at 0 (slices 0-3) and
    // the whole GPU draw on it; the 3g.40gb at 4 does not.
    let (slices, held) = partitioned(&["gpu-0-mig-1g10gb-0"]);
    let index_snap = world(slices.clone(), held.clone(), claim_of(vec![("big", partitions("3g.40gb", 1))], vec![]));
    assert_eq!(judge(&index_snap).nodes_fit, [Sym::new("m")]);
    let index = Index::build(&index_snap, 0);
    let m = index.dra().gpus(&Sym::new("m")).unwrap();
    assert_eq!((m.published, m.allocated, m.whole_free), (1, 1, 0));
    // Two 3g.40gb: one is left alone.
    let v = judge(&world(slices.clone(), held.clone(), claim_of(vec![("big", partitions("3g.40gb", 2))], vec![])));
    assert_eq!((v.shortfalls[0].matching, v.shortfalls[0].free, v.shortfalls[0].together.clone()), (2, 1, None));
    // A 3g.40gb and four 1g.10gb: each fits alone (the 3g at 4; six 1g),
    // together the 3g takes slices 4-7 and leaves three 1g.
    let both = claim_of(vec![("big", partitions("3g.40gb", 1)), ("small", partitions("1g.10gb", 4))], vec![]);
    let v = judge(&world(slices.clone(), held.clone(), both));
    assert_eq!(v.shortfalls[0].together, Some(Together::Counters), "{v:?}");
    // Three 1g.10gb fit beside the 3g.
    let both = claim_of(vec![("big", partitions("3g.40gb", 1)), ("small", partitions("1g.10gb", 3))], vec![]);
    assert_eq!(judge(&world(slices, held, both)).nodes_fit, [Sym::new("m")]);
}

#[test]
fn admin_access_reaches_held_devices_and_holds_none() {
    // Both GPUs of a held; a monitoring claim with admin access gets them.
    let slices = vec![slice("a", vec![gpu_on_root("gpu-0", "U0", "r"), gpu_on_root("gpu-1", "U1", "r")])];
    let held = vec![claim("train", vec![exact("gpu.nvidia.com", 2)], &[("a", "gpu-0"), ("a", "gpu-1")])];
    let mut watch = exact("gpu.nvidia.com", 2);
    watch.admin_access = true;
    let v = judge(&world(slices.clone(), held.clone(), claim_of(vec![("gpus", watch.clone())], vec![])));
    assert_eq!(v.nodes_fit, [Sym::new("a")]);
    assert!(
        !judge(&world(slices.clone(), held, claim_of(vec![("gpus", exact("gpu.nvidia.com", 1))], vec![])))
            .nodes_fit
            .contains(&Sym::new("a"))
    );
    // An allocation with admin access leaves the GPUs free in the counts.
    let mut watching = claim("watch", vec![watch], &[("a", "gpu-0"), ("a", "gpu-1")]);
    watching.allocated.iter_mut().for_each(|a| a.admin_access = true);
    let snap = world(slices, vec![watching], claim_of(vec![("gpus", exact("gpu.nvidia.com", 2))], vec![]));
    let index = Index::build(&snap, 0);
    assert_eq!(index.dra().gpus(&Sym::new("a")).map(|g| (g.allocated, g.whole_free)), Some((0, 2)));
    assert_eq!(judge(&snap).nodes_fit, [Sym::new("a")]);
}

/// Two things the scheduler's allocator does that a reading of the API
/// would not guess (both found by the DRA oracle): a request for all
/// devices that meets one breaking the claim's constraint is an error that
/// ends the attempt, not a way that fails; and distinctAttribute compares a
/// device with the other requests' devices, and with its own request's last.
#[test]
fn all_meeting_a_constraint_aborts_and_distinct_compares_across_requests() {
    let root = Sym::new("resource.kubernetes.io/pcieRoot");
    let constraint = |distinct| vec![DeviceConstraint { requests: Box::new([]), attribute: root.clone(), distinct }];
    let same = || {
        vec![slice("same", vec![gpu_on_root("gpu-0", "U0", "pci0000:15"), gpu_on_root("gpu-1", "U1", "pci0000:15")])]
    };
    let mut all = exact("gpu.nvidia.com", 1);
    all.amount = Amount::All;
    let v = judge(&world(same(), vec![], claim_of(vec![("gpus", all)], constraint(true))));
    assert!(v.blocks() && v.nodes_fit.is_empty(), "{v:?}");
    let messages: Vec<&str> = v.aborted.iter().map(|a| a.message.as_str()).collect();
    assert_eq!(
        messages,
        [
            "claim ml/wants, request gpus: cannot add device gpu.nvidia.com/same/gpu-1 because a claim constraint would not be satisfied"
        ]
    );
    // Three GPUs on two roots, one request for three with distinct roots:
    // 15, b1, then 15 again is compared with b1 only, and the scheduler takes it.
    let three = vec![slice(
        "three",
        vec![
            gpu_on_root("gpu-0", "U0", "pci0000:15"),
            gpu_on_root("gpu-1", "U1", "pci0000:b1"),
            gpu_on_root("gpu-2", "U2", "pci0000:15"),
        ],
    )];
    let v =
        judge(&world(three.clone(), vec![], claim_of(vec![("gpus", exact("gpu.nvidia.com", 3))], constraint(true))));
    assert_eq!(v.nodes_fit, [Sym::new("three")]);
    // Across two requests the values are compared.
    let two = claim_of(vec![("a", exact("gpu.nvidia.com", 1)), ("b", exact("gpu.nvidia.com", 1))], constraint(true));
    assert_eq!(judge(&world(same(), vec![], two)).nodes_fit, Vec::<Sym>::new());
}

/// A shared claim serves at most 256 pods (`status.reservedFor`); the next
/// one waits, as the scheduler's PreFilter says: `resourceclaim in use`.
#[test]
fn a_shared_claim_reserved_for_256_pods_takes_no_more() {
    let reserved = |n: usize| {
        let mut c = claim("shared", vec![exact("gpu.nvidia.com", 1)], &[("b", "gpu-0")]);
        c.reserved_for = (0..n).map(|i| std::sync::Arc::from(format!("serve-{i}").as_str())).collect();
        c
    };
    let v = judge(&world(vec![slice("b", vec![gpu_on_root("gpu-0", "U1", "r")])], vec![], reserved(256)));
    assert_eq!(v.claims_full, ["shared"]);
    assert!(v.blocks());
    let v = judge(&world(vec![slice("b", vec![gpu_on_root("gpu-0", "U1", "r")])], vec![], reserved(255)));
    assert!(v.claims_full.is_empty() && !v.blocks(), "{v:?}");
    assert_eq!(v.allocated_on, Some(Sym::new("b")));
}

/// A gang whose placed members hold GPUs through claims: those GPUs are
/// what it holds idle while the rest cannot be placed.
#[test]
fn a_partly_placed_gang_holds_the_gpus_of_its_members_claims_idle() {
    use crate::model::build::podgroup;
    let mut placed = pod("train-0").ns("ml").on("a").running().group("train").build();
    placed.claims = Box::new([PodClaim {
        name: Sym::new("gpu"),
        source: ClaimSource::Claim("train-0-gpus".into()),
        generated: None,
    }]);
    let waiting = pod("train-1").ns("ml").group("train").build();
    let mut gang = podgroup("train", 2, 0).build();
    gang.namespace = Sym::new("ml");
    let snap = snapshot(vec![node("a").build()], vec![placed, waiting], vec![gang], 0);
    let mut c = crate::model::Cluster::new(snap.source.clone());
    c.apply_all(snap.nodes.values().map(|n| ModelEvent::Upsert(Object::Node((**n).clone()))));
    c.apply_all(snap.pods.values().map(|p| ModelEvent::Upsert(Object::Pod((**p).clone()))));
    c.apply_all(snap.gangs.values().map(|g| ModelEvent::Upsert(Object::Gang((**g).clone()))));
    let mut held = claim("train-0-gpus", vec![exact("gpu.nvidia.com", 2)], &[("a", "gpu-0"), ("a", "gpu-1")]);
    held.reserved_for = Box::new(["train-0".into()]);
    let objects = [
        slice("a", vec![gpu_on_root("gpu-0", "U0", "r"), gpu_on_root("gpu-1", "U1", "r")]),
        class("gpu.nvidia.com", "gpu"),
        DraObject::Claim(held),
    ];
    c.apply_all(objects.into_iter().map(|o| ModelEvent::Upsert(Object::Dra(o))));
    let snap = c.snapshot();
    let gangs = crate::analysis::gangs::analyze(&Index::build(&snap, 0));
    let train = gangs.iter().find(|g| &*g.key.name == "train").unwrap();
    assert_eq!((train.placed, train.gpus_held_idle), (1, 2), "{train:?}");
    assert_eq!(train.nodes, [(Sym::new("a"), 2)]);
}

/// Three nodes of four whole GPUs with 2, 3 and 1 of them held; pods
/// waiting with claims made from templates (two and four GPUs each), and
/// one sharing an unallocated claim of three.
fn fleet_with_templates() -> Snapshot {
    let gpus = |node: &str| -> Vec<Device> {
        (0..4).map(|i| device(&format!("gpu-{i}"), &[("type", "gpu"), ("uuid", &format!("GPU-{node}-{i}"))])).collect()
    };
    let held = |name: &str, node: &str, n: usize| {
        let devices: Vec<(&str, String)> = (0..n).map(|i| (node, format!("gpu-{i}"))).collect();
        let devices: Vec<(&str, &str)> = devices.iter().map(|(n, d)| (*n, d.as_str())).collect();
        claim(name, vec![exact("gpu.nvidia.com", n as u64)], &devices)
    };
    let template =
        |name: &str, n: u64| ResourceClaim { template: true, ..claim(name, vec![exact("gpu.nvidia.com", n)], &[]) };
    let waiting = |name: &str, source: ClaimSource| {
        let mut p = pod(name).ns("ml").build();
        let generated = matches!(source, ClaimSource::Template(_)).then(|| format!("{name}-gpu-x1y2z").into());
        p.claims = Box::new([PodClaim { name: Sym::new("gpu"), source, generated }]);
        p
    };
    let pods = vec![
        waiting("serve-a", ClaimSource::Template("two-gpus".into())),
        waiting("serve-b", ClaimSource::Template("two-gpus".into())),
        waiting("big", ClaimSource::Template("four-gpus".into())),
        waiting("team-user", ClaimSource::Claim("team".into())),
    ];
    let nodes = ["n1", "n2", "n3"].iter().map(|n| node(n).build()).collect();
    let snap = snapshot(nodes, pods, vec![], 0);
    let mut c = crate::model::Cluster::new(snap.source.clone());
    c.apply_all(snap.nodes.values().map(|n| ModelEvent::Upsert(Object::Node((**n).clone()))));
    c.apply_all(snap.pods.values().map(|p| ModelEvent::Upsert(Object::Pod((**p).clone()))));
    let objects = [slice("n1", gpus("n1")), slice("n2", gpus("n2")), slice("n3", gpus("n3"))]
        .into_iter()
        .chain([class("gpu.nvidia.com", "gpu")])
        .chain([held("h1", "n1", 2), held("h2", "n2", 3), held("h3", "n3", 1)].map(DraObject::Claim))
        .chain([template("two-gpus", 2), template("four-gpus", 4)].map(DraObject::Claim))
        .chain([claim("team", vec![exact("gpu.nvidia.com", 3)], &[])].map(DraObject::Claim))
        .chain(["serve-a", "serve-b", "big"].map(|p| DraObject::Claim(claim(&format!("{p}-gpu-x1y2z"), vec![], &[]))));
    c.apply_all(objects.map(|o| ModelEvent::Upsert(Object::Dra(o))));
    c.snapshot()
}

#[test]
fn pods_asking_through_claims_are_shapes_of_the_fragmentation_map() {
    use crate::analysis::fragmentation::{self, PlanStatus};
    let snap = fleet_with_templates();
    let index = Index::build(&snap, 0);
    let f = fragmentation::analyze(&index);
    let pending: Vec<_> = f.shapes.iter().filter(|s| s.demand.is_pending()).collect();
    let of = |name: &str| pending.iter().find(|s| s.demand.is_named("ml", name)).expect(name);
    // Two GPUs per pod: one pod on n1 (2 free), none on n2 (1), one on n3 (3).
    let pair = of("serve-a");
    assert_eq!(pair.demand.label(), "1×2 DRA");
    assert_eq!((pair.largest_gang, pair.usable_free, pair.stranded_free, pair.fits_now), (2, 4, 2, true));
    // Four: no node has them free, each could were it empty.
    let big = of("big");
    assert_eq!((big.largest_gang, big.usable_free, big.stranded_free, big.nodes_big_enough), (0, 0, 6, 3));
    // A shared claim of three: n3 only; once allocated, every pod shares it.
    let team = of("team-user");
    assert_eq!(team.demand.label(), "1×3 DRA");
    assert!(team.fits_now && team.usable_free == 3, "{team:?}");
    // The fleet: n2's odd GPU is stranded for every pending shape; n3's
    // three serve the shared claim.
    assert_eq!(f.stranded_by_node.get(&Sym::new("n2")), Some(&1));
    assert_eq!(f.stranded_total, 1, "{:?}", f.stranded_by_node);
    assert_eq!(f.unplanned_claims, 0);
    // The held devices belong to standalone claims no pod made: nothing the
    // plan may move frees them.
    assert_eq!(f.plan.target.as_deref(), Some("Pod ml/big"));
    assert!(
        matches!(&f.plan.status, PlanStatus::Impossible(why) if why.contains("cannot move")),
        "{:?}",
        f.plan.status
    );
}

/// The same fleet where the held GPUs belong to a Deployment's pods, one
/// GPU each through claims made from its template (2, 3 and 1 on n1, n2,
/// n3): the plan frees n3 for the pod asking four by moving its one pod to
/// the fullest node that takes it (n2's last GPU), the claim made again
/// there; n3's four GPUs then fit `big`.
#[test]
fn the_plan_moves_pods_whose_claims_come_from_templates() {
    assert_the_plan_frees_n3(&serving_fleet(false));
}

/// The same, `big` asking `nvidia.com/gpu: 4` with no claim, a DeviceClass
/// serving the resource (no node advertises it): the plan weighs the claim
/// the scheduler would make for it, and frees n3 the same way.
#[test]
fn the_plan_frees_a_node_for_gpus_a_class_serves_as_an_extended_resource() {
    assert_the_plan_frees_n3(&serving_fleet(true));
}

fn assert_the_plan_frees_n3(snap: &Snapshot) {
    use crate::analysis::fragmentation::{self, PlanStatus};
    let index = Index::build(snap, 0);
    let f = fragmentation::analyze(&index);
    let plan = &f.plan;
    assert_eq!(plan.target.as_deref(), Some("Pod ml/big"));
    assert_eq!(plan.status, PlanStatus::Found, "{plan:?}");
    let moves: Vec<(&str, &str, Option<&str>, u64)> = plan
        .steps
        .iter()
        .map(|s| (s.pod.as_str(), s.from_node.as_str(), s.to_node.as_ref().map(|n| n.as_str()), s.gpus))
        .collect();
    assert_eq!(moves, [("serve-n3-0", "n3", Some("n2"), 1)]);
    assert_eq!(plan.nodes_freed, [Sym::new("n3")]);
    assert_eq!(plan.reserve, [Sym::new("n3")]);
}

/// `fleet_with_templates` where the held GPUs belong to a Deployment's
/// pods (2, 3 and 1 on n1, n2, n3), and `big` waits for four (through its
/// template, or as `nvidia.com/gpu` a class serves where `extended`).
fn serving_fleet(extended: bool) -> Snapshot {
    let base = fleet_with_templates();
    let mut c = crate::model::Cluster::new(base.source.clone());
    c.apply_all(base.nodes.values().map(|n| ModelEvent::Upsert(Object::Node((**n).clone()))));
    let mut big = (**base.pods.values().find(|p| &*p.name == "big").unwrap()).clone();
    if extended {
        big = pod("big").ns("ml").gpus(4).build();
    }
    c.apply(ModelEvent::Upsert(Object::Pod(big)));
    // The slices, the class, the templates and big's claim: not h1–h3 nor the team's.
    let mut objects: Vec<DraObject> = base
        .dra
        .values()
        .map(|o| (**o).clone())
        .filter(|o| !matches!(o, DraObject::Claim(c) if ["h1", "h2", "h3", "team"].contains(&&*c.name)))
        .collect();
    objects.push(DraObject::Claim(ResourceClaim {
        template: true,
        ..claim("one-gpu", vec![exact("gpu.nvidia.com", 1)], &[])
    }));
    for (node, held) in [("n1", 2), ("n2", 3), ("n3", 1)] {
        for i in 0..held {
            let name = format!("serve-{node}-{i}");
            let mut p = pod(&name).ns("ml").on(node).running().owner("ReplicaSet", "serve-5d8c7").build();
            let generated: Arc<str> = format!("{name}-gpu-abcde").into();
            p.claims = Box::new([PodClaim {
                name: Sym::new("gpu"),
                source: ClaimSource::Template("one-gpu".into()),
                generated: Some(generated.clone()),
            }]);
            let device = format!("gpu-{i}");
            let mut made = claim(&generated, vec![exact("gpu.nvidia.com", 1)], &[(node, device.as_str())]);
            made.owner_pod = Some(name.as_str().into());
            made.reserved_for = Box::new([name.as_str().into()]);
            objects.push(DraObject::Claim(made));
            c.apply(ModelEvent::Upsert(Object::Pod(p)));
        }
    }
    if extended {
        for o in objects.iter_mut() {
            if let DraObject::Class(class) = o {
                class.extended_resource = Some(Sym::new("nvidia.com/gpu"));
            }
        }
    }
    c.apply_all(objects.into_iter().map(|o| ModelEvent::Upsert(Object::Dra(o))));
    c.snapshot()
}

/// A fleet where `nvidia.com/gpu` is served both ways: `dp` advertises 8
/// through its device plugin (`dp_used` of them held), `a` publishes two
/// whole GPUs as a ResourceSlice and a DeviceClass serves the resource
/// (`extendedResourceName`, KEP-5004). `waiting` asks `asked` GPUs.
fn served_both_ways(dp_used: u64, asked: u64, gang: bool) -> Snapshot {
    served_as(dp_used, asked, gang, "gpu")
}

/// [`served_both_ways`], the class selecting devices of type `kind`.
fn served_as(dp_used: u64, asked: u64, gang: bool, kind: &str) -> Snapshot {
    let mut pods = vec![pod("busy").gpus(dp_used).on("dp").running().build()];
    if gang {
        pods.push(pod("waiting-0").ns("ml").gpus(asked).group("train").build());
        pods.push(pod("waiting-1").ns("ml").gpus(asked).group("train").build());
    } else {
        pods.push(pod("waiting").ns("ml").gpus(asked).build());
    }
    let gangs = if gang {
        vec![crate::analysis::testing::podgroup("train", 2, asked).ns("ml").phase("Inqueue").build()]
    } else {
        Vec::new()
    };
    let snap = snapshot(vec![node("dp").gpus(8).build(), node("a").build()], pods, gangs, 0);
    let mut c = crate::model::Cluster::new(snap.source.clone());
    c.apply_all(snap.nodes.values().map(|n| ModelEvent::Upsert(Object::Node((**n).clone()))));
    c.apply_all(snap.gangs.values().map(|g| ModelEvent::Upsert(Object::Gang((**g).clone()))));
    c.apply_all(snap.pods.values().map(|p| ModelEvent::Upsert(Object::Pod((**p).clone()))));
    let gpu = |n: &str, u: &str| device(n, &[("type", "gpu"), ("uuid", u), ("productName", "NVIDIA H100 80GB HBM3")]);
    let DraObject::Class(mut served) = class("gpu.nvidia.com", kind) else { unreachable!() };
    served.extended_resource = Some(Sym::new("nvidia.com/gpu"));
    let objects = [slice("a", vec![gpu("gpu-0", "GPU-A0"), gpu("gpu-1", "GPU-A1")]), DraObject::Class(served)];
    c.apply_all(objects.into_iter().map(|o| ModelEvent::Upsert(Object::Dra(o))));
    c.snapshot()
}

fn chain(snap: &Snapshot, name: &str) -> crate::analysis::pending::PendingItem {
    let index = Index::build(snap, 0);
    let gangs = crate::analysis::gangs::analyze(&index);
    let frag = crate::analysis::fragmentation::analyze(&index);
    let items = crate::analysis::pending::analyze(&index, &gangs, &frag);
    items.into_iter().find(|i| i.name == name).unwrap_or_else(|| panic!("{name} is not pending"))
}

#[test]
fn an_extended_resource_a_class_serves_is_a_claim_where_no_device_plugin_advertises_it() {
    use crate::analysis::pending::{Step, Verdict};
    let step = |item: &crate::analysis::pending::PendingItem, s: Step| {
        item.steps.iter().find(|r| r.step == s).cloned().unwrap_or_else(|| panic!("{s:?}: {:?}", item.steps))
    };
    // dp is full: a's two GPUs through the class take the pod; dp's device
    // plugin is not asked (a does not advertise nvidia.com/gpu).
    let snap = served_both_ways(8, 2, false);
    let index = Index::build(&snap, 0);
    let waiting = index.snap.pods.values().find(|p| &*p.name == "waiting").unwrap();
    let v = verdict(&index, &mut Selectors::default(), waiting).unwrap();
    assert_eq!(v.nodes_fit, [Sym::new("a")]);
    assert_eq!((v.gpus, v.extended_advertised), (0, true), "counted by its request, not again as a claim");
    let item = chain(&snap, "waiting");
    assert_eq!(item.blocking, None, "{:?}", item.steps);
    assert_eq!(step(&item, Step::Fit).verdict, Verdict::Pass);
    // dp advertises the resource: its device plugin is still a way.
    assert_ne!(step(&item, Step::DevicePlugin).verdict, Verdict::NotApplicable);
    // Three: a has two, dp none free; the claim is short on a, as the scheduler says it.
    let item = chain(&served_both_ways(8, 3, false), "waiting");
    assert_eq!(item.blocking, Some(Step::Claims), "{:?}", item.steps);
    assert!(
        item.summary.contains("no node has 3 matching devices (at most 2) — cannot allocate all claims"),
        "{}",
        item.summary
    );
    // dp free: its device plugin serves three.
    let snap = served_both_ways(0, 3, false);
    let index = Index::build(&snap, 0);
    let waiting = index.snap.pods.values().find(|p| &*p.name == "waiting").unwrap();
    let v = verdict(&index, &mut Selectors::default(), waiting).unwrap();
    assert_eq!(v.nodes_fit, [Sym::new("dp")]);
    assert_eq!(chain(&snap, "waiting").blocking, None);
}

/// A gang whose pods ask `nvidia.com/gpu` a class serves: the claims the
/// scheduler would make for all its pods at once, as the fragmentation map
/// searches them (a's two GPUs take two one-GPU pods, one two-GPU pod).
#[test]
fn a_gang_whose_gpus_come_through_a_class_fits_as_its_claims_do() {
    use crate::analysis::pending::{Step, Verdict, VerdictSource};
    let item = chain(&served_both_ways(8, 1, true), "train");
    let fit = item.steps.iter().find(|s| s.step == Step::Fit).unwrap();
    assert_eq!(fit.verdict, Verdict::Pass, "{fit:?}");
    assert!(fit.summary.contains("the claims for its DRA-served GPUs included (room for 2)"), "{}", fit.summary);
    let item = chain(&served_both_ways(8, 2, true), "train");
    let fit = item.steps.iter().find(|s| s.step == Step::Fit).unwrap();
    assert_eq!((fit.verdict, fit.said_by), (Verdict::Block, None), "{fit:?}");
    assert_eq!(item.verdict_source, VerdictSource::Kgpu);
    assert!(fit.summary.starts_with("room for 1 of the 2 pod(s) at once"), "{}", fit.summary);
}

/// The fragmentation map and the pending chain weigh the same devices: the
/// class's selectors, not every free GPU the node publishes.
#[test]
fn the_fragmentation_map_counts_the_devices_the_class_selects_as_the_chain_does() {
    use crate::analysis::pending::Step;
    let shape_of = |snap: &Snapshot| {
        let index = Index::build(snap, 0);
        let f = crate::analysis::fragmentation::analyze(&index);
        let s = f.shapes.iter().find(|s| s.demand.is_named("ml", "waiting")).unwrap();
        (s.fits_now, s.largest_gang, s.usable_free)
    };
    // Whole GPUs selected: a takes one pod of two (dp is full).
    let snap = served_as(8, 2, false, "gpu");
    assert_eq!(shape_of(&snap), (true, 1, 2));
    assert_eq!(chain(&snap, "waiting").blocking, None);
    // The class selects MIG devices, which a does not publish: no room, and the claims step says so.
    let snap = served_as(8, 2, false, "mig");
    assert_eq!(shape_of(&snap), (false, 0, 0));
    let item = chain(&snap, "waiting");
    assert_eq!(item.blocking, Some(Step::Claims), "{:?}", item.steps);
    assert!(item.summary.contains("no published device matches the class and selectors"), "{}", item.summary);
    // What the nodes publish instead, the comparison to make with the class.
    let claims = item.steps.iter().find(|s| s.step == Step::Claims).unwrap();
    assert!(
        claims.details.iter().any(|d| d == "the nodes publish: 2 NVIDIA H100 80GB HBM3 on 1 node(s)"),
        "{:?}",
        claims.details
    );
}

mod since_the_allocator;
