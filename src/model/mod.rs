//! The compact cluster model.
//!
//! Sources turn the outside world into [`ModelEvent`]s; [`Cluster::apply`]
//! folds them in; [`Cluster::snapshot`] hands readers an immutable
//! [`Snapshot`] in O(1) (persistent maps share structure). No kube, no
//! terminal, no clock here: time arrives as data (`ModelEvent::Clock`).

pub mod audit;
pub mod build;
pub mod devices;
pub mod dra;
pub mod driver_policy;
pub mod event;
pub mod feed;
pub mod gang;
pub mod keys;
pub mod node;
pub mod node_labels;
pub mod pod;
pub mod pod_rules;
pub mod quantity;
pub mod queue;
pub mod resources;
pub mod storage;
pub mod sym;
pub mod time;
pub mod usage;
pub mod versions;

use std::collections::BTreeMap;
use std::sync::Arc;

use imbl::OrdMap;

pub use devices::{AgentStatus, Gpu, GpuHealth, MigInstance, MigMode, NodeDevices, XidEvent};
pub use dra::{
    COMPUTE_DOMAIN_DRIVER, ClaimSource, ComputeDomain, DomainNode, DraKey, DraKind, DraObject, PodClaim, ResourceClaim,
};
pub use driver_policy::{DriverPolicy, DriverPolicyKind, DriverTarget, UpgradePolicy};
pub use event::{ClusterEvent, EventKey, EventType};
pub use feed::{Coverage, Feed, FeedProblem, FeedState, FeedStatus, Listing};
pub use gang::{Admission, AdmissionCheckState, Gang, GangKey, GangKind, PodSet, PodSetAssignment, RequeueState};
pub use node::{
    GpuLabels, MigStrategy, Node, NodeCondition, NodeSelectorTerm, OperatorLabels, Readiness, Requirement,
    SelectorOperator, Taint, TaintEffect, Toleration, TolerationOperator,
};
pub use node_labels::NodeLabels;
pub use pod::{
    CudaNeed, Endpoint, EndpointKind, HostPort, Operand, OperandLayer, Owner, Pod, PodKey, PodPhase, PortProtocol,
    Resume, Uid, Unschedulable,
};
pub use pod_rules::{LabelSelector, Namespace, NamespaceMap, Namespaces, PodAffinityTerm, PodRules, SpreadConstraint};
pub use queue::{Flavor, Queue, QueueKey, QueueKind, QueueQuota};
pub use resources::Resources;
pub use storage::{ClaimUse, StorageKey, StorageKind, StorageObject};
pub use sym::{Sym, SymHash, SymMap};
pub use usage::{DeviceReading, MigSlice, NodeUsage, NodeUsageHistory, UsageSource};
pub use versions::{CudaVersion, DriverVersion};

/// Seconds since the Unix epoch.
pub type Timestamp = i64;

/// Sorted `(key, value)` label pairs.
pub type Labels = Box<[(Sym, Sym)]>;

