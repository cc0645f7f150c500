//! The node agents and dcgm-exporters are read one request per reporter
//! pod, through the API server's pod proxy by default: their cost to the
//! cluster grows with the fleet (at 2,000 nodes, asking every reporter
//! every 10 s was 200 requests a second). So:
//!
//! - they are found from the cockpit's own pod watch (the model's
//!   `endpoints`), not by LISTs of their own; only a cockpit that watches
//!   one namespace, or may not watch pods, lists them, and then every few
//!   minutes;
//! - through the proxy they are read within a request budget shared by
//!   both feeds (a token bucket: a burst for the first view of a small
//!   cluster, then so many requests a second), the never-read first, then
//!   those whose readings are oldest weighted by how many GPUs their node
//!   has;
//! - a 403 stops the feed, said as forbidden, and it is asked again less
//!   and less often; a reporter that fails is asked again later and later,
//!   its node saying why and when.

use std::collections::{BTreeSet, HashMap};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use kube::Client;
use kube::api::{Api, ListParams};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use crate::model::time::age;
use crate::model::{
    Coverage, EndpointKind, Feed, FeedProblem, FeedState, ModelEvent, Object, ObjectKey, Snapshot, Sym, Timestamp,
};
use crate::sources::kube::client::short_error;
use crate::sources::kube::convert;
use crate::sources::kube::lean::Pod as ApiPod;

/// Requests a second both polled feeds together may send the API server,
/// unless `--api-budget` says otherwise.
pub const DEFAULT_BUDGET: f64 = 0.5;
/// Requests that may go at once after a quiet spell: a small cluster's
/// first view has every reporter read at once.
pub const BURST: f64 = 16.0;
/// The longest a failing reporter waits for its next try.
const TARGET_BACKOFF_MAX: Duration = Duration::from_secs(600);
/// The first and longest waits before a forbidden feed is asked again.
const RECHECK_FIRST: Duration = Duration::from_secs(5);
const RECHECK_MAX: Duration = Duration::from_secs(300);
/// How often a namespaced cockpit lists the reporters it cannot watch.
const LIST_EVERY: Duration = Duration::from_secs(300);

/// A token bucket: `rate` requests a second, at most `burst` at once.
#[derive(Debug)]
pub struct Budget {
    rate: f64,
    burst: f64,
    left: Mutex<(f64, Option<Instant>)>,
}

impl Budget {
    pub fn new(rate: f64) -> Arc<Budget> {
        Arc::new(Budget { rate, burst: BURST.max(rate), left: Mutex::new((BURST.max(rate), None)) })
    }

    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// Whole requests the budget holds at `now`.
    pub fn available(&self, now: Instant) -> usize {
        let Ok(left) = self.left.lock() else { return 0 };
        let (tokens, last) = *left;
        let refilled = match last {
            Some(last) => (tokens + now.saturating_duration_since(last).as_secs_f64() * self.rate).min(self.burst),
            None => tokens,
        };
        refilled as usize
    }

    /// One request's worth, if the budget has it at `now`.
    pub fn take(&self, now: Instant) -> bool {
        let Ok(mut left) = self.left.lock() else { return false };
        let (tokens, last) = *left;
        let refilled = match last {
            Some(last) => (tokens + now.saturating_duration_since(last).as_secs_f64() * self.rate).min(self.burst),
            None => tokens,
        };
        let (tokens, granted) = if refilled >= 1.0 { (refilled - 1.0, true) } else { (refilled, false) };
        *left = (tokens, Some(now));
        granted
    }
}

/// One reporter pod to read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub namespace: Sym,
    pub name: Arc<str>,
    pub node: Sym,
    pub port: u16,
    pub ip: Option<IpAddr>,
    pub running: bool,
    /// The node's GPUs (allocatable), which rank its reads.
    pub gpus: u64,
}

