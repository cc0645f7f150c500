//! One watcher per kind: a paginated initial list (500 per page), then a
//! watch; backoff on errors; a fresh list after 410 Gone. Each complete list
//! goes out as a `Resync` — the truth, so deletes missed while away are not
//! lost. A 403 or a missing CRD makes that feed unavailable with its reason;
//! other errors mark it reconnecting, and its data stays, shown with its age.

use std::fmt::Debug;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Event as K8sEvent, Node as K8sNode, Pod as K8sPod};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::model::{
    EventKey, Feed, FeedProblem, FeedState, GangKey, GangKind, ModelEvent, Object, ObjectKey, PodKey, QueueKey,
    QueueKind, Sym,
};

use super::convert;

type Convert<K> = fn(&K) -> Result<Object, String>;
type Key<K> = fn(&K) -> Option<ObjectKey>;

/// How the feed's resource is named in messages.
struct Described {
    feed: Feed,
    resource: &'static str,
    /// Set for custom resources: a 404 means the CRD is not installed.
    crd: Option<&'static str>,
}

fn http_code(e: &watcher::Error) -> Option<u16> {
    match e {
        watcher::Error::InitialListFailed(kube::Error::Api(s))
        | watcher::Error::WatchStartFailed(kube::Error::Api(s))
        | watcher::Error::WatchFailed(kube::Error::Api(s)) => Some(s.code),
        watcher::Error::WatchError(s) => Some(s.code),
        _ => None,
    }
}

fn error_text(e: &watcher::Error) -> String {
    match e {
        watcher::Error::InitialListFailed(k) | watcher::Error::WatchStartFailed(k) | watcher::Error::WatchFailed(k) => {
            super::client::short_error(k)
        }
        watcher::Error::WatchError(s) => format!("HTTP {}: {}", s.code, s.message),
        watcher::Error::NoResourceVersion => "no resourceVersion".into(),
    }
}

fn classify(d: &Described, e: &watcher::Error, since: i64) -> FeedState {
    match http_code(e) {
        Some(403) => FeedState::Unavailable(FeedProblem::Forbidden(format!(
            "RBAC: cannot list/watch {}; grant list and watch on it{}",
            d.resource,
            if d.crd.is_none() && matches!(d.feed, Feed::Pods | Feed::Events) {
                ", or run with --namespace"
            } else {
                ""
            }
        ))),
        Some(404) if d.crd.is_some() => FeedState::Unavailable(FeedProblem::Missing(format!(
            "{} are not installed in this cluster ({})",
            d.crd.unwrap_or(""),
            d.resource
        ))),
        _ => FeedState::Reconnecting { since, error: error_text(e) },
    }
}

async fn run<K>(api: Api<K>, d: Described, convert: Convert<K>, key: Key<K>, tx: mpsc::Sender<Vec<ModelEvent>>)
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let feed = d.feed;
    let stream = watcher::watcher(api, watcher::Config::default().page_size(500)).default_backoff();
    futures::pin_mut!(stream);
    let mut buffer: Vec<Object> = Vec::new();
    let mut skipped: Vec<ModelEvent> = Vec::new();
    let mut live = false;
    let mut failing_since: Option<i64> = None;
    if tx.send(vec![ModelEvent::Feed { feed, state: FeedState::Syncing }]).await.is_err() {
        return;
    }
    while let Some(item) = stream.next().await {
        let mut out = Vec::new();
        if failing_since.take().is_some() && live {
            out.push(ModelEvent::Feed { feed, state: FeedState::Live });
        }
        match item {
            Ok(Event::Init) => buffer.clear(),
            Ok(Event::InitApply(o)) => match convert(&o) {
                Ok(x) => buffer.push(x),
                Err(reason) => skipped.push(ModelEvent::Skipped { feed, reason }),
            },
            Ok(Event::InitDone) => {
                out.append(&mut skipped);
                out.push(ModelEvent::Resync { feed, objects: std::mem::take(&mut buffer) });
                live = true;
            }
            Ok(Event::Apply(o)) => match convert(&o) {
                Ok(x) => out.push(ModelEvent::Upsert(x)),
                Err(reason) => out.push(ModelEvent::Skipped { feed, reason }),
            },
            Ok(Event::Delete(o)) => {
                if let Some(k) = key(&o) {
                    out.push(ModelEvent::Delete(k));
                }
            }
            Err(e) => {
                let since = *failing_since.get_or_insert_with(crate::clock::wall_clock);
                let state = classify(&d, &e, since);
                tracing::warn!("{} watch: {}", d.resource, error_text(&e));
                out.push(ModelEvent::Feed { feed, state });
            }
        }
        if !out.is_empty() && tx.send(out).await.is_err() {
            return;
        }
    }
}

