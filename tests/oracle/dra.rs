//! DRA against the real kube-scheduler's DynamicResources plugin (1.36):
//! generated ResourceSlices in the shapes NVIDIA's DRA driver publishes
//! (whole GPUs with product, memory and PCIe-root attributes, some tainted
//! NoSchedule; an H100 published with DynamicMIG partitions drawing on one
//! set of shared counters, `verdicts/dra-partitions/input.yaml`), the
//! driver's two DeviceClasses, and ResourceClaims of one or two requests
//! (`exactly` or `firstAvailable`; a count or All; selectors on product,
//! memory, profile and root; admin access) with or without a
//! matchAttribute or distinctAttribute constraint; one pod per claim,
//! created in turn, so each meets the allocations of those before it.
//!
//! The scheduler allocates or refuses each; kgpu must have said so: the node
//! a pod is bound to is one where kgpu allocates its claim (judged with the
//! pod's own allocation undone), a refused pod's claim fits no node for kgpu,
//! and kgpu's pending chain blocks at the claims step and agrees with the
//! scheduler's message. No kubelet, driver or controller runs: the claims are
//! standalone (`resourceClaimName`), and only the scheduler writes them.

use std::sync::atomic::{AtomicU32, Ordering};

use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kgpu::analysis::dra::cel::Selectors;
use kgpu::analysis::dra::claims;
use kgpu::analysis::index::Index;
use kgpu::analysis::{self, Thresholds};
use kgpu::model::{DraObject, PodKey, PodPhase, Snapshot, Sym};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use proptest::prelude::*;
use serde_json::{Value, json};

use super::support::kube::dra_api;
use super::{Outcome, Snapshots, kgpu_sees, outcome};

/// Pods the scheduler bound and refused, refusals where each request had
/// devices alone (a constraint, the counters, or requests wanting the same
/// devices), pods that got a partition, claims the API server refused (coverage).
pub static BOUND: AtomicU32 = AtomicU32::new(0);
pub static REFUSED: AtomicU32 = AtomicU32::new(0);
pub static REFUSED_TOGETHER: AtomicU32 = AtomicU32::new(0);
pub static GOT_PARTITION: AtomicU32 = AtomicU32::new(0);
pub static API_REFUSED: AtomicU32 = AtomicU32::new(0);
/// Refusals where the allocator stopped with an error (All meeting a constraint).
pub static ABORTED: AtomicU32 = AtomicU32::new(0);

const DRIVER: &str = "gpu.nvidia.com";
const PRODUCTS: [&str; 2] = ["NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"];
const ROOTS: [&str; 2] = ["pci0000:15", "pci0000:b1"];
/// A profile of the partitioned H100, as `verdicts/dra-partitions` has it.
struct Profile {
    name: &'static str,
    id: u32,
    multiprocessors: u32,
    memory_mib: u32,
    slices: u32,
    starts: &'static [u32],
}

const PARTITIONS: [Profile; 2] = [
    Profile {
        name: "1g.10gb",
        id: 19,
        multiprocessors: 16,
        memory_mib: 9984,
        slices: 1,
        starts: &[0, 1, 2, 3, 4, 5, 6],
    },
    Profile { name: "3g.40gb", id: 9, multiprocessors: 60, memory_mib: 40320, slices: 4, starts: &[0, 4] },
];

#[derive(Clone, Debug)]
pub struct Gpu {
    product: usize,
    root: usize,
    tainted: bool,
}

#[derive(Clone, Debug)]
pub struct DraNode {
    gpus: Vec<Gpu>,
    /// One more GPU, an H100 published whole and as DynamicMIG partitions.
    partitioned: Option<usize>,
}

#[derive(Clone, Debug)]
pub enum Select {
    Product(usize),
    Root(usize),
    /// Capacity `memory` at least 81000Mi: only the partitioned H100 whole.
    BigMemory,
}

#[derive(Clone, Debug)]
pub struct Exact {
    /// A MIG profile (the mig class), or a whole GPU (the gpu class).
    profile: Option<usize>,
    /// None: allocationMode All.
    count: Option<u32>,
    select: Option<Select>,
}

#[derive(Clone, Debug)]
pub struct Request {
    first: Exact,
    /// A second alternative: the request becomes `firstAvailable`.
    fallback: Option<Exact>,
    admin: bool,
}

