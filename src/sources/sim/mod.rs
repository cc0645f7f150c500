//! The embedded simulated GPU cluster behind `kgpu demo`.
//!
//! Deterministic from its seed, with its own clock. It keeps Kubernetes-
//! shaped records (model types), runs a simplified kube-scheduler, a
//! Kueue-like admission loop, a Volcano-like gang scheduler, a mig-manager
//! and the GPU Operator's upgrade states, and reports every change as
//! `ModelEvent`s — exactly what the live source does for a real cluster.

pub mod catalog;
mod claims;
mod controllers;
pub mod disguise;
pub mod driver;
mod kueue;
pub mod rng;
pub mod scenarios;
mod scheduler;
mod usage;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use crate::model::{
    AgentStatus, ClusterEvent, EventKey, EventType, Feed, Flavor, Gang, GangKey, ModelEvent, Node, NodeDevices, Object,
    ObjectKey, Pod, PodKey, PodPhase, Queue, QueueKey, ScenarioInfo, SourceInfo, SourceKind, Sym, Taint, Timestamp,
    Toleration,
};

pub use catalog::NodeSpec;
use rng::Rng;

/// 2026-11-30T09:00:00Z: every scenario starts here, so screens are stable.
pub const EPOCH: Timestamp = 1_796_029_200;

/// The object an event is about (`involvedObject`).
#[derive(Clone, Debug)]
pub struct Involved<'a> {
    pub kind: &'a str,
    /// Empty for cluster-scoped objects (nodes).
    pub namespace: Sym,
    pub name: &'a str,
}

/// What can go wrong with a node, injected by scenarios.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Ready and advertising, but every GPU pod fails admission.
    BlackHole,
    /// A mig-manager that never finishes a reconfiguration.
    MigWedge,
    /// Driver upgrade that does not progress.
    UpgradeStuck,
}

/// How a simulated pod behaves once it runs.
#[derive(Clone, Debug, Default)]
pub struct PodPlan {
    /// Seconds of work after it starts; `None` runs until deleted.
    pub runs_for: Option<i64>,
    /// Replace the pod when it fails (a Job or ReplicaSet controller).
    pub replace_on_failure: bool,
}

/// A Kueue workload's member pods, created when it is admitted.
#[derive(Clone, Debug)]
pub struct GangTemplate {
    pub pod: Pod,
    pub plan: PodPlan,
}

/// Changing the simulated cluster from outside (the actions of the cockpit).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    Cordon(Sym),
    Uncordon(Sym),
    /// Evict one pod; its controller may replace it.
    Evict(PodKey),
    /// Kueue: set `spec.active`.
    SetActive(GangKey, bool),
    /// Delete every member pod of a gang (plain-pod requeue).
    DeleteGangPods(GangKey),
    /// Set `nvidia.com/mig.config`; the mig-manager takes it from there.
    SetMigConfig(Sym, String),
    /// Add a taint to a node (kept if one with its key and effect is there).
    Taint(Sym, Taint),
    /// Remove a node's taints with this key.
    Untaint(Sym, Sym),
    /// Add a toleration to a pod (the one pod field that may grow).
    Tolerate(PodKey, Toleration),
}

#[derive(Default)]
struct Dirty {
    nodes: BTreeSet<Sym>,
    devices: BTreeSet<Sym>,
    pods: BTreeSet<PodKey>,
    deleted_pods: BTreeSet<PodKey>,
    gangs: BTreeSet<GangKey>,
    queues: BTreeSet<QueueKey>,
    events: BTreeSet<EventKey>,
    /// Claims made, allocated, released or deleted.
    dra: BTreeSet<crate::model::DraKey>,
}

/// A reconfiguration in flight on one node.
#[derive(Clone, Debug)]
struct MigJob {
    config: String,
    done_at: Option<Timestamp>,
}

