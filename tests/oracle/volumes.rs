//! The volume filters against the real kube-scheduler: generated storage
//! classes (Immediate, WaitForFirstConsumer without a provisioner, with one
//! and allowed topologies), PersistentVolumes (sizes, access modes, node
//! affinity by hostname or zone, zone labels) and claims in every state the
//! scheduler reads (bound as the PV controller leaves them, unbound, Lost,
//! being deleted, bound to a volume that is gone, missing, an ephemeral
//! volume's claim not made or made for another pod), and pods naming them.
//! The oracle plays the PV controller and the external provisioner (no
//! controller-manager runs): it completes a binding the scheduler asked for
//! (a volume's claimRef, a claim's selected-node), so a pod that fits binds.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kgpu::analysis::scheduler_msg;
use kgpu::model::storage::{ClaimPhase, VolumePhase};
use kgpu::model::{PodKey, StorageKind, StorageObject, Sym};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use proptest::prelude::*;
use serde_json::{Value, json};

use super::{Outcome, Snapshots, kgpu_refusal, kgpu_sees, kgpu_verdicts, refusal_problem};

/// Pods the scheduler refused before any node (a volume PreFilter), and
/// by a volume filter on some node (coverage).
pub static REFUSALS_BEFORE_ANY_NODE: AtomicU32 = AtomicU32::new(0);
pub static VOLUME_NODE_REFUSALS: AtomicU32 = AtomicU32::new(0);

const ZONES: [&str; 2] = ["zone-a", "zone-b"];
const SIZES_GI: [u32; 3] = [10, 50, 100];
const MODES: [&str; 3] = ["ReadWriteOnce", "ReadWriteMany", "ReadWriteOncePod"];
/// Per case: `c<n>-<suffix>`, so no case's volumes match another's claims.
const CLASSES: [(&str, &str, &str, bool); 4] = [
    ("immediate", "kubernetes.io/no-provisioner", "Immediate", false),
    ("local", "kubernetes.io/no-provisioner", "WaitForFirstConsumer", false),
    ("dyn", "oracle.example.com/csi", "WaitForFirstConsumer", false),
    ("dyn-zone-a", "oracle.example.com/csi", "WaitForFirstConsumer", true),
];

#[derive(Clone, Debug)]
pub struct VolumeNode {
    zone: Option<usize>,
    gpus_used: u32,
}

#[derive(Clone, Debug)]
pub enum Pinned {
    Nowhere,
    Host(usize),
    Zone(usize),
}

#[derive(Clone, Debug)]
pub struct VolumeCase {
    /// Index into CLASSES, or none (an empty storageClassName).
    class: Option<usize>,
    size: usize,
    mode: usize,
    pinned: Pinned,
    zone_label: Option<usize>,
}

#[derive(Clone, Debug)]
pub enum ClaimState {
    Unbound,
    /// Bound to volume i (mod the volumes), as the PV controller leaves it.
    Bound(usize),
    Lost,
    Deleting,
    BoundToMissing,
}

#[derive(Clone, Debug)]
pub struct ClaimCase {
    /// Index into CLASSES, 4: a class that does not exist, 5: none.
    class: usize,
    size: usize,
    mode: usize,
    state: ClaimState,
}

#[derive(Clone, Debug)]
pub struct PodVolumesCase {
    gpus: u32,
    claims: Vec<usize>,
    missing_claim: bool,
    /// An ephemeral volume; `true`: a claim of its name exists, not the pod's.
    ephemeral: Option<bool>,
}

#[derive(Clone, Debug)]
pub struct StorageCase {
    nodes: Vec<VolumeNode>,
    volumes: Vec<VolumeCase>,
    claims: Vec<ClaimCase>,
    pods: Vec<PodVolumesCase>,
}