#[derive(Clone, Debug)]
pub struct Claim {
    requests: Vec<Request>,
    /// Some(distinct): a constraint on the PCIe root across the claim's devices.
    constraint: Option<bool>,
}

#[derive(Clone, Debug)]
pub struct DraCase {
    nodes: Vec<DraNode>,
    claims: Vec<Claim>,
}

fn exact() -> impl Strategy<Value = Exact> {
    let profile = prop_oneof![4 => Just(None), 1 => Just(Some(0)), 1 => Just(Some(1))];
    let count = prop_oneof![6 => Just(Some(1)), 3 => (2..=3u32).prop_map(Some), 1 => Just(None)];
    let select = prop_oneof![
        4 => Just(None),
        1 => (0..2usize).prop_map(|p| Some(Select::Product(p))),
        1 => (0..2usize).prop_map(|r| Some(Select::Root(r))),
        1 => Just(Some(Select::BigMemory)),
    ];
    (profile, count, select).prop_map(|(profile, count, select)| Exact { profile, count, select })
}

pub fn dra_case() -> impl Strategy<Value = DraCase> {
    let gpu = (0..2usize, 0..2usize, prop::bool::weighted(0.15)).prop_map(|(product, root, tainted)| Gpu {
        product,
        root,
        tainted,
    });
    let node = (prop::collection::vec(gpu, 0..=4), prop::option::weighted(0.4, 0..2usize))
        .prop_map(|(gpus, partitioned)| DraNode { gpus, partitioned });
    let request = (exact(), prop::option::weighted(0.2, exact()), prop::bool::weighted(0.1))
        .prop_map(|(first, fallback, admin)| Request { first, fallback, admin });
    let claim = (prop::collection::vec(request, 1..=2), prop::option::weighted(0.3, any::<bool>()))
        .prop_map(|(requests, constraint)| Claim { requests, constraint });
    (prop::collection::vec(node, 1..=3), prop::collection::vec(claim, 1..=4))
        .prop_map(|(nodes, claims)| DraCase { nodes, claims })
}

fn node_name(case: u32, i: usize) -> String {
    format!("d{case}-n{i}")
}

fn node_json(case: u32, i: usize) -> Value {
    let name = node_name(case, i);
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "kgpu.dev/oracle-case": format!("d{case}")}},
        "status": {
            "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110"},
            "capacity": {"cpu": "64", "memory": "512Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status",
                "lastHeartbeatTime": "2026-12-07T00:00:00Z", "lastTransitionTime": "2026-12-07T00:00:00Z"}],
        },
    })
}

fn attributes(kind: &str, product: &str, root: &str, uuid: (&str, &str)) -> Value {
    let mut a = json!({
        "type": {"string": kind},
        "productName": {"string": product},
        "brand": {"string": "Nvidia"},
        "driverVersion": {"version": "580.95.5"},
        "resource.kubernetes.io/pcieRoot": {"string": root},
    });
    a[uuid.0] = json!({"string": uuid.1});
    a
}

fn counters(sm: u32, memory_mib: u32, start: u32, size: u32) -> Value {
    let mut c = json!({"multiprocessors": {"value": sm.to_string()}, "memory": {"value": format!("{memory_mib}Mi")}});
    for s in start..start + size {
        c[format!("memory-slice-{s}")] = json!({"value": "1"});
    }
    c
}

