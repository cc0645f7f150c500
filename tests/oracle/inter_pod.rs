//! Pod labels, required inter-pod affinity and anti-affinity, and hard
//! topology spread constraints for the scheduler oracle: what
//! kube-scheduler's InterPodAffinity and PodTopologySpread filters read.
//! Pods of a case share a namespace and two `app` values, so that they meet;
//! the case's namespace is labelled with a team ([`team_of`]), which the
//! terms' namespaceSelectors read.

use proptest::prelude::*;
use serde_json::{Value, json};

const APPS: [&str; 2] = ["a", "b"];
const TEAMS: [&str; 2] = ["red", "blue"];

/// The `team` label of case `n`'s namespace.
pub fn team_of(n: u32) -> &'static str {
    TEAMS[n as usize % TEAMS.len()]
}

/// Where a term looks for pods.
#[derive(Clone, Debug)]
pub enum NamespaceScope {
    /// Neither field: the pod's own namespace.
    Own,
    /// `namespaceSelector: {}`: every namespace.
    All,
    /// `namespaceSelector` on the `team` label (In, NotIn, Exists, DoesNotExist).
    Team { operator: &'static str, team: &'static str },
    /// `namespaceSelector` on `kubernetes.io/metadata.name` (the API
    /// server's label): the pod's own namespace, or `default`.
    Named { own: bool },
}
/// Topology keys: the node's own, its zone and pool, and one no node has.
const TOPOLOGY_KEYS: [&str; 4] =
    ["kubernetes.io/hostname", "topology.kubernetes.io/zone", "kgpu.dev/pool", "kgpu.dev/missing"];

#[derive(Clone, Debug)]
pub struct PodTermCase {
    pub app: &'static str,
    /// In, NotIn or Exists on `app`.
    pub operator: &'static str,
    pub topology_key: &'static str,
    pub namespaces: NamespaceScope,
}

#[derive(Clone, Debug)]
pub struct SpreadCase {
    pub app: &'static str,
    pub topology_key: &'static str,
    pub max_skew: i32,
    pub min_domains: Option<i32>,
    pub node_affinity_policy: Option<&'static str>,
    pub node_taints_policy: Option<&'static str>,
    /// `matchLabelKeys: [tier]`.
    pub match_tier: bool,
}

#[derive(Clone, Debug, Default)]
pub struct InterPodCase {
    pub app: Option<&'static str>,
    pub tier: Option<&'static str>,
    pub affinity: Vec<PodTermCase>,
    pub anti_affinity: Vec<PodTermCase>,
    pub spread: Vec<SpreadCase>,
}

fn namespace_scope() -> impl Strategy<Value = NamespaceScope> {
    prop_oneof![
        6 => Just(NamespaceScope::Own),
        1 => Just(NamespaceScope::All),
        2 => (prop::sample::select(vec!["In", "NotIn", "Exists", "DoesNotExist"]), prop::sample::select(TEAMS.to_vec()))
            .prop_map(|(operator, team)| NamespaceScope::Team { operator, team }),
        1 => any::<bool>().prop_map(|own| NamespaceScope::Named { own }),
    ]
}

fn pod_term() -> impl Strategy<Value = PodTermCase> {
    (
        prop::sample::select(APPS.to_vec()),
        prop::sample::select(vec!["In", "In", "NotIn", "Exists"]),
        prop::sample::select(vec![0usize, 0, 1, 1, 2, 3]),
        namespace_scope(),
    )
        .prop_map(|(app, operator, key, namespaces)| PodTermCase {
            app,
            operator,
            topology_key: TOPOLOGY_KEYS[key],
            namespaces,
        })
}

fn spread() -> impl Strategy<Value = SpreadCase> {
    (
        prop::sample::select(APPS.to_vec()),
        prop::sample::select(vec![0usize, 1, 1, 2, 3]),
        1i32..=2,
        prop::option::weighted(0.3, 1i32..=4),
        prop::option::weighted(0.3, prop::sample::select(vec!["Honor", "Ignore"])),
        prop::option::weighted(0.3, prop::sample::select(vec!["Honor", "Ignore"])),
        prop::bool::weighted(0.2),
    )
        .prop_map(|(app, key, max_skew, min_domains, affinity, taints, match_tier)| SpreadCase {
            app,
            topology_key: TOPOLOGY_KEYS[key],
            max_skew,
            min_domains,
            node_affinity_policy: affinity,
            node_taints_policy: taints,
            match_tier,
        })
}