pub fn storage_case() -> impl Strategy<Value = StorageCase> {
    let node = (prop::option::weighted(0.85, 0..2usize), prop::sample::select(vec![0u32, 0, 0, 4, 8]))
        .prop_map(|(zone, gpus_used)| VolumeNode { zone, gpus_used });
    let pinned =
        prop_oneof![Just(Pinned::Nowhere), (0..4usize).prop_map(Pinned::Host), (0..2usize).prop_map(Pinned::Zone)];
    let volume = (prop::option::weighted(0.9, 0..2usize), 0..3usize, 0..3usize, pinned, prop::option::of(0..2usize))
        .prop_map(|(class, size, mode, pinned, zone_label)| VolumeCase { class, size, mode, pinned, zone_label });
    let state = prop_oneof![
        3 => Just(ClaimState::Unbound),
        6 => (0..4usize).prop_map(ClaimState::Bound),
        1 => Just(ClaimState::Lost),
        1 => Just(ClaimState::Deleting),
        1 => Just(ClaimState::BoundToMissing),
    ];
    let claim = (prop::sample::select(vec![0usize, 1, 1, 1, 1, 2, 3, 3, 4, 5]), 0..3usize, 0..3usize, state)
        .prop_map(|(class, size, mode, state)| ClaimCase { class, size, mode, state });
    let pod = (
        prop::sample::select(vec![0u32, 1, 1, 4, 8]),
        prop::collection::vec(0..4usize, 1..=2),
        prop::bool::weighted(0.05),
        prop::option::weighted(0.1, any::<bool>()),
    )
        .prop_map(|(gpus, claims, missing_claim, ephemeral)| PodVolumesCase {
            gpus,
            claims,
            missing_claim,
            ephemeral,
        });
    (
        prop::collection::vec(node, 2..=4),
        prop::collection::vec(volume, 1..=4),
        prop::collection::vec(claim, 1..=4),
        prop::collection::vec(pod, 1..=4),
    )
        .prop_map(|(nodes, volumes, claims, pods)| StorageCase { nodes, volumes, claims, pods })
}

fn node_name(n: u32, i: usize) -> String {
    format!("v{n}-node-{i}")
}

fn node_json(n: u32, i: usize, node: &VolumeNode) -> Value {
    let mut labels = json!({"kubernetes.io/hostname": node_name(n, i)});
    if let Some(z) = node.zone {
        labels["topology.kubernetes.io/zone"] = json!(ZONES[z]);
    }
    let resources = json!({"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "8"});
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node_name(n, i), "labels": labels},
           "status": {"capacity": resources, "allocatable": resources,
                      "conditions": [{"type": "Ready", "status": "True", "reason": "Oracle", "message": "set by the oracle"}]}})
}

fn class_name(n: u32, class: usize) -> String {
    match CLASSES.get(class) {
        Some((suffix, ..)) => format!("c{n}-{suffix}"),
        None => format!("c{n}-missing"),
    }
}

fn class_json(n: u32, i: usize) -> Value {
    let (_, provisioner, mode, zoned) = CLASSES[i];
    let mut doc = json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": class_name(n, i)}, "provisioner": provisioner, "volumeBindingMode": mode});
    if zoned {
        doc["allowedTopologies"] =
            json!([{"matchLabelExpressions": [{"key": "topology.kubernetes.io/zone", "values": [ZONES[0]]}]}]);
    }
    doc
}

fn volume_name(n: u32, i: usize) -> String {
    format!("c{n}-pv{i}")
}