fn name_ns<K: Resource>(o: &K) -> Option<(String, Option<String>)> {
    Some((o.meta().name.clone()?, o.meta().namespace.clone()))
}

/// What to watch: namespaced kinds in one namespace or all (`None`), and
/// how to read the node agents.
#[derive(Clone, Debug, Default)]
pub struct Scope {
    pub namespace: Option<String>,
    pub agents: crate::sources::agents::Config,
}

fn namespaced<K: Resource<Scope = k8s_openapi::NamespaceResourceScope>>(client: &Client, scope: &Scope) -> Api<K>
where
    K::DynamicType: Default,
{
    match &scope.namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

fn dynamic(
    client: &Client,
    scope: &Scope,
    group: &str,
    version: &str,
    kind: &str,
    plural: &str,
    is_namespaced: bool,
) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
    match (&scope.namespace, is_namespaced) {
        (Some(ns), true) => Api::namespaced_with(client.clone(), ns, &ar),
        _ => Api::all_with(client.clone(), &ar),
    }
}

fn json(o: &DynamicObject) -> Result<serde_json::Value, String> {
    serde_json::to_value(o).map_err(|e| e.to_string())
}

/// A custom resource kgpu watches.
struct CrdFeed {
    feed: Feed,
    /// group, version, kind, plural
    gvk: (&'static str, &'static str, &'static str, &'static str),
    namespaced: bool,
    resource: &'static str,
    crd: &'static str,
    convert: Convert<DynamicObject>,
    key: Key<DynamicObject>,
}