pub struct SimCluster {
    pub now: Timestamp,
    rng: Rng,
    info: ScenarioInfo,
    specs: BTreeMap<Sym, NodeSpec>,
    nodes: BTreeMap<Sym, Node>,
    devices: BTreeMap<Sym, NodeDevices>,
    pods: BTreeMap<PodKey, Pod>,
    plans: HashMap<PodKey, PodPlan>,
    gangs: BTreeMap<GangKey, Gang>,
    templates: HashMap<GangKey, GangTemplate>,
    queues: BTreeMap<QueueKey, Queue>,
    flavors: BTreeMap<Sym, Flavor>,
    events: BTreeMap<EventKey, ClusterEvent>,
    faults: HashMap<Sym, Fault>,
    mig_jobs: HashMap<Sym, MigJob>,
    /// Arrivals per hour in the live demo (0 = a static scenario).
    pub churn_per_hour: f64,
    /// Driver the upgrade controller rolls out, when one is in progress.
    upgrade_target: Option<catalog::Driver>,
    /// Pods that hold GPUs and do nothing, since when (the scenario's say).
    idle_holders: BTreeMap<PodKey, Timestamp>,
    /// GPU memory a pod uses (MiB), where a scenario says.
    gpu_memory: BTreeMap<PodKey, u64>,
    /// DRA objects (slices, classes, claims, templates): the resourceclaim
    /// controller (`claims.rs`) makes and releases claims, the scheduler
    /// allocates them.
    dra: BTreeMap<crate::model::DraKey, crate::model::DraObject>,
    dirty: Dirty,
    seq: u64,
}

impl SimCluster {
    pub fn new(info: ScenarioInfo, seed: u64) -> SimCluster {
        SimCluster {
            now: EPOCH,
            rng: Rng::new(seed),
            info,
            specs: BTreeMap::new(),
            nodes: BTreeMap::new(),
            devices: BTreeMap::new(),
            pods: BTreeMap::new(),
            plans: HashMap::new(),
            gangs: BTreeMap::new(),
            templates: HashMap::new(),
            queues: BTreeMap::new(),
            flavors: BTreeMap::new(),
            events: BTreeMap::new(),
            faults: HashMap::new(),
            mig_jobs: HashMap::new(),
            churn_per_hour: 0.0,
            upgrade_target: None,
            idle_holders: BTreeMap::new(),
            gpu_memory: BTreeMap::new(),
            dra: BTreeMap::new(),
            dirty: Dirty::default(),
            seq: 0,
        }
    }

    pub fn scenario(&self) -> &ScenarioInfo {
        &self.info
    }

    /// A mystery: the cluster says nothing of the scenario it plays.
    pub fn hide_scenario(&mut self) {
        self.info = ScenarioInfo {
            name: "mystery".into(),
            title: "A cluster in trouble".into(),
            story: "Something on this cluster is wrong. Find what with the cockpit and name it: :answer CAUSE.".into(),
            signal: String::new(),
        };
    }

    // ---- building a scenario -------------------------------------------

    pub fn add_gpu_node(&mut self, spec: NodeSpec) -> Sym {
        let devices = catalog::devices(&spec, self.now);
        let mut node = catalog::node(&spec, &devices);
        node.operator.upgrade_since = Some(spec.created);
        node.operator.mig_config_since = Some(spec.created);
        let name = node.name.clone();
        self.devices.insert(name.clone(), devices);
        self.nodes.insert(name.clone(), node);
        self.specs.insert(name.clone(), spec);
        self.dirty.nodes.insert(name.clone());
        self.dirty.devices.insert(name.clone());
        name
    }

    pub fn add_node(&mut self, node: Node) {
        self.dirty.nodes.insert(node.name.clone());
        self.nodes.insert(node.name.clone(), node);
    }

    /// Changes a node in place (labels, taints, allocatable), keeping derived fields right.
    pub fn edit_node(&mut self, name: &str, edit: impl FnOnce(&mut Node)) {
        let key = Sym::new(name);
        if let Some(n) = self.nodes.get_mut(&key) {
            edit(n);
            self.dirty.nodes.insert(key);
        }
    }

