//! Where the data come from, described once and started once: the cockpit,
//! the one-shot commands (`snapshot`, `why`) and the command-line actions
//! all start a [`Source`] with [`start`] and read its [`Session`].

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::actions::audit::AuditLog;
use crate::actions::backend::Backend;
use crate::actions::exec::Executor;
use crate::actions::{ActionId, Progress};
use crate::app::SourceSwitch;
use crate::cli::{DemoChoice, SourceArgs};
use crate::config::Paths;
use crate::model::{Cluster, FeedState, ModelEvent, Snapshot, SourceInfo, SourceKind, Timestamp};
use crate::sources::agents::Transport;
use crate::sources::kube::{client, watch as kube_watch};
use crate::sources::sim::{driver, scenarios};
use crate::ui::Context;

use super::UsageError;

/// Where the data come from.
#[derive(Clone, Debug)]
pub enum Source {
    /// The simulated cluster, `advance` simulated seconds after its start.
    Demo {
        scenario: String,
        seed: u64,
        advance: u64,
        /// A mystery: the scenario's name and story are shown nowhere.
        hidden: bool,
    },
    Kube {
        target: client::Target,
        scope: Box<kube_watch::Scope>,
    },
    /// kubectl dumps.
    File(Vec<PathBuf>),
}

impl Source {
    /// `--demo`/`--scenario` → demo; `--file` → files; otherwise the kube context.
    pub fn from_args(from: &DemoChoice, advance: u64, source: &SourceArgs) -> Source {
        if let Some(scenario) = from.scenario() {
            Source::Demo { scenario: scenario.to_string(), seed: from.seed, advance, hidden: false }
        } else if !source.file.is_empty() {
            Source::File(source.file.clone())
        } else {
            Source::kube(source)
        }
    }

    /// This source with a palette's `switch` applied (`:scenario`, `:ctx`,
    /// `:ns`), or why that makes no sense here.
    pub fn switched(&self, switch: &SourceSwitch) -> Result<Source, String> {
        Ok(match (self, switch) {
            (Source::Demo { hidden: true, .. }, SourceSwitch::Scenario(_)) => {
                return Err(":scenario would give the mystery away".into());
            }
            (Source::Demo { seed, .. }, SourceSwitch::Scenario(name)) => {
                Source::Demo { scenario: name.clone(), seed: *seed, advance: 0, hidden: false }
            }
            (Source::Kube { target, scope }, SourceSwitch::Context(context)) => Source::Kube {
                target: client::Target { context: Some(context.clone()), ..target.clone() },
                scope: scope.clone(),
            },
            (Source::Kube { target, scope }, SourceSwitch::Namespace(namespace)) => Source::Kube {
                target: target.clone(),
                scope: Box::new(kube_watch::Scope { namespace: namespace.clone(), ..(**scope).clone() }),
            },
            (_, SourceSwitch::Scenario(_)) => return Err(":scenario only works in `kgpu demo`".into()),
            _ => return Err(":ctx and :ns work on a live cluster".into()),
        })
    }

    /// What the palette can complete for this source: the kubeconfig's
    /// contexts, or the demo's scenarios.
    pub fn vocabulary(&self) -> crate::app::palette::Vocabulary {
        crate::app::palette::Vocabulary {
            contexts: match self {
                Source::Kube { target, .. } => client::contexts(target),
                _ => Vec::new(),
            },
            scenarios: match self {
                Source::Demo { hidden: true, .. } => Vec::new(),
                Source::Demo { .. } => crate::sources::sim::scenarios::names().into_iter().map(String::from).collect(),
                _ => Vec::new(),
            },
            ..Default::default()
        }
    }

    /// The kube context the flags name.
    pub fn kube(source: &SourceArgs) -> Source {
        Source::Kube {
            target: client::Target { kubeconfig: source.kubeconfig.clone(), context: source.context.clone() },
            scope: Box::new(source.scope()),
        }
    }
}

/// How a session runs.
pub enum Run<'a> {
    /// Keeps following the source, and carries out actions with what `Shared` gives.
    Live(&'a Shared),
    /// One complete snapshot, then done: no actions, the demo's clock stands still.
    Once,
}

/// What every live session's executor shares: where it reports, the
/// cancels, where the audit log is.
pub struct Shared {
    pub reports: mpsc::Sender<Progress>,
    pub cancel: watch::Receiver<BTreeSet<ActionId>>,
    pub paths: Paths,
}

/// A started source: its snapshots, its executor unless read-only, and
/// what the title bar says about it.
pub struct Session {
    tasks: Vec<JoinHandle<()>>,
    pub snapshots: watch::Receiver<Arc<Snapshot>>,
    pub executor: Option<Executor>,
    pub context: Context,
    /// Why actions are off for this source, if they are.
    pub read_only_reason: Option<String>,
    /// A live cluster's (kube only): what "every feed has listed" means.
    /// Its ages count on the wall clock; the demo and dumps have their own time.
    scope: Option<kube_watch::Scope>,
    /// What the reader should know about the data (a dump's empty files,
    /// duplicates, clock skew), one line each.
    pub warnings: Vec<String>,
}

