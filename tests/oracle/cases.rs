//! The generator of small clusters for the scheduler oracle: GPU and CPU
//! nodes with real GPU Feature Discovery label sets, taints of every effect,
//! cordons (with the taint the node lifecycle controller adds), NotReady and
//! unreachable nodes (with their NoSchedule and NoExecute taints), extra
//! labels; pods with GPU, MIG, cpu and memory requests, init containers and
//! native sidecars, pod overhead (a RuntimeClass), tolerations of every
//! form, nodeSelector and required node affinity (several terms, every
//! operator, matchFields), host ports (hostNetwork, hostPort on every
//! address or one, TCP and UDP, on a native sidecar); pod labels, required
//! pod affinity and anti-affinity and hard topology spread constraints
//! (`inter_pod.rs`).
//!
//! Every case renders as Kubernetes JSON (`node_json`, `pod_json`), so a
//! failing case can be pasted into a fixture test.

use proptest::prelude::*;
use serde_json::{Value, json};

/// Real GFD label sets (tests/fixtures/nodes/), by name.
pub const LABEL_SETS: [(&str, &str); 4] = [
    ("h100-mixed", include_str!("../fixtures/nodes/h100-80gb-mig-mixed-all-balanced.labels.json")),
    ("a100-none", include_str!("../fixtures/nodes/a100-40gb-mig-strategy-none.labels.json")),
    ("a100-single", include_str!("../fixtures/nodes/a100-40gb-mig-strategy-single.labels.json")),
    ("a100-mixed", include_str!("../fixtures/nodes/a100-40gb-mig-strategy-mixed.labels.json")),
];

/// MIG resources the generated nodes may advertise and pods may ask for.
pub const MIG_PROFILES: [&str; 3] = ["1g.10gb", "2g.20gb", "3g.40gb"];

#[derive(Clone, Debug)]
pub enum Readiness {
    Ready,
    /// Ready=False; the lifecycle controller's not-ready taints.
    NotReady,
    /// Ready=Unknown; the unreachable taints.
    Unreachable,
}

#[derive(Clone, Debug)]
pub struct TaintCase {
    pub key: &'static str,
    pub value: &'static str,
    pub effect: &'static str,
}

#[derive(Clone, Debug)]
pub struct NodeCase {
    /// Index into `LABEL_SETS`, or none for a CPU node.
    pub labels: Option<usize>,
    pub gpus: u32,
    pub mig: Option<(usize, u32)>,
    pub cpu: u32,
    pub memory_gi: u32,
    pub max_pods: u32,
    pub pool: &'static str,
    pub zone: &'static str,
    pub taints: Vec<TaintCase>,
    pub cordoned: bool,
    pub readiness: Readiness,
}

#[derive(Clone, Debug)]
pub struct ContainerCase {
    pub cpu_m: u32,
    pub memory_mi: u32,
    pub gpus: u32,
}

#[derive(Clone, Debug)]
pub struct TolerationCase {
    pub key: Option<&'static str>,
    pub exists: bool,
    pub value: &'static str,
    pub effect: Option<&'static str>,
}

#[derive(Clone, Debug)]
pub struct RequirementCase {
    pub key: &'static str,
    pub operator: &'static str,
    pub values: Vec<String>,
}