    pub fn edit_devices(&mut self, name: &str, edit: impl FnOnce(&mut NodeDevices)) {
        let key = Sym::new(name);
        if let Some(d) = self.devices.get_mut(&key) {
            edit(d);
            self.dirty.devices.insert(key);
        }
    }

    /// Replaces a node's labels and re-derives the GPU/operator fields.
    pub fn set_node_label(&mut self, name: &str, key: &str, value: Option<&str>) {
        let now = self.now;
        self.edit_node(name, |n| set_label(n, key, value, now));
    }

    pub fn fault(&mut self, node: &str, fault: Fault) {
        self.faults.insert(Sym::new(node), fault);
    }

    pub fn add_dra(&mut self, object: crate::model::DraObject) {
        self.dra.insert(object.key(), object);
    }

    pub fn add_pod(&mut self, pod: Pod, plan: PodPlan) -> PodKey {
        let key = pod.key();
        self.plans.insert(key.clone(), plan);
        self.pods.insert(key.clone(), pod);
        self.dirty.pods.insert(key.clone());
        key
    }

    pub fn add_gang(&mut self, gang: Gang, template: Option<GangTemplate>) -> GangKey {
        let key = gang.key();
        if let Some(t) = template {
            self.templates.insert(key.clone(), t);
        }
        self.gangs.insert(key.clone(), gang);
        self.dirty.gangs.insert(key.clone());
        key
    }

    pub fn add_queue(&mut self, queue: Queue) {
        let key = queue.key();
        self.queues.insert(key.clone(), queue);
        self.dirty.queues.insert(key);
    }

    pub fn add_flavor(&mut self, flavor: Flavor) {
        self.flavors.insert(flavor.name.clone(), flavor);
    }

    pub fn set_upgrade_target(&mut self, driver: catalog::Driver) {
        self.upgrade_target = Some(driver);
    }

    /// The pod holds its GPUs idle from `since` on (its agent reads 0–2%).
    pub fn idle_holder(&mut self, namespace: &str, name: &str, since: Timestamp) {
        self.idle_holders.insert(PodKey::new(namespace, name), since);
    }

    /// The pod uses this much GPU memory (MiB) in its agent's readings.
    pub fn gpu_memory(&mut self, namespace: &str, name: &str, mib: u64) {
        self.gpu_memory.insert(PodKey::new(namespace, name), mib);
    }

    /// What every node's simulated agent reads about utilization now.
    fn usage_readings(&self) -> Vec<Object> {
        // Members of a gang not all running wait at their rendezvous: they
        // hold their GPUs and compute nothing, since they started.
        let mut idle = self.idle_holders.clone();
        for gang in self.gangs.values() {
            let members: Vec<&Pod> = self
                .pods
                .values()
                .filter(|p| p.namespace == gang.namespace && !p.phase.is_terminal())
                .filter(|p| {
                    p.group.as_ref().is_some_and(|g| g.as_str() == &*gang.name)
                        || gang.owner.as_ref().is_some_and(|o| p.owner.as_ref() == Some(o))
                })
                .collect();
            let running = members.iter().filter(|p| p.phase == PodPhase::Running).count();
            if running < gang.min_members as usize {
                for p in members.iter().filter(|p| p.phase == PodPhase::Running) {
                    idle.entry(p.key()).or_insert(p.transitioned);
                }
            }
        }
        let dra = self.dra_held_gpus();
        let mut running: BTreeMap<Sym, Vec<&Pod>> = BTreeMap::new();
        for p in self.pods.values().filter(|p| p.phase == PodPhase::Running) {
            if let Some(node) = p.node.clone() {
                running.entry(node).or_default().push(p);
            }
        }
        self.devices
            .values()
            .filter(|d| d.status == AgentStatus::Reporting)
            .map(|d| {
                let pods = running.get(&d.node).map_or(&[][..], Vec::as_slice);
                let replicas = self.specs.get(&d.node).and_then(|s| s.time_slicing).unwrap_or(1);
                Object::Usage(usage::reading(
                    d,
                    pods,
                    &usage::Said { idle: &idle, memory: &self.gpu_memory, replicas, dra: &dra },
                    self.now,
                ))
            })
            .collect()
    }