/// A node's ResourceSlices: its devices, and a slice of shared counters
/// when it has a partitioned GPU (1.35+ keeps them apart).
fn slices_json(case: u32, i: usize, node: &DraNode) -> Vec<Value> {
    let name = node_name(case, i);
    let mut devices: Vec<Value> = node
        .gpus
        .iter()
        .enumerate()
        .map(|(m, g)| {
            let mut d = json!({
                "name": format!("gpu-{m}"),
                "attributes": attributes("gpu", PRODUCTS[g.product], ROOTS[g.root], ("uuid", &format!("GPU-{name}-{m}"))),
                "capacity": {"memory": {"value": "80Gi"}},
            });
            if g.tainted {
                d["taints"] = json!([{"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoSchedule"}]);
            }
            d
        })
        .collect();
    let mut out = Vec::new();
    if let Some(root) = node.partitioned {
        let m = node.gpus.len();
        let uuid = format!("GPU-{name}-{m}");
        let set = format!("gpu-{m}-counter-set");
        devices.push(json!({
            "name": format!("gpu-{m}"),
            "attributes": attributes("gpu", PRODUCTS[0], ROOTS[root], ("uuid", &uuid)),
            "capacity": {"memory": {"value": "81559Mi"}, "multiprocessors": {"value": "132"}},
            "consumesCounters": [{"counterSet": set, "counters": counters(132, 81559, 0, 8)}],
        }));
        for p in &PARTITIONS {
            for start in p.starts {
                let mut attrs = attributes("mig", PRODUCTS[0], ROOTS[root], ("parentUUID", &uuid));
                attrs["profile"] = json!({"string": p.name});
                devices.push(json!({
                    "name": format!("gpu-{m}-mig-{}-{}-{start}", p.name.replace('.', ""), p.id),
                    "attributes": attrs,
                    "capacity": {"memory": {"value": format!("{}Mi", p.memory_mib)},
                        "multiprocessors": {"value": p.multiprocessors.to_string()}},
                    "consumesCounters": [{"counterSet": set,
                        "counters": counters(p.multiprocessors, p.memory_mib, *start, p.slices)}],
                }));
            }
        }
        out.push(json!({"sharedCounters": [{"name": set, "counters": counters(132, 81559, 0, 8)}]}));
    }
    if !devices.is_empty() {
        out.push(json!({"devices": devices}));
    }
    let count = out.len();
    out.into_iter()
        .enumerate()
        .map(|(k, mut spec)| {
            spec["driver"] = json!(DRIVER);
            spec["nodeName"] = json!(name);
            spec["pool"] = json!({"name": name, "generation": 1, "resourceSliceCount": count});
            json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                "metadata": {"name": format!("{name}-{DRIVER}-{k}")}, "spec": spec})
        })
        .collect()
}

fn class_json(name: &str, kind: &str) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression":
            format!("device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].type == '{kind}'")}}]}})
}

fn exact_json(e: &Exact) -> Value {
    let mut m = json!({"deviceClassName": if e.profile.is_some() { "mig.nvidia.com" } else { "gpu.nvidia.com" }});
    match e.count {
        Some(n) => m["count"] = json!(n),
        None => m["allocationMode"] = json!("All"),
    }
    let mut selectors = Vec::new();
    if let Some(p) = e.profile {
        selectors.push(format!("device.attributes['{DRIVER}'].profile == '{}'", PARTITIONS[p].name));
    }
    match &e.select {
        Some(Select::Product(p)) => {
            selectors.push(format!("device.attributes['{DRIVER}'].productName == '{}'", PRODUCTS[*p]))
        }
        Some(Select::Root(r)) => {
            selectors.push(format!("device.attributes['resource.kubernetes.io'].pcieRoot == '{}'", ROOTS[*r]))
        }
        Some(Select::BigMemory) => {
            selectors.push(format!("device.capacity['{DRIVER}'].memory.compareTo(quantity('81000Mi')) >= 0"))
        }
        None => {}
    }
    if !selectors.is_empty() {
        m["selectors"] = Value::Array(selectors.into_iter().map(|s| json!({"cel": {"expression": s}})).collect());
    }
    m
}

fn claim_json(ns: &str, j: usize, c: &Claim) -> Value {
    let requests: Vec<Value> = c
        .requests
        .iter()
        .enumerate()
        .map(|(k, r)| match &r.fallback {
            Some(second) => {
                let alternatives: Vec<Value> = [&r.first, second]
                    .iter()
                    .enumerate()
                    .map(|(a, e)| {
                        let mut m = exact_json(e);
                        m["name"] = json!(format!("a{a}"));
                        m
                    })
                    .collect();
                json!({"name": format!("r{k}"), "firstAvailable": alternatives})
            }
            None => {
                let mut m = exact_json(&r.first);
                if r.admin {
                    m["adminAccess"] = json!(true);
                }
                json!({"name": format!("r{k}"), "exactly": m})
            }
        })
        .collect();
    let mut devices = json!({"requests": requests});
    if let Some(distinct) = c.constraint {
        let key = if distinct { "distinctAttribute" } else { "matchAttribute" };
        devices["constraints"] = json!([{key: "resource.kubernetes.io/pcieRoot"}]);
    }
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": format!("c{j}"), "namespace": ns}, "spec": {"devices": devices}})
}