pub fn inter_pod() -> impl Strategy<Value = InterPodCase> {
    with_rules(0.5)
}

/// Nearly every pod labelled and with rules: for clusters where they meet.
pub fn crowded() -> impl Strategy<Value = InterPodCase> {
    with_rules(0.9)
}

fn with_rules(share: f64) -> impl Strategy<Value = InterPodCase> {
    let rules = (
        prop::collection::vec(pod_term(), 0..=1),
        prop::collection::vec(pod_term(), 0..=1),
        prop::collection::vec(spread(), 0..=2),
    );
    (
        prop::option::weighted(0.7, prop::sample::select(APPS.to_vec())),
        prop::option::weighted(0.3, prop::sample::select(vec!["x", "y"])),
        prop::option::weighted(share, rules),
    )
        .prop_map(|(app, tier, rules)| {
            let (affinity, anti_affinity, mut spread) = rules.unwrap_or_default();
            // Two constraints on one key and action are refused by the API server.
            spread.dedup_by(|a, b| a.topology_key == b.topology_key);
            InterPodCase { app, tier, affinity, anti_affinity, spread }
        })
}

fn selector(app: &str, operator: &str) -> Value {
    match operator {
        "Exists" => json!({"matchExpressions": [{"key": "app", "operator": "Exists"}]}),
        "In" => json!({"matchLabels": {"app": app}}),
        op => json!({"matchExpressions": [{"key": "app", "operator": op, "values": [app]}]}),
    }
}

fn term_json(t: &PodTermCase, namespace: &str) -> Value {
    let mut v = json!({"labelSelector": selector(t.app, t.operator), "topologyKey": t.topology_key});
    match &t.namespaces {
        NamespaceScope::Own => {}
        NamespaceScope::All => v["namespaceSelector"] = json!({}),
        NamespaceScope::Team { operator, team } => {
            let mut requirement = json!({"key": "team", "operator": operator});
            if matches!(*operator, "In" | "NotIn") {
                requirement["values"] = json!([team]);
            }
            v["namespaceSelector"] = json!({"matchExpressions": [requirement]});
        }
        NamespaceScope::Named { own } => {
            let name = if *own { namespace } else { "default" };
            v["namespaceSelector"] = json!({"matchLabels": {"kubernetes.io/metadata.name": name}});
        }
    }
    v
}

/// Writes the case into the pod's metadata and spec (`namespace`: the pod's).
pub fn apply(case: &InterPodCase, namespace: &str, metadata: &mut Value, spec: &mut Value) {
    let mut labels = serde_json::Map::new();
    if let Some(app) = case.app {
        labels.insert("app".into(), json!(app));
    }
    if let Some(tier) = case.tier {
        labels.insert("tier".into(), json!(tier));
    }
    if !labels.is_empty() {
        metadata["labels"] = Value::Object(labels);
    }
    if !case.affinity.is_empty() {
        spec["affinity"]["podAffinity"] = json!({"requiredDuringSchedulingIgnoredDuringExecution":
            case.affinity.iter().map(|t| term_json(t, namespace)).collect::<Vec<_>>()});
    }
    if !case.anti_affinity.is_empty() {
        spec["affinity"]["podAntiAffinity"] = json!({"requiredDuringSchedulingIgnoredDuringExecution":
            case.anti_affinity.iter().map(|t| term_json(t, namespace)).collect::<Vec<_>>()});
    }
    if !case.spread.is_empty() {
        let constraints: Vec<Value> = case
            .spread
            .iter()
            .map(|s| {
                let mut v = json!({"maxSkew": s.max_skew, "topologyKey": s.topology_key,
                    "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": s.app}}});
                if let Some(m) = s.min_domains {
                    v["minDomains"] = json!(m);
                }
                if let Some(p) = s.node_affinity_policy {
                    v["nodeAffinityPolicy"] = json!(p);
                }
                if let Some(p) = s.node_taints_policy {
                    v["nodeTaintsPolicy"] = json!(p);
                }
                if s.match_tier {
                    v["matchLabelKeys"] = json!(["tier"]);
                }
                v
            })
            .collect();
        spec["topologySpreadConstraints"] = json!(constraints);
    }
}