/// Starts every watcher; each sends its feed's events to `tx`.
pub fn spawn_all(client: Client, scope: Scope, tx: mpsc::Sender<Vec<ModelEvent>>) -> Vec<JoinHandle<()>> {
    let mut tasks = Vec::new();
    tasks.extend(crate::sources::agents::spawn(client.clone(), scope.agents.clone(), tx.clone()));
    let nodes: Api<K8sNode> = Api::all(client.clone());
    tasks.push(tokio::spawn(run(
        nodes,
        Described { feed: Feed::Nodes, resource: "nodes", crd: None },
        |n| convert::node(n).map(Object::Node),
        |n| name_ns(n).map(|(name, _)| ObjectKey::Node(Sym::new(&name))),
        tx.clone(),
    )));
    tasks.push(tokio::spawn(run(
        namespaced::<K8sPod>(&client, &scope),
        Described { feed: Feed::Pods, resource: "pods", crd: None },
        |p| convert::pod(p).map(Object::Pod),
        |p| name_ns(p).map(|(name, ns)| ObjectKey::Pod(PodKey::new(ns.as_deref().unwrap_or("default"), &name))),
        tx.clone(),
    )));
    tasks.push(tokio::spawn(run(
        namespaced::<K8sEvent>(&client, &scope),
        Described { feed: Feed::Events, resource: "events", crd: None },
        |e| convert::event(e).map(Object::Event),
        |e| {
            name_ns(e).map(|(name, ns)| {
                ObjectKey::Event(EventKey {
                    namespace: Sym::new(ns.as_deref().unwrap_or("")),
                    name: name.as_str().into(),
                })
            })
        },
        tx.clone(),
    )));
    let kueue = "the Kueue CRDs (kueue.x-k8s.io/v1beta2)";
    let volcano = "the Volcano CRDs (scheduling.volcano.sh/v1beta1)";
    let crds = [
        CrdFeed {
            feed: Feed::Workloads,
            gvk: ("kueue.x-k8s.io", "v1beta2", "Workload", "workloads"),
            namespaced: true,
            resource: "workloads.kueue.x-k8s.io",
            crd: kueue,
            convert: |o| json(o).and_then(|v| convert::workload(&v)).map(Object::Gang),
            key: |o| {
                name_ns(o).map(|(n, ns)| {
                    ObjectKey::Gang(GangKey {
                        kind: GangKind::KueueWorkload,
                        namespace: Sym::new(ns.as_deref().unwrap_or("default")),
                        name: n.as_str().into(),
                    })
                })
            },
        },
        CrdFeed {
            feed: Feed::ClusterQueues,
            gvk: ("kueue.x-k8s.io", "v1beta2", "ClusterQueue", "clusterqueues"),
            namespaced: false,
            resource: "clusterqueues.kueue.x-k8s.io",
            crd: kueue,
            convert: |o| json(o).and_then(|v| convert::cluster_queue(&v)).map(Object::Queue),
            key: |o| {
                name_ns(o).map(|(n, _)| {
                    ObjectKey::Queue(QueueKey { kind: QueueKind::ClusterQueue, namespace: None, name: Sym::new(&n) })
                })
            },
        },
        CrdFeed {
            feed: Feed::LocalQueues,
            gvk: ("kueue.x-k8s.io", "v1beta2", "LocalQueue", "localqueues"),
            namespaced: true,
            resource: "localqueues.kueue.x-k8s.io",
            crd: kueue,
            convert: |o| json(o).and_then(|v| convert::local_queue(&v)).map(Object::Queue),
            key: |o| {
                name_ns(o).map(|(n, ns)| {
                    ObjectKey::Queue(QueueKey {
                        kind: QueueKind::LocalQueue,
                        namespace: Some(Sym::new(ns.as_deref().unwrap_or("default"))),
                        name: Sym::new(&n),
                    })
                })
            },
        },
        CrdFeed {
            feed: Feed::ResourceFlavors,
            gvk: ("kueue.x-k8s.io", "v1beta2", "ResourceFlavor", "resourceflavors"),
            namespaced: false,
            resource: "resourceflavors.kueue.x-k8s.io",
            crd: kueue,
            convert: |o| json(o).and_then(|v| convert::resource_flavor(&v)).map(Object::Flavor),
            key: |o| name_ns(o).map(|(n, _)| ObjectKey::Flavor(Sym::new(&n))),
        },
        CrdFeed {
            feed: Feed::PodGroups,
            gvk: ("scheduling.volcano.sh", "v1beta1", "PodGroup", "podgroups"),
            namespaced: true,
            resource: "podgroups.scheduling.volcano.sh",
            crd: volcano,
            convert: |o| json(o).and_then(|v| convert::podgroup(&v)).map(Object::Gang),
            key: |o| {
                name_ns(o).map(|(n, ns)| {
                    ObjectKey::Gang(GangKey {
                        kind: GangKind::VolcanoPodGroup,
                        namespace: Sym::new(ns.as_deref().unwrap_or("default")),
                        name: n.as_str().into(),
                    })
                })
            },
        },
        CrdFeed {
            feed: Feed::VolcanoQueues,
            gvk: ("scheduling.volcano.sh", "v1beta1", "Queue", "queues"),
            namespaced: false,
            resource: "queues.scheduling.volcano.sh",
            crd: volcano,
            convert: |o| json(o).and_then(|v| convert::volcano_queue(&v)).map(Object::Queue),
            key: |o| {
                name_ns(o).map(|(n, _)| {
                    ObjectKey::Queue(QueueKey { kind: QueueKind::VolcanoQueue, namespace: None, name: Sym::new(&n) })
                })
            },
        },
    ];
    for c in crds {
        let (group, version, kind, plural) = c.gvk;
        let api = dynamic(&client, &scope, group, version, kind, plural, c.namespaced);
        let described = Described { feed: c.feed, resource: c.resource, crd: Some(c.crd) };
        tasks.push(tokio::spawn(run(api, described, c.convert, c.key, tx.clone())));
    }
    // The model learns the time from here, once a second.
    tasks.push(tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tick.tick().await;
            if tx.send(vec![ModelEvent::Clock(crate::clock::wall_clock())]).await.is_err() {
                break;
            }
        }
    }));
    tasks
}

/// Feeds a live source runs: every feed but the agents' (they come later).
pub const FEEDS: &[Feed] = match Feed::ALL.split_last() {
    Some((Feed::Agents, from_the_api_server)) => from_the_api_server,
    _ => panic!("Feed::ALL ends with the agents' feed"),
};
