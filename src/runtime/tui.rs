//! The interactive cockpit: the UI loop on the main thread, the model task,
//! the source tasks, and the effect runner, connected by channels (values,
//! not locks). Redraws only when something changed.

use std::collections::{BTreeSet, VecDeque};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crossterm::event::{Event, EventStream, KeyEventKind};
use futures::StreamExt;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::actions::audit::AuditLog;
use crate::actions::backend::Backend;
use crate::actions::exec::Executor;
use crate::actions::{ActionId, Progress};
use crate::analysis::{Thresholds, waves};
use crate::app::{App, Effect, Msg};
use crate::config::Paths;
use crate::model::audit::AuditEntry;
use crate::model::{Cluster, DriverVersion, ModelEvent, Snapshot, SourceInfo, SourceKind};
use crate::sources::kube::{client, watch as kube_watch};
use crate::sources::sim::{driver, scenarios};
use crate::ui::{self, Context, Theme};
use crate::view_model::panes::{Views, audit_rows};

use super::UsageError;
use super::terminal::Guard;

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

/// Where the cockpit's data come from.
#[derive(Clone, Debug)]
pub enum CockpitSource {
    Demo { scenario: String, seed: u64 },
    Kube { target: client::Target, scope: kube_watch::Scope },
    File(Vec<PathBuf>),
}

/// A running source with its model (and, unless read-only, its executor).
pub(super) struct Session {
    tasks: Vec<JoinHandle<()>>,
    pub(super) snapshots: watch::Receiver<Arc<Snapshot>>,
    pub(super) executor: Option<Executor>,
    pub(super) context: Context,
    /// Why actions are off for this source, if they are.
    read_only_reason: Option<String>,
}

impl Drop for Session {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// What every session's executor shares: where it reports, the cancels,
/// where the audit log is.
pub(super) struct Shared {
    pub(super) reports: mpsc::Sender<Progress>,
    pub(super) cancel: watch::Receiver<BTreeSet<ActionId>>,
    pub(super) paths: Paths,
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

pub(super) fn start_demo(scenario: &str, seed: u64, shared: &Shared) -> Result<Session, scenarios::UnknownScenario> {
    let sim = scenarios::build(scenario, seed)?;
    let title = sim.scenario().title.clone();
    let (events_tx, events_rx) = mpsc::channel(1024);
    let (snapshots, model_task) =
        spawn_model(SourceInfo { kind: SourceKind::Demo, name: scenario.to_string() }, events_rx);
    let (handle, sim_task) = driver::spawn(sim, events_tx, Duration::from_secs(1));
    let user = std::env::var("USER").unwrap_or_else(|_| "demo".into());
    let mut exec = executor(Backend::Sim(handle), &snapshots, shared, format!("demo:{scenario}"), user);
    exec.mig_timeout = Duration::from_secs(180);
    Ok(Session {
        tasks: vec![model_task, sim_task],
        snapshots,
        executor: Some(exec),
        context: Context { source: format!("demo:{scenario}"), subtitle: title, production: false },
        read_only_reason: None,
    })
}

pub(super) async fn start_kube(
    target: &client::Target,
    scope: &kube_watch::Scope,
    shared: &Shared,
) -> anyhow::Result<Session> {
    let (client, info) = client::connect(target).await.map_err(|e| UsageError(e.to_string()))?;
    let actions = client::action_client(target).await.map_err(|e| UsageError(e.to_string()))?;
    let (tx, rx) = mpsc::channel(1024);
    let (snapshots, model) = spawn_model(SourceInfo { kind: SourceKind::Kube, name: info.context.clone() }, rx);
    let mut tasks = kube_watch::spawn_all(client, scope.clone(), tx);
    tasks.push(model);
    let exec = executor(Backend::Kube(actions), &snapshots, shared, info.context.clone(), info.user.clone());
    Ok(Session {
        tasks,
        snapshots,
        executor: Some(exec),
        context: Context {
            source: info.context.clone(),
            subtitle: format!(
                "{}{}",
                info.server,
                scope.namespace.as_ref().map_or(String::new(), |n| format!(" · namespace {n}"))
            ),
            production: info.looks_like_production(),
        },
        read_only_reason: None,
    })
}

fn start_file(paths: &[PathBuf]) -> anyhow::Result<Session> {
    let (snap, _, stats) = super::load::files(paths)?;
    let (_tx, snapshots) = watch::channel(Arc::new(snap));
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
    })
}

