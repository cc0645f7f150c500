//! A mystery's disguise: the built cluster's team namespaces and node names
//! are replaced, consistently and by the seed, so a candidate who has met a
//! scenario before cannot recognise it by its names (`research/job-llm-sft`
//! on `gpu-05` becomes, say, `perception/job-llm-sft` on `fra1-gpu-021`).
//!
//! Only names change: every count, shape, time and verdict stays the
//! scenario's, so its lesson grades the answer as before. System namespaces
//! keep their names (a cluster without `kube-system` would give itself away).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use crate::model::{
    ClusterEvent, Condition, EventKey, Gang, GangKey, Labels, Node, NodeSelectorTerm, Pod, PodKey, Queue, QueueKey, Sym,
};

use super::SimCluster;
use super::rng::Rng;

/// Team namespaces a disguised cluster may use.
const NAMESPACES: &[&str] = &[
    "perception",
    "speech",
    "recsys",
    "search-ranking",
    "genai",
    "robotics",
    "forecasting",
    "fraud",
    "translation",
    "bio-ml",
    "maps",
    "trust-safety",
    "ads",
    "vision",
    "llm-platform",
    "weather",
];

/// Site prefixes of disguised node names (`fra1-gpu-21`).
const SITES: &[&str] = &["iad1", "sjc2", "fra1", "ams3", "nrt1", "syd2", "lhr1", "ord4", "sin1", "dub2"];

/// Namespaces that keep their names: every cluster has them.
fn is_system(namespace: &str) -> bool {
    // "": cluster-scoped objects' events (a Node's).
    namespace.is_empty()
        || namespace.starts_with("kube-")
        || namespace.ends_with("-system")
        || matches!(namespace, "default" | "gpu-operator" | "nvidia-gpu-operator" | "monitoring")
}

/// What a disguise renamed: (old, new) namespaces and nodes.
#[derive(Clone, Debug, Default)]
pub struct Renames {
    pub namespaces: Vec<(Sym, Sym)>,
    pub nodes: Vec<(Sym, Sym)>,
}

/// The renaming chosen for one cluster.
pub(super) struct Disguise {
    namespaces: HashMap<Sym, Sym>,
    nodes: HashMap<Sym, Sym>,
    /// Node renames, longest first, for replacing inside other names and texts.
    node_texts: Vec<(Box<str>, Box<str>)>,
    namespace_texts: Vec<(Box<str>, Box<str>)>,
}

