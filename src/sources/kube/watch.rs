//! One watcher per kind: the whole collection, streamed over a watch where
//! the server offers it (`stream.rs`), else a paginated list (500 per page,
//! `pages.rs`), then a long watch (`Liveness::watch_seconds`, 5 minutes: each renewal is a
//! request to the API server); after any error (410 Gone included), a
//! fresh list with backoff. Each complete list goes out as a `Resync` — the
//! truth, so deletes missed while away are not lost. A 403 or a missing CRD
//! makes that feed unavailable with its reason; other errors mark it
//! reconnecting, and its data stays, shown with its age. One probe per
//! source (`/readyz`, every third of [`Liveness::stall_after`]) tells when
//! the server stops answering: every watching feed is then marked
//! reconnecting since its last answer, and lists afresh once it answers.

use std::fmt::Debug;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Event as K8sEvent;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, WatchEvent, WatchParams};
use kube::runtime::watcher;
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::model::{Feed, FeedProblem, FeedState, Listing, ModelEvent, Object, Sym};
use crate::sources::kinds::{self, Kind};

use super::client::{Clients, Liveness};
use super::convert;
use super::lean::{Node as ApiNode, Pod as ApiPod};
use super::pages::{self, Read};
use super::stream::{self, Unstreamed};

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
        Some(404) if d.crd.is_some() => FeedState::Unavailable(FeedProblem::Missing(d.missing())),
        _ => FeedState::Reconnecting { since, error: error_text(e) },
    }
}

/// A read that timed out: the server stopped answering on an open connection.
fn stalled(e: &watcher::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if s.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut) {
            return true;
        }
        source = s.source();
    }
    false
}

/// What the probe knows of the API server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Health {
    Answering,
    /// Nothing answered since `since` (wall clock, seconds).
    Silent {
        since: i64,
    },
}

type HealthRx = tokio::sync::watch::Receiver<Health>;

/// Where one kind is read: lists on the client that gives up on a silent
/// read, watches on the one that does not (`Clients`).
#[derive(Clone)]
struct Apis<K> {
    list: Api<K>,
    watch: Api<K>,
}