/// The reporters of `kind` among `pods`, in `namespace` only when given;
/// one per node (a running one where a DaemonSet is rolling), by node.
pub fn targets<'a>(
    pods: impl IntoIterator<Item = &'a crate::model::Pod>,
    kind: EndpointKind,
    namespace: Option<&str>,
) -> Vec<Target> {
    let mut found: Vec<Target> = pods
        .into_iter()
        .filter(|p| namespace.is_none_or(|ns| p.namespace.as_str() == ns))
        .filter(|p| !p.phase.is_terminal())
        .filter_map(|p| {
            let e = p.endpoint.as_ref().filter(|e| e.kind == kind)?;
            Some(Target {
                namespace: p.namespace.clone(),
                name: p.name.clone(),
                node: p.node.clone()?,
                port: e.port,
                ip: e.ip,
                running: p.phase == crate::model::PodPhase::Running && !p.terminating,
                gpus: 0,
            })
        })
        .collect();
    found.sort_by(|a, b| {
        (a.node.as_str(), !a.running, a.namespace.as_str(), &a.name).cmp(&(
            b.node.as_str(),
            !b.running,
            b.namespace.as_str(),
            &b.name,
        ))
    });
    found.dedup_by(|later, first| later.node == first.node);
    found
}

/// Why a reporter could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReadError {
    /// RBAC said no: the whole feed is forbidden, not this node.
    Forbidden(String),
    /// The feed cannot read anything (no token for the agents): not this node.
    Feed(String),
    /// This reporter did not answer, or answered nonsense.
    Target(String),
}

/// How one feed reads its reporters.
pub trait Reader: Send + Sync {
    /// Before a round's reads (the agents' token).
    fn prepare(&mut self) -> BoxFuture<'_, Result<(), ReadError>> {
        Box::pin(async { Ok(()) })
    }
    /// One reporter: the objects its node gets.
    fn read<'a>(&'a self, target: &'a Target) -> BoxFuture<'a, Result<Vec<Object>, ReadError>>;
    /// What its node shows while it cannot be read.
    fn failed(&self, target: &Target, why: &str, now: Timestamp) -> Vec<Object>;
    /// The keys of what a node got from its reporter, dropped when it goes.
    fn keys(&self, node: Sym) -> Vec<ObjectKey>;
}

/// Where the reporters are found.
pub struct Discovery {
    pub snapshots: watch::Receiver<Arc<Snapshot>>,
    pub kind: EndpointKind,
    /// Only reporters in this namespace count (the agents': a pod elsewhere
    /// that calls itself an agent must not get a node's token).
    pub namespace: Option<String>,
    /// The pod watch covers every namespace: no LIST is needed.
    pub watched: bool,
    /// For a LIST when it is: the client and the label selectors.
    pub client: Client,
    pub selectors: Vec<String>,
    listed: Option<(Instant, Arc<[Target]>)>,
    /// A LIST that failed: its problem, until when it stands, the next wait.
    refused: Option<(FeedProblem, Hold)>,
    /// The last targets found in the pod watch, the endpoints they came
    /// from and when: a quiet tick finds them again without a walk.
    watched_last: Option<Watched>,
}

/// What the pod watch gave last: the endpoints, when, and the targets.
type Watched = (imbl::OrdMap<crate::model::PodKey, Arc<crate::model::Pod>>, Instant, Arc<[Target]>);

/// How long the nodes' GPU counts that rank the reads are kept.
const WEIGHTS_FRESH: Duration = Duration::from_secs(60);

/// What discovery found.
#[derive(Debug, PartialEq)]
enum Found {
    /// The pod watch has not listed yet.
    NotYet,
    Targets(Arc<[Target]>),
    Unavailable(FeedProblem),
}

impl Discovery {
    pub fn new(
        snapshots: watch::Receiver<Arc<Snapshot>>,
        kind: EndpointKind,
        namespace: Option<String>,
        watched: bool,
        client: Client,
        selectors: Vec<String>,
    ) -> Discovery {
        Discovery {
            snapshots,
            kind,
            namespace,
            watched,
            client,
            selectors,
            listed: None,
            refused: None,
            watched_last: None,
        }
    }