fn volume_json(n: u32, i: usize, v: &VolumeCase, nodes: usize) -> Value {
    let mut labels = json!({});
    if let Some(z) = v.zone_label {
        labels["topology.kubernetes.io/zone"] = json!(ZONES[z]);
    }
    let mut spec = json!({
        "capacity": {"storage": format!("{}Gi", SIZES_GI[v.size])},
        "accessModes": [MODES[v.mode]],
        "persistentVolumeReclaimPolicy": "Retain",
        "storageClassName": v.class.map(|c| class_name(n, c)).unwrap_or_default(),
        "hostPath": {"path": format!("/oracle/{i}")},
    });
    let term = match v.pinned {
        Pinned::Nowhere => None,
        Pinned::Host(h) => Some(("kubernetes.io/hostname", node_name(n, h % nodes))),
        Pinned::Zone(z) => Some(("topology.kubernetes.io/zone", ZONES[z].to_string())),
    };
    if let Some((key, value)) = term {
        spec["nodeAffinity"] = json!({"required": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]}]}});
    }
    json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": volume_name(n, i), "labels": labels},
           "spec": spec})
}

fn claim_json(n: u32, i: usize, c: &ClaimCase, volumes: usize) -> Value {
    let mut spec = json!({
        "accessModes": [MODES[c.mode]],
        "resources": {"requests": {"storage": format!("{}Gi", SIZES_GI[c.size])}},
        // An empty name: no class (no default class exists here).
        "storageClassName": if c.class == 5 { String::new() } else { class_name(n, c.class) },
    });
    let mut annotations = json!({});
    match c.state {
        ClaimState::Bound(v) if volumes > 0 => {
            spec["volumeName"] = json!(volume_name(n, v % volumes));
            annotations["pv.kubernetes.io/bind-completed"] = json!("yes");
        }
        ClaimState::Lost => spec["volumeName"] = json!(format!("c{n}-gone")),
        ClaimState::BoundToMissing => {
            spec["volumeName"] = json!(format!("c{n}-gone"));
            annotations["pv.kubernetes.io/bind-completed"] = json!("yes");
        }
        _ => {}
    }
    json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
           "metadata": {"name": format!("claim-{i}"), "annotations": annotations}, "spec": spec})
}

fn pod_json(i: usize, p: &PodVolumesCase, claims: usize) -> Value {
    let mut volumes: Vec<Value> = p
        .claims
        .iter()
        .filter(|&&c| c < claims)
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .map(|c| json!({"name": format!("v{c}"), "persistentVolumeClaim": {"claimName": format!("claim-{c}")}}))
        .collect();
    if p.missing_claim {
        volumes.push(json!({"name": "gone", "persistentVolumeClaim": {"claimName": "no-such-claim"}}));
    }
    if p.ephemeral.is_some() {
        volumes.push(json!({"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}}}));
    }
    let mut limits = json!({});
    if p.gpus > 0 {
        limits["nvidia.com/gpu"] = json!(p.gpus.to_string());
    }
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": format!("p{i}")},
           "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                    "resources": {"requests": {"cpu": "100m"}, "limits": limits}}],
                    "volumes": volumes, "terminationGracePeriodSeconds": 0}})
}

fn filler_json(n: u32, i: usize, gpus: u32) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": format!("filler-{i}")},
           "spec": {"nodeName": node_name(n, i), "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                    "resources": {"limits": {"nvidia.com/gpu": gpus.to_string()}}}]}})
}

async fn create<K>(api: &Api<K>, doc: Value) -> Result<K, String>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let obj: K = serde_json::from_value(doc).map_err(|e| e.to_string())?;
    api.create(&PostParams::default(), &obj).await.map_err(|e| e.to_string())
}

async fn status<K>(api: &Api<K>, name: &str, status: Value) -> Result<(), String>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(json!({ "status": status })))
        .await
        .map(|_| ())
        .map_err(|e| format!("status of {name}: {e}"))
}