fn pod_json(case: u32, ns: &str, j: usize) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": format!("p{j}"), "namespace": ns},
    "spec": {
        "nodeSelector": {"kgpu.dev/oracle-case": format!("d{case}")},
        "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "main", "image": "nvcr.io/nvidia/pytorch:25.01-py3", "resources": {"claims": [{"name": "gpu"}]}}],
        "resourceClaims": [{"name": "gpu", "resourceClaimName": format!("c{j}")}],
    }})
}

/// The driver's two classes, once per control plane.
pub async fn create_classes(client: &kube::Client) {
    let classes = dra_api(client, "DeviceClass", "deviceclasses", None);
    for (name, kind) in [("gpu.nvidia.com", "gpu"), ("mig.nvidia.com", "mig")] {
        let class = serde_json::from_value(class_json(name, kind)).unwrap();
        classes.create(&PostParams::default(), &class).await.unwrap();
    }
}

/// kgpu's verdict on `key`'s claims in `snap`; with `unplace`, as before the
/// scheduler placed it (the pod unbound, its claim's allocation undone).
fn kgpu_claims(snap: &Snapshot, key: &PodKey, unplace: bool) -> Result<claims::ClaimsVerdict, String> {
    let mut snap = snap.clone();
    if unplace {
        let pod = snap.pods.get_mut(key).ok_or("kgpu does not see the pod")?;
        let pod = std::sync::Arc::make_mut(pod);
        pod.node = None;
        pod.phase = PodPhase::Pending;
        let held: Vec<_> = snap
            .dra
            .iter()
            .filter(|(_, o)| matches!(&***o, DraObject::Claim(c) if c.reserved_for.iter().any(|p| **p == *key.name)))
            .map(|(k, _)| k.clone())
            .collect();
        for k in held {
            if let Some(o) = snap.dra.get_mut(&k)
                && let DraObject::Claim(c) = std::sync::Arc::make_mut(o)
            {
                c.allocated = Box::new([]);
                c.allocated_node = None;
                c.reserved_for = Box::new([]);
            }
        }
    }
    let index = Index::build(&snap, snap.clock);
    let pod = snap.pods.get(key).ok_or("kgpu does not see the pod")?;
    claims::verdict(&index, &mut Selectors::default(), pod).ok_or_else(|| "kgpu sees no claims on the pod".into())
}

