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

use crate::model::{Feed, FeedProblem, FeedState, ModelEvent, Object};
use crate::sources::kinds::{self, Kind};

use super::convert;

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

/// A 403 or (for a custom resource) a 404 is a state to show, not an
/// outage to retry.
fn classify(d: &Kind, e: &watcher::Error, since: i64) -> FeedState {
    match http_code(e) {
        Some(403) => FeedState::Unavailable(FeedProblem::Forbidden(format!(
            "RBAC: cannot list/watch {}; grant list and watch on it{}",
            d.resource(),
            if d.crd.is_none() && matches!(d.feed, Feed::Pods | Feed::Events) {
                ", or run with --namespace"
            } else {
                ""
            }
        ))),
        Some(404) if d.crd.is_some() => FeedState::Unavailable(FeedProblem::Missing(format!(
            "{} are not installed in this cluster ({})",
            d.crd.unwrap_or(""),
            d.resource()
        ))),
        _ => FeedState::Reconnecting { since, error: error_text(e) },
    }
}

async fn run<K>(
    api: Api<K>,
    d: &'static Kind,
    convert: impl Fn(&K) -> Result<Object, String>,
    tx: mpsc::Sender<Vec<ModelEvent>>,
) where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let feed = d.feed;
    let mut buffer: Vec<Object> = Vec::new();
    let mut skipped: Vec<ModelEvent> = Vec::new();
    let mut live = false;
    let mut failing_since: Option<i64> = None;
    let mut recheck = RECHECK_FIRST;
    if tx.send(vec![ModelEvent::Feed { feed, state: FeedState::Syncing }]).await.is_err() {
        return;
    }
    'watching: loop {
        let stream = watcher::watcher(api.clone(), watcher::Config::default().page_size(500)).default_backoff();
        futures::pin_mut!(stream);
        while let Some(item) = stream.next().await {
            let mut out = Vec::new();
            if failing_since.take().is_some() && live {
                out.push(ModelEvent::Feed { feed, state: FeedState::Live });
            }
            let mut unavailable = false;
            match item {
                // A fresh list: what the last one read or skipped does not count.
                Ok(Event::Init) => {
                    buffer.clear();
                    skipped.clear();
                }
                Ok(Event::InitApply(o)) => match convert(&o) {
                    Ok(x) => buffer.push(x),
                    Err(reason) => skipped.push(ModelEvent::Skipped { feed, reason }),
                },
                Ok(Event::InitDone) => {
                    out.append(&mut skipped);
                    out.push(ModelEvent::Resync { feed, objects: std::mem::take(&mut buffer) });
                    live = true;
                    recheck = RECHECK_FIRST;
                }
                Ok(Event::Apply(o)) => match convert(&o) {
                    Ok(x) => out.push(ModelEvent::Upsert(x)),
                    Err(reason) => out.push(ModelEvent::Skipped { feed, reason }),
                },
                Ok(Event::Delete(o)) => {
                    if let Some((name, namespace)) = name_ns(&o) {
                        out.push(ModelEvent::Delete(d.key(namespace.as_deref(), &name)));
                    }
                }
                Err(e) => {
                    let since = *failing_since.get_or_insert_with(crate::clock::wall_clock);
                    let state = classify(d, &e, since);
                    tracing::warn!("{} watch: {}", d.resource(), error_text(&e));
                    unavailable = matches!(state, FeedState::Unavailable(_));
                    out.push(ModelEvent::Feed { feed, state });
                }
            }
            if !out.is_empty() && tx.send(out).await.is_err() {
                return;
            }
            if unavailable {
                // A missing CRD or a 403 will not change in a second: ask again
                // later, less often each time (the watcher's own retry would
                // ask several times a second for ever).
                tokio::time::sleep(recheck).await;
                recheck = next_recheck(recheck);
                continue 'watching;
            }
        }
        return;
    }
}

/// The first wait before an unavailable feed (a missing CRD, a 403) is asked again.
const RECHECK_FIRST: Duration = Duration::from_secs(5);
/// The longest wait between asks.
const RECHECK_MAX: Duration = Duration::from_secs(300);

/// Doubling, up to [`RECHECK_MAX`].
fn next_recheck(previous: Duration) -> Duration {
    (previous * 2).min(RECHECK_MAX)
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

fn dynamic(client: &Client, scope: &Scope, kind: &Kind) -> Api<DynamicObject> {
    let ar =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(kind.group, kind.version, kind.kind), kind.plural);
    match (&scope.namespace, kind.namespaced) {
        (Some(ns), true) => Api::namespaced_with(client.clone(), ns, &ar),
        _ => Api::all_with(client.clone(), &ar),
    }
}

fn json(o: &DynamicObject) -> Result<serde_json::Value, String> {
    serde_json::to_value(o).map_err(|e| e.to_string())
}

/// Starts every watcher; each sends its feed's events to `tx`.
pub fn spawn_all(client: Client, scope: Scope, tx: mpsc::Sender<Vec<ModelEvent>>) -> Vec<JoinHandle<()>> {
    let mut tasks = Vec::new();
    tasks.extend(crate::sources::agents::spawn(client.clone(), scope.agents.clone(), tx.clone()));
    // The core kinds decode into k8s-openapi types (no JSON round trip for
    // 100,000 pods); custom resources are read as JSON.
    tasks.push(tokio::spawn(run(
        Api::<K8sNode>::all(client.clone()),
        &kinds::NODE,
        |n| convert::node(n).map(Object::Node),
        tx.clone(),
    )));
    tasks.push(tokio::spawn(run(
        namespaced::<K8sPod>(&client, &scope),
        &kinds::POD,
        |p| convert::pod(p).map(Object::Pod),
        tx.clone(),
    )));
    tasks.push(tokio::spawn(run(
        namespaced::<K8sEvent>(&client, &scope),
        &kinds::EVENT,
        |e| convert::event(e).map(Object::Event),
        tx.clone(),
    )));
    for kind in kinds::KINDS.into_iter().filter(|k| k.crd.is_some()) {
        let convert = move |o: &DynamicObject| json(o).and_then(|v| (kind.convert)(&v));
        tasks.push(tokio::spawn(run(dynamic(&client, &scope, kind), kind, convert, tx.clone())));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unavailable_feed_is_asked_again_less_and_less_often() {
        let waits: Vec<u64> = std::iter::successors(Some(RECHECK_FIRST), |w| Some(next_recheck(*w)))
            .take(9)
            .map(|w| w.as_secs())
            .collect();
        assert_eq!(waits, [5, 10, 20, 40, 80, 160, 300, 300, 300]);
        // In the first hour: 13 asks, where the watcher's own retry made thousands.
        let mut t = 0;
        let mut asks = 0;
        let mut w = RECHECK_FIRST;
        while t < 3600 {
            asks += 1;
            t += w.as_secs();
            w = next_recheck(w);
        }
        assert!(asks <= 20, "{asks}");
    }
}