/// A status condition (Kueue, Volcano), compacted.
#[derive(Clone, Debug, PartialEq)]
pub struct Condition {
    pub kind: Sym,
    pub status: bool,
    pub reason: Sym,
    pub message: Box<str>,
    pub since: Timestamp,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceKind {
    Demo,
    Kube,
    File,
}

impl SourceKind {
    pub fn as_str(self) -> &'static str {
        match self {
            SourceKind::Demo => "demo",
            SourceKind::Kube => "kube",
            SourceKind::File => "file",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceInfo {
    pub kind: SourceKind,
    /// Scenario, context or path.
    pub name: String,
}

/// A demo scenario's description, shown to the user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScenarioInfo {
    pub name: String,
    pub title: String,
    pub story: String,
    pub signal: String,
}

/// Any object the model holds.
#[derive(Clone, Debug)]
pub enum Object {
    Node(Node),
    Pod(Pod),
    Gang(Gang),
    Queue(Queue),
    Flavor(Flavor),
    Event(ClusterEvent),
    Devices(NodeDevices),
    DriverPolicy(DriverPolicy),
    Usage(NodeUsage),
    Dra(DraObject),
    Storage(StorageObject),
    Namespace(Namespace),
}

impl Object {
    pub fn feed(&self) -> Feed {
        match self {
            Object::Node(_) => Feed::Nodes,
            Object::Pod(_) => Feed::Pods,
            Object::Gang(g) => gang_feed(g.kind),
            Object::Queue(q) => queue_feed(q.kind),
            Object::Flavor(_) => Feed::ResourceFlavors,
            Object::Event(_) => Feed::Events,
            Object::Devices(_) => Feed::Agents,
            Object::DriverPolicy(p) => driver_policy_feed(p.kind),
            Object::Usage(u) => usage_feed(u.source),
            Object::Dra(d) => dra_feed(d.key().kind),
            Object::Storage(o) => storage_feed(o.key().kind),
            Object::Namespace(_) => Feed::Namespaces,
        }
    }
}

fn usage_feed(source: UsageSource) -> Feed {
    match source {
        UsageSource::Agent => Feed::Agents,
        UsageSource::DcgmExporter => Feed::DcgmExporter,
    }
}

fn dra_feed(kind: DraKind) -> Feed {
    match kind {
        DraKind::ResourceSlice => Feed::ResourceSlices,
        DraKind::DeviceClass => Feed::DeviceClasses,
        DraKind::ResourceClaim => Feed::ResourceClaims,
        DraKind::ResourceClaimTemplate => Feed::ResourceClaimTemplates,
        DraKind::ComputeDomain => Feed::ComputeDomains,
    }
}

fn storage_feed(kind: StorageKind) -> Feed {
    match kind {
        StorageKind::Claim => Feed::PersistentVolumeClaims,
        StorageKind::Volume => Feed::PersistentVolumes,
        StorageKind::Class => Feed::StorageClasses,
    }
}

fn driver_policy_feed(kind: DriverPolicyKind) -> Feed {
    match kind {
        DriverPolicyKind::ClusterPolicy => Feed::ClusterPolicies,
        DriverPolicyKind::NvidiaDriver => Feed::NvidiaDrivers,
    }
}

fn gang_feed(kind: GangKind) -> Feed {
    match kind {
        GangKind::KueueWorkload => Feed::Workloads,
        GangKind::VolcanoPodGroup => Feed::PodGroups,
    }
}

fn queue_feed(kind: QueueKind) -> Feed {
    match kind {
        QueueKind::ClusterQueue => Feed::ClusterQueues,
        QueueKind::LocalQueue => Feed::LocalQueues,
        QueueKind::VolcanoQueue => Feed::VolcanoQueues,
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ObjectKey {
    Node(Sym),
    Pod(PodKey),
    Gang(GangKey),
    Queue(QueueKey),
    Flavor(Sym),
    Event(EventKey),
    Devices(Sym),
    DriverPolicy(DriverPolicyKind, Sym),
    Usage(UsageSource, Sym),
    Dra(DraKey),
    Storage(StorageKey),
    Namespace(Sym),
}

// Events are moved through a channel and applied at once, never stored:
// boxing the large variant would cost an allocation per event for nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug)]
pub enum ModelEvent {
    Upsert(Object),
    Delete(ObjectKey),
    /// A fresh full list of one feed: the truth. Objects of that feed not in
    /// it are gone (deletes are never lost across a restart).
    Resync {
        feed: Feed,
        objects: Vec<Object>,
    },
    Feed {
        feed: Feed,
        state: FeedState,
    },
    /// A polled feed's reach: its reporters and how current they are.
    Coverage {
        feed: Feed,
        coverage: Coverage,
    },
    /// How a watched feed listed (sent with its `Resync`).
    Listed {
        feed: Feed,
        by: Listing,
        /// The older API version it was read at, where the server does not
        /// serve the preferred one (`resource.k8s.io/v1beta1`).
        older: Option<Sym>,
    },
    /// The source's notion of "now".
    Clock(Timestamp),
    /// An object that could not be converted: counted, never fatal.
    Skipped {
        feed: Feed,
        reason: String,
    },
    Source(SourceInfo),
    Scenario(ScenarioInfo),
}

/// Most events kept; older ones are dropped first.
pub const EVENT_WINDOW: usize = 5000;

/// An immutable view of the cluster. Cloning is O(1).
#[derive(Clone, Debug)]
pub struct Snapshot {
    pub source: SourceInfo,
    pub scenario: Option<ScenarioInfo>,
    /// Bumped by every applied event that changed something.
    pub generation: u64,
    /// The part of `generation` that only moved the clock.
    pub ticks: u64,
    /// The source's clock at the last `Clock` event.
    pub clock: Timestamp,
    pub nodes: OrdMap<Sym, Arc<Node>>,
    pub pods: OrdMap<PodKey, Arc<Pod>>,
    /// The pods of `pods` that report GPUs (agents, dcgm-exporters): where
    /// the pollers find them without a LIST of their own.
    pub endpoints: OrdMap<PodKey, Arc<Pod>>,
    pub gangs: OrdMap<GangKey, Arc<Gang>>,
    pub queues: OrdMap<QueueKey, Arc<Queue>>,
    pub flavors: OrdMap<Sym, Arc<Flavor>>,
    pub devices: OrdMap<Sym, Arc<NodeDevices>>,
    pub events: OrdMap<EventKey, Arc<ClusterEvent>>,
    /// The GPU Operator's ClusterPolicy and NVIDIADrivers.
    pub driver_policies: OrdMap<(DriverPolicyKind, Sym), Arc<DriverPolicy>>,
    /// GPU utilization per reporter and node, with its bounded history.
    pub usage: OrdMap<(UsageSource, Sym), Arc<NodeUsageHistory>>,
    /// ResourceSlices, DeviceClasses, ResourceClaims and their templates.
    pub dra: OrdMap<DraKey, Arc<DraObject>>,
    /// PersistentVolumeClaims, PersistentVolumes and StorageClasses.
    pub storage: OrdMap<StorageKey, Arc<StorageObject>>,
    /// Namespaces, for the affinity terms' namespaceSelectors.
    pub namespaces: pod_rules::NamespaceMap,
    pub feeds: BTreeMap<Feed, FeedStatus>,
    /// Objects skipped as malformed, per feed, with the last reason.
    pub skipped: BTreeMap<Feed, (u64, String)>,
}

impl Snapshot {
    pub fn empty(source: SourceInfo) -> Snapshot {
        Snapshot {
            source,
            scenario: None,
            generation: 0,
            ticks: 0,
            clock: 0,
            nodes: OrdMap::new(),
            pods: OrdMap::new(),
            endpoints: OrdMap::new(),
            gangs: OrdMap::new(),
            queues: OrdMap::new(),
            flavors: OrdMap::new(),
            devices: OrdMap::new(),
            events: OrdMap::new(),
            driver_policies: OrdMap::new(),
            usage: OrdMap::new(),
            dra: OrdMap::new(),
            storage: OrdMap::new(),
            namespaces: OrdMap::new(),
            feeds: BTreeMap::new(),
            skipped: BTreeMap::new(),
        }
    }

    /// Changes to what the cluster holds: `generation` without the clock's ticks.
    pub fn content_generation(&self) -> u64 {
        self.generation - self.ticks
    }

    pub fn feed(&self, feed: Feed) -> Option<&FeedStatus> {
        self.feeds.get(&feed)
    }

    /// The feed's problem, if it cannot deliver data.
    pub fn feed_problem(&self, feed: Feed) -> Option<&FeedProblem> {
        match self.feeds.get(&feed).map(|f| &f.state) {
            Some(FeedState::Unavailable(p)) => Some(p),
            _ => None,
        }
    }
}

/// The mutable owner of the model; one task owns it.
pub struct Cluster {
    state: Snapshot,
}

impl Cluster {
    pub fn new(source: SourceInfo) -> Cluster {
        Cluster { state: Snapshot::empty(source) }
    }

    pub fn snapshot(&self) -> Snapshot {
        self.state.clone()
    }

    pub fn generation(&self) -> u64 {
        self.state.generation
    }

    pub fn apply_all(&mut self, events: impl IntoIterator<Item = ModelEvent>) {
        for e in events {
            self.apply(e);
        }
    }

    pub fn apply(&mut self, event: ModelEvent) {
        let s = &mut self.state;
        match event {
            ModelEvent::Upsert(object) => {
                let feed = object.feed();
                self.upsert(object);
                self.touch(feed);
            }
            ModelEvent::Delete(key) => {
                let s = &mut self.state;
                let feed = match key {
                    ObjectKey::Node(k) => {
                        s.nodes.remove(&k);
                        Feed::Nodes
                    }
                    ObjectKey::Pod(k) => {
                        s.pods.remove(&k);
                        s.endpoints.remove(&k);
                        Feed::Pods
                    }
                    ObjectKey::Gang(k) => {
                        let feed = gang_feed(k.kind);
                        s.gangs.remove(&k);
                        feed
                    }
                    ObjectKey::Queue(k) => {
                        let feed = queue_feed(k.kind);
                        s.queues.remove(&k);
                        feed
                    }
                    ObjectKey::Flavor(k) => {
                        s.flavors.remove(&k);
                        Feed::ResourceFlavors
                    }
                    ObjectKey::DriverPolicy(kind, name) => {
                        s.driver_policies.remove(&(kind, name));
                        driver_policy_feed(kind)
                    }
                    ObjectKey::Event(k) => {
                        s.events.remove(&k);
                        Feed::Events
                    }
                    ObjectKey::Devices(k) => {
                        s.devices.remove(&k);
                        Feed::Agents
                    }
                    ObjectKey::Usage(source, node) => {
                        s.usage.remove(&(source, node));
                        usage_feed(source)
                    }
                    ObjectKey::Dra(k) => {
                        let feed = dra_feed(k.kind);
                        s.dra.remove(&k);
                        feed
                    }
                    ObjectKey::Storage(k) => {
                        let feed = storage_feed(k.kind);
                        s.storage.remove(&k);
                        feed
                    }
                    ObjectKey::Namespace(name) => {
                        s.namespaces.remove(&name);
                        Feed::Namespaces
                    }
                };
                self.touch(feed);
            }
            ModelEvent::Resync { feed, objects } => {
                self.clear_feed(feed);
                let mut reported = std::collections::HashSet::new();
                for object in objects {
                    if object.feed() == feed {
                        if let Object::Usage(u) = &object {
                            reported.insert((u.source, u.node.clone()));
                        }
                        self.upsert(object);
                    }
                }
                let s = &mut self.state;
                // Usage keeps its history across resyncs (every poll is
                // one); only the nodes no longer reported are dropped.
                let gone: Vec<(UsageSource, Sym)> =
                    s.usage.keys().filter(|k| usage_feed(k.0) == feed && !reported.contains(*k)).cloned().collect();
                for key in gone {
                    s.usage.remove(&key);
                }
                // What else the feed's status says (coverage, how it listed) stays.
                let status = s.feeds.entry(feed).or_insert_with(|| FeedStatus::new(FeedState::Live));
                status.state = FeedState::Live;
                status.last_data = Some(s.clock);
                s.generation += 1;
            }
            ModelEvent::Feed { feed, state } => match s.feeds.get_mut(&feed) {
                Some(status) if status.state == state => {}
                Some(status) => {
                    status.state = state;
                    s.generation += 1;
                }
                None => {
                    s.feeds.insert(feed, FeedStatus::new(state));
                    s.generation += 1;
                }
            },
            ModelEvent::Coverage { feed, coverage } => {
                if let Some(status) = s.feeds.get_mut(&feed)
                    && status.coverage.as_ref() != Some(&coverage)
                {
                    status.coverage = Some(coverage);
                    s.generation += 1;
                }
            }
            ModelEvent::Listed { feed, by, older } => {
                let status = s.feeds.entry(feed).or_insert_with(|| FeedStatus::new(FeedState::Syncing));
                if status.listed.as_ref() != Some(&by) || status.older_api != older {
                    status.listed = Some(by);
                    status.older_api = older;
                    s.generation += 1;
                }
            }
            ModelEvent::Clock(now) => {
                if now != s.clock {
                    s.clock = now;
                    s.generation += 1;
                    s.ticks += 1;
                }
            }
            ModelEvent::Skipped { feed, reason } => {
                let entry = s.skipped.entry(feed).or_insert((0, String::new()));
                entry.0 += 1;
                entry.1 = reason;
                s.generation += 1;
            }
            ModelEvent::Source(info) => {
                s.source = info;
                s.generation += 1;
            }
            ModelEvent::Scenario(info) => {
                s.scenario = Some(info);
                s.generation += 1;
            }
        }
    }

    fn touch(&mut self, feed: Feed) {
        let s = &mut self.state;
        s.generation += 1;
        let clock = s.clock;
        let status = s.feeds.entry(feed).or_insert_with(|| FeedStatus::new(FeedState::Live));
        status.last_data = Some(clock);
    }

    fn clear_feed(&mut self, feed: Feed) {
        let s = &mut self.state;
        match feed {
            Feed::Nodes => s.nodes.clear(),
            Feed::Pods => {
                s.pods.clear();
                s.endpoints.clear();
            }
            Feed::Events => s.events.clear(),
            Feed::Workloads | Feed::PodGroups => {
                s.gangs = s
                    .gangs
                    .iter()
                    .filter(|(k, _)| gang_feed(k.kind) != feed)
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            }
            Feed::ClusterQueues | Feed::LocalQueues | Feed::VolcanoQueues => {
                s.queues = s
                    .queues
                    .iter()
                    .filter(|(k, _)| queue_feed(k.kind) != feed)
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            }
            Feed::ResourceFlavors => s.flavors.clear(),
            Feed::Namespaces => s.namespaces.clear(),
            Feed::Agents => s.devices.clear(),
            // Usage is folded into its history, not replaced: see Resync.
            Feed::DcgmExporter => {}
            Feed::ResourceSlices
            | Feed::DeviceClasses
            | Feed::ResourceClaims
            | Feed::ResourceClaimTemplates
            | Feed::ComputeDomains => {
                s.dra = s
                    .dra
                    .iter()
                    .filter(|(k, _)| dra_feed(k.kind) != feed)
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            }
            Feed::PersistentVolumeClaims | Feed::PersistentVolumes | Feed::StorageClasses => {
                s.storage = s
                    .storage
                    .iter()
                    .filter(|(k, _)| storage_feed(k.kind) != feed)
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            }
            Feed::ClusterPolicies | Feed::NvidiaDrivers => {
                s.driver_policies = s
                    .driver_policies
                    .iter()
                    .filter(|((kind, _), _)| driver_policy_feed(*kind) != feed)
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            }
        }
    }

    fn upsert(&mut self, object: Object) {
        let s = &mut self.state;
        match object {
            Object::Node(mut node) => {
                // Time in an operator state is known from the object (an
                // annotation) or from seeing it change; a state found as it
                // is (a first list, a support bundle) started at an unknown time.
                if let Some(old) = s.nodes.get(&node.name) {
                    if node.operator.upgrade_since.is_none() {
                        node.operator.upgrade_since = if old.operator.upgrade_state == node.operator.upgrade_state {
                            old.operator.upgrade_since
                        } else {
                            node.operator.upgrade_state.as_ref().map(|_| s.clock)
                        };
                    }
                    if node.operator.mig_config_since.is_none() {
                        let same = old.operator.mig_config_state == node.operator.mig_config_state
                            && old.operator.mig_config == node.operator.mig_config;
                        node.operator.mig_config_since = if same {
                            old.operator.mig_config_since
                        } else {
                            node.operator.mig_config_state.as_ref().map(|_| s.clock)
                        };
                    }
                }
                s.nodes.insert(node.name.clone(), Arc::new(node));
            }
            Object::Pod(pod) => {
                let key = pod.key();
                let pod = Arc::new(pod);
                if pod.endpoint.is_some() {
                    s.endpoints.insert(key.clone(), pod.clone());
                } else if !s.endpoints.is_empty() {
                    s.endpoints.remove(&key);
                }
                s.pods.insert(key, pod);
            }
            Object::DriverPolicy(p) => {
                s.driver_policies.insert((p.kind, p.name.clone()), Arc::new(p));
            }
            Object::Gang(gang) => {
                s.gangs.insert(gang.key(), Arc::new(gang));
            }
            Object::Queue(queue) => {
                s.queues.insert(queue.key(), Arc::new(queue));
            }
            Object::Flavor(flavor) => {
                s.flavors.insert(flavor.name.clone(), Arc::new(flavor));
            }
            Object::Event(event) => {
                s.events.insert(event.key(), Arc::new(event));
                if s.events.len() > EVENT_WINDOW {
                    trim_events(&mut s.events);
                }
            }
            Object::Devices(devices) => {
                s.devices.insert(devices.node.clone(), Arc::new(devices));
            }
            Object::Dra(d) => {
                s.dra.insert(d.key(), Arc::new(d));
            }
            Object::Storage(o) => {
                s.storage.insert(o.key(), Arc::new(o));
            }
            Object::Namespace(ns) => {
                s.namespaces.insert(ns.name.clone(), Arc::new(ns));
            }
            Object::Usage(usage) => {
                let key = (usage.source, usage.node.clone());
                let history = NodeUsageHistory::fold(s.usage.get(&key).map(|h| &**h), usage);
                s.usage.insert(key, Arc::new(history));
            }
        }
    }
}

/// Drops the oldest tenth of the window at once, so trimming is amortised.
fn trim_events(events: &mut OrdMap<EventKey, Arc<ClusterEvent>>) {
    let mut by_age: Vec<(Timestamp, EventKey)> = events.iter().map(|(k, e)| (e.last, k.clone())).collect();
    by_age.sort();
    let excess = events.len().saturating_sub(EVENT_WINDOW * 9 / 10);
    for (_, key) in by_age.into_iter().take(excess) {
        events.remove(&key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source() -> SourceInfo {
        SourceInfo { kind: SourceKind::Demo, name: "test".into() }
    }

    #[test]
    fn resync_replaces_one_feed_only() {
        let mut c = Cluster::new(source());
        c.apply(ModelEvent::Upsert(Object::Node(Node::new("a", Box::new([])))));
        c.apply(ModelEvent::Upsert(Object::Node(Node::new("b", Box::new([])))));
        c.apply(ModelEvent::Upsert(Object::Pod(Pod::new("ns", "p"))));
        let before = c.snapshot();
        c.apply(ModelEvent::Resync { feed: Feed::Nodes, objects: vec![Object::Node(Node::new("b", Box::new([])))] });
        let after = c.snapshot();
        assert_eq!(
            after.nodes.keys().map(|k| k.as_str()).collect::<Vec<_>>(),
            ["b"],
            "a was deleted while we were away"
        );
        assert_eq!(after.pods.len(), 1, "other feeds untouched");
        assert_eq!(before.nodes.len(), 2, "old snapshots are immutable");
        assert_eq!(after.feed(Feed::Nodes).map(|f| &f.state), Some(&FeedState::Live));
    }

    #[test]
    fn an_upgrade_state_begins_when_seen_changing_and_is_unknown_before() {
        let mut c = Cluster::new(source());
        let node = |state: &str| Node::new("n", node::labels_from([("nvidia.com/gpu-driver-upgrade-state", state)]));
        c.apply(ModelEvent::Clock(100));
        c.apply(ModelEvent::Upsert(Object::Node(node("upgrade-required"))));
        c.apply(ModelEvent::Clock(700));
        c.apply(ModelEvent::Upsert(Object::Node(node("upgrade-required"))));
        let since = |c: &Cluster| c.snapshot().nodes.values().next().unwrap().operator.upgrade_since;
        // Found in that state: when it began is unknown, not "now".
        assert_eq!(since(&c), None);
        c.apply(ModelEvent::Upsert(Object::Node(node("cordon-required"))));
        assert_eq!(since(&c), Some(700), "a change seen: it began now");
        c.apply(ModelEvent::Clock(900));
        c.apply(ModelEvent::Upsert(Object::Node(node("cordon-required"))));
        assert_eq!(since(&c), Some(700), "kept while unchanged");
    }

    #[test]
    fn event_window_is_bounded() {
        let mut c = Cluster::new(source());
        for i in 0..(EVENT_WINDOW + 10) {
            c.apply(ModelEvent::Upsert(Object::Event(ClusterEvent {
                namespace: Sym::new("ns"),
                name: Arc::from(format!("e{i}")),
                kind: EventType::Normal,
                reason: Sym::new("Scheduled"),
                object_kind: Sym::new("Pod"),
                object_name: Arc::from("p"),
                message: "m".into(),
                count: 1,
                first: i as i64,
                last: i as i64,
                source: Sym::new("default-scheduler"),
            })));
        }
        let snap = c.snapshot();
        assert!(snap.events.len() <= EVENT_WINDOW);
        assert!(!snap.events.contains_key(&EventKey { namespace: Sym::new("ns"), name: Arc::from("e0") }));
    }

    #[test]
    fn feed_problems_are_state_not_errors() {
        let mut c = Cluster::new(source());
        c.apply(ModelEvent::Feed {
            feed: Feed::Workloads,
            state: FeedState::Unavailable(FeedProblem::Missing("the Kueue CRDs are not installed".into())),
        });
        let snap = c.snapshot();
        assert!(matches!(snap.feed_problem(Feed::Workloads), Some(FeedProblem::Missing(_))));
        assert!(snap.feed_problem(Feed::Nodes).is_none());
    }
}