/// One round of the PV controller's and the provisioner's work: bindings
/// the scheduler asked for (a volume's claimRef to an unbound claim, a
/// claim's selected-node) are completed.
async fn play_controllers(
    n: u32,
    pvs: &Api<PersistentVolume>,
    claims: &Api<PersistentVolumeClaim>,
) -> Result<(), String> {
    let prefix = format!("c{n}-");
    for pvc in claims.list(&ListParams::default()).await.map_err(|e| e.to_string())?.items {
        let name = pvc.metadata.name.clone().unwrap_or_default();
        let spec = pvc.spec.clone().unwrap_or_default();
        if spec.volume_name.is_some() {
            continue;
        }
        let asked = pvs.list(&ListParams::default()).await.map_err(|e| e.to_string())?.items.into_iter().find(|v| {
            v.metadata.name.as_deref().is_some_and(|v| v.starts_with(&prefix))
                && v.spec.as_ref().and_then(|s| s.claim_ref.as_ref()).and_then(|r| r.name.as_deref())
                    == Some(name.as_str())
        });
        let selected =
            pvc.metadata.annotations.as_ref().and_then(|a| a.get("volume.kubernetes.io/selected-node")).cloned();
        let volume = match (asked, selected) {
            (Some(v), _) => v.metadata.name.clone().unwrap_or_default(),
            (None, Some(node)) => {
                // The provisioner: a volume on the chosen node, reserved for the claim.
                let volume = format!("c{n}-dyn-{name}");
                let size = spec
                    .resources
                    .as_ref()
                    .and_then(|r| r.requests.as_ref())
                    .and_then(|r| r.get("storage"))
                    .map(|q| q.0.clone())
                    .unwrap_or_else(|| "1Gi".into());
                create(pvs, json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": volume},
                    "spec": {"capacity": {"storage": size}, "accessModes": spec.access_modes.clone().unwrap_or_default(),
                             "storageClassName": spec.storage_class_name.clone().unwrap_or_default(),
                             "hostPath": {"path": "/oracle/dyn"},
                             "claimRef": {"namespace": pvc.metadata.namespace, "name": name, "uid": pvc.metadata.uid},
                             "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                                 {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}}}))
                .await?;
                volume
            }
            (None, None) => continue,
        };
        status(pvs, &volume, json!({"phase": "Bound"})).await?;
        claims
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({
                "metadata": {"annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
                "spec": {"volumeName": volume}})),
            )
            .await
            .map_err(|e| format!("binding {name}: {e}"))?;
        status(
            claims,
            &name,
            json!({"phase": "Bound", "accessModes": spec.access_modes, "capacity": {"storage": "1Gi"}}),
        )
        .await?;
    }
    Ok(())
}

/// The scheduler's outcome for one pod, while playing the controllers.
async fn outcome(
    n: u32,
    pods: &Api<Pod>,
    pvs: &Api<PersistentVolume>,
    claims: &Api<PersistentVolumeClaim>,
    name: &str,
) -> Result<Outcome, String> {
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let p = pods.get(name).await.map_err(|e| format!("reading pod {name}: {e}"))?;
        if let Some(node) = p.spec.as_ref().and_then(|s| s.node_name.clone()) {
            return Ok(Outcome::Bound(node));
        }
        let refused = p.status.as_ref().and_then(|s| s.conditions.as_ref()).and_then(|cs| {
            cs.iter().find(|c| c.type_ == "PodScheduled" && c.status == "False").and_then(|c| c.message.clone())
        });
        if let Some(message) = refused {
            return Ok(Outcome::Refused(message));
        }
        if Instant::now() > deadline {
            return Err(format!("pod {name}: no scheduling outcome within 40 s"));
        }
        play_controllers(n, pvs, claims).await?;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

pub async fn run_storage_case(
    client: &kube::Client,
    snapshots: &Snapshots,
    n: u32,
    case: &StorageCase,
) -> Result<u32, String> {
    let ns = format!("storage-{n}");
    let namespaces: Api<Namespace> = Api::all(client.clone());
    create(&namespaces, json!({"metadata": {"name": ns}})).await?;
    let nodes: Api<Node> = Api::all(client.clone());
    let classes: Api<StorageClass> = Api::all(client.clone());
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &ns);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let mut docs = Vec::new();
    for (i, node) in case.nodes.iter().enumerate() {
        docs.push(node_json(n, i, node));
        create(&nodes, docs.last().cloned().unwrap_or_default()).await?;
    }
    for i in 0..CLASSES.len() {
        create(&classes, class_json(n, i)).await?;
    }
    // Volumes a claim is bound to, and by which claim.
    let mut bound_to: BTreeMap<usize, usize> = BTreeMap::new();
    for (i, c) in case.claims.iter().enumerate() {
        if let ClaimState::Bound(v) = c.state
            && !case.volumes.is_empty()
        {
            bound_to.entry(v % case.volumes.len()).or_insert(i);
        }
    }
    for (i, v) in case.volumes.iter().enumerate() {
        let mut doc = volume_json(n, i, v, case.nodes.len());
        if let Some(c) = bound_to.get(&i) {
            doc["spec"]["claimRef"] = json!({"namespace": ns, "name": format!("claim-{c}")});
        }
        docs.push(doc.clone());
        create(&pvs, doc).await?;
        status(
            &pvs,
            &volume_name(n, i),
            json!({"phase": if bound_to.contains_key(&i) { "Bound" } else { "Available" }}),
        )
        .await?;
    }
    for (i, c) in case.claims.iter().enumerate() {
        // A claim bound to a volume another claim holds is left unbound.
        let c = match c.state {
            ClaimState::Bound(v) if case.volumes.is_empty() || bound_to.get(&(v % case.volumes.len())) != Some(&i) => {
                ClaimCase { state: ClaimState::Unbound, ..c.clone() }
            }
            _ => c.clone(),
        };
        let doc = claim_json(n, i, &c, case.volumes.len());
        docs.push(doc.clone());
        create(&claims, doc).await?;
        let name = format!("claim-{i}");
        match c.state {
            ClaimState::Bound(_) | ClaimState::BoundToMissing => {
                status(&claims, &name, json!({"phase": "Bound", "accessModes": [MODES[c.mode]], "capacity": {"storage": format!("{}Gi", SIZES_GI[c.size])}})).await?
            }
            ClaimState::Lost => status(&claims, &name, json!({"phase": "Lost"})).await?,
            // The API server's admission adds the pvc-protection finalizer: it stays, deleting.
            ClaimState::Deleting => {
                claims.delete(&name, &DeleteParams::default()).await.map_err(|e| e.to_string())?;
            }
            ClaimState::Unbound => {}
        }
    }
    // An ephemeral volume's claim made for nobody.
    for (i, p) in case.pods.iter().enumerate() {
        if p.ephemeral == Some(true) {
            create(
                &claims,
                json!({"metadata": {"name": format!("p{i}-scratch")}, "spec": {"accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}}, "storageClassName": class_name(n, 1)}}),
            )
            .await?;
        }
    }
    let fillers: Vec<(usize, u32)> = case
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, node)| node.gpus_used > 0)
        .map(|(i, node)| (i, node.gpus_used))
        .collect();
    for &(i, gpus) in &fillers {
        create(&pods, filler_json(n, i, gpus)).await?;
    }
    let names: Vec<String> = (0..case.nodes.len()).map(|i| node_name(n, i)).collect();
    let namespace = Sym::new(&ns);
    let prefix = format!("c{n}-");
    kgpu_sees(snapshots, "the case's nodes, storage and fillers", |s| {
        let (prefix, namespace) = (prefix.as_str(), &namespace);
        let ours = |kind: StorageKind| {
            s.storage
                .iter()
                .filter(move |(k, _)| {
                    k.kind == kind && (k.namespace.as_ref() == Some(namespace) || k.name.starts_with(prefix))
                })
                .map(|(_, o)| &**o)
        };
        let volumes_settled = ours(StorageKind::Volume)
            .filter(|o| matches!(o, StorageObject::Volume(v) if v.phase != VolumePhase::Pending))
            .count()
            == case.volumes.len();
        // Every claim as the scheduler will read it: Lost ones Lost, deleted ones deleting (or gone).
        let claims_settled = case.claims.iter().enumerate().all(|(i, c)| {
            let claim = ours(StorageKind::Claim).find_map(|o| match o {
                StorageObject::Claim(x) if x.name.as_ref() == format!("claim-{i}") => Some(x),
                _ => None,
            });
            match (&c.state, claim) {
                (ClaimState::Deleting, None) => true,
                (ClaimState::Deleting, Some(x)) => x.deleting,
                (ClaimState::Lost, Some(x)) => x.phase == ClaimPhase::Lost,
                (_, x) => x.is_some(),
            }
        });
        names.iter().all(|name| s.nodes.contains_key(&Sym::new(name)))
            && ours(StorageKind::Class).count() == CLASSES.len()
            && volumes_settled
            && claims_settled
            && s.pods.values().filter(|p| p.namespace == *namespace && p.node.is_some()).count() == fillers.len()
    })
    .await?;
    tokio::time::sleep(Duration::from_millis(150)).await;
    let mut report = Vec::new();
    for (i, p) in case.pods.iter().enumerate() {
        let doc = pod_json(i, p, case.claims.len());
        docs.push(doc.clone());
        let name = format!("p{i}");
        if let Err(e) = create(&pods, doc).await {
            report.push(format!("{name}: refused by the API server: {e}"));
            continue;
        }
        let outcome = outcome(n, &pods, &pvs, &claims, &name).await?;
        let key = PodKey::new(&ns, &name);
        let snap = kgpu_sees(snapshots, "the pod's outcome and its claims", |s| {
            s.pods.get(&key).is_some_and(|p| match &outcome {
                Outcome::Bound(_) => p.node.is_some(),
                Outcome::Refused(_) => p.unschedulable.is_some(),
            })
        })
        .await?;
        let now = snap.clock.max(kgpu::clock::wall_clock());
        let refusal = kgpu_refusal(&snap, &key);
        let verdicts = kgpu_verdicts(&snap, now, &key)?;
        let problem = match (&outcome, &refusal) {
            (Outcome::Bound(node), Some(refusal)) => {
                Some(format!("the scheduler bound it to {node}; kgpu: refused before any node: {refusal}"))
            }
            (Outcome::Bound(node), None) if !verdicts.get(node).is_some_and(|r| r.is_empty()) => {
                Some(format!("the scheduler bound it to {node}; kgpu: {node} does not fit ({:?})", verdicts.get(node)))
            }
            (Outcome::Bound(_), None) => None,
            (Outcome::Refused(message), Some(refusal)) => {
                REFUSALS_BEFORE_ANY_NODE.fetch_add(1, Ordering::SeqCst);
                (scheduler_msg::whole_pod_reason(message) != Some(refusal.as_str()))
                    .then(|| format!("refused ({message}); kgpu: refused before any node: {refusal}"))
            }
            (Outcome::Refused(message), None) => {
                if message.contains("volume") || message.contains("PersistentVolume") {
                    VOLUME_NODE_REFUSALS.fetch_add(1, Ordering::SeqCst);
                }
                refusal_problem(&snap, now, (&ns, &name), message, &verdicts, case.nodes.len())
            }
        };
        if let Some(p) = problem {
            report.push(format!("{name}: {p}\n    per node: {verdicts:?}"));
        }
    }
    let _ = pods
        .delete_collection(
            &DeleteParams { grace_period_seconds: Some(0), ..Default::default() },
            &ListParams::default(),
        )
        .await;
    for i in 0..case.nodes.len() {
        let _ = nodes.delete(&node_name(n, i), &DeleteParams::default()).await;
    }
    if report.is_empty() {
        Ok(case.pods.len() as u32)
    } else {
        Err(format!(
            "{}\nobjects:\n{}",
            report.join("\n"),
            docs.iter().map(|d| serde_json::to_string(d).unwrap_or_default()).collect::<Vec<_>>().join("\n")
        ))
    }
}