pub struct CockpitOptions {
    pub source: CockpitSource,
    pub theme: Option<String>,
    pub read_only: bool,
    pub log_level: String,
}

fn build_views(
    snap: Arc<Snapshot>,
    live_clock: bool,
    thresholds: &Thresholds,
    target: &Option<DriverVersion>,
) -> Views {
    let now = if live_clock { crate::clock::wall_clock().max(snap.clock) } else { snap.clock };
    Views::build(snap, now, thresholds, target.as_ref().map(|t| (t, waves::Policy::default())))
}

/// Analyses `snap` on the blocking pool and sends the views back, tagged.
fn spawn_build(
    snap: Arc<Snapshot>,
    live_clock: bool,
    thresholds: &Thresholds,
    target: &Option<DriverVersion>,
    generation: u64,
    tx: &mpsc::Sender<(u64, Views)>,
) {
    let (thresholds, target, tx) = (thresholds.clone(), target.clone(), tx.clone());
    tokio::task::spawn_blocking(move || {
        let views = build_views(snap, live_clock, &thresholds, &target);
        // The receiver is gone only when the cockpit is closing.
        let _ = tx.blocking_send((generation, views));
    });
}

/// Audit entries the Events pane shows.
const AUDIT_ROWS: usize = 50;

/// The session's own entries of the audit log (its context only), newest first.
fn audit_entries(session: &Session) -> Vec<AuditEntry> {
    session
        .executor
        .as_ref()
        .and_then(|e| e.audit.as_ref().map(|log| log.tail(AUDIT_ROWS, &e.context)))
        .unwrap_or_default()
}

fn show_audit(views: &mut Views, audit: &[AuditEntry]) {
    views.set_audit(&audit_rows(audit, crate::clock::wall_clock()));
}