    /// GPUs (by the UUID their slice publishes) allocated to the claims of
    /// running pods.
    fn dra_held_gpus(&self) -> BTreeMap<Sym, &Pod> {
        use crate::model::DraObject;
        let mut out = BTreeMap::new();
        for o in self.dra.values() {
            let DraObject::Claim(claim) = o else { continue };
            let Some(pod) = claim
                .reserved_for
                .first()
                .and_then(|name| self.pods.get(&PodKey::new(claim.namespace.as_str(), name)))
                .filter(|p| p.phase == PodPhase::Running)
            else {
                continue;
            };
            for a in claim.allocated.iter() {
                let uuid = self.dra.values().find_map(|o| match o {
                    DraObject::Slice(s) if s.driver == a.driver && s.pool == a.pool => s
                        .devices
                        .iter()
                        .find(|d| d.name == a.device)
                        .and_then(|d| d.attribute("gpu.nvidia.com/uuid"))
                        .and_then(|v| v.as_str())
                        .map(Sym::new),
                    _ => None,
                });
                if let Some(uuid) = uuid {
                    out.insert(uuid, pod);
                }
            }
        }
        out
    }

    /// A node's agent reports `devices` (a node added without a catalog spec).
    pub fn add_devices(&mut self, devices: NodeDevices) {
        self.dirty.devices.insert(devices.node.clone());
        self.devices.insert(devices.node.clone(), devices);
    }

    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    pub fn next_suffix(&mut self) -> String {
        self.rng.suffix()
    }

    pub fn rng(&mut self) -> &mut Rng {
        &mut self.rng
    }

    pub fn node(&self, name: &str) -> Option<&Node> {
        self.nodes.get(&Sym::new(name))
    }

    pub fn pods(&self) -> impl Iterator<Item = &Pod> {
        self.pods.values()
    }

    pub fn gangs(&self) -> impl Iterator<Item = &Gang> {
        self.gangs.values()
    }

    /// How a pod behaves once it runs.
    pub fn plan(&self, key: &PodKey) -> Option<&PodPlan> {
        self.plans.get(key)
    }

    /// The member pod a queued gang's controller will create, with its plan.
    pub fn template(&self, key: &GangKey) -> Option<&GangTemplate> {
        self.templates.get(key)
    }