    async fn find(&mut self, now: Instant) -> Found {
        let snap = self.snapshots.borrow().clone();
        let pods_state = snap.feed(Feed::Pods).map(|f| &f.state);
        if self.watched && !matches!(pods_state, Some(FeedState::Unavailable(_))) {
            if matches!(pods_state, None | Some(FeedState::Syncing)) {
                return Found::NotYet;
            }
            if let Some((endpoints, at, found)) = &self.watched_last
                && endpoints.ptr_eq(&snap.endpoints)
                && now.saturating_duration_since(*at) < WEIGHTS_FRESH
            {
                return Found::Targets(found.clone());
            }
            let found = targets(snap.endpoints.values().map(|p| &**p), self.kind, self.namespace.as_deref());
            let found: Arc<[Target]> = weighed(found, &snap).into();
            self.watched_last = Some((snap.endpoints.clone(), now, found.clone()));
            return Found::Targets(found);
        }
        if let Some((at, found)) = &self.listed
            && now.saturating_duration_since(*at) < LIST_EVERY
        {
            return Found::Targets(found.clone());
        }
        if let Some((problem, hold)) = &self.refused
            && hold.until > now
        {
            return Found::Unavailable(problem.clone());
        }
        match self.list().await {
            Ok(found) => {
                let found: Arc<[Target]> = weighed(found, &snap).into();
                self.refused = None;
                self.listed = Some((now, found.clone()));
                Found::Targets(found)
            }
            Err(problem) => {
                let wait = self.refused.as_ref().map_or(RECHECK_FIRST, |(_, h)| h.next);
                self.refused = Some((problem.clone(), Hold { until: now + wait, next: (wait * 2).min(RECHECK_MAX) }));
                Found::Unavailable(problem)
            }
        }
    }

    /// The reporters by their labels, for a cockpit whose pod watch does not see them.
    async fn list(&self) -> Result<Vec<Target>, FeedProblem> {
        let pods: Api<ApiPod> = match &self.namespace {
            Some(ns) => Api::namespaced(self.client.clone(), ns),
            None => Api::all(self.client.clone()),
        };
        let mut found = Vec::new();
        for selector in &self.selectors {
            match pods.list(&ListParams::default().labels(selector)).await {
                Ok(list) => found.extend(list.items.iter().filter_map(|p| convert::pod(p).ok())),
                Err(kube::Error::Api(s)) if s.code == 403 => {
                    let place = self.namespace.as_deref().map_or("cluster-wide".into(), |ns| format!("in {ns}"));
                    return Err(FeedProblem::Forbidden(format!(
                        "cannot list pods {place} to find the reporters: {}",
                        s.message
                    )));
                }
                Err(e) => return Err(FeedProblem::Error(format!("listing pods: {}", short_error(&e)))),
            }
        }
        Ok(targets(found.iter(), self.kind, self.namespace.as_deref()))
    }
}

/// Each target with its node's GPUs.
fn weighed(mut found: Vec<Target>, snap: &Snapshot) -> Vec<Target> {
    for t in &mut found {
        t.gpus = snap.nodes.get(&t.node).map_or(0, |n| n.allocatable.gpu);
    }
    found
}

/// What the poller knows of one node's reporter.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Seen {
    read_at: Option<Instant>,
    /// Wall-clock time of the last answer, for the coverage.
    read_wall: Option<Timestamp>,
    failures: u32,
    retry_at: Option<Instant>,
}

/// The per-node bookkeeping and the order of reads: pure, tested alone.
#[derive(Debug, Default)]
struct Schedule {
    seen: HashMap<Sym, Seen>,
}

impl Schedule {
    /// At most `limit` of the targets due at `now`, most wanted first:
    /// never read, then oldest reading × (1 + the node's GPUs).
    fn due(&self, targets: &[Target], now: Instant, interval: Duration, limit: usize) -> Vec<usize> {
        let mut due: Vec<(u8, f64, usize)> = targets
            .iter()
            .enumerate()
            .filter_map(|(i, t)| {
                let seen = self.seen.get(&t.node).copied().unwrap_or_default();
                if seen.retry_at.is_some_and(|r| r > now) {
                    return None;
                }
                let weight = 1.0 + t.gpus as f64;
                match seen.read_at {
                    None if seen.failures == 0 => Some((0, -weight, i)),
                    None => Some((1, -weight, i)),
                    Some(at) => {
                        let staleness = now.saturating_duration_since(at);
                        (staleness >= interval).then(|| (1, -(staleness.as_secs_f64() * weight), i))
                    }
                }
            })
            .collect();
        let order =
            |a: &(u8, f64, usize), b: &(u8, f64, usize)| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)).then(a.2.cmp(&b.2));
        // Only the few the budget allows are sorted: a large fleet's tick stays cheap.
        if limit < due.len() {
            due.select_nth_unstable_by(limit, order);
            due.truncate(limit);
        }
        due.sort_by(order);
        due.into_iter().map(|(_, _, i)| i).collect()
    }

    fn answered(&mut self, node: Sym, now: Instant, wall: Timestamp) {
        self.seen.insert(node, Seen { read_at: Some(now), read_wall: Some(wall), failures: 0, retry_at: None });
    }

    /// A failed read: the next try waits `interval` × 2^failures, at most
    /// [`TARGET_BACKOFF_MAX`]. Returns that wait.
    fn failed(&mut self, node: Sym, now: Instant, interval: Duration) -> Duration {
        let seen = self.seen.entry(node).or_default();
        seen.failures = seen.failures.saturating_add(1);
        let wait = interval.saturating_mul(1 << seen.failures.min(16)).min(TARGET_BACKOFF_MAX);
        seen.retry_at = Some(now + wait);
        wait
    }

    /// What has been read of `reporters` (the seen are kept to those present).
    fn coverage(&self, reporters: usize, budget: Option<f64>) -> Coverage {
        let walls = self.seen.values().filter_map(|s| s.read_wall);
        let (read, oldest) =
            walls.fold((0usize, None::<Timestamp>), |(n, o), w| (n + 1, Some(o.map_or(w, |o| o.min(w)))));
        Coverage {
            reporters: u32::try_from(reporters).unwrap_or(u32::MAX),
            read: u32::try_from(read).unwrap_or(u32::MAX),
            oldest_reading: if read >= reporters { oldest } else { None },
            budget,
            via: None,
        }
    }
}