impl Disguise {
    pub(super) fn choose(seed: u64, namespaces: &BTreeSet<Sym>, nodes: &BTreeSet<Sym>) -> Disguise {
        // Its own stream: the cluster's own generator must play as it would undisguised.
        let mut rng = Rng::new(seed ^ 0xD15C_0153);
        let mut pool: Vec<&str> =
            NAMESPACES.iter().copied().filter(|n| !namespaces.iter().any(|o| o.as_str() == *n)).collect();
        let teams: Vec<Sym> = namespaces.iter().filter(|&n| !is_system(n.as_str())).cloned().collect();
        let mut picked: Vec<&str> = Vec::new();
        while picked.len() < teams.len() && !pool.is_empty() {
            let at = (rng.next_u64() % pool.len() as u64) as usize;
            picked.push(pool.swap_remove(at));
        }
        // In the old names' order, so that ties the analyses break by name
        // (which of two deadlocked gangs the plan unblocks) break the same way.
        picked.sort_unstable();
        let chosen: HashMap<Sym, Sym> = teams.into_iter().zip(picked).map(|(old, new)| (old, Sym::new(new))).collect();
        let site = rng.pick(SITES).copied().unwrap_or("site1");
        let offset = rng.range(1, 40) as u64;
        let renamed_nodes: HashMap<Sym, Sym> = node_names(site, offset, nodes);
        let by_length = |map: &HashMap<Sym, Sym>| {
            let mut texts: Vec<(Box<str>, Box<str>)> =
                map.iter().map(|(o, n)| (Box::from(o.as_str()), Box::from(n.as_str()))).collect();
            texts.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.0.cmp(&b.0)));
            texts
        };
        Disguise {
            node_texts: by_length(&renamed_nodes),
            namespace_texts: by_length(&chosen),
            namespaces: chosen,
            nodes: renamed_nodes,
        }
    }

    pub(super) fn namespace(&self, old: Sym) -> Sym {
        self.namespaces.get(&old).cloned().unwrap_or(old)
    }

    pub(super) fn node(&self, old: Sym) -> Sym {
        self.nodes.get(&old).cloned().unwrap_or(old)
    }

    /// A queue named after its team's namespace (`research` in `research`)
    /// takes the namespace's new name; others keep theirs.
    fn queue(&self, old: Sym) -> Sym {
        self.namespace(old)
    }

    /// A name or message with every old node and namespace name in it
    /// replaced, in one pass (a new name is never renamed again): node names
    /// also inside other names (`train-gpu-05-0`, not `gpu-050`), namespaces
    /// only as whole words (`research/job-x`, `ClusterQueue research`).
    pub(super) fn text(&self, text: &str) -> String {
        let word = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        while at < text.len() {
            let before = text[..at].chars().next_back();
            let rest = &text[at..];
            let node = self.node_texts.iter().find(|(old, _)| {
                !old.is_empty()
                    && rest.starts_with(&**old)
                    && !before.is_some_and(|c| c.is_ascii_alphanumeric())
                    && !rest[old.len()..].chars().next().is_some_and(|c| c.is_ascii_digit())
            });
            let found = node.or_else(|| {
                self.namespace_texts.iter().find(|(old, _)| {
                    !old.is_empty()
                        && rest.starts_with(&**old)
                        && !before.is_some_and(word)
                        && !rest[old.len()..].chars().next().is_some_and(word)
                })
            });
            match found {
                Some((old, new)) => {
                    out.push_str(new);
                    at += old.len();
                }
                None => {
                    let c = rest.chars().next().unwrap_or_default();
                    out.push(c);
                    at += c.len_utf8().max(1);
                }
            }
        }
        out
    }

    fn sym_text(&self, s: &Sym) -> Sym {
        Sym::new(&self.text(s.as_str()))
    }

    fn arc_text(&self, s: &str) -> Arc<str> {
        Arc::from(self.text(s).as_str())
    }

    fn pod_key(&self, k: &PodKey) -> PodKey {
        PodKey { namespace: self.namespace(k.namespace.clone()), name: self.arc_text(&k.name) }
    }

    fn gang_key(&self, k: &GangKey) -> GangKey {
        GangKey { kind: k.kind, namespace: self.namespace(k.namespace.clone()), name: self.arc_text(&k.name) }
    }

    fn event_key(&self, k: &EventKey) -> EventKey {
        EventKey { namespace: self.namespace(k.namespace.clone()), name: self.arc_text(&k.name) }
    }

    fn labels(&self, labels: &Labels) -> Labels {
        labels.iter().map(|(k, v)| (k.clone(), self.sym_text(v))).collect()
    }

    fn conditions(&self, conditions: &mut [Condition]) {
        for c in conditions {
            c.message = self.text(&c.message).into();
        }
    }

    fn terms(&self, terms: &[NodeSelectorTerm]) -> Box<[NodeSelectorTerm]> {
        let values = |reqs: &[crate::model::node::Requirement]| {
            reqs.iter()
                .map(|r| {
                    let mut r = r.clone();
                    r.values = r.values.iter().map(|v| self.sym_text(v)).collect();
                    r
                })
                .collect()
        };
        terms
            .iter()
            .map(|t| NodeSelectorTerm { expressions: values(&t.expressions), fields: values(&t.fields) })
            .collect()
    }

    fn pod(&self, p: &Pod) -> Pod {
        let mut p = p.clone();
        p.namespace = self.namespace(p.namespace);
        p.name = self.arc_text(&p.name);
        p.node = p.node.map(|n| self.node(n));
        p.group = p.group.as_ref().map(|g| self.sym_text(g));
        for owner in [&mut p.owner, &mut p.workload].into_iter().flatten() {
            owner.name = self.sym_text(&owner.name);
        }
        p.queue = p.queue.map(|q| self.queue(q));
        p.message = p.message.as_deref().map(|m| self.text(m).into());
        if let Some(u) = p.unschedulable.as_mut() {
            u.message = self.text(&u.message).into();
        }
        p.node_selector = self.labels(&p.node_selector);
        p.affinity = self.terms(&p.affinity);
        p.claims = p
            .claims
            .iter()
            .map(|c| crate::model::PodClaim {
                name: c.name.clone(),
                source: match &c.source {
                    crate::model::ClaimSource::Claim(n) => crate::model::ClaimSource::Claim(self.arc_text(n)),
                    crate::model::ClaimSource::Template(t) => crate::model::ClaimSource::Template(self.arc_text(t)),
                    crate::model::ClaimSource::ExtendedResources(r) => {
                        crate::model::ClaimSource::ExtendedResources(r.clone())
                    }
                },
                generated: c.generated.as_deref().map(|g| self.arc_text(g)),
            })
            .collect();
        p
    }

    /// A slice's node and pool, a claim's namespace, names, pools and pods.
    fn dra_object(&self, o: &crate::model::DraObject) -> crate::model::DraObject {
        use crate::model::DraObject;
        match o {
            DraObject::Slice(s) => {
                let mut s = s.clone();
                s.name = self.arc_text(&s.name);
                s.pool = self.sym_text(&s.pool);
                s.node = s.node.map(|n| self.node(n));
                DraObject::Slice(s)
            }
            DraObject::Class(c) => DraObject::Class(c.clone()),
            DraObject::Claim(c) => {
                let mut c = c.clone();
                c.namespace = self.namespace(c.namespace);
                c.name = self.arc_text(&c.name);
                c.allocated_node = c.allocated_node.map(|n| self.node(n));
                for a in c.allocated.iter_mut() {
                    a.pool = self.sym_text(&a.pool);
                }
                c.reserved_for = c.reserved_for.iter().map(|r| self.arc_text(r)).collect();
                c.owner_pod = c.owner_pod.as_deref().map(|p| self.arc_text(p));
                DraObject::Claim(c)
            }
            DraObject::Domain(d) => {
                let mut d = d.clone();
                d.namespace = self.namespace(d.namespace);
                d.name = self.arc_text(&d.name);
                d.template = self.arc_text(&d.template);
                for n in d.nodes.iter_mut() {
                    n.name = self.node(n.name.clone());
                }
                DraObject::Domain(d)
            }
        }
    }

    fn gang(&self, g: &Gang) -> Gang {
        let mut g = g.clone();
        g.namespace = self.namespace(g.namespace);
        g.name = self.arc_text(&g.name);
        g.queue = g.queue.map(|q| self.queue(q));
        if let Some(owner) = g.owner.as_mut() {
            owner.name = self.sym_text(&owner.name);
        }
        if let Some(a) = g.admission.as_mut() {
            a.cluster_queue = self.queue(a.cluster_queue.clone());
        }
        self.conditions(&mut g.conditions);
        for check in g.admission_checks.iter_mut() {
            check.message = self.text(&check.message).into();
        }
        g
    }

    fn queue_object(&self, q: &Queue) -> Queue {
        let mut q = q.clone();
        q.namespace = q.namespace.map(|n| self.namespace(n));
        q.name = self.queue(q.name);
        q.cluster_queue = q.cluster_queue.map(|c| self.queue(c));
        self.conditions(&mut q.conditions);
        q
    }

    fn node_object(&self, n: &Node) -> Node {
        let mut n = n.clone();
        n.name = self.node(n.name.clone());
        n.labels = crate::model::NodeLabels::new(n.name.clone(), &self.labels(&n.labels.to_labels()));
        n
    }

    fn event(&self, e: &ClusterEvent) -> ClusterEvent {
        let mut e = e.clone();
        e.namespace = self.namespace(e.namespace);
        e.name = self.arc_text(&e.name);
        e.object_name = self.arc_text(&e.object_name);
        e.message = self.text(&e.message).into();
        e
    }
}