pub async fn run_dra_case(client: &kube::Client, snapshots: &Snapshots, n: u32, case: &DraCase) -> Result<u32, String> {
    let ns = format!("dra-{n}");
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns_obj = serde_json::from_value(
        json!({"metadata": {"name": ns, "labels": {"resource.kubernetes.io/admin-access": "true"}}}),
    )
    .unwrap();
    namespaces.create(&PostParams::default(), &ns_obj).await.map_err(|e| format!("namespace: {e}"))?;
    let nodes: Api<Node> = Api::all(client.clone());
    let slices = dra_api(client, "ResourceSlice", "resourceslices", None);
    let mut docs = Vec::new();
    for i in 0..case.nodes.len() {
        let node = serde_json::from_value(node_json(n, i)).unwrap();
        nodes.create(&PostParams::default(), &node).await.map_err(|e| format!("create node: {e}"))?;
        for doc in slices_json(n, i, &case.nodes[i]) {
            let slice = serde_json::from_value(doc.clone()).unwrap();
            slices.create(&PostParams::default(), &slice).await.map_err(|e| format!("create slice: {e}\n{doc}"))?;
            docs.push(doc);
        }
    }
    let slice_count = docs.len();
    kgpu_sees(snapshots, "the case's nodes and slices", |s| {
        (0..case.nodes.len()).all(|i| s.nodes.contains_key(&Sym::new(&node_name(n, i))))
            && s.dra
                .values()
                .filter(|o| matches!(&***o, DraObject::Slice(sl) if sl.name.starts_with(&format!("d{n}-"))))
                .count()
                == slice_count
    })
    .await?;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let claims_api = dra_api(client, "ResourceClaim", "resourceclaims", Some(&ns));
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let mut report = Vec::new();
    let mut judged = 0;
    for (j, claim) in case.claims.iter().enumerate() {
        let doc = claim_json(&ns, j, claim);
        docs.push(doc.clone());
        if let Err(e) = claims_api.create(&PostParams::default(), &serde_json::from_value(doc).unwrap()).await {
            // A shape the API server does not take (kgpu never sees it).
            API_REFUSED.fetch_add(1, Ordering::SeqCst);
            eprintln!("dra oracle: case {n} claim c{j} refused by the API server: {e}");
            continue;
        }
        let key = PodKey::new(&ns, &format!("p{j}"));
        let claim_name = format!("c{j}");
        kgpu_sees(snapshots, "the claim", |s| {
            s.dra
                .values()
                .any(|o| matches!(&**o, DraObject::Claim(c) if *c.name == *claim_name && c.namespace.as_str() == ns))
        })
        .await?;
        let pod_doc = pod_json(n, &ns, j);
        docs.push(pod_doc.clone());
        pods.create(&PostParams::default(), &serde_json::from_value(pod_doc).unwrap())
            .await
            .map_err(|e| format!("create pod: {e}"))?;
        let outcome = outcome(&pods, &key.name).await?;
        let snap = kgpu_sees(snapshots, "the pod's outcome and its claim", |s| {
            let claim_allocated = s.dra.values().any(|o| {
                matches!(&**o, DraObject::Claim(c) if *c.name == *claim_name && c.namespace.as_str() == ns && c.is_allocated())
            });
            s.pods.get(&key).is_some_and(|p| match &outcome {
                Outcome::Bound(_) => p.node.is_some() && claim_allocated,
                Outcome::Refused(_) => p.unschedulable.is_some(),
            })
        })
        .await?;
        judged += 1;
        let problem = match &outcome {
            Outcome::Bound(node) => {
                BOUND.fetch_add(1, Ordering::SeqCst);
                if claim
                    .requests
                    .iter()
                    .any(|r| r.first.profile.is_some() || r.fallback.as_ref().is_some_and(|f| f.profile.is_some()))
                {
                    GOT_PARTITION.fetch_add(1, Ordering::SeqCst);
                }
                let v = kgpu_claims(&snap, &key, true)?;
                (!v.nodes_fit.contains(&Sym::new(node)) || v.blocks()).then(|| {
                    format!(
                        "the scheduler bound it to {node}; kgpu: fits {:?}, short {:?}, aborts {:?}",
                        v.nodes_fit, v.shortfalls, v.aborted
                    )
                })
            }
            Outcome::Refused(message) => {
                REFUSED.fetch_add(1, Ordering::SeqCst);
                let v = kgpu_claims(&snap, &key, false)?;
                if v.shortfalls.iter().any(|s| s.together.is_some()) {
                    REFUSED_TOGETHER.fetch_add(1, Ordering::SeqCst);
                }
                let a = analysis::analyze(&snap, snap.clock, &Thresholds::default());
                let item = analysis::pending::find(&a.pending, &ns, &key.name);
                // An allocator error ends the attempt whatever other nodes offer.
                let aborted = message.contains("running \"DynamicResources\" filter plugin");
                if aborted {
                    ABORTED.fetch_add(1, Ordering::SeqCst);
                }
                if aborted == v.aborted.is_empty() {
                    Some(format!("refused ({message}); kgpu's allocator errors: {:?}", v.aborted))
                } else if !aborted && !v.nodes_fit.is_empty() {
                    Some(format!("refused ({message}); kgpu: fits on {:?}", v.nodes_fit))
                } else if item.is_none_or(|i| i.agrees_with_scheduler != Some(true)) {
                    Some(format!(
                        "refused ({message}); kgpu's chain: {:?}",
                        item.map(|i| (&i.summary, &i.disagreement))
                    ))
                } else {
                    None
                }
            }
        };
        if let Some(p) = problem {
            report.push(format!("p{j}: {p}"));
        }
    }
    // Clean up: the next case must not see these.
    let all = ListParams::default();
    let now = DeleteParams { grace_period_seconds: Some(0), ..Default::default() };
    let _ = pods.delete_collection(&now, &all).await;
    let _ = claims_api.delete_collection(&now, &all).await;
    for i in 0..case.nodes.len() {
        let _ = nodes.delete(&node_name(n, i), &DeleteParams::default()).await;
    }
    let _ = slices.delete_collection(&DeleteParams::default(), &ListParams::default()).await;
    if report.is_empty() {
        Ok(judged)
    } else {
        Err(format!(
            "{}\nobjects:\n{}",
            report.join("\n"),
            docs.iter().map(|d| serde_json::to_string(d).unwrap()).collect::<Vec<_>>().join("\n")
        ))
    }
}