#[derive(Clone, Debug)]
pub struct TermCase {
    pub expressions: Vec<RequirementCase>,
    /// `metadata.name` In/NotIn a node index of the case.
    pub fields: Option<(&'static str, usize)>,
}

#[derive(Clone, Debug)]
pub struct PodCase {
    pub main: ContainerCase,
    pub mig: Option<(usize, u32)>,
    pub inits: Vec<ContainerCase>,
    pub sidecars: Vec<ContainerCase>,
    pub overhead: bool,
    pub tolerations: Vec<TolerationCase>,
    pub selector: Vec<(&'static str, String)>,
    pub affinity: Vec<TermCase>,
    pub host_port: Option<HostPortCase>,
    /// Labels, pod (anti-)affinity and spread constraints.
    pub inter_pod: super::inter_pod::InterPodCase,
    /// A PriorityClass (`preempt.rs`); none: priority 0.
    pub priority_class: Option<&'static str>,
    /// A 30 s termination grace period: preempted, it stays Terminating
    /// (no kubelet ends it), so its preemptor waits nominated.
    pub lingers: bool,
    /// `spec.schedulerName` of a scheduler that does not run here: no one
    /// places it or says why.
    pub scheduler_name: Option<&'static str>,
}

/// A port bound on the node (NodePorts): the same two port numbers across a
/// case's pods, so that pods meet on them.
#[derive(Clone, Debug)]
pub struct HostPortCase {
    pub port: u16,
    pub how: HostPortHow,
}

#[derive(Clone, Copy, Debug)]
pub enum HostPortHow {
    /// `hostNetwork: true`: the API server sets hostPort to the containerPort.
    HostNetwork,
    /// `hostPort` on every address.
    Any,
    /// `hostPort` on one address (`hostIP`).
    OneAddress,
    /// `hostPort` over UDP.
    Udp,
    /// `hostPort` on a native sidecar (an init container that keeps running).
    Sidecar,
}

#[derive(Clone, Debug)]
pub struct ClusterCase {
    pub nodes: Vec<NodeCase>,
    pub pods: Vec<PodCase>,
}

const TAINT_KEYS: [(&str, &str); 4] =
    [("nvidia.com/gpu", "present"), ("dedicated", "ml"), ("kgpu.dev/maintenance", ""), ("spot", "true")];
const EFFECTS: [&str; 3] = ["NoSchedule", "PreferNoSchedule", "NoExecute"];
const POOLS: [&str; 2] = ["a", "b"];
const ZONES: [&str; 3] = ["z1", "z2", "z3"];

fn taint() -> impl Strategy<Value = TaintCase> {
    (0..TAINT_KEYS.len(), 0..EFFECTS.len()).prop_map(|(k, e)| TaintCase {
        key: TAINT_KEYS[k].0,
        value: TAINT_KEYS[k].1,
        effect: EFFECTS[e],
    })
}

pub fn node() -> impl Strategy<Value = NodeCase> {
    (
        prop::option::weighted(0.8, 0..LABEL_SETS.len()),
        prop::sample::select(vec![0u32, 1, 2, 4, 8]),
        prop::option::weighted(0.2, (0..MIG_PROFILES.len(), 1u32..=4)),
        prop::sample::select(vec![8u32, 32, 96]),
        prop::sample::select(vec![32u32, 256, 1024]),
        prop::sample::select(vec![2u32, 110]),
        (0..POOLS.len(), 0..ZONES.len()),
        prop::collection::vec(taint(), 0..=2),
        prop::bool::weighted(0.15),
        prop::sample::select(vec![0u8, 0, 0, 0, 0, 0, 1, 2]),
    )
        .prop_map(|(labels, gpus, mig, cpu, memory_gi, max_pods, (pool, zone), taints, cordoned, ready)| {
            NodeCase {
                gpus: if labels.is_some() { gpus } else { 0 },
                mig: if labels.is_some() { mig } else { None },
                labels,
                cpu,
                memory_gi,
                max_pods,
                pool: POOLS[pool],
                zone: ZONES[zone],
                taints,
                cordoned,
                readiness: match ready {
                    1 => Readiness::NotReady,
                    2 => Readiness::Unreachable,
                    _ => Readiness::Ready,
                },
            }
        })
}

fn container(max_gpus: u32) -> impl Strategy<Value = ContainerCase> {
    (
        prop::sample::select(vec![100u32, 2000, 16000, 64000]),
        prop::sample::select(vec![128u32, 4096, 200_000]),
        0..=max_gpus,
    )
        .prop_map(|(cpu_m, memory_mi, gpus)| ContainerCase { cpu_m, memory_mi, gpus })
}

fn toleration() -> impl Strategy<Value = TolerationCase> {
    (
        prop::option::weighted(0.9, 0..TAINT_KEYS.len() + 2),
        any::<bool>(),
        prop::option::weighted(0.5, 0..EFFECTS.len()),
        any::<bool>(),
    )
        .prop_map(|(key, exists, effect, right_value)| {
            // Keys beyond the taint pool: the lifecycle controller's.
            let key = key.map(|k| match k {
                k if k < TAINT_KEYS.len() => TAINT_KEYS[k].0,
                k if k == TAINT_KEYS.len() => "node.kubernetes.io/not-ready",
                _ => "node.kubernetes.io/unschedulable",
            });
            let value = key
                .and_then(|k| TAINT_KEYS.iter().find(|(tk, _)| *tk == k))
                .map_or("", |(_, v)| if right_value { *v } else { "other" });
            // An empty key only goes with Exists.
            TolerationCase { exists: exists || key.is_none(), key, value, effect: effect.map(|e| EFFECTS[e]) }
        })
}

fn requirement(nodes: usize) -> impl Strategy<Value = RequirementCase> {
    let _ = nodes;
    (
        prop::sample::select(vec![
            "kgpu.dev/pool",
            "topology.kubernetes.io/zone",
            "nvidia.com/gpu.count",
            "nvidia.com/gpu.product",
            "kgpu.dev/missing",
        ]),
        prop::sample::select(vec!["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]),
        prop::collection::vec(
            prop::sample::select(vec![
                "a",
                "b",
                "z1",
                "z2",
                "0",
                "1",
                "4",
                "7",
                "NVIDIA-H100-80GB-HBM3",
                "A100-SXM4-40GB",
            ]),
            1..=2,
        ),
    )
        .prop_map(|(key, operator, values)| {
            let values: Vec<String> = match operator {
                "Exists" | "DoesNotExist" => Vec::new(),
                // Gt and Lt take exactly one integer.
                "Gt" | "Lt" => vec![values.iter().find(|v| v.parse::<i64>().is_ok()).map_or("1", |v| v).to_string()],
                _ => values.into_iter().map(str::to_string).collect(),
            };
            RequirementCase { key, operator, values }
        })
}

fn term(nodes: usize) -> impl Strategy<Value = TermCase> {
    (
        prop::collection::vec(requirement(nodes), 0..=2),
        prop::option::weighted(0.2, (prop::sample::select(vec!["In", "NotIn"]), 0..nodes.max(1))),
    )
        .prop_map(|(expressions, fields)| TermCase { expressions, fields })
        // A term with neither matches no node; the API server refuses it outright.
        .prop_filter("a term needs an expression or a field", |t| !t.expressions.is_empty() || t.fields.is_some())
}

pub fn pod(nodes: usize) -> impl Strategy<Value = PodCase> {
    (
        container(8),
        prop::option::weighted(0.15, (0..MIG_PROFILES.len(), 1u32..=2)),
        prop::collection::vec(container(2), 0..=1),
        prop::collection::vec(container(0), 0..=1),
        prop::bool::weighted(0.2),
        prop::collection::vec(toleration(), 0..=2),
        prop::collection::vec(
            (prop::sample::select(vec!["kgpu.dev/pool", "topology.kubernetes.io/zone", "nvidia.com/gpu"]), 0..3usize),
            0..=1,
        ),
        prop::option::weighted(0.3, prop::collection::vec(term(nodes), 1..=2)),
        prop::option::weighted(
            0.3,
            (
                prop::sample::select(vec![29500u16, 9400]),
                prop::sample::select(vec![
                    HostPortHow::HostNetwork,
                    HostPortHow::Any,
                    HostPortHow::OneAddress,
                    HostPortHow::Udp,
                    HostPortHow::Sidecar,
                ]),
            ),
        ),
        super::inter_pod::inter_pod(),
        prop::option::weighted(0.06, prop::sample::select(vec!["kai-scheduler", "volcano"])),
    )
        .prop_map(
            |(
                main,
                mig,
                inits,
                sidecars,
                overhead,
                tolerations,
                selector,
                affinity,
                host_port,
                inter_pod,
                scheduler_name,
            )| PodCase {
                main: ContainerCase { gpus: if mig.is_some() { 0 } else { main.gpus }, ..main },
                mig,
                inits,
                sidecars,
                overhead,
                tolerations,
                selector: selector
                    .into_iter()
                    .map(|(k, i)| {
                        let v = match k {
                            "kgpu.dev/pool" => POOLS[i % POOLS.len()].to_string(),
                            "topology.kubernetes.io/zone" => ZONES[i].to_string(),
                            // The classic mistake: a GPU count as a selector.
                            _ => ["1", "4", "8"][i].to_string(),
                        };
                        (k, v)
                    })
                    .collect(),
                affinity: affinity.unwrap_or_default(),
                host_port: host_port.map(|(port, how)| HostPortCase { port, how }),
                inter_pod,
                priority_class: None,
                lingers: false,
                scheduler_name,
            },
        )
}

/// A Ready, untainted node with room for many small pods.
pub fn roomy_node() -> impl Strategy<Value = NodeCase> {
    node().prop_map(|n| NodeCase {
        cpu: 96,
        memory_gi: 1024,
        max_pods: 110,
        taints: Vec::new(),
        cordoned: false,
        readiness: Readiness::Ready,
        ..n
    })
}

/// Where pods meet: 2–5 Ready, untainted, roomy nodes and 3–6 small pods,
/// nearly all with labels and rules about each other (InterPodAffinity,
/// PodTopologySpread decide).
pub fn crowd() -> impl Strategy<Value = ClusterCase> {
    prop::collection::vec(roomy_node(), 2..=5)
        .prop_flat_map(|nodes| {
            let n = nodes.len();
            let small = (pod(n), super::inter_pod::crowded()).prop_map(|(p, inter_pod)| PodCase {
                main: ContainerCase { cpu_m: 100, memory_mi: 128, gpus: 0 },
                mig: None,
                inits: Vec::new(),
                sidecars: Vec::new(),
                host_port: None,
                tolerations: Vec::new(),
                overhead: false,
                inter_pod,
                ..p
            });
            (Just(nodes), prop::collection::vec(small, 3..=6))
        })
        .prop_map(|(nodes, pods)| ClusterCase { nodes, pods })
}

/// 1–5 nodes, 1–5 pods.
pub fn cluster() -> impl Strategy<Value = ClusterCase> {
    prop::collection::vec(node(), 1..=5)
        .prop_flat_map(|nodes| {
            let n = nodes.len();
            (Just(nodes), prop::collection::vec(pod(n), 1..=5))
        })
        .prop_map(|(nodes, pods)| ClusterCase { nodes, pods })
}

pub fn node_name(case: u32, i: usize) -> String {
    format!("o{case}-n{i}")
}

/// The node as the API server and its controllers would hold it.
pub fn node_json(case: u32, i: usize, n: &NodeCase) -> Value {
    let name = node_name(case, i);
    let mut labels: serde_json::Map<String, Value> = match n.labels {
        Some(set) => serde_json::from_str(LABEL_SETS[set].1).unwrap_or_default(),
        None => serde_json::Map::new(),
    };
    // GFD sanitises values as a label must be (the docs' sample shows
    // "NVIDIA DGX", which no API server accepts).
    for v in labels.values_mut() {
        if let Some(text) = v.as_str() {
            *v = json!(text.replace(' ', "-"));
        }
    }
    labels.insert("kubernetes.io/hostname".into(), json!(name));
    labels.insert("kgpu.dev/pool".into(), json!(n.pool));
    labels.insert("topology.kubernetes.io/zone".into(), json!(n.zone));
    if n.labels.is_some() {
        labels.insert("nvidia.com/gpu.count".into(), json!(n.gpus.to_string()));
    }
    let mut resources =
        json!({"cpu": n.cpu.to_string(), "memory": format!("{}Gi", n.memory_gi), "pods": n.max_pods.to_string()});
    if n.labels.is_some() {
        resources["nvidia.com/gpu"] = json!(n.gpus.to_string());
    }
    if let Some((p, count)) = n.mig {
        resources[format!("nvidia.com/mig-{}", MIG_PROFILES[p])] = json!(count.to_string());
    }
    let mut taints: Vec<Value> = n
        .taints
        .iter()
        .map(|t| {
            let mut v = json!({"key": t.key, "effect": t.effect});
            if !t.value.is_empty() {
                v["value"] = json!(t.value);
            }
            v
        })
        .collect();
    // Taints on one node are unique by (key, effect).
    let mut seen = std::collections::HashSet::new();
    taints.retain(|t| seen.insert((t["key"].to_string(), t["effect"].to_string())));
    // What the node lifecycle controller adds (TaintNodesByCondition, NoExecute eviction).
    let (ready, condition_taint) = match n.readiness {
        Readiness::Ready => ("True", None),
        Readiness::NotReady => ("False", Some("node.kubernetes.io/not-ready")),
        Readiness::Unreachable => ("Unknown", Some("node.kubernetes.io/unreachable")),
    };
    if let Some(key) = condition_taint {
        for effect in ["NoSchedule", "NoExecute"] {
            taints.push(json!({"key": key, "effect": effect}));
        }
    }
    if n.cordoned {
        taints.push(json!({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}));
    }
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {"unschedulable": n.cordoned, "taints": taints},
        "status": {"capacity": resources, "allocatable": resources,
                   "conditions": [{"type": "Ready", "status": ready, "reason": "Oracle", "message": "set by the oracle"}]},
    })
}

fn container_json(name: &str, c: &ContainerCase, mig: Option<(usize, u32)>) -> Value {
    let mut limits = json!({});
    if c.gpus > 0 {
        limits["nvidia.com/gpu"] = json!(c.gpus.to_string());
    }
    if let Some((p, n)) = mig {
        limits[format!("nvidia.com/mig-{}", MIG_PROFILES[p])] = json!(n.to_string());
    }
    json!({"name": name, "image": "registry.k8s.io/pause:3.10",
           "resources": {"requests": {"cpu": format!("{}m", c.cpu_m), "memory": format!("{}Mi", c.memory_mi)}, "limits": limits}})
}

pub fn pod_json(case: u32, namespace: &str, i: usize, p: &PodCase) -> Value {
    let mut spec = json!({
        "containers": [container_json("main", &p.main, p.mig)],
        "terminationGracePeriodSeconds": if p.lingers { 30 } else { 0 },
    });
    if let Some(class) = p.priority_class {
        spec["priorityClassName"] = json!(class);
    }
    if let Some(name) = p.scheduler_name {
        spec["schedulerName"] = json!(name);
    }
    let mut inits: Vec<Value> =
        p.inits.iter().enumerate().map(|(j, c)| container_json(&format!("init{j}"), c, None)).collect();
    for (j, c) in p.sidecars.iter().enumerate() {
        let mut s = container_json(&format!("sidecar{j}"), c, None);
        s["restartPolicy"] = json!("Always");
        inits.push(s);
    }
    if !inits.is_empty() {
        spec["initContainers"] = json!(inits);
    }
    if p.overhead {
        spec["runtimeClassName"] = json!(RUNTIME_CLASS);
    }
    if let Some(hp) = &p.host_port {
        let port = match hp.how {
            HostPortHow::HostNetwork => {
                spec["hostNetwork"] = json!(true);
                json!({"containerPort": hp.port})
            }
            HostPortHow::Any => json!({"containerPort": 8080, "hostPort": hp.port}),
            HostPortHow::OneAddress => json!({"containerPort": 8080, "hostPort": hp.port, "hostIP": "10.0.0.1"}),
            HostPortHow::Udp => json!({"containerPort": 8080, "hostPort": hp.port, "protocol": "UDP"}),
            HostPortHow::Sidecar => {
                let mut sidecar = container_json("ports", &ContainerCase { cpu_m: 10, memory_mi: 16, gpus: 0 }, None);
                sidecar["restartPolicy"] = json!("Always");
                sidecar["ports"] = json!([{"containerPort": 8080, "hostPort": hp.port}]);
                let mut inits = spec["initContainers"].as_array().cloned().unwrap_or_default();
                inits.push(sidecar);
                spec["initContainers"] = json!(inits);
                Value::Null
            }
        };
        if !port.is_null() {
            spec["containers"][0]["ports"] = json!([port]);
        }
    }
    if !p.tolerations.is_empty() {
        spec["tolerations"] = Value::Array(
            p.tolerations
                .iter()
                .map(|t| {
                    let mut v = json!({"operator": if t.exists { "Exists" } else { "Equal" }});
                    if let Some(k) = t.key {
                        v["key"] = json!(k);
                    }
                    if !t.exists {
                        v["value"] = json!(t.value);
                    }
                    if let Some(e) = t.effect {
                        v["effect"] = json!(e);
                    }
                    v
                })
                .collect(),
        );
    }
    if !p.selector.is_empty() {
        spec["nodeSelector"] = Value::Object(p.selector.iter().map(|(k, v)| (k.to_string(), json!(v))).collect());
    }
    if !p.affinity.is_empty() {
        let terms: Vec<Value> = p
            .affinity
            .iter()
            .map(|t| {
                let mut term = json!({});
                if !t.expressions.is_empty() {
                    term["matchExpressions"] = Value::Array(
                        t.expressions
                            .iter()
                            .map(|r| {
                                let mut v = json!({"key": r.key, "operator": r.operator});
                                if !r.values.is_empty() {
                                    v["values"] = json!(r.values);
                                }
                                v
                            })
                            .collect(),
                    );
                }
                if let Some((op, n)) = t.fields {
                    term["matchFields"] =
                        json!([{"key": "metadata.name", "operator": op, "values": [node_name(case, n)]}]);
                }
                term
            })
            .collect();
        spec["affinity"] =
            json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}});
    }
    let mut metadata = json!({"name": format!("p{i}"), "namespace": namespace});
    super::inter_pod::apply(&p.inter_pod, namespace, &mut metadata, &mut spec);
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec})
}

/// The RuntimeClass whose overhead pods with `overhead` get (from the
/// RuntimeClass admission plugin, as on a real cluster).
pub const RUNTIME_CLASS: &str = "kgpu-oracle-kata";

pub fn runtime_class_json() -> Value {
    json!({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": RUNTIME_CLASS},
           "handler": "kata", "overhead": {"podFixed": {"cpu": "250m", "memory": "160Mi"}}})
}