pub async fn run(opts: CockpitOptions) -> anyhow::Result<()> {
    if !std::io::stdout().is_terminal() {
        return Err(UsageError(
            "stdout is not a terminal: the cockpit needs one; for scripts use `kgpu snapshot`".into(),
        )
        .into());
    }
    let paths = Paths::from_env();
    let log_note = super::logging::init(paths.log_file().as_deref(), &opts.log_level);
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    let theme_name = opts.theme.clone().unwrap_or_else(|| ui::theme::DEFAULT.to_string());
    let (mut theme, warnings) = Theme::load(&theme_name, paths.config_dir(), no_color);
    let (progress_tx, mut progress_rx) = mpsc::channel::<Progress>(64);
    let (cancel_tx, cancel_rx) = watch::channel(BTreeSet::new());
    let shared = Shared { reports: progress_tx, cancel: cancel_rx, paths: paths.clone() };
    // Problems with the source are reported before the terminal goes raw.
    let (demo_seed, mut session) = match &opts.source {
        CockpitSource::Demo { scenario, seed } => (Some(*seed), start_demo(scenario, *seed, &shared)?),
        CockpitSource::Kube { target, scope } => (None, start_kube(target, scope, &shared).await?),
        CockpitSource::File(paths) => (None, start_file(paths)?),
    };
    tracing::info!("kgpu cockpit starting on {}", session.context.source);
    let thresholds = Thresholds::default();
    let mut wave_target: Option<DriverVersion> = None;
    let live_clock = matches!(opts.source, CockpitSource::Kube { .. });
    let build =
        |snap: Arc<Snapshot>, target: &Option<DriverVersion>| build_views(snap, live_clock, &thresholds, target);
    let mut views = build(session.snapshots.borrow().clone(), &wave_target);
    let mut audit = audit_entries(&session);
    show_audit(&mut views, &audit);
    // A new app per source; what it should say first reaches it as a message.
    let new_app = |session: &Session, theme: &Theme, views: &Views| {
        let mut app = App::new(opts.read_only || session.read_only_reason.is_some(), &theme.name, demo_seed.is_some());
        if let Some(why) = &session.read_only_reason {
            app.update(Msg::Notice { text: format!("read-only: {why}"), error: false }, views);
        }
        app
    };
    let mut app = new_app(&session, &theme, &views);
    if let Some(w) = warnings.first() {
        app.update(Msg::ThemeLoaded { name: theme.name.clone(), warning: Some(w.clone()) }, &views);
    } else if let Err(e) = &log_note {
        app.update(Msg::Notice { text: e.clone(), error: false }, &views);
    }
    // Model changes are analysed off the input loop, so keys stay responsive
    // on a big fleet; only the newest snapshot is analysed, and a result
    // from before a scenario switch or a new wave target is dropped.
    let (built_tx, mut built_rx) = mpsc::channel::<(u64, Views)>(1);
    let mut generation = 0u64;
    let mut building = false;
    let mut stale = false;

    let mut guard = Guard::enter()?;
    let mut input = EventStream::new();
    let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let mut sighup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())?;
    let mut dirty = true;
    let mut source_gone = false;
    loop {
        if dirty {
            guard.terminal.draw(|f| ui::draw(f, &mut app, &views, &theme, &session.context))?;
            dirty = false;
        }
        // Effects of nested updates join the queue: none is dropped.
        let mut effects = VecDeque::new();
        tokio::select! {
            event = input.next() => match event {
                Some(Ok(Event::Key(key))) if key.kind != KeyEventKind::Release => {
                    effects.extend(app.update(Msg::Key(key), &views));
                    dirty = true;
                }
                Some(Ok(Event::Resize(..))) => dirty = true,
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(anyhow::anyhow!("reading the terminal: {e}")),
                None => break,
            },
            changed = session.snapshots.changed(), if !source_gone => {
                if changed.is_err() {
                    // Files never change; a live source that stops says so.
                    source_gone = true;
                    if session.read_only_reason.is_none() {
                        effects.extend(app.update(Msg::SourceStopped, &views));
                        dirty = true;
                    }
                } else if building {
                    stale = true;
                } else {
                    let snap = session.snapshots.borrow_and_update().clone();
                    spawn_build(snap, live_clock, &thresholds, &wave_target, generation, &built_tx);
                    building = true;
                }
            },
            Some((built_for, built)) = built_rx.recv() => {
                building = false;
                if built_for == generation {
                    // Freeing a big fleet's analysis takes milliseconds: not on the input loop.
                    let old = std::mem::replace(&mut views, built);
                    tokio::task::spawn_blocking(move || drop(old));
                    show_audit(&mut views, &audit);
                    dirty = true;
                }
                if stale {
                    stale = false;
                    let snap = session.snapshots.borrow_and_update().clone();
                    spawn_build(snap, live_clock, &thresholds, &wave_target, generation, &built_tx);
                    building = true;
                }
            },
            Some(progress) = progress_rx.recv() => {
                // A finished action has written its audit line: show it.
                if progress.done {
                    audit = audit_entries(&session);
                    show_audit(&mut views, &audit);
                }
                effects.extend(app.update(Msg::Action(progress), &views));
                dirty = true;
            },
            _ = sigterm.recv() => break,
            _ = sighup.recv() => break,
        }
        while let Some(effect) = effects.pop_front() {
            match effect {
                Effect::Quit => {}
                Effect::Execute { id, request } => match &session.executor {
                    Some(executor) => {
                        let mut executor = executor.clone();
                        executor.id = id;
                        tokio::spawn(async move { executor.run(request).await });
                    }
                    None => {
                        let refused = Progress { id, text: "this source is read-only".into(), error: true, done: true };
                        effects.extend(app.update(Msg::Action(refused), &views));
                    }
                },
                Effect::Cancel(id) => {
                    cancel_tx.send_modify(|cancelled| {
                        cancelled.insert(id);
                    });
                }
                Effect::SwitchScenario(name) => match (demo_seed, start_demo(&name, demo_seed.unwrap_or(1), &shared)) {
                    (Some(_), Ok(s)) => {
                        session = s;
                        generation += 1;
                        views = build(session.snapshots.borrow_and_update().clone(), &wave_target);
                        app = new_app(&session, &theme, &views);
                        audit = audit_entries(&session);
                        show_audit(&mut views, &audit);
                    }
                    (Some(_), Err(e)) => {
                        effects.extend(app.update(Msg::Notice { text: e.to_string(), error: true }, &views));
                    }
                    (None, _) => {}
                },
                Effect::SetTheme(name) => {
                    let (t, warnings) = Theme::load(&name, paths.config_dir(), no_color);
                    theme = t;
                    let loaded = Msg::ThemeLoaded { name: theme.name.clone(), warning: warnings.first().cloned() };
                    effects.extend(app.update(loaded, &views));
                }
                Effect::PlanWaves(target) => {
                    wave_target = target;
                    generation += 1;
                    views = build(session.snapshots.borrow().clone(), &wave_target);
                    show_audit(&mut views, &audit);
                }
            }
            dirty = true;
        }
        if app.quit {
            break;
        }
    }
    drop(guard);
    tracing::info!("kgpu cockpit stopped");
    Ok(())
}