impl Drop for Session {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl Session {
    /// "Now" for the analyses of `snap`.
    pub fn now(&self, snap: &Snapshot) -> Timestamp {
        if self.scope.is_some() || snap.clock == 0 { crate::clock::wall_clock().max(snap.clock) } else { snap.clock }
    }

    /// The first complete snapshot: every feed listed once (or said why it
    /// cannot), at most [`SYNC_TIMEOUT`]; a verdict on half a cluster
    /// would be wrong. The demo and files are complete from the start.
    pub async fn synced(&mut self) -> Arc<Snapshot> {
        let Some(scope) = &self.scope else {
            while self.snapshots.borrow_and_update().nodes.is_empty() {
                if self.snapshots.changed().await.is_err() {
                    break;
                }
            }
            return self.snapshots.borrow().clone();
        };
        let deadline = tokio::time::Instant::now() + SYNC_TIMEOUT;
        // The agents' and exporters' first rounds too, when they are read at all.
        let reading = scope.agents.transport != Transport::Off;
        let polled: Vec<crate::model::Feed> = [
            (crate::model::Feed::Agents, reading),
            (crate::model::Feed::DcgmExporter, reading || scope.agents.prometheus.is_some()),
        ]
        .into_iter()
        .filter_map(|(f, read)| read.then_some(f))
        .collect();
        let synced = |s: &Snapshot| {
            kube_watch::FEEDS
                .iter()
                .chain(polled.iter())
                .all(|f| matches!(s.feed(*f).map(|x| &x.state), Some(FeedState::Live | FeedState::Unavailable(_))))
        };
        loop {
            if synced(&self.snapshots.borrow_and_update()) {
                break;
            }
            if tokio::time::timeout_at(deadline, self.snapshots.changed()).await.is_err() {
                tracing::warn!("not every feed listed within {}s", SYNC_TIMEOUT.as_secs());
                break;
            }
        }
        self.snapshots.borrow().clone()
    }
}

/// How long a one-shot waits for every feed's first list.
pub const SYNC_TIMEOUT: Duration = Duration::from_secs(60);

/// Starts `source`. Problems with it (an unknown scenario, an unreachable
/// cluster, unreadable files) are usage errors, reported before any
/// terminal goes raw.
pub async fn start(source: &Source, run: Run<'_>) -> anyhow::Result<Session> {
    match source {
        Source::Demo { scenario, seed, advance, hidden } => start_demo(scenario, *seed, *advance, *hidden, run),
        Source::Kube { target, scope } => start_kube(target, scope, run).await,
        Source::File(paths) => start_file(paths),
    }
}

/// The model task: applies batches, publishes at most every 50 ms.
pub fn spawn_model(
    source: SourceInfo,
    mut rx: mpsc::Receiver<Vec<ModelEvent>>,
) -> (watch::Receiver<Arc<Snapshot>>, JoinHandle<()>) {
    let mut cluster = Cluster::new(source);
    let (tx, out) = watch::channel(Arc::new(cluster.snapshot()));
    let task = tokio::spawn(async move {
        let mut published = cluster.generation();
        while let Some(batch) = rx.recv().await {
            cluster.apply_all(batch);
            while let Ok(more) = rx.try_recv() {
                cluster.apply_all(more);
            }
            if cluster.generation() != published {
                published = cluster.generation();
                if tx.send(Arc::new(cluster.snapshot())).is_err() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    });
    (out, task)
}

fn executor(
    backend: Backend,
    snapshots: &watch::Receiver<Arc<Snapshot>>,
    shared: &Shared,
    context: String,
    user: String,
) -> Executor {
    Executor {
        backend,
        snapshots: snapshots.clone(),
        reports: shared.reports.clone(),
        audit: shared.paths.audit_log().map(|path| AuditLog { path }),
        context,
        user,
        mig_timeout: Duration::from_secs(600),
        drain_timeout: Duration::from_secs(300),
        place_timeout: Duration::from_secs(600),
        id: 0,
        cancel: shared.cancel.clone(),
    }
}

/// The demo cluster after `advance` seconds of simulated time, and its
/// "now". Deterministic: the same scenario and seed give the same snapshot.
/// `hidden`: as a mystery shows it (no name or story, names disguised).
pub fn demo_snapshot(scenario: &str, seed: u64, advance: u64, hidden: bool) -> anyhow::Result<(Snapshot, Timestamp)> {
    let mut sim = scenarios::build(scenario, seed).map_err(|e| UsageError(e.to_string()))?;
    if hidden {
        sim.hide_scenario();
        sim.disguise(seed);
    }
    let mut cluster = Cluster::new(SourceInfo {
        kind: SourceKind::Demo,
        name: if hidden { "mystery".into() } else { scenario.to_string() },
    });
    cluster.apply_all(sim.initial_events());
    let mut left = advance as i64;
    while left > 0 {
        let dt = left.min(5);
        cluster.apply_all(sim.step(dt));
        left -= dt;
    }
    Ok((cluster.snapshot(), sim.now))
}

fn start_demo(scenario: &str, seed: u64, advance: u64, hidden: bool, run: Run<'_>) -> anyhow::Result<Session> {
    let shown_as = if hidden { "mystery" } else { scenario };
    let context = |title: String| Context { source: format!("demo:{shown_as}"), subtitle: title, production: false };
    let Run::Live(shared) = run else {
        let (snap, _) = demo_snapshot(scenario, seed, advance, hidden)?;
        let title = snap.scenario.as_ref().map(|s| s.title.to_string()).unwrap_or_default();
        let (_tx, snapshots) = watch::channel(Arc::new(snap));
        return Ok(Session {
            tasks: Vec::new(),
            snapshots,
            executor: None,
            context: context(title),
            read_only_reason: Some("a one-shot snapshot".into()),
            scope: None,
            warnings: Vec::new(),
        });
    };
    let mut sim = scenarios::build(scenario, seed).map_err(|e| UsageError(e.to_string()))?;
    if hidden {
        sim.hide_scenario();
        sim.disguise(seed);
    }
    if advance > 0 {
        // The driver's first batch carries the state reached.
        sim.step(advance as i64);
    }
    let title = sim.scenario().title.clone();
    let (events_tx, events_rx) = mpsc::channel(1024);
    let (snapshots, model_task) =
        spawn_model(SourceInfo { kind: SourceKind::Demo, name: shown_as.to_string() }, events_rx);
    let (handle, sim_task) = driver::spawn(sim, events_tx, Duration::from_secs(1));
    let user = std::env::var("USER").unwrap_or_else(|_| "demo".into());
    let mut exec = executor(Backend::Sim(handle), &snapshots, shared, format!("demo:{shown_as}"), user);
    exec.mig_timeout = Duration::from_secs(180);
    Ok(Session {
        tasks: vec![model_task, sim_task],
        snapshots,
        executor: Some(exec),
        context: context(title.to_string()),
        read_only_reason: None,
        scope: None,
        warnings: Vec::new(),
    })
}

async fn start_kube(target: &client::Target, scope: &kube_watch::Scope, run: Run<'_>) -> anyhow::Result<Session> {
    let (clients, info) =
        client::connect_clients(target, scope.liveness).await.map_err(|e| UsageError(e.to_string()))?;
    let (tx, rx) = mpsc::channel(1024);
    let (snapshots, model) = spawn_model(SourceInfo { kind: SourceKind::Kube, name: info.context.clone() }, rx);
    let mut tasks = kube_watch::spawn_all(clients, scope.clone(), tx, snapshots.clone());
    tasks.push(model);
    let executor = match run {
        Run::Live(shared) => {
            let actions = client::action_client(target).await.map_err(|e| UsageError(e.to_string()))?;
            Some(executor(Backend::Kube(actions), &snapshots, shared, info.context.clone(), info.user.clone()))
        }
        Run::Once => None,
    };
    Ok(Session {
        tasks,
        snapshots,
        read_only_reason: executor.is_none().then(|| "a one-shot snapshot".into()),
        executor,
        context: Context {
            source: info.context.clone(),
            subtitle: format!(
                "{}{}",
                info.server,
                scope.namespace.as_ref().map_or(String::new(), |n| format!(" · namespace {n}"))
            ),
            production: info.looks_like_production(),
        },
        scope: Some(scope.clone()),
        warnings: Vec::new(),
    })
}

fn start_file(paths: &[PathBuf]) -> anyhow::Result<Session> {
    let (events, _, stats) = crate::sources::file::load(paths).map_err(|e| UsageError(e.to_string()))?;
    let warnings = stats.warnings();
    let mut cluster = Cluster::new(SourceInfo { kind: SourceKind::File, name: String::new() });
    cluster.apply_all(events);
    let (_tx, snapshots) = watch::channel(Arc::new(cluster.snapshot()));
    let unknown = stats.unknown.values().sum::<usize>();
    Ok(Session {
        tasks: Vec::new(),
        snapshots,
        executor: None,
        context: Context {
            source: "files".into(),
            subtitle: format!(
                "{} file(s), {} object(s){}{}",
                stats.files,
                stats.objects,
                if unknown > 0 { format!(", {unknown} of other kinds ignored") } else { String::new() },
                if stats.skipped > 0 { format!(", {} malformed skipped", stats.skipped) } else { String::new() }
            ),
            production: false,
        },
        read_only_reason: Some("offline files: nothing to act on".into()),
        scope: None,
        warnings,
    })
}