/// Polls one feed until the model is gone.
pub async fn run<R: Reader>(
    feed: Feed,
    mut discovery: Discovery,
    mut reader: R,
    budget: Option<Arc<Budget>>,
    interval: Duration,
    tx: mpsc::Sender<Vec<ModelEvent>>,
) {
    if tx.send(vec![ModelEvent::Feed { feed, state: FeedState::Syncing }]).await.is_err() {
        return;
    }
    let tick = interval.min(Duration::from_secs(1));
    let mut poller = Poller::new(feed);
    loop {
        let now = Instant::now();
        let found = discovery.find(now).await;
        let events = poller.round(found, &mut reader, budget.as_deref(), interval, now).await;
        if !events.is_empty() && tx.send(events).await.is_err() {
            return;
        }
        tokio::time::sleep(tick).await;
    }
}

/// A feed stopped as a whole (forbidden, no token): until when, and the
/// next wait.
#[derive(Clone, Copy, Debug)]
struct Hold {
    until: Instant,
    next: Duration,
}

struct Poller {
    feed: Feed,
    schedule: Schedule,
    /// Nodes whose objects the model has from this feed.
    reported: BTreeSet<Sym>,
    /// The feed state last sent, and the coverage.
    state: Option<(FeedState, Option<Coverage>)>,
    hold: Option<Hold>,
    /// The targets of the last round: the same ones again need no bookkeeping.
    last_targets: Option<Arc<[Target]>>,
}

impl Poller {
    fn new(feed: Feed) -> Poller {
        Poller {
            feed,
            schedule: Schedule::default(),
            reported: BTreeSet::new(),
            state: None,
            hold: None,
            last_targets: None,
        }
    }