/// A shared claim already reserved for 256 pods (`status.reservedFor`'s
/// limit, written as the scheduler writes it): the 1.36 scheduler picks a
/// node for the next pod, then its PreBind cannot add the pod to the claim
/// (the API server refuses a 257th entry); kgpu blocks it at the claims step,
/// agreeing.
pub async fn a_claim_serving_256_pods_takes_no_more(
    client: &kube::Client,
    snapshots: &Snapshots,
) -> Result<(), String> {
    let (n, ns) = (99_999, "dra-full");
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns_obj = serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
    namespaces.create(&PostParams::default(), &ns_obj).await.map_err(|e| format!("namespace: {e}"))?;
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .create(&PostParams::default(), &serde_json::from_value(node_json(n, 0)).unwrap())
        .await
        .map_err(|e| e.to_string())?;
    let slices = dra_api(client, "ResourceSlice", "resourceslices", None);
    let node = DraNode { gpus: vec![Gpu { product: 0, root: 0, tainted: false }], partitioned: None };
    for doc in slices_json(n, 0, &node) {
        slices
            .create(&PostParams::default(), &serde_json::from_value(doc).unwrap())
            .await
            .map_err(|e| e.to_string())?;
    }
    let one = Claim {
        requests: vec![Request {
            first: Exact { profile: None, count: Some(1), select: None },
            fallback: None,
            admin: false,
        }],
        constraint: None,
    };
    let claims_api = dra_api(client, "ResourceClaim", "resourceclaims", Some(ns));
    claims_api
        .create(&PostParams::default(), &serde_json::from_value(claim_json(ns, 0, &one)).unwrap())
        .await
        .map_err(|e| e.to_string())?;
    let name = node_name(n, 0);
    let reserved: Vec<Value> = (0..256)
        .map(|i| json!({"resource": "pods", "name": format!("serve-{i}"), "uid": format!("00000000-0000-4000-8000-{i:012}")}))
        .collect();
    let status = json!({"status": {
        "allocation": {
            "devices": {"results": [{"request": "r0", "driver": DRIVER, "pool": name, "device": "gpu-0"}]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [name]}]}]},
        },
        "reservedFor": reserved,
    }});
    claims_api
        .patch_status("c0", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(status))
        .await
        .map_err(|e| format!("claim status: {e}"))?;
    kgpu_sees(snapshots, "the full claim", |s| {
        s.dra
            .values()
            .any(|o| matches!(&**o, DraObject::Claim(c) if c.namespace.as_str() == ns && c.reserved_for.len() == 256))
    })
    .await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    pods.create(&PostParams::default(), &serde_json::from_value(pod_json(n, ns, 0)).unwrap())
        .await
        .map_err(|e| e.to_string())?;
    let key = PodKey::new(ns, "p0");
    let result = match outcome(&pods, "p0").await? {
        Outcome::Bound(node) => Err(format!("the scheduler bound the 257th pod to {node}")),
        Outcome::Refused(message) => {
            let snap =
                kgpu_sees(snapshots, "the refusal", |s| s.pods.get(&key).is_some_and(|p| p.unschedulable.is_some()))
                    .await?;
            let v = kgpu_claims(&snap, &key, false)?;
            let a = analysis::analyze(&snap, snap.clock, &Thresholds::default());
            let item = analysis::pending::find(&a.pending, ns, "p0");
            if !message.contains("Too many: 257") {
                Err(format!("the scheduler said: {message}"))
            } else if v.claims_full != ["c0"] || item.is_none_or(|i| i.agrees_with_scheduler != Some(true)) {
                Err(format!("refused ({message}); kgpu: {:?}, {:?}", v.claims_full, item.map(|i| &i.summary)))
            } else {
                Ok(())
            }
        }
    };
    let now = DeleteParams { grace_period_seconds: Some(0), ..Default::default() };
    let _ = pods.delete_collection(&now, &ListParams::default()).await;
    let _ = claims_api.delete_collection(&now, &ListParams::default()).await;
    let _ = nodes.delete(&name, &DeleteParams::default()).await;
    let _ = slices.delete_collection(&DeleteParams::default(), &ListParams::default()).await;
    result
}