    /// The faults scenarios injected, by node.
    pub fn faults(&self) -> impl Iterator<Item = (Sym, Fault)> + '_ {
        self.faults.iter().map(|(n, f)| (n.clone(), *f))
    }

    /// Records an event about an object, aggregating repeats like the
    /// Kubernetes event recorder (same object, reason and message → count++).
    pub fn record(&mut self, kind: EventType, about: Involved<'_>, reason: &str, message: &str, source: &str) {
        let Involved { kind: object_kind, namespace, name: object } = about;
        let name = format!("{object}.{}", reason.to_ascii_lowercase());
        let key = EventKey { namespace: namespace.clone(), name: Arc::from(name.as_str()) };
        let now = self.now;
        match self.events.get_mut(&key) {
            Some(e) if &*e.message == message => {
                e.count += 1;
                e.last = now;
            }
            Some(e) => {
                e.message = message.into();
                e.count = 1;
                e.first = now;
                e.last = now;
            }
            None => {
                self.events.insert(
                    key.clone(),
                    ClusterEvent {
                        namespace,
                        name: Arc::from(name.as_str()),
                        kind,
                        reason: Sym::new(reason),
                        object_kind: Sym::new(object_kind),
                        object_name: Arc::from(object),
                        message: message.into(),
                        count: 1,
                        first: now,
                        last: now,
                        source: Sym::new(source),
                    },
                );
            }
        }
        self.dirty.events.insert(key);
    }

    /// Runs admission and scheduling until nothing changes, without moving
    /// the clock: the state a scenario starts in.
    pub fn settle(&mut self) {
        for _ in 0..64 {
            let before = self.seq;
            kueue::admit(self);
            claims::sync(self);
            scheduler::schedule(self);
            controllers::start_bound_pods(self);
            if self.seq == before {
                break;
            }
        }
    }

    /// Advances the clock by `dt` seconds and runs every controller once.
    pub fn step(&mut self, dt: i64) -> Vec<ModelEvent> {
        let before = self.now;
        self.now += dt.max(0);
        controllers::finish_work(self);
        controllers::replace_failed(self);
        controllers::churn(self, dt);
        controllers::mig_manager(self);
        controllers::upgrades(self);
        kueue::admit(self);
        claims::sync(self);
        scheduler::schedule(self);
        controllers::start_bound_pods(self);
        controllers::garbage_collect(self);
        let mut out = vec![ModelEvent::Clock(self.now)];
        out.extend(self.drain_changes());
        if self.now / usage::READING_EVERY != before / usage::READING_EVERY {
            out.extend(self.usage_readings().into_iter().map(ModelEvent::Upsert));
        }
        out
    }

    /// Everything, as a fresh list per feed (what a reconnecting watcher sees).
    pub fn initial_events(&mut self) -> Vec<ModelEvent> {
        self.dirty = Dirty::default();
        let mut out = vec![
            ModelEvent::Source(SourceInfo { kind: SourceKind::Demo, name: self.info.name.clone() }),
            ModelEvent::Scenario(self.info.clone()),
            ModelEvent::Clock(self.now),
        ];
        let resync = |feed: Feed, objects: Vec<Object>| ModelEvent::Resync { feed, objects };
        out.push(resync(Feed::Nodes, self.nodes.values().cloned().map(Object::Node).collect()));
        let (from_agents, from_exporters): (Vec<Object>, Vec<Object>) =
            self.usage_readings().into_iter().partition(|o| o.feed() == Feed::Agents);
        out.push(resync(
            Feed::Agents,
            self.devices.values().cloned().map(Object::Devices).chain(from_agents).collect(),
        ));
        out.push(resync(Feed::DcgmExporter, from_exporters));
        out.push(resync(Feed::Pods, self.pods.values().cloned().map(Object::Pod).collect()));
        out.push(resync(Feed::Events, self.events.values().cloned().map(Object::Event).collect()));
        for feed in [Feed::Workloads, Feed::PodGroups] {
            out.push(resync(
                feed,
                self.gangs.values().cloned().map(Object::Gang).filter(|o| o.feed() == feed).collect(),
            ));
        }
        for feed in [Feed::ClusterQueues, Feed::LocalQueues, Feed::VolcanoQueues] {
            out.push(resync(
                feed,
                self.queues.values().cloned().map(Object::Queue).filter(|o| o.feed() == feed).collect(),
            ));
        }
        out.push(resync(Feed::ResourceFlavors, self.flavors.values().cloned().map(Object::Flavor).collect()));
        // DRA, where the scenario has it (elsewhere its feeds are absent, as
        // on a cluster before 1.34).
        if !self.dra.is_empty() {
            let domains = self.dra.values().any(|o| matches!(o, crate::model::DraObject::Domain(_)));
            let feeds = [Feed::ResourceSlices, Feed::DeviceClasses, Feed::ResourceClaims, Feed::ResourceClaimTemplates];
            // NVIDIA's ComputeDomain CRD only where the scenario installs it.
            for feed in feeds.into_iter().chain(domains.then_some(Feed::ComputeDomains)) {
                out.push(resync(
                    feed,
                    self.dra.values().cloned().map(Object::Dra).filter(|o| o.feed() == feed).collect(),
                ));
            }
        }
        // The GPU Operator of a scenario with a rollout says where it goes.
        if let Some(target) = self.upgrade_target {
            out.push(resync(Feed::ClusterPolicies, vec![Object::DriverPolicy(cluster_policy(target))]));
        }
        out
    }

    fn drain_changes(&mut self) -> Vec<ModelEvent> {
        let dirty = std::mem::take(&mut self.dirty);
        let mut out = Vec::new();
        for k in dirty.nodes {
            if let Some(n) = self.nodes.get(&k) {
                out.push(ModelEvent::Upsert(Object::Node(n.clone())));
            }
        }
        for k in dirty.devices {
            if let Some(d) = self.devices.get(&k) {
                out.push(ModelEvent::Upsert(Object::Devices(d.clone())));
            }
        }
        for k in dirty.pods {
            if let Some(p) = self.pods.get(&k) {
                out.push(ModelEvent::Upsert(Object::Pod(p.clone())));
            }
        }
        for k in dirty.deleted_pods {
            if !self.pods.contains_key(&k) {
                out.push(ModelEvent::Delete(ObjectKey::Pod(k)));
            }
        }
        for k in dirty.gangs {
            if let Some(g) = self.gangs.get(&k) {
                out.push(ModelEvent::Upsert(Object::Gang(g.clone())));
            }
        }
        for k in dirty.queues {
            if let Some(q) = self.queues.get(&k) {
                out.push(ModelEvent::Upsert(Object::Queue(q.clone())));
            }
        }
        for k in dirty.events {
            if let Some(e) = self.events.get(&k) {
                out.push(ModelEvent::Upsert(Object::Event(e.clone())));
            }
        }
        for k in dirty.dra {
            out.push(match self.dra.get(&k) {
                Some(o) => ModelEvent::Upsert(Object::Dra(o.clone())),
                None => ModelEvent::Delete(ObjectKey::Dra(k)),
            });
        }
        out
    }

    /// Applies a command as the API server and controllers would.
    pub fn apply(&mut self, command: Command) -> Result<String, String> {
        controllers::command(self, command)
    }

    fn bump(&mut self) {
        self.seq += 1;
    }
}