/// Follows one kind for as long as the cockpit runs. `at(version)` gives
/// where and how to read it at that version: the kind's preferred version
/// first, and where the server answers 404 for it, each older version in
/// turn (DRA on 1.32-1.33) before the kind counts as not served.
async fn run<K, C, A>(
    at: A,
    d: &'static Kind,
    (liveness, mut health, mut listing): (Liveness, HealthRx, Listing),
    tx: mpsc::Sender<Vec<ModelEvent>>,
) where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    C: Fn(&K) -> Read + Copy + Send + 'static,
    A: Fn(&'static str) -> (Apis<K>, C) + Send + 'static,
{
    let feed = d.feed;
    let versions: Vec<&'static str> = d.versions().collect();
    let mut served = 0;
    let (mut apis, mut convert) = at(versions[served]);
    let mut failing_since: Option<i64> = None;
    let mut recheck = RECHECK_FIRST;
    let mut retry = RETRY_FIRST;
    if tx.send(vec![ModelEvent::Feed { feed, state: FeedState::Syncing }]).await.is_err() {
        return;
    }
    loop {
        let older = (served > 0).then(|| Sym::new(&d.api_version_at(versions[served])));
        let e = match list(&apis.list, d, (liveness, &mut listing, older), convert, &tx).await {
            Err(Stop::Closed) => return,
            // Not served at this version: the next one at once; after the
            // last, the preferred one again next time, as for a missing CRD.
            Err(Stop::Failed(e)) if http_code(&e) == Some(404) && versions.len() > 1 => {
                served = (served + 1) % versions.len();
                (apis, convert) = at(versions[served]);
                if served > 0 {
                    continue;
                }
                e
            }
            Err(Stop::Failed(e)) => e,
            Err(Stop::Silent(_)) => continue,
            Ok(version) => {
                // The model marked the feed live again with the list.
                failing_since = None;
                recheck = RECHECK_FIRST;
                retry = RETRY_FIRST;
                match watch(&apis.watch, d, liveness, &mut health, convert, &tx, version).await {
                    Stop::Closed => return,
                    Stop::Failed(e) => e,
                    Stop::Silent(since) => {
                        let error = format!("the API server sent nothing for {}s", liveness.stall_after.as_secs());
                        let state = FeedState::Reconnecting { since, error };
                        if tx.send(vec![ModelEvent::Feed { feed, state }]).await.is_err() {
                            return;
                        }
                        // List afresh once it answers (nothing missed meanwhile).
                        if health.wait_for(|h| *h == Health::Answering).await.is_err() {
                            return;
                        }
                        failing_since = Some(since);
                        continue;
                    }
                }
            }
        };
        let now = crate::clock::wall_clock();
        let stall = stalled(&e);
        // A stall began when the connection went quiet, not when the
        // timeout noticed it.
        let began = if stall { now - liveness.stall_after.as_secs() as i64 } else { now };
        let since = *failing_since.get_or_insert(began);
        let state = if stall {
            FeedState::Reconnecting {
                since,
                error: format!("the API server sent nothing for {}s", liveness.stall_after.as_secs()),
            }
        } else {
            classify(d, &e, since)
        };
        tracing::warn!("{} watch: {}", d.resource(), error_text(&e));
        // A missing CRD or a 403 will not change in a second: ask again
        // later, less often each time. Other errors: retry sooner, backing off.
        let wait = if matches!(state, FeedState::Unavailable(_)) {
            let w = recheck;
            recheck = next_recheck(w);
            w
        } else {
            let w = retry;
            retry = (w * 2).min(RETRY_MAX);
            w
        };
        if tx.send(vec![ModelEvent::Feed { feed, state }]).await.is_err() {
            return;
        }
        // After any error, start again from a full list rather than resume
        // the watch: the list is the truth once the server answers (nothing
        // missed while away), and it is what shows the feed live again — a
        // resumed watch on a quiet cluster would say nothing at all.
        tokio::time::sleep(wait).await;
    }
}

/// Why a list or watch stopped: the cockpit went away, an error to show,
/// or the probe found the server silent since then.
#[derive(Debug)]
enum Stop {
    Closed,
    Failed(watcher::Error),
    Silent(i64),
}

/// Lists the feed, `listing` as it can (a stream, else pages: a server that
/// refuses a stream is listed by pages from then on), and sends it as one
/// `Resync` (the truth: deletes missed while away are not lost); gives the
/// resourceVersion to watch from.
async fn list<K, C>(
    api: &Api<K>,
    d: &'static Kind,
    (liveness, listing, older): (Liveness, &mut Listing, Option<Sym>),
    convert: C,
    tx: &mpsc::Sender<Vec<ModelEvent>>,
) -> Result<String, Stop>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    C: Fn(&K) -> Read + Copy + Send + 'static,
{
    let feed = d.feed;
    let started = std::time::Instant::now();
    let pages = || async {
        let client = api.clone().into_client();
        pages::list(&client, api.resource_url(), convert).await.map_err(Stop::Failed)
    };
    let (list, used) = loop {
        match listing {
            Listing::Stream => match stream::list(api, liveness.watch_seconds(), convert).await {
                Ok(list) => break (list, Listing::Stream),
                Err(Unstreamed::Refused(why)) => {
                    tracing::info!("{}: the API server does not stream lists ({why}); listing by pages", d.resource());
                    *listing = Listing::Pages { refused: Some(why) };
                }
                // The server is busy or failing: a watch cache still filling
                // after a restart answers 429 where a list is served from
                // etcd. Pages this time, as client-go's reflector falls
                // back; a stream again next time. (A 403 or 404 would be
                // the same for pages.)
                Err(Unstreamed::Failed(e)) if http_code(&e).is_some_and(|code| code == 429 || code >= 500) => {
                    tracing::debug!("{}: no stream this time ({}); listing by pages", d.resource(), error_text(&e));
                    break (pages().await?, Listing::Pages { refused: None });
                }
                Err(Unstreamed::Failed(e)) => return Err(Stop::Failed(e)),
            },
            Listing::Pages { .. } => break (pages().await?, listing.clone()),
        }
    };
    tracing::debug!(
        "{} listed ({used:?}): {} in {:.0} ms",
        d.resource(),
        list.objects.len(),
        started.elapsed().as_secs_f64() * 1e3
    );
    let mut out: Vec<ModelEvent> =
        list.skipped.into_iter().map(|reason| ModelEvent::Skipped { feed, reason }).collect();
    out.push(ModelEvent::Listed { feed, by: used, older });
    // The model marks the feed live again with the list.
    out.push(ModelEvent::Resync { feed, objects: list.objects });
    tx.send(out).await.map_err(|_| Stop::Closed)?;
    Ok(list.resource_version)
}

/// Follows the feed from `version`, resuming after the server ends a
/// watch, until an error or the cockpit goes away.
async fn watch<K, C>(
    api: &Api<K>,
    d: &'static Kind,
    liveness: Liveness,
    health: &mut HealthRx,
    convert: C,
    tx: &mpsc::Sender<Vec<ModelEvent>>,
    mut version: String,
) -> Stop
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    C: Fn(&K) -> Read + Copy + Send + 'static,
{
    let params = WatchParams::default().timeout(liveness.watch_seconds());
    // As kube-rs's watcher: a watch silent past its own timeout is over.
    let idle = Duration::from_secs(u64::from(liveness.watch_seconds())) + Duration::from_secs(5);
    loop {
        if let Health::Silent { since } = *health.borrow_and_update() {
            return Stop::Silent(since);
        }
        let stream = match api.watch(&params, &version).await {
            Ok(stream) => stream,
            Err(e) => return Stop::Failed(watcher::Error::WatchStartFailed(e)),
        };
        futures::pin_mut!(stream);
        loop {
            let event = tokio::select! {
                next = tokio::time::timeout(idle, stream.next()) => match next {
                    Ok(Some(event)) => event,
                    // The server ended the watch at its timeout: resume where it was.
                    _ => break,
                },
                changed = health.changed() => {
                    if changed.is_err() {
                        return Stop::Closed;
                    }
                    match *health.borrow_and_update() {
                        Health::Silent { since } => return Stop::Silent(since),
                        Health::Answering => continue,
                    }
                }
            };
            let read = event.map_err(watcher::Error::WatchFailed).and_then(|e| read_event(d, convert, e, &mut version));
            match read {
                Ok(None) => {}
                Ok(Some(event)) => {
                    if tx.send(vec![event]).await.is_err() {
                        return Stop::Closed;
                    }
                }
                Err(e) => return Stop::Failed(e),
            }
        }
    }
}

/// Asks the API server every [`Liveness::probe_every`] whether it answers
/// (`/readyz`: any HTTP answer counts, an error status included — the feeds
/// say what else is wrong); silent for [`Liveness::stall_after`], it is
/// [`Health::Silent`] since its last answer, until it answers again.
async fn probe(client: Client, liveness: Liveness, health: tokio::sync::watch::Sender<Health>) {
    let every = liveness.probe_every();
    let stall = liveness.stall_after.as_secs().max(1) as i64;
    let mut last_answer = crate::clock::wall_clock();
    while !health.is_closed() {
        tokio::time::sleep(every).await;
        let answered = match http::Request::get("/readyz").body(Vec::new()) {
            Ok(request) => matches!(
                tokio::time::timeout(every, client.request_text(request)).await,
                Ok(Ok(_) | Err(kube::Error::Api(_)))
            ),
            Err(_) => false,
        };
        let now = crate::clock::wall_clock();
        if answered {
            last_answer = now;
            health.send_if_modified(|h| std::mem::replace(h, Health::Answering) != Health::Answering);
        } else if now - last_answer >= stall {
            health.send_if_modified(|h| {
                let silent = matches!(h, Health::Silent { .. });
                if !silent {
                    *h = Health::Silent { since: last_answer };
                }
                !silent
            });
        }
    }
}

/// What a watch event changes in the model, if anything, noting where the
/// watch resumes after it. An ERROR event (410 Gone included) ends the
/// watch: the caller lists afresh.
fn read_event<K, C>(
    d: &Kind,
    convert: C,
    event: WatchEvent<K>,
    version: &mut String,
) -> Result<Option<ModelEvent>, watcher::Error>
where
    K: Resource,
    C: Fn(&K) -> Read,
{
    Ok(Some(match event {
        WatchEvent::Added(o) | WatchEvent::Modified(o) => {
            *version = resource_version(&o)?;
            match convert(&o) {
                Ok(x) => ModelEvent::Upsert(x),
                Err(reason) => ModelEvent::Skipped { feed: d.feed, reason },
            }
        }
        WatchEvent::Deleted(o) => {
            *version = resource_version(&o)?;
            let Some((name, namespace)) = name_ns(&o) else { return Ok(None) };
            ModelEvent::Delete(d.key(namespace.as_deref(), &name))
        }
        WatchEvent::Bookmark(b) => {
            *version = b.metadata.resource_version;
            return Ok(None);
        }
        WatchEvent::Error(status) => return Err(watcher::Error::WatchError(status)),
    }))
}

/// Where a watch resumes after this object.
fn resource_version<K: Resource>(o: &K) -> Result<String, watcher::Error> {
    o.meta().resource_version.clone().filter(|v| !v.is_empty()).ok_or(watcher::Error::NoResourceVersion)
}

/// The first wait before a failed watch lists again.
const RETRY_FIRST: Duration = Duration::from_secs(1);
/// The longest wait between tries while the API server does not answer.
const RETRY_MAX: Duration = Duration::from_secs(30);

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
    /// When a silent watch counts as stalled; the client must be made with
    /// the same (`client::connect_with`).
    pub liveness: Liveness,
    /// List by pages even where the server would stream (the benchmarks
    /// measure both); otherwise a stream, and pages where it is refused.
    pub pages: bool,
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

fn dynamic(client: &Client, scope: &Scope, kind: &Kind, version: &str) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(kind.group, version, kind.kind), kind.plural);
    match (&scope.namespace, kind.namespaced) {
        (Some(ns), true) => Api::namespaced_with(client.clone(), ns, &ar),
        _ => Api::all_with(client.clone(), &ar),
    }
}