/// Every node `{site}-node-NNN`, numbered from `offset` in the old names'
/// order (ties the analyses break by name break the same way). The old stem
/// goes: `ts-`, `mig-`, `spot-` told the candidate what kind of node it was.
fn node_names(site: &str, offset: u64, nodes: &BTreeSet<Sym>) -> HashMap<Sym, Sym> {
    let last = offset.saturating_add(nodes.len() as u64);
    let width = last.to_string().len().max(3);
    nodes.iter().zip(offset..).map(|(old, n)| (old.clone(), Sym::new(&format!("{site}-node-{n:0width$}")))).collect()
}

fn rekey<K: Ord, V>(map: &mut BTreeMap<K, V>, key: impl Fn(&K) -> K, value: impl Fn(&V) -> V) {
    *map = std::mem::take(map).iter().map(|(k, v)| (key(k), value(v))).collect();
}

fn rekey_hashed<K: Eq + std::hash::Hash, V: Clone>(map: &mut HashMap<K, V>, key: impl Fn(&K) -> K) {
    *map = std::mem::take(map).into_iter().map(|(k, v)| (key(&k), v)).collect();
}

impl SimCluster {
    /// Renames the built cluster's team namespaces and nodes by the seed
    /// (a mystery's): everything else stays as the scenario built it.
    pub fn disguise(&mut self, seed: u64) -> Renames {
        let namespaces: BTreeSet<Sym> = self
            .pods
            .keys()
            .map(|k| k.namespace.clone())
            .chain(self.gangs.keys().map(|k| k.namespace.clone()))
            .chain(self.queues.keys().filter_map(|k| k.namespace.clone()))
            .chain(self.events.keys().map(|k| k.namespace.clone()))
            .collect();
        let nodes: BTreeSet<Sym> = self.nodes.keys().cloned().collect();
        let d = Disguise::choose(seed, &namespaces, &nodes);
        let node_key = |n: &Sym| d.node(n.clone());
        rekey(&mut self.nodes, node_key, |n| d.node_object(n));
        rekey(&mut self.devices, node_key, |dev| {
            let mut dev = dev.clone();
            dev.node = d.node(dev.node);
            dev
        });
        rekey(&mut self.specs, node_key, |s| {
            let mut s = s.clone();
            s.name = d.node(Sym::new(&s.name)).as_str().to_string();
            s
        });
        rekey_hashed(&mut self.faults, node_key);
        rekey_hashed(&mut self.mig_jobs, node_key);
        rekey(&mut self.pods, |k| d.pod_key(k), |p| d.pod(p));
        rekey_hashed(&mut self.plans, |k| d.pod_key(k));
        rekey(&mut self.idle_holders, |k| d.pod_key(k), |t| *t);
        rekey(&mut self.gpu_memory, |k| d.pod_key(k), |m| *m);
        rekey(&mut self.gangs, |k| d.gang_key(k), |g| d.gang(g));
        rekey_hashed(&mut self.templates, |k| d.gang_key(k));
        for t in self.templates.values_mut() {
            t.pod = d.pod(&t.pod);
        }
        rekey(
            &mut self.queues,
            |k| QueueKey {
                kind: k.kind,
                namespace: k.namespace.clone().map(|n| d.namespace(n)),
                name: d.queue(k.name.clone()),
            },
            |q| d.queue_object(q),
        );
        rekey(&mut self.events, |k| d.event_key(k), |e| d.event(e));
        let dra: Vec<crate::model::DraObject> = self.dra.values().map(|o| d.dra_object(o)).collect();
        self.dra = dra.into_iter().map(|o| (o.key(), o)).collect();
        // The next batch carries everything anew (initial_events).
        self.dirty = Default::default();
        let sorted = |map: &HashMap<Sym, Sym>| {
            let mut pairs: Vec<(Sym, Sym)> = map.iter().map(|(o, n)| (o.clone(), n.clone())).collect();
            pairs.sort_unstable_by(|(a, _), (b, _)| a.as_str().cmp(b.as_str()));
            pairs
        };
        Renames { namespaces: sorted(&d.namespaces), nodes: sorted(&d.nodes) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_names_hide_their_kind_and_keep_their_order() {
        let old: BTreeSet<Sym> = ["gpu-05", "mig-01", "spot-a", "ts-008"].into_iter().map(Sym::new).collect();
        let new = node_names("fra1", 16, &old);
        let in_order: Vec<&str> = old.iter().map(|o| new[o].as_str()).collect();
        assert_eq!(in_order, ["fra1-node-016", "fra1-node-017", "fra1-node-018", "fra1-node-019"]);
    }

    fn disguise(namespaces: &[&str], nodes: &[&str]) -> Disguise {
        let set = |names: &[&str]| names.iter().map(|n| Sym::new(n)).collect::<BTreeSet<Sym>>();
        Disguise::choose(7, &set(namespaces), &set(nodes))
    }

    #[test]
    fn node_names_are_replaced_inside_names_but_not_as_prefixes_of_longer_numbers() {
        let d = disguise(&[], &["gpu-1", "gpu-10"]);
        let (one, ten) = (d.node(Sym::new("gpu-1")), d.node(Sym::new("gpu-10")));
        assert_eq!(
            d.text("train-gpu-1-0 gpu-10 gpu-1.failedscheduling xgpu-1 gpu-100"),
            format!("train-{one}-0 {ten} {one}.failedscheduling xgpu-1 gpu-100")
        );
    }

    #[test]
    fn a_new_name_is_never_renamed_again() {
        // A new name may contain an old one (`node-021` holds `node-02`…).
        let nodes: Vec<String> = (1..=40).map(|i| format!("gpu-{i:02}")).collect();
        let names: Vec<&str> = nodes.iter().map(String::as_str).collect();
        let d = disguise(&[], &names);
        for old in &names {
            assert_eq!(d.text(old), d.node(Sym::new(old)).as_str());
        }
    }

    #[test]
    fn namespaces_are_replaced_as_whole_words_only() {
        let d = disguise(&["ml"], &[]);
        let new = d.namespace(Sym::new("ml"));
        assert_ne!(new.as_str(), "ml");
        assert_eq!(
            d.text("ml/job-a in ClusterQueue ml; html ml-ops"),
            format!("{new}/job-a in ClusterQueue {new}; html ml-ops")
        );
    }

    #[test]
    fn system_namespaces_keep_their_names_and_teams_get_distinct_new_ones() {
        let d = disguise(&["", "kube-system", "gpu-operator", "kueue-system", "team-a", "team-b", "research"], &[]);
        for system in ["", "kube-system", "gpu-operator", "kueue-system"] {
            assert_eq!(d.namespace(Sym::new(system)).as_str(), system);
        }
        let teams: BTreeSet<String> =
            ["team-a", "team-b", "research"].into_iter().map(|t| d.namespace(Sym::new(t)).to_string()).collect();
        assert_eq!(teams.len(), 3);
        assert!(teams.iter().all(|t| NAMESPACES.contains(&t.as_str())), "{teams:?}");
    }
}