/// Sets or removes a label and re-derives the node's GPU fields.
pub(crate) fn set_label(node: &mut Node, key: &str, value: Option<&str>, now: Timestamp) {
    let mut labels: Vec<(String, String)> =
        node.labels.iter().map(|(k, v)| (k.as_str().to_string(), v.as_str().to_string())).collect();
    labels.retain(|(k, _)| k != key);
    if let Some(v) = value {
        labels.push((key.to_string(), v.to_string()));
    }
    let rebuilt = Node::new(
        node.name.as_str(),
        crate::model::node::labels_from(labels.iter().map(|(k, v)| (k.as_str(), v.as_str()))),
    );
    let upgrade_since = node.operator.upgrade_since;
    let mig_since = node.operator.mig_config_since;
    let old_state = node.operator.upgrade_state.clone();
    let old_mig = (node.operator.mig_config.clone(), node.operator.mig_config_state.clone());
    node.labels = rebuilt.labels;
    node.gpu = rebuilt.gpu;
    node.operator = rebuilt.operator;
    node.operator.upgrade_since = if node.operator.upgrade_state == old_state { upgrade_since } else { Some(now) };
    node.operator.mig_config_since =
        if (node.operator.mig_config.clone(), node.operator.mig_config_state.clone()) == old_mig {
            mig_since
        } else {
            Some(now)
        };
}

/// The ClusterPolicy the GPU Operator's Helm chart creates, asking for `driver`.
fn cluster_policy(driver: catalog::Driver) -> crate::model::DriverPolicy {
    crate::model::DriverPolicy {
        kind: crate::model::DriverPolicyKind::ClusterPolicy,
        name: Sym::new("gpu-cluster-policy"),
        version: crate::model::DriverVersion::parse(driver.version),
        enabled: true,
        defers_to_nvidia_drivers: false,
        node_selector: Default::default(),
        // The Helm chart's values (the real sample's upgradePolicy).
        upgrade: Some(crate::model::UpgradePolicy {
            auto_upgrade: true,
            max_parallel: Some(1),
            max_unavailable: Some("25%".into()),
            drain: false,
            drain_timeout_seconds: Some(300),
        }),
    }
}