/// The object as JSON, with the `apiVersion` it was read at (a list's items
/// come without one; the conversion tells versions apart by it).
fn json(o: &DynamicObject, kind: &Kind, version: &str) -> Result<serde_json::Value, String> {
    let mut v = serde_json::to_value(o).map_err(|e| e.to_string())?;
    if let Some(fields) = v.as_object_mut() {
        fields.entry("apiVersion").or_insert_with(|| kind.api_version_at(version).into());
    }
    Ok(v)
}

/// Starts every watcher; each sends its feed's events to `tx`. The agents
/// and dcgm-exporters are found in `snapshots`, the model these feed.
pub fn spawn_all(
    clients: Clients,
    scope: Scope,
    tx: mpsc::Sender<Vec<ModelEvent>>,
    snapshots: tokio::sync::watch::Receiver<std::sync::Arc<crate::model::Snapshot>>,
) -> Vec<JoinHandle<()>> {
    let mut tasks = Vec::new();
    let client = clients.requests.clone();
    let (health_tx, health) = tokio::sync::watch::channel(Health::Answering);
    tasks.push(tokio::spawn(probe(client.clone(), scope.liveness, health_tx)));
    let listing = if scope.pages { Listing::Pages { refused: None } } else { Listing::Stream };
    let live = || (scope.liveness, health.clone(), listing.clone());
    let polling = crate::sources::agents::Polling {
        client: client.clone(),
        config: scope.agents.clone(),
        snapshots,
        watched: scope.namespace.is_none(),
        // Direct reads do not pass through the API server.
        budget: (scope.agents.transport == crate::sources::agents::Transport::PodProxy)
            .then(|| crate::sources::poll::Budget::new(scope.agents.budget)),
    };
    tasks.extend(crate::sources::agents::spawn(&polling, tx.clone()));
    tasks.extend(crate::sources::dcgm::spawn(&polling, tx.clone()));
    // Nodes and pods decode straight into what conversion reads (lean.rs:
    // no JSON round trip, nothing unread allocated, for 100,000 pods);
    // events into k8s-openapi's type; custom resources are read as JSON.
    let nodes = Apis { list: Api::<ApiNode>::all(client.clone()), watch: Api::all(clients.watches.clone()) };
    let node = |n: &ApiNode| convert::node(n).map(Object::Node);
    tasks.push(tokio::spawn(run(move |_| (nodes.clone(), node), &kinds::NODE, live(), tx.clone())));
    let pods = Apis { list: namespaced::<ApiPod>(&client, &scope), watch: namespaced(&clients.watches, &scope) };
    let pod = |p: &ApiPod| convert::pod(p).map(Object::Pod);
    tasks.push(tokio::spawn(run(move |_| (pods.clone(), pod), &kinds::POD, live(), tx.clone())));
    let events = Apis { list: namespaced::<K8sEvent>(&client, &scope), watch: namespaced(&clients.watches, &scope) };
    let event = |e: &K8sEvent| convert::event(e).map(Object::Event);
    tasks.push(tokio::spawn(run(move |_| (events.clone(), event), &kinds::EVENT, live(), tx.clone())));
    // The rest (custom resources, DRA, storage) as JSON through their kind's conversion.
    let typed_above = [Feed::Nodes, Feed::Pods, Feed::Events];
    for kind in kinds::KINDS.into_iter().filter(|k| !typed_above.contains(&k.feed)) {
        let (client, watches, scope) = (client.clone(), clients.watches.clone(), scope.clone());
        let at = move |version: &'static str| {
            let apis =
                Apis { list: dynamic(&client, &scope, kind, version), watch: dynamic(&watches, &scope, kind, version) };
            (apis, move |o: &DynamicObject| json(o, kind, version).and_then(|v| (kind.convert)(&v)))
        };
        tasks.push(tokio::spawn(run(at, kind, live(), tx.clone())));
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

/// Feeds a live source watches: every feed but the two polled from the
/// nodes (dcgm-exporter and the agents, which come later).
pub const FEEDS: &[Feed] = match Feed::ALL.split_last_chunk::<2>() {
    Some((from_the_api_server, [Feed::DcgmExporter, Feed::Agents])) => from_the_api_server,
    _ => panic!("Feed::ALL ends with the feeds polled from the nodes"),
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

    fn event(json: serde_json::Value) -> WatchEvent<ApiPod> {
        serde_json::from_value(json).unwrap()
    }

    /// Where the watch resumes, what reaches the model, and what ends the
    /// watch, event by event.
    #[test]
    fn each_watch_event_moves_the_resume_point_or_ends_the_watch() {
        let read = |e| {
            let mut version = "1".to_string();
            let out = read_event(&kinds::POD, |p: &ApiPod| convert::pod(p).map(Object::Pod), e, &mut version);
            (out, version)
        };
        let pod = |rv: &str| {
            serde_json::json!({"metadata": {"name": "p", "namespace": "team-a", "uid": "u", "resourceVersion": rv,
                "creationTimestamp": "2026-11-30T09:00:00Z"}, "spec": {"containers": []}, "status": {"phase": "Running"}})
        };
        let (out, version) = read(event(serde_json::json!({"type": "ADDED", "object": pod("7")})));
        assert!(matches!(out, Ok(Some(ModelEvent::Upsert(Object::Pod(_))))), "{out:?}");
        assert_eq!(version, "7");
        let (out, version) = read(event(serde_json::json!({"type": "DELETED", "object": pod("8")})));
        assert!(
            matches!(&out, Ok(Some(ModelEvent::Delete(key))) if *key == kinds::POD.key(Some("team-a"), "p")),
            "{out:?}"
        );
        assert_eq!(version, "8");
        let bookmark = serde_json::json!({"type": "BOOKMARK", "object": {"kind": "Pod", "apiVersion": "v1",
            "metadata": {"resourceVersion": "9"}}});
        let (out, version) = read(event(bookmark));
        assert!(matches!(out, Ok(None)), "{out:?}");
        assert_eq!(version, "9");
        // An object without a resourceVersion: nowhere to resume from.
        let (out, version) = read(event(serde_json::json!({"type": "MODIFIED", "object": pod("")})));
        assert!(matches!(out, Err(watcher::Error::NoResourceVersion)), "{out:?}");
        assert_eq!(version, "1");
        // 410 Gone after a compaction: the watch ends, the caller lists afresh.
        let gone = serde_json::json!({"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1",
            "status": "Failure", "message": "too old resource version: 1 (5)", "reason": "Expired", "code": 410}});
        let (out, _) = read(event(gone));
        assert!(matches!(&out, Err(e) if http_code(e) == Some(410)), "{out:?}");
    }
}