    async fn round<R: Reader>(
        &mut self,
        found: Found,
        reader: &mut R,
        budget: Option<&Budget>,
        interval: Duration,
        now: Instant,
    ) -> Vec<ModelEvent> {
        let mut events = Vec::new();
        let targets = match found {
            Found::NotYet => return events,
            Found::Unavailable(problem) => {
                self.last_targets = None;
                self.forget(&[], reader, &mut events);
                self.say(FeedState::Unavailable(problem), None, &mut events);
                return events;
            }
            Found::Targets(t) if t.is_empty() => {
                self.last_targets = None;
                self.forget(&[], reader, &mut events);
                let problem = match self.feed {
                    Feed::Agents => "no kgpu agents (deploy them: kubectl apply -f assets/agent/)",
                    _ => "no dcgm-exporter pods (app=nvidia-dcgm-exporter or app.kubernetes.io/name=dcgm-exporter)",
                };
                self.say(FeedState::Unavailable(FeedProblem::Missing(problem.into())), None, &mut events);
                return events;
            }
            Found::Targets(t) => t,
        };
        let changed = self.last_targets.as_ref().is_none_or(|last| !Arc::ptr_eq(last, &targets));
        if changed {
            self.forget(&targets, reader, &mut events);
            self.last_targets = Some(targets.clone());
        }
        let wall = crate::clock::wall_clock();
        let on_hold = self.hold.is_some_and(|h| h.until > now);
        // A feed on hold probes with one reporter when the hold ends.
        let limit = match (on_hold, self.hold.is_some(), budget) {
            (true, _, _) => 0,
            (false, true, _) => 1,
            (false, false, Some(b)) => b.available(now),
            (false, false, None) => usize::MAX,
        };
        let due = if limit == 0 { Vec::new() } else { self.schedule.due(&targets, now, interval, limit) };
        if due.is_empty() && !changed {
            return events;
        }
        let chosen: Vec<&Target> =
            due.into_iter().map(|i| &targets[i]).take_while(|_| budget.is_none_or(|b| b.take(now))).collect();
        let mut state = self.state.as_ref().map(|(s, _)| s.clone()).unwrap_or(FeedState::Syncing);
        if !chosen.is_empty() {
            match reader.prepare().await {
                Err(e) => {
                    self.stop(e, now, &mut state);
                }
                Ok(()) => {
                    let results = futures::future::join_all(chosen.iter().map(|t| reader.read(t))).await;
                    let mut stopped = false;
                    for (target, result) in chosen.iter().zip(results) {
                        match result {
                            Ok(objects) => {
                                self.schedule.answered(target.node.clone(), now, wall);
                                self.reported.insert(target.node.clone());
                                events.extend(objects.into_iter().map(ModelEvent::Upsert));
                                if !stopped {
                                    self.hold = None;
                                    state = FeedState::Live;
                                }
                            }
                            Err(ReadError::Target(why)) => {
                                let wait = self.schedule.failed(target.node.clone(), now, interval);
                                let failures = self.schedule.seen.get(&target.node).map_or(1, |s| s.failures);
                                let why = format!(
                                    "{why} ({} in a row; next try in {})",
                                    failures,
                                    age(wait.as_secs() as i64)
                                );
                                self.reported.insert(target.node.clone());
                                events.extend(reader.failed(target, &why, wall).into_iter().map(ModelEvent::Upsert));
                                if state == FeedState::Syncing {
                                    state = FeedState::Live;
                                }
                            }
                            // Once a round: the hold doubles per round, not per reporter.
                            Err(e) if !stopped => {
                                stopped = true;
                                self.stop(e, now, &mut state);
                            }
                            Err(_) => {}
                        }
                    }
                }
            }
        }
        let coverage = self.schedule.coverage(targets.len(), budget.map(Budget::rate));
        if state != FeedState::Syncing {
            self.say(state, Some(coverage), &mut events);
        }
        events
    }

    /// The feed stops as a whole; it is asked again later, later each time.
    fn stop(&mut self, error: ReadError, now: Instant, state: &mut FeedState) {
        let next = self.hold.map_or(RECHECK_FIRST, |h| (h.next * 2).min(RECHECK_MAX));
        let wait = self.hold.map_or(RECHECK_FIRST, |h| h.next);
        self.hold = Some(Hold { until: now + wait, next });
        let asked_again = format!("; asked again in {}", age(wait.as_secs() as i64));
        *state = FeedState::Unavailable(match error {
            ReadError::Forbidden(why) => FeedProblem::Forbidden(why + &asked_again),
            ReadError::Feed(why) | ReadError::Target(why) => FeedProblem::Error(why + &asked_again),
        });
    }

    /// Drops what the model has of nodes whose reporter is gone.
    fn forget<R: Reader>(&mut self, targets: &[Target], reader: &R, events: &mut Vec<ModelEvent>) {
        let present: BTreeSet<Sym> = targets.iter().map(|t| t.node.clone()).collect();
        let gone: Vec<Sym> = self.reported.difference(&present).cloned().collect();
        for node in gone {
            self.reported.remove(&node);
            events.extend(reader.keys(node).into_iter().map(ModelEvent::Delete));
        }
        self.schedule.seen.retain(|node, _| present.contains(node));
    }

    /// The feed's state and coverage, sent only when they change: each
    /// change costs a large fleet a full analysis.
    fn say(&mut self, state: FeedState, coverage: Option<Coverage>, events: &mut Vec<ModelEvent>) {
        let last = self.state.as_ref();
        if last.map(|(s, _)| s) != Some(&state) {
            events.push(ModelEvent::Feed { feed: self.feed, state: state.clone() });
        }
        if let Some(coverage) = &coverage
            && last.and_then(|(_, c)| c.as_ref()) != Some(coverage)
        {
            events.push(ModelEvent::Coverage { feed: self.feed, coverage: coverage.clone() });
        }
        self.state = Some((state, coverage.or(last.and_then(|(_, c)| c.clone()))));
    }
}

#[cfg(test)]
mod tests;
